/*
 * filter.c: include/exclude rules in the style of rclone.
 *
 * Semantics (also printed by `jfsops sync --help`):
 *   - Patterns match the key relative to the side's prefix ("a/b/c.txt").
 *   - `*` matches any run of characters except `/`; `**` matches anything
 *     including `/`; `?` one character except `/`; `[abc]`, `[a-z]`, `[!a]`
 *     one character from a class; `{x,y}` alternatives; `\` escapes.
 *   - A pattern starting with `/` is anchored at the start of the key;
 *     otherwise it matches the whole key or any tail of it that starts right
 *     after a `/` ("*.jpg" matches "a/b.jpg"; "b/c.jpg" matches "a/b/c.jpg").
 *   - A pattern ending in `/` matches everything under that directory.
 *   - Rules are tried in command-line order (--filter-from files expand in
 *     place); the first rule that matches decides. When no rule matches, the
 *     key is included unless some include rule exists (then it is excluded,
 *     like rclone's implied trailing "- **").
 * Difference from rclone: rclone groups rules by flag type; we keep the order
 * in which they were given.
 */
#include "sync/sync.h"

#include "common/dynbuf.h"
#include "common/err.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rule {
	char kind;          /* '+' or '-' */
	bool anchored;
	char **pats;        /* brace-expanded alternatives */
	size_t npats;
};

struct jo_sync_filter {
	struct rule *rules;
	size_t n, cap;
	bool any_include;
};

int jo_sync_filter_new(struct jo_sync_filter **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : JO_ENOMEM;
}

static void rule_free(struct rule *r)
{
	for (size_t i = 0; i < r->npats; i++)
		free(r->pats[i]);
	free(r->pats);
}

void jo_sync_filter_free(struct jo_sync_filter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		rule_free(&f->rules[i]);
	free(f->rules);
	free(f);
}

/* ---- glob ---------------------------------------------------------------- */

