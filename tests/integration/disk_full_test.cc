// A writer on a real full disk (issue 14 item 3): a 2 MiB tmpfs, with a
// filler file taking part of it, is written until it is full, written on
// while full, then the filler is removed and writing goes on. Whatever the
// moment the disk fills (mid-file, or when a segment is to be sealed), the
// events appended are exactly those read back plus those counted lost
// (writer/write_failed), every file is sealed and reads without a problem,
// and the writer's ledger is what the files say.
// Needs root (to mount the tmpfs); skips without it, fails instead under
// LOUPE_REQUIRE_PRIVILEGED=1.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "daemon/format/loss_tally.h"
#include "daemon/format/record_json.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

// A small tmpfs at <temp>/disk for the test's lifetime.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& size) : path_(root_.File("disk")) {
    fs::create_directory(path_);
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, fmt::format("size={}", size).c_str()) != 0) {
      error_ = fmt::format("mount a {} tmpfs: {}", size, std::strerror(errno));
    }
  }
  ~SmallDisk() {
    if (error_.empty()) ::umount2(path_.c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  testing::TempDir root_;
  std::string path_;
  std::string error_;
};

#define REQUIRE_MOUNT(disk)                                                          \
  do {                                                                               \
    if (!(disk).error().empty()) {                                                   \
      if (::loupe::testing::PrivilegesRequired()) {                                  \
        FAIL() << "LOUPE_REQUIRE_PRIVILEGED=1 but " << (disk).error();               \
      }                                                                              \
      GTEST_SKIP() << "needs root to mount a small tmpfs: " << (disk).error();       \
    }                                                                                \
  } while (0)

void Sleep(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

// A busy service's records (stacks, spans, switches) with, every tenth, an
// instant event naming a string never seen before: blocks keep interning.
class Feed {
 public:
  Record Next() {
    ++count_;
    Record record = trace_.Next();
    if (count_ % 10 != 0) return record;
    value_ = fmt::format("request-{}", count_);
    field_ = {.key = "id", .value = Value::String(value_)};
    return Record{.time_ns = record.time_ns,
                  .tid = record.tid,
                  .cpu = record.cpu,
                  .payload = Instant{.name = "unique", .fields = {&field_, 1}}};
  }

 private:
  synthetic::Trace trace_;
  uint64_t count_ = 0;
  std::string value_;
  Field field_;
};

struct Found {
  std::vector<std::string> events;  // JSON of records neither preamble nor Loss
  uint64_t records = 0;
  std::map<std::string, uint64_t> trailer_losses;
  std::vector<std::string> problems;
  size_t files = 0;
};

Found ReadFolder(const std::string& dir) {
  Found found;
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir)) paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  for (const std::string& path : paths) {
    ++found.files;
    if (!path.ends_with(".loupe")) found.problems.push_back(path + ": not sealed");
    auto reader = SegmentReader::Open(path);
    if (!reader.ok()) {
      found.problems.emplace_back(reader.status().message());
      continue;
    }
    Record record;
    while ((*reader)->Next(&record)) {
      ++found.records;
      if (std::holds_alternative<Loss>(record.payload)) continue;
      if (std::holds_alternative<ThreadInfo>(record.payload) && record.tid == 1) continue;
      found.events.push_back(RecordJson(record));
    }
    for (const std::string& problem : (*reader)->problems()) found.problems.push_back(problem);
    if (!(*reader)->has_trailer()) found.problems.push_back(path + ": no trailer");
    for (const v1::LossTotal& loss : (*reader)->trailer().losses()) {
      found.trailer_losses[LossKey(static_cast<LossSource>(loss.source()),
                                   static_cast<LossReason>(loss.reason()))] += loss.count();
    }
  }
  return found;
}

bool IsSubsequence(const std::vector<std::string>& part, const std::vector<std::string>& whole) {
  size_t at = 0;
  for (const std::string& item : whole) {
    if (at < part.size() && part[at] == item) ++at;
  }
  return at == part.size();
}

