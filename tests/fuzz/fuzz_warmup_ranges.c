/*
 * libFuzzer target: warmup's range-list lines (jo_warmup_parse_line,
 * common/warmup/warmup.c), every form `--ranges` accepts. The input is split into
 * lines as cmd_warmup reads them (each with its newline). Beyond "does not
 * crash":
 *   - every range has a non-empty path (a JSON line may carry any name
 *     but one with a NUL: "\u0000" is refused, never cut short);
 *   - a skipped line gives no range, a failed line a message;
 *   - a callback's non-zero value stops the line and is returned;
 *   - round trip: every range written back as a quoted CSV line and as a
 *     JSON line (and, for paths where the form is unambiguous, as plain
 *     "PATH OFFSET LENGTH" and "PATH [S-E]") parses to the same one range.
 */
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"
#include "common/warmup/warmup.h"
#include "tests/fuzz/fuzz_util.h"

struct got {
	char *path;
	uint64_t off, len;
	size_t n;
	int stop_at;  /* return JO_ECANCELED at this call (1-based), 0 never */
};

static int collect(const char *path, uint64_t off, uint64_t len, void *payload)
{
	struct got *g = payload;

	FUZZ_CHECK(path && path[0], "empty path");
	g->n++;
	if (g->n == 1) {
		g->path = strdup(path);
		if (!g->path)
			abort();
		g->off = off;
		g->len = len;
	}
	if (g->stop_at && (int)g->n == g->stop_at)
		return JO_ECANCELED;
	return 0;
}

/* Parse line and expect exactly the one range (path, off, len). */
static void expect_one(const char *line, const char *path, uint64_t off, uint64_t len,
		       const char *form)
{
	struct got g = { 0 };
	struct jo_err err = { 0 };
	bool skipped = true;
	int rc = jo_warmup_parse_line(line, strlen(line), collect, &g, &skipped, &err);

	FUZZ_CHECK(rc == 0, "%s form '%s' failed: %s", form, line, err.msg);
	FUZZ_CHECK(!skipped && g.n == 1, "%s form '%s': %zu ranges", form, line, g.n);
	FUZZ_CHECK(!strcmp(g.path, path) && g.off == off && g.len == len,
		   "%s form '%s' gave ('%s', %llu, %llu), want ('%s', %llu, %llu)", form, line,
		   g.path, (unsigned long long)g.off, (unsigned long long)g.len, path,
		   (unsigned long long)off, (unsigned long long)len);
	free(g.path);
}

static bool plain_safe(const char *p)
{
	size_t n = strlen(p);

	/* no edge whitespace, nothing another form claims */
	if (!n || p[0] == ' ' || p[0] == '\t' || p[0] == '{' || p[0] == '"' || p[0] == '#' ||
	    p[n - 1] == ']')
		return false;
	for (const char *s = p; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == ' ' || *s == ',' || *s == '\x7f' || *s == '\v')
			return false;
	return true;
}

static void round_trip(const char *path, uint64_t off, uint64_t len)
{
	size_t n = strlen(path);
	char *line = malloc(2 * n + 96), *w = line, *js;
	json_t *o;

	if (!line)
		abort();
	/* CSV, RFC 4180 quoting */
	*w++ = '"';
	for (const char *s = path; *s; s++) {
		if (*s == '"')
			*w++ = '"';
		*w++ = *s;
	}
	sprintf(w, "\",%llu,%llu\n", (unsigned long long)off, (unsigned long long)len);
	expect_one(line, path, off, len, "CSV");

	/* JSON Lines (only for UTF-8 paths: JSON strings are UTF-8) */
	o = json_pack("{s:s%,s:I,s:I}", "file", path, n, "offset", (json_int_t)off, "length",
		      (json_int_t)len);
	if (o && off <= INT64_MAX && len <= INT64_MAX) {
		js = json_dumps(o, JSON_COMPACT);
		if (!js)
			abort();
		expect_one(js, path, off, len, "JSON");
		free(js);
	}
	json_decref(o);

	if (plain_safe(path)) {
		sprintf(line, "%s %llu %llu", path, (unsigned long long)off, (unsigned long long)len);
		expect_one(line, path, off, len, "plain");
		if (len > 0 && off + len > off) {
			sprintf(line, "%s [%llu-%llu]", path, (unsigned long long)off,
				(unsigned long long)(off + len));
			expect_one(line, path, off, len, "juicefs");
		}
	}
	free(line);
}

/* A JSON line with a \\u0000 escape (an odd run of backslashes before 'u'). */
static bool json_nul_escape(const char *line, size_t len)
{
	const char *p = line;

	while (p < line + len && (*p == ' ' || *p == '\t'))
		p++;
	if (p >= line + len || *p != '{')
		return false;
	for (size_t i = 0; i + 6 <= len; i++) {
		size_t bs = 0;

		if (memcmp(line + i, "\\u0000", 6) != 0)
			continue;
		while (bs <= i && line[i - bs] == '\\')
			bs++;
		if (bs % 2)
			return true;
	}
	return false;
}

static void one_line(const char *line, size_t len)
{
	struct got g = { 0 };
	struct jo_err err = { 0 };
	bool skipped = false;
	int rc = jo_warmup_parse_line(line, len, collect, &g, &skipped, &err);

	if (json_nul_escape(line, len))
		FUZZ_CHECK(rc != 0, "a JSON line with \\u0000 parsed");
	if (rc) {
		FUZZ_CHECK(rc == JO_EINVAL, "rc %d", rc);
		FUZZ_CHECK(err.code == rc && err.msg[0], "no message");
	} else if (skipped) {
		FUZZ_CHECK(g.n == 0, "a skipped line gave %zu ranges", g.n);
	} else {
		FUZZ_CHECK(g.n > 0 || memchr(line, '[', len) || memchr(line, '-', len),
			   "a line neither skipped nor a range: '%.*s'", (int)len, line);
	}
	if (g.n > 0 && rc == 0) {
		char *p = g.path;
		uint64_t off = g.off, l = g.len;

		round_trip(p, off, l);
		if (g.n > 1) {
			/* stop at the second range: that is what comes back */
			struct got g2 = { .stop_at = 2 };

			rc = jo_warmup_parse_line(line, len, collect, &g2, NULL, &err);
			FUZZ_CHECK(rc == JO_ECANCELED && g2.n == 2, "stop: rc %d after %zu", rc,
				   g2.n);
			free(g2.path);
		}
	}
	free(g.path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *e = s + size;

	while (s < e) {
		const char *nl = memchr(s, '\n', (size_t)(e - s));
		size_t n = nl ? (size_t)(nl - s) + 1 : (size_t)(e - s);
		char *line = malloc(n + 1);

		if (!line)
			abort();
		memcpy(line, s, n);
		line[n] = '\0';
		one_line(line, n);
		free(line);
		s += n;
	}
	return 0;
}
