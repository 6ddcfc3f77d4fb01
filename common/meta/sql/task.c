/*
 * sql/task.c: jfsops's task records and leases in the sql family, in two
 * tables of our own next to the volume's (names from '#' in the templates:
 * jfsops_[X_]{ns}_task and jfsops_[X_]{ns}_item):
 *   task (id, kind, items, owner, expire ms, attempts, created ms)
 *   item (item primary key, task): which pending task holds an item.
 * Every change is one transaction, safe against other workers on other
 * hosts on every dialect: a claim is a conditional UPDATE that only one
 * worker's row count can win; renew/release/complete name the owner in
 * their WHERE; planners serialise on the item rows they read FOR UPDATE.
 * Times are this host's clock (unix ms), as on Redis.
 */
#include "common/meta/meta_mut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One statement in autocommit, tried again on a lock conflict. */
static int write_args(struct jo_meta *m, const char *ns, const char *tmpl, const int64_t *v, int n,
		      const char *text, int64_t *changes, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		struct jo_sqls *st;
		int rc = jo_sql_prep_i64s(m, ns, &st, tmpl, v, n, err);

		if (rc)
			return rc;
		if (text)
			jo_sql_text(m, st, n + 1, text);
		rc = jo_sql_step(m, st, err);
		if (rc >= 0 && changes)
			*changes = jo_sql_changes(m, st);
		jo_sql_free(m, st);
		if (rc >= 0)
			return 0;
		if (attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

/* A statement with one text and one integer parameter, in that order when
 * text_first, else the other way round. */
static int run_text(struct jo_meta *m, const char *ns, const char *tmpl, bool text_first,
		    const char *text, int64_t v, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, ns, &st, err, tmpl);

	if (rc)
		return rc;
	jo_sql_text(m, st, text_first ? 1 : 2, text);
	jo_sql_i64(m, st, text_first ? 2 : 1, v);
	rc = jo_sql_step(m, st, err);
	jo_sql_free(m, st);
	return rc < 0 ? rc : 0;
}

/*
 * One CREATE ... IF NOT EXISTS of our tables. Workers starting together race
 * on it, and PostgreSQL reports the loser as a duplicate key (or type) of its
 * catalog: another try finds the table made.
 */
static int create_table(struct jo_meta *m, const char *ns, const char *ddl, struct jo_err *err)
{
	int rc = 0;

	for (int attempt = 0; attempt < 3; attempt++) {
		rc = write_args(m, ns, ddl, NULL, 0, NULL, NULL, err);
		if (!rc)
			break;
		usleep(20000 * (useconds_t)(attempt + 1));
	}
	return rc;
}

int jo_sql_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	for (const char *const *d = jo_sql_dialect_of(m)->task_ddl; *d; d++) {
		int rc = create_table(m, ns, *d, err);

		if (rc)
			return jo_err_wrap(err, "create jfsops task tables");
	}
	return 0;
}

/*
 * One attempt: insert the task, then each item unless a pending task holds
 * it (the item's primary key makes a second planner wait for the first and
 * then skip what it took), then the task's own list of the items it got.
 * Nothing fresh: the transaction is rolled back and *task_id stays 0.
 */
