/*
 * tkv/internal.h: the tkv family: the key layout TiKV, etcd and FoundationDB
 * share (spec juicefs-engines.md B.2), written once over the key-value
 * transaction interface of tkv/kv.h. Files: tkv/read.c (connection, keys,
 * transactions, reads), tkv/mut.c (gc mutations), tkv/rm.c (trash
 * unlink/rmdir), tkv/task.c (task records), tkv/compact.c (compaction).
 *
 * Byte order (B.2): inode numbers inside keys are little-endian; everything
 * else in keys is big-endian; values are big-endian except the counters
 * changed by increments and the slice references, which are le64.
 *
 * Transactions read through the transport (each read becomes a check at
 * commit) and are tried again, up to 50 times as juicefs does, when the
 * commit finds that something they read changed. A transaction never grows
 * past the transport's limits (etcd: 128 checks, 128 writes): work that
 * could is cut into steps that are each one atomic, idempotent transaction
 * (spec B.4 step 4), never into halves of one decision. Only common/meta
 * includes this.
 */
#ifndef JO_META_TKV_INTERNAL_H
#define JO_META_TKV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/mem.h"
#include "common/meta/engine_internal.h"
#include "common/meta/tkv/kv.h"

struct jo_err;
struct jo_meta;

#define JO_TKV_TXN_TRIES 50
#define JO_TKV_KEY_MAX 512
/* Records one transaction may decrement references for, records a
 * compaction may replace, and the reads and writes a batch of restores
 * may count up to: below every transport's limits (etcd: 128). */
#define JO_TKV_STEP 100

struct jo_tkv {
	const struct jo_kv_transport *tr;
	struct jo_kvc *c;
	uint8_t pfx[JO_TKV_KEY_MAX / 2];
	size_t plen;
	bool pinned;       /* inside jo_meta_snapshot_begin/end: scans read pin_rev */
	int64_t pin_rev;   /* 0 until the first scan of the snapshot fixes it */
};

struct jo_tkv *jo_tkv_of(struct jo_meta *m);

/* Unit tests only: a transport to use instead of the engine's (NULL: none). */
extern const struct jo_kv_transport *jo_tkv_transport_override;

/* A key being built: the volume's prefix, then the family's bytes. */
struct jo_key {
	uint8_t b[JO_TKV_KEY_MAX];
	size_t n;
	bool over;           /* longer than JO_TKV_KEY_MAX: unusable */
};

void jo_key_init(struct jo_key *k, struct jo_meta *m);
void jo_key_raw(struct jo_key *k, const void *p, size_t n);
void jo_key_ch(struct jo_key *k, char c);
void jo_key_str(struct jo_key *k, const char *s);
void jo_key_le64(struct jo_key *k, uint64_t v);
void jo_key_be64(struct jo_key *k, uint64_t v);
void jo_key_be32(struct jo_key *k, uint32_t v);
/* The end of the range of keys that start with k (its last byte + 1, with
 * carry): the range [k, end) holds exactly the keys with prefix k. */
void jo_key_prefix_end(const struct jo_key *k, struct jo_key *end);

/* The family's keys (B.2). */
void jo_tkv_attr_key(struct jo_key *k, struct jo_meta *m, uint64_t ino);
void jo_tkv_entry_key(struct jo_key *k, struct jo_meta *m, uint64_t parent, const char *name,
		      size_t nlen);
void jo_tkv_inode_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, char what);
void jo_tkv_chunk_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, uint32_t indx);
void jo_tkv_slice_key(struct jo_key *k, struct jo_meta *m, uint64_t id, uint32_t size);
void jo_tkv_delfile_key(struct jo_key *k, struct jo_meta *m, uint64_t ino, uint64_t length);
void jo_tkv_delslice_key(struct jo_key *k, struct jo_meta *m, int64_t ts, uint64_t id);
void jo_tkv_counter_key(struct jo_key *k, struct jo_meta *m, const char *name);

/* ---- transactions */

struct jo_tx {
	struct jo_meta *m;
	struct jo_kvt *t;
};

/*
 * The body of a transaction: 0 commits its writes; > 0 ends it without
 * writing and is returned as is (an outcome such as "nothing to do");
 * < 0 is an error (nothing written). Run by jo_tkv_txn, which begins,
 * commits and tries the whole body again while the commit conflicts.
 */
typedef int (*jo_tx_fn)(struct jo_tx *tx, void *ctx, struct jo_err *err);
int jo_tkv_txn(struct jo_meta *m, jo_tx_fn fn, void *ctx, struct jo_err *err);

/* In a transaction: *v malloc'd (NULL when absent). */
int jo_tx_get(struct jo_tx *tx, const struct jo_key *k, uint8_t **v, size_t *vl,
	      struct jo_err *err);
int jo_tx_put(struct jo_tx *tx, const struct jo_key *k, const void *v, size_t vl,
	      struct jo_err *err);
int jo_tx_del(struct jo_tx *tx, const struct jo_key *k, struct jo_err *err);
/* Delete every key starting with prefix. */
int jo_tx_del_prefix(struct jo_tx *tx, const struct jo_key *prefix, struct jo_err *err);
/* Does a key start with prefix? (a range read: an insert there conflicts) */
int jo_tx_exists_prefix(struct jo_tx *tx, const struct jo_key *prefix, bool *out,
			struct jo_err *err);
/* counter += delta (le64; absent = 0); *out (may be NULL) gets the new value. */
int jo_tx_incr(struct jo_tx *tx, const struct jo_key *k, int64_t delta, int64_t *out,
	       struct jo_err *err);

/* Outside transactions: one key (its own read-only transaction). */
int jo_tkv_get(struct jo_meta *m, const struct jo_key *k, uint8_t **v, size_t *vl,
	       struct jo_err *err);
/* The K value of slice (id, size): *found, *v = refs - 1 (le64). */
int jo_tkv_ref(struct jo_meta *m, uint64_t id, uint32_t size, bool *found, int64_t *v,
	       struct jo_err *err);
/*
 * In tx, delete slice (id, size)'s K while it still holds an 8-byte value
 * that is 0 (one reference left, where zero) or negative (no reference).
 * 0 when deleted, 1 when K says otherwise (nothing done), or an error.
 */
int jo_tx_ref_del_if(struct jo_tx *tx, uint64_t id, uint32_t size, bool zero,
		     struct jo_err *err);
/* Every key with this prefix, at one snapshot. */
int jo_tkv_scan_prefix(struct jo_meta *m, const struct jo_key *prefix, bool keys_only,
		       jo_kv_cb cb, void *payload, struct jo_err *err);

/* The family's section tables, trash removal and task records. */
extern const struct jo_mut_ops jo_tkv_mut_ops;
extern const struct jo_compact_ops jo_tkv_compact_ops;
JO_MUT_FAMILY_DECLS(jo_tkv);
int jo_tkv_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err);

#endif
