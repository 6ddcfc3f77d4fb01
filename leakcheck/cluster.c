/*
 * cluster.c: `jfsops leakcheck META-URL --cluster URL`: one leak check
 * shared by processes on any number of hosts through a coordinator
 * (common/cluster.h, meta_mut.h's tasks and records), with the guarantees
 * of the one-host run.
 *
 * --plan reads the slice-id counter before anything else, then names the
 * snapshot the parts share where the engine has one (etcd: a revision),
 * and cuts the metadata's chunks into scan parts (jo_meta_chunk_cuts: SQL
 * primary-key ranges, etcd key ranges, Redis one part), one task each;
 * with more than one, one more part reads the slice references and
 * delayed slices (do_plan says when). A --worker claims a part by lease,
 * scans it (leak_refs_scan_part) and writes its sorted references as a run
 * of its own name (exclusive create, renamed into place), one zstd frame
 * per cell of ids and an index (part_write); sdone:P names it, in the
 * transaction that completes the part's task, so a killed worker's file is
 * never read. Once every part is done, a worker cuts the ids into ranges
 * of about equal expected blocks from the sum of the parts' density maps
 * (do_cut; range.c: every key under chunks/ belongs to exactly one range;
 * every cut is a cell boundary) and records one task per range. A worker
 * then claims a range, lists that range's keys only, merges them with the
 * frames of its ids of every part (the merge of the one-host run, with the
 * plan's counter and age cutoff) and writes the range's report lines under
 * --work; the record done:R (its counters, the file and its size) is
 * written in the transaction that completes the range's task, so a range
 * is done once, by the holder of its lease. A part not scanned whole, or a
 * range whose listing or runs were not read whole, is retried, and after
 * --max-attempts recorded as failed: the job is then incomplete for good,
 * and no report is ever published from it.
 *
 * Records of the job's namespace ("l" + 15 hex digits of the volume's UUID
 * and --work):
 *   job          what the job is (volume, work directory)
 *   plan         the counter, the shared snapshot (0: none), the age
 *                cutoff, the chunk parts' bounds, the run directory
 *   sdone:P      scan part P done (its run: file, size, index), or
 *                {"failed": true} after --max-attempts
 *   sfail:P      scan part P's last failure
 *   cut          the ranges' bounds, once every part is done
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

#include <pthread.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/cluster.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/extsort.h"
#include "common/file.h"
#include "common/human.h"
#include "common/jfs/jfs.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/opt.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"

#define REGISTRY "lcjobs"

/* ---- the job --------------------------------------------------------------- */

/*
 * A worker process runs --ranges-in-flight slots (common/cluster.h), each
 * a struct job of its own (its coordinator connection, lease, volume
 * metadata connection for scan parts) pointing at the process's one (top),
 * whose counters its mutex guards. The slots list their ranges at once,
 * each with its share of --list-threads, so that one range's tail (its
 * last leaves, few listers busy) overlaps the next range's listing; the
 * process's listers stay --list-threads. (Listing one range at a time,
 * the next while the last merged, gained 5% on region: the merge is short,
 * the tails are not.)
 */
struct job {
	struct jo_vol *v;
	const struct leak_cluster_opts *o;
	struct leak_cluster_result *res;   /* top's fields: under top->mu in slots */
	struct jo_meta *m;       /* this slot's coordinator connection */
	struct jo_meta *vmeta;   /* this slot's volume metadata connection (scan parts) */
	struct jo_lease *lease;
	struct jo_cl_slot *slot; /* NULL outside a worker's slots */
	struct job *top;
	char ns[17];
	struct leak_work *w;     /* --work: the job's files are under NS/ */
	int64_t started_ms;
	int cur;                 /* this slot's range (-1: none) */
	/* top's: */
	pthread_mutex_t mu;
	double busy_s, busy_since; /* wall time with a task in some slot */
	int busy;
	uint64_t listed, objects, parts;
};

static int put_worker(struct job *j, const char *state)
{
	struct job *t = j->top;
	char key[160];
	struct jo_err e = { 0 };
	json_t *w;

	pthread_mutex_lock(&t->mu);
	w = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:i}", "state", state, "started",
		      (json_int_t)t->started_ms, "seen", (json_int_t)jo_cl_now_ms(),
		      "listed", (json_int_t)t->listed, "objects", (json_int_t)t->objects,
		      "ranges", (json_int_t)t->res->mine, "parts", (json_int_t)t->parts,
		      "busy_s", t->busy_s + (t->busy ? jo_cl_mono_s() - t->busy_since : 0), "range",
		      j->cur);
	pthread_mutex_unlock(&t->mu);
	snprintf(key, sizeof(key), "w:%s", j->o->worker);
	if (w)
		(void)jo_cl_rec_put(j->m, j->ns, key, w, NULL, NULL, &e);
	json_decref(w);
	return 0;
}

/* A slot starts (+1) or ends (-1) a task: the process's busy time is their union. */
static void busy_step(struct job *j, int d)
{
	struct job *t = j->top;

	pthread_mutex_lock(&t->mu);
	if (d > 0 && t->busy++ == 0)
		t->busy_since = jo_cl_mono_s();
	if (d < 0 && --t->busy == 0)
		t->busy_s += jo_cl_mono_s() - t->busy_since;
	pthread_mutex_unlock(&t->mu);
}


