/*
 * jfsops warmup: warm exactly the blocks that hold given file byte ranges,
 * by reading them through a JuiceFS FUSE mount.
 *
 * This file parses the options and dispatches to one function per mode of
 * the library (common/warmup/run.h): the ranges (any of the forms in
 * common/warmup/warmup.h) are mapped to block objects through the metadata
 * (spec §8.2) and sorted so duplicates come out adjacent, then printed
 * (--dry-run/--list, wu_run_list), looked up in the mount's cache (--check,
 * wu_run_check), evicted exactly (--evict, wu_run_evict) or read once each
 * through the mount (wu_run_warm). --follow (wu_follow) maps batch by batch
 * in a bounded look-ahead window; --done/--status (wu_client) talk to it.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/config.h"
#include "common/err.h"
#include "common/exit.h"
#include "common/numparse.h"
#include "common/volume.h"
#include "common/warmup/run.h"
#include "common/warmup/warmup.h"

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

/* The command line of a warmup run. */
struct warmup_args {
	int mode, nmodes;
	const char *ranges, *mount, *prefix, *metrics;
	const char *client_verb, *client_id;  /* --done ID / --status ID */
	struct wu_follow_opts fo;
	bool have_ahead;
	uint64_t mem;
	long threads;
	struct cmd_vol_args va;
	char *url;  /* META-URL, a copy (argv's is scrubbed) */
};

/* One option; -1 when taken, else the exit code (a usage error, --help). */
static int parse_opt(struct jo_ctx *ctx, struct warmup_args *a, int c, int *newmode)
{
	uint64_t num;

	switch (c) {
	case 'r': a->ranges = optarg; break;
	case 'm': a->mount = optarg; break;
	case 'n':
	case OPT_LIST: *newmode = MODE_LIST; break;
	case OPT_CHECK: *newmode = MODE_CHECK; break;
	case OPT_EVICT: *newmode = MODE_EVICT; break;
	case OPT_FOLLOW: *newmode = MODE_FOLLOW; break;
	case OPT_DONE:
	case OPT_STATUS:
		if (a->client_verb)
			return cmd_usage_error(ctx, "give one of --done and --status");
		*newmode = MODE_CLIENT;
		a->client_verb = c == OPT_DONE ? "done" : "status";
		a->client_id = optarg;
		break;
	case 'P': a->prefix = optarg; break;
	case 'p':
		if (cmd_parse_uint(optarg, 1, 1024, &num))
			return cmd_usage_error(ctx, "bad --threads '%s' (1..1024)", optarg);
		a->threads = (long)num;
		break;
	case 'k':
		if (cmd_parse_uint(optarg, 1, 4096, &num))
			return cmd_usage_error(ctx, "bad --ahead '%s' (1..4096)", optarg);
		a->fo.ahead = (unsigned)num;
		a->have_ahead = true;
		break;
	case 'c': a->fo.control = optarg; break;
	case OPT_STATE: a->fo.state = optarg; break;
	case OPT_EVICT_DONE: a->fo.evict_done = true; break;
	case OPT_OTHERS:
		if (!strcmp(optarg, "keep"))
			a->fo.others = WU_OTHERS_KEEP;
		else if (!strcmp(optarg, "drop"))
			a->fo.others = WU_OTHERS_DROP;
		else
			return cmd_usage_error(ctx, "bad --evict-others '%s' (keep or drop)", optarg);
		break;
	case OPT_MEM:
		if (cmd_parse_size(optarg, &a->mem) || a->mem < (1u << 20))
			return cmd_usage_error(ctx, "bad --mem-limit '%s' (at least 1M)", optarg);
		break;
	case OPT_JSON: ctx->json = true; break;
	case OPT_METRICS: a->metrics = optarg; break;
	case 'h':
		fputs(warmup_usage, stdout);
		return 0;
	default:
		return cmd_usage_error(ctx, "unknown option");
	}
	return -1;
}

/* The options; -1 when the run goes on, else the exit code. */
static int parse_args(int argc, char **argv, struct jo_ctx *ctx, struct warmup_args *a)
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
	int c;

	while ((c = getopt_long(argc, argv, "r:m:nP:p:k:c:h", opts, NULL)) != -1) {
		int newmode = -1, rc;

		if (cmd_vol_opt(&a->va, c, optarg))
			continue;
		rc = parse_opt(ctx, a, c, &newmode);
		if (rc >= 0)
			return rc;
		if (newmode >= 0 && newmode != a->mode) {
			if (a->nmodes++)
				return cmd_usage_error(ctx, "%s and %s cannot be used together",
						       mode_flag(a->mode), mode_flag(newmode));
			a->mode = newmode;
		}
	}
	return -1;
}

/* What the options say together; -1 when they agree, else the exit code. */
static int check_args(int argc, struct jo_ctx *ctx, struct warmup_args *a)
{
	const struct wu_follow_opts *fo = &a->fo;

	if (argc - optind != 1)
		return cmd_usage_error(ctx, "expected one META-URL");
	if (a->mode != MODE_LIST && !a->mount)
		return cmd_usage_error(ctx, "--mount DIR is required (or --dry-run to list blocks)");
	if (a->mode != MODE_FOLLOW && (fo->control || fo->state || fo->evict_done || a->have_ahead))
		return cmd_usage_error(ctx, "--%s only goes with --follow",
				       fo->control ? "control" : fo->state ? "state" :
				       fo->evict_done ? "evict-done" : "ahead");
	if (a->mode == MODE_FOLLOW && !fo->control)
		return cmd_usage_error(ctx, "--follow needs --control PATH (where the consumer says "
				       "'done ID')");
	if (fo->others != WU_OTHERS_DEFAULT && a->mode != MODE_EVICT &&
	    !(a->mode == MODE_FOLLOW && fo->evict_done))
		return cmd_usage_error(ctx, "--evict-others only goes with --evict or --evict-done");
	if (fo->others == WU_OTHERS_DEFAULT)
		a->fo.others = a->mode == MODE_EVICT ? WU_OTHERS_KEEP : WU_OTHERS_DROP;
	return -1;
}

