/* obj_util.c: URL/XML coding and time parsing for the backends. */
#include "common/object/object_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/pct.h"
#include "common/utc.h"

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

int jo_obj_uri_encode(struct jo_dynbuf *b, const char *s, bool keep_slash)
{
	static const char digits[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (unreserved(*p) || (keep_slash && *p == '/')) {
			jo_dynbuf_add(b, p, 1);
		} else {
			char e[3] = { '%', digits[*p >> 4], digits[*p & 15] };

			jo_dynbuf_add(b, e, 3);
		}
	}
	return b->failed ? JO_ENOMEM : 0;
}

char *jo_obj_url_decode(const char *s, bool plus_space)
{
	return jo_pct_decode(s, strlen(s), plus_space ? JO_PCT_PLUS_SPACE : 0);
}

int jo_obj_xml_escape(struct jo_dynbuf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': jo_dynbuf_adds(b, "&amp;"); break;
		case '<': jo_dynbuf_adds(b, "&lt;"); break;
		case '>': jo_dynbuf_adds(b, "&gt;"); break;
		case '"': jo_dynbuf_adds(b, "&quot;"); break;
		case '\'': jo_dynbuf_adds(b, "&apos;"); break;
		case '\r': jo_dynbuf_adds(b, "&#13;"); break;
		default: jo_dynbuf_add(b, s, 1); break;
		}
	}
	return b->failed ? JO_ENOMEM : 0;
}

int jo_obj_parse_iso8601(const char *s, int64_t *sec, int32_t *nsec)
{
	int y, mo, d, h, mi, se;
	int32_t ns = 0;
	const char *p;

	if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
	    s[16] != ':')
		return -1;
	if (jo_utc_digits(s, 4, &y) || jo_utc_digits(s + 5, 2, &mo) ||
	    jo_utc_digits(s + 8, 2, &d) || jo_utc_digits(s + 11, 2, &h) ||
	    jo_utc_digits(s + 14, 2, &mi) || jo_utc_digits(s + 17, 2, &se))
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -1;
	p = s + 19;
	if (*p == '.') {
		int32_t scale = 100000000;

		p++;
		if (*p < '0' || *p > '9')
			return -1;
		for (; *p >= '0' && *p <= '9'; p++) {
			ns += (int32_t)(*p - '0') * scale;
			scale /= 10;
		}
	}
	if (strcmp(p, "Z") != 0)
		return -1;
	*sec = jo_utc_seconds(y, mo, d, h, mi, se);
	*nsec = ns;
	return 0;
}

/* ---- cutting a key range into pieces (parallel listings) ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* after[0..len) + c, malloc'd. */
static char *stem_plus(const char *after, size_t len, unsigned char c)
{
	char *k = malloc(len + 2);

	if (!k)
		return NULL;
	memcpy(k, after, len);
	k[len] = (char)c;
	k[len + 1] = '\0';
	return k;
}

int jo_obj_key_split(const char *prefix, const char *after, const char *upto,
		     const bool alphabet[256], int n, char ***out)
{
	size_t plen = strlen(prefix), alen = strlen(after), p = 0;
	char **cand = NULL;
	size_t nc = 0, cap = 0;
	int k = 0;

	*out = NULL;
	if (n < 2 || strncmp(after, prefix, plen) != 0 ||
	    (upto && (strncmp(upto, prefix, plen) != 0 || strcmp(after, upto) >= 0)))
		return 0;
	/* where after and upto part (upto NULL: the end of the prefix) */
	if (upto)
		while (after[p] && after[p] == upto[p])
			p++;
	else
		p = plen;
	if (p < plen)
		return 0;
	/*
	 * Split keys, shallowest first: at depth p the branches between after's
	 * and upto's byte, then deeper and deeper into after's own branch,
	 * until there are enough. Each is > after and < upto.
	 */
	for (size_t d = p; d <= alen && nc < (size_t)(n - 1); d++) {
		unsigned char from = (unsigned char)after[d];  /* 0 past its end */

		for (int c = from + 1; c < 256; c++) {
			char *key;

			if (!alphabet[c])
				continue;
			if (d == p && upto) {
				unsigned char u = (unsigned char)upto[p];

				if (c > u || (c == u && upto[p + 1] == '\0'))
					break;
			}
			key = stem_plus(after, d, (unsigned char)c);
			if (!key)
				goto fail;
			if (jo_grow_array(&cand, &cap, nc + 1, sizeof(*cand))) {
				free(key);
				goto fail;
			}
			cand[nc++] = key;
		}
	}
	if (nc == 0) {
		free(cand);
		return 0;
	}
	qsort(cand, nc, sizeof(*cand), cmp_str);
	if (nc > (size_t)(n - 1)) {
		/* n - 1 of them, evenly spread */
		char **pick = calloc((size_t)n - 1, sizeof(*pick));

		if (!pick)
			goto fail;
		for (int i = 0; i < n - 1; i++) {
			size_t j = (size_t)(((uint64_t)(i + 1) * nc) / (uint64_t)n);

			pick[i] = cand[j];
			cand[j] = NULL;
		}
		for (size_t j = 0; j < nc; j++)
			free(cand[j]);
		free(cand);
		cand = pick;
		nc = (size_t)n - 1;
	}
	k = (int)nc;
	*out = cand;
	return k;
fail:
	for (size_t j = 0; j < nc; j++)
		free(cand[j]);
	free(cand);
	return JO_ENOMEM;
}

void jo_obj_key_alphabet_add(bool alphabet[256], const char *s)
{
	for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
		unsigned char c = *q;

		if (alphabet[c])
			continue;
		alphabet[c] = true;
		/* a digit, a lower or an upper case letter stands for its whole class */
		if (c >= '0' && c <= '9')
			for (int x = '0'; x <= '9'; x++)
				alphabet[x] = true;
		else if (c >= 'a' && c <= 'z')
			for (int x = 'a'; x <= 'z'; x++)
				alphabet[x] = true;
		else if (c >= 'A' && c <= 'Z')
			for (int x = 'A'; x <= 'Z'; x++)
				alphabet[x] = true;
	}
}

int jo_obj_sub_init(struct jo_obj_sub *b, size_t cap, struct jo_err *err)
{
	b->keys = malloc(cap * sizeof(*b->keys));
	b->idx = malloc(cap * sizeof(*b->idx));
	b->res = malloc(cap * sizeof(*b->res));
	b->n = 0;
	if (!b->keys || !b->idx || !b->res)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

void jo_obj_sub_add(struct jo_obj_sub *b, const char *key, size_t idx)
{
	b->keys[b->n] = key;
	b->idx[b->n] = idx;
	b->res[b->n] = 0;
	b->n++;
}

void jo_obj_sub_done(struct jo_obj_sub *b, int rc, int *results)
{
	for (size_t j = 0; j < b->n; j++)
		results[b->idx[j]] = rc ? rc : b->res[j];
	b->n = 0;
}

void jo_obj_sub_release(struct jo_obj_sub *b)
{
	free(b->keys);
	free(b->idx);
	free(b->res);
	memset(b, 0, sizeof(*b));
}
