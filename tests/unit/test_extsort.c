/* Unit and property tests for common/extsort. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/extsort.h"
#include "support/testutil.h"

struct rec {
	uint8_t *p;
	size_t len;
};

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_extsort-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	jo_cancel_request(0);
	return 0;
}

/* The parent dir must be empty again: every temp file was removed. */
static int teardown_dir(void **state)
{
	(void)state;
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	assert_int_equal(n, 0);
	assert_int_equal(rmdir(tmpdir), 0);
	jo_cancel_request(0);
	return 0;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	return tu_xorshift(&rng_state);
}

static int byte_order(const void *a, size_t alen, const void *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = memcmp(a, b, n);

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int qsort_rec(const void *x, const void *y)
{
	const struct rec *a = x, *b = y;

	return byte_order(a->p, a->len, b->p, b->len);
}

/* Reverse byte order, to prove the callback is used everywhere. */
static int reverse_cmp(const void *a, size_t alen, const void *b, size_t blen, void *payload)
{
	int *calls = payload;

	(*calls)++;
	return -byte_order(a, alen, b, blen);
}

static struct rec *make_records(size_t n, size_t maxlen, unsigned alphabet)
{
	struct rec *r = calloc(n ? n : 1, sizeof(*r));

	assert_non_null(r);
	for (size_t i = 0; i < n; i++) {
		/* reuse an earlier record now and then: duplicates */
		if (i > 0 && rnd() % 8 == 0) {
			struct rec *o = &r[rnd() % i];

			r[i].len = o->len;
			r[i].p = malloc(o->len);
			memcpy(r[i].p, o->p, o->len);
			continue;
		}
		r[i].len = 1 + rnd() % maxlen;
		r[i].p = malloc(r[i].len);
		assert_non_null(r[i].p);
		for (size_t k = 0; k < r[i].len; k++)
			r[i].p[k] = (uint8_t)(rnd() % alphabet);
	}
	return r;
}

static void free_records(struct rec *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(r[i].p);
	free(r);
}

/* Sorts made by check_sorted() and new_sort() write plain runs (opts.plain_runs). */
static bool plain;

/* Sort recs with extsort and check the output equals qsort's, record by record. */
static void check_sorted(struct rec *recs, size_t n, size_t mem, int threads,
			 struct jo_xsort_stats *st_out)
{
	struct jo_xsort_opts o = JO_XSORT_OPTS_INIT;
	struct jo_xsort *s = NULL;
	struct jo_err err = { 0 };
	const void *p;
	size_t len, i = 0;
	int rc;

	o.mem_limit = mem;
	o.tmp_dir = tmpdir;
	o.threads = threads;
	o.plain_runs = plain;
	assert_int_equal(jo_xsort_new(&s, &o, &err), 0);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(jo_xsort_add(s, recs[k].p, recs[k].len, &err), 0);
	rc = jo_xsort_finish(s, &err);
	if (rc)
		fail_msg("finish: %s", err.msg);
	if (n)
		qsort(recs, n, sizeof(*recs), qsort_rec);
	while ((rc = jo_xsort_next(s, &p, &len, &err)) == 1) {
		assert_true(i < n);
		assert_int_equal(len, recs[i].len);
		assert_memory_equal(p, recs[i].p, len);
		i++;
	}
	if (rc)
		fail_msg("next: %s", err.msg);
	assert_int_equal(i, n);
	/* end is sticky */
	assert_int_equal(jo_xsort_next(s, &p, &len, &err), 0);
	if (st_out)
		jo_xsort_get_stats(s, st_out);
	jo_xsort_free(s);
}

/*
 * Sorts n random records (from seed; lengths 1..maxlen over alphabet) in
 * mem bytes with threads, checks the order against qsort's and returns
 * the sort's stats.
 */
static struct jo_xsort_stats sort_random(uint64_t seed, size_t n, size_t maxlen, unsigned alphabet,
					 size_t mem, int threads)
{
	struct jo_xsort_stats st;
	struct rec *r;

	rng_state = seed;
	r = make_records(n, maxlen, alphabet);
	check_sorted(r, n, mem, threads, &st);
	free_records(r, n);
	return st;
}

static void extsort_empty_input_yields_nothing(void **state)
{
	(void)state;
	struct jo_xsort_stats st;

	check_sorted(NULL, 0, 0, 1, &st);
	assert_int_equal(st.records, 0);
	assert_int_equal(st.runs, 0);
}

static void extsort_single_record(void **state)
{
	(void)state;
	uint8_t one[] = { 7, 0, 9 };
	struct rec r = { malloc(3), 3 };

	memcpy(r.p, one, 3);
	check_sorted(&r, 1, 0, 1, NULL);
	free(r.p);
}

static void extsort_in_memory_with_duplicates(void **state)
{
	(void)state;
	/* 10,000 records and their index fit in the first 1 MiB buffer */
	size_t n = 10000;
	struct jo_xsort_stats st = sort_random(42, n, 20, 4, 64u << 20, 1);

	assert_int_equal(st.runs, 0); /* fits: no temp file */
	assert_int_equal(st.records, n);
}

static void extsort_many_runs_under_tiny_memory_limit(void **state)
{
	(void)state;
	struct jo_xsort_stats st = sort_random(7, 300000, 60, 256, 1u << 20, 1);

	assert_true(st.runs > 10);
	/* 1 MiB cannot hold all readers at once: intermediate passes happen */
	assert_true(st.merge_passes > 0);
	assert_true(st.peak_mem <= (1u << 20));
}

static void extsort_threaded_run_sorting_matches(void **state)
{
	(void)state;
	struct jo_xsort_stats st = sort_random(99, 200000, 40, 3, 2u << 20, 2);

	assert_true(st.runs > 2);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/*
 * A 64 MiB budget is a ceiling: 2M records of 16 bytes (96 MiB with their
 * index) are sorted in buffers that start at 1 MiB and grow, so the sort
 * writes many runs and never holds more than a few MiB. The output is
 * checked for order and, through a sum of hashes, for being the same
 * multiset, without keeping the input.
 */
static void extsort_memory_follows_input_under_large_budget(void **state)
{
	(void)state;
	struct jo_xsort_opts o = JO_XSORT_OPTS_INIT;
	struct jo_xsort *s = NULL;
	struct jo_err err = { 0 };
	struct jo_xsort_stats st;
	const size_t n = 2000000;
	uint64_t sum_in = 0, sum_out = 0;
	uint8_t prev[16] = { 0 };
	const void *p;
	size_t len, got = 0;
	int rc;

	o.mem_limit = 64u << 20;
	o.tmp_dir = tmpdir;
	o.threads = 2;
	assert_int_equal(jo_xsort_new(&s, &o, &err), 0);
	rng_state = 2026;
	for (size_t k = 0; k < n; k++) {
		uint64_t v[2] = { rnd(), rnd() };

		sum_in += mix64(v[0]) ^ mix64(v[1] + 1);
		assert_int_equal(jo_xsort_add(s, v, sizeof(v), &err), 0);
	}
	rc = jo_xsort_finish(s, &err);
	if (rc)
		fail_msg("finish: %s", err.msg);
	while ((rc = jo_xsort_next(s, &p, &len, &err)) == 1) {
		uint64_t v[2];

		assert_int_equal(len, 16);
		assert_true(memcmp(prev, p, 16) <= 0);
		memcpy(prev, p, 16);
		memcpy(v, p, 16);
		sum_out += mix64(v[0]) ^ mix64(v[1] + 1);
		got++;
	}
	if (rc)
		fail_msg("next: %s", err.msg);
	assert_int_equal(got, n);
	assert_true(sum_in == sum_out);
	jo_xsort_get_stats(s, &st);
	jo_xsort_free(s);
	/* far below the budget: buffers of 1, 2, then 4 MiB, readers to match */
	assert_true(st.peak_mem <= (12u << 20));
	/* 1 MiB buffers throughout would write about 122 runs, the whole budget 2 */
	uint64_t filled = st.runs - st.merge_passes;

	assert_true(filled >= 40 && filled <= 100);
}

static void extsort_property_random_against_qsort(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 30; seed++) {
		rng_state = seed * 0x9E3779B97F4A7C15ULL;
		size_t n = rnd() % 60000;
		size_t maxlen = 1 + rnd() % 100;
		unsigned alpha = 1 + (unsigned)(rnd() % 256);
		size_t mem = (rnd() % 2) ? (1u << 20) : (1u << 20) * (1 + rnd() % 8);
		struct rec *r = make_records(n, maxlen, alpha);

		check_sorted(r, n, mem, 1 + (int)(seed % 2), NULL);
		free_records(r, n);
	}
}

static void extsort_uses_comparator_callback(void **state)
{
	(void)state;
	struct jo_xsort_opts o = JO_XSORT_OPTS_INIT;
	struct jo_xsort *s = NULL;
	struct jo_err err = { 0 };
	int calls = 0;
	const void *p;
	size_t len;
	uint32_t prev = UINT32_MAX, v;
	size_t count = 0;

	o.mem_limit = 1u << 20;
	o.tmp_dir = tmpdir;
	o.cmp = reverse_cmp;
	o.cmp_payload = &calls;
	assert_int_equal(jo_xsort_new(&s, &o, &err), 0);
	for (uint32_t i = 0; i < 100000; i++) {
		/* big-endian so byte order = numeric order */
		uint32_t x = (i * 2654435761u) % 50000;
		uint8_t b[4] = { (uint8_t)(x >> 24), (uint8_t)(x >> 16), (uint8_t)(x >> 8), (uint8_t)x };

		assert_int_equal(jo_xsort_add(s, b, 4, &err), 0);
	}
	assert_int_equal(jo_xsort_finish(s, &err), 0);
	while (jo_xsort_next(s, &p, &len, &err) == 1) {
		const uint8_t *b = p;

		assert_int_equal(len, 4);
		v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
		assert_true(v <= prev);
		prev = v;
		count++;
	}
	assert_int_equal(count, 100000);
	assert_true(calls > 100000);
	jo_xsort_free(s);
}

static void extsort_rejects_bad_calls(void **state)
{
	(void)state;
	struct jo_xsort *s = NULL;
	struct jo_xsort_opts o = JO_XSORT_OPTS_INIT;
	struct jo_err err = { 0 };
	const void *p;
	size_t len;

	o.tmp_dir = tmpdir;
	assert_int_equal(jo_xsort_new(&s, &o, &err), 0);
	assert_int_equal(jo_xsort_add(s, "x", 0, &err), JO_EINVAL);
	assert_int_equal(jo_xsort_next(s, &p, &len, &err), JO_EINVAL);
	assert_int_equal(jo_xsort_finish(s, &err), 0);
	assert_int_equal(jo_xsort_add(s, "x", 1, &err), JO_EINVAL);
	assert_int_equal(jo_xsort_finish(s, &err), JO_EINVAL);
	jo_xsort_free(s);
	jo_xsort_free(NULL);
}

/* A new sort in mem bytes with its temp files under dir; fails the test if it cannot be made. */
static struct jo_xsort *new_sort(size_t mem, const char *dir)
{
	struct jo_xsort_opts o = JO_XSORT_OPTS_INIT;
	struct jo_xsort *s = NULL;
	struct jo_err err = { 0 };

	o.mem_limit = mem;
	o.tmp_dir = dir;
	o.plain_runs = plain;
	assert_int_equal(jo_xsort_new(&s, &o, &err), 0);
	return s;
}

static void extsort_cancel_stops_and_removes_temp_files(void **state)
{
	(void)state;
	struct jo_err err = { 0 };
	struct jo_xsort *s = new_sort(1u << 20, tmpdir);
	char rec[32];
	int rc = 0;
	size_t i;

	for (i = 0; i < 200000; i++) {
		snprintf(rec, sizeof(rec), "%08zu-record", (i * 7919) % 200000);
		rc = jo_xsort_add(s, rec, strlen(rec), &err);
		if (rc)
			break;
		if (i == 100000) {
			assert_string_not_equal(jo_xsort_tmp_path(s), "");
			jo_cancel_request(SIGINT);
		}
	}
	assert_int_equal(rc, JO_ECANCELED);
	assert_true(i < 100000 + 70000);
	struct stat sb;

	assert_int_equal(stat(jo_xsort_tmp_path(s), &sb), 0);
	jo_xsort_free(s); /* teardown checks the dir is gone */
	jo_cancel_request(0);
}

/* A damaged run file is reported as EPROTO, never as a short result. */
static void extsort_truncated_run_is_an_error(void **state)
{
	(void)state;
	struct jo_err err = { 0 };
	struct jo_xsort *s = new_sort(1u << 20, tmpdir);
	char rec[64], path[512];
	const void *p;
	size_t len;
	int rc;

	rng_state = 3;
	for (size_t i = 0; i < 60000; i++) {
		/* incompressible-ish text so the run file is large */
		snprintf(rec, sizeof(rec), "%016llx%016llx", (unsigned long long)rnd(),
			 (unsigned long long)rnd());
		assert_int_equal(jo_xsort_add(s, rec, strlen(rec), &err), 0);
	}
	snprintf(path, sizeof(path), "%s/run-0.zst", jo_xsort_tmp_path(s));
	struct stat sb;

	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(truncate(path, sb.st_size / 2), 0);
	rc = jo_xsort_finish(s, &err);
	while (rc == 0 && (rc = jo_xsort_next(s, &p, &len, &err)) == 1)
		;
	assert_int_equal(rc, JO_EPROTO);
	assert_non_null(strstr(err.msg, "run 0"));
	jo_xsort_free(s);
}

/*
 * Plain runs: the same order as qsort's, threaded or not; a merge reader
 * costs 16 KiB, so the 30-odd runs of 1-2 MiB buffers meet in one merge, where
 * zstd runs in the same memory need intermediate passes.
 */
static void extsort_plain_runs_sort_in_one_merge(void **state)
{
	(void)state;
	struct jo_xsort_stats zst = sort_random(7, 700000, 60, 256, 2u << 20, 1);

	plain = true;
	struct jo_xsort_stats st = sort_random(7, 700000, 60, 256, 2u << 20, 1);

	assert_true(zst.merge_passes > 0);
	assert_true(st.runs > 32);
	assert_int_equal(st.merge_passes, 0);
	assert_true(st.peak_mem <= (2u << 20));
	/* plain: the temp bytes are the records and their length headers */
	assert_true(st.tmp_bytes >= st.bytes + st.records);
	sort_random(99, 200000, 40, 3, 2u << 20, 2);
	for (uint64_t seed = 1; seed <= 12; seed++) {
		rng_state = seed * 0x9E3779B97F4A7C15ULL;
		size_t n = rnd() % 60000;
		size_t maxlen = 1 + rnd() % 300;
		unsigned alpha = 1 + (unsigned)(rnd() % 256);
		struct rec *r = make_records(n, maxlen, alpha);

		check_sorted(r, n, 1u << 20, 1 + (int)(seed % 2), NULL);
		free_records(r, n);
	}
	plain = false;
}

/* A plain run cut anywhere, even right before its end mark, is EPROTO. */
static void extsort_plain_run_cut_is_an_error(void **state)
{
	(void)state;
	for (int cut_last = 0; cut_last <= 1; cut_last++) {
		struct jo_err err = { 0 };
		struct jo_xsort *s;
		char rec[64], path[512];
		struct stat sb;
		const void *p;
		size_t len;
		int rc;

		plain = true;
		s = new_sort(1u << 20, tmpdir);
		plain = false;
		rng_state = 3;
		for (size_t i = 0; i < 60000; i++) {
			snprintf(rec, sizeof(rec), "%016llx", (unsigned long long)rnd());
			assert_int_equal(jo_xsort_add(s, rec, strlen(rec), &err), 0);
		}
		snprintf(path, sizeof(path), "%s/run-0.run", jo_xsort_tmp_path(s));
		assert_int_equal(stat(path, &sb), 0);
		/* 16-byte records with a 1-byte header: cut after a whole record */
		assert_int_equal(truncate(path, cut_last ? sb.st_size - 1 : 17 * 1000 + 5), 0);
		rc = jo_xsort_finish(s, &err);
		if (rc == 0)
			while ((rc = jo_xsort_next(s, &p, &len, &err)) == 1)
				;
		assert_int_equal(rc, JO_EPROTO);
		assert_non_null(strstr(err.msg, "run 0"));
		jo_xsort_free(s);
	}
}

static void extsort_bad_tmp_dir_fails_cleanly(void **state)
{
	(void)state;
	struct jo_err err = { 0 };
	struct jo_xsort *s = new_sort(1u << 20, "/nonexistent/dir/for/extsort");
	char rec[40];
	int rc = 0;

	for (size_t i = 0; i < 200000 && !rc; i++) {
		snprintf(rec, sizeof(rec), "%zu", i);
		rc = jo_xsort_add(s, rec, strlen(rec), &err);
	}
	assert_int_equal(rc, JO_EIO);
	assert_non_null(strstr(err.msg, "/nonexistent/dir/for/extsort"));
	jo_xsort_free(s);
}

/* A test that runs between setup_dir and teardown_dir, like most here. */
#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, setup_dir, teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_TEST(extsort_empty_input_yields_nothing),
		FIXTURE_TEST(extsort_single_record),
		FIXTURE_TEST(extsort_in_memory_with_duplicates),
		FIXTURE_TEST(extsort_many_runs_under_tiny_memory_limit),
		FIXTURE_TEST(extsort_threaded_run_sorting_matches),
		FIXTURE_TEST(extsort_memory_follows_input_under_large_budget),
		FIXTURE_TEST(extsort_property_random_against_qsort),
		FIXTURE_TEST(extsort_uses_comparator_callback),
		FIXTURE_TEST(extsort_rejects_bad_calls),
		FIXTURE_TEST(extsort_cancel_stops_and_removes_temp_files),
		FIXTURE_TEST(extsort_truncated_run_is_an_error),
		FIXTURE_TEST(extsort_bad_tmp_dir_fails_cleanly),
		FIXTURE_TEST(extsort_plain_runs_sort_in_one_merge),
		FIXTURE_TEST(extsort_plain_run_cut_is_an_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
