/*
 * test_redis_conn.c: the reconnection rules of the redis family's connection
 * (common/meta/redis/conn.c) on a real redis-server child, with the
 * handle's connection killed under it (CLIENT KILL, as a sentinel does to a
 * demoted master's clients):
 *   - a read is sent again on a new connection, transparently;
 *   - inside WATCH..EXEC nothing moves to a new connection: the command
 *     fails, the operation may be run again from its WATCH (retryable);
 *   - a non-repeatable write (HINCRBY) is never sent twice;
 *   - an EXEC whose reply is lost is reported with an unknown outcome (not
 *     retryable), and the next command works on a new connection;
 *   - a pipeline that cannot start because the server is gone is reported
 *     as a connection error (not "out of memory"), with nothing left
 *     pending, so a read-only caller may run it again.
 * And the one rule before a result is acted on (jo_rd_confirm), with a
 * second redis-server as the replica:
 *   - a server that never had a replica: confirmed without a WAIT;
 *   - a replica that has the write: confirmed;
 *   - the replica gone after having been there (REPLICAOF NO ONE, as a
 *     failover promotes it): not confirmed, and not the next time either;
 *   - WAIT refused (ACL): not confirmed;
 *   - the connection to a master with a replica replaced: what came before
 *     it is not confirmed, what follows on the new connection is.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>

#include "common/err.h"
#include "support/meta_open.h"
#include "common/meta/meta.h"
#include "common/meta/meta_internal.h"
#include "common/meta/redis/internal.h"
#include "gc_testutil.h"

static struct gct_redis g_redis;
static bool g_have_redis;
static char g_url[128];

static const char fmt_json[] =
	"{\"Name\":\"vol\",\"UUID\":\"11111111-2222-3333-4444-555555555555\",\"Storage\":\"file\","
	"\"Bucket\":\"/tmp/none/\",\"BlockSize\":4096,\"TrashDays\":0,\"MetaVersion\":1}";

static void checker(const char *fmt, const char *arg)
{
	redisContext *c = gct_redis_conn(g_redis.port, 5);
	redisReply *r = arg ? redisCommand(c, fmt, arg) : redisCommand(c, fmt);

	assert_non_null(r);
	freeReplyObject(r);
	redisFree(c);
}

/* Kill every client but the killer: the handle's connection goes. */
static void kill_clients(void)
{
	checker("CLIENT KILL TYPE normal SKIPME yes", NULL);
}

static long long counter(void)
{
	redisContext *c = gct_redis_conn(g_redis.port, 5);
	redisReply *r = redisCommand(c, "HGET h n");
	long long v = r && r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;

	freeReplyObject(r);
	redisFree(c);
	return v;
}

static int group_setup(void **state)
{
	int rc;

	(void)state;
	rc = gct_redis_try("test_redis_conn", &g_redis, &g_have_redis);
	if (rc != 0)
		return rc == 77 ? 0 : -1;
	checker("SET setting %s", fmt_json);
	snprintf(g_url, sizeof(g_url), "redis://127.0.0.1:%d/5", g_redis.port);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	gct_group_end(&g_redis, g_have_redis, "");
	return 0;
}

static void need_redis(void)
{
	if (!g_have_redis)
		skip();
}

/* A handle on the test's Redis (the test is skipped without redis-server). */
static struct jo_meta *open_vol(void)
{
	need_redis();
	return meta_open_ok(g_url);
}

/* A command that must get a reply (which is freed). */
#define RD_OK(m, ...)                                                   \
	do {                                                            \
		redisReply *rd_ok_ = jo_rd_command(m, __VA_ARGS__);      \
		assert_non_null(rd_ok_);                                \
		freeReplyObject(rd_ok_);                                \
	} while (0)

static void test_read_reconnects(void **state)
{
	struct jo_meta *m;
	redisReply *r;
	unsigned e0;
	size_t plen = 99;

	(void)state;
	m = open_vol();
	assert_string_equal(jo_rd_prefix(m, &plen), "");
	assert_int_equal(plen, 0);
	e0 = jo_rd_epoch(m);
	kill_clients();
	r = jo_rd_command(m, "GET %Ksetting");
	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STRING);
	freeReplyObject(r);
	assert_int_equal(jo_rd_epoch(m), e0 + 1);
	jo_meta_close(m);
}

