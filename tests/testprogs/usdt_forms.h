/* Classic sys/sdt.h probes (provider "forms") whose arguments take every
 * operand form x86-64 compilers emit. usdt_forms_run() fires each probe once
 * per round and prints "expect <probe> <value>..." for what it passed. */
#ifndef LOUPE_TESTS_TESTPROGS_USDT_FORMS_H_
#define LOUPE_TESTS_TESTPROGS_USDT_FORMS_H_

void usdt_forms_run(int seed, int rounds);

/* In the -O0 unit: memory at a negative offset from %rbp, constants. */
void usdt_forms_stack(int seed);

#endif
