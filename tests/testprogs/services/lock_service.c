/* Slow requests wait for a lock: workers look entries up in a shared cache
 * under cache_lock, and a janitor thread now and then compacts the cache
 * holding that lock for 20-40 ms of CPU. Requests that arrive meanwhile
 * block in pthread_mutex_lock until the janitor lets go.
 * cause_ns: time inside pthread_mutex_lock. */
#include "service.h"

#define WORKERS 2

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t cache[4096];

__attribute__((noinline)) uint64_t lookup_shared_cache(uint64_t key)
{
	uint64_t start = service_now_ns();

	pthread_mutex_lock(&cache_lock);
	uint64_t waited = service_now_ns() - start;
	uint64_t value = cache[key % 4096]++;

	pthread_mutex_unlock(&cache_lock);
	__asm__ volatile("" : : "r"(value));
	return waited;
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	loupe_span_t span = loupe_span_begin("handle");
	uint64_t waited = lookup_shared_cache(id * 2654435761u);

	SERVICE_SPIN_CPU_NS(100000);
	loupe_span_end(span);
	service_request_exit(waited);
	loupe_operation_end(op);
}

__attribute__((noinline)) void janitor_compact_locked(uint64_t hold_ns)
{
	pthread_mutex_lock(&cache_lock);
	for (int i = 0; i < 4096; ++i)
		cache[i] /= 2;
	SERVICE_SPIN_CPU_NS(hold_ns);
	pthread_mutex_unlock(&cache_lock);
}

static void *janitor(void *arg)
{
	(void)arg;
	service_name_thread("janitor");
	for (uint64_t round = 0; service_running(); ++round) {
		service_sleep_ns(100000000);
		janitor_compact_locked((20 + round * 7 % 21) * 1000000ull);
	}
	return NULL;
}

static void *worker(void *arg)
{
	return service_serve(arg, handle_request, 15000000);
}

int main(int argc, char **argv)
{
	pthread_t workers[WORKERS], cleaner;

	service_parse_args(argc, argv);
	service_wait_go();
	service_start_threads(&cleaner, 1, janitor);
	service_start_threads(workers, WORKERS, worker);
	service_join_threads(workers, WORKERS);
	service_join_threads(&cleaner, 1);
	service_finish();
	return 0;
}
