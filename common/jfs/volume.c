/* A JuiceFS volume: metadata + object store, and reading file bytes (spec §8.2). */
#include "common/jfs/jfs.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/object/object.h"

int jo_vol_open(struct jo_vol **out, const struct jo_vol_opts *opts, struct jo_err *err)
{
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	struct jo_vol *v;
	int rc;

	*out = NULL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	{
		struct jo_meta_open_opts mo = { .password = opts->meta_password,
						.redis_password = opts->meta_redis_password,
						.sentinel_password = opts->meta_sentinel_password,
						.read_only = opts->meta_read_only };

		rc = jo_meta_open_with(&v->meta, opts->meta_url, &mo, err);
	}
	if (rc)
		goto fail;
	rc = jo_meta_load_format(v->meta, &v->fmt, err);
	if (rc)
		goto fail;
	v->block_size = (uint32_t)v->fmt.block_size_kib * 1024u;
	if (v->fmt.block_size_kib <= 0 || v->block_size > (64u << 20)) {
		rc = jo_err_set(err, JO_EPROTO, "format record has a bad BlockSize %d",
				v->fmt.block_size_kib);
		goto fail;
	}
	v->compress = jo_compress_parse(v->fmt.compression);
	if (v->compress < 0) {
		rc = jo_err_set(err, JO_EUNSUPPORTED, "volume uses unsupported compression '%s'",
				v->fmt.compression);
		goto fail;
	}
	oo.storage = v->fmt.storage;
	oo.bucket = opts->bucket ? opts->bucket : v->fmt.bucket;
	oo.access_key = opts->access_key ? opts->access_key : v->fmt.access_key;
	oo.secret_key = opts->secret_key ? opts->secret_key : v->fmt.secret_key;
	oo.session_token = opts->session_token ? opts->session_token : v->fmt.session_token;
	oo.region = opts->region;
	oo.insecure = opts->insecure;
	oo.addressing = opts->addressing;
	oo.list_v1 = opts->list_v1;
	oo.shards = v->fmt.shards;
	oo.list_temp = opts->list_temp_files;
	oo.list_links = opts->list_links;
	if (opts->max_conns > 0)
		oo.max_conns = opts->max_conns;
	if (opts->retries_set)
		oo.retries = opts->retries;
	rc = jo_obj_open(&v->obj, &oo, err);
	if (rc) {
		jo_err_wrap(err, "object store of volume '%s'", v->fmt.name);
		goto fail;
	}
	{
		/* block writes are create-only: they may ask the store how, under NAME/ */
		char prefix[300];

		snprintf(prefix, sizeof(prefix), "%s/", v->fmt.name);
		rc = jo_obj_create_probe(v->obj, prefix, err);
		if (rc)
			goto fail;
	}
	*out = v;
	return 0;
fail:
	jo_vol_close(v);
	return rc;
}

void jo_vol_close(struct jo_vol *v)
{
	if (!v)
		return;
	jo_meta_close(v->meta);
	if (!v->is_clone) {
		jo_obj_close(v->obj);
		jo_format_release(&v->fmt);
	}
	free(v);
}

