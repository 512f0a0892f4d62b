// One Perfetto packet sequence, written to a stream packet by packet, with
// the sequence-scoped state Perfetto's own producers keep so that packets
// stay small:
//   - interning: a string (event name, annotation name or value, function
//     name, ...) or a profiling message (frame, mapping, callstack) is
//     written once, in the interned_data of the first packet that uses it,
//     and later packets refer to it by id;
//   - delta timestamps: packets are stamped on an incremental clock
//     (timestamp = nanoseconds since the previous packet on that clock),
//     declared in the first packet's clock snapshot. A packet stamped earlier
//     than that clock (a slice begin written when the slice ends) uses the
//     latest of a few more incremental clocks that is not later than it, or
//     the absolute monotonic clock when all are;
//   - sequence_flags: the first packet clears the state, every packet that
//     relies on it says so.
// Memory grows with what is interned (distinct names and stacks), not with
// the number of packets.
#ifndef LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_
#define LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "analysis/proto_builder.h"

namespace loupe::analysis {

// Field numbers of Perfetto's trace format (protos/perfetto/trace/) that
// more than one file writes.
namespace perfetto_field {
inline constexpr uint32_t kTrackEvent = 11;       // TracePacket
inline constexpr uint32_t kTrackDescriptor = 60;  // TracePacket
inline constexpr uint32_t kPerfSample = 66;       // TracePacket
inline constexpr uint32_t kInternedFrames = 6;    // InternedData
inline constexpr uint32_t kInternedCallstacks = 7;
inline constexpr uint32_t kInternedMappings = 19;
}  // namespace perfetto_field

class PerfettoSequence {
 public:
  static constexpr uint32_t kSequenceId = 1;
  // Sequence-scoped clock ids (Perfetto reserves 64-127 for them): the
  // default one, and kLateClocks for packets stamped earlier than it.
  static constexpr uint32_t kClock = 64;
  static constexpr size_t kLateClocks = 8;

  // Interned string tables. Each is an InternedData field of messages of
  // one shape, {iid = 1, string = 2}.
  enum class Strings : uint8_t {
    kEventNames,
    kAnnotationNames,
    kFunctionNames,
    kMappingPaths,
    kBuildIds,
    kAnnotationValues,
    kCount
  };

  explicit PerfettoSequence(std::ostream& out) : out_(out) {}
  ~PerfettoSequence();  // flushes

  // The first packet: clears the state, sets the default clock, and the
  // clocks at one instant (monotonic is the trace clock).
  void Start(uint64_t monotonic_ns, uint64_t realtime_ns);

  // The id of `text` in `table`; a new one is defined by the next packet.
  uint64_t Intern(Strings table, std::string_view text);
  // Where to write an interned message of another shape (a frame, a
  // mapping, a callstack) that the next packet defines; the caller numbers it.
  ProtoBuilder Interned() { return ProtoBuilder(&interned_); }

  // The next packet's payload (a TrackEvent, a PerfSample, ...), emptied.
  ProtoBuilder Payload() {
    payload_.clear();
    return ProtoBuilder(&payload_);
  }
  // Writes the payload as TracePacket field `field`, stamped with `time_ns`
  // (monotonic), with the interned data it introduced.
  void Emit(uint64_t time_ns, uint32_t field);
  // Writes `payload`, which depends on no state and no time (a track
  // descriptor), as TracePacket field `field`. It may be written while the
  // next packet's payload is being built.
  void EmitPlain(uint32_t field, std::string_view payload);
  // Packets are written to the stream in batches.
  void Flush();

  uint64_t bytes_written() const { return bytes_written_ + pending_.size(); }

 private:
  // The clock to stamp `time_ns` on, and the timestamp there; advances it.
  std::pair<uint32_t, uint64_t> Stamp(uint64_t time_ns);
  void Write();  // packet_, as one more packet of the trace

  std::ostream& out_;
  std::string payload_, interned_, packet_, pending_;
  std::array<absl::flat_hash_map<std::string, uint64_t>, static_cast<size_t>(Strings::kCount)>
      strings_;
  // The incremental clocks' values: kClock, then the late ones (kClock + 1 + i).
  std::array<uint64_t, 1 + kLateClocks> clocks_ = {};
  uint64_t bytes_written_ = 0;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_
