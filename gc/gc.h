/*
 * gc.h: the gc planner and worker behind `jfsops gc` (internal to gc/).
 *
 * Kinds of pending work (spec juicefs-format.md §5):
 *   file     "f:{ino}:{length}"  a removed file (delfiles): deleteChunk on its
 *                                chunks, then drop the delfiles entry (§5.2)
 *   slice    "s:{id}:{size}"     a slice whose refcount says "delete" (§5.3)
 *   delslice "d:{newid}:{ts}"    a delayed-slice entry past TrashDays (§3.9)
 *   chunk    "c:{ino}:{indx}"    Redis chunk key whose inode is gone (§5.4)
 *   trash    "t:{ino}:{hour}"    a trash hour directory past TrashDays: emptied
 *                                entry by entry (unlink/rmdir, as the clients'
 *                                CleanupTrashBefore), files whose last link
 *                                went have their data deleted, then removed
 * The planner records shards of items as tasks (common/lease.h); workers
 * claim them, process every item exactly as JuiceFS does, and physically
 * delete only slices whose refcount, re-read right before the delete, says so.
 */
#ifndef JO_GC_H
#define JO_GC_H

#include <stdbool.h>
#include <stdint.h>

struct jo_err;
struct jo_vol;
struct jo_audit;
struct jo_meta;

enum gc_kind { GC_FILE = 0, GC_SLICE, GC_DELSLICE, GC_CHUNK, GC_TRASH, GC_NKINDS };

struct gc_opts {
	bool delete_;            /* --delete: really change things */
	const char *worker_id;   /* lease owner prefix (default host:pid) */
	int64_t lease_ms;        /* --lease (60000) */
	int64_t max_time_ms;     /* --max-time (0 = none) */
	int threads;             /* worker threads (1) */
	double delete_rate;      /* objects/s, 0 = unlimited */
	int batch;               /* keys per delete request (1000) */
	int task_size;           /* items per task (256) */
	struct jo_audit *audit;  /* borrowed, may be NULL */
};

struct gc_kstats {
	uint64_t items;          /* items seen (planned / processed); trash: entries removed */
	uint64_t skipped;        /* already done by someone else, or too young */
	uint64_t slices;         /* slices deleted (or that would be) */
	uint64_t objects;        /* objects deleted (or that would be) */
	uint64_t bytes;          /* their uncompressed block bytes */
	uint64_t errors;
};

struct gc_stats {
	struct gc_kstats k[GC_NKINDS];
	uint64_t tasks_planned, items_planned, tasks_done, tasks_released, leases_lost;
	uint64_t obj_errors;     /* objects whose delete failed */
	uint64_t still_referenced; /* freed candidates whose refcount no longer said delete */
};

const char *gc_kind_name(int kind);
void gc_stats_add(struct gc_stats *dst, const struct gc_stats *src);
uint64_t gc_stats_errors(const struct gc_stats *s);

/* A gc run over one open volume. */
struct gc_run;
int gc_run_new(struct gc_run **out, struct jo_vol *vol, const struct gc_opts *o,
	       struct jo_err *err);
void gc_run_free(struct gc_run *r);

/*
 * Scan what is pending. With o->delete_ the shards are recorded as tasks
 * (deduplicated: planning twice adds nothing); in dry-run they are
 * evaluated on the spot when `evaluate` is set (what would be deleted), or
 * only counted. Uses the volume's own meta handle (main thread).
 */
int gc_plan(struct gc_run *r, bool evaluate, struct jo_err *err);

/*
 * Work: with o->delete_, run o->threads workers that claim tasks until none
 * is left, the max time passed or a signal arrived; in dry-run, evaluate
 * every recorded task without claiming it.
 */
int gc_work(struct gc_run *r, struct jo_err *err);

/* Totals so far (after gc_work returned: final). */
void gc_run_stats(struct gc_run *r, struct gc_stats *out);
/* Tasks left in the engine (total, under lease). */
int gc_task_counts(struct gc_run *r, int64_t *total, int64_t *leased, struct jo_err *err);
/* Whether --max-time has passed (the workers stopped claiming because of it). */
bool gc_run_deadline_passed(const struct gc_run *r);
/* Drop every task record (--reset-tasks). */
int gc_reset_tasks(struct gc_run *r, struct jo_err *err);

#define GC_NS "gc"

struct jo_ctx;
/* `jfsops gc` (gc/cmd_gc.c), an entry of cmd/main.c's command table. */
int cmd_gc(int argc, char **argv, struct jo_ctx *ctx);

#endif
