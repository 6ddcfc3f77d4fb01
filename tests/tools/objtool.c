/*
 * objtool: a small driver of common/object for integration tests and the
 * object benchmark. Credentials come from the environment (OBJ_AK, OBJ_SK),
 * never from argv, so they stay out of process listings.
 *
 *   objtool STORAGE BUCKET selftest            full put/get/list/delete check
 *   objtool STORAGE BUCKET expect CODE OP [KEY]  OP = head|get|put|list|mkbucket;
 *                                              exit 0 when the error name is CODE
 *   objtool STORAGE BUCKET mkbucket
 *   objtool STORAGE BUCKET put KEY SIZE        random body of SIZE bytes
 *   objtool STORAGE BUCKET fill PREFIX N SIZE THREADS
 *   objtool STORAGE BUCKET bench-list PREFIX   prints keys and keys/s
 *   objtool STORAGE BUCKET bench-get PREFIX THREADS  GETs every key, prints MiB/s
 *   objtool STORAGE BUCKET create-only CHECK [PROBE-PREFIX]
 *                                              create-only puts of a fresh key (after
 *                                              a probe under PROBE-PREFIX if given):
 *                                              written, then JO_EEXIST with the bytes
 *                                              unchanged; exit 0 when the handle says
 *                                              it checked them by CHECK
 *
 * Environment: OBJ_AK, OBJ_SK, OBJ_RETRIES, OBJ_LIST_V1=1, OBJ_CONNS, OBJ_SHARDS
 * (BUCKET is then a pattern with %d), OBJ_NO_IFMATCH=1 (servers ignoring If-Match).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/object/object.h"

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);   \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_store(struct jo_obj **o, const char *storage, const char *bucket)
{
	struct jo_obj_opts opts = JO_OBJ_OPTS_INIT;
	struct jo_err err;
	const char *r = getenv("OBJ_RETRIES"), *c = getenv("OBJ_CONNS");

	opts.storage = storage;
	opts.bucket = bucket;
	opts.access_key = getenv("OBJ_AK");
	opts.secret_key = getenv("OBJ_SK");
	opts.list_v1 = getenv("OBJ_LIST_V1") && strcmp(getenv("OBJ_LIST_V1"), "1") == 0;
	if (r)
		opts.retries = (int)strtol(r, NULL, 10);
	if (c)
		opts.max_conns = (int)strtol(c, NULL, 10);
	if (getenv("OBJ_SHARDS"))
		opts.shards = (int)strtol(getenv("OBJ_SHARDS"), NULL, 10);
	opts.timeout_ms = 20000;
	if (jo_obj_open(o, &opts, &err) != 0) {
		fprintf(stderr, "open: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int nop_sink(const void *d, size_t n, void *p)
{
	(void)d;
	(void)n;
	(void)p;
	return 0;
}

/* ---- selftest ---- */

struct lst {
	char **keys;
	int *is_prefix;
	size_t n, cap;
};

static int lst_cb(const struct jo_obj_info *info, void *payload)
{
	struct lst *l = payload;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 64;
		l->keys = realloc(l->keys, l->cap * sizeof(*l->keys));
		l->is_prefix = realloc(l->is_prefix, l->cap * sizeof(*l->is_prefix));
	}
	l->keys[l->n] = strdup(info->key);
	l->is_prefix[l->n] = info->is_prefix;
	l->n++;
	return 0;
}

static void lst_free(struct lst *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->keys[i]);
	free(l->keys);
	free(l->is_prefix);
	memset(l, 0, sizeof(*l));
}

static void put_str(struct jo_obj *o, const char *key, const char *body)
{
	struct jo_err err;
	int rc = jo_obj_put(o, key, body, strlen(body), NULL, &err);

	CHECK(rc == 0, "put '%s': %s", key, err.msg);
}

