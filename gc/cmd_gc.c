/*
 * cmd_gc.c: `jfsops gc` - distributed garbage collection with lease-based
 * workers. Arguments and output only; the work is in gc_plan.c/gc_work.c.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/audit.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/jfs/jfs.h"
#include "common/lease.h"
#include "common/log.h"
#include "common/object/object.h"
#include "gc/gc.h"

static const char usage_head[] =
	"usage: jfsops gc META-URL [--plan | --worker] [--delete] [options]\n"
	"\n"
	"Reclaim what a JuiceFS volume has pending for deletion: removed files\n"
	"(delfiles), slices whose reference count says \"delete\", delayed slices\n"
	"older than TrashDays, trash hour directories older than TrashDays + 2h\n"
	"(emptied and removed as the clients' own hourly job does), and (Redis)\n"
	"chunk keys of inodes that no longer exist.\n"
	"Work is recorded as tasks in the volume's own metadata engine and claimed\n"
	"by lease, so any number of workers on any number of hosts can share it;\n"
	"reference counts, re-read right before each delete, decide what goes.\n"
	"Without --delete nothing is changed: gc reports what it would delete.\n"
	"\n";

static const char usage_tail[] =
	CMD_VOL_NOTE
	"\n"
	"DUR: 90s, 50m, 1.5h, 2d, 500ms or plain seconds.\n"
	"\n"
	"Exit codes: 0 done (with --delete: no task left; --max-time stopped the\n"
	"run: status \"max-time\"; or every task left is under another worker's\n"
	"lease: status \"tasks-left\", a peer at work or one that died, whose lease\n"
	"expires after at most --lease and the next run takes over), 2 usage,\n"
	"3 failed, 4 finished but some items failed, or a task nobody holds was left\n"
	"undone, 5 unreachable or timed out (also Redis LOADING/BUSY, SQLite\n"
	"locked), 9 unsupported volume (ChangeLog on), 10 a lease was lost,\n"
	"130/143 interrupted (SIGINT/SIGTERM: the delete batch in flight is finished,\n"
	"no new one is started, the lease is released; what is left stays recorded\n"
	"and is picked up by the next run. A second SIGINT exits at once).\n"
	"A plan scan cut by any error is never taken as whole: nothing is recorded\n"
	"from it (each scan's tasks are recorded only once it was read to its end),\n"
	"no work follows, the run says INCOMPLETE and its summary has \"complete\":\n"
	"false.\n"
	"\n"
	"Examples:\n"
	"  jfsops gc redis://10.0.0.5:6379/1                              # dry run: what would go\n"
	"  jfsops gc redis://10.0.0.5:6379/1 --delete --max-time 50m --audit /var/log/jfsops/gc-audit.jsonl\n"
	"  jfsops gc sqlite3:///var/jfs/meta.db --plan --delete            # record tasks once\n"
	"  jfsops gc redis://10.0.0.5:6379/1 --worker --delete --threads 4 # on every gc host\n";

enum { GC_BOTH, GC_PLAN, GC_WORKER };

static double now_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void human_bytes(uint64_t b, char *buf, size_t cap)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

struct totals {
	uint64_t items, slices, objects, bytes, errors, skipped;
};

static void sum(const struct gc_stats *s, struct totals *t)
{
	memset(t, 0, sizeof(*t));
	for (int k = 0; k < GC_NKINDS; k++) {
		t->items += s->k[k].items;
		t->slices += s->k[k].slices;
		t->objects += s->k[k].objects;
		t->bytes += s->k[k].bytes;
		t->skipped += s->k[k].skipped;
	}
	t->errors = gc_stats_errors(s);
}

static void print_summary(const struct jo_ctx *ctx, bool json, bool del, bool evaluated,
			  const char *mode, const struct gc_stats *s, int64_t left, int64_t leased, double dur,
			  const char *status, bool complete, const struct jo_err *err, int exit_code,
			  const struct jo_obj_stats *os)
{
	struct totals t;
	char hb[32];

	sum(s, &t);
	if (json) {
		json_t *o = json_object(), *kinds = json_object();

		for (int k = 0; k < GC_NKINDS; k++) {
			json_t *ko = json_pack("{sIsIsIsIsIsI}", "items", (json_int_t)s->k[k].items,
					       "skipped", (json_int_t)s->k[k].skipped,
					       "slices", (json_int_t)s->k[k].slices,
					       "objects", (json_int_t)s->k[k].objects,
					       "bytes", (json_int_t)s->k[k].bytes,
					       "errors", (json_int_t)s->k[k].errors);

			json_object_set_new(kinds, gc_kind_name(k), ko);
		}
		json_object_set_new(o, "mode", json_string(mode));
		json_object_set_new(o, "dry_run", json_boolean(!del));
		json_object_set_new(o, "status", json_string(status));
		if (!complete && err && err->code)
			json_object_set_new(o, "error", json_string(err->msg[0] ? err->msg :
							       jo_err_name(err->code)));
		json_object_set_new(o, "items", json_integer((json_int_t)t.items));
		json_object_set_new(o, "slices", json_integer((json_int_t)t.slices));
		json_object_set_new(o, "objects", json_integer((json_int_t)t.objects));
		json_object_set_new(o, "bytes", json_integer((json_int_t)t.bytes));
		json_object_set_new(o, "errors", json_integer((json_int_t)t.errors));
		json_object_set_new(o, "object_errors", json_integer((json_int_t)s->obj_errors));
		json_object_set_new(o, "kinds", kinds);
		json_object_set_new(o, "tasks_planned", json_integer((json_int_t)s->tasks_planned));
		json_object_set_new(o, "items_planned", json_integer((json_int_t)s->items_planned));
		json_object_set_new(o, "tasks_done", json_integer((json_int_t)s->tasks_done));
		json_object_set_new(o, "tasks_released", json_integer((json_int_t)s->tasks_released));
		json_object_set_new(o, "tasks_left", json_integer(left));
		json_object_set_new(o, "tasks_leased", json_integer(leased));
		json_object_set_new(o, "leases_lost", json_integer((json_int_t)s->leases_lost));
		json_object_set_new(o, "requests", json_integer((json_int_t)os->requests));
		json_object_set_new(o, "connections", json_integer((json_int_t)os->connections));
		/* false only for a dry --plan --count-only: it counted the items
		 * and evaluated none, so it names no objects */
		json_object_set_new(o, "evaluated", json_boolean(evaluated));
		(void)cmd_summary_emit(ctx, o, complete, exit_code); /* main checks stdout */
		return;
	}
	(void)ctx;
	printf("%-9s %10s %10s %10s %10s %14s %8s\n", "kind", "items", "skipped", "slices",
	       "objects", "bytes", "errors");
	for (int k = 0; k < GC_NKINDS; k++)
		printf("%-9s %10llu %10llu %10llu %10llu %14llu %8llu\n", gc_kind_name(k),
		       (unsigned long long)s->k[k].items, (unsigned long long)s->k[k].skipped,
		       (unsigned long long)s->k[k].slices, (unsigned long long)s->k[k].objects,
		       (unsigned long long)s->k[k].bytes, (unsigned long long)s->k[k].errors);
	human_bytes(t.bytes, hb, sizeof(hb));
	if (!evaluated) {
		printf("gc dry-run (plan, count only): %llu items found, not evaluated (without "
		       "--count-only a dry run says what would be deleted); %llu errors; %.1fs; %s\n",
		       (unsigned long long)t.items, (unsigned long long)t.errors, dur, status);
		fflush(stdout);
		return;
	}
	printf("gc %s (%s): %s %llu objects (%s) of %llu slices; tasks planned %llu, done %llu, "
	       "released %llu, left %lld; leases lost %llu; %llu errors; %.1fs; %s; "
	       "object requests %llu, connections opened %llu\n",
	       del ? "delete" : "dry-run", mode, del ? "deleted" : "would delete",
	       (unsigned long long)t.objects, hb, (unsigned long long)t.slices,
	       (unsigned long long)s->tasks_planned, (unsigned long long)s->tasks_done,
	       (unsigned long long)s->tasks_released, (long long)left,
	       (unsigned long long)s->leases_lost, (unsigned long long)t.errors, dur, status,
	       (unsigned long long)os->requests, (unsigned long long)os->connections);
	fflush(stdout);
}

