/*
 * tkv/compact.c: compaction bookkeeping in the tkv family, as juicefs's
 * doCompactChunk and incrCounter run it on the tkv layout (spec B.2, B.4
 * step 5): one transaction re-reads the chunk and checks that it still
 * starts with the records read, writes the chunk with the new record, the
 * new slice's K = 0 as a commit marker, and either an L entry of the
 * compacted slices (trash on) or one reference fewer for each (trash off).
 * A lost reply is settled by the marker; the marker is then removed while
 * still 0. At most JO_TKV_STEP records are replaced per commit, so the
 * transaction stays within etcd's 128 checks and 128 writes.
 */
#include "common/meta/meta_compact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta_internal.h"
#include "common/meta/tkv/internal.h"

struct alloc {
	uint32_t n;
	uint64_t first;
};

static int alloc_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct alloc *a = p;
	struct jo_key k;
	int64_t v;
	int rc;

	jo_tkv_counter_key(&k, tx->m, "nextChunk");
	if ((rc = jo_tx_incr(tx, &k, 0, &v, err)) != 0)
		return rc;
	/* tkv keeps the next free id, as SQL does (juicefs-engines.md A.4);
	 * format writes 1, and id 0 is never a slice */
	if (v < 1)
		v = 1;
	a->first = (uint64_t)v;
	{
		uint8_t b[8];

		jo_put_le64(b, (uint64_t)v + a->n);
		return jo_tx_put(tx, &k, b, 8, err);
	}
}

static int t_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first, struct jo_err *err)
{
	struct alloc a = { n, 0 };
	int rc = jo_tkv_txn(m, alloc_fn, &a, err);

	if (rc == 0)
		*first = a.first;
	return rc;
}

struct commit {
	const struct jo_compact_commit *c;
};

static int commit_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	const struct jo_compact_commit *c = ((struct commit *)p)->c;
	struct jo_slice ns = { .pos = c->pos, .id = c->new_id, .size = c->size, .len = c->size };
	size_t olen = c->norigin * 24, curlen, nlen, nd = 0;
	uint8_t *cur, *next = NULL, *delayed = NULL, zero[8] = { 0 };
	struct jo_key k;
	int rc;

	jo_tkv_chunk_key(&k, tx->m, c->ino, c->indx);
	if ((rc = jo_tx_get(tx, &k, &cur, &curlen, err)) != 0)
		return rc;
	if (!cur || curlen < olen || memcmp(cur, c->origin, olen)) {
		free(cur);
		return jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u changed during compaction",
				  (unsigned long long)c->ino, c->indx);
	}
	nlen = c->skipped * 24 + 24 + (curlen - olen);
	next = malloc(nlen);
	delayed = malloc((c->norigin - c->skipped) * 12 + 1);
	if (!next || !delayed) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(next, cur, c->skipped * 24);
	jo_slice_encode(&ns, next + c->skipped * 24);
	memcpy(next + c->skipped * 24 + 24, cur + olen, curlen - olen);
	if ((rc = jo_tx_put(tx, &k, next, nlen, err)) != 0)
		goto out;
	/* the new slice's K = 0 (one reference): the marker of this commit */
	jo_tkv_slice_key(&k, tx->m, c->new_id, c->size);
	if ((rc = jo_tx_put(tx, &k, zero, 8, err)) != 0)
		goto out;
	for (size_t i = c->skipped; i < c->norigin && !rc; i++) {
		struct jo_slice s;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id)
			continue;
		if (c->trash_days > 0) {
			jo_put_be64(delayed + nd * 12, s.id);
			jo_put_be32(delayed + nd * 12 + 8, s.size);
			nd++;
		} else {
			jo_tkv_slice_key(&k, tx->m, s.id, s.size);
			rc = jo_tx_incr(tx, &k, -1, NULL, err);
		}
	}
	if (!rc && nd) {
		jo_tkv_delslice_key(&k, tx->m, c->now, c->new_id);
		rc = jo_tx_put(tx, &k, delayed, nd * 12, err);
	}
out:
	free(cur);
	free(next);
	free(delayed);
	return rc;
}

/* juicefs's cleanupZeroRef: K = 0 means one reference, which absent says too. */
static int zero_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	const struct jo_slice_id *s = p;

	return jo_tx_ref_del_if(tx, s->id, s->size, true, err);
}

static int t_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
			    struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	struct commit cm = { c };
	struct jo_slice_id marker = { c->new_id, c->size };
	struct jo_err e2 = { 0 };
	int rc;

	*freed = NULL;
	*nfreed = 0;
	if (c->norigin - c->skipped > JO_TKV_STEP)
		return jo_err_set(err, JO_EINVAL, "compaction of %zu records: at most %d per commit "
				  "on %s", c->norigin - c->skipped, JO_TKV_STEP, jo_meta_engine(m));
	rc = jo_tkv_txn(m, commit_fn, &cm, err);
	if (rc && rc != JO_ECONFLICT && rc != JO_EPROTO && rc != JO_EINVAL) {
		/* a lost reply: the marker decides whether the commit happened */
		bool found = false;
		int64_t v;

		if (jo_tkv_ref(m, c->new_id, c->size, &found, &v, &e2) || !found)
			return rc;
		rc = 0;
	}
	if (rc)
		return rc;
	jo_err_clear(err); /* a failed attempt before it is not this commit's error */
	(void)jo_tkv_txn(m, zero_fn, &marker, &e2); /* best effort: a 0 left is one reference */
	if (c->trash_days > 0)
		return 0;
	/* re-read the old slices' counts: below zero means nobody references them;
	 * what cannot be re-read stays pending for gc (the commit stands) */
	for (size_t i = c->skipped; i < c->norigin; i++) {
		struct jo_slice s;
		bool found = false;
		int64_t v = 0;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id || jo_tkv_ref(m, s.id, s.size, &found, &v, &e2))
			continue;
		if (found && v < 0 && jo_slice_id_add(freed, nfreed, s.id, s.size))
			return 0;
	}
	return 0;
}

/* A new slice never committed: K = -1, "pending", so gc deletes its blocks. */
static int abandon_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	const struct jo_slice_id *s = p;
	struct jo_key k;

	jo_tkv_slice_key(&k, tx->m, s->id, s->size);
	return jo_tx_incr(tx, &k, -1, NULL, err);
}

static int t_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	struct jo_slice_id s = { id, size };

	return jo_tkv_txn(m, abandon_fn, &s, err);
}

struct forget {
	const struct jo_slice_id *v;
	size_t n;
};

/* Delete each K that still says "no reference" (up to one step per transaction). */
static int forget_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct forget *f = p;
	int rc = 0;

	for (size_t i = 0; i < f->n && !rc; i++) {
		rc = jo_tx_ref_del_if(tx, f->v[i].id, f->v[i].size, false, err);
		if (rc == 1)
			rc = 0; /* referenced again: kept */
	}
	return rc;
}

static int t_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			   struct jo_err *err)
{
	for (size_t i = 0; i < n; i += JO_TKV_STEP / 2) {
		struct forget f = { v + i, n - i < JO_TKV_STEP / 2 ? n - i : JO_TKV_STEP / 2 };
		int rc = jo_tkv_txn(m, forget_fn, &f, err);

		if (rc < 0)
			return rc;
	}
	return 0;
}

const struct jo_compact_ops jo_tkv_compact_ops = {
	.alloc_slice_ids = t_alloc_slice_ids,
	.commit = t_compact_commit,
	.slice_abandon = t_slice_abandon,
	.forget_slices = t_forget_slices,
	.max_records = JO_TKV_STEP,
};
