/* Compaction bookkeeping on SQLite (spec §6.5, §4.5, §3.11). */
#include "common/meta/meta_compact.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/engine_internal.h"
#include "common/meta/meta_internal.h"

int jo_meta_sqlite_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				   struct jo_err *err);
int jo_meta_sqlite_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				  struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err);
int jo_meta_sqlite_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				 struct jo_err *err);
int jo_meta_sqlite_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
				 struct jo_err *err);

int jo_meta_sqlite_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				   struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int64_t v = 0;
	int rc;

	rc = jo_sq_begin(m, err);
	if (rc)
		return rc;
	rc = jo_sq_prep(m, NULL, &st, err, "SELECT value FROM @counter WHERE name='nextChunk'");
	if (rc)
		goto fail;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		v = sqlite3_column_int64(st, 0);
	} else if (rc != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, "read nextChunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (v < 1)
		v = 1;  /* format initialises it to 1; id 0 is never a slice */
	rc = jo_sq_prep(m, NULL, &st, err, "INSERT INTO @counter (name, value) VALUES ('nextChunk', ?) "
		  "ON CONFLICT(name) DO UPDATE SET value = excluded.value");
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, v + n);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, "update nextChunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	rc = jo_sq_commit(m, err);
	if (rc)
		return rc;
	/* SQL holds the next free id: we own v .. v+n-1 */
	*first = (uint64_t)v;
	return 0;
fail:
	sqlite3_finalize(st);
	jo_sq_rollback(m);
	return rc;
}

static int ref_count(struct jo_meta *m, uint64_t id, int64_t *refs, bool *found,
		     struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = jo_sq_prep(m, NULL, &st, err, "SELECT refs FROM @chunk_ref WHERE chunkid=?");

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	rc = sqlite3_step(st);
	*found = rc == SQLITE_ROW;
	if (*found)
		*refs = sqlite3_column_int64(st, 0);
	rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? 0 : jo_sq_fail(m, err, "read chunk_ref");
	sqlite3_finalize(st);
	return rc;
}