/* The cut's bounds as ranges. */
static int plan_ranges(const json_t *cut, struct leak_ranges *rs, struct jo_err *err)
{
	const json_t *b = json_object_get(cut, "bounds");
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

/* buf := NS/PLANDIR/name, the name under --work (JO_EINVAL when it does not fit). */
static int job_path(const struct job *j, const char *plandir, const char *name, char *buf,
		    size_t cap, struct jo_err *err)
{
	int n;

	/* names from the coordinator's records: one plain component each */
	if (!plandir[0] || plandir[0] == '.' || strchr(plandir, '/') || name[0] == '.' ||
	    strchr(name, '/'))
		return jo_err_set(err, JO_EPROTO, "coordinator: a malformed file name in the job's "
				  "records");
	n = snprintf(buf, cap, "%s/%s/%s", j->ns, plandir, name);
	if (n < 0 || (size_t)n >= cap)
		return jo_err_set(err, JO_EINVAL, "--work: path too long");
	return 0;
}

/* ---- the job's records at once ------------------------------------------------ */

struct view {
	json_t *plan, *cut;      /* cut: the ranges, once every scan part is done */
	json_t **done, **fail;   /* per range (NULL: none) */
	size_t n;
	json_t **sdone, **sfail; /* per scan part */
	size_t np;
	size_t nchunk;           /* of which chunk parts; with more than one, part nchunk
				  * is the extras (slice references, delayed slices) */
	json_t *workers;
};

static void view_release(struct view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		json_decref(v->done[i]);
		json_decref(v->fail[i]);
	}
	for (size_t i = 0; i < v->np; i++) {
		json_decref(v->sdone[i]);
		json_decref(v->sfail[i]);
	}
	free(v->done);
	free(v->fail);
	free(v->sdone);
	free(v->sfail);
	json_decref(v->plan);
	json_decref(v->cut);
	json_decref(v->workers);
	memset(v, 0, sizeof(*v));
}

/* The slot of a "done:R", "fail:R", "sdone:P" or "sfail:P" record (NULL: none). */
static json_t **view_slot(struct view *v, const char *key)
{
	bool part = key[0] == 's';
	const char *k = key + part;
	char *end;
	unsigned long i;

	if (strncmp(k, "done:", 5) && strncmp(k, "fail:", 5))
		return NULL;
	i = strtoul(k + 5, &end, 10);
	if (*end || i >= (part ? v->np : v->n))
		return NULL;
	if (part)
		return k[0] == 'd' ? &v->sdone[i] : &v->sfail[i];
	return k[0] == 'd' ? &v->done[i] : &v->fail[i];
}

static int view_cb(const char *key, const char *val, void *p)
{
	struct view *v = p;
	json_t *j = json_loads(val, 0, NULL);
	json_t **slot;

	if (!j)
		return 0;
	if (!strncmp(key, "w:", 2)) {
		json_object_set_new(v->workers, key + 2, j);
		return 0;
	}
	slot = view_slot(v, key);
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
	size_t np;
	int rc;

	memset(v, 0, sizeof(*v));
	rc = jo_cl_rec_get(m, ns, "plan", &v->plan, err);
	if (!rc)
		rc = jo_cl_rec_get(m, ns, "cut", &v->cut, err);
	if (rc)
		return rc;
	v->workers = json_object();
	np = json_array_size(json_object_get(v->plan, "parts"));
	v->nchunk = np > 1 ? np - 1 : 0;
	v->np = v->nchunk + (v->nchunk > 1);
	v->n = json_array_size(json_object_get(v->cut, "bounds"));
	v->done = calloc(v->n + 1, sizeof(*v->done));
	v->fail = calloc(v->n + 1, sizeof(*v->fail));
	v->sdone = calloc(v->np + 1, sizeof(*v->sdone));
	v->sfail = calloc(v->np + 1, sizeof(*v->sfail));
	if (!v->workers || !v->done || !v->fail || !v->sdone || !v->sfail) {
		view_release(v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	rc = jo_mut_rec_scan(m, ns, "", view_cb, v, err);
	if (rc)
		view_release(v);
	return rc;
}

/* Of n done records: those done, those failed (given up). */
static void count_done(json_t *const *d, size_t n, size_t *done, size_t *failed)
{
	*done = *failed = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] && jo_cl_jb(d[i], "failed"))
			(*failed)++;
		else if (d[i])
			(*done)++;
	}
}

/* Ranges done, failed (given up). */
static void view_counts(const struct view *v, size_t *done, size_t *failed)
{
	count_done(v->done, v->n, done, failed);
}

/* Every scan part done (none given up). */
static bool view_scanned(const struct view *v)
{
	size_t done, failed;

	count_done(v->sdone, v->np, &done, &failed);
	return v->plan && v->np && done == v->np;
}

/* Nothing more can happen: every range done or given up, or a scan part given up. */
static bool view_over(const struct view *v)
{
	size_t done, failed, sdone, sfailed;

	count_done(v->sdone, v->np, &sdone, &sfailed);
	view_counts(v, &done, &failed);
	return v->plan && (sfailed || (v->cut && done + failed == v->n));
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
	count_done(v->sdone, v->np, &res->parts_done, &res->parts_failed);
	res->ranges = v->n;
	res->parts = v->np;
	res->planned = v->plan != NULL;
	res->complete = v->plan && v->cut && !res->parts_failed && res->done == v->n;
	res->next_chunk = jo_cl_ju(v->plan, "next_chunk");
}

/* ---- planning ----------------------------------------------------------------- */

/*
 * The plan: the counter first (anything allocated after it is in flight),
 * then the snapshot the parts share where the engine has one (etcd: a
 * revision), then the cut of the metadata's chunks into scan parts (one
 * with Redis), recorded with one task per part. With more than one chunk
 * part, one more part scans the slice references and delayed slices: at
 * the shared snapshot as soon as planned, else once every chunk part is
 * done (references move from chunks to them, never back: such a move
 * while the parts are scanned is seen on one side or the other). The
 * workers scan the parts; the ranges are cut once every part is done
 * (do_cut).
 */
