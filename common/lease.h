/*
 * lease.h: lease-based task claiming on top of the metadata engine.
 *
 * Tasks (records of a bounded amount of work) live in the volume's own
 * metadata engine (common/meta/meta_mut.h, jo_mut_task_*). A worker claims
 * one task at a time with a lease: (owner id, expiry on the engine's clock).
 * A keeper thread renews the lease every lease/3 on its own connection; the
 * worker asks jo_lease_valid() before every mutation and stops mutating the
 * moment it returns false (a renewal was refused, or no renewal succeeded
 * in time). An expired lease can be claimed by anyone, so a worker killed
 * with SIGKILL only delays its task by one lease period.
 *
 * Leases decide who works, never what is deleted: every step of a task must
 * be safe to repeat and safe to run twice at once.
 *
 * Threading: one keeper per worker thread. jo_lease_valid() may be called
 * from any thread; the other calls from the worker thread that owns m.
 */
#ifndef JO_LEASE_H
#define JO_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;
struct jo_mut_task;
struct jo_lease;

struct jo_lease_opts {
	const char *ns;      /* task namespace, e.g. "gc" */
	const char *owner;   /* unique per worker: "host:pid/thread" */
	int64_t lease_ms;    /* lease length (default 60000) */
};

/*
 * A worker's owner id (jo_lease_opts.owner) into buf: id, or "host:pid" of
 * this process when id is NULL; every byte but printable ASCII other than
 * the space becomes '_'.
 */
void jo_lease_owner(char *buf, size_t cap, const char *id);

/*
 * --status of a task namespace (gc, compact) on stdout: with json one
 * {"type":"status","command":C,"tasks":N,"leased":N} line (a status query is
 * not a run: docs/json/README.md), else "WHAT tasks: N recorded, N leased".
 */
void jo_lease_print_status(const char *command, const char *what, int64_t tasks, int64_t leased,
			   bool json);

/*
 * A keeper for one worker. m is duplicated (jo_meta_dup) for the renewal
 * thread; the caller keeps using m for claims and completion.
 */
int jo_lease_new(struct jo_lease **out, struct jo_meta *m, const struct jo_lease_opts *opts,
		 struct jo_err *err);
/* Stops the renewal thread. Does not release a held task (call release). NULL ok. */
void jo_lease_free(struct jo_lease *l);

/*
 * Claim one task (atomically, on m) and start renewing it. JO_ENOTFOUND
 * when no task is claimable. out is filled (release its memory with
 * jo_mut_task_release_mem). Only one task at a time per keeper: JO_EINVAL if
 * one is still held.
 */
int jo_lease_claim(struct jo_lease *l, struct jo_meta *m, struct jo_mut_task *out,
		   struct jo_err *err);
/*
 * jo_lease_claim, and when no task is claimable while some are still
 * recorded (leased by other workers: working, stalled, or dead and waiting
 * for their lease to run out), wait for them: claim again every twentieth
 * of the lease (50 to 250 ms) until one is claimable or none is left.
 * JO_ENOTFOUND only when the namespace holds no task at all; JO_ECANCELED
 * when cancelled meanwhile.
 */
int jo_lease_claim_wait(struct jo_lease *l, struct jo_meta *m, struct jo_mut_task *out,
			struct jo_err *err);
/* True while the held task is certainly ours. */
bool jo_lease_valid(struct jo_lease *l);
/* Force a renewal now (used after a long step). JO_ECONFLICT when lost. */
int jo_lease_renew_now(struct jo_lease *l, struct jo_err *err);
/* Task done: delete it (and its item marks). JO_ECONFLICT if it was lost. */
int jo_lease_complete(struct jo_lease *l, struct jo_meta *m, struct jo_err *err);
/* Give the task back unfinished (shutdown, --max-time). */
int jo_lease_release(struct jo_lease *l, struct jo_meta *m, struct jo_err *err);
/*
 * The held task was completed another way (jo_mut_rec_put with complete, in
 * the same transaction as a record), or is known lost: stop renewing it.
 */
void jo_lease_forget(struct jo_lease *l);

/* Renewals done and refused so far (for summaries and tests). */
void jo_lease_stats(struct jo_lease *l, uint64_t *renewals, uint64_t *lost);

/* Monotonic clock in ms (shared helper). */
int64_t jo_lease_mono_ms(void);

#endif
