/* trash/trash_parse.c: entry names, RFC 3339 times and path prefixes of `jfsops trash`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "trash/trash.h"

static int entry(const char *s, uint64_t *parent, uint64_t *ino, const char **name)
{
	size_t off = 0;
	int rc = jo_trash_entry_parse(s, strlen(s), parent, ino, &off);

	*name = s + off;
	return rc;
}

static void entry_names_split_at_the_first_two_dashes(void **state)
{
	uint64_t p, i;
	const char *n;

	(void)state;
	assert_int_equal(entry("1-2-a", &p, &i, &n), 0);
	assert_int_equal(p, 1);
	assert_int_equal(i, 2);
	assert_string_equal(n, "a");
	/* the name may hold dashes and digits of its own */
	assert_int_equal(entry("17-4242-2026-12-03-x-1", &p, &i, &n), 0);
	assert_int_equal(p, 17);
	assert_int_equal(i, 4242);
	assert_string_equal(n, "2026-12-03-x-1");
	assert_int_equal(entry("18446744073709551615-3--", &p, &i, &n), 0);
	assert_true(p == UINT64_MAX);
	assert_string_equal(n, "-");
}

static void entry_names_of_other_shapes_are_refused(void **state)
{
	uint64_t p, i;
	const char *n;

	(void)state;
	assert_int_equal(entry("", &p, &i, &n), -1);
	assert_int_equal(entry("a-2-x", &p, &i, &n), -1);
	assert_int_equal(entry("1-2-", &p, &i, &n), -1);   /* no name */
	assert_int_equal(entry("1-2", &p, &i, &n), -1);
	assert_int_equal(entry("1--x", &p, &i, &n), -1);
	assert_int_equal(entry("-1-2-x", &p, &i, &n), -1);
	assert_int_equal(entry("+1-2-x", &p, &i, &n), -1);
	assert_int_equal(entry("18446744073709551616-3-x", &p, &i, &n), -1); /* 2^64 */
}

static int64_t tp(const char *s)
{
	int64_t t = -12345;

	return jo_trash_time_parse(s, &t) ? -1 : t;
}

static void rfc3339_times(void **state)
{
	/* each time, and the Unix seconds it stands for */
	static const struct {
		const char *in;
		int64_t want;
	} times[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "2026-12-03T17:00:00Z", 1796317200 },
		{ "2026-12-03t17:00:00z", 1796317200 },
		{ "2026-12-03 17:00:00Z", 1796317200 },
		{ "2026-12-03T17:00:00.999999999Z", 1796317200 },
		{ "2026-12-03T18:00:00+01:00", 1796317200 },
		{ "2026-12-03T11:30:00-05:30", 1796317200 },
		{ "2024-02-29T00:00:00Z", 1709164800 }, /* a leap day */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++)
		assert_int_equal(tp(times[i].in), times[i].want);
}

static void malformed_times_are_refused(void **state)
{
	(void)state;
	const char *bad[] = {
		"", "6h", "2026-12-03", "2026-12-03T17:00Z", "2026-12-03T17:00:00",
		"2026-12-03T17:00:00+0100", "2026-12-03T17:00:00+01", "2026-12-03T17:00:00Zx",
		"2026-12-03T17:00:00.Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
		"2026-12-03T24:00:00Z", "2026-12-03T17:60:00Z", "2026-12-03T17:00:60Z",
		"1969-12-31T23:59:59Z", "+026-12-03T17:00:00Z", " 2026-12-03T17:00:00Z",
		"2026-1-03T17:00:00Z", "2026-12-03T17:00:00+24:00", "2026-12-03X17:00:00Z",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int64_t t = 7;

		if (jo_trash_time_parse(bad[i], &t) != -1)
			fail_msg("accepted '%s'", bad[i]);
		assert_int_equal(t, 7); /* untouched */
	}
}

static void path_prefixes_match_whole_components(void **state)
{
	/* path, prefix, whether the path is under the prefix */
	static const struct {
		const char *path, *prefix;
		bool under;
	} cases[] = {
		{ "/a/b", "", true },
		{ "/a/b", "/a", true },
		{ "/a/b", "/a/b", true },
		{ "/a/b/c", "/a/b", true },
		{ "/a/bb", "/a/b", false },
		{ "/a", "/a/b", false },
		{ "/ab", "/a", false },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(!!jo_trash_path_under(cases[i].path, cases[i].prefix), cases[i].under);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entry_names_split_at_the_first_two_dashes),
		cmocka_unit_test(entry_names_of_other_shapes_are_refused),
		cmocka_unit_test(rfc3339_times),
		cmocka_unit_test(malformed_times_are_refused),
		cmocka_unit_test(path_prefixes_match_whole_components),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
