/*
 * oneshot.c: the one-shot modes of `jfsops warmup` (common/warmup/run.h).
 * The ranges are mapped and sorted once (run.c), then each distinct block is
 * printed (list), read through the mount by the fetcher threads (warm),
 * looked up in the mount's cache (check) or evicted exactly (evict, evict.c).
 */
#include "common/warmup/run.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/command.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/exit.h"
#include "common/jfs/jfs.h"
#include "common/warmup/cache.h"
#include "common/warmup/warmup.h"

/* The exit code of a finished run: interrupted, some blocks failed, or fine. */
static int end_code(bool partial)
{
	if (jo_cancelled())
		return 128 + jo_cancelled();
	return partial ? JO_EXIT_PARTIAL : JO_EXIT_OK;
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void print_json(json_t *o)
{
	if (!o)
		return;
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(o);
}

static json_t *block_json(const char *key, const struct jo_warmup_block *b, const char *vp)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:I}", "type", "block", "key", key, "size",
			 (json_int_t)b->bsize, "file", vp, "offset", (json_int_t)b->anchor);
}

/* wu_next_block with the block's object key; counts the block in st's totals. */
static int next_keyed(struct wu_state *st, struct jo_warmup_block *b, char **vp, char *key,
		      size_t cap)
{
	int rc = wu_next_block(st, b, vp);

	if (rc <= 0)
		return rc;
	jo_block_key(key, cap, st->fmt.name, st->fmt.hash_prefix, b->id, b->indx, b->bsize);
	st->blocks++;
	st->bytes += b->bsize;
	return 1;
}

/* ------------------------------------------------------------- list, warm */

struct fail_ctx {
	struct jo_ctx *ctx;
	pthread_mutex_t mu;  /* workers and the main thread both report */
	uint64_t shown;
};

static void on_fail(const char *key, const char *path, uint64_t off, const struct jo_err *err,
		    void *payload)
{
	struct fail_ctx *fc = payload;

	pthread_mutex_lock(&fc->mu);
	if (fc->ctx->json) {
		print_json(json_pack("{s:s,s:s,s:s,s:I,s:s}", "type", "error", "key", key, "path",
				     path, "offset", (json_int_t)off, "error", err->msg));
		fflush(stdout);
	}
	if (fc->shown++ < 20)
		fprintf(stderr, "%s %s: cannot warm block '%s' (%s at %" PRIu64 "): %s\n",
			fc->ctx->prog, fc->ctx->cmd, JO_ESC_TERM(key), JO_ESC_TERM(path), off,
			JO_ESC_TERM(err->msg));
	else if (fc->shown == 21)
		fprintf(stderr, "%s %s: more blocks failed (see the summary)\n", fc->ctx->prog,
			fc->ctx->cmd);
	pthread_mutex_unlock(&fc->mu);
}

static void progress(const struct jo_ctx *ctx, struct jo_warmup_fetcher *f, uint64_t total,
		     bool final)
{
	struct jo_warmup_fetch_stats fs;

	if (!ctx->tty || ctx->quiet)
		return;
	jo_warmup_fetcher_stats(f, &fs);
	fprintf(stderr, "\rwarmup: %" PRIu64 "/%" PRIu64 " blocks, %.1f MiB, %" PRIu64 " failed%s",
		fs.done + fs.failed, total, fs.bytes_done / 1048576.0, fs.failed,
		final ? "\n" : "   ");
}

/* What a warm run measured of the mount: its object GETs before and after. */
struct mount_gets {
	bool have;
	struct jo_warmup_counters c0, c1;
};

