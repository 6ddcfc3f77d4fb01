/*
 * libFuzzer target: sync's rclone-style filter rules (sync/filter.c).
 * Input: filter-file lines ("+ PATTERN", "- PATTERN", "!", comments), then
 * a line "--", then keys, one a line. Beyond "does not crash or hang":
 *   - a file that does not load names its line;
 *   - jo_sync_glob_match agrees with a plain backtracking reference matcher
 *     of the documented syntax (run where that is cheap: few stars, short
 *     keys);
 *   - a key matches itself written as an anchored pattern with every byte
 *     escaped, and does not match that pattern plus one more byte;
 *   - one rule "+ P" passes exactly the keys that "- P" stops, and (for a
 *     brace-free P) exactly those P matches ("P/" meaning "P/ **");
 *   - "**" passes every key.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "sync/sync.h"
#include "tests/fuzz/fuzz_util.h"

/* ---- the reference matcher: the syntax of sync --help, by backtracking ---- */

static size_t ref_u8len(const char *s)
{
	size_t n = 1;

	if ((unsigned char)*s >= 0xc0)
		while (n < 4 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n++;
	return n;
}

/* [class] at p against c: 1 hit, 0 miss, -1 unterminated; *end past ']' */
static int ref_class(const char *p, unsigned char c, const char **end)
{
	bool neg = false, hit = false, first = true;

	p++;
	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	while (*p && (*p != ']' || first)) {
		unsigned char lo, hi;

		if (*p == '\\' && p[1])
			p++;
		lo = hi = (unsigned char)*p++;
		if (*p == '-' && p[1] && p[1] != ']') {
			p++;
			if (*p == '\\' && p[1])
				p++;
			hi = (unsigned char)*p++;
		}
		hit |= c >= lo && c <= hi;
		first = false;
	}
	if (*p != ']')
		return -1;
	*end = p + 1;
	return hit != neg;
}

static bool ref_gm(const char *p, const char *s)
{
	if (!*p)
		return !*s;
	if (p[0] == '*' && p[1] == '*') {
		while (*p == '*')
			p++;
		for (const char *t = s;; t++) {
			if (ref_gm(p, t))
				return true;
			if (!*t)
				return false;
		}
	}
	if (*p == '*') {
		for (const char *t = s;; t++) {
			if (ref_gm(p + 1, t))
				return true;
			if (!*t || *t == '/')
				return false;
		}
	}
	if (*p == '?')
		return *s && *s != '/' && ref_gm(p + 1, s + ref_u8len(s));
	if (*p == '[') {
		const char *e;
		int r;

		if (!*s || *s == '/')
			return false;
		r = ref_class(p, (unsigned char)*s, &e);
		return r > 0 && ref_gm(e, s + 1);
	}
	if (*p == '\\' && p[1])
		p++;
	return *p == *s && ref_gm(p + 1, s + 1);
}

static bool ref_match(const char *pat, const char *key)
{
	bool anchored = pat[0] == '/';

	if (anchored)
		return ref_gm(pat + 1, key);
	if (ref_gm(pat, key))
		return true;
	for (const char *t = strchr(key, '/'); t; t = strchr(t + 1, '/'))
		if (ref_gm(pat, t + 1))
			return true;
	return false;
}

/* Cheap enough for backtracking: few stars, a short key. */
static bool ref_cheap(const char *pat, const char *key)
{
	int stars = 0;

	for (const char *p = pat; *p; p++)
		stars += *p == '*';
	return stars <= 5 && strlen(key) <= 48 && strlen(pat) <= 64;
}

/* ---- the target ---- */

static char **split_lines(char *s, size_t *n)
{
	size_t cap = 8;
	char **v = malloc(cap * sizeof(*v));

	*n = 0;
	if (!v)
		abort();
	for (char *line = s; line;) {
		char *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (*n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				abort();
		}
		v[(*n)++] = line;
		line = nl ? nl + 1 : NULL;
	}
	return v;
}

static char *escaped(const char *key, const char *extra)
{
	size_t n = strlen(key);
	char *p = malloc(2 * n + strlen(extra) + 2), *w = p;

	if (!p)
		abort();
	*w++ = '/';
	for (size_t i = 0; i < n; i++) {
		*w++ = '\\';
		*w++ = key[i];
	}
	strcpy(w, extra);
	return p;
}

static void check_one_rule(const char *pat, char **keys, size_t nkeys)
{
	struct jo_sync_filter *inc, *exc;
	struct jo_err e1 = { 0 }, e2 = { 0 };
	int r1, r2;
	size_t pl = strlen(pat);
	bool braces = strchr(pat, '{') || strchr(pat, '}');
	char *full;

	if (jo_sync_filter_new(&inc) || jo_sync_filter_new(&exc))
		abort();
	r1 = jo_sync_filter_add(inc, '+', pat, &e1);
	r2 = jo_sync_filter_add(exc, '-', pat, &e2);
	FUZZ_CHECK(r1 == r2, "'+ %s' gives %d, '- %s' gives %d", pat, r1, pat, r2);
	full = malloc(pl + 3);
	if (!full)
		abort();
	memcpy(full, pat, pl + 1);
	if (pl && pat[pl - 1] == '/')
		strcat(full, "**");
	for (size_t k = 0; r1 == 0 && k < nkeys; k++) {
		bool in = jo_sync_filter_pass(inc, keys[k]);

		FUZZ_CHECK(in == !jo_sync_filter_pass(exc, keys[k]),
			   "'+ %s' and '- %s' agree on '%s'", pat, pat, keys[k]);
		if (!braces)
			FUZZ_CHECK(in == jo_sync_glob_match(full, keys[k]),
				   "rule '+ %s' and glob '%s' disagree on '%s'", pat, full, keys[k]);
	}
	free(full);
	jo_sync_filter_free(inc);
	jo_sync_filter_free(exc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *sep, *rules_text, *keys_text;
	char **keys, **rules;
	size_t nkeys = 0, nrules = 0;
	struct jo_sync_filter *f, *all;
	struct jo_err err = { 0 };
	FILE *fp;
	int rc;

	if (memchr(data, 0, size))
		return 0; /* keys and patterns are C strings */
	text = fuzz_strndup(data, size);
	sep = strstr(text, "\n--\n");
	rules_text = text;
	if (sep) {
		*sep = '\0';
		keys_text = sep + 4;
	} else {
		keys_text = text + size; /* no keys */
	}
	keys = split_lines(keys_text, &nkeys);

	/* the filter file as a whole */
	if (jo_sync_filter_new(&f) || jo_sync_filter_new(&all))
		abort();
	fp = fmemopen(rules_text, strlen(rules_text) ? strlen(rules_text) : 1, "r");
	if (!fp)
		abort();
	rc = jo_sync_filter_read(f, fp, "fuzz.filter", &err);
	fclose(fp);
	if (rc)
		FUZZ_CHECK(strstr(err.msg, "fuzz.filter") && strstr(err.msg, " line "),
			   "error without file and line: %s", err.msg);
	FUZZ_CHECK(jo_sync_filter_add(all, '+', "**", &err) == 0, "'+ **' refused");
	for (size_t k = 0; k < nkeys; k++) {
		(void)jo_sync_filter_pass(f, keys[k]);
		FUZZ_CHECK(jo_sync_filter_pass(all, keys[k]), "'+ **' stops '%s'", keys[k]);
	}
	jo_sync_filter_free(f);
	jo_sync_filter_free(all);

	/* each rule alone, and each pattern against the reference */
	rules = split_lines(rules_text, &nrules);
	for (size_t r = 0; r < nrules; r++) {
		const char *pat = rules[r];

		if ((pat[0] == '+' || pat[0] == '-') && pat[1] == ' ')
			pat += 2;
		if (!*pat)
			continue;
		check_one_rule(pat, keys, nkeys);
		for (size_t k = 0; k < nkeys; k++) {
			bool got = jo_sync_glob_match(pat, keys[k]);

			if (ref_cheap(pat, keys[k]))
				FUZZ_CHECK(got == ref_match(pat, keys[k]),
					   "glob '%s' on '%s': %d, reference %d", pat, keys[k], got,
					   !got);
		}
	}
	for (size_t k = 0; k < nkeys; k++) {
		char *self = escaped(keys[k], ""), *longer = escaped(keys[k], "x");

		FUZZ_CHECK(jo_sync_glob_match(self, keys[k]), "'%s' does not match '%s'", self,
			   keys[k]);
		FUZZ_CHECK(!jo_sync_glob_match(longer, keys[k]), "'%s' matches '%s'", longer,
			   keys[k]);
		free(self);
		free(longer);
	}
	free(rules);
	free(keys);
	free(text);
	return 0;
}
