/*
 * jfsops trash: what a volume's trash holds (ls), read from the metadata;
 * entries put back (restore) or removed now (purge).
 *
 * The trash (base.go, Ino.IsTrash) is the directory JO_TRASH_INODE with one
 * directory per UTC hour of deletion, "YYYY-MM-DD-HH", holding the removed
 * entries as "PARENT-INODE-NAME" (PARENT: the directory it was removed from;
 * the unlink sets the entry's ctime to the deletion time). A directory
 * removed after its children is itself an entry of the trash, so an original
 * path is found by climbing the PARENT chain through the trash entries first,
 * then through the live tree.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/opt.h"
#include "common/volume.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/audit.h"
#include "common/cancel.h"
#include "common/esc.h"
#include "common/file.h"
#include "common/lease.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "trash/trash.h"

static const char usage_head[] =
	"usage: jfsops trash ls META-URL [--since T] [--until T] [--path PREFIX]\n"
	"                   [--uid N] [--name GLOB] [--json]\n"
	"       jfsops trash restore META-URL [filters] [--conflict skip|rename]\n"
	"                   [--into DIR] [--json] [--plan] [--apply [--audit FILE]]\n"
	"       jfsops trash restore META-URL --worker --apply [--lease D] [--audit FILE]\n"
	"       jfsops trash purge META-URL (filters | --all) [--json]\n"
	"                   [--apply [--audit FILE]]\n"
	"\n"
	"List what a volume's trash holds (volumes formatted with --trash-days):\n"
	"one line per entry (deleted at, original path, type, size, inode) and a\n"
	"total per trash hour directory. The original path is resolved through\n"
	"parents that are themselves in the trash (a tree removed with rm -rf).\n"
	"restore puts the selected entries back where they came from, purge removes\n"
	"them from the trash now; both are dry runs unless --apply is given.\n"
	"\n";

static const char usage_tail[] =
	"\n"
	"restore puts directories back before the entries that were in them, under\n"
	"their own inode numbers, with the same metadata change juicefs's restore\n"
	"makes (parent links, nlink, directory statistics and quotas); a restored\n"
	"empty directory gets its statistics record. purge removes entries as the\n"
	"trash's own expiry does: a file whose last link goes is left for gc\n"
	"(jfsops gc --delete) to delete its data; the summary says how many bytes.\n"
	"The deletion time is the entry's ctime when it falls in its hour directory's\n"
	"hour, else the start of that hour. Redis passwords may also come from env\n"
	"REDIS_PASSWORD or META_PASSWORD.\n"
	"\n"
	"Examples:\n"
	"  jfsops trash ls redis://127.0.0.1:6379/1 --since 6h --path /data/proj\n"
	"  jfsops trash ls sqlite3:///var/jfs/meta.db --uid 1000 --name '*.csv' --json\n"
	"  jfsops trash restore redis://127.0.0.1:6379/1 --since 2h --path /data/proj --apply\n"
	"  jfsops trash purge redis://127.0.0.1:6379/1 --path /scratch --apply\n";

struct trash_entry {
	int64_t hour;       /* start of its hour directory, unix seconds */
	uint32_t hour_idx;  /* index into hours[] */
	uint64_t ino, parent;
	char *name;         /* the original name (after "PARENT-INODE-") */
	char *tname;        /* the entry's name in its hour directory */
	struct jo_attr attr;
	bool have_attr;
	int64_t deleted;    /* deletion time, unix seconds */
	char *path;         /* original path, resolved lazily */
	/* restore planning */
	bool sel;           /* matches the filters */
	bool restore;       /* planned to go back */
	uint32_t depth;     /* how many of its parents are in the trash */
	uint64_t to_parent; /* where it goes */
	char *to_name;
	char *to_path;
	const char *skip;   /* why not, when !restore (static) */
	bool renamed;       /* --conflict rename gave it a new name */
};

struct trash_hour {
	char name[32];
	uint64_t ino;
	int64_t ts;
	uint64_t entries, bytes;
};

struct trash_filter {
	bool has_since, has_until;
	int64_t since, until;
	const char *path;   /* normalised: no trailing '/', "" for the root */
	bool has_uid;
	uint32_t uid;
	const char *name;
};

struct trash_ls {
	struct jo_meta *m;
	struct trash_hour *hours;
	size_t nhours, caphours;
	struct trash_entry *ents;
	size_t nents, capents;
	/* open addressing: inode -> index+1 into ents (0 = empty) */
	size_t *idx;
	size_t idxcap;
	/* readdir of one hour directory */
	uint32_t cur_hour;
	int rc;
	struct jo_err *err;
};

static size_t hash_ino(uint64_t ino, size_t cap)
{
	ino ^= ino >> 33;
	ino *= 0xff51afd7ed558ccdULL;
	ino ^= ino >> 33;
	return (size_t)ino & (cap - 1);
}

static int index_build(struct trash_ls *t, struct jo_err *err)
{
	size_t cap = 16;

	while (cap < t->nents * 2 + 2)
		cap <<= 1;
	t->idx = calloc(cap, sizeof(*t->idx));
	if (!t->idx)
		return jo_err_set(err, JO_ENOMEM, "out of memory indexing %zu trash entries",
				  t->nents);
	t->idxcap = cap;
	for (size_t i = 0; i < t->nents; i++) {
		size_t h = hash_ino(t->ents[i].ino, cap);

		while (t->idx[h] && t->ents[t->idx[h] - 1].ino != t->ents[i].ino)
			h = (h + 1) & (cap - 1);
		if (!t->idx[h])
			t->idx[h] = i + 1; /* a hard link twice in the trash: the first wins */
	}
	return 0;
}

static struct trash_entry *index_find(struct trash_ls *t, uint64_t ino)
{
	size_t h;

	if (!t->idxcap)
		return NULL;
	h = hash_ino(ino, t->idxcap);
	while (t->idx[h]) {
		if (t->ents[t->idx[h] - 1].ino == ino)
			return &t->ents[t->idx[h] - 1];
		h = (h + 1) & (t->idxcap - 1);
	}
	return NULL;
}

static int on_hour_entry(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct trash_ls *t = payload;
	struct trash_entry *e;
	uint64_t parent, eino;
	size_t off;

	(void)type;
	if (jo_trash_entry_parse(name, len, &parent, &eino, &off) != 0 || eino != ino) {
		char *n = strndup(name, len); /* names from readdir are not NUL-terminated */

		fprintf(stderr, "jfsops trash: %s/%s: not a PARENT-INODE-NAME entry: skipped\n",
			t->hours[t->cur_hour].name, n ? JO_ESC_TERM(n) : "?");
		free(n);
		return 0;
	}
	if (jo_grow_array(&t->ents, &t->capents, t->nents + 1, sizeof(*t->ents)))
		return jo_err_set(t->err, JO_ENOMEM, "out of memory listing the trash");
	e = &t->ents[t->nents];
	memset(e, 0, sizeof(*e));
	e->name = strndup(name + off, len - off);
	e->tname = strndup(name, len);
	if (!e->name || !e->tname)
		return jo_err_set(t->err, JO_ENOMEM, "out of memory listing the trash");
	e->ino = ino;
	e->parent = parent;
	e->hour = t->hours[t->cur_hour].ts;
	e->hour_idx = t->cur_hour;
	t->nents++;
	return 0;
}

static int on_hour_dir(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct trash_ls *t = payload;
	struct trash_hour *h;
	int64_t ts;

	if (type != JO_TYPE_DIR || len >= sizeof(h->name) ||
	    jo_trash_hour_parse(name, len, &ts) != 0) {
		char *n = strndup(name, len); /* names from readdir are not NUL-terminated */

		fprintf(stderr, "jfsops trash: entry '%s' of the trash is not an hour directory: skipped\n",
			n ? JO_ESC_TERM(n) : "?");
		free(n);
		return 0;
	}
	if (jo_grow_array(&t->hours, &t->caphours, t->nhours + 1, sizeof(*t->hours)))
		return jo_err_set(t->err, JO_ENOMEM, "out of memory listing the trash");
	h = &t->hours[t->nhours++];
	memset(h, 0, sizeof(*h));
	memcpy(h->name, name, len);
	h->name[len] = '\0';
	h->ino = ino;
	h->ts = ts;
	return 0;
}

static int cmp_hour(const void *a, const void *b)
{
	const struct trash_hour *x = a, *y = b;

	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* Read every hour directory and its entries, then their attributes. */
static int trash_load(struct trash_ls *t, struct jo_err *err)
{
	int rc;

	t->err = err;
	rc = jo_meta_readdir(t->m, JO_TRASH_INODE, on_hour_dir, t, err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err); /* no trash directory (yet): nothing deleted */
		return 0;
	}
	if (rc)
		return rc;
	qsort(t->hours, t->nhours, sizeof(*t->hours), cmp_hour);
	for (size_t i = 0; i < t->nhours; i++) {
		t->cur_hour = (uint32_t)i;
		rc = jo_meta_readdir(t->m, t->hours[i].ino, on_hour_entry, t, err);
		if (rc == JO_ENOTFOUND) {
			jo_err_clear(err); /* emptied by a client's cleanup meanwhile */
			continue;
		}
		if (rc)
			return jo_err_wrap(err, "trash hour directory %s", t->hours[i].name);
	}
	/* the attributes 256 at a time (one round trip each where the engine can) */
	for (size_t base = 0; base < t->nents; base += 256) {
		size_t k = t->nents - base < 256 ? t->nents - base : 256;
		uint64_t inos[256];
		struct jo_attr attrs[256];
		bool found[256];

		for (size_t i = 0; i < k; i++)
			inos[i] = t->ents[base + i].ino;
		if ((rc = jo_meta_getattr_many(t->m, inos, k, attrs, found, err)) != 0)
			return jo_err_wrap(err, "inodes in the trash");
		for (size_t i = 0; i < k; i++) {
			struct trash_entry *e = &t->ents[base + i];

			e->deleted = e->hour;
			if (!found[i])
				continue;
			e->attr = attrs[i];
			e->have_attr = true;
			if (e->attr.ctime >= e->hour && e->attr.ctime < e->hour + 3600)
				e->deleted = e->attr.ctime;
		}
	}
	return index_build(t, err);
}

/*
 * The original path of entry e ("" stands for the root in the recursion), into
 * e->path. Parents in the trash are climbed through their own entries, the
 * rest through the live tree (jo_meta_path_of). A chain deeper than the
 * number of entries is a loop: JO_EPROTO.
 */
