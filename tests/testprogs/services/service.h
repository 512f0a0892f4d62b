/* What the diagnosis services share: the life cycle a test drives, thread
 * naming, and the ground truth each request measures about itself.
 *
 * argv: <ground-truth-file> [seconds]. A service prints "ready <pid>",
 * waits for a line on stdin, serves for <seconds> (or until stdin closes),
 * writes one ground-truth line per request, prints "done <requests>" and
 * exits once stdin closes, so a tracer can finish with the process alive.
 *
 * Ground truth, one line per request:
 *   id begin_ns end_ns on_cpu_ns run_delay_ns cause_ns [major_faults]
 * begin/end: CLOCK_MONOTONIC at entry and exit of handle_request; on-CPU:
 * delta of CLOCK_THREAD_CPUTIME_ID, the scheduler's sum_exec_runtime that
 * /proc/thread-self/schedstat shows as field 1, but brought up to date
 * (field 1 of a running thread lags by up to a tick); run delay: delta of
 * schedstat field 2 (updated at every switch-in, so exact while the thread
 * runs); cause_ns: the
 * service's own measure of its cause (0 where it has none). Lines are kept
 * in memory and written at the end: no file I/O or shared lock inside a
 * request distorts what is measured. */
#ifndef LOUPE_TESTS_TESTPROGS_SERVICES_SERVICE_H_
#define LOUPE_TESTS_TESTPROGS_SERVICES_SERVICE_H_

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <loupe/loupe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SERVICE_MAX_REQUESTS 4096

struct service_truth {
	uint64_t id, begin_ns, end_ns, on_cpu_ns, run_delay_ns, cause_ns;
	long major_faults;
};

struct service {
	const char *truth_path;
	int seconds;
	int with_major_faults; /* pagefault_service adds a 7th column */
	uint64_t deadline_ns;
	atomic_int stopping;
	atomic_uint_fast64_t next_id;
	pthread_mutex_t truth_lock;
	struct service_truth truth[SERVICE_MAX_REQUESTS];
	atomic_int truth_count;
};

static struct service service_state;

/* Per thread: schedstat stays open so a request reads it with one pread. */
static _Thread_local int service_schedstat_fd = -1;
static _Thread_local struct service_truth service_current;

static inline uint64_t service_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void service_sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static inline pid_t service_gettid(void) { return (pid_t)syscall(SYS_gettid); }

static inline void service_die(const char *what)
{
	fprintf(stderr, "service: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* The name shows in /proc/<pid>/task/<tid>/comm and, while traced, in the
 * shim's own thread-name record. */
static inline void service_name_thread(const char *name)
{
	prctl(PR_SET_NAME, name, 0, 0, 0);
	LOUPE_THREAD_NAME(name);
}

static inline uint64_t service_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t service_run_delay_ns(void)
{
	char text[128];
	uint64_t on_cpu_ns, run_delay_ns;
	ssize_t n;

	if (service_schedstat_fd < 0) {
		service_schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
		if (service_schedstat_fd < 0)
			service_die("open /proc/thread-self/schedstat");
	}
	n = pread(service_schedstat_fd, text, sizeof text - 1, 0);
	if (n <= 0)
		service_die("read /proc/thread-self/schedstat");
	text[n] = '\0';
	if (sscanf(text, "%lu %lu", &on_cpu_ns, &run_delay_ns) != 2)
		service_die("parse /proc/thread-self/schedstat");
	return run_delay_ns;
}

static inline long service_major_faults(void)
{
	struct rusage usage;

	getrusage(RUSAGE_THREAD, &usage);
	return usage.ru_majflt;
}

/* First thing in handle_request after the operation begins, so that every
 * traced window (the uprobe's entry to return, the operation's begin to
 * end) holds this one: reading schedstat is a syscall, and a thread
 * preempted on its way back waits inside the ground truth's run delay. */
static inline void service_request_enter(uint64_t id)
{
	struct service_truth *t = &service_current;

	t->id = id;
	if (service_state.with_major_faults)
		t->major_faults = service_major_faults();
	t->run_delay_ns = service_run_delay_ns();
	t->on_cpu_ns = service_thread_cpu_ns();
	t->begin_ns = service_now_ns();
}

/* Last thing in handle_request before the operation ends. */
static inline void service_request_exit(uint64_t cause_ns)
{
	struct service_truth *t = &service_current;
	int slot;

	t->end_ns = service_now_ns();
	t->on_cpu_ns = service_thread_cpu_ns() - t->on_cpu_ns;
	t->run_delay_ns = service_run_delay_ns() - t->run_delay_ns;
	if (service_state.with_major_faults)
		t->major_faults = service_major_faults() - t->major_faults;
	t->cause_ns = cause_ns;
	slot = atomic_fetch_add(&service_state.truth_count, 1);
	if (slot < SERVICE_MAX_REQUESTS)
		service_state.truth[slot] = *t;
}

static inline uint64_t service_next_id(void)
{
	return atomic_fetch_add(&service_state.next_id, 1);
}

/* Whether workers should take another request. */
static inline int service_running(void)
{
	return !atomic_load(&service_state.stopping) && service_now_ns() < service_state.deadline_ns;
}

static inline void service_parse_args(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s <ground-truth-file> [seconds]\n", argv[0]);
		exit(2);
	}
	service_state.truth_path = argv[1];
	service_state.seconds = argc > 2 ? atoi(argv[2]) : 3;
}

static void *service_watch_stdin(void *arg)
{
	char line[64];

	(void)arg;
	while (fgets(line, sizeof line, stdin))
		;
	atomic_store(&service_state.stopping, 1);
	return NULL;
}

static pthread_t service_stdin_watcher;

/* Prints "ready", waits for the go line, starts the clock. */
static inline void service_wait_go(void)
{
	char line[64];

	printf("ready %d\n", getpid());
	fflush(stdout);
	if (!fgets(line, sizeof line, stdin))
		exit(0);
	service_state.next_id = 1;
	service_state.deadline_ns = service_now_ns() + (uint64_t)service_state.seconds * 1000000000ull;
	pthread_create(&service_stdin_watcher, NULL, service_watch_stdin, NULL);
}

/* Forks a helper process (a noisy neighbour, a backup job) that runs
 * child(go_fd) and never returns from it. The caller keeps the pipe's write
 * end, *go_fd, to send the helper its go byte and to close when done; it is
 * close-on-exec, so no other child keeps the helper waiting. */
static inline pid_t service_fork_helper(void (*child)(int go_fd), int *go_fd)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds) != 0)
		service_die("pipe");
	pid = fork();
	if (pid < 0)
		service_die("fork");
	if (pid == 0) {
		close(fds[1]);
		child(fds[0]);
		_exit(127);
	}
	close(fds[0]);
	fcntl(fds[1], F_SETFD, FD_CLOEXEC);
	*go_fd = fds[1];
	return pid;
}

