/*
 * warmup.h: targeted cache warmup of JuiceFS blocks.
 *
 * Three pieces, each usable alone:
 *
 *  1. Range lists: jo_warmup_parse_line() turns one line of a ranges file
 *     into (path, offset, length) triples. Accepted line forms (detected per
 *     line): JSON Lines {"file"|"path": P, "offset": N, "length": N} (objects
 *     whose "type" is present and not "range" are skipped), CSV `P,OFF,LEN`
 *     (RFC 4180 quoting of P; a `file,offset,length` header is skipped), the
 *     `juicefs warmup -f` form `P [S-E;S-E]` (E exclusive; also the older
 *     bracket-less `P S-E;S-E`), plain `P OFF LEN`, and a bare `P` (the whole
 *     file). Blank lines and lines starting with '#' are skipped.
 *
 *  2. The exact mapping of a file byte range to block objects (spec §8.2):
 *     jo_warmup_map_chunk() is the pure part (visible segments of one chunk
 *     -> blocks), struct jo_warmup_mapper adds the metadata reads.
 *     Every block also gets the file offset a reader through a FUSE mount
 *     should read so that the client fetches and caches exactly that block
 *     (the "anchor", see enum jo_warmup_anchor).
 *
 *  3. Reading through a mount: jo_warmup_mount_probe() reads MP/.config,
 *     jo_warmup_mount_stats() the object counters of MP/.stats, and
 *     jo_warmup_read_byte() does one O_DIRECT one-byte pread on a fresh
 *     descriptor (a fresh descriptor starts a fresh JuiceFS read session, so
 *     the client's own readahead does not start).
 *
 * Why one byte at the block's first byte: a JuiceFS client (pkg/chunk,
 * rSlice.ReadAt) loads and caches the WHOLE block when a read starts at the
 * block's offset 0 (or is longer than a quarter block); a shorter read in the
 * middle of a block becomes a ranged GET that caches nothing by itself (only
 * the client's background prefetcher, --prefetch N > 0, then fetches the
 * whole block). A read at file offset 0 turns the client's readahead on at
 * once (one block ahead), so a block that starts at file offset 0 is read
 * at offset 1 when the mount prefetches. A block left to the prefetcher is
 * waited for: until its file shows in the disk cache, or (memory cache) by a
 * second read that joins the full load. Writing into the client's cache
 * directory is never done: its files carry version-dependent checksums
 * (spec §2.6).
 */
#ifndef JO_WARMUP_H
#define JO_WARMUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;
struct jo_slice;

/* ---- 1. range lists ---- */

/* Length meaning "to the end of the file" (a bare path line). */
#define JO_WARMUP_WHOLE UINT64_MAX

/*
 * Called once per range of a line. path is NUL-terminated and borrowed for
 * the call. A non-zero return stops parsing and is returned.
 */
typedef int (*jo_warmup_range_cb)(const char *path, uint64_t off, uint64_t len, void *payload);

/*
 * Parse one line (without or with its trailing newline). Returns 0 (also for
 * skipped lines), the callback's non-zero value, or JO_EINVAL with a message
 * saying what is wrong (the caller adds the line number). *skipped, when not
 * NULL, is set when the line carried no range (blank, comment, header,
 * non-range JSON record).
 */
int jo_warmup_parse_line(const char *line, size_t len, jo_warmup_range_cb cb, void *payload,
			 bool *skipped, struct jo_err *err);

/* ---- 2. byte range -> blocks ---- */

/*
 * How a block can be made resident through a mount, best first (the value
 * is also the sort rank when duplicates are merged).
 */
enum jo_warmup_anchor {
	/* the block's first byte is visible at file offset anchor > 0:
	 * a one-byte read there loads and caches the whole block */
	JO_WARMUP_AT_START = 0,
	/* the block's first byte is at file offset 0 (readahead would start);
	 * alt is the next visible byte of the block, or JO_WARMUP_NONE */
	JO_WARMUP_AT_ZERO = 1,
	/* the block's first byte is not visible in the file (overwritten or
	 * cut by a later slice): anchor is its first visible byte; only a
	 * prefetching mount (or a compressed volume) caches the whole block */
	JO_WARMUP_PARTIAL = 2,
	/* no byte of the block is visible in the file (a later slice hides
	 * all of it), but the block belongs to a slice the file still shows:
	 * the mount's own whole-file eviction removes it; no read caches it */
	JO_WARMUP_HIDDEN = 3,
};
#define JO_WARMUP_NONE UINT64_MAX

