/* audit.c: JSON-lines audit trail (jansson). */
#include "common/audit.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"

struct jo_audit {
	int fd;
	int own;
	char *path;
	pthread_mutex_t mu;
};

int jo_audit_open(struct jo_audit **out, const char *path, struct jo_err *err)
{
	struct jo_audit *a;

	*out = NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	a->path = strdup(path);
	if (!a->path) {
		free(a);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!strcmp(path, "-")) {
		a->fd = STDOUT_FILENO;
	} else {
		int rc = jo_file_append_open(&a->fd, path, JO_FILE_PUBLIC, err);

		if (rc) {
			free(a->path);
			free(a);
			return jo_err_wrap(err, "audit file");
		}
		a->own = 1;
	}
	pthread_mutex_init(&a->mu, NULL);
	*out = a;
	return 0;
}

static void now_rfc3339(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	char tmp[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(tmp, sizeof(tmp), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%03ldZ", tmp, ts.tv_nsec / 1000000);
}

static int set_str(json_t *o, const char *k, const char *v)
{
	return v ? json_object_set_new(o, k, json_string(v)) : 0;
}

int jo_audit_write(struct jo_audit *a, const struct jo_audit_rec *r, struct jo_err *err)
{
	char tbuf[48];
	json_t *o = json_object();
	char *line;
	size_t len;
	int rc = 0;

	if (!o)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	now_rfc3339(tbuf, sizeof(tbuf));
	if (json_object_set_new(o, "time", json_string(tbuf)) || set_str(o, "action", r->action) ||
	    set_str(o, "worker", r->worker) ||
	    (r->task && json_object_set_new(o, "task", json_integer(r->task))) ||
	    set_str(o, "key", r->key) ||
	    (r->slice_id && json_object_set_new(o, "slice_id", json_integer((json_int_t)r->slice_id))) ||
	    (r->slice_size && json_object_set_new(o, "slice_size", json_integer(r->slice_size))) ||
	    set_str(o, "reason", r->reason) || set_str(o, "result", r->result) ||
	    set_str(o, "error", r->error)) {
		json_decref(o);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!line)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	len = strlen(line);
	line[len++] = '\n'; /* replaces the NUL: written by length */
	pthread_mutex_lock(&a->mu);
	if (jo_write_all(a->fd, line, len) < 0)
		rc = jo_err_set(err, JO_EIO, "audit file '%s': %s", a->path, strerror(errno));
	pthread_mutex_unlock(&a->mu);
	free(line);
	return rc;
}

int jo_audit_sync(struct jo_audit *a, struct jo_err *err)
{
	if (!a->own)
		return 0;
	if (fsync(a->fd) != 0 && errno != EINVAL)
		return jo_err_set(err, JO_EIO, "audit file '%s': fsync: %s", a->path, strerror(errno));
	return 0;
}

void jo_audit_close(struct jo_audit *a)
{
	if (!a)
		return;
	if (a->own) {
		(void)fsync(a->fd); /* best effort at close; writes were already checked */
		close(a->fd);
	}
	pthread_mutex_destroy(&a->mu);
	free(a->path);
	free(a);
}
