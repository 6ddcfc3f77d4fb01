/* mut.c: engine dispatch and argument checks for meta_mut.h. */
#include "common/meta/meta_mut.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/meta/engine_internal.h"
#include "common/meta/meta.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_internal.h"

static int check_ns(const char *ns, struct jo_err *err)
{
	size_t n = ns ? strlen(ns) : 0;

	if (n == 0 || n > 16)
		return jo_err_set(err, JO_EINVAL, "task namespace must be 1-16 characters");
	for (size_t i = 0; i < n; i++)
		if (!((ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9')))
			return jo_err_set(err, JO_EINVAL, "task namespace '%s': only [a-z0-9]", ns);
	return 0;
}

static int check_owner(const char *owner, struct jo_err *err)
{
	size_t n = owner ? strlen(owner) : 0;

	if (n == 0 || n > 100)
		return jo_err_set(err, JO_EINVAL, "lease owner must be 1-100 characters");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)owner[i] < 0x21 || (unsigned char)owner[i] > 0x7e)
			return jo_err_set(err, JO_EINVAL, "lease owner '%s': printable ASCII only", owner);
	return 0;
}

int jo_sref_push(struct jo_sref **arr, size_t *n, size_t *cap, uint64_t id, uint32_t size)
{
	if (jo_grow_array(arr, cap, *n + 1, sizeof(**arr)))
		return JO_ENOMEM;
	(*arr)[*n].id = id;
	(*arr)[*n].size = size;
	(*n)++;
	return 0;
}

int jo_sref_finish(int rc, struct jo_sref *recs, struct jo_sref **freed, size_t *nfreed)
{
	free(recs);
	if (rc) {
		free(*freed);
		*freed = NULL;
		*nfreed = 0;
	}
	return rc;
}

void jo_mut_task_release_mem(struct jo_mut_task *t)
{
	if (!t)
		return;
	free(t->items);
	t->items = NULL;
}

int jo_mut_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			size_t *nfreed, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->delete_chunk(m, ino, indx, freed, nfreed, err);
}

int jo_mut_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
		       size_t *n, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->file_chunks(m, ino, length, out, n, err);
}

int jo_mut_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length, bool *out,
			  struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->delfile_exists(m, ino, length, out, err);
}

int jo_mut_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->remove_delfile(m, ino, length, err);
}

int jo_mut_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			    struct jo_sref **freed, size_t *nfreed, bool *kept, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->cleanup_delslice(m, new_id, ts, edge, freed, nfreed, kept, err);
}

int jo_mut_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			   struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->slice_deletable(m, id, size, out, err);
}

int jo_mut_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->forget_slice(m, id, size, err);
}

/*
 * Both batch calls: the family's one-round-trip form when it has one and
 * it got through, else slice by slice (a lost link, a redirect: re-reading
 * a count or forgetting it twice is harmless). out NULL: forget.
 */
static int each_slice(struct jo_meta *m, const struct jo_slice_id *v, size_t n, bool *out,
		      int *rcs, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;
	struct jo_err e = { 0 };
	int rc = -1;

	if (n == 0)
		return 0;
	if (out && o->slices_deletable)
		rc = o->slices_deletable(m, v, n, out, rcs, &e);
	else if (!out && o->forget_slices)
		rc = o->forget_slices(m, v, n, rcs, &e);
	if (rc == 0) {
		if (e.code)   /* set only by a slice's own failure */
			*err = e;
		return 0;
	}
	jo_err_clear(err);
	for (size_t i = 0; i < n; i++) {
		jo_err_clear(&e);
		rc = out ? o->slice_deletable(m, v[i].id, v[i].size, &out[i], &e)
			 : o->forget_slice(m, v[i].id, v[i].size, &e);
		if (rc == JO_ECONNECT || rc == JO_ETIMEOUT) {
			*err = e;
			return rc;
		}
		rcs[i] = rc;
		if (rc && out)
			out[i] = false;
		if (rc && !err->code)
			*err = e;
	}
	return 0;
}

int jo_mut_slices_deletable(struct jo_meta *m, const struct jo_slice_id *v, size_t n, bool *out,
			    int *rcs, struct jo_err *err)
{
	return each_slice(m, v, n, out, rcs, err);
}

int jo_mut_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n, int *rcs,
			 struct jo_err *err)
{
	return each_slice(m, v, n, NULL, rcs, err);
}

int jo_mut_confirm(struct jo_meta *m, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o && o->confirm ? o->confirm(m, err) : 0;
}

bool jo_mut_moved(struct jo_meta *m)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o && o->moved && o->moved(m);
}

