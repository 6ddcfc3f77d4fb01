/* metrics.c: Prometheus textfile writer. */
#include "common/metrics.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"

struct sample {
	char *name, *type, *help, *labels;
	double value;
};

struct jo_metrics {
	struct sample *s;
	size_t n, cap;
};

int jo_metrics_new(struct jo_metrics **out, struct jo_err *err)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

void jo_metrics_free(struct jo_metrics *mx)
{
	if (!mx)
		return;
	for (size_t i = 0; i < mx->n; i++) {
		free(mx->s[i].name);
		free(mx->s[i].type);
		free(mx->s[i].help);
		free(mx->s[i].labels);
	}
	free(mx->s);
	free(mx);
}

static int valid_name(const char *n)
{
	if (!n || !*n || (*n >= '0' && *n <= '9'))
		return 0;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') ||
		      (*n >= '0' && *n <= '9') || *n == '_' || *n == ':'))
			return 0;
	return 1;
}

int jo_metrics_set(struct jo_metrics *mx, const char *name, const char *type, const char *help,
		   const char *labels, double value, struct jo_err *err)
{
	struct sample *s;

	if (!valid_name(name))
		return jo_err_set(err, JO_EINVAL, "bad metric name '%s'", name ? name : "");
	for (size_t i = 0; i < mx->n; i++) {
		s = &mx->s[i];
		if (!strcmp(s->name, name) && !strcmp(s->labels, labels ? labels : "")) {
			s->value = value;
			return 0;
		}
	}
	if (jo_grow_array(&mx->s, &mx->cap, mx->n + 1, sizeof(*mx->s)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	s = &mx->s[mx->n];
	s->name = strdup(name);
	s->type = strdup(type ? type : "gauge");
	s->help = strdup(help ? help : "");
	s->labels = strdup(labels ? labels : "");
	s->value = value;
	if (!s->name || !s->type || !s->help || !s->labels) {
		free(s->name);
		free(s->type);
		free(s->help);
		free(s->labels);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	mx->n++;
	return 0;
}

/* Integers as integers; anything else in the fewest digits that read back
 * the same double (a timestamp keeps its sub-second part). */
static void put_value(FILE *f, double v)
{
	char buf[40];

	if (v == (double)(long long)v && v < 9e15 && v > -9e15) {
		fprintf(f, "%lld\n", (long long)v);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	fprintf(f, "%s\n", buf);
}

int jo_metrics_write(struct jo_metrics *mx, const char *path, struct jo_err *err)
{
	return jo_metrics_write_labeled(mx, path, NULL, err);
}

int jo_metrics_write_labeled(struct jo_metrics *mx, const char *path, const char *base,
			     struct jo_err *err)
{
	struct jo_file *jf = NULL;
	FILE *f;
	int rc;

	/* a hidden temp name (".NAME.XXXXXX"): the textfile collector reads *.prom only */
	rc = jo_file_create(&jf, path, JO_FILE_PUBLIC, JO_FILE_STDIO, err);
	if (rc) {
		jo_err_wrap(err, "metrics file");
		goto out;
	}
	f = jf->fp;
	for (size_t i = 0; i < mx->n; i++) {
		int first = 1;

		for (size_t j = 0; j < i; j++)
			if (!strcmp(mx->s[j].name, mx->s[i].name))
				first = 0;
		if (!first)
			continue;
		fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", mx->s[i].name, mx->s[i].help,
			mx->s[i].name, mx->s[i].type);
		for (size_t j = i; j < mx->n; j++) {
			if (strcmp(mx->s[j].name, mx->s[i].name))
				continue;
			const char *lab = mx->s[j].labels;
			bool b = base && *base;

			if (b || lab[0])
				fprintf(f, "%s{%s%s%s} ", mx->s[j].name, b ? base : "",
					b && lab[0] ? "," : "", lab);
			else
				fprintf(f, "%s ", mx->s[j].name);
			put_value(f, mx->s[j].value);
		}
	}
	rc = jo_file_commit(jf, err);
	if (rc)
		jo_err_wrap(err, "metrics file");
out:
	jo_file_abort(jf);
	return rc;
}

int jo_metrics_read_sample(const char *path, const char *name, double *out, char *labels,
			   size_t cap)
{
	FILE *f;
	char line[2048];
	size_t nl = strlen(name);
	int rc = -1;

	if (cap)
		labels[0] = '\0';
	/* O_NOFOLLOW: a link planted at the path is not read through */
	{
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

		if (fd < 0)
			return -1;
		if (!(f = fdopen(fd, "r"))) {
			close(fd);
			return -1;
		}
	}
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		const char *v = NULL, *lb = NULL;
		size_t ll = 0;

		if (strncmp(line, name, nl))
			continue;
		if (line[nl] == ' ') {
			v = line + nl + 1;
		} else if (line[nl] == '{') {
			const char *close = strstr(line + nl, "} ");

			if (!close)
				continue;
			lb = line + nl + 1;
			ll = (size_t)(close - lb);
			v = close + 2;
		} else {
			continue;
		}
		char *end;
		double d = strtod(v, &end);

		if (end == v)
			continue;
		*out = d;
		if (cap && lb)
			snprintf(labels, cap, "%.*s", (int)(ll < cap ? ll : cap - 1), lb);
		rc = 0;
	}
	fclose(f);
	return rc;
}

int jo_metrics_read(const char *path, const char *name, double *out)
{
	FILE *f = fopen(path, "r");
	char line[512];
	size_t nl = strlen(name);
	int rc = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, name, nl) && line[nl] == ' ') {
			char *end;
			double v = strtod(line + nl + 1, &end);

			if (end != line + nl + 1) {
				*out = v;
				rc = 0;
			}
		}
	}
	fclose(f);
	return rc;
}
