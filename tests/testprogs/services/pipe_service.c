/* Slow requests wait for an upstream: each worker sends its request down a
 * pipe to a "feeder" thread (its upstream connection) and reads the reply
 * from another pipe. The feeder answers after 0.2 ms, but one request in
 * five after 15-35 ms, so the worker blocks in read() until the feeder
 * writes. cause_ns: time inside read(). */
#include "service.h"

#define WORKERS 2

struct connection {
	int request[2], reply[2];
};

static struct connection connections[WORKERS];

__attribute__((noinline)) uint64_t read_upstream(int fd, char *reply, size_t size)
{
	uint64_t start = service_now_ns();
	size_t got = 0;

	while (got < size) {
		ssize_t n = read(fd, reply + got, size - got);

		if (n <= 0)
			service_die("read reply");
		got += (size_t)n;
	}
	return service_now_ns() - start;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	struct connection *c = &connections[id % WORKERS];
	char reply[64];

	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");

	if (write(c->request[1], &id, sizeof id) != sizeof id)
		service_die("write request");
	uint64_t waited = read_upstream(c->reply[0], reply, sizeof reply);

	loupe_span_end(span);
	service_request_exit(waited);
	loupe_operation_end(op);
}

static void *feeder(void *arg)
{
	struct connection *c = &connections[(intptr_t)arg];
	char reply[64] = "reply";
	uint64_t id;

	service_name_thread("feeder");
	while (read(c->request[0], &id, sizeof id) == sizeof id) {
		service_sleep_ns(id % 5 == 0 ? (15 + id * 7 % 21) * 1000000ull : 200000);
		if (write(c->reply[1], reply, sizeof reply) != sizeof reply)
			service_die("write reply");
	}
	return NULL;
}

static void *worker(void *arg)
{
	int index = (int)(intptr_t)arg;
	char name[16];

	snprintf(name, sizeof name, "worker-%d", index);
	service_name_thread(name);
	/* Ids are dealt so that each worker talks to its own feeder. */
	for (uint64_t round = 0; service_running(); ++round) {
		handle_request(round * WORKERS + (uint64_t)index + WORKERS);
		service_sleep_ns(10000000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t workers[WORKERS], feeders[WORKERS];

	service_parse_args(argc, argv);
	for (int i = 0; i < WORKERS; ++i)
		if (pipe(connections[i].request) != 0 || pipe(connections[i].reply) != 0)
			service_die("pipe");
	service_wait_go();
	service_start_threads(feeders, WORKERS, feeder);
	service_start_threads(workers, WORKERS, worker);
	service_join_threads(workers, WORKERS);
	for (int i = 0; i < WORKERS; ++i)
		close(connections[i].request[1]);
	service_join_threads(feeders, WORKERS);
	service_finish();
	return 0;
}
