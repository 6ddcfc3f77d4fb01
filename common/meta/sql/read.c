/*
 * sql/read.c: the sql family's core (connection, templates, transactions) and its
 * reads (jfs_* tables, §4 of the format spec and juicefs-engines.md A.2).
 * Times in jfs_node are microseconds; refs are real counts; counters hold the
 * next free id. Integer columns are signed on PostgreSQL and MySQL (uint32
 * fields stored as `integer`), so every value is read as int64 and cast.
 *
 * Scans page through their table in primary-key order (bounded memory on
 * every driver) inside one read-only snapshot transaction, so a scan sees
 * the volume as of one instant even while clients write; scan callbacks may
 * call reads on the same handle (they run inside that snapshot).
 */
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

#include "common/dynbuf.h"
#include "common/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PAGE_ROWS 1000
#define CHUNK_PAGE_ROWS 256 /* chunk rows are up to 60 KB each */

struct jo_sql *jo_sql_of(struct jo_meta *m)
{
	return m->be;
}

const struct jo_sql_dialect *jo_sql_dialect_of(struct jo_meta *m)
{
	return jo_sql_of(m)->drv->dialect;
}

static const struct jo_sql_driver *driver_for(const char *engine)
{
	if (!strcmp(engine, "postgres"))
		return &jo_sqldrv_pg;
	if (!strcmp(engine, "mysql"))
		return &jo_sqldrv_mysql;
	return &jo_sqldrv_sqlite;
}

/* ---------------------------------------------------------------- templates */

/* Every driver call that can fail notes whether its failure is one a new
 * attempt may clear, before a ROLLBACK (which succeeds) could hide it. */
static int noted(struct jo_sql *s, int rc)
{
	s->retry = rc < 0 && s->drv->retryable(s->c);
	return rc;
}


/* tmpl with '@' -> pfx, '#' -> ours, '~' -> fu into out (NULL: only measure); its length. */
static size_t expand(const char *tmpl, const char *pfx, const char *ours, const char *fu,
		     char *out)
{
	size_t o = 0;

	for (const char *p = tmpl; *p; p++) {
		const char *sub = *p == '@' ? pfx : *p == '#' ? ours : *p == '~' ? fu : NULL;
		size_t l = sub ? strlen(sub) : 1;

		if (out)
			memcpy(out + o, sub ? sub : p, l);
		o += l;
	}
	if (out)
		out[o] = '\0';
	return o;
}

