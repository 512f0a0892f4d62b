/* A prefork server in miniature: emits a span every 2 ms; after the go
 * line (spans already emitted while traced), forks a worker that emits 50
 * spans of its own and exits 0. Prints "ready <pid>", then "child <pid>
 * status <wait status>"; waits for stdin to close. Built twice: with the
 * shim's default probe sites and with LOUPE_SHIM_TRAP_PROBES. */
#include <loupe/loupe.h>
#include <sys/wait.h>
#include <time.h>
#include "testprog.h"

static void spans(int count)
{
	const struct timespec pause = {0, 2000000};

	for (int i = 0; i < count; ++i) {
		loupe_span_t span = loupe_span_begin("work");
		nanosleep(&pause, NULL);
		loupe_span_end(span);
	}
}

int main(void)
{
	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	spans(50);
	const pid_t child = fork();
	if (child == 0) {
		spans(50);
		_exit(0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	printf("child %d status %d\n", child, status);
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
