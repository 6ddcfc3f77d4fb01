/*
 * The mount's control file (FillCache check/evict) and lookups of single
 * blocks in its disk cache directories. See cache.h.
 */
#include "common/warmup/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/mem.h"

#define CPROGRESS 0xFE /* 16 bytes: files, bytes */
#define CDATA 0xFF     /* 4 bytes length, then JSON */
#define MAX_REPLY (64u << 20)

void jo_warmup_ctl_reply_release(struct jo_warmup_ctl_reply *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nlocs; i++)
		free(r->locs[i]);
	free(r->locs);
	free(r->loc_bytes);
	memset(r, 0, sizeof(*r));
}

int jo_warmup_ctl_encode(int action, const char *const *paths, size_t n, unsigned threads,
			 uint8_t **out, size_t *outlen, struct jo_err *err)
{
	size_t plen = 0, body, total;
	uint8_t *m, *p;

	*out = NULL;
	if (n > JO_WARMUP_CTL_MAX_PATHS)
		return jo_err_set(err, JO_EINVAL, "%zu paths in one control message (at most %d)", n,
				  JO_WARMUP_CTL_MAX_PATHS);
	for (size_t i = 0; i < n; i++) {
		if (strchr(paths[i], '\n'))
			return jo_err_set(err, JO_EINVAL, "path with a newline cannot be sent to the mount");
		plen += strlen(paths[i]) + (i ? 1 : 0);
	}
	if (plen > UINT32_MAX - 64)
		return jo_err_set(err, JO_EINVAL, "control message too large");
	/* body: u32 len, paths joined by '\n', u16 threads, u8 background, u8 action */
	body = 4 + plen + 2 + 1 + 1;
	total = 8 + body;
	m = malloc(total);
	if (!m)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	jo_put_be32(m, JO_WARMUP_CTL_FILLCACHE);
	jo_put_be32(m + 4, (uint32_t)body);
	jo_put_be32(m + 8, (uint32_t)plen);
	p = m + 12;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(paths[i]);

		if (i)
			*p++ = '\n';
		memcpy(p, paths[i], l);
		p += l;
	}
	if (threads < 1)
		threads = 1;
	if (threads > 65535)
		threads = 65535;
	*p++ = (uint8_t)(threads >> 8);
	*p++ = (uint8_t)threads;
	*p++ = 0; /* not in the background: we want the answer */
	*p++ = (uint8_t)action;
	*out = m;
	*outlen = total;
	return 0;
}

static int parse_json(const uint8_t *data, size_t n, struct jo_warmup_ctl_reply *out,
		      struct jo_err *err)
{
	json_error_t je;
	json_t *o = json_loadb((const char *)data, n, 0, &je), *v, *locs;
	const char *k;

	if (!json_is_object(o)) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "the mount's answer is not a JSON object: %s",
				  o ? "not an object" : je.text);
	}
#define U64(name, field)                                                          \
	v = json_object_get(o, name);                                             \
	out->field = json_is_integer(v) && json_integer_value(v) > 0 ?           \
			     (uint64_t)json_integer_value(v) : 0
	U64("FileCount", files);
	U64("SliceCount", slices);
	U64("TotalBytes", total_bytes);
	U64("MissBytes", miss_bytes);
