/*
 * sql/drv_pg.c: the PostgreSQL driver of the sql family, over libpq.
 *
 * META-URL -> connection (juicefs-engines.md A.1): user, password, host,
 * port and database from the URL; the query's libpq keywords (sslmode,
 * sslrootcert, sslcert, sslkey, sslcrl, connect_timeout, application_name,
 * host, port, ...) pass through as pgx passes them; search_path=S and any
 * other key become server run-time parameters ("-c key=value"), as pgx
 * sends them. The default sslmode is prefer, as with pgx.
 *
 * Parameters are sent typed (int8 binary, bytea binary, text as text) and
 * results are read in binary (integers big-endian by column type). Every
 * query waits at most JO_PG_TIMEOUT_S for its reply: a server or a network
 * that stalls makes the call fail with JO_ETIMEOUT (and the connection is
 * then dropped), never hang. Transactions run at the server's default READ
 * COMMITTED, as juicefs's; snapshots are REPEATABLE READ, READ ONLY.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

#include "common/err.h"

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JO_PG_TIMEOUT_S 60
#define MAX_PARAMS 16

/* type OIDs (pg_type.h, stable since forever) */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23

struct jo_sqlc {
	PGconn *pg;
	char label[160];   /* "postgres host:port/db" for messages */
	char state[6];     /* SQLSTATE of the last error ("" when none) */
	bool broken;       /* a reply timed out: the link is out of step */
};

struct jo_sqls {
	struct jo_sqlc *c;
	char *sql;
	int nparams;
	const char *values[MAX_PARAMS];
	int lengths[MAX_PARAMS], formats[MAX_PARAMS];
	Oid types[MAX_PARAMS];
	uint8_t ints[MAX_PARAMS][8];
	PGresult *res;
	int row, nrows;
	bool executed;
	int64_t changes;
};

/* ---------------------------------------------------------------- errors */

static int classify(struct jo_sqlc *c, const char *state)
{
	if (!state || !*state)
		return PQstatus(c->pg) == CONNECTION_BAD ? JO_ECONNECT : JO_EIO;
	if (!strncmp(state, "08", 2) || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
	    !strcmp(state, "57P03"))
		return JO_ECONNECT;
	if (!strcmp(state, "28P01") || !strcmp(state, "28000"))
		return JO_EAUTH;
	if (!strcmp(state, "3D000"))
		return JO_ENOTFOUND;
	if (!strcmp(state, "42P01"))
		return JO_ENOTJFS;
	if (!strcmp(state, "XX001") || !strcmp(state, "XX002"))
		return JO_EPROTO;
	return JO_EIO;
}

/* One line from libpq's (possibly multi-line) message. */
static void one_line(char *dst, size_t cap, const char *msg)
{
	size_t n = strcspn(msg ? msg : "", "\n");

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, msg ? msg : "", n);
	dst[n] = '\0';
}

