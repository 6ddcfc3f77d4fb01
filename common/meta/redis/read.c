/*
 * redis/read.c: the Redis backend's reads (§3 of the format spec) over the
 * connection of redis/conn.c (standalone, Sentinel or Cluster, TLS or not).
 * Every key is written %K<key> (the Cluster hash-tag prefix). Every scan is
 * a cursor (SCAN/HSCAN/ZSCAN with COUNT), never KEYS; per-page lookups are
 * pipelined.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/redis/internal.h"

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/opt.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_COUNT "1000"

static int reply_error(struct jo_meta *m, const redisReply *r, struct jo_err *err, const char *what)
{
	int code = JO_EIO;

	if (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0)
		code = JO_EAUTH;
	/* The server is up but not serving now (loading its dataset, blocked by a
	 * script, a replica without its master): unreachable, try again later. */
	else if (strncmp(r->str, "LOADING", 7) == 0 || strncmp(r->str, "BUSY", 4) == 0 ||
		 strncmp(r->str, "MASTERDOWN", 10) == 0 || strncmp(r->str, "TRYAGAIN", 8) == 0)
		code = JO_ECONNECT;
	return jo_err_set(err, code, "redis %s: %s: %.200s", m->url.redacted, what, r->str);
}

/* Run a command; NULL on failure (err set, *rc the code). Error replies fail. */
redisReply *jo_rd_cmd(struct jo_meta *m, struct jo_err *err, int *rc, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = jo_rd_vcommand(m, fmt, ap);
	va_end(ap);
	return jo_rd_checked(m, r, fmt, rc, err);
}

redisReply *jo_rd_checked(struct jo_meta *m, redisReply *r, const char *what, int *rc,
			  struct jo_err *err)
{
	if (!r) {
		*rc = jo_rd_conn_error(m, err, what);
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		*rc = reply_error(m, r, err, what);
		freeReplyObject(r);
		return NULL;
	}
	*rc = 0;
	return r;
}

/*
 * Read the k pending pipelined replies into rs[0..k). All are consumed
 * before any is looked at, so callbacks run with no reply in flight and may
 * use the same handle. On failure every reply is freed.
 */
static int rget_all(struct jo_meta *m, redisReply **rs, size_t k, struct jo_err *err)
{
	int rc = 0;
	size_t i;

	for (i = 0; i < k; i++) {
		redisReply *r = NULL;
		if (jo_rd_get_reply(m, &r) != REDIS_OK || !r) {
			rc = jo_rd_conn_error(m, err, "pipelined reply");
			break;
		}
		rs[i] = r;
		if (rs[i]->type == REDIS_REPLY_ERROR && rc == 0)
			rc = reply_error(m, rs[i], err, "pipelined command");
	}
	if (rc != 0) {
		for (size_t j = 0; j < i && j < k; j++)
			freeReplyObject(rs[j]);
	}
	return rc;
}

static void rfree_from(redisReply **rs, size_t from, size_t k)
{
	for (size_t j = from; j < k; j++)
		freeReplyObject(rs[j]);
}

/* Grow a page-sized reply array. */
static int rs_reserve(redisReply ***rs, size_t *cap, size_t n, struct jo_err *err)
{
	if (jo_grow_array(rs, cap, n, sizeof(**rs)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

/*
 * Room for n keys of a page in one or two parallel arrays (*a of asz-byte
 * elements, *b of bsz-byte ones; b NULL for none), *cap of each.
 */
static int keys_reserve(void *a, size_t asz, void *b, size_t bsz, size_t *cap, size_t n,
			struct jo_err *err)
{
	size_t ca = *cap, cb = *cap;

	if (jo_grow_array(a, &ca, n, asz) || (b && jo_grow_array(b, &cb, n, bsz)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	*cap = ca; /* both grew alike from the same capacity */
	return 0;
}

/* "<prefix><c><v>" at p (room: plen + 21); its length. */
static size_t put_key(char *p, const char *pfx, size_t plen, char c, uint64_t v)
{
	memcpy(p, pfx, plen);
	p[plen] = c;
	return plen + 1 + jo_rd_put_dec(p + plen + 1, v);
}

static int r_open(struct jo_meta *m, struct jo_err *err)
{
	redisReply *r;
	int rc;

	if ((rc = jo_rd_open(m, err)) != 0)
		return rc;
	/* a sync coordinator holds no volume: its records need no format */
	if (m->url.coordinator_only)
		return 0;
	r = jo_rd_cmd(m, err, &rc, "EXISTS %Ksetting");
	if (!r)
		goto fail;
	if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
		freeReplyObject(r);
		rc = jo_err_set(err, JO_ENOTJFS, "redis %s has no \"setting\" key: not a JuiceFS volume",
				m->url.redacted);
		goto fail;
	}
	freeReplyObject(r);
	return 0;
fail:
	jo_rd_close(m);
	return rc;
}

static void r_close(struct jo_meta *m)
{
	jo_rd_close(m);
}

static int r_get_setting(struct jo_meta *m, char **json, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_command(m, "GET %Ksetting");

	if (!r)
		return jo_rd_conn_error(m, err, "GET %Ksetting");
	if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "WRONGTYPE", 9) == 0) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: the \"setting\" key is not a string: "
				  "corrupt format record", m->url.redacted);
	}
	if (r->type == REDIS_REPLY_ERROR) {
		rc = reply_error(m, r, err, "GET %Ksetting");
		freeReplyObject(r);
		return rc;
	}
	if (r->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOTJFS, "redis %s has no \"setting\" key: not a JuiceFS "
				  "volume", m->url.redacted);
	}
	*json = malloc(r->len + 1);
	if (!*json) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	memcpy(*json, r->str, r->len);
	(*json)[r->len] = '\0';
	memset(r->str, 0, r->len);
	freeReplyObject(r);
	return 0;
}

static int r_lookup(struct jo_meta *m, uint64_t parent, const char *name, uint64_t *ino,
		    uint8_t *type, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "HGET %Kd%llu %b", (unsigned long long)parent, name,
			     strlen(name));

	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_STRING) {
		rc = jo_err_set(err, JO_ENOTFOUND, "no entry \"%s\" in directory %llu", name,
				(unsigned long long)parent);
	} else if (r->len < 9) {
		rc = jo_err_set(err, JO_EPROTO, "dir entry \"%s\" in %llu is %zu bytes, need 9", name,
				(unsigned long long)parent, r->len);
	} else {
		*type = (uint8_t)r->str[0];
		*ino = jo_be64((const uint8_t *)r->str + 1);
	}
	freeReplyObject(r);
	return rc;
}

