// Calls handle_request() <count> times after the go line, each through
// callback_lib's run_callback (C); every third call throws from step(),
// through handle_request() and run_callback(), to main's catch. Return
// probes on either must let the exceptions through (x86_sites.h).
// Prints "ready <pid>", then "done <returned> <thrown>", then waits for
// stdin to close.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>

namespace {

volatile long sink;

__attribute__((noipa)) long step(long i) {
  if (i % 3 == 0) throw std::runtime_error("step " + std::to_string(i));
  sink += i;
  return sink;
}

}  // namespace

extern "C" long run_callback(long (*callback)(long), long x);

// Its own cleanup (the string) makes a landing pad the unwinder stops in
// on its way through. noipa: no clone under another name to probe instead.
__attribute__((noipa)) long handle_request(long i) {
  const std::string name = "request " + std::to_string(i);
  return step(i) + static_cast<long>(name.size());
}

int main(int argc, char** argv) {
  const long count = argc > 1 ? std::atol(argv[1]) : 3000;
  std::printf("ready %d\n", getpid());
  std::fflush(stdout);
  std::string line;
  if (!std::getline(std::cin, line)) return 0;
  long returned = 0, thrown = 0;
  for (long i = 0; i < count; ++i) {
    try {
      run_callback(handle_request, i);
      ++returned;
    } catch (const std::runtime_error&) {
      ++thrown;
    }
  }
  std::printf("done %ld %ld\n", returned, thrown);
  std::fflush(stdout);
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
