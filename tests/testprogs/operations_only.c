/* A program that uses only the shim's operations, never a span: whether
 * loupe_tracing() turns true while it is traced. Prints "ready <pid>", then
 * polls for up to 10 s and prints "traced after <ms> ms" (exit 0) or
 * "never traced" (exit 1). */
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
		if (traced) {
			printf("traced after %d ms\n", ms);
			return 0;
		}
		const struct timespec pause = {0, 1000000};
		nanosleep(&pause, NULL);
	}
	printf("never traced\n");
	return 1;
}
