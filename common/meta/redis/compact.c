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
#include "common/meta/redis/internal.h"

#define TXN_RETRIES 50   /* as JuiceFS retries its optimistic transactions */

static int rd_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				  struct jo_err *err)
{
	redisReply *r = jo_rd_command(m, "INCRBY %Knextchunk %u", n);

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
static void cleanup_zero_ref(struct jo_meta *m, const char *field)
{
	for (int i = 0; i < TXN_RETRIES; i++) {
		redisReply *r = jo_rd_command(m, "WATCH %KsliceRef");
		redisReply *v, *x;

		/* never without the WATCH: a later connection would run it blind */
		if (!r || r->type == REDIS_REPLY_ERROR) {
			freeReplyObject(r);
			return;
		}
		freeReplyObject(r);
		v = jo_rd_command(m, "HGET %KsliceRef %s", field);
		if (!v || v->type == REDIS_REPLY_ERROR ||
		    (v->type == REDIS_REPLY_STRING && strcmp(v->str, "0"))) {
			freeReplyObject(v);
			if (v)
				freeReplyObject(jo_rd_command(m, "UNWATCH"));
			return;
		}
		freeReplyObject(v);
		/* MULTI, HDEL, EXEC in one pipeline: none of them can move to a new connection */
		jo_rd_append(m, "MULTI");
		jo_rd_append(m, "HDEL %KsliceRef %s", field);
		jo_rd_append(m, "EXEC");
		x = NULL;
		for (int k = 0; k < 3; k++) {
			redisReply *q = NULL;

			if (jo_rd_get_reply(m, &q) != REDIS_OK)
				break;
			if (k == 2)
				x = q;
			else
				freeReplyObject(q);
		}
		if (x && x->type == REDIS_REPLY_ARRAY) {
			freeReplyObject(x);
			return;
		}
		freeReplyObject(x);
		if (!x)
			return;
	}
}

/* Is the new slice's sliceRef field (its "0" marker, or what became of it)
 * on the server we reach now? 1 yes, 0 no, -1 unknown. */
static int new_marker(struct jo_meta *m, const char *field)
{
	redisReply *r = jo_rd_command(m, "HEXISTS %KsliceRef %s", field);
	int yes = r && r->type == REDIS_REPLY_INTEGER ? r->integer == 1 : -1;

	freeReplyObject(r);
	return yes;
}

/* One compaction commit's transaction: the chunk's key, the records it writes. */
struct rd_txn {
	const struct jo_compact_commit *c;
	char key[64], field[64], dfield[64];
	uint8_t newrec[24];
	uint8_t *delayed;       /* with trash days: the delSlices records of the old slices */
	size_t ndelayed;
};

/* The delSlices value of the old slices (id, size big-endian each): 0 or JO_ENOMEM. */
static int txn_delayed(struct rd_txn *t)
{
	const struct jo_compact_commit *c = t->c;

	t->delayed = malloc((c->norigin - c->skipped) * JO_DELSLICE_REC_LEN + 1);
	if (!t->delayed)
		return JO_ENOMEM;
	for (size_t i = c->skipped; i < c->norigin; i++) {
		struct jo_slice s;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id)
			continue;
		for (int b = 0; b < 8; b++)
			t->delayed[t->ndelayed * 12 + b] = (uint8_t)(s.id >> (56 - 8 * b));
		for (int b = 0; b < 4; b++)
			t->delayed[t->ndelayed * 12 + 8 + b] = (uint8_t)(s.size >> (24 - 8 * b));
		t->ndelayed++;
	}
	return 0;
}

enum { TXN_APPLIED, TXN_RETRY, TXN_LOST, TXN_FAILED };

/* WATCH the chunk and compare it with what was compacted: TXN_APPLIED when the same,
 * TXN_FAILED (*code) when it changed, TXN_LOST (*code) when a reply was lost. */
