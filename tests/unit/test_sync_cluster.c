/*
 * test_sync_cluster.c: the pieces of `jfsops sync --cluster`: range
 * boundaries, range listings (exactly [lo, hi), whatever the store's order),
 * the planner, and whole jobs of several workers sharing an SQLite
 * coordinator, against an in-memory object store plugged in through the
 * object client's vtable. The fake lists in byte order, or directory by
 * directory with start-after in that order (as SeaweedFS does), or ignores
 * start-after, and keeps user metadata (a later attempt reads the job's
 * mark back with a HEAD).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/object/object.h"
#include "common/object/object_internal.h"
#include "support/fake_obj.h"
#include "sync/sync.h"

/* ---- the fake store (tests/unit/support/fake_obj.c) ---------------------- */

/* It keeps user metadata: a later attempt reads the job's mark back with a HEAD. */
static struct jo_obj *fake_new(void)
{
	struct jo_obj *o = fake_obj_new();

	fake_store(o)->keep_meta = true;
	return o;
}

static void put_str(struct jo_obj *o, const char *key, const char *s)
{
	fake_set(fake_store(o), key, s, strlen(s), 1000);
}

/* ---- boundaries ---------------------------------------------------------- */

static void test_bound_rules(void **state)
{
	(void)state;
	assert_true(jo_sync_bound_ok("a"));
	assert_true(jo_sync_bound_ok("d/x"));
	assert_true(jo_sync_bound_ok("0"));
	assert_true(jo_sync_bound_ok("\xe6\x97\xa5"));          /* a whole CJK character */
	assert_true(jo_sync_bound_ok("a/\xc3\xa9"));
	assert_true(jo_sync_bound_ok("a/"));
	assert_true(jo_sync_bound_ok("a-b"));
	assert_true(jo_sync_bound_ok("a b"));
	assert_true(jo_sync_bound_ok("a%2"));
	assert_false(jo_sync_bound_ok(""));
	assert_false(jo_sync_bound_ok("\xe6\x97"));               /* a cut UTF-8 sequence */
	assert_false(jo_sync_bound_ok("\xc0\x80"));               /* overlong */
	/* directory-first order: '/' below everything */
	assert_true(jo_sync_dircmp("a/x", "a-b") < 0);
	assert_true(jo_sync_dircmp("a-b", "a.txt") < 0);
	assert_true(jo_sync_dircmp("a", "a/x") < 0);
	assert_true(jo_sync_dircmp("a/x", "a/x") == 0);
	assert_true(jo_sync_dircmp("b", "a/x") > 0);

	/* pred(b): every key >= b is after it in byte order; in directory-first
	 * order too unless b has a byte below '/' (the places list.c probes) */
	const char *bounds[] = { "a", "a0", "b/c", "d/x0", "\xe6\x97\xa5", "a/\xc3\xa9", "z/0", "a1",
				 "a/", "z/", "b/c/" };
	const char *keys[] = { "a", "a/x", "a-b", "a.txt", "a0", "a0/z", "a1", "b", "b/c", "b/c-1",
			       "b/c/d", "b/b", "b-", "d/x0", "d/x0/y", "d/x-", "d/x/1", "\xe6\x97\xa5",
			       "\xe6\x97\xa4x", "\xe6\x97\xa5/a", "a/\xc3\xa9", "a/\xc3\xa8", "a/e",
			       "z/0", "z/", "z/-", "z/00", "zz" };
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		assert_true(jo_sync_bound_ok(bounds[i]));
		char *m = jo_sync_bound_pred(bounds[i]);
		assert_non_null(m);
		assert_true(strcmp(m, bounds[i]) < 0);
		for (size_t j = 0; j < sizeof(keys) / sizeof(keys[0]); j++) {
			if (strcmp(keys[j], bounds[i]) < 0)
				continue;
			assert_true(strcmp(keys[j], m) > 0);
			assert_true(jo_sync_dircmp(keys[j], m) > 0);
		}
		free(m);
	}
}

