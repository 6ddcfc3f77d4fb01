/*
 * redis/rm.c: unlink and rmdir of trash entries on Redis, as JuiceFS's
 * doUnlink/doRmdir (pkg/meta/redis.go) run them when the trash is skipped
 * and the caller is root: the same WATCHed keys, the same reads, the same
 * MULTI block, retried while EXEC is aborted by a concurrent writer.
 *
 * Attributes are patched in place (ctime, mtime, nlink at their fixed
 * offsets of the binary attr), so fields this code does not know (ACL ids,
 * later additions) are written back unchanged.
 */
#include "common/meta/meta_mut.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/meta/redis/internal.h"
#include "common/meta/meta.h"
#include "common/meta/meta_internal.h"

#define TXN_RETRIES 50
#define FLAG_IMMUTABLE 1
#define FLAG_APPEND 2
/* offsets in the binary attr (spec §3.2) */
#define AT_MTIME 23
#define AT_CTIME 35
#define AT_NLINK 47
#define ATTR_MIN 63

/* Set the time at offset off (seconds then nanoseconds) to now. */
static void stamp(uint8_t *attr, size_t off, const struct timespec *now)
{
	jo_put_be64(attr + off, (uint64_t)now->tv_sec);
	jo_put_be32(attr + off + 8, (uint32_t)now->tv_nsec);
}

/* WATCH keys (a command whose reply is only checked). */
static int watch(struct jo_meta *m, struct jo_err *err, uint64_t a, uint64_t b, bool two)
{
	int rc;
	redisReply *r = two ? jo_rd_cmd(m, err, &rc, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64, a, b)
			    : jo_rd_cmd(m, err, &rc, "WATCH %Ki%" PRIu64, a);

	freeReplyObject(r);
	return r ? 0 : rc;
}

static void unwatch(struct jo_meta *m)
{
	freeReplyObject(jo_rd_command(m, "UNWATCH")); /* best effort: no EXEC follows */
}

/* A directory entry value: [type u8][inode u64 BE] (spec §3.3). */
static int parse_entry(const redisReply *r, uint8_t *type, uint64_t *ino)
{
	if (r->type != REDIS_REPLY_STRING || r->len < 9)
		return -1;
	*type = (uint8_t)r->str[0];
	*ino = jo_be64((const uint8_t *)r->str + 1);
	return 0;
}

/*
 * The common start of both transactions: WATCH the parent, read the entry,
 * WATCH the child (and its entries for rmdir), MGET both attrs. On return 0
 * with res->status JO_RM_DONE the keys are watched and pattr and attr (either
 * may come back NULL: no attr) are owned by the caller.
 */
static int begin_rm(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen, bool dir,
		    struct jo_rm_res *res, redisReply **pattr, redisReply **attr,
		    struct jo_err *err)
{
	redisReply *r, *mg;
	uint8_t type = 0;
	uint64_t ino = 0;
	int rc;

	*pattr = *attr = NULL;
	res->status = JO_RM_DONE;
	if ((rc = watch(m, err, parent, parent, true)) != 0)
		return rc;
	r = jo_rd_command(m, "HGET %Kd%" PRIu64 " %b", parent, name, nlen);
	if (!r || r->type == REDIS_REPLY_ERROR)
		return jo_rd_fail(m, r, err, "HGET entry");
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		unwatch(m);
		res->status = JO_RM_GONE;
		return 0;
	}
	if (parse_entry(r, &type, &ino) != 0) {
		freeReplyObject(r);
		unwatch(m);
		return jo_err_set(err, JO_EPROTO, "entry %.*s of directory %" PRIu64
				  " is malformed: left alone", (int)(nlen > 80 ? 80 : nlen), name, parent);
	}
	freeReplyObject(r);
	res->ino = ino;
	res->type = type;
	if ((type == JO_TYPE_DIR) != dir) {
		unwatch(m);
		res->status = JO_RM_WRONGTYPE;
		return 0;
	}
	if ((rc = watch(m, err, ino, ino, dir)) != 0)
		return rc;
	mg = jo_rd_command(m, "MGET %Ki%" PRIu64 " %Ki%" PRIu64, parent, ino);
	if (!mg || mg->type != REDIS_REPLY_ARRAY || mg->elements != 2)
		return jo_rd_fail(m, mg, err, "MGET attrs");
	for (int i = 0; i < 2; i++) {
		redisReply *e = mg->element[i];

		if (e->type == REDIS_REPLY_STRING && e->len < ATTR_MIN) {
			freeReplyObject(mg);
			unwatch(m);
			return jo_err_set(err, JO_EPROTO, "attr of inode %" PRIu64 " is %zu bytes: "
					  "left alone", i ? ino : parent, e->len);
		}
		if (e->type == REDIS_REPLY_STRING) {
			/* steal the element */
			(i ? attr : pattr)[0] = e;
			mg->element[i] = NULL;
		}
	}
	freeReplyObject(mg);
	if (!*pattr) {
		/* the parent is gone (redis.Nil -> ENOENT) */
		freeReplyObject(*attr);
		*attr = NULL;
		unwatch(m);
		res->status = JO_RM_GONE;
		return 0;
	}
	{
		const uint8_t *p = (const uint8_t *)(*pattr)->str;

		if ((p[1] >> 4) != JO_TYPE_DIR) {
			res->status = JO_RM_WRONGTYPE;
		} else if (p[0] & (FLAG_IMMUTABLE | FLAG_APPEND)) {
			res->status = JO_RM_PERM;
		}
	}
	if (res->status != JO_RM_DONE) {
		freeReplyObject(*pattr);
		freeReplyObject(*attr);
		*pattr = *attr = NULL;
		unwatch(m);
	}
	return 0;
}

