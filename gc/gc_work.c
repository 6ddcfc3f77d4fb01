/*
 * gc_work.c: processing gc items exactly as JuiceFS does (spec §5.2, §5.3,
 * §3.9, §5.4), the physical deleter (batched, rate-limited, audited), and
 * the worker threads that claim tasks by lease.
 */
#include "gc/gc_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/audit.h"
#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_mut.h"
#include "common/object/object.h"

static const char *const kind_names[GC_NKINDS] = { "file", "slice", "delslice", "chunk",
						    "trash" };
static const char *const reasons[GC_NKINDS] = { "removed-file", "pending-slice",
						 "delayed-slice", "leaked-chunk", "expired-trash" };

const char *gc_kind_name(int kind)
{
	return kind >= 0 && kind < GC_NKINDS ? kind_names[kind] : "?";
}

int gc_kind_parse(const char *s)
{
	for (int i = 0; i < GC_NKINDS; i++)
		if (!strcmp(s, kind_names[i]))
			return i;
	return -1;
}

void gc_stats_add(struct gc_stats *d, const struct gc_stats *s)
{
	for (int i = 0; i < GC_NKINDS; i++) {
		d->k[i].items += s->k[i].items;
		d->k[i].skipped += s->k[i].skipped;
		d->k[i].slices += s->k[i].slices;
		d->k[i].objects += s->k[i].objects;
		d->k[i].bytes += s->k[i].bytes;
		d->k[i].errors += s->k[i].errors;
	}
	d->tasks_planned += s->tasks_planned;
	d->items_planned += s->items_planned;
	d->tasks_done += s->tasks_done;
	d->tasks_released += s->tasks_released;
	d->leases_lost += s->leases_lost;
	d->obj_errors += s->obj_errors;
	d->still_referenced += s->still_referenced;
}

uint64_t gc_stats_errors(const struct gc_stats *s)
{
	uint64_t e = s->obj_errors;

	for (int i = 0; i < GC_NKINDS; i++)
		e += s->k[i].errors;
	return e;
}

int64_t gc_now_s(void)
{
	return (int64_t)time(NULL);
}

/* ---- stop conditions */

/* JO_ECANCELED on a signal or when --max-time passed. */
static int should_stop(struct gc_worker *w)
{
	if (jo_cancelled())
		return JO_ECANCELED;
	if (w->run->deadline_mono && jo_lease_mono_ms() >= w->run->deadline_mono)
		return JO_ECANCELED;
	return 0;
}

/* Before every mutation: our lease must still be certain. */
static int may_mutate(struct gc_worker *w, struct jo_err *err)
{
	if (w->lease && !jo_lease_valid(w->lease)) {
		w->lease_lost = true;
		return jo_err_set(err, JO_ECONFLICT, "task %lld: lease lost, stopping mutations",
				  (long long)w->task_id);
	}
	return 0;
}

/* ---- the deleter */

static void rate_wait(struct gc_worker *w, size_t n)
{
	struct gc_run *r = w->run;
	int64_t now, at;

	if (r->o.delete_rate <= 0 || n == 0)
		return;
	pthread_mutex_lock(&r->mu);
	now = jo_lease_mono_ms();
	if (r->rate_next < (double)now)
		r->rate_next = (double)now;
	at = (int64_t)r->rate_next;
	r->rate_next += (double)n * 1000.0 / r->o.delete_rate;
	pthread_mutex_unlock(&r->mu);
	while ((now = jo_lease_mono_ms()) < at) {
		int64_t d = at - now;

		if (jo_cancel_signal())
			return; /* finish the current batch without waiting */

		if (d > 100)
			d = 100;
		usleep((useconds_t)d * 1000);
	}
}

static void audit(struct gc_worker *w, const char *action, const char *key, uint64_t id,
		  uint32_t size, int kind, const char *result, const char *error)
{
	struct jo_audit_rec rec = {
		.action = action, .worker = w->id, .task = w->task_id, .key = key,
		.slice_id = id, .slice_size = size, .reason = reasons[kind], .result = result,
		.error = error,
	};
	struct jo_err err = { 0 };

	if (!w->run->o.audit)
		return;
	if (jo_audit_write(w->run->o.audit, &rec, &err) != 0 && !w->audit_failed) {
		w->audit_failed = true;
		jo_error("%s", err.msg);
	}
}

static int deleter_add(struct gc_worker *w, uint64_t id, uint32_t size, int kind,
		       struct jo_err *err);

/* One batch of deleter_flush: the slices' keys and what became of them. */
struct flush {
	char **keys;            /* the blocks' keys, nk of them */
	size_t nk, kcap;
	int *res;               /* per key: 0 deleted, else an error code */
	struct jo_slice_id *ids;
	bool *dels;             /* per slice: its refcount still says "delete" */
	int *rcs;               /* per slice: the re-check's (then the forget's) code */
	size_t *gone, ngone;    /* the slices whose blocks are all gone */
	unsigned told;          /* per-slice failures reported with their message */
	bool canceled;          /* a key not tried or aborted by a signal */
	bool left_pending;      /* the master changed: nothing of the batch is done */
};

