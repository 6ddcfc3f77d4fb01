/*
 * sql/mut.c: the gc mutations of the sql family (meta_mut.h), as juicefs's
 * pkg/meta/sql.go runs them: the same rows read and written, the same
 * FOR UPDATE row locks on PostgreSQL and MySQL (SQLite takes its write lock
 * at BEGIN IMMEDIATE instead), and every transaction tried again while it
 * loses a lock conflict, deadlock or serialization check, up to 50 times.
 */
#include "common/meta/meta_mut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

int jo_sql_slice_refs(struct jo_meta *m, uint64_t id, int64_t *refs, bool *exists,
		      struct jo_err *err)
{
	int64_t row[1] = { 0 };
	int rc = jo_sql_run(m, NULL, "SELECT refs FROM @chunk_ref WHERE chunkid=?",
			    (const int64_t[]){ (int64_t)id }, 1, NULL, 0, row, 1, exists, NULL, err);

	*refs = row[0];
	return rc;
}

/* After a committed decrement: the slices whose row now says refs <= 0. */
static int collect_freed(struct jo_meta *m, const struct jo_sref *recs, size_t nrec,
			 struct jo_sref **freed, size_t *nfreed, struct jo_err *err)
{
	size_t cap = 0;

	for (size_t i = 0; i < nrec; i++) {
		int64_t refs = 0;
		bool ex;
		int rc = jo_sql_slice_refs(m, recs[i].id, &refs, &ex, err);

		if (rc)
			return rc;
		if (ex && refs <= 0 && jo_sref_push(freed, nfreed, &cap, recs[i].id, recs[i].size))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

static int cmp_sref_id(const void *a, const void *b)
{
	const struct jo_sref *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * refs += -(times listed) for each distinct slice id of recs, in ascending
 * id order (the order juicefs's batched CASE update locks the rows in).
 */
static int decrement_refs(struct jo_meta *m, const struct jo_sref *recs, size_t nrec,
			  struct jo_err *err)
{
	struct jo_sref *ids = NULL;
	struct jo_sqls *st = NULL;
	int rc = 0;

	if (nrec == 0)
		return 0;
	ids = malloc(nrec * sizeof(*ids));
	if (!ids)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memcpy(ids, recs, nrec * sizeof(*ids));
	qsort(ids, nrec, sizeof(*ids), cmp_sref_id);
	rc = jo_sql_prep(m, NULL, &st, err, "UPDATE @chunk_ref SET refs=refs+? WHERE chunkid=?");
	for (size_t i = 0; !rc && i < nrec;) {
		size_t j = i;

		while (j < nrec && ids[j].id == ids[i].id)
			j++;
		jo_sql_reset(m, st);
		jo_sql_i64(m, st, 1, -(int64_t)(j - i));
		jo_sql_i64(m, st, 2, (int64_t)ids[i].id);
		if (jo_sql_step(m, st, err) < 0)
			rc = jo_err_wrap(err, "update chunk_ref");
		i = j;
	}
	jo_sql_free(m, st);
	free(ids);
	return rc;
}

/* ---- deleteChunk (sql.go deleteChunk) */

/* One attempt. 1: the chunk changed meanwhile (try again). */
static int delete_chunk_once(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **recs,
			     size_t *nrec, struct jo_err *err)
{
	struct jo_sqls *st = NULL;
	size_t cap = 0, blen;
	const uint8_t *blob;
	int64_t changes = 0;
	int rc, s;

	*nrec = 0;
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	if ((rc = jo_sql_prep(m, NULL, &st, err, "SELECT slices FROM @chunk WHERE inode=? AND indx=?~")))
		goto fail;
	jo_sql_i64(m, st, 1, (int64_t)ino);
	jo_sql_i64(m, st, 2, indx);
	s = jo_sql_step(m, st, err);
	if (s == 0) {
		jo_sql_free(m, st);
		return jo_sql_commit(m, err);
	}
	if (s < 0) {
		rc = jo_err_wrap(err, "read chunk");
		goto fail;
	}
	blob = jo_sql_col_blob(m, st, 0, &blen);
	if (blen % JO_SLICE_REC_LEN) {
		rc = jo_err_set(err, JO_EPROTO, "chunk %llu:%u: %zu bytes is not a list of "
				"24-byte slice records: left alone", (unsigned long long)ino, indx, blen);
		goto fail;
	}
	for (size_t o = 0; o < blen; o += JO_SLICE_REC_LEN) {
		uint64_t id = jo_be64(blob + o + 4);

		if (id > 0 && jo_sref_push(recs, nrec, &cap, id, jo_be32(blob + o + 12))) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto fail;
		}
	}
	jo_sql_free(m, st);
	st = NULL;
	if ((rc = decrement_refs(m, *recs, *nrec, err)) != 0)
		goto fail;
	rc = jo_sql_run(m, NULL, "DELETE FROM @chunk WHERE inode=? AND indx=?",
			(const int64_t[]){ (int64_t)ino, indx }, 2, NULL, 0, NULL, 0, NULL, &changes,
			err);
	if (rc)
		goto fail;
	if (changes == 0) {
		jo_sql_rollback(m); /* changed meanwhile: restart, as JuiceFS does */
		return 1;
	}
	return jo_sql_commit(m, err);
fail:
	return jo_sql_undo(m, st, rc);
}

static int s_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			  size_t *nfreed, struct jo_err *err)
{
	struct jo_sref *recs = NULL;
	size_t nrec = 0;
	int rc = 0;

	*freed = NULL;
	*nfreed = 0;
	for (int attempt = 0; attempt < JO_SQL_TXN_TRIES; attempt++) {
		free(recs);
		recs = NULL;
		rc = delete_chunk_once(m, ino, indx, &recs, &nrec, err);
		if (rc == 1 || (rc < 0 && rc != JO_EPROTO && jo_sql_retry(m, attempt)))
			continue;
		if (rc == 0)
			rc = collect_freed(m, recs, nrec, freed, nfreed, err);
		return jo_sref_finish(rc, recs, freed, nfreed);
	}
	rc = jo_err_set(err, JO_EIO, "delete chunk %llu:%u: still changing after %d attempts",
			(unsigned long long)ino, indx, JO_SQL_TXN_TRIES);
	return jo_sref_finish(rc, recs, freed, nfreed);
}

static int s_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
			 size_t *n, struct jo_err *err)
{
	(void)length; /* SQL visits every chunk row of the inode (sql.go doDeleteFileData) */
	return jo_meta_list_chunks(m, ino, out, n, err);
}

static int exists1(struct jo_meta *m, const char *tmpl, uint64_t v, bool *out, struct jo_err *err)
{
	return jo_sql_run(m, NULL, tmpl, (const int64_t[]){ (int64_t)v }, 1, NULL, 0, NULL, 0, out,
			  NULL, err);
}

static int s_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length, bool *out,
			    struct jo_err *err)
{
	(void)length; /* SQL rows are keyed by the inode alone */
	return exists1(m, "SELECT 1 FROM @delfile WHERE inode=?", ino, out, err);
}

