/* numparse.c: the numbers of the command line (counts, decimals, sizes, durations). */
#include "common/numparse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * strtoull and strtod skip leading blanks and take a sign ("-1" is 2^64-1),
 * strtod also "inf", "nan", hex and exponents: every number of the command
 * line goes through these two first, digits at the start and only there.
 */
int cmd_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (*p < '0' || *p > '9' || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* The end of the plain decimal ("12", "0.5") s starts with, or NULL when it starts with none. */
static const char *decimal_end(const char *s)
{
	const char *p = s;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == s)
		return NULL;
	if (*p == '.' && p[1] >= '0' && p[1] <= '9')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	return p;
}

/* The number strtod reads from s, which must start with a plain decimal; *end after it. */
static int decimal_prefix(const char *s, double *out, const char **end)
{
	const char *de = s ? decimal_end(s) : NULL;
	char *e;

	if (!de)
		return -1;
	errno = 0;
	*out = strtod(s, &e);
	if (errno || e != de)
		return -1;
	*end = de;
	return 0;
}

int cmd_parse_decimal(const char *s, double *out)
{
	const char *end;
	double v;

	if (decimal_prefix(s, &v, &end) || *end)
		return -1;
	*out = v;
	return 0;
}

int cmd_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (end == s || errno)
		return -1;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': mul = 1ULL << 10; break;
		case 'm': case 'M': mul = 1ULL << 20; break;
		case 'g': case 'G': mul = 1ULL << 30; break;
		case 't': case 'T': mul = 1ULL << 40; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = (uint64_t)v * mul;
	return 0;
}

/* "90s", "50m", "2h", "500ms", "1d", "30" (seconds) -> ms; -1 if malformed. */
int64_t cmd_parse_duration(const char *s)
{
	const char *end;
	double v, ms;

	if (decimal_prefix(s, &v, &end))
		return -1;
	if (!strcmp(end, "") || !strcmp(end, "s"))
		ms = v * 1000;
	else if (!strcmp(end, "ms"))
		ms = v;
	else if (!strcmp(end, "m"))
		ms = v * 60000;
	else if (!strcmp(end, "h"))
		ms = v * 3600000;
	else if (!strcmp(end, "d"))
		ms = v * 86400000;
	else
		return -1;
	if (ms >= 9.0e18) /* beyond int64_t: no conversion (and no sense) */
		return -1;
	return (int64_t)ms;
}
