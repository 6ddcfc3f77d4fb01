/* meta_compact.h: dispatch to the family's compaction bookkeeping. */
#include "common/meta/meta_compact.h"

#include <stdlib.h>

#include "common/err.h"
#include "common/meta/engine_internal.h"
#include "common/meta/meta_internal.h"

int jo_meta_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first, struct jo_err *err)
{
	return m->ops->compact->alloc_slice_ids(m, n, first, err);
}

int jo_meta_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
			   struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err)
{
	jo_err_clear(err); /* set on success only when freed slices were left pending */
	return m->ops->compact->commit(m, c, freed, nfreed, err);
}

int jo_meta_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			  struct jo_err *err)
{
	return n ? m->ops->compact->forget_slices(m, v, n, err) : 0;
}

int jo_meta_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err)
{
	return m->ops->compact->slice_abandon(m, id, size, err);
}

size_t jo_meta_compact_max_records(struct jo_meta *m)
{
	return m->ops->compact->max_records;
}

int jo_slice_id_add(struct jo_slice_id **v, size_t *n, uint64_t id, uint32_t size)
{
	struct jo_slice_id *nv;

	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].id == id && (*v)[i].size == size)
			return 0;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return JO_ENOMEM;
	nv[*n].id = id;
	nv[*n].size = size;
	*v = nv;
	(*n)++;
	return 0;
}
