/* command.c: a command's errors as exit codes and one-line messages. */
#include "common/command.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/exit.h"

int jo_exit_from_err(int code)
{
	switch (code) {
	case JO_OK: return JO_EXIT_OK;
	case JO_EINVAL: return JO_EXIT_USAGE;
	case JO_ECONNECT:
	case JO_ETIMEOUT: return JO_EXIT_CONNECT;
	case JO_EAUTH: return JO_EXIT_AUTH;
	case JO_ENOTJFS:
	case JO_EPROTO: return JO_EXIT_NOTJFS;
	case JO_ENOTFOUND:
	case JO_ESTATE: return JO_EXIT_NOTFOUND;
	case JO_EUNSUPPORTED: return JO_EXIT_UNSUPPORTED;
	case JO_ECONFLICT: return JO_EXIT_CONFLICT;
	case JO_ECANCELED: return 128 + (jo_cancelled() ? jo_cancelled() : 2 /* SIGINT */);
	}
	return JO_EXIT_FAIL;
}

int cmd_fail(const struct jo_ctx *ctx, const struct jo_err *err)
{
	char esc[JO_ESC_TERM_MAX(sizeof(err->msg))];

	/* a message names keys, paths and server replies: escaped for the terminal */
	fprintf(stderr, "%s %s: %s\n", ctx->prog, ctx->cmd,
		err->msg[0] ? jo_esc_term(esc, sizeof(esc), err->msg) : jo_err_name(err->code));
	return jo_exit_from_err(err->code);
}

int cmd_usage_error(const struct jo_ctx *ctx, const char *fmt, ...)
{
	char msg[2048], esc[JO_ESC_TERM_MAX(sizeof(msg))];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* the values quoted come from argv, files and servers: escaped for the terminal */
	fprintf(stderr, "%s %s: %s (see '%s %s --help')\n", ctx->prog, ctx->cmd,
		jo_esc_term(esc, sizeof(esc), msg), ctx->prog, ctx->cmd);
	return JO_EXIT_USAGE;
}
