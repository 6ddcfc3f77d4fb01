/*
 * err.h: error codes and the caller-owned error buffer of every jfsops
 * library call.
 *
 * Library functions return 0 on success and a negative JO_E* code on failure,
 * with the details written into a caller-owned struct jo_err. Codes are only
 * ever appended, never renumbered: common/exit.h maps each to an exit status.
 * Messages never contain secrets (credentials are redacted at the source).
 */
#ifndef JO_ERR_H
#define JO_ERR_H

#include <stddef.h>

enum jo_ecode {
	JO_OK = 0,
	JO_ENOMEM = -1,       /* allocation failed */
	JO_EIO = -2,          /* local or remote I/O failed (generic) */
	JO_ENOTFOUND = -3,    /* object, path, key or row does not exist */
	JO_ECONFLICT = -4,    /* lost lease or failed compare-and-swap */
	JO_ETIMEOUT = -5,     /* a deadline passed */
	JO_ECANCELED = -6,    /* SIGINT/SIGTERM asked us to stop */
	JO_EPROTO = -7,       /* malformed data: server reply, record, manifest */
	JO_EINVAL = -8,       /* bad argument: URL, flag value */
	JO_EAUTH = -9,        /* credentials rejected (wrong password/secret) */
	JO_ECONNECT = -10,    /* server unreachable (refused, DNS, TLS) */
	JO_EUNSUPPORTED = -11,/* a feature we refuse to handle (encryption, ...) */
	JO_ENOTJFS = -12,     /* the database is not a JuiceFS volume */
	JO_ESTATE = -13,      /* remote state is unexpected (bucket missing, ...) */
	JO_EEXIST = -14,      /* a create-only write found the key taken: nothing written */
};

struct jo_err {
	int code;       /* last JO_E* code, 0 when none */
	char msg[512];  /* one line, no trailing newline */
};

/* Clear an error buffer. Accepts NULL. */
void jo_err_clear(struct jo_err *err);

/*
 * Record an error and return its code, so `return jo_err_set(...)` fits on
 * one line. err may be NULL (the code is still returned).
 */
int jo_err_set(struct jo_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Prepend context to the message already in err ("ctx: old message") and
 * return err->code. Use while passing an error upwards.
 */
int jo_err_wrap(struct jo_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A short name for a code: "ENOTFOUND", ... */
const char *jo_err_name(int code);

#endif
