/*
 * Unit tests for the leakcheck object lister: the real "file" object backend
 * in a temp dir, and the same backend with a list operation that fails in the
 * middle of one prefix (a fake wrapped around it through the vtable).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/extsort.h"
#include "common/object/object.h"
#include "common/object/object_internal.h"
#include "leakcheck/leak.h"
#include "support/testutil.h"

struct fx {
	char dir[128];
	struct jo_obj *obj;
	char foreign[8][128];
	int nforeign;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;
	struct jo_err err = { 0 };
	char bucket[160];

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_leak_list-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(bucket, sizeof(bucket), "%s/", f->dir);
	o.storage = "file";
	o.bucket = bucket;
	if (jo_obj_open(&f->obj, &o, &err))
		fail_msg("open: %s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	jo_obj_close(f->obj);
	assert_int_equal(tu_rm_rf(f->dir), 0);
	free(f);
	return 0;
}

static void put(struct fx *f, const char *key, size_t len)
{
	struct jo_err err = { 0 };
	char buf[64] = { 0 };

	assert_true(len <= sizeof(buf));
	if (jo_obj_put(f->obj, key, buf, len, NULL, &err))
		fail_msg("put %s: %s", key, err.msg);
}

static int on_foreign(const struct leak_item *it, void *payload)
{
	struct fx *f = payload;

	assert_int_equal(it->kind, LEAK_FOREIGN);
	assert_true(f->nforeign < 8);
	snprintf(f->foreign[f->nforeign++], sizeof(f->foreign[0]), "%s", it->key);
	return 0;
}

static bool foreign_has(const struct fx *f, const char *key)
{
	for (int i = 0; i < f->nforeign; i++)
		if (!strcmp(f->foreign[i], key))
			return true;
	return false;
}

static const struct leak_density *test_density;  /* list_all's density map, or NULL */

/* List, sort and return the records as "id/indx/bsize/size" lines. */
static int list_all(struct fx *f, bool hash_prefix, int threads, char *out, size_t cap,
		    struct leak_list_stats *st, struct jo_err *err)
{
	struct jo_xsort *xs = NULL;
	struct leak_list_opts lo = {
		.volname = "vol", .hash_prefix = hash_prefix, .block_size = 4u << 20,
		.threads = threads, .foreign_cb = on_foreign, .payload = f, .density = test_density,
	};
	const void *rec;
	size_t len, used = 0;
	int rc;

	assert_int_equal(jo_xsort_new(&xs, NULL, err), 0);
	rc = leak_list_objects(f->obj, &lo, xs, st, err);
	if (!rc)
		rc = jo_xsort_finish(xs, err);
	out[0] = '\0';
	while (!rc && (rc = jo_xsort_next(xs, &rec, &len, err)) == 1) {
		uint64_t id, size;
		uint32_t indx, bsize;
		int64_t mtime;

		assert_int_equal(len, LEAK_OBJ_REC_LEN);
		leak_obj_decode(rec, &id, &indx, &bsize, &size, &mtime);
		assert_true(mtime > 1600000000);
		used += (size_t)snprintf(out + used, cap - used, "%llu/%u/%u/%llu ",
					 (unsigned long long)id, indx, bsize,
					 (unsigned long long)size);
		rc = 0;
	}
	jo_xsort_free(xs);
	return rc;
}

