/*
 * cmd_usage.c: `jfsops usage` - capacity, files, cold data and growth per
 * directory from one walk of the metadata. Arguments and output only; the
 * fold is usage.c, the page html.c.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/file.h"
#include "usage/usage.h"

static const char usage_text[] =
	"usage: jfsops usage META-URL [PATH] [--depth N] [--top N] [--json] [--html FILE]\n"
	"\n"
	"Capacity per directory from one walk of the volume's metadata (no mount):\n"
	"logical bytes, files, directories, bytes by age of last access and of last\n"
	"modification, cold bytes, the largest directories and files, and the\n"
	"volume's trash and pending-reclaim bytes; with --since, the growth of every\n"
	"directory since an earlier --json report. SQL and etcd volumes are read from\n"
	"one snapshot; Redis keeps none, and the report says so. Memory is bounded\n"
	"whatever the tree's shape: what does not fit is sorted on disk.\n"
	"\n"
	"Sizes: SIZE is the logical size (regular files' lengths); \"space\" in the\n"
	"JSON is what `juicefs summary` shows as SIZE (every entry rounded up to\n"
	"4 KiB). Hard links count once per path. The last access of a file is the\n"
	"later of its atime and mtime: JuiceFS clients keep no access times by\n"
	"default (--atime-mode noatime), and the report says when no file shows one.\n"
	"\n"
	"";

static const char usage_tail[] =
	"\n"
	"Exit codes: 0 done, 2 usage, 3 failed, 5 unreachable, 7 not a JuiceFS volume,\n"
	"8 PATH or the --since file not found, 130/143 interrupted.\n"
	"\n"
	"Examples:\n"
	"  jfsops usage redis://127.0.0.1:6379/1\n"
	"  jfsops usage sqlite3:///var/jfs/meta.db /datasets --depth 1 --cold 180d\n"
	"  jfsops usage postgres://u@db/jfs --json > today.json\n"
	"  jfsops usage postgres://u@db/jfs --since today.json --html usage.html\n";

/* --buckets LIST */
static int buckets_cb(const struct jo_option *opt, const char *arg, char *why, size_t cap)
{
	struct jo_err err = { 0 };

	if (!usage_parse_buckets(arg, opt->value, &err))
		return 0;
	snprintf(why, cap, "%s", err.msg);
	return -1;
}

/* A JSON string of a path that may not be UTF-8: invalid bytes become U+FFFD. */
static json_t *jpath(const char *s, size_t n)
{
	json_t *j = json_stringn(s, n);
	char *o;
	size_t k = 0;

	if (j)
		return j;
	o = malloc(n * 3 + 1);
	if (!o)
		return NULL;
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool ok = len > 0 && i + len <= n && c != 0;
		json_t *probe;

		for (size_t q = 1; ok && q < len; q++)
			ok = ((unsigned char)s[i + q] >> 6) == 2;
		if (ok && len > 1) {
			probe = json_stringn(s + i, len); /* overlongs and surrogates too */
			ok = probe != NULL;
			json_decref(probe);
		}
		if (!ok) {
			memcpy(o + k, "\xEF\xBF\xBD", 3);
			k += 3;
			i++;
			continue;
		}
		memcpy(o + k, s + i, len);
		k += len;
		i += len;
	}
	j = json_stringn(o, k);
	free(o);
	return j;
}

static json_t *jbuckets(const struct usage_opts *o, const uint64_t *v)
{
	json_t *j = json_object();
	char label[16];

	for (int b = 0; b <= o->nbuckets; b++) {
		usage_bucket_label(o, b, label);
		json_object_set_new(j, label, json_integer((json_int_t)v[b]));
	}
	return j;
}

/* A subtree's totals, as a directory row and the summary both give them. */
static void jtotals(json_t *j, const struct usage_opts *o, const struct usage_totals *t)
{
	json_object_set_new(j, "bytes", json_integer((json_int_t)t->bytes));
	json_object_set_new(j, "space", json_integer((json_int_t)t->space));
	json_object_set_new(j, "files", json_integer((json_int_t)t->files));
	json_object_set_new(j, "dirs", json_integer((json_int_t)t->dirs));
	json_object_set_new(j, "cold_bytes", json_integer((json_int_t)t->cold));
	json_object_set_new(j, "access", jbuckets(o, t->access));
	json_object_set_new(j, "modify", jbuckets(o, t->modify));
}

