/* jfsops compact: survey fragmentation, and compact chunks as JuiceFS does. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/command.h"
#include "common/dynbuf.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/jfs/jfs.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/audit.h"
#include "common/extsort.h"
#include "common/lease.h"
#include "common/meta/meta_mut.h"
#include "common/object/object.h"
#include "gc/compact.h"

static const char compact_usage[] =
	"usage: jfsops compact META-URL [--plan | --worker | --status] [--apply] [options]\n"
	"\n"
	"Find chunks whose slice lists have grown long (appends, overwrites) and,\n"
	"with --apply, rewrite each as one slice exactly as JuiceFS compacts: the\n"
	"visible bytes are written as a new slice (new id from the volume's counter,\n"
	"the volume's block size and compression), then swapped in with the same\n"
	"compare-and-swap on the record prefix that JuiceFS uses, so writes made\n"
	"meanwhile are kept. Old slices leave through the normal deletion path:\n"
	"at once when trash is off and nothing else references them (counts are\n"
	"re-read before any block is deleted), else as delayed slices that\n"
	"`jfsops gc` reclaims after TrashDays. A chunk that changed under us\n"
	"(conflict) loses only our new slice and is tried again.\n"
	"Without --apply nothing is changed: a fragmentation report is printed.\n"
	"\n";

static const char compact_tail[] =
	CMD_VOL_NOTE
	"\n"
	"DUR: 90s, 50m, 1.5h, 2d, 500ms or plain seconds.\n"
	"\n"
	"Exit codes: 0 done, 2 usage, 3 failed, 4 some chunks failed, 5 unreachable or\n"
	"timed out (also Redis LOADING/BUSY, SQLite locked), 9 unsupported\n"
	"volume (ChangeLog on, encrypted), 10 a lease was lost, 130/143 interrupted.\n"
	"\n"
	"Examples:\n"
	"  jfsops compact redis://127.0.0.1:6379/1                       # report only\n"
	"  jfsops compact sqlite3:///var/jfs/meta.db --path /logs --min-slices 20 --apply\n"
	"  jfsops compact redis://10.0.0.5:6379/1 --plan --apply          # record tasks once\n"
	"  jfsops compact redis://10.0.0.5:6379/1 --worker --apply --max-time 50m   # on every host\n";

#define COMPACT_NS "compact"

struct copts {
	const char *path;
	uint64_t min_slices;
	unsigned min_garbage;
	bool apply, plan, worker, status;
	int threads;
	int64_t lease_ms, max_time_ms;
	long task_size;
	const char *id, *audit_path;
	unsigned top;
};

/* A chunk among the most fragmented the survey saw. */
struct frag {
	uint64_t ino, hidden, written;
	uint32_t indx, n;
};


struct cstats {
	uint64_t chunks, candidates, records, candidate_records, hidden, candidate_hidden;
	uint64_t hist[JO_HIST_BUCKETS];
	/* planning */
	uint64_t tasks_planned, chunks_planned;
	/* work */
	uint64_t tasks_done, compacted, conflicts, gave_up, nothing, failed, leases_lost;
	uint64_t records_removed, bytes_read, bytes_written, slices_freed, blocks_deleted;
	uint64_t gets;                 /* GETs of old slices' blocks */
};

struct run {
	struct jo_ctx *ctx;
	struct jo_vol *vol;
	struct copts o;
	struct cstats st;
	pthread_mutex_t mu;   /* guards st and stdout once workers run */
	struct jo_err first_err;
	struct jo_xsort *plan;   /* candidates ordered by benefit */
	struct frag *top;        /* the --top most fragmented candidates, most first */
	size_t ntop;
	struct jo_audit *audit;
	char owner[128];
	int64_t started_ms, deadline_ms;
	time_t started, last_progress;
	/* the survey (or the work) was cut: the summary says "complete": false */
	const char *incomplete;   /* what did not finish, or NULL */
	const struct jo_err *why;
};

/*
 * A planned chunk as a sort record: byte order = best first (most hidden
 * bytes, then most records), then inode and index.
 */
#define PLAN_REC 24
static void plan_rec(uint8_t rec[PLAN_REC], uint64_t hidden, uint32_t nrec, uint64_t ino, uint32_t indx)
{
	jo_put_be64(rec, ~hidden);
	jo_put_be32(rec + 8, ~nrec);
	jo_put_be64(rec + 12, ino);
	jo_put_be32(rec + 20, indx);
}

/* a before b in the --top list: more records, then more hidden bytes */
static bool frag_before(const struct frag *a, const struct frag *b)
{
	if (a->n != b->n)
		return a->n > b->n;
	if (a->hidden != b->hidden)
		return a->hidden > b->hidden;
	return a->ino != b->ino ? a->ino < b->ino : a->indx < b->indx;
}

