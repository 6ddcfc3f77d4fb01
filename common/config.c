/* config.c: the INI config file with named profiles (see config.h). */
#include "common/config.h"
#include "common/config_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/err.h"

static const char *const key_names[JO_CFG_NKEYS] = {
	[JO_CFG_ENDPOINT] = "endpoint",
	[JO_CFG_BUCKET] = "bucket",
	[JO_CFG_REGION] = "region",
	[JO_CFG_ACCESS_KEY] = "access_key",
	[JO_CFG_SECRET_KEY] = "secret_key",
	[JO_CFG_SESSION_TOKEN] = "session_token",
	[JO_CFG_PATH_STYLE] = "path_style",
	[JO_CFG_LIST_V1] = "list_v1",
	[JO_CFG_INSECURE] = "insecure",
	[JO_CFG_UNORDERED] = "unordered",
};

struct cfg_entry {
	int profile;  /* index into names */
	int key;
	char *value;
};

struct jo_cfg {
	char *path;
	bool found;
	char **names;  /* profile names */
	size_t nnames;
	struct cfg_entry *ents;
	size_t nents;
};

const char *jo_cfg_key_name(int key)
{
	return key >= 0 && key < JO_CFG_NKEYS ? key_names[key] : NULL;
}

int jo_cfg_key_lookup(const char *name)
{
	for (int k = 0; k < JO_CFG_NKEYS; k++)
		if (!strcmp(key_names[k], name))
			return k;
	return -1;
}

bool jo_cfg_key_secret(int key)
{
	return key == JO_CFG_SECRET_KEY || key == JO_CFG_SESSION_TOKEN;
}

bool jo_cfg_key_bool(int key)
{
	return key == JO_CFG_PATH_STYLE || key == JO_CFG_LIST_V1 || key == JO_CFG_INSECURE ||
	       key == JO_CFG_UNORDERED;
}

const char *jo_cfg_src_name(enum jo_cfg_src src)
{
	switch (src) {
	case JO_CFG_FLAG: return "flag";
	case JO_CFG_ENV: return "env";
	case JO_CFG_FILE: return "file";
	case JO_CFG_DEFAULT: return "default";
	case JO_CFG_UNSET: break;
	}
	return "unset";
}

int jo_cfg_parse_bool(const char *v)
{
	if (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
		return 1;
	if (!*v || !strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
	    !strcasecmp(v, "off"))
		return 0;
	return -1;
}

int jo_cfg_path(const char *flag_path, char *buf, size_t cap, bool *named, struct jo_err *err)
{
	const char *env = getenv("JFSOPS_CONFIG");
	const char *xdg = getenv("XDG_CONFIG_HOME");
	const char *home = getenv("HOME");
	int n;

	*named = false;
	if (flag_path && *flag_path) {
		*named = true;
		n = snprintf(buf, cap, "%s", flag_path);
	} else if (env && *env) {
		*named = true;
		n = snprintf(buf, cap, "%s", env);
	} else if (xdg && *xdg == '/') {
		n = snprintf(buf, cap, "%s/jfsops/config", xdg);
	} else if (home && *home) {
		n = snprintf(buf, cap, "%s/.config/jfsops/config", home);
	} else {
		return jo_err_set(err, JO_EINVAL,
				  "no config file path: set HOME, XDG_CONFIG_HOME or JFSOPS_CONFIG, or pass --config");
	}
	if (n < 0 || (size_t)n >= cap)
		return jo_err_set(err, JO_EINVAL, "config file path too long");
	return 0;
}

static char *trim(char *s)
{
	size_t n;

	while (isspace((unsigned char)*s))
		s++;
	n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	return s;
}

void jo_cfg_free(struct jo_cfg *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nents; i++) {
		if (c->ents[i].value) {
			memset(c->ents[i].value, 0, strlen(c->ents[i].value));
			free(c->ents[i].value);
		}
	}
	for (size_t i = 0; i < c->nnames; i++)
		free(c->names[i]);
	free(c->ents);
	free(c->names);
	free(c->path);
	free(c);
}

