/*
 * tkv/read.c: the tkv family's core (connection, keys, transactions) and its
 * reads, on the key layout of spec juicefs-engines.md B.2.
 *
 * Every scan reads one snapshot of the store (etcd: one revision) page by
 * page: juicefs's own etcd scans filter by max_mod_revision and so skip keys
 * changed mid-scan (B.3), which can make a live chunk vanish from a gc
 * reference set; here a key changed mid-scan is read as it was when the scan
 * began, and a snapshot that the store compacted away mid-scan fails the
 * scan. Scan callbacks may read through the same handle.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/tkv/internal.h"

#include "common/dynbuf.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct jo_tkv *jo_tkv_of(struct jo_meta *m)
{
	return m->be;
}

/* ---------------------------------------------------------------- keys */

void jo_key_init(struct jo_key *k, struct jo_meta *m)
{
	struct jo_tkv *s = jo_tkv_of(m);

	memcpy(k->b, s->pfx, s->plen);
	k->n = s->plen;
	k->over = false;
}

void jo_key_raw(struct jo_key *k, const void *p, size_t n)
{
	if (k->over || k->n + n > sizeof(k->b)) {
		k->over = true;
		return;
	}
	memcpy(k->b + k->n, p, n);
	k->n += n;
}

void jo_key_ch(struct jo_key *k, char c)
{
	jo_key_raw(k, &c, 1);
}

void jo_key_str(struct jo_key *k, const char *s)
{
	jo_key_raw(k, s, strlen(s));
}

void jo_key_le64(struct jo_key *k, uint64_t v)
{
	uint8_t b[8];

	jo_put_le64(b, v);
	jo_key_raw(k, b, 8);
}

void jo_key_be64(struct jo_key *k, uint64_t v)
{
	uint8_t b[8];

	jo_put_be64(b, v);
	jo_key_raw(k, b, 8);
}

void jo_key_be32(struct jo_key *k, uint32_t v)
{
	uint8_t b[4];

	jo_put_be32(b, v);
	jo_key_raw(k, b, 4);
}

void jo_key_prefix_end(const struct jo_key *k, struct jo_key *end)
{
	*end = *k;
	while (end->n > 0) {
		if (end->b[end->n - 1] != 0xff) {
			end->b[end->n - 1]++;
			return;
		}
		end->n--;
	}
	/* every byte 0xff: no end (never happens below our prefix's 0xFD) */
	end->over = true;
}

void jo_tkv_attr_key(struct jo_key *k, struct jo_meta *m, uint64_t ino)
{
	jo_tkv_inode_key(k, m, ino, 'I');
}

void jo_tkv_inode_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, char what)
{
	jo_key_init(k, m);
	jo_key_ch(k, 'A');
	jo_key_le64(k, ino);
	jo_key_ch(k, what);
}

void jo_tkv_entry_key(struct jo_key *k, struct jo_meta *m, uint64_t parent, const char *name,
		      size_t nlen)
{
	jo_tkv_inode_key(k, m, parent, 'D');
	jo_key_raw(k, name, nlen);
}

void jo_tkv_chunk_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, uint32_t indx)
{
	jo_tkv_inode_key(k, m, ino, 'C');
	jo_key_be32(k, indx);
}

void jo_tkv_slice_key(struct jo_key *k, struct jo_meta *m, uint64_t id, uint32_t size)
{
	jo_key_init(k, m);
	jo_key_ch(k, 'K');
	jo_key_be64(k, id);
	jo_key_be32(k, size);
}

void jo_tkv_delfile_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, uint64_t length)
{
	jo_key_init(k, m);
	jo_key_ch(k, 'D');
	jo_key_le64(k, ino);
	jo_key_be64(k, length);
}

void jo_tkv_delslice_key(struct jo_key *k, struct jo_meta *m, int64_t ts, uint64_t id)
{
	jo_key_init(k, m);
	jo_key_ch(k, 'L');
	jo_key_be64(k, (uint64_t)ts);
	jo_key_be64(k, id);
}

