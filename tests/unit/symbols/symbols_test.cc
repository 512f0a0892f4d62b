// The symbolization parts that need no privileges: /proc/<pid>/maps and
// kallsyms parsing, build ids, libdw on the test programs, demangling.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "daemon/symbols/address_spaces.h"
#include "daemon/symbols/demangle.h"
#include "daemon/symbols/elf_symbolizer.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/perf_map.h"
#include "daemon/symbols/object_file.h"
#include "daemon/symbols/process_maps.h"
#include "daemon/symbols/symbolizer.h"
#include "tests/support/child_process.h"

namespace loupe::symbols {
namespace {

TEST(ProcessMapsTest, ParsesFileAnonymousDeletedAndSkipsJunk) {
  const std::vector<Mapping> maps = ParseProcMaps(
      "7f0000001000-7f0000003000 r-xp 00002000 08:01 1234   /usr/lib/libc.so.6\n"
      "garbage line\n"
      "00400000-00401000 r-xp 00000000 fd:00 77 /tmp/app (deleted)\n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f0000004000-7f0000003000 r-xp 00000000 08:01 1 /backwards\n"
      "7f0000005000-7f0000006000 r-xp 00000000 08:01 x /bad-inode\n");
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].start, 0x400000u);
  EXPECT_EQ(maps[0].path, "/tmp/app");
  EXPECT_TRUE(maps[0].deleted);
  EXPECT_TRUE(maps[0].is_file());
  EXPECT_EQ(maps[0].device, (0xfdull << 32) | 0);
  EXPECT_EQ(maps[1].offset, 0x2000u);
  EXPECT_TRUE(maps[1].executable);
  EXPECT_EQ(maps[1].inode, 1234u);
  EXPECT_EQ(maps[2].path, "[stack]");
  EXPECT_FALSE(maps[2].is_file());
  EXPECT_EQ(FindMapping(maps, 0x7f0000002fff), &maps[1]);
  EXPECT_EQ(FindMapping(maps, 0x7f0000003000), nullptr);
  EXPECT_EQ(FindMapping(maps, 0x3fffff), nullptr);
  EXPECT_TRUE(ParseProcMaps("").empty());
}

TEST(ProcessMapsTest, ReadsThisProcess) {
  auto maps = ReadProcMaps(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(maps.ok()) << maps.status();
  const Mapping* self = FindMapping(*maps, reinterpret_cast<uint64_t>(&ParseProcMaps));
  ASSERT_NE(self, nullptr);
  EXPECT_TRUE(self->executable);
  EXPECT_FALSE(ReadProcMaps(999'999'999).ok());
}

// A real child that exited before its fork was handled: its addresses are
// its parent's mappings, which a fork gives it whole. One that exec'd and
// is gone has no mappings known: the old ones would name its new code wrongly.
TEST(AddressSpacesTest, AGoneChildHasItsParentsMappingsUntilItExecs) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const auto self = static_cast<uint32_t>(getpid());
  const auto gone = static_cast<uint32_t>(child);
  const auto code = reinterpret_cast<uint64_t>(&ReadProcMaps);
  AddressSpaces spaces;
  spaces.Snapshot(self, 1);
  ASSERT_NE(spaces.Locate(self, code, 1).object, nullptr);
  EXPECT_EQ(spaces.Locate(gone, code, 1).mapping, nullptr);  // nothing read: it is gone
  spaces.Forked(self, gone, 2);
  const Location inherited = spaces.Locate(gone, code, 2);
  ASSERT_NE(inherited.object, nullptr);
  EXPECT_EQ(inherited.file_offset, spaces.Locate(self, code, 2).file_offset);
  spaces.Snapshot(gone, 3, /*exec=*/true);
  EXPECT_EQ(spaces.Locate(gone, code, 3).mapping, nullptr);
}