static int orig_path(struct trash_ls *t, struct trash_entry *e, size_t depth, struct jo_err *err)
{
	struct trash_entry *pe;
	char *dir = NULL;
	const char *d;
	int rc;

	if (e->path)
		return 0;
	if (depth > t->nents)
		return jo_err_set(err, JO_EPROTO, "trash: the parents of inode %" PRIu64 " loop",
				  e->ino);
	pe = e->parent != e->ino ? index_find(t, e->parent) : NULL;
	if (e->parent == JO_ROOT_INODE) {
		d = "";
	} else if (pe) {
		if ((rc = orig_path(t, pe, depth + 1, err)) != 0)
			return rc;
		d = pe->path;
	} else {
		rc = jo_meta_path_of(t->m, e->parent, &dir, err);
		if (rc == JO_ENOTFOUND) {
			/* the parent is gone from the volume and from the trash */
			jo_err_clear(err);
			if (asprintf(&dir, "<inode %" PRIu64 ">", e->parent) < 0)
				return jo_err_set(err, JO_ENOMEM, "out of memory");
		} else if (rc) {
			return rc;
		} else if (!strcmp(dir, "/")) {
			dir[0] = '\0';
		}
		d = dir;
	}
	e->path = jo_path_join(d, e->name);
	free(dir);
	if (!e->path)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

static const char *type_name(uint8_t type)
{
	switch (type) {
	case JO_TYPE_FILE: return "file";
	case JO_TYPE_DIR: return "dir";
	case JO_TYPE_SYMLINK: return "symlink";
	case JO_TYPE_FIFO: return "fifo";
	case JO_TYPE_BLKDEV: return "blockdev";
	case JO_TYPE_CHRDEV: return "chardev";
	case JO_TYPE_SOCKET: return "socket";
	default: return "unknown";
	}
}

static void fmt_time(int64_t ts, char buf[32])
{
	time_t tt = (time_t)ts;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, 32, "%" PRId64, ts);
}

/* An RFC 3339 time or an age ("6h": now minus that) -> unix seconds; -1 if malformed. */
static int parse_when(const char *s, int64_t now, int64_t *out)
{
	int64_t ms;

	if (jo_trash_time_parse(s, out) == 0)
		return 0;
	if (s[0] >= '0' && s[0] <= '9' && strlen(s) >= 10 && s[4] == '-')
		return -1; /* a date, malformed: not an age */
	if (jo_parse_duration_ms(s, &ms))
		return -1;
	*out = now - ms / 1000;
	return 0;
}

static bool matches(const struct trash_entry *e, const struct trash_filter *f)
{
	if (f->has_since && e->deleted < f->since)
		return false;
	if (f->has_until && e->deleted >= f->until)
		return false;
	if (f->has_uid && (!e->have_attr || e->attr.uid != f->uid))
		return false;
	if (f->name && fnmatch(f->name, e->name, 0) != 0)
		return false;
	if (f->path && !jo_trash_path_under(e->path, f->path))
		return false;
	return true;
}

/*
 * A JSON string of a name from the volume: as is when it is UTF-8 (JSON
 * strings must be), else in the escaped form human output shows (`ls -b`),
 * so that one odd name neither aborts the listing nor breaks the JSON.
 */
static json_t *jname(const char *s)
{
	json_t *j;
	size_t cap;
	char *buf;

	if (!s)
		return json_null();
	if ((j = json_string(s)))
		return j;
	cap = JO_ESC_TERM_MAX(strlen(s));
	buf = malloc(cap);
	if (!buf)
		return NULL;
	j = json_string(jo_esc_term(buf, cap, s));
	free(buf);
	return j;
}

static int emit_json(json_t *o)
{
	int rc = o ? json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) : -1;

	json_decref(o);
	if (rc)
		return -1;
	fputc('\n', stdout);
	return 0;
}

static int trash_ls_print(struct trash_ls *t, const struct trash_filter *f, const struct jo_ctx *ctx,
			  uint64_t *shown, uint64_t *bytes, struct jo_err *err)
{
	size_t i = 0;
	int rc;

	for (size_t hi = 0; hi < t->nhours; hi++) {
		struct trash_hour *h = &t->hours[hi];

		for (; i < t->nents && t->ents[i].hour_idx == hi; i++) {
			struct trash_entry *e = &t->ents[i];
			const char *type = e->have_attr ? type_name(e->attr.type) : "gone";
			uint64_t size = e->have_attr ? e->attr.length : 0;
			char when[32];

			if (f->path && (rc = orig_path(t, e, 0, err)) != 0)
				return rc;
			if (!matches(e, f))
				continue;
			if ((rc = orig_path(t, e, 0, err)) != 0)
				return rc;
			h->entries++;
			h->bytes += size;
			fmt_time(e->deleted, when);
			if (ctx->json) {
				json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:s,s:I,s:I,s:I,s:I,s:I}",
						      "type", "entry", "hour", h->name, "deleted_at", when,
						      "path", jname(e->path), "kind", type,
						      "size", (json_int_t)size, "inode", (json_int_t)e->ino,
						      "parent", (json_int_t)e->parent,
						      "uid", (json_int_t)(e->have_attr ? e->attr.uid : 0),
						      "gid", (json_int_t)(e->have_attr ? e->attr.gid : 0));

				if (emit_json(o))
					return jo_err_set(err, JO_EIO, "cannot write to stdout");
			} else {
				printf("%s  %-7s %12" PRIu64 "  %-10" PRIu64 "  %s\n", when, type, size,
				       e->ino, JO_ESC_TERM(e->path));
			}
		}
		if (!h->entries)
			continue;
		*shown += h->entries;
		*bytes += h->bytes;
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:s,s:I,s:I}", "type", "hour", "hour", h->name,
					      "entries", (json_int_t)h->entries,
					      "bytes", (json_int_t)h->bytes);

			if (emit_json(o))
				return jo_err_set(err, JO_EIO, "cannot write to stdout");
		} else {
			printf("# %s: %" PRIu64 " entries, %" PRIu64 " bytes\n", h->name, h->entries,
			       h->bytes);
		}
	}
	return 0;
}

static void trash_ls_release(struct trash_ls *t)
{
	for (size_t i = 0; i < t->nents; i++) {
		free(t->ents[i].name);
		free(t->ents[i].path);
		free(t->ents[i].to_name);
		free(t->ents[i].tname);
		free(t->ents[i].to_path);
	}
	free(t->ents);
	free(t->hours);
	free(t->idx);
}


/* ---- restore planning (read-only) ---- */

struct trash_restore_opts {
	bool apply;         /* --apply: do it */
	bool plan;          /* --plan --apply: record tasks for workers */
	int64_t lease_ms;   /* --worker: lease length */
	bool dir_stats;     /* the volume records directory statistics */
	struct jo_audit *audit;
	bool rename;        /* --conflict rename */
	const char *into;   /* --into DIR, or NULL */
	uint64_t into_ino;
	char *into_path;    /* normalised, "" for the root */
};

/* The names the plan gives out: "PARENT/NAME" strings, open addressing. */
struct name_set {
	char **v;
	size_t cap, n;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

static bool name_set_has(const struct name_set *ns, const char *k)
{
	size_t h;

	if (!ns->cap)
		return false;
	for (h = hash_str(k) & (ns->cap - 1); ns->v[h]; h = (h + 1) & (ns->cap - 1))
		if (!strcmp(ns->v[h], k))
			return true;
	return false;
}

/* Takes k (malloc'd). */
static int name_set_add(struct name_set *ns, char *k)
{
	size_t h;

	if ((ns->n + 1) * 2 > ns->cap) {
		size_t nc = ns->cap ? ns->cap * 2 : 64;
		char **nv = calloc(nc, sizeof(*nv));

		if (!nv)
			return -1;
		for (size_t i = 0; i < ns->cap; i++) {
			if (!ns->v[i])
				continue;
			for (h = hash_str(ns->v[i]) & (nc - 1); nv[h]; h = (h + 1) & (nc - 1))
				;
			nv[h] = ns->v[i];
		}
		free(ns->v);
		ns->v = nv;
		ns->cap = nc;
	}
	for (h = hash_str(k) & (ns->cap - 1); ns->v[h]; h = (h + 1) & (ns->cap - 1))
		;
	ns->v[h] = k;
	ns->n++;
	return 0;
}

static void name_set_release(struct name_set *ns)
{
	for (size_t i = 0; i < ns->cap; i++)
		free(ns->v[i]);
	free(ns->v);
}

/*
 * Is NAME taken in directory PARENT: by a live entry (parents outside the
 * trash only: a directory in the trash holds nothing live) or by an entry
 * this plan already puts there?
 */
static int name_taken(struct trash_ls *t, struct name_set *ns, uint64_t parent, bool live,
		      const char *name, bool *out, struct jo_err *err)
{
	char *k = NULL;
	uint64_t ino;
	uint8_t type;
	int rc;

	if (asprintf(&k, "%" PRIu64 "/%s", parent, name) < 0)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	*out = name_set_has(ns, k);
	free(k);
	if (*out || !live)
		return 0;
	rc = jo_meta_lookup(t->m, parent, name, &ino, &type, err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	*out = true;
	return 0;
}

static uint32_t trash_depth(struct trash_ls *t, struct trash_entry *e)
{
	uint32_t d = 0;

	for (struct trash_entry *pe = index_find(t, e->parent); pe && d <= t->nents;
	     pe = index_find(t, pe->parent))
		d++;
	return d;
}


static int cmp_plan(const void *a, const void *b)
{
	const struct trash_entry *x = *(struct trash_entry *const *)a;
	const struct trash_entry *y = *(struct trash_entry *const *)b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->hour != y->hour)
		return x->hour < y->hour ? -1 : 1;
	return strcmp(x->path, y->path);
}

/*
 * The entries the filters select (each with its original path and its
 * depth in the trash), in the order cmp gives: *plan (malloc'd) and *n.
 */
static int select_plan(struct trash_ls *t, const struct trash_filter *f,
		       int (*cmp)(const void *, const void *), struct trash_entry ***plan,
		       size_t *n, struct jo_err *err)
{
	size_t nsel = 0;
	int rc;

	*plan = NULL;
	*n = 0;
	for (size_t i = 0; i < t->nents; i++) {
		struct trash_entry *e = &t->ents[i];

		if ((rc = orig_path(t, e, 0, err)) != 0)
			return rc;
		e->sel = matches(e, f);
		nsel += e->sel;
	}
	if (!(*plan = calloc(nsel ? nsel : 1, sizeof(**plan))))
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (size_t i = 0; i < t->nents; i++) {
		if (!t->ents[i].sel)
			continue;
		t->ents[i].depth = trash_depth(t, &t->ents[i]);
		(*plan)[(*n)++] = &t->ents[i];
	}
	qsort(*plan, *n, sizeof(**plan), cmp);
	return 0;
}

/* Decide where one entry goes (entries before it in plan order are decided). */
static int plan_one(struct trash_ls *t, const struct trash_restore_opts *ro, struct name_set *ns,
		    struct trash_entry *e, uint64_t *conflicts, struct jo_err *err)
{
	struct trash_entry *pe = index_find(t, e->parent);
	const char *to_dir = NULL;
	char *live_dir = NULL, *name = NULL, *key = NULL;
	bool live = true, taken;
	struct jo_attr pa;
	int rc = 0;

