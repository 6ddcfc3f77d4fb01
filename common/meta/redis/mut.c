/*
 * redis/mut.c: the Redis side of meta_mut.h. Transactions copy JuiceFS's own
 * (pkg/meta/redis.go): WATCH the same key, read, MULTI/EXEC, retried up to 50
 * times when EXEC is aborted by a concurrent write. Task records and leases
 * are in redis/task.c; this file's table names them for the family.
 */
#include "common/meta/meta_mut.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/opt.h"
#include "common/meta/redis/internal.h"
#include "common/meta/meta_internal.h"
#include "common/meta/meta_compact.h"

#define TXN_RETRIES 50

int jo_rd_cmd_ok(struct jo_meta *m, struct jo_err *err, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = jo_rd_vcommand(m, fmt, ap);
	va_end(ap);
	if (!r)
		return jo_rd_conn_error(m, err, fmt);
	if (r->type == REDIS_REPLY_ERROR) {
		int rc = jo_err_set(err, JO_EIO, "redis %s: %s: %.200s", m->url.redacted, fmt, r->str);
		freeReplyObject(r);
		return rc;
	}
	freeReplyObject(r);
	return 0;
}

/*
 * The [cursor, [elements]] reply of a SCAN, HSCAN or ZSCAN (cursor: 32
 * bytes): the next cursor copied out and the elements returned; NULL with
 * the reply freed and err set when it has another shape.
 */
redisReply *jo_rd_scan_page(struct jo_meta *m, redisReply *r, const char *cmd, char *cursor,
			    struct jo_err *err)
{
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
	    r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= 32 ||
	    r->element[1]->type != REDIS_REPLY_ARRAY) {
		freeReplyObject(r);
		jo_err_set(err, JO_EPROTO, "redis %s: unexpected %s reply", m->url.redacted, cmd);
		return NULL;
	}
	memcpy(cursor, r->element[0]->str, r->element[0]->len);
	cursor[r->element[0]->len] = '\0';
	return r->element[1];
}

/* Read one pipelined reply into *out (error replies returned as such). */
static int get_reply(struct jo_meta *m, redisReply **out, struct jo_err *err)
{
	redisReply *r = NULL;

	if (jo_rd_get_reply(m, &r) != REDIS_OK || !r) {
		*out = NULL;
		return jo_rd_conn_error(m, err, "pipelined reply");
	}
	*out = r;
	return 0;
}

int jo_rd_reply_i64(const redisReply *r, int64_t *out)
{
	char tmp[32], *end;
	long long v;

	if (r->type == REDIS_REPLY_INTEGER) {
		*out = r->integer;
		return 0;
	}
	if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len >= sizeof(tmp))
		return -1;
	memcpy(tmp, r->str, r->len);
	tmp[r->len] = '\0';
	v = strtoll(tmp, &end, 10);
	if (*end)
		return -1;
	*out = v;
	return 0;
}

/*
 * A transaction that failed on a lost connection before its EXEC could have
 * run (jo_rd_retryable) is run again from its WATCH, which reconnects (to a
 * new master after a failover); a few times at most. An EXEC whose reply was
 * lost is never retried here: its outcome is unknown, so the caller reports
 * the item as failed and acts on nothing (the next gc plan finds what is
 * left, e.g. negative sliceRef counts of a chunk that did go).
 */
static bool retry_lost(struct jo_meta *m, int rc, int *lost)
{
	return jo_rd_retryable(m, rc) && ++*lost <= 3;
}

/*
 * Run MULTI, the queued commands (already appended: nq of them), EXEC, and
 * read the replies. *exec gets the EXEC reply (NULL reply type NIL = aborted).
 */
