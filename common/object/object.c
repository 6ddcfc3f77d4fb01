/* object.c: argument checks and dispatch to the backend vtable. */
#include "common/object/object.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/object/object_internal.h"

uint32_t jo_obj_fnv1a32(const char *s)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

int jo_obj_open(struct jo_obj **out, const struct jo_obj_opts *opts, struct jo_err *err)
{
	struct jo_obj *o;
	int rc;

	*out = NULL;
	jo_err_clear(err);
	if (!opts || !opts->storage || !opts->bucket || !*opts->bucket)
		return jo_err_set(err, JO_EINVAL, "object store: storage and bucket are required");
	o = calloc(1, sizeof(*o));
	if (!o)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	o->ctr = &o->own_ctr;
	if (opts->shards > 1)
		rc = jo_obj_shard_open(o, opts, err);
	else if (strcasecmp(opts->storage, "file") == 0)
		rc = jo_obj_file_open(o, opts, err);
	else if (strcasecmp(opts->storage, "s3") == 0 || strcasecmp(opts->storage, "minio") == 0)
		rc = jo_obj_s3_open(o, opts, err);
	else
		rc = jo_err_set(err, JO_EUNSUPPORTED, "object storage '%s' is not supported",
				opts->storage);
	if (rc) {
		free(o);
		return rc;
	}
	*out = o;
	return 0;
}

void jo_obj_close(struct jo_obj *o)
{
	if (!o)
		return;
	if (o->ops && o->ops->close)
		o->ops->close(o);
	free(o);
}

const char *jo_obj_describe(const struct jo_obj *o)
{
	return o ? o->desc : "";
}

const char *jo_obj_describe_bucket(const struct jo_obj *o, int i)
{
	if (!o)
		return NULL;
	if (o->ops->bucket_desc)
		return o->ops->bucket_desc(o, i);
	return i == 0 ? o->desc : NULL;
}

static int check_key(const char *what, const char *key, struct jo_err *err)
{
	jo_err_clear(err);
	if (!key || !*key)
		return jo_err_set(err, JO_EINVAL, "%s: empty object key", what);
	if (strlen(key) > 1024)
		return jo_err_set(err, JO_EINVAL, "%s: object key longer than 1024 bytes", what);
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "%s '%s': canceled", what, key);
	return 0;
}

static int unsupported(struct jo_obj *o, const char *what, struct jo_err *err)
{
	return jo_err_set(err, JO_EUNSUPPORTED, "%s is not supported by %s", what, o->desc);
}

int jo_obj_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
	       jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	struct jo_obj_get_opts whole = { .offset = 0, .length = -1 };
	int rc = check_key("get", key, err);

	if (go && go->meta_out)
		*go->meta_out = NULL;
	if (rc)
		return rc;
	if (!cb)
		return jo_err_set(err, JO_EINVAL, "get: no sink");
	if (go && go->length == 0 && !go->meta_out) {
		/* Nothing to read: an empty range is not expressible in HTTP. */
		return 0;
	}
	rc = o->ops->get(o, key, go ? go : &whole, cb, payload, err);
	if (rc == 0 && go && go->meta_out && !*go->meta_out) {
		/* a backend without user metadata (file): an empty list */
		*go->meta_out = calloc(1, sizeof(char *));
		if (!*go->meta_out)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return rc;
}

struct membuf {
	struct jo_dynbuf b;
	bool over;
};

static int membuf_write(const void *data, size_t len, void *payload)
{
	struct membuf *m = payload;
	int rc;

	/* "at most max bytes": 0 is none at all, not dynbuf's "unlimited" */
	rc = m->b.max == 0 && len ? JO_EPROTO : jo_dynbuf_add(&m->b, data, len);
	if (rc == JO_EPROTO)
		m->over = true;
	return rc;
}

