/*
 * export.h: `jfsops export`: the volume's files (and slices) as Parquet
 * tables from one walk (common/walk.h), full or incremental.
 *
 * Layout of an export directory (created, or empty, before the run):
 *   files.parquet    one row per path (hard links: one row each, same inode)
 *   slices.parquet   with EXPORT_SLICES: one row per slice record (holes
 *                    left out) of every inode in files
 *   deleted.parquet  incremental only: inodes in the previous export that are
 *                    gone (or in the trash) now
 *   _jfsops_state    the sorted (inode, row digest) list the next
 *                    incremental export merges against
 *   _SUCCESS         written last (JSON: volume, snapshot, tables, counts),
 *                    so a reader never takes a half export
 * Every file is created under a random hidden name and renamed into place.
 *
 * Incremental: files (and slices) then hold every current row of each inode
 * that is new or whose rows differ from the previous export's (attributes,
 * chunk figures, slices, or any of its paths: everything below a renamed
 * directory), and deleted the inodes the previous export had and this walk
 * did not find. previous minus (deleted and the inodes in files), plus files,
 * is a full export of the new state. Both lists are in inode order, so
 * finding the changes is a merge, not a map.
 */
#ifndef JO_USAGE_EXPORT_H
#define JO_USAGE_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/walk.h"

struct jo_err;
struct jo_meta;
struct jo_format;

enum export_tables {
	EXPORT_FILES = 1u << 0,
	EXPORT_SLICES = 1u << 1,
};

struct export_opts {
	const char *out;           /* the export directory */
	const char *previous;      /* an earlier export directory, or NULL (full) */
	unsigned tables;           /* enum export_tables */
	size_t mem_limit;
	const char *tmp_dir;
	size_t row_group_bytes;    /* 0: the writer's default */
};

struct export_result {
	struct jo_walk_stats walk;
	uint64_t rows, inodes, changed_inodes, slices, deleted;
	int64_t since;             /* the previous export's snapshot (incremental) */
};

/* Run an export of the volume on m (format already loaded). */
int export_run(struct jo_meta *m, const struct jo_format *f, const struct export_opts *o,
	       struct export_result *res, struct jo_err *err);

struct jo_ctx;
/* `jfsops export` (usage/cmd_export.c), an entry of cmd/main.c's command table. */
int cmd_export(int argc, char **argv, struct jo_ctx *ctx);

#endif
