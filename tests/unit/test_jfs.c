/* Unit tests for common/jfs: records, overlap resolution, block keys, codecs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/jfs/jfs.h"

static void slice_record_roundtrips_big_endian(void **state)
{
	struct jo_slice s = { .pos = 0x01020304, .id = 0x1122334455667788ULL,
			      .size = 0x0A0B0C0D, .off = 7, .len = 0xFFFFFFFF }, t;
	uint8_t rec[24];

	(void)state;
	jo_slice_encode(&s, rec);
	assert_int_equal(rec[0], 0x01);
	assert_int_equal(rec[3], 0x04);
	assert_int_equal(rec[4], 0x11);
	assert_int_equal(rec[11], 0x88);
	assert_int_equal(rec[12], 0x0A);
	assert_int_equal(rec[23], 0xFF);
	jo_slice_decode(rec, &t);
	assert_int_equal(t.pos, s.pos);
	assert_true(t.id == s.id);
	assert_int_equal(t.size, s.size);
	assert_int_equal(t.off, s.off);
	assert_int_equal(t.len, s.len);
}

static void slices_decode_rejects_partial_record(void **state)
{
	uint8_t raw[25] = { 0 };
	struct jo_slice *v = NULL;
	size_t n = 99;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_slices_decode(raw, 25, &v, &n, &err), JO_EPROTO);
	assert_null(v);
	assert_int_equal(n, 0);
	assert_int_equal(jo_slices_decode(raw, 24, &v, &n, &err), 0);
	assert_int_equal(n, 1);
	free(v);
}

/* Render visible segments into a byte map: each byte = low 8 bits of
 * (id*31 + slice offset); holes 0. A reference overlay computed naively. */
static void overlay_naive(const struct jo_slice *recs, size_t n, uint32_t span, uint32_t *map)
{
	memset(map, 0, span * sizeof(*map));
	for (size_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < recs[i].len; k++)
			map[recs[i].pos + k] = recs[i].id ?
				(uint32_t)(recs[i].id * 100000 + recs[i].off + k) : 0;
}

static void overlay_segments(const struct jo_slice *segs, size_t n, uint32_t span, uint32_t *map)
{
	uint32_t at = 0;

	memset(map, 0xEE, span * sizeof(*map));
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(segs[i].pos, at); /* segments tile from 0 */
		for (uint32_t k = 0; k < segs[i].len; k++)
			map[segs[i].pos + k] = segs[i].id ?
				(uint32_t)(segs[i].id * 100000 + segs[i].off + k) : 0;
		at += segs[i].len;
	}
	for (uint32_t k = at; k < span; k++)
		map[k] = 0;
}

/* The visible segments of recs[0..nrecs), which must be want_n. */
static struct jo_slice *visible_ok(const struct jo_slice *recs, size_t nrecs, size_t want_n)
{
	struct jo_slice *segs;
	size_t n;

	assert_int_equal(jo_chunk_visible(recs, nrecs, &segs, &n), 0);
	assert_int_equal(n, want_n);
	return segs;
}

/* A visible segment: its id, pos, off and len where they are not ANY. */
#define ANY (-1)
static void seg_is(const struct jo_slice *g, int64_t id, int64_t pos, int64_t off, int64_t len)
{
	if (id != ANY)
		assert_int_equal(g->id, id);
	if (pos != ANY)
		assert_int_equal(g->pos, pos);
	if (off != ANY)
		assert_int_equal(g->off, off);
	if (len != ANY)
		assert_int_equal(g->len, len);
}

static void visible_later_record_wins(void **state)
{
	struct jo_slice recs[] = {
		{ .pos = 0, .id = 1, .size = 100, .off = 0, .len = 100 },
		{ .pos = 20, .id = 2, .size = 30, .off = 0, .len = 30 },
		{ .pos = 90, .id = 3, .size = 40, .off = 0, .len = 40 },
		{ .pos = 10, .id = 0, .size = 0, .off = 0, .len = 5 },
	};
	struct jo_slice *segs = visible_ok(recs, 4, 6);

	(void)state;
	/* 1[0,10) hole[10,15) 1[15,20) 2[20,50) 1[50,90) 3[90,130) */
	seg_is(&segs[0], 1, ANY, ANY, 10);
	seg_is(&segs[1], 0, ANY, ANY, ANY);
	seg_is(&segs[2], 1, ANY, 15, ANY);
	seg_is(&segs[3], 2, ANY, ANY, ANY);
	seg_is(&segs[4], 1, 50, 50, 40);
	seg_is(&segs[5], 3, ANY, ANY, 40);
	free(segs);
}

