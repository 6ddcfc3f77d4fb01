/*
 * jfsops doctor: check that a volume can be worked on, one line per check,
 * each with a hint that says how to fix what failed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/config.h"
#include "common/err.h"
#include "common/esc.h"
#include "common/jfs/jfs.h"
#include "common/meta/meta.h"
#include "common/object/object.h"

static const char doctor_usage[] =
	"usage: jfsops doctor META-URL [--json]\n"
	"\n"
	"Check, one line each, that jfsops can work on a volume: the metadata engine\n"
	"is reachable and holds a JuiceFS volume; its format version, compression\n"
	"and encryption are supported; the object store is reachable with the stored\n"
	"(or given) credentials - a probe object NAME/jfsops-doctor-probe-... is\n"
	"written, read back and deleted (nothing is left behind); blocks the metadata\n"
	"references are there (a sample of up to 32 slices: a bucket emptied or\n"
	"replaced fails here; `jfsops leakcheck` checks every block); the local clock\n"
	"agrees with the object\n"
	"store's; whether live clients run background jobs (then gc workers\n"
	"overlap with their hourly cleanups: mount them with --no-bgjob); and whether\n"
	"anything reclaims the volume: a warning when trash hours, removed files or\n"
	"delayed slices are overdue by more than an hour (no gc, no client cleanup).\n"
	"Exit 0 when every check passed (warnings allowed), else the code of the\n"
	"first failure: 5 a server is unreachable, 6 the object store rejected the\n"
	"credentials, 7 not a JuiceFS volume or a corrupt format record (a field\n"
	"juicefs cannot have written: BlockSize, Compression, Storage, TrashDays...),\n"
	"8 bucket or database missing, 9 unsupported (encryption, format version),\n"
	"11 the metadata engine rejected the password, 12 the clock is skewed,\n"
	"3 anything else.\n"
	"\n"
	"";

static const char doctor_tail[] =
	CMD_VOL_NOTE
	"\n"
	"Examples:\n"
	"  jfsops doctor redis://:secret@10.0.0.5:6379/1\n"
	"  JFSOPS_SECRET_KEY=... jfsops doctor sqlite3:///var/jfs/meta.db --json\n";

enum verdict { OK, WARN, FAIL };

/* doctor's own exit codes, next to common/exit.h's */
enum { DOCTOR_EXIT_META_AUTH = JO_EXIT_META_AUTH, DOCTOR_EXIT_CLOCK = JO_EXIT_CLOCK };

struct doc {
	struct jo_ctx *ctx;
	int first_fail;  /* exit code of the first failure */
	int fails, warns;
};

/* code: a JO_E* code (< 0), or a positive exit code of doctor's own */
static void report(struct doc *d, const char *check, enum verdict v, int code,
		   const char *detail, const char *hint)
{
	static const char *tags[] = { "ok", "warn", "FAIL" };

	if (v == FAIL) {
		d->fails++;
		if (!d->first_fail)
			d->first_fail = code > 0 ? code : code ? jo_exit_from_err(code) : JO_EXIT_FAIL;
	} else if (v == WARN) {
		d->warns++;
	}
	if (d->ctx->json) {
		json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "type", "check", "check", check,
				      "result", tags[v], "detail", detail);

		if (hint && v != OK)
			json_object_set_new(o, "hint", json_string(hint));
		json_dumpf(o, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
		fputc('\n', stdout);
		json_decref(o);
		return;
	}
	/* details quote servers, names and keys: escaped for the terminal */
	printf("%-5s %-14s %s", tags[v], check, JO_ESC_TERM(detail));
	if (hint && v != OK)
		printf("\n      hint: %s", JO_ESC_TERM(hint));
	putchar('\n');
}

static const char *obj_hint(int code, const char *msg)
{
	if (msg && strstr(msg, "RequestTimeTooSkewed"))
		return "this machine's clock differs from the object store's by more than 15 minutes, so signed requests are refused: fix NTP (chronyc tracking / timedatectl)";
	switch (code) {
	case JO_EAUTH:
		return "the access key or secret key is wrong (stored in the volume's format, or given by --access-key/JFSOPS_SECRET_KEY)";
	case JO_ECONNECT:
	case JO_ETIMEOUT:
		return "the endpoint is unreachable: check the bucket URL (--bucket), DNS, port, TLS (--insecure for self-signed)";
	case JO_ESTATE:
	case JO_ENOTFOUND:
		return "the bucket does not exist: create it, or point --bucket at the right one";
	case JO_EINVAL:
		return "the bucket URL cannot be parsed";
	}
	return "see the error above";
}

