/*
 * walk.c: the namespace as rows (walk.h). Four sorted streams keyed by the
 * big-endian inode number (so byte order is inode order) meet in one merge:
 *   edge:  [ino 8][where 1][parent 8][depth 4][type 1][path]
 *   attr:  [ino 8][packed struct jo_attr (attr_pack)]
 *   chunk: [ino 8][indx 4][records 4][stored 8][24-byte records (SLICES only)]
 *   sus:   [ino 8]
 * The frontier of one level is [ino 8][path] in a sort of its own.
 */
#include "common/walk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/mem.h"

enum { S_EDGE, S_ATTR, S_CHUNK, S_SUS, S_N };

#define EDGE_HDR (8 + 1 + 8 + 4 + 1)
/* directories listed in one jo_meta_readdir_attr() call */
#define WALK_BATCH 32
/* room for this many chunk requests at first (it grows with a batch) */
#define CHUNK_BATCH 4096
#define CHUNK_HDR (8 + 4 + 4 + 8)

struct walk {
	struct jo_meta *m;
	const struct jo_walk_opts *o;
	struct jo_walk_stats *st;
	struct jo_err *err;
	struct jo_xsort_opts xo;
	struct jo_xsort *xs[S_N];
	struct jo_xsort *next;          /* the frontier being filled */
	uint8_t *buf;                   /* record scratch */
	size_t cap;
	/* the directory being listed */
	const uint8_t *dpath;
	size_t dlen;
	uint64_t dino;
	uint32_t depth;                 /* of its entries */
	uint8_t where;
	/* the family lists entries with their attributes (jo_meta_readdir_attr):
	 * no scan of every inode is needed; it reads a batch of directories at once */
	bool with_attr;
	size_t nbatch;
	uint64_t batch_ino[WALK_BATCH];
	size_t batch_off[WALK_BATCH], batch_len[WALK_BATCH];
	uint8_t *bpaths;
	size_t bplen, bpcap;
	/* with_attr and JO_WALK_CHUNKS: the regular files met, whose chunks are
	 * read in pipelined batches (no scan of every chunk of the volume) once
	 * their directories' listing returned (its callbacks may not use the
	 * handle): 16 bytes for each file of a batch of directories */
	struct jo_meta_chunk_req *creq;
	size_t ncreq, ccap;
	/* slices of one chunk, sorted for the distinct count */
	struct jo_slice *recs;
	size_t nrecs;
};

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload);

static int scratch(struct walk *w, size_t n)
{
	uint8_t *b;

	if (n <= w->cap)
		return 0;
	b = realloc(w->buf, n);
	if (!b)
		return jo_err_set(w->err, JO_ENOMEM, "out of memory");
	w->buf = b;
	w->cap = n;
	return 0;
}

static int add_edge(struct walk *w, uint64_t ino, uint8_t where, uint64_t parent, uint32_t depth,
		    uint8_t type, const uint8_t *dir, size_t dlen, const char *name, size_t nlen)
{
	/* "/" + name below the root, else dir + "/" + name; the root itself: dir */
	size_t base = dlen == 1 && dir[0] == '/' ? 0 : dlen;
	size_t plen = name ? base + 1 + nlen : dlen;
	uint8_t *p;
	int rc;

	if ((rc = scratch(w, EDGE_HDR + plen)) != 0)
		return rc;
	p = w->buf;
	jo_put_be64(p, ino);
	p[8] = where;
	jo_put_be64(p + 9, parent);
	jo_put_be32(p + 17, depth);
	p[21] = type;
	if (name) {
		memcpy(p + EDGE_HDR, dir, base);
		p[EDGE_HDR + base] = '/';
		memcpy(p + EDGE_HDR + base + 1, name, nlen);
	} else {
		memcpy(p + EDGE_HDR, dir, dlen);
	}
	if ((rc = jo_xsort_add(w->xs[S_EDGE], p, EDGE_HDR + plen, w->err)) != 0)
		return rc;
	if (type != JO_TYPE_DIR)
		return 0;
	/* the frontier record [ino][path] is the tail of the same buffer */
	jo_put_be64(p + EDGE_HDR - 8, ino);
	return jo_xsort_add(w->next, p + EDGE_HDR - 8, 8 + plen, w->err);
}

