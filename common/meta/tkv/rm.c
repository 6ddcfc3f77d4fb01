/*
 * tkv/rm.c: unlink and rmdir of trash entries in the tkv family, as juicefs's
 * doUnlink/doRmdir (pkg/meta/tkv.go) run them when the trash is skipped and
 * the caller is root: the same keys read and written in one transaction,
 * tried again while another writer changes one of them. juicefs adds the
 * usedSpace/totalInodes deltas and the directory statistics a second later
 * in transactions of their own; here they are part of the same transaction,
 * so a crash cannot lose them.
 *
 * Attributes are patched in place (nlink, ctime, mtime at their offsets of
 * the binary attr, spec §3.3), so fields this code does not know are
 * written back unchanged.
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
#include "common/meta/tkv/internal.h"

struct rm {
	uint64_t parent;
	const char *name;
	size_t nlen;
	bool dir;
	bool dir_stats;
	struct jo_rm_res *res;
	struct timespec now;
};

/* A directory's statistics (doUpdateDirStat: only a key that exists is
 * updated); *have (may be NULL) whether it exists. */
static int stat_add(struct jo_tx *tx, uint64_t dir, int64_t length, int64_t space, int64_t inodes,
		    bool *have, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_key_init(&k, tx->m);
	jo_key_ch(&k, 'U');
	jo_key_le64(&k, dir);
	if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
		return rc;
	if (have)
		*have = v && vl == 24;
	if (v && vl == 24) {
		jo_put_be64(v, jo_be64(v) + (uint64_t)length);
		jo_put_be64(v + 8, jo_be64(v + 8) + (uint64_t)space);
		jo_put_be64(v + 16, jo_be64(v + 16) + (uint64_t)inodes);
		rc = jo_tx_put(tx, &k, v, 24, err);
	}
	free(v);
	return rc;
}

/* usedSpace/totalInodes (doFlushStats) and the parent's statistics. */
static int account(struct jo_tx *tx, int64_t freed, uint64_t parent, bool dir_stats,
		   int64_t length, struct jo_err *err)
{
	struct jo_key k;
	int rc;

	jo_tkv_counter_key(&k, tx->m, "usedSpace");
	if ((rc = jo_tx_incr(tx, &k, -freed, NULL, err)) != 0)
		return rc;
	jo_tkv_counter_key(&k, tx->m, "totalInodes");
	if ((rc = jo_tx_incr(tx, &k, -1, NULL, err)) != 0)
		return rc;
	if (!dir_stats)
		return 0;
	return stat_add(tx, parent, -length, -freed, -1, NULL, err);
}

/*
 * The common start: the entry, and the parent's attr (a directory without
 * the append/immutable flags). Returns > 0 with res->status set when there
 * is nothing to do; *pattr is then NULL.
 */
static int look(struct jo_tx *tx, struct rm *r, uint8_t **pattr, size_t *plen, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *e;
	size_t el;
	int rc;

	memset(r->res, 0, sizeof(*r->res));
	*pattr = NULL;
	jo_tkv_entry_key(&k, tx->m, r->parent, r->name, r->nlen);
	if ((rc = jo_tx_get(tx, &k, &e, &el, err)) != 0)
		return rc;
	if (!e) {
		r->res->status = JO_RM_GONE;
		return 1;
	}
	if (el < 9) {
		free(e);
		return jo_err_set(err, JO_EPROTO, "entry %.*s of directory %" PRIu64 " is malformed: "
				  "left alone", (int)(r->nlen > 80 ? 80 : r->nlen), r->name, r->parent);
	}
	r->res->type = e[0];
	r->res->ino = jo_be64(e + 1);
	free(e);
	if ((r->res->type == JO_TYPE_DIR) != r->dir) {
		r->res->status = JO_RM_WRONGTYPE;
		return 1;
	}
	jo_tkv_attr_key(&k, tx->m, r->parent);
	if ((rc = jo_tx_get(tx, &k, pattr, plen, err)) != 0)
		return rc;
	if (!*pattr) {
		r->res->status = JO_RM_GONE;
		return 1;
	}
	if (*plen < JO_ATTR_PARENT_OFF || ((*pattr)[1] >> 4) != JO_TYPE_DIR ||
	    ((*pattr)[0] & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND))) {
		r->res->status = *plen < JO_ATTR_PARENT_OFF || ((*pattr)[1] >> 4) != JO_TYPE_DIR ?
				 JO_RM_WRONGTYPE : JO_RM_PERM;
		free(*pattr);
		*pattr = NULL;
		return 1;
	}
	return 0;
}

