// The shim, USDT of any provider, and uprobes on real processes: exact
// counts and values in the trace, semaphores raised only while attached,
// children followed, latencies paired, and bad probes reported while the
// rest of the session runs.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/bpf/probe_links.h"
#include "daemon/bpf/uprobe_multi.h"
#include "daemon/probes/elf_file.h"
#include "daemon/session/session.h"
#include "daemon/format/loss_tally.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_digest.h"

namespace loupe::session {
namespace {

using testing::ChildProcess;
using testing::DigestTrace;
using testing::TestProgram;
using testing::TraceDigest;

std::shared_ptr<spdlog::logger> QuietLog() {
  return std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
}

SessionOptions Options(const std::string& dir, pid_t pid) {
  SessionOptions options;
  options.pids = {static_cast<uint32_t>(pid)};
  options.writer.directory = dir;
  options.writer.session_id = "test";
  return options;
}

std::unique_ptr<Session> StartOrDie(SessionOptions options) {
  auto session = Session::Start(std::move(options), QuietLog());
  EXPECT_TRUE(session.ok()) << session.status();
  return session.ok() ? *std::move(session) : nullptr;
}

// Where the executable's first segment is mapped: its load bias (0 for a
// non-PIE executable, whose link-time addresses are its addresses).
uint64_t LoadBias(pid_t pid, const std::string& exe) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(exe) == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset;
    fields >> range >> perms >> offset;
    if (std::stoull(offset, nullptr, 16) != 0) continue;
    return std::stoull(range.substr(0, range.find('-')), nullptr, 16);
  }
  return 0;
}

// The USDT semaphore of provider:name, read from the process's memory.
int ReadSemaphore(pid_t pid, const std::string& exe, const std::string& provider,
                  const std::string& name) {
  auto file = probes::ElfFile::Open(exe);
  if (!file.ok()) return -1;
  auto notes = (*file)->UsdtNotes();
  if (!notes.ok()) return -1;
  for (const probes::UsdtNote& note : *notes) {
    if (note.provider != provider || note.name != name || note.semaphore == 0) continue;
    const bool pie = LoadBias(pid, exe) != 0 && note.semaphore < 0x400000;
    const uint64_t address = note.semaphore + (pie ? LoadBias(pid, exe) : 0);
    const int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY);
    uint16_t value = 0xffff;
    const ssize_t n = pread(fd, &value, sizeof value, static_cast<off_t>(address));
    close(fd);
    return n == sizeof value ? value : -1;
  }
  return -1;
}

size_t CountProbe(const std::vector<testing::ProbeEvent>& events, const std::string& probe) {
  return std::count_if(events.begin(), events.end(),
                       [&](const testing::ProbeEvent& e) { return e.probe == probe; });
}

// Copies a test program to `dir` and returns the copy's path.
std::string CopyProgram(const std::string& name, const std::string& dir) {
  const std::string copy = dir + "/" + name;
  std::filesystem::copy_file(TestProgram(name), copy);
  return copy;
}

class ShimTest : public ::testing::TestWithParam<ContentPolicy> {};

