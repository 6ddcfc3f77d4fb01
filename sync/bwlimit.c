/*
 * bwlimit.c: one token bucket shared by every transfer of a run (--bwlimit,
 * bytes per second). Burst: one second's worth.
 */
#include "sync/sync.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct jo_sync_bw {
	pthread_mutex_t mu;
	double rate;       /* bytes per second */
	double tokens;
	double last;       /* monotonic seconds */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct jo_sync_bw *jo_sync_bw_new(uint64_t bytes_per_sec)
{
	if (!bytes_per_sec)
		return NULL;
	struct jo_sync_bw *b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	pthread_mutex_init(&b->mu, NULL);
	b->rate = (double)bytes_per_sec;
	b->tokens = 0;
	b->last = now_s();
	return b;
}

void jo_sync_bw_free(struct jo_sync_bw *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->mu);
	free(b);
}

void jo_sync_bw_take(struct jo_sync_bw *b, size_t n)
{
	if (!b || !n)
		return;
	pthread_mutex_lock(&b->mu);
	double t = now_s();
	b->tokens += (t - b->last) * b->rate;
	if (b->tokens > b->rate)
		b->tokens = b->rate;
	b->last = t;
	b->tokens -= (double)n;   /* may go negative: the debt is waited out below */
	double wait = b->tokens < 0 ? -b->tokens / b->rate : 0;
	pthread_mutex_unlock(&b->mu);
	if (wait > 0) {
		struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
		nanosleep(&ts, NULL);
	}
}
