/*
 * libFuzzer target: the decoders of what a JuiceFS volume stores, which
 * jfsops reads from metadata engines and object stores it does not control
 * (a corrupt or hostile value must give an error, never a wrong answer).
 * The first byte picks the decoder, the rest is its input. Beyond "does
 * not crash":
 *   0 jo_format_parse (the "setting" record): released cleanly either way;
 *   1 jo_meta_decode_attr: succeeds exactly when 63 bytes or more are given;
 *   2 jo_slices_decode: succeeds exactly for a multiple of 24 bytes, gives
 *     len/24 records that encode back to the input; jo_chunk_visible of
 *     those records tiles [0, end of the furthest record) with segments in
 *     order, no overlap, no empty one, each a window of one record (or a
 *     hole), and the last record to cover a byte is the one seen there, or
 *     refuses a record past the chunk (64 MiB) or past its slice's size;
 *   3 jo_block_parse: a parsed key formats back (jo_block_key) to a key
 *     that parses to the same id, index and size;
 *   4 jo_block_decode (none, lz4, zstd; a block size from the input):
 *     fills exactly bsize bytes or fails, never writes past them;
 *   5 jo_trash_hour_parse: a parsed hour name is the name jo_trash_hour_name
 *     gives for its time (years 1000-9999);
 *   6 jo_trash_entry_parse: the parent, inode and name offset agree with
 *     the "PARENT-INODE-NAME" shape (decimal fields, a non-empty name).
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "tests/fuzz/fuzz_util.h"
#include "trash/trash.h"

static void fuzz_format(const uint8_t *d, size_t n)
{
	char *s = fuzz_strndup(d, n);
	struct jo_format f;
	struct jo_err err = { 0 };

	memset(&f, 0, sizeof(f));
	if (jo_format_parse(s, &f, &err) == 0)
		jo_format_release(&f);
	else
		FUZZ_CHECK(err.code != 0 && err.msg[0], "a refused format record gave no error");
	free(s);
}

static void fuzz_attr(const uint8_t *d, size_t n)
{
	struct jo_attr a;
	struct jo_err err = { 0 };
	int rc = jo_meta_decode_attr(d, n, &a, &err);

	FUZZ_CHECK((rc == 0) == (n >= 63), "attr of %zu bytes: rc %d", n, rc);
}

/* Which record (index + 1, 0: none) the last to cover byte p of the chunk. */
static size_t last_cover(const struct jo_slice *r, size_t n, uint64_t p)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (r[i].len && p >= r[i].pos && p < (uint64_t)r[i].pos + r[i].len)
			k = i + 1;
	return k;
}

static void check_visible(const struct jo_slice *r, size_t n)
{
	struct jo_slice *v = NULL;
	size_t nv = 0;
	uint64_t end = 0, at = 0;
	bool corrupt = false;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (!r[i].len)
			continue;
		if ((uint64_t)r[i].pos + r[i].len > end)
			end = (uint64_t)r[i].pos + r[i].len;
		if ((uint64_t)r[i].pos + r[i].len > JO_CHUNK_SIZE ||
		    (r[i].id && (uint64_t)r[i].off + r[i].len > r[i].size))
			corrupt = true;
	}
	rc = jo_chunk_visible(r, n, &v, &nv);
	FUZZ_CHECK(rc == 0 || rc == JO_EPROTO || rc == JO_ENOMEM, "rc %d", rc);
	FUZZ_CHECK((rc == JO_EPROTO) == corrupt, "a %s chunk gave rc %d",
		   corrupt ? "corrupt" : "sound", rc);
	if (rc)
		return;
	for (size_t j = 0; j < nv; j++) {
		uint64_t s = v[j].pos, e = s + v[j].len, mid;
		size_t k;

		FUZZ_CHECK(v[j].len > 0, "segment %zu is empty", j);
		FUZZ_CHECK(s == at, "segment %zu starts at %llu, not %llu", j, (unsigned long long)s,
			   (unsigned long long)at);
		/* the record seen at the segment's first, middle and last byte */
		for (int q = 0; q < 3; q++) {
			mid = q == 0 ? s : q == 1 ? s + (e - s) / 2 : e - 1;
			k = last_cover(r, n, mid);
			if (!k) {
				FUZZ_CHECK(v[j].id == 0, "byte %llu is covered by no record but shows slice %llu",
					   (unsigned long long)mid, (unsigned long long)v[j].id);
				continue;
			}
			const struct jo_slice *w = &r[k - 1];

			if (!w->id) { /* a hole: its size and offset mean nothing */
				FUZZ_CHECK(v[j].id == 0, "byte %llu of a hole shows slice %llu",
					   (unsigned long long)mid, (unsigned long long)v[j].id);
				continue;
			}
			FUZZ_CHECK(v[j].id == w->id && v[j].size == w->size &&
					   (uint64_t)v[j].off + (mid - s) == (uint64_t)w->off + (mid - w->pos),
				   "byte %llu shows slice %llu at %llu, record %zu says slice %llu at %llu",
				   (unsigned long long)mid, (unsigned long long)v[j].id,
				   (unsigned long long)(v[j].off + (mid - s)), k - 1,
				   (unsigned long long)w->id,
				   (unsigned long long)(w->off + (mid - w->pos)));
		}
		at = e;
	}
	FUZZ_CHECK(at == end, "segments end at %llu, records at %llu", (unsigned long long)at,
		   (unsigned long long)end);
	free(v);
}

