/*
 * run.c: the state of a warmup run (common/warmup/run.h): opening the
 * volume's metadata and the mount, the range list mapped to block records
 * sorted under a memory budget (common/extsort) so that duplicates come out
 * adjacent, and the distinct blocks read back from the sort.
 */
#include "common/warmup/run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cancel.h"
#include "common/command.h"
#include "common/err.h"
#include "common/extsort.h"
#include "common/jfs/jfs.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/volume.h"
#include "common/warmup/warmup.h"

double wu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 1 when ino is new, 0 when seen, JO_ENOMEM */
static int ino_set_add(struct wu_state *st, uint64_t ino)
{
	size_t i;

	if ((st->ninos + 1) * 2 > st->icap) {
		size_t ncap = st->icap ? st->icap * 2 : 1024;
		uint64_t *nv = calloc(ncap, sizeof(*nv));

		if (!nv)
			return JO_ENOMEM;
		for (size_t k = 0; k < st->icap; k++) {
			if (!st->inos[k])
				continue;
			i = (size_t)(st->inos[k] * 0x9E3779B97F4A7C15ULL) & (ncap - 1);
			while (nv[i])
				i = (i + 1) & (ncap - 1);
			nv[i] = st->inos[k];
		}
		free(st->inos);
		st->inos = nv;
		st->icap = ncap;
	}
	i = (size_t)(ino * 0x9E3779B97F4A7C15ULL) & (st->icap - 1);
	while (st->inos[i]) {
		if (st->inos[i] == ino)
			return 0;
		i = (i + 1) & (st->icap - 1);
	}
	st->inos[i] = ino;
	st->ninos++;
	return 1;
}

static int path_list_add(struct wu_state *st, const char *vp)
{
	if (st->npaths == st->cappaths) {
		size_t nc = st->cappaths ? st->cappaths * 2 : 64;
		char **nv = realloc(st->paths, nc * sizeof(*nv));

		if (!nv)
			return JO_ENOMEM;
		st->paths = nv;
		st->cappaths = nc;
	}
	st->paths[st->npaths] = strdup(vp);
	if (!st->paths[st->npaths])
		return JO_ENOMEM;
	st->npaths++;
	return 0;
}

/*
 * The volume path of a range path: the mount directory is stripped from
 * absolute paths under it, --prefix is prepended to the rest, and "." and
 * empty components are dropped. *out malloc'd, starts with '/'.
 */
static int volume_path(const struct wu_state *st, const char *path, char **out)
{
	size_t ml = st->mount ? strlen(st->mount) : 0;
	const char *pre = st->prefix ? st->prefix : "";
	char *buf, *o;
	const char *parts[2];

	while (ml > 1 && st->mount[ml - 1] == '/')
		ml--;
	if (ml && path[0] == '/' && !strncmp(path, st->mount, ml) &&
	    (path[ml] == '/' || path[ml] == '\0')) {
		path += ml;
		pre = "";
	}
	buf = malloc(strlen(pre) + strlen(path) + 3);
	if (!buf)
		return JO_ENOMEM;
	o = buf;
	parts[0] = pre;
	parts[1] = path;
	for (int k = 0; k < 2; k++) {
		const char *p = parts[k];

		while (*p) {
			const char *e = strchr(p, '/');
			size_t n = e ? (size_t)(e - p) : strlen(p);

			if (n == 2 && p[0] == '.' && p[1] == '.') {
				free(buf);
				return JO_EINVAL;
			}
			if (n && !(n == 1 && p[0] == '.')) {
				*o++ = '/';
				memcpy(o, p, n);
				o += n;
			}
			p += n;
			if (*p == '/')
				p++;
		}
	}
	if (o == buf)
		*o++ = '/';
	*o = '\0';
	*out = buf;
	return 0;
}

static int on_block(const struct jo_warmup_block *b, void *payload)
{
	struct wu_state *st = payload;
	size_t pl = strlen(st->cur_path);
	uint8_t *r = st->rec_buf;
	uint8_t *heap = NULL;
	int rc;

	if (WU_REC_HEAD + pl > sizeof(st->rec_buf)) {
		heap = malloc(WU_REC_HEAD + pl);
		if (!heap)
			return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
		r = heap;
	}
	jo_put_be64(r, b->id);
	jo_put_be32(r + 8, b->indx);
	r[12] = (uint8_t)b->anchor_kind;
	jo_put_be64(r + 13, b->anchor);
	jo_put_be64(r + 21, b->alt);
	jo_put_be32(r + 29, b->bsize);
	memcpy(r + WU_REC_HEAD, st->cur_path, pl);
	rc = jo_xsort_add(st->xs, r, WU_REC_HEAD + pl, &st->err);
	free(heap);
	st->block_refs++;
	return rc;
}

