/* scan.c: byte ranges a column scan reads (spec §7, §8, §9, §10). */
#include "lanceparse/lance.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"

/* Bound on metadata we buffer for one data file (tables, column metadata). */
#define LANCE_MAX_META (256u << 20)
#define LANCE_V2_FOOTER 40
#define LANCE_V1_TAIL 16

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

struct prefetch;

struct ctx {
	struct lance_io *io;
	struct prefetch *pf;  /* tails of v2 data files read ahead, or NULL */
	const struct lance_manifest *m;
	const struct lance_scan_opts *opts;
	struct lance_rangeset *s;
	struct jo_err *err;
	int32_t *sel;        /* selected field ids, sorted */
	size_t nsel;
};

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return x < y ? -1 : x > y;
}

static bool selected(const struct ctx *c, int32_t id)
{
	return bsearch(&id, c->sel, c->nsel, sizeof(int32_t), cmp_i32) != NULL;
}

static const struct lance_field *field_by_id(const struct lance_manifest *m, int32_t id)
{
	long i = lance_field_index(m, id);
	return i < 0 ? NULL : &m->fields[i];
}

char *lance_datafile_relpath(const struct lance_manifest *m, const struct lance_datafile *df)
{
	char *p;
	size_t n;

	(void)m; /* base paths point outside the dataset: not resolved here */
	if (df->has_base)
		return NULL;
	n = strlen(df->path) + 6;
	if (!(p = malloc(n)))
		return NULL;
	snprintf(p, n, "data/%s", df->path);
	return p;
}

static int add(struct ctx *c, int file, uint64_t off, uint64_t len, int kind)
{
	if (lance_rangeset_add(c->s, (uint32_t)file, off, len, kind) < 0)
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	return 0;
}

/* The reader's first read of a file: its last tail_block bytes. */
static int add_tail_block(struct ctx *c, int file, uint64_t size)
{
	uint64_t tb = c->opts->tail_block;

	if (tb == 0)
		return 0;
	return add(c, file, size > tb ? size - tb : 0, size > tb ? tb : size, LANCE_RK_META);
}

/* Read [off, size) of rel into a malloc'd buffer. */
static int pf_take(struct ctx *c, const char *rel, uint64_t off, uint64_t size, uint8_t **out,
		   int *rc);

