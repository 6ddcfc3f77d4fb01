/*
 * meta.c: META-URL parsing, the backend dispatcher, format JSON parsing and
 * path resolution shared by every engine.
 */
#include "common/meta/meta_internal.h"

#include "common/err.h"
#include "common/strfree.h"
#include "common/utc.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- attr */

int jo_meta_decode_attr(const uint8_t *b, size_t len, struct jo_attr *a, struct jo_err *err)
{
	uint16_t tm;

	memset(a, 0, sizeof(*a));
	if (len < JO_ATTR_PARENT_OFF)
		return jo_err_set(err, JO_EPROTO, "attr record is %zu bytes, need at least 63", len);
	a->flags = b[0];
	tm = (uint16_t)((b[1] << 8) | b[2]);
	a->type = (uint8_t)(tm >> 12);
	a->mode = tm & 07777;
	a->uid = jo_be32(b + 3);
	a->gid = jo_be32(b + 7);
	a->atime = (int64_t)jo_be64(b + 11);
	a->atimensec = jo_be32(b + 19);
	a->mtime = (int64_t)jo_be64(b + 23);
	a->mtimensec = jo_be32(b + 31);
	a->ctime = (int64_t)jo_be64(b + 35);
	a->ctimensec = jo_be32(b + 43);
	a->nlink = jo_be32(b + 47);
	a->length = jo_be64(b + 51);
	a->rdev = jo_be32(b + 59);
	if (len >= JO_ATTR_PARENT_OFF + 8)
		a->parent = jo_be64(b + JO_ATTR_PARENT_OFF);
	return 0;
}

/* ---------------------------------------------------------------- trash */

int jo_trash_hour_parse(const char *name, size_t len, int64_t *ts)
{
	char buf[16];
	int y, mo, d, h;
	char tail;

	if (len != 13)
		return -1;
	memcpy(buf, name, len);
	buf[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (i == 4 || i == 7 || i == 10 ? buf[i] != '-' : (buf[i] < '0' || buf[i] > '9'))
			return -1;
	if (sscanf(buf, "%4d-%2d-%2d-%2d%c", &y, &mo, &d, &h, &tail) != 4 || mo < 1 || mo > 12 ||
	    d < 1 || d > 31 || h > 23)
		return -1;
	/* Go's time.Parse rejects a day past the end of its month (Feb 30) */
	return jo_utc_exact(y, mo, d, h, 0, 0, ts);
}

void jo_trash_hour_name(int64_t ts, char buf[32])
{
	time_t t = (time_t)ts;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, 32, "%Y-%m-%d-%H", &tm);
}

/* ---------------------------------------------------------------- format */

void jo_format_release(struct jo_format *f)
{
	if (!f)
		return;
	jo_free_strs(&f->name, &f->uuid, &f->storage, &f->bucket, &f->access_key);
	jo_free_secret(&f->secret_key);
	jo_free_secret(&f->session_token);
	jo_free_strs(&f->compression, &f->encrypt_algo);
	jo_free_secret(&f->raw_json);
	memset(f, 0, sizeof(*f));
}

static char *jstr(json_t *o, const char *key, const char *dflt)
{
	json_t *v = json_object_get(o, key);
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;

	if (!s || !*s)
		s = dflt;
	return s ? strdup(s) : NULL;
}

static bool jbool(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key));
}

static int jint(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int)json_integer_value(v) : 0;
}

