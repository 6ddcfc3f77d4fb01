#include "common/human.h"

#include <stdio.h>

void jo_fmt_bytes(double v, int decimals, char *buf, size_t cap)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	size_t u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%.0f B", v);
	else
		snprintf(buf, cap, "%.*f %s", decimals, v, units[u]);
}
