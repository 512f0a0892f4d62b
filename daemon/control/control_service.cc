#include "daemon/control/control_service.h"

#include <chrono>
#include <thread>

#include "daemon/base/status_util.h"

namespace loupe::control {
namespace {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(MessageOf(status)));
}

// Calls arrive only over the listener's connections; one without known
// credentials is refused rather than trusted.
absl::StatusOr<PeerCredentials> Caller(const PeerListener* peers,
                                       const grpc::ServerContext* context) {
  std::optional<PeerCredentials> caller = peers->Lookup(context->peer());
  if (!caller) {
    return absl::UnauthenticatedError("louped: the caller's credentials are unknown");
  }
  return *caller;
}

}  // namespace

grpc::Status ControlService::Attach(grpc::ServerContext* context, const v1::AttachRequest* request,
                                    v1::AttachResponse* response) {
  absl::StatusOr<PeerCredentials> caller = Caller(peers_, context);
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<v1::AttachResponse> attached = sessions_->Attach(*request, *caller);
  if (!attached.ok()) return ToGrpc(attached.status());
  *response = *std::move(attached);
  return grpc::Status::OK;
}

grpc::Status ControlService::Detach(grpc::ServerContext* context, const v1::DetachRequest* request,
                                    v1::DetachResponse* response) {
  absl::StatusOr<PeerCredentials> caller = Caller(peers_, context);
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<v1::SessionStatus> status = sessions_->Detach(request->session_id(), *caller);
  if (!status.ok()) return ToGrpc(status.status());
  *response->mutable_final_status() = *std::move(status);
  return grpc::Status::OK;
}

grpc::Status ControlService::Status(grpc::ServerContext* context, const v1::StatusRequest* request,
                                    v1::StatusResponse* response) {
  absl::StatusOr<PeerCredentials> caller = Caller(peers_, context);
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<std::vector<v1::SessionStatus>> sessions =
      sessions_->Status(request->session_id(), *caller);
  if (!sessions.ok()) return ToGrpc(sessions.status());
  for (v1::SessionStatus& status : *sessions) *response->add_sessions() = std::move(status);
  if (shipping_) *response->mutable_shipping() = shipping_();
  return grpc::Status::OK;
}

grpc::Status ControlService::List(grpc::ServerContext* context, const v1::ListRequest*,
                                  v1::ListResponse* response) {
  absl::StatusOr<PeerCredentials> caller = Caller(peers_, context);
  if (!caller.ok()) return ToGrpc(caller.status());
  absl::StatusOr<std::vector<v1::SessionStatus>> sessions = sessions_->Status("", *caller);
  if (!sessions.ok()) return ToGrpc(sessions.status());
  for (v1::SessionStatus& status : *sessions) *response->add_sessions() = std::move(status);
  return grpc::Status::OK;
}

grpc::Status ControlService::WatchStats(grpc::ServerContext* context,
                                        const v1::WatchStatsRequest* request,
                                        grpc::ServerWriter<v1::SessionStatus>* writer) {
  absl::StatusOr<PeerCredentials> caller = Caller(peers_, context);
  if (!caller.ok()) return ToGrpc(caller.status());
  const auto interval = std::chrono::milliseconds(
      request->interval_ms() == 0 ? 1000 : std::max(request->interval_ms(), 50u));
  while (!context->IsCancelled()) {
    absl::StatusOr<std::vector<v1::SessionStatus>> sessions =
        sessions_->Status(request->session_id(), *caller);
    if (!sessions.ok()) return ToGrpc(sessions.status());
    if (sessions->empty() || !writer->Write(sessions->front())) break;
    if (!sessions->front().running()) break;
    std::this_thread::sleep_for(interval);
  }
  return grpc::Status::OK;
}

}  // namespace loupe::control
