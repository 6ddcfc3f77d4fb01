/*
 * Targeted warmup: range-list parsing, byte range -> block mapping (spec
 * §8.2) and reading blocks through a JuiceFS FUSE mount. See warmup.h for
 * why the reads look the way they do.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "common/warmup/warmup.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/strfree.h"
#include "common/warmup/cache.h"

/* ------------------------------------------------------------------ lines */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Parse a decimal u64 from [p, e) exactly. */
static bool parse_u64(const char *p, const char *e, uint64_t *out)
{
	uint64_t v = 0;

	if (p >= e)
		return false;
	for (; p < e; p++) {
		unsigned d;

		if (*p < '0' || *p > '9')
			return false;
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* The path [p, e) as a NUL-terminated copy, or NULL (ENOMEM). */
static char *dup_range(const char *p, const char *e)
{
	char *s = malloc((size_t)(e - p) + 1);

	if (!s)
		return NULL;
	memcpy(s, p, (size_t)(e - p));
	s[e - p] = '\0';
	return s;
}

static int emit(const char *p, const char *e, uint64_t off, uint64_t len,
		jo_warmup_range_cb cb, void *payload, struct jo_err *err)
{
	char *path;
	int rc;

	if (p >= e)
		return jo_err_set(err, JO_EINVAL, "empty path");
	path = dup_range(p, e);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = cb(path, off, len, payload);
	free(path);
	return rc;
}

static int parse_json(const char *p, size_t n, jo_warmup_range_cb cb, void *payload,
		      bool *skipped, struct jo_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(p, n, 0, &je);
	json_t *t, *path, *off, *len;
	int rc;

	if (!o)
		return jo_err_set(err, JO_EINVAL, "bad JSON: %s", je.text);
	if (!json_is_object(o)) {
		json_decref(o);
		return jo_err_set(err, JO_EINVAL, "JSON line is not an object");
	}
	t = json_object_get(o, "type");
	if (t && (!json_is_string(t) || strcmp(json_string_value(t), "range"))) {
		/* a summary or another record kind of the same stream */
		json_decref(o);
		*skipped = true;
		return 0;
	}
	path = json_object_get(o, "file");
	if (!path)
		path = json_object_get(o, "path");
	off = json_object_get(o, "offset");
	len = json_object_get(o, "length");
	if (!json_is_string(path) || !json_string_length(path)) {
		rc = jo_err_set(err, JO_EINVAL, "JSON record has no \"file\" or \"path\" string");
	} else if (!json_is_integer(off) || json_integer_value(off) < 0) {
		rc = jo_err_set(err, JO_EINVAL, "JSON record has no non-negative integer \"offset\"");
	} else if (!json_is_integer(len) || json_integer_value(len) < 0) {
		rc = jo_err_set(err, JO_EINVAL, "JSON record has no non-negative integer \"length\"");
	} else {
		const char *s = json_string_value(path);

		rc = emit(s, s + json_string_length(path), (uint64_t)json_integer_value(off),
			  (uint64_t)json_integer_value(len), cb, payload, err);
	}
	json_decref(o);
	return rc;
}

/*
 * "S-E;S-E..." in [p, e): calls back per range. With check_only, only says
 * whether the list is well formed (returns 0 when it is).
 */
static int parse_span_list(const char *path, const char *pe, const char *p, const char *e,
			   bool check_only, jo_warmup_range_cb cb, void *payload,
			   struct jo_err *err)
{
	while (p < e) {
		const char *semi = memchr(p, ';', (size_t)(e - p));
		const char *item_end = semi ? semi : e;
		const char *dash = memchr(p, '-', (size_t)(item_end - p));
		uint64_t s, en;
		int rc;

		if (!dash || !parse_u64(p, dash, &s) || !parse_u64(dash + 1, item_end, &en))
			return jo_err_set(err, JO_EINVAL, "bad range '%.*s' (want START-END)",
					  (int)(item_end - p), p);
		if (en < s)
			return jo_err_set(err, JO_EINVAL, "range '%.*s' ends before it starts",
					  (int)(item_end - p), p);
		if (!check_only && en > s) {
			rc = emit(path, pe, s, en - s, cb, payload, err);
			if (rc)
				return rc;
		}
		p = semi ? semi + 1 : e;
		if (semi && p == e)
			return jo_err_set(err, JO_EINVAL, "empty range after ';'");
	}
	return 0;
}

/* Is [p, e) a span list (digits, '-', ';' only, with at least one '-')? */
static bool looks_like_spans(const char *p, const char *e)
{
	bool dash = false;

	if (p >= e || *p < '0' || *p > '9')
		return false;
	for (; p < e; p++) {
		if (*p == '-')
			dash = true;
		else if (*p != ';' && (*p < '0' || *p > '9'))
			return false;
	}
	return dash;
}

/* Last field of [p, e) split at sep: sets *fs to its start. */
static const char *last_field(const char *p, const char *e, char sep)
{
	const char *q = e;

	while (q > p && q[-1] != sep)
		q--;
	return q;
}

static int parse_csv_quoted(const char *p, const char *e, jo_warmup_range_cb cb, void *payload,
			    struct jo_err *err)
{
	char *path = malloc((size_t)(e - p) + 1);
	size_t n = 0;
	const char *q = p + 1;
	uint64_t off, len;
	const char *c2;
	int rc;

	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (;;) {
		if (q >= e) {
			free(path);
			return jo_err_set(err, JO_EINVAL, "unterminated quoted path");
		}
		if (*q == '"') {
			if (q + 1 < e && q[1] == '"') {
				path[n++] = '"';
				q += 2;
				continue;
			}
			q++;
			break;
		}
		path[n++] = *q++;
	}
	path[n] = '\0';
	if (q >= e || *q != ',' || !(c2 = memchr(q + 1, ',', (size_t)(e - q - 1))) ||
	    !parse_u64(q + 1, c2, &off) || !parse_u64(c2 + 1, e, &len)) {
		free(path);
		return jo_err_set(err, JO_EINVAL, "bad CSV line (want PATH,OFFSET,LENGTH)");
	}
	if (!n)
		rc = jo_err_set(err, JO_EINVAL, "empty path");
	else
		rc = cb(path, off, len, payload);
	free(path);
	return rc;
}

int jo_warmup_parse_line(const char *line, size_t len, jo_warmup_range_cb cb, void *payload,
			 bool *skipped, struct jo_err *err)
{
	const char *p = line, *e = line + len;
	const char *f1, *f2, *sp;
	uint64_t a, b;
	bool dummy;

	if (!skipped)
		skipped = &dummy;
	*skipped = false;
	while (p < e && is_space(*p))
		p++;
	while (e > p && is_space(e[-1]))
		e--;
	if (p == e || *p == '#') {
		*skipped = true;
		return 0;
	}
	if (memchr(p, '\0', (size_t)(e - p)))
		return jo_err_set(err, JO_EINVAL, "NUL byte in line");
	if (*p == '{')
		return parse_json(p, (size_t)(e - p), cb, payload, skipped, err);
	if (*p == '"')
		return parse_csv_quoted(p, e, cb, payload, err);

	/* juicefs warmup -f: "PATH [S-E;S-E]" */
	if (e[-1] == ']') {
		const char *lb = e - 1;

		while (lb > p && *lb != '[')
			lb--;
		if (*lb != '[' || lb == p || !is_space(lb[-1]))
			return jo_err_set(err, JO_EINVAL, "']' without ' [' before it");
		sp = lb;
		while (sp > p && is_space(sp[-1]))
			sp--;
		if (lb + 1 == e - 1)
			return jo_err_set(err, JO_EINVAL, "empty range list '[]'");
		return parse_span_list(p, sp, lb + 1, e - 1, false, cb, payload, err);
	}

	/* plain "PATH OFFSET LENGTH" */
	f2 = last_field(p, e, ' ');
	if (f2 > p && parse_u64(f2, e, &b)) {
		const char *pe = f2 - 1;

		while (pe > p && is_space(pe[-1]))
			pe--;
		f1 = last_field(p, pe, ' ');
		if (f1 > p && parse_u64(f1, pe, &a)) {
			const char *pathe = f1 - 1;

			while (pathe > p && is_space(pathe[-1]))
				pathe--;
			return emit(p, pathe, a, b, cb, payload, err);
		}
		if (!memchr(p, ',', (size_t)(e - p)))
			return jo_err_set(err, JO_EINVAL,
					  "expected PATH OFFSET LENGTH, got a path and one number");
	}

	/* CSV "PATH,OFFSET,LENGTH" (and its header) */
	f2 = last_field(p, e, ',');
	if (f2 > p) {
		f1 = last_field(p, f2 - 1, ',');
		if (f1 > p) {
			if (parse_u64(f2, e, &b) && parse_u64(f1, f2 - 1, &a))
				return emit(p, f1 - 1, a, b, cb, payload, err);
			if ((size_t)(e - p) <= 20 &&
			    (!strncasecmp(p, "file,offset,length", (size_t)(e - p)) ||
			     !strncasecmp(p, "path,offset,length", (size_t)(e - p)))) {
				*skipped = true;
				return 0;
			}
			return jo_err_set(err, JO_EINVAL,
					  "bad CSV line: offset '%.*s' and length '%.*s' must be decimal",
					  (int)(f2 - 1 - f1), f1, (int)(e - f2), f2);
		}
	}

	/* juicefs warmup -f, older form: "PATH S-E;S-E" */
	sp = last_field(p, e, ' ');
	if (sp > p && looks_like_spans(sp, e)) {
		const char *pe = sp - 1;
		int rc;

		while (pe > p && is_space(pe[-1]))
			pe--;
		rc = parse_span_list(p, pe, sp, e, true, cb, payload, err);
		if (rc)
			return rc;
		return parse_span_list(p, pe, sp, e, false, cb, payload, err);
	}

	/* a bare path: the whole file */
	return emit(p, e, 0, JO_WARMUP_WHOLE, cb, payload, err);
}

/* ---------------------------------------------------------------- mapping */

/*
 * The file offset where the first byte of block bidx of slice (id, size)
 * is visible in this chunk, or JO_WARMUP_NONE. Segment hint first.
 */
static uint64_t find_block_start(const struct jo_slice *vis, size_t nvis, size_t hint,
				 uint64_t base, uint64_t flen, uint64_t id, uint32_t size,
				 uint64_t bstart, size_t *seg_out)
{
	for (size_t k = 0; k <= nvis; k++) {
		size_t j = k == 0 ? hint : k - 1;
		const struct jo_slice *s;
		uint64_t fo;

		if (k > 0 && j == hint)
			continue;
		s = &vis[j];
		if (s->id != id || s->size != size)
			continue;
		if (bstart < s->off || bstart >= (uint64_t)s->off + s->len)
			continue;
		fo = base + s->pos + (bstart - s->off);
		if (fo >= flen)
			continue;
		*seg_out = j;
		return fo;
	}
	return JO_WARMUP_NONE;
}

int jo_warmup_map_chunk(const struct jo_slice *vis, size_t nvis, uint32_t indx, uint64_t flen,
			uint32_t lo, uint32_t hi, uint32_t bs, jo_warmup_block_cb cb,
			void *payload)
{
	uint64_t base = (uint64_t)indx << JO_CHUNK_BITS;
	uint64_t fend;
	int rc;

	if (flen <= base || bs == 0)
		return 0;
	fend = flen - base;
	if (fend > JO_CHUNK_SIZE)
		fend = JO_CHUNK_SIZE;
	if (hi > fend)
		hi = (uint32_t)fend;
	for (size_t i = 0; i < nvis && lo < hi; i++) {
		const struct jo_slice *sg = &vis[i];
		uint64_t ss = sg->pos, se = (uint64_t)sg->pos + sg->len;
		uint64_t s = lo > ss ? lo : ss, e = hi < se ? hi : se;
		uint64_t from, to;

		if (s >= e || sg->id == 0)
			continue;
		from = sg->off + (s - ss);  /* slice offsets [from, to) */
		to = sg->off + (e - ss);
		for (uint64_t bi = from / bs; bi <= (to - 1) / bs; bi++) {
			struct jo_warmup_block b = { 0 };
			uint64_t bst = bi * bs;
			uint64_t bend;
			size_t aseg = i;
			uint64_t fo;

			if (bst >= sg->size)
				break; /* a window past the slice end: corrupt, no key */
			b.id = sg->id;
			b.indx = (uint32_t)bi;
			b.bsize = jo_block_len(sg->size, bs, (uint32_t)bi);
			bend = bst + b.bsize;
			b.boff = (uint32_t)((from > bst ? from : bst) - bst);
			b.blen = (uint32_t)((to < bend ? to : bend) - bst - b.boff);
			b.alt = JO_WARMUP_NONE;
			fo = find_block_start(vis, nvis, i, base, flen, sg->id, sg->size, bst, &aseg);
			if (fo != JO_WARMUP_NONE) {
				b.anchor = fo;
				b.anchor_kind = fo ? JO_WARMUP_AT_START : JO_WARMUP_AT_ZERO;
				if (!fo && bst + 1 < bend &&
				    bst + 1 < (uint64_t)vis[aseg].off + vis[aseg].len && 1 < flen)
					b.alt = 1;
			} else {
				/* first visible byte of the block in this segment */
				uint64_t first = sg->off > bst ? sg->off : bst;

				b.anchor_kind = JO_WARMUP_PARTIAL;
				b.anchor = base + ss + (first - sg->off);
				if (b.anchor == 0 && first + 1 < bend && first + 1 < sg->off + (uint64_t)sg->len &&
				    1 < flen)
					b.alt = 1;
			}
			rc = cb(&b, payload);
			if (rc)
				return rc;
		}
	}
	return 0;
}

struct jo_warmup_mapper {
	struct jo_meta *meta;
	uint32_t bs;
	bool have;
	uint64_t ino;
	uint32_t indx;
	struct jo_slice *vis;
	size_t nvis;
	uint64_t reads;
};

int jo_warmup_mapper_new(struct jo_warmup_mapper **out, struct jo_meta *m, uint32_t bs,
			 struct jo_err *err)
{
	struct jo_warmup_mapper *mp;

	*out = NULL;
	if (!bs)
		return jo_err_set(err, JO_EINVAL, "block size 0");
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	mp->meta = m;
	mp->bs = bs;
	*out = mp;
	return 0;
}

void jo_warmup_mapper_free(struct jo_warmup_mapper *mp)
{
	if (!mp)
		return;
	free(mp->vis);
	free(mp);
}

uint64_t jo_warmup_mapper_chunk_reads(const struct jo_warmup_mapper *mp)
{
	return mp->reads;
}

static int load_chunk(struct jo_warmup_mapper *mp, uint64_t ino, uint32_t indx,
		      struct jo_err *err)
{
	uint8_t *raw = NULL;
	size_t len = 0, nrec = 0;
	struct jo_slice *recs = NULL;
	int rc;

	if (mp->have && mp->ino == ino && mp->indx == indx)
		return 0;
	mp->have = false;
	free(mp->vis);
	mp->vis = NULL;
	mp->nvis = 0;
	rc = jo_meta_read_chunk(mp->meta, ino, indx, &raw, &len, err);
	if (rc)
		return rc;
	mp->reads++;
	rc = jo_slices_decode(raw, len, &recs, &nrec, err);
	free(raw);
	if (rc)
		return jo_err_wrap(err, "inode %llu chunk %u", (unsigned long long)ino, indx);
	rc = jo_chunk_visible(recs, nrec, &mp->vis, &mp->nvis);
	free(recs);
	if (rc)
		return jo_chunk_err(err, rc, ino, indx);
	mp->have = true;
	mp->ino = ino;
	mp->indx = indx;
	return 0;
}

int jo_warmup_map_range(struct jo_warmup_mapper *mp, uint64_t ino, uint64_t flen, uint64_t off,
			uint64_t len, jo_warmup_block_cb cb, void *payload, struct jo_err *err)
{
	uint64_t end;
	int rc;

	if (off >= flen || len == 0)
		return 0;
	end = (len > flen - off) ? flen : off + len;
	for (uint64_t c = off >> JO_CHUNK_BITS; c <= (end - 1) >> JO_CHUNK_BITS; c++) {
		uint64_t base = c << JO_CHUNK_BITS;
		uint64_t lo = off > base ? off - base : 0;
		uint64_t hi = end - base < JO_CHUNK_SIZE ? end - base : JO_CHUNK_SIZE;

		if (c > UINT32_MAX)
			return jo_err_set(err, JO_EPROTO, "file offset too large");
		rc = load_chunk(mp, ino, (uint32_t)c, err);
		if (rc)
			return rc;
		rc = jo_warmup_map_chunk(mp->vis, mp->nvis, (uint32_t)c, flen, (uint32_t)lo,
					 (uint32_t)hi, mp->bs, cb, payload);
		if (rc)
			return rc;
	}
	return 0;
}

struct fb_seen {
	const struct jo_warmup_block *v;
	size_t n, cap;
	struct jo_warmup_block *own;
	jo_warmup_block_cb cb;
	void *payload;
};

static int fb_collect(const struct jo_warmup_block *b, void *payload)
{
	struct fb_seen *s = payload;

	if (jo_grow_array(&s->own, &s->cap, s->n + 1, sizeof(*s->own)))
		return JO_ENOMEM;
	s->v = s->own;
	s->own[s->n++] = *b;
	return s->cb(b, s->payload);
}

static bool fb_has(const struct fb_seen *s, uint64_t id, uint32_t indx)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].id == id && s->v[i].indx == indx)
			return true;
	return false;
}

