// Shipping throughput and cost, against a real loupe-collector process on
// 127.0.0.1 (fsync and all):
//   - collector ingest: several clients upload concurrently; MB/s, segments/s;
//   - shipper CPU per MB: this process's CPU time (gRPC threads included)
//     for uploads of one client, and what that costs at the daemon's
//     benchmark load (5 M events/s at the bytes per event these segments
//     take), as a share of the one core the daemon then uses.
// Usage: ship_bench LOUPE_COLLECTOR [clients (4)] [segments-per-client (4)] [store flags...]
// Store flags replace the collector's --store (a temporary folder), e.g.
//   --store s3://bucket --s3-endpoint http://127.0.0.1:8080 (credentials from the environment).
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon/format/segment_reader.h"
#include "daemon/ship/collector_connection.h"
#include "daemon/ship/segment_upload.h"
#include "tests/support/sample_segments.h"
#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Cpu {
  double user = 0, system = 0;
};

Cpu CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

struct Batch {
  std::vector<std::string> paths;
  uint64_t bytes = 0;
  uint64_t events = 0;
};

// Segments as louped writes them by default (1 MiB blocks), 4 MiB each.
Batch Write(const std::string& dir, const std::string& session, uint64_t segments, uint64_t seed) {
  // About 1.1 M events fill 4 MiB at this trace's ~3.6 bytes/event.
  Batch batch;
  batch.paths = loupe::testing::WriteSampleSegments({.directory = dir,
                                                     .session = session,
                                                     .events = segments * 1'100'000,
                                                     .max_file_size = 4 << 20,
                                                     .block_bytes = 1 << 20,
                                                     .seed = seed});
  for (const std::string& path : batch.paths) {
    batch.bytes += fs::file_size(path);
    auto reader = loupe::format::SegmentReader::Open(path);
    loupe::format::Record record;
    while ((*reader)->Next(&record)) ++batch.events;
  }
  return batch;
}

void Upload(loupe::ship::CollectorConnection& connection, const Batch& batch) {
  for (const std::string& path : batch.paths) {
    auto outcome = loupe::ship::UploadSegment(connection, path, {});
    if (!outcome.ok()) {
      fmt::print(stderr, "ship_bench: {}\n", outcome.status().ToString());
      std::exit(1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: ship_bench LOUPE_COLLECTOR [clients] [segments-per-client]\n");
    return 2;
  }
  const int clients = argc > 2 ? std::atoi(argv[2]) : 4;
  const uint64_t per_client = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4;
  loupe::testing::TempDir work;
  const std::string store = work.path() + "/store", port_file = work.path() + "/port";
  std::ofstream(work.path() + "/tokens") << "bench bench-token-0123456789 upload=test-host\n";
  std::ofstream(work.path() + "/token") << "bench-token-0123456789\n";

  std::vector<Batch> batches;
  for (int c = 0; c <= clients; ++c) {  // the last one: the CPU measurement's, larger
    const std::string dir = work.path() + fmt::format("/client{}", c);
    fs::create_directories(dir);
    batches.push_back(
        Write(dir, fmt::format("bench{}", c), c == clients ? 3 * per_client : per_client, 10 + c));
  }

  const std::string tokens = work.path() + "/tokens";
  std::vector<const char*> collector_argv = {argv[1],         "--listen",   "127.0.0.1:0",
                                             "--port-file",   port_file.c_str(), "--tokens-file",
                                             tokens.c_str(),  "--log-level", "warn"};
  if (argc > 4) {
    collector_argv.insert(collector_argv.end(), argv + 4, argv + argc);
  } else {
    collector_argv.insert(collector_argv.end(), {"--store", store.c_str()});
  }
  collector_argv.push_back(nullptr);
  const pid_t collector = fork();
  if (collector == 0) {
    execv(argv[1], const_cast<char* const*>(collector_argv.data()));
    _exit(127);
  }
  while (!fs::exists(port_file)) {
    if (waitpid(collector, nullptr, WNOHANG) == collector) {
      fmt::print(stderr, "ship_bench: the collector exited before listening\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string port;
  std::ifstream(port_file) >> port;
  const loupe::ship::CollectorEndpoint endpoint{"127.0.0.1:" + port, work.path() + "/token", ""};

  std::vector<std::unique_ptr<loupe::ship::CollectorConnection>> connections;
  for (int c = 0; c <= clients; ++c) connections.push_back(*loupe::ship::CollectorConnection::Open(endpoint));

  uint64_t ingest_bytes = 0, ingest_segments = 0;
  for (int c = 0; c < clients; ++c) {
    ingest_bytes += batches[c].bytes;
    ingest_segments += batches[c].paths.size();
  }
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] { Upload(*connections[c], batches[c]); });
  }
  for (std::thread& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  const Batch& solo = batches[clients];
  const Cpu cpu_before = CpuSeconds();
  const auto solo_start = Clock::now();
  Upload(*connections[clients], solo);
  const double solo_seconds = std::chrono::duration<double>(Clock::now() - solo_start).count();
  const Cpu cpu_after = CpuSeconds();
  const double user = cpu_after.user - cpu_before.user;
  const double system = cpu_after.system - cpu_before.system;
  const double cpu = user + system;
  kill(collector, SIGTERM);
  waitpid(collector, nullptr, 0);

  const double mb = 1e6;
  const double bytes_per_event = static_cast<double>(solo.bytes) / static_cast<double>(solo.events);
  const double daemon_mb_per_s = 5e6 * bytes_per_event / mb;
  const double cpu_per_mb = cpu / (static_cast<double>(solo.bytes) / mb);
  fmt::print("collector ingest: {} clients, {} segments, {:.1f} MB in {:.2f} s: {:.1f} MB/s, "
             "{:.1f} segments/s\n",
             clients, ingest_segments, static_cast<double>(ingest_bytes) / mb, seconds,
             static_cast<double>(ingest_bytes) / mb / seconds,
             static_cast<double>(ingest_segments) / seconds);
  fmt::print("shipper: {:.1f} MB in {:.2f} s, {:.3f} CPU s ({:.3f} user, {:.3f} kernel): "
             "{:.2f} ms CPU per MB\n",
             static_cast<double>(solo.bytes) / mb, solo_seconds, cpu, user, system,
             cpu_per_mb * 1e3);
  fmt::print("at the daemon's benchmark load (5 M events/s x {:.2f} bytes/event = {:.1f} MB/s): "
             "the shipper adds {:.2f} % of a core\n",
             bytes_per_event, daemon_mb_per_s, cpu_per_mb * daemon_mb_per_s * 100);
  return 0;
}
