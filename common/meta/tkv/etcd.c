/*
 * tkv/etcd.c: the etcd transport of the tkv family (tkv/kv.h), through
 * etcd's v3 API as its HTTP/1.1 JSON gateway serves it (POST /v3/kv/range,
 * /v3/kv/txn, /v3/auth/authenticate, /v3/maintenance/status), over one
 * kept-alive libcurl easy handle per connection; jansson for the JSON,
 * OpenSSL's EVP base64 for keys and values. The gateway rather than gRPC:
 * it is the same v3 API (every call here has its exact gRPC twin), and it
 * needs only libraries jo_common links already, where gRPC would need the
 * C++ gRPC runtime plus generated protobuf stubs of etcd's API; the price is
 * base64 and JSON on every request, small beside the round trip.
 *
 * Transactions (spec juicefs-engines.md B.3/B.4): every read is its own
 * linearizable Range at the newest revision; the transaction notes the
 * mod_revision of each key it read (0 when absent) and, for each range it
 * scanned, the reply's header.revision R. Writes are buffered (reads see
 * them) and sent at commit as one Txn whose compares are MOD == noted per
 * key and MOD < R+1 over each range, so a key changed, created or deleted,
 * or a key inserted into a scanned range, makes the Txn fail: JO_ECONFLICT,
 * nothing written. A transaction over etcd's limits is refused before
 * anything is sent, never split.
 *
 * Snapshot scans page through [start, end) at one fixed revision, so keys
 * written during the scan are seen with their value at that revision (or
 * not at all when created later); a revision compacted mid-scan fails the
 * scan.
 */
#include "common/meta/tkv/kv.h"
#include "common/meta/tkv/etcd_internal.h"
#include "common/strfree.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "common/cancel.h"
#include "common/curlerr.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/pct.h"
#include "common/meta/meta_internal.h"

#define CONNECT_TIMEOUT_MS 5000L
#define REQUEST_TIMEOUT_MS 60000L
/* A page of 1024 chunk values (<= 60 KB each) is ~80 MB of base64: room for that. */
#define MAX_REPLY_BYTES ((size_t)256 << 20)

/* gRPC status codes the gateway puts in "code" */
enum {
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_UNAVAILABLE = 14,
	GRPC_UNAUTHENTICATED = 16,
};

/* ---------------------------------------------------------------- bytes */

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;

	if (c)
		return c;
	return al < bl ? -1 : al > bl ? 1 : 0;
}

/* k < end, where an empty end has no bound */
static bool below_end(const uint8_t *k, size_t kl, const uint8_t *e, size_t el)
{
	return el == 0 || key_cmp(k, kl, e, el) < 0;
}

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

/* k + "\0": the first key after k */
static uint8_t *key_next(const uint8_t *k, size_t kl, size_t *out_len)
{
	uint8_t *d = malloc(kl + 1);

	if (!d)
		return NULL;
	if (kl)
		memcpy(d, k, kl);
	d[kl] = 0;
	*out_len = kl + 1;
	return d;
}

/* ---------------------------------------------------------------- base64 */

int jo_etcd_b64_encode(const uint8_t *p, size_t n, char **out)
{
	size_t olen;
	char *s;

	*out = NULL;
	if (n > (size_t)INT_MAX / 4 * 3 - 3)
		return JO_ENOMEM;
	olen = (n + 2) / 3 * 4;
	if (!(s = malloc(olen + 1)))
		return JO_ENOMEM;
	if (n)
		EVP_EncodeBlock((unsigned char *)s, p, (int)n);
	s[olen] = '\0';
	*out = s;
	return 0;
}

static bool b64_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '+' || ch == '/';
}

/* Decode canonical padded base64 into dst (room for n / 4 * 3). -1 when bad. */
static int b64_decode_into(const char *s, size_t n, uint8_t *dst, size_t *outlen)
{
	size_t pad = 0;
	int got;

	*outlen = 0;
	if (n == 0)
		return 0;
	if (n % 4 || n > (size_t)INT_MAX)
		return -1;
	if (s[n - 1] == '=')
		pad = s[n - 2] == '=' ? 2 : 1;
	for (size_t i = 0; i < n - pad; i++)
		if (!b64_char(s[i]))
			return -1;
	/* EVP_DecodeBlock skips surrounding blanks: only clean input gets here */
	got = EVP_DecodeBlock(dst, (const unsigned char *)s, (int)n);
	if (got < 0 || (size_t)got != n / 4 * 3)
		return -1;
	*outlen = (size_t)got - pad;
	return 0;
}

int jo_etcd_b64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen)
{
	uint8_t *d = malloc(n / 4 * 3 + 1);

	*out = NULL;
	*outlen = 0;
	if (!d)
		return JO_ENOMEM;
	if (b64_decode_into(s, n, d, outlen) != 0) {
		free(d);
		return JO_EPROTO;
	}
	*out = d;
	return 0;
}

/* ---------------------------------------------------------------- TLS query */

void jo_etcd_tls_release(struct jo_etcd_tls *t)
{
	if (!t)
		return;
	jo_free_strs(&t->cacert, &t->cert, &t->key, &t->server_name);
	memset(t, 0, sizeof(*t));
}

int jo_etcd_tls_parse(struct jo_etcd_tls *out, const char *query, struct jo_err *err)
{
	struct jo_etcd_tls t = { 0 };
	bool insecure_seen = false;
	const char *p = query ? query : "";

	memset(out, 0, sizeof(*out));
	while (*p) {
		const char *amp = strchr(p, '&');
		const char *pe = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(pe - p));
		const char *ke = eq ? eq : pe;
		char *k, *v = NULL, **slot = NULL;
		bool bad = false;

		if (pe == p) {
			p = amp ? amp + 1 : pe;
			continue;
		}
		k = jo_pct_decode(p, (size_t)(ke - p), JO_PCT_PLUS_SPACE);
		if (k && eq)
			v = jo_pct_decode(eq + 1, (size_t)(pe - eq - 1), JO_PCT_PLUS_SPACE);
		else if (k)
			v = strdup("");
		bad = errno == EINVAL;
		if (!k || !v) {
			free(k);
			free(v);
			jo_etcd_tls_release(&t);
			if (bad)
				return jo_err_set(err, JO_EINVAL, "etcd META-URL: bad percent escape in "
						  "the query");
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		if (strcmp(k, "cacert") == 0)
			slot = &t.cacert;
		else if (strcmp(k, "cert") == 0)
			slot = &t.cert;
		else if (strcmp(k, "key") == 0)
			slot = &t.key;
		else if (strcmp(k, "server-name") == 0)
			slot = &t.server_name;
		else if (strcmp(k, "insecure-skip-verify") == 0 && !insecure_seen) {
			insecure_seen = true;
			/* juicefs: any non-empty value; "0" and "false" also mean off here */
			t.insecure = v[0] && strcmp(v, "0") != 0 && strcmp(v, "false") != 0;
		}
		if (slot && !*slot && v[0]) {
			*slot = v;
			v = NULL;
		}
		free(k);
		free(v);
		p = amp ? amp + 1 : pe;
	}
	*out = t;
	return 0;
}

bool jo_etcd_tls_on(const struct jo_etcd_tls *t)
{
	return t->cacert || t->cert || t->key || t->server_name;
}

/* ---------------------------------------------------------------- JSON */

/* obj[name] := base64(p), an empty key or end being etcd's "\0" */
static int set_key(json_t *o, const char *name, const uint8_t *p, size_t n)
{
	static const uint8_t zero = 0;
	char *b;
	int rc;

	if (n == 0) {
		p = &zero;
		n = 1;
	}
	if (jo_etcd_b64_encode(p, n, &b) != 0)
		return -1;
	rc = json_object_set_new(o, name, json_string(b));
	free(b);
	return rc;
}

static int set_bytes(json_t *o, const char *name, const uint8_t *p, size_t n)
{
	char *b;
	int rc;

	if (jo_etcd_b64_encode(p, n, &b) != 0)
		return -1;
	rc = json_object_set_new(o, name, json_string(b));
	free(b);
	return rc;
}