static int on_dirent(const char *name, size_t nlen, uint64_t ino, uint8_t type, void *payload)
{
	struct walk *w = payload;

	return add_edge(w, ino, w->where, w->dino, w->depth, type, w->dpath, w->dlen, name, nlen);
}

/*
 * zigzag of a difference: small magnitudes short (0, -1, 1 -> 0, 1, 2).
 * Unsigned arithmetic wraps, so any two int64 make the trip exactly.
 */
static uint64_t zz_diff(int64_t a, int64_t b)
{
	uint64_t d = (uint64_t)a - (uint64_t)b;

	return (d << 1) ^ (0 - (d >> 63));
}

static int64_t unzz_add(uint64_t z, int64_t b)
{
	uint64_t d = (z >> 1) ^ (0 - (z & 1));

	return (int64_t)((uint64_t)b + d);
}

/*
 * An attribute record, packed: type, flags, then varints (times as zigzag
 * differences from mtime): about 30 bytes instead of the struct's 72, the
 * largest of the sorted streams halved.
 */
#define ATTR_PACKED_MAX (2 + 13 * 10)

static size_t attr_pack(uint8_t *p, const struct jo_attr *a)
{
	const uint64_t v[13] = { a->mode, a->uid, a->gid, a->nlink, a->rdev, zz_diff(a->mtime, 0),
				 zz_diff(a->atime, a->mtime), zz_diff(a->ctime, a->mtime), a->atimensec,
				 a->mtimensec, a->ctimensec, a->length, a->parent };
	size_t n = 2;

	p[0] = a->type;
	p[1] = a->flags;
	for (size_t i = 0; i < 13; i++)
		n += jo_put_uvarint(p + n, v[i]);
	return n;
}

/* false if p[0..len) is not one whole packed record */
static bool attr_unpack(const uint8_t *p, size_t len, struct jo_attr *a)
{
	uint64_t v[13];
	size_t n = 2, k;

	if (len < 2)
		return false;
	for (size_t i = 0; i < 13; i++, n += k)
		if ((k = jo_get_uvarint(p + n, len - n, &v[i])) == 0)
			return false;
	if (n != len)
		return false;
	memset(a, 0, sizeof(*a));
	a->type = p[0];
	a->flags = p[1];
	a->mode = (uint16_t)v[0];
	a->uid = (uint32_t)v[1];
	a->gid = (uint32_t)v[2];
	a->nlink = (uint32_t)v[3];
	a->rdev = (uint32_t)v[4];
	a->mtime = unzz_add(v[5], 0);
	a->atime = unzz_add(v[6], a->mtime);
	a->ctime = unzz_add(v[7], a->mtime);
	a->atimensec = (uint32_t)v[8];
	a->mtimensec = (uint32_t)v[9];
	a->ctimensec = (uint32_t)v[10];
	a->length = v[11];
	a->parent = v[12];
	return true;
}

static int add_attr(struct walk *w, uint64_t ino, const struct jo_attr *a)
{
	uint8_t rec[8 + ATTR_PACKED_MAX];

	jo_put_be64(rec, ino);
	return jo_xsort_add(w->xs[S_ATTR], rec, 8 + attr_pack(rec + 8, a), w->err);
}

static int read_chunks(struct walk *w)
{
	size_t n = w->ncreq;

	w->ncreq = 0;
	return jo_meta_read_chunks(w->m, w->creq, n, on_chunk, w, w->err);
}

