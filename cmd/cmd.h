/*
 * cmd.h: the command table's entry-point signature and the context every
 * command receives. Each command parses its own flags (getopt_long) with
 * argv[0] = the command name, returns an exit code from cmd/exit.h and never
 * calls exit().
 */
#ifndef JO_CMD_H
#define JO_CMD_H

#include <stdbool.h>

struct jo_vol;
struct jo_err;

struct jo_ctx {
	const char *prog;   /* "jfsops" */
	const char *cmd;    /* the command name */
	bool json;          /* --json: JSON lines on stdout */
	bool quiet;         /* -q: no progress, warnings only */
	bool tty;           /* stderr is a terminal: live progress allowed */
};

typedef int (*jo_cmd_fn)(int argc, char **argv, struct jo_ctx *ctx);

int cmd_info(int argc, char **argv, struct jo_ctx *ctx);
int cmd_cat(int argc, char **argv, struct jo_ctx *ctx);
int cmd_gc(int argc, char **argv, struct jo_ctx *ctx);
int cmd_leakcheck(int argc, char **argv, struct jo_ctx *ctx);
int cmd_sync(int argc, char **argv, struct jo_ctx *ctx);
int cmd_compact(int argc, char **argv, struct jo_ctx *ctx);
int cmd_lance(int argc, char **argv, struct jo_ctx *ctx);
int cmd_warmup(int argc, char **argv, struct jo_ctx *ctx);
int cmd_doctor(int argc, char **argv, struct jo_ctx *ctx);
int cmd_config(int argc, char **argv, struct jo_ctx *ctx);
int cmd_trash(int argc, char **argv, struct jo_ctx *ctx);

/*
 * Print "jfsops CMD: <msg>" for err on stderr and return the exit code that
 * matches err->code (cmd/exit.h).
 */
int cmd_fail(const struct jo_ctx *ctx, const struct jo_err *err);
/* Remember the command's argv, so usage errors can name a refused option. */
void cmd_set_args(int argc, char **argv);
/* Print a usage error and return JO_EXIT_USAGE. */
int cmd_usage_error(const struct jo_ctx *ctx, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
