/*
 * parquet.c: a streaming writer of flat Parquet files, written from the
 * parquet-format specification (parquet.thrift, Encodings.md).
 *
 * Layout of what we write:
 *
 *   "PAR1"
 *   row group 0: column chunk 0: page, page, ...; column chunk 1: ...
 *   row group 1: ...
 *   FileMetaData (Thrift compact protocol)
 *   footer length (LE32), "PAR1"
 *
 * A page is a PageHeader (Thrift compact) followed by the zstd-compressed
 * body of a DataPage V1: for a nullable column the definition levels (RLE/
 * bit-packed hybrid, with its LE32 length prefix), then the non-null values
 * PLAIN-encoded. Columns are flat (max repetition level 0, max definition
 * level 1 when nullable, else 0), so a page holds whole rows, one level per
 * row and no repetition levels at all.
 */
#include "common/parquet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <zstd.h>

#include "common/dynbuf.h"
#include "common/err.h"

#define MiB ((size_t)1 << 20)
#define PQ_MAX_COLUMNS 10000
/* Rows in a page at most: a page of booleans or nulls is small in bytes but
 * its value count and level runs are int32 in the format. */
#define PQ_PAGE_ROWS ((uint32_t)1 << 20)

/* parquet.thrift enum values */
enum {
	PT_BOOLEAN = 0, PT_INT32 = 1, PT_INT64 = 2, PT_BYTE_ARRAY = 6, /* Type */
	PCT_UTF8 = 0, PCT_TIMESTAMP_MICROS = 10,                       /* ConvertedType */
	PREP_REQUIRED = 0, PREP_OPTIONAL = 1,                          /* FieldRepetitionType */
	PENC_PLAIN = 0, PENC_RLE = 3,                                  /* Encoding */
	PCODEC_ZSTD = 6,                                               /* CompressionCodec */
	PPAGE_DATA = 0,                                                /* PageType */
};

/* ---- byte buffers: common/dynbuf.h, unlimited (the writer bounds pages and
 * values itself); a failed add sticks in failed until the buffer is reset ---- */

/* The buffer's bytes, as the encoders below read and patch them. */
static uint8_t *bytes(const struct jo_dynbuf *b)
{
	return (uint8_t *)b->p;
}

static void buf_put(struct jo_dynbuf *b, const void *src, size_t n)
{
	(void)jo_dynbuf_add(b, src, n); /* checked once, through failed */
}

static void buf_byte(struct jo_dynbuf *b, uint8_t c)
{
	buf_put(b, &c, 1);
}

/* Unsigned LEB128 ("varint"): 7 bits a byte, low bits first, high bit = more. */
static void buf_uvarint(struct jo_dynbuf *b, uint64_t v)
{
	while (v >= 0x80) {
		buf_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	buf_byte(b, (uint8_t)v);
}

static void buf_le(struct jo_dynbuf *b, uint64_t v, size_t n)
{
	uint8_t x[8];

	for (size_t i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * i));
	buf_put(b, x, n);
}

/* Empty b; give its memory back when a big value made it larger than keep. */
static void buf_reset(struct jo_dynbuf *b, size_t keep)
{
	if (b->cap > keep)
		jo_dynbuf_release(b);
	else
		jo_dynbuf_reset(b);
}

/* Byte order, a shorter prefix first: the order of Parquet's binary min/max. */
static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0; /* an empty value may have no buffer yet */

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* ---- Thrift compact protocol, the subset FileMetaData and PageHeader use ----
 *
 * A struct is its fields, then a stop byte 0. A field starts with a header
 * byte: the high nibble is the field id's delta from the previous field of
 * the same struct (1..15), the low nibble its type; a field whose delta does
 * not fit is the type byte alone followed by the id as a zigzag varint. Booleans
 * have no value: the type nibble itself is 1 (true) or 2 (false). Integers
 * (i16, i32, enums, i64) are zigzag varints; binary and strings a varint
 * length then the bytes. A list header is one byte, size in the high nibble
 * and element type in the low one, or 0xF then the size as a varint when it
 * is 15 or more; list elements have no field headers. Each nested struct
 * counts its field ids from 0 again, hence the stack of last ids.
 */
enum { TC_TRUE = 1, TC_FALSE = 2, TC_I16 = 4, TC_I32 = 5, TC_I64 = 6, TC_BINARY = 8,
       TC_LIST = 9, TC_STRUCT = 12 };
#define TC_DEPTH 8

struct tc {
	struct jo_dynbuf *b;
	int depth;
	int16_t last[TC_DEPTH];
};

static void tc_init(struct tc *t, struct jo_dynbuf *b)
{
	memset(t, 0, sizeof(*t));
	t->b = b;
}

/* zigzag maps signed to unsigned so that small magnitudes stay short: 0,-1,1,-2 -> 0,1,2,3 */
static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
}