/* One-statement write (autocommit) of the n integers of v, tried again on a lock conflict. */
static int write_n(struct jo_meta *m, const char *tmpl, const int64_t *v, int n,
		   struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = jo_sql_run(m, NULL, tmpl, v, n, NULL, 0, NULL, 0, NULL, NULL, err);

		if (rc == 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

static int write1(struct jo_meta *m, const char *tmpl, int64_t a, struct jo_err *err)
{
	return write_n(m, tmpl, &a, 1, err);
}

static int s_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length, struct jo_err *err)
{
	(void)length;
	return write1(m, "DELETE FROM @delfile WHERE inode=?", (int64_t)ino, err);
}

/* ---- delayed slices (sql.go doCleanupDelayedSlices) */

/* One attempt; *kept when the entry is not older than edge. */
static int cleanup_delslice_once(struct jo_meta *m, uint64_t new_id, int64_t edge,
				 struct jo_sref **recs, size_t *nrec, bool *kept, struct jo_err *err)
{
	struct jo_sqls *st = NULL;
	size_t cap = 0, blen;
	const uint8_t *blob;
	int rc, s;

	*nrec = 0;
	*kept = false;
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	if ((rc = jo_sql_prep(m, NULL, &st, err,
			      "SELECT deleted, slices FROM @delslices WHERE chunkid=?~")))
		goto fail;
	jo_sql_i64(m, st, 1, (int64_t)new_id);
	s = jo_sql_step(m, st, err);
	if (s <= 0) {
		jo_sql_free(m, st);
		if (s == 0)
			return jo_sql_commit(m, err);
		jo_sql_rollback(m);
		return jo_err_wrap(err, "read delslices");
	}
	if (jo_sql_col_i64(m, st, 0) >= edge) {
		*kept = true;
		jo_sql_free(m, st);
		return jo_sql_commit(m, err);
	}
	blob = jo_sql_col_blob(m, st, 1, &blen);
	if (blen == 0 || blen % JO_DELSLICE_REC_LEN) {
		rc = jo_err_set(err, JO_EPROTO, "delslices %llu: %zu bytes is not a list of "
				"12-byte records: left alone", (unsigned long long)new_id, blen);
		goto fail;
	}
	for (size_t o = 0; o < blen; o += JO_DELSLICE_REC_LEN) {
		if (jo_sref_push(recs, nrec, &cap, jo_be64(blob + o), jo_be32(blob + o + 8))) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto fail;
		}
	}
	jo_sql_free(m, st);
	st = NULL;
	if ((rc = jo_sql_prep(m, NULL, &st, err,
			      "UPDATE @chunk_ref SET refs=refs-1 WHERE chunkid=? AND size=?")))
		goto fail;
	for (size_t i = 0; i < *nrec; i++) {
		jo_sql_reset(m, st);
		jo_sql_i64(m, st, 1, (int64_t)(*recs)[i].id);
		jo_sql_i64(m, st, 2, (*recs)[i].size);
		if (jo_sql_step(m, st, err) < 0) {
			rc = jo_err_wrap(err, "update chunk_ref");
			goto fail;
		}
	}
	jo_sql_free(m, st);
	st = NULL;
	if ((rc = JO_SQL_RUN(m, err, "DELETE FROM @delslices WHERE chunkid=?", (int64_t)new_id)))
		goto fail;
	return jo_sql_commit(m, err);
fail:
	return jo_sql_undo(m, st, rc);
}