int jo_warmup_file_blocks(struct jo_warmup_mapper *mp, uint64_t ino, uint64_t flen,
			  jo_warmup_block_cb cb, void *payload, struct jo_err *err)
{
	struct fb_seen seen = { .cb = cb, .payload = payload };
	int rc = 0;

	if (!flen)
		return 0;
	for (uint64_t c = 0; c <= (flen - 1) >> JO_CHUNK_BITS && !rc; c++) {
		if (c > UINT32_MAX) {
			rc = jo_err_set(err, JO_EPROTO, "file offset too large");
			break;
		}
		rc = load_chunk(mp, ino, (uint32_t)c, err);
		if (rc)
			break;
		seen.n = 0;
		/* the blocks whose bytes the file shows, with their anchors */
		rc = jo_warmup_map_chunk(mp->vis, mp->nvis, (uint32_t)c, flen, 0, JO_CHUNK_SIZE, mp->bs,
					 fb_collect, &seen);
		if (rc == JO_ENOMEM) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		if (rc)
			break;
		/* the rest of every slice the chunk shows */
		for (size_t i = 0; i < mp->nvis && !rc; i++) {
			const struct jo_slice *sg = &mp->vis[i];
			uint32_t nb;
			bool dup = false;

			if (!sg->id)
				continue;
			for (size_t k = 0; k < i && !dup; k++)
				dup = mp->vis[k].id == sg->id && mp->vis[k].size == sg->size;
			if (dup)
				continue;
			nb = jo_slice_nblocks(sg->size, mp->bs);
			for (uint32_t bi = 0; bi < nb && !rc; bi++) {
				struct jo_warmup_block b = { 0 };

				if (fb_has(&seen, sg->id, bi))
					continue;
				b.id = sg->id;
				b.indx = bi;
				b.bsize = jo_block_len(sg->size, mp->bs, bi);
				b.anchor_kind = JO_WARMUP_HIDDEN;
				b.anchor = JO_WARMUP_NONE;
				b.alt = JO_WARMUP_NONE;
				rc = cb(&b, payload);
			}
		}
	}
	free(seen.own);
	return rc;
}

