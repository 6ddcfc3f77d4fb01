/*
 * plan.c: cut a sync job's key space into ranges of about equal work, for
 * the cluster mode, from samples of both listings.
 *
 * The sample is a tree of key prefixes. Expanding a prefix P walks its
 * children (the next character after P) with one ListObjects request per
 * page: the keys of a page come in runs, one run per child; every run but
 * the page's last is a child counted exactly, and the next request starts
 * after the last child (start-after P + child + U+10FFFF), so a child with a
 * million keys costs one request, not a thousand. A child seen only at the
 * end of a full page holds more than that page showed and is expanded in
 * turn, heaviest first, until every prefix is counted or the request budget
 * is spent. Both sides are sampled; a prefix weighs its SRC objects plus
 * its DST objects (both must be listed; SRC's are the copies).
 *
 * A cut may come before any child (whole characters, so a boundary is
 * valid UTF-8) or, inside a small prefix listed whole, before any key.
 * Range listers handle the few keys that byte order and directory-first
 * order (SeaweedFS) place on different sides of a boundary
 * (jo_sync_bound_ok in sync.h).
 *
 * Runs of children are contiguous in any store that lists in some
 * lexicographic order, so the walk works on byte-order and directory-first
 * stores alike; a store that ignores start-after (the first key of a page is
 * not past the marker) is only walked page by page.
 */
#include "sync/sync.h"

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/log.h"
#include "common/object/object.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 1000
#define MAXCP "\xf4\x8f\xbf\xbf"

struct node {
	char *p;                 /* relative prefix */
	size_t plen;
	int depth;
	bool seen[2];            /* some key of this prefix was listed on side i */
	uint64_t n[2];           /* keys counted (all of them unless trunc) */
	bool trunc[2];           /* more keys than counted */
	bool expanded[2];
	bool tail_unknown[2];    /* the walk could not get past a full page */
	uint64_t head[2];        /* the key P itself */
	struct node **kids;
	size_t nkids, kcap;
	double w;                /* estimated weight (after estimate()) */
	/* a heavy exact leaf split at its keys (after the cut is known) */
	char **keys;
	size_t nkeys;
};

struct side {
	struct jo_obj *o;
	const char *prefix;
	size_t plen;
	bool disorder;           /* a page was out of byte order */
	bool ignores_sa;
	int probes;
};

struct planner {
	struct side sd[2];
	int max_probes;
	struct node *root;
	double grow_sum;         /* truncated nodes expanded: total / first seen */
	int grow_n;
	struct jo_err *err;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkids; i++)
		node_free(n->kids[i]);
	for (size_t i = 0; i < n->nkeys; i++)
		free(n->keys[i]);
	free(n->keys);
	free(n->kids);
	free(n->p);
	free(n);
}

static struct node *node_new(const char *p, size_t len, int depth)
{
	struct node *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->p = strndup(p, len);
	if (!n->p) {
		free(n);
		return NULL;
	}
	n->plen = len;
	n->depth = depth;
	return n;
}

/* Length of the character at s (UTF-8 when valid, else one byte). */
static size_t char_len(const unsigned char *s)
{
	size_t l = 1;

	if (s[0] >= 0xc2 && s[0] <= 0xf4) {
		size_t want = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;

		while (l < want && (s[l] & 0xc0) == 0x80)
			l++;
		if (l != want)
			l = 1;
	}
	return l;
}

/* The child of n named by key k (relative, starts with n->p), made if new. */
static struct node *child_of(struct node *n, const char *k)
{
	const unsigned char *c = (const unsigned char *)k + n->plen;
	size_t cl = char_len(c);
	size_t lo = 0, hi = n->nkids;

	/* kids are kept in byte order of their prefix */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int r = strncmp(n->kids[mid]->p + n->plen, (const char *)c, cl);

