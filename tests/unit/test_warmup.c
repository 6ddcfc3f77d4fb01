/*
 * Unit tests for common/warmup: range-list parsing, the byte range -> block
 * mapping (pure and through an SQLite volume made by the real juicefs), the
 * read plan per mount configuration, and the mount helpers on plain files.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/warmup/warmup.h"
#include "support/wu_fixture.h"
#include "support/testutil.h"

#define MiB (1u << 20)
#define KiB (1u << 10)

/* ---------------------------------------------------------------- helpers */

struct blocks {
	struct jo_warmup_block v[64];
	size_t n;
};

static int collect_block(const struct jo_warmup_block *b, void *payload)
{
	struct blocks *bl = payload;

	assert_true(bl->n < 64);
	bl->v[bl->n++] = *b;
	return 0;
}

static void visible(const struct jo_slice *recs, size_t n, struct jo_slice **vis, size_t *nvis)
{
	assert_int_equal(jo_chunk_visible(recs, n, vis, nvis), 0);
}

static void expect_block(const struct jo_warmup_block *b, uint64_t id, uint32_t indx,
			 uint32_t bsize, uint32_t boff, uint32_t blen, int kind, uint64_t anchor)
{
	assert_true(b->id == id);
	assert_int_equal(b->indx, indx);
	assert_int_equal(b->bsize, bsize);
	assert_int_equal(b->boff, boff);
	assert_int_equal(b->blen, blen);
	assert_int_equal(b->anchor_kind, kind);
	assert_true(b->anchor == anchor);
}

/* ---------------------------------------------------------------- mapping */

/* The worked example of spec §8.2. */
static void map_follows_spec_example(void **state)
{
	struct jo_slice rec = { .pos = 0, .id = 5000123, .size = 64 * MiB, .off = 0, .len = 64 * MiB };
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(&rec, 1, &vis, &nvis);
	/* file [70 MiB, 75 MiB) = chunk 1 [6 MiB, 11 MiB) */
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 1, 128ull * MiB, 6 * MiB, 11 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 2);
	expect_block(&bl.v[0], 5000123, 1, 4 * MiB, 2 * MiB, 2 * MiB, JO_WARMUP_AT_START,
		     64ull * MiB + 4 * MiB);
	expect_block(&bl.v[1], 5000123, 2, 4 * MiB, 0, 3 * MiB, JO_WARMUP_AT_START,
		     64ull * MiB + 8 * MiB);
	free(vis);
}

static void map_skips_holes(void **state)
{
	/* a hole record over [0, 1M), then data from 1M */
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 0, .size = 0, .off = 0, .len = 1 * MiB },
		{ .pos = 1 * MiB, .id = 7, .size = 3 * MiB, .off = 0, .len = 3 * MiB },
	};
	struct jo_slice gap = { .pos = 2 * MiB, .id = 8, .size = 1 * MiB, .off = 0, .len = 1 * MiB };
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(recs, 2, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 4 * MiB, 0, 2 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 7, 0, 3 * MiB, 0, 1 * MiB, JO_WARMUP_AT_START, 1 * MiB);
	free(vis);

	/* an implicit gap (never written) before a record: zeros, no block */
	bl.n = 0;
	visible(&gap, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 3 * MiB, 0, 2 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 0);
	free(vis);
}

static void map_overwrite_goes_to_newer_slice(void **state)
{
	/* slice 10 (8M) at 0, then slice 11 (2M) written over [4M, 6M) */
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 10, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
		{ .pos = 4 * MiB, .id = 11, .size = 2 * MiB, .off = 0, .len = 2 * MiB },
	};
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(recs, 2, &vis, &nvis);
	/* the overwritten region: only the newer slice */
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 8 * MiB, 4 * MiB, 5 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 11, 0, 2 * MiB, 0, 1 * MiB, JO_WARMUP_AT_START, 4 * MiB);

	/* after the overwrite: slice 10 block 1, whose first byte (4M) is hidden */
	bl.n = 0;
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 8 * MiB, 6 * MiB, 7 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 10, 1, 4 * MiB, 2 * MiB, 1 * MiB, JO_WARMUP_PARTIAL, 6 * MiB);

	/* across all three segments */
	bl.n = 0;
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 8 * MiB, 3 * MiB, 7 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 3);
	expect_block(&bl.v[0], 10, 0, 4 * MiB, 3 * MiB, 1 * MiB, JO_WARMUP_AT_ZERO, 0);
	assert_true(bl.v[0].alt == 1);
	expect_block(&bl.v[1], 11, 0, 2 * MiB, 0, 2 * MiB, JO_WARMUP_AT_START, 4 * MiB);
	expect_block(&bl.v[2], 10, 1, 4 * MiB, 2 * MiB, 1 * MiB, JO_WARMUP_PARTIAL, 6 * MiB);
	free(vis);
}

