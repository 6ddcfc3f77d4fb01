/* jfsops leakcheck: objects no metadata references, and references with no object. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cluster.h"
#include "common/command.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/human.h"
#include "common/lease.h"
#include "common/esc.h"
#include "common/extsort.h"
#include "common/file.h"
#include "common/object/object.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "leakcheck/leak.h"

static const char leakcheck_usage[] =
	"usage: jfsops leakcheck META-URL [--out FILE] [--json] [options]\n"
	"       jfsops leakcheck META-URL --delete-from FILE [--quarantine PATH] [--audit FILE]\n"
	"       jfsops leakcheck META-URL --restore PATH [--audit FILE]\n"
	"       jfsops leakcheck META-URL --cluster URL --work WORK (--plan | --worker [--out FILE])\n"
	"       jfsops leakcheck META-URL --cluster URL --work WORK [--out FILE | --status]\n"
	"\n"
	"Find block objects under NAME/chunks/ that no metadata references (leaked),\n"
	"and referenced blocks that have no object (missing), with bounded memory:\n"
	"both sides are sorted externally and merged in one pass. Read-only by\n"
	"default. References are scanned first (chunk lists, including those of\n"
	"removed files and of inodes that no longer exist; refcounts <= 0; every\n"
	"delayed slice regardless of trash days), then the objects are listed.\n"
	"An object is skipped (never a candidate) if it is younger than --min-age\n"
	"or its slice id is at or above the slice-id counter read before the scan.\n"
	"Objects under chunks/ that are no block key (a crashed writer's\n"
	"'.jfs.*.tmp.*' file on file storage, anything else) are reported as\n"
	"foreign and never deleted; `juicefs gc` counts them among its leaked.\n"
	"On file storage a symlink under chunks/ is foreign too (reason \"symlink\"):\n"
	"never followed, never deleted, nothing behind it is listed. A bucket (or\n"
	"bucket directory) that does not exist is an error (exit 8), never an empty\n"
	"listing that would make every reference look missing.\n"
	"\n";

static const char leakcheck_tail[] =
	CMD_VOL_NOTE
	"\n"
	"DUR: 90s, 50m, 1.5h, 2d, 500ms or plain seconds; SIZE: 4096, 64M, 1.5GiB.\n"
	"\n"
	"Metrics (--metrics-file; gauges labelled volume=, README \"Metrics\"):\n"
	"jfsops_leakcheck_last_run_objects_scanned, _last_run_referenced_slices,\n"
	"_last_run_leaked_objects, _last_run_leaked_bytes, _last_run_missing_objects,\n"
	"_last_run_skipped_objects, _last_run_foreign_objects, _last_run_errors; with\n"
	"--delete-from _last_run_candidates, _last_run_deleted_objects,\n"
	"_last_run_deleted_bytes, _last_run_kept_objects, _last_run_quarantined_objects\n"
	"and _last_run_dry_run; with --restore _last_run_restored_objects and\n"
	"_last_run_restore_kept_exists; always _last_run_exit_code, _last_run_success,\n"
	"_last_run_duration_seconds, _last_run_timestamp_seconds and\n"
	"_last_success_timestamp_seconds (a failed run keeps the one before). With\n"
	"--cluster: every sample labelled worker= too, the check's counters the job's\n"
	"(once complete), and _job_ranges{state=planned|done|failed|by_this_worker}.\n"
	"\n"
	"Exit codes: 0 clean, 1 leaked or missing objects found, 2 usage, 3 failed,\n"
	"4 some deletions failed, 5 a server was unreachable, timed out, loading or\n"
	"busy (Redis LOADING/BUSY, SQLite locked), 6 credentials rejected, 7 corrupt\n"
	"metadata or a malformed reply, 8 the bucket does not exist, 130/143\n"
	"interrupted. A scan cut by any error is never taken as whole: the run stops,\n"
	"writes no report, deletes nothing more, says INCOMPLETE and prints\n"
	"\"complete\": false in its --json summary.\n"
	"\n"
	"Cluster mode (--cluster URL --work WORK, a directory every host reaches or\n"
	"s3://[PROFILE@]BUCKET/PREFIX): --plan reads the counter and cuts\n"
	"the metadata's chunks into scan parts (SQL: primary-key ranges, etcd: key\n"
	"ranges, Redis: one part). Any number of --worker processes on any hosts\n"
	"then scan one part at a time, each a sorted zstd run of its references\n"
	"under WORK; once every part is done, the slice ids are cut into ranges\n"
	"(every key under chunks/, foreign ones too, belongs to exactly one) and the\n"
	"workers list one range at a time and merge it with every part's references\n"
	"of its ids, under a lease. A part or a range\n"
	"is recorded done in the transaction that completes its lease (never counted\n"
	"twice); a killed worker's range goes to another one when its lease runs out;\n"
	"a part not scanned whole, or a range whose listing or runs were not read\n"
	"whole, is retried and, after --max-attempts, failed. The job's report (the one-host report, line for line)\n"
	"is published only when every range is done: by a --worker given --out, or\n"
	"by the command without --plan/--worker, which lists nothing. A job with a\n"
	"failed part or range, or not done yet, says INCOMPLETE and exits 3.\n"
	"\n"
	"Examples:\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --out leaks.jsonl \\\n"
	"      --metrics-file /var/lib/node_exporter/textfile/jfsops_leakcheck.prom\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --delete-from leaks.jsonl --dry-run\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --delete-from leaks.jsonl \\\n"
	"      --quarantine leaks.tar.zst --audit audit.jsonl\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --restore leaks.tar.zst\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --cluster redis://10.0.0.5:6379/5 \\\n"
	"      --work /shared/lc --plan          # once, then on every host:\n"
	"  jfsops leakcheck redis://127.0.0.1:6379/1 --cluster redis://10.0.0.5:6379/5 \\\n"
	"      --work /shared/lc --worker --out leaks.jsonl\n"
	"  JFSOPS_WORK_ACCESS_KEY=... JFSOPS_WORK_SECRET_KEY=... jfsops leakcheck ... \\\n"
	"      --work 's3://scratch/lc?endpoint=http://10.0.0.7:9000' --worker\n";

struct lc_opts {
	const char *out;
	bool json;
	int64_t min_age;
	int threads;
	uint64_t mem;
	const char *tmp;
	const char *delete_from;
	const char *quarantine;
	const char *audit;
	double rate;
	bool dry_run;
	const char *restore;
	/* cluster mode */
	const char *cluster;      /* the coordinator's URL (as given: scrubbed after parsing) */
	const char *work;
	const char *config;          /* --config: also an s3:// --work's profiles */
	const char *worker_id;
	int cmode;                /* enum leak_cluster_mode: report, plan, worker */
	bool status;
	int64_t lease_ms;
	unsigned ranges, scan_parts, max_attempts, in_flight;
	uint64_t synth;           /* hidden: synthetic benchmark of N slices */
	const char *synth_keys;   /* benchmark: write its keys as text into DIR */
};

