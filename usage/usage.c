/*
 * usage.c: directory totals from one walk (usage.h).
 *
 * Every tree row becomes one record of the fold sort, keyed so that byte
 * order is (depth, deepest first; inode; kind):
 *   dir:   [~depth 4][ino 8][0][parent 8][space 8][path]
 *   entry: [~depth-1 4][parent 8][1][length 8][access 8][mtime 8][type 1][space 8]
 * (an entry is filed under its parent). Reading it back, the directories of
 * one level come out in inode order, each followed by its own entries; the
 * totals of its subdirectories were filed by the level below into a sort
 * keyed by parent inode ("up": [parent 8][ino 8][totals]), read alongside.
 * A finished directory files its totals into the next up sort, and into the
 * report sort ([path][0][depth 4][ino 8][totals], tree order) when it is
 * within opts.depth.
 */
#include "usage/usage.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/opt.h"

#define DIR_HDR (4 + 8 + 1 + 8 + 8)
#define ENT_LEN (4 + 8 + 1 + 8 + 8 + 8 + 1 + 8)
#define UP_LEN (8 + 8 + sizeof(struct usage_totals))

struct fold {
	const struct usage_opts *o;
	struct usage_report *r;
	struct jo_err *err;
	struct jo_xsort_opts xo;
	struct jo_xsort *s1;       /* the fold sort */
	uint8_t *buf;
	size_t cap;
};

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* What juicefs summary counts for an entry: its length rounded up to 4 KiB, 4 KiB for 0. */
static uint64_t align4k(uint64_t len)
{
	return len == 0 ? 4096 : (((len - 1) >> 12) + 1) << 12;
}

void usage_human(uint64_t v, char buf[16])
{
	static const char units[] = "KMGTPE";
	double d = (double)v;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, 16, "%llu", (unsigned long long)v);
		return;
	}
	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	if (d < 9.95)
		snprintf(buf, 16, "%.1f%c", d, units[u]);
	else
		snprintf(buf, 16, "%.0f%c", d, units[u]);
}

int64_t usage_parse_age(const char *s, size_t n)
{
	char buf[64];
	int64_t ms;

	/* the one duration grammar of the command line (common/opt.h) */
	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (jo_parse_duration_ms(buf, &ms))
		return -1;
	return ms / 1000;
}

int usage_parse_buckets(const char *s, struct usage_opts *o, struct jo_err *err)
{
	int n = 0;

	while (*s) {
		const char *e = strchr(s, ',');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		int64_t age = usage_parse_age(s, len);

		if (age <= 0)
			return jo_err_set(err, JO_EINVAL, "--buckets: '%.*s' is not an age like 30d",
					  (int)len, s);
		if (n == USAGE_MAX_BUCKETS - 1)
			return jo_err_set(err, JO_EINVAL, "--buckets: at most %d ages",
					  USAGE_MAX_BUCKETS - 1);
		if (n && age <= o->bucket[n - 1])
			return jo_err_set(err, JO_EINVAL, "--buckets: ages must grow ('%.*s')",
					  (int)len, s);
		o->bucket[n++] = age;
		s += len;
		if (*s == ',')
			s++;
	}
	if (n == 0)
		return jo_err_set(err, JO_EINVAL, "--buckets: no age given");
	o->nbuckets = n;
	return 0;
}

void usage_bucket_label(const struct usage_opts *o, int i, char buf[16])
{
	static const struct { int64_t s; char u; } units[] = {
		{ 365 * 86400, 'y' }, { 86400, 'd' }, { 3600, 'h' }, { 60, 'm' },
	};
	int64_t v;

	if (i >= o->nbuckets) {
		snprintf(buf, 16, "older");
		return;
	}
	v = o->bucket[i];
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%llds", (long long)v);
	for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++)
		if (v % units[k].s == 0) {
			snprintf(tmp, sizeof(tmp), "%lld%c", (long long)(v / units[k].s), units[k].u);
			break;
		}
	snprintf(buf, 16, "%.15s", tmp);
}

int usage_bucket_of(const struct usage_opts *o, int64_t age)
{
	for (int i = 0; i < o->nbuckets; i++)
		if (age < o->bucket[i])
			return i;
	return o->nbuckets;
}

/* Path byte order with NUL lowest, then '/', then every other byte. */
static int path_byte(unsigned char c)
{
	return c == 0 ? 0 : c == '/' ? 1 : c + 1;
}