static void map_finds_block_start_in_another_segment(void **state)
{
	/* slice 20 (8M), then slice 21 over [5M, 6M): slice 20 block 1 starts at 4M */
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 20, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
		{ .pos = 5 * MiB, .id = 21, .size = 1 * MiB, .off = 0, .len = 1 * MiB },
	};
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(recs, 2, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 8 * MiB, 6 * MiB + 5, 6 * MiB + 6,
					     4 * MiB, collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 20, 1, 4 * MiB, 2 * MiB + 5, 1, JO_WARMUP_AT_START, 4 * MiB);
	free(vis);
}

static void map_crosses_block_boundaries_of_unaligned_slice(void **state)
{
	/* 1 MiB blocks, a 3 MiB slice written at chunk position 512K */
	struct jo_slice rec = { .pos = 512 * KiB, .id = 9, .size = 3 * MiB, .off = 0, .len = 3 * MiB };
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(&rec, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 4 * MiB, 1 * MiB, 2 * MiB + 1, 1 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 2);
	expect_block(&bl.v[0], 9, 0, 1 * MiB, 512 * KiB, 512 * KiB, JO_WARMUP_AT_START, 512 * KiB);
	expect_block(&bl.v[1], 9, 1, 1 * MiB, 0, 512 * KiB + 1, JO_WARMUP_AT_START,
		     512 * KiB + 1 * MiB);
	free(vis);
}

static void map_stops_at_file_length(void **state)
{
	/* the slice is longer than the (truncated) file */
	struct jo_slice rec = { .pos = 0, .id = 30, .size = 10 * MiB, .off = 0, .len = 10 * MiB };
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(&rec, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 4 * MiB + 10, 4 * MiB, 10 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 30, 1, 4 * MiB, 0, 10, JO_WARMUP_AT_START, 4 * MiB);
	/* a chunk past the end maps nothing */
	bl.n = 0;
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 1, 4 * MiB + 10, 0, 1 * MiB, 4 * MiB,
					     collect_block, &bl), 0);
	assert_int_equal(bl.n, 0);
	free(vis);
}

static void map_zero_anchor_has_alternative(void **state)
{
	struct jo_slice rec = { .pos = 0, .id = 40, .size = 5, .off = 0, .len = 5 };
	struct jo_slice one = { .pos = 0, .id = 41, .size = 1, .off = 0, .len = 1 };
	struct jo_slice *vis;
	size_t nvis;
	struct blocks bl = { 0 };

	(void)state;
	visible(&rec, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 5, 2, 3, 4 * MiB, collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 40, 0, 5, 2, 1, JO_WARMUP_AT_ZERO, 0);
	assert_true(bl.v[0].alt == 1);
	free(vis);

	bl.n = 0;
	visible(&one, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 1, 0, 1, 4 * MiB, collect_block, &bl), 0);
	assert_int_equal(bl.n, 1);
	assert_int_equal(bl.v[0].anchor_kind, JO_WARMUP_AT_ZERO);
	assert_true(bl.v[0].alt == JO_WARMUP_NONE);
	free(vis);
}

static int stop_at_first(const struct jo_warmup_block *b, void *payload)
{
	(void)b;
	(*(int *)payload)++;
	return 42;
}

