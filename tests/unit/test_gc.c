/*
 * test_gc.c: the gc planner and workers on synthetic volumes (a private
 * redis-server and an on-disk SQLite database, objects in a file bucket):
 * removed files, shared slices (refcount 2), pending slices, zero refs,
 * delayed slices young and old, leaked Redis chunks, sustained and detached
 * inodes. Checks what is deleted, what is kept, and the metadata after.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "gc/gc.h"
#include "gc_testutil.h"

#define BS 65536u
#define S10 100000u   /* shared by a removed file and a live one */
#define S11 100000u   /* only in the removed file */
#define S12 70000u    /* pending (refcount says delete) */
#define S13 5000u     /* zero-ref marker ("0" / refs 1): kept */
#define S14 5000u     /* in an old delayed entry: freed */
#define S15 5000u     /* in a young delayed entry: kept */
#define S16 5000u     /* in a leaked Redis chunk: freed */
#define S17 5000u     /* chunk of a detached node: kept */
#define S18 5000u     /* chunk of a sustained inode: kept */

static struct gct_redis g_redis;
static bool g_have_redis;
static char g_dir[256];
static int g_case;

struct fixture {
	char url[512];
	char bucket[600];
	bool redis;
	int64_t now;
};

static void fmt_json(char *buf, size_t cap, const char *bucket)
{
	snprintf(buf, cap, "{\"Name\":\"v\",\"UUID\":\"11111111-2222-3333-4444-555555555555\","
		 "\"Storage\":\"file\",\"Bucket\":\"%s/\",\"BlockSize\":64,\"TrashDays\":1,"
		 "\"MetaVersion\":1}", bucket);
}

static void rec24(uint8_t *p, uint32_t pos, uint64_t id, uint32_t size, uint32_t off, uint32_t len)
{
	struct jo_slice s = { .pos = pos, .id = id, .size = size, .off = off, .len = len };

	jo_slice_encode(&s, p);
}

static void rec12(uint8_t *p, uint64_t id, uint32_t size)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(id >> (56 - 8 * i));
	for (int i = 0; i < 4; i++)
		p[8 + i] = (uint8_t)(size >> (24 - 8 * i));
}

static void key_path(const struct fixture *f, uint64_t id, uint32_t i, uint32_t bsize, char *out,
		     size_t cap)
{
	char key[256];

	assert_true(jo_block_key(key, sizeof(key), "v", false, id, i, bsize) > 0);
	snprintf(out, cap, "%s/%s", f->bucket, key);
}

static void put_slice(const struct fixture *f, uint64_t id, uint32_t size)
{
	for (uint32_t i = 0; i < jo_slice_nblocks(size, BS); i++) {
		char p[1024], cmd[1100];
		FILE *fp;

		key_path(f, id, i, jo_block_len(size, BS, i), p, sizeof(p));
		snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", p);
		assert_int_equal(system(cmd), 0);
		fp = fopen(p, "w");
		assert_non_null(fp);
		fputs("x", fp);
		fclose(fp);
	}
}

/* 1: every block of the slice exists, 0: none does, -1: some */
static int slice_state(const struct fixture *f, uint64_t id, uint32_t size)
{
	uint32_t n = jo_slice_nblocks(size, BS), have = 0;

	for (uint32_t i = 0; i < n; i++) {
		char p[1024];

		key_path(f, id, i, jo_block_len(size, BS, i), p, sizeof(p));
		have += access(p, F_OK) == 0;
	}
	return have == n ? 1 : have == 0 ? 0 : -1;
}

static void rcmd(redisContext *c, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = redisvCommand(c, fmt, ap);
	va_end(ap);
	assert_non_null(r);
	assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
	freeReplyObject(r);
}

