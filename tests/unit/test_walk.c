/*
 * test_walk: the tree walker (common/walk.h) on a SQLite volume formatted by
 * the real juicefs, its namespace then shaped with SQL: a chain 10,000
 * directories deep, a directory of 100,000 files, a file with two hard
 * links, a trash hour directory with a file, a file removed while open
 * (sustained) and a file with fragmented chunks. Run under a 4 MiB sort
 * budget: the frontier and the edges spill to disk and memory stays bounded.
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
#include <unistd.h>

#include "common/err.h"
#include "support/meta_open.h"
#include "support/wu_fixture.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/walk.h"
#include "usage/usage.h"

#define CHAIN 10000
#define BIG 100000
#define CHAIN0 1000ULL    /* chain inodes CHAIN0 .. CHAIN0+CHAIN-1 */
#define BIG0 100000ULL    /* /big's files */
#define BIGDIR 50ULL
#define HARD 60ULL        /* /h1 and /big2/h2 */
#define BIG2 61ULL
#define GONE 70ULL        /* in the trash */
#define OPEN 80ULL        /* sustained */
#define FRAG 90ULL        /* /frag: chunks */
#define ORPHAN 95ULL      /* a node no path reaches */
#define HOUR (JO_TRASH_INODE + 1)

static char dir[256], url[512], jfs[1024];

static void exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg ? msg : "?");
}

static void node(sqlite3_stmt *st, uint64_t ino, int type, uint64_t len, int nlink, uint64_t parent)
{
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	sqlite3_bind_int(st, 2, type);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)len);
	sqlite3_bind_int(st, 4, nlink);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)parent);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)(1700000000LL + (int64_t)(ino % 1000000)) * 1000000);
	if (sqlite3_step(st) != SQLITE_DONE)
		fail_msg("insert node %llu", (unsigned long long)ino);
}

static void edge(sqlite3_stmt *st, uint64_t parent, const char *name, uint64_t ino, int type)
{
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)parent);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)ino);
	sqlite3_bind_int(st, 4, type);
	if (sqlite3_step(st) != SQLITE_DONE)
		fail_msg("insert edge %s", name);
}

static void put_rec(uint8_t *p, uint32_t pos, uint64_t id, uint32_t size, uint32_t off, uint32_t len)
{
	struct jo_slice s = { pos, id, size, off, len };

	jo_slice_encode(&s, p);
}

