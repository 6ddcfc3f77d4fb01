#include "common/extsort.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"
#include "common/mem.h"

#define XS_MAX_REC (64u << 20)
#define XS_MIN_MEM (1u << 20)
#define XS_IO_BUF (64u << 10)
/* Decompressor window: small so that many runs can be open at once. */
#define XS_WINDOW_LOG 17
/* Accounted cost of one open run during a merge (DStream + buffers). */
#define XS_READER_COST ((size_t)(1u << XS_WINDOW_LOG) + 3 * XS_IO_BUF + (160u << 10))
/*
 * A plain run's reader: its read buffer (grown for a larger record) and
 * itself. Small, so that one merge takes every run of a large input (the
 * runs of a sort are many while its buffer still grows): no intermediate
 * pass writes the data again.
 */
#define XS_PLAIN_READ (16u << 10)
#define XS_PLAIN_READER_COST ((size_t)XS_PLAIN_READ + 256)
#define XS_MAX_FANIN 512
/* Compression context at low levels with the small window (estimate). */
#define XS_CCTX_COST ((size_t)(1u << XS_WINDOW_LOG) * 3 + (256u << 10))
#define XS_CANCEL_EVERY 65536
/*
 * A fill buffer starts at XS_START_BUF and doubles after every XS_GROW_RUNS
 * runs written at its size, up to the budget: memory follows the input (about
 * a 32nd of what was added so far) instead of taking the whole budget for any
 * input above a megabyte. On a large input the buffers reach the budget after
 * a few hundred small runs, which the merge folds in with the rest.
 */
#define XS_START_BUF (1u << 20)
#define XS_GROW_RUNS 32
/* Fewest runs a merge opens at once while the buffers are still growing. */
#define XS_MIN_FANIN 8

/*
 * One buffered record: a prefix for fast byte-order compares, and where it
 * is in the arena (offset and length packed into 38 + 26 bits: arenas up to
 * 256 GiB, records up to 64 MiB), 16 bytes in all.
 */
struct xs_ent {
	uint64_t pfx;
	uint64_t loc;
};
#define XS_LEN_BITS 26
#define XS_MAX_ARENA (1ULL << (64 - XS_LEN_BITS))
#define ENT_OFF(e) ((e)->loc >> XS_LEN_BITS)
#define ENT_LEN(e) ((size_t)((e)->loc & ((1ULL << XS_LEN_BITS) - 1)) + 1)

/* A fill buffer: records packed into an arena, plus their index. */
struct xs_buf {
	uint8_t *arena;
	size_t used, cap;
	struct xs_ent *ent;
	struct xs_ent *tmp;       /* merge-sort scratch */
	size_t n, ecap;
};

struct xs_reader {
	int fd;
	ZSTD_DStream *ds;
	uint8_t *in;
	ZSTD_inBuffer zin;
	bool file_eof;
	size_t last_ret;          /* last ZSTD_decompressStream result (0 = frame end);
				   * plain runs: 0 once the end mark was read */
	uint8_t *buf;
	size_t cap, pos, end;
	const uint8_t *rec;
	size_t rec_len;
	uint64_t pfx;             /* prefix_of(rec) for byte-order compares */
	unsigned run;             /* run number, for messages */
};

struct xs_job {
	struct jo_xsort *s;
	struct xs_buf *b;
	unsigned run;
	int rc;
	struct jo_err err;
};

struct jo_xsort {
	size_t mem_limit;
	size_t buf_budget;        /* per fill buffer, now */
	size_t buf_max;           /* per fill buffer, at most */
	unsigned runs_at_budget;  /* runs written since buf_budget last grew */
	jo_xsort_cmp_fn cmp;
	void *cmp_payload;
	int level;
	bool plain;               /* runs written as they are (opts.plain_runs) */
	size_t reader_cost;       /* accounted memory of one merge reader */
	bool threaded;
	char *tmp_parent;

	/* temp dir and runs; runs_made is read by the signal-time cleanup */
	char dir[4096];
	size_t dir_len;
	volatile unsigned runs_made;
	bool cleanup_registered;
	unsigned *runs;           /* live run numbers, in creation order */
	size_t nruns, runs_cap;

	struct xs_buf bufs[2];
	int cur;                  /* buffer being filled */
	bool job_active;
	pthread_t job_thread;
	struct xs_job job;

	ZSTD_CCtx *cctx;
	uint8_t *stage;           /* serialised records awaiting compression */
	uint8_t *cout;
	size_t cout_cap;

