/* numparse.c: the command line's numbers, by the one grammar of each kind (common/opt.c). */
#include "common/numparse.h"

#include "common/opt.h"

int cmd_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	return jo_parse_uint(s, lo, hi, out);
}

int cmd_parse_size(const char *s, uint64_t *out)
{
	return jo_parse_size(s, out);
}

int64_t cmd_parse_duration(const char *s)
{
	int64_t ms;

	return jo_parse_duration_ms(s, &ms) ? -1 : ms;
}
