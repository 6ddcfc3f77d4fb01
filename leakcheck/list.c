/*
 * leakcheck: the object side, listed by many threads into a sorter.
 *
 * The work items are the layout's prefixes (listed with "/" to find the next
 * level) and, at the leaves, key ranges (after, upto] of one prefix. A leaf
 * starts as one range; a lister whose range proves long (a page of keys and
 * more) while another lister sits idle cuts the rest of its range at split
 * keys (jo_obj_key_split) and hands the pieces out, so a flat prefix of a
 * million keys is listed by every lister at once, without probing first.
 * A store that does not honour start-after, or lists a leaf out of byte
 * order, is caught: the first stops the cutting, the second fails the run
 * (a range's end is only sound on an ordered listing).
 *
 * When the reference scan said where the referenced blocks are (a density
 * map, density.c), a leaf expected to hold many keys is cut as soon as it is
 * found, at slice-id boundaries, into pieces of about equal expected length,
 * and a piece asks for pages no longer than what it expects to hold: the
 * keys a page holds past a piece's end are read for nothing, and a piece cut
 * where no key lies is a request for nothing. The cutting while listing
 * stays for what the map cannot see (leaked objects, foreign keys).
 */
#include "leakcheck/leak.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/object/object.h"

#define LIST_BATCH 1024
#define LIST_MAX_THREADS 1024
#define SPLIT_EVERY 1000   /* keys a range lists between looks for idle listers */
#define SPLIT_MAX 8        /* pieces one cut makes at most */
/*
 * The first request of a piece asks for a short page: a piece is often
 * short, and the keys a page holds past the piece's end are read for
 * nothing (the store builds and sends them all the same).
 */
#define PIECE_FIRST_PAGE 250
#define PIECE_MIN_KEYS 2000 /* a leaf expected to hold fewer than twice this is one range */
#define PIECE_MAX 256       /* pieces one leaf is cut into before listing, at most */
#define RANGE_SKIP 1       /* range_key: not this range's key */
#define RANGE_END 2        /* on_entry: the range's end was passed */
#define PAGE_FULL 3        /* on_entry: the short first page is read */

struct pfx {
	char *prefix;
	int depth;
	char *after, *upto;   /* leaves: the key range (after, upto]; NULL: open */
	uint64_t expect;      /* leaves: block keys the density map expects (0: unknown) */
	int how;              /* a cluster range's lister: enum leak_pfx_how (else LIST) */
};

struct lister {
	struct jo_obj *obj;
	const struct leak_list_opts *o;
	struct jo_xsort *xs;
	char root[1100];
	size_t root_len;
	int max_depth;

	pthread_mutex_t lock;     /* queue, state, xsort, counters, foreign_cb */
	pthread_cond_t cond;
	struct pfx *q;
	size_t qn, qcap;
	int active, nthreads;
	atomic_bool stop;         /* read by listers' callbacks without the lock */
	bool no_split;            /* the store ignores start-after: cut nothing more */
	int rc;
	struct jo_err err;
	uint64_t listed, blocks, foreign, prefixes, prefixes_done, ranges;
	uint64_t piece_keys;      /* expected keys per piece of a cut leaf */
	bool done;
};

struct worker {
	struct lister *l;
	uint8_t batch[LIST_BATCH][LEAK_OBJ_REC_LEN];
	size_t nbatch;
	uint64_t listed;
	int cur_depth;
	int cur_how;              /* the prefix being listed: enum leak_pfx_how */
	/* the range being listed (leaves) */
	struct pfx *cur;
	char *prev;               /* last key of the range so far (order check, split point) */
	size_t prev_cap;
	uint64_t in_range;        /* keys of this range so far */
	bool first;               /* no key of this range yet */
	bool told;                /* this range said the store ignores start-after */
	int page_left;            /* keys left in a short page (0: no limit) */
	bool alphabet[256];
	struct jo_err err;
};

/* Record the first failure and stop every lister. Call with the lock held. */
static void fail_locked(struct lister *l, int rc, const struct jo_err *err)
{
	if (!l->rc) {
		l->rc = rc;
		l->err = *err;
		if (!l->err.code)
			l->err.code = rc;
	}
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
}

