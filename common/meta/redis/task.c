/*
 * redis/task.c: jfsops's task records and leases on Redis (meta_mut.h
 * jo_mut_task_*, jo_mut_rec_*), each a single Lua script (EVAL): atomic on
 * the server, on the server's clock. Keys live beside the volume's, under
 * names juicefs never uses.
 */
#include "common/meta/meta_mut.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/meta/meta_internal.h"
#include "common/meta/redis/internal.h"

/* ---- tasks and leases (Lua) */

/*
 * Server time in ms inside scripts. Redis >= 5 replicates script effects, so
 * TIME before a write is allowed; older servers need replicate_commands().
 */
#define LUA_NOW \
	"if redis.replicate_commands then pcall(redis.replicate_commands) end " \
	"local t = redis.call('TIME') " \
	"local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "

/* KEYS: items, queue, next. ARGV: prefix, kind, item... -> {id, added} */
static const char LUA_ADD[] =
	LUA_NOW
	"local fresh = {} "
	"for i = 3, #ARGV do "
	"  local owner = redis.call('HGET', KEYS[1], ARGV[i]) "
	"  if (not owner) or redis.call('EXISTS', ARGV[1] .. 'task:' .. owner) == 0 then "
	"    fresh[#fresh + 1] = ARGV[i] "
	"  end "
	"end "
	"if #fresh == 0 then return {0, 0} end "
	"local id = redis.call('INCR', KEYS[3]) "
	"for _, it in ipairs(fresh) do redis.call('HSET', KEYS[1], it, id) end "
	"redis.call('HSET', ARGV[1] .. 'task:' .. id, 'kind', ARGV[2], 'items', "
	"  table.concat(fresh, '\\n'), 'owner', '', 'expire', 0, 'attempts', 0, 'created', now) "
	"redis.call('ZADD', KEYS[2], 0, id) "
	"return {id, #fresh}";

/* KEYS: queue. ARGV: prefix, owner, lease_ms -> nil | {id, kind, items, expire, attempts} */
static const char LUA_CLAIM[] =
	LUA_NOW
	"while true do "
	"  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1) "
	"  if #ids == 0 then return false end "
	"  local tk = ARGV[1] .. 'task:' .. ids[1] "
	"  if redis.call('EXISTS', tk) == 0 then "
	"    redis.call('ZREM', KEYS[1], ids[1]) "
	"  else "
	"    local exp = now + tonumber(ARGV[3]) "
	"    redis.call('ZADD', KEYS[1], exp, ids[1]) "
	"    redis.call('HSET', tk, 'owner', ARGV[2], 'expire', exp) "
	"    local att = redis.call('HINCRBY', tk, 'attempts', 1) "
	"    local v = redis.call('HMGET', tk, 'kind', 'items') "
	"    return {ids[1], v[1], v[2], tostring(exp), tostring(att)} "
	"  end "
	"end";

/* KEYS: queue. ARGV: prefix, id, owner, lease_ms -> expiry | -1 not ours */
static const char LUA_RENEW[] =
	LUA_NOW
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"local exp = now + tonumber(ARGV[4]) "
	"redis.call('ZADD', KEYS[1], exp, ARGV[2]) "
	"redis.call('HSET', tk, 'expire', exp) "
	"return exp";

/* KEYS: queue. ARGV: prefix, id, owner -> 1 | -1 */
static const char LUA_RELEASE[] =
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"redis.call('ZADD', KEYS[1], 0, ARGV[2]) "
	"redis.call('HSET', tk, 'owner', '', 'expire', 0) "
	"return 1";

/* KEYS: queue, items. ARGV: prefix, id, owner -> 1 | -1 */
static const char LUA_COMPLETE[] =
	"local tk = ARGV[1] .. 'task:' .. ARGV[2] "
	"if redis.call('HGET', tk, 'owner') ~= ARGV[3] then return -1 end "
	"local items = redis.call('HGET', tk, 'items') or '' "
	"for it in string.gmatch(items, '[^\\n]+') do "
	"  if redis.call('HGET', KEYS[2], it) == ARGV[2] then redis.call('HDEL', KEYS[2], it) end "
	"end "
	"redis.call('DEL', tk) "
	"redis.call('ZREM', KEYS[1], ARGV[2]) "
	"return 1";

