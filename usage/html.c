/*
 * html.c: the usage report as one self-contained HTML page: inline CSS and
 * SVG only (no script, font, image or link to fetch), a tree table with a
 * stacked age bar per directory (bytes by age of last access and of last
 * modification) and the growth since an earlier report. Every cell the tests
 * read carries its raw number in a data- attribute.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "usage/usage.h"

#define BAR_W 240
#define BAR_H 14

/* Text with &<>"' escaped and bytes that are not UTF-8 shown as U+FFFD. */
static void esc(FILE *fp, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
		bool ok = len > 0 && i + len <= n;

		for (size_t k = 1; ok && k < len; k++)
			ok = ((unsigned char)s[i + k] >> 6) == 2;
		if (!ok) {
			fputs("\xEF\xBF\xBD", fp);
			i++;
			continue;
		}
		switch (c) {
		case '&': fputs("&amp;", fp); break;
		case '<': fputs("&lt;", fp); break;
		case '>': fputs("&gt;", fp); break;
		case '"': fputs("&quot;", fp); break;
		case '\'': fputs("&#39;", fp); break;
		default:
			if (c < 0x20)
				fprintf(fp, "&#xFFFD;");
			else
				fwrite(s + i, 1, len, fp);
		}
		i += len;
	}
}

/* hot (red) to cold (blue) */
static void color(FILE *fp, const struct usage_opts *o, int b)
{
	int n = o->nbuckets;

	fprintf(fp, "hsl(%d,70%%,50%%)", n ? b * 230 / n : 0);
}

static void when(int64_t t, char buf[32])
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, 32, "%Y-%m-%d %H:%M:%S UTC", &tm);
}

void usage_html_begin(FILE *fp, const struct usage_opts *o, const struct usage_head *h)
{
	char t[32], label[16];

	when(h->snapshot, t);
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>jfsops usage: ",
	      fp);
	esc(fp, h->volume, strlen(h->volume));
	fputs(" ", fp);
	esc(fp, h->root, strlen(h->root));
	fputs("</title>\n<style>\n"
	      "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;background:#fff}\n"
	      "h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px}\n"
	      "table{border-collapse:collapse}th,td{padding:3px 8px;border-bottom:1px solid #ddd;"
	      "text-align:right;white-space:nowrap}\n"
	      "th{background:#f3f3f3}td.path,th.path{text-align:left;font-family:monospace}\n"
	      ".note{background:#fff6d6;border:1px solid #e8d48a;padding:6px 10px;margin:8px 0}\n"
	      ".meta{color:#555}.grow{color:#a11}.shrink{color:#171}.legend span{display:inline-block;"
	      "width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}\n"
	      "svg.age{display:block}\n"
	      "</style></head><body>\n<h1>Usage of ", fp);
	esc(fp, h->volume, strlen(h->volume));
	fputs(" <code>", fp);
	esc(fp, h->root, strlen(h->root));
	fprintf(fp, "</code></h1>\n<p class=\"meta\" id=\"meta\" data-snapshot=\"%" PRId64
		"\" data-point-in-time=\"%s\">Engine ", h->snapshot, h->point_in_time ? "true" : "false");
	esc(fp, h->engine, strlen(h->engine));
	fprintf(fp, ", walked at %s%s.</p>\n", t,
		h->point_in_time ? " from one snapshot" : "");
	if (!h->point_in_time)
		fputs("<p class=\"note\" id=\"snapshot-note\">This engine keeps no snapshots: the walk "
		      "is not point-in-time, so files changed while it ran may be counted in their "
		      "old or new place.</p>\n", fp);
	fputs("<p class=\"note\" id=\"atime-note\">", fp);
	esc(fp, h->atime_note, strlen(h->atime_note));
	fputs("</p>\n", fp);
	if (h->since) {
		fputs("<p class=\"meta\" id=\"since\">Growth since the report ", fp);
		esc(fp, h->since, strlen(h->since));
		if (h->since_time) {
			when(h->since_time, t);
			fprintf(fp, " of %s", t);
		}
		fputs(".</p>\n", fp);
	}
	fputs("<p class=\"legend\" id=\"legend\">Age:", fp);
	for (int b = 0; b <= o->nbuckets; b++) {
		usage_bucket_label(o, b, label);
		fputs("<span style=\"background:", fp);
		color(fp, o, b);
		fprintf(fp, "\"></span>%s%s", b < o->nbuckets ? "&lt; " : "", label);
	}
	fputs("</p>\n<table id=\"tree\"><thead><tr><th class=\"path\">Path</th><th>Size</th>"
	      "<th>Files</th><th>Dirs</th><th>Cold</th><th>Last access</th>"
	      "<th>Last modification</th>", fp);
	if (h->since)
		fputs("<th>Growth</th>", fp);
	fputs("</tr></thead>\n<tbody>\n", fp);
}

