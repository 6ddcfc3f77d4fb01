/* jfsops sync: incremental, resumable copy between object stores or directories. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/cluster.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/object/object.h"
#include "sync/sync.h"

static const char sync_usage[] =
	"usage: jfsops sync [OPTIONS] SRC DST\n"
	"       jfsops sync [OPTIONS] SRC DST --cluster URL [--plan | --worker] [--id NAME]\n"
	"       jfsops sync --cluster URL --status [SRC DST | --id NAME]\n"
	"\n"
	"Make DST hold the same objects as SRC: list both sides (many key ranges at\n"
	"once), merge the two sorted listings in one pass, copy what differs, and\n"
	"optionally delete what DST has in excess. A rerun with nothing changed\n"
	"only lists. A state file remembers every copy (and multipart progress), so\n"
	"an interrupted run can be continued with --resume.\n"
	"\n"
	"SRC and DST:\n"
	"  s3://[PROFILE@]BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=1&list_v1=1&unordered=1]\n"
	"  DIR or file:///DIR          a local directory (it may be given through a\n"
	"               symlink; symlinks inside it are never followed: see below)\n"
	"  The prefix is a directory: s3://b/data syncs the keys under \"data/\".\n"
	"  The prefix cannot contain a '?' (it starts the settings):\n"
	"    endpoint   http(s)://host:port (default AWS https://s3.REGION.amazonaws.com)\n"
	"    path_style 1 = path-style addressing (MinIO, SeaweedFS, rclone serve s3)\n"
	"    list_v1    1 = ListObjects V1 (stores without a working V2)\n"
	"    unordered  1 = the store does not list in byte order (SeaweedFS lists\n"
	"               directory by directory): sort its listing on local disk.\n"
	"               Without it an order break is detected, remembered in the\n"
	"               state file, and the run re-lists that side sorted.\n"
	"  Settings per side, highest first: the --src-*/--dst-* flags, the URL\n"
	"  query, the profile named in the URL, then the environment. Credentials\n"
	"  never go in the URL and come as a group (key, secret, session token)\n"
	"  from the first of: the flags, the profile, env JFSOPS_SRC_ACCESS_KEY/\n"
	"  JFSOPS_SRC_SECRET_KEY/JFSOPS_SRC_SESSION_TOKEN (and JFSOPS_SRC_ENDPOINT/\n"
	"  _REGION; DST likewise), AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/\n"
	"  AWS_SESSION_TOKEN. Profiles live in the one jfsops config file (see\n"
	"  `jfsops config path`): --config FILE, else env JFSOPS_CONFIG, else\n"
	"  $XDG_CONFIG_HOME/jfsops/config or ~/.config/jfsops/config; sections\n"
	"  [profile NAME] with keys endpoint, region, access_key, secret_key,\n"
	"  session_token, path_style, list_v1, insecure, unordered. A missing\n"
	"  file or profile, or a file holding a secret that group or others can\n"
	"  read (chmod 600), is a usage error (exit 2).\n"
	"  SRC and DST may not overlap, filters or not (rclone refuses it too): the\n"
	"  same tree, or one inside the other, is a usage error (exit 2) before\n"
	"  anything is listed, created or written, also with --cluster. A local\n"
	"  side is taken at its real path (symlinks, '..', '.', repeated and\n"
	"  trailing slashes resolved; a DST not created yet as far as it exists);\n"
	"  an s3 side is endpoint + bucket + prefix, the prefix a directory:\n"
	"  s3://b/p overlaps s3://b/p and s3://b/p/q, not s3://b/pq. Two names of\n"
	"  one server (an address and a host name, a DNS alias, another port in\n"
	"  front) cannot be known: never point SRC and DST at one bucket through\n"
	"  two endpoint names.\n"
	"\n"
	"";

static const char sync_tail[] =
	"\n"
	"Exit status: 0 in sync; 4 some objects failed (or deletions were refused by\n"
	"--max-delete, or SRC keys a local DST cannot hold were refused); 2 usage\n"
	"(also SRC and DST overlapping); 3 failure (a listing page that still failed after\n"
	"--retries, ...); 5 unreachable or timed out; 6 credentials rejected;\n"
	"8 bucket or directory missing (a missing SRC is never an empty listing; an\n"
	"existing empty one is, and then --delete-dst deletes nothing); 130/143\n"
	"interrupted. Codes other than 0 and 4 mean the run is incomplete: it says\n"
	"INCOMPLETE, deletes nothing, and its --json summary has \"complete\": false.\n"
	"\n"
	"Examples:\n"
	"  JFSOPS_SRC_ACCESS_KEY=... JFSOPS_SRC_SECRET_KEY=... \\\n"
	"  JFSOPS_DST_ACCESS_KEY=... JFSOPS_DST_SECRET_KEY=... \\\n"
	"    jfsops sync 's3://data/train?endpoint=http://10.0.0.5:9000&path_style=1' \\\n"
	"                s3://backup/train --delete-dst --max-delete 1000\n"
	"  jfsops sync /srv/export/ s3://prod@archive/export --dry-run\n"
	"  jfsops sync s3://src@train-data/ s3://dst@train-backup/ --config /etc/jfsops/config \\\n"
	"      --delete-dst --metrics-file /var/lib/node_exporter/textfile/jfsops_sync.prom\n"
	"  jfsops sync s3://src@train-data/ s3://dst@train-backup/ --cluster redis://10.0.0.5:6379/5 \\\n"
	"      --id migration-1 --delete-dst --max-delete 1000      # on every host\n"
	"  jfsops sync --cluster redis://10.0.0.5:6379/5 --status\n";

enum { CM_BOTH, CM_PLAN, CM_WORKER };

/* --include, --exclude, --filter, --filter-from: rules in command-line order */
static int filter_add(const struct jo_option *o, char kind, const char *pat, char *why, size_t cap)
{
	struct jo_err err = { 0 };

	if (!jo_sync_filter_add(o->value, kind, pat, &err))
		return 0;
	snprintf(why, cap, "%s", err.msg);
	return -1;
}

static int include_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	return filter_add(o, '+', arg, why, cap);
}

static int exclude_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	return filter_add(o, '-', arg, why, cap);
}

static int filter_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	if ((arg[0] != '+' && arg[0] != '-') || arg[1] != ' ') {
		snprintf(why, cap, "want '+ PATTERN' or '- PATTERN'");
		return -1;
	}
	return filter_add(o, arg[0], arg + 2, why, cap);
}

static int filter_from_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	struct jo_err err = { 0 };

	if (!jo_sync_filter_load(o->value, arg, &err))
		return 0;
	snprintf(why, cap, "%s", err.msg);
	return -1;
}

/* --cluster URL: kept, then its password hidden from ps */
static int cluster_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	char **url = o->value;

	free(*url);
	*url = strdup(arg);
	if (!*url) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	cmd_scrub_url_password((char *)arg); /* a word of argv, writable */
	return 0;
}

/* --src-secret-key, --dst-secret-key: kept, then hidden from ps */
static int side_secret_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	struct jo_objurl_flags *x = o->value;
	char *cp = strdup(arg);

	if (!cp) {
		snprintf(why, cap, "out of memory");
		return -1;
	}
	cmd_scrub_arg((char *)arg);
	free((char *)x->secret_key);
	x->secret_key = cp;
	return 0;
}

