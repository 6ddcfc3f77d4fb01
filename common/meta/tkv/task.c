/*
 * tkv/task.c: jfsops's task records and leases in the tkv family, under the
 * volume's prefix in keys juicefs never uses (its families are upper-case
 * letters and "setting"):
 *   P "jfsops/" ns "/next"             le64, the last task id given out
 *   P "jfsops/" ns "/t/" be64(id)      the task, JSON {kind, items, owner,
 *                                      expire (ms), attempts, created (ms)}
 *   P "jfsops/" ns "/i/" item          be64(id): the pending task holding it
 *   P "jfsops/" ns "/r/" key           a record beside the tasks (meta_mut.h
 *                                      jo_mut_rec_*): its text value
 * Every change is one transaction that checks what it read, so workers on
 * any host claim, renew, release and complete safely; a task holds at most
 * JO_TKV_STEP items so that recording it fits one transaction. Times are
 * this host's clock, as on the SQL engines.
 */
#include "common/meta/meta_mut.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/tkv/internal.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ns_key(struct jo_key *k, struct jo_meta *m, const char *ns, const char *what)
{
	jo_key_init(k, m);
	jo_key_str(k, "jfsops/");
	jo_key_str(k, ns);
	jo_key_str(k, what);
}

static void task_key(struct jo_key *k, struct jo_meta *m, const char *ns, int64_t id)
{
	ns_key(k, m, ns, "/t/");
	jo_key_be64(k, (uint64_t)id);
}

static void item_key(struct jo_key *k, struct jo_meta *m, const char *ns, const char *item)
{
	ns_key(k, m, ns, "/i/");
	jo_key_str(k, item);
}

/* ---- the task record */

static int decode(const uint8_t *v, size_t vl, int64_t id, struct jo_mut_task *t,
		  struct jo_err *err)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)v, vl, 0, &je);
	const char *kind, *items, *owner;

	memset(t, 0, sizeof(*t));
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "task %lld: not a task record", (long long)id);
	}
	kind = json_string_value(json_object_get(o, "kind"));
	items = json_string_value(json_object_get(o, "items"));
	owner = json_string_value(json_object_get(o, "owner"));
	if (!kind || !items) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "task %lld: record lacks kind or items", (long long)id);
	}
	t->id = id;
	snprintf(t->kind, sizeof(t->kind), "%s", kind);
	snprintf(t->owner, sizeof(t->owner), "%s", owner ? owner : "");
	t->expire_ms = json_integer_value(json_object_get(o, "expire"));
	t->attempts = json_integer_value(json_object_get(o, "attempts"));
	t->items = strdup(items);
	json_decref(o);
	return t->items ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

static int encode_put(struct jo_tx *tx, const struct jo_key *k, const struct jo_mut_task *t,
		      int64_t created, struct jo_err *err)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I}", "kind", t->kind, "items", t->items,
			      "owner", t->owner, "expire", (json_int_t)t->expire_ms, "attempts",
			      (json_int_t)t->attempts, "created", (json_int_t)created);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	int rc;

	json_decref(o);
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_tx_put(tx, k, s, strlen(s), err);
	free(s);
	return rc;
}

/* Read task id in a transaction: > 0 when it does not exist. */
static int get_task(struct jo_tx *tx, const char *ns, int64_t id, struct jo_mut_task *t,
		    int64_t *created, struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v;
	size_t vl;
	int rc;

	task_key(&k, tx->m, ns, id);
	if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v)
		return 1;
	rc = decode(v, vl, id, t, err);
	if (rc == 0 && created) {
		json_t *o = json_loadb((const char *)v, vl, 0, NULL);

		*created = json_integer_value(json_object_get(o, "created"));
		json_decref(o);
	}
	free(v);
	return rc;
}

int jo_tkv_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	(void)m;
	(void)ns;
	(void)err;
	return 0; /* keys need no schema */
}

/* ---- add */

struct add {
	const char *ns, *kind;
	const char *const *items;
	size_t n, added;
	int64_t id;
};

