// Bearer tokens, one per client, from a file of lines `<client-name> <token>`
// ('#' starts a comment). Every call must carry `authorization: Bearer <t>`.
#ifndef LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_
#define LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace loupe::collector {

class TokenAuth {
 public:
  static absl::StatusOr<TokenAuth> Load(const std::string& path);
  // The client's name for the `authorization` metadata value, or
  // UNAUTHENTICATED saying what was wrong with it.
  absl::StatusOr<std::string> Check(const std::string* authorization) const;
  size_t clients() const { return client_by_token_.size(); }

 private:
  std::map<std::string, std::string> client_by_token_;
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_