#undef U64
	locs = json_object_get(o, "Locations");
	if (json_is_object(locs) && json_object_size(locs)) {
		size_t cap = json_object_size(locs);

		out->locs = calloc(cap, sizeof(*out->locs));
		out->loc_bytes = calloc(cap, sizeof(*out->loc_bytes));
		if (!out->locs || !out->loc_bytes) {
			json_decref(o);
			jo_warmup_ctl_reply_release(out);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		json_object_foreach(locs, k, v) {
			if (out->nlocs == cap)
				break;
			out->locs[out->nlocs] = strdup(k);
			if (!out->locs[out->nlocs]) {
				json_decref(o);
				jo_warmup_ctl_reply_release(out);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
			out->loc_bytes[out->nlocs++] =
				json_is_integer(v) && json_integer_value(v) > 0 ?
					(uint64_t)json_integer_value(v) : 0;
		}
	}
	json_decref(o);
	return 0;
}

int jo_warmup_ctl_feed(struct jo_warmup_ctl_parser *p, const void *data, size_t n,
		       struct jo_warmup_ctl_reply *out, struct jo_err *err)
{
	struct jo_dynbuf *b = &p->buf;
	const uint8_t *q;
	size_t off = 0;

	if (n) {
		if (b->len + n > MAX_REPLY)
			return jo_err_set(err, JO_EPROTO, "the mount's answer is larger than %u bytes",
					  MAX_REPLY);
		if (jo_dynbuf_add(b, data, n))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	q = (const uint8_t *)b->p;
	while (off < b->len) {
		uint8_t t = q[off];

		if (t == CPROGRESS) {
			if (b->len - off < 17)
				break;
			out->progress_files = jo_be64(q + off + 1);
			out->progress_bytes = jo_be64(q + off + 9);
			off += 17;
		} else if (t == CDATA) {
			uint32_t sz;
			int rc;

			if (b->len - off < 5)
				break;
			sz = jo_be32(q + off + 1);
			if (sz > MAX_REPLY)
				return jo_err_set(err, JO_EPROTO, "the mount announces a %u-byte answer", sz);
			if (b->len - off - 5 < sz)
				break;
			rc = parse_json(q + off + 5, sz, out, err);
			jo_dynbuf_reset(b);
			return rc ? rc : 1;
		} else {
			/* a bare errno byte ends an answer that carries no data */
			int e = t;

			jo_dynbuf_reset(b);
			if (e == 0)
				return jo_err_set(err, JO_EPROTO, "the mount answered without data");
			return jo_err_set(err, JO_EIO, "the mount answered errno %d (%s)", e, strerror(e));
		}
	}
	if (off) {
		memmove(b->p, b->p + off, b->len - off);
		jo_dynbuf_setlen(b, b->len - off);
	}
	return 0;
}

void jo_warmup_ctl_parser_release(struct jo_warmup_ctl_parser *p)
{
	if (!p)
		return;
	jo_dynbuf_release(&p->buf);
	memset(p, 0, sizeof(*p));
}

static void nap_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	(void)nanosleep(&ts, NULL); /* a signal only shortens the nap */
}

int jo_warmup_ctl_call(const char *control_path, int action, const char *const *paths, size_t n,
		       unsigned threads, struct jo_warmup_ctl_reply *out, struct jo_err *err)
{
	struct jo_warmup_ctl_parser ps = { 0 };
	uint8_t *msg = NULL, buf[1 << 16];
	size_t mlen = 0, done = 0;
	long nap = 1;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	rc = jo_warmup_ctl_encode(action, paths, n, threads, &msg, &mlen, err);
	if (rc)
		return rc;
	fd = open(control_path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		free(msg);
		if (e == EINTR && jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "interrupted");
		return jo_err_set(err, e == ENOENT ? JO_ENOTFOUND : JO_EIO, "cannot open '%s': %s",
				  control_path, strerror(e));
	}
	/* the answer is read from the descriptor's offset after the message */
	while (done < mlen) {
		ssize_t w = write(fd, msg + done, mlen - done);

		if (w < 0 && errno == EINTR && !jo_cancelled())
			continue;
		if (w < 0) {
			rc = errno == EINTR ? jo_err_set(err, JO_ECANCELED, "interrupted") :
					      jo_err_set(err, JO_EIO, "write '%s': %s", control_path,
							 strerror(errno));
			goto out;
		}
		done += (size_t)w;
	}
	for (;;) {
		ssize_t r;

		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "interrupted");
			break;
		}
		r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = jo_err_set(err, JO_EIO, "read '%s': %s%s", control_path, strerror(errno),
					errno == EBADF ? " (the JuiceFS client was restarted?)" : "");
			break;
		}
		if (r == 0) {
			/* nothing yet: the mount is still working */
			nap_ms(nap);
			if (nap < 50)
				nap *= 2;
			continue;
		}
		nap = 1;
		rc = jo_warmup_ctl_feed(&ps, buf, (size_t)r, out, err);
		if (rc == 1) {
			rc = 0;
			break;
		}
		if (rc < 0)
			break;
	}
