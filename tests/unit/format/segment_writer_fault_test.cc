// SegmentWriter when writes fail (issue 14 item 3), with the file size limit
// (RLIMIT_FSIZE: writes past it fail with EFBIG, as on a full disk): a
// dropped block takes what it interned along, so every later block decodes
// and every file reads without a problem; a lost first block's preamble is
// in the next one; a trailer that does not fit is written once there is
// room; and the writer's ledger (records in files, losses) is what a reader
// of the files finds. The same on a real full disk: tests/integration/
// disk_full_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "daemon/format/loss_tally.h"
#include "daemon/format/record_json.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/segment_writer.h"
#include "tests/support/temp_dir.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

// Holds RLIMIT_FSIZE at `bytes` until lifted or destroyed.
class FileSizeLimit {
 public:
  FileSizeLimit() {
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &original_);
  }
  ~FileSizeLimit() { Lift(); }
  void Set(uint64_t bytes) {
    rlimit small = original_;
    small.rlim_cur = bytes;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  }
  void Lift() { setrlimit(RLIMIT_FSIZE, &original_); }

 private:
  rlimit original_{};
};

uint64_t ActiveSize(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().string().ends_with(".active")) return entry.file_size();
  }
  return 0;
}

void Sleep(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&ts, nullptr);
}

// Every event names a string of its own (shared by three events) and one
// of a few shared ones, so a dropped block often held the first use of
// strings later blocks use. The record's views live until the next call.
class Events {
 public:
  Record Make(uint64_t i) {
    static const std::string_view kShared[] = {"alpha", "beta", "gamma", "delta"};
    value_ = fmt::format("value-{}", i / 3);
    field_ = {.key = "n", .value = Value::String(value_)};
    return Record{.time_ns = TimeOf(i),
                  .tid = 7,
                  .cpu = 1,
                  .payload = Instant{.name = kShared[i % 4], .fields = {&field_, 1}}};
  }
  static uint64_t TimeOf(uint64_t i) { return 1'000 * kMs + i * 1000; }

 private:
  std::string value_;
  Field field_;
};

void ThreadPreamble(SegmentWriter& writer) {
  writer.AppendPreamble(Record{.tid = 7, .payload = ThreadInfo{7, 7, "main"}});
}

// What a reader finds in the folder, file by file.
struct Found {
  std::vector<std::string> events;  // as JSON, neither preamble nor Loss, in order
  uint64_t records = 0;             // every record, as verify counts them
  uint64_t preambles = 0;
  std::map<std::string, uint64_t> trailer_losses;  // "source/reason" -> count
  std::map<std::string, uint64_t> streamed_losses;
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
    auto reader = SegmentReader::Open(path);
    if (!reader.ok()) {
      found.problems.emplace_back(reader.status().message());
      continue;
    }
    Record record;
    bool first = true;
    while ((*reader)->Next(&record)) {
      ++found.records;
      if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
        found.streamed_losses[LossKey(loss->source, loss->reason)] += loss->count;
      } else if (std::holds_alternative<ThreadInfo>(record.payload)) {
        ++found.preambles;
        if (!first) found.problems.push_back(path + ": preamble not at the start");
      } else {
        found.events.push_back(RecordJson(record));
      }
      first = false;
    }
    for (const std::string& problem : (*reader)->problems()) found.problems.push_back(problem);
    if (!(*reader)->has_trailer()) found.problems.push_back(path + ": no trailer");
    if ((*reader)->trailer().event_count() != (*reader)->records_read()) {
      found.problems.push_back(path + ": trailer count differs from the records read");
    }
    for (const v1::LossTotal& loss : (*reader)->trailer().losses()) {
      found.trailer_losses[LossKey(static_cast<LossSource>(loss.source()),
                                   static_cast<LossReason>(loss.reason()))] += loss.count();
    }
  }
  return found;
}

// `part` in order within `whole`, as what survives of what was written.
bool IsSubsequence(const std::vector<std::string>& part, const std::vector<std::string>& whole) {
  size_t at = 0;
  for (const std::string& item : whole) {
    if (at < part.size() && part[at] == item) ++at;
  }
  return at == part.size();
}