/* The summary of list and warm; fs NULL for list. */
static int warm_summary(struct wu_state *st, const struct jo_warmup_fetch_stats *fs,
			const struct mount_gets *mg)
{
	const struct jo_ctx *ctx = st->ctx;
	bool dry = fs == NULL;
	double secs = wu_now() - st->t0;

	if (ctx->json) {
		json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "mode",
				      dry ? "list" : "warm", "files", (json_int_t)st->ninos, "ranges",
				      (json_int_t)st->ranges, "requested_bytes",
				      (json_int_t)st->req_bytes, "blocks", (json_int_t)st->blocks,
				      "bytes", (json_int_t)st->bytes, "block_refs",
				      (json_int_t)st->block_refs, "dry_run", dry);

		if (o && !dry) {
			json_object_set_new(o, "warmed", json_integer((json_int_t)fs->done));
			json_object_set_new(o, "warmed_bytes", json_integer((json_int_t)fs->bytes_done));
			json_object_set_new(o, "failed", json_integer((json_int_t)st->failed));
			json_object_set_new(o, "prefetch_waits",
					    json_integer((json_int_t)fs->confirm_reads));
			json_object_set_new(o, "prefetch_cache_seen",
					    json_integer((json_int_t)fs->cache_seen));
			if (mg->have) {
				json_object_set_new(o, "mount_gets",
						    json_integer((json_int_t)(mg->c1.gets - mg->c0.gets)));
				json_object_set_new(o, "mount_get_bytes",
						    json_integer((json_int_t)(mg->c1.get_bytes -
									      mg->c0.get_bytes)));
			}
		}
		/* main checks stdout */
		(void)cmd_summary_emit(ctx, o, !jo_cancelled(), end_code(st->failed));
	} else {
		FILE *sf = dry ? stdout : stderr;

		fprintf(sf, "%sfiles %zu, ranges %" PRIu64 " (%" PRIu64 " bytes), blocks %" PRIu64
			" (%" PRIu64 " bytes)", dry ? "total: " : "warmup: ", st->ninos,
			st->ranges, st->req_bytes, st->blocks, st->bytes);
		if (!dry) {
			fprintf(sf, ", warmed %" PRIu64 " (%" PRIu64 " bytes), failed %" PRIu64,
				fs->done, fs->bytes_done, st->failed);
			if (mg->have)
				fprintf(sf, "; the mount did %" PRIu64 " object GETs (%" PRIu64
					" bytes)", mg->c1.gets - mg->c0.gets,
					mg->c1.get_bytes - mg->c0.get_bytes);
		}
		fprintf(sf, " in %.1fs\n", secs);
	}
	return end_code(st->failed);
}

int wu_run_list(struct wu_state *st, const char *ranges, uint64_t mem_limit)
{
	struct jo_warmup_block b;
	char key[512], *vp;
	int rc = wu_map_ranges(st, ranges, mem_limit);

	if (rc)
		return cmd_fail(st->ctx, &st->err);
	while ((rc = next_keyed(st, &b, &vp, key, sizeof(key))) > 0) {
		if (st->ctx->json)
			print_json(block_json(key, &b, vp));
		else
			printf("%s\t%" PRIu32 "\n", JO_ESC_TERM(key), b.bsize);
		free(vp);
	}
	if (rc < 0)
		return cmd_fail(st->ctx, &st->err);
	return warm_summary(st, NULL, NULL);
}

/* Queue one block on the fetcher; a block that cannot be read counts as failed. */
static int warm_one(struct wu_state *st, const struct jo_warmup_mount *mi,
		    struct jo_warmup_fetcher *fetcher, struct fail_ctx *fc,
		    const struct jo_warmup_block *b, const char *key, const char *vp)
{
	struct jo_warmup_read rd;
	struct jo_err perr = { 0 };
	char *mpath = wu_mount_path(st->mount, mi->subdir, vp);
	int rc = 0;

	if (!mpath) {
		jo_err_set(&perr, JO_ENOTFOUND, "'%s' is outside the mounted directory '%s'", vp,
			   mi->subdir);
		on_fail(key, vp, b->anchor, &perr, fc);
		st->failed++;
	} else if (jo_warmup_plan_read(b, mi, &rd, &perr)) {
		on_fail(key, mpath, b->anchor, &perr, fc);
		st->failed++;
	} else {
		rc = jo_warmup_fetcher_add(fetcher, mpath, key, b->bsize, &rd, &st->err);
	}
	free(mpath);
	return rc;
}

/* Queue every block, then wait for the fetcher threads (or an interruption). */
static int warm_all(struct wu_state *st, const struct jo_warmup_mount *mi,
		    struct jo_warmup_fetcher *fetcher, struct fail_ctx *fc)
{
	struct jo_warmup_fetch_stats fs;
	struct jo_warmup_block b;
	char key[512], *vp;
	double last_prog = 0;
	int rc;