int wu_set_file(struct wu_state *st, const char *path)
{
	char *vp = NULL;
	int rc;

	rc = volume_path(st, path, &vp);
	if (rc == JO_EINVAL)
		return jo_err_set(&st->err, rc, "path '%s' has a '..' component", path);
	if (rc)
		return jo_err_set(&st->err, rc, "out of memory");
	if (!st->cur_path || strcmp(vp, st->cur_path)) {
		struct jo_attr a;
		int added;

		free(st->cur_path);
		st->cur_path = vp;
		vp = NULL;
		rc = jo_meta_resolve(st->meta, st->cur_path, &st->cur_ino, &st->err);
		if (!rc)
			rc = jo_meta_getattr(st->meta, st->cur_ino, &a, &st->err);
		if (rc) {
			free(st->cur_path);
			st->cur_path = NULL;
			if (rc == JO_ENOTFOUND)
				jo_err_set(&st->err, JO_ENOTFOUND, "no such file '%s' in the volume", path);
			return rc;
		}
		if (a.type != JO_TYPE_FILE) {
			free(st->cur_path);
			st->cur_path = NULL;
			return jo_err_set(&st->err, JO_EINVAL, "'%s' is not a regular file", path);
		}
		st->cur_len = a.length;
		added = ino_set_add(st, st->cur_ino);
		if (added < 0 || (added > 0 && st->keep_paths && path_list_add(st, st->cur_path)))
			return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	}
	free(vp);
	return 0;
}

int wu_lookup(struct wu_state *st, const char *vpath, uint64_t *ino, uint64_t *len)
{
	struct jo_attr a;
	int rc = jo_meta_resolve(st->meta, vpath, ino, &st->err);

	if (!rc)
		rc = jo_meta_getattr(st->meta, *ino, &a, &st->err);
	if (rc == JO_ENOTFOUND)
		return jo_err_set(&st->err, rc, "no such file '%s' in the volume", vpath);
	if (!rc && a.type != JO_TYPE_FILE)
		return jo_err_set(&st->err, JO_EINVAL, "'%s' is not a regular file", vpath);
	if (!rc)
		*len = a.length;
	return rc;
}

static int on_range(const char *path, uint64_t off, uint64_t len, void *payload)
{
	struct wu_state *st = payload;
	int rc = wu_set_file(st, path);

	if (rc)
		return rc;
	st->ranges++;
	if (off < st->cur_len)
		st->req_bytes += len > st->cur_len - off ? st->cur_len - off : len;
	return jo_warmup_map_range(st->mapper, st->cur_ino, st->cur_len, off, len, on_block, st,
				   &st->err);
}

static int read_ranges(struct wu_state *st, FILE *in, const char *name)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	while ((n = getline(&line, &cap, in)) >= 0) {
		st->line++;
		if (jo_cancelled()) {
			rc = jo_err_set(&st->err, JO_ECANCELED, "interrupted");
			break;
		}
		jo_err_clear(&st->err);
		rc = jo_warmup_parse_line(line, (size_t)n, on_range, st, NULL, &st->err);
		if (rc) {
			jo_err_wrap(&st->err, "%s line %" PRIu64, name, st->line);
			break;
		}
	}
	/*
	 * SIGINT/SIGTERM while waiting for a line (a FIFO, a pipe, a terminal)
	 * makes read() fail with EINTR (the handlers do not restart calls):
	 * that is an interruption, not an I/O error.
	 */
	if (!rc && jo_cancelled())
		rc = jo_err_set(&st->err, JO_ECANCELED, "interrupted while reading '%s'", name);
	else if (!rc && ferror(in))
		rc = jo_err_set(&st->err, JO_EIO, "cannot read '%s': %s", name, strerror(errno));
	free(line);
	return rc;
}

char *wu_mount_path(const char *mp, const char *subdir, const char *vp)
{
	size_t sl = strlen(subdir);
	char *s;

	while (sl && subdir[sl - 1] == '/')
		sl--;
	if (sl) {
		const char *sd = subdir;
		size_t skip = 0;

		if (sd[0] == '/') {
			sd++;
			sl--;
		}
		if (strncmp(vp + 1, sd, sl) || (vp[1 + sl] != '/' && vp[1 + sl] != '\0'))
			return NULL;
		skip = 1 + sl;
		vp += skip;
	}
	s = malloc(strlen(mp) + strlen(vp) + 2);
	if (!s)
		return NULL;
	snprintf(s, strlen(mp) + strlen(vp) + 2, "%s%s", mp, vp);
	return s;
}

void wu_state_release(struct wu_state *st)
{
	jo_xsort_free(st->xs);
	st->xs = NULL;
	jo_warmup_mapper_free(st->mapper);
	st->mapper = NULL;
	free(st->cur_path);
	st->cur_path = NULL;
	free(st->inos);
	st->inos = NULL;
	for (size_t i = 0; i < st->npaths; i++)
		free(st->paths[i]);
	free(st->paths);
	st->paths = NULL;
	st->npaths = 0;
	free(st->prev);
	st->prev = NULL;
	if (st->in && st->in != stdin)
		fclose(st->in);
	st->in = NULL;
	free(st->mount_copy);
	st->mount_copy = NULL;
	st->mount = NULL;
	jo_format_release(&st->fmt);
	jo_meta_close(st->meta);
	st->meta = NULL;
}

