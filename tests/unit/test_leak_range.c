/*
 * Unit tests for the id ranges of a cluster leak check (leakcheck/range.c):
 * the cut, the key-to-range rule, and the lister given a range (list.c) on
 * the real "file" object backend: over the ranges of a job, every key under
 * chunks/ (block keys, foreign keys at every level, ids past the counter)
 * is listed by exactly one range, the one the rule names, and the union of
 * the ranges' listings is the one-host listing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/object/object.h"
#include "leakcheck/leak.h"
#include "support/testutil.h"

#define MAXKEYS 400

/* The keys one listing saw: its blocks (as keys) and its foreign keys. */
struct seen {
	char *keys[MAXKEYS];
	int n;
	bool hash;
};

static void seen_add(struct seen *s, const char *key)
{
	assert_true(s->n < MAXKEYS);
	s->keys[s->n++] = strdup(key);
}

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->keys[i]);
	s->n = 0;
}

static int on_foreign(const struct leak_item *it, void *payload)
{
	seen_add(payload, it->key);
	return 0;
}

static void bounds(struct leak_ranges *r, const uint64_t *cuts, size_t n)
{
	r->n = n + 1;
	r->b = malloc((n + 2) * sizeof(*r->b));
	r->b[0] = 0;
	for (size_t i = 0; i < n; i++)
		r->b[i + 1] = cuts[i];
	r->b[n + 1] = UINT64_MAX;
}

/* List the store (one range of rs, or all when rs is NULL) into s. */
static void list_into(struct jo_obj *obj, bool hash, const struct leak_ranges *rs, size_t ri,
		      struct seen *s, struct leak_list_stats *st)
{
	struct jo_xsort *xs = NULL;
	struct jo_err err = { 0 };
	struct leak_list_opts lo = {
		.volname = "vol", .hash_prefix = hash, .block_size = 4u << 20, .threads = 3,
		.foreign_cb = on_foreign, .payload = s, .ranges = rs, .range = ri,
	};
	const void *rec;
	size_t len;
	int rc;

	assert_int_equal(jo_xsort_new(&xs, NULL, &err), 0);
	if (leak_list_objects(obj, &lo, xs, st, &err) || jo_xsort_finish(xs, &err))
		fail_msg("list: %s", err.msg);
	while ((rc = jo_xsort_next(xs, &rec, &len, &err)) == 1) {
		uint64_t id, size;
		uint32_t indx, bsize;
		int64_t mtime;
		char key[256];

		leak_obj_decode(rec, &id, &indx, &bsize, &size, &mtime);
		assert_true(jo_block_key(key, sizeof(key), "vol", hash, id, indx, bsize) > 0);
		seen_add(s, key);
	}
	assert_int_equal(rc, 0);
	jo_xsort_free(xs);
}

static void put(struct jo_obj *obj, const char *key)
{
	struct jo_err err = { 0 };

	if (jo_obj_put(obj, key, "x", 1, NULL, &err))
		fail_msg("put %s: %s", key, err.msg);
}

/* Block keys of ids around every cut and the A boundaries, and foreign keys everywhere. */
static void fill(struct jo_obj *obj, bool hash, const uint64_t *ids, size_t nids)
{
	static const char *plain_foreign[] = {
		"vol/chunks/stray", "vol/chunks/junk/x", "vol/chunks/junk/y/z",
		"vol/chunks/0/stray", "vol/chunks/0/junk/q", "vol/chunks/1/1/1_0_5",
		"vol/chunks/0/2/junk", "vol/chunks/0/5/5999`", "vol/chunks/05/5000/5000000_0_1",
		"vol/chunks/2/2000/x/y",
	};
	static const char *hash_foreign[] = {
		"vol/chunks/stray", "vol/chunks/zz/0/1_0_5", "vol/chunks/0A/stray",
		"vol/chunks/0A/junk/1", "vol/chunks/01/0/junk", "vol/chunks/02/0/1_0_5",
		"vol/chunks/B8/1/1002999`", "vol/chunks/B8/1/1002999_", "vol/chunks/B8/1/1003000",
		"vol/chunks/B8/1/zzz", "vol/chunks/B8/1/1002999_0_5/deeper", "vol/chunks/B8/01/x",
	};
	const char **f = hash ? hash_foreign : plain_foreign;
	size_t nf = hash ? sizeof(hash_foreign) / sizeof(*f) : sizeof(plain_foreign) / sizeof(*f);
	char key[256];

	for (size_t i = 0; i < nids; i++) {
		assert_true(jo_block_key(key, sizeof(key), "vol", hash, ids[i], 0, 5) > 0);
		put(obj, key);
		assert_true(jo_block_key(key, sizeof(key), "vol", hash, ids[i], 1, 4u << 20) > 0);
		put(obj, key);
	}
	for (size_t i = 0; i < nf; i++)
		put(obj, f[i]);
	put(obj, "other/chunks/0/0/1_0_5");
}

