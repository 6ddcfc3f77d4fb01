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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/meta/meta.h"
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

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
	if (row[1] & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
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
		if (row[0] & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
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

/* Statistics (and for a parent, nlink and times) of one directory, summed
 * over a batch's restores and written once, at the end of its transaction. */
struct rs_dir {
	uint64_t ino;
	int64_t length, space, inodes, dirs;
	bool missing;       /* a parent without statistics */
};

static struct rs_dir *rs_dir_of(struct rs_dir *v, size_t *n, uint64_t ino)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].ino == ino)
			return &v[i];
	memset(&v[*n], 0, sizeof(v[*n]));
	v[*n].ino = ino;
	return &v[(*n)++];
}

static int cmp_rs_dir(const void *a, const void *b)
{
	uint64_t x = ((const struct rs_dir *)a)->ino, y = ((const struct rs_dir *)b)->ino;

	return x < y ? -1 : x > y;
}

/* The parent last read FOR UPDATE in a batch's transaction (locked: only
 * the batch itself changes it, and a restore of it drops this). */
struct rs_parent {
	uint64_t ino;
	bool valid, found;
	int64_t row[3];     /* type, flags, parent */
};

/* What a batch read ahead for one entry (its edge and node, its target name). */
struct rs_pre {
	bool valid;         /* read ahead */
	bool found;         /* the edge with its node */
	bool exists;        /* the target name is taken */
	int64_t row[5];     /* inode, type, flags, length, parent */
};

/* the drivers bind at most 16 parameters: a directory and 15 names */
#define PRE_NAMES 15

static bool same_name(const void *a, size_t al, const void *b, size_t bl)
{
	return al == bl && !memcmp(a, b, al);
}

/*
 * Read ahead for v[0..k) (one hour directory, one parent, k <= PRE_NAMES,
 * the parent already locked): their edges with their nodes (locked, as one
 * by one) and which of their target names are taken: two statements for k
 * entries instead of 2k.
 */
static int prefetch(struct jo_meta *m, const struct jo_rs_item *v, size_t k, struct rs_pre *pre,
		    struct jo_err *err)
{
	char sql[400];
	size_t len;
	int rc;

	for (int q = 0; q < 2; q++) {
		struct jo_sqls *st;

		len = (size_t)snprintf(sql, sizeof(sql), "%s",
				       q == 0 ? "SELECT e.name, e.inode, e.type, n.flags, n.length, "
						"n.parent FROM @edge e JOIN @node n ON n.inode=e.inode "
						"WHERE e.parent=? AND e.name IN ("
					      : "SELECT name FROM @edge WHERE parent=? AND name IN (");
		for (size_t i = 0; i < k; i++) {
			if (i)
				sql[len++] = ',';
			sql[len++] = '?';
		}
		sql[len++] = ')';
		if (q == 0)
			sql[len++] = '~';
		sql[len] = '\0';
		if ((rc = jo_sql_prep(m, NULL, &st, err, sql)) != 0)
			return rc;
		jo_sql_i64(m, st, 1, (int64_t)(q == 0 ? v[0].tdir : v[0].parent));
		for (size_t i = 0; i < k; i++)
			jo_sql_blob(m, st, (int)i + 2, q == 0 ? v[i].src : v[i].name,
				    q == 0 ? v[i].src_len : v[i].name_len);
		while ((rc = jo_sql_step(m, st, err)) == 1) {
			size_t nl;
			const uint8_t *name = jo_sql_col_blob(m, st, 0, &nl);

			for (size_t i = 0; i < k; i++) {
				if (q == 0 && same_name(name, nl, v[i].src, v[i].src_len)) {
					pre[i].found = true;
					for (int c = 0; c < 5; c++)
						pre[i].row[c] = jo_sql_col_i64(m, st, c + 1);
				} else if (q == 1 && same_name(name, nl, v[i].name, v[i].name_len)) {
					pre[i].exists = true;
				}
			}
		}
		jo_sql_free(m, st);
		if (rc < 0)
			return rc;
	}
	for (size_t i = 0; i < k; i++)
		pre[i].valid = true;
	return 0;
}

