/* test_meta_url: META-URL parsing and password redaction (no I/O). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

static void test_redis_defaults(void **state)
{
	struct jo_meta_url u;

	(void)state;
	parse_ok("redis://localhost", &u);
	assert_string_equal(u.engine, "redis");
	assert_string_equal(u.host, "localhost");
	assert_int_equal(u.port, 6379);
	assert_int_equal(u.db, 0);
	assert_null(u.password);
	assert_null(u.user);
	assert_false(u.tls);
	assert_string_equal(u.redacted, "redis://localhost");
	jo_meta_url_release(&u);

	parse_ok("redis://127.0.0.1:6401/3", &u);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 6401);
	assert_int_equal(u.db, 3);
	jo_meta_url_release(&u);

	parse_ok("redis://127.0.0.1/", &u);
	assert_int_equal(u.db, 0);
	jo_meta_url_release(&u);
}

static void test_redis_auth_and_redaction(void **state)
{
	struct jo_meta_url u;

	(void)state;
	parse_ok("redis://:s3cret@10.0.0.1:6380/2", &u);
	assert_null(u.user);
	assert_string_equal(u.password, "s3cret");
	assert_string_equal(u.host, "10.0.0.1");
	assert_int_equal(u.port, 6380);
	assert_int_equal(u.db, 2);
	assert_string_equal(u.redacted, "redis://:****@10.0.0.1:6380/2");
	jo_meta_url_release(&u);

	parse_ok("redis://alice:pa%40ss@h/1", &u);
	assert_string_equal(u.user, "alice");
	assert_string_equal(u.password, "pa@ss");
	assert_string_equal(u.redacted, "redis://alice:****@h/1");
	jo_meta_url_release(&u);

	/* a raw '@' or '/' in the password: the last '@' ends the userinfo */
	parse_ok("redis://:p@ss/w0rd@h:7000/5", &u);
	assert_string_equal(u.password, "p@ss/w0rd");
	assert_string_equal(u.host, "h");
	assert_int_equal(u.port, 7000);
	assert_int_equal(u.db, 5);
	assert_null(strstr(u.redacted, "w0rd"));
	assert_string_equal(u.redacted, "redis://:****@h:7000/5");
	jo_meta_url_release(&u);

	parse_ok("redis://bob@h", &u); /* user, no password */
	assert_string_equal(u.user, "bob");
	assert_null(u.password);
	jo_meta_url_release(&u);

	parse_ok("rediss://:x@h:6390/0", &u);
	assert_true(u.tls);
	assert_string_equal(u.redacted, "rediss://:****@h:6390/0");
	jo_meta_url_release(&u);

	parse_ok("redis://[::1]:6400/4", &u);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 6400);
	assert_int_equal(u.db, 4);
	jo_meta_url_release(&u);

	parse_ok("redis://h:1/2?dial-timeout=3s", &u); /* options are ignored */
	assert_int_equal(u.db, 2);
	jo_meta_url_release(&u);
}

