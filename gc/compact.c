/* Compaction of one chunk (spec §6). */
#include "gc/compact.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/audit.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_mut.h"
#include "common/object/object.h"

static bool same_record(const struct jo_slice *a, const struct jo_slice *b)
{
	return a->pos == b->pos && a->id == b->id && a->size == b->size &&
	       a->off == b->off && a->len == b->len;
}

/* Segments of recs, without leading and trailing holes (JuiceFS compactChunk). */
static int trimmed_segments(const struct jo_slice *recs, size_t n, struct compact_pick *p)
{
	struct jo_slice *segs = NULL;
	size_t ns = 0, first = 0;
	uint64_t size = 0;
	int rc;

	p->segs = NULL;
	p->nsegs = 0;
	p->pos = 0;
	p->size = 0;
	rc = jo_chunk_visible(recs, n, &segs, &ns);
	if (rc)
		return rc;
	while (ns - first > 1) {
		if (segs[first].id == 0) {
			p->pos += segs[first].len;
			first++;
		} else if (segs[ns - 1].id == 0) {
			ns--;
		} else {
			break;
		}
	}
	if (ns - first == 1 && segs[first].id == 0)
		segs[first].len = 1;   /* an all-hole chunk becomes a 1-byte zero slice */
	for (size_t i = first; i < ns; i++)
		size += segs[i].len;
	if (first)
		memmove(segs, segs + first, (ns - first) * sizeof(*segs));
	p->segs = segs;
	p->nsegs = ns - first;
	p->size = (uint32_t)size;
	return 0;
}

size_t compact_skip_some(const struct jo_slice *recs, size_t n)
{
	size_t skipped = 0;

	while (skipped < n) {
		const struct jo_slice *first = &recs[skipped];
		struct compact_pick p;
		bool stop;

		if (trimmed_segments(recs + skipped, n - skipped, &p))
			break;
		stop = first->len < (1u << 20) || (uint64_t)first->len * 5 < p.size ||
		       p.size == 0 || p.nsegs == 0 ||
		       !(p.pos == first->pos && p.segs[0].id == first->id &&
			 p.segs[0].off == first->off && p.segs[0].len == first->len);
		free(p.segs);
		if (stop)
			break;
		for (size_t i = skipped + 1; i < n; i++)
			if (same_record(&recs[i], first))
				return skipped;
		skipped++;
	}
	return skipped;
}

int compact_pick(const struct jo_slice *recs, size_t n, struct compact_pick *pick)
{
	int rc;

	memset(pick, 0, sizeof(*pick));
	if (n > COMPACT_MAX_RECORDS)
		n = COMPACT_MAX_RECORDS;
	pick->skipped = compact_skip_some(recs, n);
	pick->ncompacted = n - pick->skipped;
	rc = trimmed_segments(recs + pick->skipped, pick->ncompacted, pick);
	if (rc)
		return rc;
	/* JuiceFS panics here; we refuse the chunk instead */
	for (size_t i = 0; i < pick->skipped && pick->size; i++) {
		uint64_t s = recs[i].pos, e = s + recs[i].len;

		if ((uint64_t)pick->pos + pick->size > s && e > pick->pos)
			return JO_EPROTO;
	}
	return 0;
}

void compact_pick_release(struct compact_pick *pick)
{
	free(pick->segs);
	pick->segs = NULL;
}

static size_t count_true(const bool *b, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += b[i];
	return c;
}

/*
 * Remove the blocks of the slices nobody references any more (each one's
 * count, re-read now, must say so, and the engine must confirm it as
 * durable (jo_mut_confirm); a slice still referenced, or whose count could
 * not be read, is left alone), in as few DeleteObjects requests as
 * the keys of all of them need; audit each key. deleted[i] says slice i is
 * gone whole, so its count may be forgotten. Returns the first error (the
 * slices it concerns stay pending for gc); the others are still tried.
 */
static int delete_slices_blocks(struct jo_vol *v, const struct jo_slice_id *sl, size_t n,
				const char *reason, const struct compact_audit *au,
				struct compact_result *res, bool *deleted, struct jo_err *err)
{
	char (*keys)[256] = NULL;
	const char **kp = NULL;
	int *results = NULL;
	size_t *owner = NULL, nk = 0, cap = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		bool deletable = false;
		struct jo_err e2 = { 0 };
		int r = jo_mut_slice_deletable(v->meta, sl[i].id, sl[i].size, &deletable, &e2);

