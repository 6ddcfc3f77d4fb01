/*
 * cluster.c: `jfsops sync --cluster URL`: one sync job shared by any number
 * of processes on any number of hosts through a coordinator they already
 * run (Redis, a SQL server: the lease framework's task records, in a
 * namespace of the job's own, plus records beside them, meta_mut.h).
 *
 * A job is named by a hash of what makes it (SRC, DST, filters, options) or
 * by --id NAME; its namespace is "s" + 15 hex digits of that hash, so two
 * jobs never share a task or a record. Its records:
 *   job          what the job is (the fingerprint a second --id NAME must match)
 *   plan         written once, with the planner's task completed in the same
 *                transaction: how many ranges, the job's mark, the orders
 *   cuts, def:R  the planned ranges (boundaries, hex), before any range task
 *   pos:R        a range's resume position and counters, written only by the
 *                holder of the range's lease: a checkpoint (nothing in flight,
 *                every key up to pos done), whether copies may have gone on
 *                past it unrecorded (a later attempt counts those it finds
 *                carrying the job's mark: no copy is counted twice or lost),
 *                and the multipart uploads open (a later attempt aborts them)
 *   done:R       the range done (or given up after --max-attempts), written
 *                in the transaction that completes its task: never redone
 *   fail:R       its last failure
 *   gate         phase 2 decided, once, from every range's counters: delete
 *                or refuse (--max-delete, a source that listed nothing, ...)
 *   ddone:R      a range's deletions done
 *   end          the job finished (ok, failed, refused)
 *   w:WORKER     a worker's counters (status, throughput)
 * Tasks: "plan" (one), "range" rNNNNNN, "del" dNNNNNN. Any worker that
 * finds no task left advances the job (adds what is missing, decides the
 * gate, writes end); every step is safe to repeat and to race.
 */
#include "sync/sync.h"

#include "common/cancel.h"
#include "common/cluster.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/human.h"
#include "common/esc.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "common/object/object.h"
#include "common/pct.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REGISTRY "syncjobs"

void jo_sync_job_ns(const char *what, bool named, char out[17])
{
	jo_cl_job_ns('s', what, named, out);
}

/* ---- keys as hex, records as JSON ------------------------------------------ */

static char *hex_of(const char *s)
{
	size_t n = strlen(s);
	char *h = malloc(2 * n + 1);

	if (!h)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		h[2 * i] = "0123456789abcdef"[(unsigned char)s[i] >> 4];
		h[2 * i + 1] = "0123456789abcdef"[(unsigned char)s[i] & 15];
	}
	h[2 * n] = '\0';
	return h;
}

/* NULL for JSON null or a malformed value (*bad set). */
static char *unhex(const json_t *v, bool *bad)
{
	const char *h = json_string_value(v);
	size_t n;
	char *s;

	if (!v || json_is_null(v))
		return NULL;
	if (!h || (n = strlen(h)) % 2) {
		*bad = true;
		return NULL;
	}
	s = malloc(n / 2 + 1);
	if (!s) {
		*bad = true;
		return NULL;
	}
	for (size_t i = 0; i < n / 2; i++) {
		int a = jo_hexval(h[2 * i]), b = jo_hexval(h[2 * i + 1]);

		if (a < 0 || b < 0 || (a == 0 && b == 0)) {
			free(s);
			*bad = true;
			return NULL;
		}
		s[i] = (char)(a * 16 + b);
	}
	s[n / 2] = '\0';
	return s;
}

static json_t *jhex(const char *s)
{
	char *h = s ? hex_of(s) : NULL;
	json_t *j = h ? json_string(h) : json_null();

	free(h);
	return j;
}

static const char *order_name(enum jo_sync_order o)
{
	return o == JO_SYNC_ORDER_DIRFIRST ? "dirfirst" : o == JO_SYNC_ORDER_ANY ? "any" : "bytes";
}

static enum jo_sync_order order_of(const char *s)
{
	return !strcmp(s, "dirfirst") ? JO_SYNC_ORDER_DIRFIRST
	       : !strcmp(s, "any")    ? JO_SYNC_ORDER_ANY
				      : JO_SYNC_ORDER_BYTES;
}

/* ---- the job's view (all its records at once) ---------------------------- */

struct rview {
	json_t *def, *pos, *done, *fail, *ddone, *dfail;
};

struct view {
	json_t *job, *plan, *cuts, *gate, *end;
	json_t *order_src, *order_dst;
	int n;                   /* ranges planned (0: no plan yet) */
	struct rview *r;
	size_t rcap;
	json_t *workers;         /* object: worker -> record */
	bool bad;
};

static void view_release(struct view *v)
{
	json_decref(v->job);
	json_decref(v->plan);
	json_decref(v->cuts);
	json_decref(v->gate);
	json_decref(v->end);
	json_decref(v->order_src);
	json_decref(v->order_dst);
	for (size_t i = 0; i < v->rcap; i++) {
		json_decref(v->r[i].def);
		json_decref(v->r[i].pos);
		json_decref(v->r[i].done);
		json_decref(v->r[i].fail);
		json_decref(v->r[i].ddone);
		json_decref(v->r[i].dfail);
	}
	free(v->r);
	json_decref(v->workers);
	memset(v, 0, sizeof(*v));
}

static struct rview *view_range(struct view *v, long i)
{
	if (i < 0 || i > 10000000)
		return NULL;
	if ((size_t)i >= v->rcap) {
		size_t nc = v->rcap ? v->rcap : 64;
		while (nc <= (size_t)i)
			nc *= 2;
		struct rview *nr = realloc(v->r, nc * sizeof(*nr));

		if (!nr)
			return NULL;
		memset(nr + v->rcap, 0, (nc - v->rcap) * sizeof(*nr));
		v->r = nr;
		v->rcap = nc;
	}
	return &v->r[i];
}

struct named_slot {
	const char *name;
	json_t **slot;
};

/* The slot in t named by the kl bytes at key; NULL when none is. */
static json_t **named_slot(const struct named_slot *t, size_t n, const char *key, size_t kl)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(t[i].name) == kl && !memcmp(t[i].name, key, kl))
			return t[i].slot;
	return NULL;
}

static int view_cb(const char *key, const char *val, void *p)
{
	struct view *v = p;
	json_error_t je;
	json_t *j = json_loads(val, 0, &je);
	const char *colon = strchr(key, ':');
	json_t **slot = NULL;

	if (!j || !json_is_object(j)) {
		json_decref(j);
		v->bad = true;
		return 0;
	}
	const struct named_slot top[] = {
		{ "job", &v->job }, { "plan", &v->plan }, { "cuts", &v->cuts },
		{ "gate", &v->gate }, { "end", &v->end }, { "order:src", &v->order_src },
		{ "order:dst", &v->order_dst },
	};

	slot = named_slot(top, sizeof(top) / sizeof(top[0]), key, strlen(key));
	if (!slot && colon && !strncmp(key, "w:", 2)) {
		json_object_set_new(v->workers, colon + 1, j);
		return 0;
	} else if (!slot && colon) {
		char *end;
		long i = strtol(colon + 1, &end, 10);
		struct rview *r = *end ? NULL : view_range(v, i);

		if (!r) {
			json_decref(j);
			return 0;
		}
		const struct named_slot per[] = {
			{ "def", &r->def }, { "pos", &r->pos }, { "done", &r->done },
			{ "fail", &r->fail }, { "ddone", &r->ddone }, { "dfail", &r->dfail },
		};
		slot = named_slot(per, sizeof(per) / sizeof(per[0]), key, (size_t)(colon - key));
	}
	if (!slot) {
		json_decref(j);
		return 0;
	}
	json_decref(*slot);
	*slot = j;
	return 0;
}

/* What the planner decided: the plan record, or the cuts it recorded first. */
static const json_t *view_plan(const struct view *v)
{
	return v->plan ? v->plan : v->cuts;
}

static int view_load(struct jo_meta *m, const char *ns, struct view *v, struct jo_err *err)
{
	int rc;

	memset(v, 0, sizeof(*v));
	v->workers = json_object();
	if (!v->workers)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_mut_rec_scan(m, ns, "", view_cb, v, err);
	if (rc) {
		view_release(v);
		return rc;
	}
	/* the ranges can be worked once recorded (cuts), before the plan record */
	v->n = v->plan ? (int)jo_cl_ji(v->plan, "ranges") : v->cuts ? (int)jo_cl_ji(v->cuts, "n") : 0;
	if (v->n < 0 || !view_range(v, v->n)) {
		view_release(v);
		return jo_err_set(err, JO_EPROTO, "coordinator: the job's plan is corrupt");
	}
	return 0;
}

/*
 * The records one range's worker needs (the job's plan and order hints, the
 * range's own): a handful of reads, whatever the number of ranges. The
 * range's records are in v->r[0].
 */
static int view_load_range(struct jo_meta *m, const char *ns, int idx, struct view *v,
			   struct jo_err *err)
{
	const char *jobkeys[] = { "plan", "cuts", "order:src", "order:dst" };
	json_t **jobslots[] = { &v->plan, &v->cuts, &v->order_src, &v->order_dst };
	const char *kinds[] = { "def", "pos", "done", "fail", "ddone", "dfail" };
	int rc = 0;

