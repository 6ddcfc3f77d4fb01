/*
 * obj_s3.c: the "s3"/"minio" backend over libcurl, signed by obj_sigv4.
 *
 * Concurrency: a pool of curl easy handles (up to max_conns) guarded by a
 * mutex and condition variable, so many threads can each run one request.
 * Retries with exponential backoff and full jitter happen in s3_do().
 *
 * Connections: one pool of kept-alive connections per endpoint (scheme +
 * host, TLS verification setting) for the whole process, a CURLSH sharing
 * connections, DNS and TLS sessions, used by every handle open on that
 * endpoint (the shards of a volume, both sides of a sync on one endpoint,
 * every command's handle). Its size is the sum of the max_conns of the
 * handles open on it, so a connection that goes back idle stays open for the
 * next request instead of being closed as over the limit (libcurl's default
 * keeps 5, which closes nearly every connection once more than 5 requests
 * run at once). Connections opened are counted (CURLINFO_NUM_CONNECTS) into
 * the stats: after warm-up, about none per request.
 */
#include "common/object/object_internal.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/cancel.h"
#include "common/curlerr.h"
#include "common/err.h"
#include "common/object/obj_sigv4.h"
#include "common/utc.h"

#define S3_MAX_ERR_BODY (256 * 1024)
#define S3_MAX_XML_BODY (64 * 1024 * 1024)
#define S3_BACKOFF_BASE_MS 100
#define S3_BACKOFF_CAP_MS 10000

/*
 * A kept-alive connection pool of one endpoint, shared by the handles open
 * on it. The registry is the one process-wide state of this file besides
 * curl's own: connections belong to the endpoint, not to the handle that
 * happened to open them.
 */
struct s3_endpoint {
	char key[700];                 /* "http(s)://host[:port] insecure=0|1" */
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	int refs;                      /* handles open on it (under ep_mu) */
	atomic_int capacity;           /* sum of their max_conns: the pool size */
	struct s3_endpoint *next;
};

static pthread_mutex_t ep_mu = PTHREAD_MUTEX_INITIALIZER;
static struct s3_endpoint *ep_list;

struct s3_impl {
	struct jo_s3_loc loc;
	char *access_key, *secret_key, *session_token;
	bool list_v1;
	int max_conns, retries, timeout_ms;
	char base_url[640];   /* scheme://[bucket.]host */
	char host_hdr[600];   /* [bucket.]host */
	char path_prefix[300];/* "/bucket" for path style, "" for vhost */

	pthread_mutex_t mu;
	pthread_cond_t cv;
	CURL **idle;
	int nidle, nlive;
	struct s3_endpoint *ep;
	unsigned int seed;

	/* create-only puts: see jo_obj_create_probe in object.h */
	pthread_mutex_t probe_mu;
	char *probe_prefix;   /* where the probe goes; under probe_mu */
	atomic_int probe;     /* enum s3_probe */
	atomic_int inm;       /* enum s3_inm: what the store does with If-None-Match */
	atomic_int create_used;
};

enum s3_probe { PROBE_OFF, PROBE_ARMED, PROBE_DONE };
enum s3_inm {
	INM_UNKNOWN,   /* not probed, or the probe failed: HEAD first, header sent */
	INM_HONOURED,  /* 412 when the key exists: the conditional PUT alone */
	INM_IGNORED,   /* silently overwrites: HEAD first (header sent, harmless) */
	INM_REJECTED,  /* 400/501 for the header: HEAD first, no header */
};

static struct s3_impl *SI(struct jo_obj *o)
{
	return o->impl;
}

/* ---- bucket strings ---- */

static void parse_flags(const char *q, struct jo_s3_loc *loc)
{
	char buf[512], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", q);
	for (char *t = strtok_r(buf, "&", &save); t; t = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(t, '=');
		const char *v = eq ? eq + 1 : "true";

		if (eq)
			*eq = '\0';
		if (strcmp(t, "tls-insecure-skip-verify") == 0)
			loc->insecure = strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0;
		else if (strcmp(t, "disable-checksum") == 0)
			loc->disable_checksum = strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0;
		else if (strcmp(t, "region") == 0)
			snprintf(loc->region, sizeof(loc->region), "%s", v);
		/* disable-100-continue and others need nothing: we never send Expect. */
	}
}

/* Bounded copy that says when it truncated. */
static bool cpy(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	bool fits = l < n;

	if (!fits)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
	return fits;
}

