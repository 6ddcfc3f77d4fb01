/*
 * The s3 backend against a scripted loopback HTTP server: retries with
 * backoff on 5xx/SlowDown, no retry on 403, 200 replies carrying <Error>,
 * V2 pagination, DeleteObjects per-key results, signed ranged GETs and
 * cancellation of an in-flight transfer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/err.h"
#include "common/object/object.h"

#define MAX_STEPS 8

struct step {
	int status;
	const char *body;
	int delay_ms;
	const char *etag;      /* NULL: "etag-N" (N: the reply's number) */
};

struct server {
	int fd, port;
	pthread_t th;
	struct step steps[MAX_STEPS];
	int nsteps;
	int served;
	char requests[MAX_STEPS][8192];  /* request line + headers + body */
};

/* Case-insensitive strstr (strcasestr is a GNU extension). */
static char *ci_find(const char *hay, const char *needle)
{
	size_t n = strlen(needle);

	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return (char *)hay;
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void *serve(void *arg)
{
	struct server *s = arg;

	while (s->served < s->nsteps) {
		int c = accept(s->fd, NULL, NULL);
		char *req = s->requests[s->served];
		size_t len = 0;
		long clen = 0;
		char *hdr_end = NULL, resp[8192];
		const struct step *st = &s->steps[s->served];

		if (c < 0)
			break;
		/* Read headers, then Content-Length bytes of body. */
		while (len < sizeof(s->requests[0]) - 1) {
			ssize_t r = read(c, req + len, sizeof(s->requests[0]) - 1 - len);

			if (r <= 0)
				break;
			len += (size_t)r;
			req[len] = '\0';
			if (!hdr_end) {
				hdr_end = strstr(req, "\r\n\r\n");
				if (hdr_end) {
					char *cl = ci_find(req, "\r\ncontent-length:");

					if (cl && cl < hdr_end)
						clen = strtol(cl + 17, NULL, 10);
				}
			}
			if (hdr_end && (long)(len - (size_t)(hdr_end + 4 - req)) >= clen)
				break;
		}
		s->served++;
		if (st->delay_ms)
			sleep_ms(st->delay_ms);
		char etag[64];

		if (st->etag)
			snprintf(etag, sizeof(etag), "%s", st->etag);
		else
			snprintf(etag, sizeof(etag), "etag-%d", s->served);
		snprintf(resp, sizeof(resp),
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nETag: \"%s\"\r\n"
			 "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\nConnection: close\r\n\r\n%s",
			 st->status, strlen(st->body), etag, st->body);
		if (write(c, resp, strlen(resp)) < 0) {
			/* the client may have gone (cancellation test) */
		}
		close(c);
	}
	return NULL;
}

/* A socket listening on a free loopback port (*port), BACKLOG deep. */
static int listen_loopback(int backlog, int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	int one = 1;
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	getsockname(fd, (struct sockaddr *)&a, &al);
	*port = ntohs(a.sin_port);
	return fd;
}

/* Closes the listening socket and waits for its accepting thread. */
static void unlisten(int fd, pthread_t th)
{
	shutdown(fd, SHUT_RDWR);
	close(fd);
	pthread_join(th, NULL);
}

static void server_start(struct server *s)
{
	s->fd = listen_loopback(16, &s->port);
	assert_int_equal(pthread_create(&s->th, NULL, serve, s), 0);
}

static void server_stop(struct server *s)
{
	unlisten(s->fd, s->th);
}

/* An S3 handle on 127.0.0.1:PORT/BUCKET (path style) with o's other options. */
static struct jo_obj *open_s3(int port, const char *bucket, struct jo_obj_opts o)
{
	struct jo_obj *obj = NULL;
	struct jo_err err;
	char url[96];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", port, bucket);
	o.storage = "s3";
	o.bucket = url;
	o.access_key = "AKTEST";
	o.secret_key = "SECRETVALUE123";
	assert_int_equal(jo_obj_open(&obj, &o, &err), 0);
	return obj;
}

static struct jo_obj *open_at(struct server *s, int retries)
{
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;

	o.retries = retries;
	o.timeout_ms = 5000;
	return open_s3(s->port, "bkt", o);
}

/* Starts the scripted server s and opens a handle on it. */
static struct jo_obj *start_open(struct server *s, int retries)
{
	server_start(s);
	return open_at(s, retries);
}

/* A whole-object GET of KEY (at most 10 bytes) that must fail with WANT. */
static void get_fails(struct jo_obj *o, const char *key, int want, struct jo_err *err)
{
	uint8_t *buf = NULL;
	size_t len;

	assert_int_equal(jo_obj_get_buf(o, key, 0, -1, 10, &buf, &len, err), want);
}

static void close_stop(struct jo_obj *o, struct server *s)
{
	jo_obj_close(o);
	server_stop(s);
}

/* The body of an S3 error reply. */
#define S3_ERROR(code, message) "<Error><Code>" code "</Code><Message>" message "</Message></Error>"

#define SLOWDOWN S3_ERROR("SlowDown", "Please reduce your request rate.")

static void retries_5xx_then_succeeds(void **state)
{
	struct server s = { .steps = { { 503, SLOWDOWN, 0 }, { 500, "", 0 }, { 200, "hello", 0 } },
			    .nsteps = 3 };
	struct jo_obj_stats st;
	struct jo_err err;
	uint8_t *buf;
	size_t len;
	struct jo_obj *o = start_open(&s, 3);

	(void)state;
	assert_int_equal(jo_obj_get_buf(o, "a b/c+d", 0, -1, 100, &buf, &len, &err), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(buf, "hello", 5);
	free(buf);
	jo_obj_get_stats(o, &st);
	assert_int_equal(st.requests, 3);
	assert_int_equal(st.retries, 2);
	/* Path-style, key percent-encoded per SigV4, signed. */
	assert_non_null(strstr(s.requests[2], "GET /bkt/a%20b/c%2Bd HTTP/1.1"));
	assert_non_null(ci_find(s.requests[2], "\r\nauthorization: AWS4-HMAC-SHA256 Credential=AKTEST/"));
	assert_non_null(ci_find(s.requests[2], "\r\nhost: 127.0.0.1:"));
	assert_null(strstr(s.requests[2], "SECRETVALUE123"));
	close_stop(o, &s);
}

#define INTERNAL S3_ERROR("InternalError", "We encountered an internal error.")

static void gives_up_after_the_retry_budget(void **state)
{
	struct server s = { .steps = { { 500, INTERNAL, 0 }, { 500, INTERNAL, 0 }, { 500, INTERNAL, 0 },
				       { 200, "", 0 } },
			    .nsteps = 4 };
	struct jo_obj_info info;
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 2);

	(void)state;
	assert_int_equal(jo_obj_put(o, "k", "x", 1, NULL, &err), JO_EIO);
	assert_non_null(strstr(err.msg, "InternalError"));
	assert_non_null(strstr(err.msg, "'k'"));
	assert_non_null(strstr(err.msg, "127.0.0.1"));
	assert_null(strstr(err.msg, "SECRETVALUE123"));
	assert_int_equal(s.served, 3);
	(void)info;
	close_stop(o, &s);
}

/* One PUT with `retries` against s: its result, the S3 code in the error, and how many replies it took. */
static void put_against(struct server *s, int retries, int want_rc, const char *want_code,
			int want_served)
{
	struct jo_err err;
	struct jo_obj *o;

	o = start_open(s, retries);
	assert_int_equal(jo_obj_put(o, "k", "x", 1, NULL, &err), want_rc);
	if (want_code)
		assert_non_null(strstr(err.msg, want_code));
	assert_int_equal(s->served, want_served);
	close_stop(o, s);
}

/* Throttled replies (503 SlowDown) have twice the budget: 2 retries -> 4. */
static void throttled_replies_have_twice_the_budget(void **state)
{
	struct server ok = { .steps = { { 503, SLOWDOWN, 0 }, { 503, SLOWDOWN, 0 }, { 503, SLOWDOWN, 0 },
					{ 503, SLOWDOWN, 0 }, { 200, "", 0 } },
			     .nsteps = 5 };
	struct server no = { .steps = { { 503, SLOWDOWN, 0 }, { 503, SLOWDOWN, 0 }, { 503, SLOWDOWN, 0 },
					{ 503, SLOWDOWN, 0 }, { 503, SLOWDOWN, 0 }, { 200, "", 0 } },
			     .nsteps = 6 };
	struct server mixed = { .steps = { { 503, SLOWDOWN, 0 }, { 500, INTERNAL, 0 }, { 503, SLOWDOWN, 0 },
					   { 500, INTERNAL, 0 }, { 500, INTERNAL, 0 }, { 200, "", 0 } },
				.nsteps = 6 };

	(void)state;
	put_against(&ok, 2, 0, NULL, 5);
	put_against(&no, 2, JO_EIO, "SlowDown", 5);
	/* The general budget still ends the run at its third 500. */
	put_against(&mixed, 2, JO_EIO, "InternalError", 5);
}

static void forbidden_is_eauth_without_retry(void **state)
{
	struct server s = {
		.steps = { { 403, S3_ERROR("SignatureDoesNotMatch", "no"), 0 },
			   { 200, "", 0 } },
		.nsteps = 2 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 3);

	(void)state;
	get_fails(o, "k", JO_EAUTH, &err);
	assert_non_null(strstr(err.msg, "SignatureDoesNotMatch"));
	assert_int_equal(s.served, 1);
	/* Let the server finish its script. */
	assert_int_equal(jo_obj_delete(o, "k", &err), 0);
	close_stop(o, &s);
}

static void ranged_get_sends_range_and_reads_404_as_enotfound(void **state)
{
	struct server s = { .steps = { { 206, "3456", 0 },
				       { 404, S3_ERROR("NoSuchKey", "m"), 0 },
				       { 404, S3_ERROR("NoSuchBucket", "m"), 0 } },
			    .nsteps = 3 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 3);
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(jo_obj_get_buf(o, "k", 3, 4, 10, &buf, &len, &err), 0);
	assert_memory_equal(buf, "3456", 4);
	free(buf);
	assert_non_null(ci_find(s.requests[0], "\r\nrange: bytes=3-6\r\n"));
	get_fails(o, "k", JO_ENOTFOUND, &err);
	get_fails(o, "k", JO_ESTATE, &err);
	close_stop(o, &s);
}

static void copy_with_200_error_body_fails(void **state)
{
	struct server s = {
		.steps = { { 200, "<?xml version=\"1.0\"?>\n<Error><Code>InternalError</Code>"
				  "<Message>We encountered an internal error.</Message></Error>", 0 },
			   { 200, "<CopyObjectResult><ETag>\"x\"</ETag></CopyObjectResult>", 0 } },
		.nsteps = 2 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 0);

	(void)state;
	assert_int_not_equal(jo_obj_copy(o, "src/a", "dst/b", NULL, &err), 0);
	assert_non_null(strstr(err.msg, "InternalError"));
	assert_non_null(ci_find(s.requests[0], "\r\nx-amz-copy-source: /bkt/src/a\r\n"));
	assert_int_equal(jo_obj_copy(o, "src/a", "dst/b", NULL, &err), 0);
	close_stop(o, &s);
}

struct names {
	char k[8][32];
	int n;
};

static int collect(const struct jo_obj_info *info, void *payload)
{
	struct names *n = payload;

	snprintf(n->k[n->n++], sizeof(n->k[0]), "%s", info->key);
	return 0;
}

/* One <Contents> entry of a listing, modified on January 2 of YEAR. */
#define ITEM(key, size, year) \
	"<Contents><Key>" key "</Key><Size>" size "</Size><LastModified>" year \
	"-01-02T03:04:05.000Z</LastModified></Contents>"
/* A V2 listing page, truncated or not, holding BODY. */
#define LIST_PAGE(truncated, body) \
	"<ListBucketResult><IsTruncated>" truncated "</IsTruncated>" body "</ListBucketResult>"
#define URL_TAIL "<EncodingType>url</EncodingType></ListBucketResult>"
#define TOKEN_T1 "<NextContinuationToken>t1</NextContinuationToken>"

static void list_v2_follows_continuation_tokens(void **state)
{
	struct server s = {
		.steps = { { 200, LIST_PAGE("true", "<EncodingType>url</EncodingType>" ITEM("p/a%20b", "1", "2024")
						"<NextContinuationToken>tok/1+=</NextContinuationToken>"), 0 },
			   { 200, LIST_PAGE("false", ITEM("p/c", "2", "2024")), 0 },
			   { 200, LIST_PAGE("true", ITEM("p/c", "2", "2024")), 0 } },
		.nsteps = 3 };
	struct names n = { 0 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 0);

	(void)state;
	assert_int_equal(jo_obj_list(o, "p/", "p/0", NULL, collect, &n, &err), 0);
	assert_int_equal(n.n, 2);
	assert_string_equal(n.k[0], "p/a b");
	assert_string_equal(n.k[1], "p/c");
	assert_non_null(strstr(s.requests[0], "GET /bkt?encoding-type=url&list-type=2&max-keys=1000&prefix=p%2F&start-after=p%2F0 "));
	assert_non_null(strstr(s.requests[1], "continuation-token=tok%2F1%2B%3D&"));
	assert_null(strstr(s.requests[1], "start-after"));
	/* A truncated V2 page without a token is a protocol error. */
	assert_int_equal(jo_obj_list(o, "p/", NULL, NULL, collect, &n, &err), JO_EPROTO);
	close_stop(o, &s);
}

/*
 * SeaweedFS answers a V1 listing with EncodingType url but a raw NextMarker
 * (the key "%p" comes as <Key>%25p</Key> and <NextMarker>%p</NextMarker>):
 * the next page must start after the last key, decoded right, and a raw
 * marker must neither fail the listing nor send it to the wrong place.
 */
static void list_v1_continues_after_the_last_key(void **state)
{
	struct server s = {
		.steps = { { 200, "<ListBucketResult><Marker></Marker><NextMarker>%p</NextMarker>"
				  "<IsTruncated>true</IsTruncated>" ITEM("%25p", "1", "2026") URL_TAIL, 0 },
			   { 200, "<ListBucketResult><NextMarker>a b+c%41</NextMarker>"
				  "<IsTruncated>true</IsTruncated>" ITEM("a+b%2Bc%2541", "1", "2026") URL_TAIL, 0 },
			   { 200, "<ListBucketResult><IsTruncated>false</IsTruncated>" ITEM("z", "1", "2026") URL_TAIL, 0 } },
		.nsteps = 3 };
	struct jo_obj_opts oo = JO_OBJ_OPTS_INIT;
	struct names n = { 0 };
	struct jo_err err;
	struct jo_obj *o;

	(void)state;
	server_start(&s);
	oo.retries = 0;
	oo.list_v1 = true;
	o = open_s3(s.port, "bkt", oo);
	assert_int_equal(jo_obj_list(o, "", NULL, NULL, collect, &n, &err), 0);
	assert_int_equal(n.n, 3);
	assert_string_equal(n.k[0], "%p");
	assert_string_equal(n.k[1], "a b+c%41");
	assert_string_equal(n.k[2], "z");
	assert_non_null(strstr(s.requests[1], "marker=%25p&"));
	assert_non_null(strstr(s.requests[2], "marker=a%20b%2Bc%2541&"));
	close_stop(o, &s);
}

/* A server that hands out the same marker or token again would loop forever. */
static void list_that_does_not_advance_is_an_error(void **state)
{
	struct server s = {
		.steps = { { 200, LIST_PAGE("true", ITEM("p/a", "1", "2026") TOKEN_T1), 0 },
			   { 200, LIST_PAGE("true", ITEM("p/b", "1", "2026") TOKEN_T1), 0 } },
		.nsteps = 2 };
	struct names n = { 0 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 0);

	(void)state;
	assert_int_equal(jo_obj_list(o, "p/", NULL, NULL, collect, &n, &err), JO_EPROTO);
	assert_non_null(strstr(err.msg, "does not advance"));
	close_stop(o, &s);
}

static void delete_batch_maps_per_key_errors(void **state)
{
	struct server s = {
		.steps = { { 200, "<DeleteResult><Error><Key>b&amp;c</Key><Code>AccessDenied</Code>"
				  "<Message>denied</Message></Error>"
				  "<Error><Key>gone</Key><Code>NoSuchKey</Code><Message>x</Message></Error>"
				  "</DeleteResult>", 0 } },
		.nsteps = 1 };
	const char *keys[] = { "a", "b&c", "gone", "d<e" };
	int results[4] = { 9, 9, 9, 9 };
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 0);

	(void)state;
	assert_int_equal(jo_obj_delete_batch(o, keys, 4, results, &err), 0);
	assert_int_equal(results[0], 0);
	assert_int_equal(results[1], JO_EAUTH);
	assert_int_equal(results[2], 0);
	assert_int_equal(results[3], 0);
	assert_non_null(strstr(s.requests[0], "POST /bkt?delete= HTTP/1.1"));
	assert_non_null(ci_find(s.requests[0], "\r\ncontent-md5: "));
	assert_non_null(strstr(s.requests[0], "<Object><Key>b&amp;c</Key></Object>"));
	assert_non_null(strstr(s.requests[0], "<Object><Key>d&lt;e</Key></Object>"));
	close_stop(o, &s);
}