/* Keep f if it is among the --top most fragmented so far (a sorted array of
 * at most --top entries: an insertion only when f beats the last). */
static void top_add(struct run *r, const struct frag *f)
{
	size_t i;

	if (!r->top || (r->ntop == r->o.top && !frag_before(f, &r->top[r->ntop - 1])))
		return;
	if (r->ntop < r->o.top)
		r->ntop++;
	for (i = r->ntop - 1; i > 0 && frag_before(f, &r->top[i - 1]); i--)
		r->top[i] = r->top[i - 1];
	r->top[i] = *f;
}

/* Survey one chunk; remember it for planning when it is worth compacting. */
static int survey(struct run *r, uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len,
		  struct jo_err *err)
{
	struct jo_slice *recs = NULL;
	size_t n = 0;
	uint64_t written = 0, hidden = 0;

	if (jo_slices_decode(raw, len, &recs, &n, NULL) || n == 0) {
		free(recs);
		return 0;
	}
	int hrc = jo_chunk_hidden(recs, n, &written, &hidden);

	if (hrc) {
		free(recs);
		jo_chunk_err(err, hrc, ino, indx);
		if (hrc != JO_EPROTO)
			return hrc;
		/* a corrupt chunk is never rewritten; the others go on */
		jo_warn("%s: not compacted", err->msg);
		jo_err_clear(err);
		return 0;
	}
	free(recs);
	r->st.chunks++;
	r->st.records += n;
	r->st.hidden += hidden;
	r->st.hist[jo_hist_bucket(n)]++;
	if (n < 2 || n < r->o.min_slices)
		return 0;
	if (r->o.min_garbage && (!written || hidden * 100 < (uint64_t)r->o.min_garbage * written))
		return 0;
	r->st.candidates++;
	r->st.candidate_records += n;
	r->st.candidate_hidden += hidden;
	top_add(r, &(struct frag){ .ino = ino, .indx = indx, .n = (uint32_t)n, .hidden = hidden,
				   .written = written });
	if (r->plan) {
		uint8_t rec[PLAN_REC];
		int rc;

		plan_rec(rec, hidden, (uint32_t)n, ino, indx);
		rc = jo_xsort_add(r->plan, rec, sizeof(rec), err);
		if (rc)
			return rc;
	}
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "interrupted");
	return 0;
}

struct scan_ctx {
	struct run *r;
	struct jo_err *err;
};

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	struct scan_ctx *sc = payload;

	return survey(sc->r, ino, indx, raw, len, sc->err);
}

/* --path: walk the tree below PATH and survey each file's chunks. */
struct walk {
	struct run *r;
	struct jo_err *err;
	uint64_t *dirs;
	size_t ndirs, cap;
};

static int walk_file(struct walk *w, uint64_t ino)
{
	uint32_t *idx = NULL;
	size_t n = 0;
	struct jo_attr a;
	int rc = jo_meta_getattr(w->r->vol->meta, ino, &a, w->err);

	/* chunks below the length: a Redis volume keeps no per-inode chunk index */
	if (!rc)
		rc = jo_meta_list_chunks_len(w->r->vol->meta, ino, a.length, &idx, &n, w->err);
	for (size_t i = 0; i < n && !rc; i++) {
		uint8_t *raw = NULL;
		size_t len = 0;

		rc = jo_meta_read_chunk(w->r->vol->meta, ino, idx[i], &raw, &len, w->err);
		if (!rc)
			rc = survey(w->r, ino, idx[i], raw, len, w->err);
		free(raw);
	}
	free(idx);
	return rc;
}

static int walk_entry(const char *name, size_t name_len, uint64_t ino, uint8_t type, void *payload)
{
	struct walk *w = payload;

	(void)name;
	(void)name_len;
	if (type == JO_TYPE_DIR) {
		if (jo_grow_array(&w->dirs, &w->cap, w->ndirs + 1, sizeof(*w->dirs)))
			return jo_err_set(w->err, JO_ENOMEM, "out of memory");
		w->dirs[w->ndirs++] = ino;
		return 0;
	}
	if (type == JO_TYPE_FILE)
		return walk_file(w, ino);
	return 0;
}

static int walk_tree(struct run *r, uint64_t root, struct jo_err *err)
{
	struct walk w = { .r = r, .err = err };
	struct jo_attr a;
	int rc;

	rc = jo_meta_getattr(r->vol->meta, root, &a, err);
	if (rc)
		return rc;
	if (a.type == JO_TYPE_FILE)
		return walk_file(&w, root);
	rc = walk_entry(NULL, 0, root, JO_TYPE_DIR, &w);
	while (!rc && w.ndirs) {
		uint64_t d = w.dirs[--w.ndirs];

		rc = jo_meta_readdir(r->vol->meta, d, walk_entry, &w, err);
	}
	free(w.dirs);
	return rc;
}

