// The uprobes of one session: the probes BPF object (sharing the session's
// ring, targets and counters) and its links: one per file, program and
// process, of at most kMaxSitesPerLink sites, where the kernel has
// multi-uprobe links (uprobe_multi.h), else one per site. A site that cannot
// be attached becomes a warning; the others still run.
#ifndef LOUPE_DAEMON_BPF_PROBE_LINKS_H_
#define LOUPE_DAEMON_BPF_PROBE_LINKS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/probes/probe_plan.h"

struct bpf_map;

namespace loupe::bpf {

// Sites per multi link (see PlacementPacer in probe_links.cc); per-site
// links are paced the same way.
inline constexpr size_t kMaxSitesPerLink = 16;

struct SessionMaps {
  const bpf_map* events;
  const bpf_map* targets;
  const bpf_map* counters;
};

// Makes `mine` use the session's maps (before `mine`'s object is loaded).
absl::Status ShareSessionMaps(const SessionMaps& session, const SessionMaps& mine);

class ProbeLinks {
 public:
  // `system_wide`: attach for every process (filtering targets in BPF), so
  // that children forked later are traced too. `usdt_string_cap`: bytes
  // kept of a USDT string argument.
  static absl::StatusOr<std::unique_ptr<ProbeLinks>> Attach(const probes::ProbePlan& plan,
                                                            bool system_wide,
                                                            uint32_t usdt_string_cap,
                                                            const SessionMaps& session,
                                                            std::vector<std::string>* warnings);
  ~ProbeLinks();
  size_t attached() const;
  // Whether the sites were placed under a real-time policy (which needs
  // CAP_SYS_NICE or an RLIMIT_RTPRIO of at least 1); without it the
  // target's threads may wait a time slice on its mmap_lock while a site is
  // placed or removed.
  bool linked_in_real_time() const { return linked_in_real_time_; }
  // No more records from any site, at once; the sites stay placed.
  void StopRecording();
  void Detach();

 private:
  struct Objects;
  ProbeLinks();
  void AttachMulti(const probes::ProbePlan& plan, bool system_wide,
                   std::vector<std::string>* warnings);
  void AttachEach(const probes::ProbePlan& plan, bool system_wide,
                  std::vector<std::string>* warnings);
  std::unique_ptr<Objects> objects_;
  bool linked_in_real_time_ = false;
};

}  // namespace loupe::bpf

#endif  // LOUPE_DAEMON_BPF_PROBE_LINKS_H_
