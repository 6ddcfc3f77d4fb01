/* Unit tests for the leakcheck merge: reference and object streams in, classes out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <inttypes.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "leakcheck/leak.h"

#define BS (4u << 20)
#define NOW 1700000000
#define OLD (NOW - 7200)
#define NEW (NOW - 60)

/* A stream of fixed-size records from an array (already sorted). */
struct arr {
	const uint8_t *recs;
	size_t n, len, pos;
};

static int arr_next(void *src, const void **rec, size_t *len, struct jo_err *err)
{
	struct arr *a = src;

	(void)err;
	if (a->pos >= a->n)
		return 0;
	*rec = a->recs + a->pos * a->len;
	*len = a->len;
	a->pos++;
	return 1;
}

struct got {
	int kind;
	uint64_t id;
	uint32_t indx, bsize;
	char reason[32];
};

struct sink {
	struct got items[256];
	size_t n;
};

static int collect(const struct leak_item *it, void *payload)
{
	struct sink *s = payload;

	assert_true(s->n < 256);
	s->items[s->n].kind = it->kind;
	s->items[s->n].id = it->id;
	s->items[s->n].indx = it->indx;
	s->items[s->n].bsize = it->bsize;
	snprintf(s->items[s->n].reason, sizeof(s->items[0].reason), "%s", it->reason);
	s->n++;
	return 0;
}

static bool has(const struct sink *s, int kind, uint64_t id, uint32_t indx, const char *reason)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->items[i].kind == kind && s->items[i].id == id && s->items[i].indx == indx &&
		    (!reason || !strcmp(s->items[i].reason, reason)))
			return true;
	return false;
}

/* refs and objects given unsorted; sorted here through the real extsort. */
struct refspec { uint64_t id; uint32_t size; int cls; };
struct objspec { uint64_t id; uint32_t indx, bsize; int64_t mtime; };

/*
 * Merge refs[0..nr) against objs[0..no): it must succeed and report
 * want_reported records to the sink (ANY_N: not checked).
 */
#define ANY_N ((size_t)-1)
static void merge_ok(const struct refspec *refs, size_t nr, const struct objspec *objs, size_t no,
		     uint64_t next_chunk, struct sink *sink, struct leak_counts *c, size_t want_reported)
{
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct jo_xsort *xr = NULL, *xob = NULL;
	struct jo_err err = { 0 };
	struct leak_merge_opts mo = {
		.block_size = BS, .next_chunk = next_chunk, .cutoff = NOW - 3600,
		.cb = collect, .payload = sink,
	};
	uint8_t rec[LEAK_OBJ_REC_LEN];
	int rc;

	xo.mem_limit = 1u << 20;
	assert_int_equal(jo_xsort_new(&xr, &xo, &err), 0);
	assert_int_equal(jo_xsort_new(&xob, &xo, &err), 0);
	/* insert in reverse to prove the order comes from the sort */
	for (size_t i = nr; i-- > 0;) {
		leak_ref_encode(rec, refs[i].id, refs[i].size, refs[i].cls);
		assert_int_equal(jo_xsort_add(xr, rec, LEAK_REF_REC_LEN, &err), 0);
	}
	for (size_t i = no; i-- > 0;) {
		leak_obj_encode(rec, objs[i].id, objs[i].indx, objs[i].bsize, objs[i].bsize,
				objs[i].mtime);
		assert_int_equal(jo_xsort_add(xob, rec, LEAK_OBJ_REC_LEN, &err), 0);
	}
	assert_int_equal(jo_xsort_finish(xr, &err), 0);
	assert_int_equal(jo_xsort_finish(xob, &err), 0);
	sink->n = 0;
	rc = leak_merge(&mo, leak_xsort_next, xr, leak_xsort_next, xob, c, &err);
	jo_xsort_free(xr);
	jo_xsort_free(xob);
	assert_int_equal(rc, 0);
	if (want_reported != ANY_N)
		assert_int_equal(sink->n, want_reported);
}

/* c's counts by kind: the arguments are KIND, N pairs ended by -1. */
static void counts_are(const struct leak_counts *c, ...)
{
	va_list ap;
	int kind;

	va_start(ap, c);
	while ((kind = va_arg(ap, int)) >= 0) {
		uint64_t want = (uint64_t)va_arg(ap, int);

		if (c->n[kind] != want)
			fail_msg("%s: %" PRIu64 " counted, %" PRIu64 " wanted", leak_kind_name(kind), c->n[kind], want);
	}
	va_end(ap);
}

