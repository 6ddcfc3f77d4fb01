/*
 * test_sync_paths.c: where a sync side really is (resolution of local
 * paths), when SRC and DST overlap, and which keys a local DST can hold
 * one-to-one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "sync/sync.h"
#include "support/testutil.h"

static char base[256];  /* a fresh directory, by its real path */

static int setup(void **state)
{
	char tmpl[] = "/tmp/jo-sync-paths.XXXXXX", *r;

	(void)state;
	if (!mkdtemp(tmpl))
		return -1;
	r = realpath(tmpl, NULL);
	if (!r)
		return -1;
	snprintf(base, sizeof(base), "%s", r);
	free(r);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return tu_rm_rf(base);
}

static char *at(const char *rel)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", base, rel);
	return buf[i];
}

static void resolves_to(const char *path, const char *want)
{
	struct jo_err err = { 0 };
	char *out = NULL;

	assert_int_equal(jo_sync_local_resolve(path, &out, &err), 0);
	assert_string_equal(out, want);
	free(out);
}

static void test_resolve(void **state)
{
	char want[PATH_MAX];

	(void)state;
	assert_int_equal(mkdir(at("d"), 0755), 0);
	assert_int_equal(mkdir(at("d/a"), 0755), 0);
	assert_int_equal(symlink(at("d/a"), at("link")), 0);
	resolves_to(at("d"), at("d"));
	resolves_to(at("d/"), at("d"));
	resolves_to(at("d//a//"), at("d/a"));
	resolves_to(at("d/./a/."), at("d/a"));
	resolves_to(at("d/a/.."), at("d"));
	resolves_to(at("link"), at("d/a"));
	resolves_to(at("link/"), at("d/a"));
	resolves_to(at("link/../x"), at("d/x"));          /* ".." of the link's target */
	resolves_to(at("d/new/deeper/"), at("d/new/deeper")); /* not there yet */
	resolves_to(at("d/new/../x"), at("d/x"));
	resolves_to(at("link/new/../../y"), at("d/y"));
	resolves_to("/", "/");
	resolves_to("//", "/");
	resolves_to("/..", "/");
	/* relative to the working directory */
	assert_int_equal(chdir(at("d")), 0);
	resolves_to("a", at("d/a"));
	resolves_to("./a/../new", at("d/new"));
	snprintf(want, sizeof(want), "%s", base);
	resolves_to("..", want);
	assert_int_equal(chdir("/"), 0);
}

static void local_side(struct jo_objurl *s, const char *path)
{
	struct jo_err err = { 0 };

	assert_int_equal(jo_objurl_parse(s, path, "src", NULL, NULL, &err), 0);
	assert_true(s->local);
}

static int overlap(const char *a, const char *b)
{
	struct jo_objurl x, y;
	struct jo_err err = { 0 };
	char why[9000] = "";
	int r;

	if (strncmp(a, "s3://", 5))
		local_side(&x, a);
	else
		assert_int_equal(jo_objurl_parse(&x, a, "src", NULL, NULL, &err), 0);
	if (strncmp(b, "s3://", 5))
		local_side(&y, b);
	else
		assert_int_equal(jo_objurl_parse(&y, b, "dst", NULL, NULL, &err), 0);
	r = jo_sync_sides_overlap(&x, &y, why, sizeof(why), &err);
	assert_true(r >= 0);
	if (r)
		assert_true(why[0] != '\0');
	/* symmetric */
	assert_int_equal(jo_sync_sides_overlap(&y, &x, why, sizeof(why), &err), r);
	jo_objurl_free(&x);
	jo_objurl_free(&y);
	return r;
}

static void test_overlap_local(void **state)
{
	(void)state;
	assert_int_equal(mkdir(at("o"), 0755), 0);
	assert_int_equal(mkdir(at("o/a"), 0755), 0);
	assert_int_equal(mkdir(at("o/ab"), 0755), 0);
	assert_int_equal(mkdir(at("p"), 0755), 0);
	assert_int_equal(symlink(at("o"), at("olink")), 0);
	assert_int_equal(symlink(at("o/a"), at("p/into-a")), 0);
	/* the two cases */
	assert_int_equal(overlap(at("o/a"), at("o")), 1);
	assert_int_equal(overlap(at("o"), at("o/copy")), 1);      /* DST not there yet */
	/* the same tree, however spelled */
	assert_int_equal(overlap(at("o"), at("o/")), 1);
	assert_int_equal(overlap(at("o"), at("o/a/..//")), 1);
	assert_int_equal(overlap(at("o/./a"), at("o/a")), 1);
	assert_int_equal(overlap(at("olink/"), at("o")), 1);
	assert_int_equal(overlap(at("olink/a"), at("o")), 1);     /* through a symlinked parent */
	assert_int_equal(overlap(at("p/into-a"), at("o")), 1);
	assert_int_equal(overlap(at("o"), at("p/into-a/new/x")), 1);
	assert_int_equal(overlap(at("o"), at("p/new/../../o/n")), 1);
	assert_int_equal(overlap(at("o"), "file:///"), 1);        /* "/" holds everything */
	/* neighbours, not one inside the other */
	assert_int_equal(overlap(at("o/a"), at("o/ab")), 0);
	assert_int_equal(overlap(at("o"), at("p")), 0);
	assert_int_equal(overlap(at("o/a"), at("p/new")), 0);
	assert_int_equal(overlap(at("o"), at("o2")), 0);
	/* a local side never overlaps an s3 side */
	assert_int_equal(overlap(at("o"), "s3://bkt/o?endpoint=http://127.0.0.1:9"), 0);
}

