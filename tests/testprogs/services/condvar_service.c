/* Workers idle in pthread_cond_wait between requests: a "dispatcher"
 * thread queues a job every 8 ms and signals one of them. Inside a request
 * a worker only computes, 0.5 ms, or 6 ms for one job in five, so the
 * slow requests are slow on the CPU, and the waits are all outside them,
 * on a condition variable, not a lock. cause_ns: time inside
 * compute_reply. */
#include "service.h"

#define WORKERS 2
#define QUEUE 64

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static uint64_t queue[QUEUE];
static unsigned queue_head, queue_tail;
static int closed;

__attribute__((noinline)) uint64_t compute_reply(uint64_t id)
{
	uint64_t start = service_now_ns();

	SERVICE_SPIN_CPU_NS(id % 5 == 0 ? 6000000 : 500000);
	return service_now_ns() - start;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t computing = compute_reply(id);

	loupe_span_end(span);
	service_request_exit(computing);
	loupe_operation_end(op);
}

/* 0 once the dispatcher has closed the queue and it is empty. */
__attribute__((noinline)) uint64_t wait_for_job(void)
{
	uint64_t id = 0;

	pthread_mutex_lock(&queue_lock);
	while (queue_head == queue_tail && !closed)
		pthread_cond_wait(&queue_ready, &queue_lock);
	if (queue_head != queue_tail)
		id = queue[queue_head++ % QUEUE];
	pthread_mutex_unlock(&queue_lock);
	return id;
}

static void *worker(void *arg)
{
	char name[16];

	snprintf(name, sizeof name, "worker-%d", (int)(intptr_t)arg);
	service_name_thread(name);
	for (uint64_t id; (id = wait_for_job()) != 0;)
		handle_request(id);
	return NULL;
}

static void *dispatcher(void *arg)
{
	(void)arg;
	service_name_thread("dispatcher");
	while (service_running()) {
		pthread_mutex_lock(&queue_lock);
		if (queue_tail - queue_head < QUEUE)
			queue[queue_tail++ % QUEUE] = service_next_id();
		pthread_mutex_unlock(&queue_lock);
		/* Signalled after unlocking, so the woken worker does not
		 * then block on the mutex the dispatcher still holds. */
		pthread_cond_signal(&queue_ready);
		service_sleep_ns(8000000);
	}
	pthread_mutex_lock(&queue_lock);
	closed = 1;
	pthread_mutex_unlock(&queue_lock);
	pthread_cond_broadcast(&queue_ready);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t workers[WORKERS], sender;

	service_parse_args(argc, argv);
	service_wait_go();
	service_start_threads(workers, WORKERS, worker);
	service_start_threads(&sender, 1, dispatcher);
	service_join_threads(&sender, 1);
	service_join_threads(workers, WORKERS);
	service_finish();
	return 0;
}
