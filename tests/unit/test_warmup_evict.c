/*
 * Unit tests for common/warmup/evict.c and the run state it works on
 * (common/warmup/run.c): the block set, mount paths, files resolved through a
 * real SQLite volume, the mount check, and block-exact eviction against a
 * stand-in mount (tests/unit/support/wu_fixture.h) whose disk cache and
 * control file the test lays out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/command.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/warmup/cache.h"
#include "common/warmup/run.h"
#include "common/warmup/warmup.h"
#include "support/wu_fixture.h"

static struct wu_fixture fx;
static struct jo_ctx ctx = { .prog = "jfsops", .cmd = "warmup" };

static int group_setup(void **state)
{
	(void)state;
	return wu_fx_setup(&fx);
}

static int group_teardown(void **state)
{
	(void)state;
	wu_fx_teardown(&fx);
	return 0;
}

/* ---------------------------------------------------------- the block set */

static void bset_counts_each_block_once(void **state)
{
	struct wu_bset *s = NULL;

	(void)state;
	assert_int_equal(wu_bset_new(&s), 0);
	assert_int_equal(wu_bset_add(s, 7, 0, 4096), 1);
	assert_int_equal(wu_bset_add(s, 7, 0, 4096), 0);
	assert_int_equal(wu_bset_add(s, 7, 1, 100), 1);
	assert_true(wu_bset_has(s, 7, 1));
	assert_false(wu_bset_has(s, 7, 2));
	assert_false(wu_bset_has(s, 8, 0));
	assert_int_equal(wu_bset_count(s), 2);
	assert_true(wu_bset_bytes(s) == 4196);
	/* it grows and still finds every block */
	for (uint64_t id = 1; id <= 5000; id++)
		assert_int_equal(wu_bset_add(s, 1000 + id, (uint32_t)(id % 3), 1), 1);
	assert_int_equal(wu_bset_count(s), 5002);
	for (uint64_t id = 1; id <= 5000; id++)
		assert_true(wu_bset_has(s, 1000 + id, (uint32_t)(id % 3)));
	assert_false(wu_bset_has(s, 1000, 0));
	wu_bset_free(s);
	/* NULL is an empty set */
	assert_false(wu_bset_has(NULL, 1, 0));
	assert_int_equal(wu_bset_count(NULL), 0);
	wu_bset_free(NULL);
}

/* ------------------------------------------------------------ mount paths */

static void check_mount_path(const char *subdir, const char *vp, const char *want)
{
	char *got = wu_mount_path("/mp", subdir, vp);

	if (!want) {
		assert_null(got);
		return;
	}
	assert_non_null(got);
	assert_string_equal(got, want);
	free(got);
}

static void mount_path_is_under_the_mounted_subdir(void **state)
{
	(void)state;
	check_mount_path("", "/ds/f", "/mp/ds/f");
	check_mount_path("ds", "/ds/f", "/mp/f");
	check_mount_path("/ds/", "/ds/f", "/mp/f");
	check_mount_path("ds", "/ds", "/mp");
	check_mount_path("ds", "/dsx/f", NULL);
	check_mount_path("ds", "/other/f", NULL);
	check_mount_path("a/b", "/a/b/c/d", "/mp/c/d");
}

/* ------------------------------------------------ the run on a real volume */

static void open_run(struct wu_state *st)
{
	memset(st, 0, sizeof(*st));
	st->ctx = &ctx;
	assert_int_equal(wu_open_meta(st, fx.url), 0);
	assert_true(st->block_size == 4 * WU_FX_MIB);
	assert_non_null(st->mapper);
}