static int survey_all(struct run *r, struct jo_err *err)
{
	struct scan_ctx sc = { r, err };
	uint64_t root = JO_ROOT_INODE;
	int rc;

	if (!r->o.path)
		return jo_meta_scan_chunks(r->vol->meta, on_chunk, &sc, err);
	rc = jo_meta_resolve(r->vol->meta, r->o.path, &root, err);
	if (rc)
		return rc;
	return walk_tree(r, root, err);
}

/*
 * Record the surveyed candidates as tasks of task_size chunks, best first.
 * Unless --task-size says otherwise, tasks are cut small enough that every
 * worker gets several (a chunk takes about a second to compact), and at
 * most 64 chunks.
 */
static int record_tasks(struct run *r, struct jo_err *err)
{
	char (*items)[48];
	const char **ip;
	size_t n = 0;
	int rc;

	if (!r->o.task_size) {
		uint64_t per = r->st.candidates / ((uint64_t)r->o.threads * 4);

		r->o.task_size = per < 1 ? 1 : per > 64 ? 64 : (long)per;
	}
	if (jo_mut_task_max_items(r->vol->meta) &&
	    (size_t)r->o.task_size > jo_mut_task_max_items(r->vol->meta))
		r->o.task_size = (long)jo_mut_task_max_items(r->vol->meta);
	items = calloc((size_t)r->o.task_size, sizeof(*items));
	ip = calloc((size_t)r->o.task_size, sizeof(*ip));

	if (!items || !ip) {
		free(items);
		free(ip);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	rc = jo_mut_task_init(r->vol->meta, COMPACT_NS, err);
	if (!rc)
		rc = jo_xsort_finish(r->plan, err);
	for (;;) {
		const void *rec;
		size_t len;
		int more = rc ? 0 : jo_xsort_next(r->plan, &rec, &len, err);

		if (more < 0)
			rc = more;
		if (more == 1) {
			const uint8_t *p = rec;

			snprintf(items[n], sizeof(items[n]), "%" PRIu64 ":%u", jo_be64(p + 12),
				 (unsigned)jo_be32(p + 20));
			ip[n] = items[n];
			n++;
		}
		if (n && (more != 1 || n == (size_t)r->o.task_size) && !rc) {
			int64_t id = 0;
			size_t added = 0;

			rc = jo_mut_task_add(r->vol->meta, COMPACT_NS, "chunk", ip, n, &id, &added, err);
			if (!rc && added) {
				r->st.tasks_planned++;
				r->st.chunks_planned += added;
			}
			n = 0;
		}
		if (more != 1 || rc)
			break;
	}
	free(items);
	free(ip);
	return rc;
}

static void emit_chunk_json(struct run *r, uint64_t ino, uint32_t indx,
			    const struct compact_result *res, const char *error)
{
	static const char *names[] = { "compacted", "nothing", "conflict" };
	json_t *o;

	if (!r->ctx->json)
		return;
	o = json_pack("{s:s,s:I,s:i,s:s}", "type", "chunk", "inode", (json_int_t)ino,
		      "indx", (int)indx, "result", error ? "failed" : names[res->outcome]);
	if (error) {
		json_object_set_new(o, "error", json_string(error));
	} else if (res->outcome == COMPACT_DONE) {
		json_object_set_new(o, "records_before", json_integer((json_int_t)res->records_before));
		json_object_set_new(o, "records_after", json_integer((json_int_t)res->records_after));
		json_object_set_new(o, "new_slice", json_integer((json_int_t)res->new_id));
		json_object_set_new(o, "new_size", json_integer(res->new_size));
		json_object_set_new(o, "slices_freed", json_integer((json_int_t)res->slices_freed));
	}
	json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(o);
}

static void progress(struct run *r)
{
	time_t now = time(NULL);

	if (r->ctx->quiet || !r->ctx->tty || now == r->last_progress)
		return;
	r->last_progress = now;
	fprintf(stderr, "\rcompact: %" PRIu64 " compacted, %" PRIu64 " conflicts, %" PRIu64
		" failed, %.1f MiB written   ", r->st.compacted, r->st.conflicts, r->st.failed,
		(double)r->st.bytes_written / 1048576.0);
}

/* Compact one planned chunk; a conflict is tried again a little later. */
static void work_item(struct run *r, struct jo_vol *v, const struct compact_audit *au,
		      uint64_t ino, uint32_t indx)
{
	struct compact_result res;
	struct jo_err err = { 0 };
	int rc = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		jo_err_clear(&err);
		rc = compact_chunk(v, ino, indx, au, &res, &err);
		if (rc || res.outcome != COMPACT_CONFLICT || jo_cancelled())
			break;
		pthread_mutex_lock(&r->mu);
		r->st.conflicts++;
		pthread_mutex_unlock(&r->mu);
		usleep(200000);
	}
	pthread_mutex_lock(&r->mu);
	if (rc) {
		r->st.failed++;
		if (!r->first_err.code)
			r->first_err = err;
		jo_warn("inode %" PRIu64 " chunk %u: %s", ino, indx, err.msg);
		emit_chunk_json(r, ino, indx, &res, err.msg);
	} else {
		switch (res.outcome) {
		case COMPACT_DONE:
			r->st.compacted++;
			r->st.records_removed += res.records_before - res.records_after;
			break;
		case COMPACT_CONFLICT: r->st.gave_up++; break;
		case COMPACT_NOTHING: r->st.nothing++; break;
		}
		emit_chunk_json(r, ino, indx, &res, NULL);
	}
	r->st.bytes_read += res.bytes_read;
	r->st.gets += res.gets;
	r->st.bytes_written += res.bytes_written;
	r->st.slices_freed += res.slices_freed;
	r->st.blocks_deleted += res.blocks_deleted;
	progress(r);
	pthread_mutex_unlock(&r->mu);
}