static int find_name(const struct jo_cfg *c, const char *name)
{
	for (size_t i = 0; i < c->nnames; i++)
		if (!strcmp(c->names[i], name))
			return (int)i;
	return -1;
}

static int add_name(struct jo_cfg *c, const char *name)
{
	int i = find_name(c, name);
	char **nn;

	if (i >= 0)
		return i;
	nn = realloc(c->names, (c->nnames + 1) * sizeof(*nn));
	if (!nn)
		return JO_ENOMEM;
	c->names = nn;
	nn[c->nnames] = strdup(name);
	if (!nn[c->nnames])
		return JO_ENOMEM;
	return (int)c->nnames++;
}

static int add_entry(struct jo_cfg *c, int profile, int key, const char *value)
{
	struct cfg_entry *ne;

	/* a later line for the same key replaces the earlier one */
	for (size_t i = 0; i < c->nents; i++) {
		if (c->ents[i].profile == profile && c->ents[i].key == key) {
			char *v = strdup(value);

			if (!v)
				return JO_ENOMEM;
			memset(c->ents[i].value, 0, strlen(c->ents[i].value));
			free(c->ents[i].value);
			c->ents[i].value = v;
			return 0;
		}
	}
	ne = realloc(c->ents, (c->nents + 1) * sizeof(*ne));
	if (!ne)
		return JO_ENOMEM;
	c->ents = ne;
	ne[c->nents].profile = profile;
	ne[c->nents].key = key;
	ne[c->nents].value = strdup(value);
	if (!ne[c->nents].value)
		return JO_ENOMEM;
	c->nents++;
	return 0;
}

static int parse_file(struct jo_cfg *c, FILE *fp, bool *has_secret, struct jo_err *err)
{
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, cur = -1, rc = 0;
	ssize_t n;

	while ((n = getline(&line, &cap, fp)) >= 0) {
		char *s, *eq, *name, *val;
		int key;
		size_t vl;

		lineno++;
		/* a NUL would silently cut the line (and a value) short */
		if (memchr(line, '\0', (size_t)n)) {
			rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: NUL byte", c->path,
					lineno);
			break;
		}
		s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			char *sec;

			if (!e || *trim(e + 1)) {
				rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: malformed section header",
						c->path, lineno);
				break;
			}
			*e = 0;
			sec = trim(s + 1);
			if (!strncmp(sec, "profile", 7) && isspace((unsigned char)sec[7]))
				sec = trim(sec + 8);
			if (!*sec || strpbrk(sec, " \t@/")) {
				rc = jo_err_set(err, JO_EINVAL,
						"config file %s line %d: bad profile name (no spaces, '@' or '/')",
						c->path, lineno);
				break;
			}
			cur = add_name(c, sec);
			if (cur < 0) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: expected 'name = value'",
					c->path, lineno);
			break;
		}
		*eq = 0;
		name = trim(s);
		val = trim(eq + 1);
		vl = strlen(val);
		if (vl >= 2 && ((val[0] == '"' && val[vl - 1] == '"') || (val[0] == '\'' && val[vl - 1] == '\''))) {
			val[vl - 1] = 0;
			val++;
		}
		key = jo_cfg_key_lookup(name);
		if (key < 0) {
			rc = jo_err_set(err, JO_EINVAL,
					"config file %s line %d: unknown setting '%.64s' (endpoint, bucket, region, "
					"access_key, secret_key, session_token, path_style, list_v1, insecure, unordered)",
					c->path, lineno, name);
			break;
		}
		if (cur < 0) {
			rc = jo_err_set(err, JO_EINVAL,
					"config file %s line %d: '%s' is outside a [profile NAME] section",
					c->path, lineno, name);
			break;
		}
		if (jo_cfg_key_bool(key) && jo_cfg_parse_bool(val) < 0) {
			rc = jo_err_set(err, JO_EINVAL, "config file %s line %d: %s wants 0 or 1",
					c->path, lineno, name);
			break;
		}
		if (jo_cfg_key_secret(key) && *val)
			*has_secret = true;
		if (add_entry(c, cur, key, val)) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
	}
	if (line) {
		memset(line, 0, cap);
		free(line);
	}
	return rc;
}

