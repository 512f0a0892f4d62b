// SegmentWriter on real files: rotation by size and time, retention by total
// size with every eviction reported in the trace, one sealed segment even
// without events, option checks, and a failing disk (RLIMIT_FSIZE) that
// loses nothing silently and damages nothing written.
#include "daemon/format/segment_writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <map>
#include <set>

#include "daemon/format/record_json.h"
#include "daemon/format/segment_reader.h"
#include "daemon/format/trace_reader.h"
#include "tests/support/temp_dir.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kSecond = 1'000'000'000;

WriterOptions SmallFiles(const std::string& dir) {
  WriterOptions options{.directory = dir, .session_id = "test"};
  options.max_file_size = 64 << 10;
  options.block_bytes = 4 << 10;
  options.max_total_size = 1ull << 30;
  options.rotation_period_ns = 0;
  return options;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct ReadBack {
  std::vector<std::string> json;  // non-preamble records, in order
  std::map<std::string, SegmentSummary> segments;
  uint64_t evicted_reported = 0;
};

ReadBack ReadAll(const std::string& dir) {
  ReadBack out;
  auto trace = TraceReader::Open({dir});
  EXPECT_TRUE(trace.ok()) << trace.status();
  if (!trace.ok()) return out;
  Record record;
  while ((*trace)->Next(&record)) {
    if (record.kind() == RecordKind::kThreadInfo) continue;  // the preamble
    if (const Loss* loss = std::get_if<Loss>(&record.payload);
        loss != nullptr && loss->reason == LossReason::kSegmentEvicted) {
      out.evicted_reported += loss->count;
      continue;
    }
    out.json.push_back(RecordJson(record));
  }
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    out.segments[fs::path(summary.path).filename().string()] = summary;
  }
  return out;
}

void ThreadPreamble(SegmentWriter& writer) {
  writer.AppendPreamble(Record{.tid = 7, .payload = ThreadInfo{7, 7, "main"}});
}

TEST(SegmentWriterTest, RotatesBySizeAndEverySegmentReadsAlone) {
  testing::TempDir dir;
  synthetic::Trace trace;
  std::vector<std::string> written;
  {
    auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, ThreadPreamble);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 100'000; ++i) {
      Record record = trace.Next();
      written.push_back(RecordJson(record));
      ASSERT_TRUE((*writer)->Append(record).ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const std::vector<std::string> files = Files(dir.path());
  ASSERT_GE(files.size(), 4u);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files[i], fmt::format("test-{:06}.loupe", i));
    const std::string path = dir.File(files[i]);
    EXPECT_LE(fs::file_size(path), 64u << 10) << files[i];
    // Each segment alone: its own header, preamble and complete trailer.
    auto reader = SegmentReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ((*reader)->header().sequence(), i);
    EXPECT_EQ((*reader)->header().session_id(), "test");
    Record first;
    ASSERT_TRUE((*reader)->Next(&first));
    EXPECT_EQ(first.kind(), RecordKind::kThreadInfo);
    while ((*reader)->Next(&first)) {
    }
    EXPECT_TRUE((*reader)->complete()) << ::testing::PrintToString((*reader)->problems());
  }
  EXPECT_EQ(ReadAll(dir.path()).json, written);
}

