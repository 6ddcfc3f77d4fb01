/*
 * object_internal.h: the backend vtable behind struct jo_obj, and helpers
 * shared by the backends (string buffer, URL coding, S3 XML parsers).
 * Not for use outside common/object and its unit tests.
 */
#ifndef JO_OBJECT_INTERNAL_H
#define JO_OBJECT_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dynbuf.h"
#include "common/object/object.h"

struct jo_err;

/* Every operation gets validated arguments from object.c; err is cleared. */
struct jo_obj_ops {
	int (*get)(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		   jo_obj_write_cb cb, void *payload, struct jo_err *err);
	int (*put)(struct jo_obj *o, const char *key, const void *data, size_t len,
		   const struct jo_obj_put_opts *po, struct jo_err *err);
	/* meta_out NULL: plain HEAD. */
	int (*head)(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		    char ***meta_out, struct jo_err *err);
	int (*del)(struct jo_obj *o, const char *key, struct jo_err *err);
	int (*delete_batch)(struct jo_obj *o, const char *const *keys, size_t n,
			    int *results, struct jo_err *err);
	/* page: keys per request (S3 max-keys), 0 for the backend's default */
	int (*list)(struct jo_obj *o, const char *prefix, const char *start_after,
		    const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		    struct jo_err *err);
	int (*create_bucket)(struct jo_obj *o, struct jo_err *err);
	int (*copy)(struct jo_obj *o, const char *src_key, const char *dst_key,
		    const struct jo_obj_copy_opts *co, struct jo_err *err);
	int (*mpu_create)(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			  char **upload_id_out, struct jo_err *err);
	int (*mpu_put_part)(struct jo_obj *o, const char *key, const char *upload_id,
			    int part_number, const void *data, size_t len, char *etag_out,
			    struct jo_err *err);
	int (*mpu_complete)(struct jo_obj *o, const char *key, const char *upload_id,
			    const struct jo_obj_part *parts, size_t n, struct jo_err *err);
	int (*mpu_abort)(struct jo_obj *o, const char *key, const char *upload_id,
			 struct jo_err *err);
	int (*mpu_list_parts)(struct jo_obj *o, const char *key, const char *upload_id,
			      jo_obj_part_cb cb, void *payload, struct jo_err *err);
	/* create-only puts (jo_obj_create_probe); NULL: nothing to arm */
	int (*create_probe)(struct jo_obj *o, const char *prefix, struct jo_err *err);
	/* the weakest enum jo_obj_create_method of the create-only puts so far */
	int (*create_used)(struct jo_obj *o);
	/* the description of bucket i (jo_obj_describe_bucket); NULL: one bucket */
	const char *(*bucket_desc)(const struct jo_obj *o, int i);
	void (*close)(struct jo_obj *o);
};

/* How a create-only put was checked, weakest last (see jo_obj_create_check). */
enum jo_obj_create_method {
	JO_CREATE_NONE = 0,
	JO_CREATE_LINK,
	JO_CREATE_RENAME_NOREPLACE,
	JO_CREATE_IF_NONE_MATCH,
	JO_CREATE_HEAD_THEN_PUT,
};

/* Record that a create-only put used method m (keeps the weakest). */
void jo_obj_create_note(atomic_int *used, int m);

struct jo_obj_counters {
	atomic_uint_fast64_t requests, retries, errors, bytes_in, bytes_out, connections;
};

struct jo_obj {
	const struct jo_obj_ops *ops;
	void *impl;
	/* Points at own_ctr, or at the sharding parent's counters. */
	struct jo_obj_counters *ctr;
	struct jo_obj_counters own_ctr;
	char desc[600];
};

/* Backend constructors: fill o->ops, o->impl, o->desc. */
int jo_obj_file_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err);
int jo_obj_s3_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err);
int jo_obj_shard_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err);

/* FNV-1a 32-bit of a string (JuiceFS shard selection). */
uint32_t jo_obj_fnv1a32(const char *s);