/* ------------------------------------------------------------------ mount */

void jo_warmup_mount_release(struct jo_warmup_mount *m)
{
	if (!m)
		return;
	jo_free_strs(&m->uuid, &m->name, &m->subdir, &m->stats_path, &m->control_path,
		     &m->cache_dir);
	memset(m, 0, sizeof(*m));
}

/* Read a small file whole (max bytes); *out malloc'd and NUL-terminated. */
static int slurp(const char *path, size_t max, char **out, size_t *outlen, struct jo_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;
	size_t n = 0;

	*out = NULL;
	if (fd < 0)
		return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO, "cannot open '%s': %s",
				  path, strerror(errno));
	buf = malloc(max + 1);
	if (!buf) {
		close(fd);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, max - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			free(buf);
			close(fd);
			return jo_err_set(err, JO_EIO, "cannot read '%s': %s", path, strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == max) {
			free(buf);
			close(fd);
			return jo_err_set(err, JO_EPROTO, "'%s' is larger than %zu bytes", path, max);
		}
	}
	close(fd);
	buf[n] = '\0';
	*out = buf;
	if (outlen)
		*outlen = n;
	return 0;
}

static char *json_strdup(json_t *o, const char *k)
{
	json_t *v = o ? json_object_get(o, k) : NULL;

	return strdup(json_is_string(v) ? json_string_value(v) : "");
}