/*
 * A keep-alive server: every accepted connection gets a thread that answers
 * request after request on it (HTTP/1.1, Content-Length bodies), so the
 * connections a client opens can be counted.
 */
struct ka_server {
	int fd, port;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int accepted, served;
	int open;              /* connection threads still running */
};

struct ka_conn {
	struct ka_server *s;
	int fd;
};

static void *ka_serve_conn(void *arg)
{
	struct ka_conn *c = arg;
	char buf[16384];
	size_t len = 0;

	for (;;) {
		char *end;
		long clen = 0;
		size_t need;

		while (!(end = strstr(buf, "\r\n\r\n"))) {
			ssize_t r;

			if (len >= sizeof(buf) - 1)
				goto out;
			r = read(c->fd, buf + len, sizeof(buf) - 1 - len);
			if (r <= 0)
				goto out;
			len += (size_t)r;
			buf[len] = '\0';
		}
		{
			char *cl = ci_find(buf, "\r\ncontent-length:");

			if (cl && cl < end)
				clen = strtol(cl + 17, NULL, 10);
		}
		need = (size_t)(end + 4 - buf) + (size_t)clen;
		while (len < need) {
			ssize_t r = read(c->fd, buf + len, sizeof(buf) - 1 - len);

			if (r <= 0)
				goto out;
			len += (size_t)r;
		}
		pthread_mutex_lock(&c->s->mu);
		c->s->served++;
		pthread_mutex_unlock(&c->s->mu);
		{
			const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"e\"\r\n"
					   "Last-Modified: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nhello";

			if (write(c->fd, resp, strlen(resp)) < 0)
				goto out;
		}
		memmove(buf, buf + need, len - need);
		len -= need;
		buf[len] = '\0';
	}
out:
	close(c->fd);
	pthread_mutex_lock(&c->s->mu);
	c->s->open--;
	pthread_cond_broadcast(&c->s->cv);
	pthread_mutex_unlock(&c->s->mu);
	free(c);
	return NULL;
}

