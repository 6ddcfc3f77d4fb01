/* cluster.c: what every cluster job shares (cluster.h). */
#include "common/cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"

int64_t jo_cl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double jo_cl_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void jo_cl_sleep_ms(int64_t ms)
{
	while (ms > 0 && !jo_cancelled()) {
		int64_t step = ms > 200 ? 200 : ms;
		struct timespec ts = { 0, (long)step * 1000000L };

		nanosleep(&ts, NULL);
		ms -= step;
	}
}

void jo_cl_job_ns(char letter, const char *what, bool named, char out[17])
{
	unsigned char d[32];
	unsigned int dl = 32;
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1) {
		EVP_DigestUpdate(c, named ? "name\n" : "job\n", named ? 5 : 4);
		EVP_DigestUpdate(c, what, strlen(what));
		EVP_DigestFinal_ex(c, d, &dl);
	} else {
		memset(d, 0, sizeof(d));
	}
	EVP_MD_CTX_free(c);
	out[0] = letter;
	for (int i = 0; i < 15; i++)
		out[1 + i] = "0123456789abcdef"[(d[i / 2] >> (i % 2 ? 0 : 4)) & 15];
	out[16] = '\0';
}

uint64_t jo_cl_ju(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

json_t *jo_cl_u64_put(json_t *o, const void *s, const struct jo_cl_u64 *t, size_t n)
{
	json_t *r = o ? o : json_object();

	for (size_t i = 0; r && i < n; i++) {
		uint64_t v;

		memcpy(&v, (const char *)s + t[i].off, sizeof(v));
		if (json_object_set_new(r, t[i].key, json_integer((json_int_t)v)) != 0) {
			if (!o)
				json_decref(r);
			return NULL;
		}
	}
	return r;
}

void jo_cl_u64_get(const json_t *o, void *s, const struct jo_cl_u64 *t, size_t n, bool add)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = jo_cl_ju(o, t[i].key), cur = 0;

		if (add)
			memcpy(&cur, (const char *)s + t[i].off, sizeof(cur));
		v += cur;
		memcpy((char *)s + t[i].off, &v, sizeof(v));
	}
}

