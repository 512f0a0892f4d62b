// A client's connection to a loupe-collector: the channel (plaintext or TLS)
// and the bearer token every call carries. Used by louped's shipper and by
// tracectl when it reads from a collector.
#ifndef LOUPE_DAEMON_SHIP_COLLECTOR_CONNECTION_H_
#define LOUPE_DAEMON_SHIP_COLLECTOR_CONNECTION_H_

#include <grpcpp/client_context.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loupe/v1/collector.grpc.pb.h"

namespace loupe::ship {

struct CollectorEndpoint {
  std::string address;     // host:port, or a list (collector_target.h)
  std::string token_file;  // the bearer token; empty: calls carry none
  std::string ca_file;     // PEM roots to trust; empty: plaintext
};

class CollectorConnection {
 public:
  // Reads the token and CA files; does not contact the collector yet.
  static absl::StatusOr<std::unique_ptr<CollectorConnection>> Open(
      const CollectorEndpoint& endpoint);

  v1::Collector::Stub& stub() { return *stub_; }
  // A context for one call: the token, and a deadline when `timeout` > 0.
  std::unique_ptr<grpc::ClientContext> NewContext(std::chrono::milliseconds timeout) const;
  // A failed call's status, said so an operator knows where to look.
  absl::Status Explain(const grpc::Status& status, std::string_view what) const;
  const std::string& address() const { return endpoint_.address; }

 private:
  CollectorConnection(CollectorEndpoint endpoint, std::string token,
                      std::unique_ptr<v1::Collector::Stub> stub)
      : endpoint_(std::move(endpoint)), token_(std::move(token)), stub_(std::move(stub)) {}

  CollectorEndpoint endpoint_;
  std::string token_;
  std::unique_ptr<v1::Collector::Stub> stub_;
};

// Reads a one-line secret file (the token), trimmed of surrounding space.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, std::string_view what);

}  // namespace loupe::ship

#endif  // LOUPE_DAEMON_SHIP_COLLECTOR_CONNECTION_H_