void jo_tkv_counter_key(struct jo_key *k, struct jo_meta *m, const char *name)
{
	jo_key_init(k, m);
	jo_key_ch(k, 'C');
	jo_key_str(k, name);
}

/* ---------------------------------------------------------------- transactions */

static int key_ok(const struct jo_key *k, struct jo_err *err)
{
	return k->over ? jo_err_set(err, JO_EINVAL, "key longer than %d bytes", JO_TKV_KEY_MAX) : 0;
}

int jo_tx_get(struct jo_tx *tx, const struct jo_key *k, uint8_t **v, size_t *vl,
	      struct jo_err *err)
{
	*v = NULL;
	*vl = 0;
	if (key_ok(k, err))
		return err->code;
	return jo_tkv_of(tx->m)->tr->get(tx->t, k->b, k->n, v, vl, err);
}

int jo_tx_put(struct jo_tx *tx, const struct jo_key *k, const void *v, size_t vl,
	      struct jo_err *err)
{
	if (key_ok(k, err))
		return err->code;
	return jo_tkv_of(tx->m)->tr->put(tx->t, k->b, k->n, v, vl, err);
}

int jo_tx_del(struct jo_tx *tx, const struct jo_key *k, struct jo_err *err)
{
	if (key_ok(k, err))
		return err->code;
	return jo_tkv_of(tx->m)->tr->del(tx->t, k->b, k->n, err);
}

int jo_tx_del_prefix(struct jo_tx *tx, const struct jo_key *prefix, struct jo_err *err)
{
	struct jo_key end;

	jo_key_prefix_end(prefix, &end);
	if (key_ok(prefix, err) || key_ok(&end, err))
		return err->code;
	return jo_tkv_of(tx->m)->tr->del_range(tx->t, prefix->b, prefix->n, end.b, end.n, err);
}

static int seen_one(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	(void)k;
	(void)kl;
	(void)v;
	(void)vl;
	*(bool *)p = true;
	return 0;
}

int jo_tx_exists_prefix(struct jo_tx *tx, const struct jo_key *prefix, bool *out,
			struct jo_err *err)
{
	struct jo_key end;

	*out = false;
	jo_key_prefix_end(prefix, &end);
	if (key_ok(prefix, err) || key_ok(&end, err))
		return err->code;
	return jo_tkv_of(tx->m)->tr->scan(tx->t, prefix->b, prefix->n, end.b, end.n, 1, true, seen_one,
					  out, err);
}

int jo_tx_incr(struct jo_tx *tx, const struct jo_key *k, int64_t delta, int64_t *out,
	       struct jo_err *err)
{
	uint8_t *v, b[8];
	size_t vl;
	int64_t cur = 0;
	int rc = jo_tx_get(tx, k, &v, &vl, err);

	if (rc)
		return rc;
	if (v && vl != 8) {
		free(v);
		return jo_err_set(err, JO_EPROTO, "a counter value of %zu bytes (want 8): left alone",
				  vl);
	}
	if (v)
		cur = (int64_t)jo_le64(v);
	free(v);
	cur += delta;
	if (out)
		*out = cur;
	if (delta == 0)
		return 0;
	jo_put_le64(b, (uint64_t)cur);
	return jo_tx_put(tx, k, b, 8, err);
}

int jo_tkv_txn(struct jo_meta *m, jo_tx_fn fn, void *ctx, struct jo_err *err)
{
	const struct jo_kv_transport *tr = jo_tkv_of(m)->tr;

	for (int attempt = 0;; attempt++) {
		struct jo_tx tx = { m, NULL };
		int rc = tr->begin(jo_tkv_of(m)->c, &tx.t, err);

		if (rc)
			return rc;
		rc = fn(&tx, ctx, err);
		if (rc != 0) {
			tr->abort(tx.t);
			return rc;
		}
		rc = tr->commit(tx.t, err);
		if (rc != JO_ECONFLICT)
			return rc;
		if (attempt + 1 >= JO_TKV_TXN_TRIES)
			return jo_err_set(err, JO_EIO, "%s %s: a transaction kept conflicting with "
					  "other writers (%d attempts): retry later", tr->name,
					  m->url.redacted, JO_TKV_TXN_TRIES);
		/* juicefs sleeps a random time below (i+1)^2 ms */
		usleep((useconds_t)(rand() % ((attempt + 1) * (attempt + 1) * 1000 + 1)));
	}
}

