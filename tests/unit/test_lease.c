/*
 * test_lease.c: task records and leases (common/lease.h, jo_mut_task_*) on a
 * real Redis (a private redis-server child) and an on-disk SQLite database,
 * including claim races between many threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cluster.h"
#include "common/err.h"
#include "common/lease.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "gc_testutil.h"

static struct gct_redis g_redis;
static bool g_have_redis;
static char g_dir[256];
static char g_redis_url[128], g_sqlite_url[512];

#define NS "t"

static const char fmt_json[] =
	"{\"Name\":\"vol\",\"UUID\":\"11111111-2222-3333-4444-555555555555\",\"Storage\":\"file\","
	"\"Bucket\":\"/tmp/none/\",\"BlockSize\":4096,\"TrashDays\":0,\"MetaVersion\":1}";

static void make_sqlite(const char *path)
{
	sqlite3 *db;
	char *sql;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	sql = sqlite3_mprintf("PRAGMA journal_mode=WAL; CREATE TABLE jfs_setting (name VARCHAR(255) "
			      "PRIMARY KEY, value TEXT); INSERT INTO jfs_setting VALUES('format', %Q);",
			      fmt_json);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_free(sql);
	sqlite3_close(db);
}

static int group_setup(void **state)
{
	char path[300];

	(void)state;
	assert_int_equal(gct_mkdtemp(g_dir, sizeof(g_dir), "lease"), 0);
	snprintf(path, sizeof(path), "%s/meta.db", g_dir);
	make_sqlite(path);
	snprintf(g_sqlite_url, sizeof(g_sqlite_url), "sqlite3://%s", path);
	/* without it, Redis cases are skipped */
	if (gct_redis_try("test_lease", &g_redis, &g_have_redis) == 0) {
		redisContext *c = gct_redis_conn(g_redis.port, 3);
		redisReply *r = redisCommand(c, "SET setting %s", fmt_json);

		freeReplyObject(r);
		redisFree(c);
		snprintf(g_redis_url, sizeof(g_redis_url), "redis://127.0.0.1:%d/3", g_redis.port);
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	gct_group_end(&g_redis, g_have_redis, g_dir);
	return 0;
}

static const char *url_of(void **state)
{
	return *state;
}

