/*
 * leakcheck: the id ranges of a cluster job, and which range every key
 * under NAME/chunks/ belongs to.
 *
 * A job cuts the slice ids into ranges [b[i], b[i+1]) at multiples of 1000
 * (b[0] = 0, the last one open: ids at or above the counter are in it). A
 * block key belongs to the range of its slice id. So must every other key
 * under chunks/ (foreign keys: a crashed writer's temp file, anything), each
 * to exactly one range, and each range must be able to list its own keys
 * without listing the others': the union of the ranges' listings is then
 * the one-host listing, and no key is counted twice. The rule:
 *
 *   plain layout (chunks/A/B/ID_I_S, A = id/10^6, B = id/1000): a leaf
 *     chunks/A/B/ (A, B canonical decimals, B/1000 = A) holds ids
 *     B*1000 .. B*1000+999, all in one range (cuts are multiples of 1000):
 *     everything under it is that range's. Anything else under a canonical
 *     chunks/A/ is the range of id A*10^6; anything else under chunks/ is
 *     range 0's.
 *   hash-prefix layout (chunks/HH/A/ID_I_S, HH = id%256 as two upper-case hex
 *     digits): under chunks/HH/A/ with A >= 1, every id has the same number
 *     of digits, so byte order is id order, and a cut at id b inside A's
 *     ids is the key chunks/HH/A/(b-1)` ('`' sorts right after '_'): keys up
 *     to it are the lower range's, keys past it the upper one's, block keys
 *     and others alike, and each range lists its window (after, upto].
 *     chunks/HH/0/ holds ids 0..999999, of 1 to 6 digits, which do not sort
 *     by id: each range that meets those ids lists the directory whole and
 *     keeps its own block keys; its other keys are range 0's. Anything else
 *     under chunks/ is range 0's.
 *
 * leak_range_of_key() is the rule; leak_range_prefix() is how a lister
 * (list.c) follows it prefix by prefix, and the unit tests hold the two
 * to each other.
 */
#include "leakcheck/leak.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/opt.h"

#define A_IDS 1000000u   /* ids per first-level directory */

size_t leak_range_find(const struct leak_ranges *r, uint64_t id)
{
	size_t lo = 0, hi = r->n;   /* the answer is in [lo, hi) */

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->b[mid] <= id)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Does [lo, hi] (inclusive) meet range i? */
static bool meets(const struct leak_ranges *r, size_t i, uint64_t lo, uint64_t hi)
{
	return lo < r->b[i + 1] && hi >= r->b[i];
}

/*
 * A canonical decimal ("0", or digits without a leading zero, no overflow)
 * of length len at s; *v its value.
 */
static bool dec_at(const char *s, size_t len, uint64_t *v)
{
	return !(len > 1 && s[0] == '0') && jo_parse_digits(s, len, v) == 0;
}

/* The first path component of s: its length, or -1 when s has no '/'. */
static long comp_len(const char *s)
{
	const char *e = strchr(s, '/');

	return e ? (long)(e - s) : -1;
}

/* A first-level directory A of ids A*10^6 .. A*10^6+999999 (no overflow). */
static bool a_dir(const char *s, long len, uint64_t *a)
{
	return len > 0 && dec_at(s, (size_t)len, a) && *a <= UINT64_MAX / A_IDS - 1;
}

