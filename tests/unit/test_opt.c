/* common/opt.c: the option tables (parsing, the value grammars, --help). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/opt.h"

struct vals {
	bool del, quiet;
	int mode;
	uint64_t slices;
	int threads;
	uint64_t mem;
	int64_t lease_ms, age_s;
	double rate;
	const char *id;
	const char *fmt;
};

static int cb_format(const struct jo_option *o, const char *arg, char *want, size_t cap)
{
	if (strcmp(arg, "csv") && strcmp(arg, "jsonl")) {
		snprintf(want, cap, "want csv or jsonl");
		return -1;
	}
	*(const char **)o->value = arg;
	return 0;
}

#define TABLE(v) \
	struct jo_option opts[] = { \
		OPT_GROUP("Modes:"), \
		OPT_CMDMODE(0, "plan", &(v)->mode, "only plan", 1), \
		OPT_CMDMODE(0, "worker", &(v)->mode, "only work", 2), \
		OPT_GROUP("Options:"), \
		OPT_BOOL(0, "delete", &(v)->del, "really delete"), \
		OPT_BOOL('q', "quiet", &(v)->quiet, "no progress line"), \
		OPT_UINT(0, "min-slices", &(v)->slices, "N", "chunks with at least N slices", 0, 0), \
		OPT_UINT('p', "threads", &(v)->threads, "N", "workers", 1, 256), \
		OPT_SIZE(0, "mem-limit", &(v)->mem, "SIZE", "memory budget", 4 << 20, 0), \
		OPT_DURATION(0, "lease", &(v)->lease_ms, "DUR", "lease length", 1000, 0), \
		OPT_DURATION_S(0, "min-age", &(v)->age_s, "DUR", "younger objects are left", 0, 0), \
		OPT_DECIMAL(0, "delete-rate", &(v)->rate, "N", "deletes per second", 1), \
		OPT_STRING(0, "id", &(v)->id, "NAME", "worker id (default host:pid)"), \
		OPT_CALLBACK('f', "format", &(v)->fmt, "csv|jsonl", "output format", cb_format), \
		OPT_HELP(), \
		OPT_END(), \
	}; \
	struct jo_opt_cmd cmd = { .prefix = "jfsops t", .usage = "usage: jfsops t ARG\n\n", \
				  .trailer = "\nExamples:\n  jfsops t x\n", .opts = opts }

/* parse the words (NULL-terminated) into v: the result of jo_opt_parse, argv in out */
static int parse(struct vals *v, char ***out, ...)
{
	static char *argv[32];
	va_list ap;
	int argc = 0;
	TABLE(v);

	argv[argc++] = (char *)"t";
	va_start(ap, out);
	for (char *w; (w = va_arg(ap, char *));)
		argv[argc++] = w;
	va_end(ap);
	argv[argc] = NULL;
	if (out)
		*out = argv;
	return jo_opt_parse(&cmd, argc, argv);
}

/* stderr of the last call, through a pipe */
static char errbuf[4096];
static int saved_fd = -1, pipefd[2];

static void capture(void)
{
	fflush(stderr);
	assert_int_equal(pipe(pipefd), 0);
	saved_fd = dup(2);
	dup2(pipefd[1], 2);
}

static const char *captured(void)
{
	ssize_t n;

	fflush(stderr);
	dup2(saved_fd, 2);
	close(saved_fd);
	close(pipefd[1]);
	n = read(pipefd[0], errbuf, sizeof(errbuf) - 1);
	errbuf[n > 0 ? n : 0] = 0;
	close(pipefd[0]);
	return errbuf;
}

static void parses_long_short_and_positionals(void **state)
{
	struct vals v = { .threads = 1 };
	char **argv;
	int n;

	(void)state;
	n = parse(&v, &argv, "meta", "--delete", "-qp", "4", "--lease=1.5m", "--id", "w1", "x",
		  "--min-age", "1.5h", "--mem-limit", "64M", "--", "--not-an-option", NULL);
	assert_int_equal(n, 3);
	assert_string_equal(argv[1], "meta");
	assert_string_equal(argv[2], "x");
	assert_string_equal(argv[3], "--not-an-option");
	assert_true(v.del);
	assert_true(v.quiet);
	assert_int_equal(v.threads, 4);
	assert_int_equal(v.lease_ms, 90000);
	assert_int_equal(v.age_s, 5400);
	assert_int_equal(v.mem, 64 << 20);
	assert_string_equal(v.id, "w1");
	n = parse(&v, NULL, "-p8", "--min-s", "7", "--format", "jsonl", "--delete-rate", "0.5", NULL);
	assert_int_equal(n, 0);
	assert_int_equal(v.threads, 8);
	assert_int_equal(v.slices, 7);
	assert_string_equal(v.fmt, "jsonl");
	assert_true(v.rate == 0.5);
}