/* ---- range listings ------------------------------------------------------ */

/* The awkward corpus: directories next to siblings with bytes below '/',
 * percent and plus signs, spaces, unicode, empty names' neighbours. */
static const char *awkward[] = {
	"a/x", "a/y/z", "a%20c", "a+d", "a-b", "a.txt", "a0", "a0/q", "ab", "b", "b/1", "b/2",
	"b-1", "b.2", "b0", "c d/e", "c/d/e", "c/d-e", "c/d.e", "c/d0", "c-x", "d/x/y", "d/x-1",
	"d/x.2", "d/x0", "d/x0/1", "d/y", "e%2Fnot-a-dir", "e+f", "e/f g", "\xc3\xa9t\xc3\xa9/1",
	"\xc3\xa9t\xc3\xa9-2", "\xe6\x97\xa5\xe6\x9c\xac/\xe8\xaa\x9e", "\xe6\x97\xa5-x",
	"\xe6\x97\xa5\xe6\x9c\xac.txt", "z/0", "z/00", "z/0-", "z/", "zz",
};

static void fill_awkward(struct jo_obj *o, const char *prefix)
{
	char k[256];

	for (size_t i = 0; i < sizeof(awkward) / sizeof(awkward[0]); i++) {
		snprintf(k, sizeof(k), "%s%s", prefix, awkward[i]);
		put_str(o, k, awkward[i]);
	}
	put_str(o, "other", "not under the prefix");
}

