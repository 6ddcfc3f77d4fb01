/*
 * obj_xml.c: S3 XML replies parsed with expat (never by string search).
 * A small driver tracks the element depth and hands each element's text to
 * a per-document handler at its end tag.
 */
#include "common/object/object_internal.h"

#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"

#define XML_MAX_TEXT (64 * 1024)
#define XML_MAX_DEPTH 16
#define XML_FEED (16 * 1024)   /* bytes handed to expat at a time */

struct xp;
typedef void (*xp_start_fn)(struct xp *x, const char *name);
typedef void (*xp_end_fn)(struct xp *x, const char *name, const char *text);

struct xp {
	XML_Parser parser;
	int depth;
	char root[64];
	char parent[XML_MAX_DEPTH][48];  /* element names by depth (truncated) */
	struct jo_dynbuf text;
	xp_start_fn on_start;
	xp_end_fn on_end;
	void *ud;
	int rc;                 /* first error of a handler */
	char why[128];
};

static void xp_fail(struct xp *x, int rc, const char *why)
{
	if (x->rc)
		return;
	x->rc = rc;
	snprintf(x->why, sizeof(x->why), "%s", why);
	XML_StopParser(x->parser, XML_FALSE);
}

/* An IsTruncated element: "true" or "false", anything else fails with why. */
static void xp_truncated(struct xp *x, const char *text, bool *out, bool *have, const char *why)
{
	if (strcmp(text, "true") == 0)
		*out = true;
	else if (strcmp(text, "false") == 0)
		*out = false;
	else
		xp_fail(x, JO_EPROTO, why);
	*have = true;
}

/* The checks of a listing reply after the parse: its root element, and an
 * IsTruncated (without one a cut listing would pass for a whole one). */
static int check_listing(int rc, const struct xp *x, const char *root, bool have_truncated,
			 struct jo_err *err)
{
	if (rc == 0 && strcmp(x->root, root) != 0)
		rc = jo_err_set(err, JO_EPROTO, "S3 reply is not a %s", root);
	if (rc == 0 && !have_truncated)
		rc = jo_err_set(err, JO_EPROTO, "S3 reply: %s without IsTruncated", root);
	return rc;
}

static void XMLCALL xp_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct xp *x = ud;

	(void)attrs;
	x->depth++;
	if (x->depth >= XML_MAX_DEPTH) {
		xp_fail(x, JO_EPROTO, "XML nested too deeply");
		return;
	}
	snprintf(x->parent[x->depth], sizeof(x->parent[0]), "%s", name);
	if (x->depth == 1)
		snprintf(x->root, sizeof(x->root), "%s", name);
	jo_dynbuf_reset(&x->text);
	if (x->on_start)
		x->on_start(x, name);
}

static void XMLCALL xp_end(void *ud, const XML_Char *name)
{
	struct xp *x = ud;

	if (x->text.failed) {
		xp_fail(x, JO_EPROTO, "XML element text too long");
		return;
	}
	if (x->on_end)
		x->on_end(x, name, x->text.p ? x->text.p : "");
	jo_dynbuf_reset(&x->text);
	x->depth--;
}

static void XMLCALL xp_chars(void *ud, const XML_Char *s, int len)
{
	struct xp *x = ud;

	jo_dynbuf_add(&x->text, s, (size_t)len);
}

/* The name of the element enclosing the current one (depth-1). */
static const char *xp_up(const struct xp *x, int levels)
{
	int d = x->depth - levels;

	return d >= 1 ? x->parent[d] : "";
}

