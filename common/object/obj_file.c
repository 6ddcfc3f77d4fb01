/*
 * obj_file.c: the "file" backend, laid out as JuiceFS's file storage does:
 * key -> path bucket + key, puts go through a temp file
 * ".jfs.<base>.tmp.<rand>" in the same directory and rename() (create-only
 * puts: link(), which never replaces an existing name).
 * Listings walk the tree sorting siblings by their full key (a directory
 * sorts as "name/"), which makes the whole stream S3 byte order.
 *
 * Nothing under the bucket directory is ever followed through a symlink:
 * every operation walks from the bucket root one component at a time with
 * openat(O_NOFOLLOW | O_DIRECTORY), and reads, writes, renames and unlinks
 * happen relative to the directory descriptor so reached. A symlink is not
 * an object: listings skip it (or report it with is_link when asked), and
 * a key whose path meets one is refused (JO_EUNSUPPORTED) rather than read,
 * overwritten or deleted, so nothing outside the bucket can be touched. The
 * bucket path itself is the user's: symlinks in it are resolved once, when
 * the handle is opened (as rclone resolves the root of a local remote).
 */
#define _GNU_SOURCE /* O_PATH */
#include "common/object/object_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"
#include "common/object/obj_sigv4.h"

#ifndef O_PATH
#define O_PATH O_RDONLY
#endif

/* Flags of a directory descriptor used only to reach what is below it. */
#define DIR_WALK (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

struct file_impl {
	char *root;       /* the bucket directory, symlinks resolved; ends with '/' */
	size_t root_len;
	bool list_temp;   /* list JuiceFS's ".jfs.*.tmp.*" files too */
	bool list_links;  /* report symlinks in listings (is_link) instead of skipping */
	atomic_int create_used;  /* enum jo_obj_create_method: the weakest so far */
};

static struct file_impl *FI(struct jo_obj *o)
{
	return o->impl;
}

static int errno_code(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return JO_ENOTFOUND;
	case ENOMEM:
		return JO_ENOMEM;
	/* a permission on a local path is no credential: an I/O failure whose
	 * message says "Permission denied" (exit 3, not 6) */
	case EINVAL:
	case ENAMETOOLONG:
	case EISDIR:
		return JO_EINVAL;
	default:
		return JO_EIO;
	}
}

/* Reject keys that would escape the root. */
static int check_path_key(const char *key, struct jo_err *err)
{
	const char *p = key;

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		if ((n == 2 && p[0] == '.' && p[1] == '.'))
			return jo_err_set(err, JO_EINVAL, "file: key '%s' has a '..' segment", key);
		if (!slash)
			break;
		p = slash + 1;
	}
	return 0;
}

/* A request on key: the key checked, then counted. */
static int start_request(struct jo_obj *o, const char *key, struct jo_err *err)
{
	int rc = check_path_key(key, err);

	if (rc == 0)
		atomic_fetch_add(&o->ctr->requests, 1);
	return rc;
}

/* ---- walking below the root without following symlinks ---- */

/* Why a walk stopped. */
struct walk_fail {
	int e;            /* errno; ELOOP: the component is a symlink */
	bool root;        /* the bucket directory itself cannot be opened */
	size_t len;       /* rel[0..len) names the component that failed */
};

/* The bucket directory (the user's path: symlinks in it were resolved at open). */
static int open_root(struct file_impl *f, struct walk_fail *wf)
{
	int fd = open(f->root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		wf->e = errno;
		wf->root = true;
		wf->len = 0;
	}
	return fd;
}

/* After openat(dfd, name, ...|O_NOFOLLOW) failed: ELOOP if name is a symlink. */
static int classify(int dfd, const char *name, int e)
{
	struct stat st;

	if ((e == ENOTDIR || e == ELOOP) && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return S_ISLNK(st.st_mode) ? ELOOP : ENOTDIR;
	return e;
}

/*
 * Open the directory rel[0..len) below the root (components separated by
 * '/'; empty and "." components are skipped, as a path lookup does), never
 * following a symlink. create: make the missing directories (mode 0777 less
 * the umask, as JuiceFS does). Returns an O_PATH descriptor, or -1 with
 * *wf saying where and why.
 */
static int open_dir(struct file_impl *f, const char *rel, size_t len, bool create,
		    struct walk_fail *wf)
{
	int fd = open_root(f, wf);
	size_t i = 0;

	if (fd < 0)
		return -1;
	while (i < len) {
		size_t j = i, n;
		char name[NAME_MAX + 1];
		int nfd;

		while (j < len && rel[j] != '/')
			j++;
		n = j - i;
		if (n == 0 || (n == 1 && rel[i] == '.')) {
			i = j + 1;
			continue;
		}
		if (n > NAME_MAX) {
			close(fd);
			wf->e = ENAMETOOLONG;
			wf->root = false;
			wf->len = j;
			return -1;
		}
		memcpy(name, rel + i, n);
		name[n] = '\0';
		nfd = openat(fd, name, DIR_WALK);
		if (nfd < 0 && errno == ENOENT && create &&
		    (mkdirat(fd, name, 0777) == 0 || errno == EEXIST))
			nfd = openat(fd, name, DIR_WALK);
		if (nfd < 0) {
			wf->e = classify(fd, name, errno);
			wf->root = false;
			wf->len = j;
			close(fd);
			return -1;
		}
		close(fd);
		fd = nfd;
		i = j + 1;
	}
	return fd;
}

/* A failed walk or operation as a jo_err: what, where, why. */
static int walk_error(struct jo_obj *o, const struct walk_fail *wf, const char *op,
		      const char *key, const char *rel, struct jo_err *err)
{
	struct file_impl *f = FI(o);

	if (wf->root) {
		(void)op;
		(void)key;
		if (wf->e == ENOENT || wf->e == ENOTDIR)
			return jo_err_set(err, JO_ESTATE, "file: the bucket directory %s %s", f->root,
					  wf->e == ENOENT ? "does not exist" : "is not a directory");
		return jo_err_set(err, errno_code(wf->e), "file: the bucket directory %s: %s",
				  f->root, strerror(wf->e));
	}
	if (wf->e == ELOOP)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "file: %s '%s': '%.*s' is a symlink (never followed)", op, key,
				  (int)wf->len, rel);
	return jo_err_set(err, errno_code(wf->e), "file: %s '%s' in %s: %s", op, key, o->desc,
			  strerror(wf->e));
}