/* 1. re-check every slice (one round trip for the batch where the engine can),
 * the engine confirming what they say as durable */
static int flush_recheck(struct gc_worker *w, struct flush *f, struct jo_err *err)
{
	int rc;

	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	f->ids = calloc(w->npend, sizeof(*f->ids));
	f->dels = calloc(w->npend, sizeof(*f->dels));
	f->rcs = calloc(w->npend, sizeof(*f->rcs));
	f->gone = calloc(w->npend, sizeof(*f->gone));
	if (!f->ids || !f->dels || !f->rcs || !f->gone)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < w->npend; i++)
		f->ids[i] = (struct jo_slice_id){ w->pend[i].id, w->pend[i].size };
	rc = jo_mut_slices_deletable(w->m, f->ids, w->npend, f->dels, f->rcs, err);
	if (rc)
		return rc; /* engine gone: nothing of this batch is deleted */
	/* what they say (and what freed them) must be known durable: a
	 * failover must not take it back after the blocks went */
	rc = jo_mut_confirm(w->m, err);
	if (rc && jo_mut_moved(w->m)) {
		/* the master changed: the batch stays pending for the next
		 * plan, and work goes on with the new master */
		jo_warn("%zu slice(s) left pending: %s", w->npend, err->msg);
		for (size_t i = 0; i < w->npend; i++)
			w->st.k[w->pend[i].kind].errors++;
		f->left_pending = true;
		return 0;
	}
	return rc; /* nothing can be confirmed: the run stops */
}

/* The keys of p's blocks, appended to f->keys. */
static int flush_slice_keys(struct gc_worker *w, struct flush *f, struct gc_pend *p,
			    struct jo_err *err)
{
	const struct jo_vol *v = w->run->vol;
	uint32_t bs = v->block_size;
	uint32_t nb = jo_slice_nblocks(p->size, bs);

	p->first_key = f->nk;
	p->nkeys = nb;
	if (f->nk + nb > f->kcap) {
		size_t nc = (f->nk + nb) * 2;
		char **kk = realloc(f->keys, nc * sizeof(*kk));

		if (!kk)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		f->keys = kk;
		f->kcap = nc;
	}
	for (uint32_t b = 0; b < nb; b++) {
		char key[512];

		if (jo_vol_block_key(v, key, sizeof(key), p->id, b, jo_block_len(p->size, bs, b)) < 0 ||
		    !(f->keys[f->nk] = strdup(key)))
			return jo_err_set(err, JO_ENOMEM, "block key of slice %" PRIu64, p->id);
		f->nk++;
	}
	return 0;
}

/* The keys of the slices to delete; the others are skipped (counted). */
static int flush_keys(struct gc_worker *w, struct flush *f, struct jo_err *err)
{
	bool delete_ = w->run->o.delete_;
	int rc;

	for (size_t i = 0; i < w->npend; i++) {
		struct gc_pend *p = &w->pend[i];
		bool del = true;

		if (delete_) {
			if (f->rcs[i]) {
				/* *err says why for the first one */
				jo_warn("slice %" PRIu64 ": %s", p->id,
					!f->told++ && err->msg[0] ? err->msg : jo_err_name(f->rcs[i]));
				w->st.k[p->kind].errors++;
				p->skip = true;
				continue;
			}
			del = f->dels[i];
		}
		if (!del) {
			/* someone else (a client's own cleanup) already deleted it */
			w->st.still_referenced++;
			p->skip = true;
			continue;
		}
		if ((rc = flush_slice_keys(w, f, p, err)) != 0)
			return rc;
	}
	return 0;
}

/* 2. delete (or report) */
static int flush_delete(struct gc_worker *w, struct flush *f, struct jo_err *err)
{
	const struct gc_opts *o = &w->run->o;
	int rc;

	f->res = calloc(f->nk ? f->nk : 1, sizeof(*f->res));
	if (!f->res)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!o->delete_ || !f->nk)
		return 0;
	size_t per = (size_t)(o->batch > 0 ? o->batch : 1000);

	/* rate-limited: requests of at most one second's worth of deletes */
	if (o->delete_rate > 0 && (double)per > o->delete_rate)
		per = o->delete_rate >= 1 ? (size_t)o->delete_rate : 1;

	for (size_t off = 0; off < f->nk; off += per) {
		size_t n = f->nk - off < per ? f->nk - off : per;

		if ((rc = may_mutate(w, err)) != 0)
			return rc;
		rate_wait(w, n);
		rc = jo_obj_delete_batch(w->run->vol->obj, (const char *const *)f->keys + off, n,
					 f->res + off, err);
		if (rc) {
			/* the request failed: every key of this batch counts as failed */
			if (rc != JO_ECANCELED)
				jo_warn("delete batch: %s", err->msg);
			for (size_t i = 0; i < n; i++)
				f->res[off + i] = rc;
		}
	}
	return 0;
}