/*
 * A failed object-store step: a SigV4 clock-skew refusal is reported as the
 * clock problem it is, anything else under the step's name.
 */
static void obj_fail(struct doc *d, const char *check, int rc, const struct jo_err *err)
{
	if (strstr(err->msg, "RequestTimeTooSkewed") || strstr(err->msg, "RequestExpired")) {
		report(d, "clock-skew", FAIL, DOCTOR_EXIT_CLOCK, err->msg, obj_hint(rc, err->msg));
		return;
	}
	report(d, check, FAIL, rc, err->msg, obj_hint(rc, err->msg));
}

/* Stop a listing at its first entry: reaching the store is what we check. */
static int first_entry(const struct jo_obj_info *info, void *payload)
{
	(void)info;
	(*(int *)payload)++;
	return 1;
}

/* The object store: list, put, get, delete of a probe; skew from its mtime. */
static void check_object_store(struct doc *d, struct jo_vol *v)
{
	struct jo_err err = { 0 };
	char key[256], detail[768], body[64];
	uint8_t *got = NULL;
	size_t gotlen = 0;
	struct jo_obj_info info = { 0 };
	struct jo_obj_put_opts probe_po = { .create_only = true };
	time_t before, after;
	int rc;

	int seen = 0;

	snprintf(key, sizeof(key), "%s/", v->fmt.name);
	rc = jo_obj_list(v->obj, key, NULL, "/", first_entry, &seen, &err);
	if (rc == 1)
		rc = 0;
	if (rc) {
		obj_fail(d, "object-list", rc, &err);
		return;
	}
	snprintf(detail, sizeof(detail), "listed %s under %s", jo_obj_describe(v->obj), key);
	report(d, "object-list", OK, 0, detail, NULL);

	/* beside chunks/, not in a directory of its own: file storage would keep
	 * that directory after the delete */
	snprintf(key, sizeof(key), "%s/jfsops-doctor-probe-%ld-%d", v->fmt.name, (long)time(NULL),
		 (int)getpid());
	snprintf(body, sizeof(body), "jfsops doctor probe %ld\n", (long)time(NULL));
	before = time(NULL);
	/* under the volume's own prefix: an object already there is not ours to replace or delete */
	rc = jo_obj_put(v->obj, key, body, strlen(body), &probe_po, &err);
	if (rc) {
		obj_fail(d, "object-write", rc, &err);
		return;
	}
	rc = jo_obj_get_buf(v->obj, key, 0, -1, 4096, &got, &gotlen, &err);
	if (rc || gotlen != strlen(body) || memcmp(got, body, gotlen)) {
		report(d, "object-read", FAIL, rc ? rc : JO_EPROTO,
		       rc ? err.msg : "the probe read back different bytes", obj_hint(rc, err.msg));
		free(got);
		(void)jo_obj_delete(v->obj, key, &err);
		return;
	}
	free(got);
	rc = jo_obj_head(v->obj, key, &info, &err);
	after = time(NULL);
	if (rc) {
		obj_fail(d, "object-head", rc, &err);
	} else {
		/* Last-Modified has one-second resolution: allow the request time too */
		long skew = 0;

		if (info.mtime < before - 1)
			skew = (long)(before - info.mtime);
		else if (info.mtime > after + 1)
			skew = (long)(info.mtime - after);
		snprintf(detail, sizeof(detail), "probe object's time differs from the local clock by %lds", skew);
		report(d, "clock-skew", skew > 600 ? FAIL : skew > 30 ? WARN : OK, DOCTOR_EXIT_CLOCK, detail,
		       "fix NTP on this host or the object store: SigV4 fails past 15 minutes and gc/leakcheck age windows shift");
	}
	rc = jo_obj_delete(v->obj, key, &err);
	if (rc) {
		report(d, "object-delete", FAIL, rc, err.msg,
		       "the credentials may lack delete permission; gc and leakcheck --delete-from need it");
		return;
	}
	snprintf(detail, sizeof(detail), "wrote (create-only: %s), read and deleted %s",
		 jo_obj_create_check(v->obj), key);
	report(d, "object-rw", OK, 0, detail, NULL);
}

/* Referenced slices sampled: the first ones a chunk scan finds. */
#define SAMPLE_SLICES 32

struct sample {
	uint64_t id[SAMPLE_SLICES];
	uint32_t size[SAMPLE_SLICES];
	size_t n;
};