int jo_rd_exec(struct jo_meta *m, size_t nq, redisReply **exec, struct jo_err *err)
{
	redisReply *r;
	int rc = 0;

	*exec = NULL;
	/* MULTI reply, nq QUEUED replies */
	for (size_t i = 0; i < nq + 1; i++) {
		if (get_reply(m, &r, err) != 0)
			return err->code;
		if (r->type == REDIS_REPLY_ERROR && rc == 0)
			/* MOVED/READONLY...: nothing ran (EXEC aborts); a new master may take it */
			rc = jo_err_set(err, jo_rd_redirected(r) ? JO_ECONNECT : JO_EIO,
					"redis %s: queueing a transaction: %.200s", m->url.redacted,
					r->str);
		freeReplyObject(r);
	}
	if (get_reply(m, &r, err) != 0)
		return err->code;
	if (r->type == REDIS_REPLY_ERROR) {
		if (rc == 0)
			rc = jo_err_set(err, jo_rd_redirected(r) ? JO_ECONNECT : JO_EIO,
					"redis %s: EXEC: %.200s", m->url.redacted, r->str);
		freeReplyObject(r);
		return rc;
	}
	if (rc) {
		freeReplyObject(r);
		return rc;
	}
	if (r->type != REDIS_REPLY_NIL && (rc = jo_rd_confirm(m, err)) != 0) {
		freeReplyObject(r);
		return rc;
	}
	*exec = r;
	return 0;
}

/*
 * The EXEC reply of a block whose replies first .. first+nrec-1 are the
 * HINCRBY sliceRef of recs: 1 when it was aborted (a watched key changed:
 * retry), 0 when done (slices whose count went negative appended to
 * *freed), or an error code. exec is freed.
 */
static int exec_freed(struct jo_meta *m, redisReply *exec, size_t nreplies, size_t first,
		      const struct jo_sref *recs, size_t nrec, struct jo_sref **freed,
		      size_t *nfreed, size_t *fcap, struct jo_err *err)
{
	int rc = 0;

	if (exec->type == REDIS_REPLY_NIL) {
		freeReplyObject(exec);
		return 1;
	}
	if (exec->type != REDIS_REPLY_ARRAY || exec->elements != nreplies) {
		freeReplyObject(exec);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected EXEC reply", m->url.redacted);
	}
	for (size_t i = 0; i < nrec && rc == 0; i++) {
		int64_t v;

		if (jo_rd_reply_i64(exec->element[first + i], &v) == 0 && v < 0 &&
		    jo_sref_push(freed, nfreed, fcap, recs[i].id, recs[i].size))
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	freeReplyObject(exec);
	return rc;
}

/* Abandon an attempt after its WATCH: free the reply it read and UNWATCH
 * (best effort: no EXEC follows). */
static void give_up(struct jo_meta *m, redisReply *r, struct jo_err *err)
{
	freeReplyObject(r);
	(void)jo_rd_cmd_ok(m, err, "UNWATCH");
}

/* Queue HINCRBY sliceRef -1 of each record, inside the caller's MULTI. */
static void queue_decrs(struct jo_meta *m, const struct jo_sref *recs, size_t nrec)
{
	for (size_t i = 0; i < nrec; i++)
		jo_rd_append(m, "HINCRBY %KsliceRef k%llu_%u -1", (unsigned long long)recs[i].id,
			     recs[i].size);
}

/*
 * EXEC the queued block: the nrec decrements of queue_decrs (replies from
 * first) and one other command. 1 to try again (a watched key changed, or
 * the connection went before anything ran), 0 with the records no longer
 * referenced pushed to freed, or an error.
 */
static int exec_decrs(struct jo_meta *m, size_t first, const struct jo_sref *recs, size_t nrec,
		      struct jo_sref **freed, size_t *nfreed, size_t *fcap, int *lost,
		      struct jo_err *err)
{
	redisReply *exec;
	int rc = jo_rd_exec(m, nrec + 1, &exec, err);

	if (rc != 0)
		return retry_lost(m, rc, lost) ? 1 : rc;
	return exec_freed(m, exec, nrec + 1, first, recs, nrec, freed, nfreed, fcap, err);
}

/* ---- deleteChunk (redis.go deleteChunk) */

static int r_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			  size_t *nfreed, struct jo_err *err)
{
	char key[64];
	struct jo_sref *recs = NULL;
	size_t nrec = 0, cap = 0, fcap = 0;
	int rc = 0, lost = 0;

	*freed = NULL;
	*nfreed = 0;
	snprintf(key, sizeof(key), "c%llu_%u", (unsigned long long)ino, indx);
	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		redisReply *r;

		nrec = 0;
		if ((rc = jo_rd_cmd_ok(m, err, "WATCH %K%s", key)) != 0)
			goto lost;
		r = jo_rd_cmd(m, err, &rc, "LRANGE %K%s 0 -1", key);
		if (!r)
			goto lost;
		if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
			give_up(m, r, err);
			rc = 0;
			goto out;
		}
		for (size_t i = 0; i < r->elements; i++) {
			const redisReply *e = r->element[i];

			if (e->type != REDIS_REPLY_STRING || e->len != JO_SLICE_REC_LEN) {
				give_up(m, r, err);
				rc = jo_err_set(err, JO_EPROTO, "chunk %s: element %zu is not a "
						"24-byte slice record: left alone", key, i);
				goto out;
			}
			const uint8_t *p = (const uint8_t *)e->str;
			uint64_t id = jo_be64(p + 4);

			if (id > 0 && jo_sref_push(&recs, &nrec, &cap, id, jo_be32(p + 12))) {
				give_up(m, r, err);
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
		}
		freeReplyObject(r);
		jo_rd_append(m, "MULTI");
		jo_rd_append(m, "DEL %K%s", key);
		queue_decrs(m, recs, nrec);
		jo_rd_append(m, "EXEC");
		rc = exec_decrs(m, 1, recs, nrec, freed, nfreed, &fcap, &lost, err);
		if (rc == 1)
			continue; /* the chunk changed under us: retry like JuiceFS */
		goto out;
lost:
		/* the connection went before anything ran: again, on the new one */
		if (retry_lost(m, rc, &lost))
			continue;
		goto out;
	}
	rc = jo_err_set(err, JO_EIO, "delete chunk %s: still changing after %d attempts, retry later",
			key, TXN_RETRIES);