// C functions with one-letter names are names, not type encodings.
TEST(DemangleTest, OnlyMangledNamesAreDemangled) {
  EXPECT_EQ(Demangle("w"), "w");
  EXPECT_EQ(Demangle("x"), "x");
  EXPECT_EQ(Demangle("i"), "i");
  EXPECT_EQ(Demangle("Pv"), "Pv");
  EXPECT_EQ(Demangle("_ZN4loup3runEv"), "loup::run()");
  EXPECT_EQ(Demangle("_Z"), "_Z");  // not a whole mangled name: kept
  EXPECT_EQ(Demangle(nullptr), "");
}

// Rust's std is v0-mangled by recent toolchains, and legacy names end in a
// hash: both read as paths, as perf and debuggers print them (names taken
// from rustc 1.95's and 1.63's output).
TEST(DemangleTest, RustNamesOfBothSchemesReadAsPaths) {
  EXPECT_EQ(Demangle("_RNvNtNtCsjrHSEGnQ3l9_3std6thread9functions5sleep"),
            "std::thread::functions::sleep");
  EXPECT_EQ(Demangle("_RNvCsfLfy6EI15iL_7___rustc20___rust_panic_cleanup"),
            "__rustc::__rust_panic_cleanup");
  EXPECT_EQ(Demangle("_ZN1p4main17h5c88a7e8304aa465E"), "p::main");
  EXPECT_EQ(Demangle("_ZN3std9panicking3try7cleanup17h0123456789abcdefE"),
            "std::panicking::try::cleanup");
  // C++ with an 'h' segment is C++, and what libiberty cannot read is kept.
  EXPECT_EQ(Demangle("_ZN4loup3runEv"), "loup::run()");
  EXPECT_EQ(Demangle("_RNotRust"), "_RNotRust");
}

TEST(KernelSymbolsTest, NamesTextSymbolsAndSaysWhenAddressesAreHidden) {
  const KernelSymbols kernel(
      "ffffffff81000000 T _stext\n"
      "ffffffff81000100 t do_thing\n"
      "ffffffff81000200 D some_data\n"
      "ffffffffc0000000 t mod_func\t[my_module]\n"
      "zz T junk\n");
  EXPECT_EQ(kernel.Name(0xffffffff81000150), "do_thing");
  EXPECT_EQ(kernel.Name(0xffffffff81000250), "do_thing");  // data is not a function
  EXPECT_EQ(kernel.Name(0xffffffffc0000010), "mod_func [my_module]");
  EXPECT_EQ(kernel.Name(0x1000), "");
  EXPECT_TRUE(kernel.note().empty());
  const KernelSymbols hidden("0000000000000000 T _stext\n0000000000000000 t do_thing\n");
  EXPECT_EQ(hidden.Name(0xffffffff81000150), "");
  EXPECT_NE(hidden.note().find("kptr_restrict"), std::string::npos);
}