static void map_stops_when_callback_says_so(void **state)
{
	struct jo_slice rec = { .pos = 0, .id = 50, .size = 12 * MiB, .off = 0, .len = 12 * MiB };
	struct jo_slice *vis;
	size_t nvis;
	int calls = 0;

	(void)state;
	visible(&rec, 1, &vis, &nvis);
	assert_int_equal(jo_warmup_map_chunk(vis, nvis, 0, 12 * MiB, 0, 12 * MiB, 4 * MiB,
					     stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);
	free(vis);
}

/* ------------------------------------------- mapper over a real SQLite volume */

static char vdir[256], vurl[512];

static void put_rec(uint8_t *p, const struct jo_slice *s)
{
	jo_slice_encode(s, p);
}

/* Replace the chunks of inode ino with the given records and set its length. */
static void set_chunks(sqlite3 *db, uint64_t ino, uint64_t length, uint32_t indx,
		       const struct jo_slice *recs, size_t n)
{
	sqlite3_stmt *st;
	uint8_t buf[24 * 8];
	char sql[256];

	assert_true(n <= 8);
	for (size_t i = 0; i < n; i++)
		put_rec(buf + 24 * i, &recs[i]);
	snprintf(sql, sizeof(sql), "UPDATE jfs_node SET length=%llu WHERE inode=%llu",
		 (unsigned long long)length, (unsigned long long)ino);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql), "DELETE FROM jfs_chunk WHERE inode=%llu AND indx=%u",
		 (unsigned long long)ino, indx);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO jfs_chunk(inode, indx, slices) "
					    "VALUES(?, ?, ?)", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(st, 2, indx);
	sqlite3_bind_blob(st, 3, buf, (int)(24 * n), SQLITE_TRANSIENT);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
}

static int vol_setup(void **state)
{
	char jfs[1024];

	(void)state;
	if (wu_fx_juicefs_check(jfs, sizeof(jfs)) != 0)
		return -1;
	if (wu_fx_tmpdir("warmup", vdir, sizeof(vdir), vurl, sizeof(vurl)) != 0)
		return -1;
	wu_fx_sh("mkdir -p %s/src && printf hello > %s/src/f", vdir, vdir);
	wu_fx_format_sync(jfs, vurl, vdir);
	return 0;
}

static int vol_teardown(void **state)
{
	(void)state;
	wu_fx_rmdir(vdir);
	return 0;
}

