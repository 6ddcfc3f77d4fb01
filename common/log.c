#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/esc.h"

static char log_prefix[64] = "jfsops";
static enum jo_log_level log_level = JO_LOG_WARN;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void jo_log_setup(const char *prefix, enum jo_log_level level)
{
	if (prefix)
		snprintf(log_prefix, sizeof(log_prefix), "%s", prefix);
	log_level = level;
}

enum jo_log_level jo_log_get_level(void)
{
	return log_level;
}

int jo_log_parse_level(const char *s)
{
	static const char *names[] = { "error", "warn", "info", "debug" };

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

void jo_log(enum jo_log_level lvl, const char *fmt, ...)
{
	static const char *tags[] = { "error: ", "warning: ", "", "debug: " };
	char line[2048], esc[JO_ESC_TERM_MAX(sizeof(line))];
	va_list ap;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	/* keys and names in log lines come from outside: no raw control bytes */
	fprintf(stderr, "%s: %s%s\n", log_prefix, tags[lvl], jo_esc_term(esc, sizeof(esc), line));
	pthread_mutex_unlock(&log_lock);
}
