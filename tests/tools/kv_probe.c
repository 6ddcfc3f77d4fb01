/*
 * kv_probe: drive a key-value transport (common/meta/tkv/kv.h) from a
 * script on stdin, for tests/integration/kv_etcd.sh. One command a line;
 * every result is one line on stdout ("ERR <ECODE> <message>" on failure;
 * the script goes on):
 *
 *   connect URL            "connect ok"                 (a new connection)
 *   version                "version etcd 3.4.23"
 *   begin                  "begin ok"                   (a new transaction)
 *   get K                  "get K = V" | "get K absent"
 *   scan S E LIMIT [keys]  "scan K = V" per key, then "scan n=N"; E "-": no end
 *   put K V | del K | delrange S E                      "put ok", ...
 *   getn P N [FROM]        gets P<FROM>..P<FROM+N-1> (5 digits): "getn ok"
 *   putn P N V [FROM]      puts them = V: "putn ok"
 *   commit                 "commit ok"
 *   abort                  "abort ok"
 *   snap S E keys|values [REV] [AT CMD...]
 *                          a snapshot scan (REV 0: the newest; "-": 0); after
 *                          the AT-th key the callback runs CMD (sh -c) and
 *                          waits for it: "snap K = V" per key, then
 *                          "snap n=N rev=R" or ERR and "snap partial n=N"
 *   sh CMD...              run CMD (sh -c), "sh rc=N"
 *
 * Keys and values are words with \xHH escapes; a value "rep:N:C" is N
 * bytes C. Output escapes bytes outside printable ASCII as \xHH.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/tkv/kv.h"
#include "common/meta/meta_internal.h"
#include "common/pct.h"

static const struct jo_kv_transport *kv = &jo_kv_etcd;
static struct jo_kvc *conn;
static struct jo_kvt *txn;

struct bytes {
	uint8_t *p;
	size_t n;
};

static struct bytes word(const char *w)
{
	struct bytes b = { 0 };
	size_t n = strlen(w);

	if (strncmp(w, "rep:", 4) == 0) {
		char *e;
		unsigned long long cnt = strtoull(w + 4, &e, 10);

		if (*e == ':' && e[1]) {
			b.p = malloc(cnt ? cnt : 1);
			memset(b.p, e[1], cnt);
			b.n = cnt;
			return b;
		}
	}
	b.p = malloc(n + 1);
	for (size_t i = 0; i < n; i++) {
		if (w[i] == '\\' && w[i + 1] == 'x' && jo_hexval(w[i + 2]) >= 0 && jo_hexval(w[i + 3]) >= 0) {
			b.p[b.n++] = (uint8_t)(jo_hexval(w[i + 2]) * 16 + jo_hexval(w[i + 3]));
			i += 3;
		} else {
			b.p[b.n++] = (uint8_t)w[i];
		}
	}
	return b;
}

static void show(const uint8_t *p, size_t n)
{
	if (n > 200) { /* long values: their length and first bytes */
		printf("<%zu bytes>", n);
		n = 16;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i] > 0x20 && p[i] < 0x7f && p[i] != '\\')
			putchar(p[i]);
		else
			printf("\\x%02x", p[i]);
	}
}

static void fail(const struct jo_err *err, int rc)
{
	printf("ERR %s %s\n", jo_err_name(rc), err->msg);
}

/* The answer to a command: its error, or "WHAT ok". */
static void answer(int rc, const struct jo_err *err, const char *what)
{
	if (rc)
		fail(err, rc);
	else
		printf("%s ok\n", what);
}

struct scan_pl {
	const char *tag;
	size_t n;
	size_t at;        /* run cmd after this many keys (0: never) */
	const char *cmd;
};