/* KEYS: queue -> {total, leased} */
static const char LUA_COUNT[] =
	LUA_NOW
	"return {redis.call('ZCARD', KEYS[1]), "
	"  redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}";

struct rkeys {
	char prefix[64], queue[80], items[80], next[80];
};

/* Task keys live beside the volume's (a Cluster volume's hash tag first). */
static int mk_keys(struct jo_meta *m, const char *ns, struct rkeys *k)
{
	const char *pre = jo_rd_prefix(m, NULL);

	snprintf(k->prefix, sizeof(k->prefix), "%sjfsops:%s:", pre, ns);
	snprintf(k->queue, sizeof(k->queue), "%sjfsops:%s:queue", pre, ns);
	snprintf(k->items, sizeof(k->items), "%sjfsops:%s:items", pre, ns);
	snprintf(k->next, sizeof(k->next), "%sjfsops:%s:next", pre, ns);
	return 0;
}

/* EVAL script with nkeys keys then args (all C strings). */
static redisReply *eval(struct jo_meta *m, struct jo_err *err, int *rc, const char *script,
			int nkeys, const char *const *keys, int nargs, const char *const *args)
{
	int argc = 3 + nkeys + nargs;
	const char **argv = calloc((size_t)argc, sizeof(*argv));
	size_t *lens = calloc((size_t)argc, sizeof(*lens));
	char nk[16];
	redisReply *r = NULL;
	int a = 0;

	if (!argv || !lens) {
		free(argv);
		free(lens);
		*rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(nk, sizeof(nk), "%d", nkeys);
	argv[a++] = "EVAL";
	argv[a++] = script;
	argv[a++] = nk;
	for (int i = 0; i < nkeys; i++)
		argv[a++] = keys[i];
	for (int i = 0; i < nargs; i++)
		argv[a++] = args[i];
	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	r = jo_rd_command_argv(m, argc, argv, lens);
	free(argv);
	free(lens);
	return jo_rd_checked(m, r, "EVAL (task script)", rc, err);
}

int jo_rd_task_init(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	(void)m;
	(void)ns;
	(void)err;
	return 0;
}

int jo_rd_task_add(struct jo_meta *m, const char *ns, const char *kind,
		   const char *const *items, size_t n, int64_t *task_id, size_t *added,
		   struct jo_err *err)
{
	struct rkeys k;
	const char *keys[3];
	const char **args;
	redisReply *r;
	int64_t v0, v1;
	int rc;

	*task_id = 0;
	*added = 0;
	if (n == 0)
		return 0;
	mk_keys(m, ns, &k);
	keys[0] = k.items;
	keys[1] = k.queue;
	keys[2] = k.next;
	args = calloc(n + 2, sizeof(*args));
	if (!args)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	args[0] = k.prefix;
	args[1] = kind;
	for (size_t i = 0; i < n; i++)
		args[i + 2] = items[i];
	r = eval(m, err, &rc, LUA_ADD, 3, keys, (int)n + 2, args);
	free(args);
	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || jo_rd_reply_i64(r->element[0], &v0) ||
	    jo_rd_reply_i64(r->element[1], &v1)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected task-add reply", m->url.redacted);
	}
	*task_id = v0;
	*added = (size_t)v1;
	freeReplyObject(r);
	return 0;
}

int jo_rd_task_claim(struct jo_meta *m, const char *ns, const char *owner, int64_t lease_ms,
		     struct jo_mut_task *out, struct jo_err *err)
{
	struct rkeys k;
	char lease[32];
	const char *keys[1], *args[3];
	redisReply *r;
	int rc;

