/*
 * engine_internal.h: what a metadata-engine family implements besides the
 * reads of struct jo_meta_ops (meta_internal.h): the section tables of gc
 * mutations, trash removal, task records and compaction, and the small
 * helpers they share. Only common/meta includes this.
 */
#ifndef JO_META_ENGINE_INTERNAL_H
#define JO_META_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/meta_mut.h"

struct jo_err;
struct jo_meta;
struct jo_compact_commit;
struct jo_slice_id;

/* A family's gc mutations, trash removal and task records (meta_mut.h). */
struct jo_mut_ops {
	int (*delete_chunk)(struct jo_meta *, uint64_t, uint32_t, struct jo_sref **, size_t *,
			    struct jo_err *);
	int (*file_chunks)(struct jo_meta *, uint64_t, uint64_t, uint32_t **, size_t *,
			   struct jo_err *);
	int (*delfile_exists)(struct jo_meta *, uint64_t, uint64_t, bool *, struct jo_err *);
	int (*remove_delfile)(struct jo_meta *, uint64_t, uint64_t, struct jo_err *);
	int (*cleanup_delslice)(struct jo_meta *, uint64_t, int64_t, int64_t, struct jo_sref **,
				size_t *, bool *, struct jo_err *);
	int (*slice_deletable)(struct jo_meta *, uint64_t, uint32_t, bool *, struct jo_err *);
	int (*forget_slice)(struct jo_meta *, uint64_t, uint32_t, struct jo_err *);
	/* optional: the two above for many slices in one round trip (0: every
	 * slice answered in out/rcs; else the caller asks slice by slice) */
	int (*slices_deletable)(struct jo_meta *, const struct jo_slice_id *, size_t, bool *, int *,
				struct jo_err *);
	int (*forget_slices)(struct jo_meta *, const struct jo_slice_id *, size_t, int *,
			     struct jo_err *);
	/* optional: jo_mut_confirm / jo_mut_moved (NULL: every result is durable) */
	int (*confirm)(struct jo_meta *, struct jo_err *);
	bool (*moved)(struct jo_meta *);
	int (*inode_exists)(struct jo_meta *, uint64_t, bool *, struct jo_err *);
	int (*is_detached)(struct jo_meta *, uint64_t, bool *, struct jo_err *);
	int (*scan_orphan_chunks)(struct jo_meta *, jo_mut_chunk_cb, void *, struct jo_err *);
	int (*unlink)(struct jo_meta *, uint64_t, const char *, size_t, bool, struct jo_rm_res *,
		      struct jo_err *);
	int (*rmdir)(struct jo_meta *, uint64_t, const char *, size_t, bool, struct jo_rm_res *,
		     struct jo_err *);
	/* the quota (may be NULL) charged in the restore's transaction */
	int (*restore)(struct jo_meta *, uint64_t, const char *, size_t, uint64_t, const char *,
		       size_t, bool, const struct jo_rs_quota *, struct jo_rs_res *, bool *,
		       struct jo_err *);
	/* optional: jo_mut_restore_many in one transaction */
	int (*restore_many)(struct jo_meta *, struct jo_rs_item *, size_t, bool, struct jo_err *);
	int (*dir_stat_init)(struct jo_meta *, uint64_t, int64_t, int64_t, int64_t, bool *,
			     struct jo_err *);
	int (*dir_quota_add)(struct jo_meta *, uint64_t, int64_t, int64_t, bool *,
			     struct jo_err *);
	int (*task_init)(struct jo_meta *, const char *, struct jo_err *);
	int (*task_add)(struct jo_meta *, const char *, const char *, const char *const *, size_t,
			int64_t *, size_t *, struct jo_err *);
	int (*task_claim)(struct jo_meta *, const char *, const char *, int64_t,
			  struct jo_mut_task *, struct jo_err *);
	int (*task_renew)(struct jo_meta *, const char *, int64_t, const char *, int64_t,
			  int64_t *, struct jo_err *);
	int (*task_release)(struct jo_meta *, const char *, int64_t, const char *,
			    struct jo_err *);
	int (*task_complete)(struct jo_meta *, const char *, int64_t, const char *,
			     struct jo_err *);
	int (*task_count)(struct jo_meta *, const char *, int64_t *, int64_t *, struct jo_err *);
	int (*task_scan)(struct jo_meta *, const char *, jo_mut_task_cb, void *, struct jo_err *);
	int (*task_clear)(struct jo_meta *, const char *, struct jo_err *);
	/* the most items one task may hold (what one transaction can record); 0: no limit */
	size_t max_task_items;
	/*
	 * Records beside the tasks (meta_mut.h jo_mut_rec_*): redis in
	 * redis/mut.c, sql in sql/task.c, tkv in tkv/task.c. A family without
	 * them leaves these NULL and the calls are JO_EUNSUPPORTED. A family
	 * with them also honours url.coordinator_only in its open (no format
	 * check: a sync coordinator holds no volume).
	 */
	int (*rec_put)(struct jo_meta *, const char *, const char *, const char *,
		       const struct jo_mut_rec_cond *, bool *, struct jo_err *);
	int (*rec_get)(struct jo_meta *, const char *, const char *, char **, struct jo_err *);
	int (*rec_scan)(struct jo_meta *, const char *, const char *, jo_mut_rec_cb, void *,
			struct jo_err *);
};