static void tc_field(struct tc *t, int16_t id, uint8_t type)
{
	int delta = id - t->last[t->depth];

	if (delta > 0 && delta <= 15) {
		buf_byte(t->b, (uint8_t)(delta << 4 | type));
	} else {
		buf_byte(t->b, type);
		buf_uvarint(t->b, zigzag(id));
	}
	t->last[t->depth] = id;
}

static void tc_i32(struct tc *t, int16_t id, int32_t v)
{
	tc_field(t, id, TC_I32);
	buf_uvarint(t->b, zigzag(v));
}

static void tc_i64(struct tc *t, int16_t id, int64_t v)
{
	tc_field(t, id, TC_I64);
	buf_uvarint(t->b, zigzag(v));
}

static void tc_bool(struct tc *t, int16_t id, bool v)
{
	tc_field(t, id, v ? TC_TRUE : TC_FALSE);
}

static void tc_i32_value(struct tc *t, int32_t v)
{
	buf_uvarint(t->b, zigzag(v));
}

static void tc_bin_value(struct tc *t, const void *p, size_t n)
{
	buf_uvarint(t->b, n);
	buf_put(t->b, p, n);
}

static void tc_bin(struct tc *t, int16_t id, const void *p, size_t n)
{
	tc_field(t, id, TC_BINARY);
	tc_bin_value(t, p, n);
}

static void tc_list(struct tc *t, int16_t id, uint8_t elem, size_t n)
{
	tc_field(t, id, TC_LIST);
	if (n < 15) {
		buf_byte(t->b, (uint8_t)(n << 4 | elem));
	} else {
		buf_byte(t->b, 0xF0 | elem);
		buf_uvarint(t->b, n);
	}
}

/* Enter a struct that is a list element (no field header). */
static void tc_begin(struct tc *t)
{
	t->depth++;
	t->last[t->depth] = 0;
}

/* Enter a struct that is field id of the current struct. */
static void tc_struct(struct tc *t, int16_t id)
{
	tc_field(t, id, TC_STRUCT);
	tc_begin(t);
}

/* Close the current struct (also the outermost one). */
static void tc_end(struct tc *t)
{
	buf_byte(t->b, 0);
	if (t->depth > 0)
		t->depth--;
}

/* ---- the writer ---- */

enum row_state { ROW_UNSET, ROW_VALUE, ROW_NULL };

struct pq_col {
	char *name;
	enum jo_pq_type type;
	bool nullable;
	/* the row being built */
	enum row_state row;
	size_t row_mark;         /* vals.len before this row's value */
	int64_t row_int;         /* the value, for the statistics (integers, bool) */
	/* the current page */
	struct jo_dynbuf vals;      /* PLAIN values; booleans one bit each, LSB first */
	struct jo_dynbuf levels;    /* nullable: one definition level a byte (0 null, 1 value) */
	uint32_t page_rows;
	uint32_t page_vals;      /* non-null values in the page */
	/* the current column chunk */
	struct jo_dynbuf chunk;     /* page headers and compressed pages */
	uint64_t chunk_rows, chunk_nulls;
	uint64_t chunk_raw;      /* page headers plus uncompressed page bodies */
	bool has_minmax;
	int64_t imin, imax;
	/* Strings: min and max cut to JO_PQ_STAT_MAX + 1 bytes. Cutting keeps the
	 * order between values that differ within their first STAT_MAX + 1 bytes;
	 * values that agree there are both too long to be written anyway. So the
	 * cut min is the true min whenever that fits. */
	struct jo_dynbuf smin, smax;
};

/* What the footer says about one written column chunk. */
struct pq_chunk_meta {
	uint64_t offset, raw_size, size, num_values, nulls;
	uint8_t *min, *max;      /* PLAIN-encoded bounds; NULL when left out */
	size_t min_len, max_len;
};

struct pq_group {
	uint64_t rows, offset, raw_size, size;
	struct pq_chunk_meta *cols;
};

struct jo_pq_writer {
	int fd;
	struct jo_pq_opts o;
	struct pq_col *cols;
	size_t ncols;
	size_t row_set;          /* columns set in the row being built */
	uint64_t off;            /* bytes written = file offset of the next write */
	uint64_t rows, group_rows;
	struct pq_group *groups;
	size_t ngroups, groups_cap;
	struct jo_dynbuf raw, zbuf, hdr;  /* page scratch */
	ZSTD_CCtx *zc;
	int failed;              /* JO_E* code that failed the writer, 0 while usable */
	char failed_msg[200];    /* and what it said */
};

static const char *type_name(enum jo_pq_type t)
{
	switch (t) {
	case JO_PQ_INT64: return "int64";
	case JO_PQ_INT32: return "int32";
	case JO_PQ_STRING: return "string";
	case JO_PQ_TIMESTAMP_NS: return "timestamp_ns";
	case JO_PQ_BOOL: return "bool";
	case JO_PQ_BINARY: return "binary";
	case JO_PQ_TIMESTAMP_US: return "timestamp_us";
	}
	return "?";
}

