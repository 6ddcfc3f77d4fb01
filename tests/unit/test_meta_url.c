/* test_meta_url: META-URL parsing and password redaction (no I/O). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"

static void parse_ok(const char *url, struct jo_meta_url *u)
{
	struct jo_err err = { 0 };
	int rc = jo_meta_url_parse(u, url, &err);

	if (rc != 0)
		fail_msg("%s: %s %s", url, jo_err_name(rc), err.msg);
}

static void parse_code(const char *url, int code)
{
	struct jo_meta_url u;
	struct jo_err err = { 0 };
	int rc = jo_meta_url_parse(&u, url, &err);

	if (rc != code)
		fail_msg("%s: got %s want %s (%s)", url, jo_err_name(rc), jo_err_name(code), err.msg);
	assert_int_equal(err.code, code);
	assert_true(strlen(err.msg) > 0);
	assert_null(u.engine); /* released on failure */
}

/* What a parsed URL must hold: every field is given as text (numbers and
 * booleans in decimal, "1"/"0"); NULL leaves the field unchecked and NONE
 * wants the field NULL. */
static const char none[] = "(must be NULL)";
#define NONE none

struct url_want {
	const char *url;
	const char *engine, *user, *password, *host, *port, *db, *dbname, *path, *query, *table_prefix;
	const char *redacted, *not_in_redacted; /* redacted must not contain the latter */
	const char *tls, *unix_socket, *hosts, *master_name, *route_read;
	const char *tls_ca, *tls_cert, *tls_key, *tls_server_name, *tls_skip_verify;
};

static void want_field(const char *url, const char *name, const char *got, const char *want)
{
	if (want == NULL)
		return;
	if (want == NONE ? got == NULL : got != NULL && strcmp(got, want) == 0)
		return;
	fail_msg("%s: %s is %s%s%s, want %s", url, name, got ? "\"" : "", got ? got : "NULL", got ? "\"" : "",
		 want == NONE ? "NULL" : want);
}

static void want_number(const char *url, const char *name, long got, const char *want)
{
	char text[32];

	snprintf(text, sizeof text, "%ld", got);
	want_field(url, name, text, want);
}

/* Parses each URL of w[0..n) and checks what it wants. */
static void check_urls(const struct url_want *w, size_t n)
{
#define WANT_STR(f) want_field(w->url, #f, u.f, w->f)
#define WANT_NUM(f) want_number(w->url, #f, (long)u.f, w->f)
	for (; n > 0; n--, w++) {
		struct jo_meta_url u;

		parse_ok(w->url, &u);
		WANT_STR(engine);
		WANT_STR(user);
		WANT_STR(password);
		WANT_STR(host);
		WANT_NUM(port);
		WANT_NUM(db);
		WANT_STR(dbname);
		WANT_STR(path);
		WANT_STR(query);
		WANT_STR(table_prefix);
		WANT_STR(redacted);
		if (w->not_in_redacted && strstr(u.redacted, w->not_in_redacted))
			fail_msg("%s: the redacted URL %s shows %s", w->url, u.redacted, w->not_in_redacted);
		WANT_NUM(tls);
		WANT_NUM(unix_socket);
		WANT_STR(hosts);
		WANT_STR(master_name);
		WANT_STR(route_read);
		WANT_STR(tls_ca);
		WANT_STR(tls_cert);
		WANT_STR(tls_key);
		WANT_STR(tls_server_name);
		WANT_NUM(tls_skip_verify);
		jo_meta_url_release(&u);
	}
#undef WANT_STR
#undef WANT_NUM
}
#define CHECK_URLS(table) check_urls(table, sizeof(table) / sizeof((table)[0]))

static void test_redis_defaults(void **state)
{
	static const struct url_want w[] = {
		{ .url = "redis://localhost", .engine = "redis", .host = "localhost", .port = "6379", .db = "0",
		  .password = NONE, .user = NONE, .tls = "0", .redacted = "redis://localhost" },
		{ .url = "redis://127.0.0.1:6401/3", .host = "127.0.0.1", .port = "6401", .db = "3" },
		{ .url = "redis://127.0.0.1/", .db = "0" },
	};

	(void)state;
	CHECK_URLS(w);
}

