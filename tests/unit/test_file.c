/*
 * common/file: temp files renamed into place, checked append opens. Nothing
 * is ever written through a planted symlink, and files get their modes
 * (0666 less the umask, or exactly 0600).
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/file.h"
#include "support/testutil.h"

#define NOBODY 65534

struct fx {
	char dir[64];
	char victim[128];
};

static void path_in(const struct fx *fx, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", fx->dir, name);
}

static void put(const char *path, const char *text)
{
	tu_write_text(path, text);
}

/* The whole content of path ("" when it is absent). */
static char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	buf[0] = '\0';
	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

/* Entries of the fixture directory besides the victim file. */
static int count_entries(const struct fx *fx, char *first, size_t cap)
{
	DIR *d = opendir(fx->dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "victim"))
			continue;
		if (n++ == 0 && first)
			snprintf(first, cap, "%s", de->d_name);
	}
	closedir(d);
	return n;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	assert_non_null(fx);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/jo-file-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	assert_int_equal(chmod(fx->dir, 0755), 0); /* user nobody works in a subdirectory */
	path_in(fx, "victim", fx->victim, sizeof(fx->victim));
	put(fx->victim, "victim\n");
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	assert_int_equal(tu_rm_rf(fx->dir), 0);
	free(fx);
	return 0;
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/*
 * Creates target (no stdio: fd only), writes text, commits and releases;
 * the target then holds text and the directory has entries entries.
 */
static void commit_through_fd(const struct fx *fx, const char *target, unsigned mode, unsigned flags,
			      const char *text, int entries)
{
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	size_t n = strlen(text);

	assert_int_equal(jo_file_create(&f, target, mode, flags, &err), 0);
	assert_null(f->fp);
	assert_int_equal(write(f->fd, text, n), n);
	assert_int_equal(jo_file_commit(f, &err), 0);
	jo_file_abort(f);
	assert_string_equal(slurp(target), text);
	assert_int_equal(count_entries(fx, NULL, 0), entries);
}

static void file_commit_publishes_the_target(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	char target[128], tmp[300], name[300];

	path_in(fx, "report.jsonl", target, sizeof(target));
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, JO_FILE_STDIO, &err), 0);
	assert_non_null(f->fp);
	fputs("line 1\n", f->fp);
	/* until the commit only a hidden temp file exists: ".report.jsonl.XXXXXX" */
	assert_int_equal(access(target, F_OK), -1);
	assert_int_equal(count_entries(fx, name, sizeof(name)), 1);
	assert_int_equal(strlen(name), strlen(".report.jsonl.") + 6);
	assert_memory_equal(name, ".report.jsonl.", strlen(".report.jsonl."));
	path_in(fx, name, tmp, sizeof(tmp));
	assert_int_equal(jo_file_commit(f, &err), 0);
	assert_string_equal(slurp(target), "line 1\n");
	assert_int_equal(access(tmp, F_OK), -1);
	jo_file_abort(f); /* after a commit: releases only */
	assert_string_equal(slurp(target), "line 1\n");
	assert_int_equal(count_entries(fx, NULL, 0), 1);

	/* a second run replaces it; fd without stdio */
	commit_through_fd(fx, target, JO_FILE_PUBLIC, 0, "two\n", 1);
}

static void file_abort_leaves_nothing(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	char target[128];

	jo_file_abort(NULL);
	path_in(fx, "out.jsonl", target, sizeof(target));
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, JO_FILE_STDIO, &err), 0);
	fputs("half a report", f->fp);
	jo_file_abort(f);
	assert_int_equal(count_entries(fx, NULL, 0), 0);

	/* an existing target is left as it was */
	put(target, "old\n");
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, 0, &err), 0);
	assert_int_equal(write(f->fd, "new", 3), 3);
	jo_file_abort(f);
	assert_string_equal(slurp(target), "old\n");
	assert_int_equal(count_entries(fx, NULL, 0), 1);
}

static void file_ignores_planted_temp_names(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL, *g = NULL;
	struct jo_err err = { 0 };
	char target[128], p[300];

	path_in(fx, "leaks.jsonl", target, sizeof(target));
	/* the names the old code used, and a crowd of the new pattern's */
	path_in(fx, "leaks.jsonl.tmp", p, sizeof(p));
	assert_int_equal(symlink(fx->victim, p), 0);
	snprintf(p, sizeof(p), "%s/leaks.jsonl.tmp.%ld", fx->dir, (long)getpid());
	assert_int_equal(symlink(fx->victim, p), 0);
	for (int i = 0; i < 200; i++) {
		snprintf(p, sizeof(p), "%s/.leaks.jsonl.a%05d", fx->dir, i);
		assert_int_equal(symlink(fx->victim, p), 0);
	}
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, JO_FILE_STDIO, &err), 0);
	assert_int_equal(jo_file_create(&g, target, JO_FILE_PUBLIC, JO_FILE_STDIO, &err), 0);
	assert_string_not_equal(f->tmp, g->tmp); /* random, never a fixed name */
	fputs("report\n", f->fp);
	assert_int_equal(jo_file_commit(f, &err), 0);
	jo_file_abort(f);
	jo_file_abort(g);
	assert_string_equal(slurp(fx->victim), "victim\n");
	assert_string_equal(slurp(target), "report\n");
	assert_int_equal(count_entries(fx, NULL, 0), 2 + 200 + 1);
}

