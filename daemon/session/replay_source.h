// Recorded ring bytes as a record source: each Drain hands over the next
// batch, exactly as the kernel ring handed it to the session that recorded
// it, and the loss counters move as they did then.
#ifndef LOUPE_DAEMON_SESSION_REPLAY_SOURCE_H_
#define LOUPE_DAEMON_SESSION_REPLAY_SOURCE_H_

#include <vector>

#include "daemon/session/record_source.h"
#include "daemon/session/ring_capture.h"

namespace loupe::session {

class ReplaySource final : public RecordSource {
 public:
  ReplaySource(std::vector<RingBatch> batches, RecordHandler handler)
      : batches_(std::move(batches)), handler_(std::move(handler)) {}

  absl::StatusOr<size_t> Drain() override;
  // Detaching a replay only marks the end; batches not yet drained still
  // come, as records already in a ring do.
  void Detach() override { detached_ = true; }
  bpf::BpfCounters ReadCounters() const override { return counters_; }
  const std::map<std::string, std::string>& features() const override { return features_; }
  const std::vector<std::string>& warnings() const override { return warnings_; }
  size_t probe_sites() const override { return 0; }

  bool exhausted() const { return next_ == batches_.size(); }
  bool detached() const { return detached_; }

 private:
  std::vector<RingBatch> batches_;
  RecordHandler handler_;
  size_t next_ = 0;
  bool detached_ = false;
  bpf::BpfCounters counters_{};
  std::map<std::string, std::string> features_{{"source", "replay"}};
  std::vector<std::string> warnings_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_REPLAY_SOURCE_H_
