// Emits known numbers of every shim kind once traced. Prints "ready <pid>",
// waits for a line, then runs <threads> threads of <operations> operations
// each and a CPU burn inside an operation scope per thread, prints
// "done <tid>..." and waits for stdin to close.
//
// Per operation k (1-based) of thread t (0-based), operation id t*1000+k:
//   span "handle" > span "parse" > event "parsed" {n=-k, u=k, d=k/2, b=k odd,
//   s="payload-<k>", size=4096 bytes}; counter "depth"=k; a mark "tick".
// Per thread: thread name "worker-<t>", then a burn of ~300 ms of CPU inside
// operation 900000+t, and one event "long" whose string field is 300 bytes (past the shim's 256-byte cap).
#include <loupe/loupe.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

volatile uint64_t sink;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void Worker(int t, int operations) {
  const std::string name = "worker-" + std::to_string(t);
  LOUPE_THREAD_NAME(name.c_str());
  for (int k = 1; k <= operations; ++k) {
    loupe::Operation operation(static_cast<uint64_t>(t) * 1000 + k, "request");
    LOUPE_SCOPE("handle");
    {
      LOUPE_SCOPE("parse");
      const std::string text = "payload-" + std::to_string(k);
      LOUPE_EVENT("parsed", loupe_int("n", -k), loupe_uint("u", static_cast<uint64_t>(k)),
                  loupe_double("d", k / 2.0), loupe_bool("b", k % 2), loupe_string("s", text.c_str()),
                  loupe_bytes("size", 4096));
    }
    loupe_counter_int("depth", k);
    LOUPE_MARK("tick");
  }
  {
    loupe::Operation operation(900000 + static_cast<uint64_t>(t), "burn");
    const double start = CpuSeconds();
    while (CpuSeconds() - start < 0.3) {
      for (int i = 0; i < 100000; ++i) sink = sink + static_cast<uint64_t>(i);
    }
  }
  const std::string long_text(300, 'x');
  LOUPE_EVENT("long", loupe_string("text", long_text.c_str()));
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int operations = argc > 2 ? std::atoi(argv[2]) : 100;
  std::printf("ready %d\n", getpid());
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return 0;
  std::vector<std::thread> workers;
  std::vector<long> tids(threads);
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([t, operations, &tids] {
      tids[t] = syscall(SYS_gettid);
      Worker(t, operations);
    });
  }
  for (std::thread& worker : workers) worker.join();
  std::printf("done");
  for (long tid : tids) std::printf(" %ld", tid);
  std::printf("\n");
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
