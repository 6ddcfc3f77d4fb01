/*
 * mut_redis.c: the Redis side of meta_mut.h. Transactions copy JuiceFS's own
 * (pkg/meta/redis.go): WATCH the same key, read, MULTI/EXEC, retried up to 50
 * times when EXEC is aborted by a concurrent write. Task records and leases
 * are single Lua scripts (EVAL): atomic on the server, on the server's clock.
 */
#include "common/meta/meta_mut.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/redis_internal.h"
#include "common/meta/meta_internal.h"
#include "common/meta/meta_compact.h"

#define TXN_RETRIES 50

static int cmd_ok(struct jo_meta *m, struct jo_err *err, const char *fmt, ...)
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
static redisReply *scan_page(struct jo_meta *m, redisReply *r, const char *cmd, char *cursor,
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

static int reply_i64(const redisReply *r, int64_t *out)
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

		if (reply_i64(exec->element[first + i], &v) == 0 && v < 0 &&
		    jo_sref_push(freed, nfreed, fcap, recs[i].id, recs[i].size))
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	freeReplyObject(exec);
	return rc;
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
		redisReply *r, *exec;

		nrec = 0;
		if ((rc = cmd_ok(m, err, "WATCH %K%s", key)) != 0)
			goto lost;
		r = jo_rd_cmd(m, err, &rc, "LRANGE %K%s 0 -1", key);
		if (!r)
			goto lost;
		if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
			freeReplyObject(r);
			(void)cmd_ok(m, err, "UNWATCH"); /* best effort; EXEC never follows */
			rc = 0;
			goto out;
		}
		for (size_t i = 0; i < r->elements; i++) {
			const redisReply *e = r->element[i];

			if (e->type != REDIS_REPLY_STRING || e->len != JO_SLICE_REC_LEN) {
				freeReplyObject(r);
				(void)cmd_ok(m, err, "UNWATCH");
				rc = jo_err_set(err, JO_EPROTO, "chunk %s: element %zu is not a "
						"24-byte slice record: left alone", key, i);
				goto out;
			}
			const uint8_t *p = (const uint8_t *)e->str;
			uint64_t id = jo_be64(p + 4);

			if (id > 0 && jo_sref_push(&recs, &nrec, &cap, id, jo_be32(p + 12))) {
				freeReplyObject(r);
				(void)cmd_ok(m, err, "UNWATCH");
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
		}
		freeReplyObject(r);
		jo_rd_append(m, "MULTI");
		jo_rd_append(m, "DEL %K%s", key);
		for (size_t i = 0; i < nrec; i++)
			jo_rd_append(m, "HINCRBY %KsliceRef k%llu_%u -1",
					   (unsigned long long)recs[i].id, recs[i].size);
		jo_rd_append(m, "EXEC");
		if ((rc = jo_rd_exec(m, nrec + 1, &exec, err)) != 0)
			goto lost;
		rc = exec_freed(m, exec, nrec + 1, 1, recs, nrec, freed, nfreed, &fcap, err);
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
	return cmd_ok(m, err, "ZREM %Kdelfiles %llu:%llu", (unsigned long long)ino,
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
		redisReply *r, *exec;

		nrec = 0;
		if ((rc = cmd_ok(m, err, "WATCH %KdelSlices")) != 0)
			goto lost;
		r = jo_rd_cmd(m, err, &rc, "HGET %KdelSlices %s", field);
		if (!r)
			goto lost;
		if (r->type != REDIS_REPLY_STRING) {
			freeReplyObject(r);
			(void)cmd_ok(m, err, "UNWATCH"); /* best effort */
			rc = 0;
			goto out;
		}
		if (r->len == 0 || r->len % JO_DELSLICE_REC_LEN) {
			size_t vlen = r->len;

			freeReplyObject(r);
			(void)cmd_ok(m, err, "UNWATCH");
			rc = jo_err_set(err, JO_EPROTO, "delSlices %s: value of %zu bytes is not a "
					"list of 12-byte records: left alone", field, vlen);
			goto out;
		}
		for (size_t o = 0; o < r->len; o += JO_DELSLICE_REC_LEN) {
			const uint8_t *p = (const uint8_t *)r->str + o;

			if (jo_sref_push(&recs, &nrec, &cap, jo_be64(p), jo_be32(p + 8))) {
				freeReplyObject(r);
				(void)cmd_ok(m, err, "UNWATCH");
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
		}
		freeReplyObject(r);
		jo_rd_append(m, "MULTI");
		for (size_t i = 0; i < nrec; i++)
			jo_rd_append(m, "HINCRBY %KsliceRef k%llu_%u -1",
					   (unsigned long long)recs[i].id, recs[i].size);
		jo_rd_append(m, "HDEL %KdelSlices %s", field);
		jo_rd_append(m, "EXEC");
		if ((rc = jo_rd_exec(m, nrec + 1, &exec, err)) != 0)
			goto lost;
		rc = exec_freed(m, exec, nrec + 1, 0, recs, nrec, freed, nfreed, &fcap, err);
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
		if (reply_i64(r, &v) != 0)
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
	return cmd_ok(m, err, "HDEL %KsliceRef k%llu_%u", (unsigned long long)id, size);
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
				if (reply_i64(r, &val) != 0) {
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
	if (!us || jo_meta_parse_u64(s + 1, (size_t)(us - s - 1), ino) != 0 ||
	    jo_meta_parse_u64(us + 1, (size_t)(s + n - us - 1), &v) != 0 || v > UINT32_MAX)
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
		keys = scan_page(m, r, "SCAN", cursor, err);
		if (!keys)
			return JO_EPROTO; /* scan_page said why */
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

/* ---- tasks and leases (Lua) */

/*
 * Server time in ms inside scripts. Redis >= 5 replicates script effects, so
 * TIME before a write is allowed; older servers need replicate_commands().
 */
#define LUA_NOW \
	"if redis.replicate_commands then pcall(redis.replicate_commands) end " \
	"local t = redis.call('TIME') " \
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "

/* KEYS: items, queue, next. ARGV: prefix, kind, item... -> {id, added} */
static const char LUA_ADD[] =
	LUA_NOW
	"local fresh = {} "
	"for i = 3, #ARGV do "
	"  local owner = redis.call('HGET', KEYS[1], ARGV[i]) "
	"  if (not owner) or redis.call('EXISTS', ARGV[1] .. 'task:' .. owner) == 0 then "
	"    fresh[#fresh + 1] = ARGV[i] "
	"  end "
	"end "
	"if #fresh == 0 then return {0, 0} end "
	"local id = redis.call('INCR', KEYS[3]) "
	"for _, it in ipairs(fresh) do redis.call('HSET', KEYS[1], it, id) end "
	"redis.call('HSET', ARGV[1] .. 'task:' .. id, 'kind', ARGV[2], 'items', "
	"  table.concat(fresh, '\\n'), 'owner', '', 'expire', 0, 'attempts', 0, 'created', now) "
	"redis.call('ZADD', KEYS[2], 0, id) "
	"return {id, #fresh}";

/* KEYS: queue. ARGV: prefix, owner, lease_ms -> nil | {id, kind, items, expire, attempts} */
static const char LUA_CLAIM[] =
	LUA_NOW
	"while true do "
	"  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) "
	"  if #ids == 0 then return false end "
	"  local tk = ARGV[1] .. 'task:' .. ids[1] "
	"  if redis.call('EXISTS', tk) == 0 then "
	"    redis.call('ZREM', KEYS[1], ids[1]) "
	"  else "
	"    local exp = now + tonumber(ARGV[3]) "
	"    redis.call('ZADD', KEYS[1], exp, ids[1]) "
	"    redis.call('HSET', tk, 'owner', ARGV[2], 'expire', exp) "
	"    local att = redis.call('HINCRBY', tk, 'attempts', 1) "
	"    local v = redis.call('HMGET', tk, 'kind', 'items') "
	"    return {ids[1], v[1], v[2], tostring(exp), tostring(att)} "
	"  end "
	"end";

/* KEYS: queue. ARGV: prefix, id, owner, lease_ms -> expiry | -1 not ours */
static const char LUA_RENEW[] =
	LUA_NOW
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"local exp = now + tonumber(ARGV[4]) "
	"redis.call('ZADD', KEYS[1], exp, ARGV[2]) "
	"redis.call('HSET', tk, 'expire', exp) "
	"return exp";

/* KEYS: queue. ARGV: prefix, id, owner -> 1 | -1 */
static const char LUA_RELEASE[] =
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"redis.call('ZADD', KEYS[1], 0, ARGV[2]) "
	"redis.call('HSET', tk, 'owner', '', 'expire', 0) "
	"return 1";

/* KEYS: queue, items. ARGV: prefix, id, owner -> 1 | -1 */
static const char LUA_COMPLETE[] =
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"local items = redis.call('HGET', tk, 'items') or '' "
	"for it in string.gmatch(items, '[^\\n]+') do "
	"  if redis.call('HGET', KEYS[2], it) == ARGV[2] then redis.call('HDEL', KEYS[2], it) end "
	"end "
	"redis.call('DEL', tk) "
	"redis.call('ZREM', KEYS[1], ARGV[2]) "
	"return 1";

/* KEYS: queue -> {total, leased} */
static const char LUA_COUNT[] =
	LUA_NOW
	"return {redis.call('ZCARD', KEYS[1]), "
	"  redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}";

struct rkeys {
	char prefix[64], queue[80], items[80], next[80];
};

/* Task keys live beside the volume's (a Cluster volume's hash tag first). */
static int mk_keys(struct jo_meta *m, const char *ns, struct rkeys *k)
{
	const char *pre = jo_rd_prefix(m, NULL);

	snprintf(k->prefix, sizeof(k->prefix), "%sjfsops:%s:", pre, ns);
	snprintf(k->queue, sizeof(k->queue), "%sjfsops:%s:queue", pre, ns);
	snprintf(k->items, sizeof(k->items), "%sjfsops:%s:items", pre, ns);
	snprintf(k->next, sizeof(k->next), "%sjfsops:%s:next", pre, ns);
	return 0;
}

/* EVAL script with nkeys keys then args (all C strings). */
static redisReply *eval(struct jo_meta *m, struct jo_err *err, int *rc, const char *script,
			int nkeys, const char *const *keys, int nargs, const char *const *args)
{
	int argc = 3 + nkeys + nargs;
	const char **argv = calloc((size_t)argc, sizeof(*argv));
	size_t *lens = calloc((size_t)argc, sizeof(*lens));
	char nk[16];
	redisReply *r = NULL;
	int a = 0;

	if (!argv || !lens) {
		free(argv);
		free(lens);
		*rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(nk, sizeof(nk), "%d", nkeys);
	argv[a++] = "EVAL";
	argv[a++] = script;
	argv[a++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[a++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[a++] = args[i];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	r = jo_rd_command_argv(m, argc, argv, lens);
	free(argv);
	free(lens);
	if (!r) {
		*rc = jo_rd_conn_error(m, err, "EVAL");
		return NULL;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		*rc = jo_err_set(err, JO_EIO, "redis %s: task script: %.300s", m->url.redacted, r->str);
		freeReplyObject(r);
		return NULL;
	}
	*rc = 0;
	return r;
}

static int r_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	(void)m;
	(void)ns;
	(void)err;
	return 0;
}

static int r_task_add(struct jo_meta *m, const char *ns, const char *kind,
		      const char *const *items, size_t n, int64_t *task_id, size_t *added,
		      struct jo_err *err)
{
	struct rkeys k;
	const char *keys[3];
	const char **args;
	redisReply *r;
	int64_t v0, v1;
	int rc;

	*task_id = 0;
	*added = 0;
	if (n == 0)
		return 0;
	mk_keys(m, ns, &k);
	keys[0] = k.items;
	keys[1] = k.queue;
	keys[2] = k.next;
	args = calloc(n + 2, sizeof(*args));
	if (!args)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	args[0] = k.prefix;
	args[1] = kind;
	for (size_t i = 0; i < n; i++)
		args[i + 2] = items[i];
	r = eval(m, err, &rc, LUA_ADD, 3, keys, (int)n + 2, args);
	free(args);
	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || reply_i64(r->element[0], &v0) ||
	    reply_i64(r->element[1], &v1)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected task-add reply", m->url.redacted);
	}
	*task_id = v0;
	*added = (size_t)v1;
	freeReplyObject(r);
	return 0;
}

static int r_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
			struct jo_mut_task *out, struct jo_err *err)
{
	struct rkeys k;
	char lease[32];
	const char *keys[1], *args[3];
	redisReply *r;
	int rc;

	memset(out, 0, sizeof(*out));
	mk_keys(m, ns, &k);
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	keys[0] = k.queue;
	args[0] = k.prefix;
	args[1] = owner;
	args[2] = lease;
	r = eval(m, err, &rc, LUA_CLAIM, 1, keys, 3, args);
	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOTFOUND, "no claimable task");
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 || reply_i64(r->element[0], &out->id) ||
	    r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING ||
	    reply_i64(r->element[3], &out->expire_ms) || reply_i64(r->element[4], &out->attempts)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected task-claim reply",
				  m->url.redacted);
	}
	snprintf(out->kind, sizeof(out->kind), "%.*s", (int)r->element[1]->len, r->element[1]->str);
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	out->items = strndup(r->element[2]->str, r->element[2]->len);
	freeReplyObject(r);
	if (!out->items)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int r_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	struct rkeys k;
	char sid[32], lease[32];
	const char *keys[1], *args[4];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	snprintf(sid, sizeof(sid), "%lld", (long long)id);
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	keys[0] = k.queue;
	args[0] = k.prefix;
	args[1] = sid;
	args[2] = owner;
	args[3] = lease;
	r = eval(m, err, &rc, LUA_RENEW, 1, keys, 4, args);
	if (!r)
		return rc;
	rc = reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected renew reply", m->url.redacted);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "task %lld is no longer leased by %s",
				  (long long)id, owner);
	if (expire_ms)
		*expire_ms = v;
	return 0;
}

