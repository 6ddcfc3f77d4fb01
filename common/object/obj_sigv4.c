#include "common/object/obj_sigv4.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/dynbuf.h"
#include "common/object/object_internal.h"

static void hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void jo_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
	hex(md, 32, out);
}

void jo_obj_md5_base64(const void *data, size_t len, char out[25])
{
	unsigned char md[16];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, 16);
}

void jo_obj_md5_hex(const void *data, size_t len, char out[33])
{
	unsigned char md[16];
	unsigned int mdlen = 0;

	EVP_Digest(data, len, md, &mdlen, EVP_md5(), NULL);
	hex(md, 16, out);
}

struct canon_header {
	char *name;
	char *value;
};

static int cmp_header(const void *a, const void *b)
{
	const struct canon_header *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Trim and collapse runs of spaces, as the SigV4 rules ask. */
static char *canon_value(const char *v)
{
	size_t n = strlen(v);
	char *out = malloc(n + 1), *w = out;
	bool space = false;

	if (!out)
		return NULL;
	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = true;
			continue;
		}
		if (space && w != out)
			*w++ = ' ';
		space = false;
		*w++ = *v;
	}
	*w = '\0';
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;
	const char *ex = strchr(*x, '='), *ey = strchr(*y, '=');
	size_t lx = ex ? (size_t)(ex - *x) : strlen(*x);
	size_t ly = ey ? (size_t)(ey - *y) : strlen(*y);
	int c = memcmp(*x, *y, lx < ly ? lx : ly);

	if (c)
		return c;
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(*x, *y);
}

/* Sort query parameters by name then value; "k" becomes "k=". */
static int canon_query(struct jo_dynbuf *b, const char *q)
{
	char *copy, *save = NULL, *tok;
	char **params = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!q || !*q)
		return 0;
	copy = strdup(q);
	if (!copy)
		return -1;
	for (tok = strtok_r(copy, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
		if (jo_grow_array(&params, &cap, n + 1, sizeof(*params))) {
			rc = -1;
			goto out;
		}
		params[n++] = tok;
	}
	if (n)
		qsort(params, n, sizeof(*params), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (i)
			jo_dynbuf_adds(b, "&");
		jo_dynbuf_adds(b, params[i]);
		if (!strchr(params[i], '='))
			jo_dynbuf_adds(b, "=");
	}
out:
	free(params);
	free(copy);
	return rc;
}

/* Canonical headers block and the signed-headers list. */
static int canon_headers(const struct jo_sigv4_req *r, struct jo_dynbuf *hb,
			 struct jo_dynbuf *signed_list)
{
	struct canon_header *h = calloc(r->nheaders ? r->nheaders : 1, sizeof(*h));
	int rc = 0;