static bool ends_with(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Region of an AWS endpoint host "s3.REGION.amazonaws.com", "s3-REGION...", "s3.amazonaws.com". */
static void aws_region(const char *h, char *out, size_t n)
{
	const char *p;
	size_t l;

	if (strncmp(h, "s3.dualstack.", 13) == 0)
		h += 10;
	if (strncmp(h, "s3.", 3) == 0 || strncmp(h, "s3-", 3) == 0)
		p = h + 3;
	else
		return;
	if (strncmp(p, "amazonaws.com", 13) == 0)
		return;
	l = strcspn(p, ".");
	if (l == 0 || l >= n)
		return;
	memcpy(out, p, l);
	out[l] = '\0';
}

int jo_s3_parse_bucket(const char *storage, const char *bucket, const struct jo_obj_opts *opts,
		       struct jo_s3_loc *out, struct jo_err *err)
{
	char buf[1024], *hostpart, *path, *q;
	bool minio = storage && strcasecmp(storage, "minio") == 0;
	const char *rest;
	size_t hl;

	memset(out, 0, sizeof(*out));
	if (strlen(bucket) >= sizeof(buf))
		return jo_err_set(err, JO_EINVAL, "bucket URL too long");
	snprintf(buf, sizeof(buf), "%s", bucket);
	q = strchr(buf, '?');
	if (q) {
		*q++ = '\0';
		parse_flags(q, out);
	}
	rest = buf;
	if (strncmp(buf, "https://", 8) == 0) {
		out->https = true;
		rest = buf + 8;
	} else if (strncmp(buf, "http://", 7) == 0) {
		rest = buf + 7;
	} else if (strstr(buf, "://")) {
		return jo_err_set(err, JO_EINVAL, "bucket URL '%s': unknown scheme", bucket);
	} else {
		/* JuiceFS: no scheme -> http for dotted non-AWS hosts, else https. */
		size_t l = strcspn(buf, "/");
		char h[256];

		snprintf(h, sizeof(h), "%.*s", (int)(l < 255 ? l : 255), buf);
		out->https = !(strchr(h, '.') && !ends_with(h, ".amazonaws.com"));
	}
	hostpart = (char *)rest;
	path = strchr(hostpart, '/');
	if (path)
		*path++ = '\0';
	while (path && *path == '/')
		path++;
	hl = strlen(hostpart);
	if (hl == 0 || hl >= sizeof(out->host))
		return jo_err_set(err, JO_EINVAL, "bucket URL '%s': bad host", bucket);
	if (strchr(hostpart, '@'))
		return jo_err_set(err, JO_EINVAL,
				  "bucket URL: credentials in the URL are not accepted");
	if (path && *path) {
		size_t bl = strcspn(path, "/");

		if (bl >= sizeof(out->bucket))
			return jo_err_set(err, JO_EINVAL, "bucket URL '%s': bad bucket", bucket);
		memcpy(out->bucket, path, bl);
		out->bucket[bl] = '\0';
	}
	{
		char hostonly[256];

		snprintf(hostonly, sizeof(hostonly), "%.*s", (int)strcspn(hostpart, ":"), hostpart);
		if (!minio && (ends_with(hostonly, ".amazonaws.com") ||
			       ends_with(hostonly, ".amazonaws.com.cn"))) {
			if (strncmp(hostonly, "s3.", 3) == 0 || strncmp(hostonly, "s3-", 3) == 0) {
				/* https://s3.REGION.amazonaws.com/BUCKET: path style. */
				cpy(out->host, sizeof(out->host), hostpart);
				aws_region(hostonly, out->region, sizeof(out->region));
				out->vhost = false;
			} else {
				/* https://BUCKET.s3.REGION.amazonaws.com: virtual host. */
				const char *dot = strchr(hostpart, '.');
				size_t bl = (size_t)(dot - hostpart);

				if (bl >= sizeof(out->bucket))
					return jo_err_set(err, JO_EINVAL, "bucket URL '%s': bad bucket",
							  bucket);
				memcpy(out->bucket, hostpart, bl);
				out->bucket[bl] = '\0';
				snprintf(out->host, sizeof(out->host), "%s", dot + 1);
				aws_region(dot + 1, out->region, sizeof(out->region));
				out->vhost = true;
			}
		} else if (!minio && !out->bucket[0] && strchr(hostonly, '.') &&
			   strspn(hostonly, "0123456789.") != strlen(hostonly)) {
			/* https://BUCKET.HOST: a non-AWS virtual host. */
			const char *dot = strchr(hostpart, '.');
			size_t bl = (size_t)(dot - hostpart);

			memcpy(out->bucket, hostpart, bl);
			out->bucket[bl] = '\0';
			snprintf(out->host, sizeof(out->host), "%s", dot + 1);
			out->vhost = true;
		} else {
			cpy(out->host, sizeof(out->host), hostpart);
			out->vhost = false;
		}
	}
	if (!out->bucket[0])
		return jo_err_set(err, JO_EINVAL, "bucket URL '%s': no bucket name", bucket);
	if (opts) {
		if (opts->region && *opts->region)
			snprintf(out->region, sizeof(out->region), "%s", opts->region);
		if (opts->addressing == 1 || minio)
			out->vhost = false;
		else if (opts->addressing == 2)
			out->vhost = true;
		if (opts->insecure)
			out->insecure = true;
	}
	if (minio)
		out->vhost = false;
	if (!out->region[0])
		snprintf(out->region, sizeof(out->region), "us-east-1");
	return 0;
}

/* ---- curl handle pool ---- */

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ud)
{
	struct s3_endpoint *e = ud;

	(void)h;
	(void)access;
	pthread_mutex_lock(&e->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ud)
{
	struct s3_endpoint *e = ud;

	(void)h;
	pthread_mutex_unlock(&e->share_mu[data]);
}

/* The endpoint's pool, made on first use; its size grows by max_conns. NULL: out of memory. */
static struct s3_endpoint *endpoint_get(const char *base, bool insecure, int max_conns)
{
	char key[sizeof(((struct s3_endpoint *)0)->key)];
	struct s3_endpoint *e;

	snprintf(key, sizeof(key), "%s insecure=%d", base, insecure ? 1 : 0);
	pthread_mutex_lock(&ep_mu);
	for (e = ep_list; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->share = curl_share_init();
		if (!e || !e->share) {
			free(e);
			pthread_mutex_unlock(&ep_mu);
			return NULL;
		}
		snprintf(e->key, sizeof(e->key), "%s", key);
		for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
			pthread_mutex_init(&e->share_mu[i], NULL);
		curl_share_setopt(e->share, CURLSHOPT_LOCKFUNC, share_lock);
		curl_share_setopt(e->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
		curl_share_setopt(e->share, CURLSHOPT_USERDATA, e);
		curl_share_setopt(e->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
		curl_share_setopt(e->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
		curl_share_setopt(e->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
		e->next = ep_list;
		ep_list = e;
	}
	e->refs++;
	atomic_fetch_add(&e->capacity, max_conns);
	pthread_mutex_unlock(&ep_mu);
	return e;
}

/* Give back a handle's share of the pool; the last one closes its connections. */
static void endpoint_put(struct s3_endpoint *e, int max_conns)
{
	struct s3_endpoint **pp;

	if (!e)
		return;
	pthread_mutex_lock(&ep_mu);
	atomic_fetch_sub(&e->capacity, max_conns);
	if (--e->refs > 0) {
		pthread_mutex_unlock(&ep_mu);
		return;
	}
	for (pp = &ep_list; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&ep_mu);
	curl_share_cleanup(e->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&e->share_mu[i]);
	free(e);
}

static CURL *pool_take(struct s3_impl *s)
{
	CURL *h = NULL;

	pthread_mutex_lock(&s->mu);
	while (s->nidle == 0 && s->nlive >= s->max_conns)
		pthread_cond_wait(&s->cv, &s->mu);
	if (s->nidle > 0) {
		h = s->idle[--s->nidle];
	} else {
		h = curl_easy_init();
		if (h)
			s->nlive++;
	}
	pthread_mutex_unlock(&s->mu);
	return h;
}

static void pool_give(struct s3_impl *s, CURL *h)
{
	pthread_mutex_lock(&s->mu);
	s->idle[s->nidle++] = h;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* ---- one request ---- */

struct s3_hdr {
	const char *name;
	char value[1200];
};

struct s3_req {
	const char *op;            /* "GET", for messages */
	const char *method;
	const char *key;           /* NULL: bucket-level */
	const char *what;          /* for messages instead of the key (a listing's prefix) */
	const char *query;         /* canonical query (already encoded) or NULL */
	struct s3_hdr hdrs[12];    /* extra signed headers */
	int nhdrs;
	const void *body;
	size_t body_len;
	/* GET streaming */
	jo_obj_write_cb sink;
	void *sink_payload;
	uint64_t range_off;
	int64_t range_len;         /* -1 to the end; only with range */
	bool ranged;
	bool want_meta;
	size_t max_body;           /* for bodies kept in resp */

	/* results */
	long status;
	struct jo_dynbuf resp;    /* body of non-streamed / error replies */
	uint64_t delivered;        /* bytes given to sink */
	int sink_rc;
	char etag[72];
	char content_type[128];
	uint64_t content_length;
	bool have_length;
	uint64_t total_size;       /* from Content-Range */
	bool have_total;
	int64_t mtime;
	struct jo_dynbuf meta;    /* "name\0value\0..." of x-amz-meta-* */
	size_t nmeta;
	size_t upload_pos;
	int attempts;              /* requests sent for it (1 + retries) */
};

static void s3_hdr_add(struct s3_req *r, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void s3_hdr_add(struct s3_req *r, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (r->nhdrs >= (int)(sizeof(r->hdrs) / sizeof(r->hdrs[0])))
		return;
	r->hdrs[r->nhdrs].name = name;
	va_start(ap, fmt);
	vsnprintf(r->hdrs[r->nhdrs].value, sizeof(r->hdrs[0].value), fmt, ap);
	va_end(ap);
	r->nhdrs++;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
	struct s3_req *r = ud;
	size_t n = size * nmemb;
	if (r->sink && r->status >= 200 && r->status < 300) {
		int rc = r->sink(data, n, r->sink_payload);

		if (rc) {
			r->sink_rc = rc;
			return 0;
		}
		r->delivered += n;
		return n;
	}
	if (jo_dynbuf_add(&r->resp, data, n) < 0)
		return 0;
	return n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *ud)
{
	struct s3_req *r = ud;
	size_t n = size * nitems, left = r->body_len - r->upload_pos;

	if (n > left)
		n = left;
	memcpy(buf, (const char *)r->body + r->upload_pos, n);
	r->upload_pos += n;
	return n;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
	struct s3_req *r = ud;

	if (origin != SEEK_SET || off < 0 || (size_t)off > r->body_len)
		return CURL_SEEKFUNC_FAIL;
	r->upload_pos = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

static void trim(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\r' || s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
}

/* RFC 7231 IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"; 0 when unparsable. */
static int64_t parse_http_date(const char *s)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	char mon[4] = "";
	const char *m;
	int d, y, hh, mm, ss;

	if (sscanf(s, "%*3s, %d %3s %d %d:%d:%d", &d, mon, &y, &hh, &mm, &ss) != 6)
		return 0;
	m = strstr(months, mon);
	if (!m || strlen(mon) != 3)
		return 0;
	return jo_utc_seconds(y, (int)(m - months) / 3 + 1, d, hh, mm, ss);
}

static size_t on_header(char *data, size_t size, size_t nitems, void *ud)
{
	struct s3_req *r = ud;
	size_t n = size * nitems;
	char line[2048], *colon, *v;

	if (n >= sizeof(line))
		return n; /* ignore oversized headers */
	memcpy(line, data, n);
	line[n] = '\0';
	trim(line);
	if (strncmp(line, "HTTP/", 5) == 0) {
		/* A new response (after 100 Continue or a redirect): start over. */
		const char *sp = strchr(line, ' ');

		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = r->content_type[0] = '\0';
		r->have_length = r->have_total = false;
		jo_dynbuf_reset(&r->meta);
		r->nmeta = 0;
		return n;
	}
	colon = strchr(line, ':');
	if (!colon)
		return n;
	*colon = '\0';
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	if (strcasecmp(line, "ETag") == 0) {
		size_t l = strlen(v);

		if (l >= 2 && v[0] == '"' && v[l - 1] == '"') {
			v[l - 1] = '\0';
			v++;
		}
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	} else if (strcasecmp(line, "Content-Length") == 0) {
		r->content_length = strtoull(v, NULL, 10);
		r->have_length = true;
	} else if (strcasecmp(line, "Content-Range") == 0) {
		const char *slash = strchr(v, '/');

		if (slash && slash[1] != '*') {
			r->total_size = strtoull(slash + 1, NULL, 10);
			r->have_total = true;
		}
	} else if (strcasecmp(line, "Content-Type") == 0) {
		snprintf(r->content_type, sizeof(r->content_type), "%s", v);
	} else if (strcasecmp(line, "Last-Modified") == 0) {
		r->mtime = parse_http_date(v);
	} else if (r->want_meta && strncasecmp(line, "x-amz-meta-", 11) == 0) {
		for (char *p = line + 11; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		jo_dynbuf_add(&r->meta, line + 11, strlen(line + 11) + 1);
		jo_dynbuf_add(&r->meta, v, strlen(v) + 1);
		r->nmeta++;
	}
	return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)ud;
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return jo_cancelled() ? 1 : 0;
}

/* Path (URI-encoded) of the request, e.g. "/bucket/a%20b". */
static int req_path(struct s3_impl *s, const char *key, struct jo_dynbuf *b)
{
	jo_dynbuf_adds(b, s->path_prefix);
	if (key) {
		jo_dynbuf_adds(b, "/");
		jo_obj_uri_encode(b, key, true);
	} else if (!s->path_prefix[0]) {
		jo_dynbuf_adds(b, "/");
	}
	return b->failed ? JO_ENOMEM : 0;
}

enum s3_class { S3_OK, S3_RETRY, S3_FAIL };

static int map_code(long status, const char *code)
{
	if (code && *code) {
		if (strcmp(code, "NoSuchBucket") == 0)
			return JO_ESTATE;
		if (strcmp(code, "NoSuchKey") == 0 || strcmp(code, "NoSuchUpload") == 0)
			return JO_ENOTFOUND;
		if (strcmp(code, "SignatureDoesNotMatch") == 0 ||
		    strcmp(code, "InvalidAccessKeyId") == 0 || strcmp(code, "AccessDenied") == 0 ||
		    strcmp(code, "ExpiredToken") == 0 || strcmp(code, "InvalidToken") == 0 ||
		    strcmp(code, "RequestTimeTooSkewed") == 0 ||
		    strcmp(code, "AuthorizationHeaderMalformed") == 0)
			return JO_EAUTH;
		if (strcmp(code, "InvalidRange") == 0 || strcmp(code, "InvalidArgument") == 0 ||
		    strcmp(code, "EntityTooSmall") == 0 || strcmp(code, "InvalidPart") == 0 ||
		    strcmp(code, "InvalidPartOrder") == 0 || strcmp(code, "KeyTooLongError") == 0)
			return JO_EINVAL;
		if (strcmp(code, "PreconditionFailed") == 0)
			return JO_ECONFLICT;
		if (strcmp(code, "SlowDown") == 0 || strcmp(code, "InternalError") == 0 ||
		    strcmp(code, "ServiceUnavailable") == 0 || strcmp(code, "RequestTimeout") == 0)
			return JO_EIO;
		if (strcmp(code, "NotImplemented") == 0)
			return JO_EUNSUPPORTED;
	}
	switch (status) {
	case 404: return JO_ENOTFOUND;
	case 401:
	case 403: return JO_EAUTH;
	case 412: return JO_ECONFLICT;
	case 409: return JO_ECONFLICT;
	case 400: return JO_EINVAL;
	case 501: return JO_EUNSUPPORTED;
	default: return JO_EIO;
	}
}

/* For replies without an S3 error body (HEAD, some proxies). */
static const char *status_text(long status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 409: return "Conflict";
	case 412: return "Precondition Failed";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "(no error code)";
	}
}

/* The server asks for a slower pace (retried on the throttle budget). */
static bool throttle_code(const char *code)
{
	return strcmp(code, "SlowDown") == 0 || strcmp(code, "Throttling") == 0 ||
	       strcmp(code, "ThrottlingException") == 0 || strcmp(code, "RequestLimitExceeded") == 0 ||
	       strcmp(code, "TooManyRequests") == 0;
}

/*
 * Worth retrying whatever the status: every throttle code, and a few more.
 * ConditionalRequestConflict (409) answers a conditional write that raced
 * another write of the key; AWS documents it as retryable.
 */
static bool transient_code(const char *code)
{
	return throttle_code(code) || strcmp(code, "InternalError") == 0 ||
	       strcmp(code, "ServiceUnavailable") == 0 || strcmp(code, "RequestTimeout") == 0 ||
	       strcmp(code, "ConditionalRequestConflict") == 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !jo_cancelled())
		;
}

static long backoff_ms(struct s3_impl *s, int attempt)
{
	long cap = S3_BACKOFF_BASE_MS;
	unsigned int r;

	for (int i = 0; i < attempt && cap < S3_BACKOFF_CAP_MS; i++)
		cap *= 2;
	if (cap > S3_BACKOFF_CAP_MS)
		cap = S3_BACKOFF_CAP_MS;
	pthread_mutex_lock(&s->mu);
	r = (unsigned int)rand_r(&s->seed);
	pthread_mutex_unlock(&s->mu);
	return (long)(r % (unsigned int)(cap + 1)); /* full jitter */
}

static const char *req_what(const struct s3_req *r)
{
	return r->what ? r->what : r->key ? r->key : "";
}

/* Set up h for one attempt and run it. */
static CURLcode s3_perform(struct jo_obj *o, CURL *h, struct s3_req *r, char *curl_err)
{
	struct s3_impl *s = SI(o);
	struct jo_dynbuf path, url;
	struct curl_slist *hl = NULL;
	struct jo_sigv4_header sh[20];
	char amz_date[17], payload_hash[65], range[80], line[1400];
	size_t nsh = 0;
	time_t now = time(NULL);
	struct tm tm;
	CURLcode cc;

	jo_dynbuf_init(&path, 0);
	jo_dynbuf_init(&url, 0);
	req_path(s, r->key, &path);
	jo_dynbuf_addf(&url, "%s%s", s->base_url, path.p ? path.p : "/");
	if (r->query && *r->query)
		jo_dynbuf_addf(&url, "?%s", r->query);
	if (path.failed || url.failed) {
		jo_dynbuf_release(&path);
		jo_dynbuf_release(&url);
		return CURLE_OUT_OF_MEMORY;
	}
	gmtime_r(&now, &tm);
	strftime(amz_date, sizeof(amz_date), "%Y%m%dT%H%M%SZ", &tm);
	jo_sigv4_sha256_hex(r->body ? r->body : "", r->body ? r->body_len : 0, payload_hash);

	sh[nsh++] = (struct jo_sigv4_header){ "host", s->host_hdr };
	sh[nsh++] = (struct jo_sigv4_header){ "x-amz-date", amz_date };
	sh[nsh++] = (struct jo_sigv4_header){ "x-amz-content-sha256", payload_hash };
	if (s->session_token)
		sh[nsh++] = (struct jo_sigv4_header){ "x-amz-security-token", s->session_token };
	range[0] = '\0';
	if (r->ranged) {
		uint64_t start = r->range_off + r->delivered;

		if (r->range_len >= 0)
			snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)start,
				 (unsigned long long)(r->range_off + (uint64_t)r->range_len - 1));
		else
			snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)start);
		sh[nsh++] = (struct jo_sigv4_header){ "range", range };
	}
	for (int i = 0; i < r->nhdrs && nsh < sizeof(sh) / sizeof(sh[0]); i++)
		sh[nsh++] = (struct jo_sigv4_header){ r->hdrs[i].name, r->hdrs[i].value };

	for (size_t i = 0; i < nsh; i++) {
		snprintf(line, sizeof(line), "%s: %s", sh[i].name, sh[i].value);
		hl = curl_slist_append(hl, line);
	}
	if (s->access_key && s->secret_key) {
		struct jo_sigv4_req sr = {
			.method = r->method, .path = path.p, .query = r->query, .headers = sh,
			.nheaders = nsh, .payload_hash = payload_hash, .access_key = s->access_key,
			.secret_key = s->secret_key, .region = s->loc.region, .service = "s3",
			.amz_date = amz_date,
		};
		char *auth = jo_sigv4_authorization(&sr);
		struct jo_dynbuf ab;

		if (!auth) {
			curl_slist_free_all(hl);
			jo_dynbuf_release(&path);
			jo_dynbuf_release(&url);
			return CURLE_OUT_OF_MEMORY;
		}
		jo_dynbuf_init(&ab, 0);
		jo_dynbuf_addf(&ab, "Authorization: %s", auth);
		hl = curl_slist_append(hl, ab.p);
		jo_dynbuf_release(&ab);
		free(auth);
	}
	/* No "Expect: 100-continue" round trip for our small bodies. */
	hl = curl_slist_append(hl, "Expect:");
	if (!r->body)
		hl = curl_slist_append(hl, "Content-Type:");

	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_SHARE, s->ep->share);
	/* the whole endpoint's pool: an idle connection is kept, not closed as one too many */
	curl_easy_setopt(h, CURLOPT_MAXCONNECTS, (long)atomic_load(&s->ep->capacity));
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_URL, url.p);
	/* Keys may hold "." / ".." segments: curl must not squash them (the signature covers the path). */
	curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, r);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(s->timeout_ms < 10000 ? s->timeout_ms : 10000));
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)((s->timeout_ms + 999) / 1000));
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (s->loc.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (r->body) {
		r->upload_pos = 0;
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, r);
		curl_easy_setopt(h, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(h, CURLOPT_SEEKDATA, r);
		if (strcmp(r->method, "PUT") != 0)
			curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	} else if (strcmp(r->method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	}
	r->status = 0;
	jo_dynbuf_reset(&r->resp);
	curl_err[0] = '\0';
	cc = curl_easy_perform(h);
	if (r->status == 0) {
		long st = 0;

		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
		r->status = st;
	}
	{
		curl_off_t up = 0, down = 0;

		long nconn = 0;

		curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
		curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
		curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn);
		atomic_fetch_add(&o->ctr->bytes_out, (uint64_t)up);
		atomic_fetch_add(&o->ctr->bytes_in, (uint64_t)down);
		if (nconn > 0)
			atomic_fetch_add(&o->ctr->connections, (uint64_t)nconn);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hl);
	jo_dynbuf_release(&path);
	jo_dynbuf_release(&url);
	return cc;
}

