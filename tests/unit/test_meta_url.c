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
	parse_code("redis://h1:6379,h2:6379/1", JO_EUNSUPPORTED);
	parse_code("redis://:pw@mymaster,s1,s2:26379/2", JO_EUNSUPPORTED);
	parse_code("mysql://u:p@(h:3306)/db", JO_EUNSUPPORTED);
	parse_code("tikv://h:2379", JO_EUNSUPPORTED);
	/* the message of a rejected URL never contains its password */
	assert_int_equal(jo_meta_url_parse(&u, "redis://:topsecret@a,b/1", &err), JO_EUNSUPPORTED);
	assert_null(strstr(err.msg, "topsecret"));
	assert_int_equal(jo_meta_url_parse(&u, "mysql://root:topsecret@h/db", &err), JO_EUNSUPPORTED);
	assert_null(strstr(err.msg, "topsecret"));
}

static void test_open_errors(void **state)
{
	struct jo_meta *m = (struct jo_meta *)1;
	struct jo_err err = { 0 };
	struct jo_meta_open_opts o = { .password = "override" };

	(void)state;
	assert_int_equal(jo_meta_open(&m, "bogus", &err), JO_EINVAL);
	assert_null(m);
	/* TLS needs a hiredis with SSL: refused before any connection attempt */
	assert_int_equal(jo_meta_open(&m, "rediss://:pw123@127.0.0.1:1/1", &err), JO_EUNSUPPORTED);
	assert_null(strstr(err.msg, "pw123"));
	assert_non_null(strstr(err.msg, "****"));
	assert_int_equal(jo_meta_open_with(&m, "rediss://127.0.0.1:1/1", &o, &err),
			 JO_EUNSUPPORTED);
	assert_null(strstr(err.msg, "override"));
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
		cmocka_unit_test(test_unix),
		cmocka_unit_test(test_sqlite),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_unsupported),
		cmocka_unit_test(test_open_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
