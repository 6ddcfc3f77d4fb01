/*
 * meta_sqlite.c: the SQLite backend (jfs_* tables, §4 of the format spec).
 * Times in jfs_node are microseconds; refs are real counts; counters hold
 * the next free id. `slices` may be TEXT after `||` appends, so blobs are
 * always read with sqlite3_column_blob + sqlite3_column_bytes.
 */
#include "common/meta/meta_internal.h"

#include "common/err.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SQ_BUSY_MS 5000 /* how long a statement waits out another process's lock */

struct sq {
	sqlite3 *db;
	const char *pfx; /* borrowed from m->url.table_prefix */
};

static struct sq *SQ(struct jo_meta *m)
{
	return m->be;
}

static int sq_fail(struct jo_meta *m, struct jo_err *err, const char *what)
{
	int ec = sqlite3_extended_errcode(SQ(m)->db) & 0xff;
	int code = JO_EIO;

	if (ec == SQLITE_NOTADB)
		code = JO_ENOTJFS;
	else if (ec == SQLITE_BUSY || ec == SQLITE_LOCKED)
		/* another process held the database past the busy timeout: a read
		 * (scan) that cannot proceed, not a lost lease or compare-and-swap */
		return jo_err_set(err, JO_ETIMEOUT, "sqlite3 %s: %s: %s (still locked after "
				  "%d s)", m->url.path, what, sqlite3_errmsg(SQ(m)->db),
				  SQ_BUSY_MS / 1000);
	else if (ec == SQLITE_CORRUPT)
		code = JO_EPROTO;
	return jo_err_set(err, code, "sqlite3 %s: %s: %s", m->url.path, what,
			  sqlite3_errmsg(SQ(m)->db));
}

/* Prepare a statement; every '@' in fmt stands for the table prefix. */
static int sq_prep(struct jo_meta *m, sqlite3_stmt **st, struct jo_err *err, const char *fmt)
{
	char sql[512];
	const char *pfx = SQ(m)->pfx;
	size_t o = 0;

	/* Substitute every '@' with the prefix (simpler than positional printf). */
	for (const char *p = fmt; *p && o + strlen(pfx) + 2 < sizeof(sql); p++) {
		if (*p == '@') {
			memcpy(sql + o, pfx, strlen(pfx));
			o += strlen(pfx);
		} else {
			sql[o++] = *p;
		}
	}
	sql[o] = '\0';
	if (sqlite3_prepare_v2(SQ(m)->db, sql, -1, st, NULL) != SQLITE_OK) {
		*st = NULL;
		return sq_fail(m, err, "prepare");
	}
	return 0;
}

