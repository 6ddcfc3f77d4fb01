/*
 * libFuzzer target: META-URL parsing (jo_meta_url_parse, common/meta/meta.c)
 * through its internal API only. Beyond "does not crash":
 *   - a parsed URL has an engine and a redacted form; when it has a
 *     password, the redacted form parses again to the same engine, user,
 *     host, port, database and path with the password "****", and redacting
 *     that gives the same string (idempotent);
 *   - secrets never leak: an input starting with byte 0x01 is the parts
 *     SCHEME 0x02 USER 0x02 REST of "SCHEME://USER:<marker>@REST", with a
 *     marker password no part contains (SCHEME of [a-z0-9+.-], USER without
 *     ':', '@', '?' or '/'); when the parser takes a password
 *     the marker is not in the redacted form, and no error message ever
 *     contains it, whatever the engine (refused forms included).
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "tests/fuzz/fuzz_util.h"

#define MARKER "Zq9pW0rdXm7"

static bool same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_parsed(const struct jo_meta_url *u, const char *url)
{
	struct jo_meta_url r;
	struct jo_err err = { 0 };
	int rc;

	FUZZ_CHECK(u->engine && u->engine[0], "no engine for %s", url);
	FUZZ_CHECK(u->redacted, "no redacted form for %s", url);
	if (!u->password) {
		FUZZ_CHECK(!strcmp(u->redacted, url), "redacted '%s' of a URL without password",
			   u->redacted);
		return;
	}
	FUZZ_CHECK(strstr(u->redacted, "****"), "redacted '%s' has no ****", u->redacted);
	rc = jo_meta_url_parse(&r, u->redacted, &err);
	FUZZ_CHECK(rc == 0, "redacted form '%s' does not parse: %s", u->redacted, err.msg);
	FUZZ_CHECK(same(r.engine, u->engine) && same(r.user, u->user) && same(r.host, u->host) &&
			   same(r.path, u->path) && r.port == u->port && r.db == u->db &&
			   r.tls == u->tls && r.unix_socket == u->unix_socket,
		   "redacted form '%s' parses to another target than '%s'", u->redacted, url);
	FUZZ_CHECK(r.password && !strcmp(r.password, "****"), "redacted password is not ****");
	FUZZ_CHECK(!strcmp(r.redacted, u->redacted), "redaction not idempotent: '%s' -> '%s'",
		   u->redacted, r.redacted);
	jo_meta_url_release(&r);
}

/* The three parts of a structured input, or false. */
static bool split3(const char *s, size_t n, const char **p, size_t *l)
{
	const char *a = memchr(s, 2, n), *b;

	if (!a)
		return false;
	b = memchr(a + 1, 2, n - (size_t)(a + 1 - s));
	if (!b)
		return false;
	p[0] = s;
	l[0] = (size_t)(a - s);
	p[1] = a + 1;
	l[1] = (size_t)(b - a - 1);
	p[2] = b + 1;
	l[2] = n - (size_t)(b + 1 - s);
	return true;
}

static void marker_case(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	const char *p[3];
	size_t l[3], n;
	char *url;
	struct jo_meta_url u;
	struct jo_err err = { 0 };
	int rc;

	if (memchr(s, 0, size - 1) || !split3(s, size - 1, p, l))
		return;
	/* a plain SCHEME, and USER without the characters that move the userinfo's end */
	for (size_t i = 0; i < l[0]; i++)
		if (!((p[0][i] >= 'a' && p[0][i] <= 'z') || (p[0][i] >= '0' && p[0][i] <= '9') ||
		      p[0][i] == '+' || p[0][i] == '-' || p[0][i] == '.'))
			return;
	if (memchr(p[1], ':', l[1]) || memchr(p[1], '@', l[1]) || memchr(p[1], '?', l[1]) ||
	    memchr(p[1], '/', l[1]) || memchr(p[1], 2, l[1]))
		return;
	n = l[0] + 3 + l[1] + 1 + strlen(MARKER) + 1 + l[2] + 1;
	url = malloc(n);
	if (!url)
		abort();
	snprintf(url, n, "%.*s://%.*s:%s@%.*s", (int)l[0], p[0], (int)l[1], p[1], MARKER,
		 (int)l[2], p[2]);
	/* the marker must occur once: as the password */
	if (strstr(strstr(url, MARKER) + 1, MARKER)) {
		free(url);
		return;
	}
	rc = jo_meta_url_parse(&u, url, &err);
	FUZZ_CHECK(!strstr(err.msg, MARKER), "error message shows the password: %s", err.msg);
	if (rc == 0) {
		if (u.password)
			FUZZ_CHECK(!strstr(u.redacted, MARKER), "redacted '%s' shows the password",
				   u.redacted);
		check_parsed(&u, url);
		jo_meta_url_release(&u);
	}
	free(url);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jo_meta_url u;
	struct jo_err err = { 0 };
	char *url;
	int rc;

	if (size > 0 && data[0] == 1) {
		marker_case(data, size);
		return 0;
	}
	url = fuzz_strndup(data, size);
	rc = jo_meta_url_parse(&u, url, &err);
	if (rc == 0) {
		check_parsed(&u, url);
		jo_meta_url_release(&u);
	} else {
		FUZZ_CHECK(rc == JO_EINVAL || rc == JO_EUNSUPPORTED || rc == JO_ENOMEM,
			   "rc %d for '%s'", rc, url);
		FUZZ_CHECK(err.code == rc && err.msg[0], "no error message");
		FUZZ_CHECK(!u.engine && !u.password && !u.redacted && !u.host && !u.path,
			   "a failed parse left fields behind");
	}
	free(url);
	return 0;
}
