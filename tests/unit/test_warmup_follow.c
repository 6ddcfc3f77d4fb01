/*
 * Unit tests for common/warmup/follow.c: the look-ahead pipeline run on a
 * real SQLite volume through a stand-in mount (tests/unit/support/
 * wu_fixture.h), driven by its own client (wu_client) over the control
 * socket, with its state file; and the client's refusals.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/command.h"
#include "common/err.h"
#include "common/exit.h"
#include "common/warmup/run.h"
#include "common/warmup/warmup.h"
#include "support/wu_fixture.h"

static struct wu_fixture fx;
static struct jo_ctx ctx = { .prog = "jfsops", .cmd = "warmup", .json = true };

static int group_setup(void **state)
{
	(void)state;
	ctx.started = (int64_t)time(NULL);
	ctx.t0 = wu_now();
	return wu_fx_setup(&fx);
}

static int group_teardown(void **state)
{
	(void)state;
	wu_fx_teardown(&fx);
	return 0;
}

static void nap(void)
{
	struct timespec ts = { .tv_nsec = 20 * 1000000L };

	nanosleep(&ts, NULL);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(b);
	n = fread(b, 1, (1 << 20) - 1, f);
	b[n] = '\0';
	fclose(f);
	return b;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* stdout into a file for a while (the pipeline's and the client's JSON lines) */
static int stdout_to(const char *path)
{
	int saved, fd;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	assert_true(dup2(fd, STDOUT_FILENO) >= 0);
	close(fd);
	return saved;
}

static void stdout_back(int saved)
{
	fflush(stdout);
	assert_true(dup2(saved, STDOUT_FILENO) >= 0);
	close(saved);
}

struct follow_run {
	struct wu_state st;
	struct jo_warmup_mount mi;
	struct wu_follow_opts o;
	int rc;
};

static void *run_follow(void *p)
{
	struct follow_run *r = p;

	r->rc = wu_follow(&r->st, &r->mi, &r->o);
	return NULL;
}

static void open_follow(struct follow_run *r, const char *ranges, const char *control,
			const char *state)
{
	memset(r, 0, sizeof(*r));
	r->st.ctx = &ctx;
	assert_int_equal(wu_open_meta(&r->st, fx.url), 0);
	wu_fx_mount(&fx, r->st.fmt.uuid, 1u << 30);
	assert_int_equal(wu_mount_attach(&r->st, fx.mount, true, &r->mi), 0);
	r->o = (struct wu_follow_opts){ .ahead = 2, .control = control, .state = state,
					.ranges = ranges, .others = WU_OTHERS_DROP, .threads = 2 };
}

static void close_follow(struct follow_run *r)
{
	jo_warmup_mount_release(&r->mi);
	wu_state_release(&r->st);
}

/* Ask until the batch is ready (exit 0), at most 10 s. */
static void wait_ready(const char *control, const char *id)
{
	for (int i = 0; i < 500; i++) {
		struct stat sb;

		if (!stat(control, &sb) && S_ISSOCK(sb.st_mode) &&
		    wu_client(&ctx, control, "status", id) == JO_EXIT_OK)
			return;
		nap();
	}
	fail_msg("batch %s never became ready", id);
}

static void pipeline_warms_batches_until_the_consumer_passed_them(void **state)
{
	char ranges[256], control[256], st_path[256], out[256], *text, *saved_state, *b2;
	struct follow_run r;
	pthread_t t;
	int saved;
	FILE *f;

	(void)state;
	snprintf(ranges, sizeof(ranges), "%s/batches", fx.dir);
	snprintf(control, sizeof(control), "%s/warm.sock", fx.dir);
	snprintf(st_path, sizeof(st_path), "%s/follow.state", fx.dir);
	snprintf(out, sizeof(out), "%s/follow.out", fx.dir);
	f = fopen(ranges, "w");
	assert_non_null(f);
	fputs("ds/f 0 1\n# batch b1\n"
	      "ds/f 4194304 10\nds/f 0 1\n# batch b2\n"
	      "{\"file\":\"ds/g\",\"offset\":0,\"length\":5,\"batch\":\"b3\"}\n", f);
	fclose(f);
	open_follow(&r, ranges, control, st_path);

	saved = stdout_to(out);
	assert_int_equal(pthread_create(&t, NULL, run_follow, &r), 0);
	wait_ready(control, "b1");
	wait_ready(control, "b2");
	assert_int_equal(wu_client(&ctx, control, "done", "b2"), JO_EXIT_OK);
	wait_ready(control, "b3");
	assert_int_equal(wu_client(&ctx, control, "done", "b3"), JO_EXIT_OK);
	assert_int_equal(pthread_join(t, NULL), 0);
	stdout_back(saved);

	assert_int_equal(r.rc, JO_EXIT_OK);
	assert_int_equal(access(control, F_OK), -1);  /* the socket is gone */
	text = slurp(out);
	assert_int_equal(count(text, "\"type\":\"admit\""), 3);
	assert_int_equal(count(text, "\"type\":\"batch\""), 3);
	/* b2's block 0 was warmed for b1: shared, read once */
	b2 = strstr(text, "{\"type\":\"batch\",\"batch\":\"b2\"");
	assert_non_null(b2);
	*strchr(b2, '\n') = '\0';
	assert_non_null(strstr(b2, "\"blocks\":2,"));
	assert_non_null(strstr(b2, "\"new_blocks\":1,"));
	assert_non_null(strstr(b2, "\"shared_blocks\":1,"));
	assert_non_null(strstr(b2, "\"failed\":0,"));
	b2[strlen(b2)] = '\n';
	assert_int_equal(count(text, "\"type\":\"summary\""), 1);
	assert_non_null(strstr(text, "\"complete\":true"));
	free(text);
	saved_state = slurp(st_path);
	assert_non_null(strstr(saved_state, "\"done\":\"b3\""));
	free(saved_state);
	close_follow(&r);
}

static void pipeline_without_its_stream_fails_and_cleans_up(void **state)
{
	char ranges[256], control[256];
	struct follow_run r;

	(void)state;
	snprintf(ranges, sizeof(ranges), "%s/no-such-stream", fx.dir);
	snprintf(control, sizeof(control), "%s/warm2.sock", fx.dir);
	open_follow(&r, ranges, control, NULL);
	assert_int_equal(wu_follow(&r.st, &r.mi, &r.o), JO_EXIT_NOTFOUND);
	assert_int_equal(access(control, F_OK), -1);
	close_follow(&r);
}

static void client_refuses_what_it_cannot_send(void **state)
{
	char control[256], link[256];

	(void)state;
	snprintf(control, sizeof(control), "%s/nobody.sock", fx.dir);
	snprintf(link, sizeof(link), "%s/link.sock", fx.dir);
	assert_int_equal(wu_client(&ctx, control, "done", "a\nb"), JO_EXIT_USAGE);
	assert_int_equal(wu_client(&ctx, control, "done", ""), JO_EXIT_USAGE);
	assert_int_equal(wu_client(&ctx, control, "done", "b1"), JO_EXIT_CONNECT);
	assert_int_equal(symlink(control, link), 0);
	assert_int_equal(wu_client(&ctx, link, "status", "b1"), JO_EXIT_USAGE);
	unlink(link);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(client_refuses_what_it_cannot_send),
		cmocka_unit_test(pipeline_without_its_stream_fails_and_cleans_up),
		cmocka_unit_test(pipeline_warms_batches_until_the_consumer_passed_them),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
