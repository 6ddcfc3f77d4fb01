/*
 * sql/compact.c: compaction bookkeeping in the sql family (spec §6.5, §4.5,
 * §3.11; juicefs-engines.md A.4, A.5), as juicefs's doCompactChunk and
 * incrCounter run it: the chunk row is locked first (FOR UPDATE), then the
 * chunk_ref rows; never a node row after a chunk row. Each transaction is
 * tried again on a lock conflict, deadlock or serialization failure.
 */
#include "common/meta/meta_compact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

/* nextChunk += n: read it FOR UPDATE, then UPDATE it, or INSERT it if missing. */
static int alloc_once(struct jo_meta *m, uint32_t n, uint64_t *first, struct jo_err *err)
{
	int64_t row[1] = { 0 }, v;
	bool found = false;
	int rc;

	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	rc = jo_sql_run(m, NULL, "SELECT value FROM @counter WHERE name='nextChunk'~", NULL, 0, NULL,
			0, row, 1, &found, NULL, err);
	if (rc)
		goto fail;
	/* format initialises it to 1; id 0 is never a slice */
	v = found && row[0] >= 1 ? row[0] : 1;
	if (found)
		rc = JO_SQL_RUN(m, err, "UPDATE @counter SET value=? WHERE name='nextChunk'", v + n);
	else
		rc = JO_SQL_RUN(m, err, "INSERT INTO @counter (name, value) VALUES ('nextChunk', ?)",
				v + n);
	if (rc)
		goto fail;
	if ((rc = jo_sql_commit(m, err)) != 0)
		return rc;
	/* SQL holds the next free id: we own v .. v+n-1 */
	*first = (uint64_t)v;
	return 0;
fail:
	jo_sql_rollback(m);
	return rc;
}

static int s_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = alloc_once(m, n, first, err);

		if (rc == 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

/* The 12-byte delayed records of the compacted slices (trash on). */
static size_t delayed_of(const struct jo_compact_commit *c, uint8_t *out)
{
	size_t n = 0;

	for (size_t i = c->skipped; i < c->norigin; i++) {
		struct jo_slice s;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id)
			continue;
		jo_put_be64(out + n * 12, s.id);
		jo_put_be32(out + n * 12 + 8, s.size);
		n++;
	}
	return n;
}

/* One attempt of the commit transaction. */
static int commit_once(struct jo_meta *m, const struct jo_compact_commit *c, const uint8_t *delayed,
		       size_t ndelayed, struct jo_err *err)
{
	const struct jo_sql_dialect *d = jo_sql_dialect_of(m);
	struct jo_slice ns = { .pos = c->pos, .id = c->new_id, .size = c->size, .len = c->size };
	size_t olen = c->norigin * 24, curlen, nlen;
	struct jo_sqls *st = NULL;
	const uint8_t *cur;
	uint8_t *next = NULL;
	int rc, s;

	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	if ((rc = jo_sql_prep(m, NULL, &st, err,
			      "SELECT slices FROM @chunk WHERE inode=? AND indx=?~")) != 0)
		goto fail;
	jo_sql_i64(m, st, 1, (int64_t)c->ino);
	jo_sql_i64(m, st, 2, c->indx);
	s = jo_sql_step(m, st, err);
	if (s <= 0) {
		rc = s == 0 ? jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u is gone",
					 (unsigned long long)c->ino, c->indx)
			    : jo_err_wrap(err, "read chunk");
		goto fail;
	}
	cur = jo_sql_col_blob(m, st, 0, &curlen);
	if (curlen < olen || memcmp(cur, c->origin, olen)) {
		rc = jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u changed during compaction",
				(unsigned long long)c->ino, c->indx);
		goto fail;
	}
	nlen = c->skipped * 24 + 24 + (curlen - olen);
	if (d->max_blob && nlen > d->max_blob) {
		rc = jo_err_set(err, JO_ECONFLICT, "chunk %llu/%u: %zu bytes would not fit the %s "
				"column", (unsigned long long)c->ino, c->indx, nlen, d->label);
		goto fail;
	}
	if (!(next = malloc(nlen))) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	memcpy(next, cur, c->skipped * 24);
	jo_slice_encode(&ns, next + c->skipped * 24);
	memcpy(next + c->skipped * 24 + 24, cur + olen, curlen - olen);
	jo_sql_free(m, st);
	st = NULL;

	if ((rc = jo_sql_prep(m, NULL, &st, err,
			      "UPDATE @chunk SET slices=? WHERE inode=? AND indx=?")) != 0)
		goto fail;
	jo_sql_blob(m, st, 1, next, nlen);
	jo_sql_i64(m, st, 2, (int64_t)c->ino);
	jo_sql_i64(m, st, 3, c->indx);
	if ((rc = jo_sql_step(m, st, err)) < 0) {
		jo_err_wrap(err, "update chunk");
		goto fail;
	}
	jo_sql_free(m, st);
	st = NULL;
	if ((rc = JO_SQL_RUN(m, err, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES (?, ?, 1)",
			     (int64_t)c->new_id, c->size)) != 0)
		goto fail;
	if (c->trash_days <= 0) {
		for (size_t i = c->skipped; i < c->norigin; i++) {
			struct jo_slice sl;

			jo_slice_decode(c->origin + i * 24, &sl);
			if (sl.id && (rc = JO_SQL_RUN(m, err, "UPDATE @chunk_ref SET refs=refs-1 WHERE "
						      "chunkid=? AND size=?", (int64_t)sl.id,
						      sl.size)) != 0)
				goto fail;
		}
	} else if (ndelayed) {
		if ((rc = jo_sql_prep(m, NULL, &st, err, "INSERT INTO @delslices (chunkid, deleted, "
				      "slices) VALUES (?, ?, ?)")) != 0)
			goto fail;
		jo_sql_i64(m, st, 1, (int64_t)c->new_id);
		jo_sql_i64(m, st, 2, c->now);
		jo_sql_blob(m, st, 3, delayed, ndelayed * 12);
		if ((rc = jo_sql_step(m, st, err)) < 0) {
			jo_err_wrap(err, "insert delslices");
			goto fail;
		}
		jo_sql_free(m, st);
		st = NULL;
	}
	free(next);
	return jo_sql_commit(m, err);