static int task_add_once(struct jo_meta *m, const char *ns, const char *kind,
			 const char *const *items, size_t n, bool *fresh, int64_t *task_id,
			 size_t *added, struct jo_err *err)
{
	const struct jo_sql_dialect *d = jo_sql_dialect_of(m);
	struct jo_sqls *st = NULL, *q = NULL;
	size_t nfresh = 0, blen = 0, o = 0;
	char *buf = NULL;
	char ins[160];
	int rc, s;

	*task_id = 0;
	*added = 0;
	for (size_t i = 0; i < n; i++)
		blen += strlen(items[i]) + 1;
	if (!(buf = malloc(blen + 1)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = jo_sql_begin(m, err)) != 0)
		goto out;
	snprintf(ins, sizeof(ins), "INSERT INTO #task (kind, items, created) VALUES (?, '', ?)%s",
		 d->returning_id ? d->returning_id : "");
	if ((rc = jo_sql_prep(m, ns, &st, err, ins)))
		goto fail;
	jo_sql_text(m, st, 1, kind);
	jo_sql_i64(m, st, 2, now_ms());
	s = jo_sql_step(m, st, err);
	if (s < 0 || (d->returning_id && s != 1)) {
		rc = s < 0 ? jo_err_wrap(err, "insert task")
			   : jo_err_set(err, JO_EPROTO, "insert task: no id returned");
		goto fail;
	}
	*task_id = d->returning_id ? jo_sql_col_i64(m, st, 0) : jo_sql_of(m)->drv->insert_id(st);
	jo_sql_free(m, st);
	st = NULL;
	if ((rc = jo_sql_prep(m, ns, &st, err, d->insert_item)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		jo_sql_reset(m, st);
		jo_sql_text(m, st, 1, items[i]);
		jo_sql_i64(m, st, 2, *task_id);
		if (jo_sql_step(m, st, err) < 0) {
			rc = jo_err_wrap(err, "insert task item");
			goto fail;
		}
		fresh[i] = jo_sql_changes(m, st) > 0;
		if (!fresh[i]) {
			/* held, unless its task is gone (a record cleared by hand) */
			bool held = true;

			if (!q && (rc = jo_sql_prep(m, ns, &q, err, "SELECT 1 FROM #item i JOIN #task t "
						    "ON t.id = i.task WHERE i.item=?")))
				goto fail;
			jo_sql_reset(m, q);
			jo_sql_text(m, q, 1, items[i]);
			if ((s = jo_sql_step(m, q, err)) < 0) {
				rc = jo_err_wrap(err, "read task items");
				goto fail;
			}
			held = s == 1;
			if (!held && (rc = run_text(m, ns, "UPDATE #item SET task=? WHERE item=?",
						    false, items[i], *task_id, err)))
				goto fail;
			fresh[i] = !held;
		}
		if (fresh[i]) {
			size_t l = strlen(items[i]);

			if (o)
				buf[o++] = '\n';
			memcpy(buf + o, items[i], l);
			o += l;
			nfresh++;
		}
	}
	buf[o] = '\0';
	jo_sql_free(m, st);
	jo_sql_free(m, q);
	st = q = NULL;
	if (nfresh == 0) {
		jo_sql_rollback(m);
		*task_id = 0;
		goto out;
	}
	if ((rc = run_text(m, ns, "UPDATE #task SET items=? WHERE id=?", true, buf, *task_id, err)))
		goto fail;
	if ((rc = jo_sql_commit(m, err)) != 0) {
		*task_id = 0;
		goto out;
	}
	*added = nfresh;
	goto out;
fail:
	jo_sql_free(m, st);
	jo_sql_free(m, q);
	jo_sql_rollback(m);
	*task_id = 0;
out:
	free(buf);
	return rc;
}

int jo_sql_task_add(struct jo_meta *m, const char *ns, const char *kind,
		    const char *const *items, size_t n, int64_t *task_id, size_t *added,
		    struct jo_err *err)
{
	bool *fresh;
	int rc;

	*task_id = 0;
	*added = 0;
	if (n == 0)
		return 0;
	fresh = calloc(n, sizeof(*fresh));
	if (!fresh)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (int attempt = 0;; attempt++) {
		rc = task_add_once(m, ns, kind, items, n, fresh, task_id, added, err);
		if (rc >= 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			break;
	}
	free(fresh);
	return rc;
}

/* 1: another worker won the row first (look again). */
static int claim_once(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		      struct jo_mut_task *out, struct jo_err *err)
{
	struct jo_sqls *st = NULL;
	int64_t now = now_ms(), exp = now + lease_ms, changes = 0;
	int rc, s;

	memset(out, 0, sizeof(*out));
	if ((rc = jo_sql_prep(m, ns, &st, err, "SELECT id, kind, items, attempts FROM #task "
			      "WHERE expire <= ? ORDER BY expire, id LIMIT 1")))
		return rc == JO_ENOTJFS ? jo_err_set(err, JO_ENOTFOUND, "no claimable task") : rc;
	jo_sql_i64(m, st, 1, now);
	s = jo_sql_step(m, st, err);
	if (s <= 0) {
		jo_sql_free(m, st);
		return s < 0 ? jo_err_wrap(err, "claim task")
			     : jo_err_set(err, JO_ENOTFOUND, "no claimable task");
	}
	out->id = jo_sql_col_i64(m, st, 0);
	{
		size_t n;
		const uint8_t *k = jo_sql_col_blob(m, st, 1, &n);
		const uint8_t *it = jo_sql_col_blob(m, st, 2, &n);

		snprintf(out->kind, sizeof(out->kind), "%s", (const char *)k);
		out->items = strdup((const char *)it);
	}
	out->attempts = jo_sql_col_i64(m, st, 3) + 1;
	jo_sql_free(m, st);
	if (!out->items)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	/* the lease is ours only if the row still has a free lease when the
	 * UPDATE locks it: a concurrent claimer's UPDATE then matches nothing */
	st = NULL;
	if ((rc = jo_sql_prep(m, ns, &st, err, "UPDATE #task SET expire=?, attempts=attempts+1, "
			      "owner=? WHERE id=? AND expire <= ?")) == 0) {
		jo_sql_i64(m, st, 1, exp);
		jo_sql_text(m, st, 2, owner);
		jo_sql_i64(m, st, 3, out->id);
		jo_sql_i64(m, st, 4, now);
		rc = jo_sql_step(m, st, err);
		if (rc >= 0) {
			changes = jo_sql_changes(m, st);
			rc = 0;
		}
		jo_sql_free(m, st);
	}
	if (rc || changes == 0) {
		jo_mut_task_release_mem(out);
		return rc ? rc : 1;
	}
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	out->expire_ms = exp;
	return 0;
}

int jo_sql_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		      struct jo_mut_task *out, struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = claim_once(m, ns, owner, lease_ms, out, err);

		if (rc == 1 && attempt + 1 < JO_SQL_TXN_TRIES)
			continue;
		if (rc == 1)
			return jo_err_set(err, JO_ENOTFOUND, "no claimable task (lost every race)");
		if (rc == JO_ENOTJFS)
			return jo_err_set(err, JO_ENOTFOUND, "no claimable task (no task table yet)");
		if (rc < 0 && rc != JO_ENOTFOUND && attempt + 1 < JO_SQL_TXN_TRIES &&
		    jo_sql_retry(m, attempt))
			continue;
		return rc;
	}
}

