/* Known call chains for stack unwinding, built with frame pointers
 * (unwind_app_fp) and without (unwind_app_nofp), both PIE, both calling into
 * Debian's libc (no frame pointers) and libunwind_stripped.so (no frame
 * pointers, no symbols). argv[1] picks the chain:
 *   cpu      main -> sort_it -> qsort -> cmp; main -> copy_it -> memcpy;
 *            main -> alloc_it -> malloc/free; in a loop
 *   mutex    start_thread -> wait_for_lock -> pthread_mutex_lock, on a mutex
 *            main holds forever
 *   read     start_thread -> wait_for_input -> read, on a pipe nobody writes
 *   hung     the mutex chain, never woken, while main waits for that thread
 *            (main -> join_blocked -> pthread_join): both asleep through
 *            any trace
 *   released the mutex chain, as hung, until a line on stdin, which main
 *            waits for (main -> run_released -> wait_for_word -> fgets);
 *            main then unlocks the mutex, the thread takes it and exits,
 *            and main sleeps on: both asleep when tracing begins, woken
 *            during it
 *   signal   main -> interrupted_here, burning; SIGPROF every ms of CPU runs
 *            on_signal -> handler_work, burning ~0.5 ms
 *   recurse  recurse() 1000 frames deep, spinning at the bottom
 *   threads  main starts short-lived threads, four at a time, each
 *            start_thread -> short_lived burning ~1 ms then exiting
 *   lib      main -> call_lib -> lib_work (the library) -> app_callback
 *   dlopen   prints "ready", waits for a line on stdin (the tracer has loaded
 *            the unwind tables), waits 300 ms more, loads
 *            libunwind_plugin.so with dlopen, prints "loaded", then
 *            main -> call_plugin -> plugin_work (the plugin) -> app_callback
 *   remap    the cpu chain on main, while another thread maps a new page of
 *            code every 5 ms and sleeps called from it (start_thread ->
 *            remap_loop -> the page -> nap -> nanosleep): each page is code
 *            the tracer's tables do not know yet, and asks it to reload them
 * Prints "ready" once the chain is in its steady state, then runs until
 * killed. The functions named above are noinline and global so that each
 * is a frame of its own, named in the symbol table. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "testprog.h"
#include "unwind_lib.h"

/* noclone: a specialised copy (sort_it.constprop.0) would be named apart. */
#if defined(__clang__)
#define FRAME __attribute__((noinline))
#else
#define FRAME __attribute__((noinline, noclone))
#endif

static volatile unsigned long sink;
/* Loops on it end never, yet the compiler cannot prove it: the functions
 * around them are not noreturn, and their calls stay ordinary calls. */
static volatile int forever = 1;

static void ready(void)
{
	printf("ready\n");
	fflush(stdout);
}

/* Arithmetic only: a sample in it has the caller's function as its leaf,
 * never a libc or vDSO frame. */
static inline __attribute__((always_inline)) unsigned long spin(unsigned long n)
{
	unsigned long x = sink;

	for (unsigned long i = 0; i < n; ++i)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Iterations of spin() per millisecond of CPU on this machine. */
static unsigned long spins_per_ms(void)
{
	const unsigned long n = 1UL << 22;
	double start = thread_cpu_seconds();

	sink += spin(n);
	double ms = (thread_cpu_seconds() - start) * 1e3;
	return ms > 0 ? (unsigned long)(n / ms) : n;
}

/* ---------------------------------------------------------------- cpu */

#define SORTED 20000
static int numbers[SORTED];

FRAME int cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	/* A little work of its own, so that samples land in cmp itself. */
	sink += (unsigned long)(x ^ y) * 2654435761UL;
	return (x > y) - (x < y);
}

FRAME void sort_it(void)
{
	unsigned int seed = (unsigned int)sink;

	for (int i = 0; i < SORTED; ++i)
		numbers[i] = (int)(seed = seed * 1103515245u + 12345u);
	qsort(numbers, SORTED, sizeof numbers[0], cmp);
	sink += (unsigned long)numbers[SORTED / 2];  /* not a tail call */
}

#define COPIED (8UL << 20)
static char *copy_from, *copy_to;

FRAME void copy_it(void)
{
	memcpy(copy_to, copy_from, COPIED);
	memcpy(copy_from, copy_to, COPIED);
	sink += (unsigned long)copy_to[sink % COPIED];
}

FRAME void alloc_it(void)
{
	void *blocks[64];

	for (int round = 0; round < 300; ++round) {
		for (int i = 0; i < 64; ++i) {
			blocks[i] = malloc(16 + (size_t)((i * 97 + round * 31) % 4096));
			*(volatile char *)blocks[i] = 1;
		}
		for (int i = 0; i < 64; ++i)
			free(blocks[(i * 7) % 64]);
	}
	sink += 1;
}

