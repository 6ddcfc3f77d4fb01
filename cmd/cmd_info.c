/* jfsops info: a volume's format, counts and fragmentation, read-only. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/err.h"
#include "common/human.h"
#include "common/esc.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"

static const char info_usage[] =
	"usage: jfsops info META-URL [--json]\n"
	"\n"
	"Show a volume's format record (name, UUID, storage, bucket, block size,\n"
	"compression, trash days) and what its metadata holds: files, directories,\n"
	"chunks, slice records, distinct slices, pending removed files, pending and\n"
	"delayed slices, and a histogram of records per chunk. Reads metadata only;\n"
	"streams every chunk with bounded memory (SCAN / SQL cursor).\n"
	"\n"
	"";

static const char info_tail[] =
	"\n"
	"Examples:\n"
	"  jfsops info sqlite3:///var/jfs/meta.db\n"
	"  jfsops info redis://127.0.0.1:6379/1 --json | jq .hist\n";

/* Histogram buckets of records per chunk: 1, 2, 3-4, 5-8, ..., >1024. */

struct info {
	uint64_t files, dirs, symlinks, other_inodes, file_bytes;
	uint64_t chunks, records, slice_records, hole_records, hidden_bytes;
	uint64_t max_records;
	uint64_t hist[JO_HIST_BUCKETS];
	uint64_t explicit_refs, extra_refs, pending_slices;
	uint64_t pending_files, pending_file_bytes;
	uint64_t delayed_entries, delayed_slices;
	uint64_t sessions, sustained;
	int64_t next_chunk, next_inode, used_space, total_inodes;
	int corrupt_chunks;
};

static int on_inode(uint64_t ino, const struct jo_attr *a, void *payload)
{
	struct info *in = payload;

	(void)ino;
	switch (a->type) {
	case JO_TYPE_FILE:
		in->files++;
		in->file_bytes += a->length;
		break;
	case JO_TYPE_DIR: in->dirs++; break;
	case JO_TYPE_SYMLINK: in->symlinks++; break;
	default: in->other_inodes++; break;
	}
	return 0;
}

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	struct info *in = payload;
	struct jo_slice *recs = NULL;
	size_t n = 0;
	uint64_t written = 0, hidden = 0;

	(void)ino;
	(void)indx;
	if (jo_slices_decode(raw, len, &recs, &n, NULL)) {
		in->corrupt_chunks++;
		return 0;
	}
	if (n == 0)
		return 0;
	in->chunks++;
	in->records += n;
	if (n > in->max_records)
		in->max_records = n;
	in->hist[jo_hist_bucket(n)]++;
	for (size_t i = 0; i < n; i++) {
		if (recs[i].id)
			in->slice_records++;
		else
			in->hole_records++;
	}
	if (jo_chunk_hidden(recs, n, &written, &hidden) == 0)
		in->hidden_bytes += hidden;
	free(recs);
	return 0;
}

static int on_ref(uint64_t id, uint32_t size, int64_t refs, void *payload)
{
	struct info *in = payload;

	(void)id;
	(void)size;
	in->explicit_refs++;
	if (refs <= 0)
		in->pending_slices++;
	else
		in->extra_refs += (uint64_t)(refs - 1);
	return 0;
}

static int on_delfile(uint64_t ino, uint64_t length, int64_t at, void *payload)
{
	struct info *in = payload;

	(void)ino;
	(void)at;
	in->pending_files++;
	in->pending_file_bytes += length;
	return 0;
}

static int on_delslices(uint64_t id, int64_t at, const uint8_t *recs, size_t len, void *payload)
{
	struct info *in = payload;

	(void)id;
	(void)at;
	(void)recs;
	in->delayed_entries++;
	in->delayed_slices += len / JO_DELSLICE_REC_LEN;
	return 0;
}

static int on_session(uint64_t sid, int64_t expire, const char *info, void *payload)
{
	(void)sid;
	(void)expire;
	(void)info;
	((struct info *)payload)->sessions++;
	return 0;
}

static int on_sustained(uint64_t sid, uint64_t ino, void *payload)
{
	(void)sid;
	(void)ino;
	((struct info *)payload)->sustained++;
	return 0;
}