	if (pe && pe != e) {
		if (pe->restore) {
			e->to_parent = pe->ino;
			to_dir = pe->to_path;
			live = false;
		}
	} else if (e->parent == JO_ROOT_INODE) {
		e->to_parent = JO_ROOT_INODE;
		to_dir = "";
	} else {
		rc = jo_meta_getattr(t->m, e->parent, &pa, err);
		if (rc == JO_ENOTFOUND) {
			jo_err_clear(err);
			rc = 0;
		} else if (rc) {
			goto out;
		} else if (pa.type == JO_TYPE_DIR && !jo_ino_is_trash(pa.parent)) {
			rc = jo_meta_path_of(t->m, e->parent, &live_dir, err);
			if (rc == JO_ENOTFOUND) {
				jo_err_clear(err);
				rc = 0;
			} else if (rc) {
				goto out;
			} else {
				if (!strcmp(live_dir, "/"))
					live_dir[0] = '\0';
				e->to_parent = e->parent;
				to_dir = live_dir;
			}
		}
	}
	if (!to_dir) {
		if (!ro->into) {
			e->skip = pe ? "its parent directory stays in the trash" :
				       "its parent directory no longer exists (see --into)";
			goto out;
		}
		e->to_parent = ro->into_ino;
		to_dir = ro->into_path;
		live = true;
	}
	if (!(name = strdup(e->name))) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = name_taken(t, ns, e->to_parent, live, name, &taken, err)) != 0)
		goto out;
	if (taken) {
		char stamp[32];
		struct tm tm;
		time_t tt = (time_t)e->deleted;

		(*conflicts)++;
		if (!ro->rename) {
			e->skip = "the name is taken in its parent directory (see --conflict rename)";
			goto out;
		}
		if (!gmtime_r(&tt, &tm) || !strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm))
			snprintf(stamp, sizeof(stamp), "%" PRId64, e->deleted);
		for (int n = 1; taken; n++) {
			free(name);
			name = NULL;
			if ((n == 1 ? asprintf(&name, "%s.restored-%s", e->name, stamp) :
				      asprintf(&name, "%s.restored-%s-%d", e->name, stamp, n)) < 0) {
				name = NULL;
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
			if (strlen(name) > 255) {
				e->skip = "the name is taken and too long to rename";
				goto out;
			}
			if ((rc = name_taken(t, ns, e->to_parent, live, name, &taken, err)) != 0)
				goto out;
		}
		e->renamed = true;
	}
	if (asprintf(&key, "%" PRIu64 "/%s", e->to_parent, name) < 0 || name_set_add(ns, key)) {
		free(key);
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (!(e->to_path = jo_path_join(to_dir, name))) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	e->to_name = name;
	name = NULL;
	e->restore = true;
out:
	free(name);
	free(live_dir);
	return rc;
}

/* ---- restore --apply ---- */

static int64_t align4k(uint64_t len)
{
	return len ? (int64_t)(((len - 1) / 4096 + 1) * 4096) : 4096;
}

struct usage {
	struct jo_meta *m;
	int64_t length, space, inodes;
	bool recursive;     /* GetSummary (the whole tree), else one directory's entries */
	int depth;
	struct jo_err *err;
	/* with want_tree: the directories the quota charge read, each before its
	 * entries (struct jo_rs_quota's check) */
	bool want_tree;
	uint64_t *check, *check_parent;
	int64_t *check_ctime;
	size_t ncheck, cap;
};

/* Directory dir (attr a) into u's directories to check: its parent when
 * by_parent, else its ctime. */
static int check_add(struct usage *u, uint64_t dir, const struct jo_attr *a, bool by_parent)
{
	if (u->ncheck == u->cap) {
		size_t cap = u->cap ? 2 * u->cap : 8;
		uint64_t *t = realloc(u->check, cap * sizeof(*t)), *tp = NULL;
		int64_t *tm = NULL;

		if (t)
			u->check = t;
		if (t && (tp = realloc(u->check_parent, cap * sizeof(*tp))) != NULL)
			u->check_parent = tp;
		if (!t || !tp || !(tm = realloc(u->check_ctime, cap * sizeof(*tm))))
			return jo_err_set(u->err, JO_ENOMEM, "out of memory");
		u->check_ctime = tm;
		u->cap = cap;
	}
	u->check[u->ncheck] = dir;
	u->check_parent[u->ncheck] = by_parent ? a->parent : 0;
	u->check_ctime[u->ncheck++] = jo_rs_ctime_ns(a->ctime, a->ctimensec);
	return 0;
}

static int on_usage_entry(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload);

/* GetSummary of a directory: itself and everything under it. */
static int dir_usage(struct usage *u, uint64_t dir)
{
	u->space += 4096;
	u->inodes++;
	if (u->depth++ > 4096)
		return jo_err_set(u->err, JO_EPROTO, "directories nested deeper than 4096");
	if (u->want_tree) {
		struct jo_attr a;
		int rc = jo_meta_getattr(u->m, dir, &a, u->err);

		if (rc == JO_ENOTFOUND) /* gone meanwhile: the restore tells */
			return jo_err_clear(u->err), 0;
		if (rc || (rc = check_add(u, dir, &a, false)) != 0)
			return rc;
	}
	return jo_meta_readdir(u->m, dir, on_usage_entry, u, u->err);
}

static int on_usage_entry(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct usage *u = payload;
	struct jo_attr a;
	int rc;

	(void)name;
	(void)len;
	if (type == JO_TYPE_DIR && u->recursive) {
		rc = dir_usage(u, ino);
		u->depth--;
		return rc;
	}
	u->inodes++;
	if (type != JO_TYPE_FILE) {
		u->space += 4096;
		return 0;
	}
	rc = jo_meta_getattr(u->m, ino, &a, u->err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(u->err);
		return 0;
	}
	if (rc == 0) {
		u->length += (int64_t)a.length;
		u->space += align4k(a.length);
	}
	return rc;
}

/* A directory without statistics gets them computed from its entries, as
 * juicefs's flush does for a record it finds missing (doSyncDirStat). */
static int sync_dir_stat(struct jo_meta *m, uint64_t dir, struct jo_err *err)
{
	struct usage u = { m, 0, 0, 0, false, 0, err };
	bool written;
	int rc = jo_meta_readdir(m, dir, on_usage_entry, &u, err);

	return rc ? rc : jo_mut_dir_stat_init(m, dir, u.length, u.space, u.inodes, &written, err);
}

/*
 * updateDirQuota's walk: the directories from dir up to the root that have a
 * quota, into *dirs (*n of them, the caller frees). A directory in the trash
 * counts under no quota: the walk stops there (*in_trash; such a directory
 * may be restored any time, so that is not remembered, and the directories
 * walked go into u's to check). Each level is probed with an increment of
 * zero (it writes nothing that changes).
 */
static int quota_walk(struct jo_meta *m, uint64_t dir, uint64_t **dirs, size_t *n,
		      bool *in_trash, struct usage *u, struct jo_err *err)
{
	size_t cap = 0;

	*n = 0;
	*in_trash = true;
	for (int depth = 0; depth < 4096 && !jo_ino_is_trash(dir); depth++) {
		struct jo_attr a;
		bool had;
		int rc = jo_mut_dir_quota_add(m, dir, 0, 0, &had, err);

		if (rc)
			return rc;
		if (had && *n == cap) {
			uint64_t *d = realloc(*dirs, (cap = cap ? 2 * cap : 4) * sizeof(*d));

			if (!d)
				return jo_err_set(err, JO_ENOMEM, "out of memory");
			*dirs = d;
		}
		if (had)
			(*dirs)[(*n)++] = dir;
		if (dir == JO_ROOT_INODE) {
			*in_trash = false;
			return 0;
		}
		if ((rc = jo_meta_getattr(m, dir, &a, err)) != 0)
			return rc == JO_ENOTFOUND ? (jo_err_clear(err), 0) : rc;
		if ((rc = check_add(u, dir, &a, true)) != 0)
			return rc;
		if (!a.parent || a.parent == dir)
			return 0;
		dir = a.parent;
	}
	return 0;
}

/*
 * Directories whose way up to the root had no quota when last walked, and
 * when (monotonic ms). The walk costs two round trips per level; entries of
 * one parent come in runs, so a parent found without a quota on its way up
 * to the root is not walked again for QUOTA_NONE_MS: an entry restored into
 * it in that time is charged to no quota, even one set on its way meanwhile
 * (docs/trash.md). A directory with a quota on its way, or in the trash, is
 * walked every batch.
 */
#define QUOTA_NONE_MS 1000
#define QUOTA_NONE_SLOTS 64
static struct {
	uint64_t dir;
	int64_t at;
} quota_none[QUOTA_NONE_SLOTS];

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The quota charge of one entry and what it holds (see quota_plan). */
struct qplan {
	struct jo_rs_quota q;
	uint64_t *dirs, *check, *check_parent; /* owned */
	int64_t *check_ctime;    /* owned */
	bool in_trash;           /* the walk stopped in the trash */
};

static void qplan_free(struct qplan *p)
{
	free(p->dirs);
	free(p->check);
	free(p->check_parent);
	free(p->check_ctime);
	memset(p, 0, sizeof(*p));
}