static void bar(FILE *fp, const struct usage_opts *o, const char *kind, const uint64_t *v,
		uint64_t total)
{
	double x = 0;
	char label[16], hs[16];

	fprintf(fp, "<svg class=\"age %s\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"role=\"img\"><rect width=\"%d\" height=\"%d\" fill=\"#eee\"/>", kind, BAR_W, BAR_H,
		BAR_W, BAR_H, BAR_W, BAR_H);
	for (int b = 0; total && b <= o->nbuckets; b++) {
		double w = (double)v[b] * BAR_W / (double)total;

		if (!v[b])
			continue;
		usage_bucket_label(o, b, label);
		usage_human(v[b], hs);
		fprintf(fp, "<rect class=\"seg\" data-bucket=\"%s\" data-bytes=\"%" PRIu64
			"\" x=\"%.2f\" width=\"%.2f\" height=\"%d\" fill=\"", label, v[b], x, w, BAR_H);
		color(fp, o, b);
		fprintf(fp, "\"><title>%s%s: %s</title></rect>", b < o->nbuckets ? "&lt; " : "", label,
			hs);
		x += w;
	}
	fputs("</svg>", fp);
}

static void growth_cell(FILE *fp, const struct usage_growth *g)
{
	char hs[16];

	if (!g->known) {
		fputs("<td class=\"growth new\" data-growth=\"\">new</td>", fp);
		return;
	}
	usage_human((uint64_t)(g->bytes < 0 ? -g->bytes : g->bytes), hs);
	fprintf(fp, "<td class=\"growth %s\" data-growth=\"%" PRId64 "\">%s%s</td>",
		g->bytes > 0 ? "grow" : g->bytes < 0 ? "shrink" : "same", g->bytes,
		g->bytes > 0 ? "+" : g->bytes < 0 ? "&minus;" : "&plusmn;", hs);
}

static void dir_row(FILE *fp, const struct usage_opts *o, const struct usage_head *h,
		    const struct usage_dir *d, const struct usage_growth *g, const char *cls)
{
	char hs[16], hc[16];

	usage_human(d->t.bytes, hs);
	usage_human(d->t.cold, hc);
	fprintf(fp, "<tr class=\"%s\" data-depth=\"%u\" data-bytes=\"%" PRIu64 "\" data-files=\"%"
		PRIu64 "\" data-dirs=\"%" PRIu64 "\" data-space=\"%" PRIu64 "\" data-cold=\"%" PRIu64
		"\" data-path=\"", cls, d->depth, d->t.bytes, d->t.files, d->t.dirs, d->t.space,
		d->t.cold);
	esc(fp, d->path, d->path_len);
	fprintf(fp, "\"><td class=\"path\" style=\"padding-left:%upx\">",
		8 + 16 * (d->depth > 20 ? 20 : d->depth));
	esc(fp, d->path, d->path_len);
	fprintf(fp, "</td><td>%s</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%s</td><td>", hs,
		d->t.files, d->t.dirs, hc);
	bar(fp, o, "access", d->t.access, d->t.bytes);
	fputs("</td><td>", fp);
	bar(fp, o, "modify", d->t.modify, d->t.bytes);
	fputs("</td>", fp);
	if (h->since && g)
		growth_cell(fp, g);
	fputs("</tr>\n", fp);
}