		if (r == 0 && strlen(n->kids[mid]->p) - n->plen == cl)
			return n->kids[mid];
		if (r < 0 || (r == 0 && strlen(n->kids[mid]->p) - n->plen < cl))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (jo_grow_array(&n->kids, &n->kcap, n->nkids + 1, sizeof(*n->kids)))
		return NULL;
	struct node *kid = node_new(k, n->plen + cl, n->depth + 1);
	if (!kid)
		return NULL;
	memmove(n->kids + lo + 1, n->kids + lo, (n->nkids - lo) * sizeof(*n->kids));
	n->kids[lo] = kid;
	n->nkids++;
	return kid;
}

/* ---- one page --------------------------------------------------------------- */

struct page {
	struct side *sd;
	char **keys;             /* relative */
	size_t n;
	bool full;
	int rc;
};

static int page_cb(const struct jo_obj_info *info, void *p)
{
	struct page *pg = p;
	const char *k = info->key;

	if (info->is_prefix || info->is_link)
		return 0;
	if (jo_cancelled())
		return JO_ECANCELED;
	if (strncmp(k, pg->sd->prefix, pg->sd->plen) != 0)
		return 0;
	pg->keys[pg->n] = strdup(k + pg->sd->plen);
	if (!pg->keys[pg->n])
		return JO_ENOMEM;
	pg->n++;
	if (pg->n == PAGE) {
		pg->full = true;
		return 1;
	}
	return 0;
}

static void page_release(struct page *pg)
{
	for (size_t i = 0; i < pg->n; i++)
		free(pg->keys[i]);
	pg->n = 0;
}

static int list_page(struct planner *pl, int si, const char *rel_prefix, const char *rel_marker,
		     struct page *pg)
{
	struct side *sd = &pl->sd[si];
	size_t rl = strlen(rel_prefix);
	char *full = malloc(sd->plen + rl + 1), *mk = NULL;
	int rc;

	pg->sd = sd;
	pg->n = 0;
	pg->full = false;
	if (!full)
		return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
	memcpy(full, sd->prefix, sd->plen);
	memcpy(full + sd->plen, rel_prefix, rl + 1);
	if (rel_marker) {
		size_t ml = strlen(rel_marker);

		mk = malloc(sd->plen + ml + 1);
		if (!mk) {
			free(full);
			return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
		}
		memcpy(mk, sd->prefix, sd->plen);
		memcpy(mk + sd->plen, rel_marker, ml + 1);
	}
	sd->probes++;
	rc = jo_obj_list(sd->o, full, mk, NULL, page_cb, pg, pl->err);
	free(full);
	free(mk);
	if (rc == 1)
		rc = 0;
	if (rc < 0)
		jo_err_wrap(pl->err, "sampling the listing of %s", jo_obj_describe(sd->o));
	return rc;
}

/* Runs of one child each: count them; the last run's child is returned. */
static int count_runs(struct planner *pl, struct node *n, int si, char **keys, size_t nk,
		      struct node **lastp)
{
	struct node *last = *lastp;
	uint64_t run = 0;

	for (size_t i = 0; i < nk; i++) {
		const char *k = keys[i];

		if (strlen(k) == n->plen) {
			n->head[si]++;
			continue;
		}
		struct node *kid = child_of(n, k);
		if (!kid)
			return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
		if (kid != last) {
			if (last)
				last->n[si] += run;
			last = kid;
			run = 0;
		}
		kid->seen[si] = true;
		run++;
	}
	if (last)
		last->n[si] += run;
	*lastp = last;
	return 0;
}

/* A store that ignores start-after: one paginated listing, up to a cap. */
struct seq {
	struct planner *pl;
	struct node *n;
	int si;
	char **keys;
	size_t nk;
	uint64_t left;           /* keys still allowed */
	struct node *last;
	bool capped;
	int rc;
};

