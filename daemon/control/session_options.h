// The one place a session's options are made: defaults (louped's config, or
// tracectl's own in embedded mode) + what the caller asked (an
// AttachRequest, which tracectl also builds from its flags) + who the caller
// is. louped's Attach, tracectl's embedded attach and louped's
// --check-config all go through BuildSessionOptions, so what one accepts the
// others accept, and a refusal reads the same everywhere.
#ifndef LOUPE_DAEMON_CONTROL_SESSION_OPTIONS_H_
#define LOUPE_DAEMON_CONTROL_SESSION_OPTIONS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "daemon/session/session.h"
#include "loupe/v1/control.pb.h"

namespace loupe::control {

// Who asks for the session.
struct AttachCaller {
  // Whose PID namespace numbers the request's pids; 0: this process's own.
  uint32_t pid = 0;
  uint32_t uid = 0;  // root may trace anything, others only their own processes
  uint32_t gid = 0;
  // The session runs inside the caller's own process (tracectl's embedded
  // mode): its files are made with the caller's rights already.
  bool in_process = false;
};

// The defaults of tracectl's embedded mode: the engine's, with segments in
// ./loupe-traces.
session::SessionOptions EmbeddedDefaults();

// `defaults` with every field the request sets applied on top, for
// `caller`, then validated (session::ValidateSessionOptions): an error names
// the request field or config key and what is allowed. A caller other than
// root (outside its own process) gets no larger ring than the defaults' and
// no kernel stacks (said in the options' notes). The request must
// name the session (session_id): the caller picks the name, since only it
// knows which names are taken.
absl::StatusOr<session::SessionOptions> BuildSessionOptions(const session::SessionOptions& defaults,
                                                            const v1::AttachRequest& request,
                                                            const AttachCaller& caller);

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_SESSION_OPTIONS_H_