out:
	if (rc < 0)
		jo_warmup_ctl_reply_release(out);
	/* closing while the mount works cancels its request (vfs Flush) */
	close(fd);
	jo_warmup_ctl_parser_release(&ps);
	free(msg);
	if (rc < 0 && rc != JO_ECANCELED)
		jo_err_wrap(err, "the mount's control file");
	return rc;
}

/* ------------------------------------------------------------ cache dirs */

static int add_dir(struct jo_warmup_cachedirs *cd, const char *d, size_t cap)
{
	size_t l = strlen(d);
	char *s;
	struct stat st;

	while (l > 1 && d[l - 1] == '/')
		l--;
	if (!l || stat(d, &st) || !S_ISDIR(st.st_mode))
		return 0; /* the mount skips a missing directory too */
	if (cd->n == cap)
		return 0;
	s = malloc(l + 2);
	if (!s)
		return JO_ENOMEM;
	memcpy(s, d, l);
	s[l] = '/';
	s[l + 1] = '\0';
	for (size_t i = 0; i < cd->n; i++) {
		if (!strcmp(cd->dirs[i], s)) {
			free(s);
			return 0;
		}
	}
	cd->dirs[cd->n++] = s;
	return 0;
}

int jo_warmup_cachedirs_init(struct jo_warmup_cachedirs *out, const char *setting,
			     struct jo_err *err)
{
	char *copy, *save = NULL, *tok;
	size_t cap = 256;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!setting || !*setting || !strcmp(setting, "memory"))
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "the mount keeps its block cache in memory (--cache-dir memory): "
				  "single blocks cannot be looked up");
	out->dirs = calloc(cap, sizeof(*out->dirs));
	copy = strdup(setting);
	if (!out->dirs || !copy) {
		free(copy);
		jo_warmup_cachedirs_release(out);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (tok = strtok_r(copy, ":", &save); tok && !rc; tok = strtok_r(NULL, ":", &save)) {
		while (*tok == ' ')
			tok++;
		if (strpbrk(tok, "*?[")) {
			glob_t g;

			if (glob(tok, 0, NULL, &g) == 0) {
				for (size_t i = 0; i < g.gl_pathc && !rc; i++)
					rc = add_dir(out, g.gl_pathv[i], cap);
			}
			globfree(&g);
		} else {
			rc = add_dir(out, tok, cap);
		}
	}
	free(copy);
	if (rc) {
		jo_warmup_cachedirs_release(out);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!out->n) {
		jo_warmup_cachedirs_release(out);
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "no cache directory of the mount ('%s') exists on this host (the "
				  "mount then caches in memory): single blocks cannot be looked up",
				  setting);
	}
	return 0;
}

void jo_warmup_cachedirs_release(struct jo_warmup_cachedirs *cd)
{
	if (!cd)
		return;
	for (size_t i = 0; i < cd->n; i++)
		free(cd->dirs[i]);
	free(cd->dirs);
	memset(cd, 0, sizeof(*cd));
}

int jo_warmup_cache_has(const struct jo_warmup_cachedirs *cd, const char *key, const char **loc,
			struct jo_err *err)
{
	const char *rel = key;
	char path[4096];

	/* the cache stores keys without the volume name */
	if (strncmp(rel, "chunks/", 7)) {
		const char *s = strchr(rel, '/');

		if (!s || strncmp(s + 1, "chunks/", 7))
			return jo_err_set(err, JO_EINVAL, "'%s' is not a block key", key);
		rel = s + 1;
	}
	for (size_t i = 0; i < cd->n; i++) {
		struct stat st;
		int n = snprintf(path, sizeof(path), "%sraw/%s", cd->dirs[i], rel);

		if (n < 0 || (size_t)n >= sizeof(path))
			return jo_err_set(err, JO_EINVAL, "cache path too long");
		if (stat(path, &st) == 0) {
			if (!S_ISREG(st.st_mode))
				continue;
			if (loc)
				*loc = cd->dirs[i];
			return 1;
		}
		if (errno != ENOENT && errno != ENOTDIR)
			return jo_err_set(err, JO_EIO, "stat '%s': %s", path, strerror(errno));
	}
	return 0;
}
