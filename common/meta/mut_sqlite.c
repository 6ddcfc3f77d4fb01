/*
 * mut_sqlite.c: the SQLite side of meta_mut.h. Transactions copy JuiceFS's
 * (pkg/meta/sql.go) with one difference SQLite needs: read-modify-write
 * transactions start with BEGIN IMMEDIATE, which takes the write lock up
 * front (what "SELECT ... FOR UPDATE" gives JuiceFS on other SQL engines).
 * Busy databases are waited for (busy_timeout) and the transaction retried.
 */
#include "common/meta/meta_mut.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/engine_internal.h"

#define TXN_RETRIES 50

static sqlite3 *DB(struct jo_meta *m)
{
	return jo_meta_sqlite_db(m);
}

static const char *PFX(struct jo_meta *m)
{
	return m->url.table_prefix ? m->url.table_prefix : "jfs_";
}

static int sq_err(struct jo_meta *m, struct jo_err *err, const char *what)
{
	/* busy/locked is JO_EIO too: JO_ECONFLICT is kept for leases */
	return jo_err_set(err, JO_EIO, "sqlite3 %s: %s: %s", m->url.path, what, sqlite3_errmsg(DB(m)));
}

static bool is_busy(struct jo_meta *m)
{
	int ec = sqlite3_extended_errcode(DB(m)) & 0xff;

	return ec == SQLITE_BUSY || ec == SQLITE_LOCKED;
}

/* Prepare SQL whose '@' stands for the JuiceFS table prefix ("jfs_") and
 * '#' for ours ("jfsops_[X_]{ns}_"). */
