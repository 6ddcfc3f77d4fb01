/*
 * test_trash_rm.c: jo_mut_unlink()/jo_mut_rmdir() on synthetic volumes (a
 * private redis-server and an on-disk SQLite database with the schema of a
 * real juicefs 1.4 volume) holding a trash hour directory with a plain file,
 * a hard link, a symlink, a file with an xattr, an immutable file, an empty
 * and a non-empty directory (plus, outside the trash, the hard link's other
 * name and an empty directory); checks every key/row each removal must change
 * (entry, inode, delfiles, symlink, xattrs, p{ino}, usedSpace/totalInodes,
 * directory statistics and quotas, parent attrs: untouched for trash parents)
 * and that refused removals change nothing.
 * Also jo_trash_hour_parse()/jo_trash_hour_name() (trash hour directory names).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/meta/meta.h"
#include "common/meta/meta_mut.h"
#include "gc_testutil.h"

#define T_INO JO_TRASH_INODE
#define H_INO (JO_TRASH_INODE + 1)     /* the hour directory with entries */
#define H2_INO (JO_TRASH_INODE + 2)    /* an empty hour directory */
#define H_NAME "2026-11-26-10"
#define H2_NAME "2026-11-26-11"
#define OLD 1700000000LL               /* every inode's times (unix s) */

#define N_PLAIN "1-10-plain"
#define N_HARD "1-11-hard"
#define N_SYM "1-12-sym"
#define N_XATTR "1-13-xattr"
#define N_IMMUT "1-14-immutable"
#define N_EMPTY "1-15-empty"
#define N_FULL "1-16-full"
#define N_INNER "inner"
#define N_ROOTLINK "hardlink"
#define N_ROOTDIR "dir"
#define SYM_TARGET "target"

struct tnode {
	uint64_t ino;
	uint8_t type;
	uint8_t flags;
	uint16_t mode;
	uint32_t nlink;
	uint64_t length;
	uint64_t parent;
};

static const struct tnode g_nodes[] = {
	{ 1, JO_TYPE_DIR, 0, 0777, 3, 4096, 1 },
	{ T_INO, JO_TYPE_DIR, 0, 0555, 4, 4096, 1 },
	{ H_INO, JO_TYPE_DIR, 0, 0555, 4, 4096, T_INO },
	{ H2_INO, JO_TYPE_DIR, 0, 0555, 2, 4096, T_INO },
	{ 10, JO_TYPE_FILE, 0, 0644, 1, 10000, H_INO },
	{ 11, JO_TYPE_FILE, 0, 0644, 2, 5000, 0 },
	{ 12, JO_TYPE_SYMLINK, 0, 0777, 1, sizeof(SYM_TARGET) - 1, H_INO },
	{ 13, JO_TYPE_FILE, 0, 0644, 1, 0, H_INO },
	{ 14, JO_TYPE_FILE, 1, 0644, 1, 100, H_INO },
	{ 15, JO_TYPE_DIR, 0, 0755, 2, 4096, H_INO },
	{ 16, JO_TYPE_DIR, 0, 0755, 2, 4096, H_INO },
	{ 17, JO_TYPE_FILE, 0, 0644, 1, 1, 16 },
	{ 18, JO_TYPE_DIR, 0, 0755, 2, 4096, 1 },
};

struct tedge {
	uint64_t parent;
	const char *name;
	uint64_t ino;
};

static const struct tedge g_edges[] = {
	{ 1, N_ROOTLINK, 11 },
	{ 1, N_ROOTDIR, 18 },
	{ T_INO, H_NAME, H_INO },
	{ T_INO, H2_NAME, H2_INO },
	{ H_INO, N_PLAIN, 10 },
	{ H_INO, N_HARD, 11 },
	{ H_INO, N_SYM, 12 },
	{ H_INO, N_XATTR, 13 },
	{ H_INO, N_IMMUT, 14 },
	{ H_INO, N_EMPTY, 15 },
	{ H_INO, N_FULL, 16 },
	{ 16, N_INNER, 17 },
};

#define NNODES (sizeof(g_nodes) / sizeof(g_nodes[0]))
#define NEDGES (sizeof(g_edges) / sizeof(g_edges[0]))

/* directories whose statistics are recorded */
static const uint64_t g_stat_dirs[] = { 1, T_INO, H_INO, H2_INO, 15, 16, 18 };
#define NSTAT (sizeof(g_stat_dirs) / sizeof(g_stat_dirs[0]))

static struct gct_redis g_redis;
static bool g_have_redis;
static char g_dir[256];
static int g_case;

struct fixture {
	bool redis;
	char url[512];
	redisContext *rc;    /* checker connections, independent of the jo_meta handle */
	sqlite3 *db;
	struct jo_meta *m;
};

struct dstat {
	int64_t length, space, inodes;
};

static int64_t align4k(uint64_t len)
{
	return len == 0 ? 4096 : (int64_t)((((len - 1) >> 12) + 1) << 12);
}

static const struct tnode *node_of(uint64_t ino)
{
	for (size_t i = 0; i < NNODES; i++)
		if (g_nodes[i].ino == ino)
			return &g_nodes[i];
	fail_msg("no node %" PRIu64, ino);
	return NULL;
}

/* What calcDirStat would find in dir: (length, space, inodes) of its entries. */
static struct dstat calc_stat(uint64_t dir)
{
	struct dstat s = { 0, 0, 0 };

	for (size_t i = 0; i < NEDGES; i++) {
		const struct tnode *n;

		if (g_edges[i].parent != dir)
			continue;
		n = node_of(g_edges[i].ino);
		s.inodes++;
		if (n->type == JO_TYPE_FILE) {
			s.length += (int64_t)n->length;
			s.space += align4k(n->length);
		} else {
			s.space += 4096;
		}
	}
	return s;
}

/* usedSpace/totalInodes as JuiceFS counts them: every inode but 1 and the trash root. */
static void calc_counters(int64_t *used, int64_t *inodes)
{
	*used = *inodes = 0;
	for (size_t i = 0; i < NNODES; i++) {
		const struct tnode *n = &g_nodes[i];

		if (n->ino == 1 || n->ino == T_INO)
			continue;
		*used += n->type == JO_TYPE_FILE ? align4k(n->length) : 4096;
		(*inodes)++;
	}
}