TEST(SegmentWriterTest, RotatesByTimeOnAppendAndOnTick) {
  testing::TempDir dir;
  WriterOptions options = SmallFiles(dir.path());
  options.rotation_period_ns = kSecond;
  auto writer = SegmentWriter::Create(options, {});
  ASSERT_TRUE(writer.ok());
  for (uint64_t t = 0; t < 35; ++t) {  // 0 .. 3.4 s
    ASSERT_TRUE(
        (*writer)
            ->Append(Record{.time_ns = 10 * kSecond + t * kSecond / 10, .payload = SpanEnd{t}})
            .ok());
  }
  EXPECT_EQ((*writer)->stats().segments_sealed, 3u);
  ASSERT_TRUE((*writer)->Tick(10 * kSecond + 3 * kSecond + kSecond / 2).ok());
  EXPECT_EQ((*writer)->stats().segments_sealed, 3u);  // the fourth is 0.4 s old
  ASSERT_TRUE((*writer)->Tick(10 * kSecond + 4 * kSecond).ok());
  EXPECT_EQ((*writer)->stats().segments_sealed, 4u);
  // Idle: nothing to put in a segment, so none is made.
  ASSERT_TRUE((*writer)->Tick(10 * kSecond + 9 * kSecond).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ(Files(dir.path()).size(), 4u);
  ReadBack back = ReadAll(dir.path());
  EXPECT_EQ(back.json.size(), 35u);
  EXPECT_EQ(back.segments["test-000000.loupe"].trailer.event_count(), 10u);
}

// A session with no events still leaves a trace: one sealed segment with
// its header, preamble and a complete trailer, made at Close (not before:
// idle ticks make nothing).
TEST(SegmentWriterTest, AnEmptySessionLeavesOneSealedSegment) {
  testing::TempDir dir;
  auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, ThreadPreamble);
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Tick(100 * kSecond).ok());
  EXPECT_TRUE(Files(dir.path()).empty());
  ASSERT_TRUE((*writer)->Close().ok());
  ASSERT_EQ(Files(dir.path()), std::vector<std::string>{"test-000000.loupe"});
  auto reader = SegmentReader::Open(dir.File("test-000000.loupe"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  Record record;
  ASSERT_TRUE((*reader)->Next(&record));
  EXPECT_EQ(record.kind(), RecordKind::kThreadInfo);
  EXPECT_FALSE((*reader)->Next(&record));
  EXPECT_TRUE((*reader)->complete()) << ::testing::PrintToString((*reader)->problems());
  EXPECT_EQ((*reader)->trailer().event_count(), 1u);
  EXPECT_EQ((*writer)->stats().records_in_files, 1u);
  EXPECT_TRUE((*writer)->losses().empty());
}

// A note goes in the trailer of the segment open when it was made, once:
// the segments after it do not repeat it. A session's note (a probe not
// placed, said at attach, before any event) is in every segment's.
TEST(SegmentWriterTest, ANoteIsInTheTrailerOfItsSegmentOnly) {
  testing::TempDir dir;
  synthetic::Trace trace;
  {
    auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, ThreadPreamble);
    ASSERT_TRUE(writer.ok()) << writer.status();
    (*writer)->AddSessionNote("--uprobe 'svc:no_such' in pid 7: no symbol 'no_such' in /srv/svc");
    ASSERT_TRUE((*writer)->Append(trace.Next()).ok());
    (*writer)->AddNote("pid 7 called exec into another program");
    for (int i = 0; i < 50'000; ++i) ASSERT_TRUE((*writer)->Append(trace.Next()).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const std::vector<std::string> files = Files(dir.path());
  ASSERT_GE(files.size(), 2u);
  for (size_t i = 0; i < files.size(); ++i) {
    auto reader = SegmentReader::Open(dir.File(files[i]));
    ASSERT_TRUE(reader.ok()) << reader.status();
    Record record;
    while ((*reader)->Next(&record)) {
    }
    ASSERT_TRUE((*reader)->has_trailer());
    if (i == 0) {
      ASSERT_EQ((*reader)->trailer().notes_size(), 2);
      EXPECT_EQ((*reader)->trailer().notes(0),
                "--uprobe 'svc:no_such' in pid 7: no symbol 'no_such' in /srv/svc");
      EXPECT_EQ((*reader)->trailer().notes(1), "pid 7 called exec into another program");
    } else {
      ASSERT_EQ((*reader)->trailer().notes_size(), 1) << files[i] << ": the session's note only";
      EXPECT_EQ((*reader)->trailer().notes(0),
                "--uprobe 'svc:no_such' in pid 7: no symbol 'no_such' in /srv/svc");
    }
    EXPECT_TRUE((*reader)->complete()) << "a note is not a loss";
  }
}

// Cut content (a string or stack past its cap, a stack walk stopped at a bad
// frame) is counted in the trailer but leaves the verdict complete; a lost
// event does not.
TEST(SegmentWriterTest, CutsAreCountedButOnlyLossesMakeASegmentIncomplete) {
  for (const bool with_loss : {false, true}) {
    testing::TempDir dir;
    auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, ThreadPreamble);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append({.time_ns = kSecond, .tid = 7, .payload = SpanEnd{.span_id = 1}}).ok());
    for (const LossReason cut : {LossReason::kStringTruncated, LossReason::kStackTruncated,
                                 LossReason::kUnwindStopped}) {
      ASSERT_TRUE((*writer)->Append({.time_ns = kSecond, .payload = Loss{LossSource::kUsdt, cut, 2}}).ok());
    }
    if (with_loss) {
      ASSERT_TRUE((*writer)
                      ->Append({.time_ns = kSecond,
                                .payload = Loss{LossSource::kSched, LossReason::kRingFull, 5}})
                      .ok());
    }
    ASSERT_TRUE((*writer)->Close().ok());
    ReadBack back = ReadAll(dir.path());
    const v1::SegmentTrailer& trailer = back.segments["test-000000.loupe"].trailer;
    EXPECT_EQ(trailer.losses_size(), with_loss ? 4 : 3);
    EXPECT_EQ(trailer.verdict(), with_loss ? v1::INCOMPLETE : v1::COMPLETE);
    EXPECT_EQ(trailer.reasons_size(), with_loss ? 1 : 0);
  }
}

