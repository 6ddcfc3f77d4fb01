/*
 * human.h: byte counts for people ("1.5 GiB"), for tables, progress lines
 * and summaries on stderr. Machine output (JSON) carries the exact numbers.
 */
#ifndef JO_HUMAN_H
#define JO_HUMAN_H

#include <stddef.h>

/*
 * v bytes in binary units up to EiB: "512 B" (whole bytes, rounded) below
 * 1 KiB, else the value in the largest unit under which it is at least 1,
 * with `decimals` digits after the point ("1.5 GiB" with 1, "1.50 GiB" with
 * 2). v may be a rate (bytes a second). Writes at most cap bytes, always
 * NUL-terminated; 16 bytes hold every result with up to 2 decimals.
 */
void jo_fmt_bytes(double v, int decimals, char *buf, size_t cap);

#endif