static int txn_watch(struct jo_meta *m, struct rd_txn *t, int *code, struct jo_err *err)
{
	const struct jo_compact_commit *c = t->c;
	redisReply *r = jo_rd_command(m, "WATCH %K%s", t->key);
	bool same = true;

	if (!r || r->type == REDIS_REPLY_ERROR) {
		*code = jo_rd_fail(m, r, err, "WATCH");
		return TXN_LOST;
	}
	freeReplyObject(r);
	r = jo_rd_command(m, "LRANGE %K%s 0 %lld", t->key, (long long)c->norigin - 1);
	if (!r || r->type != REDIS_REPLY_ARRAY) {
		*code = jo_rd_fail(m, r, err, "LRANGE");
		return TXN_LOST;
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
		freeReplyObject(jo_rd_command(m, "UNWATCH"));
		*code = jo_err_set(err, JO_ECONFLICT, "chunk %s changed during compaction", t->key);
		return TXN_FAILED;
	}
	return TXN_APPLIED;
}

/* Queue the transaction (MULTI .. EXEC): the number of commands between the two. */
static size_t txn_queue(struct jo_meta *m, const struct rd_txn *t)
{
	const struct jo_compact_commit *c = t->c;
	size_t queued = 3 + c->skipped + 1;

	jo_rd_append(m, "MULTI");
	jo_rd_append(m, "LTRIM %K%s %lld -1", t->key, (long long)c->norigin);
	jo_rd_append(m, "LPUSH %K%s %b", t->key, t->newrec, (size_t)24);
	for (size_t i = c->skipped; i > 0; i--)
		jo_rd_append(m, "LPUSH %K%s %b", t->key, c->origin + (i - 1) * 24, (size_t)24);
	jo_rd_append(m, "HSET %KsliceRef %s 0", t->field);
	if (c->trash_days > 0) {
		if (t->ndelayed)
			jo_rd_append(m, "HSET %KdelSlices %s %b", t->dfield, t->delayed,
				     t->ndelayed * JO_DELSLICE_REC_LEN);
		queued += t->ndelayed ? 1 : 0;
	} else {
		for (size_t i = c->skipped; i < c->norigin; i++) {
			struct jo_slice s;
			char f[64];

			jo_slice_decode(c->origin + i * 24, &s);
			if (!s.id)
				continue;
			field_of(f, sizeof(f), s.id, s.size);
			jo_rd_append(m, "HINCRBY %KsliceRef %s -1", f);
		}
		for (size_t i = c->skipped; i < c->norigin; i++)
			queued += jo_be64(c->origin + i * 24 + 4) ? 1 : 0;
	}
	jo_rd_append(m, "EXEC");
	return queued;
}

/* The replies of MULTI, the queued commands and EXEC (in *x): TXN_APPLIED, TXN_RETRY (a
 * watched key changed), TXN_FAILED (*code: a command refused) or TXN_LOST (*code). */
static int txn_replies(struct jo_meta *m, size_t queued, redisReply **x, int *code,
		       struct jo_err *err)
{
	bool queue_failed = false;

	/* MULTI + queued commands (LTRIM..HINCRBY): read every reply, so the
	 * connection stays in step even when one was refused */
	for (size_t i = 0; i < queued; i++) {
		redisReply *q = NULL;

		if (jo_rd_get_reply(m, &q) != REDIS_OK) {
			*code = jo_rd_fail(m, NULL, err, "MULTI");
			return TXN_LOST;
		}
		if (q->type == REDIS_REPLY_ERROR && !queue_failed) {
			queue_failed = true;
			jo_err_set(err, JO_EIO, "redis %s: queue transaction: %.200s",
				   m->url.redacted, q->str);
		}
		freeReplyObject(q);
	}
	if (jo_rd_get_reply(m, x) != REDIS_OK) {
		*code = jo_rd_fail(m, NULL, err, "EXEC");
		return TXN_LOST;
	}
	if (queue_failed) {
		/* EXEC answers EXECABORT: nothing was applied */
		freeReplyObject(*x);
		*x = NULL;
		*code = JO_EIO;
		return TXN_FAILED;
	}
	if ((*x)->type == REDIS_REPLY_NIL) {
		/* a watched key changed (an append): look again */
		freeReplyObject(*x);
		*x = NULL;
		return TXN_RETRY;
	}
	if ((*x)->type != REDIS_REPLY_ARRAY) {
		*code = jo_rd_fail(m, *x, err, "EXEC");
		*x = NULL;
		return TXN_LOST;
	}
	return TXN_APPLIED;
}