static int read_tail(struct ctx *c, const char *rel, uint64_t off, uint64_t size, uint8_t **out)
{
	int rc;

	*out = NULL;
	if (c->pf && pf_take(c, rel, off, size, out, &rc))
		return rc;
	if (size - off > LANCE_MAX_META)
		return jo_err_set(c->err, JO_EPROTO, "'%s': metadata of %" PRIu64 " bytes is too large",
				  rel, size - off);
	if (!(*out = malloc(size - off ? size - off : 1)))
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	if ((rc = lance_io_pread(c->io, rel, *out, (size_t)(size - off), off, c->err)) < 0) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* ---------------- v2 files ---------------- */

struct buf_list {
	uint64_t (*r)[2];
	size_t n, cap;
};

static int bl_add(struct buf_list *b, uint64_t off, uint64_t len)
{
	if (jo_grow_array(&b->r, &b->cap, b->n + 1, sizeof(*b->r)))
		return JO_ENOMEM;
	b->r[b->n][0] = off;
	b->r[b->n][1] = len;
	b->n++;
	return 0;
}

/* Append the buffers of a Page or of ColumnMetadata's column-level buffers. */
static int pairs(struct ctx *c, const char *rel, const uint64_t *offs, size_t noffs,
		 const uint64_t *sizes, size_t nsizes, uint64_t limit, struct buf_list *out)
{
	if (noffs != nsizes)
		return jo_err_set(c->err, JO_EPROTO, "'%s': %zu buffer offsets but %zu sizes", rel,
				  noffs, nsizes);
	for (size_t i = 0; i < noffs; i++) {
		if (sizes[i] == 0)
			continue;
		if (offs[i] > limit || sizes[i] > limit - offs[i])
			return jo_err_set(c->err, JO_EPROTO,
					  "'%s': buffer [%" PRIu64 ", +%" PRIu64 ") lies outside the data region",
					  rel, offs[i], sizes[i]);
		if (bl_add(out, offs[i], sizes[i]) < 0)
			return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* A DeferredEncoding / Encoding holding an indirect buffer (spec §7.2). */
static int encoding_buffers(struct ctx *c, const char *rel, const struct lance_pb_field *f,
			    uint64_t limit, struct buf_list *out)
{
	struct lance_pb r, d;
	struct lance_pb_field e, g;
	int rc;

	if (f->wt != LANCE_PB_LEN)
		return jo_err_set(c->err, JO_EPROTO, "'%s': bad encoding field", rel);
	lance_pb_init(&r, f->data, f->len);
	while ((rc = lance_pb_next(&r, &e, c->err)) > 0) {
		uint64_t loc = 0, len = 0;
		if (e.num != 1 || e.wt != LANCE_PB_LEN)
			continue;
		lance_pb_init(&d, e.data, e.len);
		while ((rc = lance_pb_next(&d, &g, c->err)) > 0) {
			if (g.num == 1)
				loc = g.u;
			else if (g.num == 2)
				len = g.u;
		}
		if (rc < 0)
			return rc;
		if ((rc = pairs(c, rel, &loc, 1, &len, 1, limit, out)) < 0)
			return rc;
	}
	return rc;
}

static int column_buffers(struct ctx *c, const char *rel, const uint8_t *d, size_t len,
			  uint64_t limit, struct buf_list *out)
{
	struct lance_pb r, pr;
	struct lance_pb_field f, pf;
	uint64_t *co = NULL, *cs = NULL;
	size_t nco = 0, ncs = 0;
	int rc;

	lance_pb_init(&r, d, len);
	while ((rc = lance_pb_next(&r, &f, c->err)) > 0) {
		if (f.num == 1) {
			if ((rc = encoding_buffers(c, rel, &f, limit, out)) < 0)
				break;
		} else if (f.num == 2) {
			uint64_t *po = NULL, *ps = NULL;
			size_t npo = 0, nps = 0;
			if (f.wt != LANCE_PB_LEN) {
				rc = jo_err_set(c->err, JO_EPROTO, "'%s': bad page", rel);
				break;
			}
			lance_pb_init(&pr, f.data, f.len);
			while ((rc = lance_pb_next(&pr, &pf, c->err)) > 0) {
				if (pf.num == 1)
					rc = lance_pb_repeated_u64(&pf, &po, &npo, c->err);
				else if (pf.num == 2)
					rc = lance_pb_repeated_u64(&pf, &ps, &nps, c->err);
				else if (pf.num == 4)
					rc = encoding_buffers(c, rel, &pf, limit, out);
				if (rc < 0)
					break;
			}
			if (rc == 0)
				rc = pairs(c, rel, po, npo, ps, nps, limit, out);
			free(po);
			free(ps);
			if (rc < 0)
				break;
		} else if (f.num == 3) {
			if ((rc = lance_pb_repeated_u64(&f, &co, &nco, c->err)) < 0)
				break;
		} else if (f.num == 4) {
			if ((rc = lance_pb_repeated_u64(&f, &cs, &ncs, c->err)) < 0)
				break;
		}
	}
	if (rc == 0)
		rc = pairs(c, rel, co, nco, cs, ncs, limit, out);
	free(co);
	free(cs);
	return rc;
}

static int cmp_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Blob payloads: the unreferenced gaps of the data region (spec §7.6). */
static int blob_gaps(struct ctx *c, int file, struct buf_list *all, uint64_t data_end)
{
	uint64_t pos = 0;
	int rc;

	qsort(all->r, all->n, sizeof(*all->r), cmp_pair);
	for (size_t i = 0; i <= all->n; i++) {
		uint64_t start = i < all->n ? all->r[i][0] : data_end;
		if (start > pos && start - pos >= 64)
			if ((rc = add(c, file, pos, start - pos, LANCE_RK_DATA)) < 0)
				return rc;
		if (i < all->n && all->r[i][0] + all->r[i][1] > pos)
			pos = all->r[i][0] + all->r[i][1];
	}
	return 0;
}

struct sidecar {
	struct ctx *c;
	const char *dir;
	int rc;
};

static int sidecar_cb(const char *name, void *payload)
{
	struct sidecar *sc = payload;
	char rel[1024];
	uint64_t size;
	int file, rc;

	snprintf(rel, sizeof(rel), "%s/%s", sc->dir, name);
	if ((rc = lance_io_size(sc->c->io, rel, &size, sc->c->err)) < 0)
		return sc->rc = rc;
	if ((file = lance_rangeset_file(sc->c->s, rel, size)) < 0)
		return sc->rc = jo_err_set(sc->c->err, JO_ENOMEM, "out of memory");
	return sc->rc = add(sc->c, file, 0, size, LANCE_RK_DATA);
}

/* The tail of a v2 file read for its footer: the tables' offsets, and the bytes from start. */
struct v2_tail {
	uint8_t *buf;           /* the file's bytes [start, size) */
	uint64_t start, size;
	uint64_t A, B, C;       /* column metadata, its offsets table, the global buffers table */
	uint32_t ngb, ncols;
	uint64_t gbo0;          /* global buffer 0: where the metadata starts */
};

static const uint8_t *v2_at(const struct v2_tail *t, uint64_t pos)
{
	return t->buf + (pos - t->start);
}

/* The footer read and checked; the tail read again from its first table when needed. */
static int v2_footer(struct ctx *c, const struct lance_datafile *df, const char *rel,
		     struct v2_tail *t)
{
	uint64_t size = t->size;
	int rc;

	/* One read of the last 16 KiB holds the whole tail of most files. */
	t->start = size > 16384 ? size - 16384 : 0;
	if ((rc = read_tail(c, rel, t->start, size, &t->buf)) < 0)
		return rc;
	const uint8_t *ft = t->buf + (size - t->start) - LANCE_V2_FOOTER;
	if (memcmp(ft + 36, "LANC", 4) != 0)
		return jo_err_set(c->err, JO_EPROTO, "'%s' has no LANC magic", rel);
	t->A = le(ft, 8);
	t->B = le(ft + 8, 8);
	t->C = le(ft + 16, 8);
	t->ngb = (uint32_t)le(ft + 24, 4);
	t->ncols = (uint32_t)le(ft + 28, 4);
	uint16_t fmaj = (uint16_t)le(ft + 32, 2), fmin = (uint16_t)le(ft + 34, 2);
	if (fmaj == 0 && fmin < 3)
		return jo_err_set(c->err, JO_EPROTO, "'%s': footer says v1 file %u.%u but the manifest says %u.%u",
				  rel, fmaj, fmin, df->major, df->minor);
	uint64_t A = t->A, B = t->B, C = t->C;
	if (!(A <= B && B <= C && C <= size - LANCE_V2_FOOTER &&
	      (uint64_t)t->ncols * 16 <= C - B && (uint64_t)t->ngb * 16 == size - LANCE_V2_FOOTER - C &&
	      t->ngb >= 1))
		return jo_err_set(c->err, JO_EPROTO, "'%s': corrupt footer (tables out of order)", rel);
	if (C < t->start || A < t->start) {
		uint64_t ns = A < C ? A : C;
		free(t->buf);
		t->buf = NULL;
		t->start = ns;
		if ((rc = read_tail(c, rel, t->start, size, &t->buf)) < 0)
			return rc;
	}
	return 0;
}

/* The metadata's ranges ([GBO[0].pos, EOF) and the first tail read), then the other
 * global buffers (data, also noted in all). */
static int v2_global_buffers(struct ctx *c, const char *rel, int file, struct v2_tail *t,
			     struct buf_list *all)
{
	const uint8_t *gt = v2_at(t, t->C);
	uint64_t gbo0_size, size = t->size;
	int rc;

	t->gbo0 = le(gt, 8);
	gbo0_size = le(gt + 8, 8);
	if (t->gbo0 > t->A || gbo0_size > t->A - t->gbo0)
		return jo_err_set(c->err, JO_EPROTO, "'%s': global buffer 0 lies outside the file", rel);
	/* Metadata: what Lance reads, [GBO[0].pos, EOF) plus its first tail read. */
	if ((rc = add(c, file, t->gbo0, size - t->gbo0, LANCE_RK_META)) < 0 ||
	    (rc = add_tail_block(c, file, size)) < 0)
		return rc;
	for (uint32_t g = 1; g < t->ngb; g++) {
		uint64_t gp = le(gt + 16 * g, 8), gs = le(gt + 16 * g + 8, 8);
		if (gp > size || gs > size - gp)
			return jo_err_set(c->err, JO_EPROTO, "'%s': global buffer %u out of range", rel, g);
		if ((rc = add(c, file, gp, gs, LANCE_RK_DATA)) < 0 || (rc = bl_add(all, gp, gs)) < 0)
			return rc;
	}
	return 0;
}

/* Which field owns each column (spec §7.3): *owner, ncols of them. */
static int v2_column_owners(struct ctx *c, const struct lance_datafile *df, const char *rel,
			    uint32_t ncols, int32_t **owner_out)
{
	int32_t *owner = malloc((ncols ? ncols : 1) * sizeof(*owner));

	if (!(*owner_out = owner))
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < ncols; i++)
		owner[i] = INT32_MIN;
	if (df->ncolumn_indices == 0) {
		/* Older v2 writers: column i belongs to fields[i]. */
		for (size_t i = 0; i < df->nfields && i < ncols; i++)
			owner[i] = df->fields[i];
	} else {
		if (df->ncolumn_indices != df->nfields)
			return jo_err_set(c->err, JO_EPROTO, "'%s': %zu fields but %zu column indices", rel,
					  df->nfields, df->ncolumn_indices);
		for (size_t i = 0; i < df->nfields; i++) {
			int32_t ci = df->column_indices[i];
			if (df->fields[i] < 0 || ci < 0)
				continue;
			if ((uint32_t)ci >= ncols)
				return jo_err_set(c->err, JO_EPROTO, "'%s': column index %d >= %u columns",
						  rel, (int)ci, ncols);
			owner[ci] = df->fields[i];
		}
	}
	for (uint32_t i = 1; i < ncols; i++)
		if (owner[i] == INT32_MIN)
			owner[i] = owner[i - 1];
	return 0;
}

/* What the blobs of the selected columns need: their gaps, and v2's sidecar files. */
struct v2_blobs {
	bool want, has_v2;
};

/* The buffers of each column: of the selected ones in sel (and all), the others in all
 * when blob payloads are asked for. */
static int v2_columns(struct ctx *c, const char *rel, const struct v2_tail *t,
		      const int32_t *owner, struct buf_list *sel, struct buf_list *all,
		      struct v2_blobs *bl)
{
	int rc;

	for (uint32_t col = 0; col < t->ncols; col++) {
		bool is_sel = owner[col] != INT32_MIN && selected(c, owner[col]);
		const struct lance_field *fl = is_sel ? field_by_id(c->m, owner[col]) : NULL;
		bool blob = fl && (fl->blob_v1 || fl->blob_v2);
		if (!is_sel && !c->opts->blob_payloads)
			continue;
		const uint8_t *ct = v2_at(t, t->B) + 16 * (uint64_t)col;
		uint64_t cp = le(ct, 8), cs = le(ct + 8, 8);
		if (cp < t->A || cp > t->B || cs > t->B - cp)
			return jo_err_set(c->err, JO_EPROTO, "'%s': column %u metadata out of range", rel,
					  col);
		size_t before = sel->n;
		if ((rc = column_buffers(c, rel, v2_at(t, cp), (size_t)cs, t->gbo0,
					 is_sel ? sel : all)) < 0) {
			jo_err_wrap(c->err, "'%s' column %u", rel, col);
			return rc;
		}
		if (is_sel) {
			for (size_t i = before; i < sel->n; i++)
				if ((rc = bl_add(all, sel->r[i][0], sel->r[i][1])) < 0)
					return jo_err_set(c->err, JO_ENOMEM, "out of memory");
			if (blob)
				bl->want = true;
			if (fl && fl->blob_v2)
				bl->has_v2 = true;
		}
	}
	return 0;
}

/* Sidecars of blob v2: every file in data/<data-file-stem>/ */
static int v2_sidecars(struct ctx *c, const char *rel)
{
	char dir[1024];
	size_t n = strlen(rel);
	if (n > 6 && strcmp(rel + n - 6, ".lance") == 0)
		n -= 6;
	snprintf(dir, sizeof(dir), "%.*s", (int)n, rel);
	struct sidecar sc = { c, dir, 0 };
	int rc = lance_io_list(c->io, dir, sidecar_cb, &sc, c->err);
	if (rc == JO_ENOTFOUND)
		rc = 0;
	if (rc == 0)
		rc = sc.rc;
	return rc < 0 ? rc : 0;
}

static int scan_v2(struct ctx *c, const struct lance_datafile *df, const char *rel, int file,
		   uint64_t size)
{
	struct v2_tail t = { .size = size };
	int32_t *owner = NULL;
	struct buf_list sel = { 0 }, all = { 0 };
	struct v2_blobs bl = { 0 };
	int rc;

	if (size < LANCE_V2_FOOTER)
		return jo_err_set(c->err, JO_EPROTO, "'%s' is truncated (%" PRIu64 " bytes)", rel, size);
	if ((rc = v2_footer(c, df, rel, &t)) != 0 ||
	    (rc = v2_global_buffers(c, rel, file, &t, &all)) != 0 ||
	    (rc = v2_column_owners(c, df, rel, t.ncols, &owner)) != 0 ||
	    (rc = v2_columns(c, rel, &t, owner, &sel, &all, &bl)) != 0)
		goto out;
	for (size_t i = 0; i < sel.n; i++)
		if ((rc = add(c, file, sel.r[i][0], sel.r[i][1], LANCE_RK_DATA)) < 0)
			goto out;
	if (c->opts->blob_payloads && bl.want) {
		if ((rc = blob_gaps(c, file, &all, t.gbo0)) < 0)
			goto out;
		if (bl.has_v2 && (rc = v2_sidecars(c, rel)) != 0)
			goto out;
	}
	rc = 0;
out:
	free(t.buf);
	free(owner);
	free(sel.r);
	free(all.r);
	return rc;
}

/* ---------------- v1 files ---------------- */

static int type_width(const char *t, uint64_t *bits)
{
	static const struct { const char *name; unsigned bits; } w[] = {
		{ "bool", 1 }, { "int8", 8 }, { "uint8", 8 }, { "int16", 16 }, { "uint16", 16 },
		{ "halffloat", 16 }, { "int32", 32 }, { "uint32", 32 }, { "float", 32 },
		{ "date32:day", 32 }, { "int64", 64 }, { "uint64", 64 }, { "double", 64 },
		{ "date64:ms", 64 },
	};
	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (strcmp(t, w[i].name) == 0) {
			*bits = w[i].bits;
			return 0;
		}
	if (strncmp(t, "time32:", 7) == 0) {
		*bits = 32;
		return 0;
	}
	if (strncmp(t, "time64:", 7) == 0 || strncmp(t, "timestamp:", 10) == 0 ||
	    strncmp(t, "duration:", 9) == 0) {
		*bits = 64;
		return 0;
	}
	if (strncmp(t, "decimal:128:", 12) == 0) {
		*bits = 128;
		return 0;
	}
	if (strncmp(t, "decimal:256:", 12) == 0) {
		*bits = 256;
		return 0;
	}
	if (strncmp(t, "fixed_size_binary:", 18) == 0) {
		char *e;
		unsigned long long k = strtoull(t + 18, &e, 10);
		if (*e || k == 0 || k > (1u << 30))
			return -1;
		*bits = 8 * k;
		return 0;
	}
	if (strncmp(t, "fixed_size_list:", 16) == 0) {
		const char *colon = strrchr(t, ':');
		char inner[128], *e;
		uint64_t ib;
		unsigned long long k = strtoull(colon + 1, &e, 10);
		size_t il = (size_t)(colon - (t + 16));
		if (*e || k == 0 || k > (1u << 30) || il == 0 || il >= sizeof(inner))
			return -1;
		memcpy(inner, t + 16, il);
		inner[il] = '\0';
		if (type_width(inner, &ib) < 0)
			return -1;
		*bits = ib * k;
		return 0;
	}
	return -1;
}

static int v1_page(struct ctx *c, const char *rel, int file, const struct lance_field *fl,
		   uint64_t p, uint64_t n, uint64_t data_end)
{
	const char *t = fl->logical_type;
	uint64_t bits, len;
	int rc;

	if (strcmp(t, "struct") == 0 || strcmp(t, "null") == 0)
		return 0;
	if (strcmp(t, "list") == 0 || strcmp(t, "list.struct") == 0)
		bits = 32;
	else if (strcmp(t, "large_list") == 0 || strcmp(t, "large_list.struct") == 0)
		bits = 64;
	else if (strcmp(t, "string") == 0 || strcmp(t, "binary") == 0 ||
		 strcmp(t, "large_string") == 0 || strcmp(t, "large_binary") == 0) {
		uint8_t b[8];
		if (n > data_end / 8 || p > data_end || 8 * (n + 1) > data_end - p)
			return jo_err_set(c->err, JO_EPROTO, "'%s': field %d page out of range", rel,
					  (int)fl->id);
		if ((rc = lance_io_pread(c->io, rel, b, 8, p, c->err)) < 0)
			return rc;
		uint64_t s = le(b, 8);
		if (s > p)
			return jo_err_set(c->err, JO_EPROTO, "'%s': field %d values start after positions",
					  rel, (int)fl->id);
		if ((rc = add(c, file, s, p - s, LANCE_RK_DATA)) < 0)
			return rc;
		return add(c, file, p, 8 * (n + 1), LANCE_RK_DATA);
	} else if (strncmp(t, "dict:", 5) == 0) {
		const char *idx = strchr(t + 5, ':');
		char it[32];
		const char *end = idx ? strchr(idx + 1, ':') : NULL;
		if (!idx || !end || (size_t)(end - idx - 1) >= sizeof(it))
			return jo_err_set(c->err, JO_EPROTO, "'%s': bad type '%s'", rel, t);
		memcpy(it, idx + 1, (size_t)(end - idx - 1));
		it[end - idx - 1] = '\0';
		if (type_width(it, &bits) < 0)
			return jo_err_set(c->err, JO_EUNSUPPORTED, "'%s': unknown type '%s'", rel, t);
	} else if (type_width(t, &bits) < 0) {
		return jo_err_set(c->err, JO_EUNSUPPORTED, "'%s': field %d has unknown type '%s'", rel,
				  (int)fl->id, t);
	}
	if (n > UINT64_MAX / bits)
		return jo_err_set(c->err, JO_EPROTO, "'%s': page too large", rel);
	len = (n * bits + 7) / 8;
	if (p > data_end || len > data_end - p)
		return jo_err_set(c->err, JO_EPROTO, "'%s': field %d page out of range", rel, (int)fl->id);
	return add(c, file, p, len, LANCE_RK_DATA);
}

static int scan_v1(struct ctx *c, const struct lance_datafile *df, const char *rel, int file,
		   uint64_t size)
{
	uint8_t tail[LANCE_V1_TAIL], *meta = NULL, *pt = NULL;
	uint64_t mpos, ptp = 0, sptp = 0;
	int32_t *bo = NULL, *sfields = NULL;
	size_t nbo = 0, nsf = 0;
	bool has_stats = false;
	int32_t minid = INT32_MAX, maxid = INT32_MIN;
	int rc;

	if (size < LANCE_V1_TAIL + 4)
		return jo_err_set(c->err, JO_EPROTO, "'%s' is truncated (%" PRIu64 " bytes)", rel, size);
	if ((rc = lance_io_pread(c->io, rel, tail, sizeof(tail), size - sizeof(tail), c->err)) < 0)
		return rc;
	if (memcmp(tail + 12, "LANC", 4) != 0)
		return jo_err_set(c->err, JO_EPROTO, "'%s' has no LANC magic", rel);
	mpos = le(tail, 8);
	if (mpos > size - LANCE_V1_TAIL - 4)
		return jo_err_set(c->err, JO_EPROTO, "'%s': metadata position out of range", rel);
	if ((rc = read_tail(c, rel, mpos, size - LANCE_V1_TAIL, &meta)) < 0)
		return rc;
	uint64_t mlen = le(meta, 4);
	if (mlen > size - LANCE_V1_TAIL - mpos - 4) {
		rc = jo_err_set(c->err, JO_EPROTO, "'%s': metadata length out of range", rel);
		goto out;
	}
	struct lance_pb r;
	struct lance_pb_field f;
	lance_pb_init(&r, meta + 4, (size_t)mlen);
	while ((rc = lance_pb_next(&r, &f, c->err)) > 0) {
		if (f.num == 2)
			rc = lance_pb_repeated_i32(&f, &bo, &nbo, c->err);
		else if (f.num == 3)
			ptp = f.u;
		else if (f.num == 5 && f.wt == LANCE_PB_LEN) {
			struct lance_pb sr;
			struct lance_pb_field sf;
			has_stats = true;
			lance_pb_init(&sr, f.data, f.len);
			while ((rc = lance_pb_next(&sr, &sf, c->err)) > 0) {
				if (sf.num == 2)
					rc = lance_pb_repeated_i32(&sf, &sfields, &nsf, c->err);
				else if (sf.num == 3)
					sptp = sf.u;
				if (rc < 0)
					break;
			}
		}
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		jo_err_wrap(c->err, "'%s' metadata", rel);
		goto out;
	}
	if ((rc = add(c, file, mpos, size - mpos, LANCE_RK_META)) < 0 ||
	    (rc = add_tail_block(c, file, size)) < 0)
		goto out;
	for (size_t i = 0; i < df->nfields; i++) {
		if (df->fields[i] < 0)
			continue;
		if (df->fields[i] < minid)
			minid = df->fields[i];
		if (df->fields[i] > maxid)
			maxid = df->fields[i];
	}
	if (nbo < 1 || minid > maxid) {
		rc = 0; /* an empty file: nothing but its metadata */
		goto out;
	}
	uint64_t nb = nbo - 1, nf = (uint64_t)((int64_t)maxid - minid + 1);
	if (nb > size / 16 || nf > size / 16 || nb * nf * 16 > size || ptp > size - nb * nf * 16) {
		rc = jo_err_set(c->err, JO_EPROTO, "'%s': page table out of range", rel);
		goto out;
	}
	if ((rc = add(c, file, ptp, nb * nf * 16, LANCE_RK_META)) < 0)
		goto out;
	if (has_stats && nsf > 0) {
		int32_t smax = -1;
		for (size_t i = 0; i < nsf; i++)
			if (sfields[i] > smax)
				smax = sfields[i];
		uint64_t slen = 16 * ((uint64_t)smax + 1);
		if (sptp < size && slen <= size - sptp && (rc = add(c, file, sptp, slen, LANCE_RK_META)) < 0)
			goto out;
	}
	if ((rc = read_tail(c, rel, ptp, ptp + nb * nf * 16, &pt)) < 0)
		goto out;
	for (size_t i = 0; i < df->nfields; i++) {
		int32_t id = df->fields[i];
		if (id < 0 || !selected(c, id))
			continue;
		const struct lance_field *fl = field_by_id(c->m, id);
		if (!fl)
			continue;
		for (uint64_t b = 0; b < nb; b++) {
			const uint8_t *e = pt + 16 * ((uint64_t)(id - minid) * nb + b);
			uint64_t p = le(e, 8), n = le(e + 8, 8);
			if (p == 0 && n == 0)
				continue;
			if ((rc = v1_page(c, rel, file, fl, p, n, ptp)) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(meta);
	free(pt);
	free(bo);
	free(sfields);
	return rc;
}

/* ---------------- driver ---------------- */

/* A file the manifest names is missing: the dataset is damaged (EPROTO). */
static int as_corrupt(struct jo_err *err)
{
	char msg[sizeof(err->msg)];

	memcpy(msg, err->msg, sizeof(msg));
	return jo_err_set(err, JO_EPROTO, "%s (named by the manifest)", msg);
}

static int scan_file(struct ctx *c, const struct lance_datafile *df)
{
	char *rel;
	uint64_t size = df->file_size;
	bool any = false;
	int file, rc;

	for (size_t i = 0; i < df->nfields && !any; i++)
		any = df->fields[i] >= 0 && selected(c, df->fields[i]);
	if (!any)
		return 0;
	if (!(rel = lance_datafile_relpath(c->m, df)))
		return df->has_base
			? jo_err_set(c->err, JO_EUNSUPPORTED,
				     "data file '%s' lives in base path %u (outside the dataset)",
				     df->path, df->base_id)
			: jo_err_set(c->err, JO_ENOMEM, "out of memory");
	if (size == 0 && (rc = lance_io_size(c->io, rel, &size, c->err)) < 0)
		goto out;
	if ((file = lance_rangeset_file(c->s, rel, size)) < 0) {
		rc = jo_err_set(c->err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (df->major == 0 && df->minor < 3)
		rc = scan_v1(c, df, rel, file, size);
	else
		rc = scan_v2(c, df, rel, file, size);
out:
	if (rc == JO_ENOTFOUND)
		rc = as_corrupt(c->err);
	free(rel);
	return rc;
}

/*
 * Read-ahead of data-file tails on a store that takes concurrent reads: the
 * scan reads one tail per v2 data file (the last 16 KiB, see scan_v2), one
 * file after another, so on an object store each costs a round trip in a
 * row. PF_THREADS threads read the tails of the files the scan will visit,
 * in its order, at most PF_AHEAD files ahead of it (a bounded buffer); the
 * scan takes each when it gets there. A tail the scan asks for that is not
 * the next planned one is read as before.
 */
#define PF_THREADS 64   /* = the object store's max_conns in cmd_lance.c */
#define PF_AHEAD 256
#define PF_TAIL 16384

enum { PF_QUEUED, PF_RUNNING, PF_DONE };

struct pf_item {
	char *rel;
	uint64_t off, size;
	uint8_t *buf;
	int rc, state;
	struct jo_err err;
};

struct prefetch {
	struct lance_io *io;
	struct pf_item *it;
	size_t n, next, used;   /* next: first not started; used: first not taken */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th[PF_THREADS];
	int nth;
	bool stop;
};

static void *pf_main(void *arg)
{
	struct prefetch *p = arg;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->stop && p->next < p->n && p->next >= p->used + PF_AHEAD)
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop || p->next >= p->n)
			break;
		struct pf_item *x = &p->it[p->next++];
		size_t len = (size_t)(x->size - x->off);
		uint8_t *buf;
		int rc;

		x->state = PF_RUNNING;
		pthread_mutex_unlock(&p->mu);
		buf = malloc(len ? len : 1);
		rc = buf ? p->io->ops->pread(p->io, x->rel, buf, len, x->off, &x->err)
			 : jo_err_set(&x->err, JO_ENOMEM, "out of memory");
		pthread_mutex_lock(&p->mu);
		if (rc < 0) {
			free(buf);
			buf = NULL;
		}
		x->buf = buf;
		x->rc = rc;
		x->state = PF_DONE;
		pthread_cond_broadcast(&p->cv);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

static void pf_free(struct prefetch *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nth; i++)
		pthread_join(p->th[i], NULL);
	for (size_t i = 0; i < p->n; i++) {
		free(p->it[i].rel);
		free(p->it[i].buf);
	}
	free(p->it);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

/* 1: the tail was planned (taken, *out and *rc set); 0: read it yourself. */
static int pf_take(struct ctx *c, const char *rel, uint64_t off, uint64_t size, uint8_t **out,
		   int *rc)
{
	struct prefetch *p = c->pf;
	struct pf_item *x;

	pthread_mutex_lock(&p->mu);
	if (p->used >= p->n || strcmp(p->it[p->used].rel, rel) != 0 || p->it[p->used].off != off ||
	    p->it[p->used].size != size) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	x = &p->it[p->used];
	while (x->state != PF_DONE)
		pthread_cond_wait(&p->cv, &p->mu);
	p->used++;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	c->io->reads++;
	c->io->bytes += size - off;
	*out = x->buf;
	x->buf = NULL;
	*rc = x->rc;
	if (x->rc < 0)
		*c->err = x->err;
	return 1;
}

/* Plan the tails scan_file will read first (v2 files of known size holding a selected field). */
static int pf_start(struct ctx *c, struct prefetch **out)
{
	struct prefetch *p;
	size_t cap = 0;

	*out = NULL;
	if (!c->io->concurrent_pread)
		return 0;
	for (size_t i = 0; i < c->m->nfrags; i++)
		cap += c->m->frags[i].nfiles;
	if (cap < 2)
		return 0;
	if (!(p = calloc(1, sizeof(*p))) || !(p->it = calloc(cap, sizeof(*p->it)))) {
		free(p);
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	}
	p->io = c->io;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	for (size_t i = 0; i < c->m->nfrags; i++)
		for (size_t j = 0; j < c->m->frags[i].nfiles; j++) {
			const struct lance_datafile *df = &c->m->frags[i].files[j];
			bool any = false;
			char *rel;

			for (size_t k = 0; k < df->nfields && !any; k++)
				any = df->fields[k] >= 0 && selected(c, df->fields[k]);
			if (!any || df->file_size < LANCE_V2_FOOTER || (df->major == 0 && df->minor < 3))
				continue;
			if (!(rel = lance_datafile_relpath(c->m, df)))
				continue;   /* scan_file says why */
			p->it[p->n++] = (struct pf_item){
				.rel = rel, .size = df->file_size,
				.off = df->file_size > PF_TAIL ? df->file_size - PF_TAIL : 0 };
		}
	for (int i = 0; i < PF_THREADS && (size_t)i < p->n; i++) {
		if (pthread_create(&p->th[i], NULL, pf_main, p) != 0)
			break;
		p->nth++;
	}
	if (p->nth == 0) {
		pf_free(p);
		return 0;
	}
	*out = p;
	return 0;
}

static int add_whole(struct ctx *c, const char *rel, uint64_t size, int kind)
{
	int file, rc;

	if (size == 0 && (rc = lance_io_size(c->io, rel, &size, c->err)) < 0)
		return rc;
	if ((file = lance_rangeset_file(c->s, rel, size)) < 0)
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	return add(c, file, 0, size, kind);
}

int lance_scan_ranges(struct lance_io *io, const struct lance_manifest *m,
		      const size_t *sel, size_t nsel, const struct lance_scan_opts *opts,
		      struct lance_rangeset *s, struct jo_err *err)
{
	struct lance_scan_opts defaults = { .tail_block = 4096 };
	struct ctx c = { .io = io, .m = m, .opts = opts ? opts : &defaults, .s = s, .err = err };
	bool *mark;
	int rc = 0;

	/* The selected fields and all their descendants (spec §5.2). */
	if (!(mark = calloc(m->nfields ? m->nfields : 1, sizeof(*mark))) ||
	    !(c.sel = malloc((m->nfields ? m->nfields : 1) * sizeof(int32_t)))) {
		free(mark);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < nsel; i++)
		if (sel[i] < m->nfields)
			mark[sel[i]] = true;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t i = 0; i < m->nfields; i++) {
			if (mark[i] || m->fields[i].parent_id < 0)
				continue;
			long p = lance_field_index(m, m->fields[i].parent_id);
			if (p >= 0 && mark[p])
				mark[i] = changed = true;
		}
	}
	for (size_t i = 0; i < m->nfields; i++)
		if (mark[i])
			c.sel[c.nsel++] = m->fields[i].id;
	qsort(c.sel, c.nsel, sizeof(int32_t), cmp_i32);

	if ((rc = add_whole(&c, m->manifest_path ? m->manifest_path : "", m->manifest_size,
			    LANCE_RK_META)) < 0)
		goto out;
	if ((rc = pf_start(&c, &c.pf)) < 0)
		goto out;
	for (size_t i = 0; i < m->nfrags; i++) {
		const struct lance_fragment *fr = &m->frags[i];
		if (fr->del.present) {
			char rel[128];
			if (fr->del.has_base) {
				rc = jo_err_set(err, JO_EUNSUPPORTED,
						"fragment %" PRIu64 ": deletion file in base path %u",
						fr->id, fr->del.base_id);
				goto out;
			}
			snprintf(rel, sizeof(rel), "_deletions/%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s",
				 fr->id, fr->del.read_version, fr->del.id,
				 fr->del.file_type == 1 ? "bin" : "arrow");
			if ((rc = add_whole(&c, rel, 0, LANCE_RK_META)) < 0) {
				if (rc == JO_ENOTFOUND)
					rc = as_corrupt(err);
				goto out;
			}
		}
		for (size_t j = 0; j < fr->nfiles; j++)
			if ((rc = scan_file(&c, &fr->files[j])) < 0)
				goto out;
	}
out:
	pf_free(c.pf);
	free(mark);
	free(c.sel);
	return rc;
}
