/*
 * engine.c: the sync run: merge-join of the two ordered listings, the
 * copy-or-skip decision, a pool of transfer workers, the delete pass and the
 * counters.
 *
 * Destination user metadata written on every copy (documented in --help):
 *   x-amz-meta-mtime            source mtime, unix seconds (rclone reads it too)
 *   x-amz-meta-jfsops-md5       hex MD5 of the content (single-request copies)
 *   x-amz-meta-jfsops-src-etag  the source's listed ETag (all copies)
 * plus the source's Content-Type and user metadata (one HEAD of the source
 * per copied object, none per compared object; --no-metadata skips it).
 *
 * Safety: every GET of a source carries If-Match with the listed ETag, so a
 * source changing mid-copy fails that object (412) instead of producing a
 * torn copy. Deletes (--delete-dst) run only after the copy pass finished
 * with no failure, both listings completed, the source listed at least one
 * object and the number of victims is within --max-delete.
 *
 * Cluster ranges (opts->range, driven by cluster.c): both listings are cut
 * to [lo, hi); no state file; the merge stops every checkpoint_s, waits for
 * the copies in flight and hands the exact position and counters to the
 * range's callback; each copy also carries x-amz-meta-jfsops-job, and when
 * an earlier attempt may have copied past its last checkpoint, the keys the
 * merge would skip there are HEADed and counted as copies when they carry
 * the mark. A range's deletions are a pass of their own (delete_only).
 */
#include "sync/sync.h"

#include "common/cancel.h"
#include "common/err.h"
#include "common/human.h"
#include "common/esc.h"
#include "common/log.h"
#include "common/object/object.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARTS 10000
#define MIN_PART (5u << 20)
#define COPY_MAX (5ull << 30)    /* CopyObject limit */

struct task {
	char *rel;
	struct jo_sync_ent src;
	bool has_dst;
	struct jo_sync_ent dst;
	struct task *next;          /* work queue */
	/* In-flight list in dispatch (= key) order, for the listing position. */
	struct task *iprev, *inext;
	char *before;               /* last source key the merge finished before this one */
	bool credit;                /* cluster: not a copy, a check that an earlier attempt copied it */
};

struct eng {
	const struct jo_objurl *src, *dst;
	struct jo_obj *so, *dobj;
	const struct jo_sync_opts *o;
	struct jo_sync_summary *sum;
	bool server_side;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct task *qhead, *qtail;
	size_t qlen, outstanding;  /* queued + running */
	bool closing;
	/* memory budget for transfer buffers */
	uint64_t mem_avail, mem_inuse;
	/* progress */
	double t0;
	bool progress_stop;
	pthread_t progress_th;
	struct jo_sync_stream *ls, *ld;
	uint64_t planned_bytes;     /* bytes of the copies dispatched so far */
	uint64_t moved_bytes;       /* bytes read from SRC so far, in-flight copies too
				       (atomic), plus server-side copies done */
	struct task *ihead, *itail; /* dispatched, not yet succeeded (failed ones stay) */
	char *merge_pos;            /* last source key the merge finished */
	char *refused_pos;          /* merge_pos at the first refused key: --resume lists it again */
	bool track_pos;             /* save the listing position (state, no --delete-dst) */
	double pos_saved_at;
	FILE *extras;               /* length-prefixed relative keys */
	uint64_t nextras;
	/* cluster range (o->range, else NULL) */
	struct jo_sync_range *rg;
	struct jo_sync_ckpt ck;     /* counters of the keys up to ck_pos (the base included) */
	char *ck_pos;
	double ck_at;               /* when the last checkpoint was taken */
	bool rg_failed;             /* a copy failed in this attempt: ck_pos stays */
	char *last_key;             /* the last key the merge processed (either side) */
	bool uncounted;             /* keys past ck_pos may have been copied uncounted */
};

static void save_pos(struct eng *e, bool force);
static void wait_and_save(struct eng *e);

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void hex(const unsigned char *d, size_t n, char *out)
{
	static const char x[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = x[d[i] >> 4];
		out[2 * i + 1] = x[d[i] & 15];
	}
	out[2 * n] = 0;
}

static void md5_of(const void *data, size_t len, unsigned char out[16])
{
	unsigned int n = 16;
	EVP_Digest(data, len, out, &n, EVP_md5(), NULL);
}

static char *join_key(const char *prefix, const char *rel)
{
	size_t a = strlen(prefix), b = strlen(rel);
	char *k = malloc(a + b + 1);
	if (k) {
		memcpy(k, prefix, a);
		memcpy(k + a, rel, b + 1);
	}
	return k;
}

/* ---- memory budget ------------------------------------------------------- */

static void mem_acquire(struct eng *e, uint64_t n)
{
	pthread_mutex_lock(&e->mu);
	/* One oversized request may run alone. */
	while (e->mem_inuse > 0 && e->mem_inuse + n > e->mem_avail)
		pthread_cond_wait(&e->cv, &e->mu);
	e->mem_inuse += n;
	pthread_mutex_unlock(&e->mu);
}

static void mem_release(struct eng *e, uint64_t n)
{
	pthread_mutex_lock(&e->mu);
	e->mem_inuse -= n;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* ---- output -------------------------------------------------------------- */

static void plan_line(struct eng *e, const char *action, const char *rel, uint64_t size,
		      const char *why)
{
	if (!e->o->json) {
		flockfile(stdout);
		/* keys are anyone's names: no raw control byte to a terminal */
		printf("%s %s (%s)\n", action, JO_ESC_TERM(rel), JO_ESC_TERM(why ? why : ""));
		funlockfile(stdout);
		return;
	}
	json_t *j = json_pack("{s:s,s:s,s:I,s:s}", "action", action, "key", rel, "size",
			      (json_int_t)size, "reason", why ? why : "");
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	flockfile(stdout);
	if (s)
		printf("%s\n", s);
	funlockfile(stdout);
	free(s);
	json_decref(j);
}

/* ---- copy ---------------------------------------------------------------- */

struct buf {
	unsigned char *p;
	size_t len, cap;
	struct jo_sync_bw *bw;
	uint64_t *moved;        /* the engine's moved_bytes (progress) */
};

static int buf_cb(const void *data, size_t len, void *payload)
{
	struct buf *b = payload;
	if (len > b->cap - b->len)
		return JO_EPROTO;  /* more bytes than listed */
	jo_sync_bw_take(b->bw, len);
	__atomic_add_fetch(b->moved, len, __ATOMIC_RELAXED);
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return 0;
}

/* User metadata for the destination: the source's plus our fingerprint. */
struct meta {
	const char *kv[130];
	size_t n;
	char mtime[32];
	char md5[33];
	char etag[72];
};

static void meta_build(struct meta *m, char **srcmeta, int64_t mtime, const char *md5,
		       const char *src_etag, const char *job)
{
	m->n = 0;
	for (size_t i = 0; srcmeta && srcmeta[i] && srcmeta[i + 1] && m->n < 120; i += 2) {
		const char *n = srcmeta[i];
		if (!strcmp(n, "mtime") || !strcmp(n, "jfsops-md5") || !strcmp(n, "jfsops-src-etag") ||
		    !strcmp(n, "jfsops-job"))
			continue;
		if (!strcmp(n, "content-type"))
			continue;
		m->kv[m->n++] = n;
		m->kv[m->n++] = srcmeta[i + 1];
	}
	snprintf(m->mtime, sizeof(m->mtime), "%" PRId64, mtime);
	m->kv[m->n++] = "mtime";
	m->kv[m->n++] = m->mtime;
	if (md5 && md5[0]) {
		snprintf(m->md5, sizeof(m->md5), "%s", md5);
		m->kv[m->n++] = "jfsops-md5";
		m->kv[m->n++] = m->md5;
	}
	if (src_etag && src_etag[0]) {
		snprintf(m->etag, sizeof(m->etag), "%s", src_etag);
		m->kv[m->n++] = "jfsops-src-etag";
		m->kv[m->n++] = m->etag;
	}
	if (job && job[0]) {
		/* cluster: which job made this copy (a later attempt counts it, once) */
		m->kv[m->n++] = "jfsops-job";
		m->kv[m->n++] = job;
	}
	m->kv[m->n] = NULL;
}

static const char *job_mark(const struct eng *e)
{
	return e->rg ? e->rg->job_mark : NULL;
}

static const char *src_if_match(const struct jo_sync_ent *src)
{
	return src->etag[0] ? src->etag : NULL;
}

/* HEAD the source for content type and user metadata; check it is unchanged. */
static int src_head(struct eng *e, const char *skey, const struct jo_sync_ent *src,
		    char ***meta, const char **ctype, struct jo_err *err)
{
	*meta = NULL;
	*ctype = NULL;
	if (e->src->local || e->o->no_metadata)
		return 0;
	struct jo_obj_info info;
	int rc = jo_obj_head_meta(e->so, skey, &info, meta, err);
	if (rc)
		return rc;
	if (info.size != src->size ||
	    (src->etag[0] && info.etag[0] && strcasecmp(info.etag, src->etag) != 0))
		return jo_err_set(err, JO_ECONFLICT, "source \"%s\" changed during sync", skey);
	*ctype = info.content_type;
	return 0;
}

static int copy_small(struct eng *e, const char *skey, const char *dkey, const struct task *t,
		      struct jo_sync_row *row, struct jo_err *err)
{
	char **smeta = NULL;
	const char *ctype = NULL;
	int rc = 0;
	/* content type and user metadata come with the GET's headers: no HEAD */
	bool want_meta = !e->src->local && !e->o->no_metadata;
	struct jo_obj_info ginfo = { 0 };
	uint64_t size = t->src.size;
	mem_acquire(e, size);
	struct buf b = { .cap = (size_t)size, .bw = e->o->bw, .moved = &e->moved_bytes };
	b.p = malloc(size ? (size_t)size : 1);
	if (!b.p) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory for %" PRIu64 " bytes", size);
		goto out;
	}
	struct jo_obj_get_opts go = { .offset = 0, .length = -1, .if_match = src_if_match(&t->src),
				      .info = &ginfo, .meta_out = want_meta ? &smeta : NULL };
	rc = jo_obj_get(e->so, skey, &go, buf_cb, &b, err);
	if (!rc && want_meta)
		ctype = ginfo.content_type;
	if (rc == JO_EPROTO && b.len == b.cap && size > 0) {
		rc = jo_err_set(err, JO_ECONFLICT, "source \"%s\" is larger than listed", skey);
		goto out;
	}
	if (rc)
		goto out;
	if (b.len != size) {
		rc = jo_err_set(err, JO_ECONFLICT, "source \"%s\": read %zu bytes, listed %" PRIu64,
				skey, b.len, size);
		goto out;
	}
	unsigned char d[16];
	md5_of(b.p, b.len, d);
	hex(d, 16, row->md5);
	if (jo_sync_etag_is_md5(t->src.etag) && strcasecmp(t->src.etag, row->md5) != 0) {
		rc = jo_err_set(err, JO_ECONFLICT, "source \"%s\": content MD5 %s differs from its ETag %s",
				skey, row->md5, t->src.etag);
		goto out;
	}
	struct meta m;
	meta_build(&m, smeta, t->src.mtime, row->md5, t->src.etag, job_mark(e));
	struct jo_obj_put_opts po = { .content_type = ctype, .meta = m.kv, .content_md5 = true };
	if (e->o->perms) {
		/* the bits of the very file read (its fstat), on DST's file before it appears */
		po.set_mode = true;
		po.mode = ginfo.mode & 0777;
	}
	rc = jo_obj_put(e->dobj, dkey, b.p, b.len, &po, err);
	if (rc)
		goto out;
	row->dst_size = size;
	snprintf(row->dst_etag, sizeof(row->dst_etag), "%s", row->md5);
out:
	free(b.p);
	mem_release(e, size);
	jo_obj_meta_free(smeta);
	return rc;
}