static int add_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct add *a = p;
	struct jo_mut_task t = { 0 };
	struct jo_key k;
	uint8_t idb[8];
	size_t blen = 0, o = 0;
	bool *fresh;
	char *buf;
	int64_t id;
	int rc = 0;

	a->added = 0;
	a->id = 0;
	fresh = calloc(a->n ? a->n : 1, sizeof(*fresh));
	for (size_t i = 0; i < a->n; i++)
		blen += strlen(a->items[i]) + 1;
	buf = malloc(blen + 1);
	if (!fresh || !buf) {
		free(fresh);
		free(buf);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	/* an item is held while its mark exists: complete removes the marks
	 * with the task in one transaction */
	for (size_t i = 0; i < a->n && !rc; i++) {
		uint8_t *v;
		size_t vl;

		item_key(&k, tx->m, a->ns, a->items[i]);
		if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
			break;
		fresh[i] = !v;
		free(v);
		for (size_t j = 0; fresh[i] && j < i; j++)
			if (fresh[j] && !strcmp(a->items[j], a->items[i]))
				fresh[i] = false;  /* listed twice */
		if (fresh[i]) {
			size_t l = strlen(a->items[i]);

			if (o)
				buf[o++] = '\n';
			memcpy(buf + o, a->items[i], l);
			o += l;
			a->added++;
		}
	}
	buf[o] = '\0';
	if (rc || a->added == 0) {
		free(fresh);
		free(buf);
		return rc ? rc : 1;
	}
	ns_key(&k, tx->m, a->ns, "/next");
	if ((rc = jo_tx_incr(tx, &k, 1, &id, err)) != 0)
		goto out;
	a->id = id;
	snprintf(t.kind, sizeof(t.kind), "%s", a->kind);
	t.items = buf;
	task_key(&k, tx->m, a->ns, id);
	if ((rc = encode_put(tx, &k, &t, now_ms(), err)) != 0)
		goto out;
	jo_put_be64(idb, (uint64_t)id);
	for (size_t i = 0; i < a->n && !rc; i++) {
		if (!fresh[i])
			continue;
		item_key(&k, tx->m, a->ns, a->items[i]);
		rc = jo_tx_put(tx, &k, idb, 8, err);
	}
out:
	free(fresh);
	free(buf);
	return rc;
}

int jo_tkv_task_add(struct jo_meta *m, const char *ns, const char *kind,
		    const char *const *items, size_t n, int64_t *task_id, size_t *added,
		    struct jo_err *err)
{
	struct add a = { ns, kind, items, n, 0, 0 };
	int rc;

	*task_id = 0;
	*added = 0;
	if (n == 0)
		return 0;
	rc = jo_tkv_txn(m, add_fn, &a, err);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		*task_id = a.id;
		*added = a.added;
	}
	return 0;
}

/* ---- claim: the claimable task with the earliest expiry, then a checked update */

struct pick {
	struct jo_meta *m;
	size_t plen;
	int64_t now, best_id, best_exp;
	int64_t total, leased;
	jo_mut_task_cb cb;
	void *payload;
	struct jo_err *err;
};

static int pick_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct pick *c = p;
	struct jo_mut_task t;
	int64_t id;
	int rc;

	if (kl != c->plen + 8)
		return 0;
	id = (int64_t)jo_be64(k + kl - 8);
	if ((rc = decode(v, vl, id, &t, c->err)) != 0)
		return rc;
	c->total++;
	if (t.expire_ms > c->now)
		c->leased++;
	if (c->cb) {
		rc = c->cb(&t, c->payload);
	} else if (t.expire_ms <= c->now && (c->best_id == 0 || t.expire_ms < c->best_exp)) {
		c->best_id = id;
		c->best_exp = t.expire_ms;
	}
	jo_mut_task_release_mem(&t);
	return rc;
}

static int scan_tasks(struct jo_meta *m, const char *ns, struct pick *c, struct jo_err *err)
{
	struct jo_key k;

	ns_key(&k, m, ns, "/t/");
	c->m = m;
	c->plen = k.n;
	c->err = err;
	return jo_tkv_scan_prefix(m, &k, false, pick_cb, c, err);
}

struct claim {
	const char *ns, *owner;
	int64_t id, now, lease_ms;
	struct jo_mut_task *out;
};

static int claim_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct claim *c = p;
	int64_t created = 0;
	struct jo_key k;
	int rc;

	jo_mut_task_release_mem(c->out);
	if ((rc = get_task(tx, c->ns, c->id, c->out, &created, err)) != 0)
		return rc;
	if (c->out->expire_ms > c->now)
		return 1; /* taken meanwhile */
	snprintf(c->out->owner, sizeof(c->out->owner), "%s", c->owner);
	c->out->expire_ms = c->now + c->lease_ms;
	c->out->attempts++;
	task_key(&k, tx->m, c->ns, c->id);
	return encode_put(tx, &k, c->out, created, err);
}