static int seq_cb(const struct jo_obj_info *info, void *p)
{
	struct seq *q = p;
	struct side *sd = &q->pl->sd[q->si];

	if (info->is_prefix || info->is_link)
		return 0;
	if (jo_cancelled())
		return JO_ECANCELED;
	if (strncmp(info->key, sd->prefix, sd->plen) != 0)
		return 0;
	if (!q->left) {
		q->capped = true;
		return 1;
	}
	q->left--;
	q->keys[q->nk] = strdup(info->key + sd->plen);
	if (!q->keys[q->nk])
		return JO_ENOMEM;
	if (++q->nk == PAGE) {
		sd->probes++;
		if (q->nk > 1)
			for (size_t i = 1; i < q->nk && !sd->disorder; i++)
				if (strcmp(q->keys[i - 1], q->keys[i]) >= 0)
					sd->disorder = true;
		int rc = count_runs(q->pl, q->n, q->si, q->keys, q->nk, &q->last);

		for (size_t i = 0; i < q->nk; i++)
			free(q->keys[i]);
		q->nk = 0;
		if (rc)
			return rc;
	}
	return 0;
}

static void reset_side(struct node *n, int si)
{
	n->n[si] = 0;
	n->head[si] = 0;
	n->tail_unknown[si] = false;
	for (size_t i = 0; i < n->nkids; i++) {
		n->kids[i]->n[si] = 0;
		n->kids[i]->trunc[si] = false;
	}
}

static int walk_sequential(struct planner *pl, struct node *n, int si)
{
	struct side *sd = &pl->sd[si];
	struct seq q = { .pl = pl, .n = n, .si = si };
	char *full;
	int rc;

	reset_side(n, si);
	q.keys = calloc(PAGE, sizeof(char *));
	full = malloc(sd->plen + n->plen + 1);
	if (!q.keys || !full) {
		free(q.keys);
		free(full);
		return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
	}
	memcpy(full, sd->prefix, sd->plen);
	memcpy(full + sd->plen, n->p, n->plen + 1);
	q.left = sd->probes < pl->max_probes ? (uint64_t)(pl->max_probes - sd->probes) * PAGE : 0;
	rc = jo_obj_list(sd->o, full, NULL, NULL, seq_cb, &q, pl->err);
	if (rc == 1)
		rc = 0;
	if (!rc && q.nk) {
		sd->probes++;
		rc = count_runs(pl, n, si, q.keys, q.nk, &q.last);
	}
	for (size_t i = 0; i < q.nk; i++)
		free(q.keys[i]);
	free(q.keys);
	free(full);
	if (!rc && q.capped && q.last)
		q.last->trunc[si] = true;
	if (!rc && q.capped)
		n->tail_unknown[si] = true;
	return rc < 0 ? jo_err_wrap(pl->err, "sampling the listing of %s", jo_obj_describe(sd->o)) : rc;
}

/*
 * Walk the children of n on side si (see the top of the file). Counts each
 * child; a child cut off by the end of a full page is marked truncated.
 */
static int walk(struct planner *pl, struct node *n, int si)
{
	struct side *sd = &pl->sd[si];
	struct page pg = { 0 };
	char *marker = NULL;
	int rc = 0;

	n->expanded[si] = true;
	if (sd->ignores_sa)
		return walk_sequential(pl, n, si);
	pg.keys = calloc(PAGE, sizeof(char *));
	if (!pg.keys)
		return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
	reset_side(n, si);
	for (;;) {
		if (sd->probes >= pl->max_probes) {
			n->tail_unknown[si] = true;
			break;
		}
		rc = list_page(pl, si, n->p, marker, &pg);
		if (rc || pg.n == 0)
			break;
		if (marker && strcmp(pg.keys[0], marker) <= 0 && jo_sync_dircmp(pg.keys[0], marker) <= 0) {
			/* start-after was ignored: this store is read page by page */
			sd->ignores_sa = true;
			page_release(&pg);
			free(pg.keys);
			free(marker);
			return walk_sequential(pl, n, si);
		}
		for (size_t i = 1; i < pg.n && !sd->disorder; i++)
			if (strcmp(pg.keys[i - 1], pg.keys[i]) >= 0)
				sd->disorder = true;
		struct node *last = NULL;
		rc = count_runs(pl, n, si, pg.keys, pg.n, &last);
		if (rc || !pg.full)
			break;
		free(marker);
		marker = NULL;
		if (last) {
			/* the page's last child may go on past it: jump over the rest */
			size_t l = strlen(last->p);

			last->trunc[si] = true;
			marker = malloc(l + 5);
			if (marker) {
				memcpy(marker, last->p, l);
				memcpy(marker + l, MAXCP, 5);
			}
		} else {
			marker = strdup(pg.keys[pg.n - 1]);
		}
		page_release(&pg);
		if (!marker) {
			rc = jo_err_set(pl->err, JO_ENOMEM, "out of memory");
			break;
		}
	}
	page_release(&pg);
	free(pg.keys);
	free(marker);
	n->n[si] = n->head[si];
	for (size_t i = 0; i < n->nkids; i++)
		n->n[si] += n->kids[i]->n[si];
	return rc;
}

