/*
 * test_sync_rules.c: compare rules, filters, sizes, side parsing and the
 * state file of `jfsops sync`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "sync/sync.h"

static struct jo_sync_ent ent(uint64_t size, int64_t mtime, const char *etag)
{
	struct jo_sync_ent e = { .key = (char *)"k", .size = size, .mtime = mtime };
	snprintf(e.etag, sizeof(e.etag), "%s", etag);
	return e;
}

#define MD5A "0123456789abcdef0123456789abcdef"
#define MD5B "fedcba9876543210fedcba9876543210"

static void test_compare_default(void **state)
{
	(void)state;
	struct jo_sync_cmp_opts o = { 0 };
	struct jo_sync_ent s = ent(10, 100, MD5A), d = ent(10, 200, MD5A);
	const char *why;
	assert_int_equal(jo_sync_decide(&o, &s, NULL, NULL, &why), JO_SYNC_COPY);
	assert_string_equal(why, "missing");
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, &why), JO_SYNC_SKIP);
	d.size = 11;
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, &why), JO_SYNC_COPY);
	assert_string_equal(why, "size");
	/* No state: dst older than src -> copy. */
	d = ent(10, 50, MD5B);
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, &why), JO_SYNC_COPY);
	/* State vouches for dst and src unchanged -> skip even if dst looks older. */
	struct jo_sync_row row = { .found = true, .src_size = 10, .src_mtime = 100,
				   .dst_size = 10 };
	strcpy(row.src_etag, MD5A);
	strcpy(row.dst_etag, MD5B);
	assert_int_equal(jo_sync_decide(&o, &s, &d, &row, &why), JO_SYNC_SKIP);
	assert_string_equal(why, "unchanged");
	/* Source changed since (same size, new mtime) -> copy although dst is newer. */
	struct jo_sync_ent s2 = ent(10, 150, MD5B);
	d.mtime = 300;
	assert_int_equal(jo_sync_decide(&o, &s2, &d, &row, &why), JO_SYNC_COPY);
	assert_string_equal(why, "changed");
	/* Someone replaced dst (other ETag): the row no longer vouches. */
	strcpy(d.etag, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	d.mtime = 50;
	assert_int_equal(jo_sync_decide(&o, &s, &d, &row, &why), JO_SYNC_COPY);
	assert_string_equal(why, "older");
}

static void test_compare_modes(void **state)
{
	(void)state;
	struct jo_sync_cmp_opts o = { .mode = JO_SYNC_CMP_SIZE };
	struct jo_sync_ent s = ent(10, 100, MD5A), d = ent(10, 1, MD5B);
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, NULL), JO_SYNC_SKIP);
	o.mode = JO_SYNC_CMP_CHECKSUM;
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, NULL), JO_SYNC_COPY);
	strcpy(d.etag, MD5A);
	assert_int_equal(jo_sync_decide(&o, &s, &d, NULL, NULL), JO_SYNC_SKIP);
	/* Multipart dst ETag: MD5 from the state row. */
	strcpy(d.etag, "0123456789abcdef0123456789abcdef-3");
	d.mtime = 500;
	struct jo_sync_row row = { .found = true, .src_size = 10, .src_mtime = 100, .dst_size = 10 };
	strcpy(row.src_etag, MD5A);
	strcpy(row.dst_etag, d.etag);
	strcpy(row.md5, MD5B);  /* recorded content differs from source MD5A */
	assert_int_equal(jo_sync_decide(&o, &s, &d, &row, NULL), JO_SYNC_COPY);
	strcpy(row.md5, MD5A);
	assert_int_equal(jo_sync_decide(&o, &s, &d, &row, NULL), JO_SYNC_SKIP);
	/* No comparable hash at all: falls back to the default rule. */
	struct jo_sync_ent s3 = ent(10, 100, ""), d3 = ent(10, 50, "x-2");
	assert_int_equal(jo_sync_decide(&o, &s3, &d3, NULL, NULL), JO_SYNC_COPY);
	d3.mtime = 100;
	assert_int_equal(jo_sync_decide(&o, &s3, &d3, NULL, NULL), JO_SYNC_SKIP);

	struct jo_sync_cmp_opts u = { .update = true };
	s = ent(10, 100, MD5A);
	d = ent(99, 200, MD5B);
	assert_int_equal(jo_sync_decide(&u, &s, &d, NULL, NULL), JO_SYNC_SKIP);
	d.mtime = 50;
	assert_int_equal(jo_sync_decide(&u, &s, &d, NULL, NULL), JO_SYNC_COPY);

	struct jo_sync_cmp_opts ie = { .ignore_existing = true };
	assert_int_equal(jo_sync_decide(&ie, &s, &d, NULL, NULL), JO_SYNC_SKIP);
	assert_int_equal(jo_sync_decide(&ie, &s, NULL, NULL, NULL), JO_SYNC_COPY);
	struct jo_sync_cmp_opts ex = { .existing = true };
	assert_int_equal(jo_sync_decide(&ex, &s, NULL, NULL, NULL), JO_SYNC_SKIP);
	assert_int_equal(jo_sync_decide(&ex, &s, &d, NULL, NULL), JO_SYNC_COPY);
	assert_true(jo_sync_etag_is_md5(MD5A));
	assert_false(jo_sync_etag_is_md5("abc"));
	assert_false(jo_sync_etag_is_md5("0123456789abcdef0123456789abcdef-2"));
}

