// ElfFile against real binaries of tests/testprogs.
#include "daemon/probes/elf_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <future>

#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace loupe::probes {
namespace {

using testing::TestProgram;

TEST(ElfFileTest, NotesSymbolsAndOffsetsOfAPie) {
  auto file = ElfFile::Open(TestProgram("usdt_forms"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto notes = (*file)->UsdtNotes();
  ASSERT_TRUE(notes.ok()) << notes.status();
  EXPECT_EQ(notes->size(), 7u);
  for (const UsdtNote& note : *notes) {
    EXPECT_EQ(note.provider, "forms");
    auto offset = (*file)->FileOffset(note.pc);
    ASSERT_TRUE(offset.ok()) << offset.status();
    // sys/sdt.h probes are a one-byte nop.
    EXPECT_EQ((*file)->BytesAt(note.pc, 1), std::vector<uint8_t>{0x90});
  }
  auto global = (*file)->FindSymbol("forms_global");
  ASSERT_TRUE(global.has_value());
  EXPECT_TRUE(global->global);
  EXPECT_GE(global->size, 4u);  // an int; sanitizer builds pad globals with redzones
  EXPECT_FALSE((*file)->FindSymbol("no_such_symbol").has_value());
  EXPECT_TRUE((*file)->HasSymbolTable());
}

TEST(ElfFileTest, ShimProbesAreFiveByteNopsWithSemaphores) {
  auto file = ElfFile::Open(TestProgram("shim_app"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto notes = (*file)->UsdtNotes();
  ASSERT_TRUE(notes.ok()) << notes.status();
  ASSERT_FALSE(notes->empty());
  for (const UsdtNote& note : *notes) {
    EXPECT_EQ(note.provider, "loupe");
    EXPECT_NE(note.semaphore, 0u) << note.name;
    EXPECT_EQ((*file)->BytesAt(note.pc, 5), (std::vector<uint8_t>{0x0f, 0x1f, 0x44, 0x00, 0x00}));
    EXPECT_TRUE(ParseUsdtArgs(note.args).ok()) << note.args;
  }
}

TEST(ElfFileTest, NotElfIsAClearError) {
  auto missing = ElfFile::Open("/nonexistent/binary");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("/nonexistent/binary"), std::string::npos);
  auto text = ElfFile::Open("/etc/hostname");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().ToString().find("/etc/hostname"), std::string::npos);
}

// A FIFO named by `--uprobe /path/fifo:f` would block a plain open() until
// someone writes to it, and the session's start with it (issue 15).
TEST(ElfFileTest, AFifoOrDirectoryIsRefusedWithoutBlocking) {
  testing::TempDir dir;
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] { return ElfFile::Open(fifo); });
  ASSERT_EQ(opened.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "ElfFile::Open blocked on a FIFO";
  auto file = opened.get();
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().ToString().find(fifo + ": not a regular file"), std::string::npos)
      << file.status();
  auto directory = ElfFile::Open(dir.path());
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().ToString().find("not a regular file"), std::string::npos)
      << directory.status();
}

}  // namespace
}  // namespace loupe::probes