/* Missing blocks whose files a report names (24 bytes of memory each, with
 * their owners); past that, missing lines go out without files. */
#define LC_OWNERS_MAX 100000

/* What the run did, for --metrics-file. */
struct lc_mx {
	bool checked;             /* the check's merge completed */
	bool deleted;             /* --delete-from ran */
	struct leak_counts c;
	uint64_t foreign, listed;
	struct leak_delete_stats d;
	struct leak_restore_stats rs;
	bool cluster;             /* a cluster run: the job's counters, this worker's label */
	struct leak_cluster_result cl;
	char labels[300];
};

struct lc_run {
	struct jo_ctx *ctx;
	const struct lc_opts *o;
	struct jo_vol *vol;
	FILE *out;                /* candidates sink (tmp file or stdout) */
	bool out_json;
	bool progress_shown;
	int werr;                 /* errno of a failed write */
	const char *stage;        /* what the run was doing (for an incomplete run) */
	struct leak_owners *owners; /* missing items held back to name their files */
	long *sect;               /* a cluster range: where the merge's and the owned lines begin */
	const struct leak_range_ctx *rctx; /* a cluster range: its thread's meta, its listers */
	struct lc_mx mx;
};

/* cmd_fail, with 128 + the signal that canceled the run (130 or 143). */
static int lc_fail(struct jo_ctx *ctx, const struct jo_err *err)
{
	int rc = cmd_fail(ctx, err);

	if (err->code == JO_ECANCELED && jo_cancelled())
		rc = 128 + jo_cancelled();
	return rc;
}

