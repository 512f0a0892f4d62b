/* A small multi-threaded "service" for the quick start: workers that
 * compute, contend for a lock, sleep on I/O-like waits and hand work to each
 * other over a pipe, until killed or for the given seconds. Each round is an
 * operation ("request") with spans, told to Loupe through the shim. */
#include <loupe/loupe.h>
#include <pthread.h>
#include <time.h>
#include "testprog.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared_total;
static int handoff[2];
static double deadline;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long compute(unsigned long n)
{
	unsigned long x = 0;

	for (unsigned long i = 0; i < n; ++i)
		x += i * 2654435761UL;
	return x;
}

__attribute__((noinline)) static void update_shared(unsigned long value)
{
	pthread_mutex_lock(&lock);
	shared_total += compute(20000) + value;
	pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
	long id = (long)arg;
	char c = 'w';
	uint64_t round = 0;
	int ok = 1;

	LOUPE_THREAD_NAME(id == 0 ? "producer" : id == 1 ? "consumer" : "worker");
	while (ok && now() < deadline) {
		loupe_operation_t request = loupe_operation_begin(((uint64_t)id << 32) | ++round, "request");
		loupe_span_t span = loupe_span_begin("compute");
		unsigned long result = compute(200000);

		loupe_span_end(span);
		span = loupe_span_begin("update_shared");
		update_shared(result);
		loupe_span_end(span);
		if (id == 0 && write(handoff[1], &c, 1) != 1)
			ok = 0;
		if (id == 1 && read(handoff[0], &c, 1) != 1)
			ok = 0;
		LOUPE_EVENT("round", loupe_int("worker", id), loupe_uint("round", round));
		loupe_operation_end(request);
		usleep(500 + id * 300);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3600;
	pthread_t threads[4];

	deadline = now() + seconds;
	if (pipe(handoff))
		return 1;
	for (long i = 0; i < 4; ++i)
		pthread_create(&threads[i], NULL, worker, (void *)i);
	printf("ready %d\n", getpid());
	fflush(stdout);
	for (int i = 0; i < 4; ++i)
		pthread_join(threads[i], NULL);
	return 0;
}