static void list_plain_layout_sorted_and_foreign_reported(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char out[1024];

	put(f, "vol/juicefs_uuid", 36);                   /* not under chunks/ */
	put(f, "vol/chunks/2/2000/2000123_3_5", 5);
	put(f, "vol/chunks/0/0/1_0_100", 10);
	put(f, "vol/chunks/0/1/1500_1_4194304", 20);
	put(f, "vol/chunks/0/1/1500_0_4194304", 20);
	put(f, "vol/chunks/0/0/junk", 3);                 /* not a block name */
	put(f, "vol/chunks/0/7/1_0_100", 3);              /* block name, wrong place */
	put(f, "vol/chunks/stray", 1);                    /* directly under chunks/ */
	put(f, "other/chunks/0/0/9_0_100", 1);            /* another volume */
	assert_int_equal(list_all(f, false, 4, out, sizeof(out), &st, &err), 0);
	assert_string_equal(out, "1/0/100/10 1500/0/4194304/20 1500/1/4194304/20 2000123/3/5/5 ");
	assert_int_equal(st.blocks, 4);
	assert_int_equal(st.foreign, 3);
	assert_int_equal(st.listed, 7);
	assert_true(foreign_has(f, "vol/chunks/0/0/junk"));
	assert_true(foreign_has(f, "vol/chunks/0/7/1_0_100"));
	assert_true(foreign_has(f, "vol/chunks/stray"));
	/* root, 0/, 2/, 0/0/, 0/1/, 0/7/, 2/2000/ */
	assert_int_equal(st.prefixes, 7);
}

static void list_hash_prefix_layout(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char out[1024];

	put(f, "vol/chunks/01/0/1_0_100", 7);
	put(f, "vol/chunks/BB/5/5000123_1_4194304", 8);
	put(f, "vol/chunks/02/0/1_0_100", 7);               /* wrong hash dir */
	assert_int_equal(list_all(f, true, 32, out, sizeof(out), &st, &err), 0);
	assert_string_equal(out, "1/0/100/7 5000123/1/4194304/8 ");
	assert_int_equal(st.foreign, 1);
	assert_true(foreign_has(f, "vol/chunks/02/0/1_0_100"));
}

static void list_empty_volume(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char out[64];

	assert_int_equal(list_all(f, false, 3, out, sizeof(out), &st, &err), 0);
	assert_string_equal(out, "");
	assert_int_equal(st.blocks, 0);
}

/* ---- a list operation that fails in the middle of one prefix ---- */

static const struct jo_obj_ops *real_ops;
static struct jo_obj_ops failing_ops;

struct fail_wrap {
	jo_obj_list_cb cb;
	void *payload;
	int seen;
};

static int fail_cb(const struct jo_obj_info *info, void *payload)
{
	struct fail_wrap *w = payload;
	int rc = w->cb(info, w->payload);

	if (rc)
		return rc;
	if (++w->seen == 2)
		return JO_ECONNECT; /* the server went away after two entries */
	return 0;
}

static int failing_list(struct jo_obj *o, const char *prefix, const char *start_after,
			const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
			struct jo_err *err)
{
	struct fail_wrap w = { cb, payload, 0 };

	if (strcmp(prefix, "vol/chunks/0/1/") != 0)
		return real_ops->list(o, prefix, start_after, delimiter, page, cb, payload, err);
	int rc = real_ops->list(o, prefix, start_after, delimiter, page, fail_cb, &w, err);

	if (rc == JO_ECONNECT)
		jo_err_set(err, rc, "connection refused");
	return rc;
}

static void list_error_midway_fails_the_whole_listing(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char out[1024], key[64];

	for (int i = 0; i < 50; i++) {
		snprintf(key, sizeof(key), "vol/chunks/0/%d/%d_0_100", i, i * 1000 + 1);
		put(f, key, 4);
		snprintf(key, sizeof(key), "vol/chunks/0/%d/%d_0_100", i, i * 1000 + 2);
		put(f, key, 4);
		snprintf(key, sizeof(key), "vol/chunks/0/%d/%d_0_100", i, i * 1000 + 3);
		put(f, key, 4);
	}
	real_ops = f->obj->ops;
	failing_ops = *real_ops;
	failing_ops.list = failing_list;
	f->obj->ops = &failing_ops;
	int rc = list_all(f, false, 8, out, sizeof(out), &st, &err);

	f->obj->ops = real_ops;
	assert_int_equal(rc, JO_ECONNECT);
	assert_non_null(strstr(err.msg, "list 'vol/chunks/0/1/'"));
	assert_non_null(strstr(err.msg, "connection refused"));
}