static void *ka_accept(void *arg)
{
	struct ka_server *s = arg;

	for (;;) {
		int fd = accept(s->fd, NULL, NULL);
		struct ka_conn *c;

		if (fd < 0)
			break;
		pthread_t t;

		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->s = s;
		c->fd = fd;
		pthread_mutex_lock(&s->mu);
		s->accepted++;
		s->open++;
		pthread_mutex_unlock(&s->mu);
		if (pthread_create(&t, NULL, ka_serve_conn, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&s->mu);
			s->open--;
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static void ka_start(struct ka_server *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->fd = listen_loopback(64, &s->port);
	assert_int_equal(pthread_create(&s->th, NULL, ka_accept, s), 0);
}

/* After the clients closed their connections (jo_obj_close of the last handle). */
static void ka_stop(struct ka_server *s)
{
	unlisten(s->fd, s->th);
	pthread_mutex_lock(&s->mu);
	while (s->open > 0)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}

static struct jo_obj *open_ka(struct ka_server *s, const char *bucket, int max_conns)
{
	struct jo_obj_opts o = JO_OBJ_OPTS_INIT;

	o.retries = 0;
	o.timeout_ms = 5000;
	o.max_conns = max_conns;
	return open_s3(s->port, bucket, o);
}

#define KA_THREADS 16
#define KA_PER_THREAD 40

static void *ka_client(void *arg)
{
	struct jo_obj *o = arg;

	for (int i = 0; i < KA_PER_THREAD; i++) {
		struct jo_err err;
		uint8_t *buf = NULL;
		size_t len = 0;

		if (jo_obj_get_buf(o, "k", 0, -1, 100, &buf, &len, &err) != 0 || len != 5)
			return (void *)1;
		free(buf);
	}
	return NULL;
}

/*
 * 16 threads x 40 requests through one handle sized to 16: every connection
 * is kept alive and reused, so at most one per thread is ever opened (not
 * one per request, as when the pool closes idle connections above
 * libcurl's default of 5), and the count the client reports is the count
 * the server saw.
 */
static void connections_are_kept_alive_and_counted(void **state)
{
	struct ka_server s;
	pthread_t th[KA_THREADS];
	struct jo_obj_stats st;
	struct jo_obj *o;

	(void)state;
	ka_start(&s);
	o = open_ka(&s, "bkt", KA_THREADS);
	for (int i = 0; i < KA_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, ka_client, o), 0);
	for (int i = 0; i < KA_THREADS; i++) {
		void *r;

		pthread_join(th[i], &r);
		assert_null(r);
	}
	jo_obj_get_stats(o, &st);
	assert_int_equal(st.requests, KA_THREADS * KA_PER_THREAD);
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.served, KA_THREADS * KA_PER_THREAD);
	assert_int_equal((int)st.connections, s.accepted);
	assert_true(s.accepted >= 1);
	assert_true(s.accepted <= KA_THREADS);
	pthread_mutex_unlock(&s.mu);
	jo_obj_close(o);
	ka_stop(&s);
}

/*
 * Two handles on one endpoint (two buckets, as a sync between buckets or
 * the shards of a volume): one pool, so requests taking turns on the two
 * handles run on one connection.
 */
static void handles_on_one_endpoint_share_its_connections(void **state)
{
	struct ka_server s;
	struct jo_obj_stats sa, sb;
	struct jo_obj *a, *b;

	(void)state;
	ka_start(&s);
	a = open_ka(&s, "bkta", 4);
	b = open_ka(&s, "bktb", 4);
	for (int i = 0; i < 20; i++) {
		struct jo_err err;
		uint8_t *buf = NULL;
		size_t len = 0;

		assert_int_equal(jo_obj_get_buf(i % 2 ? b : a, "k", 0, -1, 100, &buf, &len, &err), 0);
		free(buf);
	}
	jo_obj_get_stats(a, &sa);
	jo_obj_get_stats(b, &sb);
	assert_int_equal(sa.requests + sb.requests, 20);
	pthread_mutex_lock(&s.mu);
	assert_int_equal(s.served, 20);
	assert_int_equal(s.accepted, 1);
	assert_int_equal((int)(sa.connections + sb.connections), 1);
	pthread_mutex_unlock(&s.mu);
	jo_obj_close(a);
	jo_obj_close(b);
	ka_stop(&s);
}

static void *cancel_soon(void *arg)
{
	(void)arg;
	sleep_ms(300);
	jo_cancel_request(2);
	return NULL;
}

/* ---- create-only puts ---- */

#define PRECOND S3_ERROR("PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
#define NOTIMPL S3_ERROR("NotImplemented", "A header you provided implies functionality that is not implemented")
#define CONDCONFLICT S3_ERROR("ConditionalRequestConflict", "A conflicting conditional operation is in progress")

static bool starts(const char *req, const char *line)
{
	return strncmp(req, line, strlen(line)) == 0;
}

static bool has_inm(const char *req)
{
	return ci_find(req, "\r\nif-none-match: *\r\n") != NULL;
}

/* One create-only put of "x" at "k" against a scripted server: it must
 * return want_rc after the server served want_served replies. */
static void create_x(struct server *s, bool probe, int retries, int want_rc, int want_served,
		     const char **check)
{
	struct jo_obj_put_opts co = { .create_only = true };
	struct jo_err err;
	struct jo_obj *o;
	int rc;

	o = start_open(s, retries);
	if (probe)
		assert_int_equal(jo_obj_create_probe(o, "vol/", &err), 0);
	rc = jo_obj_put(o, "k", "x", 1, &co, &err);
	if (rc == JO_EEXIST)
		assert_non_null(strstr(err.msg, "exists"));
	*check = jo_obj_create_check(o);
	close_stop(o, s);
	assert_int_equal(rc, want_rc);
	assert_int_equal(s->served, want_served);
}

/*
 * Without a probe the store may ignore If-None-Match (rclone serve s3
 * does): a HEAD comes first, an existing key gets no PUT at all; a free key
 * gets the PUT with the header.
 */
static void create_only_heads_first_without_a_probe(void **state)
{
	struct server taken = { .steps = { { 200, "", 0 } }, .nsteps = 1 };
	struct server free_ = { .steps = { { 404, "", 0 }, { 200, "", 0 } }, .nsteps = 2 };
	const char *check;

	(void)state;
	create_x(&taken, false, 2, JO_EEXIST, 1, &check);
	assert_true(starts(taken.requests[0], "HEAD /bkt/k HTTP/1.1"));
	assert_string_equal(check, "head-then-put");

	create_x(&free_, false, 2, 0, 2, &check);
	assert_true(starts(free_.requests[0], "HEAD /bkt/k HTTP/1.1"));
	assert_true(starts(free_.requests[1], "PUT /bkt/k HTTP/1.1"));
	assert_true(has_inm(free_.requests[1]));
	assert_string_equal(check, "head-then-put");
}

/*
 * A probe whose second PUT gets 412: the store honours the header, so a
 * create-only put is the one conditional PUT (no HEAD), and its 412 is
 * JO_EEXIST. The probe object (under the armed prefix) is deleted.
 */
static void create_only_after_a_probe_that_saw_412(void **state)
{
	struct server s = { .steps = { { 200, "", 0 }, { 412, PRECOND, 0 }, { 204, "", 0 },
				       { 412, PRECOND, 0 } },
			    .nsteps = 4 };
	const char *check;

	(void)state;
	create_x(&s, true, 2, JO_EEXIST, 4, &check);
	assert_true(starts(s.requests[0], "PUT /bkt/vol/jfsops-create-probe-"));
	assert_true(has_inm(s.requests[0]));
	assert_true(starts(s.requests[1], "PUT /bkt/vol/jfsops-create-probe-"));
	assert_true(has_inm(s.requests[1]));
	assert_true(starts(s.requests[2], "DELETE /bkt/vol/jfsops-create-probe-"));
	/* the same probe key all three times */
	assert_memory_equal(s.requests[0] + 4, s.requests[2] + 7, strlen("/bkt/vol/jfsops-create-probe-") + 16);
	assert_true(starts(s.requests[3], "PUT /bkt/k HTTP/1.1"));
	assert_true(has_inm(s.requests[3]));
	assert_string_equal(check, "if-none-match");
}

/* A probe whose second PUT overwrote the first: the store ignores the header; HEAD first. */
static void create_only_after_a_probe_that_saw_an_overwrite(void **state)
{
	struct server s = { .steps = { { 200, "", 0 }, { 200, "", 0 }, { 204, "", 0 }, { 200, "", 0 } },
			    .nsteps = 4 };
	const char *check;

	(void)state;
	create_x(&s, true, 2, JO_EEXIST, 4, &check);
	assert_true(starts(s.requests[2], "DELETE /bkt/vol/jfsops-create-probe-"));
	assert_true(starts(s.requests[3], "HEAD /bkt/k HTTP/1.1"));
	assert_string_equal(check, "head-then-put");
}

/* A store that rejects the header (501): HEAD first, then a PUT without it. */
static void create_only_where_the_header_is_rejected(void **state)
{
	struct server probed = { .steps = { { 501, NOTIMPL, 0 }, { 404, "", 0 }, { 200, "", 0 } },
				 .nsteps = 3 };
	struct server unprobed = { .steps = { { 404, "", 0 }, { 501, NOTIMPL, 0 }, { 200, "", 0 } },
				   .nsteps = 3 };
	const char *check;

	(void)state;
	create_x(&probed, true, 2, 0, 3, &check);
	assert_true(starts(probed.requests[1], "HEAD /bkt/k HTTP/1.1"));
	assert_true(starts(probed.requests[2], "PUT /bkt/k HTTP/1.1"));
	assert_false(has_inm(probed.requests[2]));
	assert_string_equal(check, "head-then-put");

	create_x(&unprobed, false, 2, 0, 3, &check);
	assert_true(starts(unprobed.requests[0], "HEAD /bkt/k HTTP/1.1"));
	assert_true(has_inm(unprobed.requests[1]));
	assert_false(has_inm(unprobed.requests[2]));
}

/*
 * 409 ConditionalRequestConflict is retried. A 412 that answers a retry is
 * checked with a HEAD: another object (ETag not the MD5 of our bytes) is
 * JO_EEXIST; our own first attempt, landed before its reply was lost, is
 * success.
 */
static void create_only_retries_and_knows_its_own_landed_attempt(void **state)
{
	struct server other = { .steps = { { 404, "", 0 }, { 409, CONDCONFLICT, 0 }, { 412, PRECOND, 0 },
					   { 200, "y", 0, "415290769594460e2e485922904f345d" } },
				.nsteps = 4 };
	/* md5("x") */
	struct server ours = { .steps = { { 404, "", 0 }, { 500, INTERNAL, 0 }, { 412, PRECOND, 0 },
					  { 200, "x", 0, "9dd4e461268c8034f5c8564e155c67a6" } },
			       .nsteps = 4 };
	const char *check;

	(void)state;
	create_x(&other, false, 2, JO_EEXIST, 4, &check);
	assert_true(starts(other.requests[3], "HEAD /bkt/k HTTP/1.1"));
	create_x(&ours, false, 2, 0, 4, &check);
}

/* Last: the cancellation flag stays set for the rest of the process. */
static void cancel_aborts_in_flight_transfer(void **state)
{
	struct server s = { .steps = { { 200, "late", 3000 } }, .nsteps = 1 };
	struct timespec t0, t1;
	struct jo_err err;
	struct jo_obj *o = start_open(&s, 3);
	pthread_t th;
	double dt;

	(void)state;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&th, NULL, cancel_soon, NULL);
	get_fails(o, "k", JO_ECANCELED, &err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(dt < 2.5);
	pthread_join(th, NULL);
	close_stop(o, &s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(retries_5xx_then_succeeds),
		cmocka_unit_test(gives_up_after_the_retry_budget),
		cmocka_unit_test(throttled_replies_have_twice_the_budget),
		cmocka_unit_test(forbidden_is_eauth_without_retry),
		cmocka_unit_test(ranged_get_sends_range_and_reads_404_as_enotfound),
		cmocka_unit_test(copy_with_200_error_body_fails),
		cmocka_unit_test(list_v2_follows_continuation_tokens),
		cmocka_unit_test(list_v1_continues_after_the_last_key),
		cmocka_unit_test(list_that_does_not_advance_is_an_error),
		cmocka_unit_test(delete_batch_maps_per_key_errors),
		cmocka_unit_test(connections_are_kept_alive_and_counted),
		cmocka_unit_test(handles_on_one_endpoint_share_its_connections),
		cmocka_unit_test(create_only_heads_first_without_a_probe),
		cmocka_unit_test(create_only_after_a_probe_that_saw_412),
		cmocka_unit_test(create_only_after_a_probe_that_saw_an_overwrite),
		cmocka_unit_test(create_only_where_the_header_is_rejected),
		cmocka_unit_test(create_only_retries_and_knows_its_own_landed_attempt),
		cmocka_unit_test(cancel_aborts_in_flight_transfer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