/* EXEC the queued block: *aborted when a watched key changed. */
static int exec_block(struct jo_meta *m, size_t queued, bool *aborted, struct jo_err *err)
{
	redisReply *exec;
	int rc = jo_rd_exec(m, queued, &exec, err);

	if (rc)
		return rc;
	*aborted = exec->type == REDIS_REPLY_NIL;
	if (!*aborted && exec->type != REDIS_REPLY_ARRAY)
		rc = jo_err_set(err, JO_EPROTO, "redis %s: unexpected EXEC reply", m->url.redacted);
	freeReplyObject(exec);
	return rc;
}

/*
 * EXEC the queued block of an unlink or rmdir: 0 when it ran, 1 to go round
 * again (a watched key changed, or the connection went: at most 3 times),
 * or an error.
 */
static int exec_or_again(struct jo_meta *m, size_t queued, int *lost, struct jo_err *err)
{
	bool aborted = false;
	int rc = exec_block(m, queued, &aborted, err);

	if (rc != 0)
		return jo_rd_retryable(m, rc) && ++*lost <= 3 ? 1 : rc;
	return aborted ? 1 : 0;
}

/* updateDirStat, flushed as doUpdateDirStat does: only where the directory
 * has statistics (a missing field is recomputed on demand). *have (may be
 * NULL) tells whether it has them. */
static void dir_stat_add(struct jo_meta *m, uint64_t dir, int64_t length, int64_t space,
			 int64_t inodes, bool *have_out)
{
	redisReply *r = jo_rd_command(m, "HEXISTS %KdirUsedSpace %" PRIu64, dir);
	bool have = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	int n = 0;

	freeReplyObject(r);
	if (have_out)
		*have_out = have || !r;
	if (!have)
		return;
	/* one round trip, as doUpdateDirStat pipelines them */
	if (length)
		jo_rd_append(m, "HINCRBY %KdirDataLength %" PRIu64 " %" PRId64, dir, length), n++;
	jo_rd_append(m, "HINCRBY %KdirUsedSpace %" PRIu64 " %" PRId64, dir, space), n++;
	jo_rd_append(m, "HINCRBY %KdirUsedInodes %" PRIu64 " %" PRId64, dir, inodes), n++;
	while (n-- > 0) {
		redisReply *v = NULL;

		if (jo_rd_get_reply(m, &v) != REDIS_OK)
			return; /* the connection is gone: the next command reports it */
		freeReplyObject(v);
	}
}

static void dir_stat_down(struct jo_meta *m, uint64_t dir, int64_t length, int64_t space)
{
	dir_stat_add(m, dir, -length, -space, -1, NULL);
}

int jo_rd_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			 bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int lost = 0;

	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		redisReply *pattr = NULL, *attr = NULL;
		struct timespec now;
		struct jo_attr a;
		uint64_t ino;
		bool update_parent, last;
		size_t q = 0;
		int rc;

		memset(res, 0, sizeof(*res));
		rc = begin_rm(m, parent, name, nlen, false, res, &pattr, &attr, err);
		if (rc && jo_rd_retryable(m, rc) && ++lost <= 3)
			continue; /* nothing ran: again on a new connection (a failover) */
		if (rc || res->status != JO_RM_DONE)
			return rc;
		ino = res->ino;
		clock_gettime(CLOCK_REALTIME, &now);
		memset(&a, 0, sizeof(a));
		if (attr) {
			struct jo_err e2 = { 0 };
			uint8_t *b = (uint8_t *)attr->str;

			(void)jo_meta_decode_attr(b, attr->len, &a, &e2);
			if (a.flags & (FLAG_IMMUTABLE | FLAG_APPEND)) {
				res->status = JO_RM_PERM;
			} else if (a.nlink == 0) {
				res->status = JO_RM_PERM;
				rc = jo_err_set(err, JO_EPROTO, "inode %" PRIu64 " has nlink 0 but an "
						"entry: left alone", ino);
			}
			if (res->status != JO_RM_DONE) {
				freeReplyObject(pattr);
				freeReplyObject(attr);
				unwatch(m);
				return rc;
			}
			stamp(b, AT_CTIME, &now);
			a.nlink--;
			jo_put_be32(b + AT_NLINK, a.nlink);
		}
		/* no attr: JuiceFS warns and drops the entry and the inode's keys */
		update_parent = !jo_ino_is_trash(parent);
		if (update_parent) {
			stamp((uint8_t *)pattr->str, AT_MTIME, &now);
			stamp((uint8_t *)pattr->str, AT_CTIME, &now);
		}
		last = a.nlink == 0;
		res->length = a.length;
		res->nlink = a.nlink;

		jo_rd_append(m, "MULTI");
		jo_rd_append(m, "HDEL %Kd%" PRIu64 " %b", parent, name, nlen), q++;
		if (update_parent)
			jo_rd_append(m, "SET %Ki%" PRIu64 " %b", parent, pattr->str, pattr->len), q++;
		if (!last) {
			jo_rd_append(m, "SET %Ki%" PRIu64 " %b", ino, attr->str, attr->len), q++;
			if (a.parent == 0)
				jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " -1", ino, parent), q++;
		} else {
			int64_t space = 4096;

			if (res->type == JO_TYPE_FILE) {
				space = jo_align4k(a.length);
				jo_rd_append(m, "ZADD %Kdelfiles %lld %" PRIu64 ":%" PRIu64,
						   (long long)now.tv_sec, ino, a.length), q++;
				res->delfile = true;
			} else if (res->type == JO_TYPE_SYMLINK) {
				jo_rd_append(m, "DEL %Ks%" PRIu64, ino), q++;
			}
			jo_rd_append(m, "DEL %Ki%" PRIu64, ino), q++;
			jo_rd_append(m, "INCRBY %KusedSpace %" PRId64, -space), q++;
			jo_rd_append(m, "DECR %KtotalInodes"), q++;
			jo_rd_append(m, "DEL %Kx%" PRIu64, ino), q++;
			if (a.parent == 0)
				jo_rd_append(m, "DEL %Kp%" PRIu64, ino), q++;
		}
		jo_rd_append(m, "EXEC");
		freeReplyObject(pattr);
		freeReplyObject(attr);
		if ((rc = exec_or_again(m, q, &lost, err)) == 1)
			continue;
		if (rc)
			return rc;
		if (dir_stats) {
			uint64_t dl = res->type == JO_TYPE_FILE ? a.length : 0;

			dir_stat_down(m, parent, (int64_t)dl, jo_align4k(dl));
		}
		return 0;
	}
	return jo_err_set(err, JO_EIO, "unlink %" PRIu64 "/%.*s: the transaction kept "
			  "conflicting; retry later", parent, (int)(nlen > 80 ? 80 : nlen), name);
}

