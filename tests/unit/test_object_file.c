/* The "file" backend and the sharding wrapper of common/object, in a temp dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/object/object.h"
#include "support/testutil.h"

struct fx {
	char dir[256];
	struct jo_obj *o;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct jo_obj_opts opts = JO_OBJ_OPTS_INIT;
	struct jo_err err;
	char bucket[300];

	snprintf(f->dir, sizeof(f->dir), "/tmp/jo_obj_file_XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(bucket, sizeof(bucket), "%s/bkt/", f->dir);
	opts.storage = "file";
	opts.bucket = bucket;
	if (jo_obj_open(&f->o, &opts, &err) != 0)
		return -1;
	if (jo_obj_create_bucket(f->o, &err) != 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	jo_obj_close(f->o);
	tu_rm_rf(f->dir);
	free(f);
	return 0;
}

static void put_s(struct jo_obj *o, const char *key, const char *body)
{
	struct jo_err err;

	if (jo_obj_put(o, key, body, strlen(body), NULL, &err) != 0)
		fail_msg("put %s: %s", key, err.msg);
}

/* Put each key of the NULL-terminated list, with body BODY. */
static void put_keys(struct jo_obj *o, const char *body, ...) __attribute__((sentinel));
static void put_keys(struct jo_obj *o, const char *body, ...)
{
	va_list ap;
	const char *k;

	va_start(ap, body);
	while ((k = va_arg(ap, const char *)) != NULL)
		put_s(o, k, body);
	va_end(ap);
}

struct collected {
	char keys[64][128];
	bool prefix[64];
	bool link[64];
	uint64_t size[64];
	int n;
	int stop_after;
};

static int collect(const struct jo_obj_info *info, void *payload)
{
	struct collected *c = payload;

	if (c->n >= 64)
		return -100;
	snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", info->key);
	c->prefix[c->n] = info->is_prefix;
	c->link[c->n] = info->is_link;
	c->size[c->n] = info->size;
	c->n++;
	if (c->stop_after && c->n == c->stop_after)
		return 42;
	return 0;
}

static void expect_keys(const struct collected *c, const char *const *want, int n)
{
	if (c->n != n) {
		for (int i = 0; i < c->n; i++)
			print_message("got[%d] %s\n", i, c->keys[i]);
		fail_msg("got %d keys, want %d", c->n, n);
	}
	for (int i = 0; i < n; i++)
		assert_string_equal(c->keys[i], want[i]);
}

/* List (c emptied first) and expect exactly want[0..n). */
static void list_expect(struct jo_obj *o, const char *prefix, const char *start_after, const char *delim,
			struct collected *c, const char *const *want, int n)
{
	struct jo_err err;

	memset(c, 0, sizeof(*c));
	assert_int_equal(jo_obj_list(o, prefix, start_after, delim, collect, c, &err), 0);
	expect_keys(c, want, n);
}

/* KEY's bytes [off, off+len) (len -1: to the end) are want[0..n). */
static void get_eq(struct jo_obj *o, const char *key, int64_t off, int64_t len, const char *want, size_t n)
{
	struct jo_err err;
	uint8_t *buf;
	size_t got;

	assert_int_equal(jo_obj_get_buf(o, key, off, len, 100, &buf, &got, &err), 0);
	assert_int_equal(got, n);
	if (n > 0)
		assert_memory_equal(buf, want, n);
	free(buf);
}

/* A file store of N shards DIR/NAME0/ .. DIR/NAME<N-1>/, created. */
static struct jo_obj *open_sharded(const struct fx *f, const char *name, int n)
{
	struct jo_obj_opts opts = JO_OBJ_OPTS_INIT;
	struct jo_obj *s = NULL;
	struct jo_err err;
	char pattern[300];

	snprintf(pattern, sizeof(pattern), "%s/%s%%d/", f->dir, name);
	opts.storage = "file";
	opts.bucket = pattern;
	opts.shards = n;
	assert_int_equal(jo_obj_open(&s, &opts, &err), 0);
	assert_int_equal(jo_obj_create_bucket(s, &err), 0);
	return s;
}