/* 3. account and audit each key; a slice whose blocks all went is to forget */
static void flush_account(struct gc_worker *w, struct flush *f)
{
	bool delete_ = w->run->o.delete_;
	uint32_t bs = w->run->vol->block_size;

	for (size_t i = 0; i < w->npend; i++) {
		struct gc_pend *p = &w->pend[i];
		bool all_ok = true;

		if (p->skip)
			continue;
		for (size_t k = p->first_key; k < p->first_key + p->nkeys; k++) {
			uint32_t b = (uint32_t)(k - p->first_key);
			const char *key = f->keys[k];

			if (!delete_) {
				audit(w, "would-delete", key, p->id, p->size, p->kind, "dry-run", NULL);
			} else if (f->res[k] == 0) {
				audit(w, "delete", key, p->id, p->size, p->kind, "ok", NULL);
			} else if (f->res[k] == JO_ECANCELED) {
				all_ok = false; /* not tried or aborted by the signal: not an error */
				f->canceled = true;
				continue;
			} else {
				all_ok = false;
				w->st.obj_errors++;
				audit(w, "delete", key, p->id, p->size, p->kind, "error",
				      jo_err_name(f->res[k]));
				continue;
			}
			w->st.k[p->kind].objects++;
			w->st.k[p->kind].bytes += jo_block_len(p->size, bs, b);
		}
		if (!all_ok)
			continue; /* the refcount stays negative: retried by the next run */
		w->st.k[p->kind].slices++;
		if (delete_) {
			f->ids[f->ngone] = (struct jo_slice_id){ p->id, p->size };
			f->gone[f->ngone++] = i;
		}
	}
}

/* Forget the fully deleted slices (drop their refcount entries). */
static void flush_forget(struct gc_worker *w, struct flush *f)
{
	struct jo_err e2 = { 0 };

	f->told = 0;
	/* the blocks are gone: dropping the entries is right even if our lease
	 * just expired (doDeleteSlice after the block deletes); one that stays
	 * is still negative, and the next run finds it again */
	int frc = jo_mut_forget_slices(w->m, f->ids, f->ngone, f->rcs, &e2);

	for (size_t j = 0; j < f->ngone; j++) {
		struct gc_pend *p = &w->pend[f->gone[j]];
		int code = frc ? frc : f->rcs[j];

		if (code) {
			jo_warn("slice %" PRIu64 ": %s", p->id,
				!f->told++ && e2.msg[0] ? e2.msg : jo_err_name(code));
			w->st.k[p->kind].errors++;
		}
	}
}

/* The batch's audit lines made durable (the first failure said once). */
static void flush_audit_sync(struct gc_worker *w)
{
	const struct gc_opts *o = &w->run->o;
	struct jo_err e3 = { 0 };

	if (!o->audit || !o->delete_)
		return;
	if (jo_audit_sync(o->audit, &e3) != 0 && !w->audit_failed) {
		w->audit_failed = true;
		jo_error("%s", e3.msg);
	}
}

/* The steps of one batch, each only when the ones before went through. */
static int flush_batch(struct gc_worker *w, struct flush *f, struct jo_err *err)
{
	int rc;

	if (w->run->o.delete_ && ((rc = flush_recheck(w, f, err)) != 0 || f->left_pending))
		return rc;
	if ((rc = flush_keys(w, f, err)) != 0 || (rc = flush_delete(w, f, err)) != 0)
		return rc;
	flush_account(w, f);
	if (f->ngone)
		flush_forget(w, f);
	flush_audit_sync(w);
	if (f->canceled)
		return jo_err_set(err, JO_ECANCELED, "interrupted during a delete batch");
	return 0;
}

/*
 * Delete the queued slices: re-read each refcount right before (and have the
 * engine confirm what they say as durable), delete the blocks of those that
 * still say "delete" in DeleteObjects batches, then drop their refcount
 * entries (only when every block is gone).
 */
static int deleter_flush(struct gc_worker *w, struct jo_err *err)
{
	struct flush f = { 0 };
	int rc;

	if (w->npend == 0)
		return 0;
	/* A signal does not cut a batch: it is finished (deleted, audited, its
	 * refcount entries dropped), then the caller stops. */
	jo_cancel_shield(1);
	rc = flush_batch(w, &f, err);
	jo_cancel_shield(0);
	for (size_t i = 0; i < f.nk; i++)
		free(f.keys[i]);
	free(f.keys);
	free(f.res);
	free(f.ids);
	free(f.dels);
	free(f.rcs);
	free(f.gone);
	w->npend = 0;
	w->pend_keys = 0;
	return rc;
}