void usage_html_dir(FILE *fp, const struct usage_opts *o, const struct usage_head *h,
		    const struct usage_dir *d, const struct usage_growth *g)
{
	dir_row(fp, o, h, d, g, "dir");
}

void usage_html_end(FILE *fp, const struct usage_opts *o, const struct usage_head *h,
		    const struct usage_report *r, const struct usage_growth *total_growth)
{
	char a[16], b[16], c[16], d[16];
	struct usage_head nogrowth = *h;

	fputs("</tbody></table>\n", fp);
	usage_human(r->total.bytes, a);
	usage_human(r->total.cold, b);
	usage_human(r->trash_bytes, c);
	usage_human(r->pending_file_bytes + r->pending_slice_bytes + r->delayed_bytes, d);
	fprintf(fp, "<h2>Totals</h2>\n<table id=\"totals\" data-bytes=\"%" PRIu64 "\" data-files=\"%"
		PRIu64 "\" data-dirs=\"%" PRIu64 "\" data-space=\"%" PRIu64 "\">"
		"<tr><th class=\"path\">Logical bytes</th><td>%s</td></tr>"
		"<tr><th class=\"path\">Files / directories</th><td>%" PRIu64 " / %" PRIu64 "</td></tr>"
		"<tr><th class=\"path\">Cold bytes</th><td>%s</td></tr>"
		"<tr><th class=\"path\">Trash</th><td data-bytes=\"%" PRIu64 "\">%s in %" PRIu64
		" files</td></tr>"
		"<tr><th class=\"path\">Pending reclaim</th><td data-bytes=\"%" PRIu64 "\">%s</td></tr>",
		r->total.bytes, r->total.files, r->total.dirs, r->total.space, a, r->total.files,
		r->total.dirs, b, r->trash_bytes, c, r->trash_files,
		r->pending_file_bytes + r->pending_slice_bytes + r->delayed_bytes, d);
	if (h->since && total_growth) {
		fputs("<tr><th class=\"path\">Growth</th>", fp);
		growth_cell(fp, total_growth);
		fputs("</tr>", fp);
	}
	fputs("</table>\n", fp);
	nogrowth.since = NULL;
	fprintf(fp, "<h2>Largest directories below depth %u</h2>\n<table id=\"top-dirs\"><thead><tr>"
		"<th class=\"path\">Path</th><th>Size</th><th>Files</th><th>Dirs</th><th>Cold</th>"
		"<th>Last access</th><th>Last modification</th></tr></thead><tbody>\n", o->depth);
	for (size_t i = 0; i < r->ntop_dirs; i++)
		dir_row(fp, o, &nogrowth, &r->top_dirs[i], NULL, "top-dir");
	fputs("</tbody></table>\n<h2>Largest files</h2>\n<table id=\"top-files\"><thead><tr>"
	      "<th class=\"path\">Path</th><th>Size</th><th>Last access</th><th>Last modification"
	      "</th></tr></thead><tbody>\n", fp);
	for (size_t i = 0; i < r->ntop_files; i++) {
		const struct usage_file *f = &r->top_files[i];
		char t1[32], t2[32];

		usage_human(f->bytes, a);
		when(f->atime > f->mtime ? f->atime : f->mtime, t1);
		when(f->mtime, t2);
		fprintf(fp, "<tr class=\"top-file\" data-bytes=\"%" PRIu64 "\" data-inode=\"%" PRIu64
			"\"><td class=\"path\">", f->bytes, f->ino);
		esc(fp, f->path, f->path_len);
		fprintf(fp, "</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", a, t1, t2);
	}
	fputs("</tbody></table>\n<p class=\"meta\">Made by jfsops usage.</p>\n</body></html>\n", fp);
}
