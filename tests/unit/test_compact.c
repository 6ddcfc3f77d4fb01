/*
 * Unit tests for the compaction choice (gc/compact.c), against JuiceFS's
 * rules, and for its source (gc/compact_read.c): the bytes of the visible
 * segments, read as ranged GETs (uncompressed) or whole blocks (lz4) from a
 * real file-storage volume on SQLite.
 */
#include <setjmp.h>
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
#include "common/object/object.h"
#include "gc/compact.h"
#include "support/testutil.h"

#define MiB (1u << 20)

static void pick_merges_overlapping_records(void **state)
{
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 1, .size = 100, .off = 0, .len = 100 },
		{ .pos = 50, .id = 2, .size = 100, .off = 0, .len = 100 },
	};
	struct compact_pick p;

	(void)state;
	assert_int_equal(compact_pick(recs, 2, &p), 0);
	assert_int_equal(p.skipped, 0);
	assert_int_equal(p.ncompacted, 2);
	assert_int_equal(p.pos, 0);
	assert_int_equal(p.size, 150);
	assert_int_equal(p.nsegs, 2);
	assert_int_equal(p.segs[0].id, 1);
	assert_int_equal(p.segs[0].len, 50);
	assert_int_equal(p.segs[1].id, 2);
	compact_pick_release(&p);
}

static void pick_drops_leading_and_trailing_holes(void **state)
{
	struct jo_slice recs[] = {
		{ .pos = 4096, .id = 7, .size = 10, .off = 0, .len = 10 },
		{ .pos = 4106, .id = 0, .size = 0, .off = 0, .len = 500 },
		{ .pos = 5000, .id = 8, .size = 10, .off = 0, .len = 10 },
		{ .pos = 5010, .id = 0, .size = 0, .off = 0, .len = 1000 },
	};
	struct compact_pick p;

	(void)state;
	assert_int_equal(compact_pick(recs, 4, &p), 0);
	assert_int_equal(p.pos, 4096);
	/* 7 [4096,4106) hole [4106,4606) gap [4606,5000) 8 [5000,5010) */
	assert_int_equal(p.size, 5010 - 4096);
	assert_int_equal(p.segs[0].id, 7);
	assert_int_equal(p.segs[p.nsegs - 1].id, 8);
	compact_pick_release(&p);
}

static void pick_of_only_holes_is_one_zero_byte(void **state)
{
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 0, .size = 0, .off = 0, .len = 100 },
		{ .pos = 10, .id = 0, .size = 0, .off = 0, .len = 100 },
	};
	struct compact_pick p;

	(void)state;
	assert_int_equal(compact_pick(recs, 2, &p), 0);
	assert_int_equal(p.size, 1);
	assert_int_equal(p.nsegs, 1);
	assert_int_equal(p.segs[0].id, 0);
	compact_pick_release(&p);
}

static void skip_some_keeps_a_big_visible_first_record(void **state)
{
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 1, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
		{ .pos = 8 * MiB, .id = 2, .size = 100, .off = 0, .len = 100 },
		{ .pos = 8 * MiB + 50, .id = 3, .size = 100, .off = 0, .len = 100 },
	};
	struct compact_pick p;

	(void)state;
	assert_int_equal(compact_skip_some(recs, 3), 1);
	assert_int_equal(compact_pick(recs, 3, &p), 0);
	assert_int_equal(p.skipped, 1);
	assert_int_equal(p.ncompacted, 2);
	assert_int_equal(p.pos, 8 * MiB);
	assert_int_equal(p.size, 150);
	compact_pick_release(&p);
}