/* The old slices the commit left without a reference (HINCRBY results below 0). */
static int txn_freed(const struct jo_compact_commit *c, const redisReply *x,
		     struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	/* HINCRBY results are the last replies; < 0 means no reference is left */
	size_t at = 2 + c->skipped + 1;

	for (size_t i = c->skipped; i < c->norigin && at < x->elements; i++) {
		struct jo_slice s;
		redisReply *e;

		jo_slice_decode(c->origin + i * 24, &s);
		if (!s.id)
			continue;
		e = x->element[at++];
		if (e->type == REDIS_REPLY_INTEGER && e->integer < 0 &&
		    jo_slice_id_add(freed, nfreed, s.id, s.size))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

static int rd_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				 struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	struct rd_txn t = { .c = c };
	struct jo_slice ns = { .pos = c->pos, .id = c->new_id, .size = c->size, .off = 0,
			       .len = c->size };
	redisReply *x = NULL;
	int code = 0, st = TXN_RETRY;

	*freed = NULL;
	*nfreed = 0;
	snprintf(t.key, sizeof(t.key), "c%" PRIu64 "_%" PRIu32, c->ino, c->indx);
	field_of(t.field, sizeof(t.field), c->new_id, c->size);
	snprintf(t.dfield, sizeof(t.dfield), "%" PRIu64 "_%" PRId64, c->new_id, c->now);
	jo_slice_encode(&ns, t.newrec);
	if (c->trash_days > 0 && txn_delayed(&t))
		return jo_err_set(err, JO_ENOMEM, "out of memory");

	for (int attempt = 0; attempt < TXN_RETRIES && st == TXN_RETRY; attempt++) {
		st = txn_watch(m, &t, &code, err);
		if (st == TXN_APPLIED)
			st = txn_replies(m, txn_queue(m, &t), &x, &code, err);
	}
	free(t.delayed);
	if (st == TXN_FAILED)
		return code;
	if (st == TXN_LOST) {
		/*
		 * The reply was lost or the connection broke: the existence of the new
		 * slice's marker decides whether the commit happened. Without the
		 * HINCRBY replies we free nothing: those slices stay pending for gc.
		 */
		/* asked of the server we reach now (after a failover, the new master:
		 * what it holds is what counts) */
		if (new_marker(m, t.field) == 1)
			return 0;
		return code;
	}
	if (!x)
		return jo_err_set(err, JO_ECONFLICT, "chunk %s kept changing", t.key);
	if (c->trash_days <= 0 && (code = txn_freed(c, x, freed, nfreed, err)) != 0) {
		freeReplyObject(x);
		return code;
	}
	freeReplyObject(x);
	/* the old slices' blocks go next: not before the commit is known durable */
	if (c->trash_days <= 0 && *nfreed && (code = jo_rd_confirm(m, err)) != 0) {
		free(*freed);
		*freed = NULL;
		*nfreed = 0;
		/* the master changed: the new one decides whether the commit
		 * survived (its marker is there); either way nothing is freed here,
		 * the old slices stay for gc to find once nothing references them */
		if (jo_rd_moved(m) && new_marker(m, t.field) == 1)
			return 0;
		return code;
	}
	cleanup_zero_ref(m, t.field);
	return 0;
}

static int rd_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				struct jo_err *err)
{
	char field[64];
	redisReply *r;

	field_of(field, sizeof(field), id, size);
	r = jo_rd_command(m, "HINCRBY %KsliceRef %s -1", field);
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
