/*
 * usage.h: the per-directory capacity report of `jfsops usage` and the
 * per-file facts it shares with `jfsops export`, both on the tree walker
 * (common/walk.h).
 *
 * usage_run() walks the volume once and folds every row into directory
 * totals bottom-up, level by level (deepest first), through extsorts keyed
 * by (depth, inode): no map of the tree is held, whatever its shape. The
 * directories down to opts.depth come back in tree order (a directory, then
 * everything below it) through usage_next_dir(); the opts.top largest
 * directories below that depth and the opts.top largest files are kept in
 * the report itself.
 *
 * Sizes: "bytes" is the logical size, the sum of regular files' lengths;
 * "space" is what `juicefs summary` calls SIZE: every entry (directories,
 * symlinks and files) at its length rounded up to 4 KiB, the directory itself
 * included. Hard links count once per path, as juicefs summary counts them.
 * Ages: the last access of a file is the later of its atime and mtime (a
 * write is an access too; with the clients' default --atime-mode noatime the
 * atime stays at the creation time), the last modification its mtime.
 */
#ifndef JO_USAGE_H
#define JO_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/walk.h"

struct jo_err;
struct jo_meta;
struct jo_xsort;

#define USAGE_MAX_BUCKETS 16

struct usage_totals {
	uint64_t bytes;                        /* regular files' lengths */
	uint64_t space;                        /* 4 KiB-rounded, as juicefs summary */
	uint64_t files;                        /* entries that are not directories */
	uint64_t dirs;                         /* directories, itself included */
	uint64_t cold;                         /* bytes last accessed before the cold edge */
	uint64_t access[USAGE_MAX_BUCKETS];    /* bytes by age of last access */
	uint64_t modify[USAGE_MAX_BUCKETS];    /* bytes by age of last modification */
};

struct usage_opts {
	const char *root;       /* "/" by default */
	uint32_t depth;         /* directories listed down to this depth (root = 0) */
	uint32_t top;           /* largest directories below depth, largest files */
	int nbuckets;           /* age bucket edges; a last bucket "older" follows */
	int64_t bucket[USAGE_MAX_BUCKETS - 1];  /* ascending ages, seconds */
	int64_t cold;           /* cold edge: age in seconds */
	int64_t now;            /* unix seconds the ages are measured from (0: the snapshot) */
	size_t mem_limit;
	const char *tmp_dir;
};

struct usage_dir {
	char *path;             /* owned by the report / the heap */
	size_t path_len;
	uint32_t depth;
	uint64_t ino;
	struct usage_totals t;
};

struct usage_file {
	char *path;
	size_t path_len;
	uint64_t ino, bytes;
	int64_t atime, mtime;
};

struct usage_report {
	struct usage_totals total;     /* the whole tree under root */
	struct jo_walk_stats walk;
	int64_t now;
	/* trash and files removed while open */
	uint64_t trash_files, trash_bytes, open_files, open_bytes;
	/* pending reclaim: removed files, slices with no reference, delayed slices */
	uint64_t pending_files, pending_file_bytes;
	uint64_t pending_slices, pending_slice_bytes;
	uint64_t delayed_slices, delayed_bytes;
	/* regular files and how many of them were read after their last change */
	uint64_t regular_files, atime_later;
	/* the largest directories below depth and files, largest first */
	struct usage_dir *top_dirs;
	size_t ntop_dirs;
	struct usage_file *top_files;
	size_t ntop_files;
	/* private */
	struct jo_xsort *out;
	struct usage_dir cur;
};

/* A directory's change since an earlier report (--since). */
struct usage_growth {
	bool known;             /* the earlier report listed this directory */
	int64_t bytes, files;   /* now minus then (then = 0 when not known) */
	uint64_t then_bytes;
};

/* What a report says about itself: the HTML page's and the table's header. */
struct usage_head {
	const char *volume, *engine, *root;
	bool point_in_time;
	int64_t snapshot;       /* unix s */
	const char *atime_note; /* one sentence on access times */
	const char *since;      /* the earlier report's path, or NULL */
	int64_t since_time;     /* its snapshot (0 unknown) */
};

/* The self-contained HTML page (html.c): begin, one call per directory in
 * tree order, end. Paths are escaped; nothing is fetched from the network. */
void usage_html_begin(FILE *fp, const struct usage_opts *o, const struct usage_head *h);
void usage_html_dir(FILE *fp, const struct usage_opts *o, const struct usage_head *h,
		    const struct usage_dir *d, const struct usage_growth *g);
void usage_html_end(FILE *fp, const struct usage_opts *o, const struct usage_head *h,
		    const struct usage_report *r, const struct usage_growth *total_growth);

/* A size as du -h prints it: 0, 512, 1.5K, 12M, 3.0G (powers of 1024). */
void usage_human(uint64_t v, char buf[16]);

/* Parse "1d,7d,30d,90d,1y" into opts->bucket / nbuckets (JO_EINVAL). */
int usage_parse_buckets(const char *s, struct usage_opts *o, struct jo_err *err);
/* "90d", "12h", "2w", "1y", "1.5d", "3600" (s) -> seconds, by the one duration grammar
 * (common/opt.h); -1 when malformed. */
int64_t usage_parse_age(const char *s, size_t n);
/* The label of bucket i ("1d" ... "older"): buf of 16 bytes. */
void usage_bucket_label(const struct usage_opts *o, int i, char buf[16]);
/* The bucket index of an age (seconds). */
int usage_bucket_of(const struct usage_opts *o, int64_t age);

/* Walk and fold. out is released with usage_report_release() (also on failure). */
int usage_run(struct jo_meta *m, const struct usage_opts *o, struct usage_report *out,
	      struct jo_err *err);
/*
 * The next directory down to opts.depth in tree order: 1 and *out (borrowed
 * until the next call), 0 at the end, or a negative JO_E* code.
 */
int usage_next_dir(struct usage_report *r, const struct usage_dir **out, struct jo_err *err);
void usage_report_release(struct usage_report *r);

/* Path order of the report: byte order with '/' lowest, so a directory's
 * subtree follows it at once ("/a", "/a/b", "/a-b"). */
int usage_path_cmp(const char *a, size_t alen, const char *b, size_t blen);

struct jo_ctx;
/* `jfsops usage` (usage/cmd_usage.c), an entry of cmd/main.c's command table. */
int cmd_usage(int argc, char **argv, struct jo_ctx *ctx);

#endif