static int prep(struct jo_meta *m, const char *ns, sqlite3_stmt **st, struct jo_err *err,
		const char *fmt)
{
	char sql[1024], ours[96];
	const char *pfx = PFX(m);
	size_t o = 0;

	/* "jfs_" -> "jfsops_gc_"; "jfs_X_" -> "jfsops_X_gc_" */
	snprintf(ours, sizeof(ours), "jfsops_%s%s_", strncmp(pfx, "jfs_", 4) == 0 ? pfx + 4 : pfx,
		 ns ? ns : "");
	for (const char *p = fmt; *p; p++) {
		const char *sub = *p == '@' ? pfx : *p == '#' ? ours : NULL;
		size_t l = sub ? strlen(sub) : 1;

		if (o + l + 1 >= sizeof(sql))
			return jo_err_set(err, JO_EINVAL, "sql statement too long");
		if (sub)
			memcpy(sql + o, sub, l);
		else
			sql[o] = *p;
		o += l;
	}
	sql[o] = '\0';
	if (sqlite3_prepare_v2(DB(m), sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return sq_err(m, err, "prepare");
	}
	return 0;
}

static int exec_sql(struct jo_meta *m, const char *sql, struct jo_err *err)
{
	if (sqlite3_exec(DB(m), sql, NULL, NULL, NULL) != SQLITE_OK)
		return sq_err(m, err, sql);
	return 0;
}

/* BEGIN IMMEDIATE, waiting out writers (busy_timeout) up to TXN_RETRIES times. */
static int begin(struct jo_meta *m, struct jo_err *err)
{
	for (int i = 0; i < TXN_RETRIES; i++) {
		if (sqlite3_exec(DB(m), "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK)
			return 0;
		if (!is_busy(m))
			return sq_err(m, err, "BEGIN IMMEDIATE");
		usleep(10000 + (useconds_t)(rand() % 20000));
	}
	return sq_err(m, err, "BEGIN IMMEDIATE (database stayed busy)");
}

static int commit(struct jo_meta *m, struct jo_err *err)
{
	int rc = exec_sql(m, "COMMIT", err);

	if (rc)
		(void)sqlite3_exec(DB(m), "ROLLBACK", NULL, NULL, NULL); /* best effort */
	return rc;
}

static void rollback(struct jo_meta *m)
{
	/* Nothing to report: the transaction is abandoned either way. */
	(void)sqlite3_exec(DB(m), "ROLLBACK", NULL, NULL, NULL);
}

static int step_done(struct jo_meta *m, sqlite3_stmt *st, struct jo_err *err, const char *what)
{
	int s = sqlite3_step(st);

	if (s != SQLITE_DONE && s != SQLITE_ROW)
		return sq_err(m, err, what);
	return 0;
}

/* refs of slice id; *exists false when no row. */
static int get_refs(struct jo_meta *m, uint64_t id, int64_t *refs, bool *exists, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(m, NULL, &st, err, "SELECT refs FROM @chunk_ref WHERE chunkid=?");
	int s;

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	s = sqlite3_step(st);
	*exists = false;
	if (s == SQLITE_ROW) {
		*exists = true;
		*refs = sqlite3_column_int64(st, 0);
	} else if (s != SQLITE_DONE) {
		rc = sq_err(m, err, "read chunk_ref");
	}
	sqlite3_finalize(st);
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
		int rc = get_refs(m, recs[i].id, &refs, &ex, err);

		if (rc)
			return rc;
		if (ex && refs <= 0 && jo_sref_push(freed, nfreed, &cap, recs[i].id, recs[i].size))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* ---- deleteChunk (sql.go deleteChunk) */

static int s_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			  size_t *nfreed, struct jo_err *err)
{
	struct jo_sref *recs = NULL;
	size_t nrec = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int rc = 0;

	*freed = NULL;
	*nfreed = 0;
	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		const uint8_t *blob;
		int blen, s;

		nrec = 0;
		if ((rc = begin(m, err)) != 0)
			goto out;
		if ((rc = prep(m, NULL, &st, err, "SELECT slices FROM @chunk WHERE inode=? AND indx=?")))
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
		sqlite3_bind_int64(st, 2, indx);
		s = sqlite3_step(st);
		if (s == SQLITE_DONE) {
			sqlite3_finalize(st);
			st = NULL;
			rc = commit(m, err);
			goto out;
		}
		if (s != SQLITE_ROW) {
			rc = sq_err(m, err, "read chunk");
			goto fail;
		}
		blob = sqlite3_column_blob(st, 0);
		blen = sqlite3_column_bytes(st, 0);
		if (blen % JO_SLICE_REC_LEN) {
			rc = jo_err_set(err, JO_EPROTO, "chunk %llu:%u: %d bytes is not a list of "
					"24-byte slice records: left alone", (unsigned long long)ino,
					indx, blen);
			goto fail;
		}
		for (int o = 0; o < blen; o += JO_SLICE_REC_LEN) {
			uint64_t id = jo_be64(blob + o + 4);

			if (id > 0 && jo_sref_push(&recs, &nrec, &cap, id, jo_be32(blob + o + 12))) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto fail;
			}
		}
		sqlite3_finalize(st);
		st = NULL;
		/* refs += delta per slice id (HEAD batches this as one CASE update) */
		if ((rc = prep(m, NULL, &st, err, "UPDATE @chunk_ref SET refs=refs+? WHERE chunkid=?")))
			goto fail;
		for (size_t i = 0; i < nrec; i++) {
			int64_t delta = 0;
			bool first = true;

			for (size_t j = 0; j < nrec; j++) {
				if (recs[j].id != recs[i].id)
					continue;
				if (j < i) {
					first = false;
					break;
				}
				delta--;
			}
			if (!first)
				continue;
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, delta);
			sqlite3_bind_int64(st, 2, (sqlite3_int64)recs[i].id);
			if ((rc = step_done(m, st, err, "update chunk_ref")))
				goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
		if ((rc = prep(m, NULL, &st, err, "DELETE FROM @chunk WHERE inode=? AND indx=?")))
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
		sqlite3_bind_int64(st, 2, indx);
		if ((rc = step_done(m, st, err, "delete chunk")))
			goto fail;
		sqlite3_finalize(st);
		st = NULL;
		if (sqlite3_changes(DB(m)) == 0) {
			rollback(m); /* changed meanwhile: restart, as JuiceFS does */
			continue;
		}
		if ((rc = commit(m, err)) != 0) {
			if (is_busy(m))
				continue;
			goto out;
		}
		rc = collect_freed(m, recs, nrec, freed, nfreed, err);
		goto out;
	}
	rc = jo_err_set(err, JO_EIO, "delete chunk %llu:%u: still changing after %d attempts",
			(unsigned long long)ino, indx, TXN_RETRIES);
	goto out;
fail:
	sqlite3_finalize(st);
	st = NULL;
	rollback(m);
out:
	return jo_sref_finish(rc, recs, freed, nfreed);
}

static int s_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
			 size_t *n, struct jo_err *err)
{
	(void)length; /* SQL visits every chunk row of the inode (sql.go doDeleteFileData) */
	return jo_meta_list_chunks(m, ino, out, n, err);
}

