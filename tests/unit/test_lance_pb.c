/* Unit tests for the Lance protobuf wire decoder (lanceparse/pb.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "lanceparse/lance.h"

static int varint_of(const uint8_t *b, size_t n, uint64_t *v)
{
	struct lance_pb r;
	struct jo_err err = { 0 };

	lance_pb_init(&r, b, n);
	return lance_pb_varint(&r, v, &err);
}

static void pb_varint_decodes_boundaries(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(varint_of((const uint8_t[]){ 0x00 }, 1, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(varint_of((const uint8_t[]){ 0x7f }, 1, &v), 0);
	assert_int_equal(v, 127);
	assert_int_equal(varint_of((const uint8_t[]){ 0x80, 0x01 }, 2, &v), 0);
	assert_int_equal(v, 128);
	assert_int_equal(varint_of((const uint8_t[]){ 0xac, 0x02 }, 2, &v), 0);
	assert_int_equal(v, 300);
	/* UINT64_MAX: nine 0xff then 0x01. */
	const uint8_t max[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	assert_int_equal(varint_of(max, sizeof(max), &v), 0);
	assert_true(v == UINT64_MAX);
}

static void pb_varint_rejects_truncated_and_overlong(void **state)
{
	uint64_t v;
	(void)state;
	assert_int_equal(varint_of((const uint8_t[]){ 0x80 }, 1, &v), JO_EPROTO);
	assert_int_equal(varint_of((const uint8_t[]){ 0x80 }, 0, &v), JO_EPROTO);
	const uint8_t eleven[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 };
	assert_int_equal(varint_of(eleven, sizeof(eleven), &v), JO_EPROTO);
	const uint8_t over[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 };
	assert_int_equal(varint_of(over, sizeof(over), &v), JO_EPROTO);
}

static void pb_negative_int32_is_sign_extended_not_zigzag(void **state)
{
	/* parent_id = -1 as Lance writes it: ten bytes. */
	const uint8_t b[] = { 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	struct lance_pb r;
	struct lance_pb_field f;
	struct jo_err err = { 0 };
	(void)state;
	lance_pb_init(&r, b, sizeof(b));
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.num, 4);
	assert_int_equal(f.wt, LANCE_PB_VARINT);
	assert_int_equal(lance_pb_i32(f.u), -1);
	assert_int_equal(lance_pb_next(&r, &f, &err), 0);
}

static void pb_zigzag_decodes(void **state)
{
	(void)state;
	assert_true(lance_pb_zigzag(0) == 0);
	assert_true(lance_pb_zigzag(1) == -1);
	assert_true(lance_pb_zigzag(2) == 1);
	assert_true(lance_pb_zigzag(3) == -2);
	assert_true(lance_pb_zigzag(4294967294u) == 2147483647);
	assert_true(lance_pb_zigzag(4294967295u) == -2147483648LL);
	assert_true(lance_pb_zigzag(UINT64_MAX) == INT64_MIN);
}

static void pb_reads_all_wire_types_and_nested(void **state)
{
	/* field 1 varint 150, field 2 "hi", field 3 fixed64, field 4 fixed32,
	 * field 5 nested { field 1 = 7 } */
	const uint8_t b[] = { 0x08, 0x96, 0x01, 0x12, 0x02, 'h', 'i',
			      0x19, 1, 2, 3, 4, 5, 6, 7, 8,
			      0x25, 0xaa, 0xbb, 0xcc, 0xdd,
			      0x2a, 0x02, 0x08, 0x07 };
	struct lance_pb r, sub;
	struct lance_pb_field f;
	struct jo_err err = { 0 };
	(void)state;
	lance_pb_init(&r, b, sizeof(b));
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.num, 1);
	assert_int_equal(f.u, 150);
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.num, 2);
	assert_int_equal(f.len, 2);
	assert_memory_equal(f.data, "hi", 2);
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.wt, LANCE_PB_I64);
	assert_true(f.u == 0x0807060504030201ull);
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.wt, LANCE_PB_I32);
	assert_true(f.u == 0xddccbbaau);
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(f.num, 5);
	lance_pb_init(&sub, f.data, f.len);
	assert_int_equal(lance_pb_next(&sub, &f, &err), 1);
	assert_int_equal(f.num, 1);
	assert_int_equal(f.u, 7);
	assert_int_equal(lance_pb_next(&sub, &f, &err), 0);
	assert_int_equal(lance_pb_next(&r, &f, &err), 0);
}

