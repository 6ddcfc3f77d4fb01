/*
 * tkv/kv.h: the key-value transaction interface that the tkv family
 * (the files of tkv/: the key layout TiKV, etcd and FoundationDB share, spec
 * juicefs-engines.md part B) runs on. One transport per store: tkv/etcd.c
 * (etcd's v3 API through its JSON gateway); a TiKV or FoundationDB
 * transport is one more file behind this table (docs/tkv-transports.md).
 *
 * Keys and values are byte strings; keys are already prefixed with the
 * volume's prefix by the family. Only common/meta includes this.
 *
 * Errors: JO_ECONNECT (no endpoint answers), JO_ETIMEOUT, JO_EAUTH,
 * JO_EPROTO (a malformed reply), JO_ECONFLICT (commit: something read
 * changed; nothing was written), JO_EINVAL (a transaction over the store's
 * limits: nothing was sent), JO_EIO (others). Messages never hold secrets.
 */
#ifndef JO_META_KV_INTERNAL_H
#define JO_META_KV_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta_url;
struct jo_kvc;   /* a transport connection; not thread-safe (one per handle) */
struct jo_kvt;   /* a transaction */

/* One key of a scan; non-zero stops the scan and is returned. Borrowed. */
typedef int (*jo_kv_cb)(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
			void *payload);

struct jo_kv_transport {
	const char *name;            /* "etcd" */
	/*
	 * The most keys and ranges one transaction may read (each becomes a
	 * check at commit) and the most writes it may carry; 0: no limit.
	 * etcd: 128 compares and 128 operations per Txn (--max-txn-ops).
	 */
	size_t max_txn_reads;
	size_t max_txn_writes;

	int (*connect)(struct jo_kvc **out, const struct jo_meta_url *u, struct jo_err *err);
	void (*disconnect)(struct jo_kvc *c);
	/* "etcd 3.4.23" (the server's own version), malloc'd */
	int (*version)(struct jo_kvc *c, char **out, struct jo_err *err);

	/*
	 * A transaction. Reads see the newest committed data (linearizable) and
	 * the transaction's own writes; commit applies every write atomically
	 * if nothing the transaction read has changed since: a key read (present
	 * or absent) that was modified, created or deleted, or a range read with
	 * scan() into which a key was inserted or in which one was modified or
	 * deleted. Otherwise commit returns JO_ECONFLICT and writes nothing.
	 * commit and abort free t (abort accepts NULL). A transaction with no
	 * writes commits without a round trip.
	 */
	int (*begin)(struct jo_kvc *c, struct jo_kvt **out, struct jo_err *err);
	/* *v (malloc'd, owned by the caller) NULL and *vl 0 when absent. */
	int (*get)(struct jo_kvt *t, const uint8_t *k, size_t kl, uint8_t **v, size_t *vl,
		   struct jo_err *err);
	/* Keys in [start, end) in key order, at most limit (0: all, one page of
	 * the store's maximum, else JO_EINVAL), keys only or with values. */
	int (*scan)(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end, size_t el,
		    size_t limit, bool keys_only, jo_kv_cb cb, void *payload, struct jo_err *err);
	int (*put)(struct jo_kvt *t, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
		   struct jo_err *err);
	int (*del)(struct jo_kvt *t, const uint8_t *k, size_t kl, struct jo_err *err);
	/* Delete every key in [start, end) at commit (one write). */
	int (*del_range)(struct jo_kvt *t, const uint8_t *start, size_t sl, const uint8_t *end,
			 size_t el, struct jo_err *err);
	int (*commit)(struct jo_kvt *t, struct jo_err *err);
	void (*abort)(struct jo_kvt *t);

	/*
	 * Every key in [start, end), in key order, as of one instant (etcd: one
	 * revision, read page by page), outside any transaction, with bounded
	 * memory. A snapshot that became unreadable mid-scan (etcd: compacted)
	 * is an error, never a shorter listing. *rev (may be NULL) gets the
	 * snapshot's revision, or pins it when non-zero on entry.
	 */
	int (*snapshot_scan)(struct jo_kvc *c, const uint8_t *start, size_t sl, const uint8_t *end,
			     size_t el, bool keys_only, int64_t *rev, jo_kv_cb cb, void *payload,
			     struct jo_err *err);
};

extern const struct jo_kv_transport jo_kv_etcd;

#endif