static int s_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length, bool *out,
			    struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(m, NULL, &st, err, "SELECT 1 FROM @delfile WHERE inode=?");
	int s;

	(void)length;
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	s = sqlite3_step(st);
	*out = s == SQLITE_ROW;
	if (s != SQLITE_ROW && s != SQLITE_DONE)
		rc = sq_err(m, err, "read delfile");
	sqlite3_finalize(st);
	return rc;
}

/* One-statement write (autocommit), retried while busy. */
static int write1(struct jo_meta *m, const char *ns, const char *sql, int64_t a, int64_t b,
		  const char *s3, int *changes, struct jo_err *err)
{
	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		sqlite3_stmt *st;
		int rc = prep(m, ns, &st, err, sql);
		int s;

		if (rc)
			return rc;
		sqlite3_bind_int64(st, 1, a);
		if (sqlite3_bind_parameter_count(st) >= 2)
			sqlite3_bind_int64(st, 2, b);
		if (sqlite3_bind_parameter_count(st) >= 3)
			sqlite3_bind_text(st, 3, s3 ? s3 : "", -1, SQLITE_TRANSIENT);
		s = sqlite3_step(st);
		sqlite3_finalize(st);
		if (s == SQLITE_DONE) {
			if (changes)
				*changes = sqlite3_changes(DB(m));
			return 0;
		}
		if (!is_busy(m))
			return sq_err(m, err, sql);
		usleep(10000 + (useconds_t)(rand() % 20000));
	}
	return sq_err(m, err, "database stayed busy");
}

static int s_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length, struct jo_err *err)
{
	(void)length;
	return write1(m, NULL, "DELETE FROM @delfile WHERE inode=?", (int64_t)ino, 0, NULL, NULL,
		      err);
}

/* ---- delayed slices (sql.go doCleanupDelayedSlices) */

static int s_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			      struct jo_sref **freed, size_t *nfreed, bool *kept,
			      struct jo_err *err)
{
	struct jo_sref *recs = NULL;
	size_t nrec = 0, cap = 0;
	sqlite3_stmt *st = NULL;
	int rc = 0;

	(void)ts; /* SQL rows are keyed by chunkid alone; the row's own time decides */
	*freed = NULL;
	*nfreed = 0;
	*kept = false;
	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		const uint8_t *blob;
		int blen, s;

		nrec = 0;
		if ((rc = begin(m, err)) != 0)
			goto out;
		if ((rc = prep(m, NULL, &st, err, "SELECT deleted, slices FROM @delslices WHERE chunkid=?")))
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)new_id);
		s = sqlite3_step(st);
		if (s == SQLITE_DONE) {
			sqlite3_finalize(st);
			st = NULL;
			rc = commit(m, err);
			goto out;
		}
		if (s != SQLITE_ROW) {
			rc = sq_err(m, err, "read delslices");
			goto fail;
		}
		if (sqlite3_column_int64(st, 0) >= edge) {
			*kept = true;
			sqlite3_finalize(st);
			st = NULL;
			rc = commit(m, err);
			goto out;
		}
		blob = sqlite3_column_blob(st, 1);
		blen = sqlite3_column_bytes(st, 1);
		if (blen == 0 || blen % JO_DELSLICE_REC_LEN) {
			rc = jo_err_set(err, JO_EPROTO, "delslices %llu: %d bytes is not a list of "
					"12-byte records: left alone", (unsigned long long)new_id, blen);
			goto fail;
		}
		for (int o = 0; o < blen; o += JO_DELSLICE_REC_LEN) {
			if (jo_sref_push(&recs, &nrec, &cap, jo_be64(blob + o), jo_be32(blob + o + 8))) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto fail;
			}
		}
		sqlite3_finalize(st);
		st = NULL;
		if ((rc = prep(m, NULL, &st, err,
			       "UPDATE @chunk_ref SET refs=refs-1 WHERE chunkid=? AND size=?")))
			goto fail;
		for (size_t i = 0; i < nrec; i++) {
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 1, (sqlite3_int64)recs[i].id);
			sqlite3_bind_int64(st, 2, recs[i].size);
			if ((rc = step_done(m, st, err, "update chunk_ref")))
				goto fail;
		}
		sqlite3_finalize(st);
		st = NULL;
		if ((rc = prep(m, NULL, &st, err, "DELETE FROM @delslices WHERE chunkid=?")))
			goto fail;
		sqlite3_bind_int64(st, 1, (sqlite3_int64)new_id);
		if ((rc = step_done(m, st, err, "delete delslices")))
			goto fail;
		sqlite3_finalize(st);
		st = NULL;
		if ((rc = commit(m, err)) != 0) {
			if (is_busy(m))
				continue;
			goto out;
		}
		rc = collect_freed(m, recs, nrec, freed, nfreed, err);
		goto out;
	}
	rc = jo_err_set(err, JO_EIO, "clean delslices %llu: database stayed busy",
			(unsigned long long)new_id);
	goto out;