/* r, the reply to command NAME, is none: its connection was lost
 * (JO_ECONNECT, returned). */
static int rd_lost(struct jo_meta *m, struct jo_err *err, const char *name, redisReply *r)
{
	int rc;

	assert_null(r);
	rc = jo_rd_conn_error(m, err, name);
	assert_int_equal(rc, JO_ECONNECT);
	return rc;
}

static void test_watch_never_moves(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	int rc;

	(void)state;
	m = open_vol();
	RD_OK(m, "WATCH %Kk");
	kill_clients();
	/* a read inside the transaction fails instead of going to a new connection */
	rc = rd_lost(m, &err, "GET", jo_rd_command(m, "GET %Kk"));
	/* nothing that ran was lost: the operation may start over from WATCH */
	assert_true(jo_rd_retryable(m, rc));
	RD_OK(m, "WATCH %Kk");
	RD_OK(m, "UNWATCH");
	jo_meta_close(m);
}

static void test_write_not_repeated(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	int rc;

	(void)state;
	need_redis();
	checker("DEL h", NULL);
	m = open_vol();
	kill_clients();
	/* the write fails with its connection: never sent again elsewhere */
	rc = rd_lost(m, &err, "HINCRBY", jo_rd_command(m, "HINCRBY %Kh n 1"));
	assert_false(jo_rd_retryable(m, rc));
	assert_true(counter() <= 1);
	/* the next command reconnects; the count moved at most once in all */
	RD_OK(m, "HINCRBY %Kh n 1");
	assert_true(counter() >= 1 && counter() <= 2);
	jo_meta_close(m);
}

static void test_exec_outcome_unknown(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	redisReply *r = NULL;
	int rc, got = 0;

	(void)state;
	m = open_vol();
	RD_OK(m, "PING");
	assert_int_equal(jo_rd_append(m, "MULTI"), REDIS_OK);
	assert_int_equal(jo_rd_append(m, "SET %Kx 1"), REDIS_OK);
	assert_int_equal(jo_rd_append(m, "EXEC"), REDIS_OK);
	kill_clients();
	while (jo_rd_get_reply(m, &r) == REDIS_OK) {
		freeReplyObject(r);
		got++;
	}
	assert_true(got < 3);
	rc = jo_rd_conn_error(m, &err, "EXEC");
	assert_int_equal(rc, JO_ECONNECT);
	assert_non_null(strstr(err.msg, "outcome is unknown"));
	assert_false(jo_rd_retryable(m, rc));
	RD_OK(m, "GET %Ksetting");
	jo_meta_close(m);
}

static void test_append_server_gone(void **state)
{
	struct gct_redis r2;
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	redisContext *c;
	redisReply *r;
	char url[128];
	int rc;

	(void)state;
	need_redis();
	assert_int_equal(gct_redis_start(&r2), 0);
	c = gct_redis_conn(r2.port, 5);
	r = redisCommand(c, "SET setting %s", fmt_json);
	assert_non_null(r);
	freeReplyObject(r);
	redisFree(c);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d/5", r2.port);
	m = meta_open_ok(url);
	gct_redis_stop(&r2);
	assert_null(jo_rd_command(m, "PING")); /* the connection goes, no new one */
	assert_int_not_equal(jo_rd_append(m, "GET %Ksetting"), REDIS_OK);
	rc = jo_rd_append_failed(m, 0, &err, "GET pipeline");
	assert_int_equal(rc, JO_ECONNECT);
	assert_int_equal(err.code, JO_ECONNECT);
	assert_non_null(strstr(err.msg, "GET pipeline"));
	assert_non_null(strstr(err.msg, "reconnecting"));
	assert_null(strstr(err.msg, "out of memory"));
	assert_true(jo_rd_retryable(m, rc)); /* nothing pending, nothing unknown */
	jo_meta_close(m);
}

/* ---- jo_rd_confirm */

