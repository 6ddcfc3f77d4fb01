/*
 * compact_read.c: the bytes a compaction copies, fetched ahead and at once.
 *
 * A compaction knows every byte it will copy before it writes one: the
 * visible segments of the chunk. They are planned up front as reads of
 * blocks of the old slices: the ranges one block gives are merged when the
 * gap between them is small (a round trip costs more than a few hundred KiB
 * on any network), grown to the whole block when they nearly cover it, and
 * a compressed block is read whole (it can only be decoded whole). Each
 * read is one GET. FETCHERS threads run them in the order the new slice
 * needs them, within a memory budget, while the new slice's blocks are
 * filled and uploaded; a read's buffer goes as soon as the last byte it
 * gives has been copied. So the bytes read are about the bytes visible
 * (juicefs reads no more), and the latency of the GETs overlaps.
 */
#include "gc/compact.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"

#define FETCHERS 8
#define MERGE_GAP (256u << 10)     /* read across gaps up to this size */
#define MEM_BUDGET (32u << 20)     /* bytes fetched and not yet copied, per compaction */

enum { F_QUEUED, F_RUNNING, F_READY, F_FAILED, F_FREED };

struct fetch {
	uint64_t id;
	uint32_t size, indx, lo, hi;   /* block indx of slice (id, size), bytes [lo, hi) */
	uint64_t first, last;          /* new-slice bytes [first, last) use it */
	uint8_t *buf;
	int state, rc;
	struct jo_err err;
};

/* New-slice bytes [at, at + len) come from fetch f at f.buf + boff (f < 0: zeros). */
struct piece {
	uint64_t at;
	uint32_t len, boff;
	long f;
};

struct compact_src {
	struct jo_vol *v;
	struct fetch *f;
	size_t nf;
	size_t *order;                 /* fetches by first use */
	struct piece *p;
	size_t np, pi;                 /* pi: first piece not copied whole yet */
	size_t next, freed;            /* next in order to start; order[0..freed) released */
	size_t mem;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th[FETCHERS];
	int nth;
	bool stop;
	long wanted;                   /* the fetch the filler waits for and that has not started, or -1 */
	uint64_t bytes_fetched, gets;
};

struct need {
	uint64_t id;
	uint32_t size, indx, lo, hi;
	uint64_t at;
	size_t f;
};