ObjectFile Open(const std::string& path) {
  ObjectFile object;
  object.path = path;
  object.debug_dir = path.substr(0, path.rfind('/'));
  object.fd.Reset(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  object.build_id = ReadBuildId(object.fd.get());
  return object;
}

TEST(ElfSymbolizerTest, InlineChainOfTheTestProgram) {
  const ObjectFile object = Open(testing::TestProgram("symbols_app_nopie"));
  // readelf's build id, as text, equals ours.
  FILE* pipe = popen(("readelf -n " + object.path + " | awk '/Build ID/{print $3}'").c_str(), "r");
  char text[128] = {};
  ASSERT_NE(fgets(text, sizeof text, pipe), nullptr);
  pclose(pipe);
  EXPECT_EQ(HexOf(object.build_id) + "\n", text);

  ElfSymbolizer symbolizer(object);
  EXPECT_EQ(symbolizer.note(), "");
  // Every file offset inside leaf_work names it last; somewhere in it (the
  // loop) mix shows as inlined into it, whichever compiler built the program
  // (clang emits no .debug_aranges: the units' ranges are searched).
  FILE* nm = popen(("nm -S " + object.path + " | awk '$4==\"leaf_work\"{print $1, $2}'").c_str(), "r");
  ASSERT_NE(fgets(text, sizeof text, nm), nullptr);
  pclose(nm);
  unsigned long leaf = 0, size = 0;
  ASSERT_EQ(sscanf(text, "%lx %lx", &leaf, &size), 2);
  bool saw_chain = false;
  for (uint64_t address = leaf; address < leaf + size; ++address) {
    const std::vector<SourceFrame> frames = symbolizer.Symbolize(address - 0x400000);
    ASSERT_FALSE(frames.empty());
    EXPECT_EQ(frames.back().function, "leaf_work");
    if (frames.size() == 2 && frames[0].function == "mix" && frames[0].inlined &&
        frames[0].file.ends_with("symbols_app.c") && frames[0].line > 0) {
      saw_chain = true;
    }
  }
  EXPECT_TRUE(saw_chain);
  EXPECT_TRUE(symbolizer.Symbolize(0x7fffffff).empty());  // outside every segment
}

// A location asked for twice before it was resolved: the second request
// empties the queue without resolving anything, and WaitIdle must hear it
// (it used to wait out its whole timeout: 30 s at each session end).
TEST(SymbolizerTest, WaitIdleReturnsOnceTheQueueEmptiesWhateverEmptiedIt) {
  auto object = std::make_shared<ObjectFile>(Open(testing::TestProgram("symbols_app_nopie")));
  for (int round = 0; round < 20; ++round) {
    Symbolizer symbolizer;
    for (int i = 0; i < 4; ++i) symbolizer.Prefetch(object, 0x1000 + round);
    EXPECT_TRUE(symbolizer.WaitIdle(10'000'000'000)) << "round " << round;
    EXPECT_TRUE(symbolizer.Lookup(*object, 0x1000 + round).has_value());
  }
}

TEST(ElfSymbolizerTest, NotElfGivesANoteAndNoFrames) {
  ObjectFile object = Open("/etc/hostname");
  EXPECT_EQ(object.build_id, "");
  ElfSymbolizer symbolizer(object);
  EXPECT_NE(symbolizer.note(), "");
  EXPECT_TRUE(symbolizer.Symbolize(0).empty());
}

TEST(PerfMapTest, NamesJitRangesAndSkipsJunk) {
  const PerfMap map(
      "7f0000001000 100 jit_spin\n"
      "not a line\n"
      "0x7f0000002000 0x20 LazyCompile:~handler app.js:10\n"
      "7f0000003000 0 empty\n");
  EXPECT_EQ(map.Name(0x7f0000001000), "jit_spin");
  EXPECT_EQ(map.Name(0x7f00000010ff), "jit_spin");
  EXPECT_EQ(map.Name(0x7f0000001100), "");
  EXPECT_EQ(map.Name(0x7f0000002010), "LazyCompile:~handler app.js:10");
  EXPECT_EQ(map.Name(0x7f0000003000), "");
  EXPECT_TRUE(PerfMap::Load(999'999'999).empty());
}

// The map lies in the traced process's /tmp, where anyone may put anything:
// a FIFO must not block, a symlink must not be followed; only the process's
// own regular file is read.
TEST(PerfMapTest, OnlyTheProcesssOwnRegularFileIsRead) {
  const std::string path = fmt::format("/tmp/perf-{}.map", getpid());
  const std::string target = path + ".target";
  auto clean = [&] {
    unlink(path.c_str());
    unlink(target.c_str());
  };
  clean();
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EXPECT_TRUE(PerfMap::Load(static_cast<uint32_t>(getpid())).empty());  // and returned at once
  clean();
  std::ofstream(target) << "7f0000001000 100 jit_spin\n";
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  EXPECT_TRUE(PerfMap::Load(static_cast<uint32_t>(getpid())).empty());
  clean();
  std::ofstream(path) << "7f0000001000 100 jit_spin\n";
  EXPECT_EQ(PerfMap::Load(static_cast<uint32_t>(getpid())).Name(0x7f0000001000), "jit_spin");
  clean();
}

TEST(DemangleTest, CxxNamesAreReadable) {
  EXPECT_EQ(Demangle("_ZN5loupe6format6Record4kindEv"), "loupe::format::Record::kind()");
  EXPECT_EQ(Demangle("main"), "main");
  EXPECT_EQ(Demangle(nullptr), "");
}

}  // namespace
}  // namespace loupe::symbols