int jo_obj_get_buf(struct jo_obj *o, const char *key, uint64_t offset, int64_t length,
		   size_t max, uint8_t **out, size_t *len_out, struct jo_err *err)
{
	struct membuf m = { .b = JO_DYNBUF_INIT(max) };
	struct jo_obj_get_opts go = { .offset = offset, .length = length };
	int rc;

	*out = NULL;
	if (len_out)
		*len_out = 0;
	rc = jo_obj_get(o, key, &go, membuf_write, &m, err);
	if (m.over)
		jo_err_set(err, JO_EPROTO, "get '%s' in %s: object larger than %zu bytes", key,
			   o->desc, max);
	if (rc) {
		jo_dynbuf_release(&m.b);
		return rc;
	}
	*out = (uint8_t *)jo_dynbuf_detach(&m.b, len_out);
	if (!*out)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

int jo_obj_put(struct jo_obj *o, const char *key, const void *data, size_t len,
	       const struct jo_obj_put_opts *po, struct jo_err *err)
{
	struct jo_obj_put_opts none = { 0 };
	int rc = check_key("put", key, err);

	if (rc)
		return rc;
	if (!data && len)
		return jo_err_set(err, JO_EINVAL, "put: NULL data");
	if (po && po->create_only && key[strlen(key) - 1] == '/')
		return jo_err_set(err, JO_EINVAL, "put '%s': a directory marker cannot be created only",
				  key);
	return o->ops->put(o, key, data ? data : "", len, po ? po : &none, err);
}

int jo_obj_create_probe(struct jo_obj *o, const char *prefix, struct jo_err *err)
{
	jo_err_clear(err);
	if (!o->ops->create_probe)
		return 0;
	return o->ops->create_probe(o, prefix ? prefix : "", err);
}

void jo_obj_create_note(atomic_int *used, int m)
{
	int cur = atomic_load(used);

	while (cur < m && !atomic_compare_exchange_weak(used, &cur, m))
		;
}

const char *jo_obj_create_check(struct jo_obj *o)
{
	switch (o->ops->create_used ? o->ops->create_used(o) : JO_CREATE_NONE) {
	case JO_CREATE_LINK: return "link";
	case JO_CREATE_RENAME_NOREPLACE: return "rename-noreplace";
	case JO_CREATE_IF_NONE_MATCH: return "if-none-match";
	case JO_CREATE_HEAD_THEN_PUT: return "head-then-put";
	}
	return "none";
}

int jo_obj_head(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		struct jo_err *err)
{
	int rc = check_key("head", key, err);

	if (rc)
		return rc;
	memset(info, 0, sizeof(*info));
	info->key = key;
	return o->ops->head(o, key, info, NULL, err);
}

int jo_obj_head_meta(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		     char ***meta_out, struct jo_err *err)
{
	int rc;

	*meta_out = NULL;
	rc = check_key("head", key, err);
	if (rc)
		return rc;
	memset(info, 0, sizeof(*info));
	info->key = key;
	return o->ops->head(o, key, info, meta_out, err);
}

void jo_obj_meta_free(char **meta)
{
	/* One allocation holds the pointer array and the strings. */
	free(meta);
}

const char *jo_obj_meta_get(char *const *meta, const char *name)
{
	if (!meta)
		return NULL;
	for (size_t i = 0; meta[i] && meta[i + 1]; i += 2)
		if (strcasecmp(meta[i], name) == 0)
			return meta[i + 1];
	return NULL;
}

int jo_obj_delete(struct jo_obj *o, const char *key, struct jo_err *err)
{
	int rc = check_key("delete", key, err);

	if (rc)
		return rc;
	return o->ops->del(o, key, err);
}

int jo_obj_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			struct jo_err *err)
{
	jo_err_clear(err);
	if (n == 0)
		return 0;
	if (!keys || !results)
		return jo_err_set(err, JO_EINVAL, "delete: no keys or results");
	for (size_t i = 0; i < n; i++) {
		if (!keys[i] || !*keys[i] || strlen(keys[i]) > 1024)
			return jo_err_set(err, JO_EINVAL, "delete: bad key at index %zu", i);
		results[i] = 0;
	}
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "delete: canceled");
	return o->ops->delete_batch(o, keys, n, results, err);
}