struct get1 {
	const struct jo_key *k;
	uint8_t **v;
	size_t *vl;
};

static int get1_fn(struct jo_tx *tx, void *ctx, struct jo_err *err)
{
	struct get1 *g = ctx;

	return jo_tx_get(tx, g->k, g->v, g->vl, err);
}

int jo_tkv_get(struct jo_meta *m, const struct jo_key *k, uint8_t **v, size_t *vl,
	       struct jo_err *err)
{
	struct get1 g = { k, v, vl };

	/* a read-only transaction commits without a round trip */
	return jo_tkv_txn(m, get1_fn, &g, err);
}

int jo_tkv_scan_prefix(struct jo_meta *m, const struct jo_key *prefix, bool keys_only,
		       jo_kv_cb cb, void *payload, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);
	struct jo_key end;

	jo_key_prefix_end(prefix, &end);
	if (key_ok(prefix, err) || key_ok(&end, err))
		return err->code;
	return s->tr->snapshot_scan(s->c, prefix->b, prefix->n, end.b, end.n, keys_only,
				    s->pinned ? &s->pin_rev : NULL, cb, payload, err);
}

int jo_tkv_ref(struct jo_meta *m, uint64_t id, uint32_t size, bool *found, int64_t *v,
	       struct jo_err *err)
{
	struct jo_key k;
	uint8_t *b;
	size_t bl;
	int rc;

	jo_tkv_slice_key(&k, m, id, size);
	if ((rc = jo_tkv_get(m, &k, &b, &bl, err)) != 0)
		return rc;
	*found = b && bl == 8;
	*v = *found ? (int64_t)jo_le64(b) : 0;
	free(b);
	return 0;
}

/* ---------------------------------------------------------------- connection */

const struct jo_kv_transport *jo_tkv_transport_override;

static const struct jo_kv_transport *transport_for(const char *engine)
{
	(void)engine; /* etcd is the one transport so far (docs/tkv-transports.md) */
	return jo_tkv_transport_override ? jo_tkv_transport_override : &jo_kv_etcd;
}

static int t_open(struct jo_meta *m, struct jo_err *err)
{
	struct jo_tkv *s = calloc(1, sizeof(*s));
	const char *path = m->url.path ? m->url.path : "";
	struct jo_key k;
	uint8_t *v = NULL;
	size_t vl = 0;
	int rc;

	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	/* etcd keeps the URL path's leading '/' (spec B.1), then 0xFD */
	if (strlen(path) + 1 > sizeof(s->pfx)) {
		free(s);
		return jo_err_set(err, JO_EINVAL, "%s META-URL: the volume name is too long",
				  m->url.engine);
	}
	memcpy(s->pfx, path, strlen(path));
	s->plen = strlen(path);
	s->pfx[s->plen++] = 0xFD;
	s->tr = transport_for(m->url.engine);
	m->be = s;
	rc = s->tr->connect(&s->c, &m->url, err);
	if (rc)
		goto fail;
	/* a sync coordinator holds no volume: its records need no format */
	if (m->url.coordinator_only)
		return 0;
	jo_key_init(&k, m);
	jo_key_str(&k, "setting");
	rc = jo_tkv_get(m, &k, &v, &vl, err);
	free(v);
	if (rc == 0 && !v)
		rc = jo_err_set(err, JO_ENOTJFS, "%s %s has no \"setting\" key under its prefix: not a "
				"JuiceFS volume", s->tr->name, m->url.redacted);
	if (rc)
		goto fail;
	return 0;
fail:
	if (s->c)
		s->tr->disconnect(s->c);
	free(s);
	m->be = NULL;
	return rc;
}

