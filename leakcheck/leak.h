/*
 * leak.h: internals of `jfsops leakcheck` (leak_* names).
 *
 * The check lists both sides of a volume, sorts each with common/extsort
 * under a memory budget and merges the two sorted streams in one pass:
 *
 *   reference side  one 16-byte record per (slice id, slice size, class) the
 *                   metadata references (leak_refs_scan), sorted by id, size;
 *                   the merge expands each referenced slice into the block
 *                   keys it owns (spec juicefs-format.md §2.1)
 *   object side     one 32-byte record per block object under NAME/chunks/
 *                   (leak_list_objects), sorted by (id, block index, bsize)
 *
 * Keys are big-endian so that byte order is numeric order and the sorter's
 * default comparison applies.
 */
#ifndef JO_LEAK_H
#define JO_LEAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;
struct jo_obj;
struct jo_vol;
struct jo_xsort;

/* Why the metadata holds on to a slice; lower value wins when several apply. */
enum leak_ref_class {
	LEAK_REF_USED = 1,      /* a record in a chunk list of a live inode */
	LEAK_REF_DELFILE = 2,   /* chunk list of a removed-but-not-collected file */
	LEAK_REF_TRASH = 3,     /* delayed slice (delSlices), any age */
	LEAK_REF_PENDING = 4,   /* refcount <= 0: deletion pending */
};

#define LEAK_REF_REC_LEN 16
#define LEAK_OBJ_REC_LEN 32

void leak_ref_encode(uint8_t out[LEAK_REF_REC_LEN], uint64_t id, uint32_t size, int cls);
void leak_ref_decode(const uint8_t in[LEAK_REF_REC_LEN], uint64_t *id, uint32_t *size, int *cls);
void leak_obj_encode(uint8_t out[LEAK_OBJ_REC_LEN], uint64_t id, uint32_t indx, uint32_t bsize,
		     uint64_t objsize, int64_t mtime);
void leak_obj_decode(const uint8_t in[LEAK_OBJ_REC_LEN], uint64_t *id, uint32_t *indx,
		     uint32_t *bsize, uint64_t *objsize, int64_t *mtime);

/* What the merge says about one block. */
enum leak_kind {
	LEAK_VALID = 0,      /* object of a chunk-list slice */
	LEAK_DELFILE,        /* object of a removed file not yet collected */
	LEAK_COMPACTED,      /* object of a delayed (trash) slice */
	LEAK_PENDING,        /* object of a slice whose deletion is pending */
	LEAK_LEAKED,         /* object no reference owns (or the size rule fails) */
	LEAK_MISSING,        /* a referenced block with no object */
	LEAK_SKIPPED,        /* would be leaked, but too new to judge */
	LEAK_FOREIGN,        /* under chunks/ but not a block key of this volume */
	LEAK_NKINDS
};
const char *leak_kind_name(int kind);

struct leak_item {
	int kind;               /* enum leak_kind */
	const char *reason;     /* static string: "unreferenced", "size_mismatch", ... */
	uint64_t id;
	uint32_t indx;
	uint32_t bsize;         /* block length from the key (uncompressed) */
	uint64_t size;          /* stored object size; missing: expected block length */
	int64_t mtime;          /* unix seconds; 0 for missing */
	const char *key;        /* foreign objects only (else NULL: build it) */
};
typedef int (*leak_item_cb)(const struct leak_item *it, void *payload);

/* A record source: returns 1 with a record, 0 at the end, <0 on error. */
typedef int (*leak_next_fn)(void *src, const void **rec, size_t *len, struct jo_err *err);
/* Adapter: a finished struct jo_xsort as a leak_next_fn source. */
int leak_xsort_next(void *xsort, const void **rec, size_t *len, struct jo_err *err);

struct leak_counts {
	uint64_t n[LEAK_NKINDS];
	uint64_t bytes[LEAK_NKINDS];
	uint64_t objects, object_bytes;   /* every block object merged */
	uint64_t slices;                  /* distinct referenced slice ids */
	uint64_t skipped_new_slice;       /* skipped because id >= counter */
};

struct leak_merge_opts {
	uint32_t block_size;    /* the volume's BlockSize, bytes */
	uint64_t next_chunk;    /* slice-id counter read before listing */
	int64_t cutoff;         /* objects with mtime > cutoff are too new */
	leak_item_cb cb;        /* called for LEAKED, MISSING, SKIPPED */
	void *payload;
};

