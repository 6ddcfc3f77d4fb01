/* Shared command plumbing: error reporting, exit codes, opening a volume. */
#include "cmd/cmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/exit.h"
#include "cmd/util.h"
#include "common/err.h"
#include "common/jfs/jfs.h"

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
	case JO_ECANCELED: return JO_EXIT_SIGINT;
	}
	return JO_EXIT_FAIL;
}

int cmd_fail(const struct jo_ctx *ctx, const struct jo_err *err)
{
	fprintf(stderr, "%s %s: %s\n", ctx->prog, ctx->cmd,
		err->msg[0] ? err->msg : jo_err_name(err->code));
	return jo_exit_from_err(err->code);
}

int cmd_usage_error(const struct jo_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s: ", ctx->prog, ctx->cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see '%s %s --help')\n", ctx->prog, ctx->cmd);
	return JO_EXIT_USAGE;
}

/* Hide a secret in our own argv so `ps` and /proc/PID/cmdline do not show it. */
void cmd_scrub_arg(char *arg)
{
	if (arg)
		memset(arg, '*', strlen(arg));
}

/* Replace the password of a URL in place ("redis://:pw@h" -> "redis://:**@h"). */
void cmd_scrub_url_password(char *url)
{
	char *scheme = strstr(url, "://");
	char *at, *colon;

	if (!scheme)
		return;
	scheme += 3;
	at = strrchr(scheme, '@');
	if (!at)
		return;
	colon = memchr(scheme, ':', (size_t)(at - scheme));
	if (colon)
		memset(colon + 1, '*', (size_t)(at - colon - 1));
}

int cmd_vol_opt(struct cmd_vol_args *a, int opt, char *arg)
{
	switch (opt) {
	case CMD_OPT_BUCKET: a->bucket = arg; return 1;
	case CMD_OPT_ACCESS_KEY: a->access_key = arg; return 1;
	case CMD_OPT_SECRET_KEY:
		a->secret_copy = strdup(arg);
		a->secret_key = a->secret_copy;
		cmd_scrub_arg(arg);
		return 1;
	case CMD_OPT_INSECURE: a->insecure = true; return 1;
	}
	return 0;
}

int cmd_open_volume_quiet(struct cmd_vol_args *a, const char *meta_url, struct jo_vol **out,
			  struct jo_err *err)
{
	struct jo_vol_opts vo = { 0 };
	const char *env;

	vo.meta_url = meta_url;
	vo.bucket = a->bucket ? a->bucket : getenv("JFSOPS_BUCKET");
	vo.access_key = a->access_key ? a->access_key : getenv("JFSOPS_ACCESS_KEY");
	vo.secret_key = a->secret_key ? a->secret_key : getenv("JFSOPS_SECRET_KEY");
	vo.session_token = getenv("JFSOPS_SESSION_TOKEN");
	vo.region = getenv("JFSOPS_REGION");
	env = getenv("JFSOPS_INSECURE");
	vo.insecure = a->insecure || (env && *env && strcmp(env, "0"));
	return jo_vol_open(out, &vo, err);
}

int cmd_open_volume(const struct jo_ctx *ctx, struct cmd_vol_args *a, char *meta_url,
		    struct jo_vol **out)
{
	struct jo_err err = { 0 };

	a->url_copy = strdup(meta_url);
	if (!a->url_copy) {
		jo_err_set(&err, JO_ENOMEM, "out of memory");
		return cmd_fail(ctx, &err);
	}
	cmd_scrub_url_password(meta_url);
	if (cmd_open_volume_quiet(a, a->url_copy, out, &err))
		return cmd_fail(ctx, &err);
	return 0;
}

void cmd_vol_args_release(struct cmd_vol_args *a)
{
	if (a->secret_copy) {
		memset(a->secret_copy, 0, strlen(a->secret_copy));
		free(a->secret_copy);
	}
	free(a->url_copy);
	a->secret_copy = NULL;
	a->url_copy = NULL;
}

int cmd_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	if (!s || !*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (end == s)
		return -1;
	if (*end) {
		switch (*end) {
		case 'k': case 'K': mul = 1ULL << 10; break;
		case 'm': case 'M': mul = 1ULL << 20; break;
		case 'g': case 'G': mul = 1ULL << 30; break;
		case 't': case 'T': mul = 1ULL << 40; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end)
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = (uint64_t)v * mul;
	return 0;
}
