/*
 * volume.c: opening a volume for a command (flags > environment > config
 * profile > the format record), the metadata passwords of the environment,
 * scrubbing secrets from argv.
 */
#include "common/volume.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/config.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"

/*
 * As juicefs does, a password missing from the META-URL comes from the
 * environment: $META_PASSWORD, else the trimmed content of the file named by
 * $META_PASSWORD_FILE; a Redis URL takes $REDIS_PASSWORD before either (the
 * metadata layer picks by engine). A URL with its own password ignores all.
 */
void cmd_env_meta_passwords(const char **meta, const char **redis)
{
	static char filepw[1024];
	const char *env = getenv("META_PASSWORD");

	*redis = getenv("REDIS_PASSWORD");
	if (*redis && !**redis)
		*redis = NULL;
	if (env && *env) {
		*meta = env;
		return;
	}
	*meta = NULL;
	env = getenv("META_PASSWORD_FILE");
	if (env && *env) {
		FILE *f = fopen(env, "r");
		size_t n;

		if (!f)
			return;
		n = fread(filepw, 1, sizeof(filepw) - 1, f);
		fclose(f);
		filepw[n] = '\0';
		while (n && isspace((unsigned char)filepw[n - 1]))
			filepw[--n] = '\0';
		n = strspn(filepw, " \t\r\n");
		if (filepw[n])
			*meta = filepw + n;
	}
}

int cmd_meta_open(const char *url, struct jo_meta **out, struct jo_err *err)
{
	return cmd_meta_open_mode(url, true, out, err);
}

int cmd_meta_open_format(const char *url, struct jo_meta **out, struct jo_format *fmt,
			 struct jo_err *err)
{
	int rc = cmd_meta_open(url, out, err);

	if (!rc)
		rc = jo_meta_load_format(*out, fmt, err);
	return rc;
}

int cmd_meta_open_mode(const char *url, bool read_only, struct jo_meta **out, struct jo_err *err)
{
	struct jo_meta_open_opts mo = { .read_only = read_only };

	cmd_env_meta_passwords(&mo.password, &mo.redis_password);
	mo.sentinel_password = getenv("SENTINEL_PASSWORD");
	return jo_meta_open_with(out, url, &mo, err);
}

/*
 * Overwrite the n bytes at p, the secret of a string that ends n + tail
 * bytes later, with "****": the tail moves up and NULs fill the end. A
 * secret shorter than that becomes as many stars.
 */
static void scrub_span(char *p, size_t n, size_t tail)
{
	if (n < 4) {
		memset(p, '*', n);
		return;
	}
	memcpy(p, "****", 4);
	memmove(p + 4, p + n, tail + 1);
	memset(p + 4 + tail + 1, '\0', n - 4);
}

/*
 * Hide a secret in an argument: "****" whatever its length. main() already
 * rewrote what ps shows (cmd/proctitle.c): this is for the messages that
 * name the argument later, and for ps when main could not.
 */
void cmd_scrub_arg(char *arg)
{
	if (arg)
		scrub_span(arg, strlen(arg), 0);
}

/* Replace the password of a URL in place ("redis://:pw@h" -> "redis://:****@h"). */
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
		scrub_span(colon + 1, (size_t)(at - colon - 1), strlen(at));
}

char *cmd_take_url(char *arg)
{
	char *url = strdup(arg);

	if (url)
		cmd_scrub_url_password(arg);
	return url;
}

int cmd_opt_exit(struct jo_ctx *ctx, int n)
{
	ctx->metrics_path = NULL;
	return n == JO_OPT_SHOWN ? JO_EXIT_OK : JO_EXIT_USAGE;
}

bool cmd_parse_operands(struct jo_ctx *ctx, const struct jo_opt_cmd *cmd, int argc, char **argv,
			int want, const char *what, int *exit_code)
{
	int n = jo_opt_parse(cmd, argc, argv);

	if (n < 0)
		*exit_code = cmd_opt_exit(ctx, n);
	else if (n != want)
		*exit_code = cmd_usage_error(ctx, "%s", what);
	return n >= 0 && n == want;
}

int cmd_vol_secret_cb(const struct jo_option *o, const char *arg, char *want, size_t cap)
{
	struct cmd_vol_args *a = o->value;

	(void)want;
	(void)cap;
	free(a->secret_copy);
	a->secret_copy = strdup(arg);
	a->secret_key = a->secret_copy;
	cmd_scrub_arg((char *)arg); /* a word of argv, writable */
	return 0;
}

int cmd_parse_retries(const char *arg, int *out, struct jo_err *err)
{
	uint64_t n;

	if (jo_parse_uint(arg, 0, 100, &n))
		return jo_err_set(err, JO_EINVAL, "bad --retries '%s' (0..100)", arg);
	*out = (int)n;
	return 0;
}

int cmd_load_config(const char *config_flag, const char *profile_flag, struct jo_cfg **cfg,
		    const char **profile, struct jo_err *err)
{
	char path[4096];
	bool named;
	int rc;

	*cfg = NULL;
	*profile = NULL;
	rc = jo_cfg_path(config_flag, path, sizeof(path), &named, err);
	if (rc)
		return rc;
	rc = jo_cfg_load(cfg, path, named, err);
	if (rc)
		return rc;
	rc = jo_cfg_pick_profile(*cfg, profile_flag, profile, err);
	if (rc) {
		jo_cfg_free(*cfg);
		*cfg = NULL;
	}
	return rc;
}

int cmd_resolve_storage(const struct cmd_vol_args *a, struct jo_cfg_values *out, char **profile_out,
			struct jo_err *err)
{
	struct jo_cfg_values fl = { 0 };
	struct jo_cfg *cfg = NULL;
	const char *profile = NULL;
	int rc;

