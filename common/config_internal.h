/*
 * config_internal.h: the config file parser without the file, for the unit
 * tests and the fuzz target (tests/fuzz/fuzz_config.c). Not for commands.
 */
#ifndef JO_CONFIG_INTERNAL_H
#define JO_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config.h"

/*
 * Parse len bytes of config text as jo_cfg_load() parses a file (name is
 * used in messages and as jo_cfg_file()). *has_secret is set when a
 * secret_key or session_token has a value (jo_cfg_load then checks the
 * file's mode). Errors as jo_cfg_load(); *out is NULL on error.
 */
int jo_cfg_parse_mem(struct jo_cfg **out, const char *name, const char *text, size_t len,
		     bool *has_secret, struct jo_err *err);

#endif