int64_t jo_cl_ji(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

const char *jo_cl_js(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

bool jo_cl_jb(const json_t *o, const char *k)
{
	return json_is_true(json_object_get(o, k));
}

int jo_cl_rec_put(struct jo_meta *m, const char *ns, const char *key, json_t *j,
		  const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	char *txt = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	int rc;

	if (j && !txt)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_mut_rec_put(m, ns, key, txt, c, written, err);
	free(txt);
	return rc;
}

int jo_cl_rec_get(struct jo_meta *m, const char *ns, const char *key, json_t **out,
		  struct jo_err *err)
{
	char *txt = NULL;
	json_error_t je;
	int rc = jo_mut_rec_get(m, ns, key, &txt, err);

	*out = NULL;
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	*out = json_loads(txt, 0, &je);
	free(txt);
	if (!*out || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return jo_err_set(err, JO_EPROTO, "coordinator record '%s' is not a JSON object", key);
	}
	return 0;
}

int jo_cl_task_index(const char *items, char letter)
{
	char *end;
	long v;

	if (!items || items[0] != letter)
		return -1;
	v = strtol(items + 1, &end, 10);
	return *end || v < 0 || v > 10000000 ? -1 : (int)v;
}

int jo_cl_add_tasks(struct jo_meta *m, const char *ns, const char *kind, char letter,
		    const int *idx, int n, struct jo_err *err)
{
	for (int k = 0; k < n; k++) {
		char item[16];
		const char *it = item;
		int64_t id;
		size_t added;
		int rc;

		snprintf(item, sizeof(item), "%c%06d", letter, idx[k]);
		rc = jo_mut_task_add(m, ns, kind, &it, 1, &id, &added, err);
		if (rc)
			return jo_err_wrap(err, "coordinator: add task %s", item);
	}
	return 0;
}

int jo_cl_open(struct jo_meta **m, const char *url, const char *password,
	       const char *redis_password, const char *ns, const char *registry,
	       struct jo_err *err)
{
	struct jo_meta_open_opts mo = { .password = password, .redis_password = redis_password,
					.coordinator_only = true };
	int rc = jo_meta_open_with(m, url, &mo, err);

	if (!rc)
		rc = jo_mut_task_init(*m, ns, err);
	if (!rc)
		rc = jo_mut_task_init(*m, registry, err);
	return rc ? jo_err_wrap(err, "coordinator") : 0;
}

void jo_cl_fmt_time(int64_t ms, char *buf, size_t n)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	localtime_r(&s, &tm);
	strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

int jo_cl_registry_add(struct jo_meta *m, const char *registry, const char *ns, json_t *rec,
		       struct jo_err *err)
{
	struct jo_mut_rec_cond once = { .if_absent = true };
	char key[32];

	snprintf(key, sizeof(key), "job:%s", ns);
	return rec ? jo_cl_rec_put(m, registry, key, rec, &once, NULL, err)
		   : jo_err_set(err, JO_ENOMEM, "out of memory");
}

struct jobs {
	char (*ns)[17];
	size_t n, cap;
};

static int jobs_cb(const char *key, const char *val, void *p)
{
	struct jobs *jl = p;

	(void)val;
	if (strlen(key) != 4 + 16)
		return 0;
	if (jo_grow_array(&jl->ns, &jl->cap, jl->n + 1, sizeof(*jl->ns)))
		return JO_ENOMEM;
	snprintf(jl->ns[jl->n++], 17, "%s", key + 4);
	return 0;
}

static int cmp_ns(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

int jo_cl_registry_list(struct jo_meta *m, const char *registry, char (**ns)[17], size_t *n,
			struct jo_err *err)
{
	struct jobs jl = { 0 };
	int rc = jo_mut_task_init(m, registry, err);

	if (!rc)
		rc = jo_mut_rec_scan(m, registry, "job:", jobs_cb, &jl, err);
	if (rc) {
		free(jl.ns);
		return rc;
	}
	qsort(jl.ns, jl.n, sizeof(*jl.ns), cmp_ns);
	*ns = jl.ns;
	*n = jl.n;
	return 0;
}

void jo_cl_worker_label(const char *worker, char *buf, size_t n)
{
	char w[260];
	size_t k = 0;

	for (const char *q = worker; *q && k + 3 < sizeof(w); q++) {
		if (*q == '"' || *q == '\\')
			w[k++] = '\\';
		w[k++] = *q;
	}
	w[k] = '\0';
	snprintf(buf, n, "worker=\"%s\"", w);
}

/* ---- several tasks in flight per worker ------------------------------------ */

struct jo_cl_slots {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t gen;            /* bumped by every kick */
	bool stop;               /* a slot failed */
	int (*fn)(struct jo_cl_slot *s, struct jo_err *err);
};

struct slot_run {
	struct jo_cl_slot s;
	struct jo_err err;
	int rc;
	pthread_t th;
	bool started;
};

bool jo_cl_slot_stopping(const struct jo_cl_slot *s)
{
	bool stop;

	pthread_mutex_lock(&s->all->mu);
	stop = s->all->stop;
	pthread_mutex_unlock(&s->all->mu);
	return stop;
}

void jo_cl_slot_kick(struct jo_cl_slot *s)
{
	pthread_mutex_lock(&s->all->mu);
	s->all->gen++;
	pthread_cond_broadcast(&s->all->cv);
	pthread_mutex_unlock(&s->all->mu);
}

void jo_cl_slot_wait(struct jo_cl_slot *s, int64_t ms)
{
	struct jo_cl_slots *a = s->all;
	int64_t end = (int64_t)(jo_cl_mono_s() * 1000) + ms;

	pthread_mutex_lock(&a->mu);
	/* a kick since this slot last waited counts: nothing is missed between */
	for (uint64_t gen = s->seen; gen == a->gen && !a->stop && !jo_cancelled();) {
		int64_t left = end - (int64_t)(jo_cl_mono_s() * 1000);
		struct timespec ts;

		if (left <= 0)
			break;
		if (left > 200)
			left = 200; /* a cancellation is seen within 200 ms */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(left % 1000) * 1000000L;
		ts.tv_sec += left / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	}
	s->seen = a->gen;
	pthread_mutex_unlock(&a->mu);
}

/* One slot's run; a failure stops the others, its end wakes them. */
static void slot_body(struct slot_run *r)
{
	struct jo_cl_slots *a = r->s.all;

	r->rc = a->fn(&r->s, &r->err);
	pthread_mutex_lock(&a->mu);
	if (r->rc)
		a->stop = true;
	a->gen++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

static void *slot_main(void *p)
{
	slot_body(p);
	return NULL;
}

int jo_cl_slots_run(struct jo_meta *m, const struct jo_lease_opts *lo, int n,
		    int (*fn)(struct jo_cl_slot *s, struct jo_err *err), void *arg,
		    struct jo_err *err)
{
	struct jo_cl_slots a = { .fn = fn };
	struct slot_run *r;
	int rc = 0;

	n = n < 1 ? 1 : n;
	r = calloc((size_t)n, sizeof(*r));
	if (!r)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	pthread_mutex_init(&a.mu, NULL);
	pthread_cond_init(&a.cv, NULL);
	for (int i = 0; i < n && !rc; i++) {
		r[i].s = (struct jo_cl_slot){ .index = i, .arg = arg, .all = &a, .m = m };
		if (i)
			rc = jo_meta_dup(m, &r[i].s.m, err);
		if (!rc)
			rc = jo_lease_new(&r[i].s.lease, r[i].s.m, lo, err);
	}
	for (int i = 1; i < n && !rc; i++) {
		int e = jo_thread_start(&r[i].th, slot_main, &r[i]);

		if (e) {
			/* fewer slots: the others still work */
			jo_warn("coordinator: slot %d not started: %s", i, strerror(e));
			continue;
		}
		r[i].started = true;
	}
	if (!rc)
		slot_body(&r[0]);
	for (int i = 0; i < n; i++) {
		if (r[i].started)
			pthread_join(r[i].th, NULL);
		if (!rc && r[i].rc) {
			rc = r[i].rc;
			*err = r[i].err;
		}
		jo_lease_free(r[i].s.lease);
		if (i)
			jo_meta_close(r[i].s.m);
	}
	free(r);
	pthread_mutex_destroy(&a.mu);
	pthread_cond_destroy(&a.cv);
	return rc;
}