	/* output */
	bool finished;
	bool in_memory;           /* no runs: iterate bufs[cur] directly */
	size_t mem_pos;
	struct xs_reader *rd;     /* final merge readers */
	size_t nrd;
	size_t *heap;             /* indexes into rd */
	size_t nheap;
	ssize_t pending;          /* reader to advance before the next pop, -1 none */
	uint64_t tick;

	struct jo_xsort_stats st;
};

/* ---------------- comparisons ---------------- */

static int bytes_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = memcmp(a, b, n);

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int rec_cmp(const struct jo_xsort *s, const void *a, size_t alen, const void *b,
		   size_t blen)
{
	if (s->cmp)
		return s->cmp(a, alen, b, blen, s->cmp_payload);
	return bytes_cmp(a, alen, b, blen);
}

static uint64_t prefix_of(const uint8_t *p, size_t len)
{
	uint64_t v = 0;

	for (size_t i = 0; i < 8; i++)
		v = (v << 8) | (i < len ? p[i] : 0);
	return v;
}

static inline int ent_cmp(const struct jo_xsort *s, const uint8_t *arena,
			  const struct xs_ent *a, const struct xs_ent *b)
{
	if (!s->cmp) {
		if (a->pfx != b->pfx)
			return a->pfx < b->pfx ? -1 : 1;
		return bytes_cmp(arena + ENT_OFF(a), ENT_LEN(a), arena + ENT_OFF(b), ENT_LEN(b));
	}
	return s->cmp(arena + ENT_OFF(a), ENT_LEN(a), arena + ENT_OFF(b), ENT_LEN(b),
		      s->cmp_payload);
}

/* Top-down merge sort of e[0..n) using tmp as scratch; insertion sort below 24. */
static void ent_msort(const struct jo_xsort *s, const uint8_t *arena, struct xs_ent *e,
		      struct xs_ent *tmp, size_t n)
{
	if (n < 24) {
		for (size_t i = 1; i < n; i++) {
			struct xs_ent x = e[i];
			size_t j = i;

			while (j > 0 && ent_cmp(s, arena, &e[j - 1], &x) > 0) {
				e[j] = e[j - 1];
				j--;
			}
			e[j] = x;
		}
		return;
	}
	size_t h = n / 2;

	ent_msort(s, arena, e, tmp, h);
	ent_msort(s, arena, e + h, tmp + h, n - h);
	if (ent_cmp(s, arena, &e[h - 1], &e[h]) <= 0)
		return;
	/* only the left half needs a copy: the output never overtakes the right */
	memcpy(tmp, e, h * sizeof(*e));
	size_t i = 0, j = h, k = 0;

	while (i < h && j < n)
		e[k++] = ent_cmp(s, arena, &e[j], &tmp[i]) < 0 ? e[j++] : tmp[i++];
	while (i < h)
		e[k++] = tmp[i++];
}

/*
 * Byte order: LSD radix sort on the 8-byte prefix (16-bit digits, passes
 * where every key has the same digit skipped), then a comparison sort of
 * each run of equal prefixes (records longer than 8 bytes that share them).
 */
static void ent_sort(const struct jo_xsort *s, const uint8_t *arena, struct xs_ent *e,
		     struct xs_ent *tmp, size_t n)
{
	if (s->cmp || n < 256) {
		ent_msort(s, arena, e, tmp, n);
		return;
	}
	static const size_t R = 1u << 16;
	size_t *cnt = calloc(R, sizeof(*cnt));

	if (!cnt) {
		ent_msort(s, arena, e, tmp, n);
		return;
	}
	struct xs_ent *src = e, *dst = tmp;

	for (unsigned shift = 0; shift < 64; shift += 16) {
		memset(cnt, 0, R * sizeof(*cnt));
		for (size_t i = 0; i < n; i++)
			cnt[(src[i].pfx >> shift) & 0xffff]++;
		if (cnt[(src[0].pfx >> shift) & 0xffff] == n)
			continue; /* one digit value everywhere: the pass is a no-op */
		size_t sum = 0;

		for (size_t d = 0; d < R; d++) {
			size_t c = cnt[d];

			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[cnt[(src[i].pfx >> shift) & 0xffff]++] = src[i];
		struct xs_ent *t = src;

		src = dst;
		dst = t;
	}
	free(cnt);
	if (src != e)
		memcpy(e, src, n * sizeof(*e));
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		while (j < n && e[j].pfx == e[i].pfx)
			j++;
		if (j - i > 1)
			ent_msort(s, arena, e + i, tmp, j - i);
		i = j;
	}
}