int jo_vol_clone(struct jo_vol *v, struct jo_vol **out, struct jo_err *err)
{
	struct jo_vol *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	*c = *v;
	c->is_clone = true;
	c->meta = NULL;
	rc = jo_meta_dup(v->meta, &c->meta, err);
	if (rc) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int jo_vol_reload_format(struct jo_vol *v, struct jo_err *err)
{
	struct jo_format f = { 0 };
	int rc = jo_meta_load_format(v->meta, &f, err);

	if (rc)
		return rc;
	/* only the mutable settings change; layout fields are immutable */
	v->fmt.trash_days = f.trash_days;
	v->fmt.changelog = f.changelog;
	jo_format_release(&f);
	return 0;
}

int jo_vol_block_key(const struct jo_vol *v, char *buf, size_t cap, uint64_t id,
		     uint32_t indx, uint32_t bsize)
{
	return jo_block_key(buf, cap, v->fmt.name, v->fmt.hash_prefix, id, indx, bsize);
}

/* A decoded block kept by a reader. */
struct cblock {
	uint8_t *buf;        /* block_size bytes, allocated on first use */
	uint64_t id;
	uint32_t indx;
	uint64_t used;       /* LRU clock */
	bool valid;
};

/*
 * Reader state: a few decoded blocks are kept (least recently used goes),
 * since reads are mostly sequential and compaction revisits the blocks of
 * old slices segment after segment.
 */
struct reader {
	struct jo_vol *v;
	jo_vol_write_cb cb;
	void *payload;
	struct cblock *slots;
	int nslots;
	uint64_t clock;
	uint8_t *block;      /* the block load_block() made current */
	uint8_t *zeros;
};

struct jo_vol_reader {
	struct reader r;
};

static int reader_init(struct reader *r, struct jo_vol *v, int nslots)
{
	memset(r, 0, sizeof(*r));
	r->v = v;
	r->nslots = nslots > 0 ? nslots : 1;
	r->slots = calloc((size_t)r->nslots, sizeof(*r->slots));
	return r->slots ? 0 : JO_ENOMEM;
}

static void reader_release(struct reader *r)
{
	for (int i = 0; r->slots && i < r->nslots; i++)
		free(r->slots[i].buf);
	free(r->slots);
	free(r->zeros);
	r->slots = NULL;
	r->zeros = NULL;
}

static int emit_zeros(struct reader *r, uint64_t n)
{
	while (n) {
		size_t k = n < 65536 ? (size_t)n : 65536;
		int rc = r->cb(r->zeros, k, r->payload);

		if (rc)
			return rc;
		n -= k;
	}
	return 0;
}

struct bufsink {
	uint8_t *dst;
	size_t cap, len;
};

static int bufsink_write(const void *data, size_t len, void *payload)
{
	struct bufsink *b = payload;

	if (len > b->cap - b->len)
		return JO_EPROTO;
	memcpy(b->dst + b->len, data, len);
	b->len += len;
	return 0;
}

/* Fetch block indx of slice (id, size) whole, decoded; r->block points at it. */
static int load_block(struct reader *r, uint64_t id, uint32_t size, uint32_t indx,
		      struct jo_err *err)
{
	struct jo_vol *v = r->v;
	uint32_t bsize = jo_block_len(size, v->block_size, indx);
	struct cblock *slot = &r->slots[0];
	char key[512];
	uint8_t *raw = NULL;
	size_t rawlen = 0;
	int rc;

	for (int i = 0; i < r->nslots; i++) {
		struct cblock *c = &r->slots[i];

		if (c->valid && c->id == id && c->indx == indx) {
			c->used = ++r->clock;
			r->block = c->buf;
			return 0;
		}
		if (!c->valid || c->used < slot->used)
			slot = c;
	}
	if (!slot->buf) {
		slot->buf = malloc(v->block_size);
		if (!slot->buf)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	slot->valid = false;
	r->block = slot->buf;
	jo_vol_block_key(v, key, sizeof(key), id, indx, bsize);
	if (v->compress == JO_COMPRESS_NONE) {
		struct bufsink b = { r->block, bsize, 0 };
		struct jo_obj_get_opts go = { .offset = 0, .length = -1 };

		rc = jo_obj_get(v->obj, key, &go, bufsink_write, &b, err);
		if (rc == JO_EPROTO && b.len == bsize)
			return jo_err_set(err, JO_EPROTO, "block '%s' is longer than its key says", key);
		if (rc)
			return rc == JO_ENOTFOUND ? jo_err_set(err, rc, "block '%s' is missing", key)
						  : jo_err_wrap(err, "read block '%s'", key);
		if (b.len != bsize)
			return jo_err_set(err, JO_EPROTO, "block '%s' has %zu bytes, expected %u",
					  key, b.len, bsize);
	} else {
		/* compressed blocks hold at most a little more than bsize */
		rc = jo_obj_get_buf(v->obj, key, 0, -1, (size_t)bsize + bsize / 8 + 65536,
				    &raw, &rawlen, err);
		if (rc)
			return rc == JO_ENOTFOUND ? jo_err_set(err, rc, "block '%s' is missing", key)
						  : jo_err_wrap(err, "read block '%s'", key);
		rc = jo_block_decode(v->compress, raw, rawlen, r->block, bsize, err);
		free(raw);
		if (rc)
			return jo_err_wrap(err, "block '%s'", key);
	}
	slot->valid = true;
	slot->id = id;
	slot->indx = indx;
	slot->used = ++r->clock;
	return 0;
}

int jo_vol_read_block(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t indx, uint32_t lo,
		      uint32_t hi, uint8_t *dst, struct jo_err *err)
{
	uint32_t bsize;
	char key[512];
	int rc;

	if ((uint64_t)indx * v->block_size >= size)
		return jo_err_set(err, JO_EPROTO, "slice %llu has no block %u",
				  (unsigned long long)id, indx);
	bsize = jo_block_len(size, v->block_size, indx);
	if (lo >= hi || hi > bsize)
		return jo_err_set(err, JO_EINVAL, "bytes %u..%u of a block of %u", lo, hi, bsize);
	if (v->fmt.has_encrypt_key)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "volume '%s' encrypts its data: not supported", v->fmt.name);
	jo_vol_block_key(v, key, sizeof(key), id, indx, bsize);
	if (v->compress == JO_COMPRESS_NONE) {
		/* the bytes asked for, and no more (a ranged GET unless it is all of it) */
		struct bufsink b = { dst, hi - lo, 0 };
		struct jo_obj_get_opts go = { .offset = lo, .length = lo == 0 && hi == bsize ? -1 : (int64_t)(hi - lo) };
		struct jo_obj_info info = { 0 };

		go.info = &info;
		rc = jo_obj_get(v->obj, key, &go, bufsink_write, &b, err);
		if (rc == JO_EPROTO && b.len == hi - lo)
			return jo_err_set(err, JO_EPROTO, "block '%s' is longer than its key says", key);
		if (rc)
			return rc == JO_ENOTFOUND ? jo_err_set(err, rc, "block '%s' is missing", key)
						  : jo_err_wrap(err, "read block '%s'", key);
		if (b.len != hi - lo || (info.size && info.size != bsize))
			return jo_err_set(err, JO_EPROTO, "block '%s' has %llu bytes, expected %u", key,
					  (unsigned long long)(info.size ? info.size : b.len), bsize);
		return 0;
	} else {
		/* a compressed block is read and decoded whole */
		uint8_t *raw = NULL, *whole = dst;
		size_t rawlen = 0;

		rc = jo_obj_get_buf(v->obj, key, 0, -1, (size_t)bsize + bsize / 8 + 65536, &raw, &rawlen,
				    err);
		if (rc)
			return rc == JO_ENOTFOUND ? jo_err_set(err, rc, "block '%s' is missing", key)
						  : jo_err_wrap(err, "read block '%s'", key);
		if (lo != 0 || hi != bsize) {
			whole = malloc(bsize);
			if (!whole) {
				free(raw);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
		}
		rc = jo_block_decode(v->compress, raw, rawlen, whole, bsize, err);
		free(raw);
		if (!rc && whole != dst)
			memcpy(dst, whole + lo, hi - lo);
		if (whole != dst)
			free(whole);
		return rc ? jo_err_wrap(err, "block '%s'", key) : 0;
	}
}

/* Emit slice bytes [from, to) of slice (id, size). */
static int emit_slice(struct reader *r, uint64_t id, uint32_t size, uint64_t from,
		      uint64_t to, struct jo_err *err)
{
	uint32_t bs = r->v->block_size;

	if (to > size)
		return jo_err_set(err, JO_EPROTO,
				  "slice %llu: record reaches byte %llu past its size %u",
				  (unsigned long long)id, (unsigned long long)to, size);
	while (from < to) {
		uint32_t indx = (uint32_t)(from / bs);
		uint64_t bstart = (uint64_t)indx * bs;
		uint64_t bend = bstart + jo_block_len(size, bs, indx);
		uint64_t e = to < bend ? to : bend;
		int rc;

		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "interrupted");
		rc = load_block(r, id, size, indx, err);
		if (rc)
			return rc;
		rc = r->cb(r->block + (from - bstart), (size_t)(e - from), r->payload);
		if (rc)
			return jo_err_set(err, rc, "write failed");
		from = e;
	}
	return 0;
}

static int read_chunk_range(struct reader *r, uint64_t ino, uint32_t indx, uint64_t lo,
			    uint64_t hi, struct jo_err *err)
{
	uint8_t *raw = NULL;
	size_t rawlen = 0, nrec = 0, nseg = 0;
	struct jo_slice *recs = NULL, *segs = NULL;
	uint64_t at = lo;
	int rc;

	rc = jo_meta_read_chunk(r->v->meta, ino, indx, &raw, &rawlen, err);
	if (rc)
		return rc;
	rc = jo_slices_decode(raw, rawlen, &recs, &nrec, err);
	if (rc) {
		jo_err_wrap(err, "inode %llu chunk %u", (unsigned long long)ino, indx);
		goto out;
	}
	rc = jo_chunk_visible(recs, nrec, &segs, &nseg);
	if (rc) {
		jo_chunk_err(err, rc, ino, indx);
		goto out;
	}
	for (size_t i = 0; i < nseg && at < hi; i++) {
		const struct jo_slice *s = &segs[i];
		uint64_t ss = s->pos, se = (uint64_t)s->pos + s->len;
		uint64_t b, e;

		if (se <= at)
			continue;
		if (ss >= hi)
			break;
		b = at > ss ? at : ss;
		e = hi < se ? hi : se;
		if (b > at) {
			rc = emit_zeros(r, b - at);
			if (rc)
				goto out;
		}
		if (s->id == 0)
			rc = emit_zeros(r, e - b);
		else
			rc = emit_slice(r, s->id, s->size, s->off + (b - ss), s->off + (e - ss), err);
		if (rc)
			goto out;
		at = e;
	}
	if (at < hi)
		rc = emit_zeros(r, hi - at);
out:
	free(raw);
	free(recs);
	free(segs);
	return rc;
}

int jo_vol_read(struct jo_vol *v, uint64_t ino, uint64_t off, uint64_t len,
		jo_vol_write_cb cb, void *payload, struct jo_err *err)
{
	struct reader r;
	struct jo_attr attr;
	uint64_t end;
	int rc;

	if (v->fmt.has_encrypt_key)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "volume '%s' encrypts its data (%s): reading encrypted blocks is not supported",
				  v->fmt.name, v->fmt.encrypt_algo && *v->fmt.encrypt_algo ?
				  v->fmt.encrypt_algo : "aes256gcm-rsa");
	rc = jo_meta_getattr(v->meta, ino, &attr, err);
	if (rc)
		return rc;
	if (attr.type != JO_TYPE_FILE)
		return jo_err_set(err, JO_EINVAL, "inode %llu is not a regular file",
				  (unsigned long long)ino);
	if (off >= attr.length)
		return 0;
	end = len > attr.length - off ? attr.length : off + len;
	rc = reader_init(&r, v, 2);
	r.cb = cb;
	r.payload = payload;
	if (!rc)
		r.zeros = calloc(1, 65536);
	if (rc || !r.zeros) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	while (off < end) {
		uint32_t indx = (uint32_t)(off >> JO_CHUNK_BITS);
		uint64_t base = (uint64_t)indx << JO_CHUNK_BITS;
		uint64_t hi = end - base < JO_CHUNK_SIZE ? end - base : JO_CHUNK_SIZE;

		rc = read_chunk_range(&r, ino, indx, off - base, hi, err);
		if (rc)
			goto out;
		off = base + hi;
	}
out:
	reader_release(&r);
	return rc;
}