static int deleter_add(struct gc_worker *w, uint64_t id, uint32_t size, int kind,
		       struct jo_err *err)
{
	if (id == 0 || size == 0)
		return 0;
	for (size_t i = 0; i < w->npend; i++)
		if (w->pend[i].id == id && w->pend[i].size == size)
			return 0;
	if (jo_grow_array(&w->pend, &w->pcap, w->npend + 1, sizeof(*w->pend)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memset(&w->pend[w->npend], 0, sizeof(w->pend[0]));
	w->pend[w->npend].id = id;
	w->pend[w->npend].size = size;
	w->pend[w->npend].kind = kind;
	w->npend++;
	w->pend_keys += jo_slice_nblocks(size, w->run->vol->block_size);
	if (w->pend_keys >= (size_t)(w->run->o.batch > 0 ? w->run->o.batch : 1000))
		return deleter_flush(w, err);
	return 0;
}

int gc_queue_slice(struct gc_worker *w, uint64_t id, uint32_t size, int kind, struct jo_err *err)
{
	return deleter_add(w, id, size, kind, err);
}

/* ---- dry-run evaluation of chunks */

/* Would deleting these chunks free slices? (refcount minus the records we drop) */
struct dry_ref {
	uint64_t id;
	uint32_t size;
	int64_t count;
};

static int dry_chunks(struct gc_worker *w, uint64_t ino, const uint32_t *idx, size_t n, int kind,
		      struct jo_err *err)
{
	struct dry_ref *refs = NULL;
	size_t nr = 0, cap = 0;
	int rc = 0;

	for (size_t c = 0; c < n; c++) {
		uint8_t *raw = NULL;
		size_t len = 0;

		rc = jo_meta_read_chunk(w->m, ino, idx[c], &raw, &len, err);
		if (rc)
			goto out;
		for (size_t o = 0; o + JO_SLICE_REC_LEN <= len; o += JO_SLICE_REC_LEN) {
			struct jo_slice s;
			size_t j;

			jo_slice_decode(raw + o, &s);
			if (s.id == 0)
				continue;
			for (j = 0; j < nr; j++)
				if (refs[j].id == s.id && refs[j].size == s.size)
					break;
			if (j == nr) {
				if (jo_grow_array(&refs, &cap, nr + 1, sizeof(*refs))) {
					free(raw);
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
					goto out;
				}
				refs[nr].id = s.id;
				refs[nr].size = s.size;
				refs[nr].count = 0;
				nr++;
			}
			refs[j].count++;
		}
		free(raw);
	}
	for (size_t j = 0; j < nr; j++) {
		int64_t cnt = 0;
		bool ex = false;

		rc = jo_meta_get_slice_ref(w->m, refs[j].id, refs[j].size, &cnt, &ex, err);
		if (rc)
			goto out;
		if (cnt - refs[j].count <= 0 && (rc = deleter_add(w, refs[j].id, refs[j].size, kind, err)))
			goto out;
	}
out:
	free(refs);
	return rc;
}

/* ---- one item of each kind */

static int parse_item(const char *it, char *k, uint64_t *a, uint64_t *b)
{
	char *end;
	unsigned long long x, y;

	if (!it[0] || it[1] != ':')
		return -1;
	*k = it[0];
	x = strtoull(it + 2, &end, 10);
	if (end == it + 2 || *end != ':')
		return -1;
	y = strtoull(end + 1, &end, 10);
	if (*end)
		return -1;
	*a = x;
	*b = y;
	return 0;
}

/* Run deleteChunk and queue what it freed. */
static int delete_chunk(struct gc_worker *w, uint64_t ino, uint32_t indx, int kind,
			struct jo_err *err)
{
	struct jo_sref *freed = NULL;
	size_t nf = 0;
	int rc;

	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	rc = jo_mut_delete_chunk(w->m, ino, indx, &freed, &nf, err);
	for (size_t i = 0; rc == 0 && i < nf; i++)
		rc = deleter_add(w, freed[i].id, freed[i].size, kind, err);
	free(freed);
	return rc;
}

static int do_file(struct gc_worker *w, uint64_t ino, uint64_t length, int kind,
		   struct jo_err *err)
{
	uint32_t *idx = NULL;
	size_t n = 0;
	bool exists = false;
	int rc;

	rc = jo_mut_delfile_exists(w->m, ino, length, &exists, err);
	if (rc)
		return rc;
	if (!exists) {
		w->st.k[kind].skipped++; /* a client or another worker finished it */
		return 0;
	}
	rc = jo_mut_file_chunks(w->m, ino, length, &idx, &n, err);
	if (rc)
		return rc;
	if (!w->run->o.delete_) {
		rc = dry_chunks(w, ino, idx, n, kind, err);
		free(idx);
		return rc;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		if ((rc = should_stop(w)) != 0)
			break;
		rc = delete_chunk(w, ino, idx[i], kind, err);
	}
	free(idx);
	if (rc)
		return rc; /* as JuiceFS: the delfiles entry stays for a later run */
	/* As doDeleteFileData: the entry goes once the chunks are gone; the freed
	 * slices wait in the deleter's batch. Their refcounts already say
	 * "delete", so after a crash the planner finds them as pending slices. */
	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	return jo_mut_remove_delfile(w->m, ino, length, err);
}

static int do_slice(struct gc_worker *w, uint64_t id, uint32_t size, struct jo_err *err)
{
	bool del = false;
	int rc;

	if (!w->run->o.delete_) {
		rc = jo_mut_slice_deletable(w->m, id, size, &del, err);
		if (rc)
			return rc;
		if (!del) {
			w->st.k[GC_SLICE].skipped++;
			return 0;
		}
	}
	return deleter_add(w, id, size, GC_SLICE, err);
}

static int do_delslice(struct gc_worker *w, uint64_t new_id, int64_t ts, struct jo_err *err)
{
	struct jo_sref *freed = NULL;
	size_t nf = 0;
	bool kept = false;
	int rc;

	if (!w->run->o.delete_) {
		/* dry-run: the entry is reported; its slices are evaluated by the planner */
		if (ts >= w->run->edge)
			w->st.k[GC_DELSLICE].skipped++;
		return 0;
	}
	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	rc = jo_mut_cleanup_delslice(w->m, new_id, ts, w->run->edge, &freed, &nf, &kept, err);
	if (rc == 0 && kept)
		w->st.k[GC_DELSLICE].skipped++;
	for (size_t i = 0; rc == 0 && i < nf; i++)
		rc = deleter_add(w, freed[i].id, freed[i].size, GC_DELSLICE, err);
	free(freed);
	return rc;
}

static int do_chunk(struct gc_worker *w, uint64_t ino, uint32_t indx, struct jo_err *err)
{
	bool exists = false, detached = false;
	int rc;

	/* re-check: only chunks of inodes that are really gone (inode numbers
	 * are never reused; sustained inodes keep their attr; detached nodes
	 * belong to a clone in progress) */
	if ((rc = jo_mut_inode_exists(w->m, ino, &exists, err)) != 0)
		return rc;
	if (!exists && (rc = jo_mut_is_detached(w->m, ino, &detached, err)) != 0)
		return rc;
	if (exists || detached) {
		w->st.k[GC_CHUNK].skipped++;
		return 0;
	}
	if (!w->run->o.delete_)
		return dry_chunks(w, ino, &indx, 1, GC_CHUNK, err);
	return delete_chunk(w, ino, indx, GC_CHUNK, err);
}

/* ---- trash (base.go CleanupTrashBefore, utils.go emptyDir/emptyEntry) */

/* A page of directory entries (emptyDir reads at most this many at a time). */
#define TRASH_PAGE 1000
#define TRASH_DEPTH 64

struct tentry {
	char *name;
	size_t len;
	uint64_t ino;
	uint8_t type;
};

struct tpage {
	struct tentry *e;     /* TRASH_PAGE of them */
	size_t n;
};

static int page_cb(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct tpage *p = payload;
	struct tentry *e = &p->e[p->n];

	if (p->n == TRASH_PAGE)
		return 1; /* full: process this page, then read again */
	e->name = malloc(len + 1);
	if (!e->name)
		return JO_ENOMEM;
	memcpy(e->name, name, len);
	e->name[len] = '\0';
	e->len = len;
	e->ino = ino;
	e->type = type;
	p->n++;
	return 0;
}

static void page_free(struct tpage *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->e[i].name);
	p->n = 0;
}

/* Read up to TRASH_PAGE entries of dir into p (emptied first). */
static int page_read(struct gc_worker *w, uint64_t dir, struct tpage *p, struct jo_err *err)
{
	int rc;

	page_free(p);
	rc = jo_meta_readdir(w->m, dir, page_cb, p, err);
	if (rc == 1)
		rc = 0;
	else if (rc == JO_ENOMEM)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	return rc;
}

static int trash_dry(struct gc_worker *w, uint64_t dir, int depth, struct jo_err *err);

/* Dry run: what removing one entry would do. */
static int trash_dry_entry(struct gc_worker *w, const struct tentry *e, int depth,
			   struct jo_err *err)
{
	struct jo_attr a;
	uint32_t *idx = NULL;
	size_t n = 0;
	int rc;

