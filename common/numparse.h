/*
 * numparse.h: the numbers of the command line for the commands that still
 * parse their own flags (warmup, trash), by the grammars of common/opt.h
 * (option tables use them through OPT_UINT, OPT_SIZE, OPT_DURATION). Each
 * starts with a digit: a sign, a blank, "0x", "inf" or "nan" is malformed
 * (strto* would take "-1" as 2^64-1).
 */
#ifndef JO_COMMON_NUMPARSE_H
#define JO_COMMON_NUMPARSE_H

#include <stdint.h>

/* "90s", "50m", "1.5h", "500ms", "1d", "30" (seconds), "0.5s" -> ms; -1 if malformed. */
int64_t cmd_parse_duration(const char *s);
/* "64M", "1.5GiB", "4096" -> bytes. -1 on malformed input. */
int cmd_parse_size(const char *s, uint64_t *out);
/* Decimal digits only, lo..hi -> *out; -1 (out untouched) otherwise. */
int cmd_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

#endif
