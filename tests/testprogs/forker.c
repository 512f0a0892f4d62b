/* Forks `children` processes after the go line; each burns a little CPU and
 * sleeps, then exits. Prints "ready <pid>", then "child <pid>" for each,
 * then "done"; waits for stdin to close. */
#include <sys/wait.h>
#include <time.h>
#include "testprog.h"

static volatile unsigned long sink;

static void work(void)
{
	for (unsigned long i = 0; i < 50000000UL; ++i)
		sink += i;
	usleep(20000);
}

int main(int argc, char **argv)
{
	int children = argc > 1 ? atoi(argv[1]) : 3;

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (int i = 0; i < children; ++i) {
		pid_t pid = fork();

		if (pid == 0) {
			work();
			_exit(0);
		}
		printf("child %d\n", pid);
		fflush(stdout);
	}
	while (wait(NULL) > 0)
		;
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