static void mapper_crosses_chunks_and_reuses_chunk(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_warmup_mapper *mp = NULL;
	struct jo_err err = { 0 };
	struct blocks bl = { 0 };
	sqlite3 *db;
	char path[300];
	uint64_t ino;
	struct jo_slice c0 = { .pos = 0, .id = 100, .size = 64 * MiB, .off = 0, .len = 64 * MiB };
	struct jo_slice c1[] = {
		{ .pos = 0, .id = 101, .size = 10 * MiB, .off = 0, .len = 10 * MiB },
		{ .pos = 1 * MiB, .id = 0, .size = 0, .off = 0, .len = 1 * MiB },  /* punched hole */
	};
	uint64_t flen = 64ull * MiB + 10 * MiB;

	(void)state;
	assert_int_equal(jo_meta_open(&m, vurl, &err), 0);
	assert_int_equal(jo_meta_resolve(m, "/f", &ino, &err), 0);
	snprintf(path, sizeof(path), "%s/m.db", vdir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	set_chunks(db, ino, flen, 0, &c0, 1);
	set_chunks(db, ino, flen, 1, c1, 2);
	sqlite3_close(db);

	assert_int_equal(jo_warmup_mapper_new(&mp, m, 4 * MiB, &err), 0);
	/* [60M, 66M): slice 100 block 15 and slice 101 block 0 */
	assert_int_equal(jo_warmup_map_range(mp, ino, flen, 60ull * MiB, 6 * MiB, collect_block,
					     &bl, &err), 0);
	assert_int_equal(bl.n, 2);
	expect_block(&bl.v[0], 100, 15, 4 * MiB, 0, 4 * MiB, JO_WARMUP_AT_START, 60ull * MiB);
	expect_block(&bl.v[1], 101, 0, 4 * MiB, 0, 1 * MiB, JO_WARMUP_AT_START, 64ull * MiB);
	assert_int_equal(jo_warmup_mapper_chunk_reads(mp), 2);

	/* the hole at chunk 1 [1M, 2M) needs nothing; [2M, 3M) is block 0 of 101
	 * again, but its first byte is still visible at 64M */
	bl.n = 0;
	assert_int_equal(jo_warmup_map_range(mp, ino, flen, 65ull * MiB, 2 * MiB, collect_block,
					     &bl, &err), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 101, 0, 4 * MiB, 2 * MiB, 1 * MiB, JO_WARMUP_AT_START, 64ull * MiB);
	/* same chunk as the last read: no second metadata read */
	assert_int_equal(jo_warmup_mapper_chunk_reads(mp), 2);

	/* past the end of the file: nothing, clamped */
	bl.n = 0;
	assert_int_equal(jo_warmup_map_range(mp, ino, flen, flen, 100, collect_block, &bl, &err), 0);
	assert_int_equal(bl.n, 0);
	assert_int_equal(jo_warmup_map_range(mp, ino, flen, flen - 1, UINT64_MAX, collect_block,
					     &bl, &err), 0);
	assert_int_equal(bl.n, 1);
	expect_block(&bl.v[0], 101, 2, 2 * MiB, 2 * MiB - 1, 1, JO_WARMUP_AT_START,
		     64ull * MiB + 8 * MiB);

	jo_warmup_mapper_free(mp);
	jo_meta_close(m);
}

/*
 * Every block of every slice the file shows (what a mount evicts for the
 * whole file): a block a later slice hides completely comes as HIDDEN.
 */
static void file_blocks_lists_whole_slices(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_warmup_mapper *mp = NULL;
	struct jo_err err = { 0 };
	struct blocks bl = { 0 };
	struct jo_warmup_block b;
	struct jo_warmup_read rd;
	struct jo_warmup_mount mi = { .block_size = 4 * MiB, .cache_size = 1, .seekable = true,
				      .prefetch = 1, .readahead = 0 };
	sqlite3 *db;
	char path[300];
	uint64_t ino;
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 200, .size = 12 * MiB, .off = 0, .len = 12 * MiB },
		{ .pos = 4 * MiB, .id = 201, .size = 4 * MiB, .off = 0, .len = 4 * MiB },
	};
	bool seen[4] = { false };

	(void)state;
	assert_int_equal(jo_meta_open(&m, vurl, &err), 0);
	assert_int_equal(jo_meta_resolve(m, "/f", &ino, &err), 0);
	snprintf(path, sizeof(path), "%s/m.db", vdir);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	set_chunks(db, ino, 12 * MiB, 0, recs, 2);
	sqlite3_close(db);
	assert_int_equal(jo_warmup_mapper_new(&mp, m, 4 * MiB, &err), 0);
	assert_int_equal(jo_warmup_file_blocks(mp, ino, 12 * MiB, collect_block, &bl, &err), 0);
	assert_int_equal(bl.n, 4);
	for (size_t i = 0; i < bl.n; i++) {
		const struct jo_warmup_block *x = &bl.v[i];

		if (x->id == 200 && x->indx == 0) {
			assert_int_equal(x->anchor_kind, JO_WARMUP_AT_ZERO);
			seen[0] = true;
		} else if (x->id == 200 && x->indx == 1) {
			/* wholly under slice 201: no read brings it, the mount evicts it */
			assert_int_equal(x->anchor_kind, JO_WARMUP_HIDDEN);
			assert_int_equal(x->bsize, 4 * MiB);
			b = *x;
			seen[1] = true;
		} else if (x->id == 200 && x->indx == 2) {
			expect_block(x, 200, 2, 4 * MiB, 0, 4 * MiB, JO_WARMUP_AT_START, 8 * MiB);
			seen[2] = true;
		} else if (x->id == 201 && x->indx == 0) {
			expect_block(x, 201, 0, 4 * MiB, 0, 4 * MiB, JO_WARMUP_AT_START, 4 * MiB);
			seen[3] = true;
		} else {
			fail_msg("unexpected block %llu_%u", (unsigned long long)x->id, x->indx);
		}
	}
	assert_true(seen[0] && seen[1] && seen[2] && seen[3]);
	assert_int_equal(jo_warmup_plan_read(&b, &mi, &rd, &err), JO_EUNSUPPORTED);
	/* an empty file shows nothing */
	bl.n = 0;
	assert_int_equal(jo_warmup_file_blocks(mp, ino, 0, collect_block, &bl, &err), 0);
	assert_int_equal(bl.n, 0);
	jo_warmup_mapper_free(mp);
	jo_meta_close(m);
}