	if (!h)
		return -1;
	for (size_t i = 0; i < r->nheaders; i++) {
		h[i].name = strdup(r->headers[i].name);
		h[i].value = canon_value(r->headers[i].value);
		if (!h[i].name || !h[i].value) {
			rc = -1;
			goto out;
		}
		for (char *p = h[i].name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	}
	/* qsort is not stable; duplicates keep the order of their values by index. */
	for (size_t i = 1; i < r->nheaders; i++)
		for (size_t j = i; j > 0 && cmp_header(&h[j - 1], &h[j]) > 0; j--) {
			struct canon_header t = h[j];

			h[j] = h[j - 1];
			h[j - 1] = t;
		}
	for (size_t i = 0; i < r->nheaders; i++) {
		if (i > 0 && strcmp(h[i].name, h[i - 1].name) == 0) {
			/* A repeated header: its values join with commas. */
			hb->len--; /* drop the newline */
			jo_dynbuf_addf(hb, ",%s\n", h[i].value);
			continue;
		}
		jo_dynbuf_addf(hb, "%s:%s\n", h[i].name, h[i].value);
		if (signed_list->len)
			jo_dynbuf_adds(signed_list, ";");
		jo_dynbuf_adds(signed_list, h[i].name);
	}
out:
	for (size_t i = 0; i < r->nheaders; i++) {
		free(h[i].name);
		free(h[i].value);
	}
	free(h);
	return rc;
}

static char *build_creq(const struct jo_sigv4_req *r, char **signed_out)
{
	struct jo_dynbuf b, hb, sl;

	jo_dynbuf_init(&b, 0);
	jo_dynbuf_init(&hb, 0);
	jo_dynbuf_init(&sl, 0);
	jo_dynbuf_addf(&b, "%s\n%s\n", r->method, r->path && *r->path ? r->path : "/");
	if (canon_query(&b, r->query) < 0 || canon_headers(r, &hb, &sl) < 0)
		b.failed = true;
	jo_dynbuf_adds(&b, "\n");
	if (hb.p)
		jo_dynbuf_adds(&b, hb.p);
	jo_dynbuf_addf(&b, "\n%s\n%s", sl.p ? sl.p : "", r->payload_hash);
	jo_dynbuf_release(&hb);
	if (b.failed || sl.failed) {
		jo_dynbuf_release(&b);
		jo_dynbuf_release(&sl);
		return NULL;
	}
	if (signed_out)
		*signed_out = sl.p;
	else
		jo_dynbuf_release(&sl);
	return b.p;
}

char *jo_sigv4_canonical_request(const struct jo_sigv4_req *r)
{
	return build_creq(r, NULL);
}

static char *build_sts(const struct jo_sigv4_req *r, char **signed_out)
{
	char *creq = build_creq(r, signed_out);
	char h[65];
	struct jo_dynbuf b;

	if (!creq)
		return NULL;
	jo_sigv4_sha256_hex(creq, strlen(creq), h);
	free(creq);
	jo_dynbuf_init(&b, 0);
	jo_dynbuf_addf(&b, "AWS4-HMAC-SHA256\n%s\n%.8s/%s/%s/aws4_request\n%s", r->amz_date,
			r->amz_date, r->region, r->service, h);
	if (b.failed) {
		jo_dynbuf_release(&b);
		if (signed_out) {
			free(*signed_out);
			*signed_out = NULL;
		}
		return NULL;
	}
	return b.p;
}

char *jo_sigv4_string_to_sign(const struct jo_sigv4_req *r)
{
	return build_sts(r, NULL);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
	unsigned int olen = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &olen);
}

char *jo_sigv4_authorization(const struct jo_sigv4_req *r)
{
	char *signed_list = NULL;
	char *sts = build_sts(r, &signed_list);
	unsigned char k[32], sig[32];
	char date[9], sighex[65];
	struct jo_dynbuf key, out;

	if (!sts)
		return NULL;
	memcpy(date, r->amz_date, 8);
	date[8] = '\0';
	jo_dynbuf_init(&key, 0);
	jo_dynbuf_addf(&key, "AWS4%s", r->secret_key);
	if (key.failed) {
		free(sts);
		free(signed_list);
		jo_dynbuf_release(&key);
		return NULL;
	}
	hmac(key.p, key.len, date, k);
	hmac(k, 32, r->region, k);
	hmac(k, 32, r->service, k);
	hmac(k, 32, "aws4_request", k);
	hmac(k, 32, sts, sig);
	hex(sig, 32, sighex);
	/* Wipe the derived key material. */
	memset(key.p, 0, key.len);
	memset(k, 0, sizeof(k));
	jo_dynbuf_release(&key);
	jo_dynbuf_init(&out, 0);
	jo_dynbuf_addf(&out,
			"AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, "
			"SignedHeaders=%s, Signature=%s",
			r->access_key, date, r->region, r->service, signed_list, sighex);
	free(sts);
	free(signed_list);
	if (out.failed) {
		jo_dynbuf_release(&out);
		return NULL;
	}
	return out.p;
}
