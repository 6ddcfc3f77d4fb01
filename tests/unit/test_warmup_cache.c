/*
 * Unit tests for common/warmup/cache: the FillCache message exactly as
 * `juicefs warmup` writes it (cmd/warmup.go sendCommand), the answer parser
 * on records split anywhere (pkg/vfs/internal.go writeProgress + CDATA), and
 * block lookups in a disk cache directory laid out as the mount lays it out.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "support/wu_fixture.h"
#include "common/warmup/cache.h"

static void encode_is_the_juicefs_message(void **state)
{
	const char *paths[] = { "/a", "/d/b.lance" };
	static const uint8_t want[] = {
		0x00, 0x00, 0x03, 0xEC,             /* FillCache = 1004 */
		0x00, 0x00, 0x00, 0x15,             /* body: 4 + 13 + 2 + 1 + 1 = 21 */
		0x00, 0x00, 0x00, 0x0D,             /* paths length 13 */
		'/', 'a', '\n', '/', 'd', '/', 'b', '.', 'l', 'a', 'n', 'c', 'e',
		0x00, 0x32,                         /* threads 50 */
		0x00,                               /* not in the background */
		0x02,                               /* CheckCache */
	};
	uint8_t *m = NULL;
	size_t n = 0;
	struct jo_err err = { 0 };
	const char *bad[] = { "/x\ny" };

	(void)state;
	assert_int_equal(jo_warmup_ctl_encode(JO_WARMUP_CTL_CHECK, paths, 2, 50, &m, &n, &err), 0);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(m, want, sizeof(want));
	free(m);
	/* evict, threads clamped to at least 1 */
	assert_int_equal(jo_warmup_ctl_encode(JO_WARMUP_CTL_EVICT, paths, 1, 0, &m, &n, &err), 0);
	assert_int_equal(n, 8 + 4 + 2 + 4);
	assert_int_equal(m[n - 1], 1);
	assert_int_equal(m[n - 3], 1);
	free(m);
	assert_int_equal(jo_warmup_ctl_encode(JO_WARMUP_CTL_CHECK, bad, 1, 1, &m, &n, &err),
			 JO_EINVAL);
	assert_null(m);
}

static void feed_bytes(struct jo_warmup_ctl_parser *p, const uint8_t *b, size_t n, size_t step,
		       struct jo_warmup_ctl_reply *r, int want_last)
{
	struct jo_err err = { 0 };
	int rc = 0;

	for (size_t off = 0; off < n; off += step) {
		size_t k = n - off < step ? n - off : step;

		rc = jo_warmup_ctl_feed(p, b + off, k, r, &err);
		if (off + k < n)
			assert_int_equal(rc, 0);
	}
	assert_int_equal(rc, want_last);
}

static void answers_parse_in_any_split(void **state)
{
	const char *json = "{\"FileCount\":2,\"SliceCount\":3,\"TotalBytes\":8388608,"
			   "\"MissBytes\":3145728,\"Locations\":{\"/c/u/\":5242880}}";
	uint8_t buf[512];
	size_t n = 0, jl = strlen(json);

	(void)state;
	/* two progress records, then the data */
	for (int k = 0; k < 2; k++) {
		buf[n++] = 0xFE;
		memset(buf + n, 0, 16);
		buf[n + 7] = (uint8_t)(k + 1);   /* files */
		buf[n + 14] = 0x10;              /* bytes 4096 */
		n += 16;
	}
	n += wu_fx_answer(buf + n, json, jl);
	for (size_t step = 1; step <= n; step = step * 2 + 1) {
		struct jo_warmup_ctl_parser p = { 0 };
		struct jo_warmup_ctl_reply r = { 0 };

		feed_bytes(&p, buf, n, step, &r, 1);
		assert_true(r.files == 2 && r.slices == 3);
		assert_true(r.total_bytes == 8388608 && r.miss_bytes == 3145728);
		assert_int_equal(r.nlocs, 1);
		assert_string_equal(r.locs[0], "/c/u/");
		assert_true(r.loc_bytes[0] == 5242880);
		assert_true(r.progress_files == 2 && r.progress_bytes == 4096);
		jo_warmup_ctl_reply_release(&r);
		jo_warmup_ctl_parser_release(&p);
	}
	/* an errno byte instead of data */
	{
		struct jo_warmup_ctl_parser p = { 0 };
		struct jo_warmup_ctl_reply r = { 0 };
		struct jo_err err = { 0 };
		uint8_t e = 5;

		assert_int_equal(jo_warmup_ctl_feed(&p, &e, 1, &r, &err), JO_EIO);
		assert_non_null(strstr(err.msg, "errno 5"));
		jo_warmup_ctl_parser_release(&p);
	}
	/* data that is not JSON */
	{
		struct jo_warmup_ctl_parser p = { 0 };
		struct jo_warmup_ctl_reply r = { 0 };
		struct jo_err err = { 0 };
		uint8_t d[] = { 0xFF, 0, 0, 0, 3, 'a', 'b', 'c' };

		assert_int_equal(jo_warmup_ctl_feed(&p, d, sizeof(d), &r, &err), JO_EPROTO);
		jo_warmup_ctl_parser_release(&p);
	}
}

