/* Compaction bookkeeping on SQLite (spec §6.5, §4.5, §3.11). */
#include "common/meta/meta_compact.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta_internal.h"

int jo_meta_sqlite_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				   struct jo_err *err);
int jo_meta_sqlite_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				  struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err);
int jo_meta_sqlite_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				 struct jo_err *err);
int jo_meta_sqlite_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
				 struct jo_err *err);

#define BUSY_RETRIES 50

static int sfail(struct jo_meta *m, struct jo_err *err, const char *what)
{
	sqlite3 *db = jo_meta_sqlite_db(m);
	int ec = sqlite3_extended_errcode(db) & 0xff;

	return jo_err_set(err, ec == SQLITE_BUSY || ec == SQLITE_LOCKED ? JO_ETIMEOUT : JO_EIO,
			  "sqlite3 %s: %s: %s", m->url.path, what, sqlite3_errmsg(db));
}

static int prep(struct jo_meta *m, sqlite3_stmt **st, const char *fmt, struct jo_err *err)
{
	char sql[512];
	const char *p = jo_meta_sqlite_prefix(m);
	size_t o = 0, pl = strlen(p);

	/* every '@' in fmt is the table prefix */
	for (; *fmt && o + pl + 1 < sizeof(sql); fmt++) {
		if (*fmt == '@') {
			memcpy(sql + o, p, pl);
			o += pl;
		} else {
			sql[o++] = *fmt;
		}
	}
	sql[o] = '\0';
	if (sqlite3_prepare_v2(jo_meta_sqlite_db(m), sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return sfail(m, err, "prepare");
	}
	return 0;
}

/* BEGIN IMMEDIATE, retried while another writer holds the lock. */
static int begin(struct jo_meta *m, struct jo_err *err)
{
	for (int i = 0; i < BUSY_RETRIES; i++) {
		int rc = sqlite3_exec(jo_meta_sqlite_db(m), "BEGIN IMMEDIATE", NULL, NULL, NULL);

		if (rc == SQLITE_OK)
			return 0;
		if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
			return sfail(m, err, "BEGIN IMMEDIATE");
		usleep(20000);
	}
	return sfail(m, err, "BEGIN IMMEDIATE");
}

static void rollback(struct jo_meta *m)
{
	(void)sqlite3_exec(jo_meta_sqlite_db(m), "ROLLBACK", NULL, NULL, NULL);
}

static int commit(struct jo_meta *m, struct jo_err *err)
{
	for (int i = 0; i < BUSY_RETRIES; i++) {
		int rc = sqlite3_exec(jo_meta_sqlite_db(m), "COMMIT", NULL, NULL, NULL);

		if (rc == SQLITE_OK)
			return 0;
		if ((rc & 0xff) != SQLITE_BUSY)
			break;
		usleep(20000);
	}
	{
		int code = sfail(m, err, "COMMIT");

		rollback(m);
		return code;
	}
}

int jo_meta_sqlite_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				   struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int64_t v = 0;
	int rc;

	rc = begin(m, err);
	if (rc)
		return rc;
	rc = prep(m, &st, "SELECT value FROM @counter WHERE name='nextChunk'", err);
	if (rc)
		goto fail;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		v = sqlite3_column_int64(st, 0);
	} else if (rc != SQLITE_DONE) {
		rc = sfail(m, err, "read nextChunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (v < 1)
		v = 1;  /* format initialises it to 1; id 0 is never a slice */
	rc = prep(m, &st, "INSERT INTO @counter (name, value) VALUES ('nextChunk', ?) "
		  "ON CONFLICT(name) DO UPDATE SET value = excluded.value", err);
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, v + n);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = sfail(m, err, "update nextChunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	rc = commit(m, err);
	if (rc)
		return rc;
	/* SQL holds the next free id: we own v .. v+n-1 */
	*first = (uint64_t)v;
	return 0;
fail:
	sqlite3_finalize(st);
	rollback(m);
	return rc;
}

static int ref_count(struct jo_meta *m, uint64_t id, int64_t *refs, bool *found,
		     struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = prep(m, &st, "SELECT refs FROM @chunk_ref WHERE chunkid=?", err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	rc = sqlite3_step(st);
	*found = rc == SQLITE_ROW;
	if (*found)
		*refs = sqlite3_column_int64(st, 0);
	rc = (rc == SQLITE_ROW || rc == SQLITE_DONE) ? 0 : sfail(m, err, "read chunk_ref");
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
	rc = begin(m, err);
	if (rc)
		return rc;
	rc = prep(m, &st, "SELECT slices FROM @chunk WHERE inode=? AND indx=?", err);
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)c->ino);
	sqlite3_bind_int64(st, 2, c->indx);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = rc == SQLITE_DONE ? jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u is gone",
						    (unsigned long long)c->ino, c->indx)
				       : sfail(m, err, "read chunk");
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

	rc = prep(m, &st, "UPDATE @chunk SET slices=? WHERE inode=? AND indx=?", err);
	if (rc)
		goto fail;
	sqlite3_bind_blob(st, 1, next, (int)nlen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)c->ino);
	sqlite3_bind_int64(st, 3, c->indx);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = sfail(m, err, "update chunk");
		goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;

	rc = prep(m, &st, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES (?, ?, 1)", err);
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)c->new_id);
	sqlite3_bind_int64(st, 2, c->size);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = sfail(m, err, "insert chunk_ref");
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
		rc = prep(m, &st, "UPDATE @chunk_ref SET refs=refs-1 WHERE chunkid=? AND size=?", err);
		if (rc)
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)s.id);
		sqlite3_bind_int64(st, 2, s.size);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = sfail(m, err, "update chunk_ref");
			goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	if (ndelayed) {
		rc = prep(m, &st, "INSERT INTO @delslices (chunkid, deleted, slices) VALUES (?, ?, ?)", err);
		if (rc)
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)c->new_id);
		sqlite3_bind_int64(st, 2, c->now);
		sqlite3_bind_blob(st, 3, delayed, (int)(ndelayed * 12), SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE) {
			rc = sfail(m, err, "insert delslices");
			goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
	}
	rc = commit(m, err);
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
	rollback(m);
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
	int rc = begin(m, err);

	if (rc)
		return rc;
	rc = prep(m, &st, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES (?, ?, 0)", err);
	if (rc)
		goto fail;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_int64(st, 2, size);
	if (sqlite3_step(st) != SQLITE_DONE) {
		rc = sfail(m, err, "insert chunk_ref");
		goto fail;
	}
	sqlite3_finalize(st);
	return commit(m, err);
fail:
	sqlite3_finalize(st);
	rollback(m);
	return rc;
}

int jo_meta_sqlite_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
				 struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!n)
		return 0;
	rc = begin(m, err);
	if (rc)
		return rc;
	rc = prep(m, &st, "DELETE FROM @chunk_ref WHERE chunkid=? AND refs<=0", err);
	for (size_t i = 0; !rc && i < n; i++) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)v[i].id);
		if (sqlite3_step(st) != SQLITE_DONE)
			rc = sfail(m, err, "delete chunk_ref");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (rc) {
		rollback(m);
		return rc;
	}
	return commit(m, err);
}