int jo_sql_prep(struct jo_meta *m, const char *ns, struct jo_sqls **st, struct jo_err *err,
		const char *tmpl)
{
	struct jo_sql *s = jo_sql_of(m);
	const char *pfx = s->pfx, *fu = s->drv->dialect->for_update;
	char stack[2048], ours[96], *sql = stack;
	size_t need;
	int rc;

	*st = NULL;
	/* "jfs_" -> "jfsops_gc_"; "jfs_X_" -> "jfsops_X_gc_" */
	snprintf(ours, sizeof(ours), "jfsops_%s%s_", strncmp(pfx, "jfs_", 4) == 0 ? pfx + 4 : pfx,
		 ns ? ns : "");
	need = expand(tmpl, pfx, ours, fu, NULL) + 1;
	/* a statement longer than the stack buffer (a batch's id list) */
	if (need > sizeof(stack) && !(sql = malloc(need)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	expand(tmpl, pfx, ours, fu, sql);
	rc = noted(s, s->drv->prepare(s->c, sql, st, err));
	if (sql != stack)
		free(sql);
	return rc;
}

int jo_sql_prep_i64s(struct jo_meta *m, const char *ns, struct jo_sqls **st, const char *tmpl,
		     const int64_t *v, int n, struct jo_err *err)
{
	int rc = jo_sql_prep(m, ns, st, err, tmpl);

	for (int i = 0; rc == 0 && i < n; i++)
		jo_sql_i64(m, *st, i + 1, v[i]);
	return rc;
}

void jo_sql_i64(struct jo_meta *m, struct jo_sqls *st, int i, int64_t v)
{
	jo_sql_of(m)->drv->bind_i64(st, i, v);
}

void jo_sql_blob(struct jo_meta *m, struct jo_sqls *st, int i, const void *p, size_t n)
{
	jo_sql_of(m)->drv->bind_blob(st, i, p, n);
}

void jo_sql_text(struct jo_meta *m, struct jo_sqls *st, int i, const char *p)
{
	jo_sql_of(m)->drv->bind_text(st, i, p);
}

int jo_sql_step(struct jo_meta *m, struct jo_sqls *st, struct jo_err *err)
{
	struct jo_sql *s = jo_sql_of(m);

	return noted(s, s->drv->step(st, err));
}

int64_t jo_sql_col_i64(struct jo_meta *m, struct jo_sqls *st, int i)
{
	return jo_sql_of(m)->drv->col_i64(st, i);
}

const uint8_t *jo_sql_col_blob(struct jo_meta *m, struct jo_sqls *st, int i, size_t *n)
{
	return jo_sql_of(m)->drv->col_blob(st, i, n);
}

int64_t jo_sql_changes(struct jo_meta *m, struct jo_sqls *st)
{
	return jo_sql_of(m)->drv->changes(st);
}

void jo_sql_reset(struct jo_meta *m, struct jo_sqls *st)
{
	jo_sql_of(m)->drv->reset(st);
}

void jo_sql_free(struct jo_meta *m, struct jo_sqls *st)
{
	if (st)
		jo_sql_of(m)->drv->finalize(st);
}

int jo_sql_run(struct jo_meta *m, const char *ns, const char *tmpl, const int64_t *v, int n,
	       const void *name, size_t nlen, int64_t *row, int ncol, bool *found,
	       int64_t *changes, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep_i64s(m, ns, &st, tmpl, v, n, err);

	if (rc)
		return rc;
	if (name)
		jo_sql_blob(m, st, n + 1, name, nlen);
	rc = jo_sql_step(m, st, err);
	if (found)
		*found = rc == 1;
	if (rc == 1)
		for (int i = 0; i < ncol && row; i++)
			row[i] = jo_sql_col_i64(m, st, i);
	if (rc >= 0) {
		if (changes)
			*changes = jo_sql_changes(m, st);
		rc = 0;
	}
	jo_sql_free(m, st);
	return rc;
}

/* ---------------------------------------------------------------- transactions */

static int begin_with(struct jo_meta *m, const char *sql, struct jo_err *err)
{
	struct jo_sql *s = jo_sql_of(m);
	int rc;

	if (s->txn_depth)
		return jo_err_set(err, JO_EINVAL, "%s: a transaction is already open on this handle "
				  "(write through another handle inside a scan)",
				  s->drv->dialect->label);
	rc = noted(s, s->drv->exec(s->c, sql, err));
	if (rc == 0)
		s->txn_depth = 1;
	return rc;
}

int jo_sql_begin(struct jo_meta *m, struct jo_err *err)
{
	/* SQLite's BEGIN IMMEDIATE waits out other writers (5 s busy timeout); a
	 * writer that keeps the lock makes it fail: try a few more times (about
	 * 30 s in all), then give up as a timeout rather than hang a cron run */
	for (int attempt = 0;; attempt++) {
		int rc = begin_with(m, jo_sql_dialect_of(m)->begin_rw, err);

		if (rc == 0 || attempt + 1 >= JO_SQL_BEGIN_TRIES || !jo_sql_retry(m, attempt))
			return rc;
	}
}

int jo_sql_begin_snapshot(struct jo_meta *m, struct jo_err *err)
{
	return begin_with(m, jo_sql_dialect_of(m)->begin_snapshot, err);
}

int jo_sql_commit(struct jo_meta *m, struct jo_err *err)
{
	struct jo_sql *s = jo_sql_of(m);
	int rc = noted(s, s->drv->exec(s->c, "COMMIT", err));

	if (rc)
		(void)s->drv->exec(s->c, "ROLLBACK", NULL); /* best effort: abandoned either way */
	s->txn_depth = 0;
	return rc;
}

void jo_sql_rollback(struct jo_meta *m)
{
	struct jo_sql *s = jo_sql_of(m);

	if (!s->txn_depth)
		return;
	/* Nothing to report: the transaction is abandoned either way. */
	(void)s->drv->exec(s->c, "ROLLBACK", NULL);
	s->txn_depth = 0;
}

int jo_sql_undo(struct jo_meta *m, struct jo_sqls *st, int rc)
{
	jo_sql_free(m, st);
	jo_sql_rollback(m);
	return rc;
}

bool jo_sql_retry(struct jo_meta *m, int attempt)
{
	struct jo_sql *s = jo_sql_of(m);

	if (!s->retry)
		return false;
	s->retry = false;
	usleep((useconds_t)(attempt * attempt * 1000 + 1000 + rand() % 4000));
	return true;
}

/*
 * Run a scan in a snapshot (unless the handle is already inside a
 * transaction, whose view it then shares). fn returns 0, a callback's
 * non-zero value, or an error.
 */
static int in_snapshot(struct jo_meta *m, int (*fn)(struct jo_meta *, void *, struct jo_err *),
		       void *ctx, struct jo_err *err)
{
	int rc;

	if (jo_sql_of(m)->txn_depth)
		return fn(m, ctx, err);
	if ((rc = jo_sql_begin_snapshot(m, err)) != 0)
		return rc;
	rc = fn(m, ctx, err);
	if (rc == 0)
		return jo_sql_commit(m, err);
	jo_sql_rollback(m);
	return rc;
}

/* ---------------------------------------------------------------- connection */

static int s_open(struct jo_meta *m, struct jo_err *err)
{
	struct jo_sql *s = calloc(1, sizeof(*s));
	struct jo_sqls *st = NULL;
	int rc;

	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s->drv = driver_for(m->url.engine);
	s->pfx = m->url.table_prefix ? m->url.table_prefix : "jfs_";
	m->be = s;
	rc = s->drv->connect(&s->c, &m->url, err);
	if (rc)
		goto fail;
	/* a sync coordinator holds no volume: its task tables come on first use */
	if (m->url.coordinator_only)
		return 0;
	rc = jo_sql_prep(m, NULL, &st, err, "SELECT name FROM @setting WHERE name='format'");
	if (rc == 0)
		rc = jo_sql_step(m, st, err);
	jo_sql_free(m, st);
	/* the table must exist; a missing format row is jo_meta_load_format's to report */
	if (rc < 0 && err && err->code == JO_ENOTJFS)
		rc = jo_err_set(err, JO_ENOTJFS, "%s %s has no table %ssetting: not a JuiceFS volume",
				s->drv->dialect->label, m->url.redacted, s->pfx);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	if (s->c)
		s->drv->disconnect(s->c);
	free(s);
	m->be = NULL;
	return rc;
}

static void s_close(struct jo_meta *m)
{
	struct jo_sql *s = m->be;

	if (!s)
		return;
	jo_sql_rollback(m);
	s->drv->disconnect(s->c);
	free(s);
	m->be = NULL;
}

static const char *s_engine(const struct jo_meta *m)
{
	return ((const struct jo_sql *)m->be)->drv->dialect->name;
}

static unsigned s_caps(const struct jo_meta *m)
{
	(void)m;
	return JO_META_CAP_SNAPSHOT_SCANS;
}

static int s_snapshot_begin(struct jo_meta *m, struct jo_err *err)
{
	return jo_sql_begin_snapshot(m, err);
}

static void s_snapshot_end(struct jo_meta *m)
{
	struct jo_sql *s = jo_sql_of(m);

	if (s->txn_depth)
		(void)jo_sql_commit(m, NULL); /* read-only: nothing to keep or lose */
}

static int s_describe(struct jo_meta *m, char **out, struct jo_err *err)
{
	struct jo_sql *s = jo_sql_of(m);

	return s->drv->version(s->c, out, err);
}

/* ---------------------------------------------------------------- reads */

/* Copy column i of the current row as a NUL-terminated string (malloc'd). */
static char *col_strdup(struct jo_meta *m, struct jo_sqls *st, int i)
{
	size_t n;
	const uint8_t *b = jo_sql_col_blob(m, st, i, &n);
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	if (n)
		memcpy(p, b, n);
	p[n] = '\0';
	return p;
}

static int s_get_setting(struct jo_meta *m, char **json, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, NULL, &st, err, "SELECT value FROM @setting WHERE name='format'");

	if (rc != 0)
		return rc;
	rc = jo_sql_step(m, st, err);
	if (rc == 0) {
		rc = jo_err_set(err, JO_ENOTJFS, "%s %s has no format record", s_engine(m),
				m->url.redacted);
	} else if (rc == 1) {
		*json = col_strdup(m, st, 0);
		rc = *json ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	jo_sql_free(m, st);
	return rc;
}

static int s_lookup(struct jo_meta *m, uint64_t parent, const char *name, uint64_t *ino,
		    uint8_t *type, struct jo_err *err)
{
	int64_t row[2];
	bool found;
	int rc = jo_sql_run(m, NULL, "SELECT inode, type FROM @edge WHERE parent=? AND name=?",
			    (const int64_t[]){ (int64_t)parent }, 1, name, strlen(name), row, 2,
			    &found, NULL, err);

	if (rc)
		return rc;
	if (!found)
		return jo_err_set(err, JO_ENOTFOUND, "no entry \"%s\" in directory %llu", name,
				  (unsigned long long)parent);
	*ino = (uint64_t)row[0];
	*type = (uint8_t)row[1];
	return 0;
}

#define NODE_COLS "inode, type, flags, mode, uid, gid, atime, mtime, ctime, atimensec, " \
	"mtimensec, ctimensec, nlink, length, rdev, parent"

static void us_split(int64_t us, uint32_t extra_ns, int64_t *sec, uint32_t *nsec)
{
	int64_t s = us / 1000000, r = us % 1000000;

	if (r < 0) {
		r += 1000000;
		s--;
	}
	*sec = s;
	*nsec = (uint32_t)(r * 1000 + extra_ns);
}

static void row_attr(struct jo_meta *m, struct jo_sqls *st, struct jo_attr *a)
{
#define C(i) jo_sql_col_i64(m, st, i)
	memset(a, 0, sizeof(*a));
	a->type = (uint8_t)C(1);
	a->flags = (uint8_t)C(2);
	a->mode = (uint16_t)(C(3) & 07777);
	a->uid = (uint32_t)C(4);
	a->gid = (uint32_t)C(5);
	us_split(C(6), (uint32_t)C(9), &a->atime, &a->atimensec);
	us_split(C(7), (uint32_t)C(10), &a->mtime, &a->mtimensec);
	us_split(C(8), (uint32_t)C(11), &a->ctime, &a->ctimensec);
	a->nlink = (uint32_t)C(12);
	a->length = (uint64_t)C(13);
	a->rdev = (uint32_t)C(14);
	a->parent = (uint64_t)C(15);
#undef C
}

static int s_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, NULL, &st, err, "SELECT " NODE_COLS " FROM @node WHERE inode=?");

	if (rc != 0)
		return rc;
	jo_sql_i64(m, st, 1, (int64_t)ino);
	rc = jo_sql_step(m, st, err);
	if (rc == 1) {
		row_attr(m, st, out);
		rc = 0;
	} else if (rc == 0) {
		rc = jo_err_set(err, JO_ENOTFOUND, "inode %llu does not exist",
				(unsigned long long)ino);
	}
	jo_sql_free(m, st);
	return rc;
}