static int do_plan(struct job *j, struct jo_err *err)
{
	const struct leak_cluster_opts *o = j->o;
	struct jo_mut_rec_cond once = { .if_absent = true };
	size_t want = o->scan_parts ? o->scan_parts : 8, np = 0;
	uint64_t *cuts = calloc(want + 1, sizeof(*cuts));
	json_t *plan = NULL, *parts = json_array();
	int64_t next_chunk = 0, start = (int64_t)time(NULL), token = 0;
	char sub[32], path[PATH_MAX + 64];
	bool written = false;
	int rc;

	if (!cuts || !parts) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	rc = jo_meta_get_counter(j->v->meta, "nextChunk", &next_chunk, err);
	if (rc) {
		jo_err_wrap(err, "read nextChunk");
		goto out;
	}
	rc = jo_meta_snapshot_token(j->v->meta, &token, err);
	if (!rc)
		rc = jo_meta_chunk_cuts(j->v->meta, want, cuts, &np, err);
	if (rc)
		goto out;
	/* this planner's own directory: a second planner never writes into it */
	snprintf(sub, sizeof(sub), "p%08lx%04x", (unsigned long)start, (unsigned)getpid() & 0xffff);
	rc = job_path(j, sub, "", path, sizeof(path), err);
	if (rc)
		goto out;
	rc = leak_work_mkdir(j->w, path, false, err);
	if (rc)
		goto out;
	/* positions as decimal strings: they may pass a JSON integer's range */
	for (size_t i = 0; i <= np; i++) {
		char b[24];

		snprintf(b, sizeof(b), "%" PRIu64, cuts[i]);
		json_array_append_new(parts, json_string(b));
	}
	plan = json_pack("{s:i,s:I,s:I,s:I,s:s,s:s,s:I,s:O,s:I,s:b,s:I}", "v", 2, "next_chunk",
			 (json_int_t)next_chunk, "start", (json_int_t)start, "cutoff",
			 (json_int_t)(start - o->min_age), "dir", sub, "by", o->worker, "at",
			 (json_int_t)jo_cl_now_ms(), "parts", parts, "snapshot", (json_int_t)token,
			 "hash_prefix", j->v->fmt.hash_prefix, "want_ranges", (json_int_t)o->ranges);
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
	for (size_t i = 0; i < np + (np > 1 && token) && !rc; i++) {
		int idx = (int)i;

		rc = jo_cl_add_tasks(j->m, j->ns, "scan", 's', &idx, 1, err);
	}
	if (!rc)
		jo_info("job %s: the references in %zu scan parts%s below slice id %" PRId64 " (runs "
			"in %s/%s)", j->ns, np + (np > 1), token ? " of one snapshot" : "", next_chunk,
			leak_work_desc(j->w), path);
out:
	json_decref(plan);
	json_decref(parts);
	free(cuts);
	return rc;
}

/* A chunk part's bounds from the plan: [*from, *to). */
static int plan_part(const json_t *plan, size_t idx, uint64_t *from, uint64_t *to,
		     struct jo_err *err)
{
	const json_t *p = json_object_get(plan, "parts");
	const char *a = json_string_value(json_array_get(p, idx));
	const char *b = json_string_value(json_array_get(p, idx + 1));

	if (!a || !b || jo_parse_digits(a, strlen(a), from) || jo_parse_digits(b, strlen(b), to) ||
	    *from >= *to)
		return jo_err_set(err, JO_EPROTO, "coordinator: scan part %06zu is malformed", idx);
	return 0;
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
static int range_fail(struct job *j, const struct jo_mut_task *t, size_t idx, bool part,
		      const struct jo_err *why, struct jo_err *err)
{
	const char *pfx = part ? "s" : "";
	char key[32];
	json_t *prev = NULL, *f;
	int64_t fails;
	int rc;

	snprintf(key, sizeof(key), "%sfail:%06zu", pfx, idx);
	rc = jo_cl_rec_get(j->m, j->ns, key, &prev, err);
	if (rc)
		return rc;
	fails = jo_cl_ji(prev, "fails") + 1;
	json_decref(prev);
	jo_warn("%s %06zu failed (%" PRId64 " of %u): %s", part ? "scan part" : "range", idx, fails,
		j->o->max_attempts, why->msg);
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

	snprintf(key, sizeof(key), "%sdone:%06zu", pfx, idx);
	rc = d ? jo_cl_rec_put(j->m, j->ns, key, d, &c, NULL, err) : JO_ENOMEM;
	json_decref(d);
	jo_lease_forget(j->lease);
	return rc == JO_ECONFLICT ? (jo_err_clear(err), 0) : rc;
}

/* The name of scan part i's run (from its done record). */
static int part_path(const struct job *j, const struct view *v, size_t i, char *buf, size_t cap,
		     struct jo_err *err)
{
	if (!v->sdone[i] || jo_cl_jb(v->sdone[i], "failed"))
		return jo_err_set(err, JO_EPROTO, "coordinator: scan part %06zu is not done", i);
	return job_path(j, jo_cl_js(v->plan, "dir"), jo_cl_js(v->sdone[i], "file"), buf, cap, err);
}

/* What part P's done record says of its run. */
static void run_counts(const json_t *sd, struct leak_run_counts *c)
{
	c->bytes = jo_cl_ju(sd, "bytes");
	c->idx = jo_cl_ju(sd, "idx");
	c->frames = jo_cl_ju(sd, "frames");
	c->dens = jo_cl_ju(sd, "dens");
	c->records = jo_cl_ju(sd, "records");
}

/*
 * Range idx's references: every scan part's window of its ids, merged (src),
 * and the parts' density maps summed into dens (where the blocks are).
 */
static int range_refs(const struct job *j, const struct view *v, const struct leak_ranges *rs,
		      size_t idx, struct leak_parts_src *src, struct leak_density *dens,
		      struct jo_err *err)
{
	char path[PATH_MAX + 64];
	uint64_t lo = rs->b[idx], hi = rs->b[idx + 1];
	int rc;

