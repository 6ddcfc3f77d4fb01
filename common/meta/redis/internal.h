/*
 * redis/internal.h: the pieces of the redis family (redis/conn.c, redis/read.c,
 * redis/mut.c, redis/task.c, redis/rm.c, redis/compact.c) that its files share.
 */
#ifndef JO_META_REDIS_INTERNAL_H
#define JO_META_REDIS_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/engine_internal.h"

struct jo_err;
struct jo_meta;
struct redisReply;

/*
 * The connection (redis/conn.c): standalone, Sentinel or Cluster, plain or
 * TLS. Commands use hiredis's format strings, with every key written as
 * %K<key> (%K is the Cluster hash-tag prefix "{DB}", empty elsewhere).
 * jo_rd_command and jo_rd_get_reply are redisCommand and redisGetReply
 * (NULL / REDIS_ERR: the connection failed; jo_rd_conn_error says why);
 * pipelines are jo_rd_append... then as many jo_rd_get_reply.
 */
int jo_rd_open(struct jo_meta *m, struct jo_err *err);
void jo_rd_close(struct jo_meta *m);
struct redisReply *jo_rd_command(struct jo_meta *m, const char *fmt, ...);
struct redisReply *jo_rd_vcommand(struct jo_meta *m, const char *fmt, va_list ap);
struct redisReply *jo_rd_command_argv(struct jo_meta *m, int argc, const char **argv,
				      const size_t *lens);
int jo_rd_append(struct jo_meta *m, const char *fmt, ...);
/* jo_rd_append of a command given as argv (keys carry the prefix already). */
int jo_rd_append_argv(struct jo_meta *m, int argc, const char **argv, const size_t *lens);

/* v in decimal at p (no NUL, room: 20); its length. */
static inline size_t jo_rd_put_dec(char *p, uint64_t v)
{
	char t[20];
	size_t n = 0;

	do
		t[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	for (size_t i = 0; i < n; i++)
		p[i] = t[n - 1 - i];
	return n;
}
int jo_rd_get_reply(struct jo_meta *m, struct redisReply **out);
/*
 * A jo_rd_append failed after `appended` others of its pipeline: drop the
 * pipeline and report why (JO_ECONNECT when the connection was lost and
 * could not be made again, JO_ENOMEM when a command could not be
 * formatted). Afterwards nothing is pending: a read-only operation whose
 * error jo_rd_retryable() accepts may be run again.
 */
int jo_rd_append_failed(struct jo_meta *m, size_t appended, struct jo_err *err, const char *what);
/* The key prefix ("" or "{DB}") and its length. */
const char *jo_rd_prefix(struct jo_meta *m, size_t *len);
/* A key name from SCAN without the prefix (in place); false: not ours. */
bool jo_rd_unprefix(struct jo_meta *m, struct redisReply *k);
/* +1 each time the handle connects again: a cursor scan that saw it change
 * must start over (a cursor means nothing to another server). */
unsigned jo_rd_epoch(struct jo_meta *m);
/* rc came from a lost connection and nothing that ran can have been lost
 * with it (no EXEC or non-repeatable write in flight, no transaction open):
 * the whole operation may be run again (it reconnects). */
bool jo_rd_retryable(struct jo_meta *m, int rc);
/* A reply that says the command did not run on this server (MOVED, ASK,
 * READONLY, LOADING...): the connection is replaced by the next command. */
bool jo_rd_redirected(const struct redisReply *r);
/*
 * The one rule before anything is acted on (objects deleted) on the
 * strength of what this handle wrote or read: after the EXEC of such a
 * transaction, and after the reads that decide a delete. 0 when it cannot
 * be taken back by a failover: a replica has it (WAIT 1), or the server has
 * had no replica on this connection, ever (a standalone server that never
 * replicated: as before). A server that had one and reports none now is
 * never taken as safe (a demoted master keeps taking writes for seconds
 * after its replica was promoted), nor is a WAIT refused, a connection lost
 * or replaced since the last confirmation, or a server that is a replica
 * now. Otherwise JO_ECONNECT "...: not acted on" (the result's outcome is
 * unknown; jo_rd_retryable says no), and on Sentinel the sentinels (on
 * Cluster the other nodes, for the slot) are asked who is the master: when
 * they name another server the connection is dropped, the next command goes
 * there, and jo_rd_moved() says so (a caller may re-read there what it
 * wrote, and later work may go on).
 */
int jo_rd_confirm(struct jo_meta *m, struct jo_err *err);
/* The last failure on m was a confirmation that found the master replaced
 * (above); cleared by the next command. */
bool jo_rd_moved(struct jo_meta *m);
/* "sentinel: master 'mymaster' at h:p, TLS: server certificate /CN=..." */
void jo_rd_mode(struct jo_meta *m, char *buf, size_t cap);

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
/* r as a command's reply: NULL (the connection failed) or an error reply
 * (freed) fails as jo_rd_cmd's do, with what in the message. */
struct redisReply *jo_rd_checked(struct jo_meta *m, struct redisReply *r, const char *what,
				 int *rc, struct jo_err *err);
/* After MULTI, nq queued commands and EXEC were appended (pipelined),
 * read their replies; *exec gets EXEC's (type NIL: a watched key changed). */
int jo_rd_exec(struct jo_meta *m, size_t nq, struct redisReply **exec, struct jo_err *err);

/* The family's section tables. */
extern const struct jo_mut_ops jo_rd_mut_ops;
extern const struct jo_compact_ops jo_rd_compact_ops;

/* Shared by redis/mut.c and redis/task.c: run a command that must succeed
 * (fmt names it in the error); the [cursor, [elements]] page of a SCAN,
 * HSCAN or ZSCAN (cursor: 32 bytes; NULL with r freed and err set when it
 * has another shape); an integer reply, or a decimal string one. */
int jo_rd_cmd_ok(struct jo_meta *m, struct jo_err *err, const char *fmt, ...);
struct redisReply *jo_rd_scan_page(struct jo_meta *m, struct redisReply *r, const char *cmd,
				   char *cursor, struct jo_err *err);
int jo_rd_reply_i64(const struct redisReply *r, int64_t *out);

/* Task records and leases, records beside them (redis/task.c)
 * and trash-entry removal (redis/rm.c). */
JO_MUT_FAMILY_DECLS(jo_rd);
int jo_rd_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
		       struct jo_err *err);

#endif
