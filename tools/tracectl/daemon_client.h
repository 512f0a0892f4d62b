// Talks to louped over its control socket. gRPC stays inside this file's
// implementation so the rest of tracectl compiles without its headers.
#ifndef LOUPE_TOOLS_TRACECTL_DAEMON_CLIENT_H_
#define LOUPE_TOOLS_TRACECTL_DAEMON_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loupe/v1/control.pb.h"

namespace loupe::tracectl {

inline constexpr char kDefaultSocket[] = "/run/loupe/louped.sock";

class DaemonClient {
 public:
  // nullptr when nothing listens on `socket` (embedded mode then); an error
  // when louped is there but this user may not use its socket.
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Connect(const std::string& socket);
  ~DaemonClient();

  absl::StatusOr<v1::AttachResponse> Attach(const v1::AttachRequest& request);
  absl::StatusOr<v1::SessionStatus> Detach(const std::string& session_id);
  // The sessions' figures, and the shipper's when louped ships.
  absl::StatusOr<v1::StatusResponse> Status(const std::string& session_id);
  // Calls `on_update` with the session's figures every `interval_ms` until
  // it ends or `on_update` returns false.
  absl::Status Watch(const std::string& session_id, uint32_t interval_ms,
                     const std::function<bool(const v1::SessionStatus&)>& on_update);

 private:
  struct Stub;
  explicit DaemonClient(std::unique_ptr<Stub> stub);
  std::unique_ptr<Stub> stub_;
};

}  // namespace loupe::tracectl

#endif  // LOUPE_TOOLS_TRACECTL_DAEMON_CLIENT_H_
