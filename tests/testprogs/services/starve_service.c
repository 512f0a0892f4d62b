/* Slow requests wait for a CPU: the only worker, "worker-0", is pinned to
 * CPU 0 at nice 10 and needs 1-3 ms of CPU per request. A separate
 * process, "noisy" (this program again, run with --noisy), pins two
 * "bg_compress" threads to CPU 0 at nice 0 and spins them in bursts;
 * during a burst the worker spends most of its time runnable but not
 * running. The noisy process is started before "ready", so a tracer
 * attached to the service's pid does not follow it. cause_ns: 0 (the
 * run delay column is the measure). */
#include "service.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#define NOISY_THREADS 2

static void pin_to_cpu0(void)
{
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	CPU_SET(0, &cpus);
	if (sched_setaffinity(0, sizeof cpus, &cpus) != 0)
		service_die("sched_setaffinity");
}

__attribute__((noinline)) void render_response(uint64_t id)
{
	SERVICE_SPIN_CPU_NS((1 + id % 3) * 1000000ull);
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	render_response(id);
	loupe_span_end(span);
	service_request_exit(0);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	(void)arg;
	service_name_thread("worker-0");
	pin_to_cpu0();
	if (setpriority(PRIO_PROCESS, (id_t)service_gettid(), 10) != 0)
		service_die("setpriority");
	while (service_running()) {
		handle_request(service_next_id());
		service_sleep_ns(10000000);
	}
	return NULL;
}

/* Noisy: bursts of 150 ms spinning, 250 ms apart, from its go byte on. */
__attribute__((noinline)) void bg_compress_burst(void)
{
	SERVICE_SPIN_CPU_NS(150000000);
}

static void *bg_compress(void *arg)
{
	(void)arg;
	service_name_thread("bg_compress");
	pin_to_cpu0();
	for (;;) {
		bg_compress_burst();
		service_sleep_ns(250000000);
	}
	return NULL;
}

static int noisy_main(void)
{
	pthread_t threads[NOISY_THREADS];
	char go;

	prctl(PR_SET_NAME, "noisy", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* The service writes one byte to start the bursts and closes the pipe
	 * to end them. */
	if (read(STDIN_FILENO, &go, 1) != 1)
		return 0;
	service_start_threads(threads, NOISY_THREADS, bg_compress);
	while (read(STDIN_FILENO, &go, 1) > 0)
		;
	return 0;
}

/* The noisy process reads its go byte on stdin. */
static void exec_noisy(int go_fd)
{
	dup2(go_fd, STDIN_FILENO);
	close(go_fd);
	execl("/proc/self/exe", "noisy", "--noisy", (char *)NULL);
}

int main(int argc, char **argv)
{
	pthread_t thread;
	int noisy_go;
	pid_t noisy;

	if (argc > 1 && strcmp(argv[1], "--noisy") == 0)
		return noisy_main();
	service_parse_args(argc, argv);
	noisy = service_fork_helper(exec_noisy, &noisy_go);
	service_wait_go();
	if (write(noisy_go, "g", 1) != 1)
		service_die("start noisy");
	service_start_threads(&thread, 1, worker);
	service_join_threads(&thread, 1);
	close(noisy_go);
	kill(noisy, SIGKILL);
	waitpid(noisy, NULL, 0);
	service_finish();
	return 0;
}
