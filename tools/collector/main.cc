// loupe-collector: receives sealed segments from louped's shippers over gRPC
// and keeps them on the local filesystem within a size and age budget.
// SIGTERM/SIGINT: stop taking calls, let uploads in flight finish within
// the grace period; any still running stay staged and resume later.
#include <fmt/format.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <fstream>

#include "daemon/base/status_util.h"
#include "daemon/ship/collector_connection.h"
#include "tools/collector/collector_service.h"
#include "tools/collector/store_config.h"

namespace {

struct Flags {
  std::string listen = "0.0.0.0:7470";
  std::string store = "/var/lib/loupe/collector";
  std::string s3_endpoint, s3_region = "us-east-1", s3_credentials_file;
  uint64_t s3_part_size = 8 << 20;
  std::string tokens_file;
  bool no_auth = false;
  std::string tls_cert, tls_key;
  uint64_t max_total_size = 100ull << 30;
  uint64_t max_age_s = 7 * 24 * 3600;
  uint64_t grace_s = 10;
  uint64_t retention_interval_s = 60;
  std::string port_file;
  std::string log_level = "info";
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(const Flags& flags) {
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (flags.tls_cert.empty()) return grpc::InsecureServerCredentials();
  absl::StatusOr<std::string> cert = loupe::ship::ReadSecretFile(flags.tls_cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = loupe::ship::ReadSecretFile(flags.tls_key, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions tls;
  tls.pem_key_cert_pairs.push_back({*key + "\n", *cert + "\n"});
  return grpc::SslServerCredentials(tls);
}

int Run(const Flags& flags) {
  auto log = spdlog::stderr_color_mt("collector");
  log->set_level(spdlog::level::from_str(flags.log_level));

  std::optional<loupe::collector::TokenAuth> auth;
  if (!flags.no_auth) {
    if (flags.tokens_file.empty()) {
      log->error("no --tokens-file: uploads would be unauthenticated (pass --no-auth to allow "
                 "that deliberately)");
      return 2;
    }
    absl::StatusOr<loupe::collector::TokenAuth> loaded =
        loupe::collector::TokenAuth::Load(flags.tokens_file);
    if (!loaded.ok()) {
      log->error("{}", loupe::MessageOf(loaded.status()));
      return 2;
    }
    auth = *std::move(loaded);
    for (const std::string& grants : auth->Describe()) log->info("tokens: {}", grants);
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = Credentials(flags);
  if (!credentials.ok()) {
    log->error("{}", loupe::MessageOf(credentials.status()));
    return 2;
  }
  auto store = loupe::collector::OpenStore(
      {.store = flags.store,
       .s3_endpoint = flags.s3_endpoint,
       .s3_region = flags.s3_region,
       .s3_credentials_file = flags.s3_credentials_file,
       .s3_part_bytes = flags.s3_part_size,
       .limits = {.max_total_bytes = flags.max_total_size, .max_age_s = flags.max_age_s}},
      log);
  if (!store.ok()) {
    log->error("{}", loupe::MessageOf(store.status()));
    return 1;
  }
  loupe::collector::CollectorService service(store->get(), std::move(auth), log);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(flags.listen, *credentials, &port);
  builder.RegisterService(&service);
  // One chunk plus framing: a stream holds at most this much at a time.
  builder.SetMaxReceiveMessageSize(2 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    log->error("could not listen on {}", flags.listen);
    return 1;
  }
  if (!flags.port_file.empty()) {
    std::ofstream(flags.port_file + ".tmp") << port << "\n";
    std::rename((flags.port_file + ".tmp").c_str(), flags.port_file.c_str());
  }
  log->info("loupe-collector: listening on {} (port {}, {}, {}), store {}", flags.listen, port,
            flags.tls_cert.empty() ? "plaintext" : "TLS",
            flags.no_auth ? "no authentication" : "bearer tokens", flags.store);

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  const timespec interval{static_cast<time_t>(flags.retention_interval_s), 0};
  int signal;
  while ((signal = sigtimedwait(&stop_signals, nullptr, &interval)) < 0) {
    (*store)->EnforceRetention();
    (*store)->SweepStaging();
  }
  log->info("loupe-collector: {} received, finishing uploads in flight (up to {} s)",
            strsignal(signal), flags.grace_s);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(flags.grace_s));
  log->info("loupe-collector: stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Flags flags;
  CLI::App app{"loupe-collector: stores trace segments shipped by louped"};
  app.add_option("--listen", flags.listen, "address:port to serve on (port 0: any)")
      ->capture_default_str();
  app.add_option("--store", flags.store,
                 "folder the segments are kept in, or s3://bucket[/prefix] for an S3-compatible "
                 "object store (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or "
                 "--s3-credentials-file)")
      ->capture_default_str();
  app.add_option("--s3-endpoint", flags.s3_endpoint,
                 "http(s)://host[:port] of the object store (default: AWS S3 in --s3-region)");
  app.add_option("--s3-region", flags.s3_region, "region the requests are signed for")
      ->capture_default_str();
  app.add_option("--s3-credentials-file", flags.s3_credentials_file,
                 "AWS shared-credentials file; its [default] aws_access_key_id and "
                 "aws_secret_access_key (and aws_session_token) are used");
  app.add_option("--s3-part-size", flags.s3_part_size,
                 "bytes per multipart part (at least 5 MiB): what an interrupted upload may "
                 "have to resend")
      ->capture_default_str();
  app.add_option("--tokens-file", flags.tokens_file,
                 "lines of '<client-name> <token> [upload=<hosts>] [read=<hosts>]'; every call "
                 "needs one of the tokens. <hosts>: patterns like web-*,db-1 ('*': any run of "
                 "characters). upload: hosts the client may ship segments as (default: the host "
                 "named like the client; clients' upload patterns must not overlap); read: hosts "
                 "whose segments it may list and fetch (default: none)");
  app.add_flag("--no-auth", flags.no_auth, "accept calls without a token (trusted networks only)");
  app.add_option("--tls-cert", flags.tls_cert, "PEM certificate chain; serves TLS when given");
  app.add_option("--tls-key", flags.tls_key, "PEM private key of --tls-cert");
  app.add_option("--max-total-size", flags.max_total_size,
                 "bytes kept in all; the oldest segments go first")
      ->capture_default_str();
  app.add_option("--max-age", flags.max_age_s, "seconds a segment is kept (0: no limit)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", flags.grace_s,
                 "seconds uploads in flight get to finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--retention-interval", flags.retention_interval_s,
                 "seconds between age checks")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  app.add_option("--port-file", flags.port_file, "write the port served on here (for --listen :0)");
  app.add_option("--log-level", flags.log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return Run(flags);
}
