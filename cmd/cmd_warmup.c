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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/config.h"
#include "common/err.h"
#include "common/exit.h"
#include "common/opt.h"
#include "common/volume.h"
#include "common/warmup/run.h"
#include "common/warmup/warmup.h"

static const char usage_head[] =
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
	"\n";

static const char usage_tail[] =
	CMD_VOL_NOTE
	"\n"
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

enum wu_mode { MODE_WARM, MODE_LIST, MODE_CHECK, MODE_EVICT, MODE_FOLLOW, MODE_CLIENT };

static const char *mode_flag(int m)
{
	switch (m) {
	case MODE_LIST: return "--dry-run";
	case MODE_CHECK: return "--check";
	case MODE_EVICT: return "--evict";
	case MODE_FOLLOW: return "--follow";
	}
	return "warm";
}

/* The command line of a warmup run. */
struct warmup_args {
	int mode;
	const char *ranges, *mount, *prefix, *metrics;
	const char *done_id, *status_id;      /* --done ID / --status ID */
	const char *client_verb, *client_id;  /* the one of them given */
	struct wu_follow_opts fo;
	bool have_ahead;
	uint64_t mem;
	unsigned threads;
	struct cmd_vol_args va;
	char *url;  /* META-URL, a copy (argv's is scrubbed) */
};

/* --ahead K (given or not: it only goes with --follow) and --evict-others keep|drop */
static int follow_cb(const struct jo_option *o, const char *arg, char *want, size_t cap)
{
	struct warmup_args *a = o->value;
	uint64_t k;

	if (!strcmp(o->long_name, "ahead")) {
		if (jo_parse_uint(arg, 1, 4096, &k)) {
			snprintf(want, cap, "want an integer 1..4096");
			return -1;
		}
		a->fo.ahead = (unsigned)k;
		a->have_ahead = true;
	} else if (!strcmp(arg, "keep") || !strcmp(arg, "drop")) {
		a->fo.others = arg[0] == 'k' ? WU_OTHERS_KEEP : WU_OTHERS_DROP;
	} else {
		snprintf(want, cap, "want keep or drop");
		return -1;
	}
	return 0;
}

/* --done ID / --status ID: one of them, and no other mode; -1 when fine, else the exit code */
static int client_mode(const struct jo_opt_cmd *cmd, struct warmup_args *a)
{
	if (!a->done_id && !a->status_id)
		return -1;
	if (a->done_id && a->status_id)
		return jo_opt_error(cmd, "give one of --done and --status");
	a->client_verb = a->done_id ? "done" : "status";
	a->client_id = a->done_id ? a->done_id : a->status_id;
	if (a->mode != MODE_WARM)
		return jo_opt_error(cmd, "%s and --%s exclude each other", mode_flag(a->mode),
				    a->client_verb);
	a->mode = MODE_CLIENT;
	return -1;
}

/* What the options say together (n arguments); -1 when they agree, else the exit code. */
static int check_args(int n, const struct jo_opt_cmd *cmd, struct warmup_args *a)
{
	const struct wu_follow_opts *fo = &a->fo;

	if (n != 1)
		return jo_opt_error(cmd, "expected one META-URL");
	if (a->mode != MODE_LIST && !a->mount)
		return jo_opt_error(cmd, "--mount DIR is required (or --dry-run to list blocks)");
	if (a->mode != MODE_FOLLOW && (fo->control || fo->state || fo->evict_done || a->have_ahead))
		return jo_opt_error(cmd, "--%s only goes with --follow",
				    fo->control ? "control" : fo->state ? "state" :
				    fo->evict_done ? "evict-done" : "ahead");
	if (a->mode == MODE_FOLLOW && !fo->control)
		return jo_opt_error(cmd, "--follow needs --control PATH (where the consumer says "
				    "'done ID')");
	if (fo->others != WU_OTHERS_DEFAULT && a->mode != MODE_EVICT &&
	    !(a->mode == MODE_FOLLOW && fo->evict_done))
		return jo_opt_error(cmd, "--evict-others only goes with --evict or --evict-done");
	if (fo->others == WU_OTHERS_DEFAULT)
		a->fo.others = a->mode == MODE_EVICT ? WU_OTHERS_KEEP : WU_OTHERS_DROP;
	return -1;
}