	memset(src, 0, sizeof(*src));
	if (leak_density_init(dens, jo_cl_ju(v->plan, "next_chunk"), j->v->block_size))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	src->r = calloc(v->np + 1, sizeof(*src->r));
	src->rd = calloc(v->np + 1, sizeof(*src->rd));
	src->have = calloc(v->np + 1, sizeof(*src->have));
	src->cur = calloc(v->np + 1, sizeof(*src->cur));
	if (!src->r || !src->rd || !src->have || !src->cur)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	src->lo = lo;
	src->hi = hi;
	for (size_t i = 0; i < v->np; i++) {
		struct leak_part_idx pi;
		struct leak_run_counts c;
		uint64_t off, len, recs;

		src->n = i + 1;
		run_counts(v->sdone[i], &c);
		rc = part_path(j, v, i, path, sizeof(path), err);
		if (!rc)
			rc = leak_work_ropen(j->w, path, &src->rd[i], err);
		if (!rc)
			rc = leak_part_load(src->rd[i], &c, &pi, dens, err);
		if (rc)
			return rc;
		leak_part_window(&pi, leak_range_step(dens), lo, hi, &off, &len, &recs);
		free(pi.fr);
		rc = leak_run_r_open(&src->r[i], src->rd[i], off, len, recs, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int do_range(struct job *j, const struct jo_mut_task *t, size_t idx, const struct view *v,
		    struct jo_err *err)
{
	const struct leak_cluster_opts *o = j->o;
	struct leak_ranges rs = { 0 };
	struct leak_counts c = { 0 };
	struct leak_list_stats ls = { 0 };
	struct leak_parts_src src = { 0 };
	struct jo_file *f = NULL;
	struct jo_err e = { 0 };
	char path[PATH_MAX + 64], name[96];
	double t0 = jo_cl_mono_s();
	json_t *d = NULL;
	const json_t *plan = v->plan;
	const struct leak_range_ctx rctx = { .meta = j->vmeta,
					     .share = o->in_flight ? o->in_flight : 2 };
	long sect[2] = { -1, -1 };
	struct leak_density dens = { 0 };
	int rc;

	rc = plan_ranges(v->cut, &rs, err);
	if (!rc && (idx >= rs.n || !view_scanned(v)))
		rc = jo_err_set(err, JO_EPROTO, "coordinator: task r%06zu names no planned range",
				idx);
	if (rc) {
		leak_ranges_free(&rs);
		return rc;
	}
	j->cur = (int)idx;
	(void)put_worker(j, "working");
	/* the report lines of this attempt: a name of its own */
	snprintf(name, sizeof(name), "out-%06zu-%" PRId64 "-%08lx.jsonl", idx, t->attempts,
		 (unsigned long)jo_cl_now_ms() ^ (unsigned long)getpid());
	rc = job_path(j, jo_cl_js(plan, "dir"), name, path, sizeof(path), &e);
	if (!rc)
		rc = leak_work_create(j->w, path, JO_FILE_STDIO, &f, &e);
	if (!rc)
		rc = range_refs(j, v, &rs, idx, &src, &dens, &e);
	if (!rc)
		rc = o->check.run(o->check.p, f->fp, &rs, idx, &dens, leak_parts_next, &src,
				  jo_cl_ju(plan, "next_chunk"), jo_cl_ji(plan, "cutoff"), &c, &ls, sect,
				  &rctx, &e);
	/* every part's window must have been read to its end, whatever the merge needed */
	while (!rc) {
		const void *rec;
		size_t len;

		rc = leak_parts_next(&src, &rec, &len, &e);
		if (rc != 1)
			break;
		rc = 0;
	}
	leak_parts_free(&src);
	leak_density_free(&dens);
	if (!rc && (fflush(f->fp) != 0 || ferror(f->fp)))
		rc = jo_err_set(&e, JO_EIO, "write %s: %s", path, strerror(errno));
	long bytes = !rc ? ftell(f->fp) : -1;
	if (!rc)
		rc = leak_work_commit(j->w, path, f, &e);
	jo_file_abort(f);
	leak_ranges_free(&rs);
	j->cur = -1;
	if (rc) {
		if (rc == JO_ECANCELED) {
			*err = e;
			(void)jo_lease_release(j->lease, j->m, &e);
			return rc;
		}
		return range_fail(j, t, idx, false, &e, err);
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
		pthread_mutex_lock(&j->top->mu);
		j->res->mine++;
		j->top->listed += ls.listed;
		j->top->objects += c.objects;
		pthread_mutex_unlock(&j->top->mu);
	}
	return rc;
}

/*
 * Scan part idx (its chunks, or the extras, or with one part both) at the
 * plan's shared snapshot if any, sorted into a run of its own name under
 * the plan's directory, published by rename and recorded in sdone:P in the
 * transaction that completes the part's task. A killed worker's run is
 * never renamed into place, or never recorded: only the run a done record
 * names is read.
 */
static int do_scan(struct job *j, const struct jo_mut_task *t, size_t idx, const struct view *v,
		   struct jo_err *err)
{
	const struct leak_cluster_opts *o = j->o;
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct jo_mut_rec_cond cond = { .task_id = t->id, .owner = o->worker, .complete = true };
	struct jo_xsort *xs = NULL;
	struct leak_density dens = { 0 };
	struct leak_ref_stats st = { 0 };
	struct leak_run_w w = { 0 };
	struct leak_run_counts rc_ = { 0 };
	struct jo_err e = { 0 };
	uint64_t from = 0, to = 0;
	char name[96], path[PATH_MAX + 64], key[32];
	double t0 = jo_cl_mono_s();
	json_t *d = json_object();
	/* one part: everything; else the chunk parts, then the extras */
	unsigned what = v->np == 1 ? LEAK_SCAN_CHUNKS | LEAK_SCAN_EXTRAS
			: idx < v->nchunk ? LEAK_SCAN_CHUNKS : LEAK_SCAN_EXTRAS;
	int rc;

	rc = !d ? jo_err_set(err, JO_ENOMEM, "out of memory")
		: (what & LEAK_SCAN_CHUNKS) ? plan_part(v->plan, idx, &from, &to, err) : 0;
	if (rc) {
		json_decref(d);
		return rc;
	}
	j->cur = -1;
	(void)put_worker(j, "scanning");
	snprintf(name, sizeof(name), "scan-%06zu-%" PRId64 "-%08lx.run", idx, t->attempts,
		 (unsigned long)jo_cl_now_ms() ^ (unsigned long)getpid());
	xo.mem_limit = o->mem;
	xo.tmp_dir = o->tmp;
	xo.threads = 2;
	rc = job_path(j, jo_cl_js(v->plan, "dir"), name, path, sizeof(path), &e);
	if (!rc && leak_density_init(&dens, jo_cl_ju(v->plan, "next_chunk"), j->v->block_size))
		rc = jo_err_set(&e, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = jo_xsort_new(&xs, &xo, &e);
	if (!rc)
		rc = leak_refs_scan_part(j->vmeta, jo_cl_ji(v->plan, "snapshot"), from, to, what,
					 xs, &dens, &st, &e);
	if (!rc)
		rc = jo_xsort_finish(xs, &e);
	if (!rc)
		rc = leak_run_w_open(&w, j->w, path, &e);
	if (!rc)
		rc = leak_part_write(&w, xs, &dens, &rc_, &e);
	rc = leak_run_w_close(&w, rc == 0, rc ? NULL : &e) ? (rc ? rc : e.code) : rc;
	jo_xsort_free(xs);
	leak_density_free(&dens);
	if (rc == JO_ECANCELED) {
		json_decref(d);
		*err = e;
		(void)jo_lease_release(j->lease, j->m, &e);
		return rc;
	}
	if (rc) {
		json_decref(d);
		return range_fail(j, t, idx, true, &e, err);
	}
	if (!jo_lease_valid(j->lease)) {
		json_decref(d);
		return jo_err_set(err, JO_ECONFLICT, "scan part %06zu: the lease was lost", idx);
	}
	json_object_set_new(d, "file", json_string(name));
	json_object_set_new(d, "bytes", json_integer((json_int_t)rc_.bytes));
	json_object_set_new(d, "idx", json_integer((json_int_t)rc_.idx));
	json_object_set_new(d, "frames", json_integer((json_int_t)rc_.frames));
	json_object_set_new(d, "dens", json_integer((json_int_t)rc_.dens));
	json_object_set_new(d, "records", json_integer((json_int_t)rc_.records));
	json_object_set_new(d, "chunks", json_integer((json_int_t)st.chunks));
	json_object_set_new(d, "by", json_string(o->worker));
	json_object_set_new(d, "at", json_integer(jo_cl_now_ms()));
	json_object_set_new(d, "seconds", json_real(jo_cl_mono_s() - t0));
	snprintf(key, sizeof(key), "sdone:%06zu", idx);
	rc = jo_cl_rec_put(j->m, j->ns, key, d, &cond, NULL, err);
	json_decref(d);
	jo_lease_forget(j->lease);
	if (rc == JO_ECONFLICT) {
		jo_warn("scan part %06zu: the lease was lost before it was recorded; left to its "
			"holder", idx);
		jo_err_clear(err);
		return 0;
	}
	if (!rc) {
		pthread_mutex_lock(&j->top->mu);
		j->top->parts++;
		j->res->parts_mine++;
		pthread_mutex_unlock(&j->top->mu);
	}
	return rc;
}

/*
 * Every scan part is done: cut the ids into ranges from the parts' density
 * maps (their sum is the one-host planner's map) and record them once
 * ("cut", written if absent: every worker that gets here cuts the same), then
 * one task per range.
 */
static int do_cut(struct job *j, const struct view *v, struct jo_err *err)
{
	struct jo_mut_rec_cond once = { .if_absent = true };
	struct leak_density dens = { 0 };
	struct leak_ranges ranges = { 0 };
	uint64_t next_chunk = jo_cl_ju(v->plan, "next_chunk"), refs = 0, step;
	json_t *cut = NULL, *bounds = json_array();
	char path[PATH_MAX + 64];
	bool written = false;
	size_t want;
	int rc = 0;

	if (!bounds || leak_density_init(&dens, next_chunk, j->v->block_size))
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < v->np && !rc; i++) {
		struct leak_part_idx pi;
		struct leak_run_counts c;
		struct leak_work_rd *rd = NULL;

		run_counts(v->sdone[i], &c);
		rc = part_path(j, v, i, path, sizeof(path), err);
		if (!rc)
			rc = leak_work_ropen(j->w, path, &rd, err);
		if (!rc)
			rc = leak_part_load(rd, &c, &pi, &dens, err);
		if (!rc)
			free(pi.fr);
		leak_work_rclose(rd);
		refs += jo_cl_ju(v->sdone[i], "records");
	}
	if (rc)
		goto out;
	/* default: enough ranges for a few workers, more on a big volume */
	want = jo_cl_ju(v->plan, "want_ranges") ? (size_t)jo_cl_ju(v->plan, "want_ranges")
						 : (size_t)(dens.total / 200000 + 1);
	if (!jo_cl_ju(v->plan, "want_ranges") && want < 16)
		want = 16;
	if (want > 100000)
		want = 100000;
	rc = leak_range_cut(&dens, next_chunk, want, jo_cl_jb(v->plan, "hash_prefix"), &ranges);
	if (rc) {
		rc = jo_err_set(err, rc, "out of memory");
		goto out;
	}
	step = leak_range_step(&dens);
	for (size_t i = 0; i < ranges.n && !rc; i++) {
		if (ranges.b[i] % step)
			rc = jo_err_set(err, JO_EPROTO, "a range cut at %" PRIu64 " is not a cell "
					"boundary", ranges.b[i]);
		json_array_append_new(bounds, json_integer((json_int_t)ranges.b[i]));
	}
	if (!rc && !(cut = json_pack("{s:O,s:I,s:s,s:I}", "bounds", bounds, "references",
				     (json_int_t)refs, "by", j->o->worker, "at",
				     (json_int_t)jo_cl_now_ms())))
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = jo_cl_rec_put(j->m, j->ns, "cut", cut, &once, &written, err);
	for (size_t i = 0; written && i < ranges.n && !rc; i++) {
		int idx = (int)i;

		rc = jo_cl_add_tasks(j->m, j->ns, "range", 'r', &idx, 1, err);
	}
	if (!rc && written)
		jo_info("job %s: %zu scan parts done (%" PRIu64 " references): %zu ranges", j->ns,
			v->np, refs, ranges.n);
out:
	json_decref(cut);
	json_decref(bounds);
	leak_density_free(&dens);
	leak_ranges_free(&ranges);
	return rc;
}

/*
 * No task is pending: tasks for the scan parts, or once they are done the
 * cut, or for the ranges, that have neither a done record nor a task (a
 * planner or a cutter that died half-way, a task that was lost; the
 * extras part, whose task waits for the chunk parts).
 */
static int add_missing(struct job *j, const struct view *v, struct jo_err *err)
{
	bool cut = v->cut != NULL;
	size_t n = cut ? v->n : v->np, cdone = 0, cfailed = 0;

	if (!cut && view_scanned(v))
		return do_cut(j, v, err);
	count_done(v->sdone, v->nchunk, &cdone, &cfailed);
	for (size_t i = 0; i < n; i++) {
		int idx = (int)i;
		int rc;

		if (cut ? v->done[i] != NULL : v->sdone[i] != NULL)
			continue;
		/* the extras after every chunk part, when each part reads a snapshot of its own */
		if (!cut && v->np > 1 && i == v->nchunk && !jo_cl_ji(v->plan, "snapshot") &&
		    cdone < v->nchunk)
			continue;
		rc = jo_cl_add_tasks(j->m, j->ns, cut ? "range" : "scan", cut ? 'r' : 's', &idx, 1,
				     err);
		if (rc)
			return rc;
	}
	return 0;
}

static int work_loop(struct job *j, struct jo_err *err)
{
	double waited_log = 0;
	int64_t idle_ms = 100;   /* the next wait when nothing is claimable */
	int rc = 0;

	while (!rc) {
		struct jo_mut_task t = { 0 };
		struct view v;

		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "cancelled");
		if (jo_cl_slot_stopping(j->slot))
			break;  /* another slot failed: its error is the run's */
		rc = jo_lease_claim(j->lease, j->m, &t, err);
		if (rc == JO_ENOTFOUND) {
			int64_t total = 0, leased = 0;

			jo_err_clear(err);
			rc = jo_mut_task_count(j->m, j->ns, &total, &leased, err);
			if (!rc && total == 0) {
				/* no task left: the job is over, or a task is missing */
				rc = view_load(j->m, j->ns, &v, err);
				if (rc)
					break;
				if (view_over(&v)) {
					view_release(&v);
					break;
				}
				if (v.plan) {
					rc = add_missing(j, &v, err);
					view_release(&v);
					jo_cl_slot_kick(j->slot);
					continue;
				}
				view_release(&v);
			}
			if (rc)
				break;
			if (jo_cl_mono_s() - waited_log > 60) {
				jo_info("waiting: %s", total ? "every task is leased by another worker"
							     : "no plan yet");
				waited_log = jo_cl_mono_s();
			}
			pthread_mutex_lock(&j->top->mu);
			bool idle = j->top->busy == 0;
			pthread_mutex_unlock(&j->top->mu);
			if (idle)
				(void)put_worker(j, "waiting");
			/* a peer slot's task ending wakes this one at once; else 100 ms
			 * first, then longer, up to an eighth of a lease (100 ms .. 500 ms) */
			jo_cl_slot_wait(j->slot, idle_ms);
			idle_ms = idle_ms * 2 > j->o->lease_ms / 8 ? j->o->lease_ms / 8 : idle_ms * 2;
			idle_ms = idle_ms > 500 ? 500 : idle_ms < 100 ? 100 : idle_ms;
			continue;
		}
		if (rc)
			break;
		idle_ms = 100;
		bool scan = strcmp(t.kind, "scan") == 0;
		int idx = jo_cl_task_index(t.items, scan ? 's' : 'r');
		char key[32];

		busy_step(j, 1);
		snprintf(key, sizeof(key), "%sdone:%06d", scan ? "s" : "", idx);
		rc = view_load(j->m, j->ns, &v, err);
		if (!rc) {
			if (idx < 0 || !v.plan || (!scan && strcmp(t.kind, "range") != 0) ||
			    (size_t)idx >= (scan ? v.np : v.n))
				rc = jo_err_set(err, JO_EPROTO, "coordinator: task '%s' (%s) names no "
						"planned %s", t.items ? t.items : "", t.kind,
						scan ? "scan part" : "range");
			else if (*view_slot(&v, key))
				rc = jo_lease_complete(j->lease, j->m, err);  /* a task added twice */
			else if (scan)
				rc = do_scan(j, &t, (size_t)idx, &v, err);
			else
				rc = do_range(j, &t, (size_t)idx, &v, err);
			view_release(&v);
		}
		busy_step(j, -1);
		jo_mut_task_release_mem(&t);
		jo_cl_slot_kick(j->slot);
	}
	return rc;
}

/* One slot of a worker process: the work loop on connections and a lease of its own. */
static int slot_main(struct jo_cl_slot *s, struct jo_err *err)
{
	struct job *top = s->arg;
	struct job j = { .v = top->v, .o = top->o, .res = top->res, .m = s->m,
			 .vmeta = top->v->meta, .lease = s->lease, .slot = s, .top = top,
			 .w = top->w, .started_ms = top->started_ms, .cur = -1 };
	int rc = 0;

	snprintf(j.ns, sizeof(j.ns), "%s", top->ns);
	/* slot 0 runs on the caller's thread: it keeps the volume's own connection */
	if (s->index)
		rc = jo_meta_dup(top->v->meta, &j.vmeta, err);
	if (!rc)
		rc = work_loop(&j, err);
	if (s->index)
		jo_meta_close(j.vmeta);
	return rc;
}

/* ---- the report ------------------------------------------------------------------ */

/* Copy bytes [from, to) of a range's file rel to dst. */
static int copy_part(struct leak_work *w, const char *rel, uint64_t from, uint64_t to, FILE *dst,
		     struct jo_err *err)
{
	struct leak_work_rd *rd = NULL;
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	int rc = buf ? leak_work_ropen(w, rel, &rd, err) : jo_err_set(err, JO_ENOMEM, "out of memory");

	while (!rc && from < to) {
		size_t want = to - from < cap ? (size_t)(to - from) : cap, n = 0;

		rc = leak_work_pread(rd, buf, want, from, &n, err);
		if (!rc && n == 0)
			rc = jo_err_set(err, JO_EPROTO, "%s is shorter than its done record says",
					leak_work_rname(rd));
		else if (!rc && fwrite(buf, 1, n, dst) != n)
			rc = jo_err_set(err, JO_EIO, "write the report: %s", strerror(errno));
		from += n;
	}
	leak_work_rclose(rd);
	free(buf);
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
		struct leak_work_rd *rd = NULL;
		int64_t a = json_integer_value(json_array_get(sect, 0));
		int64_t b = json_integer_value(json_array_get(sect, 1));
		int64_t n = jo_cl_ji(v->done[i], "file_bytes");

		rc = job_path(j, jo_cl_js(v->plan, "dir"), jo_cl_js(v->done[i], "file"), path,
			      sizeof(path), err);
		if (!rc && (json_array_size(sect) != 2 || a < 0 || b < a || n < b))
			rc = jo_err_set(err, JO_EPROTO, "coordinator: range %06zu's done record is "
					"malformed", i);
		if (!rc)
			rc = leak_work_ropen(j->w, path, &rd, err);
		if (!rc && leak_work_rsize(rd) != (uint64_t)n)
			rc = jo_err_set(err, JO_EPROTO, "range %06zu's report %s holds %" PRIu64 " bytes, "
					"its done record says %" PRId64, i, leak_work_rname(rd),
					leak_work_rsize(rd), n);
		leak_work_rclose(rd);
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
				rc = copy_part(j->w, path, (uint64_t)bound[part], (uint64_t)bound[part + 1],
					       dst, err);
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

	bool scan = strcmp(t->kind, "scan") == 0;

	if (t->expire_ms > l->now && t->owner[0])
		json_array_append_new(l->arr, json_pack("{s:i,s:s,s:s,s:I,s:I}", scan ? "part" : "range",
							jo_cl_task_index(t->items, scan ? 's' : 'r'),
							"kind", t->kind, "owner",
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
	json_t *o = NULL, *workers = json_array(), *fails = json_array(), *scanned = json_array();
	const char *wk;
	json_t *w;
	size_t done, failed, sdone, sfailed;
	int rc = view_load(j->m, j->ns, &v, err);

	if (!rc)
		rc = jo_mut_task_scan(j->m, j->ns, lease_cb, &ls, err);
	if (rc)
		goto out;
	view_counts(&v, &done, &failed);
	count_done(v.sdone, v.np, &sdone, &sfailed);
	json_object_foreach(v.workers, wk, w) {
		double busy = json_real_value(json_object_get(w, "busy_s"));

		json_array_append_new(workers, json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:i,s:f,s:I}",
							 "worker", wk, "state", jo_cl_js(w, "state"),
							 "parts", (json_int_t)jo_cl_ju(w, "parts"),
							 "ranges", (json_int_t)jo_cl_ju(w, "ranges"),
							 "listed",
							 (json_int_t)jo_cl_ju(w, "listed"), "objects",
							 (json_int_t)jo_cl_ju(w, "objects"), "range",
							 (int)jo_cl_ji(w, "range"), "objects_per_s",
							 busy > 0 ? (double)jo_cl_ju(w, "listed") / busy
								  : 0.0,
							 "seen_ago_ms",
							 (json_int_t)(ls.now - jo_cl_ji(w, "seen"))));
	}
	for (int part = 1; part >= 0; part--) {
		json_t **fl = part ? v.sfail : v.fail, **dn = part ? v.sdone : v.done;

		for (size_t i = 0; i < (part ? v.np : v.n); i++)
			if (fl[i] || (dn[i] && jo_cl_jb(dn[i], "failed")))
				json_array_append_new(fails, json_pack("{s:i,s:s,s:s,s:b}",
								       part ? "part" : "range", (int)i,
								       "error", jo_cl_js(fl[i] ? fl[i]
											 : dn[i],
										 "error"),
								       "what", part ? "scan part" : "range",
								       "given_up", dn[i] != NULL));
	}
	for (size_t i = 0; i < v.np; i++)
		if (v.sdone[i] && !jo_cl_jb(v.sdone[i], "failed"))
			json_array_append_new(scanned, json_pack("{s:i,s:s,s:I,s:I}", "part", (int)i,
								 "by", jo_cl_js(v.sdone[i], "by"),
								 "chunks",
								 (json_int_t)jo_cl_ju(v.sdone[i], "chunks"),
								 "references",
								 (json_int_t)jo_cl_ju(v.sdone[i],
										      "records")));
	const char *state = !v.plan ? "planning" : sfailed ? "incomplete"
			  : !v.cut ? "scanning" : done + failed < v.n ? "checking"
			  : failed ? "incomplete" : "complete";
	o = json_pack("{s:s,s:s,s:s,s:{s:I,s:I,s:I,s:O},s:{s:I,s:I,s:I,s:I,s:I},s:I,s:O,s:O,s:O}",
		      "type", "job", "ns", j->ns, "state", state, "parts", "planned",
		      (json_int_t)v.np, "done", (json_int_t)sdone, "failed", (json_int_t)sfailed,
		      "scanned", scanned,
		      "ranges", "planned", (json_int_t)v.n, "done",
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
	fprintf(out, "  scan:     %zu parts, %zu done, %zu failed\n", v.np, sdone, sfailed);
	fprintf(out, "  ranges:   %zu planned, %zu done, %zu leased, %zu failed, %zu pending\n",
		v.n, done, json_array_size(ls.arr), failed, ls.pending);
	for (size_t i = 0; i < json_array_size(ls.arr); i++) {
		const json_t *e = json_array_get(ls.arr, i);
		bool part = json_object_get(e, "part") != NULL;

		fprintf(out, "  leased:   %s %06d by %s (attempt %" PRId64 ", %.0fs left)\n",
			part ? "scan part" : "range", (int)jo_cl_ji(e, part ? "part" : "range"),
			JO_ESC_TERM(jo_cl_js(e, "owner")), jo_cl_ji(e, "attempt"),
			(double)jo_cl_ji(e, "expires_in_ms") / 1000.0);
	}
	for (size_t i = 0; i < json_array_size(fails); i++) {
		const json_t *e = json_array_get(fails, i);
		bool part = json_object_get(e, "part") != NULL;

		fprintf(out, "  failed:   %s %06d%s: %s\n", jo_cl_js(e, "what"),
			(int)jo_cl_ji(e, part ? "part" : "range"),
			jo_cl_jb(e, "given_up") ? " (given up)" : "",
			JO_ESC_TERM(jo_cl_js(e, "error")));
	}
	for (size_t i = 0; i < json_array_size(workers); i++) {
		const json_t *e = json_array_get(workers, i);

		fprintf(out, "  worker:   %-28s %-8s %" PRIu64 " parts, %" PRIu64 " ranges, %" PRIu64
			" listed, %.0f keys/s, seen %.0fs ago\n", JO_ESC_TERM(jo_cl_js(e, "worker")),
			JO_ESC_TERM(jo_cl_js(e, "state")), jo_cl_ju(e, "parts"), jo_cl_ju(e, "ranges"),
			jo_cl_ju(e, "listed"), json_real_value(json_object_get(e, "objects_per_s")),
			(double)jo_cl_ji(e, "seen_ago_ms") / 1000.0);
	}
out:
	json_decref(o);
	json_decref(ls.arr);
	json_decref(workers);
	json_decref(fails);
	json_decref(scanned);
	view_release(&v);
	return rc;
}

/* ---- the entry point ------------------------------------------------------------- */

int leak_cluster_run(struct jo_vol *v, const struct leak_cluster_opts *o,
		     struct leak_cluster_result *res, struct jo_err *err)
{
	struct job j = { .v = v, .o = o, .res = res, .cur = -1 };
	struct jo_lease_opts lo = { .owner = o->worker, .lease_ms = o->lease_ms };
	char what[PATH_MAX + 900];
	struct view vw = { 0 };
	int rc;

	memset(res, 0, sizeof(*res));
	pthread_mutex_init(&j.mu, NULL);
	j.top = &j;
	j.vmeta = v->meta;
	j.started_ms = jo_cl_now_ms();
	rc = leak_work_open(&j.w, o->work, o->config, o->tmp, err);
	if (!rc)
		rc = leak_work_check(j.w, v, err);
	if (rc)
		goto out;
	/* a directory keeps the name it always had: its real path */
	snprintf(what, sizeof(what), "leakcheck\n%s\n%s", v->fmt.uuid ? v->fmt.uuid : "",
		 leak_work_desc(j.w));
	jo_cl_job_ns('l', what, false, j.ns);
	snprintf(res->ns, sizeof(res->ns), "%s", j.ns);
	rc = leak_work_mkdir(j.w, j.ns, true, err);
	if (rc)
		goto out;
	rc = jo_cl_open(&j.m, o->url, o->password, o->redis_password, j.ns, REGISTRY, err);
	if (rc)
		goto out;
	json_t *reg = json_pack("{s:s,s:s,s:s,s:I}", "ns", j.ns, "volume", v->fmt.name, "work",
				leak_work_desc(j.w),
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
	if (!rc && vw.plan && jo_cl_ji(vw.plan, "v") != 2)
		rc = jo_err_set(err, JO_EPROTO, "coordinator: job %s was planned by another version "
				"of jfsops (plan v%" PRId64 "): give this check a new --work", j.ns,
				jo_cl_ji(vw.plan, "v"));
	if (rc)
		goto out;
	if (o->mode == LEAK_CL_PLAN) {
		if (vw.plan)
			jo_info("job %s is planned already (%zu ranges)", j.ns, vw.n);
		else
			rc = do_plan(&j, err);
	} else if (o->mode == LEAK_CL_WORKER) {
		lo.ns = j.ns;
		(void)put_worker(&j, "working");
		rc = jo_cl_slots_run(j.m, &lo, o->in_flight ? (int)o->in_flight : 2, slot_main, &j,
				     err);
		(void)put_worker(&j, rc == JO_ECANCELED ? "stopped" : rc ? "failed" : "done");
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
	jo_meta_close(j.m);
	leak_work_close(j.w);
	pthread_mutex_destroy(&j.mu);
	return rc;
}
