// Symbolization on real processes: the symbol table sealed into each
// segment names the functions of CPU samples' stacks — inline frames, file
// and line included — for PIE and non-PIE programs, stripped ones with their
// debug file elsewhere, deleted binaries, a program in its own mount
// namespace, a library loaded after attach, and damaged debug information.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "daemon/session/session.h"
#include "daemon/symbols/object_file.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/quiet_log.h"
#include "tests/support/symbolized_trace.h"
#include "tests/support/temp_dir.h"

namespace loupe::session {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::NamedFrame;
using testing::QuietLog;
using testing::Symbolize;
using testing::SymbolizedTrace;
using testing::TestProgram;

// Traces `argv` (a test program following testprog.h) while it burns.
SymbolizedTrace TraceProgram(const std::vector<std::string>& argv, const std::string& dir) {
  ChildProcess program(argv);
  const std::vector<std::string> ready = program.ReadWords();
  EXPECT_EQ(ready.at(0), "ready");
  SessionOptions options;
  options.pids = {static_cast<uint32_t>(program.pid())};
  options.writer.directory = dir;
  options.writer.session_id = "symbols";
  options.sources.sample_hz = 999;
  auto session = Session::Start(std::move(options), QuietLog());
  EXPECT_TRUE(session.ok()) << session.status();
  if (!session.ok()) return {};
  program.WriteLine("go");
  EXPECT_EQ(program.ReadLine(), "done");
  // It now blocks reading stdin; a line wakes it, which ends that off-CPU
  // interval (kernel stack and all) inside the trace.
  program.WriteLine("wake");
  usleep(100'000);
  EXPECT_TRUE((*session)->Stop().ok());
  return Symbolize(dir);
}

// Stacks through leaf_work read mix (inlined), leaf_work, middle, main.
void ExpectKnownChain(const SymbolizedTrace& trace) {
  ASSERT_TRUE(trace.readable);
  size_t through_leaf = 0, chains = 0;
  for (const auto& sample : trace.samples) {
    const std::vector<NamedFrame>& stack = sample.user_frames;
    auto leaf = std::find_if(stack.begin(), stack.end(),
                             [](const NamedFrame& f) { return f.function == "leaf_work"; });
    if (leaf == stack.end()) continue;
    ++through_leaf;
    if (leaf == stack.begin() || std::prev(leaf)->function != "mix") continue;
    const NamedFrame& mix = *std::prev(leaf);
    EXPECT_TRUE(mix.inlined);
    EXPECT_TRUE(mix.file.ends_with("symbols_app.c")) << mix.file;
    EXPECT_GT(mix.line, 0u);
    EXPECT_FALSE(leaf->inlined);
    EXPECT_TRUE(leaf->file.ends_with("symbols_app.c")) << leaf->file;
    std::vector<std::string> callers;
    for (auto it = std::next(leaf); it != stack.end(); ++it) callers.push_back(it->function);
    ASSERT_GE(callers.size(), 2u);
    EXPECT_EQ(callers[0], "middle");
    EXPECT_EQ(callers[1], "main");
    ++chains;
  }
  EXPECT_GE(through_leaf, 50u) << [&] {
    std::string shown;
    for (size_t i = 0; i < std::min<size_t>(3, trace.samples.size()); ++i) {
      shown += "\n stack:";
      for (const NamedFrame& f : trace.samples[i].user_frames) {
        shown += " " + f.function + (f.inlined ? "(i)" : "");
      }
    }
    return shown + "\n" + (trace.notes.empty() ? "" : trace.notes.front());
  }();
  // Samples land in mix's loop nearly always.
  EXPECT_GE(chains * 10, through_leaf * 8) << chains << " of " << through_leaf;
}

class SymbolizedBinaryTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SymbolizedBinaryTest, StacksResolveWithInlineFramesFilesAndLines) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ExpectKnownChain(TraceProgram({TestProgram(GetParam()), "plain", "1"}, dir.path()));
}

INSTANTIATE_TEST_SUITE_P(Binaries, SymbolizedBinaryTest,
                         ::testing::Values("symbols_app_pie", "symbols_app_nopie"));

void Shell(const std::string& command) {
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

TEST(SymbolsTest, StrippedProgramResolvesThroughItsBuildIdDebugFile) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin;
  const std::string program = bin.path() + "/app";
  Shell("objcopy --only-keep-debug " + TestProgram("symbols_app_pie") + " " + program + ".debug");
  Shell("strip --strip-all -o " + program + " " + TestProgram("symbols_app_pie"));
  const int fd = open(program.c_str(), O_RDONLY);
  const std::string id = symbols::HexOf(symbols::ReadBuildId(fd));
  close(fd);
  ASSERT_GT(id.size(), 2u);
  const fs::path debug = fs::path("/usr/lib/debug/.build-id") / id.substr(0, 2) /
                         (id.substr(2) + ".debug");
  fs::create_directories(debug.parent_path());
  fs::copy_file(program + ".debug", debug, fs::copy_options::overwrite_existing);
  testing::TempDir dir;
  const SymbolizedTrace trace = TraceProgram({program, "plain", "1"}, dir.path());
  fs::remove(debug);
  ExpectKnownChain(trace);
}