static int flush_batch(struct worker *w)
{
	struct lister *l = w->l;
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	for (size_t i = 0; i < w->nbatch && !rc; i++)
		rc = jo_xsort_add(l->xs, w->batch[i], LEAK_OBJ_REC_LEN, &w->err);
	l->blocks += w->nbatch;
	l->listed += w->listed;
	w->listed = 0;
	if (rc)
		fail_locked(l, rc, &w->err);
	pthread_mutex_unlock(&l->lock);
	w->nbatch = 0;
	return rc;
}

static void pfx_free(struct pfx *p)
{
	free(p->prefix);
	free(p->after);
	free(p->upto);
}

/* Queue a prefix, or a range of one (after/upto are taken over, even on failure). */
static int push_range_locked(struct lister *l, const char *prefix, int depth, char *after,
			     char *upto)
{
	struct pfx *e;

	if (jo_grow_array(&l->q, &l->qcap, l->qn + 1, sizeof(*l->q))) {
		free(after);
		free(upto);
		return JO_ENOMEM;
	}
	e = &l->q[l->qn];
	e->prefix = strdup(prefix);
	if (!e->prefix) {
		free(after);
		free(upto);
		return JO_ENOMEM;
	}
	e->depth = depth;
	e->after = after;
	e->upto = upto;
	e->expect = 0;
	e->how = LEAK_PFX_LIST;
	l->qn++;
	l->prefixes++;            /* work items, for the progress line */
	if (after || upto)
		l->ranges++;
	/* all: the main thread waits on this condition too, and a signal it
	 * took would leave the item queued with listers asleep */
	pthread_cond_broadcast(&l->cond);
	return 0;
}

static int push_locked(struct lister *l, const char *prefix, int depth)
{
	return push_range_locked(l, prefix, depth, NULL, NULL);
}

/* The slice ids of a leaf "ROOT/A/B/" of the plain layout: B*1000 .. B*1000+999. */
static bool leaf_ids(const struct lister *l, const char *prefix, uint64_t *lo)
{
	const char *p = prefix + l->root_len;
	char *end;
	unsigned long long a, b;

	if (strncmp(prefix, l->root, l->root_len) != 0 || *p < '0' || *p > '9')
		return false;
	a = strtoull(p, &end, 10);
	if (*end != '/' || end[1] < '0' || end[1] > '9')
		return false;
	b = strtoull(end + 1, &end, 10);
	if (end[0] != '/' || end[1] != '\0' || b / 1000 != a || b > UINT64_MAX / 1000)
		return false;
	*lo = (uint64_t)b * 1000;
	return true;
}

/* Keys of a leaf sort by "ID_": ids below 1000 share leaf 0 in that order, not numerically. */
static int id_key_cmp(const void *a, const void *b)
{
	char x[24], y[24];

	snprintf(x, sizeof(x), "%" PRIu64 "_", *(const uint64_t *)a);
	snprintf(y, sizeof(y), "%" PRIu64 "_", *(const uint64_t *)b);
	return strcmp(x, y);
}

/*
 * Queue a leaf found by the discovery: cut at slice-id boundaries into
 * pieces of about l->piece_keys expected keys when the density map expects
 * it to be long, else as one range (with what it expects, so that it is not
 * cut while listed unless it proves longer). The cut before id Y is the key
 * "ROOT/A/B/Y_": every key of an id sorting before Y is below it, every key
 * of Y above it.
 */
