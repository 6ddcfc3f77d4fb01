/*
 * export.c: Parquet tables from one walk (export.h).
 *
 * The walk hands out rows inode by inode (and an inode's slice records right
 * after its rows). The rows and slices of one inode are buffered, digested
 * (FNV-1a 64 over every field that is exported), and flushed when the next
 * inode starts: written when the export is full or the digest differs from
 * the previous export's, whose (inode, digest) list is read alongside in the
 * same order; previous inodes passed over are the deleted ones.
 */
#include "usage/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/parquet.h"
#include "common/file.h"

#define STATE_NAME "_jfsops_state"
#define STATE_MAGIC "JOXSTAT1"

enum { F_INODE, F_PARENT, F_PATH, F_NAME, F_TYPE, F_SIZE, F_MODE, F_UID, F_GID, F_ATIME,
       F_MTIME, F_CTIME, F_NLINK, F_CHUNKS, F_RECORDS, F_STORED, F_N };
static const struct jo_pq_column files_cols[F_N] = {
	{ "inode", JO_PQ_INT64, false }, { "parent", JO_PQ_INT64, false },
	{ "path", JO_PQ_STRING, false }, { "name", JO_PQ_STRING, false },
	{ "type", JO_PQ_STRING, false }, { "size", JO_PQ_INT64, false },
	{ "mode", JO_PQ_INT32, false }, { "uid", JO_PQ_INT64, false },
	{ "gid", JO_PQ_INT64, false }, { "atime", JO_PQ_TIMESTAMP_NS, false },
	{ "mtime", JO_PQ_TIMESTAMP_NS, false }, { "ctime", JO_PQ_TIMESTAMP_NS, false },
	{ "nlink", JO_PQ_INT64, false }, { "chunks", JO_PQ_INT64, false },
	{ "slice_records", JO_PQ_INT64, false }, { "bytes_stored", JO_PQ_INT64, false },
};
enum { S_ID, S_SIZE, S_INODE, S_INDEX, S_POS, S_OFF, S_LEN, S_N };
static const struct jo_pq_column slices_cols[S_N] = {
	{ "slice_id", JO_PQ_INT64, false }, { "size", JO_PQ_INT64, false },
	{ "inode", JO_PQ_INT64, false }, { "chunk_index", JO_PQ_INT64, false },
	{ "pos", JO_PQ_INT64, false }, { "off", JO_PQ_INT64, false },
	{ "len", JO_PQ_INT64, false },
};
static const struct jo_pq_column deleted_cols[1] = { { "inode", JO_PQ_INT64, false } };

/* The names juicefs dump gives the types. */
static const char *type_name(uint8_t t)
{
	switch (t) {
	case JO_TYPE_FILE: return "regular";
	case JO_TYPE_DIR: return "directory";
	case JO_TYPE_SYMLINK: return "symlink";
	case JO_TYPE_FIFO: return "fifo";
	case JO_TYPE_BLKDEV: return "blockdev";
	case JO_TYPE_CHRDEV: return "chardev";
	case JO_TYPE_SOCKET: return "socket";
	}
	return "unknown";
}

struct table {
	struct jo_file *f;      /* the table file, until renamed into place */
	struct jo_pq_writer *w;
	uint64_t rows;
};

struct slice_rec {
	uint32_t indx, pos, size, off, len;
	uint64_t id;
};

struct xp {
	const struct export_opts *o;
	struct export_result *res;
	struct jo_err *err;
	struct table files, slices, deleted;
	struct jo_file *state;
	/* the inode being buffered */
	bool have;
	uint64_t ino;
	struct jo_walk_row *rows;
	size_t nrows, rowcap;
	char *paths;                 /* the rows' paths, back to back */
	size_t plen, pcap;
	struct slice_rec *sl;
	size_t nsl, slcap;
	/* the previous export's state */
	FILE *prev;
	bool prev_live;
	uint64_t prev_ino, prev_digest;
	/* UTF-8 repair scratch */
	char *fix;
	size_t fixcap;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ULL;
	}
	return h;
}

static uint64_t fnv64(uint64_t h, uint64_t v)
{
	uint8_t b[8];

	jo_put_be64(b, v);
	return fnv(h, b, 8);
}

