/*
 * test_tkv.c: the tkv family (common/meta/tkv*.c) over an in-memory
 * transport that keeps the contract of tkv/kv.h (checked commits: a
 * key or range read that changed fails the commit; per-transaction limits
 * of 128 checks and 128 writes, as etcd's; snapshot scans), so the family's
 * logic is tested apart from any store: reads of the B.2 layout, deleteChunk
 * of a chunk with more slices than one transaction may carry (done in
 * steps, each consistent), delayed-slice cleanup, forgetting slices, unlink
 * and rmdir of trash entries, their restores (batched, each transaction
 * within the limits), task records and leases, compaction commits,
 * and a transaction retried after a concurrent writer changed what it read.
 * The real store is tested by tests/integration/kv_etcd.sh and engines_*.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_internal.h"
#include "common/meta/meta_mut.h"
#include "common/meta/tkv/internal.h"

/* ---------------------------------------------------------------- the store */

struct kv {
	uint8_t *k, *v;
	size_t kl, vl;
	int64_t ver;
};

static struct {
	struct kv *e;
	size_t n, cap;
	int64_t rev;
	int commits, conflicts, max_reads, max_writes;
	int64_t last_pin;    /* the revision the last snapshot scan was asked for (-1: none) */
	/* before the next commit, change this key (a concurrent writer) */
	uint8_t meddle[64];
	size_t meddle_len;
} S;

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al < bl ? -1 : al > bl);
}

static size_t find(const uint8_t *k, size_t kl, bool *hit)
{
	size_t lo = 0, hi = S.n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = kcmp(S.e[mid].k, S.e[mid].kl, k, kl);

		if (c == 0) {
			*hit = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*hit = false;
	return lo;
}

static void store_put(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	bool hit;
	size_t i = find(k, kl, &hit);

	if (!hit) {
		if (S.n == S.cap) {
			S.cap = S.cap ? S.cap * 2 : 64;
			S.e = realloc(S.e, S.cap * sizeof(*S.e));
		}
		memmove(S.e + i + 1, S.e + i, (S.n - i) * sizeof(*S.e));
		S.n++;
		S.e[i].k = malloc(kl);
		memcpy(S.e[i].k, k, kl);
		S.e[i].kl = kl;
		S.e[i].v = NULL;
	}
	free(S.e[i].v);
	S.e[i].v = malloc(vl ? vl : 1);
	memcpy(S.e[i].v, v, vl);
	S.e[i].vl = vl;
	S.e[i].ver = ++S.rev;
}

static void store_del(const uint8_t *k, size_t kl)
{
	bool hit;
	size_t i = find(k, kl, &hit);

	if (!hit)
		return;
	free(S.e[i].k);
	free(S.e[i].v);
	memmove(S.e + i, S.e + i + 1, (S.n - i - 1) * sizeof(*S.e));
	S.n--;
	S.rev++;
}

static int64_t store_ver(const uint8_t *k, size_t kl)
{
	bool hit;
	size_t i = find(k, kl, &hit);

	return hit ? S.e[i].ver : 0;
}

static void store_reset(void)
{
	for (size_t i = 0; i < S.n; i++) {
		free(S.e[i].k);
		free(S.e[i].v);
	}
	free(S.e);
	memset(&S, 0, sizeof(S));
}

/* ---------------------------------------------------------------- the transport */

struct jo_kvc {
	int unused;
};

struct op {
	int kind; /* 0 read key, 1 read range, 2 put, 3 del, 4 del range */
	uint8_t *k, *e, *v;
	size_t kl, el, vl;
	int64_t ver;
};

struct jo_kvt {
	struct op *o;
	size_t n;
};

static uint8_t *dup(const void *p, size_t n)
{
	uint8_t *d = malloc(n ? n : 1);

	memcpy(d, p, n);
	return d;
}

static void push(struct jo_kvt *t, struct op o)
{
	t->o = realloc(t->o, (t->n + 1) * sizeof(*t->o));
	t->o[t->n++] = o;
}

static int m_connect(struct jo_kvc **out, const struct jo_meta_url *u, struct jo_err *err)
{
	(void)u;
	(void)err;
	*out = calloc(1, sizeof(**out));
	return 0;
}

static void m_disconnect(struct jo_kvc *c)
{
	free(c);
}

static int m_version(struct jo_kvc *c, char **out, struct jo_err *err)
{
	(void)c;
	(void)err;
	*out = strdup("memkv 1");
	return 0;
}

static int m_begin(struct jo_kvc *c, struct jo_kvt **out, struct jo_err *err)
{
	(void)c;
	(void)err;
	*out = calloc(1, sizeof(**out));
	return 0;
}

/* The newest buffered write touching key k: 1 put (value), 0 deleted, -1 none. */
static int buffered(struct jo_kvt *t, const uint8_t *k, size_t kl, struct op **w)
{
	for (size_t i = t->n; i-- > 0;) {
		struct op *o = &t->o[i];

		if ((o->kind == 2 || o->kind == 3) && !kcmp(o->k, o->kl, k, kl)) {
			*w = o;
			return o->kind == 2;
		}
		if (o->kind == 4 && kcmp(k, kl, o->k, o->kl) >= 0 && kcmp(k, kl, o->e, o->el) < 0)
			return 0;
	}
	return -1;
}

static int m_get(struct jo_kvt *t, const uint8_t *k, size_t kl, uint8_t **v, size_t *vl,
		 struct jo_err *err)
{
	struct op *w = NULL;
	int b = buffered(t, k, kl, &w);
	bool hit;
	size_t i;

	(void)err;
	*v = NULL;
	*vl = 0;
	if (b == 1) {
		*v = dup(w->v, w->vl);
		*vl = w->vl;
		return 0;
	}
	if (b == 0)
		return 0;
	i = find(k, kl, &hit);
	push(t, (struct op){ .kind = 0, .k = dup(k, kl), .kl = kl, .ver = hit ? S.e[i].ver : 0 });
	if (hit) {
		*v = dup(S.e[i].v, S.e[i].vl);
		*vl = S.e[i].vl;
	}
	return 0;
}

static int m_scan(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end, size_t el,
		  size_t limit, bool keys_only, jo_kv_cb cb, void *payload, struct jo_err *err)
{
	bool hit;
	size_t i = find(start, sl, &hit), n = 0;
	int rc = 0;

	(void)err;
	/* a range read: checked at commit against the revision it was read at */
	push(t, (struct op){ .kind = 1, .k = dup(start, sl), .kl = sl, .e = dup(end, el), .el = el,
			     .ver = S.rev });
	for (; i < S.n && kcmp(S.e[i].k, S.e[i].kl, end, el) < 0 && (!limit || n < limit); i++, n++)
		if ((rc = cb(S.e[i].k, S.e[i].kl, keys_only ? NULL : S.e[i].v, keys_only ? 0 : S.e[i].vl,
			     payload)) != 0)
			break;
	return rc;
}

static int m_put(struct jo_kvt *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		 struct jo_err *err)
{
	(void)err;
	push(t, (struct op){ .kind = 2, .k = dup(k, kl), .kl = kl, .v = dup(v, vl), .vl = vl });
	return 0;
}

static int m_del(struct jo_kvt *t, const uint8_t *k, size_t kl, struct jo_err *err)
{
	(void)err;
	push(t, (struct op){ .kind = 3, .k = dup(k, kl), .kl = kl });
	return 0;
}

static int m_del_range(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end,
		       size_t el, struct jo_err *err)
{
	(void)err;
	push(t, (struct op){ .kind = 4, .k = dup(start, sl), .kl = sl, .e = dup(end, el), .el = el });
	return 0;
}

static void m_abort(struct jo_kvt *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->o[i].k);
		free(t->o[i].e);
		free(t->o[i].v);
	}
	free(t->o);
	free(t);
}