static int on_sample_chunk(uint64_t ino, uint32_t indx, const uint8_t *raw, size_t len,
			   void *payload)
{
	struct sample *sm = payload;

	(void)ino;
	(void)indx;
	for (size_t off = 0; off + 24 <= len && sm->n < SAMPLE_SLICES; off += 24) {
		struct jo_slice s;
		size_t i;

		jo_slice_decode(raw + off, &s);
		for (i = 0; i < sm->n && sm->id[i] != s.id; i++)
			;
		if (s.id && s.size && i == sm->n) {
			sm->id[sm->n] = s.id;
			sm->size[sm->n++] = s.size;
		}
	}
	return sm->n == SAMPLE_SLICES; /* 1 stops the scan */
}

/*
 * The blocks the metadata references are in the object store: the first
 * block of a sample of slices. All (or most) gone is a bucket emptied or
 * replaced, or a wrong bucket/endpoint; a few gone may be a file being
 * removed right now (its chunks go after its blocks), hence only a warning.
 */
static void check_blocks(struct doc *d, struct jo_vol *v)
{
	struct sample sm = { .n = 0 };
	struct jo_err err = { 0 };
	char key[1200], first[1200] = "", detail[1600];
	size_t missing = 0;
	int rc;

	rc = jo_meta_scan_chunks(v->meta, on_sample_chunk, &sm, &err);
	if (rc < 0) {
		report(d, "blocks", FAIL, rc, err.msg, jo_meta_hint(jo_meta_url_redacted(v->meta), rc));
		return;
	}
	if (!sm.n) {
		report(d, "blocks", OK, 0, "no block referenced yet", NULL);
		return;
	}
	for (size_t i = 0; i < sm.n; i++) {
		struct jo_obj_info info = { 0 };

		if (jo_vol_block_key(v, key, sizeof(key), sm.id[i], 0,
				     jo_block_len(sm.size[i], v->block_size, 0)) < 0)
			continue;
		rc = jo_obj_head(v->obj, key, &info, &err);
		if (rc == JO_ENOTFOUND) {
			if (!missing++)
				snprintf(first, sizeof(first), "%s", key);
		} else if (rc) {
			obj_fail(d, "blocks", rc, &err);
			return;
		}
	}
	if (!missing) {
		snprintf(detail, sizeof(detail), "the first block of %zu referenced slices is there", sm.n);
		report(d, "blocks", OK, 0, detail, NULL);
		return;
	}
	snprintf(detail, sizeof(detail), "%zu of %zu sampled referenced blocks are missing (first: %s)",
		 missing, sm.n, first);
	report(d, "blocks", missing * 2 >= sm.n ? FAIL : WARN, JO_ENOTFOUND, detail,
	       "the bucket was emptied or replaced, or the storage settings name another bucket: "
	       "check --bucket/--endpoint and the format record; `jfsops leakcheck` lists every "
	       "missing block and the files it breaks");
}

struct bg {
	uint64_t live, stale;
	time_t now;
};

static int on_session(uint64_t sid, int64_t expire, const char *info, void *payload)
{
	struct bg *b = payload;

	(void)sid;
	(void)info;
	if (expire >= b->now)
		b->live++;
	else
		b->stale++;
	return 0;
}

static void check_bgjobs(struct doc *d, struct jo_meta *m)
{
	static const char *jobs[] = { "lastCleanupFiles", "lastCleanupTrash", "nextCleanupSlices" };
	struct bg b = { .now = time(NULL) };
	struct jo_err err = { 0 };
	char detail[512], recent[256] = "";
	int rc, nrecent = 0;

	rc = jo_meta_scan_sessions(m, on_session, &b, &err);
	if (rc) {
		report(d, "client-bgjobs", FAIL, rc, err.msg,
		       "the session records could not be read: check the metadata engine's health and permissions");
		return;
	}
	for (size_t i = 0; i < 3; i++) {
		int64_t t = 0;

		if (jo_meta_get_counter(m, jobs[i], &t, &err) == 0 && t > 0 &&
		    b.now - t < 2 * 3600) {
			size_t l = strlen(recent);

			snprintf(recent + l, sizeof(recent) - l, "%s%s %llds ago", nrecent ? ", " : "",
				 jobs[i], (long long)(b.now - t));
			nrecent++;
		}
	}
	snprintf(detail, sizeof(detail), "%" PRIu64 " live sessions, %" PRIu64 " stale%s%s",
		 b.live, b.stale, nrecent ? "; client cleanups ran recently: " : "; no client cleanup in the last 2h",
		 recent);
	report(d, "client-bgjobs", nrecent ? WARN : OK, 0, detail,
	       "live clients run the hourly cleanups too: mount with --no-bgjob where jfsops gc workers run (both are safe together, but work overlaps)");
}