/* ---------------------------------------------------------------- Redis volume */

/* A command's reply; no reply or an error reply fails the test. */
static redisReply *rqv(struct fixture *f, const char *fmt, va_list ap)
{
	redisReply *r = redisvCommand(f->rc, fmt, ap);

	assert_non_null(r);
	if (r->type == REDIS_REPLY_ERROR)
		fail_msg("redis: %s", r->str);
	return r;
}

static redisReply *rq(struct fixture *f, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = rqv(f, fmt, ap);
	va_end(ap);
	return r;
}

static void rcmd(struct fixture *f, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	freeReplyObject(rqv(f, fmt, ap));
	va_end(ap);
}

static void be(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* The 72-byte attr a JuiceFS writer stores (spec §3.3: last byte is padding). */
static void enc_attr(uint8_t b[72], const struct tnode *n)
{
	memset(b, 0, 72);
	b[0] = n->flags;
	be(b + 1, (uint64_t)n->type << 12 | (n->mode & 07777), 2);
	be(b + 11, (uint64_t)OLD, 8);  /* atime */
	be(b + 23, (uint64_t)OLD, 8);  /* mtime */
	be(b + 35, (uint64_t)OLD, 8);  /* ctime */
	be(b + 47, n->nlink, 4);
	be(b + 51, n->length, 8);
	be(b + 63, n->parent, 8);
}

static const char g_fmt[] = "{\"Name\":\"v\",\"UUID\":\"11111111-2222-3333-4444-555555555555\","
	"\"Storage\":\"file\",\"Bucket\":\"/tmp/jo-trash-rm-nonexistent/\",\"BlockSize\":4096,"
	"\"TrashDays\":1,\"MetaVersion\":1,\"DirStats\":true}";

static void make_redis(struct fixture *f, int db)
{
	int64_t used, inodes;
	uint8_t q16[16];

	f->rc = gct_redis_conn(g_redis.port, db);
	rcmd(f, "FLUSHDB");
	rcmd(f, "SET setting %s", g_fmt);
	for (size_t i = 0; i < NNODES; i++) {
		uint8_t a[72];

		enc_attr(a, &g_nodes[i]);
		rcmd(f, "SET i%" PRIu64 " %b", g_nodes[i].ino, a, sizeof(a));
	}
	for (size_t i = 0; i < NEDGES; i++) {
		uint8_t e[9];

		e[0] = node_of(g_edges[i].ino)->type;
		be(e + 1, g_edges[i].ino, 8);
		rcmd(f, "HSET d%" PRIu64 " %s %b", g_edges[i].parent, g_edges[i].name, e, sizeof(e));
	}
	/* the hard-linked file: attr parent 0, links counted per parent */
	rcmd(f, "HSET p11 1 1 %" PRIu64 " 1", (uint64_t)H_INO);
	rcmd(f, "SET s12 %s", SYM_TARGET);
	rcmd(f, "HSET x13 user.k v");
	rcmd(f, "HSET x17 user.k v");
	for (size_t i = 0; i < NSTAT; i++) {
		struct dstat s = calc_stat(g_stat_dirs[i]);

		rcmd(f, "HSET dirDataLength %" PRIu64 " %lld", g_stat_dirs[i], (long long)s.length);
		rcmd(f, "HSET dirUsedSpace %" PRIu64 " %lld", g_stat_dirs[i], (long long)s.space);
		rcmd(f, "HSET dirUsedInodes %" PRIu64 " %lld", g_stat_dirs[i], (long long)s.inodes);
	}
	/* a quota on dir 16: (max space, max inodes) packed, and its usage */
	be(q16, 1 << 30, 8);
	be(q16 + 8, 100, 8);
	rcmd(f, "HSET dirQuota 16 %b", q16, sizeof(q16));
	rcmd(f, "HSET dirQuotaUsedSpace 16 4096");
	rcmd(f, "HSET dirQuotaUsedInodes 16 1");
	calc_counters(&used, &inodes);
	rcmd(f, "SET usedSpace %lld", (long long)used);
	rcmd(f, "SET totalInodes %lld", (long long)inodes);
	rcmd(f, "SET nextinode 100");
	rcmd(f, "SET nextTrash 2");
	snprintf(f->url, sizeof(f->url), "redis://127.0.0.1:%d/%d", g_redis.port, db);
}

/* ---------------------------------------------------------------- SQLite volume */

/* The tables a real juicefs 1.4 volume has (sqlite3 m.db .schema). */
static const char g_schema[] =
	"CREATE TABLE `jfs_setting` (`name` TEXT PRIMARY KEY NOT NULL, `value` TEXT NOT NULL);"
	"CREATE TABLE `jfs_counter` (`name` TEXT PRIMARY KEY NOT NULL, `value` INTEGER NOT NULL);"
	"CREATE TABLE `jfs_edge` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `parent` INTEGER "
	"NOT NULL, `name` BLOB NOT NULL, `inode` INTEGER NOT NULL, `type` INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_edge_edge` ON `jfs_edge` (`parent`,`name`);"
	"CREATE INDEX `IDX_jfs_edge_inode` ON `jfs_edge` (`inode`);"
	"CREATE TABLE `jfs_node` (`inode` INTEGER PRIMARY KEY NOT NULL, `type` INTEGER NOT NULL, "
	"`flags` INTEGER NOT NULL, `mode` INTEGER NOT NULL, `uid` INTEGER NOT NULL, `gid` INTEGER "
	"NOT NULL, `atime` INTEGER NOT NULL, `mtime` INTEGER NOT NULL, `ctime` INTEGER NOT NULL, "
	"`atimensec` INTEGER DEFAULT 0 NOT NULL, `mtimensec` INTEGER DEFAULT 0 NOT NULL, "
	"`ctimensec` INTEGER DEFAULT 0 NOT NULL, `nlink` INTEGER NOT NULL, `length` INTEGER NOT "
	"NULL, `rdev` INTEGER NULL, `parent` INTEGER NULL, `access_acl_id` INTEGER NULL, "
	"`default_acl_id` INTEGER NULL, `tier_id` INTEGER NULL);"
	"CREATE TABLE `jfs_symlink` (`inode` INTEGER PRIMARY KEY NOT NULL, `target` BLOB NOT NULL);"
	"CREATE TABLE `jfs_xattr` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `inode` INTEGER "
	"NOT NULL, `name` TEXT NOT NULL, `value` BLOB NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_xattr_name` ON `jfs_xattr` (`inode`,`name`);"
	"CREATE TABLE `jfs_chunk` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `inode` INTEGER "
	"NOT NULL, `indx` INTEGER NOT NULL, `slices` BLOB NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_chunk_chunk` ON `jfs_chunk` (`inode`,`indx`);"
	"CREATE TABLE `jfs_chunk_ref` (`chunkid` INTEGER PRIMARY KEY NOT NULL, `size` INTEGER NOT "
	"NULL, `refs` INTEGER NOT NULL);"
	"CREATE INDEX `IDX_jfs_chunk_ref_refs` ON `jfs_chunk_ref` (`refs`);"
	"CREATE TABLE `jfs_delslices` (`chunkid` INTEGER PRIMARY KEY NOT NULL, `deleted` INTEGER "
	"NOT NULL, `slices` BLOB NOT NULL);"
	"CREATE TABLE `jfs_session2` (`sid` INTEGER PRIMARY KEY NOT NULL, `expire` INTEGER NOT "
	"NULL, `info` BLOB NULL);"
	"CREATE TABLE `jfs_sustained` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `sid` "
	"INTEGER NOT NULL, `inode` INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_sustained_sustained` ON `jfs_sustained` (`sid`,`inode`);"
	"CREATE TABLE `jfs_delfile` (`inode` INTEGER PRIMARY KEY NOT NULL, `length` INTEGER NOT "
	"NULL, `expire` INTEGER NOT NULL);"
	"CREATE TABLE `jfs_flock` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `inode` INTEGER "
	"NOT NULL, `sid` INTEGER NOT NULL, `owner` INTEGER NOT NULL, `ltype` INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_flock_flock` ON `jfs_flock` (`inode`,`sid`,`owner`);"
	"CREATE TABLE `jfs_plock` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `inode` INTEGER "
	"NOT NULL, `sid` INTEGER NOT NULL, `owner` INTEGER NOT NULL, `records` BLOB NOT NULL);"
	"CREATE UNIQUE INDEX `UQE_jfs_plock_plock` ON `jfs_plock` (`inode`,`sid`,`owner`);"
	"CREATE TABLE `jfs_dir_quota` (`inode` INTEGER PRIMARY KEY NOT NULL, `max_space` INTEGER "
	"NOT NULL, `max_inodes` INTEGER NOT NULL, `used_space` INTEGER NOT NULL, `used_inodes` "
	"INTEGER NOT NULL);"
	"CREATE TABLE `jfs_user_group_quota` (`qtype` INTEGER NOT NULL, `qkey` INTEGER NOT NULL, "
	"`max_space` INTEGER NOT NULL, `max_inodes` INTEGER NOT NULL, `used_space` INTEGER NOT "
	"NULL, `used_inodes` INTEGER NOT NULL, PRIMARY KEY ( `qtype`,`qkey` ));"
	"CREATE TABLE `jfs_dir_stats` (`inode` INTEGER PRIMARY KEY NOT NULL, `data_length` INTEGER "
	"NOT NULL, `used_space` INTEGER NOT NULL, `used_inodes` INTEGER NOT NULL);"
	"CREATE TABLE `jfs_detached_node` (`inode` INTEGER PRIMARY KEY NOT NULL, `added` INTEGER "
	"NOT NULL);"
	"CREATE TABLE `jfs_acl` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `owner` INTEGER "
	"NULL, `group` INTEGER NULL, `mask` INTEGER NULL, `other` INTEGER NULL, `named_users` BLOB "
	"NULL, `named_groups` BLOB NULL);"
	"CREATE TABLE `jfs_delegation_token` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, "
	"`token` BLOB NULL);"
	"CREATE TABLE `jfs_change_log` (`id` INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, `entry` "
	"TEXT NOT NULL);";

static void sql(sqlite3 *db, const char *s)
{
	char *e = NULL;

	if (sqlite3_exec(db, s, NULL, NULL, &e) != SQLITE_OK)
		fail_msg("sql: %s: %s", s, e);
}

static sqlite3_stmt *prep(sqlite3 *db, const char *q)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
		fail_msg("prepare %s: %s", q, sqlite3_errmsg(db));
	return st;
}