out:
	return jo_sref_finish(rc, recs, freed, nfreed);
}

static int file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
		       size_t *n, struct jo_err *err);

/* A read-only pipeline: run again when the connection went (a failover). */
static int r_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
			 size_t *n, struct jo_err *err)
{
	int rc, lost = 0;

	do
		rc = file_chunks(m, ino, length, out, n, err);
	while (rc != 0 && retry_lost(m, rc, &lost));
	return rc;
}

static int file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
		       size_t *n, struct jo_err *err)
{
	uint64_t nchunks = length == 0 ? 0 : (length - 1) / JO_CHUNK_SIZE + 1;
	uint32_t *arr = NULL;
	size_t cnt = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (nchunks > UINT32_MAX)
		return jo_err_set(err, JO_EPROTO, "delfiles length %llu of inode %llu is too large",
				  (unsigned long long)length, (unsigned long long)ino);
	/* pipelined LLEN in pages of 1000, as JuiceFS does */
	for (uint64_t base = 0; base < nchunks; base += 1000) {
		uint64_t end = base + 1000 < nchunks ? base + 1000 : nchunks;

		for (uint64_t i = base; i < end; i++)
			jo_rd_append(m, "LLEN %Kc%llu_%u", (unsigned long long)ino, (unsigned)i);
		for (uint64_t i = base; i < end; i++) {
			redisReply *r;

			if (get_reply(m, &r, err) != 0) {
				free(arr);
				return err->code;
			}
			if (r->type == REDIS_REPLY_INTEGER && r->integer > 0 && rc == 0) {
				uint32_t *p = realloc(arr, (cnt + 1) * sizeof(*arr));

				if (!p)
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				else {
					arr = p;
					arr[cnt++] = (uint32_t)i;
				}
			} else if (r->type == REDIS_REPLY_ERROR && rc == 0) {
				rc = jo_err_set(err, JO_EIO, "redis %s: LLEN: %.200s", m->url.redacted,
						r->str);
			}
			freeReplyObject(r);
		}
		if (rc) {
			free(arr);
			return rc;
		}
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static int r_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length, bool *out,
			    struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "ZSCORE %Kdelfiles %llu:%llu", (unsigned long long)ino,
			    (unsigned long long)length);

	if (!r)
		return rc;
	*out = r->type == REDIS_REPLY_STRING;
	freeReplyObject(r);
	return 0;
}