static void round_trip_get_range_head(void **state)
{
	struct fx *f = *state;
	struct jo_obj_info info;
	struct jo_err err;
	uint8_t *buf;
	size_t len;

	put_s(f->o, "vol/chunks/0/0/1_0_10", "0123456789");
	get_eq(f->o, "vol/chunks/0/0/1_0_10", 0, -1, "0123456789", 10);
	get_eq(f->o, "vol/chunks/0/0/1_0_10", 3, 4, "3456", 4);
	/* A range past the end returns what exists. */
	get_eq(f->o, "vol/chunks/0/0/1_0_10", 8, 100, "89", 2);
	get_eq(f->o, "vol/chunks/0/0/1_0_10", 20, -1, "", 0);
	/* Larger than max. */
	assert_int_equal(jo_obj_get_buf(f->o, "vol/chunks/0/0/1_0_10", 0, -1, 5, &buf, &len, &err), JO_EPROTO);
	assert_null(buf);

	assert_int_equal(jo_obj_head(f->o, "vol/chunks/0/0/1_0_10", &info, &err), 0);
	assert_int_equal(info.size, 10);
	assert_true(info.mtime > 1600000000);
	assert_int_equal(jo_obj_head(f->o, "vol/missing", &info, &err), JO_ENOTFOUND);
	assert_int_equal(jo_obj_get_buf(f->o, "vol/missing", 0, -1, 5, &buf, &len, &err), JO_ENOTFOUND);
	/* A directory is not an object. */
	assert_int_equal(jo_obj_head(f->o, "vol/chunks", &info, &err), JO_ENOTFOUND);
	/* Overwrite. */
	put_s(f->o, "vol/chunks/0/0/1_0_10", "abc");
	assert_int_equal(jo_obj_head(f->o, "vol/chunks/0/0/1_0_10", &info, &err), 0);
	assert_int_equal(info.size, 3);
	/* Keys cannot climb out of the bucket. */
	assert_int_equal(jo_obj_put(f->o, "../evil", "x", 1, NULL, &err), JO_EINVAL);
	assert_int_equal(jo_obj_put(f->o, "", "x", 1, NULL, &err), JO_EINVAL);
}

static void listing_is_in_byte_order(void **state)
{
	struct fx *f = *state;
	struct collected c = { 0 };
	static const char *const want[] = {
		"a b", "a+b", "a-b", "a.txt", "a/x", "a/y/z", "a0", "b/.hidden", "b/c", "\xc3\xa9",
	};

	/* Inserted in a shuffled order. */
	put_keys(f->o, "1", "a/y/z", "\xc3\xa9", NULL);
	put_s(f->o, "a.txt", "12");
	put_keys(f->o, "1", "a0", "a/x", "a-b", "a b", "a+b", "b/c", "b/.hidden", NULL);
	/* A JuiceFS temp file must be skipped. */
	{
		char p[400];
		int fd;

		snprintf(p, sizeof(p), "%s/bkt/b/.jfs.c.tmp.12345", f->dir);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		assert_true(fd >= 0);
		close(fd);
	}
	list_expect(f->o, "", NULL, NULL, &c, want, 10);
	assert_int_equal(c.size[3], 2);
}