static bool range_changed(const struct op *o)
{
	for (size_t i = 0; i < S.n; i++)
		if (kcmp(S.e[i].k, S.e[i].kl, o->k, o->kl) >= 0 &&
		    kcmp(S.e[i].k, S.e[i].kl, o->e, o->el) < 0 && S.e[i].ver > o->ver)
			return true;
	return false;
}

static int m_commit(struct jo_kvt *t, struct jo_err *err)
{
	int reads = 0, writes = 0;
	bool ok = true;

	for (size_t i = 0; i < t->n; i++) {
		reads += t->o[i].kind <= 1;
		writes += t->o[i].kind >= 2;
	}
	if (reads > S.max_reads)
		S.max_reads = reads;
	if (writes > S.max_writes)
		S.max_writes = writes;
	if (reads > 128 || writes > 128) {
		m_abort(t);
		return jo_err_set(err, JO_EINVAL, "memkv: %d checks, %d writes: over the limits", reads,
				  writes);
	}
	if (writes == 0) {
		m_abort(t);
		return 0;
	}
	if (S.meddle_len) {
		uint8_t five[8];

		jo_put_le64(five, 5); /* another client took references meanwhile */
		store_put(S.meddle, S.meddle_len, five, 8);
		S.meddle_len = 0;
	}
	for (size_t i = 0; i < t->n && ok; i++) {
		const struct op *o = &t->o[i];

		if (o->kind == 0)
			ok = store_ver(o->k, o->kl) == o->ver;
		else if (o->kind == 1)
			ok = !range_changed(o);
	}
	if (!ok) {
		S.conflicts++;
		m_abort(t);
		return JO_ECONFLICT;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct op *o = &t->o[i];

		if (o->kind == 2)
			store_put(o->k, o->kl, o->v, o->vl);
		else if (o->kind == 3)
			store_del(o->k, o->kl);
		else if (o->kind == 4)
			for (size_t j = S.n; j-- > 0;)
				if (kcmp(S.e[j].k, S.e[j].kl, o->k, o->kl) >= 0 &&
				    kcmp(S.e[j].k, S.e[j].kl, o->e, o->el) < 0)
					store_del(S.e[j].k, S.e[j].kl);
	}
	S.commits++;
	m_abort(t);
	return 0;
}

static int m_snapshot_scan(struct jo_kvc *c, const uint8_t *start, size_t sl, const uint8_t *end,
			   size_t el, bool keys_only, int64_t *rev, jo_kv_cb cb, void *payload,
			   struct jo_err *err)
{
	struct kv *copy;
	size_t n = 0;
	bool hit;
	int rc = 0;

	(void)c;
	(void)err;
	S.last_pin = rev ? *rev : -1;
	/* a snapshot: what was there when the scan began, whatever callbacks do */
	copy = calloc(S.n + 1, sizeof(*copy));
	for (size_t i = find(start, sl, &hit); i < S.n && kcmp(S.e[i].k, S.e[i].kl, end, el) < 0; i++) {
		copy[n] = S.e[i];
		copy[n].k = dup(S.e[i].k, S.e[i].kl);
		copy[n].v = dup(S.e[i].v, S.e[i].vl);
		n++;
	}
	if (rev)
		*rev = S.rev;
	for (size_t i = 0; i < n && !rc; i++)
		rc = cb(copy[i].k, copy[i].kl, keys_only ? NULL : copy[i].v, keys_only ? 0 : copy[i].vl,
			payload);
	for (size_t i = 0; i < n; i++) {
		free(copy[i].k);
		free(copy[i].v);
	}
	free(copy);
	return rc;
}

static const struct jo_kv_transport memkv = {
	.name = "memkv",
	.max_txn_reads = 128,
	.max_txn_writes = 128,
	.connect = m_connect,
	.disconnect = m_disconnect,
	.version = m_version,
	.begin = m_begin,
	.get = m_get,
	.scan = m_scan,
	.put = m_put,
	.del = m_del,
	.del_range = m_del_range,
	.commit = m_commit,
	.abort = m_abort,
	.snapshot_scan = m_snapshot_scan,
};

/* ---------------------------------------------------------------- fixtures */

#define P "/vol\xfd"
#define PL 5

static void raw_put(const void *k, size_t kl, const void *v, size_t vl)
{
	uint8_t key[256];

	memcpy(key, P, PL);
	memcpy(key + PL, k, kl);
	store_put(key, PL + kl, v, vl);
}

static bool raw_get(const void *k, size_t kl, uint8_t *v, size_t *vl)
{
	uint8_t key[256];
	bool hit;
	size_t i;

	memcpy(key, P, PL);
	memcpy(key + PL, k, kl);
	i = find(key, PL + kl, &hit);
	if (hit && v) {
		memcpy(v, S.e[i].v, S.e[i].vl);
		*vl = S.e[i].vl;
	}
	return hit;
}

static size_t kchunk(uint8_t *b, uint64_t ino, uint32_t indx)
{
	b[0] = 'A';
	jo_put_le64(b + 1, ino);
	b[9] = 'C';
	jo_put_be32(b + 10, indx);
	return 14;
}

static size_t kslice(uint8_t *b, uint64_t id, uint32_t size)
{
	b[0] = 'K';
	jo_put_be64(b + 1, id);
	jo_put_be32(b + 9, size);
	return 13;
}

static size_t kattr(uint8_t *b, uint64_t ino)
{
	b[0] = 'A';
	jo_put_le64(b + 1, ino);
	b[9] = 'I';
	return 10;
}

static size_t kentry(uint8_t *b, uint64_t parent, const char *name)
{
	b[0] = 'A';
	jo_put_le64(b + 1, parent);
	b[9] = 'D';
	memcpy(b + 10, name, strlen(name));
	return 10 + strlen(name);
}

/* a 72-byte attr: type, mode, nlink, length, parent */
static void attr_put(uint64_t ino, int type, uint32_t nlink, uint64_t length, uint64_t parent)
{
	uint8_t a[72] = { 0 }, k[16];

	a[1] = (uint8_t)(type << 4);
	a[2] = 0xa4;
	jo_put_be32(a + 47, nlink);
	jo_put_be64(a + 51, length);
	jo_put_be64(a + 63, parent);
	raw_put(k, kattr(k, ino), a, sizeof(a));
}

static void entry_put(uint64_t parent, const char *name, int type, uint64_t ino)
{
	uint8_t k[64], v[9];

	v[0] = (uint8_t)type;
	jo_put_be64(v + 1, ino);
	raw_put(k, kentry(k, parent, name), v, 9);
}

