/*
 * Unit tests for common/warmup/window: the look-ahead window of `jfsops
 * warmup --follow` (bounds, deduplication across batches, readiness,
 * cancellation of passed batches, what is listed for eviction, re-reads
 * after a whole-file eviction).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/warmup/warmup.h"
#include "common/warmup/window.h"

#define BS (4u << 20)

static struct jo_warmup_block blk(uint64_t id, uint32_t indx)
{
	struct jo_warmup_block b = { .id = id, .indx = indx, .bsize = BS,
				     .anchor_kind = JO_WARMUP_AT_START,
				     .anchor = (uint64_t)(id * 16 + indx) * BS,
				     .alt = JO_WARMUP_NONE };
	return b;
}

/* open a batch, add its blocks (id, indx pairs), close it */
static void batch(struct jo_wwin *w, struct jo_wwin_file *f, const char *id, bool passed,
		  const uint64_t (*bl)[2], size_t n)
{
	struct jo_err err = { 0 };

	assert_int_equal(jo_wwin_open(w, NULL, passed, &err), 0);
	for (size_t i = 0; i < n; i++) {
		struct jo_warmup_block b = blk(bl[i][0], (uint32_t)bl[i][1]);

		assert_int_equal(jo_wwin_add(w, &b, f, &err), 0);
	}
	assert_int_equal(jo_wwin_close(w, id, &err), 0);
}

/* take every queued block: returns how many, their ids in order */
static size_t drain(struct jo_wwin *w, struct jo_wwin_block **out, size_t cap)
{
	size_t n = 0;
	struct jo_wwin_block *b;

	while ((b = jo_wwin_next(w))) {
		assert_true(n < cap);
		out[n++] = b;
	}
	return n;
}

static uint64_t id_of(const struct jo_wwin_block *b)
{
	struct jo_warmup_block x;

	jo_wwin_block_get(b, &x, NULL);
	return x.id * 100 + x.indx;
}

struct readies {
	char ids[16][16];
	size_t n;
};

static void note_ready(struct jo_wwin_batch *b, void *payload)
{
	struct readies *r = payload;
	struct jo_wwin_batch_info bi;

	jo_wwin_batch_info(b, &bi);
	assert_true(r->n < 16);
	strncpy(r->ids[r->n++], bi.id, 15);
}

static void window_never_holds_more_than_ahead(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f;
	struct jo_wwin_stats ws;
	const uint64_t a[][2] = { { 10, 0 } }, b[][2] = { { 11, 0 } }, c[][2] = { { 12, 0 } };

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 2, false, &err), 0);
	f = jo_wwin_file(w, "/d/a", "/mnt/d/a", 5, 100 * BS);
	assert_non_null(f);
	assert_true(jo_wwin_position(w) == -1);
	assert_true(jo_wwin_has_room(w));
	batch(w, f, "b0", false, a, 1);
	batch(w, f, "b1", false, b, 1);
	/* two batches after the position (-1): full */
	assert_false(jo_wwin_has_room(w));
	assert_int_equal(jo_wwin_open(w, NULL, false, &err), JO_EINVAL);
	assert_int_equal(jo_wwin_done(w, 0), 1);
	assert_true(jo_wwin_position(w) == 0);
	assert_true(jo_wwin_has_room(w));
	batch(w, f, "b2", false, c, 1);
	assert_false(jo_wwin_has_room(w));
	jo_wwin_stats(w, &ws);
	assert_int_equal(ws.in_window, 2);
	assert_int_equal(ws.max_ahead, 2); /* b2 is index 2, opened at position 0 */
	/* a batch the consumer already passed may open in a full window */
	assert_int_equal(jo_wwin_open(w, NULL, true, &err), 0);
	assert_int_equal(jo_wwin_close(w, "p3", &err), 0);
	assert_int_equal(jo_wwin_done(w, 3), 3);
	assert_true(jo_wwin_position(w) == 3);
	jo_wwin_stats(w, &ws);
	assert_int_equal(ws.in_window, 0);
	assert_int_equal(ws.max_ahead, 2);
	/* an older done changes nothing */
	assert_int_equal(jo_wwin_done(w, 0), 0);
	assert_true(jo_wwin_passed(w, "b0", NULL));
	{
		uint64_t idx = 99;

		assert_true(jo_wwin_passed(w, "p3", &idx));
		assert_true(idx == 3);
	}
	assert_null(jo_wwin_find(w, "b0"));
	assert_false(jo_wwin_passed(w, "nope", NULL));
	jo_wwin_free(w);
}