static int s_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			      struct jo_sref **freed, size_t *nfreed, bool *kept,
			      struct jo_err *err)
{
	struct jo_sref *recs = NULL;
	size_t nrec = 0;
	int rc = 0;

	(void)ts; /* SQL rows are keyed by chunkid alone; the row's own time decides */
	*freed = NULL;
	*nfreed = 0;
	for (int attempt = 0;; attempt++) {
		free(recs);
		recs = NULL;
		rc = cleanup_delslice_once(m, new_id, edge, &recs, &nrec, kept, err);
		if (rc < 0 && rc != JO_EPROTO && attempt + 1 < JO_SQL_TXN_TRIES &&
		    jo_sql_retry(m, attempt))
			continue;
		break;
	}
	if (rc == 0 && !*kept)
		rc = collect_freed(m, recs, nrec, freed, nfreed, err);
	return jo_sref_finish(rc, recs, freed, nfreed);
}

static int s_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			     struct jo_err *err)
{
	int64_t refs = 0;
	bool ex;
	int rc = jo_sql_slice_refs(m, id, &refs, &ex, err);

	(void)size;
	if (rc)
		return rc;
	*out = ex && refs <= 0;
	return 0;
}

static int s_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	(void)size; /* jfs_chunk_ref is keyed by chunkid alone */
	return write1(m, "DELETE FROM @chunk_ref WHERE chunkid=?", (int64_t)id, err);
}

/*
 * s_slice_deletable / s_forget_slice for many slices: one statement per run
 * of up to SQL_BATCH ids (the ids are our own integers, written into the
 * statement as literals: the drivers bind at most 16 parameters). A failed
 * statement returns its code and the caller asks slice by slice.
 */
#define SQL_BATCH 256

/* head followed by the k ids, comma-separated, and ")"; NULL when out of memory. */
static char *id_list(const char *head, const struct jo_slice_id *v, size_t k)
{
	size_t cap = strlen(head) + k * 21 + 2, o;
	char *q = malloc(cap);

	if (!q)
		return NULL;
	o = (size_t)snprintf(q, cap, "%s", head);
	for (size_t i = 0; i < k; i++)
		o += (size_t)snprintf(q + o, cap - o, "%s%lld", i ? "," : "", (long long)(int64_t)v[i].id);
	snprintf(q + o, cap - o, ")");
	return q;
}

