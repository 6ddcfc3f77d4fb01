/*
 * runfile.c: a scan part's reference run, as a cluster leak check writes it
 * under --work (work.c) and every range reads it back.
 *
 * The part's references, sorted, 16-byte records (leak_ref_encode), one zstd
 * frame per cell of ids (cell c: ids [c * step, (c + 1) * step), step =
 * leak_range_step() of the plan's density, so every range cut is a cell
 * boundary), then its index, raw: per frame (cell, offset, records) and per
 * non-empty density bucket (bucket, blocks), little-endian u64s. The done
 * record of the part gives the file's size, where the index starts and its
 * counts: a range reads the frames of its cells, and the cut sums the parts'
 * density maps (the one-host planner's map, bucket for bucket).
 *
 * A run is outside input: another host wrote it, into a directory or a
 * bucket others may reach. Everything read is checked against the done
 * record (size, counts), the index against itself (cells ascending, frames
 * in order and within the file), the frames by zstd's checksum, and every
 * record against the range it was read for; a run that fails any check is
 * JO_EPROTO, never a smaller answer (fuzzed by tests/fuzz/fuzz_leak_run.c).
 */
#include "leakcheck/leak.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"

#define RUN_BUF (1u << 17)

/* ---- writing ---------------------------------------------------------------- */

static int run_w_flush(struct leak_run_w *w, const void *src, size_t len, ZSTD_EndDirective end,
		       struct jo_err *err)
{
	ZSTD_inBuffer in = { src, len, 0 };
	size_t left;

	do {
		ZSTD_outBuffer out = { w->buf, RUN_BUF, 0 };

		left = ZSTD_compressStream2(w->z, &out, &in, end);
		if (ZSTD_isError(left))
			return jo_err_set(err, JO_EIO, "zstd: %s", ZSTD_getErrorName(left));
		if (out.pos && jo_write_all(w->f->fd, w->buf, out.pos) != 0)
			return jo_err_set(err, JO_EIO, "write %s: %s", w->rel, strerror(errno));
		w->off += out.pos;
	} while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
	return 0;
}

int leak_run_w_open(struct leak_run_w *w, struct leak_work *ws, const char *rel,
		    struct jo_err *err)
{
	memset(w, 0, sizeof(*w));
	w->ws = ws;
	snprintf(w->rel, sizeof(w->rel), "%s", rel);
	w->z = ZSTD_createCCtx();
	w->buf = malloc(RUN_BUF);
	if (!w->z || !w->buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, 1);
	ZSTD_CCtx_setParameter(w->z, ZSTD_c_checksumFlag, 1);
	return leak_work_create(ws, rel, 0, &w->f, err);
}

static int run_w_add(struct leak_run_w *w, const uint8_t rec[LEAK_REF_REC_LEN],
		     struct jo_err *err)
{
	w->n++;
	return run_w_flush(w, rec, LEAK_REF_REC_LEN, ZSTD_e_continue, err);
}

/* End the frame under way (the next record starts a new one). */
static int run_w_end_frame(struct leak_run_w *w, struct jo_err *err)
{
	return run_w_flush(w, NULL, 0, ZSTD_e_end, err);
}

/* Bytes as they are (the run's index). */
static int run_w_raw(struct leak_run_w *w, const void *p, size_t len, struct jo_err *err)
{
	if (jo_write_all(w->f->fd, p, len) != 0)
		return jo_err_set(err, JO_EIO, "write %s: %s", w->rel, strerror(errno));
	w->off += len;
	return 0;
}