static int64_t json_int(json_t *o, const char *k, int64_t def)
{
	json_t *v = o ? json_object_get(o, k) : NULL;

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

int jo_warmup_mount_probe(const char *mp, struct jo_warmup_mount *out, struct jo_err *err)
{
	static const char *const names[][3] = { { ".config", ".stats", ".control" },
						{ ".jfs.config", ".jfs.stats", ".jfs.control" } };
	char *path = NULL, *text = NULL;
	json_t *root = NULL, *fmt, *chunk, *meta, *v;
	json_error_t je;
	const char *comp;
	int rc = JO_ENOTFOUND;
	size_t which = 0;

	memset(out, 0, sizeof(*out));
	for (which = 0; which < 2; which++) {
		free(path);
		path = jo_path_join(mp, names[which][0]);
		if (!path)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		rc = slurp(path, 4u << 20, &text, NULL, err);
		if (rc != JO_ENOTFOUND)
			break;
	}
	if (rc == JO_ENOTFOUND) {
		rc = jo_err_set(err, JO_ENOTFOUND,
				"'%s' is not a JuiceFS mount point (no .config in it)", mp);
		goto out;
	}
	if (rc)
		goto out;
	root = json_loads(text, 0, &je);
	if (!json_is_object(root)) {
		rc = jo_err_set(err, JO_EPROTO, "'%s' is not a JuiceFS mount config: %s", path,
				root ? "not an object" : je.text);
		goto out;
	}
	fmt = json_object_get(root, "Format");
	chunk = json_object_get(root, "Chunk");
	meta = json_object_get(root, "Meta");
	if (!json_is_object(fmt) || !json_is_object(chunk)) {
		rc = jo_err_set(err, JO_EPROTO, "'%s' has no Format/Chunk sections", path);
		goto out;
	}
	out->uuid = json_strdup(fmt, "UUID");
	out->name = json_strdup(fmt, "Name");
	v = json_object_get(root, "Subdir");
	if (!json_is_string(v) && json_is_object(meta))
		v = json_object_get(meta, "Subdir");
	out->subdir = strdup(json_is_string(v) ? json_string_value(v) : "");
	out->stats_path = jo_path_join(mp, names[which][1]);
	out->control_path = jo_path_join(mp, names[which][2]);
	out->cache_dir = json_strdup(chunk, "CacheDir");
	if (!out->uuid || !out->name || !out->subdir || !out->stats_path || !out->control_path ||
	    !out->cache_dir) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	out->block_size = (uint32_t)json_int(chunk, "BlockSize", 0);
	out->cache_size = (uint64_t)json_int(chunk, "CacheSize", 0);
	v = json_object_get(chunk, "CacheFullBlock");
	out->cache_full_block = v ? json_is_true(v) : true;
	out->prefetch = (int)json_int(chunk, "Prefetch", 0);
	out->readahead = (uint64_t)json_int(chunk, "Readahead", 0);
	comp = json_string_value(json_object_get(chunk, "Compress"));
	if (!comp)
		comp = json_string_value(json_object_get(fmt, "Compression"));
	v = json_object_get(fmt, "EncryptKey");
	out->seekable = (!comp || !*comp || !strcasecmp(comp, "none")) &&
			!(json_is_string(v) && json_string_length(v));
	rc = 0;
out:
	if (rc)
		jo_warmup_mount_release(out);
	json_decref(root);
	free(text);
	free(path);
	return rc;
}

int jo_warmup_mount_stats(const char *stats_path, struct jo_warmup_counters *out,
			  struct jo_err *err)
{
	char *text, *line, *save = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = slurp(stats_path, 16u << 20, &text, NULL, err);
	if (rc)
		return rc;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		double val;
		char *end;

		if (!sp)
			continue;
		*sp = '\0';
		val = strtod(sp + 1, &end);
		if (end == sp + 1 || val < 0)
			continue;
		/* labels are dropped, so one name may repeat (storage classes): add up */
		if (!strcmp(line, "juicefs_object_request_durations_histogram_seconds_GET_total"))
			out->gets += (uint64_t)val;
		else if (!strcmp(line, "juicefs_object_request_data_bytes_GET"))
			out->get_bytes += (uint64_t)val;
		else if (!strcmp(line, "juicefs_blockcache_hits"))
			out->cache_hits += (uint64_t)val;
	}
	free(text);
	return 0;
}