static int setup_engine(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *url = url_of(state);

	if (!strncmp(url, "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url, &err), 0);
	assert_int_equal(jo_mut_task_init(m, NS, &err), 0);
	assert_int_equal(jo_mut_task_clear(m, NS, &err), 0);
	jo_meta_close(m);
	return 0;
}

static int redis_state(void **state)
{
	*state = g_redis_url;
	if (!g_have_redis)
		return 0;
	return setup_engine(state);
}

static int sqlite_state(void **state)
{
	*state = g_sqlite_url;
	return setup_engine(state);
}

/* ---- tests */

static void add_deduplicates_items(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *a[] = { "s:1:10", "s:2:10", "s:3:10" };
	const char *b[] = { "s:2:10", "s:3:10", "s:4:10" };
	const char *c[] = { "s:1:10" };
	struct jo_mut_task t;
	int64_t id1, id2, id3, total, leased;
	size_t added;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "slice", a, 3, &id1, &added, &err), 0);
	assert_true(id1 > 0);
	assert_int_equal(added, 3);
	assert_int_equal(jo_mut_task_add(m, NS, "slice", b, 3, &id2, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_true(id2 > id1);
	/* planning the same again adds nothing */
	assert_int_equal(jo_mut_task_add(m, NS, "slice", a, 3, &id3, &added, &err), 0);
	assert_int_equal(id3, 0);
	assert_int_equal(added, 0);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 2);
	assert_int_equal(leased, 0);
	/* claim the first task; it holds all of a */
	assert_int_equal(jo_mut_task_claim(m, NS, "w1", 10000, &t, &err), 0);
	assert_int_equal(t.id, id1);
	assert_string_equal(t.kind, "slice");
	assert_string_equal(t.items, "s:1:10\ns:2:10\ns:3:10");
	assert_int_equal(t.attempts, 1);
	jo_mut_task_release_mem(&t);
	/* completed: its items may be planned again */
	assert_int_equal(jo_mut_task_complete(m, NS, id1, "w1", &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "slice", c, 1, &id3, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 2);
	jo_meta_close(m);
}

static void claim_respects_leases_and_expiry(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *a[] = { "f:5:100" };
	struct jo_mut_task t, t2;
	int64_t id, total, leased, exp;
	size_t added;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "file", a, 1, &id, &added, &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "A", 400, &t, &err), 0);
	assert_int_equal(t.id, id);
	jo_mut_task_release_mem(&t);
	/* leased: nobody else gets it */
	assert_int_equal(jo_mut_task_claim(m, NS, "B", 10000, &t2, &err), JO_ENOTFOUND);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 1);
	assert_int_equal(leased, 1);
	/* the owner renews; others cannot */
	assert_int_equal(jo_mut_task_renew(m, NS, id, "A", 400, &exp, &err), 0);
	assert_int_equal(jo_mut_task_renew(m, NS, id, "B", 400, NULL, &err), JO_ECONFLICT);
	usleep(600000);
	/* expired: B takes it over, A's renew/complete/release now fail */
	assert_int_equal(jo_mut_task_claim(m, NS, "B", 10000, &t2, &err), 0);
	assert_int_equal(t2.id, id);
	assert_int_equal(t2.attempts, 2);
	jo_mut_task_release_mem(&t2);
	assert_int_equal(jo_mut_task_renew(m, NS, id, "A", 400, NULL, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_complete(m, NS, id, "A", &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_release(m, NS, id, "A", &err), JO_ECONFLICT);
	/* B gives it back: claimable at once */
	assert_int_equal(jo_mut_task_release(m, NS, id, "B", &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "C", 10000, &t2, &err), 0);
	assert_int_equal(t2.id, id);
	jo_mut_task_release_mem(&t2);
	assert_int_equal(jo_mut_task_complete(m, NS, id, "C", &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "D", 10000, &t2, &err), JO_ENOTFOUND);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 0);
	jo_meta_close(m);
}

#define NTASKS 60
#define NTHREADS 8

struct race {
	const char *url;
	int idx;
	int claimed[NTASKS + 1];   /* per task id offset: how often this thread claimed */
	int64_t base;
	int done;
	int errors;
};

static void *race_thread(void *arg)
{
	struct race *r = arg;
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_lease *l;
	char owner[32];
	struct jo_lease_opts lo = { .ns = NS, .owner = owner, .lease_ms = 30000 };

	snprintf(owner, sizeof(owner), "racer-%d", r->idx);
	if (jo_meta_open(&m, r->url, &err) != 0) {
		r->errors++;
		return NULL;
	}
	if (jo_lease_new(&l, m, &lo, &err) != 0) {
		r->errors++;
		jo_meta_close(m);
		return NULL;
	}
	for (;;) {
		struct jo_mut_task t;
		int rc = jo_lease_claim(l, m, &t, &err);

		if (rc == JO_ENOTFOUND)
			break;
		if (rc) {
			r->errors++;
			break;
		}
		if (t.id - r->base >= 0 && t.id - r->base <= NTASKS)
			r->claimed[t.id - r->base]++;
		else
			r->errors++;
		jo_mut_task_release_mem(&t);
		if (!jo_lease_valid(l))
			r->errors++;
		if (jo_lease_complete(l, m, &err) != 0)
			r->errors++;
		r->done++;
	}
	jo_lease_free(l);
	jo_meta_close(m);
	return NULL;
}

