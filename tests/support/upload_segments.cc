// Writes sample segments and uploads them through the shipper's own upload
// code, for end-to-end tests of collectors without louped (and BPF):
//   upload_segments write <dir> <session> <events> <max-file-size>
//       prints the paths written, one a line
//   upload_segments send <collector> <token-file> <bytes/s (0: no limit)> <file>...
//       prints "stored <location> resumed_from=<bytes>" per file; exit 1 on
//       the first failure, naming it
#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "daemon/ship/collector_connection.h"
#include "daemon/ship/segment_upload.h"
#include "tests/support/sample_segments.h"

namespace {

int Write(char** argv) {
  for (const std::string& path : loupe::testing::WriteSampleSegments(
           {.directory = argv[0],
            .session = argv[1],
            .events = std::strtoull(argv[2], nullptr, 10),
            .max_file_size = std::strtoull(argv[3], nullptr, 10),
            .block_bytes = 1 << 20})) {
    fmt::print("{}\n", path);
  }
  return 0;
}

int Send(int count, char** argv) {
  auto connection =
      loupe::ship::CollectorConnection::Open({.address = argv[0], .token_file = argv[1]});
  if (!connection.ok()) {
    fmt::print(stderr, "upload_segments: {}\n", connection.status().ToString());
    return 1;
  }
  const loupe::ship::UploadSettings settings{.rate_limit_bytes_per_s =
                                                 std::strtoull(argv[2], nullptr, 10)};
  for (int i = 3; i < count; ++i) {
    auto outcome = loupe::ship::UploadSegment(**connection, argv[i], settings);
    if (!outcome.ok()) {
      fmt::print(stderr, "upload_segments: {}: {}\n", argv[i], outcome.status().ToString());
      return 1;
    }
    fmt::print("stored {} resumed_from={}\n", outcome->location, outcome->resumed_from);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc == 6) return Write(argv + 2);
  if (mode == "send" && argc >= 6) return Send(argc - 2, argv + 2);
  fmt::print(stderr,
             "usage: upload_segments write <dir> <session> <events> <max-file-size>\n"
             "       upload_segments send <collector> <token-file> <bytes/s> <file>...\n");
  return 2;
}