static void step_done(sqlite3 *db, sqlite3_stmt *st)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		fail_msg("step: %s", sqlite3_errmsg(db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static void make_sqlite(struct fixture *f, const char *path)
{
	const int64_t us = OLD * 1000000;
	sqlite3_stmt *st;
	int64_t used, inodes;
	char *q;

	unlink(path);
	assert_int_equal(sqlite3_open(path, &f->db), SQLITE_OK);
	sqlite3_busy_timeout(f->db, 5000);
	sql(f->db, "PRAGMA journal_mode=WAL");
	sql(f->db, g_schema);
	calc_counters(&used, &inodes);
	q = sqlite3_mprintf("INSERT INTO jfs_setting VALUES('format', %Q);"
			    "INSERT INTO jfs_counter VALUES('nextInode', 100), ('nextChunk', 1),"
			    " ('nextSession', 0), ('nextTrash', 3), ('nextCleanupSlices', 0),"
			    " ('usedSpace', %lld), ('totalInodes', %lld);"
			    "INSERT INTO jfs_dir_quota VALUES(16, %lld, 100, 4096, 1);",
			    g_fmt, (long long)used, (long long)inodes, (long long)(1 << 30));
	sql(f->db, q);
	sqlite3_free(q);

	st = prep(f->db, "INSERT INTO jfs_node (inode, type, flags, mode, uid, gid, atime, mtime,"
		  " ctime, atimensec, mtimensec, ctimensec, nlink, length, rdev, parent)"
		  " VALUES (?, ?, ?, ?, 0, 0, ?, ?, ?, 0, 0, 0, ?, ?, 0, ?)");
	for (size_t i = 0; i < NNODES; i++) {
		const struct tnode *n = &g_nodes[i];

		sqlite3_bind_int64(st, 1, (sqlite3_int64)n->ino);
		sqlite3_bind_int(st, 2, n->type);
		sqlite3_bind_int(st, 3, n->flags);
		sqlite3_bind_int(st, 4, n->mode);
		sqlite3_bind_int64(st, 5, us);
		sqlite3_bind_int64(st, 6, us);
		sqlite3_bind_int64(st, 7, us);
		sqlite3_bind_int64(st, 8, n->nlink);
		sqlite3_bind_int64(st, 9, (sqlite3_int64)n->length);
		sqlite3_bind_int64(st, 10, (sqlite3_int64)n->parent);
		step_done(f->db, st);
	}
	sqlite3_finalize(st);

	/* names are BLOBs, as JuiceFS (xorm []byte) writes them */
	st = prep(f->db, "INSERT INTO jfs_edge (parent, name, inode, type) VALUES (?, ?, ?, ?)");
	for (size_t i = 0; i < NEDGES; i++) {
		const struct tedge *e = &g_edges[i];

		sqlite3_bind_int64(st, 1, (sqlite3_int64)e->parent);
		sqlite3_bind_blob(st, 2, e->name, (int)strlen(e->name), SQLITE_STATIC);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)e->ino);
		sqlite3_bind_int(st, 4, node_of(e->ino)->type);
		step_done(f->db, st);
	}
	sqlite3_finalize(st);

	st = prep(f->db, "INSERT INTO jfs_symlink VALUES (12, ?)");
	sqlite3_bind_blob(st, 1, SYM_TARGET, (int)strlen(SYM_TARGET), SQLITE_STATIC);
	step_done(f->db, st);
	sqlite3_finalize(st);
	st = prep(f->db, "INSERT INTO jfs_xattr (inode, name, value) VALUES (?, 'user.k', ?)");
	for (int64_t ino = 13; ino <= 17; ino += 4) {
		sqlite3_bind_int64(st, 1, ino);
		sqlite3_bind_blob(st, 2, "v", 1, SQLITE_STATIC);
		step_done(f->db, st);
	}
	sqlite3_finalize(st);

	st = prep(f->db, "INSERT INTO jfs_dir_stats VALUES (?, ?, ?, ?)");
	for (size_t i = 0; i < NSTAT; i++) {
		struct dstat s = calc_stat(g_stat_dirs[i]);

		sqlite3_bind_int64(st, 1, (sqlite3_int64)g_stat_dirs[i]);
		sqlite3_bind_int64(st, 2, s.length);
		sqlite3_bind_int64(st, 3, s.space);
		sqlite3_bind_int64(st, 4, s.inodes);
		step_done(f->db, st);
	}
	sqlite3_finalize(st);
	snprintf(f->url, sizeof(f->url), "sqlite3://%s", path);
}