int usage_path_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;

	for (size_t i = 0; i < n; i++) {
		int x = path_byte((unsigned char)a[i]), y = path_byte((unsigned char)b[i]);

		if (x != y)
			return x < y ? -1 : 1;
	}
	return alen < blen ? -1 : alen > blen;
}

/* Report records: [path][0][...]: compare the paths. */
static int report_cmp(const void *a, size_t alen, const void *b, size_t blen, void *payload)
{
	const char *x = a, *y = b;
	const char *xe = memchr(x, 0, alen), *ye = memchr(y, 0, blen);

	(void)payload;
	return usage_path_cmp(x, xe ? (size_t)(xe - x) : alen, y, ye ? (size_t)(ye - y) : blen);
}

static int scratch(struct fold *f, size_t n)
{
	uint8_t *b;

	if (n <= f->cap)
		return 0;
	b = realloc(f->buf, n);
	if (!b)
		return jo_err_set(f->err, JO_ENOMEM, "out of memory");
	f->buf = b;
	f->cap = n;
	return 0;
}

/* Rank of the top lists: more bytes first, then tree order, so that ties
 * keep the same entries whatever order the walk met them in. */
static bool ranks_before(uint64_t ab, const char *ap, size_t al, uint64_t bb, const char *bp,
			 size_t bl)
{
	if (ab != bb)
		return ab > bb;
	return usage_path_cmp(ap, al, bp, bl) < 0;
}

/* The key an entry of a top list ranks by. */
struct top_key {
	uint64_t bytes;
	const char *path;
	size_t path_len;
};

typedef struct top_key (*top_key_fn)(const void *list, size_t i);

static bool key_before(struct top_key a, struct top_key b)
{
	return ranks_before(a.bytes, a.path, a.path_len, b.bytes, b.path, b.path_len);
}

static struct top_key file_key(const void *list, size_t i)
{
	const struct usage_file *e = (const struct usage_file *)list + i;

	return (struct top_key){ e->bytes, e->path, e->path_len };
}

static struct top_key dir_key(const void *list, size_t i)
{
	const struct usage_dir *e = (const struct usage_dir *)list + i;

	return (struct top_key){ e->t.bytes, e->path, e->path_len };
}

/*
 * Keep the k best in a small array (k is --top: a linear scan is enough).
 * Where cand goes in a list of *n entries: the next slot while there are
 * fewer than k (*n grows), else the slot of the entry that ranks last when
 * cand ranks before it. false: cand stays out.
 */
static bool top_slot(const void *list, size_t *n, size_t k, top_key_fn key, struct top_key cand,
		     size_t *at)
{
	if (k == 0)
		return false;
	if (*n < k) {
		*at = (*n)++;
		return true;
	}
	*at = 0;
	for (size_t i = 1; i < *n; i++)
		if (key_before(key(list, *at), key(list, i)))
			*at = i;
	return key_before(cand, key(list, *at));
}

/* Sort a top list of n entries, esz bytes each, first rank first. */
static void top_sort(void *list, size_t n, size_t esz, top_key_fn key)
{
	unsigned char *b = list;

	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (key_before(key(list, j), key(list, i)))
				for (size_t x = 0; x < esz; x++) {
					unsigned char c = b[i * esz + x];

					b[i * esz + x] = b[j * esz + x];
					b[j * esz + x] = c;
				}
}

/* A top entry's own NUL-terminated copy of path (n bytes): 0, or -1 (out of
 * memory: *out NULL). */
static int top_path(char **out, size_t *out_len, const char *path, size_t n)
{
	*out = malloc(n + 1);
	if (!*out)
		return -1;
	memcpy(*out, path, n);
	(*out)[n] = '\0';
	*out_len = n;
	return 0;
}

static int top_file(struct fold *f, const struct jo_walk_row *row)
{
	struct usage_report *r = f->r;
	struct top_key cand = { row->attr.length, row->path, row->path_len };
	struct usage_file *t;
	size_t at;

	if (!top_slot(r->top_files, &r->ntop_files, f->o->top, file_key, cand, &at))
		return 0;
	t = &r->top_files[at];
	free(t->path); /* NULL in a slot not used yet (calloc) */
	if (top_path(&t->path, &t->path_len, row->path, row->path_len))
		return jo_err_set(f->err, JO_ENOMEM, "out of memory");
	t->ino = row->ino;
	t->bytes = row->attr.length;
	t->atime = row->attr.atime;
	t->mtime = row->attr.mtime;
	return 0;
}

