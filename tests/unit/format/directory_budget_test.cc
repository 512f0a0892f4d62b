// One budget per directory (issue 15): writers of one louped in the same
// folder share max_total_size; eviction takes the oldest of their segments
// whichever session wrote it, and only theirs — another daemon's segments,
// files of an earlier format, non-trace files and symlinks are neither
// counted nor touched; every evicted event is reported, in the owner's
// trace when the owner is still writing.
#include "daemon/format/directory_budget.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "daemon/format/segment_files.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/trace_reader.h"
#include "tests/support/temp_dir.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;
constexpr char kOurs[] = "louped /run/test.sock";

// Records that compress poorly, so segments have some size.
class Records {
 public:
  Record Next() {
    time_ns_ += 50'000;
    return Record{.time_ns = time_ns_,
                  .tid = static_cast<uint32_t>(random_()),
                  .cpu = static_cast<uint32_t>(random_() % 64),
                  .payload = SchedSwitch{static_cast<uint32_t>(random_()),
                                         static_cast<uint32_t>(random_() % 3)}};
  }
  uint64_t now() const { return time_ns_; }

 private:
  std::mt19937 random_{42};
  uint64_t time_ns_ = 1'000 * kMs;
};

WriterOptions Options(const std::string& dir, const std::string& session,
                      std::shared_ptr<DirectoryBudgets> budgets) {
  WriterOptions options{.directory = dir, .session_id = session};
  options.max_file_size = 64 << 10;
  options.max_total_size = (128 + 24) << 10;  // two open files, then 24 KiB of sealed ones
  options.block_bytes = 4 << 10;
  options.rotation_period_ns = 20 * kMs;
  options.block_flush_period_ns = kMs;
  options.writer_id = kOurs;
  options.budgets = std::move(budgets);
  return options;
}

std::unique_ptr<SegmentWriter> Create(const WriterOptions& options) {
  auto writer = SegmentWriter::Create(options, {});
  EXPECT_TRUE(writer.ok()) << writer.status();
  return writer.ok() ? *std::move(writer) : nullptr;
}

// `session`'s segments of `count` records, sealed in `dir`, none evicted.
void WriteUnbudgeted(const std::string& dir, const std::string& session, int count) {
  Records records;
  WriterOptions options = Options(dir, session, nullptr);
  options.max_total_size = 64 << 20;
  auto writer = Create(options);
  ASSERT_NE(writer, nullptr);
  for (int i = 0; i < count; ++i) ASSERT_TRUE(writer->Append(records.Next()).ok());
  ASSERT_TRUE(writer->Close().ok());
}

// Bytes of this identity's segment files (sealed and open) in `dir`.
uint64_t OursOnDisk(const std::string& dir) {
  uint64_t bytes = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!ParseSegmentFileName(name) || entry.is_symlink()) continue;
    if (name.starts_with("a-") || name.starts_with("b-")) bytes += entry.file_size();
  }
  return bytes;
}

struct ReadBack {
  uint64_t events = 0;                                    // records that are not eviction reports
  uint64_t evicted_reported = 0;                          // events reported evicted
  std::map<std::string, std::set<std::string>> named_by;  // file -> segments its trailer names
};