static int physical_type(enum jo_pq_type t)
{
	switch (t) {
	case JO_PQ_INT32: return PT_INT32;
	case JO_PQ_BOOL: return PT_BOOLEAN;
	case JO_PQ_STRING: case JO_PQ_BINARY: return PT_BYTE_ARRAY;
	default: return PT_INT64;
	}
}

static bool is_bytes(enum jo_pq_type t)
{
	return t == JO_PQ_STRING || t == JO_PQ_BINARY;
}

/* The jo_pq_put_* a column takes: INT64 for int64s and timestamps, STRING for byte arrays. */
static enum jo_pq_type put_kind(enum jo_pq_type t)
{
	if (t == JO_PQ_TIMESTAMP_NS || t == JO_PQ_TIMESTAMP_US)
		return JO_PQ_INT64;
	return is_bytes(t) ? JO_PQ_STRING : t;
}

/* Mark w failed with rc, the jo_err_set() just made on err: later calls say it again. */
static int fail(struct jo_pq_writer *w, struct jo_err *err, int rc)
{
	w->failed = rc;
	snprintf(w->failed_msg, sizeof(w->failed_msg), "%.*s", (int)sizeof(w->failed_msg) - 1,
		 err ? err->msg : "");
	return rc;
}

static int failed_earlier(const struct jo_pq_writer *w, struct jo_err *err)
{
	return jo_err_set(err, w->failed, "parquet: the writer failed earlier: %s", w->failed_msg);
}

static int oom(struct jo_pq_writer *w, struct jo_err *err)
{
	return fail(w, err, jo_err_set(err, JO_ENOMEM, "parquet: out of memory"));
}

static int write_all(struct jo_pq_writer *w, const void *p, size_t n, struct jo_err *err)
{
	const uint8_t *q = p;

	while (n) {
		ssize_t k = write(w->fd, q, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return fail(w, err, jo_err_set(err, JO_EIO, "parquet: write: %s",
						  k < 0 ? strerror(errno) : "no progress"));
		q += k;
		n -= (size_t)k;
		w->off += (uint64_t)k;
	}
	return 0;
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF. */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp, lo;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF) {
			k = 1; cp = c & 0x1F; lo = 0x80;
		} else if (c >= 0xE0 && c <= 0xEF) {
			k = 2; cp = c & 0x0F; lo = 0x800;
		} else if (c >= 0xF0 && c <= 0xF4) {
			k = 3; cp = c & 0x07; lo = 0x10000;
		} else {
			return false;
		}
		if (n - i <= k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3F);
		}
		if (cp < lo || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += k + 1;
	}
	return true;
}

/* Length of the run of equal levels starting at i. */
static size_t run_at(const uint8_t *lv, size_t i, size_t n)
{
	size_t j = i + 1;

	while (j < n && lv[j] == lv[i])
		j++;
	return j - i;
}

/*
 * Definition levels lv[0..n) (0 or 1, so bit width 1) in the RLE/bit-packed
 * hybrid. A run of 8 or more equal levels is an RLE run: varint(count << 1)
 * then the value in one byte. Anything else goes into a bit-packed run:
 * varint(groups << 1 | 1) then groups of 8 levels, one byte each, the first
 * level in the lowest bit. A bit-packed run always holds whole groups, so it
 * can only end early (padded with zeros) at the very end of the page, where
 * the page's value count tells the reader to stop. Runs stay below 2^31
 * values because pages do.
 */
static void rle_levels(struct jo_dynbuf *b, const uint8_t *lv, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t run = run_at(lv, i, n), j = i, groups;

		if (run >= 8) {
			buf_uvarint(b, (uint64_t)run << 1);
			buf_byte(b, lv[i]);
			i += run;
			continue;
		}
		/* whole groups until a run worth an RLE run starts on a group boundary */
		do
			j += 8;
		while (j < n && run_at(lv, j, n) < 8);
		groups = (j - i) / 8;
		buf_uvarint(b, (uint64_t)groups << 1 | 1);
		for (size_t g = 0; g < groups; g++) {
			uint8_t byte = 0;

			for (size_t k = 0; k < 8; k++) {
				size_t x = i + g * 8 + k;

				if (x < n && lv[x])
					byte |= (uint8_t)(1u << k);
			}
			buf_byte(b, byte);
		}
		i = j;
	}
}

