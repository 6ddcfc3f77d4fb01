/* testutil.h: small helpers any unit test may use. */
#ifndef JO_TEST_TESTUTIL_H
#define JO_TEST_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

/* PATH created (or truncated) holding b[0..n); a failure fails the test. */
void tu_write(const char *path, const void *b, size_t n);
/* tu_write of a C string, without its NUL. */
void tu_write_text(const char *path, const char *text);
/* A new scratch directory $TMPDIR/NAME-XXXXXX (/tmp without TMPDIR) in dir;
 * 0, or -1 if it could not be made. */
int tu_mkdtemp(char *dir, size_t cap, const char *name);
/* rm -rf DIR (a scratch directory); 0, or -1 if it failed. */
int tu_rm_rf(const char *dir);
/* The next number of the xorshift64* sequence in *state (deterministic per seed). */
uint64_t tu_xorshift(uint64_t *state);

#endif