static void merge_clean_volume_reports_nothing(void **state)
{
	(void)state;
	/* slice 1: 10 MiB = 3 blocks; slice 2: 1 byte */
	struct refspec refs[] = {
		{ 1, 10u << 20, LEAK_REF_USED }, { 1, 10u << 20, LEAK_REF_USED },
		{ 2, 1, LEAK_REF_USED },
	};
	struct objspec objs[] = {
		{ 1, 0, BS, OLD }, { 1, 1, BS, OLD }, { 1, 2, 2u << 20, OLD }, { 2, 0, 1, OLD },
	};
	struct sink s;
	struct leak_counts c;

	merge_ok(refs, 3, objs, 4, 100, &s, &c, 0);
	assert_int_equal(c.n[LEAK_VALID], 4);
	assert_int_equal(c.objects, 4);
	assert_int_equal(c.slices, 2);
}

static void merge_finds_leaked_missing_and_skipped(void **state)
{
	(void)state;
	struct refspec refs[] = {
		{ 5, 9u << 20, LEAK_REF_USED },  /* blocks 0,1 (4M) and 2 (1M) */
		{ 8, 100, LEAK_REF_USED },       /* block 0 only, missing */
	};
	struct objspec objs[] = {
		{ 3, 0, BS, OLD },               /* unreferenced, old: leaked */
		{ 4, 0, BS, NEW },               /* unreferenced, young: skipped */
		{ 5, 0, BS, OLD },               /* block 1 removed: missing */
		{ 5, 2, 1u << 20, OLD },
		{ 5, 3, 100, OLD },              /* beyond the slice: size rule fails */
		{ 500, 0, BS, OLD },             /* id >= counter: skipped */
	};
	struct sink s;
	struct leak_counts c;

	merge_ok(refs, 2, objs, 6, 100, &s, &c, ANY_N);
	assert_true(has(&s, LEAK_LEAKED, 3, 0, "unreferenced"));
	assert_true(has(&s, LEAK_SKIPPED, 4, 0, "recent"));
	assert_true(has(&s, LEAK_MISSING, 5, 1, NULL));
	assert_true(has(&s, LEAK_LEAKED, 5, 3, "size_mismatch"));
	assert_true(has(&s, LEAK_MISSING, 8, 0, NULL));
	assert_true(has(&s, LEAK_SKIPPED, 500, 0, "new_slice"));
	assert_int_equal(s.n, 6);
	counts_are(&c, LEAK_LEAKED, 2, LEAK_MISSING, 2, LEAK_SKIPPED, 2, -1);
	assert_int_equal(c.skipped_new_slice, 1);
	assert_int_equal(c.n[LEAK_VALID], 2);
	assert_int_equal(c.bytes[LEAK_MISSING], BS + 100);
}

static void merge_pending_trash_and_delfile_are_not_leaks(void **state)
{
	(void)state;
	struct refspec refs[] = {
		{ 10, 4u << 20, LEAK_REF_PENDING },
		{ 11, 8u << 20, LEAK_REF_TRASH },
		{ 12, 1000, LEAK_REF_DELFILE },
		/* slice used by a file and also in the trash: chunk list wins */
		{ 13, 50, LEAK_REF_TRASH }, { 13, 50, LEAK_REF_USED },
	};
	struct objspec objs[] = {
		{ 10, 0, BS, OLD },
		{ 11, 0, BS, OLD },              /* block 1 gone: trash is not checked */
		{ 12, 0, 1000, OLD },
		{ 13, 0, 50, OLD },
	};
	struct sink s;
	struct leak_counts c;

	merge_ok(refs, 5, objs, 4, 100, &s, &c, 0);
	counts_are(&c, LEAK_PENDING, 1, LEAK_COMPACTED, 1, LEAK_DELFILE, 1, LEAK_VALID, 1, -1);
}

static void merge_duplicate_index_with_wrong_size(void **state)
{
	(void)state;
	struct refspec refs[] = { { 7, 6u << 20, LEAK_REF_USED } }; /* 4M + 2M */
	struct objspec objs[] = {
		{ 7, 0, 1u << 20, OLD },         /* wrong length for block 0 */
		{ 7, 0, BS, OLD },
		{ 7, 1, 2u << 20, OLD },
		{ 7, 1, 3u << 20, OLD },         /* wrong length for block 1 */
	};
	struct sink s;
	struct leak_counts c;

	merge_ok(refs, 1, objs, 4, 100, &s, &c, 2);
	counts_are(&c, LEAK_LEAKED, 2, LEAK_MISSING, 0, LEAK_VALID, 2, -1);
}

static void merge_missing_refs_above_counter_are_ignored(void **state)
{
	(void)state;
	struct refspec refs[] = { { 150, 10, LEAK_REF_USED } };
	struct sink s;
	struct leak_counts c;

	merge_ok(refs, 1, NULL, 0, 100, &s, &c, 0);
}

