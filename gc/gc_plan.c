/*
 * gc_plan.c: the planner. Scans what is pending (delfiles, slices whose
 * refcount says "delete", delayed slices past TrashDays, Redis chunk keys of
 * vanished inodes) and records it as tasks of at most task_size items.
 */
#include "gc/gc_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/mem.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"

int gc_run_new(struct gc_run **out, struct jo_vol *vol, const struct gc_opts *o,
	       struct jo_err *err)
{
	struct gc_run *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	r->vol = vol;
	r->o = *o;
	if (r->o.lease_ms <= 0)
		r->o.lease_ms = 60000;
	if (r->o.threads <= 0)
		r->o.threads = 1;
	if (r->o.batch <= 0 || r->o.batch > 1000)
		r->o.batch = 1000;
	if (r->o.task_size <= 0)
		r->o.task_size = 256;
	/* an engine that records a task in one small transaction (etcd) */
	if (jo_mut_task_max_items(vol->meta) && (size_t)r->o.task_size > jo_mut_task_max_items(vol->meta))
		r->o.task_size = (long)jo_mut_task_max_items(vol->meta);
	/* owners are printable ASCII without spaces */
	jo_lease_owner(r->owner, sizeof(r->owner),
		       o->worker_id && *o->worker_id ? o->worker_id : NULL);
	/* TrashDays as the format says right now (re-read at every run) */
	r->edge = gc_now_s() - (int64_t)vol->fmt.trash_days * 86400;
	r->trash_edge = jo_trash_edge(gc_now_s(), vol->fmt.trash_days);
	if (vol->fmt.user_group_quota)
		r->trash_skip = "the volume records user/group quotas, which jfsops does not update";
	if (o->max_time_ms > 0)
		r->deadline_mono = jo_lease_mono_ms() + o->max_time_ms;
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

void gc_run_free(struct gc_run *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void gc_run_stats(struct gc_run *r, struct gc_stats *out)
{
	pthread_mutex_lock(&r->mu);
	*out = r->st;
	pthread_mutex_unlock(&r->mu);
}

int gc_task_counts(struct gc_run *r, int64_t *total, int64_t *leased, struct jo_err *err)
{
	return jo_mut_task_count(r->vol->meta, GC_NS, total, leased, err);
}

bool gc_run_deadline_passed(const struct gc_run *r)
{
	return r->deadline_mono && jo_lease_mono_ms() >= r->deadline_mono;
}

int gc_reset_tasks(struct gc_run *r, struct jo_err *err)
{
	return jo_mut_task_clear(r->vol->meta, GC_NS, err);
}

/* ---- shard building */

struct shard {
	char **items;
	size_t n;
};

struct planner {
	struct gc_run *r;
	struct gc_worker w;       /* own connection: task records, dry evaluation */
	bool evaluate;
	/*
	 * --delete: the shards of the scan in progress wait here (a temp file,
	 * so memory stays bounded) and become tasks only once that scan was
	 * read whole. A scan cut by an error records nothing: no task is ever
	 * planned from a partial scan.
	 */
	FILE *stage;
	uint64_t staged;
	struct shard sh[GC_NKINDS];
	uint64_t *excl;           /* sustained + detached inodes, sorted */
	size_t nexcl, cexcl;
	struct jo_err err;
};

static int emit(struct planner *p, int kind)
{
	struct shard *s = &p->sh[kind];
	struct gc_run *r = p->r;
	int rc = 0;

	if (s->n == 0)
		return 0;
	if (r->o.delete_) {
		uint8_t head[5] = { (uint8_t)kind };

		jo_put_be32(head + 1, (uint32_t)s->n);

		if (fwrite(head, 1, sizeof(head), p->stage) != sizeof(head))
			rc = jo_err_set(&p->err, JO_EIO, "plan: staging file: %s", strerror(errno));
		for (size_t i = 0; i < s->n && rc == 0; i++) {
			size_t l = strlen(s->items[i]);
			uint8_t lb = (uint8_t)l; /* items are short: "k:<u64>:<u64>" */

			if (fwrite(&lb, 1, 1, p->stage) != 1 || fwrite(s->items[i], 1, l, p->stage) != l)
				rc = jo_err_set(&p->err, JO_EIO, "plan: staging file: %s", strerror(errno));
		}
		if (rc == 0)
			p->staged++;
	} else if (p->evaluate) {
		for (size_t i = 0; i < s->n && rc == 0; i++)
			rc = gc_process_item(&p->w, s->items[i], &p->err);
	} else {
		p->w.st.k[kind].items += s->n;
	}
	for (size_t i = 0; i < s->n; i++)
		free(s->items[i]);
	s->n = 0;
	return rc;
}

static int add_item(struct planner *p, int kind, uint64_t a, uint64_t b)
{
	struct shard *s = &p->sh[kind];
	char buf[64];

	if (jo_cancelled())
		return jo_err_set(&p->err, JO_ECANCELED, "interrupted");
	if (!s->items) {
		s->items = calloc((size_t)p->r->o.task_size, sizeof(*s->items));
		if (!s->items)
			return jo_err_set(&p->err, JO_ENOMEM, "out of memory");
	}
	snprintf(buf, sizeof(buf), "%c:%" PRIu64 ":%" PRIu64, "fsdct"[kind], a, b);
	s->items[s->n] = strdup(buf);
	if (!s->items[s->n])
		return jo_err_set(&p->err, JO_ENOMEM, "out of memory");
	s->n++;
	if (s->n >= (size_t)p->r->o.task_size)
		return emit(p, kind);
	return 0;
}

/* Record the shards staged by a scan that was read whole, then forget them. */
static int commit_staged(struct planner *p, struct jo_err *err)
{
	char *items[256], buf[256 * 256];
	int rc = 0;

	if (!p->stage || p->staged == 0)
		return 0;
	if (fflush(p->stage) != 0 || fseek(p->stage, 0, SEEK_SET) != 0)
		return jo_err_set(err, JO_EIO, "plan: staging file: %s", strerror(errno));
	for (uint64_t t = 0; t < p->staged && rc == 0; t++) {
		uint8_t head[5];
		size_t n, k = 0, used = 0;
		char **v;
		int64_t id = 0;
		size_t added = 0;

		if (fread(head, 1, sizeof(head), p->stage) != sizeof(head))
			return jo_err_set(err, JO_EIO, "plan: staging file: short read");
		n = jo_be32(head + 1);
		v = n <= 256 ? items : calloc(n, sizeof(*v));
		char *b = n <= 256 ? buf : malloc(n * 256);
		if (!v || !b) {
			if (v != items)
				free(v);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
		for (k = 0; k < n; k++) {
			uint8_t lb;

			if (fread(&lb, 1, 1, p->stage) != 1 || fread(b + used, 1, lb, p->stage) != lb) {
				rc = jo_err_set(err, JO_EIO, "plan: staging file: short read");
				break;
			}
			v[k] = b + used;
			b[used + lb] = '\0';
			used += (size_t)lb + 1;
		}
		if (rc == 0)
			rc = jo_mut_task_add(p->w.m, GC_NS, gc_kind_name(head[0]), (const char *const *)v,
					     n, &id, &added, err);
		/* items are counted by the worker that processes them */
		if (rc == 0 && id) {
			p->w.st.tasks_planned++;
			p->w.st.items_planned += added;
		}
		if (v != items) {
			free(v);
			free(b);
		}
	}
	if (rc)
		return jo_err_wrap(err, "plan: record tasks");
	p->staged = 0;
	if (fseek(p->stage, 0, SEEK_SET) != 0 || ftruncate(fileno(p->stage), 0) != 0)
		return jo_err_set(err, JO_EIO, "plan: staging file: %s", strerror(errno));
	return 0;
}

/* ---- scanners */

static int on_delfile(uint64_t ino, uint64_t length, int64_t deleted_at, void *payload)
{
	(void)deleted_at; /* any age, as `juicefs gc` */
	return add_item(payload, GC_FILE, ino, length);
}

static int on_ref(uint64_t id, uint32_t size, int64_t refs, void *payload)
{
	if (refs > 0 || id == 0 || size == 0)
		return 0;
	return add_item(payload, GC_SLICE, id, size);
}

static int on_delslices(uint64_t new_id, int64_t deleted_at, const uint8_t *recs, size_t len,
			void *payload)
{
	struct planner *p = payload;
	int rc;

	if (deleted_at >= p->r->edge)
		return 0; /* still in the trash window */
	if (!p->r->o.delete_ && p->evaluate) {
		/* dry-run: would the decrements free these slices? */
		p->w.st.k[GC_DELSLICE].items++;
		for (size_t o = 0; o + JO_DELSLICE_REC_LEN <= len; o += JO_DELSLICE_REC_LEN) {
			uint64_t id = jo_be64(recs + o);
			uint32_t size = jo_be32(recs + o + 8);
			int64_t cnt = 0, refs = 0;
			bool ex = false;

			for (size_t q = 0; q + JO_DELSLICE_REC_LEN <= len; q += JO_DELSLICE_REC_LEN)
				if (jo_be64(recs + q) == id && jo_be32(recs + q + 8) == size)
					cnt++;
			rc = jo_meta_get_slice_ref(p->w.m, id, size, &refs, &ex, &p->err);
			if (rc)
				return rc;
			if (refs - cnt <= 0) {
				rc = gc_queue_slice(&p->w, id, size, GC_DELSLICE, &p->err);
				if (rc)
					return rc;
			}
		}
		return 0;
	}
	return add_item(p, GC_DELSLICE, new_id, (uint64_t)deleted_at);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int push_excl(struct planner *p, uint64_t ino)
{
	if (p->nexcl == p->cexcl) {
		size_t nc = p->cexcl ? p->cexcl * 2 : 64;
		uint64_t *q = realloc(p->excl, nc * sizeof(*q));

		if (!q)
			return jo_err_set(&p->err, JO_ENOMEM, "out of memory");
		p->excl = q;
		p->cexcl = nc;
	}
	p->excl[p->nexcl++] = ino;
	return 0;
}

static int on_sustained(uint64_t sid, uint64_t ino, void *payload)
{
	(void)sid;
	return push_excl(payload, ino);
}

static int on_detached(uint64_t ino, int64_t added, void *payload)
{
	(void)added;
	return push_excl(payload, ino);
}

static int on_orphan(uint64_t ino, uint32_t indx, void *payload)
{
	struct planner *p = payload;

	if (p->nexcl && bsearch(&ino, p->excl, p->nexcl, sizeof(ino), cmp_u64))
		return 0; /* open-but-unlinked or detached: live */
	return add_item(p, GC_CHUNK, ino, indx);
}

static int on_trash_dir(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct planner *p = payload;
	int64_t ts;

	if (type != JO_TYPE_DIR || jo_trash_hour_parse(name, len, &ts) != 0) {
		jo_warn("trash: entry '%.*s' is not an hour directory: left alone",
			(int)(len > 64 ? 64 : len), name);
		return 0;
	}
	if (ts >= p->r->trash_edge)
		return 0; /* still within TrashDays */
	return add_item(p, GC_TRASH, ino, (uint64_t)ts);
}

/* Pass an error from a scan: callback errors are in p->err, scan errors in err. */
static int scan_rc(struct planner *p, int rc, struct jo_err *err, const char *what)
{
	if (rc == 0)
		return 0;
	if (p->err.code)
		*err = p->err;
	if (!err->code)
		jo_err_set(err, rc, "scan failed");
	return jo_err_wrap(err, "plan: %s", what);
}

/* The end of one scan: its last batch emitted, its error told (scan_rc), what
 * it staged committed. */
static int scan_done(struct planner *p, int rc, int kind, const char *what, struct jo_err *err)
{
	if (rc == 0)
		rc = emit(p, kind);
	rc = scan_rc(p, rc, err, what);
	if (rc == 0)
		rc = commit_staged(p, err);
	return rc;
}

int gc_plan(struct gc_run *r, bool evaluate, struct jo_err *err)
{
	struct jo_meta *m = r->vol->meta;
	struct planner p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.r = r;
	p.evaluate = evaluate;
	if ((rc = gc_worker_init(&p.w, r, 0, err)) != 0)
		return rc;
	snprintf(p.w.id, sizeof(p.w.id), "%s/plan", r->owner);
	if (r->o.delete_ && (rc = jo_mut_task_init(p.w.m, GC_NS, err)) != 0)
		goto out;
	if (r->o.delete_ && !(p.stage = tmpfile())) {
		rc = jo_err_set(err, JO_EIO, "plan: cannot create a staging file: %s", strerror(errno));
		goto out;
	}

	if (r->trash_skip) {
		jo_warn("trash left alone: %s", r->trash_skip);
	} else {
		rc = jo_meta_readdir(m, JO_TRASH_INODE, on_trash_dir, &p, err);
		if (rc == JO_ENOTFOUND && !p.err.code) {
			jo_err_clear(err); /* no trash directory (yet) */
			rc = 0;
		}
		if ((rc = scan_done(&p, rc, GC_TRASH, "trash", err)) != 0)
			goto out;
	}

	rc = jo_meta_scan_delfiles(m, on_delfile, &p, err);
	if ((rc = scan_done(&p, rc, GC_FILE, "removed files", err)) != 0)
		goto out;

	rc = jo_meta_scan_slice_refs(m, on_ref, &p, err);
	if ((rc = scan_done(&p, rc, GC_SLICE, "slice references", err)) != 0)
		goto out;

	rc = jo_meta_scan_delslices(m, on_delslices, &p, err);
	if ((rc = scan_done(&p, rc, GC_DELSLICE, "delayed slices", err)) != 0)
		goto out;

	if (jo_meta_has(m, JO_META_HAS_ORPHAN_CHUNKS)) {
		rc = jo_meta_scan_sustained(m, on_sustained, &p, err);
		if (rc == 0)
			rc = jo_meta_scan_detached(m, on_detached, &p, err);
		if ((rc = scan_rc(&p, rc, err, "sessions")) != 0)
			goto out;
		if (p.nexcl)
			qsort(p.excl, p.nexcl, sizeof(*p.excl), cmp_u64);
		rc = jo_mut_scan_orphan_chunks(m, on_orphan, &p, err);
		if ((rc = scan_done(&p, rc, GC_CHUNK, "leaked chunks", err)) != 0)
			goto out;
	}
	if (evaluate && !r->o.delete_) {
		if ((rc = gc_process_items(&p.w, "", &p.err)) != 0) {
			*err = p.err;
			goto out;
		}
	}
out:
	for (int k = 0; k < GC_NKINDS; k++) {
		for (size_t i = 0; i < p.sh[k].n; i++)
			free(p.sh[k].items[i]);
		free(p.sh[k].items);
	}
	free(p.excl);
	if (p.stage)
		fclose(p.stage); /* what a cut scan staged is dropped */
	pthread_mutex_lock(&r->mu);
	gc_stats_add(&r->st, &p.w.st);
	pthread_mutex_unlock(&r->mu);
	gc_worker_release(&p.w);
	return rc;
}
