/*
 * Unit tests for leakcheck/la.c, libarchive opened on first use: the loaded
 * functions write a tar.zst and read it back; the process did not map
 * libarchive before the first load; and (built a second time against a
 * SONAME that does not exist, JO_LA_TEST_ABSENT) a missing library is one
 * clear JO_EUNSUPPORTED error, every time it is asked for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "leakcheck/la.h"

/* Is a shared object whose path contains name mapped into this process? */
static int mapped(const char *name)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int found = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name))
			found = 1;
	fclose(f);
	return found;
}

#ifndef JO_LA_TEST_ABSENT

static void la_round_trip(void **state)
{
	const struct jo_la *la = NULL;
	struct jo_err err = { 0 };
	char path[] = "/tmp/jo-la-XXXXXX";
	int fd = mkstemp(path);
	static const char body[] = "block bytes\n";
	char got[64] = { 0 };

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	/* linked programs do not map it: only a load does */
	assert_false(mapped("libarchive.so"));
	assert_int_equal(jo_la_load(&la, &err), 0);
	assert_non_null(la);
	assert_true(mapped("libarchive.so"));

	struct archive *w = la->archive_write_new();

	assert_non_null(w);
	assert_int_equal(la->archive_write_add_filter_zstd(w), ARCHIVE_OK);
	assert_int_equal(la->archive_write_set_format_pax_restricted(w), ARCHIVE_OK);
	assert_int_equal(la->archive_write_open_filename(w, path), ARCHIVE_OK);
	struct archive_entry *ae = la->archive_entry_new();

	la->archive_entry_set_pathname(ae, "vol/chunks/0/0/7_0_12");
	la->archive_entry_set_filetype(ae, AE_IFREG);
	la->archive_entry_set_perm(ae, 0644);
	la->archive_entry_set_size(ae, (la_int64_t)strlen(body));
	la->archive_entry_set_mtime(ae, 1700000000, 0);
	assert_int_equal(la->archive_write_header(w, ae), ARCHIVE_OK);
	assert_int_equal(la->archive_write_data(w, body, strlen(body)), (la_ssize_t)strlen(body));
	la->archive_entry_free(ae);
	assert_int_equal(la->archive_write_close(w), ARCHIVE_OK);
	la->archive_write_free(w);

	/* a second load returns the same table */
	const struct jo_la *again = NULL;

	assert_int_equal(jo_la_load(&again, &err), 0);
	assert_ptr_equal(again, la);

	struct archive *r = la->archive_read_new();

	la->archive_read_support_filter_all(r);
	la->archive_read_support_format_tar(r);
	assert_int_equal(la->archive_read_open_filename(r, path, 1 << 16), ARCHIVE_OK);
	assert_int_equal(la->archive_read_next_header(r, &ae), ARCHIVE_OK);
	assert_string_equal(la->archive_entry_pathname(ae), "vol/chunks/0/0/7_0_12");
	assert_int_equal(la->archive_entry_size(ae), (la_int64_t)strlen(body));
	assert_int_equal(la->archive_read_data(r, got, sizeof(got)), (la_ssize_t)strlen(body));
	assert_string_equal(got, body);
	assert_int_equal(la->archive_read_next_header(r, &ae), ARCHIVE_EOF);
	la->archive_read_free(r);

	/* it really is zstd: the frame's magic number */
	FILE *f = fopen(path, "rb");
	unsigned char magic[4] = { 0 };

	assert_non_null(f);
	assert_int_equal(fread(magic, 1, 4, f), 4);
	fclose(f);
	assert_memory_equal(magic, "\x28\xb5\x2f\xfd", 4);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(la_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* JO_LA_TEST_ABSENT */

static void la_absent_is_one_clear_error(void **state)
{
	const struct jo_la *la = (const struct jo_la *)&la;
	struct jo_err err = { 0 };

	(void)state;
	for (int i = 0; i < 2; i++) {
		jo_err_clear(&err);
		assert_int_equal(jo_la_load(&la, &err), JO_EUNSUPPORTED);
		assert_null(la);
		assert_int_equal(err.code, JO_EUNSUPPORTED);
		assert_non_null(strstr(err.msg, "a quarantine needs libarchive"));
		assert_non_null(strstr(err.msg, JO_LIBARCHIVE_SONAME));
		assert_null(strchr(err.msg, '\n'));
	}
	assert_false(mapped("libarchive.so"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(la_absent_is_one_clear_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
