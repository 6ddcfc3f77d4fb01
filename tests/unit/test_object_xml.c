/* S3 XML reply parsing (expat) and bucket-string parsing of common/object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/object/object.h"
#include "common/object/object_internal.h"

#define NS "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\""
/* One listed object. */
#define CONTENTS(key, size, mtime) \
	"<Contents><Key>" key "</Key><Size>" size "</Size><LastModified>" mtime "</LastModified></Contents>"

/* Parses a listing that must be well formed and hold n entries. */
static void list_ok(const char *xml, size_t len, struct jo_s3_list_page *p, size_t n)
{
	struct jo_err err;

	assert_int_equal(jo_s3xml_parse_list(xml, len, p, &err), 0);
	assert_int_equal(p->n, n);
}

/*
 * Every listing of bad[0..n) is a protocol error that leaves no entries;
 * with own_reason, the entries array is NULL too and the error is not
 * about a missing Key, LastModified or IsTruncated (each case fails for its
 * own reason).
 */
static void lists_refused(const char *const *bad, size_t n, bool own_reason)
{
	for (size_t i = 0; i < n; i++) {
		struct jo_s3_list_page p;
		struct jo_err err;
		int rc = jo_s3xml_parse_list(bad[i], strlen(bad[i]), &p, &err);

		if (rc != JO_EPROTO || (own_reason && (strstr(err.msg, "without Key") ||
						      strstr(err.msg, "without LastModified") ||
						      strstr(err.msg, "IsTruncated"))))
			fail_msg("case %zu: rc %d, %zu entries (%s)", i, rc, p.n, err.msg);
		assert_int_equal(p.n, 0);
		if (own_reason)
			assert_null(p.entries);
	}
}

