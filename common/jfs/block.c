/* Block keys and the per-block compression framing (spec §2.1, §2.3). */
#include "common/jfs/jfs.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <lz4.h>
#include <zstd.h>

#include "common/err.h"

int jo_block_key(char *buf, size_t cap, const char *volname, bool hash_prefix,
		 uint64_t id, uint32_t indx, uint32_t bsize)
{
	int n;

	if (hash_prefix)
		n = snprintf(buf, cap, "%s/chunks/%02X/%" PRIu64 "/%" PRIu64 "_%" PRIu32 "_%" PRIu32,
			     volname, (unsigned)(id % 256), id / 1000000, id, indx, bsize);
	else
		n = snprintf(buf, cap, "%s/chunks/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "_%" PRIu32 "_%" PRIu32,
			     volname, id / 1000000, id / 1000, id, indx, bsize);
	if (n < 0 || (size_t)n >= cap)
		return -1;
	return n;
}

/* Parse one decimal field ending at `end` char; no sign, no empty, no overflow. */
static int parse_dec(const char **p, char end, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');

		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
		s++;
	}
	if (*s != end)
		return -1;
	*out = v;
	*p = end ? s + 1 : s;
	return 0;
}

int jo_block_parse(const char *key, uint64_t *id, uint32_t *indx, uint32_t *bsize)
{
	const char *base = strrchr(key, '/');
	uint64_t a, b, c;

	base = base ? base + 1 : key;
	if (parse_dec(&base, '_', UINT64_MAX, &a) ||
	    parse_dec(&base, '_', UINT32_MAX, &b) ||
	    parse_dec(&base, '\0', UINT32_MAX, &c))
		return JO_EINVAL;
	*id = a;
	*indx = (uint32_t)b;
	*bsize = (uint32_t)c;
	return 0;
}

bool jo_block_valid(uint32_t slice_size, uint32_t bs, uint32_t indx, uint32_t bsize)
{
	uint64_t start = (uint64_t)indx * bs;

	if (bsize == bs)
		return start + bs <= slice_size;
	return bsize != 0 && start + bsize == slice_size;
}

int jo_compress_parse(const char *name)
{
	if (!name || !*name || !strcasecmp(name, "none"))
		return JO_COMPRESS_NONE;
	if (!strcasecmp(name, "lz4"))
		return JO_COMPRESS_LZ4;
	if (!strcasecmp(name, "zstd"))
		return JO_COMPRESS_ZSTD;
	return -1;
}

int jo_block_decode(int compress, const void *src, size_t srclen, void *dst,
		    size_t bsize, struct jo_err *err)
{
	switch (compress) {
	case JO_COMPRESS_NONE:
		if (srclen != bsize)
			return jo_err_set(err, JO_EPROTO,
					  "block is %zu bytes, its key says %zu", srclen, bsize);
		memcpy(dst, src, bsize);
		return 0;
	case JO_COMPRESS_LZ4: {
		int n;

		if (srclen > INT_MAX || bsize > INT_MAX)
			return jo_err_set(err, JO_EPROTO, "lz4 block too large");
		n = LZ4_decompress_safe(src, dst, (int)srclen, (int)bsize);
		if (n < 0 || (size_t)n != bsize)
			return jo_err_set(err, JO_EPROTO,
					  "lz4 block does not decode to %zu bytes", bsize);
		return 0;
	}
	case JO_COMPRESS_ZSTD: {
		size_t n = ZSTD_decompress(dst, bsize, src, srclen);

		if (ZSTD_isError(n))
			return jo_err_set(err, JO_EPROTO, "zstd block: %s", ZSTD_getErrorName(n));
		if (n != bsize)
			return jo_err_set(err, JO_EPROTO,
					  "zstd block decodes to %zu bytes, its key says %zu", n, bsize);
		return 0;
	}
	}
	return jo_err_set(err, JO_EUNSUPPORTED, "unknown compression %d", compress);
}

int jo_block_encode(int compress, const void *src, size_t len, uint8_t **out,
		    size_t *outlen, struct jo_err *err)
{
	uint8_t *buf;
	size_t cap, n;

	*out = NULL;
	*outlen = 0;
	switch (compress) {
	case JO_COMPRESS_NONE:
		cap = len ? len : 1;
		break;
	case JO_COMPRESS_LZ4:
		if (len > LZ4_MAX_INPUT_SIZE)
			return jo_err_set(err, JO_EINVAL, "block too large for lz4");
		cap = (size_t)LZ4_compressBound((int)len);
		break;
	case JO_COMPRESS_ZSTD:
		cap = ZSTD_compressBound(len);
		break;
	default:
		return jo_err_set(err, JO_EUNSUPPORTED, "unknown compression %d", compress);
	}
	buf = malloc(cap);
	if (!buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (compress == JO_COMPRESS_NONE) {
		memcpy(buf, src, len);
		n = len;
	} else if (compress == JO_COMPRESS_LZ4) {
		int r = LZ4_compress_default(src, (char *)buf, (int)len, (int)cap);

		if (r <= 0) {
			free(buf);
			return jo_err_set(err, JO_EIO, "lz4 compression failed");
		}
		n = (size_t)r;
	} else {
		/* level 1, as JuiceFS writes its zstd blocks */
		n = ZSTD_compress(buf, cap, src, len, 1);
		if (ZSTD_isError(n)) {
			free(buf);
			return jo_err_set(err, JO_EIO, "zstd: %s", ZSTD_getErrorName(n));
		}
	}
	*out = buf;
	*outlen = n;
	return 0;
}