/* The length of the valid UTF-8 character at s, 0 when there is none. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;

	if (len == 0 || len > n)
		return 0;
	for (size_t q = 1; q < len; q++)
		if ((s[q] >> 6) != 2)
			return 0;
	/* overlong forms, surrogates and code points past U+10FFFF are not UTF-8 */
	if ((len == 2 && c < 0xC2) || (len == 3 && c == 0xE0 && s[1] < 0xA0) ||
	    (len == 3 && c == 0xED && s[1] >= 0xA0) || (len == 4 && c > 0xF4) ||
	    (len == 4 && c == 0xF0 && s[1] < 0x90) || (len == 4 && c == 0xF4 && s[1] >= 0x90))
		return 0;
	return len;
}

/* s as valid UTF-8 (Parquet strings are): each byte that is not becomes U+FFFD. */
static int utf8(struct xp *x, const char *s, size_t n, const char **out, size_t *outlen)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, k = 0, len;

	while (i < n && (len = utf8_len(u + i, n - i)) != 0)
		i += len;
	*out = s;
	*outlen = n;
	if (i == n)
		return 0;
	if (n * 3 > x->fixcap) {
		char *b = realloc(x->fix, n * 3);

		if (!b)
			return jo_err_set(x->err, JO_ENOMEM, "out of memory");
		x->fix = b;
		x->fixcap = n * 3;
	}
	for (i = 0; i < n;) {
		len = utf8_len(u + i, n - i);
		if (len == 0) {
			memcpy(x->fix + k, "\xEF\xBF\xBD", 3);
			k += 3;
			i++;
			continue;
		}
		memcpy(x->fix + k, s + i, len);
		k += len;
		i += len;
	}
	*out = x->fix;
	*outlen = k;
	return 0;
}

static int table_open(struct xp *x, struct table *t, const char *name,
		      const struct jo_pq_column *cols, size_t ncols)
{
	struct jo_pq_opts po = JO_PQ_OPTS_INIT;
	char path[4096];
	int rc;

	if (snprintf(path, sizeof(path), "%s/%s", x->o->out, name) >= (int)sizeof(path))
		return jo_err_set(x->err, JO_EINVAL, "--out: path too long");
	if ((rc = jo_file_create(&t->f, path, JO_FILE_PUBLIC, 0, x->err)) != 0)
		return rc;
	po.row_group_bytes = x->o->row_group_bytes;
	/* 64 KiB pages: 16 columns' raw pages stay small beside the row group */
	po.page_bytes = 64u << 10;
	if ((rc = jo_pq_open(&t->w, t->f->fd, cols, ncols, &po, x->err)) != 0)
		return jo_err_wrap(x->err, "%s", path);
	return 0;
}

static int table_close(struct xp *x, struct table *t)
{
	struct jo_pq_writer *w = t->w;
	int rc;

	if (!w)
		return 0;
	t->w = NULL;
	if ((rc = jo_pq_close(w, &t->rows, x->err)) != 0)
		return jo_err_wrap(x->err, "%s", t->f->path);
	return jo_file_commit(t->f, x->err);
}

static void table_abort(struct table *t)
{
	jo_pq_abort(t->w);
	t->w = NULL;
	jo_file_abort(t->f); /* after a commit: only frees */
	t->f = NULL;
}

static int ts(const struct jo_attr *a, int which, int64_t *out)
{
	int64_t s = which == 0 ? a->atime : which == 1 ? a->mtime : a->ctime;
	uint32_t ns = which == 0 ? a->atimensec : which == 1 ? a->mtimensec : a->ctimensec;

	*out = s * 1000000000LL + ns;
	return 0;
}

