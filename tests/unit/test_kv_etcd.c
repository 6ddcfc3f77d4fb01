/*
 * test_kv_etcd: the pure parts of the etcd transport (tkv/etcd_internal.h):
 * base64, the TLS query, Range/Txn bodies and replies, error classes, and a
 * transaction's buffers (read-your-writes, compares, the commit Txn and
 * etcd's limits). No server: tests/integration/kv_etcd.sh drives a real one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/err.h"
#include "common/meta/tkv/etcd_internal.h"

#define B(s) ((const uint8_t *)(s)), (sizeof(s) - 1)  /* bytes */
#define J(s) (s), (sizeof(s) - 1)                      /* a reply body */

static const struct jo_etcd_limits etcd_limits = {
	.max_compares = JO_ETCD_MAX_TXN_OPS,
	.max_ops = JO_ETCD_MAX_TXN_OPS,
	.max_bytes = JO_ETCD_MAX_REQUEST_BYTES,
};

static char *b64(const char *s, size_t n)
{
	char *out = NULL;

	assert_int_equal(jo_etcd_b64_encode((const uint8_t *)s, n, &out), 0);
	return out;
}

/* obj[name] as a string, or fail */
static const char *str(const json_t *o, const char *name)
{
	const json_t *v = json_object_get(o, name);

	if (!json_is_string(v))
		fail_msg("no string \"%s\"", name);
	return json_string_value(v);
}

/* base64 of a string, compared with obj[name] */
static void assert_b64(const json_t *o, const char *name, const char *raw, size_t n)
{
	char *want = b64(raw, n);

	assert_string_equal(str(o, name), want);
	free(want);
}

static json_t *parse(const char *body)
{
	json_error_t je;
	json_t *o = json_loads(body, 0, &je);

	if (!o)
		fail_msg("not JSON (%s): %s", je.text, body);
	return o;
}

/* ---------------------------------------------------------------- base64 */

static void b64_round_trips_binary_and_rejects_junk(void **state)
{
	static const char *const bad[] = { "A", "AB", "ABC", "AB=C", "A===", "AB\nC", " ABC",
					   "AB+-", "ABC=D===", "====", "AB==CD==" };
	uint8_t bin[256], *out;
	size_t n;
	char *s;

	(void)state;
	for (int i = 0; i < 256; i++)
		bin[i] = (uint8_t)i;
	for (size_t len = 0; len <= 7; len++) {
		assert_int_equal(jo_etcd_b64_encode(bin + 250 - len, len, &s), 0);
		assert_int_equal(strlen(s), (len + 2) / 3 * 4);
		assert_int_equal(jo_etcd_b64_decode(s, strlen(s), &out, &n), 0);
		assert_non_null(out);
		assert_int_equal(n, len);
		assert_memory_equal(out, bin + 250 - len, len);
		free(out);
		free(s);
	}
	assert_int_equal(jo_etcd_b64_encode(bin, 256, &s), 0);
	assert_int_equal(jo_etcd_b64_decode(s, strlen(s), &out, &n), 0);
	assert_int_equal(n, 256);
	assert_memory_equal(out, bin, 256);
	free(out);
	free(s);

	s = b64("/vol1\xfd", 6);
	assert_string_equal(s, "L3ZvbDH9"); /* what etcdctl -w json shows for that prefix */
	free(s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (jo_etcd_b64_decode(bad[i], strlen(bad[i]), &out, &n) != JO_EPROTO)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_null(out);
	}
}

/* ---------------------------------------------------------------- TLS query */

