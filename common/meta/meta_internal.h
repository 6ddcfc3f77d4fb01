/*
 * meta_internal.h: the backend vtable behind struct jo_meta and the parsed
 * META-URL. Only common/meta/ and its unit tests include this.
 */
#ifndef JO_META_INTERNAL_H
#define JO_META_INTERNAL_H

#include "common/meta/meta.h"

/* A parsed META-URL. All strings owned (NULL when absent). */
struct jo_meta_url {
	char *engine;       /* "redis" or "sqlite3" */
	bool tls;           /* rediss:// */
	bool unix_socket;   /* unix:// */
	char *user;         /* redis ACL user, may be NULL */
	char *password;     /* NULL when none given */
	char *host;         /* redis host (no brackets for IPv6) */
	int port;           /* redis port (default 6379) */
	int db;             /* redis db number (default 0) */
	char *path;         /* sqlite3 file or unix socket path */
	char *table_prefix; /* sqlite3: "jfs_" or "jfs_X_" */
	char *redacted;     /* the URL with the password as "****" */
	bool read_only;     /* opened for reading only (jo_meta_open_opts) */
};

/* Parse a META-URL (no I/O). JO_EINVAL when malformed, JO_EUNSUPPORTED for
 * engines and forms we do not handle (cluster, sentinel, mysql, tikv...). */
int jo_meta_url_parse(struct jo_meta_url *out, const char *url, struct jo_err *err);
void jo_meta_url_release(struct jo_meta_url *u);

struct jo_meta_ops {
	const char *engine;
	/* Connect to u (already parsed); store the backend state in m->be. */
	int (*open)(struct jo_meta *m, struct jo_err *err);
	void (*close)(struct jo_meta *m);
	/* The raw format JSON (malloc'd). JO_ENOTJFS when absent. */
	int (*get_setting)(struct jo_meta *m, char **json, struct jo_err *err);
	int (*lookup)(struct jo_meta *m, uint64_t parent, const char *name,
		      uint64_t *ino, uint8_t *type, struct jo_err *err);
	int (*getattr)(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err);
	int (*readdir)(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		       struct jo_err *err);
	int (*read_chunk)(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
			  size_t *len, struct jo_err *err);
	int (*list_chunks)(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			   struct jo_err *err);
	/* indexes < nidx that exist, ascending */
	int (*list_chunks_below)(struct jo_meta *m, uint64_t ino, uint32_t nidx, uint32_t **out,
				 size_t *n, struct jo_err *err);
	int (*scan_chunks)(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload, struct jo_err *err);
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
	int (*get_counter)(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err);
};

struct jo_meta {
	const struct jo_meta_ops *ops;
	struct jo_meta_url url;
	void *be;
};

extern const struct jo_meta_ops jo_meta_redis_ops;
extern const struct jo_meta_ops jo_meta_sqlite_ops;

/* Helpers shared by the backends. */
int jo_meta_parse_u64(const char *s, size_t n, uint64_t *out); /* 0 ok, -1 bad */
static inline uint64_t jo_be64(const uint8_t *p)
{
	return ((uint64_t)p[0] << 56) | ((uint64_t)p[1] << 48) | ((uint64_t)p[2] << 40) |
	       ((uint64_t)p[3] << 32) | ((uint64_t)p[4] << 24) | ((uint64_t)p[5] << 16) |
	       ((uint64_t)p[6] << 8) | p[7];
}
static inline uint32_t jo_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline void jo_put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static inline void jo_put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}
/* Space JuiceFS accounts for an inode of this length (align4K: 4 KiB for 0). */
static inline int64_t jo_align4k(uint64_t len)
{
	return len == 0 ? 4096 : (int64_t)((((len - 1) >> 12) + 1) << 12);
}

/*
 * The backend connection, for the mutating modules of common/meta
 * (compaction, gc) that speak the engine directly. NULL when m is of the
 * other engine. Borrowed; lives with m.
 */
struct redisContext;
struct sqlite3;
struct redisContext *jo_meta_redis_conn(struct jo_meta *m);
struct sqlite3 *jo_meta_sqlite_db(struct jo_meta *m);
/* The SQL table prefix ("jfs_" or "jfs_X_"). */
const char *jo_meta_sqlite_prefix(struct jo_meta *m);

#endif
