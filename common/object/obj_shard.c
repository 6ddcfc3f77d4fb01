/*
 * obj_shard.c: JuiceFS --shards. N child stores opened from
 * sprintf(bucket, i); a key lives in shard FNV-1a-32(full key) % N.
 * Listing merges the children's sorted streams (k-way merge); each child
 * is listed by its own thread which hands over one page at a time, so
 * memory stays bounded by one page per shard.
 */
#include "common/object/object_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cancel.h"
#include "common/err.h"

#define SHARD_PAGE 1000

struct shard_impl {
	int n;
	struct jo_obj **child;
};

static struct shard_impl *HI(struct jo_obj *o)
{
	return o->impl;
}

static struct jo_obj *pick(struct jo_obj *o, const char *key)
{
	struct shard_impl *h = HI(o);

	return h->child[jo_obj_fnv1a32(key) % (uint32_t)h->n];
}

static int sh_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		  jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	return jo_obj_get(pick(o, key), key, go, cb, payload, err);
}

static int sh_put(struct jo_obj *o, const char *key, const void *data, size_t len,
		  const struct jo_obj_put_opts *po, struct jo_err *err)
{
	return jo_obj_put(pick(o, key), key, data, len, po, err);
}

static int sh_head(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		   char ***meta_out, struct jo_err *err)
{
	if (meta_out)
		return jo_obj_head_meta(pick(o, key), key, info, meta_out, err);
	return jo_obj_head(pick(o, key), key, info, err);
}

static int sh_del(struct jo_obj *o, const char *key, struct jo_err *err)
{
	return jo_obj_delete(pick(o, key), key, err);
}

static int sh_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			   struct jo_err *err)
{
	struct shard_impl *h = HI(o);
	struct jo_obj_sub sub;
	int rc = jo_obj_sub_init(&sub, n, err);

	for (int s = 0; s < h->n && rc == 0; s++) {
		for (size_t i = 0; i < n; i++) {
			if (jo_obj_fnv1a32(keys[i]) % (uint32_t)h->n == (uint32_t)s)
				jo_obj_sub_add(&sub, keys[i], i);
		}
		if (!sub.n)
			continue;
		rc = jo_obj_delete_batch(h->child[s], sub.keys, sub.n, sub.res, err);
		jo_obj_sub_done(&sub, rc, results);
	}
	jo_obj_sub_release(&sub);
	return rc;
}

/* ---- k-way merge of listings ---- */

struct lentry {
	char *key;
	struct jo_obj_info info;
};

struct lstream {
	struct jo_obj *child;
	const char *prefix, *start_after, *delim;
	int page_keys;
	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* page being filled by the producer, page handed to the consumer */
	struct lentry *fill;
	size_t nfill;
	struct lentry *page;
	size_t npage, pos;
	bool page_ready;
	bool done;           /* producer finished (rc tells how) */
	bool stop;           /* consumer wants the producer to stop */
	int rc;
	struct jo_err err;
};

static void free_entries(struct lentry *e, size_t n)
{
	for (size_t i = 0; e && i < n; i++)
		free(e[i].key);
	free(e);
}

/* Producer: hand the filled page over, waiting until the consumer took the last one. */
static int hand_over(struct lstream *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->page_ready && !s->stop)
		pthread_cond_wait(&s->cv, &s->mu);
	if (s->stop) {
		pthread_mutex_unlock(&s->mu);
		return JO_ECANCELED;
	}
	s->page = s->fill;
	s->npage = s->nfill;
	s->pos = 0;
	s->page_ready = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	s->fill = NULL;
	s->nfill = 0;
	return 0;
}

static int producer_cb(const struct jo_obj_info *info, void *payload)
{
	struct lstream *s = payload;
	struct lentry *e;

	if (!s->fill) {
		s->fill = calloc(SHARD_PAGE, sizeof(*s->fill));
		if (!s->fill)
			return JO_ENOMEM;
	}
	e = &s->fill[s->nfill];
	e->key = strdup(info->key);
	if (!e->key)
		return JO_ENOMEM;
	e->info = *info;
	e->info.key = e->key;
	e->info.content_type = NULL;
	s->nfill++;
	if (s->nfill == SHARD_PAGE)
		return hand_over(s);
	return 0;
}

