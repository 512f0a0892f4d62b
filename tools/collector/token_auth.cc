#include "tools/collector/token_auth.h"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "daemon/base/status_util.h"

namespace loupe::collector {
namespace {

constexpr char kLineForm[] = "'<client-name> <token> [upload=<hosts>] [read=<hosts>]'";

// The client of one line, its grants defaulted as token_auth.h says.
absl::StatusOr<Client> ParseGrants(std::string name, std::istringstream& fields) {
  std::optional<HostPatterns> upload, read;
  std::string field;
  while (fields >> field) {
    const size_t equals = field.find('=');
    const std::string key = field.substr(0, equals);
    std::optional<HostPatterns>* grant = key == "upload" ? &upload : key == "read" ? &read : nullptr;
    if (equals == std::string::npos || grant == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("'{}': expected upload=<hosts> or read=<hosts>", field));
    }
    if (grant->has_value()) return absl::InvalidArgumentError(fmt::format("{}= given twice", key));
    absl::StatusOr<HostPatterns> patterns = HostPatterns::Parse(field.substr(equals + 1));
    if (!patterns.ok()) {
      return absl::InvalidArgumentError(fmt::format("{}=: {}", key, MessageOf(patterns.status())));
    }
    *grant = *std::move(patterns);
  }
  if (!upload) {
    upload = HostPatterns::IsHostName(name) ? *HostPatterns::Parse(name) : HostPatterns();
  }
  return Client{std::move(name), *std::move(upload), read.value_or(HostPatterns())};
}

}  // namespace

absl::StatusOr<TokenAuth> TokenAuth::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("tokens file {}: cannot be read", path));
  TokenAuth auth;
  std::vector<int> line_of;  // per entry of clients_, for messages
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string name, token;
    if (!(fields >> name)) continue;
    const std::string where = fmt::format("tokens file {}:{}", path, number);
    if (!(fields >> token) || token.find('=') != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("{}: expected {}", where, kLineForm));
    }
    if (token.size() < 16) {
      return absl::InvalidArgumentError(
          fmt::format("{}: the token of {} is shorter than 16 characters", where, name));
    }
    absl::StatusOr<Client> client = ParseGrants(name, fields);
    if (!client.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {} (a line is {})", where, MessageOf(client.status()), kLineForm));
    }
    for (size_t i = 0; i < auth.clients_.size(); ++i) {
      const auto& [other_token, other] = auth.clients_[i];
      if (other_token == token) {
        return absl::InvalidArgumentError(
            fmt::format("{}: the token of {} is used twice", where, name));
      }
      // Two lines of one client (a token being rotated) may share hosts.
      if (other.name == name) continue;
      if (auto both = client->upload.Overlap(other.upload)) {
        return absl::InvalidArgumentError(fmt::format(
            "{}: client {} may upload as hosts that client {} (line {}) may upload as too "
            "('{}' and '{}' can both match one host name); every host's segments must come from one "
            "client, so give them disjoint upload= patterns",
            where, name, other.name, line_of[i], both->first, both->second));
      }
    }
    auth.clients_.emplace_back(token, *std::move(client));
    line_of.push_back(number);
  }
  if (auth.clients_.empty()) {
    return absl::InvalidArgumentError(fmt::format("tokens file {}: holds no tokens", path));
  }
  return auth;
}

absl::StatusOr<const Client*> TokenAuth::Check(const std::string* authorization) const {
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "no bearer token: send 'authorization: Bearer <token>' (louped: collector_token_file)");
  }
  constexpr std::string_view kScheme = "Bearer ";
  if (!authorization->starts_with(kScheme)) {
    return absl::UnauthenticatedError("the authorization header is not 'Bearer <token>'");
  }
  const std::string_view offered = std::string_view(*authorization).substr(kScheme.size());
  // Compared in constant time, so response timing does not reveal a prefix.
  for (const auto& [token, client] : clients_) {
    if (token.size() == offered.size() &&
        CRYPTO_memcmp(token.data(), offered.data(), token.size()) == 0) {
      return &client;
    }
  }
  return absl::UnauthenticatedError("the bearer token is not one this collector accepts");
}

std::vector<std::string> TokenAuth::Describe() const {
  std::vector<std::string> lines;
  for (const auto& [token, client] : clients_) {
    lines.push_back(fmt::format("client {}: upload={} read={}", client.name,
                                client.upload.ToString(), client.read.ToString()));
  }
  return lines;
}

}  // namespace loupe::collector
