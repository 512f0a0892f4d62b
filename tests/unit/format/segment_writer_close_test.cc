// SegmentWriter when its directory refuses work for a while (issue 15): a
// segment whose rename failed is renamed once the directory takes renames
// again, and Close is final — the destructor of a closed writer never calls
// its hooks, whose owner may be half destroyed by then (this was louped's
// std::bad_alloc and 100 % CPU spin after SIGTERM).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "daemon/format/segment_writer.h"
#include "daemon/format/trace_reader.h"
#include "tests/support/temp_dir.h"

namespace loupe::format {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMs = 1'000'000;

struct Hooks {
  int preambles = 0;
  int symbol_tables = 0;
};

std::unique_ptr<SegmentWriter> MakeWriter(const std::string& dir, Hooks* hooks) {
  WriterOptions options{.directory = dir, .session_id = "flaky"};
  options.max_file_size = 64 << 10;
  options.max_total_size = 1 << 20;
  options.rotation_period_ns = 10 * kMs;
  auto writer = SegmentWriter::Create(
      options, v1::SegmentHeader(),
      [hooks](SegmentWriter& w) {
        ++hooks->preambles;
        w.AppendPreamble(Record{.tid = 7, .payload = ThreadInfo{7, 7, "main"}});
      },
      [hooks] {
        ++hooks->symbol_tables;
        return v1::SymbolTable();
      });
  EXPECT_TRUE(writer.ok()) << writer.status();
  return writer.ok() ? *std::move(writer) : nullptr;
}

Record Switch(uint64_t time_ns) {
  return Record{.time_ns = time_ns, .tid = 7, .payload = SchedSwitch{.next_tid = 8}};
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The directory goes away (as a read-only one refuses creates and renames)
// and comes back; only the writer's fd kept the open segment.
TEST(SegmentWriterCloseTest, SegmentSealedWhileTheDirectoryRefusedIsRenamedLater) {
  testing::TempDir root;
  const std::string dir = root.File("traces"), away = root.File("away");
  fs::create_directory(dir);
  Hooks hooks;
  auto writer = MakeWriter(dir, &hooks);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Append(Switch(1 * kMs)).ok());
  fs::rename(dir, away);
  EXPECT_FALSE(writer->Tick(20 * kMs).ok());         // sealed, but the rename failed
  EXPECT_FALSE(writer->Append(Switch(21 * kMs)).ok());  // no file can be created: counted
  fs::rename(away, dir);
  ASSERT_TRUE(writer->Append(Switch(22 * kMs)).ok());
  EXPECT_TRUE(writer->Close().ok());
  for (const std::string& name : Names(dir)) {
    EXPECT_FALSE(name.ends_with(".active")) << name << " left unsealed";
  }
  EXPECT_EQ(Names(dir).size(), 2u);
  auto trace = TraceReader::Open({dir});
  ASSERT_TRUE(trace.ok()) << trace.status();
  Record record;
  uint64_t switches = 0, lost = 0;
  while ((*trace)->Next(&record)) {
    if (std::holds_alternative<SchedSwitch>(record.payload)) ++switches;
    if (const Loss* loss = std::get_if<Loss>(&record.payload)) lost += loss->count;
  }
  EXPECT_EQ(switches, 2u);
  EXPECT_EQ(lost, 1u);  // the record that found no file is reported, not dropped silently
}

TEST(SegmentWriterCloseTest, ClosedWriterNeverCallsItsHooksAgain) {
  testing::TempDir root;
  const std::string dir = root.File("traces"), away = root.File("away");
  fs::create_directory(dir);
  Hooks hooks;
  auto writer = MakeWriter(dir, &hooks);
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Append(Switch(1 * kMs)).ok());
  fs::rename(dir, away);
  writer->Tick(20 * kMs).IgnoreError();
  writer->Append(Switch(21 * kMs)).IgnoreError();  // a loss waiting for a segment
  EXPECT_FALSE(writer->Close().ok());              // that segment cannot be created
  fs::rename(away, dir);                           // writable again, as in the report
  const Hooks at_close = hooks;
  EXPECT_TRUE(writer->Close().ok());  // final: nothing more
  EXPECT_FALSE(writer->Append(Switch(30 * kMs)).ok());
  writer.reset();  // its owner would be half destroyed here
  EXPECT_EQ(hooks.preambles, at_close.preambles);
  EXPECT_EQ(hooks.symbol_tables, at_close.symbol_tables);
  for (const std::string& name : Names(dir)) {
    EXPECT_FALSE(name.ends_with(".active")) << name << " left unsealed";
  }
}

// A folder that cannot be created (here: below a regular file) fails the
// writer's creation and nothing else: no hook is called and no file is
// written anywhere. Before, the failed writer sealed an empty segment at
// its destructor into the unset directory — "/" for root — and crashed on
// the budget it had never joined, taking louped and its sessions down.
TEST(SegmentWriterCloseTest, AFolderThatCannotBeCreatedFailsCreateAndWritesNothing) {
  testing::TempDir root;
  const std::string file = root.File("a-file");
  { std::ofstream(file) << "not a folder"; }
  Hooks hooks;
  WriterOptions options{.directory = file + "/traces", .session_id = "refused-folder"};
  auto writer = SegmentWriter::Create(
      options, v1::SegmentHeader(), [&hooks](SegmentWriter&) { ++hooks.preambles; },
      [&hooks] {
        ++hooks.symbol_tables;
        return v1::SymbolTable();
      });
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find("create directory " + file + "/traces"),
            std::string_view::npos)
      << writer.status();
  EXPECT_EQ(hooks.preambles, 0);
  EXPECT_EQ(hooks.symbol_tables, 0);
  for (const std::string& dir : {std::string("/"), fs::current_path().string(), root.path()}) {
    for (const std::string& name : Names(dir)) {
      EXPECT_FALSE(name.starts_with("refused-folder")) << name << " written in " << dir;
    }
  }
}

}  // namespace
}  // namespace loupe::format