static int push_leaf_locked(struct lister *l, const char *prefix, int depth)
{
	const struct leak_density *d = l->o->density;
	uint64_t order[1000], lo, pieces;
	double e, per, acc = 0;
	char *after = NULL;
	size_t plen = strlen(prefix);
	int rc;

	if (!d || l->o->hash_prefix || !leaf_ids(l, prefix, &lo))
		return push_locked(l, prefix, depth);
	e = leak_density_est(d, lo, lo + 999);
	if (e < 2.0 * (double)l->piece_keys) {
		rc = push_locked(l, prefix, depth);
		if (!rc)
			l->q[l->qn - 1].expect = (uint64_t)(e + 0.5);
		return rc;
	}
	pieces = (uint64_t)(e / (double)l->piece_keys + 0.5);
	if (pieces > PIECE_MAX)
		pieces = PIECE_MAX;
	per = e / (double)pieces;
	for (unsigned i = 0; i < 1000; i++)
		order[i] = lo + i;
	if (lo == 0)
		qsort(order, 1000, sizeof(order[0]), id_key_cmp);
	for (unsigned i = 0, cuts = 0; i < 1000; i++) {
		double x = leak_density_est(d, order[i], order[i]);
		char *upto;

		/* cut only before an id that holds keys, and pieces - 1 times at most */
		if (x <= 0 || acc + x / 2 < per || acc <= 0 || cuts + 1 >= pieces) {
			acc += x;
			continue;
		}
		cuts++;
		/* cut before order[i] */
		upto = malloc(plen + 24);
		if (!upto) {
			free(after);
			return JO_ENOMEM;
		}
		snprintf(upto, plen + 24, "%s%" PRIu64 "_", prefix, order[i]);
		rc = push_range_locked(l, prefix, depth, after, upto);
		if (rc)
			return rc;
		l->q[l->qn - 1].expect = (uint64_t)(acc + 0.5);
		after = strdup(upto);
		if (!after)
			return JO_ENOMEM;
		acc = x;
	}
	rc = push_range_locked(l, prefix, depth, after, NULL);
	if (!rc)
		l->q[l->qn - 1].expect = (uint64_t)(acc + 0.5);
	return rc;
}

/*
 * A long range while listers sit idle: keep (prev, b1] of it and queue
 * (b1, b2] ... (bk, upto]. The listing under way stops at its first key
 * past b1 (on_entry compares with cur->upto).
 */
static int maybe_split(struct worker *w)
{
	struct lister *l = w->l;
	struct pfx *cur = w->cur;
	char **keys = NULL;
	int idle, n, k, rc = 0;

	pthread_mutex_lock(&l->lock);
	idle = l->no_split ? 0 : l->nthreads - l->active - (int)l->qn;
	pthread_mutex_unlock(&l->lock);
	if (idle <= 0)
		return 0;
	n = idle + 1 < SPLIT_MAX ? idle + 1 : SPLIT_MAX;
	k = jo_obj_key_split(cur->prefix, w->prev, cur->upto, w->alphabet, n, &keys);
	if (k < 0)
		return jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory");
	if (k == 0)
		return 0;
	pthread_mutex_lock(&l->lock);
	/* pieces 2..k+1, from the top down so that idle listers take the low ones first */
	for (int i = k - 1; i >= 0 && !rc; i--) {
		char *after = strdup(keys[i]);
		char *upto = i == k - 1 ? (cur->upto ? strdup(cur->upto) : NULL) : strdup(keys[i + 1]);

		if (!after || (!upto && (i < k - 1 || cur->upto))) {
			free(after);
			free(upto);
			rc = JO_ENOMEM;
			break;
		}
		rc = push_range_locked(l, cur->prefix, cur->depth, after, upto);
		if (!rc)
			l->q[l->qn - 1].how = cur->how;   /* a piece is taken as its leaf */
	}
	pthread_mutex_unlock(&l->lock);
	if (rc == 0) {
		free(cur->upto);
		cur->upto = keys[0];
		keys[0] = NULL;
	}
	for (int i = 0; i < k; i++)
		free(keys[i]);
	free(keys);
	return rc ? jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory") : 0;
}