static void blocks_are_read_once_across_the_window(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f;
	struct jo_wwin_block *q[8];
	struct jo_wwin_batch_info bi;
	struct readies r = { 0 };
	const uint64_t a[][2] = { { 10, 0 }, { 10, 1 }, { 10, 0 } }, b[][2] = { { 10, 1 }, { 20, 0 } };
	size_t n;

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 3, false, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	batch(w, f, "x", false, a, 3);
	batch(w, f, "y", false, b, 2);
	n = drain(w, q, 8);
	/* 10_1 is needed by both: one read; oldest batch first */
	assert_int_equal(n, 3);
	assert_true(id_of(q[0]) == 1000 && id_of(q[1]) == 1001 && id_of(q[2]) == 2000);
	jo_wwin_batch_info(jo_wwin_find(w, "x"), &bi);
	assert_int_equal(bi.blocks, 2);
	assert_int_equal(bi.new_blocks, 2);
	assert_int_equal(bi.pending, 2);
	jo_wwin_batch_info(jo_wwin_find(w, "y"), &bi);
	assert_int_equal(bi.blocks, 2);
	assert_int_equal(bi.new_blocks, 1);
	assert_true(bi.bytes == 2ull * BS);
	/* the shared block in flight keeps both waiting */
	jo_wwin_complete(w, q[0], true);
	jo_wwin_complete(w, q[2], true);
	jo_wwin_take_ready(w, note_ready, &r);
	assert_int_equal(r.n, 0);
	jo_wwin_complete(w, q[1], false);
	jo_wwin_take_ready(w, note_ready, &r);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.ids[0], "x");
	assert_string_equal(r.ids[1], "y");
	/* reported once */
	jo_wwin_take_ready(w, note_ready, &r);
	assert_int_equal(r.n, 2);
	jo_wwin_batch_info(jo_wwin_find(w, "y"), &bi);
	assert_true(bi.ready);
	assert_int_equal(bi.failed, 1);
	/* a batch whose blocks are all warm already is ready when it closes */
	{
		const uint64_t c[][2] = { { 20, 0 } };

		batch(w, f, "z", false, c, 1);
		assert_null(jo_wwin_next(w));
		jo_wwin_take_ready(w, note_ready, &r);
		assert_int_equal(r.n, 3);
		jo_wwin_batch_info(jo_wwin_find(w, "z"), &bi);
		assert_int_equal(bi.new_blocks, 0);
	}
	jo_wwin_free(w);
}

static void passed_batches_lose_their_queued_reads(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f;
	struct jo_wwin_block *q[8];
	struct jo_wwin_stats ws;
	struct jo_wwin_evict *ev;
	size_t nev;
	const uint64_t a[][2] = { { 10, 0 }, { 10, 1 } }, b[][2] = { { 30, 0 } };

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 2, false, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	batch(w, f, "b0", false, a, 2);
	batch(w, f, "b1", false, b, 1);
	/* the consumer is past b0 before anything was read */
	assert_int_equal(jo_wwin_done(w, 0), 1);
	assert_int_equal(drain(w, q, 8), 1);
	assert_true(id_of(q[0]) == 3000);
	jo_wwin_stats(w, &ws);
	assert_int_equal(ws.cancelled, 2);
	assert_int_equal(ws.blocks, 1);
	/* no eviction asked for: nothing listed */
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	assert_int_equal(nev, 0);
	jo_wwin_complete(w, q[0], true);
	jo_wwin_free(w);
}

static int has_evict(const struct jo_wwin_evict *ev, size_t n, uint64_t id, uint32_t indx)
{
	int k = 0;

	for (size_t i = 0; i < n; i++)
		k += ev[i].id == id && ev[i].indx == indx;
	return k;
}

