/*
 * jfs.h: the JuiceFS data layout: slice records, visible segments of a chunk,
 * block keys, block decoding, and a volume handle (metadata + object store
 * opened from the volume's own format record).
 *
 * Reference: ../shared/spec/juicefs-format.md §2, §3.5, §3.6, §8.2.
 */
#ifndef JO_JFS_H
#define JO_JFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/meta.h"

struct jo_err;
struct jo_obj;

/* One 24-byte slice record, or one visible segment of a chunk. */
struct jo_slice {
	uint32_t pos;   /* position inside the 64 MiB chunk */
	uint64_t id;    /* slice id; 0 = hole */
	uint32_t size;  /* total size of slice id (defines its block keys) */
	uint32_t off;   /* offset of the visible window inside the slice */
	uint32_t len;   /* length of the visible window */
};

/* Decode/encode one 24-byte big-endian record. */
void jo_slice_decode(const uint8_t rec[24], struct jo_slice *out);
void jo_slice_encode(const struct jo_slice *s, uint8_t rec[24]);
/*
 * Decode a chunk value (concatenated records). JO_EPROTO when len is not a
 * multiple of 24. *out is malloc'd (NULL when n == 0).
 */
int jo_slices_decode(const uint8_t *raw, size_t len, struct jo_slice **out,
		     size_t *n, struct jo_err *err);

/*
 * Resolve overlapping records exactly as JuiceFS does (later record wins):
 * the visible segments from chunk position 0 to the end of the last record,
 * gaps filled with id-0 segments, adjacent pieces kept separate. *out is
 * malloc'd; returns 0, JO_ENOMEM, or JO_EPROTO for a corrupt record (one
 * that reaches past the chunk's 64 MiB, or whose window off+len lies past
 * its slice's size; jo_chunk_err words the error).
 */
int jo_chunk_visible(const struct jo_slice *recs, size_t n, struct jo_slice **out,
		     size_t *nout);

/* The error of a failed jo_chunk_visible (rc) for chunk indx of inode ino. */
int jo_chunk_err(struct jo_err *err, int rc, uint64_t ino, uint32_t indx);

/*
 * Fragmentation of one chunk: bytes written by its records (holes not
 * counted) and how many of them later records hide. 0, JO_ENOMEM or
 * JO_EPROTO (as jo_chunk_visible).
 */
int jo_chunk_hidden(const struct jo_slice *recs, size_t n, uint64_t *written,
		    uint64_t *hidden);

/* Histogram of records per chunk: buckets 1, 2, 3-4, 5-8, ..., >1024. */
#define JO_HIST_BUCKETS 12
int jo_hist_bucket(uint64_t n);
void jo_hist_label(int bucket, char *buf, size_t cap);
/* The text report's "records per chunk:" table on stdout: one line per
 * bucket that is not empty. */
void jo_hist_print(const uint64_t hist[JO_HIST_BUCKETS]);

/* Block layout of a slice. bs = block size in bytes. */
static inline uint32_t jo_slice_nblocks(uint32_t size, uint32_t bs)
{
	return size ? (size - 1) / bs + 1 : 0;
}
static inline uint32_t jo_block_len(uint32_t size, uint32_t bs, uint32_t indx)
{
	uint32_t rest = size - indx * bs;
	return rest < bs ? rest : bs;
}

/*
 * The full object key of block indx of slice id, whose length is bsize:
 * "NAME/chunks/{id/1e6}/{id/1e3}/{id}_{indx}_{bsize}" or, with hash_prefix,
 * "NAME/chunks/{HEX2(id%256)}/{id/1e6}/{id}_{indx}_{bsize}". Returns the
 * length written (excluding NUL) or -1 if cap is too small.
 */
int jo_block_key(char *buf, size_t cap, const char *volname, bool hash_prefix,
		 uint64_t id, uint32_t indx, uint32_t bsize);
/*
 * Parse a block basename "{id}_{indx}_{bsize}" (exactly 3 decimal fields);
 * a full key is accepted too (the part after the last '/'). Returns 0, or
 * JO_EINVAL for anything else (temp files, foreign objects).
 */
int jo_block_parse(const char *key, uint64_t *id, uint32_t *indx, uint32_t *bsize);
/* The gc size rule (§2.1): is block (indx, bsize) valid for slice size? */
bool jo_block_valid(uint32_t slice_size, uint32_t bs, uint32_t indx, uint32_t bsize);

enum jo_compress { JO_COMPRESS_NONE = 0, JO_COMPRESS_LZ4, JO_COMPRESS_ZSTD };
/* "none"/""/NULL, "lz4", "zstd" (case-insensitive); -1 when unknown. */
int jo_compress_parse(const char *name);
/*
 * Decode a stored block into dst (exactly bsize bytes). JO_EPROTO when the
 * body does not decode to exactly bsize bytes.
 */
int jo_block_decode(int compress, const void *src, size_t srclen, void *dst,
		    size_t bsize, struct jo_err *err);
/* Encode a block for storage; *out malloc'd. */
int jo_block_encode(int compress, const void *src, size_t len, uint8_t **out,
		    size_t *outlen, struct jo_err *err);

/* ---- a volume: metadata + object store from the format record ---- */