static void test_glob(void **state)
{
	(void)state;
	assert_true(jo_sync_glob_match("*.jpg", "a.jpg"));
	assert_true(jo_sync_glob_match("*.jpg", "x/y/a.jpg"));
	assert_false(jo_sync_glob_match("/*.jpg", "x/a.jpg"));
	assert_true(jo_sync_glob_match("/*.jpg", "a.jpg"));
	assert_true(jo_sync_glob_match("b/*.jpg", "a/b/c.jpg"));
	assert_false(jo_sync_glob_match("b/*.jpg", "a/xb/c.jpg"));
	assert_true(jo_sync_glob_match("/a/**", "a/b/c/d"));
	assert_false(jo_sync_glob_match("/a/*", "a/b/c"));
	assert_true(jo_sync_glob_match("?.txt", "ü.txt"));
	assert_true(jo_sync_glob_match("[a-c]x", "bx"));
	assert_false(jo_sync_glob_match("[!a-c]x", "bx"));
	assert_true(jo_sync_glob_match("file\\*", "file*"));
	assert_false(jo_sync_glob_match("file\\*", "fileX"));
}

static void test_filter(void **state)
{
	(void)state;
	struct jo_sync_filter *f;
	struct jo_err err = { 0 };
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_true(jo_sync_filter_pass(f, "anything"));
	assert_int_equal(jo_sync_filter_add(f, '-', "/tmp/", &err), 0);
	assert_int_equal(jo_sync_filter_add(f, '+', "*.{jpg,png}", &err), 0);
	assert_false(jo_sync_filter_pass(f, "tmp/a.jpg"));   /* first match wins */
	assert_true(jo_sync_filter_pass(f, "x/tmp/a.jpg"));  /* /tmp/ anchored */
	assert_true(jo_sync_filter_pass(f, "a/b.png"));
	assert_false(jo_sync_filter_pass(f, "a/b.gif"));     /* includes exist: default out */
	assert_int_not_equal(jo_sync_filter_add(f, '-', "[abc", &err), 0);
	assert_int_not_equal(jo_sync_filter_add(f, '-', "{a,b", &err), 0);
	jo_sync_filter_free(f);

	char path[] = "/tmp/jo-filter-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	const char *txt = "# comment\n- *.log\n\n+ **\n";
	assert_int_equal(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
	close(fd);
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_load(f, path, &err), 0);
	assert_false(jo_sync_filter_pass(f, "a/b.log"));
	assert_true(jo_sync_filter_pass(f, "a/b.txt"));
	jo_sync_filter_free(f);
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "bogus line\n", 11), 11);
	close(fd);
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_load(f, path, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "line 1"));
	jo_sync_filter_free(f);
	unlink(path);
}

/*
 * Stars cost at most key x pattern length: the backtracking matcher took
 * 15 s for 11 stars against 40 'a' (exponential in the stars). SIGALRM
 * (default action: terminate) fails the test if it hangs.
 */