/* ---- key ranges: the split keys, and a long leaf listed by every lister ---- */

static void check_split(const char *prefix, const char *after, const char *upto,
			const char *chars, int n, int want_min)
{
	bool alpha[256] = { false };
	char **keys = NULL;
	int k;

	jo_obj_key_alphabet_add(alpha, chars);
	k = jo_obj_key_split(prefix, after, upto, alpha, n, &keys);
	assert_true(k >= want_min);
	assert_true(k < n);
	for (int i = 0; i < k; i++) {
		assert_int_equal(strncmp(keys[i], prefix, strlen(prefix)), 0);
		assert_true(strcmp(keys[i], after) > 0);
		if (upto)
			assert_true(strcmp(keys[i], upto) < 0);
		if (i)
			assert_true(strcmp(keys[i - 1], keys[i]) < 0);
	}
	for (int i = 0; i < k; i++)
		free(keys[i]);
	free(keys);
}

static void key_split_cuts_between_its_ends(void **state)
{
	bool alpha[256] = { false };
	char **keys = NULL;

	(void)state;
	/* an open range after a JuiceFS block key: the next ids' digits */
	check_split("v/chunks/0/0/", "v/chunks/0/0/101_5_65536", NULL, "0_", 8, 7);
	/* a closed range whose ends part at once: deeper into after's branch */
	check_split("p/", "p/2345_1_9", "p/3", "0_", 8, 7);
	check_split("p/", "p/2", "p/3", "0_", 4, 3);
	/* letters and punctuation */
	check_split("", "abc/x-1", "abd", "a-/", 16, 5);
	check_split("", "k", NULL, "a", 40, 25);
	/* nothing fits between "p/a" and "p/a0" with the byte '0' alone */
	jo_obj_key_alphabet_add(alpha, "0");
	assert_int_equal(jo_obj_key_split("p/", "p/a", "p/a0", alpha, 8, &keys), 0);
	assert_null(keys);
	/* ends out of order, or not under the prefix: no cut */
	assert_int_equal(jo_obj_key_split("p/", "p/9", "p/1", alpha, 8, &keys), 0);
	assert_int_equal(jo_obj_key_split("p/", "q/1", NULL, alpha, 8, &keys), 0);
}

/* Random ends and alphabets: every split key lies strictly inside its range. */
static void key_split_random_ranges_hold_their_keys(void **state)
{
	unsigned int seed = 12345;
	const char pool[] = "0123456789_az-/.A";

	(void)state;
	for (int round = 0; round < 2000; round++) {
		char a[12], b[12], chars[8];
		int la = 1 + rand_r(&seed) % 10, lb = 1 + rand_r(&seed) % 10;
		int lc = 1 + rand_r(&seed) % 6;

		for (int i = 0; i < la; i++)
			a[i] = pool[rand_r(&seed) % (sizeof(pool) - 1)];
		a[la] = '\0';
		for (int i = 0; i < lb; i++)
			b[i] = pool[rand_r(&seed) % (sizeof(pool) - 1)];
		b[lb] = '\0';
		for (int i = 0; i < lc; i++)
			chars[i] = pool[rand_r(&seed) % (sizeof(pool) - 1)];
		chars[lc] = '\0';
		if (strcmp(a, b) == 0)
			continue;
		if (strcmp(a, b) > 0) {
			char t[12];

			memcpy(t, a, sizeof(t));
			memcpy(a, b, sizeof(a));
			memcpy(b, t, sizeof(b));
		}
		check_split("", a, round % 3 ? b : NULL, chars, 2 + round % 20, 0);
	}
}

#define LEAF_IDS 600
#define LEAF_BLOCKS 10
#define LEAF_KEYS (LEAF_IDS * LEAF_BLOCKS)