static void blocks_are_found_where_the_mount_keeps_them(void **state)
{
	char dir[] = "/tmp/jo-test-wcache.XXXXXX";
	char set[2048], other[600];
	struct jo_warmup_cachedirs cd;
	struct jo_err err = { 0 };
	const char *loc = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	wu_fx_sh("mkdir -p %s/c1/UU/raw/chunks/0/5 %s/c2/UU/raw/chunks/0/0 %s/c3", dir, dir, dir);
	wu_fx_sh("touch %s/c1/UU/raw/chunks/0/5/5001_2_1048576 %s/c2/UU/raw/chunks/0/0/7_0_100", dir,
		 dir);
	snprintf(set, sizeof(set), "%s/c1/UU:%s/c2/UU:%s/missing/UU", dir, dir, dir);
	assert_int_equal(jo_warmup_cachedirs_init(&cd, set, &err), 0);
	assert_int_equal(cd.n, 2); /* a missing directory is skipped, as the mount does */
	assert_int_equal(jo_warmup_cache_has(&cd, "vol/chunks/0/5/5001_2_1048576", &loc, &err), 1);
	snprintf(other, sizeof(other), "%s/c1/UU/", dir);
	assert_string_equal(loc, other);
	assert_int_equal(jo_warmup_cache_has(&cd, "chunks/0/0/7_0_100", &loc, &err), 1);
	snprintf(other, sizeof(other), "%s/c2/UU/", dir);
	assert_string_equal(loc, other);
	assert_int_equal(jo_warmup_cache_has(&cd, "vol/chunks/0/5/5001_3_1048576", NULL, &err), 0);
	assert_int_equal(jo_warmup_cache_has(&cd, "vol/meta/dump.json", NULL, &err), JO_EINVAL);
	jo_warmup_cachedirs_release(&cd);
	/* globs are expanded */
	snprintf(set, sizeof(set), "%s/c*/UU", dir);
	assert_int_equal(jo_warmup_cachedirs_init(&cd, set, &err), 0);
	assert_int_equal(cd.n, 2);
	jo_warmup_cachedirs_release(&cd);
	/* memory caches, or none on this host: no lookup */
	assert_int_equal(jo_warmup_cachedirs_init(&cd, "memory", &err), JO_EUNSUPPORTED);
	snprintf(set, sizeof(set), "%s/nope/UU", dir);
	assert_int_equal(jo_warmup_cachedirs_init(&cd, set, &err), JO_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "no cache directory"));
	wu_fx_sh("rm -rf %s", dir);
}

static void a_missing_control_file_is_not_found(void **state)
{
	struct jo_warmup_ctl_reply r;
	struct jo_err err = { 0 };
	const char *p[] = { "/a" };

	(void)state;
	assert_int_equal(jo_warmup_ctl_call("/nonexistent-dir/.control", JO_WARMUP_CTL_CHECK, p, 1,
					    1, &r, &err), JO_ENOTFOUND);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(encode_is_the_juicefs_message),
		cmocka_unit_test(answers_parse_in_any_split),
		cmocka_unit_test(blocks_are_found_where_the_mount_keeps_them),
		cmocka_unit_test(a_missing_control_file_is_not_found),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
