/* Slow requests back off and retry: try_acquire refuses one request in
 * five one to three times, and after each refusal retry_backoff sleeps
 * 5-20 ms in nanosleep before trying again. A timer wakes the worker.
 * cause_ns: time inside nanosleep. */
#include "service.h"

#define WORKERS 2

__attribute__((noinline)) int try_acquire(uint64_t id, int attempt)
{
	return id % 5 != 0 || attempt > (int)(id / 5 % 3);
}

__attribute__((noinline)) uint64_t retry_backoff(int attempt)
{
	uint64_t delay_ns = attempt >= 2 ? 20000000 : 5000000ull << attempt;
	struct timespec ts = {0, (long)delay_ns};
	uint64_t start = service_now_ns();

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return service_now_ns() - start;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	uint64_t slept = 0;

	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");

	for (int attempt = 0; !try_acquire(id, attempt); ++attempt)
		slept += retry_backoff(attempt);
	SERVICE_SPIN_CPU_NS(200000);
	loupe_span_end(span);
	service_request_exit(slept);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	return service_serve(arg, handle_request, 10000000);
}

int main(int argc, char **argv)
{
	return service_main(argc, argv, WORKERS, worker);
}
