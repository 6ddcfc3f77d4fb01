/*
 * work.c: the scratch location of a cluster leak check (--work), where the
 * scan parts' reference runs and the ranges' report lines are kept for
 * every worker to read: a directory every host reaches (a shared file
 * system), or an object-store prefix, s3://[PROFILE@]BUCKET/PREFIX
 * (common/objurl.h; credentials from flags of no kind here: a profile,
 * JFSOPS_WORK_ACCESS_KEY / _SECRET_KEY, or the AWS_ variables).
 *
 * Names below the location are relative paths "NS/PLANDIR/FILE" whose
 * components the caller has checked (one plain component each).
 *
 * Writing: a file is written whole on local disk first (common/file.h):
 * in a directory location beside its target, created exclusively (0600),
 * and renamed into place; for a bucket as a scratch file without a name in
 * the local temp directory (nothing left there, even by a killed worker),
 * then uploaded (one PUT up to 16 MiB, create-only; a multipart upload
 * above, under a name no other attempt uses). A file is visible under its
 * name only whole.
 *
 * Reading: a file's size (checked against the coordinator's record by the
 * caller) and byte ranges of it (pread, or ranged GETs).
 */
#include "leakcheck/leak.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "common/file.h"
#include "common/meta/meta.h"
#include "common/object/object.h"
#include "common/objurl.h"
#include "common/jfs/jfs.h"

#define PUT_ONE (16u << 20)     /* one PUT up to this; multipart parts of this size */

struct leak_work {
	bool local;
	char root[PATH_MAX];    /* local: the directory's real path */
	struct jo_objurl url;   /* s3 */
	struct jo_obj *obj;
	const char *tmp;        /* s3: where files are written before the upload */
	char desc[PATH_MAX + 700];
};

struct leak_work_rd {
	struct leak_work *w;
	int fd;                 /* local */
	char key[PATH_MAX + 700];
	uint64_t size;
	char etag[72];          /* s3: every range read from the object HEAD saw */
};

static int list_none(const struct jo_obj_info *info, void *p)
{
	(void)info;
	(void)p;
	return 0;
}

