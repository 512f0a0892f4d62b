#include "tools/tracectl/collector_source.h"

#include <fmt/format.h>
#include <time.h>

#include <filesystem>
#include <fstream>

#include "daemon/ship/collector_connection.h"
#include "tools/tracectl/durations.h"

namespace loupe::tracectl {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<FetchedSegments>> Fetch(const CollectorQuery& query);

}  // namespace

void AddCollectorOptions(CLI::App* command, CollectorQuery& query, bool time_flags) {
  command->add_option("--collector", query.address,
                      "Read from this loupe-collector (host:port, or a list IP:port,IP:port of "
                      "collectors sharing one store) instead of files");
  command->add_option("--host", query.host, "With --collector: only this host's segments");
  command->add_option("--session", query.session, "With --collector: only this session");
  if (time_flags) {
    command->add_option("--since", query.since,
                        "With --collector: segments started since (15m ago, or 2026-12-02T10:00:00Z)");
    command->add_option("--until", query.until, "With --collector: segments started before");
  }
  command->add_option("--collector-token-file", query.token_file,
                      "With --collector: file holding the bearer token");
  command->add_option("--collector-ca", query.ca_file,
                      "With --collector: PEM roots to check its TLS certificate (TLS when given)");
}

absl::StatusOr<uint64_t> ParseWallClock(const std::string& text, std::string_view flag) {
  struct tm utc {};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &utc);
  if (end != nullptr && (*end == '\0' || std::string_view(end) == "Z")) {
    return static_cast<uint64_t>(timegm(&utc)) * 1'000'000'000;
  }
  absl::StatusOr<uint64_t> ago = ParseDuration(text, flag, /*zero_ok=*/true);
  if (!ago.ok()) {
    return absl::InvalidArgumentError(fmt::format(
        "{} '{}': neither a duration ago (15m) nor a UTC time (2026-12-02T10:00:00Z)", flag, text));
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t now_ns =
      static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
  return now_ns > *ago ? now_ns - *ago : 0;
}

FetchedSegments::~FetchedSegments() {
  std::error_code error;
  if (!directory.empty()) fs::remove_all(directory, error);
}

absl::StatusOr<std::vector<std::string>> ResolveSources(
    const std::vector<std::string>& paths, const CollectorQuery& query,
    std::unique_ptr<FetchedSegments>* fetched) {
  if (query.address.empty()) {
    if (paths.empty()) {
      return absl::InvalidArgumentError("name segment files or folders, or --collector ADDR");
    }
    return paths;
  }
  if (!paths.empty()) {
    return absl::InvalidArgumentError("give either paths or --collector, not both");
  }
  absl::StatusOr<std::unique_ptr<FetchedSegments>> got = Fetch(query);
  if (!got.ok()) return got.status();
  *fetched = *std::move(got);
  return std::vector<std::string>{(*fetched)->directory};
}

namespace {

absl::StatusOr<std::unique_ptr<FetchedSegments>> Fetch(const CollectorQuery& query) {
  v1::ListSegmentsRequest request;
  request.set_host(query.host);
  request.set_session_id(query.session);
  for (auto [text, flag, setter] :
       {std::tuple{&query.since, "--since", &v1::ListSegmentsRequest::set_since_realtime_ns},
        std::tuple{&query.until, "--until", &v1::ListSegmentsRequest::set_until_realtime_ns}}) {
    if (text->empty()) continue;
    absl::StatusOr<uint64_t> ns = ParseWallClock(*text, flag);
    if (!ns.ok()) return ns.status();
    (request.*setter)(*ns);
  }
  absl::StatusOr<std::unique_ptr<ship::CollectorConnection>> connection =
      ship::CollectorConnection::Open({query.address, query.token_file, query.ca_file});
  if (!connection.ok()) return connection.status();
  auto context = (*connection)->NewContext(std::chrono::seconds(30));
  v1::ListSegmentsResponse listed;
  grpc::Status status = (*connection)->stub().ListSegments(context.get(), request, &listed);
  if (!status.ok()) return (*connection)->Explain(status, "list segments");
  if (listed.segments().empty()) {
    return absl::NotFoundError(fmt::format(
        "collector {}: no segments match (host '{}', session '{}', since '{}', until '{}')",
        query.address, query.host, query.session, query.since, query.until));
  }

  auto fetched = std::make_unique<FetchedSegments>();
  char pattern[] = "/tmp/tracectl-collector-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp failed");
  fetched->directory = pattern;
  for (const v1::StoredSegment& segment : listed.segments()) {
    // Named as the writer names them, per host, so readers group sessions.
    const fs::path file = fs::path(fetched->directory) /
                          fmt::format("{}-{}-{:06}.loupe", segment.id().host(),
                                      segment.id().session_id(), segment.id().sequence());
    std::ofstream out(file, std::ios::binary);
    auto fetch_context = (*connection)->NewContext(std::chrono::minutes(5));
    v1::FetchSegmentRequest fetch;
    fetch.set_name(segment.name());
    auto reader = (*connection)->stub().FetchSegment(fetch_context.get(), fetch);
    v1::FetchSegmentChunk chunk;
    while (reader->Read(&chunk)) out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    grpc::Status finished = reader->Finish();
    if (!finished.ok()) return (*connection)->Explain(finished, "fetch " + segment.name());
    if (!out.flush()) return absl::UnavailableError(fmt::format("write {}", file.string()));
    ++fetched->count;
  }
  fmt::print(stderr, "tracectl: {} segment(s) from collector {}\n", fetched->count,
             query.address);
  return fetched;
}

}  // namespace
}  // namespace loupe::tracectl
