/*
 * Block-exact eviction through a JuiceFS mount.
 *
 * The mount's control file evicts whole files only: every block of every
 * slice the file shows (pkg/vfs/fill.go). To remove exactly a set of blocks
 * and nothing else, for each file the blocks of those slices are listed from
 * the metadata and looked up in the cache directories (read-only, as the
 * mount's own check does), the files are evicted through the control file,
 * and the blocks that were cached and were not to go are read back through
 * the mount (when asked to keep them). Never touches a cache directory.
 */
#include "common/warmup/run.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/command.h"
#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/jfs/jfs.h"
#include "common/warmup/warmup.h"
#include "common/warmup/cache.h"

/* ------------------------------------------------------------- block set */

struct bset_ent {
	uint64_t id;    /* 0 = empty (slice ids are never 0) */
	uint32_t indx, bsize;
};

struct wu_bset {
	struct bset_ent *v;
	size_t cap, n;
	uint64_t bytes;
};

static size_t bset_slot(const struct wu_bset *s, uint64_t id, uint32_t indx)
{
	uint64_t h = (id * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)indx * 0xC2B2AE3D27D4EB4FULL);

	h ^= h >> 31;
	return (size_t)h & (s->cap - 1);
}

int wu_bset_new(struct wu_bset **out)
{
	struct wu_bset *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return JO_ENOMEM;
	s->cap = 256;
	s->v = calloc(s->cap, sizeof(*s->v));
	if (!s->v) {
		free(s);
		return JO_ENOMEM;
	}
	*out = s;
	return 0;
}

void wu_bset_free(struct wu_bset *s)
{
	if (!s)
		return;
	free(s->v);
	free(s);
}

static struct bset_ent *bset_find(const struct wu_bset *s, uint64_t id, uint32_t indx)
{
	size_t i = bset_slot(s, id, indx);

	while (s->v[i].id) {
		if (s->v[i].id == id && s->v[i].indx == indx)
			return &s->v[i];
		i = (i + 1) & (s->cap - 1);
	}
	return &s->v[i];
}

int wu_bset_add(struct wu_bset *s, uint64_t id, uint32_t indx, uint32_t bsize)
{
	struct bset_ent *e;

	if ((s->n + 1) * 2 > s->cap) {
		struct wu_bset ns = { .cap = s->cap * 2 };

		ns.v = calloc(ns.cap, sizeof(*ns.v));
		if (!ns.v)
			return JO_ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i].id)
				*bset_find(&ns, s->v[i].id, s->v[i].indx) = s->v[i];
		free(s->v);
		s->v = ns.v;
		s->cap = ns.cap;
	}
	e = bset_find(s, id, indx);
	if (e->id)
		return 0;
	e->id = id;
	e->indx = indx;
	e->bsize = bsize;
	s->n++;
	s->bytes += bsize;
	return 1;
}

bool wu_bset_has(const struct wu_bset *s, uint64_t id, uint32_t indx)
{
	return s && bset_find(s, id, indx)->id != 0;
}

size_t wu_bset_count(const struct wu_bset *s)
{
	return s ? s->n : 0;
}

uint64_t wu_bset_bytes(const struct wu_bset *s)
{
	return s ? s->bytes : 0;
}

/* ------------------------------------------------------------ evict */

/* A block of a file's slices, with the file it can be read back from. */
struct fblock {
	struct jo_warmup_block b;
	size_t file;
	bool cached;
};

struct fb_list {
	struct fblock *v;
	size_t n, cap;
	struct wu_bset *seen;
	size_t file;
};

