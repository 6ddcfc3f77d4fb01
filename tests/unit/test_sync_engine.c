/*
 * test_sync_engine.c: listing streams and whole sync runs against an
 * in-memory object store (tests/unit/support/fake_obj.c) plugged in
 * through the object client's backend vtable. The fake can list in byte order, ignore start-after (as rclone
 * serve s3 does for keys that do not exist) or list directory by directory
 * (as SeaweedFS does), and counts requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/object/object.h"
#include "common/object/object_internal.h"
#include "support/fake_obj.h"
#include "sync/sync.h"

/* ---- the fake store (tests/unit/support/fake_obj.c) ---------------------- */

/* GETs of keys containing "FAIL" fail unless a test turns fail_keys off. */
static struct jo_obj *fake_new(void)
{
	struct jo_obj *o = fake_obj_new();

	fake_store(o)->fail_keys = true;
	return o;
}

static void put_str(struct jo_obj *o, const char *key, const char *s, int64_t mtime)
{
	fake_set(fake_store(o), key, s, strlen(s), mtime);
}

/* ---- stream tests -------------------------------------------------------- */

static void free_keys(char **k, int n);

static int collect(struct jo_obj *o, const char *prefix, const struct jo_sync_stream_opts *so,
		   char ***keys_out, int *ranges)
{
	struct jo_sync_stream *s = NULL;
	struct jo_err err = { 0 };
	assert_int_equal(jo_sync_stream_start(&s, o, prefix, so, &err), 0);
	struct jo_sync_ent e;
	int n = 0, rc;
	char **keys = NULL;
	while ((rc = jo_sync_stream_next(s, &e, &err)) == 1) {
		keys = realloc(keys, (size_t)(n + 1) * sizeof(*keys));
		keys[n++] = strdup(e.key);
	}
	if (ranges)
		*ranges = jo_sync_stream_ranges(s);
	jo_sync_stream_free(s);
	if (rc != 0) {
		free_keys(keys, n);
		keys = NULL;
	}
	*keys_out = keys;
	return rc == 0 ? n : rc;
}

static void free_keys(char **k, int n)
{
	for (int i = 0; i < n; i++)
		free(k[i]);
	free(k);
}

static void fill_flat(struct jo_obj *o, const char *prefix, int n)
{
	char key[256];
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%sobj-%06d", prefix, i * 7 % n);
		put_str(o, key, "x", 1000);
	}
	/* Some keys elsewhere that must not appear. */
	put_str(o, "other/a", "y", 1000);
	put_str(o, "zz", "y", 1000);
}

static void test_stream_ranges_flat(void **state)
{
	(void)state;
	struct jo_obj *o = fake_new();
	fill_flat(o, "p/", 3000);
	struct jo_sync_stream_opts so = { .threads = 4 };
	char **k;
	int ranges = 0;
	int n = collect(o, "p/", &so, &k, &ranges);
	assert_int_equal(n, 3000);
	assert_true(ranges >= 2);  /* the flat keyspace was split */
	for (int i = 0; i < n; i++) {
		char want[32];
		snprintf(want, sizeof(want), "obj-%06d", i);
		assert_string_equal(k[i], want);
	}
	free_keys(k, n);
	jo_obj_close(o);
}

static void test_stream_ignores_start_after(void **state)
{
	(void)state;
	struct jo_obj *o = fake_new();
	fake_store(o)->ignore_start_after = true;
	fill_flat(o, "p/", 500);
	struct jo_sync_stream_opts so = { .threads = 8 };
	char **k;
	int n = collect(o, "p/", &so, &k, NULL);
	assert_int_equal(n, 500);
	for (int i = 1; i < n; i++)
		assert_true(strcmp(k[i - 1], k[i]) < 0);
	free_keys(k, n);
	jo_obj_close(o);
}

static void add_dir_shapes(struct jo_obj *o)
{
	/* In SeaweedFS order "a/x" comes before "a.txt" and "a-b". */
	put_str(o, "d/a/x", "1", 1000);
	put_str(o, "d/a/y", "2", 1000);
	put_str(o, "d/a.txt", "3", 1000);
	put_str(o, "d/a-b", "4", 1000);
	put_str(o, "d/b", "5", 1000);
}

