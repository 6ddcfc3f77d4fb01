/*
 * sql/drv_sqlite.c: the SQLite driver of the sql family. `slices` may be TEXT
 * after `||` appends, so blobs are always read with sqlite3_column_blob +
 * sqlite3_column_bytes. Read-write transactions are BEGIN IMMEDIATE, which
 * takes the write lock up front (what SELECT ... FOR UPDATE gives juicefs
 * on the server engines); busy databases are waited for (busy_timeout) and
 * the transaction tried again.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

#include "common/err.h"
#include "common/file.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SQ_BUSY_MS 5000 /* how long a statement waits out another process's lock */

struct jo_sqlc {
	sqlite3 *db;
	char *path;
	int last;          /* the last error's primary result code */
};

struct jo_sqls {
	struct jo_sqlc *c;
	sqlite3_stmt *st;
	int64_t changes;
};

static int fail(struct jo_sqlc *c, struct jo_err *err, const char *what)
{
	int ec = sqlite3_extended_errcode(c->db) & 0xff;
	const char *msg = sqlite3_errmsg(c->db);
	int code = JO_EIO;

	c->last = ec;
	if (ec == SQLITE_BUSY || ec == SQLITE_LOCKED)
		/* another process held the database past the busy timeout: a request
		 * that cannot proceed (exit 5), not a lost lease or compare-and-swap */
		return jo_err_set(err, JO_ETIMEOUT, "sqlite3 %s: %s: %s (still locked after %d s)",
				  c->path, what, msg, SQ_BUSY_MS / 1000);
	if (ec == SQLITE_NOTADB)
		code = JO_ENOTJFS;
	else if (ec == SQLITE_CORRUPT)
		code = JO_EPROTO;
	else if (ec == SQLITE_ERROR && strstr(msg, "no such table"))
		code = JO_ENOTJFS;
	else if (ec == SQLITE_CANTOPEN)
		code = JO_ENOTFOUND;
	return jo_err_set(err, code, "sqlite3 %s: %s: %s", c->path, what, msg);
}