static int owner_script(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			const char *script, const char *what, struct jo_err *err)
{
	struct rkeys k;
	char sid[32];
	const char *keys[2], *args[3];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	snprintf(sid, sizeof(sid), "%lld", (long long)id);
	keys[0] = k.queue;
	keys[1] = k.items;
	args[0] = k.prefix;
	args[1] = sid;
	args[2] = owner;
	r = eval(m, err, &rc, script, 2, keys, 3, args);
	if (!r)
		return rc;
	rc = reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected %s reply", m->url.redacted, what);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "%s task %lld: no longer leased by %s", what,
				  (long long)id, owner);
	return 0;
}

static int r_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			  struct jo_err *err)
{
	return owner_script(m, ns, id, owner, LUA_RELEASE, "release", err);
}

static int r_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			   struct jo_err *err)
{
	return owner_script(m, ns, id, owner, LUA_COMPLETE, "complete", err);
}

static int r_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
			struct jo_err *err)
{
	struct rkeys k;
	const char *keys[1];
	redisReply *r;
	int rc;

	mk_keys(m, ns, &k);
	keys[0] = k.queue;
	r = eval(m, err, &rc, LUA_COUNT, 1, keys, 0, NULL);
	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || reply_i64(r->element[0], total) ||
	    reply_i64(r->element[1], leased)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected count reply", m->url.redacted);
	}
	freeReplyObject(r);
	return 0;
}