/* The directory part of key (up to its last '/') and the name after it. */
static size_t split_key(const char *key, const char **leaf)
{
	const char *s = strrchr(key, '/');

	*leaf = s ? s + 1 : key;
	return s ? (size_t)(s - key) : 0;
}

/* Open the directory that holds key's last component; *leaf points into key. */
static int open_parent(struct jo_obj *o, const char *key, bool create, const char **leaf,
		       const char *op, struct jo_err *err)
{
	struct walk_fail wf = { 0 };
	size_t dl = split_key(key, leaf);
	int fd;

	if (strlen(*leaf) > NAME_MAX) {
		jo_err_set(err, JO_EINVAL, "file: %s '%s': a path component is too long", op, key);
		return -1;
	}
	fd = open_dir(FI(o), key, dl, create, &wf);
	if (fd < 0)
		walk_error(o, &wf, op, key, key, err);
	return fd;
}

/* fstatat of key's last component, not following it. */
static int stat_leaf(int dfd, const char *leaf, struct stat *st)
{
	return fstatat(dfd, leaf, st, AT_SYMLINK_NOFOLLOW);
}

static int random_u32(uint32_t *v)
{
	if (RAND_bytes((unsigned char *)v, sizeof(*v)) != 1)
		*v = (uint32_t)rand(); /* any value works: the name only has to be unlikely to clash */
	return 0;
}

/* ".jfs.<leaf (at most 200 bytes)>.tmp.<tag><n>" for a temp file beside leaf. */
static void temp_name(char *buf, size_t cap, const char *leaf, const char *tag)
{
	size_t bl = strlen(leaf);
	uint32_t r;

	if (bl > 200)
		bl = 200;
	random_u32(&r);
	snprintf(buf, cap, ".jfs.%.*s.tmp.%s%u", (int)bl, leaf, tag, r);
}

/*
 * The name key's last component may take: absent, or a regular file (it is
 * replaced). A symlink is never replaced (JO_EUNSUPPORTED), a directory is
 * not an object (JO_EINVAL).
 */
static int check_target(struct jo_obj *o, int dfd, const char *leaf, const char *op,
			const char *key, struct jo_err *err)
{
	struct stat st;

	if (stat_leaf(dfd, leaf, &st) < 0)
		return errno == ENOENT ? 0 : jo_err_set(err, errno_code(errno), "file: %s '%s': %s",
							op, key, strerror(errno));
	if (S_ISLNK(st.st_mode))
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "file: %s '%s': it is a symlink (never followed or replaced)", op, key);
	if (S_ISDIR(st.st_mode))
		return jo_err_set(err, JO_EINVAL, "file: %s '%s' in %s: it is a directory", op, key,
				  o->desc);
	return 0;
}

