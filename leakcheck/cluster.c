/*
 * cluster.c: `jfsops leakcheck META-URL --cluster URL`: one leak check
 * shared by processes on any number of hosts through a coordinator
 * (common/cluster.h, meta_mut.h's tasks and records), with the guarantees
 * of the one-host run.
 *
 * --plan reads the slice-id counter before anything else, scans the
 * references once (leak_refs_scan, the one-host scan), cuts the ids into
 * ranges of about equal expected blocks (range.c: every key under chunks/
 * belongs to exactly one range) and writes each range's sorted references
 * as a zstd run under --work (a directory every worker reaches), then
 * records the plan and one task per range. A --worker claims a range by
 * lease, lists that range's keys only, merges them with its run (the merge
 * of the one-host run, with the plan's counter and age cutoff) and writes
 * the range's report lines under --work; the record done:R (its counters,
 * the file and its size) is written in the transaction that completes the
 * range's task, so a range is done once, by the holder of its lease. A
 * range whose listing or run was not read whole is retried, and after
 * --max-attempts recorded as failed: the job is then incomplete for good,
 * and no report is ever published from it.
 *
 * Records of the job's namespace ("l" + 15 hex digits of the volume's UUID
 * and --work):
 *   job          what the job is (volume, work directory)
 *   plan         the counter, the age cutoff, the ranges' bounds, the run
 *                directory and each run's record count
 *   done:R       range R done (counters, report file, lines, bytes), or
 *                {"failed": true} after --max-attempts
 *   fail:R       range R's last failure
 *   w:WORKER     a worker's counters (status, rate)
 * The registry "lcjobs" lists the jobs for --status without a volume's name.
 */
#include "leakcheck/leak.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <zstd.h>

#include "common/cancel.h"
#include "common/cluster.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/extsort.h"
#include "common/file.h"
#include "common/human.h"
#include "common/jfs/jfs.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"

#define REGISTRY "lcjobs"
#define RUN_BUF (1u << 17)

/* ---- a range's references: a zstd run of 16-byte records ------------------ */

struct run_w {
	struct jo_file *f;
	ZSTD_CCtx *z;
	uint8_t *buf;
	size_t used;
	uint64_t n;
};

static int run_w_flush(struct run_w *w, const void *src, size_t len, ZSTD_EndDirective end,
		       struct jo_err *err)
{
	ZSTD_inBuffer in = { src, len, 0 };
	size_t left;

	do {
		ZSTD_outBuffer out = { w->buf, RUN_BUF, 0 };

		left = ZSTD_compressStream2(w->z, &out, &in, end);
		if (ZSTD_isError(left))
			return jo_err_set(err, JO_EIO, "zstd: %s", ZSTD_getErrorName(left));
		if (out.pos && jo_write_all(w->f->fd, w->buf, out.pos) != 0)
			return jo_err_set(err, JO_EIO, "write %s: %s", w->f->path, strerror(errno));
	} while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
	return 0;
}

static int run_w_open(struct run_w *w, const char *path, struct jo_err *err)
{
	memset(w, 0, sizeof(*w));
	w->z = ZSTD_createCCtx();
	w->buf = malloc(RUN_BUF);
	if (!w->z || !w->buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setParameter(w->z, ZSTD_c_checksumFlag, 1);
	return jo_file_create(&w->f, path, JO_FILE_PRIVATE, 0, err);
}

static int run_w_add(struct run_w *w, const uint8_t rec[LEAK_REF_REC_LEN], struct jo_err *err)
{
	w->n++;
	return run_w_flush(w, rec, LEAK_REF_REC_LEN, ZSTD_e_continue, err);
}

/* Finish the frame and publish the file (exclusive temp file, renamed into place). */
static int run_w_close(struct run_w *w, bool commit, struct jo_err *err)
{
	int rc = 0;

	if (commit && w->f) {
		rc = run_w_flush(w, NULL, 0, ZSTD_e_end, err);
		if (!rc)
			rc = jo_file_commit(w->f, err);
	}
	jo_file_abort(w->f);
	ZSTD_freeCCtx(w->z);
	free(w->buf);
	memset(w, 0, sizeof(*w));
	return rc;
}

struct run_r {
	int fd;
	const char *path;
	ZSTD_DCtx *z;
	uint8_t *in, *out;
	ZSTD_inBuffer ib;
	size_t out_len, out_pos;
	size_t last;             /* ZSTD_decompressStream's last answer (0: frame ended) */
	bool eof;
	uint64_t n, want;
	uint8_t rec[LEAK_REF_REC_LEN];
};

static int run_r_open(struct run_r *r, const char *path, uint64_t want, struct jo_err *err)
{
	memset(r, 0, sizeof(*r));
	r->path = path;
	r->want = want;
	r->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (r->fd < 0)
		return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
				  "reference run %s: %s", path, strerror(errno));
	r->z = ZSTD_createDCtx();
	r->in = malloc(RUN_BUF);
	r->out = malloc(ZSTD_DStreamOutSize());
	if (!r->z || !r->in || !r->out)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	r->ib.src = r->in;
	return 0;
}

static void run_r_close(struct run_r *r)
{
	if (r->fd > 0)
		close(r->fd);
	ZSTD_freeDCtx(r->z);
	free(r->in);
	free(r->out);
	memset(r, 0, sizeof(*r));
}

