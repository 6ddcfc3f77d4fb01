/*
 * leakcheck: phase two. Delete the leak candidates of a report after
 * re-checking each against the metadata and its age, optionally saving every
 * object into a tar.zst quarantine archive first; and restore such an archive.
 */
#include "leakcheck/leak.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/file.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "common/object/object.h"
#include "leakcheck/la.h"

#define DEL_GROUP 1000000         /* candidates re-checked per metadata scan */
#define DEL_MAX_LINE (64u << 10)
#define DEL_MAX_OBJECT ((size_t)64 << 20)

struct cand {
	char *key;
	uint64_t id;
	uint32_t indx, bsize;
	uint64_t size;
	int64_t mtime;
	char reason[24];
	const char *result;       /* static: NULL = still a candidate */
	char fail[160];           /* failure detail */
	bool settled;             /* counted and audited */
};

struct delctx {
	struct jo_vol *v;
	const struct leak_delete_opts *o;
	struct leak_delete_stats *st;
	FILE *audit;
	const struct jo_la *la;   /* libarchive, loaded for a quarantine */
	struct archive *ar;
	struct jo_file *ar_file;  /* the archive, under a temp name until committed */
	char *ar_path;
	unsigned ar_seq;
	double t0;
	uint64_t done_deletes;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fmt_time(int64_t t, char *buf, size_t cap)
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The audit file, appended to (shared by --delete-from and --restore). */
static int audit_open(const char *path, FILE **out, struct jo_err *err)
{
	int afd, rc;

	*out = NULL;
	/* not through a planted link, nor into another user's file (common/file.h) */
	rc = jo_file_append_open(&afd, path, JO_FILE_PUBLIC, err);
	if (rc)
		return jo_err_wrap(err, "audit");
	*out = fdopen(afd, "a");
	if (!*out) {
		rc = jo_err_set(err, JO_ENOMEM, "cannot open audit '%s': %s", path, strerror(errno));
		close(afd);
	}
	return rc;
}

/* One audit line (no-op without an audit). */
static int audit_write(FILE *audit, const char *path, const char *key, const char *reason,
		       const char *result, uint64_t slice, uint64_t size, struct jo_err *err)
{
	char ts[32];
	json_t *j;
	char *s;
	int rc = 0;

	if (!audit)
		return 0;
	fmt_time(time(NULL), ts, sizeof(ts));
	j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "time", ts, "key", key, "reason", reason,
		      "result", result, "slice", (json_int_t)slice, "size", (json_int_t)size);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s || fprintf(audit, "%s\n", s) < 0)
		rc = jo_err_set(err, JO_EIO, "audit '%s': write failed", path);
	free(s);
	json_decref(j);
	return rc;
}

/*
 * Make the lines written so far durable before the work they announce or
 * follow goes on: fflush hands them to the kernel (a SIGKILL after it loses
 * none), fsync to the disk (a crash neither).
 */
static int audit_sync(FILE *audit, const char *path, struct jo_err *err)
{
	if (!audit)
		return 0;
	if (fflush(audit) != 0 || fsync(fileno(audit)) != 0)
		return jo_err_set(err, JO_EIO, "audit '%s': %s", path, strerror(errno));
	return 0;
}

static int audit_line(struct delctx *d, const struct cand *c, const char *result,
		      struct jo_err *err)
{
	return audit_write(d->audit, d->o->audit, c->key, c->reason, result, c->id, c->size, err);
}

/* Count and audit x if its verdict is in and it was not counted yet. */
static int settle_one(struct delctx *d, struct cand *x, struct jo_err *err)
{
	if (!x->result || x->settled)
		return 0;
	x->settled = true;
	if (!strcmp(x->result, "deleted")) {
		d->st->deleted++;
		d->st->deleted_bytes += x->size;
	} else if (!strcmp(x->result, "would delete")) {
		d->st->would_delete++;
		d->st->would_delete_bytes += x->size;
	} else if (!strcmp(x->result, "failed")) {
		d->st->failed++;
	} else {
		d->st->kept++;
	}
	return audit_line(d, x, x->fail[0] ? x->fail : x->result, err);
}

/*
 * settle_one every candidate of the group (idx NULL) or the k of idx, then
 * make the audit durable: called after each step, before the next one
 * changes anything.
 */