/* Delete the inode's attribute and its extended attributes. */
static int del_inode(struct jo_tx *tx, uint64_t ino, struct jo_err *err)
{
	struct jo_key k;
	int rc;

	jo_tkv_attr_key(&k, tx->m, ino);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		return rc;
	jo_tkv_inode_key(&k, tx->m, ino, 'X');
	return jo_tx_del_prefix(tx, &k, err);
}

static int unlink_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct rm *r = p;
	struct jo_rm_res *res = r->res;
	uint8_t *pattr = NULL, *attr = NULL;
	size_t plen, alen = 0;
	struct jo_attr a = { 0 };
	struct jo_key k;
	int64_t space = 0;
	bool have = false;
	int rc;

	if ((rc = look(tx, r, &pattr, &plen, err)) != 0)
		return rc;
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_get(tx, &k, &attr, &alen, err)) != 0)
		goto out;
	if (attr) {
		if ((rc = jo_meta_decode_attr(attr, alen, &a, err)) != 0)
			goto out;
		have = true;
		if (a.flags & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
			res->status = JO_RM_PERM;
			rc = 1;
			goto out;
		}
		if (a.nlink == 0) {
			res->status = JO_RM_PERM;
			rc = jo_err_set(err, JO_EPROTO, "inode %" PRIu64 " has nlink 0 but an entry: "
					"left alone", res->ino);
			goto out;
		}
		a.nlink--;
		jo_put_be32(attr + JO_ATTR_NLINK_OFF, a.nlink);
		jo_attr_stamp(attr, JO_ATTR_CTIME_OFF, &r->now);
		res->nlink = a.nlink;
		res->length = a.length;
	}
	/* no attr: juicefs warns and drops the entry (and what the inode had) */
	jo_tkv_entry_key(&k, tx->m, r->parent, r->name, r->nlen);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	if (!jo_ino_is_trash(r->parent)) {
		jo_attr_stamp(pattr, JO_ATTR_MTIME_OFF, &r->now);
		jo_attr_stamp(pattr, JO_ATTR_CTIME_OFF, &r->now);
		jo_tkv_attr_key(&k, tx->m, r->parent);
		if ((rc = jo_tx_put(tx, &k, pattr, plen, err)) != 0)
			goto out;
	}
	if (have && a.nlink > 0) {
		jo_tkv_attr_key(&k, tx->m, res->ino);
		if ((rc = jo_tx_put(tx, &k, attr, alen, err)) != 0)
			goto out;
		if (a.parent == 0) {
			/* a hard link: one link fewer from this parent */
			jo_tkv_inode_key(&k, tx->m, res->ino, 'P');
			jo_key_le64(&k, r->parent);
			rc = jo_tx_incr(tx, &k, -1, NULL, err);
		}
		goto out;
	}
	space = 4096;
	if (res->type == JO_TYPE_FILE) {
		uint8_t ts[8];

		space = jo_align4k(a.length);
		jo_put_be64(ts, (uint64_t)r->now.tv_sec);
		jo_tkv_delfile_key(&k, tx->m, res->ino, a.length);
		if ((rc = jo_tx_put(tx, &k, ts, 8, err)) != 0)
			goto out;
		res->delfile = true;
	} else if (res->type == JO_TYPE_SYMLINK) {
		jo_tkv_inode_key(&k, tx->m, res->ino, 'S');
		if ((rc = jo_tx_del(tx, &k, err)) != 0)
			goto out;
	}
	if ((rc = del_inode(tx, res->ino, err)) != 0)
		goto out;
	if (have && a.parent == 0) {
		jo_tkv_inode_key(&k, tx->m, res->ino, 'P');
		if ((rc = jo_tx_del_prefix(tx, &k, err)) != 0)
			goto out;
	}
	rc = account(tx, space, r->parent, r->dir_stats,
		     res->type == JO_TYPE_FILE ? (int64_t)a.length : 0, err);