/* ---------------------------------------------------------------- checks on the stored state */

/* SQL: the first row of q (?1 = a, ?2 = name as a BLOB when not NULL); up to ncol integers. */
static bool sq_row(struct fixture *f, const char *q, int64_t a, const char *name, int64_t *out,
		   int ncol)
{
	sqlite3_stmt *st = prep(f->db, q);
	int s;

	sqlite3_bind_int64(st, 1, a);
	if (name)
		sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_TRANSIENT);
	s = sqlite3_step(st);
	if (s != SQLITE_ROW && s != SQLITE_DONE)
		fail_msg("%s: %s", q, sqlite3_errmsg(f->db));
	for (int i = 0; s == SQLITE_ROW && i < ncol; i++)
		out[i] = sqlite3_column_int64(st, i);
	sqlite3_finalize(st);
	return s == SQLITE_ROW;
}

static bool r_int(struct fixture *f, int64_t *out, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;
	bool have;

	va_start(ap, fmt);
	r = rqv(f, fmt, ap);
	va_end(ap);
	have = r->type != REDIS_REPLY_NIL;
	if (r->type == REDIS_REPLY_INTEGER)
		*out = r->integer;
	else if (r->type == REDIS_REPLY_STRING)
		*out = strtoll(r->str, NULL, 10);
	freeReplyObject(r);
	return have;
}

static bool has_entry(struct fixture *f, uint64_t parent, const char *name)
{
	int64_t v = 0;

	if (f->redis) {
		r_int(f, &v, "HEXISTS d%" PRIu64 " %s", parent, name);
		return v == 1;
	}
	return sq_row(f, "SELECT 1 FROM jfs_edge WHERE parent=?1 AND name=?2", (int64_t)parent, name,
		      &v, 1);
}

/* Does ino have a record of this kind: Redis key {prefix}{ino}, SQL row of table? */
static bool has_rec(struct fixture *f, const char *prefix, const char *table, uint64_t ino)
{
	char sql[128];
	int64_t v = 0;

	if (f->redis) {
		r_int(f, &v, "EXISTS %s%" PRIu64, prefix, ino);
		return v == 1;
	}
	snprintf(sql, sizeof(sql), "SELECT 1 FROM %s WHERE inode=?1", table);
	return sq_row(f, sql, (int64_t)ino, NULL, &v, 1);
}

static bool has_inode(struct fixture *f, uint64_t ino)
{
	return has_rec(f, "i", "jfs_node", ino);
}

static bool has_symlink(struct fixture *f, uint64_t ino)
{
	return has_rec(f, "s", "jfs_symlink", ino);
}

static bool has_xattr(struct fixture *f, uint64_t ino)
{
	return has_rec(f, "x", "jfs_xattr", ino);
}

/* Any trace of a quota on dir. */
static bool has_quota(struct fixture *f, uint64_t dir)
{
	int64_t v = 0, n = 0;

	if (f->redis) {
		r_int(f, &v, "HEXISTS dirQuota %" PRIu64, dir);
		n += v;
		r_int(f, &v, "HEXISTS dirQuotaUsedSpace %" PRIu64, dir);
		n += v;
		r_int(f, &v, "HEXISTS dirQuotaUsedInodes %" PRIu64, dir);
		return n + v > 0;
	}
	return sq_row(f, "SELECT 1 FROM jfs_dir_quota WHERE inode=?1", (int64_t)dir, NULL, &v, 1);
}