	memset(out, 0, sizeof(*out));
	mk_keys(m, ns, &k);
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	keys[0] = k.queue;
	args[0] = k.prefix;
	args[1] = owner;
	args[2] = lease;
	r = eval(m, err, &rc, LUA_CLAIM, 1, keys, 3, args);
	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOTFOUND, "no claimable task");
	}
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 || jo_rd_reply_i64(r->element[0], &out->id) ||
	    r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING ||
	    jo_rd_reply_i64(r->element[3], &out->expire_ms) || jo_rd_reply_i64(r->element[4], &out->attempts)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected task-claim reply",
				  m->url.redacted);
	}
	snprintf(out->kind, sizeof(out->kind), "%.*s", (int)r->element[1]->len, r->element[1]->str);
	snprintf(out->owner, sizeof(out->owner), "%s", owner);
	out->items = strndup(r->element[2]->str, r->element[2]->len);
	freeReplyObject(r);
	if (!out->items)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	return 0;
}

int jo_rd_task_renew(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		     int64_t lease_ms, int64_t *expire_ms, struct jo_err *err)
{
	struct rkeys k;
	char sid[32], lease[32];
	const char *keys[1], *args[4];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	snprintf(sid, sizeof(sid), "%lld", (long long)id);
	snprintf(lease, sizeof(lease), "%lld", (long long)lease_ms);
	keys[0] = k.queue;
	args[0] = k.prefix;
	args[1] = sid;
	args[2] = owner;
	args[3] = lease;
	r = eval(m, err, &rc, LUA_RENEW, 1, keys, 4, args);
	if (!r)
		return rc;
	rc = jo_rd_reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected renew reply", m->url.redacted);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "task %lld is no longer leased by %s",
				  (long long)id, owner);
	if (expire_ms)
		*expire_ms = v;
	return 0;
}

static int owner_script(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			const char *script, const char *what, struct jo_err *err)
{
	struct rkeys k;
	char sid[32];
	const char *keys[2], *args[3];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	snprintf(sid, sizeof(sid), "%lld", (long long)id);
	keys[0] = k.queue;
	keys[1] = k.items;
	args[0] = k.prefix;
	args[1] = sid;
	args[2] = owner;
	r = eval(m, err, &rc, script, 2, keys, 3, args);
	if (!r)
		return rc;
	rc = jo_rd_reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected %s reply", m->url.redacted, what);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "%s task %lld: no longer leased by %s", what,
				  (long long)id, owner);
	return 0;
}

int jo_rd_task_release(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
		       struct jo_err *err)
{
	return owner_script(m, ns, id, owner, LUA_RELEASE, "release", err);
}

int jo_rd_task_complete(struct jo_meta *m, const char *ns, int64_t id, const char *owner,
			struct jo_err *err)
{
	return owner_script(m, ns, id, owner, LUA_COMPLETE, "complete", err);
}

int jo_rd_task_count(struct jo_meta *m, const char *ns, int64_t *total, int64_t *leased,
		     struct jo_err *err)
{
	struct rkeys k;
	const char *keys[1];
	redisReply *r;
	int rc;

	mk_keys(m, ns, &k);
	keys[0] = k.queue;
	r = eval(m, err, &rc, LUA_COUNT, 1, keys, 0, NULL);
	if (!r)
		return rc;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || jo_rd_reply_i64(r->element[0], total) ||
	    jo_rd_reply_i64(r->element[1], leased)) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected count reply", m->url.redacted);
	}
	freeReplyObject(r);
	return 0;
}

int jo_rd_task_scan(struct jo_meta *m, const char *ns, jo_mut_task_cb cb, void *payload,
		    struct jo_err *err)
{
	struct rkeys k;
	char cursor[32] = "0";
	int rc = 0;