static int cmp_need(const void *a, const void *b)
{
	const struct need *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	if (x->indx != y->indx)
		return x->indx < y->indx ? -1 : 1;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

static int cmp_piece(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return (x->at > y->at) - (x->at < y->at);
}

struct ord {
	uint64_t first;
	size_t i;
};

static int cmp_ord(const void *a, const void *b)
{
	const struct ord *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

static void *fetcher_main(void *arg)
{
	struct compact_src *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct fetch *x;
		size_t want;
		uint8_t *buf;
		struct jo_err e = { 0 };
		int rc;

		/*
		 * Within the budget, or the very fetch the filler waits for: the
		 * reads held are released only once the bytes after them are
		 * copied, so waiting for room there would wait forever (a new
		 * block made of many old blocks read whole, say).
		 */
		while (!s->stop && s->next < s->nf && s->mem > 0 &&
		       s->mem + (s->f[s->order[s->next]].hi - s->f[s->order[s->next]].lo) > MEM_BUDGET &&
		       (long)s->order[s->next] != s->wanted)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop || s->next >= s->nf)
			break;
		x = &s->f[s->order[s->next++]];
		want = x->hi - x->lo;
		s->mem += want;
		x->state = F_RUNNING;
		pthread_mutex_unlock(&s->mu);
		buf = malloc(want);
		if (!buf)
			rc = jo_err_set(&e, JO_ENOMEM, "out of memory");
		else if (jo_cancelled())
			rc = jo_err_set(&e, JO_ECANCELED, "interrupted");
		else
			rc = jo_vol_read_block(s->v, x->id, x->size, x->indx, x->lo, x->hi, buf, &e);
		pthread_mutex_lock(&s->mu);
		s->gets++;
		if (rc) {
			free(buf);
			x->rc = rc;
			x->err = e;
			x->state = F_FAILED;
		} else {
			x->buf = buf;
			x->state = F_READY;
			s->bytes_fetched += want;
		}
		pthread_cond_broadcast(&s->cv);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Plan the reads of the visible segments (new-slice order) and start the fetchers. */
int compact_src_new(struct jo_vol *v, const struct jo_slice *segs, size_t nsegs,
		    struct compact_src **out, struct jo_err *err)
{
	struct compact_src *s = calloc(1, sizeof(*s));
	struct need *nd = NULL;
	size_t nn = 0, cap = 0, nzero = 0;
	uint32_t bs = v->block_size;
	uint64_t at = 0;
	int rc = 0;

	*out = NULL;
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s->v = v;
	s->wanted = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	/* 1. what each block of each old slice must give, and where it goes */
	for (size_t i = 0; i < nsegs; i++) {
		const struct jo_slice *g = &segs[i];
		uint64_t from = g->off, to = (uint64_t)g->off + g->len;

		if (g->id == 0) {
			nzero++;
			at += g->len;
			continue;
		}
		if (to > g->size) {
			rc = jo_err_set(err, JO_EPROTO, "slice %llu: record reaches byte %llu past its size %u",
					(unsigned long long)g->id, (unsigned long long)to, g->size);
			goto fail;
		}
		while (from < to) {
			uint32_t indx = (uint32_t)(from / bs);
			uint64_t bstart = (uint64_t)indx * bs;
			uint64_t bend = bstart + jo_block_len(g->size, bs, indx);
			uint64_t e = to < bend ? to : bend;

			if (jo_grow_array(&nd, &cap, nn + 1, sizeof(*nd))) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto fail;
			}
			nd[nn++] = (struct need){ .id = g->id, .size = g->size, .indx = indx,
						  .lo = (uint32_t)(from - bstart), .hi = (uint32_t)(e - bstart),
						  .at = at };
			at += e - from;
			from = e;
		}
	}
	/* 2. one read per block, or per cluster of ranges far apart in it */
	qsort(nd, nn, sizeof(*nd), cmp_need);
	s->f = calloc(nn ? nn : 1, sizeof(*s->f));
	if (!s->f) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nn; i++) {
		struct need *n = &nd[i];
		struct fetch *x = s->nf ? &s->f[s->nf - 1] : NULL;
		uint32_t blen = jo_block_len(n->size, bs, n->indx);
		bool whole = v->compress != JO_COMPRESS_NONE;

		if (x && x->id == n->id && x->size == n->size && x->indx == n->indx &&
		    (whole || n->lo <= x->hi + MERGE_GAP)) {
			if (n->hi > x->hi)
				x->hi = n->hi;
		} else {
			x = &s->f[s->nf++];
			*x = (struct fetch){ .id = n->id, .size = n->size, .indx = n->indx,
					     .lo = whole ? 0 : n->lo, .hi = whole ? blen : n->hi,
					     .first = UINT64_MAX };
		}
		n->f = s->nf - 1;
	}
	for (size_t i = 0; i < s->nf; i++) {
		struct fetch *x = &s->f[i];
		uint32_t blen = jo_block_len(x->size, bs, x->indx);

		/* nearly all of a block: all of it (one plain GET) */
		if (x->lo <= MERGE_GAP)
			x->lo = 0;
		if (x->hi + MERGE_GAP >= blen)
			x->hi = blen;
	}
	/* 3. the copies, in new-slice order */
	s->p = calloc(nn + nzero ? nn + nzero : 1, sizeof(*s->p));
	s->order = calloc(s->nf ? s->nf : 1, sizeof(*s->order));
	if (!s->p || !s->order) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < nn; i++) {
		struct fetch *x = &s->f[nd[i].f];

		s->p[s->np++] = (struct piece){ .at = nd[i].at, .len = nd[i].hi - nd[i].lo,
						.boff = nd[i].lo - x->lo, .f = (long)nd[i].f };
		if (nd[i].at < x->first)
			x->first = nd[i].at;
		if (nd[i].at + (nd[i].hi - nd[i].lo) > x->last)
			x->last = nd[i].at + (nd[i].hi - nd[i].lo);
	}
	at = 0;
	for (size_t i = 0; i < nsegs; i++) {
		if (segs[i].id == 0)
			s->p[s->np++] = (struct piece){ .at = at, .len = segs[i].len, .f = -1 };
		at += segs[i].len;
	}
	qsort(s->p, s->np, sizeof(*s->p), cmp_piece);
	{
		struct ord *o = calloc(s->nf ? s->nf : 1, sizeof(*o));

		if (!o) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto fail;
		}
		for (size_t i = 0; i < s->nf; i++)
			o[i] = (struct ord){ s->f[i].first, i };
		qsort(o, s->nf, sizeof(*o), cmp_ord);
		for (size_t i = 0; i < s->nf; i++)
			s->order[i] = o[i].i;
		free(o);
	}
	free(nd);
	nd = NULL;
	/* 4. the fetchers */
	for (int i = 0; i < FETCHERS && (size_t)i < s->nf; i++) {
		if (pthread_create(&s->th[i], NULL, fetcher_main, s) != 0) {
			if (s->nth == 0) {
				rc = jo_err_set(err, JO_ENOMEM, "cannot start a fetch thread");
				goto fail;
			}
			break;
		}
		s->nth++;
	}
	*out = s;
	return 0;