static bool curl_transient(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return true;
	default:
		return false;
	}
}

/*
 * Run a request with retries. Returns 0 when the server answered 2xx (or
 * one of the accepted statuses in ok_status), else a JO_E* with err set.
 * r->status and r->resp keep the last reply for the caller.
 */
static int s3_do(struct jo_obj *o, struct s3_req *r, const long *ok_status, struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	char curl_err[CURL_ERROR_SIZE];
	CURL *h;
	int rc = 0;

	jo_dynbuf_init(&r->resp, r->max_body ? r->max_body : S3_MAX_ERR_BODY);
	jo_dynbuf_init(&r->meta, 64 * 1024);
	h = pool_take(s);
	if (!h)
		return jo_err_set(err, JO_ENOMEM, "s3: cannot create a curl handle");
	for (int attempt = 0, other = 0, throttled = 0;; attempt++) {
		CURLcode cc;
		char code[64] = "", msg[256] = "";
		bool retry = false, throttle = false;

		if (jo_cancelled()) {
			rc = jo_err_set(err, JO_ECANCELED, "s3 %s '%s': canceled", r->op, req_what(r));
			break;
		}
		atomic_fetch_add(&o->ctr->requests, 1);
		r->attempts = attempt + 1;
		if (attempt > 0)
			atomic_fetch_add(&o->ctr->retries, 1);
		cc = s3_perform(o, h, r, curl_err);
		if (r->sink_rc) {
			rc = jo_err_set(err, r->sink_rc, "s3 %s '%s': stopped by the sink", r->op,
					req_what(r));
			break;
		}
		if (cc != CURLE_OK) {
			if (cc == CURLE_ABORTED_BY_CALLBACK) {
				rc = jo_err_set(err, JO_ECANCELED, "s3 %s '%s': canceled", r->op,
						req_what(r));
				break;
			}
			if (r->resp.failed) {
				rc = jo_err_set(err, JO_EPROTO, "s3 %s '%s' at %s: reply body too large",
						r->op, req_what(r), o->desc);
				break;
			}
			retry = curl_transient(cc);
			rc = jo_err_set(err, jo_curl_code(cc, 0), "s3 %s '%s' at %s: %s", r->op,
					req_what(r), o->desc, curl_err[0] ? curl_err : curl_easy_strerror(cc));
		} else {
			bool ok = r->status >= 200 && r->status < 300;

			for (const long *p = ok_status; !ok && p && *p; p++)
				ok = r->status == *p;
			if (ok) {
				rc = 0;
				break;
			}
			if (r->resp.len &&
			    jo_s3xml_parse_error(r->resp.p, r->resp.len, code, sizeof(code), msg,
						 sizeof(msg)) != 1)
				code[0] = msg[0] = '\0';
			/* 501 NotImplemented is an answer, not a passing failure */
			retry = (r->status >= 500 && r->status != 501) || r->status == 429 ||
				transient_code(code);
			throttle = r->status == 429 || r->status == 503 || throttle_code(code);
			rc = jo_err_set(err, map_code(r->status, code), "s3 %s '%s' at %s: %ld %s%s%s",
					r->op, req_what(r), o->desc, r->status,
					code[0] ? code : status_text(r->status), msg[0] ? ": " : "", msg);
		}
		/*
		 * A throttled reply is a live server asking us to slow down, not a
		 * failure of the request: it has a budget of its own, twice the
		 * general one (the default 10 is rclone's --low-level-retries).
		 */
		if (!retry || (throttle ? throttled++ >= 2 * s->retries : other++ >= s->retries))
			break;
		/* A streamed GET resumes after the bytes already delivered. */
		if (r->sink && r->delivered && !r->ranged) {
			r->ranged = true;
			r->range_off = 0;
			r->range_len = -1;
		}
		sleep_ms(backoff_ms(s, attempt));
	}
	pool_give(s, h);
	if (rc)
		atomic_fetch_add(&o->ctr->errors, 1);
	return rc;
}