static int on_key(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, void *payload)
{
	struct scan_pl *pl = payload;

	printf("%s ", pl->tag);
	show(k, kl);
	if (v) {
		printf(" = ");
		show(v, vl);
	}
	printf("\n");
	pl->n++;
	if (pl->at && pl->n == pl->at && pl->cmd) {
		int rc;

		fflush(stdout);
		rc = system(pl->cmd);
		printf("%s hook rc=%d\n", pl->tag, rc);
	}
	return 0;
}

static int need_txn(void)
{
	if (!txn) {
		printf("ERR EINVAL no transaction (begin first)\n");
		return -1;
	}
	return 0;
}

static void do_connect(const char *url)
{
	struct jo_meta_url u;
	struct jo_err err = { 0 };
	int rc;

	kv->abort(txn);
	txn = NULL;
	kv->disconnect(conn);
	conn = NULL;
	if ((rc = jo_meta_url_parse(&u, url, &err)) != 0) {
		fail(&err, rc);
		return;
	}
	rc = kv->connect(&conn, &u, &err);
	jo_meta_url_release(&u);
	answer(rc, &err, "connect");
}

/* prefix + i in 5 digits into buf; its length */
static size_t key_n(uint8_t *buf, size_t cap, const struct bytes *prefix, long i)
{
	size_t n = prefix->n < cap - 32 ? prefix->n : cap - 32;

	memcpy(buf, prefix->p, n);
	return n + (size_t)snprintf((char *)buf + n, 32, "%05ld", i);
}

