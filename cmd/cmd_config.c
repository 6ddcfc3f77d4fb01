/*
 * jfsops config: where the config file is, and the effective storage
 * settings of a profile (secrets masked).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/config.h"
#include "common/err.h"
#include "common/esc.h"

static const char config_usage[] =
	"usage: jfsops config show [--profile NAME] [--config FILE] [--json] [storage flags]\n"
	"       jfsops config path [--config FILE]\n"
	"\n"
	"Show the one config file jfsops reads and the effective object-store settings.\n"
	"`path` prints the file's path (whether or not it exists). `show` prints every\n"
	"setting of the chosen profile after the precedence flags > environment\n"
	"(JFSOPS_ENDPOINT, JFSOPS_BUCKET, JFSOPS_REGION, JFSOPS_ACCESS_KEY,\n"
	"JFSOPS_SECRET_KEY, JFSOPS_SESSION_TOKEN, JFSOPS_PATH_STYLE, JFSOPS_LIST_V1,\n"
	"JFSOPS_INSECURE, JFSOPS_UNORDERED) > file > defaults, with where each value came from. Secrets\n"
	"are shown as **** (nothing of them is printed). The file looks like:\n"
	"\n"
	"  [profile oss-sh]\n"
	"  endpoint = https://oss-cn-shanghai.aliyuncs.com\n"
	"  region = cn-shanghai\n"
	"  access_key = LTAI5t...\n"
	"  secret_key = ...\n"
	"\n"
	"Keys: endpoint, bucket, region, access_key, secret_key, session_token,\n"
	"path_style, list_v1, insecure, unordered. [default] is used when no profile\n"
	"is named; `jfsops sync s3://NAME@bucket/prefix` names one per side.\n"
	"A file holding secret_key or session_token must be chmod 600: otherwise every\n"
	"command refuses it (exit 2).\n"
	"\n"
	"";

static const char config_tail[] =
	CMD_VOL_NOTE
	"\n"
	"Examples:\n"
	"  jfsops config path\n"
	"  jfsops config show --profile oss-sh\n"
	"  JFSOPS_CONFIG=/etc/jfsops/config jfsops config show --json\n";

static void value_text(int k, const char *v, char *buf, size_t cap)
{
	if (!v)
		snprintf(buf, cap, "-");
	else if (jo_cfg_key_secret(k))
		jo_cfg_mask(v, buf, cap);
	else
		snprintf(buf, cap, "%s", v);
}

static int show(struct jo_ctx *ctx, const struct cmd_vol_args *va)
{
	struct jo_cfg_values cv = { 0 };
	struct jo_cfg *cfg = NULL;
	const char *profile = NULL;
	char *used = NULL, buf[512];
	struct jo_err err = { 0 };
	int rc;

	rc = cmd_load_config(va->config, va->profile, &cfg, &profile, &err);
	if (!rc)
		rc = cmd_resolve_storage(va, &cv, &used, &err);
	if (rc) {
		jo_cfg_free(cfg);
		return cmd_fail(ctx, &err);
	}
	if (ctx->json) {
		json_t *o = json_object(), *vals = json_object(), *srcs = json_object();

		json_object_set_new(o, "config", json_string(jo_cfg_file(cfg)));
		json_object_set_new(o, "found", json_boolean(jo_cfg_found(cfg)));
		json_object_set_new(o, "profile", used ? json_string(used) : json_null());
		for (int k = 0; k < JO_CFG_NKEYS; k++) {
			value_text(k, cv.v[k], buf, sizeof(buf));
			json_object_set_new(vals, jo_cfg_key_name(k), cv.v[k] ? json_string(buf) : json_null());
			json_object_set_new(srcs, jo_cfg_key_name(k), json_string(jo_cfg_src_name(cv.src[k])));
		}
		json_object_set_new(o, "values", vals);
		json_object_set_new(o, "sources", srcs);
		json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(o);
	} else {
		const char *const *names;
		size_t n = jo_cfg_profiles(cfg, &names);

		/* names and values come from the file and the environment: escaped */
		printf("config file    %s (%s)\n", JO_ESC_TERM(jo_cfg_file(cfg)),
		       jo_cfg_found(cfg) ? "found" : "not found");
		printf("profiles       ");
		for (size_t i = 0; i < n; i++)
			printf("%s%s", i ? " " : "", JO_ESC_TERM(names[i]));
		printf("%s\n", n ? "" : "-");
		printf("profile        %s\n", used ? JO_ESC_TERM(used) :
		       "- (none: no --profile, JFSOPS_PROFILE or [default])");
		for (int k = 0; k < JO_CFG_NKEYS; k++) {
			value_text(k, cv.v[k], buf, sizeof(buf));
			printf("%-14s %-40s %s\n", jo_cfg_key_name(k), JO_ESC_TERM(buf),
			       jo_cfg_src_name(cv.src[k]));
		}
	}
	free(used);
	jo_cfg_values_release(&cv);
	jo_cfg_free(cfg);
	return 0;
}

int cmd_config(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	int rc;
	struct jo_option opts[] = {
		OPT_BOOL(0, "json", &ctx->json, "one JSON object instead of the table (show)"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, config_usage, config_tail, opts };

	if (!cmd_parse_operands(ctx, &cmd, argc, argv, 1, "expected 'show' or 'path'", &rc)) {
		cmd_vol_args_release(&va);
		return rc;
	}
	if (!strcmp(argv[1], "path")) {
		char path[4096];
		bool named;
		struct jo_err err = { 0 };

		rc = jo_cfg_path(va.config, path, sizeof(path), &named, &err);
		if (rc)
			rc = cmd_fail(ctx, &err);
		else
			printf("%s\n", path);
	} else if (!strcmp(argv[1], "show")) {
		rc = show(ctx, &va);
	} else {
		rc = cmd_usage_error(ctx, "unknown subcommand '%s': expected 'show' or 'path'", argv[1]);
	}
	cmd_vol_args_release(&va);
	return rc;
}
