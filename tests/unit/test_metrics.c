/* common/metrics: the textfile writer every command's --metrics-file uses. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/metrics.h"
#include "support/testutil.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);

	assert_non_null(f);
	assert_non_null(buf);
	assert_true(fread(buf, 1, (1 << 16) - 1, f) > 0);
	fclose(f);
	return buf;
}

/* base labels go first in every sample; a sample's own labels follow */
static void test_labels_and_read_back(void **state)
{
	char dir[] = "/tmp/jo-metrics-XXXXXX", path[64], labels[256];
	struct jo_metrics *mx = NULL;
	struct jo_err err = { 0 };
	double v = 0;
	char *text;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m.prom", dir);
	assert_int_equal(jo_metrics_new(&mx, &err), 0);
	assert_int_equal(jo_metrics_set(mx, "jfsops_gc_last_run_objects_deleted", "gauge", "h",
					"kind=\"file\"", 12, &err), 0);
	assert_int_equal(jo_metrics_set(mx, "jfsops_gc_last_run_objects_deleted", "gauge", "h",
					"kind=\"slice\"", 3, &err), 0);
	assert_int_equal(jo_metrics_set(mx, "jfsops_gc_last_success_timestamp_seconds", "gauge",
					"h", NULL, 1796316340.123456, &err), 0);
	assert_int_not_equal(jo_metrics_set(mx, "9bad name", "gauge", "h", NULL, 1, &err), 0);
	assert_int_equal(jo_metrics_write_labeled(mx, path, "volume=\"v1\",job=\"j\"", &err), 0);
	text = slurp(path);
	assert_non_null(strstr(text, "# TYPE jfsops_gc_last_run_objects_deleted gauge\n"));
	assert_non_null(strstr(text, "jfsops_gc_last_run_objects_deleted{volume=\"v1\",job=\"j\","
				     "kind=\"file\"} 12\n"));
	/* a timestamp keeps its sub-second part (%.9g gave 1.79631634e+09) */
	assert_non_null(strstr(text, "jfsops_gc_last_success_timestamp_seconds{volume=\"v1\","
				     "job=\"j\"} 1796316340.123456\n"));
	free(text);
	assert_int_equal(jo_metrics_read_sample(path, "jfsops_gc_last_success_timestamp_seconds", &v,
						labels, sizeof(labels)), 0);
	assert_true(v == 1796316340.123456);
	assert_string_equal(labels, "volume=\"v1\",job=\"j\"");
	assert_int_equal(jo_metrics_read_sample(path, "jfsops_gc_last_run", &v, labels,
						sizeof(labels)), -1);
	/* no base: samples as they were set */
	assert_int_equal(jo_metrics_write(mx, path, &err), 0);
	assert_int_equal(jo_metrics_read_sample(path, "jfsops_gc_last_success_timestamp_seconds", &v,
						labels, sizeof(labels)), 0);
	assert_string_equal(labels, "");
	assert_int_equal(jo_metrics_read(path, "jfsops_gc_last_success_timestamp_seconds", &v), 0);
	/* a file that cannot be written is an error, not silence */
	assert_int_not_equal(jo_metrics_write(mx, "/nonexistent-dir/x/m.prom", &err), 0);
	jo_metrics_free(mx);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* a link planted at the path is not read through */
static void test_read_refuses_symlink(void **state)
{
	char dir[] = "/tmp/jo-metrics-XXXXXX", path[64], link[64], labels[64];
	double v = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/real.prom", dir);
	snprintf(link, sizeof(link), "%s/link.prom", dir);
	tu_write_text(path, "jfsops_x_last_success_timestamp_seconds 5\n");
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(jo_metrics_read_sample(path, "jfsops_x_last_success_timestamp_seconds", &v,
						labels, sizeof(labels)), 0);
	assert_true(v == 5);
	assert_int_equal(jo_metrics_read_sample(link, "jfsops_x_last_success_timestamp_seconds", &v,
						labels, sizeof(labels)), -1);
	assert_int_equal(unlink(link), 0);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_labels_and_read_back),
		cmocka_unit_test(test_read_refuses_symlink),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