/* Compress the column's current page into its chunk. */
static int flush_page(struct jo_pq_writer *w, struct pq_col *c, struct jo_err *err)
{
	struct tc t;
	size_t bound, z;

	if (!c->page_rows)
		return 0;
	buf_reset(&w->raw, 2 * w->o.page_bytes);
	if (c->nullable) {
		size_t at = w->raw.len, n;

		buf_le(&w->raw, 0, 4); /* the levels' byte length, set below */
		rle_levels(&w->raw, bytes(&c->levels), c->levels.len);
		if (w->raw.failed)
			return oom(w, err);
		n = w->raw.len - at - 4;
		for (int i = 0; i < 4; i++)
			bytes(&w->raw)[at + i] = (uint8_t)(n >> (8 * i));
	}
	buf_put(&w->raw, c->vals.p, c->vals.len);
	bound = ZSTD_compressBound(w->raw.len);
	buf_reset(&w->zbuf, 2 * w->o.page_bytes);
	if (w->raw.failed || jo_dynbuf_reserve(&w->zbuf, bound) != 0)
		return oom(w, err);
	z = ZSTD_compress2(w->zc, w->zbuf.p, bound, w->raw.p, w->raw.len);
	if (ZSTD_isError(z))
		return fail(w, err, jo_err_set(err, JO_EIO, "parquet: column '%s': zstd: %s", c->name,
					  ZSTD_getErrorName(z)));
	/* page_bytes and values are at most 256 MiB each: sizes fit the header's i32 */
	if (w->raw.len > INT32_MAX || z > INT32_MAX)
		return fail(w, err, jo_err_set(err, JO_EINVAL, "parquet: column '%s': page too large",
					  c->name));

	buf_reset(&w->hdr, 64 * 1024);
	tc_init(&t, &w->hdr);
	tc_i32(&t, 1, PPAGE_DATA);             /* type */
	tc_i32(&t, 2, (int32_t)w->raw.len);    /* uncompressed_page_size */
	tc_i32(&t, 3, (int32_t)z);             /* compressed_page_size */
	tc_struct(&t, 5);                      /* data_page_header */
	tc_i32(&t, 1, (int32_t)c->page_rows);  /* num_values, nulls included */
	tc_i32(&t, 2, PENC_PLAIN);             /* encoding */
	tc_i32(&t, 3, PENC_RLE);               /* definition_level_encoding */
	tc_i32(&t, 4, PENC_RLE);               /* repetition_level_encoding (none stored) */
	tc_end(&t);
	tc_end(&t);
	buf_put(&c->chunk, w->hdr.p, w->hdr.len);
	buf_put(&c->chunk, w->zbuf.p, z);
	if (w->hdr.failed || c->chunk.failed)
		return oom(w, err);
	c->chunk_raw += w->hdr.len + w->raw.len;
	c->chunk_rows += c->page_rows;
	buf_reset(&c->vals, 2 * w->o.page_bytes);
	buf_reset(&c->levels, 2 * w->o.page_bytes);
	c->page_rows = c->page_vals = 0;
	return 0;
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (q && n)
		memcpy(q, p, n);
	return q;
}

/* The chunk's min/max, PLAIN-encoded (byte arrays without their length). */
static int chunk_bounds(const struct pq_col *c, struct pq_chunk_meta *m)
{
	uint8_t lo[8], hi[8];
	size_t n = 8;

	if (!c->has_minmax)
		return 0;
	if (is_bytes(c->type)) {
		if (c->smin.len > JO_PQ_STAT_MAX || c->smax.len > JO_PQ_STAT_MAX)
			return 0;
		m->min = dup_bytes(c->smin.p, c->smin.len);
		m->max = dup_bytes(c->smax.p, c->smax.len);
		m->min_len = c->smin.len;
		m->max_len = c->smax.len;
	} else {
		if (c->type == JO_PQ_INT32)
			n = 4;
		else if (c->type == JO_PQ_BOOL)
			n = 1;
		for (size_t i = 0; i < n; i++) {
			lo[i] = (uint8_t)((uint64_t)c->imin >> (8 * i));
			hi[i] = (uint8_t)((uint64_t)c->imax >> (8 * i));
		}
		m->min = dup_bytes(lo, n);
		m->max = dup_bytes(hi, n);
		m->min_len = m->max_len = n;
	}
	return m->min && m->max ? 0 : JO_ENOMEM;
}

/* Write the buffered row group: every column's last page, then the chunks in order. */
static int flush_group(struct jo_pq_writer *w, struct jo_err *err)
{
	struct pq_group *g;
	int rc;

	if (!w->group_rows)
		return 0;
	for (size_t i = 0; i < w->ncols; i++) {
		rc = flush_page(w, &w->cols[i], err);
		if (rc)
			return rc;
	}
	if (w->ngroups == w->groups_cap) {
		size_t cap = w->groups_cap ? 2 * w->groups_cap : 16;
		struct pq_group *ng = realloc(w->groups, cap * sizeof(*ng));

		if (!ng)
			return oom(w, err);
		w->groups = ng;
		w->groups_cap = cap;
	}
	g = &w->groups[w->ngroups];
	memset(g, 0, sizeof(*g));
	g->cols = calloc(w->ncols, sizeof(*g->cols));
	if (!g->cols)
		return oom(w, err);
	w->ngroups++;
	g->rows = w->group_rows;
	g->offset = w->off;
	for (size_t i = 0; i < w->ncols; i++) {
		struct pq_col *c = &w->cols[i];
		struct pq_chunk_meta *m = &g->cols[i];

		m->offset = w->off;
		m->size = c->chunk.len;
		m->raw_size = c->chunk_raw;
		m->num_values = c->chunk_rows;
		m->nulls = c->chunk_nulls;
		if (chunk_bounds(c, m))
			return oom(w, err);
		rc = write_all(w, c->chunk.p, c->chunk.len, err);
		if (rc)
			return rc;
		g->raw_size += m->raw_size;
		g->size += m->size;
		buf_reset(&c->chunk, 0); /* chunk sizes vary by column: keep none */
		buf_reset(&c->smin, JO_PQ_STAT_MAX + 1);
		buf_reset(&c->smax, JO_PQ_STAT_MAX + 1);
		c->chunk_rows = c->chunk_nulls = c->chunk_raw = 0;
		c->has_minmax = false;
	}
	w->group_rows = 0;
	return 0;
}