static int open_for_read(const char *path, bool direct, struct jo_err *err)
{
	int fd = -1;

	if (direct)
		fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && (!direct || errno == EINVAL)) {
		/* O_DIRECT refused: buffered, but without kernel readahead */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM); /* best effort */
	}
	if (fd < 0)
		return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO, "cannot open '%s': %s",
				  path, strerror(errno));
	return fd;
}

int jo_warmup_read_byte(const char *path, uint64_t off, struct jo_err *err)
{
	void *buf = NULL;
	ssize_t n;
	int fd, e;

	if (off > (uint64_t)INT64_MAX)
		return jo_err_set(err, JO_EINVAL, "offset too large");
	if (posix_memalign(&buf, 4096, 4096))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (int direct = 1; direct >= 0; direct--) {
		fd = open_for_read(path, direct, err);
		if (fd < 0) {
			free(buf);
			return fd;
		}
		do {
			n = pread(fd, buf, 1, (off_t)off);
		} while (n < 0 && errno == EINTR);
		e = errno;
		close(fd);
		/* block-device file systems want aligned O_DIRECT I/O; FUSE does not */
		if (!(n < 0 && e == EINVAL))
			break;
	}
	free(buf);
	if (n < 0)
		return jo_err_set(err, JO_EIO, "read '%s' at %llu: %s", path,
				  (unsigned long long)off, strerror(e));
	if (n != 1)
		return jo_err_set(err, JO_EPROTO, "read '%s' at %llu: end of file (file shrank?)",
				  path, (unsigned long long)off);
	return 0;
}

