/* A request handler that waits for a lock another thread holds while it
 * sleeps: the trace must blame the lock. After the go line, the holder
 * takes the lock and sleeps <hold_ms> inside it; the handler, inside
 * operation 42 and span "handle", takes the lock (blocking on the futex
 * until the holder lets go), then returns. Repeated <rounds> times. Prints
 * "ready <pid>", then "done <holder tid> <handler tid>", waits for stdin to
 * close. */
#include <loupe/loupe.h>
#include <pthread.h>
#include <time.h>
#include "testprog.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static int hold_ms = 50, rounds = 3;
static pid_t holder_tid, handler_tid;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void *holder(void *arg)
{
	(void)arg;
	holder_tid = testprog_gettid();
	LOUPE_THREAD_NAME("holder");
	for (int r = 0; r < rounds; ++r) {
		pthread_barrier_wait(&start);
		pthread_mutex_lock(&lock);
		pthread_barrier_wait(&start);  /* the handler now goes for the lock */
		sleep_ms(hold_ms);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void *handler(void *arg)
{
	(void)arg;
	handler_tid = testprog_gettid();
	LOUPE_THREAD_NAME("handler");
	for (int r = 0; r < rounds; ++r) {
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&start);
		sleep_ms(5);  /* let the holder be asleep inside the lock */
		loupe_operation_t op = loupe_operation_begin(42, "request");
		loupe_span_t span = loupe_span_begin("handle");

		pthread_mutex_lock(&lock);
		pthread_mutex_unlock(&lock);
		loupe_span_end(span);
		loupe_operation_end(op);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[2];

	if (argc > 1)
		hold_ms = atoi(argv[1]);
	if (argc > 2)
		rounds = atoi(argv[2]);
	pthread_barrier_init(&start, NULL, 2);
	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	pthread_create(&threads[0], NULL, holder, NULL);
	pthread_create(&threads[1], NULL, handler, NULL);
	pthread_join(threads[0], NULL);
	pthread_join(threads[1], NULL);
	printf("done %d %d\n", holder_tid, handler_tid);
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
