/*
 * summary.c: the --json summary record, one envelope for every command
 * (docs/json/summary.schema.json):
 *
 *   {"type":"summary","command":"gc","version":"0.1.0","volume":"myvol",
 *    "complete":true,"exit":0,"elapsed_s":1.25,
 *    "started":"2026-12-03T16:17:51.123Z","finished":"...", <counters>}
 *
 * volume is the volume's format name (commands on a volume), src/dst come
 * with sync's counters. A command builds its counters into an object and
 * hands it to cmd_summary_emit(), which puts the envelope first.
 *
 * With JFSOPS_SUMMARY_LOG=FILE in the environment the same line is also
 * appended to FILE (created exclusively when absent, appended to only when
 * it is the caller's regular file: common/file.h), so that a cron wrapper,
 * or the test suite, collects every run's summary in one place.
 */
#include "common/command.h"

#include "common/err.h"
#include "common/file.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

/* "2026-12-03T16:17:51.123Z" */
static void rfc3339(double t, char *buf, size_t cap)
{
	time_t s = (time_t)t;
	struct tm tm;
	int ms = (int)((t - (double)s) * 1000.0);

	gmtime_r(&s, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + strlen(buf), cap - strlen(buf), ".%03dZ", ms < 0 ? 0 : ms > 999 ? 999 : ms);
}

static double now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* JFSOPS_SUMMARY_LOG: the line appended in one write (O_APPEND), so that
 * runs sharing the file never interleave; a failure is a warning, the run's
 * outcome stays its own. */
static void summary_log(json_t *o)
{
	const char *path = getenv("JFSOPS_SUMMARY_LOG");
	struct jo_err err = { 0 };
	char *line;
	size_t n;
	int fd;

	if (!path || !*path)
		return;
	if (!(line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER))) {
		jo_warn("JFSOPS_SUMMARY_LOG: out of memory");
		return;
	}
	n = strlen(line);
	line[n] = '\n'; /* over the NUL: written by length */
	if (jo_file_append_open(&fd, path, JO_FILE_PUBLIC, &err) != 0) {
		jo_warn("JFSOPS_SUMMARY_LOG: %s", err.msg);
	} else {
		if (write(fd, line, n + 1) != (ssize_t)(n + 1))
			jo_warn("JFSOPS_SUMMARY_LOG: %s: the summary was not appended whole", path);
		close(fd);
	}
	free(line);
}

int cmd_summary_emit(const struct jo_ctx *ctx, json_t *counters, bool complete, int exit_code)
{
	json_t *o = json_object();
	double end = now(CLOCK_REALTIME), elapsed = now(CLOCK_MONOTONIC) - ctx->t0;
	char st[40], fin[40];
	const char *k;
	json_t *v;
	int rc = 0;

	if (!o) {
		json_decref(counters);
		return -1;
	}
	rfc3339(end - elapsed, st, sizeof(st));
	rfc3339(end, fin, sizeof(fin));
	json_object_set_new(o, "type", json_string("summary"));
	json_object_set_new(o, "command", json_string(ctx->cmd));
	json_object_set_new(o, "version", json_string(JO_VERSION));
	if (ctx->mx_volume[0])
		json_object_set_new(o, "volume", json_string(ctx->mx_volume));
	json_object_set_new(o, "complete", json_boolean(complete));
	json_object_set_new(o, "exit", json_integer(exit_code));
	json_object_set_new(o, "elapsed_s", json_real(elapsed));
	json_object_set_new(o, "started", json_string(st));
	json_object_set_new(o, "finished", json_string(fin));
	/* the command's own counters after the envelope; the envelope wins */
	json_object_foreach(counters, k, v) {
		if (!json_object_get(o, k))
			json_object_set(o, k, v);
	}
	json_decref(counters);
	if (json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) < 0 || fputc('\n', stdout) == EOF)
		rc = -1;
	summary_log(o);
	json_decref(o);
	fflush(stdout);
	return rc;
}
