/*
 * main.c: the jfsops entry point, the command table and dispatch.
 *
 * `jfsops CMD ARGS...` or, through an installed link, `jfsops-CMD ARGS...`
 * (dispatch on argv[0], busybox/git style). To add a command: write
 * cmd_<name>() with the jo_cmd_fn signature and its option table
 * (common/opt.h, docs/options.md), add a row below; the completions, the man
 * page and the tests read its flags from the table (--help, --options-json).
 */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "cmd/proctitle.h"
#include "common/cancel.h"
#include "common/log.h"
#include "common/metrics.h"

enum cmd_flags {
	CMD_META = 1 << 0,      /* takes a META-URL */
	CMD_MUTATES = 1 << 1,   /* may change the volume (dry-run by default) */
	CMD_LONG = 1 << 2,      /* long-running: installs shutdown handlers */
};

struct cmd_entry {
	const char *name;
	jo_cmd_fn fn;
	const char *summary;
	unsigned flags;
};

static const struct cmd_entry commands[] = {
	{ "info", cmd_info, "show a volume's format, counts and fragmentation", CMD_META },
	{ "cat", cmd_cat, "print a file's bytes, read from metadata and objects (no mount)", CMD_META | CMD_LONG },
	{ "doctor", cmd_doctor, "check metadata, object store, credentials, clock and client jobs", CMD_META },
#ifdef JO_HAVE_LEAKCHECK
	{ "leakcheck", cmd_leakcheck, "find objects no metadata references, and references with no object", CMD_META | CMD_MUTATES | CMD_LONG },
#endif
#ifdef JO_HAVE_SYNC
	{ "sync", cmd_sync, "incremental, resumable copy between object stores or directories", CMD_MUTATES | CMD_LONG },
#endif
#ifdef JO_HAVE_COMPACT
	{ "compact", cmd_compact, "rewrite fragmented chunks as one slice each, as JuiceFS compacts", CMD_META | CMD_MUTATES | CMD_LONG },
#endif
#ifdef JO_HAVE_GC
	{ "gc", cmd_gc, "distributed garbage collection: plan, lease-based workers, refcount-decided deletes", CMD_META | CMD_MUTATES | CMD_LONG },
#endif
#ifdef JO_HAVE_TRASH
	{ "trash", cmd_trash, "what a volume's trash holds, by time, path, owner and name; put back or purge", CMD_META },
#endif
#ifdef JO_HAVE_WARMUP
	{ "warmup", cmd_warmup, "warm exactly the blocks that hold given file byte ranges", CMD_META | CMD_LONG },
#endif
#ifdef JO_HAVE_USAGE
	{ "usage", cmd_usage, "capacity, cold data and growth per directory, from one walk of the metadata", CMD_META | CMD_LONG },
#endif
#ifdef JO_HAVE_EXPORT
	{ "export", cmd_export, "the volume's files (and slices) as Parquet, full or incremental", CMD_META | CMD_LONG },
#endif
#ifdef JO_HAVE_CONFIG
	{ "config", cmd_config, "show the config file path and a profile's effective settings (secrets masked)", 0 },
#endif
#ifdef JO_HAVE_LANCE
	{ "lance", cmd_lance, "print the byte ranges a scan of selected Lance columns reads", 0 },
#endif
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct cmd_entry *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: jfsops [--version] [--help] [--log-level LEVEL] <command> [<args>]\n"
		"\n"
		"Batch data-lifecycle tools for JuiceFS volumes and object stores.\n"
		"Every volume command takes the META-URL that `juicefs` takes, e.g.\n"
		"redis://127.0.0.1:6379/1 or sqlite3:///var/jfs/meta.db.\n"
		"\n"
		"Commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"\n"
		"Global options:\n"
		"  -h, --help             show this help; `jfsops help CMD` for a command\n"
		"  -V, --version          print the version\n"
		"      --log-level LEVEL  error|warn|info|debug (default warn; env JFSOPS_LOG_LEVEL)\n"
		"      --list-commands    print the command names, one per line\n"
		"\n"
		"Exit codes:\n");
	/* the one list of common/exit.h, as docs/exit-codes.md */
#define JO_EXIT_HELP(name, code, brief, full) fprintf(f, "  %3d  %s\n", code, brief);
	JO_EXIT_CODES(JO_EXIT_HELP)
#undef JO_EXIT_HELP
}

/*
 * Whether stdout is a pipe or socket whose reader has gone: its write end
 * polls as an error. errno after a failed fflush() cannot tell, as a write
 * that failed earlier (with EPIPE, SIGPIPE being ignored) left the stream's
 * error flag set and errno to whatever ran since.
 */
