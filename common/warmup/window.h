/*
 * window.h: the look-ahead window of `jfsops warmup --follow`.
 *
 * Pure bookkeeping (no I/O, one thread): batches come in stream order and
 * get consecutive indices; the consumer's position is the index of the last
 * batch it reported done (-1 before the first). The window is the batches
 * after that position; at most `ahead` of them are ever open at once, the
 * one the consumer reads included, so the blocks the pipeline holds or warms
 * are those of at most `ahead` batches, however long the stream.
 *
 * Blocks are deduplicated across the window: a block several batches need
 * is one entry that lists its batches and is read once. A batch is ready when
 * it is closed and each of its blocks is warm or failed. When the consumer
 * passes a batch, its blocks that no batch in the window still needs are
 * dropped; with evict_done they are listed for eviction (whether or not the
 * pipeline read them: the consumer's own reads cache them too), and a read
 * still in flight for one is listed again when it ends.
 *
 * Ownership: blocks and files belong to the window; pointers it hands out
 * stay valid until the next mutating call, except a block returned by
 * jo_wwin_next(), which stays valid until it is passed to jo_wwin_complete().
 */
#ifndef JO_WARMUP_WINDOW_H
#define JO_WARMUP_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_warmup_block;

struct jo_wwin;
struct jo_wwin_file;
struct jo_wwin_block;
struct jo_wwin_batch;

int jo_wwin_new(struct jo_wwin **out, unsigned ahead, bool evict_done, struct jo_err *err);
void jo_wwin_free(struct jo_wwin *w);

/*
 * The file a block belongs to: volume path, mount path (may be NULL), inode
 * and length. Interned by path; the window keeps it while a block needs it.
 * NULL on ENOMEM.
 */
struct jo_wwin_file *jo_wwin_file(struct jo_wwin *w, const char *vpath, const char *mpath,
				  uint64_t ino, uint64_t flen);
const char *jo_wwin_file_vpath(const struct jo_wwin_file *f);
const char *jo_wwin_file_mpath(const struct jo_wwin_file *f);
uint64_t jo_wwin_file_ino(const struct jo_wwin_file *f);
uint64_t jo_wwin_file_len(const struct jo_wwin_file *f);

/* ---- the stream side ---- */

/* The consumer's position: index of the last batch done, -1 before any. */
int64_t jo_wwin_position(const struct jo_wwin *w);
/* Index the next batch of the stream gets. */
uint64_t jo_wwin_next_index(const struct jo_wwin *w);
/* May the next batch be opened (fewer than `ahead` batches in the window)? */
bool jo_wwin_has_room(const struct jo_wwin *w);
/*
 * Open the next batch (id may be NULL until it is closed). passed: the
 * consumer is already beyond it (a done for a later batch came first): its
 * blocks are not queued, only noted so they can be evicted. JO_EINVAL when a
 * batch is open or (not passed) the window has no room.
 */
int jo_wwin_open(struct jo_wwin *w, const char *id, bool passed, struct jo_err *err);
bool jo_wwin_is_open(const struct jo_wwin *w);
/* The open batch's id so far, or NULL. */
const char *jo_wwin_open_id(const struct jo_wwin *w);
/* A block of the open batch (repeats merge, keeping the best anchor). */
int jo_wwin_add(struct jo_wwin *w, const struct jo_warmup_block *b, struct jo_wwin_file *f,
		struct jo_err *err);
/* Close the open batch as id (overrides the id given at open). */
int jo_wwin_close(struct jo_wwin *w, const char *id, struct jo_err *err);

/*
 * The consumer finished batch index (and every one before it). Later
 * positions only: an older index is ignored. Returns how many batches left
 * the window.
 */
size_t jo_wwin_done(struct jo_wwin *w, uint64_t index);

/* The first batch of the window called id (NULL: none). */
struct jo_wwin_batch *jo_wwin_find(struct jo_wwin *w, const char *id);
/* Was id one of the last batches the consumer passed? Sets *index. */
bool jo_wwin_passed(const struct jo_wwin *w, const char *id, uint64_t *index);

struct jo_wwin_batch_info {
	const char *id;         /* borrowed; NULL while open without an id */
	uint64_t index;
	bool closed, ready, passed;
	uint64_t blocks, bytes;         /* distinct blocks of the batch */
	uint64_t new_blocks, new_bytes; /* not already in the window when added */
	uint64_t pending;               /* neither warm nor failed yet */
	uint64_t failed;
	int64_t position_at_open;       /* the consumer's position when it opened */
};
void jo_wwin_batch_info(const struct jo_wwin_batch *b, struct jo_wwin_batch_info *out);
/* Opaque per-batch slot for the caller (timings...), NULL initially. */
void **jo_wwin_batch_user(struct jo_wwin_batch *b);

/*
 * Call cb once for each batch that became ready since the last call, in
 * index order.
 */
typedef void (*jo_wwin_batch_cb)(struct jo_wwin_batch *b, void *payload);
void jo_wwin_take_ready(struct jo_wwin *w, jo_wwin_batch_cb cb, void *payload);
/* Every batch of the window, oldest first. */
void jo_wwin_each_batch(struct jo_wwin *w, jo_wwin_batch_cb cb, void *payload);

/* ---- the reader side ---- */

/* The next block to read (oldest batch first), now in flight; NULL: none. */
struct jo_wwin_block *jo_wwin_next(struct jo_wwin *w);
/* The block's identity and anchors (boff/blen unset), and its file. */
void jo_wwin_block_get(const struct jo_wwin_block *b, struct jo_warmup_block *out,
		       struct jo_wwin_file **file);
/* A read from jo_wwin_next() ended (ok: the block is cached). */
void jo_wwin_complete(struct jo_wwin *w, struct jo_wwin_block *b, bool ok);

/* ---- eviction ---- */

struct jo_wwin_evict {
	uint64_t id;
	uint32_t indx, bsize;
	struct jo_wwin_file *file;  /* a reference, dropped by jo_wwin_evicts_free() */
};
/*
 * The blocks to evict now (evict_done only): blocks of passed batches that
 * no batch in the window needs. *out malloc'd (NULL when n == 0).
 */
int jo_wwin_take_evicts(struct jo_wwin *w, struct jo_wwin_evict **out, size_t *n,
			struct jo_err *err);
void jo_wwin_evicts_free(struct jo_wwin *w, struct jo_wwin_evict *v, size_t n);
/* Does a batch of the window need block (id, indx)? */
bool jo_wwin_needed(const struct jo_wwin *w, uint64_t id, uint32_t indx);
/*
 * The mount evicted every block of file f: each block of the window in f
 * that was warm is queued again (first in line), one in flight is read again
 * when its read ends. A batch that had been reported ready is passed to cb
 * (may be NULL) once and will be reported by jo_wwin_take_ready() again.
 * Returns how many blocks were queued again.
 */
size_t jo_wwin_requeue_file(struct jo_wwin *w, const struct jo_wwin_file *f,
			    jo_wwin_batch_cb cb, void *payload);

struct jo_wwin_stats {
	uint64_t batches;        /* batches opened so far */
	uint64_t in_window;      /* batches in the window now */
	uint64_t blocks, bytes;  /* distinct blocks the window needs */
	uint64_t queued, inflight;
	uint64_t max_bytes;      /* largest `bytes` seen */
	uint64_t max_ahead;      /* largest index - position at an open (not passed) */
	uint64_t cancelled;      /* queued blocks dropped before being read */
	uint64_t requeued;       /* blocks queued again after a whole-file eviction */
};
void jo_wwin_stats(const struct jo_wwin *w, struct jo_wwin_stats *out);

#endif
