/* ranges.c: a set of (file, offset, length) ranges; sort, align, merge. */
#include "lanceparse/lance.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"

void lance_rangeset_init(struct lance_rangeset *s)
{
	memset(s, 0, sizeof(*s));
}

void lance_rangeset_release(struct lance_rangeset *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s->sizes);
	free(s->r);
	memset(s, 0, sizeof(*s));
}

int lance_rangeset_file(struct lance_rangeset *s, const char *path, uint64_t size)
{
	/* Files are added in runs: checking the last few avoids a quadratic scan. */
	size_t lo = s->nfiles > 8 ? s->nfiles - 8 : 0;

	for (size_t i = s->nfiles; i-- > lo;)
		if (strcmp(s->files[i], path) == 0) {
			if (size)
				s->sizes[i] = size;
			return (int)i;
		}
	if (s->nfiles == s->capfiles) {
		size_t nc = s->capfiles ? s->capfiles * 2 : 16;
		char **f = realloc(s->files, nc * sizeof(*f));
		if (!f)
			return JO_ENOMEM;
		s->files = f;
		uint64_t *z = realloc(s->sizes, nc * sizeof(*z));
		if (!z)
			return JO_ENOMEM;
		s->sizes = z;
		s->capfiles = nc;
	}
	if (s->nfiles >= INT32_MAX || !(s->files[s->nfiles] = strdup(path)))
		return JO_ENOMEM;
	s->sizes[s->nfiles] = size;
	return (int)s->nfiles++;
}

int lance_rangeset_add(struct lance_rangeset *s, uint32_t file, uint64_t off, uint64_t len,
		       int kind)
{
	if (len == 0)
		return 0;
	if (jo_grow_array(&s->r, &s->cap, s->n + 1, sizeof(*s->r)))
		return JO_ENOMEM;
	s->r[s->n++] = (struct lance_range){ .file = file, .kind = kind, .off = off, .len = len };
	return 0;
}

/* qsort has no payload argument: sort by file index after renumbering files by name. */
static int cmp_range(const void *a, const void *b)
{
	const struct lance_range *x = a, *y = b;

	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return 0;
}

struct name_idx {
	const char *name;
	uint32_t idx;
};

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct name_idx *)a)->name, ((const struct name_idx *)b)->name);
}

void lance_rangeset_finish(struct lance_rangeset *s, uint64_t align, uint64_t gap)
{
	struct name_idx *ni;
	uint32_t *rank;
	size_t out = 0;

	if (s->nfiles == 0)
		return;
	/* Renumber files in name order so that sorting by index sorts by path. */
	ni = malloc(s->nfiles * sizeof(*ni));
	rank = malloc(s->nfiles * sizeof(*rank));
	char **files = malloc(s->nfiles * sizeof(*files));
	uint64_t *sizes = malloc(s->nfiles * sizeof(*sizes));
	if (ni && rank && files && sizes) {
		for (size_t i = 0; i < s->nfiles; i++)
			ni[i] = (struct name_idx){ s->files[i], (uint32_t)i };
		qsort(ni, s->nfiles, sizeof(*ni), cmp_name);
		size_t nf = 0;
		for (size_t i = 0; i < s->nfiles; i++) {
			/* A path interned twice becomes one file. */
			if (nf > 0 && strcmp(files[nf - 1], ni[i].name) == 0) {
				rank[ni[i].idx] = (uint32_t)(nf - 1);
				if (!sizes[nf - 1])
					sizes[nf - 1] = s->sizes[ni[i].idx];
				free(s->files[ni[i].idx]);
				continue;
			}
			rank[ni[i].idx] = (uint32_t)nf;
			files[nf] = s->files[ni[i].idx];
			sizes[nf] = s->sizes[ni[i].idx];
			nf++;
		}
		for (size_t i = 0; i < s->n; i++)
			s->r[i].file = rank[s->r[i].file];
		free(s->files);
		free(s->sizes);
		s->files = files;
		s->sizes = sizes;
		s->capfiles = s->nfiles; /* the size the new arrays were allocated with */
		s->nfiles = nf;
		files = NULL;
		sizes = NULL;
	}
	/* Without memory for the renumbering, ranges stay sorted by first use. */
	free(ni);
	free(rank);
	free(files);
	free(sizes);

	for (size_t i = 0; i < s->n; i++) {
		struct lance_range *r = &s->r[i];
		uint64_t fsz = s->sizes[r->file];
		uint64_t end = r->off + r->len;
		if (end < r->off)
			end = UINT64_MAX;
		if (align > 1) {
			r->off -= r->off % align;
			if (end % align)
				end = end > UINT64_MAX - align ? UINT64_MAX : end + (align - end % align);
		}
		if (fsz && end > fsz)
			end = fsz;
		r->len = end > r->off ? end - r->off : 0;
	}
	qsort(s->r, s->n, sizeof(*s->r), cmp_range);
	for (size_t i = 0; i < s->n; i++) {
		struct lance_range *r = &s->r[i];
		if (r->len == 0)
			continue;
		if (out > 0) {
			struct lance_range *p = &s->r[out - 1];
			if (p->file == r->file && (r->off <= p->off + p->len ||
						    r->off - (p->off + p->len) < gap)) {
				uint64_t end = r->off + r->len;
				if (end > p->off + p->len)
					p->len = end - p->off;
				p->kind |= r->kind;
				continue;
			}
		}
		s->r[out++] = *r;
	}
	s->n = out;
}