int jo_rd_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int lost = 0;

	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		redisReply *pattr = NULL, *attr = NULL, *r;
		struct timespec now;
		struct jo_attr pa;
		struct jo_err e2 = { 0 };
		uint64_t ino;
		size_t q = 0;
		int rc;

		memset(res, 0, sizeof(*res));
		rc = begin_rm(m, parent, name, nlen, true, res, &pattr, &attr, err);
		if (rc && jo_rd_retryable(m, rc) && ++lost <= 3)
			continue;
		if (rc || res->status != JO_RM_DONE)
			return rc;
		ino = res->ino;
		freeReplyObject(attr); /* only its existence mattered to JuiceFS (a warning) */
		r = jo_rd_command(m, "HLEN %Kd%" PRIu64, ino);
		if (!r || r->type != REDIS_REPLY_INTEGER) {
			freeReplyObject(pattr);
			return jo_rd_fail(m, r, err, "HLEN");
		}
		if (r->integer > 0) {
			freeReplyObject(r);
			freeReplyObject(pattr);
			unwatch(m);
			res->status = JO_RM_NOTEMPTY;
			return 0;
		}
		freeReplyObject(r);
		clock_gettime(CLOCK_REALTIME, &now);
		(void)jo_meta_decode_attr((const uint8_t *)pattr->str, pattr->len, &pa, &e2);
		jo_put_be32((uint8_t *)pattr->str + AT_NLINK, pa.nlink - 1);
		stamp((uint8_t *)pattr->str, AT_MTIME, &now);
		stamp((uint8_t *)pattr->str, AT_CTIME, &now);

		jo_rd_append(m, "MULTI");
		jo_rd_append(m, "HDEL %Kd%" PRIu64 " %b", parent, name, nlen), q++;
		if (!jo_ino_is_trash(parent))
			jo_rd_append(m, "SET %Ki%" PRIu64 " %b", parent, pattr->str, pattr->len), q++;
		jo_rd_append(m, "DEL %Ki%" PRIu64, ino), q++;
		jo_rd_append(m, "DEL %Kx%" PRIu64, ino), q++;
		jo_rd_append(m, "INCRBY %KusedSpace -4096"), q++;
		jo_rd_append(m, "DECR %KtotalInodes"), q++;
		jo_rd_append(m, "HDEL %KdirDataLength %" PRIu64, ino), q++;
		jo_rd_append(m, "HDEL %KdirUsedSpace %" PRIu64, ino), q++;
		jo_rd_append(m, "HDEL %KdirUsedInodes %" PRIu64, ino), q++;
		jo_rd_append(m, "HDEL %KdirQuota %" PRIu64, ino), q++;
		jo_rd_append(m, "HDEL %KdirQuotaUsedSpace %" PRIu64, ino), q++;
		jo_rd_append(m, "HDEL %KdirQuotaUsedInodes %" PRIu64, ino), q++;
		jo_rd_append(m, "EXEC");
		freeReplyObject(pattr);
		if ((rc = exec_or_again(m, q, &lost, err)) == 1)
			continue;
		if (rc)
			return rc;
		if (dir_stats && parent != JO_TRASH_INODE)
			dir_stat_down(m, parent, 0, 4096);
		return 0;
	}
	return jo_err_set(err, JO_EIO, "rmdir %" PRIu64 "/%.*s: the transaction kept "
			  "conflicting; retry later", parent, (int)(nlen > 80 ? 80 : nlen), name);
}

/* ---- restore (doRename with RenameNoReplace|RenameRestore, as root) ---- */

#define AT_PARENT 63

struct rs {
	uint64_t tdir, parent;
	const char *src, *name;
	size_t slen, nlen;
	bool dir_stats;
	struct jo_rs_res *res;
	bool dst_missing;   /* the parent has no statistics recorded */
};

static void free_replies(redisReply **rp, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		freeReplyObject(rp[i]);
		rp[i] = NULL;
	}
}

/* The n replies of a pipeline (all of them, or none on a lost connection). */
static int read_replies(struct jo_meta *m, redisReply **rp, size_t n, struct jo_err *err)
{
	for (size_t i = 0; i < n; i++) {
		if (jo_rd_get_reply(m, &rp[i]) != REDIS_OK || !rp[i]) {
			rp[i] = NULL;
			free_replies(rp, i);
			return jo_rd_conn_error(m, err, "restore reads"); /* the rest went with it */
		}
	}
	return 0;
}

