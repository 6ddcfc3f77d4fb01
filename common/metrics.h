/*
 * metrics.h: Prometheus textfile-collector output for cron runs.
 *
 * Naming scheme shared by every command: jfsops_<cmd>_<thing>_total for
 * counters of one run (items, objects, bytes, errors), jfsops_<cmd>_<thing>
 * for gauges, jfsops_<cmd>_duration_seconds and
 * jfsops_<cmd>_last_success_timestamp_seconds. Labels are few and bounded
 * (kind="...", result="..."). The file is written to a temp file in the same
 * directory and renamed into place, so the collector never sees half a file
 * (common/file.h: a random hidden name, created exclusively; mode 0666 less
 * the umask).
 * Not thread-safe (fill it from one thread at the end of a run).
 */
#ifndef JO_METRICS_H
#define JO_METRICS_H

#include <stddef.h>

struct jo_err;
struct jo_metrics;

int jo_metrics_new(struct jo_metrics **out, struct jo_err *err);
void jo_metrics_free(struct jo_metrics *mx);
/*
 * Set a sample. type "counter" or "gauge"; labels is NULL or a preformatted
 * label list without braces (`kind="file"`); help is used once per name.
 * JO_EINVAL for a malformed name.
 */
int jo_metrics_set(struct jo_metrics *mx, const char *name, const char *type, const char *help,
		   const char *labels, double value, struct jo_err *err);
/* Write atomically (temp + fsync + rename). */
int jo_metrics_write(struct jo_metrics *mx, const char *path, struct jo_err *err);
/* The same, with base (a label list without braces, or NULL) put first in
 * every sample's labels. */
int jo_metrics_write_labeled(struct jo_metrics *mx, const char *path, const char *base,
			     struct jo_err *err);
/*
 * The first sample `name` (with any labels) of an existing file: 0 with its
 * value and its labels (without braces, "" when none) in labels[cap], or -1
 * when absent or unreadable.
 */
int jo_metrics_read_sample(const char *path, const char *name, double *out, char *labels,
			   size_t cap);
/* The value of an unlabelled sample `name` in an existing file: 0, or -1 if absent. */
int jo_metrics_read(const char *path, const char *name, double *out);

#endif