static int on_dirent_attr(size_t di, const char *name, size_t nlen, uint64_t ino, uint8_t type,
			  const struct jo_attr *a, void *payload)
{
	struct walk *w = payload;
	int rc;

	/* an entry whose inode is gone already: its path is dropped in the merge */
	if (a && (rc = add_attr(w, ino, a)) != 0)
		return rc;
	if (a && a->type == JO_TYPE_FILE && (w->o->flags & JO_WALK_CHUNKS)) {
		/* replies may be in flight: the chunks are read after the listing */
		if (jo_grow_array(&w->creq, &w->ccap, w->ncreq + 1, sizeof(*w->creq)))
			return jo_err_set(w->err, JO_ENOMEM, "out of memory");
		w->creq[w->ncreq].ino = ino;
		w->creq[w->ncreq].nidx = (uint32_t)((a->length + JO_CHUNK_SIZE - 1) >> JO_CHUNK_BITS);
		w->ncreq++;
	}
	w->dino = w->batch_ino[di];
	w->dpath = w->bpaths + w->batch_off[di];
	w->dlen = w->batch_len[di];
	return on_dirent(name, nlen, ino, type, payload);
}

/* List the batched directories (one call), or each with a plain readdir. */
static int list_batch(struct walk *w)
{
	size_t n = w->nbatch;
	int rc = 0;

	w->nbatch = 0;
	w->bplen = 0;
	if (n == 0)
		return 0;
	if (w->with_attr) {
		rc = jo_meta_readdir_attr(w->m, w->batch_ino, n, on_dirent_attr, w, w->err);
		if (rc != JO_EUNSUPPORTED) {
			if (rc == 0)
				w->st->dirs_read += n;
			if (rc == 0 && w->ncreq)
				rc = read_chunks(w);
			return rc;
		}
		/* refused before any entry: list and scan the inodes instead */
		w->with_attr = false;
		jo_err_clear(w->err);
		rc = 0;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		w->dino = w->batch_ino[i];
		w->dpath = w->bpaths + w->batch_off[i];
		w->dlen = w->batch_len[i];
		rc = jo_meta_readdir(w->m, w->dino, on_dirent, w, w->err);
		if (rc == 0)
			w->st->dirs_read++;
	}
	return rc;
}

/* Queue a directory of the frontier; list the batch when it is full. */
static int list_dir(struct walk *w, uint64_t ino, const uint8_t *path, size_t len)
{
	if (jo_grow_array(&w->bpaths, &w->bpcap, w->bplen + len, 1))
		return jo_err_set(w->err, JO_ENOMEM, "out of memory");
	memcpy(w->bpaths + w->bplen, path, len);
	w->batch_ino[w->nbatch] = ino;
	w->batch_off[w->nbatch] = w->bplen;
	w->batch_len[w->nbatch] = len;
	w->bplen += len;
	/* a plain readdir gains nothing from waiting */
	if (++w->nbatch == WALK_BATCH || !w->with_attr)
		return list_batch(w);
	return 0;
}

static int new_sort(struct walk *w, struct jo_xsort **out)
{
	return jo_xsort_new(out, &w->xo, w->err);
}

/*
 * Breadth first from (root, path): level by level, each level's directories
 * from a sort of their own, the next level's added to a new one meanwhile.
 * emit_root: the root is a row too (the trash root is not).
 */
static int walk_tree(struct walk *w, uint64_t root, const char *path, uint8_t where,
		     bool emit_root)
{
	struct jo_xsort *cur = NULL;
	struct jo_xsort_stats xst;
	int rc;

	w->next = NULL;
	if ((rc = new_sort(w, &w->next)) != 0)
		return rc;
	if (emit_root)
		rc = add_edge(w, root, where, 0, 0, JO_TYPE_DIR, (const uint8_t *)path, strlen(path),
			      NULL, 0);
	else if ((rc = scratch(w, 8 + strlen(path))) == 0) {
		jo_put_be64(w->buf, root);
		memcpy(w->buf + 8, path, strlen(path));
		rc = jo_xsort_add(w->next, w->buf, 8 + strlen(path), w->err);
	}
	for (uint32_t depth = 1; rc == 0; depth++) {
		const void *rec;
		size_t len;

		jo_xsort_free(cur);
		cur = w->next;
		w->next = NULL;
		jo_xsort_get_stats(cur, &xst);
		if (xst.records == 0)
			break;
		if ((rc = jo_xsort_finish(cur, w->err)) != 0 || (rc = new_sort(w, &w->next)) != 0)
			break;
		w->where = where;
		w->depth = depth;
		while ((rc = jo_xsort_next(cur, &rec, &len, w->err)) == 1) {
			if (jo_cancelled()) {
				rc = jo_err_set(w->err, JO_ECANCELED, "interrupted");
				break;
			}
			rc = list_dir(w, jo_be64(rec), (const uint8_t *)rec + 8, len - 8);
			if (rc != 0)
				break;
		}
		if (rc == 0)
			rc = list_batch(w);
		if (rc != 0)
			break;
	}
	if (cur) {
		jo_xsort_get_stats(cur, &xst);
		w->st->tmp_bytes += xst.tmp_bytes;
		if (xst.peak_mem > w->st->peak_sort_mem)
			w->st->peak_sort_mem = xst.peak_mem;
	}
	jo_xsort_free(cur);
	jo_xsort_free(w->next);
	w->next = NULL;
	return rc;
}

