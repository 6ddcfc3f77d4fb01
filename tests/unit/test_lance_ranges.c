/* Unit tests for range merging and alignment (lanceparse/ranges.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "lanceparse/lance.h"

static void expect(const struct lance_rangeset *s, size_t i, const char *file, uint64_t off,
		   uint64_t len)
{
	assert_true(i < s->n);
	assert_string_equal(s->files[s->r[i].file], file);
	assert_true(s->r[i].off == off);
	assert_true(s->r[i].len == len);
}

static void ranges_merge_overlapping_and_adjacent_per_file(void **state)
{
	struct lance_rangeset s;
	(void)state;
	lance_rangeset_init(&s);
	int b = lance_rangeset_file(&s, "data/b.lance", 0);
	int a = lance_rangeset_file(&s, "data/a.lance", 0);
	assert_int_equal(lance_rangeset_file(&s, "data/b.lance", 0), b);
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 100, 50, LANCE_RK_DATA), 0);
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 0, 10, LANCE_RK_META), 0);
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 120, 100, LANCE_RK_DATA), 0); /* overlap */
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 220, 5, LANCE_RK_META), 0);   /* touches */
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 300, 0, LANCE_RK_DATA), 0);   /* empty */
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)a, 7, 1, LANCE_RK_DATA), 0);
	assert_int_equal(lance_rangeset_add(&s, (uint32_t)b, 110, 5, LANCE_RK_DATA), 0);   /* inside */
	lance_rangeset_finish(&s, 0, 0);
	assert_int_equal(s.n, 3);
	expect(&s, 0, "data/a.lance", 7, 1);
	expect(&s, 1, "data/b.lance", 0, 10);
	expect(&s, 2, "data/b.lance", 100, 125);
	assert_int_equal(s.r[2].kind, LANCE_RK_DATA | LANCE_RK_META);
	lance_rangeset_release(&s);
}

static void ranges_merge_across_small_gaps_only(void **state)
{
	struct lance_rangeset s;
	(void)state;
	lance_rangeset_init(&s);
	int f = lance_rangeset_file(&s, "x", 0);
	lance_rangeset_add(&s, (uint32_t)f, 0, 4, LANCE_RK_DATA);
	lance_rangeset_add(&s, (uint32_t)f, 64, 100, LANCE_RK_DATA);   /* gap 60 < 64 */
	lance_rangeset_add(&s, (uint32_t)f, 228, 10, LANCE_RK_DATA);   /* gap 64: kept apart */
	lance_rangeset_finish(&s, 0, 64);
	assert_int_equal(s.n, 2);
	expect(&s, 0, "x", 0, 164);
	expect(&s, 1, "x", 228, 10);
	lance_rangeset_release(&s);
}

static void ranges_align_rounds_out_and_clamps_to_size(void **state)
{
	struct lance_rangeset s;
	(void)state;
	lance_rangeset_init(&s);
	int f = lance_rangeset_file(&s, "f", 10000);
	int g = lance_rangeset_file(&s, "g", 0);
	lance_rangeset_add(&s, (uint32_t)f, 4095, 2, LANCE_RK_DATA);  /* -> [0, 8192) */
	lance_rangeset_add(&s, (uint32_t)f, 8192, 1, LANCE_RK_DATA);  /* -> [8192, 10000) */
	lance_rangeset_add(&s, (uint32_t)g, 5000, 100, LANCE_RK_DATA); /* unknown size */
	lance_rangeset_add(&s, (uint32_t)g, 4096, 4096, LANCE_RK_DATA); /* already aligned */
	lance_rangeset_add(&s, (uint32_t)g, 20000, 1, LANCE_RK_DATA);
	lance_rangeset_finish(&s, 4096, 0);
	assert_int_equal(s.n, 3);
	expect(&s, 0, "f", 0, 10000);
	expect(&s, 1, "g", 4096, 4096);
	expect(&s, 2, "g", 16384, 4096);
	lance_rangeset_release(&s);
}

static void ranges_sort_files_by_name(void **state)
{
	struct lance_rangeset s;
	const char *names[] = { "z", "_versions/1.manifest", "data/m", "_deletions/1-1-1.arrow", "a" };
	(void)state;
	lance_rangeset_init(&s);
	for (size_t i = 0; i < 5; i++) {
		int f = lance_rangeset_file(&s, names[i], 0);
		lance_rangeset_add(&s, (uint32_t)f, 10 * i, 1, LANCE_RK_DATA);
	}
	lance_rangeset_finish(&s, 1, 0);
	assert_int_equal(s.n, 5);
	for (size_t i = 1; i < s.n; i++)
		assert_true(strcmp(s.files[s.r[i - 1].file], s.files[s.r[i].file]) < 0);
	expect(&s, 0, "_deletions/1-1-1.arrow", 30, 1);
	lance_rangeset_release(&s);
}

static void ranges_merge_a_path_interned_twice(void **state)
{
	struct lance_rangeset s;
	(void)state;
	lance_rangeset_init(&s);
	/* More than 8 other files in between defeats the recent-files lookup. */
	int a = lance_rangeset_file(&s, "dup", 0);
	lance_rangeset_add(&s, (uint32_t)a, 0, 10, LANCE_RK_DATA);
	for (int i = 0; i < 10; i++) {
		char name[16];
		snprintf(name, sizeof(name), "f%d", i);
		lance_rangeset_add(&s, (uint32_t)lance_rangeset_file(&s, name, 0), 0, 1, LANCE_RK_DATA);
	}
	int b = lance_rangeset_file(&s, "dup", 100);
	assert_int_not_equal(a, b);
	lance_rangeset_add(&s, (uint32_t)b, 5, 10, LANCE_RK_META);
	lance_rangeset_finish(&s, 0, 0);
	assert_int_equal(s.nfiles, 11);
	assert_int_equal(s.n, 11);
	expect(&s, 0, "dup", 0, 15);
	assert_true(s.sizes[s.r[0].file] == 100);
	/* Adding after finish still works. */
	int c = lance_rangeset_file(&s, "zz", 0);
	assert_int_equal(c, 11);
	lance_rangeset_release(&s);
}

static void ranges_handle_offsets_near_uint64_max(void **state)
{
	struct lance_rangeset s;
	(void)state;
	lance_rangeset_init(&s);
	int f = lance_rangeset_file(&s, "big", 0);
	lance_rangeset_add(&s, (uint32_t)f, UINT64_MAX - 10, 5, LANCE_RK_DATA);
	lance_rangeset_finish(&s, 4096, 0);
	assert_int_equal(s.n, 1);
	assert_true(s.r[0].off % 4096 == 0);
	assert_true(s.r[0].off + s.r[0].len >= UINT64_MAX - 5);
	lance_rangeset_release(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ranges_merge_overlapping_and_adjacent_per_file),
		cmocka_unit_test(ranges_merge_across_small_gaps_only),
		cmocka_unit_test(ranges_align_rounds_out_and_clamps_to_size),
		cmocka_unit_test(ranges_sort_files_by_name),
		cmocka_unit_test(ranges_merge_a_path_interned_twice),
		cmocka_unit_test(ranges_handle_offsets_near_uint64_max),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