static int settle(struct delctx *d, struct cand *c, const size_t *idx, size_t k,
		  struct jo_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < k && !rc; i++)
		rc = settle_one(d, &c[idx ? idx[i] : i], err);
	if (!rc)
		rc = audit_sync(d->audit, d->o->audit, err);
	return rc;
}

static void cand_free(struct cand *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(c[i].key);
	free(c);
}

/* Parse one candidates line; returns 1 for a leaked candidate, 0 to skip. */
static int parse_line(struct delctx *d, const char *line, size_t lineno, struct cand *c,
		      struct jo_err *err)
{
	json_error_t je;
	json_t *j = json_loads(line, 0, &je);
	const char *type = NULL, *key = NULL, *reason = "unreferenced";
	json_int_t size = 0, mtime = 0;
	char canon[1200];
	int rc = 0;

	if (!j)
		return jo_err_set(err, JO_EPROTO, "%s:%zu: not JSON: %s", d->o->from, lineno, je.text);
	if (json_unpack(j, "{s:s, s?s, s?s, s?I, s?I}", "type", &type, "key", &key, "reason",
			&reason, "size", &size, "mtime", &mtime) != 0) {
		rc = jo_err_set(err, JO_EPROTO, "%s:%zu: not a leakcheck record", d->o->from, lineno);
		goto out;
	}
	if (strcmp(type, "leaked") != 0)
		goto out; /* missing/skipped/foreign/summary lines are not deleted */
	if (!key || jo_block_parse(key, &c->id, &c->indx, &c->bsize) != 0 ||
	    jo_vol_block_key(d->v, canon, sizeof(canon), c->id, c->indx, c->bsize) < 0 ||
	    strcmp(canon, key) != 0) {
		rc = jo_err_set(err, JO_EPROTO, "%s:%zu: '%s' is not a block key of volume '%s'",
				d->o->from, lineno, key ? key : "", d->v->fmt.name);
		goto out;
	}
	c->key = strdup(key);
	if (!c->key) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	c->size = (uint64_t)size;
	c->mtime = mtime;
	snprintf(c->reason, sizeof(c->reason), "%s", reason);
	rc = 1;
out:
	json_decref(j);
	return rc;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int hit_cmp(const void *a, const void *b)
{
	const struct leak_ref_hit *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Re-check the group against a fresh scan of the metadata and the counter. */
static int recheck_meta(struct delctx *d, struct cand *c, size_t n, struct jo_err *err)
{
	uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	struct leak_ref_hit *hits = NULL;
	size_t nids = 0, nhits = 0;
	int64_t next_chunk = 0;
	int rc;

	if (!ids)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_meta_get_counter(d->v->meta, "nextChunk", &next_chunk, err);
	if (rc) {
		free(ids);
		return jo_err_wrap(err, "read nextChunk");
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = c[i].id;
	qsort(ids, n, sizeof(*ids), u64_cmp);
	for (size_t i = 0; i < n; i++)
		if (nids == 0 || ids[nids - 1] != ids[i])
			ids[nids++] = ids[i];
	rc = leak_refs_lookup(d->v->meta, ids, nids, &hits, &nhits, err);
	free(ids);
	if (rc)
		return jo_err_wrap(err, "re-check references");
	/* what was read must be known durable: a failover of the engine could
	 * bring back references that the server read here no longer had */
	rc = jo_mut_confirm(d->v->meta, err);
	if (rc) {
		free(hits);
		return jo_err_wrap(err, "re-check references");
	}
	if (nhits)
		qsort(hits, nhits, sizeof(*hits), hit_cmp);
	for (size_t i = 0; i < n; i++) {
		struct leak_ref_hit key = { .id = c[i].id };
		struct leak_ref_hit *h = nhits ? bsearch(&key, hits, nhits, sizeof(*hits), hit_cmp) : NULL;

		if ((int64_t)c[i].id >= next_chunk) {
			c[i].result = "kept: slice id not below the counter";
			continue;
		}
		if (!h)
			continue;
		while (h > hits && h[-1].id == c[i].id)
			h--;
		for (; h < hits + nhits && h->id == c[i].id; h++) {
			if (jo_block_valid(h->size, d->v->block_size, c[i].indx, c[i].bsize)) {
				c[i].result = "kept: referenced";
				break;
			}
		}
	}
	free(hits);
	return 0;
}

/* The verdict on c when reading its object (the step what) ended with rc:
 * true when that settles it (gone: kept; any other error: failed). */
static bool settled_by(struct cand *c, int rc, const char *what, const struct jo_err *e)
{
	if (rc == JO_ENOTFOUND) {
		c->result = "kept: already gone";
	} else if (rc) {
		c->result = "failed";
		snprintf(c->fail, sizeof(c->fail), "failed: %s: %.120s", what, e->msg);
	}
	return rc != 0;
}

static int recheck_object(struct delctx *d, struct cand *c)
{
	struct jo_obj_info info;
	struct jo_err e = { 0 };
	int rc = jo_obj_head(d->v->obj, c->key, &info, &e);
	int64_t now = (int64_t)time(NULL);

	if (settled_by(c, rc, "head", &e))
		return 0;
	if (info.mtime > now - d->o->min_age)
		c->result = "kept: too young";
	else if (info.size != c->size || (c->mtime && info.mtime != c->mtime))
		c->result = "kept: changed since the report";
	return 0;
}

static int archive_open(struct delctx *d, struct jo_err *err)
{
	size_t len = strlen(d->o->quarantine) + 32;
	struct stat st;

	d->ar_path = malloc(len);
	if (!d->ar_path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (d->ar_seq == 0)
		snprintf(d->ar_path, len, "%s", d->o->quarantine);
	else
		snprintf(d->ar_path, len, "%s.%u", d->o->quarantine, d->ar_seq);
	if (lstat(d->ar_path, &st) == 0) /* a symlink there (even dangling) counts too */
		return jo_err_set(err, JO_EINVAL, "quarantine archive '%s' already exists",
				  d->ar_path);
	if (!d->la) {
		int rc = jo_la_load(&d->la, err);

		if (rc)
			return rc;
	}
	/* raw block data: 0600 whatever the umask, never replacing an archive */
	if (jo_file_create(&d->ar_file, d->ar_path, JO_FILE_PRIVATE, JO_FILE_NOREPLACE, err))
		return jo_err_wrap(err, "quarantine");
	d->ar = d->la->archive_write_new();
	if (!d->ar || d->la->archive_write_add_filter_zstd(d->ar) != ARCHIVE_OK ||
	    d->la->archive_write_set_format_pax_restricted(d->ar) != ARCHIVE_OK ||
	    d->la->archive_write_open_fd(d->ar, d->ar_file->fd) != ARCHIVE_OK)
		return jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_path,
				  d->ar ? d->la->archive_error_string(d->ar) : "out of memory");
	return 0;
}

/* Close the archive, fsync it and publish it under its final name. */
static int archive_commit(struct delctx *d, struct jo_err *err)
{
	int rc = 0;

	/* archive_write_open_fd leaves the descriptor open: the commit closes it */
	if (d->la->archive_write_close(d->ar) != ARCHIVE_OK)
		rc = jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_path,
				d->la->archive_error_string(d->ar));
	d->la->archive_write_free(d->ar);
	d->ar = NULL;
	if (rc)
		return rc;
	rc = jo_file_commit(d->ar_file, err);
	return rc ? jo_err_wrap(err, "quarantine") : 0;
}

static void archive_abort(struct delctx *d)
{
	if (d->ar) {
		d->la->archive_write_free(d->ar);
		d->ar = NULL;
	}
	jo_file_abort(d->ar_file); /* an incomplete archive protects nothing */
	d->ar_file = NULL;
	free(d->ar_path);
	d->ar_path = NULL;
}

static int quarantine_one(struct delctx *d, struct cand *c, struct jo_err *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	struct jo_err e = { 0 };
	struct archive_entry *ae;
	int rc = jo_obj_get_buf(d->v->obj, c->key, 0, -1, DEL_MAX_OBJECT, &data, &len, &e);

	if (settled_by(c, rc, "quarantine get", &e))
		return 0;
	ae = d->la->archive_entry_new();
	if (!ae) {
		free(data);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	d->la->archive_entry_set_pathname(ae, c->key);
	d->la->archive_entry_set_filetype(ae, AE_IFREG);
	d->la->archive_entry_set_perm(ae, 0644);
	d->la->archive_entry_set_size(ae, (la_int64_t)len);
	d->la->archive_entry_set_mtime(ae, c->mtime, 0);
	if (d->la->archive_write_header(d->ar, ae) != ARCHIVE_OK ||
	    (len && d->la->archive_write_data(d->ar, data, len) != (la_ssize_t)len))
		rc = jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_path,
				d->la->archive_error_string(d->ar));
	d->la->archive_entry_free(ae);
	free(data);
	if (!rc)
		d->st->quarantined++;
	return rc;
}

static void rate_wait(struct delctx *d, size_t n)
{
	d->done_deletes += n;
	if (d->o->rate <= 0)
		return;
	double due = d->t0 + (double)d->done_deletes / d->o->rate;
	double wait = due - now_s();

	while (wait > 0 && !jo_cancelled()) {
		double step = wait > 0.2 ? 0.2 : wait;
		struct timespec ts = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };

		nanosleep(&ts, NULL);
		wait = due - now_s();
	}
}

/*
 * One group of candidates: re-check (metadata, then a HEAD each),
 * quarantine, then delete in batches. The audit is settled after every step
 * (see leak_delete in leak.h): a batch's keys get a "deleting" line, made
 * durable, before its request, and their results before the next batch.
 */
static int process_group(struct delctx *d, struct cand *c, size_t n, struct jo_err *err)
{
	size_t batch = d->o->batch ? d->o->batch : 1000;
	const char **keys = NULL;
	size_t *idx = NULL;
	int *res = NULL;
	int rc;

	rc = recheck_meta(d, c, n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !jo_cancelled(); i++)
		if (!c[i].result)
			recheck_object(d, &c[i]);
	rc = settle(d, c, NULL, n, err);
	if (rc)
		return rc;
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "canceled");
	if (d->o->quarantine && !d->o->dry_run) {
		rc = archive_open(d, err);
		for (size_t i = 0; i < n && !rc; i++) {
			if (!c[i].result)
				rc = quarantine_one(d, &c[i], err);
			if (!rc && jo_cancelled())
				rc = jo_err_set(err, JO_ECANCELED, "canceled");
		}
		if (!rc)
			rc = archive_commit(d, err);
		archive_abort(d);
		d->ar_seq++;
		if (rc)
			return rc; /* nothing deleted without its archive */
		rc = settle(d, c, NULL, n, err); /* gone or failed while being archived */
		if (rc)
			return rc;
	}
	if (d->o->dry_run) {
		for (size_t i = 0; i < n; i++)
			if (!c[i].result)
				c[i].result = "would delete";
		return settle(d, c, NULL, n, err);
	}
	keys = malloc(batch * sizeof(*keys));
	idx = malloc(batch * sizeof(*idx));
	res = malloc(batch * sizeof(*res));
	if (!keys || !idx || !res) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n && !rc;) {
		struct jo_err e = { 0 };
		size_t k = 0;
		int brc;

		for (; i < n && k < batch; i++) {
			if (c[i].result)
				continue;
			keys[k] = c[i].key;
			idx[k++] = i;
		}
		if (k == 0)
			break;
		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "canceled");
			break;
		}
		/* the audit says what is about to go before it goes */
		for (size_t j = 0; j < k && !rc; j++)
			rc = audit_line(d, &c[idx[j]], "deleting", err);
		if (!rc)
			rc = audit_sync(d->audit, d->o->audit, err);
		if (rc)
			break; /* no deletion without its audit line */
		brc = jo_obj_delete_batch(d->v->obj, keys, k, res, &e);
		for (size_t j = 0; j < k; j++) {
			struct cand *x = &c[idx[j]];
			int r = brc ? brc : res[j];

			if (r == 0) {
				x->result = "deleted";
			} else {
				x->result = "failed";
				snprintf(x->fail, sizeof(x->fail), "failed: delete: %.120s",
					 brc ? e.msg : jo_err_name(r));
			}
		}
		rc = settle(d, c, idx, k, err);
		if (!rc)
			rate_wait(d, k);
	}
