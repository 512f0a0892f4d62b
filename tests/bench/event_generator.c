/* Shim events at a chosen rate, for the live pipeline benchmark
 * (live_pipeline_bench.sh). Waits until a tracer is attached (up to 10 s),
 * then THREADS threads emit RATE shim events per second between them for
 * SECONDS (RATE 0: as fast as they can), as span begin/end pairs, sleeping
 * between 1 ms batches so they are also switched out and woken. Prints
 * what was produced:
 *   "shim_events <n> switches <voluntary+involuntary> seconds <s>"
 *   event_generator THREADS RATE SECONDS */
#define _GNU_SOURCE
#include <loupe/loupe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double rate_per_thread;
static double seconds;

struct counts {
	long long events;
	long long switches;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *emit(void *arg)
{
	struct counts *counts = arg;
	const double start = now();
	struct timespec tick;

	clock_gettime(CLOCK_MONOTONIC, &tick);
	for (double elapsed = 0; elapsed < seconds; elapsed = now() - start) {
		/* Catch up to the rate: a late tick emits what it owes. */
		const long long due = rate_per_thread > 0 ? (long long)(elapsed * rate_per_thread)
							  : counts->events + 1000;
		while (counts->events < due) {
			loupe_span_end(loupe_span_begin("generated"));
			counts->events += 2;
		}
		tick.tv_nsec += 1000000;
		if (tick.tv_nsec >= 1000000000) {
			tick.tv_nsec -= 1000000000;
			++tick.tv_sec;
		}
		if (rate_per_thread > 0)
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &tick, NULL);
	}
	struct rusage usage;

	getrusage(RUSAGE_THREAD, &usage);
	counts->switches = usage.ru_nvcsw + usage.ru_nivcsw;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s THREADS RATE SECONDS\n", argv[0]);
		return 2;
	}
	const int threads = atoi(argv[1]);
	const double rate = atof(argv[2]);

	seconds = atof(argv[3]);
	if (threads < 1 || threads > 256 || rate < 0 || seconds <= 0) {
		fprintf(stderr, "THREADS 1..256, RATE >= 0, SECONDS > 0\n");
		return 2;
	}
	rate_per_thread = rate / threads;
	for (int i = 0; i < 1000 && !loupe_tracing(); ++i)
		usleep(10000);
	if (!loupe_tracing()) {
		fprintf(stderr, "no tracer attached in 10 s\n");
		return 1;
	}
	pthread_t ids[256];
	struct counts counts[256] = {0};

	for (int i = 0; i < threads; ++i)
		pthread_create(&ids[i], NULL, emit, &counts[i]);
	long long events = 0, switches = 0;

	for (int i = 0; i < threads; ++i) {
		pthread_join(ids[i], NULL);
		events += counts[i].events;
		switches += counts[i].switches;
	}
	printf("shim_events %lld switches %lld seconds %.3f\n", events, switches, seconds);
	return 0;
}
