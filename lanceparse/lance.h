/*
 * lance.h: read a Lance dataset (manifest, schema, fragments, data files)
 * and compute the byte ranges a scan of selected columns reads.
 *
 * Reference: ../shared/spec/lance-format.md. Everything reads files through
 * a small reader interface (struct lance_io) so that a local directory, a
 * path inside a JuiceFS volume or an S3 prefix can sit behind it.
 *
 * Errors: 0 or a negative JO_E* code with details in a caller-owned
 * struct jo_err. JO_EPROTO = corrupt/truncated data, JO_ENOTFOUND = missing
 * dataset, version or column. Nothing here prints or exits.
 */
#ifndef JO_LANCE_H
#define JO_LANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;

/* ------------------------------------------------------------------ */
/* Protobuf wire format (spec §4)                                      */
/* ------------------------------------------------------------------ */

/* A cursor over a message's bytes. Borrowed: the bytes outlive it. */
struct lance_pb {
	const uint8_t *p;
	const uint8_t *end;
};

enum lance_pb_wt { LANCE_PB_VARINT = 0, LANCE_PB_I64 = 1, LANCE_PB_LEN = 2,
		   LANCE_PB_I32 = 5 };

/* One decoded key/value pair. For LEN fields data/len point into the message. */
struct lance_pb_field {
	uint32_t num;
	int wt;
	uint64_t u;          /* VARINT, I64, I32 values */
	const uint8_t *data; /* LEN payload */
	size_t len;
};

static inline void lance_pb_init(struct lance_pb *r, const void *data, size_t len)
{
	r->p = (const uint8_t *)data;
	r->end = r->p + len;
}
/* Read a varint (at most 10 bytes). JO_EPROTO on truncation or overlong. */
int lance_pb_varint(struct lance_pb *r, uint64_t *out, struct jo_err *err);
/*
 * Read the next field. Returns 1 with *f filled, 0 at the end of the
 * message, JO_EPROTO on truncation, groups (3/4), unknown wire types or
 * field number 0.
 */
int lance_pb_next(struct lance_pb *r, struct lance_pb_field *f, struct jo_err *err);
/*
 * Hand every field of the message data[0..len) to fn, in order. 0 at the
 * end; a decoding error or fn's first negative result stops it and is
 * returned.
 */
typedef int (*lance_pb_field_fn)(const struct lance_pb_field *f, void *ctx, struct jo_err *err);
int lance_pb_each(const void *data, size_t len, lance_pb_field_fn fn, void *ctx,
		  struct jo_err *err);
/* Zigzag decoding (sint64); unused by Lance's protos but part of the wire format. */
static inline int64_t lance_pb_zigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}
/* An int32 field: the low 32 bits of a (possibly sign-extended) varint. */
static inline int32_t lance_pb_i32(uint64_t v)
{
	return (int32_t)(uint32_t)(v & 0xffffffffu);
}
/*
 * Append the values of a repeated integer field (packed LEN or one unpacked
 * VARINT) to *arr (realloc'd, *n updated). JO_EPROTO on bad data.
 */
int lance_pb_repeated_u64(const struct lance_pb_field *f, uint64_t **arr, size_t *n,
			  struct jo_err *err);
int lance_pb_repeated_i32(const struct lance_pb_field *f, int32_t **arr, size_t *n,
			  struct jo_err *err);

/* ------------------------------------------------------------------ */
/* Reader interface                                                    */
/* ------------------------------------------------------------------ */

struct lance_io;
/* Called for each entry name of a listed directory; non-zero stops. */
typedef int (*lance_io_list_cb)(const char *name, void *payload);

struct lance_io_ops {
	/* Size of file rel (relative to the dataset root). JO_ENOTFOUND when absent. */
	int (*size)(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err);
	/* Read exactly len bytes at off; JO_EPROTO when the file is shorter. */
	int (*pread)(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		     struct jo_err *err);
	/* List the names in directory rel. JO_ENOTFOUND when absent. */
	int (*list)(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		    struct jo_err *err);
	void (*close)(struct lance_io *io);
};

