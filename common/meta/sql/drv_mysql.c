/*
 * sql/drv_mysql.c: the MySQL/MariaDB driver of the sql family, over MariaDB
 * Connector/C (which speaks to both servers).
 *
 * META-URL -> connection (juicefs-engines.md A.1): user, password, the
 * (host:port), tcp(host:port) or unix(/path) address and the database; of
 * go-sql-driver's DSN parameters, tls=true|skip-verify|preferred|false,
 * charset, timeout, readTimeout and writeTimeout are honoured, the others
 * (parseTime, loc, ...) change nothing here and are ignored.
 *
 * Like juicefs, every session runs at REPEATABLE READ (transaction_isolation,
 * or tx_isolation on servers that predate it). CLIENT_FOUND_ROWS makes an
 * UPDATE report the rows it matched, as SQLite and PostgreSQL do. Statements
 * go as text with their parameters written in as literals: integers in
 * decimal, blobs as X'hex', text escaped for the connection's charset (the
 * value never becomes SQL). Replies are read in full (every paged query has
 * a LIMIT) and each read and write waits at most the read/write timeouts.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/sql/internal.h"

#include "common/err.h"
#include "common/pct.h"

#include <ctype.h>
#include <errno.h>
#include <mysql.h>
#include <errmsg.h>
#include <mysqld_error.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARAMS 16

struct jo_sqlc {
	MYSQL *my;
	char label[160];
	unsigned last;     /* the last error number (0 when none) */
	unsigned rtmo, wtmo; /* read and write timeouts (s) */
};

enum ptype { P_NULL, P_INT, P_BLOB, P_TEXT };

struct jo_sqls {
	struct jo_sqlc *c;
	char *sql;         /* the template with '?' */
	int nparams;
	struct {
		enum ptype t;
		int64_t i;
		const void *p;
		size_t n;
	} par[MAX_PARAMS];
	MYSQL_RES *res;
	MYSQL_ROW row;
	unsigned long *lens;
	bool executed;
	int64_t changes;
};

static int classify(unsigned e)
{
	switch (e) {
	case CR_CONNECTION_ERROR:
	case CR_CONN_HOST_ERROR:
	case CR_UNKNOWN_HOST:
	case CR_SERVER_GONE_ERROR:
	case CR_SERVER_LOST:
	case CR_SERVER_LOST_EXTENDED:
	case CR_SSL_CONNECTION_ERROR:
		return JO_ECONNECT;
	case ER_ACCESS_DENIED_ERROR:
	case ER_DBACCESS_DENIED_ERROR:
		return JO_EAUTH;
	case ER_BAD_DB_ERROR:
		return JO_ENOTFOUND;
	case ER_NO_SUCH_TABLE:
		return JO_ENOTJFS;
	case ER_CRASHED_ON_USAGE:
	case ER_NOT_KEYFILE:
		return JO_EPROTO;
	}
	return JO_EIO;
}

/*
 * The error of the call that just failed; callers clear errno before it.
 * Connector/C ends a read (or write) that waited out its timeout as a lost
 * connection, CR_SERVER_LOST, with errno ETIMEDOUT from its poll: that is a
 * timeout, and says so.
 */
static int fail(struct jo_sqlc *c, struct jo_err *err, const char *what)
{
	int e = errno;

	c->last = mysql_errno(c->my);
	if (c->last == CR_SERVER_LOST && e == ETIMEDOUT)
		return jo_err_set(err, JO_ETIMEOUT, "%s: %s: timed out (readTimeout %u s, "
				  "writeTimeout %u s): %s", c->label, what, c->rtmo, c->wtmo,
				  mysql_error(c->my));
	return jo_err_set(err, classify(c->last), "%s: %s: %s", c->label, what, mysql_error(c->my));
}

/* ---------------------------------------------------------------- connect */

/* The value of query key k, percent-decoded into buf; false when absent. */
static bool param(const char *q, const char *k, char *buf, size_t cap)
{
	size_t kl = strlen(k);

	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q), j = 0;

		if (n > kl && !strncmp(q, k, kl) && q[kl] == '=') {
			for (size_t i = kl + 1; i < n && j + 1 < cap; i++) {
				if (q[i] == '%' && i + 2 < n && jo_hexval((unsigned char)q[i + 1]) >= 0 &&
				    jo_hexval((unsigned char)q[i + 2]) >= 0) {
					buf[j++] = (char)(jo_hexval((unsigned char)q[i + 1]) * 16 +
							  jo_hexval((unsigned char)q[i + 2]));
					i += 2;
				} else {
					buf[j++] = q[i];
				}
			}
			buf[j] = '\0';
			return true;
		}
		q = amp ? amp + 1 : NULL;
	}
	return false;
}