static void ranges_partition_the_listing(bool hash)
{
	static const uint64_t ids[] = {
		1, 9, 10, 99, 100, 999, 1000, 1001, 1999, 2000, 2500, 2999, 3000, 10000, 999999,
		1000000, 1002999, 1003000, 1003001, 1999999, 2000000, 2000001, 5000123, 10000000,
		10000001, 99999999, 100000000, 1234567890123ULL,
	};
	static const uint64_t cuts[][4] = {
		{ 1000, 3000, 1003000, 10000000 },
		{ 2000, 1000000, 2000000, 0 },
		{ 1002000, 1003000, 0, 0 },
	};
	struct seen all = { .hash = hash };
	struct leak_list_stats st_all, st;
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;
	struct jo_err err = { 0 };
	struct jo_obj *obj = NULL;
	char dir[160], bucket[170];

	assert_int_equal(tu_mkdtemp(dir, sizeof(dir), "test_leak_range"), 0);
	snprintf(bucket, sizeof(bucket), "%s/", dir);
	o.storage = "file";
	o.bucket = bucket;
	if (jo_obj_open(&obj, &o, &err))
		fail_msg("open: %s", err.msg);
	fill(obj, hash, ids, sizeof(ids) / sizeof(ids[0]));
	list_into(obj, hash, NULL, 0, &all, &st_all);
	assert_int_equal(st_all.blocks, 2 * sizeof(ids) / sizeof(ids[0]));

	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		struct leak_ranges rs;
		size_t nc = 0;
		uint64_t listed = 0, blocks = 0, foreign = 0;
		int *count = calloc((size_t)all.n, sizeof(int));

		while (nc < 4 && cuts[c][nc])
			nc++;
		bounds(&rs, cuts[c], nc);
		for (size_t ri = 0; ri < rs.n; ri++) {
			struct seen s = { .hash = hash };

			list_into(obj, hash, &rs, ri, &s, &st);
			listed += st.listed;
			blocks += st.blocks;
			foreign += st.foreign;
			for (int k = 0; k < s.n; k++) {
				int at = -1;

				for (int a = 0; a < all.n; a++)
					if (!strcmp(all.keys[a], s.keys[k]))
						at = a;
				if (at < 0)
					fail_msg("range %zu listed '%s', the one-host run did not", ri,
						 s.keys[k]);
				count[at]++;
				if (leak_range_of_key(&rs, "vol", hash, s.keys[k]) != ri)
					fail_msg("'%s' listed by range %zu, the rule says %zu", s.keys[k],
						 ri, leak_range_of_key(&rs, "vol", hash, s.keys[k]));
			}
			seen_free(&s);
		}
		for (int a = 0; a < all.n; a++)
			if (count[a] != 1)
				fail_msg("cut set %zu: '%s' listed by %d ranges", c, all.keys[a], count[a]);
		assert_int_equal(listed, st_all.listed);
		assert_int_equal(blocks, st_all.blocks);
		assert_int_equal(foreign, st_all.foreign);
		/* a block key's range is its id's */
		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
			char key[256];

			assert_true(jo_block_key(key, sizeof(key), "vol", hash, ids[i], 7, 5) > 0);
			assert_int_equal(leak_range_of_key(&rs, "vol", hash, key),
					 leak_range_find(&rs, ids[i]));
		}
		free(count);
		leak_ranges_free(&rs);
	}
	seen_free(&all);
	jo_obj_close(obj);
	assert_int_equal(tu_rm_rf(dir), 0);
}

static void plain_ranges_partition_the_listing(void **state)
{
	(void)state;
	ranges_partition_the_listing(false);
}

