/*
 * test_config.c: the config file and its profiles (common/config.h):
 * parsing, errors with line numbers, the permission rule for secrets,
 * profile choice, precedence flags > env > file > defaults, credentials as
 * a group, masking, and the default path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/err.h"
#include "support/testutil.h"

static char g_dir[256];

static const char *write_cfg(const char *name, const char *text, mode_t mode)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/%s", g_dir, name);
	tu_write_text(path, text);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static const char good[] =
	"# comment\n"
	"; another\n"
	"[profile oss-sh]\n"
	"endpoint = https://oss-cn-shanghai.aliyuncs.com\n"
	"region=cn-shanghai\n"
	"access_key = \"LTAIEXAMPLE\"\n"
	"secret_key = s3cr3t-value-123\n"
	"path_style = yes\n"
	"\n"
	"[default]\n"
	"region = eu-west-1\n"
	"insecure = 1\n";

static void clear_env(void)
{
	static const char *vars[] = { "JFSOPS_ENDPOINT", "JFSOPS_BUCKET", "JFSOPS_REGION",
				      "JFSOPS_ACCESS_KEY", "JFSOPS_SECRET_KEY", "JFSOPS_SESSION_TOKEN",
				      "JFSOPS_PATH_STYLE", "JFSOPS_LIST_V1", "JFSOPS_INSECURE",
				      "JFSOPS_UNORDERED", "JFSOPS_PROFILE", "JFSOPS_CONFIG" };

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_parse_and_profiles(void **state)
{
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };
	const char *const *names;
	const char *p = write_cfg("good", good, 0600);

	(void)state;
	assert_int_equal(jo_cfg_load(&c, p, true, &err), 0);
	assert_true(jo_cfg_found(c));
	assert_int_equal(jo_cfg_profiles(c, &names), 2);
	assert_string_equal(names[0], "oss-sh");
	assert_string_equal(names[1], "default");
	assert_string_equal(jo_cfg_get(c, "oss-sh", JO_CFG_REGION), "cn-shanghai");
	assert_string_equal(jo_cfg_get(c, "oss-sh", JO_CFG_ACCESS_KEY), "LTAIEXAMPLE");
	assert_null(jo_cfg_get(c, "oss-sh", JO_CFG_BUCKET));
	assert_null(jo_cfg_get(c, "nope", JO_CFG_REGION));
	jo_cfg_free(c);
}

static void test_errors(void **state)
{
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_cfg_load(&c, write_cfg("unk", "[a]\nendpoint = x\ncolour = red\n", 0600), true, &err),
			 JO_EINVAL);
	assert_non_null(strstr(err.msg, "line 3"));
	assert_non_null(strstr(err.msg, "colour"));
	assert_null(c);
	assert_int_equal(jo_cfg_load(&c, write_cfg("nosec", "region = x\n", 0600), true, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "outside"));
	assert_int_equal(jo_cfg_load(&c, write_cfg("hdr", "[a\n", 0600), true, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "line 1"));
	assert_int_equal(jo_cfg_load(&c, write_cfg("noeq", "[a]\nregion\n", 0600), true, &err), JO_EINVAL);
	assert_int_equal(jo_cfg_load(&c, write_cfg("bool", "[a]\nlist_v1 = maybe\n", 0600), true, &err),
			 JO_EINVAL);
	/* missing file: empty config unless it must exist */
	assert_int_equal(jo_cfg_load(&c, "/nonexistent/jfsops/config", false, &err), 0);
	assert_false(jo_cfg_found(c));
	jo_cfg_free(c);
	assert_int_equal(jo_cfg_load(&c, "/nonexistent/jfsops/config", true, &err), JO_ENOTFOUND);
}