static void file_replaces_a_symlink_at_the_target(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	char target[128];
	struct stat st;

	path_in(fx, "m.prom", target, sizeof(target));
	assert_int_equal(symlink(fx->victim, target), 0);
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, JO_FILE_STDIO, &err), 0);
	fputs("metrics 1\n", f->fp);
	assert_int_equal(jo_file_commit(f, &err), 0);
	jo_file_abort(f);
	assert_int_equal(lstat(target, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_string_equal(slurp(target), "metrics 1\n");
	assert_string_equal(slurp(fx->victim), "victim\n");
}

static void file_noreplace_keeps_what_is_there(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	char target[128], dangling[128];

	path_in(fx, "q.tar.zst", target, sizeof(target));
	put(target, "archive 0\n");
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PRIVATE, JO_FILE_NOREPLACE, &err),
			 JO_EINVAL);
	assert_null(f);
	assert_non_null(strstr(err.msg, "already exists"));
	/* a dangling symlink counts as there */
	path_in(fx, "q2.tar.zst", dangling, sizeof(dangling));
	assert_int_equal(symlink("/nonexistent/jo-file-test", dangling), 0);
	assert_int_equal(jo_file_create(&f, dangling, JO_FILE_PRIVATE, JO_FILE_NOREPLACE, &err),
			 JO_EINVAL);
	assert_int_equal(access("/nonexistent/jo-file-test", F_OK), -1);
	/* one that appears while the file is written: the commit refuses */
	assert_int_equal(unlink(target), 0);
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PRIVATE, JO_FILE_NOREPLACE, &err), 0);
	assert_int_equal(write(f->fd, "archive 1\n", 10), 10);
	put(target, "archive 0\n");
	assert_int_equal(jo_file_commit(f, &err), JO_EINVAL);
	jo_file_abort(f);
	assert_string_equal(slurp(target), "archive 0\n");
	assert_int_equal(count_entries(fx, NULL, 0), 2);
	/* absent: created */
	assert_int_equal(unlink(target), 0);
	commit_through_fd(fx, target, JO_FILE_PRIVATE, JO_FILE_NOREPLACE, "archive 1\n", 2);
}

static void file_refuses_bad_targets(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	char target[128];

	path_in(fx, "d", target, sizeof(target));
	assert_int_equal(mkdir(target, 0755), 0);
	assert_int_equal(jo_file_create(&f, target, JO_FILE_PUBLIC, 0, &err), JO_EINVAL);
	assert_int_equal(jo_file_create(&f, "/tmp/", JO_FILE_PUBLIC, 0, &err), JO_EINVAL);
	assert_int_equal(jo_file_create(&f, "/nonexistent-dir/x/out", JO_FILE_PUBLIC, 0, &err),
			 JO_ENOTFOUND);
	assert_null(f);
}

static void file_modes_follow_umask_or_are_private(void **state)
{
	static const struct { mode_t umask; mode_t pub; } cases[] = {
		{ 022, 0644 }, { 0, 0666 }, { 077, 0600 }, { 0277, 0400 },
	};
	struct fx *fx = *state;
	struct jo_err err = { 0 };
	mode_t old = umask(0);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct jo_file *f = NULL;
		char p[128], a[128], q[128], b[128];
		int fd;

		umask(cases[i].umask);
		snprintf(p, sizeof(p), "%s/pub%zu", fx->dir, i);
		snprintf(q, sizeof(q), "%s/priv%zu", fx->dir, i);
		snprintf(a, sizeof(a), "%s/apub%zu", fx->dir, i);
		snprintf(b, sizeof(b), "%s/apriv%zu", fx->dir, i);
		assert_int_equal(jo_file_create(&f, p, JO_FILE_PUBLIC, 0, &err), 0);
		assert_int_equal(jo_file_commit(f, &err), 0);
		jo_file_abort(f);
		assert_int_equal(jo_file_create(&f, q, JO_FILE_PRIVATE, 0, &err), 0);
		assert_int_equal(mode_of(f->tmp_path), 0600); /* private while written, too */
		assert_int_equal(jo_file_commit(f, &err), 0);
		jo_file_abort(f);
		assert_int_equal(jo_file_append_open(&fd, a, JO_FILE_PUBLIC, &err), 0);
		close(fd);
		assert_int_equal(jo_file_append_open(&fd, b, JO_FILE_PRIVATE, &err), 0);
		close(fd);
		assert_int_equal(mode_of(p), cases[i].pub);
		assert_int_equal(mode_of(a), cases[i].pub);
		assert_int_equal(mode_of(q), 0600);
		assert_int_equal(mode_of(b), 0600);
	}
	umask(old);
}