/*
 * Merge the sorted reference and object streams. Counts go to *counts
 * (zeroed first). JO_EPROTO when a stream is out of order or a record has
 * the wrong length; a non-zero callback return stops and is returned.
 */
int leak_merge(const struct leak_merge_opts *o, leak_next_fn refs_next, void *refs_src,
	       leak_next_fn objs_next, void *objs_src, struct leak_counts *counts,
	       struct jo_err *err);

/* ---- where the referenced blocks are (density.c) ---- */

/*
 * Expected block objects per range of slice ids, counted from the references
 * (ceil(size / block size) per referenced slice) in a fixed number of
 * buckets over [0, next_chunk): about 0.5 MiB whatever the volume's size.
 * Ids at or above next_chunk count in the last bucket.
 */
#define LEAK_DENSITY_BUCKETS 65536
struct leak_density {
	uint64_t width;          /* slice ids per bucket (>= 1) */
	uint32_t block_size;
	uint64_t total;          /* blocks counted */
	uint64_t *n;             /* LEAK_DENSITY_BUCKETS counters */
};
int leak_density_init(struct leak_density *d, uint64_t next_chunk, uint32_t block_size);
void leak_density_add(struct leak_density *d, uint64_t id, uint64_t size);
/* Expected blocks of the slice ids lo..hi (inclusive). */
double leak_density_est(const struct leak_density *d, uint64_t lo, uint64_t hi);
void leak_density_free(struct leak_density *d);

/* ---- the id ranges of a cluster job (range.c) ---- */

/*
 * Range i holds the slice ids [b[i], b[i+1]): b[0] = 0, b[n] = UINT64_MAX
 * (the last range runs on past the counter), the cuts between are
 * multiples of 1000. Every key under NAME/chunks/ belongs to exactly one
 * range (range.c says which); a lister given a range lists its keys only.
 */
struct leak_ranges {
	uint64_t *b;      /* n + 1 bounds */
	size_t n;
};
/*
 * Cut [0, next_chunk) into at most want ranges of about equal expected
 * blocks (d; NULL or empty: equal id spans); with hash_prefix never below
 * 10^6. out->b is malloc'd.
 */
int leak_range_cut(const struct leak_density *d, uint64_t next_chunk, size_t want,
		   bool hash_prefix, struct leak_ranges *out);
/* Every cut leak_range_cut() makes with d is a multiple of this (>= 1000). */
uint64_t leak_range_step(const struct leak_density *d);
void leak_ranges_free(struct leak_ranges *r);
/* The range of slice id `id`. */
size_t leak_range_find(const struct leak_ranges *r, uint64_t id);
/* The range a key under NAME/chunks/ belongs to (block keys: their id's). */
size_t leak_range_of_key(const struct leak_ranges *r, const char *volname, bool hash_prefix,
			 const char *key);

/* How range ri's lister takes a prefix it found (leak_range_prefix). */
enum leak_pfx_how {
	LEAK_PFX_SKIP = 0,  /* another range's: not listed */
	LEAK_PFX_LIST,      /* listed: a layout directory, or a leaf (within after/upto) */
	LEAK_PFX_WHOLE,     /* everything under it is this range's */
	LEAK_PFX_FILTER,    /* a leaf listed whole, of which this range keeps its own keys */
};
/*
 * A prefix "ROOT/X/" (depth 1) or "ROOT/X/Y/" (depth 2, under a depth-1
 * prefix that was LEAK_PFX_LIST) found by range ri's lister: *how, and for
 * a leaf listed in part its key window (*after, *upto], malloc'd full keys
 * (NULL: open). JO_ENOMEM.
 */
int leak_range_prefix(const struct leak_ranges *r, size_t ri, bool hash_prefix,
		      const char *prefix, size_t root_len, int depth, int *how, char **after,
		      char **upto);

/* ---- who owns the missing blocks (owners.c) ---- */

/*
 * Missing items held back until the merge has ended, then named by the files
 * whose chunks list their slices (one more chunk scan, run only when
 * something is missing). At most `cap` items: leak_owners_add() returns
 * false once full (or out of memory), and the caller writes that item
 * without owners.
 */