static void skip_some_stops_at_small_or_covered_records(void **state)
{
	struct jo_slice small[] = {
		{ .pos = 0, .id = 1, .size = 1000, .off = 0, .len = 1000 },
		{ .pos = 1000, .id = 2, .size = 100, .off = 0, .len = 100 },
	};
	struct jo_slice covered[] = {
		{ .pos = 0, .id = 1, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
		{ .pos = 0, .id = 2, .size = 100, .off = 0, .len = 100 },
	};
	struct jo_slice repeated[] = {
		{ .pos = 0, .id = 1, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
		{ .pos = 8 * MiB, .id = 2, .size = 100, .off = 0, .len = 100 },
		{ .pos = 0, .id = 1, .size = 8 * MiB, .off = 0, .len = 8 * MiB },
	};
	/* a big first record, but less than a fifth of what would be compacted */
	struct jo_slice minor[] = {
		{ .pos = 0, .id = 1, .size = 2 * MiB, .off = 0, .len = 2 * MiB },
		{ .pos = 2 * MiB, .id = 2, .size = 20 * MiB, .off = 0, .len = 20 * MiB },
	};

	(void)state;
	assert_int_equal(compact_skip_some(small, 2), 0);
	assert_int_equal(compact_skip_some(covered, 2), 0);
	assert_int_equal(compact_skip_some(repeated, 3), 0);
	assert_int_equal(compact_skip_some(minor, 2), 0);
}

static void pick_of_one_record_has_nothing_to_do(void **state)
{
	struct jo_slice recs[] = { { .pos = 0, .id = 1, .size = 100, .off = 0, .len = 100 } };
	struct compact_pick p;

	(void)state;
	assert_int_equal(compact_pick(recs, 1, &p), 0);
	assert_true(p.ncompacted < 2);
	compact_pick_release(&p);
}

/* ---- the source of a compaction ---- */

struct vfx {
	char dir[64];
	struct jo_vol *v;
};

/* Deterministic bytes of slice id at offset off. */
static uint8_t byte_of(uint64_t id, uint64_t off)
{
	uint64_t x = id * 0x9e3779b97f4a7c15ull + off * 0xbf58476d1ce4e5b9ull;

	return (uint8_t)(x >> 56 ^ x >> 29);
}

static int gen_cb(uint8_t *dst, uint32_t off, uint32_t len, void *payload, struct jo_err *err)
{
	uint64_t id = *(uint64_t *)payload;

	(void)err;
	for (uint32_t i = 0; i < len; i++)
		dst[i] = byte_of(id, (uint64_t)off + i);
	return 0;
}

/* A volume on SQLite + file storage with 4 MiB blocks, slices 10 and 11 of 8 MiB each. */
static void vol_setup(struct vfx *f, const char *compression)
{
	char db[128], url[160], js[512], *q;
	struct jo_vol_opts vo = { 0 };
	struct jo_err err = { 0 };
	sqlite3 *h;

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_compact-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(db, sizeof(db), "%s/meta.db", f->dir);
	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	snprintf(js, sizeof(js), "{\"Name\":\"v\",\"UUID\":\"11111111-2222-3333-4444-555555555555\","
		 "\"Storage\":\"file\",\"Bucket\":\"%s/b/\",\"BlockSize\":4096,\"Compression\":\"%s\","
		 "\"TrashDays\":0,\"MetaVersion\":1}", f->dir, compression);
	q = sqlite3_mprintf("CREATE TABLE jfs_setting (name VARCHAR(255) PRIMARY KEY, value TEXT);"
			    "INSERT INTO jfs_setting VALUES('format', %Q);", js);
	assert_int_equal(sqlite3_exec(h, q, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(q);
	sqlite3_close(h);
	snprintf(url, sizeof(url), "sqlite3://%s", db);
	snprintf(js, sizeof(js), "mkdir -p '%s/b'", f->dir);
	assert_int_equal(system(js), 0);
	vo.meta_url = url;
	if (jo_vol_open(&f->v, &vo, &err))
		fail_msg("open: %s", err.msg);
	for (uint64_t id = 10; id <= 11; id++)
		if (jo_vol_write_slice(f->v, id, 8 * MiB, gen_cb, &id, &err))
			fail_msg("write slice %llu: %s", (unsigned long long)id, err.msg);
}

static void vol_teardown(struct vfx *f)
{
	jo_vol_close(f->v);
	assert_int_equal(tu_rm_rf(f->dir), 0);
}

#define SEG(i, o, l) { .id = (i), .size = (i) ? 8 * MiB : 0, .off = (o), .len = (l) }

/* Visible segments of a would-be chunk, in new-slice order. */
static const struct jo_slice segs[] = {
	SEG(10, 1 * MiB, 4096),        /* slice 10 block 0 ... */
	SEG(0, 0, 100),                /* a hole */
	SEG(10, 3 * MiB, 4096),        /* ... again, 2 MiB further: a ranged GET of its own */
	SEG(11, 0, 4 * MiB),           /* all of slice 11 block 0: one plain GET */
	SEG(10, 5 * MiB, 100),         /* slice 10 block 1 */
	SEG(10, 3 * MiB + 4096, 8192), /* right after an earlier range: merged with it */
};
#define NSEGS (sizeof(segs) / sizeof(segs[0]))

/* Fill the new slice block by block (as jo_vol_write_slice asks) and check every byte. */
static void fill_and_check(struct vfx *f, struct compact_src *src)
{
	uint64_t total = 0;
	uint8_t *got, *want;
	struct jo_err err = { 0 };
	uint64_t at = 0;

	for (size_t i = 0; i < NSEGS; i++)
		total += segs[i].len;
	got = malloc(total);
	want = malloc(total);
	for (size_t i = 0; i < NSEGS; i++) {
		for (uint32_t k = 0; k < segs[i].len; k++)
			want[at + k] = segs[i].id ? byte_of(segs[i].id, segs[i].off + k) : 0;
		at += segs[i].len;
	}
	for (uint64_t off = 0; off < total; off += f->v->block_size) {
		uint32_t n = (uint32_t)(total - off < f->v->block_size ? total - off : f->v->block_size);

		if (compact_src_fill(got + off, (uint32_t)off, n, src, &err))
			fail_msg("fill at %llu: %s", (unsigned long long)off, err.msg);
	}
	assert_memory_equal(got, want, total);
	free(got);
	free(want);
}

static void source_reads_only_the_ranges_it_copies(void **state)
{
	struct vfx f;
	struct compact_src *src;
	struct jo_err err = { 0 };
	uint64_t bytes, gets;

	(void)state;
	vol_setup(&f, "none");
	assert_int_equal(compact_src_new(f.v, segs, NSEGS, &src, &err), 0);
	fill_and_check(&f, src);
	compact_src_counts(src, &bytes, &gets);
	/* 1 MiB+4K of block 10/0; 3 MiB..3 MiB+12K of it; 11/0 whole; 100 bytes of 10/1 */
	assert_int_equal(gets, 4);
	assert_int_equal(bytes, 4096 + 12288 + 4 * MiB + 100);
	compact_src_free(src);
	vol_teardown(&f);
}

static void source_reads_compressed_blocks_whole_and_once(void **state)
{
	struct vfx f;
	struct compact_src *src;
	struct jo_err err = { 0 };
	uint64_t bytes, gets;

	(void)state;
	vol_setup(&f, "lz4");
	assert_int_equal(compact_src_new(f.v, segs, NSEGS, &src, &err), 0);
	fill_and_check(&f, src);
	compact_src_counts(src, &bytes, &gets);
	/* blocks 10/0, 10/1 and 11/0, each read once although 10/0 gives three ranges */
	assert_int_equal(gets, 3);
	assert_int_equal(bytes, 3 * 4 * MiB);
	compact_src_free(src);
	vol_teardown(&f);
}

static void source_reports_a_missing_block(void **state)
{
	struct vfx f;
	struct compact_src *src;
	struct jo_err err = { 0 };
	struct jo_slice one[] = { SEG(12, 0, 4096) };   /* slice 12 was never written */
	uint8_t buf[4096];

	(void)state;
	vol_setup(&f, "none");
	assert_int_equal(compact_src_new(f.v, one, 1, &src, &err), 0);
	assert_int_equal(compact_src_fill(buf, 0, sizeof(buf), src, &err), JO_ENOTFOUND);
	assert_non_null(strstr(err.msg, "missing"));
	compact_src_free(src);
	vol_teardown(&f);
}

/*
 * One new block made of ten old blocks, each read whole (compressed): more
 * than the source's memory budget (32 MiB) before the first byte of the new
 * block can be handed on. The reads held are released only after it, so the
 * read waited for must start all the same (it waited forever before).
 */
static void source_over_its_budget_within_one_block_goes_on(void **state)
{
	struct vfx f;
	struct compact_src *src;
	struct jo_err err = { 0 };
	struct jo_slice many[10];
	uint8_t *got = malloc(10 * 4096);
	uint64_t bytes, gets;

	(void)state;
	assert_non_null(got);
	vol_setup(&f, "lz4");
	for (uint64_t id = 12; id <= 14; id++)
		if (jo_vol_write_slice(f.v, id, 8 * MiB, gen_cb, &id, &err))
			fail_msg("write slice %llu: %s", (unsigned long long)id, err.msg);
	for (int i = 0; i < 10; i++)
		many[i] = (struct jo_slice)SEG(10 + (uint64_t)(i / 2), (uint32_t)(i % 2) * 4 * MiB + 8192,
					      4096);
	assert_int_equal(compact_src_new(f.v, many, 10, &src, &err), 0);
	if (compact_src_fill(got, 0, 10 * 4096, src, &err))
		fail_msg("fill: %s", err.msg);
	for (int i = 0; i < 10; i++)
		for (uint32_t k = 0; k < 4096; k++)
			assert_int_equal(got[i * 4096 + k], byte_of(many[i].id, many[i].off + k));
	compact_src_counts(src, &bytes, &gets);
	assert_int_equal(gets, 10);
	assert_int_equal(bytes, 10 * 4 * MiB);
	compact_src_free(src);
	vol_teardown(&f);
	free(got);
}

/*
 * A new slice's block keys are free; one found taken fails the write with
 * JO_EEXIST, and neither the write nor its clean-up touches the object
 * there. The blocks this write created are deleted again.
 */
static void write_slice_never_replaces_a_taken_block(void **state)
{
	struct vfx f;
	struct jo_err err = { 0 };
	uint64_t id = 20;
	char key[256], path[400], cmd[1000];
	uint8_t *buf = NULL;
	size_t len = 0;
	struct jo_obj_info info;

	(void)state;
	vol_setup(&f, "none");
	assert_int_equal(jo_vol_block_key(f.v, key, sizeof(key), id, 1, 4 * MiB) > 0, 1);
	snprintf(path, sizeof(path), "%s/b/%s", f.dir, key);
	snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\" && printf PLANTED > '%s'", path, path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(jo_vol_write_slice(f.v, id, 9 * MiB, gen_cb, &id, &err), JO_EEXIST);
	assert_non_null(strstr(err.msg, key));
	assert_int_equal(jo_obj_get_buf(f.v->obj, key, 0, -1, 100, &buf, &len, &err), 0);
	assert_int_equal(len, 7);
	assert_memory_equal(buf, "PLANTED", 7);
	free(buf);
	for (uint32_t i = 0; i <= 2; i += 2) {
		jo_vol_block_key(f.v, key, sizeof(key), id, i, i == 2 ? 1 * MiB : 4 * MiB);
		assert_int_equal(jo_obj_head(f.v->obj, key, &info, &err), JO_ENOTFOUND);
	}
	assert_string_equal(jo_obj_create_check(f.v->obj), "link");
	vol_teardown(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pick_merges_overlapping_records),
		cmocka_unit_test(pick_drops_leading_and_trailing_holes),
		cmocka_unit_test(pick_of_only_holes_is_one_zero_byte),
		cmocka_unit_test(skip_some_keeps_a_big_visible_first_record),
		cmocka_unit_test(skip_some_stops_at_small_or_covered_records),
		cmocka_unit_test(pick_of_one_record_has_nothing_to_do),
		cmocka_unit_test(source_reads_only_the_ranges_it_copies),
		cmocka_unit_test(source_reads_compressed_blocks_whole_and_once),
		cmocka_unit_test(source_reports_a_missing_block),
		cmocka_unit_test(source_over_its_budget_within_one_block_goes_on),
		cmocka_unit_test(write_slice_never_replaces_a_taken_block),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
