/*
 * gc_testutil.h: helpers for the lease and gc unit tests: a private
 * redis-server child (port from $JO_TEST_REDIS_PORT, default 6404, next free
 * port if busy; the test skips with 77 when redis-server is missing) and a
 * scratch directory. Header-only: included by test_lease.c and test_gc.c.
 */
#ifndef GC_TESTUTIL_H
#define GC_TESTUTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

struct gct_redis {
	pid_t pid;
	int port;
	char dir[256];
};

static int gct_port_busy(int port)
{
	struct sockaddr_in a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), busy;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	busy = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return busy;
}

static void gct_rm_rf(const char *dir)
{
	char cmd[512];

	if (!dir[0] || strncmp(dir, "/tmp/", 5) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static int gct_mkdtemp(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "/tmp/jo-%s.XXXXXX", tag);
	return mkdtemp(buf) ? 0 : -1;
}

/* 0 started, 77 no redis-server (skip), -1 failure. */
/* Whether the server answering on port is process pid (INFO's process_id). */
static int gct_redis_is(int port, pid_t pid)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *rep;
	char want[40];
	int ok = 0;

	if (!c || c->err) {
		if (c)
			redisFree(c);
		return 0;
	}
	rep = redisCommand(c, "INFO server");
	snprintf(want, sizeof(want), "\nprocess_id:%d\r", (int)pid);
	if (rep && rep->type == REDIS_REPLY_STRING)
		ok = strstr(rep->str, want) != NULL;
	if (rep)
		freeReplyObject(rep);
	redisFree(c);
	return ok;
}

/*
 * A redis-server of this test on a free port from JO_TEST_REDIS_PORT (default
 * 6404) up: 0, 77 without redis-server, -1 on failure. Tests run in parallel
 * (ctest -j) may pick the same free port at once: only the server that
 * answers as our own child counts, and a child that lost the port to
 * another test's server makes us try the next one.
 */
static int gct_redis_start(struct gct_redis *r)
{
	const char *env = getenv("JO_TEST_REDIS_PORT");
	int port = env ? atoi(env) : 6404;

	memset(r, 0, sizeof(*r));
	if (system("command -v redis-server >/dev/null 2>&1") != 0)
		return 77;
	if (gct_mkdtemp(r->dir, sizeof(r->dir), "gcredis"))
		return -1;
	for (int tries = 0; tries < 40; tries++, port++) {
		if (gct_port_busy(port))
			continue;
		r->port = port;
		r->pid = fork();
		if (r->pid == 0) {
			char ps[16];
			int devnull = open("/dev/null", O_WRONLY);

			if (devnull >= 0) {
				dup2(devnull, 1);
				dup2(devnull, 2);
			}
			snprintf(ps, sizeof(ps), "%d", port);
			execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1",
			       "--save", "", "--appendonly", "no", "--dir", r->dir, (char *)NULL);
			_exit(127);
		}
		if (r->pid < 0)
			return -1;
		for (int i = 0; i < 100; i++) {
			if (gct_redis_is(port, r->pid))
				return 0;
			if (waitpid(r->pid, NULL, WNOHANG) == r->pid)
				break; /* it lost the port: the next one */
			usleep(50000);
		}
		if (r->pid > 0 && waitpid(r->pid, NULL, WNOHANG) == 0) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, NULL, 0);
		}
		r->pid = 0;
	}
	return -1;
}

static void gct_redis_stop(struct gct_redis *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGTERM);
		waitpid(r->pid, NULL, 0);
		r->pid = 0;
	}
	gct_rm_rf(r->dir);
}

/* Run a redis command on a fresh connection (test setup); aborts on error. */
static redisContext *gct_redis_conn(int port, int db)
{
	redisContext *c = redisConnect("127.0.0.1", port);
	redisReply *rep;

	if (!c || c->err) {
		fprintf(stderr, "cannot connect to test redis on %d\n", port);
		abort();
	}
	rep = redisCommand(c, "SELECT %d", db);
	freeReplyObject(rep);
	return c;
}

/*
 * A test group's Redis: 0 when it started (*have set), else what
 * gct_redis_start returned (77: no redis-server), said on stderr for TEST.
 */
static int gct_redis_try(const char *test, struct gct_redis *r, bool *have)
{
	int rc = gct_redis_start(r);

	*have = rc == 0;
	if (rc != 0)
		fprintf(stderr, "%s: no redis-server (%d)\n", test, rc);
	return rc;
}

/* The end of a test group: its Redis, if it started, and its scratch directory
 * (none: ""). */
static void gct_group_end(struct gct_redis *r, bool have, const char *dir)
{
	if (have)
		gct_redis_stop(r);
	gct_rm_rf(dir);
}

/*
 * The metadata of case g_case of a test file with make_redis(f, db) and
 * make_sqlite(f, path): Redis database g_case % 15, or g_dir/meta<g_case>.db.
 */
#define GCT_CASE_META(redis, f)                                                         \
	do {                                                                            \
		if (redis) {                                                            \
			make_redis(f, g_case % 15);                                     \
		} else {                                                                \
			char gct_db_[400];                                              \
                                                                                        \
			snprintf(gct_db_, sizeof(gct_db_), "%s/meta%d.db", g_dir, g_case); \
			make_sqlite(f, gct_db_);                                        \
		}                                                                       \
	} while (0)

/* setup_redis and setup_sqlite from the file's setup_case(state, redis). */
#define GCT_ENGINE_SETUPS                                                               \
	static int setup_redis(void **state) { return setup_case(state, true); }       \
	static int setup_sqlite(void **state) { return setup_case(state, false); }

/*
 * group_setup and group_teardown for a test file whose globals g_dir,
 * g_redis and g_have_redis hold its group's scratch directory (tagged TAG)
 * and its Redis; without redis-server the Redis cases are skipped.
 */
#define GCT_GROUP_FIXTURE(test, tag)                                                  \
	static int group_setup(void **state)                                          \
	{                                                                             \
		(void)state;                                                          \
		assert_int_equal(gct_mkdtemp(g_dir, sizeof(g_dir), tag), 0);          \
		gct_redis_try(test, &g_redis, &g_have_redis);                         \
		return 0;                                                             \
	}                                                                             \
	static int group_teardown(void **state)                                       \
	{                                                                             \
		(void)state;                                                          \
		gct_group_end(&g_redis, g_have_redis, g_dir);                         \
		return 0;                                                             \
	}

#endif