static int write_row(struct xp *x, const struct jo_walk_row *r)
{
	struct jo_pq_writer *w = x->files.w;
	const struct jo_attr *a = &r->attr;
	const char *s;
	size_t n;
	int64_t t[3];
	int rc;

	for (int i = 0; i < 3; i++)
		ts(a, i, &t[i]);
	if ((rc = jo_pq_put_i64(w, F_INODE, (int64_t)r->ino, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_PARENT, (int64_t)r->parent, x->err)) ||
	    (rc = utf8(x, r->path, r->path_len, &s, &n)) ||
	    (rc = jo_pq_put_str(w, F_PATH, s, n, x->err)) ||
	    (rc = utf8(x, r->name, r->name_len, &s, &n)) ||
	    (rc = jo_pq_put_str(w, F_NAME, s, n, x->err)) ||
	    (rc = jo_pq_put_str(w, F_TYPE, type_name(a->type), strlen(type_name(a->type)), x->err)) ||
	    (rc = jo_pq_put_i64(w, F_SIZE, a->type == JO_TYPE_FILE ? (int64_t)a->length : 0,
				x->err)) ||
	    (rc = jo_pq_put_i32(w, F_MODE, a->mode, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_UID, a->uid, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_GID, a->gid, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_ATIME, t[0], x->err)) ||
	    (rc = jo_pq_put_i64(w, F_MTIME, t[1], x->err)) ||
	    (rc = jo_pq_put_i64(w, F_CTIME, t[2], x->err)) ||
	    (rc = jo_pq_put_i64(w, F_NLINK, a->nlink, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_CHUNKS, (int64_t)r->chunks, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_RECORDS, (int64_t)r->slice_records, x->err)) ||
	    (rc = jo_pq_put_i64(w, F_STORED, (int64_t)r->stored_bytes, x->err)))
		return rc;
	return jo_pq_end_row(w, x->err);
}

static int write_slice(struct xp *x, uint64_t ino, const struct slice_rec *s)
{
	struct jo_pq_writer *w = x->slices.w;
	int rc;

	if ((rc = jo_pq_put_i64(w, S_ID, (int64_t)s->id, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_SIZE, s->size, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_INODE, (int64_t)ino, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_INDEX, s->indx, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_POS, s->pos, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_OFF, s->off, x->err)) ||
	    (rc = jo_pq_put_i64(w, S_LEN, s->len, x->err)))
		return rc;
	return jo_pq_end_row(w, x->err);
}

static int write_deleted(struct xp *x, uint64_t ino)
{
	int rc;

	x->res->deleted++;
	if ((rc = jo_pq_put_i64(x->deleted.w, 0, (int64_t)ino, x->err)) != 0)
		return rc;
	return jo_pq_end_row(x->deleted.w, x->err);
}

static int prev_next(struct xp *x)
{
	uint8_t rec[16];
	size_t n = x->prev ? fread(rec, 1, sizeof(rec), x->prev) : 0;

	x->prev_live = n == sizeof(rec);
	if (!x->prev_live) {
		if (x->prev && (n != 0 || ferror(x->prev)))
			return jo_err_set(x->err, JO_EPROTO, "--incremental %s: %s is cut short",
					  x->o->previous, STATE_NAME);
		return 0;
	}
	if (jo_be64(rec) <= x->prev_ino && x->prev_ino != 0)
		return jo_err_set(x->err, JO_EPROTO, "--incremental %s: %s is not in inode order",
				  x->o->previous, STATE_NAME);
	x->prev_ino = jo_be64(rec);
	x->prev_digest = jo_be64(rec + 8);
	return 0;
}