TEST_P(ShimTest, EveryKindArrivesWithExactCountsAndFields) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  const std::string exe = TestProgram("shim_app");
  ChildProcess program({exe, "2", "50"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  EXPECT_EQ(ReadSemaphore(program.pid(), exe, "loupe", "span_begin"), 0);

  SessionOptions options = Options(dir.path(), program.pid());
  options.content_policy = GetParam();
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  EXPECT_GT(ReadSemaphore(program.pid(), exe, "loupe", "span_begin"), 0);
  EXPECT_GT(ReadSemaphore(program.pid(), exe, "loupe", "instant"), 0);
  EXPECT_EQ(session->stats().probe_sites, 7u);  // every shim probe but the trigger
  program.WriteLine("go");
  const std::vector<std::string> done = program.ReadWords();
  ASSERT_EQ(done.size(), 3u);
  const uint32_t worker0 = std::stoul(done[1]), worker1 = std::stoul(done[2]);
  ASSERT_TRUE(session->Stop().ok());
  EXPECT_EQ(ReadSemaphore(program.pid(), exe, "loupe", "span_begin"), 0);
  EXPECT_EQ(ReadSemaphore(program.pid(), exe, "loupe", "instant"), 0);

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.readable);
  EXPECT_EQ(trace.config.at("content_policy"), GetParam() == ContentPolicy::kFull ? "full" : "names");
  // Only the 100-byte strings were cut, and each cut was counted. (A CPU
  // sample's stack may be cut too: libstdc++ has no frame pointers to walk.)
  std::map<std::string, uint64_t> shim_losses;
  for (const auto& [what, count] : trace.losses) {
    if (what.starts_with("shim/")) shim_losses[what] = count;
  }
  EXPECT_EQ(shim_losses, (std::map<std::string, uint64_t>{{"shim/string_truncated", 2}}));
  EXPECT_EQ(trace.span_begins, (std::map<std::string, uint64_t>{{"handle", 100}, {"parse", 100}}));
  EXPECT_EQ(trace.span_ends, 200u);
  EXPECT_TRUE(trace.open_spans.empty());
  EXPECT_EQ(trace.bad_span_parents, 0u);
  EXPECT_EQ(trace.operations.size(), 102u);
  EXPECT_EQ(trace.operation_ends, 102u);
  EXPECT_EQ(trace.counters.size(), 100u);
  EXPECT_EQ(trace.thread_names.at(worker0).back(), "worker-0");
  EXPECT_EQ(trace.thread_names.at(worker1).back(), "worker-1");

  std::map<std::string, int> instants;
  for (const testing::InstantEvent& event : trace.instants) {
    ++instants[event.name];
    if (event.name != "parsed") continue;
    const uint32_t t = event.tid == worker0 ? 0 : 1;
    const int k = static_cast<int>(event.operation_id - t * 1000);
    ASSERT_GE(k, 1);
    ASSERT_LE(k, 50);
    EXPECT_EQ(event.fields.at("n"), std::to_string(-k));
    EXPECT_EQ(event.fields.at("u"), std::to_string(k));
    EXPECT_EQ(std::stod(event.fields.at("d")), k / 2.0);
    EXPECT_EQ(event.fields.at("b"), k % 2 ? "true" : "false");
    EXPECT_EQ(event.fields.at("size"), "4096 bytes");
    const std::string text = "payload-" + std::to_string(k);
    if (GetParam() == ContentPolicy::kFull) {
      EXPECT_EQ(event.fields.at("s"), text);
    } else {
      EXPECT_TRUE(event.fields.at("s").starts_with(
          "<redacted " + std::to_string(text.size()) + " bytes #"))
          << event.fields.at("s");
    }
  }
  EXPECT_EQ(instants, (std::map<std::string, int>{{"long", 2}, {"parsed", 100}, {"tick", 100}}));

  // The burn ran inside operation 900000 + t: the kernel's samples say so.
  for (auto [tid, operation] : {std::pair{worker0, 900000u}, std::pair{worker1, 900001u}}) {
    const auto& by_operation = trace.sample_operations.at(tid);
    EXPECT_GE(by_operation.count(operation) ? by_operation.at(operation) : 0, 10u);
    for (const auto& [id, samples] : by_operation) {
      EXPECT_TRUE(id == 0 || id == operation || id < 100000) << "sample of tid " << tid
                                                             << " attributed to " << id;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ShimTest,
                         ::testing::Values(ContentPolicy::kNames, ContentPolicy::kFull));

// Reads the "expect <probe> <values>" lines up to "done".
std::map<std::string, std::vector<std::vector<int64_t>>> ReadExpectations(ChildProcess& program) {
  std::map<std::string, std::vector<std::vector<int64_t>>> expected;
  while (true) {
    const std::vector<std::string> words = program.ReadWords();
    if (words.empty() || words[0] == "done") break;
    std::vector<int64_t> values;
    for (size_t i = 2; i < words.size(); ++i) values.push_back(std::stoll(words[i]));
    expected[words.at(1)].push_back(values);
  }
  return expected;
}

class UsdtFormsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UsdtFormsTest, EveryArgumentFormDecodes) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram(GetParam()), "6"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.probes.usdt.push_back({.text = "forms:*", .provider = "forms", .name = "*"});
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  EXPECT_TRUE(session->stats().warnings.empty()) << session->stats().warnings.front();
  EXPECT_EQ(session->stats().probe_sites, 7u);  // twice has two sites
  program.WriteLine("go");
  const auto expected = ReadExpectations(program);
  ASSERT_TRUE(session->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  std::map<std::string, std::vector<std::vector<int64_t>>> seen;
  for (const testing::ProbeEvent& event : trace.usdt) seen[event.probe].push_back(event.args);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(expected.size(), 6u);
}

// usdt_forms: a PIE with the probes; usdt_forms_lib: the probes in a
// shared library at a random base.
INSTANTIATE_TEST_SUITE_P(Binaries, UsdtFormsTest,
                         ::testing::Values("usdt_forms", "usdt_forms_lib"));

// A USDT string argument is kept whole up to the session's cap (256 bytes
// by default, up to 4 KiB); past it, it is kept up to the cap and counted as
// cut. A string of exactly the cap is whole.
class UsdtStringCapTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(UsdtStringCapTest, StringsAreWholeUpToTheCapAndCountedCutPastIt) {
  LOUPE_REQUIRE_PRIVILEGES();
  const uint32_t cap = GetParam();
  const std::vector<size_t> lengths = {0, 10, 255, 256, 257, 300, 4096, 4097, 6000};
  std::vector<std::string> command = {TestProgram("usdt_strings")};
  for (size_t length : lengths) command.push_back(std::to_string(length));
  testing::TempDir dir;
  ChildProcess program(command);
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.sources.usdt_string_cap = cap;
  options.content_policy = ContentPolicy::kFull;  // the text itself, not its digest
  options.probes.usdt.push_back(
      {.text = "strs:text(str arg0)", .provider = "strs", .name = "text", .string_arg = 0});
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  program.WriteLine("go");
  ASSERT_EQ(program.ReadLine(), "done");
  ASSERT_TRUE(session->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.problems.empty()) << testing::WhyIncomplete(trace);
  ASSERT_EQ(trace.usdt.size(), lengths.size());
  uint64_t cut = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    std::string expected;
    for (size_t at = 0; at < std::min<size_t>(lengths[i], cap); ++at) expected += 'a' + at % 26;
    EXPECT_EQ(trace.usdt[i].text, expected) << "length " << lengths[i];
    EXPECT_EQ(trace.usdt[i].args.at(1), static_cast<int64_t>(lengths[i]));
    cut += lengths[i] > cap;
  }
  const auto counted = trace.losses.find("usdt/string_truncated");
  EXPECT_EQ(counted == trace.losses.end() ? 0 : counted->second, cut);
  // Nothing lost (stack walks through this -O2 program may stop, as cuts).
  for (const auto& [what, count] : trace.losses) {
    EXPECT_TRUE(format::IsCutKey(what)) << "lost " << count << " " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Caps, UsdtStringCapTest, ::testing::Values(256u, 4096u));

TEST(UsdtTest, NotesOfThePieCoverEveryOperandForm) {
  auto file = probes::ElfFile::Open(TestProgram("usdt_forms"));
  ASSERT_TRUE(file.ok()) << file.status();
  auto notes = (*file)->UsdtNotes();
  ASSERT_TRUE(notes.ok());
  std::string all;
  for (const probes::UsdtNote& note : *notes) all += note.args + " ";
  // A char in an 8-bit register, 16- and 32-bit registers, memory below and
  // above a base register, a constant, a global by RIP-relative address,
  // a static struct's member with the offset before the symbol.
  for (const char* form : {"-1@%dil", "-2@%si", "-4@%edx", "-8@%rcx", "-4@-4(%rbp)", "-4@8(%rdi)",
                           "-4@$42", "forms_global(%rip)", "-4@16+forms_stats(%rip)"}) {
    EXPECT_NE(all.find(form), std::string::npos) << form << " not in: " << all;
  }
}

TEST(UsdtTest, LibstdcxxThrowAndCatchCountsAreExact) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram("exceptions"), "25"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.probes.usdt.push_back({.text = "libstdcxx:*", .provider = "libstdcxx", .name = "*"});
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  program.WriteLine("go");
  ASSERT_EQ(program.ReadLine(), "done 25");
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(CountProbe(trace.usdt, "libstdcxx:throw"), 25u);
  EXPECT_EQ(CountProbe(trace.usdt, "libstdcxx:catch"), 25u);
  EXPECT_EQ(CountProbe(trace.usdt, "libstdcxx:rethrow"), 0u);
}

