/*
 * volume.h: opening a volume for a command, in cmd/ or a feature folder: the
 * storage-override flags every volume command takes, the config profile, the
 * metadata passwords of the environment, scrubbing secrets from argv.
 */
#ifndef JO_COMMON_VOLUME_H
#define JO_COMMON_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

#include "common/opt.h"

struct jo_ctx;
struct jo_err;
struct jo_format;
struct jo_meta;
struct jo_vol;
struct jo_cfg;
struct jo_cfg_values;

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

/*
 * The storage-override flags every volume command takes, as rows of its
 * option table (a is the command's struct cmd_vol_args), and the note that
 * follows them in --help.
 */
int cmd_vol_secret_cb(const struct jo_option *o, const char *arg, char *want, size_t cap);
#define CMD_VOL_OPTIONS(a) \
	OPT_GROUP("Storage (flags > environment > config file profile > the volume's format record):"), \
	OPT_STRING(0, "bucket", &(a)->bucket, "URL", "object-store bucket URL (default: env " \
		   "JFSOPS_BUCKET, the profile's bucket or endpoint, else the format's bucket)"), \
	OPT_STRING(0, "access-key", &(a)->access_key, "KEY", "access key (default: env " \
		   "JFSOPS_ACCESS_KEY, the profile, else the format's)"), \
	OPT_CALLBACK(0, "secret-key", (a), "KEY", "secret key (default: env JFSOPS_SECRET_KEY, " \
		     "the profile, else the format's); prefer those: ps shows command lines", \
		     cmd_vol_secret_cb), \
	OPT_BOOL(0, "insecure", &(a)->insecure, "do not verify TLS certificates (env " \
		 "JFSOPS_INSECURE=1)"), \
	OPT_STRING(0, "profile", &(a)->profile, "NAME", "use [profile NAME] of the config file " \
		   "(default: env JFSOPS_PROFILE, else [default] when the file has one)"), \
	OPT_STRING(0, "config", &(a)->config, "FILE", "config file (default: env JFSOPS_CONFIG, " \
		   "else $XDG_CONFIG_HOME/jfsops/config or ~/.config/jfsops/config)"), \
	OPT_STRING(0, "retries", &(a)->retries, "N", "per-request retries in the object client, " \
		   "0..100 (default 5; twice as many for throttled replies: 503 SlowDown, 429)")
#define CMD_VOL_NOTE \
	"Redis passwords may also come from env REDIS_PASSWORD or META_PASSWORD;\n" \
	"a Sentinel URL's sentinels take theirs from SENTINEL_PASSWORD.\n"

/*
 * What a command returns when jo_opt_parse() said n < 0: 0 after --help,
 * 2 after a refusal. Neither is a run: no metrics file is written, also
 * when --metrics-file came before --help.
 */
int cmd_opt_exit(struct jo_ctx *ctx, int n);
/*
 * jo_opt_parse() for a command that takes exactly want operands: true with
 * them in argv[1..want]; else false and *exit_code is what the command
 * returns (cmd_opt_exit's, or a usage error saying what).
 */
bool cmd_parse_operands(struct jo_ctx *ctx, const struct jo_opt_cmd *cmd, int argc, char **argv,
			int want, const char *what, int *exit_code);

/* --retries N: 0..100, else JO_EINVAL with err set. */
int cmd_parse_retries(const char *arg, int *out, struct jo_err *err);
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

/* jo_meta_open as cmd_meta_open does, then the volume's format into *fmt. */
int cmd_meta_open_format(const char *url, struct jo_meta **out, struct jo_format *fmt,
			 struct jo_err *err);

void cmd_scrub_arg(char *arg);
void cmd_scrub_url_password(char *url);
/*
 * A copy of the META-URL word of argv to open the volume with, and that word's
 * password scrubbed in place (ps no longer shows it). NULL: out of memory, the
 * word left as it was.
 */
char *cmd_take_url(char *arg);

#endif
