/*
 * redis_internal.h: the pieces of the redis family (meta_redis.c,
 * mut_redis.c, rm_redis.c, compact_redis.c) that its files share.
 */
#ifndef JO_META_REDIS_INTERNAL_H
#define JO_META_REDIS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/engine_internal.h"

struct jo_err;
struct jo_meta;
struct redisContext;
struct redisReply;

/* The connection of a redis-family handle. Borrowed; lives with m. */
struct redisContext *jo_rd_conn(struct jo_meta *m);

/*
 * Report a failed command. r NULL means the connection failed (JO_ECONNECT
 * for I/O or EOF); otherwise r is an error or unexpected reply (JO_EIO) and
 * is freed here. Returns the code.
 */
int jo_rd_fail(struct jo_meta *m, struct redisReply *r, struct jo_err *err, const char *what);

/* Report a lost/failed connection (JO_ECONNECT for I/O or EOF), and run one
 * command: NULL on failure with *rc the code (error replies fail:
 * NOAUTH/WRONGPASS as JO_EAUTH, others JO_EIO). */
int jo_rd_conn_error(struct jo_meta *m, struct jo_err *err, const char *what);
struct redisReply *jo_rd_cmd(struct jo_meta *m, struct jo_err *err, int *rc, const char *fmt, ...);
/* After MULTI, nq queued commands and EXEC were appended (pipelined),
 * read their replies; *exec gets EXEC's (type NIL: a watched key changed). */
int jo_rd_exec(struct jo_meta *m, size_t nq, struct redisReply **exec, struct jo_err *err);

/* The family's section tables. */
extern const struct jo_mut_ops jo_rd_mut_ops;
extern const struct jo_compact_ops jo_rd_compact_ops;

/* Trash-entry removal (rm_redis.c). */
int jo_rd_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		 bool dir_stats, struct jo_rm_res *res, struct jo_err *err);
int jo_rd_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		bool dir_stats, struct jo_rm_res *res, struct jo_err *err);

#endif