/* base with its first `from` replaced by `to`, into out. */
static void replace_once(const char *base, const char *from, const char *to, char *out, size_t size)
{
	const char *at = strstr(base, from);

	assert_non_null(at);
	snprintf(out, size, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
}

static void list_v2_with_url_encoded_keys(void **state)
{
	const char *xml =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<ListBucketResult " NS ">\n"
		"  <Name>b</Name><Prefix>vol%2F</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>\n"
		"  <IsTruncated>true</IsTruncated>\n"
		"  <Contents><Key>vol%2Fa+b%2Bc</Key><LastModified>2009-10-12T17:50:30.123Z</LastModified>"
		"<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>"
		"<StorageClass>STANDARD</StorageClass></Contents>\n"
		"  <Contents><Key>vol%2F%E2%82%AC%25%3F</Key><LastModified>2009-10-12T17:50:31Z</LastModified>"
		"<ETag>\"abc-2\"</ETag><Size>0</Size></Contents>\n"
		"  <EncodingType>url</EncodingType>\n"
		"  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>\n"
		"</ListBucketResult>";
	struct jo_s3_list_page p;

	(void)state;
	list_ok(xml, strlen(xml), &p, 2);
	assert_string_equal(p.entries[0].key, "vol/a b+c");
	assert_int_equal(p.entries[0].size, 434234);
	assert_int_equal(p.entries[0].mtime, 1255369830);
	assert_int_equal(p.entries[0].mtime_nsec, 123000000);
	assert_string_equal(p.entries[0].etag, "fba9dede5f27731c9771645a39863328");
	assert_string_equal(p.entries[1].key, "vol/\xe2\x82\xac%?");
	assert_string_equal(p.entries[1].etag, "abc-2");
	assert_true(p.truncated);
	assert_string_equal(p.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	jo_s3_list_page_release(&p);
}

/*
 * A page of 1,000 keys (about 150 KB) reaches expat in 16 KiB pieces: every
 * entry comes out whole whatever piece boundary it straddles, including a
 * raw multi-byte UTF-8 key, and an error after the first piece still fails.
 */
static void list_large_page_fed_in_pieces(void **state)
{
	struct jo_dynbuf b;
	struct jo_s3_list_page p;
	struct jo_err err;

	(void)state;
	jo_dynbuf_init(&b, 0);
	jo_dynbuf_adds(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult " NS ">"
			    "<Name>b</Name><IsTruncated>false</IsTruncated>");
	for (int i = 0; i < 1000; i++)
		jo_dynbuf_addf(&b, "<Contents><Key>vol/chunks/0/0/%d_0_4194304\xe2\x82\xac</Key>"
				"<LastModified>2026-12-02T04:00:00.000Z</LastModified>"
				"<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>%d</Size>"
				"<StorageClass>STANDARD</StorageClass></Contents>\n", i, i);
	jo_dynbuf_adds(&b, "</ListBucketResult>");
	assert_false(b.failed);
	assert_true(b.len > 8 * 16384);
	list_ok(b.p, b.len, &p, 1000);
	for (size_t i = 0; i < p.n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "vol/chunks/0/0/%zu_0_4194304\xe2\x82\xac", i);
		assert_string_equal(p.entries[i].key, want);
		assert_int_equal(p.entries[i].size, i);
	}
	jo_s3_list_page_release(&p);
	/* the same page cut short in its last piece: malformed, not a smaller page */
	assert_int_equal(jo_s3xml_parse_list(b.p, b.len - 10, &p, &err), JO_EPROTO);
	jo_dynbuf_release(&b);
}

static void list_v1_plain_keys_not_decoded(void **state)
{
	/* Without EncodingType the '+' and '%' are literal. */
	const char *xml = "<ListBucketResult " NS "><Name>b</Name><Marker></Marker>"
			  "<NextMarker>k%2B</NextMarker><IsTruncated>true</IsTruncated>"
			  "<Contents><Key>a+b%41</Key><Size>5</Size><LastModified>2024-01-02T03:04:05Z</LastModified>"
			  "</Contents></ListBucketResult>";
	struct jo_s3_list_page p;

	(void)state;
	list_ok(xml, strlen(xml), &p, 1);
	assert_string_equal(p.entries[0].key, "a+b%41");
	assert_string_equal(p.next_marker, "k%2B");
	assert_null(p.next_token);
	jo_s3_list_page_release(&p);
}

static void list_common_prefixes_merge_in_key_order(void **state)
{
	const char *xml = "<ListBucketResult " NS "><IsTruncated>false</IsTruncated>"
			  CONTENTS("a.txt", "1", "2024-01-02T03:04:05Z")
			  CONTENTS("c", "2", "2024-01-02T03:04:05Z")
			  "<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>"
			  "<CommonPrefixes><Prefix>b%20x/</Prefix></CommonPrefixes>"
			  "<EncodingType>url</EncodingType>"
			  "</ListBucketResult>";
	struct jo_s3_list_page p;

	(void)state;
	list_ok(xml, strlen(xml), &p, 4);
	assert_string_equal(p.entries[0].key, "a.txt");
	assert_false(p.entries[0].is_prefix);
	assert_string_equal(p.entries[1].key, "a/");
	assert_true(p.entries[1].is_prefix);
	assert_string_equal(p.entries[2].key, "b x/");
	assert_true(p.entries[2].is_prefix);
	assert_string_equal(p.entries[3].key, "c");
	assert_false(p.truncated);
	jo_s3_list_page_release(&p);
}

static void list_malformed_replies_are_eproto(void **state)
{
	const char *bad[] = {
		"<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents>",   /* cut off */
		"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Key><Size>x1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>a</Key></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
		"<ListAllMyBucketsResult></ListAllMyBucketsResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType><Contents><Key>a%G1</Key><Size>1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", "1", "yesterday") "</ListBucketResult>",
		"not xml at all",
		"",
	};

	(void)state;
	lists_refused(bad, sizeof(bad) / sizeof(bad[0]), false);
}

