/*
 * objurl.c: an object-store location from its URL, flags, a profile and the
 * environment (objurl.h).
 *
 * The prefix is a "directory": "s3://b/data" means the keys under "data/".
 * The URL never carries a secret (access_key/secret_key in the query are
 * refused); credentials come from flags, the profile (common/config.h, the
 * one config file of every command), JFSOPS_<WHICH>_ACCESS_KEY /
 * JFSOPS_<WHICH>_SECRET_KEY (/ _SESSION_TOKEN), or AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN).
 */
#include "common/objurl.h"

#include "common/config.h"
#include "common/err.h"
#include "common/object/object.h"
#include "common/strfree.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct kvset {
	char *endpoint, *region, *access_key, *secret_key;
	int path_style, list_v1, unordered, insecure;
};

static void kv_free(struct kvset *k)
{
	free(k->endpoint);
	free(k->region);
	free(k->access_key);
	free(k->secret_key);
}

static int parse_bool(const char *v)
{
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
		return 1;
	if (!strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
		return 0;
	return -1;
}

static int set_str(char **dst, const char *v)
{
	char *d = strdup(v);
	if (!d)
		return JO_ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

/* Apply one "name=value" setting. from_url refuses secrets. */
static int kv_apply(struct kvset *k, const char *name, const char *val, bool from_url,
		    const char *where, struct jo_err *err)
{
	int *flag = NULL;

	if (!strcmp(name, "endpoint"))
		return set_str(&k->endpoint, val) ? jo_err_set(err, JO_ENOMEM, "out of memory") : 0;
	if (!strcmp(name, "region"))
		return set_str(&k->region, val) ? jo_err_set(err, JO_ENOMEM, "out of memory") : 0;
	if (!strcmp(name, "access_key") || !strcmp(name, "secret_key")) {
		if (from_url)
			return jo_err_set(err, JO_EINVAL,
					  "%s: credentials do not belong in a URL; use a profile, flags or "
					  "JFSOPS_<SRC,DST,WORK>_ACCESS_KEY and _SECRET_KEY", where);
		char **d = name[0] == 'a' ? &k->access_key : &k->secret_key;
		return set_str(d, val) ? jo_err_set(err, JO_ENOMEM, "out of memory") : 0;
	}
	if (!strcmp(name, "path_style"))
		flag = &k->path_style;
	else if (!strcmp(name, "list_v1"))
		flag = &k->list_v1;
	else if (!strcmp(name, "unordered"))
		flag = &k->unordered;
	else if (!strcmp(name, "insecure"))
		flag = &k->insecure;
	if (!flag)
		return jo_err_set(err, JO_EINVAL, "%s: unknown setting \"%s\"", where, name);
	int b = parse_bool(val);
	if (b < 0)
		return jo_err_set(err, JO_EINVAL, "%s: \"%s\" wants 0 or 1, not \"%s\"", where, name, val);
	*flag = b;
	return 0;
}

/*
 * The settings of [profile NAME] of the one jfsops config file
 * (common/config.h): --config FILE, else env JFSOPS_CONFIG, else
 * $XDG_CONFIG_HOME/jfsops/config or ~/.config/jfsops/config. A missing file
 * or profile and a file holding a secret that group or others can read are
 * JO_EINVAL (exit 2, as for every command).
 */
static int load_profile(struct kvset *k, char **session_token, const char *config_path,
			const char *name, const char *which, struct jo_err *err)
{
	char path[4096];
	bool named = false;
	struct jo_cfg *cfg = NULL;
	int rc = jo_cfg_path(config_path, path, sizeof(path), &named, err);

	if (rc)
		return rc;
	rc = jo_cfg_load(&cfg, path, true, err);
	if (rc == JO_ENOTFOUND)
		return jo_err_set(err, JO_EINVAL, "%s profile \"%s\": no config file %s", which, name,
				  path);
	if (rc)
		return rc;
	if (!jo_cfg_has_profile(cfg, name)) {
		rc = jo_err_set(err, JO_EINVAL, "config file %s has no profile \"%s\"", path, name);
		goto out;
	}
	for (int key = 0; key < JO_CFG_NKEYS && !rc; key++) {
		const char *v = jo_cfg_get(cfg, name, key);
		char where[4200];

		if (!v || !*v || key == JO_CFG_BUCKET)  /* bucket: volume commands only */
			continue;
		if (key == JO_CFG_SESSION_TOKEN) {
			if (set_str(session_token, v))
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			continue;
		}
		snprintf(where, sizeof(where), "config file %s, profile \"%s\"", path, name);
		rc = kv_apply(k, jo_cfg_key_name(key), v, false, where, err);
	}
out:
	jo_cfg_free(cfg);
	return rc;
}

static const char *env2(const char *which, const char *what)
{
	char name[64];
	snprintf(name, sizeof(name), "JFSOPS_%s_%s", which, what);
	for (char *p = name; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static int fill_default(char **dst, const char *v)
{
	if (*dst || !v)
		return 0;
	return set_str(dst, v);
}

void jo_objurl_free(struct jo_objurl *s)
{
	if (!s)
		return;
	jo_free_strs(&s->url, &s->profile, &s->endpoint, &s->bucket, &s->prefix, &s->region,
		     &s->access_key, &s->secret_key, &s->session_token);
	memset(s, 0, sizeof(*s));
}

static int parse_local(struct jo_objurl *s, const char *url, struct jo_err *err)
{
	const char *p = url;
	if (!strncmp(p, "file://", 7))
		p += 7;
	if (!*p)
		return jo_err_set(err, JO_EINVAL, "empty directory path");
	size_t n = strlen(p);
	s->bucket = malloc(n + 2);
	s->prefix = strdup("");
	if (!s->bucket || !s->prefix)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memcpy(s->bucket, p, n + 1);
	if (s->bucket[n - 1] != '/')
		memcpy(s->bucket + n, "/", 2);
	s->local = true;
	snprintf(s->desc, sizeof(s->desc), "dir:%s", s->bucket);
	return 0;
}

/* s3://[PROFILE@]BUCKET[/PREFIX][?QUERY], in rest (written into): profile, bucket, prefix;
 * *query the query's text or NULL. */
static int side_parse_location(struct jo_objurl *s, const char *url, const char *which,
			       char *rest, char **query, struct jo_err *err)
{
	*query = strchr(rest, '?');
	if (*query)
		*(*query)++ = 0;
	char *path = strchr(rest, '/');
	if (path)
		*path++ = 0;
	char *host = rest;
	char *at = strchr(host, '@');
	if (at) {
		*at = 0;
		if (strchr(host, ':'))
			return jo_err_set(err, JO_EINVAL, "%s URL: credentials do not belong in a URL; "
					  "use a profile name (s3://NAME@bucket/...)", which);
		s->profile = strdup(host);
		host = at + 1;
		if (!s->profile)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!*host)
		return jo_err_set(err, JO_EINVAL, "%s URL \"%s\": no bucket", which, url);
	s->bucket = strdup(host);
	/* Prefix: no leading '/', a trailing '/' when not empty. */
	const char *pp = path ? path : "";
	while (*pp == '/')
		pp++;
	size_t pl = strlen(pp);
	s->prefix = malloc(pl + 2);
	if (!s->bucket || !s->prefix)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memcpy(s->prefix, pp, pl + 1);
	if (pl && pp[pl - 1] != '/')
		memcpy(s->prefix + pl, "/", 2);
	return 0;
}

/* The URL query, name=value pairs joined by '&' (query written into). */
static int side_parse_query(struct kvset *q, char *query, const char *which, struct jo_err *err)
{
	for (char *tok = query ? strtok(query, "&") : NULL; tok; tok = strtok(NULL, "&")) {
		char *eq = strchr(tok, '=');
		if (!eq)
			return jo_err_set(err, JO_EINVAL, "%s URL: \"%s\" is not name=value", which, tok);
		*eq = 0;
		char where[64];
		snprintf(where, sizeof(where), "%s URL", which);
		int rc = kv_apply(q, tok, eq + 1, true, where, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* Credentials as a group (key, secret, session token) from one source, when no source
 * before gave any: 0, or nonzero without memory. */
static int side_cred_group(struct jo_objurl *s, const char *key, const char *secret,
			   const char *token)
{
	int rc;

	if (s->access_key || s->secret_key)
		return 0;
	rc = fill_default(&s->access_key, key);
	if (!rc) rc = fill_default(&s->secret_key, secret);
	if (!rc && s->access_key) rc = fill_default(&s->session_token, token);
	return rc;
}

/* Endpoint, region and credentials, each from the first that has it: flags > query >
 * profile (pr, pr_token) > environment. 0, or nonzero without memory. */
static int side_merge(struct jo_objurl *s, const struct jo_objurl_flags *fl,
		      const struct kvset *q, const struct kvset *pr, const char *pr_token,
		      const char *which)
{
	const char *fe = fl ? fl->endpoint : NULL, *fr = fl ? fl->region : NULL;
	int rc = fill_default(&s->endpoint, fe);
	if (!rc) rc = fill_default(&s->endpoint, q->endpoint);
	if (!rc) rc = fill_default(&s->endpoint, pr->endpoint);
	if (!rc) rc = fill_default(&s->endpoint, env2(which, "endpoint"));
	if (!rc) rc = fill_default(&s->region, fr);
	if (!rc) rc = fill_default(&s->region, q->region);
	if (!rc) rc = fill_default(&s->region, pr->region);
	if (!rc) rc = fill_default(&s->region, env2(which, "region"));
	if (!rc) rc = fill_default(&s->region, getenv("AWS_REGION"));
	if (!rc) rc = fill_default(&s->access_key, fl ? fl->access_key : NULL);
	if (!rc) rc = fill_default(&s->secret_key, fl ? fl->secret_key : NULL);
	if (!rc) rc = side_cred_group(s, pr->access_key, pr->secret_key, pr_token);
	if (!rc) rc = side_cred_group(s, env2(which, "access_key"), env2(which, "secret_key"),
				      env2(which, "session_token"));
	if (!rc) {
		const char *t = getenv("AWS_SESSION_TOKEN");

		rc = side_cred_group(s, getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"),
				     t && *t ? t : NULL);
	}
	return rc;
}

/* The switches, the endpoint (AWS's for the region by default, checked) and the side's
 * description. */
static int side_finish(struct jo_objurl *s, const struct jo_objurl_flags *fl,
		       const struct kvset *q, const struct kvset *pr, const char *which,
		       struct jo_err *err)
{
	if (!s->access_key != !s->secret_key)
		return jo_err_set(err, JO_EINVAL, "%s: an access key without a secret key (or the "
				  "reverse)", which);
#define PICK(field) \
	(fl && fl->field >= 0 ? fl->field : q->field >= 0 ? q->field : pr->field >= 0 ? pr->field : 0)
	s->path_style = PICK(path_style);
	s->list_v1 = PICK(list_v1);
	s->unordered = PICK(unordered);
#undef PICK
	s->insecure = q->insecure > 0 || pr->insecure > 0;
	if (!s->endpoint) {
		char ep[256];
		snprintf(ep, sizeof(ep), "https://s3.%s.amazonaws.com",
			 s->region ? s->region : "us-east-1");
		if (set_str(&s->endpoint, ep))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8))
		return jo_err_set(err, JO_EINVAL, "%s endpoint \"%s\": wants http:// or https://",
				  which, s->endpoint);
	/* Drop a trailing '/' from the endpoint. */
	size_t el = strlen(s->endpoint);
	while (el > 8 && s->endpoint[el - 1] == '/')
		s->endpoint[--el] = 0;
	snprintf(s->desc, sizeof(s->desc), "s3:%s/%s/%s", s->endpoint, s->bucket, s->prefix);
	return 0;
}

int jo_objurl_parse(struct jo_objurl *s, const char *url, const char *which,
		       const struct jo_objurl_flags *fl, const char *config_path,
		       struct jo_err *err)
{
	memset(s, 0, sizeof(*s));
	s->url = strdup(url);
	if (!s->url)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (strncmp(url, "s3://", 5) != 0) {
		if (strstr(url, "://") && strncmp(url, "file://", 7) != 0)
			return jo_err_set(err, JO_EINVAL, "%s \"%s\": only s3:// URLs and local directories "
					  "are supported", which, url);
		return parse_local(s, url, err);
	}
	struct kvset q = { .path_style = -1, .list_v1 = -1, .unordered = -1, .insecure = -1 };
	struct kvset pr = q;
	char *pr_token = NULL, *query;
	int rc = 0;
	char *rest = strdup(url + 5);
	if (!rest)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = side_parse_location(s, url, which, rest, &query, err);
	if (!rc)
		rc = side_parse_query(&q, query, which, err);
	/* Profile. */
	if (!rc && s->profile)
		rc = load_profile(&pr, &pr_token, config_path, s->profile, which, err);
	if (!rc && side_merge(s, fl, &q, &pr, pr_token, which))
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = side_finish(s, fl, &q, &pr, which, err);
	free(rest);
	kv_free(&q);
	kv_free(&pr);
	if (pr_token) {
		memset(pr_token, 0, strlen(pr_token));
		free(pr_token);
	}
	return rc;
}

int jo_objurl_open(const struct jo_objurl *s, int max_conns, int retries,
		      struct jo_obj **out, struct jo_err *err)
{
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	char bucket[4096];
	if (s->local) {
		oo.storage = "file";
		oo.bucket = s->bucket;
		oo.list_links = true;  /* each skipped symlink is reported */
	} else {
		oo.storage = "s3";
		snprintf(bucket, sizeof(bucket), "%s/%s", s->endpoint, s->bucket);
		oo.bucket = bucket;
		oo.access_key = s->access_key;
		oo.secret_key = s->secret_key;
		oo.session_token = s->session_token;
		oo.region = s->region;
		oo.addressing = s->path_style ? 1 : 0;
		oo.list_v1 = s->list_v1;
		oo.insecure = s->insecure;
	}
	if (max_conns > 0)
		oo.max_conns = max_conns;
	if (retries >= 0)
		oo.retries = retries;
	return jo_obj_open(out, &oo, err);
}

/* "HTTP://Host:80/x" -> "http://host/x": scheme and host lower-cased, a default port dropped. */
void jo_objurl_norm_endpoint(const char *ep, char *out, size_t n)
{
	const char *sep = strstr(ep, "://");
	const char *auth = sep ? sep + 3 : ep;
	size_t alen = strcspn(auth, "/"), k, end = (size_t)(auth - ep) + alen;
	const char *def = !strncasecmp(ep, "https://", 8) ? ":443"
			  : !strncasecmp(ep, "http://", 7) ? ":80" : NULL;

	snprintf(out, n, "%s", ep);
	for (k = 0; k < end && out[k]; k++)
		if (out[k] >= 'A' && out[k] <= 'Z')
			out[k] = (char)(out[k] + 32);
	if (def && end < n && end > strlen(def) && !strncmp(out + end - strlen(def), def, strlen(def)))
		memmove(out + end - strlen(def), out + end, strlen(out + end) + 1);
}
