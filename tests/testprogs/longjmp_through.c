// Calls handle_request() <count> times after the go line; every third call
// is left by a longjmp from step(), two frames down, back to main's setjmp
// (PostgreSQL's errors leave their calls so). Built plain (longjmp) and
// fortified (__longjmp_chk). Prints "ready <pid>", then
// "done <returned> <jumped>", then waits for stdin to close.
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static sigjmp_buf on_error;
static volatile long sink;

__attribute__((noipa)) static long step(long i) {
  if (i % 3 == 0) siglongjmp(on_error, 1);
  sink += i;
  return sink;
}

// noipa: no clone under another name to probe instead.
__attribute__((noipa)) long handle_request(long i) {
  char scratch[64];
  snprintf(scratch, sizeof scratch, "request %ld", i);
  return step(i) + scratch[0];
}

int main(int argc, char** argv) {
  const long count = argc > 1 ? atol(argv[1]) : 3000;
  printf("ready %d\n", getpid());
  fflush(stdout);
  char line[64];
  if (!fgets(line, sizeof line, stdin)) return 0;
  volatile long returned = 0, jumped = 0;
  for (volatile long i = 0; i < count; ++i) {
    if (sigsetjmp(on_error, 0) != 0) {
      ++jumped;
      continue;
    }
    handle_request(i);
    ++returned;
  }
  printf("done %ld %ld\n", returned, jumped);
  fflush(stdout);
  while (fgets(line, sizeof line, stdin)) {
  }
  return 0;
}
