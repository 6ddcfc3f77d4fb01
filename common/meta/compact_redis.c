/* Compaction bookkeeping on Redis (spec §6.4, §3.7, §3.11). */
#include "common/meta/meta_compact.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta_internal.h"
#include "common/meta/meta_mut.h"
#include "common/meta/redis_internal.h"

#define TXN_RETRIES 50   /* as JuiceFS retries its optimistic transactions */

static int rd_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				  struct jo_err *err)
{
	redisContext *c = jo_rd_conn(m);
	redisReply *r = redisCommand(c, "INCRBY nextchunk %u", n);

	if (!r || r->type != REDIS_REPLY_INTEGER)
		return jo_rd_fail(m, r, err, "INCRBY nextchunk");
	/* Redis holds the last id handed out */
	*first = (uint64_t)r->integer - n + 1;
	freeReplyObject(r);
	return 0;
}

static void field_of(char *buf, size_t cap, uint64_t id, uint32_t size)
{
	snprintf(buf, cap, "k%" PRIu64 "_%" PRIu32, id, size);
}

/* HDEL the "0" marker of a fresh slice if it is still 0 (JuiceFS cleanupZeroRef). */
static void cleanup_zero_ref(redisContext *c, const char *field)
{
	for (int i = 0; i < TXN_RETRIES; i++) {
		redisReply *r = redisCommand(c, "WATCH sliceRef");
		redisReply *v, *x;

		freeReplyObject(r);
		v = redisCommand(c, "HGET sliceRef %s", field);
		if (!v || (v->type == REDIS_REPLY_STRING && strcmp(v->str, "0"))) {
			freeReplyObject(v);
			freeReplyObject(redisCommand(c, "UNWATCH"));
			return;
		}
		freeReplyObject(v);
		freeReplyObject(redisCommand(c, "MULTI"));
		freeReplyObject(redisCommand(c, "HDEL sliceRef %s", field));
		x = redisCommand(c, "EXEC");
		if (x && x->type == REDIS_REPLY_ARRAY) {
			freeReplyObject(x);
			return;
		}
		freeReplyObject(x);
		if (!x)
			return;
	}
}

