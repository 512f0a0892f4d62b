/* Optimised: narrow registers (a char gives an 8-bit one), a struct field
 * through a pointer (memory at a positive offset), a global variable
 * (RIP-relative), a member of a static struct (RIP-relative with the offset
 * before the symbol: "-4@16+forms_stats(%rip)"), and one probe at two sites. */
#define _SDT_HAS_SEMAPHORES 1
#include <stdint.h>
#include <stdio.h>
#include <sys/sdt.h>
#include "usdt_forms.h"

#define FORMS_SEMAPHORE(name) \
	__extension__ unsigned short forms_##name##_semaphore __attribute__((unused, section(".probes")))
FORMS_SEMAPHORE(regs);
FORMS_SEMAPHORE(field);
FORMS_SEMAPHORE(global);
FORMS_SEMAPHORE(twice);
FORMS_SEMAPHORE(member);

int forms_global = 0;

static struct {
	long first;
	long second;
	int third;
} forms_stats;

struct pair {
	long first;
	int second;
};

__attribute__((noinline)) static void fire_regs(char c, short s, int i, long l)
{
	DTRACE_PROBE4(forms, regs, c, s, i, l);
	printf("expect forms:regs %d %d %d %ld\n", c, s, i, l);
}

__attribute__((noinline)) static void fire_field(const struct pair *p)
{
	DTRACE_PROBE2(forms, field, p->second, p->first);
	printf("expect forms:field %d %ld\n", p->second, p->first);
}

__attribute__((noinline)) static void fire_global(void)
{
	DTRACE_PROBE1(forms, global, forms_global);
	printf("expect forms:global %d\n", forms_global);
}

__attribute__((noinline)) static void fire_member(void)
{
	DTRACE_PROBE1(forms, member, forms_stats.third);
	printf("expect forms:member %d\n", forms_stats.third);
}

__attribute__((noinline)) static void twice(int value, int site)
{
	if (site == 0) {
		DTRACE_PROBE1(forms, twice, value);
	} else {
		DTRACE_PROBE1(forms, twice, value + 1);
	}
	printf("expect forms:twice %d\n", site == 0 ? value : value + 1);
}

void usdt_forms_run(int seed, int rounds)
{
	for (int r = 0; r < rounds; ++r) {
		const int v = seed + r;
		struct pair p = {.first = -1000L * v, .second = 7 * v};

		fire_regs((char)(-v), (short)(-300 * v), -70000 * v, 5000000000L * v);
		fire_field(&p);
		forms_global = 11 * v;
		fire_global();
		forms_stats.third = -13 * v;
		fire_member();
		twice(v, r % 2);
		usdt_forms_stack(v);
	}
	fflush(stdout);
}