struct leak_owners;
struct leak_owner {
	uint64_t id;      /* the slice */
	uint64_t ino;     /* a file whose chunk lists it */
	uint32_t indx;    /* that chunk's index */
};
struct jo_meta;
int leak_owners_new(struct leak_owners **out, size_t cap, struct jo_err *err);
void leak_owners_free(struct leak_owners *o);
bool leak_owners_add(struct leak_owners *o, const struct leak_item *it);
size_t leak_owners_count(const struct leak_owners *o);
/* The chunk scan and the paths (jo_meta_path_of; at most 8 owners a slice). */
int leak_owners_resolve(struct leak_owners *o, struct jo_meta *m, struct jo_err *err);
/* Item i (borrowed) and its owners (borrowed, *nowners may be 0: the slice is
 * referenced from a removed file's or a delayed slice list only). */
const struct leak_item *leak_owners_item(const struct leak_owners *o, size_t i,
					  const struct leak_owner **owners, size_t *nowners);
/* An owner's path (borrowed), or NULL with *why saying why none. */
const char *leak_owner_path(const struct leak_owners *o, const struct leak_owner *w,
			    const char **why);

/* ---- reference side ---- */

struct leak_ref_stats {
	uint64_t chunks, records, pending, delslices, delfiles, sustained;
};
/*
 * Stream every reference of the volume into xs (not finished): all chunk
 * records id>0 (classed DELFILE for inodes in delfiles or held by sessions),
 * refcounts <= 0 (PENDING) and every delSlices record (TRASH), regardless of
 * TrashDays.
 */
int leak_refs_scan(struct jo_meta *m, struct jo_xsort *xs, struct leak_density *density,
		   struct leak_ref_stats *st, struct jo_err *err);

/*
 * One part of that scan (a cluster job's scan part), read at the shared
 * snapshot token (jo_meta_snapshot_begin_at; 0: a snapshot of its own):
 * with LEAK_SCAN_CHUNKS the chunks whose position is in [from, to)
 * (jo_meta_scan_chunks_range), classed by the delfiles and sustained
 * inodes read in the same snapshot; with LEAK_SCAN_EXTRAS the refcounts
 * <= 0 and the delSlices records. The parts of one cut (jo_meta_chunk_cuts)
 * and the extras once stream what leak_refs_scan() streams.
 */
#define LEAK_SCAN_CHUNKS 1u
#define LEAK_SCAN_EXTRAS 2u
int leak_refs_scan_part(struct jo_meta *m, int64_t token, uint64_t from, uint64_t to,
			unsigned what, struct jo_xsort *xs, struct leak_density *density,
			struct leak_ref_stats *st, struct jo_err *err);

/*
 * The targeted re-check before deletion: the references of just these slice
 * ids (sorted, unique), found by a fresh scan of the same sources. *hits is
 * malloc'd (NULL when none).
 */
struct leak_ref_hit {
	uint64_t id;
	uint32_t size;
	int cls;
};
int leak_refs_lookup(struct jo_meta *m, const uint64_t *ids, size_t n,
		     struct leak_ref_hit **hits, size_t *nhits, struct jo_err *err);

/* ---- object side ---- */

struct leak_list_opts {
	const char *volname;
	bool hash_prefix;
	uint32_t block_size;
	int threads;                  /* concurrent listers (default 32) */
	/* where the referenced blocks are (NULL: unknown): leaf prefixes are cut
	 * into ranges of about equal expected length before they are listed */
	const struct leak_density *density;
	leak_item_cb foreign_cb;      /* objects that are no block key (any thread, serialised) */
	void *payload;
	/* progress: called from the calling thread about once a second */
	void (*progress)(uint64_t listed, uint64_t prefixes_done, uint64_t prefixes, void *payload);
	/* a cluster job's range: list only the keys of range `range` (NULL: all) */
	const struct leak_ranges *ranges;
	size_t range;
};
struct leak_list_stats {
	uint64_t listed, blocks, foreign;
	uint64_t prefixes;            /* items listed: prefixes and key ranges */
	uint64_t ranges;              /* of which key ranges cut off long leaf prefixes */
};
/*
 * List every object under NAME/chunks/ with opts->threads listers, split by
 * the layout's own prefixes (two id-derived levels without hash prefix, the
 * 256 hash directories with it) and, inside a long leaf prefix, by key
 * ranges cut while it is listed (whenever a lister is idle), and add one
 * record per block to xs. Any listing error fails the whole call (with the
 * prefix in the message); so does a leaf the store lists out of byte order.
 */