int jo_meta_sqlite_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				  struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	const uint8_t *cur;
	size_t curlen, olen = c->norigin * 24, nlen;
	uint8_t *next = NULL, *delayed = NULL;
	size_t ndelayed = 0;
	struct jo_slice ns = { .pos = c->pos, .id = c->new_id, .size = c->size, .len = c->size };
	int rc;

	*freed = NULL;
	*nfreed = 0;
	rc = jo_sq_begin(m, err);
	if (rc)
		return rc;
	rc = jo_sq_prep(m, NULL, &st, err, "SELECT slices FROM @chunk WHERE inode=? AND indx=?");
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)c->ino);
	sqlite3_bind_int64(st, 2, c->indx);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = rc == SQLITE_DONE ? jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u is gone",
						    (unsigned long long)c->ino, c->indx)
				       : jo_sq_fail(m, err, "read chunk");
		goto fail;
	}
	/* TEXT after `||` appends: blob accessors still give every byte */
	cur = sqlite3_column_blob(st, 0);
	curlen = (size_t)sqlite3_column_bytes(st, 0);
	if (curlen < olen || memcmp(cur, c->origin, olen)) {
		rc = jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u changed during compaction",
				(unsigned long long)c->ino, c->indx);
		goto fail;
	}
	nlen = c->skipped * 24 + 24 + (curlen - olen);
	next = malloc(nlen);
	delayed = malloc((c->norigin - c->skipped) * 12 + 1);
	if (!next || !delayed) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	memcpy(next, cur, c->skipped * 24);
	jo_slice_encode(&ns, next + c->skipped * 24);
	memcpy(next + c->skipped * 24 + 24, cur + olen, curlen - olen);
	sqlite3_finalize(st);
	st = NULL;

	rc = jo_sq_prep(m, NULL, &st, err, "UPDATE @chunk SET slices=? WHERE inode=? AND indx=?");
	if (rc)
		goto fail;
	sqlite3_bind_blob(st, 1, next, (int)nlen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)c->ino);
	sqlite3_bind_int64(st, 3, c->indx);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, "update chunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;

	rc = jo_sq_prep(m, NULL, &st, err, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES (?, ?, 1)");
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)c->new_id);
	sqlite3_bind_int64(st, 2, c->size);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, "insert chunk_ref");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;

	for (size_t i = c->skipped; i < c->norigin; i++) {
		struct jo_slice s;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id)
			continue;
		if (c->trash_days > 0) {
			for (int b = 0; b < 8; b++)
				delayed[ndelayed * 12 + b] = (uint8_t)(s.id >> (56 - 8 * b));
			for (int b = 0; b < 4; b++)
				delayed[ndelayed * 12 + 8 + b] = (uint8_t)(s.size >> (24 - 8 * b));
			ndelayed++;
			continue;
		}
		rc = jo_sq_prep(m, NULL, &st, err, "UPDATE @chunk_ref SET refs=refs-1 WHERE chunkid=? AND size=?");
		if (rc)
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)s.id);
		sqlite3_bind_int64(st, 2, s.size);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = jo_sq_fail(m, err, "update chunk_ref");
			goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	if (ndelayed) {
		rc = jo_sq_prep(m, NULL, &st, err, "INSERT INTO @delslices (chunkid, deleted, slices) VALUES (?, ?, ?)");
		if (rc)
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)c->new_id);
		sqlite3_bind_int64(st, 2, c->now);
		sqlite3_bind_blob(st, 3, delayed, (int)(ndelayed * 12), SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = jo_sq_fail(m, err, "insert delslices");
			goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	rc = jo_sq_commit(m, err);
	if (rc) {
		/* lost reply: the new slice's row decides */
		int64_t refs;
		bool found = false;
		struct jo_err e2 = { 0 };

		if (ref_count(m, c->new_id, &refs, &found, &e2) || !found)
			goto out;
		rc = 0;
	}
	if (c->trash_days <= 0) {
		/* re-read the old slices' counts: <= 0 means nobody references them */
		for (size_t i = c->skipped; i < c->norigin && !rc; i++) {
			struct jo_slice s;
			int64_t refs = 1;
			bool found = false, dup = false;

			jo_slice_decode(c->origin + i * 24, &s);
			if (!s.id)
				continue;
			for (size_t k = 0; k < *nfreed; k++)
				dup |= (*freed)[k].id == s.id;
			if (dup)
				continue;
			rc = ref_count(m, s.id, &refs, &found, err);
			if (!rc && found && refs <= 0) {
				struct jo_slice_id *nv = realloc(*freed, (*nfreed + 1) * sizeof(*nv));

				if (!nv) {
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
					break;
				}
				nv[*nfreed].id = s.id;
				nv[*nfreed].size = s.size;
				*freed = nv;
				(*nfreed)++;
			}
		}
		if (rc) {
			/* committed anyway; what we could not re-read stays pending for gc */
			rc = 0;
		}
	}
	goto out;
fail:
	sqlite3_finalize(st);
	st = NULL;
	jo_sq_rollback(m);
out:
	sqlite3_finalize(st);
	free(next);
	free(delayed);
	return rc;
}

int jo_meta_sqlite_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				 struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = jo_sq_begin(m, err);

	if (rc)
		return rc;
	rc = jo_sq_prep(m, NULL, &st, err, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES (?, ?, 0)");
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_int64(st, 2, size);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, "insert chunk_ref");
		goto fail;
	}
	sqlite3_finalize(st);
	return jo_sq_commit(m, err);
fail:
	sqlite3_finalize(st);
	jo_sq_rollback(m);
	return rc;
}

int jo_meta_sqlite_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
				 struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!n)
		return 0;
	rc = jo_sq_begin(m, err);
	if (rc)
		return rc;
	rc = jo_sq_prep(m, NULL, &st, err, "DELETE FROM @chunk_ref WHERE chunkid=? AND refs<=0");
	for (size_t i = 0; !rc && i < n; i++) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)v[i].id);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = jo_sq_fail(m, err, "delete chunk_ref");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (rc) {
		jo_sq_rollback(m);
		return rc;
	}
	return jo_sq_commit(m, err);
}