ReadBack ReadSessions(const std::string& dir, const std::vector<std::string>& prefixes) {
  std::vector<std::string> paths;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& prefix : prefixes) {
      if (name.starts_with(prefix) && name.ends_with(kSealedSuffix)) paths.push_back(entry.path());
    }
  }
  ReadBack out;
  if (paths.empty()) return out;
  auto trace = TraceReader::Open(paths);
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!trace.ok()) return out;
  Record record;
  while ((*trace)->Next(&record)) {
    const Loss* loss = std::get_if<Loss>(&record.payload);
    if (loss != nullptr && loss->reason == LossReason::kSegmentEvicted) {
      out.evicted_reported += loss->count;
    } else {
      ++out.events;
    }
  }
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    auto& named = out.named_by[fs::path(summary.path).filename().string()];
    named.insert(summary.trailer.evicted_segments().begin(),
                 summary.trailer.evicted_segments().end());
  }
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(DirectoryBudgetTest, WritersShareTheBudgetAndTouchOnlyTheirOwnSegments) {
  testing::TempDir dir, elsewhere;
  Records records;

  // What else is in the folder: another daemon's trace, a file of an
  // earlier format named like a segment, a non-trace file, and a symlink
  // named like a segment to a segment of ours kept elsewhere.
  WriterOptions foreign = Options(dir.path(), "other", nullptr);
  foreign.writer_id = "louped /run/another.sock";
  {
    auto writer = Create(foreign);
    for (int i = 0; i < 3000; ++i) ASSERT_TRUE(writer->Append(records.Next()).ok());
    ASSERT_TRUE(writer->Close().ok());
  }
  std::ofstream(dir.File("old-000000.loupe")) << "a segment of a format without writer_id";
  std::ofstream(dir.File("notes.txt")) << "not a trace";
  {
    auto writer = Create(Options(elsewhere.path(), "linked", nullptr));
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(writer->Append(records.Next()).ok());
    ASSERT_TRUE(writer->Close().ok());
  }
  fs::create_symlink(elsewhere.File("linked-000000.loupe"), dir.File("linked-000000.loupe"));
  std::map<std::string, std::string> before;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
    before[entry.path().filename().string()] = Slurp(entry.path());
  }
  const std::string linked_target = Slurp(elsewhere.File("linked-000000.loupe"));

  // Two sessions of one louped, writing at once.
  auto budgets = std::make_shared<DirectoryBudgets>();
  const WriterOptions options = Options(dir.path(), "a", budgets);
  auto a = Create(options);
  auto b = Create(Options(dir.path(), "b", budgets));
  uint64_t written = 0;
  for (int i = 0; i < 40'000; ++i) {
    ASSERT_TRUE(a->Append(records.Next()).ok());
    ASSERT_TRUE(b->Append(records.Next()).ok());
    written += 2;
    if (i % 500 == 0) {
      // The sum over both writers, not each one's, stays in the budget.
      ASSERT_LE(OursOnDisk(dir.path()), options.max_total_size) << "after " << i;
    }
  }
  ASSERT_TRUE(a->Close().ok());
  ASSERT_TRUE(b->Close().ok());
  const uint64_t evicted = a->stats().segments_evicted + b->stats().segments_evicted;
  EXPECT_GT(evicted, 10u);
  EXPECT_LE(OursOnDisk(dir.path()), options.max_total_size);

  // Nothing else was touched.
  for (const auto& [name, content] : before) {
    ASSERT_TRUE(fs::exists(dir.File(name)) || fs::is_symlink(dir.File(name))) << name;
    if (!fs::is_symlink(dir.File(name))) {
      EXPECT_EQ(Slurp(dir.File(name)), content) << name;
    }
  }
  EXPECT_EQ(Slurp(elsewhere.File("linked-000000.loupe")), linked_target);

  // Every event written is in a surviving segment or reported evicted.
  const ReadBack back = ReadSessions(dir.path(), {"a-", "b-"});
  EXPECT_EQ(back.events + back.evicted_reported, written);
  std::set<std::string> named;
  for (const auto& [file, names] : back.named_by) named.insert(names.begin(), names.end());
  for (const std::string& name : named) {
    EXPECT_TRUE(name.starts_with("a-") || name.starts_with("b-")) << name;
    EXPECT_FALSE(fs::exists(dir.File(name))) << name << " is reported evicted but still there";
  }
}