static int r_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length, struct jo_err *err)
{
	return jo_rd_cmd_ok(m, err, "ZREM %Kdelfiles %llu:%llu", (unsigned long long)ino,
		      (unsigned long long)length);
}

/* ---- delayed slices (redis.go doCleanupDelayedSlices) */

static int r_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			      struct jo_sref **freed, size_t *nfreed, bool *kept,
			      struct jo_err *err)
{
	char field[64];
	struct jo_sref *recs = NULL;
	size_t nrec = 0, cap = 0, fcap = 0;
	int rc = 0, lost = 0;

	*freed = NULL;
	*nfreed = 0;
	*kept = false;
	if (ts >= edge) {
		*kept = true;
		return 0;
	}
	snprintf(field, sizeof(field), "%llu_%lld", (unsigned long long)new_id, (long long)ts);
	for (int attempt = 0; attempt < TXN_RETRIES; attempt++) {
		redisReply *r;

		nrec = 0;
		if ((rc = jo_rd_cmd_ok(m, err, "WATCH %KdelSlices")) != 0)
			goto lost;
		r = jo_rd_cmd(m, err, &rc, "HGET %KdelSlices %s", field);
		if (!r)
			goto lost;
		if (r->type != REDIS_REPLY_STRING) {
			give_up(m, r, err);
			rc = 0;
			goto out;
		}
		if (r->len == 0 || r->len % JO_DELSLICE_REC_LEN) {
			size_t vlen = r->len;

			give_up(m, r, err);
			rc = jo_err_set(err, JO_EPROTO, "delSlices %s: value of %zu bytes is not a "
					"list of 12-byte records: left alone", field, vlen);
			goto out;
		}
		for (size_t o = 0; o < r->len; o += JO_DELSLICE_REC_LEN) {
			const uint8_t *p = (const uint8_t *)r->str + o;

			if (jo_sref_push(&recs, &nrec, &cap, jo_be64(p), jo_be32(p + 8))) {
				give_up(m, r, err);
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
		}
		freeReplyObject(r);
		jo_rd_append(m, "MULTI");
		queue_decrs(m, recs, nrec);
		jo_rd_append(m, "HDEL %KdelSlices %s", field);
		jo_rd_append(m, "EXEC");
		rc = exec_decrs(m, 0, recs, nrec, freed, nfreed, &fcap, &lost, err);
		if (rc == 1)
			continue; /* delSlices changed under us: retry */
		goto out;
lost:
		if (retry_lost(m, rc, &lost))
			continue;
		goto out;
	}
	rc = jo_err_set(err, JO_EIO, "clean delSlices %s: still changing after %d attempts, retry later",
			field, TXN_RETRIES);
out:
	return jo_sref_finish(rc, recs, freed, nfreed);
}

/* ---- single slices */

static int r_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			     struct jo_err *err)
{
	int rc;
	int64_t v;
	redisReply *r = jo_rd_cmd(m, err, &rc, "HGET %KsliceRef k%llu_%u", (unsigned long long)id, size);

	if (!r)
		return rc;
	*out = false;
	if (r->type == REDIS_REPLY_STRING) {
		if (jo_rd_reply_i64(r, &v) != 0)
			rc = jo_err_set(err, JO_EPROTO, "sliceRef k%llu_%u is not an integer",
					(unsigned long long)id, size);
		else
			*out = v < 0;
	}
	freeReplyObject(r);
	return rc;
}

static int r_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	return jo_rd_cmd_ok(m, err, "HDEL %KsliceRef k%llu_%u", (unsigned long long)id, size);
}

/*
 * r_slice_deletable / r_forget_slice for many slices: one HGET / HDEL each,
 * pipelined in runs of up to 1000, so a delete batch costs one round trip
 * instead of one per slice. Any reply lost (the link went, a redirect the
 * pipeline could not follow) returns the code and the caller asks slice by
 * slice; an error reply for one field fails that slice only.
 */
#define RD_PIPE_MAX 1000