static void t_close(struct jo_meta *m)
{
	struct jo_tkv *s = m->be;

	if (!s)
		return;
	s->tr->disconnect(s->c);
	free(s);
	m->be = NULL;
}

static const char *t_engine(const struct jo_meta *m)
{
	return ((const struct jo_tkv *)m->be)->tr->name;
}

static unsigned t_caps(const struct jo_meta *m)
{
	(void)m;
	return JO_META_CAP_SNAPSHOT_SCANS;
}

static int t_snapshot_begin(struct jo_meta *m, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);

	(void)err;
	s->pinned = true;
	s->pin_rev = 0;
	return 0;
}

static void t_snapshot_end(struct jo_meta *m)
{
	jo_tkv_of(m)->pinned = false;
}

static int no_key(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	(void)k, (void)kl, (void)v, (void)vl, (void)p;
	return 0;
}

/* The revision of now: the one a small snapshot scan reads at. */
static int t_snapshot_token(struct jo_meta *m, int64_t *token, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);
	bool pinned = s->pinned;
	int64_t rev = s->pin_rev;
	struct jo_key k;
	int rc;

	jo_tkv_counter_key(&k, m, "nextChunk");
	s->pinned = true;
	s->pin_rev = 0;
	rc = jo_tkv_scan_prefix(m, &k, true, no_key, NULL, err);
	*token = rc ? 0 : s->pin_rev;
	s->pinned = pinned;
	s->pin_rev = rev;
	if (!rc && *token <= 0)
		rc = jo_err_set(err, JO_EPROTO, "%s: a scan read at no revision", s->tr->name);
	return rc;
}

static int t_snapshot_begin_at(struct jo_meta *m, int64_t token, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);

	(void)err;
	s->pinned = true;
	s->pin_rev = token;
	return 0;
}

static int t_describe(struct jo_meta *m, char **out, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);

	return s->tr->version(s->c, out, err);
}

/* ---------------------------------------------------------------- reads */

static int t_get_setting(struct jo_meta *m, char **json, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_key_init(&k, m);
	jo_key_str(&k, "setting");
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v)
		return jo_err_set(err, JO_ENOTJFS, "%s %s has no format record", t_engine(m),
				  m->url.redacted);
	*json = malloc(vl + 1);
	if (!*json) {
		free(v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	memcpy(*json, v, vl);
	(*json)[vl] = '\0';
	free(v);
	return 0;
}

static int t_lookup(struct jo_meta *m, uint64_t parent, const char *name, uint64_t *ino,
		    uint8_t *type, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_entry_key(&k, m, parent, name, strlen(name));
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v)
		return jo_err_set(err, JO_ENOTFOUND, "no entry \"%s\" in directory %llu", name,
				  (unsigned long long)parent);
	if (vl < 9) {
		free(v);
		return jo_err_set(err, JO_EPROTO, "entry \"%s\" of directory %llu is %zu bytes", name,
				  (unsigned long long)parent, vl);
	}
	*type = v[0];
	*ino = jo_be64(v + 1);
	free(v);
	return 0;
}

static int t_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_attr_key(&k, m, ino);
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v)
		return jo_err_set(err, JO_ENOTFOUND, "inode %llu does not exist",
				  (unsigned long long)ino);
	rc = jo_meta_decode_attr(v, vl, out, err);
	free(v);
	return rc;
}

/* A scan's state: the callback of the caller, the layout offsets. */
struct scanctx {
	struct jo_meta *m;
	size_t plen;
	void *cb;
	void *payload;
	struct jo_err *err;
	uint64_t u;          /* a filter argument (e.g. an inode, an index bound) */
	uint32_t *out;       /* list_chunks */
	size_t n, cap;
};

static int dirent_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	size_t off = c->plen + 10;

	if (kl <= off || vl < 9)
		return 0; /* not an entry of this layout */
	return ((jo_meta_dirent_cb)c->cb)((const char *)k + off, kl - off, jo_be64(v + 1), v[0],
					  c->payload);
}

static int t_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		     struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };
	struct jo_key k;

	jo_tkv_inode_key(&k, m, dir, 'D');
	return jo_tkv_scan_prefix(m, &k, false, dirent_cb, &c, err);
}