TEST(DirectoryBudgetTest, AnEvictionByAnotherWriterIsReportedInTheOwnersTrace) {
  testing::TempDir dir;
  Records records;
  auto budgets = std::make_shared<DirectoryBudgets>();
  auto a = Create(Options(dir.path(), "a", budgets));
  auto b = Create(Options(dir.path(), "b", budgets));

  // a seals one segment, then stays quiet while b fills the folder.
  constexpr int kFirst = 300;
  for (int i = 0; i < kFirst; ++i) ASSERT_TRUE(a->Append(records.Next()).ok());
  ASSERT_TRUE(a->Tick(records.now() + 30 * kMs).ok());
  ASSERT_TRUE(fs::exists(dir.File("a-000000.loupe")));
  for (int i = 0; i < 20'000 && fs::exists(dir.File("a-000000.loupe")); ++i) {
    ASSERT_TRUE(b->Append(records.Next()).ok());
  }
  ASSERT_FALSE(fs::exists(dir.File("a-000000.loupe"))) << "b never evicted a's segment";
  EXPECT_EQ(a->stats().segments_evicted, 0u);  // not yet told

  // a's next segment says what it lost; b's trace does not claim it.
  ASSERT_TRUE(a->Append(records.Next()).ok());
  ASSERT_TRUE(a->Close().ok());
  ASSERT_TRUE(b->Close().ok());
  EXPECT_EQ(a->stats().segments_evicted, 1u);
  EXPECT_EQ(a->stats().events_lost, static_cast<uint64_t>(kFirst));
  ReadBack of_a = ReadSessions(dir.path(), {"a-"});
  EXPECT_EQ(of_a.evicted_reported, static_cast<uint64_t>(kFirst));
  EXPECT_TRUE(of_a.named_by["a-000001.loupe"].contains("a-000000.loupe"));
  for (const auto& [file, names] : ReadSessions(dir.path(), {"b-"}).named_by) {
    EXPECT_FALSE(names.contains("a-000000.loupe")) << file;
  }
}

TEST(DirectoryBudgetTest, OneBudgetPerDirectoryAndIdentity) {
  DirectoryBudgets budgets;
  const WriterIdentity ours{"host", kOurs};
  auto first = budgets.For("/traces", ours);
  EXPECT_EQ(budgets.For("/traces", ours), first);
  EXPECT_NE(budgets.For("/other", ours), first);
  EXPECT_NE(budgets.For("/traces", {"host", "louped /elsewhere"}), first);
  std::weak_ptr<DirectoryBudget> gone = first;
  first.reset();
  EXPECT_TRUE(gone.expired());  // the registry does not keep a budget alive
}

TEST(DirectoryBudgetTest, ReservedRoomCountsUntilTheWriterLeaves) {
  testing::TempDir dir;
  DirectoryBudget budget(dir.path(), {"", kOurs});
  ASSERT_TRUE(budget.Join("a", 64 << 10, std::nullopt).ok());
  ASSERT_TRUE(budget.Join("b", 64 << 10, std::nullopt).ok());
  EXPECT_EQ(budget.used_bytes(), 128u << 10);
  budget.Reserve("a", 0);
  EXPECT_EQ(budget.used_bytes(), 64u << 10);
  EXPECT_TRUE(budget.Leave("b").empty());
  EXPECT_EQ(budget.used_bytes(), 0u);
}

// What a file says of itself is its owner's word: a copy of a segment
// truncated to 1 TiB (sparse) and dated 2099 counts the blocks it takes
// and goes in the order of its header (capped by its ctime), so it neither
// fills the budget nor outlives what was written after it; a segment's
// mtime does not reorder it either.
TEST(DirectoryBudgetTest, ADecoyClaimsOnlyTheDiskItTakesAndNoAgeItSets) {
  testing::TempDir dir;
  WriteUnbudgeted(dir.path(), "a", 6000);
  std::vector<std::string> sealed;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
    sealed.push_back(entry.path().filename().string());
  }
  std::sort(sealed.begin(), sealed.end());
  ASSERT_GE(sealed.size(), 3u);
  const std::string first = sealed.front(), last = sealed.back();
  ASSERT_EQ(first, "a-000000.loupe");

  // The decoy: a copy of the first segment under a name of its own.
  const std::string decoy = dir.File("x-000001.loupe");
  fs::copy_file(dir.File(first), decoy);
  fs::resize_file(decoy, uint64_t{1} << 40);
  const auto in_2099 = fs::file_time_type::clock::now() + std::chrono::hours(24 * 365 * 70);
  const auto in_1970 = fs::file_time_type::clock::now() - std::chrono::hours(24 * 365 * 50);
  fs::last_write_time(decoy, in_2099);
  // mtimes that would reverse the order if they counted.
  fs::last_write_time(dir.File(first), in_2099);
  fs::last_write_time(dir.File(last), in_1970);

  DirectoryBudget budget(dir.path(), {"", kOurs});
  ASSERT_TRUE(budget.Join("c", 0, std::nullopt).ok());
  uint64_t allocated = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
    struct stat st;
    ASSERT_EQ(stat(entry.path().c_str(), &st), 0);
    allocated += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  EXPECT_EQ(budget.used_bytes(), allocated);
  EXPECT_LT(budget.used_bytes(), uint64_t{4} << 20);

  // Within its budget by what the files take: nothing goes.
  EXPECT_TRUE(budget.Enforce("c", 8 << 20, std::nullopt, {}).empty());
  for (const std::string& name : sealed) EXPECT_TRUE(fs::exists(dir.File(name))) << name;

  // One over: the oldest by its header goes, whatever the mtimes say (the
  // decoy has the first segment's header; the name breaks the tie).
  std::vector<Eviction> evicted = budget.Enforce("c", budget.used_bytes() - 1, std::nullopt, {});
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].name, first);
  EXPECT_FALSE(fs::exists(dir.File(first)));
  EXPECT_TRUE(fs::exists(dir.File(last)));
  EXPECT_TRUE(fs::exists(decoy));
  // Next: the decoy (made now, its header as old as the first), not the
  // last segment, which its mtime of 1970 would put first.
  evicted = budget.Enforce("c", budget.used_bytes() - 1, std::nullopt, {});
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].name, "x-000001.loupe");
  EXPECT_TRUE(fs::exists(dir.File(last)));
}

