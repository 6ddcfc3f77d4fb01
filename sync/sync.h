/*
 * sync.h: internals of `jfsops sync` shared between the files of sync/ and
 * its unit tests. Nothing here speaks HTTP: every store access goes through
 * common/object.
 *
 *   filter.c   rclone-style include/exclude rules
 *   compare.c  the copy-or-skip decision from two listings and the state row
 *   state.c    the SQLite state file (fingerprints, multipart progress)
 *   list.c     ordered listing streams (key-range listers, order check,
 *              external-sort fallback)
 *   engine.c   merge-join, transfer workers, deletes, summary counters
 *   bwlimit.c  token bucket shared by all transfers
 *   plan.c     cluster mode: sample both listings, cut the key space into ranges
 *   cluster.c  cluster mode: a job's records and tasks in the coordinator,
 *              the worker loop, the delete phase, --status
 */
#ifndef JO_SYNC_H
#define JO_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/objurl.h"

struct jo_err;
struct jo_obj;

/* ---- paths (paths.c) ----------------------------------------------------- */

/*
 * The real absolute path of a local directory, whether it exists or not:
 * the longest leading part that exists through realpath(3), the rest
 * lexically ("//", "." and ".." folded). No trailing '/' (except "/").
 * *out malloc'd.
 */
int jo_sync_local_resolve(const char *path, char **out, struct jo_err *err);
/*
 * Whether SRC and DST are the same tree or one holds the other: local sides
 * by their resolved paths, s3 sides by endpoint (scheme and host
 * case-insensitive, default port dropped), bucket and prefix (a directory:
 * "p/" holds "p/q/", not "pq/"). A local side never overlaps an s3 side.
 * 1 (why gets both places), 0, or a negative JO_E* code.
 */
int jo_sync_sides_overlap(const struct jo_objurl *src, const struct jo_objurl *dst,
			  char *why, size_t n, struct jo_err *err);
/*
 * Why the key rel (relative to the prefix; size: the object's) has no
 * one-to-one local path, or NULL when DIR/rel is its own path: a leading
 * '/', an empty, "." or ".." segment, a non-empty object ending in '/',
 * or a ".jfs.*.tmp.*" name (the directory store's temp files, never
 * listed). Static string. A zero-size key ending in '/' is a directory
 * marker (NULL: the caller skips it as such).
 */
const char *jo_sync_local_key_why(const char *rel, uint64_t size);

/* ---- filters ------------------------------------------------------------- */

struct jo_sync_filter;
int jo_sync_filter_new(struct jo_sync_filter **out);
void jo_sync_filter_free(struct jo_sync_filter *f);
/* kind '+' include or '-' exclude. Errors: JO_EINVAL (bad pattern). */
int jo_sync_filter_add(struct jo_sync_filter *f, char kind, const char *pattern,
		       struct jo_err *err);
/* Lines "+ PATTERN", "- PATTERN", "# comment", blank; "!" clears the list. */
int jo_sync_filter_load(struct jo_sync_filter *f, const char *path, struct jo_err *err);
/* The same from an open stream; name is the file name for messages. */
int jo_sync_filter_read(struct jo_sync_filter *f, FILE *fp, const char *name, struct jo_err *err);
/* Whether the key (relative to the side's prefix) takes part in the sync. */
bool jo_sync_filter_pass(const struct jo_sync_filter *f, const char *rel_key);
/* Glob match as used by the filter (exposed for tests). */
bool jo_sync_glob_match(const char *pattern, const char *rel_key);

/* ---- compare ------------------------------------------------------------- */

enum jo_sync_cmp_mode { JO_SYNC_CMP_DEFAULT = 0, JO_SYNC_CMP_SIZE, JO_SYNC_CMP_CHECKSUM };

struct jo_sync_cmp_opts {
	enum jo_sync_cmp_mode mode;
	bool update;           /* copy only when the source is newer */
	bool ignore_existing;  /* never touch an existing destination object */
	bool existing;         /* only update objects the destination already has */
};

/* One listed object. */
struct jo_sync_ent {
	char *key;             /* relative to the side's prefix, owned */
	uint64_t size;
	int64_t mtime;         /* unix seconds */
	char etag[72];
};