static int pipe_slices(struct jo_meta *m, const char *fmt, const struct jo_slice_id *v, size_t n,
		       bool *out, int *rcs, struct jo_err *err)
{
	bool told = false;

	for (size_t base = 0; base < n; base += RD_PIPE_MAX) {
		size_t k = n - base < RD_PIPE_MAX ? n - base : RD_PIPE_MAX;

		for (size_t i = 0; i < k; i++) {
			if (jo_rd_append(m, fmt, (unsigned long long)v[base + i].id,
					 v[base + i].size) != REDIS_OK) {
				return jo_rd_append_failed(m, i, err, "sliceRef pipeline");
			}
		}
		for (size_t i = 0; i < k; i++) {
			size_t at = base + i;
			redisReply *r = NULL;
			int64_t val;

			if (jo_rd_get_reply(m, &r) != REDIS_OK || !r)
				return jo_rd_conn_error(m, err, "pipelined sliceRef"); /* the rest went with it */
			rcs[at] = 0;
			if (out)
				out[at] = false;
			if (r->type == REDIS_REPLY_ERROR) {
				rcs[at] = JO_EIO;
				if (!told)
					jo_err_set(err, JO_EIO, "redis %s: sliceRef k%llu_%u: %.200s",
						   m->url.redacted, (unsigned long long)v[at].id, v[at].size,
						   r->str);
				told = true;
			} else if (out && r->type == REDIS_REPLY_STRING) {
				if (jo_rd_reply_i64(r, &val) != 0) {
					rcs[at] = JO_EPROTO;
					if (!told)
						jo_err_set(err, JO_EPROTO, "sliceRef k%llu_%u is not an integer",
							   (unsigned long long)v[at].id, v[at].size);
					told = true;
				} else {
					out[at] = val < 0;
				}
			} else if (out && r->type != REDIS_REPLY_NIL) {
				rcs[at] = JO_EPROTO;
				if (!told)
					jo_err_set(err, JO_EPROTO, "sliceRef k%llu_%u: unexpected reply",
						   (unsigned long long)v[at].id, v[at].size);
				told = true;
			}
			freeReplyObject(r);
		}
	}
	return 0;
}

static int r_slices_deletable(struct jo_meta *m, const struct jo_slice_id *v, size_t n, bool *out,
			      int *rcs, struct jo_err *err)
{
	return pipe_slices(m, "HGET %KsliceRef k%llu_%u", v, n, out, rcs, err);
}

static int r_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n, int *rcs,
			   struct jo_err *err)
{
	return pipe_slices(m, "HDEL %KsliceRef k%llu_%u", v, n, NULL, rcs, err);
}

static int r_inode_exists(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "EXISTS %Ki%llu", (unsigned long long)ino);

	if (!r)
		return rc;
	*out = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
	freeReplyObject(r);
	return 0;
}

static int r_is_detached(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	int rc;
	redisReply *r = jo_rd_cmd(m, err, &rc, "ZSCORE %KdetachedNodes %llu", (unsigned long long)ino);

	if (!r)
		return rc;
	*out = r->type == REDIS_REPLY_STRING;
	freeReplyObject(r);
	return 0;
}

/* Strict "c{ino}_{indx}". */
static int parse_chunk_key(const char *s, size_t n, uint64_t *ino, uint32_t *indx)
{
	const char *us;
	uint64_t v;

	if (n < 4 || s[0] != 'c')
		return -1;
	us = memchr(s + 1, '_', n - 1);
	if (!us || jo_parse_digits(s + 1, (size_t)(us - s - 1), ino) != 0 ||
	    jo_parse_digits(us + 1, (size_t)(s + n - us - 1), &v) != 0 || v > UINT32_MAX)
		return -1;
	*indx = (uint32_t)v;
	return 0;
}

