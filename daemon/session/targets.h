// The processes a session traces: resolved from the caller's pids, kept
// current from the trace itself (threads started and named, children
// followed, execs, exits), and written at the start of every segment so
// each segment reads alone.
#ifndef LOUPE_DAEMON_SESSION_TARGETS_H_
#define LOUPE_DAEMON_SESSION_TARGETS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/format/segment_writer.h"
#include "daemon/session/owned_event.h"
#include "daemon/session/proc.h"

namespace loupe::session {

// A process and its threads as trace records at `time_ns`.
std::vector<format::Record> Describe(const ProcessIdentity& process, uint64_t time_ns);

class Targets {
 public:
  // Told when a target gets a new address space (a followed child, with
  // the parent it was forked from; an exec, with 0), so its mappings are
  // read while they are still there.
  using AddressSpaceChanged =
      std::function<void(uint32_t pid, uint32_t forked_from, uint64_t time_ns)>;
  // Told when a target process has exited (for the log).
  using Exited = std::function<void(const ProcessIdentity& process, int32_t exit_code)>;

  // Told when a process becomes a target after the session started (a
  // followed child), so the trace describes it where it appears.
  using Added = std::function<void(const ProcessIdentity& process, uint64_t time_ns)>;

  // `caller_pid` names the PID namespace of `pids` (0: ours); a caller that
  // is not root (`caller_uid`) may name only its own processes. With
  // `descendants`, the living children of each (and theirs) are targets too;
  // those a caller that is not root does not own are left out, with a note.
  static absl::StatusOr<Targets> Resolve(const std::vector<uint32_t>& pids, uint32_t caller_pid,
                                         uint32_t caller_uid, bool descendants);
  // Known identities, as a replayed trace has them.
  explicit Targets(std::map<uint32_t, ProcessIdentity> processes = {})
      : processes_(std::move(processes)) {}

  // Reads every target again, dropping those that exited (or whose pid was
  // reused) since they were resolved.
  void Refresh();
  // Keeps the table current from a released event, in time order.
  void Track(OwnedEvent& event);
  void WritePreamble(format::SegmentWriter& writer) const;

  void set_follow_children(bool follow) { follow_children_ = follow; }
  void set_address_space_changed(AddressSpaceChanged callback) {
    address_space_changed_ = std::move(callback);
  }
  void set_exited(Exited callback) { exited_ = std::move(callback); }
  void set_added(Added callback) { added_ = std::move(callback); }

  bool contains(uint32_t tgid) const { return processes_.contains(tgid); }
  const std::map<uint32_t, ProcessIdentity>& processes() const { return processes_; }
  bool empty() const { return processes_.empty(); }
  std::vector<uint32_t> pids() const;
  // What Resolve left out, for the session's warnings.
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  void OnFork(const OwnedEvent& event, const format::ProcessFork& fork);

  std::map<uint32_t, ProcessIdentity> processes_;  // live targets by global pid
  bool follow_children_ = false;
  AddressSpaceChanged address_space_changed_;
  Exited exited_;
  Added added_;
  std::vector<std::string> notes_;
};

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_TARGETS_H_
