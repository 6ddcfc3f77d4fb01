/*
 * meta_dump: integration-test driver for common/meta. Opens a META-URL and
 * prints one JSON document with everything the read API returns, so a
 * script can compare it with `juicefs dump`. Secrets are never printed; only
 * whether the decrypted SecretKey equals argv[2] (when given).
 *
 *   meta_dump META-URL [EXPECTED-SECRET]
 */
#include "common/err.h"
#include "common/meta/meta.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ctx {
	struct jo_meta *m;
	struct jo_err err;
	json_t *files;
};

static json_t *attr_json(const struct jo_attr *a)
{
	return json_pack("{s:i,s:i,s:i,s:i,s:i,s:I,s:i,s:I,s:i,s:I,s:i,s:I,s:I,s:i,s:I}",
			 "type", a->type, "flags", a->flags, "mode", a->mode, "uid", (int)a->uid,
			 "gid", (int)a->gid, "atime", (json_int_t)a->atime, "atimensec",
			 (int)a->atimensec, "mtime", (json_int_t)a->mtime, "mtimensec",
			 (int)a->mtimensec, "ctime", (json_int_t)a->ctime, "ctimensec",
			 (int)a->ctimensec, "length", (json_int_t)a->length, "parent",
			 (json_int_t)a->parent, "nlink", (int)a->nlink, "rdev", (json_int_t)a->rdev);
}

static uint32_t be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return ((uint64_t)be32(p) << 32) | be32(p + 4);
}

static json_t *recs_json(const uint8_t *b, size_t len)
{
	json_t *a = json_array();

	for (size_t o = 0; o + 24 <= len; o += 24)
		json_array_append_new(a, json_pack("{s:i,s:I,s:i,s:i,s:i}", "pos", (int)be32(b + o),
						   "id", (json_int_t)be64(b + o + 4), "size",
						   (int)be32(b + o + 12), "off", (int)be32(b + o + 16),
						   "len", (int)be32(b + o + 20)));
	return a;
}

static int fail(struct ctx *c, const char *what)
{
	fprintf(stderr, "meta_dump: %s: %s: %s\n", what, jo_err_name(c->err.code), c->err.msg);
	exit(1);
}

/* Exits through fail() unless the call named what returned 0. */
static void check(struct ctx *c, int rc, const char *what)
{
	if (rc != 0)
		fail(c, what);
}

/* A new array stored in obj under key (obj keeps it alive), for a scan to fill. */
static json_t *put_array(json_t *obj, const char *key)
{
	json_t *arr = json_array();
	json_object_set_new(obj, key, arr);
	return arr;
}

static void walk(struct ctx *c, uint64_t dir, const char *path);

struct ent {
	char *name;
	uint64_t ino;
	uint8_t type;
};
struct ents {
	struct ent *v;
	size_t n;
};

static int collect(const char *name, size_t n, uint64_t ino, uint8_t type, void *p)
{
	struct ents *e = p;

	e->v = realloc(e->v, (e->n + 1) * sizeof(*e->v));
	e->v[e->n].name = strndup(name, n);
	e->v[e->n].ino = ino;
	e->v[e->n].type = type;
	e->n++;
	return 0;
}

static void walk(struct ctx *c, uint64_t dir, const char *path)
{
	struct ents e = { NULL, 0 };

	if (jo_meta_readdir(c->m, dir, collect, &e, &c->err) != 0)
		fail(c, "readdir");
	for (size_t i = 0; i < e.n; i++) {
		char p[4096];
		struct jo_attr a;
		uint64_t rino;
		uint8_t ltype;
		json_t *f, *chunks;
		uint32_t *idx;
		size_t ni;

		snprintf(p, sizeof(p), "%s/%s", path, e.v[i].name);
		if (jo_meta_resolve(c->m, p, &rino, &c->err) != 0)
			fail(c, "resolve");
		if (jo_meta_lookup(c->m, dir, e.v[i].name, &rino, &ltype, &c->err) != 0)
			fail(c, "lookup");
		if (jo_meta_getattr(c->m, e.v[i].ino, &a, &c->err) != 0)
			fail(c, "getattr");
		f = json_pack("{s:s,s:I,s:I,s:i,s:o}", "path", p, "ino", (json_int_t)e.v[i].ino,
			      "resolved", (json_int_t)rino, "dtype", e.v[i].type, "attr",
			      attr_json(&a));
		chunks = json_array();
		if (jo_meta_list_chunks(c->m, e.v[i].ino, &idx, &ni, &c->err) != 0)
			fail(c, "list_chunks");
		for (size_t k = 0; k < ni; k++) {
			uint8_t *raw;
			size_t len;
			if (jo_meta_read_chunk(c->m, e.v[i].ino, idx[k], &raw, &len, &c->err) != 0)
				fail(c, "read_chunk");
			json_array_append_new(chunks, json_pack("{s:i,s:o}", "index", (int)idx[k],
								"slices", recs_json(raw, len)));
			free(raw);
		}
		free(idx);
		json_object_set_new(f, "chunks", chunks);
		if (jo_meta_list_chunks_len(c->m, e.v[i].ino, a.length, &idx, &ni, &c->err) != 0)
			fail(c, "list_chunks_len");
		chunks = json_array();
		for (size_t k = 0; k < ni; k++)
			json_array_append_new(chunks, json_integer(idx[k]));
		free(idx);
		json_object_set_new(f, "chunks_len", chunks);
		json_array_append_new(c->files, f);
		if (e.v[i].type == JO_TYPE_DIR)
			walk(c, e.v[i].ino, p);
	}
	for (size_t i = 0; i < e.n; i++)
		free(e.v[i].name);
	free(e.v);
}