/* ---------------------------------------------------------------- parsing */

struct ranges {
	char path[8][128];
	uint64_t off[8], len[8];
	size_t n;
};

static int collect_range(const char *path, uint64_t off, uint64_t len, void *payload)
{
	struct ranges *r = payload;

	assert_true(r->n < 8);
	snprintf(r->path[r->n], sizeof(r->path[0]), "%s", path);
	r->off[r->n] = off;
	r->len[r->n] = len;
	r->n++;
	return 0;
}

static struct ranges parse_ok(const char *line, bool want_skip)
{
	struct ranges r = { 0 };
	struct jo_err err = { 0 };
	bool skipped = !want_skip;

	if (jo_warmup_parse_line(line, strlen(line), collect_range, &r, &skipped, &err) != 0)
		fail_msg("'%s' did not parse: %s", line, err.msg);
	assert_true(skipped == want_skip);
	return r;
}

static void parse_fail(const char *line, const char *msg_part)
{
	struct ranges r = { 0 };
	struct jo_err err = { 0 };

	assert_int_equal(jo_warmup_parse_line(line, strlen(line), collect_range, &r, NULL, &err),
			 JO_EINVAL);
	if (!strstr(err.msg, msg_part))
		fail_msg("'%s': message '%s' lacks '%s'", line, err.msg, msg_part);
}

static void parse_accepts_every_form(void **state)
{
	struct ranges r;

	(void)state;
	r = parse_ok("{\"type\":\"range\",\"file\":\"data/a.lance\",\"offset\":10,\"length\":20,"
		     "\"kind\":\"data\"}\n", false);
	assert_int_equal(r.n, 1);
	assert_string_equal(r.path[0], "data/a.lance");
	assert_true(r.off[0] == 10 && r.len[0] == 20);

	r = parse_ok("{\"path\":\"x y\",\"offset\":0,\"length\":1}", false);
	assert_string_equal(r.path[0], "x y");

	r = parse_ok("data/b.lance,4096,100\r\n", false);
	assert_string_equal(r.path[0], "data/b.lance");
	assert_true(r.off[0] == 4096 && r.len[0] == 100);

	r = parse_ok("\"we,ird \"\"name\"\"\",1,2", false);
	assert_string_equal(r.path[0], "we,ird \"name\"");
	assert_true(r.off[0] == 1 && r.len[0] == 2);

	r = parse_ok("/mnt/jfs/ds/data/c.lance [0-100;200-250;300-300]", false);
	assert_int_equal(r.n, 2); /* the empty range is dropped */
	assert_string_equal(r.path[0], "/mnt/jfs/ds/data/c.lance");
	assert_true(r.off[0] == 0 && r.len[0] == 100);
	assert_true(r.off[1] == 200 && r.len[1] == 50);

	r = parse_ok("my file.bin [5-6]", false);
	assert_string_equal(r.path[0], "my file.bin");

	r = parse_ok("old/form.bin 10-20;30-40", false);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.path[0], "old/form.bin");
	assert_true(r.off[1] == 30 && r.len[1] == 10);

	r = parse_ok("  plain/file 18446744073709551615 0  ", false);
	assert_string_equal(r.path[0], "plain/file");
	assert_true(r.off[0] == UINT64_MAX && r.len[0] == 0);

	r = parse_ok("whole/file.bin", false);
	assert_string_equal(r.path[0], "whole/file.bin");
	assert_true(r.off[0] == 0 && r.len[0] == JO_WARMUP_WHOLE);
}

static void parse_skips_non_ranges(void **state)
{
	struct ranges r;

	(void)state;
	r = parse_ok("", true);
	assert_int_equal(r.n, 0);
	r = parse_ok("   \n", true);
	r = parse_ok("# a comment", true);
	r = parse_ok("file,offset,length", true);
	r = parse_ok("{\"type\":\"summary\",\"ranges\":3}", true);
	assert_int_equal(r.n, 0);
}