static size_t utf8_len(const char *s)
{
	unsigned char c = (unsigned char)*s;
	size_t n = 1;
	if (c >= 0xc0) {
		while (n < 4 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n++;
	}
	return n;
}

/* Match one character class at *pp against byte c; advances *pp past ']'. */
static int class_match(const char **pp, unsigned char c)
{
	const char *p = *pp + 1;
	bool neg = false, hit = false;
	if (*p == '!' || *p == '^') {
		neg = true;
		p++;
	}
	bool first = true;
	while (*p && (*p != ']' || first)) {
		unsigned char lo = (unsigned char)*p, hi;
		if (*p == '\\' && p[1])
			lo = (unsigned char)*++p;
		p++;
		hi = lo;
		if (*p == '-' && p[1] && p[1] != ']') {
			p++;
			if (*p == '\\' && p[1])
				p++;
			hi = (unsigned char)*p++;
		}
		if (c >= lo && c <= hi)
			hit = true;
		first = false;
	}
	if (*p != ']')
		return -1; /* unterminated */
	*pp = p + 1;
	return hit != neg;
}

/*
 * The pattern is run as a set of positions in it (an NFA over the key's
 * bytes), so the time is at most key length x pattern length, whatever the
 * number of stars: a backtracking matcher takes exponential time on
 * patterns like "*a*a*a*a*b" against a long run of 'a'. A position is the
 * offset of a token in the pattern; positions are kept as bit sets, one per
 * key byte offset for the next 5 offsets ('?' takes one UTF-8 character, up
 * to 4 bytes).
 */
enum tok_kind { TK_END, TK_LIT, TK_ANY, TK_CLASS, TK_STAR, TK_DSTAR };

/* The token at p: its kind, its length and (TK_LIT) its byte. An
 * unterminated class has length 0: nothing gets past it. */
static enum tok_kind tok_at(const char *p, size_t *len, unsigned char *lit)
{
	if (!*p) {
		*len = 0;
		return TK_END;
	}
	if (p[0] == '*' && p[1] == '*') {
		size_t n = 0;

		while (p[n] == '*')
			n++;
		*len = n;
		return TK_DSTAR;
	}
	if (*p == '*' || *p == '?') {
		*len = 1;
		return *p == '*' ? TK_STAR : TK_ANY;
	}
	if (*p == '[') {
		const char *t = p;

		*len = class_match(&t, 0) < 0 ? 0 : (size_t)(t - p);
		return TK_CLASS;
	}
	if (*p == '\\' && p[1]) {
		*lit = (unsigned char)p[1];
		*len = 2;
		return TK_LIT;
	}
	*lit = (unsigned char)*p;
	*len = 1;
	return TK_LIT;
}

#define GLOB_ROWS 5
#define GLOB_STACK_WORDS 65 /* patterns up to 4159 bytes without malloc */

static void bset(uint64_t *row, size_t q)
{
	row[q / 64] |= (uint64_t)1 << (q % 64);
}

/* Anchored or tail match of one expanded pattern. */
static bool pat_match(const char *pat, bool anchored, const char *key)
{
	size_t plen = strlen(pat), klen = strlen(key);
	size_t nw = plen / 64 + 1;
	uint64_t stack[GLOB_ROWS * GLOB_STACK_WORDS], *rows = stack;
	bool hit = false;

	if (nw > GLOB_STACK_WORDS) {
		rows = calloc(GLOB_ROWS * nw, sizeof(*rows));
		if (!rows)
			return false;
	} else {
		memset(stack, 0, GLOB_ROWS * nw * sizeof(*rows));
	}
	for (size_t i = 0; i <= klen && !hit; i++) {
		uint64_t *cur = rows + (i % GLOB_ROWS) * nw;
		uint64_t *next = rows + ((i + 1) % GLOB_ROWS) * nw;
		unsigned char c = (unsigned char)key[i];

		/* every tail right after a '/' starts the pattern afresh */
		if (i == 0 || (!anchored && key[i - 1] == '/'))
			bset(cur, 0);
		/* ascending: a star's "skip me" sets a later bit of this row */
		for (size_t w = 0; w < nw && !hit; w++) {
			uint64_t seen = 0, bits;

			while (!hit && (bits = cur[w] & ~seen) != 0) {
				size_t q = w * 64 + (size_t)__builtin_ctzll(bits), len;
				unsigned char lit = 0;
				const char *t = pat + q;

				seen |= (uint64_t)1 << (q % 64);
				switch (tok_at(pat + q, &len, &lit)) {
				case TK_END:
					hit = i == klen;
					break;
				case TK_STAR:
					bset(cur, q + len);
					if (c && c != '/')
						bset(next, q);
					break;
				case TK_DSTAR:
					bset(cur, q + len);
					if (c)
						bset(next, q);
					break;
				case TK_ANY:
					if (c && c != '/')
						bset(rows + ((i + utf8_len(key + i)) % GLOB_ROWS) * nw,
						     q + len);
					break;
				case TK_CLASS:
					if (len && c && c != '/' && class_match(&t, c) > 0)
						bset(next, q + len);
					break;
				case TK_LIT:
					if (c == lit)
						bset(next, q + len);
					break;
				}
			}
		}
		memset(cur, 0, nw * sizeof(*cur));
	}
	if (rows != stack)
		free(rows);
	return hit;
}

bool jo_sync_glob_match(const char *pattern, const char *rel_key)
{
	bool anchored = pattern[0] == '/';
	return pat_match(anchored ? pattern + 1 : pattern, anchored, rel_key);
}

/* ---- brace expansion ----------------------------------------------------- */

#define MAX_ALTS 1024
/* Longer patterns are refused (brace nesting recurses once per group). */
#define MAX_PATTERN 4096

static int push_pat(struct rule *r, char *s)
{
	if (r->npats >= MAX_ALTS) {
		free(s);
		return JO_EINVAL;
	}
	char **np = realloc(r->pats, (r->npats + 1) * sizeof(*np));
	if (!np) {
		free(s);
		return JO_ENOMEM;
	}
	r->pats = np;
	r->pats[r->npats++] = s;
	return 0;
}

static int expand(struct rule *r, const char *pat)
{
	const char *open = NULL;
	for (const char *p = pat; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p == '{') {
			open = p;
			break;
		}
	}
	if (!open) {
		char *d = strdup(pat);
		return d ? push_pat(r, d) : JO_ENOMEM;
	}
	/* Find the matching close brace and the top-level commas. */
	int depth = 0;
	const char *close = NULL;
	for (const char *p = open; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p == '{')
			depth++;
		else if (*p == '}' && --depth == 0) {
			close = p;
			break;
		}
	}
	if (!close)
		return JO_EINVAL;
	size_t pre = (size_t)(open - pat), post = strlen(close + 1);
	const char *a = open + 1;
	depth = 0;
	for (const char *p = open + 1; p <= close; p++) {
		if (*p == '\\' && p[1] && p < close) {
			p++;
			continue;
		}
		if (*p == '{')
			depth++;
		else if (*p == '}' && p != close)
			depth--;
		if ((*p == ',' && depth == 0) || p == close) {
			size_t alen = (size_t)(p - a);
			char *s = malloc(pre + alen + post + 1);
			if (!s)
				return JO_ENOMEM;
			memcpy(s, pat, pre);
			memcpy(s + pre, a, alen);
			memcpy(s + pre + alen, close + 1, post + 1);
			int rc = expand(r, s);
			free(s);
			if (rc)
				return rc;
			a = p + 1;
		}
	}
	return 0;
}

