/* Slow requests wait for a backend on the same host, over loopback TCP (an
 * application and its local database or cache): each worker sends its
 * request to its own connection of a "backend" process, which answers after
 * 0.2 ms, but one request in five after 15-35 ms. The worker blocks in
 * read() until the backend writes. The kernel runs the receive side of a
 * loopback write in a softirq on the writer's own CPU, in its context: the
 * backend woke the worker, not an interrupt. cause_ns: time inside read(). */
#include "service.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>

#define WORKERS 2

static int connections[WORKERS];

__attribute__((noinline)) uint64_t read_backend(int fd, char *reply, size_t size)
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

__attribute__((noinline)) void handle_request(uint64_t id, int connection)
{
	char reply[64];

	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");

	if (write(connection, &id, sizeof id) != sizeof id)
		service_die("write request");
	uint64_t waited = read_backend(connection, reply, sizeof reply);

	loupe_span_end(span);
	service_request_exit(waited);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	int index = (int)(intptr_t)arg;
	char name[16];

	snprintf(name, sizeof name, "worker-%d", index);
	service_name_thread(name);
	for (uint64_t round = 0; service_running(); ++round) {
		handle_request(round * WORKERS + (uint64_t)index + WORKERS, connections[index]);
		service_sleep_ns(10000000);
	}
	return NULL;
}

static void no_delay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		service_die("TCP_NODELAY");
}

/* One backend thread per connection, in a process of its own. */
static void *serve(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char reply[64] = "reply";
	uint64_t id;

	service_name_thread("backend");
	while (read(fd, &id, sizeof id) == sizeof id) {
		service_sleep_ns(id % 5 == 0 ? (15 + id * 7 % 21) * 1000000ull : 200000);
		if (write(fd, reply, sizeof reply) != sizeof reply)
			service_die("write reply");
	}
	return NULL;
}

static int listener;

static void backend_main(int go_fd)
{
	pthread_t threads[WORKERS];

	(void)go_fd;
	prctl(PR_SET_NAME, "backend", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	for (int i = 0; i < WORKERS; ++i) {
		int fd = accept(listener, NULL, NULL);

		if (fd < 0)
			service_die("accept");
		no_delay(fd);
		if (pthread_create(&threads[i], NULL, serve, (void *)(intptr_t)fd) != 0)
			service_die("pthread_create");
	}
	for (int i = 0; i < WORKERS; ++i)
		pthread_join(threads[i], NULL);
	_exit(0);
}

int main(int argc, char **argv)
{
	struct sockaddr_in address = {.sin_family = AF_INET,
				      .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t length = sizeof address;
	pthread_t workers[WORKERS];
	int go_fd;

	service_parse_args(argc, argv);
	listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
	    listen(listener, WORKERS) != 0 ||
	    getsockname(listener, (struct sockaddr *)&address, &length) != 0)
		service_die("listen on loopback");
	/* Started before "ready": the tracer sees the backend as another process. */
	service_fork_helper(backend_main, &go_fd);
	close(listener);
	for (int i = 0; i < WORKERS; ++i) {
		connections[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (connections[i] < 0 ||
		    connect(connections[i], (struct sockaddr *)&address, sizeof address) != 0)
			service_die("connect to the backend");
		no_delay(connections[i]);
	}
	service_wait_go();
	service_start_threads(workers, WORKERS, worker);
	service_join_threads(workers, WORKERS);
	for (int i = 0; i < WORKERS; ++i)
		close(connections[i]);
	close(go_fd);
	service_finish();
	return 0;
}