static int check_recs(size_t n, uint64_t ino, uint32_t indx, struct jo_err *err)
{
	if (n % JO_SLICE_REC_LEN != 0)
		return jo_err_set(err, JO_EPROTO, "chunk %llu/%u: %zu bytes, not a list of 24-byte "
				  "slice records", (unsigned long long)ino, indx, n);
	return 0;
}

static int t_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			size_t *len, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_chunk_key(&k, m, ino, indx);
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (v && (rc = check_recs(vl, ino, indx, err)) != 0) {
		free(v);
		return rc;
	}
	if (v && vl == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	*len = v ? vl : 0;
	return 0;
}

static int index_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	uint32_t indx;

	(void)v;
	(void)vl;
	if (kl != c->plen + 14)
		return 0;
	indx = jo_be32(k + c->plen + 10);
	if (indx >= c->u)
		return 0;
	if (jo_grow_array(&c->out, &c->cap, c->n + 1, sizeof(*c->out)))
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	c->out[c->n++] = indx;
	return 0;
}

static int list_below(struct jo_meta *m, uint64_t ino, uint64_t nidx, uint32_t **out, size_t *n,
		      struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, NULL, NULL, err, nidx, NULL, 0, 0 };
	struct jo_key k;
	int rc;

	*out = NULL;
	*n = 0;
	jo_tkv_inode_key(&k, m, ino, 'C');
	rc = jo_tkv_scan_prefix(m, &k, true, index_cb, &c, err);
	if (rc) {
		free(c.out);
		return rc;
	}
	/* key order is index order: be32 indexes */
	*out = c.out;
	*n = c.n;
	return 0;
}

static int t_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			 struct jo_err *err)
{
	return list_below(m, ino, UINT64_MAX, out, n, err);
}

static int t_list_chunks_below(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
			       size_t *n, struct jo_err *err)
{
	return list_below(m, ino, nidx, out, n, err);
}

/* Scan all of 'A' and keep the keys of one kind (B.2: byte 9 after 'A'). */
static int all_a(struct jo_meta *m, jo_kv_cb cb, struct scanctx *c, bool keys_only,
		 struct jo_err *err)
{
	struct jo_key k;

	jo_key_init(&k, m);
	jo_key_ch(&k, 'A');
	return jo_tkv_scan_prefix(m, &k, keys_only, cb, c, err);
}

static int chunk_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	const uint8_t *b = k + c->plen;
	uint64_t ino;
	uint32_t indx;
	int rc;

	if (kl != c->plen + 14 || b[9] != 'C')
		return 0;
	ino = jo_le64(b + 1);
	indx = jo_be32(b + 10);
	if ((rc = check_recs(vl, ino, indx, c->err)) != 0)
		return rc;
	return ((jo_meta_chunk_cb)c->cb)(ino, indx, v, vl, c->payload);
}

static int t_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload,
			 struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return all_a(m, chunk_cb, &c, false, err);
}

/*
 * Parts of the 'A' keys by the 8 bytes after 'A' (an inode's little-endian
 * bytes): the low bytes of the inodes in use spread them evenly, cut on the
 * first two bytes; with fewer than 256 inodes on the first byte up to the
 * counter's.
 */
static int t_chunk_cuts(struct jo_meta *m, size_t n, uint64_t *cuts, size_t *nparts,
			struct jo_err *err)
{
	int64_t next = 0;
	int rc = m->ops->get_counter(m, "nextInode", &next, err);

	if (rc)
		return rc;
	if (next > 0 && next < 256)
		jo_meta_even_cuts((uint64_t)next, (uint64_t)1 << 56, n, cuts, nparts);
	else
		jo_meta_even_cuts(65536, (uint64_t)1 << 48, n, cuts, nparts);
	return 0;
}