static void fmt_time(int64_t t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t peak_rss(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (uint64_t)ru.ru_maxrss * 1024;
}

static void clear_progress(struct lc_run *r)
{
	if (r->progress_shown) {
		fputs("\r\033[K", stderr);
		r->progress_shown = false;
	}
}

static void on_progress(uint64_t listed, uint64_t done, uint64_t prefixes, void *payload)
{
	struct lc_run *r = payload;

	if (!r->ctx->tty || r->ctx->quiet)
		return;
	fprintf(stderr, "\r\033[Kleakcheck: listed %llu objects, %llu/%llu prefixes",
		(unsigned long long)listed, (unsigned long long)done, (unsigned long long)prefixes);
	r->progress_shown = true;
}

/*
 * One candidate line: JSON (jansson) or a tab-separated human line. A
 * missing block's line names the files whose chunks list its slice (owners,
 * when they were looked for: o non-NULL).
 */
static int write_line(struct lc_run *r, const struct leak_item *it, const struct leak_owners *o,
		      const struct leak_owner *own, size_t nown)
{
	char key[1200], ts[32];
	const char *k = it->key;

	if (!k) {
		if (jo_vol_block_key(r->vol, key, sizeof(key), it->id, it->indx, it->bsize) < 0)
			return JO_EINVAL;
		k = key;
	}
	if (r->out_json) {
		json_t *j = json_pack("{s:s, s:s, s:I, s:i, s:i, s:I, s:s}",
				      "type", leak_kind_name(it->kind), "key", k,
				      "slice", (json_int_t)it->id, "index", (int)it->indx,
				      "block_size", (int)it->bsize, "size", (json_int_t)it->size,
				      "reason", it->reason);
		char *s;

		if (!j)
			return JO_ENOMEM;
		if (it->kind != LEAK_MISSING) {
			fmt_time(it->mtime, ts, sizeof(ts));
			json_object_set_new(j, "last_modified", json_string(ts));
			json_object_set_new(j, "mtime", json_integer(it->mtime));
		}
		if (o) {
			json_t *fs = json_array();

			for (size_t i = 0; fs && i < nown; i++) {
				const char *why, *path = leak_owner_path(o, &own[i], &why);
				json_t *f = json_pack("{s:I,s:i,s:o}", "inode", (json_int_t)own[i].ino,
						      "chunk", (int)own[i].indx, "path",
						      path ? json_string(path) : json_null());

				if (f && !path)
					json_object_set_new(f, "why", json_string(why));
				json_array_append_new(fs, f);
			}
			json_object_set_new(j, "files", fs);
		}
		s = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		if (!s)
			return JO_ENOMEM;
		if (fprintf(r->out, "%s\n", s) < 0)
			r->werr = errno ? errno : EIO;
		free(s);
	} else {
		/* a foreign key is any object's name: no control byte reaches a terminal */
		if (fprintf(r->out, "%s\t%s\t%llu\t%s", leak_kind_name(it->kind), JO_ESC_TERM(k),
			    (unsigned long long)it->size, JO_ESC_TERM(it->reason)) < 0)
			r->werr = errno ? errno : EIO;
		for (size_t i = 0; o && i < nown; i++) {
			const char *why, *path = leak_owner_path(o, &own[i], &why);

			if (fprintf(r->out, "%sinode %llu chunk %u %s%s%s", i ? ", " : "\t",
				    (unsigned long long)own[i].ino, (unsigned)own[i].indx,
				    path ? JO_ESC_TERM(path) : "(", path ? "" : JO_ESC_TERM(why),
				    path ? "" : ")") < 0)
				r->werr = errno ? errno : EIO;
		}
		if (o && !nown && fputs("\tno file lists it (a removed file's or a delayed slice)",
					r->out) < 0)
			r->werr = errno ? errno : EIO;
		if (fputc('\n', r->out) == EOF)
			r->werr = errno ? errno : EIO;
	}
	return r->werr ? JO_EIO : 0;
}

static int write_item(const struct leak_item *it, void *payload)
{
	struct lc_run *r = payload;

	/* held back until the merge is over (at most LC_OWNERS_MAX: the rest
	 * go out now, without the files they belong to) */
	if (it->kind == LEAK_MISSING && r->owners && leak_owners_add(r->owners, it))
		return 0;
	return write_line(r, it, NULL, NULL, 0);
}

/* The held-back missing lines, with their files when the chunk scan worked. */
static int write_owned(struct lc_run *r, struct jo_err *err)
{
	struct leak_owners *o = r->owners;
	size_t n = leak_owners_count(o);
	struct jo_err e = { 0 };
	bool named;
	int rc = 0;

	if (!n)
		return 0;
	r->stage = "naming the files of missing blocks";
	named = leak_owners_resolve(o, r->rctx && r->rctx->meta ? r->rctx->meta : r->vol->meta,
				    &e) == 0;
	if (!named)
		fprintf(stderr, "%s %s: warning: the files of %zu missing blocks are not named: %s\n",
			r->ctx->prog, r->ctx->cmd, n, e.msg);
	for (size_t i = 0; i < n && !rc; i++) {
		const struct leak_owner *own;
		size_t nown;
		const struct leak_item *it = leak_owners_item(o, i, &own, &nown);

		rc = write_line(r, it, named ? o : NULL, own, nown);
	}
	if (rc)
		return jo_err_set(err, rc, "write candidates: %s", strerror(r->werr ? r->werr : EIO));
	return 0;
}

/* A check's counters in its JSON summary (the one-host run's and a cluster job's). */
static json_t *counts_json(const struct leak_counts *c, uint64_t foreign, uint64_t listed,
			   uint64_t next_chunk)
{
	json_t *j = json_object();

	json_object_set_new(j, "objects", json_integer((json_int_t)c->objects));
	json_object_set_new(j, "object_bytes", json_integer((json_int_t)c->object_bytes));
	for (int k = 0; k < LEAK_NKINDS; k++) {
		char name[48];
		uint64_t n = k == LEAK_FOREIGN ? foreign : c->n[k];

		json_object_set_new(j, leak_kind_name(k), json_integer((json_int_t)n));
		snprintf(name, sizeof(name), "%s_bytes", leak_kind_name(k));
		if (k != LEAK_FOREIGN)
			json_object_set_new(j, name, json_integer((json_int_t)c->bytes[k]));
	}
	json_object_set_new(j, "skipped_new_slice", json_integer((json_int_t)c->skipped_new_slice));
	json_object_set_new(j, "slices", json_integer((json_int_t)c->slices));
	json_object_set_new(j, "listed", json_integer((json_int_t)listed));
	json_object_set_new(j, "next_chunk", json_integer((json_int_t)next_chunk));
	return j;
}

static void print_summary(struct lc_run *r, const struct leak_counts *c,
			  const struct leak_ref_stats *rs, const struct leak_list_stats *ls,
			  uint64_t next_chunk, double elapsed, const struct jo_xsort_stats *xr,
			  const struct jo_xsort_stats *xo)
{
	char b[LEAK_NKINDS][32], tot[32], rss[32];
	uint64_t foreign = ls->foreign;
	struct jo_obj_stats os;

	jo_obj_get_stats(r->vol->obj, &os);

	for (int k = 0; k < LEAK_NKINDS; k++)
		jo_fmt_bytes((double)c->bytes[k], 2, b[k], sizeof(b[k]));
	jo_fmt_bytes((double)c->object_bytes, 2, tot, sizeof(tot));
	jo_fmt_bytes((double)peak_rss(), 2, rss, sizeof(rss));
	if (!r->ctx->quiet || c->n[LEAK_LEAKED] || c->n[LEAK_MISSING]) {
		fprintf(stderr,
			"%s %s: %llu block objects (%s) against %llu referenced slices in %.1f s\n"
			"  valid %llu (%s), pending delete %llu (%s), compacted %llu (%s), "
			"removed files %llu (%s)\n"
			"  leaked %llu (%s), missing %llu (%s), skipped %llu (%s), foreign %llu\n"
			"  slice counter %llu; peak RSS %s; sort runs %llu+%llu\n"
			"  object requests %llu (%llu key ranges), connections opened %llu\n",
			r->ctx->prog, r->ctx->cmd,
			(unsigned long long)c->objects, tot, (unsigned long long)c->slices, elapsed,
			(unsigned long long)c->n[LEAK_VALID], b[LEAK_VALID],
			(unsigned long long)c->n[LEAK_PENDING], b[LEAK_PENDING],
			(unsigned long long)c->n[LEAK_COMPACTED], b[LEAK_COMPACTED],
			(unsigned long long)c->n[LEAK_DELFILE], b[LEAK_DELFILE],
			(unsigned long long)c->n[LEAK_LEAKED], b[LEAK_LEAKED],
			(unsigned long long)c->n[LEAK_MISSING], b[LEAK_MISSING],
			(unsigned long long)c->n[LEAK_SKIPPED], b[LEAK_SKIPPED],
			(unsigned long long)foreign, (unsigned long long)next_chunk, rss,
			(unsigned long long)xr->runs, (unsigned long long)xo->runs,
			(unsigned long long)os.requests, (unsigned long long)ls->ranges,
			(unsigned long long)os.connections);
		if (c->skipped_new_slice)
			fprintf(stderr, "  (%llu skipped because their slice id is not below the counter)\n",
				(unsigned long long)c->skipped_new_slice);
	}
	if (r->o->json) {
		json_t *j = counts_json(c, foreign, ls->listed, next_chunk);

		json_object_set_new(j, "chunk_records", json_integer((json_int_t)rs->records));
		json_object_set_new(j, "peak_rss_bytes", json_integer((json_int_t)peak_rss()));
		json_object_set_new(j, "sort_runs", json_integer((json_int_t)(xr->runs + xo->runs)));
		json_object_set_new(j, "requests", json_integer((json_int_t)os.requests));
		json_object_set_new(j, "connections", json_integer((json_int_t)os.connections));
		json_object_set_new(j, "list_ranges", json_integer((json_int_t)ls->ranges));
		/* main checks stdout */
		(void)cmd_summary_emit(r->ctx, j, true, c->n[LEAK_LEAKED] || c->n[LEAK_MISSING] ?
						     JO_EXIT_FOUND : JO_EXIT_OK);
	}
}

/* A sorter of one side: half the memory limit each. */
static int lc_xsort_new(const struct lc_opts *o, struct jo_xsort **xs, struct jo_err *err)
{
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;

	xo.mem_limit = (size_t)(o->mem / 2);
	xo.tmp_dir = o->tmp;
	xo.threads = 2;
	return jo_xsort_new(xs, &xo, err);
}

/* This listing's listers: --list-threads, or its share of them (cluster ranges listed at once). */
static int list_threads(const struct lc_run *r)
{
	int n = r->o->threads > 0 ? (int)r->o->threads : 32;
	unsigned share = r->rctx ? r->rctx->share : 0;

	return share > 1 ? (n / (int)share > 0 ? n / (int)share : 1) : n;
}

/*
 * The object side and the merge, against the sorted references of
 * refs_next: what the one-host check and one range of a cluster job (rs,
 * ri; NULL: every key) share. Report lines go to r->out.
 */
static int check_objects(struct lc_run *r, const struct leak_density *density,
			 const struct leak_ranges *rs, size_t ri, leak_next_fn refs_next,
			 void *refs_src, uint64_t next_chunk, int64_t cutoff,
			 struct leak_counts *counts, struct leak_list_stats *ls,
			 struct jo_xsort_stats *so, struct jo_err *err)
{
	const struct lc_opts *o = r->o;
	struct jo_vol *v = r->vol;
	struct jo_xsort *xobjs = NULL;
	struct leak_list_opts lo = {
		.volname = v->fmt.name, .hash_prefix = v->fmt.hash_prefix,
		.block_size = v->block_size, .threads = list_threads(r), .density = density,
		.foreign_cb = write_item, .payload = r, .progress = on_progress,
		.ranges = rs, .range = ri,
	};
	struct leak_merge_opts mo = {
		.block_size = v->block_size, .next_chunk = next_chunk,
		.cutoff = cutoff, .cb = write_item, .payload = r,
	};
	int rc = lc_xsort_new(o, &xobjs, err);

	if (rc)
		return rc;
	r->stage = "the object listing";
	rc = leak_list_objects(v->obj, &lo, xobjs, ls, err);
	clear_progress(r);
	if (rc) {
		jo_err_wrap(err, "object listing failed, no report written");
		goto out;
	}
	rc = jo_xsort_finish(xobjs, err);
	if (rc)
		goto out;
	r->stage = "the merge";
	if (r->sect)
		r->sect[0] = ftell(r->out);
	rc = leak_owners_new(&r->owners, LC_OWNERS_MAX, err);
	if (!rc)
		rc = leak_merge(&mo, refs_next, refs_src, leak_xsort_next, xobjs, counts, err);
	if (!rc && r->sect)
		r->sect[1] = ftell(r->out);
	if (!rc)
		rc = write_owned(r, err);
	if (!rc && so)
		jo_xsort_get_stats(xobjs, so);
out:
	jo_xsort_free(xobjs);
	leak_owners_free(r->owners);
	r->owners = NULL;
	return rc;
}

static int run_check(struct lc_run *r, struct jo_err *err, int *exit_out)
{
	const struct lc_opts *o = r->o;
	struct jo_vol *v = r->vol;
	struct jo_xsort *xrefs = NULL;
	struct leak_ref_stats rs = { 0 };
	struct leak_list_stats ls = { 0 };
	struct leak_counts counts = { 0 };
	struct jo_xsort_stats sr = { 0 }, so = { 0 };
	struct leak_density density = { 0 };
	int64_t next_chunk = 0;
	struct jo_file *outf = NULL;
	double t0 = now_s();
	int64_t start = (int64_t)time(NULL);
	int rc;

	/* counter first: anything allocated after this point is in flight */
	rc = jo_meta_get_counter(v->meta, "nextChunk", &next_chunk, err);
	if (rc) {
		jo_err_wrap(err, "read nextChunk");
		goto out;
	}
	if (leak_density_init(&density, (uint64_t)next_chunk, v->block_size)) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	rc = lc_xsort_new(o, &xrefs, err);
	if (rc)
		goto out;

	if (o->out) {
		rc = jo_file_create(&outf, o->out, JO_FILE_PUBLIC, JO_FILE_STDIO, err);
		if (rc)
			goto out;
		r->out = outf->fp;
		r->out_json = true;
	} else {
		r->out = stdout;
		r->out_json = o->json;
	}

	if (r->ctx->tty && !r->ctx->quiet) {
		fputs("leakcheck: scanning metadata references...", stderr);
		r->progress_shown = true;
	}
	r->stage = "the metadata reference scan";
	rc = leak_refs_scan(v->meta, xrefs, &density, &rs, err);
	if (!rc)
		rc = jo_xsort_finish(xrefs, err);
	if (rc)
		goto out;
	clear_progress(r);

	rc = check_objects(r, &density, NULL, 0, leak_xsort_next, xrefs, (uint64_t)next_chunk,
			   start - o->min_age, &counts, &ls, &so, err);
	if (rc)
		goto out;
	r->stage = "writing the report";
	r->mx.checked = true;
	r->mx.c = counts;
	r->mx.foreign = ls.foreign;
	r->mx.listed = ls.listed;
	if (r->werr || fflush(r->out) != 0) {
		rc = jo_err_set(err, JO_EIO, "write candidates: %s", strerror(r->werr ? r->werr : errno));
		goto out;
	}
	if (outf) {
		r->out = NULL;
		rc = jo_file_commit(outf, err);
		if (rc)
			goto out;
	}
	jo_xsort_get_stats(xrefs, &sr);
	print_summary(r, &counts, &rs, &ls, (uint64_t)next_chunk, now_s() - t0, &sr, &so);
	*exit_out = counts.n[LEAK_LEAKED] || counts.n[LEAK_MISSING] ? JO_EXIT_FOUND : JO_EXIT_OK;
out:
	clear_progress(r);
	r->out = NULL;
	jo_file_abort(outf); /* an incomplete report must not look complete */
	jo_xsort_free(xrefs);
	leak_density_free(&density);
	return rc;
}

/* One range of a cluster job (leak_range_check): its lines as JSON, to out. */
static int check_range(void *p, FILE *out, const struct leak_ranges *rs, size_t ri,
		       const struct leak_density *density, leak_next_fn refs_next, void *refs_src,
		       uint64_t next_chunk, int64_t cutoff, struct leak_counts *c,
		       struct leak_list_stats *ls, long sect[2], const struct leak_range_ctx *ctx,
		       struct jo_err *err)
{
	/* a copy of the run's state of its own: ranges may be checked on several threads */
	struct lc_run r = *(const struct lc_run *)p;
	int rc;

	r.out = out;
	r.out_json = true;
	r.werr = 0;
	r.sect = sect;
	r.owners = NULL;
	r.progress_shown = false;
	r.rctx = ctx;
	rc = check_objects(&r, density, rs, ri, refs_next, refs_src, next_chunk, cutoff, c, ls,
			   NULL, err);
	if (!rc && r.werr)
		rc = jo_err_set(err, JO_EIO, "write the range's report: %s", strerror(r.werr));
	if (!rc && (sect[0] < 0 || sect[1] < sect[0]))
		rc = jo_err_set(err, JO_EIO, "the range's report: ftell: %s", strerror(errno));
	return rc;
}

static const char *const cl_mode_name[] = { "report", "plan", "worker", "status" };

/*
 * --cluster: this process's part of the job (plan, ranges, status, or the
 * report of a job that is done). A job that is not complete publishes no
 * report: INCOMPLETE, "complete": false, exit 3.
 */
static int run_cluster(struct lc_run *r, const char *url, struct jo_err *err, int *exit_out)
{
	const struct lc_opts *o = r->o;
	struct leak_cluster_result *res = &r->mx.cl;
	char owner[128], b[32];
	struct leak_cluster_opts co = {
		.url = url, .work = o->work, .config = o->config, .worker = owner, .out = o->out,
		.mode = o->status ? LEAK_CL_STATUS : o->cmode, .lease_ms = o->lease_ms,
		.ranges = o->ranges, .scan_parts = o->scan_parts, .max_attempts = o->max_attempts,
		.in_flight = o->in_flight,
		.json = o->json,
		.min_age = o->min_age, .mem = (size_t)(o->mem / 2), .tmp = o->tmp,
		.check = { check_range, r },
	};
	bool whole;
	json_t *j;
	int rc;

	cmd_env_meta_passwords(&co.password, &co.redis_password);
	jo_lease_owner(owner, sizeof(owner), o->worker_id);
	r->mx.cluster = true;
	jo_cl_worker_label(owner, r->mx.labels, sizeof(r->mx.labels));
	r->stage = co.mode == LEAK_CL_PLAN ? "the plan (counter and scan parts)"
		 : co.mode == LEAK_CL_WORKER ? "this worker's ranges" : "the cluster job";
	rc = leak_cluster_run(r->vol, &co, res, err);
	if (rc || co.mode == LEAK_CL_STATUS)
		return rc;
	whole = res->complete || co.mode == LEAK_CL_PLAN;
	r->mx.checked = res->complete;
	r->mx.c = res->c;
	r->mx.foreign = res->foreign;
	r->mx.listed = res->listed;
	jo_fmt_bytes((double)res->c.bytes[LEAK_LEAKED], 2, b, sizeof(b));
	if (co.mode == LEAK_CL_PLAN)
		fprintf(stderr, "%s %s: job %s: %zu scan parts planned (%zu done), %zu ranges\n",
			r->ctx->prog, r->ctx->cmd, res->ns, res->parts, res->parts_done, res->ranges);
	else if (res->complete)
		fprintf(stderr, "%s %s: job %s: %zu scan parts (%zu by this worker), %zu ranges done "
			"(%zu by this worker): %llu block objects, leaked %llu (%s), missing %llu, "
			"skipped %llu, foreign %llu%s\n", r->ctx->prog, r->ctx->cmd, res->ns,
			res->parts, res->parts_mine, res->ranges, res->mine,
			(unsigned long long)res->c.objects,
			(unsigned long long)res->c.n[LEAK_LEAKED], b,
			(unsigned long long)res->c.n[LEAK_MISSING],
			(unsigned long long)res->c.n[LEAK_SKIPPED],
			(unsigned long long)res->foreign,
			res->report_written ? "; report written" : "");
	else
		fprintf(stderr, "%s %s: INCOMPLETE: job %s: %zu of %zu scan parts done, %zu failed; "
			"%zu of %zu ranges done, %zu failed%s: no report, nothing is known about "
			"leaks\n", r->ctx->prog, r->ctx->cmd, res->ns, res->parts_done, res->parts,
			res->parts_failed, res->done, res->ranges, res->failed,
			res->planned ? "" : " (not planned)");
	*exit_out = !whole ? JO_EXIT_FAIL
		    : co.mode != LEAK_CL_PLAN && (res->c.n[LEAK_LEAKED] || res->c.n[LEAK_MISSING])
		    ? JO_EXIT_FOUND : JO_EXIT_OK;
	if (!o->json)
		return 0;
	j = res->complete ? counts_json(&res->c, res->foreign, res->listed, res->next_chunk)
			  : json_object();
	if (!whole) {
		json_object_set_new(j, "stage", json_string("the cluster job"));
		json_object_set_new(j, "error", json_string(res->parts_failed ? "scan parts failed"
							    : res->failed ? "ranges failed"
							    : "ranges not done yet"));
	}
	json_object_set_new(j, "job", json_string(res->ns));
	json_object_set_new(j, "mode", json_string(cl_mode_name[co.mode]));
	json_object_set_new(j, "ranges", json_pack("{s:I,s:I,s:I,s:I}", "planned",
						   (json_int_t)res->ranges, "done",
						   (json_int_t)res->done, "failed",
						   (json_int_t)res->failed, "by_this_worker",
						   (json_int_t)res->mine));
	json_object_set_new(j, "scan_parts", json_pack("{s:I,s:I,s:I,s:I}", "planned",
							(json_int_t)res->parts, "done",
							(json_int_t)res->parts_done, "failed",
							(json_int_t)res->parts_failed, "by_this_worker",
							(json_int_t)res->parts_mine));
	json_object_set_new(j, "report", json_boolean(res->report_written));
	(void)cmd_summary_emit(r->ctx, j, whole, *exit_out); /* main checks stdout */
	return 0;
}

static int run_delete(struct lc_run *r, struct jo_err *err, int *exit_out)
{
	const struct lc_opts *o = r->o;
	struct leak_delete_opts d = {
		.from = o->delete_from, .quarantine = o->quarantine, .audit = o->audit,
		.min_age = o->min_age, .rate = o->rate, .batch = 1000, .dry_run = o->dry_run,
	};
	struct leak_delete_stats st = { 0 };
	char b[32];
	int rc;

	/* a slow rate gets small batches: no burst of 1000 followed by a long pause */
	if (o->rate > 0 && o->rate < 1000)
		d.batch = o->rate < 1 ? 1 : (size_t)o->rate;
	r->stage = "the re-check and deletion";
	rc = leak_delete(r->vol, &d, &st, err);

	r->mx.deleted = true;
	r->mx.d = st;
	if (rc)
		return rc;
	if (o->dry_run) {
		jo_fmt_bytes((double)st.would_delete_bytes, 2, b, sizeof(b));
		fprintf(stderr, "%s %s: dry run: %llu candidates: would delete %llu (%s), %llu kept, "
			"%llu failed\n", r->ctx->prog, r->ctx->cmd, (unsigned long long)st.candidates,
			(unsigned long long)st.would_delete, b, (unsigned long long)st.kept,
			(unsigned long long)st.failed);
	} else {
		jo_fmt_bytes((double)st.deleted_bytes, 2, b, sizeof(b));
		fprintf(stderr, "%s %s: %llu candidates: %llu deleted (%s), %llu kept, %llu failed, "
			"%llu quarantined\n", r->ctx->prog, r->ctx->cmd,
			(unsigned long long)st.candidates, (unsigned long long)st.deleted, b,
			(unsigned long long)st.kept, (unsigned long long)st.failed,
			(unsigned long long)st.quarantined);
	}
	if (o->json) {
		json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b}",
				      "candidates", (json_int_t)st.candidates,
				      "deleted", (json_int_t)st.deleted,
				      "deleted_bytes", (json_int_t)st.deleted_bytes,
				      "kept", (json_int_t)st.kept, "failed", (json_int_t)st.failed,
				      "quarantined", (json_int_t)st.quarantined, "dry_run", o->dry_run);

		if (j && o->dry_run) {
			json_object_set_new(j, "would_delete", json_integer((json_int_t)st.would_delete));
			json_object_set_new(j, "would_delete_bytes",
					    json_integer((json_int_t)st.would_delete_bytes));
		}
		(void)cmd_summary_emit(r->ctx, j, true, st.failed ? JO_EXIT_PARTIAL : JO_EXIT_OK);
	}
	*exit_out = st.failed ? JO_EXIT_PARTIAL : JO_EXIT_OK;
	return 0;
}

