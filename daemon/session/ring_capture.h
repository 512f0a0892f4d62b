// Ring bytes on disk: what a session drained, batch by batch, with the BPF
// loss counters as they stood after each batch. A capture replays through
// ReplaySource into the same pipeline, so a trace's derivation (order,
// off-CPU intervals, losses) can be reproduced and tested without root.
//
// Layout (little endian): the 8-byte magic, then entries. An entry is a
// u32 length and that many record bytes, or kBatchEnd followed by
// LOUPE_CNT_MAX u64 counters.
#ifndef LOUPE_DAEMON_SESSION_RING_CAPTURE_H_
#define LOUPE_DAEMON_SESSION_RING_CAPTURE_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bpf/sources.h"

namespace loupe::session {

// The last byte is the record layout's version (bpf/shared/records.h): 2
// since switch records carry the run delay.
inline constexpr char kRingCaptureMagic[8] = {'L', 'O', 'U', 'P', 'R', 'N', 'G', '2'};

// One drain: its records in ring order and the counters after it.
struct RingBatch {
  std::vector<std::vector<uint8_t>> records;
  bpf::BpfCounters counters{};
};

class RingCaptureWriter {
 public:
  static absl::StatusOr<std::unique_ptr<RingCaptureWriter>> Create(const std::string& path);
  ~RingCaptureWriter();
  void Record(std::span<const uint8_t> bytes);
  // Ends a batch; false (once logged by the caller) when the file failed.
  absl::Status EndBatch(const bpf::BpfCounters& counters);

 private:
  RingCaptureWriter(std::string path, FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  FILE* file_;
  bool failed_ = false;
};

// The whole capture; a cut or malformed file is an error naming the offset.
absl::StatusOr<std::vector<RingBatch>> ReadRingCapture(const std::string& path);

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_RING_CAPTURE_H_
