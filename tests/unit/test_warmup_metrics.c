/* jo_warmup_write_metrics: the jfsops_warmup_* textfile of one run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/metrics.h"
#include "common/warmup.h"

static void test_success_and_failure(void **state)
{
	char dir[] = "/tmp/jo-wum-XXXXXX", path[64];
	struct jo_warmup_metrics m = {
		.files = 2, .ranges = 5, .requested_bytes = 9000, .blocks = 3, .bytes = 12582912,
		.warmed = 2, .warmed_bytes = 8388608, .failed = 1, .dry_run = false,
		.started = 1700000000, .seconds = 1.5, .success = true,
	};
	struct jo_err err = { 0 };
	double v;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/w.prom", dir);
	assert_int_equal(jo_warmup_write_metrics(path, &m, &err), 0);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_blocks_total", &v), 0);
	assert_true(v == 3);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_failed_blocks_total", &v), 0);
	assert_true(v == 1);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_warmed_bytes_total", &v), 0);
	assert_true(v == 8388608);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_dry_run", &v), 0);
	assert_true(v == 0);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_duration_seconds", &v), 0);
	assert_true(v == 1.5);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_last_run_timestamp_seconds", &v), 0);
	assert_true(v == 1700000000);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_last_success_timestamp_seconds", &v), 0);
	assert_true(v >= 1700000000);

	/* a failed dry run: no last_success line */
	m.success = false;
	m.dry_run = true;
	assert_int_equal(jo_warmup_write_metrics(path, &m, &err), 0);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_dry_run", &v), 0);
	assert_true(v == 1);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_last_success_timestamp_seconds", &v),
			 -1);
	assert_int_equal(jo_metrics_read(path, "jfsops_warmup_last_run_timestamp_seconds", &v), 0);

	/* an unwritable place is an error, not a crash */
	assert_int_not_equal(jo_warmup_write_metrics("/nonexistent-dir/x/w.prom", &m, &err), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_success_and_failure),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
