// Cost of one probe event, every contender measured in this one run on the
// same workload binary (probe_workload), as the target measures its own
// loop: the shim untraced; the shim, a classic sys/sdt.h probe and a bpftrace
// probe traced; the floor (a bare uprobe on the shim's 5-byte nop writing
// one ring record); and uprobes on function entries with and without
// push %rbp. Run as root:  ./build/tests/bench/probe_bench [REPEATS]
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/sinks/null_sink.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/bpf/skeleton.h"
#include "daemon/probes/elf_file.h"
#include "daemon/session/session.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"
#include "uprobe_floor.skel.h"

namespace loupe {
namespace {

using FloorSkeleton =
    bpf::Skeleton<loupe_uprobe_floor, loupe_uprobe_floor__open, loupe_uprobe_floor__load,
                  loupe_uprobe_floor__attach, loupe_uprobe_floor__destroy>;

constexpr long kTracedEvents = 1'000'000;
constexpr long kUntracedEvents = 500'000'000;

std::string Workload() {
  return std::filesystem::canonical(testing::TestProgram("../bench/probe_workload")).string();
}

// Something attached to the workload while it runs; detached when destroyed.
using Attachment = std::shared_ptr<void>;
using Attach = std::function<Attachment(pid_t)>;

Attachment Holding(std::function<void()> release) {
  return std::shared_ptr<void>(new int(0), [release = std::move(release)](void* token) {
    release();
    delete static_cast<int*>(token);
  });
}

double RunOnce(const std::string& mode, long n, const Attach& attach) {
  testing::ChildProcess workload({Workload(), mode, std::to_string(n)});
  if (workload.ReadWords().at(0) != "ready") return -1;
  Attachment attached = attach ? attach(workload.pid()) : nullptr;
  if (attach && attached == nullptr) return -1;
  workload.WriteLine("go");
  const std::vector<std::string> result = workload.ReadWords();
  workload.Wait();
  return result.size() == 2 ? std::stod(result[1]) : -1;
}

double Median(const std::string& mode, long n, const Attach& attach, int repeats) {
  std::vector<double> runs;
  for (int i = 0; i < repeats; ++i) runs.push_back(RunOnce(mode, n, attach));
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

Attachment LoupeSession(pid_t pid, bool shim, std::vector<std::string> usdt) {
  auto dir = std::make_shared<testing::TempDir>();
  session::SessionOptions options;
  options.pids = {static_cast<uint32_t>(pid)};
  options.writer.directory = dir->path();
  options.writer.session_id = "bench";
  options.sources.sched = options.sources.cpu = false;  // the probes alone
  options.sources.shim = shim;
  options.sources.ring_bytes = 64 << 20;
  if (!probes::ParseProbeRequests(usdt, {}, &options.probes).ok()) return nullptr;
  auto log = std::make_shared<spdlog::logger>("bench", std::make_shared<spdlog::sinks::null_sink_mt>());
  auto started = session::Session::Start(std::move(options), log);
  if (!started.ok()) {
    fmt::print(stderr, "session: {}\n", started.status().ToString());
    return nullptr;
  }
  std::shared_ptr<session::Session> session = *std::move(started);
  return Holding([session, dir] { session->Stop().IgnoreError(); });
}

Attachment Bpftrace(pid_t pid) {
  int out[2];
  if (pipe(out) != 0) return nullptr;
  const std::string program = fmt::format("usdt:{}:bench:classic {{ @n = count(); }}", Workload());
  const pid_t child = fork();
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);  // its RLIMIT_MEMLOCK notice
    dup2(null, STDERR_FILENO);
    execlp("bpftrace", "bpftrace", "-p", std::to_string(pid).c_str(), "-e", program.c_str(),
           nullptr);
    _exit(127);
  }
  close(out[1]);
  std::string seen;
  char buffer[256];
  while (seen.find("Attaching") == std::string::npos) {  // "Attaching 1 probe..."
    const ssize_t n = read(out[0], buffer, sizeof buffer);
    if (n <= 0) return nullptr;
    seen.append(buffer, static_cast<size_t>(n));
  }
  usleep(300'000);  // bpftrace prints before its last attach completes
  return Holding([child, fd = out[0]] {
    kill(child, SIGINT);
    waitpid(child, nullptr, 0);
    close(fd);
  });
}

// The floor program on `symbol` of the workload (or on the shim's counter
// probe, with its semaphore raised so the shim calls it).
Attachment Floor(pid_t pid, const std::string& symbol) {
  auto file = probes::ElfFile::Open(Workload());
  if (!file.ok()) return nullptr;
  uint64_t address = 0, semaphore = 0;
  if (symbol.empty()) {
    auto notes = (*file)->UsdtNotes();
    if (!notes.ok()) return nullptr;
    for (const probes::UsdtNote& note : *notes) {
      if (note.provider == "loupe" && note.name == "counter") {
        address = note.pc;
        semaphore = *(*file)->FileOffset(note.semaphore);
      }
    }
  } else if (auto found = (*file)->FindSymbol(symbol)) {
    address = found->address;
  }
  auto offset = (*file)->FileOffset(address);
  auto skel = FloorSkeleton::Open("uprobe_floor");
  if (address == 0 || !offset.ok() || !skel.ok()) return nullptr;
  bpf_map__set_max_entries((*skel)->maps.floor_ring, 128 << 20);  // room for every record
  if (!skel->Load().ok()) return nullptr;
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = semaphore);
  bpf_link* link = bpf_program__attach_uprobe_opts((*skel)->progs.handle_floor, pid,
                                                   Workload().c_str(), *offset, &opts);
  if (link == nullptr) return nullptr;
  auto owned = std::make_shared<FloorSkeleton>(*std::move(skel));
  return Holding([owned, link] { bpf_link__destroy(link); });
}

int Main(int repeats) {
  fmt::print("probe cost, ns per event (median of {} runs; traced: {} events, untraced: {})\n",
             repeats, kTracedEvents, kUntracedEvents);
  const double empty = Median("empty", kUntracedEvents, nullptr, repeats);
  const double untraced = Median("shim", kUntracedEvents, nullptr, repeats);
  const double shim = Median("shim", kTracedEvents, [](pid_t p) { return LoupeSession(p, true, {}); },
                             repeats);
  const double sdt_loupe = Median(
      "sdt", kTracedEvents, [](pid_t p) { return LoupeSession(p, false, {"bench:classic"}); },
      repeats);
  const double sdt_bpftrace = Median("sdt", kTracedEvents, Bpftrace, repeats);
  const double floor = Median("shim", kTracedEvents, [](pid_t p) { return Floor(p, ""); }, repeats);
  const double push = Median("push", kTracedEvents, [](pid_t p) { return Floor(p, "bench_push"); },
                             repeats);
  const double nopush = Median(
      "nopush", kTracedEvents, [](pid_t p) { return Floor(p, "bench_nopush"); }, repeats);

  fmt::print("  loop alone                                   {:8.2f}\n", empty);
  fmt::print("  (a) shim probe, nobody attached              {:8.2f}   target <= 1.5\n", untraced);
  fmt::print("  (b) shim probe, louped attached              {:8.1f}\n", shim);
  fmt::print("  (c) classic sys/sdt.h probe, louped          {:8.1f}\n", sdt_loupe);
  fmt::print("  (d) classic sys/sdt.h probe, bpftrace count  {:8.1f}\n", sdt_bpftrace);
  fmt::print("  (e) floor: bare uprobe on nop5, one record   {:8.1f}\n", floor);
  fmt::print("  uprobe + record, entry is push %rbp          {:8.1f}\n", push);
  fmt::print("  uprobe + record, entry is not push %rbp      {:8.1f}\n", nopush);
  fmt::print("ratios: b/c {:.2f} (target <= 0.8)  b/d {:.2f} (<= 0.8)  b/e {:.2f} (<= 1.15)  "
             "not-push/push {:.2f}\n",
             shim / sdt_loupe, shim / sdt_bpftrace, shim / floor, nopush / push);
  return 0;
}

}  // namespace
}  // namespace loupe

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    fmt::print(stderr, "probe_bench loads BPF programs: run it as root\n");
    return 2;
  }
  return loupe::Main(argc > 1 ? std::atoi(argv[1]) : 5);
}