/* After the workers are joined: write the ground truth, say so, and stay
 * until stdin closes. */
static inline void service_finish(void)
{
	int count = atomic_load(&service_state.truth_count);
	FILE *out = fopen(service_state.truth_path, "w");

	if (!out)
		service_die(service_state.truth_path);
	if (count > SERVICE_MAX_REQUESTS)
		count = SERVICE_MAX_REQUESTS;
	for (int i = 0; i < count; ++i) {
		const struct service_truth *t = &service_state.truth[i];

		fprintf(out, "%lu %lu %lu %lu %lu %lu", t->id, t->begin_ns, t->end_ns, t->on_cpu_ns,
			t->run_delay_ns, t->cause_ns);
		if (service_state.with_major_faults)
			fprintf(out, " %ld", t->major_faults);
		fputc('\n', out);
	}
	if (fclose(out) != 0)
		service_die(service_state.truth_path);
	printf("done %d\n", count);
	fflush(stdout);
	pthread_join(service_stdin_watcher, NULL);
}

/* Starts n threads running fn(index). */
static inline void service_start_threads(pthread_t *threads, int n, void *(*fn)(void *))
{
	for (int i = 0; i < n; ++i)
		if (pthread_create(&threads[i], NULL, fn, (void *)(intptr_t)i) != 0)
			service_die("pthread_create");
}

static inline void service_join_threads(pthread_t *threads, int n)
{
	for (int i = 0; i < n; ++i)
		pthread_join(threads[i], NULL);
}

/* Burns about ns of this thread's CPU time. A macro rather than an inline
 * function: the loop must be code of the function that uses it, so that CPU
 * samples name that function (the debug info keeps an inlined function's
 * own name, and a symbolizer shows it as the innermost frame). */
#define SERVICE_SPIN_CPU_NS(ns)                                                              \
	do {                                                                                  \
		uint64_t spin_start_ = service_thread_cpu_ns(), spin_sink_ = 0;              \
		do {                                                                          \
			for (int spin_i_ = 0; spin_i_ < 20000; ++spin_i_)                     \
				spin_sink_ = spin_sink_ * 6364136223846793005ull + 1442695040888963407ull; \
			__asm__ volatile("" : "+r"(spin_sink_));                              \
		} while (service_thread_cpu_ns() - spin_start_ < (uint64_t)(ns));             \
	} while (0)

/* A worker thread "worker-<index>": serves requests with a pause between
 * them until the service stops. */
static inline void *service_serve(void *index, void (*handle)(uint64_t id), uint64_t pause_ns)
{
	char name[16];

	snprintf(name, sizeof name, "worker-%d", (int)(intptr_t)index);
	service_name_thread(name);
	while (service_running()) {
		handle(service_next_id());
		service_sleep_ns(pause_ns);
	}
	return NULL;
}

/* A service of `count` identical workers: arguments, "go", serve, done. */
static inline int service_main(int argc, char **argv, int count, void *(*worker)(void *))
{
	pthread_t workers[count];

	service_parse_args(argc, argv);
	service_wait_go();
	service_start_threads(workers, count, worker);
	service_join_threads(workers, count);
	service_finish();
	return 0;
}

#endif
