/*
 * list.c: one side's listing as a single stream in byte order.
 *
 * Ordered mode: the key space under the prefix is cut into ranges by key,
 * not by directory, so flat keyspaces parallelise too. A few probes find the
 * longest stem S shared by all keys and the spread of the byte that follows
 * it; each range [S+b_i, S+b_(i+1)) gets its own lister thread (ListObjects
 * with start-after) feeding a bounded queue; the consumer drains the queues
 * in range order. Every key handed out is checked against the previous one:
 * a store that breaks byte order yields JO_SYNC_EORDER, never a silently
 * wrong merge. A lister also checks the seam: it reads on past its range's
 * end for the rest of a page, so a directory-first store is caught there too.
 *
 * Sort mode (stores known not to list in byte order, or after an order
 * break): one lister feeds common/extsort (bounded memory, spills to disk)
 * and the sorted records are streamed out.
 *
 * Probing assumes UTF-8 keys: "\xf4\x8f\xbf\xbf" (U+10FFFF) sorts after any
 * other character, so S+c+U+10FFFF used as start-after skips exactly the
 * keys below S+(c+1). Listers drop keys below their range anyway, so a store
 * that ignores start-after costs time but not correctness.
 */
#include "sync/sync.h"

#include "common/cancel.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/log.h"
#include "common/object/object.h"
#include "common/strfree.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QCAP 4096
#define MAXCP "\xf4\x8f\xbf\xbf"
#define SEAM_EXTRA 1000
#define RANGE_POS 32

struct qent {
	char *key;
	uint64_t size;
	int64_t mtime;
	char etag[72];
};

struct range {
	struct jo_sync_stream *s;
	char *lo, *hi;           /* full keys; NULL = open */
	char *start_after;
	pthread_t th;
	bool started;
	/* queue */
	struct qent q[QCAP];
	size_t head, count;
	bool done;
	int rc;
	struct jo_err err;
	/* lister-local */
	char *prev;              /* last full key seen (order check) */
	int past_hi;             /* keys read after the range's end */
	bool reached_hi;         /* cluster range: stopped at the first key past hi */
};

struct jo_sync_stream {
	struct jo_obj *o;
	char *prefix;
	char *after;             /* full key: only keys after it are handed out */
	size_t plen;
	struct jo_sync_stream_opts opts;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	/* planning */
	pthread_t planner;
	bool planned;            /* ranges[] is ready */
	int plan_rc;
	struct jo_err plan_err;
	struct range **ranges;
	int nranges;
	int cur;
	/* sort mode */
	struct jo_xsort *xs;
	/* cluster range (opts.range): full keys, NULL = open; the listing prefix */
	char *rlo, *rhi;
	char *lprefix;
	/* where the two orders disagree about the range (range_positions) */
	size_t slash[RANGE_POS], low[RANGE_POS];
	int nslash, nlow;
	uint64_t seen_low[RANGE_POS], seen_dir[RANGE_POS];
	/* consumer */
	char *last;              /* previous relative key handed out */
	struct qent curent;
	uint64_t listed;
	uint64_t links;          /* symlinks skipped (local directories) */
};

static void qent_free(struct qent *e)
{
	free(e->key);
	e->key = NULL;
}

/* ---- probing ------------------------------------------------------------- */

struct probe {
	const char *after;
	char *key;
	size_t n, stop_at;
};

static int probe_cb(const struct jo_obj_info *info, void *p)
{
	struct probe *pr = p;
	if (info->is_prefix || info->is_link)
		return 0;
	if (!pr->key)
		pr->key = strdup(info->key);
	return ++pr->n >= pr->stop_at ? 1 : 0;
}

/*
 * First key after `after` (NULL: none), asked for alone (max-keys 1: a probe
 * costs a round trip, not a page). Sets *ignored when the store returned a
 * key not above `after` (it does not honour start-after).
 */
static int first_after(struct jo_sync_stream *s, const char *after, char **out, bool *ignored,
		       struct jo_err *err)
{
	struct probe pr = { .after = after, .stop_at = 1 };
	*out = NULL;
	int rc = jo_obj_list_page(s->o, s->prefix, after, NULL, 1, probe_cb, &pr, err);
	if (rc < 0) {
		free(pr.key);
		return rc;
	}
	if (pr.key && after && strcmp(pr.key, after) <= 0) {
		*ignored = true;
		free(pr.key);
		return 0;
	}
	*out = pr.key;
	return 0;
}

static char *cat3(const char *a, size_t alen, const char *b, size_t blen, const char *c)
{
	size_t clen = c ? strlen(c) : 0;
	char *r = malloc(alen + blen + clen + 1);
	if (!r)
		return NULL;
	memcpy(r, a, alen);
	memcpy(r + alen, b, blen);
	if (clen)
		memcpy(r + alen + blen, c, clen);
	r[alen + blen + clen] = 0;
	return r;
}