static void get_check(struct jo_obj *o, const char *key, uint64_t off, int64_t len,
		      const char *want)
{
	struct jo_err err;
	uint8_t *buf = NULL;
	size_t n = 0;
	int rc = jo_obj_get_buf(o, key, off, len, 1 << 20, &buf, &n, &err);

	CHECK(rc == 0, "get '%s' %llu+%lld: %s", key, (unsigned long long)off, (long long)len,
	      err.msg);
	if (rc == 0)
		CHECK(n == strlen(want) && memcmp(buf, want, n) == 0,
		      "get '%s' %llu+%lld: got %zu bytes '%.*s', want '%s'", key,
		      (unsigned long long)off, (long long)len, n, (int)n, (char *)buf, want);
	free(buf);
}

static int selftest(struct jo_obj *o)
{
	struct jo_err err;
	struct jo_obj_info info;
	struct lst l = { 0 };
	char key1000[1001];
	const char *awkward[] = {
		"t/sp ace", "t/plus+sign", "t/pct%41", "t/q?mark", "t/uni-\xc3\xa9\xe2\x82\xac",
		"t/amp&eq=", "t/semi;colon", "t/tilde~x", "t/star*", NULL,
	};
	int rc;

	rc = jo_obj_create_bucket(o, &err);
	CHECK(rc == 0, "create bucket: %s", err.msg);
	rc = jo_obj_create_bucket(o, &err);
	CHECK(rc == 0, "create existing bucket: %s", err.msg);

	/* put / get / range / head */
	put_str(o, "t/hello", "hello, world");
	get_check(o, "t/hello", 0, -1, "hello, world");
	get_check(o, "t/hello", 7, 5, "world");
	get_check(o, "t/hello", 7, -1, "world");
	get_check(o, "t/hello", 10, 100, "ld");
	get_check(o, "t/hello", 50, 10, "");
	rc = jo_obj_head(o, "t/hello", &info, &err);
	CHECK(rc == 0 && info.size == 12, "head: rc %d size %llu: %s", rc,
	      (unsigned long long)info.size, err.msg);
	CHECK(strcmp(info.etag, "e4d7f1b4ed2e42d15898f4b27b019da4") == 0, "etag '%s'", info.etag);
	CHECK(info.mtime > 1600000000, "mtime %lld", (long long)info.mtime);
	rc = jo_obj_head(o, "t/missing", &info, &err);
	CHECK(rc == JO_ENOTFOUND, "head missing: %d %s", rc, err.msg);
	{
		uint8_t *b = NULL;
		size_t n;

		rc = jo_obj_get_buf(o, "t/missing", 0, -1, 100, &b, &n, &err);
		CHECK(rc == JO_ENOTFOUND, "get missing: %d %s", rc, err.msg);
		CHECK(strstr(err.msg, "NoSuchKey") && strstr(err.msg, "t/missing"),
		      "error message lacks code or key: %s", err.msg);
	}
	/* if-match (rclone serve s3 ignores If-Match: OBJ_NO_IFMATCH=1) */
	if (!getenv("OBJ_NO_IFMATCH")) {
		struct jo_obj_get_opts go = { .offset = 0, .length = -1, .if_match = "0000" };
		rc = jo_obj_get(o, "t/hello", &go, nop_sink, NULL, &err);
		CHECK(rc == JO_ECONFLICT, "if-match mismatch: %d %s", rc, err.msg);
	}

	/* awkward keys round trip and list back */
	for (int i = 0; awkward[i]; i++) {
		put_str(o, awkward[i], awkward[i]);
		get_check(o, awkward[i], 0, -1, awkward[i]);
	}
	/* A 1000-byte key in 100-byte segments (file-backed servers cap a name at 255). */
	memset(key1000, 'k', 1000);
	memcpy(key1000, "t/long/", 7);
	for (int i = 107; i < 1000; i += 100)
		key1000[i] = '/';
	key1000[1000] = '\0';
	put_str(o, key1000, "long");
	get_check(o, key1000, 0, -1, "long");
	rc = jo_obj_list(o, "t/", NULL, NULL, lst_cb, &l, &err);
	CHECK(rc == 0, "list t/: %s", err.msg);
	CHECK(l.n == 11, "list t/: %zu keys, want 11", l.n); /* hello, 9 awkward, long */
	for (int i = 0; awkward[i]; i++) {
		bool found = false;

		for (size_t j = 0; j < l.n; j++)
			found = found || strcmp(l.keys[j], awkward[i]) == 0;
		CHECK(found, "key '%s' not listed back", awkward[i]);
	}
	lst_free(&l);

	/*
	 * pagination: 2500 keys in 3 pages, start-after, delimiter. The keys
	 * end in "%+ x" so a page ends on a key that needs URL-encoding
	 * (SeaweedFS's V1 NextMarker comes raw: "%+ " does not decode).
	 */
	{
		char k[64];
		const char *bkeys[2500];
		int results[2500];
		char *store = malloc(2500 * 32);

		for (int i = 0; i < 2500; i++) {
			snprintf(store + i * 32, 32, "p/%d/k%05d%%+ x", i % 3, i);
			bkeys[i] = store + i * 32;
		}
		for (int i = 0; i < 2500; i++)
			put_str(o, bkeys[i], "x");
		rc = jo_obj_list(o, "p/", NULL, NULL, lst_cb, &l, &err);
		CHECK(rc == 0 && l.n == 2500, "paginated list: rc %d n %zu: %s", rc, l.n, err.msg);
		for (size_t i = 1; i < l.n; i++)
			CHECK(strcmp(l.keys[i - 1], l.keys[i]) < 0, "order: %s >= %s", l.keys[i - 1],
			      l.keys[i]);
		lst_free(&l);
		rc = jo_obj_list(o, "p/1/", "p/1/k01000%+ x", NULL, lst_cb, &l, &err);
		CHECK(rc == 0, "start-after: %s", err.msg);
		{
			size_t want = 0;

			for (int i = 0; i < 2500; i++)
				if (i % 3 == 1 && i > 1000)
					want++;
			CHECK(l.n == want, "start-after: %zu keys, want %zu", l.n, want);
			CHECK(l.n && strcmp(l.keys[0], "p/1/k01003%+ x") == 0, "start-after first: %s",
			      l.n ? l.keys[0] : "");
		}
		lst_free(&l);
		rc = jo_obj_list(o, "p/", NULL, "/", lst_cb, &l, &err);
		CHECK(rc == 0 && l.n == 3, "delimiter: rc %d n %zu", rc, l.n);
		CHECK(l.n == 3 && strcmp(l.keys[0], "p/0/") == 0 && l.is_prefix[0] &&
			      strcmp(l.keys[2], "p/2/") == 0,
		      "delimiter prefixes wrong");
		lst_free(&l);

		/* batch delete, with a missing key among them */
		snprintf(k, sizeof(k), "p/none");
		bkeys[5] = k;
		rc = jo_obj_delete_batch(o, bkeys, 2500, results, &err);
		CHECK(rc == 0, "batch delete: %s", err.msg);
		for (int i = 0; i < 2500; i++)
			CHECK(results[i] == 0, "batch delete result[%d] = %d", i, results[i]);
		rc = jo_obj_list(o, "p/", NULL, NULL, lst_cb, &l, &err);
		CHECK(rc == 0 && l.n == 1, "after batch delete: %zu keys left (want 1)", l.n);
		lst_free(&l);
		free(store);
	}

	/* delete one, twice */
	rc = jo_obj_delete(o, "t/hello", &err);
	CHECK(rc == 0, "delete: %s", err.msg);
	rc = jo_obj_delete(o, "t/hello", &err);
	CHECK(rc == 0, "delete missing: %s", err.msg);
	rc = jo_obj_head(o, "t/hello", &info, &err);
	CHECK(rc == JO_ENOTFOUND, "deleted key still there");

	/* metadata, copy, multipart */
	{
		const char *meta[] = { "crc32c", "12345", "mtime", "1700000000", NULL };
		struct jo_obj_put_opts po = { .content_type = "text/plain", .meta = meta,
					      .content_md5 = true };
		char **m = NULL;

		rc = jo_obj_put(o, "m/obj", "metadata body", 13, &po, &err);
		CHECK(rc == 0, "put with meta: %s", err.msg);
		rc = jo_obj_head_meta(o, "m/obj", &info, &m, &err);
		CHECK(rc == 0, "head meta: %s", err.msg);
		if (rc == 0) {
			const char *v = jo_obj_meta_get(m, "crc32c");

			CHECK(v && strcmp(v, "12345") == 0, "meta crc32c = %s", v ? v : "(none)");
			CHECK(info.content_type && strcmp(info.content_type, "text/plain") == 0,
			      "content type %s", info.content_type ? info.content_type : "(none)");
		}
		jo_obj_meta_free(m);
		get_check(o, "m/obj", 0, -1, "metadata body");
		if (!getenv("OBJ_SHARDS")) { /* server-side copy stays inside one bucket */
			rc = jo_obj_copy(o, "m/obj", "m/copy", NULL, &err);
			CHECK(rc == 0, "copy: %s", err.msg);
			get_check(o, "m/copy", 0, -1, "metadata body");
			rc = jo_obj_copy(o, "m/none", "m/copy2", NULL, &err);
			CHECK(rc == JO_ENOTFOUND, "copy missing: %d %s", rc, err.msg);
		}
	}
	{
		size_t psz = 5 << 20;
		char *p1 = malloc(psz);
		struct jo_obj_part parts[2];
		char *id = NULL;
		memset(p1, 'a', psz);
		rc = jo_obj_mpu_create(o, "mp/obj", NULL, &id, &err);
		CHECK(rc == 0, "mpu create: %s", err.msg);
		if (rc == 0) {
			parts[0].number = 1;
			rc = jo_obj_mpu_put_part(o, "mp/obj", id, 1, p1, psz, parts[0].etag, &err);
			CHECK(rc == 0, "part 1: %s", err.msg);
			parts[1].number = 2;
			rc = jo_obj_mpu_put_part(o, "mp/obj", id, 2, "tail", 4, parts[1].etag, &err);
			CHECK(rc == 0, "part 2: %s", err.msg);
			rc = jo_obj_mpu_complete(o, "mp/obj", id, parts, 2, &err);
			CHECK(rc == 0, "complete: %s", err.msg);
			rc = jo_obj_head(o, "mp/obj", &info, &err);
			CHECK(rc == 0 && info.size == psz + 4, "mpu size %llu",
			      (unsigned long long)info.size);
			get_check(o, "mp/obj", psz - 2, 6, "aatail");
		}
		free(id);
		free(p1);
	}
	{
		struct jo_obj_stats st;

		jo_obj_get_stats(o, &st);
		CHECK(st.requests > 2500, "stats requests %llu", (unsigned long long)st.requests);
		printf("requests %llu retries %llu errors %llu in %llu out %llu\n",
		       (unsigned long long)st.requests, (unsigned long long)st.retries,
		       (unsigned long long)st.errors, (unsigned long long)st.bytes_in,
		       (unsigned long long)st.bytes_out);
	}
	return failures ? 1 : 0;
}