uint64_t WriteFailed(const std::map<std::string, uint64_t>& losses) {
  auto it = losses.find("writer/write_failed");
  return it == losses.end() ? 0 : it->second;
}

WriterOptions Options(const std::string& dir) {
  WriterOptions options{.directory = dir, .session_id = "fault"};
  options.max_file_size = 256 << 10;
  options.max_total_size = 1ull << 30;
  options.block_bytes = 4 << 10;
  options.rotation_period_ns = 0;
  return options;
}

// Blocks fail for a while, three times over; what they interned is defined
// again by the next block written, so everything after decodes as written.
TEST(SegmentWriterFaultTest, ADroppedBlockTakesWhatItInternedAlong) {
  testing::TempDir dir;
  FileSizeLimit limit;
  auto writer = SegmentWriter::Create(Options(dir.path()), {}, ThreadPreamble);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::string> appended;
  Events events;
  uint64_t i = 0, failed_appends = 0;
  auto append = [&](uint64_t n) {
    for (uint64_t end = i + n; i < end; ++i) {
      const Record record = events.Make(i);
      appended.push_back(RecordJson(record));
      if (!(*writer)->Append(record).ok()) ++failed_appends;
    }
  };
  append(5'000);
  for (int round = 0; round < 3; ++round) {
    limit.Set(ActiveSize(dir.path()));  // as a disk that is full now
    append(3'000);
    limit.Lift();
    append(3'000);
  }
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_GE(failed_appends, 3u);
  EXPECT_GE((*writer)->stats().write_failures, 3u);

  const Found found = ReadFolder(dir.path());
  EXPECT_TRUE(found.problems.empty()) << ::testing::PrintToString(found.problems);
  const uint64_t lost = WriteFailed(found.trailer_losses);
  EXPECT_GT(lost, 0u);
  EXPECT_EQ(found.events.size() + lost, appended.size());
  EXPECT_TRUE(IsSubsequence(found.events, appended));  // strings decode to what was written
  EXPECT_EQ(WriteFailed(found.streamed_losses), lost);  // in the blocks too, not only the trailer
  // The ledger is what the files say.
  EXPECT_EQ((*writer)->stats().records_in_files, found.records);
  EXPECT_EQ((*writer)->stats().events_lost, lost);
  EXPECT_EQ((*writer)->losses(), found.trailer_losses);
}

// The segment's first block holds its preamble; lost, the next block has it.
TEST(SegmentWriterFaultTest, ALostFirstBlockTakesThePreambleToTheNextOne) {
  testing::TempDir dir;
  FileSizeLimit limit;
  auto writer = SegmentWriter::Create(Options(dir.path()), {}, ThreadPreamble);
  ASSERT_TRUE(writer.ok()) << writer.status();
  Events events;
  ASSERT_TRUE((*writer)->Append(events.Make(0)).ok());  // the header is written
  limit.Set(ActiveSize(dir.path()));
  uint64_t i = 1;
  for (; i < 2'000; ++i) (*writer)->Append(events.Make(i)).IgnoreError();
  limit.Lift();
  for (; i < 3'000; ++i) ASSERT_TRUE((*writer)->Append(events.Make(i)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  const Found found = ReadFolder(dir.path());
  EXPECT_TRUE(found.problems.empty()) << ::testing::PrintToString(found.problems);
  EXPECT_EQ(found.files, 1u);
  EXPECT_EQ(found.preambles, 1u);
  EXPECT_EQ(found.events.size() + WriteFailed(found.trailer_losses), 3'000u);
}

// At the seal, neither the symbol frame nor the trailer fits: the segment
// stays open, cut back to its blocks, takes events meanwhile, and is sealed
// once there is room, with the symbol table the hook gave the first time.
TEST(SegmentWriterFaultTest, ATrailerThatDoesNotFitIsWrittenOnceThereIsRoom) {
  testing::TempDir dir;
  FileSizeLimit limit;
  WriterOptions options = Options(dir.path());
  options.rotation_period_ns = 100 * kMs;
  int tables = 0;
  auto symbols = [&tables] {
    v1::SymbolTable table;
    for (int a = 0; a < 2'000; ++a) {
      v1::SymbolTable::Address* address = table.add_addresses();
      address->set_address(0x400000 + static_cast<uint64_t>(a) * 7919);
      address->add_frames()->set_function(fmt::format("function_{}_{}", tables, a));
    }
    ++tables;
    return table;
  };
  auto writer = SegmentWriter::Create(options, {}, ThreadPreamble, symbols);
  ASSERT_TRUE(writer.ok()) << writer.status();
  Events events;
  const uint64_t start = Events::TimeOf(0);
  uint64_t appended = 0;
  for (; appended < 1'000; ++appended) ASSERT_TRUE((*writer)->Append(events.Make(appended)).ok());
  ASSERT_TRUE((*writer)->Tick(start + 50 * kMs).ok());  // the block is flushed: only a seal is left
  limit.Set(ActiveSize(dir.path()) + 64);
  EXPECT_FALSE((*writer)->Tick(start + 200 * kMs).ok());  // time to rotate: no room
  EXPECT_EQ((*writer)->stats().segments_sealed, 0u);
  EXPECT_TRUE((*writer)->Tick(start + 300 * kMs).ok());  // not tried again at once
  for (; appended < 1'500; ++appended) (*writer)->Append(events.Make(appended)).IgnoreError();
  limit.Lift();
  Sleep(60 * kMs);  // the writer waits before it tries again
  ASSERT_TRUE((*writer)->Tick(start + 400 * kMs).ok());
  EXPECT_EQ((*writer)->stats().segments_sealed, 1u);
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(tables, 1);  // once for its segment, though the seal was tried twice

  const Found found = ReadFolder(dir.path());
  EXPECT_TRUE(found.problems.empty()) << ::testing::PrintToString(found.problems);
  EXPECT_EQ(found.events.size() + WriteFailed(found.trailer_losses), appended);
  auto reader = SegmentReader::Open(dir.File("fault-000000.loupe"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  Record record;
  while ((*reader)->Next(&record)) {
  }
  EXPECT_EQ((*reader)->symbols().addresses_size(), 2'000);
  EXPECT_EQ((*writer)->stats().records_in_files, found.records);
  EXPECT_EQ((*writer)->losses(), found.trailer_losses);
}

// Evictions by the budget: the ledger takes an evicted segment's records
// out of the files and its losses into the evicted count, as verify finds.
TEST(SegmentWriterFaultTest, TheLedgerFollowsEvictions) {
  testing::TempDir dir;
  WriterOptions options = Options(dir.path());
  options.max_file_size = 64 << 10;
  options.max_total_size = 2 * options.max_file_size;
  auto writer = SegmentWriter::Create(options, {}, ThreadPreamble);
  ASSERT_TRUE(writer.ok()) << writer.status();
  Events events;
  for (uint64_t i = 0; i < 400'000; ++i) {
    ASSERT_TRUE((*writer)->Append(events.Make(i)).ok());
    if (i % 1'000 == 0) {  // a loss from elsewhere now and then, in the trailers too
      ASSERT_TRUE((*writer)
                      ->Append({.time_ns = Events::TimeOf(i),
                                .payload = Loss{LossSource::kSched, LossReason::kRingFull, 3}})
                      .ok());
    }
  }
  ASSERT_TRUE((*writer)->Close().ok());
  ASSERT_GT((*writer)->stats().segments_evicted, 2u);
  const Found found = ReadFolder(dir.path());
  EXPECT_TRUE(found.problems.empty()) << ::testing::PrintToString(found.problems);
  EXPECT_EQ((*writer)->stats().records_in_files, found.records);
  EXPECT_EQ((*writer)->losses(), found.trailer_losses);
  EXPECT_TRUE(found.trailer_losses.contains("writer/segment_evicted"));
  EXPECT_EQ((*writer)->stats().segments_in_files, found.files);
}

}  // namespace
}  // namespace loupe::format