/* PARENT/NAME, a node INO of TYPE with NLINK and LENGTH: its attr and its entry. */
static void node_put(uint64_t parent, const char *name, int type, uint64_t ino, uint32_t nlink,
		     uint64_t length)
{
	attr_put(ino, type, nlink, length, parent);
	entry_put(parent, name, type, ino);
}

static void slice_ref_put(uint64_t id, uint32_t size, int64_t refs_minus_one)
{
	uint8_t k[16], v[8];

	jo_put_le64(v, (uint64_t)refs_minus_one);
	raw_put(k, kslice(k, id, size), v, 8);
}

static bool slice_ref(uint64_t id, uint32_t size, int64_t *v)
{
	uint8_t k[16], b[8];
	size_t bl;

	if (!raw_get(k, kslice(k, id, size), b, &bl))
		return false;
	*v = (int64_t)jo_le64(b);
	return true;
}

/* Slice (id, size) has a reference entry holding refs_minus_one. */
static void ref_is(uint64_t id, uint32_t size, int64_t refs_minus_one)
{
	int64_t v;

	assert_true(slice_ref(id, size, &v));
	assert_int_equal(v, refs_minus_one);
}

static void counter_put(const char *name, int64_t v)
{
	uint8_t k[64], b[8];

	k[0] = 'C';
	memcpy(k + 1, name, strlen(name));
	jo_put_le64(b, (uint64_t)v);
	raw_put(k, 1 + strlen(name), b, 8);
}

static int64_t counter(const char *name)
{
	uint8_t k[64], b[8];
	size_t bl;

	k[0] = 'C';
	memcpy(k + 1, name, strlen(name));
	return raw_get(k, 1 + strlen(name), b, &bl) ? (int64_t)jo_le64(b) : 0;
}

static struct jo_meta *open_vol(void)
{
	static const char fmt[] = "{\"Name\":\"v\",\"UUID\":\"u\",\"Storage\":\"file\",\"Bucket\":\"/b/\","
				  "\"BlockSize\":4096,\"TrashDays\":1,\"MetaVersion\":1}";
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };

	store_reset();
	raw_put("setting", 7, fmt, strlen(fmt));
	counter_put("nextInode", 2);
	counter_put("nextChunk", 1);
	counter_put("usedSpace", 1 << 20);
	counter_put("totalInodes", 10);
	jo_tkv_transport_override = &memkv;
	assert_int_equal(jo_meta_open(&m, "etcd://127.0.0.1:2379/vol", &err), 0);
	return m;
}

static void close_vol(struct jo_meta *m)
{
	jo_meta_close(m);
	jo_tkv_transport_override = NULL;
	store_reset();
}

/* a chunk of n records: record i is slice id base + i % distinct, size 1000 + that */
static void chunk_put(uint64_t ino, uint32_t indx, size_t n, uint64_t base, size_t distinct)
{
	uint8_t *v = calloc(n, 24), k[16];

	for (size_t i = 0; i < n; i++) {
		struct jo_slice s = { .pos = (uint32_t)i, .id = base + i % distinct,
				      .size = (uint32_t)(1000 + i % distinct) };

		s.len = s.size;
		jo_slice_encode(&s, v + i * 24);
	}
	raw_put(k, kchunk(k, ino, indx), v, n * 24);
	free(v);
}

/* Chunk (ino, indx) deleted: success, its key gone; what was freed in *freed, *nf. */
static void delete_chunk_ok(struct jo_meta *m, uint64_t ino, uint32_t indx, struct jo_sref **freed,
			    size_t *nf)
{
	struct jo_err err = { 0 };
	uint8_t k[16];

	assert_int_equal(jo_mut_delete_chunk(m, ino, indx, freed, nf, &err), 0);
	assert_false(raw_get(k, kchunk(k, ino, indx), NULL, NULL));
}

/* ---------------------------------------------------------------- tests */

