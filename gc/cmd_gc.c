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
#include <unistd.h>

#include "common/command.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/audit.h"
#include "common/cancel.h"
#include "common/err.h"
#include "common/human.h"
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
	"expires after at most --lease and the next run takes over, or was added\n"
	"by a concurrent planner after this run's last claim), 2 usage, 3 failed,\n"
	"4 finished but some items failed, or a task nobody held stayed\n"
	"unclaimable through three more claim rounds, 5 unreachable or timed out\n"
	"(also Redis LOADING/BUSY, SQLite locked), 9 unsupported volume (ChangeLog\n"
	"on), 10 a lease was lost,\n"
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
	jo_fmt_bytes((double)t.bytes, 1, hb, sizeof(hb));
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

/* What one run of the command holds, from the flags to the summary. */
struct gc_cmd {
	struct cmd_vol_args va;
	struct gc_opts o;
	struct jo_err err;
	struct jo_vol *vol;
	struct jo_audit *au;
	struct gc_run *run;
	struct gc_stats st;
	const char *audit_path;
	bool plan, work, json, status, reset, count_only;
	bool in_plan;           /* a failure stopped the plan, not the work */
	double t0;
	int64_t left, leased;
	bool gave_up;           /* claim rounds ended with tasks nobody held */
	const char *mode;
	int which;
};

/* Parse and check the flags: true (META-URL in argv[1]), or false with the exit code. */
static bool gc_parse(struct gc_cmd *c, struct jo_ctx *ctx, int argc, char **argv, int *exit_code)
{
	struct gc_opts *o = &c->o;
	struct jo_option opts[] = {
		OPT_GROUP("Modes:"),
		OPT_CMDMODE(0, "plan", &c->which, "only scan and record tasks (planning twice adds "
			    "nothing)", GC_PLAN),
		OPT_CMDMODE(0, "worker", &c->which, "only claim and process recorded tasks; neither: "
			    "plan, then work, in this process (the cron case)", GC_WORKER),
		OPT_BOOL(0, "status", &c->status, "print how many tasks are recorded and leased"),
		OPT_BOOL(0, "reset-tasks", &c->reset, "drop every recorded task (needs --delete)"),
		OPT_BOOL(0, "count-only", &c->count_only, "dry --plan: count what the scans find and "
			 "evaluate none of it (no per-item reads: fast on a big volume; names no "
			 "objects)"),
		OPT_GROUP("Options:"),
		OPT_BOOL(0, "delete", &o->delete_, "really delete (default: dry-run report)"),
		OPT_STRING(0, "id", &o->worker_id, "NAME", "worker id in leases and the audit "
			   "(default host:pid)"),
		OPT_DURATION(0, "lease", &o->lease_ms, "DUR", "lease length (default 60s; renewed "
			     "every third)", 1000, 0),
		OPT_DURATION(0, "max-time", &o->max_time_ms, "DUR", "stop claiming after DUR and "
			     "release leases", 1, 0),
		OPT_UINT(0, "threads", &o->threads, "N", "workers in this process", 1, 256),
		OPT_DECIMAL(0, "delete-rate", &o->delete_rate, "N", "at most N object deletes per "
			    "second (default: no limit)", 1),
		OPT_UINT(0, "batch", &o->batch, "N", "keys per DeleteObjects request", 1, 1000),
		OPT_UINT(0, "task-size", &o->task_size, "N", "items per task", 1, 100000),
		OPT_STRING(0, "audit", &c->audit_path, "FILE", "append a JSON line per object to FILE "
			   "('-' = stdout)"),
		OPT_STRING(0, "metrics-file", &ctx->metrics_path, "PATH", "write Prometheus textfile "
			   "metrics when the run ends, also when it fails (atomic; default: none; "
			   "gauges labelled volume=, README \"Metrics\")"),
		OPT_BOOL(0, "json", &c->json, "JSON lines on stdout (a \"summary\" record)"),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&c->va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, usage_head, usage_tail, opts };
	int n = jo_opt_parse(&cmd, argc, argv);

	if (n < 0)
		*exit_code = cmd_opt_exit(ctx, n);
	else if (n != 1)
		*exit_code = jo_opt_error(&cmd, n ? "too many arguments" : "META-URL is required");
	else if (c->reset && !o->delete_)
		*exit_code = jo_opt_error(&cmd, "--reset-tasks changes the volume: add --delete");
	else if (c->count_only && (o->delete_ || c->which != GC_PLAN))
		*exit_code = jo_opt_error(&cmd, "--count-only is for a dry --plan (without --delete)");
	else
		return true;
	return false;
}