static int on_row(const struct jo_walk_row *row, void *payload)
{
	struct fold *f = payload;
	struct usage_report *r = f->r;
	const struct jo_attr *a = &row->attr;
	int64_t access = a->atime > a->mtime ? a->atime : a->mtime;
	uint8_t *p;
	int rc;

	if (row->where == JO_WALK_IN_TRASH) {
		if (a->type != JO_TYPE_DIR)
			r->trash_files++;
		if (a->type == JO_TYPE_FILE)
			r->trash_bytes += a->length;
		return 0;
	}
	if (row->where == JO_WALK_OPEN_UNLINKED) {
		r->open_files++;
		r->open_bytes += a->length;
		return 0;
	}
	if (a->type == JO_TYPE_DIR) {
		if ((rc = scratch(f, DIR_HDR + row->path_len)) != 0)
			return rc;
		p = f->buf;
		put32(p, ~row->depth);
		put64(p + 4, row->ino);
		p[12] = 0;
		put64(p + 13, row->parent);
		put64(p + 21, row->depth ? align4k(a->length) : align4k(0));
		memcpy(p + DIR_HDR, row->path, row->path_len);
		return jo_xsort_add(f->s1, p, DIR_HDR + row->path_len, f->err);
	}
	if (a->type == JO_TYPE_FILE) {
		r->regular_files++;
		if (a->atime > a->ctime || (a->atime == a->ctime && a->atimensec > a->ctimensec)) {
			if (a->atime > a->mtime || (a->atime == a->mtime && a->atimensec > a->mtimensec))
				r->atime_later++;
		}
		if ((rc = top_file(f, row)) != 0)
			return rc;
	}
	if (row->depth == 0)
		return 0;
	if ((rc = scratch(f, ENT_LEN)) != 0)
		return rc;
	p = f->buf;
	put32(p, ~(row->depth - 1));
	put64(p + 4, row->parent);
	p[12] = 1;
	put64(p + 13, a->type == JO_TYPE_FILE ? a->length : 0);
	put64(p + 21, (uint64_t)access);
	put64(p + 29, (uint64_t)a->mtime);
	p[37] = a->type;
	put64(p + 38, align4k(a->length));
	return jo_xsort_add(f->s1, p, ENT_LEN, f->err);
}

static int on_delfile(uint64_t ino, uint64_t length, int64_t at, void *payload)
{
	struct usage_report *r = payload;

	(void)ino;
	(void)at;
	r->pending_files++;
	r->pending_file_bytes += length;
	return 0;
}

static int on_ref(uint64_t id, uint32_t size, int64_t refs, void *payload)
{
	struct usage_report *r = payload;

	(void)id;
	if (refs <= 0) {
		r->pending_slices++;
		r->pending_slice_bytes += size;
	}
	return 0;
}

static int on_delslices(uint64_t id, int64_t at, const uint8_t *recs, size_t len, void *payload)
{
	struct usage_report *r = payload;

	(void)id;
	(void)at;
	for (size_t i = 0; i + 12 <= len; i += 12) {
		r->delayed_slices++;
		r->delayed_bytes += jo_be32(recs + i + 8);
	}
	return 0;
}

static int in_snapshot(struct jo_meta *m, void *payload, struct jo_err *err)
{
	struct fold *f = payload;
	int rc;

	if ((rc = jo_meta_scan_delfiles(m, on_delfile, f->r, err)) != 0 ||
	    (rc = jo_meta_scan_slice_refs(m, on_ref, f->r, err)) != 0 ||
	    (rc = jo_meta_scan_delslices(m, on_delslices, f->r, err)) != 0)
		return rc;
	return 0;
}

static void add_totals(struct usage_totals *t, const struct usage_totals *u)
{
	t->bytes += u->bytes;
	t->space += u->space;
	t->files += u->files;
	t->dirs += u->dirs;
	t->cold += u->cold;
	for (int i = 0; i < USAGE_MAX_BUCKETS; i++) {
		t->access[i] += u->access[i];
		t->modify[i] += u->modify[i];
	}
}

static void add_entry(const struct fold *f, struct usage_totals *t, const uint8_t *e)
{
	int64_t now = f->r->now;
	uint64_t len = jo_be64(e + 13);
	int64_t access = (int64_t)jo_be64(e + 21), mtime = (int64_t)jo_be64(e + 29);

	t->files++;
	t->space += jo_be64(e + 38);
	if (e[37] != JO_TYPE_FILE)
		return;
	t->bytes += len;
	t->access[usage_bucket_of(f->o, now - access)] += len;
	t->modify[usage_bucket_of(f->o, now - mtime)] += len;
	if (now - access >= f->o->cold)
		t->cold += len;
}

