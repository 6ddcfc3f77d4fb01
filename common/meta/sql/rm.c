/*
 * sql/rm.c: unlink and rmdir of trash entries in the sql family, as
 * juicefs's doUnlink/doRmdir (pkg/meta/sql.go) run them when the trash is
 * skipped and the caller is root: the same rows read and written, the
 * entry's node read FOR UPDATE, in one transaction that is tried again on a
 * lock conflict. JuiceFS batches the usedSpace/totalInodes counters and the
 * directory statistics in memory and flushes them within a second; here
 * they are part of the same transaction, so a crash cannot lose them.
 */
#include "common/meta/meta_mut.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/meta/meta.h"
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

#define FLAG_IMMUTABLE 1
#define FLAG_APPEND 2

static int run(struct jo_meta *m, const char *sql, const int64_t *v, int n, const char *name,
	       size_t nlen, int64_t *row, int ncol, bool *found, struct jo_err *err)
{
	return jo_sql_run(m, NULL, sql, v, n, name, nlen, row, ncol, found, NULL, err);
}

#define RUN(sql, ...) JO_SQL_RUN(m, err, sql, __VA_ARGS__)

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

/*
 * Delete the entry itself. Under MySQL's REPEATABLE READ the entry was read
 * from the transaction's snapshot: a delete that matches no row means a
 * client removed it meanwhile, so nothing else may change.
 */
static int drop_entry(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		      struct jo_rm_res *res, struct jo_err *err)
{
	int64_t changes = 0;
	int rc = jo_sql_run(m, NULL, "DELETE FROM @edge WHERE parent=? AND name=?",
			    (const int64_t[]){ (int64_t)parent }, 1, name, nlen, NULL, 0, NULL,
			    &changes, err);

	if (rc == 0 && changes == 0)
		res->status = JO_RM_GONE;
	return rc;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Start the transaction of an unlink or rmdir and look the entry up: 0 with
 * res->status JO_RM_DONE where the removal goes on; otherwise the
 * transaction is rolled back (or was never begun).
 */
static int rm_start(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen, bool dir,
		    struct jo_rm_res *res, struct jo_err *err)
{
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	rc = look(m, parent, name, nlen, dir, res, err);
	if (rc || res->status != JO_RM_DONE)
		jo_sql_rollback(m);
	return rc;
}

/* End an unlink or rmdir: commit where it went through, roll back (and
 * report no delfile) otherwise. */
static int rm_end(struct jo_meta *m, int rc, struct jo_rm_res *res, struct jo_err *err)
{
	if (rc || res->status != JO_RM_DONE) {
		jo_sql_rollback(m);
		res->delfile = false;
		return rc;
	}
	return jo_sql_commit(m, err);
}

/* Is a failed attempt worth another: a conflict, not a malformed record,
 * with tries left? */
static bool try_again(struct jo_meta *m, int rc, int attempt)
{
	return rc < 0 && rc != JO_EPROTO && attempt + 1 < JO_SQL_TXN_TRIES &&
	       jo_sql_retry(m, attempt);
}

static int unlink_once(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		       bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int64_t row[4] = { 0, 0, 0, 0 }, now = now_ns();
	int64_t us = now / 1000, ns = now % 1000, space = 0;
	bool found = false;
	uint64_t ino;
	int rc;

	if ((rc = rm_start(m, parent, name, nlen, false, res, err)) != 0 ||
	    res->status != JO_RM_DONE)
		return rc;
	ino = res->ino;
	rc = run(m, "SELECT flags, nlink, length, parent FROM @node WHERE inode=?~",
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
	if ((rc = drop_entry(m, parent, name, nlen, res, err)) != 0 || res->status != JO_RM_DONE)
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
	return rm_end(m, rc, res, err);
}

static int rmdir_once(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		      bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	int64_t now = now_ns(), us = now / 1000, ns = now % 1000;
	bool found = false;
	uint64_t ino;
	int rc;

	if ((rc = rm_start(m, parent, name, nlen, true, res, err)) != 0 ||
	    res->status != JO_RM_DONE)
		return rc;
	ino = res->ino;
	/* the directory's node is locked before its emptiness is checked */
	rc = run(m, "SELECT 1 FROM @node WHERE inode=?~", (const int64_t[]){ (int64_t)ino }, 1,
		 NULL, 0, NULL, 0, NULL, err);
	if (rc == 0)
		rc = run(m, "SELECT 1 FROM @edge WHERE parent=? LIMIT 1",
			 (const int64_t[]){ (int64_t)ino }, 1, NULL, 0, NULL, 0, &found, err);
	if (rc)
		goto out;
	if (found) {
		res->status = JO_RM_NOTEMPTY;
		goto out;
	}
	if ((rc = drop_entry(m, parent, name, nlen, res, err)) != 0 || res->status != JO_RM_DONE)
		goto out;
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
	return rm_end(m, rc, res, err);
}

int jo_sql_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		  bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = unlink_once(m, parent, name, nlen, dir_stats, res, err);

		if (!try_again(m, rc, attempt))
			return rc;
	}
}

