/* Prints "ready <pid>", waits for a line, fires the "forms" probes for
 * <rounds> rounds, prints "done", waits for stdin to close. Built as a PIE
 * with the probes inside and as a non-PIE with them in a shared library. */
#include "testprog.h"
#include "usdt_forms.h"

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10;

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	usdt_forms_run(argc, rounds);
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