	memset(v, 0, sizeof(*v));
	v->workers = json_object();
	if (!v->workers || !view_range(v, 0)) {
		view_release(v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	json_t **rslots[] = { &v->r[0].def, &v->r[0].pos, &v->r[0].done, &v->r[0].fail,
			      &v->r[0].ddone, &v->r[0].dfail };
	for (size_t i = 0; !rc && i < sizeof(jobkeys) / sizeof(jobkeys[0]); i++)
		rc = jo_cl_rec_get(m, ns, jobkeys[i], jobslots[i], err);
	for (size_t i = 0; !rc && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char key[32];

		snprintf(key, sizeof(key), "%s:%06d", kinds[i], idx);
		rc = jo_cl_rec_get(m, ns, key, rslots[i], err);
	}
	if (rc) {
		view_release(v);
		return rc;
	}
	v->n = v->plan ? (int)jo_cl_ji(v->plan, "ranges") : v->cuts ? (int)jo_cl_ji(v->cuts, "n") : 0;
	return 0;
}

/* The job's totals from its range records. */
struct totals {
	int done, failed, leased, pending, deleted_ranges, del_failed;
	uint64_t copied, bytes, credited, skipped, extra, excluded, src, dst, deleted, del_refused;
};

static void totals_of(const struct view *v, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < v->n; i++) {
		const json_t *d = v->r[i].done, *p = v->r[i].pos;
		const json_t *c = d ? d : p;

		if (d && jo_cl_jb(d, "failed"))
			t->failed++;
		else if (d)
			t->done++;
		if (c) {
			t->copied += jo_cl_ju(c, "c");
			t->bytes += jo_cl_ju(c, "cb");
			t->credited += jo_cl_ju(c, "cr");
			t->skipped += jo_cl_ju(c, "s");
			t->extra += jo_cl_ju(c, "x");
			t->excluded += jo_cl_ju(c, "e");
			t->src += jo_cl_ju(c, "ls");
			t->dst += jo_cl_ju(c, "ld");
		}
		const json_t *dd = v->r[i].ddone;
		if (dd) {
			t->deleted += jo_cl_ju(dd, "deleted");
			if (jo_cl_jb(dd, "refused"))
				t->del_refused++;
			else if (jo_cl_jb(dd, "failed") || jo_cl_ju(dd, "fails"))
				t->del_failed++;
			else
				t->deleted_ranges++;
		}
	}
}

/* ---- the job in this process --------------------------------------------- */

struct job {
	const struct jo_objurl *src, *dst;
	struct jo_obj *so, *dobj;
	const struct jo_sync_opts *o;
	const struct jo_sync_cluster_opts *co;
	/* this slot's (common/cluster.h: several ranges in flight, one lease each) */
	struct jo_meta *m;
	struct jo_meta *mw;      /* the range callbacks' own connection (under rctx's mu) */
	struct jo_lease *lease;
	struct jo_cl_slot *slot;
	bool lists;              /* this slot's task counts in top->listing */
	int fails_in_a_row;
	char ns[17];
	char mark[64];
	/* the process's, shared by its slots: top->mu guards what follows */
	struct job *top;
	struct jo_sync_cluster_result *res;
	struct jo_sync_live live;
	struct jo_sync_gate *gate;   /* the transfers all ranges in flight share */
	int64_t started_ms;
	double busy_s;           /* time with at least one range running */
	int active;              /* ranges running now */
	int listing;             /* ranges claimed and not listed to their end yet */
	double active_since;
	/* progress */
	pthread_mutex_t mu;
	int cur_range;
	bool stop_progress;
	pthread_t progress_th;
	bool progress_started;
};

static int job_fail_wrap(int rc, struct jo_err *err, const char *what)
{
	return rc ? jo_err_wrap(err, "coordinator: %s", what) : 0;
}

static int put_worker(struct job *j, const char *state, struct jo_err *err)
{
	struct job *top = j->top;
	char key[160];
	json_t *w;
	int rc;

	snprintf(key, sizeof(key), "w:%s", j->co->worker);
	pthread_mutex_lock(&top->mu);
	double busy = top->busy_s + (top->active ? jo_cl_mono_s() - top->active_since : 0);
	w = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:f,s:i}", "state", state, "started",
		      (json_int_t)top->started_ms, "seen", (json_int_t)jo_cl_now_ms(), "copied",
		      (json_int_t)top->res->mine.copied, "bytes",
		      (json_int_t)top->res->mine.copied_bytes, "ranges",
		      (json_int_t)top->res->ranges_mine, "busy_s", busy, "range", top->cur_range);
	pthread_mutex_unlock(&top->mu);
	if (!w)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_cl_rec_put(j->m, j->ns, key, w, NULL, NULL, err);
	json_decref(w);
	return rc;
}

/* ---- planning -------------------------------------------------------------- */