static void make_redis(struct fixture *f, int db)
{
	redisContext *c = gct_redis_conn(g_redis.port, db);
	char js[1024];
	uint8_t two[48], one[24], d1[12], d2[12];
	int64_t old = f->now - 2 * 86400;

	rcmd(c, "FLUSHDB");
	fmt_json(js, sizeof(js), f->bucket);
	rcmd(c, "SET setting %s", js);
	/* removed file 2 (length 200000): records of 10 and 11 */
	rec24(two, 0, 10, S10, 0, S10);
	rec24(two + 24, S10, 11, S11, 0, S11);
	rcmd(c, "RPUSH c2_0 %b %b", two, (size_t)24, two + 24, (size_t)24);
	rcmd(c, "ZADD delfiles %lld 2:200000", (long long)f->now);
	/* live file 3 shares slice 10: refs 2 -> stored 1 */
	rec24(one, 0, 10, S10, 0, S10);
	rcmd(c, "SET i3 %b", "attr", (size_t)4);
	rcmd(c, "RPUSH c3_0 %b", one, (size_t)24);
	rcmd(c, "HSET sliceRef k10_%u 1", S10);
	rcmd(c, "HSET sliceRef k12_%u -1", S12);
	rcmd(c, "HSET sliceRef k13_%u 0", S13);
	/* delayed: old entry with 14, young with 15 */
	rec12(d1, 14, S14);
	rec12(d2, 15, S15);
	rcmd(c, "HSET delSlices 20_%lld %b", (long long)old, d1, (size_t)12);
	rcmd(c, "HSET delSlices 21_%lld %b", (long long)f->now, d2, (size_t)12);
	/* leaked chunk of vanished inode 4; detached 5; sustained 6 */
	rec24(one, 0, 16, S16, 0, S16);
	rcmd(c, "RPUSH c4_1 %b", one, (size_t)24);
	rec24(one, 0, 17, S17, 0, S17);
	rcmd(c, "RPUSH c5_0 %b", one, (size_t)24);
	rcmd(c, "ZADD detachedNodes %lld 5", (long long)f->now);
	rec24(one, 0, 18, S18, 0, S18);
	rcmd(c, "RPUSH c6_0 %b", one, (size_t)24);
	rcmd(c, "ZADD allSessions %lld 1", (long long)f->now + 60);
	rcmd(c, "HSET sessionInfos 1 {}");
	rcmd(c, "SADD session1 6");
	redisFree(c);
	snprintf(f->url, sizeof(f->url), "redis://127.0.0.1:%d/%d", g_redis.port, db);
}

static void sql(sqlite3 *db, const char *s)
{
	char *e = NULL;

	if (sqlite3_exec(db, s, NULL, NULL, &e) != SQLITE_OK) {
		fprintf(stderr, "sql: %s: %s\n", s, e);
		fail();
	}
}