/* Sentinel, Cluster and TLS options, split as juicefs's newRedisMeta does. */
static void test_redis_ha(void **state)
{
	struct jo_meta_url u;

	(void)state;
	/* a ',' before the first ':' : MASTER,sentinel,...; sentinels without a
	 * port take the last one's */
	parse_ok("redis://:pw@mymaster,s1,10.0.0.2:26380/2", &u);
	assert_string_equal(u.master_name, "mymaster");
	assert_string_equal(u.hosts, "s1:26380,10.0.0.2:26380");
	assert_string_equal(u.host, "s1");
	assert_int_equal(u.db, 2);
	assert_string_equal(u.password, "pw");
	assert_string_equal(u.redacted, "redis://:****@mymaster,s1,10.0.0.2:26380/2");
	jo_meta_url_release(&u);

	parse_ok("redis://m1,h1,[::1]:26400/0", &u);
	assert_string_equal(u.master_name, "m1");
	assert_string_equal(u.hosts, "h1:26400,[::1]:26400");
	jo_meta_url_release(&u);

	parse_ok("rediss://u:p@mm,[::1]:26379/3?tls-ca-cert-file=/c/ca.pem", &u);
	assert_true(u.tls);
	assert_string_equal(u.master_name, "mm");
	assert_string_equal(u.hosts, "[::1]:26379");
	assert_string_equal(u.tls_ca, "/c/ca.pem");
	jo_meta_url_release(&u);

	/* a ':' first: cluster seeds (default port 6379) */
	parse_ok("redis://127.0.0.1:7000,127.0.0.1:7001,h3/1", &u);
	assert_null(u.master_name);
	assert_string_equal(u.hosts, "127.0.0.1:7000,127.0.0.1:7001,h3:6379");
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 7000);
	assert_int_equal(u.db, 1);
	jo_meta_url_release(&u);

	parse_ok("redis://a,b/4", &u); /* no ':' at all: juicefs takes it as cluster seeds */
	assert_null(u.master_name);
	assert_string_equal(u.hosts, "a:6379,b:6379");
	jo_meta_url_release(&u);

	/* juicefs's TLS and routing options; the tuning ones are ignored */
	parse_ok("rediss://h:6390/1?tls-cert-file=/c/cl.crt&tls-key-file=/c/cl.key&"
		 "tls-ca-cert-file=%2Fc%2Fca.pem&tls-server-name=redis.local&insecure-skip-verify=true&"
		 "route-read=replica&read-timeout=10s&max_retries=3", &u);
	assert_string_equal(u.tls_cert, "/c/cl.crt");
	assert_string_equal(u.tls_key, "/c/cl.key");
	assert_string_equal(u.tls_ca, "/c/ca.pem");
	assert_string_equal(u.tls_server_name, "redis.local");
	assert_true(u.tls_skip_verify);
	assert_string_equal(u.route_read, "replica");
	assert_null(u.hosts);
	jo_meta_url_release(&u);

	parse_ok("rediss://h/1?insecure-skip-verify=", &u); /* juicefs: any non-empty value skips */
	assert_false(u.tls_skip_verify);
	jo_meta_url_release(&u);

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
	struct jo_meta_url u;

	(void)state;
	parse_ok("unix:///run/redis.sock?db=7", &u);
	assert_string_equal(u.engine, "redis");
	assert_true(u.unix_socket);
	assert_string_equal(u.path, "/run/redis.sock");
	assert_int_equal(u.db, 7);
	jo_meta_url_release(&u);

	parse_ok("unix://:pw@/run/r.sock", &u);
	assert_string_equal(u.password, "pw");
	assert_string_equal(u.path, "/run/r.sock");
	assert_int_equal(u.db, 0);
	assert_string_equal(u.redacted, "unix://:****@/run/r.sock");
	jo_meta_url_release(&u);
}