/* Write out the buffered inode (when new or changed) and its state entry. */
static int flush(struct xp *x)
{
	uint64_t h = 14695981039346656037ULL;
	bool changed = true;
	uint8_t rec[16];
	int rc;

	if (!x->have)
		return 0;
	x->have = false;
	for (size_t i = 0; i < x->nrows; i++) {
		struct jo_walk_row *r = &x->rows[i];
		const struct jo_attr *a = &r->attr;
		int64_t t[3];

		r->path = x->paths + (size_t)(uintptr_t)r->path;
		r->name = r->path + r->path_len - r->name_len;
		for (int k = 0; k < 3; k++)
			ts(a, k, &t[k]);
		h = fnv64(h, r->parent);
		h = fnv64(h, r->path_len);
		h = fnv(h, r->path, r->path_len);
		h = fnv64(h, a->type);
		h = fnv64(h, a->length);
		h = fnv64(h, a->mode);
		h = fnv64(h, a->uid);
		h = fnv64(h, a->gid);
		h = fnv64(h, (uint64_t)t[0]);
		h = fnv64(h, (uint64_t)t[1]);
		h = fnv64(h, (uint64_t)t[2]);
		h = fnv64(h, a->nlink);
		h = fnv64(h, r->chunks);
		h = fnv64(h, r->slice_records);
		h = fnv64(h, r->stored_bytes);
	}
	for (size_t i = 0; i < x->nsl; i++) {
		const struct slice_rec *q = &x->sl[i];

		h = fnv64(h, q->id);
		h = fnv64(h, (uint64_t)q->indx << 32 | q->pos);
		h = fnv64(h, (uint64_t)q->size << 32 | q->off);
		h = fnv64(h, q->len);
	}
	/* the previous export's inodes below this one are gone */
	while (x->prev_live && x->prev_ino < x->ino) {
		if ((rc = write_deleted(x, x->prev_ino)) != 0 || (rc = prev_next(x)) != 0)
			return rc;
	}
	if (x->prev_live && x->prev_ino == x->ino) {
		changed = x->prev_digest != h;
		if ((rc = prev_next(x)) != 0)
			return rc;
	}
	x->res->inodes++;
	jo_put_be64(rec, x->ino);
	jo_put_be64(rec + 8, h);
	if (fwrite(rec, 1, sizeof(rec), x->state->fp) != sizeof(rec))
		return jo_err_set(x->err, JO_EIO, "writing %s: short write", x->state->path);
	if (!changed)
		return 0;
	x->res->changed_inodes++;
	for (size_t i = 0; i < x->nrows; i++) {
		if ((rc = write_row(x, &x->rows[i])) != 0)
			return rc;
		x->res->rows++;
	}
	for (size_t i = 0; x->slices.w && i < x->nsl; i++) {
		if ((rc = write_slice(x, x->ino, &x->sl[i])) != 0)
			return rc;
		x->res->slices++;
	}
	return 0;
}

static int on_row(const struct jo_walk_row *r, void *payload)
{
	struct xp *x = payload;
	struct jo_walk_row *c;
	int rc;

	if (r->where != JO_WALK_IN_TREE)
		return 0;
	if (!x->have || x->ino != r->ino) {
		if ((rc = flush(x)) != 0)
			return rc;
		x->have = true;
		x->ino = r->ino;
		x->nrows = x->nsl = x->plen = 0;
	}
	if (jo_grow_array(&x->rows, &x->rowcap, x->nrows + 1, sizeof(*x->rows)))
		return jo_err_set(x->err, JO_ENOMEM, "out of memory");
	if (jo_grow_array(&x->paths, &x->pcap, x->plen + r->path_len, 1))
		return jo_err_set(x->err, JO_ENOMEM, "out of memory");
	c = &x->rows[x->nrows++];
	*c = *r;
	/* the path's offset in x->paths until flush() turns it into a pointer */
	c->path = (const char *)(uintptr_t)x->plen;
	memcpy(x->paths + x->plen, r->path, r->path_len);
	x->plen += r->path_len;
	return 0;
}

static int on_slice(uint64_t ino, enum jo_walk_where where, uint32_t indx, uint32_t pos,
		    uint64_t id, uint32_t size, uint32_t off, uint32_t len, void *payload)
{
	struct xp *x = payload;

	if (where != JO_WALK_IN_TREE || id == 0 || !x->have || x->ino != ino)
		return 0;
	if (jo_grow_array(&x->sl, &x->slcap, x->nsl + 1, sizeof(*x->sl)))
		return jo_err_set(x->err, JO_ENOMEM, "out of memory");
	x->sl[x->nsl++] = (struct slice_rec){ .indx = indx, .pos = pos, .size = size, .off = off,
					     .len = len, .id = id };
	return 0;
}

