/*
 * meta.h: the engine-neutral JuiceFS metadata client.
 *
 * A struct jo_meta is one connection to a volume's metadata engine, opened from
 * a META-URL spelled exactly as `juicefs` takes it:
 *   redis://[[user]:pass@]host[:port][/db]     (also rediss://[?tls-...], unix sockets
 *                                               as unix:///path/redis.sock[?db=N])
 *   redis://[[user]:pass@]MASTER,host1:26379,host2:26379[/db]   (Sentinel)
 *   redis://[[user]:pass@]host1:6379,host2:6379[/db]            (Cluster: {db} key prefix)
 *   sqlite3://relative/path.db | sqlite3:///abs/path.db[?table_prefix=X]
 *   postgres://[user[:pass]]@host[:5432]/db[?sslmode=...&search_path=S&table_prefix=X]
 *   postgres://user[:pass]@/db?host=/socket/dir
 *   mysql://user[:pass]@(host:3306)/db | @tcp(host:port)/db | @unix(/path.sock)/db [?tls=...]
 * Engine families (redis: hiredis's protocol code over our TCP/TLS connection; sql over sqlite3, libpq and MariaDB
 * Connector/C) sit behind one table each (meta_internal.h); a new engine is
 * a new family or a new SQL driver, not an `if` in every caller.
 *
 * Threading: a handle is NOT thread-safe. Use jo_meta_dup() to get another
 * connection for another thread. Scan callbacks run with no request in
 * flight and may call read functions on the same handle.
 *
 * All values are returned in engine-neutral units: times in unix seconds (SQL
 * microseconds are converted), reference counts as the real count (Redis
 * stores count-1; the backend adds 1; an absent Redis field is count 1),
 * counters as "next free id" (Redis stores the last id handed out).
 *
 * Errors: JO_EINVAL (malformed URL), JO_ECONNECT (unreachable), JO_EAUTH (bad
 * password), JO_ENOTJFS (no format record), JO_EUNSUPPORTED (tikv...,
 * MetaVersion > 1, ...), JO_EPROTO (corrupt record), JO_ENOTFOUND, JO_EIO.
 * Messages never contain the password.
 */
#ifndef JO_META_H
#define JO_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;

#define JO_ROOT_INODE 1ULL
#define JO_TRASH_INODE 0x7FFFFFFF10000000ULL
#define JO_CHUNK_BITS 26
#define JO_CHUNK_SIZE (1ULL << JO_CHUNK_BITS)
#define JO_SLICE_REC_LEN 24
#define JO_DELSLICE_REC_LEN 12

/* Inode types, as stored (attr type field and dir-entry type byte). */
enum jo_itype {
	JO_TYPE_FILE = 1, JO_TYPE_DIR = 2, JO_TYPE_SYMLINK = 3, JO_TYPE_FIFO = 4,
	JO_TYPE_BLKDEV = 5, JO_TYPE_CHRDEV = 6, JO_TYPE_SOCKET = 7,
};

/* The trash root and the range of its hour directories (Ino.IsTrash). */
#define JO_TRASH_INODE 0x7FFFFFFF10000000ULL
static inline bool jo_ino_is_trash(uint64_t ino)
{
	return ino >= JO_TRASH_INODE;
}
/* Trash hour directory names ("2006-01-02-15", UTC hour of the deletion) <->
 * unix seconds. jo_trash_hour_parse: 0, or -1 for a name JuiceFS's
 * time.Parse would refuse (wrong shape, Feb 30, hour 24, ...). */
int jo_trash_hour_parse(const char *name, size_t len, int64_t *ts);
/* Hour directories older than this are due (the clients' doCleanupTrash:
 * TrashDays plus two hours, so every entry stays at least TrashDays). */
static inline int64_t jo_trash_edge(int64_t now, int trash_days)
{
	return now - ((int64_t)trash_days * 24 + 2) * 3600;
}
void jo_trash_hour_name(int64_t ts, char buf[32]);