/* Values that cannot be right are protocol errors, never clamped or cut short. */
static void list_refuses_values_it_cannot_hold(void **state)
{
	const char *bad[] = {
		/* Size past int64 and past uint64 (strtoull clamped it before) */
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", "9223372036854775808", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", "18446744073709551616", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", "-1", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", " 1", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		/* a key that decodes to a NUL byte */
		"<ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>" CONTENTS("a%00b", "1", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType><CommonPrefixes><Prefix>p%00/</Prefix></CommonPrefixes></ListBucketResult>",
		/* empty keys and prefixes */
		"<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("", "1", "2026-01-02T03:04:05.000Z") "</ListBucketResult>",
		"<ListBucketResult><IsTruncated>false</IsTruncated><CommonPrefixes><Prefix/></CommonPrefixes></ListBucketResult>",
	};
	const char *ok = "<ListBucketResult><IsTruncated>false</IsTruncated>" CONTENTS("a", "9223372036854775807", "2026-01-02T03:04:05.000Z")
			 "</ListBucketResult>";
	struct jo_s3_list_page p;
	struct jo_err err;

	(void)state;
	/* each case fails for its own reason, not for a missing element */
	lists_refused(bad, sizeof(bad) / sizeof(bad[0]), true);
	assert_int_equal(jo_s3xml_parse_list(ok, strlen(ok), &p, &err), 0);
	assert_int_equal(p.entries[0].size, INT64_MAX);
	jo_s3_list_page_release(&p);
}

/* SeaweedFS: <Key>vol/%25p</Key> but <NextMarker>vol/%p</NextMarker> (observed). */
static void list_raw_next_marker_does_not_fail_the_page(void **state)
{
	const char *xml = "<ListBucketResult " NS "><Name>b</Name><Prefix>vol/</Prefix><Marker></Marker>"
			  "<NextMarker>vol/%percent</NextMarker><MaxKeys>1</MaxKeys><IsTruncated>true</IsTruncated>"
			  "<Contents><Key>vol/%25percent</Key><Size>22</Size>"
			  "<LastModified>2026-01-02T03:04:05.000Z</LastModified></Contents>"
			  "<EncodingType>url</EncodingType></ListBucketResult>";
	struct jo_s3_list_page p;

	(void)state;
	list_ok(xml, strlen(xml), &p, 1);
	assert_string_equal(p.entries[0].key, "vol/%percent");
	assert_true(p.truncated);
	assert_null(p.next_marker);
	jo_s3_list_page_release(&p);
}

static void parts_refuse_bad_values(void **state)
{
	const char *bad[] = {
		"<ListPartsResult><IsTruncated>yes</IsTruncated></ListPartsResult>",
		"<ListPartsResult><NextPartNumberMarker>x</NextPartNumberMarker></ListPartsResult>",
		"<ListPartsResult><NextPartNumberMarker>10001</NextPartNumberMarker></ListPartsResult>",
		"<ListPartsResult><Part><PartNumber>10001</PartNumber></Part></ListPartsResult>",
		"<ListPartsResult><Part><PartNumber>99999999999999999999999</PartNumber></Part></ListPartsResult>",
		"<ListPartsResult><Part><PartNumber>1</PartNumber><Size>18446744073709551616</Size></Part></ListPartsResult>",
	};
	struct jo_s3_parts_page pp;
	struct jo_err err;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = jo_s3xml_parse_parts(bad[i], strlen(bad[i]), &pp, &err);

		if (rc != JO_EPROTO)
			fail_msg("case %zu: rc %d", i, rc);
		assert_null(pp.parts);
	}
}

struct del_seen {
	int deleted, errors;
	char last_err_key[64], last_code[64];
};

static int on_del(const char *key, const char *code, const char *message, void *payload)
{
	struct del_seen *s = payload;

	(void)message;
	if (code) {
		s->errors++;
		snprintf(s->last_err_key, sizeof(s->last_err_key), "%s", key);
		snprintf(s->last_code, sizeof(s->last_code), "%s", code);
	} else {
		s->deleted++;
	}
	return 0;
}