static void lower(char *s)
{
	for (; s && *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

/* Decrypt one KeyEncrypted secret in place of *sp (§1.3). */
static int decrypt_secret(char **sp, const char *uuid, const char *what, struct jo_err *err)
{
	const char *in = *sp;
	size_t inlen = strlen(in), pad = 0;
	unsigned char key[16];
	unsigned int klen = 0;
	unsigned char *raw = NULL, *plain = NULL;
	EVP_CIPHER_CTX *ctx = NULL;
	int rawlen, outl = 0, finl = 0, rc = 0;

	if (inlen % 4 != 0 || inlen == 0)
		return jo_err_set(err, JO_EPROTO, "format: encrypted %s is not base64", what);
	if (in[inlen - 1] == '=')
		pad++;
	if (inlen >= 2 && in[inlen - 2] == '=')
		pad++;
	raw = malloc(inlen / 4 * 3 + 1);
	if (!raw)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rawlen = EVP_DecodeBlock(raw, (const unsigned char *)in, (int)inlen);
	if (rawlen < 0) {
		rc = jo_err_set(err, JO_EPROTO, "format: encrypted %s is not base64", what);
		goto out;
	}
	rawlen -= (int)pad;
	if (rawlen < 12 + 16) {
		rc = jo_err_set(err, JO_EPROTO, "format: encrypted %s is too short", what);
		goto out;
	}
	if (EVP_Digest(uuid, strlen(uuid), key, &klen, EVP_md5(), NULL) != 1 || klen != 16) {
		rc = jo_err_set(err, JO_EIO, "format: MD5 unavailable");
		goto out;
	}
	plain = malloc((size_t)rawlen + 1);
	ctx = EVP_CIPHER_CTX_new();
	if (!plain || !ctx) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	if (EVP_DecryptInit_ex(ctx, EVP_aes_128_gcm(), NULL, NULL, NULL) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL) != 1 ||
	    EVP_DecryptInit_ex(ctx, NULL, NULL, key, raw) != 1 ||
	    EVP_DecryptUpdate(ctx, plain, &outl, raw + 12, rawlen - 12 - 16) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, raw + rawlen - 16) != 1 ||
	    EVP_DecryptFinal_ex(ctx, plain + outl, &finl) != 1) {
		rc = jo_err_set(err, JO_EPROTO,
				"format: cannot decrypt %s (authentication failed; wrong UUID?)", what);
		goto out;
	}
	plain[outl + finl] = '\0';
	memset(*sp, 0, inlen);
	free(*sp);
	*sp = (char *)plain;
	plain = NULL;
out:
	if (ctx)
		EVP_CIPHER_CTX_free(ctx);
	if (plain) {
		memset(plain, 0, (size_t)rawlen + 1);
		free(plain);
	}
	free(raw);
	memset(key, 0, sizeof(key));
	return rc;
}

/*
 * The record is validated, never defaulted: every field jfsops reads
 * must have the type juicefs writes (Go's json.Unmarshal would refuse
 * anything else; null is "absent", as there), and its value must be one
 * a juicefs client can have written. Fields without omitempty in
 * juicefs's Format struct (pkg/meta/config.go) are required; TrashDays
 * is not: volumes made before juicefs 1.0 have none (0 then).
 */
static int format_check_types(const json_t *o, struct jo_err *err)
{
	enum { T_STR, T_INT, T_BOOL };
	static const struct {
		const char *name;
		int type;
		bool required;
	} fields[] = {
		{ "Name", T_STR, true }, { "UUID", T_STR, true }, { "Storage", T_STR, true },
		{ "Bucket", T_STR, true }, { "BlockSize", T_INT, true },
		{ "AccessKey", T_STR, false }, { "SecretKey", T_STR, false },
		{ "SessionToken", T_STR, false }, { "Compression", T_STR, false },
		{ "EncryptKey", T_STR, false }, { "EncryptAlgo", T_STR, false },
		{ "HashPrefix", T_BOOL, false }, { "KeyEncrypted", T_BOOL, false },
		{ "ChangeLog", T_BOOL, false }, { "DirStats", T_BOOL, false },
		{ "UserGroupQuota", T_BOOL, false }, { "Shards", T_INT, false },
		{ "TrashDays", T_INT, false }, { "MetaVersion", T_INT, false },
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = json_object_get(o, fields[i].name);
		bool ok;

		if (!v || json_is_null(v)) {
			if (!fields[i].required)
				continue;
			return jo_err_set(err, JO_EPROTO, "format record: %s is missing", fields[i].name);
		}
		ok = fields[i].type == T_STR ? json_is_string(v)
		     : fields[i].type == T_INT ? json_is_integer(v)
					       : json_is_boolean(v);
		if (!ok)
			return jo_err_set(err, JO_EPROTO, "format record: %s is not %s", fields[i].name,
					  fields[i].type == T_STR ? "a string"
					  : fields[i].type == T_INT ? "an integer" : "true or false");
	}
	return 0;
}