/* A new temp file in dfd beside leaf; its name goes to tmp (NAME_MAX + 1 bytes). */
static int open_temp(int dfd, const char *leaf, const char *tag, char *tmp)
{
	for (int tries = 0; tries < 10; tries++) {
		int fd;

		temp_name(tmp, NAME_MAX + 1, leaf, tag);
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

/*
 * After a create-only put found leaf taken: JO_EEXIST for an object (a
 * regular file), else what check_target says about the name.
 */
static int taken(struct jo_obj *o, int dfd, const char *leaf, const char *key, struct jo_err *err)
{
	int rc = check_target(o, dfd, leaf, "create", key, err);

	if (rc)
		return rc;
	return jo_err_set(err, JO_EEXIST, "file: create '%s' in %s: it exists (left as it is)", key,
			  o->desc);
}

/*
 * Give the written temp file tmp the name leaf without ever replacing what
 * has that name: link() fails with EEXIST on any existing name (a symlink
 * there is neither followed nor replaced), then the temp name goes. A
 * filesystem without hard links gets renameat2(RENAME_NOREPLACE), which
 * has the same guarantee; one with neither is an error, never a plain
 * rename(). 0, or -1 with errno.
 */
static int link_into(struct file_impl *f, int dfd, const char *tmp, const char *leaf)
{
	if (linkat(dfd, tmp, dfd, leaf, 0) == 0) {
		/* the key holds the data; a failure leaves a temp name that listings skip */
		(void)unlinkat(dfd, tmp, 0);
		return 0;
	}
	if (errno != EPERM && errno != EOPNOTSUPP && errno != ENOSYS)
		return -1;
	if (renameat2(dfd, tmp, dfd, leaf, RENAME_NOREPLACE) < 0)
		return -1;
	jo_obj_create_note(&f->create_used, JO_CREATE_RENAME_NOREPLACE);
	return 0;
}

/*
 * Write data as key: temp file + rename inside the key's directory; with
 * create_only, + link() instead (link_into), so that an existing key is
 * never replaced (JO_EEXIST). mode >= 0: the file's permission bits.
 */
static int put_file(struct jo_obj *o, const char *key, const void *data, size_t len, int mode,
		    bool create_only, struct jo_err *err)
{
	char tmp[NAME_MAX + 1];
	struct stat st;
	const char *leaf;
	int dfd, fd, rc;

	dfd = open_parent(o, key, true, &leaf, "put", err);
	if (dfd < 0)
		return err->code;
	if (create_only)
		jo_obj_create_note(&FI(o)->create_used, JO_CREATE_LINK);
	rc = check_target(o, dfd, leaf, "put", key, err);
	if (rc == 0 && create_only && stat_leaf(dfd, leaf, &st) == 0)
		rc = taken(o, dfd, leaf, key, err); /* known taken: no temp file written */
	if (rc) {
		close(dfd);
		return rc;
	}
	fd = open_temp(dfd, leaf, "", tmp);
	if (fd < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: put '%s' in %s: %s", key, o->desc,
				strerror(errno));
		close(dfd);
		return rc;
	}
	/* mode >= 0: the bits before the name appears (no moment with looser ones) */
	if ((mode >= 0 && fchmod(fd, (mode_t)mode & 0777) < 0) || jo_write_all(fd, data, len) < 0 ||
	    close(fd) < 0) {
		int e = errno;

		unlinkat(dfd, tmp, 0);
		close(dfd);
		return jo_err_set(err, errno_code(e), "file: write '%s': %s", key, strerror(e));
	}
	if (create_only) {
		/* the check above was a shortcut; this is the one that holds */
		if (link_into(FI(o), dfd, tmp, leaf) < 0) {
			int e = errno;

			unlinkat(dfd, tmp, 0);
			rc = e == EEXIST ? taken(o, dfd, leaf, key, err)
					 : jo_err_set(err, errno_code(e), "file: create '%s': %s", key,
						      strerror(e));
			close(dfd);
			return rc;
		}
	} else if (renameat(dfd, tmp, dfd, leaf) < 0) {
		int e = errno;

		unlinkat(dfd, tmp, 0);
		close(dfd);
		return jo_err_set(err, errno_code(e), "file: rename into '%s': %s", key, strerror(e));
	}
	close(dfd);
	atomic_fetch_add(&o->ctr->bytes_out, len);
	return 0;
}

static int file_put(struct jo_obj *o, const char *key, const void *data, size_t len,
		    const struct jo_obj_put_opts *po, struct jo_err *err)
{
	int rc;

	/* content type and metadata have no place in a plain file; po->mode and
	 * po->create_only have */
	if ((rc = start_request(o, key, err)) != 0)
		return rc;
	if (key[strlen(key) - 1] == '/') {
		/* A directory marker, as JuiceFS stores it: just the directory. */
		struct walk_fail wf = { 0 };
		int fd = open_dir(FI(o), key, strlen(key), true, &wf);

		if (fd < 0)
			rc = walk_error(o, &wf, "mkdir", key, key, err);
		else
			close(fd);
	} else {
		rc = put_file(o, key, data, len, po->set_mode ? (int)(po->mode & 0777) : -1,
			      po->create_only, err);
	}
	if (rc)
		atomic_fetch_add(&o->ctr->errors, 1);
	return rc;
}

static void fill_info(struct jo_obj_info *info, const struct stat *st)
{
	info->size = (uint64_t)st->st_size;
	info->mtime = (int64_t)st->st_mtim.tv_sec;
	info->mtime_nsec = (int32_t)st->st_mtim.tv_nsec;
	info->etag[0] = '\0';
	info->mode = (uint32_t)(st->st_mode & 07777);
}

/*
 * Open key for reading: a regular file reached without following a symlink.
 * O_NONBLOCK keeps a FIFO in the tree from blocking the open; it is then
 * refused as not a regular file.
 */
static int open_read(struct jo_obj *o, const char *key, const char *op, struct stat *st,
		     struct jo_err *err)
{
	const char *leaf;
	int dfd, fd;

	dfd = open_parent(o, key, false, &leaf, op, err);
	if (dfd < 0)
		return -1;
	if (!*leaf) {
		close(dfd);
		jo_err_set(err, JO_ENOTFOUND, "file: %s '%s' in %s: not an object", op, key, o->desc);
		return -1;
	}
	fd = openat(dfd, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = classify(dfd, leaf, errno);

		close(dfd);
		if (e == ELOOP)
			jo_err_set(err, JO_EUNSUPPORTED, "file: %s '%s': it is a symlink (never followed)",
				   op, key);
		else
			jo_err_set(err, errno_code(e), "file: %s '%s' in %s: %s", op, key, o->desc,
				   strerror(e));
		return -1;
	}
	close(dfd);
	if (fstat(fd, st) < 0) {
		int e = errno;

		close(fd);
		jo_err_set(err, errno_code(e), "file: %s '%s': %s", op, key, strerror(e));
		return -1;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		jo_err_set(err, JO_ENOTFOUND, "file: %s '%s' in %s: not a regular file", op, key,
			   o->desc);
		return -1;
	}
	return fd;
}

static int file_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		    jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	char buf[65536];
	struct stat st;
	uint64_t pos, end;
	int fd, rc = 0;

	if ((rc = start_request(o, key, err)) != 0)
		return rc;
	fd = open_read(o, key, "get", &st, err);
	if (fd < 0) {
		atomic_fetch_add(&o->ctr->errors, 1);
		return err->code;
	}
	if (go->info) {
		go->info->key = key;
		fill_info(go->info, &st);
	}
	pos = go->offset;
	end = (uint64_t)st.st_size;
	if (go->length >= 0 && pos + (uint64_t)go->length < end)
		end = pos + (uint64_t)go->length;
	while (pos < end) {
		size_t want = end - pos < sizeof(buf) ? (size_t)(end - pos) : sizeof(buf);
		ssize_t r = pread(fd, buf, want, (off_t)pos);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = jo_err_set(err, JO_EIO, "file: read '%s': %s", key, strerror(errno));
			break;
		}
		if (r == 0)
			break;
		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "file: get '%s': canceled", key);
			break;
		}
		atomic_fetch_add(&o->ctr->bytes_in, (uint64_t)r);
		rc = cb(buf, (size_t)r, payload);
		if (rc) {
			jo_err_set(err, rc, "file: get '%s': stopped by the sink", key);
			break;
		}
		pos += (uint64_t)r;
	}
	close(fd);
	if (rc)
		atomic_fetch_add(&o->ctr->errors, 1);
	return rc;
}

