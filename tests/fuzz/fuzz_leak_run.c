/*
 * libFuzzer target: a cluster leak check's reference run (leakcheck/runfile.c),
 * which a worker reads from --work, a place other hosts write to. The input
 * is a header, then the run file:
 *   byte 0      the cell width: (b % 4 + 1) * 1000 ids
 *   bytes 1-2   the window read: cells [b1, b1 + b2) (b2 = 0: to the end)
 *   bytes 3-4   the done record's frame count (LE u16)
 *   byte 5      its density-bucket count
 *   bytes 6-13  its record count (LE u64)
 *   the rest    the file; the index starts frames * 24 + buckets * 16 bytes
 *               before its end (the done record's "idx")
 * Beyond "does not crash":
 *   - leak_part_index accepts the index only with cells ascending, frames
 *     in file order, non-empty and within the frames, summing to the
 *     record count; leak_part_load of the same file agrees with it;
 *   - a window lies within the frames, holds at most the run's records;
 *   - reading the window either fails, or gives exactly the window's
 *     record count, in order, every id inside the window's ids: never a
 *     smaller answer.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "leakcheck/leak.h"
#include "tests/fuzz/fuzz_util.h"

static char dir[64];
static struct leak_work *work;

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static void setup(void)
{
	struct jo_err err = { 0 };

	if (work)
		return;
	snprintf(dir, sizeof(dir), "%s", "/tmp/jo-fuzz-run.XXXXXX");
	if (!mkdtemp(dir) || leak_work_open(&work, dir, NULL, NULL, &err) != 0)
		abort();
}

/* Write the file as the work store's "run" and read it back through it. */
static void read_back(const uint8_t *f, size_t n, const struct leak_run_counts *c,
		      const struct leak_part_idx *pi0, uint64_t step, uint64_t lo, uint64_t hi)
{
	struct jo_err err = { 0 };
	struct jo_file *jf = NULL;
	struct leak_part_idx pi;
	struct leak_parts_src src = { 0 };
	uint64_t off, len, recs, got = 0;
	const void *rec;
	size_t rlen;
	int rc;

	FUZZ_CHECK(leak_work_create(work, "run", 0, &jf, &err) == 0, "create: %s", err.msg);
	FUZZ_CHECK(jo_write_all(jf->fd, f, n) == 0, "write");
	FUZZ_CHECK(leak_work_commit(work, "run", jf, &err) == 0, "commit: %s", err.msg);
	jo_file_abort(jf);
	src.r = calloc(1, sizeof(*src.r));
	src.rd = calloc(1, sizeof(*src.rd));
	src.have = calloc(1, sizeof(*src.have));
	src.cur = calloc(1, sizeof(*src.cur));
	FUZZ_CHECK(src.r && src.rd && src.have && src.cur, "out of memory");
	src.n = 1;
	src.lo = lo;
	src.hi = hi;
	FUZZ_CHECK(leak_work_ropen(work, "run", &src.rd[0], &err) == 0, "ropen: %s", err.msg);
	rc = leak_part_load(src.rd[0], c, &pi, NULL, &err);
	FUZZ_CHECK(rc == 0, "the index parsed from memory, not from the file: %s", err.msg);
	FUZZ_CHECK(pi.nfr == pi0->nfr && pi.idx_off == pi0->idx_off &&
		   (!pi.nfr || !memcmp(pi.fr, pi0->fr, pi.nfr * sizeof(*pi.fr))),
		   "two readings of one index differ");
	leak_part_window(&pi, step, lo, hi, &off, &len, &recs);
	free(pi.fr);
	FUZZ_CHECK(off <= c->idx && len <= c->idx - off, "window [%llu, +%llu) past the frames",
		   (unsigned long long)off, (unsigned long long)len);
	FUZZ_CHECK(recs <= c->records, "window of %llu records in a run of %llu",
		   (unsigned long long)recs, (unsigned long long)c->records);
	if (leak_run_r_open(&src.r[0], src.rd[0], off, len, recs, &err) != 0) {
		FUZZ_CHECK(err.code != 0, "a refused window gave no error");
		leak_parts_free(&src);
		return;
	}
	uint8_t prev[LEAK_REF_REC_LEN];

	while ((rc = leak_parts_next(&src, &rec, &rlen, &err)) == 1) {
		uint64_t id;
		uint32_t size;
		int cls;

		FUZZ_CHECK(rlen == LEAK_REF_REC_LEN, "a record of %zu bytes", rlen);
		leak_ref_decode(rec, &id, &size, &cls);
		FUZZ_CHECK(id >= lo && id < hi, "id %llu outside [%llu, %llu)",
			   (unsigned long long)id, (unsigned long long)lo, (unsigned long long)hi);
		FUZZ_CHECK(!got || memcmp(prev, rec, LEAK_REF_REC_LEN) <= 0, "records out of order");
		memcpy(prev, rec, LEAK_REF_REC_LEN);
		got++;
	}
	if (rc == 0)
		FUZZ_CHECK(got == recs, "the window read whole gave %llu records of %llu",
			   (unsigned long long)got, (unsigned long long)recs);
	else
		FUZZ_CHECK(rc < 0 && err.code != 0 && err.msg[0], "a failed read gave no error");
	leak_parts_free(&src);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	struct leak_run_counts c = { 0 };
	struct leak_part_idx pi;
	struct jo_err err = { 0 };
	uint64_t step, lo, hi, tail;

	if (n < 14)
		return 0;
	setup();
	step = (uint64_t)(d[0] % 4 + 1) * 1000;
	lo = (uint64_t)d[1] * step;
	hi = d[2] ? lo + (uint64_t)d[2] * step : UINT64_MAX;
	c.frames = le(d + 3, 2);
	c.dens = d[5];
	c.records = le(d + 6, 8);
	d += 14;
	n -= 14;
	c.bytes = n;
	tail = c.frames * 24 + c.dens * 16;
	c.idx = tail <= n ? n - tail : n;  /* too long: the record is refused */
	if (leak_part_index(d + c.idx, n - c.idx, &c, "fuzz", &pi, NULL, &err) != 0) {
		FUZZ_CHECK(err.code != 0 && err.msg[0], "a refused index gave no error");
		FUZZ_CHECK(!pi.fr, "a refused index kept its frames");
		return 0;
	}
	FUZZ_CHECK(tail <= n, "an index longer than the file was accepted");
	uint64_t sum = 0;

	for (size_t i = 0; i < pi.nfr; i++) {
		FUZZ_CHECK(pi.fr[i][2] > 0 && pi.fr[i][1] < c.idx, "frame %zu empty or past the frames",
			   i);
		FUZZ_CHECK(!i || (pi.fr[i][0] > pi.fr[i - 1][0] && pi.fr[i][1] > pi.fr[i - 1][1]),
			   "frames out of order at %zu", i);
		sum += pi.fr[i][2];
	}
	FUZZ_CHECK(sum == c.records, "the frames hold %llu records, the record says %llu",
		   (unsigned long long)sum, (unsigned long long)c.records);
	read_back(d, n, &c, &pi, step, lo, hi);
	free(pi.fr);
	return 0;
}
