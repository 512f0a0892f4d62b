/* Slow requests wait for the disk through page faults: records live in a
 * 48 MiB file mapped with MADV_RANDOM (no readahead, so every page is a
 * fault of its own). Before one request in five the worker drops the file
 * from its page tables and from the page cache, so that request's
 * touch_records takes a major fault, read from disk, on each of the 256
 * pages it reads; the other requests find the pages resident.
 * cause_ns: 0; the 7th column is the request's major faults. */
#include "service.h"

#include <sys/mman.h>
#include <sys/stat.h>

#define FILE_BYTES (48u << 20)
#define STRIDE (FILE_BYTES / 256)

static int data_fd = -1;
static const volatile unsigned char *records;

__attribute__((noinline)) uint64_t touch_records(uint64_t id)
{
	uint64_t sum = id;

	for (size_t offset = id % 64 * 64; offset < FILE_BYTES; offset += STRIDE)
		sum += records[offset];
	return sum;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t sum = touch_records(id);

	__asm__ volatile("" : : "r"(sum));
	loupe_span_end(span);
	service_request_exit(0);
	loupe_operation_end(op);
}

/* Mapped pages stay in the page cache whatever fadvise says: unmap them
 * from this process first. */
static void evict_records(void)
{
	if (madvise((void *)records, FILE_BYTES, MADV_DONTNEED) != 0)
		service_die("madvise MADV_DONTNEED");
	if (posix_fadvise(data_fd, 0, FILE_BYTES, POSIX_FADV_DONTNEED) != 0)
		service_die("posix_fadvise");
}

static void *worker(void *arg)
{
	(void)arg;
	service_name_thread("worker-0");
	while (service_running()) {
		uint64_t id = service_next_id();

		if (id % 5 == 0)
			evict_records();
		handle_request(id);
		service_sleep_ns(10000000);
	}
	return NULL;
}

static void create_records(void)
{
	char path[64];
	static unsigned char block[1 << 20];

	snprintf(path, sizeof path, "/var/tmp/loupe-pagefault-%d.dat", getpid());
	data_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (data_fd < 0)
		service_die(path);
	/* Unlinked at once: the file goes when the service does, however it ends. */
	unlink(path);
	for (size_t i = 0; i < sizeof block; ++i)
		block[i] = (unsigned char)(i * 31);
	for (size_t done = 0; done < FILE_BYTES; done += sizeof block)
		if (write(data_fd, block, sizeof block) != (ssize_t)sizeof block)
			service_die("write records");
	if (fsync(data_fd) != 0)
		service_die("fsync records");
	records = mmap(NULL, FILE_BYTES, PROT_READ, MAP_SHARED, data_fd, 0);
	if (records == MAP_FAILED)
		service_die("mmap records");
	if (madvise((void *)records, FILE_BYTES, MADV_RANDOM) != 0)
		service_die("madvise MADV_RANDOM");
}

int main(int argc, char **argv)
{
	pthread_t thread;

	service_parse_args(argc, argv);
	service_state.with_major_faults = 1;
	create_records();
	service_wait_go();
	service_start_threads(&thread, 1, worker);
	service_join_threads(&thread, 1);
	service_finish();
	return 0;
}
