/* Unit tests for the compaction choice (gc/compact.c), against JuiceFS's rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "gc/compact.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pick_merges_overlapping_records),
		cmocka_unit_test(pick_drops_leading_and_trailing_holes),
		cmocka_unit_test(pick_of_only_holes_is_one_zero_byte),
		cmocka_unit_test(skip_some_keeps_a_big_visible_first_record),
		cmocka_unit_test(skip_some_stops_at_small_or_covered_records),
		cmocka_unit_test(pick_of_one_record_has_nothing_to_do),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
