/* jfsops lance: byte ranges a scan of selected Lance columns reads. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/command.h"
#include "common/dynbuf.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/err.h"
#include "common/esc.h"
#include "lanceparse/lance.h"
#include "common/jfs/jfs.h"
#include "common/object/object.h"

static const char lance_usage[] =
	"usage: jfsops lance DATASET --columns a,b.c [--version V]\n"
	"                    [--format jsonl|csv|ranges|juicefs]\n"
	"                    [--align BYTES] [--prefix P] [--merge-gap BYTES] [--blobs]\n"
	"                    [--tail-block BYTES]\n"
	"       jfsops lance DATASET --list-versions\n"
	"       jfsops lance DATASET --schema [--version V]\n"
	"\n"
	"Read a Lance dataset's manifest for one version and print the byte ranges\n"
	"of its files that a scan of the selected columns reads: the manifest, the\n"
	"deletion files, and in every data file holding a selected column that\n"
	"column's pages plus the metadata a reader must read (footer, offset tables,\n"
	"column metadata). Ranges are merged and sorted per file; file names are\n"
	"relative to the dataset. Legacy (0.1/0.2) and 2.0-2.3 data files, both\n"
	"manifest naming schemes. Nothing is written.\n"
	"\n"
	"DATASET is a local directory, META-URL:/path inside a JuiceFS volume (read\n"
	"through the metadata engine and object store, no mount), or\n"
	"s3://bucket/prefix (endpoint and keys from JFSOPS_S3_ENDPOINT,\n"
	"JFSOPS_ACCESS_KEY, JFSOPS_SECRET_KEY, JFSOPS_REGION).\n"
	"\n"
	"";

static const char lance_tail[] =
	CMD_VOL_NOTE
	"\n"
	"Exit codes: 0 ok, 2 usage, 7 corrupt manifest or data file, 8 missing\n"
	"dataset, version or column, 9 unsupported location.\n"
	"\n"
	"Examples:\n"
	"  jfsops lance /data/train.lance --columns image,label --format juicefs \\\n"
	"      --prefix /mnt/jfs/train.lance > warm.txt && juicefs warmup -f warm.txt\n"
	"  jfsops lance sqlite3:///var/jfs/meta.db:/train.lance --version 12 \\\n"
	"      --columns emb --align 4M --format jsonl | jfsops warmup sqlite3:///var/jfs/meta.db --ranges -\n"
	"  jfsops lance /mnt/jfs/train.lance --columns image --format ranges \\\n"
	"      | jfsops warmup redis://127.0.0.1:6379/1 --mount /mnt/jfs --ranges -\n";

enum { FMT_CSV, FMT_JSONL, FMT_RANGES, FMT_JUICEFS };

/* --format */
static int format_cb(const struct jo_option *o, const char *arg, char *why, size_t cap)
{
	static const struct { const char *name; int fmt; } fmts[] = {
		{ "csv", FMT_CSV }, { "jsonl", FMT_JSONL }, { "json", FMT_JSONL },
		{ "ranges", FMT_RANGES }, { "juicefs", FMT_JUICEFS },
	};

	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		if (!strcmp(arg, fmts[i].name)) {
			*(int *)o->value = fmts[i].fmt;
			return 0;
		}
	snprintf(why, cap, "want jsonl, csv, ranges or juicefs");
	return -1;
}

struct lance_args {
	const char *dataset;
	char *columns;
	uint64_t version;
	int format;
	uint64_t align;
	const char *prefix;
	bool blobs;
	uint64_t tail_block;
	uint64_t gap;
	bool list_versions;
	bool schema;
	bool tty;  /* stdout is a terminal: names from the dataset are escaped */
};

/*
 * A name from the dataset (file, version, field, type) for stdout. The csv
 * and juicefs formats are data, read by programs: the bytes as they are,
 * except on a terminal, where a control character must not act.
 */
#define OUT_NAME(a, s) ((a)->tty ? JO_ESC_TERM(s) : (s))