out:
	free(keys);
	free(idx);
	free(res);
	return rc;
}

int leak_delete(struct jo_vol *v, const struct leak_delete_opts *o, struct leak_delete_stats *st,
		struct jo_err *err)
{
	struct delctx d = { .v = v, .o = o, .st = st, .t0 = now_s() };
	struct cand *c = NULL;
	size_t n = 0, lineno = 0, cap = 0;
	char *line = NULL;
	size_t lcap = 0;
	FILE *in;
	int rc = 0;

	memset(st, 0, sizeof(*st));
	in = fopen(o->from, "r");
	if (!in)
		return jo_err_set(err, JO_EIO, "cannot open '%s': %s", o->from, strerror(errno));
	if (o->audit) {
		rc = audit_open(o->audit, &d.audit, err);
		if (rc)
			goto out;
	}
	for (;;) {
		ssize_t got = getline(&line, &lcap, in);

		if (got < 0)
			break;
		lineno++;
		if ((size_t)got > DEL_MAX_LINE) {
			rc = jo_err_set(err, JO_EPROTO, "%s:%zu: line too long", o->from, lineno);
			break;
		}
		if (got <= 1)
			continue;
		if (jo_grow_array(&c, &cap, n + 1, sizeof(*c))) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		memset(&c[n], 0, sizeof(c[n]));
		int prc = parse_line(&d, line, lineno, &c[n], err);

		if (prc < 0) {
			rc = prc;
			break;
		}
		if (prc == 1) {
			n++;
			st->candidates++;
		}
		if (n == DEL_GROUP) {
			rc = process_group(&d, c, n, err);
			cand_free(c, n);
			c = NULL;
			n = cap = 0;
			if (rc)
				break;
		}
	}
	if (!rc && ferror(in))
		rc = jo_err_set(err, JO_EIO, "read '%s': %s", o->from, strerror(errno));
	if (!rc && n)
		rc = process_group(&d, c, n, err);
out:
	cand_free(c, n);
	free(line);
	fclose(in);
	if (d.audit && fclose(d.audit) != 0 && !rc)
		rc = jo_err_set(err, JO_EIO, "audit '%s': %s", o->audit, strerror(errno));
	return rc;
}

