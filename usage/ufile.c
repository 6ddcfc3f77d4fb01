/*
 * ufile.c: how usage and export create every file they write (the HTML
 * page, the Parquet files, the markers): under a random name beside the
 * target, with O_CREAT|O_EXCL|O_NOFOLLOW and mode 0666 less the umask, then
 * fsync and rename into place, so nothing is ever written through a name
 * another user planted and a reader never sees half a file. The one place
 * to switch to common/file.h (jo_file_create/commit/abort) once it lands.
 */
#include "usage/ufile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/err.h"

/* The exit hook: a temp file that was never renamed goes. */
static void remove_tmp(void *payload)
{
	struct ufile *f = payload;

	if (f->tmp)
		(void)unlink(f->tmp); /* best effort at exit: nothing to report to */
}

int ufile_create(struct ufile *f, const char *path, struct jo_err *err)
{
	const char *slash = strrchr(path, '/');
	size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
	const char *base = path + dlen;
	int fd = -1;

	memset(f, 0, sizeof(*f));
	if (!*base)
		return jo_err_set(err, JO_EINVAL, "%s: not a file name", path);
	f->path = strdup(path);
	f->tmp = malloc(strlen(path) + 32);
	if (!f->path || !f->tmp) {
		ufile_abort(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (int tries = 0; fd < 0 && tries < 100; tries++) {
		unsigned char r[6];

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			ufile_abort(f);
			return jo_err_set(err, JO_EIO, "getrandom: %s", strerror(errno));
		}
		sprintf(f->tmp, "%.*s.%s.%02x%02x%02x%02x%02x%02x", (int)dlen, path, base, r[0], r[1],
			r[2], r[3], r[4], r[5]);
		fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST) {
			int e = errno;

			free(f->tmp);
			f->tmp = NULL;
			ufile_abort(f);
			return jo_err_set(err, JO_EIO, "cannot create a file beside %s: %s", path,
					  strerror(e));
		}
	}
	if (fd < 0) {
		free(f->tmp);
		f->tmp = NULL;
		ufile_abort(f);
		return jo_err_set(err, JO_EIO, "cannot create a file beside %s", path);
	}
	f->fd = fd;
	f->hooked = jo_cancel_atexit(remove_tmp, f) == 0;
	f->fp = fdopen(fd, "w");
	if (!f->fp) {
		ufile_abort(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

int ufile_commit(struct ufile *f, struct jo_err *err)
{
	int rc = 0;

	if (fflush(f->fp) != 0 || ferror(f->fp) || fsync(f->fd) != 0)
		rc = jo_err_set(err, JO_EIO, "writing %s: %s", f->path, strerror(errno));
	if (fclose(f->fp) != 0 && rc == 0)
		rc = jo_err_set(err, JO_EIO, "writing %s: %s", f->path, strerror(errno));
	f->fp = NULL;
	f->fd = -1;
	if (rc == 0 && rename(f->tmp, f->path) != 0)
		rc = jo_err_set(err, JO_EIO, "rename to %s: %s", f->path, strerror(errno));
	if (rc == 0) {
		free(f->tmp);
		f->tmp = NULL;
	}
	return rc;
}

void ufile_abort(struct ufile *f)
{
	if (!f)
		return;
	if (f->hooked)
		jo_cancel_atexit_remove(remove_tmp, f);
	if (f->fp)
		fclose(f->fp);
	else if (f->fd > 0)
		close(f->fd);
	if (f->tmp)
		(void)unlink(f->tmp); /* our own temp file: nothing to report if it is gone */
	free(f->tmp);
	free(f->path);
	memset(f, 0, sizeof(*f));
}
