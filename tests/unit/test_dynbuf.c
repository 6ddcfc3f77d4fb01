/* jo_dynbuf: the one growable buffer, with a hard maximum. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/dynbuf.h"
#include "common/err.h"

static void dynbuf_appends_and_stays_nul_terminated(void **state)
{
	struct jo_dynbuf b = JO_DYNBUF_INIT(JO_DYNBUF_UNLIMITED);

	(void)state;
	assert_null(b.p);
	assert_int_equal(jo_dynbuf_add(&b, NULL, 0), 0);
	assert_string_equal(b.p, "");
	assert_int_equal(jo_dynbuf_adds(&b, "ab"), 0);
	assert_int_equal(jo_dynbuf_add(&b, "c\0d", 3), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.p, "abc\0d", 6);
	assert_int_equal(jo_dynbuf_addf(&b, "-%d-%s", 42, "x"), 0);
	assert_memory_equal(b.p, "abc\0d-42-x", 11);
	jo_dynbuf_release(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
}

static void dynbuf_grows_through_many_doublings(void **state)
{
	struct jo_dynbuf b;
	char chunk[1000];

	(void)state;
	memset(chunk, 'z', sizeof(chunk));
	jo_dynbuf_init(&b, JO_DYNBUF_UNLIMITED);
	for (int i = 0; i < 100; i++)
		assert_int_equal(jo_dynbuf_add(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 100000);
	assert_true(b.cap > b.len);
	assert_int_equal(b.p[b.len], '\0');
	assert_int_equal(b.p[99999], 'z');
	/* a long formatted string is not cut at some internal size */
	jo_dynbuf_reset(&b);
	assert_int_equal(jo_dynbuf_addf(&b, "%5000s|", "end"), 0);
	assert_int_equal(b.len, 5001);
	assert_string_equal(b.p + 4997, "end|");
	jo_dynbuf_release(&b);
}

static void dynbuf_refuses_growth_past_max_and_stays_failed(void **state)
{
	struct jo_dynbuf b = JO_DYNBUF_INIT(10);

	(void)state;
	assert_int_equal(jo_dynbuf_adds(&b, "0123456789"), 0); /* exactly max */
	assert_true(b.cap <= 11);
	assert_int_equal(jo_dynbuf_adds(&b, "x"), JO_EPROTO);
	assert_true(b.failed);
	assert_string_equal(b.p, "0123456789"); /* what was there stays */
	/* later adds fail at once, even ones that would fit */
	jo_dynbuf_setlen(&b, 2);
	assert_int_equal(jo_dynbuf_adds(&b, "y"), JO_ENOMEM);
	assert_string_equal(b.p, "01");
	/* a reset clears the failure */
	jo_dynbuf_reset(&b);
	assert_int_equal(jo_dynbuf_addf(&b, "%s", "abcdefghij"), 0);
	assert_int_equal(jo_dynbuf_addf(&b, "%d", 1), JO_EPROTO);
	jo_dynbuf_release(&b);
}

static void dynbuf_refuses_sizes_that_would_overflow(void **state)
{
	struct jo_dynbuf b = JO_DYNBUF_INIT(JO_DYNBUF_UNLIMITED);

	(void)state;
	assert_int_equal(jo_dynbuf_adds(&b, "a"), 0);
	assert_int_equal(jo_dynbuf_reserve(&b, SIZE_MAX - 1), JO_EPROTO);
	jo_dynbuf_release(&b);
}

static void dynbuf_reserve_then_setlen_for_readers(void **state)
{
	struct jo_dynbuf b = JO_DYNBUF_INIT(1024);

	(void)state;
	assert_int_equal(jo_dynbuf_reserve(&b, 100), 0);
	assert_true(b.cap >= 101);
	memcpy(b.p, "hello", 5);
	jo_dynbuf_setlen(&b, 5);
	assert_string_equal(b.p, "hello");
	assert_int_equal(jo_dynbuf_reserve(&b, 1020), JO_EPROTO);
	jo_dynbuf_release(&b);
}

static void dynbuf_detach_hands_over_the_bytes(void **state)
{
	struct jo_dynbuf b = JO_DYNBUF_INIT(JO_DYNBUF_UNLIMITED);
	size_t n = 99;
	char *s;

	(void)state;
	s = jo_dynbuf_detach(&b, &n); /* empty: "" */
	assert_non_null(s);
	assert_string_equal(s, "");
	assert_int_equal(n, 0);
	free(s);
	assert_int_equal(jo_dynbuf_adds(&b, "abc"), 0);
	s = jo_dynbuf_detach(&b, &n);
	assert_string_equal(s, "abc");
	assert_int_equal(n, 3);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	free(s);
	jo_dynbuf_release(&b);
}

static void grow_array_doubles_and_keeps_elements(void **state)
{
	uint64_t *v = NULL;
	size_t cap = 0, n = 0;

	(void)state;
	assert_int_equal(jo_grow_array(&v, &cap, 0, sizeof(*v)), 0);
	assert_null(v);
	for (uint64_t i = 0; i < 1000; i++) {
		assert_int_equal(jo_grow_array(&v, &cap, n + 1, sizeof(*v)), 0);
		v[n++] = i * 7;
	}
	assert_true(cap >= 1000 && cap < 2048);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], i * 7);
	/* an impossible size fails and leaves the array as it was */
	assert_int_equal(jo_grow_array(&v, &cap, SIZE_MAX / 4, sizeof(*v)), JO_ENOMEM);
	assert_int_equal(v[999], 999 * 7);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dynbuf_appends_and_stays_nul_terminated),
		cmocka_unit_test(dynbuf_grows_through_many_doublings),
		cmocka_unit_test(dynbuf_refuses_growth_past_max_and_stays_failed),
		cmocka_unit_test(dynbuf_refuses_sizes_that_would_overflow),
		cmocka_unit_test(dynbuf_reserve_then_setlen_for_readers),
		cmocka_unit_test(dynbuf_detach_hands_over_the_bytes),
		cmocka_unit_test(grow_array_doubles_and_keeps_elements),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