/* A delfiles entry "{ino}:{length}" / a jfs_delfile row (ino, length) deleted just now. */
static bool has_delfile(struct fixture *f, uint64_t ino, uint64_t length, int64_t t0)
{
	int64_t row[2] = { 0, 0 };
	bool have;

	if (f->redis) {
		redisReply *r = rq(f, "ZSCORE delfiles %" PRIu64 ":%" PRIu64, ino, length);

		have = r->type != REDIS_REPLY_NIL;
		if (have)
			row[1] = (int64_t)strtod(r->str, NULL);
		freeReplyObject(r);
	} else {
		have = sq_row(f, "SELECT length, expire FROM jfs_delfile WHERE inode=?1", (int64_t)ino,
			      NULL, row, 2) && row[0] == (int64_t)length;
	}
	if (have) {
		assert_true(row[1] >= t0);
		assert_true(row[1] <= (int64_t)time(NULL) + 1);
	}
	return have;
}

/* Any delfiles entry / jfs_delfile row for ino. */
static bool has_any_delfile(struct fixture *f, uint64_t ino)
{
	int64_t v = 0;

	if (f->redis) {
		redisReply *r = rq(f, "ZRANGE delfiles 0 -1");
		char pfx[32];
		int pl = snprintf(pfx, sizeof(pfx), "%" PRIu64 ":", ino);
		bool have = false;

		for (size_t i = 0; i < r->elements; i++)
			have |= strncmp(r->element[i]->str, pfx, (size_t)pl) == 0;
		freeReplyObject(r);
		return have;
	}
	return sq_row(f, "SELECT 1 FROM jfs_delfile WHERE inode=?1", (int64_t)ino, NULL, &v, 1);
}

static int64_t counter(struct fixture *f, const char *name)
{
	int64_t v = 0;
	char *q;

	if (f->redis) {
		assert_true(r_int(f, &v, "GET %s", name));
		return v;
	}
	q = sqlite3_mprintf("SELECT value FROM jfs_counter WHERE name=%Q AND ?1=?1", name);
	assert_true(sq_row(f, q, 0, NULL, &v, 1));
	sqlite3_free(q);
	return v;
}

/* The directory's statistics; false when none are recorded (no field / row at all). */
static bool dir_stat(struct fixture *f, uint64_t dir, struct dstat *s)
{
	int64_t row[3] = { 0, 0, 0 };
	bool a, b, c;

	if (!f->redis) {
		a = sq_row(f, "SELECT data_length, used_space, used_inodes FROM jfs_dir_stats "
			   "WHERE inode=?1", (int64_t)dir, NULL, row, 3);
		s->length = row[0];
		s->space = row[1];
		s->inodes = row[2];
		return a;
	}
	a = r_int(f, &s->length, "HGET dirDataLength %" PRIu64, dir);
	b = r_int(f, &s->space, "HGET dirUsedSpace %" PRIu64, dir);
	c = r_int(f, &s->inodes, "HGET dirUsedInodes %" PRIu64, dir);
	assert_true(a == b && b == c);
	return a;
}

static struct jo_attr get_attr(struct fixture *f, uint64_t ino)
{
	struct jo_attr a;
	int64_t row[6];

	memset(&a, 0, sizeof(a));
	if (f->redis) {
		redisReply *r = rq(f, "GET i%" PRIu64, ino);
		struct jo_err err = { 0 };

		assert_int_equal(r->type, REDIS_REPLY_STRING);
		assert_int_equal(r->len, 72);
		assert_int_equal(jo_meta_decode_attr((const uint8_t *)r->str, r->len, &a, &err), 0);
		freeReplyObject(r);
		return a;
	}
	assert_true(sq_row(f, "SELECT nlink, length, parent, mtime, ctime, flags FROM jfs_node "
			   "WHERE inode=?1", (int64_t)ino, NULL, row, 6));
	a.nlink = (uint32_t)row[0];
	a.length = (uint64_t)row[1];
	a.parent = (uint64_t)row[2];
	a.mtime = row[3] / 1000000;   /* microseconds in SQL (spec §4.3) */
	a.ctime = row[4] / 1000000;
	a.flags = (uint8_t)row[5];
	return a;
}

/* Growable byte buffer for snapshots. */
struct buf {
	char *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The raw stored attr of ino: Redis value bytes / every column of its jfs_node row. */
static struct buf attr_snap(struct fixture *f, uint64_t ino)
{
	struct buf b = { 0 };

	if (f->redis) {
		redisReply *r = rq(f, "GET i%" PRIu64, ino);

		assert_int_equal(r->type, REDIS_REPLY_STRING);
		put(&b, r->str, r->len);
		freeReplyObject(r);
	} else {
		sqlite3_stmt *st = prep(f->db, "SELECT * FROM jfs_node WHERE inode=?1");

		sqlite3_bind_int64(st, 1, (int64_t)ino);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		for (int i = 0; i < sqlite3_column_count(st); i++) {
			int64_t v = sqlite3_column_int64(st, i);

			put(&b, &v, sizeof(v));
		}
		sqlite3_finalize(st);
	}
	return b;
}

/* Everything stored: Redis every key (sorted) with its DUMP, SQLite every row of every table. */
static struct buf snapshot(struct fixture *f)
{
	struct buf b = { 0 };