int jo_sql_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		 bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = rmdir_once(m, parent, name, nlen, dir_stats, res, err);

		if (!try_again(m, rc, attempt))
			return rc;
	}
}

/* ---- restore (doRename with RenameNoReplace|RenameRestore, as root) ---- */

static int restore_once(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen,
			uint64_t parent, const char *name, size_t nlen, bool dir_stats,
			struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err)
{
	int64_t now = now_ns(), us = now / 1000, ns = now % 1000, row[4] = { 0 }, changes = 0;
	bool found = false, dir;
	int rc;

	memset(res, 0, sizeof(*res));
	*dst_stat_missing = false;
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	rc = run(m, "SELECT inode, type FROM @edge WHERE parent=? AND name=?",
		 (const int64_t[]){ (int64_t)tdir }, 1, src, slen, row, 2, &found, err);
	if (rc || !found) {
		res->status = JO_RS_GONE;
		goto out;
	}
	res->ino = (uint64_t)row[0];
	res->type = (uint8_t)row[1];
	dir = res->type == JO_TYPE_DIR;
	rc = run(m, "SELECT type, flags, parent FROM @node WHERE inode=?~",
		 (const int64_t[]){ (int64_t)parent }, 1, NULL, 0, row, 3, &found, err);
	if (rc)
		goto out;
	if (!found || row[0] != JO_TYPE_DIR) {
		res->status = JO_RS_NOPARENT;
		goto out;
	}
	if ((row[1] & FLAG_IMMUTABLE) || (uint64_t)row[2] == res->ino || parent == res->ino) {
		res->status = JO_RS_PERM;
		goto out;
	}
	rc = run(m, "SELECT 1 FROM @edge WHERE parent=? AND name=?",
		 (const int64_t[]){ (int64_t)parent }, 1, name, nlen, NULL, 0, &found, err);
	if (rc)
		goto out;
	if (found) {
		res->status = JO_RS_EXISTS;
		goto out;
	}
	rc = run(m, "SELECT flags, length, parent FROM @node WHERE inode=?~",
		 (const int64_t[]){ (int64_t)res->ino }, 1, NULL, 0, row, 3, &found, err);
	if (rc)
		goto out;
	if (!found) {
		res->status = JO_RS_GONE;
		goto out;
	}
	if (row[0] & (FLAG_IMMUTABLE | FLAG_APPEND)) {
		res->status = JO_RS_PERM;
		goto out;
	}
	res->length = res->type == JO_TYPE_FILE ? (uint64_t)row[1] : 0;
	rc = jo_sql_run(m, NULL, "DELETE FROM @edge WHERE parent=? AND name=?",
			(const int64_t[]){ (int64_t)tdir }, 1, src, slen, NULL, 0, NULL, &changes, err);
	if (rc == 0 && changes != 1) {
		res->status = JO_RS_GONE; /* removed meanwhile (MySQL's snapshot read) */
		goto out;
	}
	if (rc == 0)
		rc = jo_sql_run(m, NULL, "INSERT INTO @edge (parent, inode, type, name) VALUES (?, ?, ?, ?)",
				(const int64_t[]){ (int64_t)parent, (int64_t)res->ino, res->type }, 3,
				name, nlen, NULL, 0, NULL, NULL, err);
	/* a hard link (parent 0) keeps 0: its links are its edges */
	if (rc == 0)
		rc = RUN("UPDATE @node SET ctime=?, ctimensec=?, parent=? WHERE inode=?", us, ns,
			 dir || row[2] > 0 ? (int64_t)parent : 0, (int64_t)res->ino);
	if (rc == 0)
		rc = RUN("UPDATE @node SET nlink=nlink+?, mtime=?, ctime=?, mtimensec=?, ctimensec=? "
			 "WHERE inode=?", (int64_t)dir, us, us, ns, ns, (int64_t)parent);
	if (rc == 0 && dir_stats) {
		int64_t l = (int64_t)res->length, sp = jo_align4k(res->length);

		rc = RUN("UPDATE @dir_stats SET data_length=data_length-?, used_space=used_space-?, "
			 "used_inodes=used_inodes-1 WHERE inode=?", l, sp, (int64_t)tdir);
		if (rc == 0)
			rc = jo_sql_run(m, NULL, "UPDATE @dir_stats SET data_length=data_length+?, "
					"used_space=used_space+?, used_inodes=used_inodes+1 WHERE inode=?",
					(const int64_t[]){ l, sp, (int64_t)parent }, 3, NULL, 0, NULL, 0,
					NULL, &changes, err);
		*dst_stat_missing = rc == 0 && changes == 0;
		if (rc == 0 && dir) {
			bool has_stat = false, has_child = false;

			rc = run(m, "SELECT 1 FROM @dir_stats WHERE inode=?",
				 (const int64_t[]){ (int64_t)res->ino }, 1, NULL, 0, NULL, 0, &has_stat, err);
			if (rc == 0 && !has_stat)
				rc = run(m, "SELECT 1 FROM @edge WHERE parent=? LIMIT 1",
					 (const int64_t[]){ (int64_t)res->ino }, 1, NULL, 0, NULL, 0,
					 &has_child, err);
			if (rc == 0 && !has_stat && !has_child)
				rc = RUN("INSERT INTO @dir_stats (inode, data_length, used_space, used_inodes) "
					 "VALUES (?, 0, 0, 0)", (int64_t)res->ino);
		}
	}
out:
	if (rc || res->status != JO_RS_DONE) {
		jo_sql_rollback(m);
		*dst_stat_missing = false;
		return rc;
	}
	return jo_sql_commit(m, err);
}