static void s3_req_release(struct s3_req *r)
{
	jo_dynbuf_release(&r->resp);
	jo_dynbuf_release(&r->meta);
}

/* ---- operations ---- */

/* The collected x-amz-meta-* headers and Content-Type as one allocation. */
static int pack_meta(const struct s3_req *r, char ***meta_out, const char **ctype_out,
		     struct jo_err *err)
{
	size_t ct = strlen(r->content_type) + 1;
	size_t ptrs = (2 * r->nmeta + 1) * sizeof(char *);
	char **m = malloc(ptrs + r->meta.len + ct);
	char *p;

	if (!m)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	p = (char *)m + ptrs;
	if (r->meta.len)
		memcpy(p, r->meta.p, r->meta.len);
	for (size_t i = 0; i < 2 * r->nmeta; i++) {
		m[i] = p;
		p += strlen(p) + 1;
	}
	m[2 * r->nmeta] = NULL;
	memcpy(p, r->content_type, ct);
	if (ctype_out)
		*ctype_out = p;
	*meta_out = m;
	return 0;
}

static int s3_get(struct jo_obj *o, const char *key, const struct jo_obj_get_opts *go,
		  jo_obj_write_cb cb, void *payload, struct jo_err *err)
{
	struct s3_req r = { .op = "GET", .method = "GET", .key = key, .sink = cb,
			    .sink_payload = payload };
	static const long ok416[] = { 416, 0 };
	int rc;

	if (go->offset > 0 || go->length >= 0) {
		r.ranged = true;
		r.range_off = go->offset;
		r.range_len = go->length;
	}
	if (go->if_match)
		s3_hdr_add(&r, "if-match", "\"%s\"", go->if_match);
	r.want_meta = go->meta_out != NULL;
	rc = s3_do(o, &r, ok416, err);
	if (rc == 0 && r.status == 416)
		rc = 0; /* a range past the end: no bytes */
	if (rc == 0 && go->info) {
		go->info->key = key;
		go->info->size = r.have_total ? r.total_size : r.content_length;
		go->info->mtime = r.mtime;
		snprintf(go->info->etag, sizeof(go->info->etag), "%s", r.etag);
		go->info->content_type = NULL;
	}
	if (rc == 0 && go->meta_out)
		rc = pack_meta(&r, go->meta_out, go->info ? &go->info->content_type : NULL, err);
	s3_req_release(&r);
	return rc;
}