static int t_scan_chunks_range(struct jo_meta *m, uint64_t from, uint64_t to,
			       jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	struct jo_tkv *s = jo_tkv_of(m);
	struct scanctx c = { m, s->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };
	struct jo_key a, start, end;

	/* a key past 'A' + be64(x) by more bytes sorts after it: [from, to) exactly */
	jo_key_init(&a, m);
	jo_key_ch(&a, 'A');
	start = a;
	jo_key_be64(&start, from);
	if (to == UINT64_MAX) {
		jo_key_prefix_end(&a, &end);
	} else {
		end = a;
		jo_key_be64(&end, to);
	}
	if (key_ok(&start, err) || key_ok(&end, err))
		return err->code;
	return s->tr->snapshot_scan(s->c, start.b, start.n, end.b, end.n, false,
				    s->pinned ? &s->pin_rev : NULL, chunk_cb, &c, err);
}

static int inode_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	const uint8_t *b = k + c->plen;
	struct jo_attr a;
	int rc;

	if (kl != c->plen + 10 || b[9] != 'I')
		return 0;
	if ((rc = jo_meta_decode_attr(v, vl, &a, c->err)) != 0)
		return jo_err_wrap(c->err, "inode %llu", (unsigned long long)jo_le64(b + 1));
	return ((jo_meta_inode_cb)c->cb)(jo_le64(b + 1), &a, c->payload);
}

static int t_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload,
			 struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return all_a(m, inode_cb, &c, false, err);
}

static int t_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs,
			   bool *ex, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_slice_key(&k, m, id, size);
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	*ex = v != NULL;
	*refs = 1;  /* absent: one reference (the Redis convention, B.2) */
	if (v && vl != 8)
		rc = jo_err_set(err, JO_EPROTO, "slice %llu_%u: reference value of %zu bytes",
				(unsigned long long)id, size, vl);
	else if (v)
		*refs = (int64_t)jo_le64(v) + 1;
	free(v);
	return rc;
}

static int prefix_scan(struct jo_meta *m, const char *family, jo_kv_cb cb, struct scanctx *c,
		       struct jo_err *err)
{
	struct jo_key k;

	jo_key_init(&k, m);
	jo_key_str(&k, family);
	return jo_tkv_scan_prefix(m, &k, false, cb, c, err);
}

static int ref_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	const uint8_t *b = k + c->plen;

	if (kl != c->plen + 13)
		return 0;
	if (vl != 8)
		return jo_err_set(c->err, JO_EPROTO, "slice %llu_%u: reference value of %zu bytes",
				  (unsigned long long)jo_be64(b + 1), jo_be32(b + 9), vl);
	return ((jo_meta_ref_cb)c->cb)(jo_be64(b + 1), jo_be32(b + 9), (int64_t)jo_le64(v) + 1,
				       c->payload);
}

static int t_scan_slice_refs(struct jo_meta *m, jo_meta_ref_cb cb, void *payload,
			     struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "K", ref_cb, &c, err);
}

static int delfile_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	const uint8_t *b = k + c->plen;

	if (kl != c->plen + 17)
		return 0;
	return ((jo_meta_delfile_cb)c->cb)(jo_le64(b + 1), jo_be64(b + 9),
					   vl >= 8 ? (int64_t)jo_be64(v) : 0, c->payload);
}

static int t_scan_delfiles(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload,
			   struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "D", delfile_cb, &c, err);
}

static int delslices_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	const uint8_t *b = k + c->plen;

	if (kl != c->plen + 17)
		return 0;
	if (vl % JO_DELSLICE_REC_LEN != 0)
		return jo_err_set(c->err, JO_EPROTO, "delayed slices %llu: %zu bytes, not a multiple "
				  "of 12", (unsigned long long)jo_be64(b + 9), vl);
	return ((jo_meta_delslices_cb)c->cb)(jo_be64(b + 9), (int64_t)jo_be64(b + 1), v, vl,
					     c->payload);
}

static int t_scan_delslices(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			    struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "L", delslices_cb, &c, err);
}