static void make_sqlite(struct fixture *f, const char *path)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char js[1024], *q;
	uint8_t two[48], one[24], d[12];
	int64_t old = f->now - 2 * 86400;

	unlink(path);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sql(db, "PRAGMA journal_mode=WAL;"
		"CREATE TABLE jfs_setting (name VARCHAR(255) PRIMARY KEY, value TEXT);"
		"CREATE TABLE jfs_counter (name VARCHAR(255) PRIMARY KEY, value INTEGER);"
		"CREATE TABLE jfs_node (inode INTEGER PRIMARY KEY, type INTEGER, flags INTEGER,"
		" mode INTEGER, uid INTEGER, gid INTEGER, atime INTEGER, mtime INTEGER, ctime INTEGER,"
		" atimensec INTEGER, mtimensec INTEGER, ctimensec INTEGER, nlink INTEGER,"
		" length INTEGER, rdev INTEGER, parent INTEGER, access_acl_id INTEGER,"
		" default_acl_id INTEGER);"
		"CREATE TABLE jfs_chunk (id INTEGER PRIMARY KEY AUTOINCREMENT, inode INTEGER,"
		" indx INTEGER, slices BLOB, UNIQUE(inode, indx));"
		"CREATE TABLE jfs_chunk_ref (chunkid INTEGER PRIMARY KEY, size INTEGER, refs INTEGER);"
		"CREATE TABLE jfs_delfile (inode INTEGER PRIMARY KEY, length INTEGER, expire INTEGER);"
		"CREATE TABLE jfs_edge (id INTEGER PRIMARY KEY AUTOINCREMENT, parent INTEGER,"
		" name BLOB, inode INTEGER, type INTEGER);"
		"CREATE TABLE jfs_delslices (chunkid INTEGER PRIMARY KEY, deleted INTEGER, slices BLOB);"
		"CREATE TABLE jfs_session2 (sid INTEGER PRIMARY KEY, expire INTEGER, info BLOB);"
		"CREATE TABLE jfs_sustained (id INTEGER PRIMARY KEY AUTOINCREMENT, sid INTEGER,"
		" inode INTEGER);"
		"CREATE TABLE jfs_detached_node (inode INTEGER PRIMARY KEY, added INTEGER);");
	fmt_json(js, sizeof(js), f->bucket);
	q = sqlite3_mprintf("INSERT INTO jfs_setting VALUES('format', %Q);"
			    "INSERT INTO jfs_delfile VALUES(2, 200000, %lld);"
			    "INSERT INTO jfs_node (inode, type, length) VALUES(3, 1, %u);"
			    "INSERT INTO jfs_chunk_ref VALUES(10, %u, 2), (11, %u, 1), (12, %u, 0),"
			    " (13, %u, 1), (14, %u, 1), (15, %u, 1);",
			    js, (long long)f->now, S10, S10, S11, S12, S13, S14, S15);
	sql(db, q);
	sqlite3_free(q);
	rec24(two, 0, 10, S10, 0, S10);
	rec24(two + 24, S10, 11, S11, 0, S11);
	rec24(one, 0, 10, S10, 0, S10);
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO jfs_chunk (inode, indx, slices) "
					    "VALUES (?, 0, ?)", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_int(st, 1, 2);
	sqlite3_bind_blob(st, 2, two, 48, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_reset(st);
	sqlite3_bind_int(st, 1, 3);
	sqlite3_bind_blob(st, 2, one, 24, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO jfs_delslices VALUES (?, ?, ?)", -1,
					    &st, NULL), SQLITE_OK);
	rec12(d, 14, S14);
	sqlite3_bind_int(st, 1, 20);
	sqlite3_bind_int64(st, 2, old);
	sqlite3_bind_blob(st, 3, d, 12, SQLITE_TRANSIENT);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_reset(st);
	rec12(d, 15, S15);
	sqlite3_bind_int(st, 1, 21);
	sqlite3_bind_int64(st, 2, f->now);
	sqlite3_bind_blob(st, 3, d, 12, SQLITE_TRANSIENT);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	sqlite3_close(db);
	snprintf(f->url, sizeof(f->url), "sqlite3://%s", path);
}

static int setup_case(void **state, bool redis)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cmd[700];

	if (redis && !g_have_redis) {
		free(f);
		return 0;
	}
	f->redis = redis;
	f->now = (int64_t)time(NULL);
	g_case++;
	snprintf(f->bucket, sizeof(f->bucket), "%s/bucket%d", g_dir, g_case);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", f->bucket);
	assert_int_equal(system(cmd), 0);
	put_slice(f, 10, S10);
	put_slice(f, 11, S11);
	put_slice(f, 12, S12);
	put_slice(f, 13, S13);
	put_slice(f, 14, S14);
	put_slice(f, 15, S15);
	put_slice(f, 16, S16);
	put_slice(f, 17, S17);
	put_slice(f, 18, S18);
	GCT_CASE_META(redis, f);
	*state = f;
	return 0;
}

GCT_ENGINE_SETUPS

static int teardown_case(void **state)
{
	free(*state);
	return 0;
}

static void run_gc(struct fixture *f, bool del, int threads, struct gc_stats *st)
{
	struct jo_vol_opts vo = { .meta_url = f->url };
	struct gc_opts o = { .delete_ = del, .threads = threads, .lease_ms = 30000, .task_size = 2,
			     .worker_id = "unit" };
	struct jo_err err = { 0 };
	struct jo_vol *v;
	struct gc_run *r;

	if (jo_vol_open(&v, &vo, &err) != 0)
		fail_msg("open: %s", err.msg);
	assert_int_equal(gc_run_new(&r, v, &o, &err), 0);
	if (gc_plan(r, !del, &err) != 0)
		fail_msg("plan: %s", err.msg);
	if (del && gc_work(r, &err) != 0)
		fail_msg("work: %s", err.msg);
	gc_run_stats(r, st);
	gc_run_free(r);
	jo_vol_close(v);
}

