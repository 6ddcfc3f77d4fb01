/* test_meta_format: format JSON parsing (incl. KeyEncrypted secrets) and
 * Redis attr decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "common/err.h"
#include "common/mem.h"
#include "common/meta/meta.h"

/* Stored by juicefs 1.4.2 `format --secret-key 'S3cr3t/Key+xyz' --session-token TOK123`
 * (it encrypts secrets by default). */
static const char *enc_json =
	"{\n\"Name\": \"encvol\",\n\"UUID\": \"0a715edb-5356-457e-a8dd-061bf25bef6d\",\n"
	"\"Storage\": \"file\",\n\"Tiers\": {\n\"0\": {\n\"ID\": 0,\n\"StorageClass\": \"\",\n"
	"\"Tag\": \"\"\n}\n},\n\"Bucket\": \"/tmp/meta-h/objs2/\",\n\"AccessKey\": \"AK\",\n"
	"\"SecretKey\": \"y4HX6KabQtekDyOzqsx+O/5+bc511QoiEEu34Hjc8IEU6ycLOD/dHXqg\",\n"
	"\"SessionToken\": \"HUB8cw/Ze2oqjT+bLSdA55ueLkMwtRS6VqOPR0vfZPR6uQ==\",\n"
	"\"BlockSize\": 4096,\n\"Compression\": \"none\",\n\"EncryptAlgo\": \"aes256gcm-rsa\",\n"
	"\"KeyEncrypted\": true,\n\"TrashDays\": 0,\n\"MetaVersion\": 1,\n"
	"\"MinClientVersion\": \"1.1.0-A\",\n\"DirStats\": true,\n\"EnableACL\": false\n}";

static void test_key_encrypted(void **state)
{
	struct jo_format f;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_format_parse(enc_json, &f, &err), 0);
	assert_string_equal(f.name, "encvol");
	assert_string_equal(f.uuid, "0a715edb-5356-457e-a8dd-061bf25bef6d");
	assert_string_equal(f.storage, "file");
	assert_string_equal(f.bucket, "/tmp/meta-h/objs2/");
	assert_string_equal(f.access_key, "AK");
	assert_true(f.key_encrypted);
	assert_string_equal(f.secret_key, "S3cr3t/Key+xyz");
	assert_string_equal(f.session_token, "TOK123");
	assert_string_equal(f.compression, "none");
	assert_string_equal(f.encrypt_algo, "aes256gcm-rsa");
	assert_false(f.has_encrypt_key);
	assert_int_equal(f.block_size_kib, 4096);
	assert_int_equal(f.trash_days, 0);
	assert_int_equal(f.meta_version, 1);
	assert_int_equal(f.shards, 0);
	assert_false(f.hash_prefix);
	assert_false(f.changelog);
	assert_string_equal(f.raw_json, enc_json);
	jo_format_release(&f);
	jo_format_release(&f); /* idempotent */
}

static char *replace(const char *s, const char *from, const char *to)
{
	static char buf[4096];
	const char *p = strstr(s, from);

	assert_non_null(p);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
	return buf;
}

static void test_key_encrypted_bad(void **state)
{
	struct jo_format f;
	struct jo_err err = { 0 };

	(void)state;
	/* another UUID: GCM authentication fails */
	assert_int_equal(jo_format_parse(replace(enc_json, "0a715edb", "1a715edb"), &f, &err),
			 JO_EPROTO);
	assert_null(strstr(err.msg, "S3cr3t"));
	assert_null(f.name);
	/* one flipped ciphertext character */
	assert_int_equal(jo_format_parse(replace(enc_json, "y4HX6Kab", "y4HX6Kac"), &f, &err),
			 JO_EPROTO);
	/* not base64 / too short */
	assert_int_equal(jo_format_parse(replace(enc_json, "y4HX6KabQtekDyOzqsx+O/5+bc511QoiEEu34Hjc8IEU6ycLOD/dHXqg", "abc"),
					 &f, &err), JO_EPROTO);
	assert_int_equal(jo_format_parse(replace(enc_json, "y4HX6KabQtekDyOzqsx+O/5+bc511QoiEEu34Hjc8IEU6ycLOD/dHXqg", "AAAA"),
					 &f, &err), JO_EPROTO);
	/* sm4gcm secrets are not supported */
	assert_int_equal(jo_format_parse(replace(enc_json, "aes256gcm-rsa", "sm4gcm"), &f, &err),
			 JO_EUNSUPPORTED);
	/* KeyEncrypted false: stored in clear */
	assert_int_equal(jo_format_parse(replace(enc_json, "\"KeyEncrypted\": true", "\"KeyEncrypted\": false"),
					 &f, &err), 0);
	assert_string_equal(f.secret_key, "y4HX6KabQtekDyOzqsx+O/5+bc511QoiEEu34Hjc8IEU6ycLOD/dHXqg");
	jo_format_release(&f);
}

