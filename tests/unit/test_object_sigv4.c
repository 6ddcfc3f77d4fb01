/*
 * SigV4 signer against AWS's published vectors: the aws-sig-v4-test-suite
 * (AKIDEXAMPLE, 20150830T123600Z, us-east-1, service "service") and the S3
 * GET-object example of the S3 API reference (AKIAIOSFODNN7EXAMPLE,
 * 20130524T000000Z, GET /test.txt with Range bytes=0-9).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/object/obj_sigv4.h"
#include "common/object/object_internal.h"

#define SUITE_AK "AKIDEXAMPLE"
#define SUITE_SK "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SCOPE "Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request"

static struct jo_sigv4_req suite_req(const char *method, const char *query,
				     const struct jo_sigv4_header *h, size_t nh,
				     const char *payload_hash)
{
	struct jo_sigv4_req r = {
		.method = method, .path = "/", .query = query, .headers = h, .nheaders = nh,
		.payload_hash = payload_hash, .access_key = SUITE_AK, .secret_key = SUITE_SK,
		.region = "us-east-1", .service = "service", .amz_date = "20150830T123600Z",
	};
	return r;
}

static void get_vanilla(void **state)
{
	const struct jo_sigv4_header h[] = {
		{ "Host", "example.amazonaws.com" },
		{ "X-Amz-Date", "20150830T123600Z" },
	};
	struct jo_sigv4_req r = suite_req("GET", NULL, h, 2, EMPTY_SHA);
	char *creq = jo_sigv4_canonical_request(&r);
	char *sts = jo_sigv4_string_to_sign(&r);
	char *auth = jo_sigv4_authorization(&r);

	(void)state;
	assert_string_equal(creq, "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
				  "host;x-amz-date\n" EMPTY_SHA);
	assert_string_equal(sts, "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
				 "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
	assert_string_equal(auth, "AWS4-HMAC-SHA256 " SCOPE ", SignedHeaders=host;x-amz-date, "
				  "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	free(creq);
	free(sts);
	free(auth);
}

static void get_vanilla_query_order_key_case(void **state)
{
	const struct jo_sigv4_header h[] = {
		{ "X-Amz-Date", "20150830T123600Z" },
		{ "Host", "example.amazonaws.com" },
	};
	/* Given out of order: the signer must sort. */
	struct jo_sigv4_req r = suite_req("GET", "Param2=value2&Param1=value1", h, 2, EMPTY_SHA);
	char *creq = jo_sigv4_canonical_request(&r);
	char *auth = jo_sigv4_authorization(&r);

	(void)state;
	assert_string_equal(creq, "GET\n/\nParam1=value1&Param2=value2\nhost:example.amazonaws.com\n"
				  "x-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" EMPTY_SHA);
	assert_string_equal(auth, "AWS4-HMAC-SHA256 " SCOPE ", SignedHeaders=host;x-amz-date, "
				  "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	free(creq);
	free(auth);
}

static void post_x_www_form_urlencoded(void **state)
{
	const struct jo_sigv4_header h[] = {
		{ "Content-Type", "application/x-www-form-urlencoded" },
		{ "Host", "example.amazonaws.com" },
		{ "X-Amz-Date", "20150830T123600Z" },
	};
	char body_hash[65];
	struct jo_sigv4_req r;
	char *auth, *sts;

	(void)state;
	jo_sigv4_sha256_hex("Param1=value1", 13, body_hash);
	r = suite_req("POST", NULL, h, 3, body_hash);
	sts = jo_sigv4_string_to_sign(&r);
	auth = jo_sigv4_authorization(&r);
	assert_string_equal(sts, "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
				 "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281");
	assert_string_equal(auth, "AWS4-HMAC-SHA256 " SCOPE ", SignedHeaders=content-type;host;x-amz-date, "
				  "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a");
	free(sts);
	free(auth);
}

static void get_utf8_path(void **state)
{
	const struct jo_sigv4_header h[] = {
		{ "Host", "example.amazonaws.com" },
		{ "X-Amz-Date", "20150830T123600Z" },
	};
	struct jo_dynbuf path;
	struct jo_sigv4_req r;
	char *auth;

	(void)state;
	jo_dynbuf_init(&path, 0);
	jo_dynbuf_adds(&path, "/");
	jo_obj_uri_encode(&path, "\xe1\x88\xb4", true);
	assert_string_equal(path.p, "/%E1%88%B4");
	r = suite_req("GET", NULL, h, 2, EMPTY_SHA);
	r.path = path.p;
	auth = jo_sigv4_authorization(&r);
	assert_string_equal(auth, "AWS4-HMAC-SHA256 " SCOPE ", SignedHeaders=host;x-amz-date, "
				  "Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85");
	free(auth);
	jo_dynbuf_release(&path);
}

