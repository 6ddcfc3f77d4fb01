/*
 * jfsops warmup --follow: the look-ahead pipeline.
 *
 * One thread runs a poll loop over the batch stream, the control channel
 * (a FIFO, or a unix socket and its connections) and a self-pipe the
 * fetcher's workers write to when a read ends. Each turn: answer control
 * lines (at once: nothing in the loop waits on the mount, except eviction),
 * take read completions, move the consumer's position and evict, admit more
 * batches while the window has room (common/warmup/window), hand queued
 * blocks to the fetcher, print the batches that became ready. The stream is
 * not read while the window is full, so a producer writing ahead blocks on
 * its pipe: memory stays bounded however long the stream.
 *
 * Also the client side (--done/--status), which is a few lines on the same
 * channel.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include "common/warmup/run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/cancel.h"
#include "common/dynbuf.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/file.h"
#include "common/jfs/jfs.h"
#include "common/warmup/warmup.h"
#include "common/warmup/cache.h"
#include "common/warmup/window.h"

#define MAX_LINE (1u << 20)
#define MAX_CLIENTS 64
#define MAX_ID 1024

struct client {
	int fd;
	struct jo_dynbuf in;
};

struct completion {
	struct jo_wwin_block *blk;
	int rc;
	char msg[256];
};

struct bt_user {
	double t_open, t_ready;
};

struct follow {
	struct wu_state *st;
	const struct jo_warmup_mount *mi;
	const struct wu_follow_opts *o;
	struct jo_ctx *ctx;
	struct jo_wwin *w;
	struct jo_warmup_fetcher *fetcher;
	struct jo_warmup_cachedirs cd;
	bool have_cd;
	/* the stream */
	int sfd;
	bool sfd_own, eof;
	struct jo_dynbuf sbuf;
	size_t sline_done;      /* bytes of sbuf already handled */
	uint64_t line;
	bool open_skip_map;     /* the open batch is passed and not mapped */
	char *open_json_id;     /* the open batch's id from JSON lines */
	double open_t;          /* when the open batch was opened */
	/* where the consumer is going: a done for a batch not read yet */
	char *target;
	/* from --state: resume position */
	bool st_have;
	char *st_id;
	uint64_t st_index, st_evicted;
	uint64_t evicted_through; /* batches up to this index evicted (+1 form: 0 = none) */
	/* the control channel */
	int cfd;                /* FIFO or listening socket */
	bool is_fifo, sock_made;
	struct jo_dynbuf fifo_in;
	struct client cl[MAX_CLIENTS];
	size_t ncl;
	/* completions from the workers */
	int wake[2];
	pthread_mutex_t mu;
	struct completion *cq;
	size_t ncq, capcq;
	uint64_t outstanding;   /* reads handed to the fetcher, not yet complete */
	/* the file being mapped */
	char *cur_mpath_for;    /* volume path cur_mpath belongs to */
	char *cur_mpath;
	/* totals */
	uint64_t warmed, warmed_bytes, failed, ready_batches, evicted_blocks, evicted_bytes;
	uint64_t evict_rounds, rewarmed, skipped_batches;
	double t0;
	int rc;
};

static void emit(json_t *o)
{
	if (!o)
		return;
	json_dumpf(o, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(o);
}

/* Drop the first n bytes of l (lines handled). */
static void lbuf_consume(struct jo_dynbuf *l, size_t n)
{
	if (l->p)
		memmove(l->p, l->p + n, l->len - n);
	jo_dynbuf_setlen(l, l->len - n);
}

static void trim(char **s, size_t *n)
{
	while (*n && (**s == ' ' || **s == '\t' || **s == '\r'))
		(*s)++, (*n)--;
	while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t' || (*s)[*n - 1] == '\r' ||
		      (*s)[*n - 1] == '\n'))
		(*n)--;
}

/* ------------------------------------------------------------ state file */

static int state_write(struct follow *f)
{
	const char *path = f->o->state;
	struct jo_file *jf = NULL;
	json_t *o;
	int64_t pos = jo_wwin_position(f->w);
	const char *id = f->st_id;  /* the batch at the position */
	uint64_t idx = (uint64_t)pos;
	int rc;

	if (!path || pos < 0 || !id)
		return 0;
	o = json_pack("{s:s,s:I,s:I}", "done", id, "done_index", (json_int_t)idx, "evicted_index",
		      (json_int_t)(f->evicted_through ? f->evicted_through - 1 : 0));
	if (o && !f->evicted_through)
		json_object_set_new(o, "evicted_index", json_null());
	if (!o)
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	rc = jo_file_create(&jf, path, JO_FILE_PUBLIC, JO_FILE_STDIO, &f->st->err);
	if (!rc) {
		json_dumpf(o, jf->fp, JSON_COMPACT);
		fputc('\n', jf->fp);
		rc = jo_file_commit(jf, &f->st->err);
	}
	json_decref(o);
	jo_file_abort(jf);
	return rc ? jo_err_wrap(&f->st->err, "state file") : 0;
}

static int state_read(struct follow *f)
{
	json_error_t je;
	json_t *o, *d, *di, *ei;
	/* rewritten by this run: a symlink or another user's file there is refused */
	int rc = jo_file_prepare(f->o->state, JO_FILE_PUBLIC, JO_FILE_NOCREATE, NULL,
				 &f->st->err);

	if (rc == JO_ENOTFOUND)
		return 0; /* first run */
	if (rc)
		return jo_err_wrap(&f->st->err, "state file");
	o = json_load_file(f->o->state, 0, &je);
	if (!o) {
		if (access(f->o->state, F_OK))
			return 0; /* first run */
		return jo_err_set(&f->st->err, JO_EINVAL, "state file '%s' does not parse: %s",
				  f->o->state, je.text);
	}
	d = json_object_get(o, "done");
	di = json_object_get(o, "done_index");
	ei = json_object_get(o, "evicted_index");
	if (!json_is_string(d) || !json_is_integer(di) || json_integer_value(di) < 0 ||
	    (ei && !json_is_null(ei) && (!json_is_integer(ei) || json_integer_value(ei) < 0))) {
		json_decref(o);
		return jo_err_set(&f->st->err, JO_EINVAL, "state file '%s' is not a jfsops warmup "
				  "state (want done, done_index, evicted_index)", f->o->state);
	}
	f->st_have = true;
	f->st_index = (uint64_t)json_integer_value(di);
	f->st_evicted = json_is_integer(ei) ? (uint64_t)json_integer_value(ei) + 1 : 0;
	f->target = strdup(json_string_value(d));
	json_decref(o);
	if (!f->target)
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	return 0;
}

/* -------------------------------------------------------------- reading */

static void on_read_done(void *tag, int rc, const struct jo_err *err, void *payload)
{
	struct follow *f = payload;
	struct completion c = { .blk = tag, .rc = rc };

	if (rc)
		snprintf(c.msg, sizeof(c.msg), "%.255s", err->msg);
	pthread_mutex_lock(&f->mu);
	if (f->ncq == f->capcq) {
		size_t nc = f->capcq ? f->capcq * 2 : 64;
		struct completion *nv = realloc(f->cq, nc * sizeof(*nv));

		if (!nv) {
			/* cannot record it: the block stays in flight, its batch never
			 * ready; better than losing the process */
			pthread_mutex_unlock(&f->mu);
			return;
		}
		f->cq = nv;
		f->capcq = nc;
	}
	f->cq[f->ncq++] = c;
	pthread_mutex_unlock(&f->mu);
	(void)!write(f->wake[1], "x", 1); /* a full pipe already wakes the loop */
}

