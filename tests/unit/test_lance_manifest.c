/* Unit tests for manifest names, decoding, schema and the readers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/object/object.h"
#include "lanceparse/lance.h"
#include "support/testutil.h"

/* ---- a tiny protobuf encoder for building test manifests ---- */
struct enc {
	uint8_t b[4096];
	size_t n;
};

static void put_varint(struct enc *e, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		e->b[e->n++] = (uint8_t)(c | (v ? 0x80 : 0));
	} while (v);
}

static void put_u(struct enc *e, uint32_t num, uint64_t v)
{
	put_varint(e, (uint64_t)num << 3);
	put_varint(e, v);
}

static void put_bytes(struct enc *e, uint32_t num, const void *d, size_t len)
{
	put_varint(e, ((uint64_t)num << 3) | 2);
	put_varint(e, len);
	memcpy(e->b + e->n, d, len);
	e->n += len;
}

static void put_msg(struct enc *e, uint32_t num, const struct enc *m)
{
	put_bytes(e, num, m->b, m->n);
}

static void field(struct enc *e, const char *name, int32_t id, int32_t parent, const char *type)
{
	struct enc f = { .n = 0 };
	put_bytes(&f, 2, name, strlen(name));
	put_u(&f, 3, (uint64_t)(int64_t)id);
	put_u(&f, 4, (uint64_t)(int64_t)parent);
	put_bytes(&f, 5, type, strlen(type));
	put_msg(e, 1, &f);
}

/* A manifest file: a 10-byte "transaction" first, so the Manifest is not at 0. */
static size_t build_manifest(uint8_t *out, uint64_t version)
{
	struct enc m = { .n = 0 }, frag = { .n = 0 }, df = { .n = 0 }, del = { .n = 0 },
		   packed = { .n = 0 }, fmt = { .n = 0 };
	size_t n = 0;

	field(&m, "id", 0, -1, "int64");
	field(&m, "st", 1, -1, "struct");
	field(&m, "x", 2, 1, "int32");
	field(&m, "inner", 3, 1, "struct");
	field(&m, "a", 4, 3, "string");
	field(&m, "a.b", 5, -1, "float");
	put_u(&frag, 1, 7);
	put_bytes(&df, 1, "f1.lance", 8);
	put_varint(&packed, 0);
	put_varint(&packed, 2);
	put_varint(&packed, 4);
	put_bytes(&df, 2, packed.b, packed.n);
	put_bytes(&df, 3, packed.b, packed.n);
	put_u(&df, 4, 2);
	put_u(&df, 5, 1);
	put_u(&df, 6, 12345);
	put_msg(&frag, 2, &df);
	put_u(&del, 1, 1);
	put_u(&del, 2, 3);
	put_u(&del, 3, UINT64_MAX - 1);
	put_u(&del, 4, 9);
	put_msg(&frag, 3, &del);
	put_u(&frag, 4, 100);
	put_msg(&m, 2, &frag);
	put_u(&m, 3, version);
	put_u(&m, 9, 1);
	put_bytes(&fmt, 1, "lance", 5);
	put_bytes(&fmt, 2, "2.1", 3);
	put_msg(&m, 15, &fmt);
	put_u(&m, 21, 0); /* transaction_section present at position 0 */

	memset(out, 0xee, 10);
	n = 10;
	uint64_t pos = n;
	uint32_t len = (uint32_t)m.n;
	memcpy(out + n, &len, 4);
	n += 4;
	memcpy(out + n, m.b, m.n);
	n += m.n;
	memcpy(out + n, &pos, 8);
	n += 8;
	uint16_t v[2] = { 0, 2 };
	memcpy(out + n, v, 4);
	n += 4;
	memcpy(out + n, "LANC", 4);
	return n + 4;
}

static void manifest_names_both_schemes(void **state)
{
	struct lance_version v;
	(void)state;
	assert_true(lance_version_parse_name("10.manifest", &v));
	assert_true(v.version == 10 && !v.v2_name && !v.detached);
	assert_true(lance_version_parse_name("18446744073709551614.manifest", &v));
	assert_true(v.version == 1 && v.v2_name);
	assert_true(lance_version_parse_name("18446744073709551615.manifest", &v));
	assert_true(v.version == 0 && v.v2_name);
	assert_true(lance_version_parse_name("d9223372036854775809.manifest", &v));
	assert_true(v.detached && v.version == 9223372036854775809ull);
	assert_false(lance_version_parse_name("d5.manifest", &v)); /* top bit not set */
	assert_false(lance_version_parse_name("latest_version_hint.json", &v));
	assert_false(lance_version_parse_name("3.manifest-0a1b", &v));
	assert_false(lance_version_parse_name(".tmp_7.manifest_abc", &v));
	assert_false(lance_version_parse_name("x.manifest", &v));
	assert_false(lance_version_parse_name(".manifest", &v));
	assert_false(lance_version_parse_name("99999999999999999999.manifest", &v)); /* > u64 */
}