/* Open the range list; a FIFO with no writer yet blocks here (SIGTERM ends the wait). */
static int open_ranges(struct wu_state *st, const char *ranges, FILE **out)
{
	if (!strcmp(ranges, "-")) {
		*out = stdin;
		return 0;
	}
	*out = fopen(ranges, "r");
	if (*out)
		return 0;
	if (errno == EINTR && jo_cancelled())
		return jo_err_set(&st->err, JO_ECANCELED, "interrupted while opening '%s'", ranges);
	return jo_err_set(&st->err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
			  "cannot open ranges file '%s': %s", ranges, strerror(errno));
}

int wu_open_meta(struct wu_state *st, const char *url)
{
	int rc = cmd_meta_open(url, &st->meta, &st->err);

	if (!rc)
		rc = jo_meta_load_format(st->meta, &st->fmt, &st->err);
	if (!rc && (st->fmt.block_size_kib <= 0 || st->fmt.block_size_kib > 65536))
		rc = jo_err_set(&st->err, JO_EPROTO, "format record has a bad BlockSize %d",
				st->fmt.block_size_kib);
	if (rc)
		return rc;
	st->block_size = (uint32_t)st->fmt.block_size_kib * 1024u;
	return jo_warmup_mapper_new(&st->mapper, st->meta, st->block_size, &st->err);
}

int wu_mount_attach(struct wu_state *st, const char *mount, bool reads,
		    struct jo_warmup_mount *mi)
{
	const struct jo_ctx *ctx = st->ctx;
	const char *uuid = st->fmt.uuid ? st->fmt.uuid : "";
	int rc = jo_warmup_mount_probe(mount, mi, &st->err);

	if (rc)
		return rc;
	if (strcmp(mi->uuid, uuid))
		return jo_err_set(&st->err, JO_EINVAL, "'%s' mounts volume '%s' (%s), not '%s' (%s)",
				  mount, mi->name, mi->uuid, st->fmt.name, uuid);
	if (reads && (!mi->cache_size || !mi->cache_full_block))
		return jo_err_set(&st->err, JO_EUNSUPPORTED, "the mount at '%s' keeps no full "
				  "blocks in a cache (%s): reading through it warms nothing", mount,
				  !mi->cache_size ? "--cache-size 0" : "--cache-partial-only");
	if (mi->block_size && mi->block_size != st->block_size)
		fprintf(stderr, "%s %s: warning: the mount says block size %u, the volume %u\n",
			ctx->prog, ctx->cmd, mi->block_size, st->block_size);
	/* a trailing '/' would double in joined paths */
	free(st->mount_copy);
	st->mount_copy = strdup(mount);
	if (!st->mount_copy)
		return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	for (size_t l = strlen(st->mount_copy); l > 1 && st->mount_copy[l - 1] == '/'; l--)
		st->mount_copy[l - 1] = '\0';
	st->mount = st->mount_copy;
	return 0;
}

int wu_map_ranges(struct wu_state *st, const char *ranges, uint64_t mem_limit)
{
	struct jo_xsort_opts xo = JO_XSORT_OPTS_INIT;
	int rc = open_ranges(st, ranges, &st->in);

	if (rc)
		return rc;
	xo.mem_limit = (size_t)mem_limit;
	rc = jo_xsort_new(&st->xs, &xo, &st->err);
	if (!rc)
		rc = read_ranges(st, st->in, st->in == stdin ? "<stdin>" : ranges);
	if (!rc)
		rc = jo_xsort_finish(st->xs, &st->err);
	return rc;
}

int wu_next_block(struct wu_state *st, struct jo_warmup_block *b, char **vpath)
{
	const void *rv;
	const uint8_t *r;
	size_t rl;
	int rc;

	/* The sorted records: the first of each (id, indx) run has the best anchor. */
	do {
		rc = jo_xsort_next(st->xs, &rv, &rl, &st->err);
		if (rc <= 0)
			return rc;
		r = rv;
	} while (st->prev && st->prevlen >= 12 && !memcmp(st->prev, r, 12));
	free(st->prev);
	st->prev = malloc(rl);
	if (!st->prev)
		return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	memcpy(st->prev, r, rl);
	st->prevlen = rl;
	memset(b, 0, sizeof(*b));
	b->id = jo_be64(r);
	b->indx = jo_be32(r + 8);
	b->anchor_kind = r[12];
	b->anchor = jo_be64(r + 13);
	b->alt = jo_be64(r + 21);
	b->bsize = jo_be32(r + 29);
	*vpath = strndup((const char *)r + WU_REC_HEAD, rl - WU_REC_HEAD);
	if (!*vpath)
		return jo_err_set(&st->err, JO_ENOMEM, "out of memory");
	return 1;
}
