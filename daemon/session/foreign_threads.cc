#include "daemon/session/foreign_threads.h"

#include <fstream>
#include <span>

#include "daemon/base/proc_root.h"

namespace loupe::session {

ForeignThreads::ForeignThreads(IsTarget is_target, ReadProcessName read)
    : is_target_(std::move(is_target)), read_process_name_(std::move(read)) {}

std::string ForeignThreads::ReadProcComm(uint32_t pid) {
  std::ifstream in(ProcPath(pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return name;
}

std::vector<OwnedEvent> ForeignThreads::Describe(const OwnedEvent& event) {
  std::vector<OwnedEvent> made;
  // BPF names only the sides it did not take for targets, never the idle
  // task nor an interrupted one: a switch between targets, or a wakeup by a
  // target, has nothing to describe.
  if (event.prev_comm.empty() && event.next_comm.empty()) return made;
  const format::Record& at = event.record;
  Side sides[2] = {{at.time_ns, at.cpu, at.tid, event.prev_tgid, event.prev_comm}};
  size_t count = 1;  // a wakeup's waker; its woken is a target
  if (const auto* change = std::get_if<format::SchedSwitch>(&event.record.payload)) {
    sides[count++] = {at.time_ns, at.cpu, change->next_tid, event.next_tgid, event.next_comm};
  } else if (!std::holds_alternative<format::SchedWakeup>(event.record.payload)) {
    return made;
  }
  bool foreign_seen = false;
  for (const Side& side : std::span(sides, count)) {
    if (side.tid == 0 || side.comm.empty() || is_target_(side.tgid)) continue;
    if (!foreign_seen) last_.clear();
    foreign_seen = true;
    last_.push_back(side);
    auto [known, inserted] = described_.try_emplace(side.tid, side.comm);
    if (!inserted && known->second == side.comm) continue;
    known->second = side.comm;
    made.push_back(Info(side));
  }
  return made;
}

std::vector<OwnedEvent> ForeignThreads::StartSegment() {
  described_.clear();
  std::vector<OwnedEvent> made;
  for (const Side& side : last_) {
    described_[side.tid] = side.comm;
    made.push_back(Info(side));
  }
  return made;
}

OwnedEvent ForeignThreads::Info(const Side& side) {
  OwnedEvent info;
  info.record = {.time_ns = side.time_ns,
                 .tid = side.tid,
                 .cpu = side.cpu,
                 .payload = format::ThreadInfo{.pid = side.tgid, .foreign = true}};
  info.text = side.comm.view();
  info.extras().value_text = ProcessName(side.tgid);
  return info;
}

const std::string& ForeignThreads::ProcessName(uint32_t tgid) {
  auto it = process_names_.find(tgid);
  if (it != process_names_.end()) return it->second;
  if (process_names_.size() >= kMaxProcessNames) process_names_.clear();
  return process_names_.emplace(tgid, read_process_name_(tgid)).first->second;
}

}  // namespace loupe::session