static void test_fields_and_defaults(void **state)
{
	struct jo_format f;
	struct jo_err err = { 0 };
	const char *j = "{\"Name\":\"v\",\"UUID\":\"u\",\"Storage\":\"S3\",\"Bucket\":\"http://h/b%d\","
			"\"Shards\":4,\"HashPrefix\":true,\"EncryptKey\":\"-----BEGIN\","
			"\"Compression\":\"ZSTD\",\"TrashDays\":3,\"ChangeLog\":true,\"MetaVersion\":2,"
			"\"Future\":{\"x\":[1,2]},\"BlockSize\":1024}";

	(void)state;
	assert_int_equal(jo_format_parse(j, &f, &err), 0);
	assert_string_equal(f.storage, "s3");
	assert_string_equal(f.bucket, "http://h/b%d");
	assert_int_equal(f.shards, 4);
	assert_true(f.hash_prefix);
	assert_true(f.has_encrypt_key);
	assert_string_equal(f.compression, "zstd");
	assert_int_equal(f.trash_days, 3);
	assert_true(f.changelog);
	assert_int_equal(f.meta_version, 2); /* parse keeps it; load_format refuses */
	assert_int_equal(f.block_size_kib, 1024);
	assert_null(f.secret_key);
	assert_null(f.access_key);
	jo_format_release(&f);

	/* "" is juicefs's "none"; a record without TrashDays predates juicefs 1.0 */
	assert_int_equal(jo_format_parse("{\"Name\":\"v\",\"UUID\":\"u\",\"Storage\":\"file\","
					 "\"Bucket\":\"/b/\",\"BlockSize\":4096,\"Compression\":\"\"}",
					 &f, &err), 0);
	assert_string_equal(f.compression, "none");
	assert_string_equal(f.storage, "file");
	assert_int_equal(f.block_size_kib, 4096);
	assert_int_equal(f.trash_days, 0);
	jo_format_release(&f);
	/* nothing is defaulted: a record without Storage, Bucket or BlockSize is corrupt */
	assert_int_equal(jo_format_parse("{\"Name\":\"v\",\"UUID\":\"u\",\"Compression\":\"\"}", &f, &err),
			 JO_EPROTO);
	assert_null(f.name);

	assert_int_equal(jo_format_parse("not json", &f, &err), JO_EPROTO);
	assert_int_equal(jo_format_parse("[1]", &f, &err), JO_EPROTO);
	assert_int_equal(jo_format_parse("{\"Name\":\"v\"}", &f, &err), JO_EPROTO);
}


/* A complete record as juicefs 1.x writes it, with one field replaced. */
static const char *good_fmt =
	"{\"Name\":\"vol\",\"UUID\":\"u-1\",\"Storage\":\"s3\",\"Bucket\":\"http://h/b\","
	"\"BlockSize\":4096,\"Compression\":\"lz4\",\"TrashDays\":1,\"MetaVersion\":1,"
	"\"HashPrefix\":false,\"DirStats\":true}";

static void test_format_validated_never_defaulted(void **state)
{
	static const struct {
		const char *from, *to, *field;
	} bad[] = {
		{ "\"BlockSize\":4096", "\"BlockSize\":0", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":-1", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":63", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":16385", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":4294971392", "BlockSize" }, /* 2^32 + 4096 */
		{ "\"BlockSize\":4096", "\"BlockSize\":\"4096\"", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":4096.5", "BlockSize" },
		{ "\"BlockSize\":4096,", "", "BlockSize" },
		{ "\"BlockSize\":4096", "\"BlockSize\":null", "BlockSize" },
		{ "\"Compression\":\"lz4\"", "\"Compression\":\"gzip\"", "Compression" },
		{ "\"Compression\":\"lz4\"", "\"Compression\":7", "Compression" },
		{ "\"Storage\":\"s3\"", "\"Storage\":\"nosuchstore\"", "Storage" },
		{ "\"Storage\":\"s3\"", "\"Storage\":\"\"", "Storage" },
		{ "\"Storage\":\"s3\",", "", "Storage" },
		{ "\"Storage\":\"s3\"", "\"Storage\":[\"s3\"]", "Storage" },
		{ "\"Bucket\":\"http://h/b\",", "", "Bucket" },
		{ "\"TrashDays\":1", "\"TrashDays\":-1", "TrashDays" },
		{ "\"TrashDays\":1", "\"TrashDays\":4294967297", "TrashDays" },
		{ "\"TrashDays\":1", "\"TrashDays\":\"1\"", "TrashDays" },
		{ "\"MetaVersion\":1", "\"MetaVersion\":-3", "MetaVersion" },
		{ "\"HashPrefix\":false", "\"HashPrefix\":\"yes\"", "HashPrefix" },
		{ "\"DirStats\":true", "\"DirStats\":1", "DirStats" },
		{ "\"Name\":\"vol\"", "\"Name\":\"\"", "Name" },
		{ "\"Name\":\"vol\"", "\"Name\":5", "Name" },
		{ "\"UUID\":\"u-1\"", "\"UUID\":\"\"", "UUID" },
		{ "\"Bucket\":\"http://h/b\"", "\"Bucket\":\"http://h/b\",\"Shards\":300", "Shards" },
	};
	static const struct {
		const char *from, *to;
	} good[] = {
		{ "\"BlockSize\":4096", "\"BlockSize\":64" },       /* juicefs's smallest */
		{ "\"BlockSize\":4096", "\"BlockSize\":16384" },    /* and largest */
		{ "\"Compression\":\"lz4\"", "\"Compression\":\"ZSTD\"" },
		{ "\"Compression\":\"lz4\"", "\"Compression\":null" },
		{ "\"Compression\":\"lz4\",", "" },
		{ "\"Storage\":\"s3\"", "\"Storage\":\"MinIO\"" },
		{ "\"Storage\":\"s3\"", "\"Storage\":\"gs\"" },      /* known to juicefs: refused at open */
		{ "\"TrashDays\":1,", "" },                          /* before juicefs 1.0 */
		{ "\"MetaVersion\":1,", "" },
		{ "\"Bucket\":\"http://h/b\"", "\"Bucket\":\"http://h/b%d\",\"Shards\":256" },
	};
	struct jo_format f;
	struct jo_err err = { 0 };

	(void)state;
	assert_int_equal(jo_format_parse(good_fmt, &f, &err), 0);
	jo_format_release(&f);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = jo_format_parse(replace(good_fmt, bad[i].from, bad[i].to), &f, &err);

		if (rc != JO_EPROTO || !strstr(err.msg, bad[i].field))
			fail_msg("bad case %zu (%s): rc %d, '%s'", i, bad[i].to, rc, err.msg);
		assert_null(f.name);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int rc = jo_format_parse(replace(good_fmt, good[i].from, good[i].to), &f, &err);

		if (rc != 0)
			fail_msg("good case %zu (%s): rc %d, '%s'", i, good[i].to, rc, err.msg);
		jo_format_release(&f);
	}
}

