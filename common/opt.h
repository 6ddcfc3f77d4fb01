/*
 * opt.h: command-line options from one declarative table per command, in the
 * spirit of git's parse-options. Each flag is written once: its names, where
 * its value goes, its kind of value and its help line. jo_opt_parse() parses
 * (long and short flags, --x=v and --x v, -xv, unambiguous long prefixes,
 * options after arguments, "--" ends them), checks every value with the one
 * grammar of its kind, prints --help from the table (with each value's
 * default) and, for the tools, dumps the table as JSON (--options-json).
 *
 * Every refused value gets the same line on stderr and exit 2:
 *   PREFIX: bad --NAME 'VALUE': want WHAT (see 'PREFIX --help')
 * (a callback says why in its own words after the colon).
 *
 * The grammars (also used directly, e.g. for config values):
 *   unsigned integer  decimal digits only: no sign, blank, "0x", exponent
 *   size              a decimal (1.5, 4096) and an optional unit K M G T P
 *                     (powers of 1024), optionally followed by i and/or B:
 *                     64M, 1.5GiB, 4KiB, 10G, 512B
 *   duration          a decimal and an optional unit ms s m h d w y (none =
 *                     seconds): 90s, 1.5h, 2d, 500ms, 30
 *   decimal           digits with at most one '.' followed by digits: 12, 0.5
 */
#ifndef JO_OPT_H
#define JO_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum jo_opt_type {
	JO_OPT_END = 0,
	JO_OPT_GROUP,     /* a heading in --help ("Storage:"); "": a blank line */
	JO_OPT_TEXT,      /* prose printed as it is, between the options of --help */
	JO_OPT_HELP,      /* -h, --help */
	JO_OPT_BOOL,      /* bool: set to true */
	JO_OPT_SET_INT,   /* int: set to defval (several flags, one variable) */
	JO_OPT_CMDMODE,   /* int: set to defval; two different modes are refused */
	JO_OPT_UINT,      /* unsigned integer of vsize bytes, min..max */
	JO_OPT_SIZE,      /* bytes, unsigned, vsize bytes, min..max */
	JO_OPT_DURATION,  /* int64_t, in units of defval ms (1: ms, 1000: s), min..max ms */
	JO_OPT_DECIMAL,   /* double, > 0 when min is 1, >= 0 otherwise */
	JO_OPT_STRING,    /* const char *: the argument itself (argv is not copied) */
	JO_OPT_CALLBACK,  /* cb(opt, arg): arg is NULL for a flag without a value */
};

enum jo_opt_flags {
	JO_OPTF_HIDDEN = 1 << 0,  /* not in --help */
	JO_OPTF_NOARG = 1 << 1,   /* a callback that takes no value */
	JO_OPTF_NODEF = 1 << 2,   /* --help adds no "(default ...)" */
};

struct jo_option;
/*
 * An OPT_CALLBACK's parser: 0 when arg is taken; otherwise -1 and, in want
 * (cap want_cap), why it is refused ("want jsonl, csv, ranges or juicefs"),
 * which jo_opt_parse() prints in the one message format.
 */
typedef int (*jo_opt_cb)(const struct jo_option *opt, const char *arg, char *want,
			 size_t want_cap);

struct jo_option {
	enum jo_opt_type type;
	int short_name;        /* 'q', or 0 */
	const char *long_name; /* "quiet", or NULL (a group's heading is in help) */
	void *value;
	size_t vsize;          /* sizeof(*value) for the numbers */
	const char *argh;      /* the value's name in --help ("N", "DUR") */
	const char *help;
	uint64_t min, max;     /* a number's range (max 0: the type's) */
	int64_t defval;        /* SET_INT, CMDMODE: the value; DURATION: the unit in ms */
	jo_opt_cb cb;
	unsigned flags;
};

#define OPT_END() { .type = JO_OPT_END }
#define OPT_GROUP(h) { .type = JO_OPT_GROUP, .help = (h) }
#define OPT_TEXT(t) { .type = JO_OPT_TEXT, .help = (t) }
#define OPT_HELP() { .type = JO_OPT_HELP, .short_name = 'h', .long_name = "help", \
		     .help = "show this help" }
#define OPT_BOOL(s, l, v, h) { .type = JO_OPT_BOOL, .short_name = (s), .long_name = (l), \
			       .value = (v) + 0 * sizeof(*(v) = true), .help = (h) }
#define OPT_SET_INT(s, l, v, h, i) { .type = JO_OPT_SET_INT, .short_name = (s), \
				     .long_name = (l), .value = (v) + 0 * sizeof(*(v) = 1), \
				     .help = (h), .defval = (i) }
#define OPT_CMDMODE(s, l, v, h, i) { .type = JO_OPT_CMDMODE, .short_name = (s), \
				     .long_name = (l), .value = (v) + 0 * sizeof(*(v) = 1), \
				     .help = (h), .defval = (i) }