/* The audit file and the run on the open volume: 0 or the exit code. */
static int gc_prepare(struct gc_cmd *c, struct jo_ctx *ctx)
{
	if (c->o.delete_ && c->vol->fmt.changelog) {
		jo_err_set(&c->err, JO_EUNSUPPORTED, "volume '%s' has ChangeLog enabled: jfsops does "
			   "not write change-log entries, so it refuses to mutate it", c->vol->fmt.name);
		return cmd_fail(ctx, &c->err);
	}
	if (c->audit_path && jo_audit_open(&c->au, c->audit_path, &c->err) != 0)
		return cmd_fail(ctx, &c->err);
	c->o.audit = c->au;
	if (gc_run_new(&c->run, c->vol, &c->o, &c->err) != 0)
		return cmd_fail(ctx, &c->err);
	return 0;
}

/* --status: the tasks recorded and leased. */
static int gc_show_status(struct gc_cmd *c, struct jo_ctx *ctx)
{
	if (gc_task_counts(c->run, &c->left, &c->leased, &c->err) != 0) {
		/* (no task table yet counts as 0 tasks: this is a real failure) */
		return cmd_fail(ctx, &c->err);
	}
	jo_lease_print_status("gc", "gc", c->left, c->leased, c->json);
	return JO_EXIT_OK;
}

/* --reset-tasks: drop every recorded task. */
static int gc_drop_tasks(struct gc_cmd *c, struct jo_ctx *ctx)
{
	if (gc_reset_tasks(c->run, &c->err) != 0)
		return cmd_fail(ctx, &c->err);
	printf("gc tasks dropped\n");
	return JO_EXIT_OK;
}

/* The plan, then the work, as the mode says: 0 or the error code (in c->err). */
static int gc_plan_and_work(struct gc_cmd *c)
{
	bool del = c->o.delete_;
	int rc = 0;

	c->in_plan = c->plan;
	/* a dry run (with --plan or without) evaluates what the plan finds, so
	 * that it says what would be deleted; --count-only only counts it */
	if (c->plan)
		rc = gc_plan(c->run, !del && !c->count_only, &c->err);
	/* dry plan+work evaluated everything while planning; a failed plan
	 * (a scan not read whole) is never followed by work */
	if (rc == 0 && c->work && (del || !c->plan)) {
		c->in_plan = false;
		rc = gc_work(c->run, &c->err);
		/*
		 * A task nobody holds after this run's last claim is one whose
		 * lease ran out (its worker died) or one a concurrent planner has
		 * just added: claim again rather than leave it undone, for as long
		 * as rounds keep finding work (tasks are finite: every productive
		 * round finishes one), and three fruitless rounds more, a little
		 * apart: after those, the tasks nobody holds are this run's failure
		 * (gave_up). Tasks that a concurrent planner adds after a count
		 * that found none free are not: that planner works them. A count
		 * that fails leaves the decision to the count below.
		 */
		for (int idle = 0; rc == 0 && del && !jo_cancelled() &&
				   !gc_run_deadline_passed(c->run);) {
			struct jo_err cerr = { 0 };
			struct gc_stats st;
			uint64_t before;

			if (gc_task_counts(c->run, &c->left, &c->leased, &cerr) != 0 ||
			    c->left <= c->leased)
				break;
			if (idle == 3) {
				c->gave_up = true;
				break;
			}
			if (idle)
				usleep((useconds_t)idle * 200000);
			gc_run_stats(c->run, &st);
			before = st.tasks_done + st.tasks_released;
			rc = gc_work(c->run, &c->err);
			gc_run_stats(c->run, &st);
			idle = st.tasks_done + st.tasks_released == before ? idle + 1 : 0;
		}
	}
	return rc;
}

/* How the run ended, from its error code and its counts: the status name; *rc is 0 when an
 * interruption or --max-time stopped it, *complete false when work was left undone. */
