// SegmentReader and TraceReader on damaged and odd input: a file cut at
// every byte offset, random corruption, files that are not traces, a
// segment never sealed, and time-ordered reading across sessions.
#include "daemon/format/segment_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "daemon/format/frame_codec.h"
#include "daemon/format/record_json.h"
#include "daemon/format/segment_writer.h"
#include "daemon/format/trace_reader.h"
#include "tests/support/every_kind.h"
#include "tests/support/temp_dir.h"
#include "tools/synthetic/synthetic_trace.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A small sealed segment of several blocks: every kind, each block flushed
// by the clock. Returns its path.
std::string SmallSegment(const testing::TempDir& dir) {
  WriterOptions options{.directory = dir.path(), .session_id = "small"};
  options.block_flush_period_ns = 1'000'000;
  auto writer = SegmentWriter::Create(options, {});
  EXPECT_TRUE(writer.ok());
  for (int block = 0; block < 4; ++block) {
    const uint64_t start = 1'000'000'000 + block * 10'000'000;
    for (const Record& record : testing::EveryKind(start)) {
      EXPECT_TRUE((*writer)->Append(record).ok());
    }
    EXPECT_TRUE((*writer)->Tick(start + 5'000'000).ok());
  }
  EXPECT_TRUE((*writer)->Close().ok());
  return dir.File("small-000000.loupe");
}

struct Read {
  bool opened = false;
  std::string open_error;
  std::vector<std::string> json;
  std::vector<uint64_t> frame_ends;  // per record
  std::vector<std::string> problems;
  bool complete = false;
};

Read ReadSegment(const std::string& path) {
  Read out;
  auto reader = SegmentReader::Open(path);
  if (!reader.ok()) {
    out.open_error = reader.status().ToString();
    return out;
  }
  out.opened = true;
  Record record;
  while ((*reader)->Next(&record)) {
    out.json.push_back(RecordJson(record));
    out.frame_ends.push_back((*reader)->frame_end_offset());
  }
  out.problems = (*reader)->problems();
  out.complete = (*reader)->complete();
  return out;
}

TEST(SegmentReaderTest, TruncationAtEveryOffsetKeepsEveryWholeFrame) {
  testing::TempDir dir;
  const std::string path = SmallSegment(dir);
  const std::string bytes = ReadFile(path);
  const Read full = ReadSegment(path);
  ASSERT_TRUE(full.problems.empty()) << ::testing::PrintToString(full.problems);
  ASSERT_EQ(full.json.size(), 4u * kMaxRecordKind);
  ASSERT_GE(std::set<uint64_t>(full.frame_ends.begin(), full.frame_ends.end()).size(), 4u);

  const std::string cut_path = dir.File("cut.loupe");
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    WriteFile(cut_path, std::string_view(bytes).substr(0, cut));
    const Read read = ReadSegment(cut_path);
    if (!read.opened) {  // cut inside the signature or header frame
      EXPECT_NE(read.open_error.find(cut_path), std::string::npos) << read.open_error;
      continue;
    }
    size_t expected = 0;
    while (expected < full.json.size() && full.frame_ends[expected] <= cut) ++expected;
    ASSERT_EQ(read.json.size(), expected) << "cut at " << cut;
    EXPECT_TRUE(std::equal(read.json.begin(), read.json.end(), full.json.begin()));
    EXPECT_FALSE(read.complete) << "cut at " << cut;
    ASSERT_FALSE(read.problems.empty()) << "cut at " << cut;
    EXPECT_NE(read.problems.back().find("offset"), std::string::npos);
  }
}

TEST(SegmentReaderTest, RandomCorruptionIsReportedNeverACrash) {
  testing::TempDir dir;
  const std::string path = SmallSegment(dir);
  const std::string bytes = ReadFile(path);
  const Read full = ReadSegment(path);
  std::mt19937_64 rng(7);
  const std::string bad_path = dir.File("bad.loupe");
  int detected = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string damaged = bytes;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
      damaged[rng() % damaged.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    WriteFile(bad_path, damaged);
    const Read read = ReadSegment(bad_path);
    if (!read.opened || !read.complete) {
      ++detected;
      if (read.opened) {
        EXPECT_FALSE(read.problems.empty());
        // What was read before the damage is what was written.
        EXPECT_TRUE(std::equal(read.json.begin(), read.json.end(), full.json.begin()));
      }
    } else {
      EXPECT_EQ(read.json, full.json) << "undetected corruption changed records, round " << round;
    }
  }
  EXPECT_GT(detected, 1400);  // checksums catch nearly every flip
}