/* ---- expect ---- */

static int nop_list(const struct jo_obj_info *i, void *p)
{
	(void)i;
	(void)p;
	return 0;
}

static int expect(struct jo_obj *o, const char *code, const char *op, const char *key)
{
	struct jo_err err;
	struct jo_obj_info info;
	int rc;

	jo_err_clear(&err);
	if (strcmp(op, "head") == 0)
		rc = jo_obj_head(o, key, &info, &err);
	else if (strcmp(op, "get") == 0)
		rc = jo_obj_get(o, key, NULL, nop_sink, NULL, &err);
	else if (strcmp(op, "put") == 0)
		rc = jo_obj_put(o, key, "x", 1, NULL, &err);
	else if (strcmp(op, "list") == 0)
		rc = jo_obj_list(o, "", NULL, NULL, nop_list, NULL, &err);
	else if (strcmp(op, "mkbucket") == 0)
		rc = jo_obj_create_bucket(o, &err);
	else
		return 2;
	printf("%s -> %s: %s\n", op, jo_err_name(rc), err.msg);
	if (getenv("OBJ_SK") && *getenv("OBJ_SK") && strstr(err.msg, getenv("OBJ_SK"))) {
		fprintf(stderr, "FAIL: secret in error message\n");
		return 1;
	}
	return strcmp(jo_err_name(rc), code) == 0 ? 0 : 1;
}

