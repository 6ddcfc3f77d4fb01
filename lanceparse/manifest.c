/* manifest.c: _versions/ listing, manifest decoding, schema (spec §2, §3, §5). */
#include "lanceparse/lance.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dynbuf.h"
#include "common/err.h"
#include "common/opt.h"

/* Largest manifest we accept: a bound on memory for a corrupt length. */
#define LANCE_MAX_MANIFEST (512u << 20)

bool lance_version_parse_name(const char *name, struct lance_version *out)
{
	static const char suf[] = ".manifest";
	size_t n = strlen(name), sl = sizeof(suf) - 1;
	uint64_t v;

	if (n <= sl || n >= sizeof(out->name) || strcmp(name + n - sl, suf) != 0)
		return false;
	memset(out, 0, sizeof(*out));
	memcpy(out->name, name, n + 1);
	if (name[0] == 'd') {
		if (jo_parse_digits(name + 1, n - sl - 1, &v) < 0 || !(v & (UINT64_C(1) << 63)))
			return false;
		out->version = v;
		out->detached = true;
		return true;
	}
	if (jo_parse_digits(name, n - sl, &v) < 0)
		return false;
	if (n - sl == 20) {
		out->v2_name = true;
		out->version = UINT64_MAX - v;
	} else {
		out->version = v;
	}
	return true;
}

struct vlist {
	struct lance_version *v;
	size_t n, cap;
	int oom;
};

static int vlist_cb(const char *name, void *payload)
{
	struct vlist *l = payload;
	struct lance_version v;

	if (!lance_version_parse_name(name, &v))
		return 0;
	if (jo_grow_array(&l->v, &l->cap, l->n + 1, sizeof(*l->v))) {
		l->oom = 1;
		return 1;
	}
	l->v[l->n++] = v;
	return 0;
}

static int vcmp(const void *a, const void *b)
{
	const struct lance_version *x = a, *y = b;

	if (x->version != y->version)
		return x->version < y->version ? -1 : 1;
	/* Same version under both names: V2 first (Lance tries V2 first). */
	return (int)y->v2_name - (int)x->v2_name;
}

int lance_versions_list(struct lance_io *io, struct lance_version **out, size_t *n,
			struct jo_err *err)
{
	struct vlist l = { 0 };
	int rc;

	*out = NULL;
	*n = 0;
	rc = lance_io_list(io, "_versions", vlist_cb, &l, err);
	if (l.oom)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	if (rc == JO_ENOTFOUND)
		rc = jo_err_set(err, JO_ENOTFOUND, "not a Lance dataset: no _versions/ directory");
	if (rc < 0) {
		free(l.v);
		return rc;
	}
	if (l.n == 0) {
		free(l.v);
		return jo_err_set(err, JO_ENOTFOUND, "not a Lance dataset: no manifest in _versions/");
	}
	qsort(l.v, l.n, sizeof(*l.v), vcmp);
	*out = l.v;
	*n = l.n;
	return 0;
}

/* ---------------- decoding ---------------- */

static char *dupstr(const struct lance_pb_field *f)
{
	return strndup((const char *)f->data, f->len);
}

#define NEED_LEN(f, what)                                                            \
	do {                                                                         \
		if ((f)->wt != LANCE_PB_LEN)                                         \
			return jo_err_set(err, JO_EPROTO, "manifest: %s: wrong wire type", what); \
	} while (0)

#define PUSH(arr, n, cap)                                                           \
	do {                                                                        \
		if (jo_grow_array(&(arr), &(cap), (n) + 1, sizeof(*(arr))))         \
			return jo_err_set(err, JO_ENOMEM, "out of memory");         \
		memset(&(arr)[(n)], 0, sizeof(*(arr)));                             \
		(n)++;                                                              \
	} while (0)

/* A map<string, bytes|string> entry: key=1, value=2. */
struct map_kv {
	const uint8_t *k, *v;
	size_t kl, vl;
};

static int map_kv_field(const struct lance_pb_field *e, void *ctx, struct jo_err *err)
{
	struct map_kv *kv = ctx;

	(void)err;
	if (e->wt != LANCE_PB_LEN)
		return 0;
	if (e->num == 1) {
		kv->k = e->data;
		kv->kl = e->len;
	} else if (e->num == 2) {
		kv->v = e->data;
		kv->vl = e->len;
	}
	return 0;
}

static bool eq(const uint8_t *p, size_t n, const char *s)
{
	return p && n == strlen(s) && memcmp(p, s, n) == 0;
}

