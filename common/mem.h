#ifndef JO_MEM_H
#define JO_MEM_H

/*
 * Byte order, in one place (the spirit of zstd's lib/common/mem.h).
 *
 * The JuiceFS formats store integers big-endian (slice records, Redis and SQL
 * binary values, TKV keys) and, in TKV values, little-endian; our own run and
 * spill files use big-endian so that memcmp order is numeric order.
 * Every function reads or writes exactly that many bytes at p, with no
 * alignment required. jo_read64() is a native-order unaligned load, for
 * records this process wrote itself.
 */

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t jo_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t jo_be64(const uint8_t *p)
{
	return (uint64_t)jo_be32(p) << 32 | jo_be32(p + 4);
}

static inline void jo_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void jo_put_be64(uint8_t *p, uint64_t v)
{
	jo_put_be32(p, (uint32_t)(v >> 32));
	jo_put_be32(p + 4, (uint32_t)v);
}

static inline uint32_t jo_le32(const uint8_t *p)
{
	return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static inline uint64_t jo_le64(const uint8_t *p)
{
	return (uint64_t)jo_le32(p + 4) << 32 | jo_le32(p);
}

static inline void jo_put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void jo_put_le64(uint8_t *p, uint64_t v)
{
	jo_put_le32(p, (uint32_t)v);
	jo_put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Unsigned LEB128: 7 bits a byte, low first, high bit = more; <= 10 bytes. */
static inline size_t jo_put_uvarint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v > 0x7f) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Read one from p[0..len): the bytes it took, or 0 if cut short or too long. */
static inline size_t jo_get_uvarint(const uint8_t *p, size_t len, uint64_t *v)
{
	uint64_t r = 0;

	for (size_t i = 0; i < len && i < 10; i++) {
		r |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
}

static inline uint64_t jo_read64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#endif
