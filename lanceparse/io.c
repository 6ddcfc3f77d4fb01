/* io.c: the reader interface and its local-directory backend. */
#include "lanceparse/lance.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"

struct local_io {
	struct lance_io io;
	char *root;
	/* One cached descriptor: scans read a file many times in a row. */
	char *cur_rel;
	int cur_fd;
};

static int local_path(struct local_io *l, const char *rel, char *buf, size_t cap,
		      struct jo_err *err)
{
	int n = snprintf(buf, cap, "%s/%s", l->root, rel);

	if (n < 0 || (size_t)n >= cap)
		return jo_err_set(err, JO_EINVAL, "path too long: '%s'", rel);
	return 0;
}

static int local_fd(struct local_io *l, const char *rel, struct jo_err *err)
{
	char path[PATH_MAX];
	int fd, rc;

	if (l->cur_rel && strcmp(l->cur_rel, rel) == 0)
		return l->cur_fd;
	if ((rc = local_path(l, rel, path, sizeof(path), err)) < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return jo_err_set(err, e == ENOENT || e == ENOTDIR ? JO_ENOTFOUND : JO_EIO,
				  "cannot open '%s': %s", path, strerror(e));
	}
	char *dup = strdup(rel);
	if (!dup) {
		close(fd);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (l->cur_rel)
		close(l->cur_fd);
	free(l->cur_rel);
	l->cur_rel = dup;
	l->cur_fd = fd;
	return fd;
}

static int local_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err)
{
	struct local_io *l = (struct local_io *)io;
	struct stat st;
	int fd = local_fd(l, rel, err);

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return jo_err_set(err, JO_EIO, "cannot stat '%s': %s", rel, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return jo_err_set(err, JO_EPROTO, "'%s' is not a regular file", rel);
	*out = (uint64_t)st.st_size;
	return 0;
}

static int local_pread(struct lance_io *io, const char *rel, void *buf, size_t len,
		       uint64_t off, struct jo_err *err)
{
	struct local_io *l = (struct local_io *)io;
	int fd = local_fd(l, rel, err);
	size_t done = 0;

	if (fd < 0)
		return fd;
	while (done < len) {
		ssize_t r = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return jo_err_set(err, JO_EIO, "cannot read '%s': %s", rel, strerror(errno));
		}
		if (r == 0)
			return jo_err_set(err, JO_EPROTO,
					  "'%s' is truncated: wanted %zu bytes at offset %llu", rel,
					  len, (unsigned long long)off);
		done += (size_t)r;
	}
	return 0;
}

static int local_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		      struct jo_err *err)
{
	struct local_io *l = (struct local_io *)io;
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if ((rc = local_path(l, rel, path, sizeof(path), err)) < 0)
		return rc;
	d = opendir(path);
	if (!d) {
		int e = errno;
		return jo_err_set(err, e == ENOENT || e == ENOTDIR ? JO_ENOTFOUND : JO_EIO,
				  "cannot list '%s': %s", path, strerror(e));
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if ((rc = cb(de->d_name, payload)) != 0)
			break;
	}
	closedir(d);
	return rc;
}

static void local_close(struct lance_io *io)
{
	struct local_io *l = (struct local_io *)io;

	if (l->cur_rel)
		close(l->cur_fd);
	free(l->cur_rel);
	free(l->root);
	free(l);
}

static const struct lance_io_ops local_ops = {
	.size = local_size, .pread = local_pread, .list = local_list, .close = local_close,
};

char *lance_root_dup(const char *dir)
{
	char *r = strdup(dir);
	size_t n = r ? strlen(r) : 0;

	while (n > 1 && r[n - 1] == '/')
		r[--n] = '\0';
	return r;
}

int lance_io_open_local(struct lance_io **out, const char *dir, struct jo_err *err)
{
	struct local_io *l;
	struct stat st;

	*out = NULL;
	if (stat(dir, &st) < 0)
		return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
				  "dataset '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return jo_err_set(err, JO_ENOTFOUND, "dataset '%s' is not a directory", dir);
	if (!(l = calloc(1, sizeof(*l))) || !(l->root = lance_root_dup(dir))) {
		free(l);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	l->io.ops = &local_ops;
	l->cur_fd = -1;
	*out = &l->io;
	return 0;
}

int lance_io_open(struct lance_io **out, const char *location, struct jo_err *err)
{
	*out = NULL;
	if (strncmp(location, "s3://", 5) == 0)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "'%s': s3:// datasets are not yet supported (use a local path)",
				  location);
	if (strstr(location, "://"))
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "'%s': datasets inside a JuiceFS volume (META-URL:/path) are not "
				  "yet supported (use a local path)", location);
	return lance_io_open_local(out, location, err);
}

void lance_io_close(struct lance_io *io)
{
	if (io)
		io->ops->close(io);
}

int lance_io_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err)
{
	return io->ops->size(io, rel, out, err);
}

int lance_io_pread(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		   struct jo_err *err)
{
	io->reads++;
	io->bytes += len;
	return io->ops->pread(io, rel, buf, len, off, err);
}

int lance_io_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		  struct jo_err *err)
{
	return io->ops->list(io, rel, cb, payload, err);
}