		deleted[i] = false;
		if (r) {
			if (!rc) {
				*err = e2;
				rc = r;
			}
			continue;
		}
		if (deletable) {
			deleted[i] = true;  /* until one of its keys fails */
			cap += jo_slice_nblocks(sl[i].size, v->block_size);
		}
	}
	if (!cap)
		return rc;
	{
		/* what those counts say (and what was written before them) must be
		 * known durable, or a failover could take it back after the delete */
		struct jo_err ce = { 0 };
		int crc = jo_mut_confirm(v->meta, &ce);

		if (crc) {
			for (size_t i = 0; i < n; i++)
				deleted[i] = false;
			*err = ce;
			return crc;
		}
	}
	keys = calloc(cap, sizeof(*keys));
	kp = calloc(cap, sizeof(*kp));
	results = calloc(cap, sizeof(*results));
	owner = calloc(cap, sizeof(*owner));
	if (!keys || !kp || !results || !owner) {
		for (size_t i = 0; i < n; i++)
			deleted[i] = false;
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!deleted[i])
			continue;
		uint32_t nb = jo_slice_nblocks(sl[i].size, v->block_size);

		for (uint32_t b = 0; b < nb; b++, nk++) {
			jo_vol_block_key(v, keys[nk], sizeof(keys[nk]), sl[i].id, b,
					 jo_block_len(sl[i].size, v->block_size, b));
			kp[nk] = keys[nk];
			owner[nk] = i;
		}
	}
	struct jo_err be = { 0 };
	int brc = jo_obj_delete_batch(v->obj, kp, nk, results, &be);

	if (brc && !rc) {
		*err = be;
		rc = brc;
	}
	for (size_t k = 0; k < nk; k++) {
		size_t i = owner[k];
		int r = brc ? brc : results[k];
		struct jo_audit_rec ar = {
			.action = "delete", .worker = au ? au->worker : NULL, .task = au ? au->task : 0,
			.key = keys[k], .slice_id = sl[i].id, .slice_size = sl[i].size, .reason = reason,
			.result = r == 0 ? "ok" : r == JO_ENOTFOUND ? "not-found" : "error",
			.error = r && r != JO_ENOTFOUND ? jo_err_name(r) : NULL,
		};

		if (au && au->audit)
			(void)jo_audit_write(au->audit, &ar, NULL);  /* audit errors surface at close */
		if (r == 0 || r == JO_ENOTFOUND) {
			res->blocks_deleted++;
		} else {
			deleted[i] = false;
			if (!rc)
				rc = jo_err_set(err, r, "delete block '%s': %s", keys[k], jo_err_name(r));
		}
	}
out:
	free(keys);
	free(kp);
	free(results);
	free(owner);
	return rc;
}

/* Delete the blocks of one unreferenced slice, then forget its count. */
static int drop_slice(struct jo_vol *v, uint64_t id, uint32_t size, const char *reason,
		      const struct compact_audit *au, struct compact_result *res, struct jo_err *err)
{
	struct jo_slice_id one = { id, size };
	bool deleted = false;
	int rc = delete_slices_blocks(v, &one, 1, reason, au, res, &deleted, err);

	if (!rc && deleted)
		rc = jo_meta_forget_slices(v->meta, &one, 1, err);
	return rc;
}

/* Do the first n records of the chunk still equal origin? */
static bool chunk_changed(struct jo_vol *v, uint64_t ino, uint32_t indx, const uint8_t *origin,
			  size_t n)
{
	uint8_t *raw = NULL;
	size_t len = 0;
	struct jo_err e = { 0 };
	bool changed;

	if (jo_meta_read_chunk(v->meta, ino, indx, &raw, &len, &e))
		return false;
	changed = len < n * JO_SLICE_REC_LEN || memcmp(raw, origin, n * JO_SLICE_REC_LEN);
	free(raw);
	return changed;
}