fail:
	sqlite3_finalize(st);
	st = NULL;
	rollback(m);
out:
	return jo_sref_finish(rc, recs, freed, nfreed);
}

static int s_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			     struct jo_err *err)
{
	int64_t refs = 0;
	bool ex;
	int rc = get_refs(m, id, &refs, &ex, err);

	(void)size;
	if (rc)
		return rc;
	*out = ex && refs <= 0;
	return 0;
}

static int s_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	(void)size;
	return write1(m, NULL, "DELETE FROM @chunk_ref WHERE chunkid=?", (int64_t)id, 0, NULL, NULL,
		      err);
}

static int exists1(struct jo_meta *m, const char *sql, uint64_t v, bool *out, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(m, NULL, &st, err, sql);
	int s;

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)v);
	s = sqlite3_step(st);
	*out = s == SQLITE_ROW;
	if (s != SQLITE_ROW && s != SQLITE_DONE)
		rc = sq_err(m, err, sql);
	sqlite3_finalize(st);
	return rc;
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
	return jo_err_set(err, JO_EUNSUPPORTED, "sqlite3 %s: leaked chunk rows are a Redis-only "
			  "problem", m->url.path);
}

/* ---- tasks and leases */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int s_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	static const char *const ddl[] = {
		"CREATE TABLE IF NOT EXISTS #task (id INTEGER PRIMARY KEY AUTOINCREMENT, "
		"kind TEXT NOT NULL, items TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', "
		"expire INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, "
		"created INTEGER NOT NULL DEFAULT 0)",
		"CREATE INDEX IF NOT EXISTS #task_expire ON #task(expire)",
		"CREATE TABLE IF NOT EXISTS #item (item TEXT PRIMARY KEY, task INTEGER NOT NULL)",
		"CREATE INDEX IF NOT EXISTS #item_task ON #item(task)",
	};

	for (size_t i = 0; i < sizeof(ddl) / sizeof(ddl[0]); i++) {
		int rc = write1(m, ns, ddl[i], 0, 0, NULL, NULL, err);

		/* write1 binds ?1 unconditionally; DDL has no parameters (bind is a no-op error) */
		if (rc)
			return jo_err_wrap(err, "create jfsops task tables");
	}
	return 0;
}

static int s_task_add(struct jo_meta *m, const char *ns, const char *kind,
		      const char *const *items, size_t n, int64_t *task_id, size_t *added,
		      struct jo_err *err)
{
	sqlite3_stmt *q = NULL, *st = NULL;
	char *buf = NULL;
	size_t blen = 0, nfresh = 0;
	bool *fresh = NULL;
	int rc;

	*task_id = 0;
	*added = 0;
	if (n == 0)
		return 0;
	fresh = calloc(n, sizeof(*fresh));
	if (!fresh)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = begin(m, err)) != 0) {
		free(fresh);
		return rc;
	}
	if ((rc = prep(m, ns, &q, err,
		       "SELECT 1 FROM #item i JOIN #task t ON t.id = i.task WHERE i.item=?")))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		int s;

		sqlite3_reset(q);
		sqlite3_bind_text(q, 1, items[i], -1, SQLITE_STATIC);
		s = sqlite3_step(q);
		if (s == SQLITE_DONE) {
			fresh[i] = true;
			nfresh++;
			blen += strlen(items[i]) + 1;
		} else if (s != SQLITE_ROW) {
			rc = sq_err(m, err, "read task items");
			goto fail;
		}
	}
	sqlite3_finalize(q);
	q = NULL;
	if (nfresh == 0) {
		free(fresh);
		return commit(m, err);
	}
	buf = malloc(blen + 1);
	if (!buf) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	blen = 0;
	for (size_t i = 0; i < n; i++) {
		size_t l;

		if (!fresh[i])
			continue;
		l = strlen(items[i]);
		if (blen)
			buf[blen++] = '\n';
		memcpy(buf + blen, items[i], l);
		blen += l;
	}
	buf[blen] = '\0';
	if ((rc = prep(m, ns, &st, err, "INSERT INTO #task (kind, items, created) VALUES (?, ?, ?)")))
		goto fail;
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, buf, (int)blen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, now_ms());
	if ((rc = step_done(m, st, err, "insert task")))
		goto fail;
	sqlite3_finalize(st);
	st = NULL;
	*task_id = sqlite3_last_insert_rowid(DB(m));
	if ((rc = prep(m, ns, &st, err, "INSERT OR REPLACE INTO #item (item, task) VALUES (?, ?)")))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (!fresh[i])
			continue;
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, items[i], -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, *task_id);
		if ((rc = step_done(m, st, err, "insert task item")))
			goto fail;
	}
	sqlite3_finalize(st);
	st = NULL;
	if ((rc = commit(m, err)) != 0)
		goto out;
	*added = nfresh;
	goto out;