int jo_mut_inode_exists(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->inode_exists(m, ino, out, err);
}

int jo_mut_is_detached(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->is_detached(m, ino, out, err);
}

int jo_mut_scan_orphan_chunks(struct jo_meta *m, jo_mut_chunk_cb cb, void *payload,
			      struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	return o->scan_orphan_chunks(m, cb, payload, err);
}

static int check_name(const char *name, size_t n, struct jo_rm_res *res, struct jo_err *err)
{
	memset(res, 0, sizeof(*res));
	if (!name || n == 0 || n > 255 || memchr(name, '/', n))
		return jo_err_set(err, JO_EINVAL, "bad directory entry name");
	return 0;
}

int jo_mut_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t name_len,
		  bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_name(name, name_len, res, err))
		return err->code;
	return o->unlink(m, parent, name, name_len, dir_stats, res, err);
}

int jo_mut_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t name_len,
		 bool dir_stats, struct jo_rm_res *res, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_name(name, name_len, res, err))
		return err->code;
	return o->rmdir(m, parent, name, name_len, dir_stats, res, err);
}

int jo_mut_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t src_len,
		   uint64_t parent, const char *name, size_t name_len, bool dir_stats,
		   struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;
	struct jo_rm_res dummy;
	bool miss = false;
	int rc;

	memset(res, 0, sizeof(*res));
	if (check_name(src, src_len, &dummy, err) || check_name(name, name_len, &dummy, err))
		return err->code;
	if (!jo_ino_is_trash(tdir) || tdir == JO_TRASH_INODE || jo_ino_is_trash(parent))
		return jo_err_set(err, JO_EINVAL, "restore: from an hour directory of the trash "
				  "to a directory outside it only");
	if (!o->restore)
		return jo_err_set(err, JO_EUNSUPPORTED, "restore: not on this engine");
	rc = o->restore(m, tdir, src, src_len, parent, name, name_len, dir_stats, NULL, res, &miss,
			err);
	if (dst_stat_missing)
		*dst_stat_missing = miss;
	return rc;
}

int jo_mut_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;
	struct jo_rm_res dummy;

	for (size_t i = 0; i < n; i++) {
		memset(&v[i].res, 0, sizeof(v[i].res));
		v[i].ran = v[i].dst_stat_missing = false;
	}
	for (size_t i = 0; i < n; i++) {
		if (check_name(v[i].src, v[i].src_len, &dummy, err) ||
		    check_name(v[i].name, v[i].name_len, &dummy, err))
			return err->code;
		if (!jo_ino_is_trash(v[i].tdir) || v[i].tdir == JO_TRASH_INODE ||
		    jo_ino_is_trash(v[i].parent))
			return jo_err_set(err, JO_EINVAL, "restore: from an hour directory of the "
					  "trash to a directory outside it only");
	}
	if (!o->restore)
		return jo_err_set(err, JO_EUNSUPPORTED, "restore: not on this engine");
	if (o->restore_many)
		return n ? o->restore_many(m, v, n, dir_stats, err) : 0;
	for (size_t i = 0; i < n; i++) {
		int rc = o->restore(m, v[i].tdir, v[i].src, v[i].src_len, v[i].parent, v[i].name,
				    v[i].name_len, dir_stats, v[i].quota, &v[i].res,
				    &v[i].dst_stat_missing, err);

		if (rc)
			return rc;
		v[i].ran = true;
	}
	return 0;
}

void jo_rs_quota_delta(const struct jo_rs_quota *q, const struct jo_rs_res *res, int64_t *space,
		       int64_t *inodes)
{
	*space = *inodes = 0;
	if (!q || !q->ndirs || res->status != JO_RS_DONE)
		return;
	if (res->type == JO_TYPE_DIR) {
		*space = q->dir_space;
		*inodes = q->dir_inodes;
		return;
	}
	*space = res->type == JO_TYPE_FILE ? jo_align4k(res->length) : 4096;
	*inodes = 1;
}

int jo_mut_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length, int64_t space,
			 int64_t inodes, bool *written, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	*written = false;
	if (!o->dir_stat_init)
		return jo_err_set(err, JO_EUNSUPPORTED, "directory statistics: not on this engine");
	return o->dir_stat_init(m, ino, length, space, inodes, written, err);
}

int jo_mut_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space, int64_t inodes,
			 bool *had, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	*had = false;
	if (!o->dir_quota_add)
		return jo_err_set(err, JO_EUNSUPPORTED, "directory quotas: not on this engine");
	return o->dir_quota_add(m, ino, space, inodes, had, err);
}