/* UPDATE #task SET ...=? WHERE id=? AND owner=?: JO_ECONFLICT when nothing matched. */
static int owned_write(struct jo_meta *m, const char *ns, const char *tmpl, int64_t a, int64_t id,
		       const char *owner, const char *what, struct jo_err *err)
{
	int64_t changes = 0;
	int rc = write_args(m, ns, tmpl, (const int64_t[]){ a, id }, 2, owner, &changes, err);

	if (rc)
		return rc;
	if (changes == 0)
		return jo_err_set(err, JO_ECONFLICT, "%s task %lld: no longer leased by %s", what,
				  (long long)id, owner);
	return 0;
}

int jo_sql_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		      int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	int64_t exp = now_ms() + lease_ms;
	int rc = owned_write(m, ns, "UPDATE #task SET expire=? WHERE id=? AND owner=?", exp, id,
			     owner, "renew", err);

	if (rc == 0 && expire_ms)
		*expire_ms = exp;
	return rc;
}

int jo_sql_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			struct jo_err *err)
{
	return owned_write(m, ns, "UPDATE #task SET expire=?, owner='' WHERE id=? AND owner=?", 0,
			   id, owner, "release", err);
}

static int complete_once(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			 struct jo_err *err)
{
	struct jo_sqls *st = NULL;
	int64_t changes = 0;
	int rc;

	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	if ((rc = jo_sql_prep(m, ns, &st, err, "DELETE FROM #task WHERE id=? AND owner=?")))
		goto fail;
	jo_sql_i64(m, st, 1, id);
	jo_sql_text(m, st, 2, owner);
	if ((rc = jo_sql_step(m, st, err)) < 0)
		goto fail;
	changes = jo_sql_changes(m, st);
	jo_sql_free(m, st);
	st = NULL;
	if (changes == 0) {
		jo_sql_rollback(m);
		return jo_err_set(err, JO_ECONFLICT, "complete task %lld: no longer leased by %s",
				  (long long)id, owner);
	}
	rc = jo_sql_run(m, ns, "DELETE FROM #item WHERE task=?", &id, 1, NULL, 0, NULL, 0, NULL,
			NULL, err);
	if (rc)
		goto fail;
	return jo_sql_commit(m, err);
fail:
	return jo_sql_undo(m, st, rc);
}