int jo_sync_filter_add(struct jo_sync_filter *f, char kind, const char *pattern,
		       struct jo_err *err)
{
	if ((kind != '+' && kind != '-') || !pattern || !*pattern)
		return jo_err_set(err, JO_EINVAL, "empty filter pattern");
	struct rule r = { .kind = kind };
	const char *p = pattern;
	if (strlen(pattern) > MAX_PATTERN)
		return jo_err_set(err, JO_EINVAL, "filter pattern \"%.32s...\": longer than %d bytes",
				  pattern, MAX_PATTERN);
	if (*p == '/') {
		r.anchored = true;
		p++;
	}
	size_t n = strlen(p);
	char *pat = malloc(n + 3);
	if (!pat)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	memcpy(pat, p, n + 1);
	/* "dir/" is everything under dir; "/" alone everything under the root */
	if ((n > 0 && pat[n - 1] == '/') || (n == 0 && r.anchored))
		memcpy(pat + n, "**", 3);
	/* Check classes are terminated. */
	for (const char *q = pat; *q; q++) {
		if (*q == '\\' && q[1]) {
			q++;
			continue;
		}
		if (*q == '[') {
			const char *t = q;
			if (class_match(&t, 0) < 0) {
				free(pat);
				return jo_err_set(err, JO_EINVAL, "filter pattern \"%s\": unterminated [",
						  pattern);
			}
			q = t - 1;
		}
	}
	int rc = expand(&r, pat);
	free(pat);
	if (rc) {
		rule_free(&r);
		return jo_err_set(err, rc, "filter pattern \"%s\": %s", pattern,
				  rc == JO_ENOMEM ? "out of memory" : "bad or too many {} alternatives");
	}
	if (jo_grow_array(&f->rules, &f->cap, f->n + 1, sizeof(*f->rules))) {
		rule_free(&r);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	f->rules[f->n++] = r;
	if (kind == '+')
		f->any_include = true;
	return 0;
}

int jo_sync_filter_read(struct jo_sync_filter *f, FILE *fp, const char *name, struct jo_err *err)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rc = 0;
	while ((len = getline(&line, &cap, fp)) >= 0) {
		lineno++;
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (s[0] == '!' && !s[1]) {
			for (size_t i = 0; i < f->n; i++)
				rule_free(&f->rules[i]);
			f->n = 0;
			f->any_include = false;
			continue;
		}
		if ((s[0] != '+' && s[0] != '-') || s[1] != ' ' || !s[2]) {
			rc = jo_err_set(err, JO_EINVAL,
					"filter file \"%s\" line %d: expected \"+ PATTERN\" or \"- PATTERN\"",
					name, lineno);
			break;
		}
		rc = jo_sync_filter_add(f, s[0], s + 2, err);
		if (rc) {
			jo_err_wrap(err, "filter file \"%s\" line %d", name, lineno);
			break;
		}
	}
	if (!rc && ferror(fp))
		rc = jo_err_set(err, JO_EIO, "filter file \"%s\": read error", name);
	free(line);
	return rc;
}

int jo_sync_filter_load(struct jo_sync_filter *f, const char *path, struct jo_err *err)
{
	FILE *fp = fopen(path, "r");
	int rc;

	if (!fp)
		return jo_err_set(err, JO_EINVAL, "filter file \"%s\": %s", path, strerror(errno));
	rc = jo_sync_filter_read(f, fp, path, err);
	fclose(fp);
	return rc;
}

bool jo_sync_filter_pass(const struct jo_sync_filter *f, const char *rel_key)
{
	if (!f)
		return true;
	for (size_t i = 0; i < f->n; i++) {
		const struct rule *r = &f->rules[i];
		for (size_t j = 0; j < r->npats; j++)
			if (pat_match(r->pats[j], r->anchored, rel_key))
				return r->kind == '+';
	}
	return !f->any_include;
}

void jo_sync_filter_fingerprint(const struct jo_sync_filter *f, char out[65])
{
	unsigned char d[32];
	unsigned int dl = 32;
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	memset(d, 0, sizeof(d));
	if (c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1) {
		for (size_t i = 0; f && i < f->n; i++) {
			const struct rule *r = &f->rules[i];
			char head[3] = { r->kind, r->anchored ? '^' : ' ', '\n' };

			EVP_DigestUpdate(c, head, sizeof(head));
			for (size_t k = 0; k < r->npats; k++)
				EVP_DigestUpdate(c, r->pats[k], strlen(r->pats[k]) + 1);
		}
		EVP_DigestFinal_ex(c, d, &dl);
	}
	EVP_MD_CTX_free(c);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}
