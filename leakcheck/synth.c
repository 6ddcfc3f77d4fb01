/*
 * leakcheck: a synthetic workload for bench/leakcheck. N referenced slices of
 * one block each and N block objects in scrambled order, where 1% of the
 * referenced blocks have no object (missing) and 1% of the objects have no
 * reference (leaked), pushed through the same extsort + merge as a real run.
 * Optionally writes the same keys as text ("ID_INDX" lines) for GNU sort/comm.
 */
#include "leakcheck/leak.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/err.h"
#include "common/extsort.h"
#include "common/file.h"

#define SYN_BS (4u << 20)

/* Scramble i into a unique id in [1, 2^40): an odd multiplier mod 2^40. */
static uint64_t syn_id(uint64_t i)
{
	return ((i + 1) * 0x9E3779B97F4A7C15ULL & ((1ULL << 40) - 1)) | 1ULL << 40;
}

static bool syn_has_ref(uint64_t i)
{
	return i % 100 != 7;    /* 1%: object without reference (leaked) */
}

static bool syn_has_obj(uint64_t i)
{
	return i % 100 != 42;   /* 1%: reference without object (missing) */
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int leak_synth_keys(uint64_t n, const char *refs_path, const char *objs_path, struct jo_err *err)
{
	struct jo_file *fr = NULL, *fo = NULL;
	int rc;

	rc = jo_file_create(&fr, refs_path, JO_FILE_PUBLIC, JO_FILE_STDIO, err);
	if (!rc)
		rc = jo_file_create(&fo, objs_path, JO_FILE_PUBLIC, JO_FILE_STDIO, err);
	if (rc) {
		jo_err_wrap(err, "synthetic: key files");
		goto out;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t id = syn_id(i);

		if (syn_has_ref(i))
			fprintf(fr->fp, "%llu_0\n", (unsigned long long)id);
		if (syn_has_obj(i))
			fprintf(fo->fp, "%llu_0\n", (unsigned long long)id);
	}
	rc = jo_file_commit(fr, err);
	if (!rc)
		rc = jo_file_commit(fo, err);
	if (rc)
		jo_err_wrap(err, "synthetic: key files");
out:
	jo_file_abort(fr);
	jo_file_abort(fo);
	return rc;
}

int leak_synth_run(uint64_t n, size_t mem, const char *tmp, struct leak_synth_result *res,
		   struct jo_err *err)
{
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	struct jo_xsort *xr = NULL, *xob = NULL;
	struct leak_merge_opts mo = {
		.block_size = SYN_BS, .next_chunk = UINT64_MAX, .cutoff = INT64_MAX,
	};
	uint8_t rec[LEAK_OBJ_REC_LEN];
	double t0 = mono(), t1, t2;
	int rc;

	memset(res, 0, sizeof(*res));
	xo.mem_limit = mem / 2;
	xo.tmp_dir = tmp;
	xo.threads = 2;
	rc = jo_xsort_new(&xr, &xo, err);
	if (!rc)
		rc = jo_xsort_new(&xob, &xo, err);
	for (uint64_t i = 0; i < n && !rc; i++) {
		uint64_t id = syn_id(i);

		if (syn_has_ref(i)) {
			leak_ref_encode(rec, id, SYN_BS, LEAK_REF_USED);
			rc = jo_xsort_add(xr, rec, LEAK_REF_REC_LEN, err);
			res->refs++;
		}
		if (!rc && syn_has_obj(i)) {
			leak_obj_encode(rec, id, 0, SYN_BS, SYN_BS, 1000000000);
			rc = jo_xsort_add(xob, rec, LEAK_OBJ_REC_LEN, err);
			res->objects++;
		}
	}
	if (!rc)
		rc = jo_xsort_finish(xr, err);
	if (!rc)
		rc = jo_xsort_finish(xob, err);
	t1 = mono();
	if (!rc)
		rc = leak_merge(&mo, leak_xsort_next, xr, leak_xsort_next, xob, &res->counts, err);
	t2 = mono();
	res->sort_s = t1 - t0;
	res->merge_s = t2 - t1;
	if (xr)
		jo_xsort_get_stats(xr, &res->xs_refs);
	if (xob)
		jo_xsort_get_stats(xob, &res->xs_objs);
	jo_xsort_free(xr);
	jo_xsort_free(xob);
	return rc;
}
