/*
 * jfsops warmup: warm exactly the blocks that hold given file byte ranges,
 * by reading them through a JuiceFS FUSE mount.
 *
 * Flow: parse the ranges (any of the forms in common/warmup.h), map each to
 * block objects through the metadata (spec §8.2), sort the block records
 * under a memory budget (common/extsort) so duplicates come out adjacent,
 * then either print them (--dry-run/--list), look them up in the mount's
 * cache (--check), evict exactly them (--evict, warmup_evict.c) or hand one
 * read per distinct block to the fetcher threads. --follow (warmup_follow.c)
 * runs the same mapping batch by batch in a bounded look-ahead window.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/numparse.h"
#include "common/volume.h"
#include "cmd/warmup_internal.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/extsort.h"
#include "common/config.h"
#include "common/jfs/jfs.h"
#include "common/warmup.h"
#include "common/warmup_cache.h"

static const char warmup_usage[] =
	"usage: jfsops warmup META-URL [--ranges FILE|-] [--mount DIR] [--dry-run|--list]\n"
	"                      [--prefix DIR] [--threads N] [--json] [--metrics-file PATH]\n"
	"       jfsops warmup META-URL --mount DIR --check|--evict [--ranges FILE|-]\n"
	"       jfsops warmup META-URL --mount DIR --follow --control PATH [--ahead K]\n"
	"                      [--evict-done] [--state FILE] [--ranges FILE|FIFO|-]\n"
	"       jfsops warmup --control PATH --done ID | --status ID\n"
	"\n"
	"Warm the cache of a JuiceFS mount with exactly the blocks that hold the\n"
	"given file byte ranges. Each range is mapped to its chunks, slices and\n"
	"block objects through the volume's metadata (the later write wins,\n"
	"holes need no block), duplicates are removed, and every distinct block\n"
	"is read once through the mount, by a one-byte O_DIRECT read at the\n"
	"block's first byte: that makes the client fetch the whole block and keep\n"
	"it in its cache. Unlike `juicefs warmup`, which fetches every block of\n"
	"every slice a file touches, blocks that hold no requested byte are not\n"
	"read. Nothing is written into the client's cache directory.\n"
	"\n"
	"Range lines (one form per line, mixed freely; '#' starts a comment):\n"
	"  {\"file\":\"a/b.lance\",\"offset\":0,\"length\":4096}   jfsops lance --format jsonl\n"
	"  a/b.lance,0,4096                                 jfsops lance --format csv\n"
	"  a/b.lance [0-4096;8192-9000]                     juicefs warmup -f (end exclusive)\n"
	"  a/b.lance 0 4096                                 plain PATH OFFSET LENGTH\n"
	"  a/b.lance                                        the whole file\n"
	"Paths are relative to the volume root, or to --prefix; a path that starts\n"
	"with the --mount directory is taken relative to it.\n"
	"\n"
	"Options:\n"
	"  -r, --ranges FILE    the range list or batch stream ('-' = stdin, the\n"
	"                       default; a FIFO is read as it comes)\n"
	"  -m, --mount DIR      a JuiceFS mount of this volume to warm through\n"
	"                       (default: none; required unless --dry-run)\n"
	"  -n, --dry-run        print the block keys, sizes and total; read nothing\n"
	"      --list           the same as --dry-run\n"
	"  -P, --prefix DIR     volume directory the range paths are relative to\n"
	"                       (default: none, the volume root)\n"
	"  -p, --threads N      blocks read in parallel (default 8); also the\n"
	"                       parallelism asked of the mount by --check/--evict\n"
	"      --mem-limit SIZE most memory for sorting block records (default 64M)\n"
	"      --json           JSON lines: one per block with --dry-run and\n"
	"                       --check, errors, and a summary (default: text)\n"
	"      --metrics-file PATH  write Prometheus textfile metrics at the end of\n"
	"                       a one-shot run, also when it fails (atomic; default:\n"
	"                       none; gauges labelled volume=):\n"
	"                       jfsops_warmup_last_run_files, _last_run_ranges,\n"
	"                       _last_run_blocks, _last_run_bytes,\n"
	"                       _last_run_warmed_blocks, _last_run_warmed_bytes,\n"
	"                       _last_run_failed_blocks, _last_run_dry_run,\n"
	"                       _last_run_exit_code, _last_run_duration_seconds,\n"
	"                       _last_success_timestamp_seconds\n"
	"Cache check and eviction:\n"
	"      --check          report which of the ranges' blocks the mount's cache\n"
	"                       holds: count, bytes, percent, per cache directory\n"
	"                       (default: off); nothing is read or changed\n"
	"      --evict          remove exactly the ranges' blocks from the mount's\n"
	"                       cache (default: off)\n"
	"      --evict-others keep|drop  the other cached blocks of a file the mount\n"
	"                       evicts whole: keep = read them back, drop = let them\n"
	"                       go (default: keep with --evict, drop with --evict-done)\n"
	"Follow mode (a look-ahead pipeline for a training loop):\n"
	"      --follow         read a stream of batches and keep the next ones warm\n"
	"                       (default: off; see below)\n"
	"  -k, --ahead K        batches warmed beyond the consumer's position, the\n"
	"                       one it reads included (default 2, 1..4096)\n"
	"  -c, --control PATH   where the consumer says 'done ID' and asks 'status ID':\n"
	"                       a FIFO that exists (yours, not writable by others),\n"
	"                       else a unix socket created there (mode 0600; it\n"
	"                       answers your uid and root only); PATH's directory\n"
	"                       must be yours or root's and writable by others only\n"
	"                       with the sticky bit (required with --follow, --done,\n"
	"                       --status)\n"
	"      --evict-done     evict a batch's blocks once the consumer passed it,\n"
	"                       except the blocks a batch in the window still needs\n"
	"                       (default: off)\n"
	"      --state FILE     keep the consumer's position in FILE and resume from\n"
	"                       it when the same stream is read again (default: none)\n"
	"      --done ID        tell the pipeline at --control that the consumer\n"
	"                       finished batch ID (and every batch before it);\n"
	"                       no META-URL (default: none, run a pipeline)\n"
	"      --status ID      ask the pipeline at --control whether batch ID is\n"
	"                       ready: prints its JSON status; exit 0 ready, 1 not\n"
	"                       (yet), 8 unknown (default: none, run a pipeline)\n"
	"  -h, --help           show this help\n"
	CMD_VOL_HELP
	"warmup reads only the metadata (the mount talks to the object store): the\n"
	"config file and --profile are checked, the storage overrides are accepted\n"
	"for uniformity with the other volume commands and otherwise unused.\n"
	"\n"
	"The mount should have a block cache large enough (--cache-size) and should\n"
	"keep full blocks (no --cache-partial-only). A block whose first byte was\n"
	"overwritten by a later slice can only be cached by a mount that prefetches\n"
	"(--prefetch > 0, the default) or a compressed volume. The client itself\n"
	"may add a block: a read in the last 32 KiB of a file makes it read that\n"
	"whole tail, and a read at file offset 0 starts its readahead (avoided\n"
	"when the mount prefetches).\n"
	"\n"
	"How --check and --evict talk to the mount: like `juicefs warmup --check`\n"
	"and `--evict`, through the mount's control file (MP/.control), whose\n"
	"messages name whole files only: the mount checks or evicts every block of\n"
	"every slice a file shows, never one block. So --check looks each block up\n"
	"where the mount's own check looks (the file CACHEDIR/UUID/raw/<key> of its\n"
	"disk cache; read-only) and also prints the mount's own answer for the\n"
	"whole files. --evict first looks up every block of those files, then has\n"
	"the mount evict the files, then reads back (one-byte reads, as warming\n"
	"does) the cached blocks that were not to go; the summary counts them. A\n"
	"block no byte of which the file shows cannot be read back (counted as\n"
	"lost, exit 4). With --cache-dir memory nothing can be looked up: --check\n"
	"gives the mount's whole-file answer only, --evict evicts whole files.\n"
	"Nothing is ever written or removed under a cache directory by jfsops.\n"
	"\n"
	"Follow mode: the stream is batches of range lines (any form above), each\n"
	"closed by a line '# batch ID', or JSON range lines with a \"batch\" field\n"
	"(a change of batch, or a line {\"batch\":ID} without a file, closes one).\n"
	"The consumer's position is the last batch it reported with 'done ID' on\n"
	"--control; the pipeline holds at most K batches after it (it stops reading\n"
	"the stream until the consumer moves on), warms them oldest first, reads a\n"
	"block several of them need once, and drops the queued blocks of batches\n"
	"the consumer passed before they were warmed. stdout gets one JSON line per\n"
	"event: {\"type\":\"admit\"} when a batch enters the window (index and the\n"
	"consumer's position), {\"type\":\"batch\"} when all its blocks are warmed or\n"
	"failed (blocks, bytes, new and shared blocks, failed, seconds),\n"
	"{\"type\":\"done\"}, {\"type\":\"evict\"} and a summary at the end. The control\n"
	"channel takes lines 'done ID', 'status ID' and 'status' (the window);\n"
	"a socket answers each on the same connection with one JSON line, a FIFO\n"
	"cannot answer: its status lines go to stdout. The pipeline ends when the\n"
	"stream has ended and the consumer passed its last batch (exit 0), or on\n"
	"SIGINT/SIGTERM (130/143). A killed pipeline resumes from the consumer's\n"
	"position: with --state the position survives in FILE (the stream must be\n"
	"replayed from its start; batches up to the position are skipped, and with\n"
	"--evict-done evicted if the killed run had not yet done so); without it\n"
	"the client re-sends the batches from its position (contrib/python does).\n"
	"\n"
	"Exit status: 0 all blocks warmed (or listed, checked, evicted), 1 --status:\n"
	"not ready, 2 bad usage or a malformed line, 4 some blocks failed (or were\n"
	"still cached after --evict), 8 a path or batch does not exist, 9 the mount\n"
	"keeps no full blocks, 130/143 interrupted (also while waiting for input).\n"
	"\n"
	"Examples:\n"
	"  jfsops lance /jfs/ds --columns emb,label --format jsonl |\n"
	"      jfsops warmup redis://127.0.0.1:6379/1 --prefix /ds --mount /jfs\n"
	"  jfsops warmup sqlite3:///var/jfs/meta.db -r ranges.csv --dry-run\n"
	"  jfsops warmup redis://127.0.0.1:6379/1 --profile prod -r ranges.jsonl --mount /jfs \\\n"
	"      --metrics-file /var/lib/node_exporter/textfile/jfsops_warmup.prom\n"
	"  jfsops warmup redis://127.0.0.1:6379/1 --prefix /ds --mount /jfs --check -r ranges.jsonl\n"
	"  mkfifo /run/train/batches\n"
	"  jfsops warmup redis://127.0.0.1:6379/1 --prefix /ds --mount /jfs --follow --ahead 2 \\\n"
	"      --control /run/train/warm.sock --evict-done --ranges /run/train/batches\n"
	"  jfsops warmup --control /run/train/warm.sock --done 17\n";

enum { OPT_LIST = 0x2000, OPT_JSON, OPT_MEM, OPT_METRICS, OPT_FOLLOW, OPT_STATE, OPT_EVICT_DONE,
       OPT_CHECK, OPT_EVICT, OPT_OTHERS, OPT_DONE, OPT_STATUS };

#define REC_HEAD WU_REC_HEAD

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 3; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 when ino is new, 0 when seen, JO_ENOMEM */
static int ino_set_add(struct wu_state *st, uint64_t ino)
{
	size_t i;

	if ((st->ninos + 1) * 2 > st->icap) {
		size_t ncap = st->icap ? st->icap * 2 : 1024;
		uint64_t *nv = calloc(ncap, sizeof(*nv));

		if (!nv)
			return JO_ENOMEM;
		for (size_t k = 0; k < st->icap; k++) {
			if (!st->inos[k])
				continue;
			i = (size_t)(st->inos[k] * 0x9E3779B97F4A7C15ULL) & (ncap - 1);
			while (nv[i])
				i = (i + 1) & (ncap - 1);
			nv[i] = st->inos[k];
		}
		free(st->inos);
		st->inos = nv;
		st->icap = ncap;
	}
	i = (size_t)(ino * 0x9E3779B97F4A7C15ULL) & (st->icap - 1);
	while (st->inos[i]) {
		if (st->inos[i] == ino)
			return 0;
		i = (i + 1) & (st->icap - 1);
	}
	st->inos[i] = ino;
	st->ninos++;
	return 1;
}

