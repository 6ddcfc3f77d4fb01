/* fake_obj.c: the in-memory object store of the sync unit tests (see fake_obj.h). */
#include "support/fake_obj.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/object/object.h"
#include "sync/sync.h"
#include "common/object/object_internal.h"
#include "sync/sync.h"

static void md5hex(const void *d, size_t n, char *out)
{
	unsigned char m[16];
	unsigned int l = 16;

	EVP_Digest(d, n, m, &l, EVP_md5(), NULL);
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", m[i]);
}

struct fake_store *fake_store(struct jo_obj *o)
{
	return o->impl;
}

static size_t lower(struct fake_store *m, const char *key)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(m->o[mid].key, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

ssize_t fake_find(struct fake_store *m, const char *key)
{
	size_t i = lower(m, key);

	return i < m->n && !strcmp(m->o[i].key, key) ? (ssize_t)i : -1;
}

/* As the real client: one allocation holds the pointer array and the strings
 * (jo_obj_meta_free frees just that). */
static char **meta_dup(const char *const *kv)
{
	size_t n = 0, bytes = 0;

	while (kv && kv[n])
		bytes += strlen(kv[n++]) + 1;
	char **m = calloc(1, (n + 2) * sizeof(char *) + bytes);
	char *p = (char *)(m + n + 2);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(kv[i]) + 1;

		memcpy(p, kv[i], l);
		m[i] = p;
		p += l;
	}
	return m;
}

struct fake_obj *fake_set(struct fake_store *m, const char *key, const void *data, size_t len,
			  int64_t mtime)
{
	ssize_t f = fake_find(m, key);
	size_t i;

	if (f < 0) {
		if (m->n == m->cap) {
			m->cap = m->cap ? m->cap * 2 : 256;
			m->o = realloc(m->o, m->cap * sizeof(*m->o));
		}
		i = lower(m, key);
		memmove(m->o + i + 1, m->o + i, (m->n - i) * sizeof(*m->o));
		memset(&m->o[i], 0, sizeof(m->o[i]));
		m->o[i].key = strdup(key);
		m->n++;
	} else {
		i = (size_t)f;
	}
	free(m->o[i].data);
	m->o[i].data = malloc(len ? len : 1);
	memcpy(m->o[i].data, data, len);
	m->o[i].len = len;
	m->o[i].mtime = mtime;
	md5hex(data, len, m->o[i].etag);
	free(m->o[i].meta);
	m->o[i].meta = NULL;
	return &m->o[i];
}

/*
 * Locks m, counts the call in *calls and finds key: its index, m left
 * locked; or -1 with JO_ENOTFOUND in err, m unlocked.
 */
static ssize_t lock_and_find(struct fake_store *m, int *calls, const char *key, struct jo_err *err)
{
	ssize_t i;

	pthread_mutex_lock(&m->mu);
	(*calls)++;
	i = fake_find(m, key);
	if (i < 0) {
		pthread_mutex_unlock(&m->mu);
		jo_err_set(err, JO_ENOTFOUND, "no %s", key);
	}
	return i;
}

static int f_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		 jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	struct fake_store *m = fake_store(o);

	ssize_t i = lock_and_find(m, &m->gets, key, err);
	if (i < 0)
		return JO_ENOTFOUND;
	if (m->fail_keys && strstr(key, "FAIL")) {
		pthread_mutex_unlock(&m->mu);
		return jo_err_set(err, JO_EIO, "injected failure for %s", key);
	}
	if (go->if_match && strcmp(go->if_match, m->o[i].etag)) {
		pthread_mutex_unlock(&m->mu);
		return jo_err_set(err, JO_ECONFLICT, "precondition failed %s", key);
	}
	size_t off = go->offset, len = m->o[i].len;
	size_t n = off >= len ? 0 : len - off;
	if (go->length >= 0 && (size_t)go->length < n)
		n = (size_t)go->length;
	unsigned char *copy = malloc(n ? n : 1);
	memcpy(copy, m->o[i].data + (off < len ? off : len), n);
	if (go->info) {
		go->info->size = len;
		snprintf(go->info->etag, sizeof(go->info->etag), "%s", m->o[i].etag);
	}
	if (go->meta_out && m->keep_meta)
		*go->meta_out = meta_dup((const char *const *)m->o[i].meta);
	pthread_mutex_unlock(&m->mu);
	int rc = n ? cb(copy, n, payload) : 0;
	free(copy);
	return rc;
}