static int s_slices_deletable(struct jo_meta *m, const struct jo_slice_id *v, size_t n, bool *out,
			      int *rcs, struct jo_err *err)
{
	for (size_t base = 0; base < n; base += SQL_BATCH) {
		size_t k = n - base < SQL_BATCH ? n - base : SQL_BATCH;
		char *q = id_list("SELECT chunkid, refs FROM @chunk_ref WHERE chunkid IN (", v + base, k);
		struct jo_sqls *st;
		int rc;

		if (!q)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		rc = jo_sql_prep(m, NULL, &st, err, q);
		free(q);
		if (rc)
			return rc;
		for (size_t i = 0; i < k; i++) {
			out[base + i] = false; /* no row: nothing to delete (as one slice) */
			rcs[base + i] = 0;
		}
		while ((rc = jo_sql_step(m, st, err)) == 1) {
			uint64_t id = (uint64_t)jo_sql_col_i64(m, st, 0);
			int64_t refs = jo_sql_col_i64(m, st, 1);

			for (size_t i = 0; i < k; i++) /* an id may be listed twice */
				if (v[base + i].id == id)
					out[base + i] = refs <= 0;
		}
		jo_sql_free(m, st);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int s_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n, int *rcs,
			   struct jo_err *err)
{
	for (size_t base = 0; base < n; base += SQL_BATCH) {
		size_t k = n - base < SQL_BATCH ? n - base : SQL_BATCH;
		char *q = id_list("DELETE FROM @chunk_ref WHERE chunkid IN (", v + base, k);
		int rc;

		if (!q)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		rc = write_n(m, q, NULL, 0, err);
		free(q);
		if (rc)
			return rc; /* the rest slice by slice: a second DELETE of a row is none */
		for (size_t i = 0; i < k; i++)
			rcs[base + i] = 0;
	}
	return 0;
}

static int s_inode_exists(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	return exists1(m, "SELECT 1 FROM @node WHERE inode=?", ino, out, err);
}

static int s_is_detached(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	return exists1(m, "SELECT 1 FROM @detached_node WHERE inode=?", ino, out, err);
}

static int s_scan_orphan_chunks(struct jo_meta *m, jo_mut_chunk_cb cb, void *payload,
				struct jo_err *err)
{
	(void)cb;
	(void)payload;
	return jo_err_set(err, JO_EUNSUPPORTED, "%s %s: leaked chunk rows are a Redis-only "
			  "problem", jo_meta_engine(m), m->url.redacted);
}

const struct jo_mut_ops jo_sql_mut_ops = {
	.delete_chunk = s_delete_chunk,
	.file_chunks = s_file_chunks,
	.delfile_exists = s_delfile_exists,
	.remove_delfile = s_remove_delfile,
	.cleanup_delslice = s_cleanup_delslice,
	.slice_deletable = s_slice_deletable,
	.forget_slice = s_forget_slice,
	.slices_deletable = s_slices_deletable,
	.forget_slices = s_forget_slices,
	.inode_exists = s_inode_exists,
	.is_detached = s_is_detached,
	.scan_orphan_chunks = s_scan_orphan_chunks,
	.unlink = jo_sql_unlink,
	.rmdir = jo_sql_rmdir,
	.restore = jo_sql_restore,
	.restore_many = jo_sql_restore_many,
	.dir_stat_init = jo_sql_dir_stat_init,
	.dir_quota_add = jo_sql_dir_quota_add,
	.task_init = jo_sql_task_init,
	.task_add = jo_sql_task_add,
	.task_claim = jo_sql_task_claim,
	.task_renew = jo_sql_task_renew,
	.task_release = jo_sql_task_release,
	.task_complete = jo_sql_task_complete,
	.task_count = jo_sql_task_count,
	.task_scan = jo_sql_task_scan,
	.task_clear = jo_sql_task_clear,
	.rec_put = jo_sql_rec_put,
	.rec_get = jo_sql_rec_get,
	.rec_scan = jo_sql_rec_scan,
};