static void delete_result_with_per_key_errors(void **state)
{
	const char *xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			  "<DeleteResult " NS ">"
			  "<Deleted><Key>a &amp; b</Key></Deleted>"
			  "<Deleted><Key>c</Key></Deleted>"
			  "<Error><Key>secret/x</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
			  "</DeleteResult>";
	struct del_seen s = { 0 };
	struct jo_err err;

	(void)state;
	assert_int_equal(jo_s3xml_parse_delete(xml, strlen(xml), on_del, &s, &err), 0);
	assert_int_equal(s.deleted, 2);
	assert_int_equal(s.errors, 1);
	assert_string_equal(s.last_err_key, "secret/x");
	assert_string_equal(s.last_code, "AccessDenied");

	xml = "<DeleteResult><Error><Code>X</Code></Error></DeleteResult>";
	assert_int_equal(jo_s3xml_parse_delete(xml, strlen(xml), on_del, &s, &err), JO_EPROTO);
	xml = "<Error><Code>X</Code></Error>";
	assert_int_equal(jo_s3xml_parse_delete(xml, strlen(xml), on_del, &s, &err), JO_EPROTO);
}

static void error_document(void **state)
{
	const char *xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
			  "<Message>The resource you requested does not exist</Message>"
			  "<Resource>/mybucket/myfoto.jpg</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>";
	char code[64], msg[256];

	(void)state;
	assert_int_equal(jo_s3xml_parse_error(xml, strlen(xml), code, sizeof(code), msg, sizeof(msg)), 1);
	assert_string_equal(code, "NoSuchKey");
	assert_string_equal(msg, "The resource you requested does not exist");
	xml = "<CopyObjectResult><ETag>\"x\"</ETag></CopyObjectResult>";
	assert_int_equal(jo_s3xml_parse_error(xml, strlen(xml), code, sizeof(code), msg, sizeof(msg)), 0);
	xml = "<Error><Code>oops";
	assert_int_equal(jo_s3xml_parse_error(xml, strlen(xml), code, sizeof(code), msg, sizeof(msg)),
			 JO_EPROTO);
}

static void initiate_and_parts(void **state)
{
	const char *xml = "<InitiateMultipartUploadResult " NS "><Bucket>b</Bucket><Key>k</Key>"
			  "<UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>";
	struct jo_s3_parts_page pp;
	struct jo_err err;
	char *id = NULL;

	(void)state;
	assert_int_equal(jo_s3xml_find(xml, strlen(xml), "InitiateMultipartUploadResult", "UploadId",
				       &id, &err), 0);
	assert_string_equal(id, "VXBsb2FkIElE");
	free(id);
	assert_int_equal(jo_s3xml_find(xml, strlen(xml), "Other", "UploadId", &id, &err), JO_EPROTO);

	xml = "<ListPartsResult><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>"
	      "<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag><Size>5242880</Size></Part>"
	      "<Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag><Size>10</Size></Part></ListPartsResult>";
	assert_int_equal(jo_s3xml_parse_parts(xml, strlen(xml), &pp, &err), 0);
	assert_int_equal(pp.n, 2);
	assert_int_equal(pp.parts[1].number, 2);
	assert_string_equal(pp.parts[0].etag, "e1");
	assert_int_equal(pp.parts[0].size, 5242880);
	assert_true(pp.truncated);
	assert_int_equal(pp.next_marker, 2);
	free(pp.parts);
}


/*
 * One well-formed listing, then one change each: every value the code needs
 * must be there and make sense, or the page is a protocol error (never a
 * size of 2^64 - 1, a key cut at a NUL, an mtime of 0, a cut listing taken
 * for a whole one).
 */
