/* leakcheck: record codecs and the one-pass merge of references and objects. */
#include "leakcheck/leak.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/mem.h"

void leak_ref_encode(uint8_t out[LEAK_REF_REC_LEN], uint64_t id, uint32_t size, int cls)
{
	memset(out, 0, LEAK_REF_REC_LEN);
	jo_put_be64(out, id);
	jo_put_be32(out + 8, size);
	out[12] = (uint8_t)cls;
}

void leak_ref_decode(const uint8_t in[LEAK_REF_REC_LEN], uint64_t *id, uint32_t *size, int *cls)
{
	*id = jo_be64(in);
	*size = jo_be32(in + 8);
	*cls = in[12];
}

void leak_obj_encode(uint8_t out[LEAK_OBJ_REC_LEN], uint64_t id, uint32_t indx, uint32_t bsize,
		     uint64_t objsize, int64_t mtime)
{
	jo_put_be64(out, id);
	jo_put_be32(out + 8, indx);
	jo_put_be32(out + 12, bsize);
	jo_put_be64(out + 16, objsize);
	jo_put_be64(out + 24, (uint64_t)mtime);
}

void leak_obj_decode(const uint8_t in[LEAK_OBJ_REC_LEN], uint64_t *id, uint32_t *indx,
		     uint32_t *bsize, uint64_t *objsize, int64_t *mtime)
{
	*id = jo_be64(in);
	*indx = jo_be32(in + 8);
	*bsize = jo_be32(in + 12);
	*objsize = jo_be64(in + 16);
	*mtime = (int64_t)jo_be64(in + 24);
}

const char *leak_kind_name(int kind)
{
	static const char *const names[LEAK_NKINDS] = {
		"valid", "delfile", "compacted", "pending", "leaked", "missing", "skipped", "foreign",
	};

	return kind >= 0 && kind < LEAK_NKINDS ? names[kind] : "?";
}

int leak_xsort_next(void *xsort, const void **rec, size_t *len, struct jo_err *err)
{
	return jo_xsort_next(xsort, rec, len, err);
}

/* One referenced size of the current slice id. */
struct gref {
	uint32_t size;
	int cls;
	uint32_t nblocks;
	uint32_t next;          /* next expected block (missing detection) */
};

struct side {
	leak_next_fn next;
	void *src;
	size_t reclen;
	const char *name;
	bool have;
	uint64_t id;
	const uint8_t *rec;
	uint64_t prev_id;
	bool started;
};

static int side_advance(struct side *s, struct jo_err *err)
{
	const void *rec;
	size_t len;
	int rc = s->next(s->src, &rec, &len, err);

	if (rc < 0)
		return rc;
	s->have = rc == 1;
	if (!s->have)
		return 0;
	if (len != s->reclen)
		return jo_err_set(err, JO_EPROTO, "leakcheck: %s record of %zu bytes", s->name, len);
	s->rec = rec;
	s->id = jo_be64(rec);
	if (s->started && s->id < s->prev_id)
		return jo_err_set(err, JO_EPROTO, "leakcheck: %s stream out of order at slice %llu",
				  s->name, (unsigned long long)s->id);
	s->started = true;
	s->prev_id = s->id;
	return 0;
}

static int class_kind(int cls)
{
	switch (cls) {
	case LEAK_REF_USED: return LEAK_VALID;
	case LEAK_REF_DELFILE: return LEAK_DELFILE;
	case LEAK_REF_TRASH: return LEAK_COMPACTED;
	default: return LEAK_PENDING;
	}
}

static int emit(const struct leak_merge_opts *o, struct leak_counts *c, struct leak_item *it)
{
	c->n[it->kind]++;
	c->bytes[it->kind] += it->size;
	if (o->cb && (it->kind == LEAK_LEAKED || it->kind == LEAK_MISSING || it->kind == LEAK_SKIPPED))
		return o->cb(it, o->payload);
	return 0;
}

static int emit_missing(const struct leak_merge_opts *o, struct leak_counts *c, uint64_t id,
			const struct gref *g, uint32_t indx)
{
	struct leak_item it = {
		.kind = LEAK_MISSING, .reason = "no_object", .id = id, .indx = indx,
		.bsize = jo_block_len(g->size, o->block_size, indx),
	};

	it.size = it.bsize;
	return emit(o, c, &it);
}