/* leak_next_fn over a run: its records, and at its end a check that it was read whole. */
static int run_r_next(void *src, const void **rec, size_t *len, struct jo_err *err)
{
	struct run_r *r = src;
	size_t got = 0;

	while (got < LEAK_REF_REC_LEN) {
		if (r->out_pos < r->out_len) {
			size_t k = r->out_len - r->out_pos;

			if (k > LEAK_REF_REC_LEN - got)
				k = LEAK_REF_REC_LEN - got;
			memcpy(r->rec + got, r->out + r->out_pos, k);
			r->out_pos += k;
			got += k;
			continue;
		}
		if (r->ib.pos == r->ib.size && !r->eof) {
			ssize_t n = read(r->fd, r->in, RUN_BUF);

			if (n < 0)
				return jo_err_set(err, JO_EIO, "read %s: %s", r->path, strerror(errno));
			if (n == 0)
				r->eof = true;
			r->ib.size = (size_t)n;
			r->ib.pos = 0;
		}
		if (r->eof && r->ib.pos == r->ib.size) {
			/* the end: whole records, a whole frame, the planned count */
			if (got || r->last != 0 || r->n != r->want)
				return jo_err_set(err, JO_EPROTO, "reference run %s was not read whole "
						  "(%" PRIu64 " of %" PRIu64 " records%s)", r->path,
						  r->n, r->want, r->last ? ", the frame is cut" : "");
			return 0;
		}
		ZSTD_outBuffer ob = { r->out, ZSTD_DStreamOutSize(), 0 };

		r->last = ZSTD_decompressStream(r->z, &ob, &r->ib);
		if (ZSTD_isError(r->last))
			return jo_err_set(err, JO_EPROTO, "reference run %s: %s", r->path,
					  ZSTD_getErrorName(r->last));
		r->out_len = ob.pos;
		r->out_pos = 0;
	}
	r->n++;
	*rec = r->rec;
	*len = LEAK_REF_REC_LEN;
	return 1;
}

/* The density map of a run's references (read whole: the same checks as the merge's read). */
static int run_density(struct leak_density *d, const char *path, uint64_t want,
		       uint64_t next_chunk, uint32_t block_size, struct jo_err *err)
{
	struct run_r r;
	const void *rec;
	size_t len;
	int rc;

	if (leak_density_init(d, next_chunk, block_size))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = run_r_open(&r, path, want, err);
	while (!rc && (rc = run_r_next(&r, &rec, &len, err)) == 1) {
		uint64_t id;
		uint32_t size;
		int cls;

		leak_ref_decode(rec, &id, &size, &cls);
		leak_density_add(d, id, size);
		rc = 0;
	}
	run_r_close(&r);
	return rc;
}

/* ---- the job --------------------------------------------------------------- */

struct job {
	struct jo_vol *v;
	const struct leak_cluster_opts *o;
	struct leak_cluster_result *res;
	struct jo_meta *m;
	struct jo_lease *lease;
	char ns[17];
	char dir[PATH_MAX + 32]; /* WORK/NS */
	int64_t started_ms;
	double busy_s;
	uint64_t listed, objects;
	int cur;
};

static int put_worker(struct job *j, const char *state)
{
	char key[160];
	struct jo_err e = { 0 };
	json_t *w = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:i}", "state", state, "started",
			      (json_int_t)j->started_ms, "seen", (json_int_t)jo_cl_now_ms(),
			      "listed", (json_int_t)j->listed, "objects", (json_int_t)j->objects,
			      "ranges", (json_int_t)j->res->mine, "busy_s", j->busy_s, "range", j->cur);

	snprintf(key, sizeof(key), "w:%s", j->o->worker);
	if (w)
		(void)jo_cl_rec_put(j->m, j->ns, key, w, NULL, NULL, &e);
	json_decref(w);
	return 0;
}

/* The plan's bounds as ranges. */
static int plan_ranges(const json_t *plan, struct leak_ranges *rs, struct jo_err *err)
{
	const json_t *b = json_object_get(plan, "bounds");
	size_t n = json_array_size(b);

	rs->n = 0;
	rs->b = NULL;
	if (!n)
		return jo_err_set(err, JO_EPROTO, "coordinator: the plan has no ranges");
	rs->b = malloc((n + 1) * sizeof(*rs->b));
	if (!rs->b)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		json_int_t x = json_integer_value(json_array_get(b, i));

		if (x < 0 || (i == 0 && x != 0) || (i && (uint64_t)x <= rs->b[i - 1]) || x % 1000) {
			free(rs->b);
			rs->b = NULL;
			return jo_err_set(err, JO_EPROTO, "coordinator: the plan's bounds are malformed");
		}
		rs->b[i] = (uint64_t)x;
	}
	rs->b[n] = UINT64_MAX;
	rs->n = n;
	return 0;
}

/* buf := WORK/NS/PLANDIR/name (JO_EINVAL when it does not fit). */
static int job_path(const struct job *j, const char *plandir, const char *name, char *buf,
		    size_t cap, struct jo_err *err)
{
	int n;

	/* names from the coordinator's records: one plain component each */
	if (!plandir[0] || plandir[0] == '.' || strchr(plandir, '/') || name[0] == '.' ||
	    strchr(name, '/'))
		return jo_err_set(err, JO_EPROTO, "coordinator: a malformed file name in the job's "
				  "records");
	n = snprintf(buf, cap, "%s/%s/%s", j->dir, plandir, name);
	if (n < 0 || (size_t)n >= cap)
		return jo_err_set(err, JO_EINVAL, "--work: path too long");
	return 0;
}

/* ---- the job's records at once ------------------------------------------------ */

struct view {
	json_t *plan;
	json_t **done, **fail;   /* per range (NULL: none) */
	size_t n;
	json_t *workers;
};