out:
	free(pattr);
	free(attr);
	if (rc)
		res->delfile = false;
	return rc;
}

static int rmdir_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct rm *r = p;
	struct jo_rm_res *res = r->res;
	uint8_t *pattr = NULL, *q = NULL;
	size_t plen, ql;
	struct jo_key k;
	bool full = false;
	int rc;

	if ((rc = look(tx, r, &pattr, &plen, err)) != 0)
		return rc;
	/* the directory's attr and quota are read, as doRmdir reads them */
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_get(tx, &k, &q, &ql, err)) != 0)
		goto out;
	free(q);
	q = NULL;
	jo_key_init(&k, tx->m);
	jo_key_str(&k, "QD");
	jo_key_le64(&k, res->ino);
	if ((rc = jo_tx_get(tx, &k, &q, &ql, err)) != 0)
		goto out;
	jo_tkv_inode_key(&k, tx->m, res->ino, 'D');
	if ((rc = jo_tx_exists_prefix(tx, &k, &full, err)) != 0)
		goto out;
	if (full) {
		res->status = JO_RM_NOTEMPTY;
		rc = 1;
		goto out;
	}
	if (!jo_ino_is_trash(r->parent)) {
		jo_put_be32(pattr + JO_ATTR_NLINK_OFF, jo_be32(pattr + JO_ATTR_NLINK_OFF) - 1);
		jo_attr_stamp(pattr, JO_ATTR_MTIME_OFF, &r->now);
		jo_attr_stamp(pattr, JO_ATTR_CTIME_OFF, &r->now);
		jo_tkv_attr_key(&k, tx->m, r->parent);
		if ((rc = jo_tx_put(tx, &k, pattr, plen, err)) != 0)
			goto out;
	}
	jo_tkv_entry_key(&k, tx->m, r->parent, r->name, r->nlen);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	jo_key_init(&k, tx->m);
	jo_key_ch(&k, 'U');
	jo_key_le64(&k, res->ino);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	if (q) {
		jo_key_init(&k, tx->m);
		jo_key_str(&k, "QD");
		jo_key_le64(&k, res->ino);
		if ((rc = jo_tx_del(tx, &k, err)) != 0)
			goto out;
	}
	if ((rc = del_inode(tx, res->ino, err)) != 0)
		goto out;
	rc = account(tx, 4096, r->parent, r->dir_stats && r->parent != JO_TRASH_INODE, 0, err);
out:
	free(pattr);
	free(q);
	return rc;
}

static int run(struct jo_meta *m, jo_tx_fn fn, uint64_t parent, const char *name, size_t nlen,
	       bool dir, bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	struct rm r = { parent, name, nlen, dir, dir_stats, res, { 0, 0 } };
	int rc;

	clock_gettime(CLOCK_REALTIME, &r.now);
	memset(res, 0, sizeof(*res));
	rc = jo_tkv_txn(m, fn, &r, err);
	return rc < 0 ? rc : 0;
}

int jo_tkv_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		  bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	return run(m, unlink_fn, parent, name, nlen, false, dir_stats, res, err);
}

int jo_tkv_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,
		 bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	return run(m, rmdir_fn, parent, name, nlen, true, dir_stats, res, err);
}

/* ---- restore (doRename with RenameNoReplace|RenameRestore, as root) ---- */

struct rs {
	uint64_t tdir, parent;
	const char *src, *name;
	size_t slen, nlen;
	bool dir_stats;
	struct jo_rs_res *res;
	bool *dst_missing;
	struct timespec now;
	const struct jo_rs_quota *quota; /* charged in the same transaction (may be NULL) */
	struct rs_sums *sums;            /* NULL: the statistics and quotas written at once */
};