int jo_cfg_load(struct jo_cfg **out, const char *path, bool must_exist, struct jo_err *err)
{
	struct jo_cfg *c = calloc(1, sizeof(*c));
	struct stat sb;
	bool has_secret = false;
	FILE *fp;
	int rc;

	*out = NULL;
	if (!c || !(c->path = strdup(path))) {
		free(c);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	fp = fopen(path, "r");
	if (!fp) {
		if (errno == ENOENT && !must_exist) {
			*out = c;
			return 0;
		}
		rc = jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EINVAL, "config file %s: %s",
				path, strerror(errno));
		jo_cfg_free(c);
		return rc;
	}
	c->found = true;
	if (fstat(fileno(fp), &sb) != 0 || !S_ISREG(sb.st_mode)) {
		fclose(fp);
		jo_cfg_free(c);
		return jo_err_set(err, JO_EINVAL, "config file %s is not a regular file", path);
	}
	rc = parse_file(c, fp, &has_secret, err);
	fclose(fp);
	if (!rc && has_secret && (sb.st_mode & 077))
		rc = jo_err_set(err, JO_EINVAL,
				"config file %s holds a secret and is readable by group or others (mode %04o): "
				"refusing it; run chmod 600 %s",
				path, (unsigned)(sb.st_mode & 07777), path);
	if (rc) {
		jo_cfg_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int jo_cfg_parse_mem(struct jo_cfg **out, const char *name, const char *text, size_t len,
		     bool *has_secret, struct jo_err *err)
{
	struct jo_cfg *c = calloc(1, sizeof(*c));
	FILE *fp;
	int rc = 0;

	*out = NULL;
	*has_secret = false;
	if (!c || !(c->path = strdup(name))) {
		free(c);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	c->found = true;
	if (len) {
		fp = fmemopen((void *)text, len, "r");
		if (!fp) {
			jo_cfg_free(c);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		rc = parse_file(c, fp, has_secret, err);
		fclose(fp);
	}
	if (rc) {
		jo_cfg_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

const char *jo_cfg_file(const struct jo_cfg *c)
{
	return c ? c->path : NULL;
}

bool jo_cfg_found(const struct jo_cfg *c)
{
	return c && c->found;
}

bool jo_cfg_has_profile(const struct jo_cfg *c, const char *name)
{
	return c && name && find_name(c, name) >= 0;
}

size_t jo_cfg_profiles(const struct jo_cfg *c, const char *const **names)
{
	*names = c ? (const char *const *)c->names : NULL;
	return c ? c->nnames : 0;
}

const char *jo_cfg_get(const struct jo_cfg *c, const char *profile, int key)
{
	int p;

	if (!c || !profile)
		return NULL;
	p = find_name(c, profile);
	if (p < 0)
		return NULL;
	for (size_t i = 0; i < c->nents; i++)
		if (c->ents[i].profile == p && c->ents[i].key == key)
			return c->ents[i].value;
	return NULL;
}

int jo_cfg_pick_profile(const struct jo_cfg *c, const char *name, const char **out,
			struct jo_err *err)
{
	const char *env = getenv("JFSOPS_PROFILE");

	*out = NULL;
	if (!name || !*name)
		name = env && *env ? env : NULL;
	if (name) {
		if (!jo_cfg_has_profile(c, name)) {
			if (!jo_cfg_found(c))
				return jo_err_set(err, JO_EINVAL, "profile '%s': no config file %s", name,
						  c ? c->path : "(none)");
			return jo_err_set(err, JO_EINVAL, "config file %s has no profile '%s'", c->path,
					  name);
		}
		*out = name;
		return 0;
	}
	if (jo_cfg_has_profile(c, "default"))
		*out = "default";
	return 0;
}

int jo_cfg_values_set(struct jo_cfg_values *vals, int key, const char *value, enum jo_cfg_src src)
{
	char *v;

	if (key < 0 || key >= JO_CFG_NKEYS)
		return JO_EINVAL;
	v = strdup(value);
	if (!v)
		return JO_ENOMEM;
	if (vals->v[key]) {
		memset(vals->v[key], 0, strlen(vals->v[key]));
		free(vals->v[key]);
	}
	vals->v[key] = v;
	vals->src[key] = src;
	return 0;
}

void jo_cfg_values_release(struct jo_cfg_values *vals)
{
	for (int k = 0; k < JO_CFG_NKEYS; k++) {
		if (vals->v[k]) {
			memset(vals->v[k], 0, strlen(vals->v[k]));
			free(vals->v[k]);
		}
		vals->v[k] = NULL;
		vals->src[k] = JO_CFG_UNSET;
	}
}

static const char *env_value(const char *prefix, int key, char *name, size_t cap)
{
	const char *v;

	if (!prefix)
		return NULL;
	snprintf(name, cap, "%s_%s", prefix, key_names[key]);
	for (char *p = name; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	v = getenv(name);
	return v && *v ? v : NULL;
}

static bool is_cred(int key)
{
	return key == JO_CFG_ACCESS_KEY || key == JO_CFG_SECRET_KEY || key == JO_CFG_SESSION_TOKEN;
}

int jo_cfg_resolve(const struct jo_cfg *c, const char *profile, const struct jo_cfg_values *flags,
		   const char *env_prefix, struct jo_cfg_values *out, struct jo_err *err)
{
	bool cmdline_creds = false;
	char name[96];
	int k;

	memset(out, 0, sizeof(*out));
	for (k = 0; k < JO_CFG_NKEYS; k++) {
		if (k != JO_CFG_ACCESS_KEY && k != JO_CFG_SECRET_KEY)
			continue;
		if ((flags && flags->v[k]) || env_value(env_prefix, k, name, sizeof(name)))
			cmdline_creds = true;
	}
	for (k = 0; k < JO_CFG_NKEYS; k++) {
		const char *v;
		enum jo_cfg_src src;

		if (flags && flags->v[k]) {
			v = flags->v[k];
			src = JO_CFG_FLAG;
		} else if ((v = env_value(env_prefix, k, name, sizeof(name))) != NULL) {
			src = JO_CFG_ENV;
		} else if ((v = jo_cfg_get(c, profile, k)) != NULL && *v &&
			   !(is_cred(k) && cmdline_creds)) {
			src = JO_CFG_FILE;
		} else if (jo_cfg_key_bool(k)) {
			v = "0";
			src = JO_CFG_DEFAULT;
		} else {
			continue;
		}
		if (jo_cfg_key_bool(k) && jo_cfg_parse_bool(v) < 0) {
			jo_cfg_values_release(out);
			return jo_err_set(err, JO_EINVAL, "%s '%s' wants 0 or 1 (from %s)", key_names[k],
					  v, jo_cfg_src_name(src));
		}
		if (jo_cfg_values_set(out, k, jo_cfg_key_bool(k) ? (jo_cfg_parse_bool(v) ? "1" : "0") : v,
				      src)) {
			jo_cfg_values_release(out);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
	}
	return 0;
}

void jo_cfg_mask(const char *secret, char *buf, size_t cap)
{
	if (!cap)
		return;
	/*
	 * Not even a prefix: four characters of a 40-character secret are no
	 * risk by themselves, but logs and tickets collect them, and they say
	 * nothing an operator needs (the source column says where it came from).
	 */
	(void)secret;
	snprintf(buf, cap, "****");
}