static int f_put(struct jo_obj *o, const char *key, const void *data, size_t len,
		 const struct jo_obj_put_opts *po, struct jo_err *err)
{
	(void)err;
	struct fake_store *m = fake_store(o);

	if (m->put_delay_us)
		usleep((useconds_t)m->put_delay_us);
	pthread_mutex_lock(&m->mu);
	m->puts++;
	struct fake_obj *ob = fake_set(m, key, data, len, (int64_t)time(NULL));
	if (m->keep_meta)
		ob->meta = meta_dup(po ? po->meta : NULL);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static int f_head(struct jo_obj *o, const char *key, struct jo_obj_info *info, char ***meta_out,
		  struct jo_err *err)
{
	struct fake_store *m = fake_store(o);

	ssize_t i = lock_and_find(m, &m->heads, key, err);
	if (i < 0)
		return JO_ENOTFOUND;
	info->size = m->o[i].len;
	info->mtime = m->o[i].mtime;
	snprintf(info->etag, sizeof(info->etag), "%s", m->o[i].etag);
	if (meta_out)
		*meta_out = meta_dup(m->keep_meta ? (const char *const *)m->o[i].meta : NULL);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

int fake_del(struct jo_obj *o, const char *key, struct jo_err *err)
{
	(void)err;
	struct fake_store *m = fake_store(o);

	pthread_mutex_lock(&m->mu);
	m->deletes++;
	ssize_t i = fake_find(m, key);
	if (i >= 0) {
		free(m->o[i].key);
		free(m->o[i].data);
		free(m->o[i].meta);
		memmove(m->o + i, m->o + i + 1, (m->n - (size_t)i - 1) * sizeof(*m->o));
		m->n--;
	}
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static int f_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			  struct jo_err *err)
{
	for (size_t i = 0; i < n; i++)
		results[i] = fake_del(o, keys[i], err);
	return 0;
}

static int cmp_dir(const void *a, const void *b)
{
	return jo_sync_dircmp(*(char *const *)a, *(char *const *)b);
}

static int f_list(struct jo_obj *o, const char *prefix, const char *start_after,
		  const char *delimiter, int page_keys, jo_obj_list_cb cb, void *payload,
		  struct jo_err *err)
{
	(void)delimiter;
	(void)page_keys;
	(void)err;
	struct fake_store *m = fake_store(o);
	size_t plen = strlen(prefix), k = 0;

	pthread_mutex_lock(&m->mu);
	m->lists++;
	size_t first = lower(m, prefix);
	size_t cap = m->n - first;
	struct jo_obj_info *inf = calloc(cap + 1, sizeof(*inf));
	char **keys = calloc(cap + 1, sizeof(char *));
	for (size_t j = first; j < m->n && !strncmp(m->o[j].key, prefix, plen); j++) {
		keys[k] = strdup(m->o[j].key);
		inf[k].size = m->o[j].len;
		inf[k].mtime = m->o[j].mtime;
		snprintf(inf[k].etag, sizeof(inf[k].etag), "%s", m->o[j].etag);
		k++;
	}
	pthread_mutex_unlock(&m->mu);
	if (m->dir_first) {
		/* reorder keys (and their infos) directory by directory */
		struct pair { char *k; struct jo_obj_info i; } *pp = calloc(k + 1, sizeof(*pp));
		for (size_t j = 0; j < k; j++)
			pp[j].k = keys[j], pp[j].i = inf[j];
		qsort(pp, k, sizeof(*pp), cmp_dir);
		for (size_t j = 0; j < k; j++)
			keys[j] = pp[j].k, inf[j] = pp[j].i;
		free(pp);
	}
	int rc = 0;
	size_t sent = 0;
	for (size_t j = 0; j < k; j++) {
		if (!rc && start_after && !m->ignore_start_after &&
		    (m->dir_first ? jo_sync_dircmp(keys[j], start_after) : strcmp(keys[j], start_after)) <= 0) {
			free(keys[j]);
			continue;
		}
		inf[j].key = keys[j];
		if (!rc) {
			rc = cb(&inf[j], payload);
			if (++sent % 1000 == 0) { /* a page of keys: one more request */
				pthread_mutex_lock(&m->mu);
				m->lists++;
				pthread_mutex_unlock(&m->mu);
			}
		}
		free(keys[j]);
	}
	free(keys);
	free(inf);
	return rc;
}

static int f_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	(void)o;
	(void)err;
	return 0;
}

static int f_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		  const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	(void)o; (void)src_key; (void)dst_key; (void)co;
	return jo_err_set(err, JO_EUNSUPPORTED, "no copy in the fake");
}

