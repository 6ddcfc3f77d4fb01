/*
 * objurl.h: an object-store location given as a URL, with its endpoint and
 * credentials from flags, the URL's query, a profile of the one jfsops
 * config file (common/config.h) and the environment:
 *
 *   s3://[PROFILE@]BUCKET[/PREFIX][?endpoint=URL&region=R&path_style=1&list_v1=1&unordered=1&insecure=1]
 *   DIR  or  file:///DIR      a local directory
 *
 * Used by every command that takes a store by URL (sync's two sides,
 * leakcheck's --work). The URL never carries a secret.
 */
#ifndef JO_OBJURL_H
#define JO_OBJURL_H

#include <stdbool.h>
#include <stddef.h>

struct jo_err;
struct jo_obj;

/* Settings given by flags for one side; NULL/-1 = not given. */
struct jo_objurl_flags {
	const char *endpoint, *region, *access_key, *secret_key;
	int path_style;   /* -1 unset, 0/1 */
	int list_v1;      /* -1 unset, 0/1 */
	int unordered;    /* -1 unset, 0/1: the store does not list in byte order */
};
#define JO_OBJURL_FLAGS_INIT { .path_style = -1, .list_v1 = -1, .unordered = -1 }

struct jo_objurl {
	bool local;          /* a local directory */
	char *url;           /* as given, for messages (no secrets: URLs never carry them) */
	char *profile;       /* s3://NAME@bucket/...: profile name, or NULL */
	char *endpoint;      /* s3: "http://host:port" */
	char *bucket;        /* s3: bucket name; local: the directory with a trailing '/' */
	char *prefix;        /* key prefix inside the bucket, "" or ending in '/' */
	char *region;
	char *access_key, *secret_key;
	char *session_token; /* with the credentials' source (profile or env), or NULL */
	bool path_style, list_v1, unordered, insecure;
	char desc[600];      /* "s3://endpoint/bucket/prefix" or "dir:/path/", no secrets */
};

/*
 * Parse `url` for `which` ("src", "dst", "work": picks the JFSOPS_SRC_*,
 * JFSOPS_DST_* or JFSOPS_WORK_* environment variables). Precedence, highest first: flags, URL
 * query, profile, environment (JFSOPS_<SIDE>_ACCESS_KEY/_SECRET_KEY/_ENDPOINT/
 * _REGION, then AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_REGION).
 * The profile (s3://NAME@bucket) is read with common/config.h from
 * config_path, else env JFSOPS_CONFIG, else $XDG_CONFIG_HOME/jfsops/config
 * or ~/.config/jfsops/config. A missing file or profile, and a config file
 * holding a secret that is readable by group or others, are JO_EINVAL.
 */
int jo_objurl_parse(struct jo_objurl *s, const char *url, const char *which,
		       const struct jo_objurl_flags *fl, const char *config_path,
		       struct jo_err *err);
void jo_objurl_free(struct jo_objurl *s);
/* Open an object client for the side (max_conns connections). */
int jo_objurl_open(const struct jo_objurl *s, int max_conns, int retries,
		      struct jo_obj **out, struct jo_err *err);

/*
 * "HTTP://Host:80/x" -> "http://host/x": scheme and host lower-cased, a
 * default port dropped, the rest as it is (out gets at most n - 1 bytes).
 */
void jo_objurl_norm_endpoint(const char *ep, char *out, size_t n);

#endif
