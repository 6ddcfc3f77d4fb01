/*
 * The look-ahead window of `jfsops warmup --follow`: batches, their
 * deduplicated blocks, the read queue and the eviction list. See
 * window.h.
 */
#include "common/warmup/window.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/warmup/warmup.h"

enum bstate { B_IDLE, B_QUEUED, B_INFLIGHT, B_WARM, B_FAILED };

#define RECENT 256

struct jo_wwin_file {
	char *vpath, *mpath;
	uint64_t ino, flen;
	unsigned refs;
	struct jo_wwin_file *next;
};

struct jo_wwin_block {
	uint64_t id;
	uint32_t indx, bsize;
	int kind;
	uint64_t anchor, alt;
	struct jo_wwin_file *file;
	int state;
	bool in_queue;  /* a pointer to it sits in the queue */
	bool reread;    /* evicted while in flight: read again */
	uint64_t *users; /* indices of the window's batches that need it, ascending */
	size_t nusers, capusers;
	struct jo_wwin_block *hnext;
};

struct jo_wwin_batch {
	char *id;
	uint64_t index;
	bool closed, passed, announced;
	struct jo_wwin_block **b;
	size_t n, cap;
	uint64_t bytes, new_blocks, new_bytes, pending, failed;
	int64_t pos_at_open;
	void *user;
};

struct jo_wwin {
	unsigned ahead;
	bool evict_done;
	int64_t pos;
	uint64_t next_index;
	struct jo_wwin_batch **win; /* ascending index; an open batch is last */
	size_t nwin, capwin;
	bool open;
	struct jo_wwin_block **ht;
	size_t htcap, nblocks;
	struct jo_wwin_file **ft;
	size_t ftcap, nfiles;
	struct jo_wwin_block **q; /* ring */
	size_t qcap, qhead, qn;
	struct jo_wwin_evict *ev;
	size_t nev, capev;
	struct { char *id; uint64_t index; } recent[RECENT];
	size_t recent_next;
	struct jo_wwin_stats st;
};

static size_t hash64(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v;
}

static size_t block_slot(const struct jo_wwin *w, uint64_t id, uint32_t indx)
{
	return hash64(id * 0x9E3779B97F4A7C15ULL + indx) & (w->htcap - 1);
}

