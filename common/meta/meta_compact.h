/*
 * meta_compact.h: the metadata side of slice compaction (spec §6.4, §6.5):
 * slice-id allocation from the volume's counter, the compare-and-swap commit
 * of a compacted chunk, and the bookkeeping of an abandoned new slice.
 * Each function is one transaction exactly as JuiceFS writes it, so a
 * jfsops compaction is indistinguishable from a JuiceFS client's.
 */
#ifndef JO_META_COMPACT_H
#define JO_META_COMPACT_H

#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;
struct jo_slice;

/*
 * Allocate n fresh slice ids from the volume's counter (Redis INCRBY
 * nextchunk, SQL nextChunk += n in one transaction). *first gets the first
 * of the n consecutive ids now owned by the caller.
 */
int jo_meta_alloc_slice_ids(struct jo_meta *m, uint32_t n, uint64_t *first,
			    struct jo_err *err);

/* The most records one compaction commit may replace on this engine (0: no
 * limit of its own): etcd commits in one transaction of at most 128 operations,
 * so juicefs compacts at most 100 records there, and so does jfsops. */
size_t jo_meta_compact_max_records(struct jo_meta *m);

/* An old slice whose last reference the commit removed (trash off). */
struct jo_slice_id {
	uint64_t id;
	uint32_t size;
};

struct jo_compact_commit {
	uint64_t ino;
	uint32_t indx;
	const uint8_t *origin;     /* the first records as read (24 bytes each) */
	size_t norigin;            /* records in origin */
	size_t skipped;            /* leading records kept as they are */
	uint32_t pos;              /* the new record: (pos, id, size, 0, size) */
	uint64_t new_id;
	uint32_t size;
	int trash_days;            /* > 0: old slices go to delayed slices */
	int64_t now;               /* unix seconds, for the delSlices entry */
};

/*
 * Commit a compaction: replace records [0, norigin) of the chunk, which must
 * still equal origin byte for byte (appends after them are kept), with
 * origin[0..skipped) + the new record; create the new slice's reference;
 * then either record the compacted slices as delayed (trash on) or drop one
 * reference per compacted record. On a lost reply the existence of the new
 * slice's reference decides. Returns 0 when committed, JO_ECONFLICT when the
 * chunk changed (nothing written), another code on failure.
 * With trash off, *freed (malloc'd, may be NULL with *nfreed 0) lists the
 * old slices whose references dropped below 1: the caller deletes their
 * blocks and then calls jo_mut_forget_slice() (meta_mut.h). Only a commit
 * known durable frees anything (jo_mut_confirm): one that is done but could
 * not be confirmed where it was made (its reply lost, or a failover since,
 * the new master holding it) returns 0 with nothing freed and err set to
 * why: those slices stay pending for gc, and the caller should say so.
 */
int jo_meta_compact_commit(struct jo_meta *m, const struct jo_compact_commit *c,
			   struct jo_slice_id **freed, size_t *nfreed, struct jo_err *err);

/*
 * Give up a new slice that was never committed: mark it pending deletion
 * (Redis HINCRBY -1 -> -1, SQL row refs 0), so a crash before its blocks are
 * removed leaves a "pending" slice for gc, never a silent leak.
 */
int jo_meta_slice_abandon(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err);

/*
 * After the blocks of these slices are gone: forget their counts (HDEL
 * sliceRef / DELETE the chunk_ref rows) while they still say "unreferenced".
 * SQLite does it in one transaction (one fsync for all of them).
 */
int jo_meta_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n,
			  struct jo_err *err);

#endif