static int emit_json(json_t *o)
{
	int rc = 0;

	if (!o)
		return JO_ENOMEM;
	if (json_dumpf(o, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF)
		rc = JO_EIO;
	json_decref(o);
	return rc;
}

static void csv_path(const struct lance_args *a, const char *p)
{
	p = OUT_NAME(a, p);
	if (strpbrk(p, ",\"\n")) {
		fputc('"', stdout);
		for (; *p; p++) {
			if (*p == '"')
				fputc('"', stdout);
			fputc(*p, stdout);
		}
		fputc('"', stdout);
	} else {
		fputs(p, stdout);
	}
}

static int print_versions(struct lance_io *io, const struct lance_args *a, struct jo_err *err)
{
	struct lance_version *vs;
	size_t n;
	int rc;

	if ((rc = lance_versions_list(io, &vs, &n, err)) < 0)
		return rc;
	if (a->format != FMT_JSONL)
		puts("version,naming,file");
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *naming = vs[i].detached ? "detached" : vs[i].v2_name ? "v2" : "v1";
		if (a->format == FMT_JSONL)
			rc = emit_json(json_pack("{s:s,s:I,s:s,s:s}", "type", "version", "version",
						 (json_int_t)vs[i].version, "naming", naming, "file",
						 vs[i].name));
		else
			printf("%" PRIu64 ",%s,_versions/%s\n", vs[i].version, naming,
			       OUT_NAME(a, vs[i].name));
	}
	free(vs);
	return rc < 0 ? jo_err_set(err, rc, "cannot write output") : 0;
}

static void field_path(const struct lance_manifest *m, size_t i, char *buf, size_t cap)
{
	const struct lance_field *f = &m->fields[i];
	long p = f->parent_id >= 0 ? lance_field_index(m, f->parent_id) : -1;
	size_t n;

	buf[0] = '\0';
	if (p >= 0 && (size_t)p != i) {
		field_path(m, (size_t)p, buf, cap);
		n = strlen(buf);
		snprintf(buf + n, cap - n, ".%s", f->name);
	} else {
		snprintf(buf, cap, "%s", f->name);
	}
}

static int print_schema(const struct lance_manifest *m, const struct lance_args *a,
			struct jo_err *err)
{
	char path[1024];
	int rc = 0;

	if (a->format != FMT_JSONL)
		puts("id,parent_id,path,type,flags");
	for (size_t i = 0; i < m->nfields && rc == 0; i++) {
		const struct lance_field *f = &m->fields[i];
		char flags[64];
		snprintf(flags, sizeof(flags), "%s%s%s%s", f->nullable ? "nullable " : "",
			 f->blob_v1 ? "blob " : "", f->blob_v2 ? "blob-v2 " : "",
			 f->packed ? "packed " : "");
		if (flags[0])
			flags[strlen(flags) - 1] = '\0';
		field_path(m, i, path, sizeof(path));
		if (a->format == FMT_JSONL) {
			rc = emit_json(json_pack("{s:s,s:i,s:i,s:s,s:s,s:s}", "type", "field", "id",
						 (int)f->id, "parent_id", (int)f->parent_id, "path",
						 path, "logical_type", f->logical_type, "flags", flags));
		} else {
			printf("%d,%d,", (int)f->id, (int)f->parent_id);
			csv_path(a, path);
			printf(",%s,%s\n", OUT_NAME(a, f->logical_type), flags);
		}
	}
	return rc < 0 ? jo_err_set(err, rc, "cannot write output") : 0;
}

