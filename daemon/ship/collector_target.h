// Where the collectors are, as louped's `collector` setting and tracectl's
// --collector give it, turned into one gRPC channel target:
//   collector.example:7470        one name; every address it resolves to is used
//   10.0.0.5:7470,10.0.0.6:7470   a list of IP addresses ([v6]:port for IPv6)
//   dns:///…, ipv4:…, ipv6:…      a gRPC target, taken as it is
// The channel balances calls over all addresses round robin and retries a
// call that could not reach a collector (collector_connection.cc), so an
// upload cut on one collector resumes on another that shares its store.
#ifndef LOUPE_DAEMON_SHIP_COLLECTOR_TARGET_H_
#define LOUPE_DAEMON_SHIP_COLLECTOR_TARGET_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loupe::ship {

absl::StatusOr<std::string> ChannelTarget(std::string_view collectors);

// The channel's service config: round robin, and retries of calls that
// found no collector (UNAVAILABLE before any reply).
std::string_view CollectorServiceConfig();

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_COLLECTOR_TARGET_H_