/* a name of 1..max bytes, printable ASCII without spaces when strict */
static int name_cb(const struct jo_option *o, const char *arg, char *why, size_t cap,
		   size_t max, bool strict)
{
	size_t n = strlen(arg);

	if (!n || n > max) {
		snprintf(why, cap, "want 1..%zu characters", max);
		return -1;
	}
	for (const char *q = arg; strict && *q; q++)
		if ((unsigned char)*q <= ' ' || (unsigned char)*q > '~') {
			snprintf(why, cap, "want printable ASCII, no spaces");
			return -1;
		}
	*(const char **)o->value = arg;
	return 0;
}

static int job_id_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	return name_cb(o, arg, why, cap, 200, false);
}

static int worker_id_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	return name_cb(o, arg, why, cap, 100, true);
}

/* --job NAME: copied into the label buffer (128 bytes) */
static int job_label_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	if (!*arg || strlen(arg) >= 128) {
		snprintf(why, cap, "want 1-127 bytes");
		return -1;
	}
	snprintf(o->value, 128, "%s", arg);
	return 0;
}

static int stop_at_first(const struct jo_obj_info *info, void *payload)
{
	(void)info;
	(void)payload;
	return 1; /* one entry (or none) answers "can SRC be listed?" */
}

/*
 * The job label of --metrics-file without --job: "sync-" and 16 hex digits of
 * SRC and DST, the name the state file has too (the same pair, the same
 * series; no URL, whose query could hold a secret, in a label).
 */
static void default_job(const struct jo_objurl *a, const struct jo_objurl *b, char *out,
			size_t n)
{
	unsigned char d[32];
	unsigned int dl = 32;
	char buf[1300];
	size_t l;

	snprintf(buf, sizeof(buf), "%s\n%s", a->desc, b->desc);
	EVP_Digest(buf, strlen(buf), d, &dl, EVP_sha256(), NULL);
	snprintf(out, n, "sync-");
	l = strlen(out);
	for (int i = 0; i < 8 && l + 2 < n; i++, l += 2)
		snprintf(out + l, n - l, "%02x", d[i]);
}

static int default_state_path(const struct jo_objurl *a, const struct jo_objurl *b,
			      char *out, size_t n)
{
	unsigned char d[32];
	unsigned int dl = 32;
	char buf[1300];
	snprintf(buf, sizeof(buf), "%s\n%s", a->desc, b->desc);
	EVP_Digest(buf, strlen(buf), d, &dl, EVP_sha256(), NULL);
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[1024];
	if (xdg && *xdg)
		snprintf(dir, sizeof(dir), "%s/jfsops", xdg);
	else
		snprintf(dir, sizeof(dir), "%s/.cache/jfsops", home && *home ? home : "/tmp");
	/* mkdir -p */
	for (char *p = dir + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(dir, 0700);
			*p = '/';
		}
	}
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -1;
	snprintf(out, n, "%s/sync-", dir);
	size_t l = strlen(out);
	for (int i = 0; i < 8 && l + 2 < n; i++, l += 2)
		snprintf(out + l, n - l, "%02x", d[i]);
	snprintf(out + l, n - l, ".db");
	return 0;
}

static void print_json_summary(const struct jo_ctx *ctx, const struct jo_objurl *src,
			       const struct jo_objurl *dst, const struct jo_sync_opts *o,
			       const struct jo_sync_summary *s, bool complete, int exit_code);

static void print_summary(const struct jo_ctx *ctx, const struct jo_objurl *src,
			  const struct jo_objurl *dst, const struct jo_sync_opts *o,
			  const struct jo_sync_summary *s, bool json, bool complete, int exit_code)
{
	fprintf(stderr,
		"jfsops sync: listed %" PRIu64 " src / %" PRIu64 " dst, %s %" PRIu64 " (%" PRIu64
		" bytes), skipped %" PRIu64 ", excluded %" PRIu64 ", extra %" PRIu64 ", %s %" PRIu64
		", failed %" PRIu64 ", symlinks skipped %" PRIu64 " src / %" PRIu64 " dst, %.1fs",
		s->src_listed, s->dst_listed, o->dry_run ? "would copy" : "copied",
		o->dry_run ? s->would_copy : s->copied,
		o->dry_run ? s->would_copy_bytes : s->copied_bytes, s->skipped, s->excluded, s->extra,
		o->dry_run ? "would delete" : "deleted", o->dry_run ? s->would_delete : s->deleted,
		s->failed, s->src_links, s->dst_links, s->seconds);
	/* requests and connections are an object store's: a local side has none */
	if (!src->local && !dst->local)
		fprintf(stderr, ", requests %" PRIu64 " src / %" PRIu64 " dst, connections opened %"
			PRIu64 " src / %" PRIu64 " dst", s->src_requests, s->dst_requests, s->src_conns,
			s->dst_conns);
	else if (!src->local || !dst->local)
		fprintf(stderr, ", requests %" PRIu64 " %s, connections opened %" PRIu64 " %s",
			src->local ? s->dst_requests : s->src_requests, src->local ? "dst" : "src",
			src->local ? s->dst_conns : s->src_conns, src->local ? "dst" : "src");
	fputc('\n', stderr);
	if (s->unrepresentable)
		fprintf(stderr, "jfsops sync: %" PRIu64 " SRC key%s refused: not representable on a "
			"local filesystem (see the lines above)\n", s->unrepresentable,
			s->unrepresentable == 1 ? "" : "s");
	if (s->delete_refused)
		fprintf(stderr, "jfsops sync: %" PRIu64 " deletions NOT done: %s\n", s->extra,
			JO_ESC_TERM(s->delete_refused_why));
	if (!complete)
		fprintf(stderr, "jfsops sync: INCOMPLETE: the run stopped before it had read both "
			"listings whole and finished its copies; nothing was deleted\n");
	if (json)
		print_json_summary(ctx, src, dst, o, s, complete, exit_code);
}

static void print_json_summary(const struct jo_ctx *ctx, const struct jo_objurl *src,
			       const struct jo_objurl *dst, const struct jo_sync_opts *o,
			       const struct jo_sync_summary *s, bool complete, int exit_code)
{
	json_t *j = json_pack("{s:s,s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
			      "s:I,s:I,s:I,s:I,s:I,s:b,s:s,s:i,s:b,s:I,s:I,s:I,s:I}",
			      "src", src->desc, "dst", dst->desc, "job", ctx->mx_job,
			      "dry_run", o->dry_run,
			      "listed_src", (json_int_t)s->src_listed,
			      "listed_dst", (json_int_t)s->dst_listed,
			      "copied", (json_int_t)s->copied, "copied_bytes", (json_int_t)s->copied_bytes,
			      "server_side", (json_int_t)s->server_side,
			      "multipart", (json_int_t)s->multipart,
			      "skipped", (json_int_t)s->skipped, "excluded", (json_int_t)s->excluded,
			      "extra", (json_int_t)s->extra, "deleted", (json_int_t)s->deleted,
			      "failed", (json_int_t)s->failed,
			      "unrepresentable", (json_int_t)s->unrepresentable,
			      "would_copy", (json_int_t)s->would_copy,
			      "would_copy_bytes", (json_int_t)s->would_copy_bytes,
			      "would_delete", (json_int_t)s->would_delete,
			      "links_skipped_src", (json_int_t)s->src_links,
			      "links_skipped_dst", (json_int_t)s->dst_links,
			      "delete_refused", s->delete_refused,
			      "delete_refused_why", s->delete_refused_why,
			      "order_restarts", s->order_restarts,
			      "resumed_listing", s->resumed_listing,
			      "requests_src", (json_int_t)s->src_requests,
			      "requests_dst", (json_int_t)s->dst_requests,
			      "connections_src", (json_int_t)s->src_conns,
			      "connections_dst", (json_int_t)s->dst_conns);

	(void)cmd_summary_emit(ctx, j, complete, exit_code); /* main checks stdout */
}

