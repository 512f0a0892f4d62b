#include "daemon/session/bpf_record_source.h"

namespace loupe::session {

absl::StatusOr<std::unique_ptr<BpfRecordSource>> BpfRecordSource::Start(
    const bpf::SourceOptions& options, const std::vector<uint32_t>& tgids, RecordHandler handler,
    const probes::ProbePlan& plan) {
  absl::StatusOr<std::unique_ptr<bpf::Sources>> sources =
      bpf::Sources::Start(options, tgids, std::move(handler), plan);
  if (!sources.ok()) return sources.status();
  return std::unique_ptr<BpfRecordSource>(new BpfRecordSource(*std::move(sources)));
}

}  // namespace loupe::session