static void pb_rejects_bad_messages(void **state)
{
	struct lance_pb r;
	struct lance_pb_field f;
	struct jo_err err = { 0 };
	(void)state;
	/* length past the end */
	lance_pb_init(&r, (const uint8_t[]){ 0x12, 0x05, 'a' }, 3);
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "exceeds"));
	/* huge length (overflow attempt) */
	const uint8_t huge[] = { 0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	lance_pb_init(&r, huge, sizeof(huge));
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	/* group wire types 3 and 4, unknown 6/7 */
	for (uint8_t wt = 3; wt <= 7; wt++) {
		if (wt == 5)
			continue;
		uint8_t k = (uint8_t)(0x08 | wt);
		lance_pb_init(&r, &k, 1);
		assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	}
	/* field number 0 */
	lance_pb_init(&r, (const uint8_t[]){ 0x00, 0x01 }, 2);
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	/* truncated fixed64 / fixed32 / varint value */
	lance_pb_init(&r, (const uint8_t[]){ 0x09, 1, 2, 3 }, 4);
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	lance_pb_init(&r, (const uint8_t[]){ 0x0d, 1, 2 }, 3);
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
	lance_pb_init(&r, (const uint8_t[]){ 0x08, 0x80 }, 2);
	assert_int_equal(lance_pb_next(&r, &f, &err), JO_EPROTO);
}

/* lance_pb_each: the fields in order; a negative result stops it and is returned. */
struct each_seen {
	uint32_t nums[8];
	size_t n;
	uint32_t stop_at;
};

static int each_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct each_seen *s = ctx;

	(void)err;
	s->nums[s->n++] = f->num;
	return f->num == s->stop_at ? JO_ECANCELED : 0;
}

static void pb_each_visits_fields_in_order_and_stops(void **state)
{
	/* 1: varint 5, 2: "ab", 3: fixed32 */
	const uint8_t msg[] = { 0x08, 0x05, 0x12, 0x02, 'a', 'b', 0x1d, 1, 2, 3, 4 };
	struct each_seen s = { .stop_at = 0 };
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(lance_pb_each(msg, sizeof(msg), each_field, &s, &err), 0);
	assert_int_equal(s.n, 3);
	assert_int_equal(s.nums[0], 1);
	assert_int_equal(s.nums[1], 2);
	assert_int_equal(s.nums[2], 3);
	memset(&s, 0, sizeof(s));
	s.stop_at = 2;
	assert_int_equal(lance_pb_each(msg, sizeof(msg), each_field, &s, &err), JO_ECANCELED);
	assert_int_equal(s.n, 2);
	/* a decoding error is returned as it is */
	memset(&s, 0, sizeof(s));
	assert_int_equal(lance_pb_each(msg, sizeof(msg) - 1, each_field, &s, &err), JO_EPROTO);
	assert_int_equal(s.n, 2);
}

static void pb_repeated_accepts_packed_and_unpacked(void **state)
{
	/* packed: field 2 = [1, 300, -2 (10 bytes)] then unpacked field 2 = 5 */
	const uint8_t b[] = { 0x12, 0x0d, 0x01, 0xac, 0x02,
			      0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
			      0x10, 0x05 };
	struct lance_pb r;
	struct lance_pb_field f;
	struct jo_err err = { 0 };
	int32_t *v = NULL;
	uint64_t *u = NULL;
	size_t n = 0, nu = 0;
	(void)state;
	lance_pb_init(&r, b, sizeof(b));
	while (lance_pb_next(&r, &f, &err) > 0) {
		assert_int_equal(lance_pb_repeated_i32(&f, &v, &n, &err), 0);
		assert_int_equal(lance_pb_repeated_u64(&f, &u, &nu, &err), 0);
	}
	assert_int_equal(n, 4);
	assert_int_equal(v[0], 1);
	assert_int_equal(v[1], 300);
	assert_int_equal(v[2], -2);
	assert_int_equal(v[3], 5);
	assert_int_equal(nu, 4);
	assert_true(u[2] == (uint64_t)-2);
	free(v);
	free(u);
	/* a packed payload that ends inside a varint */
	const uint8_t bad[] = { 0x12, 0x02, 0x01, 0x80 };
	v = NULL;
	n = 0;
	lance_pb_init(&r, bad, sizeof(bad));
	assert_int_equal(lance_pb_next(&r, &f, &err), 1);
	assert_int_equal(lance_pb_repeated_i32(&f, &v, &n, &err), JO_EPROTO);
	assert_null(v);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pb_varint_decodes_boundaries),
		cmocka_unit_test(pb_varint_rejects_truncated_and_overlong),
		cmocka_unit_test(pb_negative_int32_is_sign_extended_not_zigzag),
		cmocka_unit_test(pb_zigzag_decodes),
		cmocka_unit_test(pb_reads_all_wire_types_and_nested),
		cmocka_unit_test(pb_rejects_bad_messages),
		cmocka_unit_test(pb_repeated_accepts_packed_and_unpacked),
		cmocka_unit_test(pb_each_visits_fields_in_order_and_stops),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