/* ------------------------------------------------------------ read plans */

int jo_warmup_plan_read(const struct jo_warmup_block *b, const struct jo_warmup_mount *mi,
			struct jo_warmup_read *out, struct jo_err *err)
{
	bool readahead = mi->readahead >= mi->block_size && mi->block_size;

	out->off = b->anchor;
	out->confirm = false;
	switch (b->anchor_kind) {
	case JO_WARMUP_AT_START:
		return 0;
	case JO_WARMUP_AT_ZERO:
		/* a read at file offset 0 turns the client's readahead on */
		if (!readahead || b->alt == JO_WARMUP_NONE)
			return 0;
		if (!mi->seekable) {
			out->off = b->alt;  /* every read loads the whole block */
			return 0;
		}
		if (mi->prefetch > 0) {
			out->off = b->alt;  /* ranged GET, then the prefetcher's full GET */
			out->confirm = true;
		}
		return 0;
	case JO_WARMUP_PARTIAL:
		if (b->anchor == 0 && readahead && b->alt != JO_WARMUP_NONE)
			out->off = b->alt;
		if (!mi->seekable)
			return 0;
		if (mi->prefetch > 0) {
			out->confirm = true;
			return 0;
		}
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "the block's first byte is hidden by a newer slice and the mount "
				  "does not prefetch (--prefetch 0): no read through it caches the block");
	case JO_WARMUP_HIDDEN:
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "no byte of the block is visible in the file (newer slices hide "
				  "it): no read through the mount caches it");
	}
	return jo_err_set(err, JO_EINVAL, "bad anchor kind %d", b->anchor_kind);
}