static int sq_open(struct jo_meta *m, struct jo_err *err)
{
	struct sq *s;
	struct stat stt;
	sqlite3_stmt *st = NULL;
	int rc;

	if (stat(m->url.path, &stt) != 0)
		return jo_err_set(err, JO_ENOTFOUND, "sqlite3 database %s does not exist",
				  m->url.path);
	s = calloc(1, sizeof(*s));
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s->pfx = m->url.table_prefix;
	m->be = s;
	if (sqlite3_open_v2(m->url.path, &s->db,
			    (m->url.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		rc = jo_err_set(err, JO_EIO, "cannot open sqlite3 database %s: %s", m->url.path,
				s->db ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, SQ_BUSY_MS);
	rc = sq_prep(m, &st, err, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='@setting'");
	if (rc != 0) {
		if (err && err->code == JO_ENOTJFS)
			jo_err_wrap(err, "not a JuiceFS volume");
		goto fail;
	}
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc == SQLITE_DONE) {
		rc = jo_err_set(err, JO_ENOTJFS, "sqlite3 %s has no table %ssetting: not a JuiceFS volume",
				m->url.path, s->pfx);
		goto fail;
	}
	if (rc != SQLITE_ROW) {
		rc = sq_fail(m, err, "read schema");
		goto fail;
	}
	return 0;
fail:
	sqlite3_close(s->db);
	free(s);
	m->be = NULL;
	return rc;
}

static void sq_close(struct jo_meta *m)
{
	struct sq *s = SQ(m);

	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
	m->be = NULL;
}

/* Step once expecting a row: 1 = row, 0 = none, <0 error. */
static int sq_step(struct jo_meta *m, sqlite3_stmt *st, struct jo_err *err)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sq_fail(m, err, "query");
}

static int sq_get_setting(struct jo_meta *m, char **json, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT value FROM @setting WHERE name='format'");

	if (rc != 0)
		return rc;
	rc = sq_step(m, st, err);
	if (rc == 0) {
		rc = jo_err_set(err, JO_ENOTJFS, "sqlite3 %s has no format record", m->url.path);
	} else if (rc == 1) {
		const void *b = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		*json = malloc((size_t)n + 1);
		if (!*json) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		} else {
			if (n > 0)
				memcpy(*json, b, (size_t)n);
			(*json)[n] = '\0';
			rc = 0;
		}
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_lookup(struct jo_meta *m, uint64_t parent, const char *name, uint64_t *ino,
		     uint8_t *type, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT inode, type FROM @edge WHERE parent=? AND name=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)parent);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_STATIC);
	rc = sq_step(m, st, err);
	if (rc == 1) {
		*ino = (uint64_t)sqlite3_column_int64(st, 0);
		*type = (uint8_t)sqlite3_column_int(st, 1);
		rc = 0;
	} else if (rc == 0) {
		rc = jo_err_set(err, JO_ENOTFOUND, "no entry \"%s\" in directory %llu", name,
				(unsigned long long)parent);
	}
	sqlite3_finalize(st);
	return rc;
}

#define NODE_COLS "inode, type, flags, mode, uid, gid, atime, mtime, ctime, atimensec, " \
	"mtimensec, ctimensec, nlink, length, rdev, parent"

static void us_split(int64_t us, uint32_t extra_ns, int64_t *sec, uint32_t *nsec)
{
	int64_t s = us / 1000000, r = us % 1000000;

	if (r < 0) {
		r += 1000000;
		s--;
	}
	*sec = s;
	*nsec = (uint32_t)(r * 1000 + extra_ns);
}

static void row_attr(sqlite3_stmt *st, struct jo_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = (uint8_t)sqlite3_column_int(st, 1);
	a->flags = (uint8_t)sqlite3_column_int(st, 2);
	a->mode = (uint16_t)(sqlite3_column_int(st, 3) & 07777);
	a->uid = (uint32_t)sqlite3_column_int64(st, 4);
	a->gid = (uint32_t)sqlite3_column_int64(st, 5);
	us_split(sqlite3_column_int64(st, 6), (uint32_t)sqlite3_column_int(st, 9), &a->atime,
		 &a->atimensec);
	us_split(sqlite3_column_int64(st, 7), (uint32_t)sqlite3_column_int(st, 10), &a->mtime,
		 &a->mtimensec);
	us_split(sqlite3_column_int64(st, 8), (uint32_t)sqlite3_column_int(st, 11), &a->ctime,
		 &a->ctimensec);
	a->nlink = (uint32_t)sqlite3_column_int64(st, 12);
	a->length = (uint64_t)sqlite3_column_int64(st, 13);
	a->rdev = (uint32_t)sqlite3_column_int64(st, 14);
	a->parent = (uint64_t)sqlite3_column_int64(st, 15);
}

