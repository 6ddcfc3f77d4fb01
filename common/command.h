/*
 * command.h: what every command, in cmd/ or in a feature folder, gets from
 * the library: its context, its errors as exit codes (common/exit.h) and
 * one-line messages, the --json summary envelope and the run's metrics.
 */
#ifndef JO_COMMON_COMMAND_H
#define JO_COMMON_COMMAND_H

#include <stdbool.h>
#include <stdint.h>

struct jo_vol;
struct jo_err;
struct jo_metrics;

struct jo_ctx {
	const char *prog;   /* "jfsops" */
	const char *cmd;    /* the command name */
	char prefix[48];    /* "jfsops CMD": what its messages start with */
	bool json;          /* --json: JSON lines on stdout */
	bool quiet;         /* -q: no progress, warnings only */
	bool tty;           /* stderr is a terminal: live progress allowed */
	/*
	 * --metrics-file (common/run_metrics.c): the command sets metrics_path
	 * once its options are parsed; main writes the file when it returns.
	 */
	const char *metrics_path;
	struct jo_metrics *mx;   /* the run's values (cmd_metric), or NULL */
	char mx_volume[128];     /* label volume="..." (cmd_open_volume sets it) */
	char mx_job[128];        /* label job="..." (sync) */
	int64_t started;         /* unix seconds at the start of the command */
	double t0;               /* monotonic seconds at the start */
};

/*
 * Print "jfsops CMD: <msg>" for err on stderr and return the exit code that
 * matches err->code (common/exit.h).
 */
int cmd_fail(const struct jo_ctx *ctx, const struct jo_err *err);
/*
 * Metrics of the run (common/run_metrics.c): cmd_metric() records a per-run value
 * as the gauge jfsops_<cmd>_last_run_<what>, cmd_metric_state() a state
 * after the run as jfsops_<cmd>_<what>; labels NULL or `k="v"`. Negative
 * JO_E* on failure (out of memory), which a command may ignore: the file
 * then lacks that sample. cmd_metrics_finish() is main's.
 */
int cmd_metric(struct jo_ctx *ctx, const char *what, const char *help, const char *labels,
	       double v);
int cmd_metric_state(struct jo_ctx *ctx, const char *what, const char *help, const char *labels,
		     double v);
void cmd_metrics_volume(struct jo_ctx *ctx, const char *name);
void cmd_metrics_job(struct jo_ctx *ctx, const char *job);
int cmd_metrics_finish(struct jo_ctx *ctx, int exit_code);
/*
 * Print the --json summary record (common/summary.c): the envelope every
 * command shares (type, command, version, volume, complete, exit, elapsed_s,
 * started, finished; docs/json/summary.schema.json), then the command's own
 * fields from counters, which it takes (decref'd; NULL-safe for jansson).
 * 0, or -1 when stdout failed.
 */
typedef struct json_t json_t;
int cmd_summary_emit(const struct jo_ctx *ctx, json_t *counters, bool complete, int exit_code);
/* Print a usage error and return JO_EXIT_USAGE. */
int cmd_usage_error(const struct jo_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