/* One attempt: 0 with *aborted when a watched key changed. */
static int restore_once(struct jo_meta *m, struct rs *x, bool *aborted, struct jo_err *err)
{
	struct jo_rs_res *res = x->res;
	redisReply *r, *mg = NULL;
	uint8_t *da, *ia;
	struct jo_attr d = { 0 }, a = { 0 };
	struct jo_err e2 = { 0 };
	struct timespec now;
	bool fresh_stat = false, src_stat = false, dst_stat = false, isdir;
	redisReply *rp[5] = { 0 };
	uint8_t ebuf[9];
	size_t q = 0, nr;
	int rc = 0;

	*aborted = false;
	/*
	 * Two pipelines of reads, then the MULTI block: the fewer round trips
	 * between WATCH and EXEC, the fewer EXECs another writer of the hour
	 * directory (a worker restoring beside this one) aborts. The parent
	 * first, as juicefs swaps the keys when the source is the trash. The
	 * statistics' presence is read unwatched, as a juicefs client's flush
	 * reads it (rename's updateDirStat of both directories, in the same
	 * MULTI: a process killed after EXEC cannot lose it).
	 */
	nr = x->dir_stats ? 5 : 3;
	if (jo_rd_append(m, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64 " %Ki%" PRIu64 " %Kd%" PRIu64,
			 x->parent, x->parent, x->tdir, x->tdir) != REDIS_OK)
		return jo_rd_append_failed(m, 0, err, "restore reads");
	if (jo_rd_append(m, "HGET %Kd%" PRIu64 " %b", x->tdir, x->src, x->slen) != REDIS_OK)
		return jo_rd_append_failed(m, 1, err, "restore reads");
	if (jo_rd_append(m, "HEXISTS %Kd%" PRIu64 " %b", x->parent, x->name, x->nlen) != REDIS_OK)
		return jo_rd_append_failed(m, 2, err, "restore reads");
	for (size_t i = 3; i < nr; i++)
		if (jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64,
				 i == 3 ? x->tdir : x->parent) != REDIS_OK)
			return jo_rd_append_failed(m, i, err, "restore reads");
	if ((rc = read_replies(m, rp, nr, err)) != 0)
		return rc;
	for (size_t i = 0; i < nr; i++)
		if (rp[i]->type == REDIS_REPLY_ERROR || (i != 1 && i != 0 &&
							 rp[i]->type != REDIS_REPLY_INTEGER)) {
			static const char *const what[] = { "WATCH", "HGET trash entry",
							    "HEXISTS entry", "HEXISTS dirUsedSpace",
							    "HEXISTS dirUsedSpace" };

			rc = jo_rd_fail(m, rp[i], err, what[i]);
			rp[i] = NULL;
			free_replies(rp, nr);
			return rc;
		}
	r = rp[1];
	if (r->type == REDIS_REPLY_NIL || parse_entry(r, &res->type, &res->ino) != 0) {
		bool nil = r->type == REDIS_REPLY_NIL;

		free_replies(rp, nr);
		unwatch(m);
		if (nil) {
			res->status = JO_RS_GONE;
			return 0;
		}
		return jo_err_set(err, JO_EPROTO, "trash entry %.*s is malformed: left alone",
				  (int)(x->slen > 80 ? 80 : x->slen), x->src);
	}
	if (rp[2]->integer) {
		free_replies(rp, nr);
		unwatch(m);
		res->status = JO_RS_EXISTS;
		return 0;
	}
	src_stat = x->dir_stats && rp[3]->integer == 1;
	dst_stat = x->dir_stats && rp[4]->integer == 1;
	free_replies(rp, nr);

	isdir = res->type == JO_TYPE_DIR;
	nr = x->dir_stats && isdir ? 4 : 2;
	if ((isdir ? jo_rd_append(m, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64, res->ino, res->ino)
		 : jo_rd_append(m, "WATCH %Ki%" PRIu64, res->ino)) != REDIS_OK)
		return jo_rd_append_failed(m, 0, err, "restore reads");
	if (jo_rd_append(m, "MGET %Ki%" PRIu64 " %Ki%" PRIu64 " %Ki%" PRIu64, x->tdir, x->parent,
			 res->ino) != REDIS_OK)
		return jo_rd_append_failed(m, 1, err, "restore reads");
	if (nr == 4 && jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64, res->ino) != REDIS_OK)
		return jo_rd_append_failed(m, 2, err, "restore reads");
	if (nr == 4 && jo_rd_append(m, "HLEN %Kd%" PRIu64, res->ino) != REDIS_OK)
		return jo_rd_append_failed(m, 3, err, "restore reads");
	if ((rc = read_replies(m, rp, nr, err)) != 0)
		return rc;
	for (size_t i = 0; i < nr; i++)
		if (rp[i]->type == REDIS_REPLY_ERROR || (i == 1 && (rp[i]->type != REDIS_REPLY_ARRAY ||
								    rp[i]->elements != 3)) ||
		    (i > 1 && rp[i]->type != REDIS_REPLY_INTEGER)) {
			static const char *const what[] = { "WATCH", "MGET attrs",
							    "directory statistics",
							    "directory statistics" };

			rc = jo_rd_fail(m, rp[i], err, what[i]);
			rp[i] = NULL;
			free_replies(rp, nr);
			return rc;
		}
	mg = rp[1];
	rp[1] = NULL;
	fresh_stat = nr == 4 && rp[2]->integer == 0 && rp[3]->integer == 0;
	free_replies(rp, nr);
	for (size_t i = 0; i < 3; i++) {
		redisReply *e = mg->element[i];

		if (e->type != REDIS_REPLY_STRING) {
			res->status = i == 1 ? JO_RS_NOPARENT : JO_RS_GONE;
			goto skip;
		}
		if (e->len < ATTR_MIN) {
			rc = jo_err_set(err, JO_EPROTO, "attr of inode %" PRIu64 " is %zu bytes: "
					"left alone", i == 0 ? x->tdir : i == 1 ? x->parent : res->ino,
					e->len);
			goto skip;
		}
	}
	da = (uint8_t *)mg->element[1]->str;
	ia = (uint8_t *)mg->element[2]->str;
	(void)jo_meta_decode_attr(da, mg->element[1]->len, &d, &e2);
	(void)jo_meta_decode_attr(ia, mg->element[2]->len, &a, &e2);
	if (d.type != JO_TYPE_DIR) {
		res->status = JO_RS_NOPARENT;
		goto skip;
	}
	if ((d.flags & FLAG_IMMUTABLE) || (a.flags & (FLAG_IMMUTABLE | FLAG_APPEND)) ||
	    res->ino == x->parent || res->ino == d.parent) {
		res->status = JO_RS_PERM;
		goto skip;
	}
	res->length = res->type == JO_TYPE_FILE ? a.length : 0;
	x->dst_missing = x->dir_stats && !dst_stat;
	clock_gettime(CLOCK_REALTIME, &now);
	stamp(ia, AT_CTIME, &now);
	if (mg->element[2]->len >= AT_PARENT + 8 && (res->type == JO_TYPE_DIR || a.parent > 0))
		jo_put_be64(ia + AT_PARENT, x->parent);
	if (res->type == JO_TYPE_DIR)
		jo_put_be32(da + AT_NLINK, d.nlink + 1);
	stamp(da, AT_MTIME, &now);
	stamp(da, AT_CTIME, &now);

	jo_rd_append(m, "MULTI");
	jo_rd_append(m, "HDEL %Kd%" PRIu64 " %b", x->tdir, x->src, x->slen), q++;
	if (a.parent == 0 && res->type != JO_TYPE_DIR) {
		jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " 1", res->ino, x->parent), q++;
		jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " -1", res->ino, x->tdir), q++;
	}
	jo_rd_append(m, "SET %Ki%" PRIu64 " %b", res->ino, ia, mg->element[2]->len), q++;
	ebuf[0] = res->type;
	jo_put_be64(ebuf + 1, res->ino);
	jo_rd_append(m, "HSET %Kd%" PRIu64 " %b %b", x->parent, x->name, x->nlen, ebuf,
		     sizeof(ebuf)), q++;
	jo_rd_append(m, "SET %Ki%" PRIu64 " %b", x->parent, da, mg->element[1]->len), q++;
	for (int i = 0; i < 2; i++) {
		uint64_t dir = i ? x->parent : x->tdir;
		int64_t sign = i ? 1 : -1;

		if (!(i ? dst_stat : src_stat))
			continue;
		if (res->length)
			jo_rd_append(m, "HINCRBY %KdirDataLength %" PRIu64 " %" PRId64, dir,
				     sign * (int64_t)res->length), q++;
		jo_rd_append(m, "HINCRBY %KdirUsedSpace %" PRIu64 " %" PRId64, dir,
			     sign * jo_align4k(res->length)), q++;
		jo_rd_append(m, "HINCRBY %KdirUsedInodes %" PRIu64 " %" PRId64, dir, sign), q++;
	}
	if (fresh_stat) {
		jo_rd_append(m, "HSET %KdirDataLength %" PRIu64 " 0", res->ino), q++;
		jo_rd_append(m, "HSET %KdirUsedSpace %" PRIu64 " 0", res->ino), q++;
		jo_rd_append(m, "HSET %KdirUsedInodes %" PRIu64 " 0", res->ino), q++;
	}
	jo_rd_append(m, "EXEC");
	freeReplyObject(mg);
	return exec_block(m, q, aborted, err);
