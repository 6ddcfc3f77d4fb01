/*
 * meta_internal.h: the backend vtable behind struct jo_meta and the parsed
 * META-URL. Only common/meta/ and its unit tests include this.
 */
#ifndef JO_META_INTERNAL_H
#define JO_META_INTERNAL_H

#include "common/mem.h"
#include "common/meta/meta.h"

#include <time.h>

/* Set the time at offset off of a binary attr (JO_ATTR_*_OFF: seconds, then
 * nanoseconds, big-endian) to now. */
static inline void jo_attr_stamp(uint8_t *attr, size_t off, const struct timespec *now)
{
	jo_put_be64(attr + off, (uint64_t)now->tv_sec);
	jo_put_be32(attr + off + 8, (uint32_t)now->tv_nsec);
}

/* A parsed META-URL. All strings owned (NULL when absent). */
struct jo_meta_url {
	char *engine;       /* the scheme's engine: "redis", "sqlite3", "postgres", "mysql" */
	bool tls;           /* rediss:// */
	bool unix_socket;   /* redis unix://, mysql unix(...), postgres ?host=/dir */
	char *user;         /* redis ACL user / SQL user, may be NULL */
	char *password;     /* NULL when none given */
	char *host;         /* redis/SQL host (no brackets for IPv6) */
	int port;           /* redis port (default 6379), SQL port (0: the driver's default) */
	int db;             /* redis db number (default 0) */
	char *dbname;       /* SQL database name */
	char *path;         /* sqlite3 file or unix socket path */
	char *query;        /* SQL: the URL's query without juicefs's own keys ("" when none) */
	char *table_prefix; /* SQL: "jfs_" or "jfs_X_" */
	char *redacted;     /* the URL with the password as "****" */
	bool read_only;     /* opened for reading only (jo_meta_open_opts) */
	bool coordinator_only; /* no volume: skip the format check (jo_meta_open_opts) */
	/* redis: Sentinel, Cluster and TLS (as juicefs's newRedisMeta reads them) */
	char *hosts;        /* sentinel/cluster: "h:p,h:p,..." (IPv6 as [a::b]:p), else NULL */
	char *master_name;  /* sentinel: the master's name (NULL: not a sentinel URL) */
	char *tls_ca;       /* tls-ca-cert-file */
	char *tls_cert;     /* tls-cert-file */
	char *tls_key;      /* tls-key-file */
	char *tls_server_name; /* tls-server-name */
	bool tls_skip_verify;  /* insecure-skip-verify (any non-empty value, as juicefs) */
	char *route_read;   /* route-read: "replica", "random", "latency" (read-only handles) */
	char *sentinel_password; /* $SENTINEL_PASSWORD (jo_meta_open_opts) */
};
/* Parse a META-URL (no I/O). JO_EINVAL when malformed, JO_EUNSUPPORTED for
 * engines and forms we do not handle (tikv, etcd...). */
int jo_meta_url_parse(struct jo_meta_url *out, const char *url, struct jo_err *err);
void jo_meta_url_release(struct jo_meta_url *u);
/* A deep copy of src into dst (JO_ENOMEM; dst is then empty). */
int jo_meta_url_copy(struct jo_meta_url *dst, const struct jo_meta_url *src, struct jo_err *err);

struct jo_mut_ops;
struct jo_compact_ops;

/* Capabilities a family may have (jo_meta_has()). */
enum jo_meta_cap {
	/* chunk records can outlive their inode (Redis: a shrunk-then-deleted
	 * file leaves c{ino}_{indx} keys past its length) */
	JO_META_CAP_ORPHAN_CHUNKS = JO_META_HAS_ORPHAN_CHUNKS,
	/* each scan reads one consistent snapshot of the volume */
	JO_META_CAP_SNAPSHOT_SCANS = JO_META_HAS_SNAPSHOT_SCANS,
};

/*
 * One engine family: everything jfsops does on a volume's metadata, behind
 * one table. Families: redis (redis/read.c, redis/mut.c, redis/rm.c,
 * redis/compact.c), sql (sql_*.c over a driver per dialect, sql/internal.h)
 * and tkv (the files of tkv/ over a key-value transport, tkv/internal.h, tkv/kv.h).
 * A family is picked by the META-URL's engine in meta.c; nothing outside
 * common/meta/ compares engine names.
 */