static void test_overlap_s3(void **state)
{
	(void)state;
#define EP "?endpoint=http://127.0.0.1:9000"
	/* a prefix is a directory: s3://b/p is the keys under "p/" */
	assert_int_equal(overlap("s3://bkt/p" EP, "s3://bkt/p/q" EP), 1);
	assert_int_equal(overlap("s3://bkt/p" EP, "s3://bkt/p" EP), 1);
	assert_int_equal(overlap("s3://bkt/p/" EP, "s3://bkt/p" EP), 1);
	assert_int_equal(overlap("s3://bkt" EP, "s3://bkt/p" EP), 1);
	assert_int_equal(overlap("s3://bkt/" EP, "s3://bkt" EP), 1);
	assert_int_equal(overlap("s3://bkt/p" EP, "s3://bkt/pq" EP), 0);
	assert_int_equal(overlap("s3://bkt/p/q" EP, "s3://bkt/p/qr" EP), 0);
	assert_int_equal(overlap("s3://bkt/p" EP, "s3://bkt2/p" EP), 0);
	/* one endpoint, spelled with its default port or a trailing '/' */
	assert_int_equal(overlap("s3://bkt/p?endpoint=http://Host.Example", "s3://bkt/p/q?endpoint=http://host.example:80/"), 1);
	assert_int_equal(overlap("s3://bkt/p?endpoint=https://h", "s3://bkt/p?endpoint=https://h:443"), 1);
	assert_int_equal(overlap("s3://bkt/p?endpoint=http://h:443", "s3://bkt/p?endpoint=https://h:443"), 0);
	/* another endpoint is another store (the same server under two names cannot be known) */
	assert_int_equal(overlap("s3://bkt/p" EP, "s3://bkt/p?endpoint=http://127.0.0.1:9001"), 0);
	assert_int_equal(overlap("s3://bkt/p?region=eu-west-1", "s3://bkt/p/q?region=eu-west-1"), 1);
#undef EP
}

static void test_local_keys(void **state)
{
	static const struct { const char *key; uint64_t size; int ok; } k[] = {
		{ "dot.txt", 1, 1 },
		{ "a/b.txt", 1, 1 },
		{ "a/b/", 0, 1 },          /* a directory marker (the caller excludes it) */
		{ "", 0, 1 },              /* the prefix's own marker */
		{ ".hidden", 1, 1 },
		{ "..dots", 1, 1 },
		{ "a/...", 1, 1 },
		{ "a/.b/..c", 1, 1 },
		{ ".jfs.x", 1, 1 },
		{ "x.tmp.1", 1, 1 },
		{ "ctl\x01.txt", 1, 1 },   /* a control byte is a valid name */
		{ "./dot.txt", 1, 0 },
		{ "a/./b.txt", 1, 0 },
		{ "a/.", 1, 0 },
		{ ".", 1, 0 },
		{ "a//b.txt", 1, 0 },
		{ "a//", 0, 0 },           /* a marker whose path folds: refused too */
		{ "/abs.txt", 1, 0 },
		{ "/", 0, 0 },
		{ "../up.txt", 1, 0 },
		{ "a/../../up.txt", 1, 0 },
		{ "a/..", 1, 0 },
		{ "..", 0, 0 },
		{ "dir/", 5, 0 },          /* a non-empty object ending in '/' */
		{ "", 5, 0 },
		{ ".jfs.a.tmp.1", 1, 0 },  /* the directory store's temp files */
		{ "d/.jfs.a.tmp.mpu-x-00001", 1, 0 },
		{ ".jfs.d.tmp.1/x", 1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		const char *why = jo_sync_local_key_why(k[i].key, k[i].size);

		if ((why == NULL) != (k[i].ok == 1))
			fail_msg("key \"%s\" (size %llu): %s", k[i].key, (unsigned long long)k[i].size,
				 why ? why : "representable");
	}
	assert_string_equal(jo_sync_local_key_why("a//b", 1), "an empty path segment ('//')");
	assert_string_equal(jo_sync_local_key_why("/a", 1), "starts with '/'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_overlap_local),
		cmocka_unit_test(test_overlap_s3),
		cmocka_unit_test(test_local_keys),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
