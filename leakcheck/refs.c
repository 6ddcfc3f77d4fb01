/* leakcheck: the reference side, streamed from the metadata into a sorter. */
#include "leakcheck/leak.h"

#include <stdlib.h>
#include <string.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"

/* Inodes whose chunk lists belong to removed files (delfiles, sustained). */
struct inoset {
	uint64_t *v;
	size_t n, cap;
};

struct refs_ctx {
	int (*sink)(struct refs_ctx *c, uint64_t id, uint32_t size, int cls);
	struct jo_xsort *xs;
	struct leak_density *density;   /* scan mode: counted as they go (or NULL) */
	/* lookup mode: only these ids (sorted), hits collected */
	const uint64_t *only;
	size_t nonly;
	struct leak_ref_hit *hits;
	size_t nhits, hcap;
	struct inoset dead;
	struct leak_ref_stats *st;
	/* the chunks' part [from, to) (jo_meta_scan_chunks_range) with the
	 * delfiles and sustained inodes when LEAK_SCAN_CHUNKS, the slice
	 * references and delayed slices when LEAK_SCAN_EXTRAS; read at the
	 * shared snapshot token (0: a snapshot of its own) */
	uint64_t from, to;
	unsigned what;
	int64_t token;
	struct jo_err *err;      /* where xsort errors land */
	int rc;                  /* the failure behind a callback's non-zero return */
};