/* A family's compaction bookkeeping (meta_compact.h). */
struct jo_compact_ops {
	int (*alloc_slice_ids)(struct jo_meta *, uint32_t, uint64_t *, struct jo_err *);
	int (*commit)(struct jo_meta *, const struct jo_compact_commit *, struct jo_slice_id **,
		      size_t *, struct jo_err *);
	int (*slice_abandon)(struct jo_meta *, uint64_t, uint32_t, struct jo_err *);
	int (*forget_slices)(struct jo_meta *, const struct jo_slice_id *, size_t, struct jo_err *);
	/* the most records one commit may replace (one transaction's limit); 0: no limit */
	size_t max_records;
};

/*
 * The entries of struct jo_mut_ops that every family defines under its own
 * prefix (JO_MUT_FAMILY_DECLS(jo_sql) declares jo_sql_unlink ...
 * jo_sql_rec_scan): trash removal (the family's rm.c; restore_many, which is
 * optional, stays apart) and task records and leases with the records beside
 * them (meta_mut.h jo_mut_task_*, jo_mut_rec_*).
 */
#define JO_MUT_FAMILY_DECLS(pfx)                                                            \
	int pfx##_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,    \
			 bool dir_stats, struct jo_rm_res *res, struct jo_err *err);            \
	int pfx##_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t nlen,     \
			bool dir_stats, struct jo_rm_res *res, struct jo_err *err);             \
	int pfx##_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t slen,      \
			  uint64_t parent, const char *name, size_t nlen, bool dir_stats,       \
			  const struct jo_rs_quota *quota, struct jo_rs_res *res,               \
			  bool *dst_stat_missing, struct jo_err *err);                          \
	int pfx##_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length,               \
				int64_t space, int64_t inodes, bool *written,                   \
				struct jo_err *err);                                            \
	int pfx##_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space,                \
				int64_t inodes, bool *had, struct jo_err *err);                 \
	int pfx##_task_init(struct jo_meta *m, const char *ns, struct jo_err *err);            \
	int pfx##_task_add(struct jo_meta *m, const char *ns, const char *kind,                \
			   const char *const *items, size_t n, int64_t *task_id,               \
			   size_t *added, struct jo_err *err);                                  \
	int pfx##_task_claim(struct jo_meta *m, const char *ns, const char *owner,             \
			     int64_t lease_ms, struct jo_mut_task *out, struct jo_err *err);    \
	int pfx##_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner, \
			     int64_t lease_ms, int64_t *expire_ms, struct jo_err *err);        \
	int pfx##_task_release(struct jo_meta *m, const char *ns, int64_t id,                  \
			       const char *owner, struct jo_err *err);                          \
	int pfx##_task_complete(struct jo_meta *m, const char *ns, int64_t id,                 \
				const char *owner, struct jo_err *err);                         \
	int pfx##_task_count(struct jo_meta *m, const char *ns, int64_t *total,                \
			     int64_t *leased, struct jo_err *err);                              \
	int pfx##_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb,              \
			    void *payload, struct jo_err *err);                                 \
	int pfx##_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err);           \
	int pfx##_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val, \
			  const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err);  \
	int pfx##_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,      \
			  struct jo_err *err);                                                  \
	int pfx##_rec_scan(struct jo_meta *m, const char *ns, const char *prefix,              \
			   jo_mut_rec_cb cb, void *payload, struct jo_err *err)

/* Slice lists of the refcount-decrementing transactions (mut.c):
 * append (JO_ENOMEM on failure); at the end free recs and, on error,
 * *freed (reset to empty). Returns rc. */
int jo_sref_push(struct jo_sref **arr, size_t *n, size_t *cap, uint64_t id, uint32_t size);
int jo_sref_finish(int rc, struct jo_sref *recs, struct jo_sref **freed, size_t *nfreed);

/* A compaction's freed-slice list (compact.c): append (id, size) unless it
 * is there already; JO_ENOMEM on failure. */
int jo_slice_id_add(struct jo_slice_id **v, size_t *n, uint64_t id, uint32_t size);

/* Task namespace and owner checks (mut.c), for families that build names from them. */
#define JO_TASK_NS_MAX 16

#endif