size_t jo_mut_task_max_items(struct jo_meta *m)
{
	return m->ops->mut->max_task_items;
}

int jo_mut_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err))
		return err->code;
	return o->task_init(m, ns, err);
}

int jo_mut_task_add(struct jo_meta *m, const char *ns, const char *kind,
		    const char *const *items, size_t n, int64_t *task_id, size_t *added,
		    struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	*task_id = 0;
	*added = 0;
	if (check_ns(ns, err))
		return err->code;
	if (!kind || !*kind || strlen(kind) >= 32 || strchr(kind, '\n'))
		return jo_err_set(err, JO_EINVAL, "bad task kind");
	for (size_t i = 0; i < n; i++)
		if (!items[i][0] || strlen(items[i]) > 200 || strchr(items[i], '\n'))
			return jo_err_set(err, JO_EINVAL, "bad task item '%.40s'", items[i]);
	if (o->max_task_items && n > o->max_task_items)
		return jo_err_set(err, JO_EINVAL, "a task of %zu items: this engine records at most %zu",
				  n, o->max_task_items);
	return o->task_add(m, ns, kind, items, n, task_id, added, err);
}

int jo_mut_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		      struct jo_mut_task *out, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	memset(out, 0, sizeof(*out));
	if (check_ns(ns, err) || check_owner(owner, err))
		return err->code;
	if (lease_ms < 100)
		return jo_err_set(err, JO_EINVAL, "lease of %lld ms is too short", (long long)lease_ms);
	return o->task_claim(m, ns, owner, lease_ms, out, err);
}

int jo_mut_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		      int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err) || check_owner(owner, err))
		return err->code;
	return o->task_renew(m, ns, id, owner, lease_ms, expire_ms, err);
}

int jo_mut_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err) || check_owner(owner, err))
		return err->code;
	return o->task_release(m, ns, id, owner, err);
}

int jo_mut_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			 struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err) || check_owner(owner, err))
		return err->code;
	return o->task_complete(m, ns, id, owner, err);
}

int jo_mut_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
		      struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	*total = *leased = 0;
	if (check_ns(ns, err))
		return err->code;
	return o->task_count(m, ns, total, leased, err);
}

int jo_mut_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		     struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err))
		return err->code;
	return o->task_scan(m, ns, cb, payload, err);
}

int jo_mut_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err))
		return err->code;
	return o->task_clear(m, ns, err);
}

/* ---- records */

static int check_rec_key(const char *key, struct jo_err *err)
{
	size_t n = key ? strlen(key) : 0;

	if (n == 0 || n > 200)
		return jo_err_set(err, JO_EINVAL, "record key must be 1-200 characters");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)key[i] < 0x21 || (unsigned char)key[i] > 0x7e)
			return jo_err_set(err, JO_EINVAL, "record key '%.40s': printable ASCII only", key);
	return 0;
}

static int no_recs(struct jo_meta *m, struct jo_err *err)
{
	return jo_err_set(err, JO_EUNSUPPORTED, "metadata engine %s keeps no jfsops records yet",
			  jo_meta_engine(m));
}

int jo_mut_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		   const struct jo_mut_rec_cond *cond, bool *written, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;
	struct jo_mut_rec_cond none = { 0 };

	if (written)
		*written = false;
	if (check_ns(ns, err) || check_rec_key(key, err))
		return err->code;
	if (!cond)
		cond = &none;
	if (val && strlen(val) > JO_MUT_REC_MAX)
		return jo_err_set(err, JO_EINVAL, "record '%s' is longer than %u bytes", key,
				  JO_MUT_REC_MAX);
	if (cond->task_id > 0 && check_owner(cond->owner, err))
		return err->code;
	if (cond->complete && cond->task_id <= 0)
		return jo_err_set(err, JO_EINVAL, "record '%s': complete needs a task", key);
	if (!o->rec_put)
		return no_recs(m, err);
	return o->rec_put(m, ns, key, val, cond, written, err);
}

int jo_mut_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		   struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	*val = NULL;
	if (check_ns(ns, err) || check_rec_key(key, err))
		return err->code;
	if (!o->rec_get)
		return no_recs(m, err);
	return o->rec_get(m, ns, key, val, err);
}

int jo_mut_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		    void *payload, struct jo_err *err)
{
	const struct jo_mut_ops *o = m->ops->mut;

	if (check_ns(ns, err))
		return err->code;
	if (!prefix)
		prefix = "";
	if (*prefix && check_rec_key(prefix, err))
		return err->code;
	if (!o->rec_scan)
		return no_recs(m, err);
	return o->rec_scan(m, ns, prefix, cb, payload, err);
}