static void listing_prefix_start_after_delimiter(void **state)
{
	struct fx *f = *state;
	struct collected c = { 0 };
	struct jo_err err;

	put_keys(f->o, "1234", "v/chunks/0/0/1_0_4", "v/chunks/0/0/2_0_4", "v/chunks/0/1/3_0_4",
		 "v/chunks/1/2/4_0_4", NULL);
	put_s(f->o, "v/juicefs_uuid", "u");
	put_s(f->o, "v/meta/dump.json", "{}");
	put_s(f->o, "w/other", "x");

	{
		static const char *const want[] = { "v/chunks/0/0/1_0_4", "v/chunks/0/0/2_0_4",
						    "v/chunks/0/1/3_0_4", "v/chunks/1/2/4_0_4" };
		list_expect(f->o, "v/chunks/", NULL, NULL, &c, want, 4);
	}
	{
		static const char *const want[] = { "v/chunks/0/1/3_0_4", "v/chunks/1/2/4_0_4",
						    "v/juicefs_uuid", "v/meta/dump.json" };
		list_expect(f->o, "v/", "v/chunks/0/0/2_0_4", NULL, &c, want, 4);
	}
	{
		/* start_after that is not an existing key, inside a directory */
		static const char *const want[] = { "v/chunks/1/2/4_0_4", "v/juicefs_uuid",
						    "v/meta/dump.json" };
		list_expect(f->o, "v/", "v/chunks/0/5", NULL, &c, want, 3);
	}
	{
		/* A prefix that ends inside a name. */
		static const char *const want[] = { "v/juicefs_uuid" };
		list_expect(f->o, "v/j", NULL, NULL, &c, want, 1);
	}
	{
		static const char *const want[] = { "v/chunks/", "v/juicefs_uuid", "v/meta/" };
		list_expect(f->o, "v/", NULL, "/", &c, want, 3);
		assert_true(c.prefix[0]);
		assert_false(c.prefix[1]);
		assert_true(c.prefix[2]);
	}
	{
		static const char *const want[] = { "v/", "w/" };
		list_expect(f->o, "", NULL, "/", &c, want, 2);
	}
	{
		/* A delimiter other than "/" is emulated over the flat walk. */
		static const char *const want[] = { "v/chunks/0/0/1_", "v/chunks/0/0/2_",
						    "v/chunks/0/1/3_", "v/chunks/1/2/4_" };
		list_expect(f->o, "v/chunks/", NULL, "_", &c, want, 4);
	}
	{
		/* The callback's non-zero value stops the listing and comes back. */
		memset(&c, 0, sizeof(c));
		c.stop_after = 2;
		assert_int_equal(jo_obj_list(f->o, "", NULL, NULL, collect, &c, &err), 42);
		assert_int_equal(c.n, 2);
	}
	{
		memset(&c, 0, sizeof(c));
		assert_int_equal(jo_obj_list(f->o, "nothing/here/", NULL, NULL, collect, &c, &err), 0);
		assert_int_equal(c.n, 0);
	}
}

