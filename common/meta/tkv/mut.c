/*
 * tkv/mut.c: the gc mutations of the tkv family (meta_mut.h), as juicefs's
 * pkg/meta/tkv.go runs them: deleteChunk deletes the chunk key and takes one
 * reference (K, le64 = refs - 1) per record; delayed-slice cleanup takes one
 * per 12-byte record and deletes the L key; a slice whose K fell below zero
 * has its blocks deleted and then its K key.
 *
 * juicefs's etcd driver commits every 128 buffered writes on its own, so
 * its deleteChunk of a chunk with more than 127 slices is not atomic. Here
 * a chunk (or delayed-slice entry) with more slices than one transaction
 * may carry is emptied from its end in steps: each step removes the last
 * records and takes exactly their references in one transaction that
 * checks the chunk is unchanged, so a crash between steps leaves the
 * remaining records and their references consistent (spec B.4 step 4).
 */
#include "common/meta/meta_mut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/tkv/internal.h"

/* ---- reference decrements of the last records of a list */

/* The (id, size) of record i of a chunk (24-byte) or delayed (12-byte) list. */
static void rec_at(const uint8_t *v, size_t i, size_t rlen, uint64_t *id, uint32_t *size)
{
	const uint8_t *r = v + i * rlen;

	if (rlen == JO_SLICE_REC_LEN) {
		*id = jo_be64(r + 4);
		*size = jo_be32(r + 12);
	} else {
		*id = jo_be64(r);
		*size = jo_be32(r + 8);
	}
}

struct tail {
	size_t cut;                 /* records [cut, n) are this step's */
	struct jo_sref ids[JO_TKV_STEP];
	int64_t count[JO_TKV_STEP]; /* how many records name each */
	size_t nids;
};

/*
 * The longest tail of the n records that names at most JO_TKV_STEP distinct
 * slices (records with id 0, holes, name none).
 */
static void pick_tail(const uint8_t *v, size_t n, size_t rlen, struct tail *t)
{
	t->nids = 0;
	t->cut = n;
	while (t->cut > 0) {
		uint64_t id;
		uint32_t size;
		size_t j;

		rec_at(v, t->cut - 1, rlen, &id, &size);
		if (id) {
			for (j = 0; j < t->nids; j++)
				if (t->ids[j].id == id && t->ids[j].size == size)
					break;
			if (j == t->nids) {
				if (t->nids == JO_TKV_STEP)
					break;
				t->ids[j].id = id;
				t->ids[j].size = size;
				t->count[j] = 0;
				t->nids++;
			}
			t->count[j]++;
		}
		t->cut--;
	}
}

/* Take the tail's references; slices that fell below one reference join *freed. */
static int take_refs(struct jo_tx *tx, const struct tail *t, struct jo_sref **freed, size_t *nf,
		     size_t *cap, struct jo_err *err)
{
	for (size_t j = 0; j < t->nids; j++) {
		struct jo_key k;
		int64_t v;
		int rc;

		jo_tkv_slice_key(&k, tx->m, t->ids[j].id, t->ids[j].size);
		if ((rc = jo_tx_incr(tx, &k, -t->count[j], &v, err)) != 0)
			return rc;
		if (v < 0 && jo_sref_push(freed, nf, cap, t->ids[j].id, t->ids[j].size))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* One step of emptying a list key (chunk or delayed slices). */
struct drain {
	struct jo_key key;
	size_t rlen;
	const char *what;
	int64_t edge;              /* delayed slices: keep an entry whose time is >= edge */
	bool check_edge;
	bool done;
	struct jo_sref *step;      /* this attempt's freed slices */
	size_t nstep, cstep;
};

static int drain_step(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct drain *d = p;
	struct tail t;
	uint8_t *v;
	size_t vl;
	int rc;

	d->nstep = 0;
	d->done = false;
	if ((rc = jo_tx_get(tx, &d->key, &v, &vl, err)) != 0)
		return rc;
	if (!v) {
		d->done = true;
		return 1;
	}
	if (vl == 0 || vl % d->rlen) {
		free(v);
		return jo_err_set(err, JO_EPROTO, "%s: %zu bytes is not a list of %zu-byte records: "
				  "left alone", d->what, vl, d->rlen);
	}
	pick_tail(v, vl / d->rlen, d->rlen, &t);
	if (t.cut == 0) {
		rc = jo_tx_del(tx, &d->key, err);
		d->done = true;
	} else {
		rc = jo_tx_put(tx, &d->key, v, t.cut * d->rlen, err);
	}
	free(v);
	if (rc == 0)
		rc = take_refs(tx, &t, &d->step, &d->nstep, &d->cstep, err);
	if (rc)
		d->done = false;
	return rc;
}

/* Empty a list key step by step; *freed collects every step's freed slices. */
static int drain(struct jo_meta *m, struct drain *d, struct jo_sref **freed, size_t *nfreed,
		 struct jo_err *err)
{
	size_t cap = 0;
	int rc = 0;

	*freed = NULL;
	*nfreed = 0;
	while (!d->done) {
		rc = jo_tkv_txn(m, drain_step, d, err);
		if (rc < 0)
			break;
		rc = 0;
		for (size_t i = 0; i < d->nstep; i++)
			if (jo_sref_push(freed, nfreed, &cap, d->step[i].id, d->step[i].size)) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
		if (rc)
			break;
	}
	free(d->step);
	return jo_sref_finish(rc, NULL, freed, nfreed);
}

static int t_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			  size_t *nfreed, struct jo_err *err)
{
	struct drain d = { .rlen = JO_SLICE_REC_LEN, .what = "chunk" };
	char what[64];

	snprintf(what, sizeof(what), "chunk %llu:%u", (unsigned long long)ino, indx);
	d.what = what;
	jo_tkv_chunk_key(&d.key, m, ino, indx);
	return drain(m, &d, freed, nfreed, err);
}

static int t_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
			 size_t *n, struct jo_err *err)
{
	(void)length; /* tkv doDeleteFileData visits every chunk key of the inode */
	return jo_meta_list_chunks(m, ino, out, n, err);
}