/*
 * Rename's quota update for entry e restored into e->to_parent, read before
 * its restore and charged in the restore's transaction (struct
 * jo_rs_quota): the directories with a quota on the way up (prev's: an
 * entry planned just before for the same parent) and, for a directory, its
 * whole tree (what was put back into it while it was in the trash comes
 * with it); the ctimes of the tree's directories, and the parents of those
 * walked when the walk stopped in the trash, which the transaction finds
 * unchanged or refuses (JO_RS_CHANGED).
 */
static int quota_plan(struct jo_meta *m, const struct trash_entry *e, const struct qplan *prev,
		      struct qplan *p, struct jo_err *err)
{
	uint64_t dir = e->to_parent;
	size_t slot = (size_t)(dir * 0x9e3779b97f4a7c15ULL >> 58) % QUOTA_NONE_SLOTS;
	struct usage u = { m, 0, 0, 0, true, 0, err, true, NULL, NULL, NULL, 0, 0 };
	int64_t now = mono_ms();
	struct jo_attr a = e->attr;
	bool in_trash = false;
	int rc;

	qplan_free(p);
	if (quota_none[slot].dir == dir && dir && now - quota_none[slot].at < QUOTA_NONE_MS)
		return 0;
	if (prev && prev->q.ndirs && !prev->in_trash) {
		p->q.dirs = prev->q.dirs;
		p->q.ndirs = prev->q.ndirs;
	} else if ((rc = quota_walk(m, dir, &p->dirs, &p->q.ndirs, &in_trash, &u, err)) != 0) {
		goto out;
	} else {
		p->q.dirs = p->dirs;
	}
	p->in_trash = in_trash;
	if (!in_trash)
		u.ncheck = 0; /* a walk to the root is juicefs's own (renames move no quota) */
	if (!p->q.ndirs && !in_trash) {
		quota_none[slot].dir = dir;
		quota_none[slot].at = now;
	}
	if (!p->q.ndirs)
		goto out;
	if (!e->have_attr && (rc = jo_meta_getattr(m, e->ino, &a, err)) != 0) {
		p->q.ndirs = 0; /* gone: the restore finds it so */
		if (rc == JO_ENOTFOUND)
			jo_err_clear(err), rc = 0;
		goto out;
	}
	if (a.type == JO_TYPE_DIR && (rc = dir_usage(&u, e->ino)) == 0) {
		p->q.dir_space = u.space;
		p->q.dir_inodes = u.inodes;
	}
out:
	p->check = u.check;
	p->check_parent = u.check_parent;
	p->check_ctime = u.check_ctime;
	p->q.check = u.check;
	p->q.check_parent = u.check_parent;
	p->q.check_ctime = u.check_ctime;
	p->q.ncheck = rc ? 0 : u.ncheck;
	return rc;
}

static void audit_entry(const struct trash_restore_opts *ro, const struct trash_entry *e,
			const char *result, const char *why, const char *action)
{
	struct jo_audit_rec r = { 0 };
	struct jo_err aerr = { 0 };

	if (!ro->audit)
		return;
	r.action = action;
	r.key = e->to_path ? e->to_path : e->path;
	r.reason = "trash-entry";
	r.result = result;
	r.error = why;
	if (jo_audit_write(ro->audit, &r, &aerr))
		fprintf(stderr, "jfsops trash: audit: %s\n", JO_ESC_TERM(aerr.msg));
}

/* at most this many entries in one restore transaction */
#define APPLY_BATCH 100

/*
 * Put planned entries es[0..n) back (none of them goes into another: one
 * depth of the plan), in one transaction where the engine allows. On a
 * refusal e->restore goes false with e->skip saying why (the entries
 * planned into it are then skipped in turn). On an engine failure the
 * error is returned: es[0..*ndone) are done (their outcome is final, their
 * audit lines are the caller's), the first of the others has an audit line
 * "error".
 */
static int apply_batch(struct jo_meta *m, const struct trash_restore_opts *ro,
		       const uint64_t *hinos, struct trash_entry **es, size_t n, size_t *ndone,
		       struct jo_err *err)
{
	struct jo_rs_item *v = calloc(n ? n : 1, sizeof(*v));
	struct qplan *qp = calloc(n ? n : 1, sizeof(*qp));
	struct jo_err e2 = { 0 };
	size_t nran = 0;
	int rc = 0;

	*ndone = 0;
	if (!v || !qp) {
		free(v);
		free(qp);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		v[i].tdir = hinos[i];
		v[i].parent = es[i]->to_parent;
		v[i].src = es[i]->tname;
		v[i].src_len = strlen(es[i]->tname);
		v[i].name = es[i]->to_name;
		v[i].name_len = strlen(es[i]->to_name);
		/* the quotas are charged in the restore's transaction: a worker
		 * killed after its commit leaves none short, a rerun charges none twice */
		if (ro->dir_stats)
			rc = quota_plan(m, es[i], i && es[i - 1]->to_parent == es[i]->to_parent ?
					&qp[i - 1] : NULL, &qp[i], err);
		v[i].quota = qp[i].q.ndirs || qp[i].q.ncheck ? &qp[i].q : NULL;
	}
	if (rc) {
		audit_entry(ro, es[0], "error", err->msg, "restore");
		goto out;
	}
	rc = jo_mut_restore_many(m, v, n, ro->dir_stats, err);
	while (nran < n && v[nran].ran)
		nran++;
	/* a directory whose tree grew since it was summed: summed and restored again */
	for (size_t i = 0; i < nran && !rc; i++) {
		for (int t = 0; t < 10 && v[i].res.status == JO_RS_CHANGED && !rc; t++) {
			if ((rc = quota_plan(m, es[i], NULL, &qp[i], err)) == 0) {
				v[i].quota = qp[i].q.ndirs || qp[i].q.ncheck ? &qp[i].q : NULL;
				rc = jo_mut_restore_many(m, &v[i], 1, ro->dir_stats, err);
			}
		}
		if (rc)
			nran = i;
	}
	for (size_t i = 0; i < nran; i++) {
		/* a lost reply of a transaction that did run: the entry is in place */
		uint64_t ino = 0;
		uint8_t type;
		int lr;

		if (v[i].res.status != JO_RS_GONE)
			continue;
		lr = jo_meta_lookup(m, es[i]->to_parent, es[i]->to_name, &ino, &type, &e2);
		if (lr && lr != JO_ENOTFOUND) {
			if (!rc) {
				rc = lr;
				*err = e2;
			}
			nran = i;
			break;
		}
		jo_err_clear(&e2);
		if (ino == es[i]->ino) {
			v[i].res.status = JO_RS_DONE;
			/* what followed its transaction may not have run: the parent's
			 * statistics are made if missing (its quota was charged in it) */
			v[i].dst_stat_missing = true;
		}
	}
	if (rc && nran < n)
		audit_entry(ro, es[nran], "error", err->msg, "restore");
	if (nran && jo_mut_confirm(m, &e2) != 0) { /* a failover must not take them back unseen */
		for (size_t i = 0; i < nran; i++)
			audit_entry(ro, es[i], "error", e2.msg, "restore");
		nran = 0;
		if (!rc) {
			rc = e2.code;
			*err = e2;
		}
	}
	for (size_t i = 0; i < nran; i++) {
		struct trash_entry *e = es[i];
		int prc = 0;

		switch (v[i].res.status) {
		case JO_RS_DONE:
			break;
		case JO_RS_GONE:
			e->skip = "the entry left the trash meanwhile";
			break;
		case JO_RS_EXISTS:
			e->skip = "the name was taken meanwhile";
			break;
		case JO_RS_NOPARENT:
			e->skip = "its parent directory went away meanwhile";
			break;
		case JO_RS_CHANGED:
			e->skip = "entries kept being restored into it meanwhile: run again";
			break;
		default:
			e->skip = "append-only or immutable, or a loop (EPERM)";
			break;
		}
		if (v[i].res.status != JO_RS_DONE) {
			e->restore = false;
			*ndone = i + 1;
			continue;
		}
		if (ro->dir_stats && v[i].dst_stat_missing) {
			/* once per parent in the batch: the first makes them */
			bool seen = false;

			for (size_t j = 0; j < i && !seen; j++)
				seen = v[j].dst_stat_missing && v[j].parent == v[i].parent &&
				       v[j].res.status == JO_RS_DONE;
			if (!seen)
				prc = sync_dir_stat(m, e->to_parent, &e2);
		}
		if (prc) {
			if (!rc)
				*err = e2;
			rc = rc ? rc : prc;
			break;
		}
		*ndone = i + 1;
	}
out:
	for (size_t i = 0; i < n; i++)
		qplan_free(&qp[i]);
	free(v);
	free(qp);
	return rc;
}

/*
 * ---- many workers: `restore --plan --apply` records tasks, `--worker --apply` works them
 *
 * Tasks (namespace "trash", common/lease.h) hold items "HOUR-INO:INO:NAMEHASH"
 * (NAMEHASH: of the entry's name in its hour directory, so that the two
 * names of a hard link removed in the same hour are two items), all of
 * one depth (how many of the entry's parents are in the trash), kind
 * "restore:DEPTH". What each item needs (target parent and name, the entry's
 * name in its hour directory, the target path) is a line of its task's
 * record "b/STAMP/SEQ" beside the tasks (STAMP: the plan's), named by the
 * task's item "b:STAMP:SEQ", written before its task, removed after the
 * task is complete (plans of earlier versions wrote one record
 * "r/HOUR-INO/INO/NAMEHASH" per item: still read). Workers take tasks in
 * any order: an entry whose directory is still in the trash goes into it
 * there (juicefs's RenameRestore allows that), and comes back with it; directory statistics and quotas are
 * counted where the entry lands, a tree in the trash under no quota. Every
 * step can be repeated: an entry a killed worker already moved is found in
 * its target by the next one (restore reports it gone from the trash, the
 * target holds its inode).
 */
#define TRASH_NS "trash"

/* FNV-1a of an entry's name in its hour directory: the part of an item and
 * of its record's key that tells the names of one inode apart. */
static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* The record key of item "HINO:INO:HASH" (0 when the item is malformed). */
static int item_key(const char *item, unsigned long long *hino, unsigned long long *ino,
		    char *key, size_t cap)
{
	unsigned long long h;

	if (sscanf(item, "%llu:%llu:%llx", hino, ino, &h) != 3)
		return 0;
	snprintf(key, cap, "r/%llu/%llu/%016llx", *hino, *ino, h);
	return 1;
}
#define TRASH_TASK_ITEMS 100