struct scan_ctx {
	struct ctx *c;
	json_t *arr;
};

/* Calls back into the same handle during the scan (re-entrancy check). */
static int chunk_cb(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *p)
{
	struct scan_ctx *s = p;
	json_t *refs = json_array();

	for (size_t o = 0; o + 24 <= len; o += 24) {
		int64_t r = 0;
		bool ex;
		if (be64(raw + o + 4) != 0 &&
		    jo_meta_get_slice_ref(s->c->m, be64(raw + o + 4), be32(raw + o + 12), &r, &ex,
					  &s->c->err) != 0)
			fail(s->c, "get_slice_ref in scan");
		json_array_append_new(refs, json_integer(r));
	}
	json_array_append_new(s->arr, json_pack("{s:I,s:i,s:o,s:o}", "ino", (json_int_t)ino,
						"index", (int)indx, "slices", recs_json(raw, len),
						"refs_in_scan", refs));
	return 0;
}

static int inode_cb(uint64_t ino, const struct jo_attr *a, void *p)
{
	char k[32];

	snprintf(k, sizeof(k), "%llu", (unsigned long long)ino);
	json_object_set_new(p, k, attr_json(a));
	return 0;
}

static int ref_cb(uint64_t id, uint32_t size, int64_t refs, void *p)
{
	json_array_append_new(p, json_pack("{s:I,s:i,s:I}", "id", (json_int_t)id, "size",
					   (int)size, "refs", (json_int_t)refs));
	return 0;
}

static int delfile_cb(uint64_t ino, uint64_t length, int64_t at, void *p)
{
	json_array_append_new(p, json_pack("{s:I,s:I,s:I}", "ino", (json_int_t)ino, "length",
					   (json_int_t)length, "deleted_at", (json_int_t)at));
	return 0;
}

static int delslices_cb(uint64_t id, int64_t at, const uint8_t *recs, size_t len, void *p)
{
	json_t *a = json_array();

	for (size_t o = 0; o + 12 <= len; o += 12)
		json_array_append_new(a, json_pack("[I,i]", (json_int_t)be64(recs + o),
						   (int)be32(recs + o + 8)));
	json_array_append_new(p, json_pack("{s:I,s:I,s:o}", "id", (json_int_t)id, "deleted_at",
					   (json_int_t)at, "slices", a));
	return 0;
}

static int session_cb(uint64_t sid, int64_t expire, const char *info, void *p)
{
	json_array_append_new(p, json_pack("{s:I,s:I,s:s}", "sid", (json_int_t)sid, "expire",
					   (json_int_t)expire, "info", info));
	return 0;
}

static int sustained_cb(uint64_t sid, uint64_t ino, void *p)
{
	json_array_append_new(p, json_pack("[I,I]", (json_int_t)sid, (json_int_t)ino));
	return 0;
}

static int detached_cb(uint64_t ino, int64_t added, void *p)
{
	json_array_append_new(p, json_pack("[I,I]", (json_int_t)ino, (json_int_t)added));
	return 0;
}