static void claims_race_exactly_once(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct race rs[NTHREADS];
	pthread_t th[NTHREADS];
	int64_t first = 0, id, total, leased;
	size_t added;
	int done = 0;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	for (int i = 0; i < NTASKS; i++) {
		char item[32];
		const char *it = item;

		snprintf(item, sizeof(item), "s:%d:4096", 1000 + i);
		assert_int_equal(jo_mut_task_add(m, NS, "slice", &it, 1, &id, &added, &err), 0);
		assert_int_equal(added, 1);
		if (!first)
			first = id;
	}
	memset(rs, 0, sizeof(rs));
	for (int i = 0; i < NTHREADS; i++) {
		rs[i].url = url_of(state);
		rs[i].idx = i;
		rs[i].base = first;
		assert_int_equal(pthread_create(&th[i], NULL, race_thread, &rs[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int k = 0; k < NTASKS; k++) {
		int n = 0;

		for (int i = 0; i < NTHREADS; i++)
			n += rs[i].claimed[k];
		assert_int_equal(n, 1); /* every task claimed exactly once */
	}
	for (int i = 0; i < NTHREADS; i++) {
		assert_int_equal(rs[i].errors, 0);
		done += rs[i].done;
	}
	assert_int_equal(done, NTASKS);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 0);
	jo_meta_close(m);
}

static void keeper_renews_and_notices_loss(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_lease *l;
	struct jo_lease_opts lo = { .ns = NS, .owner = "keeper", .lease_ms = 1200 };
	const char *a[] = { "d:9:100" };
	struct jo_mut_task t, t2;
	int64_t id;
	size_t added;
	uint64_t ren, lost;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "delslice", a, 1, &id, &added, &err), 0);
	assert_int_equal(jo_lease_new(&l, m, &lo, &err), 0);
	assert_false(jo_lease_valid(l));
	assert_int_equal(jo_lease_claim(l, m, &t, &err), 0);
	jo_mut_task_release_mem(&t);
	assert_true(jo_lease_valid(l));
	/* three lease periods later it is still ours, thanks to the keeper */
	usleep(3600000);
	assert_true(jo_lease_valid(l));
	assert_int_equal(jo_mut_task_claim(m, NS, "thief", 10000, &t2, &err), JO_ENOTFOUND);
	jo_lease_stats(l, &ren, &lost);
	assert_true(ren >= 5);
	assert_int_equal(lost, 0);
	/* someone takes it away (an operator, or a lease that ran out while we
	 * were partitioned): the next renewal fails and mutation must stop */
	assert_int_equal(jo_mut_task_release(m, NS, id, "keeper", &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "thief", 10000, &t2, &err), 0);
	jo_mut_task_release_mem(&t2);
	usleep(800000);
	assert_false(jo_lease_valid(l));
	jo_lease_stats(l, &ren, &lost);
	assert_int_equal(lost, 1);
	assert_int_equal(jo_lease_complete(l, m, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_complete(m, NS, id, "thief", &err), 0);
	jo_lease_free(l);
	jo_meta_close(m);
}

static void bad_arguments_are_refused(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *nl[] = { "a\nb" };
	struct jo_mut_task t;
	int64_t id;
	size_t added;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_add(m, "Bad-NS", "k", nl, 1, &id, &added, &err), JO_EINVAL);
	assert_int_equal(jo_mut_task_add(m, NS, "k", nl, 1, &id, &added, &err), JO_EINVAL);
	assert_int_equal(jo_mut_task_claim(m, NS, "has space", 1000, &t, &err), JO_EINVAL);
	assert_int_equal(jo_mut_task_claim(m, NS, "w", 10, &t, &err), JO_EINVAL);
	jo_meta_close(m);
}

/* ---- records beside the tasks (jo_mut_rec_*) */

struct seen {
	int n;
	char keys[8][32];
};

static int seen_cb(const char *key, const char *val, void *payload)
{
	struct seen *s = payload;

	assert_non_null(val);
	if (s->n < 8)
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
	s->n++;
	return 0;
}

static bool seen_has(const struct seen *s, const char *key)
{
	for (int i = 0; i < s->n && i < 8; i++)
		if (!strcmp(s->keys[i], key))
			return true;
	return false;
}