static void parse_rejects_malformed_lines(void **state)
{
	(void)state;
	parse_fail("{\"file\":\"a\",\"offset\":1}", "length");
	parse_fail("{\"file\":\"a\",\"offset\":-1,\"length\":1}", "offset");
	parse_fail("{\"offset\":1,\"length\":1}", "file");
	parse_fail("{broken", "JSON");
	parse_fail("[1,2]", "");
	parse_fail("a [1-x]", "bad range");
	parse_fail("a [5-3]", "ends before");
	parse_fail("a []", "empty");
	parse_fail("a [1-2;]", "empty range");
	parse_fail("a,b,c", "decimal");
	parse_fail("a,1,99999999999999999999", "decimal");
	parse_fail("\"a,1,2", "unterminated");
	parse_fail("\",1,2", "unterminated");
	parse_fail("a 12", "one number");
	parse_fail("a 1-2;3", "bad range");
}

/* ------------------------------------------------------------- read plans */

static void plan_reads_for_each_mount_kind(void **state)
{
	struct jo_warmup_mount mi = { .block_size = 4 * MiB, .cache_size = 1ull << 30,
				      .cache_full_block = true, .seekable = true, .prefetch = 1,
				      .readahead = 32 * MiB };
	struct jo_warmup_block start = { .anchor_kind = JO_WARMUP_AT_START, .anchor = 8 * MiB,
					 .alt = JO_WARMUP_NONE };
	struct jo_warmup_block zero = { .anchor_kind = JO_WARMUP_AT_ZERO, .anchor = 0, .alt = 1 };
	struct jo_warmup_block part = { .anchor_kind = JO_WARMUP_PARTIAL, .anchor = 6 * MiB,
					.alt = JO_WARMUP_NONE };
	struct jo_warmup_read rd;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_warmup_plan_read(&start, &mi, &rd, &err), 0);
	assert_true(rd.off == 8 * MiB && !rd.confirm);

	/* offset 0 would start readahead: ranged read at 1 + the prefetcher */
	assert_int_equal(jo_warmup_plan_read(&zero, &mi, &rd, &err), 0);
	assert_true(rd.off == 1 && rd.confirm);
	assert_int_equal(jo_warmup_plan_read(&part, &mi, &rd, &err), 0);
	assert_true(rd.off == 6 * MiB && rd.confirm);

	/* no prefetch: offset 0 it is; a hidden block start cannot be cached */
	mi.prefetch = 0;
	assert_int_equal(jo_warmup_plan_read(&zero, &mi, &rd, &err), 0);
	assert_true(rd.off == 0 && !rd.confirm);
	assert_int_equal(jo_warmup_plan_read(&part, &mi, &rd, &err), JO_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "prefetch"));

	/* no readahead: offset 0 is harmless */
	mi.prefetch = 1;
	mi.readahead = 0;
	assert_int_equal(jo_warmup_plan_read(&zero, &mi, &rd, &err), 0);
	assert_true(rd.off == 0 && !rd.confirm);

	/* compressed volume: every read loads the whole block */
	mi.readahead = 32 * MiB;
	mi.seekable = false;
	mi.prefetch = 0;
	assert_int_equal(jo_warmup_plan_read(&zero, &mi, &rd, &err), 0);
	assert_true(rd.off == 1 && !rd.confirm);
	assert_int_equal(jo_warmup_plan_read(&part, &mi, &rd, &err), 0);
	assert_true(rd.off == 6 * MiB && !rd.confirm);
}

/* --------------------------------------------------------- mount helpers */

static void write_file(const char *dir, const char *name, const char *text)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	tu_write_text(p, text);
}

