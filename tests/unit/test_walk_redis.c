/*
 * test_walk_redis: the walker on the Redis family, which lists directories
 * in batches with their entries' attributes (jo_meta_readdir_attr: pipelined
 * HSCAN pages, then one MGET per page), on a real redis-server child:
 *   - a directory of 2,500 entries (hashtable encoding: HSCAN takes several
 *     rounds) beside 40 small directories (more than one batch), a chain 300
 *     deep, a hard link, a trash file and a sustained inode;
 *   - an entry whose inode is gone is dropped and counted as vanished;
 *   - an inode key that is not a string (MGET answers nil for it as for a
 *     missing one) fails the listing: never read as a vanished inode;
 *   - files removed while open: the sets of sessions in allSessions and in
 *     the legacy sessions zset, read without a SCAN of the keyspace;
 *   - a key-prefixed (cluster-style) volume is not read: db isolation;
 *   - every row equals what was written (paths, parents, attributes).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "support/meta_open.h"
#include "common/meta/meta.h"
#include "common/walk.h"
#include "gc_testutil.h"

static struct gct_redis g_redis;
static bool g_have_redis;
static char g_url[128];
static redisContext *g_c;

#define BIG 2500
#define SMALL 40
#define CHAIN 300

static const char fmt_json[] =
	"{\"Name\":\"vol\",\"UUID\":\"11111111-2222-3333-4444-555555555555\",\"Storage\":\"file\","
	"\"Bucket\":\"/tmp/none/\",\"BlockSize\":4096,\"TrashDays\":1,\"MetaVersion\":1}";

static void be(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* A 72-byte attr as JuiceFS writes it (spec §3.3). */
static void put_attr(uint64_t ino, int type, uint64_t len, uint32_t nlink, uint64_t parent)
{
	uint8_t a[72] = { 0 };
	redisReply *r;

	be(a + 1, (uint64_t)(type << 12 | 0644), 2);
	be(a + 3, 1000 + ino % 7, 4);
	be(a + 7, 2000, 4);
	be(a + 11, 1700000000 + ino, 8);
	be(a + 23, 1700000000 + ino, 8);
	be(a + 35, 1700000000 + ino, 8);
	be(a + 47, nlink, 4);
	be(a + 51, len, 8);
	be(a + 63, parent, 8);
	r = redisCommand(g_c, "SET i%llu %b", (unsigned long long)ino, a, sizeof(a));
	assert_non_null(r);
	freeReplyObject(r);
}

static void put_entry(uint64_t dir, const char *name, uint64_t ino, int type)
{
	uint8_t v[9];
	redisReply *r;

	v[0] = (uint8_t)type;
	be(v + 1, ino, 8);
	r = redisCommand(g_c, "HSET d%llu %s %b", (unsigned long long)dir, name, v, sizeof(v));
	assert_non_null(r);
	freeReplyObject(r);
}