/* ---- multipart ----------------------------------------------------------- */

struct mp {
	struct eng *e;
	const char *skey, *dkey, *rel;
	const struct task *t;
	const char *upload_id;
	uint64_t part_size;
	int nparts;
	unsigned char (*md5s)[16];
	struct jo_obj_part *parts;   /* [nparts], number 0 = not done */
	int next;                    /* next part to claim (0-based) */
	int rc;
	struct jo_err err;
	pthread_mutex_t mu;
};

static int part_one(struct mp *m, int i, struct jo_err *err)
{
	struct eng *e = m->e;
	uint64_t off = (uint64_t)i * m->part_size;
	uint64_t len = m->t->src.size - off < m->part_size ? m->t->src.size - off : m->part_size;
	mem_acquire(e, len);
	struct buf b = { .cap = (size_t)len, .bw = e->o->bw, .moved = &e->moved_bytes };
	b.p = malloc((size_t)len);
	int rc;
	if (!b.p) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	struct jo_obj_get_opts go = { .offset = off, .length = (int64_t)len,
				      .if_match = src_if_match(&m->t->src) };
	rc = jo_obj_get(e->so, m->skey, &go, buf_cb, &b, err);
	if (!rc && b.len != len)
		rc = jo_err_set(err, JO_ECONFLICT, "source \"%s\": short read of part %d", m->skey,
				i + 1);
	if (rc)
		goto out;
	unsigned char d[16];
	char dh[33], etag[72] = "";
	md5_of(b.p, b.len, d);
	hex(d, 16, dh);
	rc = jo_obj_mpu_put_part(e->dobj, m->dkey, m->upload_id, i + 1, b.p, b.len, etag, err);
	if (rc)
		goto out;
	if (jo_sync_etag_is_md5(etag) && strcasecmp(etag, dh) != 0) {
		rc = jo_err_set(err, JO_EIO, "\"%s\" part %d: stored ETag %s, sent MD5 %s", m->dkey,
				i + 1, etag, dh);
		goto out;
	}
	rc = jo_sync_state_part_put(e->o->state, m->rel, i + 1, etag, len, err);
	if (rc)
		goto out;
	pthread_mutex_lock(&m->mu);
	memcpy(m->md5s[i], d, 16);
	m->parts[i].number = i + 1;
	snprintf(m->parts[i].etag, sizeof(m->parts[i].etag), "%s", etag);
	m->parts[i].size = len;
	pthread_mutex_unlock(&m->mu);
out:
	free(b.p);
	mem_release(e, len);
	return rc;
}

static void *part_worker(void *p)
{
	struct mp *m = p;
	for (;;) {
		pthread_mutex_lock(&m->mu);
		while (m->next < m->nparts && m->parts[m->next].number)
			m->next++;
		int i = m->rc || jo_cancelled() ? m->nparts : m->next++;
		pthread_mutex_unlock(&m->mu);
		if (i >= m->nparts)
			return NULL;
		struct jo_err err = { 0 };
		int rc = part_one(m, i, &err);
		if (rc) {
			pthread_mutex_lock(&m->mu);
			if (!m->rc) {
				m->rc = rc;
				m->err = err;
			}
			pthread_mutex_unlock(&m->mu);
			return NULL;
		}
	}
}

struct found_parts {
	struct mp *m;
	int n;
};

/* Server's ListParts: keep the parts the state also recorded with the same ETag. */
static int listed_part_cb(const struct jo_obj_part *part, void *p)
{
	struct found_parts *fp = p;
	struct mp *m = fp->m;
	if (part->number < 1 || part->number > m->nparts)
		return 0;
	struct jo_obj_part *slot = &m->parts[part->number - 1];
	if (slot->number == -1 && strcasecmp(slot->etag, part->etag) == 0) {
		slot->number = part->number;
		fp->n++;
	}
	return 0;
}

static int state_part_cb(int number, const char *etag, uint64_t size, void *p)
{
	struct mp *m = p;
	if (number < 1 || number > m->nparts)
		return 0;
	uint64_t off = (uint64_t)(number - 1) * m->part_size;
	uint64_t want = m->t->src.size - off < m->part_size ? m->t->src.size - off : m->part_size;
	if (size != want || !jo_sync_etag_is_md5(etag))
		return 0;
	struct jo_obj_part *slot = &m->parts[number - 1];
	slot->number = -1;  /* candidate until ListParts confirms */
	snprintf(slot->etag, sizeof(slot->etag), "%s", etag);
	slot->size = size;
	/* Part ETag = MD5 of the part on AWS-style stores (checked at upload). */
	for (int i = 0; i < 16; i++) {
		unsigned v;
		sscanf(etag + 2 * i, "%2x", &v);
		m->md5s[number - 1][i] = (unsigned char)v;
	}
	return 0;
}