/* A NUL byte used to cut a line (and a value) short without a word. */
static void test_nul_and_memory_parse(void **state)
{
	static const char nul[] = "[a]\nsecret_key = abc\0def\nregion = r\n";
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };
	bool secret = false;
	const char *path;

	(void)state;
	assert_int_equal(jo_cfg_parse_mem(&c, "mem.conf", nul, sizeof(nul) - 1, &secret, &err), JO_EINVAL);
	assert_null(c);
	assert_non_null(strstr(err.msg, "mem.conf line 2: NUL byte"));
	assert_null(strstr(err.msg, "abc"));
	/* the same through a file */
	path = write_cfg("nul", "", 0600);
	tu_write(path, nul, sizeof(nul) - 1);
	assert_int_equal(jo_cfg_load(&c, path, true, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "line 2: NUL byte"));
	/* parse_mem is the file parser */
	assert_int_equal(jo_cfg_parse_mem(&c, "mem.conf", good, strlen(good), &secret, &err), 0);
	assert_true(secret);
	assert_string_equal(jo_cfg_get(c, "oss-sh", JO_CFG_ACCESS_KEY), "LTAIEXAMPLE");
	assert_string_equal(jo_cfg_get(c, "default", JO_CFG_REGION), "eu-west-1");
	jo_cfg_free(c);
	assert_int_equal(jo_cfg_parse_mem(&c, "empty", "", 0, &secret, &err), 0);
	assert_false(secret);
	jo_cfg_free(c);
}

static void test_permissions(void **state)
{
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };

	(void)state;
	/* a secret in a group/world-readable file is refused, with a chmod hint, no secret */
	assert_int_equal(jo_cfg_load(&c, write_cfg("loose", good, 0644), true, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "chmod 600"));
	assert_null(strstr(err.msg, "s3cr3t"));
	assert_int_equal(jo_cfg_load(&c, write_cfg("group", good, 0640), true, &err), JO_EINVAL);
	/* session tokens are secrets too */
	assert_int_equal(jo_cfg_load(&c, write_cfg("tok", "[a]\nsession_token = t\n", 0604), true, &err),
			 JO_EINVAL);
	/* no secret: any mode is fine; an empty secret is no secret */
	assert_int_equal(jo_cfg_load(&c, write_cfg("pub", "[a]\nendpoint = http://x\nsecret_key =\n", 0644),
				     true, &err), 0);
	jo_cfg_free(c);
}

static void test_pick_profile(void **state)
{
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };
	const char *p = NULL;

	(void)state;
	clear_env();
	assert_int_equal(jo_cfg_load(&c, write_cfg("good", good, 0600), true, &err), 0);
	assert_int_equal(jo_cfg_pick_profile(c, NULL, &p, &err), 0);
	assert_string_equal(p, "default");
	assert_int_equal(jo_cfg_pick_profile(c, "oss-sh", &p, &err), 0);
	assert_string_equal(p, "oss-sh");
	setenv("JFSOPS_PROFILE", "oss-sh", 1);
	assert_int_equal(jo_cfg_pick_profile(c, NULL, &p, &err), 0);
	assert_string_equal(p, "oss-sh");
	clear_env();
	assert_int_equal(jo_cfg_pick_profile(c, "missing", &p, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "missing"));
	jo_cfg_free(c);
	/* no [default]: no profile */
	assert_int_equal(jo_cfg_load(&c, write_cfg("one", "[x]\nregion = r\n", 0600), true, &err), 0);
	assert_int_equal(jo_cfg_pick_profile(c, NULL, &p, &err), 0);
	assert_null(p);
	jo_cfg_free(c);
}