/* Check the sorted records: every block of ids 1..LEAF_IDS once, in order. */
static void check_leaf(const char *out)
{
	const char *p = out;

	for (unsigned i = 1; i <= LEAF_IDS; i++)
		for (unsigned b = 0; b < LEAF_BLOCKS; b++) {
			char want[64];

			snprintf(want, sizeof(want), "%u/%u/100/4 ", i, b);
			assert_int_equal(strncmp(p, want, strlen(want)), 0);
			p += strlen(want);
		}
	assert_string_equal(p, "");
}

/* One leaf (ids below 1000 all live in chunks/0/0/) of LEAF_KEYS blocks. */
static void fill_leaf(struct fx *f)
{
	char key[64];

	for (unsigned i = 1; i <= LEAF_IDS; i++)
		for (unsigned b = 0; b < LEAF_BLOCKS; b++) {
			snprintf(key, sizeof(key), "vol/chunks/0/0/%u_%u_100", i, b);
			put(f, key, 4);
		}
}

/* Count what the store hands out: a range must not read far past its end. */
static _Atomic unsigned long delivered, list_calls;

struct count_wrap {
	jo_obj_list_cb cb;
	void *payload;
};

static int count_cb(const struct jo_obj_info *info, void *payload)
{
	struct count_wrap *w = payload;

	delivered++;
	return w->cb(info, w->payload);
}

static int counting_list(struct jo_obj *o, const char *prefix, const char *start_after,
			 const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
			 struct jo_err *err)
{
	struct count_wrap w = { cb, payload };

	list_calls++;
	return real_ops->list(o, prefix, start_after, delimiter, page, count_cb, &w, err);
}

static void long_flat_leaf_is_cut_into_ranges(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char *out = malloc(LEAF_KEYS * 24);

	fill_leaf(f);
	real_ops = f->obj->ops;
	failing_ops = *real_ops;
	failing_ops.list = counting_list;
	f->obj->ops = &failing_ops;
	delivered = list_calls = 0;
	assert_int_equal(list_all(f, false, 8, out, LEAF_KEYS * 24, &st, &err), 0);
	f->obj->ops = real_ops;
	/* each range stops at its first key past its end: every key is read about once */
	print_message("%lu keys delivered in %lu listings, %llu ranges\n", (unsigned long)delivered,
		      (unsigned long)list_calls, (unsigned long long)st.ranges);
	assert_true(delivered <= LEAF_KEYS + list_calls + 8);
	assert_int_equal(st.blocks, LEAF_KEYS);
	assert_int_equal(st.listed, LEAF_KEYS);
	assert_true(st.ranges > 0);       /* the one leaf was listed in pieces */
	check_leaf(out);
	free(out);
}

/* What the leaf listings ask of an S3 store: requests, and keys per page (0 is a full 1000). */
static _Atomic unsigned long leaf_calls, leaf_asked;
static const char *asked_leaf = "vol/chunks/0/0/";

static int asking_list(struct jo_obj *o, const char *prefix, const char *start_after,
		       const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		       struct jo_err *err)
{
	if (strcmp(prefix, asked_leaf) == 0) {
		leaf_calls++;
		leaf_asked += page > 0 && page < 1000 ? (unsigned long)page : 1000;
	}
	return real_ops->list(o, prefix, start_after, delimiter, page, cb, payload, err);
}

static int list_with_density(struct fx *f, const struct leak_density *d, char *out,
			     struct leak_list_stats *st)
{
	struct jo_err err = { 0 };
	int rc;

	real_ops = f->obj->ops;
	failing_ops = *real_ops;
	failing_ops.list = asking_list;
	f->obj->ops = &failing_ops;
	leaf_calls = leaf_asked = 0;
	test_density = d;
	rc = list_all(f, false, 8, out, LEAF_KEYS * 24, st, &err);
	test_density = NULL;
	f->obj->ops = real_ops;
	if (rc)
		fail_msg("list: %s", err.msg);
	print_message("%lu leaf requests asking for %lu keys, %llu ranges\n",
		      (unsigned long)leaf_calls, (unsigned long)leaf_asked,
		      (unsigned long long)st->ranges);
	return rc;
}