/* The numbers in the ranges a juicefs client writes. */
static int format_check_ranges(const json_t *o, struct jo_err *err)
{
	/* juicefs format rounds --block-size to a power of two in 64 KiB..16 MiB */
	json_int_t bs = json_integer_value(json_object_get(o, "BlockSize"));
	json_int_t shards = json_integer_value(json_object_get(o, "Shards"));
	json_int_t trash = json_integer_value(json_object_get(o, "TrashDays"));
	json_int_t mver = json_integer_value(json_object_get(o, "MetaVersion"));

	if (bs < 64 || bs > 16384)
		return jo_err_set(err, JO_EPROTO, "format record: BlockSize %lld KiB is out of range "
				  "(64..16384)", (long long)bs);
	if (shards > 256)
		return jo_err_set(err, JO_EPROTO, "format record: Shards %lld is more than 256",
				  (long long)shards);
	if (trash < 0 || trash > 0x7fffffff)
		return jo_err_set(err, JO_EPROTO, "format record: TrashDays %lld is out of range",
				  (long long)trash);
	if (mver < 0 || mver > 0x7fffffff)
		return jo_err_set(err, JO_EPROTO, "format record: MetaVersion %lld is out of range",
				  (long long)mver);
	return 0;
}

/* f from the checked record o (json its text). */
static void format_fill(struct jo_format *f, json_t *o, const char *json)
{
	json_int_t shards = json_integer_value(json_object_get(o, "Shards"));
	json_t *ek = json_object_get(o, "EncryptKey");

	f->name = jstr(o, "Name", NULL);
	f->uuid = jstr(o, "UUID", NULL);
	f->storage = jstr(o, "Storage", "");
	f->bucket = jstr(o, "Bucket", "");
	f->access_key = jstr(o, "AccessKey", NULL);
	f->secret_key = jstr(o, "SecretKey", NULL);
	f->session_token = jstr(o, "SessionToken", NULL);
	f->compression = jstr(o, "Compression", "none");
	f->encrypt_algo = jstr(o, "EncryptAlgo", NULL);
	f->raw_json = strdup(json);
	f->has_encrypt_key = json_is_string(ek) && json_string_length(ek) > 0;
	f->hash_prefix = jbool(o, "HashPrefix");
	f->key_encrypted = jbool(o, "KeyEncrypted");
	f->changelog = jbool(o, "ChangeLog");
	f->dir_stats = jbool(o, "DirStats");
	f->user_group_quota = jbool(o, "UserGroupQuota");
	/* the ranges were checked above: the values fit an int */
	f->block_size_kib = jint(o, "BlockSize");
	f->shards = shards < 0 ? 0 : jint(o, "Shards"); /* juicefs: anything <= 1 is one bucket */
	f->trash_days = jint(o, "TrashDays");
	f->meta_version = jint(o, "MetaVersion");
}

/* The strings of f: copied, named, and a storage and compression juicefs knows. */
static int format_check_values(struct jo_format *f, struct jo_err *err)
{
	/* Every storage juicefs has registered (pkg/object, current and past releases). */
	static const char *const storages[] = {
		"b2", "bos", "bunny", "ceph", "cifs", "cos", "dragonfly", "eos", "etcd", "file",
		"gluster", "gs", "hdfs", "ibmcos", "jss", "ks3", "mem", "minio", "mss", "mysql",
		"nfs", "nos", "obs", "oos", "oss", "postgres", "qingstor", "qiniu", "redis", "s3",
		"scs", "scw", "sftp", "smb", "space", "speedy", "sqlite3", "storj", "swift", "tikv",
		"tos", "ufile", "upyun", "wasabi", "wasb", "webdav", "yovole",
	};
	bool known = false;

	if (!f->storage || !f->bucket || !f->compression || !f->raw_json)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	if (!f->name || !f->uuid)
		return jo_err_set(err, JO_EPROTO, "format record: %s is empty", f->name ? "UUID" : "Name");
	for (size_t i = 0; i < sizeof(storages) / sizeof(storages[0]) && !known; i++)
		known = strcmp(f->storage, storages[i]) == 0;
	if (!known)
		return jo_err_set(err, JO_EPROTO, "format record: Storage '%.64s' is no storage "
				  "juicefs knows", f->storage);
	/* as juicefs's compress.NewCompressor: case-insensitive, "" is none */
	if (strcmp(f->compression, "none") != 0 && strcmp(f->compression, "lz4") != 0 &&
	    strcmp(f->compression, "zstd") != 0)
		return jo_err_set(err, JO_EPROTO, "format record: Compression '%.64s' is none of "
				  "none, lz4, zstd", f->compression);
	return 0;
}