	if (profile_out)
		*profile_out = NULL;
	if (a->retries) { /* here, so that commands opening no store check it too */
		int n;

		rc = cmd_parse_retries(a->retries, &n, err);
		if (rc)
			return rc;
	}
	rc = cmd_load_config(a->config, a->profile, &cfg, &profile, err);
	if (rc)
		return rc;
	if ((a->bucket && jo_cfg_values_set(&fl, JO_CFG_BUCKET, a->bucket, JO_CFG_FLAG)) ||
	    (a->access_key && jo_cfg_values_set(&fl, JO_CFG_ACCESS_KEY, a->access_key, JO_CFG_FLAG)) ||
	    (a->secret_key && jo_cfg_values_set(&fl, JO_CFG_SECRET_KEY, a->secret_key, JO_CFG_FLAG)) ||
	    (a->insecure && jo_cfg_values_set(&fl, JO_CFG_INSECURE, "1", JO_CFG_FLAG))) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	} else {
		rc = jo_cfg_resolve(cfg, profile, &fl, "JFSOPS", out, err);
	}
	if (!rc && profile_out && profile && !(*profile_out = strdup(profile)))
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (rc)
		jo_cfg_values_release(out);
	jo_cfg_values_release(&fl);
	jo_cfg_free(cfg);
	return rc;
}

/*
 * A profile (or env JFSOPS_ENDPOINT) that names only an endpoint keeps the
 * volume's bucket name and moves it to that endpoint:
 * "http://old:9000/jfs1" or "https://jfs1.s3.x.amazonaws.com" + endpoint
 * "http://new:8333" -> "http://new:8333/jfs1".
 */
static int rebase_bucket(const char *meta_url, const char *endpoint, char **out, struct jo_err *err)
{
	struct jo_meta *m = NULL;
	struct jo_format f = { 0 };
	const char *b, *host, *slash, *name;
	size_t nl, el;
	int rc;

	rc = cmd_meta_open(meta_url, &m, err);
	if (!rc)
		rc = jo_meta_load_format(m, &f, err);
	if (rc) {
		jo_meta_close(m);
		return rc;
	}
	b = f.bucket ? f.bucket : "";
	host = strstr(b, "://");
	host = host ? host + 3 : b;
	slash = strchr(host, '/');
	if (slash && slash[1]) {
		name = slash + 1;
		nl = strcspn(name, "/?");
	} else {
		name = host;
		nl = strcspn(host, ".:/");
	}
	el = strlen(endpoint);
	while (el && endpoint[el - 1] == '/')
		el--;
	if (!nl || !(*out = malloc(el + nl + 2))) {
		rc = nl ? jo_err_set(err, JO_ENOMEM, "out of memory")
			: jo_err_set(err, JO_EINVAL, "cannot find the bucket name in the volume's bucket URL");
	} else {
		memcpy(*out, endpoint, el);
		(*out)[el] = '/';
		memcpy(*out + el + 1, name, nl);
		(*out)[el + 1 + nl] = 0;
	}
	jo_format_release(&f);
	jo_meta_close(m);
	return rc;
}

int cmd_open_volume_quiet(struct cmd_vol_args *a, const char *meta_url, struct jo_vol **out,
			  struct jo_err *err)
{
	struct jo_vol_opts vo = { 0 };
	struct jo_cfg_values cv = { 0 };
	char *rebased = NULL;
	int rc;

	char *url;

	*out = NULL;
	rc = cmd_resolve_storage(a, &cv, NULL, err); /* also checks --retries */
	if (rc)
		return rc;
	vo.retries_set = a->retries && !cmd_parse_retries(a->retries, &vo.retries, err);
	url = strdup(meta_url);
	if (!url) {
		jo_cfg_values_release(&cv);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	meta_url = url;
	vo.meta_url = meta_url;
	cmd_env_meta_passwords(&vo.meta_password, &vo.meta_redis_password);
	vo.meta_sentinel_password = getenv("SENTINEL_PASSWORD");
	vo.meta_read_only = a->read_only;
	vo.list_temp_files = a->list_temp_files;
	vo.list_links = a->list_links;
	vo.bucket = cv.v[JO_CFG_BUCKET];
	if (!vo.bucket && cv.v[JO_CFG_ENDPOINT]) {
		rc = rebase_bucket(meta_url, cv.v[JO_CFG_ENDPOINT], &rebased, err);
		if (rc) {
			jo_cfg_values_release(&cv);
			memset(url, 0, strlen(url));
			free(url);
			return rc;
		}
		vo.bucket = rebased;
	}
	vo.access_key = cv.v[JO_CFG_ACCESS_KEY];
	vo.secret_key = cv.v[JO_CFG_SECRET_KEY];
	vo.session_token = cv.v[JO_CFG_SESSION_TOKEN];
	vo.region = cv.v[JO_CFG_REGION];
	vo.insecure = cv.v[JO_CFG_INSECURE] && !strcmp(cv.v[JO_CFG_INSECURE], "1");
	vo.addressing = cv.v[JO_CFG_PATH_STYLE] && !strcmp(cv.v[JO_CFG_PATH_STYLE], "1") ? 1 : 0;
	vo.list_v1 = cv.v[JO_CFG_LIST_V1] && !strcmp(cv.v[JO_CFG_LIST_V1], "1");
	rc = jo_vol_open(out, &vo, err);
	free(rebased);
	memset(url, 0, strlen(url));
	free(url);
	jo_cfg_values_release(&cv);
	return rc;
}

int cmd_open_volume(struct jo_ctx *ctx, struct cmd_vol_args *a, char *meta_url,
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
	cmd_metrics_volume(ctx, (*out)->fmt.name);
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