static void test_stream_detects_disorder(void **state)
{
	(void)state;
	struct jo_obj *o = fake_new();
	fake_store(o)->dir_first = true;
	add_dir_shapes(o);
	struct jo_sync_stream_opts so = { .threads = 1 };
	char **k;
	int n = collect(o, "d/", &so, &k, NULL);
	assert_int_equal(n, JO_SYNC_EORDER);
	free_keys(k, 0);
	/* Sort mode yields byte order. */
	so.sort = true;
	so.sort_mem = 1 << 20;
	n = collect(o, "d/", &so, &k, NULL);
	assert_int_equal(n, 5);
	assert_string_equal(k[0], "a-b");
	assert_string_equal(k[1], "a.txt");
	assert_string_equal(k[2], "a/x");
	assert_string_equal(k[3], "a/y");
	assert_string_equal(k[4], "b");
	free_keys(k, n);
	jo_obj_close(o);
}

static void test_stream_empty(void **state)
{
	(void)state;
	struct jo_obj *o = fake_new();
	put_str(o, "elsewhere", "1", 1);
	struct jo_sync_stream_opts so = { .threads = 4 };
	char **k;
	assert_int_equal(collect(o, "p/", &so, &k, NULL), 0);
	free(k);
	jo_obj_close(o);
}

/* ---- engine tests -------------------------------------------------------- */

static struct jo_sync_opts base_opts(void)
{
	struct jo_sync_opts o = { .transfers = 4, .list_threads = 3, .part_concurrency = 2,
				  .part_size = 5u << 20, .multipart_threshold = 6u << 20,
				  .max_delete = -1, .sort_mem = 1 << 20 };
	return o;
}

static int run(struct jo_obj *a, struct jo_obj *b, const struct jo_sync_opts *o,
	       struct jo_sync_summary *sum)
{
	struct jo_objurl sa, sb;
	fake_side(&sa, "", "mem://a", "src/");
	fake_side(&sb, "", "mem://b", "dst/");
	struct jo_err err = { 0 };
	int rc = jo_sync_run(&sa, a, &sb, b, o, sum, &err);
	if (rc)
		print_message("run: %s\n", err.msg);
	jo_objurl_free(&sa);
	jo_objurl_free(&sb);
	return rc;
}

static const char *get_data(struct jo_obj *o, const char *key, size_t *len)
{
	ssize_t i = fake_find(fake_store(o), key);
	if (i < 0)
		return NULL;
	*len = fake_store(o)->o[i].len;
	return (const char *)fake_store(o)->o[i].data;
}