/*
 * --metrics-file: what this run did (main writes the file and the samples
 * every command has, labelled job=, common/run_metrics.c). A cluster worker's
 * samples are its share of the job, labelled worker= too.
 */
static void record_metrics(struct jo_ctx *ctx, const struct jo_sync_opts *o,
			   const struct jo_sync_summary *s, int rc,
			   const struct jo_sync_cluster_opts *co,
			   const struct jo_sync_cluster_result *cr)
{
	const struct { const char *what, *help, *labels; double v; } m[] = {
		{ "listed_objects", "objects listed by the last run", "side=\"src\"",
		  (double)s->src_listed },
		{ "listed_objects", NULL, "side=\"dst\"", (double)s->dst_listed },
		{ "copied_objects", "objects copied by the last run", NULL, (double)s->copied },
		{ "copied_bytes", "bytes copied by the last run", NULL, (double)s->copied_bytes },
		{ "server_side_copies", "copies done with CopyObject by the last run", NULL,
		  (double)s->server_side },
		{ "multipart_copies", "copies done with a multipart upload by the last run", NULL,
		  (double)s->multipart },
		{ "planned_copies", "objects a dry run would copy", NULL, (double)s->would_copy },
		{ "planned_copy_bytes", "bytes a dry run would copy", NULL,
		  (double)s->would_copy_bytes },
		{ "skipped_objects", "objects already in sync", NULL, (double)s->skipped },
		{ "excluded_objects", "objects the filters excluded", NULL, (double)s->excluded },
		{ "extra_objects", "objects only the destination has", NULL, (double)s->extra },
		{ "deleted_objects", "destination objects deleted by the last run", NULL,
		  (double)s->deleted },
		{ "planned_deletes", "destination objects a dry run would delete", NULL,
		  (double)s->would_delete },
		{ "skipped_links", "symlinks in local directories skipped by the last run (never "
		  "followed)", "side=\"src\"", (double)s->src_links },
		{ "skipped_links", NULL, "side=\"dst\"", (double)s->dst_links },
		{ "failed_objects", "objects whose copy or deletion failed", NULL, (double)s->failed },
		{ "unrepresentable_objects",
		  "SRC keys refused because a local DST cannot hold them one-to-one", NULL,
		  (double)s->unrepresentable },
		{ "errors", "failed objects, plus 1 when the run itself failed", NULL,
		  (double)s->failed + (rc != JO_EXIT_OK && rc != JO_EXIT_PARTIAL ? 1 : 0) },
		{ "delete_refused",
		  "1 if deletions were refused (--max-delete, failed copies, incomplete listing)",
		  NULL, s->delete_refused ? 1 : 0 },
		{ "dry_run", "1 if the last run was a dry run", NULL, o->dry_run ? 1 : 0 },
	};
	char base[300] = "", lab[400];

	if (co) {
		/* cluster: every series is this worker's share of one job */
		jo_cl_worker_label(co->worker, base, sizeof(base));
	}
	/* a sample that cannot be recorded (out of memory) is left out */
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		const char *l = m[i].labels;

		if (co) {
			snprintf(lab, sizeof(lab), "%s%s%s", base, l ? "," : "", l ? l : "");
			l = lab;
		}
		(void)cmd_metric(ctx, m[i].what, m[i].help ? m[i].help : m[i - 1].help, l, m[i].v);
	}
	if (co && cr) {
		const struct { const char *state; int v; } st[] = {
			{ "planned", cr->ranges }, { "done", cr->ranges_done },
			{ "failed", cr->ranges_failed }, { "by_this_worker", cr->ranges_mine },
		};

		for (size_t i = 0; i < sizeof(st) / sizeof(st[0]); i++) {
			snprintf(lab, sizeof(lab), "%s,state=\"%s\"", base, st[i].state);
			(void)cmd_metric_state(ctx, "job_ranges",
					       "ranges of the cluster job, by state (at the end of "
					       "this run)", lab, st[i].v);
		}
		(void)cmd_metric_state(ctx, "job_copied_objects",
				       "objects the whole cluster job copied so far", base,
				       (double)cr->job.copied);
		(void)cmd_metric_state(ctx, "job_finished", "1 when the cluster job is finished", base,
				       cr->finished ? 1 : 0);
	}
}

/*
 * What makes a cluster job: both sides (bucket and prefix, not the endpoint,
 * which may be spelled differently on each host), the filter rules and
 * every option that changes what DST ends up holding. A job named with --id
 * must match it.
 */