static void test_redis_auth_and_redaction(void **state)
{
	static const struct url_want w[] = {
		{ .url = "redis://:s3cret@10.0.0.1:6380/2", .user = NONE, .password = "s3cret", .host = "10.0.0.1",
		  .port = "6380", .db = "2", .redacted = "redis://:****@10.0.0.1:6380/2" },
		{ .url = "redis://alice:pa%40ss@h/1", .user = "alice", .password = "pa@ss",
		  .redacted = "redis://alice:****@h/1" },
		/* a raw '@' or '/' in the password: the last '@' ends the userinfo */
		{ .url = "redis://:p@ss/w0rd@h:7000/5", .password = "p@ss/w0rd", .host = "h", .port = "7000",
		  .db = "5", .not_in_redacted = "w0rd", .redacted = "redis://:****@h:7000/5" },
		{ .url = "redis://bob@h", .user = "bob", .password = NONE }, /* user, no password */
		{ .url = "rediss://:x@h:6390/0", .tls = "1", .redacted = "rediss://:****@h:6390/0" },
		{ .url = "redis://[::1]:6400/4", .host = "::1", .port = "6400", .db = "4" },
		{ .url = "redis://h:1/2?dial-timeout=3s", .db = "2" }, /* options are ignored */
	};

	(void)state;
	CHECK_URLS(w);
}

/* Sentinel, Cluster and TLS options, split as juicefs's newRedisMeta does. */
static void test_redis_ha(void **state)
{
	static const struct url_want w[] = {
		/* a ',' before the first ':' : MASTER,sentinel,...; sentinels
		 * without a port take the last one's */
		{ .url = "redis://:pw@mymaster,s1,10.0.0.2:26380/2", .master_name = "mymaster",
		  .hosts = "s1:26380,10.0.0.2:26380", .host = "s1", .db = "2", .password = "pw",
		  .redacted = "redis://:****@mymaster,s1,10.0.0.2:26380/2" },
		{ .url = "redis://m1,h1,[::1]:26400/0", .master_name = "m1", .hosts = "h1:26400,[::1]:26400" },
		{ .url = "rediss://u:p@mm,[::1]:26379/3?tls-ca-cert-file=/c/ca.pem", .tls = "1", .master_name = "mm",
		  .hosts = "[::1]:26379", .tls_ca = "/c/ca.pem" },
		/* a ':' first: cluster seeds (default port 6379) */
		{ .url = "redis://127.0.0.1:7000,127.0.0.1:7001,h3/1", .master_name = NONE,
		  .hosts = "127.0.0.1:7000,127.0.0.1:7001,h3:6379", .host = "127.0.0.1", .port = "7000", .db = "1" },
		/* no ':' at all: juicefs takes it as cluster seeds */
		{ .url = "redis://a,b/4", .master_name = NONE, .hosts = "a:6379,b:6379" },
		/* juicefs's TLS and routing options; the tuning ones are ignored */
		{ .url = "rediss://h:6390/1?tls-cert-file=/c/cl.crt&tls-key-file=/c/cl.key&"
			 "tls-ca-cert-file=%2Fc%2Fca.pem&tls-server-name=redis.local&insecure-skip-verify=true&"
			 "route-read=replica&read-timeout=10s&max_retries=3",
		  .tls_cert = "/c/cl.crt", .tls_key = "/c/cl.key", .tls_ca = "/c/ca.pem",
		  .tls_server_name = "redis.local", .tls_skip_verify = "1", .route_read = "replica", .hosts = NONE },
		/* juicefs: any non-empty value skips */
		{ .url = "rediss://h/1?insecure-skip-verify=", .tls_skip_verify = "0" },
	};

	(void)state;
	CHECK_URLS(w);
	parse_code("redis://,s1:26379/1", JO_EINVAL);       /* no master name */
	parse_code("redis://m,s1:26379,/1", JO_EINVAL);     /* an empty sentinel */
	parse_code("redis://m,s1:0/1", JO_EINVAL);
	parse_code("redis://h1:7000,h2:x/1", JO_EINVAL);
	parse_code("redis://h1:7000,h%2:7001/1", JO_EINVAL);
	parse_code("rediss://h/1?tls-key-file=/k", JO_EINVAL); /* a key without its certificate */
	parse_code("rediss://h/1?tls-ca-cert-file=%zz", JO_EINVAL);
	/* a NUL would cut the decoded C string short: another file, another password */
	parse_code("rediss://h/1?tls-ca-cert-file=/a%00b", JO_EINVAL);
	parse_code("redis://u:p%00q@h/1", JO_EINVAL);
	parse_code("sqlite3:///tmp/a%00b.db", JO_EINVAL);
	parse_code("postgres://u:p%00q@h:5432/db", JO_EINVAL);
}