static void print_fail(struct follow *f, const char *key, const char *path, uint64_t off,
		       const char *msg)
{
	(void)f;
	emit(json_pack("{s:s,s:s,s:s,s:I,s:s}", "type", "error", "key", key, "path", path,
		       "offset", (json_int_t)off, "error", msg));
}

static void block_key_of(struct follow *f, const struct jo_warmup_block *b, char *key, size_t cap)
{
	jo_block_key(key, cap, f->st->fmt.name, f->st->fmt.hash_prefix, b->id, b->indx, b->bsize);
}

static int submit(struct follow *f)
{
	uint64_t cap = (uint64_t)f->o->threads * 2;

	/* while the consumer is beyond what was read, warm nothing new */
	if (f->target)
		return 0;
	while (f->outstanding < cap) {
		struct jo_wwin_block *blk = jo_wwin_next(f->w);
		struct jo_warmup_block b;
		struct jo_wwin_file *file;
		struct jo_warmup_read rd;
		struct jo_err perr = { 0 };
		const char *mp;
		char key[512];
		int rc;

		if (!blk)
			break;
		jo_wwin_block_get(blk, &b, &file);
		block_key_of(f, &b, key, sizeof(key));
		mp = jo_wwin_file_mpath(file);
		if (!mp) {
			print_fail(f, key, jo_wwin_file_vpath(file), b.anchor,
				   "outside the mounted directory");
			f->failed++;
			jo_wwin_complete(f->w, blk, false);
			continue;
		}
		if (jo_warmup_plan_read(&b, f->mi, &rd, &perr)) {
			print_fail(f, key, mp, b.anchor, perr.msg);
			f->failed++;
			jo_wwin_complete(f->w, blk, false);
			continue;
		}
		rc = jo_warmup_fetcher_try_add(f->fetcher, mp, key, b.bsize, &rd, blk, &f->st->err);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			/* cannot happen (outstanding < queue size); do not lose it */
			jo_wwin_complete(f->w, blk, false);
			break;
		}
		f->outstanding++;
	}
	return 0;
}

static void take_completions(struct follow *f)
{
	struct completion *v;
	size_t n;
	char drain[256];

	while (read(f->wake[0], drain, sizeof(drain)) > 0)
		;
	pthread_mutex_lock(&f->mu);
	v = f->cq;
	n = f->ncq;
	f->cq = NULL;
	f->ncq = f->capcq = 0;
	pthread_mutex_unlock(&f->mu);
	for (size_t i = 0; i < n; i++) {
		struct jo_warmup_block b;
		struct jo_wwin_file *file;

		jo_wwin_block_get(v[i].blk, &b, &file);
		if (v[i].rc) {
			char key[512];

			block_key_of(f, &b, key, sizeof(key));
			if (v[i].rc != JO_ECANCELED)
				print_fail(f, key, jo_wwin_file_mpath(file), b.anchor, v[i].msg);
			f->failed++;
		} else {
			f->warmed++;
			f->warmed_bytes += b.bsize;
		}
		jo_wwin_complete(f->w, v[i].blk, v[i].rc == 0);
		f->outstanding--;
	}
	free(v);
}

/* ------------------------------------------------------------ batches */

static void on_ready(struct jo_wwin_batch *bt, void *payload)
{
	struct follow *f = payload;
	struct jo_wwin_batch_info bi;
	struct bt_user *u = *jo_wwin_batch_user(bt);
	int64_t pos = jo_wwin_position(f->w);
	double t = wu_now();

	jo_wwin_batch_info(bt, &bi);
	if (u)
		u->t_ready = t;
	f->ready_batches++;
	emit(json_pack("{s:s,s:s,s:I,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I}", "type", "batch",
		       "batch", bi.id, "index", (json_int_t)bi.index, "ready", true, "blocks",
		       (json_int_t)bi.blocks, "bytes", (json_int_t)bi.bytes, "new_blocks",
		       (json_int_t)bi.new_blocks, "new_bytes", (json_int_t)bi.new_bytes,
		       "shared_blocks", (json_int_t)(bi.blocks - bi.new_blocks), "failed",
		       (json_int_t)bi.failed, "seconds", u ? t - u->t_open : 0.0, "position",
		       (json_int_t)pos, "ahead", (json_int_t)((int64_t)bi.index - pos)));
}

static void free_user(struct jo_wwin_batch *bt, void *payload)
{
	(void)payload;
	free(*jo_wwin_batch_user(bt));
	*jo_wwin_batch_user(bt) = NULL;
}

static int evict_round(struct follow *f);

static bool needed_in_window(uint64_t id, uint32_t indx, void *payload)
{
	return jo_wwin_needed(payload, id, indx);
}

struct leave_ctx {
	uint64_t index;
};

static void free_leaving(struct jo_wwin_batch *bt, void *payload)
{
	struct leave_ctx *lc = payload;
	struct jo_wwin_batch_info bi;

	jo_wwin_batch_info(bt, &bi);
	if (bi.closed && bi.index <= lc->index)
		free_user(bt, NULL);
}

/* Move the consumer's position to index; evict; persist. */
static int advance(struct follow *f, uint64_t index, const char *id)
{
	struct leave_ctx lc = { .index = index };
	size_t left;
	int rc = 0;

	if ((int64_t)index <= jo_wwin_position(f->w))
		return 0;
	/* id may belong to a batch that is about to leave the window */
	free(f->st_id);
	f->st_id = strdup(id);
	if (!f->st_id)
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	jo_wwin_each_batch(f->w, free_leaving, &lc);
	left = jo_wwin_done(f->w, index);
	emit(json_pack("{s:s,s:s,s:I,s:I}", "type", "done", "batch", f->st_id, "index",
		       (json_int_t)index, "left", (json_int_t)left));
	if (f->o->evict_done) {
		rc = evict_round(f);
		if (rc)
			return rc;
	}
	/* without --evict-done there is nothing left to evict up to here either */
	f->evicted_through = index + 1;
	return state_write(f);
}

/* A batch reported ready lost blocks to a whole-file eviction: warming again. */
static void on_unready(struct jo_wwin_batch *bt, void *payload)
{
	struct follow *f = payload;
	struct jo_wwin_batch_info bi;

	jo_wwin_batch_info(bt, &bi);
	f->ready_batches--;
	emit(json_pack("{s:s,s:s,s:I,s:b,s:I}", "type", "unready", "batch", bi.id, "index",
		       (json_int_t)bi.index, "ready", false, "pending", (json_int_t)bi.pending));
}