fail:
	jo_sql_free(m, st);
	jo_sql_rollback(m);
	free(next);
	return rc;
}

static int s_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
			    struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	uint8_t *delayed = malloc((c->norigin - c->skipped) * 12 + 1);
	size_t ndelayed;
	int rc;

	*freed = NULL;
	*nfreed = 0;
	if (!delayed)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	ndelayed = c->trash_days > 0 ? delayed_of(c, delayed) : 0;
	for (int attempt = 0;; attempt++) {
		rc = commit_once(m, c, delayed, ndelayed, err);
		if (rc == 0 || rc == JO_ECONFLICT || rc == JO_EPROTO ||
		    attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			break;
	}
	free(delayed);
	if (rc && rc != JO_ECONFLICT) {
		/* a lost reply: the new slice's row decides whether it committed */
		int64_t refs;
		bool found = false;
		struct jo_err e2 = { 0 };

		if (jo_sql_slice_refs(m, c->new_id, &refs, &found, &e2) || !found)
			return rc;
		rc = 0;
	}
	if (rc)
		return rc;
	jo_err_clear(err); /* a failed attempt before it is not this commit's error */
	if (c->trash_days > 0)
		return 0;
	/* re-read the old slices' counts: <= 0 means nobody references them; what
	 * cannot be re-read stays pending for gc (the commit stands either way) */
	for (size_t i = c->skipped; i < c->norigin; i++) {
		struct jo_slice s;
		int64_t refs = 1;
		bool found = false;
		struct jo_err e2 = { 0 };

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id || jo_sql_slice_refs(m, s.id, &refs, &found, &e2))
			continue;
		if (found && refs <= 0 && jo_slice_id_add(freed, nfreed, s.id, s.size))
			return 0; /* out of memory: the rest stays pending for gc */
	}
	return 0;
}

static int s_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = JO_SQL_RUN(m, err, "INSERT INTO @chunk_ref (chunkid, size, refs) VALUES "
				    "(?, ?, 0)", (int64_t)id, size);

		if (rc == 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

/* One transaction for all of them (one fsync on SQLite). */
static int forget_once(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
		       struct jo_err *err)
{
	struct jo_sqls *st = NULL;
	int rc;

	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	rc = jo_sql_prep(m, NULL, &st, err, "DELETE FROM @chunk_ref WHERE chunkid=? AND refs<=0");
	for (size_t i = 0; !rc && i < n; i++) {
		jo_sql_reset(m, st);
		jo_sql_i64(m, st, 1, (int64_t)v[i].id);
		if (jo_sql_step(m, st, err) < 0)
			rc = jo_err_wrap(err, "delete chunk_ref");
	}
	jo_sql_free(m, st);
	if (rc) {
		jo_sql_rollback(m);
		return rc;
	}
	return jo_sql_commit(m, err);
}

static int s_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			   struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = forget_once(m, v, n, err);

		if (rc == 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

const struct jo_compact_ops jo_sql_compact_ops = {
	.alloc_slice_ids = s_alloc_slice_ids,
	.commit = s_compact_commit,
	.slice_abandon = s_slice_abandon,
	.forget_slices = s_forget_slices,
};