/* ---- reclaim backlog: what an hourly gc (or the clients' jobs) should have removed */

#define OVERDUE 3600 /* one missed hourly run */

struct backlog {
	int64_t now, trash_edge, slice_edge;
	uint64_t hours, hours_due, files, files_due, delslices_due;
	int64_t oldest_hour, oldest_file;
};

/* One more item stamped ts: counted, due when it is older than edge by
 * more than OVERDUE, and the oldest so far. */
static void age_count(int64_t ts, int64_t edge, uint64_t *n, uint64_t *due, int64_t *oldest)
{
	(*n)++;
	if (ts < edge - OVERDUE)
		(*due)++;
	if (!*oldest || ts < *oldest)
		*oldest = ts;
}

static int on_trash_hour(const char *name, size_t len, uint64_t ino, uint8_t type, void *payload)
{
	struct backlog *b = payload;
	int64_t ts;

	(void)ino;
	if (type != JO_TYPE_DIR || jo_trash_hour_parse(name, len, &ts) != 0)
		return 0;
	age_count(ts, b->trash_edge, &b->hours, &b->hours_due, &b->oldest_hour);
	return 0;
}

static int on_delfile_age(uint64_t ino, uint64_t length, int64_t deleted_at, void *payload)
{
	struct backlog *b = payload;

	(void)ino;
	(void)length;
	age_count(deleted_at, b->now, &b->files, &b->files_due, &b->oldest_file);
	return 0;
}

static int on_delslice_age(uint64_t new_id, int64_t deleted_at, const uint8_t *recs, size_t len,
			   void *payload)
{
	struct backlog *b = payload;

	(void)new_id;
	(void)recs;
	(void)len;
	if (deleted_at < b->slice_edge - OVERDUE)
		b->delslices_due++;
	return 0;
}

static void check_backlog(struct doc *d, struct jo_meta *m, const struct jo_format *f)
{
	struct backlog b = { .now = time(NULL) };
	struct jo_err err = { 0 };
	char detail[512], oldest[32] = "-";
	int rc;

	b.trash_edge = jo_trash_edge(b.now, f->trash_days);
	b.slice_edge = b.now - (int64_t)f->trash_days * 86400;
	rc = jo_meta_readdir(m, JO_TRASH_INODE, on_trash_hour, &b, &err);
	if (rc == 0)
		rc = jo_meta_scan_delfiles(m, on_delfile_age, &b, &err);
	if (rc == 0)
		rc = jo_meta_scan_delslices(m, on_delslice_age, &b, &err);
	if (rc) {
		report(d, "gc-backlog", FAIL, rc, err.msg,
		       "the trash, delfiles or delayed-slice records could not be read");
		return;
	}
	if (b.oldest_hour)
		jo_trash_hour_name(b.oldest_hour, oldest);
	snprintf(detail, sizeof(detail), "trash: %" PRIu64 " hour directories (%" PRIu64
		 " overdue, oldest %s); removed files waiting: %" PRIu64 " (%" PRIu64
		 " for over 1h); delayed slice entries overdue: %" PRIu64, b.hours, b.hours_due,
		 oldest, b.files, b.files_due, b.delslices_due);
	report(d, "gc-backlog", b.hours_due || b.files_due || b.delslices_due ? WARN : OK, 0, detail,
	       "nothing has reclaimed this volume for over an hour: run `jfsops gc META-URL --delete` "
	       "from cron or a systemd timer (or let a client mount run its background jobs)");
}