/*
 * User metadata headers need their names kept somewhere for the request's
 * lifetime; we build "x-amz-meta-name" strings in a side buffer.
 */
struct meta_names {
	char names[12][160];
};

static int put_meta(struct s3_req *r, struct meta_names *mn, const char *const *meta,
		    struct jo_err *err)
{
	int k = 0;

	for (size_t i = 0; meta && meta[i] && meta[i + 1]; i += 2) {
		if (k >= 8 || r->nhdrs >= (int)(sizeof(r->hdrs) / sizeof(r->hdrs[0])))
			return jo_err_set(err, JO_EINVAL, "s3: too many metadata entries (max 8)");
		if (strlen(meta[i]) > 120 || strlen(meta[i + 1]) >= sizeof(r->hdrs[0].value))
			return jo_err_set(err, JO_EINVAL, "s3: metadata '%s' too long", meta[i]);
		for (const char *p = meta[i]; *p; p++)
			if (!(isalnum((unsigned char)*p) || *p == '-' || *p == '_'))
				return jo_err_set(err, JO_EINVAL, "s3: bad metadata name '%s'", meta[i]);
		for (const char *p = meta[i + 1]; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
				return jo_err_set(err, JO_EINVAL, "s3: metadata '%s' has a non-printable value",
						  meta[i]);
		snprintf(mn->names[k], sizeof(mn->names[0]), "x-amz-meta-%s", meta[i]);
		for (char *p = mn->names[k]; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		s3_hdr_add(r, mn->names[k], "%s", meta[i + 1]);
		k++;
	}
	return 0;
}

static int s3_head(struct jo_obj *o, const char *key, struct jo_obj_info *info,
		   char ***meta_out, struct jo_err *err)
{
	struct s3_req r = { .op = "HEAD", .method = "HEAD", .key = key, .want_meta = !!meta_out };
	int rc = s3_do(o, &r, NULL, err);

	if (rc == 0) {
		info->size = r.content_length;
		info->mtime = r.mtime;
		snprintf(info->etag, sizeof(info->etag), "%s", r.etag);
		if (meta_out)
			rc = pack_meta(&r, meta_out, &info->content_type, err);
	}
	s3_req_release(&r);
	return rc;
}

static int s3_del(struct jo_obj *o, const char *key, struct jo_err *err);

/* The key holds exactly these bytes (a plain single-PUT ETag is their MD5). */
static bool holds(struct jo_obj *o, const char *key, const void *data, size_t len)
{
	struct jo_obj_info info = { .key = key };
	struct jo_err e = { 0 };
	char md5[33];

	if (s3_head(o, key, &info, NULL, &e) != 0 || info.size != len)
		return false;
	jo_obj_md5_hex(data, len, md5);
	return strcasecmp(info.etag, md5) == 0;
}

/*
 * One PUT; inm: with "If-None-Match: *", and a 412 is JO_EEXIST. *status
 * gets the last reply's HTTP status (0: none).
 */
static int put_req(struct jo_obj *o, const char *key, const void *data, size_t len,
		   const struct jo_obj_put_opts *po, bool inm, long *status, struct jo_err *err)
{
	struct s3_req r = { .op = "PUT", .method = "PUT", .key = key, .body = data,
			    .body_len = len };
	struct meta_names mn;
	int rc;

	*status = 0;
	s3_hdr_add(&r, "content-type", "%s",
		   po->content_type ? po->content_type : "application/octet-stream");
	if (po->content_md5) {
		char md5[25];

		jo_obj_md5_base64(data, len, md5);
		s3_hdr_add(&r, "content-md5", "%s", md5);
	}
	if (inm)
		s3_hdr_add(&r, "if-none-match", "*");
	rc = put_meta(&r, &mn, po->meta, err);
	if (rc)
		return rc;
	rc = s3_do(o, &r, NULL, err);
	*status = r.status;
	if (rc && inm && r.status == 412) {
		/*
		 * A retried PUT may find the object that its own first attempt
		 * wrote before the reply was lost: that is ours, not a conflict.
		 */
		if (r.attempts > 1 && holds(o, key, data, len)) {
			jo_err_clear(err);
			rc = 0;
		} else {
			rc = jo_err_set(err, JO_EEXIST, "s3 PUT '%s' at %s: it exists (412: left as it is)",
					key, o->desc);
		}
	}
	s3_req_release(&r);
	return rc;
}

/* A reply that refuses the If-None-Match header itself. */
static bool inm_refused(int rc, long status)
{
	return status == 400 || status == 501 || rc == JO_EUNSUPPORTED;
}

/*
 * What the store does with If-None-Match: * on PUT, asked with a probe
 * object of our own under the armed prefix (object.h, jo_obj_create_probe).
 */
static int inm_probe(struct jo_obj *o, const char *prefix)
{
	static const struct jo_obj_put_opts plain = { 0 };
	static const char one[] = "jfsops create-only probe 1\n", two[] = "jfsops create-only probe 2\n";
	struct s3_impl *s = SI(o);
	struct jo_dynbuf key;
	struct jo_err e = { 0 };
	char seed[128], hex[65];
	long status;
	int rc, res;

	pthread_mutex_lock(&s->mu);
	snprintf(seed, sizeof(seed), "%ld %d %p %u", (long)time(NULL), (int)getpid(), (void *)s,
		 (unsigned int)rand_r(&s->seed));
	pthread_mutex_unlock(&s->mu);
	jo_sigv4_sha256_hex(seed, strlen(seed), hex);
	jo_dynbuf_init(&key, 0);
	jo_dynbuf_addf(&key, "%sjfsops-create-probe-%.16s", prefix, hex);
	if (key.failed) {
		jo_dynbuf_release(&key);
		return INM_UNKNOWN;
	}
	rc = put_req(o, key.p, one, sizeof(one) - 1, &plain, true, &status, &e);
	if (rc) {
		/* refused: nothing written. Taken: honoured, and not ours to delete. */
		res = rc == JO_EEXIST ? INM_HONOURED
		    : inm_refused(rc, status) ? INM_REJECTED : INM_UNKNOWN;
		jo_dynbuf_release(&key);
		return res;
	}
	rc = put_req(o, key.p, two, sizeof(two) - 1, &plain, true, &status, &e);
	res = rc == JO_EEXIST ? INM_HONOURED : rc == 0 ? INM_IGNORED : INM_UNKNOWN;
	/* best effort: a probe left behind is a few bytes of ours under prefix */
	(void)s3_del(o, key.p, &e);
	jo_dynbuf_release(&key);
	return res;
}

static int s3_create_probe(struct jo_obj *o, const char *prefix, struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	char *p = strdup(prefix);

	if (!p)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	pthread_mutex_lock(&s->probe_mu);
	if (atomic_load(&s->probe) == PROBE_DONE) {
		free(p); /* the store was asked already */
	} else {
		free(s->probe_prefix);
		s->probe_prefix = p;
		atomic_store(&s->probe, PROBE_ARMED);
	}
	pthread_mutex_unlock(&s->probe_mu);
	return 0;
}

/* Run an armed probe once (the first create-only put; the others wait for it). */
static void probe_once(struct jo_obj *o)
{
	struct s3_impl *s = SI(o);

	if (atomic_load(&s->probe) != PROBE_ARMED)
		return;
	pthread_mutex_lock(&s->probe_mu);
	if (atomic_load(&s->probe) == PROBE_ARMED) {
		atomic_store(&s->inm, inm_probe(o, s->probe_prefix));
		atomic_store(&s->probe, PROBE_DONE);
	}
	pthread_mutex_unlock(&s->probe_mu);
}

/*
 * A create-only put. Unless the store is known to honour If-None-Match,
 * the HEAD comes first: on a store that ignores the header the PUT alone
 * would replace an existing object without a word.
 */
static int put_create(struct jo_obj *o, const char *key, const void *data, size_t len,
		      const struct jo_obj_put_opts *po, struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	int inm, rc;
	long status;

	probe_once(o);
	inm = atomic_load(&s->inm);
	jo_obj_create_note(&s->create_used,
			   inm == INM_HONOURED ? JO_CREATE_IF_NONE_MATCH : JO_CREATE_HEAD_THEN_PUT);
	if (inm != INM_HONOURED) {
		struct jo_obj_info info = { .key = key };

		rc = s3_head(o, key, &info, NULL, err);
		if (rc == 0)
			return jo_err_set(err, JO_EEXIST, "s3 PUT '%s' at %s: it exists (HEAD: left as "
					  "it is)", key, o->desc);
		if (rc != JO_ENOTFOUND)
			return jo_err_wrap(err, "create '%s': HEAD", key);
		jo_err_clear(err);
	}
	rc = put_req(o, key, data, len, po, inm != INM_REJECTED, &status, err);
	if (rc && rc != JO_EEXIST && inm == INM_UNKNOWN && inm_refused(rc, status)) {
		/* a store that refuses the header (nothing was written): the HEAD stays the check */
		jo_err_clear(err);
		rc = put_req(o, key, data, len, po, false, &status, err);
		if (rc == 0)
			atomic_store(&s->inm, INM_REJECTED);
	}
	return rc;
}

static int s3_put(struct jo_obj *o, const char *key, const void *data, size_t len,
		  const struct jo_obj_put_opts *po, struct jo_err *err)
{
	long status;

	if (po->create_only)
		return put_create(o, key, data, len, po, err);
	return put_req(o, key, data, len, po, false, &status, err);
}

static int s3_create_used(struct jo_obj *o)
{
	return atomic_load(&SI(o)->create_used);
}

static int s3_del(struct jo_obj *o, const char *key, struct jo_err *err)
{
	struct s3_req r = { .op = "DELETE", .method = "DELETE", .key = key };
	static const long ok404[] = { 404, 0 };
	int rc = s3_do(o, &r, ok404, err);

	if (rc == 0 && r.status == 404) {
		char code[64], msg[64];

		/* A missing key is success; a missing bucket is not. */
		if (r.resp.len &&
		    jo_s3xml_parse_error(r.resp.p, r.resp.len, code, sizeof(code), msg,
					 sizeof(msg)) == 1 &&
		    strcmp(code, "NoSuchBucket") == 0)
			rc = jo_err_set(err, JO_ESTATE, "s3 DELETE '%s' at %s: 404 NoSuchBucket", key,
					o->desc);
	}
	s3_req_release(&r);
	return rc;
}

struct del_map {
	const char *const *keys;
	size_t *order;   /* indexes sorted by key */
	size_t n;
	int *results;
	int failed;
};

static int del_cb(const char *key, const char *code, const char *message, void *payload)
{
	struct del_map *m = payload;
	size_t lo = 0, hi = m->n;

	(void)message;
	if (!code || strcmp(code, "NoSuchKey") == 0)
		return 0;
	/* Binary search for the first index with this key. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (strcmp(m->keys[m->order[mid]], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < m->n && strcmp(m->keys[m->order[lo]], key) == 0; lo++)
		m->results[m->order[lo]] = map_code(0, code);
	m->failed++;
	return 0;
}

struct sort_ctx_item {
	const char *key;
	size_t idx;
};

static int cmp_item(const void *a, const void *b)
{
	const struct sort_ctx_item *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	if (c)
		return c;
	return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static bool xml_safe(const char *k)
{
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

static int s3_delete_chunk(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			   struct jo_err *err)
{
	struct s3_req r = { .op = "DeleteObjects", .method = "POST", .query = "delete=" };
	struct jo_dynbuf body;
	struct sort_ctx_item *items = calloc(n, sizeof(*items));
	size_t *order = calloc(n, sizeof(*order));
	struct del_map m = { .keys = keys, .order = order, .n = n, .results = results };
	char md5[25];
	int rc = 0;

	jo_dynbuf_init(&body, 0);
	if (!items || !order) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	jo_dynbuf_adds(&body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
			       "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
			       "<Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		jo_dynbuf_adds(&body, "<Object><Key>");
		jo_obj_xml_escape(&body, keys[i]);
		jo_dynbuf_adds(&body, "</Key></Object>");
		items[i].key = keys[i];
		items[i].idx = i;
	}
	jo_dynbuf_adds(&body, "</Delete>");
	if (body.failed) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
		goto out;
	}
	qsort(items, n, sizeof(*items), cmp_item);
	for (size_t i = 0; i < n; i++)
		order[i] = items[i].idx;
	jo_obj_md5_base64(body.p, body.len, md5);
	s3_hdr_add(&r, "content-md5", "%s", md5);
	s3_hdr_add(&r, "content-type", "application/xml");
	r.body = body.p;
	r.body_len = body.len;
	r.max_body = S3_MAX_XML_BODY;
	rc = s3_do(o, &r, NULL, err);
	if (rc == 0) {
		char code[64], msg[256];

		if (jo_s3xml_parse_error(r.resp.p ? r.resp.p : "", r.resp.len, code, sizeof(code),
					 msg, sizeof(msg)) == 1)
			rc = jo_err_set(err, map_code(0, code), "s3 DeleteObjects at %s: %s: %s",
					o->desc, code, msg);
		else if (r.resp.len)
			rc = jo_s3xml_parse_delete(r.resp.p, r.resp.len, del_cb, &m, err);
		if (rc)
			jo_err_wrap(err, "s3 DeleteObjects at %s", o->desc);
	}
	s3_req_release(&r);
out:
	jo_dynbuf_release(&body);
	free(items);
	free(order);
	return rc;
}

static int s3_delete_batch(struct jo_obj *o, const char *const *keys, size_t n, int *results,
			   struct jo_err *err)
{
	struct jo_obj_sub sub;
	size_t i = 0;
	int rc = jo_obj_sub_init(&sub, 1000, err);

	while (i < n && rc == 0) {
		for (; i < n && sub.n < 1000; i++) {
			if (!xml_safe(keys[i])) {
				/* XML 1.0 cannot carry control characters: delete alone. */
				struct jo_err e1;

				results[i] = s3_del(o, keys[i], &e1);
				continue;
			}
			jo_obj_sub_add(&sub, keys[i], i);
		}
		if (sub.n == 0)
			continue;
		rc = s3_delete_chunk(o, sub.keys, sub.n, sub.res, err);
		jo_obj_sub_done(&sub, rc, results);
	}
	jo_obj_sub_release(&sub);
	return rc;
}