/* ---------------------------------------------------------------- fetcher */

struct fetch_item {
	char *path;
	char *key;
	uint64_t off;
	uint32_t bsize;
	bool confirm;
	bool tagged;
	void *tag;
};

struct jo_warmup_fetcher {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full, confirm_free;
	struct fetch_item *q;
	size_t cap, head, n;
	bool closing;
	int confirm_limit, confirm_busy;
	pthread_t *th;
	int nth;
	jo_warmup_fail_cb fail;
	void *payload;
	jo_warmup_done_cb done;
	void *done_payload;
	const struct jo_warmup_cachedirs *cd; /* watched by confirm reads, or NULL */
	struct jo_warmup_fetch_stats st;
};

/*
 * Poll the disk cache for key for up to 2 s (1 ms, doubling up to 50 ms
 * between looks): true once its file is there. A stat error other than "not
 * there" ends the watch (the caller reads again).
 */
static bool await_cached(const struct jo_warmup_cachedirs *cd, const char *key)
{
	struct jo_err e = { 0 };
	long waited = 0, step = 1;

	for (;;) {
		int has = jo_warmup_cache_has(cd, key, NULL, &e);

		if (has)
			return has > 0;
		if (waited >= 2000 || jo_cancelled())
			return false;
		usleep((useconds_t)step * 1000);
		waited += step;
		step = step * 2 > 50 ? 50 : step * 2;
	}
}

static int fetch_one(struct jo_warmup_fetcher *f, const struct fetch_item *it, struct jo_err *err)
{
	bool seen = false;
	int rc;

	if (it->confirm) {
		pthread_mutex_lock(&f->mu);
		while (f->confirm_busy >= f->confirm_limit)
			pthread_cond_wait(&f->confirm_free, &f->mu);
		f->confirm_busy++;
		pthread_mutex_unlock(&f->mu);
	}
	rc = jo_warmup_read_byte(it->path, it->off, err);
	/*
	 * The first read was a ranged GET that queued the whole block on the
	 * client's prefetcher. Either its file shows up in the disk cache, or
	 * the same read again joins that full load (or hits the cache); then
	 * the block is resident and the prefetch queue has room again.
	 */
	if (!rc && it->confirm) {
		seen = f->cd && await_cached(f->cd, it->key);
		if (!seen)
			rc = jo_warmup_read_byte(it->path, it->off, err);
	}
	if (it->confirm) {
		pthread_mutex_lock(&f->mu);
		f->confirm_busy--;
		f->st.confirm_reads++;
		f->st.cache_seen += seen;
		pthread_cond_signal(&f->confirm_free);
		pthread_mutex_unlock(&f->mu);
	}
	return rc;
}

static void *fetch_worker(void *arg)
{
	struct jo_warmup_fetcher *f = arg;

	for (;;) {
		struct fetch_item it;
		struct jo_err err = { 0 };
		int rc;

		pthread_mutex_lock(&f->mu);
		while (!f->n && !f->closing)
			pthread_cond_wait(&f->not_empty, &f->mu);
		if (!f->n) {
			pthread_mutex_unlock(&f->mu);
			break;
		}
		it = f->q[f->head];
		f->head = (f->head + 1) % f->cap;
		f->n--;
		pthread_cond_signal(&f->not_full);
		pthread_mutex_unlock(&f->mu);

		if (jo_cancelled())
			rc = jo_err_set(&err, JO_ECANCELED, "interrupted");
		else
			rc = fetch_one(f, &it, &err);
		pthread_mutex_lock(&f->mu);
		if (rc) {
			f->st.failed++;
			if (f->fail)
				f->fail(it.key, it.path, it.off, &err, f->payload);
		} else {
			f->st.done++;
			f->st.bytes_done += it.bsize;
		}
		if (it.tagged && f->done)
			f->done(it.tag, rc, &err, f->done_payload);
		pthread_mutex_unlock(&f->mu);
		free(it.path);
		free(it.key);
	}
	return NULL;
}

