/* trash.h: the parsing behind `jfsops trash` (no I/O), for the command and its tests. */
#ifndef JO_TRASH_H
#define JO_TRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A trash entry's name "PARENT-INODE-NAME" (base.go trashEntry): 0 with the
 * two numbers and the offset of NAME, or -1 when the name is not of that
 * shape (a number missing, not decimal, overflowing, or NAME empty).
 */
int jo_trash_entry_parse(const char *name, size_t len, uint64_t *parent, uint64_t *ino,
			 size_t *name_off);

/*
 * An RFC 3339 time: "2026-12-03T17:00:00Z", fractional seconds (dropped),
 * 't' or ' ' as the separator, 'z', or an offset "+01:00" / "-05:30".
 * 0 with *out the unix seconds, or -1 when malformed (a date that does not
 * exist, Feb 30, is malformed; years before 1970 too).
 */
int jo_trash_time_parse(const char *s, int64_t *out);

/* Is path (absolute, no trailing '/') prefix itself or under it? prefix ""
 * is the root: everything is under it. */
bool jo_trash_path_under(const char *path, const char *prefix);

struct jo_ctx;
/* `jfsops trash` (trash/cmd_trash.c), an entry of cmd/main.c's command table. */
int cmd_trash(int argc, char **argv, struct jo_ctx *ctx);

#endif