	if (f->redis) {
		redisReply *keys = rq(f, "KEYS *");
		char **names = calloc(keys->elements + 1, sizeof(char *));

		assert_non_null(names);
		for (size_t i = 0; i < keys->elements; i++)
			names[i] = keys->element[i]->str;
		qsort(names, keys->elements, sizeof(char *), cmp_str);
		for (size_t i = 0; i < keys->elements; i++) {
			redisReply *d = rq(f, "DUMP %s", names[i]);

			put(&b, names[i], strlen(names[i]) + 1);
			put(&b, d->str, d->len);
			freeReplyObject(d);
		}
		free(names);
		freeReplyObject(keys);
		return b;
	}
	{
		sqlite3_stmt *tl = prep(f->db, "SELECT name FROM sqlite_master WHERE type='table' "
					"ORDER BY name");

		while (sqlite3_step(tl) == SQLITE_ROW) {
			const char *t = (const char *)sqlite3_column_text(tl, 0);
			char *q = sqlite3_mprintf("SELECT * FROM \"%w\" ORDER BY rowid", t);
			sqlite3_stmt *st = prep(f->db, q);

			put(&b, t, strlen(t) + 1);
			while (sqlite3_step(st) == SQLITE_ROW) {
				for (int i = 0; i < sqlite3_column_count(st); i++) {
					const void *p = sqlite3_column_blob(st, i);
					int n = sqlite3_column_bytes(st, i);
					char ty = (char)sqlite3_column_type(st, i);

					put(&b, &ty, 1);
					put(&b, &n, sizeof(n));
					put(&b, p, (size_t)n);
				}
			}
			sqlite3_finalize(st);
			sqlite3_free(q);
		}
		sqlite3_finalize(tl);
	}
	return b;
}

static void assert_same(struct buf *a, struct buf *b, const char *what)
{
	if (a->n != b->n || (a->n && memcmp(a->p, b->p, a->n) != 0))
		fail_msg("%s changed", what);
	free(b->p);
	b->p = NULL;
}

/* INO's attr is still the snapshot *was (WHAT names it in a failure). */
static void attr_unchanged(struct fixture *f, uint64_t ino, struct buf *was, const char *what)
{
	struct buf now = attr_snap(f, ino);

	assert_same(was, &now, what);
}

/* ---------------------------------------------------------------- operations */

/* unlink (or, for a directory, rmdir) PARENT/NAME; a call that fails fails the test. */
static enum jo_rm_status do_rm(struct fixture *f, bool dir, uint64_t parent, const char *name,
			       struct jo_rm_res *res)
{
	struct jo_err err = { 0 };
	int rc;

	memset(res, 0xAA, sizeof(*res));
	rc = dir ? jo_mut_rmdir(f->m, parent, name, strlen(name), true, res, &err)
		 : jo_mut_unlink(f->m, parent, name, strlen(name), true, res, &err);
	if (rc != 0)
		fail_msg("%s %" PRIu64 "/%s: %s", dir ? "rmdir" : "unlink", parent, name, err.msg);
	return res->status;
}
#define do_unlink(f, parent, name, res) do_rm(f, false, parent, name, res)
#define do_rmdir(f, parent, name, res) do_rm(f, true, parent, name, res)

/* Counters and one directory's statistics, read before an operation. */
struct before {
	int64_t used, inodes;
	struct dstat ds;
};

static struct before before(struct fixture *f, uint64_t dir)
{
	struct before b;

	b.used = counter(f, "usedSpace");
	b.inodes = counter(f, "totalInodes");
	assert_true(dir_stat(f, dir, &b.ds));
	return b;
}

/* After: counters down by (space, inodes), dir's statistics down by (length, space, inodes). */
static void assert_down(struct fixture *f, const struct before *b, int64_t space, int64_t inodes,
			uint64_t dir, int64_t dlength, int64_t dspace, int64_t dinodes)
{
	struct dstat s;

	assert_int_equal(counter(f, "usedSpace"), b->used - space);
	assert_int_equal(counter(f, "totalInodes"), b->inodes - inodes);
	assert_true(dir_stat(f, dir, &s));
	assert_int_equal(s.length, b->ds.length - dlength);
	assert_int_equal(s.space, b->ds.space - dspace);
	assert_int_equal(s.inodes, b->ds.inodes - dinodes);
}

/*
 * PARENT/NAME removed (unlink, or rmdir for a directory): JO_RM_DONE, the
 * result names inode INO and the entry is gone. Returns the counters and
 * PARENT's statistics from before.
 */
static struct before rm_done(struct fixture *f, bool dir, uint64_t parent, const char *name,
			     uint64_t ino, struct jo_rm_res *r)
{
	struct before b = before(f, parent);

	assert_int_equal(do_rm(f, dir, parent, name, r), JO_RM_DONE);
	assert_int_equal(r->ino, ino);
	assert_false(has_entry(f, parent, name));
	return b;
}

static int64_t pfield(struct fixture *f, uint64_t ino, uint64_t parent)
{
	int64_t v = -1;

	if (!r_int(f, &v, "HGET p%" PRIu64 " %" PRIu64, ino, parent))
		return -1;
	return v;
}

/* ---------------------------------------------------------------- the test */

/* Refused or pointless removals change nothing at all. */
static void refusals_change_nothing(struct fixture *f)
{
	struct buf s0 = snapshot(f), s1;
	struct jo_rm_res r;

	/* unlink of a directory entry, rmdir of a file entry */
	assert_int_equal(do_unlink(f, H_INO, N_EMPTY, &r), JO_RM_WRONGTYPE);
	assert_int_equal(r.ino, 15);
	assert_int_equal(r.type, JO_TYPE_DIR);
	assert_int_equal(do_unlink(f, T_INO, H_NAME, &r), JO_RM_WRONGTYPE);
	assert_int_equal(do_rmdir(f, H_INO, N_PLAIN, &r), JO_RM_WRONGTYPE);
	assert_int_equal(r.ino, 10);
	assert_int_equal(r.type, JO_TYPE_FILE);
	assert_int_equal(do_rmdir(f, H_INO, N_SYM, &r), JO_RM_WRONGTYPE);
	assert_int_equal(do_rmdir(f, 1, N_ROOTLINK, &r), JO_RM_WRONGTYPE);
	assert_int_equal(do_unlink(f, 1, N_ROOTDIR, &r), JO_RM_WRONGTYPE);
	/* missing names, missing parent */
	assert_int_equal(do_unlink(f, H_INO, "1-99-missing", &r), JO_RM_GONE);
	assert_int_equal(do_rmdir(f, H_INO, "1-99-missing", &r), JO_RM_GONE);
	assert_int_equal(do_unlink(f, 999, "x", &r), JO_RM_GONE);
	assert_int_equal(do_rmdir(f, 999, "x", &r), JO_RM_GONE);
	/* non-empty directories */
	assert_int_equal(do_rmdir(f, H_INO, N_FULL, &r), JO_RM_NOTEMPTY);
	assert_int_equal(r.ino, 16);
	assert_int_equal(do_rmdir(f, T_INO, H_NAME, &r), JO_RM_NOTEMPTY);
	/* the immutable file */
	assert_int_equal(do_unlink(f, H_INO, N_IMMUT, &r), JO_RM_PERM);
	assert_int_equal(r.ino, 14);
	assert_false(r.delfile);

	s1 = snapshot(f);
	assert_same(&s0, &s1, "the volume");
	free(s0.p);
	assert_true(has_entry(f, H_INO, N_IMMUT));
	assert_true(has_inode(f, 14));
	assert_true(has_entry(f, H_INO, N_FULL));
	assert_true(has_inode(f, 16));
}

static void trash_entries_removed_as_juicefs_does(void **state)
{
	struct fixture *f = *state;
	struct jo_err err = { 0 };
	struct jo_rm_res r;
	struct before b;
	struct jo_attr a;
	struct dstat ds;
	struct buf hsnap, tsnap;
	int64_t t0, used0, inodes0;

	if (!f)
		skip();
	t0 = (int64_t)time(NULL);
	if (jo_meta_open(&f->m, f->url, &err) != 0)
		fail_msg("open %s: %s", f->url, err.msg);
	used0 = counter(f, "usedSpace");
	inodes0 = counter(f, "totalInodes");
	hsnap = attr_snap(f, H_INO);
	tsnap = attr_snap(f, T_INO);

	refusals_change_nothing(f);

	/* the plain file (nlink 1, length 10000) */
	b = rm_done(f, false, H_INO, N_PLAIN, 10, &r);
	assert_int_equal(r.type, JO_TYPE_FILE);
	assert_int_equal(r.length, 10000);
	assert_int_equal(r.nlink, 0);
	assert_true(r.delfile);
	assert_false(has_inode(f, 10));
	assert_true(has_delfile(f, 10, 10000, t0));
	assert_down(f, &b, 12288, 1, H_INO, 10000, 12288, 1);
	attr_unchanged(f, H_INO, &hsnap, "the hour directory's attr (unlink)");

	/* one link of the hard-linked file (nlink 2, other link in the root) */
	b = rm_done(f, false, H_INO, N_HARD, 11, &r);
	assert_int_equal(r.type, JO_TYPE_FILE);
	assert_int_equal(r.length, 5000);
	assert_int_equal(r.nlink, 1);
	assert_false(r.delfile);
	assert_true(has_entry(f, 1, N_ROOTLINK));
	assert_true(has_inode(f, 11));
	a = get_attr(f, 11);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.length, 5000);
	assert_int_equal(a.parent, 0);
	assert_true(a.ctime >= t0);
	assert_false(has_any_delfile(f, 11));
	if (f->redis) {
		assert_int_equal(pfield(f, 11, H_INO), 0);
		assert_int_equal(pfield(f, 11, 1), 1);
	}
	/* counters unchanged; the hour directory loses the entry (Unlink's updateDirStat) */
	assert_down(f, &b, 0, 0, H_INO, 5000, 8192, 1);
	attr_unchanged(f, H_INO, &hsnap, "the hour directory's attr (hard link)");

