/* testutil.c: see testutil.h. */
#include "support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void tu_write(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

void tu_write_text(const char *path, const char *text)
{
	tu_write(path, text, strlen(text));
}

int tu_mkdtemp(char *dir, size_t cap, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, cap, "%s/%s-XXXXXX", tmp ? tmp : "/tmp", name);
	return mkdtemp(dir) ? 0 : -1;
}

int tu_rm_rf(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

uint64_t tu_xorshift(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545F4914F6CDD1DULL;
}
