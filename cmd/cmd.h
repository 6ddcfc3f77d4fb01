/*
 * cmd.h: the command table's entry-point signature and the commands of cmd/.
 * Each command parses its own flags (its option table, common/opt.h) with
 * argv[0] = the command name, returns an exit code from common/exit.h and never calls exit(). The
 * context and the helpers every command shares are the library's
 * (common/command.h): feature folders hold commands too.
 */
#ifndef JO_CMD_H
#define JO_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "common/command.h"
/* the commands of the feature folders */
#include "gc/compact.h"
#include "gc/gc.h"
#include "lanceparse/lance.h"
#include "leakcheck/leak.h"
#include "sync/sync.h"
#include "trash/trash.h"
#include "usage/export.h"
#include "usage/usage.h"

typedef int (*jo_cmd_fn)(int argc, char **argv, struct jo_ctx *ctx);

int cmd_info(int argc, char **argv, struct jo_ctx *ctx);
int cmd_cat(int argc, char **argv, struct jo_ctx *ctx);
int cmd_warmup(int argc, char **argv, struct jo_ctx *ctx);
int cmd_doctor(int argc, char **argv, struct jo_ctx *ctx);
int cmd_config(int argc, char **argv, struct jo_ctx *ctx);

#endif