TEST(SegmentWriterTest, EvictsOldestFirstAndReportsItInTheNextSegment) {
  testing::TempDir dir;
  WriterOptions options = SmallFiles(dir.path());
  options.max_total_size = 3 * options.max_file_size;
  synthetic::Trace trace;
  std::vector<std::string> written;
  auto writer = SegmentWriter::Create(options, {});
  ASSERT_TRUE(writer.ok());
  for (int i = 0; i < 200'000; ++i) {
    Record record = trace.Next();
    written.push_back(RecordJson(record));
    ASSERT_TRUE((*writer)->Append(record).ok());
    if (i % 5000 == 0) {
      uint64_t on_disk = 0;
      for (const auto& entry : fs::directory_iterator(dir.path())) on_disk += entry.file_size();
      ASSERT_LE(on_disk, options.max_total_size);
    }
  }
  ASSERT_TRUE((*writer)->Close().ok());
  const WriterStats stats = (*writer)->stats();
  ASSERT_GT(stats.segments_evicted, 3u);

  const std::vector<std::string> files = Files(dir.path());
  // The newest survive, numbered without gaps up to the last one sealed.
  ASSERT_EQ(files.size(), stats.segments_sealed - stats.segments_evicted);
  EXPECT_EQ(files.front(), fmt::format("test-{:06}.loupe", stats.segments_evicted));
  // The bytes still in files are those of the files left (attach and status say them).
  uint64_t on_disk = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) on_disk += entry.file_size();
  EXPECT_EQ(stats.bytes_written - stats.bytes_evicted, on_disk);

  ReadBack back = ReadAll(dir.path());
  // Nothing vanished unaccounted: what is left plus what was reported evicted.
  EXPECT_EQ(back.json.size() + back.evicted_reported, written.size());
  EXPECT_EQ(stats.events_lost, back.evicted_reported);
  // What is left is the tail of what was written, in order.
  EXPECT_TRUE(std::equal(back.json.begin(), back.json.end(),
                         written.end() - static_cast<ptrdiff_t>(back.json.size())));
  // Trailers name the evicted segments, the most recent among them.
  std::set<std::string> named;
  for (const auto& [name, summary] : back.segments) {
    for (const std::string& evicted : summary.trailer.evicted_segments()) named.insert(evicted);
  }
  EXPECT_TRUE(named.contains(fmt::format("test-{:06}.loupe", stats.segments_evicted - 1)));
  EXPECT_LT(*named.rbegin(), files.front());
  EXPECT_EQ(back.segments[files.front()].trailer.verdict(), v1::INCOMPLETE);
}

