// Throws and catches <count> exceptions (libstdc++'s libstdcxx:throw and
// libstdcxx:catch probes fire once each per exception). Prints "ready <pid>",
// waits for a line, prints "done <count>", waits for stdin to close.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

__attribute__((noinline)) void Fail(int i) { throw std::runtime_error("failure " + std::to_string(i)); }

}  // namespace

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 25;
  std::printf("ready %d\n", getpid());
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return 0;
  int caught = 0;
  for (int i = 0; i < count; ++i) {
    try {
      Fail(i);
    } catch (const std::runtime_error&) {
      ++caught;
    }
  }
  std::printf("done %d\n", caught);
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