static void list_replies_validated_never_defaulted(void **state)
{
	static const char *base =
		"<ListBucketResult " NS "><IsTruncated>false</IsTruncated><EncodingType>url</EncodingType>"
		"<Contents><Key>k%2Fa</Key><LastModified>2024-01-02T03:04:05Z</LastModified>"
		"<ETag>\"e\"</ETag><Size>5</Size></Contents></ListBucketResult>";
	static const struct {
		const char *from, *to, *why;
	} bad[] = {
		{ "<Size>5</Size>", "<Size>18446744073709551616</Size>", "Size" },   /* 2^64 */
		{ "<Size>5</Size>", "<Size>99999999999999999999999999</Size>", "Size" },
		{ "<Size>5</Size>", "<Size>-1</Size>", "Size" },
		{ "<Size>5</Size>", "<Size></Size>", "Size" },
		{ "<Size>5</Size>", "<Size>5 </Size>", "Size" },
		{ "<Size>5</Size>", "", "Size" },
		{ "<Key>k%2Fa</Key>", "<Key>a%00b</Key>", "NUL" },
		{ "<Key>k%2Fa</Key>", "<Key>%00</Key>", "NUL" },
		{ "<Key>k%2Fa</Key>", "<Key></Key>", "empty Key" },
		{ "<Key>k%2Fa</Key>", "", "Key" },
		{ "<LastModified>2024-01-02T03:04:05Z</LastModified>", "", "LastModified" },
		{ "<IsTruncated>false</IsTruncated>", "", "IsTruncated" },
		{ "<IsTruncated>false</IsTruncated>", "<IsTruncated>1</IsTruncated>", "IsTruncated" },
	};
	struct jo_s3_list_page p;
	struct jo_err err;
	char xml[1024];

	(void)state;
	list_ok(base, strlen(base), &p, 1);
	assert_string_equal(p.entries[0].key, "k/a");
	jo_s3_list_page_release(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;

		replace_once(base, bad[i].from, bad[i].to, xml, sizeof(xml));
		jo_err_clear(&err);
		rc = jo_s3xml_parse_list(xml, strlen(xml), &p, &err);
		if (rc != JO_EPROTO || !strstr(err.msg, bad[i].why))
			fail_msg("case %zu (%s): rc %d, '%s'", i, bad[i].to, rc, err.msg);
		assert_int_equal(p.n, 0);
	}
	/* the largest size a file can have still parses */
	replace_once(base, "<Size>5</Size>", "<Size>9223372036854775807</Size>", xml, sizeof(xml));
	assert_int_equal(jo_s3xml_parse_list(xml, strlen(xml), &p, &err), 0);
	assert_true(p.entries[0].size == INT64_MAX);
	jo_s3_list_page_release(&p);
	/* the decoder itself: %00 is refused, other escapes decode */
	assert_null(jo_obj_url_decode("a%00b", false));
	{
		char *d = jo_obj_url_decode("a%01b%2f", false);

		assert_non_null(d);
		assert_string_equal(d, "a\x01" "b/");
		free(d);
	}
}

