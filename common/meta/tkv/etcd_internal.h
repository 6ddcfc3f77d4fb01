/*
 * tkv/etcd_internal.h: the pure parts of the etcd transport (tkv/etcd.c),
 * declared here for its unit test (tests/unit/test_kv_etcd.c): base64, the
 * META-URL query's TLS keys, a transaction's buffers (keys and ranges read,
 * writes buffered) and the JSON bodies and replies of etcd's v3 gateway.
 * Nothing here does I/O. Only tkv/etcd.c and its test include this.
 *
 * Keys of ranges: [start, end) with end of length 0 meaning "every key from
 * start on" (etcd's range_end "\0"); an empty start is the first key there
 * is (etcd's "\0", as etcd has no empty key).
 */
#ifndef JO_META_KV_ETCD_INTERNAL_H
#define JO_META_KV_ETCD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;

/* etcd's defaults: --max-txn-ops (compares, and operations per branch) and
 * --max-request-bytes, less an allowance for the request's own envelope. */
#define JO_ETCD_MAX_TXN_OPS 128
#define JO_ETCD_MAX_REQUEST_BYTES (1572864 - 8192)
/* Keys per page of a snapshot scan (what juicefs reads per page, too). */
#define JO_ETCD_PAGE 1024

/* ---- base64, standard alphabet with padding, as the gateway writes bytes */

/* *out: malloc'd, NUL-terminated. JO_ENOMEM. */
int jo_etcd_b64_encode(const uint8_t *p, size_t n, char **out);
/* *out: malloc'd (never NULL on success, even for n 0), *outlen its length.
 * JO_EPROTO when s is not canonical padded base64, JO_ENOMEM. */
int jo_etcd_b64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen);

/* ---- TLS, from the META-URL's query as juicefs reads it */

struct jo_etcd_tls {
	char *cacert;      /* CA bundle to verify the server with */
	char *cert;        /* client certificate */
	char *key;         /* its key */
	char *server_name; /* the name to verify the server's certificate against */
	bool insecure;     /* insecure-skip-verify: no verification at all */
};

/*
 * Read cacert, cert, key, server-name and insecure-skip-verify from the raw
 * query (percent-decoded, '+' is a space; the first of repeated keys wins;
 * other keys are ignored, as juicefs does). insecure-skip-verify is on for
 * any value but "", "0" and "false". JO_EINVAL on a bad percent escape.
 * Fills *out (released by jo_etcd_tls_release) only on success.
 */
int jo_etcd_tls_parse(struct jo_etcd_tls *out, const char *query, struct jo_err *err);
void jo_etcd_tls_release(struct jo_etcd_tls *t);
/* https or not: any of cacert, cert, key, server-name (juicefs's rule). */
bool jo_etcd_tls_on(const struct jo_etcd_tls *t);

/* ---- request bodies and replies */

/* The body of a linearizable Range request: keys in [start, end), at most
 * limit (0: no limit), at revision rev (0: the newest), keys only or with
 * values. *out malloc'd. JO_ENOMEM. */
int jo_etcd_range_body(const uint8_t *start, size_t sl, const uint8_t *end, size_t el,
		       size_t limit, int64_t rev, bool keys_only, char **out);
/* The body of a linearizable Range request for the one key k. */
int jo_etcd_key_body(const uint8_t *k, size_t kl, char **out);

/* One key of a Range reply; key and val point into the page's storage. */
struct jo_etcd_kv {
	const uint8_t *key;
	size_t klen;
	const uint8_t *val; /* keys only, or an empty value: vlen 0 */
	size_t vlen;
	int64_t mod_rev;
};

struct jo_etcd_page {
	int64_t revision;  /* header.revision: the store's revision when it was read */
	bool more;         /* truncated by the limit */
	size_t n;
	struct jo_etcd_kv *kvs;
	uint8_t *store;    /* the decoded keys and values */
};

/* Parse a Range reply (HTTP 200). JO_EPROTO when malformed (bad JSON, bad
 * base64, a revision that is not a number), JO_ENOMEM. *out is zeroed on
 * failure; release it with jo_etcd_page_release (accepts a zeroed page). */
int jo_etcd_parse_range(const char *body, size_t n, struct jo_etcd_page *out, struct jo_err *err);
void jo_etcd_page_release(struct jo_etcd_page *p);

/* A Txn reply (HTTP 200): *succeeded (a failed Txn has no "succeeded"). */
int jo_etcd_parse_txn(const char *body, size_t n, bool *succeeded, struct jo_err *err);
/* An Authenticate reply: *token malloc'd. JO_EPROTO when it has none. */
int jo_etcd_parse_token(const char *body, size_t n, char **token, struct jo_err *err);
/* A Status reply: *version malloc'd ("3.4.23"). JO_EPROTO when it has none. */
int jo_etcd_parse_status(const char *body, size_t n, char **version, struct jo_err *err);