static int r_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		       struct jo_err *err)
{
	struct rkeys k;
	char cursor[32] = "0";
	int rc = 0;

	mk_keys(m, ns, &k);
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "ZSCAN %s %s COUNT 100", k.queue, cursor);
		redisReply *el;

		if (!r)
			return rc;
		el = scan_page(m, r, "ZSCAN", cursor, err);
		if (!el)
			return JO_EPROTO; /* scan_page said why */
		for (size_t i = 0; i + 1 < el->elements && rc == 0; i += 2) {
			struct jo_mut_task t = { 0 };
			redisReply *h;
			int64_t id;

			if (reply_i64(el->element[i], &id) != 0)
				continue;
			h = jo_rd_cmd(m, err, &rc, "HMGET %stask:%lld kind items owner expire attempts",
				k.prefix, (long long)id);
			if (!h)
				break;
			if (h->type == REDIS_REPLY_ARRAY && h->elements == 5 &&
			    h->element[0]->type == REDIS_REPLY_STRING &&
			    h->element[1]->type == REDIS_REPLY_STRING) {
				t.id = id;
				snprintf(t.kind, sizeof(t.kind), "%.*s", (int)h->element[0]->len,
					 h->element[0]->str);
				t.items = strndup(h->element[1]->str, h->element[1]->len);
				if (h->element[2]->type == REDIS_REPLY_STRING)
					snprintf(t.owner, sizeof(t.owner), "%.*s",
						 (int)h->element[2]->len, h->element[2]->str);
				(void)reply_i64(h->element[3], &t.expire_ms); /* absent: stays 0 */
				(void)reply_i64(h->element[4], &t.attempts);
				if (!t.items)
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				else
					rc = cb(&t, payload);
				free(t.items);
			}
			freeReplyObject(h);
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

static int r_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	struct rkeys k;
	char cursor[32] = "0", match[80];
	int rc = 0;

	mk_keys(m, ns, &k);
	snprintf(match, sizeof(match), "%s*", k.prefix);
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "SCAN %s MATCH %s COUNT 1000", cursor, match);

		if (!r)
			return rc;
		const redisReply *keys = scan_page(m, r, "SCAN", cursor, err);

		if (!keys)
			return JO_EPROTO; /* scan_page said why */
		for (size_t i = 0; i < keys->elements && rc == 0; i++) {
			const redisReply *key = keys->element[i];

			rc = cmd_ok(m, err, "DEL %b", key->str, key->len);
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

/* ---- records beside the tasks (meta_mut.h jo_mut_rec_*) */

/*
 * KEYS: rec, queue, items. ARGV: prefix, key, value, delete, if_absent,
 * task id (0: none), owner, complete -> -1 not our task, 0 exists, 1 written
 */
static const char LUA_REC_PUT[] =
	"local id = tonumber(ARGV[6]) "
	"local tk = ARGV[1] .. 'task:' .. ARGV[6] "
	"if id > 0 and redis.call('HGET', tk, 'owner') ~= ARGV[7] then return -1 end "
	"if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 0 end "
	"if ARGV[4] == '1' then redis.call('HDEL', KEYS[1], ARGV[2]) "
	"else redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end "
	"if ARGV[8] == '1' then "
	"  local items = redis.call('HGET', tk, 'items') or '' "
	"  for it in string.gmatch(items, '[^\\n]+') do "
	"    if redis.call('HGET', KEYS[3], it) == ARGV[6] then redis.call('HDEL', KEYS[3], it) end "
	"  end "
	"  redis.call('DEL', tk) "
	"  redis.call('ZREM', KEYS[2], ARGV[6]) "
	"end "
	"return 1";

/* Beside the task keys (a Cluster volume's hash tag first, as mk_keys). */
static void rec_key(struct jo_meta *m, const char *ns, char *out, size_t n)
{
	snprintf(out, n, "%sjfsops:%s:rec", jo_rd_prefix(m, NULL), ns);
}

static int r_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		     const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	struct rkeys k;
	char rk[64], sid[32];
	const char *keys[3], *args[8];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	rec_key(m, ns, rk, sizeof(rk));
	snprintf(sid, sizeof(sid), "%lld", (long long)(c->task_id > 0 ? c->task_id : 0));
	keys[0] = rk;
	keys[1] = k.queue;
	keys[2] = k.items;
	args[0] = k.prefix;
	args[1] = key;
	args[2] = val ? val : "";
	args[3] = val ? "0" : "1";
	args[4] = c->if_absent ? "1" : "0";
	args[5] = sid;
	args[6] = c->task_id > 0 ? c->owner : "";
	args[7] = c->complete ? "1" : "0";
	r = eval(m, err, &rc, LUA_REC_PUT, 3, keys, 8, args);
	if (!r)
		return rc;
	rc = reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected record reply", m->url.redacted);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "record '%s': task %lld is no longer leased by %s",
				  key, (long long)c->task_id, c->owner);
	if (written)
		*written = v == 1;
	return 0;
}

