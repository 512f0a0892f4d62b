// write_crafted_segments DIR: writes crafted segments for the tests of
// bounded reading (tests/e2e/tracectl_bounded_read_test.sh): a healthy
// one (healthy.loupe), decompression bombs of two sizes (<kind>-<size>.loupe)
// and reordered frames (duplicated.loupe, ...). Prints one line per file.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "tests/support/crafted_segments.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: write_crafted_segments DIR\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir / "scratch");
  const std::string segment =
      loupe::testing::WriteSmallSegment((dir / "scratch").string(), "crafted");
  fs::remove_all(dir / "scratch");
  if (segment.empty()) {
    fmt::print(stderr, "write_crafted_segments: the writer failed\n");
    return 1;
  }
  std::vector<loupe::testing::CraftedSegment> files{{"healthy", segment, "as written"}};
  // Under the reader's frame bound (its table and parse bounds stop them)
  // and far over it (the frame bound does).
  for (size_t payload : {size_t{31} << 20, size_t{240} << 20}) {
    for (auto& bomb : loupe::testing::CraftBombs(segment, payload)) files.push_back(bomb);
  }
  for (auto& reordered : loupe::testing::CraftReorderings(segment)) files.push_back(reordered);
  for (const auto& file : files) {
    std::ofstream(dir / (file.name + ".loupe"), std::ios::binary)
        .write(file.bytes.data(), static_cast<std::streamsize>(file.bytes.size()));
    fmt::print("{}.loupe {} bytes: {}\n", file.name, file.bytes.size(), file.what);
  }
  return 0;
}
