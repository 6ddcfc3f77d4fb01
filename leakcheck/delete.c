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
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cancel.h"
#include "common/err.h"
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
};

struct delctx {
	struct jo_vol *v;
	const struct leak_delete_opts *o;
	struct leak_delete_stats *st;
	FILE *audit;
	const struct jo_la *la;   /* libarchive, loaded for a quarantine */
	struct archive *ar;
	char *ar_tmp;
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

static int audit_line(struct delctx *d, const struct cand *c)
{
	char ts[32];
	json_t *j;
	char *s;
	int rc = 0;

	if (!d->audit)
		return 0;
	fmt_time(time(NULL), ts, sizeof(ts));
	j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I}", "time", ts, "key", c->key, "reason",
		      c->reason, "result", c->fail[0] ? c->fail : c->result, "slice",
		      (json_int_t)c->id, "size", (json_int_t)c->size);
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!s || fprintf(d->audit, "%s\n", s) < 0)
		rc = JO_EIO;
	free(s);
	json_decref(j);
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

static int recheck_object(struct delctx *d, struct cand *c)
{
	struct jo_obj_info info;
	struct jo_err e = { 0 };
	int rc = jo_obj_head(d->v->obj, c->key, &info, &e);
	int64_t now = (int64_t)time(NULL);

	if (rc == JO_ENOTFOUND) {
		c->result = "kept: already gone";
		return 0;
	}
	if (rc) {
		c->result = "failed";
		snprintf(c->fail, sizeof(c->fail), "failed: head: %.120s", e.msg);
		return 0;
	}
	if (info.mtime > now - d->o->min_age)
		c->result = "kept: too young";
	else if (info.size != c->size || (c->mtime && info.mtime != c->mtime))
		c->result = "kept: changed since the report";
	return 0;
}

static int archive_open(struct delctx *d, struct jo_err *err)
{
	size_t len = strlen(d->o->quarantine) + 32;

	d->ar_path = malloc(len);
	d->ar_tmp = malloc(len + 8);
	if (!d->ar_path || !d->ar_tmp)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (d->ar_seq == 0)
		snprintf(d->ar_path, len, "%s", d->o->quarantine);
	else
		snprintf(d->ar_path, len, "%s.%u", d->o->quarantine, d->ar_seq);
	snprintf(d->ar_tmp, len + 8, "%s.tmp", d->ar_path);
	if (access(d->ar_path, F_OK) == 0)
		return jo_err_set(err, JO_EINVAL, "quarantine archive '%s' already exists",
				  d->ar_path);
	if (!d->la) {
		int rc = jo_la_load(&d->la, err);

		if (rc)
			return rc;
	}
	d->ar = d->la->archive_write_new();
	if (!d->ar || d->la->archive_write_add_filter_zstd(d->ar) != ARCHIVE_OK ||
	    d->la->archive_write_set_format_pax_restricted(d->ar) != ARCHIVE_OK ||
	    d->la->archive_write_open_filename(d->ar, d->ar_tmp) != ARCHIVE_OK)
		return jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_tmp,
				  d->ar ? d->la->archive_error_string(d->ar) : "out of memory");
	return 0;
}

/* Close the archive, fsync it and publish it under its final name. */
static int archive_commit(struct delctx *d, struct jo_err *err)
{
	int fd, rc = 0;

	if (d->la->archive_write_close(d->ar) != ARCHIVE_OK)
		rc = jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_tmp,
				d->la->archive_error_string(d->ar));
	d->la->archive_write_free(d->ar);
	d->ar = NULL;
	if (rc)
		return rc;
	fd = open(d->ar_tmp, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		rc = jo_err_set(err, JO_EIO, "quarantine '%s': fsync: %s", d->ar_tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	if (rename(d->ar_tmp, d->ar_path) < 0)
		return jo_err_set(err, JO_EIO, "quarantine: rename to '%s': %s", d->ar_path,
				  strerror(errno));
	return 0;
}

static void archive_abort(struct delctx *d)
{
	if (d->ar) {
		d->la->archive_write_free(d->ar);
		d->ar = NULL;
		(void)unlink(d->ar_tmp); /* an incomplete archive protects nothing */
	}
	free(d->ar_path);
	free(d->ar_tmp);
	d->ar_path = d->ar_tmp = NULL;
}

static int quarantine_one(struct delctx *d, struct cand *c, struct jo_err *err)
{
	uint8_t *data = NULL;
	size_t len = 0;
	struct jo_err e = { 0 };
	struct archive_entry *ae;
	int rc = jo_obj_get_buf(d->v->obj, c->key, 0, -1, DEL_MAX_OBJECT, &data, &len, &e);

	if (rc == JO_ENOTFOUND) {
		c->result = "kept: already gone";
		return 0;
	}
	if (rc) {
		c->result = "failed";
		snprintf(c->fail, sizeof(c->fail), "failed: quarantine get: %.120s", e.msg);
		return 0;
	}
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
		rc = jo_err_set(err, JO_EIO, "quarantine '%s': %s", d->ar_tmp,
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
	}
	keys = malloc(batch * sizeof(*keys));
	idx = malloc(batch * sizeof(*idx));
	res = malloc(batch * sizeof(*res));
	if (!keys || !idx || !res) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n && !rc;) {
		size_t k = 0;

		for (; i < n && k < batch; i++) {
			if (c[i].result)
				continue;
			if (d->o->dry_run) {
				c[i].result = "would delete";
				continue;
			}
			keys[k] = c[i].key;
			idx[k++] = i;
		}
		if (k == 0)
			break;
		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "canceled");
			break;
		}
		struct jo_err e = { 0 };
		int brc = jo_obj_delete_batch(d->v->obj, keys, k, res, &e);

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
		rate_wait(d, k);
	}