static int r_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "GET %Ki%llu", (unsigned long long)ino);

	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_STRING)
		rc = jo_err_set(err, JO_ENOTFOUND, "inode %llu does not exist",
				(unsigned long long)ino);
	else if ((rc = jo_meta_decode_attr((const uint8_t *)r->str, r->len, out, err)) != 0)
		jo_err_wrap(err, "inode %llu", (unsigned long long)ino);
	freeReplyObject(r);
	return rc;
}

/* getattr_many: GETs pipelined, up to 256 in flight. */
static int r_getattr_many(struct jo_meta *m, const uint64_t *inos, size_t n, struct jo_attr *out,
			  bool *found, struct jo_err *err)
{
	for (size_t base = 0; base < n; base += 256) {
		size_t k = n - base < 256 ? n - base : 256;
		int rc = 0;

		for (size_t i = 0; i < k; i++)
			if (jo_rd_append(m, "GET %Ki%llu", (unsigned long long)inos[base + i]) != REDIS_OK)
				return jo_rd_append_failed(m, i, err, "GET pipeline");
		for (size_t i = 0; i < k; i++) {
			redisReply *r = NULL;

			if (jo_rd_get_reply(m, &r) != REDIS_OK || !r)
				return jo_rd_conn_error(m, err, "pipelined GET"); /* the rest went with it */
			if (rc == 0 && r->type == REDIS_REPLY_ERROR)
				rc = jo_err_set(err, JO_EIO, "redis %s: GET i%llu: %.200s", m->url.redacted,
						(unsigned long long)inos[base + i], r->str);
			else if (rc == 0 && r->type == REDIS_REPLY_STRING) {
				if ((rc = jo_meta_decode_attr((const uint8_t *)r->str, r->len,
							      &out[base + i], err)) != 0)
					jo_err_wrap(err, "inode %llu", (unsigned long long)inos[base + i]);
				else
					found[base + i] = true;
			}
			freeReplyObject(r);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Parse "<prefix><u64>_<u32>" strictly. */
static int parse_two(const char *s, size_t n, char prefix, uint64_t *a, uint64_t *b)
{
	const char *us;

	if (n < 4 || s[0] != prefix)
		return -1;
	us = memchr(s + 1, '_', n - 1);
	if (!us)
		return -1;
	if (jo_parse_digits(s + 1, (size_t)(us - s - 1), a) != 0)
		return -1;
	return jo_parse_digits(us + 1, (size_t)(s + n - us - 1), b);
}

/*
 * Generic cursor loop: cmd is "SCAN", "HSCAN key", "ZSCAN key" or "SSCAN key";
 * page(elements, n) handles one page. Returns 0 or the first non-zero result.
 */
typedef int (*page_fn)(struct jo_meta *m, redisReply **el, size_t n, void *ctx, struct jo_err *err);

static int r_scan(struct jo_meta *m, const char *verb, const char *key, const char *match,
		  page_fn page, void *ctx, struct jo_err *err)
{
	char cursor[32] = "0", pkey[300], pmatch[300];
	size_t plen;
	const char *pre = jo_rd_prefix(m, &plen);
	unsigned epoch = 0;
	bool first = true;
	int rc = 0;

	if (key)
		snprintf(pkey, sizeof(pkey), "%s%s", pre, key);
	if (match)
		snprintf(pmatch, sizeof(pmatch), "%s%s", pre, match);
	do {
		const char *argv[8];
		size_t lens[8];
		int argc = 0;
		redisReply *r, *el;

		argv[argc++] = verb;
		if (key)
			argv[argc++] = pkey;
		argv[argc++] = cursor;
		if (match) {
			argv[argc++] = "MATCH";
			argv[argc++] = pmatch;
		}
		argv[argc++] = "COUNT";
		argv[argc++] = SCAN_COUNT;
		for (int i = 0; i < argc; i++)
			lens[i] = strlen(argv[i]);
		r = jo_rd_command_argv(m, argc, argv, lens);
		if (!r)
			return jo_rd_conn_error(m, err, verb);
		if (r->type == REDIS_REPLY_ERROR) {
			rc = reply_error(m, r, err, verb);
			freeReplyObject(r);
			return rc;
		}
		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING ||
		    r->element[1]->type != REDIS_REPLY_ARRAY || r->element[0]->len >= sizeof(cursor)) {
			freeReplyObject(r);
			return jo_err_set(err, JO_EPROTO, "redis %s: unexpected %s reply",
					  m->url.redacted, verb);
		}
		/* a cursor of one server means nothing to another (a failover) */
		if (first)
			epoch = jo_rd_epoch(m);
		else if (jo_rd_epoch(m) != epoch) {
			freeReplyObject(r);
			return jo_err_set(err, JO_ECONNECT, "redis %s: %s %s: the connection was "
					  "re-established during the scan (a failover?); it must start "
					  "over", m->url.redacted, verb, key ? key : match);
		}
		first = false;
		memcpy(cursor, r->element[0]->str, r->element[0]->len);
		cursor[r->element[0]->len] = '\0';
		el = r->element[1];
		if (!key && plen) {
			/* SCAN: the keys without the prefix (MATCH keeps only ours) */
			size_t k = 0;

			for (size_t i = 0; i < el->elements; i++) {
				if (jo_rd_unprefix(m, el->element[i]))
					el->element[k++] = el->element[i];
				else
					freeReplyObject(el->element[i]);
			}
			el->elements = k;
		}
		if (el->elements > 0)
			rc = page(m, el->element, el->elements, ctx, err);
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

static int r_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			size_t *len, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "LRANGE %Kc%llu_%u 0 -1", (unsigned long long)ino, indx);
	uint8_t *buf;

	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis: chunk c%llu_%u is not a list",
				  (unsigned long long)ino, indx);
	}
	if (r->elements == 0) {
		freeReplyObject(r);
		return 0;
	}
	buf = malloc(r->elements * JO_SLICE_REC_LEN);
	if (!buf) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r->elements; i++) {
		redisReply *e = r->element[i];
		if (e->type != REDIS_REPLY_STRING || e->len != JO_SLICE_REC_LEN) {
			rc = jo_err_set(err, JO_EPROTO, "chunk c%llu_%u: element %zu is %zu bytes, not 24",
					(unsigned long long)ino, indx, i, e->len);
			free(buf);
			freeReplyObject(r);
			return rc;
		}
		memcpy(buf + i * JO_SLICE_REC_LEN, e->str, JO_SLICE_REC_LEN);
	}
	*out = buf;
	*len = r->elements * JO_SLICE_REC_LEN;
	freeReplyObject(r);
	return 0;
}

