/* testutil.c: see testutil.h. */
#include "support/testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
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

uint64_t tu_xorshift(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 0x2545F4914F6CDD1DULL;
}