static int setup(void **state)
{
	sqlite3 *db;
	sqlite3_stmt *n, *ed, *ch;
	char path[600], name[32];
	uint8_t recs[4 * 24];

	(void)state;
	if (wu_fx_juicefs_check(jfs, sizeof(jfs)) != 0)
		return -1;
	if (wu_fx_tmpdir("walk", dir, sizeof(dir), url, sizeof(url)) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/m.db", dir);
	wu_fx_sh("'%s' --no-agent format %s vol --storage file --bucket %s/objs/ --trash-days 1 "
		 ">%s/format.log 2>&1", jfs, url, dir, dir);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		return -1;
	exec_sql(db, "BEGIN");
	if (sqlite3_prepare_v2(db, "INSERT INTO jfs_node (inode,type,flags,mode,uid,gid,atime,mtime,"
			       "ctime,atimensec,mtimensec,ctimensec,nlink,length,rdev,parent) VALUES "
			       "(?1,?2,0,420,7,8,?6,?6,?6,0,0,0,?4,?3,0,?5)", -1, &n, NULL) ||
	    sqlite3_prepare_v2(db, "INSERT INTO jfs_edge (parent,name,inode,type) VALUES (?,?,?,?)",
			       -1, &ed, NULL) ||
	    sqlite3_prepare_v2(db, "INSERT INTO jfs_chunk (inode,indx,slices) VALUES (?,?,?)", -1,
			       &ch, NULL))
		fail_msg("prepare: %s", sqlite3_errmsg(db));
	/* the chain /c/c/.../c */
	for (uint64_t i = 0; i < CHAIN; i++) {
		uint64_t ino = CHAIN0 + i, parent = i ? ino - 1 : 1;

		node(n, ino, JO_TYPE_DIR, 4096, 2, parent);
		edge(ed, parent, "c", ino, JO_TYPE_DIR);
	}
	node(n, BIGDIR, JO_TYPE_DIR, 4096, 2, 1);
	edge(ed, 1, "big", BIGDIR, JO_TYPE_DIR);
	for (uint64_t i = 0; i < BIG; i++) {
		snprintf(name, sizeof(name), "f%06llu", (unsigned long long)i);
		node(n, BIG0 + i, JO_TYPE_FILE, i, 1, BIGDIR);
		edge(ed, BIGDIR, name, BIG0 + i, JO_TYPE_FILE);
	}
	node(n, BIG2, JO_TYPE_DIR, 4096, 2, 1);
	edge(ed, 1, "big2", BIG2, JO_TYPE_DIR);
	node(n, HARD, JO_TYPE_FILE, 5, 2, 0);
	edge(ed, 1, "h1", HARD, JO_TYPE_FILE);
	edge(ed, BIG2, "h2", HARD, JO_TYPE_FILE);
	node(n, HOUR, JO_TYPE_DIR, 4096, 2, JO_TRASH_INODE);
	edge(ed, JO_TRASH_INODE, "2026-12-03-10", HOUR, JO_TYPE_DIR);
	node(n, GONE, JO_TYPE_FILE, 7, 1, HOUR);
	edge(ed, HOUR, "1-70-gone", GONE, JO_TYPE_FILE);
	node(n, OPEN, JO_TYPE_FILE, 9, 0, 1);
	node(n, ORPHAN, JO_TYPE_FILE, 11, 1, 1);
	exec_sql(db, "INSERT INTO jfs_sustained (sid, inode) VALUES (3, 80)");
	node(n, FRAG, JO_TYPE_FILE, (64ULL << 20) + 10, 1, 1);
	edge(ed, 1, "frag", FRAG, JO_TYPE_FILE);
	/* chunk 0: slice 5 written, overwritten by 6, cut by a hole, 5 again */
	put_rec(recs, 0, 5, 1000, 0, 1000);
	put_rec(recs + 24, 0, 6, 500, 0, 500);
	put_rec(recs + 48, 600, 0, 0, 0, 10);
	put_rec(recs + 72, 700, 5, 1000, 700, 300);
	sqlite3_bind_int64(ch, 1, FRAG);
	sqlite3_bind_int(ch, 2, 0);
	sqlite3_bind_blob(ch, 3, recs, sizeof(recs), SQLITE_TRANSIENT);
	if (sqlite3_step(ch) != SQLITE_DONE)
		fail_msg("chunk 0");
	sqlite3_reset(ch);
	put_rec(recs, 0, 9, 10, 0, 10);
	sqlite3_bind_int64(ch, 1, FRAG);
	sqlite3_bind_int(ch, 2, 1);
	sqlite3_bind_blob(ch, 3, recs, 24, SQLITE_TRANSIENT);
	if (sqlite3_step(ch) != SQLITE_DONE)
		fail_msg("chunk 1");
	sqlite3_finalize(n);
	sqlite3_finalize(ed);
	sqlite3_finalize(ch);
	exec_sql(db, "COMMIT");
	sqlite3_close(db);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	wu_fx_rmdir(dir);
	return 0;
}

struct seen {
	uint64_t rows, tree, trash, open, chain, big, big_bytes, slices;
	uint32_t max_depth;
	size_t max_path;
	uint64_t last_ino;
	int hard_links, frag;
	bool root, ordered;
};

static int on_row(const struct jo_walk_row *r, void *p)
{
	struct seen *s = p;

	s->rows++;
	if (r->ino < s->last_ino)
		s->ordered = false;
	s->last_ino = r->ino;
	/* the name is the path's last component */
	assert_true(r->name_len <= r->path_len);
	assert_ptr_equal(r->name + r->name_len, r->path + r->path_len);
	if (r->where == JO_WALK_IN_TRASH) {
		s->trash++;
		if (r->ino == GONE) {
			assert_int_equal(r->path_len, strlen("/.trash/2026-12-03-10/1-70-gone"));
			assert_memory_equal(r->path, "/.trash/2026-12-03-10/1-70-gone", r->path_len);
			assert_int_equal(r->parent, HOUR);
			assert_int_equal(r->depth, 2);
		}
		return 0;
	}
	if (r->where == JO_WALK_OPEN_UNLINKED) {
		s->open++;
		assert_int_equal(r->ino, OPEN);
		assert_int_equal(r->path_len, 0);
		assert_int_equal(r->attr.length, 9);
		return 0;
	}
	s->tree++;
	assert_int_not_equal(r->ino, ORPHAN);
	if (r->depth > s->max_depth)
		s->max_depth = r->depth;
	if (r->path_len > s->max_path)
		s->max_path = r->path_len;
	if (r->ino == 1) {
		s->root = true;
		assert_int_equal(r->path_len, 1);
		assert_int_equal(r->name_len, 0);
		assert_int_equal(r->depth, 0);
	} else if (r->ino >= CHAIN0 && r->ino < CHAIN0 + CHAIN) {
		s->chain++;
		assert_int_equal(r->depth, r->ino - CHAIN0 + 1);
		assert_int_equal(r->path_len, 2 * r->depth);
		assert_int_equal(r->name_len, 1);
		assert_int_equal(r->parent, r->depth == 1 ? 1 : r->ino - 1);
	} else if (r->ino >= BIG0 && r->ino < BIG0 + BIG) {
		char want[32];

		s->big++;
		s->big_bytes += r->attr.length;
		snprintf(want, sizeof(want), "/big/f%06llu", (unsigned long long)(r->ino - BIG0));
		assert_int_equal(r->path_len, strlen(want));
		assert_memory_equal(r->path, want, r->path_len);
		assert_int_equal(r->parent, BIGDIR);
		assert_int_equal(r->attr.uid, 7);
		assert_int_equal(r->attr.gid, 8);
	} else if (r->ino == HARD) {
		/* one row per path, (parent, path) order: /h1 under 1, then /big2/h2 */
		if (s->hard_links == 0) {
			assert_int_equal(r->link, 0);
			assert_int_equal(r->parent, 1);
			assert_memory_equal(r->path, "/h1", 3);
		} else {
			assert_int_equal(r->link, 1);
			assert_int_equal(r->parent, BIG2);
			assert_int_equal(r->path_len, 8);
			assert_memory_equal(r->path, "/big2/h2", 8);
			assert_memory_equal(r->name, "h2", 2);
		}
		assert_int_equal(r->attr.nlink, 2);
		s->hard_links++;
	} else if (r->ino == FRAG) {
		s->frag++;
		assert_int_equal(r->chunks, 2);
		assert_int_equal(r->slice_records, 4);  /* 5, 6, 5 and 9; the hole is not one */
		assert_int_equal(r->stored_bytes, 1000 + 500 + 10);
	}
	return 0;
}

static int on_slice(uint64_t ino, enum jo_walk_where where, uint32_t indx, uint32_t pos,
		    uint64_t id, uint32_t size, uint32_t off, uint32_t len, void *p)
{
	struct seen *s = p;

	assert_int_equal(ino, FRAG);
	assert_int_equal(where, JO_WALK_IN_TREE);
	if (s->slices == 3) {
		assert_int_equal(indx, 0);
		assert_int_equal(pos, 700);
		assert_int_equal(id, 5);
		assert_int_equal(size, 1000);
		assert_int_equal(off, 700);
		assert_int_equal(len, 300);
	}
	if (s->slices == 4) {
		assert_int_equal(indx, 1);
		assert_int_equal(id, 9);
	}
	s->slices++;
	return 0;
}

static void test_walk_shapes_bounded(void **state)
{
	struct jo_meta *m = meta_open_ok(url);
	struct jo_err err = { 0 };
	struct jo_walk_opts o = JO_WALK_OPTS_INIT;
	struct jo_walk_stats st;
	struct seen s = { .ordered = true };

	(void)state;
	o.flags = JO_WALK_SLICES | JO_WALK_TRASH | JO_WALK_SUSTAINED;
	o.mem_limit = 4u << 20;
	o.row = on_row;
	o.slice = on_slice;
	o.payload = &s;
	if (jo_walk_run(m, &o, &st, &err))
		fail_msg("walk: %s", err.msg);
	assert_true(s.ordered);
	assert_true(s.root);
	assert_int_equal(s.chain, CHAIN);
	assert_int_equal(s.max_depth, CHAIN);
	assert_int_equal(s.max_path, 2 * CHAIN);
	assert_int_equal(s.big, BIG);
	assert_int_equal(s.big_bytes, (uint64_t)BIG * (BIG - 1) / 2);
	assert_int_equal(s.hard_links, 2);
	assert_int_equal(s.frag, 1);
	assert_int_equal(s.slices, 5);  /* every record of the inode, holes too */
	assert_int_equal(s.trash, 2);   /* the hour directory and its file */
	assert_int_equal(s.open, 1);
	/* root, chain, /big, its files, /big2, two links, /frag */
	assert_int_equal(s.tree, 1 + CHAIN + 1 + BIG + 1 + 2 + 1);
	assert_int_equal(st.rows, s.rows);
	assert_true(st.point_in_time);
	assert_int_equal(st.vanished, 0);
	/* every directory listed once: root, chain, /big, /big2 (+ trash root, hour) */
	assert_int_equal(st.dirs_read, 1 + CHAIN + 2 + 2);
	/* the sorts spilled, and their buffers stayed within the budget */
	assert_true(st.tmp_bytes > 0);
	assert_true(st.peak_sort_mem <= (1u << 20) + (256u << 10));
	jo_meta_close(m);
}

static int count_row(const struct jo_walk_row *r, void *p)
{
	(*(uint64_t *)p)++;
	assert_true(r->path_len >= 4);
	assert_memory_equal(r->path, "/big", 4);
	return 0;
}

static int stop_row(const struct jo_walk_row *r, void *p)
{
	(void)r;
	return ++(*(uint64_t *)p) == 10 ? 42 : 0;
}

static void test_walk_subtree_and_errors(void **state)
{
	struct jo_meta *m = meta_open_ok(url);
	struct jo_err err = { 0 };
	struct jo_walk_opts o = JO_WALK_OPTS_INIT;
	uint64_t n = 0;

	(void)state;
	o.root = "//big/";
	o.row = count_row;
	o.payload = &n;
	assert_int_equal(jo_walk_run(m, &o, NULL, &err), 0);
	assert_int_equal(n, BIG + 1);
	o.root = "/nope";
	assert_int_equal(jo_walk_run(m, &o, NULL, &err), JO_ENOTFOUND);
	assert_non_null(strstr(err.msg, "/nope"));
	o.root = "/h1";
	assert_int_equal(jo_walk_run(m, &o, NULL, &err), JO_EINVAL);
	/* a callback's non-zero value stops the walk and comes back */
	o.root = "/";
	o.row = stop_row;
	n = 0;
	assert_int_equal(jo_walk_run(m, &o, NULL, &err), 42);
	assert_int_equal(n, 10);
	jo_meta_close(m);
}

/* usage's bottom-up fold on the same shapes: the chain 10,000 levels deep is
 * folded level by level, the totals come out as a walk of the tree counts */
static void test_usage_fold_bounded(void **state)
{
	struct jo_meta *m = meta_open_ok(url);
	struct jo_err err = { 0 };
	struct usage_opts o = { .depth = 1, .top = 3, .cold = 90 * 86400, .mem_limit = 8u << 20,
				.now = 1700000000LL + 2000000 };
	struct usage_report r;
	const struct usage_dir *d;
	uint64_t big_bytes = (uint64_t)BIG * (BIG - 1) / 2, frag = (64ULL << 20) + 10;
	int n = 0, rc;

	(void)state;
	assert_int_equal(usage_parse_buckets("1d,30d", &o, &err), 0);
	if (usage_run(m, &o, &r, &err))
		fail_msg("usage: %s", err.msg);
	/* every file counted per path: the big files, both links, /frag */
	assert_int_equal(r.total.files, BIG + 2 + 1);
	assert_int_equal(r.total.dirs, 1 + CHAIN + 2);
	assert_int_equal(r.total.bytes, big_bytes + 2 * 5 + frag);
	assert_int_equal(r.trash_files, 1);
	assert_int_equal(r.trash_bytes, 7);
	assert_int_equal(r.open_files, 1);
	assert_int_equal(r.open_bytes, 9);
	/* ages: inode i's times are 1700000000 + i; now is 2,000,000 s later:
	 * every inode below 100000 is 23+ days old, the big files 30+ for most */
	assert_int_equal(r.total.access[0], 0);
	assert_int_equal(r.total.access[0] + r.total.access[1] + r.total.access[2],
			 r.total.bytes);
	while ((rc = usage_next_dir(&r, &d, &err)) == 1) {
		/* depth <= 1, in tree order: /, /big, /big2, /c */
		static const char *want[] = { "/", "/big", "/big2", "/c" };

		assert_true(n < 4);
		assert_int_equal(d->path_len, strlen(want[n]));
		assert_memory_equal(d->path, want[n], d->path_len);
		if (n == 1) {
			assert_int_equal(d->t.files, BIG);
			assert_int_equal(d->t.bytes, big_bytes);
			assert_int_equal(d->t.dirs, 1);
		}
		if (n == 3) {
			assert_int_equal(d->t.dirs, CHAIN);
			assert_int_equal(d->t.files, 0);
			assert_int_equal(d->t.space, (uint64_t)CHAIN * 4096);
		}
		n++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(n, 4);
	/* below depth 1 only the chain: its top, with the most directories, is
	 * not bigger in bytes (all 0): ties go by path, the shortest first */
	assert_int_equal(r.ntop_dirs, 3);
	assert_int_equal(r.top_dirs[0].depth, 2);
	assert_int_equal(r.ntop_files, 3);
	assert_int_equal(r.top_files[0].bytes, frag);
	assert_int_equal(r.top_files[1].bytes, BIG - 1);
	usage_report_release(&r);
	jo_meta_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_shapes_bounded),
		cmocka_unit_test(test_walk_subtree_and_errors),
		cmocka_unit_test(test_usage_fold_bounded),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