static int fb_add(const struct jo_warmup_block *b, void *payload)
{
	struct fb_list *l = payload;
	int added = wu_bset_add(l->seen, b->id, b->indx, b->bsize);

	if (added < 0)
		return JO_ENOMEM;
	if (!added) {
		/* seen: keep the better anchor (the one-shot sort does the same) */
		for (size_t i = l->n; i-- > 0;) {
			struct fblock *f = &l->v[i];

			if (f->b.id != b->id || f->b.indx != b->indx)
				continue;
			if (b->anchor_kind < f->b.anchor_kind ||
			    (b->anchor_kind == f->b.anchor_kind && b->anchor < f->b.anchor)) {
				f->b = *b;
				f->file = l->file;
			}
			break;
		}
		return 0;
	}
	if (jo_grow_array(&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return JO_ENOMEM;
	l->v[l->n].b = *b;
	l->v[l->n].file = l->file;
	l->v[l->n].cached = false;
	l->n++;
	return 0;
}

static void rewarm_fail(const char *key, const char *path, uint64_t off, const struct jo_err *err,
			void *payload)
{
	struct wu_state *st = payload;

	fprintf(stderr, "%s %s: cannot read back block '%s' (%s at %" PRIu64 "): %s\n",
		st->ctx->prog, st->ctx->cmd, JO_ESC_TERM(key), JO_ESC_TERM(path), off,
		JO_ESC_TERM(err->msg));
}

int wu_evict(struct wu_state *st, const struct jo_warmup_mount *mi,
	     const struct jo_warmup_cachedirs *cd, const struct wu_evict_file *files, size_t nfiles,
	     const struct wu_bset *targets, enum wu_others others, wu_needed_fn needed,
	     void *payload, int threads, struct wu_evict_result *out, struct jo_err *err)
{
	struct fb_list l = { 0 };
	const char **paths = NULL;
	size_t np = 0;
	char key[512];
	int rc;

	memset(out, 0, sizeof(*out));
	out->block_exact = cd != NULL;
	out->files = nfiles;
	if (!nfiles)
		return 0;
	rc = wu_bset_new(&l.seen);
	if (rc)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	/* 1. every block of every slice the files show, looked up in the cache */
	for (size_t i = 0; i < nfiles; i++) {
		l.file = i;
		rc = jo_warmup_file_blocks(st->mapper, files[i].ino, files[i].flen, fb_add, &l, err);
		if (rc == JO_ENOMEM)
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		if (rc) {
			jo_err_wrap(err, "'%s'", files[i].vpath);
			goto out;
		}
	}
	for (size_t i = 0; i < l.n; i++) {
		struct fblock *f = &l.v[i];
		bool target = wu_bset_has(targets, f->b.id, f->b.indx);

		if (cd) {
			jo_block_key(key, sizeof(key), st->fmt.name, st->fmt.hash_prefix, f->b.id,
				     f->b.indx, f->b.bsize);
			rc = jo_warmup_cache_has(cd, key, NULL, err);
			if (rc < 0)
				goto out;
			f->cached = rc == 1;
			rc = 0;
		}
		if (target) {
			if (f->cached) {
				out->cached_blocks++;
				out->cached_bytes += f->b.bsize;
			}
		} else if (needed(f->b.id, f->b.indx, payload)) {
			out->window_blocks++;
		} else if (f->cached) {
			out->other_blocks++;
			out->other_bytes += f->b.bsize;
		}
	}
	out->blocks = wu_bset_count(targets);
	out->bytes = wu_bset_bytes(targets);

	/* 2. the mount evicts the files */
	paths = calloc(nfiles, sizeof(*paths));
	if (!paths) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nfiles; i++) {
		size_t ml = strlen(st->mount);

		if (strncmp(files[i].mpath, st->mount, ml))
			continue;
		paths[np++] = files[i].mpath + ml;
	}
	for (size_t off = 0; off < np && !rc; off += JO_WARMUP_CTL_MAX_PATHS) {
		struct jo_warmup_ctl_reply r;
		size_t k = np - off < JO_WARMUP_CTL_MAX_PATHS ? np - off : JO_WARMUP_CTL_MAX_PATHS;

		rc = jo_warmup_ctl_call(mi->control_path, JO_WARMUP_CTL_EVICT, paths + off, k,
					(unsigned)threads, &r, err);
		if (!rc) {
			out->mount_bytes += r.total_bytes;
			jo_warmup_ctl_reply_release(&r);
		}
	}
	if (rc)
		goto out;

	/* 3. read back what was cached and was not to go */
	if (cd && others == WU_OTHERS_KEEP && out->other_blocks) {
		struct jo_warmup_fetcher *f = NULL;
		struct jo_warmup_fetch_stats fs;

		rc = jo_warmup_fetcher_new(&f, threads, mi->prefetch, rewarm_fail, st, err);
		if (rc)
			goto out;
		jo_warmup_fetcher_watch_cache(f, cd);
		for (size_t i = 0; i < l.n && !rc; i++) {
			struct fblock *fb = &l.v[i];
			struct jo_warmup_read rd;
			struct jo_err perr = { 0 };

			if (!fb->cached || wu_bset_has(targets, fb->b.id, fb->b.indx) ||
			    needed(fb->b.id, fb->b.indx, payload))
				continue;
			if (jo_warmup_plan_read(&fb->b, mi, &rd, &perr)) {
				out->lost_blocks++;
				out->lost_bytes += fb->b.bsize;
				continue;
			}
			jo_block_key(key, sizeof(key), st->fmt.name, st->fmt.hash_prefix, fb->b.id,
				     fb->b.indx, fb->b.bsize);
			rc = jo_warmup_fetcher_add(f, files[fb->file].mpath, key, fb->b.bsize, &rd, err);
		}
		jo_warmup_fetcher_finish(f);
		jo_warmup_fetcher_stats(f, &fs);
		jo_warmup_fetcher_free(f);
		out->rewarmed_blocks = fs.done;
		out->rewarmed_bytes = fs.bytes_done;
		out->lost_blocks += fs.failed;
		if (rc)
			goto out;
	}

	/* 4. are the targets gone? (a reader may have brought one back since) */
	if (cd) {
		for (size_t i = 0; i < l.n; i++) {
			struct fblock *fb = &l.v[i];

			if (!fb->cached || !wu_bset_has(targets, fb->b.id, fb->b.indx))
				continue;
			jo_block_key(key, sizeof(key), st->fmt.name, st->fmt.hash_prefix, fb->b.id,
				     fb->b.indx, fb->b.bsize);
			rc = jo_warmup_cache_has(cd, key, NULL, err);
			if (rc < 0)
				goto out;
			out->still_blocks += rc == 1;
			rc = 0;
		}
	}
out:
	free(paths);
	free(l.v);
	wu_bset_free(l.seen);
	return rc;
}