int leak_merge(const struct leak_merge_opts *o, leak_next_fn refs_next, void *refs_src,
	       leak_next_fn objs_next, void *objs_src, struct leak_counts *counts,
	       struct jo_err *err)
{
	struct side r = { .next = refs_next, .src = refs_src, .reclen = LEAK_REF_REC_LEN, .name = "reference" };
	struct side ob = { .next = objs_next, .src = objs_src, .reclen = LEAK_OBJ_REC_LEN, .name = "object" };
	struct gref *g = NULL;
	size_t ng = 0, gcap = 0;
	const uint32_t bs = o->block_size;
	int rc;

	memset(counts, 0, sizeof(*counts));
	if (bs == 0)
		return jo_err_set(err, JO_EINVAL, "leakcheck: block size 0");
	rc = side_advance(&r, err);
	if (!rc)
		rc = side_advance(&ob, err);
	while (!rc && (r.have || ob.have)) {
		uint64_t id;

		if (r.have && ob.have)
			id = r.id < ob.id ? r.id : ob.id;
		else
			id = r.have ? r.id : ob.id;

		/* the referenced sizes of this slice id, deduplicated, best class */
		ng = 0;
		while (!rc && r.have && r.id == id) {
			uint64_t rid;
			uint32_t size;
			int cls;

			leak_ref_decode(r.rec, &rid, &size, &cls);
			if (size > 0) {
				if (ng > 0 && g[ng - 1].size == size) {
					if (cls < g[ng - 1].cls)
						g[ng - 1].cls = cls;
				} else {
					if (jo_grow_array(&g, &gcap, ng + 1, sizeof(*g))) {
						rc = jo_err_set(err, JO_ENOMEM, "leakcheck: out of memory");
						break;
					}
					g[ng].size = size;
					g[ng].cls = cls;
					g[ng].nblocks = jo_slice_nblocks(size, bs);
					g[ng].next = 0;
					ng++;
				}
			}
			rc = side_advance(&r, err);
		}
		if (rc)
			break;
		if (ng)
			counts->slices++;
		/* only chunk-list slices older than the counter must have every block */
		bool track = id < o->next_chunk;

		while (!rc && ob.have && ob.id == id) {
			struct leak_item it = { 0 };
			int best = -1;

			leak_obj_decode(ob.rec, &it.id, &it.indx, &it.bsize, &it.size, &it.mtime);
			counts->objects++;
			counts->object_bytes += it.size;
			for (size_t k = 0; k < ng; k++) {
				bool ok = jo_block_valid(g[k].size, bs, it.indx, it.bsize);

				if (ok && (best < 0 || g[k].cls < g[best].cls))
					best = (int)k;
				if (!track || g[k].cls != LEAK_REF_USED)
					continue;
				while (!rc && g[k].next < it.indx && g[k].next < g[k].nblocks)
					rc = emit_missing(o, counts, id, &g[k], g[k].next++);
				if (ok && g[k].next == it.indx)
					g[k].next++;
			}
			if (rc)
				break;
			if (best >= 0) {
				it.kind = class_kind(g[best].cls);
				it.reason = "referenced";
			} else {
				it.reason = ng ? "size_mismatch" : "unreferenced";
				it.kind = LEAK_LEAKED;
				if (id >= o->next_chunk) {
					it.kind = LEAK_SKIPPED;
					it.reason = "new_slice";
					counts->skipped_new_slice++;
				} else if (it.mtime > o->cutoff) {
					it.kind = LEAK_SKIPPED;
					it.reason = "recent";
				}
			}
			rc = emit(o, counts, &it);
			if (!rc)
				rc = side_advance(&ob, err);
		}
		if (rc)
			break;
		for (size_t k = 0; k < ng && track && !rc; k++) {
			if (g[k].cls != LEAK_REF_USED)
				continue;
			while (!rc && g[k].next < g[k].nblocks)
				rc = emit_missing(o, counts, id, &g[k], g[k].next++);
		}
	}
	free(g);
	return rc;
}