/* ---- restore ---- */

struct restore {
	struct jo_vol *v;
	const char *path;
	const struct jo_la *la;
	int fd;                   /* the archive, read twice through the same file */
	struct archive *a;
	uint8_t *buf;             /* DEL_MAX_OBJECT bytes */
};

/* (Re)start reading the archive from its first byte. */
static int restore_rewind(struct restore *r, struct jo_err *err)
{
	if (r->a)
		r->la->archive_read_free(r->a);
	r->a = NULL;
	if (lseek(r->fd, 0, SEEK_SET) < 0)
		return jo_err_set(err, JO_EINVAL, "archive '%s': %s (it is read twice: a regular file)",
				  r->path, strerror(errno));
	r->a = r->la->archive_read_new();
	if (!r->a)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	/*
	 * A quarantine is tar.zst, and nothing else is read: other filters may
	 * run an external program, which a forged archive must not choose.
	 */
	if (r->la->archive_read_support_filter_zstd(r->a) != ARCHIVE_OK ||
	    r->la->archive_read_support_format_tar(r->a) != ARCHIVE_OK ||
	    r->la->archive_read_open_fd(r->a, r->fd, 1 << 16) != ARCHIVE_OK)
		return jo_err_set(err, JO_EPROTO, "archive '%s': %s", r->path,
				  r->la->archive_error_string(r->a));
	return 0;
}

