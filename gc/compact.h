/*
 * compact.h: slice compaction of one chunk, exactly as JuiceFS compacts
 * (spec §6.2-§6.6), plus the fragmentation survey the planner uses.
 */
#ifndef JO_GC_COMPACT_H
#define JO_GC_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/jfs/jfs.h"

struct jo_err;
struct jo_audit;

#define COMPACT_MAX_RECORDS 1000  /* JuiceFS maxCompactSlices */

/*
 * What compacting a list of records would produce: the records kept in
 * front (skipped), and the new slice (pos, size) built from the visible
 * segments of the rest, leading/trailing holes dropped.
 */
struct compact_pick {
	size_t skipped;
	size_t ncompacted;        /* records after the skipped ones */
	uint32_t pos, size;
	struct jo_slice *segs;    /* visible segments of the new slice (malloc'd) */
	size_t nsegs;
};
/* 0 and pick filled (pick->ncompacted < 2 or size 0: nothing to do). */
int compact_pick(const struct jo_slice *recs, size_t n, struct compact_pick *pick);
void compact_pick_release(struct compact_pick *pick);
/* JuiceFS's skipSome: leading big, still fully visible records to keep. */
size_t compact_skip_some(const struct jo_slice *recs, size_t n);

enum compact_outcome {
	COMPACT_DONE = 0,        /* committed */
	COMPACT_NOTHING,         /* fewer than 2 records or nothing visible */
	COMPACT_CONFLICT,        /* the chunk changed under us: retry later */
};

struct compact_result {
	enum compact_outcome outcome;
	size_t records_before, records_after;
	uint64_t new_id;
	uint32_t new_size;
	uint64_t bytes_read, bytes_written;   /* read: bytes fetched from the old slices */
	uint64_t gets;                        /* GETs of old slices' blocks */
	uint64_t slices_freed, blocks_deleted;
};

/*
 * The source of a new slice (compact_read.c): the visible segments segs
 * (new-slice order) planned as GETs of the old slices' blocks (only the
 * ranges needed when uncompressed, merged across small gaps; whole blocks
 * when compressed) and fetched ahead by a few threads within a memory
 * budget. compact_src_fill is a jo_vol_source_cb asked for the new slice's
 * bytes in order. compact_src_counts: bytes fetched and GETs so far.
 */
struct compact_src;
int compact_src_new(struct jo_vol *v, const struct jo_slice *segs, size_t nsegs,
		    struct compact_src **out, struct jo_err *err);
int compact_src_fill(uint8_t *dst, uint32_t off, uint32_t len, void *payload, struct jo_err *err);
void compact_src_counts(struct compact_src *s, uint64_t *bytes, uint64_t *gets);
void compact_src_free(struct compact_src *s);

/* Who does the work, for the audit lines of deleted blocks. */
struct compact_audit {
	struct jo_audit *audit;   /* NULL: no audit file */
	const char *worker;
	int64_t task;
};

/*
 * Compact chunk (ino, indx) of v: snapshot the first records, allocate a
 * slice id, write the visible bytes as one new slice, commit with the CAS on
 * the record prefix; on conflict remove the new slice again. With trash off
 * the blocks of old slices whose last reference went away (counts re-read
 * right before) are deleted, one audit line per key (au may be NULL). Returns 0 with *res filled, or an error.
 */
int compact_chunk(struct jo_vol *v, uint64_t ino, uint32_t indx, const struct compact_audit *au,
		  struct compact_result *res, struct jo_err *err);

struct jo_ctx;
/* `jfsops compact` (gc/cmd_compact.c), an entry of cmd/main.c's command table. */
int cmd_compact(int argc, char **argv, struct jo_ctx *ctx);

#endif
