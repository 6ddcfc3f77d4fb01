/*
 * engine_internal.h: the small engine helpers that the mutating modules of
 * common/meta share (mut_*.c, compact_*.c), so transactions and error
 * reporting are written once per engine. Only common/meta includes this.
 */
#ifndef JO_META_ENGINE_INTERNAL_H
#define JO_META_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;
struct redisReply;
struct sqlite3_stmt;

/*
 * Redis: report a failed command. r NULL means the connection failed
 * (JO_ECONNECT for I/O or EOF); otherwise r is an error or unexpected reply
 * (JO_EIO) and is freed here. Returns the code.
 */
int jo_rd_fail(struct jo_meta *m, struct redisReply *r, struct jo_err *err, const char *what);

/* Redis (meta_redis.c): report a lost/failed connection (JO_ECONNECT for
 * I/O or EOF), and run one command: NULL on failure with *rc the code
 * (error replies fail: NOAUTH/WRONGPASS as JO_EAUTH, others JO_EIO). */
int jo_rd_conn_error(struct jo_meta *m, struct jo_err *err, const char *what);
struct redisReply *jo_rd_cmd(struct jo_meta *m, struct jo_err *err, int *rc, const char *fmt, ...);
/* Redis: after MULTI, nq queued commands and EXEC were appended (pipelined),
 * read their replies; *exec gets EXEC's (type NIL: a watched key changed). */
int jo_rd_exec(struct jo_meta *m, size_t nq, struct redisReply **exec, struct jo_err *err);

/* SQLite: prepare SQL whose '@' is the JuiceFS table prefix and '#' ours
 * for namespace ns (NULL: none). */
int jo_sq_prep(struct jo_meta *m, const char *ns, struct sqlite3_stmt **st, struct jo_err *err,
	       const char *fmt);
/* SQLite: the last error of m's database as JO_EIO, with what failed. */
int jo_sq_fail(struct jo_meta *m, struct jo_err *err, const char *what);
/* SQLite: BEGIN IMMEDIATE (waiting out other writers), COMMIT (rolls back on
 * failure), ROLLBACK (best effort). */
int jo_sq_begin(struct jo_meta *m, struct jo_err *err);
int jo_sq_commit(struct jo_meta *m, struct jo_err *err);
void jo_sq_rollback(struct jo_meta *m);

/* Slice lists of the refcount-decrementing transactions (mut.c):
 * append (JO_ENOMEM on failure); at the end free recs and, on error,
 * *freed (reset to empty). Returns rc. */
struct jo_sref;
int jo_sref_push(struct jo_sref **arr, size_t *n, size_t *cap, uint64_t id, uint32_t size);
int jo_sref_finish(int rc, struct jo_sref *recs, struct jo_sref **freed, size_t *nfreed);

/* Trash-entry removal (rm_redis.c / rm_sqlite.c), dispatched by mut.c. */
struct jo_rm_res;
int jo_meta_redis_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			 bool dir_stats, struct jo_rm_res *res, struct jo_err *err);
int jo_meta_redis_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			bool dir_stats, struct jo_rm_res *res, struct jo_err *err);
int jo_meta_sqlite_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			  bool dir_stats, struct jo_rm_res *res, struct jo_err *err);
int jo_meta_sqlite_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			 bool dir_stats, struct jo_rm_res *res, struct jo_err *err);

#endif
