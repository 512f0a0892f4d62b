/* A tiny "JIT": copies a function's machine code into anonymous executable
 * memory, names it in /tmp/perf-<pid>.map as "jit_spin" (as runtimes do),
 * and burns CPU in it. Prints "ready <pid>", waits for a line, burns for
 * about a second, prints "done", waits for stdin to close, removes the map. */
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "testprog.h"

/* Position-independent: a counted loop and a return. */
__asm__(".text\n"
	"jit_template:\n"
	"  mov %rdi, %rax\n"
	"1: imul $1103515245, %rax, %rax\n"
	"  dec %rdi\n"
	"  jnz 1b\n"
	"  ret\n"
	"jit_template_end:\n");
extern const char jit_template[], jit_template_end[];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	const size_t size = (size_t)(jit_template_end - jit_template);
	unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
				   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];
	FILE *map;
	volatile long sink = 0;

	if (code == MAP_FAILED)
		return 1;
	memcpy(code, jit_template, size);
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	map = fopen(path, "w");
	if (!map)
		return 1;
	fprintf(map, "%lx %zx jit_spin\n", (unsigned long)code, size);
	fclose(map);
	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (double end = now() + 1.0; now() < end;)
		sink += ((long (*)(long))code)(10000);
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	unlink(path);
	return 0;
}