/* ---------------- temp files ---------------- */

/* Append the decimal form of v; signal-safe (no stdio). */
static size_t put_run_name(char *dst, unsigned v, bool plain)
{
	char tmp[16];
	size_t n = 0, k = 0;

	memcpy(dst, "/run-", 5);
	k = 5;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		dst[k++] = tmp[--n];
	memcpy(dst + k, plain ? ".run" : ".zst", 5);
	return k + 4;
}

static void run_path(const struct jo_xsort *s, unsigned run, char *out, size_t cap)
{
	if (s->dir_len + 32 > cap) {
		out[0] = '\0';
		return;
	}
	memcpy(out, s->dir, s->dir_len);
	put_run_name(out + s->dir_len, run, s->plain);
}

/*
 * Remove every run file that may exist and the directory. Runs from the
 * cancellation hook, possibly inside a signal handler: only unlink/rmdir on
 * paths built without allocation.
 */
static void remove_tmp(void *payload)
{
	struct jo_xsort *s = payload;
	char path[4096 + 32];

	if (!s->dir_len)
		return;
	for (unsigned r = 0; r < s->runs_made; r++) {
		run_path(s, r, path, sizeof(path));
		(void)unlink(path); /* most are gone already; ENOENT is fine */
	}
	(void)rmdir(s->dir);
}

static int ensure_dir(struct jo_xsort *s, struct jo_err *err)
{
	if (s->dir_len)
		return 0;
	int n = snprintf(s->dir, sizeof(s->dir) - 40, "%s/jo-xsort-XXXXXX", s->tmp_parent);

	if (n < 0 || (size_t)n >= sizeof(s->dir) - 40)
		return jo_err_set(err, JO_EINVAL, "extsort: temp dir path too long");
	if (!mkdtemp(s->dir)) {
		int e = errno;

		s->dir[0] = '\0';
		return jo_err_set(err, JO_EIO, "extsort: cannot create temp dir in '%s': %s",
				  s->tmp_parent, strerror(e));
	}
	s->dir_len = (size_t)n;
	if (jo_cancel_atexit(remove_tmp, s) == 0)
		s->cleanup_registered = true;
	return 0;
}

static int runs_push(struct jo_xsort *s, unsigned run, struct jo_err *err)
{
	if (jo_grow_array(&s->runs, &s->runs_cap, s->nruns + 1, sizeof(*s->runs)))
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	s->runs[s->nruns++] = run;
	return 0;
}

/* ---------------- run writer ---------------- */

struct xs_writer {
	struct jo_xsort *s;
	int fd;
	unsigned run;
	size_t staged;
	uint64_t written;
};

static int writer_compress(struct xs_writer *w, ZSTD_EndDirective mode, struct jo_err *err)
{
	struct jo_xsort *s = w->s;
	ZSTD_inBuffer in = { s->stage, w->staged, 0 };
	size_t rem;

	if (s->plain) {
		/* a plain run ends with a zero length: a cut file is told apart */
		if (mode == ZSTD_e_end)
			s->stage[w->staged++] = 0;
		if (w->staged && jo_write_all(w->fd, s->stage, w->staged) < 0)
			return jo_err_set(err, JO_EIO, "extsort: write run %u: %s", w->run,
					  strerror(errno));
		w->written += w->staged;
		w->staged = 0;
		return 0;
	}
	do {
		ZSTD_outBuffer out = { s->cout, s->cout_cap, 0 };

		rem = ZSTD_compressStream2(s->cctx, &out, &in, mode);
		if (ZSTD_isError(rem))
			return jo_err_set(err, JO_EIO, "extsort: zstd: %s", ZSTD_getErrorName(rem));
		if (out.pos && jo_write_all(w->fd, s->cout, out.pos) < 0)
			return jo_err_set(err, JO_EIO, "extsort: write run %u: %s", w->run,
					  strerror(errno));
		w->written += out.pos;
	} while (mode == ZSTD_e_end ? rem != 0 : in.pos < in.size);
	w->staged = 0;
	return 0;
}

static int writer_open(struct jo_xsort *s, struct xs_writer *w, unsigned run, struct jo_err *err)
{
	char path[4096 + 32];

	memset(w, 0, sizeof(*w));
	w->s = s;
	w->run = run;
	run_path(s, run, path, sizeof(path));
	/* in the private mkdtemp directory; O_EXCL|O_NOFOLLOW all the same */
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return jo_err_set(err, JO_EIO, "extsort: create '%s': %s", path, strerror(errno));
	if (s->cctx)
		ZSTD_CCtx_reset(s->cctx, ZSTD_reset_session_only);
	return 0;
}

