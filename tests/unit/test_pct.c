/* jo_pct_decode / jo_hexval: the one percent-decoder (META-URLs, listings, query strings). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/pct.h"

static void expect_decoded(const char *in, unsigned flags, const char *want, size_t wantlen)
{
	char *d = jo_pct_decode(in, strlen(in), flags);

	assert_non_null(d);
	assert_int_equal(strlen(d), wantlen);
	assert_memory_equal(d, want, wantlen + 1);
	free(d);
}

static void expect_refused(const char *in, size_t n, unsigned flags)
{
	errno = 0;
	assert_null(jo_pct_decode(in, n, flags));
	assert_int_equal(errno, EINVAL);
}

static void hexval_takes_both_cases_and_nothing_else(void **state)
{
	(void)state;
	assert_int_equal(jo_hexval('0'), 0);
	assert_int_equal(jo_hexval('9'), 9);
	assert_int_equal(jo_hexval('a'), 10);
	assert_int_equal(jo_hexval('F'), 15);
	assert_int_equal(jo_hexval('g'), -1);
	assert_int_equal(jo_hexval('G'), -1);
	assert_int_equal(jo_hexval('/'), -1);
	assert_int_equal(jo_hexval(0xc3), -1);
	assert_int_equal(jo_hexval(-1), -1);
}

static void pct_decodes_escapes_in_either_case(void **state)
{
	(void)state;
	expect_decoded("", 0, "", 0);
	expect_decoded("plain", 0, "plain", 5);
	expect_decoded("a%2fb%2Fc", 0, "a/b/c", 5);
	expect_decoded("%E2%82%ac", 0, "\xe2\x82\xac", 3);
	expect_decoded("%01%ff", 0, "\x01\xff", 2);
	expect_decoded("%41", 0, "A", 1);
}

static void pct_plus_is_a_space_only_when_asked(void **state)
{
	(void)state;
	expect_decoded("a+b%2B", 0, "a+b+", 4);
	expect_decoded("a+b%2B", JO_PCT_PLUS_SPACE, "a b+", 4);
}

static void pct_refuses_bad_and_cut_escapes(void **state)
{
	(void)state;
	expect_refused("%", 1, 0);
	expect_refused("a%2", 3, 0);
	expect_refused("%zz", 3, 0);
	expect_refused("%g0", 3, 0);
	expect_refused("%0g", 3, 0);
	/* the escape must lie inside the n bytes given, not run past them */
	expect_refused("ab%41", 4, 0);
}

static void pct_refuses_nul_which_would_cut_the_string(void **state)
{
	(void)state;
	expect_refused("a%00b", 5, 0);
	expect_refused("%00", 3, JO_PCT_PLUS_SPACE);
}

static void pct_decodes_only_the_n_bytes_given(void **state)
{
	char *d = jo_pct_decode("user:pass@host", 4, 0);

	(void)state;
	assert_non_null(d);
	assert_string_equal(d, "user");
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hexval_takes_both_cases_and_nothing_else),
		cmocka_unit_test(pct_decodes_escapes_in_either_case),
		cmocka_unit_test(pct_plus_is_a_space_only_when_asked),
		cmocka_unit_test(pct_refuses_bad_and_cut_escapes),
		cmocka_unit_test(pct_refuses_nul_which_would_cut_the_string),
		cmocka_unit_test(pct_decodes_only_the_n_bytes_given),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