int jo_vol_reader_new(struct jo_vol *v, int cache_blocks, struct jo_vol_reader **out,
		      struct jo_err *err)
{
	struct jo_vol_reader *vr;

	*out = NULL;
	if (v->fmt.has_encrypt_key)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "volume '%s' encrypts its data: not supported", v->fmt.name);
	vr = calloc(1, sizeof(*vr));
	if (!vr || reader_init(&vr->r, v, cache_blocks)) {
		free(vr);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	*out = vr;
	return 0;
}

void jo_vol_reader_free(struct jo_vol_reader *vr)
{
	if (!vr)
		return;
	reader_release(&vr->r);
	free(vr);
}

int jo_vol_reader_slice(struct jo_vol_reader *vr, uint64_t id, uint32_t size, uint32_t off,
			uint32_t len, jo_vol_write_cb cb, void *payload, struct jo_err *err)
{
	vr->r.cb = cb;
	vr->r.payload = payload;
	return emit_slice(&vr->r, id, size, off, (uint64_t)off + len, err);
}

int jo_vol_read_slice(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t off,
		      uint32_t len, jo_vol_write_cb cb, void *payload, struct jo_err *err)
{
	struct jo_vol_reader *vr;
	int rc = jo_vol_reader_new(v, 1, &vr, err);

	if (rc)
		return rc;
	rc = jo_vol_reader_slice(vr, id, size, off, len, cb, payload, err);
	jo_vol_reader_free(vr);
	return rc;
}

