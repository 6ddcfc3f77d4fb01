/*
 * exit.h: jfsops exit codes, one mapping from JO_E* codes. Documented in the
 * README ("Exit codes"); codes are only appended.
 */
#ifndef JO_EXIT_H
#define JO_EXIT_H

enum jo_exit {
	JO_EXIT_OK = 0,          /* success, nothing to report */
	JO_EXIT_FOUND = 1,       /* ran fine and found something (leaks, differences) */
	JO_EXIT_USAGE = 2,       /* bad flag, bad argument, malformed URL */
	JO_EXIT_FAIL = 3,        /* the operation failed (I/O, internal) */
	JO_EXIT_PARTIAL = 4,     /* finished, but some items failed */
	JO_EXIT_CONNECT = 5,     /* a server is unreachable */
	JO_EXIT_AUTH = 6,        /* credentials were rejected */
	JO_EXIT_NOTJFS = 7,      /* not a JuiceFS volume, or corrupt metadata/data */
	JO_EXIT_NOTFOUND = 8,    /* a path, object, bucket or version does not exist */
	JO_EXIT_UNSUPPORTED = 9, /* a feature jfsops refuses (encryption, newer format...) */
	JO_EXIT_CONFLICT = 10,   /* lost a lease or a compare-and-swap */
	JO_EXIT_META_AUTH = 11,  /* doctor: the metadata engine refused the password */
	JO_EXIT_CLOCK = 12,      /* doctor: the clock differs from the object store's */
	JO_EXIT_SIGINT = 130,
	JO_EXIT_SIGPIPE = 141,   /* stdout's reader went away (`| head`), as SIGPIPE */
	JO_EXIT_SIGTERM = 143,
};

/* The exit code for a JO_E* error code. */
int jo_exit_from_err(int code);

#endif