static void test_unix(void **state)
{
	static const struct url_want w[] = {
		{ .url = "unix:///run/redis.sock?db=7", .engine = "redis", .unix_socket = "1",
		  .path = "/run/redis.sock", .db = "7" },
		{ .url = "unix://:pw@/run/r.sock", .password = "pw", .path = "/run/r.sock", .db = "0",
		  .redacted = "unix://:****@/run/r.sock" },
	};

	(void)state;
	CHECK_URLS(w);
}

static void test_sqlite(void **state)
{
	static const struct url_want w[] = {
		{ .url = "sqlite3:///abs/path/jfs.db", .engine = "sqlite3", .path = "/abs/path/jfs.db",
		  .table_prefix = "jfs_" },
		{ .url = "sqlite3://rel/my.db?cache=shared&table_prefix=vol1&_journal=WAL", .path = "rel/my.db",
		  .table_prefix = "jfs_vol1_", .redacted = "sqlite3://rel/my.db?cache=shared&table_prefix=vol1&_journal=WAL" },
	};

	(void)state;
	CHECK_URLS(w);
}

static void test_malformed(void **state)
{
	(void)state;
	parse_code("", JO_EINVAL);
	parse_code("localhost:6379", JO_EINVAL);
	parse_code("://x", JO_EINVAL);
	parse_code("redis://", JO_EINVAL);
	parse_code("redis://:pw@", JO_EINVAL);
	parse_code("redis://h:notaport/1", JO_EINVAL);
	parse_code("redis://h:0", JO_EINVAL);
	parse_code("redis://h:70000", JO_EINVAL);
	parse_code("redis://h:/1", JO_EINVAL);
	parse_code("redis://h/x1", JO_EINVAL);
	parse_code("redis://h/-1", JO_EINVAL);
	parse_code("redis://[::1/1", JO_EINVAL);
	parse_code("redis://h%zz/1", JO_EINVAL);
	parse_code("redis://:%4@h/1", JO_EINVAL);
	parse_code("sqlite3://", JO_EINVAL);
	parse_code("sqlite3://?table_prefix=x", JO_EINVAL);
	parse_code("sqlite3:///a.db?table_prefix=a;drop", JO_EINVAL);
	parse_code("unix://relative.sock", JO_EINVAL);
	parse_code("unix:///r.sock?db=x", JO_EINVAL);
}

static void test_unsupported(void **state)
{
	struct jo_meta_url u;
	struct jo_err err = { 0 };

	(void)state;
	parse_code("tikv://h:2379", JO_EUNSUPPORTED);
	parse_code("postgresql://u@h/db", JO_EUNSUPPORTED); /* juicefs has no such driver */
	/* the message of a rejected URL never contains its password */
	assert_int_equal(jo_meta_url_parse(&u, "redis://:topsecret@a,/1", &err), JO_EINVAL);
	assert_null(strstr(err.msg, "topsecret"));
	assert_int_equal(jo_meta_url_parse(&u, "badger://root:topsecret@h/db", &err), JO_EUNSUPPORTED);
	assert_null(strstr(err.msg, "topsecret"));
}

