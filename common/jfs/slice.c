/* Slice records and overlap resolution (spec §3.5, §3.6). */
#include "common/jfs/jfs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/mem.h"

void jo_slice_decode(const uint8_t rec[24], struct jo_slice *out)
{
	out->pos = jo_be32(rec);
	out->id = jo_be64(rec + 4);
	out->size = jo_be32(rec + 12);
	out->off = jo_be32(rec + 16);
	out->len = jo_be32(rec + 20);
}

void jo_slice_encode(const struct jo_slice *s, uint8_t rec[24])
{
	jo_put_be32(rec, s->pos);
	jo_put_be32(rec + 4, (uint32_t)(s->id >> 32));
	jo_put_be32(rec + 8, (uint32_t)s->id);
	jo_put_be32(rec + 12, s->size);
	jo_put_be32(rec + 16, s->off);
	jo_put_be32(rec + 20, s->len);
}

int jo_slices_decode(const uint8_t *raw, size_t len, struct jo_slice **out,
		     size_t *n, struct jo_err *err)
{
	struct jo_slice *v;
	size_t cnt = len / JO_SLICE_REC_LEN;

	*out = NULL;
	*n = 0;
	if (len % JO_SLICE_REC_LEN)
		return jo_err_set(err, JO_EPROTO,
				  "corrupt chunk value: %zu bytes is not a multiple of 24", len);
	if (!cnt)
		return 0;
	v = calloc(cnt, sizeof(*v));
	if (!v)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < cnt; i++)
		jo_slice_decode(raw + i * JO_SLICE_REC_LEN, &v[i]);
	*out = v;
	*n = cnt;
	return 0;
}

/* A growable array of segments. */
struct segv {
	struct jo_slice *v;
	size_t n, cap;
};

static int segv_push(struct segv *s, const struct jo_slice *x)
{
	if (jo_grow_array(&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return JO_ENOMEM;
	s->v[s->n++] = *x;
	return 0;
}

/*
 * Each record overwrites [pos, pos+len) of what is visible so far: segments
 * that straddle an edge are cut, the piece to the right of a cut starts
 * later inside its slice (off grows by the cut distance).
 */
int jo_chunk_visible(const struct jo_slice *recs, size_t n, struct jo_slice **out,
		     size_t *nout)
{
	struct segv cur = { 0 }, next = { 0 }, tmp;
	uint64_t end = 0;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		const struct jo_slice *r = &recs[i];
		uint64_t rs = r->pos, re = (uint64_t)r->pos + r->len;
		bool placed = false;

		if (r->len == 0)
			continue;
		/* corrupt: no chunk reaches that far, no window lies past its slice */
		if (re > JO_CHUNK_SIZE || (r->id && (uint64_t)r->off + r->len > r->size)) {
			rc = JO_EPROTO;
			goto out;
		}
		next.n = 0;
		for (size_t j = 0; j < cur.n && !rc; j++) {
			struct jo_slice s = cur.v[j];
			uint64_t ss = s.pos, se = (uint64_t)s.pos + s.len;

			if (se <= rs) {
				rc = segv_push(&next, &s);
				continue;
			}
			if (ss >= re) {
				if (!placed) {
					rc = segv_push(&next, r);
					placed = true;
				}
				if (!rc)
					rc = segv_push(&next, &s);
				continue;
			}
			if (ss < rs) {
				struct jo_slice left = s;

				left.len = (uint32_t)(rs - ss);
				rc = segv_push(&next, &left);
			}
			if (!placed && !rc) {
				rc = segv_push(&next, r);
				placed = true;
			}
			if (se > re && !rc) {
				struct jo_slice right = s;

				right.pos = (uint32_t)re;
				right.off = s.off + (uint32_t)(re - ss);
				right.len = (uint32_t)(se - re);
				rc = segv_push(&next, &right);
			}
		}
		if (!placed && !rc)
			rc = segv_push(&next, r);
		if (rc)
			goto out;
		tmp = cur;
		cur = next;
		next = tmp;
		if (re > end)
			end = re;
	}

	/* Fill gaps with holes so segments tile [0, end). */
	next.n = 0;
	{
		uint64_t at = 0;

		for (size_t j = 0; j < cur.n && !rc; j++) {
			if (cur.v[j].pos > at) {
				struct jo_slice hole = { .pos = (uint32_t)at,
							 .len = (uint32_t)(cur.v[j].pos - at) };

				rc = segv_push(&next, &hole);
			}
			if (!rc)
				rc = segv_push(&next, &cur.v[j]);
			at = (uint64_t)cur.v[j].pos + cur.v[j].len;
		}
	}
	if (rc)
		goto out;
	*out = next.v;
	*nout = next.n;
	next.v = NULL;
out:
	free(cur.v);
	free(next.v);
	return rc;
}

int jo_chunk_err(struct jo_err *err, int rc, uint64_t ino, uint32_t indx)
{
	if (rc == JO_EPROTO)
		return jo_err_set(err, rc, "inode %" PRIu64 " chunk %" PRIu32
				  ": a slice record reaches past the chunk or its slice (corrupt metadata)",
				  ino, indx);
	return jo_err_set(err, rc, "out of memory");
}

int jo_chunk_hidden(const struct jo_slice *recs, size_t n, uint64_t *written,
		    uint64_t *hidden)
{
	struct jo_slice *segs = NULL;
	uint64_t w = 0, visible = 0;
	size_t ns = 0;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (recs[i].id)
			w += recs[i].len;
	rc = jo_chunk_visible(recs, n, &segs, &ns);
	for (size_t i = 0; i < ns; i++)
		if (segs[i].id)
			visible += segs[i].len;
	free(segs);
	*written = w;
	*hidden = w > visible ? w - visible : 0;
	return rc;
}

int jo_hist_bucket(uint64_t n)
{
	int b = 0;
	uint64_t lim = 1;

	while (n > lim && b < JO_HIST_BUCKETS - 1) {
		lim <<= 1;
		b++;
	}
	return b;
}

void jo_hist_label(int b, char *buf, size_t cap)
{
	if (b == 0)
		snprintf(buf, cap, "1");
	else if (b == 1)
		snprintf(buf, cap, "2");
	else if (b == JO_HIST_BUCKETS - 1)
		snprintf(buf, cap, ">%u", 1u << (b - 1));
	else
		snprintf(buf, cap, "%u-%u", (1u << (b - 1)) + 1, 1u << b);
}

void jo_hist_print(const uint64_t hist[JO_HIST_BUCKETS])
{
	char label[32];

	printf("records per chunk:\n");
	for (int b = 0; b < JO_HIST_BUCKETS; b++) {
		if (!hist[b])
			continue;
		jo_hist_label(b, label, sizeof(label));
		printf("  %-10s %" PRIu64 "\n", label, hist[b]);
	}
}