#define OPT_UINT(s, l, v, a, h, lo, hi) { .type = JO_OPT_UINT, .short_name = (s), \
					  .long_name = (l), .value = (v), .vsize = sizeof(*(v)), \
					  .argh = (a), .help = (h), .min = (lo), .max = (hi) }
#define OPT_SIZE(s, l, v, a, h, lo, hi) { .type = JO_OPT_SIZE, .short_name = (s), \
					  .long_name = (l), .value = (v), .vsize = sizeof(*(v)), \
					  .argh = (a), .help = (h), .min = (lo), .max = (hi) }
/* a duration kept in ms; OPT_DURATION_S keeps it in whole seconds */
#define OPT_DURATION(s, l, v, a, h, lo, hi) { .type = JO_OPT_DURATION, .short_name = (s), \
	.long_name = (l), .value = (v) + 0 * sizeof(*(v) = (int64_t)0), .vsize = sizeof(*(v)), \
	.argh = (a), .help = (h), .min = (lo), .max = (hi), .defval = 1 }
#define OPT_DURATION_S(s, l, v, a, h, lo, hi) { .type = JO_OPT_DURATION, .short_name = (s), \
	.long_name = (l), .value = (v) + 0 * sizeof(*(v) = (int64_t)0), .vsize = sizeof(*(v)), \
	.argh = (a), .help = (h), .min = (lo), .max = (hi), .defval = 1000 }
/* min 1: the number must be > 0 */
#define OPT_DECIMAL(s, l, v, a, h, positive) { .type = JO_OPT_DECIMAL, .short_name = (s), \
	.long_name = (l), .value = (v) + 0 * sizeof(*(v) = 0.5), .argh = (a), .help = (h), \
	.min = (positive) }
#define OPT_STRING(s, l, v, a, h) { .type = JO_OPT_STRING, .short_name = (s), .long_name = (l), \
				    .value = (v) + 0 * sizeof(*(v) = ""), .argh = (a), .help = (h) }
#define OPT_CALLBACK(s, l, v, a, h, f) { .type = JO_OPT_CALLBACK, .short_name = (s), \
					 .long_name = (l), .value = (v), .argh = (a), .help = (h), \
					 .cb = (f), .flags = (a) ? 0 : JO_OPTF_NOARG }

/* One command's options and the prose of its --help. */
struct jo_opt_cmd {
	const char *prefix;       /* "jfsops gc": starts each error line */
	const char *usage;        /* before the options: usage line(s), what it does */
	const char *trailer;      /* after the options: notes, exit codes, examples */
	const struct jo_option *opts;
};

enum {
	JO_OPT_SHOWN = -1,     /* --help (or --options-json) was printed: exit 0 */
	JO_OPT_REFUSED = -2,   /* a usage error was printed: exit 2 */
};

/*
 * A table built from parts, for a command whose options come in groups
 * written one function each: JO_OPT_ROWS appends a part's rows in order,
 * OPT_END is appended by jo_opt_rows_end. Too many rows is a bug: abort.
 */
struct jo_opt_table {
	struct jo_option row[160];
	size_t n;
};
void jo_opt_rows(struct jo_opt_table *t, const struct jo_option *rows, size_t n);
#define JO_OPT_ROWS(t, rows) jo_opt_rows((t), (rows), sizeof(rows) / sizeof((rows)[0]))
void jo_opt_rows_end(struct jo_opt_table *t);

/*
 * Parse argv[1..argc): the options go where the table says, the other
 * arguments are moved to argv[1..n] in their order and n is returned.
 * Or JO_OPT_SHOWN / JO_OPT_REFUSED (the line printed, see above). The
 * hidden flag --options-json prints the table as JSON on stdout.
 */
int jo_opt_parse(const struct jo_opt_cmd *c, int argc, char **argv);
/* The usage error line of c (fmt as printf): returns 2, the usage exit code. */
int jo_opt_error(const struct jo_opt_cmd *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* c's --help: usage, the options from the table with their defaults, trailer. */
void jo_opt_usage(const struct jo_opt_cmd *c, FILE *f);
/* c's table as one JSON object on f (for completions, man pages and tests). */
void jo_opt_dump_json(const struct jo_opt_cmd *c, FILE *f);

/* The grammars; each 0, or -1 with *out untouched. */
int jo_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* n bytes of decimal digits (1 to 20 of them: no sign, no blank), not NUL-terminated */
static inline int jo_parse_digits(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}
int jo_parse_size(const char *s, uint64_t *out);
int jo_parse_duration_ms(const char *s, int64_t *out);
int jo_parse_decimal(const char *s, double *out);
/* A duration in ms the way the grammar writes it: "90s", "1.5h", "500ms". */
void jo_fmt_duration_ms(int64_t ms, char *buf, size_t cap);
/* A size the way the grammar writes it, exact: "64M", "1536", "4K". */
void jo_fmt_size(uint64_t b, char *buf, size_t cap);

#endif