// The wall clock set back (an NTP step, a mistaken date): a segment sealed
// after it still counts as newer than those sealed before, so the oldest
// data goes first, not what was just written.
TEST(DirectoryBudgetTest, AClockSetBackDoesNotPutTheNewestSegmentFirstToGo) {
  testing::TempDir dir;
  WriteUnbudgeted(dir.path(), "a", 4000);
  ASSERT_TRUE(fs::exists(dir.File("a-000001.loupe")));
  int64_t now = int64_t{1'800'000'000} * 1'000'000'000;
  DirectoryBudget budget(dir.path(), {"", kOurs}, [&now] { return now; });
  budget.AddSealed("a", dir.File("a-000000.loupe"), 4096, getuid(), {});
  now -= int64_t{86'400} * 1'000'000'000;  // set back a day
  budget.AddSealed("a", dir.File("a-000001.loupe"), 4096, getuid(), {});
  EXPECT_EQ(budget.SegmentsOf("a"),
            (std::vector<std::string>{dir.File("a-000000.loupe"), dir.File("a-000001.loupe")}));
  const std::vector<Eviction> evicted = budget.Enforce("a", 4096, std::nullopt, {});
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].name, "a-000000.loupe");
  EXPECT_TRUE(fs::exists(dir.File("a-000001.loupe")));
}

// Someone who predicts the next segment names and takes them first (an
// active name, a sealed name) costs the writer those names, not its events.
TEST(DirectoryBudgetTest, SegmentNamesTakenBySomeoneElseAreSkipped) {
  testing::TempDir dir;
  Records records;
  WriterOptions options = Options(dir.path(), "s", nullptr);
  options.max_total_size = 64 << 20;
  auto writer = Create(options);
  std::ofstream(dir.File("s-000000.loupe.active")) << "squatter's";
  std::ofstream(dir.File("s-000001.loupe")) << "squatter's too";
  constexpr int kEvents = 3000;
  for (int i = 0; i < kEvents; ++i) ASSERT_TRUE(writer->Append(records.Next()).ok()) << i;
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->stats().events_lost, 0u);
  EXPECT_EQ(Slurp(dir.File("s-000000.loupe.active")), "squatter's");
  EXPECT_EQ(Slurp(dir.File("s-000001.loupe")), "squatter's too");
  ASSERT_TRUE(fs::exists(dir.File("s-000002.loupe")));
  std::vector<std::string> paths;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name != "s-000001.loupe" && name.ends_with(kSealedSuffix)) paths.push_back(entry.path());
  }
  auto trace = TraceReader::Open(paths);
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  uint64_t read = 0;
  while ((*trace)->Next(&record)) read += std::holds_alternative<SchedSwitch>(record.payload);
  EXPECT_EQ(read, static_cast<uint64_t>(kEvents));
}

}  // namespace
}  // namespace loupe::format