/* The part size: --part-size (at least MIN_PART), larger when it would take over MAX_PARTS. */
static uint64_t mp_part_size(const struct jo_sync_opts *o, uint64_t size)
{
	uint64_t ps = o->part_size < MIN_PART ? MIN_PART : o->part_size;

	if ((size + ps - 1) / ps > MAX_PARTS) {
		ps = (size + MAX_PARTS - 1) / MAX_PARTS;
		ps = (ps + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	}
	return ps;
}

/* An upload that can never be completed: aborted, and its record dropped. */
static void mp_forget(struct eng *e, const char *dkey, const char *rel, const char *upload_id)
{
	struct jo_err aerr = { 0 };

	jo_obj_mpu_abort(e->dobj, dkey, upload_id, &aerr);
	jo_sync_state_mpu_del(e->o->state, rel, &aerr);
}

/*
 * An upload recorded by an earlier run: with --resume and the same source and
 * part size, continued (*upload_id set, the parts already there kept); else
 * aborted and forgotten.
 */
static int mp_resume(struct mp *m, char **upload_id, struct jo_err *err)
{
	struct eng *e = m->e;
	const struct jo_sync_opts *o = e->o;
	const struct task *t = m->t;
	struct jo_sync_mpu rec;
	int rc;

	if (jo_sync_state_mpu_get(o->state, t->rel, &rec, err) != 0)
		return 0;
	bool same = o->resume && rec.part_size == m->part_size && rec.src_size == t->src.size &&
		    rec.src_mtime == t->src.mtime && !strcmp(rec.src_etag, t->src.etag);
	if (same) {
		rc = jo_sync_state_parts(o->state, t->rel, state_part_cb, m, err);
		if (rc)
			return rc;
		struct found_parts fp = { .m = m };
		struct jo_err lerr = { 0 };
		int lrc = jo_obj_mpu_list_parts(e->dobj, m->dkey, rec.upload_id, listed_part_cb, &fp,
						&lerr);
		if (lrc == 0) {
			*upload_id = strdup(rec.upload_id);
			if (!*upload_id)
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			if (o->verbose)
				jo_warn("resuming upload of \"%s\": %d of %d parts already there",
					t->rel, fp.n, m->nparts);
		}
		for (int i = 0; i < m->nparts; i++)
			if (m->parts[i].number == -1 || !*upload_id)
				memset(&m->parts[i], 0, sizeof(m->parts[i]));
	}
	if (!*upload_id)
		mp_forget(e, m->dkey, t->rel, rec.upload_id);
	return 0;
}

/* A new upload, with the source's metadata (and mode), recorded in the range and the state. */
static int mp_create(struct mp *m, char **upload_id, char ***smeta, struct jo_err *err)
{
	struct eng *e = m->e;
	const struct jo_sync_opts *o = e->o;
	const struct task *t = m->t;
	const char *ctype = NULL;
	int rc = src_head(e, m->skey, &t->src, smeta, &ctype, err);

	if (rc)
		return rc;
	struct meta mt;
	meta_build(&mt, *smeta, t->src.mtime, NULL, t->src.etag, job_mark(e));
	struct jo_obj_put_opts po = { .content_type = ctype, .meta = mt.kv };
	if (o->perms) {
		struct jo_obj_info hi = { 0 };

		rc = jo_obj_head(e->so, m->skey, &hi, err);
		if (rc)
			return rc;
		po.set_mode = true;
		po.mode = hi.mode & 0777;
	}
	rc = jo_obj_mpu_create(e->dobj, m->dkey, &po, upload_id, err);
	if (rc)
		return rc;
	if (e->rg && e->rg->mpu) {
		rc = e->rg->mpu(t->rel, *upload_id, true, err, e->rg->payload);
		if (rc) {
			struct jo_err aerr = { 0 };

			jo_obj_mpu_abort(e->dobj, m->dkey, *upload_id, &aerr);
			return rc;
		}
	}
	struct jo_sync_mpu nm = { .part_size = m->part_size, .src_size = t->src.size,
				  .src_mtime = t->src.mtime };
	snprintf(nm.upload_id, sizeof(nm.upload_id), "%s", *upload_id);
	snprintf(nm.src_etag, sizeof(nm.src_etag), "%s", t->src.etag);
	return jo_sync_state_mpu_put(o->state, t->rel, &nm, err);
}

/* The parts, --part-concurrency of them at a time (this thread one of the workers). */
static int mp_upload_parts(struct mp *m, struct jo_err *err)
{
	int pc = m->e->o->part_concurrency < 1 ? 1 : m->e->o->part_concurrency;
	if (pc > m->nparts)
		pc = m->nparts;
	pthread_t th[64];
	int nth = 0;
	for (int i = 1; i < pc && nth < 64; i++)
		if (pthread_create(&th[nth], NULL, part_worker, m) == 0)
			nth++;
	part_worker(m);
	for (int i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	if (m->rc) {
		*err = m->err;
		/* The source changed: this upload can never be completed. */
		if (m->rc == JO_ECONFLICT)
			mp_forget(m->e, m->dkey, m->t->rel, m->upload_id);
		return m->rc;
	}
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "cancelled");
	return 0;
}

/* The upload completed, its size checked, the state row filled. */
static int mp_complete(struct mp *m, struct jo_sync_row *row, struct jo_err *err)
{
	struct eng *e = m->e;
	uint64_t size = m->t->src.size;
	int rc = jo_obj_mpu_complete(e->dobj, m->dkey, m->upload_id, m->parts, (size_t)m->nparts,
				     err);

	if (rc)
		return rc;
	/* Verify the size of what the store assembled. */
	struct jo_obj_info info;
	rc = jo_obj_head(e->dobj, m->dkey, &info, err);
	if (rc)
		return rc;
	if (info.size != size)
		return jo_err_set(err, JO_EIO, "\"%s\": assembled %" PRIu64 " bytes, expected %" PRIu64,
				  m->dkey, info.size, size);
	jo_sync_state_mpu_del(e->o->state, m->t->rel, err);
	row->dst_size = size;
	/* Remember the ETag the store reported (AWS-style "md5-N" or a plain MD5). */
	snprintf(row->dst_etag, sizeof(row->dst_etag), "%s", info.etag);
	if (!row->dst_etag[0]) {
		unsigned char d[16];
		md5_of(m->md5s, (size_t)m->nparts * 16, d);
		char h[33];
		hex(d, 16, h);
		snprintf(row->dst_etag, sizeof(row->dst_etag), "%s-%d", h, m->nparts);
	}
	if (jo_sync_etag_is_md5(m->t->src.etag))
		snprintf(row->md5, sizeof(row->md5), "%.32s", m->t->src.etag);
	return 0;
}

static int copy_multipart(struct eng *e, const char *skey, const char *dkey,
			  const struct task *t, struct jo_sync_row *row, bool *multipart,
			  struct jo_err *err)
{
	uint64_t size = t->src.size;
	uint64_t ps = mp_part_size(e->o, size);
	struct mp m = { .e = e, .skey = skey, .dkey = dkey, .rel = t->rel, .t = t, .part_size = ps };
	m.nparts = (int)((size + ps - 1) / ps);
	pthread_mutex_init(&m.mu, NULL);
	m.md5s = calloc((size_t)m.nparts, 16);
	m.parts = calloc((size_t)m.nparts, sizeof(*m.parts));
	char *upload_id = NULL;
	char **smeta = NULL;
	int rc = 0;
	*multipart = true;
	if (!m.md5s || !m.parts)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!rc)
		rc = mp_resume(&m, &upload_id, err);
	if (!rc && !upload_id)
		rc = mp_create(&m, &upload_id, &smeta, err);
	if (!rc) {
		m.upload_id = upload_id;
		rc = mp_upload_parts(&m, err);
	}
	if (!rc)
		rc = mp_complete(&m, row, err);
	if (e->rg && e->rg->mpu && upload_id) {
		/* nothing continues a range's upload later: one that failed goes now */
		struct jo_err aerr = { 0 };

		if (rc)
			jo_obj_mpu_abort(e->dobj, dkey, upload_id, &aerr);
		(void)e->rg->mpu(t->rel, upload_id, false, &aerr, e->rg->payload);
	}
	free(upload_id);
	free(m.md5s);
	free(m.parts);
	jo_obj_meta_free(smeta);
	pthread_mutex_destroy(&m.mu);
	return rc;
}

static int copy_server_side(struct eng *e, const char *skey, const char *dkey,
			    const struct task *t, struct jo_sync_row *row, struct jo_err *err)
{
	struct jo_obj_copy_opts co = { .src_bucket = e->src->bucket, .meta = NULL,
				       .if_match = src_if_match(&t->src) };
	int rc = jo_obj_copy(e->dobj, skey, dkey, &co, err);
	if (rc)
		return rc;
	__atomic_add_fetch(&e->moved_bytes, t->src.size, __ATOMIC_RELAXED);
	row->dst_size = t->src.size;
	if (jo_sync_etag_is_md5(t->src.etag)) {
		snprintf(row->md5, sizeof(row->md5), "%.32s", t->src.etag);
		snprintf(row->dst_etag, sizeof(row->dst_etag), "%s", t->src.etag);
	}
	return 0;
}