static int evict_round(struct follow *f)
{
	struct jo_wwin_evict *ev = NULL;
	struct wu_evict_file *files = NULL;
	struct jo_wwin_file **fp = NULL;
	struct wu_bset *targets = NULL;
	struct wu_evict_result er;
	size_t n = 0, nf = 0, requeued = 0;
	int rc;

	rc = jo_wwin_take_evicts(f->w, &ev, &n, &f->st->err);
	if (rc || !n)
		return rc;
	files = calloc(n, sizeof(*files));
	fp = calloc(n, sizeof(*fp));
	if (!files || !fp || wu_bset_new(&targets)) {
		rc = jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t k;

		/* a block the window needs again since it was listed stays */
		if (jo_wwin_needed(f->w, ev[i].id, ev[i].indx))
			continue;
		if (wu_bset_add(targets, ev[i].id, ev[i].indx, ev[i].bsize) < 0) {
			rc = jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
			goto out;
		}
		for (k = 0; k < nf && fp[k] != ev[i].file; k++)
			;
		if (k < nf)
			continue;
		if (!jo_wwin_file_mpath(ev[i].file))
			continue;
		fp[nf] = ev[i].file;
		files[nf].vpath = jo_wwin_file_vpath(ev[i].file);
		files[nf].mpath = jo_wwin_file_mpath(ev[i].file);
		files[nf].ino = jo_wwin_file_ino(ev[i].file);
		files[nf].flen = jo_wwin_file_len(ev[i].file);
		files[nf].tag = ev[i].file;
		nf++;
	}
	if (!wu_bset_count(targets))
		goto out;
	rc = wu_evict(f->st, f->mi, f->have_cd ? &f->cd : NULL, files, nf, targets, f->o->others,
		      needed_in_window, f->w, f->o->threads, &er, &f->st->err);
	if (rc)
		goto out;
	/* the mount evicted those files whole: warm again what the window needs */
	for (size_t k = 0; k < nf; k++)
		requeued += jo_wwin_requeue_file(f->w, fp[k], on_unready, f);
	f->evict_rounds++;
	f->evicted_blocks += er.blocks;
	f->evicted_bytes += er.bytes;
	f->rewarmed += er.rewarmed_blocks;
	{
		json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:b}", "type", "evict", "files",
				      (json_int_t)er.files, "blocks", (json_int_t)er.blocks, "bytes",
				      (json_int_t)er.bytes, "window_blocks",
				      (json_int_t)er.window_blocks, "requeued", (json_int_t)requeued,
				      "block_exact", er.block_exact);

		if (o && er.block_exact) {
			json_object_set_new(o, "cached_blocks", json_integer((json_int_t)er.cached_blocks));
			json_object_set_new(o, "still_cached", json_integer((json_int_t)er.still_blocks));
			json_object_set_new(o, "other_blocks", json_integer((json_int_t)er.other_blocks));
			json_object_set_new(o, "rewarmed_blocks",
					    json_integer((json_int_t)er.rewarmed_blocks));
		}
		emit(o);
	}
out:
	wu_bset_free(targets);
	free(files);
	free(fp);
	jo_wwin_evicts_free(f->w, ev, n);
	return rc;
}

static int follow_on_block(const struct jo_warmup_block *b, void *payload)
{
	struct follow *f = payload;
	struct jo_wwin_file *file;

	if (!f->cur_mpath_for || strcmp(f->cur_mpath_for, f->st->cur_path)) {
		free(f->cur_mpath_for);
		free(f->cur_mpath);
		f->cur_mpath_for = strdup(f->st->cur_path);
		f->cur_mpath = wu_mount_path(f->st->mount, f->mi->subdir, f->st->cur_path);
		if (!f->cur_mpath_for)
			return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	}
	/* looked up per block: the window frees a file nobody needs */
	file = jo_wwin_file(f->w, f->st->cur_path, f->cur_mpath, f->st->cur_ino, f->st->cur_len);
	if (!file)
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	f->st->block_refs++;
	return jo_wwin_add(f->w, b, file, &f->st->err);
}

static int follow_on_range(const char *path, uint64_t off, uint64_t len, void *payload)
{
	struct follow *f = payload;
	struct wu_state *st = f->st;
	int rc;

	if (f->open_skip_map)
		return 0;
	rc = wu_set_file(st, path);
	if (rc)
		return rc;
	st->ranges++;
	if (off < st->cur_len)
		st->req_bytes += len > st->cur_len - off ? st->cur_len - off : len;
	return jo_warmup_map_range(st->mapper, st->cur_ino, st->cur_len, off, len, follow_on_block,
				   f, &st->err);
}

/* Open the next batch of the stream. */
static int open_batch(struct follow *f, const char *json_id)
{
	uint64_t idx = jo_wwin_next_index(f->w);
	bool passed = false, map = true;
	int rc;

	if (f->st_have && idx <= f->st_index) {
		/* the position of a killed run: passed; evicted unless it already was */
		passed = true;
		map = f->o->evict_done && idx + 1 > f->st_evicted;
	} else if (f->target) {
		passed = true;
		map = f->o->evict_done;
	}
	rc = jo_wwin_open(f->w, json_id, passed, &f->st->err);
	if (rc)
		return rc;
	f->open_skip_map = passed && !map;
	if (passed)
		f->skipped_batches++;
	f->open_t = wu_now();
	free(f->open_json_id);
	f->open_json_id = NULL;
	if (json_id && !(f->open_json_id = strdup(json_id)))
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	return 0;
}

static struct jo_wwin_batch *last_batch(struct follow *f);

/* Close the open batch as id; move the position when the consumer is there. */
static int close_batch(struct follow *f, const char *id)
{
	struct jo_wwin_batch *bt;
	struct jo_wwin_batch_info bi;
	struct bt_user *u;
	int rc;

	rc = jo_wwin_close(f->w, id, &f->st->err);
	if (rc)
		return rc;
	free(f->open_json_id);
	f->open_json_id = NULL;
	f->open_skip_map = false;
	bt = last_batch(f);
	if (!bt)
		return 0;
	jo_wwin_batch_info(bt, &bi);
	u = calloc(1, sizeof(*u));
	if (u) {
		u->t_open = f->open_t;
		*jo_wwin_batch_user(bt) = u;
	}
	if (f->st_have && bi.index == f->st_index) {
		/* a resumed position: the batch there must be the one the state names */
		if (strcmp(bi.id, f->target))
			return jo_err_set(&f->st->err, JO_EINVAL,
					  "state file '%s' does not match this stream: batch %" PRIu64
					  " is '%s', the state says '%s' (remove the file to start "
					  "over)", f->o->state, bi.index, bi.id, f->target);
		f->st_have = false;
		free(f->target);
		f->target = NULL;
		return advance(f, bi.index, bi.id);
	}
	if (f->target && !f->st_have) {
		/* the consumer is beyond: up to its batch, everything is passed */
		if (!strcmp(bi.id, f->target)) {
			free(f->target);
			f->target = NULL;
		}
		return advance(f, bi.index, bi.id);
	}
	if (bi.passed)
		return advance(f, bi.index, bi.id);
	emit(json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I}", "type", "admit", "batch", bi.id, "index",
		       (json_int_t)bi.index, "position_at_open", (json_int_t)bi.position_at_open,
		       "ahead", (json_int_t)((int64_t)bi.index - bi.position_at_open), "blocks",
		       (json_int_t)bi.blocks, "new_blocks", (json_int_t)bi.new_blocks));
	return 0;
}

struct last_ctx {
	struct jo_wwin_batch *last;
};

static void find_last(struct jo_wwin_batch *bt, void *payload)
{
	((struct last_ctx *)payload)->last = bt;
}

static struct jo_wwin_batch *last_batch(struct follow *f)
{
	struct last_ctx lc = { 0 };

	jo_wwin_each_batch(f->w, find_last, &lc);
	return lc.last;
}

static void find_last_closed(struct jo_wwin_batch *bt, void *payload)
{
	struct jo_wwin_batch_info bi;

	jo_wwin_batch_info(bt, &bi);
	if (bi.closed)
		((struct last_ctx *)payload)->last = bt;
}