/* The volume's format record ("setting"), parsed. Strings are owned. */
struct jo_format {
	char *name;
	char *uuid;
	char *storage;       /* lower-cased: "file", "s3", "minio", ... */
	char *bucket;        /* as stored; may contain %d when shards > 1 */
	char *access_key;
	char *secret_key;    /* decrypted when KeyEncrypted; never log it */
	char *session_token; /* decrypted when KeyEncrypted */
	char *compression;   /* lower-cased: "none" when absent/empty */
	char *encrypt_algo;
	bool has_encrypt_key;/* data encryption on: we refuse to read blocks */
	bool hash_prefix;
	bool key_encrypted;
	bool changelog;      /* v1.4+ ChangeLog: mutators must refuse */
	bool dir_stats;      /* DirStats: per-directory usage is recorded */
	bool user_group_quota; /* UserGroupQuota (v1.4+): per-uid/gid usage is recorded */
	int block_size_kib;  /* BlockSize, KiB */
	int shards;          /* 0 or 1 = single bucket */
	int trash_days;
	int meta_version;
	char *raw_json;      /* the record as stored */
};
void jo_format_release(struct jo_format *f);

/* File attributes (subset of the 72-byte Redis attr / jfs_node row). */
struct jo_attr {
	uint8_t type;        /* enum jo_itype */
	uint8_t flags;
	uint16_t mode;       /* permission bits only */
	uint32_t uid, gid, nlink, rdev;
	int64_t atime, mtime, ctime;     /* unix seconds */
	uint32_t atimensec, mtimensec, ctimensec;
	uint64_t length;
	uint64_t parent;
};

/* Open a META-URL. On failure *out is NULL and err says why. */
int jo_meta_open(struct jo_meta **out, const char *url, struct jo_err *err);
/* Options for jo_meta_open_with(). Zero-initialise; NULL means defaults. */
struct jo_meta_open_opts {
	/* When non-NULL and non-empty, overrides the password in the URL (cmd/
	 * passes $REDIS_PASSWORD / $META_PASSWORD here; common/ never reads env). */
	const char *password;
	/* Redis only: $REDIS_PASSWORD, which Redis takes before `password`. */
	const char *redis_password;
	/* Redis Sentinel only: $SENTINEL_PASSWORD, for the sentinels themselves. */
	const char *sentinel_password;
	/*
	 * Open for reading only: SQLite opens the file read-only, so closing
	 * never checkpoints a client's write-ahead log into it (nothing on disk
	 * changes). Mutating calls then fail.
	 */
	bool read_only;
	/*
	 * A jfsops coordinator (`sync --cluster URL`), not a JuiceFS volume:
	 * the database need not hold a format record ("setting"), and an
	 * SQLite file that does not exist yet is created. Only the task and
	 * record calls of meta_mut.h are meant for such a handle; every family
	 * honours the flag in its open.
	 */
	bool coordinator_only;
};
int jo_meta_open_with(struct jo_meta **out, const char *url,
		      const struct jo_meta_open_opts *opts, struct jo_err *err);

/*
 * Parse a format JSON record (no I/O): unknown fields are ignored, secrets
 * are decrypted when KeyEncrypted (AES-128-GCM, key MD5(UUID); sm4gcm is
 * JO_EUNSUPPORTED). JO_EPROTO when the JSON or a secret is malformed.
 * Does not reject MetaVersion > 1 (jo_meta_load_format does).
 */
int jo_format_parse(const char *json, struct jo_format *out, struct jo_err *err);

/* A binary attr (Redis i{ino}, tkv A{ino}I; spec §3.2): offsets of the
 * fields the removal and restore code rewrites, and the flag bits. The parent
 * inode (8 bytes, big-endian) follows the fixed 63-byte part. */
#define JO_ATTR_MTIME_OFF 23
#define JO_ATTR_CTIME_OFF 35
#define JO_ATTR_NLINK_OFF 47
#define JO_ATTR_PARENT_OFF 63
#define JO_ATTR_FLAG_IMMUTABLE 1
#define JO_ATTR_FLAG_APPEND 2

/* Decode a Redis binary attr (i{ino} value), leniently by length (>= 63
 * bytes needed; parent read when >= 8 more bytes remain). JO_EPROTO if short. */
int jo_meta_decode_attr(const uint8_t *buf, size_t len, struct jo_attr *out,
			struct jo_err *err);

/* A second, independent connection to the same engine (for another thread). */
int jo_meta_dup(struct jo_meta *m, struct jo_meta **out, struct jo_err *err);
void jo_meta_close(struct jo_meta *m);