static char *hex_of(const char *s)
{
	size_t n = strlen(s);
	char *h = malloc(2 * n + 2);

	if (!h)
		return NULL;
	for (size_t i = 0; i < n; i++)
		snprintf(h + 2 * i, 3, "%02x", (unsigned char)s[i]);
	if (!n)
		strcpy(h, "-");
	return h;
}

/* Decode the hex word at *p (advancing past it and one space); NULL when malformed. */
static char *hex_word(const char **p)
{
	const char *s = *p, *end = strchr(s, ' ');
	size_t n = end ? (size_t)(end - s) : strlen(s);
	char *out;

	if (n % 2 || !(out = malloc(n / 2 + 1)))
		return NULL;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1) {
			free(out);
			return NULL;
		}
		out[i] = (char)v;
	}
	out[n / 2] = '\0';
	if (n == 1 && s[0] == '-')
		out[0] = '\0';
	*p = end ? end + 1 : s + n;
	return out;
}

static int add_task(struct jo_meta *m, uint32_t depth, char **items, size_t n, uint64_t *tasks,
		    struct jo_err *err)
{
	char kind[32];
	int64_t id = 0;
	size_t added = 0;
	int rc;

	if (!n)
		return 0;
	snprintf(kind, sizeof(kind), "restore:%u", depth);
	rc = jo_mut_task_add(m, TRASH_NS, kind, (const char *const *)items, n, &id, &added, err);
	*tasks += rc == 0 && added > 0;
	for (size_t i = 0; i < n; i++)
		free(items[i]);
	return rc;
}

/* An entry's item and the line of its task's record: "ITEM PARENT NAME TNAME PATH\n"
 * (the last three hex); NULL when out of memory. */
static char *item_line(uint64_t hino, const struct trash_entry *e)
{
	char *hn = hex_of(e->to_name), *ht = hex_of(e->tname), *hp = hex_of(e->to_path), *line;

	if (!hn || !ht || !hp || asprintf(&line, "%" PRIu64 ":%" PRIu64 ":%016" PRIx64 " %" PRIu64
					  " %s %s %s\n", hino, e->ino, name_hash(e->tname),
					  e->to_parent, hn, ht, hp) < 0)
		line = NULL;
	free(hn);
	free(ht);
	free(hp);
	return line;
}

/* a task's record stays well under JO_MUT_REC_MAX (paths can be long) */
#define TASK_REC_BYTES (256u << 10)

/* Plan order within one depth, then target parent (tasks are cut per parent). */
static int cmp_task_order(const void *a, const void *b)
{
	const struct trash_entry *x = **(struct trash_entry *const *const *)a;
	const struct trash_entry *y = **(struct trash_entry *const *const *)b;
	struct trash_entry *const *pa = *(struct trash_entry *const *const *)a;
	struct trash_entry *const *pb = *(struct trash_entry *const *const *)b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->to_parent != y->to_parent)
		return x->to_parent < y->to_parent ? -1 : 1;
	return pa < pb ? -1 : pa > pb;
}

/* One task: the record "b/STAMP/SEQ" with the lines of entries [0, n) (in
 * the order given), then the task of their items and "b:STAMP:SEQ". */
static int record_task(struct trash_ls *t, struct trash_entry **es, size_t n, const char *stamp,
		       uint64_t seq, uint64_t *tasks, struct jo_err *err)
{
	char key[96], **items = calloc(n + 1, sizeof(*items));
	char *val = NULL;
	size_t len = 0, k = 0;
	FILE *f;
	int rc = 0;

	if (!items || !(f = open_memstream(&val, &len))) {
		free(items);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *line = item_line(t->hours[es[i]->hour_idx].ino, es[i]);

		if (!line || fputs(line, f) == EOF ||
		    !(items[k] = strndup(line, strcspn(line, " "))))
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		else
			k++;
		free(line);
	}
	if (fclose(f) != 0 && rc == 0)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	snprintf(key, sizeof(key), "b/%s/%" PRIu64, stamp, seq);
	if (rc == 0)
		rc = jo_mut_rec_put(t->m, TRASH_NS, key, val, NULL, NULL, err);
	free(val);
	if (rc == 0 && asprintf(&items[k], "b:%s:%" PRIu64, stamp, seq) < 0)
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	else if (rc == 0)
		k++;
	if (rc == 0) {
		rc = add_task(t->m, es[0]->depth, items, k, tasks, err); /* frees the items */
	} else {
		for (size_t i = 0; i < k; i++)
			free(items[i]);
	}
	free(items);
	return rc;
}

/*
 * Record the tasks of the restores the plan decided. Tasks of a depth come
 * before the next depth's (plan order); within a depth, one parent's
 * entries stay together, so that workers seldom restore into the same
 * directory at once (its rows are what their transactions would conflict
 * on), and the parents take turns in task order (workers claim in that
 * order). What the items need is one record per task, not one per entry.
 */
static int record_tasks(struct trash_ls *t, struct trash_entry **plan, size_t n, uint64_t *tasks,
			struct jo_err *err)
{
	size_t max = jo_mut_task_max_items(t->m), ne = 0, ngr = 0;
	struct trash_entry ***ord = calloc(n ? n : 1, sizeof(*ord));
	struct trash_entry **es = calloc(n ? n : 1, sizeof(*es));
	struct { size_t at, end; } *gr = calloc(n ? n : 1, sizeof(*gr));
	char stamp[48];
	uint64_t seq = 0;
	int rc;

	if (!ord || !es || !gr) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (!max || max > TRASH_TASK_ITEMS)
		max = TRASH_TASK_ITEMS;
	max = max > 1 ? max - 1 : 1; /* the item naming the task's record */
	snprintf(stamp, sizeof(stamp), "%" PRIx64 "-%lx", (uint64_t)time(NULL), (long)getpid());
	if ((rc = jo_mut_task_init(t->m, TRASH_NS, err)) != 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (plan[i]->restore)
			ord[ne++] = &plan[i];
	qsort(ord, ne, sizeof(*ord), cmp_task_order);
	for (size_t i = 0; i < ne && rc == 0;) {
		/* one depth: [i, d) in groups of one parent, taking turns */
		size_t d = i, left;

		while (d < ne && (*ord[d])->depth == (*ord[i])->depth)
			d++;
		ngr = 0;
		for (size_t j = i; j < d; j++)
			if (j == i || (*ord[j])->to_parent != (*ord[j - 1])->to_parent)
				gr[ngr++].at = j;
		for (size_t g = 0; g < ngr; g++)
			gr[g].end = g + 1 < ngr ? gr[g + 1].at : d;
		left = d - i;
		while (left && rc == 0) {
			for (size_t g = 0; g < ngr && rc == 0; g++) {
				size_t k = 0, bytes = 0;

				while (gr[g].at < gr[g].end && k < max && bytes < TASK_REC_BYTES) {
					struct trash_entry *e = *ord[gr[g].at++];

					bytes += 2 * (strlen(e->to_name) + strlen(e->tname) +
						      strlen(e->to_path)) + 64;
					es[k++] = e;
				}
				if (k)
					rc = record_task(t, es, k, stamp, seq++, tasks, err);
				left -= k;
			}
		}
		i = d;
	}
out:
	free(ord);
	free(es);
	free(gr);
	return rc;
}

struct worker_stats {
	uint64_t tasks, restored, skipped;
};

/*
 * The line of item in its task's record rec (lines in the order of the
 * task's items: *at is where the previous one ended), as a malloc'd string
 * after the item; NULL when the record has none.
 */
static char *task_line(const char *rec, size_t *at, const char *item)
{
	size_t il = strlen(item);

	for (int pass = 0; rec && pass < 2; pass++) {
		const char *p = rec + (pass ? 0 : *at);

		while (*p) {
			const char *nl = strchr(p, '\n');
			size_t len = nl ? (size_t)(nl - p) : strlen(p);

			if (len > il && !memcmp(p, item, il) && p[il] == ' ') {
				*at = (size_t)(p - rec) + len + (nl != NULL);
				return strndup(p + il + 1, len - il - 1);
			}
			p += len + (nl != NULL);
		}
	}
	return NULL;
}

/* One item of a claimed task; rec: its task's record (NULL: none, or a plan
 * of an earlier version, whose items each have a record "r/..."). */
static int load_item(struct jo_meta *m, const char *item, const char *rec, size_t *rec_at,
		     struct trash_entry *e, uint64_t *hino_out, struct jo_err *err)
{
	unsigned long long hino, ino, parent;
	char key[64], *val = NULL;
	const char *p;
	int rc = 0, n = 0;

	memset(e, 0, sizeof(*e));
	if (!item_key(item, &hino, &ino, key, sizeof(key)))
		return 0; /* not ours to judge (the item naming the record too) */
	if (!(val = task_line(rec, rec_at, item)))
		rc = jo_mut_rec_get(m, TRASH_NS, key, &val, err);
	if (rc == JO_ENOTFOUND) {
		jo_err_clear(err);
		return 0;
	}
	if (rc)
		return rc;
	if (sscanf(val, "%llu %n", &parent, &n) != 1 || !n) {
		free(val);
		return 0;
	}
	p = val + n;
	e->ino = ino;
	e->to_parent = parent;
	e->to_name = hex_word(&p);
	e->tname = hex_word(&p);
	e->to_path = hex_word(&p);
	free(val);
	*hino_out = hino;
	if (e->to_name && e->tname && e->to_path) {
		e->restore = true;
		e->path = e->to_path;
	}
	return 0;
}

static int report_item(const struct trash_restore_opts *ro, const struct trash_entry *e,
		       struct worker_stats *ws, const struct jo_ctx *ctx, struct jo_err *err)
{
	audit_entry(ro, e, e->restore ? "ok" : "skipped", e->restore ? NULL : e->skip, "restore");
	if (e->restore)
		ws->restored++;
	else
		ws->skipped++;
	if (ctx->json) {
		json_t *o = json_pack("{s:s,s:s,s:I,s:o,s:s?}", "type", "restore",
				      "action", e->restore ? "restored" : "skip",
				      "inode", (json_int_t)e->ino, "target", jname(e->to_path),
				      "reason", e->restore ? NULL : e->skip);

		if (emit_json(o))
			return jo_err_set(err, JO_EIO, "cannot write to stdout");
	} else {
		printf("%s  %s  inode %" PRIu64 "%s%s\n", e->restore ? "restored" : "skip    ",
		       JO_ESC_TERM(e->to_path), e->ino, e->restore ? "" : ": ",
		       e->restore ? "" : e->skip);
	}
	return 0;
}

/* Items its[0..n) of a claimed task (n <= APPLY_BATCH), restored together. */
static int work_items(struct jo_meta *m, const struct trash_restore_opts *ro, char **its, size_t n,
		      const char *rec, size_t *rec_at, struct worker_stats *ws,
		      const struct jo_ctx *ctx, struct jo_err *err)
{
	struct trash_entry ents[APPLY_BATCH], *es[APPLY_BATCH];
	uint64_t hinos[APPLY_BATCH];
	size_t k = 0, done = 0, nl = 0;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++, nl++) {
		rc = load_item(m, its[i], rec, rec_at, &ents[i], &hinos[k], err);
		if (rc == 0 && ents[i].restore)
			es[k++] = &ents[i];
	}
	if (rc == 0)
		rc = apply_batch(m, ro, hinos, es, k, &done, err);
	for (size_t i = 0; i < done; i++) {
		int r2 = report_item(ro, es[i], ws, ctx, err);

		if (!rc)
			rc = r2;
	}
	for (size_t i = 0; i < nl; i++) {
		free(ents[i].to_name);
		free(ents[i].tname);
		free(ents[i].to_path);
	}
	return rc;
}

