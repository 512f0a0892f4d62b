/* Renames its main thread `count` times as fast as it can: exactly `count`
 * thread-name events, to overflow a small ring on purpose. Prints "ready
 * <pid>", waits for a line, renames, prints "done <count>", waits for stdin
 * to close. */
#include <sys/prctl.h>
#include "testprog.h"

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 100000;
	char name[32];

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (long i = 0; i < count; ++i) {
		snprintf(name, sizeof name, "n%ld", i);
		prctl(PR_SET_NAME, name);
	}
	printf("done %ld\n", count);
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