/* The number after "name:" in the INFO section of the server on port. */
static long long info_num(int port, const char *section, const char *name)
{
	redisContext *c = gct_redis_conn(port, 0);
	redisReply *r = redisCommand(c, "INFO %s", section);
	const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, name) : NULL;
	long long v = p ? atoll(p + strlen(name)) : 0;

	freeReplyObject(r);
	redisFree(c);
	return v;
}

static void on(int port, const char *cmd)
{
	redisContext *c = gct_redis_conn(port, 0);
	redisReply *r = redisCommand(c, cmd);

	if (!r || r->type == REDIS_REPLY_ERROR)
		fail_msg("%s on %d: %s", cmd, port, r ? r->str : c->errstr);
	freeReplyObject(r);
	redisFree(c);
}

static bool strstr_info(int port, const char *needle)
{
	redisContext *c = gct_redis_conn(port, 0);
	redisReply *r = redisCommand(c, "INFO replication");
	bool yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, needle);

	freeReplyObject(r);
	redisFree(c);
	return yes;
}

/* The second server of a jo_rd_confirm test: stopped by its teardown, so
 * that a failed assertion leaves no replica behind. */
static struct gct_redis g_r2;

static int stop_replica(void **state)
{
	(void)state;
	gct_redis_stop(&g_r2);
	memset(&g_r2, 0, sizeof(g_r2));
	if (g_have_redis)
		on(g_redis.port, "ACL DELUSER nowait");
	return 0;
}

/* A second server, made a replica of g_redis and in sync with it. */
static void start_replica(struct gct_redis *r2)
{
	char cmd[64];

	assert_int_equal(gct_redis_start(r2), 0);
	on(g_redis.port, "CONFIG SET repl-diskless-sync-delay 0"); /* no 5 s wait for others */
	snprintf(cmd, sizeof(cmd), "REPLICAOF 127.0.0.1 %d", g_redis.port);
	on(r2->port, cmd);
	for (int i = 0; i < 200; i++) {
		if (info_num(g_redis.port, "replication", "connected_slaves:") == 1 &&
		    strstr_info(r2->port, "master_link_status:up"))
			return;
		usleep(50000);
	}
	fail_msg("replica on %d never synced with %d", r2->port, g_redis.port);
}

/* Gone as a failover takes it: promoted, it no longer follows g_redis. */
static void detach_replica(struct gct_redis *r2)
{
	on(r2->port, "REPLICAOF NO ONE");
	for (int i = 0; i < 200; i++) {
		if (info_num(g_redis.port, "replication", "connected_slaves:") == 0)
			return;
		usleep(50000);
	}
	fail_msg("the master still counts its replica");
}

static void set_x(struct jo_meta *m)
{
	redisReply *r = jo_rd_command(m, "SET %Kx 1");

	assert_non_null(r);
	assert_int_equal(r->type, REDIS_REPLY_STATUS);
	freeReplyObject(r);
}

/* A handle on the master once the replica is attached, with x set through it. */
static struct jo_meta *open_replicated(void)
{
	struct jo_meta *m;

	need_redis();
	start_replica(&g_r2);
	m = open_vol();
	set_x(m);
	return m;
}

static void test_confirm_never_replicated(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	long long waits;

	(void)state;
	need_redis();
	waits = info_num(g_redis.port, "commandstats", "cmdstat_wait:calls=");
	m = open_vol();
	set_x(m);
	assert_int_equal(jo_rd_confirm(m, &err), 0);
	usleep(1100000); /* past the once-a-second look for a replica that came since */
	set_x(m);
	assert_int_equal(jo_rd_confirm(m, &err), 0);
	assert_false(jo_rd_moved(m));
	/* nothing to wait for: no WAIT was sent */
	assert_int_equal(info_num(g_redis.port, "commandstats", "cmdstat_wait:calls="), waits);
	jo_meta_close(m);
}