static void eviction_spares_blocks_the_window_needs(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f, *g;
	struct jo_wwin_block *q[8];
	struct jo_wwin_evict *ev;
	size_t nev, n;
	const uint64_t a[][2] = { { 10, 0 }, { 10, 1 } }, b[][2] = { { 10, 1 }, { 40, 0 } };

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 2, true, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	g = jo_wwin_file(w, "/b", "/mnt/b", 6, 100 * BS);
	batch(w, f, "b0", false, a, 2);
	{
		struct jo_warmup_block x = blk(10, 1), y = blk(40, 0);

		assert_int_equal(jo_wwin_open(w, NULL, false, &err), 0);
		assert_int_equal(jo_wwin_add(w, &x, f, &err), 0);
		assert_int_equal(jo_wwin_add(w, &y, g, &err), 0);
		assert_int_equal(jo_wwin_close(w, "b1", &err), 0);
	}
	(void)b;
	n = drain(w, q, 8);
	assert_int_equal(n, 3);
	/* 10_0 read; 10_1 still in flight when the consumer passes b0 */
	jo_wwin_complete(w, q[0], true);
	assert_int_equal(jo_wwin_done(w, 0), 1);
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	/* 10_1 is needed by b1: only 10_0 goes */
	assert_int_equal(nev, 1);
	assert_int_equal(has_evict(ev, nev, 10, 0), 1);
	assert_ptr_equal(ev[0].file, f);
	assert_string_equal(jo_wwin_file_mpath(ev[0].file), "/mnt/a");
	assert_true(jo_wwin_needed(w, 10, 1));
	assert_false(jo_wwin_needed(w, 10, 0));
	jo_wwin_evicts_free(w, ev, nev);
	jo_wwin_complete(w, q[1], true);
	jo_wwin_complete(w, q[2], true);
	assert_int_equal(jo_wwin_done(w, 1), 1);
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	assert_int_equal(nev, 2);
	assert_int_equal(has_evict(ev, nev, 10, 1), 1);
	assert_int_equal(has_evict(ev, nev, 40, 0), 1);
	jo_wwin_evicts_free(w, ev, nev);
	jo_wwin_free(w);
}

static void a_read_ending_after_its_batch_passed_is_evicted_again(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f;
	struct jo_wwin_block *q[4];
	struct jo_wwin_evict *ev;
	size_t nev;
	const uint64_t a[][2] = { { 10, 0 } };

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 2, true, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	batch(w, f, "b0", false, a, 1);
	assert_int_equal(drain(w, q, 4), 1);
	assert_int_equal(jo_wwin_done(w, 0), 1);
	/* listed when the consumer passed it (its own reads cache it too) */
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	assert_int_equal(nev, 1);
	jo_wwin_evicts_free(w, ev, nev);
	/* our read ends after that eviction: it cached the block again */
	jo_wwin_complete(w, q[0], true);
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	assert_int_equal(nev, 1);
	assert_int_equal(has_evict(ev, nev, 10, 0), 1);
	jo_wwin_evicts_free(w, ev, nev);
	jo_wwin_free(w);
}

static void whole_file_eviction_sends_warm_blocks_back(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f, *g;
	struct jo_wwin_block *q[8];
	struct jo_wwin_batch_info bi;
	struct readies un = { 0 }, r = { 0 };
	size_t n;

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 2, true, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	g = jo_wwin_file(w, "/b", "/mnt/b", 6, 100 * BS);
	{
		struct jo_warmup_block x = blk(10, 0), y = blk(10, 1), z = blk(50, 0);

		assert_int_equal(jo_wwin_open(w, NULL, false, &err), 0);
		assert_int_equal(jo_wwin_add(w, &x, f, &err), 0);
		assert_int_equal(jo_wwin_add(w, &y, f, &err), 0);
		assert_int_equal(jo_wwin_add(w, &z, g, &err), 0);
		assert_int_equal(jo_wwin_close(w, "b0", &err), 0);
	}
	n = drain(w, q, 8);
	assert_int_equal(n, 3);
	jo_wwin_complete(w, q[0], true);
	jo_wwin_complete(w, q[2], true);
	/* 10_1 is still being read when the mount evicts /a whole */
	assert_int_equal(jo_wwin_requeue_file(w, f, note_ready, &un), 1);
	assert_int_equal(un.n, 0); /* b0 was not ready yet */
	jo_wwin_complete(w, q[1], true);
	/* both blocks of /a are read again, none of /b */
	n = drain(w, q, 8);
	assert_int_equal(n, 2);
	assert_true(id_of(q[0]) == 1001 || id_of(q[0]) == 1000);
	assert_true(id_of(q[1]) == 1001 || id_of(q[1]) == 1000);
	jo_wwin_batch_info(jo_wwin_find(w, "b0"), &bi);
	assert_int_equal(bi.pending, 2);
	jo_wwin_complete(w, q[0], true);
	jo_wwin_complete(w, q[1], true);
	jo_wwin_take_ready(w, note_ready, &r);
	assert_int_equal(r.n, 1);
	/* evicted again after it was reported ready: reported unready, then ready */
	assert_int_equal(jo_wwin_requeue_file(w, f, note_ready, &un), 2);
	assert_int_equal(un.n, 1);
	assert_string_equal(un.ids[0], "b0");
	n = drain(w, q, 8);
	assert_int_equal(n, 2);
	jo_wwin_complete(w, q[0], true);
	jo_wwin_complete(w, q[1], true);
	jo_wwin_take_ready(w, note_ready, &r);
	assert_int_equal(r.n, 2);
	jo_wwin_free(w);
}