static void job_fingerprint(const struct jo_objurl *a, const struct jo_objurl *b,
			    const struct jo_sync_filter *f, const struct jo_sync_opts *o, char out[65])
{
	char txt[5000], ff[65];
	unsigned char d[32];
	unsigned int dl = 32;

	jo_sync_filter_fingerprint(f, ff);
	snprintf(txt, sizeof(txt),
		 "v1\nsrc %s %s %s\ndst %s %s %s\nfilter %s\ncmp %d update %d ignore-existing %d "
		 "existing %d\ndelete %d max-delete %" PRId64 "\nno-metadata %d\n",
		 a->local ? "dir" : "s3", a->bucket, a->prefix, b->local ? "dir" : "s3", b->bucket,
		 b->prefix, ff, (int)o->cmp.mode, o->cmp.update, o->cmp.ignore_existing,
		 o->cmp.existing, o->delete_dst, o->max_delete, o->no_metadata);
	if (o->perms) {
		/* only then: the jobs of before keep their fingerprint */
		size_t l = strlen(txt);

		snprintf(txt + l, sizeof(txt) - l, "perms 1\n");
	}
	EVP_Digest(txt, strlen(txt), d, &dl, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Exit code of a cluster run: how the job stands. */
static int cluster_exit(const struct jo_sync_cluster_opts *co, const struct jo_sync_cluster_result *r)
{
	if (co->mode == JO_SYNC_CLUSTER_PLAN && !r->finished)
		return JO_EXIT_OK;
	if (!r->finished)
		return JO_EXIT_FAIL;
	return strcmp(r->status, "ok") ? JO_EXIT_PARTIAL : JO_EXIT_OK;
}

static void print_cluster_json(const struct jo_ctx *ctx, const struct jo_objurl *src,
			       const struct jo_objurl *dst, const struct jo_sync_cluster_opts *co,
			       const struct jo_sync_cluster_result *r, int exit_code)
{
	const struct jo_sync_summary *m = &r->mine, *j = &r->job;
	json_t *o = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:b,s:b,s:s,s:s,s:i,s:i,s:i,s:i,"
			      "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:s,"
			      "s:{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}}",
			      "src", src->desc, "dst", dst->desc, "job", co->ns,
			      "name", co->name, "worker", co->worker, "job_finished", r->finished,
			      "was_finished", r->was_finished, "status", r->status, "why", r->why,
			      "ranges", r->ranges, "ranges_done", r->ranges_done, "ranges_failed",
			      r->ranges_failed, "ranges_by_this_worker", r->ranges_mine,
			      "copied", (json_int_t)j->copied, "copied_bytes", (json_int_t)j->copied_bytes,
			      "skipped", (json_int_t)j->skipped, "extra", (json_int_t)j->extra,
			      "deleted", (json_int_t)j->deleted, "listed_src", (json_int_t)j->src_listed,
			      "listed_dst", (json_int_t)j->dst_listed, "credited", (json_int_t)j->credited,
			      "delete_refused", j->delete_refused, "delete_refused_why",
			      j->delete_refused_why, "this_worker", "copied", (json_int_t)m->copied,
			      "copied_bytes", (json_int_t)m->copied_bytes, "credited",
			      (json_int_t)m->credited, "skipped", (json_int_t)m->skipped, "deleted",
			      (json_int_t)m->deleted, "failed", (json_int_t)m->failed, "listed_src",
			      (json_int_t)m->src_listed, "listed_dst", (json_int_t)m->dst_listed);

	/* complete: this worker's run went to its end (the job may go on) */
	(void)cmd_summary_emit(ctx, o, exit_code == JO_EXIT_OK || exit_code == JO_EXIT_PARTIAL,
			       exit_code);
}

static void print_cluster_summary(const struct jo_ctx *ctx, const struct jo_objurl *src,
				  const struct jo_objurl *dst,
				  const struct jo_sync_cluster_opts *co,
				  const struct jo_sync_cluster_result *r, bool json, int exit_code)
{
	const struct jo_sync_summary *m = &r->mine, *j = &r->job;

	if (co->mode == JO_SYNC_CLUSTER_PLAN && !r->finished)
		fprintf(stderr, "jfsops sync: job %s: planned, %d ranges\n", co->ns, r->ranges);
	else if (r->was_finished)
		fprintf(stderr, "jfsops sync: job %s is finished (%s%s%s): nothing to do; a new run "
			"needs another --id, or --reset\n", co->ns, JO_ESC_TERM(r->status),
			r->why[0] ? ": " : "", JO_ESC_TERM(r->why));
	else
		fprintf(stderr, "jfsops sync: job %s %s%s%s%s; %d ranges (%d failed); this worker did %d, "
			"copied %" PRIu64 " (%" PRIu64 " bytes), deleted %" PRIu64 ", failed %" PRIu64
			"\n", co->ns, r->finished ? "finished " : "stopped", JO_ESC_TERM(r->status),
			r->why[0] ? ": " : "", JO_ESC_TERM(r->why), r->ranges, r->ranges_failed, r->ranges_mine, m->copied, m->copied_bytes,
			m->deleted, m->failed);
	if (r->finished)
		fprintf(stderr, "jfsops sync: job %s: listed %" PRIu64 " src / %" PRIu64 " dst, copied %"
			PRIu64 " (%" PRIu64 " bytes), skipped %" PRIu64 ", extra %" PRIu64 ", deleted %"
			PRIu64 "\n", co->ns, j->src_listed, j->dst_listed, j->copied, j->copied_bytes,
			j->skipped, j->extra, j->deleted);
	if (j->delete_refused)
		fprintf(stderr, "jfsops sync: %" PRIu64 " deletions NOT done: %s\n", j->extra,
			JO_ESC_TERM(j->delete_refused_why));
	if (json)
		print_cluster_json(ctx, src, dst, co, r, exit_code);
}

/* What one run of the command holds, from the flags to the summary. */
struct sync_cmd {
	struct jo_sync_opts o;
	struct jo_objurl_flags fl[2];
	struct jo_objurl sides[2];
	struct jo_sync_filter *filter;
	const char *state_path, *config, *metrics;
	char metrics_job[128];  /* label job= of --metrics-file */
	bool parsed;
	bool no_state, json;
	int64_t retries;
	uint64_t bwlimit;
	bool no_server_side;
	struct jo_obj *so, *dobj;
	struct jo_sync_state *st;
	struct jo_err err;
	struct jo_sync_summary sum;
	/* cluster mode */
	char *cluster;
	const char *job_name, *worker_id;
	bool c_plan, c_worker, c_status, c_reset;
	int cmode;
	struct jo_sync_cluster_opts co;
	struct jo_sync_cluster_result cres;
	char worker_buf[128], fp[65], ns[17];
	int64_t checkpoint_ms;
	char def_state[2048];   /* the default state path */
};

/* the options of the comparison rules */
static void sync_opts_compare(struct sync_cmd *c, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("Comparison (from the listings and the state file; never a HEAD per "
			  "object):\n"
			  "  default            copy when missing or sizes differ; else skip when the\n"
			  "                     state file recorded this copy and the source is\n"
			  "                     unchanged (size, mtime, ETag); without a record, skip\n"
			  "                     when DST's mtime is not older than SRC's"),
		OPT_SET_INT(0, "size-only", &c->o.cmp.mode, "copy when missing or sizes differ",
			    JO_SYNC_CMP_SIZE),
		OPT_SET_INT(0, "checksum", &c->o.cmp.mode, "compare MD5s: a plain (single-part) ETag, "
			    "or the MD5 the state file recorded; multipart ETags are not MD5s, and when "
			    "one side has no comparable MD5 the default rule decides instead",
			    JO_SYNC_CMP_CHECKSUM),
		OPT_BOOL(0, "update", &c->o.cmp.update, "copy only when SRC's mtime is newer than "
			 "DST's"),
		OPT_BOOL(0, "ignore-existing", &c->o.cmp.ignore_existing, "never touch an object DST "
			 "already has"),
		OPT_BOOL(0, "existing", &c->o.cmp.existing, "only update objects DST already has"),
	};

	JO_OPT_ROWS(t, rows);
}

/* the options of copying and deleting */
static void sync_opts_copy(struct sync_cmd *c, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("Copying:"),
		OPT_UINT(0, "transfers", &c->o.transfers, "N", "objects in flight", 1, 1024),
		OPT_UINT(0, "list-threads", &c->o.list_threads, "N", "key-range listers per side", 1,
			 256),
		OPT_SIZE(0, "part-size", &c->o.part_size, "SIZE", "multipart part size, 5M..5G", 5 << 20,
			 5ULL << 30),
		OPT_SIZE(0, "multipart-threshold", &c->o.multipart_threshold, "SIZE", "objects this "
			 "large use multipart", 5 << 20, 5ULL << 30),
		OPT_UINT(0, "part-concurrency", &c->o.part_concurrency, "N", "parts of one object in "
			 "flight", 1, 64),
		OPT_BOOL(0, "no-server-side", &c->no_server_side, "never use CopyObject (default: used "
			 "when both sides are on the same endpoint with the same access key)"),
		OPT_BOOL(0, "no-metadata", &c->o.no_metadata, "do not HEAD the source for "
			 "Content-Type/user metadata"),
		OPT_BOOL(0, "perms", &c->o.perms, "local SRC and local DST: a copy keeps the source "
			 "file's permission bits (rwx of owner, group and others; never setuid, setgid "
			 "or sticky; owners are never copied), set before the file appears (default: "
			 "off: a new file gets 0666 less the umask, like juicefs sync without --perms; "
			 "objects of an s3 SRC have no bits, so always the default). A file already in "
			 "sync keeps its mode; directories are made 0777 less the umask. Not with an s3 "
			 "DST (exit 2)"),
		OPT_SIZE(0, "bwlimit", &c->bwlimit, "RATE", "bytes per second for all transfers (with "
			 "--cluster: of this worker, not the whole job; default: none, unlimited)", 1,
			 0),
		OPT_UINT(0, "retries", &c->retries, "N", "per-request retries in the object client "
			 "(default 5; twice as many for throttled replies: 503 SlowDown, 429)", 0, 100),
		OPT_TEXT(
		"  Every copy writes user metadata x-amz-meta-mtime (source mtime, unix\n"
		"  seconds), x-amz-meta-jfsops-src-etag (the source ETag) and, for copies in\n"
		"  one request, x-amz-meta-jfsops-md5 (MD5 computed while copying), next to\n"
		"  the source's Content-Type and user metadata. Every source read carries\n"
		"  If-Match with the listed ETag: an object changing mid-copy fails (and is\n"
		"  retried by the next run) instead of arriving torn. Single requests send\n"
		"  Content-MD5; each multipart part's ETag is checked against its MD5 and\n"
		"  the assembled size is checked with a HEAD.\n"
		),
		OPT_GROUP("Deleting:"),
		OPT_BOOL(0, "delete-dst", &c->o.delete_dst, "delete DST objects absent from SRC, after "
			 "the copy pass, and only when no copy failed, both listings completed and SRC "
			 "listed at least one object"),
		OPT_UINT(0, "max-delete", &c->o.max_delete, "N", "refuse all deletions when more than N "
			 "are due (default: none, no limit)", 0, 2000000000),
	};

	JO_OPT_ROWS(t, rows);
}