static void parts_and_upload_id_validated(void **state)
{
	static const char *base =
		"<ListPartsResult " NS "><IsTruncated>false</IsTruncated>"
		"<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag><Size>5</Size></Part></ListPartsResult>";
	static const struct {
		const char *from, *to, *why;
	} bad[] = {
		{ "<ETag>\"e1\"</ETag>", "", "ETag" },
		{ "<ETag>\"e1\"</ETag>", "<ETag>\"\"</ETag>", "ETag" },
		{ "<Size>5</Size>", "", "Size" },
		{ "<Size>5</Size>", "<Size>18446744073709551616</Size>", "Size" },
		{ "<PartNumber>1</PartNumber>", "", "PartNumber" },
		{ "<PartNumber>1</PartNumber>", "<PartNumber>10001</PartNumber>", "PartNumber" },
		{ "<IsTruncated>false</IsTruncated>", "", "IsTruncated" },
		{ "<IsTruncated>false</IsTruncated>", "<IsTruncated>yes</IsTruncated>", "IsTruncated" },
		{ "<IsTruncated>false</IsTruncated>", "<IsTruncated>true</IsTruncated>", "NextPartNumberMarker" },
		{ "<IsTruncated>false</IsTruncated>",
		  "<IsTruncated>true</IsTruncated><NextPartNumberMarker>x</NextPartNumberMarker>",
		  "NextPartNumberMarker" },
		{ "<ListPartsResult " NS ">", "<ListMultipartUploadsResult>", "ListPartsResult" },
	};
	struct jo_s3_parts_page pp;
	struct jo_err err;
	char xml[1024], *id = NULL;
	const char *ix;

	(void)state;
	assert_int_equal(jo_s3xml_parse_parts(base, strlen(base), &pp, &err), 0);
	assert_int_equal(pp.n, 1);
	free(pp.parts);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;

		replace_once(base, bad[i].from, bad[i].to, xml, sizeof(xml));
		if (!strcmp(bad[i].from, "<ListPartsResult " NS ">")) {
			char *end = strstr(xml, "</ListPartsResult>");

			snprintf(end, sizeof(xml) - (size_t)(end - xml), "</ListMultipartUploadsResult>");
		}
		jo_err_clear(&err);
		rc = jo_s3xml_parse_parts(xml, strlen(xml), &pp, &err);
		if (rc != JO_EPROTO || !strstr(err.msg, bad[i].why))
			fail_msg("case %zu (%s): rc %d, '%s'", i, bad[i].to, rc, err.msg);
		assert_int_equal(pp.n, 0);
	}
	ix = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId></UploadId>"
	     "</InitiateMultipartUploadResult>";
	assert_int_equal(jo_s3xml_find(ix, strlen(ix), "InitiateMultipartUploadResult", "UploadId",
				       &id, &err), JO_EPROTO);
	assert_null(id);
	assert_non_null(strstr(err.msg, "UploadId"));
}

static void bucket_strings(void **state)
{
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;
	struct jo_s3_loc l;
	struct jo_err err;

	(void)state;
	assert_int_equal(jo_s3_parse_bucket("s3", "http://127.0.0.1:9403/jfs", &o, &l, &err), 0);
	assert_false(l.https);
	assert_string_equal(l.host, "127.0.0.1:9403");
	assert_string_equal(l.bucket, "jfs");
	assert_false(l.vhost);
	assert_string_equal(l.region, "us-east-1");

	assert_int_equal(jo_s3_parse_bucket("s3", "https://mybkt.s3.eu-west-1.amazonaws.com", &o, &l, &err), 0);
	assert_true(l.https);
	assert_string_equal(l.bucket, "mybkt");
	assert_string_equal(l.host, "s3.eu-west-1.amazonaws.com");
	assert_string_equal(l.region, "eu-west-1");
	assert_true(l.vhost);

	assert_int_equal(jo_s3_parse_bucket("s3", "https://s3.ap-south-1.amazonaws.com/bk2", &o, &l, &err), 0);
	assert_string_equal(l.bucket, "bk2");
	assert_string_equal(l.host, "s3.ap-south-1.amazonaws.com");
	assert_string_equal(l.region, "ap-south-1");
	assert_false(l.vhost);

	assert_int_equal(jo_s3_parse_bucket("s3", "https://bk3.s3.amazonaws.com/", &o, &l, &err), 0);
	assert_string_equal(l.bucket, "bk3");
	assert_string_equal(l.region, "us-east-1");

	assert_int_equal(jo_s3_parse_bucket("s3",
		"https://minio.example.com:9000/data/extra?disable-checksum=true&tls-insecure-skip-verify=true",
		&o, &l, &err), 0);
	assert_string_equal(l.host, "minio.example.com:9000");
	assert_string_equal(l.bucket, "data");
	assert_true(l.insecure);
	assert_true(l.disable_checksum);
	assert_false(l.vhost);

	/* Non-AWS virtual host. */
	assert_int_equal(jo_s3_parse_bucket("s3", "https://bk4.oss.example.org", &o, &l, &err), 0);
	assert_string_equal(l.bucket, "bk4");
	assert_string_equal(l.host, "oss.example.org");
	assert_true(l.vhost);

	/* minio: always path style; region from the query. */
	assert_int_equal(jo_s3_parse_bucket("minio", "http://127.0.0.1:9000/mb?region=cn-1", &o, &l, &err), 0);
	assert_string_equal(l.bucket, "mb");
	assert_string_equal(l.region, "cn-1");
	assert_false(l.vhost);

	/* Scheme-less: dotted non-AWS host gets http. */
	assert_int_equal(jo_s3_parse_bucket("s3", "10.0.0.1:9000/b", &o, &l, &err), 0);
	assert_false(l.https);
	assert_string_equal(l.bucket, "b");

	/* Options override. */
	o.region = "us-west-2";
	o.addressing = 2;
	assert_int_equal(jo_s3_parse_bucket("s3", "http://h:1/b", &o, &l, &err), 0);
	assert_string_equal(l.region, "us-west-2");
	assert_true(l.vhost);

	assert_int_equal(jo_s3_parse_bucket("s3", "http://127.0.0.1:9000", &o, &l, &err), JO_EINVAL);
	assert_int_equal(jo_s3_parse_bucket("s3", "ftp://h/b", &o, &l, &err), JO_EINVAL);
	assert_int_equal(jo_s3_parse_bucket("s3", "http://ak:sk@h/b", &o, &l, &err), JO_EINVAL);
}

