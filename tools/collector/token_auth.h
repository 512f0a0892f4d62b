// Bearer tokens, one per client, and what each client may do, from a file of
// lines ('#' starts a comment):
//
//   <client-name> <token> [upload=<patterns>] [read=<patterns>]
//
// upload: the hosts whose segments the client may store (a segment's host
// is its header's); read: the hosts whose segments it may list and fetch.
// Patterns are HostPatterns (`web-*,db-1`); an empty list grants nothing.
// A line without upload= may upload only as the host named like the client;
// without read= it reads nothing. Every call must carry
// `authorization: Bearer <token>`.
//
// Upload grants of different clients must not overlap: every host's
// segments then come from one client, so no client can store, stage or
// pre-empt a segment under another client's identity.
#ifndef LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_
#define LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/collector/host_patterns.h"

namespace loupe::collector {

struct Client {
  std::string name;
  HostPatterns upload;
  HostPatterns read;
};

class TokenAuth {
 public:
  static absl::StatusOr<TokenAuth> Load(const std::string& path);
  // The client whose token the `authorization` metadata value carries, or
  // UNAUTHENTICATED saying what was wrong with it.
  absl::StatusOr<const Client*> Check(const std::string* authorization) const;
  // One line per token: the client and its grants, for the start-up log.
  std::vector<std::string> Describe() const;

 private:
  std::vector<std::pair<std::string, Client>> clients_;  // (token, client)
};

}  // namespace loupe::collector

#endif  // LOUPE_TOOLS_COLLECTOR_TOKEN_AUTH_H_