int compact_chunk(struct jo_vol *v, uint64_t ino, uint32_t indx, const struct compact_audit *au,
		  struct compact_result *res, struct jo_err *err)
{
	uint8_t *raw = NULL;
	size_t rawlen = 0, n = 0, nfreed = 0;
	struct jo_slice *recs = NULL;
	struct jo_slice_id *freed = NULL;
	struct compact_pick pick = { 0 };
	struct jo_compact_commit cc = { 0 };
	struct compact_src *src = NULL;
	uint64_t id = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = jo_meta_read_chunk(v->meta, ino, indx, &raw, &rawlen, err);
	if (rc)
		return rc;
	rc = jo_slices_decode(raw, rawlen, &recs, &n, err);
	if (rc)
		goto out;
	res->records_before = n;
	if (n > COMPACT_MAX_RECORDS)
		n = COMPACT_MAX_RECORDS;
	/* an engine whose commits are smaller (etcd: 100 records, as juicefs) */
	if (jo_meta_compact_max_records(v->meta) && n > jo_meta_compact_max_records(v->meta))
		n = jo_meta_compact_max_records(v->meta);
	rc = compact_pick(recs, n, &pick);
	if (rc) {
		rc = jo_err_set(err, rc == JO_EPROTO ? JO_EPROTO : rc,
				"inode %llu chunk %u: kept records overlap the compacted range",
				(unsigned long long)ino, indx);
		goto out;
	}
	if (pick.ncompacted < 2 || pick.size == 0) {
		res->outcome = COMPACT_NOTHING;
		res->records_after = res->records_before;
		goto out;
	}
	rc = jo_meta_alloc_slice_ids(v->meta, 1, &id, err);
	if (rc)
		goto out;
	rc = compact_src_new(v, pick.segs, pick.nsegs, &src, err);
	if (rc)
		goto out;
	rc = jo_vol_write_slice(v, id, pick.size, compact_src_fill, src, err);
	compact_src_counts(src, &res->bytes_read, &res->gets);
	compact_src_free(src);
	if (rc == JO_ENOTFOUND && chunk_changed(v, ino, indx, raw, n)) {
		/* another compactor (a live client) won and freed the old slices
		 * while we read them: our half-written slice is already removed */
		res->outcome = COMPACT_CONFLICT;
		res->records_after = res->records_before;
		jo_err_clear(err);
		rc = 0;
		goto out;
	}
	if (rc) {
		jo_err_wrap(err, "inode %llu chunk %u: write slice %llu",
			    (unsigned long long)ino, indx, (unsigned long long)id);
		goto out;
	}
	res->bytes_written = pick.size;
	res->new_id = id;
	res->new_size = pick.size;

	cc.ino = ino;
	cc.indx = indx;
	cc.origin = raw;
	cc.norigin = n;
	cc.skipped = pick.skipped;
	cc.pos = pick.pos;
	cc.new_id = id;
	cc.size = pick.size;
	cc.trash_days = v->fmt.trash_days;
	cc.now = (int64_t)time(NULL);
	rc = jo_meta_compact_commit(v->meta, &cc, &freed, &nfreed, err);
	if (rc == JO_ECONFLICT) {
		struct jo_err e2 = { 0 };

		/* the chunk changed: our slice is garbage. Mark it pending first so
		 * a crash now leaves a slice gc can see, then remove it. */
		res->outcome = COMPACT_CONFLICT;
		rc = jo_meta_slice_abandon(v->meta, id, pick.size, &e2);
		if (!rc)
			rc = drop_slice(v, id, pick.size, "abandoned-compaction", au, res, &e2);
		if (rc) {
			*err = e2;
			goto out;
		}
		res->records_after = res->records_before;
		goto out;
	}
	if (rc) {
		jo_err_wrap(err, "inode %llu chunk %u: commit", (unsigned long long)ino, indx);
		goto out;
	}
	if (err->code) {
		/* done, but what it freed could not be confirmed: gc's to reclaim */
		jo_warn("inode %llu chunk %u: compacted; the slices it freed stay pending: %s",
			(unsigned long long)ino, indx, err->msg);
		jo_err_clear(err);
	}
	res->outcome = COMPACT_DONE;
	res->records_after = res->records_before - n + pick.skipped + 1;
	/* blocks first (each slice re-checked, all their keys in as few
	 * requests as they need), then the counts in one go */
	if (nfreed) {
		bool *gone = calloc(nfreed, sizeof(*gone));
		size_t ngone = 0;
		struct jo_err e2 = { 0 };

		if (!gone) {
			/* the refs stay <= 0: gc finishes them */
			jo_warn("%zu freed slices stay pending: out of memory", nfreed);
			goto out;
		}
		if (delete_slices_blocks(v, freed, nfreed, "compacted-slice", au, res, gone, &e2))
			/* the ref of each slice not deleted whole stays <= 0: gc finishes it */
			jo_warn("%zu of %zu freed slices stay pending: %s",
				nfreed - count_true(gone, nfreed), nfreed, e2.msg);
		for (size_t i = 0; i < nfreed; i++)
			if (gone[i])
				freed[ngone++] = freed[i];
		free(gone);
		if (ngone) {
			jo_err_clear(&e2);
			if (jo_meta_forget_slices(v->meta, freed, ngone, &e2))
				jo_warn("%zu freed slices stay pending (gc forgets them): %s", ngone, e2.msg);
			else
				res->slices_freed += ngone;
		}
	}
out:
	compact_pick_release(&pick);
	free(freed);
	free(recs);
	free(raw);
	return rc;
}