int jo_sql_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			 struct jo_err *err)
{
	for (int attempt = 0;; attempt++) {
		int rc = complete_once(m, ns, id, owner, err);

		if (rc >= 0 || rc == JO_ECONFLICT || attempt + 1 >= JO_SQL_TXN_TRIES ||
		    !jo_sql_retry(m, attempt))
			return rc;
	}
}

int jo_sql_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
		      struct jo_err *err)
{
	int64_t row[2] = { 0, 0 }, now = now_ms();
	int rc = jo_sql_run(m, ns, "SELECT count(*), coalesce(sum(CASE WHEN expire > ? THEN 1 "
			    "ELSE 0 END), 0) FROM #task", &now, 1, NULL, 0, row, 2, NULL, NULL, err);

	/* no task table yet (nothing was ever planned here): no task */
	if (rc == JO_ENOTJFS) {
		jo_err_clear(err);
		rc = 0;
	}
	*total = row[0];
	*leased = row[1];
	return rc;
}

int jo_sql_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		     struct jo_err *err)
{
	int64_t last = 0;

	/* paged by id: a callback may use this handle between pages */
	for (;;) {
		struct jo_sqls *st;
		int rc = jo_sql_prep(m, ns, &st, err, "SELECT id, kind, items, owner, expire, attempts "
				     "FROM #task WHERE id > ? ORDER BY id LIMIT 100");
		int n = 0;

		if (rc == JO_ENOTJFS) {
			/* no task table yet: no task */
			jo_err_clear(err);
			return 0;
		}
		if (rc)
			return rc;
		jo_sql_i64(m, st, 1, last);
		while ((rc = jo_sql_step(m, st, err)) == 1) {
			struct jo_mut_task t = { 0 };
			size_t l;

			t.id = last = jo_sql_col_i64(m, st, 0);
			snprintf(t.kind, sizeof(t.kind), "%s", (const char *)jo_sql_col_blob(m, st, 1, &l));
			t.items = (char *)jo_sql_col_blob(m, st, 2, &l);
			snprintf(t.owner, sizeof(t.owner), "%s",
				 (const char *)jo_sql_col_blob(m, st, 3, &l));
			t.expire_ms = jo_sql_col_i64(m, st, 4);
			t.attempts = jo_sql_col_i64(m, st, 5);
			n++;
			if ((rc = cb(&t, payload)) != 0)
				break;
		}
		jo_sql_free(m, st);
		if (rc == JO_ENOTJFS && last == 0) {
			jo_err_clear(err); /* no task table yet: no task */
			return 0;
		}
		if (rc)
			return rc;
		if (n < 100)
			return 0;
	}
}

static int ensure_rec(struct jo_meta *m, const char *ns, struct jo_err *err);