/* Stream [lo, hi) after `after`: n keys into *out, or the error. */
static int stream_range(struct jo_obj *o, const char *prefix, const char *lo, const char *hi,
			const char *after, enum jo_sync_order ord, char ***out)
{
	struct jo_sync_stream_opts so = { .range = true, .lo = lo, .hi = hi, .order = ord,
					  .after = after, .sort_mem = 1 << 20 };
	struct jo_sync_stream *s = NULL;
	struct jo_err err = { 0 };
	struct jo_sync_ent e;
	char **keys = NULL;
	int n = 0, rc;

	rc = jo_sync_stream_start(&s, o, prefix, &so, &err);
	if (rc)
		return rc;
	while ((rc = jo_sync_stream_next(s, &e, &err)) == 1) {
		keys = realloc(keys, (size_t)(n + 1) * sizeof(*keys));
		keys[n++] = strdup(e.key);
	}
	jo_sync_stream_free(s);
	*out = keys;
	if (rc && rc != JO_SYNC_EORDER)
		print_message("stream [%s, %s): %s\n", lo ? lo : "-", hi ? hi : "+", err.msg);
	if (rc) {
		for (int i = 0; i < n; i++)
			free(keys[i]);
		free(keys);
		*out = NULL;
		return rc;
	}
	return n;
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The keys of the corpus in [lo, hi) after `after`, sorted. */
static int expected(const char *lo, const char *hi, const char *after, const char **want)
{
	int n = 0;

	for (size_t i = 0; i < sizeof(awkward) / sizeof(awkward[0]); i++) {
		const char *k = awkward[i];

		if ((lo && strcmp(k, lo) < 0) || (hi && strcmp(k, hi) >= 0) ||
		    (after && strcmp(k, after) <= 0))
			continue;
		want[n++] = k;
	}
	qsort(want, (size_t)n, sizeof(*want), cmp_strp);
	return n;
}

static void check_range(struct jo_obj *o, const char *lo, const char *hi, const char *after)
{
	const char *want[64];
	int nw = expected(lo, hi, after, want);
	enum jo_sync_order ords[] = { JO_SYNC_ORDER_BYTES, JO_SYNC_ORDER_DIRFIRST,
				      JO_SYNC_ORDER_ANY };
	bool dirfirst = fake_store(o)->dir_first;

	for (size_t oi = 0; oi < 3; oi++) {
		char **got = NULL;
		int n = stream_range(o, "p/", lo, hi, after, ords[oi], &got);

		if (n == JO_SYNC_EORDER) {
			/*
			 * never wrong, at worst an order break (then the engine lists
			 * the range again in the next weaker order): ANY never breaks,
			 * nor the store's own order
			 */
			assert_true(ords[oi] != JO_SYNC_ORDER_ANY);
			if (dirfirst)
				assert_true(ords[oi] == JO_SYNC_ORDER_BYTES);
			else
				assert_true(ords[oi] == JO_SYNC_ORDER_DIRFIRST);
			continue;
		}
		if (n != nw) {
			print_message("range [%s, %s) after %s, order %zu: %d keys, want %d\n",
				      lo ? lo : "-", hi ? hi : "+", after ? after : "-", oi, n, nw);
			for (int i = 0; i < n; i++)
				print_message("  got %s\n", got[i]);
		}
		assert_int_equal(n, nw);
		for (int i = 0; i < n; i++) {
			assert_string_equal(got[i], want[i]);
			free(got[i]);
		}
		free(got);
	}
}

static void range_listings(bool dir_first, bool ignore_sa)
{
	struct jo_obj *o = fake_new();
	const char *bounds[] = { NULL, "a+", "a-b", "a.t", "a/", "a/y", "a0", "a0/q", "b", "b-1", "b/",
				 "b/2", "c", "c d", "c/d", "c/d-e", "c/d0", "d/x", "d/x-1", "d/x.",
				 "d/x0", "d/x0/1", "e%", "e/f", "z/0", "z/0-", "z/00", "\xc3\xa9t\xc3\xa9",
				 "\xe6\x97\xa5", "\xe6\x97\xa5\xe6\x9c\xac", NULL };
	size_t nb = sizeof(bounds) / sizeof(bounds[0]);

	fake_store(o)->dir_first = dir_first;
	fake_store(o)->ignore_start_after = ignore_sa;
	fill_awkward(o, "p/");
	/* every pair of bounds, and resume points inside */
	for (size_t i = 0; i + 1 < nb; i++) {
		for (size_t j = i + 1; j < nb; j++) {
			if (bounds[i] && bounds[j] && strcmp(bounds[i], bounds[j]) >= 0)
				continue;
			if (!bounds[j] && j != nb - 1)
				continue;
			check_range(o, bounds[i], bounds[j], NULL);
			for (size_t a = 0; a < sizeof(awkward) / sizeof(awkward[0]); a += 3)
				if ((!bounds[i] || strcmp(awkward[a], bounds[i]) >= 0) &&
				    (!bounds[j] || strcmp(awkward[a], bounds[j]) < 0))
					check_range(o, bounds[i], bounds[j], awkward[a]);
		}
	}
	/* consecutive ranges cover every key exactly once */
	int total = 0;
	for (size_t i = 0; i + 1 < nb; i++) {
		char **got = NULL;
		int n = stream_range(o, "p/", bounds[i], bounds[i + 1], NULL, JO_SYNC_ORDER_ANY, &got);

		assert_true(n >= 0);
		total += n;
		for (int k = 0; k < n; k++)
			free(got[k]);
		free(got);
	}
	assert_int_equal(total, (int)(sizeof(awkward) / sizeof(awkward[0])));
	jo_obj_close(o);
}

static void test_range_listings_bytes(void **state)
{
	(void)state;
	range_listings(false, false);
}

static void test_range_listings_dirfirst(void **state)
{
	(void)state;
	range_listings(true, false);
}

static void test_range_listings_ignore_start_after(void **state)
{
	(void)state;
	range_listings(false, true);
	range_listings(true, true);
}

static void test_range_bounds_refused(void **state)
{
	(void)state;
	struct jo_obj *o = fake_new();
	char **got = NULL;

	assert_int_equal(stream_range(o, "p/", "\xe6\x97", NULL, NULL, JO_SYNC_ORDER_BYTES, &got),
			 JO_EINVAL);
	assert_int_equal(stream_range(o, "p/", "b", "a", NULL, JO_SYNC_ORDER_BYTES, &got), JO_EINVAL);
	jo_obj_close(o);
}

/* ---- the planner --------------------------------------------------------- */

static void fill_dirs(struct jo_obj *o, const char *prefix, int n)
{
	char k[256];

	for (int i = 0; i < n; i++) {
		/* a few hundred directories of uneven sizes, and flat keys beside them */
		int d = (i * 7919) % 257;
		if (i % 5 == 0)
			snprintf(k, sizeof(k), "%sflat-%07d", prefix, i);
		else if (d < 40)
			snprintf(k, sizeof(k), "%sbig/%03d/obj %07d.bin", prefix, d, i);
		else
			snprintf(k, sizeof(k), "%sd%03d/%s%07d", prefix, d, i % 3 ? "x" : "y-", i);
		put_str(o, k, "v");
	}
}

static void check_plan(struct jo_obj *src, struct jo_obj *dst, int want, int total)
{
	struct jo_sync_plan_opts po = { .ranges = want };
	struct jo_sync_plan pl;
	struct jo_err err = { 0 };

	assert_int_equal(jo_sync_plan_make(src, "p/", dst, "p/", &po, &pl, &err), 0);
	assert_true(pl.nbounds + 1 <= (size_t)want);
	assert_true(pl.nbounds + 1 >= (size_t)want / 2);
	for (size_t i = 0; i < pl.nbounds; i++) {
		assert_true(jo_sync_bound_ok(pl.bounds[i]));
		if (i)
			assert_true(strcmp(pl.bounds[i - 1], pl.bounds[i]) < 0);
	}
	/* the ranges hold every key once, and none is far heavier than the mean */
	int seen = 0, most = 0;
	for (size_t i = 0; i <= pl.nbounds; i++) {
		char **got = NULL;
		int n = stream_range(src, "p/", i ? pl.bounds[i - 1] : NULL,
				     i < pl.nbounds ? pl.bounds[i] : NULL, NULL, JO_SYNC_ORDER_ANY, &got);

		assert_true(n >= 0);
		seen += n;
		if (n > most)
			most = n;
		for (int k = 0; k < n; k++)
			free(got[k]);
		free(got);
	}
	assert_int_equal(seen, total);
	double mean = (double)total / (double)(pl.nbounds + 1);
	print_message("plan: %zu ranges, heaviest %d keys, mean %.0f, %d requests\n",
		      pl.nbounds + 1, most, mean, pl.probes);
	assert_true(most <= 2.5 * mean);
	jo_sync_plan_release(&pl);
}

static void test_plan_balanced(void **state)
{
	(void)state;
	struct jo_obj *src = fake_new(), *dst = fake_new();

	fill_dirs(src, "p/", 20000);
	check_plan(src, dst, 16, 20000);
	check_plan(src, dst, 64, 20000);
	/* the same corpus on a directory-first store */
	fake_store(src)->dir_first = true;
	check_plan(src, dst, 16, 20000);
	/* a store that ignores start-after is sampled page by page */
	fake_store(src)->dir_first = false;
	fake_store(src)->ignore_start_after = true;
	check_plan(src, dst, 16, 20000);
	jo_obj_close(src);
	jo_obj_close(dst);
}

static void test_plan_awkward_and_tiny(void **state)
{
	(void)state;
	struct jo_obj *src = fake_new(), *dst = fake_new();
	struct jo_sync_plan pl;
	struct jo_err err = { 0 };
	struct jo_sync_plan_opts po = { .ranges = 8 };

	/* nothing at all: one range */
	assert_int_equal(jo_sync_plan_make(src, "p/", dst, "p/", &po, &pl, &err), 0);
	assert_int_equal(pl.nbounds, 0);
	jo_sync_plan_release(&pl);
	fill_awkward(src, "p/");
	fill_awkward(dst, "p/");
	assert_int_equal(jo_sync_plan_make(src, "p/", dst, "p/", &po, &pl, &err), 0);
	assert_true(pl.nbounds >= 2);
	for (size_t i = 0; i < pl.nbounds; i++)
		assert_true(jo_sync_bound_ok(pl.bounds[i]));
	jo_sync_plan_release(&pl);
	fake_store(src)->dir_first = true;
	assert_int_equal(jo_sync_plan_make(src, "p/", NULL, "p/", &po, &pl, &err), 0);
	assert_int_equal(pl.src_order, JO_SYNC_ORDER_DIRFIRST);
	jo_sync_plan_release(&pl);
	jo_obj_close(src);
	jo_obj_close(dst);
}


/* ---- whole jobs on an SQLite coordinator --------------------------------- */

#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "support/testutil.h"
#include <jansson.h>
#include <sys/stat.h>

static char g_dir[256];
static int g_seq;

static void coord_url(char *buf, size_t n)
{
	snprintf(buf, n, "sqlite3://%s/coord-%d.db", g_dir, ++g_seq);
}

static struct jo_sync_opts job_opts(void)
{
	struct jo_sync_opts o = { .transfers = 4, .list_threads = 1, .part_concurrency = 1,
				  .part_size = 5u << 20, .multipart_threshold = 64u << 20,
				  .max_delete = -1, .sort_mem = 1 << 20, .no_metadata = true };
	return o;
}

struct worker_arg {
	struct jo_objurl *src, *dst;
	struct jo_obj *so, *dobj;
	struct jo_sync_opts o;
	struct jo_sync_cluster_opts co;
	char worker[32];
	struct jo_sync_cluster_result res;
	int rc;
	struct jo_err err;
};

static void *worker_thread(void *p)
{
	struct worker_arg *w = p;

	w->co.worker = w->worker;
	w->rc = jo_sync_cluster_run(w->src, w->so, w->dst, w->dobj, &w->o, &w->co, &w->res, &w->err);
	if (w->rc)
		print_message("%s: %s\n", w->worker, w->err.msg);
	return NULL;
}

static void fill_job(struct jo_obj *o, int n)
{
	char k[128], v[64];

	for (int i = 0; i < n; i++) {
		/* directories next to siblings below '/', and flat keys */
		if (i % 4 == 0)
			snprintf(k, sizeof(k), "src/flat-%05d", i);
		else if (i % 4 == 1)
			snprintf(k, sizeof(k), "src/d%02d/x%05d", i % 23, i);
		else if (i % 4 == 2)
			snprintf(k, sizeof(k), "src/d%02d-y/%05d", i % 23, i);
		else
			snprintf(k, sizeof(k), "src/d%02d.z%05d", i % 23, i);
		snprintf(v, sizeof(v), "value %d", i);
		put_str(o, k, v);
	}
}

/* DST holds the same keys (under its prefix) with the same bytes as SRC. */
static int same_tree(struct jo_obj *a, const char *pa, struct jo_obj *b, const char *pb)
{
	struct fake_store *x = fake_store(a), *y = fake_store(b);
	size_t la = strlen(pa), lb = strlen(pb), na = 0, nb = 0;

	for (size_t i = 0; i < x->n; i++) {
		if (strncmp(x->o[i].key, pa, la))
			continue;
		na++;
		char k[1200];
		snprintf(k, sizeof(k), "%s%s", pb, x->o[i].key + la);
		ssize_t j = fake_find(y, k);
		if (j < 0 || y->o[j].len != x->o[i].len || memcmp(y->o[j].data, x->o[i].data, x->o[i].len))
			return -1;
	}
	for (size_t i = 0; i < y->n; i++)
		if (!strncmp(y->o[i].key, pb, lb))
			nb++;
	return na == nb ? (int)na : -2;
}

/*
 * A cluster job: its two fake stores, its sides (SRC mem://a src/, DST
 * mem://b dst/), its coordinator URL and its namespace.
 */
struct job {
	struct jo_obj *so, *dobj;
	struct jo_objurl src, dst;
	char url[512], ns[17];
};

static void job_start(struct job *j)
{
	j->so = fake_new();
	j->dobj = fake_new();
	fake_side(&j->src, "s3:", "mem://a", "src/");
	fake_side(&j->dst, "s3:", "mem://b", "dst/");
	coord_url(j->url, sizeof(j->url));
}

static void job_end(struct job *j)
{
	jo_objurl_free(&j->src);
	jo_objurl_free(&j->dst);
	jo_obj_close(j->so);
	jo_obj_close(j->dobj);
}

/* A worker of job j, with the job's default options. */
static void job_worker(struct worker_arg *w, struct job *j)
{
	memset(w, 0, sizeof(*w));
	w->src = &j->src;
	w->dst = &j->dst;
	w->so = j->so;
	w->dobj = j->dobj;
	w->o = job_opts();
}

/* Run worker w again as another job of j (namespace and name NAME,
 * fingerprint FP); it must succeed. */
static void run_as_job(struct worker_arg *w, struct job *j, const char *name, const char *fp)
{
	jo_sync_job_ns(name, true, j->ns);
	w->co.ns = j->ns;
	w->co.name = name;
	w->co.fp = fp;
	worker_thread(w);
	assert_int_equal(w->rc, 0);
}

static void test_cluster_job_threads(void **state)
{
	(void)state;
	struct job j;
	struct worker_arg w[3];
	pthread_t th[3];

	job_start(&j);
	fake_store(j.so)->dir_first = true;  /* SeaweedFS-like SRC */
	fill_job(j.so, 3000);
	put_str(j.dobj, "dst/flat-00004", "stale, other size");
	jo_sync_job_ns("threads", true, j.ns);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 3; i++) {
		job_worker(&w[i], &j);
		w[i].co = (struct jo_sync_cluster_opts){ .url = j.url, .ns = j.ns, .name = "threads",
							 .fp = "fp1", .lease_ms = 3000, .ranges = 12,
							 .max_attempts = 3, .checkpoint_s = 0.05 };
		snprintf(w[i].worker, sizeof(w[i].worker), "w%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, worker_thread, &w[i]), 0);
	}
	int ranges = 0;
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].rc, 0);
		assert_true(w[i].res.finished);
		assert_string_equal(w[i].res.status, "ok");
		ranges += w[i].res.ranges_mine;
	}
	/* every range done exactly once, every object copied once */
	assert_int_equal(ranges, w[0].res.ranges);
	assert_true(w[0].res.ranges >= 6);
	assert_int_equal(w[0].res.job.copied, 3000);
	assert_int_equal(w[0].res.job.src_listed, 3000);
	assert_int_equal(same_tree(j.so, "src/", j.dobj, "dst/"), 3000);
	/* a finished job says so, and does nothing */
	struct worker_arg again = w[0];
	snprintf(again.worker, sizeof(again.worker), "late");
	int puts = fake_store(j.dobj)->puts;
	worker_thread(&again);
	assert_int_equal(again.rc, 0);
	assert_true(again.res.was_finished);
	assert_int_equal(fake_store(j.dobj)->puts, puts);
	/* the same --id for another sync is refused */
	again.co.fp = "fp2";
	worker_thread(&again);
	assert_int_equal(again.rc, JO_EINVAL);
	job_end(&j);
}

