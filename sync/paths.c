/*
 * paths.c: where a side really is, whether two sides overlap, and which
 * keys a local directory can hold one-to-one.
 *
 * Overlap (rclone refuses it too): SRC and DST may not be the same tree or
 * one inside the other, whatever filters are given. A local side is taken
 * at its real path (symlinks, "..", "." and repeated or trailing slashes
 * resolved; a part that does not exist yet is resolved as far as it does,
 * the rest lexically). An s3 side is its endpoint (scheme and host
 * lower-cased, a default port dropped), bucket and prefix: a prefix is a
 * directory (s3://b/p syncs the keys under "p/"), so "p/" and "p/q/"
 * overlap and "p/" and "pq/" do not. Two spellings of one server
 * (127.0.0.1 and localhost, a DNS alias) cannot be told apart.
 *
 * Keys in a local directory: a key maps to the path DIR/KEY. Keys whose
 * path a lookup would fold into another one ("a//b", "./a", "/a", "a/."),
 * that climb out ("../a"), a non-empty object whose key ends in '/', and
 * names the directory store keeps for its own temp files (".jfs.*.tmp.*",
 * never listed) are refused one by one.
 */
#include "sync/sync.h"

#include "common/err.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Append the components of rel to the absolute, canonical path in buf, lexically. */
static int append_lexical(char *buf, size_t cap, const char *rel)
{
	size_t bl = strlen(buf);
	const char *p = rel;

	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* "//" and "." name the same directory */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			/* buf is canonical: its lexical parent is its real parent */
			while (bl > 1 && buf[bl - 1] != '/')
				bl--;
			if (bl > 1)
				bl--;
			buf[bl] = '\0';
		} else {
			if (bl + (bl > 1) + n + 1 > cap)
				return JO_EINVAL;
			if (bl > 1)
				buf[bl++] = '/';
			memcpy(buf + bl, p, n);
			bl += n;
			buf[bl] = '\0';
		}
		p += n;
		if (*p == '/')
			p++;
	}
	return 0;
}

int jo_sync_local_resolve(const char *path, char **out, struct jo_err *err)
{
	size_t cap = PATH_MAX * 2 + strlen(path) + 2;
	char *full = malloc(cap), *res = malloc(cap);
	int rc = 0;

	*out = NULL;
	if (!full || !res) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (path[0] == '/') {
		snprintf(full, cap, "%s", path);
	} else {
		if (!getcwd(full, PATH_MAX)) {
			rc = jo_err_set(err, JO_EIO, "cannot resolve \"%s\": the working directory: %s",
					path, strerror(errno));
			goto out;
		}
		size_t fl = strlen(full);

		snprintf(full + fl, cap - fl, "/%s", path);
	}
	/* The longest leading part that exists, resolved; the rest lexically. */
	size_t cut = strlen(full);

	for (;;) {
		char save = full[cut];
		char *r;

		full[cut] = '\0';
		r = realpath(cut ? full : "/", NULL);
		full[cut] = save;
		if (r) {
			snprintf(res, cap, "%s", r);
			free(r);
			if (append_lexical(res, cap, full + cut)) {
				rc = jo_err_set(err, JO_EINVAL, "path \"%s\" is too long", path);
				goto out;
			}
			break;
		}
		if (errno == ENOMEM) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
		if (cut == 0) {
			rc = jo_err_set(err, JO_EIO, "cannot resolve \"%s\": %s", path, strerror(errno));
			goto out;
		}
		/* drop the last component (and the slashes before it) */
		while (cut > 0 && full[cut - 1] == '/')
			cut--;
		while (cut > 0 && full[cut - 1] != '/')
			cut--;
		while (cut > 1 && full[cut - 1] == '/')
			cut--;
		if (cut == 1)
			cut = 0;
	}
	*out = res;
	res = NULL;
out:
	free(full);
	free(res);
	return rc;
}

/* a and b are "" or end in '/': one inside the other (or equal). */
static bool dir_within(const char *a, const char *b)
{
	size_t al = strlen(a), bl = strlen(b);

	return al <= bl ? !strncmp(a, b, al) : !strncmp(a, b, bl);
}

int jo_sync_sides_overlap(const struct jo_objurl *src, const struct jo_objurl *dst,
			  char *why, size_t n, struct jo_err *err)
{
	int rc = 0;

	if (src->local != dst->local)
		return 0;
	if (!src->local) {
		char a[512], b[512];

		jo_objurl_norm_endpoint(src->endpoint, a, sizeof(a));
		jo_objurl_norm_endpoint(dst->endpoint, b, sizeof(b));
		if (strcmp(a, b) || strcmp(src->bucket, dst->bucket) ||
		    !dir_within(src->prefix, dst->prefix))
			return 0;
		snprintf(why, n, "bucket %s at %s, prefixes \"%s\" and \"%s\"", src->bucket, a,
			 src->prefix, dst->prefix);
		return 1;
	}
	char *ra = NULL, *rb = NULL;

	rc = jo_sync_local_resolve(src->bucket, &ra, err);
	if (!rc)
		rc = jo_sync_local_resolve(dst->bucket, &rb, err);
	if (!rc) {
		size_t al = strlen(ra), bl = strlen(rb), m = al < bl ? al : bl;
		const char *longer = al < bl ? rb : ra;

		/* "/" holds everything; else equal, or the longer goes on with a '/' */
		if (!strncmp(ra, rb, m) && (m == 1 || longer[m] == '\0' || longer[m] == '/')) {
			snprintf(why, n, "%s and %s", ra, rb);
			rc = 1;
		}
	}
	free(ra);
	free(rb);
	return rc;
}

const char *jo_sync_local_key_why(const char *rel, uint64_t size)
{
	size_t rl = strlen(rel);
	const char *p = rel;

	if (rl == 0)
		return size ? "a non-empty object named like the directory itself" : NULL;
	if (rel[0] == '/')
		return "starts with '/'";
	if (rel[rl - 1] == '/' && size)
		return "a non-empty object whose key ends in '/'";
	while (*p) {
		const char *e = strchr(p, '/');
		size_t k = e ? (size_t)(e - p) : strlen(p);

		if (k == 0 && e)
			return "an empty path segment ('//')";
		if (k == 1 && p[0] == '.')
			return "a '.' path segment";
		if (k == 2 && p[0] == '.' && p[1] == '.')
			return "a '..' path segment";
		if (k > 5 && !strncmp(p, ".jfs.", 5)) {
			/* ".jfs.*.tmp.*": the directory store's own temp files, never listed */
			for (const char *t = p + 5; t + 5 <= p + k; t++)
				if (!strncmp(t, ".tmp.", 5))
					return "a name kept for temp files ('.jfs.*.tmp.*')";
		}
		if (!e)
			break;
		p = e + 1;
	}
	return NULL;
}