/* A string field, replacing *out (which may hold an earlier one). */
static int set_str(const struct lance_pb_field *f, char **out, struct jo_err *err)
{
	free(*out);
	if (!(*out = dupstr(f)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int field_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct lance_field *fl = ctx;
	struct map_kv kv = { 0 };
	int rc;

	switch (f->num) {
	case 1: fl->type = (int)f->u; break;
	case 2:
		NEED_LEN(f, "field name");
		return set_str(f, &fl->name, err);
	case 3: fl->id = lance_pb_i32(f->u); break;
	case 4: fl->parent_id = lance_pb_i32(f->u); break;
	case 5:
		NEED_LEN(f, "logical type");
		return set_str(f, &fl->logical_type, err);
	case 6: fl->nullable = f->u != 0; break;
	case 10:
		NEED_LEN(f, "field metadata");
		if ((rc = lance_pb_each(f->data, f->len, map_kv_field, &kv, err)) < 0)
			return rc;
		if (eq(kv.k, kv.kl, "lance-encoding:blob") && eq(kv.v, kv.vl, "true"))
			fl->blob_v1 = true;
		else if (eq(kv.k, kv.kl, "lance-encoding:packed") && eq(kv.v, kv.vl, "true"))
			fl->packed = true;
		else if (eq(kv.k, kv.kl, "ARROW:extension:name") && eq(kv.v, kv.vl, "lance.blob.v2"))
			fl->blob_v2 = true;
		break;
	default: break;
	}
	return 0;
}

static int decode_field(const uint8_t *d, size_t len, struct lance_field *fl, struct jo_err *err)
{
	int rc;

	fl->parent_id = -1;
	if ((rc = lance_pb_each(d, len, field_field, fl, err)) < 0)
		return rc;
	if (!fl->name && !(fl->name = strdup("")))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!fl->logical_type && !(fl->logical_type = strdup("")))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static int datafile_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct lance_datafile *df = ctx;

	switch (f->num) {
	case 1:
		NEED_LEN(f, "data file path");
		return set_str(f, &df->path, err);
	case 2: return lance_pb_repeated_i32(f, &df->fields, &df->nfields, err);
	case 3: return lance_pb_repeated_i32(f, &df->column_indices, &df->ncolumn_indices, err);
	case 4: df->major = (uint32_t)f->u; break;
	case 5: df->minor = (uint32_t)f->u; break;
	case 6: df->file_size = f->u; break;
	case 7: df->has_base = true; df->base_id = (uint32_t)f->u; break;
	default: break;
	}
	return 0;
}

static int decode_datafile(const uint8_t *d, size_t len, struct lance_datafile *df,
			   struct jo_err *err)
{
	int rc;

	if ((rc = lance_pb_each(d, len, datafile_field, df, err)) < 0)
		return rc;
	if (!df->path || !df->path[0])
		return jo_err_set(err, JO_EPROTO, "manifest: data file without a path");
	if (strstr(df->path, "..") || df->path[0] == '/')
		return jo_err_set(err, JO_EPROTO, "manifest: unsafe data file path '%s'", df->path);
	return 0;
}

static int deletion_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct lance_deletion *del = ctx;

	(void)err;
	switch (f->num) {
	case 1: del->file_type = (int)f->u; break;
	case 2: del->read_version = f->u; break;
	case 3: del->id = f->u; break;
	case 4: del->num_deleted = f->u; break;
	case 7: del->has_base = true; del->base_id = (uint32_t)f->u; break;
	default: break;
	}
	return 0;
}

/* A fragment being decoded: its data files array grows by cap. */
struct frag_dec {
	struct lance_fragment *fr;
	size_t cap;
};

/* One more data file of the fragment, from the DataFile message f. */
static int frag_add_file(struct frag_dec *fd, const struct lance_pb_field *f, bool overlay,
			 struct jo_err *err)
{
	struct lance_fragment *fr = fd->fr;

	PUSH(fr->files, fr->nfiles, fd->cap);
	fr->files[fr->nfiles - 1].overlay = overlay;
	return decode_datafile(f->data, f->len, &fr->files[fr->nfiles - 1], err);
}

/* DataOverlayFile { data_file = 1 }: one more file holding column values. */
static int overlay_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	if (f->num != 1)
		return 0;
	NEED_LEN(f, "overlay data file");
	return frag_add_file(ctx, f, true, err);
}

static int fragment_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct frag_dec *fd = ctx;
	struct lance_fragment *fr = fd->fr;

	switch (f->num) {
	case 1: fr->id = f->u; break;
	case 2:
		NEED_LEN(f, "data file");
		return frag_add_file(fd, f, false, err);
	case 3:
		NEED_LEN(f, "deletion file");
		fr->del.present = true;
		return lance_pb_each(f->data, f->len, deletion_field, &fr->del, err);
	case 4: fr->physical_rows = f->u; break;
	case 11:
		NEED_LEN(f, "overlay");
		return lance_pb_each(f->data, f->len, overlay_field, fd, err);
	default: break;
	}
	return 0;
}

