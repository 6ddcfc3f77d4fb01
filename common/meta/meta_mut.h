/*
 * meta_mut.h: the mutations jfsops makes to a live JuiceFS volume's metadata,
 * each done exactly as JuiceFS itself does it (same transactions, same keys,
 * same order, same reference-count rules; spec juicefs-format.md §3.7-3.9,
 * §4.5-4.6, §5.2-5.5), plus jfsops's own task/lease records, which live in the
 * same engine under names JuiceFS never touches:
 *   Redis:  jfsops:{ns}:queue (zset id -> lease expiry ms, 0 = unclaimed),
 *           jfsops:{ns}:task:{id} (hash kind/items/owner/expire/attempts),
 *           jfsops:{ns}:items (hash item -> task id), jfsops:{ns}:next
 *   SQLite: jfsops_[X_]{ns}_task, jfsops_[X_]{ns}_item (X from table_prefix)
 *
 * Every function takes a struct jo_meta opened with jo_meta_open(); like the
 * handle, these calls are not thread-safe (one handle per thread). Redis
 * optimistic transactions (WATCH/MULTI/EXEC) are retried up to 50 times, as
 * JuiceFS does; SQLite read-modify-writes run in one BEGIN IMMEDIATE
 * transaction, retried while the database is busy.
 *
 * Volumes whose format has ChangeLog true are not handled here: callers must
 * refuse them (JuiceFS expects a change-log entry in every transaction).
 *
 * Errors: JO_EIO, JO_ECONNECT, JO_EPROTO (corrupt record: nothing changed),
 * JO_ECONFLICT (only: a lease is not ours; a transaction that kept failing
 * is JO_EIO, "retry later", as in JuiceFS),
 * JO_ENOTFOUND (no claimable task), JO_EINVAL, JO_ENOMEM.
 */
#ifndef JO_META_MUT_H
#define JO_META_MUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jo_err;
struct jo_meta;

/* A slice by its identity as reference counts see it. */
struct jo_sref {
	uint64_t id;
	uint32_t size;
};

/*
 * deleteChunk(ino, indx), §5.2 / §4.6. Redis: WATCH c{ino}_{indx}; LRANGE;
 * MULTI { DEL; HINCRBY sliceRef k{id}_{size} -1 per record with id > 0 }.
 * SQLite: one transaction { read the row; refs += -count per slice id;
 * DELETE the row }, then re-read every slice's refs. *freed (malloc'd, may
 * be NULL when *nfreed is 0) gets the slices whose count now says "delete"
 * (Redis HINCRBY result < 0, SQL refs <= 0), in record order, possibly with
 * duplicates. An absent chunk is success with nothing freed. A corrupt chunk
 * (Redis element not 24 bytes, SQL blob not a multiple of 24) is JO_EPROTO
 * and nothing is changed (JuiceFS would drop it and leak its slices).
 */
int jo_mut_delete_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx,
			struct jo_sref **freed, size_t *nfreed, struct jo_err *err);

/*
 * The chunk indexes file-data deletion visits for a removed file, in
 * ascending order: Redis: indx with indx*64MiB < length whose list is
 * non-empty (LLEN); SQLite: every jfs_chunk row of the inode.
 */
int jo_mut_file_chunks(struct jo_meta *m, uint64_t ino, uint64_t length,
		       uint32_t **out, size_t *n, struct jo_err *err);

/* Is "{ino}:{length}" still in delfiles (SQL: a jfs_delfile row for ino)? */
int jo_mut_delfile_exists(struct jo_meta *m, uint64_t ino, uint64_t length,
			  bool *out, struct jo_err *err);
/* Finish file-data deletion: ZREM delfiles "{ino}:{length}" / DELETE FROM
 * jfs_delfile WHERE inode=ino. */
int jo_mut_remove_delfile(struct jo_meta *m, uint64_t ino, uint64_t length,
			  struct jo_err *err);

/*
 * Clean one delayed-slice entry (§3.9, §4.6) if it is older than edge
 * (deleted_at < edge, unix s): Redis: WATCH delSlices; HGET
 * "{new_id}_{ts}"; MULTI { HINCRBY -1 per 12-byte record; HDEL }. SQLite:
 * one transaction { re-read the row; refs=refs-1 WHERE chunkid AND size per
 * record; DELETE the row }, then re-read refs. *freed as for delete_chunk.
 * An absent entry (already cleaned) is success with nothing freed; an entry
 * not older than edge is left alone (*freed empty, *kept true).
 */