static void test_postgres(void **state)
{
	static const struct url_want w[] = {
		{ .url = "postgres://jfs:s%40cret@127.0.0.1:25432/jfs?sslmode=disable", .engine = "postgres",
		  .user = "jfs", .password = "s@cret", .host = "127.0.0.1", .port = "25432", .dbname = "jfs",
		  .query = "sslmode=disable", .table_prefix = "jfs_",
		  .redacted = "postgres://jfs:****@127.0.0.1:25432/jfs?sslmode=disable" },
		/* juicefs's own keys are taken out of what the driver sees */
		{ .url = "postgres://postgres@db.example:5432/meta?table_prefix=v2&max_open_conns=4&"
			 "search_path=vols&sslmode=require",
		  .password = NONE, .port = "5432", .table_prefix = "jfs_v2_", .query = "search_path=vols&sslmode=require" },
		/* the Unix-socket form: no host, ?host=/dir */
		{ .url = "postgres://jfs@/jfs?host=/run/postgresql&port=5433", .unix_socket = "1", .host = NONE,
		  .port = "0", .query = "host=/run/postgresql&port=5433" },
		{ .url = "postgres://u:p@[::1]:5432/d", .host = "::1" },
	};

	(void)state;
	CHECK_URLS(w);
	parse_code("postgres://127.0.0.1:5432/jfs", JO_EINVAL);    /* juicefs needs an '@' */
	parse_code("postgres://u@h:5432", JO_EINVAL);              /* no database */
	parse_code("postgres://u@h:5432/", JO_EINVAL);
	parse_code("postgres://u@/jfs", JO_EINVAL);                /* no host, no socket */
	parse_code("postgres://u@h:99999/jfs", JO_EINVAL);
	parse_code("postgres://u@h/jfs?search_path=a,b", JO_EINVAL);
	parse_code("postgres://u@h/jfs?table_prefix=a-b", JO_EINVAL);
}

static void test_etcd(void **state)
{
	static const struct url_want w[] = {
		{ .url = "etcd://127.0.0.1:23790/vol1", .engine = "etcd", .host = "127.0.0.1:23790", .path = "/vol1",
		  .query = "" },
		/* several endpoints; a host without a port gets 2379 on that host */
		{ .url = "etcd://root:s3cret@e1:2379,e2,[::1]:2380/a/b?cacert=/ca.pem&server-name=etcd", .user = "root",
		  .password = "s3cret", .host = "e1:2379,e2:2379,[::1]:2380", .path = "/a/b",
		  .query = "cacert=/ca.pem&server-name=etcd",
		  .redacted = "etcd://root:****@e1:2379,e2,[::1]:2380/a/b?cacert=/ca.pem&server-name=etcd" },
		/* no path: the prefix is 0xFD alone */
		{ .url = "etcd://h:2379", .path = "" },
		/* many one-letter hosts each get ":2379": the host list grows 3.5x (fuzzer) */
		{ .url = "etcd://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t/v",
		  .host = "a:2379,b:2379,c:2379,d:2379,e:2379,f:2379,g:2379,h:2379,"
			  "i:2379,j:2379,k:2379,l:2379,m:2379,n:2379,o:2379,p:2379,"
			  "q:2379,r:2379,s:2379,t:2379" },
	};

	(void)state;
	CHECK_URLS(w);
	parse_code("etcd:///vol", JO_EINVAL);
	parse_code("etcd://h1,,h2/vol", JO_EINVAL);
	parse_code("etcd://h:0/vol", JO_EINVAL);
	parse_code("etcd://h:x/vol", JO_EINVAL);
}

