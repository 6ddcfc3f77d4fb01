/* opt.c: the option tables of the commands (opt.h): parse, check, --help, JSON. */
#include "common/opt.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/esc.h"

#define HELP_COL 27   /* where an option's description starts */
#define HELP_WIDTH 80

/* ---- the grammars ---- */

int jo_parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -1;
	for (const char *p = s; *p; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (*p < '0' || *p > '9' || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/*
 * strtoull and strtod skip leading blanks and take a sign ("-1" is 2^64-1),
 * strtod also "inf", "nan", hex and exponents: every number goes through
 * this first, digits at the start and only there.
 * The end of the plain decimal ("12", "0.5") s starts with, or NULL when it starts with none.
 */
static const char *decimal_end(const char *s)
{
	const char *p = s;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == s)
		return NULL;
	if (*p == '.' && p[1] >= '0' && p[1] <= '9')
		for (p++; *p >= '0' && *p <= '9'; p++)
			;
	return p;
}

int jo_parse_decimal(const char *s, double *out)
{
	const char *de = s ? decimal_end(s) : NULL;

	if (!de || *de)
		return -1;
	*out = strtod(s, NULL);
	return 0;
}

int jo_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTP";
	const char *de = s ? decimal_end(s) : NULL, *p, *u;
	unsigned __int128 whole = 0, frac = 0, den = 1, mul = 1, v;

	if (!de)
		return -1;
	for (p = s; p < de && *p != '.'; p++) {
		whole = whole * 10 + (unsigned)(*p - '0');
		if (whole > UINT64_MAX)
			return -1;
	}
	if (*p == '.')
		for (p++; p < de; p++)
			if (den < 1000000000000000000ULL) { /* digits past 18 cannot matter */
				frac = frac * 10 + (unsigned)(*p - '0');
				den *= 10;
			}
	p = de;
	if (*p && (u = strchr(units, *p & ~0x20))) {
		mul = (unsigned __int128)1 << (10 * (u - units + 1));
		p++;
		if (*p == 'i' || *p == 'I')
			p++;
	}
	if (*p == 'b' || *p == 'B')
		p++;
	if (*p)
		return -1;
	v = whole * mul + frac * mul / den;
	if (v > UINT64_MAX)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int jo_parse_duration_ms(const char *s, int64_t *out)
{
	static const struct { const char *u; double ms; } units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 }, { "w", 7 * 86400000.0 }, { "y", 365 * 86400000.0 },
	};
	const char *de = s ? decimal_end(s) : NULL;
	double v;

	if (!de)
		return -1;
	v = strtod(s, NULL);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(de, units[i].u))
			continue;
		v *= units[i].ms;
		if (v >= 9.0e18) /* beyond int64_t */
			return -1;
		*out = (int64_t)v;
		return 0;
	}
	return -1;
}