int jo_mut_cleanup_delslice(struct jo_meta *m, uint64_t new_id, int64_t ts, int64_t edge,
			    struct jo_sref **freed, size_t *nfreed, bool *kept,
			    struct jo_err *err);

/*
 * Does the slice's reference count say "delete"? Redis: the sliceRef field
 * exists and is negative; SQL: the jfs_chunk_ref row exists with refs <= 0.
 * Checked right before its blocks are deleted.
 */
int jo_mut_slice_deletable(struct jo_meta *m, uint64_t id, uint32_t size, bool *out,
			   struct jo_err *err);
/* After a deletable slice's blocks are gone: HDEL sliceRef k{id}_{size} /
 * DELETE FROM jfs_chunk_ref WHERE chunkid=id (as doDeleteSlice). */
int jo_mut_forget_slice(struct jo_meta *m, uint64_t id, uint32_t size, struct jo_err *err);

/*
 * The two above for n slices, in one round trip where the family can
 * (Redis: pipelined HGET / HDEL), else one slice after the other. Each
 * slice gets its own answer: out[i] (deletable) and rcs[i] (0, or the code
 * of its own failure; *err then says why for the first one). Returns
 * JO_ECONNECT / JO_ETIMEOUT when the engine went away (nothing to trust in
 * out/rcs), else 0.
 */
struct jo_slice_id;
int jo_mut_slices_deletable(struct jo_meta *m, const struct jo_slice_id *v, size_t n, bool *out,
			    int *rcs, struct jo_err *err);
int jo_mut_forget_slices(struct jo_meta *m, const struct jo_slice_id *v, size_t n, int *rcs,
			 struct jo_err *err);

/*
 * The one rule before objects are deleted on the strength of what m wrote
 * or read (a transaction that freed slices, the re-read counts that say
 * "delete", the references a leak check looked up): 0 when a failover of
 * the engine cannot take it back. SQL and etcd commit durably: always 0.
 * Redis: see jo_rd_confirm (redis/internal.h): a replica has it, or the
 * server never had one. The transactions above whose results are acted on
 * (delete_chunk, cleanup_delslice, unlink, rmdir, the compaction commit)
 * already go through it. Otherwise JO_ECONNECT "...: not acted on": delete
 * nothing on the strength of it (what it concerns stays pending for a later
 * run, whose metadata then says what is left to do).
 */
int jo_mut_confirm(struct jo_meta *m, struct jo_err *err);
/* The last failure on m (JO_ECONNECT, from jo_mut_confirm or a transaction
 * above) came from a confirmation that found the engine's master replaced
 * by a failover: m now goes to the new one, so work after the item it
 * concerned can go on (that item failed). False for any other failure. */
bool jo_mut_moved(struct jo_meta *m);

/* Does inode ino exist (Redis EXISTS i{ino}; SQL a jfs_node row)? */
int jo_mut_inode_exists(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err);
/* Is ino a detached node (detachedNodes / jfs_detached_node)? */
int jo_mut_is_detached(struct jo_meta *m, uint64_t ino, bool *out, struct jo_err *err);

/*
 * Redis only (SQL deletes every chunk row of a file and has no such leak):
 * stream the chunk keys c{ino}_{indx} whose inode key i{ino} does not exist
 * (SCAN + pipelined EXISTS, bounded memory). JO_EUNSUPPORTED on SQLite.
 */
typedef int (*jo_mut_chunk_cb)(uint64_t ino, uint32_t indx, void *payload);
int jo_mut_scan_orphan_chunks(struct jo_meta *m, jo_mut_chunk_cb cb, void *payload,
			      struct jo_err *err);

/* ---- removing trash entries (base.go CleanupTrashBefore, utils.go emptyDir) ---- */

/* What an unlink/rmdir of one directory entry did. */
enum jo_rm_status {
	JO_RM_DONE = 0,      /* removed */
	JO_RM_GONE,          /* the entry (or its parent) no longer exists: nothing done */
	JO_RM_NOTEMPTY,      /* rmdir: the directory has entries */
	JO_RM_PERM,          /* append-only/immutable flags (EPERM): left alone */
	JO_RM_WRONGTYPE,     /* unlink of a directory / rmdir of a non-directory */
};

