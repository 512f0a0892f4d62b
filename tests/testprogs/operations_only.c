/* A program that uses only the shim's operations, never a span: whether
 * loupe_tracing() turns true while it is traced. Prints "ready <pid>", then
 * polls for up to 10 s and prints "traced after <ms> ms" or "never traced"
 * (exit 1). Once traced it runs on for 3 s (exit 0), past the session, so
 * that the tracer is never left attaching to a process that just left. */
#include <loupe/loupe.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(void)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (int ms = 0; ms < 10000; ++ms) {
		loupe_operation_t operation = loupe_operation_begin((uint64_t)ms + 1, "poll");
		const int traced = loupe_tracing();
		loupe_operation_end(operation);
		const struct timespec pause = {0, 1000000};
		if (traced) {
			printf("traced after %d ms\n", ms);
			fflush(stdout);
			for (int more = 0; more < 3000; ++more) nanosleep(&pause, NULL);
			return 0;
		}
		nanosleep(&pause, NULL);
	}
	printf("never traced\n");
	return 1;
}