/* getattr_many: IN lists of up to 16 inodes (the drivers bind at most 16
 * parameters; a repeated inode gets each of its slots). */
#define ATTR_IN_MAX 16
static int s_getattr_many(struct jo_meta *m, const uint64_t *inos, size_t n, struct jo_attr *out,
			  bool *found, struct jo_err *err)
{
	char sql[sizeof("SELECT " NODE_COLS " FROM @node WHERE inode IN ()") + 2 * ATTR_IN_MAX];

	for (size_t base = 0; base < n; base += ATTR_IN_MAX) {
		size_t k = n - base < ATTR_IN_MAX ? n - base : ATTR_IN_MAX, len;
		struct jo_sqls *st;
		int rc;

		len = (size_t)snprintf(sql, sizeof(sql), "SELECT " NODE_COLS " FROM @node WHERE inode IN (");
		for (size_t i = 0; i < k; i++) {
			sql[len++] = i ? ',' : '?';
			if (i)
				sql[len++] = '?';
		}
		sql[len++] = ')';
		sql[len] = '\0';
		if ((rc = jo_sql_prep(m, NULL, &st, err, sql)) != 0)
			return rc;
		for (size_t i = 0; i < k; i++)
			jo_sql_i64(m, st, (int)i + 1, (int64_t)inos[base + i]);
		while ((rc = jo_sql_step(m, st, err)) == 1) {
			uint64_t ino = (uint64_t)jo_sql_col_i64(m, st, 0);
			struct jo_attr a;

			row_attr(m, st, &a);
			for (size_t i = 0; i < k; i++)
				if (inos[base + i] == ino) {
					out[base + i] = a;
					found[base + i] = true;
				}
		}
		jo_sql_free(m, st);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Page through a query in key order. tmpl selects the key as column 0 and
 * takes the last key seen (and then the arguments pre[0..npre)) as its
 * parameters; row() handles one row and returns non-zero to stop.
 */
struct pager {
	const char *tmpl;
	const int64_t *pre;   /* leading parameters before the key */
	int npre;
	int limit;
	int (*row)(struct jo_meta *m, struct jo_sqls *st, void *ctx);
	void *ctx;
};

static int page_all(struct jo_meta *m, void *pp, struct jo_err *err)
{
	struct pager *p = pp;
	int64_t last = INT64_MIN;

	for (;;) {
		struct jo_sqls *st;
		int rc = jo_sql_prep(m, NULL, &st, err, p->tmpl), n = 0;

		if (rc)
			return rc;
		for (int i = 0; i < p->npre; i++)
			jo_sql_i64(m, st, i + 1, p->pre[i]);
		jo_sql_i64(m, st, p->npre + 1, last);
		jo_sql_i64(m, st, p->npre + 2, p->limit);
		while ((rc = jo_sql_step(m, st, err)) == 1) {
			n++;
			last = jo_sql_col_i64(m, st, 0);
			if ((rc = p->row(m, st, p->ctx)) != 0)
				break;
		}
		jo_sql_free(m, st);
		if (rc)
			return rc;
		if (n < p->limit)
			return 0;
	}
}

static int scan(struct jo_meta *m, struct pager *p, struct jo_err *err)
{
	return in_snapshot(m, page_all, p, err);
}

struct dirent_ctx {
	jo_meta_dirent_cb cb;
	void *payload;
};

static int dirent_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct dirent_ctx *d = ctx;
	size_t n;
	const uint8_t *name = jo_sql_col_blob(m, st, 1, &n);

	return d->cb((const char *)name, n, (uint64_t)jo_sql_col_i64(m, st, 2),
		     (uint8_t)jo_sql_col_i64(m, st, 3), d->payload);
}

static int s_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		     struct jo_err *err)
{
	struct dirent_ctx d = { cb, payload };
	int64_t pre[1] = { (int64_t)dir };
	struct pager p = { "SELECT id, name, inode, type FROM @edge WHERE parent=? AND id>? "
			   "ORDER BY id LIMIT ?", pre, 1, PAGE_ROWS, dirent_row, &d };

	return scan(m, &p, err);
}