static const char *gc_outcome(struct gc_cmd *c, struct jo_ctx *ctx, int *rc, bool *complete,
			      int *exit_code)
{
	bool deleting_work = c->work && c->o.delete_;

	*complete = true;
	if (*rc == JO_ECANCELED || jo_cancelled()) {
		int sig = jo_cancelled();

		*exit_code = sig ? 128 + sig : JO_EXIT_OK; /* max-time alone is a clean stop */
		*complete = !sig;
		*rc = 0;
		return sig ? "interrupted" : "max-time";
	}
	if (*rc) {
		*complete = false;
		*exit_code = cmd_fail(ctx, &c->err);
		return "incomplete";
	}
	if (gc_stats_errors(&c->st)) {
		*exit_code = JO_EXIT_PARTIAL;
		return "partial";
	}
	if (c->st.leases_lost) {
		*exit_code = JO_EXIT_CONFLICT;
		return "lease-lost";
	}
	if (deleting_work && c->left > 0 && gc_run_deadline_passed(c->run))
		return "max-time"; /* stopped claiming as asked: what is left is for the next run */
	if (deleting_work && c->left > 0) {
		/*
		 * Tasks this run could not claim. Under another worker's lease
		 * they are that worker's (a peer at work, or one that died: its
		 * lease runs out first and the next run takes them over); added
		 * by a concurrent planner after this run's last claim, they are
		 * that planner's: this run did all it could and exits 0, its
		 * status and tasks_leased saying what is left. Tasks nobody held
		 * through three more claim rounds are a partial run.
		 */
		if (c->gave_up && c->leased < c->left)
			*exit_code = JO_EXIT_PARTIAL;
		jo_warn("%lld task(s) still recorded, %lld of them under another worker's lease "
			"(a dead worker's lease expires after at most its --lease): not done by "
			"this run; the next run or that worker finishes them", (long long)c->left,
			(long long)c->leased);
		return "tasks-left";
	}
	return "ok";
}

/* The run itself: plan and/or work, the counts, the summary and the metrics. */
static int gc_execute(struct gc_cmd *c, struct jo_ctx *ctx)
{
	int exit_code = JO_EXIT_OK;
	struct jo_obj_stats os;

	jo_info("%s, %s, TrashDays %d, %d thread(s)", c->o.delete_ ? "deleting" : "dry-run", c->mode,
		c->vol->fmt.trash_days, c->o.threads);
	int rc = gc_plan_and_work(c);

	gc_run_stats(c->run, &c->st);
	if (c->o.delete_) {
		/* its own error buffer: a failed count must not replace the error
		 * that stopped the run */
		struct jo_err cerr = { 0 };

		if (gc_task_counts(c->run, &c->left, &c->leased, &cerr) != 0)
			jo_warn("counting tasks: %s", cerr.msg);
	}
	double dur = now_real() - c->t0;
	bool complete;
	const char *stname = gc_outcome(c, ctx, &rc, &complete, &exit_code);

	if (!complete)
		say_incomplete(ctx, c->in_plan, c->o.delete_);
	jo_obj_get_stats(c->vol->obj, &os);
	print_summary(ctx, c->json, c->o.delete_, c->o.delete_ || !c->count_only, c->mode, &c->st,
		      c->left, c->leased, dur, stname, complete, rc ? &c->err : NULL, exit_code, &os);
	/* a run that did all it could claim (tasks-left) exits 0: a success */
	record_metrics(ctx, c->o.delete_, &c->st, c->left, c->leased);
	return exit_code;
}

int cmd_gc(int argc, char **argv, struct jo_ctx *ctx)
{
	struct gc_cmd c = {
		.o = { .lease_ms = 60000, .threads = 1, .batch = 1000, .task_size = 256 },
		.json = ctx->json, .t0 = now_real(), .which = GC_BOTH,
	};
	int rc, exit_code;

	if (!gc_parse(&c, ctx, argc, argv, &exit_code))
		return exit_code;
	c.plan = c.which != GC_WORKER;
	c.work = c.which != GC_PLAN;
	c.mode = c.which == GC_BOTH ? "plan+work" : c.plan ? "plan" : "worker";

	rc = cmd_open_volume(ctx, &c.va, argv[1], &c.vol);
	if (rc) {
		cmd_vol_args_release(&c.va);
		return rc;
	}
	exit_code = gc_prepare(&c, ctx);
	if (exit_code == 0)
		exit_code = c.status ? gc_show_status(&c, ctx)
			  : c.reset ? gc_drop_tasks(&c, ctx)
				    : gc_execute(&c, ctx);
	gc_run_free(c.run);
	jo_audit_close(c.au);
	jo_vol_close(c.vol);
	cmd_vol_args_release(&c.va);
	return exit_code;
}