static void set_file_resolves_range_paths(void **state)
{
	struct wu_state st;
	uint64_t ino, len;

	(void)state;
	open_run(&st);
	st.prefix = "ds";
	st.keep_paths = true;
	assert_int_equal(wu_set_file(&st, "f"), 0);
	assert_string_equal(st.cur_path, "/ds/f");
	assert_true(st.cur_len == WU_FX_F_LEN);
	assert_int_equal(wu_set_file(&st, "./f"), 0);  /* the same file: no second entry */
	assert_int_equal(wu_set_file(&st, "g"), 0);
	assert_true(st.cur_len == 5);
	assert_int_equal(st.ninos, 2);
	assert_int_equal(st.npaths, 2);
	assert_string_equal(st.paths[0], "/ds/f");
	assert_string_equal(st.paths[1], "/ds/g");
	/* a path under the mount is taken relative to it, --prefix aside */
	st.mount = "/mnt/jfs/";
	assert_int_equal(wu_set_file(&st, "/mnt/jfs/ds/f"), 0);
	assert_string_equal(st.cur_path, "/ds/f");
	assert_int_equal(wu_set_file(&st, "../f"), JO_EINVAL);
	assert_non_null(strstr(st.err.msg, "'..'"));
	assert_int_equal(wu_set_file(&st, "nope"), JO_ENOTFOUND);
	assert_non_null(strstr(st.err.msg, "no such file 'nope'"));
	assert_int_equal(wu_set_file(&st, "d"), JO_EINVAL);
	assert_non_null(strstr(st.err.msg, "not a regular file"));
	assert_int_equal(wu_lookup(&st, "/ds/f", &ino, &len), 0);
	assert_true(len == WU_FX_F_LEN);
	assert_int_equal(wu_lookup(&st, "/ds/d", &ino, &len), JO_EINVAL);
	assert_int_equal(wu_lookup(&st, "/ds/none", &ino, &len), JO_ENOTFOUND);
	st.mount = NULL;
	wu_state_release(&st);
}

static void attach_checks_the_volume_and_the_cache(void **state)
{
	struct wu_state st;
	struct jo_warmup_mount mi = { 0 };
	char mnt[256];

	(void)state;
	open_run(&st);
	wu_fx_mount(&fx, "another-uuid", 1u << 30);
	assert_int_equal(wu_mount_attach(&st, fx.mount, false, &mi), JO_EINVAL);
	assert_non_null(strstr(st.err.msg, "not 'vol'"));
	jo_warmup_mount_release(&mi);
	wu_fx_mount(&fx, st.fmt.uuid, 0);
	assert_int_equal(wu_mount_attach(&st, fx.mount, true, &mi), JO_EUNSUPPORTED);
	assert_non_null(strstr(st.err.msg, "--cache-size 0"));
	jo_warmup_mount_release(&mi);
	/* a check or an eviction reads nothing: no block cache is fine */
	snprintf(mnt, sizeof(mnt), "%s//", fx.mount);
	assert_int_equal(wu_mount_attach(&st, mnt, false, &mi), 0);
	assert_string_equal(st.mount, fx.mount);  /* without the trailing '/' */
	jo_warmup_mount_release(&mi);
	wu_state_release(&st);
}

/* ---------------------------------------------------------------- evict */

struct fblocks {
	struct jo_warmup_block v[16];
	size_t n;
};

static int collect(const struct jo_warmup_block *b, void *payload)
{
	struct fblocks *l = payload;

	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].id == b->id && l->v[i].indx == b->indx)
			return 0;
	assert_true(l->n < 16);
	l->v[l->n++] = *b;
	return 0;
}

/* Every block of ds/f, each in the stand-in's cache; ev gets the file. */
static void cache_file_f(struct wu_state *st, struct fblocks *l, struct wu_evict_file *ev,
			 char *mpath, size_t cap)
{
	char key[512];

	memset(l, 0, sizeof(*l));
	assert_int_equal(wu_lookup(st, "/ds/f", &ev->ino, &ev->flen), 0);
	assert_int_equal(jo_warmup_file_blocks(st->mapper, ev->ino, ev->flen, collect, l, &st->err),
			 0);
	assert_true(l->n >= 3);
	for (size_t i = 0; i < l->n; i++) {
		jo_block_key(key, sizeof(key), st->fmt.name, st->fmt.hash_prefix, l->v[i].id,
			     l->v[i].indx, l->v[i].bsize);
		wu_fx_cache_put(&fx, key);
	}
	snprintf(mpath, cap, "%s/ds/f", fx.mount);
	ev->vpath = "/ds/f";
	ev->mpath = mpath;
}

static bool claim_last(uint64_t id, uint32_t indx, void *payload)
{
	const struct jo_warmup_block *b = payload;

	return b && b->id == id && b->indx == indx;
}

