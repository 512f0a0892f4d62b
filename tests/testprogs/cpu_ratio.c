/* Burns CPU in two functions, about three parts in hot_a for one in hot_b,
 * for the given seconds, and measures the split itself in CPU time (which a
 * busy machine does not distort). Prints "ready <tid>", waits for a line,
 * burns, prints "done <percent of cpu time in hot_a> <cpu seconds burnt>",
 * waits for stdin to close. */
#include <time.h>
#include "testprog.h"

static volatile unsigned long sink;

static double now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void hot_a(unsigned long n)
{
	for (unsigned long i = 0; i < n; ++i)
		sink += i * i;
}

__attribute__((noinline)) void hot_b(unsigned long n)
{
	for (unsigned long i = 0; i < n; ++i)
		sink += i ^ (i >> 3);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;

	printf("ready %d\n", testprog_gettid());
	fflush(stdout);
	testprog_wait_line();
	double in_a = 0, in_b = 0;
	unsigned long jitter = 12345;

	for (double end = now(CLOCK_MONOTONIC) + seconds; now(CLOCK_MONOTONIC) < end;) {
		/* Lengths that vary round to round: a loop of one fixed period
		 * can lock onto the sampling clock's and show it the same phase
		 * again and again. */
		jitter = jitter * 6364136223846793005ul + 1442695040888963407ul;
		unsigned long spread = (jitter >> 33) % 100000;
		double t0 = now(CLOCK_THREAD_CPUTIME_ID);

		hot_a(250000 + spread);
		double t1 = now(CLOCK_THREAD_CPUTIME_ID);

		hot_b(50000 + spread);
		in_a += t1 - t0;
		in_b += now(CLOCK_THREAD_CPUTIME_ID) - t1;
	}
	printf("done %.2f %.3f\n", 100 * in_a / (in_a + in_b), in_a + in_b);
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