/*
 * What a batch's entries add to the keys they share (the hour directory's
 * and the targets' statistics U, the quotas QD), summed and written at the
 * end of its transaction: read there, just before the commit, rather than
 * at its first entry, they leave other writers (every restore changes the
 * hour directory's U) a short window to conflict with it.
 */
struct rs_sum {
	bool quota;  /* QD (v: space, inodes), else U (v: length, space, inodes) */
	uint64_t ino;
	int64_t v[3];
	bool have;   /* U: the directory has statistics (after rs_sums_write) */
};

struct rs_sums {
	struct rs_sum *s;
	size_t n, cap;
};

static int rs_sum_add(struct rs_sums *ss, bool quota, uint64_t ino, int64_t a, int64_t b,
		      int64_t c, struct jo_err *err)
{
	size_t i = 0;

	while (i < ss->n && (ss->s[i].quota != quota || ss->s[i].ino != ino))
		i++;
	if (i == ss->n) {
		if (ss->n == ss->cap) {
			size_t cap = ss->cap ? 2 * ss->cap : 8;
			struct rs_sum *n = realloc(ss->s, cap * sizeof(*n));

			if (!n)
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			ss->s = n;
			ss->cap = cap;
		}
		ss->s[ss->n++] = (struct rs_sum){ quota, ino, { 0, 0, 0 }, false };
	}
	ss->s[i].v[0] += a;
	ss->s[i].v[1] += b;
	ss->s[i].v[2] += c;
	return 0;
}

static int quota_add_tx(struct jo_tx *tx, uint64_t ino, int64_t space, int64_t inodes, bool *had,
			struct jo_err *err);

/* Whether q's directories to check still have the ctimes read (read in
 * the transaction: a change conflicts with it). */
static int tree_same(struct jo_tx *tx, const struct jo_rs_quota *q, bool *same,
		     struct jo_err *err)
{
	*same = true;
	for (size_t i = 0; i < q->ncheck && *same; i++) {
		struct jo_attr t = { 0 };
		struct jo_key k;
		uint8_t *ta = NULL;
		size_t tl = 0;
		int rc;

		jo_tkv_attr_key(&k, tx->m, q->check[i]);
		if ((rc = jo_tx_get(tx, &k, &ta, &tl, err)) != 0)
			return rc;
		*same = ta && tl >= JO_ATTR_PARENT_OFF && jo_meta_decode_attr(ta, tl, &t, err) == 0 &&
			jo_rs_check_same(q, i, jo_rs_ctime_ns(t.ctime, t.ctimensec), t.parent);
		jo_err_clear(err);
		free(ta);
	}
	return 0;
}

/*
 * A restored directory that has no statistics of its own and no entries
 * gets zero ones (juicefs 1.4.2's restore leaves an empty directory
 * without, which `fsck --path / --recursive` reports).
 */
static int empty_dir_stat(struct jo_tx *tx, uint64_t ino, struct jo_err *err)
{
	uint8_t zero[24] = { 0 };
	bool has_stat = false, full = false;
	struct jo_key k;
	int rc;

	if ((rc = stat_add(tx, ino, 0, 0, 0, &has_stat, err)) != 0 || has_stat)
		return rc;
	jo_tkv_inode_key(&k, tx->m, ino, 'D');
	if ((rc = jo_tx_exists_prefix(tx, &k, &full, err)) != 0 || full)
		return rc;
	jo_key_init(&k, tx->m);
	jo_key_ch(&k, 'U');
	jo_key_le64(&k, ino);
	return jo_tx_put(tx, &k, zero, sizeof(zero), err);
}

