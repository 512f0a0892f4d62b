// The gRPC Control service: maps each call to the session manager with the
// caller's socket credentials, and each Status to a gRPC status (the one
// place that mapping happens in the daemon).
#ifndef LOUPE_DAEMON_CONTROL_CONTROL_SERVICE_H_
#define LOUPE_DAEMON_CONTROL_CONTROL_SERVICE_H_

#include <functional>

#include "daemon/control/peer_listener.h"
#include "daemon/control/session_manager.h"
#include "loupe/v1/control.grpc.pb.h"

namespace loupe::control {

class ControlService final : public v1::Control::Service {
 public:
  // `shipping` reports the shipper's state; unset when nothing is shipped.
  ControlService(SessionManager* sessions, const PeerListener* peers,
                 std::function<v1::ShippingStatus()> shipping = {})
      : sessions_(sessions), peers_(peers), shipping_(std::move(shipping)) {}

  grpc::Status Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                      v1::AttachResponse* response) override;
  grpc::Status Detach(grpc::ServerContext* context, const v1::DetachRequest* request,
                      v1::DetachResponse* response) override;
  grpc::Status Status(grpc::ServerContext* context, const v1::StatusRequest* request,
                      v1::StatusResponse* response) override;
  grpc::Status List(grpc::ServerContext* context, const v1::ListRequest* request,
                    v1::ListResponse* response) override;
  grpc::Status WatchStats(grpc::ServerContext* context, const v1::WatchStatsRequest* request,
                          grpc::ServerWriter<v1::SessionStatus>* writer) override;

 private:
  SessionManager* sessions_;
  const PeerListener* peers_;
  std::function<v1::ShippingStatus()> shipping_;
};

}  // namespace loupe::control

#endif  // LOUPE_DAEMON_CONTROL_CONTROL_SERVICE_H_