static int gather(struct jo_meta *m, struct info *in, struct jo_err *err)
{
	int rc;

	if ((rc = jo_meta_scan_inodes(m, on_inode, in, err)) ||
	    (rc = jo_meta_scan_chunks(m, on_chunk, in, err)) ||
	    (rc = jo_meta_scan_slice_refs(m, on_ref, in, err)) ||
	    (rc = jo_meta_scan_delfiles(m, on_delfile, in, err)) ||
	    (rc = jo_meta_scan_delslices(m, on_delslices, in, err)) ||
	    (rc = jo_meta_scan_sessions(m, on_session, in, err)) ||
	    (rc = jo_meta_scan_sustained(m, on_sustained, in, err)) ||
	    (rc = jo_meta_get_counter(m, "nextChunk", &in->next_chunk, err)) ||
	    (rc = jo_meta_get_counter(m, "nextInode", &in->next_inode, err)) ||
	    (rc = jo_meta_get_counter(m, "usedSpace", &in->used_space, err)) ||
	    (rc = jo_meta_get_counter(m, "totalInodes", &in->total_inodes, err)))
		return rc;
	return 0;
}

/*
 * Distinct live slices without a set of ids: every id with refs >= 1 is
 * referenced refs times (records + delayed entries), so the sum of all
 * references minus the surplus of the explicit counts is the id count.
 */
static uint64_t distinct_slices(const struct info *in)
{
	uint64_t total = in->slice_records + in->delayed_slices;

	return total > in->extra_refs ? total - in->extra_refs : 0;
}

static int print_json(const struct jo_format *f, const struct info *in)
{
	json_t *o = json_object(), *h = json_object();
	char label[32];
	int rc;

	for (int b = 0; b < JO_HIST_BUCKETS; b++) {
		if (!in->hist[b])
			continue;
		jo_hist_label(b, label, sizeof(label));
		json_object_set_new(h, label, json_integer((json_int_t)in->hist[b]));
	}
	json_object_set_new(o, "type", json_string("info"));
	json_object_set_new(o, "name", json_string(f->name));
	json_object_set_new(o, "uuid", json_string(f->uuid ? f->uuid : ""));
	json_object_set_new(o, "storage", json_string(f->storage ? f->storage : ""));
	json_object_set_new(o, "bucket", json_string(f->bucket ? f->bucket : ""));
	json_object_set_new(o, "block_size", json_integer((json_int_t)f->block_size_kib * 1024));
	json_object_set_new(o, "compression", json_string(f->compression ? f->compression : "none"));
	json_object_set_new(o, "trash_days", json_integer(f->trash_days));
	json_object_set_new(o, "hash_prefix", json_boolean(f->hash_prefix));
	json_object_set_new(o, "shards", json_integer(f->shards));
	json_object_set_new(o, "encrypted", json_boolean(f->has_encrypt_key));
	json_object_set_new(o, "files", json_integer((json_int_t)in->files));
	json_object_set_new(o, "dirs", json_integer((json_int_t)in->dirs));
	json_object_set_new(o, "symlinks", json_integer((json_int_t)in->symlinks));
	json_object_set_new(o, "file_bytes", json_integer((json_int_t)in->file_bytes));
	json_object_set_new(o, "chunks", json_integer((json_int_t)in->chunks));
	json_object_set_new(o, "records", json_integer((json_int_t)in->records));
	json_object_set_new(o, "slice_records", json_integer((json_int_t)in->slice_records));
	json_object_set_new(o, "hole_records", json_integer((json_int_t)in->hole_records));
	json_object_set_new(o, "slices", json_integer((json_int_t)distinct_slices(in)));
	json_object_set_new(o, "hidden_bytes", json_integer((json_int_t)in->hidden_bytes));
	json_object_set_new(o, "max_records_per_chunk", json_integer((json_int_t)in->max_records));
	json_object_set_new(o, "pending_files", json_integer((json_int_t)in->pending_files));
	json_object_set_new(o, "pending_file_bytes", json_integer((json_int_t)in->pending_file_bytes));
	json_object_set_new(o, "pending_slices", json_integer((json_int_t)in->pending_slices));
	json_object_set_new(o, "delayed_entries", json_integer((json_int_t)in->delayed_entries));
	json_object_set_new(o, "delayed_slices", json_integer((json_int_t)in->delayed_slices));
	json_object_set_new(o, "sessions", json_integer((json_int_t)in->sessions));
	json_object_set_new(o, "sustained_inodes", json_integer((json_int_t)in->sustained));
	json_object_set_new(o, "next_slice_id", json_integer(in->next_chunk));
	json_object_set_new(o, "next_inode", json_integer(in->next_inode));
	json_object_set_new(o, "used_space", json_integer(in->used_space));
	json_object_set_new(o, "total_inodes", json_integer(in->total_inodes));
	json_object_set_new(o, "corrupt_chunks", json_integer(in->corrupt_chunks));
	json_object_set_new(o, "hist", h);
	rc = json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(o);
	return rc ? JO_EXIT_FAIL : 0;
}