/* A directory being folded. */
struct pend {
	bool live;
	uint32_t depth;
	uint64_t ino, parent;
	struct usage_totals t;
	char *path;
	size_t path_len, path_cap;
};

static int top_dir(struct fold *f, const struct pend *d)
{
	struct usage_report *r = f->r;
	struct top_key cand = { d->t.bytes, d->path, d->path_len };
	struct usage_dir *t;
	size_t at;

	if (!top_slot(r->top_dirs, &r->ntop_dirs, f->o->top, dir_key, cand, &at))
		return 0;
	t = &r->top_dirs[at];
	free(t->path); /* NULL in a slot not used yet (calloc) */
	if (top_path(&t->path, &t->path_len, d->path, d->path_len))
		return jo_err_set(f->err, JO_ENOMEM, "out of memory");
	t->depth = d->depth;
	t->ino = d->ino;
	t->t = d->t;
	return 0;
}

static int finish_dir(struct fold *f, struct pend *d, struct jo_xsort *up)
{
	int rc;

	if (!d->live)
		return 0;
	d->live = false;
	if (d->depth == 0)
		f->r->total = d->t;
	else {
		uint8_t rec[UP_LEN];

		put64(rec, d->parent);
		put64(rec + 8, d->ino);
		memcpy(rec + 16, &d->t, sizeof(d->t));
		if ((rc = jo_xsort_add(up, rec, sizeof(rec), f->err)) != 0)
			return rc;
	}
	if (d->depth > f->o->depth)
		return top_dir(f, d);
	if ((rc = scratch(f, d->path_len + 1 + 4 + 8 + sizeof(d->t))) != 0)
		return rc;
	memcpy(f->buf, d->path, d->path_len);
	f->buf[d->path_len] = 0;
	put32(f->buf + d->path_len + 1, d->depth);
	put64(f->buf + d->path_len + 5, d->ino);
	memcpy(f->buf + d->path_len + 13, &d->t, sizeof(d->t));
	return jo_xsort_add(f->r->out, f->buf, d->path_len + 13 + sizeof(d->t), f->err);
}

static int fold_levels(struct fold *f)
{
	struct jo_xsort *ucur = NULL, *unext = NULL;
	struct pend d = { 0 };
	const void *urec = NULL;
	size_t ulen = 0;
	int ulive = 0, rc;
	int64_t level = -1;
	const void *rec;
	size_t len;

	if ((rc = jo_xsort_finish(f->s1, f->err)) != 0 ||
	    (rc = jo_xsort_new(&unext, &f->xo, f->err)) != 0)
		goto out;
	while ((rc = jo_xsort_next(f->s1, &rec, &len, f->err)) == 1) {
		const uint8_t *p = rec;
		uint32_t depth = ~jo_be32(p);
		uint64_t ino = jo_be64(p + 4);

		if (jo_cancelled()) {
			rc = jo_err_set(f->err, JO_ECANCELED, "interrupted");
			break;
		}
		if ((int64_t)depth != level) {
			/* the level below is done: its totals are what this one reads */
			if ((rc = finish_dir(f, &d, unext)) != 0)
				break;
			jo_xsort_free(ucur);
			ucur = unext;
			unext = NULL;
			if ((rc = jo_xsort_finish(ucur, f->err)) != 0 ||
			    (rc = jo_xsort_new(&unext, &f->xo, f->err)) != 0)
				break;
			if ((ulive = jo_xsort_next(ucur, &urec, &ulen, f->err)) < 0) {
				rc = ulive;
				break;
			}
			level = depth;
		}
		if (p[12] == 1) {
			/* an entry of the directory just started (else its directory
			 * row was dropped: moved during a walk without a snapshot) */
			if (d.live && d.ino == ino && len == ENT_LEN)
				add_entry(f, &d.t, p);
			continue;
		}
		if (len < DIR_HDR)
			continue;
		if ((rc = finish_dir(f, &d, unext)) != 0)
			break;
		memset(&d.t, 0, sizeof(d.t));
		d.live = true;
		d.depth = depth;
		d.ino = ino;
		d.parent = jo_be64(p + 13);
		d.t.dirs = 1;
		d.t.space = jo_be64(p + 21);
		d.path_len = len - DIR_HDR;
		if (d.path_len + 1 > d.path_cap) {
			char *np = realloc(d.path, d.path_len + 1);

			if (!np) {
				rc = jo_err_set(f->err, JO_ENOMEM, "out of memory");
				break;
			}
			d.path = np;
			d.path_cap = d.path_len + 1;
		}
		memcpy(d.path, p + DIR_HDR, d.path_len);
		/* the subdirectories' totals, filed by the level below */
		while (ulive == 1 && jo_be64(urec) <= ino) {
			if (jo_be64(urec) == ino && ulen == UP_LEN) {
				struct usage_totals u;

				memcpy(&u, (const uint8_t *)urec + 16, sizeof(u));
				add_totals(&d.t, &u);
			}
			if ((ulive = jo_xsort_next(ucur, &urec, &ulen, f->err)) < 0) {
				rc = ulive;
				goto out;
			}
		}
	}
	if (rc == 0)
		rc = finish_dir(f, &d, unext);
out:
	jo_xsort_free(ucur);
	jo_xsort_free(unext);
	free(d.path);
	return rc;
}