/* ---- list_chunks: SCAN MATCH c{ino}_* (Redis keeps no per-inode index) */

struct list_ctx {
	uint64_t ino;
	uint32_t *v;
	size_t n, cap;
};

static int list_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct list_ctx *c = p;

	(void)m;
	for (size_t i = 0; i < n; i++) {
		uint64_t ino, indx;
		if (el[i]->type != REDIS_REPLY_STRING ||
		    parse_two(el[i]->str, el[i]->len, 'c', &ino, &indx) != 0 || ino != c->ino ||
		    indx > UINT32_MAX)
			continue;
		if (jo_grow_array(&c->v, &c->cap, c->n + 1, sizeof(*c->v)))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		c->v[c->n++] = (uint32_t)indx;
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int r_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			 struct jo_err *err)
{
	struct list_ctx c = { ino, NULL, 0, 0 };
	char match[48];
	int rc;

	snprintf(match, sizeof(match), "c%llu_*", (unsigned long long)ino);
	rc = r_scan(m, "SCAN", NULL, match, list_page, &c, err);
	if (rc != 0) {
		free(c.v);
		return rc;
	}
	if (c.n > 1) {
		size_t k = 1;
		qsort(c.v, c.n, sizeof(*c.v), cmp_u32);
		for (size_t i = 1; i < c.n; i++) /* SCAN may return a key twice */
			if (c.v[i] != c.v[k - 1])
				c.v[k++] = c.v[i];
		c.n = k;
	}
	*out = c.v;
	*n = c.n;
	return 0;
}

/* ---- list_chunks_below: pipelined EXISTS c{ino}_{i}, batches of 1000 */

