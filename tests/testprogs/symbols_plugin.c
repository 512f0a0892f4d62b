/* Loaded by symbols_app with dlopen after tracing starts. */
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static unsigned long plugin_spin(unsigned long x)
{
	volatile unsigned long state = x;

	for (int i = 0; i < 1000; ++i)
		state = state * 2862933555777941757UL + 3037000493UL;
	return state;
}

unsigned long plugin_work(double seconds)
{
	unsigned long x = 1;

	for (double end = now() + seconds; now() < end;)
		x += plugin_spin(x);
	return x;
}