static int restore_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct rs *x = p;
	struct jo_rs_res *res = x->res;
	uint8_t *e = NULL, *da = NULL, *ia = NULL, *v = NULL, ebuf[9];
	size_t el, dl = 0, il = 0, vl;
	struct jo_attr d = { 0 }, a = { 0 };
	struct jo_key k;
	bool dir, have = true;
	int rc;

	memset(res, 0, sizeof(*res));
	*x->dst_missing = false;
	jo_tkv_entry_key(&k, tx->m, x->tdir, x->src, x->slen);
	if ((rc = jo_tx_get(tx, &k, &e, &el, err)) != 0)
		return rc;
	if (!e || el < 9) {
		free(e);
		res->status = JO_RS_GONE;
		return 1;
	}
	res->type = e[0];
	res->ino = jo_be64(e + 1);
	dir = res->type == JO_TYPE_DIR;
	jo_tkv_attr_key(&k, tx->m, x->parent);
	if ((rc = jo_tx_get(tx, &k, &da, &dl, err)) != 0)
		goto out;
	if (!da || dl < JO_ATTR_PARENT_OFF || jo_meta_decode_attr(da, dl, &d, err) != 0 ||
	    d.type != JO_TYPE_DIR) {
		res->status = JO_RS_NOPARENT;
		rc = 1;
		goto out;
	}
	if ((d.flags & JO_ATTR_FLAG_IMMUTABLE) || d.parent == res->ino || x->parent == res->ino) {
		res->status = JO_RS_PERM;
		rc = 1;
		goto out;
	}
	jo_tkv_entry_key(&k, tx->m, x->parent, x->name, x->nlen);
	if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
		goto out;
	if (v) {
		res->status = JO_RS_EXISTS;
		rc = 1;
		goto out;
	}
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_get(tx, &k, &ia, &il, err)) != 0)
		goto out;
	if (!ia || il < JO_ATTR_PARENT_OFF) {
		res->status = JO_RS_GONE;
		rc = 1;
		goto out;
	}
	if ((rc = jo_meta_decode_attr(ia, il, &a, err)) != 0)
		goto out;
	if (a.flags & (JO_ATTR_FLAG_IMMUTABLE | JO_ATTR_FLAG_APPEND)) {
		res->status = JO_RS_PERM;
		rc = 1;
		goto out;
	}
	if (x->quota) {
		bool same = true;

		if ((rc = tree_same(tx, x->quota, &same, err)) != 0)
			goto out;
		if (!same) {
			res->status = JO_RS_CHANGED;
			rc = 1;
			goto out;
		}
	}
	res->length = res->type == JO_TYPE_FILE ? a.length : 0;
	jo_tkv_entry_key(&k, tx->m, x->tdir, x->src, x->slen);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	if (a.parent == 0 && !dir) {
		/* a hard link: one link moves from the hour directory to the parent */
		jo_tkv_inode_key(&k, tx->m, res->ino, 'P');
		jo_key_le64(&k, x->parent);
		if ((rc = jo_tx_incr(tx, &k, 1, NULL, err)) != 0)
			goto out;
		jo_tkv_inode_key(&k, tx->m, res->ino, 'P');
		jo_key_le64(&k, x->tdir);
		if ((rc = jo_tx_incr(tx, &k, -1, NULL, err)) != 0)
			goto out;
	} else if (il >= JO_ATTR_PARENT_OFF + 8) {
		jo_put_be64(ia + JO_ATTR_PARENT_OFF, x->parent);
	}
	jo_attr_stamp(ia, JO_ATTR_CTIME_OFF, &x->now);
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_put(tx, &k, ia, il, err)) != 0)
		goto out;
	ebuf[0] = res->type;
	jo_put_be64(ebuf + 1, res->ino);
	jo_tkv_entry_key(&k, tx->m, x->parent, x->name, x->nlen);
	if ((rc = jo_tx_put(tx, &k, ebuf, sizeof(ebuf), err)) != 0)
		goto out;
	if (dir)
		jo_put_be32(da + JO_ATTR_NLINK_OFF, d.nlink + 1);
	jo_attr_stamp(da, JO_ATTR_MTIME_OFF, &x->now);
	jo_attr_stamp(da, JO_ATTR_CTIME_OFF, &x->now);
	jo_tkv_attr_key(&k, tx->m, x->parent);
	if ((rc = jo_tx_put(tx, &k, da, dl, err)) != 0)
		goto out;
	if (x->dir_stats) {
		int64_t l = (int64_t)res->length, sp = jo_align4k(res->length);

		if (x->sums) {
			if ((rc = rs_sum_add(x->sums, false, x->tdir, -l, -sp, -1, err)) != 0 ||
			    (rc = rs_sum_add(x->sums, false, x->parent, l, sp, 1, err)) != 0)
				goto out;
		} else {
			if ((rc = stat_add(tx, x->tdir, -l, -sp, -1, NULL, err)) != 0 ||
			    (rc = stat_add(tx, x->parent, l, sp, 1, &have, err)) != 0)
				goto out;
			*x->dst_missing = !have;
		}
		if (dir && (rc = empty_dir_stat(tx, res->ino, err)) != 0)
			goto out;
	}
	if (rc == 0 && x->quota) {
		int64_t space, inodes;
		bool had;

		jo_rs_quota_delta(x->quota, res, &space, &inodes);
		for (size_t i = 0; rc == 0 && inodes && i < x->quota->ndirs; i++)
			rc = x->sums ? rs_sum_add(x->sums, true, x->quota->dirs[i], space, inodes, 0,
						  err) :
				       quota_add_tx(tx, x->quota->dirs[i], space, inodes, &had, err);
	}