void jo_fmt_duration_ms(int64_t ms, char *buf, size_t cap)
{
	static const struct { const char *u; int64_t ms; } units[] = {
		{ "d", 86400000 }, { "h", 3600000 }, { "m", 60000 }, { "s", 1000 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ms && ms % units[i].ms == 0) {
			snprintf(buf, cap, "%" PRId64 "%s", ms / units[i].ms, units[i].u);
			return;
		}
	snprintf(buf, cap, "%" PRId64 "%s", ms, ms ? "ms" : "s");
}

void jo_fmt_size(uint64_t b, char *buf, size_t cap)
{
	static const char units[] = "PTGMK";

	for (int i = 0; i < 5; i++) {
		uint64_t m = 1ULL << (10 * (5 - i));

		if (b && b % m == 0) {
			snprintf(buf, cap, "%" PRIu64 "%c", b / m, units[i]);
			return;
		}
	}
	snprintf(buf, cap, "%" PRIu64, b);
}

/* ---- messages ---- */

static void verror(const struct jo_opt_cmd *c, const char *fmt, va_list ap)
{
	char msg[2048], esc[JO_ESC_TERM_MAX(sizeof(msg))];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	/* the values quoted come from argv: escaped for the terminal */
	fprintf(stderr, "%s: %s (see '%s --help')\n", c->prefix, jo_esc_term(esc, sizeof(esc), msg),
		c->prefix);
}

int jo_opt_error(const struct jo_opt_cmd *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(c, fmt, ap);
	va_end(ap);
	return 2;
}

/* ---- storing a value ---- */

/* The largest value a target of vsize bytes holds (0: not a number, no limit). */
static uint64_t type_max(size_t vsize)
{
	return vsize == 0 || vsize >= 8 ? UINT64_MAX : (1ULL << (8 * vsize - 1)) - 1 + (1ULL << (8 * vsize - 1));
}

/* The range of o, in its own units, for "want ..." */
static void range_text(const struct jo_option *o, uint64_t hi, char *buf, size_t cap)
{
	char a[32], b[32];

	if (o->type == JO_OPT_DURATION) {
		jo_fmt_duration_ms((int64_t)o->min, a, sizeof(a));
		jo_fmt_duration_ms((int64_t)hi, b, sizeof(b));
	} else if (o->type == JO_OPT_SIZE) {
		jo_fmt_size(o->min, a, sizeof(a));
		jo_fmt_size(hi, b, sizeof(b));
	} else {
		snprintf(a, sizeof(a), "%" PRIu64, o->min);
		snprintf(b, sizeof(b), "%" PRIu64, hi);
	}
	if (o->max && o->min)
		snprintf(buf, cap, " %s..%s", a, b);
	else if (o->max)
		snprintf(buf, cap, " up to %s", b);
	else if (o->min)
		snprintf(buf, cap, " of at least %s", a);
	else
		buf[0] = 0;
}

static void store_uint(const struct jo_option *o, uint64_t v)
{
	switch (o->vsize) {
	case 1: *(uint8_t *)o->value = (uint8_t)v; break;
	case 2: *(uint16_t *)o->value = (uint16_t)v; break;
	case 4: *(uint32_t *)o->value = (uint32_t)v; break;
	default: *(uint64_t *)o->value = v; break;
	}
}

static uint64_t load_uint(const struct jo_option *o)
{
	switch (o->vsize) {
	case 1: return *(uint8_t *)o->value;
	case 2: return *(uint16_t *)o->value;
	case 4: return *(uint32_t *)o->value;
	default: return *(uint64_t *)o->value;
	}
}

/* Take arg for o: 0, or -1 with what a good value is in want. */
static int take_value(const struct jo_option *o, const char *arg, char *want, size_t cap)
{
	uint64_t hi = o->max ? o->max : type_max(o->vsize);
	char range[80];
	uint64_t u;
	int64_t ms;
	double d;

	if (o->type == JO_OPT_DURATION && !o->max) /* a signed target */
		hi = INT64_MAX;
	range_text(o, hi, range, sizeof(range));
	switch (o->type) {
	case JO_OPT_UINT:
		if (jo_parse_uint(arg, o->min, hi, &u))
			break;
		store_uint(o, u);
		return 0;
	case JO_OPT_SIZE:
		if (jo_parse_size(arg, &u) || u < o->min || u > hi)
			break;
		store_uint(o, u);
		return 0;
	case JO_OPT_DURATION:
		if (jo_parse_duration_ms(arg, &ms) || (uint64_t)ms < o->min || (uint64_t)ms > hi)
			break;
		ms /= o->defval;
		if (o->vsize == 4)
			*(int32_t *)o->value = (int32_t)ms;
		else
			*(int64_t *)o->value = ms;
		return 0;
	case JO_OPT_DECIMAL:
		if (jo_parse_decimal(arg, &d) || (o->min && d <= 0))
			break;
		*(double *)o->value = d;
		return 0;
	case JO_OPT_STRING:
		*(const char **)o->value = arg;
		return 0;
	case JO_OPT_CALLBACK:
		return o->cb(o, arg, want, cap);
	default:
		return 0;
	}
	switch (o->type) {
	case JO_OPT_UINT:
		snprintf(want, cap, "want an integer%s", range);
		break;
	case JO_OPT_SIZE:
		snprintf(want, cap, "want a size (4096, 64M, 1.5GiB)%s", range);
		break;
	case JO_OPT_DURATION:
		snprintf(want, cap, "want a duration (90s, 1.5h, 2d, 500ms)%s", range);
		break;
	default:
		snprintf(want, cap, "want a number%s", o->min ? " > 0" : "");
		break;
	}
	return -1;
}

static bool takes_value(const struct jo_option *o)
{
	switch (o->type) {
	case JO_OPT_UINT: case JO_OPT_SIZE: case JO_OPT_DURATION: case JO_OPT_DECIMAL:
	case JO_OPT_STRING:
		return true;
	case JO_OPT_CALLBACK:
		return !(o->flags & JO_OPTF_NOARG);
	default:
		return false;
	}
}

/* ---- parsing ---- */

struct state {
	const struct jo_opt_cmd *c;
	const struct jo_option *mode; /* the command mode given, if any */
	int argc, i;
	char **argv;
};

static const struct jo_option *find_long(const struct jo_opt_cmd *c, const char *name, size_t n,
					 bool *ambiguous)
{
	const struct jo_option *hit = NULL;
	int hits = 0;

	*ambiguous = false;
	for (const struct jo_option *o = c->opts; o->type != JO_OPT_END; o++) {
		if (!o->long_name || strncmp(o->long_name, name, n))
			continue;
		if (!o->long_name[n])
			return o; /* exact */
		hit = o;
		hits++;
	}
	*ambiguous = hits > 1;
	return hits == 1 ? hit : NULL;
}

static const struct jo_option *find_short(const struct jo_opt_cmd *c, int ch)
{
	for (const struct jo_option *o = c->opts; o->type != JO_OPT_END; o++)
		if (o->short_name == ch)
			return o;
	return NULL;
}

/* "--name" or "-n" for messages */
static const char *name_of(const struct jo_option *o, char *buf, size_t cap)
{
	if (o->long_name)
		snprintf(buf, cap, "--%s", o->long_name);
	else
		snprintf(buf, cap, "-%c", o->short_name);
	return buf;
}

/* Act on o with arg (NULL when it takes none): 0, 1 when help was shown, or -1. */
static int apply(struct state *st, const struct jo_option *o, const char *arg)
{
	char want[256], nb[64];

	switch (o->type) {
	case JO_OPT_HELP:
		jo_opt_usage(st->c, stdout);
		return 1;
	case JO_OPT_BOOL:
		*(bool *)o->value = true;
		return 0;
	case JO_OPT_SET_INT:
		*(int *)o->value = (int)o->defval;
		return 0;
	case JO_OPT_CMDMODE:
		if (st->mode && st->mode->defval != o->defval) {
			char nb2[64];

			jo_opt_error(st->c, "%s and %s exclude each other", name_of(st->mode, nb2,
				     sizeof(nb2)), name_of(o, nb, sizeof(nb)));
			return -1;
		}
		st->mode = o;
		*(int *)o->value = (int)o->defval;
		return 0;
	default:
		break;
	}
	want[0] = 0;
	if (take_value(o, arg, want, sizeof(want))) {
		jo_opt_error(st->c, "bad %s '%s'%s%s", name_of(o, nb, sizeof(nb)), arg ? arg : "",
			     want[0] ? ": " : "", want);
		return -1;
	}
	return 0;
}

/* The value of o given as -xV / --x=V (inline) or in the next word. */
static int value_of(struct state *st, const struct jo_option *o, const char *inl,
		    const char **arg)
{
	char nb[64];

	if (inl) {
		*arg = inl;
		return 0;
	}
	if (st->i + 1 >= st->argc) {
		jo_opt_error(st->c, "%s needs a value (%s)", name_of(o, nb, sizeof(nb)),
			     o->argh ? o->argh : "VALUE");
		return -1;
	}
	*arg = st->argv[++st->i];
	return 0;
}

static int parse_long(struct state *st, const char *word)
{
	const char *name = word + 2, *eq = strchr(name, '=');
	size_t n = eq ? (size_t)(eq - name) : strlen(name);
	const struct jo_option *o;
	const char *arg = NULL;
	bool amb;

	if (!strcmp(name, "options-json")) {
		jo_opt_dump_json(st->c, stdout);
		return 1;
	}
	o = find_long(st->c, name, n, &amb);
	if (!o) {
		jo_opt_error(st->c, amb ? "ambiguous option '%s'" : "unknown option '%s'", word);
		return -1;
	}
	if (takes_value(o)) {
		if (value_of(st, o, eq ? eq + 1 : NULL, &arg))
			return -1;
	} else if (eq) {
		jo_opt_error(st->c, "--%s takes no value ('%s')", o->long_name, word);
		return -1;
	}
	return apply(st, o, arg);
}

static int parse_short(struct state *st, const char *word)
{
	for (const char *p = word + 1; *p; p++) {
		const struct jo_option *o = find_short(st->c, (unsigned char)*p);
		const char *arg = NULL;
		int rc;

		if (!o) {
			jo_opt_error(st->c, "unknown option '-%c'", *p);
			return -1;
		}
		if (takes_value(o)) {
			if (value_of(st, o, p[1] ? p + 1 : NULL, &arg))
				return -1;
			return apply(st, o, arg);
		}
		rc = apply(st, o, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

int jo_opt_parse(const struct jo_opt_cmd *c, int argc, char **argv)
{
	struct state st = { .c = c, .argc = argc, .argv = argv };
	int npos = 0, rc = 0;
	bool dashdash = false;

	for (st.i = 1; st.i < argc; st.i++) {
		char *w = argv[st.i];

		if (dashdash || w[0] != '-' || !w[1]) {
			argv[1 + npos++] = w; /* never ahead of st.i */
			continue;
		}
		if (!strcmp(w, "--")) {
			dashdash = true;
			continue;
		}
		rc = w[1] == '-' ? parse_long(&st, w) : parse_short(&st, w);
		if (rc)
			return rc > 0 ? JO_OPT_SHOWN : JO_OPT_REFUSED;
	}
	if (npos + 1 < argc)
		argv[npos + 1] = NULL;
	return npos;
}

/* ---- --help ---- */

/* The default o's variable holds now, as --help shows it; "" for none. */
static void default_text(const struct jo_option *o, char *buf, size_t cap)
{
	const char *s;
	double d;

	buf[0] = 0;
	switch (o->type) {
	case JO_OPT_UINT:
		snprintf(buf, cap, "%" PRIu64, load_uint(o));
		break;
	case JO_OPT_SIZE:
		jo_fmt_size(load_uint(o), buf, cap);
		break;
	case JO_OPT_DURATION: {
		int64_t v = o->vsize == 4 ? *(int32_t *)o->value : *(int64_t *)o->value;

		if (v > 0)
			jo_fmt_duration_ms(v * o->defval, buf, cap);
		else
			snprintf(buf, cap, "none");
		break;
	}
	case JO_OPT_DECIMAL:
		d = *(double *)o->value;
		if (d > 0)
			snprintf(buf, cap, "%g", d);
		else
			snprintf(buf, cap, "none");
		break;
	case JO_OPT_STRING:
		s = *(const char **)o->value;
		snprintf(buf, cap, "%s", s ? s : "none");
		break;
	default:
		break;
	}
}

/* text wrapped at HELP_WIDTH, from column col; lines after the first indented by ind */
static void put_wrapped(FILE *f, const char *text, int col, int ind)
{
	const char *p = text;

	for (;;) {
		size_t room = (size_t)(HELP_WIDTH - col), len = strcspn(p, "\n"), cut = len;

		if (len > room) {
			for (cut = room; cut > 0 && p[cut] != ' '; cut--)
				;
			if (!cut) /* one long word: let it run */
				for (cut = room; cut < len && p[cut] != ' '; cut++)
					;
		}
		fprintf(f, "%.*s\n", (int)cut, p);
		p += cut;
		if (*p == ' ' || *p == '\n')
			p++;
		if (!*p)
			return;
		fprintf(f, "%*s", ind, "");
		col = ind;
	}
}

/* whether text has word (lower case) in any case */
static bool has_word(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; *p; p++)
		if (!strncasecmp(p, word, n))
			return true;
	return false;
}

void jo_opt_usage(const struct jo_opt_cmd *c, FILE *f)
{
	bool headed = false;

	if (c->usage)
		fputs(c->usage, f);
	for (const struct jo_option *o = c->opts; o->type != JO_OPT_END; o++) {
		char flag[128], def[64], help[2048];
		int n;

		if (o->flags & JO_OPTF_HIDDEN)
			continue;
		if (o->type == JO_OPT_TEXT) {
			fputs(o->help, f);
			continue;
		}
		if (o->type == JO_OPT_GROUP) { /* "": a blank line only */
			fprintf(f, "%s%s%s", headed ? "\n" : "", o->help, *o->help ? "\n" : "");
			headed = true;
			continue;
		}
		if (!headed) {
			fputs("Options:\n", f);
			headed = true;
		}
		n = snprintf(flag, sizeof(flag), "  %c%c%c --%s%s%s",
			     o->short_name ? '-' : ' ', o->short_name ? o->short_name : ' ',
			     o->short_name && o->long_name ? ',' : ' ', o->long_name ? o->long_name : "",
			     o->argh ? " " : "", o->argh ? o->argh : "");
		fputs(flag, f);
		if (n + 2 > HELP_COL) {
			fputs("  ", f);
			n += 2;
		} else {
			fprintf(f, "%*s", HELP_COL - n, "");
			n = HELP_COL;
		}
		def[0] = 0;
		if (takes_value(o) && !(o->flags & JO_OPTF_NODEF) && !has_word(o->help, "default") &&
		    !has_word(o->help, "required"))
			default_text(o, def, sizeof(def));
		if (def[0])
			snprintf(help, sizeof(help), "%s (default %s)", o->help, def);
		else
			snprintf(help, sizeof(help), "%s", o->help);
		put_wrapped(f, help, n, HELP_COL);
	}
	if (c->trailer)
		fputs(c->trailer, f);
}

static const char *type_name(enum jo_opt_type t)
{
	static const char *const names[] = {
		[JO_OPT_HELP] = "help", [JO_OPT_BOOL] = "bool", [JO_OPT_SET_INT] = "flag",
		[JO_OPT_CMDMODE] = "cmdmode", [JO_OPT_UINT] = "uint", [JO_OPT_SIZE] = "size",
		[JO_OPT_DURATION] = "duration", [JO_OPT_DECIMAL] = "decimal",
		[JO_OPT_STRING] = "string", [JO_OPT_CALLBACK] = "callback",
	};

	return t < sizeof(names) / sizeof(names[0]) && names[t] ? names[t] : "other";
}

void jo_opt_dump_json(const struct jo_opt_cmd *c, FILE *f)
{
	json_t *arr = json_array(), *top;

	for (const struct jo_option *o = c->opts; o->type != JO_OPT_END; o++) {
		json_t *e;
		char def[64];

		if (!o->long_name)
			continue;
		default_text(o, def, sizeof(def));
		e = json_pack("{sssssbsbss*ss*}", "long", o->long_name, "type", type_name(o->type),
			      "takes_value", takes_value(o), "hidden", !!(o->flags & JO_OPTF_HIDDEN),
			      "argh", o->argh, "help", o->help);
		if (!e)
			continue;
		if (o->short_name) {
			char s[2] = { (char)o->short_name, 0 };

			json_object_set_new(e, "short", json_string(s));
		}
		if (def[0])
			json_object_set_new(e, "default", json_string(def));
		json_array_append_new(arr, e);
	}
	top = json_pack("{ssso}", "command", c->prefix, "options", arr);
	if (top) {
		json_dumpf(top, f, JSON_COMPACT);
		fputc('\n', f);
	}
	json_decref(top);
}

void jo_opt_rows(struct jo_opt_table *t, const struct jo_option *rows, size_t n)
{
	if (n > sizeof(t->row) / sizeof(t->row[0]) - t->n)
		abort();
	memcpy(t->row + t->n, rows, n * sizeof(*rows));
	t->n += n;
}

void jo_opt_rows_end(struct jo_opt_table *t)
{
	const struct jo_option end[] = { OPT_END() };

	JO_OPT_ROWS(t, end);
}