/*
 * The next entry, checked: a regular file (no link of any kind) whose name
 * is a block key of this volume exactly as jo_vol_block_key spells it (so
 * its own name, its layout, no '..', no leading '/'), of at most
 * DEL_MAX_OBJECT bytes, all of which are read into r->buf. 1 with an
 * entry, 0 at the end.
 */
static int restore_next(struct restore *r, const char **key, size_t *size, uint64_t *id,
			struct jo_err *err)
{
	struct archive_entry *ae;
	uint32_t indx, bsize;
	char canon[1200];
	la_int64_t sz;
	size_t got = 0;
	int ar = r->la->archive_read_next_header(r->a, &ae);

	if (ar == ARCHIVE_EOF)
		return 0;
	if (ar != ARCHIVE_OK)
		return jo_err_set(err, JO_EPROTO, "archive '%s': %s", r->path,
				  r->la->archive_error_string(r->a));
	*key = r->la->archive_entry_pathname(ae);
	if (!*key || jo_block_parse(*key, id, &indx, &bsize) != 0 ||
	    jo_vol_block_key(r->v, canon, sizeof(canon), *id, indx, bsize) < 0 ||
	    strcmp(canon, *key) != 0)
		return jo_err_set(err, JO_EINVAL, "archive '%s': '%s' is not a block key of volume "
				  "'%s'", r->path, *key ? *key : "", r->v->fmt.name);
	if (r->la->archive_entry_filetype(ae) != AE_IFREG || r->la->archive_entry_hardlink(ae))
		return jo_err_set(err, JO_EINVAL, "archive '%s': '%s' is not a regular file", r->path,
				  *key);
	sz = r->la->archive_entry_size(ae);
	if (sz < 0 || (uint64_t)sz > DEL_MAX_OBJECT)
		return jo_err_set(err, JO_EPROTO, "archive '%s': entry '%s' has a bad size", r->path,
				  *key);
	while (got < (size_t)sz) {
		la_ssize_t n = r->la->archive_read_data(r->a, r->buf + got, (size_t)sz - got);

		if (n <= 0)
			return jo_err_set(err, JO_EPROTO, "archive '%s': short entry '%s'%s%s", r->path,
					  *key, n < 0 ? ": " : "",
					  n < 0 ? r->la->archive_error_string(r->a) : "");
		got += (size_t)n;
	}
	*size = got;
	return 1;
}