class ProbeFollowChildrenTest : public ::testing::TestWithParam<bool> {};

TEST_P(ProbeFollowChildrenTest, ChildrenForkedAfterAttachAreProbedOnlyWhenFollowed) {
  LOUPE_REQUIRE_PRIVILEGES();
  const bool follow = GetParam();
  testing::TempDir dir;
  ChildProcess program({TestProgram("forking_server"), "3", "5"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.sources.follow_children = follow;
  options.probes.usdt.push_back({.text = "server:request", .provider = "server", .name = "request"});
  options.probes.uprobes.push_back(
      {.text = "forking_server:handle_request", .target = "forking_server",
       .symbol = "handle_request", .arg_count = 1});
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  program.WriteLine("go");
  std::set<uint32_t> children;
  for (std::vector<std::string> words = program.ReadWords(); !words.empty() && words[0] != "done";
       words = program.ReadWords()) {
    children.insert(std::stoul(words.at(1)));
  }
  ASSERT_EQ(children.size(), 3u);
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  size_t usdt = 0, calls = 0;
  for (const auto& event : trace.usdt) usdt += children.contains(event.tid);
  for (const auto& event : trace.uprobe_entries) calls += children.contains(event.tid);
  EXPECT_EQ(usdt, follow ? 15u : 0u);
  EXPECT_EQ(calls, follow ? 15u : 0u);
  EXPECT_EQ(trace.usdt.size(), usdt);  // the parent serves nothing itself
}

INSTANTIATE_TEST_SUITE_P(Follow, ProbeFollowChildrenTest, ::testing::Bool());

TEST(UprobeTest, CallCountsAreExactAndLatencyMatchesTheProgram) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram("uprobe_target"), "41"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  for (const char* spec : {"uprobe_target:work_global(1)", "uprobe_target:work_static",
                           "uprobe_target:sleep_2ms%return"}) {
    ASSERT_TRUE(probes::ParseProbeRequests({}, {spec}, &options.probes).ok());
  }
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  program.WriteLine("go");
  const std::vector<std::string> done = program.ReadWords();
  ASSERT_EQ(done.size(), 2u);
  const double program_median = std::stod(done[1]);
  ASSERT_TRUE(session->Stop().ok());

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "uprobe_target:work_global"), 41u);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "uprobe_target:work_static"), 41u);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "uprobe_target:sleep_2ms"), 41u);
  int64_t expected_arg = 0;
  for (const auto& event : trace.uprobe_entries) {
    if (event.probe != "uprobe_target:work_global") continue;
    ASSERT_EQ(event.args.size(), 1u);
    EXPECT_EQ(event.args[0], expected_arg++);
  }
  std::vector<uint64_t> latencies;
  for (const auto& ret : trace.uprobe_returns) {
    EXPECT_EQ(ret.probe, "uprobe_target:sleep_2ms");
    EXPECT_EQ(ret.retval, 7);
    latencies.push_back(ret.duration_ns);
  }
  ASSERT_EQ(latencies.size(), 41u);
  std::sort(latencies.begin(), latencies.end());
  const double median = static_cast<double>(latencies[latencies.size() / 2]);
  EXPECT_NEAR(median, program_median, 0.05 * program_median);
}