int jo_pq_open(struct jo_pq_writer **out, int fd, const struct jo_pq_column *cols,
	       size_t ncols, const struct jo_pq_opts *o, struct jo_err *err)
{
	struct jo_pq_writer *w = NULL;
	struct jo_pq_opts opts = JO_PQ_OPTS_INIT;
	off_t pos;
	size_t rc;
	int ret;

	if (!out)
		return jo_err_set(err, JO_EINVAL, "parquet: no output handle");
	*out = NULL;
	if (o)
		opts = *o;
	if (!opts.row_group_bytes)
		opts.row_group_bytes = 32 * MiB;
	if (!opts.page_bytes)
		opts.page_bytes = MiB;
	if (!opts.zstd_level)
		opts.zstd_level = 3;
	if (opts.page_bytes > JO_PQ_MAX_VALUE)
		return jo_err_set(err, JO_EINVAL, "parquet: page size %zu above %zu", opts.page_bytes,
				  JO_PQ_MAX_VALUE);
	if (opts.zstd_level < ZSTD_minCLevel() || opts.zstd_level > ZSTD_maxCLevel())
		return jo_err_set(err, JO_EINVAL, "parquet: zstd level %d out of range %d..%d",
				  opts.zstd_level, ZSTD_minCLevel(), ZSTD_maxCLevel());
	if (!cols || ncols == 0 || ncols > PQ_MAX_COLUMNS)
		return jo_err_set(err, JO_EINVAL, "parquet: %zu columns (1..%d)", ncols,
				  PQ_MAX_COLUMNS);
	for (size_t i = 0; i < ncols; i++) {
		if (!cols[i].name || !cols[i].name[0])
			return jo_err_set(err, JO_EINVAL, "parquet: column %zu has no name", i);
		if ((unsigned)cols[i].type > JO_PQ_TIMESTAMP_US)
			return jo_err_set(err, JO_EINVAL, "parquet: column '%s': unknown type %d",
					  cols[i].name, (int)cols[i].type);
		for (size_t j = 0; j < i; j++)
			if (strcmp(cols[i].name, cols[j].name) == 0)
				return jo_err_set(err, JO_EINVAL, "parquet: column '%s' twice",
						  cols[i].name);
	}
	/* offsets in the footer count from the start of the file */
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0 && errno != ESPIPE)
		return jo_err_set(err, JO_EINVAL, "parquet: output: %s", strerror(errno));
	if (pos > 0)
		return jo_err_set(err, JO_EINVAL, "parquet: output is at offset %lld, not 0",
				  (long long)pos);

	w = calloc(1, sizeof(*w));
	if (!w)
		return jo_err_set(err, JO_ENOMEM, "parquet: out of memory");
	w->fd = fd;
	w->o = opts;
	w->cols = calloc(ncols, sizeof(*w->cols));
	w->zc = ZSTD_createCCtx();
	if (!w->cols || !w->zc) {
		ret = jo_err_set(err, JO_ENOMEM, "parquet: out of memory");
		goto out;
	}
	w->ncols = ncols;
	for (size_t i = 0; i < ncols; i++) {
		w->cols[i].name = strdup(cols[i].name);
		w->cols[i].type = cols[i].type;
		w->cols[i].nullable = cols[i].nullable;
		if (!w->cols[i].name) {
			ret = jo_err_set(err, JO_ENOMEM, "parquet: out of memory");
			goto out;
		}
	}
	rc = ZSTD_CCtx_setParameter(w->zc, ZSTD_c_compressionLevel, opts.zstd_level);
	if (ZSTD_isError(rc)) {
		ret = jo_err_set(err, JO_EINVAL, "parquet: zstd level %d: %s", opts.zstd_level,
				 ZSTD_getErrorName(rc));
		goto out;
	}
	ret = write_all(w, "PAR1", 4, err);
	if (ret)
		goto out;
	*out = w;
	w = NULL;
out:
	jo_pq_abort(w);
	return ret;
}

/* The column col, if a value of jo_pq_put_<kind> may be put into it now. */
static int put_col(struct jo_pq_writer *w, size_t col, enum jo_pq_type kind,
		   struct pq_col **out, struct jo_err *err)
{
	struct pq_col *c;