	w->st.k[GC_TRASH].items++;
	if (e->type == JO_TYPE_DIR)
		return trash_dry(w, e->ino, depth + 1, err);
	if (e->type != JO_TYPE_FILE)
		return 0;
	rc = jo_meta_getattr(w->m, e->ino, &a, err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err);
		return 0;
	}
	if (rc || a.nlink != 1)
		return rc; /* other links keep the data */
	rc = jo_mut_file_chunks(w->m, e->ino, a.length, &idx, &n, err);
	if (rc == 0)
		rc = dry_chunks(w, e->ino, idx, n, GC_TRASH, err);
	free(idx);
	return rc;
}

/* Dry run over a whole directory (nothing changes, so it is read once). */
struct dry_walk {
	struct gc_worker *w;
	int depth;
	int rc;
	struct jo_err *err;
};

static int dry_cb(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct dry_walk *d = payload;
	struct tentry e = { (char *)name, len, ino, type };

	if (should_stop(d->w))
		return (d->rc = jo_err_set(d->err, JO_ECANCELED, "interrupted"));
	d->rc = trash_dry_entry(d->w, &e, d->depth, d->err);
	return d->rc;
}

static int trash_dry(struct gc_worker *w, uint64_t dir, int depth, struct jo_err *err)
{
	struct dry_walk d = { w, depth, 0, err };
	int rc;

	if (depth > TRASH_DEPTH)
		return jo_err_set(err, JO_EPROTO, "trash: directories nested deeper than %d",
				  TRASH_DEPTH);
	rc = jo_meta_readdir(w->m, dir, dry_cb, &d, err);
	return d.rc ? d.rc : rc;
}