static void run_cpu(void)
{
	copy_from = malloc(COPIED);
	copy_to = malloc(COPIED);
	if (!copy_from || !copy_to)
		exit(1);
	memset(copy_from, 1, COPIED);
	memset(copy_to, 2, COPIED);
	ready();
	for (;;) {
		sort_it();
		copy_it();
		alloc_it();
	}
}

/* ------------------------------------------------------ mutex and read */

/* An off-CPU interval is written when it ends: main wakes the blocked
 * thread with this (a no-op, SA_RESTART) often, and it blocks again where
 * it was. */
static void on_poke(int signal)
{
	(void)signal;
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static int never_written[2];
static volatile pid_t blocked_tid;

FRAME void *wait_for_lock(void *unused)
{
	(void)unused;
	blocked_tid = testprog_gettid();
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
	return NULL;
}

FRAME void *wait_for_input(void *unused)
{
	char byte;

	(void)unused;
	blocked_tid = testprog_gettid();
	sink += (unsigned long)read(never_written[0], &byte, 1);
	return NULL;
}

/* True once thread `tid` of this process sleeps. */
static int sleeping(pid_t tid)
{
	char path[64], stat[512];
	FILE *file;
	size_t n;

	snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
	file = fopen(path, "r");
	if (!file)
		return 0;
	n = fread(stat, 1, sizeof stat - 1, file);
	fclose(file);
	stat[n] = '\0';
	/* "tid (comm) S ...": the comm may hold spaces and parentheses. */
	char *state = strrchr(stat, ')');
	return state && state[1] == ' ' && state[2] == 'S';
}

/* Holds the mutex, starts a thread running `blocked`, returns once it sleeps. */
static pthread_t start_blocked(void *(*blocked)(void *))
{
	struct timespec interval = {0, 10 * 1000 * 1000};
	pthread_t thread;

	pthread_mutex_lock(&held);
	if (pipe(never_written) != 0 || pthread_create(&thread, NULL, blocked, NULL) != 0)
		exit(1);
	while (blocked_tid == 0 || !sleeping(blocked_tid))
		nanosleep(&interval, NULL);
	return thread;
}

static void run_blocked(void *(*blocked)(void *))
{
	struct sigaction poke = {.sa_handler = on_poke, .sa_flags = SA_RESTART};
	struct timespec interval = {0, 10 * 1000 * 1000};
	pthread_t thread;

	sigaction(SIGUSR1, &poke, NULL);
	thread = start_blocked(blocked);
	ready();
	for (;;) {
		nanosleep(&interval, NULL);
		pthread_kill(thread, SIGUSR1);
	}
}

FRAME void join_blocked(pthread_t thread)
{
	pthread_join(thread, NULL);
	sink += 1; /* not a tail call: this frame stays */
}

static void run_hung(void)
{
	pthread_t thread = start_blocked(wait_for_lock);

	ready();
	join_blocked(thread);
}

FRAME void wait_for_word(void)
{
	testprog_wait_line();
	sink += 1; /* not a tail call: this frame stays */
}

FRAME void run_released(void)
{
	pthread_t thread = start_blocked(wait_for_lock);

	ready();
	wait_for_word();
	pthread_mutex_unlock(&held);
	pthread_join(thread, NULL);
	while (forever)
		pause();
}

/* ------------------------------------------------------------- signal */

static unsigned long handler_spins;
static volatile unsigned long signals;

FRAME void handler_work(void)
{
	sink += spin(handler_spins);
}

FRAME void on_signal(int signal)
{
	(void)signal;
	handler_work();
	signals += 1;  /* not a tail call */
}

FRAME void interrupted_here(void)
{
	while (forever)
		sink += spin(1000);
}

static void run_signal(void)
{
	struct sigaction action = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
	struct itimerval every_ms = {{0, 1000}, {0, 1000}};

	handler_spins = spins_per_ms() / 2;
	sigaction(SIGPROF, &action, NULL);
	if (setitimer(ITIMER_PROF, &every_ms, NULL) != 0)
		exit(1);
	ready();
	interrupted_here();
}

/* ------------------------------------------------------------ recurse */

static volatile int depth_sink;

FRAME int recurse(int n)
{
	if (n == 0) {
		ready();
		while (forever)
			sink += spin(1000);
		return 0;
	}
	int below = recurse(n - 1);

	/* A volatile store after the call: neither a tail call nor an
	 * accumulator the compiler could turn into a loop. */
	depth_sink = below;
	return depth_sink + n;
}

/* A recursion entered again and again (so after any attach): traced with
 * %return, each level's return address is the kernel's trampoline. */
FRAME int nest(int n)
{
	if (n == 0) {
		/* Long next to the 26 probe hits of a round (a few µs each),
		 * which are no frames of the program's. */
		sink += spin(5000000);
		return 0;
	}
	int below = nest(n - 1);

	depth_sink = below;  /* not a tail call */
	return depth_sink + n;
}

static void run_nested(void)
{
	ready();
	for (;;)
		sink += (unsigned long)nest(12);
}

/* ------------------------------------------------------------ threads */

static unsigned long short_lived_spins;

FRAME void *short_lived(void *unused)
{
	(void)unused;
	sink += spin(short_lived_spins);
	return NULL;
}

static void run_threads(void)
{
	pthread_t threads[4];

	short_lived_spins = spins_per_ms();
	ready();
	for (;;) {
		for (int i = 0; i < 4; ++i)
			if (pthread_create(&threads[i], NULL, short_lived, NULL) != 0)
				exit(1);
		for (int i = 0; i < 4; ++i)
			pthread_join(threads[i], NULL);
	}
}

/* ---------------------------------------------------------------- lib */

static unsigned long callback_spins;

FRAME unsigned long app_callback(unsigned long i)
{
	return spin(callback_spins) + i;
}

FRAME void call_lib(void)
{
	sink += lib_work(app_callback, 100);
	sink += 1;  /* not a tail call */
}

static void run_lib(void)
{
	callback_spins = spins_per_ms() / 10;
	ready();
	for (;;)
		call_lib();
}

/* ------------------------------------------------------------- dlopen */

typedef unsigned long (*plugin_work_fn)(lib_callback, unsigned long);

FRAME void call_plugin(plugin_work_fn work)
{
	sink += work(app_callback, 100);
	sink += 1;  /* not a tail call */
}

static void run_dlopen(void)
{
	struct timespec settle = {0, 300 * 1000 * 1000};

	callback_spins = spins_per_ms() / 10;
	ready();
	testprog_wait_line();
	/* Past the tracer's reload interval (100 ms) since it loaded the
	 * tables: its first request for the plugin's is served at once. */
	nanosleep(&settle, NULL);
	void *plugin = dlopen("libunwind_plugin.so", RTLD_NOW);
	plugin_work_fn work = plugin ? (plugin_work_fn)dlsym(plugin, "plugin_work") : NULL;

	if (!work) {
		printf("error %s\n", dlerror());
		exit(1);
	}
	printf("loaded\n");
	fflush(stdout);
	for (;;)
		call_plugin(work);
}

/* ------------------------------------------------------------- remap */

FRAME void nap(void)
{
	struct timespec pause = {0, 5 * 1000 * 1000};

	nanosleep(&pause, NULL);
}

/* sub $8,%rsp; call *%rdi; add $8,%rsp; ret: calls its argument. */
static const unsigned char trampoline[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7,
					   0x48, 0x83, 0xc4, 0x08, 0xc3};

FRAME void *remap_loop(void *unused)
{
	(void)unused;
	for (int pages = 0; forever; ++pages) {
		/* A fresh page each time (up to 4 MiB of them, then the same). */
		static void (*code)(void (*)(void));
		if (pages < 1024 || !code) {
			void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (page == MAP_FAILED)
				exit(1);
			memcpy(page, trampoline, sizeof trampoline);
			code = (void (*)(void (*)(void)))page;
		}
		code(nap);
	}
	return NULL;
}

static void run_remap(void)
{
	pthread_t remapper;

	if (pthread_create(&remapper, NULL, remap_loop, NULL) != 0)
		exit(1);
	run_cpu();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (strcmp(mode, "cpu") == 0)
		run_cpu();
	else if (strcmp(mode, "mutex") == 0)
		run_blocked(wait_for_lock);
	else if (strcmp(mode, "read") == 0)
		run_blocked(wait_for_input);
	else if (strcmp(mode, "hung") == 0)
		run_hung();
	else if (strcmp(mode, "released") == 0)
		run_released();
	else if (strcmp(mode, "signal") == 0)
		run_signal();
	else if (strcmp(mode, "recurse") == 0)
		sink += (unsigned long)recurse(1000);
	else if (strcmp(mode, "nested") == 0)
		run_nested();
	else if (strcmp(mode, "threads") == 0)
		run_threads();
	else if (strcmp(mode, "lib") == 0)
		run_lib();
	else if (strcmp(mode, "dlopen") == 0)
		run_dlopen();
	else if (strcmp(mode, "remap") == 0)
		run_remap();
	fprintf(stderr, "usage: %s cpu|mutex|read|hung|released|signal|recurse|nested|threads|lib|dlopen|remap\n",
		argv[0]);
	return 2;
}
