/*
 * state.c: the sync state file, one SQLite database per SRC/DST pair.
 *
 * Tables:
 *   obj(key PRIMARY KEY, src_size, src_mtime, src_etag, dst_size, dst_etag,
 *       md5, copied_at)          the last successful copy of each key
 *   mpu(key PRIMARY KEY, upload_id, part_size, src_size, src_etag, src_mtime)
 *   part(key, number, etag, size, PRIMARY KEY(key, number))
 *   kv(k PRIMARY KEY, v)         settings learnt about the sides
 * Every write is its own transaction in WAL mode, so a kill -9 loses nothing
 * that was reported done (synchronous=NORMAL: only a power loss can drop
 * the last commits). One connection shared under a mutex by all threads.
 */
#include "sync/sync.h"

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct jo_sync_state {
	sqlite3 *db;
	pthread_mutex_t mu;
	bool readonly;
	sqlite3_stmt *get, *put, *mget, *mput, *mdel, *pput, *pdel;
};

static const char schema[] =
	"CREATE TABLE IF NOT EXISTS obj(key TEXT PRIMARY KEY, src_size INTEGER, src_mtime INTEGER,"
	" src_etag TEXT, dst_size INTEGER, dst_etag TEXT, md5 TEXT, copied_at INTEGER) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS mpu(key TEXT PRIMARY KEY, upload_id TEXT, part_size INTEGER,"
	" src_size INTEGER, src_etag TEXT, src_mtime INTEGER);"
	"CREATE TABLE IF NOT EXISTS part(key TEXT, number INTEGER, etag TEXT, size INTEGER,"
	" PRIMARY KEY(key, number)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v TEXT);";

static int dberr(struct jo_sync_state *st, struct jo_err *err, const char *what)
{
	return jo_err_set(err, JO_EIO, "state file: %s: %s", what,
			  st && st->db ? sqlite3_errmsg(st->db) : "no database");
}

static int prep(struct jo_sync_state *st, sqlite3_stmt **s, const char *sql, struct jo_err *err)
{
	if (sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, s, NULL) != SQLITE_OK)
		return dberr(st, err, "prepare");
	return 0;
}