static void drop_records(struct jo_meta *m, char *items)
{
	char *save = NULL;

	for (char *it = strtok_r(items, "\n", &save); it; it = strtok_r(NULL, "\n", &save)) {
		unsigned long long hino, ino;
		char key[64];
		struct jo_err e2 = { 0 };

		if (!item_key(it, &hino, &ino, key, sizeof(key)))
			continue;
		(void)jo_mut_rec_put(m, TRASH_NS, key, NULL, NULL, NULL, &e2); /* a leftover is harmless */
	}
}

/* The record of a task whose items name one ("b:STAMP:SEQ"): *rec
 * (malloc'd) and its key; *rec NULL when there is none. */
static int task_record(struct jo_meta *m, const char *items, char *key, size_t cap, char **rec,
		       struct jo_err *err)
{
	const char *p = items;
	int rc;

	*rec = NULL;
	while (p && *p) {
		size_t len = strcspn(p, "\n");

		if (len > 2 && len < cap - 1 && !memcmp(p, "b:", 2)) {
			snprintf(key, cap, "b/%.*s", (int)(len - 2), p + 2);
			for (char *c = key + 2; *c; c++)
				if (*c == ':')
					*c = '/';
			rc = jo_mut_rec_get(m, TRASH_NS, key, rec, err);
			if (rc == JO_ENOTFOUND) {
				jo_err_clear(err);
				rc = 0;
			}
			return rc;
		}
		p += len + (p[len] == '\n');
	}
	return 0;
}

/* The JSON summary o of a run that ends with rc: rc, or JO_EIO when stdout failed. */
static int summary_out(const struct jo_ctx *ctx, int rc, json_t *o, struct jo_err *err)
{
	if (cmd_summary_emit(ctx, o, true, JO_EXIT_OK))
		return jo_err_set(err, JO_EIO, "cannot write to stdout");
	return rc;
}

static int trash_worker_run(struct jo_meta *m, const struct trash_restore_opts *ro,
			    const struct jo_ctx *ctx, struct jo_err *err)
{
	struct worker_stats ws = { 0 };
	struct jo_lease *lease = NULL;
	char owner[128];
	int rc;

	jo_lease_owner(owner, sizeof(owner), NULL);
	{
		struct jo_lease_opts lo = { .ns = TRASH_NS, .owner = owner,
					    .lease_ms = ro->lease_ms };

		if ((rc = jo_lease_new(&lease, m, &lo, err)) != 0)
			return rc;
	}
	while (!jo_cancelled()) {
		struct jo_mut_task task = { 0 };
		char *save = NULL, *item, *items_copy, *rec = NULL, rec_key[96], *batch[APPLY_BATCH];
		size_t rec_at = 0, nb = 0;
		bool lost = false;

		/* until no task is left: one another worker gave up, or a dead
		 * worker's once its lease runs out, is worked here */
		rc = jo_lease_claim_wait(lease, m, &task, err);
		if (rc == JO_ENOTFOUND) {
			jo_err_clear(err);
			rc = 0;
			break;
		}
		if (rc)
			break;
		items_copy = rc == 0 ? strdup(task.items ? task.items : "") : NULL;
		if (rc == 0 && !items_copy)
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		if (rc == 0)
			rc = task_record(m, items_copy, rec_key, sizeof(rec_key), &rec, err);
		item = rc ? NULL : strtok_r(task.items, "\n", &save);
		while (item || nb) {
			if (item && nb < APPLY_BATCH) {
				batch[nb++] = item;
				item = strtok_r(NULL, "\n", &save);
				continue;
			}
			if (jo_cancelled())
				break;
			if (!jo_lease_valid(lease)) {
				lost = true;
				break;
			}
			rc = work_items(m, ro, batch, nb, rec, &rec_at, &ws, ctx, err);
			nb = 0;
			if (rc)
				break;
		}
		if (rc == 0 && !lost && item == NULL && nb == 0) {
			rc = jo_lease_complete(lease, m, err);
			if (rc == 0) {
				ws.tasks++;
				if (rec) {
					struct jo_err e2 = { 0 };

					/* a leftover is harmless */
					(void)jo_mut_rec_put(m, TRASH_NS, rec_key, NULL, NULL, NULL,
							     &e2);
				} else {
					drop_records(m, items_copy);
				}
			} else if (rc == JO_ECONFLICT) {
				lost = true;
				rc = 0;
			}
		} else {
			struct jo_err e2 = { 0 };

			/* given back at once, also when its lease is no longer
			 * certain (the release is refused if another worker has
			 * it): left leased, no other worker would take it before
			 * the lease runs out */
			(void)jo_lease_release(lease, m, &e2);
		}
		if (lost)
			fprintf(stderr, "jfsops trash: lost the lease of task %" PRId64
				": stopped working on it\n", task.id);
		free(items_copy);
		free(rec);
		rec = NULL;
		rec_at = 0;
		jo_mut_task_release_mem(&task);
		if (rc)
			break;
	}
	jo_lease_free(lease);
	if (rc == 0 && jo_cancelled())
		rc = jo_err_set(err, JO_ECANCELED, "interrupted");
	if (rc)
		return rc;
	if (ctx->json) {
		if (summary_out(ctx, 0, json_pack("{s:s,s:s,s:b,s:I,s:I,s:I}", "action", "restore",
						  "mode", "worker", "dry_run", 0,
						  "tasks", (json_int_t)ws.tasks,
						  "restored", (json_int_t)ws.restored,
						  "skipped", (json_int_t)ws.skipped), err))
			return JO_EIO;
	} else {
		printf("worker: %" PRIu64 " tasks, %" PRIu64 " entries restored, %" PRIu64
		       " skipped\n", ws.tasks, ws.restored, ws.skipped);
	}
	return 0;
}

static int trash_restore_run(struct trash_ls *t, const struct trash_filter *f,
			     const struct trash_restore_opts *ro, const struct jo_ctx *ctx,
			     struct jo_err *err)
{
	struct trash_entry **plan = NULL, *fail = NULL;
	struct name_set ns = { 0 };
	size_t nplan = 0;
	uint64_t restored = 0, skipped = 0, conflicts = 0, renamed = 0, bytes = 0;
	int rc = 0;

	if ((rc = select_plan(t, f, cmp_plan, &plan, &nplan, err)) != 0)
		goto out;
	for (size_t i = 0, w = 0, nb = 0, done = 0; i < nplan; i++) {
		struct trash_entry *e = plan[i];
		const char *type = e->have_attr ? type_name(e->attr.type) : "gone";
		uint64_t size = e->have_attr ? e->attr.length : 0;

		if (e == fail) {
			jo_err_wrap(err, "restore %s", JO_ESC_TERM(e->path));
			goto out;
		}
		if (i == w) {
			/* the next entries of one depth (none goes into another): planned,
			 * then restored together, then reported one by one */
			struct trash_entry *bes[APPLY_BATCH];
			uint64_t bh[APPLY_BATCH];

			nb = done = 0;
			for (; w < nplan && nb < APPLY_BATCH && plan[w]->depth == e->depth; w++) {
				struct trash_entry *we = plan[w];

				if (!we->have_attr)
					we->skip = "the inode is gone";
				else if ((rc = plan_one(t, ro, &ns, we, &conflicts, err)) != 0)
					goto out;
				if (ro->apply && we->restore) {
					bh[nb] = t->hours[we->hour_idx].ino;
					bes[nb++] = we;
				}
			}
			if (nb)
				rc = apply_batch(t->m, ro, bh, bes, nb, &done, err);
			if (rc && done >= nb)
				goto out;
			if (rc) {
				/* what was done before it is reported first */
				fail = bes[done];
				if (e == fail) {
					jo_err_wrap(err, "restore %s", JO_ESC_TERM(e->path));
					goto out;
				}
				w = nplan;
			}
		}
		if (ro->apply)
			audit_entry(ro, e, e->restore ? "ok" : "skipped", e->restore ? NULL : e->skip,
				    "restore");
		if (e->restore) {
			restored++;
			bytes += size;
			renamed += e->renamed;
		} else {
			skipped++;
		}
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:s,s:I,s:I,s:o,s:s?}", "type", "restore",
					      "action", !e->restore ? "skip" : ro->apply ? "restored" :
					      "would-restore",
					      "hour", t->hours[e->hour_idx].name, "path", jname(e->path),
					      "kind", type, "size", (json_int_t)size,
					      "inode", (json_int_t)e->ino,
					      "target", jname(e->restore ? e->to_path : NULL),
					      "reason", e->restore ? NULL : e->skip);

			if (emit_json(o)) {
				rc = jo_err_set(err, JO_EIO, "cannot write to stdout");
				goto out;
			}
		} else if (e->restore) {
			printf("%s  %s  %-7s inode %" PRIu64 " -> %s\n",
			       ro->apply ? "restored     " : "would restore", JO_ESC_TERM(e->path),
			       type, e->ino, JO_ESC_TERM(e->to_path));
		} else {
			printf("skip           %s  %-7s inode %" PRIu64 ": %s\n", JO_ESC_TERM(e->path),
			       type, e->ino, e->skip);
		}
	}
	if (ro->plan) {
		uint64_t tasks = 0;

		if ((rc = record_tasks(t, plan, nplan, &tasks, err)) != 0)
			goto out;
		if (ctx->json) {
			rc = summary_out(ctx, rc, json_pack("{s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I}",
							    "action", "restore", "mode", "plan",
							    "dry_run", 0, "selected", (json_int_t)nplan,
							    "planned", (json_int_t)restored,
							    "tasks", (json_int_t)tasks,
							    "skipped", (json_int_t)skipped,
							    "conflicts", (json_int_t)conflicts), err);
		} else {
			printf("planned %" PRIu64 " of %" PRIu64 " entries in %" PRIu64 " tasks, %" PRIu64
			       " skipped: run `jfsops trash restore META-URL --worker --apply`\n",
			       restored, (uint64_t)nplan, tasks, skipped);
		}
		goto out;
	}
	if (ctx->json) {
		rc = summary_out(ctx, rc, json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I}",
						    "action", "restore", "dry_run", !ro->apply,
						    "selected", (json_int_t)nplan,
						    ro->apply ? "restored" : "would_restore",
						    (json_int_t)restored, "skipped", (json_int_t)skipped,
						    "conflicts", (json_int_t)conflicts,
						    "renamed", (json_int_t)renamed,
						    "bytes", (json_int_t)bytes), err);
	} else {
		printf("%s %" PRIu64 " of %" PRIu64 " entries (%" PRIu64
		       " bytes), %" PRIu64 " skipped, %" PRIu64 " name conflicts (%" PRIu64
		       " renamed)\n", ro->apply ? "restored" : "dry run: would restore", restored,
		       (uint64_t)nplan, bytes, skipped, conflicts, renamed);
	}