static void *producer(void *arg)
{
	struct lstream *s = arg;
	int rc = jo_obj_list_page(s->child, s->prefix, s->start_after, s->delim, s->page_keys,
				  producer_cb, s, &s->err);

	if (rc == 0 && s->nfill)
		rc = hand_over(s);
	free_entries(s->fill, s->nfill);
	s->fill = NULL;
	pthread_mutex_lock(&s->mu);
	s->rc = rc;
	s->done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Consumer: the current head entry of a stream, NULL at its end. */
static struct lentry *stream_head(struct lstream *s, int *rc)
{
	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (s->page_ready && s->pos < s->npage)
			break;
		if (s->page_ready && s->pos >= s->npage) {
			free_entries(s->page, s->npage);
			s->page = NULL;
			s->npage = 0;
			s->page_ready = false;
			pthread_cond_broadcast(&s->cv);
			continue;
		}
		if (s->done) {
			*rc = s->rc;
			pthread_mutex_unlock(&s->mu);
			return NULL;
		}
		pthread_cond_wait(&s->cv, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return &s->page[s->pos];
}

static int sh_list(struct jo_obj *o, const char *prefix, const char *start_after,
		   const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		   struct jo_err *err)
{
	struct shard_impl *h = HI(o);
	struct lstream *st = calloc((size_t)h->n, sizeof(*st));
	char *last_prefix = NULL;
	int rc = 0;

	if (!st)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (int i = 0; i < h->n; i++) {
		st[i].child = h->child[i];
		st[i].prefix = prefix;
		st[i].start_after = start_after;
		st[i].delim = delimiter;
		st[i].page_keys = page;
		pthread_mutex_init(&st[i].mu, NULL);
		pthread_cond_init(&st[i].cv, NULL);
		if (pthread_create(&st[i].th, NULL, producer, &st[i]) != 0) {
			rc = jo_err_set(err, JO_ENOMEM, "shard list: cannot start a thread");
			break;
		}
		st[i].started = true;
	}
	while (rc == 0) {
		struct lentry *best = NULL;
		int bi = -1;

		for (int i = 0; i < h->n; i++) {
			int src = 0;
			struct lentry *e = stream_head(&st[i], &src);

			if (!e && src) {
				rc = src;
				if (err)
					*err = st[i].err;
				jo_err_wrap(err, "shard %d", i);
				break;
			}
			if (e && (!best || strcmp(e->key, best->key) < 0)) {
				best = e;
				bi = i;
			}
		}
		if (rc || !best)
			break;
		/* The same common prefix can come from several shards: report it once. */
		if (!(best->info.is_prefix && last_prefix && strcmp(last_prefix, best->key) == 0)) {
			rc = cb(&best->info, payload);
			if (rc) {
				jo_err_set(err, rc, "list: stopped by the callback");
				break;
			}
			if (best->info.is_prefix) {
				free(last_prefix);
				last_prefix = strdup(best->key);
			}
		}
		pthread_mutex_lock(&st[bi].mu);
		st[bi].pos++;
		pthread_mutex_unlock(&st[bi].mu);
	}
	for (int i = 0; i < h->n; i++) {
		if (!st[i].started)
			continue;
		pthread_mutex_lock(&st[i].mu);
		st[i].stop = true;
		pthread_cond_broadcast(&st[i].cv);
		pthread_mutex_unlock(&st[i].mu);
		pthread_join(st[i].th, NULL);
		free_entries(st[i].page, st[i].npage);
	}
	for (int i = 0; i < h->n; i++) {
		pthread_mutex_destroy(&st[i].mu);
		pthread_cond_destroy(&st[i].cv);
	}
	free(last_prefix);
	free(st);
	return rc;
}

static int sh_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	struct shard_impl *h = HI(o);

	for (int i = 0; i < h->n; i++) {
		int rc = jo_obj_create_bucket(h->child[i], err);

		if (rc)
			return rc;
	}
	return 0;
}

static int sh_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		   const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	if (pick(o, src_key) != pick(o, dst_key) || co->src_bucket)
		return jo_err_set(err, JO_EUNSUPPORTED, "shard: copy across shards");
	return jo_obj_copy(pick(o, dst_key), src_key, dst_key, co, err);
}

static int sh_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			 char **upload_id_out, struct jo_err *err)
{
	return jo_obj_mpu_create(pick(o, key), key, po, upload_id_out, err);
}

static int sh_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			   int part_number, const void *data, size_t len, char *etag_out,
			   struct jo_err *err)
{
	return jo_obj_mpu_put_part(pick(o, key), key, upload_id, part_number, data, len, etag_out,
				   err);
}

