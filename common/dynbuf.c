#include "common/dynbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

#define MIN_CAP 256

void jo_dynbuf_init(struct jo_dynbuf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void jo_dynbuf_release(struct jo_dynbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->failed = false;
}

void jo_dynbuf_reset(struct jo_dynbuf *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
	b->failed = false;
}

int jo_dynbuf_reserve(struct jo_dynbuf *b, size_t n)
{
	size_t need, nc;
	char *np;

	if (b->failed)
		return JO_ENOMEM;
	if ((b->max && n > b->max - b->len) || n > SIZE_MAX / 2 - b->len) {
		b->failed = true;
		return JO_EPROTO;
	}
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	nc = b->cap ? b->cap : MIN_CAP;
	while (nc < need)
		nc *= 2;
	/* no more than max (+ the NUL) ever, though doubling would go past it */
	if (b->max && nc > b->max + 1)
		nc = b->max + 1;
	np = realloc(b->p, nc);
	if (!np) {
		b->failed = true;
		return JO_ENOMEM;
	}
	if (!b->p)
		np[0] = '\0';
	b->p = np;
	b->cap = nc;
	return 0;
}

void jo_dynbuf_setlen(struct jo_dynbuf *b, size_t n)
{
	if (!b->p)
		return;
	b->len = n < b->cap ? n : b->cap - 1;
	b->p[b->len] = '\0';
}

int jo_dynbuf_add(struct jo_dynbuf *b, const void *data, size_t n)
{
	int rc = jo_dynbuf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int jo_dynbuf_adds(struct jo_dynbuf *b, const char *s)
{
	return jo_dynbuf_add(b, s, strlen(s));
}

int jo_dynbuf_addf(struct jo_dynbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return JO_EIO;
	}
	rc = jo_dynbuf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

char *jo_dynbuf_detach(struct jo_dynbuf *b, size_t *len_out)
{
	char *p = b->p ? b->p : strdup("");

	if (len_out)
		*len_out = b->p ? b->len : 0;
	b->p = NULL;
	b->len = b->cap = 0;
	b->failed = false;
	return p;
}

int jo_grow_array(void *arrp, size_t *cap, size_t need, size_t elsize)
{
	return jo_grow_array_from(arrp, cap, need, elsize, 16);
}

int jo_grow_array_from(void *arrp, size_t *cap, size_t need, size_t elsize, size_t first)
{
	size_t nc;
	void *old, *p;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : first;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return JO_ENOMEM;
		nc *= 2;
	}
	if (elsize && nc > SIZE_MAX / elsize)
		return JO_ENOMEM;
	/* through memcpy: *arrp is a T *, not a void * (no aliasing through void **) */
	memcpy(&old, arrp, sizeof(old));
	p = realloc(old, nc * elsize);
	if (!p)
		return JO_ENOMEM;
	memcpy(arrp, &p, sizeof(p));
	*cap = nc;
	return 0;
}