static void append_creates_then_appends(void **state)
{
	struct fx *fx = *state;
	struct jo_err err = { 0 };
	char p[128];
	int fd;

	path_in(fx, "audit.jsonl", p, sizeof(p));
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), 0);
	assert_int_equal(write(fd, "a\n", 2), 2);
	close(fd);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(write(fd, "b\n", 2), 2); /* O_APPEND: at the end all the same */
	close(fd);
	assert_string_equal(slurp(p), "a\nb\n");

	/* an older, looser private file of ours is tightened */
	assert_int_equal(chmod(p, 0644), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PRIVATE, &err), 0);
	close(fd);
	assert_int_equal(mode_of(p), 0600);
}

static void append_refuses_symlinks_fifos_and_links(void **state)
{
	struct fx *fx = *state;
	struct jo_err err = { 0 };
	char p[128];
	int fd = -1;

	path_in(fx, "audit.jsonl", p, sizeof(p));
	assert_int_equal(symlink(fx->victim, p), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err.msg, "symbolic link"));
	assert_string_equal(slurp(fx->victim), "victim\n");
	/* a dangling one: its target is not created either */
	path_in(fx, "audit2.jsonl", p, sizeof(p));
	assert_int_equal(symlink("/tmp/jo-file-test-dangling", p), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);
	assert_int_equal(access("/tmp/jo-file-test-dangling", F_OK), -1);

	/* a FIFO: refused at once (no reader, and never blocking on one) */
	path_in(fx, "fifo", p, sizeof(p));
	assert_int_equal(mkfifo(p, 0666), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "FIFO"));
	path_in(fx, "dir", p, sizeof(p));
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);

	/* a hard link to another file */
	path_in(fx, "hard.jsonl", p, sizeof(p));
	assert_int_equal(link(fx->victim, p), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "hard links"));
	assert_string_equal(slurp(fx->victim), "victim\n");
}

static void append_refuses_another_users_file(void **state)
{
	struct fx *fx = *state;
	struct jo_err err = { 0 };
	char p[128];
	int fd = -1;

	if (geteuid() != 0)
		skip(); /* needs chown */
	path_in(fx, "audit.jsonl", p, sizeof(p));
	put(p, "theirs\n");
	assert_int_equal(chown(p, NOBODY, NOBODY), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "belongs to uid 65534"));
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, 0, NULL, &err), JO_EIO);
	assert_string_equal(slurp(p), "theirs\n");
	/* root's own file is accepted */
	assert_int_equal(chown(p, 0, 0), 0);
	assert_int_equal(jo_file_append_open(&fd, p, JO_FILE_PUBLIC, &err), 0);
	close(fd);
}

static void prepare_checks_the_file_and_its_sidecars(void **state)
{
	static const char *const sidecars[] = { "-wal", "-shm", NULL };
	struct fx *fx = *state;
	struct jo_err err = { 0 };
	char p[128], side[160];
	struct stat st;

	path_in(fx, "state.db", p, sizeof(p));
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, JO_FILE_NOCREATE, sidecars, &err),
			 JO_ENOTFOUND);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, 0, sidecars, &err), 0);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode) && st.st_size == 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, JO_FILE_NOCREATE, sidecars, &err), 0);
	snprintf(side, sizeof(side), "%s-wal", p);
	assert_int_equal(symlink(fx->victim, side), 0);
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, 0, sidecars, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "-wal"));
	assert_int_equal(unlink(side), 0);
	/* the file itself a symlink */
	path_in(fx, "state2.db", p, sizeof(p));
	assert_int_equal(symlink(fx->victim, p), 0);
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, 0, sidecars, &err), JO_EIO);
	assert_int_equal(jo_file_prepare(p, JO_FILE_PRIVATE, JO_FILE_NOCREATE, sidecars, &err),
			 JO_EIO);
	assert_string_equal(slurp(fx->victim), "victim\n");
}

/* A child that creates a temp file and then leaves by exit() or a double SIGINT. */
static void temp_removed_at_exit_and_second_sigint(void **state)
{
	struct fx *fx = *state;

	for (int how = 0; how < 2; how++) {
		char target[128];
		int status;
		pid_t pid;

		path_in(fx, how ? "sigint.out" : "exit.out", target, sizeof(target));
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct jo_file *f = NULL;
			struct jo_err err = { 0 };

			jo_cancel_install();
			if (jo_file_create(&f, target, JO_FILE_PUBLIC, 0, &err))
				_exit(99);
			if (how == 0)
				exit(0); /* the handle never aborted: the exit hook removes it */
			raise(SIGINT);
			raise(SIGINT); /* the second one exits at once */
			_exit(98);
		}
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), how ? 130 : 0);
		assert_int_equal(count_entries(fx, NULL, 0), 0);
	}
}