static int file_head(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		     char ***meta_out, struct jo_err *err)
{
	const char *leaf;
	struct stat st;
	int rc, dfd;

	if ((rc = start_request(o, key, err)) != 0)
		return rc;
	dfd = open_parent(o, key, false, &leaf, "head", err);
	if (dfd < 0)
		return err->code;
	rc = *leaf ? stat_leaf(dfd, leaf, &st) : (errno = ENOENT, -1);
	close(dfd);
	if (rc < 0)
		return jo_err_set(err, errno_code(errno), "file: head '%s' in %s: %s", key, o->desc,
				  strerror(errno));
	if (S_ISLNK(st.st_mode))
		return jo_err_set(err, JO_EUNSUPPORTED, "file: head '%s': it is a symlink (never followed)",
				  key);
	if (!S_ISREG(st.st_mode))
		return jo_err_set(err, JO_ENOTFOUND, "file: head '%s' in %s: not a regular file", key,
				  o->desc);
	fill_info(info, &st);
	if (meta_out) {
		*meta_out = calloc(1, sizeof(char *));
		if (!*meta_out)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* Delete a directory marker key ("a/b/"): the directory, when empty. */
static int del_dir(struct jo_obj *o, const char *key, struct jo_err *err)
{
	size_t kl = strlen(key);
	char *dir = strndup(key, kl - 1);
	const char *leaf;
	struct stat st;
	int dfd, rc = 0;

	if (!dir)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	dfd = open_parent(o, dir, false, &leaf, "delete", err);
	if (dfd < 0) {
		rc = err->code;
		if (rc == JO_ENOTFOUND)
			rc = 0;
		free(dir);
		return rc;
	}
	if (*leaf && unlinkat(dfd, leaf, AT_REMOVEDIR) < 0 && errno != ENOENT &&
	    errno != ENOTEMPTY && errno != EEXIST) {
		int e = errno;

		if (stat_leaf(dfd, leaf, &st) == 0 && S_ISLNK(st.st_mode))
			rc = jo_err_set(err, JO_EUNSUPPORTED,
					"file: delete '%s': it is a symlink (never followed or deleted)", key);
		else if (e != ENOTDIR)
			rc = jo_err_set(err, errno_code(e), "file: delete '%s' in %s: %s", key, o->desc,
					strerror(e));
	}
	close(dfd);
	free(dir);
	return rc;
}

static int file_del(struct jo_obj *o, const char *key, struct jo_err *err)
{
	const char *leaf;
	struct stat st;
	int rc, dfd;

	if ((rc = start_request(o, key, err)) != 0)
		return rc;
	if (key[strlen(key) - 1] == '/') {
		rc = del_dir(o, key, err);
		goto out;
	}
	dfd = open_parent(o, key, false, &leaf, "delete", err);
	if (dfd < 0) {
		/* A missing key is success; a symlink on the way is not. */
		rc = err->code == JO_ENOTFOUND ? 0 : err->code;
		if (!rc)
			jo_err_clear(err);
		goto out;
	}
	if (stat_leaf(dfd, leaf, &st) < 0) {
		rc = errno == ENOENT || errno == ENOTDIR
			     ? 0
			     : jo_err_set(err, errno_code(errno), "file: delete '%s' in %s: %s", key,
					  o->desc, strerror(errno));
	} else if (S_ISLNK(st.st_mode)) {
		/* Foreign to the store: never followed, never deleted. */
		rc = jo_err_set(err, JO_EUNSUPPORTED,
				"file: delete '%s': it is a symlink (never followed or deleted)", key);
	} else if (S_ISDIR(st.st_mode)) {
		rc = 0; /* a directory is no object: there is no object by that key */
	} else if (unlinkat(dfd, leaf, 0) < 0 && errno != ENOENT) {
		rc = jo_err_set(err, errno_code(errno), "file: delete '%s' in %s: %s", key, o->desc,
				strerror(errno));
	}
	close(dfd);
out:
	if (rc)
		atomic_fetch_add(&o->ctr->errors, 1);
	return rc;
}

static int file_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			     struct jo_err *err)
{
	struct jo_err e1;

	for (size_t i = 0; i < n; i++) {
		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "file: delete: canceled");
		jo_err_clear(&e1);
		results[i] = file_del(o, keys[i], &e1);
	}
	return 0;
}

/* ---- listing ---- */

struct walk {
	struct jo_obj *o;
	const char *prefix;
	size_t prefix_len;
	const char *start_after;
	const char *delim;
	jo_obj_list_cb cb;
	void *payload;
	struct jo_err *err;
	char *last_cp;    /* last common prefix emitted (generic delimiter) */
};

enum dkind { D_FILE, D_DIR, D_LINK };

struct dent {
	char *key;        /* full key; directories end with '/' */
	size_t name_off;  /* the entry's name starts at key + name_off */
	enum dkind kind;
};

static int cmp_dent(const void *a, const void *b)
{
	return strcmp(((const struct dent *)a)->key, ((const struct dent *)b)->key);
}

static bool is_temp_name(const char *name)
{
	/* JuiceFS's in-flight files: ".jfs.<base>.tmp.<n>". */
	return strncmp(name, ".jfs.", 5) == 0 && strstr(name + 5, ".tmp.") != NULL;
}

static bool starts_with(const char *s, const char *p, size_t pl)
{
	return strncmp(s, p, pl) == 0;
}

static int emit(struct walk *w, const char *key, const struct stat *st, bool is_prefix)
{
	struct jo_obj_info info = { 0 };
	int rc;

	if (w->delim && !is_prefix) {
		const char *d = strstr(key + w->prefix_len, w->delim);

		if (d) {
			size_t cl = (size_t)(d - key) + strlen(w->delim);

			if (w->last_cp && strlen(w->last_cp) == cl && strncmp(w->last_cp, key, cl) == 0)
				return 0;
			free(w->last_cp);
			w->last_cp = strndup(key, cl);
			if (!w->last_cp)
				return jo_err_set(w->err, JO_ENOMEM, "out of memory");
			if (w->start_after && strcmp(w->last_cp, w->start_after) <= 0 &&
			    !starts_with(w->start_after, w->last_cp, cl))
				return 0;
			info.key = w->last_cp;
			info.is_prefix = true;
			rc = w->cb(&info, w->payload);
			if (rc)
				jo_err_set(w->err, rc, "list: stopped by the callback");
			return rc;
		}
	}
	info.key = key;
	info.is_prefix = is_prefix;
	if (st && !is_prefix)
		fill_info(&info, st);
	rc = w->cb(&info, w->payload);
	if (rc)
		jo_err_set(w->err, rc, "list: stopped by the callback");
	return rc;
}