static int on_inode(uint64_t ino, const struct jo_attr *a, void *payload)
{
	return add_attr(payload, ino, a);
}

static int cmp_slice(const void *a, const void *b)
{
	const struct jo_slice *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->size < y->size ? -1 : x->size > y->size;
}

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	struct walk *w = payload;
	size_t n = len / JO_SLICE_REC_LEN, k = 0, extra;
	uint64_t stored = 0;
	int rc;

	if (len % JO_SLICE_REC_LEN)
		return jo_err_set(w->err, JO_EPROTO, "chunk %llu/%u: %zu bytes, not a multiple of 24",
				  (unsigned long long)ino, indx, len);
	if (n > w->nrecs) {
		struct jo_slice *r = realloc(w->recs, n * sizeof(*r));

		if (!r)
			return jo_err_set(w->err, JO_ENOMEM, "out of memory");
		w->recs = r;
		w->nrecs = n;
	}
	for (size_t i = 0; i < n; i++) {
		jo_slice_decode(raw + i * JO_SLICE_REC_LEN, &w->recs[k]);
		if (w->recs[k].id)
			k++;
	}
	qsort(w->recs, k, sizeof(*w->recs), cmp_slice);
	for (size_t i = 0; i < k; i++)
		if (i == 0 || cmp_slice(&w->recs[i - 1], &w->recs[i]) != 0)
			stored += w->recs[i].size;
	extra = (w->o->flags & JO_WALK_SLICES) ? len : 0;
	if ((rc = scratch(w, CHUNK_HDR + extra)) != 0)
		return rc;
	jo_put_be64(w->buf, ino);
	jo_put_be32(w->buf + 8, indx);
	jo_put_be32(w->buf + 12, (uint32_t)k);
	jo_put_be64(w->buf + 16, stored);
	memcpy(w->buf + CHUNK_HDR, raw, extra);
	w->st->chunks_read++;
	if (jo_cancelled())
		return jo_err_set(w->err, JO_ECANCELED, "interrupted");
	return jo_xsort_add(w->xs[S_CHUNK], w->buf, CHUNK_HDR + extra, w->err);
}

static int on_sustained(uint64_t sid, uint64_t ino, void *payload)
{
	struct walk *w = payload;
	uint8_t rec[8];
	struct jo_attr a;
	int rc;

	(void)sid;
	/* no inode scan: read its attributes here (there are few such inodes) */
	if (w->with_attr) {
		rc = jo_meta_getattr(w->m, ino, &a, w->err);
		if (rc == JO_ENOTFOUND) {
			jo_err_clear(w->err);
			return 0;
		}
		if (rc != 0 || (rc = add_attr(w, ino, &a)) != 0)
			return rc;
	}
	jo_put_be64(rec, ino);
	return jo_xsort_add(w->xs[S_SUS], rec, sizeof(rec), w->err);
}

/* ---------------------------------------------------------------- the merge */

struct head {
	struct jo_xsort *s;
	const uint8_t *rec;
	size_t len;
	bool live;
};

static int head_next(struct head *h, struct jo_err *err)
{
	const void *rec;
	int rc;

	if (!h->s) {
		h->live = false;
		return 0;
	}
	rc = jo_xsort_next(h->s, &rec, &h->len, err);
	if (rc < 0)
		return rc;
	h->live = rc == 1;
	h->rec = rec;
	return 0;
}