/*
 * A local destination file gets the source's mtime (as rclone does), so a
 * later sync in the other direction sees it as not newer than its origin.
 */
static void set_local_mtime(struct eng *e, const char *dkey, int64_t mtime)
{
	char *path = join_key(e->dst->bucket, dkey);
	if (!path)
		return;
	struct timespec ts[2] = { { .tv_sec = (time_t)mtime }, { .tv_sec = (time_t)mtime } };
	if (utimensat(AT_FDCWD, path, ts, 0) != 0)
		jo_debug("cannot set the mtime of %s: %s", path, strerror(errno));
	free(path);
}

static int copy_one(struct eng *e, const struct task *t, bool *ss, bool *mp, struct jo_err *err)
{
	char *skey = join_key(e->src->prefix, t->rel), *dkey = join_key(e->dst->prefix, t->rel);
	int rc;
	struct jo_sync_row row = { .found = true, .src_size = t->src.size,
				   .src_mtime = t->src.mtime, .copied_at = (int64_t)time(NULL) };
	snprintf(row.src_etag, sizeof(row.src_etag), "%s", t->src.etag);
	*ss = *mp = false;
	if (!skey || !dkey) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (e->rg && e->rg->may_mutate && !e->rg->may_mutate(e->rg->payload)) {
		rc = jo_err_set(err, JO_ECONFLICT, "the range's lease is lost: not copying");
		goto out;
	}
	if (e->server_side && t->src.size <= COPY_MAX) {
		*ss = true;
		rc = copy_server_side(e, skey, dkey, t, &row, err);
	} else if (t->src.size >= e->o->multipart_threshold && t->src.size > 0) {
		rc = copy_multipart(e, skey, dkey, t, &row, mp, err);
	} else {
		rc = copy_small(e, skey, dkey, t, &row, err);
	}
	if (!rc && e->dst->local)
		set_local_mtime(e, dkey, t->src.mtime);
	if (!rc)
		rc = jo_sync_state_put(e->o->state, t->rel, &row, err);
out:
	free(skey);
	free(dkey);
	return rc;
}

/*
 * Cluster: an earlier attempt of this range may have copied t before it
 * died. It did when DST's object carries this job's mark and the source
 * ETag (or size) the copy was made from: then the copy counts now, once.
 */
static int credit_one(struct eng *e, const struct task *t, bool *yes, struct jo_err *err)
{
	char *dkey = join_key(e->dst->prefix, t->rel);
	char **meta = NULL;
	struct jo_obj_info info;
	int rc;

	*yes = false;
	if (!dkey)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_obj_head_meta(e->dobj, dkey, &info, &meta, err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err);
		rc = 0;
	} else if (!rc) {
		const char *job = jo_obj_meta_get(meta, "jfsops-job");
		const char *se = jo_obj_meta_get(meta, "jfsops-src-etag");

		*yes = job && job_mark(e) && !strcmp(job, job_mark(e)) && info.size == t->src.size &&
		       (!t->src.etag[0] || (se && !strcasecmp(se, t->src.etag)));
	}
	jo_obj_meta_free(meta);
	free(dkey);
	return rc;
}

/* ---- workers ------------------------------------------------------------- */

static void task_free(struct task *t)
{
	if (!t)
		return;
	free(t->rel);
	free(t->before);
	free(t);
}

/* Unlink from the in-flight list; call with e->mu held. */
static void inflight_remove(struct eng *e, struct task *t)
{
	if (t->iprev)
		t->iprev->inext = t->inext;
	else
		e->ihead = t->inext;
	if (t->inext)
		t->inext->iprev = t->iprev;
	else
		e->itail = t->iprev;
	t->iprev = t->inext = NULL;
}

struct jo_sync_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int free;
};

struct jo_sync_gate *jo_sync_gate_new(int n)
{
	struct jo_sync_gate *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->free = n < 1 ? 1 : n;
	return g;
}

void jo_sync_gate_free(struct jo_sync_gate *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g);
}

/* A slot of the shared pool, or false once cancelled (nothing taken). */
static bool gate_take(struct jo_sync_gate *g)
{
	bool ok;

	if (!g)
		return true;
	pthread_mutex_lock(&g->mu);
	while (g->free == 0 && !jo_cancelled()) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&g->cv, &g->mu, &ts);
	}
	ok = g->free > 0;
	if (ok)
		g->free--;
	pthread_mutex_unlock(&g->mu);
	return ok;
}

static void gate_give(struct jo_sync_gate *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	g->free++;
	pthread_cond_signal(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static void *worker_main(void *p)
{
	struct eng *e = p;
	for (;;) {
		pthread_mutex_lock(&e->mu);
		while (!e->qhead && !e->closing)
			pthread_cond_wait(&e->cv, &e->mu);
		struct task *t = e->qhead;
		if (!t) {
			pthread_mutex_unlock(&e->mu);
			return NULL;
		}
		e->qhead = t->next;
		if (!e->qhead)
			e->qtail = NULL;
		e->qlen--;
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);

		struct jo_err err = { 0 };
		bool ss = false, mp = false, credited = false;
		bool gated = gate_take(e->o->gate);
		int rc = !gated || jo_cancelled() ? jo_err_set(&err, JO_ECANCELED, "cancelled")
			 : t->credit		  ? credit_one(e, t, &credited, &err)
						  : copy_one(e, t, &ss, &mp, &err);
		if (gated)
			gate_give(e->o->gate);
		if (rc && rc != JO_ECANCELED)
			jo_warn("%s \"%s\" failed: %s", t->credit ? "checking" : "copy", t->rel, err.msg);
		else if (!rc && e->o->verbose && !t->credit)
			jo_info("copied \"%s\" (%" PRIu64 " bytes)%s", t->rel, t->src.size,
				ss ? " server-side" : mp ? " multipart" : "");
		else if (!rc && e->o->verbose && credited)
			jo_info("counted \"%s\" (%" PRIu64 " bytes): copied by an earlier attempt",
				t->rel, t->src.size);
		if (!rc && e->o->live && (!t->credit || credited)) {
			__atomic_add_fetch(&e->o->live->copied, 1, __ATOMIC_RELAXED);
			__atomic_add_fetch(&e->o->live->copied_bytes, t->src.size, __ATOMIC_RELAXED);
		}
		pthread_mutex_lock(&e->mu);
		if (rc) {
			e->sum->failed++;
			e->rg_failed = true;
		} else if (t->credit) {
			if (credited) {
				e->sum->copied++;
				e->sum->copied_bytes += t->src.size;
				e->sum->credited++;
			}
		} else {
			e->sum->copied++;
			e->sum->copied_bytes += t->src.size;
			e->sum->server_side += ss;
			e->sum->multipart += mp;
		}
		e->outstanding--;
		bool keep = rc && e->track_pos;   /* a failure holds the listing position back */
		if (!keep && e->track_pos)
			inflight_remove(e, t);
		pthread_cond_broadcast(&e->cv);
		pthread_mutex_unlock(&e->mu);
		if (!keep)
			task_free(t);
		save_pos(e, false);
	}
}

static void enqueue(struct eng *e, struct task *t)
{
	pthread_mutex_lock(&e->mu);
	size_t cap = (size_t)e->o->transfers * 4 + 16;
	while (e->qlen >= cap)
		wait_and_save(e);
	if (e->qtail)
		e->qtail->next = t;
	else
		e->qhead = t;
	e->qtail = t;
	e->qlen++;
	e->outstanding++;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
}

/* Wait on e->cv (mu held) at most a second, then save the listing position. */
static void wait_and_save(struct eng *e)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_cond_timedwait(&e->cv, &e->mu, &ts);
	pthread_mutex_unlock(&e->mu);
	save_pos(e, false);
	pthread_mutex_lock(&e->mu);
}

static void drain(struct eng *e)
{
	pthread_mutex_lock(&e->mu);
	while (e->outstanding)
		wait_and_save(e);
	pthread_mutex_unlock(&e->mu);
}

/* ---- progress ------------------------------------------------------------ */

