/*
 * utc.h: seconds since the epoch of a UTC calendar time, the one step every
 * timestamp grammar ends with (trash hour names, restore times, S3 dates),
 * and their fixed-width numeric fields. The grammars check the fields'
 * ranges themselves. Inline, so that the
 * object store's sources still build on their own (tests/tools/objtool.c).
 */
#ifndef JO_UTC_H
#define JO_UTC_H

#include <stdint.h>
#include <string.h>
#include <time.h>

/* Exactly n ASCII digits at p -> *out (0); -1 otherwise (nothing written). */
static inline int jo_utc_digits(const char *p, int n, int *out)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	*out = v;
	return 0;
}

static inline time_t jo_utc_timegm(int y, int mo, int d, int h, int mi, int s)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = s;
	return timegm(&tm);
}

/* y-mo-d h:mi:s UTC (mo 1 to 12), as timegm counts it: a day past the end
 * of its month rolls over (Feb 30 is in March); -1 when timegm fails. */
static inline int64_t jo_utc_seconds(int y, int mo, int d, int h, int mi, int s)
{
	return (int64_t)jo_utc_timegm(y, mo, d, h, mi, s);
}

/* The same for a date that must exist: 0, or -1 (nothing written) for
 * Feb 30, Apr 31 and the like, or when timegm fails. */
static inline int jo_utc_exact(int y, int mo, int d, int h, int mi, int s, int64_t *out)
{
	time_t t = jo_utc_timegm(y, mo, d, h, mi, s);
	struct tm back;

	/* a date timegm rolled over comes back with another day or month */
	if (t == (time_t)-1 || !gmtime_r(&t, &back) || back.tm_mday != d || back.tm_mon != mo - 1)
		return -1;
	*out = (int64_t)t;
	return 0;
}

#endif
