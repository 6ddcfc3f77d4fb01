/* jo_fmt_bytes: byte counts for people, one format for every command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/human.h"

static const char *fmt(double v, int decimals)
{
	static char buf[32];

	jo_fmt_bytes(v, decimals, buf, sizeof(buf));
	return buf;
}

static void bytes_below_a_kib_are_whole_bytes(void **state)
{
	(void)state;
	assert_string_equal(fmt(0, 2), "0 B");
	assert_string_equal(fmt(1023, 1), "1023 B");
	assert_string_equal(fmt(512.6, 1), "513 B"); /* a rate rounds */
}

static void larger_counts_take_the_largest_unit_and_the_decimals_asked(void **state)
{
	(void)state;
	assert_string_equal(fmt(1024, 1), "1.0 KiB");
	assert_string_equal(fmt(1536, 2), "1.50 KiB");
	assert_string_equal(fmt(3.0 * 1024 * 1024 * 1024, 1), "3.0 GiB");
	assert_string_equal(fmt(1024.0 * 1024 * 1024 * 1024 * 1024, 2), "1.00 PiB");
	assert_string_equal(fmt((double)UINT64_MAX, 2), "16.00 EiB");
}

static void a_short_buffer_is_cut_and_terminated(void **state)
{
	char b[4];

	(void)state;
	jo_fmt_bytes(1536, 2, b, sizeof(b));
	assert_string_equal(b, "1.5");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bytes_below_a_kib_are_whole_bytes),
		cmocka_unit_test(larger_counts_take_the_largest_unit_and_the_decimals_asked),
		cmocka_unit_test(a_short_buffer_is_cut_and_terminated),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