static void test_engine_sync_rerun_delete(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/jo-sync-test-XXXXXX";
	int fd = mkstemp(tmpl);
	assert_true(fd >= 0);
	close(fd);
	struct jo_sync_state *st = NULL;
	struct jo_err err = { 0 };
	assert_int_equal(jo_sync_state_open(&st, tmpl, false, &err), 0);

	struct jo_obj *a = fake_new(), *b = fake_new();
	char key[1100];
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "src/k%04d", i);
		put_str(a, key, key, 1000 + i);
	}
	put_str(a, "src/empty", "", 1000);
	/* A 1000-byte key and odd characters. */
	memset(key, 'L', sizeof(key));
	memcpy(key, "src/", 4);
	key[1000] = 0;
	put_str(a, key, "long", 1000);
	put_str(a, "src/sp ace/ü+%?.txt", "odd", 1000);
	/* Multipart-sized object (12 MiB > 6 MiB threshold). */
	size_t big = 12u << 20;
	char *bigdata = malloc(big);
	for (size_t i = 0; i < big; i++)
		bigdata[i] = (char)(i * 31 + 7);
	fake_set(fake_store(a), "src/big", bigdata, big, 1000);
	/* Extras in dst. */
	put_str(b, "dst/extra1", "e", 5000);
	put_str(b, "dst/zz/extra2", "e", 5000);
	/* dst has k0001 with a different size: must be replaced. */
	put_str(b, "dst/k0001", "different size", 5000);

	struct jo_sync_opts o = base_opts();
	o.state = st;
	struct jo_sync_summary sum;

	/* Dry run: nothing changes. */
	o.dry_run = true;
	o.delete_dst = true;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.would_copy, 204);
	assert_int_equal(sum.would_delete, 2);
	assert_int_equal(fake_store(b)->n, 3);
	assert_int_equal(fake_store(b)->puts, 0);

	/* Real run with --delete-dst. */
	o.dry_run = false;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.failed, 0);
	assert_int_equal(sum.copied, 204);
	assert_int_equal(sum.multipart, 1);
	assert_int_equal(sum.deleted, 2);
	assert_int_equal(fake_store(b)->n, 204);
	size_t len;
	const char *d = get_data(b, "dst/big", &len);
	assert_non_null(d);
	assert_int_equal(len, big);
	assert_memory_equal(d, bigdata, big);
	d = get_data(b, "dst/k0001", &len);
	assert_int_equal(len, 9);
	assert_memory_equal(d, "src/k0001", 9);
	assert_non_null(get_data(b, "dst/sp ace/ü+%?.txt", &len));

	/* Rerun: nothing copied, no GET at all. */
	int gets = fake_store(a)->gets;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.copied, 0);
	assert_int_equal(sum.skipped, 204);
	assert_int_equal(fake_store(a)->gets, gets);

	/* Change one source object (same size, newer mtime, new content). */
	put_str(a, "src/k0005", "src/K0005", 9999);
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.copied, 1);
	d = get_data(b, "dst/k0005", &len);
	assert_memory_equal(d, "src/K0005", 9);

	/* Brakes: a failing copy blocks deletes; --max-delete blocks them too. */
	put_str(b, "dst/extra3", "e", 5000);
	put_str(a, "src/FAIL", "boom", 1000);
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.failed, 1);
	assert_int_equal(sum.deleted, 0);
	assert_true(sum.delete_refused);
	assert_non_null(get_data(b, "dst/extra3", &len));
	fake_del(a, "src/FAIL", &err);
	o.max_delete = 0;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_true(sum.delete_refused);
	assert_non_null(get_data(b, "dst/extra3", &len));
	o.max_delete = 1;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_false(sum.delete_refused);
	assert_int_equal(sum.deleted, 1);

	/* Empty source: never delete. */
	struct jo_obj *empty = fake_new();
	o.max_delete = -1;
	assert_int_equal(run(empty, b, &o, &sum), 0);
	assert_true(sum.delete_refused);
	assert_int_equal(sum.deleted, 0);
	assert_int_equal(fake_store(b)->n, 204);

	free(bigdata);
	jo_obj_close(a);
	jo_obj_close(b);
	jo_obj_close(empty);
	jo_sync_state_close(st);
	unlink(tmpl);
	char wal[200];
	snprintf(wal, sizeof(wal), "%s-wal", tmpl);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", tmpl);
	unlink(wal);
}

static void test_engine_unordered_source(void **state)
{
	(void)state;
	struct jo_obj *a = fake_new(), *b = fake_new();
	fake_store(a)->dir_first = true;
	put_str(a, "src/a/x", "1", 1000);
	put_str(a, "src/a/y", "2", 1000);
	put_str(a, "src/a.txt", "3", 1000);
	put_str(a, "src/a-b", "4", 1000);
	/* dst already has a/x: with a broken merge it would look extra. */
	put_str(b, "dst/a/x", "1", 5000);
	struct jo_sync_opts o = base_opts();
	o.list_threads = 1;
	o.delete_dst = true;
	struct jo_sync_summary sum;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.order_restarts, 1);
	assert_int_equal(sum.deleted, 0);
	assert_int_equal(sum.failed, 0);
	assert_int_equal(fake_store(b)->n, 4);
	jo_obj_close(a);
	jo_obj_close(b);
}