/*
 * --restore: every entry created only. The summary says how many went back,
 * how many keys already had an object (left as they were) and how the store
 * checked that (jo_obj_create_check).
 */
static int run_restore(struct lc_run *r, struct jo_err *err)
{
	const struct lc_opts *o = r->o;
	struct leak_restore_stats *st = &r->mx.rs;
	const char *check;
	char b[32];
	int rc;

	r->stage = "the restore";
	rc = leak_restore(r->vol, o->restore, o->audit, st, err);
	check = jo_obj_create_check(r->vol->obj);
	if (rc) {
		if (st->restored || st->kept_exists)
			fprintf(stderr, "%s %s: INCOMPLETE: %llu of %llu objects restored, %llu kept: "
				"exists before it stopped\n", r->ctx->prog, r->ctx->cmd,
				(unsigned long long)st->restored, (unsigned long long)st->entries,
				(unsigned long long)st->kept_exists);
		return rc;
	}
	jo_fmt_bytes((double)st->restored_bytes, 2, b, sizeof(b));
	fprintf(stderr, "%s %s: restored %llu objects (%s) from '%s', %llu kept: exists "
		"(create check: %s)\n", r->ctx->prog, r->ctx->cmd, (unsigned long long)st->restored,
		b, o->restore, (unsigned long long)st->kept_exists, check);
	if (o->json) {
		json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:s}", "entries", (json_int_t)st->entries,
				      "restored", (json_int_t)st->restored,
				      "restored_bytes", (json_int_t)st->restored_bytes,
				      "kept_exists", (json_int_t)st->kept_exists, "create_check", check);

		(void)cmd_summary_emit(r->ctx, j, true, JO_EXIT_OK); /* main checks stdout */
	}
	return 0;
}