/* The engine: "redis", "sqlite3", "postgres" or "mysql". Borrowed, static.
 * For messages only: callers ask jo_meta_has() what an engine can do. */
const char *jo_meta_engine(const struct jo_meta *m);

/* What a handle's engine family can do (enum jo_meta_cap in meta_internal.h
 * for the family side; the public names are these). */
#define JO_META_HAS_ORPHAN_CHUNKS (1u << 0)  /* chunks can outlive their inode (Redis) */
#define JO_META_HAS_SNAPSHOT_SCANS (1u << 1) /* scans read one consistent snapshot */
bool jo_meta_has(const struct jo_meta *m, unsigned cap);

/*
 * Read the scans that follow, until jo_meta_snapshot_end(), from one
 * snapshot of the volume, so that together they are one consistent picture
 * (SQL: one read-only REPEATABLE READ transaction; tkv: one revision). Redis
 * keeps no snapshots: a no-op there (a SCAN returns every key that exists
 * from its start to its end). Meanwhile only reads may use this handle.
 * snapshot_end accepts a handle with no snapshot.
 */
int jo_meta_snapshot_begin(struct jo_meta *m, struct jo_err *err);
void jo_meta_snapshot_end(struct jo_meta *m);
/*
 * A snapshot shared by processes: jo_meta_snapshot_token() names the
 * volume as it is now (tkv: a revision), and jo_meta_snapshot_begin_at()
 * in any process reads that state again (a state the store no longer has,
 * etcd compacted past it, fails the scans, never shortens them). *token is
 * 0 where the family has no such snapshots (SQL, Redis); begin_at(0) is
 * jo_meta_snapshot_begin().
 */
int jo_meta_snapshot_token(struct jo_meta *m, int64_t *token, struct jo_err *err);
int jo_meta_snapshot_begin_at(struct jo_meta *m, int64_t token, struct jo_err *err);

/* The server and its version ("PostgreSQL 15.18", "Redis 7.0.15"), malloc'd. */
int jo_meta_describe(struct jo_meta *m, char **out, struct jo_err *err);

/*
 * A fix hint for a failure of jo_meta_open(url) or of the first reads
 * (code = the JO_E* code), in the words of that URL's engine. Static.
 * Works from the URL alone (the handle may not exist).
 */
const char *jo_meta_hint(const char *url, int code);
/* The URL with the password replaced by "****". Borrowed, lives with m. */
const char *jo_meta_url_redacted(const struct jo_meta *m);

/*
 * Read and parse the format record. JO_ENOTJFS when the database holds none
 * (not a JuiceFS volume), JO_EUNSUPPORTED when MetaVersion > 1.
 * out is filled on success; release with jo_format_release().
 */
int jo_meta_load_format(struct jo_meta *m, struct jo_format *out, struct jo_err *err);

/* Look up `name` in directory `parent`. JO_ENOTFOUND when absent. */
int jo_meta_lookup(struct jo_meta *m, uint64_t parent, const char *name,
		   uint64_t *ino_out, uint8_t *type_out, struct jo_err *err);
/* Resolve an absolute or root-relative path ("/a/b", "a/b", "/") to an inode. */
int jo_meta_resolve(struct jo_meta *m, const char *path, uint64_t *ino_out,
		    struct jo_err *err);
/*
 * One path of inode ino ("/a/b/f"; an entry in the trash "/.trash/HOUR/..."),
 * malloc'd into *out, found by climbing the parents in the attributes and
 * reading each parent directory for the entry's name: meant for the few
 * inodes a report names, not for a whole volume. JO_ENOTFOUND when the inode
 * or an entry on the way is gone, or when the inode is hard-linked (its
 * attributes keep no parent).
 */
int jo_meta_path_of(struct jo_meta *m, uint64_t ino, char **out, struct jo_err *err);
/* Attributes of an inode. JO_ENOTFOUND when the inode does not exist. */
int jo_meta_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out,
		    struct jo_err *err);
/*
 * Attributes of inodes inos[0..n) into out[i], found[i] false where one
 * does not exist. SQL reads up to 16 in one statement, Redis pipelines
 * them; other families read them one by one.
 */
int jo_meta_getattr_many(struct jo_meta *m, const uint64_t *inos, size_t n,
			 struct jo_attr *out, bool *found, struct jo_err *err);