static void open_rejects_bad_config_without_leaking_secret(void **state)
{
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;
	struct jo_obj *obj = NULL;
	struct jo_err err;

	(void)state;
	o.storage = "s3";
	o.bucket = "http://127.0.0.1:1";
	o.access_key = "AK";
	o.secret_key = "TOPSECRETVALUE";
	assert_int_equal(jo_obj_open(&obj, &o, &err), JO_EINVAL);
	assert_null(obj);
	assert_null(strstr(err.msg, "TOPSECRETVALUE"));
	o.storage = "gcs";
	o.bucket = "x";
	assert_int_equal(jo_obj_open(&obj, &o, &err), JO_EUNSUPPORTED);
	o.storage = "s3";
	o.bucket = "http://127.0.0.1:1/b";
	assert_int_equal(jo_obj_open(&obj, &o, &err), 0);
	assert_string_equal(jo_obj_describe(obj), "http://127.0.0.1:1/b");
	jo_obj_close(obj);
}

static void fnv1a32_matches_reference(void **state)
{
	(void)state;
	/* Published FNV-1a 32-bit values. */
	assert_int_equal(jo_obj_fnv1a32(""), 0x811c9dc5u);
	assert_int_equal(jo_obj_fnv1a32("a"), 0xe40c292cu);
	assert_int_equal(jo_obj_fnv1a32("foobar"), 0xbf9cf968u);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(list_v2_with_url_encoded_keys),
		cmocka_unit_test(list_large_page_fed_in_pieces),
		cmocka_unit_test(list_v1_plain_keys_not_decoded),
		cmocka_unit_test(list_common_prefixes_merge_in_key_order),
		cmocka_unit_test(list_malformed_replies_are_eproto),
		cmocka_unit_test(list_replies_validated_never_defaulted),
		cmocka_unit_test(parts_and_upload_id_validated),
		cmocka_unit_test(list_refuses_values_it_cannot_hold),
		cmocka_unit_test(list_raw_next_marker_does_not_fail_the_page),
		cmocka_unit_test(parts_refuse_bad_values),
		cmocka_unit_test(delete_result_with_per_key_errors),
		cmocka_unit_test(error_document),
		cmocka_unit_test(initiate_and_parts),
		cmocka_unit_test(bucket_strings),
		cmocka_unit_test(open_rejects_bad_config_without_leaking_secret),
		cmocka_unit_test(fnv1a32_matches_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