/* What the state file remembers about the last copy of a key. */
struct jo_sync_row {
	bool found;
	uint64_t src_size;
	int64_t src_mtime;
	char src_etag[72];
	uint64_t dst_size;
	char dst_etag[72];     /* the ETag the copy should have, "" when unknown */
	char md5[33];          /* hex MD5 of the content, "" when unknown */
	int64_t copied_at;     /* local clock, unix seconds */
};

enum jo_sync_decision { JO_SYNC_SKIP = 0, JO_SYNC_COPY = 1 };

/*
 * Decide from the two listings (dst NULL: absent) and the state row (may be
 * NULL). *why gets a static reason ("missing", "size", "newer", "md5", ...).
 */
enum jo_sync_decision jo_sync_decide(const struct jo_sync_cmp_opts *o,
				     const struct jo_sync_ent *src,
				     const struct jo_sync_ent *dst,
				     const struct jo_sync_row *row, const char **why);
/* Whether an ETag is a plain hex MD5 (32 hex digits, no "-N"). */
bool jo_sync_etag_is_md5(const char *etag);

/* ---- state file ---------------------------------------------------------- */

struct jo_sync_state;
/* readonly: dry runs (a missing file is then an empty state). */
int jo_sync_state_open(struct jo_sync_state **out, const char *path, bool readonly,
		       struct jo_err *err);
void jo_sync_state_close(struct jo_sync_state *st);
int jo_sync_state_get(struct jo_sync_state *st, const char *key, struct jo_sync_row *row,
		      struct jo_err *err);
int jo_sync_state_put(struct jo_sync_state *st, const char *key, const struct jo_sync_row *row,
		      struct jo_err *err);
/* key/value settings (e.g. "unordered:<desc>"). *out malloc'd or NULL. */
int jo_sync_state_getkv(struct jo_sync_state *st, const char *k, char **out,
			struct jo_err *err);
int jo_sync_state_setkv(struct jo_sync_state *st, const char *k, const char *v,
			struct jo_err *err);
/* Multipart progress of one key. */
struct jo_sync_mpu {
	char upload_id[512];
	uint64_t part_size;
	uint64_t src_size;
	char src_etag[72];
	int64_t src_mtime;
};
int jo_sync_state_mpu_get(struct jo_sync_state *st, const char *key, struct jo_sync_mpu *m,
			  struct jo_err *err);  /* JO_ENOTFOUND when none */
int jo_sync_state_mpu_put(struct jo_sync_state *st, const char *key,
			  const struct jo_sync_mpu *m, struct jo_err *err);
int jo_sync_state_mpu_del(struct jo_sync_state *st, const char *key, struct jo_err *err);
int jo_sync_state_part_put(struct jo_sync_state *st, const char *key, int number,
			   const char *etag, uint64_t size, struct jo_err *err);
/* Finished parts of the key's upload, via cb(number, etag, size). */
int jo_sync_state_parts(struct jo_sync_state *st, const char *key,
			int (*cb)(int number, const char *etag, uint64_t size, void *p),
			void *p, struct jo_err *err);
/* Every recorded multipart upload (to abort stale ones). */
int jo_sync_state_mpu_each(struct jo_sync_state *st,
			   int (*cb)(const char *key, const struct jo_sync_mpu *m, void *p),
			   void *p, struct jo_err *err);

/* ---- ordered listing streams -------------------------------------------- */

/* Returned by jo_sync_stream_next when keys arrived out of byte order. */
#define JO_SYNC_EORDER 1000

/*
 * How a store orders a listing (cluster ranges rely on it to stop early):
 *   BYTES     byte order (AWS, MinIO, rclone serve s3, local directories)
 *   DIRFIRST  directory by directory: byte order with '/' below every other
 *             byte, start-after taken in that order (SeaweedFS)
 *   ANY       no order assumed: the range's whole listing prefix is read
 */
enum jo_sync_order { JO_SYNC_ORDER_BYTES = 0, JO_SYNC_ORDER_DIRFIRST, JO_SYNC_ORDER_ANY };

struct jo_sync_stream_opts {
	int threads;           /* key-range listers (>= 1) */
	bool sort;             /* list with one lister and sort externally */
	size_t sort_mem;       /* memory budget of the external sort */
	const char *tmp_dir;
	const char *after;     /* relative key: hand out only keys after it (resume), or NULL */
	const char *desc;      /* the side, for the warning about each skipped symlink */
	/*
	 * Cluster ranges: hand out exactly the keys k with lo <= k < hi in byte
	 * order (relative; NULL = open end), whatever the store's order. lo and
	 * hi must be boundaries (jo_sync_bound_ok). threads and sort are
	 * ignored; `order` says how to list: BYTES streams and checks the
	 * order (JO_SYNC_EORDER when the store breaks it, also for a
	 * directory-first store caught past hi), DIRFIRST and ANY sort the range
	 * externally (DIRFIRST: JO_SYNC_EORDER when the store is not even that).
	 */
	bool range;
	const char *lo, *hi;
	enum jo_sync_order order;
};

