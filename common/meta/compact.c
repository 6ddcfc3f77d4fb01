/* meta_compact.h dispatch to the engine's implementation. */
#include "common/meta/meta_compact.h"

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/meta_mut.h"

int jo_meta_redis_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				  struct jo_err *err);
int jo_meta_redis_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				 struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err);
int jo_meta_redis_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				struct jo_err *err);
int jo_meta_sqlite_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
				   struct jo_err *err);
int jo_meta_sqlite_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
				  struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err);
int jo_meta_sqlite_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size,
				 struct jo_err *err);

#define DISPATCH(fn, ...) \
	(jo_meta_redis_conn(m) ? jo_meta_redis_##fn(m, __VA_ARGS__) : \
	 jo_meta_sqlite_db(m) ? jo_meta_sqlite_##fn(m, __VA_ARGS__) : \
	 jo_err_set(err, JO_EUNSUPPORTED, "compaction is not supported on %s", jo_meta_engine(m)))

int jo_meta_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first, struct jo_err *err)
{
	return DISPATCH(alloc_slice_ids, n, first, err);
}

int jo_meta_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
			   struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	return DISPATCH(compact_commit, c, freed, nfreed, err);
}

int jo_meta_sqlite_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
				 struct jo_err *err);

int jo_meta_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			  struct jo_err *err)
{
	if (jo_meta_sqlite_db(m))
		return jo_meta_sqlite_forget_slices(m, v, n, err);
	for (size_t i = 0; i < n; i++) {
		int rc = jo_mut_forget_slice(m, v[i].id, v[i].size, err);

		if (rc)
			return rc;
	}
	return 0;
}

int jo_meta_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	return DISPATCH(slice_abandon, id, size, err);
}
