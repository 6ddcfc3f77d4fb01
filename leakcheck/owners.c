/*
 * owners.c: which files own the blocks a leakcheck found missing.
 *
 * The reference scan keeps no inode per reference (it would grow every sort
 * record of every run for an answer needed only when blocks are missing), so
 * the missing items are held back, and after the merge one more pass over the
 * chunks finds the (inode, chunk) that list each missing slice; each inode is
 * then named by a path. The pass runs only when something is missing, and
 * holds at most `cap` items: past that, lines go out without owners.
 */
#include "leakcheck/leak.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"

struct owned {
	struct leak_item it;
	size_t first, n;          /* its owners: own[first .. first+n) after resolve */
};

struct leak_owners {
	struct owned *v;
	size_t n, cap;
	uint64_t *ids;            /* distinct slice ids of v, sorted */
	size_t nids;
	struct leak_owner *own;   /* (slice id, inode, chunk) found by the pass */
	size_t nown, owncap;
	char **paths;             /* per own[]: a path, or NULL */
	char **whys;              /* per own[]: why no path */
};

int leak_owners_new(struct leak_owners **out, size_t cap, struct jo_err *err)
{
	struct leak_owners *o = calloc(1, sizeof(*o));

	*out = NULL;
	if (!o)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	o->cap = cap;
	*out = o;
	return 0;
}

void leak_owners_free(struct leak_owners *o)
{
	if (!o)
		return;
	for (size_t i = 0; i < o->nown; i++) {
		free(o->paths ? o->paths[i] : NULL);
		free(o->whys ? o->whys[i] : NULL);
	}
	free(o->paths);
	free(o->whys);
	free(o->own);
	free(o->ids);
	free(o->v);
	free(o);
}

bool leak_owners_add(struct leak_owners *o, const struct leak_item *it)
{
	if (o->n == o->cap)
		return false;
	if (!o->v && !(o->v = calloc(o->cap, sizeof(*o->v))))
		return false;
	o->v[o->n].it = *it;
	o->v[o->n].it.key = NULL;
	o->v[o->n].it.reason = it->reason;  /* static */
	o->n++;
	return true;
}

size_t leak_owners_count(const struct leak_owners *o)
{
	return o ? o->n : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int cmp_own(const void *a, const void *b)
{
	const struct leak_owner *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->indx < y->indx ? -1 : x->indx > y->indx;
}

struct pass {
	struct leak_owners *o;
	struct jo_err *err;
};

/* Owners per slice kept: a slice shared by more (clones, snapshots) is named
 * by its first ones. */
#define OWNERS_PER_SLICE 8

static int on_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *payload)
{
	struct pass *p = payload;
	struct leak_owners *o = p->o;

	for (size_t off = 0; off + 24 <= len; off += 24) {
		struct jo_slice s;

		jo_slice_decode(raw + off, &s);
		if (!s.id || !bsearch(&s.id, o->ids, o->nids, sizeof(*o->ids), cmp_u64))
			continue;
		/* a chunk that lists the slice twice names it once */
		if (o->nown && o->own[o->nown - 1].id == s.id && o->own[o->nown - 1].ino == ino &&
		    o->own[o->nown - 1].indx == indx)
			continue;
		if (jo_grow_array(&o->own, &o->owncap, o->nown + 1, sizeof(*o->own)))
			return jo_err_set(p->err, JO_ENOMEM, "out of memory");
		o->own[o->nown++] = (struct leak_owner){ .id = s.id, .ino = ino, .indx = indx };
	}
	return 0;
}

int leak_owners_resolve(struct leak_owners *o, struct jo_meta *m, struct jo_err *err)
{
	struct pass p = { o, err };
	size_t i, j, k;
	int rc;

	if (!o || !o->n)
		return 0;
	if (!(o->ids = malloc(o->n * sizeof(*o->ids))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (i = 0; i < o->n; i++)
		o->ids[i] = o->v[i].it.id;
	qsort(o->ids, o->n, sizeof(*o->ids), cmp_u64);
	for (i = j = 0; i < o->n; i++)
		if (!j || o->ids[j - 1] != o->ids[i])
			o->ids[j++] = o->ids[i];
	o->nids = j;
	if ((rc = jo_meta_scan_chunks(m, on_chunk, &p, err)) != 0)
		return rc;
	qsort(o->own, o->nown, sizeof(*o->own), cmp_own);
	/* at most OWNERS_PER_SLICE per slice */
	for (i = j = 0; i < o->nown; i++) {
		if (j >= OWNERS_PER_SLICE && o->own[j - OWNERS_PER_SLICE].id == o->own[i].id)
			continue;
		o->own[j++] = o->own[i];
	}
	o->nown = j;
	o->paths = calloc(o->nown ? o->nown : 1, sizeof(*o->paths));
	o->whys = calloc(o->nown ? o->nown : 1, sizeof(*o->whys));
	if (!o->paths || !o->whys)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (i = 0; i < o->nown; i++) {
		struct jo_err e = { 0 };

		/* the same inode owning several missing slices: one lookup */
		for (k = 0; k < i; k++)
			if (o->own[k].ino == o->own[i].ino)
				break;
		if (k < i && o->paths[k]) {
			o->paths[i] = strdup(o->paths[k]);
		} else if (k < i) {
			o->whys[i] = o->whys[k] ? strdup(o->whys[k]) : NULL;
		} else if (jo_meta_path_of(m, o->own[i].ino, &o->paths[i], &e) != 0) {
			/* a removed file (its chunks wait for gc), a hard link */
			o->whys[i] = strdup(e.code == JO_ENOTFOUND ? e.msg : "path unknown");
			if (e.code != JO_ENOTFOUND && e.code != JO_EPROTO)
				return jo_err_set(err, e.code, "naming the owner of a missing block: %s",
						  e.msg);
		}
	}
	/* each item's owners: the run of own[] with its slice id */
	for (i = 0; i < o->n; i++) {
		size_t lo = 0, hi = o->nown;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (o->own[mid].id < o->v[i].it.id)
				lo = mid + 1;
			else
				hi = mid;
		}
		o->v[i].first = lo;
		for (k = lo; k < o->nown && o->own[k].id == o->v[i].it.id; k++)
			;
		o->v[i].n = k - lo;
	}
	return 0;
}

const struct leak_item *leak_owners_item(const struct leak_owners *o, size_t i,
					  const struct leak_owner **owners, size_t *nowners)
{
	*owners = o->own ? o->own + o->v[i].first : NULL;
	*nowners = o->v[i].n;
	return &o->v[i].it;
}

const char *leak_owner_path(const struct leak_owners *o, const struct leak_owner *w,
			    const char **why)
{
	size_t i = (size_t)(w - o->own);

	*why = o->whys[i] ? o->whys[i] : "path unknown";
	return o->paths[i];
}
