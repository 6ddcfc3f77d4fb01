/*
 * file.c: exclusive temp files renamed into place, and checked append
 * opens. See file.h.
 */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE */
#include "common/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/strfree.h"

#define TEMP_TRIES 100
#define TEMP_RAND 6 /* as mkstemp's XXXXXX */

static bool is_private(unsigned mode)
{
	return (mode & 077) == 0;
}

static const char *kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	if (S_ISLNK(m))
		return "a symbolic link";
	return "not a regular file";
}

/* The one rule for a file jfsops writes into without creating it. */
static int check_existing(const struct stat *st, const char *path, struct jo_err *err)
{
	uid_t me = geteuid();

	if (S_ISLNK(st->st_mode))
		return jo_err_set(err, JO_EIO, "refusing '%s': it is a symbolic link (never "
				  "written through)", path);
	if (!S_ISREG(st->st_mode))
		return jo_err_set(err, JO_EIO, "refusing '%s': it is %s, not a regular file", path,
				  kind(st->st_mode));
	if (st->st_uid != me && st->st_uid != 0)
		return jo_err_set(err, JO_EIO, "refusing '%s': it belongs to uid %ju (only a file "
				  "of uid %ju or root is written to)", path, (uintmax_t)st->st_uid,
				  (uintmax_t)me);
	if (st->st_nlink > 1)
		return jo_err_set(err, JO_EIO, "refusing '%s': it has %ju hard links (it may be "
				  "another file's name)", path, (uintmax_t)st->st_nlink);
	return 0;
}

/* A private file of ours with looser bits (an older jfsops made it) is tightened. */
static int tighten(int fd, const struct stat *st, const char *path, unsigned mode,
		   struct jo_err *err)
{
	if (!is_private(mode) || (st->st_mode & 07777) == mode || st->st_uid != geteuid())
		return 0;
	if (fchmod(fd, (mode_t)mode) != 0)
		return jo_err_set(err, JO_EIO, "chmod '%s': %s", path, strerror(errno));
	return 0;
}

/* ------------------------------------------------------------ temp files */

static void temp_cleanup(void *payload)
{
	struct jo_file *f = payload;

	/* may run in a signal handler: one syscall on what create prepared */
	if (!f->committed && f->tmp)
		(void)unlinkat(f->dfd, f->tmp, 0);
}

