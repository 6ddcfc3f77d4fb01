/*
 * meta_url.c: META-URLs, spelled exactly as juicefs takes them (spec
 * juicefs-format.md §1 and juicefs-engines.md A.1), parsed without I/O.
 */
#include "common/meta/meta_internal.h"

#include "common/err.h"
#include "common/opt.h"
#include "common/pct.h"
#include "common/strfree.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_n(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void jo_meta_url_release(struct jo_meta_url *u)
{
	if (!u)
		return;
	jo_free_strs(&u->engine, &u->user, &u->password, &u->host, &u->dbname, &u->path,
		     &u->query, &u->table_prefix, &u->redacted, &u->hosts, &u->master_name,
		     &u->tls_ca, &u->tls_cert, &u->tls_key, &u->tls_server_name, &u->route_read);
	jo_free_secret(&u->sentinel_password);
	memset(u, 0, sizeof(*u));
}

static int sdup(char **dst, const char *s)
{
	*dst = s ? strdup(s) : NULL;
	return s && !*dst ? -1 : 0;
}

int jo_meta_url_copy(struct jo_meta_url *d, const struct jo_meta_url *s, struct jo_err *err)
{
	int bad = 0;

	*d = *s;
	bad |= sdup(&d->engine, s->engine);
	bad |= sdup(&d->user, s->user);
	bad |= sdup(&d->password, s->password);
	bad |= sdup(&d->host, s->host);
	bad |= sdup(&d->dbname, s->dbname);
	bad |= sdup(&d->path, s->path);
	bad |= sdup(&d->query, s->query);
	bad |= sdup(&d->table_prefix, s->table_prefix);
	bad |= sdup(&d->redacted, s->redacted);
	bad |= sdup(&d->hosts, s->hosts);
	bad |= sdup(&d->master_name, s->master_name);
	bad |= sdup(&d->tls_ca, s->tls_ca);
	bad |= sdup(&d->tls_cert, s->tls_cert);
	bad |= sdup(&d->tls_key, s->tls_key);
	bad |= sdup(&d->tls_server_name, s->tls_server_name);
	bad |= sdup(&d->route_read, s->route_read);
	bad |= sdup(&d->sentinel_password, s->sentinel_password);
	if (bad) {
		jo_meta_url_release(d);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* Find query parameter `key` in q (without '?'); returns its value span. */
static bool query_get(const char *q, const char *key, const char **val, size_t *vlen)
{
	size_t klen = strlen(key);

	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		if (n > klen && strncmp(q, key, klen) == 0 && q[klen] == '=') {
			*val = q + klen + 1;
			*vlen = n - klen - 1;
			return true;
		}
		q = amp ? amp + 1 : NULL;
	}
	return false;
}

/*
 * The SQL table prefix of a volume: "jfs_", or "jfs_X_" for table_prefix=X
 * (juicefs 1.3+). X is what juicefs itself accepts as part of a table name:
 * letters, digits and '_', at most 32 of them.
 */
static int set_table_prefix(struct jo_meta_url *u, const char *q, struct jo_err *err)
{
	const char *val;
	size_t vlen;

	if (q && query_get(q, "table_prefix", &val, &vlen) && vlen > 0) {
		if (vlen > 32)
			return jo_err_set(err, JO_EINVAL, "%s META-URL: table_prefix is longer than 32 "
					  "characters", u->engine);
		for (size_t i = 0; i < vlen; i++)
			if (!isalnum((unsigned char)val[i]) && val[i] != '_')
				return jo_err_set(err, JO_EINVAL, "%s META-URL: bad table_prefix "
						  "(letters, digits and _ only)", u->engine);
		u->table_prefix = malloc(vlen + 6);
		if (!u->table_prefix)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		snprintf(u->table_prefix, vlen + 6, "jfs_%.*s_", (int)vlen, val);
	} else if (!(u->table_prefix = strdup("jfs_"))) {
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

static int parse_sqlite(struct jo_meta_url *u, const char *rest, struct jo_err *err)
{
	const char *q = strchr(rest, '?');
	size_t plen = q ? (size_t)(q - rest) : strlen(rest);

	if (plen == 0)
		return jo_err_set(err, JO_EINVAL, "sqlite3 META-URL has no database path");
	u->path = jo_pct_decode(rest, plen, 0);
	if (!u->path)
		return jo_err_set(err, JO_EINVAL, "sqlite3 META-URL: bad percent escape in path");
	return set_table_prefix(u, q ? q + 1 : NULL, err);
}

/* Keys juicefs takes out of a SQL META-URL's query before the driver sees it. */
static bool juicefs_key(const char *k, size_t n)
{
	static const char *const keys[] = { "table_prefix", "max_open_conns", "max_idle_conns",
					    "max_idle_time", "max_life_time" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strlen(keys[i]) == n && !strncmp(keys[i], k, n))
			return true;
	return false;
}

/* u->query := the query q without juicefs's own keys. */
static int set_driver_query(struct jo_meta_url *u, const char *q, struct jo_err *err)
{
	size_t o = 0;

	u->query = malloc(q ? strlen(q) + 1 : 1);
	if (!u->query)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', n);
		size_t kl = eq ? (size_t)(eq - q) : n;

		if (n && !juicefs_key(q, kl)) {
			if (o)
				u->query[o++] = '&';
			memcpy(u->query + o, q, n);
			o += n;
		}
		q = amp ? amp + 1 : NULL;
	}
	u->query[o] = '\0';
	return 0;
}

/* The span of userinfo "user[:pass]" before the last '@' of [rest, end). */
static int split_userinfo(struct jo_meta_url *u, const char *rest, const char *at, bool mysql,
			  const char **pw_start, size_t *pw_len, struct jo_err *err)
{
	/* go-sql-driver: the password runs from the first ':' to the last '@' */
	const char *colon = memchr(rest, ':', (size_t)(at - rest));
	size_t ulen = colon ? (size_t)(colon - rest) : (size_t)(at - rest);

	(void)mysql;
	if (ulen > 0 && !(u->user = jo_pct_decode(rest, ulen, 0)))
		return jo_err_set(err, JO_EINVAL, "%s META-URL: bad percent escape in user", u->engine);
	if (colon && colon + 1 < at) {
		u->password = jo_pct_decode(colon + 1, (size_t)(at - colon - 1), 0);
		if (!u->password) {
			/* raw special characters are allowed in a MySQL password */
			if (!mysql)
				return jo_err_set(err, JO_EINVAL, "%s META-URL: bad percent escape "
						  "in password", u->engine);
			u->password = dup_n(colon + 1, (size_t)(at - colon - 1));
			if (!u->password)
				return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		*pw_start = colon + 1;
		*pw_len = (size_t)(at - colon - 1);
	}
	return 0;
}

/* "host[:port]" or "[v6][:port]" in [hp, hend) into u->host / u->port. */
static int split_hostport(struct jo_meta_url *u, const char *hp, const char *hend,
			  struct jo_err *err)
{
	const char *pe;

	if (*hp == '[') {
		const char *rb = memchr(hp, ']', (size_t)(hend - hp));

		if (!rb || rb == hp + 1 || (rb + 1 < hend && rb[1] != ':'))
			return jo_err_set(err, JO_EINVAL, "%s META-URL: bad IPv6 host", u->engine);
		u->host = dup_n(hp + 1, (size_t)(rb - hp - 1));
		pe = rb + 1;
	} else {
		pe = memchr(hp, ':', (size_t)(hend - hp));
		if (!pe)
			pe = hend;
		for (const char *p = hp; p < pe; p++)
			if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
				return jo_err_set(err, JO_EINVAL, "%s META-URL: bad host name",
						  u->engine);
		u->host = dup_n(hp, (size_t)(pe - hp));
	}
	if (!u->host)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (pe < hend) {
		uint64_t port;

		if (jo_parse_digits(pe + 1, (size_t)(hend - pe - 1), &port) != 0 || port == 0 ||
		    port > 65535)
			return jo_err_set(err, JO_EINVAL, "%s META-URL: bad port", u->engine);
		u->port = (int)port;
	}
	return 0;
}

/* The database name in [p, end): required, percent-decoded, no '/'. */
static int set_dbname(struct jo_meta_url *u, const char *p, const char *end, struct jo_err *err)
{
	if (p >= end)
		return jo_err_set(err, JO_EINVAL, "%s META-URL has no database name", u->engine);
	if (memchr(p, '/', (size_t)(end - p)))
		return jo_err_set(err, JO_EINVAL, "%s META-URL: bad database name", u->engine);
	u->dbname = jo_pct_decode(p, (size_t)(end - p), 0);
	if (!u->dbname)
		return jo_err_set(err, JO_EINVAL, "%s META-URL: bad percent escape in database name",
				  u->engine);
	return 0;
}

/*
 * postgres://[user[:pass]]@host[:port]/db[?params] and the socket form
 * postgres://user[:pass]@/db?host=/dir. As juicefs (pgx) takes it: the URL
 * must hold an '@'; search_path names one schema.
 */
static int parse_postgres(struct jo_meta_url *u, const char *rest, const char **pw_start,
			  size_t *pw_len, struct jo_err *err)
{
	const char *q = strchr(rest, '?');
	const char *end = q ? q : rest + strlen(rest);
	const char *at = NULL, *slash, *val;
	size_t vlen;
	int rc;

	for (const char *p = rest; p < end; p++)
		if (*p == '@')
			at = p;
	if (!at)
		return jo_err_set(err, JO_EINVAL, "postgres META-URL needs user@host: "
				  "postgres://user[:password]@host:5432/db");
	if ((rc = split_userinfo(u, rest, at, false, pw_start, pw_len, err)) != 0)
		return rc;
	slash = memchr(at + 1, '/', (size_t)(end - at - 1));
	if (!slash)
		return jo_err_set(err, JO_EINVAL, "postgres META-URL has no database name");
	if (slash > at + 1 && (rc = split_hostport(u, at + 1, slash, err)) != 0)
		return rc;
	if ((rc = set_dbname(u, slash + 1, end, err)) != 0)
		return rc;
	if (q && query_get(q + 1, "host", &val, &vlen) && vlen && val[0] == '/')
		u->unix_socket = true;
	if (q && query_get(q + 1, "search_path", &val, &vlen) && memchr(val, ',', vlen))
		return jo_err_set(err, JO_EINVAL, "postgres META-URL: search_path must name one "
				  "schema (juicefs refuses a list)");
	if (!u->host && !u->unix_socket)
		return jo_err_set(err, JO_EINVAL, "postgres META-URL has no host (use host:port, or "
				  "?host=/socket/dir for a Unix socket)");
	if ((rc = set_table_prefix(u, q ? q + 1 : NULL, err)) != 0)
		return rc;
	return set_driver_query(u, q ? q + 1 : NULL, err);
}

/*
 * mysql://user[:pass]@(host:3306)/db, @tcp(host:port)/db, @unix(/path)/db,
 * [?params]: a go-sql-driver DSN after the scheme, as juicefs takes it.
 */
static int parse_mysql(struct jo_meta_url *u, const char *rest, const char **pw_start,
		       size_t *pw_len, struct jo_err *err)
{
	const char *q, *end, *at = NULL, *slash, *addr;
	int rc;

	/* as go-sql-driver splits a DSN: the last '/' ends the address, the last
	 * '@' before it ends the user info */
	slash = strrchr(rest, '/');
	for (const char *p = rest; slash && p < slash; p++)
		if (*p == '@')
			at = p;
	if (!slash || !at)
		return jo_err_set(err, JO_EINVAL, "mysql META-URL must look like "
				  "mysql://user[:password]@(host:3306)/db");
	if ((rc = split_userinfo(u, rest, at, true, pw_start, pw_len, err)) != 0)
		return rc;
	addr = at + 1;
	if (addr < slash) {
		const char *lp = memchr(addr, '(', (size_t)(slash - addr));
		size_t pl = lp ? (size_t)(lp - addr) : 0;

		if (!lp || slash[-1] != ')' || !(pl == 0 || (pl == 3 && !strncmp(addr, "tcp", 3)) ||
						  (pl == 4 && !strncmp(addr, "unix", 4))))
			return jo_err_set(err, JO_EINVAL, "mysql META-URL: the address must be "
					  "(host:port), tcp(host:port) or unix(/path)");
		if (pl == 4) {
			u->unix_socket = true;
			if (slash - 1 == lp + 1 || lp[1] != '/')
				return jo_err_set(err, JO_EINVAL, "mysql META-URL: unix() needs an "
						  "absolute socket path");
			if (!(u->path = dup_n(lp + 1, (size_t)(slash - 1 - lp - 1))))
				return jo_err_set(err, JO_ENOMEM, "out of memory");
		} else if (slash - 1 > lp + 1 &&
			   (rc = split_hostport(u, lp + 1, slash - 1, err)) != 0) {
			return rc;
		}
	}
	q = strchr(slash, '?');
	end = q ? q : slash + strlen(slash);
	if ((rc = set_dbname(u, slash + 1, end, err)) != 0)
		return rc;
	/* no address: the driver's default, tcp 127.0.0.1:3306 */
	if (!u->host && !u->unix_socket && !(u->host = strdup("127.0.0.1")))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = set_table_prefix(u, q ? q + 1 : NULL, err)) != 0)
		return rc;
	return set_driver_query(u, q ? q + 1 : NULL, err);
}

/* One "host[:port]" / "[v6][:port]" of a redis URL's host list, checked and
 * written to *out as "host:port" ("[v6]:port"); port defport when absent. */
static int redis_addr(struct jo_meta_url *u, const char *hp, const char *hend, int defport,
		      char **out, struct jo_err *err)
{
	struct jo_meta_url t = { .engine = u->engine };
	char *s;
	size_t n;
	int rc;

	if (hend == hp)
		return jo_err_set(err, JO_EINVAL, "redis META-URL: an empty host in the host list");
	t.port = defport;
	rc = split_hostport(&t, hp, hend, err);
	if (rc == 0 && !*t.host)
		rc = jo_err_set(err, JO_EINVAL, "redis META-URL has no host");
	if (rc != 0) {
		free(t.host);
		return rc;
	}
	n = strlen(t.host) + 16;
	s = malloc(n);
	if (s)
		snprintf(s, n, strchr(t.host, ':') ? "[%s]:%d" : "%s:%d", t.host, t.port);
	free(t.host);
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	*out = s;
	return 0;
}

/* The port of "host:port" / "[v6]:port" (0 when none). */
static int addr_port(const char *a, const char *e)
{
	const char *rb = *a == '[' ? memchr(a, ']', (size_t)(e - a)) : NULL;
	const char *c = NULL;
	uint64_t port;

	for (const char *p = rb ? rb : a; p < e; p++)
		if (*p == ':')
			c = p;
	if (!c || jo_parse_digits(c + 1, (size_t)(e - c - 1), &port) != 0 || port == 0 ||
	    port > 65535)
		return 0;
	return (int)port;
}

/*
 * The host list of a Sentinel or Cluster URL into u->hosts (and the first
 * address into u->host/u->port, for messages). As juicefs's newRedisMeta: a
 * ',' before the first ':' makes "MASTER,sentinel,sentinel:port" (sentinels
 * without a port take the last one's, else 26379); otherwise every entry is a
 * cluster seed (default port 6379).
 */
static int redis_hosts(struct jo_meta_url *u, const char *hp, const char *hend, struct jo_err *err)
{
	const char *comma = memchr(hp, ',', (size_t)(hend - hp));
	const char *colon = memchr(hp, ':', (size_t)(hend - hp));
	bool sentinel = colon && comma < colon;
	const char *p = hp, *last = hp;
	size_t cap = (size_t)(hend - hp) * 2 + 64, o = 0;
	int defport = 6379;

	if (sentinel) {
		if (comma == hp)
			return jo_err_set(err, JO_EINVAL, "redis Sentinel META-URL has no master name "
					  "(MASTER,host1:26379,host2:26379)");
		u->master_name = jo_pct_decode(hp, (size_t)(comma - hp), 0);
		if (!u->master_name)
			return jo_err_set(err, JO_EINVAL, "redis META-URL: bad master name");
		p = comma + 1;
		for (const char *q = p; q < hend; q++)
			if (*q == ',')
				last = q + 1;
		if (last < p)
			last = p;
		defport = addr_port(last, hend);
		if (!defport)
			defport = 26379;
	}
	u->hosts = malloc(cap);
	if (!u->hosts)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	u->hosts[0] = '\0';
	while (p <= hend) {
		const char *e = memchr(p, ',', (size_t)(hend - p));
		char *a = NULL;
		int rc;

		if (!e)
			e = hend;
		if ((rc = redis_addr(u, p, e, defport, &a, err)) != 0)
			return rc;
		if (o + strlen(a) + 2 > cap) {
			free(a);
			return jo_err_set(err, JO_EINVAL, "redis META-URL: bad host list");
		}
		o += (size_t)snprintf(u->hosts + o, cap - o, "%s%s", o ? "," : "", a);
		if (!u->host) {
			struct jo_meta_url t = { .engine = u->engine };

			t.port = defport;
			if (split_hostport(&t, p, e, err) != 0) {
				free(a);
				free(t.host);
				return err ? err->code : JO_EINVAL;
			}
			u->host = t.host;
			u->port = t.port;
		}
		free(a);
		p = e + 1;
	}
	return 0;
}

/* The options juicefs's newRedisMeta takes from a redis URL's query: TLS
 * files and names, insecure-skip-verify, route-read (and go-redis's db).
 * The rest tune juicefs's connection pool and retries (read-timeout,
 * client-cache, ...): accepted and ignored. */
static int redis_query(struct jo_meta_url *u, const char *q, struct jo_err *err)
{
	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t n = amp ? (size_t)(amp - q) : strlen(q);
		const char *eq = memchr(q, '=', n);
		size_t kl = eq ? (size_t)(eq - q) : n;
		const char *v = eq ? eq + 1 : q + n;
		size_t vl = (size_t)(q + n - v);
		char **dst = NULL;
		bool known = false;

#define KEY(k) (kl == sizeof(k) - 1 && !strncmp(q, k, kl))
		if (KEY("tls-ca-cert-file"))
			dst = &u->tls_ca;
		else if (KEY("tls-cert-file"))
			dst = &u->tls_cert;
		else if (KEY("tls-key-file"))
			dst = &u->tls_key;
		else if (KEY("tls-server-name"))
			dst = &u->tls_server_name;
		else if (KEY("route-read"))
			dst = &u->route_read;
		else if (KEY("insecure-skip-verify"))
			u->tls_skip_verify = vl > 0, known = true;
		else if (KEY("db")) {
			uint64_t db;

			if (jo_parse_digits(v, vl, &db) != 0 || db > 100000)
				return jo_err_set(err, JO_EINVAL, "redis META-URL: bad database number");
			if (u->db == 0)
				u->db = (int)db;
			known = true;
		}
#undef KEY
		if (dst) {
			free(*dst);
			*dst = vl ? jo_pct_decode(v, vl, 0) : NULL;
			if (vl && !*dst)
				return jo_err_set(err, JO_EINVAL, "redis META-URL: bad percent escape in "
						  "option %.*s", (int)kl, q);
		}
		/* other options (connection-pool tuning) do not apply to jfsops: ignored */
		(void)known;
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

/* rest = everything after "redis://" / "rediss://". pw_start/pw_len: the
 * password span inside the original URL (for redaction). */
static int parse_redis(struct jo_meta_url *u, const char *rest, const char **pw_start,
		       size_t *pw_len, struct jo_err *err)
{
	const char *end = rest + strlen(rest);
	const char *q = strchr(rest, '?');
	const char *at, *hp, *hend, *slash;
	int rc;

	if (q)
		end = q;
	/* Userinfo ends at the last '@' before the query (passwords may hold '/'). */
	at = NULL;
	for (const char *p = rest; p < end; p++)
		if (*p == '@')
			at = p;
	hp = rest;
	if (at) {
		const char *colon = memchr(rest, ':', (size_t)(at - rest));
		size_t ulen = colon ? (size_t)(colon - rest) : (size_t)(at - rest);
		if (ulen > 0) {
			u->user = jo_pct_decode(rest, ulen, 0);
			if (!u->user)
				return jo_err_set(err, JO_EINVAL, "redis META-URL: bad percent escape in user");
		}
		if (colon) {
			u->password = jo_pct_decode(colon + 1, (size_t)(at - colon - 1), 0);
			if (!u->password)
				return jo_err_set(err, JO_EINVAL,
						  "redis META-URL: bad percent escape in password");
			*pw_start = colon + 1;
			*pw_len = (size_t)(at - colon - 1);
		}
		hp = at + 1;
	}
	slash = memchr(hp, '/', (size_t)(end - hp));
	hend = slash ? slash : end;
	if (hend == hp)
		return jo_err_set(err, JO_EINVAL, "redis META-URL has no host");
	u->port = 6379;
	if (memchr(hp, ',', (size_t)(hend - hp))) {
		if ((rc = redis_hosts(u, hp, hend, err)) != 0)
			return rc;
	} else if ((rc = split_hostport(u, hp, hend, err)) != 0) {
		return rc;
	} else if (!*u->host) {
		return jo_err_set(err, JO_EINVAL, "redis META-URL has no host");
	}
	u->db = 0;
	if (slash && slash + 1 < end) {
		uint64_t db;
		if (jo_parse_digits(slash + 1, (size_t)(end - slash - 1), &db) != 0 || db > 100000)
			return jo_err_set(err, JO_EINVAL, "redis META-URL: bad database number");
		u->db = (int)db;
	}
	if ((rc = redis_query(u, q ? q + 1 : NULL, err)) != 0)
		return rc;
	if (u->tls_key && !u->tls_cert)
		return jo_err_set(err, JO_EINVAL, "redis META-URL: tls-key-file needs tls-cert-file");
	return 0;
}

static int parse_unix(struct jo_meta_url *u, const char *rest, const char **pw_start,
		      size_t *pw_len, struct jo_err *err)
{
	const char *q = strchr(rest, '?');
	const char *end = q ? q : rest + strlen(rest);
	const char *at = NULL, *val;
	size_t vlen;

	for (const char *p = rest; p < end; p++)
		if (*p == '@')
			at = p;
	if (at) {
		const char *colon = memchr(rest, ':', (size_t)(at - rest));
		size_t ulen = colon ? (size_t)(colon - rest) : (size_t)(at - rest);
		if (ulen > 0 && !(u->user = jo_pct_decode(rest, ulen, 0)))
			return jo_err_set(err, JO_EINVAL, "unix META-URL: bad percent escape");
		if (colon) {
			u->password = jo_pct_decode(colon + 1, (size_t)(at - colon - 1), 0);
			if (!u->password)
				return jo_err_set(err, JO_EINVAL, "unix META-URL: bad percent escape");
			*pw_start = colon + 1;
			*pw_len = (size_t)(at - colon - 1);
		}
		rest = at + 1;
	}
	if (rest >= end || *rest != '/')
		return jo_err_set(err, JO_EINVAL, "unix META-URL needs an absolute socket path");
	u->path = dup_n(rest, (size_t)(end - rest));
	if (!u->path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	u->db = 0;
	if (q && query_get(q + 1, "db", &val, &vlen)) {
		uint64_t db;
		if (jo_parse_digits(val, vlen, &db) != 0 || db > 100000)
			return jo_err_set(err, JO_EINVAL, "unix META-URL: bad database number");
		u->db = (int)db;
	}
	return 0;
}

/*
 * etcd://[user[:pass]@]h1[:2379][,h2[:2379]...][/NAME][?cacert=&cert=&key=&
 * server-name=&insecure-skip-verify=1]. u->host := the endpoints, each with
 * its port ("h1:2379,h2:2379"; a host without a port gets 2379 on that host,
 * where juicefs 1.4 would dial the local machine); u->path := the URL path
 * (with its leading '/', or empty): the volume's keys are prefixed with it
 * and 0xFD; u->query := the query (the transport reads the TLS keys).
 */
static int parse_etcd(struct jo_meta_url *u, const char *rest, const char **pw_start,
		      size_t *pw_len, struct jo_err *err)
{
	const char *q = strchr(rest, '?');
	const char *end = q ? q : rest + strlen(rest);
	const char *at = NULL, *hp, *slash;
	size_t cap, o = 0;
	int rc;

	for (const char *p = rest; p < end; p++)
		if (*p == '@')
			at = p;
	if (at && (rc = split_userinfo(u, rest, at, false, pw_start, pw_len, err)) != 0)
		return rc;
	hp = at ? at + 1 : rest;
	slash = memchr(hp, '/', (size_t)(end - hp));
	if (!slash)
		slash = end;
	if (slash == hp)
		return jo_err_set(err, JO_EINVAL, "etcd META-URL has no host: etcd://host:2379/NAME");
	/* each host comes out at most as long as it came in, plus ",[]:65535" */
	cap = (size_t)(slash - hp) + 16;
	for (const char *p = hp; p < slash; p++)
		cap += *p == ',' ? 9 : 0;
	cap += 9;
	if (!(u->host = malloc(cap)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (const char *h = hp; h < slash;) {
		const char *comma = memchr(h, ',', (size_t)(slash - h));
		const char *he = comma ? comma : slash;
		struct jo_meta_url one = { .engine = u->engine };

		if (he == h)
			return jo_err_set(err, JO_EINVAL, "etcd META-URL: empty host in the host list");
		one.port = 2379;
		rc = split_hostport(&one, h, he, err);
		if (rc == 0) {
			bool v6 = strchr(one.host, ':') != NULL;
			int n = snprintf(u->host + o, cap - o, "%s%s%s%s:%d", o ? "," : "", v6 ? "[" : "",
					 one.host, v6 ? "]" : "", one.port);

			if (n < 0 || (size_t)n >= cap - o)
				rc = jo_err_set(err, JO_EINVAL, "etcd META-URL: bad host list");
			else
				o += (size_t)n;
		}
		free(one.host);
		if (rc)
			return rc;
		h = comma ? comma + 1 : slash;
	}
	u->path = dup_n(slash, (size_t)(end - slash));
	if (!u->path || !(u->query = strdup(q ? q + 1 : "")))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

int jo_meta_url_parse(struct jo_meta_url *u, const char *url, struct jo_err *err)
{
	const char *sep, *pw_start = NULL;
	size_t pw_len = 0, slen;
	int rc;

	memset(u, 0, sizeof(*u));
	if (!url || !(sep = strstr(url, "://")))
		return jo_err_set(err, JO_EINVAL, "META-URL must look like engine://...");
	slen = (size_t)(sep - url);
	if (slen == 5 && strncmp(url, "redis", 5) == 0) {
		u->engine = strdup("redis");
		rc = parse_redis(u, sep + 3, &pw_start, &pw_len, err);
	} else if (slen == 6 && strncmp(url, "rediss", 6) == 0) {
		u->engine = strdup("redis");
		u->tls = true;
		rc = parse_redis(u, sep + 3, &pw_start, &pw_len, err);
	} else if (slen == 4 && strncmp(url, "unix", 4) == 0) {
		u->engine = strdup("redis");
		u->unix_socket = true;
		rc = parse_unix(u, sep + 3, &pw_start, &pw_len, err);
	} else if (slen == 7 && strncmp(url, "sqlite3", 7) == 0) {
		u->engine = strdup("sqlite3");
		rc = u->engine ? parse_sqlite(u, sep + 3, err) : 0;
	} else if (slen == 8 && strncmp(url, "postgres", 8) == 0) {
		u->engine = strdup("postgres");
		rc = u->engine ? parse_postgres(u, sep + 3, &pw_start, &pw_len, err) : 0;
	} else if (slen == 5 && strncmp(url, "mysql", 5) == 0) {
		u->engine = strdup("mysql");
		rc = u->engine ? parse_mysql(u, sep + 3, &pw_start, &pw_len, err) : 0;
	} else if (slen == 4 && strncmp(url, "etcd", 4) == 0) {
		u->engine = strdup("etcd");
		rc = u->engine ? parse_etcd(u, sep + 3, &pw_start, &pw_len, err) : 0;
	} else if (slen == 0) {
		rc = jo_err_set(err, JO_EINVAL, "META-URL has no engine name");
	} else {
		rc = jo_err_set(err, JO_EUNSUPPORTED,
				"metadata engine \"%.*s\" is not supported (redis, sqlite3, postgres, mysql, etcd)",
				(int)(slen > 32 ? 32 : slen), url);
	}
	if (rc == 0 && !u->engine)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (rc == 0) {
		size_t n = strlen(url) + 8;
		u->redacted = malloc(n);
		if (!u->redacted) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		} else if (pw_start) {
			snprintf(u->redacted, n, "%.*s****%s", (int)(pw_start - url), url,
				 pw_start + pw_len);
		} else {
			memcpy(u->redacted, url, strlen(url) + 1);
		}
	}
	if (rc != 0)
		jo_meta_url_release(u);
	return rc;
}

/* The form of a redis META-URL: 's' Sentinel, 'c' several cluster seeds, 0 one host. */
static char redis_form(const char *url)
{
	const char *h = strstr(url, "://"), *at, *end, *comma, *colon;

	if (!h)
		return 0;
	h += 3;
	end = h + strcspn(h, "/?");
	for (at = h; (at = memchr(at, '@', (size_t)(end - at))); h = ++at)
		;
	comma = memchr(h, ',', (size_t)(end - h));
	colon = memchr(h, ':', (size_t)(end - h));
	if (!comma)
		return 0;
	return colon && comma < colon ? 's' : 'c';
}

const char *jo_meta_hint(const char *url, int code)
{
	const char *sep = url ? strstr(url, "://") : NULL;
	size_t n = sep ? (size_t)(sep - url) : 0;
	bool redis = (n == 5 && !strncmp(url, "redis", 5)) || (n == 6 && !strncmp(url, "rediss", 6)) ||
		     (n == 4 && !strncmp(url, "unix", 4));
	bool sqlite = n == 7 && !strncmp(url, "sqlite3", 7);
	bool pg = n == 8 && !strncmp(url, "postgres", 8);
	bool my = n == 5 && !strncmp(url, "mysql", 5);
	bool tls = n == 6 && !strncmp(url, "rediss", 6);
	char form = redis ? redis_form(url) : 0;
	bool etcd = n == 4 && !strncmp(url, "etcd", 4);

	switch (code) {
	case JO_EINVAL:
		if (pg)
			return "spell it as juicefs does: postgres://user[:password]@host:5432/db[?sslmode=disable] or postgres://user@/db?host=/run/postgresql";
		if (my)
			return "spell it as juicefs does: mysql://user[:password]@(host:3306)/db or mysql://user@unix(/run/mysqld/mysqld.sock)/db";
		if (redis)
			return "spell it as juicefs does: redis[s]://[user:pass@]host:6379/1, Sentinel redis://[user:pass@]MASTER,host1:26379,host2:26379/1, Cluster redis://host1:6379,host2:6379/1, TLS options ?tls-ca-cert-file=...&tls-cert-file=...&tls-key-file=...";
		if (etcd)
			return "spell it as juicefs does: etcd://[user:password@]host1:2379[,host2:2379]/NAME[?cacert=ca.pem&cert=client.pem&key=client.key]";
		return "spell the META-URL as juicefs does: redis://[user:pass@]host:6379/1, sqlite3:///abs/path.db, postgres://user@host:5432/db, mysql://user@(host:3306)/db";
	case JO_ECONNECT:
	case JO_ETIMEOUT:
		if (pg)
			return "is PostgreSQL running and listening there (listen_addresses, port)? does pg_hba.conf allow this host, and does sslmode match the server?";
		if (my)
			return "is MySQL/MariaDB running and listening there (bind-address, port, socket path)? does tls= match the server?";
		if (tls)
			return "TLS: tls-ca-cert-file must name the CA that signed the server's certificate (or the system CAs must trust it), tls-server-name a name the certificate holds; is the port Redis's tls-port?";
		if (form == 's')
			return "are the sentinels (the addresses after MASTER,) running and reachable, and do they name a master that is up?";
		if (form == 'c')
			return "are the cluster nodes reachable, and is the cluster up (CLUSTER INFO: cluster_state:ok)?";
		if (etcd)
			return "is etcd running and its client URL reachable from here (--listen-client-urls)? with TLS, do cacert/cert/key/server-name match the server's certificate?";
		return "is the server running and reachable from here? check host, port and firewall";
	case JO_EAUTH:
		if (form == 's')
			return "wrong password: the META-URL's (or REDIS_PASSWORD/META_PASSWORD) is the Redis servers', SENTINEL_PASSWORD the sentinels'";
		if (redis)
			return "wrong Redis user/password: put it in the META-URL or REDIS_PASSWORD/META_PASSWORD";
		if (etcd)
			return "etcd refused the user/password: put them in the META-URL (etcd://user:password@host:2379/NAME), and check the user's role grants the volume's key range";
		if (pg || my)
			return "the SQL server refused the user/password: put the password in the META-URL or in META_PASSWORD / META_PASSWORD_FILE, and check the user's grants (pg_hba.conf for PostgreSQL)";
		return "credentials were refused";
	case JO_ENOTJFS:
		if (pg || my)
			return "this database holds no JuiceFS tables (jfs_setting): was the volume formatted with `juicefs format` on this database, schema (search_path) and table_prefix?";
		if (etcd)
			return "no JuiceFS volume under that prefix: the URL path must be the one the volume was formatted with (etcd keeps its leading '/')";
		if (sqlite)
			return "this file holds no JuiceFS tables: was it formatted with `juicefs format`, and with this table_prefix?";
		return "this database holds no JuiceFS format record: was the volume formatted with `juicefs format` on this URL/db number?";
	case JO_EUNSUPPORTED:
		return "jfsops supports Redis (standalone, Sentinel, Cluster, TLS), SQLite, PostgreSQL, MySQL/MariaDB and etcd volumes with MetaVersion <= 1";
	case JO_EPROTO:
		return "the format record is corrupt (jfsops never guesses a value): compare it with what `juicefs status META-URL` shows";
	case JO_ENOTFOUND:
		if (form == 's')
			return "no sentinel monitors a master of that name: the name before the first ',' must be one the sentinels monitor (SENTINEL MASTERS lists them)";
		if (pg || my)
			return "the database does not exist on that server: check its name in the META-URL";
		return "the database file does not exist: check the path";
	}
	return NULL;
}