int jo_sync_state_open(struct jo_sync_state **out, const char *path, bool readonly,
		       struct jo_err *err)
{
	*out = NULL;
	struct jo_sync_state *st = calloc(1, sizeof(*st));
	if (!st)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	pthread_mutex_init(&st->mu, NULL);
	st->readonly = readonly;
	int flags = SQLITE_OPEN_FULLMUTEX;
	const char *p = path;
	/*
	 * The file (and SQLite's files beside it) must be a regular file of ours
	 * or root's, never a symlink: made here, 0600 (it knows every key and
	 * multipart upload), before SQLite opens it by name without following.
	 */
	static const char *const sidecars[] = { "-wal", "-shm", "-journal", NULL };
	int prc = jo_file_prepare(path, JO_FILE_PRIVATE, readonly ? JO_FILE_NOCREATE : 0, sidecars,
				  err);
	if (readonly && prc == JO_ENOTFOUND) {
		p = ":memory:";
		flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	} else if (prc) {
		jo_err_wrap(err, "state file");
		jo_sync_state_close(st);
		return prc;
	} else {
		flags |= SQLITE_OPEN_NOFOLLOW |
			 (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);
	}
	if (sqlite3_open_v2(p, &st->db, flags, NULL) != SQLITE_OK) {
		int rc = jo_err_set(err, JO_EIO, "state file \"%s\": %s", path,
				    st->db ? sqlite3_errmsg(st->db) : "cannot open");
		jo_sync_state_close(st);
		return rc;
	}
	sqlite3_busy_timeout(st->db, 10000);
	char *msg = NULL;
	const char *pragmas = readonly ? "PRAGMA query_only=0;"
				       : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
	if (sqlite3_exec(st->db, pragmas, NULL, NULL, &msg) != SQLITE_OK ||
	    ((!readonly || p[0] == ':') && sqlite3_exec(st->db, schema, NULL, NULL, &msg) != SQLITE_OK)) {
		int rc = jo_err_set(err, JO_EIO, "state file \"%s\": %s", path, msg ? msg : "?");
		sqlite3_free(msg);
		jo_sync_state_close(st);
		return rc;
	}
	int rc = prep(st, &st->get, "SELECT src_size, src_mtime, src_etag, dst_size, dst_etag, md5,"
		      " copied_at FROM obj WHERE key=?", err);
	if (!rc && !readonly)
		rc = prep(st, &st->put, "INSERT OR REPLACE INTO obj VALUES(?,?,?,?,?,?,?,?)", err);
	if (!rc)
		rc = prep(st, &st->mget, "SELECT upload_id, part_size, src_size, src_etag, src_mtime"
			  " FROM mpu WHERE key=?", err);
	if (!rc && !readonly)
		rc = prep(st, &st->mput, "INSERT OR REPLACE INTO mpu VALUES(?,?,?,?,?,?)", err);
	if (!rc && !readonly)
		rc = prep(st, &st->mdel, "DELETE FROM mpu WHERE key=?", err);
	if (!rc && !readonly)
		rc = prep(st, &st->pput, "INSERT OR REPLACE INTO part VALUES(?,?,?,?)", err);
	if (!rc && !readonly)
		rc = prep(st, &st->pdel, "DELETE FROM part WHERE key=?", err);
	if (rc) {
		jo_sync_state_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void jo_sync_state_close(struct jo_sync_state *st)
{
	if (!st)
		return;
	sqlite3_finalize(st->get);
	sqlite3_finalize(st->put);
	sqlite3_finalize(st->mget);
	sqlite3_finalize(st->mput);
	sqlite3_finalize(st->mdel);
	sqlite3_finalize(st->pput);
	sqlite3_finalize(st->pdel);
	if (st->db)
		sqlite3_close(st->db);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);
	snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

int jo_sync_state_get(struct jo_sync_state *st, const char *key, struct jo_sync_row *row,
		      struct jo_err *err)
{
	memset(row, 0, sizeof(*row));
	if (!st)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&st->mu);
	sqlite3_bind_text(st->get, 1, key, -1, SQLITE_STATIC);
	int s = sqlite3_step(st->get);
	if (s == SQLITE_ROW) {
		row->found = true;
		row->src_size = (uint64_t)sqlite3_column_int64(st->get, 0);
		row->src_mtime = sqlite3_column_int64(st->get, 1);
		copy_col(row->src_etag, sizeof(row->src_etag), st->get, 2);
		row->dst_size = (uint64_t)sqlite3_column_int64(st->get, 3);
		copy_col(row->dst_etag, sizeof(row->dst_etag), st->get, 4);
		copy_col(row->md5, sizeof(row->md5), st->get, 5);
		row->copied_at = sqlite3_column_int64(st->get, 6);
	} else if (s != SQLITE_DONE) {
		rc = dberr(st, err, "read");
	}
	sqlite3_reset(st->get);
	sqlite3_clear_bindings(st->get);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static int step_done(struct jo_sync_state *st, sqlite3_stmt *s, struct jo_err *err)
{
	int r = sqlite3_step(s);
	int rc = r == SQLITE_DONE ? 0 : dberr(st, err, "write");
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc;
}

int jo_sync_state_put(struct jo_sync_state *st, const char *key, const struct jo_sync_row *row,
		      struct jo_err *err)
{
	if (!st || st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = st->put;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, (sqlite3_int64)row->src_size);
	sqlite3_bind_int64(s, 3, row->src_mtime);
	sqlite3_bind_text(s, 4, row->src_etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 5, (sqlite3_int64)row->dst_size);
	sqlite3_bind_text(s, 6, row->dst_etag, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 7, row->md5, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 8, row->copied_at ? row->copied_at : (int64_t)time(NULL));
	int rc = step_done(st, s, err);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_getkv(struct jo_sync_state *st, const char *k, char **out, struct jo_err *err)
{
	*out = NULL;
	if (!st)
		return 0;
	sqlite3_stmt *s = NULL;
	int rc = 0;
	pthread_mutex_lock(&st->mu);
	if (sqlite3_prepare_v2(st->db, "SELECT v FROM kv WHERE k=?", -1, &s, NULL) != SQLITE_OK) {
		rc = dberr(st, err, "prepare");
	} else {
		sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
		if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) {
			*out = strdup((const char *)sqlite3_column_text(s, 0));
			if (!*out)
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		}
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_setkv(struct jo_sync_state *st, const char *k, const char *v, struct jo_err *err)
{
	if (!st || st->readonly)
		return 0;
	sqlite3_stmt *s = NULL;
	int rc = 0;
	pthread_mutex_lock(&st->mu);
	if (sqlite3_prepare_v2(st->db, "INSERT OR REPLACE INTO kv VALUES(?,?)", -1, &s, NULL) != SQLITE_OK) {
		rc = dberr(st, err, "prepare");
	} else {
		sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
		sqlite3_bind_text(s, 2, v, -1, SQLITE_STATIC);
		if (sqlite3_step(s) != SQLITE_DONE)
			rc = dberr(st, err, "write");
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_mpu_get(struct jo_sync_state *st, const char *key, struct jo_sync_mpu *m,
			  struct jo_err *err)
{
	memset(m, 0, sizeof(*m));
	if (!st)
		return JO_ENOTFOUND;
	int rc = JO_ENOTFOUND;
	pthread_mutex_lock(&st->mu);
	sqlite3_bind_text(st->mget, 1, key, -1, SQLITE_STATIC);
	int s = sqlite3_step(st->mget);
	if (s == SQLITE_ROW) {
		copy_col(m->upload_id, sizeof(m->upload_id), st->mget, 0);
		m->part_size = (uint64_t)sqlite3_column_int64(st->mget, 1);
		m->src_size = (uint64_t)sqlite3_column_int64(st->mget, 2);
		copy_col(m->src_etag, sizeof(m->src_etag), st->mget, 3);
		m->src_mtime = sqlite3_column_int64(st->mget, 4);
		rc = 0;
	} else if (s != SQLITE_DONE) {
		rc = dberr(st, err, "read");
	}
	sqlite3_reset(st->mget);
	sqlite3_clear_bindings(st->mget);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_mpu_put(struct jo_sync_state *st, const char *key, const struct jo_sync_mpu *m,
			  struct jo_err *err)
{
	if (!st || st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = st->mput;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, m->upload_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)m->part_size);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)m->src_size);
	sqlite3_bind_text(s, 5, m->src_etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, m->src_mtime);
	int rc = step_done(st, s, err);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_mpu_del(struct jo_sync_state *st, const char *key, struct jo_err *err)
{
	if (!st || st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	sqlite3_bind_text(st->mdel, 1, key, -1, SQLITE_STATIC);
	int rc = step_done(st, st->mdel, err);
	if (!rc) {
		sqlite3_bind_text(st->pdel, 1, key, -1, SQLITE_STATIC);
		rc = step_done(st, st->pdel, err);
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_part_put(struct jo_sync_state *st, const char *key, int number,
			   const char *etag, uint64_t size, struct jo_err *err)
{
	if (!st || st->readonly)
		return 0;
	pthread_mutex_lock(&st->mu);
	sqlite3_stmt *s = st->pput;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 2, number);
	sqlite3_bind_text(s, 3, etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)size);
	int rc = step_done(st, s, err);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_parts(struct jo_sync_state *st, const char *key,
			int (*cb)(int number, const char *etag, uint64_t size, void *p),
			void *p, struct jo_err *err)
{
	if (!st)
		return 0;
	sqlite3_stmt *s = NULL;
	int rc = 0;
	pthread_mutex_lock(&st->mu);
	if (sqlite3_prepare_v2(st->db, "SELECT number, etag, size FROM part WHERE key=? ORDER BY number",
			       -1, &s, NULL) != SQLITE_OK) {
		rc = dberr(st, err, "prepare");
	} else {
		sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
		int r;
		while ((r = sqlite3_step(s)) == SQLITE_ROW) {
			const unsigned char *e = sqlite3_column_text(s, 1);
			rc = cb(sqlite3_column_int(s, 0), e ? (const char *)e : "",
				(uint64_t)sqlite3_column_int64(s, 2), p);
			if (rc)
				break;
		}
		if (!rc && r != SQLITE_DONE)
			rc = dberr(st, err, "read");
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	return rc;
}

int jo_sync_state_mpu_each(struct jo_sync_state *st,
			   int (*cb)(const char *key, const struct jo_sync_mpu *m, void *p),
			   void *p, struct jo_err *err)
{
	if (!st)
		return 0;
	sqlite3_stmt *s = NULL;
	int rc = 0;
	/* Collect first: the callback may write to the state. */
	struct item { char *key; struct jo_sync_mpu m; } *items = NULL;
	size_t n = 0, cap = 0;
	pthread_mutex_lock(&st->mu);
	if (sqlite3_prepare_v2(st->db, "SELECT key, upload_id, part_size, src_size, src_etag, src_mtime"
			       " FROM mpu", -1, &s, NULL) != SQLITE_OK) {
		rc = dberr(st, err, "prepare");
	} else {
		while (sqlite3_step(s) == SQLITE_ROW) {
			if (jo_grow_array(&items, &cap, n + 1, sizeof(*items))) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			struct item *it = &items[n];
			memset(it, 0, sizeof(*it));
			it->key = strdup((const char *)sqlite3_column_text(s, 0));
			if (!it->key) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			copy_col(it->m.upload_id, sizeof(it->m.upload_id), s, 1);
			it->m.part_size = (uint64_t)sqlite3_column_int64(s, 2);
			it->m.src_size = (uint64_t)sqlite3_column_int64(s, 3);
			copy_col(it->m.src_etag, sizeof(it->m.src_etag), s, 4);
			it->m.src_mtime = sqlite3_column_int64(s, 5);
			n++;
		}
	}
	sqlite3_finalize(s);
	pthread_mutex_unlock(&st->mu);
	for (size_t i = 0; i < n; i++) {
		if (!rc)
			rc = cb(items[i].key, &items[i].m, p);
		free(items[i].key);
	}
	free(items);
	return rc;
}