static void add_param(struct jo_dynbuf *q, const char *name, const char *value)
{
	if (q->len)
		jo_dynbuf_adds(q, "&");
	jo_dynbuf_adds(q, name);
	jo_dynbuf_adds(q, "=");
	jo_obj_uri_encode(q, value, false);
}

static int s3_list(struct jo_obj *o, const char *prefix, const char *start_after,
		   const char *delimiter, int page_keys, jo_obj_list_cb cb, void *payload,
		   struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	char *token = NULL, *marker = start_after ? strdup(start_after) : NULL;
	int rc = 0;

	if (start_after && !marker)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	for (;;) {
		struct jo_dynbuf q;
		struct s3_req r = { .op = "LIST", .method = "GET", .max_body = S3_MAX_XML_BODY };
		struct jo_s3_list_page page;
		const char *last = NULL;

		jo_dynbuf_init(&q, 0);
		/* Parameters in canonical (sorted) order, so the URL and the signature agree. */
		if (!s->list_v1 && token)
			add_param(&q, "continuation-token", token);
		if (delimiter)
			add_param(&q, "delimiter", delimiter);
		add_param(&q, "encoding-type", "url");
		if (!s->list_v1) {
			add_param(&q, "list-type", "2");
		} else if (marker) {
			add_param(&q, "marker", marker);
		}
		{
			char mk[16];

			snprintf(mk, sizeof(mk), "%d", page_keys > 0 ? page_keys : 1000);
			add_param(&q, "max-keys", mk);
		}
		add_param(&q, "prefix", prefix);
		if (!s->list_v1 && !token && start_after)
			add_param(&q, "start-after", start_after);
		if (q.failed) {
			jo_dynbuf_release(&q);
			rc = jo_err_set(err, JO_ENOMEM, "out of memory");
			break;
		}
		r.query = q.p;
		r.key = NULL;
		r.what = prefix;
		rc = s3_do(o, &r, NULL, err);
		if (rc == 0) {
			rc = jo_s3xml_parse_list(r.resp.p ? r.resp.p : "", r.resp.len, &page, err);
			if (rc)
				jo_err_wrap(err, "s3 list '%s' at %s", prefix, o->desc);
		}
		s3_req_release(&r);
		jo_dynbuf_release(&q);
		if (rc)
			break;
		for (size_t i = 0; i < page.n && rc == 0; i++) {
			struct jo_obj_info info = { 0 };
			struct jo_s3_entry *e = &page.entries[i];

			info.key = e->key;
			info.size = e->size;
			info.mtime = e->mtime;
			info.mtime_nsec = e->mtime_nsec;
			info.is_prefix = e->is_prefix;
			memcpy(info.etag, e->etag, sizeof(info.etag));
			rc = cb(&info, payload);
			if (rc)
				jo_err_set(err, rc, "list: stopped by the callback");
			last = e->key;
		}
		if (rc == 0 && page.truncated) {
			if (!s->list_v1) {
				if (!page.next_token || !*page.next_token) {
					rc = jo_err_set(err, JO_EPROTO,
							"s3 list at %s: truncated page without a continuation token",
							o->desc);
				} else if (token && !strcmp(token, page.next_token)) {
					rc = jo_err_set(err, JO_EPROTO,
							"s3 list at %s: the continuation token does not advance",
							o->desc);
				} else {
					free(token);
					token = page.next_token;
					page.next_token = NULL;
				}
			} else {
				/*
				 * Continue after the last key (or prefix) of the page: that
				 * is what NextMarker says on AWS, and unlike NextMarker it is
				 * always URL-decoded right (SeaweedFS sends NextMarker raw).
				 */
				const char *nm = last;

				if (!nm && page.next_marker && *page.next_marker)
					nm = page.next_marker;

				if (!nm) {
					rc = jo_err_set(err, JO_EPROTO,
							"s3 list at %s: truncated empty page", o->desc);
				} else if (marker && strcmp(nm, marker) <= 0) {
					rc = jo_err_set(err, JO_EPROTO,
							"s3 list at %s: the marker does not advance", o->desc);
				} else {
					char *dup = strdup(nm);

					if (!dup) {
						rc = jo_err_set(err, JO_ENOMEM, "out of memory");
					} else {
						free(marker);
						marker = dup;
					}
				}
			}
		}
		{
			bool more = page.truncated;

			jo_s3_list_page_release(&page);
			if (rc || !more)
				break;
		}
	}
	free(token);
	free(marker);
	return rc;
}