/* A symlink met while listing: never followed; reported when asked to. */
static int emit_link(struct walk *w, const char *key, const struct stat *lst)
{
	struct jo_obj_info info = { 0 };
	int rc;

	if (!starts_with(key, w->prefix, w->prefix_len))
		return 0;
	if (w->start_after && strcmp(key, w->start_after) <= 0)
		return 0;
	if (!FI(w->o)->list_links)
		return 0;
	info.key = key;
	info.is_link = true;
	if (lst) {
		info.mtime = (int64_t)lst->st_mtim.tv_sec;
		info.mtime_nsec = (int32_t)lst->st_mtim.tv_nsec;
	}
	rc = w->cb(&info, w->payload);
	if (rc)
		jo_err_set(w->err, rc, "list: stopped by the callback");
	return rc;
}

/* The entries of directory d (read whole, so they can be sorted). */
static int read_dir(struct walk *w, DIR *d, const char *keyprefix, struct dent **out,
		    size_t *nout)
{
	struct dent *ents = NULL;
	size_t n = 0, cap = 0, kpl = strlen(keyprefix);
	struct dirent *de;
	int rc = 0;

	for (;;) {
		size_t nl;
		enum dkind kind;
		char *k;

		errno = 0; /* readdir says "end" and "error" both with NULL */
		de = readdir(d);
		if (!de)
			break;
		nl = strlen(de->d_name);
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (is_temp_name(de->d_name) && !FI(w->o)->list_temp)
			continue;
		switch (de->d_type) {
		case DT_DIR: kind = D_DIR; break;
		case DT_LNK: kind = D_LINK; break;
		case DT_REG: kind = D_FILE; break;
		case DT_UNKNOWN: {
			struct stat st;

			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue; /* deleted while listing */
			if (S_ISDIR(st.st_mode))
				kind = D_DIR;
			else if (S_ISLNK(st.st_mode))
				kind = D_LINK;
			else if (S_ISREG(st.st_mode))
				kind = D_FILE;
			else
				continue;
			break;
		}
		default:
			continue; /* FIFOs, sockets, devices: not objects */
		}
		k = malloc(kpl + nl + 2);
		if (!k) {
			rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
			break;
		}
		memcpy(k, keyprefix, kpl);
		memcpy(k + kpl, de->d_name, nl);
		if (kind == D_DIR)
			k[kpl + nl++] = '/';
		k[kpl + nl] = '\0';
		/* Prune what cannot match the prefix. */
		if (!(starts_with(k, w->prefix, w->prefix_len) ||
		      (kind == D_DIR && starts_with(w->prefix, k, kpl + nl)))) {
			free(k);
			continue;
		}
		if (jo_grow_array(&ents, &cap, n + 1, sizeof(*ents))) {
			free(k);
			rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
			break;
		}
		ents[n].key = k;
		ents[n].name_off = kpl;
		ents[n].kind = kind;
		n++;
	}
	if (rc == 0 && !de && errno != 0)
		rc = jo_err_set(w->err, errno_code(errno), "file: list '%s' in %s: %s", keyprefix,
				w->o->desc, strerror(errno));
	if (rc == 0 && n)
		qsort(ents, n, sizeof(*ents), cmp_dent);
	*out = ents;
	*nout = n;
	return rc;
}

/* List the directory open as dfd (a readable descriptor, taken over) whose keys start with keyprefix. */
static int walk_dir(struct walk *w, int dfd, const char *keyprefix)
{
	DIR *d = fdopendir(dfd);
	struct dent *ents = NULL;
	size_t n = 0;
	int rc;

	if (!d) {
		int e = errno;

		close(dfd);
		return jo_err_set(w->err, errno_code(e), "file: list '%s' in %s: %s", keyprefix,
				  w->o->desc, strerror(e));
	}
	rc = read_dir(w, d, keyprefix, &ents, &n);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *k = ents[i].key, *name = k + ents[i].name_off;
		size_t kl = strlen(k);
		struct stat st;

		if (jo_cancelled()) {
			rc = jo_err_set(w->err, JO_ECANCELED, "list: canceled");
			break;
		}
		if (ents[i].kind == D_DIR) {
			char sub[NAME_MAX + 2];
			int sfd;

			if (w->start_after && strcmp(w->start_after, k) > 0 &&
			    !starts_with(w->start_after, k, kl))
				continue;  /* everything below sorts before start_after */
			if (w->delim && strcmp(w->delim, "/") == 0 &&
			    starts_with(k, w->prefix, w->prefix_len)) {
				if (w->start_after && strcmp(k, w->start_after) <= 0 &&
				    !starts_with(w->start_after, k, kl))
					continue;
				rc = emit(w, k, NULL, true);
				continue;
			}
			snprintf(sub, sizeof(sub), "%.*s", (int)(kl - ents[i].name_off - 1), name);
			sfd = openat(dirfd(d), sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sfd < 0) {
				int e = classify(dirfd(d), sub, errno);

				if (e == ELOOP) {
					/* replaced by a symlink since readdir: still not followed */
					k = ents[i].key;
					ents[i].key[kl - 1] = '\0';
					rc = stat_leaf(dirfd(d), sub, &st) == 0 ? emit_link(w, k, &st)
										: emit_link(w, k, NULL);
				} else if (e != ENOENT && e != ENOTDIR) {
					rc = jo_err_set(w->err, errno_code(e), "file: list '%s' in %s: %s", k,
							w->o->desc, strerror(e));
				}
				continue;
			}
			rc = walk_dir(w, sfd, k);
		} else {
			if (!starts_with(k, w->prefix, w->prefix_len))
				continue;
			if (w->start_after && strcmp(k, w->start_after) <= 0)
				continue;
			if (stat_leaf(dirfd(d), name, &st) < 0)
				continue; /* deleted while listing */
			if (S_ISLNK(st.st_mode))
				rc = emit_link(w, k, &st);
			else if (S_ISREG(st.st_mode))
				rc = emit(w, k, &st, false);
			/* else: became a directory or a FIFO since readdir: no object */
		}
	}
	closedir(d);
	for (size_t i = 0; i < n; i++)
		free(ents[i].key);
	free(ents);
	return rc;
}