	mk_keys(m, ns, &k);
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "ZSCAN %s %s COUNT 100", k.queue, cursor);
		redisReply *el;

		if (!r)
			return rc;
		el = jo_rd_scan_page(m, r, "ZSCAN", cursor, err);
		if (!el)
			return JO_EPROTO; /* jo_rd_scan_page said why */
		for (size_t i = 0; i + 1 < el->elements && rc == 0; i += 2) {
			struct jo_mut_task t = { 0 };
			redisReply *h;
			int64_t id;

			if (jo_rd_reply_i64(el->element[i], &id) != 0)
				continue;
			h = jo_rd_cmd(m, err, &rc, "HMGET %stask:%lld kind items owner expire attempts",
				k.prefix, (long long)id);
			if (!h)
				break;
			if (h->type == REDIS_REPLY_ARRAY && h->elements == 5 &&
			    h->element[0]->type == REDIS_REPLY_STRING &&
			    h->element[1]->type == REDIS_REPLY_STRING) {
				t.id = id;
				snprintf(t.kind, sizeof(t.kind), "%.*s", (int)h->element[0]->len,
					 h->element[0]->str);
				t.items = strndup(h->element[1]->str, h->element[1]->len);
				if (h->element[2]->type == REDIS_REPLY_STRING)
					snprintf(t.owner, sizeof(t.owner), "%.*s",
						 (int)h->element[2]->len, h->element[2]->str);
				(void)jo_rd_reply_i64(h->element[3], &t.expire_ms); /* absent: stays 0 */
				(void)jo_rd_reply_i64(h->element[4], &t.attempts);
				if (!t.items)
					rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				else
					rc = cb(&t, payload);
				free(t.items);
			}
			freeReplyObject(h);
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

int jo_rd_task_clear(struct jo_meta *m, const char *ns, struct jo_err *err)
{
	struct rkeys k;
	char cursor[32] = "0", match[80];
	int rc = 0;

	mk_keys(m, ns, &k);
	snprintf(match, sizeof(match), "%s*", k.prefix);
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "SCAN %s MATCH %s COUNT 1000", cursor, match);

		if (!r)
			return rc;
		const redisReply *keys = jo_rd_scan_page(m, r, "SCAN", cursor, err);

		if (!keys)
			return JO_EPROTO; /* jo_rd_scan_page said why */
		for (size_t i = 0; i < keys->elements && rc == 0; i++) {
			const redisReply *key = keys->element[i];

			rc = jo_rd_cmd_ok(m, err, "DEL %b", key->str, key->len);
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}

/* ---- records beside the tasks (meta_mut.h jo_mut_rec_*) */

/*
 * KEYS: rec, queue, items. ARGV: prefix, key, value, delete, if_absent,
 * task id (0: none), owner, complete -> -1 not our task, 0 exists, 1 written
 */
static const char LUA_REC_PUT[] =
	"local id = tonumber(ARGV[6]) "
	"local tk = ARGV[1] .. 'task:' .. ARGV[6] "
	"if id > 0 and redis.call('HGET', tk, 'owner') ~= ARGV[7] then return -1 end "
	"if ARGV[5] == '1' and redis.call('HEXISTS', KEYS[1], ARGV[2]) == 1 then return 0 end "
	"if ARGV[4] == '1' then redis.call('HDEL', KEYS[1], ARGV[2]) "
	"else redis.call('HSET', KEYS[1], ARGV[2], ARGV[3]) end "
	"if ARGV[8] == '1' then "
	"  local items = redis.call('HGET', tk, 'items') or '' "
	"  for it in string.gmatch(items, '[^\\n]+') do "
	"    if redis.call('HGET', KEYS[3], it) == ARGV[6] then redis.call('HDEL', KEYS[3], it) end "
	"  end "
	"  redis.call('DEL', tk) "
	"  redis.call('ZREM', KEYS[2], ARGV[6]) "
	"end "
	"return 1";

/* Beside the task keys (a Cluster volume's hash tag first, as mk_keys). */
static void rec_key(struct jo_meta *m, const char *ns, char *out, size_t n)
{
	snprintf(out, n, "%sjfsops:%s:rec", jo_rd_prefix(m, NULL), ns);
}

int jo_rd_rec_put(struct jo_meta *m, const char *ns, const char *key, const char *val,
		  const struct jo_mut_rec_cond *c, bool *written, struct jo_err *err)
{
	struct rkeys k;
	char rk[64], sid[32];
	const char *keys[3], *args[8];
	redisReply *r;
	int64_t v;
	int rc;

	mk_keys(m, ns, &k);
	rec_key(m, ns, rk, sizeof(rk));
	snprintf(sid, sizeof(sid), "%lld", (long long)(c->task_id > 0 ? c->task_id : 0));
	keys[0] = rk;
	keys[1] = k.queue;
	keys[2] = k.items;
	args[0] = k.prefix;
	args[1] = key;
	args[2] = val ? val : "";
	args[3] = val ? "0" : "1";
	args[4] = c->if_absent ? "1" : "0";
	args[5] = sid;
	args[6] = c->task_id > 0 ? c->owner : "";
	args[7] = c->complete ? "1" : "0";
	r = eval(m, err, &rc, LUA_REC_PUT, 3, keys, 8, args);
	if (!r)
		return rc;
	rc = jo_rd_reply_i64(r, &v);
	freeReplyObject(r);
	if (rc)
		return jo_err_set(err, JO_EPROTO, "redis %s: unexpected record reply", m->url.redacted);
	if (v < 0)
		return jo_err_set(err, JO_ECONFLICT, "record '%s': task %lld is no longer leased by %s",
				  key, (long long)c->task_id, c->owner);
	if (written)
		*written = v == 1;
	return 0;
}

int jo_rd_rec_get(struct jo_meta *m, const char *ns, const char *key, char **val,
		  struct jo_err *err)
{
	char rk[64];
	redisReply *r;
	int rc;

	rec_key(m, ns, rk, sizeof(rk));
	r = jo_rd_cmd(m, err, &rc, "HGET %s %s", rk, key);
	if (!r)
		return rc;
	if (r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return jo_err_set(err, JO_ENOTFOUND, "no record '%s'", key);
	}
	if (r->type != REDIS_REPLY_STRING) {
		freeReplyObject(r);
		return jo_err_set(err, JO_EPROTO, "redis %s: record '%s' is not a string",
				  m->url.redacted, key);
	}
	*val = strndup(r->str, r->len);
	freeReplyObject(r);
	return *val ? 0 : jo_err_set(err, JO_ENOMEM, "out of memory");
}

int jo_rd_rec_scan(struct jo_meta *m, const char *ns, const char *prefix, jo_mut_rec_cb cb,
		   void *payload, struct jo_err *err)
{
	char rk[64], cursor[32] = "0", match[420];
	size_t o = 0;
	int rc = 0;

	rec_key(m, ns, rk, sizeof(rk));
	/* MATCH is a glob: escape its special characters in the prefix */
	for (const char *p = prefix; *p && o + 3 < sizeof(match); p++) {
		if (strchr("*?[]\\", *p))
			match[o++] = '\\';
		match[o++] = *p;
	}
	match[o++] = '*';
	match[o] = '\0';
	do {
		redisReply *r = jo_rd_cmd(m, err, &rc, "HSCAN %s %s MATCH %s COUNT 200", rk, cursor,
					  match);
		redisReply *el;

		if (!r)
			return rc;
		el = jo_rd_scan_page(m, r, "HSCAN", cursor, err);
		if (!el)
			return JO_EPROTO; /* jo_rd_scan_page said why */
		for (size_t i = 0; i + 1 < el->elements && rc == 0; i += 2) {
			/* strings from Redis are NUL-terminated by hiredis */
			if (el->element[i]->type == REDIS_REPLY_STRING &&
			    el->element[i + 1]->type == REDIS_REPLY_STRING)
				rc = cb(el->element[i]->str, el->element[i + 1]->str, payload);
		}
		freeReplyObject(r);
	} while (rc == 0 && strcmp(cursor, "0") != 0);
	return rc;
}