static int print_ranges(const struct lance_rangeset *s, const struct lance_args *a,
			const char *prefix, struct jo_err *err)
{
	int rc = 0;

	if (a->format == FMT_CSV)
		puts("file,offset,length");
	for (size_t i = 0; i < s->n && rc == 0;) {
		const struct lance_range *r = &s->r[i];
		const char *file = s->files[r->file];
		if (a->format == FMT_RANGES || a->format == FMT_JUICEFS) {
			/* ranges of one file are adjacent: one line per file */
			size_t j = i;
			if (prefix && *prefix)
				printf("%s%s", OUT_NAME(a, prefix),
				       prefix[strlen(prefix) - 1] == '/' ? "" : "/");
			fputs(OUT_NAME(a, file), stdout);
			if (a->format == FMT_RANGES) {
				fputs(" [", stdout);
				for (; j < s->n && s->r[j].file == r->file; j++)
					printf("%s%" PRIu64 "-%" PRIu64, j > i ? ";" : "",
					       s->r[j].off, s->r[j].off + s->r[j].len);
				fputc(']', stdout);
			} else {
				while (j < s->n && s->r[j].file == r->file)
					j++;
			}
			fputc('\n', stdout);
			i = j;
			continue;
		}
		if (a->format == FMT_JSONL) {
			rc = emit_json(json_pack("{s:s,s:s,s:I,s:I,s:s}", "type", "range", "file", file,
						 "offset", (json_int_t)r->off, "length",
						 (json_int_t)r->len, "kind",
						 r->kind & LANCE_RK_DATA ? "data" : "meta"));
		} else {
			csv_path(a, file);
			printf(",%" PRIu64 ",%" PRIu64 "\n", r->off, r->len);
		}
		i++;
	}
	return rc < 0 ? jo_err_set(err, rc, "cannot write output") : 0;
}

static int run_ranges(struct lance_io *io, const struct lance_manifest *m,
		      const struct lance_args *a, const struct jo_ctx *ctx, bool quiet,
		      struct jo_err *err)
{
	struct lance_scan_opts so = { .blob_payloads = a->blobs, .tail_block = a->tail_block };
	struct lance_rangeset s;
	size_t *sel = NULL, nsel = 0, cap = 0;
	char *save = NULL, *tok;
	uint64_t total = 0;
	int rc = 0;

