/*
 * cache.h: what a JuiceFS mount's block cache holds, and asking the
 * mount itself to check or evict.
 *
 * Two interfaces, both the mount's own:
 *
 *  1. The control file. A JuiceFS mount serves MP/.control (MP/.jfs.control
 *     with --prefix-internal). `juicefs warmup --check/--evict` write one
 *     FillCache message (1004) to it, a list of paths and an action, and read
 *     the answer on the same descriptor: progress records, then the JSON of
 *     a CacheResponse (pkg/vfs/internal.go, cmd/warmup.go). A message names
 *     files or directories only, never a block: the mount resolves each path
 *     and checks or evicts every block of every slice the file shows
 *     (pkg/vfs/fill.go, cachedStore.CheckCache/EvictCache), including the
 *     blocks of those slices that later writes hide. Closing the descriptor
 *     cancels the request.
 *
 *  2. The cache store's files. A disk cache keeps block K of a volume as the
 *     file DIR/raw/K (K without the volume name, "chunks/..."), DIR being one
 *     of the "CACHEDIR/UUID" entries of the mount's Chunk.CacheDir. The
 *     mount's own check (cacheStore.exist) stats that path. Looking at it is
 *     how a single block is checked; nothing here ever writes or removes a
 *     file under a cache directory (that is the mount's business: its index
 *     and size accounting would go wrong, spec §2.6).
 */
#ifndef JO_WARMUP_CACHE_H
#define JO_WARMUP_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/dynbuf.h"

struct jo_err;

/* vfs.CacheAction */
enum jo_warmup_ctl_action {
	JO_WARMUP_CTL_WARM = 0,
	JO_WARMUP_CTL_EVICT = 1,
	JO_WARMUP_CTL_CHECK = 2,
};

/* meta.FillCache, and the most paths `juicefs warmup` puts in one message */
#define JO_WARMUP_CTL_FILLCACHE 1004u
#define JO_WARMUP_CTL_MAX_PATHS 10240

/* vfs.CacheResponse, plus the last progress record. Strings owned. */
struct jo_warmup_ctl_reply {
	uint64_t files;        /* FileCount */
	uint64_t slices;       /* SliceCount */
	uint64_t total_bytes;  /* TotalBytes: sum of the sizes of the slices seen */
	uint64_t miss_bytes;   /* MissBytes (check): bytes of blocks not cached */
	size_t nlocs;          /* Locations (check): cached bytes per cache dir */
	char **locs;
	uint64_t *loc_bytes;
	uint64_t progress_files, progress_bytes;
};
void jo_warmup_ctl_reply_release(struct jo_warmup_ctl_reply *r);

/*
 * Encode one FillCache message for paths (relative to the mount root, such
 * as "/ds/a.lance"): *out malloc'd. JO_EINVAL for a path with a newline or
 * for more than JO_WARMUP_CTL_MAX_PATHS paths.
 */
int jo_warmup_ctl_encode(int action, const char *const *paths, size_t n, unsigned threads,
			 uint8_t **out, size_t *outlen, struct jo_err *err);

/* Incremental reader of the answer (records may arrive split). */
struct jo_warmup_ctl_parser {
	struct jo_dynbuf buf; /* what is read and not yet parsed; a zeroed struct is empty */
};
/*
 * Feed bytes read from the control file. Returns 0 when more are needed, 1
 * when the answer is complete (out filled; release it), JO_EIO when the mount
 * answered with an errno, JO_EPROTO for a malformed answer.
 */
int jo_warmup_ctl_feed(struct jo_warmup_ctl_parser *p, const void *data, size_t n,
		       struct jo_warmup_ctl_reply *out, struct jo_err *err);
void jo_warmup_ctl_parser_release(struct jo_warmup_ctl_parser *p);

/*
 * One request through the control file at control_path, waiting for the
 * answer (polling the descriptor as `juicefs warmup` does). JO_ECANCELED on
 * SIGINT/SIGTERM: the descriptor is closed, which cancels the request in the
 * mount. JO_ENOTFOUND when there is no control file.
 */
int jo_warmup_ctl_call(const char *control_path, int action, const char *const *paths, size_t n,
		       unsigned threads, struct jo_warmup_ctl_reply *out, struct jo_err *err);

/* The disk cache directories of a mount (Chunk.CacheDir, globs expanded). */
struct jo_warmup_cachedirs {
	char **dirs;  /* each with a trailing '/', as the mount names them */
	size_t n;
};
/*
 * JO_EUNSUPPORTED when the mount keeps blocks in memory ("memory", or no
 * cache directory exists on this host, in which case the mount falls back to
 * memory too): single blocks cannot be looked up then.
 */
int jo_warmup_cachedirs_init(struct jo_warmup_cachedirs *out, const char *setting,
			     struct jo_err *err);
void jo_warmup_cachedirs_release(struct jo_warmup_cachedirs *cd);
/*
 * Does the cache hold block key ("NAME/chunks/..." or "chunks/...")? 1 yes
 * (*loc, when not NULL, borrows the directory), 0 no, JO_EIO when a stat
 * failed for another reason than the file not being there.
 */
int jo_warmup_cache_has(const struct jo_warmup_cachedirs *cd, const char *key, const char **loc,
			struct jo_err *err);

#endif