static void visible_fills_leading_gap_with_hole(void **state)
{
	struct jo_slice recs[] = { { .pos = 4096, .id = 9, .size = 10, .off = 2, .len = 8 } };
	struct jo_slice *segs = visible_ok(recs, 1, 2);

	(void)state;
	seg_is(&segs[0], 0, ANY, ANY, 4096);
	seg_is(&segs[1], ANY, ANY, 2, ANY);
	free(segs);
	segs = visible_ok(recs, 0, 0);
}

/* Corrupt records (past the 64 MiB chunk, a window past its slice) are
 * refused, not wrapped around 32 bits; a hole's size and offset mean nothing. */
static void visible_refuses_records_past_chunk_or_slice(void **state)
{
	const struct jo_slice bad[][2] = {
		{ { .pos = 0, .id = 1, .size = 100, .len = 100 },
		  { .pos = (1u << 26) - 10, .id = 2, .size = 20, .len = 20 } },
		{ { .pos = 0xfffffff0u, .id = 3, .size = 0xffffffffu, .len = 0x20 } },
		{ { .pos = 0, .id = 4, .size = 100, .off = 90, .len = 20 } },
		{ { .pos = 0, .id = 5, .size = 0xffffffffu, .off = 0xfffffff0u, .len = 0x100 } },
	};
	const struct jo_slice ok[] = { { .pos = 0, .id = 0, .size = 7, .off = 0xfffffff0u, .len = 4096 },
				       { .pos = (1u << 26) - 8, .id = 6, .size = 8, .len = 8 } };
	struct jo_slice *segs;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t nrec = bad[i][1].len ? 2 : 1;

		assert_int_equal(jo_chunk_visible(bad[i], nrec, &segs, &n), JO_EPROTO);
		assert_null(segs);
		assert_int_equal(n, 0);
	}
	segs = visible_ok(ok, 2, 3);
	seg_is(&segs[2], 6, (1u << 26) - 8, 0, 8);
	free(segs);
}

static void visible_matches_naive_overlay_on_random_records(void **state)
{
	enum { SPAN = 512, NREC = 60, ROUNDS = 300 };
	uint32_t want[SPAN], got[SPAN];
	struct jo_slice recs[NREC], *segs;
	size_t n;

	(void)state;
	srand(12345);
	for (int round = 0; round < ROUNDS; round++) {
		size_t nrec = 1 + (size_t)rand() % NREC;

		for (size_t i = 0; i < nrec; i++) {
			uint32_t pos = (uint32_t)rand() % (SPAN - 1);
			uint32_t len = 1 + (uint32_t)rand() % (SPAN - pos);
			bool hole = rand() % 7 == 0;

			recs[i].pos = pos;
			recs[i].len = len;
			recs[i].id = hole ? 0 : i + 1;
			recs[i].off = hole ? 0 : (uint32_t)rand() % 50;
			recs[i].size = hole ? 0 : recs[i].off + len;
		}
		overlay_naive(recs, nrec, SPAN, want);
		assert_int_equal(jo_chunk_visible(recs, nrec, &segs, &n), 0);
		overlay_segments(segs, n, SPAN, got);
		assert_memory_equal(want, got, sizeof(want));
		free(segs);
	}
}

static void block_keys_follow_every_layout(void **state)
{
	char key[256];

	(void)state;
	assert_true(jo_block_key(key, sizeof(key), "vol", false, 1, 0, 4194304) > 0);
	assert_string_equal(key, "vol/chunks/0/0/1_0_4194304");
	jo_block_key(key, sizeof(key), "vol", false, 1, 2, 2097152);
	assert_string_equal(key, "vol/chunks/0/0/1_2_2097152");
	jo_block_key(key, sizeof(key), "vol", false, 5000123, 1, 4194304);
	assert_string_equal(key, "vol/chunks/5/5000/5000123_1_4194304");
	jo_block_key(key, sizeof(key), "vol", true, 5000123, 1, 4194304);
	assert_string_equal(key, "vol/chunks/BB/5/5000123_1_4194304");
	jo_block_key(key, sizeof(key), "my-vol", true, 10, 0, 1);
	assert_string_equal(key, "my-vol/chunks/0A/0/10_0_1");
	jo_block_key(key, sizeof(key), "v", false, 18446744073709551615ULL, 3, 65536);
	assert_string_equal(key, "v/chunks/18446744073709/18446744073709551/18446744073709551615_3_65536");
	assert_int_equal(jo_block_key(key, 10, "vol", false, 1, 0, 4194304), -1);
}