/*
 * Hidden benchmark mode: the same sort + merge on a synthetic workload; one
 * JSON line on stdout. With --synthetic-keys DIR it only writes the keys as
 * text (DIR/refs.txt, DIR/objs.txt) for the GNU sort + comm comparison.
 */
static int run_synthetic(struct jo_ctx *ctx, const struct lc_opts *o)
{
	struct leak_synth_result res;
	struct jo_err err = { 0 };
	int rc;

	if (o->synth_keys) {
		char rp[4096], op[4096];

		snprintf(rp, sizeof(rp), "%s/refs.txt", o->synth_keys);
		snprintf(op, sizeof(op), "%s/objs.txt", o->synth_keys);
		rc = leak_synth_keys(o->synth, rp, op, &err);
		return rc ? lc_fail(ctx, &err) : JO_EXIT_OK;
	}
	rc = leak_synth_run(o->synth, (size_t)o->mem, o->tmp, &res, &err);
	if (rc)
		return lc_fail(ctx, &err);
	json_t *j = json_pack("{s:s, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I}",
			      "type", "synthetic", "refs", (json_int_t)res.refs,
			      "objects", (json_int_t)res.objects, "sort_s", res.sort_s,
			      "merge_s", res.merge_s,
			      "leaked", (json_int_t)res.counts.n[LEAK_LEAKED],
			      "missing", (json_int_t)res.counts.n[LEAK_MISSING],
			      "valid", (json_int_t)res.counts.n[LEAK_VALID],
			      "runs", (json_int_t)(res.xs_refs.runs + res.xs_objs.runs),
			      "tmp_bytes", (json_int_t)(res.xs_refs.tmp_bytes + res.xs_objs.tmp_bytes),
			      "peak_rss_bytes", (json_int_t)peak_rss());
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (s)
		printf("%s\n", s);
	free(s);
	json_decref(j);
	return JO_EXIT_OK;
}