/* A density map over [0, next_chunk) expecting one slice of `size` bytes (4 MiB blocks) per id lo..hi. */
static void density_of(struct leak_density *d, uint64_t next_chunk, unsigned lo, unsigned hi,
		       uint64_t size)
{
	assert_int_equal(leak_density_init(d, next_chunk, 4u << 20), 0);
	for (unsigned i = lo; i <= hi; i++)
		leak_density_add(d, i, size);
}

/* 6000 expected keys in pieces of 2000; per piece 1000 + 1000 + the end, a page at most an eighth long. */
static void check_cut_in_three(const struct leak_list_stats *st)
{
	assert_int_equal(st->ranges, 3);
	assert_true(leaf_calls <= 3 * 3);
	assert_true(leaf_asked <= LEAF_KEYS + LEAF_KEYS / 8 + 3 * 32);
}

/*
 * The reference scan's density map cuts the leaf before it is listed, at
 * slice-id boundaries (ids 1..600 share leaf 0 in "ID_" order), and each
 * piece asks for about what it holds: every key once, and the pages asked
 * for hold little more than the leaf (the old cutting read ~2x on S3).
 */
static void density_cuts_a_leaf_before_it_is_listed(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct leak_density d;
	char *out = malloc(LEAF_KEYS * 24);

	fill_leaf(f);
	density_of(&d, 1000, 1, LEAF_IDS, (uint64_t)LEAF_BLOCKS * (4u << 20) - 7);
	assert_int_equal(d.total, LEAF_KEYS);
	assert_int_equal((int)leak_density_est(&d, 1, 1), LEAF_BLOCKS);
	list_with_density(f, &d, out, &st);
	assert_int_equal(st.blocks, LEAF_KEYS);
	assert_int_equal(st.listed, LEAF_KEYS);
	check_leaf(out);
	check_cut_in_three(&st);
	leak_density_free(&d);
	free(out);
}

/* A leaf of ids >= 1000 (same digit count: key order is id order) is cut the same way. */
static void density_cuts_a_leaf_of_high_ids(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct leak_density d;
	char key[64], *out = malloc(LEAF_KEYS * 24), *want = malloc(LEAF_KEYS * 24);
	size_t used = 0;

	want[0] = '\0';
	for (unsigned i = 5000; i < 5000 + LEAF_IDS; i++)
		for (unsigned b = 0; b < LEAF_BLOCKS; b++) {
			snprintf(key, sizeof(key), "vol/chunks/0/5/%u_%u_100", i, b);
			put(f, key, 4);
			used += (size_t)snprintf(want + used, LEAF_KEYS * 24 - used, "%u/%u/100/4 ", i, b);
		}
	density_of(&d, 6000, 5000, 5000 + LEAF_IDS - 1, (uint64_t)LEAF_BLOCKS * (4u << 20));
	asked_leaf = "vol/chunks/0/5/";
	list_with_density(f, &d, out, &st);
	asked_leaf = "vol/chunks/0/0/";
	assert_int_equal(st.blocks, LEAF_KEYS);
	assert_string_equal(out, want);
	check_cut_in_three(&st);
	leak_density_free(&d);
	free(out);
	free(want);
}

/* A wrong map costs balance, never a key: too dense at the low ids, or empty here. */
static void wrong_density_still_lists_each_key_once(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct leak_density d;
	char *out = malloc(LEAF_KEYS * 24);

	fill_leaf(f);
	density_of(&d, 1000, 1, 100, (uint64_t)60 * (4u << 20));  /* all 6000 expected in ids 1..100 */
	list_with_density(f, &d, out, &st);
	assert_int_equal(st.blocks, LEAF_KEYS);
	check_leaf(out);
	leak_density_free(&d);

	density_of(&d, 100000, 5000, 10999, 4u << 20);  /* everything expected in other leaves */
	list_with_density(f, &d, out, &st);
	assert_int_equal(st.blocks, LEAF_KEYS);
	check_leaf(out);
	leak_density_free(&d);
	free(out);
}