/* --done ID / --status ID: a client of a running pipeline. */
static int run_client(int n, struct jo_ctx *ctx, const struct jo_opt_cmd *cmd,
		      const struct warmup_args *a)
{
	if (n != 0)
		return jo_opt_error(cmd, "--%s talks to a running pipeline: no META-URL",
				    a->client_verb);
	if (!a->fo.control)
		return jo_opt_error(cmd, "--%s needs --control PATH (the pipeline's)",
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
	struct jo_option opts[] = {
		OPT_GROUP("Options:"),
		OPT_STRING('r', "ranges", &a.ranges, "FILE", "the range list or batch stream "
			   "('-' = stdin, the default; a FIFO is read as it comes)"),
		OPT_STRING('m', "mount", &a.mount, "DIR", "a JuiceFS mount of this volume to warm "
			   "through (default: none; required unless --dry-run)"),
		OPT_CMDMODE('n', "dry-run", &a.mode, "print the block keys, sizes and total; read "
			    "nothing", MODE_LIST),
		OPT_CMDMODE(0, "list", &a.mode, "the same as --dry-run", MODE_LIST),
		OPT_STRING('P', "prefix", &a.prefix, "DIR", "volume directory the range paths are "
			   "relative to (default: none, the volume root)"),
		OPT_UINT('p', "threads", &a.threads, "N", "blocks read in parallel (default 8); also "
			 "the parallelism asked of the mount by --check/--evict", 1, 1024),
		OPT_SIZE(0, "mem-limit", &a.mem, "SIZE", "most memory for sorting block records "
			 "(default 64M)", 1u << 20, 0),
		OPT_BOOL(0, "json", &ctx->json, "JSON lines: one per block with --dry-run and "
			 "--check, errors, and a summary (default: text)"),
		OPT_STRING(0, "metrics-file", &a.metrics, "PATH", "write Prometheus textfile metrics "
			   "at the end of a one-shot run, also when it fails (atomic; default: none; "
			   "gauges labelled volume=): jfsops_warmup_last_run_files, _last_run_ranges, "
			   "_last_run_blocks, _last_run_bytes, _last_run_warmed_blocks, "
			   "_last_run_warmed_bytes, _last_run_failed_blocks, _last_run_dry_run, "
			   "_last_run_exit_code, _last_run_duration_seconds, "
			   "_last_success_timestamp_seconds"),
		OPT_GROUP("Cache check and eviction:"),
		OPT_CMDMODE(0, "check", &a.mode, "report which of the ranges' blocks the mount's "
			    "cache holds: count, bytes, percent, per cache directory (default: off); "
			    "nothing is read or changed", MODE_CHECK),
		OPT_CMDMODE(0, "evict", &a.mode, "remove exactly the ranges' blocks from the mount's "
			    "cache (default: off)", MODE_EVICT),
		OPT_CALLBACK(0, "evict-others", &a, "keep|drop", "the other cached blocks of a file "
			     "the mount evicts whole: keep = read them back, drop = let them go "
			     "(default: keep with --evict, drop with --evict-done)", follow_cb),
		OPT_GROUP("Follow mode (a look-ahead pipeline for a training loop):"),
		OPT_CMDMODE(0, "follow", &a.mode, "read a stream of batches and keep the next ones "
			    "warm (default: off; see below)", MODE_FOLLOW),
		OPT_CALLBACK('k', "ahead", &a, "K", "batches warmed beyond the consumer's position, "
			     "the one it reads included (default 2, 1..4096)", follow_cb),
		OPT_STRING(0, "control", &a.fo.control, "PATH", "where the consumer says 'done ID' "
			   "and asks 'status ID': a FIFO that exists (yours, not writable by others), "
			   "else a unix socket created there (mode 0600; it answers your uid and root "
			   "only); PATH's directory must be yours or root's and writable by others "
			   "only with the sticky bit (required with --follow, --done, --status)"),
		OPT_BOOL(0, "evict-done", &a.fo.evict_done, "evict a batch's blocks once the consumer "
			 "passed it, except the blocks a batch in the window still needs (default: "
			 "off)"),
		OPT_STRING(0, "state", &a.fo.state, "FILE", "keep the consumer's position in FILE and "
			   "resume from it when the same stream is read again (default: none)"),
		OPT_STRING(0, "done", &a.done_id, "ID", "tell the pipeline at --control that the "
			   "consumer finished batch ID (and every batch before it); no META-URL "
			   "(default: none, run a pipeline)"),
		OPT_STRING(0, "status", &a.status_id, "ID", "ask the pipeline at --control whether "
			   "batch ID is ready: prints its JSON status; exit 0 ready, 1 not (yet), "
			   "8 unknown (default: none, run a pipeline)"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&a.va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, usage_head, usage_tail, opts };
	int n = jo_opt_parse(&cmd, argc, argv), rc;

	if (n < 0)
		return cmd_opt_exit(ctx, n);
	rc = client_mode(&cmd, &a);
	if (rc < 0 && a.mode == MODE_CLIENT)
		rc = run_client(n, ctx, &cmd, &a);
	if (rc < 0)
		rc = check_args(n, &cmd, &a);
	if (rc < 0) {
		st.prefix = a.prefix;
		rc = open_volume(ctx, &a, argv[1], &st, &mi);
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