static void *progress_main(void *p)
{
	struct eng *e = p;
	for (;;) {
		struct timespec ts = { 0, 250 * 1000 * 1000 };
		for (int i = 0; i < 4; i++) {
			pthread_mutex_lock(&e->mu);
			bool stop = e->progress_stop;
			pthread_mutex_unlock(&e->mu);
			if (stop) {
				fprintf(stderr, "\r\033[K");
				return NULL;
			}
			nanosleep(&ts, NULL);
		}
		pthread_mutex_lock(&e->mu);
		uint64_t ls = e->ls ? jo_sync_stream_listed(e->ls) : e->sum->src_listed;
		uint64_t ld = e->ld ? jo_sync_stream_listed(e->ld) : e->sum->dst_listed;
		uint64_t c = e->sum->copied, cb = e->sum->copied_bytes, f = e->sum->failed;
		uint64_t q = e->outstanding, sk = e->sum->skipped, pb = e->planned_bytes;
		uint64_t mv = __atomic_load_n(&e->moved_bytes, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&e->mu);
		double el = now_s() - e->t0;
		double rate = el > 0 ? (double)mv / el : 0;
		char b1[32], b2[32], eta[32] = "?";
		jo_fmt_bytes((double)cb, 1, b1, sizeof(b1));
		jo_fmt_bytes(rate, 1, b2, sizeof(b2));
		/*
		 * ETA of the copies known so far (the listings may still add more),
		 * from the bytes moved, in-flight copies' included: counting only
		 * finished copies gave hours for a job of large objects that ended
		 * seconds later. A retried part moves twice: never below 0.
		 */
		if (rate > 0)
			snprintf(eta, sizeof(eta), "%.0fs",
				 pb > mv ? (double)(pb - mv) / rate : 0.0);
		fprintf(stderr, "\r\033[Klisted %" PRIu64 "/%" PRIu64 "  copied %" PRIu64 " (%s, %s/s)"
			"  skipped %" PRIu64 "  queued %" PRIu64 "  failed %" PRIu64 "  %.0fs  eta %s",
			ls, ld, c, b1, b2, sk, q, f, el, eta);
	}
}

/* ---- merge --------------------------------------------------------------- */

static int keycmp(const char *a, const char *b)
{
	return strcmp(a, b);  /* byte order: strcmp compares as unsigned char */
}

static int add_extra(struct eng *e, const char *rel, struct jo_err *err)
{
	if (!e->extras)
		return 0;
	uint32_t n = (uint32_t)strlen(rel);
	if (fwrite(&n, 4, 1, e->extras) != 1 || fwrite(rel, 1, n, e->extras) != n)
		return jo_err_set(err, JO_EIO, "temp file for deletions: %s", strerror(errno));
	e->nextras++;
	return 0;
}

/*
 * A SRC key with no one-to-one path in the local DST: one line on stderr,
 * counted. In a cluster range it is also a failed object, so the range
 * (and the job) ends failed and its deletions are never run.
 */
static void refuse_key(struct eng *e, const char *rel, const char *why)
{
	/* jo_warn shows control bytes as ls -b does (common/esc.h) */
	jo_warn("refused \"%s\": not representable on a local filesystem (%s)", rel, why);
	pthread_mutex_lock(&e->mu);
	e->sum->unrepresentable++;
	if (e->track_pos && !e->refused_pos)
		e->refused_pos = strdup(e->merge_pos ? e->merge_pos : "");
	if (e->rg) {
		e->sum->failed++;
		e->rg_failed = true;
	}
	pthread_mutex_unlock(&e->mu);
}

/* Cluster: may an earlier attempt have copied rel without counting it? */
static bool in_credit_window(const struct eng *e, const char *rel)
{
	(void)rel; /* every key past the resume point: the merge only sees those */
	return e->rg && e->uncounted;
}