static void tls_query_reads_juicefs_keys_percent_decoded(void **state)
{
	struct jo_etcd_tls t;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_etcd_tls_parse(&t, "", &err), 0);
	assert_false(jo_etcd_tls_on(&t));
	assert_false(t.insecure);
	jo_etcd_tls_release(&t);

	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=%2Fetc%2Fca%20dir%2Fca.pem&cert=/c+d.pem"
					   "&key=/k.pem&server-name=etcd.example&other=1"
					   "&cacert=/second.pem", &err), 0);
	assert_string_equal(t.cacert, "/etc/ca dir/ca.pem"); /* the first wins */
	assert_string_equal(t.cert, "/c d.pem");               /* '+' is a space, as Go reads it */
	assert_string_equal(t.key, "/k.pem");
	assert_string_equal(t.server_name, "etcd.example");
	assert_false(t.insecure);
	assert_true(jo_etcd_tls_on(&t));
	jo_etcd_tls_release(&t);

	/* any one of the four turns https on; insecure-skip-verify alone does not */
	assert_int_equal(jo_etcd_tls_parse(&t, "server-name=x", &err), 0);
	assert_true(jo_etcd_tls_on(&t));
	jo_etcd_tls_release(&t);
	assert_int_equal(jo_etcd_tls_parse(&t, "insecure-skip-verify=1", &err), 0);
	assert_false(jo_etcd_tls_on(&t));
	assert_true(t.insecure);
	jo_etcd_tls_release(&t);
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=/a&insecure-skip-verify=true", &err), 0);
	assert_true(t.insecure);
	jo_etcd_tls_release(&t);
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=/a&insecure-skip-verify=false", &err), 0);
	assert_false(t.insecure);
	jo_etcd_tls_release(&t);
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=/a&insecure-skip-verify=", &err), 0);
	assert_false(t.insecure);
	jo_etcd_tls_release(&t);
	/* %00 would cut the file name short */
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=/a%00b", &err), JO_EINVAL);
	jo_etcd_tls_release(&t);
	/* an empty value is no value */
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=&&key", &err), 0);
	assert_false(jo_etcd_tls_on(&t));
	jo_etcd_tls_release(&t);

	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=%2", &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "percent"));
	assert_int_equal(jo_etcd_tls_parse(&t, "cacert=%zz", &err), JO_EINVAL);
	assert_null(t.cacert);
}

/* ---------------------------------------------------------------- bodies */

static void range_body_is_linearizable_with_strings_for_int64(void **state)
{
	char *body;
	json_t *o;

	(void)state;
	assert_int_equal(jo_etcd_range_body(B("/t\xfd" "A"), B("/t\xfd" "B"), 1024, 123456789012LL,
					    true, &body), 0);
	o = parse(body);
	assert_b64(o, "key", "/t\xfd" "A", 4);
	assert_b64(o, "range_end", "/t\xfd" "B", 4);
	assert_string_equal(str(o, "limit"), "1024");
	assert_string_equal(str(o, "revision"), "123456789012");
	assert_true(json_is_true(json_object_get(o, "keys_only")));
	/* never a serializable (possibly stale) read, never max_mod_revision */
	assert_null(json_object_get(o, "serializable"));
	assert_null(json_object_get(o, "max_mod_revision"));
	json_decref(o);
	free(body);

	/* no limit, the newest revision, values; empty start and end are "\0" */
	assert_int_equal(jo_etcd_range_body(NULL, 0, NULL, 0, 0, 0, false, &body), 0);
	o = parse(body);
	assert_string_equal(str(o, "key"), "AA==");
	assert_string_equal(str(o, "range_end"), "AA==");
	assert_int_equal(json_object_size(o), 2);
	json_decref(o);
	free(body);

	assert_int_equal(jo_etcd_key_body(B("k\0x"), &body), 0);
	o = parse(body);
	assert_b64(o, "key", "k\0x", 3);
	assert_int_equal(json_object_size(o), 1); /* no range_end: one key */
	json_decref(o);
	free(body);
}

/* ---------------------------------------------------------------- replies */

static void range_reply_parses_kvs_more_and_omitted_defaults(void **state)
{
	static const char reply[] =
		"{\"header\":{\"cluster_id\":\"1\",\"revision\":\"42\",\"raft_term\":\"2\"},"
		"\"kvs\":[{\"key\":\"L3b9YQ==\",\"create_revision\":\"5\",\"mod_revision\":\"41\","
		"\"version\":\"3\",\"value\":\"AAEC\"},"
		"{\"key\":\"L3b9Yg==\",\"create_revision\":\"6\",\"mod_revision\":7}],"
		"\"more\":true,\"count\":\"10\"}";
	struct jo_etcd_page pg;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_etcd_parse_range(reply, strlen(reply), &pg, &err), 0);
	assert_int_equal(pg.revision, 42);
	assert_true(pg.more);
	assert_int_equal(pg.n, 2);
	assert_int_equal(pg.kvs[0].klen, 4);
	assert_memory_equal(pg.kvs[0].key, "/v\xfd" "a", 4);
	assert_int_equal(pg.kvs[0].vlen, 3);
	assert_memory_equal(pg.kvs[0].val, "\0\1\2", 3);
	assert_int_equal(pg.kvs[0].mod_rev, 41);
	/* no "value": an empty value (or keys only); a number is a number too */
	assert_memory_equal(pg.kvs[1].key, "/v\xfd" "b", 4);
	assert_int_equal(pg.kvs[1].vlen, 0);
	assert_int_equal(pg.kvs[1].mod_rev, 7);
	jo_etcd_page_release(&pg);

	/* an empty range has no kvs, no more, no count */
	assert_int_equal(jo_etcd_parse_range(J("{\"header\":{\"revision\":\"9\"}}"), &pg, &err), 0);
	assert_int_equal(pg.n, 0);
	assert_false(pg.more);
	assert_int_equal(pg.revision, 9);
	jo_etcd_page_release(&pg);
}

