/*
 * object.h: the engine-neutral object-store client.
 *
 * Backends: "file" (a local directory, as JuiceFS's file storage lays it out),
 * "s3"/"minio" (any S3-compatible endpoint over libcurl, SigV4 by OpenSSL),
 * and a sharding wrapper (JuiceFS --shards: N buckets, FNV-1a-32 of the full
 * key). A backend is a vtable in object_internal.h; callers never see curl.
 *
 * Keys are full keys inside the bucket (e.g. "myvol/chunks/0/0/1_0_4194304");
 * the client adds no prefix of its own.
 *
 * Threading: a struct jo_obj IS safe to use from many threads at once; up to
 * opts.max_conns requests run at once. s3: connections are kept alive in one
 * pool per endpoint for the whole process (every handle open on the same
 * scheme://host shares it; its size is the sum of their max_conns), so
 * requests after the first ones open no new connection.
 *
 * Retries: transient failures (5xx, SlowDown, 429, timeouts, connection resets)
 * are retried inside the client with exponential backoff and full jitter, up
 * to opts.retries times; throttled replies (503, 429, SlowDown) up to twice
 * that, on a budget of their own. Nothing above retries again.
 *
 * Errors: JO_ENOTFOUND (404 NoSuchKey), JO_EAUTH (403 / SignatureDoesNotMatch /
 * InvalidAccessKeyId), JO_ECONNECT (unreachable, TLS), JO_ESTATE (NoSuchBucket),
 * JO_EPROTO (malformed reply), JO_ECONFLICT (412 PreconditionFailed),
 * JO_ETIMEOUT, JO_ECANCELED, JO_EIO. The message carries the S3 error Code, the
 * key and the endpoint, never the secret.
 *
 * The file backend never follows a symlink below the bucket directory (the
 * bucket path itself may go through symlinks: they are resolved once, at
 * open). Listings skip symlinks (see opts.list_links) and other non-regular
 * files; reading, writing, copying or deleting a key whose path meets a
 * symlink is JO_EUNSUPPORTED and touches nothing. A missing bucket
 * directory is JO_ESTATE for every operation (as S3's NoSuchBucket), a
 * missing directory below it is an empty prefix.
 */
#ifndef JO_OBJECT_H
#define JO_OBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_obj;

struct jo_obj_opts {
	const char *storage;      /* "file", "s3", "minio" */
	/*
	 * Bucket as JuiceFS spells it. file: a directory path ("/var/jfs/").
	 * s3/minio: "http(s)://host[:port]/bucket", "https://bucket.s3.region.amazonaws.com", ...
	 */
	const char *bucket;
	const char *access_key;   /* NULL: anonymous (unsigned) */
	const char *secret_key;
	const char *session_token;
	const char *region;       /* NULL: from the endpoint, else "us-east-1" */
	int addressing;           /* 0 auto, 1 path style, 2 virtual-host style */
	bool insecure;            /* do not verify TLS certificates */
	bool list_v1;             /* use ListObjects V1 (endpoints without V2) */
	int max_conns;            /* connection pool size (default 64) */
	int retries;              /* transient-failure retries (default 5; twice as many
	                           * for throttled replies: 503, 429, SlowDown) */
	int timeout_ms;           /* per-request stall timeout (default 60000) */
	int shards;               /* >1: bucket is a printf pattern with %d */
	/*
	 * file: also list the temp files JuiceFS (and we) write before a rename,
	 * ".jfs.<name>.tmp.<n>". A crash between write and rename leaves them
	 * behind; leakcheck wants to see them, other listings do not.
	 */
	bool list_temp;
	/*
	 * file: report the symlinks met while listing as entries with is_link
	 * set (never followed), instead of skipping them silently. For callers
	 * that tell the user about them (sync) or class them (leakcheck).
	 */
	bool list_links;
};
#define JO_OBJ_OPTS_INIT { .max_conns = 64, .retries = 5, .timeout_ms = 60000 }