/* A go duration ("10s", "1m30s", "500ms", bare seconds) in whole seconds (>= 1). */
static unsigned seconds_of(const char *s)
{
	double total = 0;

	while (*s) {
		char *end;
		double v = strtod(s, &end);

		if (end == s)
			break;
		s = end;
		if (!strncmp(s, "ms", 2)) {
			total += v / 1000;
			s += 2;
		} else if (*s == 'h') {
			total += v * 3600;
			s++;
		} else if (*s == 'm') {
			total += v * 60;
			s++;
		} else {
			total += v;
			if (*s == 's')
				s++;
		}
	}
	return total < 1 ? 1 : (unsigned)total;
}

static int d_connect(struct jo_sqlc **out, const struct jo_meta_url *u, struct jo_err *err)
{
	struct jo_sqlc *c = calloc(1, sizeof(*c));
	unsigned ctmo = 10, rtmo = 30, wtmo = 30;
	char buf[256];
	int rc;

	*out = NULL;
	if (!c)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (u->unix_socket)
		snprintf(c->label, sizeof(c->label), "mysql unix(%s)/%s", u->path, u->dbname);
	else
		snprintf(c->label, sizeof(c->label), "mysql %s:%d/%s", u->host,
			 u->port ? u->port : 3306, u->dbname);
	if (!(c->my = mysql_init(NULL))) {
		free(c);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (param(u->query, "timeout", buf, sizeof(buf)))
		ctmo = seconds_of(buf);
	if (param(u->query, "readTimeout", buf, sizeof(buf)))
		rtmo = seconds_of(buf);
	if (param(u->query, "writeTimeout", buf, sizeof(buf)))
		wtmo = seconds_of(buf);
	c->rtmo = rtmo;
	c->wtmo = wtmo;
	mysql_options(c->my, MYSQL_OPT_CONNECT_TIMEOUT, &ctmo);
	mysql_options(c->my, MYSQL_OPT_READ_TIMEOUT, &rtmo);
	mysql_options(c->my, MYSQL_OPT_WRITE_TIMEOUT, &wtmo);
	if (param(u->query, "charset", buf, sizeof(buf)) && *buf) {
		buf[strcspn(buf, ",")] = '\0'; /* go-sql-driver takes a list: the first one */
		mysql_options(c->my, MYSQL_SET_CHARSET_NAME, buf);
	}
	if (param(u->query, "tls", buf, sizeof(buf))) {
		my_bool yes = 1, no = 0;

		if (!strcmp(buf, "true") || !strcmp(buf, "skip-verify")) {
			mysql_options(c->my, MYSQL_OPT_SSL_ENFORCE, &yes);
			mysql_options(c->my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT,
				      !strcmp(buf, "true") ? &yes : &no);
		} else if (!strcmp(buf, "preferred")) {
			mysql_ssl_set(c->my, NULL, NULL, NULL, NULL, NULL);
			mysql_options(c->my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &no);
		} else if (strcmp(buf, "false") != 0) {
			mysql_close(c->my);
			free(c);
			return jo_err_set(err, JO_EINVAL, "mysql META-URL: tls=%s: only true, false, "
					  "skip-verify and preferred are known (a named TLS config "
					  "exists only in Go programs)", buf);
		}
	}
	if (!mysql_real_connect(c->my, u->unix_socket ? NULL : u->host, u->user ? u->user : "",
				u->password, u->dbname, u->unix_socket ? 0 : (unsigned)(u->port ? u->port : 3306),
				u->unix_socket ? u->path : NULL, CLIENT_FOUND_ROWS)) {
		c->last = mysql_errno(c->my);
		rc = jo_err_set(err, classify(c->last), "cannot connect to %s: %s", c->label,
				mysql_error(c->my));
		mysql_close(c->my);
		free(c);
		return rc;
	}
	/* as juicefs v1.4: transaction_isolation, else the old name */
	if (mysql_query(c->my, "SET SESSION transaction_isolation='REPEATABLE-READ'") &&
	    (mysql_errno(c->my) != ER_UNKNOWN_SYSTEM_VARIABLE ||
	     mysql_query(c->my, "SET SESSION tx_isolation='REPEATABLE-READ'"))) {
		rc = fail(c, err, "set isolation level");
		mysql_close(c->my);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void d_disconnect(struct jo_sqlc *c)
{
	if (!c)
		return;
	mysql_close(c->my);
	free(c);
}

static int d_version(struct jo_sqlc *c, char **out, struct jo_err *err)
{
	const char *v = mysql_get_server_info(c->my);
	char buf[96];
	size_t n = strcspn(v ? v : "", "-");

	snprintf(buf, sizeof(buf), "%s %.*s", v && strstr(v, "MariaDB") ? "MariaDB" : "MySQL",
		 (int)n, v ? v : "");
	*out = strdup(buf);
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

/* ---------------------------------------------------------------- statements */

static int d_prepare(struct jo_sqlc *c, const char *sql, struct jo_sqls **out, struct jo_err *err)
{
	struct jo_sqls *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->sql = strdup(sql))) {
		free(s);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (const char *p = sql; *p; p++)
		s->nparams += *p == '?';
	if (s->nparams > MAX_PARAMS) {
		free(s->sql);
		free(s);
		return jo_err_set(err, JO_EINVAL, "sql statement has too many parameters");
	}
	s->c = c;
	*out = s;
	return 0;
}

static void d_bind_i64(struct jo_sqls *s, int i, int64_t v)
{
	if (i >= 1 && i <= s->nparams) {
		s->par[i - 1].t = P_INT;
		s->par[i - 1].i = v;
	}
}

static void d_bind_blob(struct jo_sqls *s, int i, const void *p, size_t n)
{
	if (i >= 1 && i <= s->nparams) {
		s->par[i - 1].t = P_BLOB;
		s->par[i - 1].p = p;
		s->par[i - 1].n = n;
	}
}

static void d_bind_text(struct jo_sqls *s, int i, const char *p)
{
	if (i >= 1 && i <= s->nparams) {
		s->par[i - 1].t = P_TEXT;
		s->par[i - 1].p = p;
		s->par[i - 1].n = strlen(p);
	}
}

/* The statement with its parameters written in (malloc'd). */
static char *render(struct jo_sqls *s, unsigned long *len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t cap = strlen(s->sql) + 1, o = 0;
	int k = 0;
	char *q;

	for (int i = 0; i < s->nparams; i++)
		cap += s->par[i].t == P_INT ? 24 : 2 * s->par[i].n + 8;
	if (!(q = malloc(cap)))
		return NULL;
	for (const char *p = s->sql; *p; p++) {
		if (*p != '?') {
			q[o++] = *p;
			continue;
		}
		switch (s->par[k].t) {
		case P_NULL:
			memcpy(q + o, "NULL", 4);
			o += 4;
			break;
		case P_INT:
			o += (size_t)snprintf(q + o, cap - o, "%lld", (long long)s->par[k].i);
			break;
		case P_BLOB:
			q[o++] = 'X';
			q[o++] = '\'';
			for (size_t j = 0; j < s->par[k].n; j++) {
				uint8_t b = ((const uint8_t *)s->par[k].p)[j];

				q[o++] = hex[b >> 4];
				q[o++] = hex[b & 15];
			}
			q[o++] = '\'';
			break;
		case P_TEXT:
			q[o++] = '\'';
			o += mysql_real_escape_string(s->c->my, q + o, s->par[k].p, (unsigned long)s->par[k].n);
			q[o++] = '\'';
			break;
		}
		k++;
	}
	q[o] = '\0';
	*len = (unsigned long)o;
	return q;
}

static int d_step(struct jo_sqls *s, struct jo_err *err)
{
	struct jo_sqlc *c = s->c;

	c->last = 0;
	if (!s->executed) {
		unsigned long len;
		char *q = render(s, &len);
		int rc;

		if (!q)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		errno = 0;
		rc = mysql_real_query(c->my, q, len);
		if (rc)
			rc = fail(c, err, "query");
		free(q);
		if (rc)
			return rc;
		errno = 0;
		s->res = mysql_store_result(c->my);
		/* a NULL result is no result set (an UPDATE) or a failed read; a
		 * read cut by a lost connection has also reset the field count
		 * (Connector/C's end_server), so only the error number tells */
		if (!s->res && (mysql_errno(c->my) || mysql_field_count(c->my) != 0))
			return fail(c, err, "read reply");
		s->changes = s->res ? 0 : (int64_t)mysql_affected_rows(c->my);
		s->executed = true;
	}
	if (!s->res)
		return 0;
	s->row = mysql_fetch_row(s->res);
	if (!s->row)
		return mysql_errno(c->my) ? fail(c, err, "read row") : 0;
	s->lens = mysql_fetch_lengths(s->res);
	return 1;
}

static int64_t d_col_i64(struct jo_sqls *s, int i)
{
	if (!s->row || !s->row[i])
		return 0;
	return strtoll(s->row[i], NULL, 10);
}

static const uint8_t *d_col_blob(struct jo_sqls *s, int i, size_t *n)
{
	*n = 0;
	if (!s->row || !s->row[i])
		return (const uint8_t *)"";
	/* the client library NUL-terminates each field of a stored row */
	*n = s->lens[i];
	return (const uint8_t *)s->row[i];
}

static int64_t d_changes(struct jo_sqls *s)
{
	return s->changes;
}

static int64_t d_insert_id(struct jo_sqls *s)
{
	return (int64_t)mysql_insert_id(s->c->my);
}

static void d_reset(struct jo_sqls *s)
{
	if (s->res)
		mysql_free_result(s->res);
	s->res = NULL;
	s->row = NULL;
	s->executed = false;
}

static void d_finalize(struct jo_sqls *s)
{
	if (!s)
		return;
	d_reset(s);
	free(s->sql);
	free(s);
}

static int d_exec(struct jo_sqlc *c, const char *sql, struct jo_err *err)
{
	MYSQL_RES *r;

	c->last = 0;
	errno = 0;
	if (mysql_query(c->my, sql))
		return fail(c, err, sql);
	errno = 0;
	r = mysql_store_result(c->my);
	if (r)
		mysql_free_result(r);
	else if (mysql_errno(c->my))
		return fail(c, err, sql);
	return 0;
}

static bool d_retryable(struct jo_sqlc *c)
{
	/* deadlock, lock wait timeout, record changed (MariaDB snapshot
	 * isolation), too many connections */
	return c->last == ER_LOCK_DEADLOCK || c->last == ER_LOCK_WAIT_TIMEOUT ||
	       c->last == ER_CHECKREAD || c->last == ER_CON_COUNT_ERROR;
}

static const char *const task_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #task (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
	"kind VARCHAR(32) NOT NULL, items MEDIUMTEXT NOT NULL, owner VARBINARY(128) NOT NULL "
	"DEFAULT '', expire BIGINT NOT NULL DEFAULT 0, attempts BIGINT NOT NULL DEFAULT 0, "
	"created BIGINT NOT NULL DEFAULT 0, INDEX (expire)) ENGINE=InnoDB",
	"CREATE TABLE IF NOT EXISTS #item (item VARBINARY(255) NOT NULL PRIMARY KEY, "
	"task BIGINT NOT NULL, INDEX (task)) ENGINE=InnoDB",
	NULL,
};

static const char *const rec_ddl[] = {
	"CREATE TABLE IF NOT EXISTS #rec (k VARBINARY(255) NOT NULL PRIMARY KEY, "
	"v MEDIUMBLOB NOT NULL) ENGINE=InnoDB",
	NULL,
};

static const struct jo_sql_dialect dialect = {
	.name = "mysql",
	.label = "mysql",
	.begin_rw = "BEGIN",
	.begin_snapshot = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
	.for_update = " FOR UPDATE",
	.insert_item = "INSERT IGNORE INTO #item (item, task) VALUES (?, ?)",
	.returning_id = NULL,
	.task_ddl = task_ddl,
	.rec_ddl = rec_ddl,
	.insert_rec = "INSERT IGNORE INTO #rec (k, v) VALUES (?, ?)",
	.max_blob = 65535,
};

const struct jo_sql_driver jo_sqldrv_mysql = JO_SQL_DRIVER_TABLE(&dialect);