struct jo_warmup_block {
	uint64_t id;        /* slice id (never 0) */
	uint32_t indx;      /* block index in the slice */
	uint32_t bsize;     /* block length (the key's size field) */
	uint32_t boff;      /* first needed byte inside the block */
	uint32_t blen;      /* needed bytes inside the block (this range) */
	int anchor_kind;    /* enum jo_warmup_anchor */
	uint64_t anchor;    /* file offset to read */
	uint64_t alt;       /* second choice, or JO_WARMUP_NONE */
};

typedef int (*jo_warmup_block_cb)(const struct jo_warmup_block *b, void *payload);

/*
 * Map chunk-relative bytes [lo, hi) of chunk indx of a file of length flen
 * to blocks, given the chunk's visible segments (jo_chunk_visible()) and the
 * block size bs. Holes produce nothing; a block touched by several segments
 * is reported once per segment (callers deduplicate). Bytes at or past flen
 * are never mapped. Returns 0 or the callback's non-zero value.
 */
int jo_warmup_map_chunk(const struct jo_slice *vis, size_t nvis, uint32_t indx, uint64_t flen,
			uint32_t lo, uint32_t hi, uint32_t bs, jo_warmup_block_cb cb,
			void *payload);

/*
 * A mapper: reads chunk records through a metadata handle (not owned; one
 * thread) and keeps the visible segments of the last chunk it read, so
 * consecutive ranges in one chunk cost one metadata read.
 */
struct jo_warmup_mapper;
int jo_warmup_mapper_new(struct jo_warmup_mapper **out, struct jo_meta *m, uint32_t bs,
			 struct jo_err *err);
void jo_warmup_mapper_free(struct jo_warmup_mapper *mp);
/*
 * Map file bytes [off, off+len) of regular file ino of length flen (clamped
 * to flen). Errors: JO_EPROTO (corrupt chunk), the engine's errors, or the
 * callback's value.
 */
int jo_warmup_map_range(struct jo_warmup_mapper *mp, uint64_t ino, uint64_t flen, uint64_t off,
			uint64_t len, jo_warmup_block_cb cb, void *payload, struct jo_err *err);
/* Metadata chunk reads done so far (for tests and statistics). */
uint64_t jo_warmup_mapper_chunk_reads(const struct jo_warmup_mapper *mp);
/*
 * Every block of every slice that regular file ino (length flen) shows in
 * some chunk: the unit a JuiceFS mount evicts or checks when it is given
 * the whole file (pkg/vfs/fill.go: every block of each visible slice, not
 * only its visible part). Blocks with a visible first byte come with their
 * anchors as jo_warmup_map_range() gives them; blocks of which no byte is
 * visible come once per chunk with anchor_kind JO_WARMUP_HIDDEN. A block may
 * be reported more than once (callers deduplicate).
 */
int jo_warmup_file_blocks(struct jo_warmup_mapper *mp, uint64_t ino, uint64_t flen,
			  jo_warmup_block_cb cb, void *payload, struct jo_err *err);

/* ---- 3. a JuiceFS FUSE mount ---- */

/* What MP/.config says (fields that decide how to read). Strings owned. */
struct jo_warmup_mount {
	char *uuid;           /* Format.UUID */
	char *name;           /* Format.Name */
	char *subdir;         /* the volume directory mounted at MP ("" = root) */
	uint32_t block_size;  /* Chunk.BlockSize */
	uint64_t cache_size;  /* Chunk.CacheSize, bytes (0 = no block cache) */
	bool cache_full_block;/* Chunk.CacheFullBlock (false: --cache-partial-only) */
	bool seekable;        /* no compression, no encryption: ranged GETs happen */
	int prefetch;         /* Chunk.Prefetch */
	uint64_t readahead;   /* Chunk.Readahead, bytes */
	char *stats_path;     /* MP/.stats or MP/.jfs.stats */
	char *control_path;   /* MP/.control or MP/.jfs.control */
	char *cache_dir;      /* Chunk.CacheDir: "DIR/UUID[:DIR2/UUID...]" or "memory" */
};
/*
 * Read MP/.config (or MP/.jfs.config with --prefix-internal). JO_ENOTFOUND
 * when MP is not a JuiceFS mount (no such file), JO_EPROTO when it does not
 * parse.
 */
int jo_warmup_mount_probe(const char *mp, struct jo_warmup_mount *out, struct jo_err *err);
void jo_warmup_mount_release(struct jo_warmup_mount *m);

