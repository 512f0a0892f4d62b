/* A server that forks one process per "connection": after the go line it
 * forks <children> children; each serves <requests> requests, firing the
 * USDT probe server:request (with a semaphore) and calling handle_request()
 * per request, then exits. The parent serves none itself. Prints
 * "ready <pid>", "child <pid>" per child, "done", waits for stdin to close. */
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#include <sys/wait.h>
#include "testprog.h"

__extension__ unsigned short server_request_semaphore __attribute__((unused, section(".probes")));

static volatile long served;

__attribute__((noinline)) long handle_request(long id)
{
	served += id;
	return served;
}

int main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 3;
	int requests = argc > 2 ? atoi(argv[2]) : 5;

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (int c = 0; c < children; ++c) {
		pid_t pid = fork();

		if (pid == 0) {
			for (long r = 0; r < requests; ++r) {
				DTRACE_PROBE2(server, request, c, r);
				handle_request(r);
			}
			_exit(0);
		}
		printf("child %d\n", pid);
		fflush(stdout);
		waitpid(pid, NULL, 0);
	}
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
