#include "daemon/ship/collector_connection.h"

#include <fmt/format.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <fstream>
#include <sstream>

#include "daemon/ship/collector_target.h"

namespace loupe::ship {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{} {}: cannot be read", what, path));
  std::stringstream text;
  text << in.rdbuf();
  std::string value = text.str();
  const size_t begin = value.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    return absl::InvalidArgumentError(fmt::format("{} {}: the file is empty", what, path));
  }
  const size_t end = value.find_last_not_of(" \t\r\n");
  return value.substr(begin, end - begin + 1);
}

absl::StatusOr<std::unique_ptr<CollectorConnection>> CollectorConnection::Open(
    const CollectorEndpoint& endpoint) {
  absl::StatusOr<std::string> target = ChannelTarget(endpoint.address);
  if (!target.ok()) return target.status();
  std::string token;
  if (!endpoint.token_file.empty()) {
    absl::StatusOr<std::string> read = ReadSecretFile(endpoint.token_file, "collector token file");
    if (!read.ok()) return read.status();
    token = *std::move(read);
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!endpoint.ca_file.empty()) {
    absl::StatusOr<std::string> roots = ReadSecretFile(endpoint.ca_file, "collector CA file");
    if (!roots.ok()) return roots.status();
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = *roots + "\n";
    credentials = grpc::SslCredentials(tls);
  }
  grpc::ChannelArguments arguments;
  // Reconnect attempts back off on their own; keep the ceiling near the
  // shipper's so a collector that returns is noticed soon.
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  arguments.SetMaxReceiveMessageSize(4 << 20);
  arguments.SetServiceConfigJSON(std::string(CollectorServiceConfig()));
  auto channel = grpc::CreateCustomChannel(*target, credentials, arguments);
  return std::unique_ptr<CollectorConnection>(
      new CollectorConnection(endpoint, std::move(token), v1::Collector::NewStub(channel)));
}

std::unique_ptr<grpc::ClientContext> CollectorConnection::NewContext(
    std::chrono::milliseconds timeout) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token_.empty()) context->AddMetadata("authorization", "Bearer " + token_);
  if (timeout.count() > 0) context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

absl::Status CollectorConnection::Explain(const grpc::Status& status, std::string_view what) const {
  std::string message =
      fmt::format("collector {}: {}: {}", endpoint_.address, what, status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message += endpoint_.ca_file.empty()
                   ? " (is loupe-collector running there, and without TLS?)"
                   : fmt::format(" (is loupe-collector running there with TLS, and is its "
                                 "certificate signed by {}?)",
                                 endpoint_.ca_file);
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

}  // namespace loupe::ship