// The disk fills at a different moment for each filler size.
class DiskFullTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(DiskFullTest, LosesOnlyWhatDidNotFitCountsItExactlyAndDamagesNothing) {
  SmallDisk disk("2m");
  REQUIRE_MOUNT(disk);
  const uint64_t filler_bytes = GetParam();
  const std::string filler = disk.path() + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string chunk(64 << 10, 'x');
    for (uint64_t written = 0; written < filler_bytes; written += chunk.size()) out << chunk;
  }
  WriterOptions options{.directory = disk.path() + "/traces", .session_id = "full"};
  options.max_file_size = 256 << 10;
  options.max_total_size = 1ull << 30;  // no eviction: the disk is the limit
  options.block_bytes = 8 << 10;
  options.rotation_period_ns = 0;
  auto symbols = [] {
    v1::SymbolTable table;
    for (int a = 0; a < 300; ++a) {
      v1::SymbolTable::Address* address = table.add_addresses();
      address->set_address(0x400000 + static_cast<uint64_t>(a) * 4093);
      address->add_frames()->set_function(fmt::format("service::handler_{}", a));
    }
    return table;
  };
  auto writer = SegmentWriter::Create(
      options, {},
      [](SegmentWriter& w) { w.AppendPreamble({.tid = 1, .payload = ThreadInfo{1, 1, "main"}}); },
      symbols);
  ASSERT_TRUE(writer.ok()) << writer.status();

  Feed feed;
  std::vector<std::string> appended;
  auto append = [&](uint64_t n) {
    uint64_t failed = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const Record record = feed.Next();
      appended.push_back(RecordJson(record));
      if (!(*writer)->Append(record).ok()) ++failed;
    }
    return failed;
  };
  // Until full, then on for a while.
  uint64_t failed = 0;
  while (failed == 0 && appended.size() < 5'000'000) failed = append(10'000);
  ASSERT_GT(failed, 0u) << "the disk never filled";
  append(50'000);
  const uint64_t failures_while_full = (*writer)->stats().write_failures;
  EXPECT_GT(failures_while_full, 0u);

  // Room again: writing goes on (after the writer's short wait).
  fs::remove(filler);
  Sleep(60 * kMs);
  for (int round = 0; round < 5; ++round) {
    append(2'000);
    Sleep(20 * kMs);
  }
  const uint64_t in_files_before_close = (*writer)->stats().records_in_files;
  EXPECT_TRUE((*writer)->Close().ok());
  EXPECT_GT((*writer)->stats().records_in_files, in_files_before_close);

  const Found found = ReadFolder(options.directory);
  EXPECT_TRUE(found.problems.empty()) << ::testing::PrintToString(found.problems);
  const uint64_t lost = found.trailer_losses.contains("writer/write_failed")
                            ? found.trailer_losses.at("writer/write_failed")
                            : 0;
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(found.events.size() + lost, appended.size())
      << found.events.size() << " read + " << lost << " lost";
  EXPECT_TRUE(IsSubsequence(found.events, appended));
  // The writer's ledger: what verify reads.
  EXPECT_EQ((*writer)->stats().records_in_files, found.records);
  EXPECT_EQ((*writer)->losses(), found.trailer_losses);
  RecordProperty("files", static_cast<int>(found.files));
  RecordProperty("appended", static_cast<int>(appended.size()));
  RecordProperty("lost", static_cast<int>(lost));
  std::printf("filler %llu KiB: %zu files, %zu events appended, %llu lost, %llu failed writes\n",
              static_cast<unsigned long long>(filler_bytes >> 10), found.files, appended.size(),
              static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>((*writer)->stats().write_failures));
}

INSTANTIATE_TEST_SUITE_P(Fillers, DiskFullTest,
                         ::testing::Values(256u << 10, 700u << 10, 1100u << 10, 1500u << 10));

}  // namespace
}  // namespace loupe::format