static int check_recs(size_t n, uint64_t ino, uint32_t indx, struct jo_err *err)
{
	if (n % JO_SLICE_REC_LEN != 0)
		return jo_err_set(err, JO_EPROTO, "chunk %llu/%u: slices blob is %zu bytes, not a "
				  "multiple of 24", (unsigned long long)ino, indx, n);
	return 0;
}

static int s_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			size_t *len, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, NULL, &st, err, "SELECT slices FROM @chunk WHERE inode=? AND indx=?");

	if (rc != 0)
		return rc;
	jo_sql_i64(m, st, 1, (int64_t)ino);
	jo_sql_i64(m, st, 2, indx);
	rc = jo_sql_step(m, st, err);
	if (rc == 1) {
		size_t n;
		const uint8_t *b = jo_sql_col_blob(m, st, 0, &n);

		rc = check_recs(n, ino, indx, err);
		if (rc == 0 && n > 0) {
			*out = malloc(n);
			if (!*out) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			} else {
				memcpy(*out, b, n);
				*len = n;
			}
		}
	}
	jo_sql_free(m, st);
	return rc < 0 ? rc : 0;
}

static int list_below(struct jo_meta *m, uint64_t ino, int64_t nidx, uint32_t **out, size_t *n,
		      struct jo_err *err)
{
	struct jo_sqls *st;
	size_t cap = 0;
	int rc = jo_sql_prep(m, NULL, &st, err,
			     "SELECT indx FROM @chunk WHERE inode=? AND indx<? ORDER BY indx");

