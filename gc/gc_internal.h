/* gc_internal.h: state shared by gc_plan.c, gc_work.c and the unit tests. */
#ifndef JO_GC_INTERNAL_H
#define JO_GC_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gc/gc.h"

struct jo_lease;

struct gc_run {
	struct jo_vol *vol;        /* borrowed */
	struct gc_opts o;
	char owner[100];           /* worker id prefix */
	int64_t edge;              /* delayed slices older than this (unix s) are due */
	int64_t trash_edge;        /* trash hour directories older than this are due */
	const char *trash_skip;    /* why the trash is left alone (NULL: it is not) */
	int64_t deadline_mono;     /* --max-time, monotonic ms; 0 none */
	pthread_mutex_t mu;        /* st, rate_next */
	struct gc_stats st;
	double rate_next;          /* --delete-rate schedule, monotonic ms */
};

/* A slice queued for physical deletion. */
struct gc_pend {
	uint64_t id;
	uint32_t size;
	int kind;
	bool skip;
	size_t first_key, nkeys;
};

struct gc_worker {
	struct gc_run *run;
	struct jo_meta *m;         /* own connection */
	struct jo_lease *lease;    /* NULL when evaluating without a lease (dry-run) */
	char id[128];
	int64_t task_id;
	struct gc_pend *pend;
	size_t npend, pcap, pend_keys;
	struct gc_stats st;        /* merged into run->st after each task */
	bool audit_failed;
	bool lease_lost;           /* may_mutate() refused: stop the task */
	int rc;                    /* fatal error of the thread */
	struct jo_err err;
};

int gc_kind_parse(const char *s);
int64_t gc_now_s(void);
int gc_worker_init(struct gc_worker *w, struct gc_run *r, int idx, struct jo_err *err);
void gc_worker_release(struct gc_worker *w);
/* Process one item / a '\n'-separated list (then flush the deleter). */
int gc_process_item(struct gc_worker *w, const char *item, struct jo_err *err);
/* Queue a slice for physical deletion (deduplicated within the batch; the
 * refcount is re-read right before its blocks are deleted). */
int gc_queue_slice(struct gc_worker *w, uint64_t id, uint32_t size, int kind, struct jo_err *err);
int gc_process_items(struct gc_worker *w, const char *items, struct jo_err *err);

#endif