static void test_attr_decode(void **state)
{
	uint8_t b[90];
	struct jo_attr a;
	struct jo_err err = { 0 };

	(void)state;
	memset(b, 0, sizeof(b));
	b[0] = 0x21;
	b[1] = (uint8_t)((1 << 4) | 0x01); /* type 1, mode 0o644 = 0x1a4 */
	b[2] = 0xa4;
	jo_put_be32(b + 3, 1000);
	jo_put_be32(b + 7, 2000);
	jo_put_be64(b + 11, (uint64_t)-5); /* negative atime */
	jo_put_be32(b + 19, 7);
	jo_put_be64(b + 23, 1795960564ULL);
	jo_put_be32(b + 31, 629000000);
	jo_put_be64(b + 35, 1795960565ULL);
	jo_put_be32(b + 43, 999999999);
	jo_put_be32(b + 47, 3);
	jo_put_be64(b + 51, 0x123456789ULL);
	jo_put_be32(b + 59, 0xdeadbeef);
	jo_put_be64(b + 63, 42);
	assert_int_equal(jo_meta_decode_attr(b, 72, &a, &err), 0);
	assert_int_equal(a.flags, 0x21);
	assert_int_equal(a.type, JO_TYPE_FILE);
	assert_int_equal(a.mode, 0644);
	assert_int_equal(a.uid, 1000);
	assert_int_equal(a.gid, 2000);
	assert_true(a.atime == -5);
	assert_int_equal(a.atimensec, 7);
	assert_int_equal(a.mtime, 1795960564);
	assert_int_equal(a.mtimensec, 629000000);
	assert_int_equal(a.ctime, 1795960565);
	assert_int_equal(a.ctimensec, 999999999);
	assert_int_equal(a.nlink, 3);
	assert_int_equal(a.length, 0x123456789ULL);
	assert_int_equal(a.rdev, 0xdeadbeef);
	assert_int_equal(a.parent, 42);
	/* with ACL ids and tier byte: same result */
	assert_int_equal(jo_meta_decode_attr(b, 81, &a, &err), 0);
	assert_int_equal(a.parent, 42);
	/* 71 bytes: parent still present; 70 or 63: no parent */
	assert_int_equal(jo_meta_decode_attr(b, 71, &a, &err), 0);
	assert_int_equal(a.parent, 42);
	assert_int_equal(jo_meta_decode_attr(b, 70, &a, &err), 0);
	assert_int_equal(a.parent, 0);
	assert_int_equal(a.length, 0x123456789ULL);
	assert_int_equal(jo_meta_decode_attr(b, 63, &a, &err), 0);
	assert_int_equal(a.rdev, 0xdeadbeef);
	assert_int_equal(jo_meta_decode_attr(b, 62, &a, &err), JO_EPROTO);
	assert_int_equal(jo_meta_decode_attr(b, 0, &a, &err), JO_EPROTO);
	/* directory type with sticky + setuid bits */
	b[1] = (uint8_t)((2 << 4) | 0x0f);
	b[2] = 0xff;
	assert_int_equal(jo_meta_decode_attr(b, 72, &a, &err), 0);
	assert_int_equal(a.type, JO_TYPE_DIR);
	assert_int_equal(a.mode, 07777);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_encrypted),
		cmocka_unit_test(test_key_encrypted_bad),
		cmocka_unit_test(test_fields_and_defaults),
		cmocka_unit_test(test_format_validated_never_defaulted),
		cmocka_unit_test(test_attr_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