out:
	name_set_release(&ns);
	free(plan);
	return rc;
}

/* ---- purge: remove entries from the trash now (CleanupTrashBefore's removal) ---- */

static int cmp_purge(const void *a, const void *b)
{
	const struct trash_entry *x = *(struct trash_entry *const *)a;
	const struct trash_entry *y = *(struct trash_entry *const *)b;

	/* children first: a directory of the trash that holds restored-into
	 * entries is then empty when its turn comes */
	if (x->depth != y->depth)
		return x->depth > y->depth ? -1 : 1;
	if (x->hour != y->hour)
		return x->hour < y->hour ? -1 : 1;
	return strcmp(x->path, y->path);
}

/* Remove one entry as juicefs's trash cleanup does (doUnlink/doRmdir with
 * the trash skipped): a file whose last link goes becomes a delfiles entry
 * for gc. *freed gets the bytes handed to gc; e->skip is set on a refusal. */
static int purge_one(struct trash_ls *t, const struct trash_restore_opts *ro, struct trash_entry *e,
		     uint64_t *freed, struct jo_err *err)
{
	const struct trash_hour *h = &t->hours[e->hour_idx];
	struct jo_rm_res res;
	bool dir = e->have_attr ? e->attr.type == JO_TYPE_DIR : false;
	int rc;

	*freed = 0;
	if (!e->have_attr) {
		uint64_t ino;
		uint8_t type = 0;

		rc = jo_meta_lookup(t->m, h->ino, e->tname, &ino, &type, err);
		if (rc == JO_ENOTFOUND) {
			jo_err_clear(err);
			e->skip = "the entry left the trash meanwhile";
			return 0;
		}
		if (rc)
			return rc;
		dir = type == JO_TYPE_DIR;
	}
	rc = dir ? jo_mut_rmdir(t->m, h->ino, e->tname, strlen(e->tname), ro->dir_stats, &res, err)
		 : jo_mut_unlink(t->m, h->ino, e->tname, strlen(e->tname), ro->dir_stats, &res, err);
	if (rc)
		return rc;
	switch (res.status) {
	case JO_RM_DONE:
		if (res.delfile)
			*freed = res.length;
		return 0;
	case JO_RM_GONE:
		e->skip = "the entry left the trash meanwhile";
		return 0;
	case JO_RM_NOTEMPTY:
		e->skip = "the directory holds entries (restored into it while in the trash)";
		return 0;
	case JO_RM_PERM:
		e->skip = "append-only or immutable (EPERM)";
		return 0;
	default:
		e->skip = "its type changed meanwhile";
		return 0;
	}
}

/* An hour directory this purge emptied is removed, as the cleanup does once
 * it emptied one (doRmdir(TrashInode, hour)). left[2i]: entries it keeps,
 * left[2i+1]: entries purged. */
static int purge_hours(struct trash_ls *t, const uint64_t *left, struct jo_err *err)
{
	for (size_t i = 0; i < t->nhours; i++) {
		struct jo_rm_res res;
		int rc;

		if (left[2 * i] || !left[2 * i + 1])
			continue;
		rc = jo_mut_rmdir(t->m, JO_TRASH_INODE, t->hours[i].name, strlen(t->hours[i].name),
				  false, &res, err);
		if (rc)
			return rc;
	}
	return 0;
}

static int trash_purge_run(struct trash_ls *t, const struct trash_filter *f,
			   const struct trash_restore_opts *ro, const struct jo_ctx *ctx,
			   struct jo_err *err)
{
	struct trash_entry **plan = NULL;
	uint64_t *left = calloc(t->nhours ? 2 * t->nhours : 1, sizeof(*left));
	size_t nplan = 0;
	uint64_t purged = 0, skipped = 0, bytes = 0, freed_total = 0;
	int rc = 0;

	if (!left)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if ((rc = select_plan(t, f, cmp_purge, &plan, &nplan, err)) != 0)
		goto out;
	for (size_t i = 0; i < t->nents; i++)
		left[2 * t->ents[i].hour_idx] += !t->ents[i].sel;
	for (size_t i = 0; i < nplan; i++) {
		struct trash_entry *e = plan[i];
		const char *type = e->have_attr ? type_name(e->attr.type) : "gone";
		uint64_t size = e->have_attr ? e->attr.length : 0, freed = 0;
		/* the data goes with the last link only */
		bool frees = e->have_attr && e->attr.type == JO_TYPE_FILE && e->attr.nlink == 1;

		if (ro->apply) {
			if ((rc = purge_one(t, ro, e, &freed, err)) != 0) {
				audit_entry(ro, e, "error", err->msg, "purge");
				jo_err_wrap(err, "purge %s", JO_ESC_TERM(e->path));
				goto out;
			}
			audit_entry(ro, e, e->skip ? "skipped" : "ok", e->skip, "purge");
		} else {
			freed = frees ? size : 0;
		}
		if (e->skip) {
			skipped++;
			left[2 * e->hour_idx]++;
		} else {
			left[2 * e->hour_idx + 1]++;
			purged++;
			bytes += size;
			freed_total += freed;
		}
		if (ctx->json) {
			json_t *o = json_pack("{s:s,s:s,s:s,s:o,s:s,s:I,s:I,s:I,s:s?}", "type", "purge",
					      "action", e->skip ? "skip" : ro->apply ? "purged" :
					      "would-purge", "hour", t->hours[e->hour_idx].name,
					      "path", jname(e->path), "kind", type, "size", (json_int_t)size,
					      "inode", (json_int_t)e->ino, "freed", (json_int_t)freed,
					      "reason", e->skip);

			if (emit_json(o)) {
				rc = jo_err_set(err, JO_EIO, "cannot write to stdout");
				goto out;
			}
		} else {
			printf("%s  %s  %-7s inode %" PRIu64 "%s%s\n", e->skip ? "skip         " :
			       ro->apply ? "purged       " : "would purge  ", JO_ESC_TERM(e->path), type,
			       e->ino, e->skip ? ": " : "", e->skip ? e->skip : "");
		}
	}
	if (ro->apply && (rc = purge_hours(t, left, err)) != 0)
		goto out;
	if (ctx->json) {
		rc = summary_out(ctx, rc, json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:I}", "action", "purge",
						    "dry_run", !ro->apply, "selected", (json_int_t)nplan,
						    ro->apply ? "purged" : "would_purge", (json_int_t)purged,
						    "skipped", (json_int_t)skipped, "bytes", (json_int_t)bytes,
						    "bytes_freed", (json_int_t)freed_total), err);
	} else {
		printf("%s %" PRIu64 " of %" PRIu64 " entries, %" PRIu64 " skipped; %" PRIu64
		       " bytes of file data handed to gc\n", ro->apply ? "purged" :
		       "dry run: would purge", purged, (uint64_t)nplan, skipped, freed_total);
	}
out:
	free(plan);
	free(left);
	return rc;
}

enum trash_mode { MODE_LS, MODE_RESTORE, MODE_PURGE };

/* The command line of trash ls/restore/purge. */
struct trash_args {
	struct trash_filter f;
	struct trash_restore_opts ro;
	bool apply, all, worker, conflict;
	const char *audit_path;
	int64_t now;
};

/* --since T, --until T, --uid N, --conflict skip|rename */
static int trash_cb(const struct jo_option *o, const char *arg, char *want, size_t cap)
{
	struct trash_args *a = o->value;
	const char *name = o->long_name;
	uint64_t v;

	if (!strcmp(name, "since") || !strcmp(name, "until")) {
		bool since = name[0] == 's';

		if (parse_when(arg, a->now, since ? &a->f.since : &a->f.until)) {
			snprintf(want, cap, "want an RFC 3339 time or an age like 6h");
			return -1;
		}
		*(since ? &a->f.has_since : &a->f.has_until) = true;
	} else if (!strcmp(name, "uid")) {
		if (jo_parse_uint(arg, 0, UINT32_MAX, &v)) {
			snprintf(want, cap, "want an integer up to %" PRIu32, UINT32_MAX);
			return -1;
		}
		a->f.uid = (uint32_t)v;
		a->f.has_uid = true;
	} else if (!strcmp(arg, "skip") || !strcmp(arg, "rename")) {
		a->ro.rename = arg[0] == 'r';
		a->conflict = true;
	} else {
		snprintf(want, cap, "want skip or rename");
		return -1;
	}
	return 0;
}