int leak_list_objects(struct jo_obj *obj, const struct leak_list_opts *o, struct jo_xsort *xs,
		      struct leak_list_stats *st, struct jo_err *err);

/* ---- deletion (two-phase) and restore ---- */

struct leak_delete_opts {
	const char *from;             /* candidates file (JSON lines from --out) */
	const char *quarantine;       /* tar.zst archive to write first, or NULL */
	const char *audit;            /* audit JSON lines, or NULL */
	int64_t min_age;              /* seconds an object must be old at deletion */
	double rate;                  /* objects per second, 0 = unlimited */
	size_t batch;                 /* keys per DeleteObjects (<= 1000) */
	bool dry_run;                 /* re-check and report, delete nothing */
};
struct leak_delete_stats {
	uint64_t candidates, deleted, deleted_bytes, kept, failed, quarantined;
	uint64_t would_delete, would_delete_bytes;   /* dry run: what it would delete */
};
/*
 * The candidates go in groups: a fresh metadata re-check and a HEAD each,
 * the quarantine archive (published and fsync'd), then DeleteObjects
 * batches. The audit is written as the work is done and made durable
 * (fflush + fsync) at each step: the lines of the re-check's and the
 * quarantine's verdicts before any deletion, a "deleting" line per key
 * before its batch's request and the batch's results before the next batch,
 * so that no delete that happened lacks its line, even after a SIGKILL.
 * The counts in *st are those of the work done, also when it fails.
 */
int leak_delete(struct jo_vol *v, const struct leak_delete_opts *o, struct leak_delete_stats *st,
		struct jo_err *err);

struct leak_restore_stats {
	uint64_t entries;            /* entries of the archive (all checked first) */
	uint64_t restored, restored_bytes;
	uint64_t kept_exists;        /* the key had an object: left as it was */
};
/*
 * Put the objects of a quarantine archive back, never over an object: each
 * is created only (jo_obj_put_opts create_only), and a key that exists is
 * counted in kept_exists and left alone. The whole archive is read first:
 * an entry that is not a regular file holding a block key of this volume
 * (its own name and layout, as jo_vol_block_key writes it: no other
 * volume's name, no '..', no absolute path) is JO_EINVAL, and a damaged
 * archive JO_EPROTO, before anything is written. audit (NULL: none) gets
 * a line per entry written or kept.
 */
int leak_restore(struct jo_vol *v, const char *archive, const char *audit,
		 struct leak_restore_stats *st, struct jo_err *err);

/* ---- synthetic benchmark workload (bench/leakcheck) ---- */

#include "common/extsort.h"

struct leak_synth_result {
	uint64_t refs, objects;
	double sort_s, merge_s;           /* generate+sort, merge */
	struct leak_counts counts;
	struct jo_xsort_stats xs_refs, xs_objs;
};
/* n slices: ~0.99n references and ~0.99n objects through extsort + merge. */
int leak_synth_run(uint64_t n, size_t mem, const char *tmp, struct leak_synth_result *res,
		   struct jo_err *err);
/* The same keys as "ID_INDX" text lines, in generation (unsorted) order. */
int leak_synth_keys(uint64_t n, const char *refs_path, const char *objs_path, struct jo_err *err);

/* ---- cluster jobs (cluster.c) ---- */

#include <limits.h>
#include <stdio.h>

#include <zstd.h>

/*
 * Check range ri of rs: list its keys (leaves cut by density, the range's
 * references), merge them with the references of refs (its sorted
 * records) under the plan's counter and age cutoff, and
 * write its report lines (JSON, as --out) to out: the command's own check
 * (cmd_leakcheck.c), given to the job. The lines come in the one-host
 * report's three sections: foreign keys (as listed), the merge's lines
 * (id order), the missing blocks with their files (id order); sect[0] and
 * sect[1] get the offsets in out where the second and third begin.
 * Several ranges may be checked at once, on threads of their own: each
 * with its own ctx.
 */
struct leak_range_ctx {
	struct jo_meta *meta;    /* this thread's volume metadata connection */
	unsigned share;          /* ranges listed at once in the process: each lists with
				  * this share of --list-threads (0 or 1: all of them) */
};
struct leak_range_check {
	int (*run)(void *p, FILE *out, const struct leak_ranges *rs, size_t ri,
		   const struct leak_density *density, leak_next_fn refs_next, void *refs_src,
		   uint64_t next_chunk, int64_t cutoff, struct leak_counts *c,
		   struct leak_list_stats *ls, long sect[2], const struct leak_range_ctx *ctx,
		   struct jo_err *err);
	void *p;
};

