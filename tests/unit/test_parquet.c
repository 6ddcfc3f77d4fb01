/*
 * Unit and property tests for common/parquet (the Parquet writer).
 *
 * Each test writes its files into a fresh directory, every NAME.parquet with
 * a NAME.jsonl of what was put in (a header with the schema and options, then
 * one JSON array per row, strings as hex). tests/tools/pqcheck.py then reads
 * every file with pyarrow and DuckDB and compares the values, the schema and
 * the statistics of each column chunk with the expected rows (see its header).
 * The venv's python is found beside tests/data (JO_TEST_DATA) or named by
 * JO_PYTHON; without it the tests fail. JO_TEST_KEEP=1 keeps the directories.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/parquet.h"
#include "support/testutil.h"

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	return tu_mkdtemp(tmpdir, sizeof(tmpdir), "test_parquet");
}

static int teardown_dir(void **state)
{
	(void)state;
	if (getenv("JO_TEST_KEEP")) {
		fprintf(stderr, "kept %s\n", tmpdir);
		return 0;
	}
	return tu_rm_rf(tmpdir);
}

/* Read back every file of the test's directory with pyarrow and DuckDB. */
static void pqcheck(void)
{
	const char *data = getenv("JO_TEST_DATA"), *py = getenv("JO_PYTHON");
	char top[PATH_MAX], python[PATH_MAX + 32], cmd[3 * PATH_MAX];
	size_t n;

	if (!data) {
		fail_msg("JO_TEST_DATA is not set (run through ctest)");
		return;
	}
	n = strlen(data);
	if (n >= 11 && strcmp(data + n - 11, "/tests/data") == 0)
		n -= 11;
	snprintf(top, sizeof(top), "%.*s", (int)n, data);
	snprintf(python, sizeof(python), "%s", py ? py : "");
	if (!py)
		snprintf(python, sizeof(python), "%s/.venv/bin/python", top);
	if (access(python, X_OK) != 0) {
		fail_msg("python not found at %s (set JO_PYTHON)", python);
		return;
	}
	snprintf(cmd, sizeof(cmd), "'%s' '%s/tests/tools/pqcheck.py' '%s'", python, top, tmpdir);
	assert_int_equal(system(cmd), 0);
}

/* ---- a table writer that also records what it put ---- */

struct tw {
	struct jo_pq_writer *w;
	FILE *jl;
	int fd;
	size_t ncols;
	char **cell;            /* this row's JSON text per column */
	uint64_t rows;
};

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, f);
	n = vsnprintf(NULL, 0, f, ap);
	va_end(ap);
	s = malloc((size_t)n + 1);
	assert_non_null(s);
	va_start(ap, f);
	vsnprintf(s, (size_t)n + 1, f, ap);
	va_end(ap);
	return s;
}

static const char *tname(enum jo_pq_type t)
{
	static const char *names[] = { "int64", "int32", "string", "timestamp_ns", "bool",
				       "binary", "timestamp_us" };
	return names[t];
}

/* Open DIR/name.parquet and its .jsonl. min_groups/min_pages: what pqcheck must find. */
static void tw_open(struct tw *t, const char *name, const struct jo_pq_column *cols,
		    size_t ncols, const struct jo_pq_opts *o, int min_groups, int min_pages)
{
	struct jo_err err = { 0 };
	char path[512];

	memset(t, 0, sizeof(*t));
	snprintf(path, sizeof(path), "%s/%s.parquet", tmpdir, name);
	t->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(t->fd >= 0);
	snprintf(path, sizeof(path), "%s/%s.jsonl", tmpdir, name);
	t->jl = fopen(path, "w");
	assert_non_null(t->jl);
	fprintf(t->jl, "{\"columns\": [");
	for (size_t i = 0; i < ncols; i++)
		fprintf(t->jl, "%s{\"name\": \"%s\", \"type\": \"%s\", \"nullable\": %s}",
			i ? ", " : "", cols[i].name, tname(cols[i].type),
			cols[i].nullable ? "true" : "false");
	fprintf(t->jl, "], \"page_bytes\": %zu, \"row_group_bytes\": %zu, "
		"\"min_row_groups\": %d, \"min_pages\": %d}\n",
		o && o->page_bytes ? o->page_bytes : (size_t)1 << 20,
		o && o->row_group_bytes ? o->row_group_bytes : (size_t)32 << 20, min_groups,
		min_pages);
	if (jo_pq_open(&t->w, t->fd, cols, ncols, o, &err) != 0)
		fail_msg("jo_pq_open: %s", err.msg);
	t->ncols = ncols;
	t->cell = calloc(ncols, sizeof(*t->cell));
	assert_non_null(t->cell);
}

