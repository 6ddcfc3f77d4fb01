/*
 * file.h: every file jfsops writes is made here (git's tempfile/lockfile
 * idea), so that a root cron job beside other users never writes through a
 * name someone else planted.
 *
 * Files that are written whole (reports, metrics, quarantine archives, state
 * snapshots) are created as "<dir>/.<base>.XXXXXX" beside the target: a
 * random name, opened with O_CREAT|O_EXCL|O_NOFOLLOW (retried on a clash),
 * so no name can be guessed ahead and no symlink at it is ever followed.
 * jo_file_commit() flushes, fsyncs, renames it into place and fsyncs the
 * directory. The rename replaces whatever is at the target name itself, a
 * symlink included: the link goes, nothing is written through it. In a
 * sticky directory (/tmp) the kernel lets only its owner (or root) replace
 * another user's file; that EPERM comes back as one clear error. The temp
 * file is removed by jo_file_abort(), and at exit or a second SIGINT through
 * jo_cancel_atexit() (common/cancel.h), so an interrupted run leaves nothing.
 *
 * Files that are appended to (audit trails) or opened by a library by name
 * (SQLite state files) are created with O_CREAT|O_EXCL|O_NOFOLLOW when
 * absent; an existing one is used only if it is a regular file with one
 * link, owned by the caller's effective uid or by root, and never through a
 * symlink (O_NOFOLLOW): anything else is refused with one line naming it.
 *
 * Modes: JO_FILE_PUBLIC (0666) lets the umask apply (reports, audits,
 * metrics); a mode without group or other bits (JO_FILE_PRIVATE, 0600) is
 * set exactly, whatever the umask, for files that hold data.
 *
 * Threading: a handle belongs to one thread; different handles are
 * independent. Errors are negative JO_E* codes with the detail in err:
 * JO_EIO (I/O failed, or the existing file was refused), JO_ENOMEM,
 * JO_EINVAL (the path names no file, or JO_FILE_NOREPLACE found the target).
 */
#ifndef JO_FILE_H
#define JO_FILE_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

struct jo_err;

#define JO_FILE_PUBLIC 0666u  /* the umask applies */
#define JO_FILE_PRIVATE 0600u /* exactly, whatever the umask */

enum jo_file_flags {
	JO_FILE_STDIO = 1 << 0,     /* jo_file_create: also a stdio stream (fp) */
	JO_FILE_NOREPLACE = 1 << 1, /* jo_file_create: never replace the target */
	JO_FILE_NOCREATE = 1 << 2,  /* jo_file_prepare: JO_ENOTFOUND when absent */
};

/*
 * A file being written under a temporary name. fd (and fp with
 * JO_FILE_STDIO, a stream on fd: write through one of them, not both) are
 * the caller's to write to until jo_file_commit(); path is the target as
 * given. The other members are private.
 */
struct jo_file {
	int fd;
	FILE *fp;
	char *path;
	/* private */
	int dfd;                    /* the target's directory */
	char *base;                 /* the target's name in dfd */
	char *tmp;                  /* the temp file's name in dfd */
	char *tmp_path;             /* the temp file's path, for messages */
	unsigned flags;
	bool cleanup_registered;
	volatile sig_atomic_t committed; /* read by the cancellation hook */
};

/*
 * Create a temp file beside path (*out owned: release it with
 * jo_file_abort(), also after a commit). mode: JO_FILE_PUBLIC or
 * JO_FILE_PRIVATE (the temp file has it from the start). flags:
 * JO_FILE_STDIO, JO_FILE_NOREPLACE (JO_EINVAL when the target exists, a
 * symlink included, now or at the commit). A directory at path is JO_EINVAL.
 */
int jo_file_create(struct jo_file **out, const char *path, unsigned mode, unsigned flags,
		   struct jo_err *err);

/*
 * A scratch file in directory dir: data written, read back and dropped,
 * never published (a file to upload). It has no name: O_TMPFILE, or where
 * the file system has none a random name created exclusively (0600,
 * O_NOFOLLOW) and unlinked at once. So nothing is left in dir whatever
 * happens to the process, SIGKILL included. fd (and fp with JO_FILE_STDIO)
 * is open for reading and writing, mode 0600; jo_file_commit() refuses it;
 * release it with jo_file_abort().
 */
int jo_file_scratch(struct jo_file **out, const char *dir, unsigned flags, struct jo_err *err);

/*
 * Flush and fsync the temp file, close it, rename it to the target and fsync
 * the directory. On failure the target is untouched and the temp file stays
 * until jo_file_abort(). Call once.
 */
int jo_file_commit(struct jo_file *f, struct jo_err *err);

/*
 * Release f: unless committed, close and remove the temp file (an
 * incomplete file never takes the target's name). NULL is accepted.
 */
void jo_file_abort(struct jo_file *f);

/*
 * Open path for appending (O_APPEND, close-on-exec): created exclusively
 * with mode when absent, else refused unless it is a regular file with one
 * link owned by the caller's effective uid or root (and never through a
 * symlink). An existing file of the caller's that has group or other bits
 * while mode is private is set to mode. *out is the descriptor (caller
 * closes it).
 */
int jo_file_append_open(int *out, const char *path, unsigned mode, struct jo_err *err);

/*
 * For a library that opens files by name (SQLite): make sure path is a
 * regular file as jo_file_append_open() accepts it, creating it empty and
 * exclusively with mode when absent (JO_ENOTFOUND instead with
 * JO_FILE_NOCREATE), and that each name path+suffix in sidecars (NULL
 * terminated, may be NULL: "-wal", "-shm", "-journal") is absent or such a
 * file too. Open it afterwards with the library's own no-follow flag
 * (SQLITE_OPEN_NOFOLLOW), which closes the gap for a symlink.
 */
int jo_file_prepare(const char *path, unsigned mode, unsigned flags, const char *const *sidecars,
		    struct jo_err *err);

/* dir + "/" + name, malloc'd (no second '/' when dir ends with one; "" is
 * the root: "/name"). NULL when out of memory. */
char *jo_path_join(const char *dir, const char *name);

/*
 * Write all n bytes to fd, again after EINTR: 0, or -1 with errno set.
 * Inline, so that the object store's sources still build on their own
 * (tests/tools/objtool.c).
 */
static inline int jo_write_all(int fd, const void *data, size_t n)
{
	const char *p = data;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

#endif
