/* Slow requests are slow on the CPU: handle_request parses the payload,
 * and one payload in five takes about 10 ms of CPU to parse instead of
 * 0.3 ms. Nothing waits. cause_ns: time inside parse_payload. */
#include "service.h"

#define WORKERS 2

__attribute__((noinline)) uint64_t parse_payload(uint64_t id)
{
	uint64_t start = service_now_ns();

	SERVICE_SPIN_CPU_NS(id % 5 == 0 ? 10000000 : 300000);
	return service_now_ns() - start;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t parsing = parse_payload(id);

	loupe_span_end(span);
	service_request_exit(parsing);
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