int main(int argc, char **argv)
{
	static const char *counters[] = { "nextInode", "nextChunk", "nextSession", "nextTrash",
					  "usedSpace", "totalInodes" };
	struct ctx c = { 0 };
	struct jo_format f;
	json_t *out, *cnt, *arr, *obj;
	uint64_t root;
	struct jo_attr ra;

	if (argc < 2) {
		fprintf(stderr, "usage: meta_dump META-URL [EXPECTED-SECRET]\n");
		return 2;
	}
	if (jo_meta_open(&c.m, argv[1], &c.err) != 0) {
		fprintf(stderr, "meta_dump: open: %s: %s\n", jo_err_name(c.err.code), c.err.msg);
		return 3;
	}
	if (jo_meta_load_format(c.m, &f, &c.err) != 0)
		fail(&c, "load_format");
	out = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:b,s:b}}", "engine",
			jo_meta_engine(c.m), "url", jo_meta_url_redacted(c.m), "format", "name",
			f.name, "uuid", f.uuid, "storage", f.storage, "bucket", f.bucket,
			"compression", f.compression, "block_size_kib", f.block_size_kib,
			"trash_days", f.trash_days, "key_encrypted", f.key_encrypted,
			"secret_matches",
			argc > 2 && f.secret_key && strcmp(f.secret_key, argv[2]) == 0);
	jo_format_release(&f);
	cnt = json_object();
	for (size_t i = 0; i < sizeof(counters) / sizeof(*counters); i++) {
		int64_t v;
		if (jo_meta_get_counter(c.m, counters[i], &v, &c.err) != 0)
			fail(&c, "get_counter");
		json_object_set_new(cnt, counters[i], json_integer(v));
	}
	json_object_set_new(out, "counters", cnt);
	json_object_set_new(out, "now", json_integer((json_int_t)time(NULL)));
	if (jo_meta_resolve(c.m, "/", &root, &c.err) != 0 || root != 1)
		fail(&c, "resolve /");
	if (jo_meta_getattr(c.m, 1, &ra, &c.err) != 0)
		fail(&c, "getattr 1");
	json_object_set_new(out, "root", attr_json(&ra));
	c.files = json_array();
	walk(&c, 1, "");
	json_object_set_new(out, "files", c.files);
	arr = json_array();
	{
		struct scan_ctx sc = { &c, arr };
		if (jo_meta_scan_chunks(c.m, chunk_cb, &sc, &c.err) != 0)
			fail(&c, "scan_chunks");
	}
	json_object_set_new(out, "all_chunks", arr);
	obj = json_object();
	if (jo_meta_scan_inodes(c.m, inode_cb, obj, &c.err) != 0)
		fail(&c, "scan_inodes");
	json_object_set_new(out, "inodes", obj);
	arr = json_array();
	if (jo_meta_scan_slice_refs(c.m, ref_cb, arr, &c.err) != 0)
		fail(&c, "scan_slice_refs");
	json_object_set_new(out, "slice_refs", arr);
	/* get_slice_ref for every slice seen in a chunk */
	arr = json_array();
	{
		json_t *ch, *s;
		size_t i, j;
		json_array_foreach(json_object_get(out, "all_chunks"), i, ch)
			json_array_foreach(json_object_get(ch, "slices"), j, s) {
				int64_t refs;
				bool ex;
				json_int_t id = json_integer_value(json_object_get(s, "id"));
				int size = (int)json_integer_value(json_object_get(s, "size"));
				if (id == 0)
					continue;
				if (jo_meta_get_slice_ref(c.m, (uint64_t)id, (uint32_t)size, &refs, &ex,
							  &c.err) != 0)
					fail(&c, "get_slice_ref");
				json_array_append_new(arr, json_pack("{s:I,s:i,s:I,s:b}", "id", id,
								     "size", size, "refs",
								     (json_int_t)refs, "explicit", ex));
			}
	}
	json_object_set_new(out, "get_slice_ref", arr);
	check(&c, jo_meta_scan_delfiles(c.m, delfile_cb, put_array(out, "delfiles"), &c.err),
	      "scan_delfiles");
	check(&c, jo_meta_scan_delslices(c.m, delslices_cb, put_array(out, "delslices"), &c.err),
	      "scan_delslices");
	check(&c, jo_meta_scan_sessions(c.m, session_cb, put_array(out, "sessions"), &c.err),
	      "scan_sessions");
	check(&c, jo_meta_scan_sustained(c.m, sustained_cb, put_array(out, "sustained"), &c.err),
	      "scan_sustained");
	check(&c, jo_meta_scan_detached(c.m, detached_cb, put_array(out, "detached"), &c.err),
	      "scan_detached");
	json_dumpf(out, stdout, JSON_INDENT(1) | JSON_SORT_KEYS);
	putchar('\n');
	json_decref(out);
	jo_meta_close(c.m);
	return 0;
}