/* ---- expansion ----------------------------------------------------------- */

static double estimate(struct planner *pl, struct node *n);

static int ranges_for(const struct jo_sync_plan_opts *po, double total)
{
	int want = po && po->ranges > 0 ? po->ranges : (int)(total / 2000 + 0.999);

	if (!(po && po->ranges > 0) && want < 16)
		want = 16;
	return want < 1 ? 1 : want;
}

/*
 * The heaviest node still worth expanding on some side: one whose count on
 * that side is cut short, or that weighs more than half a range (unless it
 * is small enough to be split at its keys: split_leaves).
 */
static struct node *heaviest_open(struct node *n, double target, struct node *best, int *side)
{
	bool small = !n->trunc[0] && !n->trunc[1] && n->n[0] + n->n[1] <= 2 * PAGE;

	for (int si = 0; si < 2; si++) {
		if (n->expanded[si] || !n->n[si] || (!n->trunc[si] && (small || n->w <= target / 2)))
			continue;
		if (!best || n->w > best->w) {
			best = n;
			*side = si;
		}
	}
	for (size_t i = 0; i < n->nkids; i++)
		best = heaviest_open(n->kids[i], target, best, side);
	return best;
}

static void recount(struct node *n)
{
	for (int si = 0; si < 2; si++) {
		if (!n->expanded[si])
			continue;
		uint64_t t = n->head[si];

		for (size_t i = 0; i < n->nkids; i++) {
			recount(n->kids[i]);
			t += n->kids[i]->n[si];
		}
		n->n[si] = t;
	}
}

static int expand_all(struct planner *pl, const struct jo_sync_plan_opts *po)
{
	int rc = 0;

	for (int si = 0; si < 2 && !rc; si++)
		if (pl->sd[si].o)
			rc = walk(pl, pl->root, si);
	while (!rc) {
		int si = 0;
		double total = estimate(pl, pl->root);
		struct node *n = heaviest_open(pl->root, total / ranges_for(po, total), NULL, &si);

		if (!n || !pl->sd[si].o || pl->sd[si].probes >= pl->max_probes)
			break;
		if (jo_cancelled())
			return jo_err_set(pl->err, JO_ECANCELED, "cancelled");
		uint64_t seen = n->n[si];
		bool was_trunc = n->trunc[si];

		rc = walk(pl, n, si);
		recount(pl->root);
		if (!rc && was_trunc && seen && !n->tail_unknown[si]) {
			pl->grow_sum += (double)n->n[si] / (double)seen;
			pl->grow_n++;
		}
	}
	recount(pl->root);
	return rc;
}

/* ---- weights and cuts ---------------------------------------------------- */

static double est_side(const struct node *n, int si, double g)
{
	if (!n->expanded[si])
		return n->trunc[si] ? (double)n->n[si] * g : (double)n->n[si];
	double t = (double)n->head[si] + (n->tail_unknown[si] ? PAGE * g : 0);

	for (size_t i = 0; i < n->nkids; i++)
		t += est_side(n->kids[i], si, g);
	return t;
}

