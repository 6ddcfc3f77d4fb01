/*
 * cluster.h: what every cluster job shares, whatever it does (sync --cluster,
 * leakcheck --cluster): a namespace of its own in the coordinator, records
 * as JSON objects beside the lease tasks (common/meta/meta_mut.h), range
 * tasks named by a letter and an index, a registry of the jobs for
 * --status, and the small clocks and readers of those records.
 */
#ifndef JO_CLUSTER_H
#define JO_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct jo_err;
struct jo_lease;
struct jo_lease_opts;
struct jo_meta;
struct jo_mut_rec_cond;

/* Wall clock (unix ms) and a monotonic one (s). */
int64_t jo_cl_now_ms(void);
double jo_cl_mono_s(void);
/* Sleep ms, in steps that a cancellation (common/cancel.h) cuts short. */
void jo_cl_sleep_ms(int64_t ms);

/*
 * A job's namespace: `letter` and 15 hex digits of a hash of `what` (a job
 * named by the user hashes apart from one named by what it does).
 */
void jo_cl_job_ns(char letter, const char *what, bool named, char out[17]);

/* Fields of a record: 0 / "" / false when absent or of another type (ju: and <= 0). */
uint64_t jo_cl_ju(const json_t *o, const char *k);
int64_t jo_cl_ji(const json_t *o, const char *k);
const char *jo_cl_js(const json_t *o, const char *k);
bool jo_cl_jb(const json_t *o, const char *k);

/* A record's unsigned counters: each key names the uint64_t at off in a struct. */
struct jo_cl_u64 {
	const char *key;
	size_t off;
};
/* Set t[0..n)'s keys in o from struct s (o NULL: a new object); NULL when out of memory. */
json_t *jo_cl_u64_put(json_t *o, const void *s, const struct jo_cl_u64 *t, size_t n);
/* Read t[0..n)'s keys of o (jo_cl_ju) into struct s: added to it when add, else set. */
void jo_cl_u64_get(const json_t *o, void *s, const struct jo_cl_u64 *t, size_t n, bool add);

/* jo_mut_rec_put of a JSON object (j NULL: remove the record). */
int jo_cl_rec_put(struct jo_meta *m, const char *ns, const char *key, json_t *j,
		  const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err);
/* A record as a JSON object: *out NULL (and 0) when there is none; JO_EPROTO if no object. */
int jo_cl_rec_get(struct jo_meta *m, const char *ns, const char *key, json_t **out,
		  struct jo_err *err);

/* A task's item "L000123" (letter L, index 123): the index, or -1. */
int jo_cl_task_index(const char *items, char letter);
/* Add one task of `kind` per index ("L%06d" items); those pending already are kept. */
int jo_cl_add_tasks(struct jo_meta *m, const char *ns, const char *kind, char letter,
		    const int *idx, int n, struct jo_err *err);

/*
 * Open the coordinator at url (a jfsops coordinator: no volume needed) and
 * make the task tables of namespace ns and of the job registry; errors say
 * "coordinator: ...".
 */
int jo_cl_open(struct jo_meta **m, const char *url, const char *password,
	       const char *redis_password, const char *ns, const char *registry,
	       struct jo_err *err);

/* Local time of unix ms as "YYYY-MM-DD HH:MM:SS". */
void jo_cl_fmt_time(int64_t ms, char *buf, size_t n);

/*
 * The registry of a family of jobs (namespace `registry`): "job:NS" -> rec,
 * written once. jo_cl_registry_list() gives the namespaces, sorted
 * (*ns malloc'd, 17 bytes each).
 */
int jo_cl_registry_add(struct jo_meta *m, const char *registry, const char *ns, json_t *rec,
		       struct jo_err *err);
int jo_cl_registry_list(struct jo_meta *m, const char *registry, char (**ns)[17], size_t *n,
			struct jo_err *err);

/* A worker's name as a Prometheus label: worker="..." (quotes and backslashes escaped). */
void jo_cl_worker_label(const char *worker, char *buf, size_t n);

/*
 * Several tasks in flight in one worker process: n slots, each with a
 * coordinator connection and a lease keeper of its own, so that each claims,
 * works and completes (or releases) one task at a time exactly as a
 * one-slot worker does: a task's lease, records and completion stay the
 * task's own, and a killed process's tasks all expire and go to others.
 * Slot 0 runs on the caller's thread with m itself, the others on threads of
 * their own with jo_meta_dup(m). While one slot's task drains its last work
 * another lists the next: what they share (arg) they lock themselves.
 */
struct jo_cl_slot {
	int index;                   /* 0 .. n-1 */
	struct jo_meta *m;           /* this slot's coordinator connection */
	struct jo_lease *lease;      /* this slot's keeper (lo's namespace and owner) */
	void *arg;
	struct jo_cl_slots *all;
	uint64_t seen;               /* the kicks this slot has seen */
};
/*
 * Run fn in n slots (n < 1: one) until each returns: 0, or the first
 * failing slot's code and error (the others are told to stop, see
 * jo_cl_slot_stopping, and are waited for).
 */
int jo_cl_slots_run(struct jo_meta *m, const struct jo_lease_opts *lo, int n,
		    int (*fn)(struct jo_cl_slot *s, struct jo_err *err), void *arg,
		    struct jo_err *err);
/* True once another slot failed: leave the loop (a held task released first). */
bool jo_cl_slot_stopping(const struct jo_cl_slot *s);
/*
 * Wait up to ms (cut short by a cancellation) for something another slot
 * did: a task finished or given back, a slot ended. A slot that found
 * nothing to claim waits here, not a fixed sleep, so that it sees at once
 * the next phase its peer opened (or the job's end).
 */
void jo_cl_slot_wait(struct jo_cl_slot *s, int64_t ms);
/* Tell the waiting slots that something changed (a task finished or given back). */
void jo_cl_slot_kick(struct jo_cl_slot *s);

#endif