/* the options of cluster mode */
static void sync_opts_cluster(struct sync_cmd *c, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("Cluster mode (any number of hosts run the same command and share the "
			  "job):"),
		OPT_CALLBACK(0, "cluster", &c->cluster, "URL", "the coordinator, a META-URL of an engine "
			     "you already run (redis://host:6379/5, postgres://..., mysql://..., "
			     "etcd://host:2379/NAME, sqlite3:///path.db on one host; default: none, this "
			     "host alone). It needs no JuiceFS volume; the job's records go in a "
			     "namespace of their own. A password comes from the URL, else env "
			     "META_PASSWORD/REDIS_PASSWORD.", cluster_cb),
		OPT_CMDMODE(0, "plan", &c->cmode, "only plan: sample both listings and record the key "
			    "ranges, then exit (default: plan if nobody has, then work)", CM_PLAN),
		OPT_CMDMODE(0, "worker", &c->cmode, "only work: claim ranges, never plan (waits for a "
			    "plan; default: plan if nobody has, then work)", CM_WORKER),
		OPT_CALLBACK(0, "id", &c->job_name, "NAME", "name the job (default: a hash of SRC, DST, "
			     "filters and options); another SRC/DST/options under the same NAME is "
			     "refused (exit 2). Use one NAME per run from cron (--id "
			     "nightly-$(date +%F)): a finished job stays finished", job_id_cb),
		OPT_BOOL(0, "status", &c->c_status, "print the job (with SRC DST or --id) or every job "
			 "of the coordinator: ranges planned, leased (by whom, since when), done, "
			 "failed; objects and bytes copied; each worker's throughput (--json: one "
			 "object per job; default: off)"),
		OPT_BOOL(0, "reset", &c->c_reset, "drop the job's records and start it over (refused "
			 "while a range is leased; default: off)"),
		OPT_UINT(0, "ranges", &c->co.ranges, "N", "ranges to cut the key space into (default 0: "
			 "one per ~2000 objects sampled, at least 16)", 0, 1000000),
		OPT_DURATION(0, "lease", &c->co.lease_ms, "DUR", "lease of a range (default 30s; renewed "
			     "every third): a killed worker's range goes to another worker after it",
			     1000, 0),
		OPT_DURATION(0, "checkpoint", &c->checkpoint_ms, "DUR", "how often a worker records its "
			     "resume position in the coordinator (default 10s; in-flight copies finish "
			     "first)", 100, 0),
		OPT_UINT(0, "ranges-in-flight", &c->co.in_flight, "N", "ranges one worker works at "
			 "once, each on a lease of its own, all sharing its --transfers: the next is "
			 "listed while the last copies of another drain (default 3)", 1, 64),
		OPT_UINT(0, "max-attempts", &c->co.max_attempts, "N", "failures before a range is given "
			 "up (default 3; the job then finishes \"failed\" and a rerun retries it)", 1,
			 1000),
		OPT_CALLBACK(0, "worker-id", &c->worker_id, "NAME", "this worker's name in leases, "
			     "--status and metrics (default host:pid)", worker_id_cb),
		OPT_TEXT(
		"  Each range is listed on both sides by the worker that claims it, merged and\n"
		"  copied; the worker records a resume position, and the range as done in the\n"
		"  transaction that completes its lease: a done range is never copied again, a\n"
		"  killed worker's range is continued by another one. Every copy carries\n"
		"  x-amz-meta-jfsops-job, so a copy a killed worker made but never recorded is\n"
		"  counted once, by the next attempt. --delete-dst runs as a second phase, only\n"
		"  after every range was listed and copied without failure, with --max-delete\n"
		"  and the empty-source brake applied to the whole job. No state file is used.\n"
		"  Range bounds are byte-order keys; a store that lists directory by directory\n"
		"  (SeaweedFS) is detected and each range sorted on the worker. DUR: 90s, 5m, 500ms.\n"
		"\n"
		"Symlinks in a local directory are skipped, never followed (rclone's default\n"
		"on local paths): they are neither copied nor deleted, nothing they point at\n"
		"is read, written or deleted, and a copy whose destination path holds one\n"
		"fails instead of replacing it. Each skipped link gets a warning line, and\n"
		"the summary counts them. There is no -L/--copy-links: following links would\n"
		"let a DST link send writes and --delete-dst deletions outside DST, and on\n"
		"SRC a link to '/', to a parent or /proc/self/root turns the run into a copy\n"
		"of the whole machine, with no way to tell a link retargeted between listing\n"
		"and reading. Copy the tree a link points to, or name it as the side.\n"
		"\n"
		"A local DST holds a key at DIR/KEY, so keys whose paths would fold into\n"
		"another's (\"a//b\" and \"a/b\", \"./a\" and \"a\", \"/a\" and \"a\") or leave\n"
		"DIR are refused one by one: an empty path segment, a '.' or '..' segment,\n"
		"a leading '/', a trailing '/' on a non-empty object, and '.jfs.*.tmp.*'\n"
		"names (the temp files of the directory store, which its listing hides).\n"
		"Each refused key gets a warning line (control characters as \\xNN), the\n"
		"summary counts them (\"unrepresentable\" in --json), the exit status is 4,\n"
		"every rerun refuses them again, and no --delete-dst deletion runs while\n"
		"one is refused: --exclude them to sync the rest. A zero-size key ending\n"
		"in '/' is a directory marker, counted as excluded. A key with a NUL byte\n"
		"stops the listing as a malformed reply (exit 7).\n"
		),
	};

	JO_OPT_ROWS(t, rows);
}

/* the options of the filters */
static void sync_opts_filters(struct sync_cmd *c, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("Filters (rclone-style, on keys relative to the prefix; excluded keys are\n"
			  "neither copied nor deleted):"),
		OPT_CALLBACK(0, "include", c->filter, "PATTERN", "copy (and delete) only keys some "
			     "include matches (repeatable; default: none, every key)", include_cb),
		OPT_CALLBACK(0, "exclude", c->filter, "PATTERN", "leave matching keys alone (repeatable; "
			     "default: none)", exclude_cb),
		OPT_CALLBACK(0, "filter", c->filter, "RULE", "'+ PATTERN' (include) or '- PATTERN' "
			     "(exclude) (repeatable; default: none)", filter_cb),
		OPT_CALLBACK(0, "filter-from", c->filter, "FILE", "lines '+ PATTERN', '- PATTERN', '#' "
			     "comments, '!' clears (default: none)", filter_from_cb),
		OPT_TEXT(
		"  '*' matches within one path segment, '**' across '/', '?' one character,\n"
		"  '[a-z]' a class, '{a,b}' alternatives, '\\' escapes. A leading '/' anchors\n"
		"  at the start of the key, otherwise the pattern may match any tail starting\n"
		"  after a '/'. A trailing '/' means everything below that directory.\n"
		"  Rules apply in command-line order and the first match decides (rclone\n"
		"  groups them by flag type instead). With any include rule, a key no rule\n"
		"  matches is excluded; otherwise it is included.\n"
		),
	};

	JO_OPT_ROWS(t, rows);
}