static int file_list(struct jo_obj *o, const char *prefix, const char *start_after,
		     const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		     struct jo_err *err)
{
	(void)page; /* a directory walk has no pages */
	struct walk w = { .o = o, .prefix = prefix, .prefix_len = strlen(prefix),
			  .start_after = start_after, .delim = delimiter, .cb = cb,
			  .payload = payload, .err = err };
	struct walk_fail wf = { 0 };
	size_t dl = 0;
	char *kp;
	int pfd, dfd, rc;

	/* Start at the deepest directory the prefix names completely. */
	for (size_t i = 0; i < w.prefix_len; i++)
		if (prefix[i] == '/')
			dl = i + 1;
	kp = strndup(prefix, dl);
	if (!kp)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	pfd = open_dir(FI(o), prefix, dl, false, &wf);
	if (pfd < 0) {
		/*
		 * A missing bucket directory is an error (S3 says NoSuchBucket), never
		 * an empty listing; a missing directory below it is an empty prefix.
		 * A symlink on the way is refused: listing it as empty would make
		 * everything under it look deleted.
		 */
		if (wf.root || wf.e == ELOOP || (wf.e != ENOENT && wf.e != ENOTDIR))
			rc = walk_error(o, &wf, "list", prefix, prefix, err);
		else
			rc = 0;
		free(kp);
		if (rc)
			atomic_fetch_add(&o->ctr->errors, 1);
		return rc;
	}
	dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(pfd);
	if (dfd < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: list '%s' in %s: %s", prefix, o->desc,
				strerror(errno));
	} else {
		rc = walk_dir(&w, dfd, kp);
	}
	free(w.last_cp);
	free(kp);
	return rc;
}

/* Create every directory of path[0..upto) (path is modified and restored). */
static int mkdirs(char *path, size_t upto)
{
	for (size_t i = 1; i <= upto; i++) {
		if (i == upto || path[i] == '/') {
			char c = path[i];

			path[i] = '\0';
			if (mkdir(path, 0777) < 0 && errno != EEXIST) {
				int e = errno;

				path[i] = c;
				errno = e;
				return -1;
			}
			path[i] = c;
		}
	}
	return 0;
}

static int file_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	struct file_impl *f = FI(o);
	struct stat st;

	if (mkdirs(f->root, f->root_len - 1) < 0)
		return jo_err_set(err, errno_code(errno), "file: create %s: %s", o->desc,
				  strerror(errno));
	if (stat(f->root, &st) < 0 || !S_ISDIR(st.st_mode))
		return jo_err_set(err, JO_ESTATE, "file: create %s: not a directory", o->desc);
	return 0;
}

/* Stream fd `in` into a new temp file beside dst_key and rename it over. */

/*
 * Close out, the temporary file tmp in dfd written so far with result rc,
 * and when all went well rename it to leaf; otherwise remove it. The
 * result, with a failure of close or rename set as "file: WHAT 'KEY'".
 */
static int publish_tmp(int dfd, const char *tmp, int out, const char *leaf, int rc,
		       const char *what, const char *key, struct jo_err *err)
{
	if (close(out) < 0 && rc == 0)
		rc = jo_err_set(err, JO_EIO, "file: %s '%s': %s", what, key, strerror(errno));
	if (rc == 0 && renameat(dfd, tmp, dfd, leaf) < 0)
		rc = jo_err_set(err, JO_EIO, "file: %s '%s': %s", what, key, strerror(errno));
	if (rc)
		unlinkat(dfd, tmp, 0);
	return rc;
}
static int copy_into(struct jo_obj *o, int in, const char *what, const char *dst_key,
		     struct jo_err *err)
{
	char tmp[NAME_MAX + 1], buf[65536];
	const char *leaf;
	int dfd, out, rc;

	dfd = open_parent(o, dst_key, true, &leaf, "copy to", err);
	if (dfd < 0)
		return err->code;
	rc = check_target(o, dfd, leaf, "copy to", dst_key, err);
	if (rc) {
		close(dfd);
		return rc;
	}
	out = open_temp(dfd, leaf, "", tmp);
	if (out < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: copy to '%s': %s", dst_key,
				strerror(errno));
		close(dfd);
		return rc;
	}
	for (;;) {
		ssize_t r = read(in, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r > 0 && jo_write_all(out, buf, (size_t)r) < 0)) {
			rc = jo_err_set(err, JO_EIO, "file: copy '%s': %s", what, strerror(errno));
			break;
		}
		if (r == 0)
			break;
	}
	rc = publish_tmp(dfd, tmp, out, leaf, rc, "copy to", dst_key, err);
	close(dfd);
	return rc;
}

static int file_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		     const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	struct stat st;
	int rc, in;

	if (co->src_bucket)
		return jo_err_set(err, JO_EUNSUPPORTED, "file: copy from another bucket");
	rc = check_path_key(src_key, err);
	if (rc == 0)
		rc = check_path_key(dst_key, err);
	if (rc)
		return rc;
	atomic_fetch_add(&o->ctr->requests, 1);
	in = open_read(o, src_key, "copy from", &st, err);
	if (in < 0)
		return err->code;
	rc = copy_into(o, in, src_key, dst_key, err);
	close(in);
	return rc;
}

/* ---- multipart: parts are hidden temp files next to the key ---- */

/*
 * The name of a part file beside key: ".jfs.<leaf (150 bytes)>.tmp.mpu-<id>-<part>";
 * part 0 is the marker that says the upload exists. Returns the key of it
 * (malloc'd), in the key's directory.
 */
static char *part_key(const char *key, const char *upload_id, int part)
{
	const char *leaf;
	size_t dl = split_key(key, &leaf), bl = strlen(leaf);
	size_t cap = dl + 1 + bl + strlen(upload_id) + 48;
	char *out = malloc(cap);

	if (bl > 150)
		bl = 150;
	if (out)
		snprintf(out, cap, "%.*s%s.jfs.%.*s.tmp.mpu-%s-%05d", (int)dl, key, dl ? "/" : "",
			 (int)bl, leaf, upload_id, part);
	return out;
}