static int group_setup(void **state)
{
	char name[32];
	int rc;

	(void)state;
	rc = gct_redis_try("test_walk_redis", &g_redis, &g_have_redis);
	if (rc != 0)
		return rc == 77 ? 0 : -1;
	g_c = gct_redis_conn(g_redis.port, 6);
	if (!g_c)
		return -1;
	freeReplyObject(redisCommand(g_c, "SET setting %s", fmt_json));
	put_attr(1, JO_TYPE_DIR, 4096, 2, 1);
	/* /big: BIG files 1000.. */
	put_attr(10, JO_TYPE_DIR, 4096, 2, 1);
	put_entry(1, "big", 10, JO_TYPE_DIR);
	for (uint64_t i = 0; i < BIG; i++) {
		snprintf(name, sizeof(name), "f%llu", (unsigned long long)i);
		put_attr(1000 + i, JO_TYPE_FILE, i, 1, 10);
		put_entry(10, name, 1000 + i, JO_TYPE_FILE);
	}
	/* /s0 .. /s39, each with one file */
	for (uint64_t i = 0; i < SMALL; i++) {
		snprintf(name, sizeof(name), "s%llu", (unsigned long long)i);
		put_attr(100 + i, JO_TYPE_DIR, 4096, 2, 1);
		put_entry(1, name, 100 + i, JO_TYPE_DIR);
		put_attr(5000 + i, JO_TYPE_FILE, 10, 1, 100 + i);
		put_entry(100 + i, "x", 5000 + i, JO_TYPE_FILE);
	}
	/* /c/c/.../c */
	for (uint64_t i = 0; i < CHAIN; i++) {
		put_attr(10000 + i, JO_TYPE_DIR, 4096, 2, i ? 10000 + i - 1 : 1);
		put_entry(i ? 10000 + i - 1 : 1, "c", 10000 + i, JO_TYPE_DIR);
	}
	/* a hard link (parent 0 in the attr), a vanished entry */
	put_attr(20, JO_TYPE_FILE, 3, 2, 0);
	put_entry(1, "h1", 20, JO_TYPE_FILE);
	put_entry(100, "h2", 20, JO_TYPE_FILE);
	put_entry(1, "gone", 21, JO_TYPE_FILE);
	/* trash hour directory with a file; a sustained inode */
	put_attr(JO_TRASH_INODE + 1, JO_TYPE_DIR, 4096, 2, JO_TRASH_INODE);
	put_entry(JO_TRASH_INODE, "2026-12-03-10", JO_TRASH_INODE + 1, JO_TYPE_DIR);
	put_attr(30, JO_TYPE_FILE, 77, 1, JO_TRASH_INODE + 1);
	put_entry(JO_TRASH_INODE + 1, "1-30-t", 30, JO_TYPE_FILE);
	put_attr(31, JO_TYPE_FILE, 88, 0, 1);
	freeReplyObject(redisCommand(g_c, "ZADD allSessions 9999999999 4"));
	freeReplyObject(redisCommand(g_c, "SADD session4 31"));
	/* a legacy (pre-1.0) session's set counts too; an unregistered one not */
	put_attr(32, JO_TYPE_FILE, 99, 0, 1);
	freeReplyObject(redisCommand(g_c, "ZADD sessions 1700000000 5"));
	freeReplyObject(redisCommand(g_c, "SADD session5 32"));
	put_attr(33, JO_TYPE_FILE, 111, 0, 1);
	freeReplyObject(redisCommand(g_c, "SADD session6 33"));
	snprintf(g_url, sizeof(g_url), "redis://127.0.0.1:%d/6", g_redis.port);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	if (g_c)
		redisFree(g_c);
	gct_group_end(&g_redis, g_have_redis, "");
	return 0;
}

struct seen {
	uint64_t rows, big, small, chain, trash, open, links;
	uint64_t last;
	bool ordered;
};

static int on_row(const struct jo_walk_row *r, void *p)
{
	struct seen *s = p;
	char want[64];

	s->rows++;
	if (r->ino < s->last)
		s->ordered = false;
	s->last = r->ino;
	assert_int_not_equal(r->ino, 21);
	if (r->where == JO_WALK_IN_TRASH) {
		s->trash++;
		if (r->ino == 30) {
			assert_int_equal(r->path_len, strlen("/.trash/2026-12-03-10/1-30-t"));
			assert_int_equal(r->attr.length, 77);
		}
		return 0;
	}
	if (r->where == JO_WALK_OPEN_UNLINKED) {
		s->open++;
		assert_true(r->ino == 31 || r->ino == 32);
		assert_int_equal(r->attr.length, r->ino == 31 ? 88 : 99);
		return 0;
	}
	if (r->ino >= 1000 && r->ino < 1000 + BIG) {
		s->big++;
		snprintf(want, sizeof(want), "/big/f%llu", (unsigned long long)(r->ino - 1000));
		assert_int_equal(r->path_len, strlen(want));
		assert_memory_equal(r->path, want, r->path_len);
		assert_int_equal(r->parent, 10);
		assert_int_equal(r->attr.length, r->ino - 1000);
		assert_int_equal(r->attr.uid, 1000 + r->ino % 7);
		assert_int_equal(r->attr.mtime, 1700000000 + (int64_t)r->ino);
	} else if (r->ino >= 5000 && r->ino < 5000 + SMALL) {
		s->small++;
		snprintf(want, sizeof(want), "/s%llu/x", (unsigned long long)(r->ino - 5000));
		assert_int_equal(r->path_len, strlen(want));
		assert_memory_equal(r->path, want, r->path_len);
		assert_int_equal(r->parent, 100 + r->ino - 5000);
	} else if (r->ino >= 10000 && r->ino < 10000 + CHAIN) {
		s->chain++;
		assert_int_equal(r->depth, r->ino - 10000 + 1);
		assert_int_equal(r->path_len, 2 * r->depth);
	} else if (r->ino == 20) {
		s->links++;
		assert_int_equal(r->link, s->links - 1);
		if (r->link == 0)
			assert_memory_equal(r->path, "/h1", 3);
		else
			assert_memory_equal(r->path, "/s0/h2", 6);
	}
	return 0;
}