skip:
	freeReplyObject(mg);
	unwatch(m);
	return rc;
}

/*
 * After an aborted EXEC, a random pause of up to (attempt + 1) x 0.5 ms
 * (at most 10 ms): workers restoring from one hour directory all write its
 * entry hash, and without it the one that retries can lose to the others'
 * next transactions again and again.
 */
static void backoff(int attempt)
{
	static uint64_t s;
	struct timespec ts;
	int64_t cap = (attempt + 1) * 500000LL;

	if (!s) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ULL;
	}
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	if (cap > 10000000)
		cap = 10000000;
	ts.tv_sec = 0;
	ts.tv_nsec = (long)(s % (uint64_t)cap);
	nanosleep(&ts, NULL);
}

int jo_rd_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen, uint64_t parent,
		  const char *name, size_t nlen, bool dir_stats, struct jo_rs_res *res,
		  bool *dst_stat_missing, struct jo_err *err)
{
	struct rs x = { tdir, parent, src, name, slen, nlen, dir_stats, res, false };
	int lost = 0;

	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		bool aborted = false;
		int rc;

		memset(res, 0, sizeof(*res));
		rc = restore_once(m, &x, &aborted, err);
		if (rc && jo_rd_retryable(m, rc) && ++lost <= 3)
			continue; /* nothing ran, or a lost EXEC the next attempt finds done */
		if (rc || res->status != JO_RS_DONE)
			return rc;
		if (aborted) {
			backoff(attempt);
			continue;
		}
		*dst_stat_missing = x.dst_missing;
		return 0;
	}
	return jo_err_set(err, JO_EIO, "restore %" PRIu64 "/%.*s: the transaction kept "
			  "conflicting; retry later", tdir, (int)(slen > 80 ? 80 : slen), src);
}