static void test_glob_is_not_exponential(void **state)
{
	char key[1100], pat[64] = "";
	struct jo_sync_filter *f;
	struct jo_err err = { 0 };

	(void)state;
	memset(key, 'a', 1024);
	key[1024] = '\0';
	for (int i = 0; i < 12; i++)
		strcat(pat, "*a");
	strcat(pat, "*b");
	alarm(20);
	assert_false(jo_sync_glob_match(pat, key));
	assert_false(jo_sync_glob_match("**a**a**a**a**a**a**a**a**b", key));
	key[1023] = 'b';
	assert_true(jo_sync_glob_match(pat, key));
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_add(f, '-', "{*a,*b}*a*a*a*a*a*a*a*a*a*c", &err), 0);
	key[1023] = 'a';
	assert_true(jo_sync_filter_pass(f, key));
	jo_sync_filter_free(f);
	alarm(0);
	/* the matcher still backtracks right where it must */
	assert_true(jo_sync_glob_match("*a*b*c", "xaxxbxxxc"));
	assert_false(jo_sync_glob_match("*a*b*c", "xaxxcxxxb"));
	assert_true(jo_sync_glob_match("a/**/z", "a/b/c/z"));
	assert_true(jo_sync_glob_match("a/**z", "a/z"));
	assert_false(jo_sync_glob_match("a*z", "a/z"));
	assert_true(jo_sync_glob_match("?z", "\xc3\xbcz"));
	assert_true(jo_sync_glob_match("*?", "\xc3\xbc"));
	assert_false(jo_sync_glob_match("[abc", "[abc"));
}

static void test_filter_edges(void **state)
{
	struct jo_sync_filter *f;
	struct jo_err err = { 0 };
	char *big = malloc(5000);
	FILE *fp;

	(void)state;
	/* "- /" is every key under the root, like "- /dir/" is every key under dir */
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_add(f, '-', "/", &err), 0);
	assert_false(jo_sync_filter_pass(f, "a"));
	assert_false(jo_sync_filter_pass(f, "b/c"));
	jo_sync_filter_free(f);
	/* patterns are bounded (brace groups recurse once each) */
	assert_non_null(big);
	for (int i = 0; i < 4998; i += 3) {
		big[i] = '{';
		big[i + 1] = 'a';
		big[i + 2] = '}';
	}
	big[4998] = '\0';
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_add(f, '-', big, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "longer than"));
	big[4095] = '\0'; /* 1365 groups "{a}" */
	assert_int_equal(jo_sync_filter_add(f, '-', big, &err), 0);
	jo_sync_filter_free(f);
	free(big);
	/* the stream reader names its file and line */
	fp = fmemopen((void *)"+ *.jpg\n!\n- *.png\n+ [x\n", 23, "r");
	assert_non_null(fp);
	assert_int_equal(jo_sync_filter_new(&f), 0);
	assert_int_equal(jo_sync_filter_read(f, fp, "rules.txt", &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "rules.txt\" line 4"));
	assert_true(jo_sync_filter_pass(f, "a.jpg")); /* "!" cleared the include */
	assert_false(jo_sync_filter_pass(f, "a.png"));
	fclose(fp);
	jo_sync_filter_free(f);
}