static void mount_probe_and_stats_read_control_files(void **state)
{
	char dir[] = "/tmp/jo-test-warmup-mp.XXXXXX";
	char p[512];
	struct jo_warmup_mount mi;
	struct jo_warmup_counters c;
	struct jo_err err = { 0 };

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(jo_warmup_mount_probe(dir, &mi, &err), JO_ENOTFOUND);
	assert_non_null(strstr(err.msg, "not a JuiceFS mount"));

	write_file(dir, ".config", "{\"Meta\":{\"Subdir\":\"ds\"},\"Format\":{\"Name\":\"v\","
		   "\"UUID\":\"u-1\",\"EncryptKey\":\"\"},\"Chunk\":{\"BlockSize\":4194304,"
		   "\"CacheSize\":1073741824,\"CacheFullBlock\":true,\"Compress\":\"none\","
		   "\"Prefetch\":1,\"Readahead\":33554432}}");
	assert_int_equal(jo_warmup_mount_probe(dir, &mi, &err), 0);
	assert_string_equal(mi.uuid, "u-1");
	assert_string_equal(mi.name, "v");
	assert_string_equal(mi.subdir, "ds");
	assert_int_equal(mi.block_size, 4 * MiB);
	assert_true(mi.cache_size == 1ull << 30);
	assert_true(mi.cache_full_block && mi.seekable);
	assert_int_equal(mi.prefetch, 1);
	assert_true(mi.readahead == 32 * MiB);
	snprintf(p, sizeof(p), "%s/.stats", dir);
	assert_string_equal(mi.stats_path, p);
	jo_warmup_mount_release(&mi);

	write_file(dir, ".config", "{\"Format\":{\"UUID\":\"u\",\"EncryptKey\":\"removed\"},"
		   "\"Chunk\":{\"Compress\":\"lz4\"}}");
	assert_int_equal(jo_warmup_mount_probe(dir, &mi, &err), 0);
	assert_false(mi.seekable);
	jo_warmup_mount_release(&mi);

	write_file(dir, ".config", "not json");
	assert_int_equal(jo_warmup_mount_probe(dir, &mi, &err), JO_EPROTO);

	write_file(dir, ".stats", "juicefs_uptime 12.5\n"
		   "juicefs_object_request_durations_histogram_seconds_GET_total 3\n"
		   "juicefs_object_request_durations_histogram_seconds_GET_total 2\n"
		   "juicefs_object_request_durations_histogram_seconds_GET_sum 0.25\n"
		   "juicefs_object_request_data_bytes_GET 8388609\n"
		   "juicefs_blockcache_hits 7\n");
	assert_int_equal(jo_warmup_mount_stats(p, &c, &err), 0);
	assert_true(c.gets == 5);
	assert_true(c.get_bytes == 8388609);
	assert_true(c.cache_hits == 7);

	/* read_byte on a local file (O_DIRECT refused or unaligned: falls back) */
	write_file(dir, "data", "abc");
	snprintf(p, sizeof(p), "%s/data", dir);
	assert_int_equal(jo_warmup_read_byte(p, 2, &err), 0);
	assert_int_equal(jo_warmup_read_byte(p, 3, &err), JO_EPROTO);
	snprintf(p, sizeof(p), "%s/missing", dir);
	assert_int_equal(jo_warmup_read_byte(p, 0, &err), JO_ENOTFOUND);
	wu_fx_sh("rm -rf %s", dir);
}