/* Is there a key under the prefix whose byte after stem[0..len) is >= b? */
static int exists_from(struct jo_sync_stream *s, const char *stem, size_t len, int b,
		       bool *yes, bool *ignored, struct jo_err *err)
{
	char c = (char)(b - 1);
	char *after = cat3(stem, len, &c, 1, MAXCP);
	if (!after)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	char *k = NULL;
	int rc = first_after(s, after, &k, ignored, err);
	free(after);
	*yes = k != NULL && strncmp(k, stem, len) == 0 && strlen(k) > len &&
	       (unsigned char)k[len] >= (unsigned)b;
	/* A key that does not share the stem would also exist after it. */
	if (k && strncmp(k, stem, len) != 0)
		*yes = true;
	free(k);
	return rc;
}

static int add_range(struct jo_sync_stream *s, char *lo, char *hi, char *sa)
{
	struct range *r = calloc(1, sizeof(*r));
	struct range **nr = realloc(s->ranges, (size_t)(s->nranges + 1) * sizeof(*nr));
	if (!r || !nr) {
		free(r);
		if (nr)
			s->ranges = nr;
		free(lo);
		free(hi);
		free(sa);
		return JO_ENOMEM;
	}
	s->ranges = nr;
	r->s = s;
	r->lo = lo;
	r->hi = hi;
	r->start_after = sa;
	s->ranges[s->nranges++] = r;
	return 0;
}

/*
 * Probe the key space and cut it into at most opts.threads ranges. Returns
 * 1 when it could not (store ignores start-after, a probe failed, nothing
 * to split): the caller then lists with one range.
 */