out:
	free(e);
	free(da);
	free(ia);
	free(v);
	return rc;
}

int jo_tkv_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen, uint64_t parent,
		   const char *name, size_t nlen, bool dir_stats, const struct jo_rs_quota *quota,
		   struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err)
{
	struct rs x = { tdir, parent, src, name, slen, nlen, dir_stats, res, dst_stat_missing,
			{ 0, 0 }, quota, NULL };
	int rc;

	clock_gettime(CLOCK_REALTIME, &x.now);
	rc = jo_tkv_txn(m, restore_fn, &x, err);
	if (rc > 0)
		*dst_stat_missing = false;
	return rc < 0 ? rc : 0;
}

/*
 * At most what restore_fn reads (each read is a check at commit) and
 * writes for one entry with quota q: its trash entry, the target's
 * attributes and name, the entry's attributes, two hard-link counters, the
 * statistics of the hour directory, the target and the entry, the range of
 * a directory's entries; a quota record and a directory checked each.
 */
static size_t rs_reads(const struct jo_rs_quota *q)
{
	return 10 + (q ? q->ndirs + q->ncheck : 0);
}

static size_t rs_writes(const struct jo_rs_quota *q)
{
	return 9 + (q ? q->ndirs : 0);
}

struct rs_many {
	struct jo_rs_item *v;
	size_t n;
	bool dir_stats;
	struct timespec now;
	struct rs_sums sums;
};

/*
 * Entries v[0..n) in one transaction, in order: each sees what the ones
 * before it wrote, as after their own commits (its additions to the shared
 * statistics and quotas come at the end, sums commute). An entry left
 * alone (restore_fn > 0) wrote nothing, so the others still go in.
 */
static int restore_many_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct rs_many *b = p;
	int rc = 0;

	b->sums.n = 0;
	for (size_t i = 0; i < b->n && rc >= 0; i++) {
		struct jo_rs_item *it = &b->v[i];
		struct rs x = { it->tdir, it->parent, it->src, it->name, it->src_len, it->name_len,
				b->dir_stats, &it->res, &it->dst_stat_missing, b->now, it->quota,
				&b->sums };

		rc = restore_fn(tx, &x, err);
	}
	if (rc < 0)
		return rc;
	for (size_t j = 0; j < b->sums.n; j++) {
		struct rs_sum *s = &b->sums.s[j];

		rc = s->quota ? quota_add_tx(tx, s->ino, s->v[0], s->v[1], &s->have, err) :
				stat_add(tx, s->ino, s->v[0], s->v[1], s->v[2], &s->have, err);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < b->n && b->dir_stats; i++) {
		struct jo_rs_item *it = &b->v[i];

		for (size_t j = 0; it->res.status == JO_RS_DONE && j < b->sums.n; j++)
			if (!b->sums.s[j].quota && b->sums.s[j].ino == it->parent)
				it->dst_stat_missing = !b->sums.s[j].have;
	}
	return 0;
}