/* The newest closed batch of the window, or NULL. */
static struct jo_wwin_batch *last_closed(struct follow *f)
{
	struct last_ctx lc = { 0 };

	jo_wwin_each_batch(f->w, find_last_closed, &lc);
	return lc.last;
}

/*
 * Classify a stream line: 1 a batch marker (*id set, malloc'd), 2 a range
 * line (*id: its JSON batch field or NULL), 0 nothing (comment, blank).
 */
static int classify(char *line, size_t n, char **id, struct jo_err *err)
{
	char *p = line;
	size_t m = n;

	*id = NULL;
	trim(&p, &m);
	if (!m)
		return 0;
	if (*p == '#') {
		p++, m--;
		while (m && (*p == ' ' || *p == '\t'))
			p++, m--;
		if (m > 5 && !strncmp(p, "batch", 5) && (p[5] == ' ' || p[5] == '\t')) {
			p += 5, m -= 5;
			trim(&p, &m);
			if (!m)
				return jo_err_set(err, JO_EINVAL, "'# batch' without an id");
			if (m > MAX_ID)
				return jo_err_set(err, JO_EINVAL, "batch id longer than %d bytes", MAX_ID);
			*id = strndup(p, m);
			return *id ? 1 : JO_ENOMEM;
		}
		return 0;
	}
	if (*p == '{') {
		json_error_t je;
		json_t *o = json_loadb(p, m, 0, &je), *b;
		int r = 2;

		if (!json_is_object(o)) {
			json_decref(o);
			return 2; /* the range parser says what is wrong */
		}
		b = json_object_get(o, "batch");
		if (b) {
			char num[32];
			const char *s = NULL;

			if (json_is_string(b) && json_string_length(b)) {
				s = json_string_value(b);
			} else if (json_is_integer(b)) {
				snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(b));
				s = num;
			} else {
				json_decref(o);
				return jo_err_set(err, JO_EINVAL, "\"batch\" must be a string or an integer");
			}
			if (strlen(s) > MAX_ID) {
				json_decref(o);
				return jo_err_set(err, JO_EINVAL, "batch id longer than %d bytes", MAX_ID);
			}
			*id = strdup(s);
			if (!*id) {
				json_decref(o);
				return JO_ENOMEM;
			}
			if (!json_object_get(o, "file") && !json_object_get(o, "path"))
				r = 1;
		}
		json_decref(o);
		return r;
	}
	return 2;
}

/*
 * Handle the stream lines in the buffer as far as the window allows.
 * Returns <0 on error, 1 when it stopped with lines it could handle left
 * (call again soon), 0 otherwise.
 */
static int pump_stream(struct follow *f, int budget)
{
	for (;;) {
		if (jo_cancelled())
			return 0;
		if (budget-- <= 0)
			return f->sbuf.len && memchr(f->sbuf.p, '\n', f->sbuf.len) ? 1 : 0;
		char *nl = memchr(f->sbuf.p ? f->sbuf.p : "", '\n', f->sbuf.len);
		char *line = f->sbuf.p, *id = NULL;
		size_t n;
		int kind, rc = 0;

		if (!nl) {
			if (!f->eof || !f->sbuf.len)
				break;
			/* the last line has no newline */
			n = f->sbuf.len;
		} else {
			n = (size_t)(nl - line) + 1;
		}
		kind = classify(line, n, &id, &f->st->err);
		if (kind < 0) {
			jo_err_wrap(&f->st->err, "stream line %" PRIu64, f->line + 1);
			return kind;
		}
		/* a JSON range of another batch closes the open one first */
		if (kind == 2 && id && jo_wwin_is_open(f->w) && f->open_json_id &&
		    strcmp(f->open_json_id, id)) {
			rc = close_batch(f, f->open_json_id);
			if (rc) {
				free(id);
				return rc;
			}
		}
		if (kind && !jo_wwin_is_open(f->w)) {
			bool will_pass = (f->st_have && jo_wwin_next_index(f->w) <= f->st_index) ||
					 f->target;

			if (!will_pass && !jo_wwin_has_room(f->w)) {
				free(id);
				break; /* wait for the consumer */
			}
			rc = open_batch(f, kind == 2 ? id : NULL);
			if (rc) {
				free(id);
				return rc;
			}
		}
		f->line++;
		if (kind == 1) {
			if (f->open_json_id && strcmp(f->open_json_id, id)) {
				rc = jo_err_set(&f->st->err, JO_EINVAL,
						"stream line %" PRIu64 ": '# batch %s' closes batch '%s'",
						f->line, id, f->open_json_id);
			} else {
				rc = close_batch(f, id);
			}
		} else if (kind == 2) {
			jo_err_clear(&f->st->err);
			rc = jo_warmup_parse_line(line, n, follow_on_range, f, NULL, &f->st->err);
			if (rc)
				jo_err_wrap(&f->st->err, "stream line %" PRIu64, f->line);
		}
		free(id);
		lbuf_consume(&f->sbuf, n);
		if (rc)
			return rc;
	}
	if (f->eof && !f->sbuf.len && jo_wwin_is_open(f->w)) {
		/* a batch without its closing line at the end: name it by its index */
		char name[32];
		const char *oid = f->open_json_id;

		snprintf(name, sizeof(name), "%" PRIu64, jo_wwin_next_index(f->w) - 1);
		if (!oid)
			fprintf(stderr, "%s %s: warning: the stream ended inside a batch; calling it '%s'\n",
				f->ctx->prog, f->ctx->cmd, name);
		return close_batch(f, oid ? oid : name);
	}
	return 0;
}

static bool stream_blocked(struct follow *f)
{
	/* a complete line waits for room in the window: read no more */
	return f->sbuf.len && memchr(f->sbuf.p, '\n', f->sbuf.len);
}

static int read_stream(struct follow *f)
{
	char buf[65536];
	ssize_t r = read(f->sfd, buf, sizeof(buf));

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r < 0)
		return jo_err_set(&f->st->err, JO_EIO, "cannot read the batch stream: %s",
				  strerror(errno));
	if (r == 0) {
		f->eof = true;
		return 0;
	}
	if (f->sbuf.len + (size_t)r > MAX_LINE && !memchr(buf, '\n', (size_t)r) &&
	    !memchr(f->sbuf.p, '\n', f->sbuf.len))
		return jo_err_set(&f->st->err, JO_EINVAL, "stream line %" PRIu64 " is longer than %u "
				  "bytes", f->line + 1, MAX_LINE);
	if (jo_dynbuf_add(&f->sbuf, buf, (size_t)r))
		return jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	return 0;
}

/* ------------------------------------------------------------- control */

