/*
 * leakcheck: where the referenced blocks are, by slice id, so that the
 * object listing can be cut into key ranges of about equal length before it
 * starts (list.c), instead of finding long ranges while it runs.
 *
 * A fixed array of counters over [0, next_chunk): ids per bucket grow with
 * the volume, memory does not. Estimates only: a wrong one costs balance,
 * never a key (the ranges partition the key space whatever they are).
 */
#include "leakcheck/leak.h"

#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int leak_density_init(struct leak_density *d, uint64_t next_chunk, uint32_t block_size)
{
	memset(d, 0, sizeof(*d));
	d->block_size = block_size ? block_size : 1;
	d->width = next_chunk / LEAK_DENSITY_BUCKETS + 1;
	d->n = calloc(LEAK_DENSITY_BUCKETS, sizeof(*d->n));
	return d->n ? 0 : JO_ENOMEM;
}

void leak_density_add(struct leak_density *d, uint64_t id, uint64_t size)
{
	uint64_t b = id / d->width, blocks = (size + d->block_size - 1) / d->block_size;

	if (!d->n)
		return;
	if (b >= LEAK_DENSITY_BUCKETS)
		b = LEAK_DENSITY_BUCKETS - 1;
	d->n[b] += blocks;
	d->total += blocks;
}

double leak_density_est(const struct leak_density *d, uint64_t lo, uint64_t hi)
{
	double e = 0;

	if (!d->n || hi < lo)
		return 0;
	for (uint64_t b = lo / d->width; b <= hi / d->width && b < LEAK_DENSITY_BUCKETS; b++) {
		uint64_t b0 = b * d->width, b1 = b0 + d->width - 1;
		uint64_t from = lo > b0 ? lo : b0, to = hi < b1 ? hi : b1;

		e += (double)d->n[b] * (double)(to - from + 1) / (double)d->width;
	}
	return e;
}

void leak_density_free(struct leak_density *d)
{
	free(d->n);
	d->n = NULL;
}