/*
 * A delete batch cut into sub-batches (S3's 1,000-key requests, a shard's
 * keys): one sub-batch's keys, each one's index in the whole batch, and its
 * results. init makes room for cap keys (0, or JO_ENOMEM with err set);
 * add queues a key; done copies the sub-batch's results (rc instead for
 * all, where the sub-batch failed as a whole) into the whole batch's and
 * empties it; release accepts a failed init.
 */
struct jo_obj_sub {
	const char **keys;
	size_t *idx;
	int *res;
	size_t n;
};
int jo_obj_sub_init(struct jo_obj_sub *b, size_t cap, struct jo_err *err);
void jo_obj_sub_add(struct jo_obj_sub *b, const char *key, size_t idx);
void jo_obj_sub_done(struct jo_obj_sub *b, int rc, int *results);
void jo_obj_sub_release(struct jo_obj_sub *b);

/* Buffers: struct jo_dynbuf (common/dynbuf.h). */

/* SigV4 URI encoding of a byte string (unreserved A-Za-z0-9-_.~ kept). */
int jo_obj_uri_encode(struct jo_dynbuf *b, const char *s, bool keep_slash);
/*
 * Decode %XX (and '+' as space when plus_space); malloc'd, NULL on bad input
 * (a cut or non-hex escape, or %00: a NUL would silently shorten the string).
 */
char *jo_obj_url_decode(const char *s, bool plus_space);
/* XML-escape into b. */
int jo_obj_xml_escape(struct jo_dynbuf *b, const char *s);

/* ---- S3 XML replies (obj_xml.c, expat) ---- */
struct jo_s3_entry {
	char *key;
	uint64_t size;
	int64_t mtime;
	int32_t mtime_nsec;
	char etag[72];
	bool is_prefix;
};

struct jo_s3_list_page {
	struct jo_s3_entry *entries;  /* Contents and CommonPrefixes merged, by key */
	size_t n, cap;
	bool truncated;
	char *next_token;             /* V2 NextContinuationToken */
	char *next_marker;            /* V1 NextMarker (decoded) */
};
/* Parse ListBucketResult (V1 or V2); keys URL-decoded when EncodingType=url. */
int jo_s3xml_parse_list(const char *xml, size_t len, struct jo_s3_list_page *out,
			struct jo_err *err);
void jo_s3_list_page_release(struct jo_s3_list_page *p);

/* Parse DeleteResult: cb for each <Deleted> (code NULL) and <Error>. */
typedef int (*jo_s3_delete_cb)(const char *key, const char *code, const char *message,
			       void *payload);
int jo_s3xml_parse_delete(const char *xml, size_t len, jo_s3_delete_cb cb, void *payload,
			  struct jo_err *err);

/*
 * If the body is an <Error> document: copy Code/Message (truncated) and
 * return 1; 0 when it is another well-formed document; JO_EPROTO if malformed.
 */
int jo_s3xml_parse_error(const char *xml, size_t len, char *code, size_t code_size,
			 char *message, size_t message_size);

/* Text of the first element `name` below the root (e.g. "UploadId"); malloc'd. */
int jo_s3xml_find(const char *xml, size_t len, const char *root, const char *name,
		  char **out, struct jo_err *err);

/* ListPartsResult. */
struct jo_s3_parts_page {
	struct jo_obj_part *parts;
	size_t n, cap;
	bool truncated;
	int next_marker;
};
int jo_s3xml_parse_parts(const char *xml, size_t len, struct jo_s3_parts_page *out,
			 struct jo_err *err);

/* ISO 8601 "2009-10-12T17:50:30.000Z" -> unix seconds + nsec; -1 when bad. */
int jo_obj_parse_iso8601(const char *s, int64_t *sec, int32_t *nsec);

/* ---- bucket strings (obj_s3.c) ---- */
struct jo_s3_loc {
	bool https;
	char host[256];       /* endpoint host[:port], without the bucket label */
	char bucket[256];
	char region[64];
	bool vhost;           /* virtual-hosted addressing */
	bool insecure;        /* tls-insecure-skip-verify=true */
	bool disable_checksum;
};
/* storage "s3" or "minio"; opts fields region/addressing/insecure override. */
int jo_s3_parse_bucket(const char *storage, const char *bucket, const struct jo_obj_opts *opts,
		       struct jo_s3_loc *out, struct jo_err *err);

#endif