static void test_confirm_replica_gone(void **state)
{
	struct gct_redis *r2 = &g_r2;
	struct jo_meta *m;
	struct jo_err err = { 0 };
	int rc;

	(void)state;
	m = open_replicated();
	assert_int_equal(jo_rd_confirm(m, &err), 0); /* the replica has it */
	detach_replica(r2);
	/* the master takes the write, and reports no replica now: not safe */
	set_x(m);
	rc = jo_rd_confirm(m, &err);
	assert_int_equal(rc, JO_ECONNECT);
	assert_non_null(strstr(err.msg, "not acted on"));
	assert_non_null(strstr(err.msg, "no replica confirmed"));
	assert_false(jo_rd_retryable(m, rc));
	assert_false(jo_rd_moved(m)); /* standalone: nobody names another master */
	/* and not the next time either: no "none left to lose it to" */
	jo_err_clear(&err);
	set_x(m);
	assert_int_equal(jo_rd_confirm(m, &err), JO_ECONNECT);
	assert_non_null(strstr(err.msg, "not acted on"));
	jo_meta_close(m);
}

/* A replica that is attached but behind (stopped here for longer than one
 * WAIT, as one resyncing after a failover is) is waited for again: the
 * result is confirmed once it acks, not called unknown after the first
 * WAIT. */
static void test_confirm_replica_slow(void **state)
{
	struct gct_redis *r2 = &g_r2;
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct timespec a, b;
	pid_t timer;
	int st;

	(void)state;
	m = open_replicated();
	assert_int_equal(jo_rd_confirm(m, &err), 0);
	assert_int_equal(kill(r2->pid, SIGSTOP), 0);
	timer = fork();
	assert_true(timer >= 0);
	if (timer == 0) {
		usleep(7000000); /* past the first WAIT (5 s) */
		kill(r2->pid, SIGCONT);
		_exit(0);
	}
	set_x(m);
	clock_gettime(CLOCK_MONOTONIC, &a);
	st = jo_rd_confirm(m, &err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	kill(r2->pid, SIGCONT);
	waitpid(timer, NULL, 0);
	if (st != 0)
		fail_msg("not confirmed: %s", err.msg);
	/* it did wait past the first WAIT, for the replica's ack */
	assert_true(b.tv_sec - a.tv_sec >= 6);
	assert_false(jo_rd_moved(m));
	jo_meta_close(m);
}

static void test_confirm_wait_refused(void **state)
{
	struct gct_redis *r2 = &g_r2;
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	char url[160];

	(void)state;
	need_redis();
	start_replica(r2);
	on(g_redis.port, "ACL SETUSER nowait on >nowaitpw ~* &* +@all -wait");
	snprintf(url, sizeof(url), "redis://nowait:nowaitpw@127.0.0.1:%d/5", g_redis.port);
	m = meta_open_ok(url);
	set_x(m);
	assert_int_equal(jo_rd_confirm(m, &err), JO_ECONNECT);
	assert_non_null(strstr(err.msg, "WAIT was refused"));
	assert_non_null(strstr(err.msg, "not acted on"));
	jo_meta_close(m);
}

static void test_confirm_connection_replaced(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };

	(void)state;
	m = open_replicated();
	kill_clients(); /* normal clients only: the replica stays */
	RD_OK(m, "GET %Kx"); /* read again on a new connection */
	/* what was done on the lost connection cannot be confirmed any more */
	assert_int_equal(jo_rd_confirm(m, &err), JO_ECONNECT);
	assert_non_null(strstr(err.msg, "not acted on"));
	assert_true(jo_rd_moved(m)); /* later work goes on on the new one */
	set_x(m);
	assert_int_equal(jo_rd_confirm(m, &err), 0);
	jo_meta_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_reconnects),
		cmocka_unit_test(test_watch_never_moves),
		cmocka_unit_test(test_write_not_repeated),
		cmocka_unit_test(test_exec_outcome_unknown),
		cmocka_unit_test(test_append_server_gone),
		cmocka_unit_test(test_confirm_never_replicated),
		cmocka_unit_test_teardown(test_confirm_replica_gone, stop_replica),
		cmocka_unit_test_teardown(test_confirm_replica_slow, stop_replica),
		cmocka_unit_test_teardown(test_confirm_wait_refused, stop_replica),
		cmocka_unit_test_teardown(test_confirm_connection_replaced, stop_replica),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