static int valid_upload_id(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
			return 0;
	return 1;
}

/* An upload's id and key as a part's request takes them: 0, or the error set. */
static int check_upload(const char *key, const char *upload_id, struct jo_err *err)
{
	if (!valid_upload_id(upload_id))
		return jo_err_set(err, JO_ENOTFOUND, "file: no upload '%s'", upload_id);
	return check_path_key(key, err);
}

static int file_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			   char **upload_id_out, struct jo_err *err)
{
	unsigned char r[12];
	char id[25], *marker;
	int rc;

	rc = check_path_key(key, err);
	if (rc)
		return rc;
	if (RAND_bytes(r, sizeof(r)) != 1)
		return jo_err_set(err, JO_EIO, "file: no randomness for an upload id");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
	marker = part_key(key, id, 0);
	if (!marker)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	/* the marker's permission bits are the ones complete gives the object */
	rc = put_file(o, marker, "", 0, po->set_mode ? (int)(po->mode & 0777) : -1, false, err);
	free(marker);
	if (rc)
		return rc;
	*upload_id_out = strdup(id);
	return *upload_id_out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

/* Whether the upload's marker exists (as a regular file). */
static bool upload_exists(struct jo_obj *o, const char *marker)
{
	struct jo_err e1;
	struct stat st;
	const char *leaf;
	int dfd = open_parent(o, marker, false, &leaf, "upload", &e1);
	bool ok;

	if (dfd < 0)
		return false;
	ok = stat_leaf(dfd, leaf, &st) == 0 && S_ISREG(st.st_mode);
	close(dfd);
	return ok;
}

static int file_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			     int part_number, const void *data, size_t len, char *etag_out,
			     struct jo_err *err)
{
	char *marker, *p;
	int rc;

	if ((rc = check_upload(key, upload_id, err)) != 0)
		return rc;
	marker = part_key(key, upload_id, 0);
	p = part_key(key, upload_id, part_number);
	if (!marker || !p) {
		free(marker);
		free(p);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (!upload_exists(o, marker))
		rc = jo_err_set(err, JO_ENOTFOUND, "file: upload part '%s': NoSuchUpload", key);
	else
		rc = put_file(o, p, data, len, -1, false, err);
	if (rc == 0)
		jo_obj_md5_hex(data, len, etag_out);
	free(marker);
	free(p);
	return rc;
}

/*
 * Visit the part files of an upload in key's directory: cb(dfd, name, part
 * number, payload). The directory is read once (names are matched, nothing
 * is followed).
 */
static int each_part(struct jo_obj *o, const char *key, const char *upload_id,
		     int (*cb)(int dfd, const char *name, int part, void *p), void *p,
		     struct jo_err *err)
{
	char *marker = part_key(key, upload_id, 0);
	const char *mleaf, *leaf;
	struct dirent *de;
	size_t ml;
	int pfd, dfd, rc = 0;
	DIR *d;

	if (!marker)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	split_key(marker, &mleaf);
	ml = strlen(mleaf) - 5; /* up to the part number */
	pfd = open_parent(o, key, false, &leaf, "list parts", err);
	if (pfd < 0) {
		free(marker);
		return err->code;
	}
	dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(pfd);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		rc = jo_err_set(err, errno_code(errno), "file: list parts of '%s': %s", key,
				strerror(errno));
		if (dfd >= 0)
			close(dfd);
		free(marker);
		return rc;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		const char *num = de->d_name + ml;
		char *end;
		long part;

		if (strncmp(de->d_name, mleaf, ml) != 0 || strlen(num) != 5)
			continue;
		part = strtol(num, &end, 10);
		if (*end || part < 0 || part > 10000)
			continue;
		rc = cb(dirfd(d), de->d_name, (int)part, p);
	}
	closedir(d);
	free(marker);
	return rc;
}

static int unlink_part(int dfd, const char *name, int part, void *p)
{
	(void)part;
	(void)p;
	/* unlinkat never follows: at worst a symlink of that name goes, not its target */
	unlinkat(dfd, name, 0);
	return 0;
}

static int remove_parts(struct jo_obj *o, const char *key, const char *upload_id)
{
	struct jo_err e1;

	return each_part(o, key, upload_id, unlink_part, NULL, &e1);
}

static int file_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			     const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	char tmp[NAME_MAX + 1], buf[65536];
	const char *leaf;
	int dfd, out = -1, rc = 0;

	if (!valid_upload_id(upload_id))
		return jo_err_set(err, JO_ENOTFOUND, "file: no upload '%s'", upload_id);
	if ((rc = start_request(o, key, err)) != 0)
		return rc;
	dfd = open_parent(o, key, true, &leaf, "complete", err);
	if (dfd < 0)
		return err->code;
	rc = check_target(o, dfd, leaf, "complete", key, err);
	if (rc)
		goto done;
	out = open_temp(dfd, leaf, "", tmp);
	if (out < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: complete '%s': %s", key,
				strerror(errno));
		goto done;
	}
	{
		/* the object gets the marker's permission bits (mpu_create's po->mode) */
		char *mk = part_key(key, upload_id, 0);
		struct jo_err e1;
		struct stat st;
		int in = mk ? open_read(o, mk, "upload", &st, &e1) : -1;

		free(mk);
		if (in >= 0) {
			if (fchmod(out, st.st_mode & 0777) < 0)
				rc = jo_err_set(err, errno_code(errno), "file: complete '%s': %s", key,
						strerror(errno));
			close(in);
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *pk = part_key(key, upload_id, parts[i].number);
		struct jo_err e1;
		struct stat st;
		int in = pk ? open_read(o, pk, "part", &st, &e1) : -1;

		free(pk);
		if (in < 0) {
			rc = jo_err_set(err, JO_EINVAL, "file: complete '%s': InvalidPart %d", key,
					parts[i].number);
			break;
		}
		for (;;) {
			ssize_t r = read(in, buf, sizeof(buf));

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 || (r > 0 && jo_write_all(out, buf, (size_t)r) < 0)) {
				rc = jo_err_set(err, JO_EIO, "file: complete '%s': %s", key,
						strerror(errno));
				break;
			}
			if (r == 0)
				break;
		}
		close(in);
	}
	rc = publish_tmp(dfd, tmp, out, leaf, rc, "complete", key, err);
	if (rc == 0)
		remove_parts(o, key, upload_id);