static json_t *status_json(struct follow *f, const char *id)
{
	struct jo_wwin_batch *bt;
	struct jo_wwin_stats ws;
	int64_t pos = jo_wwin_position(f->w);
	uint64_t idx;

	if (!id) {
		jo_wwin_stats(f->w, &ws);
		return json_pack("{s:s,s:I,s:s?,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:s?}", "type",
				 "status", "position", (json_int_t)pos, "position_batch", f->st_id,
				 "next_index", (json_int_t)jo_wwin_next_index(f->w), "in_window",
				 (json_int_t)ws.in_window, "ahead", (json_int_t)f->o->ahead,
				 "window_blocks", (json_int_t)ws.blocks, "window_bytes",
				 (json_int_t)ws.bytes, "queued", (json_int_t)ws.queued, "inflight",
				 (json_int_t)ws.inflight, "eof", f->eof, "skipping_to", f->target);
	}
	bt = jo_wwin_find(f->w, id);
	if (bt) {
		struct jo_wwin_batch_info bi;
		const char *state;

		jo_wwin_batch_info(bt, &bi);
		state = bi.passed ? "done" : bi.ready ? "ready" : !bi.closed ? "reading" : "warming";
		return json_pack("{s:s,s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I}", "type", "status",
				 "batch", id, "state", state, "ready", bi.ready, "index",
				 (json_int_t)bi.index, "blocks", (json_int_t)bi.blocks, "bytes",
				 (json_int_t)bi.bytes, "pending", (json_int_t)bi.pending, "failed",
				 (json_int_t)bi.failed, "position", (json_int_t)pos);
	}
	if (jo_wwin_passed(f->w, id, &idx))
		return json_pack("{s:s,s:s,s:s,s:b,s:I,s:I}", "type", "status", "batch", id, "state",
				 "done", "ready", false, "index", (json_int_t)idx, "position",
				 (json_int_t)pos);
	return json_pack("{s:s,s:s,s:s,s:b,s:I}", "type", "status", "batch", id, "state",
			 "unknown", "ready", false, "position", (json_int_t)pos);
}

/* The consumer finished batch id. Returns the reply (new reference). */
static json_t *do_done(struct follow *f, const char *id)
{
	struct jo_wwin_batch *bt = jo_wwin_find(f->w, id);
	uint64_t idx;

	if (bt) {
		struct jo_wwin_batch_info bi;

		jo_wwin_batch_info(bt, &bi);
		if (bi.closed) {
			f->rc = advance(f, bi.index, id);
			return json_pack("{s:s,s:s,s:b,s:I}", "type", "done", "batch", id, "ok", f->rc == 0,
					 "position", (json_int_t)jo_wwin_position(f->w));
		}
	} else if (jo_wwin_passed(f->w, id, &idx) || (f->st_id && !strcmp(f->st_id, id))) {
		return json_pack("{s:s,s:s,s:b,s:b,s:I}", "type", "done", "batch", id, "ok", true,
				 "stale", true, "position", (json_int_t)jo_wwin_position(f->w));
	}
	/*
	 * Not read yet (or still open): the consumer is beyond every closed
	 * batch of the window; skip the stream up to id.
	 */
	free(f->target);
	f->target = strdup(id);
	f->st_have = false;
	if (!f->target) {
		f->rc = jo_err_set(&f->st->err, JO_ENOMEM, "out of memory");
	} else {
		struct jo_wwin_batch *last = last_closed(f);

		if (last) {
			struct jo_wwin_batch_info bi;

			jo_wwin_batch_info(last, &bi);
			f->rc = advance(f, bi.index, bi.id);
		}
	}
	return json_pack("{s:s,s:s,s:b,s:b,s:I}", "type", "done", "batch", id, "ok", f->rc == 0,
			 "ahead_of_stream", true, "position", (json_int_t)jo_wwin_position(f->w));
}

/* One control line; the reply (new reference) or NULL. */
static json_t *control_line(struct follow *f, char *line, size_t n)
{
	char *p = line;
	size_t m = n;

	trim(&p, &m);
	p[m] = '\0';
	if (!m)
		return NULL;
	if (!strncmp(p, "done ", 5) && m > 5) {
		char *id = p + 5;
		size_t k = m - 5;

		trim(&id, &k);
		id[k] = '\0';
		if (!k)
			return json_pack("{s:s,s:s}", "type", "error", "error", "done needs an id");
		return do_done(f, id);
	}
	if (!strcmp(p, "status"))
		return status_json(f, NULL);
	if (!strncmp(p, "status ", 7)) {
		char *id = p + 7;
		size_t k = m - 7;

		trim(&id, &k);
		id[k] = '\0';
		return status_json(f, k ? id : NULL);
	}
	return json_pack("{s:s,s:s,s:s}", "type", "error", "error", "unknown command (want 'done "
			 "ID', 'status ID' or 'status')", "line", p);
}

