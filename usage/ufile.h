/*
 * ufile.h: exclusive creation of the files usage and export write (see
 * ufile.c): a random temp name beside the target, O_CREAT|O_EXCL|O_NOFOLLOW,
 * mode 0666 & ~umask, fsync + rename on commit. Until then an exit hook
 * (jo_cancel_atexit) removes the temp file if the process is stopped at once
 * by a second SIGINT. Errors JO_EIO, JO_ENOMEM, JO_EINVAL (no file name).
 */
#ifndef JO_USAGE_UFILE_H
#define JO_USAGE_UFILE_H

#include <stdio.h>

struct jo_err;

struct ufile {
	FILE *fp;       /* write here until ufile_commit() */
	int fd;
	char *path;     /* the target */
	char *tmp;      /* the temp file (NULL once renamed) */
	int hooked;     /* the exit hook that removes tmp is registered */
};

int ufile_create(struct ufile *f, const char *path, struct jo_err *err);
/* Flush, fsync, close and rename into place. Then ufile_abort() only frees. */
int ufile_commit(struct ufile *f, struct jo_err *err);
/* Close and remove the temp file unless committed; free. Accepts a zeroed f. */
void ufile_abort(struct ufile *f);

#endif
