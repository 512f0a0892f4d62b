/* Slow requests wait in a queue between two threads: an acceptor takes a
 * request every 4 ms, reads it (0.1 ms of CPU) and passes it to the one
 * worker through a queue; the worker handles each in 0.5 ms of CPU, but
 * every 25th request it first flushes a log for 25 ms of CPU. Requests that
 * arrive meanwhile wait in the queue: they are slow, and neither thread
 * spends their time — no thread holds them at all.
 *
 * One request is one shim operation bound first on the acceptor and, after
 * loupe_operation_pass, on the worker. Ground truth per request:
 *   begin/end: the acceptor's begin, the worker's end;
 *   on_cpu_ns, run_delay_ns: both threads' deltas while bound, summed;
 *   cause_ns: queued, from the pass to the worker's take. */
#include "service.h"

#define QUEUE_SLOTS 1024

struct request {
	uint64_t id;
	loupe_operation_t op;
	uint64_t passed_ns;
	struct service_truth truth;
};

static struct request requests[QUEUE_SLOTS];
static uint64_t queue_head, queue_tail; /* under queue_lock */
static int accepting_done;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_filled = PTHREAD_COND_INITIALIZER;

/* The thread's CPU time and run delay now, to be subtracted from later. */
static void bound_since(struct service_truth *t, int sign)
{
	t->on_cpu_ns += (uint64_t)sign * service_thread_cpu_ns();
	t->run_delay_ns += (uint64_t)sign * service_run_delay_ns();
}

__attribute__((noinline)) void read_request(struct request *r)
{
	SERVICE_SPIN_CPU_NS(100000);
	__asm__ volatile("" : : "r"(r));
}

static void *acceptor(void *arg)
{
	(void)arg;
	service_name_thread("acceptor");
	for (uint64_t next_ns = service_now_ns(); service_running(); next_ns += 4000000) {
		uint64_t now = service_now_ns();

		if (now < next_ns)
			service_sleep_ns(next_ns - now);
		pthread_mutex_lock(&queue_lock);
		int full = queue_tail - queue_head >= QUEUE_SLOTS;
		pthread_mutex_unlock(&queue_lock);
		if (full)
			continue;

		struct request *r = &requests[queue_tail % QUEUE_SLOTS];
		memset(r, 0, sizeof *r);
		r->id = service_next_id();
		r->op = loupe_operation_begin(r->id, "request");
		r->truth.id = r->id;
		bound_since(&r->truth, -1);
		r->truth.begin_ns = service_now_ns();
		read_request(r);
		bound_since(&r->truth, 1);
		r->passed_ns = service_now_ns();
		loupe_operation_pass(r->op);

		pthread_mutex_lock(&queue_lock);
		++queue_tail;
		pthread_cond_signal(&queue_filled);
		pthread_mutex_unlock(&queue_lock);
	}
	pthread_mutex_lock(&queue_lock);
	accepting_done = 1;
	pthread_cond_signal(&queue_filled);
	pthread_mutex_unlock(&queue_lock);
	return NULL;
}

__attribute__((noinline)) void flush_log(void) { SERVICE_SPIN_CPU_NS(25000000); }

__attribute__((noinline)) void handle_request(struct request *r)
{
	/* Taken up under the same id: the pass and this begin are one request. */
	loupe_operation_t op = loupe_operation_begin(r->id, "request");
	struct service_truth *t = &r->truth;

	t->cause_ns = service_now_ns() - r->passed_ns;
	bound_since(t, -1);
	SERVICE_SPIN_CPU_NS(500000);
	bound_since(t, 1);
	t->end_ns = service_now_ns();
	int slot = atomic_fetch_add(&service_state.truth_count, 1);
	if (slot < SERVICE_MAX_REQUESTS)
		service_state.truth[slot] = *t;
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	(void)arg;
	service_name_thread("worker");
	for (uint64_t served = 0;; ++served) {
		pthread_mutex_lock(&queue_lock);
		while (queue_head == queue_tail && !accepting_done)
			pthread_cond_wait(&queue_filled, &queue_lock);
		if (queue_head == queue_tail) {
			pthread_mutex_unlock(&queue_lock);
			return NULL;
		}
		struct request *r = &requests[queue_head % QUEUE_SLOTS];
		pthread_mutex_unlock(&queue_lock);

		if (served % 25 == 24)
			flush_log();
		handle_request(r);
		pthread_mutex_lock(&queue_lock);
		++queue_head;
		pthread_mutex_unlock(&queue_lock);
	}
}

int main(int argc, char **argv)
{
	pthread_t accepting, working;

	service_parse_args(argc, argv);
	service_wait_go();
	service_start_threads(&working, 1, worker);
	service_start_threads(&accepting, 1, acceptor);
	service_join_threads(&accepting, 1);
	service_join_threads(&working, 1);
	service_finish();
	return 0;
}