// A stripped program's static function has no symbol left: it is probed
// by a frame of it as stacks print it (file+0xOFFSET), found by its unwind
// information, entries and returns alike.
TEST(UprobeTest, AStrippedStaticFunctionIsProbedByAFrameOfIt) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin, dir;
  const std::string program_path = CopyProgram("uprobe_target", bin.path());
  absl::StatusOr<std::unique_ptr<probes::ElfFile>> unstripped = probes::ElfFile::Open(program_path);
  ASSERT_TRUE(unstripped.ok()) << unstripped.status();
  const std::optional<probes::ElfSymbol> work_static = (*unstripped)->FindSymbol("work_static");
  ASSERT_TRUE(work_static.has_value());
  absl::StatusOr<uint64_t> offset = (*unstripped)->FileOffset(work_static->address + 3);
  ASSERT_TRUE(offset.ok()) << offset.status();
  unstripped->reset();
  ASSERT_EQ(std::system(("strip --strip-all " + program_path).c_str()), 0);
  ChildProcess program({program_path, "41"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  const std::string frame = fmt::format("uprobe_target+{:#x}", *offset);
  ASSERT_TRUE(probes::ParseProbeRequests({}, {frame + "%return"}, &options.probes).ok());
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  // Only that the kernel single-steps its first instruction (a mov).
  for (const std::string& warning : session->stats().warnings) {
    EXPECT_NE(warning.find("its first instruction is neither"), std::string::npos) << warning;
  }
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, frame), 41u);
  size_t returns = 0;
  for (const auto& ret : trace.uprobe_returns) {
    if (ret.probe != frame) continue;
    ++returns;
    EXPECT_GT(ret.duration_ns, 0u);
  }
  EXPECT_EQ(returns, 41u);
}