/*
 * Uploads of one slice's blocks: the caller fills and encodes block after
 * block while up to UPLOADERS threads PUT the encoded ones (a bounded queue
 * of UPLOADERS blocks in between), so reading the sources and writing the
 * new slice overlap instead of taking turns.
 */
#define UPLOADERS 4

struct up_job {
	char key[512];
	uint32_t indx;
	uint8_t *enc;
	size_t len;
};

struct uploads {
	struct jo_obj *obj;
	pthread_mutex_t mu;
	pthread_cond_t more, room;
	struct up_job q[UPLOADERS];
	size_t head, n;
	bool closed;
	uint32_t done;           /* blocks uploaded */
	bool *written;           /* [indx]: this call created that block's object */
	int rc;                  /* first failure */
	struct jo_err err;
};

static void *uploader(void *arg)
{
	struct uploads *u = arg;

	for (;;) {
		struct up_job j;
		struct jo_err e = { 0 };
		int rc;

		pthread_mutex_lock(&u->mu);
		while (u->n == 0 && !u->closed)
			pthread_cond_wait(&u->more, &u->mu);
		if (u->n == 0) {
			pthread_mutex_unlock(&u->mu);
			return NULL;
		}
		j = u->q[u->head];
		u->head = (u->head + 1) % UPLOADERS;
		u->n--;
		pthread_cond_signal(&u->room);
		rc = u->rc; /* after a failure the rest is dropped */
		pthread_mutex_unlock(&u->mu);
		if (rc == 0) {
			/*
			 * A new slice id is fresh: its keys are free. One that is
			 * taken means something is badly wrong (a reused id,
			 * another writer); the object there is not ours to
			 * replace, nor to delete when this slice is given up.
			 */
			struct jo_obj_put_opts po = { .create_only = true };

			rc = jo_obj_put(u->obj, j.key, j.enc, j.len, &po, &e);
			if (rc)
				jo_err_wrap(&e, "write block '%s'", j.key);
		}
		free(j.enc);
		pthread_mutex_lock(&u->mu);
		if (rc == 0) {
			u->done++;
			u->written[j.indx] = true;
		} else if (u->rc == 0) {
			u->rc = rc;
			u->err = e;
		}
		pthread_mutex_unlock(&u->mu);
	}
}

