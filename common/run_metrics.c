/*
 * metrics.c: --metrics-file, one contract for every command.
 *
 * A command that takes --metrics-file names the file in ctx->metrics_path as
 * soon as its options are parsed, and records what its run did with
 * cmd_metric() (per-run values: gauges jfsops_<cmd>_last_run_<what>) and
 * cmd_metric_state() (state after the run: jfsops_<cmd>_<what>). main()
 * writes the file when the command returns, whatever its exit (a usage error
 * apart), with the samples every command has:
 *
 *   jfsops_<cmd>_last_run_timestamp_seconds   start of the run
 *   jfsops_<cmd>_last_run_duration_seconds
 *   jfsops_<cmd>_last_run_exit_code
 *   jfsops_<cmd>_last_run_success             1 for exit 0 or 1 (found)
 *   jfsops_<cmd>_last_success_timestamp_seconds
 *       the end of the last successful run: this run's, or carried from the
 *       file a failed run replaces, so `time() - last_success > 3h` fires
 *
 * Every sample carries the labels volume="NAME" (the volume's format name)
 * and, for sync, job="JOB", so two cron jobs on one host write series of
 * their own. A run that failed before it knew its volume (a wrong password)
 * keeps the labels of the file it replaces.
 */
#include "common/command.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/exit.h"
#include "common/err.h"
#include "common/metrics.h"

static int ensure(struct jo_ctx *ctx, struct jo_err *err)
{
	if (ctx->mx)
		return 0;
	return jo_metrics_new(&ctx->mx, err);
}

static int put(struct jo_ctx *ctx, const char *mid, const char *what, const char *help,
	       const char *labels, double v)
{
	struct jo_err err = { 0 };
	char name[160];

	snprintf(name, sizeof(name), "jfsops_%s_%s%s", ctx->cmd, mid, what);
	if (ensure(ctx, &err))
		return err.code;
	return jo_metrics_set(ctx->mx, name, "gauge", help, labels, v, &err);
}

int cmd_metric(struct jo_ctx *ctx, const char *what, const char *help, const char *labels,
	       double v)
{
	return put(ctx, "last_run_", what, help, labels, v);
}

int cmd_metric_state(struct jo_ctx *ctx, const char *what, const char *help, const char *labels,
		     double v)
{
	return put(ctx, "", what, help, labels, v);
}

/* a label value, cut to the buffer (a format name is at most 63 bytes) */
static void set_label(char *dst, size_t cap, const char *v)
{
	size_t n = v ? strnlen(v, cap - 1) : 0;

	if (n)
		memcpy(dst, v, n);
	dst[n] = '\0';
}

void cmd_metrics_volume(struct jo_ctx *ctx, const char *name)
{
	set_label(ctx->mx_volume, sizeof(ctx->mx_volume), name);
}

void cmd_metrics_job(struct jo_ctx *ctx, const char *job)
{
	set_label(ctx->mx_job, sizeof(ctx->mx_job), job);
}

/* `key="value"` with the value escaped as the text format wants. */
static void add_label(char *out, size_t cap, const char *key, const char *v)
{
	size_t n = strlen(out);

	if (!v || !*v)
		return;
	n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s=\"", n ? "," : "", key);
	for (; *v && n + 4 < cap; v++) {
		if (*v == '"' || *v == '\\')
			out[n++] = '\\';
		if (*v == '\n') {
			out[n++] = '\\';
			out[n++] = 'n';
			continue;
		}
		out[n++] = *v;
	}
	if (n + 2 < cap) {
		out[n++] = '"';
		out[n] = '\0';
	}
}

/* The value of label key in a label list (`a="x",b="y"`), unescaped, or "". */
static void label_of(const char *labels, const char *key, char *out, size_t cap)
{
	size_t kl = strlen(key), n = 0;
	const char *p = labels;

	out[0] = '\0';
	while (p && *p) {
		if (!strncmp(p, key, kl) && p[kl] == '=' && p[kl + 1] == '"') {
			for (p += kl + 2; *p && *p != '"' && n + 1 < cap; p++) {
				if (*p == '\\' && p[1])
					p++;
				out[n++] = *p;
			}
			out[n] = '\0';
			return;
		}
		/* next label: past the closing quote of this one */
		p = strchr(p, '"');
		if (p)
			p = strchr(p + 1, '"');
		while (p && *p && (*p == '"' || *p == ','))
			p++;
	}
}

int cmd_metrics_finish(struct jo_ctx *ctx, int exit_code)
{
	char name[160], prev_labels[512] = "", base[600] = "", v[128];
	struct jo_err err = { 0 };
	double last_ok = 0, now_mono;
	bool success = exit_code == JO_EXIT_OK || exit_code == JO_EXIT_FOUND;
	bool have_prev;
	struct timespec ts;
	int rc;

	if (!ctx->metrics_path || exit_code == JO_EXIT_USAGE)
		return 0;
	snprintf(name, sizeof(name), "jfsops_%s_last_success_timestamp_seconds", ctx->cmd);
	have_prev = jo_metrics_read_sample(ctx->metrics_path, name, &last_ok, prev_labels,
					   sizeof(prev_labels)) == 0;
	/* a run that failed before it knew its volume (or job) keeps the file's */
	if (!ctx->mx_volume[0] && have_prev) {
		label_of(prev_labels, "volume", v, sizeof(v));
		cmd_metrics_volume(ctx, v);
	}
	if (!ctx->mx_job[0] && have_prev) {
		label_of(prev_labels, "job", v, sizeof(v));
		cmd_metrics_job(ctx, v);
	}
	add_label(base, sizeof(base), "volume", ctx->mx_volume);
	add_label(base, sizeof(base), "job", ctx->mx_job);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now_mono = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		ts.tv_sec = time(NULL), ts.tv_nsec = 0;
	if ((rc = cmd_metric(ctx, "timestamp_seconds", "start of the last run (unix seconds)", NULL,
			     ctx->started)) ||
	    (rc = cmd_metric(ctx, "duration_seconds", "duration of the last run", NULL,
			     now_mono - ctx->t0)) ||
	    (rc = cmd_metric(ctx, "exit_code", "exit code of the last run (0 ok, 1 found "
			     "something, 4 partly failed, ...: see jfsops --help)", NULL,
			     exit_code)) ||
	    (rc = cmd_metric(ctx, "success", "1 if the last run succeeded (exit 0, or 1: found "
			     "something)", NULL, success)))
		goto fail;
	if (success || have_prev) {
		rc = cmd_metric_state(ctx, "last_success_timestamp_seconds",
				      "end of the last successful run (unix seconds; a failed run "
				      "keeps the one before)", NULL,
				      success ? (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 : last_ok);
		if (rc)
			goto fail;
	}
	rc = jo_metrics_write_labeled(ctx->mx, ctx->metrics_path, base, &err);
	if (rc) {
		fprintf(stderr, "%s %s: %s\n", ctx->prog, ctx->cmd, err.msg);
		return rc;
	}
	return 0;
fail:
	fprintf(stderr, "%s %s: metrics: %s\n", ctx->prog, ctx->cmd, jo_err_name(rc));
	return rc;
}