static size_t str_hash(const char *s)
{
	size_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

int jo_wwin_new(struct jo_wwin **out, unsigned ahead, bool evict_done, struct jo_err *err)
{
	struct jo_wwin *w;

	*out = NULL;
	if (ahead < 1)
		return jo_err_set(err, JO_EINVAL, "the window needs at least one batch");
	w = calloc(1, sizeof(*w));
	if (!w)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	w->ahead = ahead;
	w->evict_done = evict_done;
	w->pos = -1;
	w->htcap = 1024;
	w->ht = calloc(w->htcap, sizeof(*w->ht));
	w->ftcap = 64;
	w->ft = calloc(w->ftcap, sizeof(*w->ft));
	if (!w->ht || !w->ft) {
		jo_wwin_free(w);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	*out = w;
	return 0;
}

static void file_free(struct jo_wwin_file *f)
{
	free(f->vpath);
	free(f->mpath);
	free(f);
}

static void block_free(struct jo_wwin_block *b)
{
	free(b->users);
	free(b);
}

static void file_put(struct jo_wwin *w, struct jo_wwin_file *f)
{
	struct jo_wwin_file **pp;

	if (!f || --f->refs)
		return;
	for (pp = &w->ft[str_hash(f->vpath) & (w->ftcap - 1)]; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	w->nfiles--;
	file_free(f);
}

static void batch_free(struct jo_wwin_batch *b)
{
	if (!b)
		return;
	free(b->id);
	free(b->b);
	free(b);
}

void jo_wwin_free(struct jo_wwin *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->nwin; i++)
		batch_free(w->win[i]);
	free(w->win);
	for (size_t i = 0; w->ht && i < w->htcap; i++) {
		struct jo_wwin_block *b = w->ht[i], *n;

		for (; b; b = n) {
			n = b->hnext;
			block_free(b);
		}
	}
	free(w->ht);
	for (size_t i = 0; w->ft && i < w->ftcap; i++) {
		struct jo_wwin_file *f = w->ft[i], *n;

		for (; f; f = n) {
			n = f->next;
			file_free(f);
		}
	}
	free(w->ft);
	free(w->q);
	free(w->ev);
	for (size_t i = 0; i < RECENT; i++)
		free(w->recent[i].id);
	free(w);
}

/* ------------------------------------------------------------------ files */

struct jo_wwin_file *jo_wwin_file(struct jo_wwin *w, const char *vpath, const char *mpath,
				  uint64_t ino, uint64_t flen)
{
	struct jo_wwin_file *f;
	size_t h;

	if (w->nfiles + 1 > w->ftcap) {
		size_t nc = w->ftcap * 2;
		struct jo_wwin_file **nt = calloc(nc, sizeof(*nt));

		if (!nt)
			return NULL;
		for (size_t i = 0; i < w->ftcap; i++) {
			struct jo_wwin_file *x = w->ft[i], *n;

			for (; x; x = n) {
				size_t k = str_hash(x->vpath) & (nc - 1);

				n = x->next;
				x->next = nt[k];
				nt[k] = x;
			}
		}
		free(w->ft);
		w->ft = nt;
		w->ftcap = nc;
	}
	h = str_hash(vpath) & (w->ftcap - 1);
	for (f = w->ft[h]; f; f = f->next) {
		if (!strcmp(f->vpath, vpath)) {
			f->ino = ino;
			f->flen = flen;
			return f;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->vpath = strdup(vpath);
	f->mpath = mpath ? strdup(mpath) : NULL;
	if (!f->vpath || (mpath && !f->mpath)) {
		file_free(f);
		return NULL;
	}
	f->ino = ino;
	f->flen = flen;
	f->next = w->ft[h];
	w->ft[h] = f;
	w->nfiles++;
	/* held by nobody yet: the first block takes the first reference. A file
	 * nobody takes is freed with the window (it stays in the table). */
	return f;
}

const char *jo_wwin_file_vpath(const struct jo_wwin_file *f) { return f->vpath; }
const char *jo_wwin_file_mpath(const struct jo_wwin_file *f) { return f->mpath; }
uint64_t jo_wwin_file_ino(const struct jo_wwin_file *f) { return f->ino; }
uint64_t jo_wwin_file_len(const struct jo_wwin_file *f) { return f->flen; }

/* ------------------------------------------------------------------ queue */

static int q_grow(struct jo_wwin *w)
{
	size_t nc = w->qcap ? w->qcap * 2 : 256;
	struct jo_wwin_block **nq = malloc(nc * sizeof(*nq));

	if (!nq)
		return JO_ENOMEM;
	for (size_t i = 0; i < w->qn; i++)
		nq[i] = w->q[(w->qhead + i) % w->qcap];
	free(w->q);
	w->q = nq;
	w->qcap = nc;
	w->qhead = 0;
	return 0;
}

static int q_push(struct jo_wwin *w, struct jo_wwin_block *b, bool front)
{
	if (b->in_queue)
		return 0;
	if (w->qn == w->qcap && q_grow(w))
		return JO_ENOMEM;
	if (front) {
		w->qhead = (w->qhead + w->qcap - 1) % w->qcap;
		w->q[w->qhead] = b;
	} else {
		w->q[(w->qhead + w->qn) % w->qcap] = b;
	}
	w->qn++;
	b->in_queue = true;
	return 0;
}

/* ----------------------------------------------------------------- blocks */

static struct jo_wwin_block *block_find(const struct jo_wwin *w, uint64_t id, uint32_t indx)
{
	struct jo_wwin_block *b = w->ht[block_slot(w, id, indx)];

	for (; b; b = b->hnext)
		if (b->id == id && b->indx == indx)
			return b;
	return NULL;
}

static int ht_grow(struct jo_wwin *w)
{
	size_t oc = w->htcap, nc = oc * 2;
	struct jo_wwin_block **nt = calloc(nc, sizeof(*nt)), **old = w->ht;

	if (!nt)
		return JO_ENOMEM;
	w->ht = nt;
	w->htcap = nc;
	for (size_t i = 0; i < oc; i++) {
		struct jo_wwin_block *b = old[i], *n;

		for (; b; b = n) {
			size_t k = block_slot(w, b->id, b->indx);

			n = b->hnext;
			b->hnext = nt[k];
			nt[k] = b;
		}
	}
	free(old);
	return 0;
}

static void block_release(struct jo_wwin *w, struct jo_wwin_block *b)
{
	struct jo_wwin_block **pp = &w->ht[block_slot(w, b->id, b->indx)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	}
	w->nblocks--;
	file_put(w, b->file);
	block_free(b);
}

/* Free a block nobody needs once no queue slot or read refers to it. */
static void block_maybe_free(struct jo_wwin *w, struct jo_wwin_block *b)
{
	if (!b->nusers && !b->in_queue && b->state != B_INFLIGHT)
		block_release(w, b);
}

static int push_evict(struct jo_wwin *w, const struct jo_wwin_block *b)
{
	if (jo_grow_array(&w->ev, &w->capev, w->nev + 1, sizeof(*w->ev)))
		return JO_ENOMEM;
	w->ev[w->nev].id = b->id;
	w->ev[w->nev].indx = b->indx;
	w->ev[w->nev].bsize = b->bsize;
	w->ev[w->nev].file = b->file;
	b->file->refs++;
	w->nev++;
	return 0;
}

static struct jo_wwin_batch *batch_at(const struct jo_wwin *w, uint64_t index)
{
	for (size_t i = 0; i < w->nwin; i++)
		if (w->win[i]->index == index)
			return w->win[i];
	return NULL;
}

/* ------------------------------------------------------------------ stream */

int64_t jo_wwin_position(const struct jo_wwin *w) { return w->pos; }
uint64_t jo_wwin_next_index(const struct jo_wwin *w) { return w->next_index; }
bool jo_wwin_is_open(const struct jo_wwin *w) { return w->open; }

static size_t live_batches(const struct jo_wwin *w)
{
	size_t n = 0;

	for (size_t i = 0; i < w->nwin; i++)
		n += !w->win[i]->passed;
	return n;
}

bool jo_wwin_has_room(const struct jo_wwin *w)
{
	return live_batches(w) < w->ahead;
}

const char *jo_wwin_open_id(const struct jo_wwin *w)
{
	return w->open ? w->win[w->nwin - 1]->id : NULL;
}

int jo_wwin_open(struct jo_wwin *w, const char *id, bool passed, struct jo_err *err)
{
	struct jo_wwin_batch *b;

	if (w->open)
		return jo_err_set(err, JO_EINVAL, "a batch is already open");
	if (!passed && !jo_wwin_has_room(w))
		return jo_err_set(err, JO_EINVAL, "the window is full (%u batches)", w->ahead);
	if (jo_grow_array(&w->win, &w->capwin, w->nwin + 1, sizeof(*w->win)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	b = calloc(1, sizeof(*b));
	if (!b || (id && !(b->id = strdup(id)))) {
		free(b);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	b->index = w->next_index++;
	b->passed = passed;
	b->pos_at_open = w->pos;
	if (!passed && (uint64_t)((int64_t)b->index - w->pos) > w->st.max_ahead)
		w->st.max_ahead = (uint64_t)((int64_t)b->index - w->pos);
	w->win[w->nwin++] = b;
	w->open = true;
	w->st.batches++;
	return 0;
}

static bool better(int kind, uint64_t anchor, const struct jo_wwin_block *old)
{
	return kind < old->kind || (kind == old->kind && anchor < old->anchor);
}

int jo_wwin_add(struct jo_wwin *w, const struct jo_warmup_block *in, struct jo_wwin_file *f,
		struct jo_err *err)
{
	struct jo_wwin_batch *bt;
	struct jo_wwin_block *b;
	bool fresh = false;

	if (!w->open)
		return jo_err_set(err, JO_EINVAL, "no batch is open");
	bt = w->win[w->nwin - 1];
	b = block_find(w, in->id, in->indx);
	if (b && b->nusers && b->users[b->nusers - 1] == bt->index) {
		/* the batch names this block again: keep the better anchor */
		if ((b->state == B_QUEUED || b->state == B_IDLE) &&
		    better(in->anchor_kind, in->anchor, b)) {
			b->kind = in->anchor_kind;
			b->anchor = in->anchor;
			b->alt = in->alt;
			if (b->file != f) {
				f->refs++;
				file_put(w, b->file);
				b->file = f;
			}
		}
		return 0;
	}
	if (!b) {
		if ((w->nblocks + 1) > w->htcap && ht_grow(w))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		b = calloc(1, sizeof(*b));
		if (!b)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		b->id = in->id;
		b->indx = in->indx;
		b->bsize = in->bsize;
		b->kind = in->anchor_kind;
		b->anchor = in->anchor;
		b->alt = in->alt;
		b->file = f;
		f->refs++;
		b->state = B_IDLE;
		{
			size_t k = block_slot(w, b->id, b->indx);

			b->hnext = w->ht[k];
			w->ht[k] = b;
		}
		w->nblocks++;
		fresh = true;
	}
	if (b->nusers == b->capusers) {
		size_t nc = b->capusers ? b->capusers * 2 : 2;
		uint64_t *nv = realloc(b->users, nc * sizeof(*nv));

		if (!nv) {
			if (fresh)
				block_release(w, b);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		b->users = nv;
		b->capusers = nc;
	}
	if (jo_grow_array(&bt->b, &bt->cap, bt->n + 1, sizeof(*bt->b))) {
		if (fresh)
			block_release(w, b);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!b->nusers) {
		/* needed again (a new block, or one a passed batch left behind) */
		w->st.blocks++;
		w->st.bytes += b->bsize;
		if (w->st.bytes > w->st.max_bytes)
			w->st.max_bytes = w->st.bytes;
	}
	b->users[b->nusers++] = bt->index;
	bt->b[bt->n++] = b;
	bt->bytes += b->bsize;
	if (fresh) {
		bt->new_blocks++;
		bt->new_bytes += b->bsize;
	}
	if (b->state == B_FAILED) {
		bt->failed++;
	} else if (b->state != B_WARM) {
		bt->pending++;
		if (b->state == B_IDLE && !bt->passed) {
			b->state = B_QUEUED;
			if (q_push(w, b, false))
				return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
	}
	return 0;
}

int jo_wwin_close(struct jo_wwin *w, const char *id, struct jo_err *err)
{
	struct jo_wwin_batch *bt;

	if (!w->open)
		return jo_err_set(err, JO_EINVAL, "no batch is open");
	bt = w->win[w->nwin - 1];
	if (id && (!bt->id || strcmp(bt->id, id))) {
		char *s = strdup(id);

		if (!s)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		free(bt->id);
		bt->id = s;
	}
	if (!bt->id)
		return jo_err_set(err, JO_EINVAL, "a batch needs an id");
	bt->closed = true;
	w->open = false;
	return 0;
}

static void remember_passed(struct jo_wwin *w, struct jo_wwin_batch *bt)
{
	size_t k = w->recent_next++ % RECENT;

	free(w->recent[k].id);
	w->recent[k].id = bt->id;
	w->recent[k].index = bt->index;
	bt->id = NULL;
}

size_t jo_wwin_done(struct jo_wwin *w, uint64_t index)
{
	size_t left = 0, keep = 0;

	if ((int64_t)index <= w->pos)
		return 0;
	for (size_t i = 0; i < w->nwin; i++) {
		struct jo_wwin_batch *bt = w->win[i];

		if (bt->index > index || !bt->closed) {
			w->win[keep++] = bt;
			continue;
		}
		for (size_t k = 0; k < bt->n; k++) {
			struct jo_wwin_block *b = bt->b[k];
			size_t u, o = 0;

			for (u = 0; u < b->nusers; u++)
				if (b->users[u] != bt->index)
					b->users[o++] = b->users[u];
			b->nusers = o;
			if (b->nusers)
				continue;
			w->st.blocks--;
			w->st.bytes -= b->bsize;
			if (b->state == B_QUEUED) {
				w->st.cancelled++;
				b->state = B_IDLE;
			}
			if (w->evict_done)
				(void)push_evict(w, b); /* ENOMEM: the block stays cached, no harm */
			block_maybe_free(w, b);
		}
		remember_passed(w, bt);
		batch_free(bt);
		left++;
	}
	w->nwin = keep;
	w->pos = (int64_t)index;
	return left;
}

struct jo_wwin_batch *jo_wwin_find(struct jo_wwin *w, const char *id)
{
	for (size_t i = 0; i < w->nwin; i++)
		if (w->win[i]->id && !strcmp(w->win[i]->id, id))
			return w->win[i];
	return NULL;
}

bool jo_wwin_passed(const struct jo_wwin *w, const char *id, uint64_t *index)
{
	for (size_t i = 0; i < RECENT; i++) {
		if (w->recent[i].id && !strcmp(w->recent[i].id, id)) {
			if (index)
				*index = w->recent[i].index;
			return true;
		}
	}
	return false;
}

void jo_wwin_batch_info(const struct jo_wwin_batch *b, struct jo_wwin_batch_info *out)
{
	memset(out, 0, sizeof(*out));
	out->id = b->id;
	out->index = b->index;
	out->closed = b->closed;
	out->passed = b->passed;
	out->ready = b->closed && !b->passed && !b->pending;
	out->blocks = b->n;
	out->bytes = b->bytes;
	out->new_blocks = b->new_blocks;
	out->new_bytes = b->new_bytes;
	out->pending = b->pending;
	out->failed = b->failed;
	out->position_at_open = b->pos_at_open;
}

void **jo_wwin_batch_user(struct jo_wwin_batch *b) { return &b->user; }

void jo_wwin_take_ready(struct jo_wwin *w, jo_wwin_batch_cb cb, void *payload)
{
	for (size_t i = 0; i < w->nwin; i++) {
		struct jo_wwin_batch *b = w->win[i];

		if (b->closed && !b->passed && !b->pending && !b->announced) {
			b->announced = true;
			cb(b, payload);
		}
	}
}

void jo_wwin_each_batch(struct jo_wwin *w, jo_wwin_batch_cb cb, void *payload)
{
	for (size_t i = 0; i < w->nwin; i++)
		cb(w->win[i], payload);
}

/* ------------------------------------------------------------------ reader */

struct jo_wwin_block *jo_wwin_next(struct jo_wwin *w)
{
	while (w->qn) {
		struct jo_wwin_block *b = w->q[w->qhead];

		w->qhead = (w->qhead + 1) % w->qcap;
		w->qn--;
		b->in_queue = false;
		if (b->state == B_QUEUED && b->nusers) {
			b->state = B_INFLIGHT;
			w->st.inflight++;
			return b;
		}
		if (b->state == B_QUEUED)
			b->state = B_IDLE;
		block_maybe_free(w, b);
	}
	return NULL;
}

void jo_wwin_block_get(const struct jo_wwin_block *b, struct jo_warmup_block *out,
		       struct jo_wwin_file **file)
{
	memset(out, 0, sizeof(*out));
	out->id = b->id;
	out->indx = b->indx;
	out->bsize = b->bsize;
	out->anchor_kind = b->kind;
	out->anchor = b->anchor;
	out->alt = b->alt;
	if (file)
		*file = b->file;
}

void jo_wwin_complete(struct jo_wwin *w, struct jo_wwin_block *b, bool ok)
{
	if (b->state != B_INFLIGHT)
		return;
	w->st.inflight--;
	if (!b->nusers) {
		/* nobody needs it any more: our read may have cached it again */
		b->state = ok ? B_WARM : B_FAILED;
		if (ok && w->evict_done)
			(void)push_evict(w, b);
		block_maybe_free(w, b);
		return;
	}
	if (b->reread) {
		/* the mount evicted its file while we read: read it again */
		b->reread = false;
		b->state = B_QUEUED;
		(void)q_push(w, b, true);
		return;
	}
	b->state = ok ? B_WARM : B_FAILED;
	for (size_t u = 0; u < b->nusers; u++) {
		struct jo_wwin_batch *bt = batch_at(w, b->users[u]);

		if (!bt)
			continue;
		if (bt->pending)
			bt->pending--;
		if (!ok)
			bt->failed++;
	}
}

/* --------------------------------------------------------------- eviction */

int jo_wwin_take_evicts(struct jo_wwin *w, struct jo_wwin_evict **out, size_t *n,
			struct jo_err *err)
{
	(void)err;
	*out = w->ev;
	*n = w->nev;
	w->ev = NULL;
	w->nev = w->capev = 0;
	return 0;
}

void jo_wwin_evicts_free(struct jo_wwin *w, struct jo_wwin_evict *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		file_put(w, v[i].file);
	free(v);
}

bool jo_wwin_needed(const struct jo_wwin *w, uint64_t id, uint32_t indx)
{
	const struct jo_wwin_block *b = block_find(w, id, indx);

	return b && b->nusers;
}

size_t jo_wwin_requeue_file(struct jo_wwin *w, const struct jo_wwin_file *f,
			    jo_wwin_batch_cb cb, void *payload)
{
	size_t n = 0;

	for (size_t i = 0; i < w->htcap; i++) {
		for (struct jo_wwin_block *b = w->ht[i]; b; b = b->hnext) {
			if (b->file != f || !b->nusers)
				continue;
			if (b->state == B_INFLIGHT) {
				b->reread = true;
			} else if (b->state == B_WARM) {
				b->state = B_QUEUED;
				if (q_push(w, b, true)) {
					b->state = B_WARM; /* ENOMEM: leave it as it was */
					continue;
				}
				for (size_t u = 0; u < b->nusers; u++) {
					struct jo_wwin_batch *bt = batch_at(w, b->users[u]);

					if (!bt)
						continue;
					bt->pending++;
					if (bt->announced) {
						bt->announced = false;
						if (cb)
							cb(bt, payload);
					}
				}
				n++;
			}
		}
	}
	w->st.requeued += n;
	return n;
}

void jo_wwin_stats(const struct jo_wwin *w, struct jo_wwin_stats *out)
{
	*out = w->st;
	out->in_window = live_batches(w);
	out->queued = 0;
	for (size_t i = 0; i < w->qn; i++) {
		const struct jo_wwin_block *b = w->q[(w->qhead + i) % w->qcap];

		out->queued += b->state == B_QUEUED && b->nusers;
	}
}