	if (rc != 0)
		return rc;
	jo_sql_i64(m, st, 1, (int64_t)ino);
	jo_sql_i64(m, st, 2, nidx);
	while ((rc = jo_sql_step(m, st, err)) == 1) {
		if (jo_grow_array(out, &cap, *n + 1, sizeof(**out))) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		(*out)[(*n)++] = (uint32_t)jo_sql_col_i64(m, st, 0);
	}
	jo_sql_free(m, st);
	if (rc != 0) {
		free(*out);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static int s_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			 struct jo_err *err)
{
	return list_below(m, ino, INT64_MAX, out, n, err);
}

static int s_list_chunks_below(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
			       size_t *n, struct jo_err *err)
{
	return list_below(m, ino, nidx, out, n, err);
}

struct cb_ctx {
	void *cb;
	void *payload;
	struct jo_err *err;
};

static int chunk_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;
	uint64_t ino = (uint64_t)jo_sql_col_i64(m, st, 1);
	uint32_t indx = (uint32_t)jo_sql_col_i64(m, st, 2);
	size_t n;
	const uint8_t *b = jo_sql_col_blob(m, st, 3, &n);
	int rc = check_recs(n, ino, indx, c->err);

	return rc ? rc : ((jo_meta_chunk_cb)c->cb)(ino, indx, b, n, c->payload);
}

