/*
 * cmd_export.c: `jfsops export` - the volume's files (and slices) as
 * Parquet for a lakehouse, full or incremental. Arguments and output only;
 * the work is export.c.
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
#include "common/meta/meta.h"
#include "usage/export.h"

static const char export_text[] =
	"usage: jfsops export META-URL --out DIR [--tables files,slices] [--incremental PREV]\n"
	"\n"
	"Export the volume's namespace as Parquet tables (zstd pages, min/max\n"
	"statistics, bounded row groups; read by pyarrow, DuckDB, Spark) from one walk\n"
	"of its metadata (no mount): SQL and etcd volumes from one snapshot, Redis\n"
	"without one (the _SUCCESS marker says \"point_in_time\": false).\n"
	"\n"
	"Tables in DIR (a new or empty directory):\n"
	"  files.parquet    one row per path: inode, parent (the directory the path is\n"
	"                   listed under, also for a hard link), path, name, type\n"
	"                   (regular, directory, symlink, ... as juicefs dump names them),\n"
	"                   size (regular files' length, else 0, as juicefs dump), mode,\n"
	"                   uid, gid, atime, mtime, ctime (ns), nlink, chunks,\n"
	"                   slice_records, bytes_stored (the sizes of the distinct slices\n"
	"                   its chunks reference: object data it keeps alive, uncompressed)\n"
	"  slices.parquet   with --tables files,slices: slice_id, size, inode,\n"
	"                   chunk_index, pos, off, len (juicefs dump's names) of every\n"
	"                   slice record, holes left out\n"
	"  deleted.parquet  with --incremental: the inodes gone (or in the trash) since\n"
	"  _SUCCESS         written last: volume, snapshot time, tables, row counts\n"
	"Parquet strings are UTF-8: a byte of a name that is not becomes U+FFFD. The\n"
	"trash and files removed while open are not exported.\n"
	"\n"
	"Incremental (--incremental PREV, an earlier export of the same volume with\n"
	"the same --tables): files and slices hold every current row of each inode\n"
	"that is new or changed since PREV (attributes, chunks, or any of its paths:\n"
	"all rows below a renamed directory), and deleted the inodes PREV had that\n"
	"are gone. PREV minus the inodes in deleted and in files, plus files, is a\n"
	"full export of the new state.\n"
	"\n"
	"";

static const char export_tail[] =
	"\n"
	"Exit codes: 0 done, 2 usage (or DIR holds an export already), 3 failed,\n"
	"5 unreachable, 7 not a JuiceFS volume (or PREV's state is corrupt), 8 PREV is\n"
	"not a complete export, 130/143 interrupted (nothing is marked complete).\n"
	"\n"
	"Examples:\n"
	"  jfsops export redis://127.0.0.1:6379/1 --out /data/jfs-meta/2026-12-03\n"
	"  jfsops export postgres://u@db/jfs --out /lake/jfs/day2 --incremental /lake/jfs/day1\n"
	"  jfsops export sqlite3:///var/jfs/meta.db --out /tmp/x --tables files,slices --json\n";

/* --tables LIST: files, or files,slices */
static int parse_tables(const char *s, unsigned *out)
{
	*out = 0;
	while (*s) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);

		if (n == 5 && !strncmp(s, "files", 5))
			*out |= EXPORT_FILES;
		else if (n == 6 && !strncmp(s, "slices", 6))
			*out |= EXPORT_SLICES;
		else
			return -1;
		s += n;
		if (*s == ',')
			s++;
	}
	/* slices are of the files exported: files always come along */
	*out |= EXPORT_FILES;
	return 0;
}

static int tables_cb(const struct jo_option *opt, const char *arg, char *why, size_t cap)
{
	if (!parse_tables(arg, opt->value))
		return 0;
	snprintf(why, cap, "want a list of files, slices");
	return -1;
}