static int s3_create_bucket(struct jo_obj *o, struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	struct s3_req r = { .op = "CreateBucket", .method = "PUT" };
	static const long ok409[] = { 409, 0 };
	char body[256];
	int rc;

	if (strcmp(s->loc.region, "us-east-1") != 0) {
		snprintf(body, sizeof(body),
			 "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
			 "<LocationConstraint>%s</LocationConstraint></CreateBucketConfiguration>",
			 s->loc.region);
		r.body = body;
		r.body_len = strlen(body);
	} else {
		r.body = "";
		r.body_len = 0;
	}
	rc = s3_do(o, &r, ok409, err);
	if (rc == 0 && r.status == 409) {
		char code[64], msg[256];

		if (!(r.resp.len &&
		      jo_s3xml_parse_error(r.resp.p, r.resp.len, code, sizeof(code), msg,
					   sizeof(msg)) == 1 &&
		      (strcmp(code, "BucketAlreadyOwnedByYou") == 0 ||
		       strcmp(code, "BucketAlreadyExists") == 0)))
			rc = jo_err_set(err, JO_ECONFLICT, "s3 CreateBucket at %s: 409 %s", o->desc,
					r.resp.len ? code : "");
	}
	s3_req_release(&r);
	return rc;
}

/* A 200 reply whose body is <Error> (CopyObject, CompleteMultipartUpload). */
static int check_200_error(struct jo_obj *o, struct s3_req *r, struct jo_err *err)
{
	char code[64], msg[256];
	int e;

	if (!r->resp.len)
		return 0;
	e = jo_s3xml_parse_error(r->resp.p, r->resp.len, code, sizeof(code), msg, sizeof(msg));
	if (e == 1)
		return jo_err_set(err, map_code(0, code) == JO_EINVAL ? JO_EIO : map_code(0, code),
				  "s3 %s '%s' at %s: 200 with error %s: %s", r->op, req_what(r),
				  o->desc, code, msg);
	if (e < 0)
		return jo_err_set(err, JO_EPROTO, "s3 %s '%s' at %s: malformed reply", r->op,
				  req_what(r), o->desc);
	return 0;
}

static int s3_copy(struct jo_obj *o, const char *src_key, const char *dst_key,
		   const struct jo_obj_copy_opts *co, struct jo_err *err)
{
	struct s3_impl *s = SI(o);
	struct s3_req r = { .op = "CopyObject", .method = "PUT", .key = dst_key, .body = "",
			    .body_len = 0, .max_body = S3_MAX_XML_BODY };
	struct jo_dynbuf src;
	struct meta_names mn;
	int rc;

	jo_dynbuf_init(&src, 0);
	jo_dynbuf_adds(&src, "/");
	jo_obj_uri_encode(&src, co->src_bucket ? co->src_bucket : s->loc.bucket, false);
	jo_dynbuf_adds(&src, "/");
	jo_obj_uri_encode(&src, src_key, true);
	if (src.failed || src.len >= sizeof(r.hdrs[0].value)) {
		jo_dynbuf_release(&src);
		return jo_err_set(err, JO_EINVAL, "s3 copy: source key too long");
	}
	s3_hdr_add(&r, "x-amz-copy-source", "%s", src.p);
	jo_dynbuf_release(&src);
	if (co->if_match)
		s3_hdr_add(&r, "x-amz-copy-source-if-match", "\"%s\"", co->if_match);
	if (co->meta) {
		s3_hdr_add(&r, "x-amz-metadata-directive", "REPLACE");
		s3_hdr_add(&r, "content-type", "%s",
			   co->content_type ? co->content_type : "application/octet-stream");
		rc = put_meta(&r, &mn, co->meta, err);
		if (rc)
			return rc;
	} else {
		s3_hdr_add(&r, "x-amz-metadata-directive", "COPY");
	}
	rc = s3_do(o, &r, NULL, err);
	if (rc == 0)
		rc = check_200_error(o, &r, err);
	s3_req_release(&r);
	return rc;
}

static int mpu_query(struct jo_dynbuf *q, int part, const char *upload_id)
{
	if (part > 0)
		jo_dynbuf_addf(q, "partNumber=%d", part);
	add_param(q, "uploadId", upload_id);
	return q->failed ? JO_ENOMEM : 0;
}

static int s3_mpu_create(struct jo_obj *o, const char *key, const struct jo_obj_put_opts *po,
			 char **upload_id_out, struct jo_err *err)
{
	struct s3_req r = { .op = "CreateMultipartUpload", .method = "POST", .key = key,
			    .query = "uploads=", .body = "", .body_len = 0,
			    .max_body = S3_MAX_XML_BODY };
	struct meta_names mn;
	int rc;

	s3_hdr_add(&r, "content-type", "%s",
		   po->content_type ? po->content_type : "application/octet-stream");
	rc = put_meta(&r, &mn, po->meta, err);
	if (rc)
		return rc;
	rc = s3_do(o, &r, NULL, err);
	if (rc == 0) {
		rc = jo_s3xml_find(r.resp.p ? r.resp.p : "", r.resp.len,
				   "InitiateMultipartUpload", "UploadId", upload_id_out, err);
		if (rc)
			jo_err_wrap(err, "s3 CreateMultipartUpload '%s' at %s", key, o->desc);
	}
	s3_req_release(&r);
	return rc;
}

static int s3_mpu_put_part(struct jo_obj *o, const char *key, const char *upload_id,
			   int part_number, const void *data, size_t len, char *etag_out,
			   struct jo_err *err)
{
	struct s3_req r = { .op = "UploadPart", .method = "PUT", .key = key, .body = data,
			    .body_len = len };
	struct jo_dynbuf q;
	int rc;