/*
 * A test and, where it says yes, two updates of one directory in two hashes:
 * r is the test's reply from jo_rd_cmd (HSETNX or HEXISTS; NULL with rc its
 * error). *yes is whether it was the integer 1; then fmt1 runs with
 * (ino, v1) and fmt2 with (ino, v2). r is freed.
 */
static int if_one_two_fields(struct jo_meta *m, redisReply *r, int rc, bool *yes, uint64_t ino,
			     const char *fmt1, int64_t v1, const char *fmt2, int64_t v2,
			     struct jo_err *err)
{
	const char *fmt[2] = { fmt1, fmt2 };
	const int64_t v[2] = { v1, v2 };

	if (!r)
		return rc;
	*yes = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
	freeReplyObject(r);
	for (int i = 0; *yes && i < 2; i++) {
		r = jo_rd_cmd(m, err, &rc, fmt[i], ino, v[i]);
		if (!r)
			return rc;
		freeReplyObject(r);
	}
	return 0;
}

int jo_rd_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length, int64_t space,
			int64_t inodes, bool *written, struct jo_err *err)
{
	int rc;
	/* HSETNX on the field the presence test reads, the others after it */
	redisReply *r = jo_rd_cmd(m, err, &rc, "HSETNX %KdirUsedSpace %" PRIu64 " %" PRId64, ino,
				  space);

	return if_one_two_fields(m, r, rc, written, ino,
				 "HSET %KdirDataLength %" PRIu64 " %" PRId64, length,
				 "HSET %KdirUsedInodes %" PRIu64 " %" PRId64, inodes, err);
}

int jo_rd_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space, int64_t inodes,
			bool *had, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "HEXISTS %KdirQuota %" PRIu64, ino);

	return if_one_two_fields(m, r, rc, had, ino,
				 "HINCRBY %KdirQuotaUsedSpace %" PRIu64 " %" PRId64, space,
				 "HINCRBY %KdirQuotaUsedInodes %" PRIu64 " %" PRId64, inodes, err);
}

/*
 * ---- a batch of restores in one MULTI (jo_mut_restore_many)
 *
 * Workers restoring from one hour directory all write its entry hash, which
 * every restore WATCHes: one entry per transaction, each EXEC aborts the
 * others' transactions under way. A batch reads all of its entries in two
 * pipelines and writes them in one MULTI block: the same keys watched, the
 * same checks per entry, each parent's attr written once (nlink, times).
 * A batch where an entry is also one of the directories written (its own
 * parent, an hour directory) goes one by one.
 */
struct rb_dir {
	uint64_t ino;
	bool stat;          /* has statistics */
	redisReply *attr;   /* borrowed from the GET replies */
	int64_t dirs;       /* directories restored into it */
	bool parent, written;
};

struct rb_item {
	bool cand;          /* passed the first checks */
	size_t tdir, parent; /* indexes into the dirs */
	redisReply *attr;   /* the entry's attr (borrowed) */
	bool fresh;         /* a directory without statistics or entries */
	struct jo_attr a;
};

static size_t rb_dir_of(struct rb_dir *d, size_t *nd, uint64_t ino)
{
	for (size_t i = 0; i < *nd; i++)
		if (d[i].ino == ino)
			return i;
	memset(&d[*nd], 0, sizeof(d[*nd]));
	d[*nd].ino = ino;
	return (*nd)++;
}