static int path_list_add(struct wu_state *st, const char *vp)
{
	if (st->npaths == st->cappaths) {
		size_t nc = st->cappaths ? st->cappaths * 2 : 64;
		char **nv = realloc(st->paths, nc * sizeof(*nv));

		if (!nv)
			return JO_ENOMEM;
		st->paths = nv;
		st->cappaths = nc;
	}
	st->paths[st->npaths] = strdup(vp);
	if (!st->paths[st->npaths])
		return JO_ENOMEM;
	st->npaths++;
	return 0;
}

/*
 * The volume path of a range path: the mount directory is stripped from
 * absolute paths under it, --prefix is prepended to the rest, and "." and
 * empty components are dropped. *out malloc'd, starts with '/'.
 */
static int volume_path(const struct wu_state *st, const char *path, char **out)
{
	size_t ml = st->mount ? strlen(st->mount) : 0;
	const char *pre = st->prefix ? st->prefix : "";
	char *buf, *o;
	const char *parts[2];

	while (ml > 1 && st->mount[ml - 1] == '/')
		ml--;
	if (ml && path[0] == '/' && !strncmp(path, st->mount, ml) &&
	    (path[ml] == '/' || path[ml] == '\0')) {
		path += ml;
		pre = "";
	}
	buf = malloc(strlen(pre) + strlen(path) + 3);
	if (!buf)
		return JO_ENOMEM;
	o = buf;
	parts[0] = pre;
	parts[1] = path;
	for (int k = 0; k < 2; k++) {
		const char *p = parts[k];

		while (*p) {
			const char *e = strchr(p, '/');
			size_t n = e ? (size_t)(e - p) : strlen(p);

			if (n == 2 && p[0] == '.' && p[1] == '.') {
				free(buf);
				return JO_EINVAL;
			}
			if (n && !(n == 1 && p[0] == '.')) {
				*o++ = '/';
				memcpy(o, p, n);
				o += n;
			}
			p += n;
			if (*p == '/')
				p++;
		}
	}
	if (o == buf)
		*o++ = '/';
	*o = '\0';
	*out = buf;
	return 0;
}