fail:
	sqlite3_finalize(q);
	sqlite3_finalize(st);
	rollback(m);
out:
	if (rc)
		*task_id = 0;
	free(fresh);
	free(buf);
	return rc;
}

static int s_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
			struct jo_mut_task *out, struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int64_t now, exp;
	int rc, s;

	memset(out, 0, sizeof(*out));
	if ((rc = begin(m, err)) != 0)
		return rc;
	now = now_ms();
	exp = now + lease_ms;
	if ((rc = prep(m, ns, &st, err, "SELECT id, kind, items, attempts FROM #task "
		       "WHERE expire <= ? ORDER BY expire, id LIMIT 1")))
		goto fail;
	sqlite3_bind_int64(st, 1, now);
	s = sqlite3_step(st);
	if (s == SQLITE_DONE) {
		sqlite3_finalize(st);
		rollback(m);
		return jo_err_set(err, JO_ENOTFOUND, "no claimable task");
	}
	if (s != SQLITE_ROW) {
		rc = sq_err(m, err, "claim task");
		goto fail;
	}
	out->id = sqlite3_column_int64(st, 0);
	snprintf(out->kind, sizeof(out->kind), "%s", (const char *)sqlite3_column_text(st, 1));
	out->items = strdup((const char *)sqlite3_column_text(st, 2));
	out->attempts = sqlite3_column_int64(st, 3) + 1;
	sqlite3_finalize(st);
	st = NULL;
	if (!out->items) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = prep(m, ns, &st, err, "UPDATE #task SET owner=?, expire=?, attempts=attempts+1 "
		       "WHERE id=?")))
		goto fail;
	sqlite3_bind_text(st, 1, owner, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, exp);
	sqlite3_bind_int64(st, 3, out->id);
	if ((rc = step_done(m, st, err, "claim task")))
		goto fail;
	sqlite3_finalize(st);
	st = NULL;
	if ((rc = commit(m, err)) != 0) {
		jo_mut_task_release_mem(out);
		return rc;
	}
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	out->expire_ms = exp;
	return 0;
fail:
	sqlite3_finalize(st);
	rollback(m);
	jo_mut_task_release_mem(out);
	return rc;
}

static int s_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	int64_t exp = now_ms() + lease_ms;
	int changes = 0;
	int rc = write1(m, ns, "UPDATE #task SET expire=?1 WHERE id=?2 AND owner=?3", exp, id, owner,
			&changes, err);

	if (rc)
		return rc;
	if (changes == 0)
		return jo_err_set(err, JO_ECONFLICT, "task %lld is no longer leased by %s",
				  (long long)id, owner);
	if (expire_ms)
		*expire_ms = exp;
	return 0;
}

static int s_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			  struct jo_err *err)
{
	int changes = 0;
	int rc = write1(m, ns, "UPDATE #task SET owner='', expire=0 WHERE ?1=?1 AND id=?2 AND owner=?3",
			0, id, owner, &changes, err);

	if (rc)
		return rc;
	if (changes == 0)
		return jo_err_set(err, JO_ECONFLICT, "release task %lld: no longer leased by %s",
				  (long long)id, owner);
	return 0;
}

