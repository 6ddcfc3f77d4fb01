/*
 * libFuzzer target: every S3 XML reply parser of common/object/obj_xml.c on
 * the same bytes (a server may answer any request with any document).
 * Beyond "does not crash":
 *   - a failed parse leaves its output zeroed and an error message set;
 *   - a listing has non-NULL keys with no byte beyond their length, sizes
 *     that fit int64, nsec < 1e9, ETags without their quotes;
 *   - a DeleteResult callback gets a key for every entry and a code for
 *     every error, and a callback's non-zero value stops the parse and is
 *     what the parser returns;
 *   - part numbers are 1..10000;
 *   - the parsers agree: malformed XML fails all of them, an <Error>
 *     document is a listing for none of them.
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/object/object_internal.h"
#include "tests/fuzz/fuzz_util.h"

struct del_state {
	size_t calls;
	size_t stop_at;  /* 0: never stop */
};

static int del_cb(const char *key, const char *code, const char *message, void *payload)
{
	struct del_state *d = payload;

	FUZZ_CHECK(key != NULL, "DeleteResult entry without key");
	FUZZ_CHECK(!code || (*code && message), "error entry with an empty code or no message");
	d->calls++;
	if (d->stop_at && d->calls == d->stop_at)
		return JO_ECANCELED;
	return 0;
}

static void check_list(const struct jo_s3_list_page *p)
{
	FUZZ_CHECK(p->n <= p->cap || p->n == 0, "n %zu > cap %zu", p->n, p->cap);
	for (size_t i = 0; i < p->n; i++) {
		const struct jo_s3_entry *e = &p->entries[i];
		size_t el = strnlen(e->etag, sizeof(e->etag));

		FUZZ_CHECK(e->key != NULL, "entry %zu has no key", i);
		FUZZ_CHECK(e->size <= (uint64_t)INT64_MAX, "size %llu does not fit int64",
			   (unsigned long long)e->size);
		FUZZ_CHECK(e->mtime_nsec >= 0 && e->mtime_nsec < 1000000000, "nsec %d",
			   (int)e->mtime_nsec);
		FUZZ_CHECK(el < sizeof(e->etag), "etag not terminated");
		FUZZ_CHECK(!(el >= 2 && e->etag[0] == '"' && e->etag[el - 1] == '"'),
			   "etag kept its quotes");
		FUZZ_CHECK(!e->is_prefix || (e->size == 0 && e->mtime == 0),
			   "a common prefix with a size or time");
	}
}

static void check_failed_list(int rc, const struct jo_s3_list_page *p, const struct jo_err *err)
{
	FUZZ_CHECK(rc < 0, "rc %d", rc);
	FUZZ_CHECK(!p->entries && !p->n && !p->next_token && !p->next_marker && !p->truncated,
		   "a failed list parse left output behind");
	FUZZ_CHECK(err->code == rc && err->msg[0], "no error message for rc %d", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *xml = (const char *)data;
	struct jo_err err = { 0 };
	struct jo_s3_list_page lp;
	struct jo_s3_parts_page pp;
	struct del_state ds = { 0 };
	char code[16], msg[24];
	char *val = (char *)1;
	int erc, lrc, drc, frc, prc;

	/* Error: small buffers to exercise truncation. */
	memset(code, 'x', sizeof(code));
	memset(msg, 'x', sizeof(msg));
	erc = jo_s3xml_parse_error(xml, size, code, sizeof(code), msg, sizeof(msg));
	FUZZ_CHECK(erc == 0 || erc == 1 || erc == JO_EPROTO, "parse_error returned %d", erc);
	FUZZ_CHECK(memchr(code, 0, sizeof(code)) && memchr(msg, 0, sizeof(msg)),
		   "Code/Message not NUL-terminated");
	FUZZ_CHECK(erc == 1 || (!code[0] && !msg[0]) || erc == JO_EPROTO,
		   "Code/Message filled for a document that is not an <Error>");

	/* ListBucketResult */
	lrc = jo_s3xml_parse_list(xml, size, &lp, &err);
	if (lrc == 0)
		check_list(&lp);
	else
		check_failed_list(lrc, &lp, &err);
	jo_s3_list_page_release(&lp);

	/* DeleteResult, then again stopped by the callback at a later entry. */
	jo_err_clear(&err);
	drc = jo_s3xml_parse_delete(xml, size, del_cb, &ds, &err);
	FUZZ_CHECK(drc <= 0, "parse_delete returned %d", drc);
	if (drc == 0 && ds.calls > 0) {
		struct del_state ds2 = { .stop_at = 1 + size % ds.calls };
		int rc2 = jo_s3xml_parse_delete(xml, size, del_cb, &ds2, &err);

		FUZZ_CHECK(rc2 == JO_ECANCELED, "callback stop gave %d", rc2);
		FUZZ_CHECK(ds2.calls == ds2.stop_at, "%zu calls after a stop at %zu", ds2.calls,
			   ds2.stop_at);
	}

	/* One field (CreateMultipartUpload) */
	jo_err_clear(&err);
	frc = jo_s3xml_find(xml, size, "InitiateMultipartUpload", "UploadId", &val, &err);
	FUZZ_CHECK(frc == 0 ? val != NULL : val == NULL, "find: rc %d with value %p", frc,
		   (void *)val);
	free(val);

	/* ListPartsResult */
	jo_err_clear(&err);
	prc = jo_s3xml_parse_parts(xml, size, &pp, &err);
	if (prc == 0) {
		FUZZ_CHECK(pp.n <= pp.cap || pp.n == 0, "parts n > cap");
		for (size_t i = 0; i < pp.n; i++)
			FUZZ_CHECK(pp.parts[i].number >= 1 && pp.parts[i].number <= 10000,
				   "part number %d", pp.parts[i].number);
		FUZZ_CHECK(pp.next_marker >= 0 && pp.next_marker <= 10000, "next marker %d",
			   pp.next_marker);
	} else {
		FUZZ_CHECK(!pp.parts && !pp.n, "a failed parts parse left output behind");
	}
	free(pp.parts);

	/* The parsers agree on what the document is. */
	if (erc == JO_EPROTO)
		FUZZ_CHECK(lrc && drc && frc && prc, "malformed for parse_error, fine for another");
	if (erc == 1)
		FUZZ_CHECK(lrc && drc && frc && prc, "an <Error> document parsed as a reply");
	if (lrc == 0)
		FUZZ_CHECK(erc == 0 && drc && prc, "a listing is also another document");
	return 0;
}