int leak_restore(struct jo_vol *v, const char *path, const char *audit_path,
		 struct leak_restore_stats *st, struct jo_err *err)
{
	struct restore r = { .v = v, .path = path, .fd = -1 };
	struct jo_obj_put_opts create = { .create_only = true };
	FILE *audit = NULL;
	const char *key;
	size_t size;
	uint64_t id, n = 0;
	unsigned unsynced = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	rc = jo_la_load(&r.la, err);
	if (rc)
		return rc;
	r.buf = malloc(DEL_MAX_OBJECT);
	if (!r.buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	r.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r.fd < 0) {
		rc = jo_err_set(err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO, "open archive '%s': %s",
				path, strerror(errno));
		goto out;
	}
	/* pass 1: the whole archive is read and checked before anything is written */
	rc = restore_rewind(&r, err);
	while (!rc && (rc = restore_next(&r, &key, &size, &id, err)) == 1) {
		rc = 0;
		n++;
		if (jo_cancelled())
			rc = jo_err_set(err, JO_ECANCELED, "canceled");
	}
	if (rc) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		if (rc != JO_ECANCELED)
			jo_err_set(err, rc, "%.480s: nothing restored", why);
		goto out;
	}
	st->entries = n;
	if (audit_path) {
		rc = audit_open(audit_path, &audit, err);
		if (rc)
			goto out;
	}
	/* pass 2: the same file again, each entry checked again, then created only */
	rc = restore_rewind(&r, err);
	while (!rc && (rc = restore_next(&r, &key, &size, &id, err)) == 1) {
		const char *result = "restored";

		rc = jo_obj_put(v->obj, key, r.buf, size, &create, err);
		if (rc == JO_EEXIST) {
			result = "kept: exists";
			st->kept_exists++;
			rc = 0;
		} else if (rc) {
			jo_err_wrap(err, "restore '%s'", key);
			break;
		} else {
			st->restored++;
			st->restored_bytes += size;
		}
		/* each line reaches the kernel at once; the disk every 256 and at the end */
		rc = audit_write(audit, audit_path, key, "restore", result, id, size, err);
		if (!rc && audit && fflush(audit) != 0)
			rc = jo_err_set(err, JO_EIO, "audit '%s': %s", audit_path, strerror(errno));
		if (!rc && ++unsynced == 256) {
			rc = audit_sync(audit, audit_path, err);
			unsynced = 0;
		}
		if (!rc && jo_cancelled())
			rc = jo_err_set(err, JO_ECANCELED, "canceled");
	}
	if (!rc && st->restored + st->kept_exists != n)
		rc = jo_err_set(err, JO_EPROTO, "archive '%s' changed while it was restored", path);
out:
	if (audit) {
		struct jo_err e = { 0 };

		if (audit_sync(audit, audit_path, &e) && !rc)
			rc = jo_err_set(err, e.code, "%s", e.msg);
		if (fclose(audit) != 0 && !rc)
			rc = jo_err_set(err, JO_EIO, "audit '%s': %s", audit_path, strerror(errno));
	}
	if (r.a)
		r.la->archive_read_free(r.a);
	if (r.fd >= 0)
		close(r.fd);
	free(r.buf);
	return rc;
}