/* Whether q's directories to check still have the ctimes read (read
 * locked: a restore into or of one of them waits for this transaction). */
static int tree_same(struct jo_meta *m, const struct jo_rs_quota *q, bool *same,
		     struct jo_err *err)
{
	*same = true;
	for (size_t i = 0; q && i < q->ncheck && *same; i++) {
		int64_t row[3] = { 0, 0, 0 };
		bool found = false;
		int rc = run(m, "SELECT ctime, ctimensec, parent FROM @node WHERE inode=?~",
			     (const int64_t[]){ (int64_t)q->check[i] }, 1, NULL, 0, row, 3, &found, err);

		if (rc)
			return rc;
		*same = found && jo_rs_check_same(q, i, row[0] * 1000 + row[1], (uint64_t)row[2]);
	}
	return 0;
}

/* One entry's reads and its own rows (the directories' rows come at the
 * end). The parent is read (and locked) first, then the entry's edge and
 * node in one statement; the refusals are judged in juicefs's order. */
static int restore_item(struct jo_meta *m, struct jo_rs_item *it, bool dir_stats, int64_t us,
			int64_t ns, struct rs_parent *pc, const struct rs_pre *pre, bool dup,
			struct jo_err *err)
{
	struct jo_rs_res *res = &it->res;
	int64_t row[5] = { 0 }, changes = 0;
	bool found = false, node = true, dir;
	int rc;

	memset(res, 0, sizeof(*res));
	if (!pc->valid || pc->ino != it->parent) {
		pc->valid = false;
		rc = run(m, "SELECT type, flags, parent FROM @node WHERE inode=?~",
			 (const int64_t[]){ (int64_t)it->parent }, 1, NULL, 0, pc->row, 3, &pc->found,
			 err);
		if (rc)
			return rc;
		pc->ino = it->parent;
		pc->valid = true;
	}
	if (pre && pre->valid) {
		found = pre->found;
		memcpy(row, pre->row, sizeof(row));
	} else {
		rc = run(m, "SELECT e.inode, e.type, n.flags, n.length, n.parent FROM @edge e "
			 "JOIN @node n ON n.inode=e.inode WHERE e.parent=? AND e.name=?~",
			 (const int64_t[]){ (int64_t)it->tdir }, 1, it->src, it->src_len, row, 5,
			 &found, err);
	}
	if (rc == 0 && !found) {
		/* the edge alone: its inode may be gone */
		node = false;
		rc = run(m, "SELECT inode, type FROM @edge WHERE parent=? AND name=?",
			 (const int64_t[]){ (int64_t)it->tdir }, 1, it->src, it->src_len, row, 2,
			 &found, err);
	}
	if (rc || !found) {
		res->status = JO_RS_GONE;
		return rc;
	}
	res->ino = (uint64_t)row[0];
	res->type = (uint8_t)row[1];
	dir = res->type == JO_TYPE_DIR;
	if (!pc->found || pc->row[0] != JO_TYPE_DIR) {
		res->status = JO_RS_NOPARENT;
		return 0;
	}
	if ((pc->row[1] & JO_ATTR_FLAG_IMMUTABLE) || (uint64_t)pc->row[2] == res->ino ||
	    it->parent == res->ino) {
		res->status = JO_RS_PERM;
		return 0;
	}
	if (pre && pre->valid)
		found = pre->exists || dup;
	else if ((rc = run(m, "SELECT 1 FROM @edge WHERE parent=? AND name=?",
			   (const int64_t[]){ (int64_t)it->parent }, 1, it->name, it->name_len, NULL,
			   0, &found, err)) != 0)
		return rc;
	if (found) {
		res->status = JO_RS_EXISTS;
		return 0;
	}
	if (!node) {
		res->status = JO_RS_GONE;
		return 0;
	}
	if (row[2] & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
		res->status = JO_RS_PERM;
		return 0;
	}
	if ((rc = tree_same(m, it->quota, &found, err)) != 0)
		return rc;
	if (!found) {
		res->status = JO_RS_CHANGED;
		return 0;
	}
	/* row[1..2] as the entry's node read them: flags, length, parent */
	row[1] = row[3];
	row[2] = row[4];
	if (pc->ino == res->ino)
		pc->valid = false; /* its parent column changes below */
	res->length = res->type == JO_TYPE_FILE ? (uint64_t)row[1] : 0;
	rc = jo_sql_run(m, NULL, "DELETE FROM @edge WHERE parent=? AND name=?",
			(const int64_t[]){ (int64_t)it->tdir }, 1, it->src, it->src_len, NULL, 0, NULL,
			&changes, err);
	if (rc == 0 && changes != 1) {
		res->status = JO_RS_GONE; /* removed meanwhile (MySQL's snapshot read): nothing written */
		return 0;
	}
	if (rc == 0)
		rc = jo_sql_run(m, NULL, "INSERT INTO @edge (parent, inode, type, name) VALUES (?, ?, ?, ?)",
				(const int64_t[]){ (int64_t)it->parent, (int64_t)res->ino, res->type },
				3, it->name, it->name_len, NULL, 0, NULL, NULL, err);
	/* a hard link (parent 0) keeps 0: its links are its edges */
	if (rc == 0)
		rc = RUN("UPDATE @node SET ctime=?, ctimensec=?, parent=? WHERE inode=?", us, ns,
			 dir || row[2] > 0 ? (int64_t)it->parent : 0, (int64_t)res->ino);
	if (rc == 0 && dir_stats && dir) {
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
	if (rc == 0)
		res->status = JO_RS_DONE;
	return rc;
}

/*
 * The batch in one transaction: each entry's reads and rows in order, then
 * the hour directories' statistics and the parents' nlink, times and
 * statistics once each, then the quotas' usage (jfs_dir_quota) once each,
 * in inode order. Those rows are the ones concurrent workers share (every
 * restore of an hour writes its statistics): written last, their locks are
 * held for the commit only, not for the whole batch. qd has room for every
 * v[].quota's directories.
 */
static int restore_many_once(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			     struct rs_dir *src, struct rs_dir *dst, struct rs_dir *qd,
			     struct rs_pre *pre, struct jo_err *err)
{
	int64_t now = now_ns(), us = now / 1000, ns = now % 1000, changes = 0;
	struct rs_parent pc = { 0 };
	size_t nsrc = 0, ndst = 0, nqd = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		v[i].ran = false;
		v[i].dst_stat_missing = false;
	}
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	memset(pre, 0, n * sizeof(*pre));
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct rs_dir *s, *d;
		int64_t l, sp, qs, qi;
		bool dup = false;