/* The object GET counters of a mount's .stats (0 when absent). */
struct jo_warmup_counters {
	uint64_t gets;
	uint64_t get_bytes;
	uint64_t cache_hits;
};
int jo_warmup_mount_stats(const char *stats_path, struct jo_warmup_counters *out,
			  struct jo_err *err);

/*
 * Open path on a fresh descriptor (O_DIRECT, or buffered with
 * POSIX_FADV_RANDOM where O_DIRECT or an unaligned O_DIRECT read is refused,
 * as on block-device file systems) and read the one byte at off.
 * JO_ENOTFOUND, JO_EIO (with the errno text), JO_EPROTO on a short read.
 */
int jo_warmup_read_byte(const char *path, uint64_t off, struct jo_err *err);

/* How to read one block through a mount. */
struct jo_warmup_read {
	uint64_t off;         /* file offset of the one-byte read */
	bool confirm;         /* wait for the client's prefetch (read again, or watch the cache) */
};
/*
 * Choose the read for block b on mount mi (the rules in the header comment).
 * JO_EUNSUPPORTED with the reason when no read through this mount caches the
 * block (its first byte is hidden and the mount neither prefetches nor
 * compresses).
 */
int jo_warmup_plan_read(const struct jo_warmup_block *b, const struct jo_warmup_mount *mi,
			struct jo_warmup_read *out, struct jo_err *err);

/*
 * The block fetcher: a pool of threads reading blocks through a mount, at
 * most `threads` reads in flight, reads that wait for the client's prefetcher
 * limited to the mount's prefetch parallelism (its queue drops keys when
 * full). jo_warmup_fetcher_add() blocks while the queue is full,
 * jo_warmup_fetcher_try_add() does not; reads are added from one thread.
 * Progress counters may be read from another thread at any time.
 */
struct jo_warmup_fetcher;
struct jo_warmup_fetch_stats {
	uint64_t queued, done, failed;
	uint64_t bytes_done;       /* sum of bsize of warmed blocks */
	uint64_t confirm_reads;    /* blocks waited for through the prefetcher */
	uint64_t cache_seen;       /* of these: seen arrive in the disk cache (no second read) */
};
/* Called from a worker (serialised) for each block that failed. */
typedef void (*jo_warmup_fail_cb)(const char *key, const char *path, uint64_t off,
				  const struct jo_err *err, void *payload);
/*
 * Called from a worker after each read added with a tag (serialised with
 * the fail callback, after it): rc is 0 or the read's error (err says why).
 */
typedef void (*jo_warmup_done_cb)(void *tag, int rc, const struct jo_err *err, void *payload);
int jo_warmup_fetcher_new(struct jo_warmup_fetcher **out, int threads, int prefetch,
			  jo_warmup_fail_cb fail, void *payload, struct jo_err *err);
/* Queue one read (path and key are copied). JO_ECANCELED once cancelled. */
int jo_warmup_fetcher_add(struct jo_warmup_fetcher *f, const char *path, const char *key,
			  uint32_t bsize, const struct jo_warmup_read *rd, struct jo_err *err);
/*
 * Report every tagged read's end to cb (set before the first add; payload
 * borrowed).
 */
void jo_warmup_fetcher_on_done(struct jo_warmup_fetcher *f, jo_warmup_done_cb cb, void *payload);
/*
 * Queue one read without waiting: 0 queued, 1 the queue is full (nothing
 * done, try again after a completion), JO_ENOMEM. tag is handed to the done
 * callback.
 */
int jo_warmup_fetcher_try_add(struct jo_warmup_fetcher *f, const char *path, const char *key,
			      uint32_t bsize, const struct jo_warmup_read *rd, void *tag,
			      struct jo_err *err);
/*
 * Let a read that waits for the client's prefetch (confirm) watch the disk
 * cache cd (borrowed; set before the first add) for the block instead of
 * reading again. The mount publishes a prefetched block in its cache a moment
 * after the full GET ends; a read again inside that moment finds neither and
 * starts a second full GET. The block's file appears only after it is
 * published, so seeing it ends the wait; when it has not appeared within 2 s
 * (cache full, write queue behind) the read is repeated as without a watch.
 */
struct jo_warmup_cachedirs;
void jo_warmup_fetcher_watch_cache(struct jo_warmup_fetcher *f,
				   const struct jo_warmup_cachedirs *cd);
/* Wait until every queued read finished; stops the threads. */
void jo_warmup_fetcher_finish(struct jo_warmup_fetcher *f);
void jo_warmup_fetcher_stats(struct jo_warmup_fetcher *f, struct jo_warmup_fetch_stats *out);
void jo_warmup_fetcher_free(struct jo_warmup_fetcher *f);

#endif