static int r_list_chunks_below(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
			       size_t *n, struct jo_err *err)
{
	uint32_t *v = NULL;
	size_t cnt = 0, cap = 0;
	redisReply **rs = malloc(1000 * sizeof(*rs));
	int rc = 0;

	if (!rs)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (uint32_t base = 0; base < nidx && rc == 0; base += 1000) {
		uint32_t k = nidx - base < 1000 ? nidx - base : 1000, got;
		for (uint32_t i = 0; i < k; i++) {
			if (jo_rd_append(m, "EXISTS %Kc%llu_%u", (unsigned long long)ino,
					       base + i) != REDIS_OK) {
				free(v);
				free(rs);
				return jo_rd_append_failed(m, i, err, "EXISTS pipeline");
			}
		}
		rc = rget_all(m, rs, k, err);
		if (rc != 0)
			break;
		for (got = 0; got < k; got++) {
			redisReply *r = rs[got];
			if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
				if (jo_grow_array(&v, &cap, cnt + 1, sizeof(*v))) {
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
					break;
				}
				v[cnt++] = base + got;
			}
			freeReplyObject(r);
		}
		if (rc != 0)
			rfree_from(rs, got, k);
	}
	free(rs);
	if (rc != 0) {
		free(v);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

/* ---- scan_chunks: SCAN MATCH c*_* + pipelined LRANGE per page */

struct chunks_ctx {
	jo_meta_chunk_cb cb;
	void *payload;
	uint8_t *buf;
	size_t cap;
	uint64_t *ino;
	uint32_t *indx;
	size_t kcap;
	redisReply **rs;
	size_t rscap;
};

static int chunks_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct chunks_ctx *c = p;
	size_t k = 0, got = 0;
	int rc = 0;

	rc = keys_reserve(&c->ino, sizeof(*c->ino), &c->indx, sizeof(*c->indx), &c->kcap, n, err);
	if (rc != 0)
		return rc;
	if ((rc = rs_reserve(&c->rs, &c->rscap, n, err)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		uint64_t ino, indx;
		if (el[i]->type != REDIS_REPLY_STRING ||
		    parse_two(el[i]->str, el[i]->len, 'c', &ino, &indx) != 0 || indx > UINT32_MAX)
			continue;
		if (jo_rd_append(m, "LRANGE %K%b 0 -1", el[i]->str, el[i]->len) != REDIS_OK) {
			return jo_rd_append_failed(m, k, err, "LRANGE pipeline");
		}
		c->ino[k] = ino;
		c->indx[k] = (uint32_t)indx;
		k++;
	}
	if ((rc = rget_all(m, c->rs, k, err)) != 0)
		return rc;
	for (got = 0; got < k && rc == 0; got++) {
		redisReply *r = c->rs[got];
		size_t len;
		if (r->type != REDIS_REPLY_ARRAY) { /* not a list: not ours */
			freeReplyObject(r);
			continue;
		}
		len = r->elements * JO_SLICE_REC_LEN;
		if (len > c->cap) {
			uint8_t *b = realloc(c->buf, len);
			if (!b) { /* r is freed by rfree_from below */
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			c->buf = b;
			c->cap = len;
		}
		for (size_t j = 0; j < r->elements; j++) {
			redisReply *e = r->element[j];
			if (e->type != REDIS_REPLY_STRING || e->len != JO_SLICE_REC_LEN) {
				rc = jo_err_set(err, JO_EPROTO,
						"chunk c%llu_%u: element %zu is %zu bytes, not 24",
						(unsigned long long)c->ino[got], c->indx[got], j, e->len);
				break;
			}
			memcpy(c->buf + j * JO_SLICE_REC_LEN, e->str, JO_SLICE_REC_LEN);
		}
		freeReplyObject(r);
		/* A key that vanished between SCAN and LRANGE is an empty list: skip it. */
		if (rc == 0 && len > 0)
			rc = c->cb(c->ino[got], c->indx[got], c->buf, len, c->payload);
	}
	rfree_from(c->rs, got, k);
	return rc;
}

static int r_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload,
			 struct jo_err *err)
{
	struct chunks_ctx c = { cb, payload, NULL, 0, NULL, NULL, 0, NULL, 0 };
	int rc = r_scan(m, "SCAN", NULL, "c*_*", chunks_page, &c, err);

	free(c.rs);
	free(c.buf);
	free(c.ino);
	free(c.indx);
	return rc;
}

/* ---- read_chunks: pipelined LRANGE c{ino}_{indx} for indexes below each file's length */

#define READ_CHUNKS_PIPE 4096

/* One LRANGE reply of chunk c{ino}_{indx} through cb (buf: scratch). */
static int chunk_reply(const redisReply *a, uint64_t ino, uint32_t indx, uint8_t **buf,
		       size_t *cap, jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	size_t len = a->type == REDIS_REPLY_ARRAY ? a->elements * JO_SLICE_REC_LEN : 0;

	if (len > *cap) {
		uint8_t *b = realloc(*buf, len);

		if (!b)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		*buf = b;
		*cap = len;
	}
	for (size_t j = 0; j < len / JO_SLICE_REC_LEN; j++) {
		const redisReply *e = a->element[j];

		if (e->type != REDIS_REPLY_STRING || e->len != JO_SLICE_REC_LEN)
			return jo_err_set(err, JO_EPROTO, "chunk c%llu_%u: element %zu is %zu bytes, "
					  "not 24", (unsigned long long)ino, indx, j, e->len);
		memcpy(*buf + j * JO_SLICE_REC_LEN, e->str, JO_SLICE_REC_LEN);
	}
	/* a chunk that does not exist (a sparse file) is an empty list */
	return len > 0 ? cb(ino, indx, *buf, len, payload) : 0;
}

static int r_read_chunks(struct jo_meta *m, const struct jo_meta_chunk_req *reqs, size_t n,
			 jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	uint64_t *ino = malloc(READ_CHUNKS_PIPE * sizeof(*ino));
	uint32_t *indx = malloc(READ_CHUNKS_PIPE * sizeof(*indx));
	uint8_t *buf = NULL;
	size_t cap = 0, r = 0;
	uint32_t next = 0;  /* the next index of reqs[r] */
	size_t plen;
	const char *pfx = jo_rd_prefix(m, &plen);
	int rc = 0;

	if (!ino || !indx)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	while (rc == 0 && r < n) {
		size_t k = 0, got;

		/* fill one pipeline: the next indexes of the next requests */
		while (r < n && k < READ_CHUNKS_PIPE) {
			if (next >= reqs[r].nidx) {
				r++;
				next = 0;
				continue;
			}
			/* argv by hand: formatting with printf took a fifth of export's CPU */
			char key[64]; /* prefix (< 24) c ino _ indx */
			size_t kl = put_key(key, pfx, plen, 'c', reqs[r].ino);
			const char *argv[4] = { "LRANGE", key, "0", "-1" };
			size_t lens[4] = { 6, 0, 1, 2 };

			key[kl++] = '_';
			lens[1] = kl + jo_rd_put_dec(key + kl, next);
			if (jo_rd_append_argv(m, 4, argv, lens) != REDIS_OK) {
				rc = jo_rd_append_failed(m, k, err, "LRANGE pipeline");
				break;
			}
			ino[k] = reqs[r].ino;
			indx[k++] = next++;
		}
		if (rc != 0)
			break;
		/* each reply as it comes, while Redis answers the rest; after a
		 * failure the rest is still read (and dropped) unless the
		 * connection went, and with it every reply */
		for (got = 0; got < k; got++) {
			redisReply *a = NULL;

			if (jo_rd_get_reply(m, &a) != REDIS_OK || !a) {
				if (rc == 0)
					rc = jo_rd_conn_error(m, err, "pipelined reply");
				break;
			}
			if (rc == 0 && a->type == REDIS_REPLY_ERROR)
				rc = reply_error(m, a, err, "pipelined command");
			if (rc == 0)
				rc = chunk_reply(a, ino[got], indx[got], &buf, &cap, cb, payload, err);
			freeReplyObject(a);
		}
	}
	free(ino);
	free(indx);
	free(buf);
	return rc;
}

/* ---- scan_inodes: SCAN MATCH i* + pipelined GET */

struct inodes_ctx {
	jo_meta_inode_cb cb;
	void *payload;
	uint64_t *ino;
	size_t kcap;
	redisReply **rs;
	size_t rscap;
};

static int inodes_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct inodes_ctx *c = p;
	size_t k = 0, got;
	int rc = 0;

	if ((rc = keys_reserve(&c->ino, sizeof(*c->ino), NULL, 0, &c->kcap, n, err)) != 0)
		return rc;
	if ((rc = rs_reserve(&c->rs, &c->rscap, n, err)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		uint64_t ino;
		if (el[i]->type != REDIS_REPLY_STRING || el[i]->len < 2 || el[i]->str[0] != 'i' ||
		    jo_parse_digits(el[i]->str + 1, el[i]->len - 1, &ino) != 0)
			continue;
		if (jo_rd_append(m, "GET %K%b", el[i]->str, el[i]->len) != REDIS_OK) {
			return jo_rd_append_failed(m, k, err, "GET pipeline");
		}
		c->ino[k++] = ino;
	}
	if ((rc = rget_all(m, c->rs, k, err)) != 0)
		return rc;
	for (got = 0; got < k && rc == 0; got++) {
		redisReply *r = c->rs[got];
		struct jo_attr a;
		if (r->type == REDIS_REPLY_STRING) {
			rc = jo_meta_decode_attr((const uint8_t *)r->str, r->len, &a, err);
			if (rc != 0)
				jo_err_wrap(err, "inode %llu", (unsigned long long)c->ino[got]);
			else
				rc = c->cb(c->ino[got], &a, c->payload);
		}
		freeReplyObject(r);
	}
	rfree_from(c->rs, got, k);
	return rc;
}

static int r_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload,
			 struct jo_err *err)
{
	struct inodes_ctx c = { cb, payload, NULL, 0, NULL, 0 };
	int rc = r_scan(m, "SCAN", NULL, "i*", inodes_page, &c, err);

	free(c.rs);
	free(c.ino);
	return rc;
}

/* ---- readdir: HSCAN d{dir} */

struct dir_ctx {
	jo_meta_dirent_cb cb;
	void *payload;
	uint64_t dir;
};

static int dir_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct dir_ctx *c = p;

	(void)m;
	for (size_t i = 0; i + 1 < n; i += 2) {
		redisReply *k = el[i], *v = el[i + 1];
		int rc;
		if (v->type != REDIS_REPLY_STRING || v->len < 9)
			return jo_err_set(err, JO_EPROTO, "dir %llu: entry value is not 9 bytes",
					  (unsigned long long)c->dir);
		rc = c->cb(k->str, k->len, jo_be64((const uint8_t *)v->str + 1), (uint8_t)v->str[0],
			   c->payload);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int r_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		     struct jo_err *err)
{
	struct dir_ctx c = { cb, payload, dir };
	char key[32];

	snprintf(key, sizeof(key), "d%llu", (unsigned long long)dir);
	return r_scan(m, "HSCAN", key, NULL, dir_page, &c, err);
}

