// The traced side of probe_bench: fires one kind of probe N times in a
// tight loop and prints the nanoseconds per iteration it measured itself.
//   probe_workload MODE N   (MODE: empty, shim, sdt, push, nopush)
// Prints "ready <pid>", waits for a line, runs, prints "ns <per iteration>".
#include <loupe/loupe.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

// Function entries for uprobes, in assembly so the compiler cannot change
// them: one starting with push %rbp (the kernel emulates it), one starting
// with sub $8,%rsp, as many leaf and library functions do (single-stepped).
__asm__(
    ".text\n"
    ".globl bench_push\n.type bench_push, @function\n"
    "bench_push:\n push %rbp\n mov %rsp, %rbp\n lea 1(%rdi), %rax\n pop %rbp\n ret\n"
    ".size bench_push, .-bench_push\n"
    ".globl bench_nopush\n.type bench_nopush, @function\n"
    "bench_nopush:\n sub $8, %rsp\n lea 2(%rdi), %rax\n add $8, %rsp\n ret\n"
    ".size bench_nopush, .-bench_nopush\n");
extern "C" long bench_push(long x);
extern "C" long bench_nopush(long x);

namespace {

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

volatile long sink;

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::string mode = argv[1];
  const long n = std::atol(argv[2]);
  std::printf("ready %d\n", getpid());
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return 0;
  const uint64_t start = Now();
  if (mode == "empty") {
    for (long i = 0; i < n; ++i) sink = i;
  } else if (mode == "shim") {
    for (long i = 0; i < n; ++i) {
      loupe_counter_int("bench", i);
      sink = i;
    }
  } else if (mode == "sdt") {
    for (long i = 0; i < n; ++i) {
      DTRACE_PROBE1(bench, classic, i);
      sink = i;
    }
  } else if (mode == "push") {
    for (long i = 0; i < n; ++i) sink = bench_push(i);
  } else if (mode == "nopush") {
    for (long i = 0; i < n; ++i) sink = bench_nopush(i);
  } else {
    return 2;
  }
  const uint64_t took = Now() - start;
  std::printf("ns %.3f\n", static_cast<double>(took) / static_cast<double>(n));
  std::fflush(stdout);
  return 0;
}