static int s_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			   struct jo_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = begin(m, err)) != 0)
		return rc;
	if ((rc = prep(m, ns, &st, err, "DELETE FROM #task WHERE id=? AND owner=?")))
		goto fail;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, owner, -1, SQLITE_STATIC);
	if ((rc = step_done(m, st, err, "delete task")))
		goto fail;
	sqlite3_finalize(st);
	st = NULL;
	if (sqlite3_changes(DB(m)) == 0) {
		rollback(m);
		return jo_err_set(err, JO_ECONFLICT, "complete task %lld: no longer leased by %s",
				  (long long)id, owner);
	}
	if ((rc = prep(m, ns, &st, err, "DELETE FROM #item WHERE task=?")))
		goto fail;
	sqlite3_bind_int64(st, 1, id);
	if ((rc = step_done(m, st, err, "delete task items")))
		goto fail;
	sqlite3_finalize(st);
	return commit(m, err);
fail:
	sqlite3_finalize(st);
	rollback(m);
	return rc;
}

static int s_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
			struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(m, ns, &st, err, "SELECT count(*), coalesce(sum(expire > ?), 0) FROM #task");

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, now_ms());
	if (sqlite3_step(st) == SQLITE_ROW) {
		*total = sqlite3_column_int64(st, 0);
		*leased = sqlite3_column_int64(st, 1);
	} else {
		rc = sq_err(m, err, "count tasks");
	}
	sqlite3_finalize(st);
	return rc;
}

static int s_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		       struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = prep(m, ns, &st, err,
		      "SELECT id, kind, items, owner, expire, attempts FROM #task ORDER BY id");
	int s;

	if (rc)
		return rc;
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		struct jo_mut_task t = { 0 };

		t.id = sqlite3_column_int64(st, 0);
		snprintf(t.kind, sizeof(t.kind), "%s", (const char *)sqlite3_column_text(st, 1));
		t.items = (char *)sqlite3_column_text(st, 2);
		snprintf(t.owner, sizeof(t.owner), "%s", (const char *)sqlite3_column_text(st, 3));
		t.expire_ms = sqlite3_column_int64(st, 4);
		t.attempts = sqlite3_column_int64(st, 5);
		rc = cb(&t, payload);
		if (rc)
			break;
	}
	if (rc == 0 && s != SQLITE_DONE)
		rc = sq_err(m, err, "scan tasks");
	sqlite3_finalize(st);
	return rc;
}

static int s_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	int rc = s_task_init(m, ns, err);

	if (rc == 0)
		rc = write1(m, ns, "DELETE FROM #item WHERE ?1=?1", 0, 0, NULL, NULL, err);
	if (rc == 0)
		rc = write1(m, ns, "DELETE FROM #task WHERE ?1=?1", 0, 0, NULL, NULL, err);
	return rc;
}

const struct jo_mut_ops jo_mut_sqlite_ops = {
	.delete_chunk = s_delete_chunk,
	.file_chunks = s_file_chunks,
	.delfile_exists = s_delfile_exists,
	.remove_delfile = s_remove_delfile,
	.cleanup_delslice = s_cleanup_delslice,
	.slice_deletable = s_slice_deletable,
	.forget_slice = s_forget_slice,
	.inode_exists = s_inode_exists,
	.is_detached = s_is_detached,
	.scan_orphan_chunks = s_scan_orphan_chunks,
	.unlink = jo_meta_sqlite_unlink,
	.rmdir = jo_meta_sqlite_rmdir,
	.task_init = s_task_init,
	.task_add = s_task_add,
	.task_claim = s_task_claim,
	.task_renew = s_task_renew,
	.task_release = s_task_release,
	.task_complete = s_task_complete,
	.task_count = s_task_count,
	.task_scan = s_task_scan,
	.task_clear = s_task_clear,
};

/* ---- shared with compact_sqlite.c (engine_internal.h) ---- */

int jo_sq_prep(struct jo_meta *m, const char *ns, struct sqlite3_stmt **st, struct jo_err *err,
	       const char *fmt)
{
	return prep(m, ns, st, err, fmt);
}

int jo_sq_fail(struct jo_meta *m, struct jo_err *err, const char *what)
{
	return sq_err(m, err, what);
}

int jo_sq_begin(struct jo_meta *m, struct jo_err *err)
{
	return begin(m, err);
}

int jo_sq_commit(struct jo_meta *m, struct jo_err *err)
{
	return commit(m, err);
}

void jo_sq_rollback(struct jo_meta *m)
{
	rollback(m);
}
