/* Slow requests wait for the disk: each request appends a 4 KiB record to
 * a journal next to the ground-truth file (into the page cache, fast), and
 * one request in eight makes the journal durable with fdatasync after
 * appending 1 MiB more — a checkpoint. Those requests wait in the kernel
 * for the writeback and the device.
 * cause_ns: time inside fdatasync. */
#include "service.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#define RECORD_BYTES 4096
#define CHECKPOINT_BYTES (1u << 20)

static int journal_fd = -1;
static char record[CHECKPOINT_BYTES];

static void append(size_t bytes)
{
	for (size_t done = 0; done < bytes;) {
		ssize_t n = write(journal_fd, record + done, bytes - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			service_die("write journal");
		done += (size_t)n;
	}
}

__attribute__((noinline)) uint64_t checkpoint_journal(void)
{
	append(CHECKPOINT_BYTES);
	uint64_t start = service_now_ns();
	if (fdatasync(journal_fd) != 0)
		service_die("fdatasync journal");
	return service_now_ns() - start;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t synced_ns = 0;

	record[id % RECORD_BYTES] = (char)id;
	append(RECORD_BYTES);
	if (id % 8 == 0)
		synced_ns = checkpoint_journal();
	SERVICE_SPIN_CPU_NS(200000);
	loupe_span_end(span);
	service_request_exit(synced_ns);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	(void)arg;
	service_name_thread("worker-0");
	while (service_running()) {
		handle_request(service_next_id());
		service_sleep_ns(2000000);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t working;
	char path[4096];

	service_parse_args(argc, argv);
	/* Beside the ground truth, unless that is a tmpfs, where fdatasync
	 * returns at once: then in /var/tmp, on a disk. */
	if (snprintf(path, sizeof path, "%s.journal", service_state.truth_path) >= (int)sizeof path)
		service_die("journal path too long");
	journal_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (journal_fd < 0)
		service_die(path);
	struct statfs fs;
	if (fstatfs(journal_fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
		close(journal_fd);
		unlink(path);
		snprintf(path, sizeof path, "/var/tmp/fsync_service.%d.journal", (int)getpid());
		journal_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (journal_fd < 0)
			service_die(path);
	}
	memset(record, 'j', sizeof record);
	service_wait_go();
	service_start_threads(&working, 1, worker);
	service_join_threads(&working, 1);
	unlink(path);
	service_finish();
	return 0;
}