/* 64-bit integers travel as strings (the gateway accepts both) */
static int set_i64(json_t *o, const char *name, int64_t v)
{
	char b[32];

	snprintf(b, sizeof(b), "%lld", (long long)v);
	return json_object_set_new(o, name, json_string(b));
}

/* obj[name] as int64: a JSON string of digits or a number; absent is 0. -1 when bad. */
static int get_i64(const json_t *o, const char *name, int64_t *out)
{
	const json_t *v = json_object_get(o, name);

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *e;
		long long x;

		if (!(*s == '-' || (*s >= '0' && *s <= '9')))
			return -1;
		errno = 0;
		x = strtoll(s, &e, 10);
		if (errno || *e || e == s)
			return -1;
		*out = (int64_t)x;
		return 0;
	}
	return -1;
}

/* Serialise and drop o. NULL when out of memory. */
static char *dump_free(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

int jo_etcd_range_body(const uint8_t *start, size_t sl, const uint8_t *end, size_t el,
		       size_t limit, int64_t rev, bool keys_only, char **out)
{
	json_t *o = json_object();

	*out = NULL;
	if (!o || set_key(o, "key", start, sl) || set_key(o, "range_end", end, el) ||
	    (limit && set_i64(o, "limit", (int64_t)limit)) || (rev && set_i64(o, "revision", rev)) ||
	    (keys_only && json_object_set_new(o, "keys_only", json_true()))) {
		json_decref(o);
		return JO_ENOMEM;
	}
	*out = dump_free(o);
	return *out ? 0 : JO_ENOMEM;
}

int jo_etcd_key_body(const uint8_t *k, size_t kl, char **out)
{
	json_t *o = json_object();

	*out = NULL;
	if (!o || set_bytes(o, "key", k, kl)) {
		json_decref(o);
		return JO_ENOMEM;
	}
	*out = dump_free(o);
	return *out ? 0 : JO_ENOMEM;
}

static json_t *load(const char *body, size_t n, const char *what, struct jo_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(body, n, 0, &je);

	if (!o) {
		jo_err_set(err, JO_EPROTO, "malformed %s reply: %s", what, je.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		jo_err_set(err, JO_EPROTO, "malformed %s reply: not a JSON object", what);
		return NULL;
	}
	return o;
}

static int header_revision(const json_t *o, int64_t *rev)
{
	const json_t *h = json_object_get(o, "header");

	*rev = 0;
	if (!json_is_object(h) || get_i64(h, "revision", rev) != 0 || *rev <= 0)
		return -1;
	return 0;
}

void jo_etcd_page_release(struct jo_etcd_page *p)
{
	if (!p)
		return;
	free(p->kvs);
	free(p->store);
	memset(p, 0, sizeof(*p));
}

int jo_etcd_parse_range(const char *body, size_t n, struct jo_etcd_page *out, struct jo_err *err)
{
	struct jo_etcd_page pg = { 0 };
	const json_t *kvs, *more;
	json_t *o;
	size_t cap = 0, used = 0;

	memset(out, 0, sizeof(*out));
	if (!(o = load(body, n, "range", err)))
		return err ? err->code : JO_EPROTO;
	if (header_revision(o, &pg.revision) != 0) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "malformed range reply: no header.revision");
	}
	more = json_object_get(o, "more");
	if (more && !json_is_boolean(more)) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "malformed range reply: \"more\" is not a boolean");
	}
	pg.more = more && json_is_true(more);
	kvs = json_object_get(o, "kvs");
	if (kvs && !json_is_array(kvs)) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "malformed range reply: \"kvs\" is not an array");
	}
	pg.n = kvs ? json_array_size(kvs) : 0;
	for (size_t i = 0; i < pg.n; i++) {
		const json_t *kv = json_array_get(kvs, i);
		const json_t *k = json_object_get(kv, "key"), *v = json_object_get(kv, "value");

		if (!json_is_object(kv) || !json_is_string(k) || (v && !json_is_string(v))) {
			json_decref(o);
			return jo_err_set(err, JO_EPROTO, "malformed range reply: kvs[%zu] has no "
					  "key, or a value that is not a string", i);
		}
		cap += json_string_length(k) / 4 * 3 + (v ? json_string_length(v) / 4 * 3 : 0);
	}
	pg.kvs = calloc(pg.n ? pg.n : 1, sizeof(*pg.kvs));
	pg.store = malloc(cap ? cap : 1);
	if (!pg.kvs || !pg.store) {
		json_decref(o);
		jo_etcd_page_release(&pg);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < pg.n; i++) {
		const json_t *kv = json_array_get(kvs, i);
		const json_t *k = json_object_get(kv, "key"), *v = json_object_get(kv, "value");
		struct jo_etcd_kv *e = &pg.kvs[i];
		size_t got;

		if (b64_decode_into(json_string_value(k), json_string_length(k), pg.store + used, &got) ||
		    got == 0) {
			json_decref(o);
			jo_etcd_page_release(&pg);
			return jo_err_set(err, JO_EPROTO, "malformed range reply: kvs[%zu].key is not "
					  "base64 of a key", i);
		}
		e->key = pg.store + used;
		e->klen = got;
		used += got;
		e->val = pg.store + used;
		if (v && b64_decode_into(json_string_value(v), json_string_length(v), pg.store + used,
					 &got)) {
			json_decref(o);
			jo_etcd_page_release(&pg);
			return jo_err_set(err, JO_EPROTO, "malformed range reply: kvs[%zu].value is "
					  "not base64", i);
		}
		e->vlen = v ? got : 0;
		used += e->vlen;
		if (get_i64(kv, "mod_revision", &e->mod_rev) != 0 || e->mod_rev <= 0) {
			json_decref(o);
			jo_etcd_page_release(&pg);
			return jo_err_set(err, JO_EPROTO, "malformed range reply: kvs[%zu] has no "
					  "mod_revision", i);
		}
	}
	json_decref(o);
	*out = pg;
	return 0;
}

int jo_etcd_parse_txn(const char *body, size_t n, bool *succeeded, struct jo_err *err)
{
	json_t *o = load(body, n, "txn", err);
	const json_t *s;
	int64_t rev;

	*succeeded = false;
	if (!o)
		return err ? err->code : JO_EPROTO;
	s = json_object_get(o, "succeeded");
	if ((s && !json_is_boolean(s)) || header_revision(o, &rev) != 0) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "malformed txn reply: no header.revision, or "
				  "\"succeeded\" is not a boolean");
	}
	*succeeded = s && json_is_true(s);
	json_decref(o);
	return 0;
}

static int parse_string_field(const char *body, size_t n, const char *what, const char *field,
			      char **out, struct jo_err *err)
{
	json_t *o = load(body, n, what, err);
	const json_t *t;

	*out = NULL;
	if (!o)
		return err ? err->code : JO_EPROTO;
	t = json_object_get(o, field);
	if (!json_is_string(t) || json_string_length(t) == 0) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "malformed %s reply: no \"%s\"", what, field);
	}
	*out = strdup(json_string_value(t));
	json_decref(o);
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

int jo_etcd_parse_token(const char *body, size_t n, char **token, struct jo_err *err)
{
	return parse_string_field(body, n, "authenticate", "token", token, err);
}

int jo_etcd_parse_status(const char *body, size_t n, char **version, struct jo_err *err)
{
	return parse_string_field(body, n, "status", "version", version, err);
}

int jo_etcd_parse_error(const char *body, size_t n, int *grpc_code, char *msg, size_t msgsz)
{
	json_t *o = json_loadb(body, n, 0, NULL);
	const json_t *m, *c;
	int64_t code;

	*grpc_code = 0;
	if (msgsz)
		msg[0] = '\0';
	if (!json_is_object(o)) {
		json_decref(o);
		return -1;
	}
	m = json_object_get(o, "message");
	if (!json_is_string(m) || json_string_length(m) == 0)
		m = json_object_get(o, "error");
	c = json_object_get(o, "code");
	if (!json_is_string(m) || !c || get_i64(o, "code", &code) != 0) {
		json_decref(o);
		return -1;
	}
	*grpc_code = (int)code;
	if (msgsz)
		snprintf(msg, msgsz, "%s", json_string_value(m));
	json_decref(o);
	return 0;
}