static void a_repeated_block_keeps_the_better_anchor(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f, *g;
	struct jo_warmup_block part = blk(10, 0), start = blk(10, 0), got;
	struct jo_wwin_file *gf;

	(void)state;
	part.anchor_kind = JO_WARMUP_PARTIAL;
	part.anchor = 7;
	start.anchor = 4 * BS;
	assert_int_equal(jo_wwin_new(&w, 2, false, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	g = jo_wwin_file(w, "/b", "/mnt/b", 6, 100 * BS);
	assert_int_equal(jo_wwin_open(w, "j", false, &err), 0);
	assert_string_equal(jo_wwin_open_id(w), "j");
	assert_int_equal(jo_wwin_add(w, &part, f, &err), 0);
	assert_int_equal(jo_wwin_add(w, &start, g, &err), 0);
	assert_int_equal(jo_wwin_close(w, NULL, &err), 0);
	assert_non_null(jo_wwin_find(w, "j"));
	jo_wwin_block_get(jo_wwin_next(w), &got, &gf);
	assert_int_equal(got.anchor_kind, JO_WARMUP_AT_START);
	assert_true(got.anchor == 4ull * BS);
	assert_ptr_equal(gf, g);
	assert_null(jo_wwin_next(w));
	jo_wwin_free(w);
}

static void a_passed_batch_is_only_noted_for_eviction(void **state)
{
	struct jo_wwin *w = NULL;
	struct jo_err err = { 0 };
	struct jo_wwin_file *f;
	struct jo_wwin_evict *ev;
	size_t nev;
	const uint64_t a[][2] = { { 10, 0 }, { 10, 1 } };

	(void)state;
	assert_int_equal(jo_wwin_new(&w, 1, true, &err), 0);
	f = jo_wwin_file(w, "/a", "/mnt/a", 5, 100 * BS);
	batch(w, f, "old", true, a, 2);
	assert_null(jo_wwin_next(w)); /* never read */
	{
		struct readies r = { 0 };

		jo_wwin_take_ready(w, note_ready, &r);
		assert_int_equal(r.n, 0); /* never announced */
	}
	assert_int_equal(jo_wwin_done(w, 0), 1);
	assert_int_equal(jo_wwin_take_evicts(w, &ev, &nev, &err), 0);
	assert_int_equal(nev, 2);
	jo_wwin_evicts_free(w, ev, nev);
	assert_int_equal(jo_wwin_close(w, "x", &err), JO_EINVAL); /* nothing open */
	jo_wwin_free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(window_never_holds_more_than_ahead),
		cmocka_unit_test(blocks_are_read_once_across_the_window),
		cmocka_unit_test(passed_batches_lose_their_queued_reads),
		cmocka_unit_test(eviction_spares_blocks_the_window_needs),
		cmocka_unit_test(a_read_ending_after_its_batch_passed_is_evicted_again),
		cmocka_unit_test(whole_file_eviction_sends_warm_blocks_back),
		cmocka_unit_test(a_repeated_block_keeps_the_better_anchor),
		cmocka_unit_test(a_passed_batch_is_only_noted_for_eviction),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