	while ((rc = next_keyed(st, &b, &vp, key, sizeof(key))) > 0) {
		rc = warm_one(st, mi, fetcher, fc, &b, key, vp);
		free(vp);
		if (rc)
			return rc;
		if (wu_now() - last_prog > 0.5) {
			last_prog = wu_now();
			progress(st->ctx, fetcher, st->blocks, false);
		}
	}
	if (rc < 0)
		return rc;
	for (;;) {
		jo_warmup_fetcher_stats(fetcher, &fs);
		if (fs.done + fs.failed >= fs.queued || jo_cancelled())
			break;
		progress(st->ctx, fetcher, st->blocks, false);
		usleep(200000);
	}
	jo_warmup_fetcher_finish(fetcher);
	progress(st->ctx, fetcher, st->blocks, true);
	return 0;
}

int wu_run_warm(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		uint64_t mem_limit, int threads)
{
	struct fail_ctx fc = { .ctx = st->ctx, .mu = PTHREAD_MUTEX_INITIALIZER };
	struct jo_warmup_fetcher *fetcher = NULL;
	struct jo_warmup_fetch_stats fs = { 0 };
	struct mount_gets mg = { 0 };
	struct jo_warmup_cachedirs cd = { 0 };
	struct jo_err cerr = { 0 };
	/* a memory cache cannot be watched: prefetched blocks are read twice */
	bool have_cd = !jo_warmup_cachedirs_init(&cd, mi->cache_dir, &cerr);
	int rc;

	mg.have = !jo_warmup_mount_stats(mi->stats_path, &mg.c0, &st->err);
	rc = wu_map_ranges(st, ranges, mem_limit);
	if (!rc)
		rc = jo_warmup_fetcher_new(&fetcher, threads, mi->prefetch, on_fail, &fc, &st->err);
	if (!rc && have_cd)
		jo_warmup_fetcher_watch_cache(fetcher, &cd);
	if (!rc)
		rc = warm_all(st, mi, fetcher, &fc);
	if (!rc)
		jo_warmup_fetcher_stats(fetcher, &fs);
	jo_warmup_fetcher_free(fetcher);
	jo_warmup_cachedirs_release(&cd);
	if (rc)
		return cmd_fail(st->ctx, &st->err);
	st->failed += fs.failed;
	st->warmed = fs.done;
	st->warmed_bytes = fs.bytes_done;
	if (mg.have && jo_warmup_mount_stats(mi->stats_path, &mg.c1, &st->err))
		mg.have = false;
	return warm_summary(st, &fs, &mg);
}

/* ------------------------------------------------------------ check, evict */

/* Where the cached blocks are: bytes and blocks per cache directory. */
struct check_locs {
	const char **dir;
	uint64_t *bytes, *blocks;
	size_t n;
	uint64_t cached_blocks, cached_bytes;
};

static void locs_add(struct check_locs *l, const char *dir, uint32_t bsize)
{
	l->cached_blocks++;
	l->cached_bytes += bsize;
	for (size_t i = 0; i < l->n; i++) {
		if (l->dir[i] == dir) {
			l->bytes[i] += bsize;
			l->blocks[i]++;
			return;
		}
	}
	l->dir[l->n] = dir;
	l->bytes[l->n] = bsize;
	l->blocks[l->n++] = 1;
}

static void locs_release(struct check_locs *l)
{
	free(l->dir);
	free(l->bytes);
	free(l->blocks);
}

/*
 * The mount's cache directories, to look blocks up in: false (with a
 * warning) when the cache is in memory. JO_ENOMEM in *rc.
 */
static bool open_cachedirs(struct wu_state *st, const struct jo_warmup_mount *mi, bool check,
			   struct jo_warmup_cachedirs *cd, struct check_locs *locs, int *rc)
{
	struct jo_err cerr = { 0 };

	*rc = 0;
	if (jo_warmup_cachedirs_init(cd, mi->cache_dir, &cerr)) {
		fprintf(stderr, "%s %s: warning: %s; %s\n", st->ctx->prog, st->ctx->cmd,
			JO_ESC_TERM(cerr.msg),
			check ? "only the mount's whole-file check is reported" :
			"the mount's whole-file eviction cannot be undone for other blocks");
		return false;
	}
	locs->dir = calloc(cd->n, sizeof(*locs->dir));
	locs->bytes = calloc(cd->n, sizeof(*locs->bytes));
	locs->blocks = calloc(cd->n, sizeof(*locs->blocks));
	if (!locs->dir || !locs->bytes || !locs->blocks)
		*rc = jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	return true;
}