static void reads_of_the_layout(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	struct jo_format f;
	struct jo_attr a;
	uint64_t ino;
	uint8_t type, *raw = NULL;
	size_t len = 0, n = 0;
	uint32_t *idx = NULL;
	int64_t refs;
	bool ex;

	(void)state;
	assert_string_equal(jo_meta_engine(m), "memkv");
	assert_int_equal(jo_meta_load_format(m, &f, &err), 0);
	assert_string_equal(f.name, "v");
	jo_format_release(&f);
	attr_put(1, JO_TYPE_DIR, 2, 4096, 1);
	attr_put(100, JO_TYPE_FILE, 1, 5 << 20, 1);
	entry_put(1, "f", JO_TYPE_FILE, 100);
	chunk_put(100, 0, 3, 4000, 3);
	chunk_put(100, 7, 1, 5000, 1);
	slice_ref_put(4000, 1000, 1);   /* 2 references */
	assert_int_equal(jo_meta_lookup(m, 1, "f", &ino, &type, &err), 0);
	assert_int_equal(ino, 100);
	assert_int_equal(type, JO_TYPE_FILE);
	assert_int_equal(jo_meta_getattr(m, 100, &a, &err), 0);
	assert_int_equal(a.length, 5 << 20);
	assert_int_equal(jo_meta_read_chunk(m, 100, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 72);
	free(raw);
	assert_int_equal(jo_meta_list_chunks(m, 100, &idx, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(idx[0], 0);
	assert_int_equal(idx[1], 7);
	free(idx);
	assert_int_equal(jo_meta_get_slice_ref(m, 4000, 1000, &refs, &ex, &err), 0);
	assert_true(ex);
	assert_int_equal(refs, 2);
	assert_int_equal(jo_meta_get_slice_ref(m, 4001, 1001, &refs, &ex, &err), 0);
	assert_false(ex);
	assert_int_equal(refs, 1);
	{
		int64_t v;

		assert_int_equal(jo_meta_get_counter(m, "nextChunk", &v, &err), 0);
		assert_int_equal(v, 1);
	}
	close_vol(m);
}

/* The inode whose chunk keys sit at position pos of the 'A' keys (its le64 bytes read be64). */
static uint64_t ino_at(uint64_t pos)
{
	uint8_t b[8];

	jo_put_be64(b, pos);
	return jo_le64(b);
}

struct part_tally {
	uint64_t ino[64];
	int seen[64], n, chunks;
	uint64_t lo, hi;
};

static int part_chunk_cb(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *p)
{
	struct part_tally *t = p;
	uint8_t b[8];
	uint64_t pos;

	(void)indx, (void)raw, (void)len;
	jo_put_le64(b, ino);
	pos = jo_be64(b);
	assert_true(pos >= t->lo && (t->hi == UINT64_MAX || pos < t->hi));
	for (int i = 0; i < t->n; i++)
		if (t->ino[i] == ino)
			t->seen[i]++;
	t->chunks++;
	return 0;
}

/*
 * The chunk keys in parts (jo_meta_chunk_cuts, jo_meta_scan_chunks_range),
 * with many inodes (cut on two bytes) and few (on the first byte up to the
 * counter): chunks of inodes at, just below and just above every cut, at
 * the two ends of the key space, and attrs beside them; every chunk is
 * streamed by exactly one part, the one its position names, and the parts
 * together are the whole scan.
 */
static void chunks_in_parts(void **state)
{
	static const int64_t next_inodes[] = { 300000, 20 };

	(void)state;
	for (size_t v = 0; v < 2; v++) {
		struct jo_meta *m = open_vol();
		struct jo_err err = { 0 };
		struct part_tally all = { .hi = UINT64_MAX };
		uint64_t cuts[8];
		size_t np = 0;
		int total = 0;

		counter_put("nextInode", next_inodes[v]);
		assert_int_equal(jo_meta_chunk_cuts(m, 7, cuts, &np, &err), 0);
		assert_int_equal(np, 7);
		assert_int_equal(cuts[0], 0);
		assert_int_equal(cuts[np], UINT64_MAX);
		for (size_t i = 1; i < np; i++) {
			assert_true(cuts[i] > cuts[i - 1]);
			for (int d = -1; d <= 1; d++)
				all.ino[all.n++] = ino_at(cuts[i] + (uint64_t)(int64_t)d);
		}
		all.ino[all.n++] = ino_at(0);
		all.ino[all.n++] = ino_at(UINT64_MAX);
		all.ino[all.n++] = 1;
		all.ino[all.n++] = 19;
		for (int i = 0; i < all.n; i++) {
			chunk_put(all.ino[i], 0, 1, 100 + (uint64_t)i, 1);
			chunk_put(all.ino[i], 9, 1, 500 + (uint64_t)i, 1);
			attr_put(all.ino[i], JO_TYPE_FILE, 1, 1, 1);
		}
		for (size_t i = 0; i < np; i++) {
			struct part_tally t = all;

			memset(t.seen, 0, sizeof(t.seen));
			t.chunks = 0;
			t.lo = cuts[i];
			t.hi = cuts[i + 1];
			assert_int_equal(jo_meta_scan_chunks_range(m, cuts[i], cuts[i + 1],
								   part_chunk_cb, &t, &err), 0);
			for (int k = 0; k < all.n; k++)
				all.seen[k] += t.seen[k];
			total += t.chunks;
		}
		for (int k = 0; k < all.n; k++)
			assert_int_equal(all.seen[k], 2);   /* indexes 0 and 9, once each */
		all.chunks = 0;
		all.lo = 0;
		all.hi = UINT64_MAX;
		assert_int_equal(jo_meta_scan_chunks(m, part_chunk_cb, &all, &err), 0);
		assert_int_equal(all.chunks, total);
		close_vol(m);
	}
}

/*
 * A snapshot shared by processes: the token is the store's revision now,
 * and a scan begun at it asks the store for that revision (another process
 * given the token reads the same state), while a plain snapshot asks for
 * none (its first scan fixes one).
 */
static void shared_snapshot(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	int64_t token = 0;

	(void)state;
	S.rev = 4242;
	assert_int_equal(jo_meta_snapshot_token(m, &token, &err), 0);
	assert_int_equal(token, 4242);
	S.rev = 5000;   /* writes since */
	assert_int_equal(jo_meta_snapshot_begin_at(m, token, &err), 0);
	assert_int_equal(jo_meta_scan_chunks_range(m, 0, (uint64_t)1 << 63, part_chunk_cb,
						   &(struct part_tally){ .hi = (uint64_t)1 << 63 },
						   &err), 0);
	assert_int_equal(S.last_pin, 4242);
	jo_meta_snapshot_end(m);
	assert_int_equal(jo_meta_snapshot_begin_at(m, 0, &err), 0);
	assert_int_equal(jo_meta_scan_chunks(m, part_chunk_cb, &(struct part_tally){ .hi = UINT64_MAX },
					     &err), 0);
	assert_int_equal(S.last_pin, 0);
	jo_meta_snapshot_end(m);
	close_vol(m);
}

/* 250 distinct slices: more than one transaction may decrement; done in steps */
static void delete_chunk_in_steps(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_sref *freed = NULL;
	size_t nf = 0;

	(void)state;
	chunk_put(200, 0, 300, 10000, 250);  /* slices 0..49 listed twice */
	slice_ref_put(10000 + 7, 1007, 2);   /* 3 references: 2 from here, 1 elsewhere */
	delete_chunk_ok(m, 200, 0, &freed, &nf);
	/* every slice but #7 fell below one reference; #7 keeps one (a slice
	 * freed by two steps is listed twice, as the interface allows) */
	{
		size_t distinct = 0;

		for (size_t i = 0; i < nf; i++) {
			bool seen = freed[i].id == 10007;

			for (size_t j = 0; j < i && !seen; j++)
				seen = freed[j].id == freed[i].id;
			distinct += !seen;
		}
		assert_int_equal(distinct, 249);
	}
	ref_is(10000 + 7, 1007, 0);
	ref_is(10000 + 3, 1003, -2); /* listed twice: two references taken */
	ref_is(10000 + 200, 1200, -1);
	assert_true(S.max_reads <= 128 && S.max_writes <= 128);
	assert_true(S.commits >= 3);
	free(freed);
	/* a gone chunk is success with nothing freed */
	delete_chunk_ok(m, 200, 0, &freed, &nf);
	assert_int_equal(nf, 0);
	close_vol(m);
}

/* a concurrent writer changes the chunk between the read and the commit */
static void retried_after_a_conflict(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_sref *freed = NULL;
	size_t nf = 0;

	(void)state;
	chunk_put(300, 1, 2, 20000, 2);
	memcpy(S.meddle, P, PL);
	S.meddle_len = PL + kslice(S.meddle + PL, 20000, 1000);  /* someone touches K */
	delete_chunk_ok(m, 300, 1, &freed, &nf);
	assert_int_equal(S.conflicts, 1);
	ref_is(20001, 1001, -1);
	/* the retry saw the other client's references: 5 - 1, not freed */
	ref_is(20000, 1000, 4);
	assert_int_equal(nf, 1);
	free(freed);
	close_vol(m);
}

static void delayed_slices_and_forget(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	struct jo_sref *freed = NULL;
	size_t nf = 0;
	bool kept, del;
	uint8_t k[32], recs[12 * 3];
	int64_t v;

	(void)state;
	for (int i = 0; i < 3; i++) {
		jo_put_be64(recs + i * 12, 30000 + i);
		jo_put_be32(recs + i * 12 + 8, 500);
	}
	k[0] = 'L';
	jo_put_be64(k + 1, 1000);
	jo_put_be64(k + 9, 31000);
	raw_put(k, 17, recs, sizeof(recs));
	slice_ref_put(30001, 500, 1);  /* 2 references: this entry's and one other */
	/* young: kept */
	assert_int_equal(jo_mut_cleanup_delslice(m, 31000, 1000, 900, &freed, &nf, &kept, &err), 0);
	assert_true(kept);
	assert_true(raw_get(k, 17, NULL, NULL));
	assert_int_equal(jo_mut_cleanup_delslice(m, 31000, 1000, 2000, &freed, &nf, &kept, &err), 0);
	assert_false(kept);
	assert_false(raw_get(k, 17, NULL, NULL));
	assert_int_equal(nf, 2);
	ref_is(30001, 500, 0); /* one reference left */
	free(freed);
	assert_int_equal(jo_mut_slice_deletable(m, 30000, 500, &del, &err), 0);
	assert_true(del);
	assert_int_equal(jo_mut_forget_slice(m, 30000, 500, &err), 0);
	assert_false(slice_ref(30000, 500, &v));
	/* a slice referenced again meanwhile is not forgotten */
	slice_ref_put(30002, 500, 0);
	assert_int_equal(jo_mut_forget_slice(m, 30002, 500, &err), 0);
	assert_true(slice_ref(30002, 500, &v));
	close_vol(m);
}

static void unlink_and_rmdir(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	struct jo_rm_res res;
	const uint64_t H = JO_TRASH_INODE + 1;
	uint8_t k[64];
	int64_t used = counter("usedSpace");

	(void)state;
	attr_put(JO_TRASH_INODE, JO_TYPE_DIR, 3, 4096, 1);
	node_put(JO_TRASH_INODE, "2026-11-26-10", JO_TYPE_DIR, H, 3, 4096);
	node_put(H, "1-2-a", JO_TYPE_FILE, 500, 1, 10000);
	node_put(H, "1-3-d", JO_TYPE_DIR, 501, 2, 4096);
	node_put(501, "inner", JO_TYPE_FILE, 502, 1, 0);
	/* rmdir of a directory with an entry: refused */
	assert_int_equal(jo_mut_rmdir(m, H, "1-3-d", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_NOTEMPTY);
	/* unlink of a directory: wrong type */
	assert_int_equal(jo_mut_unlink(m, H, "1-3-d", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_WRONGTYPE);
	assert_int_equal(jo_mut_unlink(m, H, "1-2-a", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_DONE);
	assert_true(res.delfile);
	assert_int_equal(res.ino, 500);
	assert_false(raw_get(k, kentry(k, H, "1-2-a"), NULL, NULL));
	assert_false(raw_get(k, kattr(k, 500), NULL, NULL));
	k[0] = 'D';
	jo_put_le64(k + 1, 500);
	jo_put_be64(k + 9, 10000);
	assert_true(raw_get(k, 17, NULL, NULL));
	assert_int_equal(counter("usedSpace"), used - 12288);
	assert_int_equal(counter("totalInodes"), 9);
	assert_int_equal(jo_mut_unlink(m, 501, "inner", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_DONE);
	assert_int_equal(jo_mut_rmdir(m, H, "1-3-d", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_DONE);
	assert_false(raw_get(k, kattr(k, 501), NULL, NULL));
	assert_int_equal(counter("totalInodes"), 7);
	/* gone now */
	assert_int_equal(jo_mut_unlink(m, H, "1-2-a", 5, false, &res, &err), 0);
	assert_int_equal(res.status, JO_RM_GONE);
	close_vol(m);
}

/* restore: juicefs's Rename(hour, "P-I-N", P, N, RenameNoReplace|RenameRestore) */
static void restore_entries(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	struct jo_rs_res res;
	const uint64_t H = JO_TRASH_INODE + 1;
	uint8_t k[64], v[128];
	size_t vl = 0;
	bool missing = false;

	(void)state;
	attr_put(1, JO_TYPE_DIR, 2, 4096, 1);
	attr_put(JO_TRASH_INODE, JO_TYPE_DIR, 3, 4096, 1);
	node_put(JO_TRASH_INODE, "2026-11-26-10", JO_TYPE_DIR, H, 3, 4096);
	node_put(H, "1-601-d", JO_TYPE_DIR, 601, 2, 4096);
	node_put(H, "601-600-a", JO_TYPE_FILE, 600, 1, 5000);
	node_put(H, "1-602-x", JO_TYPE_FILE, 602, 1, 10);
	entry_put(1, "x", JO_TYPE_FILE, 603);
	/* the directory first: back under the root, root nlink 3, a zero record */
	assert_int_equal(jo_mut_restore(m, H, "1-601-d", 7, 1, "d", 1, true, &res, &missing, &err), 0);
	assert_int_equal(res.status, JO_RS_DONE);
	assert_int_equal(res.ino, 601);
	assert_false(raw_get(k, kentry(k, H, "1-601-d"), NULL, NULL));
	assert_true(raw_get(k, kentry(k, 1, "d"), v, &vl));
	assert_int_equal(jo_be64(v + 1), 601);
	assert_true(raw_get(k, kattr(k, 601), v, &vl));
	assert_int_equal(jo_be64(v + 63), 1);          /* parent */
	assert_true(raw_get(k, kattr(k, 1), v, &vl));
	assert_int_equal(jo_be32(v + 47), 3);          /* nlink */
	k[0] = 'U';
	jo_put_le64(k + 1, 601);
	assert_true(raw_get(k, 9, v, &vl));
	assert_int_equal(vl, 24);
	assert_int_equal(jo_be64(v + 16), 0);
	/* then the file into it: its statistics count it */
	assert_int_equal(jo_mut_restore(m, H, "601-600-a", 9, 601, "a", 1, true, &res, &missing,
					&err), 0);
	assert_int_equal(res.status, JO_RS_DONE);
	assert_int_equal(res.length, 5000);
	assert_false(missing);
	k[0] = 'U';
	jo_put_le64(k + 1, 601);
	assert_true(raw_get(k, 9, v, &vl));
	assert_int_equal(jo_be64(v), 5000);
	assert_int_equal(jo_be64(v + 8), 8192);
	assert_int_equal(jo_be64(v + 16), 1);
	/* again: gone from the trash */
	assert_int_equal(jo_mut_restore(m, H, "601-600-a", 9, 601, "a", 1, true, &res, &missing,
					&err), 0);
	assert_int_equal(res.status, JO_RS_GONE);
	/* a taken name, a target that is not there */
	assert_int_equal(jo_mut_restore(m, H, "1-602-x", 7, 1, "x", 1, false, &res, &missing, &err), 0);
	assert_int_equal(res.status, JO_RS_EXISTS);
	assert_int_equal(jo_mut_restore(m, H, "1-602-x", 7, 999, "x", 1, false, &res, &missing, &err),
			 0);
	assert_int_equal(res.status, JO_RS_NOPARENT);
	assert_true(raw_get(k, kentry(k, H, "1-602-x"), NULL, NULL));
	/* into the trash: refused */
	assert_int_not_equal(jo_mut_restore(m, H, "1-602-x", 7, H, "x", 1, false, &res, &missing,
					    &err), 0);
	close_vol(m);
}

/* The trash and its hour directory h */
static void hour_put(uint64_t h)
{
	attr_put(JO_TRASH_INODE, JO_TYPE_DIR, 3, 4096, 1);
	attr_put(h, JO_TYPE_DIR, 3, 4096, JO_TRASH_INODE);
	entry_put(JO_TRASH_INODE, "2026-11-26-10", JO_TYPE_DIR, h);
}

/* QD{ino}: a directory quota (max space, max inodes, used space, used inodes) */
static void quota_put(uint64_t ino, int64_t used_space, int64_t used_inodes)
{
	uint8_t k[16] = { 'Q', 'D' }, v[32] = { 0 };

	jo_put_le64(k + 2, ino);
	jo_put_be64(v, 1 << 30);
	jo_put_be64(v + 8, 1000);
	jo_put_be64(v + 16, (uint64_t)used_space);
	jo_put_be64(v + 24, (uint64_t)used_inodes);
	raw_put(k, 10, v, sizeof(v));
}

static void quota_is(uint64_t ino, int64_t used_space, int64_t used_inodes)
{
	uint8_t k[16] = { 'Q', 'D' }, v[64];
	size_t vl = 0;

	jo_put_le64(k + 2, ino);
	assert_true(raw_get(k, 10, v, &vl));
	assert_int_equal(vl, 32);
	assert_int_equal((int64_t)jo_be64(v + 16), used_space);
	assert_int_equal((int64_t)jo_be64(v + 24), used_inodes);
}

/* the quota charge of a restore is made in its transaction, for the entries
 * that go back only; a directory on the way without a quota is skipped */
static void restore_charges_quota(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	const uint64_t H = JO_TRASH_INODE + 1;
	const uint64_t qd[2] = { 601, 1 }, none[1] = { 5 }, tree[1] = { 605 };
	int64_t ctime[1] = { 1 };
	const uint64_t by_ctime[1] = { 0 };
	struct jo_rs_quota q = { qd, 2, 0, 0, NULL, NULL, NULL, 0 };
	struct jo_rs_quota qdir = { qd + 1, 1, 12288, 3, tree, ctime, by_ctime, 1 };
	struct jo_rs_quota qnone = { none, 1, 0, 0, NULL, NULL, NULL, 0 };
	struct jo_rs_item v[4] = {
		{ .tdir = H, .parent = 601, .src = "601-600-a", .src_len = 9, .name = "a", .name_len = 1,
		  .quota = &q },
		{ .tdir = H, .parent = 601, .src = "601-604-y", .src_len = 9, .name = "y", .name_len = 1,
		  .quota = &q },
		{ .tdir = H, .parent = 1, .src = "1-605-d", .src_len = 7, .name = "d", .name_len = 1,
		  .quota = &qdir },
		{ .tdir = H, .parent = 1, .src = "1-606-z", .src_len = 7, .name = "z", .name_len = 1,
		  .quota = &qnone },
	};

	(void)state;
	attr_put(1, JO_TYPE_DIR, 3, 4096, 1);
	attr_put(601, JO_TYPE_DIR, 2, 4096, 1);
	entry_put(1, "q", JO_TYPE_DIR, 601);
	hour_put(H);
	attr_put(600, JO_TYPE_FILE, 1, 5000, H);
	entry_put(H, "601-600-a", JO_TYPE_FILE, 600);
	attr_put(605, JO_TYPE_DIR, 2, 4096, H);
	entry_put(H, "1-605-d", JO_TYPE_DIR, 605);
	attr_put(606, JO_TYPE_SYMLINK, 1, 3, H);
	entry_put(H, "1-606-z", JO_TYPE_SYMLINK, 606);
	quota_put(1, 4096, 1);
	quota_put(601, 0, 0);
	/* a directory of its tree changed since it was summed (its ctime): left alone */
	assert_int_equal(jo_mut_restore_many(m, v + 2, 1, true, &err), 0);
	assert_int_equal(v[2].res.status, JO_RS_CHANGED);
	quota_is(1, 4096, 1);
	ctime[0] = 0;
	assert_int_equal(jo_mut_restore_many(m, v, 4, true, &err), 0);
	assert_int_equal(v[0].res.status, JO_RS_DONE);
	assert_int_equal(v[1].res.status, JO_RS_GONE);
	assert_int_equal(v[2].res.status, JO_RS_DONE);
	assert_int_equal(v[3].res.status, JO_RS_DONE);
	/* the file: align4K(5000) and one inode on both; the directory: its tree on the root's */
	quota_is(601, 8192, 1);
	quota_is(1, 4096 + 8192 + 12288, 1 + 1 + 3);
	close_vol(m);
}

/* restore_many: each entry with its own outcome, a refused one leaving the others to go in */
static void restore_many_entries(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	const uint64_t H = JO_TRASH_INODE + 1;
	struct jo_rs_item v[3] = {
		{ .tdir = H, .parent = 1, .src = "1-602-x", .src_len = 7, .name = "x", .name_len = 1 },
		{ .tdir = H, .parent = 1, .src = "1-600-a", .src_len = 7, .name = "a", .name_len = 1 },
		{ .tdir = H, .parent = 1, .src = "1-604-y", .src_len = 7, .name = "y", .name_len = 1 },
	};
	uint8_t k[64], v2[128];
	size_t vl = 0;

	(void)state;
	attr_put(1, JO_TYPE_DIR, 2, 4096, 1);
	hour_put(H);
	attr_put(600, JO_TYPE_FILE, 1, 5000, H);
	entry_put(H, "1-600-a", JO_TYPE_FILE, 600);
	attr_put(602, JO_TYPE_FILE, 1, 10, H);
	entry_put(H, "1-602-x", JO_TYPE_FILE, 602);
	entry_put(1, "x", JO_TYPE_FILE, 603);
	assert_int_equal(jo_mut_restore_many(m, v, 3, false, &err), 0);
	assert_true(v[0].ran && v[1].ran && v[2].ran);
	assert_int_equal(v[0].res.status, JO_RS_EXISTS);
	assert_int_equal(v[1].res.status, JO_RS_DONE);
	assert_int_equal(v[1].res.ino, 600);
	assert_int_equal(v[2].res.status, JO_RS_GONE);
	assert_true(raw_get(k, kentry(k, 1, "a"), v2, &vl));
	assert_int_equal(jo_be64(v2 + 1), 600);
	assert_true(raw_get(k, kentry(k, H, "1-602-x"), NULL, NULL));
	/* into the trash: refused before anything runs */
	v[1].parent = H;
	assert_int_not_equal(jo_mut_restore_many(m, v, 2, false, &err), 0);
	assert_false(v[0].ran);
	close_vol(m);
}

/* restore_many: several entries per transaction, each transaction within
 * the transport's limits, each entry with its own outcome */
static void restore_many_batches(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	const uint64_t H = JO_TRASH_INODE + 1;
	const uint64_t qd[1] = { 1 };
	struct jo_rs_quota q = { qd, 1, 0, 0, NULL, NULL, NULL, 0 };
	struct jo_rs_item v[40];
	char src[40][16], name[40][8];
	uint8_t k[64], val[128];
	size_t vl = 0;
	int commits;

	(void)state;
	attr_put(1, JO_TYPE_DIR, 2, 4096, 1);
	hour_put(H);
	quota_put(1, 0, 0);
	for (int i = 0; i < 40; i++) {
		snprintf(src[i], sizeof(src[i]), "1-%d-f%d", 700 + i, i);
		snprintf(name[i], sizeof(name[i]), "f%d", i);
		attr_put(700 + i, JO_TYPE_FILE, 1, 100, H);
		entry_put(H, src[i], JO_TYPE_FILE, 700 + i);
		v[i] = (struct jo_rs_item){ .tdir = H, .parent = 1, .src = src[i],
					    .src_len = strlen(src[i]), .name = name[i],
					    .name_len = strlen(name[i]), .quota = &q };
	}
	entry_put(1, "f7", JO_TYPE_FILE, 699); /* a taken name: that entry alone stays */
	/* the hour directory's statistics: the 40 files */
	k[0] = 'U';
	jo_put_le64(k + 1, H);
	jo_put_be64(val, 40 * 100);
	jo_put_be64(val + 8, 40 * 4096);
	jo_put_be64(val + 16, 40);
	raw_put(k, 9, val, 24);
	S.max_reads = S.max_writes = 0;
	commits = S.commits;
	assert_int_equal(jo_mut_restore_many(m, v, 40, true, &err), 0);
	for (int i = 0; i < 40; i++) {
		assert_true(v[i].ran);
		assert_int_equal(v[i].res.status, i == 7 ? JO_RS_EXISTS : JO_RS_DONE);
		assert_int_equal(raw_get(k, kentry(k, H, src[i]), NULL, NULL), i == 7);
		assert_true(raw_get(k, kentry(k, 1, name[i]), val, &vl));
		assert_int_equal(jo_be64(val + 1), i == 7 ? 699 : 700 + i);
		assert_int_equal(v[i].dst_stat_missing, i != 7); /* the root has none */
	}
	/* what stays in the hour directory: the one file */
	k[0] = 'U';
	jo_put_le64(k + 1, H);
	assert_true(raw_get(k, 9, val, &vl));
	assert_int_equal(jo_be64(val), 100);
	assert_int_equal(jo_be64(val + 8), 4096);
	assert_int_equal(jo_be64(val + 16), 1);
	/* at most 11 reads and 10 writes an entry: 9 entries a transaction */
	assert_int_equal(S.commits - commits, 5);
	assert_true(S.max_reads <= JO_TKV_STEP && S.max_writes <= JO_TKV_STEP);
	quota_is(1, 39 * 4096, 39);
	close_vol(m);
}

static void tasks_and_leases(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	const char *items[120];
	char names[120][16];
	struct jo_mut_task t, t2;
	int64_t id = 0, total, leased;
	size_t added = 0;

	(void)state;
	for (int i = 0; i < 120; i++) {
		snprintf(names[i], sizeof(names[i]), "s:%d", i);
		items[i] = names[i];
	}
	assert_int_equal(jo_mut_task_max_items(m), JO_TKV_STEP);
	/* more items than one transaction records: refused, nothing written */
	assert_int_equal(jo_mut_task_add(m, "gc", "slice", items, 120, &id, &added, &err), JO_EINVAL);
	assert_int_equal(jo_mut_task_add(m, "gc", "slice", items, 100, &id, &added, &err), 0);
	assert_true(id > 0);
	assert_int_equal(added, 100);
	/* planned again: only what no pending task holds */
	assert_int_equal(jo_mut_task_add(m, "gc", "slice", items + 90, 20, &id, &added, &err), 0);
	assert_int_equal(added, 10);
	assert_int_equal(jo_mut_task_count(m, "gc", &total, &leased, &err), 0);
	assert_int_equal(total, 2);
	assert_int_equal(leased, 0);
	assert_int_equal(jo_mut_task_claim(m, "gc", "w1", 60000, &t, &err), 0);
	assert_int_equal(jo_mut_task_claim(m, "gc", "w2", 60000, &t2, &err), 0);
	assert_true(t.id != t2.id);
	jo_mut_task_release_mem(&t);
	assert_int_equal(jo_mut_task_claim(m, "gc", "w3", 60000, &t, &err), JO_ENOTFOUND);
	assert_int_equal(jo_mut_task_renew(m, "gc", t2.id, "w1", 60000, NULL, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_renew(m, "gc", t2.id, "w2", 60000, NULL, &err), 0);
	assert_int_equal(jo_mut_task_complete(m, "gc", t2.id, "w2", &err), 0);
	assert_int_equal(jo_mut_task_release(m, "gc", t2.id, "w2", &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_count(m, "gc", &total, &leased, &err), 0);
	assert_int_equal(total, 1);
	assert_int_equal(leased, 1);
	jo_mut_task_release_mem(&t2);
	assert_int_equal(jo_mut_task_clear(m, "gc", &err), 0);
	assert_int_equal(jo_mut_task_count(m, "gc", &total, &leased, &err), 0);
	assert_int_equal(total, 0);
	close_vol(m);
}

struct recs_seen {
	int n;
	char keys[8][32];
	char vals[8][32];
};

static int recs_cb(const char *key, const char *val, void *payload)
{
	struct recs_seen *s = payload;

	if (s->n < 8) {
		snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", key);
		snprintf(s->vals[s->n], sizeof(s->vals[0]), "%s", val);
	}
	s->n++;
	return 0;
}

/* A sync coordinator on etcd: records beside the tasks, written under a
 * lease, the done record and the completion in one transaction. */
static void records_of_a_coordinator(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct jo_meta_open_opts co = { .coordinator_only = true };
	const char *a[] = { "r000001" }, *b[] = { "r000002" };
	struct jo_mut_task t;
	struct recs_seen sn = { 0 };
	int64_t id, id2, total, leased;
	size_t added;
	char *v = NULL;
	bool w = true;

	(void)state;
	store_reset();
	jo_tkv_transport_override = &memkv;
	/* no format record: a volume is refused, a coordinator is not */
	assert_int_equal(jo_meta_open(&m, "etcd://127.0.0.1:2379/coord", &err), JO_ENOTJFS);
	assert_null(m);
	assert_int_equal(jo_meta_open_with(&m, "etcd://127.0.0.1:2379/coord", &co, &err), 0);
	assert_int_equal(jo_mut_rec_get(m, "sx", "plan", &v, &err), JO_ENOTFOUND);
	assert_null(v);
	struct jo_mut_rec_cond once = { .if_absent = true };
	assert_int_equal(jo_mut_rec_put(m, "sx", "plan", "{\"ranges\":2}", &once, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_put(m, "sx", "plan", "other", &once, &w, &err), 0);
	assert_false(w);
	assert_int_equal(jo_mut_rec_get(m, "sx", "plan", &v, &err), 0);
	assert_string_equal(v, "{\"ranges\":2}");
	free(v);
	/* a value holds newlines; a plain put replaces */
	assert_int_equal(jo_mut_rec_put(m, "sx", "def:1", "a\nb", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, "sx", "def:1", "c\nd", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, "sx", "def:2", "", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, "sx", "dex:1", "z", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_put(m, "other", "def:9", "no", NULL, &w, &err), 0);
	assert_int_equal(jo_mut_rec_scan(m, "sx", "def:", recs_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 2);
	assert_string_equal(sn.keys[0], "def:1");
	assert_string_equal(sn.vals[0], "c\nd");
	assert_string_equal(sn.keys[1], "def:2");
	assert_string_equal(sn.vals[1], "");
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_rec_scan(m, "sx", "", recs_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 4);
	/* NULL removes */
	assert_int_equal(jo_mut_rec_put(m, "sx", "dex:1", NULL, NULL, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_get(m, "sx", "dex:1", &v, &err), JO_ENOTFOUND);

	/* under a lease */
	assert_int_equal(jo_mut_task_add(m, "sx", "range", a, 1, &id, &added, &err), 0);
	assert_int_equal(jo_mut_task_add(m, "sx", "range", b, 1, &id2, &added, &err), 0);
	assert_int_equal(jo_mut_task_claim(m, "sx", "w1", 60000, &t, &err), 0);
	assert_int_equal(t.id, id);
	jo_mut_task_release_mem(&t);
	struct jo_mut_rec_cond mine = { .task_id = id, .owner = "w1" };
	struct jo_mut_rec_cond theirs = { .task_id = id, .owner = "w2" };
	struct jo_mut_rec_cond unclaimed = { .task_id = id2, .owner = "w1" };
	assert_int_equal(jo_mut_rec_put(m, "sx", "pos:1", "k1", &mine, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_rec_put(m, "sx", "pos:1", "k9", &theirs, &w, &err), JO_ECONFLICT);
	assert_false(w);
	assert_int_equal(jo_mut_rec_put(m, "sx", "pos:2", "x", &unclaimed, &w, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_rec_get(m, "sx", "pos:2", &v, &err), JO_ENOTFOUND);
	assert_int_equal(jo_mut_rec_get(m, "sx", "pos:1", &v, &err), 0);
	assert_string_equal(v, "k1");
	free(v);
	/* a refused completion completes nothing */
	struct jo_mut_rec_cond theirs_done = { .task_id = id, .owner = "w2", .complete = true };
	assert_int_equal(jo_mut_rec_put(m, "sx", "done:1", "{}", &theirs_done, &w, &err),
			 JO_ECONFLICT);
	assert_int_equal(jo_mut_task_count(m, "sx", &total, &leased, &err), 0);
	assert_int_equal(total, 2);
	assert_int_equal(jo_mut_rec_get(m, "sx", "done:1", &v, &err), JO_ENOTFOUND);
	/* done: the record and the completion together */
	struct jo_mut_rec_cond done = { .task_id = id, .owner = "w1", .complete = true };
	assert_int_equal(jo_mut_rec_put(m, "sx", "done:1", "{\"copied\":7}", &done, &w, &err), 0);
	assert_true(w);
	assert_int_equal(jo_mut_task_count(m, "sx", &total, &leased, &err), 0);
	assert_int_equal(total, 1);
	assert_int_equal(leased, 0);
	assert_int_equal(jo_mut_rec_get(m, "sx", "done:1", &v, &err), 0);
	assert_string_equal(v, "{\"copied\":7}");
	free(v);
	/* its lease is gone; its item may be planned again */
	assert_int_equal(jo_mut_rec_put(m, "sx", "pos:1", "k2", &mine, &w, &err), JO_ECONFLICT);
	assert_int_equal(jo_mut_task_add(m, "sx", "range", a, 1, &id, &added, &err), 0);
	assert_int_equal(added, 1);
	/* clearing the namespace removes its records, not another's */
	assert_int_equal(jo_mut_task_clear(m, "sx", &err), 0);
	memset(&sn, 0, sizeof(sn));
	assert_int_equal(jo_mut_rec_scan(m, "sx", "", recs_cb, &sn, &err), 0);
	assert_int_equal(sn.n, 0);
	assert_int_equal(jo_mut_rec_get(m, "other", "def:9", &v, &err), 0);
	assert_string_equal(v, "no");
	free(v);
	close_vol(m);
}

static void compaction_commit(void **state)
{
	struct jo_meta *m = open_vol();
	struct jo_err err = { 0 };
	struct jo_slice_id *freed = NULL;
	size_t nf = 0;
	uint8_t origin[24 * 3], *raw = NULL, k[32];
	size_t len = 0;
	uint64_t first = 0;
	int64_t v;

	(void)state;
	assert_int_equal(jo_meta_compact_max_records(m), JO_TKV_STEP);
	chunk_put(600, 0, 3, 40000, 3);
	assert_int_equal(jo_meta_read_chunk(m, 600, 0, &raw, &len, &err), 0);
	memcpy(origin, raw, sizeof(origin));
	free(raw);
	assert_int_equal(jo_meta_alloc_slice_ids(m, 1, &first, &err), 0);
	assert_int_equal(first, 1);
	assert_int_equal(counter("nextChunk"), 2);
	{
		struct jo_compact_commit c = { .ino = 600, .indx = 0, .origin = origin, .norigin = 3,
					       .skipped = 0, .pos = 0, .new_id = first, .size = 3000,
					       .trash_days = 0, .now = 1000 };

		assert_int_equal(jo_meta_compact_commit(m, &c, &freed, &nf, &err), 0);
		assert_int_equal(nf, 3);
		free(freed);
		/* the marker went (0 = one reference = absent), the old slices are pending */
		assert_false(slice_ref(first, 3000, &v));
		ref_is(40000, 1000, -1);
		assert_int_equal(jo_meta_read_chunk(m, 600, 0, &raw, &len, &err), 0);
		assert_int_equal(len, 24);
		free(raw);
		/* the chunk changed since: a conflict, nothing written */
		assert_int_equal(jo_meta_compact_commit(m, &c, &freed, &nf, &err), JO_ECONFLICT);
	}
	/* trash on: the old slices go to an L entry */
	chunk_put(601, 0, 3, 50000, 3);
	assert_int_equal(jo_meta_read_chunk(m, 601, 0, &raw, &len, &err), 0);
	memcpy(origin, raw, sizeof(origin));
	free(raw);
	{
		struct jo_compact_commit c = { .ino = 601, .indx = 0, .origin = origin, .norigin = 3,
					       .skipped = 0, .pos = 0, .new_id = 9, .size = 3000,
					       .trash_days = 1, .now = 1234 };

		assert_int_equal(jo_meta_compact_commit(m, &c, &freed, &nf, &err), 0);
		assert_int_equal(nf, 0);
		k[0] = 'L';
		jo_put_be64(k + 1, 1234);
		jo_put_be64(k + 9, 9);
		assert_true(raw_get(k, 17, NULL, NULL));
		assert_false(slice_ref(50000, 1000, &v)); /* untouched: still one reference */
	}
	assert_int_equal(jo_meta_slice_abandon(m, 77, 100, &err), 0);
	ref_is(77, 100, -1);
	close_vol(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_of_the_layout),
		cmocka_unit_test(chunks_in_parts),
		cmocka_unit_test(shared_snapshot),
		cmocka_unit_test(delete_chunk_in_steps),
		cmocka_unit_test(retried_after_a_conflict),
		cmocka_unit_test(delayed_slices_and_forget),
		cmocka_unit_test(unlink_and_rmdir),
		cmocka_unit_test(restore_entries),
		cmocka_unit_test(restore_many_entries),
		cmocka_unit_test(restore_many_batches),
		cmocka_unit_test(restore_charges_quota),
		cmocka_unit_test(tasks_and_leases),
		cmocka_unit_test(records_of_a_coordinator),
		cmocka_unit_test(compaction_commit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
