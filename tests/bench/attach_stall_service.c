/* A request service for measuring what attaching and detaching a tracer costs
 * the traced threads (tests/bench/attach_stall.sh).
 *
 * argv: <output-file> <threads>. Each worker serves back-to-back requests of
 * ~20 µs of CPU: an operation and a span through the shim, and a call to each
 * of STALL_SITES distinct functions (stall_site_000 ...), so a session can
 * put anything from the shim's few emitters to 200 uprobes on the hot path.
 * Workers never block on their own, so time a worker spends blocked
 * (tests/bench/blocked_threads.bt) is time the tracer cost it. Prints
 * "ready <pid>", serves until stdin closes, then writes when a worker first
 * saw the probes enabled and one line per request (CLOCK_MONOTONIC ns):
 *   first_traced <ns, 0 if never>
 *   tid begin_ns wall_ns */
#define _GNU_SOURCE
#include <loupe/loupe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STALL_SITES 200
#define STALL_MAX_REQUESTS_PER_THREAD (2u << 20)

struct request_record {
	uint64_t begin_ns, wall_ns;
};

struct worker {
	pthread_t thread;
	pid_t tid;
	struct request_record *records;
	uint32_t count;
};

static atomic_int stopping;
static atomic_uint_fast64_t first_traced_ns;
static volatile uint64_t sink;

/* 200 distinct functions, each a uprobe site of its own. */
#define STALL_SITE(n)                                                         \
	__attribute__((noinline)) void stall_site_##n(uint64_t x)             \
	{                                                                     \
		for (int i = 0; i < 8; ++i) x = x * 6364136223846793005ull + 0x##n; \
		sink = x;                                                     \
	}
#define STALL_SITES_10(t) \
	STALL_SITE(t##0) STALL_SITE(t##1) STALL_SITE(t##2) STALL_SITE(t##3) STALL_SITE(t##4) \
	STALL_SITE(t##5) STALL_SITE(t##6) STALL_SITE(t##7) STALL_SITE(t##8) STALL_SITE(t##9)
#define STALL_SITES_100(h)                                                                   \
	STALL_SITES_10(h##0) STALL_SITES_10(h##1) STALL_SITES_10(h##2) STALL_SITES_10(h##3) \
	STALL_SITES_10(h##4) STALL_SITES_10(h##5) STALL_SITES_10(h##6) STALL_SITES_10(h##7) \
	STALL_SITES_10(h##8) STALL_SITES_10(h##9)
STALL_SITES_100(0)
STALL_SITES_100(1)

#define STALL_REF(n) stall_site_##n,
#define STALL_REFS_10(t) \
	STALL_REF(t##0) STALL_REF(t##1) STALL_REF(t##2) STALL_REF(t##3) STALL_REF(t##4) \
	STALL_REF(t##5) STALL_REF(t##6) STALL_REF(t##7) STALL_REF(t##8) STALL_REF(t##9)
#define STALL_REFS_100(h)                                                                \
	STALL_REFS_10(h##0) STALL_REFS_10(h##1) STALL_REFS_10(h##2) STALL_REFS_10(h##3) \
	STALL_REFS_10(h##4) STALL_REFS_10(h##5) STALL_REFS_10(h##6) STALL_REFS_10(h##7) \
	STALL_REFS_10(h##8) STALL_REFS_10(h##9)
static void (*const stall_sites[STALL_SITES])(uint64_t) = {STALL_REFS_100(0) STALL_REFS_100(1)};

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *serve(void *arg)
{
	struct worker *self = arg;
	uint64_t id = 0;

	self->tid = (pid_t)syscall(SYS_gettid);
	while (!atomic_load_explicit(&stopping, memory_order_relaxed) &&
	       self->count < STALL_MAX_REQUESTS_PER_THREAD) {
		uint64_t begin = clock_ns(CLOCK_MONOTONIC);
		uint_fast64_t untraced = 0;

		if (loupe_tracing())
			atomic_compare_exchange_strong(&first_traced_ns, &untraced, begin);
		loupe_operation_t operation = loupe_operation_begin(++id, "request");
		loupe_span_t span = loupe_span_begin("work");

		for (int site = 0; site < STALL_SITES; ++site) stall_sites[site](id + (uint64_t)site);
		uint64_t x = id;
		for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
		sink = x;
		loupe_span_end(span);
		loupe_operation_end(operation);

		self->records[self->count++] =
		    (struct request_record){begin, clock_ns(CLOCK_MONOTONIC) - begin};
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s <output-file> <threads>\n", argv[0]);
		return 2;
	}
	int threads = atoi(argv[2]);
	if (threads < 1 || threads > 64) {
		fprintf(stderr, "threads must be 1..64, got %s\n", argv[2]);
		return 2;
	}
	struct worker *workers = calloc((size_t)threads, sizeof *workers);

	for (int i = 0; i < threads; ++i) {
		size_t bytes = STALL_MAX_REQUESTS_PER_THREAD * sizeof(struct request_record);

		/* Touched now, not while serving. */
		workers[i].records = malloc(bytes);
		if (!workers[i].records) {
			perror("malloc");
			return 1;
		}
		memset(workers[i].records, 0, bytes);
		pthread_create(&workers[i].thread, NULL, serve, &workers[i]);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (getchar() != EOF) {
	}
	atomic_store(&stopping, 1);

	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	fprintf(out, "first_traced %llu\n", (unsigned long long)atomic_load(&first_traced_ns));
	for (int i = 0; i < threads; ++i) {
		pthread_join(workers[i].thread, NULL);
		for (uint32_t r = 0; r < workers[i].count; ++r) {
			const struct request_record *rec = &workers[i].records[r];
			fprintf(out, "%d %llu %llu\n", workers[i].tid, (unsigned long long)rec->begin_ns,
				(unsigned long long)rec->wall_ns);
		}
	}
	return fclose(out) == 0 ? 0 : 1;
}