/* Queue one encoded block (ownership of enc passes). Non-zero once an upload failed. */
static int uploads_push(struct uploads *u, const char *key, uint32_t indx, uint8_t *enc,
			size_t len)
{
	int rc;

	pthread_mutex_lock(&u->mu);
	while (u->n == UPLOADERS && u->rc == 0)
		pthread_cond_wait(&u->room, &u->mu);
	rc = u->rc;
	if (rc == 0) {
		struct up_job *j = &u->q[(u->head + u->n) % UPLOADERS];

		snprintf(j->key, sizeof(j->key), "%s", key);
		j->indx = indx;
		j->enc = enc;
		j->len = len;
		u->n++;
		pthread_cond_signal(&u->more);
		enc = NULL;
	}
	pthread_mutex_unlock(&u->mu);
	free(enc);
	return rc;
}

/*
 * Do not leave a half-written slice behind: delete the blocks this write
 * created, and only those (a key found taken held someone else's object).
 * Best effort; leakcheck reports any survivor.
 */
static void drop_written(struct jo_vol *v, uint64_t id, uint32_t size, const bool *written)
{
	uint32_t nb = jo_slice_nblocks(size, v->block_size), n = 0;
	char (*keys)[512] = calloc(nb, sizeof(*keys));
	const char **kp = calloc(nb, sizeof(*kp));
	int *results = calloc(nb, sizeof(*results));
	struct jo_err derr = { 0 };

	if (keys && kp && results) {
		for (uint32_t i = 0; i < nb; i++) {
			if (!written[i])
				continue;
			jo_vol_block_key(v, keys[n], sizeof(keys[n]), id, i,
					 jo_block_len(size, v->block_size, i));
			kp[n] = keys[n];
			n++;
		}
		(void)jo_obj_delete_batch(v->obj, kp, n, results, &derr); /* best effort, see above */
	}
	free(keys);
	free(kp);
	free(results);
}