static void merge_empty_streams(void **state)
{
	(void)state;
	struct sink s;
	struct leak_counts c;

	merge_ok(NULL, 0, NULL, 0, 1, &s, &c, ANY_N);
	assert_int_equal(c.objects, 0);
}

static void merge_rejects_unsorted_stream(void **state)
{
	(void)state;
	uint8_t objs[2][LEAK_OBJ_REC_LEN];
	struct arr ao = { &objs[0][0], 2, LEAK_OBJ_REC_LEN, 0 };
	struct arr ar = { NULL, 0, LEAK_REF_REC_LEN, 0 };
	struct leak_merge_opts mo = { .block_size = BS, .next_chunk = 100, .cutoff = NOW };
	struct leak_counts c;
	struct jo_err err = { 0 };

	leak_obj_encode(objs[0], 9, 0, BS, BS, OLD);
	leak_obj_encode(objs[1], 3, 0, BS, BS, OLD);
	assert_int_equal(leak_merge(&mo, arr_next, &ar, arr_next, &ao, &c, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "out of order"));
}

static int stop(const struct leak_item *it, void *p)
{
	(void)it;
	(void)p;
	return JO_EIO;
}

static void merge_callback_error_stops(void **state)
{
	(void)state;
	uint8_t objs[1][LEAK_OBJ_REC_LEN];
	struct arr ao = { &objs[0][0], 1, LEAK_OBJ_REC_LEN, 0 };
	struct arr ar = { NULL, 0, LEAK_REF_REC_LEN, 0 };
	struct leak_counts c;
	struct jo_err err = { 0 };
	struct leak_merge_opts mo = { .block_size = BS, .next_chunk = 100, .cutoff = NOW };

	mo.cb = stop;
	leak_obj_encode(objs[0], 9, 0, BS, BS, OLD);
	assert_int_equal(leak_merge(&mo, arr_next, &ar, arr_next, &ao, &c, &err), JO_EIO);
}

/* Property: random volumes, the merge agrees with a brute-force classification. */
static void merge_property_against_brute_force(void **state)
{
	(void)state;
	uint64_t seed = 12345;

	for (int round = 0; round < 50; round++) {
		struct refspec refs[40];
		struct objspec objs[120];
		size_t nr = 0, no = 0;

		for (uint64_t id = 1; id <= 30; id++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			uint32_t r = (uint32_t)(seed >> 33);
			uint32_t size = 1 + r % (12u << 20);
			bool referenced = (r & 3) != 0;

			if (referenced && nr < 40)
				refs[nr++] = (struct refspec){ id, size, LEAK_REF_USED };
			uint32_t nb = jo_slice_nblocks(size, BS);

			for (uint32_t b = 0; b < nb && no < 120; b++) {
				if ((r >> (8 + b)) & 1)
					continue; /* removed block */
				objs[no++] = (struct objspec){ id, b, jo_block_len(size, BS, b), OLD };
			}
		}
		struct sink s;
		struct leak_counts c;

		merge_ok(refs, nr, objs, no, 1000, &s, &c, ANY_N);
		/* brute force */
		uint64_t leaked = 0, missing = 0;

		for (size_t i = 0; i < no; i++) {
			bool ok = false;

			for (size_t k = 0; k < nr; k++)
				if (refs[k].id == objs[i].id)
					ok = true;
			leaked += !ok;
		}
		for (size_t k = 0; k < nr; k++) {
			uint32_t nb = jo_slice_nblocks(refs[k].size, BS);

			for (uint32_t b = 0; b < nb; b++) {
				bool found = false;

				for (size_t i = 0; i < no; i++)
					if (objs[i].id == refs[k].id && objs[i].indx == b)
						found = true;
				missing += !found;
			}
		}
		assert_int_equal(c.n[LEAK_LEAKED], leaked);
		assert_int_equal(c.n[LEAK_MISSING], missing);
		assert_int_equal(c.n[LEAK_VALID] + leaked, no);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(merge_clean_volume_reports_nothing),
		cmocka_unit_test(merge_finds_leaked_missing_and_skipped),
		cmocka_unit_test(merge_pending_trash_and_delfile_are_not_leaks),
		cmocka_unit_test(merge_duplicate_index_with_wrong_size),
		cmocka_unit_test(merge_missing_refs_above_counter_are_ignored),
		cmocka_unit_test(merge_empty_streams),
		cmocka_unit_test(merge_rejects_unsorted_stream),
		cmocka_unit_test(merge_callback_error_stops),
		cmocka_unit_test(merge_property_against_brute_force),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