/* ---- readdir_attr: a pipeline of HSCAN pages of the directories, then one of
 * MGET i{ino}... per page (one command for all its entries: Redis parses and
 * dispatches one command, not one per entry) whose replies are taken one by
 * one, each page's entries passed on while Redis answers the next pages;
 * directories with more pages go round again. MGET answers nil for a key
 * that is not a string where GET fails (WRONGTYPE): every nil is read again
 * with GET once the pipeline is drained, so a corrupt inode key is still an
 * error, never a missing inode. */

struct dira {
	uint64_t *dirs;          /* the directories still being read */
	size_t *idx;             /* their index in the caller's array */
	char (*cursor)[32];
	redisReply **hs;         /* this round's HSCAN replies */
	/* one MGET's arguments: the keys packed in kbuf, argv/lens into it */
	char *kbuf;
	size_t kcap;
	const char **argv;
	size_t *lens, acap;
	/* the entries MGET answered nil for, read again with GET */
	uint64_t *nil;
	struct jo_attr *nattr;
	struct nil_ent {
		size_t di;         /* index into dirs of this round */
		size_t name;       /* offset in names */
		size_t len;
		uint8_t type;
	} *nent;
	size_t ncap, nn;
	struct jo_dynbuf names;
	bool *nfound;
};

/* Room for the MGET of a page of up to n entries. */
static int mget_reserve(struct jo_meta *m, struct dira *d, size_t n, struct jo_err *err)
{
	size_t plen;

	(void)jo_rd_prefix(m, &plen);
	if (jo_grow_array(&d->kbuf, &d->kcap, n * (plen + 21), 1))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return keys_reserve(&d->argv, sizeof(*d->argv), &d->lens, sizeof(*d->lens), &d->acap,
			    n + 1, err);
}

/* Append "MGET <prefix>i<ino>..." for the n entries of one HSCAN page (room
 * reserved by mget_reserve). */
static int append_mget(struct jo_meta *m, struct dira *d, const redisReply *el, size_t n)
{
	size_t plen, kl = 0;
	const char *pfx = jo_rd_prefix(m, &plen);

	d->argv[0] = "MGET";
	d->lens[0] = 4;
	for (size_t j = 0; j < n; j++) {
		char *k = d->kbuf + kl;

		d->lens[j + 1] = put_key(k, pfx, plen, 'i',
					 jo_be64((const uint8_t *)el->element[2 * j + 1]->str + 1));
		d->argv[j + 1] = k;
		kl += d->lens[j + 1];
	}
	return jo_rd_append_argv(m, (int)n + 1, d->argv, d->lens);
}

/* An entry MGET answered nil for: kept (with a copy of its name) for later. */
static int keep_nil(struct dira *d, size_t i, const redisReply *name, const redisReply *v,
		    struct jo_err *err)
{
	struct nil_ent *e;

	if (keys_reserve(&d->nil, sizeof(*d->nil), &d->nent, sizeof(*d->nent), &d->ncap,
			 d->nn + 1, err))
		return JO_ENOMEM;
	e = &d->nent[d->nn];
	e->di = i;
	e->name = d->names.len;
	e->len = name->len;
	e->type = (uint8_t)v->str[0];
	d->nil[d->nn++] = jo_be64((const uint8_t *)v->str + 1);
	if (jo_dynbuf_add(&d->names, name->str, name->len))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

/* The entries of page i (HSCAN elements el) with their MGET reply r. */
static int dira_page(struct jo_meta *m, struct dira *d, size_t i, const redisReply *el,
		     const redisReply *r, jo_meta_dirent_attr_cb cb, void *payload,
		     struct jo_err *err)
{
	int rc = 0;

	if (r->type == REDIS_REPLY_ERROR)
		return reply_error(m, r, err, "MGET");
	if (r->type != REDIS_REPLY_ARRAY || r->elements != el->elements / 2)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected MGET reply",
				  m->url.redacted);
	for (size_t j = 0; j + 1 < el->elements && rc == 0; j += 2) {
		const redisReply *name = el->element[j], *v = el->element[j + 1];
		const redisReply *a1 = r->element[j / 2];
		uint64_t ino = jo_be64((const uint8_t *)v->str + 1);
		struct jo_attr a;

		if (a1->type != REDIS_REPLY_STRING)
			rc = keep_nil(d, i, name, v, err);
		else if ((rc = jo_meta_decode_attr((const uint8_t *)a1->str, a1->len, &a, err)) != 0)
			jo_err_wrap(err, "inode %llu", (unsigned long long)ino);
		else
			rc = cb(d->idx[i], name->str, name->len, ino, (uint8_t)v->str[0], &a,
				payload);
	}
	return rc;
}

