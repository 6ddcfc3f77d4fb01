/*
 * side.c: one side of a sync, from its URL, flags, a profile and the
 * environment.
 *
 *   s3://[PROFILE@]BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=1&list_v1=1&unordered=1&insecure=1]
 *   DIR  or  file:///DIR      a local directory
 *
 * The prefix is a "directory": "s3://b/data" syncs keys under "data/". The
 * URL never carries a secret (access_key/secret_key in the query are
 * refused); credentials come from flags, the profile, JFSOPS_<SIDE>_ACCESS_KEY
 * / JFSOPS_<SIDE>_SECRET_KEY, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
 */
#include "sync/sync.h"

#include "common/err.h"
#include "common/object/object.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

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
					  "JFSOPS_SRC_/JFSOPS_DST_ environment variables", where);
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

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

/* Read [profile NAME] (or [NAME]) from the INI file. */
static int load_profile(struct kvset *k, const char *path, bool explicit_path, const char *name,
			struct jo_err *err)
{
	FILE *fp = fopen(path, "r");
	if (!fp) {
		if (!explicit_path && errno == ENOENT)
			return jo_err_set(err, JO_EINVAL, "profile \"%s\": no config file %s", name, path);
		return jo_err_set(err, JO_EINVAL, "config file %s: %s", path, strerror(errno));
	}
	struct stat sb;
	bool loose = fstat(fileno(fp), &sb) == 0 && (sb.st_mode & 077);
	char *line = NULL;
	size_t cap = 0;
	bool in = false, found = false, has_secret = false;
	int rc = 0, lineno = 0;
	while (getline(&line, &cap, fp) >= 0) {
		lineno++;
		char *s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			if (!e) {
				rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: bad section", path,
						lineno);
				break;
			}
			*e = 0;
			char *sec = trim(s + 1);
			if (!strncmp(sec, "profile ", 8))
				sec = trim(sec + 8);
			in = !strcmp(sec, name);
			found |= in;
			continue;
		}
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: expected name = value",
					path, lineno);
			break;
		}
		*eq = 0;
		char *n = trim(s), *v = trim(eq + 1);
		if (!strcmp(n, "secret_key") && *v)
			has_secret = true;
		if (!in)
			continue;
		char where[300];
		snprintf(where, sizeof(where), "config file %.200s line %d", path, lineno);
		rc = kv_apply(k, n, v, false, where, err);
		if (rc)
			break;
	}
	free(line);
	fclose(fp);
	if (rc)
		return rc;
	if (has_secret && loose)
		return jo_err_set(err, JO_EAUTH,
				  "config file %s holds a secret key and is readable by group or others; "
				  "run chmod 600 %s", path, path);
	if (!found)
		return jo_err_set(err, JO_EINVAL, "config file %s has no profile \"%s\"", path, name);
	return 0;
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

void jo_sync_side_free(struct jo_sync_side *s)
{
	if (!s)
		return;
	free(s->url);
	free(s->profile);
	free(s->endpoint);
	free(s->bucket);
	free(s->prefix);
	free(s->region);
	free(s->access_key);
	free(s->secret_key);
	memset(s, 0, sizeof(*s));
}

static int parse_local(struct jo_sync_side *s, const char *url, struct jo_err *err)
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