static int rd_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				 struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	redisContext *rc = jo_rd_conn(m);
	char key[64], field[64], dfield[64];
	uint8_t newrec[24], *delayed = NULL;
	size_t ndelayed = 0;
	struct jo_slice ns = { .pos = c->pos, .id = c->new_id, .size = c->size, .off = 0,
			       .len = c->size };
	redisReply *x = NULL;
	int code = 0;

	*freed = NULL;
	*nfreed = 0;
	snprintf(key, sizeof(key), "c%" PRIu64 "_%" PRIu32, c->ino, c->indx);
	field_of(field, sizeof(field), c->new_id, c->size);
	snprintf(dfield, sizeof(dfield), "%" PRIu64 "_%" PRId64, c->new_id, c->now);
	jo_slice_encode(&ns, newrec);
	if (c->trash_days > 0) {
		delayed = malloc((c->norigin - c->skipped) * JO_DELSLICE_REC_LEN + 1);
		if (!delayed)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		for (size_t i = c->skipped; i < c->norigin; i++) {
			struct jo_slice s;

			jo_slice_decode(c->origin + i * 24, &s);
			if (!s.id)
				continue;
			for (int b = 0; b < 8; b++)
				delayed[ndelayed * 12 + b] = (uint8_t)(s.id >> (56 - 8 * b));
			for (int b = 0; b < 4; b++)
				delayed[ndelayed * 12 + 8 + b] = (uint8_t)(s.size >> (24 - 8 * b));
			ndelayed++;
		}
	}

	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		redisReply *r = redisCommand(rc, "WATCH %s", key);
		bool same = true;

		if (!r || r->type == REDIS_REPLY_ERROR) {
			code = jo_rd_fail(m, r, err, "WATCH");
			goto lost;
		}
		freeReplyObject(r);
		r = redisCommand(rc, "LRANGE %s 0 %lld", key, (long long)c->norigin - 1);
		if (!r || r->type != REDIS_REPLY_ARRAY) {
			code = jo_rd_fail(m, r, err, "LRANGE");
			goto lost;
		}
		if (r->elements != c->norigin)
			same = false;
		for (size_t i = 0; same && i < r->elements; i++) {
			redisReply *e = r->element[i];

			if (e->type != REDIS_REPLY_STRING || e->len != 24 ||
			    memcmp(e->str, c->origin + i * 24, 24))
				same = false;
		}
		freeReplyObject(r);
		if (!same) {
			freeReplyObject(redisCommand(rc, "UNWATCH"));
			free(delayed);
			return jo_err_set(err, JO_ECONFLICT, "chunk %s changed during compaction", key);
		}
		/* queue the transaction; replies of queued commands are +QUEUED */
		redisAppendCommand(rc, "MULTI");
		redisAppendCommand(rc, "LTRIM %s %lld -1", key, (long long)c->norigin);
		redisAppendCommand(rc, "LPUSH %s %b", key, newrec, (size_t)24);
		for (size_t i = c->skipped; i > 0; i--)
			redisAppendCommand(rc, "LPUSH %s %b", key, c->origin + (i - 1) * 24, (size_t)24);
		redisAppendCommand(rc, "HSET sliceRef %s 0", field);
		if (c->trash_days > 0) {
			if (ndelayed)
				redisAppendCommand(rc, "HSET delSlices %s %b", dfield, delayed,
						   ndelayed * JO_DELSLICE_REC_LEN);
		} else {
			for (size_t i = c->skipped; i < c->norigin; i++) {
				struct jo_slice s;
				char f[64];

				jo_slice_decode(c->origin + i * 24, &s);
				if (!s.id)
					continue;
				field_of(f, sizeof(f), s.id, s.size);
				redisAppendCommand(rc, "HINCRBY sliceRef %s -1", f);
			}
		}
		redisAppendCommand(rc, "EXEC");
		{
			size_t queued = 3 + c->skipped + 1;

			if (c->trash_days > 0)
				queued += ndelayed ? 1 : 0;
			else
				for (size_t i = c->skipped; i < c->norigin; i++)
					queued += jo_be64(c->origin + i * 24 + 4) ? 1 : 0;
			bool queue_failed = false;

			/* MULTI + queued commands (LTRIM..HINCRBY): read every reply, so the
			 * connection stays in step even when one was refused */
			for (size_t i = 0; i < queued; i++) {
				redisReply *q = NULL;

				if (redisGetReply(rc, (void **)&q) != REDIS_OK) {
					code = jo_rd_fail(m, NULL, err, "MULTI");
					goto lost;
				}
				if (q->type == REDIS_REPLY_ERROR && !queue_failed) {
					queue_failed = true;
					jo_err_set(err, JO_EIO, "redis %s: queue transaction: %.200s",
						   m->url.redacted, q->str);
				}
				freeReplyObject(q);
			}
			if (redisGetReply(rc, (void **)&x) != REDIS_OK) {
				code = jo_rd_fail(m, NULL, err, "EXEC");
				goto lost;
			}
			if (queue_failed) {
				/* EXEC answers EXECABORT: nothing was applied */
				freeReplyObject(x);
				free(delayed);
				return JO_EIO;
			}
		}
		if (x->type == REDIS_REPLY_NIL) {
			/* a watched key changed (an append): look again */
			freeReplyObject(x);
			x = NULL;
			continue;
		}
		if (x->type != REDIS_REPLY_ARRAY) {
			code = jo_rd_fail(m, x, err, "EXEC");
			x = NULL;
			goto lost;
		}
		break;
	}
	free(delayed);
	delayed = NULL;
	if (!x)
		return jo_err_set(err, JO_ECONFLICT, "chunk %s kept changing", key);
	/* HINCRBY results are the last replies; < 0 means no reference is left */
	if (c->trash_days <= 0) {
		size_t at = 2 + c->skipped + 1;

		for (size_t i = c->skipped; i < c->norigin && at < x->elements; i++) {
			struct jo_slice s;
			redisReply *e;

			jo_slice_decode(c->origin + i * 24, &s);
			if (!s.id)
				continue;
			e = x->element[at++];
			if (e->type == REDIS_REPLY_INTEGER && e->integer < 0 &&
			    jo_slice_id_add(freed, nfreed, s.id, s.size)) {
				freeReplyObject(x);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
		}
	}
	freeReplyObject(x);
	cleanup_zero_ref(rc, field);
	return 0;

lost:
	free(delayed);
	/*
	 * The reply was lost or the connection broke: the existence of the new
	 * slice's marker decides whether the commit happened. Without the
	 * HINCRBY replies we free nothing: those slices stay pending for gc.
	 */
	if (rc->err)
		return code;
	{
		redisReply *r = redisCommand(rc, "HEXISTS sliceRef %s", field);

		if (r && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
			freeReplyObject(r);
			return 0;
		}
		freeReplyObject(r);
	}
	return code;
}

static int rd_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				struct jo_err *err)
{
	redisContext *c = jo_rd_conn(m);
	char field[64];
	redisReply *r;

	field_of(field, sizeof(field), id, size);
	r = redisCommand(c, "HINCRBY sliceRef %s -1", field);
	if (!r || r->type != REDIS_REPLY_INTEGER)
		return jo_rd_fail(m, r, err, "HINCRBY sliceRef");
	freeReplyObject(r);
	return 0;
}

/* Redis forgets one slice per HDEL; there is no fsync to share. */
static int rd_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			    struct jo_err *err)
{
	for (size_t i = 0; i < n; i++) {
		int rc = jo_mut_forget_slice(m, v[i].id, v[i].size, err);

		if (rc)
			return rc;
	}
	return 0;
}

const struct jo_compact_ops jo_rd_compact_ops = {
	.alloc_slice_ids = rd_alloc_slice_ids,
	.commit = rd_compact_commit,
	.slice_abandon = rd_slice_abandon,
	.forget_slices = rd_forget_slices,
};
