// The kernel as a record source: a session's BPF objects and ring buffer.
#ifndef LOUPE_DAEMON_SESSION_BPF_RECORD_SOURCE_H_
#define LOUPE_DAEMON_SESSION_BPF_RECORD_SOURCE_H_

#include <memory>

#include "daemon/bpf/sources.h"
#include "daemon/session/record_source.h"

namespace loupe::session {

class BpfRecordSource final : public RecordSource {
 public:
  static absl::StatusOr<std::unique_ptr<BpfRecordSource>> Start(
      const bpf::SourceOptions& options, const std::vector<uint32_t>& tgids,
      RecordHandler handler, const probes::ProbePlan& plan);

  absl::StatusOr<size_t> Drain() override { return sources_->Drain(); }
  void Detach() override { sources_->Detach(); }
  bpf::BpfCounters ReadCounters() const override { return sources_->ReadCounters(); }
  const std::map<std::string, std::string>& features() const override {
    return sources_->features();
  }
  const std::vector<std::string>& warnings() const override { return sources_->warnings(); }
  std::vector<std::string> TakeLateWarnings() override { return sources_->TakeLateWarnings(); }
  size_t probe_sites() const override { return sources_->probe_sites(); }
  bool probes_system_wide() const override { return sources_->probes_system_wide(); }
  uint64_t recording_since_ns() const override { return sources_->recording_since_ns(); }
  std::optional<bpf::WalkedStack> AsleepUserStack(uint32_t tgid, uint32_t tid) override {
    return sources_->AsleepUserStack(tgid, tid);
  }

 private:
  explicit BpfRecordSource(std::unique_ptr<bpf::Sources> sources) : sources_(std::move(sources)) {}
  std::unique_ptr<bpf::Sources> sources_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_BPF_RECORD_SOURCE_H_