static void random_chars(char *out, size_t n)
{
	static const char set[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char r[16];
	size_t got = 0;

	if (n > sizeof(r))
		n = sizeof(r);
	while (got < n) {
		ssize_t g = getrandom(r + got, n - got, 0);

		if (g < 0 && errno == EINTR)
			continue;
		if (g <= 0)
			break;
		got += (size_t)g;
	}
	if (got < n) {
		/* no randomness: O_EXCL keeps this safe, only less unlikely to clash */
		struct timespec ts;
		uint64_t x;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid() << 32 ^
		    (uint64_t)ts.tv_sec;
		for (size_t i = got; i < n; i++, x = x * 6364136223846793005ULL + 1442695040888963407ULL)
			r[i] = (unsigned char)(x >> 56);
	}
	for (size_t i = 0; i < n; i++)
		out[i] = set[r[i] % (sizeof(set) - 1)];
}

/* Split path into a directory (malloc'd, "." when none) and its last name. */
static int split_path(const char *path, char **dir, const char **base, struct jo_err *err)
{
	const char *s = strrchr(path, '/');

	*dir = NULL;
	*base = s ? s + 1 : path;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return jo_err_set(err, JO_EINVAL, "'%s' does not name a file", path);
	if (strlen(*base) > NAME_MAX)
		return jo_err_set(err, JO_EINVAL, "'%s': name too long", path);
	*dir = !s ? strdup(".") : s == path ? strdup("/") : strndup(path, (size_t)(s - path));
	return *dir ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

static int exists_error(const char *path, const struct stat *st, struct jo_err *err)
{
	if (S_ISLNK(st->st_mode))
		return jo_err_set(err, JO_EINVAL, "'%s' already exists (a symbolic link)", path);
	return jo_err_set(err, JO_EINVAL, "'%s' already exists", path);
}

int jo_file_create(struct jo_file **out, const char *path, unsigned mode, unsigned flags,
		   struct jo_err *err)
{
	struct jo_file *f;
	const char *base;
	char *dir = NULL;
	struct stat st;
	size_t bl, tl;
	int rc;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	f->fd = f->dfd = -1;
	f->flags = flags;
	rc = split_path(path, &dir, &base, err);
	if (rc)
		goto out;
	f->path = strdup(path);
	f->base = strdup(base);
	/* ".<base>.XXXXXX", the base cut so that the name fits NAME_MAX */
	bl = strlen(base);
	if (bl > NAME_MAX - TEMP_RAND - 2)
		bl = NAME_MAX - TEMP_RAND - 2;
	tl = bl + TEMP_RAND + 3;
	f->tmp = malloc(tl);
	f->tmp_path = malloc(strlen(dir) + tl + 1);
	if (!f->path || !f->base || !f->tmp || !f->tmp_path) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	/* the directory is the user's path; from here on, only names in it */
	f->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->dfd < 0) {
		rc = jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
				"cannot write '%s': directory '%s': %s", path, dir, strerror(errno));
		goto out;
	}
	if (fstatat(f->dfd, f->base, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (flags & JO_FILE_NOREPLACE) {
			rc = exists_error(path, &st, err);
			goto out;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = jo_err_set(err, JO_EINVAL, "cannot write '%s': it is a directory", path);
			goto out;
		}
	}
	for (int tries = 0;; tries++) {
		f->tmp[0] = '.';
		memcpy(f->tmp + 1, base, bl);
		f->tmp[bl + 1] = '.';
		random_chars(f->tmp + bl + 2, TEMP_RAND);
		f->tmp[bl + 2 + TEMP_RAND] = '\0';
		f->fd = openat(f->dfd, f->tmp,
			       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
			       (mode_t)mode);
		if (f->fd >= 0)
			break;
		if (errno != EEXIST || tries == TEMP_TRIES) {
			rc = jo_err_set(err, JO_EIO, "cannot create a temporary file in '%s' for '%s': %s",
					dir, path, strerror(errno));
			goto out;
		}
	}
	snprintf(f->tmp_path, strlen(dir) + tl + 1, "%s/%s", dir, f->tmp);
	if (jo_cancel_atexit(temp_cleanup, f) == 0)
		f->cleanup_registered = true;
	if (is_private(mode) && fchmod(f->fd, (mode_t)mode) != 0) {
		rc = jo_err_set(err, JO_EIO, "chmod '%s': %s", f->tmp_path, strerror(errno));
		goto out;
	}
	if (flags & JO_FILE_STDIO) {
		f->fp = fdopen(f->fd, "w");
		if (!f->fp) {
			rc = jo_err_set(err, JO_ENOMEM, "'%s': %s", f->tmp_path, strerror(errno));
			goto out;
		}
	}
	*out = f;
	f = NULL;
out:
	if (f && f->fd < 0) {
		free(f->tmp); /* nothing was created under it */
		f->tmp = NULL;
	}
	jo_file_abort(f);
	free(dir);
	return rc;
}

static int rename_error(struct jo_file *f, int e, struct jo_err *err)
{
	struct stat ds, ts;

	if ((e == EPERM || e == EACCES) && fstat(f->dfd, &ds) == 0 && (ds.st_mode & S_ISVTX) &&
	    fstatat(f->dfd, f->base, &ts, AT_SYMLINK_NOFOLLOW) == 0 && ts.st_uid != geteuid())
		return jo_err_set(err, JO_EIO, "cannot replace '%s': it belongs to uid %ju and its "
				  "directory is sticky (only its owner may replace it)", f->path,
				  (uintmax_t)ts.st_uid);
	if (e == EEXIST || e == ENOTEMPTY) {
		if (fstatat(f->dfd, f->base, &ts, AT_SYMLINK_NOFOLLOW) == 0)
			return exists_error(f->path, &ts, err);
	}
	return jo_err_set(err, JO_EIO, "cannot rename '%s' to '%s': %s", f->tmp_path, f->path,
			  strerror(e));
}

/* rename without replacing: renameat2, or link + unlink where it is missing */
static int rename_noreplace(int dfd, const char *from, const char *to)
{
	if (renameat2(dfd, from, dfd, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (linkat(dfd, from, dfd, to, 0) != 0)
		return -1;
	(void)unlinkat(dfd, from, 0);
	return 0;
}

int jo_file_scratch(struct jo_file **out, const char *dir, unsigned flags, struct jo_err *err)
{
	struct jo_file *f = calloc(1, sizeof(*f));
	int rc = 0;

	*out = NULL;
	if (!f || !(f->path = malloc(strlen(dir) + 16))) {
		free(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	f->dfd = -1;
	sprintf(f->path, "%s/(scratch)", dir);
	f->tmp_path = f->path;
	f->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (f->fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		/* no O_TMPFILE here: a random name, created exclusively, unlinked at once */
		char name[TEMP_RAND + 17] = ".jfsops-scratch.";
		int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		for (int tries = 0; dfd >= 0 && f->fd < 0 && tries <= TEMP_TRIES; tries++) {
			random_chars(name + 16, TEMP_RAND);
			name[16 + TEMP_RAND] = '\0';
			f->fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY |
				       O_CLOEXEC, 0600);
			if (f->fd < 0 && errno != EEXIST)
				break;
		}
		if (f->fd >= 0)
			(void)unlinkat(dfd, name, 0);
		if (dfd >= 0)
			close(dfd);
	}
	if (f->fd < 0)
		rc = jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO, "cannot create a scratch "
				"file in '%s': %s", dir, strerror(errno));
	else if (fchmod(f->fd, 0600) != 0)
		rc = jo_err_set(err, JO_EIO, "chmod a scratch file in '%s': %s", dir, strerror(errno));
	else if ((flags & JO_FILE_STDIO) && !(f->fp = fdopen(f->fd, "w+")))
		rc = jo_err_set(err, JO_ENOMEM, "a scratch file in '%s': %s", dir, strerror(errno));
	if (rc) {
		f->tmp_path = NULL;
		jo_file_abort(f);
		return rc;
	}
	*out = f;
	return 0;
}

int jo_file_commit(struct jo_file *f, struct jo_err *err)
{
	int fd = f->fd, rc = 0;

	if (fd < 0)
		return jo_err_set(err, JO_EINVAL, "'%s' is not open", f->path);
	if (!f->base)
		return jo_err_set(err, JO_EINVAL, "'%s' has no name to commit", f->path);
	if (f->fp && (fflush(f->fp) != 0 || ferror(f->fp)))
		rc = jo_err_set(err, JO_EIO, "write '%s': %s", f->tmp_path, strerror(errno));
	if (!rc && fsync(fd) != 0 && errno != EINVAL)
		rc = jo_err_set(err, JO_EIO, "fsync '%s': %s", f->tmp_path, strerror(errno));
	if (f->fp) {
		if (fclose(f->fp) != 0 && !rc)
			rc = jo_err_set(err, JO_EIO, "write '%s': %s", f->tmp_path, strerror(errno));
	} else if (close(fd) != 0 && !rc) {
		rc = jo_err_set(err, JO_EIO, "write '%s': %s", f->tmp_path, strerror(errno));
	}
	f->fp = NULL;
	f->fd = -1;
	if (rc)
		return rc;
	if ((f->flags & JO_FILE_NOREPLACE) ? rename_noreplace(f->dfd, f->tmp, f->base) :
					     renameat(f->dfd, f->tmp, f->dfd, f->base))
		return rename_error(f, errno, err);
	f->committed = 1;
	if (f->cleanup_registered) {
		jo_cancel_atexit_remove(temp_cleanup, f);
		f->cleanup_registered = false;
	}
	if (fsync(f->dfd) != 0 && errno != EINVAL)
		return jo_err_set(err, JO_EIO, "'%s' is in place, but fsync of its directory "
				  "failed: %s", f->path, strerror(errno));
	return 0;
}

void jo_file_abort(struct jo_file *f)
{
	if (!f)
		return;
	if (f->cleanup_registered)
		jo_cancel_atexit_remove(temp_cleanup, f);
	if (f->fp)
		fclose(f->fp);
	else if (f->fd >= 0)
		close(f->fd);
	if (!f->committed && f->tmp && f->dfd >= 0)
		(void)unlinkat(f->dfd, f->tmp, 0); /* an incomplete file must not look complete */
	if (f->dfd >= 0)
		close(f->dfd);
	if (f->tmp_path == f->path)
		f->tmp_path = NULL;  /* a scratch file's: one string */
	jo_free_strs(&f->path, &f->base, &f->tmp, &f->tmp_path);
	free(f);
}

/* ------------------------------------------------------------ existing files */

/*
 * Create path exclusively (1, *fd open), or find it there (0, *fd open and
 * checked when want_fd, else -1 and only lstat-checked).
 */
static int create_or_open(const char *path, int oflags, unsigned mode, bool create, bool want_fd,
			  int *fd, struct jo_err *err)
{
	for (int tries = 0; tries < 10; tries++) {
		struct stat st;
		int rc;

		*fd = -1;
		if (create) {
			*fd = open(path, oflags | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
				   (mode_t)mode);
			if (*fd >= 0) {
				if (is_private(mode) && fchmod(*fd, (mode_t)mode) != 0) {
					rc = jo_err_set(err, JO_EIO, "chmod '%s': %s", path,
							strerror(errno));
					close(*fd);
					*fd = -1;
					return rc;
				}
				return 1;
			}
			if (errno != EEXIST)
				return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
						  "cannot create '%s': %s", path, strerror(errno));
		}
		/* there already: a symlink, a FIFO, someone else's file are refused */
		if (lstat(path, &st) != 0) {
			if (errno == ENOENT && create)
				continue; /* removed since: create it after all */
			return jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
					  errno == ENOENT ? "'%s' does not exist" : "cannot open '%s': %s",
					  path, strerror(errno));
		}
		rc = check_existing(&st, path, err);
		if (rc || !want_fd)
			return rc;
		/* O_NONBLOCK: a FIFO swapped in meanwhile must not hang the open */
		*fd = open(path, oflags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (*fd < 0) {
			if (errno == ENOENT && create)
				continue;
			if (errno == ELOOP)
				return jo_err_set(err, JO_EIO, "refusing '%s': it is a symbolic link "
						  "(never written through)", path);
			return jo_err_set(err, JO_EIO, "cannot open '%s': %s", path, strerror(errno));
		}
		if (fstat(*fd, &st) != 0) {
			rc = jo_err_set(err, JO_EIO, "stat '%s': %s", path, strerror(errno));
		} else {
			rc = check_existing(&st, path, err);
			if (!rc)
				rc = tighten(*fd, &st, path, mode, err);
		}
		if (!rc && fcntl(*fd, F_SETFL, oflags & O_APPEND) != 0)
			rc = jo_err_set(err, JO_EIO, "'%s': %s", path, strerror(errno));
		if (rc) {
			close(*fd);
			*fd = -1;
		}
		return rc;
	}
	return jo_err_set(err, JO_EIO, "cannot open '%s': it keeps appearing and disappearing",
			  path);
}

int jo_file_append_open(int *out, const char *path, unsigned mode, struct jo_err *err)
{
	int fd, rc;

	*out = -1;
	rc = create_or_open(path, O_WRONLY | O_APPEND, mode, true, true, &fd, err);
	if (rc < 0)
		return rc;
	*out = fd;
	return 0;
}

int jo_file_prepare(const char *path, unsigned mode, unsigned flags, const char *const *sidecars,
		    struct jo_err *err)
{
	bool create = !(flags & JO_FILE_NOCREATE);
	int fd = -1, rc;

	/* the names beside it first: a refusal leaves no new empty file behind */
	for (size_t i = 0; sidecars && sidecars[i]; i++) {
		size_t n = strlen(path) + strlen(sidecars[i]) + 1;
		char *side = malloc(n);
		struct stat st;

		if (!side)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		snprintf(side, n, "%s%s", path, sidecars[i]);
		rc = 0;
		if (lstat(side, &st) == 0)
			rc = check_existing(&st, side, err);
		else if (errno != ENOENT)
			rc = jo_err_set(err, JO_EIO, "stat '%s': %s", side, strerror(errno));
		free(side);
		if (rc)
			return rc;
	}
	rc = create_or_open(path, O_WRONLY, mode, create, create, &fd, err);
	if (fd >= 0)
		close(fd); /* before the library opens it: a close drops its POSIX locks */
	return rc < 0 ? rc : 0;
}

char *jo_path_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *p = malloc(dl + nl + 2);

	if (!p)
		return NULL;
	memcpy(p, dir, dl);
	if (!dl || dir[dl - 1] != '/')
		p[dl++] = '/';
	memcpy(p + dl, name, nl + 1);
	return p;
}
