/* jo_utc_seconds, jo_utc_exact: the last step of every timestamp grammar. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/utc.h"

static void seconds_count_from_the_epoch_in_utc(void **state)
{
	(void)state;
	assert_int_equal(jo_utc_seconds(1970, 1, 1, 0, 0, 0), 0);
	assert_int_equal(jo_utc_seconds(1994, 11, 6, 8, 49, 37), 784111777);
	assert_int_equal(jo_utc_seconds(2024, 2, 29, 23, 59, 59), 1709251199);
	/* a day past the month's end rolls over, as timegm does */
	assert_int_equal(jo_utc_seconds(2023, 2, 30, 0, 0, 0), jo_utc_seconds(2023, 3, 2, 0, 0, 0));
}

static void exact_refuses_days_that_do_not_exist(void **state)
{
	int64_t t = 7;

	(void)state;
	assert_int_equal(jo_utc_exact(2024, 2, 29, 1, 0, 0, &t), 0);
	assert_int_equal(t, 1709168400);
	t = 7;
	assert_int_equal(jo_utc_exact(2023, 2, 29, 0, 0, 0, &t), -1);
	assert_int_equal(jo_utc_exact(2024, 4, 31, 0, 0, 0, &t), -1);
	assert_int_equal(jo_utc_exact(2024, 12, 32, 0, 0, 0, &t), -1);
	assert_int_equal(t, 7); /* nothing written */
	assert_int_equal(jo_utc_exact(1969, 12, 31, 23, 0, 0, &t), 0);
	assert_int_equal(t, -3600);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seconds_count_from_the_epoch_in_utc),
		cmocka_unit_test(exact_refuses_days_that_do_not_exist),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