/* Directory entries of `dir`. Callback returning non-zero stops and is returned. */
typedef int (*jo_meta_dirent_cb)(const char *name, size_t name_len, uint64_t ino,
				 uint8_t type, void *payload);
int jo_meta_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb,
		    void *payload, struct jo_err *err);

/*
 * The entries of the directories dirs[0..n) with each entry's attributes,
 * for families that read both cheaper than a readdir per directory plus a
 * scan of every inode (Redis: one pipeline of HSCAN pages for all n
 * directories, then one MGET i{ino}... per page, each page's entries passed
 * on while the next pages are being answered; big directories go on page by
 * page). cb gets the index in dirs of the directory an entry is in; entries
 * of different directories may come interleaved. cb must not use m (replies
 * may be in flight while it runs). attr is NULL for an entry whose inode is
 * gone by the time it is read (a concurrent unlink). Memory: the pages of
 * the n directories.
 * JO_EUNSUPPORTED when the family has no such read: use jo_meta_readdir()
 * and jo_meta_scan_inodes() then.
 */
typedef int (*jo_meta_dirent_attr_cb)(size_t dir_index, const char *name, size_t name_len,
				      uint64_t ino, uint8_t type, const struct jo_attr *attr,
				      void *payload);
int jo_meta_readdir_attr(struct jo_meta *m, const uint64_t *dirs, size_t n,
			 jo_meta_dirent_attr_cb cb, void *payload, struct jo_err *err);

/*
 * The raw records of chunk (ino, indx): a malloc'd buffer of 24-byte records
 * in list order (*out NULL and *len 0 when the chunk does not exist; that is
 * not an error). JO_EPROTO when a Redis element is not 24 bytes long.
 */
int jo_meta_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx,
		       uint8_t **out, size_t *len, struct jo_err *err);
/* The chunk indexes that exist for inode ino, ascending (malloc'd array).
 * Redis has no per-inode index: this SCANs the keyspace (MATCH c{ino}_*). */
int jo_meta_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out,
			size_t *n, struct jo_err *err);

/*
 * The chunk indexes that exist among those covering [0, length) of inode ino
 * (indexes < ceil(length / 64 MiB)), ascending. Use this for reading a file:
 * on Redis it costs one pipelined EXISTS per index, while
 * jo_meta_list_chunks must SCAN the whole keyspace (Redis keeps no per-inode
 * chunk index) and is meant for deletion/leak paths that need every chunk.
 */
int jo_meta_list_chunks_len(struct jo_meta *m, uint64_t ino, uint64_t length,
			    uint32_t **out, size_t *n, struct jo_err *err);

/*
 * Stream every chunk of the volume (including chunks of inodes that no longer
 * exist) with bounded memory: Redis SCAN MATCH c*_* + LRANGE per key, SQL a
 * cursor over jfs_chunk. Order unspecified. raw is borrowed for the call.
 */
typedef int (*jo_meta_chunk_cb)(uint64_t ino, uint32_t indx, const uint8_t *raw,
				size_t len, void *payload);
int jo_meta_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload,
			struct jo_err *err);

/*
 * The chunk scan in parts, for work spread over processes. A family that
 * can be scanned in parts orders its chunk records by a 64-bit position
 * (SQL: jfs_chunk's primary key; tkv: the 8 bytes after 'A' of a chunk key,
 * the inode's little-endian bytes, read big-endian) and cuts it into parts
 * [cuts[i], cuts[i+1]): cuts[0] = 0, cuts[*nparts] = UINT64_MAX, strictly
 * increasing, about equal parts of the records there now (at most n parts;
 * records added later fall into the last one). A family without parts
 * (Redis) gives one part. jo_meta_scan_chunks_range() streams the chunks
 * whose position is in [from, to) (from 0: no lower bound; to UINT64_MAX:
 * none above), so the parts of one cut together stream every chunk exactly
 * once; [0, UINT64_MAX) is jo_meta_scan_chunks(). Other ranges of a family
 * without parts: JO_EUNSUPPORTED. cuts: n + 1 slots.
 */
int jo_meta_chunk_cuts(struct jo_meta *m, size_t n, uint64_t *cuts, size_t *nparts,
		       struct jo_err *err);
