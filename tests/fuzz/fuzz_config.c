/*
 * libFuzzer target: the config file parser (common/config.c) on any text.
 * Beyond "does not crash":
 *   - profile names are non-empty, unique and hold no space, tab, '@', '/',
 *     ']' or newline; values hold no newline or NUL; 0/1 keys parse as such;
 *   - round trip: the parsed config written back as `[profile N]` and
 *     `key = 'value'` lines parses to the same profiles, in the same order,
 *     with the same values;
 *   - jo_cfg_resolve() of each profile (no flags, no environment) gives the
 *     file's non-empty values with source "file", normalised booleans, and
 *     "0"/default for absent booleans;
 *   - a masked secret never shows the whole secret, nor more than 4 of its
 *     characters;
 *   - errors name the file and a line, and never quote a secret value.
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/config_internal.h"
#include "common/err.h"
#include "tests/fuzz/fuzz_util.h"

struct text {
	char *p;
	size_t n, cap;
};

static void add(struct text *t, const char *s)
{
	size_t l = strlen(s);

	if (t->n + l + 1 > t->cap) {
		size_t nc = (t->n + l + 1) * 2;
		char *np = realloc(t->p, nc);

		if (!np)
			abort();
		t->p = np;
		t->cap = nc;
	}
	memcpy(t->p + t->n, s, l + 1);
	t->n += l;
}

static void check_mask(const char *secret)
{
	char m[64];
	size_t shown = 0;

	jo_cfg_mask(secret, m, sizeof(m));
	for (const char *p = m; *p; p++)
		shown += *p != '*';
	FUZZ_CHECK(shown <= 4, "mask '%s' shows %zu characters", m, shown);
	if (*secret && !strchr(secret, '*'))
		FUZZ_CHECK(!strstr(m, secret), "mask '%s' shows the whole secret", m);
}

static void check_config(const struct jo_cfg *c)
{
	const char *const *names;
	size_t np = jo_cfg_profiles(c, &names);

	for (size_t i = 0; i < np; i++) {
		FUZZ_CHECK(names[i][0] && !strpbrk(names[i], " \t@/]\n"), "bad profile name '%s'",
			   names[i]);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(names[i], names[j]), "profile '%s' listed twice", names[i]);
		FUZZ_CHECK(jo_cfg_has_profile(c, names[i]), "profile '%s' not found", names[i]);
		for (int k = 0; k < JO_CFG_NKEYS; k++) {
			const char *v = jo_cfg_get(c, names[i], k);

			if (!v)
				continue;
			FUZZ_CHECK(!strchr(v, '\n'), "value with a newline");
			if (jo_cfg_key_bool(k))
				FUZZ_CHECK(jo_cfg_parse_bool(v) >= 0, "%s = '%s' accepted",
					   jo_cfg_key_name(k), v);
			if (jo_cfg_key_secret(k))
				check_mask(v);
		}
	}
}

/* The config written back, every value single-quoted. */
static char *render(const struct jo_cfg *c)
{
	const char *const *names;
	size_t np = jo_cfg_profiles(c, &names);
	struct text t = { 0 };

	add(&t, "# written back by the fuzz target\n");
	for (size_t i = 0; i < np; i++) {
		add(&t, "[profile ");
		add(&t, names[i]);
		add(&t, "]\n");
		for (int k = 0; k < JO_CFG_NKEYS; k++) {
			const char *v = jo_cfg_get(c, names[i], k);

			if (!v)
				continue;
			add(&t, jo_cfg_key_name(k));
			add(&t, " = '");
			add(&t, v);
			add(&t, "'\n");
		}
	}
	if (!t.p)
		add(&t, "");
	return t.p;
}

static void check_resolve(const struct jo_cfg *c, const char *profile)
{
	struct jo_cfg_values out;
	struct jo_err err = { 0 };
	int rc = jo_cfg_resolve(c, profile, NULL, NULL, &out, &err);

	FUZZ_CHECK(rc == 0, "resolve of a parsed profile failed: %s", err.msg);
	for (int k = 0; k < JO_CFG_NKEYS; k++) {
		const char *fv = jo_cfg_get(c, profile, k);

		if (fv && *fv) {
			FUZZ_CHECK(out.src[k] == JO_CFG_FILE && out.v[k], "%s not from the file",
				   jo_cfg_key_name(k));
			if (jo_cfg_key_bool(k))
				FUZZ_CHECK(!strcmp(out.v[k], jo_cfg_parse_bool(fv) ? "1" : "0"),
					   "%s not normalised", jo_cfg_key_name(k));
			else
				FUZZ_CHECK(!strcmp(out.v[k], fv), "%s changed", jo_cfg_key_name(k));
		} else if (jo_cfg_key_bool(k)) {
			FUZZ_CHECK(out.src[k] == JO_CFG_DEFAULT && !strcmp(out.v[k], "0"),
				   "%s has no default", jo_cfg_key_name(k));
		} else {
			FUZZ_CHECK(!out.v[k] && out.src[k] == JO_CFG_UNSET, "%s set from nowhere",
				   jo_cfg_key_name(k));
		}
	}
	jo_cfg_values_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jo_cfg *c = NULL, *c2 = NULL;
	struct jo_err err = { 0 };
	bool secret = false, secret2 = false;
	const char *const *names, *const *names2;
	size_t np, np2;
	char *text;
	int rc;

	rc = jo_cfg_parse_mem(&c, "fuzz.conf", (const char *)data, size, &secret, &err);
	if (rc) {
		FUZZ_CHECK(!c && err.code == rc, "rc %d", rc);
		FUZZ_CHECK(strstr(err.msg, "fuzz.conf") && strstr(err.msg, " line "),
			   "error without file and line: %s", err.msg);
		/* a message may quote a setting name, never a value after '=' */
		FUZZ_CHECK(!strstr(err.msg, "secret_key = ") && !strstr(err.msg, "session_token = "),
			   "error quotes a secret line: %s", err.msg);
		return 0;
	}
	check_config(c);
	text = render(c);
	rc = jo_cfg_parse_mem(&c2, "fuzz.conf", text, strlen(text), &secret2, &err);
	FUZZ_CHECK(rc == 0, "written-back config does not parse: %s\n%s", err.msg, text);
	/* a secret overridden by a later empty line still counts for the file */
	FUZZ_CHECK(secret || !secret2, "the written-back config holds a secret the input did not");
	np = jo_cfg_profiles(c, &names);
	np2 = jo_cfg_profiles(c2, &names2);
	FUZZ_CHECK(np == np2, "%zu profiles became %zu", np, np2);
	for (size_t i = 0; i < np; i++) {
		FUZZ_CHECK(!strcmp(names[i], names2[i]), "profile '%s' became '%s'", names[i],
			   names2[i]);
		for (int k = 0; k < JO_CFG_NKEYS; k++) {
			const char *a = jo_cfg_get(c, names[i], k), *b = jo_cfg_get(c2, names[i], k);

			FUZZ_CHECK((!a && !b) || (a && b && !strcmp(a, b)), "[%s] %s changed: %s",
				   names[i], jo_cfg_key_name(k), text);
		}
		check_resolve(c, names[i]);
	}
	free(text);
	jo_cfg_free(c2);
	jo_cfg_free(c);
	return 0;
}