// A worker forked while its parent is traced: where the kernel turned the
// shim's sites into calls to a page of its own that a child does not
// inherit, the child dies at its first span, and the trace says so; built
// with LOUPE_SHIM_TRAP_PROBES, the sites stay traps and the child lives.
TEST(ShimForkTest, AWorkerForkedWhileTracedLivesWithTrapSitesAndIsWarnedOfOtherwise) {
  LOUPE_REQUIRE_PRIVILEGES();
  for (const std::string name : {"forking_emitter", "forking_emitter_trap"}) {
    testing::TempDir dir;
    ChildProcess program({TestProgram(name)});
    ASSERT_EQ(program.ReadWords().at(0), "ready");
    std::unique_ptr<Session> session = StartOrDie(Options(dir.path(), program.pid()));
    ASSERT_NE(session, nullptr);
    program.WriteLine("go");
    const std::vector<std::string> child = program.ReadWords();
    ASSERT_EQ(child.size(), 4u);
    const int status = std::stoi(child[3]);
    std::ifstream maps(fmt::format("/proc/{}/maps", program.pid()));
    const std::string text((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
    const bool optimized = text.find("[uprobes-trampoline]") != std::string::npos;
    usleep(200'000);  // the fork record drained
    ASSERT_TRUE(session->Stop().ok());
    const std::vector<std::string> warnings = session->stats().warnings;
    const bool warned = std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
      return w.find("[uprobes-trampoline]") != std::string::npos;
    });
    if (name == "forking_emitter_trap") {
      EXPECT_FALSE(optimized) << "trap sites were turned into calls";
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << name << ": status " << status;
      EXPECT_FALSE(warned) << ::testing::PrintToString(warnings);
    } else {
      if (WIFSIGNALED(status)) {
        EXPECT_TRUE(optimized) << "the child died otherwise: " << status;
      }
      EXPECT_EQ(warned, optimized) << ::testing::PrintToString(warnings);
    }
  }
}

// A program whose file was replaced on disk while it ran (an upgrade) is
// probed in the file it maps, by path or by name: not in the new file, which
// runs nowhere.
TEST(UprobeTest, AProgramReplacedOnDiskIsProbedInTheFileItRuns) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin, dir;
  const std::string program_path = CopyProgram("uprobe_target", bin.path());
  ChildProcess program({program_path, "41"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  const std::string replacement = bin.path() + "/replacement";
  std::filesystem::copy_file(TestProgram("uprobe_target"), replacement);
  ASSERT_EQ(rename(replacement.c_str(), program_path.c_str()), 0);
  SessionOptions options = Options(dir.path(), program.pid());
  ASSERT_TRUE(probes::ParseProbeRequests(
                  {}, {program_path + ":work_global", "uprobe_target:sleep_2ms%return"},
                  &options.probes)
                  .ok());
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, program_path + ":work_global"), 41u);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "uprobe_target:sleep_2ms"), 41u);
  EXPECT_EQ(trace.uprobe_returns.size(), 41u);
}