static void refuses_bad_values_in_one_format(void **state)
{
	static const char *const bad[][2] = {
		{ "--min-slices", "-1" }, { "--min-slices", "18446744073709551616" },
		{ "--min-slices", "+1" }, { "--min-slices", " 1" }, { "--min-slices", "" },
		{ "--threads", "0" }, { "--threads", "257" }, { "--mem-limit", "1M" },
		{ "--mem-limit", "99999999999999999999" }, { "--mem-limit", "0x10" },
		{ "--lease", "500ms" }, { "--lease", "nan" }, { "--lease", "1e3" },
		{ "--lease", " 5s" }, { "--lease", ".5" }, { "--min-age", "1.5q" },
		{ "--delete-rate", "0" }, { "--delete-rate", "inf" }, { "--format", "xml" },
	};
	struct vals v = { 0 };
	char want[128];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		capture();
		assert_int_equal(parse(&v, NULL, bad[i][0], bad[i][1], NULL), JO_OPT_REFUSED);
		captured();
		snprintf(want, sizeof(want), "jfsops t: bad %s '%s': want ", bad[i][0], bad[i][1]);
		if (!strstr(errbuf, want) || !strstr(errbuf, "(see 'jfsops t --help')\n"))
			fail_msg("%s %s: %s", bad[i][0], bad[i][1], errbuf);
	}
	assert_int_equal(v.slices, 0); /* nothing was stored */
	capture();
	assert_int_equal(parse(&v, NULL, "--nope", NULL), JO_OPT_REFUSED);
	assert_non_null(strstr(captured(), "unknown option '--nope'"));
	capture();
	assert_int_equal(parse(&v, NULL, "--lease", NULL), JO_OPT_REFUSED);
	assert_non_null(strstr(captured(), "--lease needs a value"));
	capture();
	assert_int_equal(parse(&v, NULL, "--delete=yes", NULL), JO_OPT_REFUSED);
	assert_non_null(strstr(captured(), "--delete takes no value"));
	capture();
	assert_int_equal(parse(&v, NULL, "--plan", "--worker", NULL), JO_OPT_REFUSED);
	assert_non_null(strstr(captured(), "--plan and --worker exclude each other"));
	capture();
	assert_int_equal(parse(&v, NULL, "--d", NULL), JO_OPT_REFUSED); /* delete, delete-rate */
	assert_non_null(strstr(captured(), "ambiguous option '--d'"));
}

/* One input of the size or duration grammar: what the parser returns and, when 0, the value. */
struct parse_case {
	const char *in;
	int rc;
	uint64_t want;
};

static void grammars(void **state)
{
	static const struct parse_case sizes[] = {
		{ "1.5M", 0, 3 << 19 },
		{ "4KiB", 0, 4096 },
		{ "10G", 0, 10ULL << 30 },
		{ "512B", 0, 512 },
		{ "1P", 0, 1ULL << 50 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "16384P", -1, 0 },
		{ "1.5", 0, 1 },
		{ "4X", -1, 0 },
		/* (sync's own size parser, which these come from, is gone: one grammar) */
		{ "10", 0, 10 },
		{ "1.5k", 0, 1536 },
		{ "2GiB", 0, 2ULL << 30 },
		{ "x", -1, 0 },
		{ "5Q", -1, 0 },
		/* strtod's own forms are no sizes: sign, blank, nan, inf, hex */
		{ "-1", -1, 0 },
		{ "+1", -1, 0 },
		{ " 1", -1, 0 },
		{ "nan", -1, 0 },
		{ "inf", -1, 0 },
		{ "0x10", -1, 0 },
		{ "M", -1, 0 },
	};
	static const struct parse_case durations[] = {
		{ "1.5h", 0, 5400000 },
		{ "90", 0, 90000 },
		{ "2d", 0, 172800000 },
		{ "500ms", 0, 500 },
		{ "1w", 0, 604800000 },
		{ "99999999999999999999d", -1, 0 },
		{ "-1s", -1, 0 },
	};
	uint64_t u;
	int64_t ms;
	char buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		assert_int_equal(jo_parse_size(sizes[i].in, &u), sizes[i].rc);
		if (sizes[i].rc == 0)
			assert_int_equal(u, sizes[i].want);
	}
	for (size_t i = 0; i < sizeof(durations) / sizeof(*durations); i++) {
		assert_int_equal(jo_parse_duration_ms(durations[i].in, &ms), durations[i].rc);
		if (durations[i].rc == 0)
			assert_int_equal(ms, durations[i].want);
	}
	jo_fmt_duration_ms(60000, buf, sizeof(buf));
	assert_string_equal(buf, "1m");
	jo_fmt_duration_ms(1500, buf, sizeof(buf));
	assert_string_equal(buf, "1500ms");
	jo_fmt_size(64 << 20, buf, sizeof(buf));
	assert_string_equal(buf, "64M");
	jo_fmt_size(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
}
/* jo_parse_digits: the counted decimal field of keys and names (meta, lance) */
static void digits(void **state)
{
	uint64_t u = 7;

	(void)state;
	assert_int_equal(jo_parse_digits("12345x", 5, &u), 0);
	assert_int_equal(u, 12345);
	assert_int_equal(jo_parse_digits("18446744073709551615", 20, &u), 0);
	assert_int_equal(u, UINT64_MAX);
	u = 7;
	assert_int_equal(jo_parse_digits("18446744073709551616", 20, &u), -1);
	assert_int_equal(jo_parse_digits("000000000000000000001", 21, &u), -1);
	assert_int_equal(jo_parse_digits("", 0, &u), -1);
	assert_int_equal(jo_parse_digits("-1", 2, &u), -1);
	assert_int_equal(jo_parse_digits(" 1", 2, &u), -1);
	assert_int_equal(u, 7); /* untouched on failure */
}

