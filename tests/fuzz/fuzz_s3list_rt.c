/*
 * libFuzzer target: ListBucketResult round trip. The input describes a
 * listing (keys of any bytes, sizes, times, prefixes); the target writes it
 * the way SeaweedFS, rclone serve s3 and AWS do (URL-encoded keys or plain
 * XML-escaped ones, compact or indented, CommonPrefixes before or after the
 * Contents, ETags quoted as &quot;, &#34; or bare) and checks that
 * jo_s3xml_parse_list gives back exactly that listing, in key order, or
 * fails with a protocol error when the listing cannot be right:
 *   - a key holding a NUL byte (a%00b) or an empty key is refused;
 *   - a Size that does not fit int64 is refused;
 *   - a key of printable ASCII, or of valid UTF-8 in plain mode, is never
 *     refused, and no accepted key is ever changed (length included);
 *   - a NextMarker that is not URL-encoded (SeaweedFS sends it raw) never
 *     makes the page fail.
 *
 * Input: byte 0 = flags (below), byte 1 = number of the entry whose Size is
 * taken from the input verbatim (others are reduced below 2^63), then
 * records [klen][key bytes][kind][8 bytes size][5 bytes time].
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/err.h"
#include "common/object/object_internal.h"
#include "tests/fuzz/fuzz_util.h"

enum {
	F_URL = 1 << 0,        /* EncodingType url */
	F_V1 = 1 << 1,         /* NextMarker instead of NextContinuationToken */
	F_TRUNC = 1 << 2,      /* IsTruncated true */
	F_PRETTY = 1 << 3,     /* rclone's indentation */
	F_PFX_FIRST = 1 << 4,  /* CommonPrefixes before the Contents (rclone) */
	F_PLUS = 1 << 5,       /* space as '+' (SeaweedFS) instead of %20 */
	F_RAW_MARKER = 1 << 6, /* NextMarker not encoded (SeaweedFS) */
};

struct rec {
	const uint8_t *key;
	size_t klen;
	bool prefix;
	uint64_t size;
	int64_t sec;
	int ms;           /* -1: no fraction */
	char etag[33];
};

struct out {
	char *p;
	size_t n, cap;
};

static void put(struct out *o, const void *s, size_t n)
{
	if (o->n + n + 1 > o->cap) {
		size_t nc = (o->n + n + 1) * 2;
		char *np = realloc(o->p, nc);

		if (!np)
			abort();
		o->p = np;
		o->cap = nc;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
	o->p[o->n] = '\0';
}

static void puts_(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

static void put_key(struct out *o, const uint8_t *k, size_t n, unsigned flags, bool encode)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[16];

	for (size_t i = 0; i < n; i++) {
		uint8_t c = k[i];

		if (encode) {
			if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			    c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
				put(o, &c, 1);
			} else if (c == ' ' && (flags & F_PLUS)) {
				puts_(o, "+");
			} else {
				char e[3] = { '%', hex[c >> 4], hex[c & 15] };

				put(o, e, 3);
			}
			continue;
		}
		switch (c) {
		case '&': puts_(o, "&amp;"); break;
		case '<': puts_(o, "&lt;"); break;
		case '>': puts_(o, "&gt;"); break;
		case '"': puts_(o, "&#34;"); break;
		case '\'': puts_(o, "&#39;"); break;
		default:
			if (c < 0x20) {
				/* Go's xml.EscapeText form; invalid for NUL and most controls */
				snprintf(buf, sizeof(buf), "&#x%X;", c);
				puts_(o, buf);
			} else {
				put(o, &c, 1);
			}
		}
	}
}

/* Well-formed UTF-8 of XML 1.0 characters only (Char production). */
static bool xml_utf8(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		uint32_t cp;
		size_t l;

		if (c < 0x80) {
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
				return false;
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			l = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			l = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			l = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + l > n)
			return false;
		for (size_t j = 1; j < l; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + j] & 0x3f);
		}
		if ((l == 3 && cp < 0x800) || (l == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
			return false;
		i += l;
	}
	return true;
}

static int rec_cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c)
		return c;
	return x->klen < y->klen ? -1 : x->klen > y->klen;
}

