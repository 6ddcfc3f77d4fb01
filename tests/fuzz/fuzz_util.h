/*
 * fuzz_util.h: helpers shared by the libFuzzer targets of tests/fuzz.
 * FUZZ_CHECK states an invariant: when it does not hold the target prints
 * what broke and aborts, which libFuzzer reports as a crash (with the input
 * saved as an artifact).
 */
#ifndef JO_FUZZ_UTIL_H
#define JO_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                              \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "fuzz invariant broken at %s:%d: %s: ", __FILE__,   \
				__LINE__, #cond);                                          \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* A NUL-terminated copy of data (malloc'd; aborts on OOM). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* memmem for a NUL-terminated needle (the targets build with -std=c11). */
static inline const char *fuzz_find(const char *hay, size_t n, const char *needle)
{
	size_t l = strlen(needle);

	if (!l)
		return hay;
	for (size_t i = 0; i + l <= n; i++)
		if (hay[i] == needle[0] && memcmp(hay + i, needle, l) == 0)
			return hay + i;
	return NULL;
}

#endif