static int decode_fragment(const uint8_t *d, size_t len, struct lance_fragment *fr,
			   struct jo_err *err)
{
	struct frag_dec fd = { fr, 0 };

	return lance_pb_each(d, len, fragment_field, &fd, err);
}

static int base_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct lance_base_path *b = ctx;

	switch (f->num) {
	case 1: b->id = (uint32_t)f->u; break;
	case 3: b->is_dataset_root = f->u != 0; break;
	case 4:
		NEED_LEN(f, "base path");
		return set_str(f, &b->path, err);
	default: break;
	}
	return 0;
}

/* "library version" of a WriterVersion or the version of a DataStorageFormat:
 * field 2, a string */
static int version_field(const struct lance_pb_field *e, void *ctx, struct jo_err *err)
{
	if (e->num == 2 && e->wt == LANCE_PB_LEN)
		return set_str(e, ctx, err);
	return 0;
}

/* A manifest being decoded: its arrays grow by these. */
struct manifest_dec {
	struct lance_manifest *m;
	size_t capf, capfr, capb;
};

static int manifest_field(const struct lance_pb_field *f, void *ctx, struct jo_err *err)
{
	struct manifest_dec *md = ctx;
	struct lance_manifest *m = md->m;

	switch (f->num) {
	case 1:
		NEED_LEN(f, "schema field");
		PUSH(m->fields, m->nfields, md->capf);
		return decode_field(f->data, f->len, &m->fields[m->nfields - 1], err);
	case 2:
		NEED_LEN(f, "fragment");
		PUSH(m->frags, m->nfrags, md->capfr);
		if (decode_fragment(f->data, f->len, &m->frags[m->nfrags - 1], err) < 0)
			return jo_err_wrap(err, "fragment #%zu", m->nfrags - 1);
		break;
	case 3: m->version = f->u; break;
	case 9: m->reader_flags = f->u; break;
	case 10: m->writer_flags = f->u; break;
	case 13:
		NEED_LEN(f, "writer version");
		return lance_pb_each(f->data, f->len, version_field, &m->writer, err);
	case 15:
		NEED_LEN(f, "data format");
		return lance_pb_each(f->data, f->len, version_field, &m->format_version, err);
	case 18:
		NEED_LEN(f, "base path");
		PUSH(m->bases, m->nbases, md->capb);
		return lance_pb_each(f->data, f->len, base_field, &m->bases[m->nbases - 1], err);
	default: break;
	}
	return 0;
}

static int decode_manifest_msg(const uint8_t *d, size_t len, struct lance_manifest *m,
			       struct jo_err *err)
{
	struct manifest_dec md = { m, 0, 0, 0 };
	int rc;

	if ((rc = lance_pb_each(d, len, manifest_field, &md, err)) < 0)
		return rc;
	/* Every parent id must name a field: a dangling one means corruption. */
	for (size_t i = 0; i < m->nfields; i++) {
		int32_t p = m->fields[i].parent_id;
		if (p != -1 && lance_field_index(m, p) < 0)
			return jo_err_set(err, JO_EPROTO, "manifest: field '%s' has unknown parent id %d",
					  m->fields[i].name, (int)p);
		if (p == m->fields[i].id)
			return jo_err_set(err, JO_EPROTO, "manifest: field '%s' is its own parent",
					  m->fields[i].name);
	}
	return 0;
}

static uint64_t rd_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

int lance_manifest_decode(const uint8_t *buf, size_t len, struct lance_manifest **out,
			  struct jo_err *err)
{
	struct lance_manifest *m;
	uint64_t pos, mlen;
	int rc;