	jo_dynbuf_init(&q, 0);
	if (mpu_query(&q, part_number, upload_id) < 0) {
		jo_dynbuf_release(&q);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	r.query = q.p;
	rc = s3_do(o, &r, NULL, err);
	if (rc == 0) {
		if (!r.etag[0])
			rc = jo_err_set(err, JO_EPROTO, "s3 UploadPart '%s' at %s: no ETag", key,
					o->desc);
		else
			snprintf(etag_out, 72, "%s", r.etag);
	}
	s3_req_release(&r);
	jo_dynbuf_release(&q);
	return rc;
}

static int s3_mpu_complete(struct jo_obj *o, const char *key, const char *upload_id,
			   const struct jo_obj_part *parts, size_t n, struct jo_err *err)
{
	struct s3_req r = { .op = "CompleteMultipartUpload", .method = "POST", .key = key,
			    .max_body = S3_MAX_XML_BODY };
	struct jo_dynbuf q, body;
	int rc;

	jo_dynbuf_init(&q, 0);
	jo_dynbuf_init(&body, 0);
	mpu_query(&q, 0, upload_id);
	jo_dynbuf_adds(&body, "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (size_t i = 0; i < n; i++) {
		jo_dynbuf_addf(&body, "<Part><PartNumber>%d</PartNumber><ETag>&quot;", parts[i].number);
		jo_obj_xml_escape(&body, parts[i].etag);
		jo_dynbuf_adds(&body, "&quot;</ETag></Part>");
	}
	jo_dynbuf_adds(&body, "</CompleteMultipartUpload>");
	if (q.failed || body.failed) {
		rc = jo_err_set(err, JO_ENOMEM, "out of memory");
	} else {
		r.query = q.p;
		r.body = body.p;
		r.body_len = body.len;
		s3_hdr_add(&r, "content-type", "application/xml");
		rc = s3_do(o, &r, NULL, err);
		if (rc == 0)
			rc = check_200_error(o, &r, err);
	}
	s3_req_release(&r);
	jo_dynbuf_release(&q);
	jo_dynbuf_release(&body);
	return rc;
}

static int s3_mpu_abort(struct jo_obj *o, const char *key, const char *upload_id,
			struct jo_err *err)
{
	struct s3_req r = { .op = "AbortMultipartUpload", .method = "DELETE", .key = key };
	static const long ok404[] = { 404, 0 };
	struct jo_dynbuf q;
	int rc;

	jo_dynbuf_init(&q, 0);
	if (mpu_query(&q, 0, upload_id) < 0) {
		jo_dynbuf_release(&q);
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	r.query = q.p;
	rc = s3_do(o, &r, ok404, err);
	s3_req_release(&r);
	jo_dynbuf_release(&q);
	return rc;
}

static int s3_mpu_list_parts(struct jo_obj *o, const char *key, const char *upload_id,
			     jo_obj_part_cb cb, void *payload, struct jo_err *err)
{
	int marker = 0, rc = 0;

	for (;;) {
		struct s3_req r = { .op = "ListParts", .method = "GET", .key = key,
				    .max_body = S3_MAX_XML_BODY };
		struct jo_s3_parts_page page;
		struct jo_dynbuf q;
		bool more;

		jo_dynbuf_init(&q, 0);
		if (marker > 0)
			jo_dynbuf_addf(&q, "part-number-marker=%d&", marker);
		add_param(&q, "uploadId", upload_id);
		r.query = q.p;
		rc = s3_do(o, &r, NULL, err);
		if (rc == 0)
			rc = jo_s3xml_parse_parts(r.resp.p ? r.resp.p : "", r.resp.len, &page, err);
		s3_req_release(&r);
		jo_dynbuf_release(&q);
		if (rc)
			break;
		for (size_t i = 0; i < page.n && rc == 0; i++) {
			rc = cb(&page.parts[i], payload);
			if (rc)
				jo_err_set(err, rc, "list parts: stopped by the callback");
		}
		more = page.truncated;
		if (rc == 0 && more && page.next_marker <= marker)
			rc = jo_err_set(err, JO_EPROTO, "s3 ListParts '%s' at %s: truncated reply does not "
					"move past part %d", key, o->desc, marker);
		marker = page.next_marker;
		free(page.parts);
		if (rc || !more)
			break;
	}
	return rc;
}

static void s3_close(struct jo_obj *o)
{
	struct s3_impl *s = SI(o);

	if (!s)
		return;
	for (int i = 0; i < s->nidle; i++)
		curl_easy_cleanup(s->idle[i]);
	/* after the handles: a share is cleaned up only with none attached */
	endpoint_put(s->ep, s->max_conns);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->probe_mu);
	free(s->probe_prefix);
	free(s->idle);
	if (s->secret_key)
		memset(s->secret_key, 0, strlen(s->secret_key));
	free(s->access_key);
	free(s->secret_key);
	free(s->session_token);
	free(s);
	curl_global_cleanup();
}

static const struct jo_obj_ops s3_ops = {
	.get = s3_get,
	.put = s3_put,
	.head = s3_head,
	.del = s3_del,
	.delete_batch = s3_delete_batch,
	.list = s3_list,
	.create_bucket = s3_create_bucket,
	.copy = s3_copy,
	.mpu_create = s3_mpu_create,
	.mpu_put_part = s3_mpu_put_part,
	.mpu_complete = s3_mpu_complete,
	.mpu_abort = s3_mpu_abort,
	.mpu_list_parts = s3_mpu_list_parts,
	.create_probe = s3_create_probe,
	.create_used = s3_create_used,
	.close = s3_close,
};

static char *dup_opt(const char *s, bool *oom)
{
	char *d;

	if (!s || !*s)
		return NULL;
	d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

int jo_obj_s3_open(struct jo_obj *o, const struct jo_obj_opts *opts, struct jo_err *err)
{
	struct s3_impl *s;
	bool oom = false;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc = jo_s3_parse_bucket(opts->storage, opts->bucket, opts, &s->loc, err);
	if (rc) {
		free(s);
		return rc;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(s);
		return jo_err_set(err, JO_EIO, "s3: curl_global_init failed");
	}
	s->access_key = dup_opt(opts->access_key, &oom);
	s->secret_key = dup_opt(opts->secret_key, &oom);
	s->session_token = dup_opt(opts->session_token, &oom);
	s->list_v1 = opts->list_v1;
	s->max_conns = opts->max_conns > 0 ? opts->max_conns : 64;
	s->retries = opts->retries >= 0 ? opts->retries : 5;
	s->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : 60000;
	s->seed = (unsigned int)time(NULL) ^ (unsigned int)getpid();
	s->idle = calloc((size_t)s->max_conns, sizeof(*s->idle));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_mutex_init(&s->probe_mu, NULL);
	o->impl = s;
	o->ops = &s3_ops;
	if (oom || !s->idle) {
		s3_close(o);
		o->impl = NULL;
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (s->loc.vhost) {
		snprintf(s->host_hdr, sizeof(s->host_hdr), "%s.%s", s->loc.bucket, s->loc.host);
		s->path_prefix[0] = '\0';
	} else {
		struct jo_dynbuf b;

		snprintf(s->host_hdr, sizeof(s->host_hdr), "%s", s->loc.host);
		jo_dynbuf_init(&b, 0);
		jo_dynbuf_adds(&b, "/");
		jo_obj_uri_encode(&b, s->loc.bucket, false);
		snprintf(s->path_prefix, sizeof(s->path_prefix), "%s", b.p ? b.p : "/");
		jo_dynbuf_release(&b);
	}
	snprintf(s->base_url, sizeof(s->base_url), "%s://%s", s->loc.https ? "https" : "http",
		 s->host_hdr);
	{
		/* the pool is the endpoint's (host, not bucket: virtual hosts share it too) */
		char ep[600];

		snprintf(ep, sizeof(ep), "%s://%s", s->loc.https ? "https" : "http", s->loc.host);
		s->ep = endpoint_get(ep, s->loc.insecure, s->max_conns);
	}
	if (!s->ep) {
		s3_close(o);
		o->impl = NULL;
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	}
	if (snprintf(o->desc, sizeof(o->desc), "%s://%s/%s", s->loc.https ? "https" : "http",
		     s->loc.host, s->loc.bucket) >= (int)sizeof(o->desc))
		o->desc[sizeof(o->desc) - 1] = '\0';
	return 0;
}