struct jo_sync_stream;
/* Start listing `prefix` of o. Keys handed out are relative to prefix. */
int jo_sync_stream_start(struct jo_sync_stream **out, struct jo_obj *o, const char *prefix,
			 const struct jo_sync_stream_opts *so, struct jo_err *err);
/*
 * Next entry in byte order: 1 (ent filled; ent->key borrowed until the next
 * call), 0 at the end, JO_SYNC_EORDER when the store broke byte order, or a
 * negative JO_E* code (err set).
 */
int jo_sync_stream_next(struct jo_sync_stream *s, struct jo_sync_ent *ent, struct jo_err *err);
/* Stop listers, free everything. Accepts NULL. */
void jo_sync_stream_free(struct jo_sync_stream *s);
/*
 * Range boundaries (cluster planning): non-empty valid UTF-8. Byte order
 * and directory-first order put a key k on different sides of a boundary b
 * only when at their first differing byte one has '/' and the other a byte
 * below it (space, '%', '+', '-', '.', ...): for b = "d/x" the key "d-y"
 * (before b in byte order, after all of "d/" directory-first), for b = "d-x"
 * the key "d/y". Range listings stop only at a key past hi in both orders,
 * and look at each such place with one request (list.c).
 */
bool jo_sync_bound_ok(const char *b);
/* Directory-first order: byte order with '/' below every other byte. */
int jo_sync_dircmp(const char *a, const char *b);
/*
 * A start-after marker m just below `key` in byte order (its last character
 * replaced by the one before it, then U+10FFFF; a trailing '/' dropped):
 * every key k >= key has k > m. In directory-first order too, except for the
 * keys of the places described above. malloc'd, NULL when out of memory.
 */
char *jo_sync_bound_pred(const char *key);

/* Key ranges actually used (for tests and debug output). */
int jo_sync_stream_ranges(const struct jo_sync_stream *s);
/* Entries listed so far (all listers). */
uint64_t jo_sync_stream_listed(const struct jo_sync_stream *s);
/*
 * Symlinks the listing skipped (local directories: never followed, neither
 * copied nor deleted); each one was also reported with a warning line.
 */
uint64_t jo_sync_stream_links(const struct jo_sync_stream *s);


/* ---- cluster planning (plan.c) ------------------------------------------ */

struct jo_sync_plan_opts {
	int ranges;          /* ranges wanted; 0: one per ~2000 objects, at least 16 */
	int max_probes;      /* list requests per side (0: 2000) */
};

struct jo_sync_plan {
	/* ranges [-inf, b0), [b0, b1), ..., [b(n-1), +inf): n + 1 of them */
	char **bounds;
	size_t nbounds;
	double *weights;     /* nbounds + 1: estimated objects (SRC + DST) per range */
	double est_total;
	uint64_t src_est, dst_est;   /* objects counted (a lower bound unless exact) */
	bool src_exact, dst_exact;
	/* what the samples showed: DIRFIRST when a page was out of byte order */
	enum jo_sync_order src_order, dst_order;
	int probes;          /* list requests made */
};
/*
 * Sample both listings (dob may be NULL: nothing there yet) and cut the key
 * space into ranges of about equal work; every bound passes
 * jo_sync_bound_ok. Keys are relative to sprefix / dprefix.
 */
int jo_sync_plan_make(struct jo_obj *so, const char *sprefix, struct jo_obj *dob,
		      const char *dprefix, const struct jo_sync_plan_opts *po,
		      struct jo_sync_plan *out, struct jo_err *err);
void jo_sync_plan_release(struct jo_sync_plan *p);

/* ---- bandwidth limit ----------------------------------------------------- */

struct jo_sync_bw;
/* bytes_per_sec 0: unlimited (jo_sync_bw_take returns at once). */
struct jo_sync_bw *jo_sync_bw_new(uint64_t bytes_per_sec);
void jo_sync_bw_free(struct jo_sync_bw *b);
/* Block until n bytes may pass. Accepts NULL. */
void jo_sync_bw_take(struct jo_sync_bw *b, size_t n);