static void hash_ranges_partition_the_listing(void **state)
{
	(void)state;
	ranges_partition_the_listing(true);
}

/* The rule on random ids and cuts: a block key is its id's range, in both layouts. */
static void block_keys_go_to_their_ids_range(void **state)
{
	uint64_t seed = 42;

	(void)state;
	for (int round = 0; round < 200; round++) {
		uint64_t cuts[8], top = 1 + tu_xorshift(&seed) % 50000000;
		struct leak_ranges rs;
		size_t n = 0;

		for (uint64_t c = 1000; n < 8; c += 1000 * (1 + tu_xorshift(&seed) % (top / 4000 + 1)))
			cuts[n++] = c;
		bounds(&rs, cuts, n);
		for (int k = 0; k < 200; k++) {
			uint64_t id = tu_xorshift(&seed) % (cuts[n - 1] + 3000);
			char key[256];

			for (int h = 0; h < 2; h++) {
				assert_true(jo_block_key(key, sizeof(key), "v", h, id, 3, 100) > 0);
				assert_int_equal(leak_range_of_key(&rs, "v", h, key),
						 leak_range_find(&rs, id));
			}
		}
		leak_ranges_free(&rs);
	}
}

static void check_cut(const struct leak_ranges *rs, size_t want)
{
	assert_true(rs->n >= 1 && rs->n <= want);
	assert_int_equal(rs->b[0], 0);
	assert_int_equal(rs->b[rs->n], UINT64_MAX);
	for (size_t i = 1; i < rs->n; i++) {
		assert_int_equal(rs->b[i] % 1000, 0);
		assert_true(rs->b[i] > rs->b[i - 1]);
	}
}

static void cut_balances_expected_blocks(void **state)
{
	struct leak_density d;
	struct leak_ranges rs;
	uint64_t next = 10000000;

	(void)state;
	/* every block in ids 0..999999, and as many again in 9M..10M */
	assert_int_equal(leak_density_init(&d, next, 4u << 20), 0);
	for (uint64_t id = 0; id < 1000000; id += 100)
		leak_density_add(&d, id, 4u << 20);
	for (uint64_t id = 9000000; id < next; id += 100)
		leak_density_add(&d, id, 4u << 20);
	assert_int_equal(leak_range_cut(&d, next, 4, false, &rs), 0);
	check_cut(&rs, 4);
	assert_int_equal(rs.n, 4);
	/* two ranges in each dense part, none spent on the empty middle */
	assert_true(rs.b[1] > 300000 && rs.b[1] < 700000);
	assert_true(rs.b[2] >= 1000000 && rs.b[2] <= 9100000);
	assert_true(rs.b[3] > 9300000 && rs.b[3] < 9700000);
	leak_ranges_free(&rs);
	/* more ranges wanted than thousands of ids: one per thousand at most */
	assert_int_equal(leak_range_cut(&d, 2500, 100, false, &rs), 0);
	check_cut(&rs, 3);
	leak_ranges_free(&rs);
	/* nothing referenced: equal id spans */
	assert_int_equal(leak_range_cut(NULL, 8000, 4, false, &rs), 0);
	check_cut(&rs, 4);
	assert_int_equal(rs.n, 4);
	assert_int_equal(rs.b[1], 2000);
	assert_int_equal(rs.b[2], 4000);
	assert_int_equal(rs.b[3], 6000);
	leak_ranges_free(&rs);
	assert_int_equal(leak_range_cut(NULL, 0, 4, false, &rs), 0);
	check_cut(&rs, 1);
	leak_ranges_free(&rs);
	/* hash-prefix layout: nothing cut below 10^6 */
	assert_int_equal(leak_range_cut(&d, next, 4, true, &rs), 0);
	check_cut(&rs, 4);
	assert_true(rs.n >= 2 && rs.b[1] >= 1000000);
	leak_ranges_free(&rs);
	assert_int_equal(leak_range_cut(NULL, 900000, 8, true, &rs), 0);
	check_cut(&rs, 1);
	leak_ranges_free(&rs);
	leak_density_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_ranges_partition_the_listing),
		cmocka_unit_test(hash_ranges_partition_the_listing),
		cmocka_unit_test(block_keys_go_to_their_ids_range),
		cmocka_unit_test(cut_balances_expected_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