enum leak_cluster_mode {
	LEAK_CL_REPORT = 0,   /* the job's report, if it is complete */
	LEAK_CL_PLAN,
	LEAK_CL_WORKER,
	LEAK_CL_STATUS,
};

/* ---- the cluster job's scratch location (work.c) ---------------------------- */

struct jo_file;
struct leak_work;
struct leak_work_rd;

/*
 * --work: a directory every worker reaches, or s3://[PROFILE@]BUCKET/PREFIX
 * (profiles from config_path as common/objurl.h reads them; credentials
 * also from JFSOPS_WORK_ACCESS_KEY/_SECRET_KEY). tmp: where a file bound
 * for a bucket is written first (NULL: $TMPDIR, else /tmp). A bucket is
 * listed once, so that a wrong endpoint or key fails here.
 */
int leak_work_open(struct leak_work **out, const char *where, const char *config_path,
		   const char *tmp, struct jo_err *err);
void leak_work_close(struct leak_work *w);
/* The real path, or "s3:ENDPOINT/BUCKET/PREFIX": names the job with the volume. */
const char *leak_work_desc(const struct leak_work *w);
bool leak_work_local(const struct leak_work *w);
/* JO_EINVAL when w is inside the objects of volume v (its NAME/ in its bucket). */
int leak_work_check(const struct leak_work *w, const struct jo_vol *v, struct jo_err *err);
/* A directory rel (local: mode 0700; a bucket: nothing to make). */
int leak_work_mkdir(struct leak_work *w, const char *rel, bool exist_ok, struct jo_err *err);
/*
 * A new file rel: *out to write (fd, or fp with JO_FILE_STDIO), published
 * whole by leak_work_commit(); release it with jo_file_abort() in any case.
 */
int leak_work_create(struct leak_work *w, const char *rel, unsigned flags, struct jo_file **out,
		     struct jo_err *err);
int leak_work_commit(struct leak_work *w, const char *rel, struct jo_file *f, struct jo_err *err);
/* Reading file rel: its size, then byte ranges (short only at its end). */
int leak_work_ropen(struct leak_work *w, const char *rel, struct leak_work_rd **out,
		    struct jo_err *err);
uint64_t leak_work_rsize(const struct leak_work_rd *r);
/* The path or key, for messages. */
const char *leak_work_rname(const struct leak_work_rd *r);
/* A good size for sequential reads (a bucket: fewer, larger GETs). */
size_t leak_work_rchunk(const struct leak_work_rd *r);
int leak_work_pread(struct leak_work_rd *r, void *buf, size_t len, uint64_t off, size_t *got,
		    struct jo_err *err);
void leak_work_rclose(struct leak_work_rd *r);

/* ---- a scan part's reference run (runfile.c) ---------------------------------- */

/* What a part's done record says of its run. */
struct leak_run_counts {
	uint64_t bytes;          /* the file's size */
	uint64_t idx;            /* where the frames end and the index starts */
	uint64_t frames, dens, records;
};

struct leak_run_w {
	struct leak_work *ws;
	char rel[PATH_MAX];
	struct jo_file *f;
	ZSTD_CCtx *z;
	uint8_t *buf;
	uint64_t off;            /* bytes written */
	uint64_t n;              /* records */
};

/* A new run rel under ws. */
int leak_run_w_open(struct leak_run_w *w, struct leak_work *ws, const char *rel,
		    struct jo_err *err);
/* Write the sorted references of xs and the index (d: the part's density); out: its counts. */
int leak_part_write(struct leak_run_w *w, struct jo_xsort *xs, const struct leak_density *d,
		    struct leak_run_counts *out, struct jo_err *err);
/* Publish the run whole when commit, else drop it; w is released either way. */
int leak_run_w_close(struct leak_run_w *w, bool commit, struct jo_err *err);

struct leak_part_idx {
	uint64_t (*fr)[3];       /* per frame: cell, offset, records */
	size_t nfr;
	uint64_t idx_off;        /* where the frames end */
};

/*
 * The index buf (len bytes: the file from c->idx on) checked against the
 * done record c and against itself; pi->fr malloc'd (free it); the density
 * buckets added into d (NULL: not kept). name for messages.
 */