/* The line that says a run is not to be taken for a whole one. */
static void say_incomplete(const struct jo_ctx *ctx, bool in_plan, bool del)
{
	if (in_plan)
		fprintf(stderr, "%s %s: INCOMPLETE: the plan did not finish: no task is recorded "
			"from a scan that was not read whole%s\n", ctx->prog, ctx->cmd,
			del ? ", no work was done, nothing was deleted" : "");
	else
		fprintf(stderr, "%s %s: INCOMPLETE: the work stopped early; what is left stays "
			"recorded for the next run\n", ctx->prog, ctx->cmd);
}

/* --metrics-file: what this run did (main writes the file, common/run_metrics.c) */
static void record_metrics(struct jo_ctx *ctx, bool del, const struct gc_stats *s, int64_t left,
			   int64_t leased)
{
	/* a sample that cannot be recorded (out of memory) is left out */
	for (int k = 0; k < GC_NKINDS; k++) {
		char lab[48];

		snprintf(lab, sizeof(lab), "kind=\"%s\"", gc_kind_name(k));
		(void)cmd_metric(ctx, "items", "pending items seen by the last run", lab,
				 (double)s->k[k].items);
		(void)cmd_metric(ctx, "slices_deleted",
				 "slices deleted (dry-run: would be) by the last run", lab,
				 (double)s->k[k].slices);
		(void)cmd_metric(ctx, "objects_deleted",
				 "objects deleted (dry-run: would be) by the last run", lab,
				 (double)s->k[k].objects);
		(void)cmd_metric(ctx, "bytes_deleted",
				 "block bytes deleted (dry-run: would be) by the last run", lab,
				 (double)s->k[k].bytes);
	}
	(void)cmd_metric(ctx, "errors", "items and objects that failed in the last run", NULL,
			 (double)gc_stats_errors(s));
	(void)cmd_metric(ctx, "tasks_completed", "tasks completed by the last run", NULL,
			 (double)s->tasks_done);
	(void)cmd_metric(ctx, "tasks_planned", "tasks recorded by the last run", NULL,
			 (double)s->tasks_planned);
	(void)cmd_metric(ctx, "leases_lost", "leases lost in the last run", NULL,
			 (double)s->leases_lost);
	(void)cmd_metric(ctx, "dry_run", "1 if the last run was a dry run", NULL, del ? 0 : 1);
	(void)cmd_metric_state(ctx, "tasks_left", "tasks still recorded after the last run", NULL,
			       (double)left);
	(void)cmd_metric_state(ctx, "tasks_leased",
			       "tasks under another worker's lease after the last run", NULL,
			       (double)leased);
}