static void print_human(const struct jo_format *f, const struct info *in)
{
	char a[32], b[32];

	jo_fmt_bytes((double)f->block_size_kib * 1024, 2, a, sizeof(a));
	/* the format record is the volume's: printed escaped */
	printf("name:            %s\n", JO_ESC_TERM(f->name));
	printf("uuid:            %s\n", JO_ESC_TERM(f->uuid ? f->uuid : ""));
	printf("storage:         %s %s\n", JO_ESC_TERM(f->storage), JO_ESC_TERM(f->bucket));
	if (f->shards > 1)
		printf("shards:          %d\n", f->shards);
	printf("block size:      %s\n", a);
	printf("compression:     %s\n", JO_ESC_TERM(f->compression ? f->compression : "none"));
	printf("hash prefix:     %s\n", f->hash_prefix ? "yes" : "no");
	printf("trash days:      %d\n", f->trash_days);
	printf("encryption:      %s\n", f->has_encrypt_key ? "on (block reads unsupported)" : "off");
	jo_fmt_bytes((double)in->file_bytes, 2, a, sizeof(a));
	printf("files:           %" PRIu64 " (%s), %" PRIu64 " dirs, %" PRIu64 " symlinks\n",
	       in->files, a, in->dirs, in->symlinks);
	printf("chunks:          %" PRIu64 "\n", in->chunks);
	jo_fmt_bytes((double)in->hidden_bytes, 2, a, sizeof(a));
	printf("slice records:   %" PRIu64 " (+%" PRIu64 " holes), %s hidden by overwrites\n",
	       in->slice_records, in->hole_records, a);
	printf("slices:          %" PRIu64 "\n", distinct_slices(in));
	jo_fmt_bytes((double)in->pending_file_bytes, 2, b, sizeof(b));
	printf("pending files:   %" PRIu64 " (%s)\n", in->pending_files, b);
	printf("pending slices:  %" PRIu64 "\n", in->pending_slices);
	printf("delayed slices:  %" PRIu64 " in %" PRIu64 " entries\n", in->delayed_slices,
	       in->delayed_entries);
	printf("sessions:        %" PRIu64 " (%" PRIu64 " open unlinked inodes)\n", in->sessions,
	       in->sustained);
	printf("next slice id:   %" PRId64 "\n", in->next_chunk);
	if (in->corrupt_chunks)
		printf("corrupt chunks:  %d\n", in->corrupt_chunks);
	jo_hist_print(in->hist);
}

int cmd_info(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	struct jo_meta *m = NULL;
	struct jo_format fmt = { 0 };
	struct jo_err err = { 0 };
	struct info in = { 0 };
	char *url;
	int rc;
	struct jo_option opts[] = {
		OPT_BOOL(0, "json", &ctx->json, "one JSON object on stdout instead of the table"),
		OPT_HELP(),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, info_usage, info_tail, opts };

	if (!cmd_parse_operands(ctx, &cmd, argc, argv, 1, "expected one META-URL", &rc))
		return rc;
	/* info needs no object store: open the metadata only */
	url = cmd_take_url(argv[1]);
	if (!url)
		return JO_EXIT_FAIL;
	rc = cmd_meta_open_format(url, &m, &fmt, &err);
	if (!rc)
		rc = gather(m, &in, &err);
	if (rc) {
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (ctx->json)
		rc = print_json(&fmt, &in);
	else
		print_human(&fmt, &in);
out:
	jo_format_release(&fmt);
	jo_meta_close(m);
	free(url);
	cmd_vol_args_release(&va);
	return rc;
}