static int r_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		     struct jo_err *err)
{
	char rk[64];
	redisReply *r;
	int rc;

	rec_key(m, ns, rk, sizeof(rk));
	r = jo_rd_cmd(m, err, &rc, "HGET %s %s", rk, key);
	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOTFOUND, "no record '%s'", key);
	}
	if (r->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: record '%s' is not a string",
				  m->url.redacted, key);
	}
	*val = strndup(r->str, r->len);
	freeReplyObject(r);
	return *val ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

static int r_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		      void *payload, struct jo_err *err)
{
	char rk[64], cursor[32] = "0", match[420];
	size_t o = 0;
	int rc = 0;

	rec_key(m, ns, rk, sizeof(rk));
	/* MATCH is a glob: escape its special characters in the prefix */
	for (const char *p = prefix; *p && o + 3 < sizeof(match); p++) {
		if (strchr("*?[]\\", *p))
			match[o++] = '\\';
		match[o++] = *p;
	}
	match[o++] = '*';
	match[o] = '\0';
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "HSCAN %s %s MATCH %s COUNT 200", rk, cursor,
					  match);
		redisReply *el;

		if (!r)
			return rc;
		el = scan_page(m, r, "HSCAN", cursor, err);
		if (!el)
			return JO_EPROTO; /* scan_page said why */
		for (size_t i = 0; i + 1 < el->elements && rc == 0; i += 2) {
			/* strings from Redis are NUL-terminated by hiredis */
			if (el->element[i]->type == REDIS_REPLY_STRING &&
			    el->element[i + 1]->type == REDIS_REPLY_STRING)
				rc = cb(el->element[i]->str, el->element[i + 1]->str, payload);
		}
		freeReplyObject(r);
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
	.dir_stat_init = jo_rd_dir_stat_init,
	.dir_quota_add = jo_rd_dir_quota_add,
	.task_init = r_task_init,
	.task_add = r_task_add,
	.task_claim = r_task_claim,
	.task_renew = r_task_renew,
	.task_release = r_task_release,
	.task_complete = r_task_complete,
	.task_count = r_task_count,
	.task_scan = r_task_scan,
	.task_clear = r_task_clear,
	.rec_put = r_rec_put,
	.rec_get = r_rec_get,
	.rec_scan = r_rec_scan,
};

/* ---- shared with compact_redis.c (engine_internal.h) ---- */

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
