/* Functions to probe: after the go line, calls the global work_global()
 * and the static work_static() <calls> times each, each of the 20 distinct
 * functions many_00() ... many_19() as often (more sites than one link
 * takes), then sleep_2ms() <calls> times, timing each call itself. Prints
 * "ready <pid>", then "done <median ns of sleep_2ms>", waits for stdin to
 * close. */
#include <time.h>
#include "testprog.h"

static volatile long sink;

/* A function that leaves only by a tail call, as Ruby's rb_mutex_lock
 * does (mov, then jmp): its first instruction is not one the kernel
 * emulates. Never called. */
__asm__(".globl tail_only\n"
	".type tail_only, @function\n"
	"tail_only:\n"
	"	mov $1, %esi\n"
	"	jmp work_global\n"
	".size tail_only, .-tail_only\n");

/* A function that starts as most functions built without frame pointers
 * do, saving a callee-saved register: the kernel emulates that push as it
 * does push %rbp. Never called. */
__asm__(".globl saves_r15\n"
	".type saves_r15, @function\n"
	"saves_r15:\n"
	"	push %r15\n"
	"	pop %r15\n"
	"	ret\n"
	".size saves_r15, .-saves_r15\n");

__attribute__((noinline)) long work_global(long x)
{
	sink += x;
	return sink;
}

__attribute__((noinline)) static long work_static(long x)
{
	sink -= x;
	return sink;
}

#define MANY(n)                                                \
	__attribute__((noinline)) static long many_##n(long x) \
	{                                                      \
		sink ^= x + 1##n;                              \
		return sink;                                   \
	}
MANY(00) MANY(01) MANY(02) MANY(03) MANY(04) MANY(05) MANY(06) MANY(07) MANY(08) MANY(09)
MANY(10) MANY(11) MANY(12) MANY(13) MANY(14) MANY(15) MANY(16) MANY(17) MANY(18) MANY(19)

static long (*const many[])(long) = {
	many_00, many_01, many_02, many_03, many_04, many_05, many_06, many_07, many_08, many_09,
	many_10, many_11, many_12, many_13, many_14, many_15, many_16, many_17, many_18, many_19,
};

__attribute__((noinline)) int sleep_2ms(void)
{
	struct timespec ts = {0, 2000000};

	nanosleep(&ts, NULL);
	return 7;
}

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int compare(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int calls = argc > 1 ? atoi(argv[1]) : 50;
	unsigned long long *took = calloc((size_t)calls, sizeof *took);

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (long i = 0; i < calls; ++i) {
		work_global(i);
		work_static(i);
		for (size_t f = 0; f < sizeof many / sizeof *many; ++f) many[f](i);
	}
	for (int i = 0; i < calls; ++i) {
		unsigned long long start = now_ns();

		sleep_2ms();
		took[i] = now_ns() - start;
	}
	qsort(took, (size_t)calls, sizeof *took, compare);
	printf("done %llu\n", took[calls / 2]);
	fflush(stdout);
	free(took);
	testprog_wait_eof();
	return 0;
}