struct jo_rm_res {
	enum jo_rm_status status;
	uint64_t ino;        /* the entry's inode */
	uint8_t type;        /* enum jo_itype of the entry */
	uint64_t length;     /* file length from its attr */
	uint32_t nlink;      /* links left after an unlink */
	bool delfile;        /* the file's last link went: "{ino}:{length}" is in delfiles */
};

/*
 * Remove the non-directory entry `name` of directory `parent` as JuiceFS's
 * doUnlink does with the trash skipped (the trash cleanup's case), as root:
 * Redis: WATCH i{parent} d{parent} i{ino}; MULTI { HDEL the entry; SET the
 * parent attr (mtime/ctime) unless parent is a trash directory; nlink > 0:
 * SET the attr (nlink-1, ctime), HINCRBY p{ino} parent -1 for hard links;
 * else files: ZADD delfiles now "{ino}:{length}", DEL i{ino}; symlinks: DEL
 * s{ino}; INCRBY usedSpace -align4K, DECR totalInodes, DEL x{ino} (and
 * p{ino}) }. SQLite: the same rows in one transaction (jfs_edge, jfs_node,
 * jfs_delfile, jfs_symlink, jfs_xattr), plus the usedSpace/totalInodes
 * counters that JuiceFS batches in memory. With dir_stats (format
 * DirStats) the parent's directory statistics go down as Unlink's
 * updateDirStat does (only where the parent has statistics recorded).
 * The file's data is not touched: a delfiles entry is left for gc.
 */
int jo_mut_unlink(struct jo_meta *m, uint64_t parent, const char *name, size_t name_len,
		  bool dir_stats, struct jo_rm_res *res, struct jo_err *err);

/*
 * Remove the empty directory `name` of `parent` as doRmdir does with the
 * trash skipped: the entry, the inode, its xattrs, its directory statistics
 * and quota records; parent nlink-1 and mtime/ctime unless parent is a trash
 * directory; usedSpace -4096, totalInodes -1. With dir_stats, the parent's
 * statistics go down as Rmdir's updateDirStat does, unless parent is the
 * trash root (CleanupTrashBefore calls doRmdir directly).
 */
int jo_mut_rmdir(struct jo_meta *m, uint64_t parent, const char *name, size_t name_len,
		 bool dir_stats, struct jo_rm_res *res, struct jo_err *err);

/* ---- putting trash entries back (juicefs restore --put-back) ---- */

/* What a restore of one trash entry did. */
enum jo_rs_status {
	JO_RS_DONE = 0,      /* moved back */
	JO_RS_GONE,          /* the trash entry (or its inode, or its hour directory) is gone */
	JO_RS_EXISTS,        /* the name is taken in the target directory (RenameNoReplace) */
	JO_RS_NOPARENT,      /* the target is not a directory any more */
	JO_RS_PERM,          /* append-only/immutable flags, or a loop (EPERM): left alone */
	JO_RS_CHANGED,       /* what its quota charge was read from changed: nothing done */
};

struct jo_rs_res {
	enum jo_rs_status status;
	uint64_t ino;        /* the entry's inode */
	uint8_t type;        /* enum jo_itype */
	uint64_t length;     /* file length from its attr */
};

/*
 * Put trash entry `src` of hour directory `tdir` back as `name` in
 * directory `parent`, as juicefs's restore does: Rename(tdir, src, parent,
 * name, RenameNoReplace|RenameRestore) as root, in one transaction: the
 * entry leaves the hour directory and is added to the parent under the
 * same inode; the inode's ctime is now, its parent field becomes `parent`
 * (directories and single-link files; a hard link's p{ino} / parent-link
 * records move one link from tdir to parent instead); the parent's mtime
 * and ctime are now and a directory adds one to its nlink. The hour
 * directory's attr is not written (juicefs skips trash parents). usedSpace
 * and totalInodes do not change (a trash entry still counts).
 *
 * With dir_stats, Rename's updateDirStat: the hour directory's statistics
 * go down and the parent's up by (length, align4K(length), 1), where each
 * has statistics recorded. A restored directory that has none (rmdir into
 * the trash dropped them) and no entries gets an all-zero record in the
 * same transaction, so `fsck --recursive` finds it complete (juicefs's own
 * restore leaves it without one). *dst_stat_missing (may be NULL) tells
 * that the parent has no statistics recorded (the caller may compute them).
 */