static int dispatch_copy(struct eng *e, const struct jo_sync_ent *s, const struct jo_sync_ent *d,
			 const char *why, struct jo_err *err)
{
	bool credit = why == NULL;  /* dispatch_credit */

	if (e->o->dry_run) {
		e->sum->would_copy++;
		e->sum->would_copy_bytes += s->size;
		plan_line(e, "copy", s->key, s->size, why);
		return 0;
	}
	struct task *t = calloc(1, sizeof(*t));
	if (!t || !(t->rel = strdup(s->key))) {
		free(t);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	t->src = *s;
	t->src.key = t->rel;
	t->credit = credit;
	if (e->track_pos) {
		t->before = strdup(e->merge_pos ? e->merge_pos : "");
		if (!t->before) {
			task_free(t);
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		}
	}
	pthread_mutex_lock(&e->mu);
	if (!credit)
		e->planned_bytes += s->size;
	if (e->track_pos) {
		t->iprev = e->itail;
		if (e->itail)
			e->itail->inext = t;
		else
			e->ihead = t;
		e->itail = t;
	}
	pthread_mutex_unlock(&e->mu);
	if (d) {
		t->has_dst = true;
		t->dst = *d;
		t->dst.key = NULL;
	}
	if (e->o->verbose && !credit)
		jo_info("copy \"%s\" (%s)", s->key, why);
	enqueue(e, t);
	return 0;
}

/* Cluster: a HEAD to learn whether an earlier attempt copied s. */
static int dispatch_credit(struct eng *e, const struct jo_sync_ent *s, struct jo_err *err)
{
	return dispatch_copy(e, s, NULL, NULL, err);
}

/*
 * Save how far the run got: every source key up to the saved one was
 * skipped or copied. --resume lists both sides after it.
 */
static void save_pos(struct eng *e, bool force)
{
	if (!e->track_pos)
		return;
	double t = now_s();
	pthread_mutex_lock(&e->mu);
	if (!force && t - e->pos_saved_at < 2.0) {
		pthread_mutex_unlock(&e->mu);
		return;
	}
	e->pos_saved_at = t;
	const char *src = e->ihead ? e->ihead->before : e->merge_pos;
	if (e->refused_pos && (!src || strcmp(e->refused_pos, src) < 0))
		src = e->refused_pos;  /* a refused key is listed (and refused) again */
	char *w = strdup(src ? src : "");
	pthread_mutex_unlock(&e->mu);
	if (!w)
		return;
	struct jo_err err = { 0 };
	if (jo_sync_state_setkv(e->o->state, "listpos", w, &err))
		jo_warn("cannot save the listing position: %s", err.msg);
	free(w);
}

static int set_merge_pos(struct eng *e, const char *key, struct jo_err *err)
{
	char *k = strdup(key);
	if (!k)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	pthread_mutex_lock(&e->mu);
	free(e->merge_pos);
	e->merge_pos = k;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

/*
 * Cluster: a checkpoint. Wait until nothing is in flight, fold the pass's
 * counters into e->ck and hand {last key, counters} to the range's
 * callback, which records it as the resume position. After a failed copy
 * the position stays where it was (the key must be copied again).
 */
static int range_checkpoint(struct eng *e, uint64_t *nsrc, uint64_t *ndst, uint64_t *skipped,
			    uint64_t *excluded, uint64_t *nextra, struct jo_err *err)
{
	struct jo_sync_ckpt c;
	bool failed;
	int rc = 0;

	drain(e);
	e->ck_at = now_s();
	pthread_mutex_lock(&e->mu);
	failed = e->rg_failed;
	c.copied = e->rg->base.copied + e->sum->copied;
	c.copied_bytes = e->rg->base.copied_bytes + e->sum->copied_bytes;
	c.credited = e->rg->base.credited + e->sum->credited;
	pthread_mutex_unlock(&e->mu);
	if (failed || !e->last_key)
		return 0;
	/* credited keys were counted as skipped by the merge: they were copies */
	uint64_t cred = c.credited - e->ck.credited;
	e->ck.src_listed += *nsrc;
	e->ck.dst_listed += *ndst;
	e->ck.skipped += *skipped > cred ? *skipped - cred : 0;
	e->ck.excluded += *excluded;
	e->ck.extra += *nextra;
	*nsrc = *ndst = *skipped = *excluded = *nextra = 0;
	e->ck.copied = c.copied;
	e->ck.copied_bytes = c.copied_bytes;
	e->ck.credited = c.credited;
	char *np = strdup(e->last_key);
	if (!np)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	free(e->ck_pos);
	e->ck_pos = np;
	c = e->ck;
	c.pos = e->ck_pos;
	c.failed = false;
	rc = e->rg->checkpoint(&c, err, e->rg->payload);
	return rc;
}

/* The counts of one merge pass (range_checkpoint moves them into the checkpoint). */
struct merge_counts {
	uint64_t nsrc, ndst, skipped, excluded, nextra, iter;
};

/* Both listings started (DST's not when a dry run's DST does not exist yet). */
static int merge_open(struct eng *e, bool sort_src, bool sort_dst, const char *after,
		      struct jo_sync_stream **ls, struct jo_sync_stream **ld, struct jo_err *err)
{
	const struct jo_sync_opts *o = e->o;
	struct jo_sync_stream_opts sos = { .threads = o->list_threads, .sort = sort_src,
					   .sort_mem = o->sort_mem, .tmp_dir = o->tmp_dir,
					   .after = after, .desc = e->src->desc };
	if (e->rg) {
		sos.range = true;
		sos.lo = e->rg->lo;
		sos.hi = e->rg->hi;
		sos.order = e->rg->src_order;
	}
	struct jo_sync_stream_opts sod = sos;
	sod.sort = sort_dst;
	sod.desc = e->dst->desc;
	if (e->rg)
		sod.order = e->rg->dst_order;
	int rc = jo_sync_stream_start(ls, e->so, e->src->prefix, &sos, err);
	/* A dry run to a local directory that a real run would create: nothing there yet. */
	if (!rc && !o->dst_absent)
		rc = jo_sync_stream_start(ld, e->dobj, e->dst->prefix, &sod, err);
	if (rc) {
		jo_sync_stream_free(*ls);
		return rc;
	}
	pthread_mutex_lock(&e->mu);
	e->ls = *ls;
	e->ld = *ld;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

/* A range's lease checked now and then, its checkpoint written when due. */
static int merge_range_tick(struct eng *e, struct merge_counts *m, struct jo_err *err)
{
	if (e->rg && (++m->iter & 255) == 0 && e->rg->may_mutate &&
	    !e->rg->may_mutate(e->rg->payload))
		return jo_err_set(err, JO_ECONFLICT, "the range's lease is lost");
	if (e->rg && !e->rg->delete_only && e->rg->checkpoint &&
	    now_s() - e->ck_at >= e->rg->checkpoint_s)
		return range_checkpoint(e, &m->nsrc, &m->ndst, &m->skipped, &m->excluded, &m->nextra,
					err);
	return 0;
}

/* A key on SRC: copied when the comparison says so, else skipped (or credited). */
static int merge_src_key(struct eng *e, const struct jo_sync_ent *s, const struct jo_sync_ent *d,
			 struct merge_counts *m, struct jo_err *err)
{
	const struct jo_sync_opts *o = e->o;
	struct jo_sync_row row;
	const char *why = NULL;
	int rc = jo_sync_state_get(o->state, s->key, &row, err);

	if (rc)
		return rc;
	if (jo_sync_decide(&o->cmp, s, d, &row, &why) == JO_SYNC_COPY)
		return dispatch_copy(e, s, d, why, err);
	m->skipped++;
	/* an earlier attempt may have copied it: count it if so */
	if (d && in_credit_window(e, s->key))
		return dispatch_credit(e, s, err);
	return 0;
}

/* One key of the merge, on SRC (s), DST (d) or both: what becomes of it. */
static int merge_key(struct eng *e, const struct jo_sync_ent *s, const struct jo_sync_ent *d,
		     struct merge_counts *m, struct jo_err *err)
{
	const struct jo_sync_opts *o = e->o;
	const char *rel = s ? s->key : d->key;
	size_t rl = strlen(rel);
	const char *bad = NULL;
	int rc;

	if (!jo_sync_filter_pass(o->filter, rel) ||
	    (e->dst->local && (s ? s->size : 0) == 0 && (rl == 0 || rel[rl - 1] == '/'))) {
		/* Excluded, or a "directory marker" key a directory cannot hold. */
		m->excluded++;
	} else if (s && e->dst->local && (bad = jo_sync_local_key_why(rel, s->size))) {
		/*
		 * A key a local DST cannot hold one-to-one ("a//b" and "a/b" are
		 * one file): refused, every run alike; no deletion follows a run
		 * that refused one. A local listing never yields such a key, so
		 * d is NULL.
		 */
		if (!(e->rg && e->rg->delete_only))
			refuse_key(e, rel, bad);
	} else if (s && e->rg && e->rg->delete_only) {
		/* phase 2 compares nothing: it only finds what DST has in excess */
	} else if (s) {
		return merge_src_key(e, s, d, m, err);
	} else if (o->delete_dst) {
		rc = add_extra(e, rel, err);
		if (rc)
			return rc;
		m->nextra++;
	} else if (e->rg) {
		m->nextra++;
	} else {
		e->sum->extra++;
	}
	return 0;
}

/* After a key: a range's last key, the listing position to resume from. */
static int merge_key_done(struct eng *e, const struct jo_sync_ent *s, const char *rel,
			  const struct merge_counts *m, struct jo_err *err)
{
	if (e->rg && !e->rg->delete_only) {
		char *lk = strdup(rel);

		if (!lk)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		free(e->last_key);
		e->last_key = lk;
	}
	if (s && e->track_pos) {
		int rc = set_merge_pos(e, s->key, err);

		if (rc)
			return rc;
		if ((m->nsrc & 255) == 0)
			save_pos(e, false);
	}
	return 0;
}

/* How the listings ended (ra, rb their last returns; eb DST's error): the pass's code. */
static int merge_end(struct eng *e, int rc, int ra, int rb, const struct jo_err *eb,
		     char *which_side, struct jo_err *err)
{
	if (!rc && jo_cancelled())
		rc = jo_err_set(err, JO_ECANCELED, "cancelled");
	if (!rc && (ra == JO_SYNC_EORDER || rb == JO_SYNC_EORDER)) {
		*which_side = ra == JO_SYNC_EORDER ? 's' : 'd';
		if (rb == JO_SYNC_EORDER && ra != JO_SYNC_EORDER)
			*err = *eb;
		rc = JO_SYNC_EORDER;
	} else if (!rc && ra < 0) {
		rc = ra;
		jo_err_wrap(err, "listing SRC %s", e->src->desc);
	} else if (!rc && rb < 0) {
		*err = *eb;
		rc = rb;
		jo_err_wrap(err, "listing DST %s", e->dst->desc);
	}
	return rc;
}

/* The pass's counts into the summary (a range's: on top of its last checkpoint). */
static void merge_totals(struct eng *e, struct jo_sync_stream *ls, struct jo_sync_stream *ld,
			 const struct merge_counts *m)
{
	pthread_mutex_lock(&e->mu);
	e->ls = e->ld = NULL;
	e->sum->src_listed = m->nsrc;
	e->sum->dst_listed = m->ndst;
	e->sum->src_links = jo_sync_stream_links(ls);
	e->sum->dst_links = ld ? jo_sync_stream_links(ld) : 0;
	e->sum->skipped = m->skipped;
	e->sum->excluded = m->excluded;
	if (e->rg) {
		/* the range's totals: up to the last checkpoint, then this pass */
		e->sum->src_listed += e->ck.src_listed;
		e->sum->dst_listed += e->ck.dst_listed;
		e->sum->skipped += e->ck.skipped;
		e->sum->excluded += e->ck.excluded;
		e->sum->extra = e->ck.extra + m->nextra;
	}
	pthread_mutex_unlock(&e->mu);
}

/* One merge pass. Returns 0, JO_SYNC_EORDER (with *which_side 's'/'d'), or an error. */
static int merge_pass(struct eng *e, bool sort_src, bool sort_dst, const char *after,
		      char *which_side, struct jo_err *err)
{
	struct jo_sync_stream *ls = NULL, *ld = NULL;
	int rc = merge_open(e, sort_src, sort_dst, after, &ls, &ld, err);

	if (rc)
		return rc;

	struct jo_sync_ent a = { 0 }, b = { 0 };
	struct jo_err eb = { 0 };
	int ra = jo_sync_stream_next(ls, &a, err);
	int rb = ld ? jo_sync_stream_next(ld, &b, &eb) : 0;
	struct merge_counts m = { 0 };
	while (!jo_cancelled()) {
		if (ra < 0 || ra == JO_SYNC_EORDER || rb < 0 || rb == JO_SYNC_EORDER)
			break;
		if (ra == 0 && rb == 0)
			break;
		if ((rc = merge_range_tick(e, &m, err)) != 0)
			break;
		int c = ra == 0 ? 1 : rb == 0 ? -1 : keycmp(a.key, b.key);
		const struct jo_sync_ent *s = c <= 0 ? &a : NULL, *d = c >= 0 ? &b : NULL;
		const char *rel = s ? s->key : d->key;
		if (s)
			m.nsrc++;
		if (d)
			m.ndst++;
		if ((rc = merge_key(e, s, d, &m, err)) != 0 ||
		    (rc = merge_key_done(e, s, rel, &m, err)) != 0)
			break;
		if (s)
			ra = jo_sync_stream_next(ls, &a, err);
		if (d)
			rb = jo_sync_stream_next(ld, &b, &eb);  /* d: ld is open */
		if (((m.nsrc + m.ndst) & 1023) == 0) {
			pthread_mutex_lock(&e->mu);
			e->sum->skipped = m.skipped;
			pthread_mutex_unlock(&e->mu);
		}
	}
	rc = merge_end(e, rc, ra, rb, &eb, which_side, err);
	merge_totals(e, ls, ld, &m);
	jo_sync_stream_free(ls);
	jo_sync_stream_free(ld);
	return rc;
}

/* ---- deletes ------------------------------------------------------------- */

static int delete_pass(struct eng *e, struct jo_err *err)
{
	const struct jo_sync_opts *o = e->o;
	struct jo_sync_summary *sum = e->sum;
	sum->extra = e->nextras;
	if (!e->nextras)
		return 0;
	const char *why = NULL;
	char buf[200];
	if (sum->failed)
		why = "some copies failed";
	else if (sum->unrepresentable) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " SRC key%s not representable on a local "
			 "filesystem (exclude them to allow deletions)", sum->unrepresentable,
			 sum->unrepresentable == 1 ? " is" : "s are");
		why = buf;
	}
	else if (e->rg && e->rg->expect_src && sum->src_listed == 0)
		why = "the source listed no objects in this range, which it did in the copy phase";
	else if (e->rg && e->nextras > e->rg->max_extras) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " objects only in DST, the copy phase counted %"
			 PRIu64 ": DST changed since", e->nextras, e->rg->max_extras);
		why = buf;
	} else if (e->rg) {
		/* the job's brakes were applied to the whole job before phase 2 */
	} else if (sum->src_listed == 0)
		why = "the source listed no objects";
	else if (o->max_delete >= 0 && e->nextras > (uint64_t)o->max_delete) {
		snprintf(buf, sizeof(buf), "%" PRIu64 " deletions exceed --max-delete %" PRId64,
			 e->nextras, o->max_delete);
		why = buf;
	}
	if (why) {
		sum->delete_refused = true;
		snprintf(sum->delete_refused_why, sizeof(sum->delete_refused_why), "%s", why);
		return 0;
	}
	if (fflush(e->extras) || fseek(e->extras, 0, SEEK_SET))
		return jo_err_set(err, JO_EIO, "temp file for deletions: %s", strerror(errno));
	enum { BATCH = 1000 };
	char *keys[BATCH];
	int results[BATCH];
	int rc = 0;
	for (;;) {
		size_t n = 0;
		uint32_t len;
		while (n < BATCH && fread(&len, 4, 1, e->extras) == 1) {
			char *rel = malloc((size_t)len + 1);
			if (!rel || fread(rel, 1, len, e->extras) != len) {
				free(rel);
				rc = jo_err_set(err, JO_EIO, "temp file for deletions: short read");
				break;
			}
			rel[len] = 0;
			if (o->dry_run) {
				plan_line(e, "delete", rel, 0, "extra");
				sum->would_delete++;
				free(rel);
				continue;
			}
			keys[n] = join_key(e->dst->prefix, rel);
			free(rel);
			if (!keys[n]) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				break;
			}
			n++;
		}
		if (n && !rc && e->rg && e->rg->may_mutate && !e->rg->may_mutate(e->rg->payload))
			rc = jo_err_set(err, JO_ECONFLICT, "the range's lease is lost: not deleting");
		if (n && !rc && !jo_cancelled()) {
			struct jo_err derr = { 0 };
			int drc = jo_obj_delete_batch(e->dobj, (const char *const *)keys, n, results, &derr);
			for (size_t i = 0; i < n; i++) {
				int r = drc ? drc : results[i];
				if (r) {
					sum->failed++;
					jo_warn("delete \"%s\" failed: %s", keys[i],
						drc ? derr.msg : jo_err_name(r));
				} else {
					sum->deleted++;
					if (o->verbose)
						jo_info("deleted \"%s\"", keys[i]);
				}
			}
		}
		for (size_t i = 0; i < n; i++)
			free(keys[i]);
		if (rc || n < BATCH || jo_cancelled())
			break;
	}
	if (!rc && jo_cancelled())
		rc = jo_err_set(err, JO_ECANCELED, "cancelled");
	return rc;
}

