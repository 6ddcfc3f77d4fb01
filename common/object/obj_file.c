/*
 * obj_file.c: the "file" backend, laid out as JuiceFS's file storage does:
 * key -> path bucket + key, puts go through a temp file
 * ".jfs.<base>.tmp.<rand>" in the same directory and rename().
 * Listings walk the tree sorting siblings by their full key (a directory
 * sorts as "name/"), which makes the whole stream S3 byte order.
 */
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
#include "common/err.h"
#include "common/object/obj_sigv4.h"

struct file_impl {
	char *root;      /* ends with '/' */
	size_t root_len;
	bool list_temp;  /* list JuiceFS's ".jfs.*.tmp.*" files too */
};

static struct file_impl *FI(struct jo_obj *o)
{
	return o->impl;
}

/* a + b in a new allocation, or NULL. */
static char *join2(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = malloc(la + lb + 1);

	if (!p)
		return NULL;
	memcpy(p, a, la);
	memcpy(p + la, b, lb + 1);
	return p;
}

static int errno_code(int e)
{
	switch (e) {
	case ENOENT:
	case ENOTDIR:
		return JO_ENOTFOUND;
	case ENOMEM:
		return JO_ENOMEM;
	case EACCES:
	case EPERM:
		return JO_EAUTH;
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

static char *key_path(struct jo_obj *o, const char *key)
{
	struct file_impl *f = FI(o);
	size_t kl = strlen(key);
	char *p = malloc(f->root_len + kl + 1);

	if (!p)
		return NULL;
	memcpy(p, f->root, f->root_len);
	memcpy(p + f->root_len, key, kl + 1);
	return p;
}

static int mkdirs(char *path, size_t upto)
{
	/* Create every directory of path[0..upto) (path is modified and restored). */
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

static size_t dir_len(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? (size_t)(s - path) : 0;
}

static int random_u32(uint32_t *v)
{
	if (RAND_bytes((unsigned char *)v, sizeof(*v)) != 1)
		*v = (uint32_t)rand(); /* any value works: the name only has to be unlikely to clash */
	return 0;
}

/* ".jfs.<base (at most 200 bytes)>.tmp.<n>" next to path. */
static char *temp_path(const char *path, const char *tag)
{
	size_t dl = dir_len(path);
	const char *base = path + dl + 1;
	size_t bl = strlen(base);
	uint32_t r;
	char *t;
	size_t cap;

	if (bl > 200)
		bl = 200;
	random_u32(&r);
	cap = dl + bl + 64 + strlen(tag);
	t = malloc(cap);
	if (!t)
		return NULL;
	snprintf(t, cap, "%.*s/.jfs.%.*s.tmp.%s%u", (int)dl, path, (int)bl, base, tag, r);
	return t;
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t w = write(fd, p, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Open a temp file next to path, creating the directories on demand. */
static int open_temp(char *path, const char *tag, char **tmp_out)
{
	char *tmp = temp_path(path, tag);
	int fd;

	*tmp_out = NULL;
	if (!tmp) {
		errno = ENOMEM;
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0 && errno == ENOENT) {
		if (mkdirs(path, dir_len(path)) == 0)
			fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	}
	if (fd < 0) {
		int e = errno;

		free(tmp);
		errno = e;
		return -1;
	}
	*tmp_out = tmp;
	return fd;
}

static int file_put_path(struct jo_obj *o, char *path, const char *key, const void *data,
			 size_t len, struct jo_err *err)
{
	char *tmp;
	int fd = open_temp(path, "", &tmp);

	if (fd < 0)
		return jo_err_set(err, errno_code(errno), "file: put '%s' in %s: %s", key, o->desc,
				  strerror(errno));
	if (write_all(fd, data, len) < 0 || close(fd) < 0) {
		int e = errno;

		unlink(tmp);
		free(tmp);
		return jo_err_set(err, errno_code(e), "file: write '%s': %s", key, strerror(e));
	}
	if (rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		free(tmp);
		return jo_err_set(err, errno_code(e), "file: rename into '%s': %s", key, strerror(e));
	}
	free(tmp);
	atomic_fetch_add(&o->ctr->bytes_out, len);
	return 0;
}

static int file_put(struct jo_obj *o, const char *key, const void *data, size_t len,
		    const struct jo_obj_put_opts *po, struct jo_err *err)
{
	char *path;
	int rc;

	(void)po; /* content type and metadata have no place in a plain file */
	rc = check_path_key(key, err);
	if (rc)
		return rc;
	path = key_path(o, key);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	if (key[strlen(key) - 1] == '/') {
		/* A directory marker, as JuiceFS stores it: just the directory. */
		rc = mkdirs(path, strlen(path) - 1) < 0
			     ? jo_err_set(err, errno_code(errno), "file: mkdir '%s': %s", key,
					  strerror(errno))
			     : 0;
	} else {
		rc = file_put_path(o, path, key, data, len, err);
	}
	if (rc)
		atomic_fetch_add(&o->ctr->errors, 1);
	free(path);
	return rc;
}

static void fill_info(struct jo_obj_info *info, const struct stat *st)
{
	info->size = (uint64_t)st->st_size;
	info->mtime = (int64_t)st->st_mtim.tv_sec;
	info->mtime_nsec = (int32_t)st->st_mtim.tv_nsec;
	info->etag[0] = '\0';
}

static int file_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		    jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	char *path, buf[65536];
	struct stat st;
	uint64_t pos, end;
	int fd, rc = 0;

	rc = check_path_key(key, err);
	if (rc)
		return rc;
	path = key_path(o, key);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0 || fstat(fd, &st) < 0 || S_ISDIR(st.st_mode)) {
		int e = fd < 0 ? errno : (S_ISDIR(st.st_mode) ? ENOENT : errno);

		if (fd >= 0)
			close(fd);
		atomic_fetch_add(&o->ctr->errors, 1);
		return jo_err_set(err, errno_code(e), "file: get '%s' in %s: %s", key, o->desc,
				  strerror(e));
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
	char *path;
	struct stat st;
	int rc;

	rc = check_path_key(key, err);
	if (rc)
		return rc;
	path = key_path(o, key);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	rc = stat(path, &st);
	free(path);
	if (rc < 0 || S_ISDIR(st.st_mode)) {
		int e = rc < 0 ? errno : ENOENT;

		return jo_err_set(err, errno_code(e), "file: head '%s' in %s: %s", key, o->desc,
				  strerror(e));
	}
	fill_info(info, &st);
	if (meta_out) {
		*meta_out = calloc(1, sizeof(char *));
		if (!*meta_out)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

static int file_del(struct jo_obj *o, const char *key, struct jo_err *err)
{
	char *path;
	int rc;

	rc = check_path_key(key, err);
	if (rc)
		return rc;
	path = key_path(o, key);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	if (key[strlen(key) - 1] == '/')
		rc = rmdir(path);
	else
		rc = unlink(path);
	free(path);
	if (rc < 0 && errno != ENOENT && errno != ENOTEMPTY) {
		atomic_fetch_add(&o->ctr->errors, 1);
		return jo_err_set(err, errno_code(errno), "file: delete '%s' in %s: %s", key,
				  o->desc, strerror(errno));
	}
	return 0;
}

static int file_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			     struct jo_err *err)
{
	struct jo_err e1;

	for (size_t i = 0; i < n; i++) {
		if (jo_cancelled())
			return jo_err_set(err, JO_ECANCELED, "file: delete: canceled");
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

struct dent {
	char *key;        /* full key; directories end with '/' */
	bool dir;
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

static int walk_dir(struct walk *w, const char *dirpath, const char *keyprefix)
{
	DIR *d = opendir(dirpath);
	struct dirent *de;
	struct dent *ents = NULL;
	size_t n = 0, cap = 0, kpl = strlen(keyprefix);
	int rc = 0;

	if (!d) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return jo_err_set(w->err, errno_code(errno), "file: list '%s': %s", dirpath,
				  strerror(errno));
	}
	for (;;) {
		size_t nl;
		bool dir;
		char *k;

		/* readdir's NULL is the end only when errno stayed 0: an error in
		 * the middle of a directory must not pass for the end of its listing */
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				rc = jo_err_set(w->err, errno_code(errno), "file: list '%s': %s",
						dirpath, strerror(errno));
			break;
		}
		nl = strlen(de->d_name);

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (is_temp_name(de->d_name) && !FI(w->o)->list_temp)
			continue;
		if (de->d_type == DT_DIR) {
			dir = true;
		} else if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) {
			struct stat st;
			char *p = join2(dirpath, de->d_name);

			if (!p) {
				rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
				break;
			}
			dir = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
			free(p);
		} else {
			dir = false;
		}
		k = malloc(kpl + nl + 2);
		if (!k) {
			rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
			break;
		}
		memcpy(k, keyprefix, kpl);
		memcpy(k + kpl, de->d_name, nl);
		if (dir)
			k[kpl + nl++] = '/';
		k[kpl + nl] = '\0';
		/* Prune what cannot match the prefix. */
		if (!(starts_with(k, w->prefix, w->prefix_len) ||
		      (dir && starts_with(w->prefix, k, kpl + nl)))) {
			free(k);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct dent *np = realloc(ents, nc * sizeof(*np));

			if (!np) {
				free(k);
				rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
				break;
			}
			ents = np;
			cap = nc;
		}
		ents[n].key = k;
		ents[n].dir = dir;
		n++;
	}
	closedir(d);
	if (rc == 0 && n)
		qsort(ents, n, sizeof(*ents), cmp_dent);
	for (size_t i = 0; i < n && rc == 0; i++) {
		const char *k = ents[i].key;
		size_t kl = strlen(k);

		if (jo_cancelled()) {
			rc = jo_err_set(w->err, JO_ECANCELED, "list: canceled");
			break;
		}
		if (ents[i].dir) {
			char *sub;

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
			sub = join2(FI(w->o)->root, k);
			if (!sub) {
				rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
				break;
			}
			rc = walk_dir(w, sub, k);
			free(sub);
		} else {
			struct stat st;
			char *p;

			if (!starts_with(k, w->prefix, w->prefix_len))
				continue;
			if (w->start_after && strcmp(k, w->start_after) <= 0)
				continue;
			p = join2(FI(w->o)->root, k);
			if (!p) {
				rc = jo_err_set(w->err, JO_ENOMEM, "out of memory");
				break;
			}
			if (stat(p, &st) < 0) {
				free(p);
				continue; /* deleted while listing */
			}
			free(p);
			rc = emit(w, k, &st, false);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(ents[i].key);
	free(ents);
	return rc;
}

static int file_list(struct jo_obj *o, const char *prefix, const char *start_after,
		     const char *delimiter, jo_obj_list_cb cb, void *payload, struct jo_err *err)
{
	struct walk w = { .o = o, .prefix = prefix, .prefix_len = strlen(prefix),
			  .start_after = start_after, .delim = delimiter, .cb = cb,
			  .payload = payload, .err = err };
	struct file_impl *f = FI(o);
	size_t dl = 0;
	char *dir, *kp;
	int rc;

	/* Start at the deepest directory the prefix names completely. */
	for (size_t i = 0; i < w.prefix_len; i++)
		if (prefix[i] == '/')
			dl = i + 1;
	kp = strndup(prefix, dl);
	dir = kp ? join2(f->root, kp) : NULL;
	if (!kp || !dir) {
		free(kp);
		free(dir);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	atomic_fetch_add(&o->ctr->requests, 1);
	rc = walk_dir(&w, dir, kp);
	free(w.last_cp);
	free(kp);
	free(dir);
	return rc;
}

static int file_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	struct file_impl *f = FI(o);

	if (mkdirs(f->root, f->root_len - 1) < 0)
		return jo_err_set(err, errno_code(errno), "file: create %s: %s", o->desc,
				  strerror(errno));
	return 0;
}

/* Stream src's bytes into a temp file and rename it over dst. */
static int copy_file(struct jo_obj *o, const char *src_key, char *dst_path, const char *dst_key,
		     struct jo_err *err)
{
	char *src = key_path(o, src_key), *tmp = NULL, buf[65536];
	int in = -1, out = -1, rc = 0;

	if (!src)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	in = open(src, O_RDONLY | O_CLOEXEC);
	free(src);
	if (in < 0)
		return jo_err_set(err, errno_code(errno), "file: copy from '%s': %s", src_key,
				  strerror(errno));
	out = open_temp(dst_path, "", &tmp);
	if (out < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: copy to '%s': %s", dst_key,
				strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t r = read(in, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || (r > 0 && write_all(out, buf, (size_t)r) < 0)) {
			rc = jo_err_set(err, JO_EIO, "file: copy '%s': %s", src_key, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
	}
	if (close(out) < 0 || rename(tmp, dst_path) < 0)
		rc = jo_err_set(err, JO_EIO, "file: copy to '%s': %s", dst_key, strerror(errno));
	out = -1;
out:
	if (out >= 0)
		close(out);
	if (rc && tmp)
		unlink(tmp);
	free(tmp);
	close(in);
	return rc;
}

static int file_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		     const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	char *dst;
	int rc;

	if (co->src_bucket)
		return jo_err_set(err, JO_EUNSUPPORTED, "file: copy from another bucket");
	rc = check_path_key(src_key, err);
	if (rc == 0)
		rc = check_path_key(dst_key, err);
	if (rc)
		return rc;
	dst = key_path(o, dst_key);
	if (!dst)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	rc = copy_file(o, src_key, dst, dst_key, err);
	free(dst);
	return rc;
}

/* ---- multipart: parts are hidden temp files next to the key ---- */

static char *part_path(struct jo_obj *o, const char *key, const char *upload_id, int part)
{
	char *path = key_path(o, key), *out;
	size_t dl, bl, cap;
	const char *base;

	if (!path)
		return NULL;
	dl = dir_len(path);
	base = path + dl + 1;
	bl = strlen(base);
	if (bl > 150)
		bl = 150;
	cap = dl + bl + strlen(upload_id) + 48;
	out = malloc(cap);
	if (out)
		snprintf(out, cap, "%.*s/.jfs.%.*s.tmp.mpu-%s-%05d", (int)dl, path, (int)bl, base,
			 upload_id, part);
	free(path);
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

static int file_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			   char **upload_id_out, struct jo_err *err)
{
	unsigned char r[12];
	char id[25], *marker;
	int rc;

	(void)po;
	rc = check_path_key(key, err);
	if (rc)
		return rc;
	if (RAND_bytes(r, sizeof(r)) != 1)
		return jo_err_set(err, JO_EIO, "file: no randomness for an upload id");
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(id + 2 * i, 3, "%02x", r[i]);
	marker = part_path(o, key, id, 0);
	if (!marker)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = file_put_path(o, marker, key, "", 0, err);
	free(marker);
	if (rc)
		return rc;
	*upload_id_out = strdup(id);
	return *upload_id_out ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

static int file_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			     int part_number, const void *data, size_t len, char *etag_out,
			     struct jo_err *err)
{
	char *marker, *p;
	struct stat st;
	int rc;

	if (!valid_upload_id(upload_id))
		return jo_err_set(err, JO_ENOTFOUND, "file: no upload '%s'", upload_id);
	marker = part_path(o, key, upload_id, 0);
	p = part_path(o, key, upload_id, part_number);
	if (!marker || !p) {
		free(marker);
		free(p);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (stat(marker, &st) < 0)
		rc = jo_err_set(err, JO_ENOTFOUND, "file: upload part '%s': NoSuchUpload", key);
	else
		rc = file_put_path(o, p, key, data, len, err);
	if (rc == 0)
		jo_obj_md5_hex(data, len, etag_out);
	free(marker);
	free(p);
	return rc;
}

static int remove_parts(struct jo_obj *o, const char *key, const char *upload_id)
{
	char *marker = part_path(o, key, upload_id, 0);
	size_t ml;
	char *dir;
	DIR *d;
	struct dirent *de;

	if (!marker)
		return JO_ENOMEM;
	ml = strlen(marker) - 5; /* up to the part number */
	dir = strndup(marker, dir_len(marker) + 1);
	d = dir ? opendir(dir) : NULL;
	while (d && (de = readdir(d)) != NULL) {
		size_t dl = strlen(dir);

		if (strncmp(de->d_name, marker + dl, ml - dl) == 0) {
			char *p = join2(dir, de->d_name);

			if (p) {
				unlink(p);
				free(p);
			}
		}
	}
	if (d)
		closedir(d);
	free(dir);
	free(marker);
	return 0;
}

static int file_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			     const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	char *path = NULL, *tmp = NULL, buf[65536];
	int out = -1, rc = 0;

	if (!valid_upload_id(upload_id))
		return jo_err_set(err, JO_ENOTFOUND, "file: no upload '%s'", upload_id);
	path = key_path(o, key);
	if (!path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	atomic_fetch_add(&o->ctr->requests, 1);
	out = open_temp(path, "", &tmp);
	if (out < 0) {
		rc = jo_err_set(err, errno_code(errno), "file: complete '%s': %s", key,
				strerror(errno));
		goto done;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *pp = part_path(o, key, upload_id, parts[i].number);
		int in = pp ? open(pp, O_RDONLY | O_CLOEXEC) : -1;

		free(pp);
		if (in < 0) {
			rc = jo_err_set(err, JO_EINVAL, "file: complete '%s': InvalidPart %d", key,
					parts[i].number);
			break;
		}
		for (;;) {
			ssize_t r = read(in, buf, sizeof(buf));

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 || (r > 0 && write_all(out, buf, (size_t)r) < 0)) {
				rc = jo_err_set(err, JO_EIO, "file: complete '%s': %s", key,
						strerror(errno));
				break;
			}
			if (r == 0)
				break;
		}
		close(in);
	}
	if (close(out) < 0 && rc == 0)
		rc = jo_err_set(err, JO_EIO, "file: complete '%s': %s", key, strerror(errno));
	if (rc == 0 && rename(tmp, path) < 0)
		rc = jo_err_set(err, JO_EIO, "file: complete '%s': %s", key, strerror(errno));
	if (rc == 0)
		remove_parts(o, key, upload_id);
done:
	if (rc && tmp)
		unlink(tmp);
	free(tmp);
	free(path);
	return rc;
}

static int file_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
			  struct jo_err *err)
{
	if (!valid_upload_id(upload_id))
		return 0;
	if (remove_parts(o, key, upload_id) < 0)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int cmp_part(const void *a, const void *b)
{
	return ((const struct jo_obj_part *)a)->number - ((const struct jo_obj_part *)b)->number;
}

static int file_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			       jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	struct jo_obj_part *parts = NULL;
	size_t n = 0;
	int rc = 0;

	if (!valid_upload_id(upload_id))
		return jo_err_set(err, JO_ENOTFOUND, "file: no upload '%s'", upload_id);
	/* Part numbers are few; probing them by name keeps this simple. */
	for (int i = 1; i <= 10000 && rc == 0; i++) {
		char *pp = part_path(o, key, upload_id, i);
		struct stat st;

		if (!pp)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		if (stat(pp, &st) == 0) {
			struct jo_obj_part *np = realloc(parts, (n + 1) * sizeof(*np));

			if (!np) {
				free(pp);
				free(parts);
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			}
			parts = np;
			memset(&parts[n], 0, sizeof(parts[n]));
			parts[n].number = i;
			parts[n].size = (uint64_t)st.st_size;
			n++;
		}
		free(pp);
	}
	qsort(parts, n, sizeof(*parts), cmp_part);
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = cb(&parts[i], payload);
		if (rc)
			jo_err_set(err, rc, "list parts: stopped by the callback");
	}
	free(parts);
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
	.close = file_close,
};

int jo_obj_file_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err)
{
	struct file_impl *f = calloc(1, sizeof(*f));
	const char *b = opts->bucket;
	size_t bl;

	if (!f)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (strncmp(b, "file://", 7) == 0)
		b += 7;
	bl = strlen(b);
	f->root = malloc(bl + 2);
	if (!f->root) {
		free(f);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	memcpy(f->root, b, bl + 1);
	if (bl == 0 || f->root[bl - 1] != '/') {
		f->root[bl++] = '/';
		f->root[bl] = '\0';
	}
	f->root_len = bl;
	f->list_temp = opts->list_temp;
	o->impl = f;
	o->ops = &file_ops;
	snprintf(o->desc, sizeof(o->desc), "file://%s", f->root);
	return 0;
}