static int64_t refs_of(struct jo_meta *m, uint64_t id, uint32_t size, bool *ex)
{
	struct jo_err err = { 0 };
	int64_t refs = -99;

	assert_int_equal(jo_meta_get_slice_ref(m, id, size, &refs, ex, &err), 0);
	return refs;
}

static int count_delfiles(uint64_t ino, uint64_t len, int64_t at, void *p)
{
	(void)ino;
	(void)len;
	(void)at;
	(*(int *)p)++;
	return 0;
}

static int count_dels(uint64_t id, int64_t at, const uint8_t *r, size_t l, void *p)
{
	(void)at;
	(void)r;
	(void)l;
	assert_int_equal(id, 21); /* only the young entry may remain */
	(*(int *)p)++;
	return 0;
}

static void check_untouched(struct fixture *f)
{
	for (uint64_t id = 10; id <= 18; id++)
		assert_int_equal(slice_state(f, id, id == 10 || id == 11 ? S10 : id == 12 ? S12 : S13), 1);
}

static void gc_deletes_exactly_what_refcounts_free(void **state)
{
	struct fixture *f = *state;
	struct gc_stats st;
	struct jo_meta *m;
	struct jo_err err = { 0 };
	uint8_t *raw = NULL;
	size_t len = 0;
	bool ex;
	int n = 0;

	if (!f)
		skip();
	/* dry run: reports, changes nothing */
	run_gc(f, false, 1, &st);
	check_untouched(f);
	/* would free 11 (file), 12 (pending), 14 (delayed), and on Redis 16 (leaked chunk) */
	assert_int_equal(st.k[GC_FILE].slices, 1);
	assert_int_equal(st.k[GC_SLICE].slices, 1);
	assert_int_equal(st.k[GC_DELSLICE].slices, 1);
	assert_int_equal(st.k[GC_CHUNK].slices, f->redis ? 1 : 0);
	assert_int_equal(st.k[GC_FILE].objects, 2);
	assert_int_equal(st.k[GC_SLICE].objects, 2);
	assert_int_equal(st.tasks_planned, 0);

	run_gc(f, true, 2, &st);
	assert_int_equal(gc_stats_errors(&st), 0);
	assert_int_equal(st.leases_lost, 0);
	assert_true(st.tasks_done >= 3);
	assert_int_equal(slice_state(f, 10, S10), 1); /* still referenced by file 3 */
	assert_int_equal(slice_state(f, 11, S11), 0);
	assert_int_equal(slice_state(f, 12, S12), 0);
	assert_int_equal(slice_state(f, 13, S13), 1);
	assert_int_equal(slice_state(f, 14, S14), 0);
	assert_int_equal(slice_state(f, 15, S15), 1); /* young delayed entry */
	assert_int_equal(slice_state(f, 16, S16), f->redis ? 0 : 1);
	assert_int_equal(slice_state(f, 17, S17), 1); /* detached node */
	assert_int_equal(slice_state(f, 18, S18), 1); /* sustained inode */

	assert_int_equal(jo_meta_open(&m, f->url, &err), 0);
	assert_int_equal(refs_of(m, 10, S10, &ex), 1);
	refs_of(m, 11, S11, &ex);
	assert_false(ex);
	refs_of(m, 12, S12, &ex);
	assert_false(ex);
	refs_of(m, 14, S14, &ex);
	assert_false(ex);
	assert_int_equal(refs_of(m, 13, S13, &ex), 1);
	assert_int_equal(refs_of(m, 15, S15, &ex), 1);
	assert_int_equal(jo_meta_read_chunk(m, 2, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 0);
	assert_int_equal(jo_meta_read_chunk(m, 3, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 24);
	free(raw);
	assert_int_equal(jo_meta_scan_delfiles(m, count_delfiles, &n, &err), 0);
	assert_int_equal(n, 0);
	n = 0;
	assert_int_equal(jo_meta_scan_delslices(m, count_dels, &n, &err), 0);
	assert_int_equal(n, 1);
	if (f->redis) {
		assert_int_equal(jo_meta_read_chunk(m, 4, 1, &raw, &len, &err), 0);
		assert_int_equal(len, 0);
		assert_int_equal(jo_meta_read_chunk(m, 5, 0, &raw, &len, &err), 0);
		assert_int_equal(len, 24);
		free(raw);
		assert_int_equal(jo_meta_read_chunk(m, 6, 0, &raw, &len, &err), 0);
		assert_int_equal(len, 24);
		free(raw);
	}
	jo_meta_close(m);

	/* a second run finds nothing to do and deletes nothing */
	run_gc(f, true, 1, &st);
	assert_int_equal(st.k[GC_FILE].objects + st.k[GC_SLICE].objects + st.k[GC_DELSLICE].objects +
			 st.k[GC_CHUNK].objects, 0);
	assert_int_equal(slice_state(f, 10, S10), 1);
}

static void delete_chunk_decrements_and_reports_freed(void **state)
{
	struct fixture *f = *state;
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_sref *freed = NULL;
	size_t nf = 0;
	bool ex, del;

	if (!f)
		skip();
	assert_int_equal(jo_meta_open(&m, f->url, &err), 0);
	/* live file 3's chunk first: 10 drops to one reference, nothing freed */
	assert_int_equal(jo_mut_delete_chunk(m, 3, 0, &freed, &nf, &err), 0);
	assert_int_equal(nf, 0);
	free(freed);
	assert_int_equal(refs_of(m, 10, S10, &ex), 1);
	/* then the removed file's: both 10 and 11 are freed */
	assert_int_equal(jo_mut_delete_chunk(m, 2, 0, &freed, &nf, &err), 0);
	assert_int_equal(nf, 2);
	assert_int_equal(freed[0].id, 10);
	assert_int_equal(freed[1].id, 11);
	free(freed);
	assert_int_equal(jo_mut_slice_deletable(m, 10, S10, &del, &err), 0);
	assert_true(del);
	/* idempotent: the chunk is gone */
	assert_int_equal(jo_mut_delete_chunk(m, 2, 0, &freed, &nf, &err), 0);
	assert_int_equal(nf, 0);
	free(freed);
	assert_int_equal(refs_of(m, 10, S10, &ex), 0);
	/* forget: the entry disappears */
	assert_int_equal(jo_mut_forget_slice(m, 10, S10, &err), 0);
	assert_int_equal(jo_mut_slice_deletable(m, 10, S10, &del, &err), 0);
	assert_false(del);
	/* a young delayed entry is kept, an old one cleaned once */
	{
		bool kept;

		assert_int_equal(jo_mut_cleanup_delslice(m, 21, f->now, f->now - 86400, &freed, &nf,
							 &kept, &err), 0);
		assert_true(kept);
		assert_int_equal(nf, 0);
		free(freed);
		assert_int_equal(jo_mut_cleanup_delslice(m, 20, f->now - 2 * 86400, f->now - 86400,
							 &freed, &nf, &kept, &err), 0);
		assert_false(kept);
		assert_int_equal(nf, 1);
		assert_int_equal(freed[0].id, 14);
		free(freed);
		assert_int_equal(jo_mut_cleanup_delslice(m, 20, f->now - 2 * 86400, f->now - 86400,
							 &freed, &nf, &kept, &err), 0);
		assert_int_equal(nf, 0);
		free(freed);
	}
	jo_meta_close(m);
}

GCT_GROUP_FIXTURE("test_gc", "gcunit")

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(gc_deletes_exactly_what_refcounts_free, setup_redis,
						teardown_case),
		cmocka_unit_test_setup_teardown(gc_deletes_exactly_what_refcounts_free, setup_sqlite,
						teardown_case),
		cmocka_unit_test_setup_teardown(delete_chunk_decrements_and_reports_freed, setup_redis,
						teardown_case),
		cmocka_unit_test_setup_teardown(delete_chunk_decrements_and_reports_freed, setup_sqlite,
						teardown_case),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