static int session_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;
	uint64_t sid;
	struct jo_key ik;
	uint8_t *info = NULL;
	size_t il = 0;
	char *js;
	int rc;

	if (kl != c->plen + 10)
		return 0;
	sid = jo_be64(k + c->plen + 2);
	jo_key_init(&ik, c->m);
	jo_key_str(&ik, "SI");
	jo_key_be64(&ik, sid);
	if ((rc = jo_tkv_get(c->m, &ik, &info, &il, c->err)) != 0)
		return rc;
	js = malloc(il + 1);
	if (!js) {
		free(info);
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	}
	if (il)
		memcpy(js, info, il);
	js[il] = '\0';
	free(info);
	rc = ((jo_meta_session_cb)c->cb)(sid, vl >= 8 ? (int64_t)jo_be64(v) : 0, js, c->payload);
	free(js);
	return rc;
}

static int t_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			   struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "SE", session_cb, &c, err);
}

static int sustained_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;

	(void)v;
	(void)vl;
	if (kl != c->plen + 18)
		return 0;
	return ((jo_meta_sustained_cb)c->cb)(jo_be64(k + c->plen + 2), jo_le64(k + c->plen + 10),
					     c->payload);
}

static int t_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			    struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "SS", sustained_cb, &c, err);
}

static int detached_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct scanctx *c = p;

	if (kl != c->plen + 9)
		return 0;
	return ((jo_meta_detached_cb)c->cb)(jo_le64(k + c->plen + 1),
					    vl >= 8 ? (int64_t)jo_be64(v) : 0, c->payload);
}

static int t_scan_detached(struct jo_meta *m, jo_meta_detached_cb cb, void *payload,
			   struct jo_err *err)
{
	struct scanctx c = { m, jo_tkv_of(m)->plen, (void *)cb, payload, err, 0, NULL, 0, 0 };

	return prefix_scan(m, "N", detached_cb, &c, err);
}

static int t_get_counter(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err)
{
	/* increment counters are le64; the election timestamps be64 (B.2) */
	bool le = !strcmp(name, "nextInode") || !strcmp(name, "nextChunk") ||
		  !strcmp(name, "nextSession") || !strcmp(name, "nextTrash") ||
		  !strcmp(name, "usedSpace") || !strcmp(name, "totalInodes");
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_counter_key(&k, m, name);
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v) {
		/* what `juicefs format` writes */
		*out = !strcmp(name, "nextInode") ? 2 : !strcmp(name, "nextChunk") ? 1 : 0;
		return 0;
	}
	if (vl != 8)
		rc = jo_err_set(err, JO_EPROTO, "counter %s: %zu bytes (want 8)", name, vl);
	else
		*out = (int64_t)(le ? jo_le64(v) : jo_be64(v));
	free(v);
	return rc;
}

const struct jo_meta_ops jo_meta_tkv_ops = {
	.family = "tkv",
	.engine = t_engine,
	.caps = t_caps,
	.open = t_open,
	.close = t_close,
	.describe = t_describe,
	.snapshot_begin = t_snapshot_begin,
	.snapshot_end = t_snapshot_end,
	.snapshot_token = t_snapshot_token,
	.snapshot_begin_at = t_snapshot_begin_at,
	.get_setting = t_get_setting,
	.lookup = t_lookup,
	.getattr = t_getattr,
	.readdir = t_readdir,
	.read_chunk = t_read_chunk,
	.list_chunks = t_list_chunks,
	.list_chunks_below = t_list_chunks_below,
	.scan_chunks = t_scan_chunks,
	.chunk_cuts = t_chunk_cuts,
	.scan_chunks_range = t_scan_chunks_range,
	.scan_inodes = t_scan_inodes,
	.get_slice_ref = t_get_slice_ref,
	.scan_slice_refs = t_scan_slice_refs,
	.scan_delfiles = t_scan_delfiles,
	.scan_delslices = t_scan_delslices,
	.scan_sessions = t_scan_sessions,
	.scan_sustained = t_scan_sustained,
	.scan_detached = t_scan_detached,
	.get_counter = t_get_counter,
	.mut = &jo_tkv_mut_ops,
	.compact = &jo_tkv_compact_ops,
};