static int s_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload,
			 struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT id, inode, indx, slices FROM @chunk WHERE id>? ORDER BY id "
			   "LIMIT ?", NULL, 0, CHUNK_PAGE_ROWS, chunk_row, &c };

	return scan(m, &p, err);
}

/* Parts of jfs_chunk by its primary key: even cuts of [0, MAX(id)]. */
static int s_chunk_cuts(struct jo_meta *m, size_t n, uint64_t *cuts, size_t *nparts,
			struct jo_err *err)
{
	int64_t row[1] = { 0 };
	bool found = false;
	int rc = jo_sql_run(m, NULL, "SELECT MAX(id) FROM @chunk", NULL, 0, NULL, 0, row, 1, &found,
			    NULL, err);

	if (rc)
		return rc;
	jo_meta_even_cuts(found && row[0] > 0 ? (uint64_t)row[0] + 1 : 1, 1, n, cuts, nparts);
	return 0;
}

static int s_scan_chunks_range(struct jo_meta *m, uint64_t from, uint64_t to,
			       jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	/* from 0 and to UINT64_MAX: no bound (the column is signed) */
	int64_t pre[2] = { from ? (int64_t)from : INT64_MIN, (int64_t)to };
	struct pager p = { to == UINT64_MAX
				   ? "SELECT id, inode, indx, slices FROM @chunk WHERE id>=? AND id>? "
				     "ORDER BY id LIMIT ?"
				   : "SELECT id, inode, indx, slices FROM @chunk WHERE id>=? AND id<? "
				     "AND id>? ORDER BY id LIMIT ?",
			   pre, to == UINT64_MAX ? 1 : 2, CHUNK_PAGE_ROWS, chunk_row, &c };

	if (from > INT64_MAX || (to != UINT64_MAX && to > INT64_MAX))
		return jo_err_set(err, JO_EINVAL, "chunk range past the primary key's values");
	return scan(m, &p, err);
}