TEST(SegmentReaderTest, NotATraceIsAClearError) {
  testing::TempDir dir;
  const std::string text = dir.File("notes.loupe");
  WriteFile(text, "just some text that is long enough to hold a signature\n");
  auto reader = SegmentReader::Open(text);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().ToString().find("not a Loupe trace segment"), std::string::npos);

  const std::string empty = dir.File("empty.loupe");
  WriteFile(empty, "");
  EXPECT_FALSE(SegmentReader::Open(empty).ok());
  EXPECT_FALSE(SegmentReader::Open(dir.File("missing.loupe")).ok());

  std::string future = SignatureFrame();
  future[16] = 9;  // format version 9
  const std::string newer = dir.File("newer.loupe");
  WriteFile(newer, future);
  reader = SegmentReader::Open(newer);
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().ToString().find("format version 9"), std::string::npos);
}

TEST(SegmentReaderTest, UnsealedSegmentReadsAsIncomplete) {
  testing::TempDir dir;
  WriterOptions options{.directory = dir.path(), .session_id = "live"};
  options.rotation_period_ns = 0;
  options.block_flush_period_ns = 1'000'000;
  auto writer = SegmentWriter::Create(options, {});
  ASSERT_TRUE(writer.ok());
  for (const Record& record : testing::EveryKind(5'000'000'000)) {
    ASSERT_TRUE((*writer)->Append(record).ok());
  }
  ASSERT_TRUE((*writer)->Tick(5'010'000'000).ok());  // flushes the block, keeps the file open
  // The writer is still open: the .active file has blocks but no trailer,
  // as after a crash.
  const std::string active = dir.File("live-000000.loupe.active");
  ASSERT_TRUE(fs::exists(active));
  const Read read = ReadSegment(active);
  EXPECT_EQ(read.json.size(), static_cast<size_t>(kMaxRecordKind));
  EXPECT_FALSE(read.complete);
  ASSERT_EQ(read.problems.size(), 1u);
  EXPECT_NE(read.problems[0].find("no trailer"), std::string::npos);
}

TEST(SegmentReaderTest, DataAfterTheTrailerIsReported) {
  testing::TempDir dir;
  const std::string path = SmallSegment(dir);
  std::string bytes = ReadFile(path);
  std::string extra;
  auto compressor = FrameCompressor::Create(3);
  ASSERT_TRUE(compressor.ok());
  ASSERT_TRUE(compressor->Compress(std::string("\x12\x00", 2), &extra).ok());
  WriteFile(path, bytes + extra);
  const Read read = ReadSegment(path);
  EXPECT_FALSE(read.complete);
  ASSERT_FALSE(read.problems.empty());
  EXPECT_NE(read.problems.back().find("after the trailer"), std::string::npos);
}

TEST(TraceReaderTest, MergesSessionsInTimeOrder) {
  testing::TempDir dir;
  uint64_t total = 0;
  for (int session = 0; session < 3; ++session) {
    WriterOptions options{.directory = dir.path(), .session_id = fmt::format("s{}", session)};
    options.max_file_size = 64 << 10;
    options.block_bytes = 4 << 10;
    auto writer = SegmentWriter::Create(options, {});
    ASSERT_TRUE(writer.ok());
    synthetic::Trace trace({.seed = 100 + static_cast<uint64_t>(session)});
    for (int i = 0; i < 30'000; ++i, ++total) ASSERT_TRUE((*writer)->Append(trace.Next()).ok());
    ASSERT_TRUE((*writer)->Close().ok());
  }
  WriteFile(dir.File("zz-garbage.loupe"), "not a segment at all, but named like one");

  auto trace = TraceReader::Open({dir.path()});
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  uint64_t count = 0, last = 0;
  std::set<std::string> sessions;
  std::map<uint32_t, uint64_t> first_of;  // session index -> its first record's time
  const SegmentReader* source = nullptr;
  while ((*trace)->Next(&record, &source)) {
    ASSERT_GE(record.time_ns, last) << "record " << count;
    last = record.time_ns;
    sessions.insert(source->header().session_id());
    // Numbered in the order they began: by their first records.
    first_of.try_emplace((*trace)->session(), record.time_ns);
    ++count;
  }
  ASSERT_EQ(first_of.size(), 3u);
  EXPECT_LE(first_of[0], first_of[1]);
  EXPECT_LE(first_of[1], first_of[2]);
  EXPECT_EQ(count, total);
  EXPECT_EQ(sessions.size(), 3u);
  int garbage = 0;
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    EXPECT_TRUE(summary.finished) << summary.path;
    if (summary.path.ends_with("zz-garbage.loupe")) {
      ++garbage;
      EXPECT_FALSE(summary.opened);
      ASSERT_EQ(summary.problems.size(), 1u);
      EXPECT_NE(summary.problems[0].find("not a Loupe trace segment"), std::string::npos);
    } else {
      EXPECT_TRUE(summary.complete) << summary.path;
    }
  }
  EXPECT_EQ(garbage, 1);
}

// A copy of a segment (the same session and sequence under another name)
// is read once: its records would repeat, out of time order. The sealed
// and whole one is read, whichever name comes first.
TEST(TraceReaderTest, ACopyOfASegmentIsReadOnce) {
  testing::TempDir dir;
  const std::string original = SmallSegment(dir);
  const std::string bytes = ReadFile(original);
  WriteFile(dir.File("a-copy.loupe"), bytes);
  WriteFile(dir.File("b-cut.loupe.active"), bytes.substr(0, bytes.size() / 2));
  const uint64_t records = ReadSegment(original).json.size();

  auto trace = TraceReader::Open({dir.path()});
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  uint64_t count = 0, last = 0;
  while ((*trace)->Next(&record)) {
    ASSERT_GE(record.time_ns, last);
    last = record.time_ns;
    ++count;
  }
  EXPECT_EQ(count, records);
  size_t copies = 0;
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    if (summary.copy_of.empty()) {
      EXPECT_EQ(summary.records_read, records) << summary.path;
      continue;
    }
    ++copies;
    EXPECT_EQ(summary.copy_of, dir.File("a-copy.loupe")) << summary.path << ": the first whole one";
    EXPECT_EQ(summary.records_read, 0u);
  }
  EXPECT_EQ(copies, 2u);
}

// Something named like a segment that is no file to read (a dangling
// symlink, a FIFO, a directory) is a segment that cannot be read: listed,
// with the reason, never skipped as if it had never been there, and never
// waited on.
TEST(TraceReaderTest, WhatIsNamedLikeASegmentButIsNoFileIsReportedNotSkipped) {
  testing::TempDir dir;
  SmallSegment(dir);
  std::filesystem::create_symlink(dir.File("moved-away"), dir.File("gone.loupe"));
  ASSERT_EQ(mkfifo(dir.File("pipe.loupe").c_str(), 0600), 0);
  std::filesystem::create_directory(dir.File("folder.loupe"));

  auto trace = TraceReader::Open({dir.path()});
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  while ((*trace)->Next(&record)) {
  }
  std::map<std::string, std::string> problems;
  for (const SegmentSummary& summary : (*trace)->summaries()) {
    if (summary.opened) continue;
    ASSERT_EQ(summary.problems.size(), 1u) << summary.path;
    problems[std::filesystem::path(summary.path).filename()] = summary.problems[0];
  }
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems["gone.loupe"].find("No such file or directory"), std::string::npos);
  EXPECT_NE(problems["pipe.loupe"].find("not a regular file"), std::string::npos);
  EXPECT_NE(problems["folder.loupe"].find("not a regular file"), std::string::npos);
}

TEST(TraceReaderTest, EmptyOrMissingPathsAreClearErrors) {
  testing::TempDir dir;
  auto empty = TraceReader::Open({dir.path()});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().ToString().find("no trace segments"), std::string::npos);
  auto missing = TraceReader::Open({dir.File("nope")});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("no such file"), std::string::npos);
}

}  // namespace
}  // namespace loupe::format