/* Secrets the record holds encrypted (KeyEncrypted), decrypted in place. */
static int format_decrypt(struct jo_format *f, struct jo_err *err)
{
	int rc;

	if (!f->key_encrypted || !(f->secret_key || f->session_token))
		return 0;
	if (f->encrypt_algo && strcmp(f->encrypt_algo, "sm4gcm") == 0)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "format: secrets encrypted with sm4gcm are not supported");
	if (f->secret_key &&
	    (rc = decrypt_secret(&f->secret_key, f->uuid, "SecretKey", err)) != 0)
		return rc;
	if (f->session_token &&
	    (rc = decrypt_secret(&f->session_token, f->uuid, "SessionToken", err)) != 0)
		return rc;
	return 0;
}

int jo_format_parse(const char *json, struct jo_format *f, struct jo_err *err)
{
	json_error_t jerr;
	json_t *o;
	int rc;

	memset(f, 0, sizeof(*f));
	o = json_loads(json, 0, &jerr);
	if (!o)
		return jo_err_set(err, JO_EPROTO, "format record is not JSON: %s (line %d)", jerr.text,
				  jerr.line);
	if (!json_is_object(o)) {
		json_decref(o);
		return jo_err_set(err, JO_EPROTO, "format record is not a JSON object");
	}
	if ((rc = format_check_types(o, err)) != 0 || (rc = format_check_ranges(o, err)) != 0) {
		json_decref(o);
		return rc;
	}
	format_fill(f, o, json);
	json_decref(o);
	lower(f->storage);
	lower(f->compression);
	if ((rc = format_check_values(f, err)) != 0 || (rc = format_decrypt(f, err)) != 0) {
		jo_format_release(f);
		return rc;
	}
	return 0;
}

/* ---------------------------------------------------------------- dispatch */

static const struct jo_meta_ops *ops_for(const char *engine)
{
	static const struct {
		const char *engine;
		const struct jo_meta_ops *ops;
	} families[] = {
		{ "redis", &jo_meta_redis_ops },
		{ "sqlite3", &jo_meta_sql_ops },
		{ "postgres", &jo_meta_sql_ops },
		{ "mysql", &jo_meta_sql_ops },
		{ "etcd", &jo_meta_tkv_ops },
	};

	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		if (!strcmp(engine, families[i].engine))
			return families[i].ops;
	return NULL;
}