/*
 * A run that failed or was interrupted: one line saying what was not read
 * whole and what that means, and with --json a summary with "complete":
 * false. A check writes no report then; a deletion run says how far it got
 * (each group of candidates is re-checked by a whole scan before any of it
 * is deleted, so what was deleted had been re-checked).
 */
static void print_incomplete(const struct lc_run *r, const struct jo_err *err, int exit_code)
{
	const struct leak_delete_stats *d = &r->mx.d;
	const char *stage = r->stage ? r->stage : "opening the volume";

	if (r->o->delete_from)
		fprintf(stderr, "%s %s: INCOMPLETE: %s did not finish: %llu of %llu candidates "
			"deleted, the rest left in place\n", r->ctx->prog, r->ctx->cmd, stage,
			(unsigned long long)d->deleted, (unsigned long long)d->candidates);
	else
		fprintf(stderr, "%s %s: INCOMPLETE: %s did not finish: no report, nothing is "
			"known about leaks\n", r->ctx->prog, r->ctx->cmd, stage);
	if (!r->o->json)
		return;
	json_t *j = json_pack("{s:s, s:s}", "stage", stage, "error",
			      err->msg[0] ? err->msg : jo_err_name(err->code));

	if (j && r->o->delete_from) {
		json_object_set_new(j, "candidates", json_integer((json_int_t)d->candidates));
		json_object_set_new(j, "deleted", json_integer((json_int_t)d->deleted));
		json_object_set_new(j, "kept", json_integer((json_int_t)d->kept));
		json_object_set_new(j, "failed", json_integer((json_int_t)d->failed));
		json_object_set_new(j, "dry_run", json_boolean(r->o->dry_run));
	}
	(void)cmd_summary_emit(r->ctx, j, false, exit_code); /* main checks stdout */
}

/*
 * --metrics-file: what this run did (main writes the file and the samples
 * every command has, common/run_metrics.c). A completed check is a success whatever
 * it found (exit 0 or 1).
 */