int jo_meta_scan_chunks_range(struct jo_meta *m, uint64_t from, uint64_t to, jo_meta_chunk_cb cb,
			      void *payload, struct jo_err *err);

/*
 * The chunks of many files at once: for each request, every chunk among
 * indexes 0 .. nidx-1 that exists, through cb (in request order, then index
 * order; raw borrowed for the call). Redis pipelines one LRANGE per index,
 * 4,096 at a time, each reply passed on as it comes (cb must not use m:
 * replies may be in flight); other families read chunk by chunk. A file is read as
 * juicefs dump reads it (indexes below its length), not its chunks past EOF.
 */
struct jo_meta_chunk_req {
	uint64_t ino;
	uint32_t nidx;  /* ceil(length / 64 MiB) */
};
int jo_meta_read_chunks(struct jo_meta *m, const struct jo_meta_chunk_req *reqs, size_t n,
			jo_meta_chunk_cb cb, void *payload, struct jo_err *err);

/* Every inode with its attributes (Redis SCAN i*, SQL jfs_node). */
typedef int (*jo_meta_inode_cb)(uint64_t ino, const struct jo_attr *attr, void *payload);
int jo_meta_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload,
			struct jo_err *err);

/*
 * Reference counts. jo_meta_get_slice_ref: the real count of slice (id,size)
 * (Redis: absent field -> 1 and *explicit false; SQL: absent row -> 0 and
 * *explicit false). jo_meta_scan_slice_refs streams every explicit entry
 * (Redis sliceRef hash via HSCAN, SQL jfs_chunk_ref) with its real count.
 */
int jo_meta_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size,
			  int64_t *refs_out, bool *explicit_out, struct jo_err *err);
typedef int (*jo_meta_ref_cb)(uint64_t id, uint32_t size, int64_t refs, void *payload);
int jo_meta_scan_slice_refs(struct jo_meta *m, jo_meta_ref_cb cb, void *payload,
			    struct jo_err *err);

/* Pending removed files (delfiles / jfs_delfile). expire = unix s of deletion. */
typedef int (*jo_meta_delfile_cb)(uint64_t ino, uint64_t length, int64_t deleted_at,
				  void *payload);
int jo_meta_scan_delfiles(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload,
			  struct jo_err *err);

/* Delayed slices (delSlices / jfs_delslices): recs = 12-byte [u64 id][u32 size]. */
typedef int (*jo_meta_delslices_cb)(uint64_t new_id, int64_t deleted_at,
				    const uint8_t *recs, size_t len, void *payload);
int jo_meta_scan_delslices(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			   struct jo_err *err);

/* Sessions and their sustained (open-but-unlinked) inodes. */
typedef int (*jo_meta_session_cb)(uint64_t sid, int64_t expire, const char *info_json,
				  void *payload);
int jo_meta_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			  struct jo_err *err);
typedef int (*jo_meta_sustained_cb)(uint64_t sid, uint64_t ino, void *payload);
int jo_meta_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			   struct jo_err *err);
/*
 * The same, for reports: only the sets of registered sessions (Redis:
 * allSessions and the legacy sessions zset, then each session{sid}), with no
 * SCAN of the keyspace; a set left by a session no longer registered is not
 * seen. Anything that deletes uses jo_meta_scan_sustained(). Families with no
 * such distinction run jo_meta_scan_sustained().
 */
int jo_meta_scan_sustained_registered(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
				      struct jo_err *err);
/* Detached nodes (detachedNodes / jfs_detached_node). */
typedef int (*jo_meta_detached_cb)(uint64_t ino, int64_t added, void *payload);
int jo_meta_scan_detached(struct jo_meta *m, jo_meta_detached_cb cb, void *payload,
			  struct jo_err *err);

/*
 * Counters by their engine-neutral name: "nextInode", "nextChunk",
 * "nextSession", "nextTrash", "usedSpace", "totalInodes", and the
 * lastCleanup* / nextCleanupSlices timestamps. For nextInode/nextChunk the
 * value is normalised to the NEXT FREE id on both engines (Redis + 1).
 * An absent counter reads as its engine's initial value.
 */
int jo_meta_get_counter(struct jo_meta *m, const char *name, int64_t *out,
			struct jo_err *err);

#endif