int jo_obj_list_page(struct jo_obj *o, const char *prefix, const char *start_after,
		     const char *delimiter, int page, jo_obj_list_cb cb, void *payload,
		     struct jo_err *err)
{
	jo_err_clear(err);
	if (!cb)
		return jo_err_set(err, JO_EINVAL, "list: no callback");
	if (jo_cancelled())
		return jo_err_set(err, JO_ECANCELED, "list: canceled");
	if (page <= 0 || page > 1000)
		page = 0;
	return o->ops->list(o, prefix ? prefix : "", start_after && *start_after ? start_after : NULL,
			    delimiter && *delimiter ? delimiter : NULL, page, cb, payload, err);
}

int jo_obj_list(struct jo_obj *o, const char *prefix, const char *start_after,
		const char *delimiter, jo_obj_list_cb cb, void *payload, struct jo_err *err)
{
	return jo_obj_list_page(o, prefix, start_after, delimiter, 0, cb, payload, err);
}

int jo_obj_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	jo_err_clear(err);
	return o->ops->create_bucket(o, err);
}

int jo_obj_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	struct jo_obj_copy_opts none = { 0 };
	int rc = check_key("copy", src_key, err);

	if (rc == 0)
		rc = check_key("copy", dst_key, err);
	if (rc)
		return rc;
	if (!o->ops->copy)
		return unsupported(o, "copy", err);
	return o->ops->copy(o, src_key, dst_key, co ? co : &none, err);
}

int jo_obj_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
		      char **upload_id_out, struct jo_err *err)
{
	struct jo_obj_put_opts none = { 0 };
	int rc = check_key("multipart create", key, err);

	*upload_id_out = NULL;
	if (rc)
		return rc;
	if (!o->ops->mpu_create)
		return unsupported(o, "multipart upload", err);
	return o->ops->mpu_create(o, key, po ? po : &none, upload_id_out, err);
}

int jo_obj_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			int part_number, const void *data, size_t len, char *etag_out,
			struct jo_err *err)
{
	int rc = check_key("upload part", key, err);

	if (rc)
		return rc;
	if (!upload_id || part_number < 1 || part_number > 10000 || (!data && len))
		return jo_err_set(err, JO_EINVAL, "upload part '%s': bad arguments", key);
	if (!o->ops->mpu_put_part)
		return unsupported(o, "multipart upload", err);
	etag_out[0] = '\0';
	return o->ops->mpu_put_part(o, key, upload_id, part_number, data ? data : "", len,
				    etag_out, err);
}

int jo_obj_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	int rc = check_key("complete multipart", key, err);

	if (rc)
		return rc;
	if (!upload_id || !parts || n == 0 || n > 10000)
		return jo_err_set(err, JO_EINVAL, "complete multipart '%s': bad arguments", key);
	for (size_t i = 1; i < n; i++)
		if (parts[i].number <= parts[i - 1].number)
			return jo_err_set(err, JO_EINVAL,
					  "complete multipart '%s': parts not in ascending order", key);
	if (!o->ops->mpu_complete)
		return unsupported(o, "multipart upload", err);
	return o->ops->mpu_complete(o, key, upload_id, parts, n, err);
}

int jo_obj_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
		     struct jo_err *err)
{
	jo_err_clear(err);
	if (!key || !*key || !upload_id)
		return jo_err_set(err, JO_EINVAL, "abort multipart: bad arguments");
	if (!o->ops->mpu_abort)
		return unsupported(o, "multipart upload", err);
	return o->ops->mpu_abort(o, key, upload_id, err);
}

int jo_obj_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			  jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	int rc = check_key("list parts", key, err);

	if (rc)
		return rc;
	if (!upload_id || !cb)
		return jo_err_set(err, JO_EINVAL, "list parts '%s': bad arguments", key);
	if (!o->ops->mpu_list_parts)
		return unsupported(o, "multipart upload", err);
	return o->ops->mpu_list_parts(o, key, upload_id, cb, payload, err);
}

void jo_obj_get_stats(struct jo_obj *o, struct jo_obj_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!o)
		return;
	out->requests = atomic_load(&o->ctr->requests);
	out->retries = atomic_load(&o->ctr->retries);
	out->errors = atomic_load(&o->ctr->errors);
	out->bytes_in = atomic_load(&o->ctr->bytes_in);
	out->bytes_out = atomic_load(&o->ctr->bytes_out);
	out->connections = atomic_load(&o->ctr->connections);
}