// A frame names the function that holds it, by its symbol or, stripped,
// by the unwind information that spans it; a frame in a part split off a
// function (.cold), which is entered by a jump and not a call, is refused.
TEST(FramesTest, AFrameNamesItsFunctionAndAColdPartIsRefused) {
  testing::TempDir bin;
  const std::string program_path = CopyProgram("throw_through", bin.path());
  auto offset_of = [&](const std::string& name) -> uint64_t {
    absl::StatusOr<std::unique_ptr<probes::ElfFile>> file = probes::ElfFile::Open(program_path);
    std::optional<probes::ElfSymbol> symbol = (*file)->FindSymbol(name);
    if (!symbol) return 0;
    return *(*file)->FileOffset(symbol->address + 1);
  };
  const uint64_t function = offset_of("_Z14handle_requestl");
  const uint64_t cold = offset_of("_Z14handle_requestl.cold");
  ASSERT_NE(function, 0u);
  ASSERT_NE(cold, 0u) << "throw_through has no .cold part to test with";
  for (const bool stripped : {false, true}) {
    if (stripped) {
      ASSERT_EQ(std::system(("strip --strip-all " + program_path).c_str()), 0);
    }
    absl::StatusOr<std::unique_ptr<probes::ElfFile>> file = probes::ElfFile::Open(program_path);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<probes::ElfFunction> found = (*file)->FunctionAt(function);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(found->name, stripped ? "" : "_Z14handle_requestl");
    EXPECT_EQ(*(*file)->FileOffset(found->symbol.address), function - 1);
    absl::StatusOr<probes::ElfFunction> in_cold = (*file)->FunctionAt(cold);
    ASSERT_FALSE(in_cold.ok()) << "stripped " << stripped;
    EXPECT_NE(in_cold.status().message().find("split off a function"), std::string::npos)
        << in_cold.status();
  }
}

// A program started through a symlink (as /usr/bin/redis-server is one to
// redis-check-rdb) is probed by the name it was started as: its mappings
// hold only the file the link resolves to.
TEST(UprobeTest, AProgramStartedThroughASymlinkIsProbedByThatName) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir, links;
  const std::string linked = links.path() + "/linked_target";
  std::filesystem::create_symlink(TestProgram("uprobe_target"), linked);
  ChildProcess program({linked, "7"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  ASSERT_TRUE(probes::ParseProbeRequests({}, {"linked_target:work_static"}, &options.probes).ok());
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  for (const std::string& warning : session->stats().warnings) {
    EXPECT_EQ(warning.find("linked_target"), std::string::npos) << warning;
  }
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "linked_target:work_static"), 7u);
}

// The BPF links this process holds, by type ("uprobe_multi", "perf", ...).
std::multiset<std::string> LinkTypes() {
  std::multiset<std::string> types;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fdinfo")) {
    std::ifstream fdinfo(entry.path());
    for (std::string line; std::getline(fdinfo, line);) {
      if (line.rfind("link_type:", 0) == 0) types.insert(line.substr(line.find_last_of(" \t") + 1));
    }
  }
  return types;
}