/*
 * jo_mut_restore_many: as many entries per transaction as keep it within
 * JO_TKV_STEP reads and writes counted by rs_reads/rs_writes (below every
 * transport's limits; an entry over them alone is tried alone, as by
 * jo_tkv_restore), each transaction all or nothing.
 */
int jo_tkv_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err)
{
	for (size_t i = 0; i < n;) {
		struct rs_many b = { v + i, 0, dir_stats, { 0, 0 }, { NULL, 0, 0 } };
		size_t reads = 0, writes = 0;
		int rc;

		while (i + b.n < n) {
			const struct jo_rs_quota *q = v[i + b.n].quota;

			if (b.n && (reads + rs_reads(q) > JO_TKV_STEP ||
				    writes + rs_writes(q) > JO_TKV_STEP))
				break;
			reads += rs_reads(q);
			writes += rs_writes(q);
			b.n++;
		}
		clock_gettime(CLOCK_REALTIME, &b.now);
		rc = jo_tkv_txn(m, restore_many_fn, &b, err);
		free(b.sums.s);
		if (rc)
			return rc;
		for (size_t j = 0; j < b.n; j++)
			v[i + j].ran = true;
		i += b.n;
	}
	return 0;
}

struct stat_init {
	uint64_t ino;
	int64_t v[3];
	bool *written;
};

static int stat_init_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct stat_init *s = p;
	uint8_t buf[24];
	struct jo_key k;
	bool have = false;
	int rc;

	*s->written = false;
	if ((rc = stat_add(tx, s->ino, 0, 0, 0, &have, err)) != 0 || have)
		return rc ? rc : 1;
	for (int i = 0; i < 3; i++)
		jo_put_be64(buf + 8 * i, (uint64_t)s->v[i]);
	jo_key_init(&k, tx->m);
	jo_key_ch(&k, 'U');
	jo_key_le64(&k, s->ino);
	*s->written = true;
	return jo_tx_put(tx, &k, buf, sizeof(buf), err);
}

int jo_tkv_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length, int64_t space,
			 int64_t inodes, bool *written, struct jo_err *err)
{
	struct stat_init s = { ino, { length, space, inodes }, written };
	int rc = jo_tkv_txn(m, stat_init_fn, &s, err);

	return rc < 0 ? rc : 0;
}

struct quota_add {
	uint64_t ino;
	int64_t space, inodes;
	bool *had;
};

/* doFlushQuotas for a directory quota, in transaction tx: QD{ino} = max
 * space, max inodes, used space, used inodes (BE 64-bit each); *had tells
 * whether ino has one (nothing written when not). */
static int quota_add_tx(struct jo_tx *tx, uint64_t ino, int64_t space, int64_t inodes, bool *had,
			struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v = NULL;
	size_t vl;
	int rc;

	*had = false;
	jo_key_init(&k, tx->m);
	jo_key_str(&k, "QD");
	jo_key_le64(&k, ino);
	if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v || vl != 32) {
		free(v);
		return 0;
	}
	jo_put_be64(v + 16, jo_be64(v + 16) + (uint64_t)space);
	jo_put_be64(v + 24, jo_be64(v + 24) + (uint64_t)inodes);
	*had = true;
	rc = jo_tx_put(tx, &k, v, vl, err);
	free(v);
	return rc;
}

static int quota_add_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct quota_add *q = p;
	int rc = quota_add_tx(tx, q->ino, q->space, q->inodes, q->had, err);

	return rc ? rc : *q->had ? 0 : 1;
}

int jo_tkv_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space, int64_t inodes,
			 bool *had, struct jo_err *err)
{
	struct quota_add q = { ino, space, inodes, had };
	int rc = jo_tkv_txn(m, quota_add_fn, &q, err);

	return rc < 0 ? rc : 0;
}