int jo_etcd_error_class(int grpc_code, const char *msg)
{
	if (grpc_code == GRPC_UNAUTHENTICATED || grpc_code == GRPC_PERMISSION_DENIED ||
	    strstr(msg, "authentication failed") || strstr(msg, "user name is empty") ||
	    strstr(msg, "invalid auth token") || strstr(msg, "permission denied"))
		return JO_EAUTH;
	if (grpc_code == GRPC_DEADLINE_EXCEEDED || strstr(msg, "request timed out"))
		return JO_ETIMEOUT;
	return JO_EIO;
}

bool jo_etcd_error_reauth(int grpc_code, const char *msg)
{
	return grpc_code == GRPC_UNAUTHENTICATED || strstr(msg, "invalid auth token") ||
	       strstr(msg, "revision of auth store is old");
}

/* ---------------------------------------------------------------- transaction buffers */

struct tx_ent {
	uint8_t *k;
	size_t kl;
	uint8_t *v;     /* writes: the value (NULL for a delete) */
	size_t vl;
	int64_t rev;    /* reads: mod_revision noted */
	bool del;       /* writes: deleted */
};

struct tx_vec {
	struct tx_ent *a;
	size_t n, cap;
};

struct tx_rng {
	uint8_t *s;
	size_t sl;
	uint8_t *e;     /* el 0: no bound */
	size_t el;
	int64_t rev;    /* reads: header.revision */
};

struct tx_rngs {
	struct tx_rng *a;
	size_t n, cap;
};

struct jo_etcd_tx {
	struct tx_vec reads;   /* keys read, in key order */
	struct tx_rngs ranges; /* ranges read */
	struct tx_vec writes;  /* keys written, in key order: their final state */
	struct tx_rngs dels;   /* del_range calls (keys put afterwards are in writes) */
};

/* Index of k in v, or where it would go; true when present. */
static bool vec_find(const struct tx_vec *v, const uint8_t *k, size_t kl, size_t *at)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = key_cmp(v->a[mid].k, v->a[mid].kl, k, kl);

		if (c == 0) {
			*at = mid;
			return true;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return false;
}

/* A new entry for k at position at (its key copied), or NULL. */
static struct tx_ent *vec_insert(struct tx_vec *v, size_t at, const uint8_t *k, size_t kl)
{
	struct tx_ent *e;
	uint8_t *kc;

	if (jo_grow_array(&v->a, &v->cap, v->n + 1, sizeof(*v->a)))
		return NULL;
	if (!(kc = dup_bytes(k, kl)))
		return NULL;
	memmove(&v->a[at + 1], &v->a[at], (v->n - at) * sizeof(*v->a));
	v->n++;
	e = &v->a[at];
	memset(e, 0, sizeof(*e));
	e->k = kc;
	e->kl = kl;
	return e;
}

static void vec_release(struct tx_vec *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->a[i].k);
		free(v->a[i].v);
	}
	free(v->a);
	memset(v, 0, sizeof(*v));
}

static int rngs_add(struct tx_rngs *r, const uint8_t *s, size_t sl, const uint8_t *e, size_t el,
		    int64_t rev)
{
	struct tx_rng *x;

	if (jo_grow_array(&r->a, &r->cap, r->n + 1, sizeof(*r->a)))
		return JO_ENOMEM;
	x = &r->a[r->n];
	x->s = dup_bytes(s, sl);
	x->e = dup_bytes(e, el);
	if (!x->s || !x->e) {
		free(x->s);
		free(x->e);
		return JO_ENOMEM;
	}
	x->sl = sl;
	x->el = el;
	x->rev = rev;
	r->n++;
	return 0;
}

static void rngs_release(struct tx_rngs *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->a[i].s);
		free(r->a[i].e);
	}
	free(r->a);
	memset(r, 0, sizeof(*r));
}

static bool in_range(const uint8_t *k, size_t kl, const struct tx_rng *r)
{
	return key_cmp(k, kl, r->s, r->sl) >= 0 && below_end(k, kl, r->e, r->el);
}

int jo_etcd_tx_new(struct jo_etcd_tx **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : JO_ENOMEM;
}

void jo_etcd_tx_free(struct jo_etcd_tx *t)
{
	if (!t)
		return;
	vec_release(&t->reads);
	vec_release(&t->writes);
	rngs_release(&t->ranges);
	rngs_release(&t->dels);
	free(t);
}

enum jo_etcd_buffered jo_etcd_tx_lookup(const struct jo_etcd_tx *t, const uint8_t *k, size_t kl,
					const uint8_t **v, size_t *vl)
{
	size_t at;

	*v = NULL;
	*vl = 0;
	/* a write after a del_range is in writes; a del_range drops the writes before it */
	if (vec_find(&t->writes, k, kl, &at)) {
		if (t->writes.a[at].del)
			return JO_ETCD_BUF_DELETED;
		*v = t->writes.a[at].v;
		*vl = t->writes.a[at].vl;
		return JO_ETCD_BUF_VALUE;
	}
	for (size_t i = 0; i < t->dels.n; i++)
		if (in_range(k, kl, &t->dels.a[i]))
			return JO_ETCD_BUF_DELETED;
	return JO_ETCD_NOT_BUFFERED;
}

size_t jo_etcd_tx_reads(const struct jo_etcd_tx *t)
{
	return t->reads.n + t->ranges.n;
}

bool jo_etcd_tx_noted(const struct jo_etcd_tx *t, const uint8_t *k, size_t kl)
{
	size_t at;

	return vec_find(&t->reads, k, kl, &at);
}

static int over_reads(size_t max, struct jo_err *err)
{
	return jo_err_set(err, JO_EINVAL, "etcd: the transaction reads more than %zu keys and "
			  "ranges, the compares etcd checks in one Txn (--max-txn-ops); nothing "
			  "was written", max);
}