out:
	for (size_t i = 0; i < n; i++) {
		if (!c[i].result)
			continue; /* canceled before its turn: not audited */
		if (!strcmp(c[i].result, "deleted")) {
			d->st->deleted++;
			d->st->deleted_bytes += c[i].size;
		} else if (!strcmp(c[i].result, "failed")) {
			d->st->failed++;
		} else {
			d->st->kept++;
		}
		if (audit_line(d, &c[i]) && !rc)
			rc = jo_err_set(err, JO_EIO, "audit '%s': write failed", d->o->audit);
	}
	if (d->audit && fflush(d->audit) != 0 && !rc)
		rc = jo_err_set(err, JO_EIO, "audit '%s': %s", d->o->audit, strerror(errno));
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
		d.audit = fopen(o->audit, "a");
		if (!d.audit) {
			rc = jo_err_set(err, JO_EIO, "cannot open audit '%s': %s", o->audit,
					strerror(errno));
			goto out;
		}
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
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 1024;
			struct cand *p = realloc(c, nc * sizeof(*p));

			if (!p) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			c = p;
			cap = nc;
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

int leak_restore(struct jo_vol *v, const char *path, uint64_t *restored, struct jo_err *err)
{
	const struct jo_la *la;
	struct archive *a;
	struct archive_entry *ae;
	uint8_t *buf = NULL;
	int rc, r;

	*restored = 0;
	rc = jo_la_load(&la, err);
	if (rc)
		return rc;
	a = la->archive_read_new();
	if (!a)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	la->archive_read_support_filter_all(a);
	la->archive_read_support_format_tar(a);
	if (la->archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		rc = jo_err_set(err, JO_EIO, "open archive '%s': %s", path, la->archive_error_string(a));
		goto out;
	}
	while ((r = la->archive_read_next_header(a, &ae)) == ARCHIVE_OK) {
		const char *key = la->archive_entry_pathname(ae);
		la_int64_t size = la->archive_entry_size(ae);
		uint64_t id;
		uint32_t indx, bsize;
		char canon[1200];

		if (!key || jo_block_parse(key, &id, &indx, &bsize) != 0 ||
		    jo_vol_block_key(v, canon, sizeof(canon), id, indx, bsize) < 0 ||
		    strcmp(canon, key) != 0) {
			rc = jo_err_set(err, JO_EPROTO, "archive '%s': '%s' is not a block of volume '%s'",
					path, key ? key : "", v->fmt.name);
			goto out;
		}
		if (size < 0 || (size_t)size > DEL_MAX_OBJECT) {
			rc = jo_err_set(err, JO_EPROTO, "archive '%s': entry '%s' has a bad size", path, key);
			goto out;
		}
		free(buf);
		buf = malloc((size_t)size ? (size_t)size : 1);
		if (!buf) {
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			goto out;
		}
		la_ssize_t got = size ? la->archive_read_data(a, buf, (size_t)size) : 0;

		if (got != size) {
			rc = jo_err_set(err, JO_EPROTO, "archive '%s': short entry '%s'", path, key);
			goto out;
		}
		rc = jo_obj_put(v->obj, key, buf, (size_t)size, NULL, err);
		if (rc) {
			jo_err_wrap(err, "restore '%s'", key);
			goto out;
		}
		(*restored)++;
		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "canceled");
			goto out;
		}
	}
	if (r != ARCHIVE_EOF)
		rc = jo_err_set(err, JO_EPROTO, "archive '%s': %s", path, la->archive_error_string(a));
out:
	free(buf);
	la->archive_read_free(a);
	return rc;
}