/* Every node's weight: its objects on both sides, estimated where sampled only. */
static double estimate(struct planner *pl, struct node *n)
{
	/* how much more a truncated prefix held than first seen, on average */
	double g = pl->grow_n ? pl->grow_sum / pl->grow_n : 4.0;

	if (g < 1)
		g = 1;
	for (size_t i = 0; i < n->nkids; i++)
		estimate(pl, n->kids[i]);
	n->w = est_side(n, 0, g) + est_side(n, 1, g);
	return n->w;
}

struct cut {
	char *at;                /* boundary before the item, or NULL */
	double w;
};

struct cuts {
	struct cut *c;
	size_t n, cap;
	bool oom;
};

static void cut_push(struct cuts *cs, const char *at, size_t atlen, double w)
{
	if (cs->oom)
		return;
	if (jo_grow_array(&cs->c, &cs->cap, cs->n + 1, sizeof(*cs->c))) {
		cs->oom = true;
		return;
	}
	cs->c[cs->n].at = at ? strndup(at, atlen) : NULL;
	if (at && !cs->c[cs->n].at) {
		cs->oom = true;
		return;
	}
	cs->c[cs->n].w = w;
	cs->n++;
}

/* The shortest boundary b with prev < b <= k (both relative, sharing the
 * node's prefix), or 0 when there is none. */
static size_t key_cut(const char *prev, const char *k, size_t from)
{
	size_t j = 0;

	while (prev[j] && prev[j] == k[j])
		j++;
	if (!k[j] || j < from)
		return 0;
	size_t l = j + char_len((const unsigned char *)k + j);
	char *b = strndup(k, l);
	bool ok = b && jo_sync_bound_ok(b);
	free(b);
	return ok ? l : 0;
}

/* Items in byte order: the node's own key, then its children in order. */
static void emit(struct planner *pl, struct node *n, struct cuts *cs, bool cut_here)
{
	if (cut_here)
		cut_push(cs, n->p, n->plen, 0);
	if (n->nkeys) {
		/* a heavy leaf listed whole: one item per key, cut where a boundary fits */
		for (size_t i = 0; i < n->nkeys; i++) {
			size_t l = i ? key_cut(n->keys[i - 1], n->keys[i], n->plen) : 0;

			if (l)
				cut_push(cs, n->keys[i], l, 1);
			else
				cut_push(cs, NULL, 0, 1);
		}
		return;
	}
	if (!n->nkids) {
		cut_push(cs, NULL, 0, n->w);
		return;
	}
	double own = n->w;
	for (size_t i = 0; i < n->nkids; i++)
		own -= n->kids[i]->w;
	cut_push(cs, NULL, 0, own > 0 ? own : 0);
	for (size_t i = 0; i < n->nkids; i++)
		emit(pl, n->kids[i], cs, true);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Heavy exact leaves: fetch their keys so they can be split. */
static int split_leaves(struct planner *pl, struct node *n, double target)
{
	int rc = 0;

	for (size_t i = 0; i < n->nkids && !rc; i++)
		rc = split_leaves(pl, n->kids[i], target);
	if (rc || n->nkids || n->w <= target || n->trunc[0] || n->trunc[1] ||
	    n->n[0] + n->n[1] > 2 * PAGE)
		return rc;
	struct page pg = { 0 };
	char **all = NULL;
	size_t na = 0;

	pg.keys = calloc(PAGE, sizeof(char *));
	all = calloc(2 * PAGE, sizeof(char *));
	if (!pg.keys || !all) {
		free(pg.keys);
		free(all);
		return jo_err_set(pl->err, JO_ENOMEM, "out of memory");
	}
	for (int si = 0; si < 2 && !rc; si++) {
		if (!pl->sd[si].o || !n->n[si])
			continue;
		rc = list_page(pl, si, n->p, NULL, &pg);
		for (size_t i = 0; !rc && i < pg.n && na < 2 * PAGE; i++) {
			all[na++] = pg.keys[i];
			pg.keys[i] = NULL;
		}
		pg.n = 0;
	}
	page_release(&pg);
	free(pg.keys);
	if (rc) {
		for (size_t i = 0; i < na; i++)
			free(all[i]);
		free(all);
		return rc;
	}
	qsort(all, na, sizeof(*all), cmp_str);
	n->keys = all;
	n->nkeys = na;
	return 0;
}

/* ---- the plan ------------------------------------------------------------ */

void jo_sync_plan_release(struct jo_sync_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nbounds; i++)
		free(p->bounds[i]);
	free(p->bounds);
	free(p->weights);
	memset(p, 0, sizeof(*p));
}