static bool out_of_time(struct run *r)
{
	return r->deadline_ms && jo_lease_mono_ms() >= r->deadline_ms;
}

struct worker_arg {
	struct run *r;
	int idx;
};

/* One worker: claim a task, compact its chunks while the lease holds, complete. */
static void *worker(void *arg)
{
	struct worker_arg *wa = arg;
	struct run *r = wa->r;
	struct jo_vol *v = NULL;
	struct jo_lease *lease = NULL;
	struct jo_err err = { 0 };
	char id[160];
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	snprintf(id, sizeof(id), "%s/%d", r->owner, wa->idx);
	if (jo_vol_clone(r->vol, &v, &err) == 0) {
		struct jo_lease_opts lo = { .ns = COMPACT_NS, .owner = id, .lease_ms = r->o.lease_ms };

		if (jo_lease_new(&lease, v->meta, &lo, &err))
			lease = NULL;
	}
	while (lease && !jo_cancelled() && !out_of_time(r)) {
		struct jo_mut_task t = { 0 };
		struct compact_audit au = { r->audit, id, 0 };
		bool lost = false;
		char *save = NULL, *item;
		int rc = jo_lease_claim(lease, v->meta, &t, &err);

		if (rc == JO_ENOTFOUND) {
			jo_err_clear(&err);
			break;
		}
		if (rc)
			break;
		au.task = t.id;
		for (item = strtok_r(t.items, "\n", &save); item; item = strtok_r(NULL, "\n", &save)) {
			unsigned long long ino;
			unsigned indx;

			if (jo_cancelled() || out_of_time(r))
				break;
			if (!jo_lease_valid(lease)) {
				lost = true;
				break;
			}
			if (sscanf(item, "%llu:%u", &ino, &indx) != 2)
				continue;  /* not ours to judge: a later planner may fix it */
			work_item(r, v, &au, ino, indx);
		}
		if (!lost && item == NULL) {
			rc = jo_lease_complete(lease, v->meta, &err);
			lost = rc == JO_ECONFLICT;
			pthread_mutex_lock(&r->mu);
			r->st.tasks_done += rc == 0;
			pthread_mutex_unlock(&r->mu);
			if (rc && !lost)
				jo_warn("task %" PRId64 ": %s", t.id, err.msg);
		} else if (!lost) {
			/* shutdown or --max-time: give the rest back at once */
			(void)jo_lease_release(lease, v->meta, &err);
		}
		if (lost) {
			pthread_mutex_lock(&r->mu);
			r->st.leases_lost++;
			pthread_mutex_unlock(&r->mu);
			jo_warn("lost the lease of task %" PRId64 ": stopped working on it", t.id);
		}
		jo_mut_task_release_mem(&t);
	}
	if (err.code && err.code != JO_ENOTFOUND) {
		pthread_mutex_lock(&r->mu);
		if (!r->first_err.code)
			r->first_err = err;
		pthread_mutex_unlock(&r->mu);
	}
	jo_lease_free(lease);
	jo_vol_close(v);
	return NULL;
}