static int xp_run(struct xp *x, const char *xml, size_t len, struct jo_err *err)
{
	int rc = 0;

	x->parser = XML_ParserCreate(NULL);
	if (!x->parser)
		return jo_err_set(err, JO_ENOMEM, "out of memory for the XML parser");
	jo_dynbuf_init(&x->text, XML_MAX_TEXT);
	XML_SetUserData(x->parser, x);
	XML_SetElementHandler(x->parser, xp_start, xp_end);
	XML_SetCharacterDataHandler(x->parser, xp_chars);
	/*
	 * Fed in pieces: expat copies what it is given into a buffer of its own,
	 * so a whole 200 KB LIST page at once would be held twice (heaptrack:
	 * 1.6 MB of leakcheck's 13 MB peak heap with 32 listers).
	 */
	enum XML_Status st = XML_STATUS_OK;
	size_t at = 0;

	do {
		size_t n = len - at > XML_FEED ? XML_FEED : len - at;

		st = XML_Parse(x->parser, xml + at, (int)n, at + n == len ? XML_TRUE : XML_FALSE);
		at += n;
	} while (st == XML_STATUS_OK && at < len);
	if (st == XML_STATUS_ERROR) {
		if (x->rc)
			rc = jo_err_set(err, x->rc, "S3 reply: %s", x->why);
		else
			rc = jo_err_set(err, JO_EPROTO, "malformed XML in S3 reply at line %lu: %s",
					(unsigned long)XML_GetCurrentLineNumber(x->parser),
					XML_ErrorString(XML_GetErrorCode(x->parser)));
	} else if (x->rc) {
		rc = jo_err_set(err, x->rc, "S3 reply: %s", x->why);
	} else if (!x->root[0]) {
		rc = jo_err_set(err, JO_EPROTO, "empty XML reply");
	}
	XML_ParserFree(x->parser);
	jo_dynbuf_release(&x->text);
	return rc;
}

/* ---- Error ---- */

struct err_doc {
	char *code, *message;
	size_t code_size, message_size;
};

static void err_end(struct xp *x, const char *name, const char *text)
{
	struct err_doc *d = x->ud;

	if (x->depth != 2 || strcmp(x->root, "Error") != 0)
		return;
	if (strcmp(name, "Code") == 0 && d->code_size)
		snprintf(d->code, d->code_size, "%s", text);
	else if (strcmp(name, "Message") == 0 && d->message_size)
		snprintf(d->message, d->message_size, "%s", text);
}

int jo_s3xml_parse_error(const char *xml, size_t len, char *code, size_t code_size,
			 char *message, size_t message_size)
{
	struct err_doc d = { code, message, code_size, message_size };
	struct xp x = { .on_end = err_end, .ud = &d };

	if (code_size)
		code[0] = '\0';
	if (message_size)
		message[0] = '\0';
	if (xp_run(&x, xml, len, NULL) < 0)
		return JO_EPROTO;
	return strcmp(x.root, "Error") == 0 ? 1 : 0;
}

/* ---- ListBucketResult ---- */

struct list_doc {
	struct jo_s3_list_page *page;
	/* Contents and CommonPrefixes are collected apart and merged at the end. */
	struct jo_s3_entry *pfx;
	size_t npfx, cappfx;
	struct jo_s3_entry cur;
	bool have_key, have_size, have_mtime;
	bool have_truncated;
	bool url;
};

static int push_entry(struct jo_s3_entry **arr, size_t *n, size_t *cap,
		      const struct jo_s3_entry *e)
{
	if (jo_grow_array(arr, cap, *n + 1, sizeof(**arr)))
		return JO_ENOMEM;
	(*arr)[(*n)++] = *e;
	return 0;
}

static void list_start(struct xp *x, const char *name)
{
	struct list_doc *d = x->ud;

	if (x->depth == 1 && strcmp(name, "ListBucketResult") != 0) {
		xp_fail(x, JO_EPROTO, "expected ListBucketResult");
		return;
	}
	if (x->depth == 2 && (strcmp(name, "Contents") == 0 || strcmp(name, "CommonPrefixes") == 0)) {
		memset(&d->cur, 0, sizeof(d->cur));
		d->have_key = d->have_size = d->have_mtime = false;
		d->cur.is_prefix = strcmp(name, "CommonPrefixes") == 0;
	}
}

