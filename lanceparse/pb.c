/* pb.c: a small protobuf wire-format decoder (spec §4). */
#include "lanceparse/lance.h"

#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"

int lance_pb_varint(struct lance_pb *r, uint64_t *out, struct jo_err *err)
{
	uint64_t v = 0;
	unsigned shift = 0;

	for (int i = 0; i < 10; i++) {
		if (r->p >= r->end)
			return jo_err_set(err, JO_EPROTO, "protobuf: truncated varint");
		uint8_t b = *r->p++;
		/* The 10th byte may only carry the top bit of a 64-bit value. */
		if (i == 9 && b > 1)
			return jo_err_set(err, JO_EPROTO, "protobuf: varint overflows 64 bits");
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
		shift += 7;
	}
	return jo_err_set(err, JO_EPROTO, "protobuf: varint longer than 10 bytes");
}

/* A little-endian value of n bytes (fixed64, fixed32) into f->u: 1, or JO_EPROTO. */
static int fixed_le(struct lance_pb *r, struct lance_pb_field *f, int n, struct jo_err *err)
{
	if (r->end - r->p < n)
		return jo_err_set(err, JO_EPROTO, "protobuf: truncated fixed%d field %u", n * 8,
				  f->num);
	for (int i = n - 1; i >= 0; i--)
		f->u = (f->u << 8) | r->p[i];
	r->p += n;
	return 1;
}

int lance_pb_next(struct lance_pb *r, struct lance_pb_field *f, struct jo_err *err)
{
	uint64_t key, v;
	int rc;

	if (r->p >= r->end)
		return 0;
	if ((rc = lance_pb_varint(r, &key, err)) < 0)
		return rc;
	if ((key >> 3) == 0 || (key >> 3) > 0x1fffffff)
		return jo_err_set(err, JO_EPROTO, "protobuf: invalid field number %llu",
				  (unsigned long long)(key >> 3));
	memset(f, 0, sizeof(*f));
	f->num = (uint32_t)(key >> 3);
	f->wt = (int)(key & 7);
	switch (f->wt) {
	case LANCE_PB_VARINT:
		return (rc = lance_pb_varint(r, &f->u, err)) < 0 ? rc : 1;
	case LANCE_PB_I64:
		return fixed_le(r, f, 8, err);
	case LANCE_PB_I32:
		return fixed_le(r, f, 4, err);
	case LANCE_PB_LEN:
		if ((rc = lance_pb_varint(r, &v, err)) < 0)
			return rc;
		if (v > (uint64_t)(r->end - r->p))
			return jo_err_set(err, JO_EPROTO,
					  "protobuf: field %u length %llu exceeds message", f->num,
					  (unsigned long long)v);
		f->data = r->p;
		f->len = (size_t)v;
		r->p += v;
		return 1;
	default:
		return jo_err_set(err, JO_EPROTO, "protobuf: unsupported wire type %d (field %u)",
				  f->wt, f->num);
	}
}

int lance_pb_each(const void *data, size_t len, lance_pb_field_fn fn, void *ctx,
		  struct jo_err *err)
{
	struct lance_pb r;
	struct lance_pb_field f;
	int rc;

	lance_pb_init(&r, data, len);
	while ((rc = lance_pb_next(&r, &f, err)) > 0) {
		if ((rc = fn(&f, ctx, err)) < 0)
			return rc;
	}
	return rc;
}

/* Collect the values of a repeated varint field as u64. */
static int repeated(const struct lance_pb_field *f, uint64_t **vals, size_t *n,
		    struct jo_err *err)
{
	size_t cap = 0;
	uint64_t v;
	int rc;

	*vals = NULL;
	*n = 0;
	if (f->wt == LANCE_PB_VARINT) {
		if (!(*vals = malloc(sizeof(uint64_t))))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		(*vals)[0] = f->u;
		*n = 1;
		return 0;
	}
	if (f->wt != LANCE_PB_LEN)
		return jo_err_set(err, JO_EPROTO, "protobuf: field %u: wire type %d for a repeated integer",
				  f->num, f->wt);
	struct lance_pb r;
	lance_pb_init(&r, f->data, f->len);
	while (r.p < r.end) {
		if ((rc = lance_pb_varint(&r, &v, err)) < 0) {
			free(*vals);
			*vals = NULL;
			*n = 0;
			return rc;
		}
		if (jo_grow_array(vals, &cap, *n + 1, sizeof(uint64_t)) < 0) {
			free(*vals);
			*vals = NULL;
			*n = 0;
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		(*vals)[(*n)++] = v;
	}
	return 0;
}

/*
 * Append the values of f to the array *arrp of *n elements: uint64_t ones,
 * or int32_t ones (the low 32 bits) where as_i32.
 */
static int append_repeated(const struct lance_pb_field *f, void *arrp, size_t *n, bool as_i32,
			   struct jo_err *err)
{
	size_t elsize = as_i32 ? sizeof(int32_t) : sizeof(uint64_t), cap = *n, nv;
	uint64_t *vals;
	uint8_t *p;
	int rc;

	if ((rc = repeated(f, &vals, &nv, err)) < 0 || nv == 0)
		return rc;
	if (jo_grow_array(arrp, &cap, *n + nv, elsize)) {
		free(vals);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	memcpy(&p, arrp, sizeof(p));
	for (size_t i = 0; i < nv; i++) {
		int32_t v32 = lance_pb_i32(vals[i]);

		memcpy(p + (*n + i) * elsize, as_i32 ? (const void *)&v32 : (const void *)&vals[i],
		       elsize);
	}
	*n += nv;
	free(vals);
	return 0;
}

int lance_pb_repeated_u64(const struct lance_pb_field *f, uint64_t **arr, size_t *n,
			  struct jo_err *err)
{
	return append_repeated(f, arr, n, false, err);
}

int lance_pb_repeated_i32(const struct lance_pb_field *f, int32_t **arr, size_t *n,
			  struct jo_err *err)
{
	return append_repeated(f, arr, n, true, err);
}