static void run(char *line)
{
	char *argv[16], *rest = NULL, *save = NULL;
	int argc = 0;
	struct jo_err err = { 0 };
	int rc = 0;

	line[strcspn(line, "\n")] = '\0';
	for (char *tok = strtok_r(line, " ", &save); tok && argc < 16;
	     tok = strtok_r(NULL, " ", &save)) {
		argv[argc++] = tok;
		if ((argc == 1 && strcmp(tok, "sh") == 0) ||
		    (argc == 6 && strcmp(argv[0], "snap") == 0)) {
			rest = save; /* the rest of the line is a shell command */
			break;
		}
	}
	if (argc == 0 || argv[0][0] == '#')
		return;
	if (strcmp(argv[0], "connect") == 0 && argc == 2) {
		do_connect(argv[1]);
	} else if (strcmp(argv[0], "sh") == 0) {
		fflush(stdout);
		rc = system(rest ? rest : "true");
		printf("sh rc=%d\n", rc);
	} else if (!conn) {
		printf("ERR EINVAL not connected\n");
	} else if (strcmp(argv[0], "version") == 0) {
		char *v = NULL;

		if ((rc = kv->version(conn, &v, &err)) != 0)
			fail(&err, rc);
		else
			printf("version %s\n", v);
		free(v);
	} else if (strcmp(argv[0], "begin") == 0) {
		kv->abort(txn);
		txn = NULL;
		answer(kv->begin(conn, &txn, &err), &err, "begin");
	} else if (strcmp(argv[0], "get") == 0 && argc == 2) {
		struct bytes k = word(argv[1]);
		uint8_t *v = NULL;
		size_t vl = 0;

		if (need_txn() == 0) {
			if ((rc = kv->get(txn, k.p, k.n, &v, &vl, &err)) != 0) {
				fail(&err, rc);
			} else {
				printf("get %s ", argv[1]);
				if (v) {
					printf("= ");
					show(v, vl);
					printf("\n");
				} else {
					printf("absent\n");
				}
			}
		}
		free(v);
		free(k.p);
	} else if (strcmp(argv[0], "scan") == 0 && argc >= 4) {
		struct bytes s = word(argv[1]);
		struct bytes e = strcmp(argv[2], "-") == 0 ? (struct bytes){ 0 } : word(argv[2]);
		struct scan_pl pl = { .tag = "scan" };
		bool keys = argc > 4 && strcmp(argv[4], "keys") == 0;

		if (need_txn() == 0) {
			rc = kv->scan(txn, s.p, s.n, e.p, e.n, (size_t)strtoul(argv[3], NULL, 10), keys,
				      on_key, &pl, &err);
			if (rc)
				fail(&err, rc);
			else
				printf("scan n=%zu\n", pl.n);
		}
		free(s.p);
		free(e.p);
	} else if (strcmp(argv[0], "put") == 0 && argc == 3) {
		struct bytes k = word(argv[1]), v = word(argv[2]);

		if (need_txn() == 0) {
			answer(kv->put(txn, k.p, k.n, v.p, v.n, &err), &err, "put");
		}
		free(k.p);
		free(v.p);
	} else if (strcmp(argv[0], "del") == 0 && argc == 2) {
		struct bytes k = word(argv[1]);

		if (need_txn() == 0) {
			answer(kv->del(txn, k.p, k.n, &err), &err, "del");
		}
		free(k.p);
	} else if (strcmp(argv[0], "delrange") == 0 && argc == 3) {
		struct bytes s = word(argv[1]);
		struct bytes e = strcmp(argv[2], "-") == 0 ? (struct bytes){ 0 } : word(argv[2]);

		if (need_txn() == 0) {
			answer(kv->del_range(txn, s.p, s.n, e.p, e.n, &err), &err, "delrange");
		}
		free(s.p);
		free(e.p);
	} else if ((strcmp(argv[0], "getn") == 0 && (argc == 3 || argc == 4)) ||
		   (strcmp(argv[0], "putn") == 0 && (argc == 4 || argc == 5))) {
		bool put = argv[0][0] == 'p';
		long n = strtol(argv[2], NULL, 10);
		long from = argc == (put ? 5 : 4) ? strtol(argv[argc - 1], NULL, 10) : 0;
		struct bytes v = put ? word(argv[3]) : (struct bytes){ 0 };
		struct bytes pre = word(argv[1]);
		uint8_t key[512];

		if (need_txn() == 0) {
			for (long i = from; i < from + n && rc == 0; i++) {
				uint8_t *got = NULL;
				size_t gl;

				size_t kl = key_n(key, sizeof(key), &pre, i);

				if (put)
					rc = kv->put(txn, key, kl, v.p, v.n, &err);
				else
					rc = kv->get(txn, key, kl, &got, &gl, &err);
				free(got);
			}
			answer(rc, &err, argv[0]);
		}
		free(v.p);
		free(pre.p);
	} else if (strcmp(argv[0], "commit") == 0) {
		if (need_txn() == 0) {
			rc = kv->commit(txn, &err);
			txn = NULL;
			answer(rc, &err, "commit");
		}
	} else if (strcmp(argv[0], "abort") == 0) {
		kv->abort(txn);
		txn = NULL;
		printf("abort ok\n");
	} else if (strcmp(argv[0], "snap") == 0 && argc >= 4) {
		struct bytes s = word(argv[1]);
		struct bytes e = strcmp(argv[2], "-") == 0 ? (struct bytes){ 0 } : word(argv[2]);
		struct scan_pl pl = { .tag = "snap" };
		int64_t rev = argc > 4 && strcmp(argv[4], "-") ? strtoll(argv[4], NULL, 10) : 0;

		if (argc == 6 && rest && *rest) {
			pl.at = (size_t)strtoul(argv[5], NULL, 10);
			pl.cmd = rest;
		}
		rc = kv->snapshot_scan(conn, s.p, s.n, e.p, e.n, strcmp(argv[3], "keys") == 0, &rev,
				       on_key, &pl, &err);
		if (rc) {
			fail(&err, rc);
			printf("snap partial n=%zu\n", pl.n);
		} else {
			printf("snap n=%zu rev=%lld\n", pl.n, (long long)rev);
		}
		free(s.p);
		free(e.p);
	} else {
		printf("ERR EINVAL bad command: %s\n", argv[0]);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[8192];

	if (argc > 1)
		do_connect(argv[1]);
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		run(line);
	kv->abort(txn);
	kv->disconnect(conn);
	return 0;
}