static void test_side_parse(void **state)
{
	(void)state;
	struct jo_objurl s;
	struct jo_err err = { 0 };
	setenv("JFSOPS_SRC_ACCESS_KEY", "envak", 1);
	setenv("JFSOPS_SRC_SECRET_KEY", "envsk", 1);
	unsetenv("AWS_ACCESS_KEY_ID");
	assert_int_equal(jo_objurl_parse(&s, "s3://bkt/some/pre?endpoint=http://127.0.0.1:9/&path_style=1&list_v1=1",
					    "src", NULL, NULL, &err), 0);
	assert_string_equal(s.bucket, "bkt");
	assert_string_equal(s.prefix, "some/pre/");
	assert_string_equal(s.endpoint, "http://127.0.0.1:9");
	assert_true(s.path_style);
	assert_true(s.list_v1);
	assert_false(s.unordered);
	assert_string_equal(s.access_key, "envak");
	assert_null(strstr(s.desc, "envsk"));
	jo_objurl_free(&s);
	/* Flags beat the environment. */
	struct jo_objurl_flags fl = JO_OBJURL_FLAGS_INIT;
	fl.access_key = "flagak";
	fl.secret_key = "flagsk";
	fl.unordered = 1;
	assert_int_equal(jo_objurl_parse(&s, "s3://bkt", "src", &fl, NULL, &err), 0);
	assert_string_equal(s.access_key, "flagak");
	assert_string_equal(s.prefix, "");
	assert_true(s.unordered);
	assert_non_null(strstr(s.endpoint, "amazonaws.com"));
	jo_objurl_free(&s);
	/* Secrets in URLs are refused. */
	assert_int_equal(jo_objurl_parse(&s, "s3://bkt?secret_key=x", "src", NULL, NULL, &err),
			 JO_EINVAL);
	jo_objurl_free(&s);
	assert_int_equal(jo_objurl_parse(&s, "s3://ak:sk@bkt/p", "src", NULL, NULL, &err),
			 JO_EINVAL);
	jo_objurl_free(&s);
	/* Local directory. */
	assert_int_equal(jo_objurl_parse(&s, "/tmp/x", "dst", NULL, NULL, &err), 0);
	assert_true(s.local);
	assert_string_equal(s.bucket, "/tmp/x/");
	jo_objurl_free(&s);
	assert_int_equal(jo_objurl_parse(&s, "gs://x", "dst", NULL, NULL, &err), JO_EINVAL);
	jo_objurl_free(&s);

	/* Profiles, and the permission check. */
	char path[] = "/tmp/jo-prof-XXXXXX";
	int fd = mkstemp(path);
	const char *ini = "[profile other]\nendpoint = http://o:1\n"
			  "[profile dc1]\nendpoint = http://10.0.0.1:9000\nregion = r1\n"
			  "access_key = pak\nsecret_key = psk\npath_style = true\n";
	assert_int_equal(write(fd, ini, strlen(ini)), (ssize_t)strlen(ini));
	close(fd);
	chmod(path, 0644);
	/* a loose file holding a secret is a usage error (exit 2), as for every command */
	assert_int_equal(jo_objurl_parse(&s, "s3://dc1@bkt/p", "src", NULL, path, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "chmod 600"));
	assert_null(strstr(err.msg, "psk"));
	jo_objurl_free(&s);
	chmod(path, 0600);
	assert_int_equal(jo_objurl_parse(&s, "s3://dc1@bkt/p", "src", NULL, path, &err), 0);
	assert_string_equal(s.endpoint, "http://10.0.0.1:9000");
	assert_string_equal(s.region, "r1");
	assert_string_equal(s.access_key, "pak");
	assert_string_equal(s.secret_key, "psk");
	assert_true(s.path_style);
	jo_objurl_free(&s);
	assert_int_equal(jo_objurl_parse(&s, "s3://nope@bkt/p", "src", NULL, path, &err), JO_EINVAL);
	jo_objurl_free(&s);
	/* JFSOPS_CONFIG names the file when --config does not; flags > query > profile */
	setenv("JFSOPS_CONFIG", path, 1);
	struct jo_objurl_flags f2 = JO_OBJURL_FLAGS_INIT;
	f2.region = "flagregion";
	assert_int_equal(jo_objurl_parse(&s, "s3://dc1@bkt/p?endpoint=http://q:2", "src", &f2, NULL,
					    &err), 0);
	assert_string_equal(s.endpoint, "http://q:2");
	assert_string_equal(s.region, "flagregion");
	assert_string_equal(s.access_key, "pak");
	assert_null(s.session_token);
	jo_objurl_free(&s);
	unsetenv("JFSOPS_CONFIG");
	/* XDG_CONFIG_HOME/jfsops/config is the default file; session_token goes along */
	char xdg[] = "/tmp/jo-xdg-XXXXXX";
	assert_non_null(mkdtemp(xdg));
	char dir[128], cfgp[160];
	snprintf(dir, sizeof(dir), "%s/jfsops", xdg);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(cfgp, sizeof(cfgp), "%s/config", dir);
	fd = open(cfgp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	const char *ini2 = "[profile tok]\nendpoint = http://t:3\naccess_key = tak\n"
			   "secret_key = tsk\nsession_token = ttok\n";
	assert_int_equal(write(fd, ini2, strlen(ini2)), (ssize_t)strlen(ini2));
	close(fd);
	const char *old_xdg = getenv("XDG_CONFIG_HOME");
	char *save_xdg = old_xdg ? strdup(old_xdg) : NULL;
	setenv("XDG_CONFIG_HOME", xdg, 1);
	assert_int_equal(jo_objurl_parse(&s, "s3://tok@bkt", "dst", NULL, NULL, &err), 0);
	assert_string_equal(s.endpoint, "http://t:3");
	assert_string_equal(s.secret_key, "tsk");
	assert_string_equal(s.session_token, "ttok");
	jo_objurl_free(&s);
	/* credentials from a flag never pair with the profile's token */
	struct jo_objurl_flags f3 = JO_OBJURL_FLAGS_INIT;
	f3.access_key = "fak";
	f3.secret_key = "fsk";
	assert_int_equal(jo_objurl_parse(&s, "s3://tok@bkt", "dst", &f3, NULL, &err), 0);
	assert_string_equal(s.access_key, "fak");
	assert_null(s.session_token);
	jo_objurl_free(&s);
	if (save_xdg)
		setenv("XDG_CONFIG_HOME", save_xdg, 1);
	else
		unsetenv("XDG_CONFIG_HOME");
	free(save_xdg);
	unlink(cfgp);
	rmdir(dir);
	rmdir(xdg);
	unlink(path);
	unsetenv("JFSOPS_SRC_ACCESS_KEY");
	unsetenv("JFSOPS_SRC_SECRET_KEY");
}

static void test_state_roundtrip(void **state)
{
	(void)state;
	char path[] = "/tmp/jo-state-XXXXXX";
	int fd = mkstemp(path);
	close(fd);
	unlink(path);
	struct jo_sync_state *st;
	struct jo_err err = { 0 };
	/* A dry run on a missing file works on an empty in-memory state. */
	assert_int_equal(jo_sync_state_open(&st, path, true, &err), 0);
	struct jo_sync_row row;
	assert_int_equal(jo_sync_state_get(st, "k", &row, &err), 0);
	assert_false(row.found);
	jo_sync_state_close(st);
	assert_int_not_equal(access(path, F_OK), 0);

	assert_int_equal(jo_sync_state_open(&st, path, false, &err), 0);
	struct jo_sync_row w = { .found = true, .src_size = 5, .src_mtime = 7, .dst_size = 5,
				 .copied_at = 99 };
	strcpy(w.src_etag, MD5A);
	strcpy(w.md5, MD5A);
	assert_int_equal(jo_sync_state_put(st, "a key ü", &w, &err), 0);
	assert_int_equal(jo_sync_state_get(st, "a key ü", &row, &err), 0);
	assert_true(row.found);
	assert_int_equal(row.src_mtime, 7);
	assert_string_equal(row.md5, MD5A);
	assert_int_equal(row.copied_at, 99);
	struct jo_sync_mpu m = { .part_size = 5 << 20, .src_size = 1 << 24, .src_mtime = 3 };
	strcpy(m.upload_id, "UP1");
	assert_int_equal(jo_sync_state_mpu_put(st, "big", &m, &err), 0);
	assert_int_equal(jo_sync_state_part_put(st, "big", 2, MD5B, 5 << 20, &err), 0);
	struct jo_sync_mpu r;
	assert_int_equal(jo_sync_state_mpu_get(st, "big", &r, &err), 0);
	assert_string_equal(r.upload_id, "UP1");
	assert_int_equal(jo_sync_state_mpu_del(st, "big", &err), 0);
	assert_int_equal(jo_sync_state_mpu_get(st, "big", &r, &err), JO_ENOTFOUND);
	assert_int_equal(jo_sync_state_setkv(st, "unordered:x", "1", &err), 0);
	char *v;
	assert_int_equal(jo_sync_state_getkv(st, "unordered:x", &v, &err), 0);
	assert_string_equal(v, "1");
	free(v);
	jo_sync_state_close(st);
	char aux[64];
	unlink(path);
	snprintf(aux, sizeof(aux), "%s-wal", path);
	unlink(aux);
	snprintf(aux, sizeof(aux), "%s-shm", path);
	unlink(aux);
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_bwlimit(void **state)
{
	(void)state;
	assert_null(jo_sync_bw_new(0));
	jo_sync_bw_take(NULL, 1 << 30);  /* unlimited: returns at once */
	struct jo_sync_bw *b = jo_sync_bw_new(4 << 20);
	double t0 = mono();
	for (int i = 0; i < 16; i++)
		jo_sync_bw_take(b, 128 << 10);   /* 2 MiB at 4 MiB/s */
	double el = mono() - t0;
	assert_true(el >= 0.4);
	assert_true(el < 2.0);
	jo_sync_bw_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_compare_default),
		cmocka_unit_test(test_compare_modes),
		cmocka_unit_test(test_glob),
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_glob_is_not_exponential),
		cmocka_unit_test(test_filter_edges),
		cmocka_unit_test(test_side_parse),
		cmocka_unit_test(test_state_roundtrip),
		cmocka_unit_test(test_bwlimit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