static void reply(int fd, json_t *o)
{
	char *s;
	size_t len, off = 0;

	if (!o)
		return;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return;
	len = strlen(s);
	while (off < len) {
		ssize_t w = send(fd, s + off, len - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	(void)send(fd, "\n", 1, MSG_NOSIGNAL); /* a gone client is the client's problem */
	free(s);
}

/* Handle the complete lines in l; replies to fd (-1: to stdout). */
static int control_lines(struct follow *f, struct jo_dynbuf *l, int fd)
{
	char *nl;

	while (l->len && (nl = memchr(l->p, '\n', l->len))) {
		size_t n = (size_t)(nl - l->p) + 1;
		json_t *o;

		*nl = '\0';
		o = control_line(f, l->p, n - 1);
		if (fd >= 0)
			reply(fd, o);
		else
			emit(o);
		lbuf_consume(l, n);
		if (f->rc)
			return f->rc;
	}
	if (l->len > 65536)
		l->len = 0; /* garbage without newlines */
	return 0;
}

/*
 * The control channel obeys its owner only: jfsops runs as root beside
 * other users, and a 'done' moves the window (and evicts). So:
 *  - PATH's directory must be one where only the caller (and root) can add,
 *    remove or replace an entry: owned by the caller or root, and writable
 *    by group or others only with the sticky bit (as /tmp, /run/user/UID);
 *  - an existing FIFO must be the caller's (the effective uid: root's
 *    pipeline takes root's FIFOs only) and writable by nobody else; a
 *    symbolic link at PATH is refused, and the FIFO is opened with
 *    O_NOFOLLOW and checked again on the open descriptor;
 *  - a socket is created mode 0600 (bound under a umask that makes it so:
 *    nobody can connect before it has that mode) and each connection is
 *    checked with SO_PEERCRED (accept_clients): the caller's uid or root.
 * The directories above PATH's are the operator's choice, as for any path.
 */
static bool owner_ok(uid_t uid)
{
	return uid == geteuid();
}

static int check_dir(struct follow *f, const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat sb;
	int n;

	n = !slash ? snprintf(dir, sizeof(dir), ".") :
	    slash == path ? snprintf(dir, sizeof(dir), "/") :
	    snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (n < 0 || (size_t)n >= sizeof(dir))
		return jo_err_set(&f->st->err, JO_EINVAL, "--control path '%s' is too long", path);
	if (stat(dir, &sb))
		return jo_err_set(&f->st->err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
				  "--control: cannot stat the directory '%s': %s", dir, strerror(errno));
	if (!S_ISDIR(sb.st_mode))
		return jo_err_set(&f->st->err, JO_EINVAL, "--control: '%s' is not a directory", dir);
	if (sb.st_uid != geteuid() && sb.st_uid != 0)
		return jo_err_set(&f->st->err, JO_EINVAL, "--control '%s': its directory '%s' belongs to "
				  "uid %u, who could replace the control channel (use a directory of "
				  "uid %u or root)", path, dir, (unsigned)sb.st_uid, (unsigned)geteuid());
	if ((sb.st_mode & (S_IWGRP | S_IWOTH)) && !(sb.st_mode & S_ISVTX))
		return jo_err_set(&f->st->err, JO_EINVAL, "--control '%s': its directory '%s' is writable "
				  "by %s (mode %04o, no sticky bit), who could replace the control channel",
				  path, dir, sb.st_mode & S_IWOTH ? "others" : "its group",
				  (unsigned)(sb.st_mode & 07777));
	return 0;
}

/* An existing FIFO at PATH (sb from lstat): the caller's and writable by nobody else. */
static int fifo_ok(struct follow *f, const char *path, const struct stat *sb)
{
	if (!owner_ok(sb->st_uid))
		return jo_err_set(&f->st->err, JO_EINVAL, "control FIFO '%s' belongs to uid %u, not to "
				  "uid %u: refused (anyone it lets write could mark batches done)", path,
				  (unsigned)sb->st_uid, (unsigned)geteuid());
	if (sb->st_mode & (S_IWGRP | S_IWOTH))
		return jo_err_set(&f->st->err, JO_EINVAL, "control FIFO '%s' is writable by %s (mode "
				  "%04o): refused (chmod go-w, or mkfifo -m 600)", path,
				  sb->st_mode & S_IWOTH ? "others" : "its group",
				  (unsigned)(sb->st_mode & 07777));
	return 0;
}

static int control_open(struct follow *f)
{
	const char *path = f->o->control;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb, fb;
	mode_t old_mask;
	int rc;

	rc = check_dir(f, path);
	if (rc)
		return rc;
	if (!lstat(path, &sb)) {
		if (S_ISLNK(sb.st_mode))
			return jo_err_set(&f->st->err, JO_EINVAL, "--control '%s' is a symbolic link: "
					  "refused (name the FIFO or socket itself)", path);
		if (S_ISFIFO(sb.st_mode)) {
			rc = fifo_ok(f, path, &sb);
			if (rc)
				return rc;
			/* read-write: we hold a writer, so writers coming and going is no EOF */
			f->cfd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
			if (f->cfd < 0)
				return jo_err_set(&f->st->err, JO_EIO, "cannot open control FIFO '%s': %s",
						  path, strerror(errno));
			/* what was opened is what was checked */
			if (fstat(f->cfd, &fb) || !S_ISFIFO(fb.st_mode) || fb.st_dev != sb.st_dev ||
			    fb.st_ino != sb.st_ino)
				return jo_err_set(&f->st->err, JO_EINVAL, "control FIFO '%s' was replaced "
						  "while it was opened: refused", path);
			rc = fifo_ok(f, path, &fb);
			if (rc)
				return rc;
			f->is_fifo = true;
			return 0;
		}
		if (!S_ISSOCK(sb.st_mode))
			return jo_err_set(&f->st->err, JO_EINVAL, "--control '%s' exists and is neither a "
					  "FIFO nor a socket", path);
		if (!owner_ok(sb.st_uid))
			return jo_err_set(&f->st->err, JO_EINVAL, "--control '%s' is a socket of uid %u, not "
					  "of uid %u: refused", path, (unsigned)sb.st_uid,
					  (unsigned)geteuid());
	}
	if (strlen(path) >= sizeof(sa.sun_path))
		return jo_err_set(&f->st->err, JO_EINVAL, "--control path '%s' is longer than %zu bytes "
				  "(unix socket limit)", path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (!lstat(path, &sb)) {
		/* our socket is there: in use by another pipeline, or left by a dead one */
		int t = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		bool live = t >= 0 && !connect(t, (struct sockaddr *)&sa, sizeof(sa));

		if (t >= 0)
			close(t);
		if (live)
			return jo_err_set(&f->st->err, JO_EINVAL, "another pipeline listens on '%s'", path);
		if (unlink(path))
			return jo_err_set(&f->st->err, JO_EIO, "cannot remove the stale socket '%s': %s",
					  path, strerror(errno));
	}
	f->cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->cfd < 0)
		return jo_err_set(&f->st->err, JO_EIO, "socket: %s", strerror(errno));
	/*
	 * bind() creates the socket file with mode 0777 & ~umask: under 0177 it is
	 * born 0600, whatever the caller's umask. The umask is the process's, but
	 * no other thread runs yet (the fetcher starts later), and a tighter mask
	 * could only make a file created meanwhile more private, never less.
	 */
	old_mask = umask(0177);
	rc = bind(f->cfd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old_mask);
	if (rc)
		return jo_err_set(&f->st->err, JO_EIO, "cannot listen on '%s': %s", path,
				  strerror(errno));
	f->sock_made = true;
	/* nobody can connect before listen(): check what bind made first */
	if (lstat(path, &sb) || !S_ISSOCK(sb.st_mode) || !owner_ok(sb.st_uid) ||
	    (sb.st_mode & 0777) != 0600)
		return jo_err_set(&f->st->err, JO_EIO, "the control socket '%s' is not mode 0600 and "
				  "ours after bind: refused", path);
	if (listen(f->cfd, 16))
		return jo_err_set(&f->st->err, JO_EIO, "cannot listen on '%s': %s", path,
				  strerror(errno));
	return 0;
}

static void unlink_socket(void *payload)
{
	unlink((const char *)payload);
}

/* A connection from the caller's uid or root; anyone else is told so, logged and closed. */
static bool peer_ok(struct follow *f, int fd)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) || len != sizeof(uc)) {
		fprintf(stderr, "%s %s: refused a control connection whose sender is unknown: %s\n",
			f->ctx->prog, f->ctx->cmd, strerror(errno));
		return false;
	}
	if (uc.uid == geteuid() || uc.uid == 0)
		return true;
	fprintf(stderr, "%s %s: refused a control connection from uid %u (pid %ld): the pipeline "
		"obeys uid %u and root only\n", f->ctx->prog, f->ctx->cmd, (unsigned)uc.uid,
		(long)uc.pid, (unsigned)geteuid());
	reply(fd, json_pack("{s:s,s:s}", "type", "error", "error", "permission denied: not the "
			    "pipeline's owner"));
	return false;
}

static void accept_clients(struct follow *f)
{
	for (;;) {
		int fd = accept(f->cfd, NULL, NULL);

		if (fd < 0)
			return;
		if (fcntl(fd, F_SETFL, O_NONBLOCK) || fcntl(fd, F_SETFD, FD_CLOEXEC)) {
			close(fd);
			continue;
		}
		if (!peer_ok(f, fd)) {
			close(fd);
			continue;
		}
		if (f->ncl == MAX_CLIENTS) {
			reply(fd, json_pack("{s:s,s:s}", "type", "error", "error", "too many clients"));
			close(fd);
			continue;
		}
		f->cl[f->ncl].fd = fd;
		memset(&f->cl[f->ncl].in, 0, sizeof(f->cl[f->ncl].in));
		f->ncl++;
	}
}

static void drop_client(struct follow *f, size_t i)
{
	close(f->cl[i].fd);
	jo_dynbuf_release(&f->cl[i].in);
	f->cl[i] = f->cl[--f->ncl];
}

/* Read what a client (or the FIFO) sent; 1 = closed. */
static int read_ctl(int fd, struct jo_dynbuf *l)
{
	char buf[4096];

	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN ? 0 : 1;
		if (r == 0)
			return 1;
		if (jo_dynbuf_add(l, buf, (size_t)r))
			return 1;
		if ((size_t)r < sizeof(buf))
			return 0;
	}
}

/* ---------------------------------------------------------------- loop */