/*
 * Every distinct block, looked up in the cache directories (cd NULL: not
 * looked up); with targets, added to them; with ctx->json and no targets
 * (check), one line each.
 */
static int scan_cached(struct wu_state *st, const struct jo_warmup_cachedirs *cd,
		       struct check_locs *locs, struct wu_bset *targets)
{
	struct jo_warmup_block b;
	char key[512], *vp;
	int rc;

	while ((rc = next_keyed(st, &b, &vp, key, sizeof(key))) > 0) {
		const char *loc = NULL;
		int has = cd ? jo_warmup_cache_has(cd, key, &loc, &st->err) : 0;

		if (has > 0)
			locs_add(locs, loc, b.bsize);
		if (has >= 0 && targets && wu_bset_add(targets, b.id, b.indx, b.bsize) < 0)
			has = jo_err_set(&st->err, JO_ENOMEM, "out of memory");
		if (has >= 0 && !targets && st->ctx->json) {
			json_t *o = block_json(key, &b, vp);

			if (o && cd) {
				json_object_set_new(o, "cached", json_boolean(has));
				if (has)
					json_object_set_new(o, "location", json_string(loc));
			}
			print_json(o);
		}
		free(vp);
		if (has < 0)
			return has;
	}
	return rc;
}

/* The path of a volume path relative to the mount root, as the control file wants it. */
static char *ctl_path(const char *mnt, const struct jo_warmup_mount *mi, const char *vp)
{
	char *mp = wu_mount_path(mnt, mi->subdir, vp);
	char *r;

	if (!mp)
		return NULL;
	r = strdup(mp + strlen(mnt));
	free(mp);
	return r;
}

/* The mount's own check of the whole files (what `juicefs warmup --check` reports). */
static int mount_check(struct wu_state *st, const struct jo_warmup_mount *mi, int threads,
		       struct jo_warmup_ctl_reply *sum)
{
	char **paths = NULL;
	size_t n = 0;
	int rc = 0;

	memset(sum, 0, sizeof(*sum));
	if (!st->npaths)
		return 0;
	paths = calloc(st->npaths, sizeof(*paths));
	if (!paths)
		return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < st->npaths; i++) {
		paths[n] = ctl_path(st->mount, mi, st->paths[i]);
		if (paths[n])
			n++;
	}
	for (size_t off = 0; off < n && !rc; off += JO_WARMUP_CTL_MAX_PATHS) {
		struct jo_warmup_ctl_reply r;
		size_t k = n - off < JO_WARMUP_CTL_MAX_PATHS ? n - off : JO_WARMUP_CTL_MAX_PATHS;

		rc = jo_warmup_ctl_call(mi->control_path, JO_WARMUP_CTL_CHECK,
					(const char *const *)paths + off, k, (unsigned)threads, &r,
					&st->err);
		if (rc)
			break;
		sum->files += r.files;
		sum->slices += r.slices;
		sum->total_bytes += r.total_bytes;
		sum->miss_bytes += r.miss_bytes;
		jo_warmup_ctl_reply_release(&r);
	}
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

