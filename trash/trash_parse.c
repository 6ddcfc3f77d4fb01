/* trash_parse.c: entry names, times and path prefixes of `jfsops trash`. */
#define _GNU_SOURCE
#include <string.h>
#include <time.h>

#include "trash/trash.h"
#include "common/utc.h"

int jo_trash_entry_parse(const char *name, size_t len, uint64_t *parent, uint64_t *ino,
			 size_t *name_off)
{
	uint64_t v[2] = { 0, 0 };
	size_t i = 0;

	for (int k = 0; k < 2; k++) {
		size_t start = i;

		while (i < len && name[i] >= '0' && name[i] <= '9') {
			uint64_t d = (uint64_t)(name[i] - '0');

			if (v[k] > (UINT64_MAX - d) / 10)
				return -1;
			v[k] = v[k] * 10 + d;
			i++;
		}
		if (i == start || i >= len || name[i] != '-')
			return -1;
		i++;
	}
	if (i >= len)
		return -1;
	*parent = v[0];
	*ino = v[1];
	*name_off = i;
	return 0;
}

int jo_trash_time_parse(const char *s, int64_t *out)
{
	int y, mo, d, h, mi, sec, oh, om;
	const char *p = s;
	int64_t t;

	if (jo_utc_digits(p, 4, &y) || p[4] != '-' || jo_utc_digits(p + 5, 2, &mo) || p[7] != '-' ||
	    jo_utc_digits(p + 8, 2, &d))
		return -1;
	p += 10;
	if (*p != 'T' && *p != 't' && *p != ' ')
		return -1;
	p++;
	if (jo_utc_digits(p, 2, &h) || p[2] != ':' || jo_utc_digits(p + 3, 2, &mi) || p[5] != ':' ||
	    jo_utc_digits(p + 6, 2, &sec))
		return -1;
	p += 8;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -1;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59)
		return -1;
	if (jo_utc_exact(y, mo, d, h, mi, sec, &t) != 0)
		return -1; /* Feb 30, Apr 31: timegm would roll them over */
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		if (jo_utc_digits(p + 1, 2, &oh) || p[3] != ':' || jo_utc_digits(p + 4, 2, &om) ||
		    oh > 23 || om > 59)
			return -1;
		t += (*p == '+' ? -1 : 1) * (int64_t)(oh * 3600 + om * 60);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*out = t;
	return 0;
}

bool jo_trash_path_under(const char *path, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (pl == 0)
		return true;
	return !strncmp(path, prefix, pl) && (path[pl] == '\0' || path[pl] == '/');
}