/* the options of state and output, and --help */
static void sync_opts_output(struct sync_cmd *c, struct jo_ctx *ctx, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("State and output:"),
		OPT_STRING(0, "state", &c->state_path, "FILE", "state file (default "
			   "~/.cache/jfsops/sync-<hash>.db, one per SRC/DST pair)"),
		OPT_BOOL(0, "no-state", &c->no_state, "keep no state (compare by listings only)"),
		OPT_BOOL(0, "resume", &c->o.resume, "continue an interrupted run: list both sides only "
			 "after the saved position (every key before it was done; not with "
			 "--delete-dst, which needs complete listings) and continue its multipart "
			 "uploads (parts checked with ListParts). Without --resume a run lists "
			 "everything (finished objects are still skipped, from the state file) and "
			 "aborts leftover uploads."),
		OPT_BOOL('n', "dry-run", &c->o.dry_run, "change nothing; print each planned copy/delete "
			 "on stdout ('copy KEY (reason)', JSON lines with --json)"),
		OPT_BOOL(0, "json", &c->json, "final summary as one JSON object on stdout"),
		OPT_BOOL('v', "verbose", &c->o.verbose, "one line per action on stderr"),
		OPT_BOOL('q', "quiet", &ctx->quiet, "no progress line"),
		OPT_SIZE(0, "sort-mem", &c->o.sort_mem, "SIZE", "most memory for sorting an unordered "
			 "listing", 1 << 20, 0),
		OPT_STRING(0, "tmp-dir", &c->o.tmp_dir, "DIR", "where sort runs spill (default /tmp)"),
		OPT_STRING(0, "config", &c->config, "FILE", "the config file of the URL profiles "
			   "(default: env JFSOPS_CONFIG, else $XDG_CONFIG_HOME/jfsops/config or "
			   "~/.config/jfsops/config)"),
		OPT_STRING(0, "metrics-file", &c->metrics, "PATH", "write Prometheus textfile metrics at "
			   "the end of the run, also when it fails (atomic; default: none; labelled "
			   "job=; --cluster: this worker's share, labelled worker= too, with "
			   "jfsops_sync_job_ranges{state=...}): gauges "
			   "jfsops_sync_last_run_listed_objects{side=src|dst}, "
			   "_last_run_copied_objects, _last_run_copied_bytes, _last_run_skipped_objects, "
			   "_last_run_deleted_objects, _last_run_failed_objects, ..., "
			   "_last_run_exit_code, _last_run_duration_seconds, "
			   "_last_success_timestamp_seconds (kept by a failed run)"),
		OPT_CALLBACK(0, "job", c->metrics_job, "NAME", "the job label of --metrics-file (default: "
			     "the cluster --id, else sync-HASH of SRC and DST, as the state file)",
			     job_label_cb),
		OPT_HELP(),
	};

	JO_OPT_ROWS(t, rows);
}

/* the options of the per-side flags */
static void sync_opts_sides(struct sync_cmd *c, struct jo_opt_table *t)
{
	const struct jo_option rows[] = {
		OPT_GROUP("Per side (over the URL query, the profile and the environment; prefer the\n"
			  "profile or the environment for secrets: ps shows command lines):"),
		OPT_STRING(0, "src-endpoint", &c->fl[0].endpoint, "URL", "SRC endpoint "
			   "http(s)://host:port (default: the URL's endpoint=, the profile's, env "
			   "JFSOPS_SRC_ENDPOINT, else AWS https://s3.REGION.amazonaws.com)"),
		OPT_STRING(0, "src-region", &c->fl[0].region, "R", "SRC region (default: the URL's, the "
			   "profile's, env JFSOPS_SRC_REGION or AWS_REGION, else us-east-1)"),
		OPT_STRING(0, "src-access-key", &c->fl[0].access_key, "K", "SRC access key (default: the "
			   "profile's, env JFSOPS_SRC_ACCESS_KEY, else AWS_ACCESS_KEY_ID)"),
		OPT_CALLBACK(0, "src-secret-key", &c->fl[0], "S", "SRC secret key (default: the "
			     "profile's, env JFSOPS_SRC_SECRET_KEY, else AWS_SECRET_ACCESS_KEY)",
			     side_secret_cb),
		OPT_SET_INT(0, "src-path-style", &c->fl[0].path_style, "SRC path-style addressing "
			    "(default: path_style=)", 1),
		OPT_SET_INT(0, "src-list-v1", &c->fl[0].list_v1, "SRC ListObjects V1 (default: "
			    "list_v1=)", 1),
		OPT_SET_INT(0, "src-unordered", &c->fl[0].unordered, "SRC does not list in byte order "
			    "(default: unordered=)", 1),
		OPT_STRING(0, "dst-endpoint", &c->fl[1].endpoint, "URL", "DST endpoint (default: as for "
			   "SRC, env JFSOPS_DST_ENDPOINT)"),
		OPT_STRING(0, "dst-region", &c->fl[1].region, "R", "DST region (default: as for SRC, env "
			   "JFSOPS_DST_REGION)"),
		OPT_STRING(0, "dst-access-key", &c->fl[1].access_key, "K", "DST access key (default: as "
			   "for SRC, env JFSOPS_DST_ACCESS_KEY)"),
		OPT_CALLBACK(0, "dst-secret-key", &c->fl[1], "S", "DST secret key (default: as for SRC, "
			     "env JFSOPS_DST_SECRET_KEY)", side_secret_cb),
		OPT_SET_INT(0, "dst-path-style", &c->fl[1].path_style, "DST path-style addressing", 1),
		OPT_SET_INT(0, "dst-list-v1", &c->fl[1].list_v1, "DST ListObjects V1", 1),
		OPT_SET_INT(0, "dst-unordered", &c->fl[1].unordered, "DST does not list in byte order",
			    1),
	};

	JO_OPT_ROWS(t, rows);
}

/* Parse argv into c: the count of the other arguments, or JO_OPT_SHOWN/REFUSED. */
static int sync_parse(struct sync_cmd *c, struct jo_ctx *ctx, int argc, char **argv)
{
	struct jo_opt_table t = { .n = 0 };

	sync_opts_compare(c, &t);
	sync_opts_copy(c, &t);
	sync_opts_cluster(c, &t);
	sync_opts_filters(c, &t);
	sync_opts_output(c, ctx, &t);
	sync_opts_sides(c, &t);
	jo_opt_rows_end(&t);

	struct jo_opt_cmd cmd = { ctx->prefix, sync_usage, sync_tail, t.row };

	return jo_opt_parse(&cmd, argc, argv);
}

/* The flags that say the same thing another way. */
static void sync_apply_flags(struct sync_cmd *c)
{
	c->o.server_side = !c->no_server_side;
	c->co.checkpoint_s = (double)c->checkpoint_ms / 1000.0;
	c->c_plan = c->cmode == CM_PLAN;
	c->c_worker = c->cmode == CM_WORKER;
	if (c->o.verbose && jo_log_get_level() < JO_LOG_INFO)
		jo_log_setup(NULL, JO_LOG_INFO);
}