static void record_metrics(const struct lc_run *r, struct jo_ctx *ctx, bool failed)
{
	const struct lc_mx *x = &r->mx;
	const struct leak_counts *c = &x->c;
	struct mrow { const char *what, *help; double v; };
	const struct mrow check[] = {
		{ "objects_scanned", "block objects listed and merged by the last run",
		  (double)c->objects },
		{ "scanned_bytes", "bytes of the block objects merged by the last run",
		  (double)c->object_bytes },
		{ "referenced_slices", "distinct slices the metadata references", (double)c->slices },
		{ "referenced_objects",
		  "block objects some metadata reference owns (valid, pending, trash, removed files)",
		  (double)(c->n[LEAK_VALID] + c->n[LEAK_DELFILE] + c->n[LEAK_COMPACTED] +
			   c->n[LEAK_PENDING]) },
		{ "leaked_objects", "block objects no metadata references", (double)c->n[LEAK_LEAKED] },
		{ "leaked_bytes", "bytes of the leaked block objects", (double)c->bytes[LEAK_LEAKED] },
		{ "missing_objects", "referenced blocks that have no object", (double)c->n[LEAK_MISSING] },
		{ "skipped_objects", "unreferenced objects too new to judge (--min-age, slice counter)",
		  (double)c->n[LEAK_SKIPPED] },
		{ "foreign_objects", "objects under chunks/ that are no block key of this volume",
		  (double)x->foreign },
	};
	const struct mrow del[] = {
		{ "candidates", "leaked lines of the --delete-from report", (double)x->d.candidates },
		{ "deleted_objects", "objects deleted by the last run", (double)x->d.deleted },
		{ "deleted_bytes", "bytes deleted by the last run", (double)x->d.deleted_bytes },
		{ "kept_objects", "candidates the re-check kept", (double)x->d.kept },
		{ "quarantined_objects", "objects saved to the quarantine archive",
		  (double)x->d.quarantined },
		{ "dry_run", "1 if the last run was a dry run", r->o->dry_run ? 1 : 0 },
	};

	const char *lab = x->cluster ? x->labels : NULL;

	/* a sample that cannot be recorded (out of memory) is left out */
	for (size_t i = 0; !r->o->delete_from && !r->o->restore && x->checked &&
	     i < sizeof(check) / sizeof(check[0]); i++)
		(void)cmd_metric(ctx, check[i].what, check[i].help, lab, check[i].v);
	if (x->cluster) {
		/* a cluster run: the job's counters (when complete), its scan parts and ranges */
		const struct { bool part; const char *state; size_t v; } st[] = {
			{ false, "planned", x->cl.ranges }, { false, "done", x->cl.done },
			{ false, "failed", x->cl.failed }, { false, "by_this_worker", x->cl.mine },
			{ true, "planned", x->cl.parts }, { true, "done", x->cl.parts_done },
			{ true, "failed", x->cl.parts_failed },
			{ true, "by_this_worker", x->cl.parts_mine },
		};
		char l2[400];

		for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
			snprintf(l2, sizeof(l2), "%s,state=\"%s\"", lab, st[i].state);
			(void)cmd_metric_state(ctx, st[i].part ? "job_scan_parts" : "job_ranges",
					       st[i].part ? "reference scan parts of the cluster job, "
					       "by state (at the end of this run)"
					       : "ranges of the cluster job, by state (at the end of "
					       "this run)", l2, (double)st[i].v);
		}
	}
	for (size_t i = 0; r->o->delete_from && i < sizeof(del) / sizeof(del[0]); i++)
		(void)cmd_metric(ctx, del[i].what, del[i].help, NULL, del[i].v);
	if (r->o->restore) {
		(void)cmd_metric(ctx, "restored_objects", "objects put back from the quarantine archive",
				 NULL, (double)x->rs.restored);
		(void)cmd_metric(ctx, "restore_kept_exists",
				 "archive entries whose key had an object (left as it was)", NULL,
				 (double)x->rs.kept_exists);
	}
	(void)cmd_metric(ctx, "errors", "failed deletions, plus 1 when the run itself failed", lab,
			 (double)x->d.failed + (failed ? 1 : 0));
}

/* The options' combinations: 0, or the usage error's exit code (one line said). */
static int check_opts(struct jo_ctx *ctx, const struct lc_opts *o, int n)
{
	if (n != 1)
		return cmd_usage_error(ctx, "expected one META-URL");
	if (o->delete_from && o->restore)
		return cmd_usage_error(ctx, "--delete-from and --restore exclude each other");
	if ((o->quarantine || o->rate > 0 || o->dry_run) && !o->delete_from)
		return cmd_usage_error(ctx, "--quarantine, --delete-rate and --dry-run go with "
				       "--delete-from");
	if (o->audit && !o->delete_from && !o->restore)
		return cmd_usage_error(ctx, "--audit goes with --delete-from or --restore");
	if (o->out && (o->delete_from || o->restore))
		return cmd_usage_error(ctx, "--out is for the check, not with --delete-from/--restore");
	if (!o->cluster && (o->cmode || o->status || o->work || o->ranges || o->scan_parts ||
			    o->worker_id || o->in_flight))
		return cmd_usage_error(ctx, "--plan, --worker, --status, --work, --ranges, "
				       "--scan-parts, --ranges-in-flight and --worker-id go with "
				       "--cluster");
	if (o->cluster && (o->delete_from || o->restore))
		return cmd_usage_error(ctx, "--cluster checks; --delete-from takes the job's report "
				       "(written by --out) as it takes a one-host report");
	if (o->cluster && !o->work)
		return cmd_usage_error(ctx, "--cluster needs --work DIR|s3://BUCKET/PREFIX, a "
				       "place every worker reaches");
	if (o->work && strstr(o->work, "://") && strncmp(o->work, "s3://", 5) != 0)
		return cmd_usage_error(ctx, "--work takes a directory every worker reaches (a shared "
				       "file system) or s3://[PROFILE@]BUCKET/PREFIX");
	if (o->status && o->cmode)
		return cmd_usage_error(ctx, "--status excludes --plan and --worker");
	if (o->out && (o->cmode == LEAK_CL_PLAN || o->status))
		return cmd_usage_error(ctx, "--out goes with a check, a --worker or the job's report");
	return 0;
}