	/* the symlink */
	b = rm_done(f, false, H_INO, N_SYM, 12, &r);
	assert_int_equal(r.type, JO_TYPE_SYMLINK);
	assert_int_equal(r.nlink, 0);
	assert_false(r.delfile);
	assert_false(has_inode(f, 12));
	assert_false(has_symlink(f, 12));
	assert_false(has_any_delfile(f, 12));
	assert_down(f, &b, 4096, 1, H_INO, 0, 4096, 1);

	/* the file with an xattr (length 0) */
	assert_true(has_xattr(f, 13));
	b = rm_done(f, false, H_INO, N_XATTR, 13, &r);
	assert_true(r.delfile);
	assert_false(has_inode(f, 13));
	assert_false(has_xattr(f, 13));
	assert_true(has_delfile(f, 13, 0, t0));
	assert_down(f, &b, 4096, 1, H_INO, 0, 4096, 1);

	/* the non-empty directory: empty it (its parent is not a trash inode), then rmdir */
	b = rm_done(f, false, 16, N_INNER, 17, &r);
	assert_true(r.delfile);
	assert_false(has_inode(f, 17));
	assert_false(has_xattr(f, 17));
	assert_true(has_delfile(f, 17, 1, t0));
	assert_down(f, &b, 4096, 1, 16, 1, 4096, 1);
	a = get_attr(f, 16);
	assert_true(a.mtime >= t0);   /* a normal parent's mtime/ctime are updated */
	assert_true(a.ctime >= t0);
	assert_int_equal(a.nlink, 2);

	assert_true(has_quota(f, 16));
	b = rm_done(f, true, H_INO, N_FULL, 16, &r);
	assert_int_equal(r.type, JO_TYPE_DIR);
	assert_false(has_inode(f, 16));
	assert_false(dir_stat(f, 16, &ds));
	assert_false(has_quota(f, 16));
	assert_down(f, &b, 4096, 1, H_INO, 0, 4096, 1);
	attr_unchanged(f, H_INO, &hsnap, "the hour directory's attr (rmdir)");

	/* the empty directory */
	b = rm_done(f, true, H_INO, N_EMPTY, 15, &r);
	assert_false(has_inode(f, 15));
	assert_false(dir_stat(f, 15, &ds));
	assert_down(f, &b, 4096, 1, H_INO, 0, 4096, 1);
	attr_unchanged(f, H_INO, &hsnap, "the hour directory's attr (rmdir 2)");

	/* hour directories: the one still holding the immutable file stays */
	assert_int_equal(do_rmdir(f, T_INO, H_NAME, &r), JO_RM_NOTEMPTY);
	assert_true(has_inode(f, H_INO));
	/* the empty one goes; the trash root's statistics and attr are left alone */
	b = rm_done(f, true, T_INO, H2_NAME, H2_INO, &r);
	assert_int_equal(r.type, JO_TYPE_DIR);
	assert_false(has_inode(f, H2_INO));
	assert_false(dir_stat(f, H2_INO, &ds));
	assert_down(f, &b, 4096, 1, T_INO, 0, 0, 0);
	attr_unchanged(f, T_INO, &tsnap, "the trash root's attr");
	assert_int_equal(do_rmdir(f, T_INO, H2_NAME, &r), JO_RM_GONE);

