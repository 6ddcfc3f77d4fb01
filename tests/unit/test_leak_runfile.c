/*
 * Unit tests for a cluster leak check's reference runs (leakcheck/runfile.c)
 * and its scratch place (leakcheck/work.c, a directory): a run written from
 * sorted references reads back, window by window, exactly the references
 * of each window's ids, and a run that is cut, corrupt or at odds with its
 * done record is refused (JO_EPROTO), never read as fewer references. The
 * place refuses what is not one (another scheme, a missing directory, a
 * bucket without a prefix, a directory inside the volume's objects).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/extsort.h"
#include "common/file.h"
#include "common/jfs/jfs.h"
#include "leakcheck/leak.h"
#include "support/testutil.h"

#define NEXT_CHUNK 20000u
#define NREFS 300

struct fx {
	char dir[128];
	struct leak_work *w;
	struct leak_run_counts c;
	uint64_t ids[NREFS];
	uint64_t step;
};

/* ids spread over a few cells, some cells empty, a duplicate. */
static uint64_t ref_id(int i)
{
	return i == NREFS - 1 ? 4321 : (uint64_t)(i * 37 % 9000) + (i % 3 ? 0 : 10000);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct jo_xsort *xs = NULL;
	struct leak_density d;
	struct leak_run_w rw;
	struct jo_err err = { 0 };

	assert_non_null(fx);
	assert_int_equal(tu_mkdtemp(fx->dir, sizeof(fx->dir), "leakrun"), 0);
	assert_int_equal(leak_work_open(&fx->w, fx->dir, NULL, NULL, &err), 0);
	assert_int_equal(leak_density_init(&d, NEXT_CHUNK, 65536), 0);
	xo.mem_limit = 1u << 20;
	xo.tmp_dir = fx->dir;
	assert_int_equal(jo_xsort_new(&xs, &xo, &err), 0);
	for (int i = 0; i < NREFS; i++) {
		uint8_t rec[LEAK_REF_REC_LEN];

		fx->ids[i] = ref_id(i);
		leak_ref_encode(rec, fx->ids[i], 65536, 0);
		assert_int_equal(jo_xsort_add(xs, rec, sizeof(rec), &err), 0);
		leak_density_add(&d, fx->ids[i], 65536);
	}
	qsort(fx->ids, NREFS, sizeof(fx->ids[0]), cmp_u64);
	assert_int_equal(jo_xsort_finish(xs, &err), 0);
	assert_int_equal(leak_work_mkdir(fx->w, "job", false, &err), 0);
	assert_int_equal(leak_run_w_open(&rw, fx->w, "job/run", &err), 0);
	assert_int_equal(leak_part_write(&rw, xs, &d, &fx->c, &err), 0);
	assert_int_equal(leak_run_w_close(&rw, true, &err), 0);
	fx->step = leak_range_step(&d);
	jo_xsort_free(xs);
	leak_density_free(&d);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	leak_work_close(fx->w);
	tu_rm_rf(fx->dir);
	free(fx);
	return 0;
}

/* Read ids [lo, hi) of job/run through a one-part merge: its records (n) or a code. */
static int read_window(struct fx *fx, const struct leak_run_counts *c, uint64_t lo, uint64_t hi,
		       uint64_t *out, size_t *n, struct jo_err *err)
{
	struct leak_parts_src src = { 0 };
	struct leak_part_idx pi;
	uint64_t off, len, recs;
	const void *rec;
	size_t rl;
	int rc;

	*n = 0;
	src.r = calloc(1, sizeof(*src.r));
	src.rd = calloc(1, sizeof(*src.rd));
	src.have = calloc(1, sizeof(*src.have));
	src.cur = calloc(1, sizeof(*src.cur));
	src.n = 1;
	src.lo = lo;
	src.hi = hi;
	rc = leak_work_ropen(fx->w, "job/run", &src.rd[0], err);
	if (!rc)
		rc = leak_part_load(src.rd[0], c, &pi, NULL, err);
	if (!rc) {
		leak_part_window(&pi, fx->step, lo, hi, &off, &len, &recs);
		free(pi.fr);
		rc = leak_run_r_open(&src.r[0], src.rd[0], off, len, recs, err);
	}
	while (!rc && (rc = leak_parts_next(&src, &rec, &rl, err)) == 1) {
		uint32_t size;
		int cls;

		leak_ref_decode(rec, &out[*n], &size, &cls);
		(*n)++;
		rc = 0;
	}
	leak_parts_free(&src);
	return rc;
}