int cmd_doctor(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	struct doc d = { .ctx = ctx };
	struct jo_meta *m = NULL;
	struct jo_format f = { 0 };
	struct jo_vol *v = NULL;
	struct jo_err err = { 0 };
	char detail[768], *url;
	int rc;
	struct jo_option opts[] = {
		OPT_BOOL(0, "json", &ctx->json, "one JSON line per check, then a summary"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, doctor_usage, doctor_tail, opts };

	if (!cmd_parse_operands(ctx, &cmd, argc, argv, 1, "expected one META-URL", &rc)) {
		cmd_vol_args_release(&va);
		return rc;
	}
	url = strdup(argv[1]);
	if (!url) {
		cmd_vol_args_release(&va);
		return JO_EXIT_FAIL;
	}
	cmd_scrub_url_password(argv[1]);

	rc = cmd_meta_open_format(url, &m, &f, &err);
	if (rc) {
		report(&d, "metadata", FAIL, rc == JO_EAUTH ? DOCTOR_EXIT_META_AUTH : rc, err.msg,
		       jo_meta_hint(url, rc));
		goto done;
	}
	{
		char *server = NULL;
		struct jo_err e2 = { 0 };

		/* the server's own name and version ("PostgreSQL 15.18"); best effort */
		if (jo_meta_describe(m, &server, &e2) != 0)
			server = NULL;
		snprintf(detail, sizeof(detail), "%s %s holds volume '%s' (uuid %s)%s%s",
			 jo_meta_engine(m), jo_meta_url_redacted(m), f.name, f.uuid ? f.uuid : "?",
			 server ? "; server " : "", server ? server : "");
		free(server);
	}
	report(&d, "metadata", OK, 0, detail, NULL);
	cmd_metrics_volume(ctx, f.name);
	snprintf(detail, sizeof(detail), "MetaVersion %d", f.meta_version);
	report(&d, "format-version", f.meta_version <= 1 ? OK : FAIL, JO_EUNSUPPORTED, detail,
	       "this volume was formatted by a newer JuiceFS than jfsops understands");
	snprintf(detail, sizeof(detail), "compression %s", f.compression ? f.compression : "none");
	report(&d, "compression", jo_compress_parse(f.compression) >= 0 ? OK : FAIL, JO_EUNSUPPORTED,
	       detail, "jfsops reads none, lz4 and zstd blocks");
	if (f.has_encrypt_key) {
		snprintf(detail, sizeof(detail), "data is encrypted (%s): jfsops cat/compact/warmup cannot read blocks; gc and leakcheck work",
			 f.encrypt_algo && *f.encrypt_algo ? f.encrypt_algo : "aes256gcm-rsa");
		report(&d, "encryption", FAIL, JO_EUNSUPPORTED, detail,
		       "use the juicefs client for reads of encrypted volumes");
	} else {
		report(&d, "encryption", OK, 0, "data is not encrypted", NULL);
	}
	if (f.changelog)
		report(&d, "changelog", WARN, 0, "the volume keeps a change log: jfsops gc/compact refuse to mutate it",
		       "turn the change log off, or use juicefs's own gc");
	check_bgjobs(&d, m);
	check_backlog(&d, m, &f);

	/* the config file and profile the storage settings come from */
	{
		struct jo_cfg_values cv = { 0 };
		char *prof = NULL;

		rc = cmd_resolve_storage(&va, &cv, &prof, &err);
		if (rc) {
			report(&d, "config", FAIL, rc, err.msg,
			       "fix the config file (chmod 600 when it holds secrets; [profile NAME] sections "
			       "with name = value lines) or point --config/JFSOPS_CONFIG elsewhere");
			goto done;
		}
		snprintf(detail, sizeof(detail), "profile %s; storage settings from %s", prof ? prof : "(none)",
			 cv.src[JO_CFG_BUCKET] || cv.src[JO_CFG_ENDPOINT] || cv.src[JO_CFG_ACCESS_KEY] ||
			 cv.src[JO_CFG_SECRET_KEY] ? "flags/env/config" : "the volume's format record");
		report(&d, "config", OK, 0, detail, NULL);
		free(prof);
		jo_cfg_values_release(&cv);
	}
	/* the object store as the format (or the overrides) name it */
	va.read_only = true;
	rc = cmd_open_volume_quiet(&va, url, &v, &err);
	if (rc) {
		report(&d, "object-store", FAIL, rc, err.msg, obj_hint(rc, err.msg));
		goto done;
	}
	check_object_store(&d, v);
	check_blocks(&d, v);
done:
	if (ctx->json) {
		/* main checks stdout */
		(void)cmd_summary_emit(ctx, json_pack("{s:i,s:i}", "failed", d.fails, "warnings",
						      d.warns), true, d.fails ? d.first_fail : 0);
	} else {
		printf("%d failed, %d warnings\n", d.fails, d.warns);
	}
	jo_vol_close(v);
	jo_format_release(&f);
	jo_meta_close(m);
	memset(url, 0, strlen(url));
	free(url);
	cmd_vol_args_release(&va);
	return d.fails ? d.first_fail : 0;
}