TEST(SegmentWriterTest, EarlierFilesCountAgainstTheBudgetAndNumberingContinues) {
  testing::TempDir dir;
  WriterOptions options = SmallFiles(dir.path());
  synthetic::Trace trace;
  uint64_t written = 0;
  for (int run = 0; run < 2; ++run) {  // each run fills about two files
    auto writer = SegmentWriter::Create(options, {});
    ASSERT_TRUE(writer.ok());
    for (int i = 0; i < 30'000; ++i, ++written) ASSERT_TRUE((*writer)->Append(trace.Next()).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  std::vector<std::string> files = Files(dir.path());
  ASSERT_GE(files.size(), 4u);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ(files[i], fmt::format("test-{:06}.loupe", i));  // run two went on numbering
  }

  // A budget of one file plus headroom: starting evicts all but the newest
  // earlier file, and the first new segment reports what that lost.
  options.max_total_size = 2 * options.max_file_size;
  auto tight = SegmentWriter::Create(options, {});
  ASSERT_TRUE(tight.ok());
  const uint64_t evicted = (*tight)->stats().segments_evicted;
  EXPECT_GE(evicted, files.size() - 2);  // the newest (a run's short last file) may fit two
  ASSERT_TRUE((*tight)->Append(trace.Next()).ok());
  ++written;
  ASSERT_TRUE((*tight)->Close().ok());
  ReadBack back = ReadAll(dir.path());
  EXPECT_EQ(back.json.size() + back.evicted_reported, written);
  std::vector<std::string> expected(files.begin() + static_cast<ptrdiff_t>(evicted), files.end());
  expected.push_back(fmt::format("test-{:06}.loupe", files.size()));
  EXPECT_EQ(Files(dir.path()), expected);
}

// A session's id reused for a new run (--session-id): refused, naming why;
// nothing of the first run is touched.
TEST(SegmentWriterTest, ANewSessionRefusesAFolderHoldingItsIdsFiles) {
  testing::TempDir dir;
  WriterOptions options = SmallFiles(dir.path());
  options.new_session = true;
  synthetic::Trace trace;
  {
    auto first = SegmentWriter::Create(options, {});
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Append(trace.Next()).ok());
    ASSERT_TRUE((*first)->Close().ok());
  }
  const std::vector<std::string> before = Files(dir.path());
  auto again = SegmentWriter::Create(options, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("session id 'test'"), std::string::npos) << again.status();
  EXPECT_EQ(Files(dir.path()), before);
  options.session_id = "other";
  EXPECT_TRUE(SegmentWriter::Create(options, {}).ok());
}

TEST(SegmentWriterTest, RejectsBadOptionsNamingTheKey) {
  testing::TempDir dir;
  struct Case {
    std::function<void(WriterOptions&)> mutate;
    std::string expected;
  };
  const Case cases[] = {
      {[](WriterOptions& o) { o.max_file_size = 10; }, "max_file_size = 10"},
      {[](WriterOptions& o) { o.max_total_size = o.max_file_size; }, "max_total_size"},
      {[](WriterOptions& o) { o.zstd_level = 40; }, "zstd_level = 40"},
      {[](WriterOptions& o) { o.block_bytes = 1; }, "block_bytes = 1"},
      {[](WriterOptions& o) { o.rotation_period_ns = 5; }, "rotation_period_ns = 5"},
      {[](WriterOptions& o) { o.session_id = "../etc"; }, "session_id '../etc'"},
      {[](WriterOptions& o) { o.directory = ""; }, "output directory is empty"},
  };
  for (const Case& c : cases) {
    WriterOptions options = SmallFiles(dir.path());
    c.mutate(options);
    auto writer = SegmentWriter::Create(options, {});
    ASSERT_FALSE(writer.ok()) << c.expected;
    EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(writer.status().ToString().find(c.expected), std::string::npos) << writer.status();
  }
}

// A disk that fills up: writes fail with EFBIG past RLIMIT_FSIZE. The file
// stays readable, and the events that could not be written are counted
// exactly (the writer's own Loss records are reports, not events).
TEST(SegmentWriterTest, FailedWritesAreCountedAndTheFileStaysReadable) {
  testing::TempDir dir;
  signal(SIGXFSZ, SIG_IGN);
  rlimit original;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &original), 0);
  WriterOptions options = SmallFiles(dir.path());
  options.max_file_size = 1 << 20;
  auto writer = SegmentWriter::Create(options, {});
  ASSERT_TRUE(writer.ok());

  rlimit small = original;
  small.rlim_cur = 100 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  synthetic::Trace trace;
  uint64_t appended = 0, failures = 0;
  for (int i = 0; i < 100'000; ++i, ++appended) {
    if (!(*writer)->Append(trace.Next()).ok()) ++failures;
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &original), 0);  // room for the trailer again
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_GT(failures, 0u);

  const std::vector<std::string> files = Files(dir.path());
  ASSERT_EQ(files.size(), 1u);
  auto reader = SegmentReader::Open(dir.File(files[0]));
  ASSERT_TRUE(reader.ok());
  Record record;
  uint64_t events = 0, streamed_lost = 0;
  while ((*reader)->Next(&record)) {
    if (const Loss* loss = std::get_if<Loss>(&record.payload)) {
      streamed_lost += loss->count;
    } else {
      ++events;
    }
  }
  EXPECT_TRUE((*reader)->problems().empty()) << ::testing::PrintToString((*reader)->problems());
  ASSERT_TRUE((*reader)->has_trailer());
  const v1::SegmentTrailer& trailer = (*reader)->trailer();
  EXPECT_EQ(trailer.verdict(), v1::INCOMPLETE);
  uint64_t lost = 0;
  for (const v1::LossTotal& loss : trailer.losses()) {
    if (loss.reason() == v1::WRITE_FAILED) lost += loss.count();
  }
  EXPECT_EQ(events + lost, appended);
  EXPECT_EQ(streamed_lost, lost);  // each failure stated in the next block, not just the trailer
  EXPECT_EQ(trailer.event_count(), (*reader)->records_read());
  EXPECT_EQ((*writer)->stats().records_in_files, (*reader)->records_read());
  EXPECT_EQ((*writer)->losses(), (std::map<std::string, uint64_t>{{"writer/write_failed", lost}}));
}

}  // namespace
}  // namespace loupe::format