done:
	close(dfd);
	return rc;
}

static int file_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
			  struct jo_err *err)
{
	if (!valid_upload_id(upload_id) || check_path_key(key, err))
		return 0;
	if (remove_parts(o, key, upload_id) == JO_ENOMEM)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

struct part_list {
	struct jo_obj_part *parts;
	size_t n, cap;
	bool marker;
};

static int add_part(int dfd, const char *name, int part, void *p)
{
	struct part_list *l = p;
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return 0;
	if (part == 0) {
		l->marker = true;
		return 0;
	}
	if (jo_grow_array(&l->parts, &l->cap, l->n + 1, sizeof(*l->parts)))
		return JO_ENOMEM;
	memset(&l->parts[l->n], 0, sizeof(l->parts[0]));
	l->parts[l->n].number = part;
	l->parts[l->n].size = (uint64_t)st.st_size;
	l->n++;
	return 0;
}

static int cmp_part(const void *a, const void *b)
{
	return ((const struct jo_obj_part *)a)->number - ((const struct jo_obj_part *)b)->number;
}

static int file_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			       jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	struct part_list l = { 0 };
	int rc;

	if ((rc = check_upload(key, upload_id, err)) != 0)
		return rc;
	rc = each_part(o, key, upload_id, add_part, &l, err);
	if (rc == JO_ENOMEM)
		jo_err_set(err, JO_ENOMEM, "out of memory");
	if (rc == 0 && !l.marker)
		rc = jo_err_set(err, JO_ENOTFOUND, "file: list parts '%s': NoSuchUpload", key);
	if (rc == 0 && l.n)
		qsort(l.parts, l.n, sizeof(*l.parts), cmp_part);
	for (size_t i = 0; i < l.n && rc == 0; i++) {
		rc = cb(&l.parts[i], payload);
		if (rc)
			jo_err_set(err, rc, "list parts: stopped by the callback");
	}
	free(l.parts);
	return rc;
}

static void file_close(struct jo_obj *o)
{
	struct file_impl *f = FI(o);

	if (!f)
		return;
	free(f->root);
	free(f);
}

static int file_create_used(struct jo_obj *o)
{
	return atomic_load(&FI(o)->create_used);
}

static const struct jo_obj_ops file_ops = {
	.get = file_get,
	.put = file_put,
	.head = file_head,
	.del = file_del,
	.delete_batch = file_delete_batch,
	.list = file_list,
	.create_bucket = file_create_bucket,
	.copy = file_copy,
	.mpu_create = file_mpu_create,
	.mpu_put_part = file_mpu_put_part,
	.mpu_complete = file_mpu_complete,
	.mpu_abort = file_mpu_abort,
	.mpu_list_parts = file_mpu_list_parts,
	.create_used = file_create_used,
	.close = file_close,
};

/*
 * The bucket path with the symlinks in it resolved, once: its longest
 * existing ancestor through realpath(), the rest (created later by
 * create_bucket or a put) appended as given. Ends with '/'. NULL: no memory.
 */
static char *resolve_root(const char *b)
{
	size_t bl = strlen(b);
	char *p = malloc(bl + 3), *tail = NULL;
	char *out = NULL;

	if (!p)
		return NULL;
	memcpy(p, b, bl + 1);
	while (bl > 1 && p[bl - 1] == '/')
		p[--bl] = '\0';
	for (;;) {
		char *r = realpath(p[0] ? p : ".", NULL);
		char *s;

		if (r) {
			size_t rl = strlen(r), tl = tail ? strlen(tail) : 0;

			out = malloc(rl + tl + 3);
			if (out)
				snprintf(out, rl + tl + 3, "%s%s%s%s", r, r[rl - 1] == '/' ? "" : "/",
					 tail ? tail : "", tl && tail[tl - 1] != '/' ? "/" : "");
			free(r);
			break;
		}
		if (errno != ENOENT || !p[0] || strcmp(p, "/") == 0) {
			/* unresolvable (permissions, ...): keep the path as given */
			out = malloc(strlen(b) + 2);
			if (out)
				snprintf(out, strlen(b) + 2, "%s%s", b,
					 b[0] && b[strlen(b) - 1] == '/' ? "" : "/");
			break;
		}
		/* move the last component of p to the front of tail */
		s = strrchr(p, '/');
		{
			const char *comp = s ? s + 1 : p;
			size_t cl = strlen(comp), tl = tail ? strlen(tail) : 0;
			char *nt = malloc(cl + tl + 2);

			if (!nt)
				break;
			snprintf(nt, cl + tl + 2, "%s%s%s", comp, tl ? "/" : "", tail ? tail : "");
			free(tail);
			tail = nt;
		}
		if (!s)
			p[0] = '\0';
		else if (s == p)
			p[1] = '\0';
		else
			*s = '\0';
	}
	free(p);
	free(tail);
	return out;
}

int jo_obj_file_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err)
{
	struct file_impl *f = calloc(1, sizeof(*f));
	const char *b = opts->bucket;
	size_t bl;

	if (!f)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (strncmp(b, "file://", 7) == 0)
		b += 7;
	if (!*b) {
		free(f);
		return jo_err_set(err, JO_EINVAL, "file: empty bucket directory");
	}
	f->root = resolve_root(b);
	if (!f->root) {
		free(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	f->root_len = strlen(f->root);
	f->list_temp = opts->list_temp;
	f->list_links = opts->list_links;
	o->impl = f;
	o->ops = &file_ops;
	bl = strlen(b);
	snprintf(o->desc, sizeof(o->desc), "file://%s%s", b, bl && b[bl - 1] == '/' ? "" : "/");
	return 0;
}