/* The previous export: complete (_SUCCESS), of this volume, with the same tables. */
static int open_previous(struct xp *x, const struct jo_format *f, unsigned *prev_tables)
{
	char path[4096], magic[12];
	json_error_t je;
	json_t *ok, *tabs;
	const char *uuid;
	size_t i;
	json_t *v;

	snprintf(path, sizeof(path), "%s/_SUCCESS", x->o->previous);
	ok = json_load_file(path, 0, &je);
	if (!ok)
		return jo_err_set(x->err, JO_ENOTFOUND, "--incremental %s: no readable _SUCCESS: "
				  "not a complete jfsops export", x->o->previous);
	uuid = json_string_value(json_object_get(ok, "uuid"));
	if (!uuid || !f->uuid || strcmp(uuid, f->uuid)) {
		/* the message before the JSON (which owns uuid) goes */
		jo_err_set(x->err, JO_EINVAL, "--incremental %s: an export of another volume (uuid %s)",
			   x->o->previous, uuid ? uuid : "?");
		json_decref(ok);
		return x->err->code;
	}
	x->res->since = json_integer_value(json_object_get(ok, "snapshot"));
	*prev_tables = 0;
	tabs = json_object_get(ok, "tables");
	json_array_foreach(tabs, i, v) {
		const char *t = json_string_value(v);

		if (t && !strcmp(t, "files"))
			*prev_tables |= EXPORT_FILES;
		if (t && !strcmp(t, "slices"))
			*prev_tables |= EXPORT_SLICES;
	}
	json_decref(ok);
	snprintf(path, sizeof(path), "%s/%s", x->o->previous, STATE_NAME);
	x->prev = fopen(path, "rb");
	if (!x->prev)
		return jo_err_set(x->err, JO_ENOTFOUND, "--incremental %s: no %s", x->o->previous,
				  STATE_NAME);
	if (fread(magic, 1, 8, x->prev) != 8 || memcmp(magic, STATE_MAGIC, 8))
		return jo_err_set(x->err, JO_EPROTO, "--incremental %s: %s is not a state file",
				  x->o->previous, STATE_NAME);
	return prev_next(x);
}

/* The export directory: made now, or an empty one. */
static int prepare_out(const char *dir, struct jo_err *err)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0777) == 0)
		return 0;
	if (errno != EEXIST)
		return jo_err_set(err, JO_EIO, "--out %s: %s", dir, strerror(errno));
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			close(fd);
		return jo_err_set(err, JO_EINVAL, "--out %s: not a directory (or a symlink to one)", dir);
	}
	close(fd);
	{
		char probe[4096];

		snprintf(probe, sizeof(probe), "%s/_SUCCESS", dir);
		if (access(probe, F_OK) == 0)
			return jo_err_set(err, JO_EINVAL, "--out %s holds an export already (_SUCCESS): "
					  "choose a new directory", dir);
		snprintf(probe, sizeof(probe), "%s/files.parquet", dir);
		if (access(probe, F_OK) == 0)
			return jo_err_set(err, JO_EINVAL, "--out %s holds files.parquet: choose a new "
					  "directory", dir);
	}
	return 0;
}

