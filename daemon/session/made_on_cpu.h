// Records a thread makes itself (a sample of it running, its probes and
// shim events, its exec and its exit): it was on a CPU at their time,
// whatever the switch stream says.
#ifndef LOUPE_DAEMON_SESSION_MADE_ON_CPU_H_
#define LOUPE_DAEMON_SESSION_MADE_ON_CPU_H_

#include "daemon/format/record.h"

namespace loupe::session {

bool MadeOnCpu(const format::Record& record);
// The thread that made it: the record's tid, but for an exec the thread
// that called it (a thread other than the main one takes the main one's tid).
uint32_t MakerOf(const format::Record& record);

}  // namespace loupe::session

#endif  // LOUPE_DAEMON_SESSION_MADE_ON_CPU_H_
