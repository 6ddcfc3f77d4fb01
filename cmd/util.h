/* util.h: plumbing shared by the commands in cmd/ and the feature folders. */
#ifndef JO_CMD_UTIL_H
#define JO_CMD_UTIL_H

#include <stdbool.h>
#include <stdint.h>

struct jo_ctx;
struct jo_err;
struct jo_meta;
struct jo_vol;
struct jo_cfg;
struct jo_cfg_values;

/* getopt_long codes of the storage-override flags every volume command takes. */
enum {
	CMD_OPT_BUCKET = 0x1000,
	CMD_OPT_ACCESS_KEY,
	CMD_OPT_SECRET_KEY,
	CMD_OPT_INSECURE,
	CMD_OPT_PROFILE,
	CMD_OPT_CONFIG,
	CMD_OPT_RETRIES,
};
#define CMD_VOL_LONGOPTS \
	{ "bucket", required_argument, NULL, CMD_OPT_BUCKET }, \
	{ "access-key", required_argument, NULL, CMD_OPT_ACCESS_KEY }, \
	{ "secret-key", required_argument, NULL, CMD_OPT_SECRET_KEY }, \
	{ "insecure", no_argument, NULL, CMD_OPT_INSECURE }, \
	{ "profile", required_argument, NULL, CMD_OPT_PROFILE }, \
	{ "config", required_argument, NULL, CMD_OPT_CONFIG }, \
	{ "retries", required_argument, NULL, CMD_OPT_RETRIES }
#define CMD_VOL_HELP \
	"Storage (flags > environment > config file profile > the volume's format record):\n" \
	"      --bucket URL         object-store bucket URL (default: env JFSOPS_BUCKET, the\n" \
	"                           profile's bucket or endpoint, else the format's bucket)\n" \
	"      --access-key KEY     access key (default: env JFSOPS_ACCESS_KEY, the profile,\n" \
	"                           else the format's)\n" \
	"      --secret-key KEY     secret key (default: env JFSOPS_SECRET_KEY, the profile,\n" \
	"                           else the format's); prefer those: ps shows command lines\n" \
	"      --insecure           do not verify TLS certificates (env JFSOPS_INSECURE=1)\n" \
	"      --profile NAME       use [profile NAME] of the config file (default: env\n" \
	"                           JFSOPS_PROFILE, else [default] when the file has one)\n" \
	"      --config FILE        config file (default: env JFSOPS_CONFIG, else\n" \
	"                           $XDG_CONFIG_HOME/jfsops/config or ~/.config/jfsops/config)\n" \
	"      --retries N          per-request retries in the object client, 0..100 (default 5;\n" \
	"                           twice as many for throttled replies: 503 SlowDown, 429)\n" \
	"Redis passwords may also come from env REDIS_PASSWORD or META_PASSWORD;\n" \
	"a Sentinel URL's sentinels take theirs from SENTINEL_PASSWORD.\n"

struct cmd_vol_args {
	const char *bucket;
	const char *access_key;
	const char *secret_key;
	bool insecure;
	const char *profile;  /* --profile NAME, or NULL */
	const char *config;   /* --config FILE, or NULL */
	const char *retries;  /* --retries N as given, or NULL (checked when opening) */
	bool read_only;       /* set by read-only commands before opening */
	bool list_temp_files; /* set by leakcheck: see jo_vol_opts */
	bool list_links;      /* set by leakcheck: see jo_vol_opts */
	char *secret_copy;  /* owned */
	char *url_copy;     /* owned */
};

/* --retries N: 0..100, else JO_EINVAL with err set. */
int cmd_parse_retries(const char *arg, int *out, struct jo_err *err);
/* Handle one of CMD_OPT_*: returns 1 when consumed, 0 when not ours. */
int cmd_vol_opt(struct cmd_vol_args *a, int opt, char *arg);
/*
 * Open the volume named by meta_url with the overrides (flags > env > format).
 * The password in meta_url is scrubbed from argv. Prints the error and
 * returns its exit code on failure, 0 on success.
 */
int cmd_open_volume(struct jo_ctx *ctx, struct cmd_vol_args *a, char *meta_url,
		    struct jo_vol **out);
void cmd_vol_args_release(struct cmd_vol_args *a);
/* The same, without printing: the error is left in err. meta_url is not scrubbed. */
int cmd_open_volume_quiet(struct cmd_vol_args *a, const char *meta_url, struct jo_vol **out,
			  struct jo_err *err);

/*
 * Load the config file (--config, env JFSOPS_CONFIG, default path) and pick
 * the profile (--profile, env JFSOPS_PROFILE, [default]). *profile borrows
 * from *cfg, which the caller frees with jo_cfg_free().
 */
int cmd_load_config(const char *config_flag, const char *profile_flag, struct jo_cfg **cfg,
		    const char **profile, struct jo_err *err);
/*
 * The effective storage settings of a volume command: flags > env JFSOPS_*
 * > config profile. out is released with jo_cfg_values_release();
 * *profile_out (may be NULL) gets the profile used (malloc'd) or NULL.
 */
int cmd_resolve_storage(const struct cmd_vol_args *a, struct jo_cfg_values *out, char **profile_out,
			struct jo_err *err);


/* The META_PASSWORD / REDIS_PASSWORD for a URL without its own password. */
void cmd_env_meta_passwords(const char **meta, const char **redis);
/* jo_meta_open with that password, for reading only. */
int cmd_meta_open(const char *url, struct jo_meta **out, struct jo_err *err);
/* The same, for writing when read_only is false (a command that changes metadata). */
int cmd_meta_open_mode(const char *url, bool read_only, struct jo_meta **out, struct jo_err *err);

void cmd_scrub_arg(char *arg);
void cmd_scrub_url_password(char *url);
/*
 * The numbers of the command line. Each starts with a digit: a sign, a
 * blank, "0x", "inf" or "nan" is malformed (strto* would take "-1" as 2^64-1).
 */
/* "90s", "50m", "2h", "500ms", "1d", "30" (seconds), "0.5s" -> ms; -1 if malformed. */
int64_t cmd_parse_duration(const char *s);
/* "64M", "1GiB", "4096" -> bytes. -1 on malformed input. */
int cmd_parse_size(const char *s, uint64_t *out);
/* Decimal digits only, lo..hi -> *out; -1 (out untouched) otherwise. */
int cmd_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* "12", "0.5": digits, at most one '.' followed by digits -> *out; -1 otherwise. */
int cmd_parse_decimal(const char *s, double *out);

#endif