int jo_sql_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen, uint64_t parent,
		   const char *name, size_t nlen, bool dir_stats, struct jo_rs_res *res,
		   bool *dst_stat_missing, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = restore_once(m, tdir, src, slen, parent, name, nlen, dir_stats, res,
				      dst_stat_missing, err);

		if (!try_again(m, rc, attempt))
			return rc;
	}
}

int jo_sql_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length, int64_t space,
			 int64_t inodes, bool *written, struct jo_err *err)
{
	bool found = false;
	int rc;

	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	rc = run(m, "SELECT 1 FROM @dir_stats WHERE inode=?~", (const int64_t[]){ (int64_t)ino }, 1,
		 NULL, 0, NULL, 0, &found, err);
	if (rc == 0 && !found)
		rc = RUN("INSERT INTO @dir_stats (inode, data_length, used_space, used_inodes) "
			 "VALUES (?, ?, ?, ?)", (int64_t)ino, length, space, inodes);
	if (rc) {
		jo_sql_rollback(m);
		return rc;
	}
	*written = !found;
	return jo_sql_commit(m, err);
}

int jo_sql_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space, int64_t inodes,
			 bool *had, struct jo_err *err)
{
	int64_t changes = 0;
	int rc = jo_sql_run(m, NULL, "UPDATE @dir_quota SET used_space=used_space+?, "
			    "used_inodes=used_inodes+? WHERE inode=?",
			    (const int64_t[]){ space, inodes, (int64_t)ino }, 3, NULL, 0, NULL, 0, NULL,
			    &changes, err);

	*had = rc == 0 && changes > 0;
	return rc;
}