	lance_rangeset_init(&s);
	for (tok = strtok_r(a->columns, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t idx;
		while (*tok == ' ')
			tok++;
		if (!*tok)
			continue;
		if ((rc = lance_field_resolve(m, tok, &idx, err)) < 0) {
			jo_err_wrap(err, "version %" PRIu64, m->version);
			goto out;
		}
		if (jo_grow_array(&sel, &cap, nsel + 1, sizeof(*sel))) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
		sel[nsel++] = idx;
	}
	if (nsel == 0) {
		rc = jo_err_set(err, JO_EINVAL, "--columns names no column");
		goto out;
	}
	if ((rc = lance_scan_ranges(io, m, sel, nsel, &so, &s, err)) < 0)
		goto out;
	lance_rangeset_finish(&s, a->align, a->gap);
	const char *prefix = a->prefix;
	if (!prefix && !strstr(a->dataset, "://"))
		prefix = a->dataset;
	if ((rc = print_ranges(&s, a, prefix, err)) < 0)
		goto out;
	for (size_t i = 0; i < s.n; i++)
		total += s.r[i].len;
	/* "version" is jfsops's (the envelope): the dataset's is dataset_version */
	if (a->format == FMT_JSONL)
		rc = cmd_summary_emit(ctx, json_pack("{s:I,s:I,s:I,s:I,s:I}", "dataset_version",
						     (json_int_t)m->version, "fragments",
						     (json_int_t)m->nfrags, "files",
						     (json_int_t)s.nfiles, "ranges", (json_int_t)s.n,
						     "bytes", (json_int_t)total),
				      true, JO_EXIT_OK) ? JO_EIO : 0;
	if (rc < 0) {
		rc = jo_err_set(err, rc, "cannot write output");
		goto out;
	}
	if (!quiet)
		fprintf(stderr, "%s %s: version %" PRIu64 ": %zu fragments, %zu files, %zu ranges, %" PRIu64
			" bytes\n", ctx->prog, ctx->cmd, m->version, m->nfrags, s.nfiles, s.n, total);
out:
	free(sel);
	lance_rangeset_release(&s);
	return rc;
}

/*
 * s3://bucket/prefix: the endpoint comes from --endpoint or JFSOPS_S3_ENDPOINT
 * (default AWS), credentials from JFSOPS_ACCESS_KEY / JFSOPS_SECRET_KEY
 * (anonymous when unset), the region from JFSOPS_REGION.
 */
static int open_s3(struct jo_obj **obj, struct lance_io **io, const char *url,
		   const char *endpoint, const char *retries, struct jo_err *err)
{
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	const char *rest = url + 5, *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	char bucket[1024];
	int rc;

	if (blen == 0)
		return jo_err_set(err, JO_EINVAL, "'%s': no bucket", url);
	if (!endpoint)
		endpoint = getenv("JFSOPS_S3_ENDPOINT");
	if (endpoint)
		snprintf(bucket, sizeof(bucket), "%s%s%.*s", endpoint,
			 endpoint[strlen(endpoint) - 1] == '/' ? "" : "/", (int)blen, rest);
	else
		snprintf(bucket, sizeof(bucket), "https://%.*s.s3.amazonaws.com", (int)blen, rest);
	oo.storage = "s3";
	oo.bucket = bucket;
	oo.access_key = getenv("JFSOPS_ACCESS_KEY");
	oo.secret_key = getenv("JFSOPS_SECRET_KEY");
	oo.region = getenv("JFSOPS_REGION");
	oo.max_conns = 64;   /* the scan reads data-file tails 64 at once (PF_THREADS) */
	if (retries && (rc = cmd_parse_retries(retries, &oo.retries, err)) < 0)
		return rc;
	if ((rc = jo_obj_open(obj, &oo, err)) < 0)
		return rc;
	return lance_io_open_obj(io, *obj, slash ? slash + 1 : "", err);
}

#define USAGE(...)                                        \
	do {                                              \
		rc = cmd_usage_error(ctx, __VA_ARGS__);   \
		goto out;                                 \
	} while (0)

int cmd_lance(int argc, char **argv, struct jo_ctx *ctx)
{
	struct lance_args a = { .format = ctx->json ? FMT_JSONL : FMT_CSV, .tail_block = 4096, .gap = 4096 };
	struct cmd_vol_args va = { 0 };
	struct jo_vol *vol = NULL;
	struct jo_obj *obj = NULL;
	const char *endpoint = NULL;
	char *meta_url = NULL;
	bool quiet = ctx->quiet;
	struct lance_io *io = NULL;
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	uint64_t tail = UINT64_MAX;  /* --tail-block, when given */
	int n, rc = 0;
	struct jo_option opts[] = {
		OPT_STRING('c', "columns", &a.columns, "LIST", "comma-separated columns; a top-level "
			   "name selects the column with all its children, a dotted path (st.x) one "
			   "nested field (required for ranges)"),
		OPT_UINT(0, "version", &a.version, "V", "dataset version (default: the latest)", 1,
			 0),
		OPT_CALLBACK('f', "format", &a.format, "FMT", "jsonl, csv, ranges or juicefs "
			     "(default: csv, or jsonl with the global --json): csv is 'file,offset,length'; ranges is "
			     "one line per file, 'path [start-end;...]' (end exclusive), which 'jfsops "
			     "warmup --ranges' reads (no released juicefs takes ranges: 'juicefs warmup "
			     "-f' reads whole paths, up to 1.4.2 at least); juicefs is one path per "
			     "line, each file once: the list 'juicefs warmup -f' reads (it warms those "
			     "files whole)", format_cb),
		OPT_SIZE('a', "align", &a.align, "BYTES", "round ranges out to multiples of BYTES "
			 "and merge (e.g. 4M, the volume's block size; default: none)", 0, 0),
		OPT_STRING('P', "prefix", &a.prefix, "P", "path prefix for --format ranges and "
			   "juicefs (default: DATASET when it is a local directory), e.g. the "
			   "dataset's path under a JuiceFS mount"),
		OPT_SIZE(0, "merge-gap", &a.gap, "BYTES", "merge ranges of a file less than BYTES "
			 "apart (default: 64, the padding between Lance buffers, which newer Lance "
			 "readers read through)", 0, 0),
		OPT_BOOL(0, "blobs", &a.blobs, "also list blob payloads (a scan of a blob column "
			 "reads only the blob descriptions)"),
		OPT_SIZE(0, "tail-block", &tail, "BYTES", "size of the reader's first read at the end "
			 "of each data file (default: 4096, what Lance does on a local file system; "
			 "64K for s3:// datasets)", 0, UINT64_MAX - 1),
		OPT_STRING(0, "endpoint", &endpoint, "URL", "S3 endpoint for s3:// datasets (env "
			   "JFSOPS_S3_ENDPOINT; default AWS), keys from JFSOPS_ACCESS_KEY/SECRET_KEY"),
		OPT_BOOL(0, "list-versions", &a.list_versions, "print the dataset's versions and "
			 "exit"),
		OPT_BOOL(0, "schema", &a.schema, "print the schema (field id, parent, type) and exit"),
		OPT_SET_INT(0, "json", &a.format, "same as --format jsonl", FMT_JSONL),
		OPT_BOOL('q', "quiet", &quiet, "no summary line on stderr"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, lance_usage, lance_tail, opts };

	a.tty = isatty(STDOUT_FILENO);
	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0) {
		rc = cmd_opt_exit(ctx, n);
		goto out;
	}
	if (n != 1)
		USAGE(n < 1 ? "expected DATASET" : "too many arguments");
	a.dataset = argv[1];
	/* Lance's first read of a file's tail is one block: 4 KiB on local file
	 * systems (a JuiceFS mount included), 64 KiB on object stores. */
	if (tail != UINT64_MAX)
		a.tail_block = tail;
	else if (strncmp(a.dataset, "s3://", 5) == 0)
		a.tail_block = 65536;
	if (!a.list_versions && !a.schema && !a.columns)
		USAGE("--columns is required (or --list-versions, --schema)");
	if (a.list_versions && a.schema)
		USAGE("--list-versions and --schema exclude each other");
	if ((a.format == FMT_JUICEFS || a.format == FMT_RANGES) && (a.list_versions || a.schema))
		USAGE("--format %s only applies to ranges",
		      a.format == FMT_JUICEFS ? "juicefs" : "ranges");

	if (strncmp(a.dataset, "s3://", 5) == 0) {
		if ((rc = open_s3(&obj, &io, a.dataset, endpoint, va.retries, &err)) < 0)
			goto fail;
	} else if (strstr(a.dataset, "://")) {
		const char *sep = strstr(a.dataset, "://") + 3, *p, *split = NULL;
		/* META-URL:/path: the last ":/" after the scheme separates the two. */
		for (p = strstr(sep, ":/"); p; p = strstr(p + 1, ":/"))
			split = p;
		if (!split)
			USAGE("'%s': expected META-URL:/path or s3://bucket/prefix",
					       a.dataset);
		if (!(meta_url = strndup(a.dataset, (size_t)(split - a.dataset)))) {
			rc = jo_err_set(&err, JO_ENOMEM, "out of memory");
			goto fail;
		}
		va.read_only = true;
		if ((rc = cmd_open_volume(ctx, &va, meta_url, &vol)) != 0)
			goto out;
		if ((rc = lance_io_open_jfs(&io, vol, split + 1, &err)) < 0)
			goto fail;
	} else if ((rc = lance_io_open(&io, a.dataset, &err)) < 0) {
		goto fail;
	}
	if (a.list_versions) {
		rc = print_versions(io, &a, &err);
	} else {
		rc = lance_manifest_load(io, a.version, &m, &err);
		/* Known reader flags: deletions, stable row ids, (deprecated), table
		 * config, base paths. Others (e.g. 64, data overlays) may put column
		 * values in files this version does not know about. */
		if (rc == 0 && (m->reader_flags & ~(uint64_t)31) && !quiet)
			fprintf(stderr, "%s %s: warning: version %" PRIu64 " uses unknown reader "
				"feature flags 0x%" PRIx64 ": ranges may be incomplete\n", ctx->prog,
				ctx->cmd, m->version, m->reader_flags & ~(uint64_t)31);
		if (rc == 0)
			rc = a.schema ? print_schema(m, &a, &err)
				      : run_ranges(io, m, &a, ctx, quiet, &err);
	}
	if (rc < 0)
		goto fail;
	if (fflush(stdout) != 0) {
		rc = jo_err_set(&err, JO_EIO, "cannot write output");
		goto fail;
	}
	rc = JO_EXIT_OK;
	goto out;
fail:
	rc = cmd_fail(ctx, &err);
out:
	lance_manifest_free(m);
	lance_io_close(io);
	jo_vol_close(vol);
	jo_obj_close(obj);
	cmd_vol_args_release(&va);
	free(meta_url);
	return rc;
}