/* The nil entries of the round, read again with GET (nothing in flight). */
static int dira_nils(struct jo_meta *m, struct dira *d, jo_meta_dirent_attr_cb cb,
		     void *payload, struct jo_err *err)
{
	int rc;

	if (d->nn == 0)
		return 0;
	free(d->nfound);
	d->nattr = NULL;
	if (!(d->nfound = calloc(d->nn, sizeof(*d->nfound))) ||
	    !(d->nattr = malloc(d->nn * sizeof(*d->nattr))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = r_getattr_many(m, d->nil, d->nn, d->nattr, d->nfound, err);
	for (size_t k = 0; k < d->nn && rc == 0; k++) {
		const struct nil_ent *e = &d->nent[k];

		/* present now, or gone (no attributes) */
		rc = cb(d->idx[e->di], d->names.p + e->name, e->len, d->nil[k], e->type,
			d->nfound[k] ? &d->nattr[k] : NULL, payload);
	}
	free(d->nattr);
	d->nattr = NULL;
	return rc;
}

static int dira_round(struct jo_meta *m, struct dira *d, size_t n, jo_meta_dirent_attr_cb cb,
		      void *payload, size_t *left, struct jo_err *err)
{
	size_t k = 0, most = 0;
	bool lost = false;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (jo_rd_append(m, "HSCAN %Kd%llu %s COUNT " SCAN_COUNT,
				 (unsigned long long)d->dirs[i], d->cursor[i]) != REDIS_OK)
			return jo_rd_append_failed(m, i, err, "HSCAN pipeline");
	}
	if ((rc = rget_all(m, d->hs, n, err)) != 0)
		return rc;
	/* check every page, then ask for the attributes of all their entries */
	for (size_t i = 0; i < n && rc == 0; i++) {
		redisReply *r = d->hs[i], *el;

		if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
		    r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= 32 ||
		    r->element[1]->type != REDIS_REPLY_ARRAY) {
			rc = jo_err_set(err, JO_EPROTO, "redis %s: unexpected HSCAN reply",
					m->url.redacted);
			break;
		}
		el = r->element[1];
		for (size_t j = 0; j + 1 < el->elements && rc == 0; j += 2)
			if (el->element[j + 1]->type != REDIS_REPLY_STRING ||
			    el->element[j + 1]->len < 9)
				rc = jo_err_set(err, JO_EPROTO, "dir %llu: entry value is not 9 bytes",
						(unsigned long long)d->dirs[i]);
		if (el->elements / 2 > most)
			most = el->elements / 2;
	}
	if (rc == 0)
		rc = mget_reserve(m, d, most, err);
	for (size_t i = 0; i < n && rc == 0; i++) {
		redisReply *el = d->hs[i]->element[1];

		if (el->elements < 2)
			continue;
		if (append_mget(m, d, el, el->elements / 2) != REDIS_OK)
			rc = jo_rd_append_failed(m, k, err, "MGET pipeline");
		else
			k++;
	}
	/* each reply as it comes; after a failure the rest is still read (and
	 * dropped) unless the connection went, and with it every reply */
	d->nn = 0;
	jo_dynbuf_reset(&d->names);
	for (size_t i = 0; i < n && k > 0; i++) {
		redisReply *el = d->hs[i]->element[1], *r = NULL;

		if (el->elements < 2 || lost)
			continue;
		if (jo_rd_get_reply(m, &r) != REDIS_OK || !r) {
			lost = true;
			if (rc == 0)
				rc = jo_rd_conn_error(m, err, "pipelined MGET");
			continue;
		}
		if (rc == 0)
			rc = dira_page(m, d, i, el, r, cb, payload, err);
		freeReplyObject(r);
	}
	if (rc == 0)
		rc = dira_nils(m, d, cb, payload, err);
	/* the directories with more pages stay, in order */
	*left = 0;
	for (size_t i = 0; i < n; i++) {
		redisReply *cur = d->hs[i]->element[0];

		if (rc == 0 && !(cur->len == 1 && cur->str[0] == '0')) {
			d->dirs[*left] = d->dirs[i];
			d->idx[*left] = d->idx[i];
			memcpy(d->cursor[*left], cur->str, cur->len);
			d->cursor[*left][cur->len] = '\0';
			(*left)++;
		}
		freeReplyObject(d->hs[i]);
	}
	return rc;
}

static int r_readdir_attr(struct jo_meta *m, const uint64_t *dirs, size_t n,
			  jo_meta_dirent_attr_cb cb, void *payload, struct jo_err *err)
{
	struct dira d = { 0 };
	unsigned epoch = 0;
	size_t left = n;
	bool first = true;
	int rc = 0;

	d.dirs = malloc(n * sizeof(*d.dirs));
	d.idx = malloc(n * sizeof(*d.idx));
	d.cursor = malloc(n * sizeof(*d.cursor));
	d.hs = malloc(n * sizeof(*d.hs));
	jo_dynbuf_init(&d.names, JO_DYNBUF_UNLIMITED);
	if (!d.dirs || !d.idx || !d.cursor || !d.hs)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; rc == 0 && i < n; i++) {
		d.dirs[i] = dirs[i];
		d.idx[i] = i;
		strcpy(d.cursor[i], "0");
	}
	while (rc == 0 && left > 0) {
		rc = dira_round(m, &d, left, cb, payload, &left, err);
		/* a cursor of one server means nothing to another (a failover) */
		if (first)
			epoch = jo_rd_epoch(m);
		first = false;
		if (rc == 0 && jo_rd_epoch(m) != epoch)
			rc = jo_err_set(err, JO_ECONNECT, "redis %s: HSCAN: the connection was "
					"re-established during the scan (a failover?); it must start "
					"over", m->url.redacted);
	}
	free(d.dirs);
	free(d.idx);
	free(d.cursor);
	free(d.hs);
	free(d.kbuf);
	free(d.argv);
	free(d.lens);
	free(d.nil);
	free(d.nent);
	jo_dynbuf_release(&d.names);
	free(d.nfound);
	return rc;
}

/* ---- slice refs */

static int r_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs,
			   bool *ex, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "HGET %KsliceRef k%llu_%u", (unsigned long long)id, size);

	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_STRING) {
		char *end;
		char tmp[32];
		long long v;
		size_t n = r->len < sizeof(tmp) - 1 ? r->len : sizeof(tmp) - 1;
		memcpy(tmp, r->str, n);
		tmp[n] = '\0';
		v = strtoll(tmp, &end, 10);
		if (n == 0 || *end) {
			rc = jo_err_set(err, JO_EPROTO, "sliceRef k%llu_%u is not an integer",
					(unsigned long long)id, size);
		} else {
			*refs = v + 1;
			*ex = true;
		}
	} else {
		*refs = 1;
		*ex = false;
	}
	freeReplyObject(r);
	return rc;
}

