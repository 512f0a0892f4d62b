// Symbolizing one segment's worth of a realistic stack set: thousands of
// distinct code addresses across this program, libc and libstdc++ (as a C++
// service's samples spread), resolved by a cold symbolizer (DWARF and symbol
// tables read for the first time) and then built into a segment's symbol
// table from the warm cache — the only part that runs when a segment seals.
//   ./build/tests/bench/symbolize_bench [ADDRESSES]
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "daemon/symbols/address_spaces.h"
#include "daemon/symbols/segment_symbols.h"
#include "daemon/symbols/symbolizer.h"

namespace {

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace loupe::symbols;
  const size_t wanted = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 4000;
  std::ostringstream keep_libstdcxx;  // this program uses libstdc++: it is mapped
  keep_libstdcxx << wanted;
  const uint32_t pid = static_cast<uint32_t>(getpid());
  AddressSpaces spaces;
  spaces.Snapshot(pid, Now());
  auto maps = ReadProcMaps(pid);
  if (!maps.ok()) return 1;
  std::vector<uint64_t> addresses;
  uint64_t text_bytes = 0;
  for (const Mapping& m : *maps) text_bytes += m.executable && m.is_file() ? m.end - m.start : 0;
  const uint64_t stride = std::max<uint64_t>(16, text_bytes / wanted);
  for (const Mapping& m : *maps) {
    if (!m.executable || !m.is_file()) continue;
    for (uint64_t a = m.start + 7; a < m.end && addresses.size() < wanted; a += stride) {
      addresses.push_back(a);
    }
  }

  Symbolizer symbolizer;
  SegmentSymbols segment;
  const uint64_t cold_start = Now();
  for (uint64_t address : addresses) {
    Location location = spaces.Locate(pid, address, Now());
    if (location.object) symbolizer.Prefetch(location.object, location.file_offset);
    segment.AddUser(pid, address, location);
  }
  symbolizer.WaitIdle(600'000'000'000);
  const uint64_t cold = Now() - cold_start;

  uint64_t warm = UINT64_MAX;
  size_t named = 0;
  for (int run = 0; run < 5; ++run) {
    const uint64_t start = Now();
    const loupe::v1::SymbolTable table = segment.Build(symbolizer);
    warm = std::min(warm, Now() - start);
    named = 0;
    for (const auto& address : table.addresses()) named += address.frames_size() > 0;
  }
  fmt::print("{} distinct addresses over {} executable files, {} named\n", addresses.size(),
             spaces.objects(), named);
  fmt::print("  cold (symbolizer thread, first reads):  {:8.1f} ms\n", cold / 1e6);
  fmt::print("  warm (symbol table at seal, cached):    {:8.1f} ms   target <= 50 ms\n", warm / 1e6);
  return 0;
}