static void tw_ok(int rc, const struct jo_err *err)
{
	if (rc)
		fail_msg("%s (%d)", err->msg, rc);
}

static void tw_set(struct tw *t, size_t col, char *json)
{
	assert_null(t->cell[col]);
	t->cell[col] = json;
}

static void tw_i64(struct tw *t, size_t col, int64_t v)
{
	struct jo_err err = { 0 };

	tw_ok(jo_pq_put_i64(t->w, col, v, &err), &err);
	tw_set(t, col, fmt("%lld", (long long)v));
}

static void tw_i32(struct tw *t, size_t col, int32_t v)
{
	struct jo_err err = { 0 };

	tw_ok(jo_pq_put_i32(t->w, col, v, &err), &err);
	tw_set(t, col, fmt("%d", v));
}

static void tw_bool(struct tw *t, size_t col, bool v)
{
	struct jo_err err = { 0 };

	tw_ok(jo_pq_put_bool(t->w, col, v, &err), &err);
	tw_set(t, col, fmt("%s", v ? "true" : "false"));
}

static void tw_str(struct tw *t, size_t col, const void *s, size_t len)
{
	struct jo_err err = { 0 };
	char *hex = malloc(2 * len + 3);

	assert_non_null(hex);
	tw_ok(jo_pq_put_str(t->w, col, s, len, &err), &err);
	hex[0] = '"';
	for (size_t i = 0; i < len; i++)
		snprintf(hex + 1 + 2 * i, 3, "%02x", ((const uint8_t *)s)[i]);
	memcpy(hex + 1 + 2 * len, "\"", 2);
	tw_set(t, col, hex);
}

static void tw_cstr(struct tw *t, size_t col, const char *s)
{
	tw_str(t, col, s, strlen(s));
}

static void tw_null(struct tw *t, size_t col)
{
	struct jo_err err = { 0 };

	tw_ok(jo_pq_put_null(t->w, col, &err), &err);
	tw_set(t, col, fmt("null"));
}

static void tw_end_row(struct tw *t)
{
	struct jo_err err = { 0 };

	tw_ok(jo_pq_end_row(t->w, &err), &err);
	fputc('[', t->jl);
	for (size_t i = 0; i < t->ncols; i++) {
		fprintf(t->jl, "%s%s", i ? ", " : "", t->cell[i]);
		free(t->cell[i]);
		t->cell[i] = NULL;
	}
	fputs("]\n", t->jl);
	t->rows++;
}

static void tw_close(struct tw *t)
{
	struct jo_err err = { 0 };
	uint64_t rows = ~0ULL;

	tw_ok(jo_pq_close(t->w, &rows, &err), &err);
	assert_int_equal(rows, t->rows);
	assert_int_equal(close(t->fd), 0);
	assert_int_equal(fclose(t->jl), 0);
	free(t->cell);
}

