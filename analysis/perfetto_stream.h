// What the packet sequences of one Perfetto trace share: the output they
// write their packets to, in batches, and the strings they intern. A string
// has one id for the whole trace; each sequence defines it under that id
// the first time it uses it (Perfetto resolves interned ids per sequence,
// and they need not be dense there), so a string is hashed once per use,
// not once per sequence.
#ifndef LOUPE_ANALYSIS_PERFETTO_STREAM_H_
#define LOUPE_ANALYSIS_PERFETTO_STREAM_H_

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/perfetto_deflate.h"

namespace loupe::analysis {

// How packets reach the output: as they are, or in deflated batches
// (analysis/perfetto_deflate.h).
enum class PerfettoCompression : uint8_t { kNone, kDeflate };

class PerfettoStream {
 public:
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

  PerfettoStream(std::ostream& out, PerfettoCompression compression);
  ~PerfettoStream() { Flush(); }

  // The id of `text` in `table`, for every sequence.
  uint64_t Id(Strings table, std::string_view text);
  std::string_view Text(Strings table, uint64_t id) const {
    return texts_[static_cast<size_t>(table)][id - 1];
  }

  // A new sequence's trusted_packet_sequence_id.
  uint32_t NewSequence() { return ++sequences_; }

  // Packets are appended here, then Written() (passed on once a batch is full).
  std::string& pending() { return pending_; }
  void Written() {
    if (pending_.size() >= batch_bytes_) Pass();
  }
  // Everything appended, written to the output.
  void Flush();

  // Exact after Flush; until then, packets not yet written count uncompressed.
  uint64_t bytes_written() const {
    return (deflate_ ? deflate_->bytes_written() : bytes_written_) + pending_.size();
  }

 private:
  static constexpr size_t kTables = static_cast<size_t>(Strings::kCount);

  void Pass();  // the pending batch, to the output or the compressor

  std::ostream& out_;
  const std::unique_ptr<PerfettoDeflate> deflate_;  // null: not compressed
  const size_t batch_bytes_;
  std::string pending_;
  uint64_t bytes_written_ = 0;
  uint32_t sequences_ = 0;
  std::array<std::deque<std::string>, kTables> storage_;  // stable: the maps' keys point in
  std::array<std::vector<std::string_view>, kTables> texts_;  // by id - 1
  std::array<absl::flat_hash_map<std::string_view, uint64_t>, kTables> ids_;
};

}  // namespace loupe::analysis

#endif  // LOUPE_ANALYSIS_PERFETTO_STREAM_H_