/* Range bookkeeping for a key of a leaf: 0 to take it, RANGE_SKIP, RANGE_END, or an error. */
static int range_key(struct worker *w, const char *key)
{
	struct pfx *cur = w->cur;
	struct lister *l = w->l;
	size_t kl;

	if (cur->after && strcmp(key, cur->after) <= 0) {
		/* the store listed from before our start: it ignores start-after */
		if (w->first && !w->told) {
			pthread_mutex_lock(&l->lock);
			l->no_split = true;
			pthread_mutex_unlock(&l->lock);
			w->told = true;
		}
		return RANGE_SKIP;
	}
	if (cur->upto && strcmp(key, cur->upto) > 0)
		return RANGE_END;
	if (w->prev && !w->first && strcmp(key, w->prev) <= 0)
		return jo_err_set(&w->err, JO_EPROTO,
				  "leakcheck: '%s' listed after '%s': the store does not list '%s' "
				  "in byte order", key, w->prev, cur->prefix);
	kl = strlen(key);
	if (kl + 1 > w->prev_cap) {
		char *np = realloc(w->prev, kl + 1);

		if (!np)
			return jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory");
		w->prev = np;
		w->prev_cap = kl + 1;
	}
	memcpy(w->prev, key, kl + 1);
	w->first = false;
	jo_obj_key_alphabet_add(w->alphabet, key + strlen(cur->prefix));
	if (++w->in_range % SPLIT_EVERY == 0 &&
	    (!cur->expect || w->in_range > cur->expect + SPLIT_EVERY)) {
		int rc = maybe_split(w);

		if (rc)
			return rc;
	}
	return 0;
}