/* Bytes the process has allocated now (0 where malloc keeps no count, as under ASan). */
static size_t heap_used(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

static uint64_t rng;

static uint64_t rnd(void)
{
	return tu_xorshift(&rng);
}

/* ---- tests ---- */

static const struct jo_pq_column every_col[] = {
	{ "i64", JO_PQ_INT64, false },        { "i64 null", JO_PQ_INT64, true },
	{ "i32", JO_PQ_INT32, false },        { "i32_null", JO_PQ_INT32, true },
	{ "str", JO_PQ_STRING, false },       { "str_null", JO_PQ_STRING, true },
	{ "ts", JO_PQ_TIMESTAMP_NS, false },  { "ts_null", JO_PQ_TIMESTAMP_NS, true },
	{ "flag", JO_PQ_BOOL, false },        { "flag_null", JO_PQ_BOOL, true },
	{ "bin", JO_PQ_BINARY, false },       { "bin_null", JO_PQ_BINARY, true },
	{ "größe", JO_PQ_INT64, true },       { "empty", JO_PQ_STRING, false },
	{ "ts_us", JO_PQ_TIMESTAMP_US, true },
};
#define NEVERY (sizeof(every_col) / sizeof(every_col[0]))

static void parquet_writes_every_type_with_nulls_and_edge_values(void **state)
{
	static const char *words[] = { "", "a", "é", "日本語", "\xf0\x9f\x98\x80 emoji", "zz",
				       "path/to/file.txt", "\x7f" };
	static const uint8_t bin[] = { 0x00, 0xff, 0x80, 0x00, 0x7f };
	struct tw t;

	(void)state;
	tw_open(&t, "every_type", every_col, NEVERY, NULL, 1, NEVERY);
	for (int i = 0; i < 1000; i++) {
		int64_t v = i == 0 ? INT64_MIN : i == 1 ? INT64_MAX : (int64_t)i * 1000003 - 500000;
		int32_t v32 = i == 2 ? INT32_MIN : i == 3 ? INT32_MAX : i * 7 - 3000;
		int64_t ts = i == 4 ? -1 : (int64_t)1700000000 * 1000000000 + i * 999;

		tw_i64(&t, 0, v);
		if (i % 3 == 0)
			tw_null(&t, 1);
		else
			tw_i64(&t, 1, -v);
		tw_i32(&t, 2, v32);
		if (i < 20 || (i / 50) % 2)  /* long runs of nulls: RLE runs */
			tw_null(&t, 3);
		else
			tw_i32(&t, 3, v32 / 2);
		tw_cstr(&t, 4, words[i % 8]);
		if (i % 7 == 3)
			tw_null(&t, 5);
		else
			tw_cstr(&t, 5, words[(i * 5) % 8]);
		tw_i64(&t, 6, ts);
		if (i % 2)
			tw_null(&t, 7);
		else
			tw_i64(&t, 7, ts - 5);
		tw_bool(&t, 8, i % 5 == 1);
		if (i % 4 == 0)
			tw_null(&t, 9);
		else
			tw_bool(&t, 9, i > 600);
		tw_str(&t, 10, bin, (size_t)i % sizeof(bin));
		if (i % 11 == 0)
			tw_null(&t, 11);
		else
			tw_str(&t, 11, bin + i % 3, 2);
		tw_null(&t, 12);  /* a column with no value at all: no min/max */
		tw_cstr(&t, 13, "");
		if (i % 9 == 4)
			tw_null(&t, 14);
		else
			tw_i64(&t, 14, ts / 1000 - (i == 5 ? 4000000000000000LL : 0));
		tw_end_row(&t);
	}
	tw_close(&t);
	pqcheck();
}

/* One STRING column holding vals, then NULL-terminated. */
static void string_file(const char *name, const char *const *vals, const struct jo_pq_opts *o)
{
	static const struct jo_pq_column col = { "s", JO_PQ_STRING, false };
	struct tw t;

	tw_open(&t, name, &col, 1, o, 1, 1);
	for (; *vals; vals++) {
		tw_cstr(&t, 0, *vals);
		tw_end_row(&t);
	}
	tw_close(&t);
}

static char *repeat(char c, size_t n, const char *tail)
{
	size_t tl = strlen(tail);
	char *s = malloc(n + tl + 1);

	assert_non_null(s);
	memset(s, c, n);
	memcpy(s + n, tail, tl + 1);
	return s;
}

static void parquet_long_strings_span_pages_and_bound_statistics(void **state)
{
	static const struct jo_pq_column cols[] = { { "s", JO_PQ_STRING, false },
						    { "b", JO_PQ_BINARY, true } };
	char *big = repeat('x', 1536 * 1024, ""), *bin = malloc(2 << 20);
	char *q5000 = repeat('q', 5000, ""), *q5000b = repeat('q', 5000, "b");
	char *q5000a = repeat('q', 5000, "a"), *q4097 = repeat('q', 4097, "");
	char *q4096 = repeat('q', 4096, ""), *z4096 = repeat('z', 4096, "");
	char *z4097 = repeat('z', 4097, "");
	struct tw t;

	(void)state;
	assert_non_null(bin);
	big[0] = 'm';
	rng = 7;
	for (size_t i = 0; i < 2 << 20; i++)
		bin[i] = (char)rnd();
	/* values longer than the default page (1 MiB): pages of one value */
	tw_open(&t, "long_values", cols, 2, NULL, 1, 3);
	tw_cstr(&t, 0, "a");
	tw_str(&t, 1, bin, 2 << 20);
	tw_end_row(&t);
	tw_cstr(&t, 0, big);
	tw_null(&t, 1);
	tw_end_row(&t);
	tw_cstr(&t, 0, "z");
	tw_str(&t, 1, bin, 10);
	tw_end_row(&t);
	tw_close(&t);

	/* the JO_PQ_STAT_MAX limit on a bound, and the order of cut values */
	string_file("max_4096_kept", (const char *const[]){ "a", z4096, NULL }, NULL);
	string_file("max_4097_dropped", (const char *const[]){ "a", z4097, NULL }, NULL);
	string_file("min_after_long", (const char *const[]){ q5000, "r", "q", NULL }, NULL);
	string_file("min_4096_after_long", (const char *const[]){ q5000, "r", q4096, NULL },
		    NULL);
	string_file("min_4097_after_long", (const char *const[]){ q5000, "r", q4097, NULL },
		    NULL);
	string_file("max_long_common_prefix",
		    (const char *const[]){ q5000b, q4097, q5000a, "c", NULL }, NULL);
	pqcheck();
	free(big);
	free(bin);
	free(q5000);
	free(q5000a);
	free(q5000b);
	free(q4097);
	free(q4096);
	free(z4096);
	free(z4097);
}

static void parquet_many_rows_make_row_groups_and_pages(void **state)
{
	static const struct jo_pq_column cols[] = {
		{ "inode", JO_PQ_INT64, false }, { "mode", JO_PQ_INT32, true },
		{ "path", JO_PQ_STRING, true },  { "mtime", JO_PQ_TIMESTAMP_NS, false },
		{ "dir", JO_PQ_BOOL, true },
	};
	struct jo_pq_opts o = { .row_group_bytes = 256 << 10, .page_bytes = 8 << 10,
				.zstd_level = 1 };
	struct tw t;
	int run = 0;
	bool null_run = false;
	size_t base = heap_used(), peak = 0;

	(void)state;
	rng = 42;
	tw_open(&t, "many_rows", cols, 5, &o, 4, 100);
	for (int i = 0; i < 200000; i++) {
		char path[64];

		if (i % 500 == 0 && heap_used() > peak)
			peak = heap_used();

		tw_i64(&t, 0, (int64_t)i + 1);
		if (run-- <= 0) {  /* nulls and values in runs of 1..40: RLE and bit-packed */
			run = (int)(rnd() % 40);
			null_run = !null_run;
		}
		if (null_run)
			tw_null(&t, 1);
		else
			tw_i32(&t, 1, (int32_t)(rnd() % 0777));
		if (rnd() % 10 == 0) {
			tw_null(&t, 2);
		} else {
			snprintf(path, sizeof(path), "/d%llu/f%016llx",
				 (unsigned long long)(rnd() % 100), (unsigned long long)rnd());
			tw_cstr(&t, 2, path);
		}
		tw_i64(&t, 3, (int64_t)(rnd() >> 2));
		if (rnd() % 2)
			tw_null(&t, 4);
		else
			tw_bool(&t, 4, rnd() % 2);
		tw_end_row(&t);
	}
	tw_close(&t);
	/* memory is bounded by the row group size, not by the rows written
	 * (2 x 256 KiB of chunks, pages of 8 KiB, the zstd context) */
	fprintf(stderr, "heap: %zu KiB above the start at most\n", (peak - base) >> 10);
	if (base)
		assert_true(peak - base < (size_t)2 << 20);
	pqcheck();
}

/* Booleans and nulls are small: a page also ends at 2^20 rows (its counts are int32). */
static void parquet_page_ends_at_a_row_limit(void **state)
{
	static const struct jo_pq_column col = { "b", JO_PQ_BOOL, false };
	struct jo_pq_opts o = { .page_bytes = 64 << 20, .row_group_bytes = 64 << 20 };
	struct tw t;

	(void)state;
	tw_open(&t, "bool_rows", &col, 1, &o, 1, 3);
	for (int i = 0; i < (2 << 20) + 1000; i++) {
		tw_bool(&t, 0, i % 3 == 0);
		tw_end_row(&t);
	}
	tw_close(&t);
	pqcheck();
}

static void parquet_zero_rows_is_a_valid_empty_table(void **state)
{
	struct jo_err err = { 0 };
	struct stat st;
	struct tw t;
	char path[512];

	(void)state;
	tw_open(&t, "zero_rows", every_col, NEVERY, NULL, 0, 0);
	tw_close(&t);
	/* also when the only row begun was dropped */
	tw_open(&t, "zero_rows_after_dropped_row", every_col, NEVERY, NULL, 0, 0);
	assert_int_equal(jo_pq_put_i64(t.w, 0, 5, &err), 0);
	assert_int_equal(jo_pq_end_row(t.w, &err), JO_EINVAL);
	tw_close(&t);
	snprintf(path, sizeof(path), "%s/zero_rows.parquet", tmpdir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(st.st_size > 12 && st.st_size < 4096);
	pqcheck();
}

static void parquet_rejects_bad_calls_and_keeps_writing(void **state)
{
	static const struct jo_pq_column cols[] = {
		{ "n", JO_PQ_INT64, false }, { "s", JO_PQ_STRING, true }, { "i", JO_PQ_INT32, false },
		{ "raw", JO_PQ_BINARY, false },
	};
	struct jo_pq_writer *w = (struct jo_pq_writer *)&w;
	struct jo_err err = { 0 };
	struct tw t;
	int fd;
	char path[512];

	(void)state;
	/* bad schemas and options */
	snprintf(path, sizeof(path), "%s/scratch", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(jo_pq_open(&w, fd, cols, 0, NULL, &err), JO_EINVAL);
	assert_null(w);
	assert_int_equal(jo_pq_open(&w, fd, (const struct jo_pq_column[]){ { "", JO_PQ_INT64, 0 } },
				    1, NULL, &err), JO_EINVAL);
	assert_int_equal(jo_pq_open(&w, fd, (const struct jo_pq_column[]){ { NULL, JO_PQ_INT64, 0 } },
				    1, NULL, &err), JO_EINVAL);
	assert_int_equal(jo_pq_open(&w, fd, (const struct jo_pq_column[]){ { "a", JO_PQ_INT64, 0 },
									{ "a", JO_PQ_BOOL, 0 } },
				    2, NULL, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "'a' twice"));
	assert_int_equal(jo_pq_open(&w, fd, (const struct jo_pq_column[]){ { "a", 42, 0 } }, 1,
				    NULL, &err), JO_EINVAL);
	assert_int_equal(jo_pq_open(&w, fd, cols, 4, &(struct jo_pq_opts){ .zstd_level = 99 }, &err),
			 JO_EINVAL);
	assert_int_equal(jo_pq_open(&w, fd, cols, 4,
				    &(struct jo_pq_opts){ .page_bytes = JO_PQ_MAX_VALUE + 1 }, &err),
			 JO_EINVAL);
	/* the offsets in the footer count from 0: an fd elsewhere is refused */
	assert_int_equal(write(fd, "xxxxx", 5), 5);
	assert_int_equal(jo_pq_open(&w, fd, cols, 4, NULL, &err), JO_EINVAL);
	assert_null(w);
	close(fd);
	/* an fd that cannot be written: the leading magic fails */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(jo_pq_open(&w, fd, cols, 4, NULL, &err), JO_EIO);
	assert_null(w);
	close(fd);

	/* misuse of an open writer: an error, and the file stays right */
	tw_open(&t, "after_errors", cols, 4, NULL, 1, 4);
	tw_i64(&t, 0, 1);
	tw_cstr(&t, 1, "one");
	tw_i32(&t, 2, 1);
	tw_cstr(&t, 3, "\xff");
	tw_end_row(&t);
	assert_int_equal(jo_pq_put_i32(t.w, 0, 7, &err), JO_EINVAL);      /* wrong type */
	assert_non_null(strstr(err.msg, "'n' is int64"));
	assert_int_equal(jo_pq_put_str(t.w, 0, "x", 1, &err), JO_EINVAL);
	assert_int_equal(jo_pq_put_bool(t.w, 2, true, &err), JO_EINVAL);
	assert_int_equal(jo_pq_put_i64(t.w, 4, 7, &err), JO_EINVAL);       /* no such column */
	assert_int_equal(jo_pq_put_null(t.w, 0, &err), JO_EINVAL);         /* required */
	assert_non_null(strstr(err.msg, "required column 'n'"));
	assert_int_equal(jo_pq_put_str(t.w, 1, "\xc0\x80", 2, &err), JO_EINVAL); /* overlong */
	assert_int_equal(jo_pq_put_str(t.w, 1, "\xed\xa0\x80", 3, &err), JO_EINVAL); /* surrogate */
	assert_int_equal(jo_pq_put_str(t.w, 1, "\xf4\x90\x80\x80", 4, &err), JO_EINVAL);
	assert_int_equal(jo_pq_put_str(t.w, 1, "ab\xe2\x82", 4, &err), JO_EINVAL); /* cut */
	assert_int_equal(jo_pq_put_str(t.w, 1, "\x80", 1, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "not UTF-8"));
	assert_int_equal(jo_pq_put_str(t.w, 1, NULL, 3, &err), JO_EINVAL);
	assert_int_equal(jo_pq_put_str(t.w, 1, "x", JO_PQ_MAX_VALUE + 1, &err), JO_EINVAL);
	/* a row with a column missing is dropped whole (its values reach neither
	 * the pages nor the statistics: pqcheck would see 'zzz' as the max) */
	assert_int_equal(jo_pq_put_i64(t.w, 0, 999, &err), 0);
	assert_int_equal(jo_pq_put_str(t.w, 1, "zzz", 3, &err), 0);
	assert_int_equal(jo_pq_put_i64(t.w, 0, 998, &err), JO_EINVAL);     /* set twice */
	assert_non_null(strstr(err.msg, "set twice"));
	assert_int_equal(jo_pq_put_str(t.w, 3, "zzz", 3, &err), 0);
	assert_int_equal(jo_pq_end_row(t.w, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "column 'i' not set"));
	/* then the writer goes on */
	tw_i32(&t, 2, -2);  /* any order */
	tw_cstr(&t, 3, "");
	tw_null(&t, 1);
	tw_i64(&t, 0, 2);
	tw_end_row(&t);
	tw_cstr(&t, 1, "\xf4\x8f\xbf\xbf \xef\xbf\xbf");  /* the largest code points */
	tw_i64(&t, 0, 3);
	tw_i32(&t, 2, 3);
	tw_cstr(&t, 3, "\xc0\x80");  /* binary takes any bytes */
	tw_end_row(&t);
	tw_close(&t);

	/* closing with a row begun writes no footer */
	snprintf(path, sizeof(path), "%s/unfinished", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(jo_pq_open(&w, fd, cols, 4, NULL, &err), 0);
	assert_int_equal(jo_pq_put_i64(w, 0, 1, &err), 0);
	assert_int_equal(jo_pq_close(w, NULL, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "not ended"));
	assert_int_equal(lseek(fd, 0, SEEK_END), 4);  /* "PAR1" only */
	close(fd);
	jo_pq_abort(NULL);
	pqcheck();
}

/* A write error (disk full) fails the writer: every later call says so. */
static void parquet_write_error_is_sticky(void **state)
{
	static const struct jo_pq_column col = { "n", JO_PQ_INT64, false };
	struct jo_pq_opts o = { .row_group_bytes = 1 };  /* a row group per row */
	struct jo_pq_writer *w;
	struct jo_err err = { 0 };
	uint64_t rows = 7;
	char path[512];
	int fd, full = open("/dev/full", O_WRONLY | O_CLOEXEC);

	(void)state;
	if (full < 0)
		skip();
	snprintf(path, sizeof(path), "%s/full", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(jo_pq_open(&w, fd, &col, 1, &o, &err), 0);
	assert_true(dup2(full, fd) == fd);  /* the disk fills up */
	assert_int_equal(jo_pq_put_i64(w, 0, 1, &err), 0);
	assert_int_equal(jo_pq_end_row(w, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "write"));
	assert_int_equal(jo_pq_put_i64(w, 0, 2, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "failed earlier: parquet: write: No space left"));
	assert_int_equal(jo_pq_end_row(w, &err), JO_EIO);
	assert_int_equal(jo_pq_close(w, &rows, &err), JO_EIO);
	assert_int_equal(rows, 0);
	close(fd);
	close(full);
}

/* Random valid UTF-8: mostly ASCII, some 2-, 3- and 4-byte code points. */
static size_t rand_utf8(char *s, size_t max)
{
	size_t n = 0, want = rnd() % 4 == 0 ? 0 : rnd() % max;

	while (n + 4 <= want) {
		uint32_t k = (uint32_t)(rnd() % 10), cp;

		if (k < 6) {
			s[n++] = (char)(0x20 + rnd() % 0x5f);
		} else if (k < 8) {
			cp = 0x80 + (uint32_t)(rnd() % 0x780);
			s[n++] = (char)(0xC0 | cp >> 6);
			s[n++] = (char)(0x80 | (cp & 0x3F));
		} else if (k < 9) {
			do
				cp = 0x800 + (uint32_t)(rnd() % 0xF800);
			while (cp >= 0xD800 && cp <= 0xDFFF);
			s[n++] = (char)(0xE0 | cp >> 12);
			s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
			s[n++] = (char)(0x80 | (cp & 0x3F));
		} else {
			cp = 0x10000 + (uint32_t)(rnd() % 0x100000);
			s[n++] = (char)(0xF0 | cp >> 18);
			s[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
			s[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
			s[n++] = (char)(0x80 | (cp & 0x3F));
		}
	}
	return n;
}

static int64_t rand_int(int kind, int64_t row)
{
	switch (kind) {
	case 0: return (int64_t)rnd();               /* anything */
	case 1: return (int64_t)(rnd() % 21) - 10;   /* few distinct */
	case 2: return row * 3;                      /* sorted */
	default: return 42;                          /* constant */
	}
}

/* Random schemas, options and rows (seeded): pyarrow and DuckDB read back the same. */
static void parquet_random_tables_read_back_equal(void **state)
{
	enum { NFILES = 30, MAXCOLS = 10 };
	static char buf[80 << 10];

	(void)state;
	for (int f = 0; f < NFILES; f++) {
		struct jo_pq_column cols[MAXCOLS];
		int nullpct[MAXCOLS], kind[MAXCOLS];
		char names[MAXCOLS][24], name[32]; /* "c" and any size_t */
		size_t ncols, order[MAXCOLS];
		int nrows;
		struct jo_pq_opts o = JO_PQ_OPTS_INIT;
		struct tw t;

		rng = 1000 + (uint64_t)f;
		ncols = 1 + rnd() % MAXCOLS;
		nrows = f % 6 == 0 ? (int)(rnd() % 3) : (int)(rnd() % 5000);
		o.page_bytes = 512 + rnd() % (64 << 10);
		o.row_group_bytes = 2048 + rnd() % (1 << 20);
		o.zstd_level = (int[]){ 0, -5, 1, 3, 9 }[rnd() % 5];
		for (size_t c = 0; c < ncols; c++) {
			static const int pcts[] = { 0, 0, 10, 50, 90, 100 };

			snprintf(names[c], sizeof(names[c]), "c%zu", c);
			cols[c].name = names[c];
			cols[c].type = (enum jo_pq_type)(rnd() % 7);
			cols[c].nullable = rnd() % 2;
			nullpct[c] = cols[c].nullable ? pcts[rnd() % 6] : 0;
			kind[c] = (int)(rnd() % 4);
			order[c] = c;
		}
		snprintf(name, sizeof(name), "random_%02d", f);
		tw_open(&t, name, cols, ncols, &o, 0, 0);
		for (int r = 0; r < nrows; r++) {
			for (size_t c = ncols; c > 1; c--) {  /* put the columns in any order */
				size_t k = rnd() % c, x = order[c - 1];

				order[c - 1] = order[k];
				order[k] = x;
			}
			for (size_t i = 0; i < ncols; i++) {
				size_t c = order[i], n;

				if ((int)(rnd() % 100) < nullpct[c]) {
					tw_null(&t, c);
					continue;
				}
				switch (cols[c].type) {
				case JO_PQ_INT64:
				case JO_PQ_TIMESTAMP_NS:
				case JO_PQ_TIMESTAMP_US:
					tw_i64(&t, c, rand_int(kind[c], r));
					break;
				case JO_PQ_INT32:
					tw_i32(&t, c, (int32_t)rand_int(kind[c], r));
					break;
				case JO_PQ_BOOL:
					tw_bool(&t, c, kind[c] == 3 ? true : rnd() % 2);
					break;
				case JO_PQ_STRING:
					n = rand_utf8(buf, rnd() % 200 == 0 ? sizeof(buf) : 300);
					tw_str(&t, c, buf, n);
					break;
				case JO_PQ_BINARY:
					n = rnd() % 200 == 0 ? sizeof(buf) : rnd() % 40;
					for (size_t b = 0; b < n; b++)
						buf[b] = (char)(kind[c] == 3 ? 0xff : rnd());
					tw_str(&t, c, buf, n);
					break;
				}
			}
			tw_end_row(&t);
		}
		tw_close(&t);
	}
	pqcheck();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(parquet_writes_every_type_with_nulls_and_edge_values,
						setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_long_strings_span_pages_and_bound_statistics,
						setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_many_rows_make_row_groups_and_pages,
						setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_page_ends_at_a_row_limit, setup_dir,
						teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_zero_rows_is_a_valid_empty_table, setup_dir,
						teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_rejects_bad_calls_and_keeps_writing, setup_dir,
						teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_write_error_is_sticky, setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(parquet_random_tables_read_back_equal, setup_dir,
						teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