/* Decimal digits only, at most max (an overflow is an error, never a clamp). */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		uint64_t d = (uint64_t)(*s - '0');

		if (*s < '0' || *s > '9' || v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static void copy_etag(char *dst, size_t n, const char *s)
{
	size_t l = strlen(s);

	if (l >= 2 && s[0] == '"' && s[l - 1] == '"') {
		s++;
		l -= 2;
	}
	if (l >= n)
		l = n - 1;
	memcpy(dst, s, l);
	dst[l] = '\0';
}

static void list_end(struct xp *x, const char *name, const char *text)
{
	struct list_doc *d = x->ud;
	struct jo_s3_list_page *p = d->page;

	if (x->rc)
		return;
	if (x->depth == 3 && strcmp(xp_up(x, 1), "Contents") == 0) {
		if (strcmp(name, "Key") == 0) {
			free(d->cur.key);
			d->cur.key = strdup(text);
			if (!d->cur.key)
				xp_fail(x, JO_ENOMEM, "out of memory");
			d->have_key = true;
		} else if (strcmp(name, "Size") == 0) {
			if (parse_u64(text, INT64_MAX, &d->cur.size) < 0)
				xp_fail(x, JO_EPROTO, "bad Size in listing");
			d->have_size = true;
		} else if (strcmp(name, "LastModified") == 0) {
			if (jo_obj_parse_iso8601(text, &d->cur.mtime, &d->cur.mtime_nsec) < 0)
				xp_fail(x, JO_EPROTO, "bad LastModified in listing");
			d->have_mtime = true;
		} else if (strcmp(name, "ETag") == 0) {
			copy_etag(d->cur.etag, sizeof(d->cur.etag), text);
		}
	} else if (x->depth == 3 && strcmp(xp_up(x, 1), "CommonPrefixes") == 0 &&
		   strcmp(name, "Prefix") == 0) {
		free(d->cur.key);
		d->cur.key = strdup(text);
		if (!d->cur.key)
			xp_fail(x, JO_ENOMEM, "out of memory");
		d->have_key = true;
	} else if (x->depth == 2) {
		if (strcmp(name, "Contents") == 0) {
			/* sync compares sizes and mtimes: an entry without them is no entry */
			if (!d->have_key || !d->have_size || !d->have_mtime) {
				xp_fail(x, JO_EPROTO, !d->have_mtime && d->have_key && d->have_size
							      ? "listing entry without LastModified"
							      : "listing entry without Key or Size");
				return;
			}
			if (!d->cur.key[0]) {
				xp_fail(x, JO_EPROTO, "listing entry with an empty Key");
				return;
			}
			if (push_entry(&p->entries, &p->n, &p->cap, &d->cur) < 0)
				xp_fail(x, JO_ENOMEM, "out of memory");
			else
				d->cur.key = NULL;
		} else if (strcmp(name, "CommonPrefixes") == 0) {
			if (!d->have_key || !d->cur.key[0]) {
				xp_fail(x, JO_EPROTO, "CommonPrefixes without a Prefix");
				return;
			}
			if (push_entry(&d->pfx, &d->npfx, &d->cappfx, &d->cur) < 0)
				xp_fail(x, JO_ENOMEM, "out of memory");
			else
				d->cur.key = NULL;
		} else if (strcmp(name, "IsTruncated") == 0) {
			xp_truncated(x, text, &p->truncated, &d->have_truncated,
				     "bad IsTruncated in listing");
		} else if (strcmp(name, "NextContinuationToken") == 0) {
			free(p->next_token);
			p->next_token = strdup(text);
		} else if (strcmp(name, "NextMarker") == 0) {
			free(p->next_marker);
			p->next_marker = strdup(text);
		} else if (strcmp(name, "EncodingType") == 0) {
			d->url = strcmp(text, "url") == 0;
		}
	}
}

static int decode_in_place(char **s)
{
	char *dec;

	if (!*s)
		return 0;
	dec = jo_obj_url_decode(*s, true);
	if (!dec)
		return JO_EPROTO;
	free(*s);
	*s = dec;
	return 0;
}

void jo_s3_list_page_release(struct jo_s3_list_page *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->entries[i].key);
	free(p->entries);
	free(p->next_token);
	free(p->next_marker);
	memset(p, 0, sizeof(*p));
}