static void range_reply_rejects_malformed_data(void **state)
{
	static const char *const bad[] = {
		"",
		"{\"header\":{\"revision\":\"1\"}",                      /* cut */
		"[1]",
		"{\"kvs\":[]}",                                          /* no header */
		"{\"header\":{\"revision\":\"x1\"}}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":{}}",
		"{\"header\":{\"revision\":\"1\"},\"more\":\"yes\"}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"value\":\"AA==\",\"mod_revision\":\"1\"}]}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"!!!!\",\"mod_revision\":\"1\"}]}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"YQ==\",\"value\":\"Y\","
		"\"mod_revision\":\"1\"}]}",
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"YQ==\"}]}", /* no mod_revision */
		"{\"header\":{\"revision\":\"1\"},\"kvs\":[{\"key\":\"\",\"mod_revision\":\"1\"}]}",
	};
	struct jo_etcd_page pg;
	struct jo_err err = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = jo_etcd_parse_range(bad[i], strlen(bad[i]), &pg, &err);

		if (rc != JO_EPROTO)
			fail_msg("reply %zu (%s): got %s", i, bad[i], jo_err_name(rc));
		assert_int_equal(pg.n, 0);
		assert_null(pg.kvs);
		assert_true(strlen(err.msg) > 0);
		jo_etcd_page_release(&pg);
	}
}

static void txn_token_status_and_error_replies(void **state)
{
	struct jo_err err = { 0 };
	bool ok = true;
	char *s, msg[128];
	int code;

	(void)state;
	assert_int_equal(jo_etcd_parse_txn(J("{\"header\":{\"revision\":\"5\"},\"succeeded\":true,"
					     "\"responses\":[{\"response_put\":{}}]}"), &ok, &err), 0);
	assert_true(ok);
	/* a failed Txn: "succeeded" is omitted */
	assert_int_equal(jo_etcd_parse_txn(J("{\"header\":{\"revision\":\"5\"}}"), &ok, &err), 0);
	assert_false(ok);
	assert_int_equal(jo_etcd_parse_txn(J("{\"header\":{\"revision\":\"5\"},\"succeeded\":\"t\"}"),
					   &ok, &err), JO_EPROTO);
	assert_int_equal(jo_etcd_parse_txn(J("{\"succeeded\":true}"), &ok, &err), JO_EPROTO);
	assert_int_equal(jo_etcd_parse_txn(J("<html>"), &ok, &err), JO_EPROTO);

	assert_int_equal(jo_etcd_parse_token(J("{\"header\":{},\"token\":\"abc.12\"}"), &s, &err), 0);
	assert_string_equal(s, "abc.12");
	free(s);
	assert_int_equal(jo_etcd_parse_token(J("{\"header\":{}}"), &s, &err), JO_EPROTO);
	assert_int_equal(jo_etcd_parse_status(J("{\"version\":\"3.4.23\",\"dbSize\":\"20480\"}"), &s,
					      &err), 0);
	assert_string_equal(s, "3.4.23");
	free(s);

	assert_int_equal(jo_etcd_parse_error(J("{\"error\":\"etcdserver: mvcc: required revision "
					       "has been compacted\",\"message\":\"etcdserver: mvcc: "
					       "required revision has been compacted\",\"code\":11}"),
					     &code, msg, sizeof(msg)), 0);
	assert_int_equal(code, 11);
	assert_string_equal(msg, "etcdserver: mvcc: required revision has been compacted");
	assert_int_equal(jo_etcd_error_class(code, msg), JO_EIO);
	assert_false(jo_etcd_error_reauth(code, msg));
	assert_int_equal(jo_etcd_parse_error(J("Not Found\n"), &code, msg, sizeof(msg)), -1);
	assert_string_equal(msg, "");
	assert_int_equal(jo_etcd_parse_error(J("{\"foo\":1}"), &code, msg, sizeof(msg)), -1);

	/* the classes of what etcd 3.4 answers */
	assert_int_equal(jo_etcd_error_class(3, "etcdserver: authentication failed, invalid user ID "
					     "or password"), JO_EAUTH);
	assert_int_equal(jo_etcd_error_class(3, "etcdserver: user name is empty"), JO_EAUTH);
	assert_int_equal(jo_etcd_error_class(7, "etcdserver: permission denied"), JO_EAUTH);
	assert_int_equal(jo_etcd_error_class(16, "etcdserver: invalid auth token"), JO_EAUTH);
	assert_int_equal(jo_etcd_error_class(14, "etcdserver: request timed out"), JO_ETIMEOUT);
	assert_int_equal(jo_etcd_error_class(4, "context deadline exceeded"), JO_ETIMEOUT);
	assert_int_equal(jo_etcd_error_class(3, "etcdserver: too many operations in txn request"),
			 JO_EIO);
	assert_int_equal(jo_etcd_error_class(14, "etcdserver: no leader"), JO_EIO);
	assert_true(jo_etcd_error_reauth(16, "etcdserver: invalid auth token"));
	assert_true(jo_etcd_error_reauth(3, "etcdserver: revision of auth store is old"));
	assert_false(jo_etcd_error_reauth(3, "etcdserver: authentication failed, invalid user ID or "
					  "password"));
	assert_false(jo_etcd_error_reauth(7, "etcdserver: permission denied"));
}