	/* an empty directory outside the trash: its parent's nlink, mtime and ctime change */
	b = rm_done(f, true, 1, N_ROOTDIR, 18, &r);
	assert_false(has_inode(f, 18));
	assert_false(dir_stat(f, 18, &ds));
	assert_down(f, &b, 4096, 1, 1, 0, 4096, 1);
	a = get_attr(f, 1);
	assert_int_equal(a.nlink, 2);
	assert_true(a.mtime >= t0);
	assert_true(a.ctime >= t0);

	/* the hard-linked file's last link, outside the trash */
	b = rm_done(f, false, 1, N_ROOTLINK, 11, &r);
	assert_int_equal(r.nlink, 0);
	assert_true(r.delfile);
	assert_false(has_inode(f, 11));
	assert_true(has_delfile(f, 11, 5000, t0));
	if (f->redis) {
		int64_t v = 0;

		r_int(f, &v, "EXISTS p11");
		assert_int_equal(v, 0);
	}
	assert_down(f, &b, 8192, 1, 1, 5000, 8192, 1);
	a = get_attr(f, 1);
	assert_true(a.mtime >= t0);
	assert_int_equal(a.nlink, 2);

	/* what is left: the hour directory with the immutable file */
	assert_int_equal(counter(f, "usedSpace"), used0 - 12288 - 8192 - 4096 * 7);
	assert_int_equal(counter(f, "totalInodes"), inodes0 - 9);
	assert_true(dir_stat(f, H_INO, &ds));
	assert_int_equal(ds.length, 100);
	assert_int_equal(ds.space, 4096);
	assert_int_equal(ds.inodes, 1);
	assert_true(has_entry(f, H_INO, N_IMMUT));
	a = get_attr(f, 14);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.flags, 1);

	free(hsnap.p);
	free(tsnap.p);
}

/* ---------------------------------------------------------------- trash hour names */

static void trash_hour_names(void **state)
{
	/* all rejected by Go's time.Parse("2006-01-02-15", name) too */
	static const char *const bad[] = {
		"2026-13-01-00", "2026-11-26-24", "2026-11-26", "abcd-ef-gh-ij", "2026-11-26-10x",
		"2026-00-10-10", "2026-11-00-10", "2026-11-26 10", "2026/11/26/10", "-026-11-26-10", "",
	};
	struct tm tm;
	int64_t ts = 0;
	char name[32];

	(void)state;
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = 2026 - 1900;
	tm.tm_mon = 10;
	tm.tm_mday = 26;
	tm.tm_hour = 10;
	assert_int_equal(jo_trash_hour_parse(H_NAME, strlen(H_NAME), &ts), 0);
	assert_int_equal(ts, (int64_t)timegm(&tm));
	jo_trash_hour_name(ts, name);
	assert_string_equal(name, H_NAME);
	/* a name is not read past its length */
	assert_int_equal(jo_trash_hour_parse(H_NAME "x", 13, &ts), 0);
	assert_int_equal(ts, (int64_t)timegm(&tm));
	/* inverse over a range of hours, including year and leap-day boundaries */
	for (int64_t t = (int64_t)timegm(&tm) - 400 * 86400; t < (int64_t)timegm(&tm) + 400 * 86400;
	     t += 3600 * 7) {
		int64_t back = -1;
		int64_t hour = t - t % 3600;

		jo_trash_hour_name(t, name);
		assert_int_equal(strlen(name), 13);
		assert_int_equal(jo_trash_hour_parse(name, strlen(name), &back), 0);
		assert_int_equal(back, hour);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (jo_trash_hour_parse(bad[i], strlen(bad[i]), &ts) != -1)
			fail_msg("jo_trash_hour_parse accepted \"%s\"", bad[i]);
	}
}

/*
 * JuiceFS parses hour names with Go's time.Parse("2006-01-02-15", name),
 * which also rejects days the month does not have ("day out of range"):
 * CleanupTrashBefore skips such an entry, it must not be emptied as the
 * hour timegm() normalises it to.
 */
static void trash_hour_rejects_impossible_days(void **state)
{
	static const char *const bad[] = { "2026-02-30-00", "2026-02-29-00", "2026-04-31-12" };
	int64_t ts = 0;

	(void)state;
	assert_int_equal(jo_trash_hour_parse("2028-02-29-00", 13, &ts), 0); /* leap year */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (jo_trash_hour_parse(bad[i], strlen(bad[i]), &ts) != -1)
			fail_msg("jo_trash_hour_parse accepted \"%s\" (Go's time.Parse rejects it)", bad[i]);
}

/* ---------------------------------------------------------------- fixtures */

static int setup_case(void **state, bool redis)
{
	struct fixture *f;

	*state = NULL;
	if (redis && !g_have_redis)
		return 0;
	f = calloc(1, sizeof(*f));
	assert_non_null(f);
	f->redis = redis;
	g_case++;
	GCT_CASE_META(redis, f);
	*state = f;
	return 0;
}

GCT_ENGINE_SETUPS

static int teardown_case(void **state)
{
	struct fixture *f = *state;

	if (!f)
		return 0;
	if (f->m)
		jo_meta_close(f->m);
	if (f->rc)
		redisFree(f->rc);
	if (f->db)
		sqlite3_close(f->db);
	free(f);
	return 0;
}

GCT_GROUP_FIXTURE("test_trash_rm", "trashrm")

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(trash_entries_removed_as_juicefs_does, setup_redis,
						teardown_case),
		cmocka_unit_test_setup_teardown(trash_entries_removed_as_juicefs_does, setup_sqlite,
						teardown_case),
		cmocka_unit_test(trash_hour_names),
		cmocka_unit_test(trash_hour_rejects_impossible_days),
	};

	setenv("JO_TEST_REDIS_PORT", "6424", 0); /* away from test_gc/test_lease (6404) */
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
