#include "common/esc.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The length of the valid UTF-8 sequence at p that is no control character, else 0. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];

	if (c >= 0x20 && c < 0x7f)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		/* U+0080..U+009F are C1 controls (0xc2 0x80..0x9f): CSI is 0xc2 0x9b */
		if ((p[1] & 0xc0) != 0x80 || (c == 0xc2 && p[1] < 0xa0))
			return 0;
		return 2;
	}
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;

		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80)
			return 0;
		return 3;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;

		if (p[1] < lo || p[1] > hi || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* The escape of the byte c (which utf8_len refused, or a backslash) into e; its length. */
static size_t esc_byte(unsigned char c, char e[5])
{
	static const char named[] = "abtnvfr"; /* \a (7) .. \r (13) */

	e[0] = '\\';
	if (c == '\\') {
		e[1] = '\\';
		return 2;
	}
	if (c >= 7 && c <= 13) {
		e[1] = named[c - 7];
		return 2;
	}
	e[1] = (char)('0' + (c >> 6));
	e[2] = (char)('0' + ((c >> 3) & 7));
	e[3] = (char)('0' + (c & 7));
	return 4;
}

/*
 * The piece of output for the text at *p: the valid character itself, or an
 * escape written into e. Sets *src, advances *p; returns the piece's length.
 */
static size_t piece(const unsigned char **p, const char **src, char e[5])
{
	size_t l = utf8_len(*p);

	if (l && **p != '\\') {
		*src = (const char *)*p;
		*p += l;
		return l;
	}
	l = esc_byte(**p, e);
	*src = e;
	(*p)++;
	return l;
}

const char *jo_esc_term(char *out, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	const char *src;
	char e[5];
	size_t n = 0, total = 0, k, l;
	bool whole;

	/* the common case, nothing to escape: no copy */
	for (k = 0; p[k]; k += utf8_len(p + k))
		if (p[k] == '\\' || !utf8_len(p + k))
			break;
	if (!p[k])
		return s;
	if (cap < 4) {
		if (cap)
			out[0] = '\0';
		return out;
	}
	while (*p)
		total += piece(&p, &src, e);
	whole = total < cap;
	p = (const unsigned char *)s;
	while (*p) {
		l = piece(&p, &src, e);
		/* cut: keep room for "..." and the NUL, never split a piece */
		if (!whole && n + l + 4 > cap) {
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		memcpy(out + n, src, l);
		n += l;
	}
	out[n] = '\0';
	return out;
}