	if (!w)
		return jo_err_set(err, JO_EINVAL, "parquet: no writer");
	if (w->failed)
		return failed_earlier(w, err);
	if (col >= w->ncols)
		return jo_err_set(err, JO_EINVAL, "parquet: no column %zu (of %zu)", col, w->ncols);
	c = &w->cols[col];
	if (put_kind(c->type) != kind)
		return jo_err_set(err, JO_EINVAL, "parquet: column '%s' is %s, not %s", c->name,
				  type_name(c->type), type_name(kind));
	if (c->row != ROW_UNSET)
		return jo_err_set(err, JO_EINVAL, "parquet: column '%s' set twice in row %llu",
				  c->name, (unsigned long long)w->rows);
	c->row_mark = c->vals.len;
	*out = c;
	return 0;
}

/* The value was appended to c->vals: it belongs to the row now. */
static int put_done(struct jo_pq_writer *w, struct pq_col *c, int64_t v, struct jo_err *err)
{
	if (c->vals.failed)
		return oom(w, err);
	c->row = ROW_VALUE;
	c->row_int = v;
	w->row_set++;
	return 0;
}

int jo_pq_put_i64(struct jo_pq_writer *w, size_t col, int64_t v, struct jo_err *err)
{
	struct pq_col *c;
	int rc = put_col(w, col, JO_PQ_INT64, &c, err);

	if (rc)
		return rc;
	buf_le(&c->vals, (uint64_t)v, 8);
	return put_done(w, c, v, err);
}

int jo_pq_put_i32(struct jo_pq_writer *w, size_t col, int32_t v, struct jo_err *err)
{
	struct pq_col *c;
	int rc = put_col(w, col, JO_PQ_INT32, &c, err);

	if (rc)
		return rc;
	buf_le(&c->vals, (uint32_t)v, 4);
	return put_done(w, c, v, err);
}

int jo_pq_put_bool(struct jo_pq_writer *w, size_t col, bool v, struct jo_err *err)
{
	struct pq_col *c;
	uint8_t bit;
	int rc = put_col(w, col, JO_PQ_BOOL, &c, err);

	if (rc)
		return rc;
	/* PLAIN booleans are packed 8 a byte, the first in the lowest bit */
	if (c->vals.len <= c->page_vals / 8)
		buf_byte(&c->vals, 0);
	if (c->vals.failed)
		return oom(w, err);
	bit = (uint8_t)(1u << (c->page_vals % 8));
	if (v)
		bytes(&c->vals)[c->page_vals / 8] |= bit;
	else
		bytes(&c->vals)[c->page_vals / 8] &= (uint8_t)~bit;
	return put_done(w, c, v, err);
}

int jo_pq_put_str(struct jo_pq_writer *w, size_t col, const char *s, size_t len,
		  struct jo_err *err)
{
	struct pq_col *c;
	int rc = put_col(w, col, JO_PQ_STRING, &c, err);

	if (rc)
		return rc;
	if (len > JO_PQ_MAX_VALUE)
		return jo_err_set(err, JO_EINVAL, "parquet: column '%s': value of %zu bytes "
				  "(at most %zu)", c->name, len, JO_PQ_MAX_VALUE);
	if (len && !s)
		return jo_err_set(err, JO_EINVAL, "parquet: column '%s': no value", c->name);
	if (c->type == JO_PQ_STRING && !utf8_valid((const uint8_t *)s, len))
		return jo_err_set(err, JO_EINVAL, "parquet: column '%s': value is not UTF-8 "
				  "(row %llu)", c->name, (unsigned long long)w->rows);
	buf_le(&c->vals, len, 4); /* PLAIN byte array: LE32 length, then the bytes */
	buf_put(&c->vals, s, len);
	return put_done(w, c, 0, err);
}

int jo_pq_put_null(struct jo_pq_writer *w, size_t col, struct jo_err *err)
{
	struct pq_col *c;
	enum jo_pq_type t = w && col < w->ncols ? put_kind(w->cols[col].type) : JO_PQ_INT64;
	int rc = put_col(w, col, t, &c, err);

	if (rc)
		return rc;
	if (!c->nullable)
		return jo_err_set(err, JO_EINVAL, "parquet: null in required column '%s'", c->name);
	c->row = ROW_NULL;
	w->row_set++;
	return 0;
}

/* Fold the row's value of c into the chunk's statistics. */
static int stats_add(struct pq_col *c)
{
	if (is_bytes(c->type)) {
		const uint8_t *p = bytes(&c->vals) + c->row_mark + 4;
		size_t n = c->vals.len - c->row_mark - 4;

		if (n > JO_PQ_STAT_MAX + 1)
			n = JO_PQ_STAT_MAX + 1; /* see smin */
		if (!c->has_minmax || bytes_cmp(p, n, bytes(&c->smin), c->smin.len) < 0) {
			jo_dynbuf_reset(&c->smin);
			buf_put(&c->smin, p, n);
		}
		if (!c->has_minmax || bytes_cmp(p, n, bytes(&c->smax), c->smax.len) > 0) {
			jo_dynbuf_reset(&c->smax);
			buf_put(&c->smax, p, n);
		}
		if (c->smin.failed || c->smax.failed)
			return JO_ENOMEM;
	} else if (!c->has_minmax) {
		c->imin = c->imax = c->row_int;
	} else if (c->row_int < c->imin) {
		c->imin = c->row_int;
	} else if (c->row_int > c->imax) {
		c->imax = c->row_int;
	}
	c->has_minmax = true;
	return 0;
}

