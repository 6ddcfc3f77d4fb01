/*
 * sync.h: internals of `jfsops sync` shared between the files of sync/ and
 * its unit tests. Nothing here speaks HTTP: every store access goes through
 * common/object.
 *
 *   side.c     parse one side (s3 URL, flags, environment, profile file)
 *   filter.c   rclone-style include/exclude rules
 *   compare.c  the copy-or-skip decision from two listings and the state row
 *   state.c    the SQLite state file (fingerprints, multipart progress)
 *   list.c     ordered listing streams (key-range listers, order check,
 *              external-sort fallback)
 *   engine.c   merge-join, transfer workers, deletes, summary counters
 *   bwlimit.c  token bucket shared by all transfers
 */
#ifndef JO_SYNC_H
#define JO_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct jo_err;
struct jo_obj;

/* ---- sides --------------------------------------------------------------- */

/* Settings given by flags for one side; NULL/-1 = not given. */
struct jo_sync_side_flags {
	const char *endpoint, *region, *access_key, *secret_key;
	int path_style;   /* -1 unset, 0/1 */
	int list_v1;      /* -1 unset, 0/1 */
	int unordered;    /* -1 unset, 0/1: the store does not list in byte order */
};
#define JO_SYNC_SIDE_FLAGS_INIT { .path_style = -1, .list_v1 = -1, .unordered = -1 }

struct jo_sync_side {
	bool local;          /* a local directory */
	char *url;           /* as given, for messages (no secrets: URLs never carry them) */
	char *profile;       /* s3://NAME@bucket/...: profile name, or NULL */
	char *endpoint;      /* s3: "http://host:port" */
	char *bucket;        /* s3: bucket name; local: the directory with a trailing '/' */
	char *prefix;        /* key prefix inside the bucket, "" or ending in '/' */
	char *region;
	char *access_key, *secret_key;
	char *session_token; /* with the credentials' source (profile or env), or NULL */
	bool path_style, list_v1, unordered, insecure;
	char desc[600];      /* "s3://endpoint/bucket/prefix" or "dir:/path/", no secrets */
};

/*
 * Parse `url` for side `which` ("src" or "dst": picks JFSOPS_SRC_* or
 * JFSOPS_DST_* environment variables). Precedence, highest first: flags, URL
 * query, profile, environment (JFSOPS_<SIDE>_ACCESS_KEY/_SECRET_KEY/_ENDPOINT/
 * _REGION, then AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_REGION).
 * The profile (s3://NAME@bucket) is read with common/config.h from
 * config_path, else env JFSOPS_CONFIG, else $XDG_CONFIG_HOME/jfsops/config
 * or ~/.config/jfsops/config. A missing file or profile, and a config file
 * holding a secret that is readable by group or others, are JO_EINVAL.
 */
int jo_sync_side_parse(struct jo_sync_side *s, const char *url, const char *which,
		       const struct jo_sync_side_flags *fl, const char *config_path,
		       struct jo_err *err);
void jo_sync_side_free(struct jo_sync_side *s);
/* Open an object client for the side (max_conns connections). */
int jo_sync_side_open(const struct jo_sync_side *s, int max_conns, int retries,
		      struct jo_obj **out, struct jo_err *err);

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

/* Parse "10", "10k", "1.5M", "2G" (powers of 1024). -1 on error. */
int64_t jo_sync_parse_size(const char *s);

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

struct jo_sync_stream_opts {
	int threads;           /* key-range listers (>= 1) */
	bool sort;             /* list with one lister and sort externally */
	size_t sort_mem;       /* memory budget of the external sort */
	const char *tmp_dir;
	const char *after;     /* relative key: hand out only keys after it (resume), or NULL */
	const char *desc;      /* the side, for the warning about each skipped symlink */
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
/* Key ranges actually used (for tests and debug output). */
int jo_sync_stream_ranges(const struct jo_sync_stream *s);
/* Entries listed so far (all listers). */
uint64_t jo_sync_stream_listed(const struct jo_sync_stream *s);
/*
 * Symlinks the listing skipped (local directories: never followed, neither
 * copied nor deleted); each one was also reported with a warning line.
 */
uint64_t jo_sync_stream_links(const struct jo_sync_stream *s);

/* ---- bandwidth limit ----------------------------------------------------- */

struct jo_sync_bw;
/* bytes_per_sec 0: unlimited (jo_sync_bw_take returns at once). */
struct jo_sync_bw *jo_sync_bw_new(uint64_t bytes_per_sec);
void jo_sync_bw_free(struct jo_sync_bw *b);
/* Block until n bytes may pass. Accepts NULL. */
void jo_sync_bw_take(struct jo_sync_bw *b, size_t n);

/* ---- the engine ---------------------------------------------------------- */

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
};

struct jo_sync_summary {
	uint64_t src_listed, dst_listed, excluded;
	uint64_t copied, copied_bytes, server_side, multipart;
	uint64_t skipped, extra, deleted, failed;
	uint64_t would_copy, would_copy_bytes, would_delete;
	bool delete_refused;
	char delete_refused_why[200];
	int order_restarts;
	bool resumed_listing;      /* --resume continued after a saved listing position */
	uint64_t src_links, dst_links;  /* symlinks skipped in local directories */
	double seconds;
};

/*
 * Run one sync. Returns 0 when the run itself completed (check
 * summary->failed), or a negative JO_E* code for a fatal error (a listing
 * failed, the state file broke, cancelled).
 */
int jo_sync_run(const struct jo_sync_side *src, struct jo_obj *so,
		const struct jo_sync_side *dst, struct jo_obj *dobj,
		const struct jo_sync_opts *opts, struct jo_sync_summary *sum,
		struct jo_err *err);

#endif
