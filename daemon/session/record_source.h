// Where a session's records come from. The pipeline only sees ring-buffer
// records (the bytes of shared/records.h) and loss counters, so the same
// pipeline runs on the kernel's ring (BpfRecordSource) and, in tests and
// investigations, on recorded ring bytes (ReplaySource) without root.
#ifndef LOUPE_DAEMON_SESSION_RECORD_SOURCE_H_
#define LOUPE_DAEMON_SESSION_RECORD_SOURCE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/bpf/sources.h"

namespace loupe::session {

using RecordHandler = std::function<void(std::span<const uint8_t>)>;

class RecordSource {
 public:
  virtual ~RecordSource() = default;
  // Hands every record available now to the handler; returns their bytes.
  virtual absl::StatusOr<size_t> Drain() = 0;
  // No new records after this; what is already there can still be drained.
  virtual void Detach() = 0;
  // Cumulative loss counters of the producing side.
  virtual bpf::BpfCounters ReadCounters() const = 0;
  // Which kernel paths were taken, for the segment header.
  virtual const std::map<std::string, std::string>& features() const = 0;
  virtual const std::vector<std::string>& warnings() const = 0;
  // Warnings that arose while tracing (e.g. a library mapped later that is
  // walked by frame pointers), each handed out once.
  virtual std::vector<std::string> TakeLateWarnings() { return {}; }
  virtual size_t probe_sites() const = 0;
  // The probes' links are for every process, not per target pid.
  virtual bool probes_system_wide() const { return false; }
  // When recording began (CLOCK_MONOTONIC; every record is later), 0 unknown.
  virtual uint64_t recording_since_ns() const { return 0; }
  // The user stack of a target thread asleep now, which slept through the
  // trace (no record has it); nullopt where unknown, as for recorded bytes.
  virtual std::optional<bpf::WalkedStack> AsleepUserStack(uint32_t /*tgid*/, uint32_t /*tid*/) {
    return std::nullopt;
  }
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_RECORD_SOURCE_H_
