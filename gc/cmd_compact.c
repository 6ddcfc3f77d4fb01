/* jfsops compact: survey fragmentation, and compact chunks as JuiceFS does. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/cmd.h"
#include "cmd/exit.h"
#include "cmd/util.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "gc/compact.h"

static const char compact_usage[] =
	"usage: jfsops compact META-URL [--path PATH] [--min-slices N] [--min-garbage PCT]\n"
	"                      [--apply] [--threads N] [--json]\n"
	"\n"
	"Find chunks whose slice lists have grown long (appends, overwrites) and,\n"
	"with --apply, rewrite each as one slice exactly as JuiceFS compacts: the\n"
	"visible bytes are written as a new slice (new id from the volume's counter,\n"
	"the volume's block size and compression), then swapped in with the same\n"
	"compare-and-swap on the record prefix that JuiceFS uses, so writes made\n"
	"meanwhile are kept. Old slices leave through the normal deletion path:\n"
	"at once when trash is off and nothing else references them, else as\n"
	"delayed slices that `jfsops gc` reclaims after TrashDays.\n"
	"Without --apply nothing is changed: a fragmentation report is printed.\n"
	"\n"
	"Options:\n"
	"      --path PATH        only files under PATH (default: the whole volume)\n"
	"      --min-slices N     chunks with at least N records (default 2)\n"
	"      --min-garbage PCT  and at least PCT%% of their written bytes hidden (default 0)\n"
	"      --apply            compact (default: report only)\n"
	"      --threads N        chunks compacted at once (default 4)\n"
	"      --json             JSON lines on stdout (one per chunk with --apply, then a summary)\n"
	"  -h, --help             show this help\n"
	CMD_VOL_HELP
	"\n"
	"Examples:\n"
	"  jfsops compact redis://127.0.0.1:6379/1                       # report\n"
	"  jfsops compact sqlite3:///var/jfs/meta.db --path /logs --min-slices 20 --apply\n";

struct copts {
	const char *path;
	uint64_t min_slices;
	unsigned min_garbage;
	bool apply;
	int threads;
};

#define NBUCKETS 12

struct cstats {
	uint64_t chunks, candidates, records, candidate_records, hidden, candidate_hidden;
	uint64_t hist[NBUCKETS];
	/* apply */
	uint64_t compacted, conflicts, gave_up, nothing, failed;
	uint64_t records_removed, bytes_read, bytes_written, slices_freed, blocks_deleted;
};

/* ---- a bounded queue of chunks for the worker threads ---- */
struct item {
	uint64_t ino;
	uint32_t indx;
};

struct queue {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full;
	struct item v[1024];
	size_t head, n;
	bool closed;
};

static void q_push(struct queue *q, struct item it)
{
	pthread_mutex_lock(&q->mu);
	while (q->n == 1024 && !jo_cancelled())
		pthread_cond_wait(&q->not_full, &q->mu);
	if (q->n < 1024) {
		q->v[(q->head + q->n) % 1024] = it;
		q->n++;
		pthread_cond_signal(&q->not_empty);
	}
	pthread_mutex_unlock(&q->mu);
}

static bool q_pop(struct queue *q, struct item *out)
{
	bool ok = false;

	pthread_mutex_lock(&q->mu);
	while (q->n == 0 && !q->closed)
		pthread_cond_wait(&q->not_empty, &q->mu);
	if (q->n) {
		*out = q->v[q->head];
		q->head = (q->head + 1) % 1024;
		q->n--;
		ok = true;
		pthread_cond_signal(&q->not_full);
	}
	pthread_mutex_unlock(&q->mu);
	return ok;
}

static void q_close(struct queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->closed = true;
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->mu);
}

struct run {
	struct jo_ctx *ctx;
	struct jo_vol *vol;
	struct copts o;
	struct cstats st;
	struct queue q;
	pthread_mutex_t mu;   /* guards st (apply part) and stdout */
	struct jo_err first_err;
	time_t started;
	time_t last_progress;
};

static int bucket_of(uint64_t n)
{
	int b = 0;
	uint64_t lim = 1;

	while (n > lim && b < NBUCKETS - 1) {
		lim <<= 1;
		b++;
	}
	return b;
}