static int t_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length, bool *out,
			    struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_delfile_key(&k, m, ino, length);
	rc = jo_tkv_get(m, &k, &v, &vl, err);
	*out = rc == 0 && v;
	free(v);
	return rc;
}

static int del_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	return jo_tx_del(tx, p, err);
}

static int t_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length, struct jo_err *err)
{
	struct jo_key k;

	jo_tkv_delfile_key(&k, m, ino, length);
	return jo_tkv_txn(m, del_fn, &k, err);
}

static int t_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			      struct jo_sref **freed, size_t *nfreed, bool *kept,
			      struct jo_err *err)
{
	struct drain d = { .rlen = JO_DELSLICE_REC_LEN };
	char what[64];

	*freed = NULL;
	*nfreed = 0;
	/* the key holds its time: an entry not older than edge is kept */
	*kept = ts >= edge;
	if (*kept)
		return 0;
	snprintf(what, sizeof(what), "delayed slices %llu", (unsigned long long)new_id);
	d.what = what;
	jo_tkv_delslice_key(&d.key, m, ts, new_id);
	return drain(m, &d, freed, nfreed, err);
}

static int t_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			     struct jo_err *err)
{
	bool found;
	int64_t v;
	int rc = jo_tkv_ref(m, id, size, &found, &v, err);

	*out = rc == 0 && found && v < 0;
	return rc;
}

int jo_tx_ref_del_if(struct jo_tx *tx, uint64_t id, uint32_t size, bool zero,
		     struct jo_err *err)
{
	struct jo_key k;
	uint8_t *b;
	size_t bl;
	int rc;

	jo_tkv_slice_key(&k, tx->m, id, size);
	if ((rc = jo_tx_get(tx, &k, &b, &bl, err)) != 0)
		return rc;
	if (!b || bl != 8 || (zero ? jo_le64(b) != 0 : (int64_t)jo_le64(b) >= 0)) {
		free(b);
		return 1;
	}
	free(b);
	return jo_tx_del(tx, &k, err);
}

/* Delete K while it still says "no reference" (a reference taken meanwhile keeps it). */
static int forget_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	const struct jo_sref *s = p;

	return jo_tx_ref_del_if(tx, s->id, s->size, false, err);
}

static int t_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	struct jo_sref s = { id, size };
	int rc = jo_tkv_txn(m, forget_fn, &s, err);

	return rc < 0 ? rc : 0;
}

static int exists(struct jo_meta *m, const struct jo_key *k, bool *out, struct jo_err *err)
{
	uint8_t *v;
	size_t vl;
	int rc = jo_tkv_get(m, k, &v, &vl, err);

	*out = rc == 0 && v;
	free(v);
	return rc;
}

static int t_inode_exists(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	struct jo_key k;

	jo_tkv_attr_key(&k, m, ino);
	return exists(m, &k, out, err);
}

static int t_is_detached(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	struct jo_key k;

	jo_key_init(&k, m);
	jo_key_ch(&k, 'N');
	jo_key_le64(&k, ino);
	return exists(m, &k, out, err);
}

static int t_scan_orphan_chunks(struct jo_meta *m, jo_mut_chunk_cb cb, void *payload,
				struct jo_err *err)
{
	(void)cb;
	(void)payload;
	return jo_err_set(err, JO_EUNSUPPORTED, "%s %s: leaked chunk keys are a Redis-only problem",
			  jo_meta_engine(m), m->url.redacted);
}

const struct jo_mut_ops jo_tkv_mut_ops = {
	.delete_chunk = t_delete_chunk,
	.file_chunks = t_file_chunks,
	.delfile_exists = t_delfile_exists,
	.remove_delfile = t_remove_delfile,
	.cleanup_delslice = t_cleanup_delslice,
	.slice_deletable = t_slice_deletable,
	.forget_slice = t_forget_slice,
	.inode_exists = t_inode_exists,
	.is_detached = t_is_detached,
	.scan_orphan_chunks = t_scan_orphan_chunks,
	.unlink = jo_tkv_unlink,
	.rmdir = jo_tkv_rmdir,
	.restore = jo_tkv_restore,
	.restore_many = jo_tkv_restore_many,
	.dir_stat_init = jo_tkv_dir_stat_init,
	.dir_quota_add = jo_tkv_dir_quota_add,
	.task_init = jo_tkv_task_init,
	.task_add = jo_tkv_task_add,
	.task_claim = jo_tkv_task_claim,
	.task_renew = jo_tkv_task_renew,
	.task_release = jo_tkv_task_release,
	.task_complete = jo_tkv_task_complete,
	.task_count = jo_tkv_task_count,
	.task_scan = jo_tkv_task_scan,
	.task_clear = jo_tkv_task_clear,
	.max_task_items = JO_TKV_STEP,
	.rec_put = jo_tkv_rec_put,
	.rec_get = jo_tkv_rec_get,
	.rec_scan = jo_tkv_rec_scan,
};
