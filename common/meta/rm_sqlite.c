/*
 * rm_sqlite.c: unlink and rmdir of trash entries on SQLite, as JuiceFS's
 * doUnlink/doRmdir (pkg/meta/sql.go) run them when the trash is skipped and
 * the caller is root: the same rows read and written, in one transaction
 * (BEGIN IMMEDIATE). JuiceFS batches the usedSpace/totalInodes counters and
 * the directory statistics in memory and flushes them within a second;
 * here they are part of the same transaction, so a crash cannot lose them.
 */
#include "common/meta/meta_mut.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/meta/engine_internal.h"
#include "common/meta/meta.h"
#include "common/meta/meta_internal.h"

#define FLAG_IMMUTABLE 1
#define FLAG_APPEND 2

/*
 * Run one statement: its '?' take the n integers of v in order, then the
 * entry name as a blob when name is not NULL. *row (may be NULL) gets up to
 * ncol integer columns of the first row; *found whether there was one.
 */
static int run(struct jo_meta *m, const char *sql, const int64_t *v, int n, const char *name,
	       size_t nlen, int64_t *row, int ncol, bool *found, struct jo_err *err)
{
	sqlite3_stmt *st;
	int rc = jo_sq_prep(m, NULL, &st, err, sql);
	int s;

	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(st, i + 1, (sqlite3_int64)v[i]);
	if (name)
		sqlite3_bind_blob(st, n + 1, name, (int)nlen, SQLITE_STATIC);
	s = sqlite3_step(st);
	if (found)
		*found = s == SQLITE_ROW;
	if (s == SQLITE_ROW) {
		for (int i = 0; i < ncol && row; i++)
			row[i] = (int64_t)sqlite3_column_int64(st, i);
	} else if (s != SQLITE_DONE) {
		rc = jo_sq_fail(m, err, sql);
	}
	sqlite3_finalize(st);
	return rc;
}

#define RUN(sql, ...) run(m, sql, (const int64_t[]){ __VA_ARGS__ }, \
			  (int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), \
			  NULL, 0, NULL, 0, NULL, err)

/* The parent directory and the entry: shared start of both operations. */
static int look(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen, bool dir,
		struct jo_rm_res *res, struct jo_err *err)
{
	int64_t row[2] = { 0, 0 };
	bool found = false;
	int rc;

	rc = run(m, "SELECT type, flags FROM @node WHERE inode=?", (const int64_t[]){ (int64_t)parent },
		 1, NULL, 0, row, 2, &found, err);
	if (rc)
		return rc;
	if (!found) {
		res->status = JO_RM_GONE;
		return 0;
	}
	if (row[0] != JO_TYPE_DIR) {
		res->status = JO_RM_WRONGTYPE;
		return 0;
	}
	if (row[1] & (FLAG_IMMUTABLE | FLAG_APPEND)) {
		res->status = JO_RM_PERM;
		return 0;
	}
	rc = run(m, "SELECT inode, type FROM @edge WHERE parent=? AND name=?",
		 (const int64_t[]){ (int64_t)parent }, 1, name, nlen, row, 2, &found, err);
	if (rc)
		return rc;
	if (!found) {
		res->status = JO_RM_GONE;
		return 0;
	}
	res->ino = (uint64_t)row[0];
	res->type = (uint8_t)row[1];
	if ((res->type == JO_TYPE_DIR) != dir)
		res->status = JO_RM_WRONGTYPE;
	return 0;
}

/* usedSpace/totalInodes (doFlushStats) and the parent's statistics
 * (doUpdateDirStat: only a row that exists is updated). */
