#include <loupe/loupe.h>

int main() {
  LOUPE_SCOPE("main");
  loupe_counter_int("answer", 42);
  return loupe_tracing();
}
