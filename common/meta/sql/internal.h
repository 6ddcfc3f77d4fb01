/*
 * sql/internal.h: the sql family (sql/read.c reads, sql/mut.c gc mutations,
 * sql/rm.c trash removal, sql/task.c task records, sql/compact.c compaction)
 * and the small driver interface it runs on: one driver per dialect
 * (sql/drv_sqlite.c, sql/drv_pg.c, sql/drv_mysql.c). The family's SQL is the
 * same text on every dialect except for the few strings of struct
 * jo_sql_dialect; adding a dialect is a driver file and a dialect table.
 *
 * Statement templates: '?' are parameters, numbered from 1 in order of
 * appearance; '@' is the JuiceFS table prefix ("jfs_" / "jfs_X_"); '#' is
 * ours for a task namespace ("jfsops_[X_]{ns}_"); '~' becomes the dialect's
 * " FOR UPDATE" (nothing on SQLite, which takes the write lock at BEGIN
 * IMMEDIATE instead). Templates never use '?' inside a string literal.
 *
 * Only common/meta includes this.
 */
#ifndef JO_META_SQL_INTERNAL_H
#define JO_META_SQL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/engine_internal.h"

struct jo_err;
struct jo_meta;
struct jo_meta_url;
struct jo_sqlc;   /* a driver connection */
struct jo_sqls;   /* a driver statement */

/* What differs between dialects, as data. */
struct jo_sql_dialect {
	const char *name;            /* "sqlite3", "postgres", "mysql" */
	const char *label;           /* for messages: "sqlite3", "postgres", "mysql" */
	const char *begin_rw;        /* a read-write transaction */
	const char *begin_snapshot;  /* a read-only transaction that reads one snapshot */
	const char *for_update;      /* what '~' becomes */
	/* (item, task) into #item unless the item is there: 1 row changed or 0 */
	const char *insert_item;
	/* INSERT INTO #task ... VALUES (...) followed by this returns the new id
	 * as a row; NULL: the driver's insert_id() gives it */
	const char *returning_id;
	/* DDL creating our task tables if missing, NULL-terminated */
	const char *const *task_ddl;
	/* DDL of the records table beside them (made on first use), and
	 * (k, v) into #rec unless k is there: 1 row changed or 0 */
	const char *const *rec_ddl;
	const char *insert_rec;
	size_t max_blob;             /* the longest blob a column holds (0: no limit) */
};

/*
 * A driver. Statements are prepared from final SQL ('?' parameters), bound
 * (1-based), stepped (1 = a row, 0 = done, < 0 = error in err), read
 * (0-based columns; a blob or text is followed by a NUL byte that is not
 * counted in its length; NULL reads as 0 / empty), reset to run again with
 * new bindings, and freed. Bound pointers must stay valid until the
 * statement's next step or reset. Errors are classified: JO_ECONNECT (the
 * server went away), JO_EAUTH, JO_ENOTJFS (no such table), JO_EPROTO
 * (corrupt database), JO_EIO (others); retryable() tells whether the last
 * error was a lock conflict, deadlock or serialization failure that a new
 * attempt of the whole transaction may clear.
 */
struct jo_sql_driver {
	const struct jo_sql_dialect *dialect;
	int (*connect)(struct jo_sqlc **out, const struct jo_meta_url *u, struct jo_err *err);
	void (*disconnect)(struct jo_sqlc *c);
	/* "PostgreSQL 15.18" etc., malloc'd */
	int (*version)(struct jo_sqlc *c, char **out, struct jo_err *err);
	int (*prepare)(struct jo_sqlc *c, const char *sql, struct jo_sqls **out, struct jo_err *err);
	void (*bind_i64)(struct jo_sqls *s, int i, int64_t v);
	void (*bind_blob)(struct jo_sqls *s, int i, const void *p, size_t n);
	void (*bind_text)(struct jo_sqls *s, int i, const char *p);
	int (*step)(struct jo_sqls *s, struct jo_err *err);
	int64_t (*col_i64)(struct jo_sqls *s, int i);
	const uint8_t *(*col_blob)(struct jo_sqls *s, int i, size_t *n);
	int64_t (*changes)(struct jo_sqls *s);   /* rows the last step matched */
	int64_t (*insert_id)(struct jo_sqls *s); /* id of the row the last INSERT made */
	void (*reset)(struct jo_sqls *s);
	void (*finalize)(struct jo_sqls *s);
	int (*exec)(struct jo_sqlc *c, const char *sql, struct jo_err *err);
	bool (*retryable)(struct jo_sqlc *c);
};

/* A driver's table, for a driver that names its operations d_<op>: the
 * member list is written once here, not again in every driver. */
#define JO_SQL_DRIVER_TABLE(dialect_)                                          \
	{                                                                      \
		.dialect = (dialect_), .connect = d_connect,                   \
		.disconnect = d_disconnect, .version = d_version,              \
		.prepare = d_prepare, .bind_i64 = d_bind_i64,                  \
		.bind_blob = d_bind_blob, .bind_text = d_bind_text,            \
		.step = d_step, .col_i64 = d_col_i64, .col_blob = d_col_blob,  \
		.changes = d_changes, .insert_id = d_insert_id,                \
		.reset = d_reset, .finalize = d_finalize, .exec = d_exec,      \
		.retryable = d_retryable,                                      \
	}

