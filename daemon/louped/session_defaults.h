// louped's configuration as sessions see it: the defaults every attach
// starts from, and the check that the effective settings are ones an attach
// accepts (--check-config, and louped before it serves), made by the same
// options builder an attach goes through.
#ifndef LOUPE_DAEMON_LOUPED_SESSION_DEFAULTS_H_
#define LOUPE_DAEMON_LOUPED_SESSION_DEFAULTS_H_

#include "absl/status/status.h"
#include "daemon/louped/config.h"
#include "daemon/session/session.h"

namespace loupe::louped {

session::SessionOptions SessionDefaults(const DaemonConfig& config);

// OK when an attach naming nothing but a pid would be accepted with these
// settings, and louped could serve them (its socket group exists, proc_root
// is a procfs, output_dir is a directory or can be made); else the first
// problem, naming its config key. --check-config and startup both use it.
absl::Status CheckEffectiveConfig(const DaemonConfig& config);

}  // namespace loupe::louped

#endif  // LOUPE_DAEMON_LOUPED_SESSION_DEFAULTS_H_