static int writer_put(struct xs_writer *w, const uint8_t *rec, size_t len, struct jo_err *err)
{
	struct jo_xsort *s = w->s;
	uint8_t hdr[10];
	size_t hn = jo_put_uvarint(hdr, len);
	int rc;

	/* hn <= 10: the end mark of a plain run always finds its byte */
	if (w->staged + hn >= XS_IO_BUF) {
		rc = writer_compress(w, ZSTD_e_continue, err);
		if (rc)
			return rc;
	}
	memcpy(s->stage + w->staged, hdr, hn);
	w->staged += hn;
	while (len) {
		size_t room = XS_IO_BUF - w->staged;
		size_t n = len < room ? len : room;

		memcpy(s->stage + w->staged, rec, n);
		w->staged += n;
		rec += n;
		len -= n;
		if (w->staged == XS_IO_BUF) {
			rc = writer_compress(w, ZSTD_e_continue, err);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static int writer_close(struct xs_writer *w, bool ok, struct jo_err *err)
{
	int rc = 0;

	if (ok)
		rc = writer_compress(w, ZSTD_e_end, err);
	if (w->fd >= 0 && close(w->fd) < 0 && !rc && ok)
		rc = jo_err_set(err, JO_EIO, "extsort: close run %u: %s", w->run, strerror(errno));
	w->fd = -1;
	w->s->st.tmp_bytes += w->written;
	return rc;
}

/* Sort buffer b and write it as run `run`. Runs in the caller or a worker. */
static int write_buf_run(struct jo_xsort *s, struct xs_buf *b, unsigned run, struct jo_err *err)
{
	struct xs_writer w;
	int rc;

	ent_sort(s, b->arena, b->ent, b->tmp, b->n);
	rc = writer_open(s, &w, run, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < b->n && !rc; i++) {
		rc = writer_put(&w, b->arena + ENT_OFF(&b->ent[i]), ENT_LEN(&b->ent[i]), err);
		if (!rc && (i & (XS_CANCEL_EVERY - 1)) == 0 && jo_cancelled())
			rc = jo_err_set(err, JO_ECANCELED, "extsort: canceled");
	}
	int rc2 = writer_close(&w, rc == 0, err);

	b->n = 0;
	b->used = 0;
	return rc ? rc : rc2;
}

/* ---------------- run reader ---------------- */

static int reader_open(struct jo_xsort *s, struct xs_reader *r, unsigned run, struct jo_err *err)
{
	char path[4096 + 32];

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->run = run;
	run_path(s, run, path, sizeof(path));
	r->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (r->fd < 0)
		return jo_err_set(err, JO_EIO, "extsort: open '%s': %s", path, strerror(errno));
	r->cap = s->plain ? XS_PLAIN_READ : 2 * XS_IO_BUF;
	r->buf = malloc(r->cap);
	r->last_ret = 1;
	if (s->plain)
		return r->buf ? 0 : jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	r->ds = ZSTD_createDStream();
	r->in = malloc(XS_IO_BUF);
	if (!r->ds || !r->in || !r->buf)
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	ZSTD_DCtx_setParameter(r->ds, ZSTD_d_windowLogMax, 27);
	r->zin.src = r->in;
	return 0;
}

static void reader_close(struct xs_reader *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	ZSTD_freeDStream(r->ds);
	r->ds = NULL;
	free(r->in);
	free(r->buf);
	r->in = r->buf = NULL;
}

/* Make at least `want` bytes available at buf+pos if the stream has them. */
static int reader_fill(struct xs_reader *r, size_t want, struct jo_err *err)
{
	if (r->end - r->pos >= want)
		return 0;
	if (r->pos) {
		memmove(r->buf, r->buf + r->pos, r->end - r->pos);
		r->end -= r->pos;
		r->pos = 0;
	}
	if (jo_grow_array(&r->buf, &r->cap, want, 1))
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	while (r->end < want && !r->ds && !r->file_eof) {
		/* plain run: straight into the buffer, as much as it holds */
		ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return jo_err_set(err, JO_EIO, "extsort: read run %u: %s", r->run,
					  strerror(errno));
		r->file_eof = n == 0;
		r->end += (size_t)n;
	}
	while (r->end < want && r->ds) {
		if (r->zin.pos == r->zin.size) {
			if (r->file_eof)
				break;
			ssize_t n = read(r->fd, r->in, XS_IO_BUF);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				return jo_err_set(err, JO_EIO, "extsort: read run %u: %s", r->run,
						  strerror(errno));
			}
			if (n == 0) {
				r->file_eof = true;
				break;
			}
			r->zin.size = (size_t)n;
			r->zin.pos = 0;
		}
		ZSTD_outBuffer out = { r->buf, r->cap, r->end };
		size_t ret = ZSTD_decompressStream(r->ds, &out, &r->zin);

		if (ZSTD_isError(ret))
			return jo_err_set(err, JO_EPROTO, "extsort: run %u corrupt: %s", r->run,
					  ZSTD_getErrorName(ret));
		r->end = out.pos;
		r->last_ret = ret;
	}
	/* a plain run's end mark may be all that is left: reader_next judges */
	if (r->ds && r->end < want && r->file_eof && r->last_ret != 0 && r->end > 0)
		return jo_err_set(err, JO_EPROTO, "extsort: run %u truncated", r->run);
	return 0;
}

/* Advance to the next record: 1 got one, 0 end of run, <0 error. */
static int reader_next(struct xs_reader *r, struct jo_err *err)
{
	int rc = reader_fill(r, 10, err);

	if (rc)
		return rc;
	if (r->end == r->pos) {
		if (r->last_ret != 0)
			return jo_err_set(err, JO_EPROTO, "extsort: run %u truncated", r->run);
		return 0;
	}
	uint64_t len;
	size_t hn = jo_get_uvarint(r->buf + r->pos, r->end - r->pos, &len);

	if (!hn)
		return jo_err_set(err, JO_EPROTO, "extsort: run %u: bad record header", r->run);
	if (len == 0 && !r->ds && r->last_ret != 0) {
		r->pos += hn; /* a plain run's end mark */
		r->last_ret = 0;
		return 0;
	}
	if (len == 0 || len > XS_MAX_REC)
		return jo_err_set(err, JO_EPROTO, "extsort: run %u: bad record length", r->run);
	rc = reader_fill(r, hn + len, err);
	if (rc)
		return rc;
	if (r->end - r->pos < hn + len)
		return jo_err_set(err, JO_EPROTO, "extsort: run %u truncated", r->run);
	r->rec = r->buf + r->pos + hn;
	r->rec_len = len;
	r->pfx = prefix_of(r->rec, len);
	r->pos += hn + len;
	return 1;
}

/* ---------------- heap of readers ---------------- */

static int rd_less(const struct jo_xsort *s, const struct xs_reader *rd, size_t a, size_t b)
{
	if (!s->cmp && rd[a].pfx != rd[b].pfx)
		return rd[a].pfx < rd[b].pfx;
	int c = rec_cmp(s, rd[a].rec, rd[a].rec_len, rd[b].rec, rd[b].rec_len);

	return c < 0 || (c == 0 && a < b);
}

static void heap_down(const struct jo_xsort *s, const struct xs_reader *rd, size_t *h,
		      size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;

		if (l < n && rd_less(s, rd, h[l], h[m]))
			m = l;
		if (l + 1 < n && rd_less(s, rd, h[l + 1], h[m]))
			m = l + 1;
		if (m == i)
			return;
		size_t t = h[i];

		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Open runs[first..first+n), load their first record and build the heap. */
static int merge_open(struct jo_xsort *s, size_t first, size_t n, struct xs_reader **rd_out,
		      size_t **heap_out, size_t *nheap_out, struct jo_err *err)
{
	struct xs_reader *rd = calloc(n, sizeof(*rd));
	size_t *h = calloc(n, sizeof(*h));
	size_t nh = 0;
	int rc = 0;

	*rd_out = rd;
	*heap_out = h;
	*nheap_out = 0;
	if (!rd || !h)
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	for (size_t i = 0; i < n; i++)
		rd[i].fd = -1;
	for (size_t i = 0; i < n && !rc; i++) {
		rc = reader_open(s, &rd[i], s->runs[first + i], err);
		if (!rc)
			rc = reader_next(&rd[i], err);
		if (rc == 1) {
			h[nh++] = i;
			rc = 0;
		}
	}
	for (size_t i = nh / 2; i-- > 0;)
		heap_down(s, rd, h, nh, i);
	*nheap_out = nh;
	size_t mem = n * s->reader_cost;

	if (mem > s->st.peak_mem)
		s->st.peak_mem = mem;
	return rc;
}

static void merge_close(struct jo_xsort *s, struct xs_reader *rd, size_t n, size_t first)
{
	char path[4096 + 32];

	for (size_t i = 0; rd && i < n; i++) {
		reader_close(&rd[i]);
		run_path(s, s->runs[first + i], path, sizeof(path));
		(void)unlink(path); /* a consumed run is no longer needed */
	}
	free(rd);
}

/* Merge runs[0..n) into one new run appended at the end; drops the inputs. */
static int merge_pass(struct jo_xsort *s, size_t n, struct jo_err *err)
{
	struct xs_reader *rd = NULL;
	size_t *h = NULL, nh = 0;
	struct xs_writer w;
	unsigned run = s->runs_made;
	int rc;

	rc = merge_open(s, 0, n, &rd, &h, &nh, err);
	if (rc)
		goto out;
	s->runs_made = run + 1;
	rc = writer_open(s, &w, run, err);
	if (rc)
		goto out;
	while (nh > 0 && !rc) {
		struct xs_reader *r = &rd[h[0]];

		rc = writer_put(&w, r->rec, r->rec_len, err);
		if (rc)
			break;
		int more = reader_next(r, err);

		if (more < 0) {
			rc = more;
			break;
		}
		if (!more)
			h[0] = h[--nh];
		heap_down(s, rd, h, nh, 0);
		if ((++s->tick & (XS_CANCEL_EVERY - 1)) == 0 && jo_cancelled())
			rc = jo_err_set(err, JO_ECANCELED, "extsort: canceled");
	}
	int rc2 = writer_close(&w, rc == 0, err);

	if (!rc)
		rc = rc2;
out:
	merge_close(s, rd, n, 0);
	free(h);
	if (rc)
		return rc;
	memmove(s->runs, s->runs + n, (s->nruns - n) * sizeof(*s->runs));
	s->nruns -= n;
	s->st.runs++;
	s->st.merge_passes++;
	return runs_push(s, run, err);
}

/* ---------------- public API ---------------- */

int jo_xsort_new(struct jo_xsort **out, const struct jo_xsort_opts *opts, struct jo_err *err)
{
	struct jo_xsort_opts def = JO_XSORT_OPTS_INIT;
	struct jo_xsort *s;

	*out = NULL;
	if (!opts)
		opts = &def;
	s = calloc(1, sizeof(*s));
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	s->mem_limit = opts->mem_limit ? opts->mem_limit : def.mem_limit;
	if (s->mem_limit < XS_MIN_MEM)
		s->mem_limit = XS_MIN_MEM;
	s->threaded = opts->threads > 1;
	s->plain = opts->plain_runs;
	s->reader_cost = s->plain ? XS_PLAIN_READER_COST : XS_READER_COST;
	/* zstd context and staging buffers come out of the budget too */
	size_t fixed = (s->plain ? 0 : XS_CCTX_COST) + 2 * XS_IO_BUF;
	size_t avail = s->mem_limit > fixed + XS_MIN_MEM / 2 ? s->mem_limit - fixed : XS_MIN_MEM / 2;

	s->buf_max = s->threaded ? avail / 2 : avail;
	s->buf_budget = s->buf_max < XS_START_BUF ? s->buf_max : XS_START_BUF;
	s->cmp = opts->cmp;
	s->cmp_payload = opts->cmp_payload;
	s->level = opts->zstd_level > 0 ? opts->zstd_level : 1;
	s->pending = -1;
	s->tmp_parent = strdup(opts->tmp_dir && *opts->tmp_dir ? opts->tmp_dir : "/tmp");
	s->stage = malloc(XS_IO_BUF);
	if (!s->plain) {
		s->cctx = ZSTD_createCCtx();
		s->cout_cap = ZSTD_CStreamOutSize();
		s->cout = malloc(s->cout_cap);
	}
	if (!s->tmp_parent || !s->stage || (!s->plain && (!s->cctx || !s->cout))) {
		jo_xsort_free(s);
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	}
	if (s->plain) {
		*out = s;
		return 0;
	}
	ZSTD_CCtx_setParameter(s->cctx, ZSTD_c_compressionLevel, s->level);
	ZSTD_CCtx_setParameter(s->cctx, ZSTD_c_windowLog, XS_WINDOW_LOG);
	*out = s;
	return 0;
}

static size_t buf_mem(const struct xs_buf *b)
{
	return b->cap + 2 * b->ecap * sizeof(struct xs_ent);
}

static void account(struct jo_xsort *s)
{
	size_t m = buf_mem(&s->bufs[0]) + buf_mem(&s->bufs[1]);

	if (m > s->st.peak_mem)
		s->st.peak_mem = m;
}

static void *job_main(void *arg)
{
	struct xs_job *j = arg;

	jo_err_clear(&j->err);
	j->rc = write_buf_run(j->s, j->b, j->run, &j->err);
	return NULL;
}

static int job_wait(struct jo_xsort *s, struct jo_err *err)
{
	if (!s->job_active)
		return 0;
	pthread_join(s->job_thread, NULL);
	s->job_active = false;
	if (s->job.rc) {
		if (err)
			*err = s->job.err;
		return s->job.rc;
	}
	s->st.runs++;
	return runs_push(s, s->job.run, err);
}

/* Write the current buffer as a run (in the background when threaded). */
static int spill(struct jo_xsort *s, struct jo_err *err)
{
	struct xs_buf *b = &s->bufs[s->cur];
	int rc = ensure_dir(s, err);

	if (rc)
		return rc;
	rc = job_wait(s, err);
	if (rc)
		return rc;
	unsigned run = s->runs_made;

	s->runs_made = run + 1;
	if (++s->runs_at_budget >= XS_GROW_RUNS && s->buf_budget < s->buf_max) {
		s->buf_budget = s->buf_budget > s->buf_max / 2 ? s->buf_max : 2 * s->buf_budget;
		s->runs_at_budget = 0;
	}
	if (s->threaded) {

		s->job.s = s;
		s->job.b = b;
		s->job.run = run;
		s->job.rc = 0;
		/* the worker must never take SIGINT/SIGTERM itself */
		int e = jo_thread_start(&s->job_thread, job_main, &s->job);

		if (e == 0) {
			s->job_active = true;
			s->cur ^= 1;
			return 0;
		}
		/* no thread: do it here */
	}
	rc = write_buf_run(s, b, run, err);
	if (rc)
		return rc;
	s->st.runs++;
	return runs_push(s, run, err);
}

static int buf_reserve(struct xs_buf *b, size_t len, struct jo_err *err)
{
	if (jo_grow_array_from(&b->arena, &b->cap, b->used + len, 1, 64u << 10))
		return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
	if (b->n == b->ecap) {
		size_t nc = b->ecap ? b->ecap * 2 : 1024;
		struct xs_ent *e = realloc(b->ent, nc * sizeof(*e));

		if (!e)
			return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
		b->ent = e;
		struct xs_ent *t = realloc(b->tmp, nc * sizeof(*t));

		if (!t)
			return jo_err_set(err, JO_ENOMEM, "extsort: out of memory");
		b->tmp = t;
		b->ecap = nc;
	}
	return 0;
}

int jo_xsort_add(struct jo_xsort *s, const void *rec, size_t len, struct jo_err *err)
{
	struct xs_buf *b = &s->bufs[s->cur];
	int rc;

	if (s->finished)
		return jo_err_set(err, JO_EINVAL, "extsort: add after finish");
	if (len == 0 || len > XS_MAX_REC)
		return jo_err_set(err, JO_EINVAL, "extsort: record length %zu out of range", len);
	if ((++s->tick & (XS_CANCEL_EVERY - 1)) == 0 && jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "extsort: canceled");
	/*
	 * Projected use after this record, counting the geometric growth the
	 * arena or index would need: spill first rather than overshoot.
	 */
	size_t need_arena = b->used + len > b->cap ? (b->cap ? b->cap * 2 : 65536) : b->cap;
	size_t need_ent = b->n == b->ecap ? (b->ecap ? b->ecap * 2 : 1024) : b->ecap;

	while (need_arena < b->used + len)
		need_arena *= 2;
	if (b->n > 0 && (need_arena + 2 * need_ent * sizeof(struct xs_ent) > s->buf_budget ||
			 b->used + len > XS_MAX_ARENA)) {
		rc = spill(s, err);
		if (rc)
			return rc;
		b = &s->bufs[s->cur];
	}
	rc = buf_reserve(b, len, err);
	if (rc)
		return rc;
	struct xs_ent *e = &b->ent[b->n++];

	/* len >= 1 is stored as len-1 so that exactly 64 MiB fits in 26 bits */
	e->loc = (uint64_t)b->used << XS_LEN_BITS | (uint64_t)(len - 1);
	e->pfx = s->cmp ? 0 : prefix_of(rec, len);
	memcpy(b->arena + b->used, rec, len);
	b->used += len;
	s->st.records++;
	s->st.bytes += len;
	account(s);
	return 0;
}

/*
 * Memory for the merge's readers: the whole budget once the fill buffers
 * have grown to it; before that what they grew to, but never fewer than
 * XS_MIN_FANIN readers' worth (a merge of two at a time would be slow).
 */
static size_t merge_mem(const struct jo_xsort *s)
{
	if (s->buf_budget >= s->buf_max)
		return s->mem_limit;
	size_t m = (s->threaded ? 2 : 1) * s->buf_budget;

	if (m < XS_MIN_FANIN * s->reader_cost)
		m = XS_MIN_FANIN * s->reader_cost;
	return m < s->mem_limit ? m : s->mem_limit;
}

static void buf_release(struct xs_buf *b)
{
	free(b->arena);
	free(b->ent);
	free(b->tmp);
	memset(b, 0, sizeof(*b));
}

int jo_xsort_finish(struct jo_xsort *s, struct jo_err *err)
{
	int rc;

	if (s->finished)
		return jo_err_set(err, JO_EINVAL, "extsort: finish called twice");
	s->finished = true;
	if (!s->dir_len) {
		struct xs_buf *b = &s->bufs[s->cur];

		ent_sort(s, b->arena, b->ent, b->tmp, b->n);
		s->in_memory = true;
		s->mem_pos = 0;
		return 0;
	}
	if (s->bufs[s->cur].n > 0) {
		bool threaded = s->threaded;

		s->threaded = false; /* the last run is written here: nothing left to overlap */
		rc = spill(s, err);
		s->threaded = threaded;
		if (rc)
			return rc;
	}
	rc = job_wait(s, err);
	if (rc)
		return rc;
	buf_release(&s->bufs[0]);
	buf_release(&s->bufs[1]);

	size_t fanin = merge_mem(s) / s->reader_cost;

	if (fanin < 2)
		fanin = 2;
	if (fanin > XS_MAX_FANIN)
		fanin = XS_MAX_FANIN;
	while (s->nruns > fanin) {
		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "extsort: canceled");
		/* merge just enough runs that the rest fits in one final pass */
		size_t n = s->nruns - fanin + 1;

		if (n > fanin)
			n = fanin;
		rc = merge_pass(s, n, err);
		if (rc)
			return rc;
	}
	s->nrd = s->nruns;
	return merge_open(s, 0, s->nruns, &s->rd, &s->heap, &s->nheap, err);
}

int jo_xsort_next(struct jo_xsort *s, const void **rec, size_t *len, struct jo_err *err)
{
	if (!s->finished)
		return jo_err_set(err, JO_EINVAL, "extsort: next before finish");
	if ((++s->tick & (XS_CANCEL_EVERY - 1)) == 0 && jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "extsort: canceled");
	if (s->in_memory) {
		struct xs_buf *b = &s->bufs[s->cur];

		if (s->mem_pos >= b->n)
			return 0;
		struct xs_ent *e = &b->ent[s->mem_pos++];

		*rec = b->arena + ENT_OFF(e);
		*len = ENT_LEN(e);
		return 1;
	}
	if (s->pending >= 0) {
		int more = reader_next(&s->rd[s->pending], err);

		if (more < 0)
			return more;
		if (!more)
			s->heap[0] = s->heap[--s->nheap];
		heap_down(s, s->rd, s->heap, s->nheap, 0);
		s->pending = -1;
	}
	if (s->nheap == 0)
		return 0;
	struct xs_reader *r = &s->rd[s->heap[0]];

	s->pending = (ssize_t)s->heap[0];
	*rec = r->rec;
	*len = r->rec_len;
	return 1;
}

void jo_xsort_get_stats(const struct jo_xsort *s, struct jo_xsort_stats *out)
{
	*out = s->st;
}

const char *jo_xsort_tmp_path(const struct jo_xsort *s)
{
	return s->dir_len ? s->dir : "";
}

void jo_xsort_free(struct jo_xsort *s)
{
	if (!s)
		return;
	if (s->job_active) {
		pthread_join(s->job_thread, NULL);
		s->job_active = false;
	}
	if (s->rd) {
		for (size_t i = 0; i < s->nrd; i++)
			reader_close(&s->rd[i]);
		free(s->rd);
	}
	free(s->heap);
	if (s->cleanup_registered)
		jo_cancel_atexit_remove(remove_tmp, s);
	remove_tmp(s);
	buf_release(&s->bufs[0]);
	buf_release(&s->bufs[1]);
	ZSTD_freeCCtx(s->cctx);
	free(s->cout);
	free(s->stage);
	free(s->runs);
	free(s->tmp_parent);
	free(s);
}