/* ---- the engine ---------------------------------------------------------- */

/*
 * Cluster mode: one range of a job (cluster.c drives it). What a range
 * attempt has done, exact for every key up to pos (both sides' keys).
 */
struct jo_sync_ckpt {
	const char *pos;            /* last key processed (relative), NULL: none yet */
	bool failed;                /* a copy failed: pos no longer moves */
	uint64_t copied, copied_bytes, credited;
	uint64_t skipped, extra, excluded, src_listed, dst_listed;
};

struct jo_sync_range {
	const char *lo, *hi;        /* boundaries (relative), NULL = open */
	enum jo_sync_order src_order, dst_order;   /* in: as planned; out: what worked */
	const char *after;          /* resume after this key (NULL: from lo) */
	struct jo_sync_ckpt base;   /* what earlier attempts did up to `after` */
	/*
	 * An earlier attempt may have copied keys after `after` without
	 * recording them (it died between checkpoints). The merge then HEADs
	 * each key past `after` it would skip and counts it as copied when it
	 * carries this job's mark: a copy is counted once, whichever attempt
	 * made it.
	 */
	bool uncounted;
	const char *job_mark;       /* x-amz-meta-jfsops-job on every copy */
	double checkpoint_s;        /* seconds between checkpoints (drain, then record) */
	/* phase 2: list both sides, delete what only DST has, copy nothing */
	bool delete_only;
	uint64_t max_extras;        /* refuse when more than the copy phase counted */
	bool expect_src;            /* refuse when SRC lists nothing where it listed some */
	/*
	 * Callbacks (payload last). checkpoint: nothing is in flight, store c
	 * (a non-zero return stops the range with that error). may_mutate:
	 * false once the range's lease is lost.
	 */
	int (*checkpoint)(const struct jo_sync_ckpt *c, struct jo_err *err, void *payload);
	bool (*may_mutate)(void *payload);
	/*
	 * A multipart upload of key rel began (open) or ended: record it, so
	 * that an attempt after a crash aborts what this one left behind (there
	 * is no state file to continue it from). Called from transfer threads;
	 * a non-zero return fails the copy.
	 */
	int (*mpu)(const char *rel, const char *upload_id, bool open, struct jo_err *err,
		   void *payload);
	/* both listings merged: what is left are the copies in flight (may be NULL) */
	void (*listed)(void *payload);
	void *payload;
};

/* Counters a progress display may read while a run goes on (atomics). */
struct jo_sync_live {
	uint64_t copied, copied_bytes, listed;
};

struct jo_sync_opts {
	struct jo_sync_cmp_opts cmp;
	int transfers;              /* objects copied at once */
	int list_threads;           /* key-range listers per side */
	int part_concurrency;       /* parts of one object in flight */
	uint64_t part_size;
	uint64_t multipart_threshold;
	bool delete_dst;
	int64_t max_delete;         /* -1: no limit */
	bool dry_run;
	bool resume;
	bool no_metadata;           /* do not HEAD the source for user metadata */
	bool server_side;           /* allow CopyObject when both sides share an endpoint */
	bool src_sort, dst_sort;    /* force the external-sort path */
	size_t sort_mem;
	const char *tmp_dir;
	struct jo_sync_filter *filter;     /* may be NULL */
	struct jo_sync_state *state;       /* may be NULL (--no-state) */
	struct jo_sync_bw *bw;             /* may be NULL */
	bool progress;                     /* live progress line on stderr */
	bool verbose;                      /* one line per action on stderr */
	bool json;                         /* dry-run plan as JSON lines */
	bool dst_absent;                   /* a dry run to a local DST not created yet: list it as empty */
	bool perms;                        /* local SRC and DST: copies keep the source's mode bits */
	struct jo_sync_range *range;       /* cluster mode: this range only (no state file) */
	struct jo_sync_live *live;         /* may be NULL */
	/* runs at once that share one pool of transfers (cluster mode's ranges in
	 * flight): each copy holds one of its slots (NULL: transfers alone) */
	struct jo_sync_gate *gate;
};

/* At most n copies at once across the runs that share the gate. */
struct jo_sync_gate *jo_sync_gate_new(int n);
void jo_sync_gate_free(struct jo_sync_gate *g);