int jo_pq_end_row(struct jo_pq_writer *w, struct jo_err *err)
{
	size_t buffered = 0;
	int rc;

	if (!w)
		return jo_err_set(err, JO_EINVAL, "parquet: no writer");
	if (w->failed)
		return failed_earlier(w, err);
	if (w->row_set < w->ncols) {
		const char *missing = NULL;

		/* drop the partial row: the values put are the last ones of their pages */
		for (size_t i = 0; i < w->ncols; i++) {
			struct pq_col *c = &w->cols[i];

			if (c->row == ROW_UNSET && !missing)
				missing = c->name;
			if (c->row == ROW_VALUE)
				c->vals.len = c->row_mark;
			c->row = ROW_UNSET;
		}
		w->row_set = 0;
		return jo_err_set(err, JO_EINVAL, "parquet: row %llu: column '%s' not set",
				  (unsigned long long)w->rows, missing);
	}
	for (size_t i = 0; i < w->ncols; i++) {
		struct pq_col *c = &w->cols[i];

		if (c->nullable)
			buf_byte(&c->levels, c->row == ROW_VALUE);
		if (c->levels.failed)
			return oom(w, err);
		if (c->row == ROW_VALUE) {
			if (stats_add(c))
				return oom(w, err);
			c->page_vals++;
		} else {
			c->chunk_nulls++;
		}
		c->page_rows++;
		c->row = ROW_UNSET;
	}
	w->row_set = 0;
	w->rows++;
	w->group_rows++;
	for (size_t i = 0; i < w->ncols; i++) {
		struct pq_col *c = &w->cols[i];

		if (c->vals.len + c->levels.len >= w->o.page_bytes || c->page_rows >= PQ_PAGE_ROWS) {
			rc = flush_page(w, c, err);
			if (rc)
				return rc;
		}
		buffered += c->chunk.len + c->vals.len + c->levels.len;
	}
	if (buffered >= w->o.row_group_bytes)
		return flush_group(w, err);
	return 0;
}

