/*
 * log.h: diagnostics to stderr, one line each, prefixed with the program and
 * command name ("jfsops gc: ..."). The only process-wide state besides the
 * cancellation flag: the level and the prefix are set once by cmd/.
 * Thread-safe (each line is written with one fprintf under a lock).
 */
#ifndef JO_LOG_H
#define JO_LOG_H

enum jo_log_level { JO_LOG_ERROR = 0, JO_LOG_WARN, JO_LOG_INFO, JO_LOG_DEBUG };

void jo_log_setup(const char *prefix, enum jo_log_level level);
enum jo_log_level jo_log_get_level(void);
/* Parse "error|warn|info|debug"; returns -1 when unknown. */
int jo_log_parse_level(const char *s);

void jo_log(enum jo_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define jo_error(...) jo_log(JO_LOG_ERROR, __VA_ARGS__)
#define jo_warn(...)  jo_log(JO_LOG_WARN, __VA_ARGS__)
#define jo_info(...)  jo_log(JO_LOG_INFO, __VA_ARGS__)
#define jo_debug(...) jo_log(JO_LOG_DEBUG, __VA_ARGS__)

#endif