/* Which flags go with which subcommand, and together; -1 when they agree, else the exit code. */
static int check_args(const struct jo_opt_cmd *cmd, struct trash_args *a, enum trash_mode mode)
{
	const struct trash_filter *f = &a->f;
	bool filters = f->has_since || f->has_until || f->path || f->has_uid || f->name;
	struct trash_restore_opts *ro = &a->ro;

	if (mode != MODE_RESTORE) {
		const char *only = a->conflict ? "conflict" : ro->into ? "into" : ro->plan ? "plan" :
				   a->worker ? "worker" : ro->lease_ms ? "lease" : NULL;

		if (only)
			return jo_opt_error(cmd, "--%s is an option of trash restore", only);
	}
	if (mode == MODE_LS && (a->apply || a->audit_path))
		return jo_opt_error(cmd, "--%s is an option of trash restore and purge",
				    a->apply ? "apply" : "audit");
	if (mode != MODE_PURGE && a->all)
		return jo_opt_error(cmd, "--all is an option of trash purge");
	if (ro->into && ro->into[0] != '/')
		return jo_opt_error(cmd, "--into '%s' must be absolute", ro->into);
	if (a->audit_path && !a->apply)
		return jo_opt_error(cmd, "--audit goes with --apply");
	if (mode == MODE_PURGE && !a->all && !filters)
		return jo_opt_error(cmd, "trash purge needs a filter (--since, --until, --path, "
				    "--uid, --name) or --all");
	if (a->all && filters)
		return jo_opt_error(cmd, "--all goes without filters");
	if ((ro->plan || a->worker) && !a->apply)
		return jo_opt_error(cmd, "--plan and --worker go with --apply (without it, restore "
				    "prints its plan)");
	if (ro->plan && a->worker)
		return jo_opt_error(cmd, "--plan and --worker: one or the other");
	if (a->worker && (filters || ro->into || ro->rename))
		return jo_opt_error(cmd, "--worker takes no filters, --conflict or --into: the "
				    "plan decided them");
	if (ro->lease_ms && !a->worker)
		return jo_opt_error(cmd, "--lease goes with --worker");
	if (!ro->lease_ms)
		ro->lease_ms = 60000;
	ro->apply = a->apply && !ro->plan; /* a plan decides; its workers apply */
	if (f->path && f->path[0] != '/')
		return jo_opt_error(cmd, "--path '%s' must be absolute", f->path);
	return -1;
}

static int trash_main(struct jo_ctx *ctx, struct trash_args *a, char *url_arg, enum trash_mode mode)
{
	bool restore = mode == MODE_RESTORE, writes = mode != MODE_LS, worker = a->worker;
	bool apply = a->apply;
	const char *audit_path = a->audit_path;
	struct trash_restore_opts ro = a->ro;
	struct trash_filter f = a->f;
	struct trash_ls t = { 0 };
	struct jo_format fmt = { 0 };
	struct jo_err err = { 0 };
	uint64_t shown = 0, bytes = 0;
	char *url = NULL, *path = NULL;
	int rc;

	if (f.path) {
		size_t l;

		path = strdup(f.path);
		if (!path)
			return JO_EXIT_FAIL;
		l = strlen(path);
		while (l > 0 && path[l - 1] == '/')
			path[--l] = '\0';
		f.path = path;
	}
	url = strdup(url_arg);
	if (!url) {
		free(path);
		return JO_EXIT_FAIL;
	}
	cmd_scrub_url_password(url_arg);
	rc = cmd_meta_open_mode(url, !apply, &t.m, &err);
	if (!rc)
		rc = jo_meta_load_format(t.m, &fmt, &err);
	if (!rc)
		cmd_metrics_volume(ctx, fmt.name); /* the summary's volume */
	ro.dir_stats = fmt.dir_stats;
	if (!rc && worker) {
		if (fmt.changelog)
			rc = jo_err_set(&err, JO_EUNSUPPORTED, "the volume keeps a change log: "
					"trash restore --apply does not write one");
		if (!rc && audit_path)
			rc = jo_audit_open(&ro.audit, audit_path, &err);
		if (!rc)
			rc = trash_worker_run(t.m, &ro, ctx, &err);
		if (rc)
			rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (!rc)
		rc = trash_load(&t, &err);
	if (!rc && ro.into) {
		struct jo_attr ia;

		rc = jo_meta_resolve(t.m, ro.into, &ro.into_ino, &err);
		if (!rc)
			rc = jo_meta_getattr(t.m, ro.into_ino, &ia, &err);
		if (!rc && (ia.type != JO_TYPE_DIR || jo_ino_is_trash(ro.into_ino)))
			rc = jo_err_set(&err, JO_EINVAL, "--into '%s' is not a directory outside the trash",
					JO_ESC_TERM(ro.into));
		if (rc)
			jo_err_wrap(&err, "--into");
		if (!rc && !(ro.into_path = strdup(ro.into)))
			rc = jo_err_set(&err, JO_ENOMEM, "out of memory");
		for (size_t l = ro.into_path ? strlen(ro.into_path) : 0; l > 0 && ro.into_path[l - 1] == '/';)
			ro.into_path[--l] = '\0';
	}
	if (!rc && writes && apply && fmt.changelog)
		rc = jo_err_set(&err, JO_EUNSUPPORTED, "the volume keeps a change log: "
				"trash %s --apply does not write one", restore ? "restore" : "purge");
	ro.dir_stats = fmt.dir_stats;
	if (!rc && writes && audit_path)
		rc = jo_audit_open(&ro.audit, audit_path, &err);
	if (!rc && mode == MODE_PURGE) {
		rc = trash_purge_run(&t, &f, &ro, ctx, &err);
		if (rc)
			rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (!rc && restore) {
		rc = trash_restore_run(&t, &f, &ro, ctx, &err);
		if (rc)
			rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (!rc)
		rc = trash_ls_print(&t, &f, ctx, &shown, &bytes, &err);
	if (rc) {
		rc = cmd_fail(ctx, &err);
		goto out;
	}
	if (ctx->json) {
		json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I}", "action", "ls",
				      "hours", (json_int_t)t.nhours, "entries_scanned", (json_int_t)t.nents,
				      "entries", (json_int_t)shown, "bytes", (json_int_t)bytes);

		if (cmd_summary_emit(ctx, o, true, JO_EXIT_OK))
			rc = JO_EXIT_FAIL;
	} else {
		printf("total: %" PRIu64 " entries, %" PRIu64 " bytes (of %zu entries in %zu hour directories)\n",
		       shown, bytes, t.nents, t.nhours);
	}
	if (fflush(stdout) != 0 && !rc)
		rc = errno == EPIPE ? JO_EXIT_SIGPIPE : JO_EXIT_FAIL;
out:
	trash_ls_release(&t);
	jo_format_release(&fmt);
	jo_meta_close(t.m);
	free(url);
	free(path);
	free(ro.into_path);
	if (ro.audit) {
		struct jo_err aerr = { 0 };

		if (jo_audit_sync(ro.audit, &aerr))
			fprintf(stderr, "jfsops trash: audit: %s\n", JO_ESC_TERM(aerr.msg));
		jo_audit_close(ro.audit);
	}
	return rc;
}

int cmd_trash(int argc, char **argv, struct jo_ctx *ctx)
{
	static const char *const subs[] = { [MODE_LS] = "ls", [MODE_RESTORE] = "restore",
					    [MODE_PURGE] = "purge" };
	struct trash_args a = { .now = (int64_t)time(NULL) };
	struct jo_option opts[] = {
		OPT_GROUP("Options:"),
		OPT_CALLBACK(0, "since", &a, "T", "entries deleted at or after T: an RFC 3339 time "
			     "(2026-12-03T17:00:00Z, 2026-12-03T18:00:00+01:00) or an age (90m, 6h, "
			     "2d) before now (default: no lower bound)", trash_cb),
		OPT_CALLBACK(0, "until", &a, "T", "entries deleted before T, same forms (default: no "
			     "upper bound)", trash_cb),
		OPT_STRING(0, "path", &a.f.path, "PREFIX", "entries whose original path is PREFIX or "
			   "under it (default: /)"),
		OPT_CALLBACK(0, "uid", &a, "N", "entries owned by uid N (default: any owner)",
			     trash_cb),
		OPT_STRING(0, "name", &a.f.name, "GLOB", "entries whose own name matches GLOB, "
			   "fnmatch (default: any)"),
		OPT_CALLBACK(0, "conflict", &a, "skip|rename", "restore: when the name is taken in "
			     "the parent, skip the entry or restore it as NAME.restored-TIME (default: "
			     "skip)", trash_cb),
		OPT_STRING(0, "into", &a.ro.into, "DIR", "restore: entries whose parent is gone (from "
			   "the volume, or left in the trash) go into DIR (default: they are skipped)"),
		OPT_BOOL(0, "all", &a.all, "purge: every entry (purge refuses to run without a filter "
			 "or --all)"),
		OPT_BOOL(0, "apply", &a.apply, "restore/purge: do it (default: print what it would "
			 "do)"),
		OPT_BOOL(0, "plan", &a.ro.plan, "restore, with --apply: record the restores as tasks "
			 "in the volume's engine for workers (default: restore here)"),
		OPT_BOOL(0, "worker", &a.worker, "restore, with --apply: claim recorded tasks by lease "
			 "and work them until none is left (any number, on any host)"),
		OPT_DURATION(0, "lease", &a.ro.lease_ms, "D", "--worker: lease length, e.g. 30s "
			     "(default: 60s); a worker killed mid-task delays its task by that much",
			     1000, 0),
		OPT_STRING(0, "audit", &a.audit_path, "FILE", "with --apply: append one JSON line per "
			   "entry to FILE (default: no audit trail)"),
		OPT_BOOL(0, "json", &ctx->json, "JSON lines on stdout: one per entry "
			 "(\"type\":\"entry\", \"restore\" or \"purge\"), one per hour directory (ls), "
			 "a summary"),
		OPT_HELP(),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, usage_head, usage_tail, opts };
	int n = jo_opt_parse(&cmd, argc, argv), rc;
	size_t mode;

	if (n < 0)
		return cmd_opt_exit(ctx, n);
	if (n < 1)
		return jo_opt_error(&cmd, "expected a subcommand: ls, restore or purge");
	for (mode = 0; mode < sizeof(subs) / sizeof(subs[0]); mode++)
		if (!strcmp(argv[1], subs[mode]))
			break;
	if (mode == sizeof(subs) / sizeof(subs[0]))
		return jo_opt_error(&cmd, "unknown subcommand '%s' (ls, restore or purge)", argv[1]);
	rc = check_args(&cmd, &a, (enum trash_mode)mode);
	if (rc >= 0)
		return rc;
	if (n != 2)
		return jo_opt_error(&cmd, "expected one META-URL");
	return trash_main(ctx, &a, argv[2], (enum trash_mode)mode);
}