int cmd_gc(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	struct gc_opts o = { .lease_ms = 60000, .threads = 1, .batch = 1000, .task_size = 256 };
	struct jo_err err = { 0 };
	struct jo_vol *vol = NULL;
	struct jo_audit *au = NULL;
	struct gc_run *run = NULL;
	struct gc_stats st;
	const char *audit_path = NULL;
	bool plan, work, json = ctx->json, status = false, reset = false, count_only = false;
	double t0 = now_real();
	int64_t left = 0, leased = 0;
	const char *mode;
	int rc = 0, n, which = GC_BOTH, exit_code = JO_EXIT_OK;
	struct jo_option opts[] = {
		OPT_GROUP("Modes:"),
		OPT_CMDMODE(0, "plan", &which, "only scan and record tasks (planning twice adds "
			    "nothing)", GC_PLAN),
		OPT_CMDMODE(0, "worker", &which, "only claim and process recorded tasks; neither: "
			    "plan, then work, in this process (the cron case)", GC_WORKER),
		OPT_BOOL(0, "status", &status, "print how many tasks are recorded and leased"),
		OPT_BOOL(0, "reset-tasks", &reset, "drop every recorded task (needs --delete)"),
		OPT_BOOL(0, "count-only", &count_only, "dry --plan: count what the scans find and "
			 "evaluate none of it (no per-item reads: fast on a big volume; names no "
			 "objects)"),
		OPT_GROUP("Options:"),
		OPT_BOOL(0, "delete", &o.delete_, "really delete (default: dry-run report)"),
		OPT_STRING(0, "id", &o.worker_id, "NAME", "worker id in leases and the audit "
			   "(default host:pid)"),
		OPT_DURATION(0, "lease", &o.lease_ms, "DUR", "lease length (default 60s; renewed "
			     "every third)", 1000, 0),
		OPT_DURATION(0, "max-time", &o.max_time_ms, "DUR", "stop claiming after DUR and "
			     "release leases", 1, 0),
		OPT_UINT(0, "threads", &o.threads, "N", "workers in this process", 1, 256),
		OPT_DECIMAL(0, "delete-rate", &o.delete_rate, "N", "at most N object deletes per "
			    "second (default: no limit)", 1),
		OPT_UINT(0, "batch", &o.batch, "N", "keys per DeleteObjects request", 1, 1000),
		OPT_UINT(0, "task-size", &o.task_size, "N", "items per task", 1, 100000),
		OPT_STRING(0, "audit", &audit_path, "FILE", "append a JSON line per object to FILE "
			   "('-' = stdout)"),
		OPT_STRING(0, "metrics-file", &ctx->metrics_path, "PATH", "write Prometheus textfile "
			   "metrics when the run ends, also when it fails (atomic; default: none; "
			   "gauges labelled volume=, README \"Metrics\")"),
		OPT_BOOL(0, "json", &json, "JSON lines on stdout (a \"summary\" record)"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, usage_head, usage_tail, opts };

	n = jo_opt_parse(&cmd, argc, argv);
	if (n < 0)
		return cmd_opt_exit(ctx, n);
	if (n != 1)
		return jo_opt_error(&cmd, n ? "too many arguments" : "META-URL is required");
	if (reset && !o.delete_)
		return jo_opt_error(&cmd, "--reset-tasks changes the volume: add --delete");
	if (count_only && (o.delete_ || which != GC_PLAN))
		return jo_opt_error(&cmd, "--count-only is for a dry --plan (without --delete)");
	plan = which != GC_WORKER;
	work = which != GC_PLAN;
	mode = which == GC_BOTH ? "plan+work" : plan ? "plan" : "worker";

	rc = cmd_open_volume(ctx, &va, argv[1], &vol);
	if (rc) {
		cmd_vol_args_release(&va);
		return rc;
	}
	if (o.delete_ && vol->fmt.changelog) {
		jo_err_set(&err, JO_EUNSUPPORTED, "volume '%s' has ChangeLog enabled: jfsops does "
			   "not write change-log entries, so it refuses to mutate it", vol->fmt.name);
		exit_code = cmd_fail(ctx, &err);
		goto out;
	}
	if (audit_path && jo_audit_open(&au, audit_path, &err) != 0) {
		exit_code = cmd_fail(ctx, &err);
		goto out;
	}
	o.audit = au;
	if (gc_run_new(&run, vol, &o, &err) != 0) {
		exit_code = cmd_fail(ctx, &err);
		goto out;
	}
	if (status) {
		if (gc_task_counts(run, &left, &leased, &err) != 0) {
			/* (no task table yet counts as 0 tasks: this is a real failure) */
			exit_code = cmd_fail(ctx, &err);
			goto out;
		}
		if (json)
			printf("{\"type\":\"status\",\"command\":\"gc\",\"tasks\":%lld,\"leased\":%lld}\n",
			       (long long)left, (long long)leased);
		else
			printf("gc tasks: %lld recorded, %lld under lease\n", (long long)left,
			       (long long)leased);
		goto out;
	}
	if (reset) {
		if (gc_reset_tasks(run, &err) != 0) {
			exit_code = cmd_fail(ctx, &err);
			goto out;
		}
		printf("gc tasks dropped\n");
		goto out;
	}
	jo_info("%s, %s, TrashDays %d, %d thread(s)", o.delete_ ? "deleting" : "dry-run", mode,
		vol->fmt.trash_days, o.threads);
	bool in_plan = plan;

	/* a dry run (with --plan or without) evaluates what the plan finds, so
	 * that it says what would be deleted; --count-only only counts it */
	if (plan)
		rc = gc_plan(run, !o.delete_ && !count_only, &err);
	/* dry plan+work evaluated everything while planning; a failed plan
	 * (a scan not read whole) is never followed by work */
	if (rc == 0 && work && (o.delete_ || !plan)) {
		in_plan = false;
		rc = gc_work(run, &err);
		/*
		 * A task whose lease ran out after this run's last claim (its worker
		 * died) is nobody's: claim again rather than leave it undone. A
		 * count that fails leaves the decision to the count below.
		 */
		for (int again = 0; rc == 0 && o.delete_ && again < 3 && !jo_cancelled() &&
				    !gc_run_deadline_passed(run); again++) {
			struct jo_err cerr = { 0 };

			if (gc_task_counts(run, &left, &leased, &cerr) != 0 || left <= leased)
				break;
			rc = gc_work(run, &err);
		}
	}
	gc_run_stats(run, &st);
	if (o.delete_) {
		/* its own error buffer: a failed count must not replace the error
		 * that stopped the run */
		struct jo_err cerr = { 0 };

		if (gc_task_counts(run, &left, &leased, &cerr) != 0)
			jo_warn("counting tasks: %s", cerr.msg);
	}
	{
		double dur = now_real() - t0;
		const char *stname = "ok";
		bool complete = true;

		if (rc == JO_ECANCELED || jo_cancelled()) {
			int sig = jo_cancelled();

			stname = "interrupted";
			exit_code = sig ? 128 + sig : JO_EXIT_OK; /* max-time alone is a clean stop */
			complete = !sig;
			if (!sig)
				stname = "max-time";
			rc = 0;
		} else if (rc) {
			stname = "incomplete";
			complete = false;
			exit_code = cmd_fail(ctx, &err);
		} else if (gc_stats_errors(&st)) {
			stname = "partial";
			exit_code = JO_EXIT_PARTIAL;
		} else if (st.leases_lost) {
			stname = "lease-lost";
			exit_code = JO_EXIT_CONFLICT;
		} else if (work && o.delete_ && left > 0 && gc_run_deadline_passed(run)) {
			stname = "max-time"; /* stopped claiming as asked: what is left is for the next run */
		} else if (work && o.delete_ && left > 0) {
			/*
			 * Tasks this run could not claim. Under another worker's lease
			 * they are that worker's (a peer at work, or one that died: its
			 * lease runs out first and the next run takes them over): this
			 * run did all it could and exits 0, its status and tasks_leased
			 * saying what is left. A task nobody holds and this run did not
			 * finish is a partial run.
			 */
			stname = "tasks-left";
			if (leased < left)
				exit_code = JO_EXIT_PARTIAL;
			jo_warn("%lld task(s) still recorded, %lld of them under another worker's lease "
				"(a dead worker's lease expires after at most its --lease): not done by "
				"this run; the next run or that worker finishes them", (long long)left,
				(long long)leased);
		}
		if (!complete)
			say_incomplete(ctx, in_plan, o.delete_);
		struct jo_obj_stats os;

		jo_obj_get_stats(vol->obj, &os);
		print_summary(ctx, json, o.delete_, o.delete_ || !count_only, mode, &st, left, leased, dur, stname, complete,
			      rc ? &err : NULL, exit_code, &os);
		/* a run that did all it could claim (tasks-left) exits 0: a success */
		record_metrics(ctx, o.delete_, &st, left, leased);
	}
out:
	gc_run_free(run);
	jo_audit_close(au);
	jo_vol_close(vol);
	cmd_vol_args_release(&va);
	return exit_code;
}