static int on_block(const struct jo_warmup_block *b, void *payload)
{
	struct wu_state *st = payload;
	size_t pl = strlen(st->cur_path);
	uint8_t *r = st->rec_buf;
	uint8_t *heap = NULL;
	int rc;

	if (REC_HEAD + pl > sizeof(st->rec_buf)) {
		heap = malloc(REC_HEAD + pl);
		if (!heap)
			return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
		r = heap;
	}
	put_be64(r, b->id);
	put_be32(r + 8, b->indx);
	r[12] = (uint8_t)b->anchor_kind;
	put_be64(r + 13, b->anchor);
	put_be64(r + 21, b->alt);
	put_be32(r + 29, b->bsize);
	memcpy(r + REC_HEAD, st->cur_path, pl);
	rc = jo_xsort_add(st->xs, r, REC_HEAD + pl, &st->err);
	free(heap);
	st->block_refs++;
	return rc;
}

int wu_set_file(struct wu_state *st, const char *path)
{
	char *vp = NULL;
	int rc;

	rc = volume_path(st, path, &vp);
	if (rc == JO_EINVAL)
		return jo_err_set(&st->err, rc, "path '%s' has a '..' component", path);
	if (rc)
		return jo_err_set(&st->err, rc, "out of memory");
	if (!st->cur_path || strcmp(vp, st->cur_path)) {
		struct jo_attr a;
		int added;

		free(st->cur_path);
		st->cur_path = vp;
		vp = NULL;
		rc = jo_meta_resolve(st->meta, st->cur_path, &st->cur_ino, &st->err);
		if (!rc)
			rc = jo_meta_getattr(st->meta, st->cur_ino, &a, &st->err);
		if (rc) {
			free(st->cur_path);
			st->cur_path = NULL;
			if (rc == JO_ENOTFOUND)
				jo_err_set(&st->err, JO_ENOTFOUND, "no such file '%s' in the volume", path);
			return rc;
		}
		if (a.type != JO_TYPE_FILE) {
			free(st->cur_path);
			st->cur_path = NULL;
			return jo_err_set(&st->err, JO_EINVAL, "'%s' is not a regular file", path);
		}
		st->cur_len = a.length;
		added = ino_set_add(st, st->cur_ino);
		if (added < 0 || (added > 0 && st->keep_paths && path_list_add(st, st->cur_path)))
			return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	}
	free(vp);
	return 0;
}

int wu_lookup(struct wu_state *st, const char *vpath, uint64_t *ino, uint64_t *len)
{
	struct jo_attr a;
	int rc = jo_meta_resolve(st->meta, vpath, ino, &st->err);

	if (!rc)
		rc = jo_meta_getattr(st->meta, *ino, &a, &st->err);
	if (rc == JO_ENOTFOUND)
		return jo_err_set(&st->err, rc, "no such file '%s' in the volume", vpath);
	if (!rc && a.type != JO_TYPE_FILE)
		return jo_err_set(&st->err, JO_EINVAL, "'%s' is not a regular file", vpath);
	if (!rc)
		*len = a.length;
	return rc;
}

static int on_range(const char *path, uint64_t off, uint64_t len, void *payload)
{
	struct wu_state *st = payload;
	int rc = wu_set_file(st, path);

	if (rc)
		return rc;
	st->ranges++;
	if (off < st->cur_len)
		st->req_bytes += len > st->cur_len - off ? st->cur_len - off : len;
	return jo_warmup_map_range(st->mapper, st->cur_ino, st->cur_len, off, len, on_block, st,
				   &st->err);
}

static int read_ranges(struct wu_state *st, FILE *in, const char *name)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	while ((n = getline(&line, &cap, in)) >= 0) {
		st->line++;
		if (jo_cancelled()) {
			rc = jo_err_set(&st->err, JO_ECANCELED, "interrupted");
			break;
		}
		jo_err_clear(&st->err);
		rc = jo_warmup_parse_line(line, (size_t)n, on_range, st, NULL, &st->err);
		if (rc) {
			jo_err_wrap(&st->err, "%s line %" PRIu64, name, st->line);
			break;
		}
	}
	/*
	 * SIGINT/SIGTERM while waiting for a line (a FIFO, a pipe, a terminal)
	 * makes read() fail with EINTR (the handlers do not restart calls):
	 * that is an interruption, not an I/O error.
	 */
	if (!rc && jo_cancelled())
		rc = jo_err_set(&st->err, JO_ECANCELED, "interrupted while reading '%s'", name);
	else if (!rc && ferror(in))
		rc = jo_err_set(&st->err, JO_EIO, "cannot read '%s': %s", name, strerror(errno));
	free(line);
	return rc;
}