static bool stdout_reader_gone(void)
{
	struct pollfd p = { .fd = STDOUT_FILENO, .events = POLLOUT };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/*
 * Flush and check stdout: a full disk is an error, not silence. A reader that
 * closed the pipe early (`jfsops cat ... | head`) ends the command quietly
 * with 141, the status of a program that SIGPIPE stopped (as cat's), unless
 * a signal stopped it first.
 */
static int finish_stdout(int rc)
{
	bool flushed = fflush(stdout) == 0;
	int e = errno;

	if (flushed && !ferror(stdout))
		return rc;
	if ((!flushed && e == EPIPE) || stdout_reader_gone())
		return rc == JO_EXIT_SIGINT || rc == JO_EXIT_SIGTERM ? rc : JO_EXIT_SIGPIPE;
	/* a write that failed before this flush was the command's to report */
	if (!flushed)
		fprintf(stderr, "jfsops: error writing to stdout: %s\n", strerror(e));
	else if (!rc)
		fprintf(stderr, "jfsops: error writing to stdout\n");
	return rc ? rc : JO_EXIT_FAIL;
}

static int run(const struct cmd_entry *c, int argc, char **argv)
{
	struct jo_ctx ctx = { .prog = "jfsops", .cmd = c->name };
	int rc;

	ctx.tty = isatty(STDERR_FILENO);
	{
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ctx.t0 = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
		ctx.started = (int64_t)time(NULL);
	}
	snprintf(ctx.prefix, sizeof(ctx.prefix), "jfsops %s", c->name);
	jo_log_setup(ctx.prefix, jo_log_get_level());
	/* `jfsops CMD --help` and `jfsops help CMD` open with the table's summary,
	 * so help, `jfsops --help` and the man page NAME line cannot drift */
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		printf("jfsops %s - %s\n\n", c->name, c->summary);
	rc = c->fn(argc, argv, &ctx);
	rc = finish_stdout(rc);
	if (rc == 0 && jo_cancelled())
		rc = 128 + jo_cancelled();
	/* every run that got past its options writes its metrics file */
	if (cmd_metrics_finish(&ctx, rc) != 0 && rc == 0)
		rc = JO_EXIT_FAIL;
	jo_metrics_free(ctx.mx);
	return rc;
}

/*
 * `jfsops help --options-json [CMD]` (hidden): the option table of CMD, or of
 * every command, as one JSON line each (common/opt.h), for the completions,
 * the man pages and the tests.
 */
static int options_json(const char *name)
{
	int rc = JO_EXIT_OK;

	for (size_t k = 0; k < NCOMMANDS; k++) {
		char *oargv[] = { (char *)commands[k].name, (char *)"--options-json", NULL };

		if (name && strcmp(name, commands[k].name))
			continue;
		rc = run(&commands[k], 2, oargv);
		if (name)
			return rc;
	}
	if (name) {
		fprintf(stderr, "jfsops: '%s' is not a jfsops command (see 'jfsops --help')\n", name);
		return JO_EXIT_USAGE;
	}
	return finish_stdout(JO_EXIT_OK);
}

/*
 * Every worker, lister and transfer thread would get a malloc arena of its
 * own (glibc makes up to 8 per core), and each arena keeps the buffers its
 * thread freed. Two arenas for the whole process, set before any thread
 * starts: leakcheck on 200k objects at --mem-limit 16M peaked at 27-29 MiB
 * instead of 37-42, compact --threads 4 at 157-175 MiB instead of 194-218,
 * at the same speed (the threads wait on the network, not on malloc).
 * MALLOC_ARENA_MAX in the environment wins.
 */
static void limit_malloc_arenas(void)
{
#ifdef M_ARENA_MAX
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, 2);
#endif
}

int main(int argc, char **argv)
{
	const char *base;
	const char *env = getenv("JFSOPS_LOG_LEVEL");
	const struct cmd_entry *c;
	int i;

	/* before anything else: from here on ps shows every secret as "****" */
	argv = cmd_hide_secrets(argc, argv);
	base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	limit_malloc_arenas();
	jo_cancel_install();
	jo_log_setup("jfsops", JO_LOG_WARN);
	if (env && jo_log_parse_level(env) >= 0)
		jo_log_setup(NULL, (enum jo_log_level)jo_log_parse_level(env));

	/* jfsops-gc ARGS == jfsops gc ARGS; any other name (a copy called
	 * jfsops-1.4 or jfsops-old) is jfsops itself */
	if (!strncmp(base, "jfsops-", 7) && (c = find_command(base + 7)) != NULL) {
		argv[0] = (char *)c->name;
		return run(c, argc, argv);
	}

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return finish_stdout(0);
		} else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
			printf("jfsops %s\n", JO_VERSION);
			return finish_stdout(0);
		} else if (!strcmp(a, "--list-commands")) {
			for (size_t k = 0; k < NCOMMANDS; k++)
				printf("%s\n", commands[k].name);
			return finish_stdout(0);
		} else if (!strcmp(a, "--log-level") || !strncmp(a, "--log-level=", 12)) {
			const char *v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : "");
			int lvl = jo_log_parse_level(v);

			if (lvl < 0) {
				fprintf(stderr, "jfsops: unknown log level '%s' (error|warn|info|debug)\n", v);
				return JO_EXIT_USAGE;
			}
			jo_log_setup(NULL, (enum jo_log_level)lvl);
		} else {
			fprintf(stderr, "jfsops: unknown option '%s' (see 'jfsops --help')\n", a);
			return JO_EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return JO_EXIT_USAGE;
	}
	if (!strcmp(argv[i], "help")) {
		if (i + 1 < argc && !strcmp(argv[i + 1], "--options-json"))
			return options_json(i + 2 < argc ? argv[i + 2] : NULL);
		if (i + 1 >= argc) {
			usage(stdout);
			return finish_stdout(0);
		}
		c = find_command(argv[i + 1]);
		if (!c) {
			fprintf(stderr, "jfsops: '%s' is not a jfsops command (see 'jfsops --help')\n", argv[i + 1]);
			return JO_EXIT_USAGE;
		}
		{
			char *hargv[] = { (char *)c->name, (char *)"--help", NULL };

			return run(c, 2, hargv);
		}
	}
	if (!strcmp(argv[i], "version")) {
		printf("jfsops %s\n", JO_VERSION);
		return finish_stdout(0);
	}
	c = find_command(argv[i]);
	if (!c) {
		fprintf(stderr, "jfsops: '%s' is not a jfsops command (see 'jfsops --help')\n", argv[i]);
		return JO_EXIT_USAGE;
	}
	return run(c, argc - i, argv + i);
}