		if (!pre[i].valid && i + 1 < n && v[i + 1].tdir == v[i].tdir &&
		    v[i + 1].parent == v[i].parent) {
			/* a run of one hour and one parent: the parent locked first */
			size_t k = 1;

			while (i + k < n && k < PRE_NAMES && v[i + k].tdir == v[i].tdir &&
			       v[i + k].parent == v[i].parent)
				k++;
			if (!pc.valid || pc.ino != v[i].parent) {
				pc.valid = false;
				rc = run(m, "SELECT type, flags, parent FROM @node WHERE inode=?~",
					 (const int64_t[]){ (int64_t)v[i].parent }, 1, NULL, 0, pc.row,
					 3, &pc.found, err);
				pc.ino = v[i].parent;
				pc.valid = rc == 0;
			}
			if (rc == 0)
				rc = prefetch(m, &v[i], k, &pre[i], err);
			if (rc)
				break;
		}
		/* a name this batch has put there since it was read ahead */
		for (size_t j = 0; pre[i].valid && j < i && !dup; j++)
			dup = v[j].res.status == JO_RS_DONE && v[j].parent == v[i].parent &&
			      same_name(v[j].name, v[j].name_len, v[i].name, v[i].name_len);
		if ((rc = restore_item(m, &v[i], dir_stats, us, ns, &pc, &pre[i], dup, err)) != 0 ||
		    v[i].res.status != JO_RS_DONE)
			continue;
		l = (int64_t)v[i].res.length;
		sp = jo_align4k(v[i].res.length);
		s = rs_dir_of(src, &nsrc, v[i].tdir);
		d = rs_dir_of(dst, &ndst, v[i].parent);
		s->length += l, s->space += sp, s->inodes++;
		d->length += l, d->space += sp, d->inodes++;
		d->dirs += v[i].res.type == JO_TYPE_DIR;
		jo_rs_quota_delta(v[i].quota, &v[i].res, &qs, &qi);
		for (size_t j = 0; qi && j < v[i].quota->ndirs; j++) {
			struct rs_dir *q = rs_dir_of(qd, &nqd, v[i].quota->dirs[j]);

			q->space += qs, q->inodes += qi;
		}
	}
	qsort(src, nsrc, sizeof(*src), cmp_rs_dir);
	qsort(dst, ndst, sizeof(*dst), cmp_rs_dir);
	qsort(qd, nqd, sizeof(*qd), cmp_rs_dir);
	for (size_t i = 0; i < ndst && rc == 0; i++)
		rc = RUN("UPDATE @node SET nlink=nlink+?, mtime=?, ctime=?, mtimensec=?, ctimensec=? "
			 "WHERE inode=?", dst[i].dirs, us, us, ns, ns, (int64_t)dst[i].ino);
	for (size_t i = 0; i < nsrc && rc == 0 && dir_stats; i++)
		rc = RUN("UPDATE @dir_stats SET data_length=data_length-?, used_space=used_space-?, "
			 "used_inodes=used_inodes-? WHERE inode=?", src[i].length, src[i].space,
			 src[i].inodes, (int64_t)src[i].ino);
	for (size_t i = 0; i < ndst && rc == 0 && dir_stats; i++) {
		rc = jo_sql_run(m, NULL, "UPDATE @dir_stats SET data_length=data_length+?, "
				"used_space=used_space+?, used_inodes=used_inodes+? WHERE inode=?",
				(const int64_t[]){ dst[i].length, dst[i].space, dst[i].inodes,
						   (int64_t)dst[i].ino }, 4, NULL, 0, NULL, 0, NULL,
				&changes, err);
		dst[i].missing = rc == 0 && changes == 0;
	}
	/* a quota removed since the caller's walk has no row: nothing charged */
	for (size_t i = 0; i < nqd && rc == 0; i++)
		rc = RUN("UPDATE @dir_quota SET used_space=used_space+?, used_inodes=used_inodes+? "
			 "WHERE inode=?", qd[i].space, qd[i].inodes, (int64_t)qd[i].ino);
	if (rc) {
		jo_sql_rollback(m);
		return rc;
	}
	if ((rc = jo_sql_commit(m, err)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		v[i].ran = true;
		if (v[i].res.status == JO_RS_DONE)
			for (size_t j = 0; j < ndst; j++)
				if (dst[j].ino == v[i].parent)
					v[i].dst_stat_missing = dst[j].missing;
	}
	return 0;
}