/* FileMetaData: the schema, the row groups and their column chunks. */
static void footer(const struct jo_pq_writer *w, struct jo_dynbuf *b)
{
	static const char created_by[] = "jfsops version " JO_VERSION;
	struct tc t;

	tc_init(&t, b);
	tc_i32(&t, 1, 1);                                  /* version */
	tc_list(&t, 2, TC_STRUCT, w->ncols + 1);           /* schema: root, then the leaves */
	tc_begin(&t);
	tc_bin(&t, 4, "schema", 6);                        /* name */
	tc_i32(&t, 5, (int32_t)w->ncols);                  /* num_children */
	tc_end(&t);
	for (size_t i = 0; i < w->ncols; i++) {
		const struct pq_col *c = &w->cols[i];

		tc_begin(&t);
		tc_i32(&t, 1, physical_type(c->type));     /* type */
		tc_i32(&t, 3, c->nullable ? PREP_OPTIONAL : PREP_REQUIRED);
		tc_bin(&t, 4, c->name, strlen(c->name));   /* name */
		if (c->type == JO_PQ_STRING) {
			tc_i32(&t, 6, PCT_UTF8);           /* converted_type */
			tc_struct(&t, 10);                 /* logicalType: */
			tc_struct(&t, 1);                  /*   STRING */
			tc_end(&t);
			tc_end(&t);
		} else if (c->type == JO_PQ_TIMESTAMP_NS || c->type == JO_PQ_TIMESTAMP_US) {
			bool ns = c->type == JO_PQ_TIMESTAMP_NS;

			/* no converted type exists for nanoseconds */
			if (!ns)
				tc_i32(&t, 6, PCT_TIMESTAMP_MICROS);
			tc_struct(&t, 10);                 /* logicalType: */
			tc_struct(&t, 8);                  /*   TIMESTAMP */
			tc_bool(&t, 1, true);              /*     isAdjustedToUTC */
			tc_struct(&t, 2);                  /*     unit: */
			tc_struct(&t, ns ? 3 : 2);         /*       NANOS or MICROS */
			tc_end(&t);
			tc_end(&t);
			tc_end(&t);
			tc_end(&t);
		}
		tc_end(&t);
	}
	tc_i64(&t, 3, (int64_t)w->rows);                   /* num_rows */
	tc_list(&t, 4, TC_STRUCT, w->ngroups);             /* row_groups */
	for (size_t g = 0; g < w->ngroups; g++) {
		const struct pq_group *rg = &w->groups[g];

		tc_begin(&t);
		tc_list(&t, 1, TC_STRUCT, w->ncols);       /* columns */
		for (size_t i = 0; i < w->ncols; i++) {
			const struct pq_col *c = &w->cols[i];
			const struct pq_chunk_meta *m = &rg->cols[i];

			tc_begin(&t);                      /* ColumnChunk */
			tc_i64(&t, 2, 0);                  /* file_offset: 0, no metadata outside the footer */
			tc_struct(&t, 3);                  /* meta_data */
			tc_i32(&t, 1, physical_type(c->type));
			tc_list(&t, 2, TC_I32, c->nullable ? 2 : 1); /* encodings */
			tc_i32_value(&t, PENC_PLAIN);
			if (c->nullable)
				tc_i32_value(&t, PENC_RLE);
			tc_list(&t, 3, TC_BINARY, 1);      /* path_in_schema */
			tc_bin_value(&t, c->name, strlen(c->name));
			tc_i32(&t, 4, PCODEC_ZSTD);        /* codec */
			tc_i64(&t, 5, (int64_t)m->num_values);
			tc_i64(&t, 6, (int64_t)m->raw_size);  /* total_uncompressed_size */
			tc_i64(&t, 7, (int64_t)m->size);      /* total_compressed_size */
			tc_i64(&t, 9, (int64_t)m->offset);    /* data_page_offset */
			tc_struct(&t, 12);                 /* statistics */
			tc_i64(&t, 3, (int64_t)m->nulls);  /* null_count */
			if (m->min) {
				tc_bin(&t, 5, m->max, m->max_len);  /* max_value */
				tc_bin(&t, 6, m->min, m->min_len);  /* min_value */
				tc_bool(&t, 7, true);               /* is_max_value_exact */
				tc_bool(&t, 8, true);               /* is_min_value_exact */
			}
			tc_end(&t);                        /* statistics */
			tc_end(&t);                        /* meta_data */
			tc_end(&t);                        /* ColumnChunk */
		}
		tc_i64(&t, 2, (int64_t)rg->raw_size);      /* total_byte_size */
		tc_i64(&t, 3, (int64_t)rg->rows);          /* num_rows */
		tc_i64(&t, 5, (int64_t)rg->offset);        /* file_offset */
		tc_i64(&t, 6, (int64_t)rg->size);          /* total_compressed_size */
		tc_end(&t);
	}
	tc_bin(&t, 6, created_by, sizeof(created_by) - 1);
	/* TypeDefinedOrder for every leaf: min_value/max_value follow the column's
	 * type (signed integers, unsigned bytes), so readers may use them */
	tc_list(&t, 7, TC_STRUCT, w->ncols);               /* column_orders */
	for (size_t i = 0; i < w->ncols; i++) {
		tc_begin(&t);                              /* ColumnOrder */
		tc_struct(&t, 1);                          /* TYPE_ORDER */
		tc_end(&t);
		tc_end(&t);
	}
	tc_end(&t);
}

int jo_pq_close(struct jo_pq_writer *w, uint64_t *rows_out, struct jo_err *err)
{
	struct jo_dynbuf f = JO_DYNBUF_INIT(JO_DYNBUF_UNLIMITED);
	int rc;

	if (rows_out)
		*rows_out = 0;
	if (!w)
		return jo_err_set(err, JO_EINVAL, "parquet: no writer");
	if (w->failed) {
		rc = failed_earlier(w, err);
		goto out;
	}
	if (w->row_set) {
		rc = jo_err_set(err, JO_EINVAL, "parquet: row %llu not ended",
				(unsigned long long)w->rows);
		goto out;
	}
	rc = flush_group(w, err);
	if (rc)
		goto out;
	footer(w, &f);
	if (f.len > UINT32_MAX) {
		rc = jo_err_set(err, JO_EINVAL, "parquet: footer of %zu bytes", f.len);
		goto out;
	}
	buf_le(&f, f.len, 4);
	buf_put(&f, "PAR1", 4);
	if (f.failed) {
		rc = oom(w, err);
		goto out;
	}
	rc = write_all(w, f.p, f.len, err);
	if (rc)
		goto out;
	if (rows_out)
		*rows_out = w->rows;
out:
	jo_dynbuf_release(&f);
	jo_pq_abort(w);
	return rc;
}

void jo_pq_abort(struct jo_pq_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->ncols; i++) {
		struct pq_col *c = &w->cols[i];

		free(c->name);
		jo_dynbuf_release(&c->vals);
		jo_dynbuf_release(&c->levels);
		jo_dynbuf_release(&c->chunk);
		jo_dynbuf_release(&c->smin);
		jo_dynbuf_release(&c->smax);
	}
	for (size_t g = 0; g < w->ngroups; g++) {
		for (size_t i = 0; w->groups[g].cols && i < w->ncols; i++) {
			free(w->groups[g].cols[i].min);
			free(w->groups[g].cols[i].max);
		}
		free(w->groups[g].cols);
	}
	free(w->groups);
	free(w->cols);
	jo_dynbuf_release(&w->raw);
	jo_dynbuf_release(&w->zbuf);
	jo_dynbuf_release(&w->hdr);
	ZSTD_freeCCtx(w->zc);
	free(w);
}