static void block_parse_accepts_only_three_decimals(void **state)
{
	uint64_t id;
	uint32_t i, b;

	(void)state;
	assert_int_equal(jo_block_parse("vol/chunks/5/5000/5000123_1_4194304", &id, &i, &b), 0);
	assert_int_equal(id, 5000123);
	assert_int_equal(i, 1);
	assert_int_equal(b, 4194304);
	assert_int_equal(jo_block_parse("7_0_1", &id, &i, &b), 0);
	assert_int_equal(jo_block_parse(".jfs.7_0_1.tmp.12345", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("7_0", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("7_0_1_2", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("7__1", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("-7_0_1", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("7_0_4294967296", &id, &i, &b), JO_EINVAL);
	assert_int_equal(jo_block_parse("vol/juicefs_uuid", &id, &i, &b), JO_EINVAL);
}

static void block_size_rule_matches_gc(void **state)
{
	const uint32_t bs = 4 << 20;

	(void)state;
	/* slice of 10 MiB: 4M, 4M, 2M */
	assert_true(jo_block_valid(10 << 20, bs, 0, bs));
	assert_true(jo_block_valid(10 << 20, bs, 1, bs));
	assert_true(jo_block_valid(10 << 20, bs, 2, 2 << 20));
	assert_false(jo_block_valid(10 << 20, bs, 2, bs));
	assert_false(jo_block_valid(10 << 20, bs, 3, 1));
	assert_false(jo_block_valid(8 << 20, bs, 1, 2 << 20));
	assert_true(jo_block_valid(8 << 20, bs, 1, bs));
	assert_int_equal(jo_slice_nblocks(10 << 20, bs), 3);
	assert_int_equal(jo_slice_nblocks(8 << 20, bs), 2);
	assert_int_equal(jo_block_len(10 << 20, bs, 2), 2 << 20);
}

static void codecs_roundtrip_and_reject_bad_bodies(void **state)
{
	const int algos[] = { JO_COMPRESS_NONE, JO_COMPRESS_LZ4, JO_COMPRESS_ZSTD };
	size_t n = 300000;
	uint8_t *src = malloc(n), *dst = malloc(n);
	struct jo_err err = { 0 };

	(void)state;
	for (size_t i = 0; i < n; i++)
		src[i] = (uint8_t)(i % 251 < 100 ? 'a' : rand());
	for (int a = 0; a < 3; a++) {
		uint8_t *enc;
		size_t enclen;

		assert_int_equal(jo_block_encode(algos[a], src, n, &enc, &enclen, &err), 0);
		assert_int_equal(jo_block_decode(algos[a], enc, enclen, dst, n, &err), 0);
		assert_memory_equal(src, dst, n);
		/* the key's size must match exactly */
		assert_int_equal(jo_block_decode(algos[a], enc, enclen, dst, n - 1, &err), JO_EPROTO);
		if (algos[a] != JO_COMPRESS_NONE)
			assert_int_equal(jo_block_decode(algos[a], enc, enclen / 2, dst, n, &err),
					 JO_EPROTO);
		free(enc);
	}
	assert_int_equal(jo_compress_parse("LZ4"), JO_COMPRESS_LZ4);
	assert_int_equal(jo_compress_parse(""), JO_COMPRESS_NONE);
	assert_int_equal(jo_compress_parse(NULL), JO_COMPRESS_NONE);
	assert_int_equal(jo_compress_parse("snappy"), -1);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(slice_record_roundtrips_big_endian),
		cmocka_unit_test(slices_decode_rejects_partial_record),
		cmocka_unit_test(visible_later_record_wins),
		cmocka_unit_test(visible_fills_leading_gap_with_hole),
		cmocka_unit_test(visible_refuses_records_past_chunk_or_slice),
		cmocka_unit_test(visible_matches_naive_overlay_on_random_records),
		cmocka_unit_test(block_keys_follow_every_layout),
		cmocka_unit_test(block_parse_accepts_only_three_decimals),
		cmocka_unit_test(block_size_rule_matches_gc),
		cmocka_unit_test(codecs_roundtrip_and_reject_bad_bodies),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