static int inoset_add(struct inoset *s, uint64_t ino)
{
	if (jo_grow_array(&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return JO_ENOMEM;
	s->v[s->n++] = ino;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool inoset_has(const struct inoset *s, uint64_t ino)
{
	return s->n && bsearch(&ino, s->v, s->n, sizeof(*s->v), u64_cmp) != NULL;
}

static int add_ref(struct refs_ctx *c, uint64_t id, uint32_t size, int cls)
{
	return c->sink(c, id, size, cls);
}

static int sink_hits(struct refs_ctx *c, uint64_t id, uint32_t size, int cls)
{
	if (!bsearch(&id, c->only, c->nonly, sizeof(*c->only), u64_cmp))
		return 0;
	if (jo_grow_array(&c->hits, &c->hcap, c->nhits + 1, sizeof(*c->hits)))
		return c->rc = jo_err_set(c->err, JO_ENOMEM, "leakcheck: out of memory");
	c->hits[c->nhits++] = (struct leak_ref_hit){ .id = id, .size = size, .cls = cls };
	return 0;
}

static int sink_xsort(struct refs_ctx *c, uint64_t id, uint32_t size, int cls)
{
	uint8_t rec[LEAK_REF_REC_LEN];
	int rc;

	if (c->density)
		leak_density_add(c->density, id, size);
	leak_ref_encode(rec, id, size, cls);
	rc = jo_xsort_add(c->xs, rec, sizeof(rec), c->err);
	if (rc)
		c->rc = rc;
	return rc;
}

static int on_delfile(uint64_t ino, uint64_t length, int64_t deleted_at, void *payload)
{
	struct refs_ctx *c = payload;

	(void)length;
	(void)deleted_at;
	c->st->delfiles++;
	if (inoset_add(&c->dead, ino))
		return c->rc = jo_err_set(c->err, JO_ENOMEM, "leakcheck: out of memory");
	return 0;
}

static int on_sustained(uint64_t sid, uint64_t ino, void *payload)
{
	struct refs_ctx *c = payload;

	(void)sid;
	c->st->sustained++;
	if (inoset_add(&c->dead, ino))
		return c->rc = jo_err_set(c->err, JO_ENOMEM, "leakcheck: out of memory");
	return 0;
}

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	struct refs_ctx *c = payload;
	int cls = inoset_has(&c->dead, ino) ? LEAK_REF_DELFILE : LEAK_REF_USED;

	(void)indx;
	if (len % JO_SLICE_REC_LEN)
		return c->rc = jo_err_set(c->err, JO_EPROTO,
					  "leakcheck: chunk %llu/%u has %zu bytes, not a multiple of 24",
					  (unsigned long long)ino, indx, len);
	c->st->chunks++;
	for (size_t off = 0; off < len; off += JO_SLICE_REC_LEN) {
		struct jo_slice s;

		jo_slice_decode(raw + off, &s);
		if (s.id == 0)
			continue;
		c->st->records++;
		if (add_ref(c, s.id, s.size, cls))
			return c->rc;
	}
	if (jo_cancelled())
		return c->rc = jo_err_set(c->err, JO_ECANCELED, "leakcheck: canceled");
	return 0;
}

static int on_ref(uint64_t id, uint32_t size, int64_t refs, void *payload)
{
	struct refs_ctx *c = payload;

	if (refs > 0)
		return 0;
	c->st->pending++;
	return add_ref(c, id, size, LEAK_REF_PENDING);
}

static int on_delslices(uint64_t new_id, int64_t deleted_at, const uint8_t *recs, size_t len,
			void *payload)
{
	struct refs_ctx *c = payload;

	(void)new_id;
	(void)deleted_at;
	for (size_t off = 0; off + JO_DELSLICE_REC_LEN <= len; off += JO_DELSLICE_REC_LEN) {
		uint64_t id = 0;
		uint32_t size = 0;

		for (int i = 0; i < 8; i++)
			id = (id << 8) | recs[off + i];
		for (int i = 8; i < 12; i++)
			size = (size << 8) | recs[off + i];
		if (id == 0)
			continue;
		c->st->delslices++;
		if (add_ref(c, id, size, LEAK_REF_TRASH))
			return c->rc;
	}
	return 0;
}

/* Run one scan; a callback failure wins over the scan's own wrapping code. */
static int scan_step(struct refs_ctx *c, int rc, const char *what)
{
	if (!rc)
		return 0;
	if (c->rc)
		rc = c->rc;
	(void)jo_err_wrap(c->err, "scan %s", what); /* rc stays the first failure */
	return rc;
}

static int refs_run(struct jo_meta *m, struct refs_ctx *c0)
{
	struct refs_ctx c = *c0;
	struct leak_ref_stats *st = c.st;
	int rc;

	memset(st, 0, sizeof(*st));
	/* every reference scan reads one snapshot, where the engine has them */
	if ((rc = jo_meta_snapshot_begin_at(m, c.token, c.err)) != 0)
		return rc;
	if (!(c.what & LEAK_SCAN_CHUNKS))
		goto extras;
	rc = scan_step(&c, jo_meta_scan_delfiles(m, on_delfile, &c, c.err), "delfiles");
	if (!rc)
		rc = scan_step(&c, jo_meta_scan_sustained(m, on_sustained, &c, c.err), "sustained inodes");
	if (rc)
		goto out;
	if (c.dead.n)
		qsort(c.dead.v, c.dead.n, sizeof(*c.dead.v), u64_cmp);
	rc = scan_step(&c, jo_meta_scan_chunks_range(m, c.from, c.to, on_chunk, &c, c.err),
		       "chunks");
extras:
	if (!rc && (c.what & LEAK_SCAN_EXTRAS))
		rc = scan_step(&c, jo_meta_scan_slice_refs(m, on_ref, &c, c.err), "slice refs");
	if (!rc && (c.what & LEAK_SCAN_EXTRAS))
		rc = scan_step(&c, jo_meta_scan_delslices(m, on_delslices, &c, c.err), "delayed slices");
out:
	jo_meta_snapshot_end(m);
	free(c.dead.v);
	c0->hits = c.hits;
	c0->nhits = c.nhits;
	return rc;
}

int leak_refs_scan(struct jo_meta *m, struct jo_xsort *xs, struct leak_density *density,
		   struct leak_ref_stats *st, struct jo_err *err)
{
	return leak_refs_scan_part(m, 0, 0, UINT64_MAX, LEAK_SCAN_CHUNKS | LEAK_SCAN_EXTRAS, xs,
				   density, st, err);
}

int leak_refs_scan_part(struct jo_meta *m, int64_t token, uint64_t from, uint64_t to,
			unsigned what, struct jo_xsort *xs, struct leak_density *density,
			struct leak_ref_stats *st, struct jo_err *err)
{
	struct refs_ctx c = { .sink = sink_xsort, .xs = xs, .density = density, .st = st,
			      .from = from, .to = to, .what = what, .token = token, .err = err };

	return refs_run(m, &c);
}

int leak_refs_lookup(struct jo_meta *m, const uint64_t *ids, size_t n,
		     struct leak_ref_hit **hits, size_t *nhits, struct jo_err *err)
{
	struct leak_ref_stats st;
	struct refs_ctx c = { .sink = sink_hits, .only = ids, .nonly = n, .st = &st,
			      .to = UINT64_MAX, .what = LEAK_SCAN_CHUNKS | LEAK_SCAN_EXTRAS,
			      .err = err };
	int rc = refs_run(m, &c);

	if (rc) {
		free(c.hits);
		c.hits = NULL;
		c.nhits = 0;
	}
	*hits = c.hits;
	*nhits = c.nhits;
	return rc;
}
