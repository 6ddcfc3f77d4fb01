/*
 * walk.h: the namespace of a volume as one stream of rows, one per path,
 * read from one snapshot where the engine has one, in bounded memory.
 *
 * jo_walk_run() reads, inside jo_meta_snapshot_begin/end (SQL: one
 * read-only transaction; tkv: one revision; Redis has no snapshots, and
 * stats.point_in_time says so):
 *   1. the tree under opts.root, breadth first, one directory at a time
 *      (readdir); the frontier of each level goes through an extsort, so a
 *      directory of 10M entries or a chain 10,000 deep costs the same memory;
 *   2. with JO_WALK_TRASH, the trash tree (.trash/HOUR/...) likewise;
 *   3. every inode's attributes: with the entries where the family reads
 *      both at once (jo_meta_readdir_attr: Redis), else by scan_inodes;
 *   4. with JO_WALK_CHUNKS, the files' chunks below their length, as juicefs
 *      dump reads them (chunks a truncate left past EOF are not counted):
 *      read per file in pipelined batches where the family lists attributes
 *      with the entries (jo_meta_read_chunks), else one scan of every chunk
 *      (scan_chunks); records and stored bytes per inode, and with
 *      JO_WALK_SLICES each record;
 *   5. with JO_WALK_SUSTAINED, the inodes removed while open (sustained) in
 *      the sets of the registered sessions (jo_meta_scan_sustained_registered);
 *   6. opts.in_snapshot, if set (more reads in the same snapshot).
 * The path rows, the attributes and the chunk figures are then each sorted
 * by inode (extsort, plain runs under opts.tmp_dir) and merged: no map of the
 * volume is held in memory.
 *
 * Rows come out in inode order, and the rows of one inode (its hard links)
 * in the order (where, parent, depth, path). A hard-linked file is one row
 * per path, each with the same inode, attributes and chunk figures; a
 * directory is one row. Without a snapshot (Redis) a path seen in the walk
 * whose inode is gone by the attribute scan is dropped (stats.vanished), and
 * an inode seen under more paths than it has links (moved during the walk)
 * keeps its first nlink rows (stats.extra_paths).
 *
 * Trash rows have where = JO_WALK_IN_TRASH and paths "/.trash/HOUR/NAME..."
 * (the trash root itself is not a row); inodes removed while open have
 * where = JO_WALK_OPEN_UNLINKED, no path ("") and parent 0. Neither is
 * reached from opts.root.
 *
 * Errors: those of the meta reads and of extsort (JO_EIO for the temp
 * files, JO_ECANCELED), JO_ENOTFOUND when opts.root does not exist,
 * JO_EINVAL when it is not a directory, or a callback's non-zero value.
 */
#ifndef JO_WALK_H
#define JO_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/meta/meta.h"

struct jo_err;

enum jo_walk_flags {
	JO_WALK_CHUNKS = 1u << 0,    /* chunk figures per inode (scan_chunks) */
	JO_WALK_SLICES = 1u << 1,    /* also each slice record (implies CHUNKS) */
	JO_WALK_TRASH = 1u << 2,     /* walk the trash tree too */
	JO_WALK_SUSTAINED = 1u << 3, /* rows for inodes removed while open */
};

enum jo_walk_where {
	JO_WALK_IN_TREE = 0,       /* reached from opts.root */
	JO_WALK_IN_TRASH = 1,      /* under .trash */
	JO_WALK_OPEN_UNLINKED = 2, /* removed while open (sustained), no path */
};

/* One row. Pointers are borrowed for the callback only. */
struct jo_walk_row {
	uint64_t ino;
	uint64_t parent;        /* the directory this path is listed under (hard links:
				 * each row its own); for opts.root its attr parent */
	const char *path;       /* full path, "/" for the root; "" when OPEN_UNLINKED */
	size_t path_len;
	const char *name;       /* last path component ("" for "/") */
	size_t name_len;
	uint32_t depth;         /* components below opts.root (root: 0) */
	enum jo_walk_where where;
	uint32_t link;          /* 0 for an inode's first row, 1, 2, ... for its other paths */
	struct jo_attr attr;
	/* JO_WALK_CHUNKS, for files: chunk lists, their 24-byte records with a
	 * slice (holes not counted), and the sizes of the distinct slices they
	 * reference, chunk by chunk (the object bytes the file keeps alive,
	 * uncompressed, including data hidden by later writes until compaction) */
	uint64_t chunks, slice_records, stored_bytes;
};
typedef int (*jo_walk_row_cb)(const struct jo_walk_row *row, void *payload);

/* JO_WALK_SLICES: one record of a chunk of an inode that had rows, after its
 * rows, in chunk order then list order; where is its first row's. */
typedef int (*jo_walk_slice_cb)(uint64_t ino, enum jo_walk_where where, uint32_t indx,
				uint32_t pos, uint64_t id, uint32_t size, uint32_t off,
				uint32_t len, void *payload);

struct jo_walk_opts {
	const char *root;          /* path to walk from; NULL or "" = "/" */
	unsigned flags;            /* enum jo_walk_flags */
	size_t mem_limit;          /* all sort buffers together; 0 = 256 MiB */
	const char *tmp_dir;       /* parent of the sorts' temp dirs; NULL = /tmp */
	jo_walk_row_cb row;        /* required */
	jo_walk_slice_cb slice;    /* JO_WALK_SLICES */
	/* Called inside the snapshot after the scans, on the same handle (reads only). */
	int (*in_snapshot)(struct jo_meta *m, void *payload, struct jo_err *err);
	void *payload;
};
#define JO_WALK_OPTS_INIT { .root = "/", .mem_limit = 256u << 20 }

struct jo_walk_stats {
	bool point_in_time;     /* one snapshot (false on Redis) */
	int64_t started;        /* unix seconds when the snapshot was taken */
	uint64_t dirs_read;     /* directories listed */
	uint64_t rows;          /* rows handed to opts.row */
	uint64_t vanished;      /* paths whose inode had no attributes (removed mid-walk) */
	uint64_t extra_paths;   /* paths beyond an inode's link count (moved mid-walk) */
	uint64_t chunks_read;   /* chunk lists scanned */
	uint64_t tmp_bytes;     /* bytes the sorts wrote to disk (plain runs) */
	size_t peak_sort_mem;   /* the largest sort buffer use, bytes */
};

/* Run a walk on m (a read-only handle is enough). stats may be NULL. */
int jo_walk_run(struct jo_meta *m, const struct jo_walk_opts *opts, struct jo_walk_stats *stats,
		struct jo_err *err);

#endif