int jo_s3xml_parse_list(const char *xml, size_t len, struct jo_s3_list_page *out,
			struct jo_err *err)
{
	struct list_doc d = { .page = out };
	struct xp x = { .on_start = list_start, .on_end = list_end, .ud = &d };
	struct jo_s3_entry *merged = NULL;
	size_t i = 0, j = 0, k = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = xp_run(&x, xml, len, err);
	free(d.cur.key);
	rc = check_listing(rc, &x, "ListBucketResult", d.have_truncated, err);
	if (rc == 0 && d.url) {
		for (size_t e = 0; e < out->n && rc == 0; e++)
			rc = decode_in_place(&out->entries[e].key);
		for (size_t e = 0; e < d.npfx && rc == 0; e++)
			rc = decode_in_place(&d.pfx[e].key);
		if (rc)
			jo_err_set(err, JO_EPROTO, "bad URL encoding of a key in the listing (or a key "
				   "that decodes to a NUL byte)");
		/*
		 * SeaweedFS sends NextMarker raw even with EncodingType url: one
		 * that does not decode is dropped (the caller then continues
		 * after the last key, which is the same place).
		 */
		if (rc == 0 && decode_in_place(&out->next_marker)) {
			free(out->next_marker);
			out->next_marker = NULL;
		}
	}
	if (rc == 0 && d.npfx) {
		/* Merge the two sorted runs so the caller sees one ordered stream. */
		merged = malloc((out->n + d.npfx) * sizeof(*merged));
		if (!merged) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		} else {
			while (i < out->n || j < d.npfx) {
				if (j >= d.npfx ||
				    (i < out->n && strcmp(out->entries[i].key, d.pfx[j].key) <= 0))
					merged[k++] = out->entries[i++];
				else
					merged[k++] = d.pfx[j++];
			}
			free(out->entries);
			out->entries = merged;
			out->n = out->cap = k;
			free(d.pfx);
			d.pfx = NULL;
			d.npfx = 0;
		}
	}
	for (size_t e = 0; e < d.npfx; e++)
		free(d.pfx[e].key);
	free(d.pfx);
	if (rc)
		jo_s3_list_page_release(out);
	return rc;
}

/* ---- DeleteResult ---- */

struct del_doc {
	jo_s3_delete_cb cb;
	void *payload;
	char *key;
	char code[64];
	char message[256];
	int cb_rc;
};

static void del_start(struct xp *x, const char *name)
{
	struct del_doc *d = x->ud;

	if (x->depth == 1 && strcmp(name, "DeleteResult") != 0) {
		xp_fail(x, JO_EPROTO, "expected DeleteResult");
		return;
	}
	if (x->depth == 2) {
		free(d->key);
		d->key = NULL;
		d->code[0] = d->message[0] = '\0';
	}
}

static void del_end(struct xp *x, const char *name, const char *text)
{
	struct del_doc *d = x->ud;

	if (x->rc)
		return;
	if (x->depth == 3) {
		if (strcmp(name, "Key") == 0) {
			free(d->key);
			d->key = strdup(text);
		} else if (strcmp(name, "Code") == 0) {
			snprintf(d->code, sizeof(d->code), "%s", text);
		} else if (strcmp(name, "Message") == 0) {
			snprintf(d->message, sizeof(d->message), "%s", text);
		}
	} else if (x->depth == 2 && (strcmp(name, "Deleted") == 0 || strcmp(name, "Error") == 0)) {
		bool is_err = strcmp(name, "Error") == 0;
		int rc;

		if (!d->key) {
			xp_fail(x, JO_EPROTO, "DeleteResult entry without Key");
			return;
		}
		if (is_err && !d->code[0]) {
			xp_fail(x, JO_EPROTO, "DeleteResult error without Code");
			return;
		}
		rc = d->cb(d->key, is_err ? d->code : NULL, is_err ? d->message : NULL, d->payload);
		if (rc) {
			d->cb_rc = rc;
			xp_fail(x, rc, "stopped by callback");
		}
	}
}

int jo_s3xml_parse_delete(const char *xml, size_t len, jo_s3_delete_cb cb, void *payload,
			  struct jo_err *err)
{
	struct del_doc d = { .cb = cb, .payload = payload };
	struct xp x = { .on_start = del_start, .on_end = del_end, .ud = &d };
	int rc = xp_run(&x, xml, len, err);

	free(d.key);
	if (d.cb_rc)
		return d.cb_rc;
	if (rc == 0 && strcmp(x.root, "DeleteResult") != 0)
		rc = jo_err_set(err, JO_EPROTO, "S3 reply is not a DeleteResult");
	return rc;
}

/* ---- one field ---- */

struct find_doc {
	const char *name;
	char *value;
};

static void find_end(struct xp *x, const char *name, const char *text)
{
	struct find_doc *d = x->ud;

	if (x->depth == 2 && !d->value && strcmp(name, d->name) == 0) {
		d->value = strdup(text);
		if (!d->value)
			xp_fail(x, JO_ENOMEM, "out of memory");
	}
}