int cmd_leakcheck(int argc, char **argv, struct jo_ctx *ctx)
{
	struct lc_opts o = { .min_age = 3600, .threads = 32, .mem = 256u << 20, .lease_ms = 30000,
			     .max_attempts = 3 };
	char *cluster_url = NULL;
	struct cmd_vol_args va = { 0 };
	struct lc_run r = { .ctx = ctx, .o = &o };
	struct jo_err err = { 0 };
	int n, rc, code = JO_EXIT_OK;
	struct jo_option opts[] = {
		OPT_GROUP("Check options:"),
		OPT_STRING(0, "out", &o.out, "FILE", "write candidates as JSON lines (type leaked, "
			   "missing, skipped, foreign; key, slice, size, last_modified, reason; a "
			   "missing block also names its files: inode, chunk, path); published only "
			   "when the run completes (default: none, candidates go to stdout)"),
		OPT_BOOL(0, "json", &o.json, "summary (and, without --out, candidates) as JSON lines "
			 "on stdout"),
		OPT_DURATION_S(0, "min-age", &o.min_age, "DUR", "safety window", 0, 0),
		OPT_UINT(0, "list-threads", &o.threads, "N", "concurrent listers", 1, 1024),
		OPT_SIZE(0, "mem-limit", &o.mem, "SIZE", "most memory the two sorts may take (they "
			 "start at a few MiB and grow with the listing)", 4u << 20, 0),
		OPT_STRING(0, "tmp-dir", &o.tmp, "DIR", "where sorted runs go (default $TMPDIR or "
			   "/tmp)"),
		OPT_STRING(0, "metrics-file", &ctx->metrics_path, "PATH", "write Prometheus textfile "
			   "metrics at the end of the run, also when it fails (atomic)"),
		OPT_GROUP("Deletion (phase two, from a report of this volume):"),
		OPT_STRING(0, "delete-from", &o.delete_from, "FILE", "re-check each 'leaked' line of "
			   "FILE against a fresh metadata scan, the counter and the object's age "
			   "(HEAD), then delete it in batches"),
		OPT_STRING(0, "quarantine", &o.quarantine, "PATH", "first save every object to the "
			   "tar.zst archive PATH (published, fsync'd, before anything is deleted; "
			   "default: none, no copy is kept)"),
		OPT_STRING(0, "audit", &o.audit, "FILE", "append one JSON line per candidate: time, "
			   "key, reason, result; written as the work is done and fsync'd before the "
			   "next step: the re-check's verdicts, then a \"deleting\" line per key before "
			   "its batch is sent and its result before the next batch (with --restore: one "
			   "line per entry, \"restored\" or \"kept: exists\")"),
		OPT_DECIMAL(0, "delete-rate", &o.rate, "N", "at most N deletions per second (default "
			    "unlimited)", 0),
		OPT_BOOL(0, "dry-run", &o.dry_run, "re-check only, delete nothing; says what it would "
			 "delete"),
		OPT_STRING(0, "restore", &o.restore, "PATH", "put the objects of a quarantine archive "
			   "back, never over an object: a key that has one is left as it is and "
			   "counted as \"kept: exists\". The archive is read whole first; an entry that "
			   "is not a block key of this volume refuses it all (exit 2) before anything "
			   "is written"),
		OPT_GROUP("Cluster mode (any number of hosts share one check through a coordinator):"),
		OPT_STRING(0, "cluster", &o.cluster, "URL", "the coordinator, a META-URL of an engine "
			   "you already run (redis://host:6379/5, postgres://..., mysql://..., "
			   "etcd://host:2379/NAME, sqlite3:///path.db on one host; default: none, this "
			   "host alone). It needs no JuiceFS volume; the job's records go in a "
			   "namespace of their own. Without --plan, --worker or --status: the job's "
			   "report (to --out or stdout), only when every range is done"),
		OPT_CMDMODE(0, "plan", &o.cmode, "read the slice-id counter, cut the metadata's "
			    "chunks into scan parts (--scan-parts) and record one task per part; the "
			    "workers scan the parts, and the ids are cut into ranges of about equal "
			    "expected blocks once every part is done", LEAK_CL_PLAN),
		OPT_CMDMODE(0, "worker", &o.cmode, "claim scan parts, then ranges, by lease (each "
			    "part's sorted references a run under --work; each range listed and "
			    "merged with its references from every part), until "
			    "none is left (waits for a plan); with --out, the job's report once it is "
			    "complete", LEAK_CL_WORKER),
		OPT_BOOL(0, "status", &o.status, "print the job: ranges planned, leased (by whom), "
			 "done, failed; each worker's rate (--json: one object)"),
		OPT_STRING(0, "work", &o.work, "DIR|s3://BUCKET/PREFIX", "the job's scratch place, "
			   "one every host reaches: a directory of a shared file system, or a bucket "
			   "prefix (s3://[PROFILE@]BUCKET/PREFIX as sync takes it; keys from the "
			   "profile, JFSOPS_WORK_ACCESS_KEY/_SECRET_KEY or AWS_*). The reference runs "
			   "and the ranges' report lines go under it, in JOB/. Never inside the "
			   "volume's objects. The job is named by the volume and this place: a new "
			   "one is a new check"),
		OPT_UINT(0, "ranges", &o.ranges, "N", "ranges to cut the slice ids into (default 0: "
			 "one per ~200,000 referenced blocks, at least 16; never more than one per "
			 "1000 ids below the counter)", 0, 100000),
		OPT_UINT(0, "scan-parts", &o.scan_parts, "N", "parts of the reference scan, each "
			 "a task for any worker (default 8): SQL engines by ranges of the chunk "
			 "table's primary key, etcd by key ranges; Redis is scanned in one part", 1,
			 4096),
		OPT_DURATION(0, "lease", &o.lease_ms, "DUR", "lease of a scan part or range "
			     "(default 30s; renewed every third): a killed worker's part or range "
			     "goes to another worker after it", 1000, 0),
		OPT_UINT(0, "ranges-in-flight", &o.in_flight, "N", "tasks one --worker works at "
			 "once, each on a lease of its own: ranges listed side by side, each with "
			 "its share of --list-threads (one range's last leaves overlap the next), "
			 "scan parts read side by side (default 2; each takes the memory of one, "
			 "--mem-limit)", 1, 16),
		OPT_UINT(0, "max-attempts", &o.max_attempts, "N", "failures before a scan part or "
			 "range is given up (default 3): the job is then incomplete and publishes no "
			 "report", 1, 1000),
		OPT_STRING(0, "worker-id", &o.worker_id, "NAME", "this worker's name in leases, "
			   "--status and metrics (default host:pid)"),
		OPT_GROUP("Benchmark only (bench/leakcheck; no META-URL, touches no volume):"),
		OPT_SIZE(0, "synthetic", &o.synth, "N", "sort and merge a synthetic workload of N "
			 "slices and print one JSON line (default: none)", 1, 0),
		OPT_STRING(0, "synthetic-keys", &o.synth_keys, "DIR", "with --synthetic: only write "
			   "the keys as text to DIR/refs.txt and DIR/objs.txt"),
		OPT_GROUP(""),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, leakcheck_usage, leakcheck_tail, opts };

	o.json = ctx->json;
	o.tmp = getenv("TMPDIR");
	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0)
		return cmd_opt_exit(ctx, n);
	if (o.synth) {
		if (n)
			return cmd_usage_error(ctx, "--synthetic takes no META-URL");
		return run_synthetic(ctx, &o);
	}
	if ((rc = check_opts(ctx, &o, n)) != 0)
		return rc;
	if (o.cluster) {
		/* kept, then its password hidden from ps */
		cluster_url = strdup(o.cluster);
		if (!cluster_url)
			return cmd_fail(ctx, &(struct jo_err){ .code = JO_ENOMEM, .msg = "out of memory" });
		cmd_scrub_url_password((char *)o.cluster);
	}

	o.config = va.config;
	va.read_only = true;  /* leakcheck never writes metadata, only deletes objects */
	va.list_temp_files = true;  /* a crashed writer's temp files are reported (foreign) */
	va.list_links = true;       /* symlinks under chunks/ too: never followed or deleted */
	rc = cmd_open_volume(ctx, &va, argv[1], &r.vol);
	if (rc)
		goto out;
	if (o.restore) {
		rc = run_restore(&r, &err);
	} else if (o.delete_from) {
		rc = run_delete(&r, &err, &code);
	} else if (cluster_url) {
		rc = run_cluster(&r, cluster_url, &err, &code);
	} else {
		rc = run_check(&r, &err, &code);
	}
	if (rc) {
		rc = lc_fail(ctx, &err);
		/*
		 * A missing bucket (JO_ESTATE, exit 8) is bad input found before
		 * anything was read, as is a refused --work (exit 2): its one
		 * error line says it all, no summary.
		 */
		if (!o.restore && !(err.code == JO_ESTATE && !o.delete_from) && rc != JO_EXIT_USAGE)
			print_incomplete(&r, &err, rc);
	} else {
		rc = code;
	}
out:
	if (ctx->metrics_path)
		record_metrics(&r, ctx, rc != JO_EXIT_OK && rc != JO_EXIT_FOUND &&
					rc != JO_EXIT_PARTIAL);
	jo_vol_close(r.vol);
	cmd_vol_args_release(&va);
	free(cluster_url);
	return rc;
}