int leak_work_open(struct leak_work **out, const char *where, const char *config_path,
		   const char *tmp, struct jo_err *err)
{
	struct leak_work *w = calloc(1, sizeof(*w));
	int rc = 0;

	*out = NULL;
	if (!w)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (strstr(where, "://") && strncmp(where, "s3://", 5) != 0) {
		free(w);
		return jo_err_set(err, JO_EINVAL, "--work \"%s\": a directory every worker reaches, "
				  "or s3://[PROFILE@]BUCKET/PREFIX", where);
	}
	if (strncmp(where, "s3://", 5) != 0) {
		struct stat st;

		w->local = true;
		if (!realpath(where, w->root))
			rc = jo_err_set(err, JO_EINVAL, "--work %s: %s", where, strerror(errno));
		else if (stat(w->root, &st) != 0 || !S_ISDIR(st.st_mode))
			rc = jo_err_set(err, JO_EINVAL, "--work %s is not a directory", where);
		else
			snprintf(w->desc, sizeof(w->desc), "%s", w->root);
		goto out;
	}
	rc = jo_objurl_parse(&w->url, where, "work", NULL, config_path, err);
	if (!rc && !w->url.prefix[0])
		rc = jo_err_set(err, JO_EINVAL, "--work %s: give a prefix (s3://BUCKET/PREFIX): the "
				"job's files are kept under it", where);
	if (!rc)
		rc = jo_objurl_open(&w->url, 8, -1, &w->obj, err);
	if (!rc) {
		char ep[512];

		jo_objurl_norm_endpoint(w->url.endpoint, ep, sizeof(ep));
		snprintf(w->desc, sizeof(w->desc), "s3:%s/%s/%s", ep, w->url.bucket, w->url.prefix);
		w->tmp = tmp && *tmp ? tmp : getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR")
										       : "/tmp";
	}
	/* reachable, with these credentials: one short listing */
	if (!rc)
		rc = jo_obj_list_page(w->obj, w->url.prefix, NULL, "/", 1, list_none, NULL, err);
	if (rc && rc != JO_ENOMEM && w->obj)
		jo_err_wrap(err, "--work %s", w->url.desc);
out:
	if (rc) {
		leak_work_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

void leak_work_close(struct leak_work *w)
{
	if (!w)
		return;
	jo_obj_close(w->obj);
	jo_objurl_free(&w->url);
	free(w);
}

const char *leak_work_desc(const struct leak_work *w)
{
	return w->desc;
}

bool leak_work_local(const struct leak_work *w)
{
	return w->local;
}

/* a and b are "http(s)://host/bucket" descriptions: the same bucket. */
static bool same_bucket(const char *a, const char *b)
{
	char na[700], nb[700];

	jo_objurl_norm_endpoint(a, na, sizeof(na));
	jo_objurl_norm_endpoint(b, nb, sizeof(nb));
	return strcmp(na, nb) == 0;
}

int leak_work_check(const struct leak_work *w, const struct jo_vol *v, struct jo_err *err)
{
	const struct jo_format *f = &v->fmt;
	char vol[PATH_MAX + 300];

	if (w->local) {
		char br[PATH_MAX];
		size_t l;

		if (strcmp(f->storage, "file") != 0 || !f->bucket || !realpath(f->bucket, br))
			return 0;
		snprintf(vol, sizeof(vol), "%s/%s", br, f->name);
		l = strlen(vol);
		if (!strncmp(w->root, vol, l) && (w->root[l] == '/' || w->root[l] == '\0'))
			return jo_err_set(err, JO_EINVAL, "--work %s is inside the volume's objects "
					  "(%s): a run there would be listed as foreign, or deleted",
					  w->root, vol);
		return 0;
	}
	/* the same bucket as one of the volume's: the work prefix must be outside NAME/ */
	char mine[1400];
	size_t l = strlen(f->name);

	snprintf(mine, sizeof(mine), "%s/%s", w->url.endpoint, w->url.bucket);
	for (int i = 0; jo_obj_describe_bucket(v->obj, i); i++) {
		const char *b = jo_obj_describe_bucket(v->obj, i);

		if (strncmp(b, "http://", 7) && strncmp(b, "https://", 8))
			continue;
		if (!same_bucket(b, mine))
			continue;
		if (!strncmp(w->url.prefix, f->name, l) && w->url.prefix[l] == '/')
			return jo_err_set(err, JO_EINVAL, "--work %s is inside the volume's objects "
					  "(%s/%s/): a run there would be listed as foreign, or "
					  "deleted", w->desc, b, f->name);
	}
	return 0;
}

/* dst := the local path or the key of rel. */
static int full_name(const struct leak_work *w, const char *rel, char *dst, size_t cap,
		     struct jo_err *err)
{
	int n = w->local ? snprintf(dst, cap, "%s/%s", w->root, rel)
			 : snprintf(dst, cap, "%s%s", w->url.prefix, rel);

	if (n < 0 || (size_t)n >= cap)
		return jo_err_set(err, JO_EINVAL, "--work: the name %s is too long", rel);
	return 0;
}

int leak_work_mkdir(struct leak_work *w, const char *rel, bool exist_ok, struct jo_err *err)
{
	char path[PATH_MAX + 700];
	int rc;

	if (!w->local)
		return 0;  /* keys need no directory */
	rc = full_name(w, rel, path, sizeof(path), err);
	if (rc)
		return rc;
	if (mkdir(path, 0700) != 0 && !(exist_ok && errno == EEXIST))
		return jo_err_set(err, JO_EIO, "mkdir %s: %s", path, strerror(errno));
	return 0;
}

int leak_work_create(struct leak_work *w, const char *rel, unsigned flags, struct jo_file **out,
		     struct jo_err *err)
{
	char path[PATH_MAX + 700];
	int rc;

	if (!w->local)
		return jo_file_scratch(out, w->tmp, flags, err);
	rc = full_name(w, rel, path, sizeof(path), err);
	return rc ? rc : jo_file_create(out, path, JO_FILE_PRIVATE, flags, err);
}

/* Up to len bytes of fd from off into buf (*got short only at the end): 0, or -1 with errno. */
static int pread_upto(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + *got, len - *got, (off_t)(off + *got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

/* Bytes [off, off + len) of fd into buf. */
static int read_at(int fd, uint8_t *buf, size_t len, uint64_t off, struct jo_err *err)
{
	size_t got;

	if (pread_upto(fd, buf, len, off, &got) != 0)
		return jo_err_set(err, JO_EIO, "read the file to upload: %s", strerror(errno));
	if (got != len)
		return jo_err_set(err, JO_EIO, "read the file to upload: it is shorter than it was");
	return 0;
}

/* Upload the local file fd (size bytes) as key. */
static int upload(struct leak_work *w, int fd, uint64_t size, const char *key, struct jo_err *err)
{
	struct jo_obj_put_opts po = { .create_only = true };
	struct jo_obj_part *parts = NULL;
	char *upload_id = NULL;
	uint8_t *buf = malloc(size < PUT_ONE ? (size_t)size + 1 : PUT_ONE);
	size_t np = (size_t)((size + PUT_ONE - 1) / PUT_ONE);
	int rc;

	if (!buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (size <= PUT_ONE) {
		rc = read_at(fd, buf, (size_t)size, 0, err);
		if (!rc)
			rc = jo_obj_put(w->obj, key, buf, (size_t)size, &po, err);
		free(buf);
		return rc;
	}
	if (np > 10000) {
		free(buf);
		return jo_err_set(err, JO_EINVAL, "%s: %llu bytes, more than a multipart upload of "
				  "%u MiB parts holds", key, (unsigned long long)size, PUT_ONE >> 20);
	}
	parts = calloc(np, sizeof(*parts));
	rc = parts ? jo_obj_mpu_create(w->obj, key, NULL, &upload_id, err)
		   : jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < np; i++) {
		uint64_t off = (uint64_t)i * PUT_ONE;
		size_t len = size - off < PUT_ONE ? (size_t)(size - off) : PUT_ONE;

		parts[i].number = (int)i + 1;
		rc = read_at(fd, buf, len, off, err);
		if (!rc)
			rc = jo_obj_mpu_put_part(w->obj, key, upload_id, (int)i + 1, buf, len,
						 parts[i].etag, err);
	}
	if (!rc)
		rc = jo_obj_mpu_complete(w->obj, key, upload_id, parts, np, err);
	if (rc && upload_id) {
		struct jo_err e = { 0 };

		(void)jo_obj_mpu_abort(w->obj, key, upload_id, &e);
	}
	free(upload_id);
	free(parts);
	free(buf);
	return rc;
}

int leak_work_commit(struct leak_work *w, const char *rel, struct jo_file *f, struct jo_err *err)
{
	char key[PATH_MAX + 700];
	struct stat st;
	int rc;

	if (w->local)
		return jo_file_commit(f, err);
	if (f->fp && (fflush(f->fp) != 0 || ferror(f->fp)))
		return jo_err_set(err, JO_EIO, "write %s: %s", rel, strerror(errno));
	rc = full_name(w, rel, key, sizeof(key), err);
	if (rc)
		return rc;
	if (fstat(f->fd, &st) != 0)
		return jo_err_set(err, JO_EIO, "stat the file to upload: %s", strerror(errno));
	rc = upload(w, f->fd, (uint64_t)st.st_size, key, err);
	if (rc)
		jo_err_wrap(err, "--work %s", w->desc);
	return rc;
	/* the local file goes with the caller's jo_file_abort() */
}

int leak_work_ropen(struct leak_work *w, const char *rel, struct leak_work_rd **out,
		    struct jo_err *err)
{
	struct leak_work_rd *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	r->w = w;
	r->fd = -1;
	rc = full_name(w, rel, r->key, sizeof(r->key), err);
	if (!rc && w->local) {
		struct stat st;

		r->fd = open(r->key, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (r->fd < 0)
			rc = jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO, "%s: %s", r->key,
					strerror(errno));
		else if (fstat(r->fd, &st) != 0 || !S_ISREG(st.st_mode))
			rc = jo_err_set(err, JO_EPROTO, "%s is not a regular file", r->key);
		else
			r->size = (uint64_t)st.st_size;
	} else if (!rc) {
		struct jo_obj_info info = { 0 };

		rc = jo_obj_head(w->obj, r->key, &info, err);
		if (rc)
			jo_err_wrap(err, "--work %s", w->desc);
		r->size = info.size;
		memcpy(r->etag, info.etag, sizeof(r->etag));
	}
	if (rc) {
		leak_work_rclose(r);
		return rc;
	}
	*out = r;
	return 0;
}

uint64_t leak_work_rsize(const struct leak_work_rd *r)
{
	return r->size;
}

const char *leak_work_rname(const struct leak_work_rd *r)
{
	return r->key;
}

size_t leak_work_rchunk(const struct leak_work_rd *r)
{
	return r->fd >= 0 ? (size_t)1 << 17 : (size_t)4 << 20;
}

struct into {
	uint8_t *buf;
	size_t cap, got;
};

static int into_cb(const void *data, size_t len, void *p)
{
	struct into *in = p;

	if (len > in->cap - in->got)
		return JO_EPROTO;
	memcpy(in->buf + in->got, data, len);
	in->got += len;
	return 0;
}

int leak_work_pread(struct leak_work_rd *r, void *buf, size_t len, uint64_t off, size_t *got,
		    struct jo_err *err)
{
	*got = 0;
	if (off >= r->size || !len)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);
	if (r->fd >= 0)
		return pread_upto(r->fd, buf, len, off, got) != 0
			       ? jo_err_set(err, JO_EIO, "read %s: %s", r->key, strerror(errno)) : 0;
	struct jo_obj_get_opts go = { .offset = off, .length = (int64_t)len,
				      .if_match = r->etag[0] ? r->etag : NULL };
	struct into in = { buf, len, 0 };
	int rc = jo_obj_get(r->w->obj, r->key, &go, into_cb, &in, err);

	if (rc == JO_EPROTO && in.got == len && !err->msg[0])
		rc = jo_err_set(err, JO_EPROTO, "%s: the store sent more than the range asked",
				r->key);
	else if (rc)
		jo_err_wrap(err, "--work %s", r->w->desc);
	*got = in.got;
	return rc;
}

void leak_work_rclose(struct leak_work_rd *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}
