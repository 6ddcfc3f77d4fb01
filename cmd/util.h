/* util.h: plumbing shared by the commands in cmd/ and the feature folders. */
#ifndef JO_CMD_UTIL_H
#define JO_CMD_UTIL_H

#include <stdbool.h>
#include <stdint.h>

struct jo_ctx;
struct jo_err;
struct jo_vol;

/* getopt_long codes of the storage-override flags every volume command takes. */
enum {
	CMD_OPT_BUCKET = 0x1000,
	CMD_OPT_ACCESS_KEY,
	CMD_OPT_SECRET_KEY,
	CMD_OPT_INSECURE,
};
#define CMD_VOL_LONGOPTS \
	{ "bucket", required_argument, NULL, CMD_OPT_BUCKET }, \
	{ "access-key", required_argument, NULL, CMD_OPT_ACCESS_KEY }, \
	{ "secret-key", required_argument, NULL, CMD_OPT_SECRET_KEY }, \
	{ "insecure", no_argument, NULL, CMD_OPT_INSECURE }
#define CMD_VOL_HELP \
	"Storage overrides (default: what the volume's format record says):\n" \
	"      --bucket URL         object-store bucket/endpoint (env JFSOPS_BUCKET)\n" \
	"      --access-key KEY     access key (env JFSOPS_ACCESS_KEY)\n" \
	"      --secret-key KEY     secret key; prefer env JFSOPS_SECRET_KEY, which ps cannot see\n" \
	"      --insecure           do not verify TLS certificates (env JFSOPS_INSECURE=1)\n" \
	"Redis passwords may also come from env REDIS_PASSWORD or META_PASSWORD.\n"

struct cmd_vol_args {
	const char *bucket;
	const char *access_key;
	const char *secret_key;
	bool insecure;
	char *secret_copy;  /* owned */
	char *url_copy;     /* owned */
};

/* Handle one of CMD_OPT_*: returns 1 when consumed, 0 when not ours. */
int cmd_vol_opt(struct cmd_vol_args *a, int opt, char *arg);
/*
 * Open the volume named by meta_url with the overrides (flags > env > format).
 * The password in meta_url is scrubbed from argv. Prints the error and
 * returns its exit code on failure, 0 on success.
 */
int cmd_open_volume(const struct jo_ctx *ctx, struct cmd_vol_args *a, char *meta_url,
		    struct jo_vol **out);
void cmd_vol_args_release(struct cmd_vol_args *a);
/* The same, without printing: the error is left in err. meta_url is not scrubbed. */
int cmd_open_volume_quiet(struct cmd_vol_args *a, const char *meta_url, struct jo_vol **out,
			  struct jo_err *err);

void cmd_scrub_arg(char *arg);
void cmd_scrub_url_password(char *url);
/* "64M", "1GiB", "4096" -> bytes. -1 on malformed input. */
int cmd_parse_size(const char *s, uint64_t *out);

#endif
