/* Fixed work for overhead benchmarks: waits `delay` seconds (for a tracer to
 * attach), then does the work and prints "<elapsed ns> <process cpu ns>" (the
 * cpu time includes what BPF programs cost in the process's context).
 *   bench_work cpu <iterations> <delay>       one thread computing
 *   bench_work pingpong <rounds> <delay>      two threads over pipes */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include "testprog.h"

static volatile unsigned long sink;
static int a_to_b[2], b_to_a[2];
static long rounds;

static long long clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) static void compute(unsigned long n)
{
	for (unsigned long i = 0; i < n; ++i)
		sink += i * i;
}

static void *partner(void *unused)
{
	char c;

	(void)unused;
	for (long i = 0; i < rounds; ++i)
		if (read(a_to_b[0], &c, 1) != 1 || write(b_to_a[1], &c, 1) != 1)
			break;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4)
		return 2;
	const long n = atol(argv[2]);
	pthread_t thread;
	char c = 'x';

	usleep((useconds_t)(atof(argv[3]) * 1e6));
	const long long start = clock_ns(CLOCK_MONOTONIC);
	const long long cpu_start = clock_ns(CLOCK_PROCESS_CPUTIME_ID);

	if (strcmp(argv[1], "cpu") == 0) {
		compute((unsigned long)n);
	} else {
		rounds = n;
		if (pipe(a_to_b) || pipe(b_to_a))
			return 1;
		pthread_create(&thread, NULL, partner, NULL);
		for (long i = 0; i < rounds; ++i)
			if (write(a_to_b[1], &c, 1) != 1 || read(b_to_a[0], &c, 1) != 1)
				return 1;
		pthread_join(thread, NULL);
	}
	printf("%lld %lld\n", clock_ns(CLOCK_MONOTONIC) - start,
	       clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu_start);
	return 0;
}