int jo_sql_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	int rc = jo_sql_task_init(m, ns, err);

	if (rc == 0)
		rc = write_args(m, ns, "DELETE FROM #item", NULL, 0, NULL, NULL, err);
	if (rc == 0)
		rc = write_args(m, ns, "DELETE FROM #task", NULL, 0, NULL, NULL, err);
	if (rc == 0)
		rc = ensure_rec(m, ns, err);
	if (rc == 0)
		rc = write_args(m, ns, "DELETE FROM #rec", NULL, 0, NULL, NULL, err);
	return rc;
}

/*
 * ---- records beside the tasks: #rec (k primary key, v). Made on first
 * use, not by task_init, so that namespaces that keep none (gc, compact)
 * get no table for them.
 */

static int ensure_rec(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	struct jo_sql *s = jo_sql_of(m);
	int rc = 0;

	if (!strcmp(s->rec_ns, ns))
		return 0;
	for (const char *const *d = jo_sql_dialect_of(m)->rec_ddl; *d && !rc; d++)
		rc = create_table(m, ns, *d, err);
	if (rc)
		return jo_err_wrap(err, "create jfsops record table");
	snprintf(s->rec_ns, sizeof(s->rec_ns), "%s", ns);
	return 0;
}

/* A statement of text parameters only. */
static int run_texts(struct jo_meta *m, const char *ns, const char *tmpl, const char *a,
		     const char *b, int64_t *changes, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, ns, &st, err, tmpl);

	if (rc)
		return rc;
	jo_sql_text(m, st, 1, a);
	if (b)
		jo_sql_text(m, st, 2, b);
	rc = jo_sql_step(m, st, err);
	if (rc >= 0 && changes)
		*changes = jo_sql_changes(m, st);
	jo_sql_free(m, st);
	return rc < 0 ? rc : 0;
}

/* One attempt: 1 = the task is not ours (nothing changed). */
static int rec_put_once(struct jo_meta *m, const char *ns, const char *key, const char *val,
			const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	int64_t changes = 0;
	int rc;

	*written = false;
	if ((rc = jo_sql_begin(m, err)) != 0)
		return rc;
	if (c->task_id > 0) {
		struct jo_sqls *st = NULL;
		bool ours = false;
		int s;

		if ((rc = jo_sql_prep(m, ns, &st, err, "SELECT owner FROM #task WHERE id=?~")))
			goto fail;
		jo_sql_i64(m, st, 1, c->task_id);
		s = jo_sql_step(m, st, err);
		if (s == 1) {
			size_t n;
			const uint8_t *o = jo_sql_col_blob(m, st, 0, &n);

			ours = n == strlen(c->owner) && memcmp(o, c->owner, n) == 0;
		}
		jo_sql_free(m, st);
		if (s < 0) {
			rc = s;
			goto fail;
		}
		if (!ours) {
			jo_sql_rollback(m);
			return 1;
		}
	}
	if (!val) {
		rc = run_texts(m, ns, "DELETE FROM #rec WHERE k=?", key, NULL, &changes, err);
		*written = changes > 0;
	} else if (c->if_absent) {
		rc = run_texts(m, ns, jo_sql_dialect_of(m)->insert_rec, key, val, &changes, err);
		*written = changes > 0;
		if (!rc && !*written) {
			jo_sql_rollback(m);
			return 0;
		}
	} else {
		rc = run_texts(m, ns, "DELETE FROM #rec WHERE k=?", key, NULL, NULL, err);
		if (!rc)
			rc = run_texts(m, ns, jo_sql_dialect_of(m)->insert_rec, key, val, &changes, err);
		*written = changes > 0;
	}
	if (rc)
		goto fail;
	if (c->complete) {
		rc = jo_sql_run(m, ns, "DELETE FROM #task WHERE id=?", &c->task_id, 1, NULL, 0, NULL, 0,
				NULL, NULL, err);
		if (!rc)
			rc = jo_sql_run(m, ns, "DELETE FROM #item WHERE task=?", &c->task_id, 1, NULL, 0,
					NULL, 0, NULL, NULL, err);
		if (rc)
			goto fail;
	}
	rc = jo_sql_commit(m, err);
	if (rc)
		*written = false;
	return rc;
fail:
	jo_sql_rollback(m);
	*written = false;
	return rc;
}

