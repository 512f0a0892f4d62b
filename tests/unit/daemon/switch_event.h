// A sched_switch event as the session decodes it from the ring, for tests
// of what the session derives from switches.
#ifndef LOUPE_TESTS_UNIT_DAEMON_SWITCH_EVENT_H_
#define LOUPE_TESTS_UNIT_DAEMON_SWITCH_EVENT_H_

#include <cstdint>

#include "daemon/session/owned_event.h"

namespace loupe::session::testing {

inline OwnedEvent SwitchEvent(uint64_t time_ns, uint32_t prev_tid, uint32_t prev_tgid,
                              uint32_t next_tid, uint32_t next_tgid, uint32_t prev_state) {
  OwnedEvent event;
  event.record = {.time_ns = time_ns,
                  .tid = prev_tid,
                  .cpu = 0,
                  .payload = format::SchedSwitch{next_tid, prev_state}};
  event.prev_tgid = prev_tgid;
  event.next_tgid = next_tgid;
  return event;
}

}  // namespace loupe::session::testing

#endif  // LOUPE_TESTS_UNIT_DAEMON_SWITCH_EVENT_H_