struct lance_io {
	const struct lance_io_ops *ops;
	/* ops->pread may run from several threads at once (the object store's) */
	bool concurrent_pread;
	uint64_t reads;      /* pread calls (statistics) */
	uint64_t bytes;      /* bytes read */
};

/*
 * Open a reader on a local dataset directory. JO_ENOTFOUND when missing;
 * JO_EUNSUPPORTED for a location with a scheme ("s3://", META-URL), which
 * the callers open with lance_io_open_jfs / lance_io_open_obj instead.
 */
int lance_io_open(struct lance_io **out, const char *location, struct jo_err *err);
struct jo_vol;
struct jo_obj;
/*
 * A dataset at absolute path root inside a JuiceFS volume, read through the
 * metadata engine and the object store (no mount). vol is borrowed and must
 * outlive the reader. JO_ENOTFOUND when root does not exist.
 */
int lance_io_open_jfs(struct lance_io **out, struct jo_vol *vol, const char *root,
		      struct jo_err *err);
/*
 * A dataset under key prefix (no trailing '/') of an object store, read with
 * ranged GETs. obj is borrowed and must outlive the reader.
 */
int lance_io_open_obj(struct lance_io **out, struct jo_obj *obj, const char *prefix,
		      struct jo_err *err);
int lance_io_open_local(struct lance_io **out, const char *dir, struct jo_err *err);
/* A copy of a dataset's directory path without trailing '/' ("/" stays);
 * NULL when out of memory. For the readers' roots. */
char *lance_root_dup(const char *dir);
void lance_io_close(struct lance_io *io);
int lance_io_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err);
int lance_io_pread(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		   struct jo_err *err);
int lance_io_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		  struct jo_err *err);

/* ------------------------------------------------------------------ */
/* Versions and manifests                                              */
/* ------------------------------------------------------------------ */

struct lance_version {
	uint64_t version;
	bool v2_name;        /* 20-digit inverted name */
	bool detached;       /* d{version}.manifest */
	char name[48];       /* file name under _versions/ */
};

/*
 * Parse one _versions/ entry name. Returns true and fills *out for an
 * attached V1/V2 or detached manifest, false for anything to ignore.
 */
bool lance_version_parse_name(const char *name, struct lance_version *out);
/*
 * All manifests under _versions/, sorted by version ascending. *out malloc'd.
 * JO_ENOTFOUND when _versions/ is missing or holds no manifest (not Lance).
 */
int lance_versions_list(struct lance_io *io, struct lance_version **out, size_t *n,
			struct jo_err *err);

enum lance_field_type { LANCE_FT_PARENT = 0, LANCE_FT_REPEATED = 1, LANCE_FT_LEAF = 2 };

struct lance_field {
	int32_t id;
	int32_t parent_id;
	int type;            /* enum lance_field_type */
	char *name;
	char *logical_type;
	bool nullable;
	bool blob_v1;        /* metadata lance-encoding:blob = true */
	bool blob_v2;        /* ARROW:extension:name = lance.blob.v2 */
	bool packed;         /* lance-encoding:packed = true */
};

struct lance_datafile {
	char *path;          /* relative to <base>/data/ */
	int32_t *fields;
	size_t nfields;
	int32_t *column_indices;
	size_t ncolumn_indices;
	uint32_t major, minor;
	uint64_t file_size;  /* 0 = unknown */
	bool has_base;
	uint32_t base_id;
	bool overlay;        /* from DataFragment.overlays */
};

struct lance_deletion {
	bool present;
	int file_type;       /* 0 arrow, 1 bitmap */
	uint64_t read_version;
	uint64_t id;
	uint64_t num_deleted;
	bool has_base;
	uint32_t base_id;
};

struct lance_fragment {
	uint64_t id;
	uint64_t physical_rows;
	struct lance_datafile *files;
	size_t nfiles;
	struct lance_deletion del;
};

struct lance_base_path {
	uint32_t id;
	bool is_dataset_root;
	char *path;
};