static int inode_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;
	struct jo_attr a;

	row_attr(m, st, &a);
	return ((jo_meta_inode_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 0), &a, c->payload);
}

static int s_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload,
			 struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT " NODE_COLS " FROM @node WHERE inode>? ORDER BY inode LIMIT ?",
			   NULL, 0, PAGE_ROWS, inode_row, &c };

	return scan(m, &p, err);
}

static int s_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs,
			   bool *ex, struct jo_err *err)
{
	int64_t row[1] = { 0 };
	int rc = jo_sql_run(m, NULL, "SELECT refs FROM @chunk_ref WHERE chunkid=? AND size=?",
			    (const int64_t[]){ (int64_t)id, size }, 2, NULL, 0, row, 1, ex, NULL,
			    err);

	*refs = row[0];
	return rc;
}

static int ref_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;

	return ((jo_meta_ref_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 0),
				       (uint32_t)jo_sql_col_i64(m, st, 1), jo_sql_col_i64(m, st, 2),
				       c->payload);
}

static int s_scan_slice_refs(struct jo_meta *m, jo_meta_ref_cb cb, void *payload,
			     struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT chunkid, size, refs FROM @chunk_ref WHERE chunkid>? "
			   "ORDER BY chunkid LIMIT ?", NULL, 0, PAGE_ROWS, ref_row, &c };

	return scan(m, &p, err);
}

static int delfile_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;

	return ((jo_meta_delfile_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 0),
					   (uint64_t)jo_sql_col_i64(m, st, 1),
					   jo_sql_col_i64(m, st, 2), c->payload);
}

static int s_scan_delfiles(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload,
			   struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT inode, length, expire FROM @delfile WHERE inode>? "
			   "ORDER BY inode LIMIT ?", NULL, 0, PAGE_ROWS, delfile_row, &c };

	return scan(m, &p, err);
}

static int delslices_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;
	size_t n;
	const uint8_t *b = jo_sql_col_blob(m, st, 2, &n);
	int64_t id = jo_sql_col_i64(m, st, 0);

	if (n % JO_DELSLICE_REC_LEN != 0)
		return jo_err_set(c->err, JO_EPROTO, "delslices %lld: %zu bytes, not a multiple "
				  "of 12", (long long)id, n);
	return ((jo_meta_delslices_cb)c->cb)((uint64_t)id, jo_sql_col_i64(m, st, 1), b, n,
					     c->payload);
}

static int s_scan_delslices(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			    struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT chunkid, deleted, slices FROM @delslices WHERE chunkid>? "
			   "ORDER BY chunkid LIMIT ?", NULL, 0, PAGE_ROWS, delslices_row, &c };

	return scan(m, &p, err);
}