TEST(SymbolsTest, StrippedProgramResolvesThroughItsDebuglink) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin;
  const std::string program = bin.path() + "/app";
  Shell("objcopy --only-keep-debug " + TestProgram("symbols_app_nopie") + " " + program + ".debug");
  Shell("strip --strip-all -o " + program + ".tmp " + TestProgram("symbols_app_nopie"));
  Shell("cd " + bin.path() + " && objcopy --add-gnu-debuglink=app.debug app.tmp app");
  // Without the build id note, only the debuglink can lead to the debug file.
  Shell("objcopy --remove-section .note.gnu.build-id " + program);
  testing::TempDir dir;
  ExpectKnownChain(TraceProgram({program, "plain", "1"}, dir.path()));
}

TEST(SymbolsTest, DeletedBinaryResolvesThroughMapFiles) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin;
  const std::string program = bin.path() + "/app";
  fs::copy_file(TestProgram("symbols_app_pie"), program);
  ChildProcess child({program, "plain", "1"});
  ASSERT_EQ(child.ReadWords().at(0), "ready");
  fs::remove(program);  // and replaced by something else
  fs::copy_file("/bin/true", program);
  testing::TempDir dir;
  SessionOptions options;
  options.pids = {static_cast<uint32_t>(child.pid())};
  options.writer.directory = dir.path();
  options.writer.session_id = "deleted";
  options.sources.sample_hz = 999;
  auto session = Session::Start(std::move(options), QuietLog());
  ASSERT_TRUE(session.ok()) << session.status();
  child.WriteLine("go");
  ASSERT_EQ(child.ReadLine(), "done");
  ASSERT_TRUE((*session)->Stop().ok());
  ExpectKnownChain(Symbolize(dir.path()));
}

TEST(SymbolsTest, ProgramInItsOwnMountNamespaceResolves) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir hidden, dir;
  // Inside the namespace a tmpfs over `hidden` holds the program; outside,
  // `hidden` stays empty.
  const std::string script = "mount -t tmpfs tmpfs " + hidden.path() + " && cp " +
                             TestProgram("symbols_app_pie") + " " + hidden.path() +
                             "/app && exec " + hidden.path() + "/app plain 1";
  const SymbolizedTrace trace = TraceProgram(
      {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script},
      dir.path());
  EXPECT_FALSE(fs::exists(hidden.path() + "/app"));
  ExpectKnownChain(trace);
}

TEST(SymbolsTest, LibraryLoadedAfterAttachResolves) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  const SymbolizedTrace trace =
      TraceProgram({TestProgram("symbols_app_pie"), "dlopen", "0.5"}, dir.path());
  size_t in_plugin = 0;
  for (const auto& sample : trace.samples) {
    const std::vector<NamedFrame>& stack = sample.user_frames;
    for (size_t i = 0; i + 1 < stack.size(); ++i) {
      if (stack[i].function == "plugin_spin" && stack[i + 1].function == "plugin_work") {
        EXPECT_TRUE(stack[i].file.ends_with("symbols_plugin.c")) << stack[i].file;
        ++in_plugin;
        break;
      }
    }
  }
  EXPECT_GE(in_plugin, 50u);
}

TEST(SymbolsTest, KernelFramesAreNamed) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  const SymbolizedTrace trace =
      TraceProgram({TestProgram("symbols_app_pie"), "plain", "0.3"}, dir.path());
  // The program blocked in read(2) on its stdin and was woken: an off-CPU
  // interval with its kernel stack.
  EXPECT_FALSE(trace.kernel_names.empty());
  EXPECT_TRUE(std::any_of(trace.kernel_names.begin(), trace.kernel_names.end(),
                          [](const std::string& n) { return n.find("schedule") != n.npos; }))
      << "no kernel frame named *schedule*";
}

TEST(SymbolsTest, JitCodeIsNamedFromThePerfMap) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  const SymbolizedTrace trace = TraceProgram({TestProgram("jit_app")}, dir.path());
  size_t jit = 0;
  for (const auto& sample : trace.samples) {
    jit += !sample.user_frames.empty() && sample.user_frames[0].function == "jit_spin";
  }
  EXPECT_GE(jit, 50u);
}

TEST(SymbolsTest, DamagedDebugInformationIsANoteNotACrash) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin, dir;
  const std::string program = bin.path() + "/app";
  fs::copy_file(TestProgram("symbols_app_pie"), program);
  // Garbage over .debug_info and .debug_line.
  for (const char* section : {".debug_info", ".debug_line"}) {
    const std::string find = std::string("readelf -S -W ") + program + " | awk '$2==\"" + section +
                             "\"{print $5, $6}'";
    FILE* pipe = popen(find.c_str(), "r");
    char line[128] = {};
    ASSERT_NE(fgets(line, sizeof line, pipe), nullptr) << section;
    pclose(pipe);
    unsigned long offset = 0, size = 0;
    ASSERT_EQ(sscanf(line, "%lx %lx", &offset, &size), 2);
    const int fd = open(program.c_str(), O_WRONLY);
    std::vector<char> garbage(size, '\xa5');
    ASSERT_EQ(pwrite(fd, garbage.data(), size, static_cast<off_t>(offset)),
              static_cast<ssize_t>(size));
    close(fd);
  }
  const SymbolizedTrace trace = TraceProgram({program, "plain", "0.5"}, dir.path());
  ASSERT_TRUE(trace.readable);
  // The symbol table still names the functions (from .symtab).
  size_t named = 0;
  for (const auto& sample : trace.samples) {
    const std::vector<NamedFrame>& stack = sample.user_frames;
    named += std::any_of(stack.begin(), stack.end(),
                         [](const NamedFrame& f) { return f.function == "leaf_work"; });
  }
  EXPECT_GE(named, 20u);
}

}  // namespace
}  // namespace loupe::session