static void fuzz_slices(const uint8_t *d, size_t n)
{
	struct jo_slice *r = NULL;
	struct jo_err err = { 0 };
	size_t nr = 0;
	int rc = jo_slices_decode(d, n, &r, &nr, &err);

	FUZZ_CHECK((rc == 0) == (n % 24 == 0), "%zu bytes of records: rc %d", n, rc);
	if (rc)
		return;
	FUZZ_CHECK(nr == n / 24, "%zu records from %zu bytes", nr, n);
	for (size_t i = 0; i < nr; i++) {
		uint8_t rec[24];

		jo_slice_encode(&r[i], rec);
		FUZZ_CHECK(!memcmp(rec, d + 24 * i, 24), "record %zu does not encode back", i);
	}
	check_visible(r, nr);
	free(r);
}

static void fuzz_block_key(const uint8_t *d, size_t n)
{
	char *s = fuzz_strndup(d, n), key[256];
	uint64_t id, id2;
	uint32_t indx, bsize, indx2, bsize2;

	if (jo_block_parse(s, &id, &indx, &bsize) == 0) {
		for (int hp = 0; hp < 2; hp++) {
			int k = jo_block_key(key, sizeof(key), "vol", hp, id, indx, bsize);

			FUZZ_CHECK(k > 0, "no key for %llu_%u_%u", (unsigned long long)id, indx, bsize);
			FUZZ_CHECK(jo_block_parse(key, &id2, &indx2, &bsize2) == 0 && id2 == id &&
					   indx2 == indx && bsize2 == bsize,
				   "'%s' does not parse back to %llu_%u_%u", key, (unsigned long long)id,
				   indx, bsize);
		}
	}
	free(s);
}

static void fuzz_block(const uint8_t *d, size_t n)
{
	struct jo_err err = { 0 };
	size_t bsize;
	uint8_t *dst;

	if (n < 3)
		return;
	bsize = ((size_t)d[1] << 8 | d[2]) + 1;
	/* exactly bsize bytes: ASan sees a write past them */
	dst = malloc(bsize);
	if (!dst)
		abort();
	(void)jo_block_decode(d[0] % 3, d + 3, n - 3, dst, bsize, &err);
	free(dst);
}

static void fuzz_hour(const uint8_t *d, size_t n)
{
	char name[32];
	int64_t ts;

	if (jo_trash_hour_parse((const char *)d, n, &ts) != 0)
		return;
	FUZZ_CHECK(n == 13, "an hour name of %zu bytes parsed", n);
	if (d[0] == '0')
		return; /* years before 1000 print without their zeros */
	jo_trash_hour_name(ts, name);
	FUZZ_CHECK(strlen(name) == 13 && !memcmp(name, d, 13), "'%.13s' parsed to %lld, named '%s'",
		   (const char *)d, (long long)ts, name);
}

static void fuzz_entry(const uint8_t *d, size_t n)
{
	const char *s = (const char *)d;
	uint64_t parent, ino, v[2] = { 0, 0 };
	size_t off, i = 0;

	if (jo_trash_entry_parse(s, n, &parent, &ino, &off) != 0)
		return;
	FUZZ_CHECK(off < n, "name offset %zu of %zu bytes", off, n);
	for (int k = 0; k < 2; k++) {
		FUZZ_CHECK(i < off && s[i] >= '0' && s[i] <= '9', "field %d is not decimal", k);
		while (s[i] >= '0' && s[i] <= '9')
			v[k] = v[k] * 10 + (uint64_t)(s[i++] - '0');
		FUZZ_CHECK(s[i] == '-', "field %d ends in 0x%02x", k, (unsigned char)s[i]);
		i++;
	}
	FUZZ_CHECK(i == off && v[0] == parent && v[1] == ino,
		   "parsed %llu-%llu at %zu, the text says %llu-%llu at %zu",
		   (unsigned long long)parent, (unsigned long long)ino, off,
		   (unsigned long long)v[0], (unsigned long long)v[1], i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % 7) {
	case 0: fuzz_format(data + 1, size - 1); break;
	case 1: fuzz_attr(data + 1, size - 1); break;
	case 2: fuzz_slices(data + 1, size - 1); break;
	case 3: fuzz_block_key(data + 1, size - 1); break;
	case 4: fuzz_block(data + 1, size - 1); break;
	case 5: fuzz_hour(data + 1, size - 1); break;
	case 6: fuzz_entry(data + 1, size - 1); break;
	}
	return 0;
}
