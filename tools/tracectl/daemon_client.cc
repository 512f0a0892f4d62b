#include "tools/tracectl/daemon_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include "loupe/v1/control.grpc.pb.h"

namespace loupe::tracectl {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      "louped: " + status.error_message());
}

}  // namespace

struct DaemonClient::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Control::Stub> control;
};

DaemonClient::DaemonClient(std::unique_ptr<Stub> stub) : stub_(std::move(stub)) {}
DaemonClient::~DaemonClient() = default;

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const std::string& socket) {
  struct stat st;
  if (::stat(socket.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return nullptr;
  if (::access(socket.c_str(), R_OK | W_OK) != 0) {
    return absl::PermissionDeniedError(fmt::format(
        "louped's socket {} is not open to this user (it is for root and the socket_group)",
        socket));
  }
  auto stub = std::make_unique<Stub>();
  stub->channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  if (!stub->channel->WaitForConnected(std::chrono::system_clock::now() +
                                       std::chrono::milliseconds(500))) {
    return nullptr;  // a stale socket: nobody answers
  }
  stub->control = v1::Control::NewStub(stub->channel);
  return std::unique_ptr<DaemonClient>(new DaemonClient(std::move(stub)));
}

namespace {

// One unary call with a deadline; a failure becomes a Status naming louped.
template <typename Request, typename Response>
absl::StatusOr<Response> Call(grpc::Status (v1::Control::Stub::*method)(grpc::ClientContext*,
                                                                        const Request&, Response*),
                              v1::Control::Stub* stub, const Request& request,
                              std::chrono::seconds deadline) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  Response response;
  if (absl::Status status = FromGrpc((stub->*method)(&context, request, &response)); !status.ok()) {
    return status;
  }
  return response;
}

}  // namespace

absl::StatusOr<v1::AttachResponse> DaemonClient::Attach(const v1::AttachRequest& request) {
  // Loading BPF programs can take a while on a busy machine.
  return Call(&v1::Control::Stub::Attach, stub_->control.get(), request, std::chrono::seconds(30));
}

absl::StatusOr<v1::SessionStatus> DaemonClient::Detach(const std::string& session_id) {
  v1::DetachRequest request;
  request.set_session_id(session_id);
  // Detaching drains and seals: allow for a full reorder window and fsync.
  absl::StatusOr<v1::DetachResponse> response =
      Call(&v1::Control::Stub::Detach, stub_->control.get(), request, std::chrono::seconds(60));
  if (!response.ok()) return response.status();
  return response->final_status();
}

absl::StatusOr<v1::StatusResponse> DaemonClient::Status(const std::string& session_id) {
  v1::StatusRequest request;
  request.set_session_id(session_id);
  return Call(&v1::Control::Stub::Status, stub_->control.get(), request, std::chrono::seconds(10));
}

absl::Status DaemonClient::Watch(const std::string& session_id, uint32_t interval_ms,
                                 const std::function<bool(const v1::SessionStatus&)>& on_update) {
  grpc::ClientContext context;
  v1::WatchStatsRequest request;
  request.set_session_id(session_id);
  request.set_interval_ms(interval_ms);
  std::unique_ptr<grpc::ClientReader<v1::SessionStatus>> reader =
      stub_->control->WatchStats(&context, request);
  v1::SessionStatus status;
  while (reader->Read(&status)) {
    if (!on_update(status)) {
      context.TryCancel();
      break;
    }
  }
  const grpc::Status finished = reader->Finish();
  return finished.error_code() == grpc::StatusCode::CANCELLED ? absl::OkStatus()
                                                              : FromGrpc(finished);
}

}  // namespace loupe::tracectl
