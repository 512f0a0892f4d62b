/* A sys/sdt.h probe with a string argument, as PostgreSQL's
 * query__start(const char *) is: after the go line it fires strs:text once
 * for each length given on the command line, with a string of that many
 * letters, then prints "done". */
#include <string.h>
#include <sys/sdt.h>
#include "testprog.h"

int main(int argc, char **argv)
{
	static char text[8192];

	printf("ready %d\n", getpid());
	fflush(stdout);
	testprog_wait_line();
	for (int i = 1; i < argc; ++i) {
		size_t length = (size_t)atoi(argv[i]);

		if (length >= sizeof text)
			length = sizeof text - 1;
		for (size_t at = 0; at < length; ++at)
			text[at] = (char)('a' + at % 26);
		text[length] = '\0';
		DTRACE_PROBE2(strs, text, text, length);
	}
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	return 0;
}
