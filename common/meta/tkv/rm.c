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

#define FLAG_IMMUTABLE 1
#define FLAG_APPEND 2
#define AT_MTIME 23
#define AT_CTIME 35
#define AT_NLINK 47
#define ATTR_MIN 63

struct rm {
	uint64_t parent;
	const char *name;
	size_t nlen;
	bool dir;
	bool dir_stats;
	struct jo_rm_res *res;
	struct timespec now;
};

static void stamp(uint8_t *attr, size_t off, const struct timespec *now)
{
	jo_put_be64(attr + off, (uint64_t)now->tv_sec);
	jo_put_be32(attr + off + 8, (uint32_t)now->tv_nsec);
}

/* usedSpace/totalInodes (doFlushStats) and the parent's statistics
 * (doUpdateDirStat: only a key that exists is updated). */
static int account(struct jo_tx *tx, int64_t freed, uint64_t parent, bool dir_stats,
		   int64_t length, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	jo_tkv_counter_key(&k, tx->m, "usedSpace");
	if ((rc = jo_tx_incr(tx, &k, -freed, NULL, err)) != 0)
		return rc;
	jo_tkv_counter_key(&k, tx->m, "totalInodes");
	if ((rc = jo_tx_incr(tx, &k, -1, NULL, err)) != 0)
		return rc;
	if (!dir_stats)
		return 0;
	jo_key_init(&k, tx->m);
	jo_key_ch(&k, 'U');
	jo_key_le64(&k, parent);
	if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
		return rc;
	if (v && vl == 24) {
		jo_put_be64(v, jo_be64(v) - (uint64_t)length);
		jo_put_be64(v + 8, jo_be64(v + 8) - (uint64_t)freed);
		jo_put_be64(v + 16, jo_be64(v + 16) - 1);
		rc = jo_tx_put(tx, &k, v, 24, err);
	}
	free(v);
	return rc;
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
	if (*plen < ATTR_MIN || ((*pattr)[1] >> 4) != JO_TYPE_DIR ||
	    ((*pattr)[0] & (FLAG_IMMUTABLE | FLAG_APPEND))) {
		r->res->status = *plen < ATTR_MIN || ((*pattr)[1] >> 4) != JO_TYPE_DIR ?
				 JO_RM_WRONGTYPE : JO_RM_PERM;
		free(*pattr);
		*pattr = NULL;
		return 1;
	}
	return 0;
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

	memset(res, 0, sizeof(*res));
	if ((rc = look(tx, r, &pattr, &plen, err)) != 0)
		return rc;
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_get(tx, &k, &attr, &alen, err)) != 0)
		goto out;
	if (attr) {
		if ((rc = jo_meta_decode_attr(attr, alen, &a, err)) != 0)
			goto out;
		have = true;
		if (a.flags & (FLAG_IMMUTABLE | FLAG_APPEND)) {
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
		jo_put_be32(attr + AT_NLINK, a.nlink);
		stamp(attr, AT_CTIME, &r->now);
		res->nlink = a.nlink;
		res->length = a.length;
	}
	/* no attr: juicefs warns and drops the entry (and what the inode had) */
	jo_tkv_entry_key(&k, tx->m, r->parent, r->name, r->nlen);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	if (!jo_ino_is_trash(r->parent)) {
		stamp(pattr, AT_MTIME, &r->now);
		stamp(pattr, AT_CTIME, &r->now);
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
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	jo_tkv_inode_key(&k, tx->m, res->ino, 'X');
	if ((rc = jo_tx_del_prefix(tx, &k, err)) != 0)
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

	memset(res, 0, sizeof(*res));
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
		jo_put_be32(pattr + AT_NLINK, jo_be32(pattr + AT_NLINK) - 1);
		stamp(pattr, AT_MTIME, &r->now);
		stamp(pattr, AT_CTIME, &r->now);
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
	jo_tkv_attr_key(&k, tx->m, res->ino);
	if ((rc = jo_tx_del(tx, &k, err)) != 0)
		goto out;
	jo_tkv_inode_key(&k, tx->m, res->ino, 'X');
	if ((rc = jo_tx_del_prefix(tx, &k, err)) != 0)
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