/* ---- create-only ---- */

static int create_only(struct jo_obj *o, const char *want, const char *probe)
{
	struct jo_obj_put_opts co = { .create_only = true };
	struct jo_err err;
	char key[128];
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc, bad = 0;

	if (probe && jo_obj_create_probe(o, probe, &err) != 0) {
		fprintf(stderr, "create-only: probe: %s\n", err.msg);
		return 1;
	}
	snprintf(key, sizeof(key), "%sco-%ld-%ld", probe ? probe : "", (long)time(NULL),
		 (long)(now_s() * 1e6) % 1000000);
	rc = jo_obj_put(o, key, "one", 3, &co, &err);
	printf("create '%s' -> %s %s\n", key, jo_err_name(rc), err.msg);
	bad |= rc != 0;
	rc = jo_obj_put(o, key, "two", 3, &co, &err);
	printf("create again -> %s %s\n", jo_err_name(rc), err.msg);
	bad |= rc != JO_EEXIST;
	rc = jo_obj_get_buf(o, key, 0, -1, 100, &buf, &len, &err);
	bad |= rc != 0 || len != 3 || memcmp(buf, "one", 3) != 0;
	printf("bytes now: '%.*s'; checked by %s\n", (int)len, buf ? (char *)buf : "",
	       jo_obj_create_check(o));
	free(buf);
	bad |= strcmp(jo_obj_create_check(o), want) != 0;
	(void)jo_obj_delete(o, key, &err); /* a leftover is harmless: a bucket of the test */
	return bad ? 1 : 0;
}