fail:
	free(nd);
	compact_src_free(s);
	return rc;
}

/* Free the reads the new slice is done with (new-slice bytes below `upto`). */
static void release_locked(struct compact_src *s, uint64_t upto)
{
	for (size_t i = 0; i < s->next; i++) {
		struct fetch *x = &s->f[s->order[i]];

		if (x->state == F_READY && x->last <= upto) {
			free(x->buf);
			x->buf = NULL;
			x->state = F_FREED;
			s->mem -= x->hi - x->lo;
		}
	}
	pthread_cond_broadcast(&s->cv);
}

int compact_src_fill(uint8_t *dst, uint32_t off, uint32_t len, void *payload, struct jo_err *err)
{
	struct compact_src *s = payload;
	uint64_t end = (uint64_t)off + len, filled = 0;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	for (size_t i = s->pi; i < s->np && rc == 0; i++) {
		const struct piece *p = &s->p[i];
		uint64_t b = p->at > off ? p->at : off;
		uint64_t e = p->at + p->len < end ? p->at + p->len : end;

		if (p->at >= end)
			break;
		if (e <= b) {
			if (p->at + p->len <= off)
				s->pi = i + 1;
			continue;
		}
		if (p->f < 0) {
			memset(dst + (b - off), 0, (size_t)(e - b));
		} else {
			struct fetch *x = &s->f[p->f];

			while (x->state == F_QUEUED || x->state == F_RUNNING) {
				if (x->state == F_QUEUED && s->wanted != p->f) {
					s->wanted = p->f;
					pthread_cond_broadcast(&s->cv);
				}
				pthread_cond_wait(&s->cv, &s->mu);
			}
			s->wanted = -1;
			if (x->state == F_FAILED) {
				*err = x->err;
				rc = x->rc;
				break;
			}
			if (x->state != F_READY) {
				rc = jo_err_set(err, JO_EPROTO, "compaction: a read was used after its end");
				break;
			}
			memcpy(dst + (b - off), x->buf + p->boff + (b - p->at), (size_t)(e - b));
		}
		filled += e - b;
		if (p->at + p->len <= end)
			s->pi = i + 1;
	}
	if (rc == 0) {
		release_locked(s, end);
		if (filled != len)
			rc = jo_err_set(err, JO_EPROTO, "compaction source ended early (%llu of %u bytes)",
					(unsigned long long)filled, len);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void compact_src_counts(struct compact_src *s, uint64_t *bytes, uint64_t *gets)
{
	pthread_mutex_lock(&s->mu);
	*bytes = s->bytes_fetched;
	*gets = s->gets;
	pthread_mutex_unlock(&s->mu);
}

void compact_src_free(struct compact_src *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->nth; i++)
		pthread_join(s->th[i], NULL);
	for (size_t i = 0; i < s->nf; i++)
		free(s->f[i].buf);
	free(s->f);
	free(s->order);
	free(s->p);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
}
