/* Slow requests are throttled by a CPU quota, as a container with a CPU
 * limit is: the service puts itself in a cgroup of its own allowed 20 ms of
 * CPU per 100 ms period, and its one worker, "worker-0", wants about 4 ms of
 * CPU per request with 2 ms pauses between. Once the quota is spent the
 * worker is runnable but not run until the next period, while its CPU may
 * well be idle: no other thread is to blame. cause_ns: how long the cgroup
 * was throttled while the request ran, from the cgroup's own cpu.stat.
 *
 * cgroup v2 (cpu.max) where the unified hierarchy has the cpu controller,
 * else v1 (cpu.cfs_quota_us); the cgroup is removed at exit. */
#include "service.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#define QUOTA_US 20000
#define PERIOD_US 100000

struct cpu_cgroup {
	char dir[256];
	char parent_procs[256];
	int v2;
	int stat_fd;
};

static struct cpu_cgroup cgroup_state;

static int file_has_word(const char *path, const char *word)
{
	char text[512];
	FILE *in = fopen(path, "r");
	size_t n;

	if (!in)
		return 0;
	n = fread(text, 1, sizeof text - 1, in);
	fclose(in);
	text[n] = '\0';
	for (char *at = strstr(text, word); at; at = strstr(at + 1, word)) {
		size_t len = strlen(word);
		if ((at == text || at[-1] == ' ') && (at[len] == ' ' || at[len] == '\n' || at[len] == '\0'))
			return 1;
	}
	return 0;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[320];
	FILE *out;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	out = fopen(path, "w");
	if (!out || fputs(text, out) < 0 || fclose(out) != 0)
		service_die(path);
}

/* A run killed before it could leave (a failed test kills its service) left
 * an empty cgroup behind, quota and all: removed by the next run. */
static void sweep_stale_cgroups(const char *root)
{
	DIR *dir = opendir(root);
	struct dirent *entry;
	char path[512];
	int pid;

	if (!dir)
		return;
	while ((entry = readdir(dir)) != NULL) {
		if (sscanf(entry->d_name, "loupe-throttle-%d", &pid) != 1 || kill(pid, 0) == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", root, entry->d_name);
		rmdir(path);
	}
	closedir(dir);
}

static void enter_throttled_cgroup(void)
{
	struct cpu_cgroup *cg = &cgroup_state;
	char text[64], path[512];
	const char *root;

	cg->v2 = file_has_word("/sys/fs/cgroup/cgroup.controllers", "cpu");
	root = cg->v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu";
	snprintf(cg->dir, sizeof cg->dir, "%s/loupe-throttle-%d", root, getpid());
	snprintf(cg->parent_procs, sizeof cg->parent_procs, "%s/cgroup.procs", root);
	sweep_stale_cgroups(root);
	if (cg->v2 && !file_has_word("/sys/fs/cgroup/cgroup.subtree_control", "cpu"))
		write_file(root, "cgroup.subtree_control", "+cpu");
	if (mkdir(cg->dir, 0755) != 0)
		service_die(cg->dir);
	if (cg->v2) {
		snprintf(text, sizeof text, "%d %d", QUOTA_US, PERIOD_US);
		write_file(cg->dir, "cpu.max", text);
	} else {
		snprintf(text, sizeof text, "%d", PERIOD_US);
		write_file(cg->dir, "cpu.cfs_period_us", text);
		snprintf(text, sizeof text, "%d", QUOTA_US);
		write_file(cg->dir, "cpu.cfs_quota_us", text);
	}
	snprintf(text, sizeof text, "%d", getpid());
	write_file(cg->dir, "cgroup.procs", text);
	if (snprintf(path, sizeof path, "%s/cpu.stat", cg->dir) >= (int)sizeof path)
		service_die("cgroup path too long");
	cg->stat_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (cg->stat_fd < 0)
		service_die(path);
}

static void leave_throttled_cgroup(void)
{
	struct cpu_cgroup *cg = &cgroup_state;
	FILE *out = fopen(cg->parent_procs, "w");

	close(cg->stat_fd);
	if (!out || fprintf(out, "%d", getpid()) < 0 || fclose(out) != 0)
		service_die(cg->parent_procs);
	/* A thread that has just exited can keep the cgroup busy a moment. */
	for (int tries = 0; rmdir(cg->dir) != 0; ++tries) {
		if (errno != EBUSY || tries == 100)
			service_die(cg->dir);
		service_sleep_ns(10000000);
	}
}

/* The cgroup's total throttled time so far, in ns. */
static uint64_t throttled_ns(void)
{
	const char *key = cgroup_state.v2 ? "throttled_usec " : "throttled_time ";
	char text[1024];
	ssize_t n = pread(cgroup_state.stat_fd, text, sizeof text - 1, 0);
	char *at;

	if (n <= 0)
		service_die("read cpu.stat");
	text[n] = '\0';
	at = strstr(text, key);
	if (!at)
		service_die("no throttled time in cpu.stat");
	return strtoull(at + strlen(key), NULL, 10) * (cgroup_state.v2 ? 1000 : 1);
}

__attribute__((noinline)) void render_page(uint64_t id)
{
	SERVICE_SPIN_CPU_NS((3 + id % 3) * 1000000ull);
}

__attribute__((noinline)) void handle_request(uint64_t id)
{
	loupe_operation_t op = loupe_operation_begin(id, "request");
	service_request_enter(id);
	uint64_t throttled_before = throttled_ns();
	loupe_span_t span = loupe_span_begin("handle");

	render_page(id);
	loupe_span_end(span);
	service_request_exit(throttled_ns() - throttled_before);
	loupe_operation_end(op);
}

static void *worker(void *arg)
{
	return service_serve(arg, handle_request, 2000000);
}

int main(int argc, char **argv)
{
	pthread_t thread;

	service_parse_args(argc, argv);
	enter_throttled_cgroup();
	service_wait_go();
	service_start_threads(&thread, 1, worker);
	service_join_threads(&thread, 1);
	service_finish();
	leave_throttled_cgroup();
	return 0;
}
