/*
 * config.h: the one jfsops configuration file and its named profiles.
 *
 * An INI-style file (default $XDG_CONFIG_HOME/jfsops/config, else
 * ~/.config/jfsops/config; --config FILE or env JFSOPS_CONFIG name another):
 *
 *   # comments start with # or ;
 *   [profile oss-sh]            ("[oss-sh]" is the same; [default] is used
 *   endpoint = https://oss-cn-shanghai.aliyuncs.com     when no profile is named)
 *   region = cn-shanghai
 *   access_key = LTAI...
 *   secret_key = ...
 *   session_token =
 *   bucket = https://mybucket.oss-cn-shanghai.aliyuncs.com   (volume commands)
 *   path_style = 1
 *   list_v1 = 0
 *   insecure = 0
 *   unordered = 0               (sync: the store lists out of byte order)
 *
 * Precedence of every value, highest first: flags > environment > file >
 * defaults. Credentials go as a group: when a flag or the environment gives
 * an access or secret key, the file's access_key/secret_key/session_token
 * are not used (a key never pairs with another source's secret).
 *
 * A file that holds a secret (secret_key or session_token) and is readable
 * by group or others is refused with JO_EINVAL (exit 2) and a chmod hint.
 */
#ifndef JO_CONFIG_H
#define JO_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

struct jo_err;
struct jo_cfg;

enum jo_cfg_key {
	JO_CFG_ENDPOINT,
	JO_CFG_BUCKET,
	JO_CFG_REGION,
	JO_CFG_ACCESS_KEY,
	JO_CFG_SECRET_KEY,
	JO_CFG_SESSION_TOKEN,
	JO_CFG_PATH_STYLE,
	JO_CFG_LIST_V1,
	JO_CFG_INSECURE,
	JO_CFG_UNORDERED,  /* sync: the store does not list in byte order */
	JO_CFG_NKEYS
};

/* Where an effective value came from. */
enum jo_cfg_src { JO_CFG_UNSET = 0, JO_CFG_DEFAULT, JO_CFG_FILE, JO_CFG_ENV, JO_CFG_FLAG };

/* A value set: NULL = not set. Strings are owned (strdup'd). */
struct jo_cfg_values {
	char *v[JO_CFG_NKEYS];
	enum jo_cfg_src src[JO_CFG_NKEYS];
};

/* "endpoint", "secret_key", ...; NULL for a bad key. */
const char *jo_cfg_key_name(int key);
/* The key for a name, or -1. */
int jo_cfg_key_lookup(const char *name);
/* True for secret_key and session_token (never printed in full). */
bool jo_cfg_key_secret(int key);
/* True for the 0/1 keys (path_style, list_v1, insecure, unordered). */
bool jo_cfg_key_bool(int key);
/* "flag", "env", "file", "default", "unset". */
const char *jo_cfg_src_name(enum jo_cfg_src src);

/* 1 for 1/true/yes/on, 0 for 0/false/no/off/"", -1 otherwise. */
int jo_cfg_parse_bool(const char *v);

/*
 * The config file path: flag_path when given, else env JFSOPS_CONFIG, else
 * $XDG_CONFIG_HOME/jfsops/config, else $HOME/.config/jfsops/config.
 * *named is set when the path came from the flag or the environment (then a
 * missing file is an error). JO_EINVAL when no path can be formed.
 */
int jo_cfg_path(const char *flag_path, char *buf, size_t cap, bool *named, struct jo_err *err);

/*
 * Read and check a config file. A missing file gives an empty config unless
 * must_exist (JO_ENOTFOUND). Malformed lines, unknown keys, and a secret in a
 * file readable by group/others are JO_EINVAL, with the path and line.
 */
int jo_cfg_load(struct jo_cfg **out, const char *path, bool must_exist, struct jo_err *err);
void jo_cfg_free(struct jo_cfg *c);
/* The path the config was read from, and whether the file existed. */
const char *jo_cfg_file(const struct jo_cfg *c);
bool jo_cfg_found(const struct jo_cfg *c);
bool jo_cfg_has_profile(const struct jo_cfg *c, const char *name);
/* Profile names in file order; borrowed; returns the count. */
size_t jo_cfg_profiles(const struct jo_cfg *c, const char *const **names);
/* A value of a profile as written in the file, or NULL. Borrowed. */
const char *jo_cfg_get(const struct jo_cfg *c, const char *profile, int key);

/*
 * The profile to use: name when given, else env JFSOPS_PROFILE, else
 * "default" when the file has it, else NULL (no profile). A named profile
 * the file lacks is JO_EINVAL.
 */
int jo_cfg_pick_profile(const struct jo_cfg *c, const char *name, const char **out,
			struct jo_err *err);

/*
 * Effective values: flags (may be NULL; only set entries count) >
 * environment <env_prefix>_<KEY upper-cased> (env_prefix "JFSOPS" reads
 * JFSOPS_ENDPOINT, JFSOPS_SECRET_KEY, ...; NULL: none) > the profile of c
 * (c and profile may be NULL) > built-in defaults (region us-east-1 is NOT
 * defaulted here; booleans default to "0"). out must be released.
 */
int jo_cfg_resolve(const struct jo_cfg *c, const char *profile, const struct jo_cfg_values *flags,
		   const char *env_prefix, struct jo_cfg_values *out, struct jo_err *err);
/* Set one value (copied); src records its origin. JO_ENOMEM. */
int jo_cfg_values_set(struct jo_cfg_values *vals, int key, const char *value, enum jo_cfg_src src);
/* Free the strings (secrets are wiped first) and reset. */
void jo_cfg_values_release(struct jo_cfg_values *vals);

/* A printable form of a secret: "****", whatever the secret (NULL too); nothing of it shows. */
void jo_cfg_mask(const char *secret, char *buf, size_t cap);

#endif