int jo_sync_plan_make(struct jo_obj *so, const char *sprefix, struct jo_obj *dob,
		      const char *dprefix, const struct jo_sync_plan_opts *po,
		      struct jo_sync_plan *out, struct jo_err *err)
{
	struct planner pl = { .err = err };
	struct cuts cs = { 0 };
	int rc;

	memset(out, 0, sizeof(*out));
	pl.sd[0].o = so;
	pl.sd[0].prefix = sprefix ? sprefix : "";
	pl.sd[0].plen = strlen(pl.sd[0].prefix);
	pl.sd[1].o = dob;
	pl.sd[1].prefix = dprefix ? dprefix : "";
	pl.sd[1].plen = strlen(pl.sd[1].prefix);
	pl.max_probes = po && po->max_probes > 0 ? po->max_probes : 2000;
	pl.root = node_new("", 0, 0);
	if (!pl.root)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = expand_all(&pl, po);
	if (rc)
		goto out;
	double total = estimate(&pl, pl.root);
	int want = ranges_for(po, total);
	double target = total / want;
	rc = split_leaves(&pl, pl.root, target);
	if (rc)
		goto out;
	emit(&pl, pl.root, &cs, false);
	if (cs.oom) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	/* greedy: cut before an item when the range would otherwise overshoot */
	out->bounds = calloc((size_t)want, sizeof(char *));
	out->weights = calloc((size_t)want + 1, sizeof(double));
	if (!out->bounds || !out->weights) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	double acc = 0, left = total;
	size_t nb = 0;
	for (size_t i = 0; i < cs.n; i++) {
		struct cut *c = &cs.c[i];
		int ranges_left = want - (int)nb;
		double goal = ranges_left > 0 ? left / ranges_left : left;

		if (c->at && acc > 0 && nb + 1 < (size_t)want && acc + c->w / 2 >= goal &&
		    (nb == 0 || strcmp(c->at, out->bounds[nb - 1]) > 0) && jo_sync_bound_ok(c->at)) {
			out->weights[nb] = acc;
			out->bounds[nb++] = c->at;
			c->at = NULL;
			left -= acc;
			acc = 0;
		}
		acc += c->w;
	}
	out->weights[nb] = acc;
	out->nbounds = nb;
	out->src_est = pl.root->n[0];
	out->dst_est = pl.root->n[1];
	out->src_exact = !pl.root->trunc[0] && !pl.sd[0].ignores_sa;
	out->dst_exact = !pl.root->trunc[1];
	out->src_order = pl.sd[0].disorder ? JO_SYNC_ORDER_DIRFIRST : JO_SYNC_ORDER_BYTES;
	out->dst_order = pl.sd[1].disorder ? JO_SYNC_ORDER_DIRFIRST : JO_SYNC_ORDER_BYTES;
	out->probes = pl.sd[0].probes + pl.sd[1].probes;
	out->est_total = total;
out:
	for (size_t i = 0; i < cs.n; i++)
		free(cs.c[i].at);
	free(cs.c);
	node_free(pl.root);
	if (rc)
		jo_sync_plan_release(out);
	return rc;
}