/* The cluster flags that need --cluster or exclude each other: 0 or the exit code. */
static int sync_check_cluster_flags(const struct sync_cmd *c, struct jo_ctx *ctx)
{
	if (!c->cluster && (c->c_plan || c->c_worker || c->c_status || c->c_reset || c->job_name ||
			    c->worker_id))
		return cmd_usage_error(ctx, "--plan, --worker, --status, --reset, --id and --worker-id "
				       "need --cluster URL");
	if (c->c_status && (c->c_plan || c->c_worker || c->c_reset))
		return cmd_usage_error(ctx, "--status only reads: not with --plan, --worker or --reset");
	if (c->cluster && (c->o.dry_run || c->state_path))
		return cmd_usage_error(ctx, "%s runs on one host: drop --cluster (the coordinator keeps "
				       "the cluster's state)", c->o.dry_run ? "--dry-run" : "--state");
	return 0;
}

/* --status of the coordinator: the job of namespace ns, or every job (ns NULL). */
static int sync_status(struct sync_cmd *c, struct jo_ctx *ctx, const char *ns)
{
	struct jo_sync_status_opts sto = { .url = c->cluster, .json = c->json, .ns = ns };

	cmd_env_meta_passwords(&sto.password, &sto.redis_password);
	if (jo_sync_cluster_status(&sto, stdout, &c->err))
		return cmd_fail(ctx, &c->err);
	return 0;
}

/* SRC and DST given, the comparison flags consistent: 0 or the exit code. */
static int sync_check_args(struct sync_cmd *c, struct jo_ctx *ctx, int n)
{
	if (n != 2)
		return cmd_usage_error(ctx, "expected SRC and DST (see 'jfsops sync --help')");
	if (c->o.cmp.existing && c->o.cmp.ignore_existing)
		return cmd_usage_error(ctx, "--existing and --ignore-existing exclude each other");
	if (c->o.resume && c->no_state)
		return cmd_usage_error(ctx, "--resume needs the state file");
	if (c->o.multipart_threshold < c->o.part_size)
		c->o.multipart_threshold = c->o.part_size;
	return 0;
}

/* An error of the engine: bad input is a usage error, anything else a failure. */
static int sync_error(struct jo_ctx *ctx, const struct jo_err *err)
{
	return err->code == JO_EINVAL ? cmd_usage_error(ctx, "%s", err->msg) : cmd_fail(ctx, err);
}

/* SRC and DST parsed and checked against each other: 0 or the exit code. */
static int sync_sides(struct sync_cmd *c, struct jo_ctx *ctx, char **argv)
{
	for (int i = 0; i < 2; i++)
		if (jo_objurl_parse(&c->sides[i], argv[1 + i], i ? "dst" : "src", &c->fl[i],
				       c->config, &c->err))
			return sync_error(ctx, &c->err);
	/* the job label of metrics and summary (a cluster job: --id or its name, below) */
	if (!c->metrics_job[0] && !c->cluster)
		default_job(&c->sides[0], &c->sides[1], c->metrics_job, sizeof(c->metrics_job));
	cmd_metrics_job(ctx, c->metrics_job);
	if (!c->c_status) {
		/* Nothing is listed, created or written for overlapping trees (filters or not). */
		char why[9000];
		int ov = jo_sync_sides_overlap(&c->sides[0], &c->sides[1], why, sizeof(why), &c->err);

		if (ov < 0)
			return cmd_fail(ctx, &c->err);
		if (ov)
			return cmd_usage_error(ctx, "SRC and DST overlap (%s): one would copy into or "
					       "delete from the other", why);
	}
	if (c->o.perms && !c->sides[1].local)
		return cmd_usage_error(ctx, "--perms is for a local DST (objects have no permission "
				       "bits)");
	if (c->o.perms && !c->sides[0].local) {
		jo_warn("--perms: the objects of SRC %s carry no permission bits: files get the "
			"default mode (0666 less the umask)", c->sides[0].desc);
		c->o.perms = false;
	}
	return 0;
}

/* The cluster job's fingerprint, namespace and job label. */
static void sync_cluster_job(struct sync_cmd *c, struct jo_ctx *ctx)
{
	job_fingerprint(&c->sides[0], &c->sides[1], c->filter, &c->o, c->fp);
	if (c->job_name) {
		jo_sync_job_ns(c->job_name, true, c->ns);
	} else {
		char seed[1600];

		snprintf(seed, sizeof(seed), "%s\n%s\n%s", c->fp, c->sides[0].desc, c->sides[1].desc);
		jo_sync_job_ns(seed, false, c->ns);
	}
	/* the job label: --job, else --id, else the job's name in the coordinator */
	if (!c->metrics_job[0])
		snprintf(c->metrics_job, sizeof(c->metrics_job), "%s",
			 c->job_name ? c->job_name : c->ns);
	cmd_metrics_job(ctx, c->metrics_job);
}

/* The state file, --state or the default one: 0 or the exit code. */
static int sync_open_state(struct sync_cmd *c, struct jo_ctx *ctx)
{
	if (!c->state_path) {
		if (default_state_path(&c->sides[0], &c->sides[1], c->def_state,
				       sizeof(c->def_state))) {
			jo_err_set(&c->err, JO_EIO, "cannot create the state directory for %s: %s",
				   c->def_state, strerror(errno));
			return cmd_fail(ctx, &c->err);
		}
		c->state_path = c->def_state;
	}
	if (jo_sync_state_open(&c->st, c->state_path, c->o.dry_run, &c->err))
		return cmd_fail(ctx, &c->err);
	if (c->o.verbose)
		jo_info("state file %s", c->state_path);
	return 0;
}

/* Both object clients, a local DST made (or noted missing by a dry run): 0 or the exit code. */
static int sync_connect(struct sync_cmd *c, struct jo_ctx *ctx)
{
	int conns = c->o.transfers * c->o.part_concurrency + c->o.list_threads + 4;

	if (c->cluster) /* each range in flight lists with its own listers */
		conns += (c->co.in_flight - 1) * c->o.list_threads;

	if (jo_objurl_open(&c->sides[0], conns, (int)c->retries, &c->so, &c->err) ||
	    jo_objurl_open(&c->sides[1], conns, (int)c->retries, &c->dobj, &c->err))
		return cmd_fail(ctx, &c->err);
	if (c->sides[1].local && !c->o.dry_run) {
		/* A SRC that cannot be listed (missing, refused) must not leave a new DST behind. */
		int pr = jo_obj_list(c->so, c->sides[0].prefix, NULL, "/", stop_at_first, NULL, &c->err);

		if (pr < 0) {
			jo_err_wrap(&c->err, "listing SRC %s", c->sides[0].desc);
			return cmd_fail(ctx, &c->err);
		}
		jo_err_clear(&c->err);
		if (jo_obj_create_bucket(c->dobj, &c->err))
			return cmd_fail(ctx, &c->err);
	}
	if (c->sides[1].local && c->o.dry_run) {
		/* A real run creates a missing DST directory: a dry run lists it as empty. */
		struct stat dst_st;

		if (stat(c->sides[1].bucket, &dst_st) != 0 && errno == ENOENT) {
			c->o.dst_absent = true;
			if (c->o.verbose)
				jo_info("%s does not exist yet: a real run creates it", c->sides[1].desc);
		}
	}
	return 0;
}