/* ---------------------------------------------------------------- transaction buffers */

static void expect_buffered(const struct jo_etcd_tx *t, const char *k, enum jo_etcd_buffered want,
			    const char *val)
{
	const uint8_t *v;
	size_t vl;
	enum jo_etcd_buffered got = jo_etcd_tx_lookup(t, (const uint8_t *)k, strlen(k), &v, &vl);

	if (got != want)
		fail_msg("%s: buffered state %d, want %d", k, got, want);
	if (val) {
		assert_int_equal(vl, strlen(val));
		assert_memory_equal(v, val, vl);
	}
}

static void tx_reads_its_own_writes(void **state)
{
	struct jo_etcd_tx *t;
	struct jo_err err = { 0 };
	const uint8_t *k, *v;
	size_t kl, vl;

	(void)state;
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	assert_false(jo_etcd_tx_has_writes(t));
	expect_buffered(t, "a", JO_ETCD_NOT_BUFFERED, NULL);
	assert_int_equal(jo_etcd_tx_put(t, B("a"), B("1"), &err), 0);
	assert_int_equal(jo_etcd_tx_put(t, B("a"), B("2"), &err), 0);
	expect_buffered(t, "a", JO_ETCD_BUF_VALUE, "2");
	assert_int_equal(jo_etcd_tx_put(t, B("e"), B(""), &err), 0);
	expect_buffered(t, "e", JO_ETCD_BUF_VALUE, ""); /* an empty value is a value */
	assert_int_equal(jo_etcd_tx_del(t, B("a"), &err), 0);
	expect_buffered(t, "a", JO_ETCD_BUF_DELETED, NULL);
	assert_true(jo_etcd_tx_has_writes(t));

	/* a range deletes what was put before it, not what is put after it */
	assert_int_equal(jo_etcd_tx_put(t, B("r1"), B("x"), &err), 0);
	assert_int_equal(jo_etcd_tx_del_range(t, B("r"), B("s"), &err), 0);
	expect_buffered(t, "r1", JO_ETCD_BUF_DELETED, NULL);
	expect_buffered(t, "r9", JO_ETCD_BUF_DELETED, NULL);
	expect_buffered(t, "s", JO_ETCD_NOT_BUFFERED, NULL);
	expect_buffered(t, "q", JO_ETCD_NOT_BUFFERED, NULL);
	assert_int_equal(jo_etcd_tx_put(t, B("r5"), B("y"), &err), 0);
	expect_buffered(t, "r5", JO_ETCD_BUF_VALUE, "y");
	/* an unbounded range */
	assert_int_equal(jo_etcd_tx_del_range(t, B("z"), NULL, 0, &err), 0);
	expect_buffered(t, "zzzz\xff", JO_ETCD_BUF_DELETED, NULL);
	/* empty ranges delete nothing */
	assert_int_equal(jo_etcd_tx_del_range(t, B("m"), B("m"), &err), 0);
	assert_int_equal(jo_etcd_tx_del_range(t, B("n"), B("m"), &err), 0);
	expect_buffered(t, "m", JO_ETCD_NOT_BUFFERED, NULL);

	/* scans merge the puts in key order, skipping deleted keys */
	assert_true(jo_etcd_tx_next_put(t, NULL, 0, false, NULL, 0, &k, &kl, &v, &vl));
	assert_memory_equal(k, "e", kl);
	assert_true(jo_etcd_tx_next_put(t, B("e"), true, NULL, 0, &k, &kl, &v, &vl));
	assert_memory_equal(k, "r5", kl);
	assert_memory_equal(v, "y", vl);
	assert_true(jo_etcd_tx_next_put(t, B("r5"), false, B("s"), &k, &kl, &v, &vl));
	assert_false(jo_etcd_tx_next_put(t, B("r5"), true, NULL, 0, &k, &kl, &v, &vl));
	assert_false(jo_etcd_tx_next_put(t, B("b"), false, B("e"), &k, &kl, &v, &vl));

	assert_int_equal(jo_etcd_tx_put(t, NULL, 0, B("v"), &err), JO_EINVAL);
	assert_int_equal(jo_etcd_tx_del(t, NULL, 0, &err), JO_EINVAL);
	jo_etcd_tx_free(t);
	jo_etcd_tx_free(NULL);
}

