/* Slow requests wait for a file lock another process holds: each request of
 * "worker-0" takes an exclusive flock() on the service's lock file, as
 * programs that share a database or a spool directory do. A separate
 * process, "backup" (forked before "ready", so a tracer attached to the
 * service's pid does not follow it), takes the same lock for 15 ms at a
 * time in snapshot_db, 5 ms apart. The lock is the kernel's, not a futex.
 * cause_ns: time inside flock(). */
#include "service.h"

#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>

static char lock_path[512];
static _Thread_local int lock_fd = -1;

static int open_lock_file(void)
{
	int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		service_die(lock_path);
	return fd;
}

__attribute__((noinline)) void snapshot_db(void)
{
	SERVICE_SPIN_CPU_NS(15000000);
}

/* Backup: holds the lock now and then from its go byte until the pipe
 * closes (or the service dies). */
static void backup_main(int go_fd)
{
	struct pollfd closed = {.fd = go_fd, .events = POLLIN};
	int fd = open_lock_file();
	char go;

	prctl(PR_SET_NAME, "backup", 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (read(go_fd, &go, 1) != 1)
		_exit(0);
	while (poll(&closed, 1, 5) == 0) {
		if (flock(fd, LOCK_EX) != 0)
			service_die("backup flock");
		snapshot_db();
		flock(fd, LOCK_UN);
	}
	_exit(0);
}


__attribute__((noinline)) uint64_t take_lock_file(void)
{
	uint64_t start = service_now_ns();

	if (flock(lock_fd, LOCK_EX) != 0)
		service_die("flock");
	return service_now_ns() - start;
}

__attribute__((noinline)) void append_record(uint64_t id)
{
	SERVICE_SPIN_CPU_NS((1 + id % 2) * 300000ull);
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t waited = take_lock_file();

	append_record(id);
	flock(lock_fd, LOCK_UN);
	loupe_span_end(span);
	service_request_exit(waited);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	lock_fd = open_lock_file();
	return service_serve(arg, handle_request, 3000000);
}

int main(int argc, char **argv)
{
	pthread_t thread;
	int backup_go;
	pid_t backup;

	service_parse_args(argc, argv);
	snprintf(lock_path, sizeof lock_path, "%s.lock", service_state.truth_path);
	backup = service_fork_helper(backup_main, &backup_go);
	service_wait_go();
	if (write(backup_go, "g", 1) != 1)
		service_die("start backup");
	service_start_threads(&thread, 1, worker);
	service_join_threads(&thread, 1);
	close(backup_go);
	waitpid(backup, NULL, 0);
	unlink(lock_path);
	service_finish();
	return 0;
}