static int trash_empty(struct gc_worker *w, uint64_t dir, int depth, struct jo_err *err);

/* emptyEntry: empty a directory, then rmdir it (redone while a concurrent
 * writer keeps it non-empty, as JuiceFS does on ENOTEMPTY). */
static int trash_rmdir(struct gc_worker *w, uint64_t parent, const struct tentry *e, int depth,
		       bool *left, struct jo_err *err)
{
	bool dir_stats = w->run->vol->fmt.dir_stats;

	for (int attempt = 0; attempt < 3; attempt++) {
		struct jo_rm_res res;
		int rc = trash_empty(w, e->ino, depth + 1, err);

		if (rc)
			return rc;
		if ((rc = may_mutate(w, err)) != 0)
			return rc;
		rc = jo_mut_rmdir(w->m, parent, e->name, e->len, dir_stats, &res, err);
		if (rc)
			return rc;
		switch (res.status) {
		case JO_RM_DONE:
			w->st.k[GC_TRASH].items++;
			return 0;
		case JO_RM_GONE:
			w->st.k[GC_TRASH].skipped++;
			return 0;
		case JO_RM_NOTEMPTY:
			continue;
		default:
			*left = true;
			return 0;
		}
	}
	*left = true;
	return 0;
}

/* Unlink one non-directory entry; a file whose last link went has its data
 * deleted right away (the client's fileDeleted). */
static int trash_unlink(struct gc_worker *w, uint64_t parent, const struct tentry *e,
			bool *left, struct jo_err *err)
{
	struct jo_rm_res res;
	int rc;

	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	rc = jo_mut_unlink(w->m, parent, e->name, e->len, w->run->vol->fmt.dir_stats, &res, err);
	if (rc)
		return rc;
	switch (res.status) {
	case JO_RM_DONE:
		w->st.k[GC_TRASH].items++;
		return res.delfile ? do_file(w, res.ino, res.length, GC_TRASH, err) : 0;
	case JO_RM_GONE:
		w->st.k[GC_TRASH].skipped++;
		return 0;
	default: /* EPERM flags, or it became a directory: left for a person to look at */
		*left = true;
		return 0;
	}
}