static bool head_at(const struct head *h, uint64_t ino)
{
	return h->live && jo_be64(h->rec) == ino;
}

/* One inode's edges and chunk records, copied out of the sorts. */
struct group {
	uint8_t *edges;         /* concatenated [u32 len][edge record] */
	size_t elen, ecap;
	uint8_t *recs;          /* concatenated [indx 4][n 4][24-byte records] */
	size_t rlen, rcap;
};

static int grow(uint8_t **b, size_t *cap, size_t need, struct jo_err *err)
{
	if (jo_grow_array_from(b, cap, need, 1, 256))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int emit(struct walk *w, uint64_t ino, const struct jo_attr *a, struct group *g,
		bool sustained, const uint64_t fig[3])
{
	struct jo_walk_row r = { .ino = ino, .attr = *a };
	uint32_t keep = a->type == JO_TYPE_DIR ? 1 : (a->nlink ? a->nlink : 1);
	enum jo_walk_where first = JO_WALK_IN_TREE;
	int rc = 0;

	if (a->type == JO_TYPE_FILE) {
		r.chunks = fig[0];
		r.slice_records = fig[1];
		r.stored_bytes = fig[2];
	}
	if (g->elen == 0) {
		if (!sustained)
			return 0;
		r.path = r.name = "";
		r.where = first = JO_WALK_OPEN_UNLINKED;
		w->st->rows++;
		rc = w->o->row(&r, w->o->payload);
	}
	for (size_t off = 0; off < g->elen && rc == 0;) {
		uint32_t len = jo_be32(g->edges + off);
		const uint8_t *e = g->edges + off + 4;
		const char *slash;

		off += 4 + len;
		if (r.link >= keep) {
			w->st->extra_paths++;
			continue;
		}
		r.where = (enum jo_walk_where)e[8];
		r.parent = jo_be64(e + 9);
		r.depth = jo_be32(e + 17);
		r.path = (const char *)e + EDGE_HDR;
		r.path_len = len - EDGE_HDR;
		if (r.depth == 0 && r.parent == 0)
			r.parent = a->parent;
		for (slash = r.path + r.path_len; slash > r.path && slash[-1] != '/'; slash--)
			;
		r.name = slash;
		r.name_len = r.path_len - (size_t)(r.name - r.path);
		if (r.link == 0)
			first = r.where;
		w->st->rows++;
		rc = w->o->row(&r, w->o->payload);
		r.link++;
	}
	if (rc || !(w->o->flags & JO_WALK_SLICES) || !w->o->slice)
		return rc;
	for (size_t off = 0; off < g->rlen && rc == 0;) {
		uint32_t indx = jo_be32(g->recs + off), n = jo_be32(g->recs + off + 4);
		struct jo_slice s;

		off += 8;
		for (uint32_t i = 0; i < n && rc == 0; i++, off += JO_SLICE_REC_LEN) {
			jo_slice_decode(g->recs + off, &s);
			rc = w->o->slice(ino, first, indx, s.pos, s.id, s.size, s.off, s.len,
					 w->o->payload);
		}
	}
	return rc;
}

static int merge(struct walk *w)
{
	struct head h[S_N] = { 0 };
	struct group g = { 0 };
	int rc = 0;

	for (int i = 0; i < S_N && rc == 0; i++) {
		h[i].s = w->xs[i];
		if (h[i].s && (rc = jo_xsort_finish(h[i].s, w->err)) == 0)
			rc = head_next(&h[i], w->err);
	}
	while (rc == 0) {
		uint64_t ino = UINT64_MAX, fig[3] = { 0, 0, 0 }, prev_indx;
		struct jo_attr a;
		bool have_attr = false, sustained = false, any = false;
		size_t prev = SIZE_MAX, prevlen = 0;

		for (int i = 0; i < S_N; i++)
			if (h[i].live && jo_be64(h[i].rec) <= ino) {
				ino = jo_be64(h[i].rec);
				any = true;
			}
		if (!any)
			break;
		if (jo_cancelled()) {
			rc = jo_err_set(w->err, JO_ECANCELED, "interrupted");
			break;
		}
		g.elen = g.rlen = 0;
		/* attributes: the first (a Redis SCAN may return a key twice) */
		while (rc == 0 && head_at(&h[S_ATTR], ino)) {
			if (!have_attr)
				have_attr = attr_unpack(h[S_ATTR].rec + 8, h[S_ATTR].len - 8, &a);
			rc = head_next(&h[S_ATTR], w->err);
		}
		/* paths, without exact duplicates (HSCAN may repeat an entry) */
		while (rc == 0 && head_at(&h[S_EDGE], ino)) {
			size_t len = h[S_EDGE].len;

			if (len >= EDGE_HDR && !(prev != SIZE_MAX && prevlen == len &&
						  !memcmp(g.edges + prev, h[S_EDGE].rec, len))) {
				if ((rc = grow(&g.edges, &g.ecap, g.elen + 4 + len, w->err)) != 0)
					break;
				jo_put_be32(g.edges + g.elen, (uint32_t)len);
				memcpy(g.edges + g.elen + 4, h[S_EDGE].rec, len);
				prev = g.elen + 4;
				prevlen = len;
				g.elen += 4 + len;
			}
			rc = head_next(&h[S_EDGE], w->err);
		}
		prev_indx = UINT64_MAX;
		while (rc == 0 && head_at(&h[S_CHUNK], ino)) {
			const uint8_t *c = h[S_CHUNK].rec;
			size_t raw = h[S_CHUNK].len - CHUNK_HDR;

			/* a chunk read twice (a hard-linked file listed in two
			 * directories, or a SCAN that returned a key twice): once */
			/* a chunk past the file's length (left by a truncate) is not
			 * part of the file, as juicefs dump reads it, on every engine */
			if (jo_be32(c + 8) == prev_indx ||
			    (have_attr && (uint64_t)jo_be32(c + 8) << JO_CHUNK_BITS >= a.length)) {
				rc = head_next(&h[S_CHUNK], w->err);
				continue;
			}
			prev_indx = jo_be32(c + 8);
			fig[0]++;
			fig[1] += jo_be32(c + 12);
			fig[2] += jo_be64(c + 16);
			if (raw) {
				if ((rc = grow(&g.recs, &g.rcap, g.rlen + 8 + raw, w->err)) != 0)
					break;
				memcpy(g.recs + g.rlen, c + 8, 4);
				jo_put_be32(g.recs + g.rlen + 4, (uint32_t)(raw / JO_SLICE_REC_LEN));
				memcpy(g.recs + g.rlen + 8, c + CHUNK_HDR, raw);
				g.rlen += 8 + raw;
			}
			rc = head_next(&h[S_CHUNK], w->err);
		}
		while (rc == 0 && head_at(&h[S_SUS], ino)) {
			sustained = true;
			rc = head_next(&h[S_SUS], w->err);
		}
		if (rc)
			break;
		if (!have_attr) {
			/* a path whose inode is gone: removed after the walk saw it */
			for (size_t off = 0; off < g.elen; off += 4 + jo_be32(g.edges + off))
				w->st->vanished++;
			continue;
		}
		rc = emit(w, ino, &a, &g, sustained, fig);
	}
	free(g.edges);
	free(g.recs);
	return rc;
}

/* "/a//b/" -> "/a/b"; "" -> "/". malloc'd or NULL. */
static char *clean_path(const char *p)
{
	size_t n = p ? strlen(p) : 0, k = 0;
	char *o = malloc(n + 2);

	if (!o)
		return NULL;
	o[k++] = '/';
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '/' && o[k - 1] == '/')
			continue;
		o[k++] = p[i];
	}
	if (k > 1 && o[k - 1] == '/')
		k--;
	o[k] = '\0';
	return o;
}