static int write_success(struct xp *x, struct jo_meta *m, const struct jo_format *f)
{
	struct jo_file *u = NULL;
	json_t *j = json_object(), *t = json_array(), *rows = json_object();
	char path[4096];
	int rc;

	json_object_set_new(j, "tool", json_string("jfsops export"));
	json_object_set_new(j, "version", json_string(JO_VERSION));
	json_object_set_new(j, "volume", json_string(f->name));
	json_object_set_new(j, "uuid", json_string(f->uuid ? f->uuid : ""));
	json_object_set_new(j, "engine", json_string(jo_meta_engine(m)));
	json_object_set_new(j, "snapshot", json_integer(x->res->walk.started));
	json_object_set_new(j, "point_in_time", json_boolean(x->res->walk.point_in_time));
	json_array_append_new(t, json_string("files"));
	if (x->o->tables & EXPORT_SLICES)
		json_array_append_new(t, json_string("slices"));
	if (x->o->previous)
		json_array_append_new(t, json_string("deleted"));
	json_object_set_new(j, "tables", t);
	json_object_set_new(rows, "files", json_integer((json_int_t)x->res->rows));
	if (x->o->tables & EXPORT_SLICES)
		json_object_set_new(rows, "slices", json_integer((json_int_t)x->res->slices));
	if (x->o->previous)
		json_object_set_new(rows, "deleted", json_integer((json_int_t)x->res->deleted));
	json_object_set_new(j, "rows", rows);
	json_object_set_new(j, "inodes", json_integer((json_int_t)x->res->inodes));
	json_object_set_new(j, "incremental", json_boolean(x->o->previous != NULL));
	if (x->o->previous) {
		json_object_set_new(j, "previous", json_string(x->o->previous));
		json_object_set_new(j, "since", json_integer(x->res->since));
	}
	snprintf(path, sizeof(path), "%s/_SUCCESS", x->o->out);
	rc = jo_file_create(&u, path, JO_FILE_PUBLIC, JO_FILE_STDIO, x->err);
	if (rc == 0 && (json_dumpf(j, u->fp, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0 ||
			fputc('\n', u->fp) == EOF))
		rc = jo_err_set(x->err, JO_EIO, "writing %s", path);
	if (rc == 0)
		rc = jo_file_commit(u, x->err);
	jo_file_abort(u);
	json_decref(j);
	return rc;
}

static int sync_dir(const char *dir, struct jo_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0 || fsync(fd) != 0)
		rc = jo_err_set(err, JO_EIO, "fsync %s: %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

int export_run(struct jo_meta *m, const struct jo_format *f, const struct export_opts *o,
	       struct export_result *res, struct jo_err *err)
{
	struct xp x = { .o = o, .res = res, .err = err };
	struct jo_walk_opts wo = JO_WALK_OPTS_INIT;
	char path[4096];
	unsigned prev_tables = 0;
	int rc;

	memset(res, 0, sizeof(*res));
	if (o->previous && (rc = open_previous(&x, f, &prev_tables)) != 0)
		goto out;
	if (o->previous && (prev_tables & EXPORT_SLICES) != (o->tables & EXPORT_SLICES)) {
		rc = jo_err_set(err, JO_EINVAL, "--incremental %s: that export %s the slices table; "
				"--tables must match it", o->previous,
				prev_tables & EXPORT_SLICES ? "has" : "has not");
		goto out;
	}
	if ((rc = prepare_out(o->out, err)) != 0)
		goto out;
	if ((rc = table_open(&x, &x.files, "files.parquet", files_cols, F_N)) != 0)
		goto out;
	if ((o->tables & EXPORT_SLICES) &&
	    (rc = table_open(&x, &x.slices, "slices.parquet", slices_cols, S_N)) != 0)
		goto out;
	if (o->previous && (rc = table_open(&x, &x.deleted, "deleted.parquet", deleted_cols, 1)) != 0)
		goto out;
	snprintf(path, sizeof(path), "%s/%s", o->out, STATE_NAME);
	if ((rc = jo_file_create(&x.state, path, JO_FILE_PUBLIC, JO_FILE_STDIO, err)) != 0)
		goto out;
	if (fwrite(STATE_MAGIC, 1, 8, x.state->fp) != 8) {
		rc = jo_err_set(err, JO_EIO, "writing %s", path);
		goto out;
	}
	wo.flags = JO_WALK_CHUNKS | ((o->tables & EXPORT_SLICES) ? JO_WALK_SLICES : 0);
	wo.mem_limit = o->mem_limit;
	wo.tmp_dir = o->tmp_dir;
	wo.row = on_row;
	wo.slice = on_slice;
	wo.payload = &x;
	if ((rc = jo_walk_run(m, &wo, &res->walk, err)) != 0)
		goto out;
	if ((rc = flush(&x)) != 0)
		goto out;
	while (x.prev_live) {
		if ((rc = write_deleted(&x, x.prev_ino)) != 0 || (rc = prev_next(&x)) != 0)
			goto out;
	}
	if ((rc = table_close(&x, &x.files)) != 0 || (rc = table_close(&x, &x.slices)) != 0 ||
	    (rc = table_close(&x, &x.deleted)) != 0 || (rc = jo_file_commit(x.state, err)) != 0)
		goto out;
	/* the tables are in place and on disk before the marker says so */
	if ((rc = sync_dir(o->out, err)) != 0 || (rc = write_success(&x, m, f)) != 0)
		goto out;
	rc = sync_dir(o->out, err);
out:
	table_abort(&x.files);
	table_abort(&x.slices);
	table_abort(&x.deleted);
	jo_file_abort(x.state);
	if (x.prev)
		fclose(x.prev);
	free(x.rows);
	free(x.paths);
	free(x.sl);
	free(x.fix);
	return rc;
}