static void summary(struct follow *f, const struct jo_ctx *ctx, bool complete, int exit_code)
{
	struct jo_wwin_stats ws;

	jo_wwin_stats(f->w, &ws);
	/* the envelope every command's summary has (common/summary.c); main checks stdout */
	(void)cmd_summary_emit(ctx, json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
					      "s:I,s:I,s:I}", "mode", "follow",
		       "batches", (json_int_t)ws.batches, "ready",
		       (json_int_t)f->ready_batches, "skipped", (json_int_t)f->skipped_batches,
		       "position", (json_int_t)jo_wwin_position(f->w), "ahead",
		       (json_int_t)f->o->ahead, "max_ahead", (json_int_t)ws.max_ahead,
		       "max_window_bytes", (json_int_t)ws.max_bytes, "warmed",
		       (json_int_t)f->warmed, "warmed_bytes", (json_int_t)f->warmed_bytes, "failed",
		       (json_int_t)f->failed, "cancelled", (json_int_t)ws.cancelled, "requeued",
		       (json_int_t)ws.requeued, "evicted_blocks", (json_int_t)f->evicted_blocks,
		       "evicted_bytes", (json_int_t)f->evicted_bytes, "rewarmed",
		       (json_int_t)f->rewarmed), complete, exit_code);
}

static bool finished(struct follow *f)
{
	struct jo_wwin_stats ws;

	if (!f->eof || f->sbuf.len || jo_wwin_is_open(f->w))
		return false;
	jo_wwin_stats(f->w, &ws);
	return ws.in_window == 0 && !f->outstanding;
}