static void test_precedence(void **state)
{
	struct jo_cfg *c = NULL;
	struct jo_err err = { 0 };
	struct jo_cfg_values fl = { 0 }, out = { 0 };

	(void)state;
	clear_env();
	assert_int_equal(jo_cfg_load(&c, write_cfg("good", good, 0600), true, &err), 0);
	/* file only, defaults for booleans */
	assert_int_equal(jo_cfg_resolve(c, "oss-sh", NULL, "JFSOPS", &out, &err), 0);
	assert_string_equal(out.v[JO_CFG_ENDPOINT], "https://oss-cn-shanghai.aliyuncs.com");
	assert_int_equal(out.src[JO_CFG_ENDPOINT], JO_CFG_FILE);
	assert_string_equal(out.v[JO_CFG_PATH_STYLE], "1");
	assert_string_equal(out.v[JO_CFG_LIST_V1], "0");
	assert_int_equal(out.src[JO_CFG_LIST_V1], JO_CFG_DEFAULT);
	assert_string_equal(out.v[JO_CFG_SECRET_KEY], "s3cr3t-value-123");
	assert_null(out.v[JO_CFG_BUCKET]);
	jo_cfg_values_release(&out);
	/* env beats file */
	setenv("JFSOPS_REGION", "us-west-2", 1);
	setenv("JFSOPS_LIST_V1", "true", 1);
	assert_int_equal(jo_cfg_resolve(c, "oss-sh", NULL, "JFSOPS", &out, &err), 0);
	assert_string_equal(out.v[JO_CFG_REGION], "us-west-2");
	assert_int_equal(out.src[JO_CFG_REGION], JO_CFG_ENV);
	assert_string_equal(out.v[JO_CFG_LIST_V1], "1");
	jo_cfg_values_release(&out);
	/* flags beat env */
	assert_int_equal(jo_cfg_values_set(&fl, JO_CFG_REGION, "ap-east-1", JO_CFG_FLAG), 0);
	assert_int_equal(jo_cfg_resolve(c, "oss-sh", &fl, "JFSOPS", &out, &err), 0);
	assert_string_equal(out.v[JO_CFG_REGION], "ap-east-1");
	assert_int_equal(out.src[JO_CFG_REGION], JO_CFG_FLAG);
	jo_cfg_values_release(&out);
	jo_cfg_values_release(&fl);
	/* credentials go as a group: an env key never pairs with the file's secret */
	setenv("JFSOPS_ACCESS_KEY", "ENVKEY", 1);
	assert_int_equal(jo_cfg_resolve(c, "oss-sh", NULL, "JFSOPS", &out, &err), 0);
	assert_string_equal(out.v[JO_CFG_ACCESS_KEY], "ENVKEY");
	assert_null(out.v[JO_CFG_SECRET_KEY]);
	jo_cfg_values_release(&out);
	/* a bad boolean in the environment is an error naming its source */
	setenv("JFSOPS_INSECURE", "perhaps", 1);
	assert_int_equal(jo_cfg_resolve(c, "oss-sh", NULL, "JFSOPS", &out, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "env"));
	clear_env();
	/* another prefix (sync's sides) */
	setenv("JFSOPS_SRC_ENDPOINT", "http://src:9000", 1);
	assert_int_equal(jo_cfg_resolve(NULL, NULL, NULL, "JFSOPS_SRC", &out, &err), 0);
	assert_string_equal(out.v[JO_CFG_ENDPOINT], "http://src:9000");
	jo_cfg_values_release(&out);
	unsetenv("JFSOPS_SRC_ENDPOINT");
	jo_cfg_free(c);
}

static void test_mask_and_path(void **state)
{
	char buf[64], path[512];
	struct jo_err err = { 0 };
	bool named;

	(void)state;
	/* not even a prefix of the secret shows */
	jo_cfg_mask("abcdefghijkl", buf, sizeof(buf));
	assert_string_equal(buf, "****");
	jo_cfg_mask("short", buf, sizeof(buf));
	assert_string_equal(buf, "****");
	jo_cfg_mask(NULL, buf, sizeof(buf));
	assert_string_equal(buf, "****");

	clear_env();
	setenv("HOME", "/home/op", 1);
	unsetenv("XDG_CONFIG_HOME");
	assert_int_equal(jo_cfg_path(NULL, path, sizeof(path), &named, &err), 0);
	assert_string_equal(path, "/home/op/.config/jfsops/config");
	assert_false(named);
	setenv("XDG_CONFIG_HOME", "/xdg", 1);
	assert_int_equal(jo_cfg_path(NULL, path, sizeof(path), &named, &err), 0);
	assert_string_equal(path, "/xdg/jfsops/config");
	setenv("JFSOPS_CONFIG", "/etc/jfsops/config", 1);
	assert_int_equal(jo_cfg_path(NULL, path, sizeof(path), &named, &err), 0);
	assert_string_equal(path, "/etc/jfsops/config");
	assert_true(named);
	assert_int_equal(jo_cfg_path("/flag/config", path, sizeof(path), &named, &err), 0);
	assert_string_equal(path, "/flag/config");
	assert_true(named);
	clear_env();
	unsetenv("XDG_CONFIG_HOME");
}

static int setup(void **state)
{
	(void)state;
	return tu_mkdtemp(g_dir, sizeof(g_dir), "jo-cfg");
}

static int teardown(void **state)
{
	(void)state;
	return tu_rm_rf(g_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_and_profiles),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_nul_and_memory_parse),
		cmocka_unit_test(test_permissions),
		cmocka_unit_test(test_pick_profile),
		cmocka_unit_test(test_precedence),
		cmocka_unit_test(test_mask_and_path),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