struct jo_sync_summary {
	uint64_t src_listed, dst_listed, excluded;
	uint64_t copied, copied_bytes, server_side, multipart;
	uint64_t skipped, extra, deleted, failed;
	uint64_t unrepresentable;  /* SRC keys a local DST cannot hold one-to-one (refused) */
	uint64_t would_copy, would_copy_bytes, would_delete;
	bool delete_refused;
	char delete_refused_why[200];
	int order_restarts;
	bool resumed_listing;      /* --resume continued after a saved listing position */
	uint64_t credited;         /* cluster: copies of an earlier attempt counted now */
	uint64_t src_links, dst_links;  /* symlinks skipped in local directories */
	/* object requests issued and connections opened, per side (the caller fills them) */
	uint64_t src_requests, src_conns, dst_requests, dst_conns;
	double seconds;
};

/*
 * Run one sync. Returns 0 when the run itself completed (check
 * summary->failed), or a negative JO_E* code for a fatal error (a listing
 * failed, the state file broke, cancelled).
 */
int jo_sync_run(const struct jo_objurl *src, struct jo_obj *so,
		const struct jo_objurl *dst, struct jo_obj *dobj,
		const struct jo_sync_opts *opts, struct jo_sync_summary *sum,
		struct jo_err *err);

/* ---- cluster mode (cluster.c) ------------------------------------------ */

enum jo_sync_cluster_mode {
	JO_SYNC_CLUSTER_ALL = 0,   /* plan if nobody did, then work (the cron case) */
	JO_SYNC_CLUSTER_PLAN,      /* only plan; done once the plan is recorded */
	JO_SYNC_CLUSTER_WORK,      /* only work (waits for a plan) */
};

struct jo_sync_cluster_opts {
	const char *url;             /* the coordinator's META-URL */
	const char *password, *redis_password;  /* for a URL without one, or NULL */
	const char *ns;              /* the job's namespace (jo_sync_job_ns) */
	const char *name;            /* --id NAME, or NULL */
	const char *fp;              /* what the job is (hex): an --id job must match it */
	const char *worker;          /* this worker's name: printable ASCII, no spaces */
	enum jo_sync_cluster_mode mode;
	int64_t lease_ms;
	int ranges;                  /* the planner's target (0: auto) */
	int max_attempts;            /* a range failing this often is given up */
	double checkpoint_s;         /* resume positions at most this far apart */
	int in_flight;               /* ranges one worker works at once (one lease each) */
	bool reset;                  /* drop the job's records first */
};

struct jo_sync_cluster_result {
	char ns[17];
	bool finished;               /* the job is done (end recorded) */
	bool was_finished;           /* ... already when this process came */
	char status[16];             /* "ok", "failed", "refused" */
	char why[256];
	struct jo_sync_summary mine; /* this process's share */
	struct jo_sync_summary job;  /* the whole job (from its records) */
	int ranges, ranges_done, ranges_failed, ranges_mine;
};

/* The namespace of a job: "s" + 15 hex digits of a hash of `what` (its
 * --id NAME when named, else what makes it). */
void jo_sync_job_ns(const char *what, bool named, char out[17]);
/*
 * Work on the job (co->mode) until it is finished, a signal arrives or a
 * fatal error. 0 when the run ended normally: res says how the job stands.
 */
int jo_sync_cluster_run(const struct jo_objurl *src, struct jo_obj *so,
			const struct jo_objurl *dst, struct jo_obj *dobj,
			const struct jo_sync_opts *o, const struct jo_sync_cluster_opts *co,
			struct jo_sync_cluster_result *res, struct jo_err *err);

struct jo_sync_status_opts {
	const char *url, *password, *redis_password;
	const char *ns;              /* one job, or NULL: every job of the coordinator */
	bool json;                   /* one JSON object per job */
};
/* Print the state of the coordinator's sync job(s): JO_ENOTFOUND for an unknown ns. */
int jo_sync_cluster_status(const struct jo_sync_status_opts *so, FILE *out, struct jo_err *err);

/* Fingerprint of the filter rules (for a job's identity): 64 hex digits + NUL. */
void jo_sync_filter_fingerprint(const struct jo_sync_filter *f, char out[65]);

struct jo_ctx;
/* `jfsops sync` (sync/cmd_sync.c), an entry of cmd/main.c's command table. */
int cmd_sync(int argc, char **argv, struct jo_ctx *ctx);

#endif
