#include "daemon/ship/collector_target.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <vector>

namespace loupe::ship {
namespace {

enum class Family { kIpv4, kIpv6 };

std::string_view Trimmed(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

bool IsPort(std::string_view text) {
  unsigned port = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  return error == std::errc() && end == text.data() + text.size() && port >= 1 && port <= 65535;
}

// The address family of one list item, "a.b.c.d:port" or "[v6]:port".
absl::StatusOr<Family> FamilyOf(std::string_view item, std::string_view list) {
  const size_t colon = item.rfind(':');
  std::string host(item.substr(0, colon == std::string_view::npos ? item.size() : colon));
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  unsigned char address[16];
  const bool ipv4 = !bracketed && inet_pton(AF_INET, host.c_str(), address) == 1;
  const bool ipv6 = bracketed && inet_pton(AF_INET6, host.c_str(), address) == 1;
  if (colon == std::string_view::npos || !IsPort(item.substr(colon + 1)) || !(ipv4 || ipv6)) {
    return absl::InvalidArgumentError(fmt::format(
        "collector '{}': '{}' is not <IPv4>:<port> or [<IPv6>]:<port>; a list takes IP "
        "addresses (for names, give one DNS name whose addresses are the collectors)",
        list, item));
  }
  return ipv4 ? Family::kIpv4 : Family::kIpv6;
}

// A gRPC target of another scheme ("unix-abstract:name", "vsock:cid:port",
// "xds:///name"): a scheme, then something that is no port number.
bool IsOtherScheme(std::string_view item) {
  const size_t colon = item.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  const std::string_view scheme = item.substr(0, colon);
  const std::string_view rest = item.substr(colon + 1);
  return std::isalpha(static_cast<unsigned char>(scheme.front())) &&
         scheme.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789+-.") ==
             std::string_view::npos &&
         !rest.empty() && !std::isdigit(static_cast<unsigned char>(rest.front()));
}

// One "host:port": a name or an IP address ([v6] in brackets) and a port;
// gRPC would otherwise take a missing port as 443, not the collector's.
absl::Status CheckOneAddress(std::string_view item) {
  if (IsOtherScheme(item)) return absl::OkStatus();
  const size_t colon = item.rfind(':');
  const std::string_view host = item.substr(0, colon == std::string_view::npos ? 0 : colon);
  const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
  if (colon == std::string_view::npos || host.empty() || !IsPort(item.substr(colon + 1)) ||
      (!bracketed && host.find_first_of(":[]") != std::string_view::npos)) {
    return absl::InvalidArgumentError(fmt::format(
        "collector '{}': not <host>:<port> with a port in 1 .. 65535 (an IPv6 address goes in "
        "brackets: [::1]:7470)",
        item));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ChannelTarget(std::string_view collectors) {
  collectors = Trimmed(collectors);
  if (collectors.empty()) {
    return absl::InvalidArgumentError("collector: no address (host:port) given");
  }
  constexpr std::array<std::string_view, 4> kSchemes = {"dns:", "ipv4:", "ipv6:", "unix:"};
  for (std::string_view scheme : kSchemes) {
    if (collectors.starts_with(scheme)) return std::string(collectors);
  }
  if (collectors.find(',') == std::string_view::npos) {
    if (absl::Status status = CheckOneAddress(collectors); !status.ok()) return status;
    return std::string(collectors);
  }

  std::vector<std::string_view> items;
  std::optional<Family> family;
  std::string_view rest = collectors;
  for (bool more = true; more;) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trimmed(rest.substr(0, comma));
    more = comma != std::string_view::npos;
    rest.remove_prefix(more ? comma + 1 : rest.size());
    absl::StatusOr<Family> of = FamilyOf(item, collectors);
    if (!of.ok()) return of.status();
    // gRPC's static targets hold one family: ipv4:a,b or ipv6:a,b.
    if (family && *of != *family) {
      return absl::InvalidArgumentError(fmt::format(
          "collector '{}': mixes IPv4 and IPv6 addresses; give one family", collectors));
    }
    family = *of;
    items.push_back(item);
  }
  return fmt::format("{}:{}", *family == Family::kIpv4 ? "ipv4" : "ipv6", fmt::join(items, ","));
}

std::string_view CollectorServiceConfig() {
  // Retrying is safe for every call: a call is retried only until its first
  // reply arrives, and an upload sends nothing after its begin before that
  // (the reply says where to continue). An upload cut later is the
  // shipper's to repeat: it backs off, then resumes on whichever collector
  // the balancer picks, from the bytes the shared store holds.
  return R"json({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "loupe.v1.Collector"}],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json";
}

}  // namespace loupe::ship
