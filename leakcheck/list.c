/* leakcheck: the object side, listed by many threads into a sorter. */
#include "leakcheck/leak.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/object/object.h"

#define LIST_BATCH 1024
#define LIST_MAX_THREADS 1024

struct pfx {
	char *prefix;
	int depth;
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
	int active;
	atomic_bool stop;         /* read by listers' callbacks without the lock */
	int rc;
	struct jo_err err;
	uint64_t listed, blocks, foreign, prefixes, prefixes_done;
	bool done;
};

struct worker {
	struct lister *l;
	uint8_t batch[LIST_BATCH][LEAK_OBJ_REC_LEN];
	size_t nbatch;
	uint64_t listed;
	int cur_depth;
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

static int push_locked(struct lister *l, const char *prefix, int depth)
{
	if (l->qn == l->qcap) {
		size_t nc = l->qcap ? l->qcap * 2 : 64;
		struct pfx *p = realloc(l->q, nc * sizeof(*p));

		if (!p)
			return JO_ENOMEM;
		l->q = p;
		l->qcap = nc;
	}
	l->q[l->qn].prefix = strdup(prefix);
	if (!l->q[l->qn].prefix)
		return JO_ENOMEM;
	l->q[l->qn].depth = depth;
	l->qn++;
	l->prefixes++;
	pthread_cond_signal(&l->cond);
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

static int on_entry(const struct jo_obj_info *info, void *payload)
{
	struct worker *w = payload;
	struct lister *l = w->l;
	const struct leak_list_opts *o = l->o;
	uint64_t id;
	uint32_t indx, bsize;
	char canon[1200];

	if (l->stop)
		return JO_ECANCELED;
	if (jo_cancelled())
		return jo_err_set(&w->err, JO_ECANCELED, "leakcheck: canceled");
	if (info->is_prefix) {
		int rc;

		pthread_mutex_lock(&l->lock);
		rc = push_locked(l, info->key, w->cur_depth + 1);
		pthread_mutex_unlock(&l->lock);
		if (rc)
			return jo_err_set(&w->err, JO_ENOMEM, "leakcheck: out of memory");
		return 0;
	}
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

static void list_one(struct worker *w, struct pfx *p)
{
	struct lister *l = w->l;
	int rc;

	jo_err_clear(&w->err);
	w->cur_depth = p->depth;
	if (p->depth < l->max_depth) {
		/* discover the next level of the layout's own directories */
		rc = jo_obj_list(l->obj, p->prefix, NULL, "/", on_entry, w, &w->err);
	} else {
		rc = jo_obj_list(l->obj, p->prefix, NULL, NULL, on_entry, w, &w->err);
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
		free(p.prefix);
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
	int n = snprintf(l.root, sizeof(l.root), "%s/chunks/", o->volname);

	if (n < 0 || (size_t)n >= sizeof(l.root))
		return jo_err_set(err, JO_EINVAL, "leakcheck: volume name too long");
	l.root_len = (size_t)n;
	l.max_depth = o->hash_prefix ? 1 : 2;
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
		free(l.q[i].prefix);
	free(l.q);
	free(tids);
	free(ws);
	st->listed = l.listed;
	st->blocks = l.blocks;
	st->foreign = l.foreign;
	st->prefixes = l.prefixes;
	pthread_mutex_destroy(&l.lock);
	pthread_cond_destroy(&l.cond);
	return rc;
}
