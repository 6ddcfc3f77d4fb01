/*
 * run.h: a warmup run, as cmd/cmd_warmup.c dispatches it: its state and
 * setup (run.c), the one-shot modes list, warm, check and evict (oneshot.c),
 * block-exact eviction through the mount (evict.c) and the look-ahead
 * pipeline with its control channel (follow.c).
 */
#ifndef JO_WARMUP_RUN_H
#define JO_WARMUP_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/jfs/jfs.h"

struct jo_ctx;
struct jo_meta;
struct jo_xsort;
struct jo_warmup_block;
struct jo_warmup_mapper;
struct jo_warmup_mount;
struct jo_warmup_cachedirs;

/* Block record for the sort: fixed big-endian head, then the volume path. */
#define WU_REC_HEAD 33

struct wu_state {
	struct jo_ctx *ctx;
	struct jo_meta *meta;
	struct jo_format fmt;
	uint32_t block_size;
	struct jo_warmup_mapper *mapper;
	struct jo_xsort *xs;
	const char *prefix;
	const char *mount;    /* the mount directory (wu_mount_attach: without a trailing '/') */
	char *mount_copy;     /* owned: what mount points to after wu_mount_attach */
	FILE *in;             /* the range list being read (owned unless stdin) */
	uint8_t *prev;        /* the last record wu_next_block returned */
	size_t prevlen;
	/* the file being mapped */
	char *cur_path;       /* volume path */
	uint64_t cur_ino, cur_len;
	/* distinct inodes (open addressing, 0 = empty) */
	uint64_t *inos;
	size_t ninos, icap;
	/* with keep_paths: the volume path of each distinct file, in order */
	bool keep_paths;
	char **paths;
	size_t npaths, cappaths;
	/* counters */
	uint64_t ranges, req_bytes, block_refs;
	uint64_t line;
	/* totals of a one-shot run, for its summary and metrics */
	uint64_t blocks, bytes;
	uint64_t warmed, warmed_bytes, failed;
	double t0;            /* wu_now() at the start of the run */
	uint8_t rec_buf[WU_REC_HEAD + 4096 + 8];
	struct jo_err err;
};

/* Monotonic seconds. */
double wu_now(void);
/*
 * Open the metadata of url (for reading), load its format and make the block
 * mapper. Errors in st->err.
 */
int wu_open_meta(struct wu_state *st, const char *url);
/*
 * Probe the mount at `mount` (jo_warmup_mount_probe into *mi): it must mount
 * this volume (else JO_EINVAL) and, when the run reads blocks through it
 * (`reads`), keep full blocks in a cache (else JO_EUNSUPPORTED). Sets
 * st->mount. Errors in st->err.
 */
int wu_mount_attach(struct wu_state *st, const char *mount, bool reads,
		    struct jo_warmup_mount *mi);
/*
 * Read the range list `ranges` ("-" = stdin; a FIFO with no writer yet blocks
 * until one comes or SIGINT/SIGTERM) and map every range to block records,
 * sorted with at most mem_limit bytes of memory. Errors in st->err.
 */
int wu_map_ranges(struct wu_state *st, const char *ranges, uint64_t mem_limit);
/*
 * The next distinct block of the sorted records, with the best anchor of its
 * duplicates, and the volume path of its file (*vpath malloc'd): 1, 0 at the
 * end, or a negative JO_E* with st->err set.
 */
int wu_next_block(struct wu_state *st, struct jo_warmup_block *b, char **vpath);
/*
 * Make path (a range's path) the current file: volume path, inode, length
 * (one metadata lookup per change of file). Errors in st->err: JO_ENOTFOUND,
 * JO_EINVAL (not a regular file, '..'), the engine's.
 */
int wu_set_file(struct wu_state *st, const char *path);
/* The mount path of a volume path, or NULL when it is outside the mounted subdir. */
char *wu_mount_path(const char *mp, const char *subdir, const char *vp);
/* Inode and length of a volume path. */
int wu_lookup(struct wu_state *st, const char *vpath, uint64_t *ino, uint64_t *len);
void wu_state_release(struct wu_state *st);