static void tx_notes_first_revision_and_counts_compares(void **state)
{
	struct jo_etcd_tx *t;
	struct jo_err err = { 0 };
	char *body;
	size_t nc, no;
	json_t *o, *cmp;

	(void)state;
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	assert_int_equal(jo_etcd_tx_note_key(t, B("k"), 17, 3, &err), 0);
	assert_int_equal(jo_etcd_tx_note_key(t, B("k"), 99, 3, &err), 0); /* keeps 17 */
	assert_int_equal(jo_etcd_tx_note_key(t, B("absent"), 0, 3, &err), 0);
	assert_true(jo_etcd_tx_noted(t, B("k")));
	assert_false(jo_etcd_tx_noted(t, B("j")));
	assert_int_equal(jo_etcd_tx_note_range(t, B("p/"), B("p0"), 40, 3, &err), 0);
	assert_int_equal(jo_etcd_tx_note_range(t, B("p/"), B("p0"), 38, 3, &err), 0); /* lowest */
	assert_int_equal(jo_etcd_tx_reads(t), 3);
	/* a fourth compare is over a limit of 3; a key noted before is not new */
	assert_int_equal(jo_etcd_tx_note_key(t, B("other"), 5, 3, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "more than 3"));
	assert_int_equal(jo_etcd_tx_note_range(t, B("q"), B("r"), 5, 3, &err), JO_EINVAL);
	assert_int_equal(jo_etcd_tx_note_key(t, B("k"), 5, 3, &err), 0);
	assert_int_equal(jo_etcd_tx_reads(t), 3);

	/* read only: nothing to send */
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), 0);
	assert_null(body);

	assert_int_equal(jo_etcd_tx_put(t, B("w"), B("v"), &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), 0);
	assert_int_equal(nc, 3);
	assert_int_equal(no, 1);
	o = parse(body);
	cmp = json_object_get(o, "compare");
	assert_int_equal(json_array_size(cmp), 3);
	/* keys in key order: "absent" (0: must still be absent), then "k" at its first revision */
	assert_b64(json_array_get(cmp, 0), "key", "absent", 6);
	assert_string_equal(str(json_array_get(cmp, 0), "target"), "MOD");
	assert_string_equal(str(json_array_get(cmp, 0), "result"), "EQUAL");
	assert_string_equal(str(json_array_get(cmp, 0), "mod_revision"), "0");
	assert_null(json_object_get(json_array_get(cmp, 0), "range_end"));
	assert_b64(json_array_get(cmp, 1), "key", "k", 1);
	assert_string_equal(str(json_array_get(cmp, 1), "mod_revision"), "17");
	/* the range: nothing in it modified after revision 38 */
	assert_b64(json_array_get(cmp, 2), "key", "p/", 2);
	assert_b64(json_array_get(cmp, 2), "range_end", "p0", 2);
	assert_string_equal(str(json_array_get(cmp, 2), "result"), "LESS");
	assert_string_equal(str(json_array_get(cmp, 2), "mod_revision"), "39");
	assert_b64(json_object_get(json_array_get(json_object_get(o, "success"), 0), "request_put"),
		   "value", "v", 1);
	assert_null(json_object_get(o, "failure"));
	json_decref(o);
	free(body);
	jo_etcd_tx_free(t);
}