int jo_warmup_fetcher_new(struct jo_warmup_fetcher **out, int threads, int prefetch,
			  jo_warmup_fail_cb fail, void *payload, struct jo_err *err)
{
	struct jo_warmup_fetcher *f;

	*out = NULL;
	if (threads < 1)
		threads = 1;
	f = calloc(1, sizeof(*f));
	if (!f)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	f->cap = (size_t)threads * 2;
	f->q = calloc(f->cap, sizeof(*f->q));
	f->th = calloc((size_t)threads, sizeof(*f->th));
	if (!f->q || !f->th) {
		free(f->q);
		free(f->th);
		free(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->not_empty, NULL);
	pthread_cond_init(&f->not_full, NULL);
	pthread_cond_init(&f->confirm_free, NULL);
	f->confirm_limit = prefetch > 0 ? prefetch : 1;
	f->fail = fail;
	f->payload = payload;
	/* signals go to the main thread, which polls jo_cancelled() */
	for (int i = 0; i < threads; i++) {
		if (jo_thread_start(&f->th[i], fetch_worker, f))
			break;
		f->nth++;
	}
	if (!f->nth) {
		jo_warmup_fetcher_free(f);
		return jo_err_set(err, JO_ENOMEM, "cannot start threads");
	}
	*out = f;
	return 0;
}

/* The item's own copies of path and key: 0, or JO_ENOMEM (err set, nothing kept). */
static int item_strdup(struct fetch_item *it, const char *path, const char *key,
		       struct jo_err *err)
{
	it->path = strdup(path);
	it->key = strdup(key);
	if (!it->path || !it->key) {
		free(it->path);
		free(it->key);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* Queue it where there is room; the caller holds f->mu. */
static void item_enqueue(struct jo_warmup_fetcher *f, const struct fetch_item *it)
{
	f->q[(f->head + f->n) % f->cap] = *it;
	f->n++;
	f->st.queued++;
	pthread_cond_signal(&f->not_empty);
}

int jo_warmup_fetcher_add(struct jo_warmup_fetcher *f, const char *path, const char *key,
			  uint32_t bsize, const struct jo_warmup_read *rd, struct jo_err *err)
{
	struct fetch_item it = { .off = rd->off, .bsize = bsize, .confirm = rd->confirm };
	int rc = item_strdup(&it, path, key, err);

	if (rc)
		return rc;
	pthread_mutex_lock(&f->mu);
	while (f->n == f->cap && !jo_cancelled()) {
		struct timespec ts;

		/* wake up now and then to notice a signal */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&f->not_full, &f->mu, &ts);
	}
	if (jo_cancelled()) {
		pthread_mutex_unlock(&f->mu);
		free(it.path);
		free(it.key);
		return jo_err_set(err, JO_ECANCELED, "interrupted");
	}
	item_enqueue(f, &it);
	pthread_mutex_unlock(&f->mu);
	return 0;
}

void jo_warmup_fetcher_watch_cache(struct jo_warmup_fetcher *f,
				   const struct jo_warmup_cachedirs *cd)
{
	pthread_mutex_lock(&f->mu);
	f->cd = cd;
	pthread_mutex_unlock(&f->mu);
}

void jo_warmup_fetcher_on_done(struct jo_warmup_fetcher *f, jo_warmup_done_cb cb, void *payload)
{
	pthread_mutex_lock(&f->mu);
	f->done = cb;
	f->done_payload = payload;
	pthread_mutex_unlock(&f->mu);
}

int jo_warmup_fetcher_try_add(struct jo_warmup_fetcher *f, const char *path, const char *key,
			      uint32_t bsize, const struct jo_warmup_read *rd, void *tag,
			      struct jo_err *err)
{
	struct fetch_item it = { .off = rd->off, .bsize = bsize, .confirm = rd->confirm,
				 .tagged = true, .tag = tag };
	int rc;

	pthread_mutex_lock(&f->mu);
	if (f->n == f->cap) {
		pthread_mutex_unlock(&f->mu);
		return 1;
	}
	pthread_mutex_unlock(&f->mu);
	if ((rc = item_strdup(&it, path, key, err)) != 0)
		return rc;
	pthread_mutex_lock(&f->mu);
	/* only this thread adds, so the room seen above is still there */
	item_enqueue(f, &it);
	pthread_mutex_unlock(&f->mu);
	return 0;
}

void jo_warmup_fetcher_finish(struct jo_warmup_fetcher *f)
{
	if (!f || !f->th)
		return;
	pthread_mutex_lock(&f->mu);
	f->closing = true;
	pthread_cond_broadcast(&f->not_empty);
	pthread_mutex_unlock(&f->mu);
	for (int i = 0; i < f->nth; i++)
		pthread_join(f->th[i], NULL);
	f->nth = 0;
}

void jo_warmup_fetcher_stats(struct jo_warmup_fetcher *f, struct jo_warmup_fetch_stats *out)
{
	pthread_mutex_lock(&f->mu);
	*out = f->st;
	pthread_mutex_unlock(&f->mu);
}

void jo_warmup_fetcher_free(struct jo_warmup_fetcher *f)
{
	if (!f)
		return;
	jo_warmup_fetcher_finish(f);
	for (size_t i = 0; i < f->n; i++) {
		free(f->q[(f->head + i) % f->cap].path);
		free(f->q[(f->head + i) % f->cap].key);
	}
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->not_empty);
	pthread_cond_destroy(&f->not_full);
	pthread_cond_destroy(&f->confirm_free);
	free(f->q);
	free(f->th);
	free(f);
}