/* What happens to the other cached blocks of a file the mount evicts whole. */
enum wu_others { WU_OTHERS_DEFAULT = 0, WU_OTHERS_KEEP, WU_OTHERS_DROP };

/* One file to evict blocks of. Strings borrowed. */
struct wu_evict_file {
	const char *vpath;   /* volume path */
	const char *mpath;   /* path under the mount */
	uint64_t ino, flen;
	void *tag;           /* the caller's (follow: its window file) */
};

/* A set of blocks, (id, indx) -> bsize. */
struct wu_bset;
int wu_bset_new(struct wu_bset **out);
void wu_bset_free(struct wu_bset *s);
/* 1 added, 0 was there, JO_ENOMEM */
int wu_bset_add(struct wu_bset *s, uint64_t id, uint32_t indx, uint32_t bsize);
bool wu_bset_has(const struct wu_bset *s, uint64_t id, uint32_t indx);
size_t wu_bset_count(const struct wu_bset *s);
uint64_t wu_bset_bytes(const struct wu_bset *s);

struct wu_evict_result {
	uint64_t files;
	uint64_t blocks, bytes;               /* the blocks asked to go */
	uint64_t cached_blocks, cached_bytes; /* of those, cached before (block-exact) */
	uint64_t still_blocks;                /* of those, cached after (a reader came back) */
	uint64_t window_blocks;               /* other blocks of the files some batch still needs */
	uint64_t other_blocks, other_bytes;   /* other cached blocks of the files */
	uint64_t rewarmed_blocks, rewarmed_bytes;
	uint64_t lost_blocks, lost_bytes;     /* other cached blocks no read can bring back */
	uint64_t mount_bytes;                 /* what the mount says it evicted (slice sizes) */
	bool block_exact;                     /* the cache directories could be looked at */
};

/* Does the caller need (and re-warm itself) block (id, indx)? */
typedef bool (*wu_needed_fn)(uint64_t id, uint32_t indx, void *payload);

/*
 * Evict exactly the blocks in `targets` (each of one of `files`) from the
 * mount's cache: the mount can only be told whole files (its control file
 * evicts every block of every slice a file shows), so first every block
 * of those slices is looked up in the cache directories, then the files
 * are evicted through the control file, then the cached blocks that were
 * not targets are read back through the mount when `others` is KEEP (those
 * `needed` claims are left to the caller). cd NULL: the cache is in memory,
 * nothing is known block by block (block_exact false).
 */
int wu_evict(struct wu_state *st, const struct jo_warmup_mount *mi,
	     const struct jo_warmup_cachedirs *cd, const struct wu_evict_file *files, size_t nfiles,
	     const struct wu_bset *targets, enum wu_others others, wu_needed_fn needed,
	     void *payload, int threads, struct wu_evict_result *out, struct jo_err *err);

/*
 * The one-shot modes (oneshot.c): map the ranges (at most mem_limit bytes of
 * memory for the sort), then print the blocks (list), read each through the
 * mount (warm), look them up in its cache (check) or evict exactly them
 * (evict); each prints its summary (JSON with ctx->json) and returns the
 * command's exit code. st->blocks and the counters are left for metrics.
 */
int wu_run_list(struct wu_state *st, const char *ranges, uint64_t mem_limit);
int wu_run_warm(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		uint64_t mem_limit, int threads);
int wu_run_check(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		 uint64_t mem_limit, int threads);
int wu_run_evict(struct wu_state *st, const struct jo_warmup_mount *mi, const char *ranges,
		 uint64_t mem_limit, int threads, enum wu_others others);

/* Options of --follow and of the client mode (--done/--status). */
struct wu_follow_opts {
	unsigned ahead;
	const char *control;
	const char *state;
	const char *ranges;       /* "-" = stdin */
	bool evict_done;
	enum wu_others others;
	int threads;
};
int wu_follow(struct wu_state *st, const struct jo_warmup_mount *mi,
	      const struct wu_follow_opts *o);
/* --done ID / --status ID against a running pipeline's control socket or FIFO */
int wu_client(struct jo_ctx *ctx, const char *control, const char *verb, const char *id);

#endif