/* --done ID / --status ID: a client of a running pipeline. */
static int run_client(int argc, struct jo_ctx *ctx, const struct warmup_args *a)
{
	if (argc - optind != 0)
		return cmd_usage_error(ctx, "--%s talks to a running pipeline: no META-URL",
				       a->client_verb);
	if (!a->fo.control)
		return cmd_usage_error(ctx, "--%s needs --control PATH (the pipeline's)",
				       a->client_verb);
	return wu_client(ctx, a->fo.control, a->client_verb, a->client_id);
}

/* The volume's metadata and the mount; -1 when open, else the exit code. */
static int open_volume(struct jo_ctx *ctx, struct warmup_args *a, char *url_arg,
		       struct wu_state *st, struct jo_warmup_mount *mi)
{
	struct jo_cfg_values vals = { 0 };
	int rc;

	/*
	 * The config file and profile are checked like every volume command's
	 * (a missing named file or profile, a loose file holding a secret: exit
	 * 2); warmup opens no object store, so the values themselves go unused.
	 */
	rc = cmd_resolve_storage(&a->va, &vals, NULL, &st->err);
	jo_cfg_values_release(&vals);
	if (rc)
		return cmd_fail(ctx, &st->err);
	/*
	 * Only the metadata is needed (the mount talks to the object store),
	 * so volumes on stores jfsops cannot open warm all the same.
	 */
	a->url = strdup(url_arg);
	if (!a->url)
		return JO_EXIT_FAIL;
	cmd_scrub_url_password(url_arg);
	if (wu_open_meta(st, a->url))
		return cmd_fail(ctx, &st->err);
	cmd_metrics_volume(ctx, st->fmt.name);
	st->mount = a->mount;
	if (a->mount && a->mode != MODE_LIST &&
	    wu_mount_attach(st, a->mount, a->mode == MODE_WARM || a->mode == MODE_FOLLOW, mi))
		return cmd_fail(ctx, &st->err);
	return -1;
}

static int dispatch(struct jo_ctx *ctx, struct warmup_args *a, struct wu_state *st,
		    const struct jo_warmup_mount *mi)
{
	switch (a->mode) {
	case MODE_FOLLOW:
		a->fo.ranges = a->ranges;
		a->fo.threads = (int)a->threads;
		ctx->json = true; /* the per-batch lines are the data */
		return wu_follow(st, mi, &a->fo);
	case MODE_LIST:
		return wu_run_list(st, a->ranges, a->mem);
	case MODE_CHECK:
		return wu_run_check(st, mi, a->ranges, a->mem, (int)a->threads);
	case MODE_EVICT:
		return wu_run_evict(st, mi, a->ranges, a->mem, (int)a->threads, a->fo.others);
	}
	return wu_run_warm(st, mi, a->ranges, a->mem, (int)a->threads);
}

/* --metrics-file of a one-shot run, also when it failed. */
static void record_metrics(struct jo_ctx *ctx, const struct warmup_args *a,
			   const struct wu_state *st)
{
	/* main writes the file (common/run_metrics.c); a sample that cannot be
	 * recorded (out of memory) is left out */
	const struct { const char *what, *help; double v; } m[] = {
		{ "files", "distinct files of the ranges of the last run", (double)st->ninos },
		{ "ranges", "byte ranges read by the last run", (double)st->ranges },
		{ "requested_bytes", "bytes the ranges of the last run cover",
		  (double)st->req_bytes },
		{ "blocks", "distinct blocks the ranges map to", (double)st->blocks },
		{ "bytes", "bytes of those blocks", (double)st->bytes },
		{ "warmed_blocks", "blocks read through the mount", (double)st->warmed },
		{ "warmed_bytes", "bytes of the blocks read through the mount",
		  (double)st->warmed_bytes },
		{ "failed_blocks", "blocks that could not be warmed", (double)st->failed },
		{ "dry_run", "1 if the last run was a dry run (--dry-run/--list)",
		  a->mode == MODE_LIST },
	};

	ctx->metrics_path = a->metrics;
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		(void)cmd_metric(ctx, m[i].what, m[i].help, NULL, m[i].v);
}

int cmd_warmup(int argc, char **argv, struct jo_ctx *ctx)
{
	struct warmup_args a = {
		.mode = MODE_WARM, .ranges = "-", .mem = 64u << 20, .threads = 8,
		.fo = { .ahead = 2, .others = WU_OTHERS_DEFAULT },
	};
	struct wu_state st = { .ctx = ctx, .t0 = wu_now() };
	struct jo_warmup_mount mi = { 0 };
	int rc = parse_args(argc, argv, ctx, &a);

	if (rc < 0 && a.mode == MODE_CLIENT)
		rc = run_client(argc, ctx, &a);
	if (rc < 0)
		rc = check_args(argc, ctx, &a);
	if (rc < 0) {
		st.prefix = a.prefix;
		rc = open_volume(ctx, &a, argv[optind], &st, &mi);
		if (rc < 0)
			rc = dispatch(ctx, &a, &st, &mi);
		if (a.metrics && a.mode != MODE_FOLLOW)
			record_metrics(ctx, &a, &st);
	}
	cmd_vol_args_release(&a.va);
	jo_warmup_mount_release(&mi);
	wu_state_release(&st);
	free(a.url);
	return rc;
}