static void test_sqlite(void **state)
{
	struct jo_meta_url u;

	(void)state;
	parse_ok("sqlite3:///abs/path/jfs.db", &u);
	assert_string_equal(u.engine, "sqlite3");
	assert_string_equal(u.path, "/abs/path/jfs.db");
	assert_string_equal(u.table_prefix, "jfs_");
	jo_meta_url_release(&u);

	parse_ok("sqlite3://rel/my.db?cache=shared&table_prefix=vol1&_journal=WAL", &u);
	assert_string_equal(u.path, "rel/my.db");
	assert_string_equal(u.table_prefix, "jfs_vol1_");
	assert_string_equal(u.redacted, "sqlite3://rel/my.db?cache=shared&table_prefix=vol1&_journal=WAL");
	jo_meta_url_release(&u);
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
	struct jo_meta_url u;

	(void)state;
	parse_ok("postgres://jfs:s%40cret@127.0.0.1:25432/jfs?sslmode=disable", &u);
	assert_string_equal(u.engine, "postgres");
	assert_string_equal(u.user, "jfs");
	assert_string_equal(u.password, "s@cret");
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 25432);
	assert_string_equal(u.dbname, "jfs");
	assert_string_equal(u.query, "sslmode=disable");
	assert_string_equal(u.table_prefix, "jfs_");
	assert_string_equal(u.redacted, "postgres://jfs:****@127.0.0.1:25432/jfs?sslmode=disable");
	jo_meta_url_release(&u);

	/* juicefs's own keys are taken out of what the driver sees */
	parse_ok("postgres://postgres@db.example:5432/meta?table_prefix=v2&max_open_conns=4&"
		 "search_path=vols&sslmode=require", &u);
	assert_null(u.password);
	assert_int_equal(u.port, 5432);
	assert_string_equal(u.table_prefix, "jfs_v2_");
	assert_string_equal(u.query, "search_path=vols&sslmode=require");
	jo_meta_url_release(&u);

	/* the Unix-socket form: no host, ?host=/dir */
	parse_ok("postgres://jfs@/jfs?host=/run/postgresql&port=5433", &u);
	assert_true(u.unix_socket);
	assert_null(u.host);
	assert_int_equal(u.port, 0);
	assert_string_equal(u.query, "host=/run/postgresql&port=5433");
	jo_meta_url_release(&u);

	parse_ok("postgres://u:p@[::1]:5432/d", &u);
	assert_string_equal(u.host, "::1");
	jo_meta_url_release(&u);

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
	struct jo_meta_url u;

	(void)state;
	parse_ok("etcd://127.0.0.1:23790/vol1", &u);
	assert_string_equal(u.engine, "etcd");
	assert_string_equal(u.host, "127.0.0.1:23790");
	assert_string_equal(u.path, "/vol1");
	assert_string_equal(u.query, "");
	jo_meta_url_release(&u);

	/* several endpoints; a host without a port gets 2379 on that host */
	parse_ok("etcd://root:s3cret@e1:2379,e2,[::1]:2380/a/b?cacert=/ca.pem&server-name=etcd", &u);
	assert_string_equal(u.user, "root");
	assert_string_equal(u.password, "s3cret");
	assert_string_equal(u.host, "e1:2379,e2:2379,[::1]:2380");
	assert_string_equal(u.path, "/a/b");
	assert_string_equal(u.query, "cacert=/ca.pem&server-name=etcd");
	assert_string_equal(u.redacted, "etcd://root:****@e1:2379,e2,[::1]:2380/a/b?cacert=/ca.pem&server-name=etcd");
	jo_meta_url_release(&u);

	/* no path: the prefix is 0xFD alone */
	parse_ok("etcd://h:2379", &u);
	assert_string_equal(u.path, "");
	jo_meta_url_release(&u);

	/* many one-letter hosts each get ":2379": the host list grows 3.5x (fuzzer) */
	parse_ok("etcd://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t/v", &u);
	assert_string_equal(u.host, "a:2379,b:2379,c:2379,d:2379,e:2379,f:2379,g:2379,h:2379,"
				    "i:2379,j:2379,k:2379,l:2379,m:2379,n:2379,o:2379,p:2379,"
				    "q:2379,r:2379,s:2379,t:2379");
	jo_meta_url_release(&u);
	parse_code("etcd:///vol", JO_EINVAL);
	parse_code("etcd://h1,,h2/vol", JO_EINVAL);
	parse_code("etcd://h:0/vol", JO_EINVAL);
	parse_code("etcd://h:x/vol", JO_EINVAL);
}

static void test_mysql(void **state)
{
	struct jo_meta_url u;

	(void)state;
	parse_ok("mysql://jfs:jfspass@(127.0.0.1:23306)/jfs", &u);
	assert_string_equal(u.engine, "mysql");
	assert_string_equal(u.user, "jfs");
	assert_string_equal(u.password, "jfspass");
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 23306);
	assert_string_equal(u.dbname, "jfs");
	assert_false(u.unix_socket);
	assert_string_equal(u.redacted, "mysql://jfs:****@(127.0.0.1:23306)/jfs");
	jo_meta_url_release(&u);

	parse_ok("mysql://root@tcp(db:3306)/meta?charset=utf8mb4&table_prefix=x1&tls=skip-verify", &u);
	assert_string_equal(u.host, "db");
	assert_string_equal(u.table_prefix, "jfs_x1_");
	assert_string_equal(u.query, "charset=utf8mb4&tls=skip-verify");
	jo_meta_url_release(&u);

	parse_ok("mysql://jfs:pw@unix(/run/mysqld/mysqld.sock)/jfs", &u);
	assert_true(u.unix_socket);
	assert_string_equal(u.path, "/run/mysqld/mysqld.sock");
	assert_null(u.host);
	jo_meta_url_release(&u);

	/* a raw special character in the password (go-sql-driver allows it):
	 * from the first ':' to the last '@' */
	parse_ok("mysql://jfs:p@ss:w%rd@(h:3306)/jfs", &u);
	assert_string_equal(u.password, "p@ss:w%rd");
	assert_string_equal(u.redacted, "mysql://jfs:****@(h:3306)/jfs");
	jo_meta_url_release(&u);

	/* an empty password takes $META_PASSWORD (juicefs's example) */
	parse_ok("mysql://jfs:@(h:3306)/jfs", &u);
	assert_null(u.password);
	jo_meta_url_release(&u);

	/* no address: the driver's default */
	parse_ok("mysql://jfs@/jfs", &u);
	assert_string_equal(u.host, "127.0.0.1");
	jo_meta_url_release(&u);

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
