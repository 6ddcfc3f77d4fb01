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

		if (e->type == REDIS_REPLY_STRING && e->len < JO_ATTR_PARENT_OFF) {
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
		} else if (p[0] & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
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
			if (a.flags & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
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
			jo_attr_stamp(b, JO_ATTR_CTIME_OFF, &now);
			a.nlink--;
			jo_put_be32(b + JO_ATTR_NLINK_OFF, a.nlink);
		}
		/* no attr: JuiceFS warns and drops the entry and the inode's keys */
		update_parent = !jo_ino_is_trash(parent);
		if (update_parent) {
			jo_attr_stamp((uint8_t *)pattr->str, JO_ATTR_MTIME_OFF, &now);
			jo_attr_stamp((uint8_t *)pattr->str, JO_ATTR_CTIME_OFF, &now);
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
		jo_put_be32((uint8_t *)pattr->str + JO_ATTR_NLINK_OFF, pa.nlink - 1);
		jo_attr_stamp((uint8_t *)pattr->str, JO_ATTR_MTIME_OFF, &now);
		jo_attr_stamp((uint8_t *)pattr->str, JO_ATTR_CTIME_OFF, &now);

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

struct rs {
	uint64_t tdir, parent;
	const char *src, *name;
	size_t slen, nlen;
	bool dir_stats;
	struct jo_rs_res *res;
	bool dst_missing;   /* the parent has no statistics recorded */
	const struct jo_rs_quota *quota; /* charged in the MULTI block (may be NULL) */
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

/* What the reads found about the statistics of the directories written. */
struct rs_stat {
	bool src, dst;      /* the hour directory, the parent have statistics */
	bool fresh;         /* the entry is a directory without statistics or entries */
};

/*
 * The checks of one entry on the attrs of its hour directory, its parent
 * and itself (at[0..2]), as restore and a batch make them: 0 with
 * res->status JO_RS_DONE, *pa and *a decoded and res->length set when it
 * can go back; 0 with JO_RS_NOPARENT, JO_RS_GONE or JO_RS_PERM when not;
 * an error on an attr too short to patch.
 */
static int rs_check(const struct rs *x, redisReply *const at[3], struct jo_attr *pa,
		    struct jo_attr *a, struct jo_err *err)
{
	struct jo_rs_res *res = x->res;
	struct jo_err e2 = { 0 };

	for (size_t k = 0; k < 3; k++) {
		if (at[k]->type != REDIS_REPLY_STRING) {
			res->status = k == 1 ? JO_RS_NOPARENT : JO_RS_GONE;
			return 0;
		}
		if (at[k]->len < JO_ATTR_PARENT_OFF)
			return jo_err_set(err, JO_EPROTO, "attr of inode %" PRIu64 " is %zu bytes: "
					  "left alone", k == 0 ? x->tdir : k == 1 ? x->parent :
					  res->ino, at[k]->len);
	}
	(void)jo_meta_decode_attr((uint8_t *)at[1]->str, at[1]->len, pa, &e2);
	(void)jo_meta_decode_attr((uint8_t *)at[2]->str, at[2]->len, a, &e2);
	if (pa->type != JO_TYPE_DIR) {
		res->status = JO_RS_NOPARENT;
		return 0;
	}
	if ((pa->flags & JO_ATTR_FLAG_IMMUTABLE) || (a->flags & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) ||
	    res->ino == x->parent || res->ino == pa->parent) {
		res->status = JO_RS_PERM;
		return 0;
	}
	res->length = res->type == JO_TYPE_FILE ? a->length : 0;
	return 0;
}

/* Queue the quota charge of entry x (see rs_queue); returns how many. */
static size_t quota_queue(struct jo_meta *m, const struct rs *x)
{
	int64_t space, inodes;
	size_t q = 0;

	jo_rs_quota_delta(x->quota, x->res, &space, &inodes);
	for (size_t i = 0; inodes && i < x->quota->ndirs; i++) {
		jo_rd_append(m, "HINCRBY %KdirQuotaUsedSpace %" PRIu64 " %" PRId64,
			     x->quota->dirs[i], space), q++;
		jo_rd_append(m, "HINCRBY %KdirQuotaUsedInodes %" PRIu64 " %" PRId64,
			     x->quota->dirs[i], inodes), q++;
	}
	return q;
}

/*
 * Queue one entry's commands of the MULTI block: the entry's attr (attr,
 * patched here: ctime, parent) moved from the hour directory to its parent,
 * the parent's attr when pattr (a batch writes each parent's once, after its
 * entries), the statistics st says are there, the quotas' usage (x->quota:
 * doFlushQuotas's increments, in the same block as the rename they count).
 * Returns how many were queued.
 */
static size_t rs_queue(struct jo_meta *m, const struct rs *x, const struct jo_attr *a,
		       const redisReply *attr, const redisReply *pattr, const struct rs_stat *st,
		       const struct timespec *now)
{
	const struct jo_rs_res *res = x->res;
	uint8_t *ia = (uint8_t *)attr->str, ebuf[9];
	size_t q = 0;

	jo_attr_stamp(ia, JO_ATTR_CTIME_OFF, now);
	if (attr->len >= JO_ATTR_PARENT_OFF + 8 && (res->type == JO_TYPE_DIR || a->parent > 0))
		jo_put_be64(ia + JO_ATTR_PARENT_OFF, x->parent);
	jo_rd_append(m, "HDEL %Kd%" PRIu64 " %b", x->tdir, x->src, x->slen), q++;
	if (a->parent == 0 && res->type != JO_TYPE_DIR) {
		jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " 1", res->ino, x->parent), q++;
		jo_rd_append(m, "HINCRBY %Kp%" PRIu64 " %" PRIu64 " -1", res->ino, x->tdir), q++;
	}
	jo_rd_append(m, "SET %Ki%" PRIu64 " %b", res->ino, ia, attr->len), q++;
	ebuf[0] = res->type;
	jo_put_be64(ebuf + 1, res->ino);
	jo_rd_append(m, "HSET %Kd%" PRIu64 " %b %b", x->parent, x->name, x->nlen, ebuf,
		     sizeof(ebuf)), q++;
	if (pattr)
		jo_rd_append(m, "SET %Ki%" PRIu64 " %b", x->parent, pattr->str, pattr->len), q++;
	for (int i = 0; i < 2; i++) {
		uint64_t dir = i ? x->parent : x->tdir;
		int64_t sign = i ? 1 : -1;

		if (!(i ? st->dst : st->src))
			continue;
		if (res->length)
			jo_rd_append(m, "HINCRBY %KdirDataLength %" PRIu64 " %" PRId64, dir,
				     sign * (int64_t)res->length), q++;
		jo_rd_append(m, "HINCRBY %KdirUsedSpace %" PRIu64 " %" PRId64, dir,
			     sign * jo_align4k(res->length)), q++;
		jo_rd_append(m, "HINCRBY %KdirUsedInodes %" PRIu64 " %" PRId64, dir, sign), q++;
	}
	if (st->fresh) {
		jo_rd_append(m, "HSET %KdirDataLength %" PRIu64 " 0", res->ino), q++;
		jo_rd_append(m, "HSET %KdirUsedSpace %" PRIu64 " 0", res->ino), q++;
		jo_rd_append(m, "HSET %KdirUsedInodes %" PRIu64 " 0", res->ino), q++;
	}
	q += quota_queue(m, x);
	return q;
}

/*
 * The first pipeline of a restore: WATCH both directories, the trash entry,
 * the target name, the statistics' presence (unwatched, as a juicefs
 * client's flush reads it). 0 with res->status JO_RS_DONE, res->type and
 * res->ino and st->src, st->dst set: go on, the keys watched; 0 with
 * JO_RS_GONE or JO_RS_EXISTS, unwatched; or an error.
 */
static int rs_read_entry(struct jo_meta *m, struct rs *x, struct rs_stat *st, struct jo_err *err)
{
	struct jo_rs_res *res = x->res;
	redisReply *r, *rp[5] = { 0 };
	size_t nr = x->dir_stats ? 5 : 3;
	int rc;

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
	st->src = x->dir_stats && rp[3]->integer == 1;
	st->dst = x->dir_stats && rp[4]->integer == 1;
	free_replies(rp, nr);
	return 0;
}

/*
 * The second pipeline: WATCH the entry (and its entries for a directory),
 * MGET the three attrs, and for a directory when statistics are kept
 * whether it has statistics or entries. 0 with *mg (the MGET reply, the
 * caller's) and st->fresh set, or an error (the keys still watched).
 */
static int rs_read_attrs(struct jo_meta *m, struct rs *x, redisReply **mg, struct rs_stat *st,
			 struct jo_err *err)
{
	struct jo_rs_res *res = x->res;
	bool isdir = res->type == JO_TYPE_DIR;
	size_t nr = x->dir_stats && isdir ? 4 : 2;
	redisReply *rp[4] = { 0 };
	int rc;

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
	*mg = rp[1];
	rp[1] = NULL;
	st->fresh = nr == 4 && rp[2]->integer == 0 && rp[3]->integer == 0;
	free_replies(rp, nr);
	return 0;
}

/*
 * Whether x->quota's directories to check still have the ctimes read: each
 * watched, then read, so that a restore into or of one of them after this
 * aborts the EXEC. 0 with *same set,
 * or an error (the keys still watched).
 */
static int rs_tree_same(struct jo_meta *m, const struct rs *x, bool *same, struct jo_err *err)
{
	const struct jo_rs_quota *q = x->quota;

	*same = true;
	for (size_t i = 0; q && i < q->ncheck && *same; i++) {
		struct jo_attr t = { 0 };
		struct jo_err e2 = { 0 };
		int rc;
		redisReply *r = jo_rd_cmd(m, err, &rc, "WATCH %Ki%" PRIu64, q->check[i]);

		if (!r)
			return rc;
		freeReplyObject(r);
		if (!(r = jo_rd_cmd(m, err, &rc, "GET %Ki%" PRIu64, q->check[i])))
			return rc;
		*same = r->type == REDIS_REPLY_STRING && r->len >= JO_ATTR_PARENT_OFF &&
			jo_meta_decode_attr((uint8_t *)r->str, r->len, &t, &e2) == 0 &&
			jo_rs_check_same(q, i, jo_rs_ctime_ns(t.ctime, t.ctimensec), t.parent);
		freeReplyObject(r);
	}
	return 0;
}

/* One attempt: 0 with *aborted when a watched key changed. */
static int restore_once(struct jo_meta *m, struct rs *x, bool *aborted, struct jo_err *err)
{
	struct jo_rs_res *res = x->res;
	redisReply *mg = NULL;
	uint8_t *da;
	struct jo_attr d = { 0 }, a = { 0 };
	struct timespec now;
	struct rs_stat st = { 0 };
	bool same = true;
	size_t q;
	int rc;

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
	if ((rc = rs_read_entry(m, x, &st, err)) != 0 || res->status != JO_RS_DONE)
		return rc;
	if ((rc = rs_read_attrs(m, x, &mg, &st, err)) != 0)
		return rc;
	if ((rc = rs_check(x, mg->element, &d, &a, err)) != 0 || res->status != JO_RS_DONE ||
	    (rc = rs_tree_same(m, x, &same, err)) != 0 || !same) {
		if (!rc && !same)
			res->status = JO_RS_CHANGED;
		freeReplyObject(mg);
		unwatch(m);
		return rc;
	}
	x->dst_missing = x->dir_stats && !st.dst;
	clock_gettime(CLOCK_REALTIME, &now);
	da = (uint8_t *)mg->element[1]->str;
	if (res->type == JO_TYPE_DIR)
		jo_put_be32(da + JO_ATTR_NLINK_OFF, d.nlink + 1);
	jo_attr_stamp(da, JO_ATTR_MTIME_OFF, &now);
	jo_attr_stamp(da, JO_ATTR_CTIME_OFF, &now);
	jo_rd_append(m, "MULTI");
	q = rs_queue(m, x, &a, mg->element[2], mg->element[1], &st, &now);
	jo_rd_append(m, "EXEC");
	freeReplyObject(mg);
	return exec_block(m, q, aborted, err);
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
		  const char *name, size_t nlen, bool dir_stats, const struct jo_rs_quota *quota,
		  struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err)
{
	struct rs x = { tdir, parent, src, name, slen, nlen, dir_stats, res, false, quota };
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

/* One batch attempt's state: its entries, their directories, the replies. */
struct rb {
	struct jo_meta *m;
	struct jo_rs_item *v;
	size_t n;
	bool dir_stats;
	struct rb_dir *d;
	size_t nd;
	struct rb_item *it;
	redisReply **rp;    /* the replies held (nr of them) */
	size_t nr;
};

/* Entry i of a batch as one restore sees it. */
static struct rs rb_rs(const struct rb *b, size_t i)
{
	struct jo_rs_item *e = &b->v[i];
	struct rs x = { e->tdir, e->parent, e->src, e->name, e->src_len, e->name_len,
			b->dir_stats, &e->res, false, e->quota };

	return x;
}

/* Free the replies held and UNWATCH when no EXEC follows; returns rc. */
static int rb_out(struct rb *b, int rc, bool one_by_one)
{
	free_replies(b->rp, b->nr);
	b->nr = 0;
	if ((rc && rc != JO_ECONNECT) || (!rc && one_by_one))
		unwatch(b->m); /* no EXEC follows */
	return rc;
}

/*
 * Entry i's first checks on its trash entry (h) and its target name (x):
 * 0 with it[i].cand when it goes on (*one_by_one when the batch cannot
 * take it), 0 with JO_RS_GONE or JO_RS_EXISTS, or an error.
 */
static int rb_check_entry(struct rb *b, size_t i, const redisReply *h, const redisReply *x,
			  bool *one_by_one, struct jo_err *err)
{
	struct jo_rs_item *v = b->v;

	if (h->type == REDIS_REPLY_NIL) {
		v[i].res.status = JO_RS_GONE;
		return 0;
	}
	if (parse_entry(h, &v[i].res.type, &v[i].res.ino) != 0)
		return jo_err_set(err, JO_EPROTO, "trash entry %.*s is malformed: left alone",
				  (int)(v[i].src_len > 80 ? 80 : v[i].src_len), v[i].src);
	if (x->integer) {
		v[i].res.status = JO_RS_EXISTS;
		return 0;
	}
	b->it[i].cand = true;
	for (size_t j = 0; j < b->nd; j++)
		if (b->d[j].ino == v[i].res.ino)
			*one_by_one = true;
	/* a directory twice, or two entries for one name: one by one */
	for (size_t j = 0; j < i; j++)
		if (b->it[j].cand && ((v[j].res.ino == v[i].res.ino &&
				       v[i].res.type == JO_TYPE_DIR) ||
				      (v[j].parent == v[i].parent &&
				       v[j].name_len == v[i].name_len &&
				       !memcmp(v[j].name, v[i].name, v[i].name_len))))
			*one_by_one = true;
	return 0;
}

/*
 * The first pipeline of a batch: WATCH every directory, each entry and its
 * target name, the directories' statistics' presence. 0 with the entries'
 * first checks made (replies freed; unwatched when *one_by_one), or an error.
 */
static int rb_read_entries(struct rb *b, bool *one_by_one, struct jo_err *err)
{
	struct jo_meta *m = b->m;
	struct jo_rs_item *v = b->v;
	struct rb_dir *d = b->d;
	redisReply **rp = b->rp;
	size_t n = b->n, nd = b->nd, ap = 0;
	int rc;

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
	for (size_t i = 0; b->dir_stats && i < nd; i++, ap++)
		if (jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64, d[i].ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	if ((rc = read_replies(m, rp, ap, err)) != 0)
		return rc;
	b->nr = ap;
	for (size_t i = 0; i < b->nr; i++) {
		bool hget = i >= nd && i < nd + 2 * n && (i - nd) % 2 == 0;

		if (rp[i]->type == REDIS_REPLY_ERROR ||
		    (i >= nd && !hget && rp[i]->type != REDIS_REPLY_INTEGER)) {
			rc = jo_rd_fail(m, rp[i], err, i < nd ? "WATCH" : hget ? "HGET trash entry" :
						 "HEXISTS");
			rp[i] = NULL;
			return rb_out(b, rc, *one_by_one);
		}
	}
	for (size_t i = 0; i < n; i++)
		if ((rc = rb_check_entry(b, i, rp[nd + 2 * i], rp[nd + 2 * i + 1], one_by_one,
					 err)) != 0)
			return rb_out(b, rc, *one_by_one);
	for (size_t i = 0; b->dir_stats && i < nd; i++)
		d[i].stat = rp[nd + 2 * n + i]->integer == 1;
	return rb_out(b, 0, *one_by_one);
}

/*
 * The second pipeline: WATCH the candidates' keys, GET every directory's
 * attr and every candidate's, and for a directory when statistics are kept
 * whether it has statistics or entries. 0 with the replies held (b->nr) and
 * borrowed by d[].attr and it[].attr, or an error (replies freed).
 */
static int rb_read_attrs(struct rb *b, struct jo_err *err)
{
	struct jo_meta *m = b->m;
	struct jo_rs_item *v = b->v;
	struct rb_item *it = b->it;
	redisReply **rp = b->rp;
	size_t n = b->n, ap = 0, at = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (!it[i].cand)
			continue;
		if ((v[i].res.type == JO_TYPE_DIR ?
		     jo_rd_append(m, "WATCH %Ki%" PRIu64 " %Kd%" PRIu64, v[i].res.ino, v[i].res.ino) :
		     jo_rd_append(m, "WATCH %Ki%" PRIu64, v[i].res.ino)) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
		ap++;
	}
	for (size_t i = 0; i < b->nd; i++, ap++)
		if (jo_rd_append(m, "GET %Ki%" PRIu64, b->d[i].ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
	for (size_t i = 0; i < n; i++) {
		if (!it[i].cand)
			continue;
		if (jo_rd_append(m, "GET %Ki%" PRIu64, v[i].res.ino) != REDIS_OK)
			return jo_rd_append_failed(m, ap, err, "restore reads");
		ap++;
		if (b->dir_stats && v[i].res.type == JO_TYPE_DIR) {
			if (jo_rd_append(m, "HEXISTS %KdirUsedSpace %" PRIu64, v[i].res.ino) != REDIS_OK)
				return jo_rd_append_failed(m, ap, err, "restore reads");
			ap++;
			if (jo_rd_append(m, "HLEN %Kd%" PRIu64, v[i].res.ino) != REDIS_OK)
				return jo_rd_append_failed(m, ap, err, "restore reads");
			ap++;
		}
	}
	if ((rc = read_replies(m, rp, ap, err)) != 0)
		return rc;
	b->nr = ap;
	for (size_t i = 0; i < b->nr; i++)
		if (rp[i]->type == REDIS_REPLY_ERROR) {
			rc = jo_rd_fail(m, rp[i], err, "restore reads");
			rp[i] = NULL;
			return rb_out(b, rc, false);
		}
	for (size_t i = 0; i < n; i++)
		at += it[i].cand;
	for (size_t i = 0; i < b->nd; i++, at++)
		b->d[i].attr = rp[at];
	for (size_t i = 0; i < n; i++) {
		if (!it[i].cand)
			continue;
		it[i].attr = rp[at++];
		if (b->dir_stats && v[i].res.type == JO_TYPE_DIR) {
			redisReply *h = rp[at++], *l = rp[at++];

			if (h->type != REDIS_REPLY_INTEGER || l->type != REDIS_REPLY_INTEGER) {
				rc = jo_err_set(err, JO_EPROTO, "redis %s: directory statistics: "
						"unexpected reply", m->url.redacted);
				return rb_out(b, rc, false);
			}
			it[i].fresh = h->integer == 0 && l->integer == 0;
		}
	}
	return 0;
}

/*
 * The MULTI block of a batch: each entry that passed its checks
 * (it[].cand), then each parent's attr once (nlink, times). Returns how
 * many commands were queued.
 */
static size_t rb_queue(struct rb *b, const struct timespec *now)
{
	struct rb_dir *d = b->d;
	struct rb_item *it = b->it;
	struct jo_err e2 = { 0 };
	size_t q = 0;

	jo_rd_append(b->m, "MULTI");
	for (size_t i = 0; i < b->n; i++) {
		struct rs x = rb_rs(b, i);
		struct rs_stat st = { b->dir_stats && d[it[i].tdir].stat,
				      b->dir_stats && d[it[i].parent].stat,
				      b->dir_stats && it[i].fresh };

		if (!it[i].cand)
			continue;
		q += rs_queue(b->m, &x, &it[i].a, it[i].attr, NULL, &st, now);
		d[it[i].parent].dirs += b->v[i].res.type == JO_TYPE_DIR;
		d[it[i].parent].written = true;
	}
	for (size_t i = 0; i < b->nd; i++) {
		struct jo_attr pa = { 0 };
		uint8_t *da;

		if (!d[i].written)
			continue;
		da = (uint8_t *)d[i].attr->str;
		(void)jo_meta_decode_attr(da, d[i].attr->len, &pa, &e2);
		if (d[i].dirs)
			jo_put_be32(da + JO_ATTR_NLINK_OFF, pa.nlink + (uint32_t)d[i].dirs);
		jo_attr_stamp(da, JO_ATTR_MTIME_OFF, now);
		jo_attr_stamp(da, JO_ATTR_CTIME_OFF, now);
		jo_rd_append(b->m, "SET %Ki%" PRIu64 " %b", d[i].ino, da, d[i].attr->len), q++;
	}
	jo_rd_append(b->m, "EXEC");
	return q;
}

static int restore_batch_once(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			      struct rb_dir *d, struct rb_item *it, redisReply **rp, bool *aborted,
			      bool *one_by_one, struct jo_err *err)
{
	struct rb b = { m, v, n, dir_stats, d, 0, it, rp, 0 };
	size_t ndone = 0;
	struct timespec now;
	int rc;

	*aborted = *one_by_one = false;
	for (size_t i = 0; i < n; i++) {
		memset(&v[i].res, 0, sizeof(v[i].res));
		memset(&it[i], 0, sizeof(it[i]));
		it[i].parent = rb_dir_of(d, &b.nd, v[i].parent);
		d[it[i].parent].parent = true;
		it[i].tdir = rb_dir_of(d, &b.nd, v[i].tdir);
	}
	if ((rc = rb_read_entries(&b, one_by_one, err)) != 0 || *one_by_one)
		return rc;
	/* the entries' keys watched, then every attr and the new directories' statistics */
	if ((rc = rb_read_attrs(&b, err)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		struct rs x = rb_rs(&b, i);
		redisReply *at[3];
		struct jo_attr pa = { 0 };

		if (!it[i].cand)
			continue;
		it[i].cand = false;
		at[0] = d[it[i].tdir].attr;
		at[1] = d[it[i].parent].attr;
		at[2] = it[i].attr;
		if ((rc = rs_check(&x, at, &pa, &it[i].a, err)) != 0)
			return rb_out(&b, rc, false);
		if (v[i].res.status != JO_RS_DONE)
			continue;
		it[i].cand = true; /* goes back */
		ndone++;
	}
	if (!ndone) {
		unwatch(m);
		goto ran;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	if ((rc = exec_block(m, rb_queue(&b, &now), aborted, err)) != 0 || *aborted)
		return rb_out(&b, rc, false);
ran:
	for (size_t i = 0; i < n; i++) {
		v[i].ran = true;
		v[i].dst_stat_missing = v[i].res.status == JO_RS_DONE && dir_stats &&
					!d[it[i].parent].stat;
	}
	return rb_out(&b, 0, false);
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
	/* an entry whose quota charge must find directories unchanged: one by one */
	for (size_t i = 0; i < n && !one_by_one; i++)
		one_by_one = v[i].quota && v[i].quota->ncheck;
	for (attempt = 0; attempt < TXN_RETRIES && !one_by_one; attempt++) {
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
					   v[i].name_len, dir_stats, v[i].quota, &v[i].res,
					   &v[i].dst_stat_missing, err);
			v[i].ran = rc == 0;
		}
	}
out:
	free(d);
	free(it);
	free(rp);
	return rc;
}