static int res_fail(struct jo_sqlc *c, PGresult *r, struct jo_err *err, const char *what)
{
	const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	char line[300];

	snprintf(c->state, sizeof(c->state), "%s", st ? st : "");
	one_line(line, sizeof(line), r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
	if (!*line)
		one_line(line, sizeof(line), PQerrorMessage(c->pg));
	return jo_err_set(err, classify(c, c->state), "%s: %s: %s", c->label, what, line);
}

/*
 * Wait for the reply of the query just sent, at most JO_PG_TIMEOUT_S.
 * Returns the last result (the caller clears it), NULL with err set.
 */
static PGresult *wait_result(struct jo_sqlc *c, struct jo_err *err, const char *what)
{
	time_t deadline = time(NULL) + JO_PG_TIMEOUT_S;
	PGresult *last = NULL, *r;

	for (;;) {
		while (PQisBusy(c->pg)) {
			struct pollfd p = { .fd = PQsocket(c->pg), .events = POLLIN };
			int left = (int)(deadline - time(NULL)), n;

			if (left <= 0) {
				c->broken = true;
				PQclear(last);
				jo_err_set(err, JO_ETIMEOUT, "%s: %s: no reply within %d s", c->label,
					   what, JO_PG_TIMEOUT_S);
				return NULL;
			}
			n = poll(&p, 1, left * 1000);
			if (n < 0 && errno != EINTR) {
				PQclear(last);
				jo_err_set(err, JO_ECONNECT, "%s: %s: %s", c->label, what, strerror(errno));
				return NULL;
			}
			if (n > 0 && !PQconsumeInput(c->pg)) {
				char line[300];

				PQclear(last);
				one_line(line, sizeof(line), PQerrorMessage(c->pg));
				c->state[0] = '\0';
				jo_err_set(err, JO_ECONNECT, "%s: %s: %s", c->label, what, line);
				return NULL;
			}
		}
		r = PQgetResult(c->pg);
		if (!r)
			break;
		PQclear(last);
		last = r;
	}
	if (!last) {
		char line[300];

		one_line(line, sizeof(line), PQerrorMessage(c->pg));
		jo_err_set(err, JO_ECONNECT, "%s: %s: %s", c->label, what, *line ? line : "no reply");
	}
	return last;
}

/* ---------------------------------------------------------------- connect */

static int hexv(int ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 :
	       ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
}

/* Percent-decode [s, s+n) into a new string (invalid escapes stay as they are). */
static char *decode(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	size_t j = 0;

	if (!p)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && hexv((unsigned char)s[i + 1]) >= 0 &&
		    hexv((unsigned char)s[i + 2]) >= 0) {
			p[j++] = (char)(hexv((unsigned char)s[i + 1]) * 16 + hexv((unsigned char)s[i + 2]));
			i += 2;
		} else {
			p[j++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	p[j] = '\0';
	return p;
}

static bool libpq_keyword(const char *k)
{
	static const char *const keys[] = {
		"host", "hostaddr", "port", "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl",
		"sslpassword", "sslcompression", "sslsni", "connect_timeout", "application_name",
		"target_session_attrs", "keepalives", "keepalives_idle", "keepalives_interval",
		"keepalives_count", "tcp_user_timeout", "channel_binding", "gssencmode", "krbsrvname",
		"requirepeer", "passfile", "service", "options",
	};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(k, keys[i]))
			return true;
	return false;
}

#define MAX_KW 40

struct kw {
	const char *k[MAX_KW + 1];
	const char *v[MAX_KW + 1];
	char *own[MAX_KW * 2];
	int n, nown;
	char options[1024];
	char port[16];
};

static void kw_set(struct kw *w, const char *k, const char *v)
{
	for (int i = 0; i < w->n; i++)
		if (!strcmp(w->k[i], k)) {
			w->v[i] = v;
			return;
		}
	if (w->n < MAX_KW) {
		w->k[w->n] = k;
		w->v[w->n] = v;
		w->n++;
	}
}

static int build_kw(struct kw *w, const struct jo_meta_url *u, struct jo_err *err)
{
	const char *q = u->query;
	size_t o = 0;

	memset(w, 0, sizeof(*w));
	if (u->host)
		kw_set(w, "host", u->host);
	if (u->port) {
		snprintf(w->port, sizeof(w->port), "%d", u->port);
		kw_set(w, "port", w->port);
	}
	kw_set(w, "dbname", u->dbname);
	if (u->user)
		kw_set(w, "user", u->user);
	if (u->password)
		kw_set(w, "password", u->password);
	kw_set(w, "sslmode", "prefer");
	kw_set(w, "connect_timeout", "10");
	kw_set(w, "application_name", "jfsops");
	while (q && *q) {
		const char *amp = strchr(q, '&'), *eq;
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		char *k, *v;

		eq = memchr(q, '=', n);
		if (n && eq && w->nown + 2 <= MAX_KW * 2) {
			k = decode(q, (size_t)(eq - q));
			v = decode(eq + 1, (size_t)(q + n - eq - 1));
			if (!k || !v) {
				free(k);
				free(v);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
			w->own[w->nown++] = k;
			w->own[w->nown++] = v;
			if (libpq_keyword(k)) {
				kw_set(w, k, v);
			} else {
				/* a run-time parameter, as pgx sends unknown keys */
				int l = snprintf(w->options + o, sizeof(w->options) - o, "%s-c %s=%s",
						 o ? " " : "", k, v);

				if (l < 0 || (size_t)l >= sizeof(w->options) - o)
					return jo_err_set(err, JO_EINVAL, "postgres META-URL: too many "
							  "parameters");
				for (char *p = v; *p; p++)
					if (isspace((unsigned char)*p) || *p == '\\')
						return jo_err_set(err, JO_EINVAL, "postgres META-URL: "
								  "parameter %s holds a space", k);
				o += (size_t)l;
			}
		}
		q = amp ? amp + 1 : NULL;
	}
	if (o)
		kw_set(w, "options", w->options);
	w->k[w->n] = NULL;
	w->v[w->n] = NULL;
	return 0;
}

static void kw_release(struct kw *w)
{
	for (int i = 0; i < w->nown; i++) {
		if (w->own[i])
			memset(w->own[i], 0, strlen(w->own[i]));
		free(w->own[i]);
	}
	w->nown = 0;
}

/* NOTICEs ("relation ... already exists, skipping") are not ours to print:
 * common/ never writes to stderr. */
static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static int d_connect(struct jo_sqlc **out, const struct jo_meta_url *u, struct jo_err *err)
{
	struct jo_sqlc *c = calloc(1, sizeof(*c));
	struct kw w;
	int rc;

	*out = NULL;
	if (!c)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = build_kw(&w, u, err)) != 0) {
		kw_release(&w);
		free(c);
		return rc;
	}
	{
		const char *host = "localhost", *port = NULL;

		for (int i = 0; i < w.n; i++) {
			if (!strcmp(w.k[i], "host"))
				host = w.v[i];
			else if (!strcmp(w.k[i], "port"))
				port = w.v[i];
		}
		snprintf(c->label, sizeof(c->label), "postgres %s%s%s/%s", host, port ? ":" : "",
			 port ? port : "", u->dbname);
	}
	c->pg = PQconnectdbParams(w.k, w.v, 0);
	kw_release(&w);
	if (!c->pg) {
		free(c);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (PQstatus(c->pg) != CONNECTION_OK) {
		const char *msg = PQerrorMessage(c->pg);
		char line[300];
		int code = JO_ECONNECT;

		one_line(line, sizeof(line), msg);
		/* libpq gives no SQLSTATE for a refused login: read its words */
		if (strstr(msg, "password authentication failed") || strstr(msg, "no password supplied") ||
		    strstr(msg, "authentication failed") || PQconnectionNeedsPassword(c->pg))
			code = JO_EAUTH;
		else if (strstr(msg, "database \"") && strstr(msg, "does not exist"))
			code = JO_ENOTFOUND;
		else if (strstr(msg, "invalid ") && strstr(msg, "value"))
			code = JO_EINVAL;
		rc = jo_err_set(err, code, "cannot connect to %s: %s", c->label, line);
		PQfinish(c->pg);
		free(c);
		return rc;
	}
	PQsetNoticeProcessor(c->pg, quiet_notice, NULL);
	*out = c;
	return 0;
}

static void d_disconnect(struct jo_sqlc *c)
{
	if (!c)
		return;
	PQfinish(c->pg);
	free(c);
}

static int d_version(struct jo_sqlc *c, char **out, struct jo_err *err)
{
	int v = PQserverVersion(c->pg);
	char buf[64];

	if (v >= 100000)
		snprintf(buf, sizeof(buf), "PostgreSQL %d.%d", v / 10000, v % 10000);
	else
		snprintf(buf, sizeof(buf), "PostgreSQL %d.%d.%d", v / 10000, v / 100 % 100, v % 100);
	*out = strdup(buf);
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

/* ---------------------------------------------------------------- statements */

static int d_prepare(struct jo_sqlc *c, const char *sql, struct jo_sqls **out, struct jo_err *err)
{
	struct jo_sqls *s = calloc(1, sizeof(*s));
	size_t o = 0;
	int n = 0;

	*out = NULL;
	if (!s || !(s->sql = malloc(strlen(sql) * 3 + 1))) {
		free(s);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (const char *p = sql; *p; p++) {
		if (*p == '?') {
			if (n == MAX_PARAMS) {
				free(s->sql);
				free(s);
				return jo_err_set(err, JO_EINVAL, "sql statement has too many parameters");
			}
			o += (size_t)sprintf(s->sql + o, "$%d", ++n);
		} else {
			s->sql[o++] = *p;
		}
	}
	s->sql[o] = '\0';
	s->c = c;
	s->nparams = n;
	s->row = -1;
	for (int i = 0; i < n; i++) {
		s->values[i] = NULL;    /* an unbound parameter is NULL */
		s->formats[i] = 0;
	}
	*out = s;
	return 0;
}

static void d_bind_i64(struct jo_sqls *s, int i, int64_t v)
{
	if (i < 1 || i > s->nparams)
		return;
	jo_put_be64(s->ints[i - 1], (uint64_t)v);
	s->values[i - 1] = (const char *)s->ints[i - 1];
	s->lengths[i - 1] = 8;
	s->formats[i - 1] = 1;
	s->types[i - 1] = OID_INT8;
}

static void d_bind_blob(struct jo_sqls *s, int i, const void *p, size_t n)
{
	if (i < 1 || i > s->nparams)
		return;
	s->values[i - 1] = n ? p : "";
	s->lengths[i - 1] = (int)n;
	s->formats[i - 1] = 1;
	s->types[i - 1] = OID_BYTEA;
}

static void d_bind_text(struct jo_sqls *s, int i, const char *p)
{
	if (i < 1 || i > s->nparams)
		return;
	s->values[i - 1] = p;
	s->lengths[i - 1] = 0;
	s->formats[i - 1] = 0;
	s->types[i - 1] = 0;  /* typed by its context */
}

static int d_step(struct jo_sqls *s, struct jo_err *err)
{
	struct jo_sqlc *c = s->c;

	c->state[0] = '\0';
	if (!s->executed) {
		PGresult *r;
		ExecStatusType es;

		if (c->broken)
			return jo_err_set(err, JO_ECONNECT, "%s: the connection timed out earlier",
					  c->label);
		if (!PQsendQueryParams(c->pg, s->sql, s->nparams, s->types, s->values, s->lengths,
				       s->formats, 1))
			return res_fail(c, NULL, err, "send query");
		r = wait_result(c, err, "query");
		if (!r)
			return err ? err->code : JO_ECONNECT;
		es = PQresultStatus(r);
		if (es != PGRES_TUPLES_OK && es != PGRES_COMMAND_OK) {
			int rc = res_fail(c, r, err, "query");

			PQclear(r);
			return rc;
		}
		s->res = r;
		s->executed = true;
		s->nrows = PQntuples(r);
		s->row = -1;
		s->changes = strtoll(PQcmdTuples(r), NULL, 10);
	}
	if (s->row + 1 < s->nrows) {
		s->row++;
		return 1;
	}
	return 0;
}

static int64_t d_col_i64(struct jo_sqls *s, int i)
{
	const uint8_t *p;
	int len;

	if (!s->res || s->row < 0 || s->row >= s->nrows || PQgetisnull(s->res, s->row, i))
		return 0;
	p = (const uint8_t *)PQgetvalue(s->res, s->row, i);
	len = PQgetlength(s->res, s->row, i);
	switch (PQftype(s->res, i)) {
	case OID_INT8:
		return len == 8 ? (int64_t)jo_be64(p) : 0;
	case OID_INT4:
		return len == 4 ? (int64_t)(int32_t)jo_be32(p) : 0;
	case OID_INT2:
		return len == 2 ? (int64_t)(int16_t)(uint16_t)((p[0] << 8) | p[1]) : 0;
	case OID_BOOL:
		return len == 1 ? p[0] != 0 : 0;
	}
	/* text-like columns holding digits */
	return strtoll((const char *)p, NULL, 10);
}

static const uint8_t *d_col_blob(struct jo_sqls *s, int i, size_t *n)
{
	*n = 0;
	if (!s->res || s->row < 0 || s->row >= s->nrows || PQgetisnull(s->res, s->row, i))
		return (const uint8_t *)"";
	/* libpq NUL-terminates every value, binary ones too */
	*n = (size_t)PQgetlength(s->res, s->row, i);
	return (const uint8_t *)PQgetvalue(s->res, s->row, i);
}

static int64_t d_changes(struct jo_sqls *s)
{
	return s->changes;
}

static int64_t d_insert_id(struct jo_sqls *s)
{
	(void)s; /* PostgreSQL returns new ids with RETURNING (dialect.returning_id) */
	return 0;
}

static void d_reset(struct jo_sqls *s)
{
	PQclear(s->res);
	s->res = NULL;
	s->executed = false;
	s->row = -1;
	s->nrows = 0;
}

static void d_finalize(struct jo_sqls *s)
{
	if (!s)
		return;
	PQclear(s->res);
	free(s->sql);
	free(s);
}

static int d_exec(struct jo_sqlc *c, const char *sql, struct jo_err *err)
{
	PGresult *r;
	ExecStatusType es;
	int rc = 0;

	c->state[0] = '\0';
	if (c->broken)
		return jo_err_set(err, JO_ECONNECT, "%s: the connection timed out earlier", c->label);
	if (!PQsendQuery(c->pg, sql))
		return res_fail(c, NULL, err, sql);
	if (!(r = wait_result(c, err, sql)))
		return err ? err->code : JO_ECONNECT;
	es = PQresultStatus(r);
	if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK)
		rc = res_fail(c, r, err, sql);
	PQclear(r);
	return rc;
}

static bool d_retryable(struct jo_sqlc *c)
{
	/* serialization failure, deadlock, lock not available, an aborted
	 * transaction (after one of those), too many connections */
	return !strcmp(c->state, "40001") || !strcmp(c->state, "40P01") ||
	       !strcmp(c->state, "55P03") || !strcmp(c->state, "25P02") ||
	       !strcmp(c->state, "53300");
}

static const char *const task_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #task (id BIGSERIAL PRIMARY KEY, kind TEXT NOT NULL, "
	"items TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', expire BIGINT NOT NULL DEFAULT 0, "
	"attempts BIGINT NOT NULL DEFAULT 0, created BIGINT NOT NULL DEFAULT 0)",
	"CREATE INDEX IF NOT EXISTS #task_expire ON #task(expire)",
	"CREATE TABLE IF NOT EXISTS #item (item TEXT PRIMARY KEY, task BIGINT NOT NULL)",
	"CREATE INDEX IF NOT EXISTS #item_task ON #item(task)",
	NULL,
};

static const char *const rec_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #rec (k TEXT COLLATE \"C\" PRIMARY KEY, v TEXT NOT NULL)",
	NULL,
};

static const struct jo_sql_dialect dialect = {
	.name = "postgres",
	.label = "postgres",
	.begin_rw = "BEGIN",
	.begin_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
	.for_update = " FOR UPDATE",
	.insert_item = "INSERT INTO #item (item, task) VALUES (?, ?) ON CONFLICT (item) DO NOTHING",
	.returning_id = " RETURNING id",
	.task_ddl = task_ddl,
	.rec_ddl = rec_ddl,
	.insert_rec = "INSERT INTO #rec (k, v) VALUES (?, ?) ON CONFLICT (k) DO NOTHING",
	.max_blob = 0,
};

const struct jo_sql_driver jo_sqldrv_pg = JO_SQL_DRIVER_TABLE(&dialect);