static int scans(struct walk *w, const char *root, struct jo_err *err)
{
	unsigned f = w->o->flags;
	uint64_t ino;
	struct jo_attr a;
	int rc;

	if ((rc = jo_meta_resolve(w->m, root, &ino, err)) != 0 ||
	    (rc = jo_meta_getattr(w->m, ino, &a, err)) != 0)
		return jo_err_wrap(err, "walk %s", root);
	if (a.type != JO_TYPE_DIR)
		return jo_err_set(err, JO_EINVAL, "walk %s: not a directory", root);
	w->with_attr = true;
	if ((rc = add_attr(w, ino, &a)) != 0 ||
	    (rc = walk_tree(w, ino, root, JO_WALK_IN_TREE, true)) != 0)
		return rc;
	if ((f & JO_WALK_TRASH) &&
	    (rc = walk_tree(w, JO_TRASH_INODE, "/.trash", JO_WALK_IN_TRASH, false)) != 0)
		return rc;
	if (!w->with_attr && (rc = jo_meta_scan_inodes(w->m, on_inode, w, err)) != 0)
		return rc;
	/* with the entries' attributes the files' chunks were read batch by batch */
	if ((f & JO_WALK_CHUNKS) && !w->with_attr &&
	    (rc = jo_meta_scan_chunks(w->m, on_chunk, w, err)) != 0)
		return rc;
	/* a report: the registered sessions' sets (no SCAN of a Redis keyspace) */
	if ((f & JO_WALK_SUSTAINED) &&
	    (rc = jo_meta_scan_sustained_registered(w->m, on_sustained, w, err)) != 0)
		return rc;
	if (w->o->in_snapshot)
		rc = w->o->in_snapshot(w->m, w->o->payload, err);
	return rc;
}