static int account(struct jo_meta *m, int64_t freed_space, uint64_t parent, bool dir_stats,
		   int64_t length, struct jo_err *err)
{
	int rc = 0;

	if (freed_space)
		rc = RUN("UPDATE @counter SET value=value+? WHERE name='usedSpace'", -freed_space);
	if (rc == 0 && freed_space)
		rc = RUN("UPDATE @counter SET value=value+? WHERE name='totalInodes'", -1);
	if (rc == 0 && dir_stats)
		rc = RUN("UPDATE @dir_stats SET data_length=data_length-?, used_space=used_space-?, "
			 "used_inodes=used_inodes-1 WHERE inode=?", length,
			 jo_align4k((uint64_t)length), (int64_t)parent);
	return rc;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int jo_meta_sqlite_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			  bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int64_t row[4] = { 0, 0, 0, 0 }, now = now_ns();
	int64_t us = now / 1000, ns = now % 1000, space = 0;
	bool found = false;
	uint64_t ino;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = jo_sq_begin(m, err)) != 0)
		return rc;
	if ((rc = look(m, parent, name, nlen, false, res, err)) != 0 || res->status != JO_RM_DONE)
		goto out;
	ino = res->ino;
	rc = run(m, "SELECT flags, nlink, length, parent FROM @node WHERE inode=?",
		 (const int64_t[]){ (int64_t)ino }, 1, NULL, 0, row, 4, &found, err);
	if (rc)
		goto out;
	if (found) {
		if (row[0] & (FLAG_IMMUTABLE | FLAG_APPEND)) {
			res->status = JO_RM_PERM;
			goto out;
		}
		if (row[1] <= 0) {
			res->status = JO_RM_PERM;
			rc = jo_err_set(err, JO_EPROTO, "inode %" PRIu64 " has nlink %" PRId64
					" but an entry: left alone", ino, row[1]);
			goto out;
		}
		res->nlink = (uint32_t)(row[1] - 1);
		res->length = (uint64_t)row[2];
	}
	/* no node: JuiceFS warns and drops the entry (and what the inode had) */
	rc = run(m, "DELETE FROM @edge WHERE parent=? AND name=?", (const int64_t[]){ (int64_t)parent },
		 1, name, nlen, NULL, 0, NULL, err);
	if (rc)
		goto out;
	if (found && res->nlink > 0) {
		rc = RUN("UPDATE @node SET nlink=?, ctime=?, ctimensec=? WHERE inode=?",
			 (int64_t)res->nlink, us, ns, (int64_t)ino);
	} else {
		space = 4096;
		if (res->type == JO_TYPE_FILE) {
			space = jo_align4k(res->length);
			rc = RUN("INSERT INTO @delfile (inode, length, expire) VALUES (?, ?, ?)",
				 (int64_t)ino, (int64_t)res->length, now / 1000000000);
			res->delfile = rc == 0;
		} else if (res->type == JO_TYPE_SYMLINK) {
			rc = RUN("DELETE FROM @symlink WHERE inode=?", (int64_t)ino);
		}
		if (rc == 0)
			rc = RUN("DELETE FROM @node WHERE inode=?", (int64_t)ino);
		if (rc == 0)
			rc = RUN("DELETE FROM @xattr WHERE inode=?", (int64_t)ino);
	}
	if (rc == 0 && !jo_ino_is_trash(parent))
		rc = RUN("UPDATE @node SET mtime=?, ctime=?, mtimensec=?, ctimensec=? WHERE inode=?",
			 us, us, ns, ns, (int64_t)parent);
	if (rc == 0)
		rc = account(m, space, parent, dir_stats,
			     res->type == JO_TYPE_FILE ? (int64_t)res->length : 0, err);
out:
	if (rc || res->status != JO_RM_DONE) {
		jo_sq_rollback(m);
		res->delfile = false;
		return rc;
	}
	return jo_sq_commit(m, err);
}

int jo_meta_sqlite_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
			 bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int64_t now = now_ns(), us = now / 1000, ns = now % 1000;
	bool found = false;
	uint64_t ino;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = jo_sq_begin(m, err)) != 0)
		return rc;
	if ((rc = look(m, parent, name, nlen, true, res, err)) != 0 || res->status != JO_RM_DONE)
		goto out;
	ino = res->ino;
	rc = run(m, "SELECT 1 FROM @edge WHERE parent=? LIMIT 1", (const int64_t[]){ (int64_t)ino }, 1,
		 NULL, 0, NULL, 0, &found, err);
	if (rc)
		goto out;
	if (found) {
		res->status = JO_RM_NOTEMPTY;
		goto out;
	}
	rc = run(m, "DELETE FROM @edge WHERE parent=? AND name=?", (const int64_t[]){ (int64_t)parent },
		 1, name, nlen, NULL, 0, NULL, err);
	if (rc == 0)
		rc = RUN("DELETE FROM @dir_stats WHERE inode=?", (int64_t)ino);
	if (rc == 0)
		rc = RUN("DELETE FROM @dir_quota WHERE inode=?", (int64_t)ino);
	if (rc == 0)
		rc = RUN("DELETE FROM @node WHERE inode=?", (int64_t)ino);
	if (rc == 0)
		rc = RUN("DELETE FROM @xattr WHERE inode=?", (int64_t)ino);
	if (rc == 0 && !jo_ino_is_trash(parent))
		rc = RUN("UPDATE @node SET nlink=nlink-1, mtime=?, ctime=?, mtimensec=?, ctimensec=? "
			 "WHERE inode=?", us, us, ns, ns, (int64_t)parent);
	if (rc == 0)
		rc = account(m, 4096, parent, dir_stats && parent != JO_TRASH_INODE, 0, err);
out:
	if (rc || res->status != JO_RM_DONE) {
		jo_sq_rollback(m);
		return rc;
	}
	return jo_sq_commit(m, err);
}