/* Metadata of one object (or a common prefix in a delimited listing). */
struct jo_obj_info {
	const char *key;          /* borrowed for the callback */
	uint64_t size;
	int64_t mtime;            /* unix seconds (Last-Modified / file mtime) */
	int32_t mtime_nsec;
	char etag[72];            /* without quotes; "" when unknown */
	const char *content_type; /* head/get only; NULL otherwise */
	bool is_prefix;           /* a CommonPrefix from a delimited listing */
	/*
	 * file with opts.list_links: a symlink, not an object. key is the link's
	 * own name (no trailing '/', whatever it points at), size 0, mtime the
	 * link's; nothing behind it is listed.
	 */
	bool is_link;
	/* file: the permission bits (st_mode & 07777) of get/head/list; 0 elsewhere */
	uint32_t mode;
};

int jo_obj_open(struct jo_obj **out, const struct jo_obj_opts *opts, struct jo_err *err);
void jo_obj_close(struct jo_obj *o);
/* A human description without secrets: "http://127.0.0.1:8333/bucket", "file:///d/". Borrowed. */
const char *jo_obj_describe(const struct jo_obj *o);
/*
 * The same for bucket i of the handle: a sharded handle's shard i, else the
 * one bucket (i == 0); NULL past the last. For checks that two handles do
 * not share a bucket. Borrowed.
 */
const char *jo_obj_describe_bucket(const struct jo_obj *o, int i);

/* Sink for streamed bodies; return non-zero to abort (the code is returned). */
typedef int (*jo_obj_write_cb)(const void *data, size_t len, void *payload);

struct jo_obj_get_opts {
	uint64_t offset;          /* first byte */
	int64_t length;           /* -1: to the end */
	const char *if_match;     /* ETag the object must still have, or NULL */
	/*
	 * NULL, or filled after the reply headers: size (of the whole object),
	 * etag, mtime; key points at the key argument, content_type is NULL.
	 */
	struct jo_obj_info *info;
	/*
	 * NULL, or gets the user metadata from the GET's reply headers, as
	 * jo_obj_head_meta gives it (free with jo_obj_meta_free); with info set,
	 * info->content_type then points into it. Saves a HEAD per object.
	 */
	char ***meta_out;
};

/*
 * GET a whole object or a byte range, streamed to cb. A ranged GET past the
 * end returns the bytes that exist. go may be NULL (whole object); go->info
 * (may be NULL) gets size/etag/mtime.
 */
int jo_obj_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
	       jo_obj_write_cb cb, void *payload, struct jo_err *err);
/* Convenience: GET into a malloc'd buffer of at most max bytes (JO_EPROTO if larger). */
int jo_obj_get_buf(struct jo_obj *o, const char *key, uint64_t offset, int64_t length,
		   size_t max, uint8_t **out, size_t *len_out, struct jo_err *err);

struct jo_obj_put_opts {
	const char *content_type;           /* NULL: application/octet-stream */
	/*
	 * User metadata: name,value,...,NULL. Names without "x-amz-meta-",
	 * lower-case ASCII; values printable ASCII. s3 sends x-amz-meta-<name>;
	 * the file backend ignores metadata.
	 */
	const char *const *meta;
	bool content_md5;                   /* compute and send Content-MD5 */
	/*
	 * file: the new file's permission bits (mode & 0777, set on the temp
	 * file before the rename: never looser for a moment, nothing followed);
	 * without set_mode 0666 less the umask. For a multipart upload give it
	 * to jo_obj_mpu_create. s3: ignored.
	 */
	bool set_mode;
	uint32_t mode;
	/*
	 * Create only: write the object only if the key is free. An existing
	 * object is never replaced: the put returns JO_EEXIST and leaves it as
	 * it was. file: a temp file (O_CREAT|O_EXCL|O_NOFOLLOW) hard-linked to
	 * the key, link() failing rather than replacing; a symlink at the key is
	 * JO_EUNSUPPORTED (not followed, not replaced). s3: see
	 * jo_obj_create_probe for how the store is asked. Not for directory
	 * markers (keys ending in '/': JO_EINVAL).
	 */
	bool create_only;
};
/* PUT a whole object (s3: one request; file: temp file + rename). po may be NULL. */
int jo_obj_put(struct jo_obj *o, const char *key, const void *data, size_t len,
	       const struct jo_obj_put_opts *po, struct jo_err *err);