static int sq_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT " NODE_COLS " FROM @node WHERE inode=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	rc = sq_step(m, st, err);
	if (rc == 1) {
		row_attr(st, out);
		rc = 0;
	} else if (rc == 0) {
		rc = jo_err_set(err, JO_ENOTFOUND, "inode %llu does not exist",
				(unsigned long long)ino);
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		      struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT name, inode, type FROM @edge WHERE parent=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)dir);
	while ((rc = sq_step(m, st, err)) == 1) {
		const char *name = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		rc = cb(name ? name : "", (size_t)n, (uint64_t)sqlite3_column_int64(st, 1),
			(uint8_t)sqlite3_column_int(st, 2), payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int check_recs(int n, uint64_t ino, uint32_t indx, struct jo_err *err)
{
	if (n % JO_SLICE_REC_LEN != 0)
		return jo_err_set(err, JO_EPROTO, "chunk %llu/%u: slices blob is %d bytes, not a "
				  "multiple of 24", (unsigned long long)ino, indx, n);
	return 0;
}

static int sq_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			 size_t *len, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT slices FROM @chunk WHERE inode=? AND indx=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(st, 2, indx);
	rc = sq_step(m, st, err);
	if (rc == 1) {
		const void *b = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		rc = check_recs(n, ino, indx, err);
		if (rc == 0 && n > 0) {
			*out = malloc((size_t)n);
			if (!*out) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			} else {
				memcpy(*out, b, (size_t)n);
				*len = (size_t)n;
			}
		}
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_list_below(struct jo_meta *m, uint64_t ino, int64_t nidx, uint32_t **out,
			 size_t *n, struct jo_err *err)
{
	sqlite3_stmt *st;
	size_t cap = 0;
	int rc = sq_prep(m, &st, err,
			 "SELECT indx FROM @chunk WHERE inode=? AND indx<? ORDER BY indx");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)ino);
	sqlite3_bind_int64(st, 2, nidx);
	while ((rc = sq_step(m, st, err)) == 1) {
		if (*n == cap) {
			uint32_t *p;
			cap = cap ? cap * 2 : 16;
			p = realloc(*out, cap * sizeof(**out));
			if (!p) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			*out = p;
		}
		(*out)[(*n)++] = (uint32_t)sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	if (rc != 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static int sq_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			  struct jo_err *err)
{
	return sq_list_below(m, ino, INT64_MAX, out, n, err);
}

static int sq_list_chunks_below(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
				size_t *n, struct jo_err *err)
{
	return sq_list_below(m, ino, nidx, out, n, err);
}

static int sq_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload,
			  struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT inode, indx, slices FROM @chunk");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		uint64_t ino = (uint64_t)sqlite3_column_int64(st, 0);
		uint32_t indx = (uint32_t)sqlite3_column_int64(st, 1);
		const uint8_t *b = sqlite3_column_blob(st, 2);
		int n = sqlite3_column_bytes(st, 2);
		rc = check_recs(n, ino, indx, err);
		if (rc == 0)
			rc = cb(ino, indx, b, (size_t)n, payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload,
			  struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT " NODE_COLS " FROM @node");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		struct jo_attr a;
		row_attr(st, &a);
		rc = cb((uint64_t)sqlite3_column_int64(st, 0), &a, payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs,
			    bool *ex, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT refs FROM @chunk_ref WHERE chunkid=? AND size=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_int64(st, 2, size);
	rc = sq_step(m, st, err);
	if (rc == 1) {
		*refs = sqlite3_column_int64(st, 0);
		*ex = true;
		rc = 0;
	} else if (rc == 0) {
		*refs = 0;
		*ex = false;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_slice_refs(struct jo_meta *m, jo_meta_ref_cb cb, void *payload,
			      struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT chunkid, size, refs FROM @chunk_ref");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		rc = cb((uint64_t)sqlite3_column_int64(st, 0), (uint32_t)sqlite3_column_int64(st, 1),
			sqlite3_column_int64(st, 2), payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_delfiles(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload,
			    struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT inode, length, expire FROM @delfile");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		rc = cb((uint64_t)sqlite3_column_int64(st, 0), (uint64_t)sqlite3_column_int64(st, 1),
			sqlite3_column_int64(st, 2), payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_delslices(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			     struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT chunkid, deleted, slices FROM @delslices");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		const uint8_t *b = sqlite3_column_blob(st, 2);
		int n = sqlite3_column_bytes(st, 2);
		if (n % JO_DELSLICE_REC_LEN != 0) {
			rc = jo_err_set(err, JO_EPROTO, "delslices %lld: %d bytes, not a multiple of 12",
					(long long)sqlite3_column_int64(st, 0), n);
			break;
		}
		rc = cb((uint64_t)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), b,
			(size_t)n, payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			    struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT sid, expire, info FROM @session2");

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		const char *b = sqlite3_column_blob(st, 2);
		int n = sqlite3_column_bytes(st, 2);
		char *info = malloc((size_t)n + 1);
		if (!info) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		if (n > 0)
			memcpy(info, b, (size_t)n);
		info[n] = '\0';
		rc = cb((uint64_t)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), info,
			payload);
		free(info);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

static int sq_scan_pairs(struct jo_meta *m, const char *sql, int (*cb2)(uint64_t, int64_t, void *),
			 void *payload, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, sql);

	if (rc != 0)
		return rc;
	while ((rc = sq_step(m, st, err)) == 1) {
		rc = cb2((uint64_t)sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), payload);
		if (rc != 0)
			break;
	}
	sqlite3_finalize(st);
	return rc;
}

struct sustained_adapter {
	jo_meta_sustained_cb cb;
	void *payload;
};

static int sustained_cb2(uint64_t sid, int64_t ino, void *p)
{
	struct sustained_adapter *a = p;

	return a->cb(sid, (uint64_t)ino, a->payload);
}

static int sq_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			     struct jo_err *err)
{
	struct sustained_adapter a = { cb, payload };

	return sq_scan_pairs(m, "SELECT sid, inode FROM @sustained", sustained_cb2, &a, err);
}

static int sq_scan_detached(struct jo_meta *m, jo_meta_detached_cb cb, void *payload,
			    struct jo_err *err)
{
	return sq_scan_pairs(m, "SELECT inode, added FROM @detached_node", cb, payload, err);
}

static int sq_get_counter(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = sq_prep(m, &st, err, "SELECT value FROM @counter WHERE name=?");

	if (rc != 0)
		return rc;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sq_step(m, st, err);
	if (rc == 1) {
		*out = sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == 0) {
		/* Initial values written by `juicefs format`. */
		if (strcmp(name, "nextInode") == 0)
			*out = 2;
		else if (strcmp(name, "nextChunk") == 0)
			*out = 1;
		else
			*out = 0;
	}
	sqlite3_finalize(st);
	return rc;
}

const struct jo_meta_ops jo_meta_sqlite_ops = {
	.engine = "sqlite3",
	.open = sq_open,
	.close = sq_close,
	.get_setting = sq_get_setting,
	.lookup = sq_lookup,
	.getattr = sq_getattr,
	.readdir = sq_readdir,
	.read_chunk = sq_read_chunk,
	.list_chunks = sq_list_chunks,
	.list_chunks_below = sq_list_chunks_below,
	.scan_chunks = sq_scan_chunks,
	.scan_inodes = sq_scan_inodes,
	.get_slice_ref = sq_get_slice_ref,
	.scan_slice_refs = sq_scan_slice_refs,
	.scan_delfiles = sq_scan_delfiles,
	.scan_delslices = sq_scan_delslices,
	.scan_sessions = sq_scan_sessions,
	.scan_sustained = sq_scan_sustained,
	.scan_detached = sq_scan_detached,
	.get_counter = sq_get_counter,
};

struct sqlite3 *jo_meta_sqlite_db(struct jo_meta *m)
{
	return m && m->ops == &jo_meta_sqlite_ops ? SQ(m)->db : NULL;
}

const char *jo_meta_sqlite_prefix(struct jo_meta *m)
{
	return m && m->ops == &jo_meta_sqlite_ops ? SQ(m)->pfx : NULL;
}