/* append bytes to a text, a "\0" as '~' */
static void add_text(char *out, size_t cap, size_t *n, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len && *n + 1 < cap; i++)
		out[(*n)++] = b[i] ? (char)b[i] : '~';
	out[*n] = '\0';
}

/* the success branch's ops as "put KEY" / "del KEY" / "del KEY..END" lines */
static char *ops_text(const char *body)
{
	json_t *o = parse(body), *ops = json_object_get(o, "success");
	size_t cap = 4096, n = 0;
	char *out = calloc(1, cap);

	for (size_t i = 0; i < json_array_size(ops); i++) {
		const json_t *op = json_array_get(ops, i);
		const json_t *put = json_object_get(op, "request_put");
		const json_t *del = json_object_get(op, "request_delete_range");
		const json_t *r = put ? put : del;
		const json_t *re = del ? json_object_get(del, "range_end") : NULL;
		uint8_t *k, *e = NULL;
		size_t kl, el = 0;

		assert_non_null(r);
		assert_int_equal(jo_etcd_b64_decode(str(r, "key"), strlen(str(r, "key")), &k, &kl), 0);
		add_text(out, cap, &n, put ? "put " : "del ", 4);
		add_text(out, cap, &n, k, kl);
		if (re) {
			assert_int_equal(jo_etcd_b64_decode(json_string_value(re),
							    json_string_length(re), &e, &el), 0);
			add_text(out, cap, &n, "..", 2);
			add_text(out, cap, &n, e, el);
		}
		add_text(out, cap, &n, "\n", 1);
		free(k);
		free(e);
	}
	json_decref(o);
	return out;
}

static void tx_commit_cuts_delete_ranges_around_puts(void **state)
{
	struct jo_etcd_tx *t;
	struct jo_err err = { 0 };
	char *body, *text;
	size_t nc, no;

	(void)state;
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	assert_int_equal(jo_etcd_tx_put(t, B("a"), B("1"), &err), 0);
	assert_int_equal(jo_etcd_tx_del(t, B("b"), &err), 0);        /* a single delete */
	assert_int_equal(jo_etcd_tx_put(t, B("w"), B("x"), &err), 0);
	assert_int_equal(jo_etcd_tx_del(t, B("w"), &err), 0);        /* put then delete: deleted */
	assert_int_equal(jo_etcd_tx_del_range(t, B("m"), B("p"), &err), 0);
	assert_int_equal(jo_etcd_tx_del_range(t, B("o"), B("r"), &err), 0); /* overlaps: one range */
	assert_int_equal(jo_etcd_tx_del(t, B("n"), &err), 0);        /* inside a range: dropped */
	assert_int_equal(jo_etcd_tx_put(t, B("m"), B("2"), &err), 0); /* at its start */
	assert_int_equal(jo_etcd_tx_put(t, B("n5"), B("3"), &err), 0);
	assert_int_equal(jo_etcd_tx_put(t, B("n5\0"), B("4"), &err), 0); /* right after n5 */
	assert_int_equal(jo_etcd_tx_del_range(t, B("y"), NULL, 0, &err), 0);
	assert_int_equal(jo_etcd_tx_put(t, B("z"), B("5"), &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), 0);
	text = ops_text(body);
	assert_string_equal(text,
			    /* the merged range [m, r) minus m, n5, n5\0: no empty pieces */
			    "del m~..n5\n"
			    "del n5~~..r\n"
			    /* [y, no end) minus z */
			    "del y..z\n"
			    "del z~..~\n"
			    "put a\n"
			    "del b\n"
			    "put m\n"
			    "put n5\n"
			    "put n5~\n"
			    "del w\n"
			    "put z\n");
	assert_int_equal(nc, 0);
	assert_int_equal(no, 11);
	free(text);
	free(body);
	jo_etcd_tx_free(t);
}