/* This host's part of the cluster job, and its summary: the exit code. */
static int sync_run_cluster(struct sync_cmd *c, struct jo_ctx *ctx)
{
	struct jo_sync_cluster_opts *co = &c->co;
	int rc;

	if (!c->worker_id) {
		jo_lease_owner(c->worker_buf, sizeof(c->worker_buf), NULL);
		c->worker_id = c->worker_buf;
	}
	co->url = c->cluster;
	cmd_env_meta_passwords(&co->password, &co->redis_password);
	co->ns = c->ns;
	co->name = c->job_name;
	co->fp = c->fp;
	co->worker = c->worker_id;
	co->mode = c->c_plan ? JO_SYNC_CLUSTER_PLAN : c->c_worker ? JO_SYNC_CLUSTER_WORK
								  : JO_SYNC_CLUSTER_ALL;
	co->reset = c->c_reset;
	int r = jo_sync_cluster_run(&c->sides[0], c->so, &c->sides[1], c->dobj, &c->o, co, &c->cres,
				    &c->err);
	jo_sync_bw_free(c->o.bw);
	c->sum = c->cres.mine;
	if (r) {
		rc = sync_error(ctx, &c->err);
		if (c->json)
			print_cluster_json(ctx, &c->sides[0], &c->sides[1], co, &c->cres, rc);
		return rc;
	}
	rc = cluster_exit(co, &c->cres);
	print_cluster_summary(ctx, &c->sides[0], &c->sides[1], co, &c->cres, c->json, rc);
	return rc;
}

/* The run on this host alone, and its summary: the exit code. */
static int sync_run_local(struct sync_cmd *c, struct jo_ctx *ctx)
{
	struct jo_sync_summary *sum = &c->sum;
	struct jo_obj_stats ss, ds;
	int rc;
	int r = jo_sync_run(&c->sides[0], c->so, &c->sides[1], c->dobj, &c->o, sum, &c->err);

	jo_sync_bw_free(c->o.bw);
	jo_obj_get_stats(c->so, &ss);
	jo_obj_get_stats(c->dobj, &ds);
	sum->src_requests = ss.requests;
	sum->src_conns = ss.connections;
	sum->dst_requests = ds.requests;
	sum->dst_conns = ds.connections;
	if (r) {
		rc = cmd_fail(ctx, &c->err);
		/*
		 * Bad input found before anything was read (a missing SRC or bucket,
		 * a refused credential, an unreachable server, a bad URL) is its one
		 * error line; a fault that cut a run short also says INCOMPLETE. The
		 * JSON summary is printed always.
		 */
		int code = c->err.code;
		bool bad_input = code == JO_ENOTFOUND || code == JO_ESTATE || code == JO_EINVAL ||
				 code == JO_EAUTH || code == JO_ECONNECT || code == JO_EUNSUPPORTED ||
				 code == JO_ENOTJFS;
		bool began = sum->src_listed || sum->dst_listed || sum->copied || sum->failed ||
			     sum->deleted;

		if (began || !bad_input)
			print_summary(ctx, &c->sides[0], &c->sides[1], &c->o, sum, c->json, false, rc);
		else if (c->json)
			print_json_summary(ctx, &c->sides[0], &c->sides[1], &c->o, sum, false, rc);
		return rc;
	}
	rc = sum->failed || sum->unrepresentable || (sum->delete_refused && c->o.delete_dst)
		     ? JO_EXIT_PARTIAL : JO_EXIT_OK;
	print_summary(ctx, &c->sides[0], &c->sides[1], &c->o, sum, c->json, true, rc);
	return rc;
}

/* Everything after the checks: state, clients, the run (here or in the cluster). */
static int sync_execute(struct sync_cmd *c, struct jo_ctx *ctx)
{
	int rc;

	if (c->cluster) {
		sync_cluster_job(c, ctx);
		if (c->c_status)
			return sync_status(c, ctx, c->ns);
		c->no_state = true;
	}
	if (!c->no_state && (rc = sync_open_state(c, ctx)))
		return rc;
	if ((rc = sync_connect(c, ctx)))
		return rc;
	c->o.filter = c->filter;
	c->o.state = c->st;
	c->o.bw = jo_sync_bw_new(c->bwlimit);
	c->o.progress = ctx->tty && !ctx->quiet;
	c->o.json = c->json;
	return c->cluster ? sync_run_cluster(c, ctx) : sync_run_local(c, ctx);
}

/* --metrics-file: what main writes when the command returns. */
static void sync_metrics(struct sync_cmd *c, struct jo_ctx *ctx, int rc)
{
	if (!c->metrics || !c->parsed || c->c_status)
		return;
	if (!c->metrics_job[0] && c->sides[0].desc[0] && c->sides[1].desc[0])
		default_job(&c->sides[0], &c->sides[1], c->metrics_job, sizeof(c->metrics_job));
	/* main writes the file (common/run_metrics.c), labelled with the job */
	ctx->metrics_path = c->metrics;
	if (!ctx->mx_job[0] && c->metrics_job[0])
		cmd_metrics_job(ctx, c->metrics_job);
	bool worker = c->cluster && c->co.worker;

	record_metrics(ctx, &c->o, &c->sum, rc, worker ? &c->co : NULL, worker ? &c->cres : NULL);
}

static void sync_cmd_free(struct sync_cmd *c)
{
	jo_obj_close(c->so);
	jo_obj_close(c->dobj);
	jo_sync_state_close(c->st);
	jo_sync_filter_free(c->filter);
	if (c->cluster) {
		memset(c->cluster, 0, strlen(c->cluster));
		free(c->cluster);
	}
	for (int i = 0; i < 2; i++) {
		free((char *)c->fl[i].secret_key);
		jo_objurl_free(&c->sides[i]);
	}
}

int cmd_sync(int argc, char **argv, struct jo_ctx *ctx)
{
	struct sync_cmd *c = calloc(1, sizeof(*c));
	int n, rc;

	if (!c)
		return cmd_usage_error(ctx, "out of memory");
	c->o = (struct jo_sync_opts){
		.transfers = 16, .list_threads = 4, .part_concurrency = 4,
		.part_size = 16u << 20, .multipart_threshold = 64u << 20, .max_delete = -1,
		.server_side = true, .sort_mem = 256u << 20,
	};
	c->fl[0] = c->fl[1] = (struct jo_objurl_flags)JO_OBJURL_FLAGS_INIT;
	c->json = ctx->json;
	c->retries = -1;
	c->cmode = CM_BOTH;
	c->co = (struct jo_sync_cluster_opts){ .lease_ms = 30000, .max_attempts = 3,
					       .checkpoint_s = 10, .in_flight = 3 };
	c->checkpoint_ms = 10000;
	if (jo_sync_filter_new(&c->filter)) {
		free(c);
		return cmd_usage_error(ctx, "out of memory");
	}
	n = sync_parse(c, ctx, argc, argv);
	if (n < 0) {
		rc = cmd_opt_exit(ctx, n);
		goto out;
	}
	sync_apply_flags(c);
	if ((rc = sync_check_cluster_flags(c, ctx)))
		goto out;
	if (c->c_status && n == 0) {
		/* every job, or the one named */
		if (c->job_name)
			jo_sync_job_ns(c->job_name, true, c->ns);
		c->parsed = true;
		rc = sync_status(c, ctx, c->job_name ? c->ns : NULL);
		goto out;
	}
	if ((rc = sync_check_args(c, ctx, n)))
		goto out;
	c->parsed = true;
	if ((rc = sync_sides(c, ctx, argv)))
		goto out;
	rc = sync_execute(c, ctx);
out:
	sync_metrics(c, ctx, rc);
	sync_cmd_free(c);
	free(c);
	return rc;
}
