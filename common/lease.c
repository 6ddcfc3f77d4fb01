/* lease.c: the lease keeper (claim, renewal thread, release/complete). */
#include "common/lease.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/cluster.h"
#include "common/err.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"

struct jo_lease {
	struct jo_meta *rm;      /* the renewal thread's own connection */
	char ns[32];
	char owner[128];
	int64_t lease_ms;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thr;
	bool thr_started;
	bool stop;
	bool held;               /* a task is claimed */
	bool lost;               /* a renewal was refused */
	uint64_t gen;            /* bumped per claim: stale renewals are ignored */
	int64_t task_id;
	int64_t deadline;        /* monotonic ms until which the lease is surely ours */
	int64_t next_renew;      /* monotonic ms of the next renewal */
	uint64_t renewals, nlost;
};

int64_t jo_lease_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The part of a lease we trust: 80%, so clock-rate drift and the time the
 * claim request took cannot make us mutate past the real expiry. */
static int64_t trusted(int64_t lease_ms)
{
	return lease_ms - lease_ms / 5;
}

static void *keeper(void *arg)
{
	struct jo_lease *l = arg;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		int64_t now = jo_lease_mono_ms();

		if (l->held && !l->lost && now >= l->next_renew) {
			uint64_t gen = l->gen;
			int64_t id = l->task_id, t0 = now;
			struct jo_err err = { 0 };
			int rc;

			pthread_mutex_unlock(&l->mu);
			rc = jo_mut_task_renew(l->rm, l->ns, id, l->owner, l->lease_ms, NULL, &err);
			pthread_mutex_lock(&l->mu);
			if (gen == l->gen && l->held) {
				if (rc == 0) {
					l->deadline = t0 + trusted(l->lease_ms);
					l->next_renew = t0 + l->lease_ms / 3;
					l->renewals++;
				} else if (rc == JO_ECONFLICT) {
					l->lost = true;
					l->nlost++;
					jo_warn("lease on task %lld lost: %s", (long long)id, err.msg);
				} else {
					/* transient: retry soon; the deadline runs out on its own */
					jo_warn("renewing lease on task %lld: %s", (long long)id, err.msg);
					l->next_renew = jo_lease_mono_ms() + 1000;
				}
			}
			continue;
		}
		{
			struct timespec ts;
			int64_t wait = l->held ? l->next_renew - now : 1000;

			if (wait < 10)
				wait = 10;
			if (wait > 1000)
				wait = 1000;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += wait / 1000;
			ts.tv_nsec += (wait % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&l->cv, &l->mu, &ts);
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int jo_lease_new(struct jo_lease **out, struct jo_meta *m, const struct jo_lease_opts *opts,
		 struct jo_err *err)
{
	struct jo_lease *l;
	int rc;

	*out = NULL;
	if (!opts || !opts->ns || !opts->owner)
		return jo_err_set(err, JO_EINVAL, "lease: namespace and owner are required");
	l = calloc(1, sizeof(*l));
	if (!l)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	snprintf(l->ns, sizeof(l->ns), "%s", opts->ns);
	snprintf(l->owner, sizeof(l->owner), "%s", opts->owner);
	l->lease_ms = opts->lease_ms > 0 ? opts->lease_ms : 60000;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	rc = jo_meta_dup(m, &l->rm, err);
	if (rc) {
		jo_lease_free(l);
		return jo_err_wrap(err, "lease keeper connection");
	}
	/* signals go to the main thread only */
	rc = jo_thread_start(&l->thr, keeper, l);
	if (rc) {
		jo_lease_free(l);
		return jo_err_set(err, JO_ENOMEM, "lease: cannot start renewal thread: %s",
				  strerror(rc));
	}
	l->thr_started = true;
	*out = l;
	return 0;
}

void jo_lease_free(struct jo_lease *l)
{
	if (!l)
		return;
	if (l->thr_started) {
		pthread_mutex_lock(&l->mu);
		l->stop = true;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thr, NULL);
	}
	jo_meta_close(l->rm);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

int jo_lease_claim(struct jo_lease *l, struct jo_meta *m, struct jo_mut_task *out,
		   struct jo_err *err)
{
	int64_t t0;
	int rc;

	pthread_mutex_lock(&l->mu);
	if (l->held) {
		pthread_mutex_unlock(&l->mu);
		return jo_err_set(err, JO_EINVAL, "lease: a task is still held");
	}
	pthread_mutex_unlock(&l->mu);
	t0 = jo_lease_mono_ms();
	rc = jo_mut_task_claim(m, l->ns, l->owner, l->lease_ms, out, err);
	if (rc)
		return rc;
	pthread_mutex_lock(&l->mu);
	l->held = true;
	l->lost = false;
	l->gen++;
	l->task_id = out->id;
	l->deadline = t0 + trusted(l->lease_ms);
	l->next_renew = t0 + l->lease_ms / 3;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

int jo_lease_claim_wait(struct jo_lease *l, struct jo_meta *m, struct jo_mut_task *out,
			struct jo_err *err)
{
	/* a lease's twentieth, within [50, 250] ms: the last workers end soon
	 * after the last task is done, a dead worker's task is taken soon after
	 * its lease runs out, and the waiting costs two requests a pause */
	int64_t pause = l->lease_ms / 20 < 50 ? 50 : l->lease_ms / 20 > 250 ? 250 : l->lease_ms / 20;
	bool said = false;

	for (;;) {
		int64_t total = 0, leased = 0;
		int rc = jo_lease_claim(l, m, out, err);

		if (rc != JO_ENOTFOUND)
			return rc;
		jo_err_clear(err);
		if ((rc = jo_mut_task_count(m, l->ns, &total, &leased, err)) != 0)
			return rc;
		if (total == 0)
			return jo_err_set(err, JO_ENOTFOUND, "no task left");
		if (!said) {
			jo_info("%s: %lld task%s leased by other workers: waiting until they are "
				"done or their lease runs out", l->ns, (long long)total,
				total == 1 ? "" : "s");
			said = true;
		}
		jo_cl_sleep_ms(pause);
		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "interrupted");
	}
}

bool jo_lease_valid(struct jo_lease *l)
{
	bool ok;

	pthread_mutex_lock(&l->mu);
	ok = l->held && !l->lost && jo_lease_mono_ms() < l->deadline;
	pthread_mutex_unlock(&l->mu);
	return ok;
}

int jo_lease_renew_now(struct jo_lease *l, struct jo_err *err)
{
	pthread_mutex_lock(&l->mu);
	if (!l->held || l->lost) {
		pthread_mutex_unlock(&l->mu);
		return jo_err_set(err, JO_ECONFLICT, "lease on task %lld is lost", (long long)l->task_id);
	}
	l->next_renew = 0;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

/* Stop tracking the task (renewals of it stop) and return its id. */
static int64_t drop(struct jo_lease *l, bool *was_lost)
{
	int64_t id;

	pthread_mutex_lock(&l->mu);
	id = l->held ? l->task_id : 0;
	*was_lost = l->lost;
	l->held = false;
	l->gen++;
	pthread_mutex_unlock(&l->mu);
	return id;
}

int jo_lease_complete(struct jo_lease *l, struct jo_meta *m, struct jo_err *err)
{
	bool lost;
	int64_t id = drop(l, &lost);

	if (!id)
		return jo_err_set(err, JO_EINVAL, "lease: no task held");
	return jo_mut_task_complete(m, l->ns, id, l->owner, err);
}

int jo_lease_release(struct jo_lease *l, struct jo_meta *m, struct jo_err *err)
{
	bool lost;
	int64_t id = drop(l, &lost);

	if (!id)
		return 0;
	return jo_mut_task_release(m, l->ns, id, l->owner, err);
}

void jo_lease_forget(struct jo_lease *l)
{
	bool lost;

	(void)drop(l, &lost);
}

void jo_lease_stats(struct jo_lease *l, uint64_t *renewals, uint64_t *lost)
{
	pthread_mutex_lock(&l->mu);
	*renewals = l->renewals;
	*lost = l->nlost;
	pthread_mutex_unlock(&l->mu);
}

void jo_lease_owner(char *buf, size_t cap, const char *id)
{
	char host[64] = "localhost";

	if (id) {
		snprintf(buf, cap, "%s", id);
	} else {
		if (gethostname(host, sizeof(host) - 1) != 0)
			snprintf(host, sizeof(host), "localhost");
		host[sizeof(host) - 1] = '\0';
		snprintf(buf, cap, "%s:%ld", host, (long)getpid());
	}
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p > '~')
			*p = '_';
}

void jo_lease_print_status(const char *command, const char *what, int64_t tasks, int64_t leased,
			   bool json)
{
	if (json)
		printf("{\"type\":\"status\",\"command\":\"%s\",\"tasks\":%" PRId64
		       ",\"leased\":%" PRId64 "}\n",
		       command, tasks, leased);
	else
		printf("%s tasks: %" PRId64 " recorded, %" PRId64 " leased\n", what, tasks, leased);
}