static int session_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;
	char *info = col_strdup(m, st, 2);
	int rc;

	if (!info)
		return jo_err_set(c->err, JO_ENOMEM, "out of memory");
	rc = ((jo_meta_session_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 0),
					 jo_sql_col_i64(m, st, 1), info, c->payload);
	free(info);
	return rc;
}

static int s_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			   struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT sid, expire, info FROM @session2 WHERE sid>? ORDER BY sid "
			   "LIMIT ?", NULL, 0, PAGE_ROWS, session_row, &c };

	return scan(m, &p, err);
}

static int sustained_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;

	return ((jo_meta_sustained_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 1),
					     (uint64_t)jo_sql_col_i64(m, st, 2), c->payload);
}

static int s_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			    struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT id, sid, inode FROM @sustained WHERE id>? ORDER BY id LIMIT ?",
			   NULL, 0, PAGE_ROWS, sustained_row, &c };

	return scan(m, &p, err);
}

static int detached_row(struct jo_meta *m, struct jo_sqls *st, void *ctx)
{
	struct cb_ctx *c = ctx;

	return ((jo_meta_detached_cb)c->cb)((uint64_t)jo_sql_col_i64(m, st, 0),
					    jo_sql_col_i64(m, st, 1), c->payload);
}

static int s_scan_detached(struct jo_meta *m, jo_meta_detached_cb cb, void *payload,
			   struct jo_err *err)
{
	struct cb_ctx c = { (void *)cb, payload, err };
	struct pager p = { "SELECT inode, added FROM @detached_node WHERE inode>? ORDER BY inode "
			   "LIMIT ?", NULL, 0, PAGE_ROWS, detached_row, &c };

	return scan(m, &p, err);
}

static int s_get_counter(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err)
{
	struct jo_sqls *st;
	int rc = jo_sql_prep(m, NULL, &st, err, "SELECT value FROM @counter WHERE name=?");

	if (rc != 0)
		return rc;
	jo_sql_text(m, st, 1, name);
	rc = jo_sql_step(m, st, err);
	if (rc == 1) {
		*out = jo_sql_col_i64(m, st, 0);
		rc = 0;
	} else if (rc == 0) {
		/* Initial values written by `juicefs format`. */
		if (strcmp(name, "nextInode") == 0)
			*out = 2;
		else if (strcmp(name, "nextChunk") == 0)
			*out = 1;
		else
			*out = 0;
	}
	jo_sql_free(m, st);
	return rc;
}

const struct jo_meta_ops jo_meta_sql_ops = {
	.family = "sql",
	.engine = s_engine,
	.caps = s_caps,
	.open = s_open,
	.close = s_close,
	.describe = s_describe,
	.snapshot_begin = s_snapshot_begin,
	.snapshot_end = s_snapshot_end,
	.get_setting = s_get_setting,
	.lookup = s_lookup,
	.getattr = s_getattr,
	.getattr_many = s_getattr_many,
	.readdir = s_readdir,
	.read_chunk = s_read_chunk,
	.list_chunks = s_list_chunks,
	.list_chunks_below = s_list_chunks_below,
	.scan_chunks = s_scan_chunks,
	.chunk_cuts = s_chunk_cuts,
	.scan_chunks_range = s_scan_chunks_range,
	.scan_inodes = s_scan_inodes,
	.get_slice_ref = s_get_slice_ref,
	.scan_slice_refs = s_scan_slice_refs,
	.scan_delfiles = s_scan_delfiles,
	.scan_delslices = s_scan_delslices,
	.scan_sessions = s_scan_sessions,
	.scan_sustained = s_scan_sustained,
	.scan_detached = s_scan_detached,
	.get_counter = s_get_counter,
	.mut = &jo_sql_mut_ops,
	.compact = &jo_sql_compact_ops,
};