int jo_tkv_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		      struct jo_mut_task *out, struct jo_err *err)
{
	memset(out, 0, sizeof(*out));
	for (int attempt = 0; attempt < JO_TKV_TXN_TRIES; attempt++) {
		struct pick pk = { .now = now_ms() };
		struct claim c = { ns, owner, 0, pk.now, lease_ms, out };
		int rc = scan_tasks(m, ns, &pk, err);

		if (rc)
			return rc;
		if (!pk.best_id)
			return jo_err_set(err, JO_ENOTFOUND, "no claimable task");
		c.id = pk.best_id;
		rc = jo_tkv_txn(m, claim_fn, &c, err);
		if (rc == 0)
			return 0;
		jo_mut_task_release_mem(out);
		memset(out, 0, sizeof(*out));
		if (rc < 0)
			return rc;
		/* another worker won it (or completed it): look again */
	}
	return jo_err_set(err, JO_ENOTFOUND, "no claimable task (lost every race)");
}

/* ---- renew, release, complete: only while the task is ours */

struct own {
	const char *ns, *owner, *what;
	int64_t id, expire;
	bool release, complete;
};

static int own_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct own *o = p;
	struct jo_mut_task t;
	int64_t created = 0;
	struct jo_key k;
	int rc = get_task(tx, o->ns, o->id, &t, &created, err);

	if (rc > 0 || (rc == 0 && strcmp(t.owner, o->owner) != 0)) {
		if (rc == 0)
			jo_mut_task_release_mem(&t);
		return jo_err_set(err, JO_ECONFLICT, "%s task %lld: no longer leased by %s", o->what,
				  (long long)o->id, o->owner);
	}
	if (rc)
		return rc;
	task_key(&k, tx->m, o->ns, o->id);
	if (o->complete) {
		/* the task and its item marks go together */
		char *save = NULL;

		rc = jo_tx_del(tx, &k, err);
		for (char *it = strtok_r(t.items, "\n", &save); it && !rc; it = strtok_r(NULL, "\n", &save)) {
			struct jo_key ik;

			item_key(&ik, tx->m, o->ns, it);
			rc = jo_tx_del(tx, &ik, err);
		}
	} else {
		t.expire_ms = o->expire;
		if (o->release)
			t.owner[0] = '\0';
		rc = encode_put(tx, &k, &t, created, err);
	}
	jo_mut_task_release_mem(&t);
	return rc;
}

int jo_tkv_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		      int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	struct own o = { ns, owner, "renew", id, now_ms() + lease_ms, false, false };
	int rc = jo_tkv_txn(m, own_fn, &o, err);

	if (rc == 0 && expire_ms)
		*expire_ms = o.expire;
	return rc;
}

int jo_tkv_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			struct jo_err *err)
{
	struct own o = { ns, owner, "release", id, 0, true, false };

	return jo_tkv_txn(m, own_fn, &o, err);
}

int jo_tkv_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			 struct jo_err *err)
{
	struct own o = { ns, owner, "complete", id, 0, false, true };

	return jo_tkv_txn(m, own_fn, &o, err);
}

int jo_tkv_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
		      struct jo_err *err)
{
	struct pick pk = { .now = now_ms() };
	int rc = scan_tasks(m, ns, &pk, err);

	*total = pk.total;
	*leased = pk.leased;
	return rc;
}

int jo_tkv_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		     struct jo_err *err)
{
	struct pick pk = { .now = now_ms(), .cb = cb, .payload = payload };

	return scan_tasks(m, ns, &pk, err);
}

static int clear_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct jo_key k;

	ns_key(&k, tx->m, p, "/");
	return jo_tx_del_prefix(tx, &k, err);
}

int jo_tkv_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	return jo_tkv_txn(m, clear_fn, (void *)ns, err);
}

/* ---- records beside the tasks (meta_mut.h jo_mut_rec_*) */

static void rec_key(struct jo_key *k, struct jo_meta *m, const char *ns, const char *key)
{
	ns_key(k, m, ns, "/r/");
	jo_key_str(k, key);
}

struct recput {
	const char *ns, *key, *val;
	const struct jo_mut_rec_cond *c;
	bool written;
};