int cmd_export(int argc, char **argv, struct jo_ctx *ctx)
{
	struct export_opts o = { .tables = EXPORT_FILES, .mem_limit = 256u << 20,
				 .row_group_bytes = 4u << 20 };
	struct export_result res;
	struct jo_meta *m = NULL;
	struct jo_format fmt = { 0 };
	struct jo_err err = { 0 };
	struct timespec t0, t1;
	char *url = NULL;
	double secs;
	int n, rc;
	struct jo_option opts[] = {
		OPT_STRING(0, "out", &o.out, "DIR", "the export directory (required; made if absent)"),
		OPT_CALLBACK(0, "tables", &o.tables, "LIST", "files, or files,slices (default files)",
			     tables_cb),
		OPT_STRING(0, "incremental", &o.previous, "PREV", "only what changed since the export "
			   "in PREV (default: a full export)"),
		OPT_SIZE(0, "row-group", &o.row_group_bytes, "SIZE", "buffered bytes per Parquet row "
			 "group", 64u << 10, 1ULL << 32),
		OPT_SIZE(0, "mem-limit", &o.mem_limit, "SIZE", "most memory for the walk's sorts",
			 4u << 20, 0),
		OPT_STRING(0, "tmp-dir", &o.tmp_dir, "DIR", "where the sorts spill (default $TMPDIR "
			   "or /tmp)"),
		OPT_BOOL(0, "json", &ctx->json, "a JSON summary line on stdout instead of the text "
			 "one"),
		OPT_HELP(),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, export_text, export_tail, opts };

	o.tmp_dir = getenv("TMPDIR");
	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0)
		return cmd_opt_exit(ctx, n);
	if (n != 1)
		return cmd_usage_error(ctx, "expected one META-URL");
	if (!o.out || !*o.out)
		return cmd_usage_error(ctx, "--out DIR is required");
	url = cmd_take_url(argv[1]);
	if (!url)
		return JO_EXIT_FAIL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = cmd_meta_open_format(url, &m, &fmt, &err);
	if (!rc)
		cmd_metrics_volume(ctx, fmt.name); /* the summary's volume */
	if (!rc)
		rc = export_run(m, &fmt, &o, &res, &err);
	if (rc) {
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (ctx->json) {
		json_t *j = json_object();

		json_object_set_new(j, "out", json_string(o.out));
		json_object_set_new(j, "snapshot", json_integer(res.walk.started));
		json_object_set_new(j, "point_in_time", json_boolean(res.walk.point_in_time));
		json_object_set_new(j, "incremental", json_boolean(o.previous != NULL));
		json_object_set_new(j, "rows", json_integer((json_int_t)res.rows));
		json_object_set_new(j, "inodes", json_integer((json_int_t)res.inodes));
		json_object_set_new(j, "changed_inodes", json_integer((json_int_t)res.changed_inodes));
		json_object_set_new(j, "slices", json_integer((json_int_t)res.slices));
		json_object_set_new(j, "deleted", json_integer((json_int_t)res.deleted));
		json_object_set_new(j, "tmp_bytes", json_integer((json_int_t)res.walk.tmp_bytes));
		/* the envelope every summary has (common/summary.c); main checks stdout */
		(void)cmd_summary_emit(ctx, j, true, JO_EXIT_OK);
	} else {
		printf("exported %" PRIu64 " rows of %" PRIu64 " inodes", res.rows, res.changed_inodes);
		if (o.previous)
			printf(" (changed of %" PRIu64 "), %" PRIu64 " deleted", res.inodes, res.deleted);
		if (o.tables & EXPORT_SLICES)
			printf(", %" PRIu64 " slices", res.slices);
		printf(" to %s in %.1fs%s\n", o.out, secs,
		       res.walk.point_in_time ? "" : " (not point-in-time: this engine keeps no snapshots)");
	}
out:
	jo_format_release(&fmt);
	jo_meta_close(m);
	free(url);
	return rc;
}
