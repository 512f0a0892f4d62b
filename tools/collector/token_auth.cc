#include "tools/collector/token_auth.h"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <fstream>
#include <sstream>

namespace loupe::collector {

absl::StatusOr<TokenAuth> TokenAuth::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("tokens file {}: cannot be read", path));
  TokenAuth auth;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string client, token, extra;
    if (!(fields >> client)) continue;
    if (!(fields >> token) || (fields >> extra)) {
      return absl::InvalidArgumentError(
          fmt::format("tokens file {}:{}: expected '<client-name> <token>'", path, number));
    }
    if (token.size() < 16) {
      return absl::InvalidArgumentError(fmt::format(
          "tokens file {}:{}: the token of {} is shorter than 16 characters", path, number, client));
    }
    if (!auth.client_by_token_.emplace(token, client).second) {
      return absl::InvalidArgumentError(
          fmt::format("tokens file {}:{}: the token of {} is used twice", path, number, client));
    }
  }
  if (auth.client_by_token_.empty()) {
    return absl::InvalidArgumentError(fmt::format("tokens file {}: holds no tokens", path));
  }
  return auth;
}

absl::StatusOr<std::string> TokenAuth::Check(const std::string* authorization) const {
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
  for (const auto& [token, client] : client_by_token_) {
    if (token.size() == offered.size() &&
        CRYPTO_memcmp(token.data(), offered.data(), token.size()) == 0) {
      return client;
    }
  }
  return absl::UnauthenticatedError("the bearer token is not one this collector accepts");
}

}  // namespace loupe::collector