int jo_etcd_tx_note_key(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, int64_t rev,
			size_t max_reads, struct jo_err *err)
{
	size_t at;
	struct tx_ent *e;

	if (vec_find(&t->reads, k, kl, &at))
		return 0; /* the first read's revision is what the transaction depends on */
	if (max_reads && jo_etcd_tx_reads(t) + 1 > max_reads)
		return over_reads(max_reads, err);
	if (!(e = vec_insert(&t->reads, at, k, kl)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	e->rev = rev;
	return 0;
}

int jo_etcd_tx_note_range(struct jo_etcd_tx *t, const uint8_t *s, size_t sl, const uint8_t *e,
			  size_t el, int64_t rev, size_t max_reads, struct jo_err *err)
{
	for (size_t i = 0; i < t->ranges.n; i++) {
		struct tx_rng *r = &t->ranges.a[i];

		if (key_cmp(r->s, r->sl, s, sl) == 0 && key_cmp(r->e, r->el, e, el) == 0) {
			if (rev < r->rev)
				r->rev = rev;
			return 0;
		}
	}
	if (max_reads && jo_etcd_tx_reads(t) + 1 > max_reads)
		return over_reads(max_reads, err);
	if (rngs_add(&t->ranges, s, sl, e, el, rev) != 0)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int tx_write(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		    bool del, struct jo_err *err)
{
	struct tx_ent *e;
	uint8_t *vc = NULL;
	size_t at;

	if (kl == 0)
		return jo_err_set(err, JO_EINVAL, "etcd: an empty key");
	if (!del && !(vc = dup_bytes(v, vl)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (vec_find(&t->writes, k, kl, &at)) {
		e = &t->writes.a[at];
		free(e->v);
	} else if (!(e = vec_insert(&t->writes, at, k, kl))) {
		free(vc);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	e->v = vc;
	e->vl = del ? 0 : vl;
	e->del = del;
	return 0;
}

int jo_etcd_tx_put(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		   struct jo_err *err)
{
	return tx_write(t, k, kl, v, vl, false, err);
}

int jo_etcd_tx_del(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, struct jo_err *err)
{
	return tx_write(t, k, kl, NULL, 0, true, err);
}

int jo_etcd_tx_del_range(struct jo_etcd_tx *t, const uint8_t *s, size_t sl, const uint8_t *e,
			 size_t el, struct jo_err *err)
{
	size_t at, end_at;

	if (el && key_cmp(s, sl, e, el) >= 0)
		return 0; /* an empty range */
	/* the range covers every write before it in [s, e) */
	vec_find(&t->writes, s, sl, &at);
	for (end_at = at; end_at < t->writes.n; end_at++) {
		struct tx_ent *w = &t->writes.a[end_at];

		if (!below_end(w->k, w->kl, e, el))
			break;
		free(w->k);
		free(w->v);
	}
	if (end_at > at) {
		memmove(&t->writes.a[at], &t->writes.a[end_at],
			(t->writes.n - end_at) * sizeof(*t->writes.a));
		t->writes.n -= end_at - at;
	}
	if (rngs_add(&t->dels, s, sl, e, el, 0) != 0)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

bool jo_etcd_tx_has_writes(const struct jo_etcd_tx *t)
{
	return t->writes.n > 0 || t->dels.n > 0;
}

bool jo_etcd_tx_next_put(const struct jo_etcd_tx *t, const uint8_t *lo, size_t ll, bool after,
			 const uint8_t *end, size_t el, const uint8_t **k, size_t *kl,
			 const uint8_t **v, size_t *vl)
{
	size_t at;

	if (vec_find(&t->writes, lo, ll, &at) && after)
		at++;
	for (; at < t->writes.n; at++) {
		const struct tx_ent *w = &t->writes.a[at];

		if (!below_end(w->k, w->kl, end, el))
			return false;
		if (w->del)
			continue;
		*k = w->k;
		*kl = w->kl;
		*v = w->v;
		*vl = w->vl;
		return true;
	}
	return false;
}

/* ---------------------------------------------------------------- commit body */

/* Bytes a compare or an op costs in the server's request (protobuf): its keys
 * and value plus a little framing. */
#define PB_OVERHEAD 24

struct body_build {
	json_t *cmp, *ops;
	size_t ncmp, nops, bytes;
	bool oom;
};

static void add_op(struct body_build *b, json_t *req, const char *kind, size_t bytes)
{
	json_t *op = json_object();

	if (!op || !req || json_object_set_new(op, kind, req) || json_array_append_new(b->ops, op)) {
		if (!op)
			json_decref(req);
		else
			json_decref(op);
		b->oom = true;
		return;
	}
	b->nops++;
	b->bytes += bytes + PB_OVERHEAD;
}

static void add_delete(struct body_build *b, const uint8_t *s, size_t sl, const uint8_t *e,
		       size_t el, bool range)
{
	json_t *r = json_object();

	if (!r || set_bytes(r, "key", s, sl) || (range && set_key(r, "range_end", e, el))) {
		json_decref(r);
		b->oom = true;
		return;
	}
	add_op(b, r, "request_delete_range", sl + (range ? (el ? el : 1) : 0));
}

static void add_put(struct body_build *b, const struct tx_ent *w)
{
	json_t *r = json_object();

	if (!r || set_bytes(r, "key", w->k, w->kl) || set_bytes(r, "value", w->v, w->vl)) {
		json_decref(r);
		b->oom = true;
		return;
	}
	add_op(b, r, "request_put", w->kl + w->vl);
}

static void add_compare(struct body_build *b, const uint8_t *k, size_t kl, const uint8_t *e,
			size_t el, bool range, int64_t rev)
{
	json_t *c = json_object();

	/* a key: MOD == noted (0: still absent); a range: nothing in it newer than rev */
	if (!c || (range ? set_key(c, "key", k, kl) : set_bytes(c, "key", k, kl)) ||
	    (range && set_key(c, "range_end", e, el)) ||
	    json_object_set_new(c, "target", json_string("MOD")) ||
	    json_object_set_new(c, "result", json_string(range ? "LESS" : "EQUAL")) ||
	    set_i64(c, "mod_revision", range ? rev + 1 : rev) || json_array_append_new(b->cmp, c)) {
		json_decref(c);
		b->oom = true;
		return;
	}
	b->ncmp++;
	b->bytes += kl + el + PB_OVERHEAD;
}

static int rng_cmp_start(const void *a, const void *b)
{
	const struct tx_rng *x = a, *y = b;

	return key_cmp(x->s, x->sl, y->s, y->sl);
}

/* Delete [s, e) except the keys put inside it, which etcd wants apart. */
static void add_range_minus_puts(struct body_build *b, const struct jo_etcd_tx *t,
				 const struct tx_rng *r)
{
	const uint8_t *cs = r->s;
	size_t csl = r->sl, at;
	uint8_t *owned = NULL;

	vec_find(&t->writes, r->s, r->sl, &at);
	for (; at < t->writes.n && !b->oom; at++) {
		const struct tx_ent *w = &t->writes.a[at];
		uint8_t *nx;
		size_t nl;

		if (!below_end(w->k, w->kl, r->e, r->el))
			break;
		if (w->del)
			continue;
		if (key_cmp(cs, csl, w->k, w->kl) < 0)
			add_delete(b, cs, csl, w->k, w->kl, true);
		if (!(nx = key_next(w->k, w->kl, &nl))) {
			b->oom = true;
			break;
		}
		free(owned);
		owned = nx;
		cs = nx;
		csl = nl;
	}
	if (!b->oom && below_end(cs, csl, r->e, r->el))
		add_delete(b, cs, csl, r->e, r->el, true);
	free(owned);
}

int jo_etcd_tx_commit_body(const struct jo_etcd_tx *t, const struct jo_etcd_limits *lim,
			   char **out, size_t *ncompares, size_t *nops, struct jo_err *err)
{
	struct body_build b = { 0 };
	struct tx_rng *m = NULL;
	size_t nm = 0;
	json_t *root = NULL;

	*out = NULL;
	if (ncompares)
		*ncompares = 0;
	if (nops)
		*nops = 0;
	if (!jo_etcd_tx_has_writes(t))
		return 0;
	b.cmp = json_array();
	b.ops = json_array();
	if (!b.cmp || !b.ops)
		b.oom = true;
	for (size_t i = 0; i < t->reads.n && !b.oom; i++)
		add_compare(&b, t->reads.a[i].k, t->reads.a[i].kl, NULL, 0, false, t->reads.a[i].rev);
	for (size_t i = 0; i < t->ranges.n && !b.oom; i++) {
		const struct tx_rng *r = &t->ranges.a[i];

		add_compare(&b, r->s, r->sl, r->e, r->el, true, r->rev);
	}
	/* the delete ranges, sorted and merged where they overlap or touch */
	if (t->dels.n && !b.oom) {
		if (!(m = malloc(t->dels.n * sizeof(*m)))) {
			b.oom = true;
		} else {
			memcpy(m, t->dels.a, t->dels.n * sizeof(*m));
			qsort(m, t->dels.n, sizeof(*m), rng_cmp_start);
			for (size_t i = 0; i < t->dels.n; i++) {
				struct tx_rng *last = nm ? &m[nm - 1] : NULL;

				if (last && (last->el == 0 ||
					     key_cmp(m[i].s, m[i].sl, last->e, last->el) <= 0)) {
					if (last->el && (m[i].el == 0 ||
							 key_cmp(m[i].e, m[i].el, last->e, last->el) > 0)) {
						last->e = m[i].e;
						last->el = m[i].el;
					}
				} else {
					m[nm++] = m[i];
				}
			}
		}
	}
	for (size_t i = 0; i < nm && !b.oom; i++)
		add_range_minus_puts(&b, t, &m[i]);
	for (size_t i = 0; i < t->writes.n && !b.oom; i++) {
		const struct tx_ent *w = &t->writes.a[i];
		bool covered = false;

		if (!w->del) {
			add_put(&b, w);
			continue;
		}
		for (size_t j = 0; j < nm && !covered; j++)
			covered = in_range(w->k, w->kl, &m[j]);
		if (!covered) /* deleted by a range already */
			add_delete(&b, w->k, w->kl, NULL, 0, false);
	}
	free(m);
	if (ncompares)
		*ncompares = b.ncmp;
	if (nops)
		*nops = b.nops;
	if (b.oom) {
		json_decref(b.cmp);
		json_decref(b.ops);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (lim && lim->max_compares && b.ncmp > lim->max_compares) {
		json_decref(b.cmp);
		json_decref(b.ops);
		return jo_err_set(err, JO_EINVAL, "etcd: the transaction has %zu compares (keys and "
				  "ranges read), over the %zu etcd takes in one Txn (--max-txn-ops); "
				  "nothing was sent", b.ncmp, lim->max_compares);
	}
	if (lim && lim->max_ops && b.nops > lim->max_ops) {
		json_decref(b.cmp);
		json_decref(b.ops);
		return jo_err_set(err, JO_EINVAL, "etcd: the transaction has %zu writes, over the %zu "
				  "operations etcd takes in one Txn (--max-txn-ops); nothing was sent",
				  b.nops, lim->max_ops);
	}
	if (lim && lim->max_bytes && b.bytes > lim->max_bytes) {
		json_decref(b.cmp);
		json_decref(b.ops);
		return jo_err_set(err, JO_EINVAL, "etcd: the transaction is %zu bytes, over the %zu "
				  "etcd takes in one request (--max-request-bytes); nothing was sent",
				  b.bytes, lim->max_bytes);
	}
	root = json_object();
	if (!root || json_object_set_new(root, "compare", b.cmp) ||
	    json_object_set_new(root, "success", b.ops)) {
		/* set_new drops its value even when it fails */
		json_decref(root);
		if (!root) {
			json_decref(b.cmp);
			json_decref(b.ops);
		}
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!(*out = dump_free(root)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

/* ---------------------------------------------------------------- connection */

struct jo_kvc {
	CURL *h;
	char **eps;            /* "host:port" as in the META-URL */
	size_t neps;
	size_t cur;            /* the endpoint the next call tries first */
	bool https;
	struct jo_etcd_tls tls;
	char *user;
	char *password;        /* never in a message */
	char *auth_hdr;        /* "Authorization: TOKEN", NULL without auth */
	struct jo_dynbuf resp; /* the last reply's body, at most MAX_REPLY_BYTES */
	bool resp_over;        /* it was over MAX_REPLY_BYTES */
	bool resp_oom;         /* no memory for it */
	bool cancellable;      /* the request in flight may be cut by jo_cancelled() */
	bool hdr_end;          /* the last reply's header section ended (its blank line came) */
	char curl_err[CURL_ERROR_SIZE];
};

struct jo_kvt {
	struct jo_kvc *c;
	struct jo_etcd_tx *tx;
};

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct jo_kvc *c = ud;
	size_t n = size * nmemb;
	int rc = jo_dynbuf_add(&c->resp, p, n);

	if (rc == JO_EPROTO)
		c->resp_over = true;
	else if (rc)
		c->resp_oom = true;
	return rc ? 0 : n;
}

/*
 * Header lines of the reply. libcurl takes a connection closed inside the
 * header section for the end of a reply without a body (status 200, no
 * body, CURLE_OK): only the blank line that ends the section says the
 * header arrived whole. A status line starts a section (an interim 1xx
 * reply has its own).
 */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct jo_kvc *c = ud;
	size_t n = size * nmemb;

	if (n >= 5 && !memcmp(p, "HTTP/", 5))
		c->hdr_end = false;
	else if ((n == 2 && p[0] == '\r' && p[1] == '\n') || (n == 1 && p[0] == '\n'))
		c->hdr_end = true;
	return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct jo_kvc *c = ud;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return c->cancellable && jo_cancelled() ? 1 : 0;
}

enum call_kind {
	CALL_READ,   /* any endpoint may answer; retried on the next when one fails */
	CALL_COMMIT, /* retried on the next endpoint only if it was never sent */
	CALL_AUTH,
};

/* Append a header line to l; NULL (l freed) when out of memory or l is NULL. */
static struct curl_slist *add_header(struct curl_slist *l, const char *h)
{
	struct curl_slist *n;

	if (!l)
		return curl_slist_append(NULL, h);
	if (!(n = curl_slist_append(l, h)))
		curl_slist_free_all(l);
	return n;
}

/* One HTTP request to endpoint e. Returns the CURLcode; *status, *sent. */
static CURLcode perform(struct jo_kvc *c, size_t e, enum call_kind kind, bool get,
			const char *path, const char *body, long *status, bool *sent)
{
	const char *ep = c->eps[e];
	const char *colon = strrchr(ep, ':');
	struct curl_slist *hl = NULL, *ct = NULL;
	char url[1024], line[1100];
	CURLcode cc;
	long reqsize = 0;

	*status = 0;
	*sent = false;
	/* a commit in flight runs to its end, so that its outcome is known */
	c->cancellable = kind != CALL_COMMIT;
	if (c->tls.server_name && colon) {
		/* verify the certificate against server-name; connect to the endpoint */
		snprintf(url, sizeof(url), "https://%s%s%s", c->tls.server_name, colon, path);
		snprintf(line, sizeof(line), "%s%s:%.*s%s", c->tls.server_name, colon,
			 (int)(colon - ep), ep, colon);
		if (!(ct = curl_slist_append(NULL, line)))
			return CURLE_OUT_OF_MEMORY;
	} else {
		snprintf(url, sizeof(url), "%s://%s%s", c->https ? "https" : "http", ep, path);
	}
	/* no "Expect: 100-continue" round trip before a large body */
	hl = add_header(hl, "Content-Type: application/json");
	hl = add_header(hl, "Expect:");
	if (c->auth_hdr)
		hl = add_header(hl, c->auth_hdr);
	if (!hl) {
		curl_slist_free_all(ct);
		return CURLE_OUT_OF_MEMORY;
	}
	jo_dynbuf_reset(&c->resp);
	c->resp_over = false;
	c->resp_oom = false;
	c->hdr_end = false;
	c->curl_err[0] = '\0';
	curl_easy_setopt(c->h, CURLOPT_URL, url);
	curl_easy_setopt(c->h, CURLOPT_CONNECT_TO, ct);
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hl);
	if (get) {
		curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(c->h, CURLOPT_POST, 1L);
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
		curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
	}
	cc = curl_easy_perform(c->h);
	if (cc == CURLE_OK && !c->hdr_end) {
		/* a truncated reply, never an empty one */
		snprintf(c->curl_err, sizeof(c->curl_err), "the connection closed inside the "
			 "reply's header");
		cc = CURLE_PARTIAL_FILE;
	}
	curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_getinfo(c->h, CURLINFO_REQUEST_SIZE, &reqsize);
	*sent = reqsize > 0;
	curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c->h, CURLOPT_CONNECT_TO, NULL);
	curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, NULL);
	curl_slist_free_all(hl);
	curl_slist_free_all(ct);
	return cc;
}

static int authenticate(struct jo_kvc *c, struct jo_err *err);

/* The last reply's body ("" when it had none). */
static const char *reply(const struct jo_kvc *c)
{
	return c->resp.p ? c->resp.p : "";
}

/*
 * POST body to path (GET when get) on an endpoint that answers: the reply is
 * then in c->resp (HTTP 200). An unreachable endpoint (and, for reads, a
 * timed-out or unavailable one) passes the call to the next; the next call
 * starts on the endpoint that answered last. A refused token is renewed
 * once. Errors name the endpoint and what was asked.
 */
static int call(struct jo_kvc *c, enum call_kind kind, const char *what, bool get,
		const char *path, const char *body, struct jo_err *err)
{
	size_t first = c->cur, tried = 0;
	bool reauthed = false;
	int rc = JO_ECONNECT;

	while (tried < c->neps) {
		size_t e = (first + tried) % c->neps;
		const char *ep = c->eps[e];
		long status;
		bool sent;
		CURLcode cc = perform(c, e, kind, get, path, body, &status, &sent);
		char msg[400];
		int code;

		if (cc != CURLE_OK) {
			bool next;

			rc = jo_curl_code(cc, JO_CURL_BROKEN_IS_CONNECT);
			if (cc == CURLE_WRITE_ERROR && c->resp_over)
				rc = JO_EPROTO;
			if (cc == CURLE_WRITE_ERROR && c->resp_oom)
				rc = JO_ENOMEM;
			tried++;
			c->cur = (e + 1) % c->neps;
			if (rc == JO_ECANCELED)
				return jo_err_set(err, rc, "etcd %s: %s: cancelled", ep, what);
			if (rc == JO_ENOMEM)
				return jo_err_set(err, rc, "etcd %s: %s: out of memory", ep, what);
			if (rc == JO_EPROTO)
				return jo_err_set(err, rc, "etcd %s: %s: reply over %zu MiB", ep, what,
						  MAX_REPLY_BYTES >> 20);
			next = kind == CALL_COMMIT ? !sent : (rc == JO_ECONNECT || rc == JO_ETIMEOUT);
			jo_err_set(err, rc, "etcd %s%s: %s: %s%s", ep,
				   tried > 1 ? " (and every endpoint before it)" : "", what,
				   c->curl_err[0] ? c->curl_err : curl_easy_strerror(cc),
				   kind == CALL_COMMIT && sent ?
				   " (the Txn was sent: whether it was applied is unknown)" : "");
			if (next && tried < c->neps)
				continue;
			return rc;
		}
		c->cur = e;
		if (status == 200)
			return 0;
		if (jo_etcd_parse_error(reply(c), c->resp.len, &code, msg, sizeof(msg)) != 0)
			return jo_err_set(err, JO_EIO, "etcd %s: %s: HTTP %ld, not an etcd v3 reply "
					  "(etcd 3.4 or later serves the v3 gateway)", ep, what, status);
		if (kind != CALL_AUTH && c->user && !reauthed && jo_etcd_error_reauth(code, msg)) {
			reauthed = true;
			if ((rc = authenticate(c, err)) != 0)
				return rc;
			first = c->cur;
			tried = 0;
			continue;
		}
		rc = jo_etcd_error_class(code, msg);
		if (rc == JO_EAUTH && !c->user && strstr(msg, "user name is empty"))
			return jo_err_set(err, rc, "etcd %s: %s: %s (the server has authentication "
					  "on: give user:password in the META-URL)", ep, what, msg);
		jo_err_set(err, rc, "etcd %s: %s: %s", ep, what, msg);
		if (code == GRPC_UNAVAILABLE && kind != CALL_COMMIT && tried + 1 < c->neps) {
			tried++;
			c->cur = (e + 1) % c->neps;
			continue;
		}
		return rc;
	}
	return rc;
}

static int authenticate(struct jo_kvc *c, struct jo_err *err)
{
	json_t *o = json_object();
	char *body, *token = NULL, *hdr;
	int rc;

	free(c->auth_hdr);
	c->auth_hdr = NULL;
	if (!o || json_object_set_new(o, "name", json_string(c->user)) ||
	    json_object_set_new(o, "password", json_string(c->password ? c->password : ""))) {
		json_decref(o);
		return jo_err_set(err, JO_ENOMEM, "out of memory (or a user or password that is "
				  "not UTF-8)");
	}
	if (!(body = dump_free(o)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = call(c, CALL_AUTH, "authenticate", false, "/v3/auth/authenticate", body, err);
	explicit_bzero(body, strlen(body));
	free(body);
	if (rc != 0) {
		/* a user given to a server without auth: go on without a token, as
		 * etcd's own client does */
		if (err && strstr(err->msg, "authentication is not enabled")) {
			jo_err_clear(err);
			return 0;
		}
		if (rc == JO_EAUTH)
			jo_err_wrap(err, "user \"%s\"", c->user);
		return rc;
	}
	rc = jo_etcd_parse_token(reply(c), c->resp.len, &token, err);
	if (c->resp.p)
		explicit_bzero(c->resp.p, c->resp.len); /* the token stays in one place */
	if (rc != 0)
		return jo_err_wrap(err, "etcd %s", c->eps[c->cur]);
	hdr = malloc(strlen(token) + sizeof("Authorization: "));
	if (!hdr) {
		free(token);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	snprintf(hdr, strlen(token) + sizeof("Authorization: "), "Authorization: %s", token);
	free(token);
	c->auth_hdr = hdr;
	return 0;
}

static int etcd_status(struct jo_kvc *c, char **version, struct jo_err *err)
{
	int rc = call(c, CALL_READ, "status", false, "/v3/maintenance/status", "{}", err);
	json_t *o;
	const json_t *v;

	if (rc == 0) {
		if (!version)
			return 0;
		if ((rc = jo_etcd_parse_status(reply(c), c->resp.len, version, err)) != 0)
			return jo_err_wrap(err, "etcd %s", c->eps[c->cur]);
		return 0;
	}
	if (rc != JO_EIO || !version)
		return rc;
	/* no maintenance API through the gateway: the plain version document */
	if (call(c, CALL_READ, "version", true, "/version", NULL, NULL) != 0)
		return rc;
	o = json_loadb(reply(c), c->resp.len, 0, NULL);
	v = json_object_get(o, "etcdserver");
	if (json_is_string(v) && (*version = strdup(json_string_value(v)))) {
		json_decref(o);
		jo_err_clear(err);
		return 0;
	}
	json_decref(o);
	return rc;
}

static void etcd_disconnect(struct jo_kvc *c)
{
	if (!c)
		return;
	if (c->h)
		curl_easy_cleanup(c->h);
	for (size_t i = 0; i < c->neps; i++)
		free(c->eps[i]);
	free(c->eps);
	jo_etcd_tls_release(&c->tls);
	free(c->user);
	if (c->password) {
		explicit_bzero(c->password, strlen(c->password));
		free(c->password);
	}
	free(c->auth_hdr);
	jo_dynbuf_release(&c->resp);
	free(c);
}

static int split_endpoints(struct jo_kvc *c, const char *hosts, struct jo_err *err)
{
	size_t n = 1;

	for (const char *p = hosts; *p; p++)
		n += *p == ',';
	if (!(c->eps = calloc(n, sizeof(*c->eps))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (const char *p = hosts;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == 0 || len > 512)
			return jo_err_set(err, JO_EINVAL, "etcd META-URL: a bad endpoint in \"%s\"",
					  hosts);
		if (!(c->eps[c->neps] = strndup(p, len)))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		c->neps++;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

static int etcd_connect(struct jo_kvc **out, const struct jo_meta_url *u, struct jo_err *err)
{
	struct jo_kvc *c;
	int rc;

	*out = NULL;
	if (!u->host || !u->host[0])
		return jo_err_set(err, JO_EINVAL, "etcd META-URL has no host");
	if (!(c = calloc(1, sizeof(*c))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	jo_dynbuf_init(&c->resp, MAX_REPLY_BYTES);
	if ((rc = split_endpoints(c, u->host, err)) != 0 ||
	    (rc = jo_etcd_tls_parse(&c->tls, u->query, err)) != 0)
		goto fail;
	c->https = jo_etcd_tls_on(&c->tls);
	if ((u->user && u->user[0] && !(c->user = strdup(u->user))) ||
	    (u->password && !(c->password = strdup(u->password)))) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(c->h = curl_easy_init())) {
		rc = jo_err_set(err, JO_EIO, "etcd: cannot initialise libcurl");
		goto fail;
	}
	curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c->h, CURLOPT_XFERINFODATA, c);
	curl_easy_setopt(c->h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	curl_easy_setopt(c->h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(c->h, CURLOPT_PROTOCOLS_STR, "http,https");
	/* no proxy from the environment: every key of the volume would pass it */
	curl_easy_setopt(c->h, CURLOPT_PROXY, "");
	if (c->https) {
		if (c->tls.cacert)
			curl_easy_setopt(c->h, CURLOPT_CAINFO, c->tls.cacert);
		if (c->tls.cert)
			curl_easy_setopt(c->h, CURLOPT_SSLCERT, c->tls.cert);
		if (c->tls.key)
			curl_easy_setopt(c->h, CURLOPT_SSLKEY, c->tls.key);
		if (c->tls.insecure) {
			curl_easy_setopt(c->h, CURLOPT_SSL_VERIFYPEER, 0L);
			curl_easy_setopt(c->h, CURLOPT_SSL_VERIFYHOST, 0L);
		}
	}
	rc = c->user ? authenticate(c, err) : etcd_status(c, NULL, err);
	if (rc != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	etcd_disconnect(c);
	return rc;
}

static int etcd_version(struct jo_kvc *c, char **out, struct jo_err *err)
{
	char *v = NULL, *s;
	int rc;

	*out = NULL;
	if ((rc = etcd_status(c, &v, err)) != 0)
		return rc;
	s = malloc(strlen(v) + sizeof("etcd "));
	if (!s) {
		free(v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	snprintf(s, strlen(v) + sizeof("etcd "), "etcd %s", v);
	free(v);
	*out = s;
	return 0;
}

/* ---------------------------------------------------------------- transactions */

static int etcd_begin(struct jo_kvc *c, struct jo_kvt **out, struct jo_err *err)
{
	struct jo_kvt *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t || jo_etcd_tx_new(&t->tx) != 0) {
		free(t);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	t->c = c;
	*out = t;
	return 0;
}

static void etcd_abort(struct jo_kvt *t)
{
	if (!t)
		return;
	jo_etcd_tx_free(t->tx);
	free(t);
}

/* A Range request, its reply parsed into *pg. */
static int range_call(struct jo_kvc *c, const char *what, const char *body,
		      struct jo_etcd_page *pg, struct jo_err *err)
{
	int rc = call(c, CALL_READ, what, false, "/v3/kv/range", body, err);

	memset(pg, 0, sizeof(*pg));
	if (rc != 0)
		return rc;
	if ((rc = jo_etcd_parse_range(reply(c), c->resp.len, pg, err)) != 0)
		return jo_err_wrap(err, "etcd %s: %s", c->eps[c->cur], what);
	return 0;
}

static int etcd_get(struct jo_kvt *t, const uint8_t *k, size_t kl, uint8_t **v, size_t *vl,
		    struct jo_err *err)
{
	const size_t max = jo_kv_etcd.max_txn_reads;
	struct jo_etcd_page pg;
	const uint8_t *bv;
	size_t bl;
	char *body;
	int64_t rev = 0;
	int rc;

	*v = NULL;
	*vl = 0;
	if (kl == 0)
		return jo_err_set(err, JO_EINVAL, "etcd: get of an empty key");
	switch (jo_etcd_tx_lookup(t->tx, k, kl, &bv, &bl)) {
	case JO_ETCD_BUF_VALUE:
		if (!(*v = dup_bytes(bv, bl)))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		*vl = bl;
		return 0;
	case JO_ETCD_BUF_DELETED:
		return 0;
	case JO_ETCD_NOT_BUFFERED:
		break;
	}
	if (max && !jo_etcd_tx_noted(t->tx, k, kl) && jo_etcd_tx_reads(t->tx) + 1 > max)
		return over_reads(max, err);
	if (jo_etcd_key_body(k, kl, &body) != 0)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = range_call(t->c, "get", body, &pg, err);
	free(body);
	if (rc != 0)
		return rc;
	if (pg.n > 1 || (pg.n == 1 && key_cmp(pg.kvs[0].key, pg.kvs[0].klen, k, kl) != 0)) {
		jo_etcd_page_release(&pg);
		return jo_err_set(err, JO_EPROTO, "etcd %s: get: the reply holds another key",
				  t->c->eps[t->c->cur]);
	}
	if (pg.n == 1) {
		rev = pg.kvs[0].mod_rev;
		if (!(*v = dup_bytes(pg.kvs[0].val, pg.kvs[0].vlen))) {
			jo_etcd_page_release(&pg);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		*vl = pg.kvs[0].vlen;
	}
	jo_etcd_page_release(&pg);
	if ((rc = jo_etcd_tx_note_key(t->tx, k, kl, rev, max, err)) != 0) {
		free(*v);
		*v = NULL;
		*vl = 0;
	}
	return rc;
}

/* Keys (with values) a scan hands to its callback after a page: copies, so
 * that the callback may use the connection and the transaction. */
struct emits {
	struct tx_ent *a;
	size_t n, cap;
};

static int emits_add(struct emits *m, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	struct tx_ent *e;

	if (jo_grow_array(&m->a, &m->cap, m->n + 1, sizeof(*m->a)))
		return JO_ENOMEM;
	e = &m->a[m->n];
	memset(e, 0, sizeof(*e));
	e->k = dup_bytes(k, kl);
	e->v = dup_bytes(v, vl);
	if (!e->k || !e->v) {
		free(e->k);
		free(e->v);
		return JO_ENOMEM;
	}
	e->kl = kl;
	e->vl = vl;
	m->n++;
	return 0;
}

static void emits_clear(struct emits *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->a[i].k);
		free(m->a[i].v);
	}
	m->n = 0;
}

/* The scan's state between pages. */
struct scan_st {
	struct jo_kvt *t;
	const uint8_t *end;
	size_t el;
	size_t limit, emitted;
	bool keys_only;
	uint8_t *lo;       /* buffered puts are merged from here on */
	size_t ll;
	bool lo_after;     /* (lo, ...) rather than [lo, ...) */
	struct emits out;
};

static int scan_emit(struct scan_st *s, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	uint8_t *nlo = dup_bytes(k, kl);

	if (!nlo || emits_add(&s->out, k, kl, s->keys_only ? NULL : v, s->keys_only ? 0 : vl)) {
		free(nlo);
		return JO_ENOMEM;
	}
	free(s->lo);
	s->lo = nlo;
	s->ll = kl;
	s->lo_after = true;
	s->emitted++;
	return 0;
}

static bool scan_full(const struct scan_st *s)
{
	return s->limit && s->emitted >= s->limit;
}

/* Emit the transaction's own puts below (k, kl) (el 0 with k NULL: below the scan's end). */
static int scan_buffered_below(struct scan_st *s, const uint8_t *k, size_t kl)
{
	const uint8_t *bk, *bv;
	size_t bkl, bvl;

	while (!scan_full(s) &&
	       jo_etcd_tx_next_put(s->t->tx, s->lo, s->ll, s->lo_after, k ? k : s->end,
				   k ? kl : s->el, &bk, &bkl, &bv, &bvl)) {
		if (scan_emit(s, bk, bkl, bv, bvl) != 0)
			return JO_ENOMEM;
	}
	return 0;
}

static int etcd_scan(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end,
		     size_t el, size_t limit, bool keys_only, jo_kv_cb cb, void *payload,
		     struct jo_err *err)
{
	const size_t max = jo_kv_etcd.max_txn_reads;
	struct scan_st s = { .t = t, .end = end, .el = el, .limit = limit, .keys_only = keys_only };
	uint8_t *cursor = NULL, *last = NULL;
	size_t cl = sl, lastl = 0;
	int64_t rev = 0;
	bool exhausted = false, stopped = false;
	int rc = 0;

	if (el && key_cmp(start, sl, end, el) >= 0)
		return 0; /* an empty range: nothing read, nothing to depend on */
	if (!(cursor = dup_bytes(start, sl)) || !(s.lo = dup_bytes(start, sl))) {
		free(cursor);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	s.ll = sl;
	while (!exhausted && !stopped && !scan_full(&s)) {
		struct jo_etcd_page pg;
		size_t want, psize;
		char *body;

		/* enough for what is left, and a little for keys the transaction
		 * deleted; limit 0 asks one key past what the compares allow */
		if (limit)
			want = limit - s.emitted;
		else if (max)
			want = max > jo_etcd_tx_reads(t->tx) ? max - jo_etcd_tx_reads(t->tx) : 1;
		else
			want = JO_ETCD_PAGE;
		psize = want + 8 < JO_ETCD_PAGE ? want + 8 : JO_ETCD_PAGE;
		if (jo_etcd_range_body(cursor, cl, end, el, psize, rev, keys_only, &body) != 0) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		rc = range_call(t->c, "scan", body, &pg, err);
		free(body);
		if (rc != 0)
			break;
		if (!rev)
			rev = pg.revision; /* later pages read the store as the first one saw it */
		for (size_t i = 0; i < pg.n && !rc && !scan_full(&s); i++) {
			const struct jo_etcd_kv *kv = &pg.kvs[i];
			const uint8_t *bv;
			size_t bl;

			if ((rc = scan_buffered_below(&s, kv->key, kv->klen)) != 0 || scan_full(&s))
				break;
			switch (jo_etcd_tx_lookup(t->tx, kv->key, kv->klen, &bv, &bl)) {
			case JO_ETCD_BUF_VALUE:
				rc = scan_emit(&s, kv->key, kv->klen, bv, bl);
				break;
			case JO_ETCD_BUF_DELETED:
				break;
			case JO_ETCD_NOT_BUFFERED:
				/* one compare stays free for the range itself */
				if (max && !jo_etcd_tx_noted(t->tx, kv->key, kv->klen) &&
				    jo_etcd_tx_reads(t->tx) + 2 > max)
					rc = over_reads(max, err);
				else
					rc = jo_etcd_tx_note_key(t->tx, kv->key, kv->klen,
								 kv->mod_rev, max, err);
				if (rc == 0)
					rc = scan_emit(&s, kv->key, kv->klen, kv->val, kv->vlen);
				break;
			}
		}
		if (rc == JO_ENOMEM)
			jo_err_set(err, rc, "out of memory");
		if (!rc && !pg.more && !scan_full(&s)) {
			rc = scan_buffered_below(&s, NULL, 0);
			if (rc)
				jo_err_set(err, rc, "out of memory");
			exhausted = !rc && !scan_full(&s);
		}
		if (!rc && pg.more && pg.n) {
			const struct jo_etcd_kv *lk = &pg.kvs[pg.n - 1];
			uint8_t *nc = key_next(lk->key, lk->klen, &cl);

			if (!nc)
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			free(cursor);
			cursor = nc;
		} else if (!rc && pg.more) {
			rc = jo_err_set(err, JO_EPROTO, "etcd %s: scan: \"more\" with no keys",
					t->c->eps[t->c->cur]);
		}
		jo_etcd_page_release(&pg);
		if (rc)
			break;
		/* the callbacks, with no request in flight */
		for (size_t i = 0; i < s.out.n; i++) {
			const struct tx_ent *e = &s.out.a[i];
			uint8_t *nl = dup_bytes(e->k, e->kl);

			if (!nl) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			free(last);
			last = nl;
			lastl = e->kl;
			if ((rc = cb(e->k, e->kl, keys_only ? NULL : e->v, keys_only ? 0 : e->vl,
				     payload)) != 0) {
				stopped = true;
				break;
			}
		}
		emits_clear(&s.out);
		if (rc && !stopped)
			break;
		if (stopped)
			exhausted = false;
	}
	if (rc == 0 || stopped) {
		/* what the transaction saw: the whole range, or up to the last key handed out */
		int nrc;

		if (exhausted) {
			nrc = jo_etcd_tx_note_range(t->tx, start, sl, end, el, rev, max, err);
		} else if (last) {
			size_t nl;
			uint8_t *ne = key_next(last, lastl, &nl);

			nrc = ne ? jo_etcd_tx_note_range(t->tx, start, sl, ne, nl, rev, max, err) :
				   jo_err_set(err, JO_ENOMEM, "out of memory");
			free(ne);
		} else {
			nrc = 0;
		}
		if (nrc)
			rc = nrc;
	}
	emits_clear(&s.out);
	free(s.out.a);
	free(s.lo);
	free(cursor);
	free(last);
	return rc;
}

static int etcd_put(struct jo_kvt *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		    struct jo_err *err)
{
	return jo_etcd_tx_put(t->tx, k, kl, v, vl, err);
}

static int etcd_del(struct jo_kvt *t, const uint8_t *k, size_t kl, struct jo_err *err)
{
	return jo_etcd_tx_del(t->tx, k, kl, err);
}

static int etcd_del_range(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end,
			  size_t el, struct jo_err *err)
{
	return jo_etcd_tx_del_range(t->tx, start, sl, end, el, err);
}

static int etcd_commit(struct jo_kvt *t, struct jo_err *err)
{
	const struct jo_etcd_limits lim = {
		.max_compares = jo_kv_etcd.max_txn_reads,
		.max_ops = jo_kv_etcd.max_txn_writes,
		.max_bytes = JO_ETCD_MAX_REQUEST_BYTES,
	};
	struct jo_kvc *c = t->c;
	char *body = NULL;
	bool ok = false;
	int rc;

	rc = jo_etcd_tx_commit_body(t->tx, &lim, &body, NULL, NULL, err);
	if (rc == 0 && body) {
		rc = call(c, CALL_COMMIT, "txn", false, "/v3/kv/txn", body, err);
		if (rc == 0 && (rc = jo_etcd_parse_txn(reply(c), c->resp.len, &ok, err)) != 0)
			jo_err_wrap(err, "etcd %s", c->eps[c->cur]);
		if (rc == 0 && !ok)
			rc = jo_err_set(err, JO_ECONFLICT, "etcd %s: txn: a key or range the "
					"transaction read has changed; nothing was written",
					c->eps[c->cur]);
	}
	free(body);
	etcd_abort(t);
	return rc;
}

/* ---------------------------------------------------------------- snapshot scans */

static int etcd_snapshot_scan(struct jo_kvc *c, const uint8_t *start, size_t sl,
			      const uint8_t *end, size_t el, bool keys_only, int64_t *rev,
			      jo_kv_cb cb, void *payload, struct jo_err *err)
{
	int64_t at = rev && *rev > 0 ? *rev : 0;
	uint8_t *cursor = dup_bytes(start, sl);
	size_t cl = sl, seen = 0;
	bool done = el && key_cmp(start, sl, end, el) >= 0; /* an empty range */
	int rc = 0;

	if (!cursor)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	while (!done) {
		struct jo_etcd_page pg;
		char what[64], *body;

		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "etcd: snapshot scan cancelled");
			break;
		}
		if (jo_etcd_range_body(cursor, cl, end, el, JO_ETCD_PAGE, at, keys_only, &body) != 0) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		if (at)
			snprintf(what, sizeof(what), "snapshot scan at revision %lld", (long long)at);
		else
			snprintf(what, sizeof(what), "snapshot scan");
		rc = range_call(c, what, body, &pg, err);
		free(body);
		if (rc != 0) {
			if (err && seen && strstr(err->msg, "compacted")) {
				char old[sizeof(err->msg)];

				memcpy(old, err->msg, sizeof(old));
				jo_err_set(err, rc, "%.400s (after %zu keys: the listing is incomplete)",
					   old, seen);
			}
			break;
		}
		if (!at)
			at = pg.revision;
		if (pg.more && pg.n) {
			const struct jo_etcd_kv *lk = &pg.kvs[pg.n - 1];
			uint8_t *nc = key_next(lk->key, lk->klen, &cl);

			free(cursor);
			if (!(cursor = nc)) {
				jo_etcd_page_release(&pg);
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
		} else if (pg.more) {
			jo_etcd_page_release(&pg);
			rc = jo_err_set(err, JO_EPROTO, "etcd %s: snapshot scan: \"more\" with no keys",
					c->eps[c->cur]);
			break;
		} else {
			done = true;
		}
		/* the page is decoded into its own storage: no request in flight */
		for (size_t i = 0; i < pg.n && rc == 0; i++, seen++)
			rc = cb(pg.kvs[i].key, pg.kvs[i].klen, keys_only ? NULL : pg.kvs[i].val,
				keys_only ? 0 : pg.kvs[i].vlen, payload);
		jo_etcd_page_release(&pg);
		if (rc)
			break;
	}
	if (rev && at)
		*rev = at;
	free(cursor);
	return rc;
}

const struct jo_kv_transport jo_kv_etcd = {
	.name = "etcd",
	.max_txn_reads = JO_ETCD_MAX_TXN_OPS,
	.max_txn_writes = JO_ETCD_MAX_TXN_OPS,
	.connect = etcd_connect,
	.disconnect = etcd_disconnect,
	.version = etcd_version,
	.begin = etcd_begin,
	.get = etcd_get,
	.scan = etcd_scan,
	.put = etcd_put,
	.del = etcd_del,
	.del_range = etcd_del_range,
	.commit = etcd_commit,
	.abort = etcd_abort,
	.snapshot_scan = etcd_snapshot_scan,
};