int leak_part_index(const uint8_t *buf, size_t len, const struct leak_run_counts *c,
		    const char *name, struct leak_part_idx *pi, struct leak_density *d,
		    struct jo_err *err);
/* The same, read from the run rd (its size checked first). */
int leak_part_load(struct leak_work_rd *rd, const struct leak_run_counts *c,
		   struct leak_part_idx *pi, struct leak_density *d, struct jo_err *err);
/* The window of ids [lo, hi) (cell boundaries; hi UINT64_MAX: the end): bytes, records. */
void leak_part_window(const struct leak_part_idx *pi, uint64_t step, uint64_t lo, uint64_t hi,
		      uint64_t *off, uint64_t *len, uint64_t *recs);

/* The records of one window of a run. */
struct leak_run_r {
	struct leak_work_rd *rd; /* borrowed */
	ZSTD_DCtx *z;
	uint8_t *in, *out;
	ZSTD_inBuffer ib;
	size_t cap, out_len, out_pos;
	size_t last;             /* ZSTD_decompressStream's last answer (0: frame ended) */
	bool eof;
	uint64_t pos, left;      /* the next byte to read; bytes of the window left */
	uint64_t n, want;
	uint8_t rec[LEAK_REF_REC_LEN], prev[LEAK_REF_REC_LEN];
};

/* Bytes [off, off + len) of rd: whole frames holding `want` records. */
int leak_run_r_open(struct leak_run_r *r, struct leak_work_rd *rd, uint64_t off, uint64_t len,
		    uint64_t want, struct jo_err *err);
/*
 * leak_next_fn: the next record (1), or 0 at the end once the window was
 * read whole (its frames ended, `want` records, in order); JO_EPROTO otherwise.
 */
int leak_run_r_next(void *src, const void **rec, size_t *len, struct jo_err *err);
void leak_run_r_close(struct leak_run_r *r);

/* A range's references: the merge of every part's window (leak_next_fn). */
struct leak_parts_src {
	struct leak_run_r *r;
	struct leak_work_rd **rd;  /* owned, one per part */
	bool *have;
	const uint8_t **cur;
	size_t n;
	bool primed;
	uint64_t lo, hi;         /* the range's ids: every record must be in them */
	uint8_t rec[LEAK_REF_REC_LEN];
};
int leak_parts_next(void *src, const void **rec, size_t *len, struct jo_err *err);
void leak_parts_free(struct leak_parts_src *p);

struct leak_cluster_opts {
	const char *url;              /* the coordinator's META-URL */
	const char *password, *redis_password;
	const char *work;             /* a directory every worker reaches, or s3://BUCKET/PREFIX */
	const char *config;           /* the config file of an s3:// --work's profile */
	const char *worker;           /* this worker's owner id */
	const char *out;              /* the job's report (NULL: stdout in LEAK_CL_REPORT) */
	int mode;                     /* enum leak_cluster_mode */
	int64_t lease_ms;
	unsigned ranges;              /* planned ranges wanted (0: one per ~200k blocks, >= 16) */
	unsigned scan_parts;          /* reference scan parts wanted (0: 8; Redis: 1) */
	unsigned max_attempts;        /* failures before a range is given up */
	unsigned in_flight;           /* a worker's tasks at once (0: 2) */
	bool json;                    /* --status as JSON */
	int64_t min_age;              /* s */
	size_t mem;                   /* the planner's sort */
	const char *tmp;
	struct leak_range_check check;
};

struct leak_cluster_result {
	char ns[17];
	bool planned, complete, report_written;
	size_t ranges, done, failed, mine;
	size_t parts, parts_done, parts_failed, parts_mine;   /* the reference scan's parts */
	struct leak_counts c;         /* the job's, from its done ranges */
	uint64_t listed, foreign, next_chunk;
};

/*
 * Run the mode of o against the job of volume v and o->work. 0 also when
 * the job is not complete (res says how it stands); an error when this
 * process's own part failed.
 */
int leak_cluster_run(struct jo_vol *v, const struct leak_cluster_opts *o,
		     struct leak_cluster_result *res, struct jo_err *err);

struct jo_ctx;
/* `jfsops leakcheck` (leakcheck/cmd_leakcheck.c), an entry of cmd/main.c's command table. */
int cmd_leakcheck(int argc, char **argv, struct jo_ctx *ctx);

#endif
