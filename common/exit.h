/*
 * exit.h: jfsops exit codes, the one source of them. JO_EXIT_CODES lists each
 * code with a brief text, which `jfsops --help` prints (and so the man page
 * jfsops(1), generated from it), and a full one, the table of
 * docs/exit-codes.md, which tests/tools/exit_codes.py writes from this list
 * (ctest test_exit_codes fails while a copy differs). Codes are only
 * appended. Each entry: X(NAME, CODE, "brief", "full").
 */
#ifndef JO_EXIT_H
#define JO_EXIT_H

#define JO_EXIT_CODES(X) \
	X(JO_EXIT_OK, 0, \
	  "ok", \
	  "success, nothing to report") \
	X(JO_EXIT_FOUND, 1, \
	  "found something (leaks, missing objects, differences)", \
	  "ran fine and found something (leaks, missing objects, differences)") \
	X(JO_EXIT_USAGE, 2, \
	  "usage: a bad flag or argument, malformed URL, refused config file", \
	  "usage error: bad flag or argument, malformed META-URL or S3 URL, refused config file, " \
	  "sync's SRC and DST overlapping") \
	X(JO_EXIT_FAIL, 3, \
	  "failed (I/O, internal error, a local permission denied)", \
	  "the operation failed (I/O, internal error, a local permission denied)") \
	X(JO_EXIT_PARTIAL, 4, \
	  "partly failed: finished, but some items failed", \
	  "finished, but some items failed (see the summary); gc: a task nobody held stayed " \
	  "unclaimable through three more claim rounds (status `tasks-left`; tasks under " \
	  "another worker's lease, or added by a concurrent planner after this run's last " \
	  "claim, exit 0)") \
	X(JO_EXIT_CONNECT, 5, \
	  "a server is unreachable or timed out", \
	  "a server is unreachable (Redis, S3 endpoint) or timed out") \
	X(JO_EXIT_AUTH, 6, \
	  "credentials rejected", \
	  "credentials were rejected (S3 key/secret, Redis password outside doctor)") \
	X(JO_EXIT_NOTJFS, 7, \
	  "not a JuiceFS volume, or corrupt metadata, data or manifest", \
	  "not a JuiceFS volume, or corrupt metadata/data/manifest (a format record field juicefs " \
	  "cannot have written: BlockSize, Compression, Storage, TrashDays, ...; a malformed S3 " \
	  "reply)") \
	X(JO_EXIT_NOTFOUND, 8, \
	  "not found (path, object, bucket, dataset version or column)", \
	  "not found: path, object, bucket (or bucket directory, or sync's SRC), dataset version or " \
	  "column, a Redis master name no sentinel monitors") \
	X(JO_EXIT_UNSUPPORTED, 9, \
	  "unsupported (encrypted volume, newer format, ChangeLog volume)", \
	  "unsupported: encrypted volume, newer metadata version, ChangeLog volume for mutations") \
	X(JO_EXIT_CONFLICT, 10, \
	  "lost a lease or a compare-and-swap", \
	  "lost a lease or a compare-and-swap") \
	X(JO_EXIT_META_AUTH, 11, \
	  "doctor: the metadata engine rejected the password", \
	  "doctor: the metadata engine rejected the password") \
	X(JO_EXIT_CLOCK, 12, \
	  "doctor: this host's clock is off against the object store", \
	  "doctor: this host's clock is off against the object store") \
	X(JO_EXIT_SIGINT, 130, \
	  "interrupted by SIGINT", \
	  "interrupted by SIGINT") \
	X(JO_EXIT_SIGPIPE, 141, \
	  "stdout closed by its reader (`| head`): a quiet stop", \
	  "stdout was closed by its reader (as `jfsops cat ... | head` does): a quiet stop, as when " \
	  "SIGPIPE stops a program") \
	X(JO_EXIT_SIGTERM, 143, \
	  "interrupted by SIGTERM", \
	  "interrupted by SIGTERM (what systemd and `timeout` send)")

enum jo_exit {
#define JO_EXIT_ENUM(name, code, brief, full) name = code,
	JO_EXIT_CODES(JO_EXIT_ENUM)
#undef JO_EXIT_ENUM
};

/* The exit code for a JO_E* error code. */
int jo_exit_from_err(int code);

#endif