static void help_comes_from_the_table_with_defaults(void **state)
{
	struct vals v = { .threads = 1, .mem = 64 << 20, .lease_ms = 60000 };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	TABLE(&v);

	(void)state;
	jo_opt_usage(&cmd, f);
	fclose(f);
	assert_non_null(strstr(text, "usage: jfsops t ARG\n\nModes:\n"
				     "      --plan               only plan\n"));
	assert_non_null(strstr(text, "\nOptions:\n      --delete             really delete\n"));
	assert_non_null(strstr(text, "  -q, --quiet              no progress line\n"));
	assert_non_null(strstr(text, "  -p, --threads N          workers (default 1)\n"));
	assert_non_null(strstr(text, "      --mem-limit SIZE     memory budget (default 64M)\n"));
	assert_non_null(strstr(text, "      --lease DUR          lease length (default 1m)\n"));
	assert_non_null(strstr(text, "      --id NAME            worker id (default host:pid)\n"));
	assert_non_null(strstr(text, "      --delete-rate N      deletes per second (default none)\n"));
	assert_non_null(strstr(text, "  -h, --help               show this help\n"));
	assert_non_null(strstr(text, "\nExamples:\n  jfsops t x\n"));
	free(text);
}

static void help_wraps_long_descriptions(void **state)
{
	bool b = false;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct jo_option opts[] = {
		OPT_BOOL(0, "x", &b, "one two three four five six seven eight nine ten eleven "
				     "twelve thirteen fourteen fifteen sixteen"),
		OPT_BOOL(0, "a-very-long-option-name", &b, "short"),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { .prefix = "jfsops t", .opts = opts };

	(void)state;
	jo_opt_usage(&cmd, f);
	fclose(f);
	assert_string_equal(text, "Options:\n"
		"      --x                  one two three four five six seven eight nine ten\n"
		"                           eleven twelve thirteen fourteen fifteen sixteen\n"
		"      --a-very-long-option-name  short\n");
	free(text);
}

static void set_int_text_and_json_dump(void **state)
{
	int mode = 0, cmp = 0;
	bool b = false;
	char *text = NULL, *argv[] = { (char *)"t", (char *)"-", (char *)"--checksum", NULL };
	size_t len = 0;
	FILE *f;
	struct jo_option opts[] = {
		OPT_SET_INT(0, "size-only", &cmp, "by size", 1),
		OPT_SET_INT(0, "checksum", &cmp, "by MD5", 2),
		OPT_TEXT("  prose between the options\n"),
		OPT_GROUP(""),
		OPT_BOOL('x', "hidden-one", &b, "not shown"),
		OPT_CMDMODE(0, "plan", &mode, "plan", 1),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { .prefix = "jfsops t", .opts = opts };

	(void)state;
	opts[4].flags = JO_OPTF_HIDDEN;
	assert_int_equal(jo_opt_parse(&cmd, 3, argv), 1);
	assert_string_equal(argv[1], "-"); /* "-" alone is an argument (stdin) */
	assert_int_equal(cmp, 2);
	f = open_memstream(&text, &len);
	jo_opt_usage(&cmd, f);
	fclose(f);
	assert_string_equal(text, "Options:\n"
		"      --size-only          by size\n"
		"      --checksum           by MD5\n"
		"  prose between the options\n"
		"\n"
		"      --plan               plan\n");
	free(text);
	text = NULL;
	f = open_memstream(&text, &len);
	jo_opt_dump_json(&cmd, f);
	fclose(f);
	assert_non_null(strstr(text, "{\"long\":\"checksum\",\"type\":\"flag\",\"takes_value\":false,"
				     "\"hidden\":false,\"help\":\"by MD5\"}"));
	assert_non_null(strstr(text, "\"long\":\"hidden-one\",\"type\":\"bool\",\"takes_value\":false,"
				     "\"hidden\":true"));
	assert_non_null(strstr(text, "\"short\":\"x\""));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_long_short_and_positionals),
		cmocka_unit_test(refuses_bad_values_in_one_format),
		cmocka_unit_test(grammars),
		cmocka_unit_test(digits),
		cmocka_unit_test(help_comes_from_the_table_with_defaults),
		cmocka_unit_test(help_wraps_long_descriptions),
		cmocka_unit_test(set_int_text_and_json_dump),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