static int restore_batch_once(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			      struct rb_dir *d, struct rb_item *it, redisReply **rp, bool *aborted,
			      bool *one_by_one, struct jo_err *err)
{
	size_t nd = 0, nr = 0, ap = 0, q = 0, ndone = 0;
	struct timespec now;
	struct jo_err e2 = { 0 };
	int rc = 0;

	*aborted = *one_by_one = false;
	for (size_t i = 0; i < n; i++) {
		memset(&v[i].res, 0, sizeof(v[i].res));
		memset(&it[i], 0, sizeof(it[i]));
		it[i].parent = rb_dir_of(d, &nd, v[i].parent);
		d[it[i].parent].parent = true;
		it[i].tdir = rb_dir_of(d, &nd, v[i].tdir);
	}
	/* the parents first, as juicefs swaps the keys when the source is the trash */
	for (size_t i = 0; i < nd; i++, ap++)
		if (jo_rd_append(m, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64, d[i].ino, d[i].ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	for (size_t i = 0; i < n; i++, ap += 2)
		if (jo_rd_append(m, "HGET %Kd%" PRIu64 " %b", v[i].tdir, v[i].src, v[i].src_len) !=
			    REDIS_OK ||
		    jo_rd_append(m, "HEXISTS %Kd%" PRIu64 " %b", v[i].parent, v[i].name,
				 v[i].name_len) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	for (size_t i = 0; dir_stats && i < nd; i++, ap++)
		if (jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64, d[i].ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	nr = ap;
	if ((rc = read_replies(m, rp, nr, err)) != 0)
		return rc;
	for (size_t i = 0; i < nr; i++) {
		bool hget = i >= nd && i < nd + 2 * n && (i - nd) % 2 == 0;

		if (rp[i]->type == REDIS_REPLY_ERROR ||
		    (i >= nd && !hget && rp[i]->type != REDIS_REPLY_INTEGER)) {
			rc = jo_rd_fail(m, rp[i], err, i < nd ? "WATCH" : hget ? "HGET trash entry" :
						 "HEXISTS");
			rp[i] = NULL;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		redisReply *h = rp[nd + 2 * i], *x = rp[nd + 2 * i + 1];

		if (h->type == REDIS_REPLY_NIL) {
			v[i].res.status = JO_RS_GONE;
			continue;
		}
		if (parse_entry(h, &v[i].res.type, &v[i].res.ino) != 0) {
			rc = jo_err_set(err, JO_EPROTO, "trash entry %.*s is malformed: left alone",
					(int)(v[i].src_len > 80 ? 80 : v[i].src_len), v[i].src);
			goto out;
		}
		if (x->integer) {
			v[i].res.status = JO_RS_EXISTS;
			continue;
		}
		it[i].cand = true;
		for (size_t j = 0; j < nd; j++)
			if (d[j].ino == v[i].res.ino)
				*one_by_one = true;
		/* a directory twice, or two entries for one name: one by one */
		for (size_t j = 0; j < i; j++)
			if (it[j].cand && ((v[j].res.ino == v[i].res.ino &&
					    v[i].res.type == JO_TYPE_DIR) ||
					   (v[j].parent == v[i].parent &&
					    v[j].name_len == v[i].name_len &&
					    !memcmp(v[j].name, v[i].name, v[i].name_len))))
				*one_by_one = true;
	}
	for (size_t i = 0; dir_stats && i < nd; i++)
		d[i].stat = rp[nd + 2 * n + i]->integer == 1;
	free_replies(rp, nr);
	nr = 0;
	if (*one_by_one)
		goto out;

	/* the entries' keys watched, then every attr and the new directories' statistics */
	ap = 0;
	for (size_t i = 0; i < n; i++) {
		if (!it[i].cand)
			continue;
		if ((v[i].res.type == JO_TYPE_DIR ?
		     jo_rd_append(m, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64, v[i].res.ino, v[i].res.ino) :
		     jo_rd_append(m, "WATCH %Ki%" PRIu64, v[i].res.ino)) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
		ap++;
	}
	for (size_t i = 0; i < nd; i++, ap++)
		if (jo_rd_append(m, "GET %Ki%" PRIu64, d[i].ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	for (size_t i = 0; i < n; i++) {
		if (!it[i].cand)
			continue;
		if (jo_rd_append(m, "GET %Ki%" PRIu64, v[i].res.ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
		ap++;
		if (dir_stats && v[i].res.type == JO_TYPE_DIR) {
			if (jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64, v[i].res.ino) != REDIS_OK)
				return jo_rd_append_failed(m, ap, err, "restore reads");
			ap++;
			if (jo_rd_append(m, "HLEN %Kd%" PRIu64, v[i].res.ino) != REDIS_OK)
				return jo_rd_append_failed(m, ap, err, "restore reads");
			ap++;
		}
	}
	nr = ap;
	if ((rc = read_replies(m, rp, nr, err)) != 0)
		return rc;
	for (size_t i = 0; i < nr; i++)
		if (rp[i]->type == REDIS_REPLY_ERROR) {
			rc = jo_rd_fail(m, rp[i], err, "restore reads");
			rp[i] = NULL;
			goto out;
		}
	{
		size_t at = 0;

		for (size_t i = 0; i < n; i++)
			at += it[i].cand;
		for (size_t i = 0; i < nd; i++, at++)
			d[i].attr = rp[at];
		for (size_t i = 0; i < n; i++) {
			if (!it[i].cand)
				continue;
			it[i].attr = rp[at++];
			if (dir_stats && v[i].res.type == JO_TYPE_DIR) {
				redisReply *h = rp[at++], *l = rp[at++];

				if (h->type != REDIS_REPLY_INTEGER || l->type != REDIS_REPLY_INTEGER) {
					rc = jo_err_set(err, JO_EPROTO, "redis %s: directory statistics: "
							"unexpected reply", m->url.redacted);
					goto out;
				}
				it[i].fresh = h->integer == 0 && l->integer == 0;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct jo_rs_res *res = &v[i].res;
		redisReply *at[3];
		struct jo_attr pa = { 0 };

		if (!it[i].cand)
			continue;
		it[i].cand = false;
		at[0] = d[it[i].tdir].attr;
		at[1] = d[it[i].parent].attr;
		at[2] = it[i].attr;
		for (size_t k = 0; k < 3 && res->status == JO_RS_DONE; k++) {
			if (at[k]->type != REDIS_REPLY_STRING) {
				res->status = k == 1 ? JO_RS_NOPARENT : JO_RS_GONE;
				break;
			}
			if (at[k]->len < ATTR_MIN) {
				rc = jo_err_set(err, JO_EPROTO, "attr of inode %" PRIu64 " is %zu bytes: "
						"left alone", k == 0 ? v[i].tdir : k == 1 ? v[i].parent :
						res->ino, at[k]->len);
				goto out;
			}
		}
		if (res->status != JO_RS_DONE)
			continue;
		(void)jo_meta_decode_attr((uint8_t *)at[1]->str, at[1]->len, &pa, &e2);
		(void)jo_meta_decode_attr((uint8_t *)at[2]->str, at[2]->len, &it[i].a, &e2);
		if (pa.type != JO_TYPE_DIR) {
			res->status = JO_RS_NOPARENT;
			continue;
		}
		if ((pa.flags & FLAG_IMMUTABLE) || (it[i].a.flags & (FLAG_IMMUTABLE | FLAG_APPEND)) ||
		    res->ino == v[i].parent || res->ino == pa.parent) {
			res->status = JO_RS_PERM;
			continue;
		}
		res->length = res->type == JO_TYPE_FILE ? it[i].a.length : 0;
		it[i].cand = true; /* goes back */
		ndone++;
	}
	if (!ndone) {
		unwatch(m);
		goto ran;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	jo_rd_append(m, "MULTI");
	for (size_t i = 0; i < n; i++) {
		struct jo_rs_res *res = &v[i].res;
		uint8_t *ia, ebuf[9];

		if (!it[i].cand)
			continue;
		ia = (uint8_t *)it[i].attr->str;
		stamp(ia, AT_CTIME, &now);
		if (it[i].attr->len >= AT_PARENT + 8 && (res->type == JO_TYPE_DIR || it[i].a.parent > 0))
			jo_put_be64(ia + AT_PARENT, v[i].parent);
		jo_rd_append(m, "HDEL %Kd%" PRIu64 " %b", v[i].tdir, v[i].src, v[i].src_len), q++;
		if (it[i].a.parent == 0 && res->type != JO_TYPE_DIR) {
			jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " 1", res->ino, v[i].parent), q++;
			jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " -1", res->ino, v[i].tdir), q++;
		}
		jo_rd_append(m, "SET %Ki%" PRIu64 " %b", res->ino, ia, it[i].attr->len), q++;
		ebuf[0] = res->type;
		jo_put_be64(ebuf + 1, res->ino);
		jo_rd_append(m, "HSET %Kd%" PRIu64 " %b %b", v[i].parent, v[i].name, v[i].name_len,
			     ebuf, sizeof(ebuf)), q++;
		d[it[i].parent].dirs += res->type == JO_TYPE_DIR;
		d[it[i].parent].written = true;
		for (int k = 0; k < 2; k++) {
			const struct rb_dir *dd = &d[k ? it[i].parent : it[i].tdir];
			int64_t sign = k ? 1 : -1;

			if (!dir_stats || !dd->stat)
				continue;
			if (res->length)
				jo_rd_append(m, "HINCRBY %KdirDataLength %" PRIu64 " %" PRId64, dd->ino,
					     sign * (int64_t)res->length), q++;
			jo_rd_append(m, "HINCRBY %KdirUsedSpace %" PRIu64 " %" PRId64, dd->ino,
				     sign * jo_align4k(res->length)), q++;
			jo_rd_append(m, "HINCRBY %KdirUsedInodes %" PRIu64 " %" PRId64, dd->ino, sign), q++;
		}
		if (dir_stats && it[i].fresh) {
			jo_rd_append(m, "HSET %KdirDataLength %" PRIu64 " 0", res->ino), q++;
			jo_rd_append(m, "HSET %KdirUsedSpace %" PRIu64 " 0", res->ino), q++;
			jo_rd_append(m, "HSET %KdirUsedInodes %" PRIu64 " 0", res->ino), q++;
		}
	}
	for (size_t i = 0; i < nd; i++) {
		struct jo_attr pa = { 0 };
		uint8_t *da;

		if (!d[i].written)
			continue;
		da = (uint8_t *)d[i].attr->str;
		(void)jo_meta_decode_attr(da, d[i].attr->len, &pa, &e2);
		if (d[i].dirs)
			jo_put_be32(da + AT_NLINK, pa.nlink + (uint32_t)d[i].dirs);
		stamp(da, AT_MTIME, &now);
		stamp(da, AT_CTIME, &now);
		jo_rd_append(m, "SET %Ki%" PRIu64 " %b", d[i].ino, da, d[i].attr->len), q++;
	}
	jo_rd_append(m, "EXEC");
	if ((rc = exec_block(m, q, aborted, err)) != 0 || *aborted)
		goto out;
ran:
	for (size_t i = 0; i < n; i++) {
		v[i].ran = true;
		v[i].dst_stat_missing = v[i].res.status == JO_RS_DONE && dir_stats &&
					!d[it[i].parent].stat;
	}
out:
	free_replies(rp, nr);
	if ((rc && rc != JO_ECONNECT) || (!rc && *one_by_one))
		unwatch(m); /* no EXEC follows */
	return rc;
}

int jo_rd_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
		       struct jo_err *err)
{
	struct rb_dir *d = calloc(2 * n, sizeof(*d));
	struct rb_item *it = calloc(n, sizeof(*it));
	redisReply **rp = calloc(4 * n + 2 * n + 2, sizeof(*rp));
	bool one_by_one = false;
	int rc = 0, lost = 0, attempt;

	if (!d || !it || !rp) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (attempt = 0; attempt < TXN_RETRIES; attempt++) {
		bool aborted = false;

		rc = restore_batch_once(m, v, n, dir_stats, d, it, rp, &aborted, &one_by_one, err);
		if (rc && jo_rd_retryable(m, rc) && ++lost <= 3)
			continue; /* nothing ran, or a lost EXEC the next attempt finds done */
		if (rc || one_by_one || !aborted)
			break;
		backoff(attempt);
	}
	if (!rc && !one_by_one && attempt == TXN_RETRIES)
		rc = jo_err_set(err, JO_EIO, "restore of %zu entries: the transaction kept "
				"conflicting; retry later", n);
	if (!rc && one_by_one) {
		for (size_t i = 0; i < n && rc == 0; i++) {
			rc = jo_rd_restore(m, v[i].tdir, v[i].src, v[i].src_len, v[i].parent, v[i].name,
					   v[i].name_len, dir_stats, &v[i].res, &v[i].dst_stat_missing,
					   err);
			v[i].ran = rc == 0;
		}
	}
out:
	free(d);
	free(it);
	free(rp);
	return rc;
}