static int open_parsed(struct jo_meta **out, struct jo_meta_url *u, struct jo_err *err)
{
	const struct jo_meta_ops *ops = ops_for(u->engine);
	struct jo_meta *m;
	int rc;

	if (!ops) {
		rc = jo_err_set(err, JO_EUNSUPPORTED, "metadata engine %s is not supported", u->engine);
		jo_meta_url_release(u);
		return rc;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		jo_meta_url_release(u);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	m->url = *u;
	m->ops = ops;
	rc = m->ops->open(m, err);
	if (rc != 0) {
		jo_meta_url_release(&m->url);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static int set_password(struct jo_meta_url *u, const char *pw, struct jo_err *err)
{
	free(u->password);
	u->password = strdup(pw);
	if (!u->password) {
		jo_meta_url_release(u);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	return 0;
}

int jo_meta_open_with(struct jo_meta **out, const char *url,
		      const struct jo_meta_open_opts *opts, struct jo_err *err)
{
	struct jo_meta_url u;
	const char *pw = NULL;
	int rc;

	*out = NULL;
	rc = jo_meta_url_parse(&u, url, err);
	if (rc != 0)
		return rc;
	/* as juicefs: Redis takes REDIS_PASSWORD before META_PASSWORD; only a
	 * URL without a password of its own takes either */
	if (opts && !u.password) {
		if (!strcmp(u.engine, "redis") && opts->redis_password && *opts->redis_password)
			pw = opts->redis_password;
		else if (opts->password && *opts->password)
			pw = opts->password;
	}
	if (pw && (rc = set_password(&u, pw, err)) != 0)
		return rc;
	if (opts && opts->sentinel_password && *opts->sentinel_password && u.master_name &&
	    !(u.sentinel_password = strdup(opts->sentinel_password))) {
		jo_meta_url_release(&u);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	u.read_only = opts && opts->read_only;
	u.coordinator_only = opts && opts->coordinator_only;
	return open_parsed(out, &u, err);
}

int jo_meta_open(struct jo_meta **out, const char *url, struct jo_err *err)
{
	return jo_meta_open_with(out, url, NULL, err);
}

int jo_meta_dup(struct jo_meta *m, struct jo_meta **out, struct jo_err *err)
{
	struct jo_meta_url u;
	int rc;

	*out = NULL;
	if ((rc = jo_meta_url_copy(&u, &m->url, err)) != 0)
		return rc;
	return open_parsed(out, &u, err);
}

void jo_meta_close(struct jo_meta *m)
{
	if (!m)
		return;
	m->ops->close(m);
	if (m->url.password)
		memset(m->url.password, 0, strlen(m->url.password));
	jo_meta_url_release(&m->url);
	free(m);
}

const char *jo_meta_engine(const struct jo_meta *m)
{
	return m->ops->engine(m);
}

bool jo_meta_has(const struct jo_meta *m, unsigned cap)
{
	return (m->ops->caps(m) & cap) == cap;
}

int jo_meta_snapshot_begin(struct jo_meta *m, struct jo_err *err)
{
	return m->ops->snapshot_begin ? m->ops->snapshot_begin(m, err) : 0;
}

int jo_meta_snapshot_token(struct jo_meta *m, int64_t *token, struct jo_err *err)
{
	*token = 0;
	return m->ops->snapshot_token ? m->ops->snapshot_token(m, token, err) : 0;
}

int jo_meta_snapshot_begin_at(struct jo_meta *m, int64_t token, struct jo_err *err)
{
	if (!token)
		return jo_meta_snapshot_begin(m, err);
	if (!m->ops->snapshot_begin_at)
		return jo_err_set(err, JO_EUNSUPPORTED, "%s: no shared snapshots",
				  m->ops->engine(m));
	return m->ops->snapshot_begin_at(m, token, err);
}

void jo_meta_snapshot_end(struct jo_meta *m)
{
	if (m && m->ops->snapshot_end)
		m->ops->snapshot_end(m);
}

int jo_meta_describe(struct jo_meta *m, char **out, struct jo_err *err)
{
	*out = NULL;
	return m->ops->describe(m, out, err);
}

const char *jo_meta_url_redacted(const struct jo_meta *m)
{
	return m->url.redacted;
}

int jo_meta_load_format(struct jo_meta *m, struct jo_format *out, struct jo_err *err)
{
	char *json = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = m->ops->get_setting(m, &json, err);
	if (rc != 0)
		return rc;
	rc = jo_format_parse(json, out, err);
	memset(json, 0, strlen(json));
	free(json);
	if (rc != 0)
		return rc;
	if (out->meta_version > 1) {
		int v = out->meta_version;
		jo_format_release(out);
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "volume MetaVersion %d is newer than supported (1)", v);
	}
	return 0;
}

int jo_meta_lookup(struct jo_meta *m, uint64_t parent, const char *name, uint64_t *ino_out,
		   uint8_t *type_out, struct jo_err *err)
{
	uint64_t ino = 0;
	uint8_t type = 0;
	int rc = m->ops->lookup(m, parent, name, &ino, &type, err);

	if (rc == 0) {
		if (ino_out)
			*ino_out = ino;
		if (type_out)
			*type_out = type;
	}
	return rc;
}

int jo_meta_resolve(struct jo_meta *m, const char *path, uint64_t *ino_out, struct jo_err *err)
{
	uint64_t cur = JO_ROOT_INODE;
	const char *p = path;
	char name[256];

	while (*p) {
		const char *e;
		size_t n;
		uint8_t type;
		int rc;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		e = strchr(p, '/');
		n = e ? (size_t)(e - p) : strlen(p);
		if (n >= sizeof(name))
			return jo_err_set(err, JO_ENOTFOUND, "path component too long in \"%s\"", path);
		memcpy(name, p, n);
		name[n] = '\0';
		p += n;
		if (strcmp(name, ".") == 0)
			continue;
		if (strcmp(name, "..") == 0)
			return jo_err_set(err, JO_EINVAL, "\"..\" is not allowed in paths (\"%s\")", path);
		rc = m->ops->lookup(m, cur, name, &cur, &type, err);
		if (rc == JO_ENOTFOUND)
			return jo_err_set(err, JO_ENOTFOUND, "no such file or directory: \"%s\"", path);
		if (rc != 0)
			return rc;
		if (*p && type != JO_TYPE_DIR)
			return jo_err_set(err, JO_ENOTFOUND, "not a directory in path \"%s\"", path);
	}
	*ino_out = cur;
	return 0;
}

struct find_name {
	uint64_t ino;
	char name[256];
	bool found;
};

static int on_find_name(const char *name, size_t name_len, uint64_t ino, uint8_t type,
			void *payload)
{
	struct find_name *f = payload;

	(void)type;
	if (ino != f->ino || name_len >= sizeof(f->name))
		return 0;
	memcpy(f->name, name, name_len);
	f->name[name_len] = '\0';
	f->found = true;
	return 1; /* stop: the first name is the one */
}

int jo_meta_path_of(struct jo_meta *m, uint64_t ino, char **out, struct jo_err *err)
{
	size_t cap = 256, start = cap - 1;
	char *buf = malloc(cap);
	uint64_t cur = ino;
	int rc = 0;

	*out = NULL;
	if (!buf)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	buf[start] = '\0';
	/* a chain longer than this is a loop in corrupt metadata */
	for (int depth = 0; cur != JO_ROOT_INODE; depth++) {
		struct find_name f = { .ino = cur };
		struct jo_attr a;
		uint64_t parent;
		size_t n;

		if (depth > 100000) {
			rc = jo_err_set(err, JO_EPROTO, "inode %llu: parents form a loop",
					(unsigned long long)ino);
			goto out;
		}
		if (cur == JO_TRASH_INODE) {
			strcpy(f.name, ".trash");
			parent = JO_ROOT_INODE;
		} else {
			if ((rc = m->ops->getattr(m, cur, &a, err)) != 0)
				goto out;
			if (!a.parent) {
				rc = jo_err_set(err, JO_ENOTFOUND, "inode %llu is hard-linked: "
						"no single path", (unsigned long long)cur);
				goto out;
			}
			parent = a.parent;
			rc = m->ops->readdir(m, parent, on_find_name, &f, err);
			if (rc == 1)
				rc = 0;
			if (rc)
				goto out;
			if (!f.found) {
				rc = jo_err_set(err, JO_ENOTFOUND, "inode %llu: no entry in its parent %llu",
						(unsigned long long)cur, (unsigned long long)parent);
				goto out;
			}
		}
		n = strlen(f.name);
		while (start < n + 1) {
			char *nb;
			size_t used = cap - start;

			if (cap > SIZE_MAX / 2 || !(nb = malloc(cap * 2))) {
				rc = jo_err_set(err, JO_ENOMEM, "out of memory");
				goto out;
			}
			memcpy(nb + cap * 2 - used, buf + start, used);
			free(buf);
			buf = nb;
			start = cap * 2 - used;
			cap *= 2;
		}
		start -= n;
		memcpy(buf + start, f.name, n);
		buf[--start] = '/';
		cur = parent;
	}
	if (buf[start] == '\0')
		buf[--start] = '/'; /* the root itself */
	memmove(buf, buf + start, cap - start);
	*out = buf;
	buf = NULL;
out:
	free(buf);
	return rc;
}

int jo_meta_getattr(struct jo_meta *m, uint64_t ino, struct jo_attr *out, struct jo_err *err)
{
	return m->ops->getattr(m, ino, out, err);
}

int jo_meta_getattr_many(struct jo_meta *m, const uint64_t *inos, size_t n,
			 struct jo_attr *out, bool *found, struct jo_err *err)
{
	for (size_t i = 0; i < n; i++)
		found[i] = false;
	if (m->ops->getattr_many)
		return n ? m->ops->getattr_many(m, inos, n, out, found, err) : 0;
	for (size_t i = 0; i < n; i++) {
		int rc = m->ops->getattr(m, inos[i], &out[i], err);

		if (rc == JO_ENOTFOUND) {
			jo_err_clear(err);
			continue;
		}
		if (rc)
			return rc;
		found[i] = true;
	}
	return 0;
}

int jo_meta_readdir(struct jo_meta *m, uint64_t dir, jo_meta_dirent_cb cb, void *payload,
		    struct jo_err *err)
{
	return m->ops->readdir(m, dir, cb, payload, err);
}

int jo_meta_readdir_attr(struct jo_meta *m, const uint64_t *dirs, size_t n,
			 jo_meta_dirent_attr_cb cb, void *payload, struct jo_err *err)
{
	if (!m->ops->readdir_attr)
		return jo_err_set(err, JO_EUNSUPPORTED, "%s: no readdir with attributes",
				  jo_meta_engine(m));
	return n ? m->ops->readdir_attr(m, dirs, n, cb, payload, err) : 0;
}

int jo_meta_scan_sustained_registered(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
				      struct jo_err *err)
{
	if (m->ops->scan_sustained_registered)
		return m->ops->scan_sustained_registered(m, cb, payload, err);
	return m->ops->scan_sustained(m, cb, payload, err);
}

int jo_meta_read_chunks(struct jo_meta *m, const struct jo_meta_chunk_req *reqs, size_t n,
			jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	int rc = 0;

	if (m->ops->read_chunks)
		return n ? m->ops->read_chunks(m, reqs, n, cb, payload, err) : 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint32_t *idx = NULL;
		size_t k = 0;

		if (reqs[i].nidx == 0)
			continue;
		rc = m->ops->list_chunks_below(m, reqs[i].ino, reqs[i].nidx, &idx, &k, err);
		for (size_t j = 0; j < k && rc == 0; j++) {
			uint8_t *raw = NULL;
			size_t len = 0;

			rc = m->ops->read_chunk(m, reqs[i].ino, idx[j], &raw, &len, err);
			if (rc == 0 && len)
				rc = cb(reqs[i].ino, idx[j], raw, len, payload);
			free(raw);
		}
		free(idx);
	}
	return rc;
}

int jo_meta_read_chunk(struct jo_meta *m, uint64_t ino, uint32_t indx, uint8_t **out,
		       size_t *len, struct jo_err *err)
{
	*out = NULL;
	*len = 0;
	return m->ops->read_chunk(m, ino, indx, out, len, err);
}

int jo_meta_list_chunks(struct jo_meta *m, uint64_t ino, uint32_t **out, size_t *n,
			struct jo_err *err)
{
	*out = NULL;
	*n = 0;
	return m->ops->list_chunks(m, ino, out, n, err);
}

int jo_meta_list_chunks_len(struct jo_meta *m, uint64_t ino, uint64_t length, uint32_t **out,
			    size_t *n, struct jo_err *err)
{
	uint64_t nidx = (length + JO_CHUNK_SIZE - 1) >> JO_CHUNK_BITS;

	*out = NULL;
	*n = 0;
	if (nidx == 0)
		return 0;
	if (nidx > UINT32_MAX)
		return jo_err_set(err, JO_EINVAL, "file length %llu is too large",
				  (unsigned long long)length);
	return m->ops->list_chunks_below(m, ino, (uint32_t)nidx, out, n, err);
}

int jo_meta_scan_chunks(struct jo_meta *m, jo_meta_chunk_cb cb, void *payload, struct jo_err *err)
{
	return m->ops->scan_chunks(m, cb, payload, err);
}

void jo_meta_even_cuts(uint64_t span, uint64_t unit, size_t n, uint64_t *cuts, size_t *nparts)
{
	size_t np = 1;

	cuts[0] = 0;
	for (size_t k = 1; k < n && span; k++) {
		/* k * span / n without overflow */
		uint64_t c = span / n * k + span % n * k / n;

		if (c > cuts[np - 1] / unit && c < span)
			cuts[np++] = c * unit;
	}
	cuts[np] = UINT64_MAX;
	*nparts = np;
}

int jo_meta_chunk_cuts(struct jo_meta *m, size_t n, uint64_t *cuts, size_t *nparts,
		       struct jo_err *err)
{
	int rc = 0;

	*nparts = 1;
	if (n > 1 && m->ops->chunk_cuts)
		rc = m->ops->chunk_cuts(m, n, cuts, nparts, err);
	if (rc || *nparts <= 1) {
		*nparts = 1;
		cuts[0] = 0;
		cuts[1] = UINT64_MAX;
	}
	for (size_t i = 0; !rc && i < *nparts; i++)
		if (cuts[i] >= cuts[i + 1] || (i == 0 && cuts[0] != 0))
			rc = jo_err_set(err, JO_EPROTO, "chunk cuts out of order");
	if (!rc && cuts[*nparts] != UINT64_MAX)
		rc = jo_err_set(err, JO_EPROTO, "chunk cuts out of order");
	return rc;
}

int jo_meta_scan_chunks_range(struct jo_meta *m, uint64_t from, uint64_t to, jo_meta_chunk_cb cb,
			      void *payload, struct jo_err *err)
{
	if (from >= to)
		return jo_err_set(err, JO_EINVAL, "an empty chunk range");
	if (from == 0 && to == UINT64_MAX)
		return m->ops->scan_chunks(m, cb, payload, err);
	if (!m->ops->scan_chunks_range)
		return jo_err_set(err, JO_EUNSUPPORTED, "%s: the chunks cannot be scanned in parts",
				  m->ops->engine(m));
	return m->ops->scan_chunks_range(m, from, to, cb, payload, err);
}

int jo_meta_scan_inodes(struct jo_meta *m, jo_meta_inode_cb cb, void *payload, struct jo_err *err)
{
	return m->ops->scan_inodes(m, cb, payload, err);
}

int jo_meta_get_slice_ref(struct jo_meta *m, uint64_t id, uint32_t size, int64_t *refs_out,
			  bool *explicit_out, struct jo_err *err)
{
	int64_t refs = 0;
	bool ex = false;
	int rc = m->ops->get_slice_ref(m, id, size, &refs, &ex, err);

	if (rc == 0) {
		if (refs_out)
			*refs_out = refs;
		if (explicit_out)
			*explicit_out = ex;
	}
	return rc;
}

int jo_meta_scan_slice_refs(struct jo_meta *m, jo_meta_ref_cb cb, void *payload,
			    struct jo_err *err)
{
	return m->ops->scan_slice_refs(m, cb, payload, err);
}

int jo_meta_scan_delfiles(struct jo_meta *m, jo_meta_delfile_cb cb, void *payload,
			  struct jo_err *err)
{
	return m->ops->scan_delfiles(m, cb, payload, err);
}

int jo_meta_scan_delslices(struct jo_meta *m, jo_meta_delslices_cb cb, void *payload,
			   struct jo_err *err)
{
	return m->ops->scan_delslices(m, cb, payload, err);
}

int jo_meta_scan_sessions(struct jo_meta *m, jo_meta_session_cb cb, void *payload,
			  struct jo_err *err)
{
	return m->ops->scan_sessions(m, cb, payload, err);
}

int jo_meta_scan_sustained(struct jo_meta *m, jo_meta_sustained_cb cb, void *payload,
			   struct jo_err *err)
{
	return m->ops->scan_sustained(m, cb, payload, err);
}

int jo_meta_scan_detached(struct jo_meta *m, jo_meta_detached_cb cb, void *payload,
			  struct jo_err *err)
{
	return m->ops->scan_detached(m, cb, payload, err);
}

int jo_meta_get_counter(struct jo_meta *m, const char *name, int64_t *out, struct jo_err *err)
{
	return m->ops->get_counter(m, name, out, err);
}
