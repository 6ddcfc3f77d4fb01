/* remote.c: readers for a dataset inside a JuiceFS volume or an object store. */
#include "lanceparse/lance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/object/object.h"

/* ---------------- JuiceFS volume ---------------- */

struct jfs_io {
	struct lance_io io;
	struct jo_vol *vol;
	char *root;
	/* The last resolved file: scans read one file many times in a row. */
	char *cur_rel;
	uint64_t cur_ino, cur_size;
};

static int jfs_path(struct jfs_io *j, const char *rel, char **out, struct jo_err *err)
{
	size_t n = strlen(j->root) + strlen(rel) + 2;

	if (!(*out = malloc(n)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	snprintf(*out, n, "%s/%s", strcmp(j->root, "/") == 0 ? "" : j->root, rel);
	return 0;
}

static int jfs_stat(struct jfs_io *j, const char *rel, struct jo_err *err)
{
	struct jo_attr attr;
	char *path, *dup;
	uint64_t ino;
	int rc;

	if (j->cur_rel && strcmp(j->cur_rel, rel) == 0)
		return 0;
	if ((rc = jfs_path(j, rel, &path, err)) < 0)
		return rc;
	rc = jo_meta_resolve(j->vol->meta, path, &ino, err);
	if (rc == 0)
		rc = jo_meta_getattr(j->vol->meta, ino, &attr, err);
	if (rc == 0 && attr.type != JO_TYPE_FILE)
		rc = jo_err_set(err, JO_EPROTO, "'%s' is not a regular file", path);
	if (rc < 0) {
		if (rc == JO_ENOTFOUND)
			jo_err_set(err, JO_ENOTFOUND, "'%s' does not exist in the volume", path);
		free(path);
		return rc;
	}
	free(path);
	if (!(dup = strdup(rel)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	free(j->cur_rel);
	j->cur_rel = dup;
	j->cur_ino = ino;
	j->cur_size = attr.length;
	return 0;
}

static int jfs_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err)
{
	struct jfs_io *j = (struct jfs_io *)io;
	int rc = jfs_stat(j, rel, err);

	if (rc == 0)
		*out = j->cur_size;
	return rc;
}

struct copy {
	uint8_t *buf;
	size_t len, done;
};

static int copy_cb(const void *data, size_t len, void *payload)
{
	struct copy *c = payload;

	if (len > c->len - c->done)
		len = c->len - c->done;
	memcpy(c->buf + c->done, data, len);
	c->done += len;
	return 0;
}

static int jfs_pread(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		     struct jo_err *err)
{
	struct jfs_io *j = (struct jfs_io *)io;
	struct copy c = { buf, len, 0 };
	int rc;

	if ((rc = jfs_stat(j, rel, err)) < 0)
		return rc;
	if (off > j->cur_size || len > j->cur_size - off)
		return jo_err_set(err, JO_EPROTO, "'%s' is truncated: wanted %zu bytes at offset %llu",
				  rel, len, (unsigned long long)off);
	if ((rc = jo_vol_read(j->vol, j->cur_ino, off, len, copy_cb, &c, err)) < 0)
		return jo_err_wrap(err, "read '%s'", rel);
	if (c.done != len)
		return jo_err_set(err, JO_EPROTO, "'%s': short read", rel);
	return 0;
}

struct jfs_list {
	lance_io_list_cb cb;
	void *payload;
};

static int jfs_list_cb(const char *name, size_t name_len, uint64_t ino, uint8_t type,
		       void *payload)
{
	struct jfs_list *l = payload;
	char buf[1024];

	(void)ino;
	(void)type;
	if (name_len >= sizeof(buf))
		return 0;
	memcpy(buf, name, name_len);
	buf[name_len] = '\0';
	if (strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
		return 0;
	return l->cb(buf, l->payload);
}

static int jfs_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		    struct jo_err *err)
{
	struct jfs_io *j = (struct jfs_io *)io;
	struct jfs_list l = { cb, payload };
	char *path;
	uint64_t ino;
	int rc;

	if ((rc = jfs_path(j, rel, &path, err)) < 0)
		return rc;
	rc = jo_meta_resolve(j->vol->meta, path, &ino, err);
	if (rc == JO_ENOTFOUND)
		jo_err_set(err, JO_ENOTFOUND, "'%s' does not exist in the volume", path);
	free(path);
	if (rc < 0)
		return rc;
	return jo_meta_readdir(j->vol->meta, ino, jfs_list_cb, &l, err);
}

static void jfs_close(struct lance_io *io)
{
	struct jfs_io *j = (struct jfs_io *)io;

	free(j->cur_rel);
	free(j->root);
	free(j);
}

static const struct lance_io_ops jfs_ops = {
	.size = jfs_size, .pread = jfs_pread, .list = jfs_list, .close = jfs_close,
};

int lance_io_open_jfs(struct lance_io **out, struct jo_vol *vol, const char *root,
		      struct jo_err *err)
{
	struct jfs_io *j;
	struct jo_attr attr;
	uint64_t ino;
	int rc;

	*out = NULL;
	if ((rc = jo_meta_resolve(vol->meta, root, &ino, err)) < 0 ||
	    (rc = jo_meta_getattr(vol->meta, ino, &attr, err)) < 0) {
		if (rc == JO_ENOTFOUND)
			jo_err_set(err, JO_ENOTFOUND, "dataset '%s' does not exist in the volume", root);
		return rc;
	}
	if (attr.type != JO_TYPE_DIR)
		return jo_err_set(err, JO_ENOTFOUND, "dataset '%s' is not a directory", root);
	if (!(j = calloc(1, sizeof(*j))) || !(j->root = lance_root_dup(root))) {
		free(j);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	j->io.ops = &jfs_ops;
	j->vol = vol;
	*out = &j->io;
	return 0;
}

/* ---------------- object store ---------------- */

struct obj_io {
	struct lance_io io;
	struct jo_obj *obj;
	char *prefix;        /* "" or "a/b/" */
	char *cur_rel;
	uint64_t cur_size;
};

static char *obj_key(struct obj_io *o, const char *rel)
{
	size_t n = strlen(o->prefix) + strlen(rel) + 1;
	char *k = malloc(n);

	if (k)
		snprintf(k, n, "%s%s", o->prefix, rel);
	return k;
}

static int obj_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err)
{
	struct obj_io *o = (struct obj_io *)io;
	struct jo_obj_info info;
	char *key, *dup;
	int rc;

	if (o->cur_rel && strcmp(o->cur_rel, rel) == 0) {
		*out = o->cur_size;
		return 0;
	}
	if (!(key = obj_key(o, rel)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_obj_head(o->obj, key, &info, err);
	free(key);
	if (rc < 0)
		return rc;
	if ((dup = strdup(rel))) {
		free(o->cur_rel);
		o->cur_rel = dup;
		o->cur_size = info.size;
	}
	*out = info.size;
	return 0;
}

static int obj_pread(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		     struct jo_err *err)
{
	struct obj_io *o = (struct obj_io *)io;
	struct jo_obj_get_opts go = { .offset = off, .length = (int64_t)len };
	struct copy c = { buf, len, 0 };
	char *key;
	int rc;

	if (len == 0)
		return 0;
	if (!(key = obj_key(o, rel)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_obj_get(o->obj, key, &go, copy_cb, &c, err);
	free(key);
	if (rc < 0)
		return rc;
	if (c.done != len)
		return jo_err_set(err, JO_EPROTO, "'%s' is truncated: wanted %zu bytes at offset %llu",
				  rel, len, (unsigned long long)off);
	return 0;
}

struct obj_list {
	size_t skip;
	lance_io_list_cb cb;
	void *payload;
	size_t seen;
};

static int obj_list_cb(const struct jo_obj_info *info, void *payload)
{
	struct obj_list *l = payload;
	const char *name;

	if (strlen(info->key) <= l->skip)
		return 0;
	name = info->key + l->skip;
	l->seen++;
	if (info->is_prefix || strchr(name, '/'))
		return 0;
	return l->cb(name, l->payload);
}

static int obj_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		    struct jo_err *err)
{
	struct obj_io *o = (struct obj_io *)io;
	size_t n = strlen(o->prefix) + strlen(rel) + 2;
	char *pfx = malloc(n);
	struct obj_list l = { 0, cb, payload, 0 };
	int rc;

	if (!pfx)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	snprintf(pfx, n, "%s%s/", o->prefix, rel);
	l.skip = strlen(pfx);
	rc = jo_obj_list(o->obj, pfx, NULL, "/", obj_list_cb, &l, err);
	free(pfx);
	if (rc == 0 && l.seen == 0)
		/* Object stores have no directories: an empty listing means "absent". */
		rc = jo_err_set(err, JO_ENOTFOUND, "no objects under '%s%s/'", o->prefix, rel);
	return rc;
}

static void obj_close(struct lance_io *io)
{
	struct obj_io *o = (struct obj_io *)io;

	free(o->cur_rel);
	free(o->prefix);
	free(o);
}

static const struct lance_io_ops obj_ops = {
	.size = obj_size, .pread = obj_pread, .list = obj_list, .close = obj_close,
};

int lance_io_open_obj(struct lance_io **out, struct jo_obj *obj, const char *prefix,
		      struct jo_err *err)
{
	struct obj_io *o;
	size_t n;

	*out = NULL;
	while (*prefix == '/')
		prefix++;
	n = strlen(prefix);
	while (n > 0 && prefix[n - 1] == '/')
		n--;
	if (!(o = calloc(1, sizeof(*o))) || !(o->prefix = malloc(n + 2))) {
		free(o);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	memcpy(o->prefix, prefix, n);
	if (n)
		o->prefix[n++] = '/';
	o->prefix[n] = '\0';
	o->io.ops = &obj_ops;
	o->io.concurrent_pread = true;   /* obj_pread keeps no state: jo_obj is thread-safe */
	o->obj = obj;
	*out = &o->io;
	return 0;
}