/* ---- run ----------------------------------------------------------------- */

static int abort_stale_cb(const char *key, const struct jo_sync_mpu *m, void *p)
{
	struct eng *e = p;
	char *dkey = join_key(e->dst->prefix, key);
	if (!dkey)
		return JO_ENOMEM;
	struct jo_err err = { 0 };
	jo_obj_mpu_abort(e->dobj, dkey, m->upload_id, &err);
	jo_sync_state_mpu_del(e->o->state, key, &err);
	free(dkey);
	return 0;
}

/*
 * Cluster: a side broke the order its range listing relied on. List it
 * again in a weaker order (byte -> directory-first -> whole prefix,
 * sorted), from the last checkpoint, as a fresh attempt would: counters
 * back to the checkpoint, and what this pass may have copied is credited
 * (HEAD) rather than counted twice.
 */
static int range_relist(struct eng *e, char side, const struct jo_objurl *bad, char **after,
			struct jo_err *err)
{
	enum jo_sync_order *ord = side == 's' ? &e->rg->src_order : &e->rg->dst_order;

	if (*ord == JO_SYNC_ORDER_ANY)
		return jo_err_wrap(err, "%s", bad->desc);
	*ord = *ord == JO_SYNC_ORDER_BYTES ? JO_SYNC_ORDER_DIRFIRST : JO_SYNC_ORDER_ANY;
	jo_warn("%s: %s; listing the range again %s", bad->desc, err->msg,
		*ord == JO_SYNC_ORDER_DIRFIRST ? "in directory-first order"
					       : "whole, through an external sort");
	jo_err_clear(err);
	pthread_mutex_lock(&e->mu);
	e->sum->copied = e->ck.copied - e->rg->base.copied;
	e->sum->copied_bytes = e->ck.copied_bytes - e->rg->base.copied_bytes;
	e->sum->credited = e->ck.credited - e->rg->base.credited;
	e->sum->failed = 0;
	e->rg_failed = false;
	pthread_mutex_unlock(&e->mu);
	e->uncounted = true;  /* this pass may have copied past the checkpoint */
	free(*after);
	*after = e->ck_pos ? strdup(e->ck_pos) : NULL;
	if (e->ck_pos && !*after)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	free(e->last_key);
	e->last_key = e->ck_pos ? strdup(e->ck_pos) : NULL;
	return 0;
}

/* The engine of one run: which copies may go server-side, how much memory buffers take. */
static void eng_init(struct eng *e, const struct jo_objurl *src, struct jo_obj *so,
		     const struct jo_objurl *dst, struct jo_obj *dobj,
		     const struct jo_sync_opts *opts, struct jo_sync_summary *sum)
{
	*e = (struct eng){ .src = src, .dst = dst, .so = so, .dobj = dobj, .o = opts, .sum = sum };
	pthread_mutex_init(&e->mu, NULL);
	pthread_cond_init(&e->cv, NULL);
	e->t0 = now_s();
	e->server_side = opts->server_side && !src->local && !dst->local &&
			 !strcmp(src->endpoint, dst->endpoint) &&
			 !strcmp(src->access_key ? src->access_key : "",
				 dst->access_key ? dst->access_key : "");
	uint64_t budget = (uint64_t)opts->transfers * (opts->multipart_threshold < (16u << 20)
						       ? opts->multipart_threshold : (16u << 20));
	uint64_t pbudget = (uint64_t)opts->part_concurrency * opts->part_size * 2;
	e->mem_avail = budget > pbudget ? budget : pbudget;
	if (e->mem_avail < (64u << 20))
		e->mem_avail = 64u << 20;
}