char *wu_mount_path(const char *mp, const char *subdir, const char *vp)
{
	size_t sl = strlen(subdir);
	char *s;

	while (sl && subdir[sl - 1] == '/')
		sl--;
	if (sl) {
		const char *sd = subdir;
		size_t skip = 0;

		if (sd[0] == '/') {
			sd++;
			sl--;
		}
		if (strncmp(vp + 1, sd, sl) || (vp[1 + sl] != '/' && vp[1 + sl] != '\0'))
			return NULL;
		skip = 1 + sl;
		vp += skip;
	}
	s = malloc(strlen(mp) + strlen(vp) + 2);
	if (!s)
		return NULL;
	snprintf(s, strlen(mp) + strlen(vp) + 2, "%s%s", mp, vp);
	return s;
}

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
		json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:s}", "type", "error", "key", key, "path",
				      path, "offset", (json_int_t)off, "error", err->msg);

		if (o) {
			json_dumpf(o, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			fflush(stdout);
			json_decref(o);
		}
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

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
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

void wu_state_release(struct wu_state *st)
{
	jo_xsort_free(st->xs);
	st->xs = NULL;
	jo_warmup_mapper_free(st->mapper);
	st->mapper = NULL;
	free(st->cur_path);
	st->cur_path = NULL;
	free(st->inos);
	st->inos = NULL;
	for (size_t i = 0; i < st->npaths; i++)
		free(st->paths[i]);
	free(st->paths);
	st->paths = NULL;
	jo_format_release(&st->fmt);
	jo_meta_close(st->meta);
	st->meta = NULL;
}

enum wu_mode { MODE_WARM, MODE_LIST, MODE_CHECK, MODE_EVICT, MODE_FOLLOW, MODE_CLIENT };

static const char *mode_flag(int m)
{
	switch (m) {
	case MODE_LIST: return "--dry-run";
	case MODE_CHECK: return "--check";
	case MODE_EVICT: return "--evict";
	case MODE_FOLLOW: return "--follow";
	case MODE_CLIENT: return "--done/--status";
	}
	return "warm";
}

/* Open the range list; a FIFO with no writer yet blocks here (SIGTERM ends the wait). */
static int open_ranges(struct wu_state *st, const char *ranges, FILE **out)
{
	if (!strcmp(ranges, "-")) {
		*out = stdin;
		return 0;
	}
	*out = fopen(ranges, "r");
	if (*out)
		return 0;
	if (errno == EINTR && jo_cancelled())
		return jo_err_set(&st->err, JO_ECANCELED, "interrupted while opening '%s'", ranges);
	return jo_err_set(&st->err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
			  "cannot open ranges file '%s': %s", ranges, strerror(errno));
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

struct check_locs {
	const char **dir;
	uint64_t *bytes, *blocks;
	size_t n;
};

static void locs_add(struct check_locs *l, const char *dir, uint32_t bsize)
{
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

/* The mount's own check of the whole files (what `juicefs warmup --check` reports). */
static int mount_check(struct wu_state *st, const char *mnt, const struct jo_warmup_mount *mi,
		       int threads, struct jo_warmup_ctl_reply *sum)
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
		paths[n] = ctl_path(mnt, mi, st->paths[i]);
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

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static bool no_window(uint64_t id, uint32_t indx, void *payload)
{
	(void)id;
	(void)indx;
	(void)payload;
	return false;
}

int cmd_warmup(int argc, char **argv, struct jo_ctx *ctx)
{
	static const struct option opts[] = {
		{ "ranges", required_argument, NULL, 'r' },
		{ "mount", required_argument, NULL, 'm' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "list", no_argument, NULL, OPT_LIST },
		{ "prefix", required_argument, NULL, 'P' },
		{ "threads", required_argument, NULL, 'p' },
		{ "mem-limit", required_argument, NULL, OPT_MEM },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "metrics-file", required_argument, NULL, OPT_METRICS },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "evict", no_argument, NULL, OPT_EVICT },
		{ "evict-others", required_argument, NULL, OPT_OTHERS },
		{ "follow", no_argument, NULL, OPT_FOLLOW },
		{ "ahead", required_argument, NULL, 'k' },
		{ "control", required_argument, NULL, 'c' },
		{ "state", required_argument, NULL, OPT_STATE },
		{ "evict-done", no_argument, NULL, OPT_EVICT_DONE },
		{ "done", required_argument, NULL, OPT_DONE },
		{ "status", required_argument, NULL, OPT_STATUS },
		{ "help", no_argument, NULL, 'h' },
		CMD_VOL_LONGOPTS,
		{ 0 }
	};
	char *url = NULL;
	struct wu_state st = { .ctx = ctx };
	struct jo_warmup_mount mi = { 0 };
	struct jo_warmup_fetcher *fetcher = NULL;
	struct jo_warmup_counters c0 = { 0 }, c1 = { 0 };
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct fail_ctx fc = { .ctx = ctx, .mu = PTHREAD_MUTEX_INITIALIZER };
	struct jo_warmup_cachedirs cd = { 0 };
	struct wu_bset *targets = NULL;
	struct check_locs locs = { 0 };
	struct wu_follow_opts fo = { .ahead = 2, .others = WU_OTHERS_DEFAULT };
	const char *ranges = "-", *mount = NULL, *client_verb = NULL, *client_id = NULL;
	int mode = MODE_WARM, nmodes = 0;
	bool have_stats = false, have_cd = false, have_ahead = false;
	uint64_t mem = 64u << 20, blocks = 0, bytes = 0, unwarmable = 0;
	uint64_t cached_blocks = 0, cached_bytes = 0, num;
	long threads = 8;
	FILE *in = NULL;
	char *mnt = NULL;
	uint8_t *prev = NULL;
	size_t prevlen = 0;
	double t0 = now_s(), last_prog = 0;
	int c, rc;
	struct cmd_vol_args va = { 0 };
	const char *metrics = NULL;
	uint64_t warmed = 0, warmed_bytes = 0, failed_total = 0;

	while ((c = getopt_long(argc, argv, "r:m:nP:p:k:c:h", opts, NULL)) != -1) {
		int newmode = -1;

		if (cmd_vol_opt(&va, c, optarg))
			continue;
		switch (c) {
		case 'r': ranges = optarg; break;
		case 'm': mount = optarg; break;
		case 'n':
		case OPT_LIST: newmode = MODE_LIST; break;
		case OPT_CHECK: newmode = MODE_CHECK; break;
		case OPT_EVICT: newmode = MODE_EVICT; break;
		case OPT_FOLLOW: newmode = MODE_FOLLOW; break;
		case OPT_DONE:
		case OPT_STATUS:
			if (client_verb) {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "give one of --done and --status");
			}
			newmode = MODE_CLIENT;
			client_verb = c == OPT_DONE ? "done" : "status";
			client_id = optarg;
			break;
		case 'P': st.prefix = optarg; break;
		case 'p':
			if (cmd_parse_uint(optarg, 1, 1024, &num)) {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "bad --threads '%s' (1..1024)", optarg);
			}
			threads = (long)num;
			break;
		case 'k':
			if (cmd_parse_uint(optarg, 1, 4096, &num)) {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "bad --ahead '%s' (1..4096)", optarg);
			}
			fo.ahead = (unsigned)num;
			have_ahead = true;
			break;
		case 'c': fo.control = optarg; break;
		case OPT_STATE: fo.state = optarg; break;
		case OPT_EVICT_DONE: fo.evict_done = true; break;
		case OPT_OTHERS:
			if (!strcmp(optarg, "keep")) {
				fo.others = WU_OTHERS_KEEP;
			} else if (!strcmp(optarg, "drop")) {
				fo.others = WU_OTHERS_DROP;
			} else {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "bad --evict-others '%s' (keep or drop)", optarg);
			}
			break;
		case OPT_MEM:
			if (cmd_parse_size(optarg, &mem) || mem < (1u << 20)) {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "bad --mem-limit '%s' (at least 1M)", optarg);
			}
			break;
		case OPT_JSON: ctx->json = true; break;
		case OPT_METRICS: metrics = optarg; break;
		case 'h':
			fputs(warmup_usage, stdout);
			cmd_vol_args_release(&va);
			return 0;
		default:
			cmd_vol_args_release(&va);
			return cmd_usage_error(ctx, "unknown option");
		}
		if (newmode >= 0 && newmode != mode) {
			if (nmodes++) {
				cmd_vol_args_release(&va);
				return cmd_usage_error(ctx, "%s and %s cannot be used together",
						       mode_flag(mode), mode_flag(newmode));
			}
			mode = newmode;
		}
	}
	if (mode == MODE_CLIENT) {
		cmd_vol_args_release(&va);
		if (argc - optind != 0)
			return cmd_usage_error(ctx, "--%s talks to a running pipeline: no META-URL",
					       client_verb);
		if (!fo.control)
			return cmd_usage_error(ctx, "--%s needs --control PATH (the pipeline's)",
					       client_verb);
		return wu_client(ctx, fo.control, client_verb, client_id);
	}
	if (argc - optind != 1) {
		cmd_vol_args_release(&va);
		return cmd_usage_error(ctx, "expected one META-URL");
	}
	if (mode != MODE_LIST && !mount) {
		cmd_vol_args_release(&va);
		return cmd_usage_error(ctx, "--mount DIR is required (or --dry-run to list blocks)");
	}
	if (mode != MODE_FOLLOW && (fo.control || fo.state || fo.evict_done || have_ahead)) {
		cmd_vol_args_release(&va);
		return cmd_usage_error(ctx, "--%s only goes with --follow",
				       fo.control ? "control" : fo.state ? "state" :
				       fo.evict_done ? "evict-done" : "ahead");
	}
	if (mode == MODE_FOLLOW && !fo.control) {
		cmd_vol_args_release(&va);
		return cmd_usage_error(ctx, "--follow needs --control PATH (where the consumer says "
				       "'done ID')");
	}
	if (fo.others != WU_OTHERS_DEFAULT && mode != MODE_EVICT &&
	    !(mode == MODE_FOLLOW && fo.evict_done)) {
		cmd_vol_args_release(&va);
		return cmd_usage_error(ctx, "--evict-others only goes with --evict or --evict-done");
	}
	if (fo.others == WU_OTHERS_DEFAULT)
		fo.others = mode == MODE_EVICT ? WU_OTHERS_KEEP : WU_OTHERS_DROP;
	/*
	 * The config file and profile are checked like every volume command's
	 * (a missing named file or profile, a loose file holding a secret: exit
	 * 2); warmup opens no object store, so the values themselves go unused.
	 */
	{
		struct jo_cfg_values vals = { 0 };

		rc = cmd_resolve_storage(&va, &vals, NULL, &st.err);
		jo_cfg_values_release(&vals);
		if (rc) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
	}

	/*
	 * Only the metadata is needed (the mount talks to the object store),
	 * so volumes on stores jfsops cannot open warm all the same.
	 */
	url = strdup(argv[optind]);
	if (!url) {
		rc = JO_EXIT_FAIL;
		goto out;
	}
	cmd_scrub_url_password(argv[optind]);
	rc = cmd_meta_open(url, &st.meta, &st.err);
	if (!rc)
		rc = jo_meta_load_format(st.meta, &st.fmt, &st.err);
	if (!rc && (st.fmt.block_size_kib <= 0 || st.fmt.block_size_kib > 65536))
		rc = jo_err_set(&st.err, JO_EPROTO, "format record has a bad BlockSize %d",
				st.fmt.block_size_kib);
	if (rc) {
		rc = cmd_fail(ctx, &st.err);
		goto out;
	}
	st.block_size = (uint32_t)st.fmt.block_size_kib * 1024u;
	cmd_metrics_volume(ctx, st.fmt.name);

	if (mount && mode != MODE_LIST) {
		rc = jo_warmup_mount_probe(mount, &mi, &st.err);
		if (rc) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
		if (strcmp(mi.uuid, st.fmt.uuid ? st.fmt.uuid : "")) {
			fprintf(stderr, "%s %s: '%s' mounts volume '%s' (%s), not '%s' (%s)\n",
				ctx->prog, ctx->cmd, JO_ESC_TERM(mount), JO_ESC_TERM(mi.name),
				JO_ESC_TERM(mi.uuid), JO_ESC_TERM(st.fmt.name),
				JO_ESC_TERM(st.fmt.uuid ? st.fmt.uuid : ""));
			rc = JO_EXIT_USAGE;
			goto out;
		}
		if ((mode == MODE_WARM || mode == MODE_FOLLOW) &&
		    (!mi.cache_size || !mi.cache_full_block)) {
			fprintf(stderr, "%s %s: the mount at '%s' keeps no full blocks in a cache (%s): "
				"reading through it warms nothing\n", ctx->prog, ctx->cmd,
				JO_ESC_TERM(mount),
				!mi.cache_size ? "--cache-size 0" : "--cache-partial-only");
			rc = JO_EXIT_UNSUPPORTED;
			goto out;
		}
		if (mi.block_size && mi.block_size != st.block_size)
			fprintf(stderr, "%s %s: warning: the mount says block size %u, the volume %u\n",
				ctx->prog, ctx->cmd, mi.block_size, st.block_size);
		have_stats = !jo_warmup_mount_stats(mi.stats_path, &c0, &st.err);
		/* a trailing '/' would double in joined paths */
		mnt = strdup(mount);
		if (!mnt) {
			rc = JO_EXIT_FAIL;
			goto out;
		}
		for (size_t l = strlen(mnt); l > 1 && mnt[l - 1] == '/'; l--)
			mnt[l - 1] = '\0';
	}
	st.mount = mnt ? mnt : mount;

	if (mode == MODE_CHECK || mode == MODE_EVICT) {
		struct jo_err cerr = { 0 };

		st.keep_paths = true;
		have_cd = !jo_warmup_cachedirs_init(&cd, mi.cache_dir, &cerr);
		if (!have_cd)
			fprintf(stderr, "%s %s: warning: %s; %s\n", ctx->prog, ctx->cmd,
				JO_ESC_TERM(cerr.msg),
				mode == MODE_CHECK ? "only the mount's whole-file check is reported" :
				"the mount's whole-file eviction cannot be undone for other blocks");
		if (have_cd) {
			locs.dir = calloc(cd.n, sizeof(*locs.dir));
			locs.bytes = calloc(cd.n, sizeof(*locs.bytes));
			locs.blocks = calloc(cd.n, sizeof(*locs.blocks));
			if (!locs.dir || !locs.bytes || !locs.blocks) {
				rc = JO_EXIT_FAIL;
				goto out;
			}
		}
		if (mode == MODE_EVICT && wu_bset_new(&targets)) {
			rc = JO_EXIT_FAIL;
			goto out;
		}
	}

	rc = jo_warmup_mapper_new(&st.mapper, st.meta, st.block_size, &st.err);
	if (rc) {
		rc = cmd_fail(ctx, &st.err);
		goto out;
	}
	if (mode == MODE_FOLLOW) {
		fo.ranges = ranges;
		fo.threads = (int)threads;
		ctx->json = true; /* the per-batch lines are the data */
		rc = wu_follow(&st, &mi, &fo);
		goto out;
	}

	rc = open_ranges(&st, ranges, &in);
	if (rc) {
		rc = cmd_fail(ctx, &st.err);
		goto out;
	}

	xo.mem_limit = (size_t)mem;
	rc = jo_xsort_new(&st.xs, &xo, &st.err);
	if (!rc)
		rc = read_ranges(&st, in, in == stdin ? "<stdin>" : ranges);
	if (!rc)
		rc = jo_xsort_finish(st.xs, &st.err);
	if (rc) {
		rc = cmd_fail(ctx, &st.err);
		goto out;
	}

	if (mode == MODE_WARM) {
		rc = jo_warmup_fetcher_new(&fetcher, (int)threads, mi.prefetch, on_fail, &fc, &st.err);
		if (rc) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
	}

	/* The sorted records: the first of each (id, indx) run has the best anchor. */
	for (;;) {
		const void *rv;
		size_t rl;
		const uint8_t *r;
		struct jo_warmup_block b = { 0 };
		char key[512], *vp;

		rc = jo_xsort_next(st.xs, &rv, &rl, &st.err);
		if (rc < 0) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
		if (rc == 0)
			break;
		rc = 0;
		r = rv;
		if (prev && prevlen >= 12 && !memcmp(prev, r, 12))
			continue;
		free(prev);
		prev = malloc(rl);
		if (!prev) {
			rc = JO_EXIT_FAIL;
			goto out;
		}
		memcpy(prev, r, rl);
		prevlen = rl;

		b.id = get_be64(r);
		b.indx = get_be32(r + 8);
		b.anchor_kind = r[12];
		b.anchor = get_be64(r + 13);
		b.alt = get_be64(r + 21);
		b.bsize = get_be32(r + 29);
		vp = strndup((const char *)r + REC_HEAD, rl - REC_HEAD);
		if (!vp) {
			rc = JO_EXIT_FAIL;
			goto out;
		}
		jo_block_key(key, sizeof(key), st.fmt.name, st.fmt.hash_prefix, b.id, b.indx,
			     b.bsize);
		blocks++;
		bytes += b.bsize;

		if (mode == MODE_LIST) {
			if (ctx->json) {
				json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:I}", "type", "block", "key", key,
						      "size", (json_int_t)b.bsize, "file", vp,
						      "offset", (json_int_t)b.anchor);

				if (o) {
					json_dumpf(o, stdout, JSON_COMPACT);
					fputc('\n', stdout);
					json_decref(o);
				}
			} else {
				printf("%s\t%" PRIu32 "\n", JO_ESC_TERM(key), b.bsize);
			}
			free(vp);
			continue;
		}
		if (mode == MODE_CHECK || mode == MODE_EVICT) {
			const char *loc = NULL;
			int has = 0;

			if (have_cd) {
				has = jo_warmup_cache_has(&cd, key, &loc, &st.err);
				if (has < 0) {
					free(vp);
					rc = cmd_fail(ctx, &st.err);
					goto out;
				}
				if (has) {
					cached_blocks++;
					cached_bytes += b.bsize;
					locs_add(&locs, loc, b.bsize);
				}
			}
			if (mode == MODE_EVICT && wu_bset_add(targets, b.id, b.indx, b.bsize) < 0) {
				free(vp);
				rc = JO_EXIT_FAIL;
				goto out;
			}
			if (mode == MODE_CHECK && ctx->json) {
				json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:I}", "type", "block", "key", key,
						      "size", (json_int_t)b.bsize, "file", vp,
						      "offset", (json_int_t)b.anchor);

				if (o && have_cd) {
					json_object_set_new(o, "cached", json_boolean(has));
					if (has)
						json_object_set_new(o, "location", json_string(loc));
				}
				if (o) {
					json_dumpf(o, stdout, JSON_COMPACT);
					fputc('\n', stdout);
					json_decref(o);
				}
			}
			free(vp);
			continue;
		}

		{
			struct jo_warmup_read rd;
			struct jo_err perr = { 0 };
			char *mpath = wu_mount_path(st.mount, mi.subdir, vp);

			if (!mpath) {
				jo_err_set(&perr, JO_ENOTFOUND, "'%s' is outside the mounted directory '%s'",
					   vp, mi.subdir);
				on_fail(key, vp, b.anchor, &perr, &fc);
				unwarmable++;
			} else if (jo_warmup_plan_read(&b, &mi, &rd, &perr)) {
				on_fail(key, mpath, b.anchor, &perr, &fc);
				unwarmable++;
			} else {
				rc = jo_warmup_fetcher_add(fetcher, mpath, key, b.bsize, &rd, &st.err);
			}
			free(mpath);
			free(vp);
			if (rc) {
				rc = cmd_fail(ctx, &st.err);
				goto out;
			}
		}
		if (now_s() - last_prog > 0.5) {
			last_prog = now_s();
			progress(ctx, fetcher, blocks, false);
		}
	}

	if (mode == MODE_CHECK) {
		struct jo_warmup_ctl_reply mc;

		rc = mount_check(&st, st.mount, &mi, (int)threads, &mc);
		if (rc) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b}",
					      "mode", "check", "files", (json_int_t)st.ninos, "ranges",
					      (json_int_t)st.ranges, "requested_bytes",
					      (json_int_t)st.req_bytes, "blocks", (json_int_t)blocks,
					      "bytes", (json_int_t)bytes, "block_exact", have_cd);

			if (o && have_cd) {
				json_t *lo = json_object();

				json_object_set_new(o, "cached_blocks", json_integer((json_int_t)cached_blocks));
				json_object_set_new(o, "cached_bytes", json_integer((json_int_t)cached_bytes));
				json_object_set_new(o, "percent", json_real(pct(cached_bytes, bytes)));
				for (size_t i = 0; lo && i < locs.n; i++)
					json_object_set_new(lo, locs.dir[i],
							    json_integer((json_int_t)locs.bytes[i]));
				if (lo)
					json_object_set_new(o, "locations", lo);
			}
			if (o) {
				json_object_set_new(o, "mount_files", json_integer((json_int_t)mc.files));
				json_object_set_new(o, "mount_bytes", json_integer((json_int_t)mc.total_bytes));
				json_object_set_new(o, "mount_cached_bytes",
						    json_integer((json_int_t)(mc.total_bytes - mc.miss_bytes)));
				json_object_set_new(o, "mount_percent",
						    json_real(pct(mc.total_bytes - mc.miss_bytes, mc.total_bytes)));
				/* main checks stdout */
				(void)cmd_summary_emit(ctx, o, !jo_cancelled(),
						       jo_cancelled() ? 128 + jo_cancelled() : JO_EXIT_OK);
			}
		} else {
			printf("check: %" PRIu64 " ranges in %zu files -> %" PRIu64 " blocks (%" PRIu64
			       " bytes)", st.ranges, st.ninos, blocks, bytes);
			if (have_cd)
				printf(": %" PRIu64 " cached (%" PRIu64 " bytes, %.1f%%)\n", cached_blocks,
				       cached_bytes, pct(cached_bytes, bytes));
			else
				printf(": not looked up block by block (the cache is in memory)\n");
			for (size_t i = 0; i < locs.n; i++)
				printf("  %s\t%" PRIu64 " blocks\t%" PRIu64 " bytes\t%.1f%%\n",
				       JO_ESC_TERM(locs.dir[i]),
				       locs.blocks[i], locs.bytes[i], pct(locs.bytes[i], bytes));
			printf("the mount's own check of the whole files (every block of every slice "
			       "they show): %" PRIu64 " files, %" PRIu64 " of %" PRIu64
			       " bytes (%.1f%%) cached\n", mc.files, mc.total_bytes - mc.miss_bytes,
			       mc.total_bytes, pct(mc.total_bytes - mc.miss_bytes, mc.total_bytes));
		}
		rc = jo_cancelled() ? 128 + jo_cancelled() : JO_EXIT_OK;
		goto out;
	}

	if (mode == MODE_EVICT) {
		struct wu_evict_file *files = calloc(st.npaths ? st.npaths : 1, sizeof(*files));
		char **mps = calloc(st.npaths ? st.npaths : 1, sizeof(*mps));
		struct wu_evict_result er = { 0 };
		size_t nf = 0;

		if (!files || !mps) {
			free(files);
			free(mps);
			rc = JO_EXIT_FAIL;
			goto out;
		}
		rc = 0;
		for (size_t i = 0; i < st.npaths && !rc; i++) {
			mps[nf] = wu_mount_path(st.mount, mi.subdir, st.paths[i]);
			if (!mps[nf]) {
				fprintf(stderr, "%s %s: '%s' is outside the mounted directory '%s': not "
					"evicted\n", ctx->prog, ctx->cmd, JO_ESC_TERM(st.paths[i]),
					JO_ESC_TERM(mi.subdir));
				continue;
			}
			files[nf].vpath = st.paths[i];
			files[nf].mpath = mps[nf];
			rc = wu_lookup(&st, st.paths[i], &files[nf].ino, &files[nf].flen);
			nf++;
		}
		if (!rc)
			rc = wu_evict(&st, &mi, have_cd ? &cd : NULL, files, nf, targets, fo.others,
				      no_window, NULL, (int)threads, &er, &st.err);
		for (size_t i = 0; i < nf; i++)
			free(mps[i]);
		free(mps);
		free(files);
		if (rc) {
			rc = cmd_fail(ctx, &st.err);
			goto out;
		}
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b,s:s}",
					      "mode", "evict", "files", (json_int_t)er.files, "ranges",
					      (json_int_t)st.ranges, "blocks", (json_int_t)er.blocks,
					      "bytes", (json_int_t)er.bytes, "mount_bytes",
					      (json_int_t)er.mount_bytes, "block_exact", er.block_exact,
					      "others", fo.others == WU_OTHERS_KEEP ? "keep" : "drop");

			if (o && er.block_exact) {
				json_object_set_new(o, "cached_blocks", json_integer((json_int_t)er.cached_blocks));
				json_object_set_new(o, "cached_bytes", json_integer((json_int_t)er.cached_bytes));
				json_object_set_new(o, "still_cached", json_integer((json_int_t)er.still_blocks));
				json_object_set_new(o, "other_blocks", json_integer((json_int_t)er.other_blocks));
				json_object_set_new(o, "other_bytes", json_integer((json_int_t)er.other_bytes));
				json_object_set_new(o, "rewarmed_blocks", json_integer((json_int_t)er.rewarmed_blocks));
				json_object_set_new(o, "rewarmed_bytes", json_integer((json_int_t)er.rewarmed_bytes));
				json_object_set_new(o, "lost_blocks", json_integer((json_int_t)er.lost_blocks));
			}
			if (o) {
				/* main checks stdout */
				(void)cmd_summary_emit(ctx, o, !jo_cancelled(),
						       jo_cancelled() ? 128 + jo_cancelled() :
						       er.still_blocks || er.lost_blocks ?
						       JO_EXIT_PARTIAL : JO_EXIT_OK);
			}
		} else if (er.block_exact) {
			fprintf(stderr, "evict: %" PRIu64 " blocks (%" PRIu64 " bytes) in %" PRIu64
				" files, %" PRIu64 " of them were cached and are gone (%" PRIu64
				" still cached); the mount evicts whole files: %" PRIu64
				" other cached blocks of them (%" PRIu64 " bytes) %s%s in %.1fs\n",
				er.blocks, er.bytes, er.files, er.cached_blocks - er.still_blocks,
				er.still_blocks, er.other_blocks, er.other_bytes,
				fo.others == WU_OTHERS_KEEP ? "were read back" : "went too",
				er.lost_blocks ? " (some could not be read back)" : "", now_s() - t0);
		} else {
			fprintf(stderr, "evict: %" PRIu64 " blocks (%" PRIu64 " bytes) in %" PRIu64
				" files evicted with every other block of those files (the cache is "
				"in memory) in %.1fs\n", er.blocks, er.bytes, er.files, now_s() - t0);
		}
		if (jo_cancelled())
			rc = 128 + jo_cancelled();
		else
			rc = er.still_blocks || er.lost_blocks ? JO_EXIT_PARTIAL : JO_EXIT_OK;
		goto out;
	}

	if (fetcher) {
		struct jo_warmup_fetch_stats fs;

		for (;;) {
			jo_warmup_fetcher_stats(fetcher, &fs);
			if (fs.done + fs.failed >= fs.queued || jo_cancelled())
				break;
			progress(ctx, fetcher, blocks, false);
			usleep(200000);
		}
		jo_warmup_fetcher_finish(fetcher);
		progress(ctx, fetcher, blocks, true);
	}

	{
		struct jo_warmup_fetch_stats fs = { 0 };
		uint64_t failed;
		double secs = now_s() - t0;
		bool dry = mode == MODE_LIST;

		if (fetcher)
			jo_warmup_fetcher_stats(fetcher, &fs);
		failed = fs.failed + unwarmable;
		failed_total = failed;
		warmed = fs.done;
		warmed_bytes = fs.bytes_done;
		if (have_stats && jo_warmup_mount_stats(mi.stats_path, &c1, &st.err))
			have_stats = false;
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:b}", "mode",
					      dry ? "list" : "warm",
					      "files", (json_int_t)st.ninos, "ranges",
					      (json_int_t)st.ranges, "requested_bytes",
					      (json_int_t)st.req_bytes, "blocks", (json_int_t)blocks,
					      "bytes", (json_int_t)bytes, "block_refs",
					      (json_int_t)st.block_refs, "dry_run", dry);

			if (o && !dry) {
				json_object_set_new(o, "warmed", json_integer((json_int_t)fs.done));
				json_object_set_new(o, "warmed_bytes",
						    json_integer((json_int_t)fs.bytes_done));
				json_object_set_new(o, "failed", json_integer((json_int_t)failed));
				json_object_set_new(o, "prefetch_waits",
						    json_integer((json_int_t)fs.confirm_reads));
				if (have_stats) {
					json_object_set_new(o, "mount_gets",
							    json_integer((json_int_t)(c1.gets - c0.gets)));
					json_object_set_new(o, "mount_get_bytes",
							    json_integer((json_int_t)(c1.get_bytes -
										      c0.get_bytes)));
				}
			}
			/* main checks stdout */
			(void)cmd_summary_emit(ctx, o, !jo_cancelled(),
					       jo_cancelled() ? 128 + jo_cancelled() :
					       failed ? JO_EXIT_PARTIAL : JO_EXIT_OK);
		} else {
			FILE *sf = dry ? stdout : stderr;

			fprintf(sf, "%sfiles %zu, ranges %" PRIu64 " (%" PRIu64 " bytes), blocks %" PRIu64
				" (%" PRIu64 " bytes)", dry ? "total: " : "warmup: ", st.ninos,
				st.ranges, st.req_bytes, blocks, bytes);
			if (!dry) {
				fprintf(sf, ", warmed %" PRIu64 " (%" PRIu64 " bytes), failed %" PRIu64,
					fs.done, fs.bytes_done, failed);
				if (have_stats)
					fprintf(sf, "; the mount did %" PRIu64 " object GETs (%" PRIu64
						" bytes)", c1.gets - c0.gets, c1.get_bytes - c0.get_bytes);
			}
			fprintf(sf, " in %.1fs\n", secs);
		}
		if (jo_cancelled())
			rc = 128 + jo_cancelled();
		else
			rc = failed ? JO_EXIT_PARTIAL : JO_EXIT_OK;
	}