/* A worker that died after copying some keys, before recording them. */
static void test_cluster_counts_a_dead_workers_copies(void **state)
{
	(void)state;
	struct job j;
	struct worker_arg w;
	struct jo_meta *m;
	struct jo_meta_open_opts mo = { .coordinator_only = true };
	struct jo_err err = { 0 };

	job_start(&j);
	fill_job(j.so, 400);
	jo_sync_job_ns("crash", true, j.ns);
	job_worker(&w, &j);
	w.co = (struct jo_sync_cluster_opts){ .url = j.url, .ns = j.ns, .name = "crash", .fp = "fp",
					      .lease_ms = 1000, .ranges = 4, .max_attempts = 3,
					      .checkpoint_s = 60, .mode = JO_SYNC_CLUSTER_PLAN };
	snprintf(w.worker, sizeof(w.worker), "planner");
	worker_thread(&w);
	assert_int_equal(w.rc, 0);
	assert_false(w.res.finished);

	/* the dead worker: claims range 0, records that it copies from here, copies
	 * the first 30 keys of the range with the job's mark, then vanishes */
	assert_int_equal(jo_meta_open_with(&m, j.url, &mo, &err), 0);
	struct jo_mut_task t;
	assert_int_equal(jo_mut_task_claim(m, j.ns, "dead", 300, &t, &err), 0);
	assert_string_equal(t.kind, "range");
	int idx = atoi(t.items + 1);
	char *plan = NULL, key[32];
	assert_int_equal(jo_mut_rec_get(m, j.ns, "plan", &plan, &err), 0);
	json_t *pj = json_loads(plan, 0, NULL);
	char mark[64];
	snprintf(mark, sizeof(mark), "%s.%s", j.ns, json_string_value(json_object_get(pj, "nonce")));
	json_decref(pj);
	free(plan);
	struct jo_mut_rec_cond held = { .task_id = t.id, .owner = "dead" };
	snprintf(key, sizeof(key), "pos:%06d", idx);
	assert_int_equal(jo_mut_rec_put(m, j.ns, key, "{\"uncounted\":true,\"by\":\"dead\",\"att\":1}",
					&held, NULL, &err), 0);
	char *def = NULL;
	snprintf(key, sizeof(key), "def:%06d", idx);
	assert_int_equal(jo_mut_rec_get(m, j.ns, key, &def, &err), 0);
	free(def);
	jo_mut_task_release_mem(&t);
	/* range 0 starts at the beginning: its first keys in byte order */
	int copied = 0;
	for (size_t i = 0; i < fake_store(j.so)->n && copied < 30; i++) {
		struct fake_obj *ob = &fake_store(j.so)->o[i];
		char dk[256];
		const char *meta[] = { "jfsops-job", mark, "jfsops-src-etag", ob->etag, "mtime", "1000", NULL };
		struct jo_obj_put_opts po = { .meta = meta };

		if (strncmp(ob->key, "src/", 4))
			continue;
		snprintf(dk, sizeof(dk), "dst/%s", ob->key + 4);
		assert_int_equal(jo_obj_put(j.dobj, dk, ob->data, ob->len, &po, &err), 0);
		copied++;
	}
	/* one more with another job's mark: an older copy, not this job's */
	jo_meta_close(m);
	usleep(400000);  /* its lease runs out */

	w.co.mode = JO_SYNC_CLUSTER_ALL;
	w.co.checkpoint_s = 0.05;
	snprintf(w.worker, sizeof(w.worker), "rescuer");
	worker_thread(&w);
	assert_int_equal(w.rc, 0);
	assert_true(w.res.finished);
	assert_string_equal(w.res.status, "ok");
	/* the dead worker's 30 copies count once: the job copied each object once */
	assert_int_equal(w.res.job.copied, 400);
	assert_int_equal(w.res.job.credited, 30);
	assert_int_equal(w.res.job.skipped, 0);
	assert_int_equal(same_tree(j.so, "src/", j.dobj, "dst/"), 400);
	job_end(&j);
}