int jo_mut_restore(struct jo_meta *m, uint64_t tdir, const char *src, size_t src_len,
		   uint64_t parent, const char *name, size_t name_len, bool dir_stats,
		   struct jo_rs_res *res, bool *dst_stat_missing, struct jo_err *err);

/*
 * Rename's updateDirQuota for one restored entry, made in the restore's own
 * transaction (a process killed after it commits cannot leave a quota
 * short, nor charge it twice): each of dirs[0..ndirs) (the directories with
 * a quota from the target parent up to the root, found by the caller before
 * the restore) gets the entry's space and inodes added to its used ones
 * where it still has a quota. A file counts align4K(length) and 1 inode as
 * the restore reads its length, another non-directory 4096 and 1; a
 * directory (dir_space, dir_inodes): its whole tree, summed by the caller
 * before the restore (GetSummary). Nothing is charged unless the entry goes
 * back (JO_RS_DONE). What the charge was read from can change before the
 * transaction: a directory's tree grows (another process restores into it
 * while it is in the trash), a target found in the trash leaves it (an
 * ancestor restored). check[0..ncheck) are those directories: the tree's
 * with check_parent 0 and check_ctime their ctimes (unix ns) as read, the
 * walk's up to the trash with check_parent their parents as read; where one
 * differs in the transaction the entry is left alone with JO_RS_CHANGED, to
 * be read and restored again (with ndirs 0, only checked).
 */
struct jo_rs_quota {
	const uint64_t *dirs;
	size_t ndirs;
	int64_t dir_space, dir_inodes;
	const uint64_t *check;
	const int64_t *check_ctime;
	const uint64_t *check_parent;
	size_t ncheck;
};

/* An attr's ctime as jo_rs_quota.check_ctime holds it. */
static inline int64_t jo_rs_ctime_ns(int64_t sec, uint32_t nsec)
{
	return sec * 1000000000 + (int64_t)nsec;
}

/* Whether check i of q finds a directory with (ctime ns, parent) unchanged. */
static inline bool jo_rs_check_same(const struct jo_rs_quota *q, size_t i, int64_t ctime,
				    uint64_t parent)
{
	return q->check_parent[i] ? parent == q->check_parent[i] : ctime == q->check_ctime[i];
}

/* What entry res charges each quota of q (see struct jo_rs_quota). */
void jo_rs_quota_delta(const struct jo_rs_quota *q, const struct jo_rs_res *res, int64_t *space,
		       int64_t *inodes);

/* One entry of jo_mut_restore_many: what jo_mut_restore takes, and its outcome. */
struct jo_rs_item {
	uint64_t tdir, parent;
	const char *src, *name;
	size_t src_len, name_len;
	const struct jo_rs_quota *quota; /* in, may be NULL: no quota charged */
	struct jo_rs_res res;        /* out */
	bool dst_stat_missing;       /* out */
	bool ran;                    /* out: res is the entry's outcome */
};
/*
 * jo_mut_restore of v[0..n), in order (a directory before the entries put
 * into it), each with its quota charge (v[i].quota) in its transaction. SQL
 * engines run them in one transaction, writing each directory's shared rows
 * (the hour directory's statistics, a parent's nlink, times and statistics,
 * a quota's usage) once, summed; Redis in one MULTI; tkv in transactions of
 * several entries (as many as stay within the transport's limits); the
 * others one by one. On an error, the items with `ran` set are done (their
 * res is final, as after jo_mut_restore), the others were not: in one
 * transaction, none.
 */
int jo_mut_restore_many(struct jo_meta *m, struct jo_rs_item *v, size_t n, bool dir_stats,
			struct jo_err *err);

/*
 * Directory ino's statistics := (length, space, inodes) if it has none yet
 * (doSyncDirStat of a missing record); *written tells whether it did.
 */
int jo_mut_dir_stat_init(struct jo_meta *m, uint64_t ino, int64_t length, int64_t space,
			 int64_t inodes, bool *written, struct jo_err *err);

/*
 * updateDirQuota's flush for one directory: if ino has a directory quota,
 * its used space and inodes go up by (space, inodes); *had tells whether it
 * has one. Callers walk the ancestors themselves, as updateDirQuota does.
 */
int jo_mut_dir_quota_add(struct jo_meta *m, uint64_t ino, int64_t space, int64_t inodes,
			 bool *had, struct jo_err *err);

/* ---- task records and leases (used through common/lease.h) ---- */