static void check_summary_json(struct wu_state *st, bool have_cd, const struct check_locs *locs,
			       const struct jo_warmup_ctl_reply *mc)
{
	uint64_t mcached = mc->total_bytes - mc->miss_bytes;
	json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "mode", "check", "files",
			      (json_int_t)st->ninos, "ranges", (json_int_t)st->ranges,
			      "requested_bytes", (json_int_t)st->req_bytes, "blocks",
			      (json_int_t)st->blocks, "bytes", (json_int_t)st->bytes,
			      "block_exact", have_cd);

	if (!o)
		return;
	if (have_cd) {
		json_t *lo = json_object();

		json_object_set_new(o, "cached_blocks", json_integer((json_int_t)locs->cached_blocks));
		json_object_set_new(o, "cached_bytes", json_integer((json_int_t)locs->cached_bytes));
		json_object_set_new(o, "percent", json_real(pct(locs->cached_bytes, st->bytes)));
		for (size_t i = 0; lo && i < locs->n; i++)
			json_object_set_new(lo, locs->dir[i], json_integer((json_int_t)locs->bytes[i]));
		if (lo)
			json_object_set_new(o, "locations", lo);
	}
	json_object_set_new(o, "mount_files", json_integer((json_int_t)mc->files));
	json_object_set_new(o, "mount_bytes", json_integer((json_int_t)mc->total_bytes));
	json_object_set_new(o, "mount_cached_bytes", json_integer((json_int_t)mcached));
	json_object_set_new(o, "mount_percent", json_real(pct(mcached, mc->total_bytes)));
	/* main checks stdout */
	(void)cmd_summary_emit(st->ctx, o, !jo_cancelled(), end_code(false));
}

static void check_summary_text(struct wu_state *st, bool have_cd, const struct check_locs *locs,
			       const struct jo_warmup_ctl_reply *mc)
{
	uint64_t mcached = mc->total_bytes - mc->miss_bytes;

	printf("check: %" PRIu64 " ranges in %zu files -> %" PRIu64 " blocks (%" PRIu64
	       " bytes)", st->ranges, st->ninos, st->blocks, st->bytes);
	if (have_cd)
		printf(": %" PRIu64 " cached (%" PRIu64 " bytes, %.1f%%)\n", locs->cached_blocks,
		       locs->cached_bytes, pct(locs->cached_bytes, st->bytes));
	else
		printf(": not looked up block by block (the cache is in memory)\n");
	for (size_t i = 0; i < locs->n; i++)
		printf("  %s\t%" PRIu64 " blocks\t%" PRIu64 " bytes\t%.1f%%\n",
		       JO_ESC_TERM(locs->dir[i]), locs->blocks[i], locs->bytes[i],
		       pct(locs->bytes[i], st->bytes));
	printf("the mount's own check of the whole files (every block of every slice "
	       "they show): %" PRIu64 " files, %" PRIu64 " of %" PRIu64
	       " bytes (%.1f%%) cached\n", mc->files, mcached, mc->total_bytes,
	       pct(mcached, mc->total_bytes));
}

int wu_run_check(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		 uint64_t mem_limit, int threads)
{
	struct jo_warmup_cachedirs cd = { 0 };
	struct check_locs locs = { 0 };
	struct jo_warmup_ctl_reply mc;
	bool have_cd;
	int rc;

	st->keep_paths = true;
	have_cd = open_cachedirs(st, mi, true, &cd, &locs, &rc);
	if (!rc)
		rc = wu_map_ranges(st, ranges, mem_limit);
	if (!rc)
		rc = scan_cached(st, have_cd ? &cd : NULL, &locs, NULL);
	if (!rc)
		rc = mount_check(st, mi, threads, &mc);
	if (!rc && st->ctx->json)
		check_summary_json(st, have_cd, &locs, &mc);
	else if (!rc)
		check_summary_text(st, have_cd, &locs, &mc);
	locs_release(&locs);
	jo_warmup_cachedirs_release(&cd);
	return rc ? cmd_fail(st->ctx, &st->err) : end_code(false);
}

static bool no_window(uint64_t id, uint32_t indx, void *payload)
{
	(void)id;
	(void)indx;
	(void)payload;
	return false;
}

/* The files of the ranges under the mount (mps: their mount paths, owned), then wu_evict. */
static int evict_files(struct wu_state *st, const struct jo_warmup_mount *mi,
		       const struct jo_warmup_cachedirs *cd, const struct wu_bset *targets,
		       enum wu_others others, int threads, struct wu_evict_result *er)
{
	size_t cap = st->npaths ? st->npaths : 1, nf = 0;
	struct wu_evict_file *files = calloc(cap, sizeof(*files));
	char **mps = calloc(cap, sizeof(*mps));
	int rc = 0;

