/*
 * proctitle.c: secrets of the command line hidden from ps.
 *
 * /proc/PID/cmdline is readable by every user and shows the bytes of the
 * process's own argv area. Writing stars over a secret in place keeps its
 * length (ps shows "redis://:***********@h": 11 characters), and so would
 * "****" followed by NULs (each NUL is one more empty argument). Instead the
 * commands get a copy of argv on the heap, and the original area is
 * rewritten as one line, the arguments joined by spaces with every secret
 * "****", then a NUL. Its last byte is not a NUL unless the line fills it:
 * the kernel then takes the area for a title set by the process
 * (setproctitle) and shows it up to that first NUL, so nothing after it, and
 * nothing of the secret's length, is visible. ps shows the same line as it
 * would for the arguments themselves.
 */
#define _GNU_SOURCE /* program_invocation_name */
#include "cmd/proctitle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MASK "****"

/* The long options whose value is a secret (common/opt.c also takes a unique prefix). */
static const char *const secret_opts[] = { "secret-key", "src-secret-key", "dst-secret-key" };

/* "--NAME" or "--NAME=..." (n: NAME's length) names a secret option, or a prefix of one. */
static bool secret_opt(const char *name, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < sizeof(secret_opts) / sizeof(secret_opts[0]); i++)
		if (n <= strlen(secret_opts[i]) && !strncmp(name, secret_opts[i], n))
			return true;
	return false;
}

/* A query key that names a secret: ...password..., ...secret..., ...token... */
static bool secret_key(const char *k, size_t n)
{
	static const char *const words[] = { "password", "secret", "token" };

	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t wl = strlen(words[w]);

		for (size_t i = 0; i + wl <= n; i++)
			if (!strncasecmp(k + i, words[w], wl))
				return true;
	}
	return false;
}

struct sbuf {
	char *b;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct sbuf *s, const char *p, size_t n)
{
	if (s->oom)
		return;
	if (s->n + n + 1 > s->cap) {
		size_t nc = (s->n + n + 1) * 2;
		char *nb = realloc(s->b, nc);

		if (!nb) {
			s->oom = true;
			return;
		}
		s->b = nb;
		s->cap = nc;
	}
	memcpy(s->b + s->n, p, n);
	s->n += n;
	s->b[s->n] = '\0';
}

/*
 * A URL's secrets masked: the password of "scheme://user:PASSWORD@host" (up
 * to the last '@', as the meta URL parser reads it) and the value of a query
 * parameter whose name says it is a secret. Appends to s; false when the
 * argument holds no secret (nothing appended).
 */
static bool mask_url(struct sbuf *s, const char *arg)
{
	const char *p = strstr(arg, "://"), *at, *colon, *q, *r;
	size_t n0 = s->n;
	bool any = false;

	if (!p)
		return false;
	p += 3;
	at = strrchr(p, '@');
	colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
	if (colon && colon + 1 < at) {
		sb_add(s, arg, (size_t)(colon + 1 - arg));
		sb_add(s, MASK, strlen(MASK));
		r = at;
		any = true;
	} else {
		r = arg;
	}
	q = strchr(at ? at : p, '?');
	while (q) {
		const char *k = q + 1, *eq, *amp = strchr(k, '&');
		size_t kl = amp ? (size_t)(amp - k) : strlen(k);

		eq = memchr(k, '=', kl);
		if (eq && eq + 1 < k + kl && secret_key(k, (size_t)(eq - k))) {
			sb_add(s, r, (size_t)(eq + 1 - r));
			sb_add(s, MASK, strlen(MASK));
			r = k + kl;
			any = true;
		}
		q = amp;
	}
	if (!any) {
		s->n = n0;
		return false;
	}
	sb_add(s, r, strlen(r));
	return true;
}

/* The line ps is to show, or NULL when no argument holds a secret (or no memory). */
static char *masked_line(int argc, char **argv)
{
	struct sbuf s = { 0 };
	bool any = false, value_next = false;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (i)
			sb_add(&s, " ", 1);
		if (value_next) {
			sb_add(&s, MASK, strlen(MASK));
			value_next = false;
			any = true;
			continue;
		}
		if (a[0] == '-' && a[1] == '-' && a[2]) {
			const char *eq = strchr(a, '=');
			size_t nl = eq ? (size_t)(eq - a - 2) : strlen(a + 2);

			if (secret_opt(a + 2, nl)) {
				if (!eq) {
					value_next = true;
					sb_add(&s, a, strlen(a));
				} else {
					sb_add(&s, a, (size_t)(eq + 1 - a));
					sb_add(&s, MASK, strlen(MASK));
					any = true;
				}
				continue;
			}
		}
		if (mask_url(&s, a))
			any = true;
		else
			sb_add(&s, a, strlen(a));
	}
	if (!any || s.oom) {
		free(s.b);
		return NULL;
	}
	return s.b;
}

/* The arguments' copy: the process's argv from here on, held for its whole
 * life (a static the compiler keeps: a leak checker sees it reachable after
 * main). */
static char **volatile args_copy;

char **cmd_hide_secrets(int argc, char **argv)
{
	char *line, **copy, *start, *end;
	size_t len, area;

	if (argc < 1)
		return argv;
	/* the kernel's area runs from argv[0]'s first byte to argv[argc-1]'s NUL */
	for (int i = 0; i + 1 < argc; i++)
		if (argv[i] + strlen(argv[i]) + 1 != argv[i + 1])
			return argv; /* not laid out as exec() does: the commands scrub in place */
	line = masked_line(argc, argv);
	if (!line)
		return argv;
	/* argv's copy, then the same pointers again: a command may move or drop
	 * entries of its argv (option parsing), the second half keeps every
	 * string reachable */
	copy = calloc(2 * ((size_t)argc + 1), sizeof(*copy));
	for (int i = 0; copy && i < argc; i++) {
		copy[i] = strdup(argv[i]);
		if (!copy[i]) {
			while (i--)
				free(copy[i]);
			free(copy);
			copy = NULL;
		}
	}
	if (!copy) {
		free(line);
		return argv;
	}
	memcpy(copy + argc + 1, copy, ((size_t)argc + 1) * sizeof(*copy));
	start = argv[0];
	end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
	area = (size_t)(end - start);
	len = strlen(line);
	if (len > area - 1)
		len = area - 1; /* secrets shorter than the mask: the line's tail is cut */
	memcpy(start, line, len);
	start[len] = '\0';
	/* no NULs after it (the kernel would show them): a last byte not NUL says "a title" */
	if (len + 1 < area)
		memset(start + len + 1, ' ', area - len - 1);
	free(line);
	/* glibc's own messages (assert) name the program through the old argv[0] */
	program_invocation_name = copy[0];
	program_invocation_short_name = strrchr(copy[0], '/') ? strrchr(copy[0], '/') + 1 : copy[0];
	args_copy = copy;
	return copy;
}