static int run_workers(struct run *r)
{
	pthread_t tids[64];
	struct worker_arg args[64];
	int nt;

	for (nt = 0; nt < r->o.threads; nt++) {
		args[nt].r = r;
		args[nt].idx = nt;
		if (pthread_create(&tids[nt], NULL, worker, &args[nt]))
			break;
	}
	for (int i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	return nt ? 0 : JO_ENOMEM;
}

static const char *mib(uint64_t b, char buf[32])
{
	snprintf(buf, 32, "%.1f MiB", (double)b / 1048576.0);
	return buf;
}

/* The --top list: JSON lines of type "fragmented", or a table. */
static void print_top(struct run *r)
{
	if (!r->ntop)
		return;
	if (!r->ctx->json)
		printf("most fragmented chunks (top %zu):\n  %8s %12s %12s %6s  %s\n", r->ntop,
		       "records", "hidden", "written", "chunk", "path");
	for (size_t i = 0; i < r->ntop; i++) {
		const struct frag *f = &r->top[i];
		struct jo_err e = { 0 };
		char *path = NULL, h[32], w[32];

		/* a file removed since the survey, or a hard link: named by inode */
		if (jo_meta_path_of(r->vol->meta, f->ino, &path, &e) != 0)
			path = NULL;
		if (r->ctx->json) {
			json_t *o = json_pack("{s:s,s:o,s:I,s:I,s:I,s:I,s:I}", "type", "fragmented",
					      "path", path ? json_string(path) : json_null(), "inode",
					      (json_int_t)f->ino, "chunk", (json_int_t)f->indx,
					      "records", (json_int_t)f->n, "hidden_bytes",
					      (json_int_t)f->hidden, "written_bytes",
					      (json_int_t)f->written);

			if (o) {
				json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
				fputc('\n', stdout);
				json_decref(o);
			}
		} else if (path) {
			printf("  %8" PRIu32 " %12s %12s %6" PRIu32 "  %s\n", f->n, mib(f->hidden, h),
			       mib(f->written, w), f->indx, path);
		} else {
			printf("  %8" PRIu32 " %12s %12s %6" PRIu32 "  (%s)\n", f->n,
			       mib(f->hidden, h), mib(f->written, w), f->indx, e.msg);
		}
		free(path);
	}
}

static void print_summary(struct run *r, int exit_code)
{
	struct cstats *s = &r->st;
	double secs = (double)(jo_lease_mono_ms() - r->started_ms) / 1000.0;
	bool surveyed = s->chunks > 0 || !r->o.worker;
	char label[32];
	struct jo_obj_stats os;

	jo_obj_get_stats(r->vol ? r->vol->obj : NULL, &os);

	if (r->ctx->tty && !r->ctx->quiet && r->o.apply)
		fputc('\n', stderr);
	if (r->ctx->json && surveyed && !r->incomplete)
		print_top(r);
	if (r->incomplete)
		fprintf(stderr, "%s %s: INCOMPLETE: %s did not finish: %s\n", r->ctx->prog,
			r->ctx->cmd, r->incomplete, strcmp(r->incomplete, "the chunk survey") == 0 ?
			"the counts are partial and nothing was planned from it" :
			"what is left stays for the next run");
	if (r->ctx->json) {
		json_t *o = json_object(), *h = json_object();

		for (int b = 0; b < JO_HIST_BUCKETS; b++) {
			if (!s->hist[b])
				continue;
			jo_hist_label(b, label, sizeof(label));
			json_object_set_new(h, label, json_integer((json_int_t)s->hist[b]));
		}
		if (r->incomplete && r->why && r->why->code)
			json_object_set_new(o, "error", json_string(r->why->msg[0] ? r->why->msg :
							       jo_err_name(r->why->code)));
		json_object_set_new(o, "dry_run", json_boolean(!r->o.apply));
		json_object_set_new(o, "chunks", json_integer((json_int_t)s->chunks));
		json_object_set_new(o, "records", json_integer((json_int_t)s->records));
		json_object_set_new(o, "hidden_bytes", json_integer((json_int_t)s->hidden));
		json_object_set_new(o, "candidates", json_integer((json_int_t)s->candidates));
		json_object_set_new(o, "candidate_records", json_integer((json_int_t)s->candidate_records));
		json_object_set_new(o, "candidate_hidden_bytes", json_integer((json_int_t)s->candidate_hidden));
		json_object_set_new(o, "tasks_planned", json_integer((json_int_t)s->tasks_planned));
		json_object_set_new(o, "chunks_planned", json_integer((json_int_t)s->chunks_planned));
		json_object_set_new(o, "tasks_done", json_integer((json_int_t)s->tasks_done));
		json_object_set_new(o, "compacted", json_integer((json_int_t)s->compacted));
		json_object_set_new(o, "conflicts", json_integer((json_int_t)s->conflicts));
		json_object_set_new(o, "gave_up", json_integer((json_int_t)s->gave_up));
		json_object_set_new(o, "skipped", json_integer((json_int_t)s->nothing));
		json_object_set_new(o, "failed", json_integer((json_int_t)s->failed));
		json_object_set_new(o, "leases_lost", json_integer((json_int_t)s->leases_lost));
		json_object_set_new(o, "records_removed", json_integer((json_int_t)s->records_removed));
		json_object_set_new(o, "bytes_read", json_integer((json_int_t)s->bytes_read));
		json_object_set_new(o, "bytes_written", json_integer((json_int_t)s->bytes_written));
		json_object_set_new(o, "slices_freed", json_integer((json_int_t)s->slices_freed));
		json_object_set_new(o, "blocks_deleted", json_integer((json_int_t)s->blocks_deleted));
		json_object_set_new(o, "block_gets", json_integer((json_int_t)s->gets));
		json_object_set_new(o, "requests", json_integer((json_int_t)os.requests));
		json_object_set_new(o, "connections", json_integer((json_int_t)os.connections));
		json_object_set_new(o, "hist", h);
		(void)cmd_summary_emit(r->ctx, o, !r->incomplete, exit_code); /* main checks stdout */
		return;
	}
	if (surveyed) {
		printf("chunks:            %" PRIu64 " (%" PRIu64 " records, %.1f MiB hidden by overwrites)\n",
		       s->chunks, s->records, (double)s->hidden / 1048576.0);
		printf("worth compacting:  %" PRIu64 " chunks (%" PRIu64 " records, %.1f MiB hidden)\n",
		       s->candidates, s->candidate_records, (double)s->candidate_hidden / 1048576.0);
		jo_hist_print(s->hist);
		if (!r->incomplete)
			print_top(r);
	}
	if (!r->o.apply) {
		printf("dry run: nothing changed; add --apply to compact\n");
		return;
	}
	if (r->o.plan || !r->o.worker)
		printf("planned:           %" PRIu64 " tasks, %" PRIu64 " chunks\n", s->tasks_planned,
		       s->chunks_planned);
	if (r->o.plan)
		return;
	printf("compacted:         %" PRIu64 " chunks in %" PRIu64 " tasks, %" PRIu64
	       " records removed, %" PRIu64 " conflicts (%" PRIu64 " chunks left for a later run), %"
	       PRIu64 " failed\n", s->compacted, s->tasks_done, s->records_removed, s->conflicts,
	       s->gave_up, s->failed);
	printf("data:              %.1f MiB read (%" PRIu64 " GETs), %.1f MiB written, %" PRIu64
	       " old slices freed (%" PRIu64 " blocks deleted), %.1f s\n",
	       (double)s->bytes_read / 1048576.0, s->gets, (double)s->bytes_written / 1048576.0,
	       s->slices_freed, s->blocks_deleted, secs);
	printf("object store:      %" PRIu64 " requests, %" PRIu64 " connections opened\n",
	       os.requests, os.connections);
}

/* --metrics-file: what this run did (main writes the file, common/run_metrics.c) */
static void record_metrics(struct run *r)
{
	struct cstats *s = &r->st;
	const struct { const char *what, *help; double v; } m[] = {
		{ "chunks_compacted", "chunks compacted by the last run", (double)s->compacted },
		{ "conflicts", "compare-and-swap conflicts in the last run", (double)s->conflicts },
		{ "errors", "chunks that failed in the last run", (double)s->failed },
		{ "records_removed", "slice records removed by the last run", (double)s->records_removed },
		{ "bytes_read", "bytes of old slices read by the last run", (double)s->bytes_read },
		{ "bytes_written", "bytes of new slices written by the last run", (double)s->bytes_written },
		{ "objects_deleted", "blocks of old slices deleted by the last run", (double)s->blocks_deleted },
		{ "tasks_completed", "tasks completed by the last run", (double)s->tasks_done },
		{ "tasks_planned", "tasks recorded by the last run", (double)s->tasks_planned },
		{ "leases_lost", "leases lost in the last run", (double)s->leases_lost },
		{ "candidate_chunks", "chunks worth compacting seen by the last survey", (double)s->candidates },
		{ "dry_run", "1 if the last run was a dry run", r->o.apply ? 0 : 1 },
	};

	/* a sample that cannot be recorded (out of memory) is left out */
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		(void)cmd_metric(r->ctx, m[i].what, m[i].help, NULL, m[i].v);
}

enum { MODE_DEFAULT, MODE_PLAN, MODE_WORKER, MODE_STATUS };

/* Parse and check the flags: true (META-URL in argv[1]), or false with the exit code. */
static bool compact_parse(struct run *r, struct cmd_vol_args *va, int argc, char **argv,
			  int *exit_code)
{
	struct jo_ctx *ctx = r->ctx;
	int n, mode = MODE_DEFAULT;
	struct jo_option opts[] = {
		OPT_GROUP("Modes (the same lease framework as `jfsops gc`):\n"
			  "      (default)            survey and report; with --apply: plan, then "
			  "work here"),
		OPT_CMDMODE(0, "plan", &mode, "with --apply, record the chunks worth compacting as "
			    "lease tasks in the volume's metadata, best first", MODE_PLAN),
		OPT_CMDMODE(0, "worker", &mode, "with --apply, claim recorded tasks and compact them",
			    MODE_WORKER),
		OPT_CMDMODE(0, "status", &mode, "print how many tasks are recorded and leased",
			    MODE_STATUS),
		OPT_GROUP("Options:"),
		OPT_BOOL(0, "apply", &r->o.apply, "compact (default: report only)"),
		OPT_STRING(0, "path", &r->o.path, "PATH", "only files under PATH (default: the whole "
			   "volume)"),
		OPT_UINT(0, "min-slices", &r->o.min_slices, "N", "chunks with at least N records", 0,
			 0),
		OPT_UINT(0, "min-garbage", &r->o.min_garbage, "PCT", "and at least PCT% of their "
			 "written bytes hidden", 0, 100),
		OPT_UINT(0, "top", &r->o.top, "N", "name the N chunks worth compacting that hold the "
			 "most records: file path, chunk index, records, bytes (default 10; 0: none)",
			 0, 1000),
		OPT_UINT(0, "threads", &r->o.threads, "N", "workers in this process", 1, 64),
		OPT_STRING(0, "id", &r->o.id, "NAME", "worker id in leases and the audit (default "
			   "host:pid)"),
		OPT_DURATION(0, "lease", &r->o.lease_ms, "DUR", "lease length (default 60s; renewed "
			     "every third)", 1000, 0),
		OPT_DURATION(0, "max-time", &r->o.max_time_ms, "DUR", "stop claiming after DUR and "
			     "release leases", 1, 0),
		OPT_UINT(0, "task-size", &r->o.task_size, "N", "chunks per task (default: candidates "
			 "/ (4 x threads), between 1 and 64)", 1, 10000),
		OPT_STRING(0, "audit", &r->o.audit_path, "FILE", "append a JSON line per deleted block "
			   "to FILE"),
		OPT_STRING(0, "metrics-file", &ctx->metrics_path, "PATH", "write Prometheus textfile "
			   "metrics when the run ends, also when it fails (atomic; default: none; "
			   "gauges labelled volume=, README \"Metrics\")"),
		OPT_BOOL(0, "json", &ctx->json, "JSON lines on stdout (one per chunk, then a "
			 "summary)"),
		OPT_BOOL('q', "quiet", &ctx->quiet, "no progress line"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, compact_usage, compact_tail, opts };

	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0) {
		*exit_code = cmd_opt_exit(ctx, n);
		return false;
	}
	if (n != 1) {
		*exit_code = cmd_usage_error(ctx, "expected one META-URL");
		return false;
	}
	r->o.plan = mode == MODE_PLAN;
	r->o.worker = mode == MODE_WORKER;
	r->o.status = mode == MODE_STATUS;
	if (r->o.worker && r->o.path) {
		*exit_code = cmd_usage_error(ctx, "--path belongs to planning, not to --worker");
		return false;
	}
	return true;
}

/* --status: the tasks recorded and leased. */
static int compact_status(struct run *r, struct jo_err *err)
{
	int64_t total = 0, leased = 0;

	if (jo_mut_task_count(r->vol->meta, COMPACT_NS, &total, &leased, err))
		return cmd_fail(r->ctx, err);
	jo_lease_print_status("compact", "compaction", total, leased, r->ctx->json);
	return 0;
}

/* --apply refused on a volume it cannot rewrite; the audit file opened: 0 or the exit code. */
static int compact_check_volume(struct run *r, struct jo_err *err)
{
	if (r->o.apply && r->vol->fmt.changelog) {
		jo_err_set(err, JO_EUNSUPPORTED,
			   "volume '%s' keeps a change log (ChangeLog): compaction would not be logged; refusing",
			   r->vol->fmt.name);
		return cmd_fail(r->ctx, err);
	}
	if (r->o.apply && r->vol->fmt.has_encrypt_key) {
		jo_err_set(err, JO_EUNSUPPORTED, "volume '%s' encrypts its data: not supported",
			   r->vol->fmt.name);
		return cmd_fail(r->ctx, err);
	}
	if (r->o.apply && r->o.audit_path && jo_audit_open(&r->audit, r->o.audit_path, err))
		return cmd_fail(r->ctx, err);
	return 0;
}

/* The chunk survey, and with --apply the plan recorded as tasks: 0 or an error code. */
static int compact_survey(struct run *r, struct jo_err *err)
{
	int rc = 0;

	r->incomplete = "the chunk survey";
	if (r->o.top && !(r->top = calloc(r->o.top, sizeof(*r->top))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (r->o.apply) {
		struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;

		xo.mem_limit = 64u << 20;
		rc = jo_xsort_new(&r->plan, &xo, err);
	}
	if (!rc)
		rc = survey_all(r, err);
	if (!rc && r->plan)
		rc = record_tasks(r, err);
	jo_xsort_free(r->plan);
	r->plan = NULL;
	if (rc)
		return rc;
	r->incomplete = NULL;
	return 0;
}

/* A run that stopped on err (code rc): its error line and summary, the exit code. */
static int compact_failed(struct run *r, int rc, struct jo_err *err)
{
	if (!r->incomplete)
		r->incomplete = "the run";
	r->why = err;
	if (rc == JO_ECANCELED || jo_cancelled())
		rc = 128 + (jo_cancelled() ? jo_cancelled() : SIGINT);
	else
		rc = cmd_fail(r->ctx, err);
	print_summary(r, rc);
	return rc;
}

/* A run that went to its end: the exit code from what the workers met, and the summary. */
static int compact_finished(struct run *r)
{
	int rc;

	if (jo_cancelled()) {
		r->incomplete = "the run (interrupted)";
		rc = 128 + jo_cancelled();
	} else if (r->st.leases_lost) {
		rc = JO_EXIT_CONFLICT;
	} else if (r->first_err.code && !r->st.failed) {
		r->incomplete = "the work";  /* a worker could not claim or complete a task */
		r->why = &r->first_err;
		rc = cmd_fail(r->ctx, &r->first_err);
	} else {
		rc = r->st.failed ? JO_EXIT_PARTIAL : 0;
	}
	print_summary(r, rc);
	return rc;
}

/* Survey (and plan) unless this process only works, then work with --apply: the exit code. */
static int compact_execute(struct run *r, struct jo_err *err)
{
	int rc;

	if (!(r->o.worker && r->o.apply) && (rc = compact_survey(r, err)))
		return compact_failed(r, rc, err);
	if (r->o.apply && !r->o.plan) {
		rc = run_workers(r);
		if (rc) {
			jo_err_set(err, rc, "cannot start workers");
			return compact_failed(r, rc, err);
		}
	}
	return compact_finished(r);
}

/* The audit file flushed (a failure to is a failure of the run) and closed. */
static int compact_close_audit(struct run *r, int rc)
{
	struct jo_err aerr = { 0 };

	if (!r->audit)
		return rc;
	if (jo_audit_sync(r->audit, &aerr)) {
		fprintf(stderr, "%s %s: audit: %s\n", r->ctx->prog, r->ctx->cmd, JO_ESC_TERM(aerr.msg));
		if (!rc)
			rc = JO_EXIT_FAIL;
	}
	jo_audit_close(r->audit);
	return rc;
}

int cmd_compact(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	struct run r = { .ctx = ctx, .o = { .min_slices = 2, .threads = 4, .lease_ms = 60000,
					     .task_size = 0, .top = 10 } };
	struct jo_err err = { 0 };
	int rc;

	if (!compact_parse(&r, &va, argc, argv, &rc))
		return rc;
	r.started = time(NULL);
	r.started_ms = jo_lease_mono_ms();
	if (r.o.max_time_ms)
		r.deadline_ms = r.started_ms + r.o.max_time_ms;
	jo_lease_owner(r.owner, sizeof(r.owner), r.o.id);
	pthread_mutex_init(&r.mu, NULL);
	va.read_only = !r.o.apply && !r.o.status;
	rc = cmd_open_volume(ctx, &va, argv[1], &r.vol);
	if (rc)
		goto out_args;
	if (r.o.status) {
		rc = compact_status(&r, &err);
	} else if (!(rc = compact_check_volume(&r, &err))) {
		rc = compact_execute(&r, &err);
		record_metrics(&r);
	}
	rc = compact_close_audit(&r, rc);
	jo_vol_close(r.vol);
	free(r.top);
out_args:
	cmd_vol_args_release(&va);
	return rc;
}