static void records_put_get_scan(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct seen sn = { 0 };
	char *v = NULL;
	bool w;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_rec_get(m, NS, "plan", &v, &err), JO_ENOTFOUND);
	assert_null(v);
	assert_int_equal(jo_mut_rec_put(m, NS, "plan", "{\"ranges\":3}", NULL, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_get(m, NS, "plan", &v, &err), 0);
	assert_string_equal(v, "{\"ranges\":3}");
	free(v);
	/* if_absent: the first writer wins, the second learns it lost */
	struct jo_mut_rec_cond once = { .if_absent = true };
	assert_int_equal(jo_mut_rec_put(m, NS, "plan", "other", &once, &w, &err), 0);
	assert_false(w);
	assert_int_equal(jo_mut_rec_get(m, NS, "plan", &v, &err), 0);
	assert_string_equal(v, "{\"ranges\":3}");
	free(v);
	/* a plain put replaces; a value may hold newlines and quotes */
	assert_int_equal(jo_mut_rec_put(m, NS, "def:000001", "a\nb \"c\"", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, NS, "def:000001", "x\ny", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_get(m, NS, "def:000001", &v, &err), 0);
	assert_string_equal(v, "x\ny");
	free(v);
	assert_int_equal(jo_mut_rec_put(m, NS, "def:000002", "", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, NS, "def*", "glob", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, NS, "dex:1", "z", NULL, &w, &err), 0);
	/* scan by prefix; a glob character in the prefix is literal */
	assert_int_equal(jo_mut_rec_scan(m, NS, "def:", seen_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 2);
	assert_true(seen_has(&sn, "def:000001") && seen_has(&sn, "def:000002"));
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_rec_scan(m, NS, "def*", seen_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 1);
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_rec_scan(m, NS, "", seen_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 5);
	/* another namespace sees none of them */
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_task_init(m, "t2", &err), 0);
	assert_int_equal(jo_mut_task_clear(m, "t2", &err), 0);
	assert_int_equal(jo_mut_rec_scan(m, "t2", "", seen_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 0);
	/* NULL removes */
	assert_int_equal(jo_mut_rec_put(m, NS, "dex:1", NULL, NULL, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_get(m, NS, "dex:1", &v, &err), JO_ENOTFOUND);
	/* bad keys */
	assert_int_equal(jo_mut_rec_put(m, NS, "has space", "v", NULL, &w, &err), JO_EINVAL);
	assert_int_equal(jo_mut_rec_put(m, NS, "", "v", NULL, &w, &err), JO_EINVAL);
	/* clearing the namespace removes its records too */
	assert_int_equal(jo_mut_task_clear(m, NS, &err), 0);
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_rec_scan(m, NS, "", seen_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 0);
	jo_meta_close(m);
}

static void records_written_under_a_lease(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *a[] = { "r000001" }, *b[] = { "r000002" };
	struct jo_mut_task t;
	int64_t id, id2, total, leased;
	size_t added;
	char *v = NULL;
	bool w;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "range", a, 1, &id, &added, &err), 0);
	assert_int_equal(jo_mut_task_add(m, NS, "range", b, 1, &id2, &added, &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "w1", 10000, &t, &err), 0);
	assert_int_equal(t.id, id);
	jo_mut_task_release_mem(&t);
	/* the holder records its progress; anyone else is refused */
	struct jo_mut_rec_cond mine = { .task_id = id, .owner = "w1" };
	struct jo_mut_rec_cond theirs = { .task_id = id, .owner = "w2" };
	assert_int_equal(jo_mut_rec_put(m, NS, "pos:000001", "k1", &mine, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_put(m, NS, "pos:000001", "k9", &theirs, &w, &err), JO_ECONFLICT);
	assert_false(w);
	assert_int_equal(jo_mut_rec_get(m, NS, "pos:000001", &v, &err), 0);
	assert_string_equal(v, "k1");
	free(v);
	/* an unclaimed task is nobody's */
	struct jo_mut_rec_cond free_task = { .task_id = id2, .owner = "w1" };
	assert_int_equal(jo_mut_rec_put(m, NS, "pos:000002", "x", &free_task, &w, &err),
			 JO_ECONFLICT);
	assert_int_equal(jo_mut_rec_get(m, NS, "pos:000002", &v, &err), JO_ENOTFOUND);
	/* a refused completion completes nothing */
	struct jo_mut_rec_cond theirs_done = { .task_id = id, .owner = "w2", .complete = true };
	assert_int_equal(jo_mut_rec_put(m, NS, "done:000001", "{}", &theirs_done, &w, &err),
			 JO_ECONFLICT);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 2);
	assert_int_equal(jo_mut_rec_get(m, NS, "done:000001", &v, &err), JO_ENOTFOUND);
	/* done: the record and the completion in one transaction */
	struct jo_mut_rec_cond done = { .task_id = id, .owner = "w1", .complete = true };
	assert_int_equal(jo_mut_rec_put(m, NS, "done:000001", "{\"copied\":7}", &done, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 1);
	assert_int_equal(jo_mut_rec_get(m, NS, "done:000001", &v, &err), 0);
	assert_string_equal(v, "{\"copied\":7}");
	free(v);
	/* the completed task's item may be planned again; its lease is gone */
	assert_int_equal(jo_mut_rec_put(m, NS, "pos:000001", "k2", &mine, &w, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_add(m, NS, "range", a, 1, &id, &added, &err), 0);
	assert_int_equal(added, 1);
	/* the other task is still there, claimable */
	assert_int_equal(jo_mut_task_claim(m, NS, "w3", 10000, &t, &err), 0);
	assert_int_equal(t.id, id2);
	jo_mut_task_release_mem(&t);
	/* complete needs a task */
	struct jo_mut_rec_cond bad = { .complete = true };
	assert_int_equal(jo_mut_rec_put(m, NS, "x", "y", &bad, &w, &err), JO_EINVAL);
	jo_meta_close(m);
}

static void coordinator_needs_no_volume(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct jo_meta_open_opts co = { .coordinator_only = true };
	char url[600], path[400];
	char *v = NULL;
	int64_t id;
	size_t added;
	const char *it[] = { "plan" };

	if (!strncmp(url_of(state), "redis", 5)) {
		if (!g_have_redis)
			skip();
		/* db 9 holds no "setting" key */
		snprintf(url, sizeof(url), "redis://127.0.0.1:%d/9", g_redis.port);
	} else {
		snprintf(path, sizeof(path), "%s/coord-%d.db", g_dir, (int)getpid());
		unlink(path);
		snprintf(url, sizeof(url), "sqlite3://%s", path);
	}
	/* a volume needs its format record (SQLite: its file) */
	int rc = jo_meta_open(&m, url, &err);
	assert_true(rc == JO_ENOTJFS || rc == JO_ENOTFOUND);
	assert_null(m);
	/* a coordinator does not; SQLite makes the file */
	assert_int_equal(jo_meta_open_with(&m, url, &co, &err), 0);
	assert_int_equal(jo_mut_task_init(m, "sabc", &err), 0);
	assert_int_equal(jo_mut_task_add(m, "sabc", "plan", it, 1, &id, &added, &err), 0);
	assert_int_equal(added, 1);
	assert_int_equal(jo_mut_rec_put(m, "sabc", "job", "{}", NULL, NULL, &err), 0);
	/* a second connection (the lease keeper's) is a coordinator too */
	struct jo_meta *d = NULL;
	assert_int_equal(jo_meta_dup(m, &d, &err), 0);
	assert_int_equal(jo_mut_rec_get(d, "sabc", "job", &v, &err), 0);
	assert_string_equal(v, "{}");
	free(v);
	assert_int_equal(jo_mut_task_clear(d, "sabc", &err), 0);
	jo_meta_close(d);
	jo_meta_close(m);
}

/* A namespace nothing was ever planned in (SQL: no task tables yet) has no
 * task: count 0, claim "not found", scan empty, never an error. */
static int count_cb(const struct jo_mut_task *t, void *p)
{
	(void)t;
	(*(int *)p)++;
	return 0;
}

static void a_namespace_never_used_has_no_task(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_mut_task t;
	int64_t total = -1, leased = -1;
	int seen = 0;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_mut_task_count(m, "neverused", &total, &leased, &err), 0);
	assert_int_equal(total, 0);
	assert_int_equal(leased, 0);
	assert_int_equal(jo_mut_task_claim(m, "neverused", "w", 1000, &t, &err), JO_ENOTFOUND);
	assert_int_equal(jo_mut_task_scan(m, "neverused", count_cb, &seen, &err), 0);
	assert_int_equal(seen, 0);
	jo_meta_close(m);
}

/* ---- several tasks in flight per worker (common/cluster.h: jo_cl_slots_run) */

#define SLOT_TASKS 12

struct slots_seen {
	pthread_mutex_t mu;
	int done[SLOT_TASKS];     /* completions per task */
	int held, most_held;      /* tasks held at once by the slots, and the most */
	int fail_at;              /* a slot fails when claiming this many-th task (0: never) */
	int claims;
};

static int slot_fn(struct jo_cl_slot *s, struct jo_err *err)
{
	struct slots_seen *v = s->arg;

	while (!jo_cl_slot_stopping(s)) {
		struct jo_mut_task t = { 0 };
		int rc = jo_lease_claim(s->lease, s->m, &t, err);

		if (rc == JO_ENOTFOUND) {
			int64_t total = 0, leased = 0;

			jo_err_clear(err);
			assert_int_equal(jo_mut_task_count(s->m, NS, &total, &leased, err), 0);
			if (total == 0)
				return 0;
			jo_cl_slot_wait(s, 1000);
			continue;
		}
		if (rc)
			return rc;
		int i = atoi(t.items + 1);

		jo_mut_task_release_mem(&t);
		pthread_mutex_lock(&v->mu);
		bool fail = ++v->claims == v->fail_at;
		if (++v->held > v->most_held)
			v->most_held = v->held;
		pthread_mutex_unlock(&v->mu);
		if (fail) {
			(void)jo_lease_release(s->lease, s->m, err);
			return jo_err_set(err, JO_EIO, "slot %d failed", s->index);
		}
		assert_true(jo_lease_valid(s->lease));
		usleep(50000); /* work: the others claim meanwhile */
		pthread_mutex_lock(&v->mu);
		v->held--;
		v->done[i]++;
		pthread_mutex_unlock(&v->mu);
		assert_int_equal(jo_lease_complete(s->lease, s->m, err), 0);
		jo_cl_slot_kick(s);
	}
	return 0;
}

static void slots_add_tasks(struct jo_meta *m)
{
	struct jo_err err = { 0 };

	for (int i = 0; i < SLOT_TASKS; i++) {
		char item[16];
		const char *it = item;
		int64_t id;
		size_t added;

		snprintf(item, sizeof(item), "r%06d", i);
		assert_int_equal(jo_mut_task_add(m, NS, "range", &it, 1, &id, &added, &err), 0);
	}
}

/* Three slots of one worker: each task done once, several held at once, each on its own lease. */
static void slots_work_tasks_at_once(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_lease_opts lo = { .ns = NS, .owner = "w1", .lease_ms = 5000 };
	struct slots_seen v = { .mu = PTHREAD_MUTEX_INITIALIZER };
	int64_t total = -1, leased = -1;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	slots_add_tasks(m);
	assert_int_equal(jo_cl_slots_run(m, &lo, 3, slot_fn, &v, &err), 0);
	for (int i = 0; i < SLOT_TASKS; i++)
		assert_int_equal(v.done[i], 1);
	assert_int_equal(v.most_held, 3);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, 0);
	jo_meta_close(m);
}

/* A failing slot ends the run with its error; the others stop, nothing is left leased. */
static void slots_stop_on_a_failure(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	struct jo_lease_opts lo = { .ns = NS, .owner = "w1", .lease_ms = 5000 };
	struct slots_seen v = { .mu = PTHREAD_MUTEX_INITIALIZER, .fail_at = 4 };
	int64_t total = -1, leased = -1;
	int done = 0;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	slots_add_tasks(m);
	assert_int_equal(jo_cl_slots_run(m, &lo, 3, slot_fn, &v, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "failed"));
	for (int i = 0; i < SLOT_TASKS; i++)
		done += v.done[i];
	assert_true(done < SLOT_TASKS);
	assert_int_equal(jo_mut_task_count(m, NS, &total, &leased, &err), 0);
	assert_int_equal(total, SLOT_TASKS - done);
	assert_int_equal(leased, 0);
	jo_meta_close(m);
}

/* jo_lease_claim_wait: a task another worker still leases (one that died:
 * nobody renews it) is waited for and claimed once its lease runs out; with
 * no task left it returns "not found", at once. */
static void claim_wait_takes_a_dead_workers_task(void **state)
{
	struct jo_meta *m;
	struct jo_err err = { 0 };
	const char *a[] = { "f:7:100" };
	struct jo_lease *l;
	struct jo_lease_opts lo = { .ns = NS, .owner = "waiter", .lease_ms = 10000 };
	struct jo_mut_task t, t2;
	int64_t id, t0;
	size_t added;

	if (!strncmp(url_of(state), "redis", 5) && !g_have_redis)
		skip();
	assert_int_equal(jo_meta_open(&m, url_of(state), &err), 0);
	assert_int_equal(jo_lease_new(&l, m, &lo, &err), 0);
	t0 = jo_lease_mono_ms();
	assert_int_equal(jo_lease_claim_wait(l, m, &t, &err), JO_ENOTFOUND);
	assert_true(jo_lease_mono_ms() - t0 < 1000);
	assert_int_equal(jo_mut_task_add(m, NS, "file", a, 1, &id, &added, &err), 0);
	assert_int_equal(jo_mut_task_claim(m, NS, "dead", 700, &t2, &err), 0);
	jo_mut_task_release_mem(&t2);
	/* a plain claim gives up; the waiting one gets it after the lease */
	assert_int_equal(jo_lease_claim(l, m, &t, &err), JO_ENOTFOUND);
	t0 = jo_lease_mono_ms();
	assert_int_equal(jo_lease_claim_wait(l, m, &t, &err), 0);
	assert_true(jo_lease_mono_ms() - t0 >= 400);
	assert_int_equal(t.id, id);
	assert_int_equal(t.attempts, 2);
	jo_mut_task_release_mem(&t);
	assert_int_equal(jo_lease_complete(l, m, &err), 0);
	assert_int_equal(jo_lease_claim_wait(l, m, &t, &err), JO_ENOTFOUND);
	jo_lease_free(l);
	jo_meta_close(m);
}

#define BOTH(fn) \
	cmocka_unit_test_setup(fn, redis_state), cmocka_unit_test_setup(fn, sqlite_state)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(add_deduplicates_items),
		BOTH(claim_respects_leases_and_expiry),
		BOTH(claims_race_exactly_once),
		BOTH(keeper_renews_and_notices_loss),
		BOTH(bad_arguments_are_refused),
		BOTH(records_put_get_scan),
		BOTH(records_written_under_a_lease),
		BOTH(coordinator_needs_no_volume),
		BOTH(a_namespace_never_used_has_no_task),
		BOTH(slots_work_tasks_at_once),
		BOTH(slots_stop_on_a_failure),
		BOTH(claim_wait_takes_a_dead_workers_task),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