static void batch_delete_and_delete(void **state)
{
	struct fx *f = *state;
	const char *keys[] = { "d/1", "d/2", "d/missing", "d/3" };
	int results[4] = { -1, -1, -1, -1 };
	struct collected c = { 0 };
	struct jo_obj_info info;
	struct jo_err err;

	put_s(f->o, "d/1", "1");
	put_s(f->o, "d/2", "2");
	put_s(f->o, "d/3", "3");
	put_s(f->o, "d/4", "4");
	assert_int_equal(jo_obj_delete_batch(f->o, keys, 4, results, &err), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(results[i], 0);
	assert_int_equal(jo_obj_list(f->o, "d/", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.keys[0], "d/4");
	assert_int_equal(jo_obj_delete(f->o, "d/4", &err), 0);
	assert_int_equal(jo_obj_delete(f->o, "d/4", &err), 0);
	assert_int_equal(jo_obj_head(f->o, "d/4", &info, &err), JO_ENOTFOUND);
}

/* put/mpu with set_mode: those bits (0777 of them); without: 0666 less the umask. */
static void put_mode(void **state)
{
	struct fx *f = *state;
	struct jo_obj_put_opts po = { .set_mode = true, .mode = 04750 };
	struct jo_obj_part part = { .number = 1 };
	struct jo_obj_info info = { 0 };
	struct jo_err err;
	struct stat st;
	char path[400], *id = NULL;
	mode_t old = umask(027);

	assert_int_equal(jo_obj_put(f->o, "m/plain", "x", 1, NULL, &err), 0);
	assert_int_equal(jo_obj_put(f->o, "m/kept", "x", 1, &po, &err), 0);
	po.mode = 0604;
	assert_int_equal(jo_obj_mpu_create(f->o, "m/big", &po, &id, &err), 0);
	assert_int_equal(jo_obj_mpu_put_part(f->o, "m/big", id, 1, "hello", 5, part.etag, &err), 0);
	assert_int_equal(jo_obj_mpu_complete(f->o, "m/big", id, &part, 1, &err), 0);
	free(id);
	umask(old);
	snprintf(path, sizeof(path), "%s/bkt/m/plain", f->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	snprintf(path, sizeof(path), "%s/bkt/m/kept", f->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);      /* no setuid */
	snprintf(path, sizeof(path), "%s/bkt/m/big", f->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	assert_int_equal(jo_obj_head(f->o, "m/kept", &info, &err), 0);
	assert_int_equal(info.mode, 0750);
}

static void copy_and_multipart(void **state)
{
	struct fx *f = *state;
	struct jo_obj_part parts[2];
	struct collected c = { 0 };
	struct jo_err err;
	char *id = NULL, etag[72];

	put_s(f->o, "src/obj", "hello world");
	assert_int_equal(jo_obj_copy(f->o, "src/obj", "dst/sub/obj", NULL, &err), 0);
	get_eq(f->o, "dst/sub/obj", 0, -1, "hello world", 11);
	assert_int_equal(jo_obj_copy(f->o, "src/none", "dst/x", NULL, &err), JO_ENOTFOUND);

	assert_int_equal(jo_obj_mpu_create(f->o, "big/obj", NULL, &id, &err), 0);
	assert_non_null(id);
	assert_int_equal(jo_obj_mpu_put_part(f->o, "big/obj", id, 2, "world", 5, etag, &err), 0);
	parts[1].number = 2;
	strcpy(parts[1].etag, etag);
	assert_int_equal(jo_obj_mpu_put_part(f->o, "big/obj", id, 1, "hello ", 6, etag, &err), 0);
	assert_int_equal(strlen(etag), 32); /* hex MD5 of the part, as S3 gives */
	parts[0].number = 1;
	strcpy(parts[0].etag, etag);
	/* Parts are hidden from listings while the upload is open. */
	assert_int_equal(jo_obj_list(f->o, "big/", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(jo_obj_mpu_complete(f->o, "big/obj", id, parts, 2, &err), 0);
	get_eq(f->o, "big/obj", 0, -1, "hello world", 11);
	memset(&c, 0, sizeof(c));
	assert_int_equal(jo_obj_list(f->o, "big/", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 1);
	/* After completion the upload is gone. */
	assert_int_equal(jo_obj_mpu_put_part(f->o, "big/obj", id, 3, "x", 1, etag, &err), JO_ENOTFOUND);
	assert_int_equal(jo_obj_mpu_abort(f->o, "big/obj", id, &err), 0);
	free(id);
}

static void sharded_file_stores_merge_listings(void **state)
{
	struct fx *f = *state;
	struct jo_obj_opts opts = JO_OBJ_OPTS_INIT;
	struct jo_obj *s = NULL;
	struct collected c = { 0 };
	struct jo_err err;
	char key[64];
	int nonempty = 0;

	(void)f;
	s = open_sharded(f, "shard-", 3);
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "vol/chunks/%d/k%02d", i % 4, i);
		put_s(s, key, "x");
	}
	/* Each key sits in shard fnv1a32(key) % 3 */
	for (int i = 0; i < 3; i++) {
		char p[400];
		struct stat st;

		snprintf(p, sizeof(p), "%s/shard-%d/vol", f->dir, i);
		if (stat(p, &st) == 0)
			nonempty++;
	}
	assert_true(nonempty >= 2);
	assert_int_equal(jo_obj_list(s, "vol/", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 30);
	for (int i = 1; i < c.n; i++)
		assert_true(strcmp(c.keys[i - 1], c.keys[i]) < 0);
	memset(&c, 0, sizeof(c));
	assert_int_equal(jo_obj_list(s, "vol/chunks/", NULL, "/", collect, &c, &err), 0);
	{
		static const char *const want[] = { "vol/chunks/0/", "vol/chunks/1/", "vol/chunks/2/",
						    "vol/chunks/3/" };
		expect_keys(&c, want, 4);
	}
	memset(&c, 0, sizeof(c));
	c.stop_after = 5;
	assert_int_equal(jo_obj_list(s, "", NULL, NULL, collect, &c, &err), 42);
	jo_obj_close(s);
	opts.bucket = "/tmp/no-pattern/";
	assert_int_equal(jo_obj_open(&s, &opts, &err), JO_EINVAL);
}

static void shard_placement_is_fnv1a_of_full_key(void **state)
{
	struct fx *f = *state;
	struct jo_obj *s = NULL;
	char p[400];
	struct stat st;

	/* fnv1a32("foobar") = 0xbf9cf968 = 3214735720 (published FNV test value). */
	s = open_sharded(f, "s", 7);
	put_s(s, "foobar", "x");
	snprintf(p, sizeof(p), "%s/s%u/foobar", f->dir, 3214735720u % 7u);
	assert_int_equal(stat(p, &st), 0);
	jo_obj_close(s);
}


static void write_file(const char *path, const char *body)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fputs(body, fp);
	fclose(fp);
}

static bool file_has(const char *path, const char *body)
{
	char buf[256] = { 0 };
	FILE *fp = fopen(path, "r");
	size_t n;

	if (!fp)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	return n == strlen(body) && memcmp(buf, body, n) == 0;
}

static bool is_symlink(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

static struct jo_obj *open_file_store(const char *bucket, bool list_links)
{
	struct jo_obj_opts opts = JO_OBJ_OPTS_INIT;
	struct jo_obj *o = NULL;
	struct jo_err err;

	opts.storage = "file";
	opts.bucket = bucket;
	opts.list_links = list_links;
	if (jo_obj_open(&o, &opts, &err) != 0)
		fail_msg("open %s: %s", bucket, err.msg);
	return o;
}

/*
 * Symlinks under the bucket (to a directory outside, to a file outside, to
 * "/") are never followed: not listed, not read, not written through, not
 * deleted, and what they point at stays as it was.
 */
static void symlinks_are_never_followed(void **state)
{
	struct fx *f = *state;
	char out[300], p[400], q[400], bkt[300];
	struct collected c = { 0 };
	struct jo_obj_info info;
	struct jo_obj *ol;
	struct jo_err err;
	const char *keys[] = { "v/ldir/secret", "v/lfile", "v/ok2" };
	int results[3] = { 1, 1, 1 };
	uint8_t *buf = NULL;
	size_t len;
	char *id = NULL;

	snprintf(out, sizeof(out), "%s/outside", f->dir);
	assert_int_equal(mkdir(out, 0755), 0);
	snprintf(p, sizeof(p), "%s/secret", out);
	write_file(p, "keep me");
	put_s(f->o, "v/ok", "fine");
	put_s(f->o, "v/ok2", "fine");
	snprintf(p, sizeof(p), "%s/bkt/v/ldir", f->dir);
	assert_int_equal(symlink(out, p), 0);
	snprintf(p, sizeof(p), "%s/bkt/v/lfile", f->dir);
	snprintf(q, sizeof(q), "%s/secret", out);
	assert_int_equal(symlink(q, p), 0);
	snprintf(p, sizeof(p), "%s/bkt/v/root", f->dir);
	assert_int_equal(symlink("/", p), 0);
	snprintf(p, sizeof(p), "%s/bkt/v/sub", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/bkt/v/sub/lroot", f->dir);
	assert_int_equal(symlink("/", p), 0);

	/* listings: skipped by default, reported (never entered) with list_links */
	{
		static const char *const want[] = { "v/ok", "v/ok2" };
		list_expect(f->o, "", NULL, NULL, &c, want, 2);
	}
	snprintf(bkt, sizeof(bkt), "%s/bkt/", f->dir);
	ol = open_file_store(bkt, true);
	{
		static const char *const want[] = { "v/ldir", "v/lfile", "v/ok", "v/ok2", "v/root",
						    "v/sub/lroot" };
		static const bool link[] = { true, true, false, false, true, true };
		list_expect(ol, "", NULL, NULL, &c, want, 6);
		for (int i = 0; i < 6; i++)
			assert_int_equal(c.link[i], link[i]);
		assert_int_equal(c.size[0], 0);
	}
	{
		/* with a delimiter a link is an entry of its own, never a prefix */
		static const char *const want[] = { "v/ldir", "v/lfile", "v/ok", "v/ok2", "v/root",
						    "v/sub/" };
		list_expect(ol, "v/", NULL, "/", &c, want, 6);
		assert_true(c.link[0] && !c.prefix[0]);
		assert_true(c.prefix[5]);
	}
	/* a prefix whose directory is a symlink is refused, not listed as empty */
	memset(&c, 0, sizeof(c));
	assert_int_equal(jo_obj_list(f->o, "v/ldir/", NULL, NULL, collect, &c, &err), JO_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "symlink"));
	assert_int_equal(c.n, 0);
	assert_int_equal(jo_obj_list(ol, "v/root/e", NULL, NULL, collect, &c, &err), JO_EUNSUPPORTED);
	assert_int_equal(c.n, 0);
	jo_obj_close(ol);

	/* reads */
	assert_int_equal(jo_obj_get_buf(f->o, "v/lfile", 0, -1, 100, &buf, &len, &err), JO_EUNSUPPORTED);
	assert_null(buf);
	assert_int_equal(jo_obj_get_buf(f->o, "v/ldir/secret", 0, -1, 100, &buf, &len, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_get_buf(f->o, "v/root/etc/passwd", 0, -1, 100, &buf, &len, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_head(f->o, "v/lfile", &info, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_head(f->o, "v/ldir/secret", &info, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_copy(f->o, "v/lfile", "v/copy", NULL, &err), JO_EUNSUPPORTED);

	/* writes: not through a link, not over a link */
	assert_int_equal(jo_obj_put(f->o, "v/ldir/new", "x", 1, NULL, &err), JO_EUNSUPPORTED);
	snprintf(p, sizeof(p), "%s/new", out);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(jo_obj_put(f->o, "v/ldir/deep/new", "x", 1, NULL, &err), JO_EUNSUPPORTED);
	snprintf(p, sizeof(p), "%s/deep", out);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(jo_obj_put(f->o, "v/lfile", "overwritten", 11, NULL, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_put(f->o, "v/ldir/", "", 0, NULL, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_copy(f->o, "v/ok", "v/ldir/copied", NULL, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_copy(f->o, "v/ok", "v/lfile", NULL, &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_mpu_create(f->o, "v/ldir/big", NULL, &id, &err), JO_EUNSUPPORTED);
	assert_null(id);

	/* deletes: neither the link nor anything behind it */
	assert_int_equal(jo_obj_delete(f->o, "v/ldir/secret", &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_delete(f->o, "v/lfile", &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_delete(f->o, "v/ldir", &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_delete(f->o, "v/ldir/", &err), JO_EUNSUPPORTED);
	assert_int_equal(jo_obj_delete_batch(f->o, keys, 3, results, &err), 0);
	assert_int_equal(results[0], JO_EUNSUPPORTED);
	assert_int_equal(results[1], JO_EUNSUPPORTED);
	assert_int_equal(results[2], 0);

	snprintf(p, sizeof(p), "%s/secret", out);
	assert_true(file_has(p, "keep me"));
	snprintf(p, sizeof(p), "%s/bkt/v/ldir", f->dir);
	assert_true(is_symlink(p));
	snprintf(p, sizeof(p), "%s/bkt/v/lfile", f->dir);
	assert_true(is_symlink(p));
	snprintf(p, sizeof(p), "%s/bkt/v/ok2", f->dir);
	assert_int_equal(access(p, F_OK), -1);
}

/* The bucket path itself may be a symlink: it is resolved once, at open. */
static void bucket_path_through_a_symlink(void **state)
{
	struct fx *f = *state;
	char link[300], p[400];
	struct collected c = { 0 };
	struct jo_obj *o;
	struct jo_err err;

	put_s(f->o, "a/b", "1");
	snprintf(link, sizeof(link), "%s/link-to-bkt", f->dir);
	snprintf(p, sizeof(p), "%s/bkt", f->dir);
	assert_int_equal(symlink(p, link), 0);
	o = open_file_store(link, false);
	assert_int_equal(jo_obj_list(o, "", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.keys[0], "a/b");
	put_s(o, "a/c", "2");
	snprintf(p, sizeof(p), "%s/bkt/a/c", f->dir);
	assert_true(file_has(p, "2"));
	jo_obj_close(o);
	/* a root that does not exist yet below a symlinked directory */
	snprintf(p, sizeof(p), "%s/new/dir/", link);
	o = open_file_store(p, false);
	assert_int_equal(jo_obj_create_bucket(o, &err), 0);
	put_s(o, "k", "3");
	snprintf(p, sizeof(p), "%s/bkt/new/dir/k", f->dir);
	assert_true(file_has(p, "3"));
	jo_obj_close(o);
}

/* A missing bucket directory is an error (NoSuchBucket), never an empty listing. */
static void missing_bucket_directory_is_an_error(void **state)
{
	struct fx *f = *state;
	char p[400];
	struct collected c = { 0 };
	struct jo_obj_info info;
	struct jo_obj *o;
	struct jo_err err;

	snprintf(p, sizeof(p), "%s/gone/", f->dir);
	o = open_file_store(p, false);
	assert_int_equal(jo_obj_list(o, "", NULL, NULL, collect, &c, &err), JO_ESTATE);
	assert_non_null(strstr(err.msg, "does not exist"));
	assert_int_equal(jo_obj_list(o, "vol/chunks/", NULL, "/", collect, &c, &err), JO_ESTATE);
	assert_int_equal(jo_obj_head(o, "vol/x", &info, &err), JO_ESTATE);
	/* a put does not create it either (an unmounted disk stays empty) */
	assert_int_equal(jo_obj_put(o, "vol/x", "1", 1, NULL, &err), JO_ESTATE);
	assert_int_equal(access(p, F_OK), -1);
	/* a missing directory below an existing bucket is an empty prefix */
	assert_int_equal(jo_obj_create_bucket(o, &err), 0);
	assert_int_equal(jo_obj_list(o, "vol/chunks/", NULL, NULL, collect, &c, &err), 0);
	assert_int_equal(c.n, 0);
	jo_obj_close(o);
	/* a bucket path that is a file */
	snprintf(p, sizeof(p), "%s/plainfile", f->dir);
	write_file(p, "x");
	o = open_file_store(p, false);
	assert_int_equal(jo_obj_list(o, "", NULL, NULL, collect, &c, &err), JO_ESTATE);
	assert_non_null(strstr(err.msg, "not a directory"));
	jo_obj_close(o);
}

struct proc_walk {
	int n, links;
	bool escaped, saw_root_link;
};

static int proc_cb(const struct jo_obj_info *info, void *payload)
{
	struct proc_walk *pw = payload;

	pw->n++;
	if (info->is_link)
		pw->links++;
	if (info->is_link && strcmp(info->key, "root") == 0)
		pw->saw_root_link = true;
	/* anything under root/, cwd/ or exe/ would be the machine's own tree */
	if (!strncmp(info->key, "root/", 5) || !strncmp(info->key, "cwd/", 4) ||
	    strstr(info->key, "/root/") || strstr(info->key, "/cwd/"))
		pw->escaped = true;
	return pw->n > 200000 ? -1 : 0;
}

/* /proc/self as a bucket: its root, cwd, exe and fd/N links are not entered. */
static void proc_self_does_not_wander(void **state)
{
	struct jo_obj *o = open_file_store("/proc/self", true);
	struct proc_walk pw = { 0 };
	struct jo_err err;

	(void)state;
	assert_int_equal(jo_obj_list(o, "", NULL, NULL, proc_cb, &pw, &err), 0);
	assert_false(pw.escaped);
	assert_true(pw.saw_root_link);
	assert_true(pw.links >= 3);
	assert_true(pw.n < 50000);
	jo_obj_close(o);
}

/* Entries of dir whose name starts with prefix. */
static int count_named(const char *dir, const char *prefix)
{
	char cmd[600], line[64];
	FILE *fp;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -c '^%s' || true", dir, prefix);
	fp = popen(cmd, "r");
	if (fp && fgets(line, sizeof(line), fp))
		n = (int)strtol(line, NULL, 10);
	if (fp)
		pclose(fp);
	return n;
}

/*
 * A create-only put writes a free key, never replaces an existing object
 * (JO_EEXIST, bytes and inode unchanged), and does not follow or replace a
 * symlink planted at the key (to a file outside, dangling): the target stays
 * as it was and nothing is created through it. No temp file is left.
 */
static void create_only_put_never_replaces(void **state)
{
	struct fx *f = *state;
	struct jo_obj_put_opts co = { .create_only = true };
	char p[400], out[400], dangling[400], dir[400];
	struct stat st1, st2;
	struct jo_err err;

	assert_string_equal(jo_obj_create_check(f->o), "none");
	/* a free key: written */
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/0/0/1_0_5", "fresh", 5, &co, &err), 0);
	get_eq(f->o, "vol/chunks/0/0/1_0_5", 0, -1, "fresh", 5);
	assert_string_equal(jo_obj_create_check(f->o), "link");

	/* an existing object: JO_EEXIST, the same bytes and the same inode */
	snprintf(p, sizeof(p), "%s/bkt/vol/chunks/0/0/1_0_5", f->dir);
	assert_int_equal(stat(p, &st1), 0);
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/0/0/1_0_5", "FORGED", 6, &co, &err), JO_EEXIST);
	assert_non_null(strstr(err.msg, "exists"));
	assert_int_equal(stat(p, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	assert_true(file_has(p, "fresh"));
	/* an ordinary put still replaces */
	put_s(f->o, "vol/chunks/0/0/1_0_5", "again");
	assert_true(file_has(p, "again"));

	/* a symlink at the key, to a file outside: not followed, not replaced */
	snprintf(out, sizeof(out), "%s/outside.blk", f->dir);
	write_file(out, "outside");
	snprintf(p, sizeof(p), "%s/bkt/vol/chunks/0/0/2_0_5", f->dir);
	assert_int_equal(symlink(out, p), 0);
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/0/0/2_0_5", "FORGED", 6, &co, &err),
			 JO_EUNSUPPORTED);
	assert_non_null(strstr(err.msg, "symlink"));
	assert_true(is_symlink(p));
	assert_true(file_has(out, "outside"));
	/* dangling: nothing is created where it points */
	snprintf(dangling, sizeof(dangling), "%s/created-through-link", f->dir);
	snprintf(p, sizeof(p), "%s/bkt/vol/chunks/0/0/3_0_5", f->dir);
	assert_int_equal(symlink(dangling, p), 0);
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/0/0/3_0_5", "FORGED", 6, &co, &err),
			 JO_EUNSUPPORTED);
	assert_true(is_symlink(p));
	assert_int_equal(lstat(dangling, &st1), -1);

	/* a directory at the key is not an object */
	snprintf(p, sizeof(p), "%s/bkt/vol/chunks/0/0/4_0_5", f->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/0/0/4_0_5", "x", 1, &co, &err), JO_EINVAL);
	/* and a directory marker cannot be created only */
	assert_int_equal(jo_obj_put(f->o, "vol/chunks/9/", "", 0, &co, &err), JO_EINVAL);

	snprintf(dir, sizeof(dir), "%s/bkt/vol/chunks/0/0", f->dir);
	assert_int_equal(count_named(dir, ".jfs."), 0);
	assert_int_equal(jo_obj_create_probe(f->o, "vol/", &err), 0); /* nothing to ask a directory */
	assert_string_equal(jo_obj_create_check(f->o), "link");
}

/* The sharding wrapper: create-only in the key's shard, reported for the whole. */
static void create_only_put_through_shards(void **state)
{
	struct fx *f = *state;
	struct jo_obj_put_opts co = { .create_only = true };
	struct jo_obj *s = NULL;
	struct jo_err err;
	char p[400];

	s = open_sharded(f, "cs", 3);
	assert_int_equal(jo_obj_create_probe(s, "vol/", &err), 0);
	assert_string_equal(jo_obj_create_check(s), "none");
	/* a create that found its key taken was checked all the same */
	put_s(s, "taken", "plain");
	assert_int_equal(jo_obj_put(s, "taken", "two", 3, &co, &err), JO_EEXIST);
	assert_string_equal(jo_obj_create_check(s), "link");
	assert_int_equal(jo_obj_put(s, "foobar", "one", 3, &co, &err), 0);
	assert_int_equal(jo_obj_put(s, "foobar", "two", 3, &co, &err), JO_EEXIST);
	snprintf(p, sizeof(p), "%s/cs%u/foobar", f->dir, 3214735720u % 3u);
	assert_true(file_has(p, "one"));
	assert_string_equal(jo_obj_create_check(s), "link");
	jo_obj_close(s);
}

/* A test that runs between setup and teardown, like most here. */
#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_TEST(round_trip_get_range_head),
		FIXTURE_TEST(listing_is_in_byte_order),
		FIXTURE_TEST(listing_prefix_start_after_delimiter),
		FIXTURE_TEST(batch_delete_and_delete),
		FIXTURE_TEST(copy_and_multipart),
		FIXTURE_TEST(put_mode),
		FIXTURE_TEST(sharded_file_stores_merge_listings),
		FIXTURE_TEST(shard_placement_is_fnv1a_of_full_key),
		FIXTURE_TEST(symlinks_are_never_followed),
		FIXTURE_TEST(bucket_path_through_a_symlink),
		FIXTURE_TEST(missing_bucket_directory_is_an_error),
		FIXTURE_TEST(create_only_put_never_replaces),
		FIXTURE_TEST(create_only_put_through_shards),
		cmocka_unit_test(proc_self_does_not_wander),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