static void fetcher_reads_and_counts_failures(void **state)
{
	char dir[] = "/tmp/jo-test-warmup-f.XXXXXX";
	char p[512], q[512];
	struct jo_warmup_fetcher *f = NULL;
	struct jo_warmup_fetch_stats fs;
	struct jo_warmup_read rd = { .off = 1, .confirm = false };
	struct jo_warmup_read rdc = { .off = 0, .confirm = true };
	struct jo_err err = { 0 };
	int fails = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	write_file(dir, "d", "xy");
	snprintf(p, sizeof(p), "%s/d", dir);
	snprintf(q, sizeof(q), "%s/nope", dir);
	assert_int_equal(jo_warmup_fetcher_new(&f, 3, 1, NULL, &fails, &err), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(jo_warmup_fetcher_add(f, p, "k", 10, i % 2 ? &rd : &rdc, &err), 0);
	assert_int_equal(jo_warmup_fetcher_add(f, q, "k2", 10, &rd, &err), 0);
	jo_warmup_fetcher_finish(f);
	jo_warmup_fetcher_stats(f, &fs);
	assert_true(fs.queued == 21);
	assert_true(fs.done == 20);
	assert_true(fs.failed == 1);
	assert_true(fs.bytes_done == 200);
	assert_true(fs.confirm_reads == 10);
	jo_warmup_fetcher_free(f);
	wu_fx_sh("rm -rf %s", dir);
}

struct done_log {
	pthread_mutex_t mu;
	int ok, bad;
	uintptr_t tags;
};

static void count_done(void *tag, int rc, const struct jo_err *err, void *payload)
{
	struct done_log *d = payload;

	pthread_mutex_lock(&d->mu);
	if (rc) {
		assert_non_null(err);
		assert_true(err->msg[0] != '\0');
		d->bad++;
	} else {
		d->ok++;
	}
	d->tags += (uintptr_t)tag;
	pthread_mutex_unlock(&d->mu);
}

/* try_add never waits: a full queue says 1; every tagged read is reported once */
static void fetcher_try_add_reports_each_read(void **state)
{
	char dir[] = "/tmp/jo-test-warmup-t.XXXXXX";
	char p[512], fifo[512], q[512];
	struct jo_warmup_fetcher *f = NULL;
	struct jo_warmup_fetch_stats fs;
	struct jo_warmup_read rd = { .off = 1, .confirm = false };
	struct done_log d = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct jo_err err = { 0 };
	int n = 0, wfd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	write_file(dir, "d", "xy");
	snprintf(p, sizeof(p), "%s/d", dir);
	snprintf(q, sizeof(q), "%s/nope", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(jo_warmup_fetcher_new(&f, 1, 1, NULL, NULL, &err), 0);
	jo_warmup_fetcher_on_done(f, count_done, &d);
	/* the one worker hangs opening a FIFO nobody writes: the queue fills */
	assert_int_equal(jo_warmup_fetcher_try_add(f, fifo, "k0", 10, &rd, (void *)1, &err), 0);
	for (int i = 0; i < 50; i++) {
		jo_warmup_fetcher_stats(f, &fs);
		if (!fs.done && !fs.failed) {
			usleep(20000);
			if (i > 5)
				break;
		}
	}
	for (;;) {
		int rc = jo_warmup_fetcher_try_add(f, p, "k", 10, &rd, (void *)2, &err);

		if (rc == 1)
			break;
		assert_int_equal(rc, 0);
		assert_true(++n <= 2); /* queue size is 2 x threads */
	}
	assert_int_equal(n, 2);
	/* writers let the worker go (reading a FIFO at an offset fails; it may
	 * open it twice, with and without O_DIRECT) */
	for (int i = 0; i < 500; i++) {
		wfd = open(fifo, O_WRONLY | O_NONBLOCK);
		if (wfd >= 0)
			close(wfd);
		jo_warmup_fetcher_stats(f, &fs);
		if (fs.done + fs.failed >= 1)
			break;
		usleep(10000);
	}
	assert_int_equal(jo_warmup_fetcher_try_add(f, q, "k2", 10, &rd, (void *)4, &err) >= 0, 1);
	jo_warmup_fetcher_finish(f);
	jo_warmup_fetcher_stats(f, &fs);
	assert_int_equal(d.ok + d.bad, (int)(fs.done + fs.failed));
	assert_int_equal(d.ok, 2);
	assert_true(d.bad >= 1);
	jo_warmup_fetcher_free(f);
	wu_fx_sh("rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(map_follows_spec_example),
		cmocka_unit_test(map_skips_holes),
		cmocka_unit_test(map_overwrite_goes_to_newer_slice),
		cmocka_unit_test(map_finds_block_start_in_another_segment),
		cmocka_unit_test(map_crosses_block_boundaries_of_unaligned_slice),
		cmocka_unit_test(map_stops_at_file_length),
		cmocka_unit_test(map_zero_anchor_has_alternative),
		cmocka_unit_test(map_stops_when_callback_says_so),
		cmocka_unit_test_setup_teardown(mapper_crosses_chunks_and_reuses_chunk, vol_setup,
						vol_teardown),
		cmocka_unit_test_setup_teardown(file_blocks_lists_whole_slices, vol_setup,
						vol_teardown),
		cmocka_unit_test(parse_accepts_every_form),
		cmocka_unit_test(parse_skips_non_ranges),
		cmocka_unit_test(parse_rejects_malformed_lines),
		cmocka_unit_test(plan_reads_for_each_mount_kind),
		cmocka_unit_test(mount_probe_and_stats_read_control_files),
		cmocka_unit_test(fetcher_reads_and_counts_failures),
		cmocka_unit_test(fetcher_try_add_reports_each_read),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