/* 1: the task is not the owner's (nothing written); 2: the record exists */
static int rec_put_fn(struct jo_tx *tx, void *p, struct jo_err *err)
{
	struct recput *r = p;
	struct jo_mut_task t;
	struct jo_key k;
	int rc;

	r->written = false;
	if (r->c->task_id > 0) {
		rc = get_task(tx, r->ns, r->c->task_id, &t, NULL, err);
		if (rc < 0)
			return rc;
		if (rc > 0)
			return 1;
		if (strcmp(t.owner, r->c->owner) != 0) {
			jo_mut_task_release_mem(&t);
			return 1;
		}
		if (r->c->complete) {
			char *save = NULL;
			struct jo_key tk;

			task_key(&tk, tx->m, r->ns, r->c->task_id);
			rc = jo_tx_del(tx, &tk, err);
			for (char *it = strtok_r(t.items, "\n", &save); it && !rc;
			     it = strtok_r(NULL, "\n", &save)) {
				struct jo_key ik;

				item_key(&ik, tx->m, r->ns, it);
				rc = jo_tx_del(tx, &ik, err);
			}
		} else {
			rc = 0;
		}
		jo_mut_task_release_mem(&t);
		if (rc)
			return rc;
	}
	rec_key(&k, tx->m, r->ns, r->key);
	if (k.over)
		return jo_err_set(err, JO_EINVAL, "record key '%.40s' is too long for this engine",
				  r->key);
	if (r->c->if_absent || !r->val) {
		uint8_t *v = NULL;
		size_t vl = 0;

		if ((rc = jo_tx_get(tx, &k, &v, &vl, err)) != 0)
			return rc;
		free(v);
		if (v && r->c->if_absent && r->val)
			return 2;
		if (!v && !r->val)
			return r->c->complete ? 0 : 2; /* nothing to remove */
	}
	rc = r->val ? jo_tx_put(tx, &k, r->val, strlen(r->val), err) : jo_tx_del(tx, &k, err);
	if (rc == 0)
		r->written = true;
	return rc;
}

int jo_tkv_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		   const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	struct recput r = { ns, key, val, c, false };
	int rc = jo_tkv_txn(m, rec_put_fn, &r, err);

	if (written)
		*written = rc == 0 && r.written;
	if (rc == 1)
		return jo_err_set(err, JO_ECONFLICT, "record '%s': task %lld is no longer leased by %s",
				  key, (long long)c->task_id, c->owner);
	return rc > 0 ? 0 : rc;
}

int jo_tkv_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		   struct jo_err *err)
{
	struct jo_key k;
	uint8_t *v = NULL;
	size_t vl = 0;
	int rc;

	rec_key(&k, m, ns, key);
	if (k.over)
		return jo_err_set(err, JO_EINVAL, "record key '%.40s' is too long for this engine", key);
	if ((rc = jo_tkv_get(m, &k, &v, &vl, err)) != 0)
		return rc;
	if (!v)
		return jo_err_set(err, JO_ENOTFOUND, "no record '%s'", key);
	*val = malloc(vl + 1);
	if (*val) {
		memcpy(*val, v, vl);
		(*val)[vl] = '\0';
	}
	free(v);
	return *val ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

struct recscan {
	size_t plen; /* the namespace's record prefix: the record key follows */
	jo_mut_rec_cb cb;
	void *payload;
	struct jo_err *err;
};

static int rec_scan_cb(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *p)
{
	struct recscan *s = p;
	char *key = malloc(kl - s->plen + 1), *val = malloc(vl + 1);
	int rc;

	if (!key || !val) {
		free(key);
		free(val);
		return jo_err_set(s->err, JO_ENOMEM, "out of memory");
	}
	memcpy(key, k + s->plen, kl - s->plen);
	key[kl - s->plen] = '\0';
	memcpy(val, v, vl);
	val[vl] = '\0';
	rc = s->cb(key, val, s->payload);
	free(key);
	free(val);
	return rc;
}

int jo_tkv_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		    void *payload, struct jo_err *err)
{
	struct jo_key base, k;
	struct recscan s = { 0, cb, payload, err };

	ns_key(&base, m, ns, "/r/");
	s.plen = base.n;
	k = base;
	jo_key_str(&k, prefix);
	if (k.over)
		return jo_err_set(err, JO_EINVAL, "record prefix '%.40s' is too long for this engine",
				  prefix);
	return jo_tkv_scan_prefix(m, &k, false, rec_scan_cb, &s, err);
}