static void manifest_decodes_schema_fragments_and_deletions(void **state)
{
	uint8_t buf[4096];
	size_t n = build_manifest(buf, 5);
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	size_t idx;
	(void)state;
	assert_int_equal(lance_manifest_decode(buf, n, &m, &err), 0);
	assert_true(m->version == 5);
	assert_int_equal(m->manifest_pos, 10);
	assert_true(m->reader_flags == 1);
	assert_string_equal(m->format_version, "2.1");
	assert_int_equal(m->nfields, 6);
	assert_int_equal(m->fields[0].parent_id, -1);
	assert_int_equal(m->fields[4].parent_id, 3);
	assert_int_equal(m->nfrags, 1);
	assert_true(m->frags[0].id == 7);
	assert_int_equal(m->frags[0].nfiles, 1);
	assert_string_equal(m->frags[0].files[0].path, "f1.lance");
	assert_int_equal(m->frags[0].files[0].nfields, 3);
	assert_int_equal(m->frags[0].files[0].column_indices[2], 4);
	assert_true(m->frags[0].files[0].file_size == 12345);
	assert_true(m->frags[0].del.present);
	assert_true(m->frags[0].del.id == UINT64_MAX - 1);
	assert_int_equal(m->frags[0].del.file_type, 1);
	/* names: top-level, dotted paths, a top-level name containing a dot */
	assert_int_equal(lance_field_resolve(m, "st", &idx, &err), 0);
	assert_int_equal(idx, 1);
	assert_int_equal(lance_field_resolve(m, "st.inner.a", &idx, &err), 0);
	assert_int_equal(idx, 4);
	assert_int_equal(lance_field_resolve(m, "a.b", &idx, &err), 0);
	assert_int_equal(idx, 5);
	assert_int_equal(lance_field_resolve(m, "st.nope", &idx, &err), JO_ENOTFOUND);
	assert_int_equal(lance_field_resolve(m, "x", &idx, &err), JO_ENOTFOUND);
	lance_manifest_free(m);
}

static void manifest_rejects_every_truncation_and_bad_tail(void **state)
{
	uint8_t buf[4096], bad[4096];
	size_t n = build_manifest(buf, 5);
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	(void)state;
	if (n < 16 || n > sizeof(bad)) {
		fail_msg("test manifest has an unexpected size %zu", n);
		return;
	}
	for (size_t cut = 0; cut < n; cut++) {
		assert_int_equal(lance_manifest_decode(buf, cut, &m, &err), JO_EPROTO);
		assert_null(m);
	}
	memcpy(bad, buf, n);
	memcpy(bad + n - 4, "LANX", 4);
	assert_int_equal(lance_manifest_decode(bad, n, &m, &err), JO_EPROTO);
	memcpy(bad, buf, n);
	bad[n - 16] = 9; /* position no longer points at the length prefix */
	assert_int_equal(lance_manifest_decode(bad, n, &m, &err), JO_EPROTO);
	/* Flipping any single byte must never crash (errors are fine). */
	for (size_t i = 0; i < n; i++) {
		memcpy(bad, buf, n);
		bad[i] ^= 0xff;
		if (lance_manifest_decode(bad, n, &m, &err) == 0)
			lance_manifest_free(m);
		m = NULL;
	}
}

static char tmp[256];

static void write_file(const char *rel, const void *d, size_t n)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	FILE *f = fopen(p, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(d, 1, n, f), n);
	fclose(f);
}

static int setup_tmp(void **state)
{
	char p[512];
	(void)state;
	snprintf(tmp, sizeof(tmp), "/tmp/test_lance_XXXXXX");
	if (!mkdtemp(tmp))
		return -1;
	snprintf(p, sizeof(p), "%s/ds", tmp);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/ds/_versions", tmp);
	mkdir(p, 0755);
	return 0;
}

static int teardown_tmp(void **state)
{
	(void)state;
	return tu_rm_rf(tmp);
}