int jo_vol_write_slice(struct jo_vol *v, uint64_t id, uint32_t size, jo_vol_source_cb src,
		       void *payload, struct jo_err *err)
{
	uint32_t bs = v->block_size, nb = jo_slice_nblocks(size, bs);
	struct uploads u;
	pthread_t th[UPLOADERS];
	int nth = 0, rc = 0;
	uint8_t *buf;

	if (v->fmt.has_encrypt_key)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "volume '%s' encrypts its data: not supported", v->fmt.name);
	memset(&u, 0, sizeof(u));
	buf = malloc(bs);
	u.written = calloc(nb ? nb : 1, sizeof(*u.written));
	if (!buf || !u.written) {
		free(buf);
		free(u.written);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	u.obj = v->obj;
	pthread_mutex_init(&u.mu, NULL);
	pthread_cond_init(&u.more, NULL);
	pthread_cond_init(&u.room, NULL);
	for (; nth < UPLOADERS && (uint32_t)nth < nb; nth++)
		if (jo_thread_start(&th[nth], uploader, &u) != 0)
			break;
	if (nth == 0)
		rc = jo_err_set(err, JO_ENOMEM, "cannot start an upload thread");
	for (uint32_t i = 0; i < nb && !rc; i++) {
		uint32_t blen = jo_block_len(size, bs, i);
		uint8_t *enc = NULL;
		size_t enclen = 0;
		char key[512];

		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "interrupted");
			break;
		}
		rc = src(buf, i * bs, blen, payload, err);
		if (!rc)
			rc = jo_block_encode(v->compress, buf, blen, &enc, &enclen, err);
		if (!rc) {
			jo_vol_block_key(v, key, sizeof(key), id, i, blen);
			if (uploads_push(&u, key, i, enc, enclen) != 0)
				break; /* the uploader's error is reported below */
		}
	}
	pthread_mutex_lock(&u.mu);
	u.closed = true;
	pthread_cond_broadcast(&u.more);
	pthread_mutex_unlock(&u.mu);
	for (int t = 0; t < nth; t++)
		pthread_join(th[t], NULL);
	if (!rc && u.rc) {
		rc = u.rc;
		*err = u.err;
	}
	pthread_cond_destroy(&u.more);
	pthread_cond_destroy(&u.room);
	pthread_mutex_destroy(&u.mu);
	free(buf);
	if (rc && u.done)
		drop_written(v, id, size, u.written);
	free(u.written);
	return rc;
}

int jo_vol_delete_slice(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t *deleted_out,
			struct jo_err *err)
{
	uint32_t nb = jo_slice_nblocks(size, v->block_size), ok = 0;
	char **keys;
	int *results;
	int rc = 0;

	if (deleted_out)
		*deleted_out = 0;
	if (!nb)
		return 0;
	keys = calloc(nb, sizeof(*keys));
	results = calloc(nb, sizeof(*results));
	if (!keys || !results) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < nb; i++) {
		keys[i] = malloc(512);
		if (!keys[i]) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
		jo_vol_block_key(v, keys[i], 512, id, i, jo_block_len(size, v->block_size, i));
	}
	rc = jo_obj_delete_batch(v->obj, (const char *const *)keys, nb, results, err);
	if (rc)
		goto out;
	for (uint32_t i = 0; i < nb; i++) {
		if (results[i] == 0 || results[i] == JO_ENOTFOUND) {
			ok++;
		} else if (!rc) {
			rc = jo_err_set(err, results[i], "delete block '%s' failed (%s)", keys[i],
					jo_err_name(results[i]));
		}
	}
	if (deleted_out)
		*deleted_out = ok;
out:
	if (keys)
		for (uint32_t i = 0; i < nb; i++)
			free(keys[i]);
	free(keys);
	free(results);
	return rc;
}