int jo_s3xml_find(const char *xml, size_t len, const char *root, const char *name,
		  char **out, struct jo_err *err)
{
	struct find_doc d = { .name = name };
	struct xp x = { .on_end = find_end, .ud = &d };
	int rc = xp_run(&x, xml, len, err);

	*out = NULL;
	/* Prefix match: gofakes3 answers <InitiateMultipartUpload> without "Result". */
	if (rc == 0 && strncmp(x.root, root, strlen(root)) != 0)
		rc = jo_err_set(err, JO_EPROTO, "S3 reply is a %s, expected %s", x.root, root);
	if (rc == 0 && !d.value)
		rc = jo_err_set(err, JO_EPROTO, "S3 reply %s has no %s", root, name);
	if (rc == 0 && !d.value[0])
		rc = jo_err_set(err, JO_EPROTO, "S3 reply %s has an empty %s", root, name);
	if (rc) {
		free(d.value);
		return rc;
	}
	*out = d.value;
	return 0;
}

/* ---- ListPartsResult ---- */

struct parts_doc {
	struct jo_s3_parts_page *page;
	struct jo_obj_part cur;
	bool have_num, have_etag, have_size;
	bool have_truncated, have_marker;
};

static void parts_start(struct xp *x, const char *name)
{
	struct parts_doc *d = x->ud;

	if (x->depth == 1 && strcmp(name, "ListPartsResult") != 0)
		xp_fail(x, JO_EPROTO, "expected ListPartsResult");
	if (x->depth == 2 && strcmp(name, "Part") == 0) {
		memset(&d->cur, 0, sizeof(d->cur));
		d->have_num = d->have_etag = d->have_size = false;
	}
}

static void parts_end(struct xp *x, const char *name, const char *text)
{
	struct parts_doc *d = x->ud;
	struct jo_s3_parts_page *p = d->page;
	uint64_t v = 0;

	if (x->rc)
		return;
	if (x->depth == 3 && strcmp(xp_up(x, 1), "Part") == 0) {
		if (strcmp(name, "PartNumber") == 0) {
			if (parse_u64(text, 10000, &v) < 0 || v < 1)
				xp_fail(x, JO_EPROTO, "bad PartNumber");
			d->cur.number = (int)v;
			d->have_num = true;
		} else if (strcmp(name, "Size") == 0) {
			if (parse_u64(text, INT64_MAX, &d->cur.size) < 0)
				xp_fail(x, JO_EPROTO, "bad part Size");
			d->have_size = true;
		} else if (strcmp(name, "ETag") == 0) {
			copy_etag(d->cur.etag, sizeof(d->cur.etag), text);
			d->have_etag = d->cur.etag[0] != '\0';
		}
	} else if (x->depth == 2) {
		if (strcmp(name, "Part") == 0) {
			/* a resumed upload checks every part's ETag and size before completing */
			if (!d->have_num || !d->have_etag || !d->have_size) {
				xp_fail(x, JO_EPROTO, !d->have_num ? "Part without PartNumber"
						      : !d->have_etag ? "Part without ETag"
								      : "Part without Size");
				return;
			}
			if (jo_grow_array(&p->parts, &p->cap, p->n + 1, sizeof(*p->parts))) {
				xp_fail(x, JO_ENOMEM, "out of memory");
				return;
			}
			p->parts[p->n++] = d->cur;
		} else if (strcmp(name, "IsTruncated") == 0) {
			xp_truncated(x, text, &p->truncated, &d->have_truncated,
				     "bad IsTruncated in ListParts");
		} else if (strcmp(name, "NextPartNumberMarker") == 0) {
			if (parse_u64(text, 10000, &v) < 0)
				xp_fail(x, JO_EPROTO, "bad NextPartNumberMarker");
			else
				p->next_marker = (int)v;
			d->have_marker = true;
		}
	}
}

int jo_s3xml_parse_parts(const char *xml, size_t len, struct jo_s3_parts_page *out,
			 struct jo_err *err)
{
	struct parts_doc d = { .page = out };
	struct xp x = { .on_start = parts_start, .on_end = parts_end, .ud = &d };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = xp_run(&x, xml, len, err);
	rc = check_listing(rc, &x, "ListPartsResult", d.have_truncated, err);
	/* where to continue a cut list; without it the rest would be taken as absent */
	if (rc == 0 && out->truncated && !d.have_marker)
		rc = jo_err_set(err, JO_EPROTO,
				"S3 reply: truncated ListPartsResult without NextPartNumberMarker");
	if (rc) {
		free(out->parts);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}