static void manifest_load_picks_latest_and_explicit_versions(void **state)
{
	uint8_t buf[4096];
	struct lance_io *io = NULL;
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	char root[512];
	(void)state;
	/* V1 names 2 and 10 (numeric, not lexicographic order) and a stale temp file. */
	write_file("ds/_versions/2.manifest", buf, build_manifest(buf, 2));
	write_file("ds/_versions/10.manifest", buf, build_manifest(buf, 10));
	write_file("ds/_versions/.tmp_11.manifest_x", "junk", 4);
	write_file("ds/_versions/latest_version_hint.json", "{\"version\":99}", 14);
	snprintf(root, sizeof(root), "%s/ds", tmp);
	assert_int_equal(lance_io_open(&io, root, &err), 0);
	assert_int_equal(lance_manifest_load(io, 0, &m, &err), 0);
	assert_true(m->version == 10);
	assert_string_equal(m->manifest_path, "_versions/10.manifest");
	lance_manifest_free(m);
	assert_int_equal(lance_manifest_load(io, 2, &m, &err), 0);
	assert_true(m->version == 2);
	lance_manifest_free(m);
	assert_int_equal(lance_manifest_load(io, 3, &m, &err), JO_ENOTFOUND);
	assert_non_null(strstr(err.msg, "version 3"));
	/* A V2 name for version 2 wins over the V1 name. */
	write_file("ds/_versions/18446744073709551613.manifest", buf, build_manifest(buf, 2));
	assert_int_equal(lance_manifest_load(io, 2, &m, &err), 0);
	assert_string_equal(m->manifest_path, "_versions/18446744073709551613.manifest");
	lance_manifest_free(m);
	/* A manifest whose content names another version is corrupt. */
	write_file("ds/_versions/18446744073709551604.manifest", buf, build_manifest(buf, 4));
	assert_int_equal(lance_manifest_load(io, 11, &m, &err), JO_EPROTO);
	lance_io_close(io);
	/* Not a dataset. */
	assert_int_equal(lance_io_open(&io, tmp, &err), 0);
	assert_int_equal(lance_manifest_load(io, 0, &m, &err), JO_ENOTFOUND);
	assert_non_null(strstr(err.msg, "not a Lance dataset"));
	lance_io_close(io);
	assert_int_equal(lance_io_open(&io, "/nonexistent/ds.lance", &err), JO_ENOTFOUND);
	assert_int_equal(lance_io_open(&io, "s3://b/p", &err), JO_EUNSUPPORTED);
}

static void obj_reader_reads_ranges_and_lists(void **state)
{
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	struct jo_obj *o = NULL;
	struct lance_io *io = NULL;
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	uint8_t buf[4096], got[4];
	uint64_t size;
	char bucket[512];
	(void)state;
	/* The file backend stands in for S3: same interface, no server. */
	snprintf(bucket, sizeof(bucket), "%s/bucket/", tmp);
	oo.storage = "file";
	oo.bucket = bucket;
	if (jo_obj_open(&o, &oo, &err) < 0) {
		/* The object library must work: this is not a skip. */
		fail_msg("jo_obj_open: %s", err.msg);
	}
	assert_int_equal(jo_obj_create_bucket(o, &err), 0);
	size_t n = build_manifest(buf, 3);
	assert_int_equal(jo_obj_put(o, "pre/ds/_versions/3.manifest", buf, n, NULL, &err), 0);
	assert_int_equal(jo_obj_put(o, "pre/ds/data/a.lance", "abcdefgh", 8, NULL, &err), 0);
	assert_int_equal(lance_io_open_obj(&io, o, "pre/ds/", &err), 0);
	assert_int_equal(lance_io_size(io, "data/a.lance", &size, &err), 0);
	assert_int_equal(size, 8);
	assert_int_equal(lance_io_pread(io, "data/a.lance", got, 4, 3, &err), 0);
	assert_memory_equal(got, "defg", 4);
	assert_int_equal(lance_io_pread(io, "data/a.lance", got, 4, 6, &err), JO_EPROTO);
	assert_int_equal(lance_manifest_load(io, 0, &m, &err), 0);
	assert_true(m->version == 3);
	lance_manifest_free(m);
	lance_io_close(io);
	assert_int_equal(lance_io_open_obj(&io, o, "pre/none", &err), 0);
	assert_int_equal(lance_manifest_load(io, 0, &m, &err), JO_ENOTFOUND);
	lance_io_close(io);
	jo_obj_close(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(manifest_names_both_schemes),
		cmocka_unit_test(manifest_decodes_schema_fragments_and_deletions),
		cmocka_unit_test(manifest_rejects_every_truncation_and_bad_tail),
		cmocka_unit_test_setup_teardown(manifest_load_picks_latest_and_explicit_versions,
						setup_tmp, teardown_tmp),
		cmocka_unit_test_setup_teardown(obj_reader_reads_ranges_and_lists, setup_tmp,
						teardown_tmp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