static json_t *jdir(const struct usage_opts *o, const char *type, const struct usage_dir *d,
		    const struct usage_growth *g)
{
	json_t *j = json_object();

	json_object_set_new(j, "type", json_string(type));
	json_object_set_new(j, "path", jpath(d->path, d->path_len));
	json_object_set_new(j, "depth", json_integer(d->depth));
	json_object_set_new(j, "inode", json_integer((json_int_t)d->ino));
	jtotals(j, o, &d->t);
	if (g) {
		json_object_set_new(j, "growth_bytes", g->known ? json_integer(g->bytes) :
				    json_integer((json_int_t)d->t.bytes));
		json_object_set_new(j, "growth_files", g->known ? json_integer(g->files) :
				    json_integer((json_int_t)d->t.files));
		json_object_set_new(j, "new", json_boolean(!g->known));
	}
	return j;
}

static int put_json(json_t *j)
{
	int rc = json_dumpf(j, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(j);
	fputc('\n', stdout);
	fflush(stdout);
	return rc ? -1 : 0;
}

/* ---------------------------------------------------------------- --since */

struct since {
	struct jo_xsort *s;
	const char *rec;
	size_t len;
	int live;
	int64_t time;
	json_t *total;  /* its summary's bytes/files, or NULL */
	int64_t total_bytes, total_files;
	bool have_total;
};

static int since_cmp(const void *a, size_t alen, const void *b, size_t blen, void *payload)
{
	(void)payload;
	return usage_path_cmp(a, strnlen(a, alen), b, strnlen(b, blen));
}

/* Read an earlier report's "dir" records into a sort in tree order. */
static int since_load(struct since *sn, const char *path, const struct usage_opts *o,
		      struct jo_err *err)
{
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	FILE *f = fopen(path, "r");
	char *line = NULL, *rec = NULL;
	size_t cap = 0, rcap = 0;
	ssize_t n;
	int rc = 0, lineno = 0;

	if (!f)
		return jo_err_set(err, JO_ENOTFOUND, "--since %s: cannot open it", path);
	xo.mem_limit = o->mem_limit / 8;
	xo.tmp_dir = o->tmp_dir;
	xo.plain_runs = true;
	xo.cmp = since_cmp;
	if ((rc = jo_xsort_new(&sn->s, &xo, err)) != 0)
		goto out;
	while (rc == 0 && (n = getline(&line, &cap, f)) > 0) {
		json_error_t je;
		json_t *j = json_loadb(line, (size_t)n, 0, &je);
		const char *type, *p;
		size_t plen;

		lineno++;
		if (!j || !json_is_object(j)) {
			json_decref(j);
			rc = jo_err_set(err, JO_EPROTO, "--since %s:%d: not a JSON line of a usage "
					"report", path, lineno);
			break;
		}
		type = json_string_value(json_object_get(j, "type"));
		if (type && !strcmp(type, "summary")) {
			sn->time = json_integer_value(json_object_get(j, "snapshot"));
			sn->total_bytes = json_integer_value(json_object_get(j, "bytes"));
			sn->total_files = json_integer_value(json_object_get(j, "files"));
			sn->have_total = true;
		}
		p = json_string_value(json_object_get(j, "path"));
		if (type && !strcmp(type, "dir") && p) {
			int64_t v[2] = { json_integer_value(json_object_get(j, "bytes")),
					 json_integer_value(json_object_get(j, "files")) };

			plen = json_string_length(json_object_get(j, "path"));
			if (plen + 17 > rcap) {
				char *r2 = realloc(rec, plen + 17);

				if (!r2) {
					json_decref(j);
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
					break;
				}
				rec = r2;
				rcap = plen + 17;
			}
			memcpy(rec, p, plen);
			rec[plen] = 0;
			memcpy(rec + plen + 1, v, 16);
			rc = jo_xsort_add(sn->s, rec, plen + 17, err);
		}
		json_decref(j);
	}
	if (rc == 0 && ferror(f))
		rc = jo_err_set(err, JO_EIO, "--since %s: read error", path);
	if (rc == 0 && !sn->have_total)
		rc = jo_err_set(err, JO_EPROTO, "--since %s: no \"summary\" record: not a complete "
				"`jfsops usage --json` report", path);
	if (rc == 0)
		rc = jo_xsort_finish(sn->s, err);
	if (rc == 0) {
		const void *r;

		sn->live = jo_xsort_next(sn->s, &r, &sn->len, err);
		sn->rec = r;
		if (sn->live < 0)
			rc = sn->live;
	}
out:
	free(line);
	free(rec);
	fclose(f);
	return rc;
}

/* The growth of d: advance the earlier report to d's path (both in tree order). */
static int since_growth(struct since *sn, const struct usage_dir *d, struct usage_growth *g,
			struct jo_err *err)
{
	memset(g, 0, sizeof(*g));
	while (sn->live == 1) {
		size_t plen = strnlen(sn->rec, sn->len);
		int c = usage_path_cmp(sn->rec, plen, d->path, d->path_len);
		const void *r;

		if (c > 0)
			break;
		if (c == 0 && sn->len == plen + 17) {
			g->known = true;
			g->then_bytes = jo_read64(sn->rec + plen + 1);
			g->bytes = (int64_t)d->t.bytes - (int64_t)g->then_bytes;
			g->files = (int64_t)d->t.files - (int64_t)jo_read64(sn->rec + plen + 9);
		}
		sn->live = jo_xsort_next(sn->s, &r, &sn->len, err);
		sn->rec = r;
		if (sn->live < 0)
			return sn->live;
		if (c == 0)
			break;
	}
	if (!g->known) {
		g->bytes = (int64_t)d->t.bytes;
		g->files = (int64_t)d->t.files;
	}
	return 0;
}

/* ---------------------------------------------------------------- the table */

static void human_header(const struct usage_opts *o, const struct usage_head *h, bool growth)
{
	char label[16], t[32];
	time_t tt = (time_t)h->snapshot;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(t, sizeof(t), "%Y-%m-%d %H:%M:%S UTC", &tm);
	printf("volume %s (%s), %s, walked at %s%s\n", h->volume, h->engine, h->root, t,
	       h->point_in_time ? " from one snapshot" : "");
	if (!h->point_in_time)
		printf("note: %s keeps no snapshots: this walk is not point-in-time (files changed "
		       "while it ran may be counted in their old or new place)\n", h->engine);
	printf("note: %s\n", h->atime_note);
	printf("%7s %9s %7s %7s |", "SIZE", "FILES", "DIRS", "COLD");
	for (int k = 0; k < 2; k++) {
		for (int b = 0; b <= o->nbuckets; b++) {
			char col[20];

			usage_bucket_label(o, b, label);
			snprintf(col, sizeof(col), "%s%s", b < o->nbuckets ? "<" : "", label);
			printf(" %7s", col);
		}
		printf(" |");
	}
	printf("%s PATH\n", growth ? "   GROWTH" : "");
	printf("%7s %9s %7s %7s |", "", "", "", "");
	printf(" %-*s|", 8 * (o->nbuckets + 1) - 1, "bytes by age of last access");
	printf(" %-*s|\n", 8 * (o->nbuckets + 1) - 1, "bytes by age of last modification");
}

static void bucket_cells(const struct usage_opts *o, const uint64_t *v)
{
	char hs[16];

	for (int b = 0; b <= o->nbuckets; b++) {
		usage_human(v[b], hs);
		printf(" %7s", hs);
	}
}

static void human_dir(const struct usage_opts *o, const struct usage_dir *d,
		      const struct usage_growth *g)
{
	char a[16], c[16];

	usage_human(d->t.bytes, a);
	usage_human(d->t.cold, c);
	printf("%7s %9" PRIu64 " %7" PRIu64 " %7s |", a, d->t.files, d->t.dirs, c);
	bucket_cells(o, d->t.access);
	printf(" |");
	bucket_cells(o, d->t.modify);
	printf(" |");
	if (g) {
		char gs[16], cell[20];

		usage_human((uint64_t)(g->bytes < 0 ? -g->bytes : g->bytes), gs);
		snprintf(cell, sizeof(cell), "%s%s", g->bytes < 0 ? "-" : "+", gs);
		printf(" %8s", g->known ? cell : "new");
	}
	printf(" %.*s\n", (int)d->path_len, d->path);
}

/* ---------------------------------------------------------------- the command */

static const char *atime_note(const struct usage_report *r, char *buf, size_t cap)
{
	if (r->regular_files == 0)
		snprintf(buf, cap, "no regular files: nothing to say about access times");
	else if (r->atime_later == 0)
		snprintf(buf, cap, "no file was read after its last change: the clients likely keep no "
			 "access times (--atime-mode noatime, JuiceFS's default; the metadata does "
			 "not record the mode), so the access ages here are modification ages");
	else
		snprintf(buf, cap, "%" PRIu64 " of %" PRIu64 " files were read after their last change: "
			 "some clients keep access times (--atime-mode relatime or strictatime); "
			 "files only read through other clients still show their modification age",
			 r->atime_later, r->regular_files);
	return buf;
}

static json_t *jsummary(const struct usage_opts *o, const struct usage_head *h,
			const struct usage_report *r, const struct since *sn, double secs)
{
	json_t *j = json_object(), *w = json_object(), *b = json_array();
	char label[16];

	json_object_set_new(j, "engine", json_string(h->engine));
	json_object_set_new(j, "path", json_string(h->root));
	json_object_set_new(j, "snapshot", json_integer(h->snapshot));
	json_object_set_new(j, "point_in_time", json_boolean(h->point_in_time));
	json_object_set_new(j, "access_times_seen", json_boolean(r->atime_later > 0));
	json_object_set_new(j, "note", json_string(h->atime_note));
	for (int k = 0; k <= o->nbuckets; k++) {
		usage_bucket_label(o, k, label);
		json_array_append_new(b, json_string(label));
	}
	json_object_set_new(j, "buckets", b);
	json_object_set_new(j, "cold_age", json_integer(o->cold));
	jtotals(j, o, &r->total);
	json_object_set_new(j, "trash_files", json_integer((json_int_t)r->trash_files));
	json_object_set_new(j, "trash_bytes", json_integer((json_int_t)r->trash_bytes));
	json_object_set_new(j, "open_unlinked_files", json_integer((json_int_t)r->open_files));
	json_object_set_new(j, "open_unlinked_bytes", json_integer((json_int_t)r->open_bytes));
	json_object_set_new(j, "pending_files", json_integer((json_int_t)r->pending_files));
	json_object_set_new(j, "pending_file_bytes", json_integer((json_int_t)r->pending_file_bytes));
	json_object_set_new(j, "pending_slices", json_integer((json_int_t)r->pending_slices));
	json_object_set_new(j, "pending_slice_bytes", json_integer((json_int_t)r->pending_slice_bytes));
	json_object_set_new(j, "delayed_slices", json_integer((json_int_t)r->delayed_slices));
	json_object_set_new(j, "delayed_bytes", json_integer((json_int_t)r->delayed_bytes));
	json_object_set_new(j, "pending_reclaim_bytes",
			    json_integer((json_int_t)(r->pending_file_bytes + r->pending_slice_bytes +
						      r->delayed_bytes)));
	if (sn && sn->have_total) {
		json_object_set_new(j, "since", json_integer(sn->time));
		json_object_set_new(j, "growth_bytes", json_integer((json_int_t)r->total.bytes -
								    sn->total_bytes));
		json_object_set_new(j, "growth_files", json_integer((json_int_t)r->total.files -
								    sn->total_files));
	}
	json_object_set_new(w, "dirs_read", json_integer((json_int_t)r->walk.dirs_read));
	json_object_set_new(w, "rows", json_integer((json_int_t)r->walk.rows));
	json_object_set_new(w, "vanished", json_integer((json_int_t)r->walk.vanished));
	json_object_set_new(w, "extra_paths", json_integer((json_int_t)r->walk.extra_paths));
	json_object_set_new(w, "tmp_bytes", json_integer((json_int_t)r->walk.tmp_bytes));
	json_object_set_new(w, "seconds", json_real(secs));
	json_object_set_new(j, "walk", w);
	return j;
}

static void human_footer(const struct usage_opts *o, const struct usage_report *r,
			 const struct since *sn)
{
	char a[16], b[16], c[16], d[16];

	if (r->ntop_dirs) {
		printf("\nlargest directories below depth %u:\n", o->depth);
		for (size_t i = 0; i < r->ntop_dirs; i++)
			human_dir(o, &r->top_dirs[i], NULL);
	}
	if (r->ntop_files) {
		printf("\nlargest files:\n");
		for (size_t i = 0; i < r->ntop_files; i++) {
			usage_human(r->top_files[i].bytes, a);
			printf("%7s %.*s\n", a, (int)r->top_files[i].path_len, r->top_files[i].path);
		}
	}
	usage_human(r->total.bytes, a);
	usage_human(r->total.space, b);
	usage_human(r->total.cold, c);
	printf("\ntotal:   %s in %" PRIu64 " files, %" PRIu64 " dirs (%s as juicefs summary counts "
	       "space); %s cold\n", a, r->total.files, r->total.dirs, b, c);
	if (sn && sn->have_total) {
		int64_t g = (int64_t)r->total.bytes - sn->total_bytes;

		usage_human((uint64_t)(g < 0 ? -g : g), d);
		printf("growth:  %c%s, %+" PRId64 " files\n", g < 0 ? '-' : '+', d,
		       (int64_t)r->total.files - sn->total_files);
	}
	usage_human(r->trash_bytes, a);
	printf("trash:   %s in %" PRIu64 " files\n", a, r->trash_files);
	usage_human(r->open_bytes, a);
	printf("open:    %s in %" PRIu64 " files removed while open\n", a, r->open_files);
	usage_human(r->pending_file_bytes, a);
	usage_human(r->pending_slice_bytes, b);
	usage_human(r->delayed_bytes, c);
	printf("pending: %s in %" PRIu64 " removed files, %s in %" PRIu64 " unreferenced slices, %s in %"
	       PRIu64 " delayed slices\n", a, r->pending_files, b, r->pending_slices, c,
	       r->delayed_slices);
}

int cmd_usage(int argc, char **argv, struct jo_ctx *ctx)
{
	struct usage_opts o = { .depth = 2, .top = 10, .cold = 90 * 86400, .mem_limit = 256u << 20 };
	struct usage_report r = { 0 };
	struct usage_head h = { 0 };
	struct since sn = { 0 };
	struct jo_file *html = NULL;   /* --html, until renamed into place */
	struct jo_meta *m = NULL;
	struct jo_format fmt = { 0 };
	struct jo_err err = { 0 };
	const char *since_path = NULL, *html_path = NULL;
	char *url = NULL, note[512];
	struct timespec t0, t1;
	int n, rc = 0;
	struct jo_option opts[] = {
		OPT_UINT(0, "depth", &o.depth, "N", "list every directory down to depth N below PATH",
			 0, 1000000),
		OPT_UINT(0, "top", &o.top, "N", "also the N largest directories below that depth and "
			 "the N largest files", 0, 1000000),
		OPT_CALLBACK(0, "buckets", &o, "LIST", "age buckets, ascending (default "
			     "1d,7d,30d,90d,1y; an \"older\" bucket follows); ages as 90s, 12h, 1.5d, 2w, 1y",
			     buckets_cb),
		OPT_DURATION_S(0, "cold", &o.cold, "AGE", "cold = not accessed for AGE", 1000, 0),
		OPT_STRING(0, "since", &since_path, "FILE", "an earlier `usage --json` report: growth "
			   "per directory"),
		OPT_BOOL(0, "json", &ctx->json, "JSON lines on stdout: \"dir\", \"top_dir\", "
			 "\"file\" records, then a \"summary\""),
		OPT_STRING(0, "html", &html_path, "FILE", "also write a self-contained HTML page "
			   "(written under a temporary name, then renamed; default: none)"),
		OPT_SIZE(0, "mem-limit", &o.mem_limit, "SIZE", "most memory for the sorts", 4u << 20,
			 0),
		OPT_STRING(0, "tmp-dir", &o.tmp_dir, "DIR", "where the sorts spill (default $TMPDIR "
			   "or /tmp)"),
		OPT_HELP(),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, usage_text, usage_tail, opts };

	if (usage_parse_buckets("1d,7d,30d,90d,1y", &o, &err))
		return cmd_fail(ctx, &err);
	o.tmp_dir = getenv("TMPDIR");
	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0)
		return cmd_opt_exit(ctx, n);
	if (n < 1 || n > 2)
		return cmd_usage_error(ctx, "expected META-URL [PATH]");
	o.root = n == 2 ? argv[2] : "/";
	url = cmd_take_url(argv[1]);
	if (!url)
		return JO_EXIT_FAIL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = cmd_meta_open_format(url, &m, &fmt, &err);
	if (!rc && since_path)
		rc = since_load(&sn, since_path, &o, &err);
	if (!rc && html_path)
		rc = jo_file_create(&html, html_path, JO_FILE_PUBLIC, JO_FILE_STDIO, &err);
	if (!rc)
		rc = usage_run(m, &o, &r, &err);
	if (rc) {
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	h.volume = fmt.name;
	cmd_metrics_volume(ctx, fmt.name); /* the summary's volume */
	h.engine = jo_meta_engine(m);
	h.root = o.root;
	h.point_in_time = r.walk.point_in_time;
	h.snapshot = r.walk.started;
	h.atime_note = atime_note(&r, note, sizeof(note));
	h.since = since_path;
	h.since_time = sn.time;
	if (!ctx->json)
		human_header(&o, &h, since_path != NULL);
	if (html)
		usage_html_begin(html->fp, &o, &h);
	for (;;) {
		const struct usage_dir *d;
		struct usage_growth g;

		rc = usage_next_dir(&r, &d, &err);
		if (rc <= 0)
			break;
		rc = 0;
		if (since_path && (rc = since_growth(&sn, d, &g, &err)) != 0)
			break;
		if (ctx->json)
			rc = put_json(jdir(&o, "dir", d, since_path ? &g : NULL));
		else
			human_dir(&o, d, since_path ? &g : NULL);
		if (html)
			usage_html_dir(html->fp, &o, &h, d, since_path ? &g : NULL);
		if (rc)
			break;
	}
	if (rc < 0) {
		rc = err.code ? cmd_fail(ctx, &err) : JO_EXIT_FAIL;
		goto out;
	}
	if (html) {
		struct usage_growth tg = { .known = sn.have_total,
					   .bytes = (int64_t)r.total.bytes - sn.total_bytes,
					   .files = (int64_t)r.total.files - sn.total_files };

		usage_html_end(html->fp, &o, &h, &r, &tg);
		if ((rc = jo_file_commit(html, &err)) != 0) {
			rc = cmd_fail(ctx, &err);
			goto out;
		}
	}
	if (ctx->json) {
		for (size_t i = 0; i < r.ntop_dirs; i++)
			put_json(jdir(&o, "top_dir", &r.top_dirs[i], NULL));
		for (size_t i = 0; i < r.ntop_files; i++) {
			const struct usage_file *f = &r.top_files[i];
			json_t *j = json_object();

			json_object_set_new(j, "type", json_string("file"));
			json_object_set_new(j, "path", jpath(f->path, f->path_len));
			json_object_set_new(j, "inode", json_integer((json_int_t)f->ino));
			json_object_set_new(j, "bytes", json_integer((json_int_t)f->bytes));
			json_object_set_new(j, "atime", json_integer(f->atime));
			json_object_set_new(j, "mtime", json_integer(f->mtime));
			put_json(j);
		}
		/* the envelope every summary has (common/summary.c) */
		rc = cmd_summary_emit(ctx, jsummary(&o, &h, &r, since_path ? &sn : NULL,
						    (double)(t1.tv_sec - t0.tv_sec) +
						    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9),
				      true, JO_EXIT_OK) ? JO_EXIT_FAIL : 0;
	} else {
		human_footer(&o, &r, since_path ? &sn : NULL);
	}
out:
	jo_file_abort(html);
	jo_xsort_free(sn.s);
	usage_report_release(&r);
	jo_format_release(&fmt);
	jo_meta_close(m);
	free(url);
	return rc;
}