namespace loupe::format {
namespace {

// The symbol hook runs once per sealed segment, its table lands in that
// segment alone, and the files stay within max_file_size.
TEST(SegmentWriterTest, EverySegmentCarriesTheSymbolTableOfItsSeal) {
  testing::TempDir dir;
  synthetic::Trace trace;
  int seals = 0;
  auto symbols = [&seals] {
    v1::SymbolTable table;
    v1::SymbolTable::Address* address = table.add_addresses();
    address->set_pid(7);
    address->set_address(0x1000 + seals);
    address->add_frames()->set_function(fmt::format("function_{}", seals++));
    return table;
  };
  {
    auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, ThreadPreamble, symbols);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int i = 0; i < 100'000; ++i) ASSERT_TRUE((*writer)->Append(trace.Next()).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const std::vector<std::string> files = Files(dir.path());
  ASSERT_GE(files.size(), 4u);
  EXPECT_EQ(static_cast<size_t>(seals), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_LE(fs::file_size(dir.File(files[i])), 64u << 10);
    auto reader = SegmentReader::Open(dir.File(files[i]));
    ASSERT_TRUE(reader.ok());
    Record record;
    while ((*reader)->Next(&record)) {
    }
    EXPECT_TRUE((*reader)->complete()) << ::testing::PrintToString((*reader)->problems());
    ASSERT_EQ((*reader)->symbols().addresses_size(), 1);
    EXPECT_EQ((*reader)->symbols().addresses(0).frames(0).function(), fmt::format("function_{}", i));
  }
}

// A table over the room left is replaced by a note, and the cut is counted.
TEST(SegmentWriterTest, SymbolTableTooBigForTheFileIsANoteAndALoss) {
  testing::TempDir dir;
  auto huge = [] {
    v1::SymbolTable table;
    for (int i = 0; i < 20'000; ++i) {
      v1::SymbolTable::Address* address = table.add_addresses();
      address->set_address(static_cast<uint64_t>(i) * 7919);
      address->add_frames()->set_function(fmt::format("f{:x}{}", i * 2654435761u, i));
    }
    return table;
  };
  {
    auto writer = SegmentWriter::Create(SmallFiles(dir.path()), {}, {}, huge);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Append(Record{.time_ns = kSecond, .tid = 1, .payload = SchedSwitch{2, 0}})
                    .ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  const std::vector<std::string> files = Files(dir.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_LE(fs::file_size(dir.File(files[0])), 64u << 10);
  auto reader = SegmentReader::Open(dir.File(files[0]));
  ASSERT_TRUE(reader.ok());
  Record record;
  while ((*reader)->Next(&record)) {
  }
  EXPECT_EQ((*reader)->symbols().addresses_size(), 0);
  ASSERT_EQ((*reader)->symbols().notes_size(), 1);
  EXPECT_NE((*reader)->symbols().notes(0).find("20000 addresses"), std::string::npos);
  bool counted = false;
  for (const auto& loss : (*reader)->trailer().losses()) {
    counted |= loss.source() == v1::SOURCE_SYMBOLIZER && loss.reason() == v1::CAP_REACHED &&
               loss.count() == 20'000;
  }
  EXPECT_TRUE(counted) << (*reader)->trailer().DebugString();
}

}  // namespace
}  // namespace loupe::format
