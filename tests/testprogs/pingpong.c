/* Two threads bounce a byte over two pipes `rounds` times.
 * Prints "ready <tid_a> <tid_b>", waits for a line, plays, prints "done",
 * waits for stdin to close. The players stay alive (blocked) until then, so
 * their context-switch counters can be read after the game. */
#include <pthread.h>
#include "testprog.h"

static int a_to_b[2], b_to_a[2], go[2], finished[2], quit[2];
static long rounds;
static pid_t tids[2];

static void *player(void *arg)
{
	long id = (long)arg;
	char c = 'x';

	tids[id] = testprog_gettid();
	if (read(go[0], &c, 1) != 1)
		return NULL;
	for (long i = 0; i < rounds; ++i) {
		if (id == 0) {
			if (write(a_to_b[1], &c, 1) != 1 || read(b_to_a[0], &c, 1) != 1)
				return NULL;
		} else {
			if (read(a_to_b[0], &c, 1) != 1 || write(b_to_a[1], &c, 1) != 1)
				return NULL;
		}
	}
	if (write(finished[1], &c, 1) != 1 || read(quit[0], &c, 1) != 1)
		return NULL;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t threads[2];

	rounds = argc > 1 ? atol(argv[1]) : 1000;
	char c;

	if (pipe(a_to_b) || pipe(b_to_a) || pipe(go) || pipe(finished) || pipe(quit))
		return 1;
	for (long i = 0; i < 2; ++i)
		pthread_create(&threads[i], NULL, player, (void *)i);
	while (!tids[0] || !tids[1])
		usleep(1000);
	printf("ready %d %d\n", tids[0], tids[1]);
	fflush(stdout);
	testprog_wait_line();
	if (write(go[1], "gg", 2) != 2)
		return 1;
	for (int i = 0; i < 2; ++i)
		if (read(finished[0], &c, 1) != 1)
			return 1;
	printf("done\n");
	fflush(stdout);
	testprog_wait_eof();
	if (write(quit[1], "qq", 2) != 2)
		return 1;
	for (int i = 0; i < 2; ++i)
		pthread_join(threads[i], NULL);
	return 0;
}