	if (!files || !mps)
		rc = jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < st->npaths && !rc; i++) {
		mps[nf] = wu_mount_path(st->mount, mi->subdir, st->paths[i]);
		if (!mps[nf]) {
			fprintf(stderr, "%s %s: '%s' is outside the mounted directory '%s': not "
				"evicted\n", st->ctx->prog, st->ctx->cmd, JO_ESC_TERM(st->paths[i]),
				JO_ESC_TERM(mi->subdir));
			continue;
		}
		files[nf].vpath = st->paths[i];
		files[nf].mpath = mps[nf];
		rc = wu_lookup(st, st->paths[i], &files[nf].ino, &files[nf].flen);
		nf++;
	}
	if (!rc)
		rc = wu_evict(st, mi, cd, files, nf, targets, others, no_window, NULL, threads, er,
			      &st->err);
	for (size_t i = 0; mps && i < nf; i++)
		free(mps[i]);
	free(mps);
	free(files);
	return rc;
}

static void evict_summary(struct wu_state *st, const struct wu_evict_result *er,
			  enum wu_others others)
{
	if (st->ctx->json) {
		json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b,s:s}", "mode", "evict", "files",
				      (json_int_t)er->files, "ranges", (json_int_t)st->ranges,
				      "blocks", (json_int_t)er->blocks, "bytes", (json_int_t)er->bytes,
				      "mount_bytes", (json_int_t)er->mount_bytes, "block_exact",
				      er->block_exact, "others",
				      others == WU_OTHERS_KEEP ? "keep" : "drop");

		if (o && er->block_exact) {
			const struct { const char *k; uint64_t v; } f[] = {
				{ "cached_blocks", er->cached_blocks },
				{ "cached_bytes", er->cached_bytes },
				{ "still_cached", er->still_blocks },
				{ "other_blocks", er->other_blocks },
				{ "other_bytes", er->other_bytes },
				{ "rewarmed_blocks", er->rewarmed_blocks },
				{ "rewarmed_bytes", er->rewarmed_bytes },
				{ "lost_blocks", er->lost_blocks },
			};

			for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
				json_object_set_new(o, f[i].k, json_integer((json_int_t)f[i].v));
		}
		/* main checks stdout */
		if (o)
			(void)cmd_summary_emit(st->ctx, o, !jo_cancelled(),
					       end_code(er->still_blocks || er->lost_blocks));
	} else if (er->block_exact) {
		fprintf(stderr, "evict: %" PRIu64 " blocks (%" PRIu64 " bytes) in %" PRIu64
			" files, %" PRIu64 " of them were cached and are gone (%" PRIu64
			" still cached); the mount evicts whole files: %" PRIu64
			" other cached blocks of them (%" PRIu64 " bytes) %s%s in %.1fs\n",
			er->blocks, er->bytes, er->files, er->cached_blocks - er->still_blocks,
			er->still_blocks, er->other_blocks, er->other_bytes,
			others == WU_OTHERS_KEEP ? "were read back" : "went too",
			er->lost_blocks ? " (some could not be read back)" : "", wu_now() - st->t0);
	} else {
		fprintf(stderr, "evict: %" PRIu64 " blocks (%" PRIu64 " bytes) in %" PRIu64
			" files evicted with every other block of those files (the cache is "
			"in memory) in %.1fs\n", er->blocks, er->bytes, er->files,
			wu_now() - st->t0);
	}
}

int wu_run_evict(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		 uint64_t mem_limit, int threads, enum wu_others others)
{
	struct jo_warmup_cachedirs cd = { 0 };
	struct check_locs locs = { 0 };
	struct wu_bset *targets = NULL;
	struct wu_evict_result er = { 0 };
	bool have_cd;
	int rc;

	st->keep_paths = true;
	have_cd = open_cachedirs(st, mi, false, &cd, &locs, &rc);
	if (!rc && wu_bset_new(&targets))
		rc = jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = wu_map_ranges(st, ranges, mem_limit);
	if (!rc)
		rc = scan_cached(st, have_cd ? &cd : NULL, &locs, targets);
	if (!rc)
		rc = evict_files(st, mi, have_cd ? &cd : NULL, targets, others, threads, &er);
	if (!rc)
		evict_summary(st, &er, others);
	wu_bset_free(targets);
	locs_release(&locs);
	jo_warmup_cachedirs_release(&cd);
	if (rc)
		return cmd_fail(st->ctx, &st->err);
	return end_code(er.still_blocks || er.lost_blocks);
}