static void test_cluster_deletes_after_every_range(void **state)
{
	(void)state;
	struct job j;
	struct worker_arg w;

	job_start(&j);
	fill_job(j.so, 600);
	put_str(j.dobj, "dst/aaa-extra", "x");
	put_str(j.dobj, "dst/d05/extra", "x");
	put_str(j.dobj, "dst/zzz/extra", "x");
	job_worker(&w, &j);
	w.o.delete_dst = true;
	w.o.max_delete = 2;
	jo_sync_job_ns("del1", true, j.ns);
	w.co = (struct jo_sync_cluster_opts){ .url = j.url, .ns = j.ns, .name = "del1", .fp = "fp-d1",
					      .lease_ms = 3000, .ranges = 8, .max_attempts = 3,
					      .checkpoint_s = 0.05 };
	snprintf(w.worker, sizeof(w.worker), "w");
	/* three extras over the whole job, --max-delete 2: nothing deleted */
	worker_thread(&w);
	assert_int_equal(w.rc, 0);
	assert_string_equal(w.res.status, "refused");
	assert_true(w.res.job.delete_refused);
	assert_int_equal(w.res.job.extra, 3);
	assert_true(fake_find(fake_store(j.dobj), "dst/aaa-extra") >= 0);
	assert_true(fake_find(fake_store(j.dobj), "dst/zzz/extra") >= 0);
	/* a second job (other options): its own ranges, and it deletes */
	w.o.max_delete = 3;
	run_as_job(&w, &j, "del2", "fp-d2");
	assert_string_equal(w.res.status, "ok");
	assert_int_equal(w.res.job.deleted, 3);
	assert_int_equal(w.res.job.copied, 0);   /* the first job copied everything */
	assert_int_equal(same_tree(j.so, "src/", j.dobj, "dst/"), 600);
	/* the deletions came after the last range was done */
	struct jo_meta *m;
	struct jo_meta_open_opts mo = { .coordinator_only = true };
	struct jo_err err = { 0 };
	assert_int_equal(jo_meta_open_with(&m, j.url, &mo, &err), 0);
	char *gate = NULL;
	assert_int_equal(jo_mut_rec_get(m, j.ns, "gate", &gate, &err), 0);
	json_t *g = json_loads(gate, 0, NULL);
	int64_t gate_at = json_integer_value(json_object_get(g, "at"));
	json_decref(g);
	free(gate);
	for (int i = 0; i < w.res.ranges; i++) {
		char key[32], *v = NULL;

		snprintf(key, sizeof(key), "done:%06d", i);
		assert_int_equal(jo_mut_rec_get(m, j.ns, key, &v, &err), 0);
		json_t *d = json_loads(v, 0, NULL);
		assert_true(json_integer_value(json_object_get(d, "at")) <= gate_at);
		json_decref(d);
		free(v);
		snprintf(key, sizeof(key), "ddone:%06d", i);
		if (jo_mut_rec_get(m, j.ns, key, &v, &err) == 0) {
			d = json_loads(v, 0, NULL);
			assert_true(json_integer_value(json_object_get(d, "started")) >= gate_at);
			json_decref(d);
			free(v);
		}
	}
	jo_meta_close(m);
	/* an empty source never deletes, whatever the brake */
	struct jo_obj *empty = fake_new();
	w.so = empty;
	w.o.max_delete = -1;
	run_as_job(&w, &j, "del3", "fp-d3");
	assert_string_equal(w.res.status, "refused");
	assert_int_equal(same_tree(j.so, "src/", j.dobj, "dst/"), 600);
	jo_obj_close(empty);
	job_end(&j);
}

static int cluster_setup(void **state)
{
	(void)state;
	return tu_mkdtemp(g_dir, sizeof(g_dir), "jo-cluster-test");
}

static int cluster_teardown(void **state)
{
	(void)state;
	return tu_rm_rf(g_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bound_rules),
		cmocka_unit_test(test_range_listings_bytes),
		cmocka_unit_test(test_range_listings_dirfirst),
		cmocka_unit_test(test_range_listings_ignore_start_after),
		cmocka_unit_test(test_range_bounds_refused),
		cmocka_unit_test(test_plan_balanced),
		cmocka_unit_test(test_plan_awkward_and_tiny),
		cmocka_unit_test(test_cluster_job_threads),
		cmocka_unit_test(test_cluster_counts_a_dead_workers_copies),
		cmocka_unit_test(test_cluster_deletes_after_every_range),
	};

	return cmocka_run_group_tests(tests, cluster_setup, cluster_teardown);
}