/* As user nobody in a sticky directory: another user's file cannot be replaced. */
static void replace_in_sticky_dir_says_why(void **state)
{
	struct fx *fx = *state;
	char sticky[128], target[160];
	int pfd[2], status;
	pid_t pid;

	if (geteuid() != 0)
		skip(); /* needs a second user */
	path_in(fx, "sticky", sticky, sizeof(sticky));
	assert_int_equal(mkdir(sticky, 0777), 0);
	assert_int_equal(chmod(sticky, 01777), 0);
	snprintf(target, sizeof(target), "%s/rootfile", sticky);
	put(target, "root's\n");
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct jo_file *f = NULL;
		struct jo_err err = { 0 };
		int rc;

		close(pfd[0]);
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(99);
		rc = jo_file_create(&f, target, JO_FILE_PUBLIC, 0, &err);
		if (!rc)
			rc = jo_file_commit(f, &err);
		jo_file_abort(f);
		(void)!write(pfd[1], err.msg, strlen(err.msg));
		_exit(rc == JO_EIO ? 0 : 1);
	}
	close(pfd[1]);
	{
		char msg[600] = { 0 };
		ssize_t n = read(pfd[0], msg, sizeof(msg) - 1);

		close(pfd[0]);
		assert_true(n > 0);
		assert_non_null(strstr(msg, "belongs to uid 0"));
		assert_non_null(strstr(msg, "sticky"));
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_string_equal(slurp(target), "root's\n");
	/* and nobody's temp file is gone */
	{
		DIR *d = opendir(sticky);
		struct dirent *de;
		int n = 0;

		assert_non_null(d);
		while ((de = readdir(d)) != NULL)
			n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
		closedir(d);
		assert_int_equal(n, 1);
	}
}

/*
 * A scratch file: read back what was written, mode 0600, never a name in
 * the directory (not while open, not after, not after a SIGKILL); commit
 * refused; a missing directory one error.
 */
static void scratch_has_no_name(void **state)
{
	struct fx *fx = *state;
	struct jo_file *f = NULL;
	struct jo_err err = { 0 };
	struct stat st;
	char buf[8] = { 0 };
	pid_t pid;
	int status;

	assert_int_equal(jo_file_scratch(&f, fx->dir, JO_FILE_STDIO, &err), 0);
	assert_int_equal(fputs("scratch", f->fp) >= 0, 1);
	assert_int_equal(fflush(f->fp), 0);
	assert_int_equal(pread(f->fd, buf, 7, 0), 7);
	assert_string_equal(buf, "scratch");
	assert_int_equal(fstat(f->fd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(count_entries(fx, NULL, 0), 0);
	assert_int_equal(jo_file_commit(f, &err), JO_EINVAL);
	jo_file_abort(f);
	assert_int_equal(count_entries(fx, NULL, 0), 0);
	/* a process killed while it writes one leaves nothing */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct jo_file *g = NULL;

		if (jo_file_scratch(&g, fx->dir, 0, &err) != 0 || write(g->fd, "x", 1) != 1)
			_exit(3);
		kill(getpid(), SIGKILL);
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(count_entries(fx, NULL, 0), 0);
	char missing[160];

	path_in(fx, "no/such", missing, sizeof(missing));
	assert_int_equal(jo_file_scratch(&f, missing, 0, &err), JO_ENOTFOUND);
	assert_null(f);
	assert_non_null(strstr(err.msg, "no/such"));
}

/* A test that runs between setup and teardown, like most here. */
#define FIXTURE_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FIXTURE_TEST(file_commit_publishes_the_target),
		FIXTURE_TEST(file_abort_leaves_nothing),
		FIXTURE_TEST(file_ignores_planted_temp_names),
		FIXTURE_TEST(file_replaces_a_symlink_at_the_target),
		FIXTURE_TEST(file_noreplace_keeps_what_is_there),
		FIXTURE_TEST(file_refuses_bad_targets),
		FIXTURE_TEST(file_modes_follow_umask_or_are_private),
		FIXTURE_TEST(append_creates_then_appends),
		FIXTURE_TEST(append_refuses_symlinks_fifos_and_links),
		FIXTURE_TEST(append_refuses_another_users_file),
		FIXTURE_TEST(prepare_checks_the_file_and_its_sidecars),
		FIXTURE_TEST(temp_removed_at_exit_and_second_sigint),
		FIXTURE_TEST(replace_in_sticky_dir_says_why),
		FIXTURE_TEST(scratch_has_no_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