/*
 * Create-only puts on S3. A PUT with "If-None-Match: *" is refused (412)
 * when the key exists, atomically, by a store that honours the header
 * (AWS since 2024, SeaweedFS 4.48). A store may also ignore it silently
 * (rclone serve s3 1.75 overwrites) or reject it (501 NotImplemented), and
 * a store that ignores it is the dangerous case: nothing in the reply says
 * the object was replaced. So a create-only put first HEADs the key and
 * PUTs (with the header) only when it is absent ("head-then-put"): never an
 * overwrite of an object that existed at the HEAD, but an object created
 * by someone else between the HEAD and the PUT is replaced on a store that
 * ignores the header. That window only closes where the store honours it:
 *
 * jo_obj_create_probe arms a probe: before the first create-only put into
 * each bucket of the handle, the object prefix + "jfsops-create-probe-<random
 * hex>" is PUT twice with the header and deleted. A 412 on the second PUT
 * means the store honours it: from then on a create-only put is the one
 * conditional PUT ("if-none-match"), atomic and without the HEAD. Anything
 * else (the second PUT overwrote our own probe, the header was rejected, the
 * probe failed) keeps "head-then-put" (without the header where it was
 * rejected). A 409 ConditionalRequestConflict (a concurrent conditional
 * write, per AWS) is retried; a 412 that answers the retry of a PUT whose
 * first attempt may have landed is checked against the object's ETag, so
 * our own earlier attempt is not mistaken for someone else's object.
 *
 * prefix (copied; e.g. "NAME/" of the volume) is where the probe may be
 * written. Best effort: a failed probe only keeps the HEAD. file: nothing
 * to probe. Returns 0 or JO_ENOMEM.
 */
int jo_obj_create_probe(struct jo_obj *o, const char *prefix, struct jo_err *err);

/*
 * How the create-only puts of this handle were checked, for summaries:
 * "link" (file: O_EXCL temp file + link()), "rename-noreplace" (file, on a
 * filesystem without hard links: renameat2(RENAME_NOREPLACE)),
 * "if-none-match" (s3, atomic), "head-then-put" (s3, HEAD first), or "none"
 * (no create-only put yet). When puts were checked in more than one way
 * (shards), the weakest. Static string.
 */
const char *jo_obj_create_check(struct jo_obj *o);

/* HEAD. JO_ENOTFOUND when missing. info->key points at `key`. */
int jo_obj_head(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		struct jo_err *err);

/*
 * HEAD returning user metadata too. *meta_out (caller-owned, free with
 * jo_obj_meta_free) is a NULL-terminated array name,value,...,NULL with names
 * lower-cased and without "x-amz-meta-" (file backend: empty array).
 * info->content_type points into *meta_out's allocation (valid until freed).
 */
int jo_obj_head_meta(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		     char ***meta_out, struct jo_err *err);
void jo_obj_meta_free(char **meta);
/* Value of user metadata `name` in a jo_obj_head_meta array, or NULL. Borrowed. */
const char *jo_obj_meta_get(char *const *meta, const char *name);

/*
 * Server-side copy inside the store (s3: CopyObject with x-amz-copy-source;
 * file: copy via a temp file + rename). src_bucket NULL: the same bucket;
 * otherwise a bucket name on the same endpoint (s3 only). meta NULL keeps the
 * source's metadata (COPY directive); non-NULL replaces it (REPLACE). Objects
 * larger than 5 GiB need multipart copy, which is not offered: JO_EINVAL.
 * A 200 reply with an <Error> body is an error.
 */
struct jo_obj_copy_opts {
	const char *src_bucket;
	const char *const *meta;       /* NULL: COPY; else REPLACE with these */
	const char *content_type;      /* with REPLACE */
	const char *if_match;          /* x-amz-copy-source-if-match, or NULL */
};
int jo_obj_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		const struct jo_obj_copy_opts *co, struct jo_err *err);

/*
 * Multipart upload. Parts are numbered 1..10000; on S3 every part except the
 * last must be >= 5 MiB. upload_id is caller-owned (free()). The file backend
 * keeps parts as hidden temp files next to the key (".jfs.*.tmp.*", which
 * listings skip) and concatenates them on complete.
 */
