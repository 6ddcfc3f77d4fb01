/*
 * parquet.h: a small streaming writer of flat Parquet files (the tables of
 * `jfsops export`), readable by pyarrow, DuckDB and Spark.
 *
 * The file is written front to back through a caller-owned fd, never seeked:
 * "PAR1", the row groups, the footer (Thrift compact FileMetaData), its
 * length and "PAR1". Each column of a row group is one column chunk of
 * DataPage V1 pages: PLAIN values, an RLE/bit-packed definition level per row
 * for nullable columns, each page compressed with zstd (codec ZSTD). No
 * dictionary, no page index, no bloom filter.
 *
 * Rows are built one at a time: one jo_pq_put_*() per column (any order),
 * then jo_pq_end_row(). Every column chunk carries statistics: null_count
 * and the exact min_value/max_value of its non-null values (signed order for
 * the integer types and timestamps, false < true, unsigned byte order for
 * strings), with TypeDefinedOrder column orders in the footer so that readers
 * trust them. A string min or max longer than JO_PQ_STAT_MAX bytes is not
 * written (both bounds are left out of that chunk, null_count stays), as
 * Arrow does, so the footer stays small.
 *
 * Memory: a row group's column chunks are buffered compressed, each column's
 * current page raw. A page is compressed once its raw size (values and
 * levels) reaches opts.page_bytes, or it holds 2^20 rows (booleans, nulls);
 * a row group is written once everything buffered reaches
 * opts.row_group_bytes. So memory is at most about twice row_group_bytes
 * (buffers grow by doubling) plus two pages per column (a single value larger
 * than a page makes its page that large) and the zstd context, plus a few
 * dozen bytes of metadata per column chunk written.
 *
 * A file with no rows has no row group (pyarrow and DuckDB read it as an
 * empty table with the schema).
 *
 * Durability: the writer never calls fsync(); the caller syncs fd before it
 * publishes the file (rename, _SUCCESS marker).
 *
 * Threading: one writer belongs to one thread.
 *
 * Extensions to the API agreed for issue 30: JO_PQ_BINARY (BYTE_ARRAY with no
 * annotation, for names that need not be UTF-8), JO_PQ_TIMESTAMP_US (Spark 4.3
 * reads no nanosecond timestamps unless told to read them as longs),
 * jo_pq_put_str() checks that JO_PQ_STRING values are valid UTF-8,
 * JO_PQ_STAT_MAX, JO_PQ_MAX_VALUE.
 */
#ifndef JO_PARQUET_H
#define JO_PARQUET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_pq_writer;

enum jo_pq_type {
	JO_PQ_INT64,        /* INT64 */
	JO_PQ_INT32,        /* INT32 */
	JO_PQ_STRING,       /* BYTE_ARRAY, String logical type (UTF8): valid UTF-8 only */
	JO_PQ_TIMESTAMP_NS, /* INT64, TIMESTAMP(NANOS, isAdjustedToUTC): ns since the epoch */
	JO_PQ_BOOL,         /* BOOLEAN */
	JO_PQ_BINARY,       /* BYTE_ARRAY, no logical type: any bytes */
	JO_PQ_TIMESTAMP_US, /* INT64, TIMESTAMP(MICROS, isAdjustedToUTC): us since the epoch */
};

/* One column of the table. name is copied; it must be non-empty and unique. */
struct jo_pq_column {
	const char *name;
	enum jo_pq_type type;
	bool nullable;      /* OPTIONAL (jo_pq_put_null allowed) or REQUIRED */
};

struct jo_pq_opts {
	size_t row_group_bytes; /* 0 = 32 MiB of buffered encoded data per row group */
	size_t page_bytes;      /* 0 = 1 MiB of raw page data; at most JO_PQ_MAX_VALUE */
	int zstd_level;         /* 0 = 3; else any level zstd accepts (negative: fast) */
};
#define JO_PQ_OPTS_INIT { 0 }

/* A string min/max longer than this is left out of the chunk's statistics. */
#define JO_PQ_STAT_MAX 4096
/* The longest string or binary value, and the largest page_bytes. */
#define JO_PQ_MAX_VALUE ((size_t)256 << 20)

/*
 * Start a file on fd and write its leading magic. fd is borrowed (never
 * closed) and must be at offset 0 of an empty file, or a pipe. cols and the
 * names are copied. o may be NULL (defaults).
 * Errors: JO_EINVAL (no column, a bad or duplicate name, a bad type or
 * option, fd not at offset 0), JO_ENOMEM, JO_EIO (write). On failure *out is
 * NULL.
 */
int jo_pq_open(struct jo_pq_writer **out, int fd, const struct jo_pq_column *cols,
	       size_t ncols, const struct jo_pq_opts *o, struct jo_err *err);

/*
 * Set column col of the row being built. Each column is set exactly once per
 * row. jo_pq_put_i64 takes JO_PQ_INT64 and JO_PQ_TIMESTAMP_* columns,
 * jo_pq_put_str JO_PQ_STRING and JO_PQ_BINARY ones (s is copied; s may be
 * NULL when len is 0), jo_pq_put_null nullable columns only.
 * Errors: JO_EINVAL (col out of range, wrong type, column already set in this
 * row, null into a required column, a string longer than JO_PQ_MAX_VALUE or
 * not UTF-8 in a JO_PQ_STRING column): the writer is unchanged and usable.
 * JO_ENOMEM: the writer has failed (see below).
 */
int jo_pq_put_i64(struct jo_pq_writer *w, size_t col, int64_t v, struct jo_err *err);
int jo_pq_put_i32(struct jo_pq_writer *w, size_t col, int32_t v, struct jo_err *err);
int jo_pq_put_bool(struct jo_pq_writer *w, size_t col, bool v, struct jo_err *err);
int jo_pq_put_str(struct jo_pq_writer *w, size_t col, const char *s, size_t len,
		  struct jo_err *err);
int jo_pq_put_null(struct jo_pq_writer *w, size_t col, struct jo_err *err);

/*
 * Finish the row. May compress a page and write a row group.
 * Errors: JO_EINVAL when a column was not set: the partial row is dropped and
 * the writer stays usable. JO_EIO (write, zstd), JO_ENOMEM: the writer has
 * failed.
 *
 * After a failure that leaves the writer failed, every call but
 * jo_pq_abort() returns that error again; the file is incomplete.
 */
int jo_pq_end_row(struct jo_pq_writer *w, struct jo_err *err);

/*
 * Write the last row group and the footer, then free w (always, even on
 * error). rows_out (may be NULL) receives the number of rows written. A row
 * that was begun but not ended is an error (JO_EINVAL); a writer that had
 * failed returns its error again. On any error no footer is written and the
 * file is not valid Parquet. JO_EIO, JO_ENOMEM as jo_pq_end_row().
 */
int jo_pq_close(struct jo_pq_writer *w, uint64_t *rows_out, struct jo_err *err);

/* Free w and write nothing more (the file is left incomplete). Accepts NULL. */
void jo_pq_abort(struct jo_pq_writer *w);

#endif