extern const struct jo_sql_driver jo_sqldrv_sqlite;
extern const struct jo_sql_driver jo_sqldrv_pg;
extern const struct jo_sql_driver jo_sqldrv_mysql;

/* ---- the family's helpers (sql/read.c) */

/* How many times a transaction is tried, as juicefs tries its own. */
#define JO_SQL_TXN_TRIES 50
/* How many times BEGIN is tried while another writer holds the database. */
#define JO_SQL_BEGIN_TRIES 6

struct jo_sql {
	const struct jo_sql_driver *drv;
	struct jo_sqlc *c;
	const char *pfx;   /* JuiceFS table prefix, borrowed from m->url */
	int txn_depth;     /* 1 inside jo_sql_begin/begin_snapshot .. commit/rollback */
	bool retry;        /* the last failed driver call may succeed in a new attempt */
	char rec_ns[JO_TASK_NS_MAX + 1]; /* the namespace whose #rec table is known to exist */
};

struct jo_sql *jo_sql_of(struct jo_meta *m);
const struct jo_sql_dialect *jo_sql_dialect_of(struct jo_meta *m);

/*
 * Prepare a template (see the top of this file) for namespace ns (NULL:
 * none). On failure *st is NULL and err says what.
 */
int jo_sql_prep(struct jo_meta *m, const char *ns, struct jo_sqls **st, struct jo_err *err,
		const char *tmpl);
/* jo_sql_prep, then the n integers of v bound to the first n '?'. */
int jo_sql_prep_i64s(struct jo_meta *m, const char *ns, struct jo_sqls **st, const char *tmpl,
		     const int64_t *v, int n, struct jo_err *err);
/* Thin forwards to the driver. */
void jo_sql_i64(struct jo_meta *m, struct jo_sqls *st, int i, int64_t v);
void jo_sql_blob(struct jo_meta *m, struct jo_sqls *st, int i, const void *p, size_t n);
void jo_sql_text(struct jo_meta *m, struct jo_sqls *st, int i, const char *p);
int jo_sql_step(struct jo_meta *m, struct jo_sqls *st, struct jo_err *err);
int64_t jo_sql_col_i64(struct jo_meta *m, struct jo_sqls *st, int i);
const uint8_t *jo_sql_col_blob(struct jo_meta *m, struct jo_sqls *st, int i, size_t *n);
int64_t jo_sql_changes(struct jo_meta *m, struct jo_sqls *st);
void jo_sql_reset(struct jo_meta *m, struct jo_sqls *st);
void jo_sql_free(struct jo_meta *m, struct jo_sqls *st);

/*
 * Run one statement whose '?' take the n integers of v in order, then the
 * blob (name, nlen) when name is not NULL. *row (may be NULL) gets up to ncol
 * integer columns of the first row; *found (may be NULL) whether there was
 * one; *changes (may be NULL) the rows it matched.
 */
int jo_sql_run(struct jo_meta *m, const char *ns, const char *tmpl, const int64_t *v, int n,
	       const void *name, size_t nlen, int64_t *row, int ncol, bool *found,
	       int64_t *changes, struct jo_err *err);
#define JO_SQL_RUN(m, err, tmpl, ...) \
	jo_sql_run(m, NULL, tmpl, (const int64_t[]){ __VA_ARGS__ }, \
		   (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), \
		   NULL, 0, NULL, 0, NULL, NULL, err)

/*
 * Transactions. begin: read-write (the dialect's begin_rw); snapshot: a
 * read-only transaction that sees one snapshot. commit rolls back on
 * failure. rollback is best effort. A nested begin inside a snapshot is
 * an error (a scan callback must write through another handle).
 */
int jo_sql_begin(struct jo_meta *m, struct jo_err *err);
int jo_sql_begin_snapshot(struct jo_meta *m, struct jo_err *err);
int jo_sql_commit(struct jo_meta *m, struct jo_err *err);
void jo_sql_rollback(struct jo_meta *m);
/* A failed transaction step: free st (may be NULL), roll back, return rc. */
int jo_sql_undo(struct jo_meta *m, struct jo_sqls *st, int rc);
/* Was the last error one a new attempt of the transaction may clear?
 * If so, sleeps a little (attempt i: i*i ms plus jitter, as juicefs). */
bool jo_sql_retry(struct jo_meta *m, int attempt);

/* The family's section tables, trash removal (sql/rm.c) and task records
 * (sql/task.c), entries of jo_sql_mut_ops. */
extern const struct jo_mut_ops jo_sql_mut_ops;
extern const struct jo_compact_ops jo_sql_compact_ops;
JO_MUT_FAMILY_DECLS(jo_sql);
/* refs of slice id (its chunk_ref row; sql/mut.c); *exists false when no row. */
int jo_sql_slice_refs(struct jo_meta *m, uint64_t id, int64_t *refs, bool *exists,
		      struct jo_err *err);
int jo_sql_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err);

#endif
