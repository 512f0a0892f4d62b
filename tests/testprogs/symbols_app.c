/* A known call chain for symbolization: main -> middle -> leaf_work (a
 * static function) -> mix (inlined into it), burning CPU in mix. With the
 * argument "dlopen", after the go line it also loads libsymbols_plugin.so
 * and burns in its plugin_work(). Prints "ready <pid>", waits for a line,
 * burns for about a second, prints "done", waits for stdin to close. */
#include <dlfcn.h>
#include <string.h>
#include <time.h>
#include "testprog.h"

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline __attribute__((always_inline)) unsigned long mix(unsigned long x)
{
	for (int i = 0; i < 1000; ++i)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

/* The volatile array gives it a frame (and a frame pointer) though it is a leaf. */
__attribute__((noinline)) static unsigned long leaf_work(unsigned long seed)
{
	volatile unsigned long state[2] = {seed, 0};

	state[1] = mix(state[0]);
	return state[1];
}

__attribute__((noinline)) unsigned long middle(unsigned long seed)
{
	return leaf_work(seed) + 1;
}

static volatile unsigned long sink;

int main(int argc, char **argv)
{
	int plugin = argc > 1 && strcmp(argv[1], "dlopen") == 0;
	double seconds = argc > 2 ? atof(argv[2]) : 1.0;

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (double end = now() + seconds; now() < end;)
		sink += middle(sink);
	if (plugin) {
		void *library = dlopen("libsymbols_plugin.so", RTLD_NOW);
		unsigned long (*work)(double) =
			library ? (unsigned long (*)(double))dlsym(library, "plugin_work") : NULL;

		if (!work) {
			printf("error %s\n", dlerror());
			return 1;
		}
		sink += work(seconds);
	}
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