int jo_sql_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		   const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	bool w = false;
	int rc = ensure_rec(m, ns, err);

	for (int attempt = 0; !rc; attempt++) {
		rc = rec_put_once(m, ns, key, val, c, &w, err);
		if (rc == 1) {
			rc = jo_err_set(err, JO_ECONFLICT, "record '%s': task %lld is no longer leased by %s",
					key, (long long)c->task_id, c->owner);
			break;
		}
		if (rc >= 0 || attempt + 1 >= JO_SQL_TXN_TRIES || !jo_sql_retry(m, attempt))
			break;
		rc = 0;
	}
	if (written)
		*written = rc == 0 && w;
	return rc;
}

int jo_sql_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		   struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = ensure_rec(m, ns, err);
	int s;

	if (rc)
		return rc;
	if ((rc = jo_sql_prep(m, ns, &st, err, "SELECT v FROM #rec WHERE k=?")))
		return rc;
	jo_sql_text(m, st, 1, key);
	s = jo_sql_step(m, st, err);
	if (s == 1) {
		size_t n;
		const uint8_t *v = jo_sql_col_blob(m, st, 0, &n);

		*val = malloc(n + 1);
		if (*val) {
			memcpy(*val, v, n);
			(*val)[n] = '\0';
		}
	}
	jo_sql_free(m, st);
	if (s < 0)
		return jo_err_wrap(err, "read record '%s'", key);
	if (s == 0)
		return jo_err_set(err, JO_ENOTFOUND, "no record '%s'", key);
	return *val ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

int jo_sql_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		    void *payload, struct jo_err *err)
{
	enum { PAGE = 100 };
	char *keys[PAGE], *vals[PAGE], *last = NULL;
	size_t plen = strlen(prefix);
	int rc = ensure_rec(m, ns, err);

	/* paged in key order, each page read whole before its callbacks run:
	 * a callback may use this handle */
	while (!rc) {
		struct jo_sqls *st;
		int n = 0, s;
		bool past = false;

		rc = jo_sql_prep(m, ns, &st, err, last ? "SELECT k, v FROM #rec WHERE k > ? ORDER BY k LIMIT 100"
						       : "SELECT k, v FROM #rec WHERE k >= ? ORDER BY k LIMIT 100");
		if (rc)
			break;
		jo_sql_text(m, st, 1, last ? last : prefix);
		while (n < PAGE && (s = jo_sql_step(m, st, err)) == 1) {
			size_t kl, vl;
			const uint8_t *k = jo_sql_col_blob(m, st, 0, &kl);
			const uint8_t *v = jo_sql_col_blob(m, st, 1, &vl);

			if (kl < plen || memcmp(k, prefix, plen) != 0) {
				past = true;
				break;
			}
			keys[n] = malloc(kl + 1);
			vals[n] = malloc(vl + 1);
			if (!keys[n] || !vals[n]) {
				free(keys[n]);
				free(vals[n]);
				s = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			memcpy(keys[n], k, kl);
			keys[n][kl] = '\0';
			memcpy(vals[n], v, vl);
			vals[n][vl] = '\0';
			n++;
		}
		jo_sql_free(m, st);
		if (s < 0)
			rc = jo_err_wrap(err, "scan records");
		for (int i = 0; i < n; i++) {
			if (!rc)
				rc = cb(keys[i], vals[i], payload);
			if (i == n - 1 && !rc) {
				free(last);
				last = keys[i];
			} else {
				free(keys[i]);
			}
			free(vals[i]);
		}
		if (rc || past || n < PAGE)
			break;
	}
	free(last);
	return rc;
}