// Sites in one file share links per program (multi-uprobe links of at most
// kMaxSitesPerLink sites), so detaching waits for the kernel's grace period
// once per link, not once per site while the target's threads block on each,
// and a target thread wanting its mmap_lock between links gets it
// (tests/bench/attach_stall.sh).
TEST(UprobeTest, SitesOfOneFileAndProgramShareLinksOfBoundedSize) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir dir;
  ChildProcess program({TestProgram("uprobe_target"), "7"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  std::vector<std::string> entries = {"uprobe_target:work_global", "uprobe_target:work_static"};
  for (int i = 0; i < 20; ++i) entries.push_back(fmt::format("uprobe_target:many_{:02}", i));
  std::vector<std::string> specs = entries;
  specs.push_back("uprobe_target:sleep_2ms%return");
  ASSERT_TRUE(probes::ParseProbeRequests({}, specs, &options.probes).ok());
  const std::multiset<std::string> before = LinkTypes();
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  // Returns probed: glibc's longjmp and __longjmp_chk too (a call a
  // longjmp leaves ends at the jump).
  EXPECT_EQ(session->stats().probe_sites, entries.size() + 2 + 2);
  const std::multiset<std::string> during = LinkTypes();
  if (bpf::UprobeMultiSupported()) {
    // 23 entries (sleep_2ms's for its latency): two links; the return
    // probe, a uprobe on sleep_2ms's return instruction (x86_sites.h),
    // in a third: no kernel return probe; libc's longjmp functions in a
    // fourth.
    static_assert(bpf::kMaxSitesPerLink == 16);
    EXPECT_EQ(during.count("uprobe_multi") - before.count("uprobe_multi"), 4u);
    EXPECT_EQ(during.count("uretprobe_multi") - before.count("uretprobe_multi"), 0u);
  } else {
    EXPECT_GE(during.count("perf") - before.count("perf"), 24u);  // with the CPU sampler's
  }
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  ASSERT_TRUE(session->Stop().ok());
  EXPECT_EQ(LinkTypes(), before);

  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  entries.push_back("uprobe_target:sleep_2ms");
  for (const std::string& probe : entries) {
    EXPECT_EQ(CountProbe(trace.uprobe_entries, probe), 7u) << probe;
  }
  EXPECT_EQ(trace.uprobe_returns.size(), 7u);
}

TEST(ProbeErrorsTest, BadProbesAreNamedAndTheRestOfTheSessionRuns) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin;
  // A stripped copy: work_static (a local symbol) is gone with .symtab.
  const std::string stripped = CopyProgram("uprobe_target", bin.path());
  ASSERT_EQ(std::system(("strip --strip-all " + stripped).c_str()), 0);
  testing::TempDir dir;
  ChildProcess program({stripped, "5"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.probes.usdt.push_back({.text = "nosuch:*", .provider = "nosuch", .name = "*"});
  ASSERT_TRUE(probes::ParseProbeRequests({}, {"uprobe_target:work_static", "uprobe_target:nosuch",
                                              "libnosuch:f", "libc:nanosleep"},
                                         &options.probes)
                  .ok());
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  const std::vector<std::string> warnings = session->stats().warnings;
  auto warned = [&](const std::string& text) {
    return std::any_of(warnings.begin(), warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(warned("--usdt 'nosuch:*': no probe matches"));
  EXPECT_TRUE(warned("no symbol 'work_static'") && warned("stripped"));
  EXPECT_TRUE(warned("no symbol 'nosuch'"));
  EXPECT_TRUE(warned("maps no executable or library named 'libnosuch'"));
  program.WriteLine("go");
  ASSERT_EQ(program.ReadWords().at(0), "done");
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  // The probe that resolved (libc exports nanosleep) and the kernel's
  // events still arrive.
  EXPECT_EQ(CountProbe(trace.uprobe_entries, "libc:nanosleep"), 5u);
  EXPECT_GT(trace.kinds.at("sched_switch"), 0u);
}

// A function whose returns cannot be probed is not placed at all: its
// entry is not, and nothing is said of how slowly the kernel would run it.
TEST(ProbeErrorsTest, AFunctionNotPlacedGetsNoWordOnItsEntrysCost) {
  ChildProcess program({TestProgram("uprobe_target"), "1"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  probes::ProbeRequests requests;
  ASSERT_TRUE(probes::ParseProbeRequests({}, {"uprobe_target:tail_only%return"}, &requests).ok());
  const probes::ProbePlan plan =
      probes::PlanProbes({static_cast<uint32_t>(program.pid())}, requests, false, false);
  EXPECT_TRUE(plan.attachments.empty());
  ASSERT_EQ(plan.warnings.size(), 1u) << ::testing::PrintToString(plan.warnings);
  EXPECT_NE(plan.warnings[0].find("not placed: tail_only has no return instruction of its own"),
            std::string::npos)
      << plan.warnings[0];
  EXPECT_TRUE(plan.slow_entries.empty()) << ::testing::PrintToString(plan.slow_entries);
  program.WriteLine("go");
}

// The kernel emulates the push of any register, not only %rbp: a probe
// on redis-server's call() (push %r15) was said to be single-stepped, as
// one on a mov is.
TEST(ProbeErrorsTest, OnlyEntriesTheKernelSingleStepsAreSaidToBe) {
  ChildProcess program({TestProgram("uprobe_target"), "1"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  probes::ProbeRequests requests;
  ASSERT_TRUE(probes::ParseProbeRequests(
                  {}, {"uprobe_target:saves_r15", "uprobe_target:tail_only"}, &requests)
                  .ok());
  const probes::ProbePlan plan =
      probes::PlanProbes({static_cast<uint32_t>(program.pid())}, requests, false, false);
  EXPECT_EQ(plan.attachments.size(), 2u);
  ASSERT_EQ(plan.slow_entries.size(), 1u) << ::testing::PrintToString(plan.slow_entries);
  EXPECT_NE(plan.slow_entries[0].find("tail_only"), std::string::npos) << plan.slow_entries[0];
  program.WriteLine("go");
}

TEST(ProbeErrorsTest, MalformedNotesAreReportedAndOtherFilesStillProbed) {
  LOUPE_REQUIRE_PRIVILEGES();
  testing::TempDir bin;
  const std::string broken = CopyProgram("usdt_forms", bin.path());
  // The first note's name size now points far past the section.
  const std::string offset_cmd =
      "readelf -S -W " + broken + " | awk '$2==\".note.stapsdt\"{print $5}'";
  FILE* pipe = popen(offset_cmd.c_str(), "r");
  char hex[64] = {};
  ASSERT_NE(fgets(hex, sizeof hex, pipe), nullptr);
  pclose(pipe);
  const off_t note_offset = static_cast<off_t>(std::stoull(hex, nullptr, 16));
  const int fd = open(broken.c_str(), O_WRONLY);
  const uint32_t huge = 0x7fffffff;
  ASSERT_EQ(pwrite(fd, &huge, sizeof huge, note_offset), static_cast<ssize_t>(sizeof huge));
  close(fd);

  testing::TempDir dir;
  ChildProcess program({broken, "2"});
  ASSERT_EQ(program.ReadWords().at(0), "ready");
  SessionOptions options = Options(dir.path(), program.pid());
  options.probes.usdt.push_back({.text = "forms:*", .provider = "forms", .name = "*"});
  options.probes.uprobes.push_back({.text = "libc:write", .target = "libc", .symbol = "write"});
  std::unique_ptr<Session> session = StartOrDie(std::move(options));
  ASSERT_NE(session, nullptr);
  const std::vector<std::string> warnings = session->stats().warnings;
  EXPECT_TRUE(std::any_of(warnings.begin(), warnings.end(), [](const std::string& w) {
    return w.find("malformed USDT note #0") != std::string::npos;
  })) << (warnings.empty() ? "no warnings" : warnings.front());
  program.WriteLine("go");
  ReadExpectations(program);
  ASSERT_TRUE(session->Stop().ok());
  const TraceDigest trace = DigestTrace(dir.path());
  ASSERT_TRUE(trace.complete) << testing::WhyIncomplete(trace);
  EXPECT_GT(trace.kinds.at("sched_switch"), 0u);
  EXPECT_GT(CountProbe(trace.uprobe_entries, "libc:write"), 0u);  // the program's printf
}

}  // namespace
}  // namespace loupe::session