struct jo_obj_part {
	int number;
	char etag[72];            /* without quotes */
	uint64_t size;            /* list_parts only; ignored by complete */
};
int jo_obj_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
		      char **upload_id_out, struct jo_err *err);
/* etag_out (72 bytes) gets the part's ETag, needed for complete. */
int jo_obj_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			int part_number, const void *data, size_t len, char *etag_out,
			struct jo_err *err);
/* parts in ascending number order. */
int jo_obj_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			const struct jo_obj_part *parts, size_t n, struct jo_err *err);
/* Abort; an unknown upload is success. */
int jo_obj_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
		     struct jo_err *err);
/* Stream the parts uploaded so far (paginated). cb non-zero stops; returned. */
typedef int (*jo_obj_part_cb)(const struct jo_obj_part *part, void *payload);
int jo_obj_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			  jo_obj_part_cb cb, void *payload, struct jo_err *err);

/* DELETE one key. A missing key is success (S3 semantics). */
int jo_obj_delete(struct jo_obj *o, const char *key, struct jo_err *err);

/*
 * Delete many keys: S3 DeleteObjects in requests of up to 1000 keys (file:
 * unlink each). results[i] gets 0 or a JO_E* code per key (not-found counts
 * as 0). The return value is 0 when the requests themselves succeeded, even
 * if some keys failed; check results.
 */
int jo_obj_delete_batch(struct jo_obj *o, const char *const *keys, size_t n,
			int *results, struct jo_err *err);

/*
 * List keys under prefix, in the order the store returns them (S3: byte
 * order on AWS; see sync-anchors for stores that differ), starting after
 * start_after (NULL: from the beginning), paginated and streamed: memory
 * stays bounded by one page. delimiter NULL/"" lists recursively; "/" also
 * reports common prefixes (is_prefix). The file backend lists in S3 byte
 * order and skips its own temp files (".jfs.*.tmp.*"). Callback returning
 * non-zero stops the listing and that value is returned.
 */
typedef int (*jo_obj_list_cb)(const struct jo_obj_info *info, void *payload);
int jo_obj_list(struct jo_obj *o, const char *prefix, const char *start_after,
		const char *delimiter, jo_obj_list_cb cb, void *payload,
		struct jo_err *err);

/*
 * jo_obj_list, at most `page` keys per request (S3 max-keys, 1..1000; 0 or
 * more than 1000: 1000). For a caller that wants only the first key or few
 * (a probe), so that the store does not build and send a page of 1000.
 */
int jo_obj_list_page(struct jo_obj *o, const char *prefix, const char *start_after,
		     const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		     struct jo_err *err);

/*
 * Cut the key range (after, upto] into at most n pieces for listers that
 * run at once: split keys b1 < ... < bk (k < n) with after < b1 and
 * bk < upto give (after, b1], (b1, b2], ..., (bk, upto]; upto NULL stands
 * for the end of `prefix` (after and upto start with prefix). A lister of
 * (lo, hi] lists with start_after = lo and stops at its first key > hi, so
 * the pieces hold every key of the range exactly once, whatever the keys
 * are. The split keys are built from after and the bytes in alphabet
 * (those the keys seen so far use, see jo_obj_key_alphabet_add), from the
 * widest branches down, so they fall where keys are likely. Returns k
 * (0: the range cannot be cut) with *out a malloc'd array of k malloc'd
 * keys in ascending order, or JO_ENOMEM.
 */
int jo_obj_key_split(const char *prefix, const char *after, const char *upto,
		     const bool alphabet[256], int n, char ***out);
/* Add the bytes of s to alphabet (a digit or letter adds its whole class). */
void jo_obj_key_alphabet_add(bool alphabet[256], const char *s);

/* Create the bucket (file: the directory). Existing is success. */
int jo_obj_create_bucket(struct jo_obj *o, struct jo_err *err);

/*
 * Request counters since open (for summaries and benchmarks). requests
 * counts every attempt (retries too); connections the TCP connections the
 * requests had to open (s3; 0 for file): with connections kept alive it
 * stays near the concurrency, however many requests ran.
 */
struct jo_obj_stats {
	uint64_t requests, retries, errors, bytes_in, bytes_out;
	uint64_t connections;
};
void jo_obj_get_stats(struct jo_obj *o, struct jo_obj_stats *out);

#endif
