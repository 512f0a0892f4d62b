// The pprof profile as `go tool pprof` reads it: the first mapping is the
// main binary, so it must be the program's, whatever stack comes first.
#include "analysis/pprof_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "perfetto_decoder.h"
#include "pprof/profile.pb.h"

namespace loupe::analysis {
namespace {

constexpr uint32_t kPid = 10;
constexpr uint64_t kLibcRead = 0x7f0000001000, kAppHot = 0x401000, kAppMain = 0x402000;

v1::SymbolTable Symbols() {
  v1::SymbolTable table;
  auto* libc = table.add_mappings();
  libc->set_pid(kPid);
  libc->set_path("/usr/lib/x86_64-linux-gnu/libc.so.6");
  libc->set_start(0x7f0000000000);
  libc->set_end(0x7f0000100000);
  auto* app = table.add_mappings();
  app->set_pid(kPid);
  app->set_path("/srv/app");
  app->set_start(0x400000);
  app->set_end(0x500000);
  auto name = [&](uint64_t address, uint32_t mapping, const char* function) {
    auto* entry = table.add_addresses();
    entry->set_pid(kPid);
    entry->set_address(address);
    entry->set_mapping(mapping);
    entry->add_frames()->set_function(function);
  };
  name(kLibcRead, 1, "__libc_read");
  name(kAppHot, 2, "hot");
  name(kAppMain, 2, "main");
  return table;
}

TEST(PprofWriterTest, TheMainMappingIsTheProgramsEvenWhenALibraryStackComesFirst) {
  StackProfile profile;
  profile.Add({.tid = kPid, .payload = format::ProcessInfo{.name = "app"}});
  profile.Add({.tid = kPid, .payload = format::ThreadInfo{.pid = kPid, .name = "app"}});
  const uint64_t in_libc[] = {kLibcRead};  // a thread of libc's only, sampled first
  const uint64_t in_app[] = {kAppHot, kAppMain};
  profile.Add({.time_ns = 1, .tid = kPid, .payload = format::CpuSample{.user_stack = in_libc}});
  for (int i = 0; i < 3; ++i) {
    profile.Add({.time_ns = 2, .tid = kPid, .payload = format::CpuSample{.user_stack = in_app}});
  }
  profile.AddSymbols(Symbols());
  const std::string path = ::testing::TempDir() + "pprof_writer_test." + std::to_string(getpid());
  ASSERT_TRUE(WritePprof(profile, {.sample_period_ns = 10'000'000}, path).ok());
  std::stringstream gzipped;
  gzipped << std::ifstream(path, std::ios::binary).rdbuf();
  std::remove(path.c_str());
  const std::optional<std::string> bytes = testing::Inflate(gzipped.str(), testing::kGzipWindow);
  ASSERT_TRUE(bytes.has_value()) << "not gzip";
  pprof::Profile decoded;
  ASSERT_TRUE(decoded.ParseFromString(*bytes));
  ASSERT_EQ(decoded.mapping_size(), 2);
  EXPECT_EQ(decoded.string_table(decoded.mapping(0).filename()), "/srv/app");
  EXPECT_EQ(decoded.mapping(0).memory_start(), 0x400000u);
  int64_t samples = 0;
  for (const pprof::Sample& sample : decoded.sample()) samples += sample.value(0);
  EXPECT_EQ(samples, 4);
}

}  // namespace
}  // namespace loupe::analysis