static void s3_get_object_example(void **state)
{
	const struct jo_sigv4_header h[] = {
		{ "Host", "examplebucket.s3.amazonaws.com" },
		{ "Range", "bytes=0-9" },
		{ "x-amz-content-sha256", EMPTY_SHA },
		{ "x-amz-date", "20130524T000000Z" },
	};
	struct jo_sigv4_req r = {
		.method = "GET", .path = "/test.txt", .headers = h, .nheaders = 4,
		.payload_hash = EMPTY_SHA, .access_key = "AKIAIOSFODNN7EXAMPLE",
		.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", .region = "us-east-1",
		.service = "s3", .amz_date = "20130524T000000Z",
	};
	char *auth = jo_sigv4_authorization(&r);

	(void)state;
	assert_string_equal(auth,
			    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
			    "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
			    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	free(auth);
}

static void header_values_are_trimmed_and_collapsed(void **state)
{
	/* aws-sig-v4-test-suite get-header-value-trim. */
	const struct jo_sigv4_header h[] = {
		{ "Host", "example.amazonaws.com" },
		{ "My-Header1", " value1" },
		{ "My-Header2", "\"a   b   c\"" },
		{ "X-Amz-Date", "20150830T123600Z" },
	};
	struct jo_sigv4_req r = suite_req("GET", NULL, h, 4, EMPTY_SHA);
	char *creq = jo_sigv4_canonical_request(&r);
	char *auth = jo_sigv4_authorization(&r);

	(void)state;
	assert_non_null(strstr(creq, "my-header1:value1\nmy-header2:\"a b c\"\n"));
	assert_string_equal(auth, "AWS4-HMAC-SHA256 " SCOPE
			    ", SignedHeaders=host;my-header1;my-header2;x-amz-date, "
			    "Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736");
	free(creq);
	free(auth);
}

static void uri_encoding_of_awkward_keys(void **state)
{
	struct jo_dynbuf b;

	(void)state;
	jo_dynbuf_init(&b, 0);
	jo_obj_uri_encode(&b, "a b+c%d?e//f~g_h-i.j", true);
	assert_string_equal(b.p, "a%20b%2Bc%25d%3Fe//f~g_h-i.j");
	jo_dynbuf_reset(&b);
	jo_obj_uri_encode(&b, "x/y=z&w", false);
	assert_string_equal(b.p, "x%2Fy%3Dz%26w");
	jo_dynbuf_release(&b);
}

static void url_decode_rules(void **state)
{
	char *s;

	(void)state;
	s = jo_obj_url_decode("a+b%2Bc%2fd%E2%82%AC", true);
	assert_string_equal(s, "a b+c/d\xe2\x82\xac");
	free(s);
	assert_null(jo_obj_url_decode("bad%2", true));
	assert_null(jo_obj_url_decode("bad%zz", true));
	/* a NUL byte would cut the string short */
	assert_null(jo_obj_url_decode("a%00b", true));
	s = jo_obj_url_decode("%01%ff", false);
	assert_memory_equal(s, "\x01\xff", 3);
	free(s);
}

static void md5_and_sha256_helpers(void **state)
{
	char b64[25], hex[33], sha[65];

	(void)state;
	jo_obj_md5_base64("", 0, b64);
	assert_string_equal(b64, "1B2M2Y8AsgTpgAmY7PhCfg==");
	jo_obj_md5_hex("abc", 3, hex);
	assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
	jo_sigv4_sha256_hex("", 0, sha);
	assert_string_equal(sha, EMPTY_SHA);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(get_vanilla),
		cmocka_unit_test(get_vanilla_query_order_key_case),
		cmocka_unit_test(post_x_www_form_urlencoded),
		cmocka_unit_test(get_utf8_path),
		cmocka_unit_test(s3_get_object_example),
		cmocka_unit_test(header_values_are_trimmed_and_collapsed),
		cmocka_unit_test(uri_encoding_of_awkward_keys),
		cmocka_unit_test(url_decode_rules),
		cmocka_unit_test(md5_and_sha256_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