static void run_reads_back_by_window(void **state)
{
	struct fx *fx = *state;
	uint64_t got[NREFS];
	struct jo_err err = { 0 };
	size_t n, total = 0;

	assert_int_equal(fx->c.records, NREFS);
	assert_true(fx->c.frames > 3);
	assert_int_equal(fx->c.bytes, (uint64_t)fx->c.idx + fx->c.frames * 24 + fx->c.dens * 16);
	/* the whole run */
	assert_int_equal(read_window(fx, &fx->c, 0, UINT64_MAX, got, &n, &err), 0);
	assert_int_equal(n, NREFS);
	assert_memory_equal(got, fx->ids, sizeof(fx->ids));
	/* windows of whole cells: each exactly its ids, together all of them */
	for (uint64_t lo = 0; lo < 12000; lo += 3 * fx->step) {
		uint64_t hi = lo + 3 * fx->step >= 12000 ? UINT64_MAX : lo + 3 * fx->step;
		size_t want = 0;

		assert_int_equal(read_window(fx, &fx->c, lo, hi, got, &n, &err), 0);
		for (int i = 0; i < NREFS; i++)
			if (fx->ids[i] >= lo && fx->ids[i] < hi)
				assert_int_equal(got[want++], fx->ids[i]);
		assert_int_equal(n, want);
		total += n;
	}
	assert_int_equal(total, NREFS);
}

static void run_at_odds_is_refused(void **state)
{
	struct fx *fx = *state;
	uint64_t got[NREFS];
	struct jo_err err = { 0 };
	struct leak_run_counts c;
	char path[256];
	size_t n;
	int fd;

	/* a done record that counts another number of records, or frames */
	c = fx->c;
	c.records++;
	assert_int_equal(read_window(fx, &c, 0, UINT64_MAX, got, &n, &err), JO_EPROTO);
	c = fx->c;
	c.frames--;
	c.dens++;
	c.idx += 8;
	assert_int_equal(read_window(fx, &c, 0, UINT64_MAX, got, &n, &err), JO_EPROTO);
	/* a byte changed inside the first frame: zstd's checksum (or the decoder) refuses it */
	snprintf(path, sizeof(path), "%s/job/run", fx->dir);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;

	assert_int_equal(pread(fd, &b, 1, 20), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 20), 1);
	err = (struct jo_err){ 0 };
	assert_int_equal(read_window(fx, &fx->c, 0, UINT64_MAX, got, &n, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "job/run"));
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, 20), 1);
	assert_int_equal(read_window(fx, &fx->c, 0, UINT64_MAX, got, &n, &err), 0);
	/* cut short: its size is not the done record's */
	assert_int_equal(ftruncate(fd, (off_t)fx->c.bytes - 1), 0);
	close(fd);
	assert_int_equal(read_window(fx, &fx->c, 0, UINT64_MAX, got, &n, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "bytes its done record says"));
}

/* An index that lies about its frames: records of a cell read for another range. */
static void index_that_lies_is_caught(void **state)
{
	struct fx *fx = *state;
	uint64_t got[NREFS];
	struct jo_err err = { 0 };
	char path[256];
	uint8_t cell[8];
	size_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/job/run", fx->dir);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	/* the first frame's cell said to be the last cell's + 1: still ascending */
	assert_int_equal(pread(fd, cell, 8, (off_t)fx->c.idx), 8);
	memset(cell, 0, sizeof(cell));
	assert_int_equal(pwrite(fd, cell, 8, (off_t)fx->c.idx), 8);
	/* frame 1's cell moved past every other: the index is no longer ascending */
	cell[0] = 0xff;
	assert_int_equal(pwrite(fd, cell, 8, (off_t)fx->c.idx + 24), 8);
	close(fd);
	assert_int_equal(read_window(fx, &fx->c, 0, UINT64_MAX, got, &n, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "malformed index"));
}

static void place_refusals(void **state)
{
	struct fx *fx = *state;
	struct leak_work *w = NULL;
	struct jo_err err = { 0 };
	char sub[200], vol[200];

	assert_int_equal(leak_work_open(&w, "gs://bucket/p", NULL, NULL, &err), JO_EINVAL);
	assert_null(w);
	snprintf(sub, sizeof(sub), "%s/none", fx->dir);
	assert_int_equal(leak_work_open(&w, sub, NULL, NULL, &err), JO_EINVAL);
	assert_int_equal(leak_work_open(&w, "s3://bucket", NULL, NULL, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "prefix"));
	assert_int_equal(leak_work_open(&w, "s3://bucket/p?secret_key=x", NULL, NULL, &err),
			 JO_EINVAL);
	assert_null(strstr(err.msg, "=x"));
	/* inside a file volume's NAME/: refused; beside it: taken */
	struct jo_vol v = { 0 };

	v.fmt.storage = (char *)"file";
	v.fmt.bucket = fx->dir;
	v.fmt.name = (char *)"vol";
	snprintf(vol, sizeof(vol), "%s/vol", fx->dir);
	assert_int_equal(mkdir(vol, 0700), 0);
	snprintf(sub, sizeof(sub), "%s/vol/work", fx->dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	assert_int_equal(leak_work_open(&w, sub, NULL, NULL, &err), 0);
	assert_int_equal(leak_work_check(w, &v, &err), JO_EINVAL);
	assert_non_null(strstr(err.msg, "inside the volume"));
	leak_work_close(w);
	assert_int_equal(leak_work_check(fx->w, &v, &err), 0);
	assert_true(leak_work_local(fx->w));
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(run_reads_back_by_window),
		T(run_at_odds_is_refused),
		T(index_that_lies_is_caught),
		T(place_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