static void test_walk_redis_batches(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct jo_walk_opts o = JO_WALK_OPTS_INIT;
	struct jo_walk_stats st;
	struct seen s = { .ordered = true };

	(void)state;
	if (!g_have_redis)
		skip();
	m = meta_open_ok(g_url);
	o.flags = JO_WALK_TRASH | JO_WALK_SUSTAINED;
	o.mem_limit = 4u << 20;
	o.row = on_row;
	o.payload = &s;
	if (jo_walk_run(m, &o, &st, &err))
		fail_msg("walk: %s", err.msg);
	assert_true(s.ordered);
	assert_int_equal(s.big, BIG);
	assert_int_equal(s.small, SMALL);
	assert_int_equal(s.chain, CHAIN);
	assert_int_equal(s.links, 2);
	assert_int_equal(s.trash, 2);
	assert_int_equal(s.open, 2);
	/* root, /big + files, small dirs + files, chain, two links */
	assert_int_equal(s.rows - s.trash - s.open, 1 + 1 + BIG + 2 * SMALL + CHAIN + 2);
	assert_int_equal(st.vanished, 1);
	assert_false(st.point_in_time);
	/* root, /big, the small ones, the chain, trash root and hour */
	assert_int_equal(st.dirs_read, 1 + 1 + SMALL + CHAIN + 2);
	jo_meta_close(m);
}

static int batch_cb(size_t di, const char *name, size_t len, uint64_t ino, uint8_t type,
		    const struct jo_attr *a, void *p)
{
	uint64_t *n = p;

	(void)name;
	(void)len;
	(void)type;
	n[di]++;
	if (ino == 21)
		assert_null(a);
	else
		assert_non_null(a);
	return 0;
}

static void test_readdir_attr_batch(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	uint64_t dirs[3] = { 10, 1, 4242 }, n[3] = { 0, 0, 0 };

	(void)state;
	if (!g_have_redis)
		skip();
	m = meta_open_ok(g_url);
	assert_int_equal(jo_meta_readdir_attr(m, dirs, 3, batch_cb, n, &err), 0);
	assert_int_equal(n[0], BIG);
	assert_int_equal(n[1], 1 + SMALL + 1 + 2); /* big, s*, c, h1, gone */
	assert_int_equal(n[2], 0);                  /* no such directory: no entry */
	jo_meta_close(m);
}

/* A directory (not below the root) whose one entry's inode key is a list. */
static void test_readdir_attr_wrong_type(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	uint64_t dirs[2] = { 10, 4343 }, n[2] = { 0, 0 };

	(void)state;
	if (!g_have_redis)
		skip();
	put_entry(4343, "bad", 4344, JO_TYPE_FILE);
	freeReplyObject(redisCommand(g_c, "RPUSH i4344 x"));
	m = meta_open_ok(g_url);
	assert_int_not_equal(jo_meta_readdir_attr(m, dirs, 2, batch_cb, n, &err), 0);
	assert_non_null(strstr(err.msg, "WRONGTYPE"));
	jo_meta_close(m);
	freeReplyObject(redisCommand(g_c, "DEL d4343 i4344"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_redis_batches),
		cmocka_unit_test(test_readdir_attr_batch),
		cmocka_unit_test(test_readdir_attr_wrong_type),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