struct jo_vol_opts {
	const char *meta_url;
	const char *meta_password;  /* a password missing from the URL ($META_PASSWORD) */
	const char *meta_redis_password; /* Redis: taken before meta_password ($REDIS_PASSWORD) */
	const char *meta_sentinel_password; /* Redis Sentinel: the sentinels' ($SENTINEL_PASSWORD) */
	bool meta_read_only;        /* this command never changes the metadata */
	/* Overrides of the stored storage settings (NULL: use the format's). */
	const char *bucket;
	const char *access_key;
	const char *secret_key;
	const char *session_token;
	const char *region;
	bool insecure;           /* skip TLS verification */
	int addressing;          /* 0 from the bucket URL, 1 path style (profile path_style=1) */
	bool list_v1;            /* ListObjects V1 (profile list_v1=1) */
	int max_conns;           /* object-store connection pool (0: default) */
	bool retries_set;        /* retries below replaces the object client's default */
	int retries;             /* per-request retries (throttled replies: twice as many) */
	bool list_temp_files;    /* file storage: list leftover ".jfs.*.tmp.*" files */
	bool list_links;         /* file storage: report symlinks in listings (is_link) */
};

/* An open volume. Fields are read-only for callers. */
struct jo_vol {
	struct jo_meta *meta;
	struct jo_obj *obj;
	struct jo_format fmt;
	uint32_t block_size;     /* bytes */
	int compress;            /* enum jo_compress */
	bool is_clone;           /* shares obj and fmt with its parent */
};

/*
 * Open the metadata engine, load the format, and open the object store the
 * format names (with overrides). Encrypted volumes open (metadata works)
 * but jo_vol_read() refuses with JO_EUNSUPPORTED.
 */
int jo_vol_open(struct jo_vol **out, const struct jo_vol_opts *opts, struct jo_err *err);
void jo_vol_close(struct jo_vol *v);
/*
 * A handle for another thread: its own metadata connection, the parent's
 * object client (thread-safe) and format. Close clones before the parent.
 */
int jo_vol_clone(struct jo_vol *v, struct jo_vol **out, struct jo_err *err);
/* Re-read the format record (TrashDays and friends may change under us). */
int jo_vol_reload_format(struct jo_vol *v, struct jo_err *err);
/* The key of a block of this volume. */
int jo_vol_block_key(const struct jo_vol *v, char *buf, size_t cap, uint64_t id,
		     uint32_t indx, uint32_t bsize);

/*
 * Read bytes [off, off+len) of regular file ino (clamped to its length),
 * streamed to cb in order. Holes read as zeros. Blocks are fetched whole and
 * decoded with the volume's compression (ranged GETs when uncompressed).
 * JO_ENOTFOUND (with the block key in the message) when a block is missing.
 */
typedef int (*jo_vol_write_cb)(const void *data, size_t len, void *payload);
int jo_vol_read(struct jo_vol *v, uint64_t ino, uint64_t off, uint64_t len,
		jo_vol_write_cb cb, void *payload, struct jo_err *err);

/*
 * Read bytes [off, off+len) of slice (id, size) itself (not of a file),
 * streamed to cb. Used by compaction to copy the visible parts of old slices.
 */
int jo_vol_read_slice(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t off,
		      uint32_t len, jo_vol_write_cb cb, void *payload, struct jo_err *err);

/*
 * Bytes [lo, hi) of block indx of slice (id, size), decoded, into dst
 * (hi - lo bytes). Uncompressed volumes read just those bytes (a ranged GET
 * unless they are the whole block); compressed blocks are read and decoded
 * whole. JO_ENOTFOUND (the key in the message) when the block is missing,
 * JO_EPROTO when it has another length than its key says. Thread-safe.
 */
int jo_vol_read_block(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t indx, uint32_t lo,
		      uint32_t hi, uint8_t *dst, struct jo_err *err);

/*
 * A reader of slice bytes that keeps the last cache_blocks decoded blocks,
 * for callers that revisit blocks (compaction copies many windows of the
 * same old slices). One per thread.
 */
struct jo_vol_reader;
int jo_vol_reader_new(struct jo_vol *v, int cache_blocks, struct jo_vol_reader **out,
		      struct jo_err *err);
void jo_vol_reader_free(struct jo_vol_reader *vr);
int jo_vol_reader_slice(struct jo_vol_reader *vr, uint64_t id, uint32_t size, uint32_t off,
			uint32_t len, jo_vol_write_cb cb, void *payload, struct jo_err *err);

/*
 * Produce the bytes of a new slice: fill dst (len bytes) with slice bytes
 * [off, off+len). Return 0 or a JO_E* code (with err set).
 */
typedef int (*jo_vol_source_cb)(uint8_t *dst, uint32_t off, uint32_t len, void *payload,
				struct jo_err *err);
/*
 * Write slice `id` of `size` bytes: one object per block, encoded with the
 * volume's compression, keyed as JuiceFS keys them. `src` is asked for each
 * block's bytes in order. Every block is created only (jo_obj_put_opts
 * create_only): a key that is taken (a fresh id's keys never are) fails the
 * write with JO_EEXIST and its object is left as it was. On any failure the
 * blocks this call created are deleted again (best effort; never one it
 * found taken) and the error is returned.
 */
int jo_vol_write_slice(struct jo_vol *v, uint64_t id, uint32_t size, jo_vol_source_cb src,
		       void *payload, struct jo_err *err);

/*
 * Delete every block object of slice (id, size). A missing block counts as
 * deleted. *deleted_out (may be NULL) gets the number of keys removed or
 * already absent; a per-key failure returns JO_EIO with the first failing key.
 */
int jo_vol_delete_slice(struct jo_vol *v, uint64_t id, uint32_t size, uint32_t *deleted_out,
			struct jo_err *err);

#endif