int jo_sync_side_parse(struct jo_sync_side *s, const char *url, const char *which,
		       const struct jo_sync_side_flags *fl, const char *config_path,
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
	int rc = 0;
	char *rest = strdup(url + 5);
	if (!rest)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	char *query = strchr(rest, '?');
	if (query)
		*query++ = 0;
	char *path = strchr(rest, '/');
	if (path)
		*path++ = 0;
	char *host = rest;
	char *at = strchr(host, '@');
	if (at) {
		*at = 0;
		if (strchr(host, ':')) {
			rc = jo_err_set(err, JO_EINVAL, "%s URL: credentials do not belong in a URL; use a "
					"profile name (s3://NAME@bucket/...)", which);
			goto out;
		}
		s->profile = strdup(host);
		host = at + 1;
		if (!s->profile) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (!*host) {
		rc = jo_err_set(err, JO_EINVAL, "%s URL \"%s\": no bucket", which, url);
		goto out;
	}
	s->bucket = strdup(host);
	/* Prefix: no leading '/', a trailing '/' when not empty. */
	const char *pp = path ? path : "";
	while (*pp == '/')
		pp++;
	size_t pl = strlen(pp);
	s->prefix = malloc(pl + 2);
	if (!s->bucket || !s->prefix) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	memcpy(s->prefix, pp, pl + 1);
	if (pl && pp[pl - 1] != '/')
		memcpy(s->prefix + pl, "/", 2);
	/* URL query. */
	for (char *tok = query ? strtok(query, "&") : NULL; tok; tok = strtok(NULL, "&")) {
		char *eq = strchr(tok, '=');
		if (!eq) {
			rc = jo_err_set(err, JO_EINVAL, "%s URL: \"%s\" is not name=value", which, tok);
			goto out;
		}
		*eq = 0;
		char where[64];
		snprintf(where, sizeof(where), "%s URL", which);
		rc = kv_apply(&q, tok, eq + 1, true, where, err);
		if (rc)
			goto out;
	}
	/* Profile. */
	if (s->profile) {
		char def[4096];
		const char *cp = config_path;
		if (!cp) {
			const char *home = getenv("HOME");
			snprintf(def, sizeof(def), "%s/.config/jfsops/config", home ? home : "");
			cp = def;
		}
		rc = load_profile(&pr, cp, config_path != NULL, s->profile, err);
		if (rc)
			goto out;
	}
	/* Merge: flags > query > profile > environment. */
	const char *fe = fl ? fl->endpoint : NULL, *fr = fl ? fl->region : NULL;
	rc = fill_default(&s->endpoint, fe);
	if (!rc) rc = fill_default(&s->endpoint, q.endpoint);
	if (!rc) rc = fill_default(&s->endpoint, pr.endpoint);
	if (!rc) rc = fill_default(&s->endpoint, env2(which, "endpoint"));
	if (!rc) rc = fill_default(&s->region, fr);
	if (!rc) rc = fill_default(&s->region, q.region);
	if (!rc) rc = fill_default(&s->region, pr.region);
	if (!rc) rc = fill_default(&s->region, env2(which, "region"));
	if (!rc) rc = fill_default(&s->region, getenv("AWS_REGION"));
	if (!rc) rc = fill_default(&s->access_key, fl ? fl->access_key : NULL);
	if (!rc) rc = fill_default(&s->secret_key, fl ? fl->secret_key : NULL);
	if (!rc && !s->access_key && !s->secret_key) {
		rc = fill_default(&s->access_key, pr.access_key);
		if (!rc) rc = fill_default(&s->secret_key, pr.secret_key);
	}
	if (!rc && !s->access_key && !s->secret_key) {
		rc = fill_default(&s->access_key, env2(which, "access_key"));
		if (!rc) rc = fill_default(&s->secret_key, env2(which, "secret_key"));
	}
	if (!rc && !s->access_key && !s->secret_key) {
		rc = fill_default(&s->access_key, getenv("AWS_ACCESS_KEY_ID"));
		if (!rc) rc = fill_default(&s->secret_key, getenv("AWS_SECRET_ACCESS_KEY"));
	}
	if (rc) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (!s->access_key != !s->secret_key) {
		rc = jo_err_set(err, JO_EINVAL, "%s: an access key without a secret key (or the reverse)",
				which);
		goto out;
	}
#define PICK(field) \
	(fl && fl->field >= 0 ? fl->field : q.field >= 0 ? q.field : pr.field >= 0 ? pr.field : 0)
	s->path_style = PICK(path_style);
	s->list_v1 = PICK(list_v1);
	s->unordered = PICK(unordered);
#undef PICK
	s->insecure = q.insecure > 0 || pr.insecure > 0;
	if (!s->endpoint) {
		char ep[256];
		snprintf(ep, sizeof(ep), "https://s3.%s.amazonaws.com",
			 s->region ? s->region : "us-east-1");
		if (set_str(&s->endpoint, ep)) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (strncmp(s->endpoint, "http://", 7) && strncmp(s->endpoint, "https://", 8)) {
		rc = jo_err_set(err, JO_EINVAL, "%s endpoint \"%s\": wants http:// or https://", which,
				s->endpoint);
		goto out;
	}
	/* Drop a trailing '/' from the endpoint. */
	size_t el = strlen(s->endpoint);
	while (el > 8 && s->endpoint[el - 1] == '/')
		s->endpoint[--el] = 0;
	snprintf(s->desc, sizeof(s->desc), "s3:%s/%s/%s", s->endpoint, s->bucket, s->prefix);
out:
	free(rest);
	kv_free(&q);
	kv_free(&pr);
	return rc;
}

int jo_sync_side_open(const struct jo_sync_side *s, int max_conns, int retries,
		      struct jo_obj **out, struct jo_err *err)
{
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	char bucket[4096];
	if (s->local) {
		oo.storage = "file";
		oo.bucket = s->bucket;
	} else {
		oo.storage = "s3";
		snprintf(bucket, sizeof(bucket), "%s/%s", s->endpoint, s->bucket);
		oo.bucket = bucket;
		oo.access_key = s->access_key;
		oo.secret_key = s->secret_key;
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