static int r_scan_orphan_chunks(struct jo_meta *m, jo_mut_chunk_cb cb, void *payload,
				struct jo_err *err)
{
	char cursor[32] = "0";
	unsigned epoch = jo_rd_epoch(m);
	bool first = true;
	int rc = 0;

	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "SCAN %s MATCH %Kc*_* COUNT 1000", cursor);
		redisReply *keys;
		uint64_t *inos = NULL;
		uint32_t *idx = NULL;
		size_t nk = 0;

		if (!r)
			return rc;
		if (first)
			epoch = jo_rd_epoch(m);
		else if (epoch != jo_rd_epoch(m)) {
			freeReplyObject(r);
			return jo_err_set(err, JO_ECONNECT, "redis %s: SCAN: the connection was "
					  "re-established during the scan (a failover?); it must start "
					  "over", m->url.redacted);
		}
		first = false;
		keys = jo_rd_scan_page(m, r, "SCAN", cursor, err);
		if (!keys)
			return JO_EPROTO; /* jo_rd_scan_page said why */
		if (keys->elements) {
			inos = calloc(keys->elements, sizeof(*inos));
			idx = calloc(keys->elements, sizeof(*idx));
			if (!inos || !idx) {
				free(inos);
				free(idx);
				freeReplyObject(r);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
		}
		for (size_t i = 0; i < keys->elements; i++) {
			redisReply *k = keys->element[i];

			if (jo_rd_unprefix(m, keys->element[i]) &&
			    parse_chunk_key(k->str, k->len, &inos[nk], &idx[nk]) == 0)
				nk++;
		}
		freeReplyObject(r);
		for (size_t i = 0; i < nk; i++)
			jo_rd_append(m, "EXISTS %Ki%llu", (unsigned long long)inos[i]);
		for (size_t i = 0; i < nk; i++) {
			redisReply *e;

			if (get_reply(m, &e, err) != 0) {
				rc = err->code;
				break;
			}
			if (e->type == REDIS_REPLY_INTEGER && e->integer == 0 && rc == 0)
				rc = cb(inos[i], idx[i], payload);
			else if (e->type == REDIS_REPLY_ERROR && rc == 0)
				rc = jo_err_set(err, JO_EIO, "redis %s: EXISTS: %.200s", m->url.redacted,
						e->str);
			freeReplyObject(e);
		}
		free(inos);
		free(idx);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

const struct jo_mut_ops jo_rd_mut_ops = {
	.delete_chunk = r_delete_chunk,
	.file_chunks = r_file_chunks,
	.delfile_exists = r_delfile_exists,
	.remove_delfile = r_remove_delfile,
	.cleanup_delslice = r_cleanup_delslice,
	.slice_deletable = r_slice_deletable,
	.forget_slice = r_forget_slice,
	.slices_deletable = r_slices_deletable,
	.forget_slices = r_forget_slices,
	.confirm = jo_rd_confirm,
	.moved = jo_rd_moved,
	.inode_exists = r_inode_exists,
	.is_detached = r_is_detached,
	.scan_orphan_chunks = r_scan_orphan_chunks,
	.unlink = jo_rd_unlink,
	.rmdir = jo_rd_rmdir,
	.restore = jo_rd_restore,
	.restore_many = jo_rd_restore_many,
	.dir_stat_init = jo_rd_dir_stat_init,
	.dir_quota_add = jo_rd_dir_quota_add,
	.task_init = jo_rd_task_init,
	.task_add = jo_rd_task_add,
	.task_claim = jo_rd_task_claim,
	.task_renew = jo_rd_task_renew,
	.task_release = jo_rd_task_release,
	.task_complete = jo_rd_task_complete,
	.task_count = jo_rd_task_count,
	.task_scan = jo_rd_task_scan,
	.task_clear = jo_rd_task_clear,
	.rec_put = jo_rd_rec_put,
	.rec_get = jo_rd_rec_get,
	.rec_scan = jo_rd_rec_scan,
};

/* ---- shared with redis/compact.c (engine_internal.h) ---- */

int jo_rd_fail(struct jo_meta *m, struct redisReply *r, struct jo_err *err, const char *what)
{
	int rc;

	if (!r)
		return jo_rd_conn_error(m, err, what);
	rc = jo_err_set(err, JO_EIO, "redis %s: %s: %.200s", m->url.redacted, what,
			r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	freeReplyObject(r);
	return rc;
}