static void put_entry(struct out *o, const struct rec *r, unsigned flags, int style)
{
	const char *nl = (flags & F_PRETTY) ? "\n    " : "";
	char buf[96];
	struct tm tm;
	time_t t = (time_t)r->sec;

	if (r->prefix) {
		puts_(o, (flags & F_PRETTY) ? "\n  <CommonPrefixes>\n    <Prefix>" : "<CommonPrefixes><Prefix>");
		put_key(o, r->key, r->klen, flags, flags & F_URL);
		puts_(o, (flags & F_PRETTY) ? "</Prefix>\n  </CommonPrefixes>" : "</Prefix></CommonPrefixes>");
		return;
	}
	puts_(o, (flags & F_PRETTY) ? "\n  <Contents>\n    <Key>" : "<Contents><Key>");
	put_key(o, r->key, r->klen, flags, flags & F_URL);
	puts_(o, "</Key>");
	puts_(o, nl);
	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "<LastModified>%Y-%m-%dT%H:%M:%S", &tm);
	puts_(o, buf);
	if (r->ms >= 0) {
		snprintf(buf, sizeof(buf), ".%03d", r->ms);
		puts_(o, buf);
	}
	puts_(o, "Z</LastModified>");
	puts_(o, nl);
	switch (style) {
	case 0: snprintf(buf, sizeof(buf), "<ETag>&quot;%s&quot;</ETag>", r->etag); break;
	case 1: snprintf(buf, sizeof(buf), "<ETag>&#34;%s&#34;</ETag>", r->etag); break;
	case 2: snprintf(buf, sizeof(buf), "<ETag>\"%s\"</ETag>", r->etag); break;
	default: snprintf(buf, sizeof(buf), "<ETag>%s</ETag>", r->etag); break;
	}
	puts_(o, buf);
	puts_(o, nl);
	snprintf(buf, sizeof(buf), "<Size>%llu</Size>", (unsigned long long)r->size);
	puts_(o, buf);
	puts_(o, nl);
	puts_(o, "<StorageClass>STANDARD</StorageClass>");
	puts_(o, (flags & F_PRETTY) ? "\n  </Contents>" : "</Contents>");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rec recs[64];
	size_t n = 0, i = 2;
	unsigned flags;
	size_t raw_size_at;
	struct out o = { 0 };
	struct jo_s3_list_page p;
	struct jo_err err = { 0 };
	bool must_fail = false, may_fail = false;
	int rc;

	if (size < 2)
		return 0;
	flags = data[0];
	raw_size_at = data[1];
	while (n < 64 && i < size) {
		struct rec *r = &recs[n];
		size_t kl = data[i++];
		uint64_t v = 0;

		if (i + kl + 14 > size)
			break;
		r->key = data + i;
		r->klen = kl;
		i += kl;
		r->prefix = data[i++] & 1;
		for (int b = 0; b < 8; b++)
			v |= (uint64_t)data[i++] << (8 * b);
		r->size = n == raw_size_at ? v : v >> 1;
		v = 0;
		for (int b = 0; b < 5; b++)
			v |= (uint64_t)data[i++] << (8 * b);
		r->sec = (int64_t)(v % 253402300800ULL); /* up to 9999-12-31 */
		r->ms = (int)((v / 7) % 1001) - 1;
		for (int b = 0; b < 32; b++)
			r->etag[b] = "0123456789abcdef"[(r->klen * 7 + (size_t)b * 13 + r->size) & 15];
		r->etag[32] = '\0';
		if (r->prefix)
			r->size = 0;
		n++;
	}
	qsort(recs, n, sizeof(recs[0]), rec_cmp);
	/* S3 never lists a key twice */
	{
		size_t w = 0;

		for (size_t k = 0; k < n; k++)
			if (w == 0 || rec_cmp(&recs[w - 1], &recs[k]) != 0)
				recs[w++] = recs[k];
		n = w;
	}
	for (size_t k = 0; k < n; k++) {
		const struct rec *r = &recs[k];
		bool ascii = true;

		if (!r->klen || memchr(r->key, 0, r->klen) || r->size > (uint64_t)INT64_MAX)
			must_fail = true;
		for (size_t j = 0; j < r->klen; j++)
			if (r->key[j] < 0x20 || r->key[j] > 0x7e)
				ascii = false;
		if (!(flags & F_URL) && !ascii && !xml_utf8(r->key, r->klen))
			may_fail = true; /* XML cannot carry it raw */
	}

	if ((flags & F_TRUNC) && (flags & F_V1) && (flags & F_URL) && (flags & F_RAW_MARKER) && n) {
		const struct rec *last = &recs[n - 1];

		if (!xml_utf8(last->key, last->klen))
			may_fail = true; /* a raw NextMarker XML cannot carry */
	}

	puts_(&o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
	puts_(&o, "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	puts_(&o, (flags & F_PRETTY) ? "\n  <Name>b</Name>\n  <Prefix></Prefix>\n  <MaxKeys>1000</MaxKeys>"
				     : "<Name>b</Name><Prefix></Prefix><MaxKeys>1000</MaxKeys>");
	puts_(&o, (flags & F_TRUNC) ? "<IsTruncated>true</IsTruncated>" : "<IsTruncated>false</IsTruncated>");
	for (int pass = 0; pass < 2; pass++) {
		bool want_prefix = (pass == 0) == ((flags & F_PFX_FIRST) != 0);

		for (size_t k = 0; k < n; k++)
			if (recs[k].prefix == want_prefix)
				put_entry(&o, &recs[k], flags, (int)((flags >> 6) + k) & 3);
	}
	if ((flags & F_TRUNC) && n) {
		const struct rec *last = &recs[n - 1];

		if (flags & F_V1) {
			puts_(&o, "<NextMarker>");
			put_key(&o, last->key, last->klen, flags,
				(flags & F_URL) && !(flags & F_RAW_MARKER));
			puts_(&o, "</NextMarker>");
		} else {
			puts_(&o, "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>");
		}
	}
	if (flags & F_URL)
		puts_(&o, "<EncodingType>url</EncodingType>");
	puts_(&o, "</ListBucketResult>");

	rc = jo_s3xml_parse_list(o.p, o.n, &p, &err);
	if (must_fail) {
		FUZZ_CHECK(rc == JO_EPROTO, "a listing with a NUL/empty key or an oversized Size "
			   "parsed (rc %d): %s", rc, o.p);
	} else if (!may_fail) {
		FUZZ_CHECK(rc == 0, "a valid listing failed: %s: %s", err.msg, o.p);
	}
	if (rc == 0) {
		FUZZ_CHECK(p.n == n, "%zu entries, %zu written: %s", p.n, n, o.p);
		for (size_t k = 0; k < n; k++) {
			const struct jo_s3_entry *e = &p.entries[k];
			const struct rec *r = &recs[k];

			FUZZ_CHECK(strlen(e->key) == r->klen && !memcmp(e->key, r->key, r->klen),
				   "entry %zu: key '%s' changed (%zu bytes written): %s", k, e->key,
				   r->klen, o.p);
			FUZZ_CHECK(e->is_prefix == r->prefix, "entry %zu: kind changed", k);
			if (r->prefix)
				continue;
			FUZZ_CHECK(e->size == r->size, "entry %zu: size %llu != %llu", k,
				   (unsigned long long)e->size, (unsigned long long)r->size);
			FUZZ_CHECK(e->mtime == r->sec && e->mtime_nsec == (r->ms < 0 ? 0 : r->ms * 1000000),
				   "entry %zu: time %lld.%09d != %lld ms %d", k, (long long)e->mtime,
				   (int)e->mtime_nsec, (long long)r->sec, r->ms);
			FUZZ_CHECK(!strcmp(e->etag, r->etag), "entry %zu: etag '%s' != '%s'", k,
				   e->etag, r->etag);
		}
		FUZZ_CHECK(p.truncated == ((flags & F_TRUNC) != 0), "IsTruncated changed");
		if ((flags & F_TRUNC) && n && (flags & F_V1) &&
		    (!(flags & F_URL) || !(flags & F_RAW_MARKER))) {
			const struct rec *last = &recs[n - 1];

			FUZZ_CHECK(p.next_marker && strlen(p.next_marker) == last->klen &&
					   !memcmp(p.next_marker, last->key, last->klen),
				   "NextMarker changed");
		}
		if ((flags & F_TRUNC) && n && !(flags & F_V1))
			FUZZ_CHECK(p.next_token && !strcmp(p.next_token,
							   "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM="),
				   "continuation token changed");
	} else {
		FUZZ_CHECK(rc == JO_EPROTO, "rc %d", rc);
	}
	jo_s3_list_page_release(&p);
	free(o.p);
	return 0;
}