static int probe_ranges(struct jo_sync_stream *s, int n, struct jo_err *err)
{
	bool ignored = false;
	char *first = NULL;
	/*
	 * The first page: a listing that fits in it is not worth a dozen probes
	 * in a row (one round trip each); one lister reads it again.
	 */
	struct probe pr = { .stop_at = 1000 };
	int rc = jo_obj_list(s->o, s->prefix, NULL, NULL, probe_cb, &pr, err);
	if (rc < 0) {
		free(pr.key);
		return rc;
	}
	first = pr.key;
	if (!first || pr.n < pr.stop_at) {
		free(first);
		return 1;
	}
	rc = 0;
	/* Longest stem of `first` shared by every key (binary search). */
	size_t lo = s->plen, hi = strlen(first);
	while (lo < hi && !ignored) {
		size_t mid = (lo + hi + 1) / 2;
		while (mid > lo && ((unsigned char)first[mid] & 0xc0) == 0x80)
			mid--;
		if (mid == lo)
			break;
		char *after = cat3(first, mid, MAXCP, 4, NULL);
		if (!after) {
			free(first);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		char *k = NULL;
		rc = first_after(s, after, &k, &ignored, err);
		free(after);
		if (rc < 0) {
			free(first);
			return 1;
		}
		if (k)
			hi = mid - 1;  /* some key leaves the stem first[0..mid) */
		else
			lo = mid;
		free(k);
	}
	size_t slen = lo;
	/*
	 * The byte after the stem: split points stay in printable ASCII so
	 * that start-after never carries a control character (some stores echo
	 * it back in XML where it is not representable); keys below go to the
	 * first range, above 0x7f to the last.
	 */
	int b_lo = slen < strlen(first) ? (unsigned char)first[slen] : 0x20;
	if (b_lo < 0x20)
		b_lo = 0x20;
	int a = b_lo, z = 0x7f;
	while (a < z && !ignored) {
		int mid = (a + z + 1) / 2;
		bool yes = false;
		rc = exists_from(s, first, slen, mid, &yes, &ignored, err);
		if (rc < 0) {
			free(first);
			return 1;
		}
		if (yes)
			a = mid;
		else
			z = mid - 1;
	}
	int b_hi = a;
	int spread = b_hi - b_lo + 1;
	if (ignored || spread < 2 || b_lo > 0x7f) {
		free(first);
		return 1;
	}
	int m = n < spread ? n : spread;
	for (int i = 0; i < m && !rc; i++) {
		int b = i == 0 ? -1 : b_lo + (int)(((long)i * spread + m - 1) / m);
		int nb = i == m - 1 ? -1 : b_lo + (int)(((long)(i + 1) * spread + m - 1) / m);
		char cb = (char)b, cnb = (char)nb, cpb = (char)(b - 1);
		char *rlo = b < 0 ? NULL : cat3(first, slen, &cb, 1, NULL);
		char *rhi = nb < 0 ? NULL : cat3(first, slen, &cnb, 1, NULL);
		char *sa = b < 0 ? NULL : cat3(first, slen, &cpb, 1, MAXCP);
		if ((b >= 0 && (!rlo || !sa)) || (nb >= 0 && !rhi)) {
			free(rlo);
			free(rhi);
			free(sa);
			rc = JO_ENOMEM;
			break;
		}
		rc = add_range(s, rlo, rhi, sa);
	}
	free(first);
	if (rc)
		return jo_err_set(err, rc, "out of memory");
	return 0;
}

static int plan_ranges(struct jo_sync_stream *s, struct jo_err *err)
{
	int n = s->opts.threads;
	if (n <= 1 || s->opts.sort)
		return add_range(s, NULL, NULL, NULL);
	int rc = probe_ranges(s, n, err);
	if (rc < 0 && s->nranges == 0 && rc != JO_ENOMEM && rc != JO_ECANCELED) {
		/* The first listing request failed: report it from the lister. */
		jo_err_clear(err);
		rc = 1;
	}
	if (rc == 1) {
		for (int i = 0; i < s->nranges; i++) {
			free(s->ranges[i]->lo);
			free(s->ranges[i]->hi);
			free(s->ranges[i]->start_after);
			free(s->ranges[i]);
		}
		s->nranges = 0;
		jo_err_clear(err);
		return add_range(s, NULL, NULL, NULL);
	}
	return rc;
}

/* ---- listers ------------------------------------------------------------- */

static int push(struct range *r, const struct jo_obj_info *info)
{
	struct jo_sync_stream *s = r->s;
	struct qent e = { .size = info->size, .mtime = info->mtime };
	snprintf(e.etag, sizeof(e.etag), "%s", info->etag);
	e.key = strdup(info->key);
	if (!e.key)
		return JO_ENOMEM;
	pthread_mutex_lock(&s->mu);
	while (r->count == QCAP && !s->stop)
		pthread_cond_wait(&s->cv, &s->mu);
	if (s->stop) {
		pthread_mutex_unlock(&s->mu);
		free(e.key);
		return JO_ECANCELED;
	}
	r->q[(r->head + r->count) % QCAP] = e;
	r->count++;
	s->listed++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/*
 * A symlink in a local directory: not an object, never followed (rclone's
 * default too: "Can't follow symlink without -L/--copy-links"). One warning
 * line per link, and a count for the summary.
 */
static void note_link(struct jo_sync_stream *s, const char *key)
{
	const char *rel = strncmp(key, s->prefix, s->plen) == 0 ? key + s->plen : key;

	pthread_mutex_lock(&s->mu);
	s->links++;
	pthread_mutex_unlock(&s->mu);
	jo_warn("%s: skipped symlink \"%s\" (symlinks are never followed)",
		s->opts.desc ? s->opts.desc : "", rel);
}

static int list_cb(const struct jo_obj_info *info, void *p)
{
	struct range *r = p;
	if (info->is_prefix)
		return 0;
	if (info->is_link) {
		/* reported by the range that owns its key, once */
		if ((r->s->after && strcmp(info->key, r->s->after) <= 0) || r->past_hi ||
		    (r->lo && strcmp(info->key, r->lo) < 0) || (r->hi && strcmp(info->key, r->hi) >= 0))
			return 0;
		note_link(r->s, info->key);
		return 0;
	}
	if (jo_cancelled())
		return JO_ECANCELED;
	if (r->prev && strcmp(info->key, r->prev) <= 0)
		return JO_SYNC_EORDER;
	char *np = strdup(info->key);
	if (!np)
		return JO_ENOMEM;
	free(r->prev);
	r->prev = np;
	if (r->s->after && strcmp(info->key, r->s->after) <= 0)
		return 0;
	if (r->past_hi) {
		/* Seam check: keep reading a little to catch order breaks. */
		if (++r->past_hi > SEAM_EXTRA)
			return 1;
		return 0;
	}
	if (r->lo && strcmp(info->key, r->lo) < 0)
		return 0;
	if (r->hi && strcmp(info->key, r->hi) >= 0) {
		r->past_hi = 1;
		return 0;
	}
	return push(r, info);
}

static int sort_add(struct range *r, const struct jo_obj_info *info);

/* Sort mode: everything into the external sort. Record = key NUL size mtime etag. */
static int sort_cb(const struct jo_obj_info *info, void *p)
{
	struct range *r = p;
	if (info->is_prefix)
		return 0;
	if (jo_cancelled() || __atomic_load_n(&r->s->stop, __ATOMIC_RELAXED))
		return JO_ECANCELED;
	if (r->s->after && strcmp(info->key, r->s->after) <= 0)
		return 0;
	if (info->is_link) {
		note_link(r->s, info->key);
		return 0;
	}
	return sort_add(r, info);
}

/* A thread's last word: its result and its done flag, set under s's lock,
 * and every waiter woken. */
static void finish(struct jo_sync_stream *s, int *rc_out, bool *done, int rc)
{
	pthread_mutex_lock(&s->mu);
	*rc_out = rc;
	*done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void *lister_main(void *p)
{
	struct range *r = p;
	struct jo_sync_stream *s = r->s;
	int rc;
	if (s->opts.sort) {
		rc = jo_obj_list(s->o, s->prefix, NULL, NULL, sort_cb, r, &r->err);
		if (!rc)
			rc = jo_xsort_finish(s->xs, &r->err);
	} else {
		const char *sa = r->start_after;
		if (s->after && (!sa || strcmp(sa, s->after) < 0))
			sa = s->after;
		rc = jo_obj_list(s->o, s->prefix, sa, NULL, list_cb, r, &r->err);
		if (rc == 1)
			rc = 0;
	}
	if (rc == JO_SYNC_EORDER)
		jo_err_set(&r->err, JO_EPROTO, "keys listed out of byte order near \"%s\"",
			   r->prev ? r->prev : "");
	finish(s, &r->rc, &r->done, rc);
	return NULL;
}

static void *range_lister_main(void *p);

static void *planner_main(void *p)
{
	struct jo_sync_stream *s = p;
	int rc = s->opts.range ? add_range(s, NULL, NULL, NULL) : plan_ranges(s, &s->plan_err);
	if (!rc && s->opts.sort) {
		struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
		if (s->opts.sort_mem)
			xo.mem_limit = s->opts.sort_mem;
		xo.tmp_dir = s->opts.tmp_dir;
		rc = jo_xsort_new(&s->xs, &xo, &s->plan_err);
	}
	for (int i = 0; !rc && i < s->nranges; i++) {
		if (pthread_create(&s->ranges[i]->th, NULL, s->opts.range ? range_lister_main : lister_main,
				   s->ranges[i]) != 0) {
			rc = jo_err_set(&s->plan_err, JO_EIO, "cannot start a lister thread");
			break;
		}
		s->ranges[i]->started = true;
	}
	finish(s, &s->plan_rc, &s->planned, rc);
	return NULL;
}

/* ---- cluster ranges ------------------------------------------------------ */

/* Length of the UTF-8 sequence at s (n bytes left) and its code point, or 0. */
static size_t utf8_cp(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2;
		v = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3;
		v = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4;
		v = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

static size_t utf8_put(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

bool jo_sync_bound_ok(const char *b)
{
	const unsigned char *p = (const unsigned char *)b;
	size_t n = strlen(b), i = 0;
	uint32_t cp;

	if (!n)
		return false;
	while (i < n) {
		size_t l = utf8_cp(p + i, n - i, &cp);

		if (!l)
			return false;
		i += l;
	}
	return true;
}

int jo_sync_dircmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = (unsigned char)*a, y = (unsigned char)*b;

		if (x == y) {
			if (!x)
				return 0;
			continue;
		}
		if (!x || !y)
			return x ? 1 : -1;
		if (x == '/')
			return -1;
		if (y == '/')
			return 1;
		return x < y ? -1 : 1;
	}
}

char *jo_sync_bound_pred(const char *key)
{
	size_t n = strlen(key), start = n;
	uint32_t cp = 0;
	char enc[4];
	size_t el;

	if (!n)
		return NULL;
	/* "d/": the prefix itself (keys below it in byte order are not after
	 * it in directory-first order: '.' + U+10FFFF would be) */
	if (key[n - 1] == '/')
		return strndup(key, n - 1);
	/* the last character: a code point when it is valid UTF-8, else a byte */
	while (start > 0 && n - start < 4) {
		start--;
		if (((unsigned char)key[start] & 0xc0) != 0x80)
			break;
	}
	if (utf8_cp((const unsigned char *)key + start, n - start, &cp) != n - start) {
		start = n - 1;
		cp = (unsigned char)key[start];
		if (cp >= 0x80) {
			/* not UTF-8: step the byte (local file names only) */
			char *m = malloc(n + 5);
			if (!m)
				return NULL;
			memcpy(m, key, n);
			m[n - 1] = (char)(cp - 1);
			memcpy(m + n, MAXCP, 5);
			return m;
		}
	}
	if (cp == 0)
		return NULL;
	cp--;
	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xd7ff;
	el = utf8_put(cp, enc);
	char *m = malloc(start + el + 5);
	if (!m)
		return NULL;
	memcpy(m, key, start);
	memcpy(m + start, enc, el);
	memcpy(m + start + el, MAXCP, 5);
	return m;
}

/*
 * Where byte order and directory-first order disagree about a range
 * [lo, hi) (first differing byte '/' in one key, below '/' in the other):
 *  - a '/' of hi at i: the keys hi[0..i) + (byte < '/') ... ("d-x" for hi
 *    "d/m") are in the range, but a directory-first store lists them after
 *    the whole directory hi[0..i)/, past hi;
 *  - a byte below '/' of the start point S (lo, or the resume key) at j:
 *    the keys S[0..j) + '/' ... ("d/x" for lo "d-a") are in the range, but
 *    a directory-first store lists them before S.
 * (The other two cases put keys that are not in the range inside its
 * listing: they are dropped by the byte-order filter.) Positions are full-key
 * offsets past the listing prefix, which every key of the range shares.
 */
static void range_positions(struct jo_sync_stream *s)
{
	size_t from = strlen(s->lprefix);
	const char *st = s->after ? s->after : s->rlo;

	for (size_t i = from; s->rhi && s->rhi[i] && s->nslash < RANGE_POS; i++)
		if (s->rhi[i] == '/')
			s->slash[s->nslash++] = i;
	for (size_t j = from; st && st[j] && s->nlow < RANGE_POS; j++)
		if ((unsigned char)st[j] < '/')
			s->low[s->nlow++] = j;
}

static int range_setup(struct jo_sync_stream *s, const struct jo_sync_stream_opts *so)
{
	const char *lo = so->lo, *hi = so->hi;
	size_t c = 0;

	if ((lo && !jo_sync_bound_ok(lo)) || (hi && !jo_sync_bound_ok(hi)) ||
	    (lo && hi && strcmp(lo, hi) >= 0))
		return JO_EINVAL;
	if (lo && !(s->rlo = cat3(s->prefix, s->plen, lo, strlen(lo), NULL)))
		return JO_ENOMEM;
	if (hi && !(s->rhi = cat3(s->prefix, s->plen, hi, strlen(hi), NULL)))
		return JO_ENOMEM;
	/* every key of [lo, hi) starts with their common prefix */
	if (lo && hi)
		while (lo[c] && lo[c] == hi[c])
			c++;
	if (!(s->lprefix = cat3(s->prefix, s->plen, lo ? lo : "", c, NULL)))
		return JO_ENOMEM;
	if (s->after && s->rhi && strcmp(s->after, s->rhi) >= 0)
		return JO_EINVAL;
	if (s->after && s->rlo && strcmp(s->after, s->rlo) < 0) {
		free(s->after);
		s->after = NULL;
	}
	range_positions(s);
	s->opts.sort = so->order != JO_SYNC_ORDER_BYTES;
	s->opts.threads = 1;
	return 0;
}

/* Does full key k belong to the range (and come after the resume point)? */
static bool in_range(const struct jo_sync_stream *s, const char *k)
{
	if (s->rlo && strcmp(k, s->rlo) < 0)
		return false;
	if (s->rhi && strcmp(k, s->rhi) >= 0)
		return false;
	return !s->after || strcmp(k, s->after) > 0;
}

/* Count the in-range keys the main listing saw at the disagreement places. */
static void note_seen(struct jo_sync_stream *s, const char *k)
{
	const char *st = s->after ? s->after : s->rlo;

	for (int i = 0; i < s->nslash; i++) {
		size_t p = s->slash[i];

		if (!strncmp(k, s->rhi, p) && k[p] && (unsigned char)k[p] < '/')
			s->seen_low[i]++;
	}
	for (int j = 0; j < s->nlow; j++) {
		size_t p = s->low[j];

		if (!strncmp(k, st, p) && k[p] == '/')
			s->seen_dir[j]++;
	}
}

static int sort_add(struct range *r, const struct jo_obj_info *info)
{
	size_t kl = strlen(info->key), el = strlen(info->etag);
	size_t len = kl + 1 + 16 + el;
	char stackbuf[2048];
	char *rec = len <= sizeof(stackbuf) ? stackbuf : malloc(len);
	int rc;

	if (!rec)
		return JO_ENOMEM;
	memcpy(rec, info->key, kl + 1);
	memcpy(rec + kl + 1, &info->size, 8);
	memcpy(rec + kl + 9, &info->mtime, 8);
	memcpy(rec + kl + 17, info->etag, el);
	rc = jo_xsort_add(r->s->xs, rec, len, &r->err);
	if (rec != stackbuf)
		free(rec);
	if (!rc) {
		pthread_mutex_lock(&r->s->mu);
		r->s->listed++;
		pthread_mutex_unlock(&r->s->mu);
	}
	return rc;
}

static int range_cb(const struct jo_obj_info *info, void *p)
{
	struct range *r = p;
	struct jo_sync_stream *s = r->s;
	enum jo_sync_order ord = s->opts.order;
	const char *k = info->key;

	if (info->is_prefix)
		return 0;
	if (jo_cancelled() || __atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		return JO_ECANCELED;
	if (info->is_link) {
		if (in_range(s, k))
			note_link(s, k);
		return 0;
	}
	/* the order this side promised, checked key by key */
	if (r->prev && ord != JO_SYNC_ORDER_ANY &&
	    (ord == JO_SYNC_ORDER_BYTES ? strcmp(k, r->prev) : jo_sync_dircmp(k, r->prev)) <= 0)
		return JO_SYNC_EORDER;
	if (ord != JO_SYNC_ORDER_ANY) {
		char *np = strdup(k);
		if (!np)
			return JO_ENOMEM;
		free(r->prev);
		r->prev = np;
	}
	/*
	 * Past hi in both orders: in either kind of store nothing of the range
	 * comes later but the low siblings of hi's directories. (A key past hi
	 * in byte order only is a directory that sorts first: more may follow.)
	 */
	if (s->rhi && ord != JO_SYNC_ORDER_ANY && strcmp(k, s->rhi) >= 0 &&
	    jo_sync_dircmp(k, s->rhi) >= 0) {
		r->reached_hi = true;
		return 1;
	}
	if (!in_range(s, k))
		return 0;
	note_seen(s, k);
	return ord == JO_SYNC_ORDER_BYTES ? push(r, info) : sort_add(r, info);
}

/* A disagreement probe: the first in-range key of a place (see range_positions). */
struct probe2 {
	struct range *r;
	size_t at;               /* the byte that tells the place */
	bool low;                /* looking for a byte below '/' (else for '/') */
	bool add;                /* DIRFIRST: collect what is found into the sort */
	int scanned;
	bool found;
	bool unsure;             /* the directory probe could not tell (see below) */
	char *prev;              /* the directory probe: the last key, for the order */
};

#define PROBE_SCAN 2000

static int probe2_cb(const struct jo_obj_info *info, void *p)
{
	struct probe2 *q = p;
	struct jo_sync_stream *s = q->r->s;
	unsigned char c = (unsigned char)info->key[q->at];

	if (info->is_prefix || info->is_link)
		return 0;
	if (jo_cancelled() || __atomic_load_n(&s->stop, __ATOMIC_RELAXED))
		return JO_ECANCELED;
	if (++q->scanned > PROBE_SCAN && !q->add) {
		q->unsure = true;
		return 1;
	}
	if (q->low) {
		/* after the directory come its low siblings, then the rest (>= '0') */
		if (c >= '0')
			return 1;
		if (!c || c == '/' || !in_range(s, info->key))
			return 0;
	} else {
		/*
		 * The directory S[0..j)/: read in the store's order until a key past
		 * hi in both orders (nothing of the range can follow in either kind
		 * of store, but low siblings of hi's own directories, probed apart),
		 * watching the byte order on the way.
		 */
		if (q->prev && strcmp(info->key, q->prev) <= 0) {
			q->found = true;
			return 1;
		}
		free(q->prev);
		q->prev = strdup(info->key);
		if (!q->prev)
			return JO_ENOMEM;
		if (s->rhi && strcmp(info->key, s->rhi) >= 0 && jo_sync_dircmp(info->key, s->rhi) >= 0)
			return 1;
		if (!in_range(s, info->key))
			return 0;
	}
	q->found = true;
	if (q->add)
		return sort_add(q->r, info);
	return 1;
}

/*
 * After the main listing. BYTES: a place where the orders disagree and an
 * in-range key exists that the main listing did not see means the store is
 * directory-first: JO_SYNC_EORDER (a byte-order store lists those keys
 * inside the range, in order). DIRFIRST: fetch hi's low siblings into the
 * sort (the start point was covered by starting before its first byte below
 * '/').
 */
static int disagreements(struct range *r, struct jo_err *err)
{
	struct jo_sync_stream *s = r->s;
	bool bytes = s->opts.order == JO_SYNC_ORDER_BYTES;
	const char *st = s->after ? s->after : s->rlo;
	int rc = 0;

	for (int i = 0; r->reached_hi && i < s->nslash && !rc; i++) {
		size_t at = s->slash[i];
		char *x = strndup(s->rhi, at);
		char *marker = x ? cat3(x, at, "/", 1, MAXCP) : NULL;
		struct probe2 q = { .r = r, .at = at, .low = true, .add = !bytes };

		if (!marker) {
			free(x);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		rc = jo_obj_list(s->o, x, marker, NULL, probe2_cb, &q, err);
		if (rc == 1)
			rc = 0;
		if (!rc && bytes && q.found && !s->seen_low[i])
			rc = JO_SYNC_EORDER;
		free(x);
		free(marker);
	}
	for (int j = 0; bytes && j < s->nlow && !rc; j++) {
		size_t at = s->low[j];
		char *xd = cat3(st, at, "/", 1, NULL);
		struct probe2 q = { .r = r, .at = at, .low = false };

		if (!xd)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		rc = jo_obj_list(s->o, xd, NULL, NULL, probe2_cb, &q, err);
		if (rc == 1)
			rc = 0;
		/*
		 * The directory S[0..j)/ sorts after S in byte order, before it
		 * directory-first. The main listing saw none of it; a key of it in
		 * the range (or out of byte order, or too many to tell) means the
		 * store skipped it: an order break (the range is listed again
		 * directory-first).
		 */
		if (!rc && !s->seen_dir[j] && (q.found || q.unsure))
			rc = JO_SYNC_EORDER;
		free(q.prev);
		free(xd);
	}
	return rc;
}

/* The start-after of the main listing. */
static char *range_marker(struct jo_sync_stream *s)
{
	const char *st = s->after ? s->after : s->rlo;
	enum jo_sync_order ord = s->opts.order;

	if (!st || ord == JO_SYNC_ORDER_ANY)
		return NULL;
	/* DIRFIRST: start before S's first byte below '/', so that the
	 * directory S[0..j)/ (listed before S there) is read too */
	if (ord == JO_SYNC_ORDER_DIRFIRST && s->nlow)
		return strndup(st, s->low[0]);
	return s->after ? strdup(s->after) : jo_sync_bound_pred(s->rlo);
}

static void *range_lister_main(void *p)
{
	struct range *r = p;
	struct jo_sync_stream *s = r->s;
	enum jo_sync_order ord = s->opts.order;
	char *marker = range_marker(s);
	int rc = 0;

	if ((s->after || s->rlo) && ord != JO_SYNC_ORDER_ANY && !marker)
		rc = jo_err_set(&r->err, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = jo_obj_list(s->o, s->lprefix, marker, NULL, range_cb, r, &r->err);
	if (rc == 1)
		rc = 0;
	if (!rc && ord != JO_SYNC_ORDER_ANY)
		rc = disagreements(r, &r->err);
	if (!rc && s->opts.sort)
		rc = jo_xsort_finish(s->xs, &r->err);
	if (rc == JO_SYNC_EORDER)
		jo_err_set(&r->err, JO_EPROTO, "keys listed out of %s order near \"%s\"",
			   ord == JO_SYNC_ORDER_BYTES ? "byte" : "directory-first",
			   r->prev ? r->prev : "");
	free(marker);
	finish(s, &r->rc, &r->done, rc);
	return NULL;
}

int jo_sync_stream_start(struct jo_sync_stream **out, struct jo_obj *o, const char *prefix,
			 const struct jo_sync_stream_opts *so, struct jo_err *err)
{
	*out = NULL;
	struct jo_sync_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s->o = o;
	s->prefix = strdup(prefix ? prefix : "");
	if (!s->prefix) {
		free(s);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	s->plen = strlen(s->prefix);
	s->opts = *so;
	s->opts.after = NULL;
	if (so->after && *so->after) {
		s->after = malloc(s->plen + strlen(so->after) + 1);
		if (!s->after) {
			free(s->prefix);
			free(s);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		memcpy(s->after, s->prefix, s->plen);
		strcpy(s->after + s->plen, so->after);
	}
	if (s->opts.threads < 1)
		s->opts.threads = 1;
	if (s->opts.range) {
		int rrc = range_setup(s, so);

		if (rrc) {
			jo_free_strs(&s->rlo, &s->rhi, &s->lprefix, &s->after, &s->prefix);
			free(s);
			return jo_err_set(err, rrc, rrc == JO_EINVAL ? "range bounds are not boundaries"
								   : "out of memory");
		}
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (pthread_create(&s->planner, NULL, planner_main, s) != 0) {
		free(s->after);
		free(s->prefix);
		free(s);
		return jo_err_set(err, JO_EIO, "cannot start the listing thread");
	}
	*out = s;
	return 0;
}

static int check_order(struct jo_sync_stream *s, const char *rel, struct jo_err *err)
{
	if (s->last && strcmp(rel, s->last) <= 0) {
		jo_err_set(err, JO_EPROTO, "keys listed out of byte order: \"%s\" after \"%s\"", rel,
			   s->last);
		return JO_SYNC_EORDER;
	}
	char *n = strdup(rel);
	if (!n)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	free(s->last);
	s->last = n;
	return 0;
}

static const char *strip(struct jo_sync_stream *s, const char *key)
{
	return strncmp(key, s->prefix, s->plen) == 0 ? key + s->plen : key;
}

static int next_sorted(struct jo_sync_stream *s, struct jo_sync_ent *ent, struct jo_err *err)
{
	struct range *r = s->ranges[0];
	pthread_mutex_lock(&s->mu);
	while (!r->done)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (r->rc < 0 || r->rc == JO_SYNC_EORDER) {
		*err = r->err;
		return r->rc;
	}
	for (;;) {
		const void *rec;
		size_t len;
		int rc = jo_xsort_next(s->xs, &rec, &len, err);
		if (rc <= 0)
			return rc;
		const char *k = rec;
		size_t kl = strnlen(k, len);
		if (kl + 17 > len)
			return jo_err_set(err, JO_EPROTO, "corrupt sort record");
		const char *rel = strip(s, k);
		if (s->last && strcmp(rel, s->last) == 0)
			continue; /* the store listed a key twice */
		rc = check_order(s, rel, err);
		if (rc)
			return rc;
		ent->key = s->last;
		memcpy(&ent->size, k + kl + 1, 8);
		memcpy(&ent->mtime, k + kl + 9, 8);
		size_t el = len - kl - 17;
		if (el >= sizeof(ent->etag))
			el = sizeof(ent->etag) - 1;
		memcpy(ent->etag, k + kl + 17, el);
		ent->etag[el] = 0;
		return 1;
	}
}

int jo_sync_stream_next(struct jo_sync_stream *s, struct jo_sync_ent *ent, struct jo_err *err)
{
	pthread_mutex_lock(&s->mu);
	while (!s->planned)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	if (s->plan_rc < 0) {
		*err = s->plan_err;
		return s->plan_rc;
	}
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "cancelled");
	if (s->opts.sort)
		return next_sorted(s, ent, err);
	qent_free(&s->curent);
	for (;;) {
		if (s->cur >= s->nranges)
			return 0;
		struct range *r = s->ranges[s->cur];
		pthread_mutex_lock(&s->mu);
		while (r->count == 0 && !r->done)
			pthread_cond_wait(&s->cv, &s->mu);
		if (r->count == 0) {
			pthread_mutex_unlock(&s->mu);
			if (r->rc == JO_SYNC_EORDER) {
				*err = r->err;
				return JO_SYNC_EORDER;
			}
			if (r->rc < 0) {
				*err = r->err;
				return r->rc;
			}
			s->cur++;
			continue;
		}
		s->curent = r->q[r->head];
		r->head = (r->head + 1) % QCAP;
		r->count--;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		int rc = check_order(s, strip(s, s->curent.key), err);
		if (rc)
			return rc;
		ent->key = s->last;
		ent->size = s->curent.size;
		ent->mtime = s->curent.mtime;
		memcpy(ent->etag, s->curent.etag, sizeof(ent->etag));
		return 1;
	}
}

void jo_sync_stream_free(struct jo_sync_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	__atomic_store_n(&s->stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->planner, NULL);
	for (int i = 0; i < s->nranges; i++) {
		struct range *r = s->ranges[i];
		if (r->started)
			pthread_join(r->th, NULL);
		while (r->count) {
			qent_free(&r->q[r->head]);
			r->head = (r->head + 1) % QCAP;
			r->count--;
		}
		free(r->lo);
		free(r->hi);
		free(r->start_after);
		free(r->prev);
		free(r);
	}
	free(s->ranges);
	jo_xsort_free(s->xs);
	qent_free(&s->curent);
	jo_free_strs(&s->last, &s->prefix, &s->after, &s->rlo, &s->rhi, &s->lprefix);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}

/* A counter of s that the listing threads update, read under s's lock. */
static uint64_t locked_read(const struct jo_sync_stream *s, const uint64_t *counter)
{
	struct jo_sync_stream *m = (struct jo_sync_stream *)s;
	uint64_t n;

	pthread_mutex_lock(&m->mu);
	n = *counter;
	pthread_mutex_unlock(&m->mu);
	return n;
}

uint64_t jo_sync_stream_links(const struct jo_sync_stream *s)
{
	return locked_read(s, &s->links);
}

int jo_sync_stream_ranges(const struct jo_sync_stream *s)
{
	return s->nranges;
}

uint64_t jo_sync_stream_listed(const struct jo_sync_stream *s)
{
	return locked_read(s, &s->listed);
}

