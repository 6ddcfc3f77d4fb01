#include "common/pct.h"

#include <errno.h>
#include <stdlib.h>

char *jo_pct_decode(const char *s, size_t n, unsigned flags)
{
	char *out = malloc(n + 1);
	size_t w = 0;

	if (!out) {
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi = i + 2 < n ? jo_hexval((unsigned char)s[i + 1]) : -1;
			int lo = hi < 0 ? -1 : jo_hexval((unsigned char)s[i + 2]);

			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				free(out);
				errno = EINVAL;
				return NULL;
			}
			out[w++] = (char)(hi * 16 + lo);
			i += 2;
		} else if (s[i] == '+' && (flags & JO_PCT_PLUS_SPACE)) {
			out[w++] = ' ';
		} else {
			out[w++] = s[i];
		}
	}
	out[w] = '\0';
	return out;
}