int jo_sql_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err)
{
	struct rs_dir *src = calloc(n ? n : 1, sizeof(*src)), *dst = calloc(n ? n : 1, sizeof(*dst));
	struct rs_pre *pre = calloc(n ? n : 1, sizeof(*pre));
	struct rs_dir *qd;
	size_t nq = 1;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		nq += v[i].quota ? v[i].quota->ndirs : 0;
	qd = calloc(nq, sizeof(*qd));
	if (!src || !dst || !pre || !qd) {
		free(src);
		free(dst);
		free(pre);
		free(qd);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (int attempt = 0;; attempt++) {
		rc = restore_many_once(m, v, n, dir_stats, src, dst, qd, pre, err);
		if (!try_again(m, rc, attempt))
			break;
	}
	free(src);
	free(dst);
	free(pre);
	free(qd);
	return rc;
}

int jo_sql_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen, uint64_t parent,
		   const char *name, size_t nlen, bool dir_stats, const struct jo_rs_quota *quota,
		   struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err)
{
	struct jo_rs_item it = { .tdir = tdir, .parent = parent, .src = src, .name = name,
				 .src_len = slen, .name_len = nlen, .quota = quota };
	int rc = jo_sql_restore_many(m, &it, 1, dir_stats, err);

	*res = it.res;
	*dst_stat_missing = it.dst_stat_missing;
	return rc;
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
