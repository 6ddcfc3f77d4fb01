/*
 * extsort.h: external merge sort of variable-size records under a memory
 * budget.
 *
 * Records are opaque byte strings (1 byte .. 64 MiB). They are buffered in
 * memory until the budget is reached, then the buffer is sorted and written
 * as one run file (zstd-compressed unless opts.plain_runs) in a private
 * temp directory (created with
 * mkdtemp under opts.tmp_dir). After jo_xsort_finish() the runs are merged
 * with a binary heap (in several passes when there are more runs than the
 * budget allows to open at once) and the records come out one by one through
 * jo_xsort_next(). When everything fits in memory no file is written.
 *
 * Order: opts.cmp, or when NULL plain byte order (memcmp over the common
 * length, then the shorter record first). The sort is not stable: records
 * that compare equal come out in an unspecified order.
 *
 * Temp files are removed by jo_xsort_free() (success or failure) and, if the
 * process is interrupted a second time or exits without freeing, by the
 * cleanup hook registered with jo_cancel_atexit(). jo_xsort_add/finish/next
 * return JO_ECANCELED soon after jo_cancelled() turns non-zero.
 *
 * Memory: opts.mem_limit bounds the record buffer, its index and the merge
 * buffers (zstd streams, read buffers). Expect the process RSS to exceed the
 * budget by the allocator's slack only. The budget is a ceiling, not a size:
 * the buffer starts at 1 MiB and doubles after every 32 runs written at its
 * size, so an input uses about a 32nd of its size in memory until it reaches
 * the budget, and the merge opens as many runs at once as that memory allows
 * (at least 8).
 *
 * Threading: one handle belongs to one thread. opts.threads > 1 sorts and
 * writes a full buffer in a background thread while the caller fills the
 * next one (each of the two buffers then gets half the budget).
 */
#ifndef JO_EXTSORT_H
#define JO_EXTSORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_xsort;

/* Three-way comparison of two records; payload is opts.cmp_payload. */
typedef int (*jo_xsort_cmp_fn)(const void *a, size_t alen, const void *b, size_t blen,
			       void *payload);

struct jo_xsort_opts {
	size_t mem_limit;         /* bytes; 0 = 256 MiB. Minimum 1 MiB is enforced. */
	const char *tmp_dir;      /* parent of the private temp dir; NULL = "/tmp" */
	jo_xsort_cmp_fn cmp;      /* NULL: byte order */
	void *cmp_payload;
	int zstd_level;           /* run compression level (default 1) */
	int threads;              /* >1: sort/write runs in a background thread */
	/* runs written as they are, not compressed: a fraction of the CPU
	 * (compressing and reading back a zstd run costs more than sorting
	 * it), a few times the temp space, and a merge reader needs 16 KiB
	 * instead of about 600 */
	bool plain_runs;
};
#define JO_XSORT_OPTS_INIT { .mem_limit = 256u << 20, .zstd_level = 1, .threads = 1 }

/* Counters for summaries and benchmarks. */
struct jo_xsort_stats {
	uint64_t records;         /* records added */
	uint64_t bytes;           /* record bytes added */
	uint64_t runs;            /* run files written (including intermediate merges) */
	uint64_t merge_passes;    /* intermediate merge passes before the final one */
	uint64_t tmp_bytes;       /* compressed bytes written to temp files */
	size_t peak_mem;          /* largest accounted memory use, bytes */
};

/* Create a sorter. opts may be NULL (defaults). On failure *out is NULL. */
int jo_xsort_new(struct jo_xsort **out, const struct jo_xsort_opts *opts, struct jo_err *err);

/*
 * Add one record (copied). len must be 1 .. 64 MiB. May spill a run to disk:
 * JO_EIO (disk full, ...), JO_ENOMEM, JO_ECANCELED, JO_EINVAL (bad length or
 * called after finish).
 */
int jo_xsort_add(struct jo_xsort *s, const void *rec, size_t len, struct jo_err *err);

/* End the input and prepare the output (may run intermediate merges). */
int jo_xsort_finish(struct jo_xsort *s, struct jo_err *err);

/*
 * The next record in order: returns 1 and sets *rec and *len (borrowed, valid
 * until the next call on s), 0 at the end, or a negative JO_E* code
 * (JO_EPROTO for a corrupt run file, JO_EIO, JO_ECANCELED).
 */
int jo_xsort_next(struct jo_xsort *s, const void **rec, size_t *len, struct jo_err *err);

void jo_xsort_get_stats(const struct jo_xsort *s, struct jo_xsort_stats *out);

/* The private temp directory ("" until the first run is written). Borrowed. */
const char *jo_xsort_tmp_path(const struct jo_xsort *s);

/* Free everything and remove the temp files and directory. Accepts NULL. */
void jo_xsort_free(struct jo_xsort *s);

#endif