/* A claimed or listed task. items: '\n'-separated item strings (owned). */
struct jo_mut_task {
	int64_t id;
	char kind[32];
	char *items;
	char owner[128];
	int64_t expire_ms;   /* lease expiry, engine clock, unix ms; 0 unclaimed */
	int64_t attempts;    /* how many times it was claimed */
};
void jo_mut_task_release_mem(struct jo_mut_task *t);

/* Namespaces are 1..16 chars of [a-z0-9]; owners 1..100 printable chars. */

/* The most items one task may hold on this engine (0: no limit): etcd
 * records a task in one transaction of at most 128 operations. */
size_t jo_mut_task_max_items(struct jo_meta *m);

/* Create the task tables if missing (SQLite; Redis: no-op). */
int jo_mut_task_init(struct jo_meta *m, const char *ns, struct jo_err *err);
/*
 * Record a task with the items that no other pending task holds yet (atomic:
 * one Lua script / one transaction). *task_id is 0 and *added 0 when every
 * item was already planned. Items: no '\n', at most 200 bytes each.
 */
int jo_mut_task_add(struct jo_meta *m, const char *ns, const char *kind,
		    const char *const *items, size_t n, int64_t *task_id, size_t *added,
		    struct jo_err *err);
/*
 * Claim one task whose lease is free or expired (atomic), owner := owner,
 * expiry := now + lease_ms on the engine's clock. JO_ENOTFOUND when none.
 * out->items etc. are filled; release with jo_mut_task_release_mem().
 */
int jo_mut_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		      struct jo_mut_task *out, struct jo_err *err);
/* Extend our lease to now + lease_ms. JO_ECONFLICT if the task is not ours
 * (taken over, completed or gone); *expire_ms (may be NULL) gets the expiry. */
int jo_mut_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		      int64_t lease_ms, int64_t *expire_ms, struct jo_err *err);
/* Give the task back unfinished (claimable at once). JO_ECONFLICT if not ours. */
int jo_mut_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			struct jo_err *err);
/* Finished: delete the task and its item marks. JO_ECONFLICT if not ours. */
int jo_mut_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			 struct jo_err *err);
/* Counts: all tasks, tasks under an unexpired lease. */
int jo_mut_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
		      struct jo_err *err);
/* Stream every task (read-only; for dry runs and status). */
typedef int (*jo_mut_task_cb)(const struct jo_mut_task *t, void *payload);
int jo_mut_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		     struct jo_err *err);
/* Remove every task record of ns, and its records below (tests, `gc --reset-tasks`). */
int jo_mut_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err);

/*
 * ---- records of a namespace, beside its tasks
 *
 * Small named values that outlive the tasks they describe: a sync job's
 * plan, a range's resume position (written while its worker holds the
 * range's lease), the record that a range is done (written in the same
 * transaction that completes its task), a worker's counters. Keys are 1..200
 * printable ASCII bytes; values at most JO_MUT_REC_MAX bytes of text.
 *   Redis:  jfsops:{ns}:rec (hash key -> value)
 *   SQL:    jfsops_[X_]{ns}_rec (k primary key, v), made on first use
 *   tkv:    P "jfsops/" ns "/r/" key (under the volume's prefix, as its tasks)
 */
#define JO_MUT_REC_MAX (1u << 20)

/* Conditions of jo_mut_rec_put, checked in the same transaction as the write. */
struct jo_mut_rec_cond {
	int64_t task_id;     /* > 0: only while `owner` holds task task_id (else JO_ECONFLICT) */
	const char *owner;
	bool if_absent;      /* only if key has no record: else nothing is written, *written false */
	bool complete;       /* also complete task task_id (as jo_mut_task_complete) */
};
/*
 * Write key = val (val NULL: remove the record). cond may be NULL (no
 * condition). *written (may be NULL) tells whether the write happened.
 * JO_ECONFLICT when cond names a task the owner no longer holds: then
 * nothing is written and the task is not completed.
 */
int jo_mut_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		   const struct jo_mut_rec_cond *cond, bool *written, struct jo_err *err);
/* *val (malloc'd) gets the record. JO_ENOTFOUND when there is none. */
int jo_mut_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		   struct jo_err *err);
/* Every record whose key starts with prefix ("" = all), in no particular
 * order; key and val are borrowed for the call. A non-zero return stops. */
typedef int (*jo_mut_rec_cb)(const char *key, const char *val, void *payload);
int jo_mut_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		    void *payload, struct jo_err *err);

#endif