static void bucket_label(int b, char *buf, size_t cap)
{
	if (b == 0)
		snprintf(buf, cap, "1");
	else if (b == 1)
		snprintf(buf, cap, "2");
	else if (b == NBUCKETS - 1)
		snprintf(buf, cap, ">%u", 1u << (b - 1));
	else
		snprintf(buf, cap, "%u-%u", (1u << (b - 1)) + 1, 1u << b);
}

/* Survey one chunk; queue it when it is worth compacting. */
static int survey(struct run *r, uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len)
{
	struct jo_slice *recs = NULL, *segs = NULL;
	size_t n = 0, ns = 0;
	uint64_t written = 0, visible = 0, hidden;

	if (jo_slices_decode(raw, len, &recs, &n, NULL) || n == 0) {
		free(recs);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		if (recs[i].id)
			written += recs[i].len;
	if (jo_chunk_visible(recs, n, &segs, &ns) == 0)
		for (size_t i = 0; i < ns; i++)
			if (segs[i].id)
				visible += segs[i].len;
	hidden = written > visible ? written - visible : 0;
	free(recs);
	free(segs);
	r->st.chunks++;
	r->st.records += n;
	r->st.hidden += hidden;
	r->st.hist[bucket_of(n)]++;
	if (n < 2 || n < r->o.min_slices)
		return 0;
	if (r->o.min_garbage && (!written || hidden * 100 < (uint64_t)r->o.min_garbage * written))
		return 0;
	r->st.candidates++;
	r->st.candidate_records += n;
	r->st.candidate_hidden += hidden;
	if (r->o.apply) {
		struct item it = { ino, indx };

		q_push(&r->q, it);
	}
	return jo_cancelled() ? JO_ECANCELED : 0;
}

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	return survey(payload, ino, indx, raw, len);
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
			rc = survey(w->r, ino, idx[i], raw, len);
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
		if (w->ndirs == w->cap) {
			size_t ncap = w->cap ? w->cap * 2 : 64;
			uint64_t *nv = realloc(w->dirs, ncap * sizeof(*nv));

			if (!nv)
				return JO_ENOMEM;
			w->dirs = nv;
			w->cap = ncap;
		}
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
	if (walk_entry(NULL, 0, root, JO_TYPE_DIR, &w))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	while (w.ndirs && !rc) {
		uint64_t d = w.dirs[--w.ndirs];

		rc = jo_meta_readdir(r->vol->meta, d, walk_entry, &w, err);
		if (rc && !err->code)
			jo_err_set(err, rc, "walk: %s", jo_err_name(rc));
	}
	free(w.dirs);
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

	if (r->ctx->quiet || now == r->last_progress)
		return;
	r->last_progress = now;
	if (r->ctx->tty)
		fprintf(stderr, "\rcompact: %" PRIu64 " compacted, %" PRIu64 " conflicts, %" PRIu64
			" failed, %.1f MiB written   ", r->st.compacted, r->st.conflicts, r->st.failed,
			(double)r->st.bytes_written / 1048576.0);
}

static void *worker(void *arg)
{
	struct run *r = arg;
	struct jo_vol *v = NULL;
	struct jo_err err = { 0 };
	struct item it;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	if (jo_vol_clone(r->vol, &v, &err)) {
		pthread_mutex_lock(&r->mu);
		if (!r->first_err.code)
			r->first_err = err;
		pthread_mutex_unlock(&r->mu);
		jo_cancel_request(SIGTERM);
		q_close(&r->q);
		return NULL;
	}
	while (!jo_cancelled() && q_pop(&r->q, &it)) {
		struct compact_result res;
		int rc;

		/* a conflict means the chunk changed under us: look again a little later */
		for (int attempt = 0; attempt < 3; attempt++) {
			jo_err_clear(&err);
			rc = compact_chunk(v, it.ino, it.indx, "local", NULL, &res, &err);
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
			jo_warn("inode %" PRIu64 " chunk %u: %s", it.ino, it.indx, err.msg);
			emit_chunk_json(r, it.ino, it.indx, &res, err.msg);
		} else {
			switch (res.outcome) {
			case COMPACT_DONE:
				r->st.compacted++;
				r->st.records_removed += res.records_before - res.records_after;
				break;
			case COMPACT_CONFLICT: r->st.gave_up++; break;
			case COMPACT_NOTHING: r->st.nothing++; break;
			}
			r->st.bytes_read += res.bytes_read;
			r->st.bytes_written += res.bytes_written;
			r->st.slices_freed += res.slices_freed;
			r->st.blocks_deleted += res.blocks_deleted;
			emit_chunk_json(r, it.ino, it.indx, &res, NULL);
		}
		progress(r);
		pthread_mutex_unlock(&r->mu);
	}
	jo_vol_close(v);
	return NULL;
}