/*
 * An error reply ({"error", "message", "code"}, any HTTP status): its gRPC
 * code and message into msg (NUL-terminated, cut to msgsz). 0 when it is
 * one, -1 when the body is something else (msg then empty).
 */
int jo_etcd_parse_error(const char *body, size_t n, int *grpc_code, char *msg, size_t msgsz);
/* The JO_E* class of an etcd error: refused credentials and permissions
 * JO_EAUTH, deadlines JO_ETIMEOUT, everything else JO_EIO. */
int jo_etcd_error_class(int grpc_code, const char *msg);
/* True when the error means "authenticate again and retry": the token is
 * invalid or expired, or the auth store moved on since it was issued. */
bool jo_etcd_error_reauth(int grpc_code, const char *msg);

/* ---- a transaction's buffers */

struct jo_etcd_tx;

enum jo_etcd_buffered {
	JO_ETCD_NOT_BUFFERED, /* the transaction has not written this key: read the store */
	JO_ETCD_BUF_VALUE,    /* it put a value */
	JO_ETCD_BUF_DELETED,  /* it deleted the key (del, or a del_range over it) */
};

int jo_etcd_tx_new(struct jo_etcd_tx **out);
void jo_etcd_tx_free(struct jo_etcd_tx *t); /* accepts NULL */

/* What the transaction's own writes say about k; *v / *vl (borrowed, valid
 * until the next write) when JO_ETCD_BUF_VALUE. */
enum jo_etcd_buffered jo_etcd_tx_lookup(const struct jo_etcd_tx *t, const uint8_t *k, size_t kl,
					const uint8_t **v, size_t *vl);

/* Compares noted so far (keys + ranges), and whether k is noted already. */
size_t jo_etcd_tx_reads(const struct jo_etcd_tx *t);
bool jo_etcd_tx_noted(const struct jo_etcd_tx *t, const uint8_t *k, size_t kl);
/*
 * Note a key read at mod_revision rev (0: absent); a key noted before keeps
 * its first revision. JO_EINVAL (nothing noted) when a new compare would
 * make more than max_reads (0: no limit).
 */
int jo_etcd_tx_note_key(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, int64_t rev,
			size_t max_reads, struct jo_err *err);
/* Note a range read whose reply had header.revision rev: the commit then
 * checks that no key in it was created or modified after rev. The same
 * range noted twice keeps its first (lowest) revision. */
int jo_etcd_tx_note_range(struct jo_etcd_tx *t, const uint8_t *s, size_t sl, const uint8_t *e,
			  size_t el, int64_t rev, size_t max_reads, struct jo_err *err);

/* Buffer a write; the last write to a key wins. JO_EINVAL for an empty key
 * (etcd has none), JO_ENOMEM. */
int jo_etcd_tx_put(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		   struct jo_err *err);
int jo_etcd_tx_del(struct jo_etcd_tx *t, const uint8_t *k, size_t kl, struct jo_err *err);
int jo_etcd_tx_del_range(struct jo_etcd_tx *t, const uint8_t *s, size_t sl, const uint8_t *e,
			 size_t el, struct jo_err *err);
bool jo_etcd_tx_has_writes(const struct jo_etcd_tx *t);

/*
 * For scans: the first key the transaction put (not deleted) in [lo, end)
 * (in (lo, end) when after), with its value; all borrowed until the next
 * write. false when there is none.
 */
bool jo_etcd_tx_next_put(const struct jo_etcd_tx *t, const uint8_t *lo, size_t ll, bool after,
			 const uint8_t *end, size_t el, const uint8_t **k, size_t *kl,
			 const uint8_t **v, size_t *vl);

struct jo_etcd_limits {
	size_t max_compares; /* 0: no limit */
	size_t max_ops;      /* 0: no limit */
	size_t max_bytes;    /* of the request as the server sees it (protobuf); 0: none */
};

/*
 * The body of the commit Txn: one compare per key noted (MOD == noted) and
 * per range noted (MOD < rev+1 over the range), and a success branch with
 * the final state of every key written: puts, deletes, and the delete
 * ranges minus the keys put inside them (etcd refuses a put inside a delete
 * range of the same Txn, so a range is cut around them). *out NULL when
 * there is nothing to write. JO_EINVAL, with the counts in the message and
 * nothing built, when the Txn would exceed lim; JO_ENOMEM.
 * *ncompares / *nops (may be NULL) get the counts.
 */
int jo_etcd_tx_commit_body(const struct jo_etcd_tx *t, const struct jo_etcd_limits *lim,
			   char **out, size_t *ncompares, size_t *nops, struct jo_err *err);

#endif