static void tx_commit_refuses_what_etcd_would_refuse(void **state)
{
	struct jo_etcd_tx *t;
	struct jo_err err = { 0 };
	char key[16], *body = (char *)"untouched";
	size_t nc, no;
	uint8_t *big;

	(void)state;
	/* 128 compares and 128 puts: exactly what etcd takes */
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	for (int i = 0; i < 128; i++) {
		snprintf(key, sizeof(key), "k%03d", i);
		assert_int_equal(jo_etcd_tx_note_key(t, (const uint8_t *)key, 4, i + 1, 128, &err), 0);
		assert_int_equal(jo_etcd_tx_put(t, (const uint8_t *)key, 4, B("v"), &err), 0);
	}
	assert_int_equal(jo_etcd_tx_note_key(t, B("k999"), 1, 128, &err), JO_EINVAL);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), 0);
	assert_int_equal(nc, 128);
	assert_int_equal(no, 128);
	free(body);
	/* one more write is refused, with the counts, and nothing is built */
	assert_int_equal(jo_etcd_tx_del(t, B("k999"), &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), JO_EINVAL);
	assert_null(body);
	assert_int_equal(no, 129);
	assert_non_null(strstr(err.msg, "129 writes"));
	assert_non_null(strstr(err.msg, "nothing was sent"));
	jo_etcd_tx_free(t);

	/* compares are checked at commit too (limits given to the notes or not) */
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	for (int i = 0; i < 129; i++) {
		snprintf(key, sizeof(key), "k%03d", i);
		assert_int_equal(jo_etcd_tx_note_key(t, (const uint8_t *)key, 4, 1, 0, &err), 0);
	}
	assert_int_equal(jo_etcd_tx_put(t, B("x"), B("v"), &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), JO_EINVAL);
	assert_null(body);
	assert_non_null(strstr(err.msg, "129 compares"));
	jo_etcd_tx_free(t);

	/* a range cut around the keys put inside it counts every piece */
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	assert_int_equal(jo_etcd_tx_del_range(t, B("k"), B("l"), &err), 0);
	for (int i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "k%03d", i * 2);
		assert_int_equal(jo_etcd_tx_put(t, (const uint8_t *)key, 4, B("v"), &err), 0);
	}
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), JO_EINVAL);
	assert_int_equal(no, 65 + 64);
	jo_etcd_tx_free(t);

	/* the request size: a value over 1.5 MiB, and one under it */
	big = calloc(1, 1600000);
	assert_int_equal(jo_etcd_tx_new(&t), 0);
	assert_int_equal(jo_etcd_tx_put(t, B("big"), big, 1600000, &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), JO_EINVAL);
	assert_null(body);
	assert_non_null(strstr(err.msg, "--max-request-bytes"));
	assert_int_equal(jo_etcd_tx_put(t, B("big"), big, 1500000, &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, &etcd_limits, &body, &nc, &no, &err), 0);
	assert_non_null(body);
	free(body);
	/* no limits: anything goes */
	assert_int_equal(jo_etcd_tx_put(t, B("big"), big, 1600000, &err), 0);
	assert_int_equal(jo_etcd_tx_commit_body(t, NULL, &body, &nc, &no, &err), 0);
	free(body);
	jo_etcd_tx_free(t);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(b64_round_trips_binary_and_rejects_junk),
		cmocka_unit_test(tls_query_reads_juicefs_keys_percent_decoded),
		cmocka_unit_test(range_body_is_linearizable_with_strings_for_int64),
		cmocka_unit_test(range_reply_parses_kvs_more_and_omitted_defaults),
		cmocka_unit_test(range_reply_rejects_malformed_data),
		cmocka_unit_test(txn_token_status_and_error_replies),
		cmocka_unit_test(tx_reads_its_own_writes),
		cmocka_unit_test(tx_notes_first_revision_and_counts_compares),
		cmocka_unit_test(tx_commit_cuts_delete_ranges_around_puts),
		cmocka_unit_test(tx_commit_refuses_what_etcd_would_refuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