static int d_connect(struct jo_sqlc **out, const struct jo_meta_url *u, struct jo_err *err)
{
	struct jo_sqlc *c;
	struct stat st;
	bool create = u->coordinator_only && !u->read_only;

	*out = NULL;
	/* a coordinator's file is made on first use; a volume's must exist */
	if (!u->coordinator_only && stat(u->path, &st) != 0)
		return jo_err_set(err, JO_ENOTFOUND, "sqlite3 database %s does not exist", u->path);
	if (create) {
		/* made by jfsops: exclusively, and never a symlink or another user's file */
		static const char *const sidecars[] = { "-wal", "-shm", "-journal", NULL };

		if (jo_file_prepare(u->path, JO_FILE_PUBLIC, 0, sidecars, err))
			return jo_err_wrap(err, "sqlite3 coordinator");
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(u->path))) {
		free(c);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (sqlite3_open_v2(u->path, &c->db, (u->read_only ? SQLITE_OPEN_READONLY :
					      SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX |
				    (create ? SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW : 0),
			    NULL) != SQLITE_OK) {
		int rc = jo_err_set(err, JO_EIO, "cannot open sqlite3 database %s: %s", u->path,
				    c->db ? sqlite3_errmsg(c->db) : "out of memory");
		sqlite3_close(c->db);
		free(c->path);
		free(c);
		return rc;
	}
	sqlite3_busy_timeout(c->db, SQ_BUSY_MS);
	/* workers of several processes share a coordinator file: readers must
	 * not wait for writers (best effort; a volume's mode is left alone) */
	if (u->coordinator_only && !u->read_only)
		(void)sqlite3_exec(c->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
	*out = c;
	return 0;
}

static void d_disconnect(struct jo_sqlc *c)
{
	if (!c)
		return;
	sqlite3_close(c->db);
	free(c->path);
	free(c);
}

static int d_version(struct jo_sqlc *c, char **out, struct jo_err *err)
{
	char buf[64];

	(void)c;
	snprintf(buf, sizeof(buf), "SQLite %s", sqlite3_libversion());
	*out = strdup(buf);
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

static int d_prepare(struct jo_sqlc *c, const char *sql, struct jo_sqls **out, struct jo_err *err)
{
	struct jo_sqls *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s->c = c;
	c->last = 0;
	if (sqlite3_prepare_v2(c->db, sql, -1, &s->st, NULL) != SQLITE_OK) {
		int rc = fail(c, err, "prepare");

		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static void d_bind_i64(struct jo_sqls *s, int i, int64_t v)
{
	sqlite3_bind_int64(s->st, i, (sqlite3_int64)v);
}

static void d_bind_blob(struct jo_sqls *s, int i, const void *p, size_t n)
{
	sqlite3_bind_blob(s->st, i, n ? p : "", (int)n, SQLITE_STATIC);
}

static void d_bind_text(struct jo_sqls *s, int i, const char *p)
{
	sqlite3_bind_text(s->st, i, p, -1, SQLITE_STATIC);
}

static int d_step(struct jo_sqls *s, struct jo_err *err)
{
	int rc;

	s->c->last = 0;
	rc = sqlite3_step(s->st);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE) {
		s->changes = sqlite3_changes(s->c->db);
		return 0;
	}
	return fail(s->c, err, "query");
}

static int64_t d_col_i64(struct jo_sqls *s, int i)
{
	return sqlite3_column_int64(s->st, i);
}

static const uint8_t *d_col_blob(struct jo_sqls *s, int i, size_t *n)
{
	/* text comes NUL-terminated from sqlite3_column_text; blobs are read by length */
	const uint8_t *b = sqlite3_column_type(s->st, i) == SQLITE_TEXT ?
			   sqlite3_column_text(s->st, i) : sqlite3_column_blob(s->st, i);

	*n = (size_t)sqlite3_column_bytes(s->st, i);
	if (!b) {
		*n = 0;
		return (const uint8_t *)"";
	}
	return b;
}

static int64_t d_changes(struct jo_sqls *s)
{
	return s->changes;
}

static int64_t d_insert_id(struct jo_sqls *s)
{
	return sqlite3_last_insert_rowid(s->c->db);
}

static void d_reset(struct jo_sqls *s)
{
	sqlite3_reset(s->st);
}

static void d_finalize(struct jo_sqls *s)
{
	if (!s)
		return;
	sqlite3_finalize(s->st);
	free(s);
}

static int d_exec(struct jo_sqlc *c, const char *sql, struct jo_err *err)
{
	c->last = 0;
	if (sqlite3_exec(c->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return fail(c, err, sql);
	return 0;
}

static bool d_retryable(struct jo_sqlc *c)
{
	return c->last == SQLITE_BUSY || c->last == SQLITE_LOCKED;
}

static const char *const task_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #task (id INTEGER PRIMARY KEY AUTOINCREMENT, "
	"kind TEXT NOT NULL, items TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', "
	"expire INTEGER NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0, "
	"created INTEGER NOT NULL DEFAULT 0)",
	"CREATE INDEX IF NOT EXISTS #task_expire ON #task(expire)",
	"CREATE TABLE IF NOT EXISTS #item (item TEXT PRIMARY KEY, task INTEGER NOT NULL)",
	"CREATE INDEX IF NOT EXISTS #item_task ON #item(task)",
	NULL,
};

static const char *const rec_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #rec (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
	NULL,
};

static const struct jo_sql_dialect dialect = {
	.name = "sqlite3",
	.label = "sqlite3",
	.begin_rw = "BEGIN IMMEDIATE",
	.begin_snapshot = "BEGIN",
	.for_update = "",
	.insert_item = "INSERT OR IGNORE INTO #item (item, task) VALUES (?, ?)",
	.returning_id = NULL,
	.task_ddl = task_ddl,
	.rec_ddl = rec_ddl,
	.insert_rec = "INSERT OR IGNORE INTO #rec (k, v) VALUES (?, ?)",
	.max_blob = 0,
};

const struct jo_sql_driver jo_sqldrv_sqlite = JO_SQL_DRIVER_TABLE(&dialect);