out:
	if (metrics && mode != MODE_FOLLOW) {
		/* main writes the file (common/run_metrics.c); a sample that cannot be
		 * recorded (out of memory) is left out */
		const struct { const char *what, *help; double v; } m[] = {
			{ "files", "distinct files of the ranges of the last run", (double)st.ninos },
			{ "ranges", "byte ranges read by the last run", (double)st.ranges },
			{ "requested_bytes", "bytes the ranges of the last run cover",
			  (double)st.req_bytes },
			{ "blocks", "distinct blocks the ranges map to", (double)blocks },
			{ "bytes", "bytes of those blocks", (double)bytes },
			{ "warmed_blocks", "blocks read through the mount", (double)warmed },
			{ "warmed_bytes", "bytes of the blocks read through the mount",
			  (double)warmed_bytes },
			{ "failed_blocks", "blocks that could not be warmed", (double)failed_total },
			{ "dry_run", "1 if the last run was a dry run (--dry-run/--list)",
			  mode == MODE_LIST },
		};

		ctx->metrics_path = metrics;
		for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
			(void)cmd_metric(ctx, m[i].what, m[i].help, NULL, m[i].v);
	}
	cmd_vol_args_release(&va);
	free(prev);
	jo_warmup_fetcher_free(fetcher);
	if (in && in != stdin)
		fclose(in);
	wu_bset_free(targets);
	free(locs.dir);
	free(locs.bytes);
	free(locs.blocks);
	jo_warmup_cachedirs_release(&cd);
	free(mnt);
	jo_warmup_mount_release(&mi);
	wu_state_release(&st);
	free(url);
	return rc;
}