static int sh_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			   const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	return jo_obj_mpu_complete(pick(o, key), key, upload_id, parts, n, err);
}

static int sh_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
			struct jo_err *err)
{
	return jo_obj_mpu_abort(pick(o, key), key, upload_id, err);
}

static int sh_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			     jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	return jo_obj_mpu_list_parts(pick(o, key), key, upload_id, cb, payload, err);
}

static void sh_close(struct jo_obj *o)
{
	struct shard_impl *h = HI(o);

	if (!h)
		return;
	for (int i = 0; i < h->n; i++)
		jo_obj_close(h->child[i]);
	free(h->child);
	free(h);
}

/* Every child is armed; each probes its own bucket at its first create-only put. */
static int sh_create_probe(struct jo_obj *o, const char *prefix, struct jo_err *err)
{
	struct shard_impl *h = HI(o);
	int rc = 0;

	for (int i = 0; i < h->n && rc == 0; i++)
		rc = jo_obj_create_probe(h->child[i], prefix, err);
	return rc;
}

static int sh_create_used(struct jo_obj *o)
{
	struct shard_impl *h = HI(o);
	int m = JO_CREATE_NONE;

	for (int i = 0; i < h->n; i++) {
		const struct jo_obj *c = h->child[i];
		int cm = c->ops->create_used ? c->ops->create_used(h->child[i]) : JO_CREATE_NONE;

		if (cm > m)
			m = cm;
	}
	return m;
}

static const char *sh_bucket_desc(const struct jo_obj *o, int i)
{
	const struct shard_impl *h = o->impl;

	return i >= 0 && i < h->n ? jo_obj_describe(h->child[i]) : NULL;
}

static const struct jo_obj_ops shard_ops = {
	.get = sh_get,
	.put = sh_put,
	.head = sh_head,
	.del = sh_del,
	.delete_batch = sh_delete_batch,
	.list = sh_list,
	.create_bucket = sh_create_bucket,
	.copy = sh_copy,
	.mpu_create = sh_mpu_create,
	.mpu_put_part = sh_mpu_put_part,
	.mpu_complete = sh_mpu_complete,
	.mpu_abort = sh_mpu_abort,
	.mpu_list_parts = sh_mpu_list_parts,
	.create_probe = sh_create_probe,
	.create_used = sh_create_used,
	.bucket_desc = sh_bucket_desc,
	.close = sh_close,
};

/* The pattern must hold exactly one %d (JuiceFS uses fmt.Sprintf(bucket, i)). */
static int check_pattern(const char *b)
{
	int n = 0;

	for (const char *p = b; *p; p++) {
		if (*p != '%')
			continue;
		if (p[1] == '%') {
			p++;
			continue;
		}
		if (p[1] != 'd')
			return -1;
		n++;
	}
	return n == 1 ? 0 : -1;
}

int jo_obj_shard_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err)
{
	struct shard_impl *h;
	struct jo_obj_opts copts = *opts;
	char bucket[1024];

	if (opts->shards > 256)
		return jo_err_set(err, JO_EINVAL, "shards: at most 256");
	if (check_pattern(opts->bucket) < 0)
		return jo_err_set(err, JO_EINVAL, "shards: bucket '%s' needs exactly one %%d",
				  opts->bucket);
	h = calloc(1, sizeof(*h));
	if (!h)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	h->child = calloc((size_t)opts->shards, sizeof(*h->child));
	if (!h->child) {
		free(h);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	o->impl = h;
	o->ops = &shard_ops;
	copts.shards = 0;
	copts.bucket = bucket;
	if (opts->max_conns > 0 && opts->max_conns / opts->shards >= 4)
		copts.max_conns = opts->max_conns / opts->shards;
	for (int i = 0; i < opts->shards; i++) {
		int rc;

		/* The pattern was checked to hold a single %d. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
		snprintf(bucket, sizeof(bucket), opts->bucket, i);
#pragma GCC diagnostic pop
		rc = jo_obj_open(&h->child[i], &copts, err);
		if (rc) {
			jo_err_wrap(err, "shard %d", i);
			sh_close(o);
			o->impl = NULL;
			return rc;
		}
		h->child[i]->ctr = o->ctr;
		h->n = i + 1;
	}
	if (snprintf(o->desc, sizeof(o->desc), "%.500s (%d shards)", h->child[0]->desc,
		     opts->shards) < 0)
		o->desc[0] = '\0';
	return 0;
}