static void evict_reads_back_the_other_blocks(void **state)
{
	static const char answer[] = "{\"FileCount\":1,\"SliceCount\":1,\"TotalBytes\":9437184,"
				     "\"MissBytes\":0,\"Locations\":{}}";
	const char *ctl_paths[] = { "/ds/f" };
	struct wu_state st;
	struct jo_warmup_mount mi = { 0 };
	struct jo_warmup_cachedirs cd = { 0 };
	struct wu_evict_file ev = { 0 };
	struct wu_evict_result r;
	struct wu_bset *targets = NULL;
	struct fblocks l;
	char mpath[512];

	(void)state;
	open_run(&st);
	wu_fx_mount(&fx, st.fmt.uuid, 1u << 30);
	assert_int_equal(wu_mount_attach(&st, fx.mount, true, &mi), 0);
	assert_int_equal(jo_warmup_cachedirs_init(&cd, mi.cache_dir, &st.err), 0);
	cache_file_f(&st, &l, &ev, mpath, sizeof(mpath));
	assert_int_equal(wu_bset_new(&targets), 0);
	assert_int_equal(wu_bset_add(targets, l.v[0].id, l.v[0].indx, l.v[0].bsize), 1);

	/* keep: the other cached blocks are read back through the mount */
	wu_fx_control(&fx, JO_WARMUP_CTL_EVICT, ctl_paths, 1, 2, answer);
	assert_int_equal(wu_evict(&st, &mi, &cd, &ev, 1, targets, WU_OTHERS_KEEP, claim_last,
				  &l.v[l.n - 1], 2, &r, &st.err), 0);
	assert_true(r.block_exact);
	assert_int_equal(r.files, 1);
	assert_int_equal(r.blocks, 1);
	assert_true(r.bytes == l.v[0].bsize);
	assert_int_equal(r.cached_blocks, 1);
	assert_int_equal(r.window_blocks, 1);          /* the caller's own */
	assert_int_equal(r.other_blocks, l.n - 2);
	assert_int_equal(r.rewarmed_blocks, l.n - 2);  /* read from the stand-in's file */
	assert_int_equal(r.lost_blocks, 0);
	assert_true(r.mount_bytes == 9437184);
	/* the stand-in evicts nothing: the target is found still cached */
	assert_int_equal(r.still_blocks, 1);

	/* drop: nothing read back; an in-memory cache: nothing known block by block */
	wu_fx_control(&fx, JO_WARMUP_CTL_EVICT, ctl_paths, 1, 2, answer);
	assert_int_equal(wu_evict(&st, &mi, NULL, &ev, 1, targets, WU_OTHERS_KEEP, claim_last,
				  &l.v[l.n - 1], 2, &r, &st.err), 0);
	assert_false(r.block_exact);
	assert_int_equal(r.cached_blocks, 0);
	assert_int_equal(r.rewarmed_blocks, 0);
	assert_int_equal(r.still_blocks, 0);
	assert_true(r.mount_bytes == 9437184);
	wu_fx_control(&fx, JO_WARMUP_CTL_EVICT, ctl_paths, 1, 2, answer);
	assert_int_equal(wu_evict(&st, &mi, &cd, &ev, 1, targets, WU_OTHERS_DROP, claim_last,
				  &l.v[l.n - 1], 2, &r, &st.err), 0);
	assert_int_equal(r.other_blocks, l.n - 2);
	assert_int_equal(r.rewarmed_blocks, 0);

	/* no file: nothing asked of the mount */
	assert_int_equal(wu_evict(&st, &mi, &cd, &ev, 0, targets, WU_OTHERS_KEEP, claim_last,
				  NULL, 2, &r, &st.err), 0);
	assert_int_equal(r.files, 0);
	assert_int_equal(r.blocks, 0);

	/* a mount whose control file is gone: the error names it */
	wu_fx_sh("rm -f %s/.control", fx.mount);
	assert_int_equal(wu_evict(&st, &mi, &cd, &ev, 1, targets, WU_OTHERS_KEEP, claim_last,
				  NULL, 2, &r, &st.err), JO_ENOTFOUND);
	assert_non_null(strstr(st.err.msg, ".control"));

	wu_bset_free(targets);
	jo_warmup_cachedirs_release(&cd);
	jo_warmup_mount_release(&mi);
	wu_state_release(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bset_counts_each_block_once),
		cmocka_unit_test(mount_path_is_under_the_mounted_subdir),
		cmocka_unit_test(set_file_resolves_range_paths),
		cmocka_unit_test(attach_checks_the_volume_and_the_cache),
		cmocka_unit_test(evict_reads_back_the_other_blocks),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