/* A store that ignores start-after: every range lists from the start, drops what is not its own. */
static int no_start_after_list(struct jo_obj *o, const char *prefix, const char *start_after,
			       const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
			       struct jo_err *err)
{
	(void)start_after;
	return real_ops->list(o, prefix, NULL, delimiter, page, cb, payload, err);
}

static void store_ignoring_start_after_lists_each_key_once(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char *out = malloc(LEAF_KEYS * 24);
	int rc;

	fill_leaf(f);
	real_ops = f->obj->ops;
	failing_ops = *real_ops;
	failing_ops.list = no_start_after_list;
	f->obj->ops = &failing_ops;
	rc = list_all(f, false, 8, out, LEAF_KEYS * 24, &st, &err);
	f->obj->ops = real_ops;
	assert_int_equal(rc, 0);
	assert_int_equal(st.blocks, LEAF_KEYS);
	check_leaf(out);
	free(out);
}

/* A store that lists a leaf backwards: a range's end would be unsound, so the run fails. */
struct rev {
	char **keys;
	size_t n, cap;
};

static int collect_cb(const struct jo_obj_info *info, void *payload)
{
	struct rev *r = payload;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 64;
		r->keys = realloc(r->keys, r->cap * sizeof(*r->keys));
		assert_non_null(r->keys);
	}
	r->keys[r->n++] = strdup(info->key);
	return 0;
}

static int backwards_list(struct jo_obj *o, const char *prefix, const char *start_after,
			  const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
			  struct jo_err *err)
{
	struct rev r = { 0 };
	int rc;

	if (delimiter)
		return real_ops->list(o, prefix, start_after, delimiter, page, cb, payload, err);
	rc = real_ops->list(o, prefix, start_after, delimiter, page, collect_cb, &r, err);
	for (size_t i = r.n; rc == 0 && i > 0; i--) {
		struct jo_obj_info info = { .key = r.keys[i - 1], .size = 4, .mtime = 1700000000 };

		rc = cb(&info, payload);
	}
	for (size_t i = 0; i < r.n; i++)
		free(r.keys[i]);
	free(r.keys);
	return rc;
}

static void leaf_listed_out_of_order_fails(void **state)
{
	struct fx *f = *state;
	struct leak_list_stats st;
	struct jo_err err = { 0 };
	char out[256];
	int rc;

	put(f, "vol/chunks/0/0/1_0_100", 4);
	put(f, "vol/chunks/0/0/2_0_100", 4);
	real_ops = f->obj->ops;
	failing_ops = *real_ops;
	failing_ops.list = backwards_list;
	f->obj->ops = &failing_ops;
	rc = list_all(f, false, 2, out, sizeof(out), &st, &err);
	f->obj->ops = real_ops;
	assert_int_equal(rc, JO_EPROTO);
	assert_non_null(strstr(err.msg, "byte order"));
}

/* A test that runs between setup and teardown, like most here. */
#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_TEST(list_plain_layout_sorted_and_foreign_reported),
		FIXTURE_TEST(list_hash_prefix_layout),
		FIXTURE_TEST(list_empty_volume),
		FIXTURE_TEST(list_error_midway_fails_the_whole_listing),
		cmocka_unit_test(key_split_cuts_between_its_ends),
		cmocka_unit_test(key_split_random_ranges_hold_their_keys),
		FIXTURE_TEST(long_flat_leaf_is_cut_into_ranges),
		FIXTURE_TEST(store_ignoring_start_after_lists_each_key_once),
		FIXTURE_TEST(density_cuts_a_leaf_before_it_is_listed),
		FIXTURE_TEST(density_cuts_a_leaf_of_high_ids),
		FIXTURE_TEST(wrong_density_still_lists_each_key_once),
		FIXTURE_TEST(leaf_listed_out_of_order_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
