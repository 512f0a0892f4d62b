/* What the test programs share: they print "ready ..." once set up, wait
 * for a line on stdin before working (so a test can attach first), and
 * wait for stdin to close before exiting (so a test can stop tracing first). */
#ifndef LOUPE_TESTS_TESTPROGS_TESTPROG_H_
#define LOUPE_TESTS_TESTPROGS_TESTPROG_H_

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline pid_t testprog_gettid(void) { return (pid_t)syscall(SYS_gettid); }

static inline void testprog_wait_line(void)
{
	char line[64];

	if (!fgets(line, sizeof line, stdin))
		exit(0);
}

static inline void testprog_wait_eof(void)
{
	char line[64];

	while (fgets(line, sizeof line, stdin))
		;
}

#endif