static void test_engine_filters_and_modes(void **state)
{
	(void)state;
	struct jo_obj *a = fake_new(), *b = fake_new();
	put_str(a, "src/keep.txt", "1", 1000);
	put_str(a, "src/skip.log", "2", 1000);
	put_str(a, "src/dir/x.txt", "3", 1000);
	put_str(b, "dst/old.log", "old", 1000);   /* excluded: not deleted */
	put_str(b, "dst/keep.txt", "9", 500);     /* same size, older: default copies */
	struct jo_sync_filter *f;
	struct jo_err err = { 0 };
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_add(f, '-', "*.log", &err), 0);
	struct jo_sync_opts o = base_opts();
	o.filter = f;
	o.delete_dst = true;
	o.cmp.mode = JO_SYNC_CMP_SIZE;
	struct jo_sync_summary sum;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.copied, 1);          /* dir/x.txt only: size-only */
	assert_int_equal(sum.excluded, 2);
	assert_int_equal(sum.deleted, 0);
	size_t len;
	assert_non_null(get_data(b, "dst/old.log", &len));
	assert_null(get_data(b, "dst/skip.log", &len));
	o.cmp.mode = JO_SYNC_CMP_DEFAULT;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.copied, 1);          /* keep.txt: dst older */
	assert_memory_equal(get_data(b, "dst/keep.txt", &len), "1", 1);
	/* --existing: nothing new appears. */
	put_str(a, "src/new.txt", "n", 1000);
	o.cmp.existing = true;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_null(get_data(b, "dst/new.txt", &len));
	jo_sync_filter_free(f);
	jo_obj_close(a);
	jo_obj_close(b);
}

static void test_engine_resume_listing(void **state)
{
	(void)state;
	char tmpl[] = "/tmp/jo-sync-resume-XXXXXX";
	int fd = mkstemp(tmpl);
	close(fd);
	struct jo_sync_state *st = NULL;
	struct jo_err err = { 0 };
	assert_int_equal(jo_sync_state_open(&st, tmpl, false, &err), 0);
	struct jo_obj *a = fake_new(), *b = fake_new();
	char key[64];
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "src/k%03d", i);
		put_str(a, key, key, 1000);
	}
	put_str(a, "src/k050FAIL", "boom", 1000);
	struct jo_sync_opts o = base_opts();
	o.state = st;
	o.transfers = 1;
	struct jo_sync_summary sum;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_int_equal(sum.failed, 1);
	assert_int_equal(sum.copied, 100);
	char *pos = NULL;
	assert_int_equal(jo_sync_state_getkv(st, "listpos", &pos, &err), 0);
	assert_non_null(pos);
	assert_string_equal(pos, "k050");  /* everything up to k050 is done */
	free(pos);
	/* --resume lists only after the saved position. */
	fake_store(a)->fail_keys = false;
	o.resume = true;
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_true(sum.resumed_listing);
	assert_int_equal(sum.src_listed, 50);
	assert_int_equal(sum.copied, 1);
	assert_int_equal(sum.failed, 0);
	size_t len;
	assert_non_null(get_data(b, "dst/k050FAIL", &len));
	/* A clean run clears the position: the next one lists everything. */
	assert_int_equal(run(a, b, &o, &sum), 0);
	assert_false(sum.resumed_listing);
	assert_int_equal(sum.src_listed, 101);
	assert_int_equal(sum.copied, 0);
	jo_obj_close(a);
	jo_obj_close(b);
	jo_sync_state_close(st);
	unlink(tmpl);
	char aux[200];
	snprintf(aux, sizeof(aux), "%s-wal", tmpl);
	unlink(aux);
	snprintf(aux, sizeof(aux), "%s-shm", tmpl);
	unlink(aux);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_ranges_flat),
		cmocka_unit_test(test_stream_ignores_start_after),
		cmocka_unit_test(test_stream_detects_disorder),
		cmocka_unit_test(test_stream_empty),
		cmocka_unit_test(test_engine_sync_rerun_delete),
		cmocka_unit_test(test_engine_unordered_source),
		cmocka_unit_test(test_engine_filters_and_modes),
		cmocka_unit_test(test_engine_resume_listing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