/* ---- bench ---- */

struct keyset {
	char **keys;
	size_t n, cap;
	atomic_size_t next;
	atomic_uint_fast64_t bytes;
	struct jo_obj *o;
	atomic_int errors;
};

static int ks_cb(const struct jo_obj_info *info, void *payload)
{
	struct keyset *k = payload;

	if (info->is_prefix)
		return 0;
	if (k->n == k->cap) {
		k->cap = k->cap ? k->cap * 2 : 1024;
		k->keys = realloc(k->keys, k->cap * sizeof(*k->keys));
	}
	k->keys[k->n++] = strdup(info->key);
	return 0;
}

static int count_sink(const void *d, size_t n, void *p)
{
	struct keyset *k = p;

	(void)d;
	atomic_fetch_add(&k->bytes, n);
	return 0;
}

/* Gets, or puts body under, the keys it takes from k until none is left; counts the failures. */
static void take_keys(struct keyset *k, bool put, const char *body, size_t size)
{
	struct jo_err err;

	for (;;) {
		size_t i = atomic_fetch_add(&k->next, 1);
		int rc;

		if (i >= k->n)
			break;
		rc = put ? jo_obj_put(k->o, k->keys[i], body, size, NULL, &err)
			 : jo_obj_get(k->o, k->keys[i], NULL, count_sink, k, &err);
		if (rc != 0) {
			fprintf(stderr, "%s %s: %s\n", put ? "put" : "get", k->keys[i], err.msg);
			atomic_fetch_add(&k->errors, 1);
		}
	}
}