int usage_run(struct jo_meta *m, const struct usage_opts *o, struct usage_report *out,
	      struct jo_err *err)
{
	struct jo_walk_opts wo = JO_WALK_OPTS_INIT;
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	size_t mem = o->mem_limit ? o->mem_limit : 256u << 20;
	struct fold f = { .o = o, .r = out, .err = err };
	int rc;

	memset(out, 0, sizeof(*out));
	if (o->top) {
		out->top_files = calloc(o->top, sizeof(*out->top_files));
		out->top_dirs = calloc(o->top, sizeof(*out->top_dirs));
		if (!out->top_files || !out->top_dirs)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	xo.tmp_dir = o->tmp_dir;
	xo.plain_runs = true; /* as the walk's: CPU before temp space */
	xo.mem_limit = mem / 4;
	if ((rc = jo_xsort_new(&f.s1, &xo, err)) != 0)
		goto out;
	xo.mem_limit = mem / 8;
	xo.cmp = report_cmp;
	if ((rc = jo_xsort_new(&out->out, &xo, err)) != 0)
		goto out;
	xo.cmp = NULL;
	f.xo = xo;
	wo.root = o->root;
	wo.flags = JO_WALK_TRASH | JO_WALK_SUSTAINED;
	wo.mem_limit = mem / 2;
	wo.tmp_dir = o->tmp_dir;
	wo.row = on_row;
	wo.in_snapshot = in_snapshot;
	wo.payload = &f;
	/* ages are measured from the start of the walk unless the caller fixed "now" */
	out->now = o->now;
	if (!out->now)
		out->now = (int64_t)time(NULL);
	rc = jo_walk_run(m, &wo, &out->walk, err);
	if (rc == 0)
		rc = fold_levels(&f);
	if (rc == 0)
		rc = jo_xsort_finish(out->out, err);
	/* sort the top lists, largest first */
	if (rc == 0) {
		top_sort(out->top_files, out->ntop_files, sizeof(*out->top_files), file_key);
		top_sort(out->top_dirs, out->ntop_dirs, sizeof(*out->top_dirs), dir_key);
	}
out:
	jo_xsort_free(f.s1);
	free(f.buf);
	return rc;
}

int usage_next_dir(struct usage_report *r, const struct usage_dir **out, struct jo_err *err)
{
	const void *rec;
	size_t len, plen;
	const uint8_t *p;
	int rc = jo_xsort_next(r->out, &rec, &len, err);

	if (rc != 1)
		return rc;
	p = rec;
	plen = strnlen(rec, len);
	if (len != plen + 13 + sizeof(r->cur.t))
		return jo_err_set(err, JO_EPROTO, "usage: a report record of %zu bytes", len);
	free(r->cur.path);
	r->cur.path = malloc(plen + 1);
	if (!r->cur.path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memcpy(r->cur.path, p, plen);
	r->cur.path[plen] = '\0';
	r->cur.path_len = plen;
	r->cur.depth = jo_be32(p + plen + 1);
	r->cur.ino = jo_be64(p + plen + 5);
	memcpy(&r->cur.t, p + plen + 13, sizeof(r->cur.t));
	*out = &r->cur;
	return 1;
}

void usage_report_release(struct usage_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->ntop_files; i++)
		free(r->top_files[i].path);
	for (size_t i = 0; i < r->ntop_dirs; i++)
		free(r->top_dirs[i].path);
	free(r->top_files);
	free(r->top_dirs);
	free(r->cur.path);
	jo_xsort_free(r->out);
	memset(r, 0, sizeof(*r));
}
