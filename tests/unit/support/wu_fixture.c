/* wu_fixture.c: see wu_fixture.h. */
#include "support/wu_fixture.h"
#include "support/testutil.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/warmup/cache.h"

void wu_fx_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

void wu_fx_juicefs(char *out, size_t cap)
{
	const char *e = getenv("JUICEFS"), *data = getenv("JO_TEST_DATA");
	size_t n = data ? strlen(data) : 0;

	if (e) {
		snprintf(out, cap, "%s", e);
		return;
	}
	if (n >= 11 && strcmp(data + n - 11, "/tests/data") == 0)
		n -= 11;
	snprintf(out, cap, "%.*s%s.venv/bin/juicefs", (int)n, data ? data : "", n ? "/" : "");
}

int wu_fx_juicefs_check(char *out, size_t cap)
{
	wu_fx_juicefs(out, cap);
	if (access(out, X_OK) != 0) {
		fprintf(stderr, "juicefs binary not found at %s (set JUICEFS)\n", out);
		return -1; /* a failure, not a skip */
	}
	return 0;
}

int wu_fx_tmpdir(const char *name, char *dir, size_t dcap, char *url, size_t ucap)
{
	snprintf(dir, dcap, "/tmp/jo-test-%s.XXXXXX", name);
	if (!mkdtemp(dir))
		return -1;
	snprintf(url, ucap, "sqlite3://%s/m.db", dir);
	return 0;
}

void wu_fx_rmdir(const char *dir)
{
	if (dir[0])
		wu_fx_sh("rm -rf %s", dir);
}

void wu_fx_format_sync(const char *jfs, const char *url, const char *dir)
{
	wu_fx_sh("'%s' --no-agent format %s vol --storage file --bucket %s/objs/ --trash-days 0 "
		 ">%s/format.log 2>&1", jfs, url, dir, dir);
	wu_fx_sh("META=%s '%s' --no-agent sync %s/src/ jfs://META/ >%s/sync.log 2>&1", url, jfs, dir, dir);
}

int wu_fx_setup(struct wu_fixture *fx)
{
	char jfs[1024];

	memset(fx, 0, sizeof(*fx));
	if (wu_fx_juicefs_check(jfs, sizeof(jfs)) != 0)
		return -1;
	if (wu_fx_tmpdir("wu", fx->dir, sizeof(fx->dir), fx->url, sizeof(fx->url)) != 0)
		return -1;
	snprintf(fx->mount, sizeof(fx->mount), "%s/mp", fx->dir);
	wu_fx_sh("mkdir -p %s/src/ds/d && printf hello > %s/src/ds/g && "
		 "head -c %u /dev/urandom > %s/src/ds/f && touch %s/src/ds/d/.keep", fx->dir,
		 fx->dir, WU_FX_F_LEN, fx->dir, fx->dir);
	wu_fx_format_sync(jfs, fx->url, fx->dir);
	wu_fx_sh("cp -r %s/src %s", fx->dir, fx->mount);
	return 0;
}

void wu_fx_teardown(struct wu_fixture *fx)
{
	wu_fx_rmdir(fx->dir);
}

void wu_fx_mount(struct wu_fixture *fx, const char *uuid, uint64_t cache_size)
{
	char path[512], cfg[2048];
	int n;

	snprintf(fx->cache, sizeof(fx->cache), "%s/cache/%s", fx->dir, uuid);
	wu_fx_sh("mkdir -p %s/raw", fx->cache);
	n = snprintf(cfg, sizeof(cfg), "{\"Format\":{\"Name\":\"vol\",\"UUID\":\"%s\","
		     "\"EncryptKey\":\"\"},\"Chunk\":{\"BlockSize\":4194304,\"CacheSize\":%llu,"
		     "\"CacheFullBlock\":true,\"Compress\":\"none\",\"Prefetch\":1,"
		     "\"Readahead\":0,\"CacheDir\":\"%s\"}}", uuid, (unsigned long long)cache_size,
		     fx->cache);
	assert_true(n > 0 && (size_t)n < sizeof(cfg));
	snprintf(path, sizeof(path), "%s/.config", fx->mount);
	tu_write(path, cfg, (size_t)n);
}

void wu_fx_cache_put(const struct wu_fixture *fx, const char *key)
{
	const char *rel = strchr(key, '/');

	assert_non_null(rel);
	wu_fx_sh("f=%s/raw%s && mkdir -p \"$(dirname $f)\" && touch $f", fx->cache, rel);
}

size_t wu_fx_answer(uint8_t *p, const char *json, size_t jl)
{
	p[0] = 0xFF;
	p[1] = 0;
	p[2] = 0;
	p[3] = (uint8_t)(jl >> 8);
	p[4] = (uint8_t)jl;
	memcpy(p + 5, json, jl);
	return 5 + jl;
}

void wu_fx_control(const struct wu_fixture *fx, int action, const char *const *paths, size_t n,
		   unsigned threads, const char *json)
{
	struct jo_err err = { 0 };
	uint8_t *msg = NULL, *buf;
	size_t mlen = 0, jl = strlen(json), k;
	char path[512];

	assert_int_equal(jo_warmup_ctl_encode(action, paths, n, threads, &msg, &mlen, &err), 0);
	buf = calloc(1, mlen + 5 + jl);
	assert_non_null(buf);
	/* the message's place (overwritten by the request), then the answer record */
	k = mlen + wu_fx_answer(buf + mlen, json, jl);
	snprintf(path, sizeof(path), "%s/.control", fx->mount);
	tu_write(path, buf, k);
	free(buf);
	free(msg);
}