static void print_summary(struct run *r)
{
	struct cstats *s = &r->st;
	double secs = difftime(time(NULL), r->started);
	char label[32];

	if (r->ctx->tty && !r->ctx->quiet && r->o.apply)
		fputc('\n', stderr);
	if (r->ctx->json) {
		json_t *o = json_object(), *h = json_object();

		for (int b = 0; b < NBUCKETS; b++) {
			if (!s->hist[b])
				continue;
			bucket_label(b, label, sizeof(label));
			json_object_set_new(h, label, json_integer((json_int_t)s->hist[b]));
		}
		json_object_set_new(o, "type", json_string("summary"));
		json_object_set_new(o, "dry_run", json_boolean(!r->o.apply));
		json_object_set_new(o, "chunks", json_integer((json_int_t)s->chunks));
		json_object_set_new(o, "records", json_integer((json_int_t)s->records));
		json_object_set_new(o, "hidden_bytes", json_integer((json_int_t)s->hidden));
		json_object_set_new(o, "candidates", json_integer((json_int_t)s->candidates));
		json_object_set_new(o, "candidate_records", json_integer((json_int_t)s->candidate_records));
		json_object_set_new(o, "candidate_hidden_bytes", json_integer((json_int_t)s->candidate_hidden));
		json_object_set_new(o, "compacted", json_integer((json_int_t)s->compacted));
		json_object_set_new(o, "conflicts", json_integer((json_int_t)s->conflicts));
		json_object_set_new(o, "gave_up", json_integer((json_int_t)s->gave_up));
		json_object_set_new(o, "skipped", json_integer((json_int_t)s->nothing));
		json_object_set_new(o, "failed", json_integer((json_int_t)s->failed));
		json_object_set_new(o, "records_removed", json_integer((json_int_t)s->records_removed));
		json_object_set_new(o, "bytes_read", json_integer((json_int_t)s->bytes_read));
		json_object_set_new(o, "bytes_written", json_integer((json_int_t)s->bytes_written));
		json_object_set_new(o, "slices_freed", json_integer((json_int_t)s->slices_freed));
		json_object_set_new(o, "blocks_deleted", json_integer((json_int_t)s->blocks_deleted));
		json_object_set_new(o, "elapsed_seconds", json_real(secs));
		json_object_set_new(o, "hist", h);
		json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(o);
		return;
	}
	printf("chunks:            %" PRIu64 " (%" PRIu64 " records, %.1f MiB hidden by overwrites)\n",
	       s->chunks, s->records, (double)s->hidden / 1048576.0);
	printf("worth compacting:  %" PRIu64 " chunks (%" PRIu64 " records, %.1f MiB hidden)\n",
	       s->candidates, s->candidate_records, (double)s->candidate_hidden / 1048576.0);
	printf("records per chunk:\n");
	for (int b = 0; b < NBUCKETS; b++) {
		if (!s->hist[b])
			continue;
		bucket_label(b, label, sizeof(label));
		printf("  %-10s %" PRIu64 "\n", label, s->hist[b]);
	}
	if (!r->o.apply) {
		printf("dry run: nothing changed; add --apply to compact\n");
		return;
	}
	printf("compacted:         %" PRIu64 " chunks, %" PRIu64 " records removed, %" PRIu64
	       " conflicts (%" PRIu64 " chunks left for a later run), %" PRIu64 " failed\n",
	       s->compacted, s->records_removed, s->conflicts, s->gave_up, s->failed);
	printf("data:              %.1f MiB read, %.1f MiB written, %" PRIu64 " old slices freed (%"
	       PRIu64 " blocks deleted), %.0f s\n", (double)s->bytes_read / 1048576.0,
	       (double)s->bytes_written / 1048576.0, s->slices_freed, s->blocks_deleted, secs);
}