/* A cluster range: its checkpoint continues from the range's base and resume position. */
static int eng_range_begin(struct eng *e, struct jo_err *err)
{
	e->rg = e->o->range;
	if (!e->rg)
		return 0;
	e->ck = e->rg->base;
	e->ck.pos = NULL;
	e->ck_at = now_s();
	e->uncounted = e->rg->uncounted;
	if (e->rg->after && !(e->ck_pos = strdup(e->rg->after))) {
		free(e->ck_pos);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

/* The state file before a run: stale uploads aborted, an old listing position cleared. */
static int eng_state_begin(struct eng *e, struct jo_err *err)
{
	const struct jo_sync_opts *opts = e->o;

	/* Uploads left by an earlier run that --resume will not continue. */
	if (!opts->resume && !opts->dry_run && opts->state)
		jo_sync_state_mpu_each(opts->state, abort_stale_cb, e, err);
	/*
	 * A run that lists from the first key makes the position an earlier run
	 * saved meaningless: it is cleared before anything is copied. Otherwise a
	 * run that saves none (--delete-dst) or is killed before its first save
	 * would leave the old one, and a later --resume would skip every key
	 * before it, changed since or not.
	 */
	if (!opts->dry_run && opts->state && !(opts->resume && !opts->delete_dst) &&
	    jo_sync_state_setkv(opts->state, "listpos", "", err))
		return jo_err_wrap(err, "state file: cannot clear the saved listing position");
	return 0;
}

/* The side's listing goes through the external sort: asked, or found unordered before. */
static bool sort_side(const struct jo_sync_opts *opts, const struct jo_objurl *side,
		      bool sort, struct jo_err *err)
{
	char kvk[700];
	char *v = NULL;

	snprintf(kvk, sizeof(kvk), "unordered:%s", side->desc);
	if (jo_sync_state_getkv(opts->state, kvk, &v, err) == 0 && v)
		sort = true;
	free(v);
	return sort;
}

/* Where the listing starts: the range's resume position or, with --resume, the saved one. */
static int eng_listing_start(struct eng *e, char **after, struct jo_err *err)
{
	const struct jo_sync_opts *opts = e->o;
	int rc = 0;

	if (e->rg && e->rg->after && !(*after = strdup(e->rg->after)))
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (opts->resume && opts->state && !opts->delete_dst && !e->rg) {
		if (jo_sync_state_getkv(opts->state, "listpos", after, err) == 0 && *after &&
		    **after) {
			e->sum->resumed_listing = true;
			jo_warn("resuming: listing both sides after \"%s\"", *after);
		}
	}
	return rc;
}

/* What a listing pass counts, reset before each (a pass after a restart counts again). */
static int eng_pass_reset(struct eng *e, const char *after, struct jo_err *err)
{
	struct jo_sync_summary *sum = e->sum;

	pthread_mutex_lock(&e->mu);
	free(e->merge_pos);
	e->merge_pos = after && *after ? strdup(after) : NULL;
	free(e->refused_pos);
	e->refused_pos = NULL;
	pthread_mutex_unlock(&e->mu);
	if (e->extras)
		fclose(e->extras);
	e->extras = NULL;
	e->nextras = 0;
	sum->extra = 0;
	sum->unrepresentable = 0;  /* the pass refuses them again */
	sum->would_copy = sum->would_copy_bytes = 0;
	if (e->o->delete_dst) {
		e->extras = tmpfile();
		if (!e->extras)
			return jo_err_set(err, JO_EIO, "cannot create a temp file: %s", strerror(errno));
	}
	return 0;
}

/*
 * The merge of both listings, again as long as a side turns out not to list
 * in byte order: a range lists it again from its position, a whole run
 * through the external sort (recorded in the state file for next time).
 */
static int eng_listing_passes(struct eng *e, bool sort_src, bool sort_dst, char **after, int rc,
			      struct jo_err *err)
{
	const struct jo_sync_opts *opts = e->o;

	for (int attempt = 0; rc != JO_ENOMEM; attempt++) {
		if ((rc = eng_pass_reset(e, *after, err)) != 0)
			break;
		char side = 0;
		rc = merge_pass(e, sort_src, sort_dst, *after, &side, err);
		drain(e);
		if (rc != JO_SYNC_EORDER)
			break;
		const struct jo_objurl *bad = side == 's' ? e->src : e->dst;
		if (e->rg) {
			rc = range_relist(e, side, bad, after, err);
			if (rc)
				break;
			e->sum->order_restarts++;
			continue;
		}
		if (attempt >= 2 || (side == 's' ? sort_src : sort_dst)) {
			rc = jo_err_wrap(err, "%s", bad->desc);
			break;
		}
		jo_warn("%s does not list keys in byte order (%s); listing it again through an "
			"external sort", bad->desc, err->msg);
		jo_err_clear(err);
		char kvk[700];
		snprintf(kvk, sizeof(kvk), "unordered:%s", bad->desc);
		jo_sync_state_setkv(opts->state, kvk, "1", err);
		if (side == 's')
			sort_src = true;
		else
			sort_dst = true;
		e->sum->order_restarts++;
	}
	return rc;
}

/* The transfer threads told to finish what is queued, and joined. */
static void eng_stop_workers(struct eng *e, pthread_t *workers, int started)
{
	pthread_mutex_lock(&e->mu);
	e->closing = true;
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < started; i++)
		pthread_join(workers[i], NULL);
	free(workers);
}

/* The listing position of the state file after the pass (rc its outcome). */
static void eng_finish_position(struct eng *e, int rc)
{
	/* A clean, complete pass leaves no position: the next run lists it all. */
	if (!rc && !e->ihead) {
		struct jo_err kerr = { 0 };
		jo_sync_state_setkv(e->o->state, "listpos", "", &kerr);
	} else {
		save_pos(e, true);
	}
	while (e->ihead) {
		struct task *t = e->ihead;
		inflight_remove(e, t);
		task_free(t);
	}
}

/* A range's counts include what earlier attempts at it recorded. */
static void eng_range_totals(struct eng *e)
{
	struct jo_sync_summary *sum = e->sum;
	/* credited keys were also counted as skipped since the last checkpoint */
	uint64_t since = sum->credited - (e->ck.credited - e->rg->base.credited);

	sum->skipped = sum->skipped > since ? sum->skipped - since : 0;
	sum->copied += e->rg->base.copied;
	sum->copied_bytes += e->rg->base.copied_bytes;
	sum->credited += e->rg->base.credited;
}

/* --delete-dst after a complete pass; after an incomplete one, why none ran. */
static int eng_deletes(struct eng *e, int rc, struct jo_err *err)
{
	struct jo_sync_summary *sum = e->sum;

	if (!rc && e->o->delete_dst)
		return delete_pass(e, err);
	if (rc && e->nextras) {
		sum->extra = e->nextras;
		sum->delete_refused = true;
		snprintf(sum->delete_refused_why, sizeof(sum->delete_refused_why),
			 "the run did not complete");
	}
	return rc;
}

/* The progress line stopped, the engine's resources released. */
static void eng_end(struct eng *e)
{
	if (e->o->progress) {
		pthread_mutex_lock(&e->mu);
		e->progress_stop = true;
		pthread_mutex_unlock(&e->mu);
		pthread_join(e->progress_th, NULL);
	}
	if (e->extras)
		fclose(e->extras);
	e->sum->seconds = now_s() - e->t0;
	pthread_mutex_destroy(&e->mu);
	pthread_cond_destroy(&e->cv);
	free(e->last_key);
	free(e->ck_pos);
}

int jo_sync_run(const struct jo_objurl *src, struct jo_obj *so,
		const struct jo_objurl *dst, struct jo_obj *dobj,
		const struct jo_sync_opts *opts, struct jo_sync_summary *sum,
		struct jo_err *err)
{
	struct eng e;
	int rc;

	memset(sum, 0, sizeof(*sum));
	eng_init(&e, src, so, dst, dobj, opts, sum);

	int nw = opts->transfers < 1 ? 1 : opts->transfers;
	pthread_t *workers = calloc((size_t)nw, sizeof(*workers));
	int started = 0;
	if (!workers)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = eng_range_begin(&e, err)) != 0 || (rc = eng_state_begin(&e, err)) != 0) {
		free(workers);
		return rc;
	}
	if (!opts->dry_run) {
		for (; started < nw; started++)
			if (pthread_create(&workers[started], NULL, worker_main, &e) != 0)
				break;
		if (!started) {
			free(workers);
			return jo_err_set(err, JO_EIO, "cannot start transfer threads");
		}
	}
	if (opts->progress)
		pthread_create(&e.progress_th, NULL, progress_main, &e);

	bool sort_src = sort_side(opts, src, opts->src_sort || src->unordered, err);
	bool sort_dst = sort_side(opts, dst, opts->dst_sort || dst->unordered, err);

	e.track_pos = opts->state && !opts->dry_run && !opts->delete_dst && !opts->range;
	char *after = NULL;
	rc = eng_listing_start(&e, &after, err);
	rc = eng_listing_passes(&e, sort_src, sort_dst, &after, rc, err);
	if (e.rg && e.rg->listed)
		e.rg->listed(e.rg->payload);
	eng_stop_workers(&e, workers, started);
	if (e.track_pos)
		eng_finish_position(&e, rc);
	free(e.merge_pos);
	free(e.refused_pos);
	free(after);
	if (e.rg)
		eng_range_totals(&e);
	rc = eng_deletes(&e, rc, err);
	eng_end(&e);
	return rc;
}