int jo_walk_run(struct jo_meta *m, const struct jo_walk_opts *opts, struct jo_walk_stats *stats,
		struct jo_err *err)
{
	struct jo_walk_stats dummy;
	struct jo_walk_opts o = *opts;
	struct walk w = { .m = m, .o = &o, .err = err };
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	char *root = NULL;
	int rc;

	if (!stats)
		stats = &dummy;
	memset(stats, 0, sizeof(*stats));
	w.st = stats;
	if (!o.row)
		return jo_err_set(err, JO_EINVAL, "walk: no row callback");
	if (o.flags & JO_WALK_SLICES)
		o.flags |= JO_WALK_CHUNKS;
	/* the two frontiers, edges, attributes and chunks may all hold memory */
	xo.mem_limit = (o.mem_limit ? o.mem_limit : 256u << 20) / 4;
	xo.tmp_dir = o.tmp_dir;
	/* compressing the runs was most of the walk's own CPU */
	xo.plain_runs = true;
	w.xo = xo;
	root = clean_path(o.root);
	w.creq = (o.flags & JO_WALK_CHUNKS) ? malloc(CHUNK_BATCH * sizeof(*w.creq)) : NULL;
	w.ccap = w.creq ? CHUNK_BATCH : 0;
	if (!root || ((o.flags & JO_WALK_CHUNKS) && !w.creq)) {
		free(root);
		free(w.creq);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (int i = 0; i < S_N; i++) {
		if ((i == S_CHUNK && !(o.flags & JO_WALK_CHUNKS)) ||
		    (i == S_SUS && !(o.flags & JO_WALK_SUSTAINED)))
			continue;
		if ((rc = new_sort(&w, &w.xs[i])) != 0)
			goto out;
	}
	stats->point_in_time = jo_meta_has(m, JO_META_HAS_SNAPSHOT_SCANS);
	stats->started = (int64_t)time(NULL);
	if ((rc = jo_meta_snapshot_begin(m, err)) != 0)
		goto out;
	rc = scans(&w, root, err);
	jo_meta_snapshot_end(m);
	if (rc == 0)
		rc = merge(&w);
out:
	for (int i = 0; i < S_N; i++) {
		struct jo_xsort_stats xst;

		if (!w.xs[i])
			continue;
		jo_xsort_get_stats(w.xs[i], &xst);
		stats->tmp_bytes += xst.tmp_bytes;
		if (xst.peak_mem > stats->peak_sort_mem)
			stats->peak_sort_mem = xst.peak_mem;
		jo_xsort_free(w.xs[i]);
	}
	free(w.buf);
	free(w.recs);
	free(w.bpaths);
	free(w.creq);
	free(root);
	return rc;
}