static bool hex2_dir(const char *s, long len)
{
	for (long i = 0; len == 2 && i < 2; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	return len == 2;
}

/* The cut before id b inside a hash directory's A: "(b-1)`" (written into buf). */
static void cut_key(char *buf, size_t cap, uint64_t b)
{
	snprintf(buf, cap, "%" PRIu64 "`", b - 1);
}

/* Hash layout, rest (after "HH/A/") of a key under a canonical A >= 1. */
static size_t hash_window(const struct leak_ranges *r, uint64_t a, const char *rest)
{
	uint64_t lo = a * A_IDS, hi = lo + A_IDS - 1;
	size_t i = leak_range_find(r, lo);
	char cut[32];

	/* one more range for every cut inside A's ids the key sorts past */
	while (i + 1 < r->n && r->b[i + 1] <= hi) {
		cut_key(cut, sizeof(cut), r->b[i + 1]);
		if (strcmp(rest, cut) <= 0)
			break;
		i++;
	}
	return i;
}

size_t leak_range_of_key(const struct leak_ranges *r, const char *volname, bool hash_prefix,
			 const char *key)
{
	char canon[1200];
	size_t rl = strlen(volname);
	uint64_t id, a, b;
	uint32_t indx, bsize;
	const char *rel;
	long l1, l2;

	if (jo_block_parse(key, &id, &indx, &bsize) == 0 &&
	    jo_block_key(canon, sizeof(canon), volname, hash_prefix, id, indx, bsize) >= 0 &&
	    strcmp(canon, key) == 0)
		return leak_range_find(r, id);
	if (strncmp(key, volname, rl) != 0 || strncmp(key + rl, "/chunks/", 8) != 0)
		return 0;
	rel = key + rl + 8;
	l1 = comp_len(rel);
	if (hash_prefix) {
		if (!hex2_dir(rel, l1))
			return 0;
		l2 = comp_len(rel + l1 + 1);
		if (!a_dir(rel + l1 + 1, l2, &a) || a == 0)
			return 0;
		return hash_window(r, a, rel + l1 + 1 + l2 + 1);
	}
	if (!a_dir(rel, l1, &a))
		return 0;
	l2 = comp_len(rel + l1 + 1);
	if (l2 > 0 && dec_at(rel + l1 + 1, (size_t)l2, &b) && b / 1000 == a)
		return leak_range_find(r, b * 1000);
	return leak_range_find(r, a * A_IDS);
}

/* *out = prefix + s (malloc'd). */
static int join(char **out, const char *prefix, const char *s)
{
	size_t pl = strlen(prefix), sl = strlen(s);

	*out = malloc(pl + sl + 1);
	if (!*out)
		return JO_ENOMEM;
	memcpy(*out, prefix, pl);
	memcpy(*out + pl, s, sl + 1);
	return 0;
}

int leak_range_prefix(const struct leak_ranges *r, size_t ri, bool hash_prefix,
		      const char *prefix, size_t root_len, int depth, int *how, char **after,
		      char **upto)
{
	const char *rel = prefix + root_len;
	long l1 = comp_len(rel), l2;
	uint64_t a, b;
	char cut[32];

	*after = *upto = NULL;
	*how = LEAK_PFX_SKIP;
	if (depth == 1) {
		if (hash_prefix ? hex2_dir(rel, l1) : a_dir(rel, l1, &a)) {
			/* a layout directory: each range looks into it for its own part */
			if (hash_prefix || meets(r, ri, a * A_IDS, a * A_IDS + A_IDS - 1))
				*how = LEAK_PFX_LIST;
		} else if (ri == 0) {
			*how = LEAK_PFX_WHOLE;
		}
		return 0;
	}
	if (depth != 2 || l1 < 0)
		return 0;
	l2 = comp_len(rel + l1 + 1);
	if (!hash_prefix) {
		/* under a canonical chunks/A/ (depth 1 said so) */
		if (!a_dir(rel, l1, &a))
			return 0;
		if (l2 > 0 && dec_at(rel + l1 + 1, (size_t)l2, &b) && b / 1000 == a) {
			if (leak_range_find(r, b * 1000) == ri)
				*how = LEAK_PFX_LIST;
		} else if (leak_range_find(r, a * A_IDS) == ri) {
			*how = LEAK_PFX_WHOLE;
		}
		return 0;
	}
	if (!a_dir(rel + l1 + 1, l2, &a)) {
		if (ri == 0)
			*how = LEAK_PFX_WHOLE;
		return 0;
	}
	if (!meets(r, ri, a * A_IDS, a * A_IDS + A_IDS - 1))
		return 0;
	if (a == 0) {
		*how = LEAK_PFX_FILTER;
		return 0;
	}
	*how = LEAK_PFX_LIST;
	if (r->b[ri] > a * A_IDS) {
		cut_key(cut, sizeof(cut), r->b[ri]);
		if (join(after, prefix, cut))
			return JO_ENOMEM;
	}
	if (r->b[ri + 1] <= a * A_IDS + A_IDS - 1) {
		cut_key(cut, sizeof(cut), r->b[ri + 1]);
		if (join(upto, prefix, cut)) {
			free(*after);
			*after = NULL;
			return JO_ENOMEM;
		}
	}
	return 0;
}

uint64_t leak_range_step(const struct leak_density *d)
{
	return d && d->n && d->width > 1000 ? (d->width + 999) / 1000 * 1000 : 1000;
}

int leak_range_cut(const struct leak_density *d, uint64_t next_chunk, size_t want,
		   bool hash_prefix, struct leak_ranges *out)
{
	/*
	 * Hash-prefix layout: no cut below 10^6, whose ids share one directory
	 * per hash that does not sort by id (each range meeting them would
	 * list them all); a cut there would only multiply the listing.
	 */
	uint64_t min_cut = hash_prefix ? A_IDS : 1000;
	/* ids [0, top) are cut; the last range runs on past the counter */
	uint64_t top = (next_chunk + 999) / 1000 * 1000;
	size_t cap = want ? want : 1;
	double total = d && d->n ? leak_density_est(d, 0, top ? top - 1 : 0) : 0;
	uint64_t step, prev = 0;
	double acc = 0;

	out->n = 0;
	out->b = malloc((cap + 1) * sizeof(*out->b));
	if (!out->b)
		return JO_ENOMEM;
	out->b[0] = 0;
	out->n = 1;
	if (top / 1000 < cap)
		cap = (size_t)(top / 1000) ? (size_t)(top / 1000) : 1;
	/* big volumes: walk in steps of the density buckets (rounded to 1000) */
	step = leak_range_step(d);
	for (uint64_t x = 0; x < top && out->n < cap; x += step) {
		uint64_t end = x + step > top ? top : x + step;
		/* nothing referenced: ids count instead (leaked objects have ids too) */
		double w = total > 0 ? leak_density_est(d, x, end - 1) : (double)(end - x);
		double goal = (total > 0 ? total : (double)top) * (double)out->n / (double)cap;

		acc += w;
		if (acc >= goal && end < top && end > prev && end >= min_cut) {
			out->b[out->n++] = end;
			prev = end;
		}
	}
	out->b[out->n] = UINT64_MAX;
	return 0;
}

void leak_ranges_free(struct leak_ranges *r)
{
	free(r->b);
	r->b = NULL;
	r->n = 0;
}
