// One Perfetto packet sequence, written to a PerfettoStream packet by
// packet, with the sequence-scoped state Perfetto's own producers keep so
// that packets stay small:
//   - interning: a string (event name, annotation name or value, function
//     name, ...) or a profiling message (frame, mapping, callstack) is
//     written once, in the interned_data of the first packet on the
//     sequence that uses it, and later packets refer to it by id;
//   - delta timestamps: packets are stamped on an incremental clock
//     (timestamp = nanoseconds since the previous packet on that clock),
//     declared in the sequence's clock snapshot. A packet stamped earlier
//     than that clock uses the latest of a few more incremental clocks that
//     is not later than it, or the absolute monotonic clock when all are;
//   - a default track: a sequence may be given to one track, whose events
//     then name no track;
//   - sequence_flags: the first packet clears the state, every packet that
//     relies on it says so.
// Memory grows with what is interned (distinct names and stacks), not with
// the number of packets.
#ifndef LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_
#define LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "analysis/perfetto_stream.h"
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
  using Strings = PerfettoStream::Strings;
  // Sequence-scoped clock ids (Perfetto reserves 64-127 for them): the
  // default one, and kLateClocks for packets stamped earlier than it.
  static constexpr uint32_t kClock = 64;
  static constexpr size_t kLateClocks = 8;

  explicit PerfettoSequence(PerfettoStream& stream)
      : stream_(stream), id_(stream.NewSequence()) {}

  // The trace's first packet: clears the state, sets the default clock, and
  // the clocks at one instant (monotonic is the trace clock).
  void Start(uint64_t monotonic_ns, uint64_t realtime_ns);
  // The first packet of a sequence given to the track `track_uuid`, its
  // clocks starting at `monotonic_ns`.
  void StartTrack(uint64_t monotonic_ns, uint64_t track_uuid);

  // The id of `text` in `table`, defined by the next packet if new here.
  uint64_t Intern(Strings table, std::string_view text) {
    return Use(table, stream_.Id(table, text));
  }
  // The same for a string given by its id (PerfettoStream::Id).
  uint64_t Use(Strings table, uint64_t id);
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

 private:
  // The first packet; `realtime_ns` and boot time only in the trace's first.
  void Begin(uint64_t monotonic_ns, const uint64_t* realtime_ns, uint64_t track_uuid);
  // The clock to stamp `time_ns` on, and the timestamp there; advances it.
  std::pair<uint32_t, uint64_t> Stamp(uint64_t time_ns);
  void Write();  // packet_, as one more packet of the trace

  PerfettoStream& stream_;
  const uint32_t id_;
  std::string payload_, interned_, packet_;
  std::array<absl::flat_hash_set<uint64_t>, static_cast<size_t>(Strings::kCount)> defined_;
  // The incremental clocks' values: kClock, then the late ones (kClock + 1 + i).
  std::array<uint64_t, 1 + kLateClocks> clocks_ = {};
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_SEQUENCE_H_