int leak_run_w_close(struct leak_run_w *w, bool commit, struct jo_err *err)
{
	int rc = 0;

	if (commit && w->f)
		rc = leak_work_commit(w->ws, w->rel, w->f, err);
	jo_file_abort(w->f);
	ZSTD_freeCCtx(w->z);
	free(w->buf);
	memset(w, 0, sizeof(*w));
	return rc;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* Close the frame of cell `cell` (records n0.. of w) and note it in the index *fr. */
static int part_frame(struct leak_run_w *w, uint8_t **fr, size_t *nfr, size_t *cap,
		      uint64_t cell, uint64_t start, uint64_t n0, struct jo_err *err)
{
	int rc = run_w_end_frame(w, err);

	if (rc)
		return rc;
	if (jo_grow_array(fr, cap, (*nfr + 1) * 24, 1))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	put_le64(*fr + *nfr * 24, cell);
	put_le64(*fr + *nfr * 24 + 8, start);
	put_le64(*fr + *nfr * 24 + 16, w->n - n0);
	(*nfr)++;
	return 0;
}

int leak_part_write(struct leak_run_w *w, struct jo_xsort *xs, const struct leak_density *d,
		    struct leak_run_counts *out, struct jo_err *err)
{
	uint64_t step = leak_range_step(d), cell = 0, start = 0, n0 = 0, ndens = 0, idx_off;
	uint8_t *fr = NULL, e[16];
	size_t nfr = 0, cap = 0;
	const void *r;
	size_t len;
	int rc;

	while ((rc = jo_xsort_next(xs, &r, &len, err)) == 1) {
		uint64_t id;
		uint32_t size;
		int cls;

		leak_ref_decode(r, &id, &size, &cls);
		rc = 0;
		if (w->n > n0 && id / step != cell) {
			rc = part_frame(w, &fr, &nfr, &cap, cell, start, n0, err);
			n0 = w->n;
		}
		if (!rc && w->n == n0) {
			cell = id / step;
			start = w->off;
		}
		if (!rc)
			rc = run_w_add(w, r, err);
		if (rc)
			break;
	}
	if (!rc && w->n > n0)
		rc = part_frame(w, &fr, &nfr, &cap, cell, start, n0, err);
	idx_off = w->off;
	if (!rc && nfr)
		rc = run_w_raw(w, fr, nfr * 24, err);
	for (size_t b = 0; !rc && b < LEAK_DENSITY_BUCKETS; b++) {
		if (!d->n[b])
			continue;
		put_le64(e, b);
		put_le64(e + 8, d->n[b]);
		rc = run_w_raw(w, e, 16, err);
		ndens++;
	}
	free(fr);
	if (rc)
		return rc;
	out->bytes = w->off;
	out->idx = idx_off;
	out->frames = nfr;
	out->dens = ndens;
	out->records = w->n;
	return 0;
}

/* ---- the index ------------------------------------------------------------------ */

int leak_part_index(const uint8_t *buf, size_t len, const struct leak_run_counts *c,
		    const char *name, struct leak_part_idx *pi, struct leak_density *d,
		    struct jo_err *err)
{
	uint64_t nfr = c->frames, nd = c->dens, idx = c->idx, bytes = c->bytes, sum = 0;
	int rc = 0;

	memset(pi, 0, sizeof(*pi));
	if (idx > bytes || nfr > (bytes - idx) / 24 || nd > LEAK_DENSITY_BUCKETS ||
	    nfr * 24 + nd * 16 != bytes - idx || len != bytes - idx)
		return jo_err_set(err, JO_EPROTO, "reference run %s: its index does not match its "
				  "done record", name);
	if (nfr && !(pi->fr = malloc(nfr * sizeof(*pi->fr))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (uint64_t i = 0; !rc && i < nfr; i++) {
		for (int k = 0; k < 3; k++)
			pi->fr[i][k] = get_le64(buf + i * 24 + k * 8);
		sum += pi->fr[i][2];
		/* cells ascending, frames in file order, each non-empty, within the frames */
		if (!pi->fr[i][2] || pi->fr[i][1] >= idx || (i == 0 && pi->fr[0][1] != 0) ||
		    (i && (pi->fr[i][0] <= pi->fr[i - 1][0] || pi->fr[i][1] <= pi->fr[i - 1][1])) ||
		    pi->fr[i][2] > UINT64_MAX / 2 || sum < pi->fr[i][2])
			rc = jo_err_set(err, JO_EPROTO, "reference run %s: a malformed index", name);
	}
	if (!rc && (sum != c->records || (!nfr && idx)))
		rc = jo_err_set(err, JO_EPROTO, "reference run %s: its index counts %" PRIu64
				" records, its done record %" PRIu64, name, sum, c->records);
	for (uint64_t i = 0; !rc && i < nd; i++) {
		uint64_t b = get_le64(buf + nfr * 24 + i * 16);
		uint64_t n = get_le64(buf + nfr * 24 + i * 16 + 8);

		if (b >= LEAK_DENSITY_BUCKETS || (i && b <= get_le64(buf + nfr * 24 + (i - 1) * 16)))
			rc = jo_err_set(err, JO_EPROTO, "reference run %s: a malformed index", name);
		else if (d) {
			d->n[b] += n;
			d->total += n;
		}
	}
	pi->nfr = (size_t)nfr;
	pi->idx_off = idx;
	if (rc) {
		free(pi->fr);
		pi->fr = NULL;
	}
	return rc;
}

int leak_part_load(struct leak_work_rd *rd, const struct leak_run_counts *c,
		   struct leak_part_idx *pi, struct leak_density *d, struct jo_err *err)
{
	uint8_t *buf = NULL;
	size_t got = 0;
	int rc = 0;

	memset(pi, 0, sizeof(*pi));
	if (leak_work_rsize(rd) != c->bytes)
		return jo_err_set(err, JO_EPROTO, "reference run %s is not the %" PRIu64 " bytes its "
				  "done record says (%" PRIu64 ")", leak_work_rname(rd), c->bytes,
				  leak_work_rsize(rd));
	if (c->idx > c->bytes || c->bytes - c->idx > (uint64_t)1 << 34)
		return jo_err_set(err, JO_EPROTO, "reference run %s: its done record is malformed",
				  leak_work_rname(rd));
	if (!(buf = malloc((size_t)(c->bytes - c->idx) + 1)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = leak_work_pread(rd, buf, (size_t)(c->bytes - c->idx), c->idx, &got, err);
	if (!rc && got != c->bytes - c->idx)
		rc = jo_err_set(err, JO_EPROTO, "reference run %s is shorter than its done record "
				"says", leak_work_rname(rd));
	if (!rc)
		rc = leak_part_index(buf, got, c, leak_work_rname(rd), pi, d, err);
	free(buf);
	return rc;
}

void leak_part_window(const struct leak_part_idx *pi, uint64_t step, uint64_t lo, uint64_t hi,
		      uint64_t *off, uint64_t *len, uint64_t *recs)
{
	size_t a = 0, b;

	while (a < pi->nfr && pi->fr[a][0] < lo / step)
		a++;
	b = a;
	*recs = 0;
	while (b < pi->nfr && (hi == UINT64_MAX || pi->fr[b][0] < hi / step))
		*recs += pi->fr[b++][2];
	*off = a < pi->nfr ? pi->fr[a][1] : pi->idx_off;
	*len = (b < pi->nfr ? pi->fr[b][1] : pi->idx_off) - *off;
}

/* ---- reading a window ------------------------------------------------------------- */

int leak_run_r_open(struct leak_run_r *r, struct leak_work_rd *rd, uint64_t off, uint64_t len,
		    uint64_t want, struct jo_err *err)
{
	memset(r, 0, sizeof(*r));
	r->rd = rd;
	r->pos = off;
	r->want = want;
	r->left = len;
	r->cap = leak_work_rchunk(rd);
	if (off > leak_work_rsize(rd) || len > leak_work_rsize(rd) - off)
		return jo_err_set(err, JO_EPROTO, "reference run %s: a window past its end",
				  leak_work_rname(rd));
	r->z = ZSTD_createDCtx();
	r->in = malloc(r->cap);
	r->out = malloc(ZSTD_DStreamOutSize());
	if (!r->z || !r->in || !r->out)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	r->ib.src = r->in;
	return 0;
}

void leak_run_r_close(struct leak_run_r *r)
{
	ZSTD_freeDCtx(r->z);
	free(r->in);
	free(r->out);
	memset(r, 0, sizeof(*r));
}

int leak_run_r_next(void *src, const void **rec, size_t *len, struct jo_err *err)
{
	struct leak_run_r *r = src;
	const char *name = leak_work_rname(r->rd);
	size_t got = 0;

	while (got < LEAK_REF_REC_LEN) {
		if (r->out_pos < r->out_len) {
			size_t k = r->out_len - r->out_pos;

			if (k > LEAK_REF_REC_LEN - got)
				k = LEAK_REF_REC_LEN - got;
			memcpy(r->rec + got, r->out + r->out_pos, k);
			r->out_pos += k;
			got += k;
			continue;
		}
		if (r->ib.pos == r->ib.size && !r->eof) {
			size_t n = 0;
			int rc = r->left ? leak_work_pread(r->rd, r->in, r->left < r->cap ? r->left
										       : r->cap,
							   r->pos, &n, err) : 0;

			if (rc)
				return rc;
			if (n == 0 && r->left)
				return jo_err_set(err, JO_EPROTO, "reference run %s is shorter than its "
						  "record says", name);
			if (n == 0)
				r->eof = true;
			r->left -= n;
			r->pos += n;
			r->ib.size = n;
			r->ib.pos = 0;
		}
		if (r->eof && r->ib.pos == r->ib.size) {
			/* the end: whole records, a whole frame, the planned count */
			if (got || r->last != 0 || r->n != r->want)
				return jo_err_set(err, JO_EPROTO, "reference run %s was not read whole "
						  "(%" PRIu64 " of %" PRIu64 " records%s)", name, r->n,
						  r->want, r->last ? ", the frame is cut" : "");
			return 0;
		}
		ZSTD_outBuffer ob = { r->out, ZSTD_DStreamOutSize(), 0 };

		r->last = ZSTD_decompressStream(r->z, &ob, &r->ib);
		if (ZSTD_isError(r->last))
			return jo_err_set(err, JO_EPROTO, "reference run %s: %s", name,
					  ZSTD_getErrorName(r->last));
		r->out_len = ob.pos;
		r->out_pos = 0;
	}
	if (r->n == r->want)
		return jo_err_set(err, JO_EPROTO, "reference run %s holds more records than its "
				  "index says (%" PRIu64 ")", name, r->want);
	if (r->n && memcmp(r->rec, r->prev, LEAK_REF_REC_LEN) < 0)
		return jo_err_set(err, JO_EPROTO, "reference run %s is not sorted (record %" PRIu64
				  ")", name, r->n);
	memcpy(r->prev, r->rec, LEAK_REF_REC_LEN);
	r->n++;
	*rec = r->rec;
	*len = LEAK_REF_REC_LEN;
	return 1;
}

/* ---- a range's references: every part's window, merged ---------------------------- */

static int parts_advance(struct leak_parts_src *p, size_t i, struct jo_err *err)
{
	const void *rec = NULL;
	size_t len;
	int rc = leak_run_r_next(&p->r[i], &rec, &len, err);
	uint64_t id;
	uint32_t size;
	int cls;

	p->have[i] = rc == 1;
	if (rc != 1)
		return rc;
	p->cur[i] = rec;
	leak_ref_decode(rec, &id, &size, &cls);
	if (id < p->lo || id >= p->hi)
		return jo_err_set(err, JO_EPROTO, "reference run %s: slice %" PRIu64 " is outside "
				  "its range", leak_work_rname(p->r[i].rd), id);
	return 0;
}

int leak_parts_next(void *src, const void **rec, size_t *len, struct jo_err *err)
{
	struct leak_parts_src *p = src;
	size_t best = SIZE_MAX;
	int rc;

	for (size_t i = 0; !p->primed && i < p->n; i++)
		if ((rc = parts_advance(p, i, err)) < 0)
			return rc;
	p->primed = true;
	for (size_t i = 0; i < p->n; i++)
		if (p->have[i] && (best == SIZE_MAX ||
				   memcmp(p->cur[i], p->cur[best], LEAK_REF_REC_LEN) < 0))
			best = i;
	if (best == SIZE_MAX)
		return 0;
	memcpy(p->rec, p->cur[best], LEAK_REF_REC_LEN);
	rc = parts_advance(p, best, err);
	if (rc < 0)
		return rc;
	*rec = p->rec;
	*len = LEAK_REF_REC_LEN;
	return 1;
}

void leak_parts_free(struct leak_parts_src *p)
{
	for (size_t i = 0; i < p->n; i++) {
		leak_run_r_close(&p->r[i]);
		leak_work_rclose(p->rd ? p->rd[i] : NULL);
	}
	free(p->r);
	free(p->rd);
	free(p->have);
	free(p->cur);
	memset(p, 0, sizeof(*p));
}