int cmd_compact(int argc, char **argv, struct jo_ctx *ctx)
{
	static const struct option opts[] = {
		{ "path", required_argument, NULL, 'p' },
		{ "min-slices", required_argument, NULL, 'n' },
		{ "min-garbage", required_argument, NULL, 'g' },
		{ "apply", no_argument, NULL, 'a' },
		{ "threads", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		CMD_VOL_LONGOPTS,
		{ 0 }
	};
	struct cmd_vol_args va = { 0 };
	struct run r = { .ctx = ctx, .o = { .min_slices = 2, .threads = 4 } };
	struct jo_err err = { 0 };
	pthread_t tids[64];
	int nt = 0, c, rc;
	uint64_t root = JO_ROOT_INODE;

	while ((c = getopt_long(argc, argv, "hq", opts, NULL)) != -1) {
		char *end;

		if (cmd_vol_opt(&va, c, optarg))
			continue;
		switch (c) {
		case 'p': r.o.path = optarg; break;
		case 'n':
			r.o.min_slices = strtoull(optarg, &end, 10);
			if (*end || !*optarg)
				return cmd_usage_error(ctx, "bad --min-slices '%s'", optarg);
			break;
		case 'g': {
			unsigned long v = strtoul(optarg, &end, 10);

			if (*end || !*optarg || v > 100)
				return cmd_usage_error(ctx, "bad --min-garbage '%s' (0-100)", optarg);
			r.o.min_garbage = (unsigned)v;
			break;
		}
		case 'a': r.o.apply = true; break;
		case 't': {
			long v = strtol(optarg, &end, 10);

			if (*end || v < 1 || v > 64)
				return cmd_usage_error(ctx, "bad --threads '%s' (1-64)", optarg);
			r.o.threads = (int)v;
			break;
		}
		case 'j': ctx->json = true; break;
		case 'q': ctx->quiet = true; break;
		case 'h': fputs(compact_usage, stdout); return 0;
		default: return cmd_usage_error(ctx, "unknown option");
		}
	}
	if (argc - optind != 1)
		return cmd_usage_error(ctx, "expected one META-URL");
	rc = cmd_open_volume(ctx, &va, argv[optind], &r.vol);
	if (rc)
		goto out_args;
	if (r.o.apply && r.vol->fmt.changelog) {
		jo_err_set(&err, JO_EUNSUPPORTED,
			   "volume '%s' keeps a change log (ChangeLog): compaction would not be logged; refusing",
			   r.vol->fmt.name);
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (r.o.apply && r.vol->fmt.has_encrypt_key) {
		jo_err_set(&err, JO_EUNSUPPORTED, "volume '%s' encrypts its data: not supported",
			   r.vol->fmt.name);
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (r.o.path) {
		rc = jo_meta_resolve(r.vol->meta, r.o.path, &root, &err);
		if (rc) {
			rc = cmd_fail(ctx, &err);
			goto out;
		}
	}
	pthread_mutex_init(&r.mu, NULL);
	pthread_mutex_init(&r.q.mu, NULL);
	pthread_cond_init(&r.q.not_empty, NULL);
	pthread_cond_init(&r.q.not_full, NULL);
	r.started = time(NULL);
	if (r.o.apply)
		for (nt = 0; nt < r.o.threads; nt++)
			if (pthread_create(&tids[nt], NULL, worker, &r))
				break;
	if (r.o.path)
		rc = walk_tree(&r, root, &err);
	else
		rc = jo_meta_scan_chunks(r.vol->meta, on_chunk, &r, &err);
	q_close(&r.q);
	for (int i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	if (rc == JO_ECANCELED || jo_cancelled()) {
		print_summary(&r);
		rc = 128 + (jo_cancelled() ? jo_cancelled() : SIGINT);
		goto out;
	}
	if (rc) {
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	print_summary(&r);
	rc = r.st.failed ? JO_EXIT_PARTIAL : 0;
out:
	jo_vol_close(r.vol);
out_args:
	cmd_vol_args_release(&va);
	return rc;
}