struct jo_meta_ops {
	const char *family;
	/* The engine behind this handle ("redis", "sqlite3", "postgres", ...). */
	const char *(*engine)(const struct jo_meta *m);
	unsigned (*caps)(const struct jo_meta *m);
	/* Connect to m->url (already parsed); store the backend state in m->be. */
	int (*open)(struct jo_meta *m, struct jo_err *err);
	void (*close)(struct jo_meta *m);
	/* The server and its version, for doctor ("Redis 7.0.15", ...): malloc'd. */
	int (*describe)(struct jo_meta *m, char **out, struct jo_err *err);
	/* jo_meta_snapshot_begin/end (NULL: the family has no snapshots) */
	int (*snapshot_begin)(struct jo_meta *m, struct jo_err *err);
	void (*snapshot_end)(struct jo_meta *m);
	/* optional (NULL: token 0): jo_meta_snapshot_token / jo_meta_snapshot_begin_at */
	int (*snapshot_token)(struct jo_meta *m, int64_t *token, struct jo_err *err);
	int (*snapshot_begin_at)(struct jo_meta *m, int64_t token, struct jo_err *err);

	/* ---- reads (meta.h) */
	/* The raw format JSON (malloc'd). JO_ENOTJFS when absent. */
	int (*get_setting)(struct jo_meta *m, char **json, struct jo_err *err);
	int (*lookup)(struct jo_meta *m, uint64_t parent, const char *name,
		      uint64_t *ino, uint8_t *type, struct jo_err *err);
	int (*getattr)(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err);
	int (*readdir)(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		       struct jo_err *err);
	/* optional (NULL: getattr one by one) */
	int (*getattr_many)(struct jo_meta *m, const uint64_t *inos, size_t n,
			    struct jo_attr *out, bool *found, struct jo_err *err);
	/* optional (NULL: JO_EUNSUPPORTED): entries with their attributes */
	int (*readdir_attr)(struct jo_meta *m, const uint64_t *dirs, size_t n,
			    jo_meta_dirent_attr_cb cb, void *payload, struct jo_err *err);
	int (*read_chunk)(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			  size_t *len, struct jo_err *err);
	int (*list_chunks)(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			   struct jo_err *err);
	/* indexes < nidx that exist, ascending */
	int (*list_chunks_below)(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
				 size_t *n, struct jo_err *err);
	int (*scan_chunks)(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload, struct jo_err *err);
	/* optional (NULL: one part): jo_meta_chunk_cuts / jo_meta_scan_chunks_range */
	int (*chunk_cuts)(struct jo_meta *m, size_t n, uint64_t *cuts, size_t *nparts,
			  struct jo_err *err);
	int (*scan_chunks_range)(struct jo_meta *m, uint64_t from, uint64_t to, jo_meta_chunk_cb cb,
				 void *payload, struct jo_err *err);
	/* optional (NULL: chunk by chunk through list_chunks_below/read_chunk) */
	int (*read_chunks)(struct jo_meta *m, const struct jo_meta_chunk_req *reqs, size_t n,
			   jo_meta_chunk_cb cb, void *payload, struct jo_err *err);
	int (*scan_inodes)(struct jo_meta *m, jo_meta_inode_cb cb, void *payload, struct jo_err *err);
	int (*get_slice_ref)(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs,
			     bool *explicit_out, struct jo_err *err);
	int (*scan_slice_refs)(struct jo_meta *m, jo_meta_ref_cb cb, void *payload, struct jo_err *err);
	int (*scan_delfiles)(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload, struct jo_err *err);
	int (*scan_delslices)(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			      struct jo_err *err);
	int (*scan_sessions)(struct jo_meta *m, jo_meta_session_cb cb, void *payload, struct jo_err *err);
	int (*scan_sustained)(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			      struct jo_err *err);
	int (*scan_detached)(struct jo_meta *m, jo_meta_detached_cb cb, void *payload, struct jo_err *err);
	/* optional (NULL: scan_sustained) */
	int (*scan_sustained_registered)(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
					 struct jo_err *err);
	int (*get_counter)(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err);

	/* ---- gc mutations, trash unlink/rmdir, task records and leases (meta_mut.h) */
	const struct jo_mut_ops *mut;
	/* ---- compaction (meta_compact.h) */
	const struct jo_compact_ops *compact;
};

struct jo_meta {
	const struct jo_meta_ops *ops;
	struct jo_meta_url url;
	void *be;
};

/*
 * Even cuts for jo_meta_chunk_cuts(): [0, span) positions in steps of unit
 * cut into at most n parts at multiples of unit (span units at most: 0 < span),
 * the last part open to UINT64_MAX.
 */
void jo_meta_even_cuts(uint64_t span, uint64_t unit, size_t n, uint64_t *cuts, size_t *nparts);

/* The families. */
extern const struct jo_meta_ops jo_meta_redis_ops;
extern const struct jo_meta_ops jo_meta_sql_ops;
extern const struct jo_meta_ops jo_meta_tkv_ops;

/* Helpers shared by the backends. */
/* Space JuiceFS accounts for an inode of this length (align4K: 4 KiB for 0). */
static inline int64_t jo_align4k(uint64_t len)
{
	return len == 0 ? 4096 : (int64_t)((((len - 1) >> 12) + 1) << 12);
}

#endif