/* emptyDir: remove every entry of dir, page by page. */
static int trash_empty(struct gc_worker *w, uint64_t dir, int depth, struct jo_err *err)
{
	struct tpage p = { NULL, 0 };
	int rc;

	if (depth > TRASH_DEPTH)
		return jo_err_set(err, JO_EPROTO, "trash: directories nested deeper than %d",
				  TRASH_DEPTH);
	if (!(p.e = calloc(TRASH_PAGE, sizeof(*p.e))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (;;) {
		bool left = false;

		if ((rc = page_read(w, dir, &p, err)) != 0 || p.n == 0)
			break;
		for (size_t i = 0; i < p.n && rc == 0; i++) {
			if ((rc = should_stop(w)) != 0)
				break;
			if (p.e[i].type == JO_TYPE_DIR)
				rc = trash_rmdir(w, dir, &p.e[i], depth, &left, err);
			else
				rc = trash_unlink(w, dir, &p.e[i], &left, err);
		}
		if (rc == 0 && left)
			rc = jo_err_set(err, JO_EIO, "trash directory %" PRIu64 ": entries that "
					"cannot be removed (immutable or append-only flags) are left",
					dir);
		if (rc)
			break;
	}
	page_free(&p);
	free(p.e);
	return rc;
}

static int do_trash(struct gc_worker *w, uint64_t dir, int64_t hour, struct jo_err *err)
{
	struct gc_run *r = w->run;
	char name[32];
	uint64_t ino = 0;
	uint8_t type = 0;
	struct jo_rm_res res;
	int rc;

	jo_trash_hour_name(hour, name);
	if (r->trash_skip || hour >= r->trash_edge) {
		w->st.k[GC_TRASH].skipped++;
		return 0;
	}
	rc = jo_meta_lookup(w->m, JO_TRASH_INODE, name, &ino, &type, err);
	if (rc == JO_ENOTFOUND || (rc == 0 && ino != dir)) {
		jo_err_clear(err);
		w->st.k[GC_TRASH].skipped++; /* already removed (by a client or another worker) */
		return 0;
	}
	if (rc)
		return rc;
	if (!r->o.delete_)
		return trash_dry(w, dir, 0, err);
	if ((rc = trash_empty(w, dir, 0, err)) != 0)
		return rc;
	if ((rc = deleter_flush(w, err)) != 0)
		return rc;
	if ((rc = may_mutate(w, err)) != 0)
		return rc;
	/* CleanupTrashBefore: doRmdir(TrashInode, name) */
	rc = jo_mut_rmdir(w->m, JO_TRASH_INODE, name, strlen(name), r->vol->fmt.dir_stats, &res,
			  err);
	if (rc == 0 && res.status == JO_RM_NOTEMPTY)
		rc = jo_err_set(err, JO_EIO, "trash directory %s: a client added entries meanwhile; "
				"left for the next run", name);
	return rc;
}

int gc_process_item(struct gc_worker *w, const char *item, struct jo_err *err)
{
	char k;
	uint64_t a, b;
	int kind, rc;

	if (parse_item(item, &k, &a, &b) != 0) {
		jo_warn("task %lld: malformed item '%.60s' ignored", (long long)w->task_id, item);
		return 0;
	}
	switch (k) {
	case 'f': kind = GC_FILE; break;
	case 's': kind = GC_SLICE; break;
	case 'd': kind = GC_DELSLICE; break;
	case 'c': kind = GC_CHUNK; break;
	case 't': kind = GC_TRASH; break;
	default:
		jo_warn("task %lld: unknown item kind '%c' ignored", (long long)w->task_id, k);
		return 0;
	}
	if (kind != GC_TRASH)
		w->st.k[kind].items++; /* trash counts the entries it removes */
	switch (kind) {
	case GC_FILE: rc = do_file(w, a, b, GC_FILE, err); break;
	case GC_SLICE:
		rc = b > UINT32_MAX ? 0 : do_slice(w, a, (uint32_t)b, err);
		break;
	case GC_DELSLICE: rc = do_delslice(w, a, (int64_t)b, err); break;
	case GC_TRASH: rc = do_trash(w, a, (int64_t)b, err); break;
	default:
		rc = b > UINT32_MAX ? 0 : do_chunk(w, a, (uint32_t)b, err);
		break;
	}
	if (rc == JO_ECONFLICT && !w->lease_lost)
		rc = JO_EIO; /* not our lease: an engine-level conflict, an item error */
	if (rc == JO_ECONNECT && jo_mut_moved(w->m)) {
		/* a failover: what this item wrote was not confirmed and nothing was
		 * acted on; what is left of it stays in the metadata for the next
		 * plan, and the handle now talks to the new master: go on */
		jo_warn("%s: %s", item, err->msg);
		w->st.k[kind].errors++;
		return 0;
	}
	if (rc == JO_ECONNECT || rc == JO_ETIMEOUT) {
		/* the metadata engine went away (connection lost, timed out, Redis
		 * LOADING/BUSY, SQLite locked): every later item would fail the same
		 * way, so the run stops here, incomplete, instead of counting them */
		jo_err_wrap(err, "%s", item);
		return rc;
	}
	if (rc && rc != JO_ECONFLICT && rc != JO_ECANCELED && rc != JO_ENOMEM) {
		/* one item failed: count it, keep going (its pending state remains in the
		 * metadata, so the next plan finds it again) */
		jo_warn("%s: %s", item, err->msg);
		w->st.k[kind].errors++;
		rc = 0;
	}
	return rc;
}

/* Process every item of a task ('\n'-separated). */
int gc_process_items(struct gc_worker *w, const char *items, struct jo_err *err)
{
	const char *p = items;
	int rc = 0;

	while (*p && rc == 0) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		char buf[256];

		if ((rc = should_stop(w)) != 0)
			break;
		if (l > 0 && l < sizeof(buf)) {
			memcpy(buf, p, l);
			buf[l] = '\0';
			rc = gc_process_item(w, buf, err);
		}
		p += l + (nl ? 1 : 0);
	}
	if (rc == JO_ECANCELED) {
		/* finish the current batch, then stop */
		struct jo_err e2 = { 0 };

		if (deleter_flush(w, &e2) != 0 && e2.code != JO_ECONFLICT && e2.code != JO_ECANCELED)
			jo_warn("%s", e2.msg);
		return jo_err_set(err, JO_ECANCELED, "stopped");
	}
	if (rc == 0)
		rc = deleter_flush(w, err);
	else
		w->npend = 0, w->pend_keys = 0; /* lease lost: leave the rest to the next owner */
	return rc;
}

/* ---- workers */

int gc_worker_init(struct gc_worker *w, struct gc_run *r, int idx, struct jo_err *err)
{
	memset(w, 0, sizeof(*w));
	w->run = r;
	snprintf(w->id, sizeof(w->id), "%s/%d", r->owner, idx);
	return jo_meta_dup(r->vol->meta, &w->m, err);
}

void gc_worker_release(struct gc_worker *w)
{
	jo_lease_free(w->lease);
	jo_meta_close(w->m);
	free(w->pend);
	w->lease = NULL;
	w->m = NULL;
	w->pend = NULL;
}

static void merge_stats(struct gc_worker *w)
{
	pthread_mutex_lock(&w->run->mu);
	gc_stats_add(&w->run->st, &w->st);
	pthread_mutex_unlock(&w->run->mu);
	memset(&w->st, 0, sizeof(w->st));
}

/* Claim and process tasks until none is left, time is up or a signal came. */
static void *worker_main(void *arg)
{
	struct gc_worker *w = arg;
	struct gc_run *r = w->run;
	struct jo_lease_opts lo = { .ns = GC_NS, .owner = w->id, .lease_ms = r->o.lease_ms };
	struct jo_err err = { 0 };
	int rc;

	rc = jo_lease_new(&w->lease, w->m, &lo, &err);
	if (rc) {
		w->rc = rc;
		w->err = err;
		return NULL;
	}
	while (should_stop(w) == 0) {
		struct jo_mut_task t;

		rc = jo_lease_claim(w->lease, w->m, &t, &err);
		if (rc == JO_ENOTFOUND)
			break;
		if (rc) {
			w->rc = rc;
			w->err = err;
			break;
		}
		w->task_id = t.id;
		w->lease_lost = false;
		jo_debug("%s: claimed task %lld (%s, attempt %lld)", w->id, (long long)t.id, t.kind,
			 (long long)t.attempts);
		rc = gc_process_items(w, t.items, &err);
		jo_mut_task_release_mem(&t);
		if (rc == 0) {
			rc = jo_lease_complete(w->lease, w->m, &err);
			if (rc == 0) {
				w->st.tasks_done++;
			} else if (rc == JO_ECONFLICT) {
				w->st.leases_lost++;
				jo_warn("%s", err.msg);
			} else {
				w->rc = rc;
				w->err = err;
			}
		} else if (rc == JO_ECONFLICT) {
			struct jo_err e2 = { 0 };

			w->st.leases_lost++;
			jo_warn("%s", err.msg);
			(void)jo_lease_release(w->lease, w->m, &e2); /* it is probably someone else's now */
		} else {
			struct jo_err e2 = { 0 };

			if (jo_lease_release(w->lease, w->m, &e2) == 0)
				w->st.tasks_released++;
			else
				jo_warn("release task %lld: %s", (long long)w->task_id, e2.msg);
			if (rc != JO_ECANCELED) {
				w->rc = rc;
				w->err = err;
			}
		}
		w->task_id = 0;
		merge_stats(w);
		if (rc == JO_ECANCELED || w->rc)
			break;
	}
	merge_stats(w);
	return NULL;
}

struct dry_scan {
	struct gc_worker *w;
	int rc;
};

static int dry_task(const struct jo_mut_task *t, void *payload)
{
	struct dry_scan *d = payload;
	struct jo_err err = { 0 };
	int rc;

	d->w->task_id = t->id;
	rc = gc_process_items(d->w, t->items, &err);
	if (rc) {
		d->w->rc = rc;
		d->w->err = err;
		return rc;
	}
	return 0;
}

int gc_work(struct gc_run *r, struct jo_err *err)
{
	int n = r->o.threads > 0 ? r->o.threads : 1;
	struct gc_worker *ws;
	pthread_t *th;
	int rc = 0;

	if (!r->o.delete_) {
		/* dry-run: look at every recorded task without claiming it */
		struct gc_worker w;
		struct dry_scan d;
		int64_t total = 0, leased = 0;
		struct jo_err e2 = { 0 };

		if (jo_mut_task_count(r->vol->meta, GC_NS, &total, &leased, &e2) != 0 || total == 0)
			return 0; /* nothing recorded (SQLite: no task table yet) */
		if ((rc = gc_worker_init(&w, r, 0, err)) != 0)
			return rc;
		d.w = &w;
		d.rc = 0;
		rc = jo_mut_task_scan(w.m, GC_NS, dry_task, &d, err);
		if (rc && w.rc) {
			*err = w.err;
			rc = w.rc;
		}
		merge_stats(&w);
		gc_worker_release(&w);
		return rc == JO_ECANCELED ? jo_err_set(err, JO_ECANCELED, "interrupted") : rc;
	}
	/* a worker may start before any planner ever ran */
	if ((rc = jo_mut_task_init(r->vol->meta, GC_NS, err)) != 0)
		return rc;
	ws = calloc((size_t)n, sizeof(*ws));
	th = calloc((size_t)n, sizeof(*th));
	if (!ws || !th) {
		free(ws);
		free(th);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++) {

		if ((rc = gc_worker_init(&ws[i], r, i, err)) != 0) {
			n = i;
			break;
		}
		rc = jo_thread_start(&th[i], worker_main, &ws[i]);
		if (rc) {
			gc_worker_release(&ws[i]);
			rc = jo_err_set(err, JO_ENOMEM, "cannot start worker thread");
			n = i;
			break;
		}
	}
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		if (ws[i].rc && rc == 0) {
			rc = ws[i].rc;
			*err = ws[i].err;
		}
		gc_worker_release(&ws[i]);
	}
	free(ws);
	free(th);
	if (rc == 0 && jo_cancelled())
		rc = jo_err_set(err, JO_ECANCELED, "interrupted");
	return rc;
}