static void test_mysql(void **state)
{
	static const struct url_want w[] = {
		{ .url = "mysql://jfs:jfspass@(127.0.0.1:23306)/jfs", .engine = "mysql", .user = "jfs",
		  .password = "jfspass", .host = "127.0.0.1", .port = "23306", .dbname = "jfs", .unix_socket = "0",
		  .redacted = "mysql://jfs:****@(127.0.0.1:23306)/jfs" },
		{ .url = "mysql://root@tcp(db:3306)/meta?charset=utf8mb4&table_prefix=x1&tls=skip-verify", .host = "db",
		  .table_prefix = "jfs_x1_", .query = "charset=utf8mb4&tls=skip-verify" },
		{ .url = "mysql://jfs:pw@unix(/run/mysqld/mysqld.sock)/jfs", .unix_socket = "1",
		  .path = "/run/mysqld/mysqld.sock", .host = NONE },
		/* a raw special character in the password (go-sql-driver allows
		 * it): from the first ':' to the last '@' */
		{ .url = "mysql://jfs:p@ss:w%rd@(h:3306)/jfs", .password = "p@ss:w%rd",
		  .redacted = "mysql://jfs:****@(h:3306)/jfs" },
		/* an empty password takes $META_PASSWORD (juicefs's example) */
		{ .url = "mysql://jfs:@(h:3306)/jfs", .password = NONE },
		/* no address: the driver's default */
		{ .url = "mysql://jfs@/jfs", .host = "127.0.0.1" },
	};

	(void)state;
	CHECK_URLS(w);
	parse_code("mysql://(h:3306)/jfs", JO_EINVAL);          /* no user@ */
	parse_code("mysql://u@h:3306/jfs", JO_EINVAL);          /* address without (...) */
	parse_code("mysql://u@udp(h:3306)/jfs", JO_EINVAL);
	parse_code("mysql://u@(h:3306/jfs", JO_EINVAL);
	parse_code("mysql://u@(h:3306)/", JO_EINVAL);
	parse_code("mysql://u@unix(rel.sock)/jfs", JO_EINVAL);
}

static void test_open_errors(void **state)
{
	struct jo_meta *m = (struct jo_meta *)1;
	struct jo_err err = { 0 };
	struct jo_meta_open_opts o = { .password = "override" };

	(void)state;
	assert_int_equal(jo_meta_open(&m, "bogus", &err), JO_EINVAL);
	assert_null(m);
	/* TLS: nothing listens on port 1 either; no password in the message */
	assert_int_equal(jo_meta_open(&m, "rediss://:pw123@127.0.0.1:1/1", &err), JO_ECONNECT);
	assert_null(strstr(err.msg, "pw123"));
	assert_non_null(strstr(err.msg, "****"));
	assert_int_equal(jo_meta_open_with(&m, "rediss://127.0.0.1:1/1", &o, &err), JO_ECONNECT);
	assert_null(strstr(err.msg, "override"));
	/* an unreadable CA file is bad input, said before any connection */
	assert_int_equal(jo_meta_open(&m, "rediss://127.0.0.1:1/1?tls-ca-cert-file=/nonexistent/ca.pem",
				      &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "/nonexistent/ca.pem"));
	/* no sentinel answers: a connection error naming the master */
	assert_int_equal(jo_meta_open(&m, "redis://:pw123@mymaster,127.0.0.1:1/1", &err),
			 JO_ECONNECT);
	assert_non_null(strstr(err.msg, "mymaster"));
	assert_null(strstr(err.msg, "pw123"));
	assert_null(m);
	/* nothing listens on port 1 */
	assert_int_equal(jo_meta_open(&m, "redis://:pw123@127.0.0.1:1/1", &err), JO_ECONNECT);
	assert_null(strstr(err.msg, "pw123"));
	assert_null(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_defaults),
		cmocka_unit_test(test_redis_auth_and_redaction),
		cmocka_unit_test(test_redis_ha),
		cmocka_unit_test(test_unix),
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_unsupported),
		cmocka_unit_test(test_postgres),
		cmocka_unit_test(test_mysql),
		cmocka_unit_test(test_etcd),
		cmocka_unit_test(test_open_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