static int do_plan(struct job *j, const struct jo_mut_task *t, struct jo_err *err)
{
	struct jo_mut_rec_cond held = { .task_id = t->id, .owner = j->co->worker };
	struct jo_sync_plan pl = { 0 };
	json_t *plan = NULL, *cuts = NULL;
	int rc, n;
	double t0 = jo_cl_mono_s();

	rc = jo_cl_rec_get(j->m, j->ns, "plan", &plan, err);
	if (!rc && plan) {
		/* planned already (an earlier planner completed; this task is a late copy) */
		json_decref(plan);
		return jo_lease_complete(j->lease, j->m, err);
	}
	if (!rc)
		rc = jo_cl_rec_get(j->m, j->ns, "cuts", &cuts, err);
	if (rc)
		return rc;
	enum jo_sync_order so = j->src->unordered ? JO_SYNC_ORDER_DIRFIRST : JO_SYNC_ORDER_BYTES;
	enum jo_sync_order dso = j->dst->unordered ? JO_SYNC_ORDER_DIRFIRST : JO_SYNC_ORDER_BYTES;
	char nonce[24];
	{
		/* the job's mark on every copy: which job, which plan */
		unsigned char rb[8];
		FILE *ur = fopen("/dev/urandom", "rb");
		size_t got = ur ? fread(rb, 1, sizeof(rb), ur) : 0;

		if (ur)
			fclose(ur);
		if (got != sizeof(rb)) {
			int64_t x = jo_cl_now_ms() ^ ((int64_t)getpid() << 20);

			memcpy(rb, &x, sizeof(rb));
		}
		for (int i = 0; i < 8; i++)
			snprintf(nonce + 2 * i, 3, "%02x", rb[i]);
	}
	if (cuts) {
		/* an earlier planner died after recording its ranges: use them */
		n = (int)jo_cl_ji(cuts, "n");
		so = order_of(jo_cl_js(cuts, "src_order"));
		dso = order_of(jo_cl_js(cuts, "dst_order"));
		snprintf(nonce, sizeof(nonce), "%s", jo_cl_js(cuts, "nonce"));
		json_decref(cuts);
		if (n < 1)
			return jo_err_set(err, JO_EPROTO, "coordinator: record 'cuts' is corrupt");
	} else {
		struct jo_sync_plan_opts po = { .ranges = j->co->ranges };

		jo_info("planning: sampling %s and %s", j->src->desc, j->dst->desc);
		rc = jo_sync_plan_make(j->so, j->src->prefix, j->o->dst_absent ? NULL : j->dobj,
				       j->dst->prefix, &po, &pl, err);
		if (rc)
			return jo_err_wrap(err, "planning");
		if (pl.src_order == JO_SYNC_ORDER_DIRFIRST)
			so = JO_SYNC_ORDER_DIRFIRST;
		if (pl.dst_order == JO_SYNC_ORDER_DIRFIRST)
			dso = JO_SYNC_ORDER_DIRFIRST;
		n = (int)pl.nbounds + 1;
		for (int i = 0; i < n && !rc; i++) {
			char key[32];
			json_t *d = json_pack("{s:o,s:o,s:f}", "lo", jhex(i ? pl.bounds[i - 1] : NULL),
					      "hi", jhex(i < n - 1 ? pl.bounds[i] : NULL), "w",
					      pl.weights ? pl.weights[i] : 0.0);

			snprintf(key, sizeof(key), "def:%06d", i);
			rc = d ? jo_cl_rec_put(j->m, j->ns, key, d, &held, NULL, err)
			       : jo_err_set(err, JO_ENOMEM, "out of memory");
			json_decref(d);
		}
		if (!rc) {
			cuts = json_pack("{s:i,s:s,s:s,s:s}", "n", n, "src_order", order_name(so),
					 "dst_order", order_name(dso), "nonce", nonce);
			rc = cuts ? jo_cl_rec_put(j->m, j->ns, "cuts", cuts, &held, NULL, err)
				  : jo_err_set(err, JO_ENOMEM, "out of memory");
			json_decref(cuts);
		}
		if (rc) {
			jo_sync_plan_release(&pl);
			return job_fail_wrap(rc, err, "recording the ranges");
		}
	}
	int *idx = calloc((size_t)n, sizeof(int));
	if (!idx) {
		jo_sync_plan_release(&pl);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (int i = 0; i < n; i++)
		idx[i] = i;
	rc = jo_cl_add_tasks(j->m, j->ns, "range", 'r', idx, n, err);
	free(idx);
	if (!rc) {
		plan = json_pack("{s:i,s:s,s:I,s:s,s:s,s:s,s:I,s:I,s:b,s:i,s:f}", "ranges", n, "nonce",
				 nonce, "at", (json_int_t)jo_cl_now_ms(), "by", j->co->worker, "src_order",
				 order_name(so), "dst_order", order_name(dso), "src_est",
				 (json_int_t)pl.src_est, "dst_est", (json_int_t)pl.dst_est, "exact",
				 pl.src_exact && pl.dst_exact, "probes", pl.probes, "secs",
				 jo_cl_mono_s() - t0);
		struct jo_mut_rec_cond fin = held;
		bool written = false;

		fin.complete = true;
		fin.if_absent = true;
		rc = plan ? jo_cl_rec_put(j->m, j->ns, "plan", plan, &fin, &written, err)
			  : jo_err_set(err, JO_ENOMEM, "out of memory");
		json_decref(plan);
		if (!rc && !written)
			rc = jo_lease_complete(j->lease, j->m, err);
		else if (!rc)
			jo_lease_forget(j->lease); /* completed with the record */
		if (!rc)
			jo_info("planned %d ranges (%" PRIu64 " SRC, %" PRIu64 " DST objects sampled, "
				"%d list requests, %.1fs)", n, pl.src_est, pl.dst_est, pl.probes,
				jo_cl_mono_s() - t0);
	}
	jo_sync_plan_release(&pl);
	return job_fail_wrap(rc, err, "recording the plan");
}

/* ---- one range ----------------------------------------------------------- */

struct upload {
	char *key, *id;
};

struct rctx {
	struct job *j;
	pthread_mutex_t mu;      /* the fields below, and j->mw */
	struct upload *up;       /* multipart uploads open now */
	size_t nup, upcap;
	int64_t task;
	int idx;
	int64_t since, attempt;
	bool uncounted;          /* copies past the checkpoint may be unrecorded */
	struct jo_sync_ckpt ck;  /* the last checkpoint */
	char *ck_pos;
	const char *kind;        /* "pos" */
};

/* A checkpoint's counters in pos:R and done:R. */
#define CK(key, field) { key, offsetof(struct jo_sync_ckpt, field) }
static const struct jo_cl_u64 ck_fields[] = {
	CK("c", copied),   CK("cb", copied_bytes), CK("cr", credited),   CK("s", skipped),
	CK("x", extra),    CK("e", excluded),      CK("ls", src_listed), CK("ld", dst_listed),
};
#undef CK

static json_t *counters_json(const struct jo_sync_ckpt *c)
{
	return jo_cl_u64_put(NULL, c, ck_fields, sizeof(ck_fields) / sizeof(ck_fields[0]));
}

static void counters_from(const json_t *o, struct jo_sync_ckpt *c)
{
	jo_cl_u64_get(o, c, ck_fields, sizeof(ck_fields) / sizeof(ck_fields[0]), false);
}

/* Record pos:R (r->mu held): the checkpoint, and the uploads open now. */
static int write_pos_locked(struct rctx *r, struct jo_err *err)
{
	struct jo_mut_rec_cond held = { .task_id = r->task, .owner = r->j->co->worker };
	char key[32];
	json_t *p = counters_json(&r->ck), *ups = json_array();
	int rc;

	if (!p || !ups) {
		json_decref(p);
		json_decref(ups);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r->nup; i++)
		json_array_append_new(ups, json_pack("[o,s]", jhex(r->up[i].key), r->up[i].id));
	json_object_set_new(p, "mpu", ups);
	json_object_set_new(p, "pos", jhex(r->ck_pos));
	json_object_set_new(p, "uncounted", json_boolean(r->uncounted));
	json_object_set_new(p, "by", json_string(r->j->co->worker));
	json_object_set_new(p, "since", json_integer(r->since));
	json_object_set_new(p, "at", json_integer(jo_cl_now_ms()));
	json_object_set_new(p, "att", json_integer(r->attempt));
	snprintf(key, sizeof(key), "pos:%06d", r->idx);
	rc = jo_cl_rec_put(r->j->mw, r->j->ns, key, p, &held, NULL, err);
	json_decref(p);
	return rc;
}

static int write_pos(struct rctx *r, struct jo_err *err)
{
	pthread_mutex_lock(&r->mu);
	int rc = write_pos_locked(r, err);
	pthread_mutex_unlock(&r->mu);
	return rc;
}

static int cb_mpu(const char *rel, const char *upload_id, bool open, struct jo_err *err,
		  void *payload)
{
	struct rctx *r = payload;
	int rc = 0;

	pthread_mutex_lock(&r->mu);
	if (open) {
		if (jo_grow_array(&r->up, &r->upcap, r->nup + 1, sizeof(*r->up))) {
			pthread_mutex_unlock(&r->mu);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		r->up[r->nup].key = strdup(rel);
		r->up[r->nup].id = strdup(upload_id);
		if (!r->up[r->nup].key || !r->up[r->nup].id) {
			free(r->up[r->nup].key);
			free(r->up[r->nup].id);
			pthread_mutex_unlock(&r->mu);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		r->nup++;
		/* recorded before any part goes out */
		rc = write_pos_locked(r, err);
	} else {
		for (size_t i = 0; i < r->nup; i++) {
			if (!strcmp(r->up[i].id, upload_id)) {
				free(r->up[i].key);
				free(r->up[i].id);
				r->up[i] = r->up[--r->nup];
				break;
			}
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

/* Abort the multipart uploads an earlier attempt of the range left open. */
static void abort_left_uploads(struct job *j, const json_t *pos)
{
	json_t *ups = json_object_get(pos, "mpu"), *u;
	size_t i;

	json_array_foreach(ups, i, u) {
		bool bad = false;
		char *rel = unhex(json_array_get(u, 0), &bad);
		const char *id = json_string_value(json_array_get(u, 1));
		size_t pl = strlen(j->dst->prefix);
		char *dkey = rel ? malloc(pl + strlen(rel) + 1) : NULL;
		struct jo_err e = { 0 };

		if (dkey && id) {
			memcpy(dkey, j->dst->prefix, pl);
			strcpy(dkey + pl, rel);
			if (jo_obj_mpu_abort(j->dobj, dkey, id, &e) == 0 && j->o->verbose)
				jo_info("aborted the upload of \"%s\" a killed worker left", rel);
		}
		free(dkey);
		free(rel);
	}
}

static void listing_done(struct job *j);

static int cb_checkpoint(const struct jo_sync_ckpt *c, struct jo_err *err, void *payload)
{
	struct rctx *r = payload;
	char *np = c->pos ? strdup(c->pos) : NULL;

	/* a range long enough for a checkpoint leaves room for the next one: its
	 * copies cover this range's next checkpoint drains */
	listing_done(r->j);

	if (c->pos && !np)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	free(r->ck_pos);
	r->ck_pos = np;
	r->ck = *c;
	r->ck.pos = NULL;
	return write_pos(r, err);
}

static bool cb_may_mutate(void *payload)
{
	struct rctx *r = payload;

	return jo_lease_valid(r->j->lease) && !jo_cancelled();
}

/* This slot's range is listed to its end: another slot may claim the next. */
static void listing_done(struct job *j)
{
	if (!j->lists)
		return;
	j->lists = false;
	pthread_mutex_lock(&j->top->mu);
	j->top->listing--;
	pthread_mutex_unlock(&j->top->mu);
	jo_cl_slot_kick(j->slot);
}

static void cb_listed(void *payload)
{
	struct rctx *r = payload;

	listing_done(r->j);
}

/*
 * Whether this slot may claim a task now: while no other range of the
 * process is still being listed (it is counted from here until its listing
 * ends), or fewer than one per 8 transfers are, so that the next range is
 * claimed and listed while the last one's copies drain, and a worker with
 * few transfers does not hold ranges it has no transfers for (the others
 * would wait for them at the job's end).
 */
static bool listing_start(struct job *j)
{
	bool ok;

	pthread_mutex_lock(&j->top->mu);
	ok = j->top->listing == 0 || j->top->listing * 8 < j->o->transfers;
	if (ok)
		j->top->listing++;
	pthread_mutex_unlock(&j->top->mu);
	j->lists = ok;
	return ok;
}

static void add_summary(struct jo_sync_summary *a, const struct jo_sync_summary *b)
{
	a->src_listed += b->src_listed;
	a->dst_listed += b->dst_listed;
	a->excluded += b->excluded;
	a->copied += b->copied;
	a->copied_bytes += b->copied_bytes;
	a->server_side += b->server_side;
	a->multipart += b->multipart;
	a->skipped += b->skipped;
	a->extra += b->extra;
	a->deleted += b->deleted;
	a->failed += b->failed;
	a->credited += b->credited;
	a->order_restarts += b->order_restarts;
	a->src_links += b->src_links;
	a->dst_links += b->dst_links;
}

/* A range (or its deletions) failed: say why where everyone sees it, hand it back. */
static int range_failed(struct job *j, const struct jo_mut_task *t, int idx, bool del,
			const char *why, uint64_t failures, struct jo_err *err)
{
	struct jo_mut_rec_cond held = { .task_id = t->id, .owner = j->co->worker };
	char key[32];
	json_t *f = json_pack("{s:s,s:s,s:I,s:I,s:I}", "error", why, "by", j->co->worker, "at",
			      (json_int_t)jo_cl_now_ms(), "att", (json_int_t)t->attempts, "n",
			      (json_int_t)failures + 1);
	int rc;

	jo_warn("range %06d%s failed (failure %" PRIu64 " of at most %d): %s", idx,
		del ? " (deletions)" : "", failures + 1, j->co->max_attempts, why);
	snprintf(key, sizeof(key), "%s:%06d", del ? "dfail" : "fail", idx);
	rc = f ? jo_cl_rec_put(j->m, j->ns, key, f, &held, NULL, err) : JO_ENOMEM;
	json_decref(f);
	jo_err_clear(err);
	(void)rc; /* a lost lease: the next holder records its own failure */
	rc = jo_lease_release(j->lease, j->m, err);
	if (rc)
		jo_err_clear(err);
	j->fails_in_a_row++;
	/* back off, so that one worker does not spin on a store that is down */
	int64_t ms = 1000LL << (j->fails_in_a_row < 5 ? j->fails_in_a_row : 5);
	if (ms > j->co->lease_ms)
		ms = j->co->lease_ms;
	jo_cl_sleep_ms(ms);
	return 0;
}

/* Give a range up after --max-attempts: recorded as failed, the job goes on. */
static int range_give_up(struct job *j, const struct jo_mut_task *t, int idx, bool del,
			 struct jo_err *err)
{
	struct jo_mut_rec_cond fin = { .task_id = t->id, .owner = j->co->worker, .complete = true };
	json_t *last = NULL, *d;
	char key[32];
	int rc;

	snprintf(key, sizeof(key), "%s:%06d", del ? "dfail" : "fail", idx);
	rc = jo_cl_rec_get(j->m, j->ns, key, &last, err);
	if (rc)
		return rc;
	d = json_pack("{s:b,s:s,s:s,s:I,s:I}", "failed", true, "error",
		      last ? jo_cl_js(last, "error") : "?", "by", j->co->worker, "at", (json_int_t)jo_cl_now_ms(),
		      "failures", (json_int_t)jo_cl_ju(last, "n"));
	json_decref(last);
	if (!d)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!del) {
		/* keep the counters of what was done, for the totals */
		json_t *p = NULL;

		snprintf(key, sizeof(key), "pos:%06d", idx);
		if (jo_cl_rec_get(j->m, j->ns, key, &p, err) == 0 && p) {
			const char *f[] = { "c", "cb", "cr", "s", "x", "e", "ls", "ld" };

			for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
				json_object_set_new(d, f[i], json_integer((json_int_t)jo_cl_ju(p, f[i])));
		}
		json_decref(p);
		jo_err_clear(err);
	}
	snprintf(key, sizeof(key), "%s:%06d", del ? "ddone" : "done", idx);
	jo_warn("range %06d%s given up after %d failures", idx, del ? " (deletions)" : "",
		j->co->max_attempts);
	rc = jo_cl_rec_put(j->m, j->ns, key, d, &fin, NULL, err);
	json_decref(d);
	jo_lease_forget(j->lease); /* completed with the record, or lost */
	if (rc == JO_ECONFLICT)
		jo_err_clear(err);
	return rc == JO_ECONFLICT ? 0 : rc;
}

/* The bounds of a range and where this attempt starts (decoded from the records). */
struct range_keys {
	char *lo, *hi, *after;
};

/* A range whose lease went to another worker: nothing to report, nothing more to do. */
static int range_lost(struct job *j, struct jo_err *err)
{
	jo_err_clear(err);
	jo_lease_forget(j->lease);
	return 0;
}

/* The range's bounds and checkpoint read, the range this worker's current one. */
static int range_start(struct job *j, const struct rview *rv, int idx, bool del, struct rctx *r,
		       struct range_keys *k, bool *prev_uncounted, struct jo_err *err)
{
	bool bad = false;

	k->lo = unhex(json_object_get(rv->def, "lo"), &bad);
	k->hi = unhex(json_object_get(rv->def, "hi"), &bad);
	if (!del && rv->pos) {
		k->after = unhex(json_object_get(rv->pos, "pos"), &bad);
		r->uncounted = jo_cl_jb(rv->pos, "uncounted");
		counters_from(rv->pos, &r->ck);
	}
	if (bad)
		return jo_err_set(err, JO_EPROTO, "coordinator: range %06d's records are corrupt", idx);
	r->ck_pos = k->after ? strdup(k->after) : NULL;
	/*
	 * From here on copies may land past the checkpoint without being
	 * recorded: say so once, before the first. A later attempt then HEADs
	 * the keys it would skip past the checkpoint, to count what this one
	 * copied (one write per attempt, not per copy).
	 */
	*prev_uncounted = r->uncounted;
	r->uncounted = true;
	pthread_mutex_lock(&j->top->mu);
	j->top->cur_range = idx;
	pthread_mutex_unlock(&j->top->mu);
	return 0;
}

/* The engine's options for the range: its bounds, orders, checkpoint and the phase. */
static void range_opts(struct job *j, const struct view *v, const struct rview *rv, bool del,
		       struct rctx *r, const struct range_keys *k, bool prev_uncounted,
		       struct jo_sync_range *rg, struct jo_sync_opts *o)
{
	rg->lo = k->lo;
	rg->hi = k->hi;
	rg->src_order = order_of(jo_cl_js(view_plan(v), "src_order"));
	rg->dst_order = order_of(jo_cl_js(view_plan(v), "dst_order"));
	/* an order break another range met: start there */
	if (v->order_src && order_of(jo_cl_js(v->order_src, "order")) > rg->src_order)
		rg->src_order = order_of(jo_cl_js(v->order_src, "order"));
	if (v->order_dst && order_of(jo_cl_js(v->order_dst, "order")) > rg->dst_order)
		rg->dst_order = order_of(jo_cl_js(v->order_dst, "order"));
	rg->after = k->after;
	rg->base = r->ck;
	rg->uncounted = prev_uncounted;
	rg->job_mark = j->mark;
	rg->checkpoint_s = j->co->checkpoint_s;
	rg->checkpoint = cb_checkpoint;
	rg->may_mutate = cb_may_mutate;
	rg->listed = cb_listed;
	rg->mpu = cb_mpu;
	rg->payload = r;
	o->range = rg;
	o->live = &j->top->live;
	o->gate = j->top->gate;
	o->state = NULL;
	o->progress = false;
	if (del) {
		const json_t *d = rv->done;

		o->delete_dst = true;
		o->max_delete = -1;
		rg->delete_only = true;
		rg->max_extras = d ? jo_cl_ju(d, "x") : 0;
		rg->expect_src = d && jo_cl_ju(d, "ls") > 0;
		rg->after = NULL;
		rg->uncounted = false;
		memset(&rg->base, 0, sizeof(rg->base));
		rg->checkpoint = NULL;
	} else {
		o->delete_dst = false;
	}
}

/* An order break this range met, recorded so that other ranges start with it. */
static void range_note_order(struct job *j, const struct jo_sync_range *rg,
			     enum jo_sync_order so0, enum jo_sync_order do0, struct jo_err *rerr)
{
	if (rg->src_order <= so0 && rg->dst_order <= do0)
		return;
	json_t *h = json_pack("{s:s}", "order", order_name(rg->src_order > so0 ? rg->src_order
									      : rg->dst_order));
	if (h)
		(void)jo_cl_rec_put(j->m, j->ns, rg->src_order > so0 ? "order:src" : "order:dst", h,
			      NULL, NULL, rerr);
	json_decref(h);
}

/* The done record of the range (ddone: of its deletions), or NULL without memory. */
static json_t *range_done_json(struct job *j, const struct jo_mut_task *t, bool del,
			       const struct rctx *r, const struct jo_sync_summary *sum)
{
	if (del)
		return json_pack("{s:I,s:I,s:b,s:s,s:s,s:I,s:I,s:f}", "deleted",
				 (json_int_t)sum->deleted, "extra", (json_int_t)sum->extra, "refused",
				 sum->delete_refused, "why", sum->delete_refused_why, "by",
				 j->co->worker, "started", (json_int_t)r->since, "at",
				 (json_int_t)jo_cl_now_ms(), "secs", sum->seconds);

	struct jo_sync_ckpt c = { .copied = sum->copied, .copied_bytes = sum->copied_bytes,
				  .credited = sum->credited, .skipped = sum->skipped,
				  .extra = sum->extra, .excluded = sum->excluded,
				  .src_listed = sum->src_listed, .dst_listed = sum->dst_listed };
	json_t *d = counters_json(&c);

	if (d) {
		json_object_set_new(d, "by", json_string(j->co->worker));
		json_object_set_new(d, "at", json_integer(jo_cl_now_ms()));
		json_object_set_new(d, "since", json_integer(r->since));
		json_object_set_new(d, "att", json_integer(t->attempts));
		json_object_set_new(d, "secs", json_real(sum->seconds));
	}
	return d;
}

/* The range recorded done in the transaction that completes its lease. */
static int range_record_done(struct job *j, const struct jo_mut_task *t, int idx, bool del,
			     const struct rctx *r, const struct jo_sync_range *rg,
			     const struct jo_sync_summary *sum, struct jo_err *err)
{
	struct jo_mut_rec_cond fin = { .task_id = t->id, .owner = j->co->worker, .complete = true };
	json_t *d = range_done_json(j, t, del, r, sum);
	char key[32];
	int rc;

	if (!d)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	snprintf(key, sizeof(key), "%s:%06d", del ? "ddone" : "done", idx);
	rc = jo_cl_rec_put(j->m, j->ns, key, d, &fin, NULL, err);
	json_decref(d);
	if (rc == JO_ECONFLICT) {
		jo_warn("range %06d: the lease was lost before it was recorded done", idx);
		return range_lost(j, err);
	}
	if (rc)
		return rc;
	jo_lease_forget(j->lease); /* completed with the record */
	pthread_mutex_lock(&j->top->mu);
	j->res->ranges_mine++;
	pthread_mutex_unlock(&j->top->mu);
	j->fails_in_a_row = 0;
	if (j->o->verbose)
		jo_info("range %06d %s: %" PRIu64 " copied, %" PRIu64 " skipped, %" PRIu64
			" deleted, %.1fs", idx, del ? "deletions done" : "done",
			sum->copied - rg->base.copied, sum->skipped, sum->deleted, sum->seconds);
	return 0;
}

/* How the run of the range ended (rc, sum; rerr its error): the lease released, lost,
 * the range failed or recorded done. */
static int range_outcome(struct job *j, const struct jo_mut_task *t, int idx, bool del,
			 uint64_t failures, const struct rctx *r, const struct jo_sync_range *rg,
			 int rc, const struct jo_sync_summary *sum, struct jo_err *rerr,
			 struct jo_err *err)
{
	if (rc == JO_ECANCELED || jo_cancelled()) {
		*err = *rerr;
		(void)jo_lease_release(j->lease, j->m, rerr);
		return JO_ECANCELED;
	}
	if (!jo_lease_valid(j->lease) || rc == JO_ECONFLICT) {
		jo_warn("range %06d: the lease was lost (another worker has it now)", idx);
		return range_lost(j, err);
	}
	if (rc || sum->failed) {
		char why[600];

		if (rc)
			snprintf(why, sizeof(why), "%s", rerr->msg);
		else
			snprintf(why, sizeof(why), "%" PRIu64 " object%s failed", sum->failed,
				 sum->failed == 1 ? "" : "s");
		return range_failed(j, t, idx, del, why, failures, err);
	}
	return range_record_done(j, t, idx, del, r, rg, sum, err);
}

/* The engine run over the range; its summary added to this worker's. */
static int range_run(struct job *j, bool del, const struct jo_sync_range *rg,
		     const struct jo_sync_opts *o, struct jo_sync_summary *sum, struct jo_err *rerr)
{
	struct job *top = j->top;
	int rc;

	pthread_mutex_lock(&top->mu);
	if (top->active++ == 0)
		top->active_since = jo_cl_mono_s();
	pthread_mutex_unlock(&top->mu);
	rc = jo_sync_run(j->src, j->so, j->dst, j->dobj, o, sum, rerr);
	pthread_mutex_lock(&top->mu);
	if (--top->active == 0)
		top->busy_s += jo_cl_mono_s() - top->active_since;
	add_summary(&j->res->mine, sum);
	if (!del) {
		/* what counts for this range is its total; the process adds its own work */
		j->res->mine.copied -= rg->base.copied;
		j->res->mine.copied_bytes -= rg->base.copied_bytes;
		j->res->mine.credited -= rg->base.credited;
	}
	pthread_mutex_unlock(&top->mu);
	return rc;
}

static int do_range(struct job *j, const struct jo_mut_task *t, int idx, bool del,
		    const struct view *v, const struct rview *rv, struct jo_err *err)
{
	struct rctx r = { .j = j, .task = t->id, .idx = idx, .since = jo_cl_now_ms(),
			  .attempt = t->attempts, .mu = PTHREAD_MUTEX_INITIALIZER };
	struct jo_sync_range rg = { 0 };
	struct jo_sync_summary sum;
	struct jo_sync_opts o = *j->o;
	struct jo_err rerr = { 0 };
	struct range_keys k = { 0 };
	bool prev_uncounted = false;
	int rc;

	if (del ? rv->ddone != NULL : (rv->done && !jo_cl_jb(rv->done, "failed"))) {
		/* done already: a task added again by a racing advance */
		return jo_lease_complete(j->lease, j->m, err);
	}
	if (!rv->def)
		return jo_err_set(err, JO_EPROTO, "coordinator: range %06d has no definition", idx);
	/* failures only count (a killed worker's attempt is no failure) */
	uint64_t failures = jo_cl_ju(del ? rv->dfail : rv->fail, "n");
	if (failures >= (uint64_t)j->co->max_attempts)
		return range_give_up(j, t, idx, del, err);
	rc = range_start(j, rv, idx, del, &r, &k, &prev_uncounted, err);
	if (rc)
		goto out;
	if (!del) {
		/* leased by whom, since when (the status shows it) */
		rc = write_pos(&r, err);
		if (rc) {
			rc = range_lost(j, err);
			goto out;
		}
		if (rv->pos)
			abort_left_uploads(j, rv->pos);
	}
	range_opts(j, v, rv, del, &r, &k, prev_uncounted, &rg, &o);
	enum jo_sync_order so0 = rg.src_order, do0 = rg.dst_order;
	rc = range_run(j, del, &rg, &o, &sum, &rerr);
	range_note_order(j, &rg, so0, do0, &rerr);
	rc = range_outcome(j, t, idx, del, failures, &r, &rg, rc, &sum, &rerr, err);
out:
	pthread_mutex_lock(&j->top->mu);
	if (j->top->cur_range == idx)
		j->top->cur_range = -1;
	pthread_mutex_unlock(&j->top->mu);
	(void)put_worker(j, "working", &rerr);
	free(k.lo);
	free(k.hi);
	free(k.after);
	free(r.ck_pos);
	for (size_t i = 0; i < r.nup; i++) {
		free(r.up[i].key);
		free(r.up[i].id);
	}
	free(r.up);
	pthread_mutex_destroy(&r.mu);
	return rc;
}

/* ---- advancing the job when no task is left --------------------------------- */

enum adv { ADV_WAIT, ADV_AGAIN, ADV_FINISHED };

static int write_end(struct job *j, const struct view *v, const char *status, const char *why,
		     struct jo_err *err)
{
	struct jo_mut_rec_cond once = { .if_absent = true };
	struct totals t;
	json_t *e;
	int rc;

	totals_of(v, &t);
	e = json_pack("{s:s,s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:i}", "status", status,
		      "why", why, "at", (json_int_t)jo_cl_now_ms(), "by", j->co->worker, "copied",
		      (json_int_t)t.copied, "bytes", (json_int_t)t.bytes, "skipped",
		      (json_int_t)t.skipped, "extra", (json_int_t)t.extra, "deleted",
		      (json_int_t)t.deleted, "src", (json_int_t)t.src, "dst", (json_int_t)t.dst,
		      "failed_ranges", t.failed, "ranges", v->n);
	if (!e)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_cl_rec_put(j->m, j->ns, "end", e, &once, NULL, err);
	json_decref(e);
	return rc;
}

static int advance(struct job *j, enum adv *out, struct jo_err *err)
{
	struct view v;
	int rc = view_load(j->m, j->ns, &v, err);
	int *idx = NULL, n = 0;

	*out = ADV_WAIT;
	if (rc)
		return rc;
	if (v.end) {
		*out = ADV_FINISHED;
		goto out;
	}
	if (!v.plan) {
		if (j->co->mode != JO_SYNC_CLUSTER_WORK) {
			const char *it = "plan";
			int64_t id;
			size_t added;

			rc = jo_mut_task_add(j->m, j->ns, "plan", &it, 1, &id, &added, err);
			*out = ADV_AGAIN;
		}
		goto out;
	}
	idx = calloc((size_t)v.n + 1, sizeof(int));
	if (!idx) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (int i = 0; i < v.n; i++)
		if (!v.r[i].done)
			idx[n++] = i;
	if (n) {
		/* ranges without a task (a planner died while adding them) */
		rc = jo_cl_add_tasks(j->m, j->ns, "range", 'r', idx, n, err);
		*out = ADV_AGAIN;
		goto out;
	}
	struct totals t;
	totals_of(&v, &t);
	if (t.failed) {
		char why[160];

		snprintf(why, sizeof(why), "%d range%s failed", t.failed, t.failed == 1 ? "" : "s");
		rc = write_end(j, &v, "failed", why, err);
		*out = ADV_FINISHED;
		goto out;
	}
	if (!jo_cl_jb(v.job, "delete")) {
		rc = write_end(j, &v, "ok", "", err);
		*out = ADV_FINISHED;
		goto out;
	}
	if (!v.gate) {
		/* every range listed and copied without failure: the whole job's brakes */
		int64_t maxd = jo_cl_ji(v.job, "max_delete");
		char why[200] = "";
		bool del = true;
		json_t *g;

		if (t.src == 0) {
			del = false;
			snprintf(why, sizeof(why), "the source listed no objects");
		} else if (maxd >= 0 && t.extra > (uint64_t)maxd) {
			del = false;
			snprintf(why, sizeof(why), "%" PRIu64 " deletions exceed --max-delete %" PRId64,
				 t.extra, maxd);
		}
		g = json_pack("{s:b,s:s,s:I,s:I,s:I,s:s}", "delete", del, "why", why, "extras",
			      (json_int_t)t.extra, "src", (json_int_t)t.src, "at", (json_int_t)jo_cl_now_ms(),
			      "by", j->co->worker);
		struct jo_mut_rec_cond once = { .if_absent = true };
		rc = g ? jo_cl_rec_put(j->m, j->ns, "gate", g, &once, NULL, err)
		       : jo_err_set(err, JO_ENOMEM, "out of memory");
		json_decref(g);
		if (!rc)
			jo_info("%s", del ? "every range is done: deleting what only DST has"
					  : "every range is done; deletions refused");
		*out = ADV_AGAIN;
		goto out;
	}
	if (!jo_cl_jb(v.gate, "delete")) {
		rc = write_end(j, &v, "refused", jo_cl_js(v.gate, "why"), err);
		*out = ADV_FINISHED;
		goto out;
	}
	n = 0;
	for (int i = 0; i < v.n; i++)
		if (jo_cl_ju(v.r[i].done, "x") > 0 && !v.r[i].ddone)
			idx[n++] = i;
	if (n) {
		rc = jo_cl_add_tasks(j->m, j->ns, "del", 'd', idx, n, err);
		*out = ADV_AGAIN;
		goto out;
	}
	if (t.del_refused) {
		rc = write_end(j, &v, "refused", "DST changed between the copy and delete phases", err);
	} else if (t.del_failed) {
		rc = write_end(j, &v, "failed", "deletions failed", err);
	} else {
		rc = write_end(j, &v, "ok", "", err);
	}
	*out = ADV_FINISHED;
out:
	free(idx);
	view_release(&v);
	return rc;
}

/* ---- progress ------------------------------------------------------------ */

/* One line about the whole job (and this worker), from the coordinator. */
static void *progress_main(void *p)
{
	struct job *j = p;
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	double t0 = jo_cl_mono_s();

	if (jo_meta_dup(j->m, &m, &err))
		return NULL;
	for (;;) {
		for (int i = 0; i < 16; i++) {
			pthread_mutex_lock(&j->mu);
			bool stop = j->stop_progress;
			pthread_mutex_unlock(&j->mu);
			if (stop) {
				fprintf(stderr, "\r\033[K");
				jo_meta_close(m);
				return NULL;
			}
			struct timespec ts = { 0, 250 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
		struct view v;
		if (view_load(m, j->ns, &v, &err)) {
			jo_err_clear(&err);
			continue;
		}
		struct totals t;
		int64_t total = 0, leased = 0;
		totals_of(&v, &t);
		(void)jo_mut_task_count(m, j->ns, &total, &leased, &err);
		char b1[32], b2[32], b3[32];
		uint64_t mine = __atomic_load_n(&j->live.copied, __ATOMIC_RELAXED);
		uint64_t mineb = __atomic_load_n(&j->live.copied_bytes, __ATOMIC_RELAXED);
		double el = jo_cl_mono_s() - t0;
		jo_fmt_bytes((double)t.bytes, 1, b1, sizeof(b1));
		jo_fmt_bytes((double)mineb, 1, b2, sizeof(b2));
		jo_fmt_bytes(el > 0 ? (double)mineb / el : 0, 1, b3, sizeof(b3));
		fprintf(stderr, "\r\033[Kjob %s: ranges %d/%d done, %" PRId64 " leased%s  copied %" PRIu64
			" (%s)  this worker %" PRIu64 " (%s, %s/s)  %zu workers  %.0fs",
			j->ns, t.done, v.n, leased, v.gate ? ", deleting" : "", t.copied, b1, mine, b2,
			b3, json_object_size(v.workers), el);
		view_release(&v);
	}
}

/* ---- the worker loop ------------------------------------------------------- */

static int register_job(struct job *j, struct jo_err *err)
{
	const struct jo_sync_cluster_opts *co = j->co;
	struct jo_mut_rec_cond once = { .if_absent = true };
	json_t *rec, *have = NULL;
	bool written = false;
	int rc;

	rec = json_pack("{s:i,s:s?,s:s,s:s,s:s,s:b,s:I,s:I,s:s}", "v", 1, "name", co->name, "fp",
			co->fp, "src", j->src->desc, "dst", j->dst->desc, "delete", j->o->delete_dst,
			"max_delete", (json_int_t)j->o->max_delete, "created", (json_int_t)jo_cl_now_ms(),
			"by", co->worker);
	if (!rec)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_cl_rec_put(j->m, j->ns, "job", rec, &once, &written, err);
	if (!rc && !written)
		rc = jo_cl_rec_get(j->m, j->ns, "job", &have, err);
	if (!rc && have && strcmp(jo_cl_js(have, "fp"), co->fp) != 0)
		rc = jo_err_set(err, JO_EINVAL,
				"job %s%s%s is another sync (%s -> %s, with other filters or options): "
				"pick another --id", co->name ? "\"" : "", co->name ? co->name : j->ns,
				co->name ? "\"" : "", jo_cl_js(have, "src"), jo_cl_js(have, "dst"));
	json_decref(have);
	if (!rc) {
		/* the registry the status reads; a job listed twice is the same job */
		json_t *r = json_pack("{s:s,s:s?,s:s,s:s,s:I}", "ns", j->ns, "name", co->name, "src",
				      j->src->desc, "dst", j->dst->desc, "created", (json_int_t)jo_cl_now_ms());

		rc = jo_cl_registry_add(j->m, REGISTRY, j->ns, r, err);
		json_decref(r);
	}
	json_decref(rec);
	return rc;
}

/* A job that finished with failed ranges is continued: those ranges are retried. */
static int reopen_failed(struct job *j, const struct view *v, struct jo_err *err)
{
	int rc = 0;

	jo_warn("job %s finished with failed ranges (%s): retrying them", j->ns, jo_cl_js(v->end, "why"));
	for (int i = 0; i < v->n && !rc; i++) {
		char key[32];

		if (v->r[i].done && jo_cl_jb(v->r[i].done, "failed")) {
			snprintf(key, sizeof(key), "done:%06d", i);
			rc = jo_mut_rec_put(j->m, j->ns, key, NULL, NULL, NULL, err);
		}
		if (!rc && v->r[i].ddone && (jo_cl_jb(v->r[i].ddone, "failed"))) {
			snprintf(key, sizeof(key), "ddone:%06d", i);
			rc = jo_mut_rec_put(j->m, j->ns, key, NULL, NULL, NULL, err);
		}
		/* their failures count afresh */
		if (!rc && v->r[i].fail) {
			snprintf(key, sizeof(key), "fail:%06d", i);
			rc = jo_mut_rec_put(j->m, j->ns, key, NULL, NULL, NULL, err);
		}
		if (!rc && v->r[i].dfail) {
			snprintf(key, sizeof(key), "dfail:%06d", i);
			rc = jo_mut_rec_put(j->m, j->ns, key, NULL, NULL, NULL, err);
		}
	}
	if (!rc)
		rc = jo_mut_rec_put(j->m, j->ns, "end", NULL, NULL, NULL, err);
	return rc;
}

static void fill_result(struct job *j, const struct view *v)
{
	struct jo_sync_cluster_result *res = j->res;
	struct totals t;

	totals_of(v, &t);
	res->ranges = v->n;
	res->ranges_done = t.done;
	res->ranges_failed = t.failed;
	res->job.copied = t.copied;
	res->job.copied_bytes = t.bytes;
	res->job.credited = t.credited;
	res->job.skipped = t.skipped;
	res->job.extra = t.extra;
	res->job.excluded = t.excluded;
	res->job.src_listed = t.src;
	res->job.dst_listed = t.dst;
	res->job.deleted = t.deleted;
	if (v->end) {
		res->finished = true;
		snprintf(res->status, sizeof(res->status), "%s", jo_cl_js(v->end, "status"));
		snprintf(res->why, sizeof(res->why), "%s", jo_cl_js(v->end, "why"));
	}
	if (v->gate && !jo_cl_jb(v->gate, "delete")) {
		res->job.delete_refused = true;
		snprintf(res->job.delete_refused_why, sizeof(res->job.delete_refused_why), "%s",
			 jo_cl_js(v->gate, "why"));
	}
}

static int work_loop(struct job *j, struct jo_err *err)
{
	const struct jo_sync_cluster_opts *co = j->co;
	int rc = 0;
	double waited_log = 0;
	int64_t idle_ms = 100;        /* the next wait when nothing is claimable */

	while (!rc) {
		struct jo_mut_task t = { 0 };

		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "cancelled");
		if (jo_cl_slot_stopping(j->slot))
			break; /* another slot failed: its error is the run's */
		if (co->mode == JO_SYNC_CLUSTER_PLAN) {
			/* --plan is done once the plan is recorded (by us or another) */
			json_t *plan = NULL;

			rc = jo_cl_rec_get(j->m, j->ns, "plan", &plan, err);
			json_decref(plan);
			if (rc || plan)
				break;
		}
		if (!listing_start(j)) {
			jo_cl_slot_wait(j->slot, 1000);
			continue;
		}
		rc = jo_lease_claim(j->lease, j->m, &t, err);
		if (rc)
			listing_done(j);
		if (rc == JO_ENOTFOUND) {
			int64_t total = 0, leased = 0;
			enum adv a = ADV_WAIT;

			jo_err_clear(err);
			rc = jo_mut_task_count(j->m, j->ns, &total, &leased, err);
			if (rc)
				break;
			if (total == 0) {
				rc = advance(j, &a, err);
				if (rc || a == ADV_FINISHED)
					break;
				if (a == ADV_AGAIN)
					continue;
			}
			/* every task is leased by someone: wait for them, or for a lease
			 * to run out (a dead worker's) */
			if (jo_cl_mono_s() - waited_log > 60) {
				jo_info("waiting: %" PRId64 " task%s leased by other workers", leased,
					leased == 1 ? "" : "s");
				waited_log = jo_cl_mono_s();
			}
			pthread_mutex_lock(&j->top->mu);
			bool idle = j->top->active == 0;
			pthread_mutex_unlock(&j->top->mu);
			if (idle)
				(void)put_worker(j, "waiting", err);
			jo_err_clear(err);
			/* a peer slot's task ending (the plan recorded, the last range
			 * done) wakes this one at once */
			jo_cl_slot_wait(j->slot, idle_ms);
			/* 100 ms first (the plan, the last ranges of a short job end soon),
			 * then longer, up to an eighth of a lease (100 ms .. 1 s) */
			idle_ms = idle_ms * 2 > co->lease_ms / 8 ? co->lease_ms / 8 : idle_ms * 2;
			idle_ms = idle_ms > 1000 ? 1000 : idle_ms < 100 ? 100 : idle_ms;
			continue;
		}
		if (rc)
			break;
		idle_ms = 100;
		bool del = !strcmp(t.kind, "del");
		int idx = jo_cl_task_index(t.items, del ? 'd' : 'r');
		struct view v;

		rc = view_load_range(j->m, j->ns, idx < 0 ? 0 : idx, &v, err);
		if (rc) {
			jo_mut_task_release_mem(&t);
			(void)jo_lease_release(j->lease, j->m, err);
			listing_done(j);
			break;
		}
		if (!j->mark[0] && view_plan(&v))
			snprintf(j->mark, sizeof(j->mark), "%s.%s", j->ns, jo_cl_js(view_plan(&v), "nonce"));
		bool mine_kind = true;
		if (!strcmp(t.kind, "plan")) {
			if (co->mode == JO_SYNC_CLUSTER_WORK) {
				mine_kind = false;
			} else {
				rc = do_plan(j, &t, err);
			}
		} else if (!strcmp(t.kind, "range") || !strcmp(t.kind, "del")) {
			if (co->mode == JO_SYNC_CLUSTER_PLAN) {
				mine_kind = false;
			} else if (idx < 0 || idx >= v.n) {
				rc = jo_err_set(err, JO_EPROTO, "coordinator: task '%s' names no planned range",
						t.items ? t.items : "");
			} else {
				rc = do_range(j, &t, idx, del, &v, &v.r[0], err);
			}
		} else {
			rc = jo_err_set(err, JO_EPROTO, "coordinator: unknown task kind '%s'", t.kind);
		}
		view_release(&v);
		jo_mut_task_release_mem(&t);
		listing_done(j);
		if (!mine_kind) {
			/* --plan / --worker leave the other kind to the others */
			(void)jo_lease_release(j->lease, j->m, err);
			jo_err_clear(err);
			if (co->mode != JO_SYNC_CLUSTER_PLAN)
				jo_cl_sleep_ms(1000);
		}
		jo_cl_slot_kick(j->slot);
	}
	return rc;
}

/* One slot of this process (common/cluster.h): the worker loop on a lease and connections of its own. */
static int slot_main(struct jo_cl_slot *s, struct jo_err *err)
{
	struct job *top = s->arg;
	struct job j = { .src = top->src, .dst = top->dst, .so = top->so, .dobj = top->dobj,
			 .o = top->o, .co = top->co, .m = s->m, .mw = top->mw, .lease = s->lease,
			 .slot = s, .top = top, .res = top->res };
	int rc = 0;

	snprintf(j.ns, sizeof(j.ns), "%s", top->ns);
	if (s->index)
		rc = jo_meta_dup(s->m, &j.mw, err);
	if (!rc)
		rc = work_loop(&j, err);
	listing_done(&j);
	if (s->index)
		jo_meta_close(j.mw);
	return rc;
}

int jo_sync_cluster_run(const struct jo_objurl *src, struct jo_obj *so,
			const struct jo_objurl *dst, struct jo_obj *dobj,
			const struct jo_sync_opts *o, const struct jo_sync_cluster_opts *co,
			struct jo_sync_cluster_result *res, struct jo_err *err)
{
	struct job j = { .src = src, .dst = dst, .so = so, .dobj = dobj, .o = o, .co = co,
			 .res = res, .cur_range = -1 };
	int slots = co->mode == JO_SYNC_CLUSTER_PLAN ? 1 : co->in_flight;
	struct jo_lease_opts lo = { .owner = co->worker, .lease_ms = co->lease_ms };
	struct view v = { 0 };
	int rc;

	memset(res, 0, sizeof(*res));
	pthread_mutex_init(&j.mu, NULL);
	j.top = &j;
	j.started_ms = jo_cl_now_ms();
	snprintf(j.ns, sizeof(j.ns), "%s", co->ns);
	snprintf(res->ns, sizeof(res->ns), "%s", co->ns);
	rc = jo_cl_open(&j.m, co->url, co->password, co->redis_password, j.ns, REGISTRY, err);
	if (rc)
		goto out;
	rc = jo_meta_dup(j.m, &j.mw, err);
	if (rc) {
		jo_err_wrap(err, "coordinator");
		goto out;
	}
	if (co->reset) {
		int64_t total = 0, leased = 0;
		char key[32];

		rc = jo_mut_task_count(j.m, j.ns, &total, &leased, err);
		if (!rc && leased)
			rc = jo_err_set(err, JO_ECONFLICT, "job %s: %" PRId64 " range%s leased by "
					"workers that are still at work (or died less than a lease ago): "
					"not reset", j.ns, leased, leased == 1 ? " is" : "s are");
		if (!rc)
			rc = jo_mut_task_clear(j.m, j.ns, err);
		snprintf(key, sizeof(key), "job:%s", j.ns);
		if (!rc)
			rc = jo_mut_rec_put(j.m, REGISTRY, key, NULL, NULL, NULL, err);
		if (rc)
			goto out;
		jo_info("job %s: every record dropped, starting over", j.ns);
	}
	rc = register_job(&j, err);
	if (rc)
		goto out;
	rc = view_load(j.m, j.ns, &v, err);
	if (rc)
		goto out;
	if (v.end && !strcmp(jo_cl_js(v.end, "status"), "failed") && co->mode != JO_SYNC_CLUSTER_PLAN) {
		rc = reopen_failed(&j, &v, err);
		if (rc)
			goto out;
	} else if (v.end) {
		res->was_finished = true;
		fill_result(&j, &v);
		goto out;
	}
	if (!v.plan && co->mode != JO_SYNC_CLUSTER_WORK) {
		const char *it = "plan";
		int64_t id;
		size_t added;

		rc = jo_mut_task_add(j.m, j.ns, "plan", &it, 1, &id, &added, err);
		if (rc)
			goto out;
	}
	view_release(&v);
	lo.ns = j.ns;
	j.gate = jo_sync_gate_new(o->transfers);
	if (!j.gate) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	(void)put_worker(&j, "working", err);
	jo_err_clear(err);
	if (o->progress && co->mode != JO_SYNC_CLUSTER_PLAN &&
	    jo_thread_start(&j.progress_th, progress_main, &j) == 0)
		j.progress_started = true;
	if (!rc)
		rc = jo_cl_slots_run(j.m, &lo, slots < 1 ? 1 : slots, slot_main, &j, err);
	if (j.progress_started) {
		pthread_mutex_lock(&j.mu);
		j.stop_progress = true;
		pthread_mutex_unlock(&j.mu);
		pthread_join(j.progress_th, NULL);
	}
	{
		struct jo_err e2 = { 0 };

		(void)put_worker(&j, rc == JO_ECANCELED ? "stopped" : rc ? "failed" : "done", &e2);
		if (view_load(j.m, j.ns, &v, &e2) == 0)
			fill_result(&j, &v);
	}
out:
	view_release(&v);
	jo_sync_gate_free(j.gate);
	jo_meta_close(j.mw);
	jo_meta_close(j.m);
	pthread_mutex_destroy(&j.mu);
	return rc;
}

/* ---- status ---------------------------------------------------------------- */

struct leases {
	json_t *arr;             /* {kind, item, owner, expire} of leased tasks */
	int64_t now;
	int pending_range, pending_del;
};

static int lease_cb(const struct jo_mut_task *t, void *p)
{
	struct leases *l = p;

	if (t->expire_ms > l->now && t->owner[0]) {
		json_t *e = json_pack("{s:s,s:s,s:s,s:I,s:I}", "kind", t->kind, "item",
				      t->items ? t->items : "", "owner", t->owner, "expire",
				      (json_int_t)t->expire_ms, "attempts", (json_int_t)t->attempts);
		if (e)
			json_array_append_new(l->arr, e);
	} else if (!strcmp(t->kind, "range")) {
		l->pending_range++;
	} else if (!strcmp(t->kind, "del")) {
		l->pending_del++;
	}
	return 0;
}

static void short_key(const char *k, char *buf, size_t n)
{
	if (!k) {
		snprintf(buf, n, "(start)");
		return;
	}
	if (strlen(k) + 3 <= n) {
		snprintf(buf, n, "\"%s\"", k);
		return;
	}
	snprintf(buf, n, "\"%.*s...\"", (int)(n > 8 ? n - 8 : 1), k);
}

/* One job as --status shows it: the records read, and the rows made of them. */
struct job_status {
	struct view v;
	struct leases ls;
	struct totals t;
	int leased_ranges;
	const char *state;
	json_t *leases, *fails, *workers;
	int64_t last_done, first_del;  /* unix ms; 0: not yet */
};

/* The leases held now, one row each (where the range's worker is, what it copied). */
static void status_leases(struct job_status *s)
{
	size_t nl = json_array_size(s->ls.arr);

	for (size_t i = 0; i < nl; i++) {
		const json_t *e = json_array_get(s->ls.arr, i);
		const char *item = jo_cl_js(e, "item");
		int idx = atoi(item + 1);
		const json_t *pos = idx >= 0 && idx < s->v.n ? s->v.r[idx].pos : NULL;
		bool bad = false;
		char *at = pos ? unhex(json_object_get(pos, "pos"), &bad) : NULL;
		int64_t since = pos && !strcmp(jo_cl_js(pos, "by"), jo_cl_js(e, "owner")) ? jo_cl_ji(pos, "since") : 0;

		json_array_append_new(s->leases, json_pack("{s:s,s:i,s:s,s:I,s:I,s:s?,s:I,s:I}", "kind",
							   jo_cl_js(e, "kind"), "range", idx, "owner",
							   jo_cl_js(e, "owner"), "since", (json_int_t)since,
							   "expires_in_ms",
							   (json_int_t)(jo_cl_ji(e, "expire") - s->ls.now),
							   "at", at, "copied", (json_int_t)jo_cl_ju(pos, "c"),
							   "attempt", (json_int_t)jo_cl_ji(e, "attempts")));
		free(at);
	}
}

/* A failure row of range i from its record rec. */
static json_t *failure_row(int i, const json_t *rec, bool given_up)
{
	return json_pack("{s:i,s:s,s:s,s:b,s:I}", "range", i, "error", jo_cl_js(rec, "error"), "by",
			 jo_cl_js(rec, "by"), "given_up", given_up, "at", (json_int_t)jo_cl_ji(rec, "at"));
}

/* The ranges that failed: given up (copy or delete phase), or failed and to be retried. */
static void status_failures(struct job_status *s)
{
	for (int i = 0; i < s->v.n; i++) {
		const json_t *d = s->v.r[i].done, *f = s->v.r[i].fail, *dd = s->v.r[i].ddone;

		if (s->v.r[i].dfail && !dd)
			f = s->v.r[i].dfail;

		if (d && jo_cl_jb(d, "failed"))
			json_array_append_new(s->fails, failure_row(i, d, true));
		else if (dd && jo_cl_jb(dd, "failed"))
			json_array_append_new(s->fails, failure_row(i, dd, true));
		else if (f && (!d || f == s->v.r[i].dfail))
			json_array_append_new(s->fails, failure_row(i, f, false));
	}
}

/* The workers the job has seen, with their throughput. */
static void status_workers(struct job_status *s)
{
	const char *wk;
	json_t *w;

	json_object_foreach(s->v.workers, wk, w) {
		double busy = json_real_value(json_object_get(w, "busy_s"));
		double span = (double)(jo_cl_ji(w, "seen") - jo_cl_ji(w, "started")) / 1000.0;
		double basis = busy > 0.5 ? busy : span;
		const char *wstate = jo_cl_js(w, "state");

		/* a worker that was still at work when the job finished and has not
		 * said since that it left was killed (or lost its coordinator) */
		if (s->v.end && (!strcmp(wstate, "working") || !strcmp(wstate, "waiting")) &&
		    jo_cl_ji(w, "seen") < jo_cl_ji(s->v.end, "at"))
			wstate = "gone";
		json_array_append_new(s->workers,
				      json_pack("{s:s,s:s,s:I,s:I,s:I,s:i,s:f,s:f,s:I}",
						"worker", wk, "state", wstate, "copied",
						(json_int_t)jo_cl_ju(w, "copied"), "bytes",
						(json_int_t)jo_cl_ju(w, "bytes"), "ranges",
						(json_int_t)jo_cl_ju(w, "ranges"), "range",
						(int)jo_cl_ji(w, "range"), "bytes_per_s",
						basis > 0 ? (double)jo_cl_ju(w, "bytes") / basis : 0.0,
						"objects_per_s",
						basis > 0 ? (double)jo_cl_ju(w, "copied") / basis : 0.0,
						"seen_ago_ms", (json_int_t)(s->ls.now - jo_cl_ji(w, "seen"))));
	}
}

/* When the copy phase ended and the deletions began. */
static void status_phases(struct job_status *s)
{
	for (int i = 0; i < s->v.n; i++) {
		if (s->v.r[i].done && jo_cl_ji(s->v.r[i].done, "at") > s->last_done)
			s->last_done = jo_cl_ji(s->v.r[i].done, "at");
		if (s->v.r[i].ddone && (!s->first_del || jo_cl_ji(s->v.r[i].ddone, "started") < s->first_del))
			s->first_del = jo_cl_ji(s->v.r[i].ddone, "started");
	}
}

/* --status --json: the job as one object. */
static void status_print_json(const struct job_status *s, const char *ns, FILE *out)
{
	const struct view *v = &s->v;
	const struct totals *t = &s->t;
	json_t *o = json_pack("{s:s,s:s,s:s?,s:s,s:s,s:s,s:s,s:s,s:{s:i,s:i,s:i,s:i,s:i},"
			      "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:O,s:O,s:O,s:O?,s:O?,s:O?}",
			      "type", "job", "ns", ns, "name", json_string_value(json_object_get(v->job, "name")),
			      "src", jo_cl_js(v->job, "src"), "dst", jo_cl_js(v->job, "dst"), "state", s->state,
			      "status", v->end ? jo_cl_js(v->end, "status") : "", "why",
			      v->end ? jo_cl_js(v->end, "why") : "", "ranges", "planned", v->n, "done",
			      t->done, "leased", s->leased_ranges, "failed", t->failed, "pending",
			      s->ls.pending_range, "copied", (json_int_t)t->copied, "copied_bytes",
			      (json_int_t)t->bytes, "credited", (json_int_t)t->credited, "skipped",
			      (json_int_t)t->skipped, "extra", (json_int_t)t->extra, "deleted",
			      (json_int_t)t->deleted, "listed_src", (json_int_t)t->src,
			      "listed_dst", (json_int_t)t->dst, "leases", s->leases, "failures", s->fails,
			      "workers", s->workers, "plan", v->plan, "gate", v->gate, "end", v->end);
	/* when the copy phase ended and the deletions began (unix ms; 0: not yet) */
	if (o) {
		json_object_set_new(o, "last_range_done_at", json_integer(s->last_done));
		json_object_set_new(o, "first_delete_at", json_integer(s->first_del));
	}
	char *txt = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (txt)
		fprintf(out, "%s\n", txt);
	free(txt);
	json_decref(o);
}

/* --status: the job's name, state, plan, ranges, objects and deletions. */
static void status_print_head(const struct job_status *s, const char *ns, FILE *out)
{
	const struct view *v = &s->v;
	const struct totals *t = &s->t;
	const char *name = json_string_value(json_object_get(v->job, "name"));
	char buf[256], tb[64];

	/* what the coordinator holds is anyone's text: escaped for the terminal */
	fprintf(out, "job %s%s%s%s: %s -> %s\n", JO_ESC_TERM(ns), name ? " \"" : "",
		name ? JO_ESC_TERM(name) : "", name ? "\"" : "", JO_ESC_TERM(jo_cl_js(v->job, "src")),
		JO_ESC_TERM(jo_cl_js(v->job, "dst")));
	if (v->end)
		snprintf(buf, sizeof(buf), "finished %s%s%s", jo_cl_js(v->end, "status"),
			 jo_cl_js(v->end, "why")[0] ? ": " : "", jo_cl_js(v->end, "why"));
	else
		snprintf(buf, sizeof(buf), "%s", s->state);
	fprintf(out, "  state:    %s\n", JO_ESC_TERM(buf));
	if (v->plan) {
		jo_cl_fmt_time(jo_cl_ji(v->plan, "at"), tb, sizeof(tb));
		fprintf(out, "  planned:  %s by %s: %d ranges (%" PRIu64 " SRC / %" PRIu64
			" DST objects sampled, %s / %s order)\n", tb, JO_ESC_TERM(jo_cl_js(v->plan, "by")),
			v->n, jo_cl_ju(v->plan, "src_est"), jo_cl_ju(v->plan, "dst_est"),
			JO_ESC_TERM(jo_cl_js(v->plan, "src_order")), JO_ESC_TERM(jo_cl_js(v->plan, "dst_order")));
	}
	fprintf(out, "  ranges:   %d planned, %d done, %d leased, %d failed, %d pending\n", v->n,
		t->done, s->leased_ranges, t->failed, s->ls.pending_range);
	jo_fmt_bytes((double)t->bytes, 1, tb, sizeof(tb));
	fprintf(out, "  objects:  %" PRIu64 " copied (%s), %" PRIu64 " skipped, %" PRIu64
		" only in DST, %" PRIu64 " deleted; listed %" PRIu64 " SRC / %" PRIu64 " DST\n",
		t->copied, tb, t->skipped, t->extra, t->deleted, t->src, t->dst);
	if (v->gate)
		fprintf(out, "  deletes:  %s%s%s (%" PRIu64 " due; deletions done in %d ranges)\n",
			jo_cl_jb(v->gate, "delete") ? "running after the last range" : "refused",
			jo_cl_js(v->gate, "why")[0] ? ": " : "", JO_ESC_TERM(jo_cl_js(v->gate, "why")),
			jo_cl_ju(v->gate, "extras"),
			t->deleted_ranges);
}

/* --status: the leases, failures and workers, a line each. */
static void status_print_rows(const struct job_status *s, FILE *out)
{
	char tb[64], kb[120];

	if (json_array_size(s->leases)) {
		fprintf(out, "  leased:\n");
		for (size_t i = 0; i < json_array_size(s->leases); i++) {
			const json_t *e = json_array_get(s->leases, i);

			if (jo_cl_ji(e, "since"))
				jo_cl_fmt_time(jo_cl_ji(e, "since"), tb, sizeof(tb));
			else
				snprintf(tb, sizeof(tb), "?");
			short_key(json_string_value(json_object_get(e, "at")), kb, sizeof(kb));
			fprintf(out, "    %s %06d  by %s since %s (attempt %" PRId64 "), %" PRIu64
				" copied so far, at %s\n", JO_ESC_TERM(jo_cl_js(e, "kind")),
				(int)jo_cl_ji(e, "range"), JO_ESC_TERM(jo_cl_js(e, "owner")), tb,
				jo_cl_ji(e, "attempt"), jo_cl_ju(e, "copied"), JO_ESC_TERM(kb));
		}
	}
	if (json_array_size(s->fails)) {
		fprintf(out, "  failed:\n");
		for (size_t i = 0; i < json_array_size(s->fails); i++) {
			const json_t *e = json_array_get(s->fails, i);

			fprintf(out, "    range %06d%s: %s (%s)\n", (int)jo_cl_ji(e, "range"),
				jo_cl_jb(e, "given_up") ? " (given up)" : "", JO_ESC_TERM(jo_cl_js(e, "error")),
				JO_ESC_TERM(jo_cl_js(e, "by")));
		}
	}
	if (json_array_size(s->workers)) {
		fprintf(out, "  workers:\n");
		for (size_t i = 0; i < json_array_size(s->workers); i++) {
			const json_t *e = json_array_get(s->workers, i);
			char rb[32], rr[32];

			jo_fmt_bytes((double)jo_cl_ju(e, "bytes"), 1, rb, sizeof(rb));
			jo_fmt_bytes(json_real_value(json_object_get(e, "bytes_per_s")), 1, rr, sizeof(rr));
			fprintf(out, "    %-28s %-8s %8" PRIu64 " objects %10s  %9s/s %7.1f obj/s  "
				"%d ranges  seen %.0fs ago\n", JO_ESC_TERM(jo_cl_js(e, "worker")),
				JO_ESC_TERM(jo_cl_js(e, "state")),
				jo_cl_ju(e, "copied"), rb, rr,
				json_real_value(json_object_get(e, "objects_per_s")),
				(int)jo_cl_ji(e, "ranges"), (double)jo_cl_ji(e, "seen_ago_ms") / 1000.0);
		}
	}
}

/* The job's records and its leases read: 0, or an error with nothing left to release. */
static int status_load(struct jo_meta *m, const char *ns, struct job_status *s,
		       struct jo_err *err)
{
	int rc = view_load(m, ns, &s->v, err);

	if (rc)
		return rc;
	if (!s->v.job) {
		view_release(&s->v);
		return jo_err_set(err, JO_ENOTFOUND, "the coordinator has no sync job %s", ns);
	}
	s->ls.arr = json_array();
	if (!s->ls.arr) {
		view_release(&s->v);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	rc = jo_mut_task_scan(m, ns, lease_cb, &s->ls, err);
	if (rc) {
		json_decref(s->ls.arr);
		view_release(&s->v);
		return rc;
	}
	return 0;
}

static int status_one(struct jo_meta *m, const char *ns, bool json, FILE *out,
		      struct jo_err *err)
{
	struct job_status s = { .ls = { .now = jo_cl_now_ms() } };
	int rc = status_load(m, ns, &s, err);

	if (rc)
		return rc;
	totals_of(&s.v, &s.t);
	size_t nl = json_array_size(s.ls.arr);
	for (size_t i = 0; i < nl; i++)
		if (!strcmp(jo_cl_js(json_array_get(s.ls.arr, i), "kind"), "range"))
			s.leased_ranges++;
	s.state = s.v.end ? "finished" : s.v.gate ? "deleting" : view_plan(&s.v) ? "copying"
										 : "planning";
	s.leases = json_array();
	s.fails = json_array();
	s.workers = json_array();
	status_leases(&s);
	status_failures(&s);
	status_workers(&s);
	status_phases(&s);
	if (json) {
		status_print_json(&s, ns, out);
	} else {
		status_print_head(&s, ns, out);
		status_print_rows(&s, out);
	}
	json_decref(s.leases);
	json_decref(s.fails);
	json_decref(s.workers);
	json_decref(s.ls.arr);
	view_release(&s.v);
	return 0;
}

int jo_sync_cluster_status(const struct jo_sync_status_opts *so, FILE *out, struct jo_err *err)
{
	struct jo_meta_open_opts mo = { .password = so->password,
					.redis_password = so->redis_password,
					.coordinator_only = true, .read_only = false };
	struct jo_meta *m = NULL;
	char (*ns)[17] = NULL;
	size_t nns = 0;
	int rc = jo_meta_open_with(&m, so->url, &mo, err);

	if (rc)
		return jo_err_wrap(err, "coordinator");
	if (so->ns) {
		rc = status_one(m, so->ns, so->json, out, err);
		jo_meta_close(m);
		return rc;
	}
	rc = jo_cl_registry_list(m, REGISTRY, &ns, &nns, err);
	if (!rc && !nns && !so->json)
		fprintf(out, "no sync jobs in this coordinator\n");
	for (size_t i = 0; !rc && i < nns; i++) {
		rc = status_one(m, ns[i], so->json, out, err);
		if (rc == JO_ENOTFOUND) {
			/* registered, then reset before it recorded anything */
			jo_err_clear(err);
			rc = 0;
		}
		if (!so->json && i + 1 < nns)
			fprintf(out, "\n");
	}
	free(ns);
	jo_meta_close(m);
	return rc;
}