struct lance_manifest {
	uint64_t version;
	char *manifest_path;       /* relative to the dataset root */
	uint64_t manifest_size;
	uint64_t manifest_pos;     /* position of the Manifest's u32 length prefix */
	uint64_t reader_flags;
	uint64_t writer_flags;
	char *format_version;      /* DataStorageFormat.version: "0.1", "2.0", ... */
	char *writer;              /* "lance 8.0.0" or NULL */
	struct lance_field *fields;
	size_t nfields;
	struct lance_fragment *frags;
	size_t nfrags;
	struct lance_base_path *bases;
	size_t nbases;
};

/*
 * Decode a whole manifest file's bytes (tail + Manifest). JO_EPROTO when
 * corrupt. *out is calloc'd; free with lance_manifest_free().
 */
int lance_manifest_decode(const uint8_t *buf, size_t len, struct lance_manifest **out,
			  struct jo_err *err);
/*
 * Load the manifest of version (0 = latest attached version).
 * JO_ENOTFOUND when the dataset or version is missing.
 */
int lance_manifest_load(struct lance_io *io, uint64_t version, struct lance_manifest **out,
			struct jo_err *err);
void lance_manifest_free(struct lance_manifest *m);

/* Index of field id in m->fields, or -1. */
long lance_field_index(const struct lance_manifest *m, int32_t id);
/*
 * Resolve a column name ("a" or a dotted path "a.b.c") to a field index.
 * JO_ENOTFOUND when unknown.
 */
int lance_field_resolve(const struct lance_manifest *m, const char *name, size_t *idx,
			struct jo_err *err);

/* ------------------------------------------------------------------ */
/* Byte ranges                                                         */
/* ------------------------------------------------------------------ */

enum lance_range_kind { LANCE_RK_DATA = 1, LANCE_RK_META = 2 };

struct lance_range {
	uint32_t file;       /* index into set->files */
	int kind;            /* enum lance_range_kind (OR-ed after merging) */
	uint64_t off;
	uint64_t len;
};

struct lance_rangeset {
	char **files;        /* paths relative to the dataset root */
	uint64_t *sizes;     /* file sizes (0 unknown) */
	size_t nfiles, capfiles;
	struct lance_range *r;
	size_t n, cap;
};

void lance_rangeset_init(struct lance_rangeset *s);
void lance_rangeset_release(struct lance_rangeset *s);
/* Intern file path (copied); returns its index or JO_ENOMEM. */
int lance_rangeset_file(struct lance_rangeset *s, const char *path, uint64_t size);
int lance_rangeset_add(struct lance_rangeset *s, uint32_t file, uint64_t off, uint64_t len,
		       int kind);
/*
 * Sort by (path, offset), round every range out to multiples of align (0 or
 * 1: no alignment; clamped to the file size when known), and merge ranges
 * that overlap, touch, or are separated by fewer than gap bytes (Lance pads
 * buffers to 64 bytes and its newer readers read across that padding).
 */
void lance_rangeset_finish(struct lance_rangeset *s, uint64_t align, uint64_t gap);

struct lance_scan_opts {
	bool blob_payloads;  /* also warm blob payloads (not read by a scan) */
	uint64_t tail_block; /* the reader's first tail read, 0 = none (local: 4096) */
};

/*
 * Add to s every byte range a scan of the selected fields (indices into
 * m->fields; each selects its subtree) reads: the manifest, deletion files,
 * and for each data file holding a selected field its metadata and the
 * selected columns' buffers. Not finished (call lance_rangeset_finish).
 */
int lance_scan_ranges(struct lance_io *io, const struct lance_manifest *m,
		      const size_t *sel, size_t nsel, const struct lance_scan_opts *opts,
		      struct lance_rangeset *s, struct jo_err *err);

/* Path of a data file relative to the dataset root (malloc'd), or NULL when
 * it lives in a base path outside the dataset. */
char *lance_datafile_relpath(const struct lance_manifest *m, const struct lance_datafile *df);

struct jo_ctx;
/* `jfsops lance` (lanceparse/cmd_lance.c), an entry of cmd/main.c's command table. */
int cmd_lance(int argc, char **argv, struct jo_ctx *ctx);

#endif