static void view_release(struct view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		json_decref(v->done[i]);
		json_decref(v->fail[i]);
	}
	free(v->done);
	free(v->fail);
	json_decref(v->plan);
	json_decref(v->workers);
	memset(v, 0, sizeof(*v));
}

static int view_cb(const char *key, const char *val, void *p)
{
	struct view *v = p;
	json_t *j = json_loads(val, 0, NULL);
	json_t **slot = NULL;
	char *end;

	if (!j)
		return 0;
	if (!strncmp(key, "w:", 2)) {
		json_object_set_new(v->workers, key + 2, j);
		return 0;
	}
	if (!strncmp(key, "done:", 5) || !strncmp(key, "fail:", 5)) {
		unsigned long i = strtoul(key + 5, &end, 10);

		if (!*end && i < v->n)
			slot = key[0] == 'd' ? &v->done[i] : &v->fail[i];
	}
	if (slot) {
		json_decref(*slot);
		*slot = j;
	} else {
		json_decref(j);
	}
	return 0;
}

static int view_load(struct jo_meta *m, const char *ns, struct view *v, struct jo_err *err)
{
	int rc;

	memset(v, 0, sizeof(*v));
	rc = jo_cl_rec_get(m, ns, "plan", &v->plan, err);
	if (rc)
		return rc;
	v->workers = json_object();
	v->n = v->plan ? json_array_size(json_object_get(v->plan, "bounds")) : 0;
	v->done = calloc(v->n ? v->n : 1, sizeof(*v->done));
	v->fail = calloc(v->n ? v->n : 1, sizeof(*v->fail));
	if (!v->workers || !v->done || !v->fail) {
		view_release(v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	rc = jo_mut_rec_scan(m, ns, "", view_cb, v, err);
	if (rc)
		view_release(v);
	return rc;
}

/* Ranges done, failed (given up). */
static void view_counts(const struct view *v, size_t *done, size_t *failed)
{
	*done = *failed = 0;
	for (size_t i = 0; i < v->n; i++) {
		if (v->done[i] && jo_cl_jb(v->done[i], "failed"))
			(*failed)++;
		else if (v->done[i])
			(*done)++;
	}
}

/* A range's counters in done:R besides its per-kind counts. */
#define CF(field) { #field, offsetof(struct leak_counts, field) }
static const struct jo_cl_u64 counts_fields[] = {
	CF(objects), CF(object_bytes), CF(slices), CF(skipped_new_slice),
};
#undef CF
#define NCOUNTS (sizeof(counts_fields) / sizeof(counts_fields[0]))

/* The job's counters: the sum of its ranges'. */
static void view_totals(const struct view *v, struct leak_cluster_result *res)
{
	memset(&res->c, 0, sizeof(res->c));
	res->listed = res->foreign = 0;
	for (size_t i = 0; i < v->n; i++) {
		const json_t *d = v->done[i];
		const json_t *n = json_object_get(d, "n"), *b = json_object_get(d, "bytes");

		if (!d || jo_cl_jb(d, "failed"))
			continue;
		for (int k = 0; k < LEAK_NKINDS; k++) {
			res->c.n[k] += (uint64_t)json_integer_value(json_array_get(n, (size_t)k));
			res->c.bytes[k] += (uint64_t)json_integer_value(json_array_get(b, (size_t)k));
		}
		jo_cl_u64_get(d, &res->c, counts_fields, NCOUNTS, true);
		res->listed += jo_cl_ju(d, "listed");
		res->foreign += jo_cl_ju(d, "foreign");
	}
	view_counts(v, &res->done, &res->failed);
	res->ranges = v->n;
	res->planned = v->plan != NULL;
	res->complete = v->plan && res->done == v->n;
	res->next_chunk = jo_cl_ju(v->plan, "next_chunk");
}

/* ---- planning ----------------------------------------------------------------- */

static int do_plan(struct job *j, struct jo_err *err)
{
	const struct leak_cluster_opts *o = j->o;
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct jo_xsort *xs = NULL;
	struct leak_density density = { 0 };
	struct leak_ref_stats rs = { 0 };
	struct leak_ranges ranges = { 0 };
	struct run_w w = { 0 };
	struct jo_mut_rec_cond once = { .if_absent = true };
	json_t *plan = NULL, *bounds = NULL, *counts = NULL;
	int64_t next_chunk = 0, start = (int64_t)time(NULL);
	char sub[32], path[PATH_MAX + 64];
	size_t cur = 0, want;
	bool written = false, have;
	const void *rec;
	size_t len;
	int rc;

	/* the counter first: anything allocated after it is in flight */
	rc = jo_meta_get_counter(j->v->meta, "nextChunk", &next_chunk, err);
	if (rc)
		return jo_err_wrap(err, "read nextChunk");
	if (leak_density_init(&density, (uint64_t)next_chunk, j->v->block_size))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	xo.mem_limit = o->mem;
	xo.tmp_dir = o->tmp;
	xo.threads = 2;
	rc = jo_xsort_new(&xs, &xo, err);
	if (!rc)
		rc = leak_refs_scan(j->v->meta, xs, &density, &rs, err);
	if (!rc)
		rc = jo_xsort_finish(xs, err);
	if (rc)
		goto out;
	/* default: enough ranges for a few workers, more on a big volume */
	want = o->ranges ? o->ranges : (size_t)(density.total / 200000 + 1);
	if (!o->ranges && want < 16)
		want = 16;
	if (want > 100000)
		want = 100000;
	rc = leak_range_cut(&density, (uint64_t)next_chunk, want, j->v->fmt.hash_prefix, &ranges);
	if (rc) {
		jo_err_set(err, rc, "out of memory");
		goto out;
	}
	/* this planner's own directory: a second planner never writes into it */
	snprintf(sub, sizeof(sub), "p%08lx%04x", (unsigned long)start, (unsigned)getpid() & 0xffff);
	rc = job_path(j, sub, "", path, sizeof(path), err);
	if (rc)
		goto out;
	if (mkdir(path, 0700) != 0) {
		rc = jo_err_set(err, JO_EIO, "mkdir %s: %s", path, strerror(errno));
		goto out;
	}
	counts = json_array();
	bounds = json_array();
	if (!counts || !bounds) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	/* the sorted references, cut by the ranges: one run after the other */
	rc = jo_xsort_next(xs, &rec, &len, err);
	have = rc == 1;
	rc = rc < 0 ? rc : 0;
	for (cur = 0; cur < ranges.n && !rc; cur++) {
		char rn[32];

		snprintf(rn, sizeof(rn), "refs-%06zu.zst", cur);
		rc = job_path(j, sub, rn, path, sizeof(path), err);
		if (!rc)
			rc = run_w_open(&w, path, err);
		while (!rc && have) {
			uint64_t id;
			uint32_t size;
			int cls;

			leak_ref_decode(rec, &id, &size, &cls);
			if (id >= ranges.b[cur + 1])
				break;
			rc = run_w_add(&w, rec, err);
			if (!rc) {
				rc = jo_xsort_next(xs, &rec, &len, err);
				have = rc == 1;
				rc = rc < 0 ? rc : 0;
			}
		}
		json_array_append_new(counts, json_integer((json_int_t)w.n));
		json_array_append_new(bounds, json_integer((json_int_t)ranges.b[cur]));
		if (!rc)
			rc = run_w_close(&w, true, err);
		else
			run_w_close(&w, false, err);
	}
	if (rc)
		goto out;
	plan = json_pack("{s:i,s:I,s:I,s:I,s:s,s:s,s:I,s:O,s:O,s:b,s:I}", "v", 1, "next_chunk",
			 (json_int_t)next_chunk, "start", (json_int_t)start, "cutoff",
			 (json_int_t)(start - o->min_age), "dir", sub, "by", o->worker, "at",
			 (json_int_t)jo_cl_now_ms(), "bounds", bounds, "refs", counts, "hash_prefix",
			 j->v->fmt.hash_prefix, "references", (json_int_t)rs.records);
	if (!plan) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	rc = jo_cl_rec_put(j->m, j->ns, "plan", plan, &once, &written, err);
	if (rc)
		goto out;
	if (!written) {
		jo_info("job %s: another planner recorded its plan first; ours is dropped", j->ns);
		goto out;
	}
	for (size_t i = 0; i < ranges.n && !rc; i++) {
		int idx = (int)i;

		rc = jo_cl_add_tasks(j->m, j->ns, "range", 'r', &idx, 1, err);
	}
	if (!rc)
		jo_info("job %s: %zu ranges planned below slice id %" PRId64 " (%" PRIu64
			" references, runs in %s/%s)", j->ns, ranges.n, next_chunk, rs.records,
			j->dir, sub);
out:
	json_decref(plan);
	json_decref(bounds);
	json_decref(counts);
	jo_xsort_free(xs);
	leak_density_free(&density);
	leak_ranges_free(&ranges);
	return rc;
}

/* ---- one range ------------------------------------------------------------------ */

static json_t *counts_json(const struct leak_counts *c, const struct leak_list_stats *ls)
{
	json_t *n = json_array(), *b = json_array(), *o;

	for (int k = 0; k < LEAK_NKINDS; k++) {
		json_array_append_new(n, json_integer((json_int_t)(k == LEAK_FOREIGN ? ls->foreign
											: c->n[k])));
		json_array_append_new(b, json_integer((json_int_t)c->bytes[k]));
	}
	o = json_pack("{s:o,s:o,s:I,s:I}", "n", n, "bytes", b, "listed", (json_int_t)ls->listed,
		      "foreign", (json_int_t)ls->foreign);

	if (o && !jo_cl_u64_put(o, c, counts_fields, NCOUNTS)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/*
 * The range's listing or run failed: fail:R counts the failures (a killed
 * worker's attempt is not one); below --max-attempts the task goes back,
 * else the range is recorded failed in the transaction that completes it.
 */
static int range_fail(struct job *j, const struct jo_mut_task *t, size_t idx,
		      const struct jo_err *why, struct jo_err *err)
{
	char key[32];
	json_t *prev = NULL, *f;
	int64_t fails;
	int rc;

	snprintf(key, sizeof(key), "fail:%06zu", idx);
	rc = jo_cl_rec_get(j->m, j->ns, key, &prev, err);
	if (rc)
		return rc;
	fails = jo_cl_ji(prev, "fails") + 1;
	json_decref(prev);
	jo_warn("range %06zu failed (%" PRId64 " of %u): %s", idx, fails, j->o->max_attempts,
		why->msg);
	f = json_pack("{s:s,s:s,s:I,s:I}", "error", why->msg[0] ? why->msg : jo_err_name(why->code),
		      "by", j->o->worker, "at", (json_int_t)jo_cl_now_ms(), "fails", (json_int_t)fails);
	rc = f ? jo_cl_rec_put(j->m, j->ns, key, f, NULL, NULL, err) : JO_ENOMEM;
	json_decref(f);
	if (rc)
		return rc;
	if (fails < (int64_t)j->o->max_attempts)
		return jo_lease_release(j->lease, j->m, err);
	/* given up: recorded as failed in the transaction that completes the task */
	struct jo_mut_rec_cond c = { .task_id = t->id, .owner = j->o->worker, .complete = true };
	json_t *d = json_pack("{s:b,s:s,s:s,s:I}", "failed", 1, "error", why->msg, "by",
			      j->o->worker, "at", (json_int_t)jo_cl_now_ms());

	snprintf(key, sizeof(key), "done:%06zu", idx);
	rc = d ? jo_cl_rec_put(j->m, j->ns, key, d, &c, NULL, err) : JO_ENOMEM;
	json_decref(d);
	jo_lease_forget(j->lease);
	return rc == JO_ECONFLICT ? (jo_err_clear(err), 0) : rc;
}

static int do_range(struct job *j, const struct jo_mut_task *t, size_t idx, const json_t *plan,
		    struct jo_err *err)
{
	const struct leak_cluster_opts *o = j->o;
	struct leak_ranges rs = { 0 };
	struct leak_counts c = { 0 };
	struct leak_list_stats ls = { 0 };
	struct run_r rr = { 0 };
	struct jo_file *f = NULL;
	struct jo_err e = { 0 };
	char path[PATH_MAX + 64], name[96];
	double t0 = jo_cl_mono_s();
	json_t *d = NULL;
	long sect[2] = { -1, -1 };
	struct leak_density dens = { 0 };
	char rp[PATH_MAX + 64], rn[32];
	int rc;

	rc = plan_ranges(plan, &rs, err);
	if (rc)
		return rc;
	if (idx >= rs.n) {
		leak_ranges_free(&rs);
		return jo_err_set(err, JO_EPROTO, "coordinator: task r%06zu names no planned range",
				  idx);
	}
	j->cur = (int)idx;
	(void)put_worker(j, "working");
	/* the report lines of this attempt: a name of its own */
	snprintf(name, sizeof(name), "out-%06zu-%" PRId64 "-%08lx.jsonl", idx, t->attempts,
		 (unsigned long)jo_cl_now_ms() ^ (unsigned long)getpid());
	rc = job_path(j, jo_cl_js(plan, "dir"), name, path, sizeof(path), &e);
	if (!rc)
		rc = jo_file_create(&f, path, JO_FILE_PRIVATE, JO_FILE_STDIO, &e);
	if (!rc) {
		json_t *want = json_array_get(json_object_get(plan, "refs"), idx);

		snprintf(rn, sizeof(rn), "refs-%06zu.zst", idx);
		rc = job_path(j, jo_cl_js(plan, "dir"), rn, rp, sizeof(rp), &e);
		/* where the range's blocks are: its run read once before the merge reads it */
		if (!rc)
			rc = run_density(&dens, rp, (uint64_t)json_integer_value(want),
					 jo_cl_ju(plan, "next_chunk"), j->v->block_size, &e);
		if (!rc)
			rc = run_r_open(&rr, rp, (uint64_t)json_integer_value(want), &e);
	}
	if (!rc)
		rc = o->check.run(o->check.p, f->fp, &rs, idx, &dens, run_r_next, &rr,
				  jo_cl_ju(plan, "next_chunk"), jo_cl_ji(plan, "cutoff"), &c, &ls, sect,
				  &e);
	/* the run must have been read to its end, whatever the merge needed of it */
	while (!rc) {
		const void *rec;
		size_t len;

		rc = run_r_next(&rr, &rec, &len, &e);
		if (rc != 1)
			break;
		rc = 0;
	}
	run_r_close(&rr);
	leak_density_free(&dens);
	if (!rc && (fflush(f->fp) != 0 || ferror(f->fp)))
		rc = jo_err_set(&e, JO_EIO, "write %s: %s", path, strerror(errno));
	long bytes = !rc ? ftell(f->fp) : -1;
	if (!rc)
		rc = jo_file_commit(f, &e);
	jo_file_abort(f);
	leak_ranges_free(&rs);
	j->busy_s += jo_cl_mono_s() - t0;
	j->cur = -1;
	if (rc) {
		if (rc == JO_ECANCELED) {
			*err = e;
			(void)jo_lease_release(j->lease, j->m, &e);
			return rc;
		}
		return range_fail(j, t, idx, &e, err);
	}
	if (!jo_lease_valid(j->lease))
		return jo_err_set(err, JO_ECONFLICT, "range %06zu: the lease was lost", idx);
	d = counts_json(&c, &ls);
	if (d) {
		json_object_set_new(d, "file", json_string(name));
		json_object_set_new(d, "file_bytes", json_integer((json_int_t)bytes));
		json_object_set_new(d, "sect", json_pack("[I,I]", (json_int_t)sect[0],
							 (json_int_t)sect[1]));
		json_object_set_new(d, "by", json_string(o->worker));
		json_object_set_new(d, "at", json_integer(jo_cl_now_ms()));
		json_object_set_new(d, "seconds", json_real(jo_cl_mono_s() - t0));
	}
	struct jo_mut_rec_cond cond = { .task_id = t->id, .owner = o->worker, .complete = true };
	char key[32];

	snprintf(key, sizeof(key), "done:%06zu", idx);
	rc = d ? jo_cl_rec_put(j->m, j->ns, key, d, &cond, NULL, err)
	       : jo_err_set(err, JO_ENOMEM, "out of memory");
	json_decref(d);
	jo_lease_forget(j->lease);
	if (rc == JO_ECONFLICT) {
		/* another worker holds it now: its done record counts, not ours */
		jo_warn("range %06zu: the lease was lost before it was recorded; left to its holder",
			idx);
		jo_err_clear(err);
		return 0;
	}
	if (!rc) {
		j->res->mine++;
		j->listed += ls.listed;
		j->objects += c.objects;
	}
	return rc;
}

/* Tasks for the ranges that have neither a done record nor a pending task (a planner
 * that died after its plan, a range whose task was lost). */
static int add_missing(struct job *j, const struct view *v, struct jo_err *err)
{
	for (size_t i = 0; i < v->n; i++) {
		int idx = (int)i;
		int rc;

		if (v->done[i])
			continue;
		rc = jo_cl_add_tasks(j->m, j->ns, "range", 'r', &idx, 1, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int work_loop(struct job *j, struct jo_err *err)
{
	double waited_log = 0;
	int rc = 0;

	while (!rc) {
		struct jo_mut_task t = { 0 };
		struct view v;

		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "cancelled");
		rc = jo_lease_claim(j->lease, j->m, &t, err);
		if (rc == JO_ENOTFOUND) {
			int64_t total = 0, leased = 0;
			size_t done, failed;

			jo_err_clear(err);
			rc = jo_mut_task_count(j->m, j->ns, &total, &leased, err);
			if (!rc && total == 0) {
				/* no task left: the job is over, or a task is missing */
				rc = view_load(j->m, j->ns, &v, err);
				if (rc)
					break;
				view_counts(&v, &done, &failed);
				if (v.plan && done + failed == v.n) {
					view_release(&v);
					break;
				}
				if (v.plan) {
					rc = add_missing(j, &v, err);
					view_release(&v);
					continue;
				}
				view_release(&v);
			}
			if (rc)
				break;
			if (jo_cl_mono_s() - waited_log > 60) {
				jo_info("waiting: %s", total ? "every range is leased by another worker"
							     : "no plan yet");
				waited_log = jo_cl_mono_s();
			}
			(void)put_worker(j, "waiting");
			jo_cl_sleep_ms(j->o->lease_ms / 8 > 500 ? 500 : j->o->lease_ms / 8 < 100
									? 100 : j->o->lease_ms / 8);
			continue;
		}
		if (rc)
			break;
		int idx = jo_cl_task_index(t.items, 'r');
		json_t *plan = NULL, *done = NULL;
		char key[32];

		snprintf(key, sizeof(key), "done:%06d", idx);
		rc = jo_cl_rec_get(j->m, j->ns, "plan", &plan, err);
		if (!rc)
			rc = jo_cl_rec_get(j->m, j->ns, key, &done, err);
		if (!rc && (idx < 0 || !plan || strcmp(t.kind, "range") != 0))
			rc = jo_err_set(err, JO_EPROTO, "coordinator: task '%s' (%s) names no planned "
					"range", t.items ? t.items : "", t.kind);
		if (!rc && done)
			rc = jo_lease_complete(j->lease, j->m, err);  /* a task added twice */
		else if (!rc)
			rc = do_range(j, &t, (size_t)idx, plan, err);
		json_decref(plan);
		json_decref(done);
		jo_mut_task_release_mem(&t);
	}
	return rc;
}

/* ---- the report ------------------------------------------------------------------ */

/* Copy bytes [from, to) of a range's file to dst. */
static int copy_part(const char *path, int64_t from, int64_t to, FILE *dst, struct jo_err *err)
{
	char buf[1 << 16];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return jo_err_set(err, JO_EIO, "a range's report %s: %s", path, strerror(errno));
	if (lseek(fd, (off_t)from, SEEK_SET) != (off_t)from)
		rc = jo_err_set(err, JO_EIO, "seek %s: %s", path, strerror(errno));
	while (!rc && from < to) {
		size_t want = to - from < (int64_t)sizeof(buf) ? (size_t)(to - from) : sizeof(buf);
		ssize_t n = read(fd, buf, want);

		if (n < 0)
			rc = jo_err_set(err, JO_EIO, "read %s: %s", path, strerror(errno));
		else if (n == 0)
			rc = jo_err_set(err, JO_EPROTO, "%s is shorter than its done record says", path);
		else if (fwrite(buf, 1, (size_t)n, dst) != (size_t)n)
			rc = jo_err_set(err, JO_EIO, "write the report: %s", strerror(errno));
		from += n > 0 ? n : 0;
	}
	close(fd);
	return rc;
}

/*
 * The job's report, in the one-host report's order: every range's foreign
 * lines, then every range's merge lines, then every range's missing blocks
 * with their files (each part in range order, so in id order), each file
 * checked against the size its done record gives.
 */
static int write_report(struct job *j, const struct view *v, struct jo_err *err)
{
	const char *out = j->o->out;
	struct jo_file *f = NULL;
	FILE *dst = stdout;
	int rc = 0;

	for (size_t i = 0; i < v->n && !rc; i++) {
		const json_t *sect = json_object_get(v->done[i], "sect");
		char path[PATH_MAX + 128];
		struct stat st;
		int64_t a = json_integer_value(json_array_get(sect, 0));
		int64_t b = json_integer_value(json_array_get(sect, 1));
		int64_t n = jo_cl_ji(v->done[i], "file_bytes");

		rc = job_path(j, jo_cl_js(v->plan, "dir"), jo_cl_js(v->done[i], "file"), path,
			      sizeof(path), err);
		if (!rc && (json_array_size(sect) != 2 || a < 0 || b < a || n < b))
			rc = jo_err_set(err, JO_EPROTO, "coordinator: range %06zu's done record is "
					"malformed", i);
		if (!rc && lstat(path, &st) != 0)
			rc = jo_err_set(err, JO_EIO, "range %06zu's report %s: %s", i, path,
					strerror(errno));
		if (!rc && (!S_ISREG(st.st_mode) || st.st_size != n))
			rc = jo_err_set(err, JO_EPROTO, "range %06zu's report %s holds %lld bytes, its "
					"done record says %" PRId64, i, path, (long long)st.st_size, n);
	}
	if (rc)
		return rc;
	if (out) {
		rc = jo_file_create(&f, out, JO_FILE_PUBLIC, JO_FILE_STDIO, err);
		if (rc)
			return rc;
		dst = f->fp;
	}
	for (int part = 0; part < 3 && !rc; part++) {
		for (size_t i = 0; i < v->n && !rc; i++) {
			const json_t *sect = json_object_get(v->done[i], "sect");
			int64_t bound[4] = { 0, json_integer_value(json_array_get(sect, 0)),
					     json_integer_value(json_array_get(sect, 1)),
					     jo_cl_ji(v->done[i], "file_bytes") };
			char path[PATH_MAX + 128];

			if (bound[part] == bound[part + 1])
				continue;
			rc = job_path(j, jo_cl_js(v->plan, "dir"), jo_cl_js(v->done[i], "file"), path,
				      sizeof(path), err);
			if (!rc)
				rc = copy_part(path, bound[part], bound[part + 1], dst, err);
		}
	}
	if (!rc && fflush(dst) != 0)
		rc = jo_err_set(err, JO_EIO, "write the report: %s", strerror(errno));
	if (!rc && f)
		rc = jo_file_commit(f, err);
	jo_file_abort(f);
	if (!rc)
		j->res->report_written = true;
	return rc;
}

/* ---- status ---------------------------------------------------------------------- */

struct leases {
	json_t *arr;
	int64_t now;
	size_t pending;
};

static int lease_cb(const struct jo_mut_task *t, void *p)
{
	struct leases *l = p;

	if (t->expire_ms > l->now && t->owner[0])
		json_array_append_new(l->arr, json_pack("{s:i,s:s,s:I,s:I}", "range",
							jo_cl_task_index(t->items, 'r'), "owner",
							t->owner, "expires_in_ms",
							(json_int_t)(t->expire_ms - l->now), "attempt",
							(json_int_t)t->attempts));
	else
		l->pending++;
	return 0;
}

static int print_status(struct job *j, FILE *out, struct jo_err *err)
{
	struct leases ls = { .arr = json_array(), .now = jo_cl_now_ms() };
	struct view v = { 0 };
	json_t *o = NULL, *workers = json_array(), *fails = json_array();
	const char *wk;
	json_t *w;
	size_t done, failed;
	int rc = view_load(j->m, j->ns, &v, err);

	if (!rc)
		rc = jo_mut_task_scan(j->m, j->ns, lease_cb, &ls, err);
	if (rc)
		goto out;
	view_counts(&v, &done, &failed);
	json_object_foreach(v.workers, wk, w) {
		double busy = json_real_value(json_object_get(w, "busy_s"));

		json_array_append_new(workers, json_pack("{s:s,s:s,s:I,s:I,s:I,s:i,s:f,s:I}", "worker",
							 wk, "state", jo_cl_js(w, "state"), "ranges",
							 (json_int_t)jo_cl_ju(w, "ranges"), "listed",
							 (json_int_t)jo_cl_ju(w, "listed"), "objects",
							 (json_int_t)jo_cl_ju(w, "objects"), "range",
							 (int)jo_cl_ji(w, "range"), "objects_per_s",
							 busy > 0 ? (double)jo_cl_ju(w, "listed") / busy
								  : 0.0,
							 "seen_ago_ms",
							 (json_int_t)(ls.now - jo_cl_ji(w, "seen"))));
	}
	for (size_t i = 0; i < v.n; i++)
		if (v.fail[i] || (v.done[i] && jo_cl_jb(v.done[i], "failed")))
			json_array_append_new(fails, json_pack("{s:i,s:s,s:b}", "range", (int)i,
							       "error", jo_cl_js(v.fail[i] ? v.fail[i]
											 : v.done[i],
										 "error"),
							       "given_up", v.done[i] != NULL));
	const char *state = !v.plan ? "planning" : done + failed < v.n ? "checking"
				 : failed ? "incomplete" : "complete";
	o = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:I,s:I,s:I},s:I,s:O,s:O,s:O}", "type", "job", "ns",
		      j->ns, "state", state, "ranges", "planned", (json_int_t)v.n, "done",
		      (json_int_t)done, "leased", (json_int_t)json_array_size(ls.arr), "failed",
		      (json_int_t)failed, "pending", (json_int_t)ls.pending, "next_chunk",
		      (json_int_t)jo_cl_ju(v.plan, "next_chunk"), "leases", ls.arr, "failures", fails,
		      "workers", workers);
	if (!o) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (j->o->json) {
		char *txt = json_dumps(o, JSON_COMPACT);

		if (txt)
			fprintf(out, "%s\n", txt);
		free(txt);
		goto out;
	}
	fprintf(out, "leakcheck job %s: %s\n", j->ns, state);
	fprintf(out, "  ranges:   %zu planned, %zu done, %zu leased, %zu failed, %zu pending\n",
		v.n, done, json_array_size(ls.arr), failed, ls.pending);
	for (size_t i = 0; i < json_array_size(ls.arr); i++) {
		const json_t *e = json_array_get(ls.arr, i);

		fprintf(out, "  leased:   range %06d by %s (attempt %" PRId64 ", %.0fs left)\n",
			(int)jo_cl_ji(e, "range"), JO_ESC_TERM(jo_cl_js(e, "owner")),
			jo_cl_ji(e, "attempt"), (double)jo_cl_ji(e, "expires_in_ms") / 1000.0);
	}
	for (size_t i = 0; i < json_array_size(fails); i++) {
		const json_t *e = json_array_get(fails, i);

		fprintf(out, "  failed:   range %06d%s: %s\n", (int)jo_cl_ji(e, "range"),
			jo_cl_jb(e, "given_up") ? " (given up)" : "",
			JO_ESC_TERM(jo_cl_js(e, "error")));
	}
	for (size_t i = 0; i < json_array_size(workers); i++) {
		const json_t *e = json_array_get(workers, i);

		fprintf(out, "  worker:   %-28s %-8s %" PRIu64 " ranges, %" PRIu64 " listed, "
			"%.0f keys/s, seen %.0fs ago\n", JO_ESC_TERM(jo_cl_js(e, "worker")),
			JO_ESC_TERM(jo_cl_js(e, "state")), jo_cl_ju(e, "ranges"),
			jo_cl_ju(e, "listed"), json_real_value(json_object_get(e, "objects_per_s")),
			(double)jo_cl_ji(e, "seen_ago_ms") / 1000.0);
	}
out:
	json_decref(o);
	json_decref(ls.arr);
	json_decref(workers);
	json_decref(fails);
	view_release(&v);
	return rc;
}

/* ---- the entry point ------------------------------------------------------------- */

/* --work must not be inside the volume's own objects (file storage). */
static int check_work(struct job *j, struct jo_err *err)
{
	const struct jo_format *f = &j->v->fmt;
	char wr[PATH_MAX], br[PATH_MAX], vol[PATH_MAX + 300];
	size_t l;

	if (!realpath(j->o->work, wr))
		return jo_err_set(err, JO_ENOTFOUND, "--work %s: %s", j->o->work, strerror(errno));
	if (strcmp(f->storage, "file") != 0 || !f->bucket || !realpath(f->bucket, br))
		return 0;
	snprintf(vol, sizeof(vol), "%s/%s", br, f->name);
	l = strlen(vol);
	if (!strncmp(wr, vol, l) && (wr[l] == '/' || wr[l] == '\0'))
		return jo_err_set(err, JO_EINVAL, "--work %s is inside the volume's objects (%s): "
				  "a run there would be listed as foreign, or deleted", j->o->work,
				  vol);
	return 0;
}

int leak_cluster_run(struct jo_vol *v, const struct leak_cluster_opts *o,
		     struct leak_cluster_result *res, struct jo_err *err)
{
	struct job j = { .v = v, .o = o, .res = res, .cur = -1 };
	struct jo_lease_opts lo = { .owner = o->worker, .lease_ms = o->lease_ms };
	char what[PATH_MAX + 200], wr[PATH_MAX];
	struct view vw = { 0 };
	int rc;

	memset(res, 0, sizeof(*res));
	j.started_ms = jo_cl_now_ms();
	rc = check_work(&j, err);
	if (rc)
		return rc;
	if (!realpath(o->work, wr))
		return jo_err_set(err, JO_ENOTFOUND, "--work %s: %s", o->work, strerror(errno));
	snprintf(what, sizeof(what), "leakcheck\n%s\n%s", v->fmt.uuid ? v->fmt.uuid : "", wr);
	jo_cl_job_ns('l', what, false, j.ns);
	snprintf(res->ns, sizeof(res->ns), "%s", j.ns);
	if ((size_t)snprintf(j.dir, sizeof(j.dir), "%s/%s", wr, j.ns) >= sizeof(j.dir))
		return jo_err_set(err, JO_EINVAL, "--work: path too long");
	if (mkdir(j.dir, 0700) != 0 && errno != EEXIST)
		return jo_err_set(err, JO_EIO, "mkdir %s: %s", j.dir, strerror(errno));
	rc = jo_cl_open(&j.m, o->url, o->password, o->redis_password, j.ns, REGISTRY, err);
	if (rc)
		goto out;
	json_t *reg = json_pack("{s:s,s:s,s:s,s:I}", "ns", j.ns, "volume", v->fmt.name, "work", wr,
				"created", (json_int_t)jo_cl_now_ms());

	rc = jo_cl_registry_add(j.m, REGISTRY, j.ns, reg, err);
	json_decref(reg);
	if (rc)
		goto out;
	if (o->mode == LEAK_CL_STATUS) {
		rc = print_status(&j, stdout, err);
		goto out;
	}
	rc = view_load(j.m, j.ns, &vw, err);
	if (rc)
		goto out;
	if (o->mode == LEAK_CL_PLAN) {
		if (vw.plan)
			jo_info("job %s is planned already (%zu ranges)", j.ns, vw.n);
		else
			rc = do_plan(&j, err);
	} else if (o->mode == LEAK_CL_WORKER) {
		lo.ns = j.ns;
		rc = jo_lease_new(&j.lease, j.m, &lo, err);
		if (!rc) {
			(void)put_worker(&j, "working");
			rc = work_loop(&j, err);
			(void)put_worker(&j, rc == JO_ECANCELED ? "stopped" : rc ? "failed" : "done");
		}
	}
	view_release(&vw);
	if (rc)
		goto out;
	rc = view_load(j.m, j.ns, &vw, err);
	if (rc)
		goto out;
	view_totals(&vw, res);
	/* the job's report: only from every range, each complete */
	if (res->complete && o->mode != LEAK_CL_PLAN && (o->out || o->mode == LEAK_CL_REPORT))
		rc = write_report(&j, &vw, err);
out:
	view_release(&vw);
	jo_lease_free(j.lease);
	jo_meta_close(j.m);
	return rc;
}