static int f_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			char **upload_id_out, struct jo_err *err)
{
	(void)key;
	(void)po;
	(void)err;
	struct fake_store *m = fake_store(o);
	char buf[32];

	pthread_mutex_lock(&m->mu);
	snprintf(buf, sizeof(buf), "up%d", ++m->uploads);
	pthread_mutex_unlock(&m->mu);
	*upload_id_out = strdup(buf);
	return 0;
}

static int f_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id, int number,
			  const void *data, size_t len, char *etag_out, struct jo_err *err)
{
	(void)err;
	struct fake_store *m = fake_store(o);

	pthread_mutex_lock(&m->mu);
	m->puts++;
	m->parts = realloc(m->parts, (m->nparts + 1) * sizeof(*m->parts));
	struct fake_part *p = &m->parts[m->nparts++];
	snprintf(p->upload, sizeof(p->upload), "%s", upload_id);
	snprintf(p->key, sizeof(p->key), "%s", key);
	p->number = number;
	p->data = malloc(len ? len : 1);
	memcpy(p->data, data, len);
	p->len = len;
	md5hex(data, len, etag_out);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

static int f_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			  const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	struct fake_store *m = fake_store(o);
	size_t total = 0;
	unsigned char *buf = NULL;

	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < n; i++) {
		struct fake_part *found = NULL;
		for (size_t j = 0; j < m->nparts; j++)
			if (!strcmp(m->parts[j].upload, upload_id) && m->parts[j].number == parts[i].number)
				found = &m->parts[j];
		if (!found || (int)i + 1 != parts[i].number) {
			pthread_mutex_unlock(&m->mu);
			free(buf);
			return jo_err_set(err, JO_EPROTO, "InvalidPart");
		}
		buf = realloc(buf, total + found->len + 1);
		memcpy(buf + total, found->data, found->len);
		total += found->len;
	}
	fake_set(m, key, buf, total, (int64_t)time(NULL));
	pthread_mutex_unlock(&m->mu);
	free(buf);
	return 0;
}

static int f_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id, struct jo_err *err)
{
	(void)o;
	(void)key;
	(void)upload_id;
	(void)err;
	return 0;
}

static int f_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			    jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	(void)key;
	(void)err;
	struct fake_store *m = fake_store(o);

	for (size_t j = 0; j < m->nparts; j++) {
		if (strcmp(m->parts[j].upload, upload_id))
			continue;
		struct jo_obj_part p = { .number = m->parts[j].number, .size = m->parts[j].len };
		md5hex(m->parts[j].data, m->parts[j].len, p.etag);
		cb(&p, payload);
	}
	return 0;
}

static void f_close(struct jo_obj *o)
{
	struct fake_store *m = fake_store(o);

	for (size_t i = 0; i < m->n; i++) {
		free(m->o[i].key);
		free(m->o[i].data);
		free(m->o[i].meta);
	}
	for (size_t i = 0; i < m->nparts; i++)
		free(m->parts[i].data);
	free(m->parts);
	free(m->o);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

static const struct jo_obj_ops fake_ops = {
	.get = f_get, .put = f_put, .head = f_head, .del = fake_del, .delete_batch = f_delete_batch,
	.list = f_list, .create_bucket = f_create_bucket, .copy = f_copy,
	.mpu_create = f_mpu_create, .mpu_put_part = f_mpu_put_part,
	.mpu_complete = f_mpu_complete, .mpu_abort = f_mpu_abort,
	.mpu_list_parts = f_mpu_list_parts, .close = f_close,
};

struct jo_obj *fake_obj_new(void)
{
	struct jo_obj *o = calloc(1, sizeof(*o));
	struct fake_store *m = calloc(1, sizeof(*m));

	pthread_mutex_init(&m->mu, NULL);
	o->ops = &fake_ops;
	o->impl = m;
	o->ctr = &o->own_ctr;
	snprintf(o->desc, sizeof(o->desc), "fake");
	return o;
}

void fake_side(struct jo_objurl *s, const char *scheme, const char *ep, const char *prefix)
{
	memset(s, 0, sizeof(*s));
	s->endpoint = strdup(ep);
	s->bucket = strdup("b");
	s->prefix = strdup(prefix);
	snprintf(s->desc, sizeof(s->desc), "%s%s/b/%s", scheme, ep, prefix);
}
