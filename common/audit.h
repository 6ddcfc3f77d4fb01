/*
 * audit.h: the audit trail of destructive commands: one JSON object per line
 * (JSON Lines) per object deleted or refused, appended to a file. Each line
 * is written with one write(2) on an O_APPEND descriptor, so several
 * processes may share one audit file. Thread-safe.
 */
#ifndef JO_AUDIT_H
#define JO_AUDIT_H

#include <stdint.h>

struct jo_err;
struct jo_audit;

/* One record. Strings are borrowed; NULL fields are left out. */
struct jo_audit_rec {
	const char *action;   /* "delete", "would-delete", "skip" */
	const char *worker;   /* lease owner / worker id */
	int64_t task;         /* task id, 0 = none */
	const char *key;      /* object key */
	uint64_t slice_id;
	uint32_t slice_size;
	const char *reason;   /* "removed-file", "pending-slice", "delayed-slice", ... */
	const char *result;   /* "ok", "not-found", "error", "dry-run" */
	const char *error;    /* message when result is "error" */
};

/*
 * Open (create, append) path. "-" is stdout. A new file gets 0666 less the
 * umask; a symlink, a non-regular file or another user's file is refused
 * (common/file.h, jo_file_append_open).
 */
int jo_audit_open(struct jo_audit **out, const char *path, struct jo_err *err);
/* Append one line with the current UTC time ("time", RFC 3339 with ms). */
int jo_audit_write(struct jo_audit *a, const struct jo_audit_rec *r, struct jo_err *err);
/* fsync the file (end of a batch). */
int jo_audit_sync(struct jo_audit *a, struct jo_err *err);
/* Close; NULL ok. */
void jo_audit_close(struct jo_audit *a);

#endif