static int report_foreign(struct worker *w, const struct jo_obj_info *info)
{
	struct lister *l = w->l;
	struct leak_item it = {
		.kind = LEAK_FOREIGN, .reason = info->is_link ? "symlink" : "not_a_block_key",
		.size = info->size, .mtime = info->mtime, .key = info->key,
	};
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	l->foreign++;
	if (l->o->foreign_cb)
		rc = l->o->foreign_cb(&it, l->o->payload);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* One object of the layout: a block record for the sorter, or a foreign key. */
static int take(struct worker *w, const struct jo_obj_info *info)
{
	const struct leak_list_opts *o = w->l->o;
	uint64_t id;
	uint32_t indx, bsize;
	char canon[1200];

	w->listed++;
	/* A symlink (file storage) is no object, whatever its name: never followed or deleted. */
	if (info->is_link)
		return report_foreign(w, info);
	if (jo_block_parse(info->key, &id, &indx, &bsize) != 0 ||
	    jo_block_key(canon, sizeof(canon), o->volname, o->hash_prefix, id, indx, bsize) < 0 ||
	    strcmp(canon, info->key) != 0)
		return report_foreign(w, info);
	leak_obj_encode(w->batch[w->nbatch++], id, indx, bsize, info->size, info->mtime);
	if (w->nbatch == LIST_BATCH)
		return flush_batch(w);
	return 0;
}

/*
 * A cluster range's lister: is this key (not a prefix) of its range? Every
 * key under a prefix that is the range's whole, or under a leaf listed in
 * its window, is; the keys found beside the layout's directories and those
 * of a leaf listed whole for several ranges are sorted out one by one.
 */
static bool ours(const struct worker *w, const char *key)
{
	const struct leak_list_opts *o = w->l->o;

	if (!o->ranges || w->cur_how == LEAK_PFX_WHOLE ||
	    (w->cur_depth >= w->l->max_depth && w->cur_how != LEAK_PFX_FILTER))
		return true;
	return leak_range_of_key(o->ranges, o->volname, o->hash_prefix, key) == o->range;
}

/* A cluster range's lister found a prefix: queue it as its range says (or not at all). */
static int push_cluster_locked(struct worker *w, const char *prefix)
{
	struct lister *l = w->l;
	int depth = w->cur_depth + 1, how = LEAK_PFX_WHOLE, rc;
	char *after = NULL, *upto = NULL;

	if (w->cur_how != LEAK_PFX_WHOLE) {
		rc = leak_range_prefix(l->o->ranges, l->o->range, l->o->hash_prefix, prefix,
				       l->root_len, depth, &how, &after, &upto);
		if (rc || how == LEAK_PFX_SKIP)
			return rc;
	}
	/* a whole leaf of the plain layout: cut by the density map, as on one host */
	if (how == LEAK_PFX_LIST && depth == l->max_depth && !after && !upto)
		return push_leaf_locked(l, prefix, depth);
	rc = push_range_locked(l, prefix, depth, after, upto);
	if (!rc)
		l->q[l->qn - 1].how = how;
	return rc;
}

static int on_entry(const struct jo_obj_info *info, void *payload)
{
	struct worker *w = payload;
	struct lister *l = w->l;

	if (l->stop)
		return JO_ECANCELED;
	if (jo_cancelled())
		return jo_err_set(&w->err, JO_ECANCELED, "leakcheck: canceled");
	if (info->is_prefix) {
		int rc;

		pthread_mutex_lock(&l->lock);
		rc = l->o->ranges ? push_cluster_locked(w, info->key)
		     : w->cur_depth + 1 == l->max_depth ? push_leaf_locked(l, info->key, w->cur_depth + 1)
							: push_locked(l, info->key, w->cur_depth + 1);
		pthread_mutex_unlock(&l->lock);
		if (rc)
			return jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory");
		return 0;
	}
	if (w->cur_depth >= l->max_depth) {
		bool last = w->page_left > 0 && --w->page_left == 0;
		int rc = range_key(w, info->key);

		if (rc == RANGE_SKIP || (rc == 0 && !ours(w, info->key)))
			rc = 0;
		else if (rc == 0)
			rc = take(w, info);
		/* a store that ignores start-after is read on, by its own pages */
		if (rc == 0 && last && !w->told)
			rc = PAGE_FULL;
		return rc;
	}
	return ours(w, info->key) ? take(w, info) : 0;
}

/*
 * The page a piece of `expect` keys asks for after `done` of them: up to
 * what it expects and an eighth more (its last page then reads only a little
 * past its end); full pages (0) once it holds more than that.
 */
static int piece_page(uint64_t expect, uint64_t done)
{
	uint64_t limit = expect + expect / 8 + 32;

	if (done >= limit)
		return 0;
	return limit - done >= 1000 ? 1000 : (int)(limit - done);
}

static void list_one(struct worker *w, struct pfx *p)
{
	struct lister *l = w->l;
	int rc;

	jo_err_clear(&w->err);
	w->cur_depth = p->depth;
	w->cur_how = p->how;
	if (p->depth < l->max_depth) {
		/* discover the next level of the layout's own directories */
		rc = jo_obj_list(l->obj, p->prefix, NULL, "/", on_entry, w, &w->err);
	} else {
		w->cur = p;
		w->first = true;
		w->told = false;
		w->in_range = 0;
		memset(w->alphabet, 0, sizeof(w->alphabet));
		/*
		 * A piece cut by the density map asks for what it expects to hold
		 * (its last piece, open at the leaf's end, for full pages); one cut
		 * while listing starts with a short page; then full ones.
		 */
		w->page_left = p->expect ? (p->upto ? piece_page(p->expect, 0) : 0)
			     : p->after ? PIECE_FIRST_PAGE : 0;
		rc = jo_obj_list_page(l->obj, p->prefix, p->after, NULL, w->page_left, on_entry, w,
				      &w->err);
		while (rc == PAGE_FULL) {
			/* on from the last key (a copy: the callback moves w->prev) */
			char *from = strdup(w->prev);

			w->page_left = p->upto && p->expect ? piece_page(p->expect, w->in_range) : 0;
			if (!from)
				rc = jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory");
			else if (w->page_left)
				rc = jo_obj_list_page(l->obj, p->prefix, from, NULL, w->page_left,
						      on_entry, w, &w->err);
			else
				rc = jo_obj_list(l->obj, p->prefix, from, NULL, on_entry, w, &w->err);
			free(from);
		}
		if (rc == RANGE_END)
			rc = 0;
		w->cur = NULL;
	}
	if (!rc && w->nbatch)
		rc = flush_batch(w);
	pthread_mutex_lock(&l->lock);
	if (rc && !l->stop) {
		if (!w->err.code)
			jo_err_set(&w->err, rc, "%s", jo_err_name(rc));
		jo_err_wrap(&w->err, "list '%s'", p->prefix);
		fail_locked(l, rc, &w->err);
	}
	l->listed += w->listed;
	w->listed = 0;
	l->prefixes_done++;
	pthread_mutex_unlock(&l->lock);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct lister *l = w->l;

	pthread_mutex_lock(&l->lock);
	for (;;) {
		while (!l->stop && l->qn == 0 && l->active > 0)
			pthread_cond_wait(&l->cond, &l->lock);
		if (l->stop || (l->qn == 0 && l->active == 0))
			break;
		struct pfx p = l->q[--l->qn];

		l->active++;
		pthread_mutex_unlock(&l->lock);
		list_one(w, &p);
		pfx_free(&p);
		pthread_mutex_lock(&l->lock);
		l->active--;
		if (l->qn == 0 && l->active == 0) {
			l->done = true;
			pthread_cond_broadcast(&l->cond);
		}
	}
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

int leak_list_objects(struct jo_obj *obj, const struct leak_list_opts *o, struct jo_xsort *xs,
		      struct leak_list_stats *st, struct jo_err *err)
{
	struct lister l = { .obj = obj, .o = o, .xs = xs };
	int nthreads = o->threads > 0 ? o->threads : 32;
	pthread_t *tids = NULL;
	struct worker *ws = NULL;
	int started = 0, rc = 0;

	memset(st, 0, sizeof(*st));
	if (nthreads > LIST_MAX_THREADS)
		nthreads = LIST_MAX_THREADS;
	l.nthreads = nthreads;
	int n = snprintf(l.root, sizeof(l.root), "%s/chunks/", o->volname);

	if (n < 0 || (size_t)n >= sizeof(l.root))
		return jo_err_set(err, JO_EINVAL, "leakcheck: volume name too long");
	l.root_len = (size_t)n;
	/* a cluster range looks one level deeper into the hash layout: chunks/HH/A/ */
	l.max_depth = o->hash_prefix && !o->ranges ? 1 : 2;
	/* pieces of a cut leaf: four per lister over the whole volume, and not short */
	l.piece_keys = o->density ? o->density->total / ((uint64_t)nthreads * 4) : 0;
	if (l.piece_keys < PIECE_MIN_KEYS)
		l.piece_keys = PIECE_MIN_KEYS;
	pthread_mutex_init(&l.lock, NULL);
	pthread_cond_init(&l.cond, NULL);
	if (push_locked(&l, l.root, 0)) {
		rc = jo_err_set(err, JO_ENOMEM, "leakcheck: out of memory");
		goto out;
	}
	tids = calloc((size_t)nthreads, sizeof(*tids));
	ws = calloc((size_t)nthreads, sizeof(*ws));
	if (!tids || !ws) {
		rc = jo_err_set(err, JO_ENOMEM, "leakcheck: out of memory");
		goto out;
	}
	for (int i = 0; i < nthreads; i++) {
		ws[i].l = &l;
		if (jo_thread_start(&tids[i], worker_main, &ws[i]) != 0)
			break;
		started++;
	}
	pthread_mutex_lock(&l.lock);
	l.nthreads = started;
	pthread_mutex_unlock(&l.lock);
	if (!started) {
		rc = jo_err_set(err, JO_ENOMEM, "leakcheck: cannot start lister threads");
		goto out;
	}
	pthread_mutex_lock(&l.lock);
	while (!l.done && !l.stop) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&l.cond, &l.lock, &ts);
		if (jo_cancelled() && !l.stop) {
			struct jo_err ce;

			jo_err_set(&ce, JO_ECANCELED, "leakcheck: canceled");
			fail_locked(&l, JO_ECANCELED, &ce);
		}
		if (o->progress && !l.done && !l.stop) {
			uint64_t a = l.listed, b = l.prefixes_done, c = l.prefixes;

			pthread_mutex_unlock(&l.lock);
			o->progress(a, b, c, o->payload);
			pthread_mutex_lock(&l.lock);
		}
	}
	pthread_mutex_unlock(&l.lock);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (l.rc) {
		rc = l.rc;
		if (err)
			*err = l.err;
	}
out:
	for (size_t i = 0; i < l.qn; i++)
		pfx_free(&l.q[i]);
	free(l.q);
	free(tids);
	for (int i = 0; ws && i < nthreads; i++)
		free(ws[i].prev);
	free(ws);
	st->listed = l.listed;
	st->blocks = l.blocks;
	st->foreign = l.foreign;
	st->prefixes = l.prefixes;
	st->ranges = l.ranges;
	pthread_mutex_destroy(&l.lock);
	pthread_cond_destroy(&l.cond);
	return rc;
}