/* What the pipeline needs: window, cache dirs, state, wake pipe, control, stream, fetcher. */
static int follow_open(struct follow *f)
{
	struct wu_state *st = f->st;
	const struct wu_follow_opts *o = f->o;
	struct jo_err cerr = { 0 };
	int rc;

	rc = jo_wwin_new(&f->w, o->ahead, o->evict_done, &st->err);
	if (rc)
		return rc;
	f->have_cd = !jo_warmup_cachedirs_init(&f->cd, f->mi->cache_dir, &cerr);
	if (!f->have_cd && o->evict_done)
		fprintf(stderr, "%s %s: warning: %s; --evict-done evicts whole files and cannot tell "
			"which of their other blocks were cached\n", st->ctx->prog, st->ctx->cmd,
			JO_ESC_TERM(cerr.msg));
	if (o->state) {
		rc = state_read(f);
		if (rc)
			return rc;
	}
	if (pipe(f->wake) || fcntl(f->wake[0], F_SETFL, O_NONBLOCK) ||
	    fcntl(f->wake[1], F_SETFL, O_NONBLOCK))
		return jo_err_set(&st->err, JO_EIO, "pipe: %s", strerror(errno));
	rc = control_open(f);
	if (rc)
		return rc;
	if (f->sock_made)
		jo_cancel_atexit(unlink_socket, (void *)o->control);
	if (!strcmp(o->ranges, "-")) {
		f->sfd = STDIN_FILENO;
	} else {
		/* O_NONBLOCK: a FIFO without a writer yet must not hold up the control */
		f->sfd = open(o->ranges, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (f->sfd < 0)
			return jo_err_set(&st->err, errno == ENOENT ? JO_ENOTFOUND : JO_EIO,
					  "cannot open the batch stream '%s': %s", o->ranges,
					  strerror(errno));
		f->sfd_own = true;
	}
	rc = jo_warmup_fetcher_new(&f->fetcher, o->threads, f->mi->prefetch, NULL, NULL, &st->err);
	if (rc)
		return rc;
	jo_warmup_fetcher_on_done(f->fetcher, on_read_done, f);
	if (f->have_cd)
		jo_warmup_fetcher_watch_cache(f->fetcher, &f->cd);
	return 0;
}

/* Where each descriptor sits in the poll set (-1: not polled this round). */
struct follow_poll {
	struct pollfd pf[3 + MAX_CLIENTS];
	int np, ip_stream, ip_wake, ip_ctl, ip_cl0;
};

static void follow_poll_set(struct follow *f, struct follow_poll *p)
{
	p->np = 0;
	p->ip_stream = -1;
	p->ip_wake = p->np;
	p->pf[p->np++] = (struct pollfd){ .fd = f->wake[0], .events = POLLIN };
	p->ip_ctl = p->np;
	p->pf[p->np++] = (struct pollfd){ .fd = f->cfd, .events = POLLIN };
	if (!f->eof && !stream_blocked(f)) {
		p->ip_stream = p->np;
		p->pf[p->np++] = (struct pollfd){ .fd = f->sfd, .events = POLLIN };
	}
	p->ip_cl0 = p->np;
	for (size_t i = 0; i < f->ncl; i++)
		p->pf[p->np++] = (struct pollfd){ .fd = f->cl[i].fd, .events = POLLIN };
}

/* What poll found ready: the control channel and its clients, ended reads, the stream. */
static int follow_ready(struct follow *f, const struct follow_poll *p)
{
	int rc = 0;

	/* 1. the consumer first: its position decides what is worth warming */
	if (p->pf[p->ip_ctl].revents) {
		if (f->is_fifo) {
			(void)read_ctl(f->cfd, &f->fifo_in); /* O_RDWR: never closes */
			rc = control_lines(f, &f->fifo_in, -1);
		} else {
			accept_clients(f);
		}
	}
	for (size_t i = f->ncl; !rc && i-- > 0;) {
		int k = p->ip_cl0 + (int)i;

		if (k >= p->np || !p->pf[k].revents || p->pf[k].fd != f->cl[i].fd)
			continue;
		if (read_ctl(f->cl[i].fd, &f->cl[i].in)) {
			rc = control_lines(f, &f->cl[i].in, f->cl[i].fd);
			drop_client(f, i);
		} else {
			rc = control_lines(f, &f->cl[i].in, f->cl[i].fd);
		}
	}
	if (rc)
		return rc;
	/* 2. reads that ended (one for a passed batch may have cached it again) */
	if (p->pf[p->ip_wake].revents) {
		take_completions(f);
		if (f->o->evict_done) {
			rc = evict_round(f);
			if (rc)
				return rc;
		}
	}
	/* 3. the stream, as far as the window allows */
	if (p->ip_stream >= 0 && p->pf[p->ip_stream].revents)
		rc = read_stream(f);
	return rc;
}

/* Until the stream ended and the consumer passed its last batch, or a signal. */
static int follow_loop(struct follow *f)
{
	struct follow_poll p;
	bool more = false;
	int rc;

	while (!jo_cancelled()) {
		rc = submit(f);
		if (!rc)
			jo_wwin_take_ready(f->w, on_ready, f);
		if (rc)
			return rc;
		if (finished(f))
			break;
		follow_poll_set(f, &p);
		if (poll(p.pf, (nfds_t)p.np, more ? 0 : 1000) < 0) {
			if (errno == EINTR)
				continue;
			return jo_err_set(&f->st->err, JO_EIO, "poll: %s", strerror(errno));
		}
		rc = follow_ready(f, &p);
		if (rc)
			return rc;
		rc = pump_stream(f, 256);
		if (rc < 0)
			return rc;
		more = rc == 1;
	}
	return 0;
}

static void follow_close(struct follow *f)
{
	jo_warmup_fetcher_free(f->fetcher);
	if (f->w)
		jo_wwin_each_batch(f->w, free_user, NULL);
	jo_wwin_free(f->w);
	jo_warmup_cachedirs_release(&f->cd);
	for (size_t i = 0; i < f->ncl; i++) {
		close(f->cl[i].fd);
		jo_dynbuf_release(&f->cl[i].in);
	}
	if (f->cfd >= 0)
		close(f->cfd);
	if (f->sock_made) {
		unlink(f->o->control);
		jo_cancel_atexit_remove(unlink_socket, (void *)f->o->control);
	}
	if (f->sfd_own)
		close(f->sfd);
	for (int i = 0; i < 2; i++)
		if (f->wake[i] >= 0)
			close(f->wake[i]);
	jo_dynbuf_release(&f->sbuf);
	jo_dynbuf_release(&f->fifo_in);
	free(f->cq);
	free(f->target);
	free(f->st_id);
	free(f->open_json_id);
	free(f->cur_mpath);
	free(f->cur_mpath_for);
}

int wu_follow(struct wu_state *st, const struct jo_warmup_mount *mi,
	      const struct wu_follow_opts *o)
{
	struct follow f = { .st = st, .mi = mi, .o = o, .ctx = st->ctx, .sfd = -1, .cfd = -1,
			    .wake = { -1, -1 }, .mu = PTHREAD_MUTEX_INITIALIZER };
	int frc, rc;

	f.t0 = wu_now();
	frc = follow_open(&f);
	if (!frc)
		frc = follow_loop(&f);
	if (f.fetcher) {
		jo_warmup_fetcher_finish(f.fetcher);
		take_completions(&f);
	}
	if (!frc && !jo_cancelled() && f.target)
		fprintf(stderr, "%s %s: warning: the consumer reported done for batch '%s', which "
			"the stream never had\n", st->ctx->prog, st->ctx->cmd, JO_ESC_TERM(f.target));
	if (frc)
		rc = cmd_fail(st->ctx, &st->err);
	else if (jo_cancelled())
		rc = 128 + jo_cancelled();
	else
		rc = f.failed ? JO_EXIT_PARTIAL : JO_EXIT_OK;
	if (f.w)
		summary(&f, st->ctx, !frc && !jo_cancelled(), rc);
	follow_close(&f);
	return rc;
}

/* --------------------------------------------------------------- client */

int wu_client(struct jo_ctx *ctx, const char *control, const char *verb, const char *id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	char line[2048], buf[65536];
	size_t n = 0;
	json_t *o;
	int fd, len, send_errno = 0;

	if (strchr(id, '\n') || !*id)
		return cmd_usage_error(ctx, "bad batch id '%s'", id);
	len = snprintf(line, sizeof(line), "%s %s\n", verb, id);
	if (len < 0 || (size_t)len >= sizeof(line))
		return cmd_usage_error(ctx, "batch id too long");
	/*
	 * Talk to the caller's own (or root's) pipeline only: no symbolic link, a
	 * FIFO of the caller or root, a socket whose listener runs as either
	 * (SO_PEERCRED), so a channel another user put at PATH learns nothing
	 * and answers nothing.
	 */
	if (lstat(control, &sb)) {
		fprintf(stderr, "%s %s: no pipeline at '%s': %s\n", ctx->prog, ctx->cmd, control,
			strerror(errno));
		return JO_EXIT_CONNECT;
	}
	if (S_ISLNK(sb.st_mode))
		return cmd_usage_error(ctx, "--control '%s' is a symbolic link: refused (name the "
				       "pipeline's FIFO or socket itself)", control);
	if (sb.st_uid != geteuid() && sb.st_uid != 0)
		return cmd_usage_error(ctx, "--control '%s' belongs to uid %u, not to you (uid %u) or "
				       "root: refused", control, (unsigned)sb.st_uid,
				       (unsigned)geteuid());
	if (S_ISFIFO(sb.st_mode)) {
		struct stat fb;
		ssize_t w;

		if (!strcmp(verb, "status")) {
			fprintf(stderr, "%s %s: '%s' is a FIFO, which cannot answer: the pipeline prints "
				"status lines on its stdout (use a socket for --status)\n", ctx->prog,
				ctx->cmd, control);
			return JO_EXIT_UNSUPPORTED;
		}
		fd = open(control, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0) {
			fprintf(stderr, "%s %s: no pipeline reads '%s': %s\n", ctx->prog, ctx->cmd,
				control, strerror(errno));
			return JO_EXIT_CONNECT;
		}
		if (fstat(fd, &fb) || fb.st_dev != sb.st_dev || fb.st_ino != sb.st_ino) {
			close(fd);
			return cmd_usage_error(ctx, "--control '%s' was replaced while it was opened: "
					       "refused", control);
		}
		/* a line this short is written whole (PIPE_BUF) */
		w = write(fd, line, (size_t)len);
		close(fd);
		if (w != len) {
			fprintf(stderr, "%s %s: cannot write to '%s': %s\n", ctx->prog, ctx->cmd, control,
				w < 0 ? strerror(errno) : "short write");
			return JO_EXIT_FAIL;
		}
		return JO_EXIT_OK;
	}
	if (strlen(control) >= sizeof(sa.sun_path))
		return cmd_usage_error(ctx, "--control path too long for a unix socket");
	memcpy(sa.sun_path, control, strlen(control) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "%s %s: cannot reach the pipeline at '%s': %s\n", ctx->prog, ctx->cmd,
			control, strerror(errno));
		if (fd >= 0)
			close(fd);
		return JO_EXIT_CONNECT;
	}
	{
		struct ucred uc;
		socklen_t ul = sizeof(uc);

		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) || ul != sizeof(uc) ||
		    (uc.uid != geteuid() && uc.uid != 0)) {
			close(fd);
			return cmd_usage_error(ctx, "the process listening on '%s' is not yours (uid "
					       "%ld) or root's: refused", control,
					       ul == sizeof(uc) ? (long)uc.uid : -1L);
		}
	}
	if (send(fd, line, (size_t)len, MSG_NOSIGNAL) != len) {
		send_errno = errno;
		/* a pipeline that refused us replied why before it closed: read that */
		if (send_errno != EPIPE && send_errno != ECONNRESET) {
			fprintf(stderr, "%s %s: cannot send to '%s': %s\n", ctx->prog, ctx->cmd,
				control, strerror(send_errno));
			close(fd);
			return JO_EXIT_CONNECT;
		}
	}
	while (n < sizeof(buf) - 1) {
		ssize_t r = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);

		if (r < 0 && errno == EINTR && !jo_cancelled())
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (memchr(buf, '\n', n))
			break;
	}
	close(fd);
	buf[n] = '\0';
	if (jo_cancelled())
		return 128 + jo_cancelled();
	o = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	if (!o && send_errno) {
		fprintf(stderr, "%s %s: cannot send to '%s': %s\n", ctx->prog, ctx->cmd, control,
			strerror(send_errno));
		return JO_EXIT_CONNECT;
	}
	if (!o) {
		fprintf(stderr, "%s %s: no answer from the pipeline at '%s'\n", ctx->prog, ctx->cmd,
			control);
		return JO_EXIT_FAIL;
	}
	fputs(buf, stdout);
	if (n && buf[n - 1] != '\n')
		fputc('\n', stdout);
	{
		const char *state = json_string_value(json_object_get(o, "state"));
		bool ok = json_is_true(json_object_get(o, "ok"));
		int rc;

		if (!strcmp(verb, "status"))
			rc = json_is_true(json_object_get(o, "ready")) ? JO_EXIT_OK :
			     state && !strcmp(state, "unknown") ? JO_EXIT_NOTFOUND : JO_EXIT_FOUND;
		else
			rc = ok ? JO_EXIT_OK : JO_EXIT_FAIL;
		json_decref(o);
		return rc;
	}
}