static void *get_worker(void *arg)
{
	take_keys(arg, false, NULL, 0);
	return NULL;
}

static void *put_worker(void *arg)
{
	struct keyset *k = arg;
	size_t size = (size_t)atomic_load(&k->bytes);
	char *body = malloc(size ? size : 1);

	for (size_t j = 0; j < size; j++)
		body[j] = (char)(j * 31 + 7);
	take_keys(k, true, body, size);
	free(body);
	return NULL;
}

static int run_threads(struct keyset *k, int threads, void *(*fn)(void *))
{
	pthread_t th[256];

	if (threads < 1)
		threads = 1;
	if (threads > 256)
		threads = 256;
	for (int i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, fn, k);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	return atomic_load(&k->errors) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct jo_obj *o = NULL;
	const char *cmd;
	int rc = 2;

	if (argc < 4) {
		fprintf(stderr, "usage: objtool STORAGE BUCKET CMD ...\n");
		return 2;
	}
	if (open_store(&o, argv[1], argv[2]) < 0)
		return 3;
	cmd = argv[3];
	if (strcmp(cmd, "selftest") == 0) {
		rc = selftest(o);
		printf("%s\n", rc ? "SELFTEST FAILED" : "SELFTEST OK");
	} else if (strcmp(cmd, "expect") == 0 && argc >= 6) {
		rc = expect(o, argv[4], argv[5], argc > 6 ? argv[6] : "probe");
	} else if (strcmp(cmd, "create-only") == 0 && argc >= 5) {
		rc = create_only(o, argv[4], argc > 5 ? argv[5] : NULL);
	} else if (strcmp(cmd, "mkbucket") == 0) {
		struct jo_err err;

		rc = jo_obj_create_bucket(o, &err) ? 1 : 0;
		if (rc)
			fprintf(stderr, "mkbucket: %s\n", err.msg);
	} else if (strcmp(cmd, "fill") == 0 && argc >= 8) {
		struct keyset k = { .o = o };
		size_t n = strtoul(argv[5], NULL, 10);
		char key[512];

		for (size_t i = 0; i < n; i++) {
			struct jo_obj_info fake = { .key = key };

			snprintf(key, sizeof(key), "%s%06zu", argv[4], i);
			ks_cb(&fake, &k);
		}
		atomic_store(&k.bytes, strtoull(argv[6], NULL, 10));
		rc = run_threads(&k, (int)strtol(argv[7], NULL, 10), put_worker);
	} else if (strcmp(cmd, "bench-list") == 0 && argc >= 5) {
		struct keyset k = { .o = o };
		struct jo_err err;
		double t0 = now_s(), dt;

		rc = jo_obj_list(o, argv[4], NULL, NULL, ks_cb, &k, &err) ? 1 : 0;
		dt = now_s() - t0;
		if (rc)
			fprintf(stderr, "list: %s\n", err.msg);
		printf("keys %zu seconds %.3f keys_per_s %.0f\n", k.n, dt, (double)k.n / dt);
	} else if (strcmp(cmd, "bench-get") == 0 && argc >= 6) {
		struct keyset k = { .o = o };
		struct jo_err err;
		double t0, dt;

		rc = jo_obj_list(o, argv[4], NULL, NULL, ks_cb, &k, &err) ? 1 : 0;
		t0 = now_s();
		if (rc == 0)
			rc = run_threads(&k, (int)strtol(argv[5], NULL, 10), get_worker);
		dt = now_s() - t0;
		printf("objects %zu bytes %llu seconds %.3f MiB_per_s %.2f\n", k.n,
		       (unsigned long long)atomic_load(&k.bytes), dt,
		       (double)atomic_load(&k.bytes) / 1048576.0 / dt);
	} else {
		fprintf(stderr, "objtool: unknown command or missing arguments\n");
	}
	jo_obj_close(o);
	return rc;
}