	*out = NULL;
	if (len < 16)
		return jo_err_set(err, JO_EPROTO, "manifest is truncated (%zu bytes)", len);
	if (memcmp(buf + len - 4, "LANC", 4) != 0)
		return jo_err_set(err, JO_EPROTO, "manifest has no LANC magic");
	pos = rd_le(buf + len - 16, 8);
	if (pos > len - 16 || len - 16 - pos < 4)
		return jo_err_set(err, JO_EPROTO, "manifest position %" PRIu64 " is outside the file",
				  pos);
	mlen = rd_le(buf + pos, 4);
	if (mlen != len - 16 - pos - 4)
		return jo_err_set(err, JO_EPROTO,
				  "manifest length %" PRIu64 " does not end at the footer", mlen);
	if (!(m = calloc(1, sizeof(*m))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	m->manifest_pos = pos;
	m->manifest_size = len;
	if ((rc = decode_manifest_msg(buf + pos + 4, (size_t)mlen, m, err)) < 0) {
		lance_manifest_free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static int load_named(struct lance_io *io, const char *name, struct lance_manifest **out,
		      struct jo_err *err)
{
	char rel[96];
	uint64_t size;
	uint8_t *buf;
	int rc;

	snprintf(rel, sizeof(rel), "_versions/%s", name);
	if ((rc = lance_io_size(io, rel, &size, err)) < 0)
		return rc;
	if (size > LANCE_MAX_MANIFEST)
		return jo_err_set(err, JO_EPROTO, "manifest '%s' is too large (%" PRIu64 " bytes)",
				  rel, size);
	if (!(buf = malloc(size ? size : 1)))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = lance_io_pread(io, rel, buf, (size_t)size, 0, err);
	if (rc == 0)
		rc = lance_manifest_decode(buf, (size_t)size, out, err);
	free(buf);
	if (rc < 0)
		return jo_err_wrap(err, "%s", rel);
	if (!((*out)->manifest_path = strdup(rel))) {
		lance_manifest_free(*out);
		*out = NULL;
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

int lance_manifest_load(struct lance_io *io, uint64_t version, struct lance_manifest **out,
			struct jo_err *err)
{
	struct lance_version *vs;
	size_t n;
	long pick = -1;
	int rc;

	*out = NULL;
	if ((rc = lance_versions_list(io, &vs, &n, err)) < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (version == 0) {
			if (!vs[i].detached)
				pick = (long)i; /* sorted ascending: the last attached one */
		} else if (vs[i].version == version) {
			pick = (long)i; /* V2 names sort first: take the first match */
			break;
		}
	}
	if (pick < 0) {
		rc = version ? jo_err_set(err, JO_ENOTFOUND, "version %" PRIu64 " does not exist",
					  version)
			     : jo_err_set(err, JO_ENOTFOUND, "not a Lance dataset: no attached version");
		free(vs);
		return rc;
	}
	rc = load_named(io, vs[pick].name, out, err);
	if (rc == 0 && (*out)->version != vs[pick].version) {
		rc = jo_err_set(err, JO_EPROTO, "_versions/%s holds version %" PRIu64, vs[pick].name,
				(*out)->version);
		lance_manifest_free(*out);
		*out = NULL;
	}
	free(vs);
	return rc;
}

void lance_manifest_free(struct lance_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfields; i++) {
		free(m->fields[i].name);
		free(m->fields[i].logical_type);
	}
	free(m->fields);
	for (size_t i = 0; i < m->nfrags; i++) {
		for (size_t j = 0; j < m->frags[i].nfiles; j++) {
			free(m->frags[i].files[j].path);
			free(m->frags[i].files[j].fields);
			free(m->frags[i].files[j].column_indices);
		}
		free(m->frags[i].files);
	}
	free(m->frags);
	for (size_t i = 0; i < m->nbases; i++)
		free(m->bases[i].path);
	free(m->bases);
	free(m->manifest_path);
	free(m->format_version);
	free(m->writer);
	free(m);
}

long lance_field_index(const struct lance_manifest *m, int32_t id)
{
	for (size_t i = 0; i < m->nfields; i++)
		if (m->fields[i].id == id)
			return (long)i;
	return -1;
}

int lance_field_resolve(const struct lance_manifest *m, const char *name, size_t *idx,
			struct jo_err *err)
{
	const char *p = name;
	int32_t parent = -1;
	long found = -1;

	if (!*name)
		return jo_err_set(err, JO_EINVAL, "empty column name");
	/* Exact match of a top-level name wins (names may contain dots). */
	for (size_t i = 0; i < m->nfields; i++)
		if (m->fields[i].parent_id == -1 && strcmp(m->fields[i].name, name) == 0) {
			*idx = i;
			return 0;
		}
	while (*p) {
		const char *dot = strchr(p, '.');
		size_t len = dot ? (size_t)(dot - p) : strlen(p);
		found = -1;
		for (size_t i = 0; i < m->nfields; i++)
			if (m->fields[i].parent_id == parent && strlen(m->fields[i].name) == len &&
			    memcmp(m->fields[i].name, p, len) == 0) {
				found = (long)i;
				break;
			}
		if (found < 0)
			return jo_err_set(err, JO_ENOTFOUND, "column '%s' does not exist", name);
		parent = m->fields[found].id;
		if (!dot)
			break;
		p = dot + 1;
	}
	if (found < 0)
		return jo_err_set(err, JO_ENOTFOUND, "column '%s' does not exist", name);
	*idx = (size_t)found;
	return 0;
}
