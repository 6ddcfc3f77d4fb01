/*
 * pct.h: percent-decoding (RFC 3986 %XX), one decoder for META-URLs, the
 * object layer's listings and every query string (the spirit of curl's
 * lib/escape.c: one URL decoder for every protocol).
 */
#ifndef JO_PCT_H
#define JO_PCT_H

#include <stddef.h>

/* The value of one hex digit (either case), or -1 when c is not one. */
static inline int jo_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

enum jo_pct_flags {
	JO_PCT_PLUS_SPACE = 1 << 0, /* '+' decodes to a space (query strings, form encoding) */
};

/*
 * s[0..n) percent-decoded into a new NUL-terminated string (the caller
 * frees it). A '%' not followed by two hex digits is refused, and so is %00:
 * the result is a C string, and a NUL in it would silently name something
 * shorter (another key, another file, another password).
 * Returns NULL with errno EINVAL on a bad escape, ENOMEM when out of memory.
 * Thread-safe (no state).
 */
char *jo_pct_decode(const char *s, size_t n, unsigned flags);

#endif