static int parse_i64(const char *s, size_t n, int64_t *out)
{
	uint64_t v;
	bool neg = n > 0 && s[0] == '-';

	if (jo_parse_digits(s + neg, n - neg, &v) != 0 || v > (uint64_t)INT64_MAX)
		return -1;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* A zset score as integer seconds ("1732893301" or "1.7e9"). */
static int64_t parse_score(const redisReply *r)
{
	char tmp[64];
	size_t n = r->len < sizeof(tmp) - 1 ? r->len : sizeof(tmp) - 1;

	memcpy(tmp, r->str, n);
	tmp[n] = '\0';
	return (int64_t)strtod(tmp, NULL);
}

/*
 * HSCAN and ZSCAN pages come as field, value (member, score) pairs: pair()
 * handles one, and the scan ends at its first non-zero result.
 */
typedef int (*pair_fn)(const redisReply *k, const redisReply *v, void *ctx, struct jo_err *err);

struct pairs_ctx {
	pair_fn pair;
	void *ctx;
};

static int pairs_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct pairs_ctx *c = p;

	(void)m;
	for (size_t i = 0; i + 1 < n; i += 2) {
		int rc = c->pair(el[i], el[i + 1], c->ctx, err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int r_scan_pairs(struct jo_meta *m, const char *verb, const char *key, pair_fn pair,
			void *ctx, struct jo_err *err)
{
	struct pairs_ctx c = { pair, ctx };

	return r_scan(m, verb, key, NULL, pairs_page, &c, err);
}

/* The caller's callback and payload, for the pair scans below. */
struct cb_ctx {
	union {
		jo_meta_ref_cb ref;
		jo_meta_delfile_cb delf;
		jo_meta_delslices_cb dels;
		jo_meta_detached_cb det;
	} cb;
	void *payload;
};

/*
 * One scan of a pair collection (HSCAN/ZSCAN verb of key), each pair given
 * to pair() with the caller's callback in a cb_ctx's field.
 */
#define SCAN_PAIRS_FN(fn, cbtype, field, verb, key, pair)                              \
	static int fn(struct jo_meta *m, cbtype cb, void *payload, struct jo_err *err) \
	{                                                                              \
		struct cb_ctx c = { .cb.field = cb, .payload = payload };              \
		return r_scan_pairs(m, verb, key, pair, &c, err);                      \
	}

/* ---- sliceRef: HSCAN, field "k{id}_{size}", value the refs less one */

static int ref_pair(const redisReply *k, const redisReply *v, void *p, struct jo_err *err)
{
	const struct cb_ctx *c = p;
	uint64_t id, size;
	int64_t refs;

	if (parse_two(k->str, k->len, 'k', &id, &size) != 0 || size > UINT32_MAX)
		return 0; /* not a k{id}_{size} field */
	if (parse_i64(v->str, v->len, &refs) != 0)
		return jo_err_set(err, JO_EPROTO, "sliceRef %.*s: value is not an integer",
				  (int)k->len, k->str);
	return c->cb.ref(id, (uint32_t)size, refs + 1, c->payload);
}

SCAN_PAIRS_FN(r_scan_slice_refs, jo_meta_ref_cb, ref, "HSCAN", "sliceRef", ref_pair)

/* ---- delfiles: ZSCAN delfiles, member "{ino}:{len}" */

static int delf_pair(const redisReply *k, const redisReply *v, void *p, struct jo_err *err)
{
	const struct cb_ctx *c = p;
	const char *s = k->str;
	size_t len = k->len;
	const char *c1 = memchr(s, ':', len), *c2 = NULL, *last;
	uint64_t ino, flen = 1ULL << 30; /* legacy "ino" only: assume 1 GiB */
	bool bad;

	if (c1)
		c2 = memchr(c1 + 1, ':', (size_t)(s + len - c1 - 1));
	/* the length follows the last colon */
	last = c2 ? c2 : c1;
	bad = jo_parse_digits(s, c1 ? (size_t)(c1 - s) : len, &ino) != 0;
	if (!bad && last)
		bad = jo_parse_digits(last + 1, (size_t)(s + len - last - 1), &flen) != 0;
	if (bad)
		return jo_err_set(err, JO_EPROTO, "delfiles: bad member \"%.*s\"",
				  (int)(len > 64 ? 64 : len), s);
	return c->cb.delf(ino, flen, parse_score(v), c->payload);
}

SCAN_PAIRS_FN(r_scan_delfiles, jo_meta_delfile_cb, delf, "ZSCAN", "delfiles", delf_pair)

/* ---- delSlices: HSCAN, field "{newId}_{ts}" */

static int dels_pair(const redisReply *k, const redisReply *v, void *p, struct jo_err *err)
{
	const struct cb_ctx *c = p;
	const char *s = k->str;
	const char *us = memchr(s, '_', k->len);
	uint64_t id, ts;

	if (!us || jo_parse_digits(s, (size_t)(us - s), &id) != 0 ||
	    jo_parse_digits(us + 1, (size_t)(s + k->len - us - 1), &ts) != 0)
		return jo_err_set(err, JO_EPROTO, "delSlices: bad field \"%.*s\"",
				  (int)(k->len > 64 ? 64 : k->len), s);
	if (v->len % JO_DELSLICE_REC_LEN != 0)
		return jo_err_set(err, JO_EPROTO, "delSlices %.*s: %zu bytes, not a multiple "
				  "of 12", (int)k->len, s, v->len);
	return c->cb.dels(id, (int64_t)ts, (const uint8_t *)v->str, v->len, c->payload);
}

SCAN_PAIRS_FN(r_scan_delslices, jo_meta_delslices_cb, dels, "HSCAN", "delSlices", dels_pair)

/* ---- sessions: ZSCAN allSessions + pipelined HGET sessionInfos */

struct sess_ctx {
	jo_meta_session_cb cb;
	void *payload;
	uint64_t *sid;
	int64_t *exp;
	size_t kcap;
	redisReply **rs;
	size_t rscap;
};

static int sess_page(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct sess_ctx *c = p;
	size_t k = 0, got;
	int rc = 0;

	rc = keys_reserve(&c->sid, sizeof(*c->sid), &c->exp, sizeof(*c->exp), &c->kcap, n, err);
	if (rc != 0)
		return rc;
	if ((rc = rs_reserve(&c->rs, &c->rscap, n, err)) != 0)
		return rc;
	for (size_t i = 0; i + 1 < n; i += 2) {
		uint64_t sid;
		if (jo_parse_digits(el[i]->str, el[i]->len, &sid) != 0)
			continue;
		if (jo_rd_append(m, "HGET %KsessionInfos %b", el[i]->str, el[i]->len) !=
		    REDIS_OK) {
			return jo_rd_append_failed(m, k, err, "HGET pipeline");
		}
		c->sid[k] = sid;
		c->exp[k] = parse_score(el[i + 1]);
		k++;
	}
	if ((rc = rget_all(m, c->rs, k, err)) != 0)
		return rc;
	for (got = 0; got < k && rc == 0; got++) {
		redisReply *r = c->rs[got];
		rc = c->cb(c->sid[got], c->exp[got], r->type == REDIS_REPLY_STRING ? r->str : "",
			   c->payload);
		freeReplyObject(r);
	}
	rfree_from(c->rs, got, k);
	return rc;
}

static int r_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			   struct jo_err *err)
{
	struct sess_ctx c = { cb, payload, NULL, NULL, 0, NULL, 0 };
	int rc = r_scan(m, "ZSCAN", "allSessions", NULL, sess_page, &c, err);

	free(c.rs);
	free(c.sid);
	free(c.exp);
	return rc;
}

/* ---- sustained: SCAN MATCH session* then SSCAN each session{sid} */

struct sus_ctx {
	jo_meta_sustained_cb cb;
	void *payload;
	uint64_t sid;
	uint64_t *sids;
	size_t n, cap;
};

static int sus_add(struct sus_ctx *c, uint64_t sid, struct jo_err *err)
{
	if (jo_grow_array(&c->sids, &c->cap, c->n + 1, sizeof(*c->sids)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	c->sids[c->n++] = sid;
	return 0;
}

static int sus_members(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct sus_ctx *c = p;

	(void)m;
	for (size_t i = 0; i < n; i++) {
		uint64_t ino;
		int rc;
		if (jo_parse_digits(el[i]->str, el[i]->len, &ino) != 0)
			return jo_err_set(err, JO_EPROTO, "session%llu: bad member",
					  (unsigned long long)c->sid);
		rc = c->cb(c->sid, ino, c->payload);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* SSCAN the session{sid} set of each session in c->sids, once each. The
 * number of sessions is small; their member sets are streamed. */
static int sus_scan_sets(struct jo_meta *m, struct sus_ctx *c, struct jo_err *err)
{
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		char key[40];
		bool dup = false;

		for (size_t j = 0; j < i; j++)
			dup = dup || c->sids[j] == c->sids[i];
		if (dup)
			continue;
		c->sid = c->sids[i];
		snprintf(key, sizeof(key), "session%llu", (unsigned long long)c->sid);
		rc = r_scan(m, "SSCAN", key, NULL, sus_members, c, err);
	}
	return rc;
}

static int sus_keys(struct jo_meta *m, redisReply **el, size_t n, void *p, struct jo_err *err)
{
	struct sus_ctx *c = p;

	(void)m;
	for (size_t i = 0; i < n; i++) {
		uint64_t sid;
		int rc;
		if (el[i]->len <= 7 || memcmp(el[i]->str, "session", 7) != 0 ||
		    jo_parse_digits(el[i]->str + 7, el[i]->len - 7, &sid) != 0)
			continue;
		rc = sus_add(c, sid, err);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int r_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			    struct jo_err *err)
{
	struct sus_ctx c = { cb, payload, 0, NULL, 0, 0 };
	int rc = r_scan(m, "SCAN", NULL, "session*", sus_keys, &c, err);

	if (rc == 0)
		rc = sus_scan_sets(m, &c, err);
	free(c.sids);
	return rc;
}

/* ---- scan_sustained_registered: the session{sid} sets of the sessions in
 * allSessions (and the legacy sessions zset), without a SCAN of the keyspace */

/* ZSCAN pages are member, score, member, score, ... */
static int sus_sid_pair(const redisReply *k, const redisReply *v, void *p, struct jo_err *err)
{
	uint64_t sid;

	(void)v;
	if (k->type != REDIS_REPLY_STRING || jo_parse_digits(k->str, k->len, &sid) != 0)
		return 0;
	return sus_add(p, sid, err);
}

static int r_scan_sustained_registered(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
				       struct jo_err *err)
{
	struct sus_ctx c = { cb, payload, 0, NULL, 0, 0 };
	int rc = r_scan_pairs(m, "ZSCAN", "allSessions", sus_sid_pair, &c, err);

	if (rc == 0)
		rc = r_scan_pairs(m, "ZSCAN", "sessions", sus_sid_pair, &c, err);
	if (rc == 0)
		rc = sus_scan_sets(m, &c, err);
	free(c.sids);
	return rc;
}

/* ---- detachedNodes: ZSCAN */

static int det_pair(const redisReply *k, const redisReply *v, void *p, struct jo_err *err)
{
	const struct cb_ctx *c = p;
	uint64_t ino;

	if (jo_parse_digits(k->str, k->len, &ino) != 0)
		return jo_err_set(err, JO_EPROTO, "detachedNodes: bad member");
	return c->cb.det(ino, parse_score(v), c->payload);
}

SCAN_PAIRS_FN(r_scan_detached, jo_meta_detached_cb, det, "ZSCAN", "detachedNodes", det_pair)

/* ---- counters */

static int r_get_counter(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err)
{
	const char *key = name;
	int64_t add = 0, v = 0;
	redisReply *r;
	int rc;

	if (strcmp(name, "nextInode") == 0) {
		key = "nextinode";
		add = 1;
	} else if (strcmp(name, "nextChunk") == 0) {
		key = "nextchunk";
		add = 1;
	} else if (strcmp(name, "nextSession") == 0) {
		key = "nextsession";
	}
	r = jo_rd_cmd(m, err, &rc, "GET %K%s", key);
	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_STRING && parse_i64(r->str, r->len, &v) != 0)
		rc = jo_err_set(err, JO_EPROTO, "counter %s is not an integer", key);
	freeReplyObject(r);
	if (rc == 0)
		*out = v + add;
	return rc;
}

static const char *r_engine(const struct jo_meta *m)
{
	(void)m;
	return "redis";
}

static unsigned r_caps(const struct jo_meta *m)
{
	(void)m;
	return JO_META_CAP_ORPHAN_CHUNKS;
}

/* "Redis 7.0.15 (standalone at h:p)" from INFO server and the connection's
 * mode (an ACL may deny INFO: then "Redis"). */
static int r_describe(struct jo_meta *m, char **out, struct jo_err *err)
{
	redisReply *r = jo_rd_command(m, "INFO server");
	char buf[96] = "Redis", mode[600], all[720];

	if (!r)
		return jo_rd_conn_error(m, err, "INFO server");
	if (r->type == REDIS_REPLY_STRING) {
		const char *v = strstr(r->str, "redis_version:");
		if (v) {
			v += 14;
			snprintf(buf, sizeof(buf), "Redis %.*s", (int)strcspn(v, "\r\n"), v);
		}
	}
	freeReplyObject(r);
	jo_rd_mode(m, mode, sizeof(mode));
	snprintf(all, sizeof(all), "%s (%s)", buf, mode);
	*out = strdup(all);
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

const struct jo_meta_ops jo_meta_redis_ops = {
	.family = "redis",
	.engine = r_engine,
	.caps = r_caps,
	.open = r_open,
	.close = r_close,
	.describe = r_describe,
	.get_setting = r_get_setting,
	.lookup = r_lookup,
	.getattr = r_getattr,
	.getattr_many = r_getattr_many,
	.readdir = r_readdir,
	.readdir_attr = r_readdir_attr,
	.read_chunks = r_read_chunks,
	.scan_sustained_registered = r_scan_sustained_registered,
	.read_chunk = r_read_chunk,
	.list_chunks = r_list_chunks,
	.list_chunks_below = r_list_chunks_below,
	.scan_chunks = r_scan_chunks,
	.scan_inodes = r_scan_inodes,
	.get_slice_ref = r_get_slice_ref,
	.scan_slice_refs = r_scan_slice_refs,
	.scan_delfiles = r_scan_delfiles,
	.scan_delslices = r_scan_delslices,
	.scan_sessions = r_scan_sessions,
	.scan_sustained = r_scan_sustained,
	.scan_detached = r_scan_detached,
	.get_counter = r_get_counter,
	.mut = &jo_rd_mut_ops,
	.compact = &jo_rd_compact_ops,
};
