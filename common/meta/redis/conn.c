/*
 * redis/conn.c: the connection of a redis-family handle: standalone Redis,
 * Sentinel (the master found through the sentinels, found again after a
 * failover) and Cluster (the master of the volume's one slot, MOVED/ASK
 * followed), each in plain TCP or TLS.
 *
 * Debian 12's hiredis (0.14) has no TLS, so the socket and the TLS session
 * (OpenSSL) are ours while hiredis still does all of the protocol: commands
 * are encoded by its formatter (redisvFormatCommand/redisFormatCommandArgv)
 * and replies decoded by its reader (redisReader). No RESP is written or
 * parsed here.
 *
 * Keys: juicefs puts the hash tag "{DB}" before every key of a Cluster volume
 * (and selects no database); format strings mark each key with %K, which is
 * replaced by that prefix ("" elsewhere) before hiredis formats the command.
 *
 * Reconnection and retries (a failover, a restarted server, a moved slot):
 * a lost connection fails the command in flight. It is sent again on a new
 * connection only when that cannot repeat a write: reads, idempotent writes
 * (HDEL, ZREM, DEL, the task scripts) and WATCH at the start of a transaction.
 * A command inside WATCH..EXEC is never moved to another connection (the
 * new one would not watch the keys): it fails, and so does the operation;
 * when the EXEC of a transaction may have run without its reply reaching us,
 * the outcome is reported as unknown (jo_rd_retryable() says no), and the
 * caller must not act on it. The next command reconnects.
 *
 * Acting on a result (deleting objects because of it) waits for
 * jo_rd_confirm(), the one rule for that: a replica must have it, unless
 * the server never had one. A master demoted by a failover keeps taking
 * writes for seconds and then throws them away, reporting no replica all the
 * while; so "none connected now" never counts, and the sentinels (or the
 * cluster) are asked who is the master when a confirmation fails. A Sentinel
 * master is the one named by the sentinel with the newest configuration
 * epoch, never while a failover of it is under way.
 */
#include "common/meta/meta_internal.h"
#include "common/meta/redis/internal.h"

#include "common/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CONNECT_MS 5000
#define IO_MS 60000
/* how long a lost master is looked for (a Sentinel failover takes seconds) */
#define FAILOVER_MS 30000
#define MAX_REDIRECTS 5
#define WAIT_MS 5000
/* how long a replica that is attached but behind (resyncing after a
 * failover, a slow disk) is waited for, WAIT after WAIT, before the result
 * is called unconfirmed */
#define CONFIRM_MS 30000

/* ---------------------------------------------------------------- one server connection */

struct rconn {
	int fd;           /* -1: closed */
	SSL *ssl;
	redisReader *rd;
	char *obuf;
	size_t olen, ocap;
	char addr[280];   /* "host:port" or the socket path, for messages */
	char errstr[400];
	bool io;          /* the failure was I/O (or EOF), not the protocol */
};

static void rc_init(struct rconn *c)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void rc_close(struct rconn *c)
{
	if (c->ssl) {
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->rd)
		redisReaderFree(c->rd);
	c->rd = NULL;
	free(c->obuf);
	c->obuf = NULL;
	c->olen = c->ocap = 0;
}

static void rc_fail(struct rconn *c, bool io, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void rc_fail(struct rconn *c, bool io, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->errstr, sizeof(c->errstr), fmt, ap);
	va_end(ap);
	c->io = io;
	rc_close(c);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static bool is_ip(const char *h)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, h, &a4) == 1 || inet_pton(AF_INET6, h, &a6) == 1;
}

/* "host:port" / "[v6]:port" -> host, port. */
static int split_addr(const char *a, char *host, size_t hcap, int *port)
{
	const char *c = strrchr(a, ':');
	size_t hl;

	if (!c || !c[1])
		return -1;
	*port = atoi(c + 1);
	if (*a == '[') {
		if (c == a || c[-1] != ']')
			return -1;
		hl = (size_t)(c - a - 2);
		a++;
	} else {
		hl = (size_t)(c - a);
	}
	if (hl == 0 || hl >= hcap || *port <= 0 || *port > 65535)
		return -1;
	memcpy(host, a, hl);
	host[hl] = '\0';
	return 0;
}

static void fmt_addr(char *out, size_t cap, const char *host, int port)
{
	snprintf(out, cap, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
}

static int set_timeouts(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		return -1;
	return 0;
}

/* connect() with a deadline on a non-blocking socket, then back to blocking. */
static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len)
{
	int fl = fcntl(fd, F_GETFL, 0), e = 0;
	socklen_t el = sizeof(e);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	if (connect(fd, sa, len) != 0) {
		struct pollfd p = { fd, POLLOUT, 0 };
		int n;

		if (errno != EINPROGRESS)
			return -1;
		do
			n = poll(&p, 1, CONNECT_MS);
		while (n < 0 && errno == EINTR);
		if (n == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
			return -1;
		if (e) {
			errno = e;
			return -1;
		}
	}
	return fcntl(fd, F_SETFL, fl);
}

/* The certificate of a TLS peer as "subject ... (issuer ...)". */
static void cert_names(SSL *ssl, char *subj, size_t scap, char *iss, size_t icap)
{
	X509 *x = SSL_get1_peer_certificate(ssl);

	snprintf(subj, scap, "?");
	snprintf(iss, icap, "?");
	if (!x)
		return;
	X509_NAME_oneline(X509_get_subject_name(x), subj, (int)scap);
	X509_NAME_oneline(X509_get_issuer_name(x), iss, (int)icap);
	X509_free(x);
}

/* An OpenSSL failure as text (the queue is emptied). */
static void ssl_errs(char *buf, size_t cap)
{
	unsigned long e;
	size_t o = 0;

	buf[0] = '\0';
	while ((e = ERR_get_error()) != 0 && o + 2 < cap) {
		char one[256];

		ERR_error_string_n(e, one, sizeof(one));
		o += (size_t)snprintf(buf + o, cap - o, "%s%s", o ? "; " : "", one);
	}
	if (!buf[0])
		snprintf(buf, cap, "%s", errno ? strerror(errno) : "handshake failed");
}

/* The server certificate of a failed verification. */
struct vinfo {
	char subj[200], iss[200];
	bool set;
};

static int verify_cb(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct vinfo *v = ssl ? SSL_get_app_data(ssl) : NULL;
	X509 *c = X509_STORE_CTX_get0_cert(x); /* the server's own, whichever link failed */

	if (!ok && v && c && !v->set) {
		X509_NAME_oneline(X509_get_subject_name(c), v->subj, (int)sizeof(v->subj));
		X509_NAME_oneline(X509_get_issuer_name(c), v->iss, (int)sizeof(v->iss));
		v->set = true;
	}
	return ok;
}

struct rtls {
	SSL_CTX *ctx;          /* NULL: plain TCP */
	const char *server_name; /* tls-server-name, or NULL: the host dialled */
	const char *ca;        /* for messages */
	bool skip_verify;
	char subject[256];     /* the last server certificate's subject */
};

/* The TLS handshake on c->fd. 0, or -1 with c->errstr set (and closed). */
static int rc_tls(struct rconn *c, struct rtls *t, const char *host)
{
	const char *name = t->server_name && *t->server_name ? t->server_name : host;
	struct vinfo vi = { "", "", false };
	long v;
	int r;

	ERR_clear_error();
	c->ssl = SSL_new(t->ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
		rc_fail(c, false, "TLS: out of memory");
		return -1;
	}
	if (!t->skip_verify) {
		X509_VERIFY_PARAM *p = SSL_get0_param(c->ssl);

		SSL_set_app_data(c->ssl, &vi);
		SSL_set_verify(c->ssl, SSL_VERIFY_PEER, verify_cb);
		if (is_ip(name))
			r = X509_VERIFY_PARAM_set1_ip_asc(p, name);
		else
			r = X509_VERIFY_PARAM_set1_host(p, name, 0);
		if (r != 1) {
			rc_fail(c, false, "TLS: bad server name %s", name);
			return -1;
		}
	}
	if (!is_ip(name))
		SSL_set_tlsext_host_name(c->ssl, name);
	errno = 0;
	r = SSL_connect(c->ssl);
	SSL_set_app_data(c->ssl, NULL);
	if (r == 1) {
		X509 *x = SSL_get1_peer_certificate(c->ssl);

		if (x) {
			X509_NAME_oneline(X509_get_subject_name(x), t->subject, (int)sizeof(t->subject));
			X509_free(x);
		}
		return 0;
	}
	v = SSL_get_verify_result(c->ssl);
	if (v != X509_V_OK) {
		char subj[200], iss[200];

		if (vi.set) {
			snprintf(subj, sizeof(subj), "%s", vi.subj);
			snprintf(iss, sizeof(iss), "%s", vi.iss);
		} else {
			cert_names(c->ssl, subj, sizeof(subj), iss, sizeof(iss));
		}
		ERR_clear_error();
		if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
			rc_fail(c, true, "TLS: the server certificate (subject %s) is not for %s "
				"(set tls-server-name to a name it holds)", subj, name);
		else
			rc_fail(c, true, "TLS: the server certificate (subject %s, issuer %s) did not "
				"verify against %s: %s", subj, iss,
				t->ca ? t->ca : "the system CAs", X509_verify_cert_error_string(v));
	} else {
		char e[300];

		if (errno == EAGAIN || errno == EWOULDBLOCK)
			snprintf(e, sizeof(e), "no answer within %d ms", CONNECT_MS);
		else
			ssl_errs(e, sizeof(e));
		rc_fail(c, true, "TLS handshake with %s failed (is that the server's TLS port?): %s",
			c->addr, e);
	}
	return -1;
}

/* Connect c to host:port (or the Unix socket path when port is 0). */
static int rc_connect(struct rconn *c, struct rtls *t, const char *host, int port)
{
	int fd = -1;

	rc_close(c);
	c->errstr[0] = '\0';
	c->io = false;
	if (port == 0) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };

		snprintf(c->addr, sizeof(c->addr), "%s", host);
		if (strlen(host) >= sizeof(sun.sun_path)) {
			rc_fail(c, false, "socket path too long");
			return -1;
		}
		memcpy(sun.sun_path, host, strlen(host) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect_timeout(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
			int e = errno;

			if (fd >= 0)
				close(fd);
			rc_fail(c, true, "connect %s: %s", host, strerror(e));
			return -1;
		}
	} else {
		struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai, *p;
		char ps[16];
		int e = 0, g;

		fmt_addr(c->addr, sizeof(c->addr), host, port);
		snprintf(ps, sizeof(ps), "%d", port);
		g = getaddrinfo(host, ps, &hints, &ai);
		if (g != 0) {
			rc_fail(c, true, "cannot resolve %s: %s", host, gai_strerror(g));
			return -1;
		}
		for (p = ai; p; p = p->ai_next) {
			fd = socket(p->ai_family, p->ai_socktype | SOCK_CLOEXEC, p->ai_protocol);
			if (fd < 0) {
				e = errno;
				continue;
			}
			if (connect_timeout(fd, p->ai_addr, p->ai_addrlen) == 0)
				break;
			e = errno;
			close(fd);
			fd = -1;
		}
		freeaddrinfo(ai);
		if (fd < 0) {
			rc_fail(c, true, "connect %s: %s", c->addr, strerror(e));
			return -1;
		}
	}
	c->fd = fd;
	/* the TLS handshake within the connect deadline (a plain port never answers it) */
	if (set_timeouts(fd, t && t->ctx ? CONNECT_MS : IO_MS) != 0) {
		rc_fail(c, true, "%s: setsockopt: %s", c->addr, strerror(errno));
		return -1;
	}
	c->rd = redisReaderCreate();
	if (!c->rd) {
		rc_fail(c, false, "out of memory");
		return -1;
	}
	if (t && t->ctx && (rc_tls(c, t, host) != 0 || set_timeouts(fd, IO_MS) != 0)) {
		if (c->fd >= 0)
			rc_fail(c, true, "%s: setsockopt: %s", c->addr, strerror(errno));
		return -1;
	}
	return 0;
}

/* Room for len more bytes in the output buffer. */
static int rc_reserve(struct rconn *c, size_t len)
{
	if (c->olen + len > c->ocap) {
		size_t nc = (c->olen + len) * 2 + 256;
		char *nb = realloc(c->obuf, nc);

		if (!nb)
			return -1;
		c->obuf = nb;
		c->ocap = nc;
	}
	return 0;
}

static int rc_append(struct rconn *c, const char *cmd, size_t len)
{
	if (rc_reserve(c, len) != 0)
		return -1;
	memcpy(c->obuf + c->olen, cmd, len);
	c->olen += len;
	return 0;
}

/*
 * argv as one RESP array, straight into the output buffer: hiredis's
 * redisFormatCommandArgv allocates every command and prints its lengths
 * with sprintf, which was a tenth of an export's CPU.
 */
static int rc_append_argv(struct rconn *c, int argc, const char **argv, const size_t *lens)
{
	size_t need = 24, k;
	char *p;

	for (int i = 0; i < argc; i++)
		need += lens[i] + 25;
	if (rc_reserve(c, need) != 0)
		return -1;
	p = c->obuf + c->olen;
	k = 0;
	p[k++] = '*';
	k += jo_rd_put_dec(p + k, (uint64_t)argc);
	p[k++] = '\r';
	p[k++] = '\n';
	for (int i = 0; i < argc; i++) {
		p[k++] = '$';
		k += jo_rd_put_dec(p + k, lens[i]);
		p[k++] = '\r';
		p[k++] = '\n';
		memcpy(p + k, argv[i], lens[i]);
		k += lens[i];
		p[k++] = '\r';
		p[k++] = '\n';
	}
	c->olen += k;
	return 0;
}

static int rc_flush(struct rconn *c)
{
	size_t off = 0;

	while (off < c->olen) {
		ssize_t n;

		if (c->ssl) {
			int r;

			ERR_clear_error();
			r = SSL_write(c->ssl, c->obuf + off, (int)(c->olen - off));
			if (r <= 0) {
				char e[200];

				ssl_errs(e, sizeof(e));
				rc_fail(c, true, "%s: TLS write: %s", c->addr, e);
				return -1;
			}
			n = r;
		} else {
			n = send(c->fd, c->obuf + off, c->olen - off, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc_fail(c, true, "%s: write: %s", c->addr,
					errno == EAGAIN ? "timed out" : strerror(errno));
				return -1;
			}
		}
		off += (size_t)n;
	}
	c->olen = 0;
	return 0;
}

/* One reply (flushing first). 0, or -1 with c->errstr set and c closed. */
static int rc_read(struct rconn *c, redisReply **out)
{
	*out = NULL;
	if (c->fd < 0) {
		if (!c->errstr[0])
			snprintf(c->errstr, sizeof(c->errstr), "connection lost");
		c->io = true;
		return -1;
	}
	if (c->olen && rc_flush(c) != 0)
		return -1;
	for (;;) {
		void *r = NULL;
		char buf[16384];
		ssize_t n;

		if (redisReaderGetReply(c->rd, &r) != REDIS_OK) {
			rc_fail(c, false, "%s: protocol error: %s", c->addr, c->rd->errstr);
			return -1;
		}
		if (r) {
			*out = r;
			return 0;
		}
		if (c->ssl) {
			int k;

			ERR_clear_error();
			k = SSL_read(c->ssl, buf, (int)sizeof(buf));
			if (k <= 0) {
				int se = SSL_get_error(c->ssl, k);
				char e[200];

				if (se == SSL_ERROR_ZERO_RETURN) {
					rc_fail(c, true, "%s: the server closed the connection", c->addr);
				} else {
					ssl_errs(e, sizeof(e));
					rc_fail(c, true, "%s: TLS read: %s", c->addr,
						errno == EAGAIN ? "timed out" : e);
				}
				return -1;
			}
			n = k;
		} else {
			n = recv(c->fd, buf, sizeof(buf), 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0) {
				rc_fail(c, true, "%s: the server closed the connection", c->addr);
				return -1;
			}
			if (n < 0) {
				rc_fail(c, true, "%s: read: %s", c->addr,
					errno == EAGAIN ? "timed out" : strerror(errno));
				return -1;
			}
		}
		if (redisReaderFeed(c->rd, buf, (size_t)n) != REDIS_OK) {
			rc_fail(c, false, "%s: protocol error", c->addr);
			return -1;
		}
	}
}

/* One command given as argv on c (connection set-up and discovery). */
static redisReply *rc_cmd(struct rconn *c, int argc, const char **argv)
{
	size_t lens[8];
	char *cmd = NULL;
	redisReply *r;
	int n;

	for (int i = 0; i < argc; i++)
		lens[i] = strlen(argv[i]);
	n = redisFormatCommandArgv(&cmd, argc, argv, lens);
	if (n < 0 || rc_append(c, cmd, (size_t)n) != 0) {
		redisFreeCommand(cmd);
		rc_fail(c, false, "out of memory");
		return NULL;
	}
	redisFreeCommand(cmd);
	return rc_read(c, &r) == 0 ? r : NULL;
}

/* ---------------------------------------------------------------- the handle's state */

enum rd_mode { RD_STANDALONE, RD_SENTINEL, RD_CLUSTER };

struct rd {
	struct rconn c;
	struct rtls tls;
	enum rd_mode mode;
	char prefix[24];   /* "{DB}" on a cluster, else "" */
	size_t plen;
	int slot;          /* cluster: the slot of the prefix */
	char node[280];    /* the server we talk to ("host:port") */
	char master[280];  /* sentinel/cluster: the master we last found */
	bool replica;      /* connected to a replica (a read-only handle, route-read) */
	char **addrs;      /* sentinels or cluster seeds */
	size_t naddrs;
	int replicas;      /* replicas seen on this connection (at connect, or by a later
			    * confirmation): from then on every confirmation waits for one,
			    * until the connection goes (a demoted master reports none) */
	bool crossed;      /* a connection that had replicas was replaced since the last
			    * confirmation: what came before it cannot be confirmed */
	bool moved;        /* the last failure: a confirmation found another master named */
	int64_t role_ms;   /* when a confirmation last asked for replicas (none seen yet) */
	unsigned epoch;    /* +1 on each new connection */
	bool ever;         /* connected once */
	/* transaction and pipeline state */
	bool in_tx;        /* WATCH or MULTI sent on this connection, no EXEC/DISCARD/UNWATCH yet */
	int pending;       /* pipelined replies not read yet */
	bool exec_sent;    /* an EXEC among the pending commands */
	bool unsafe_sent;  /* a non-repeatable write among the pending commands */
	bool stale;        /* a MOVED/ASK/READONLY reply: reconnect once the pipeline is read */
	bool pipe_broken;  /* this pipeline could not be sent: every reply fails */
	bool unknown;      /* the last failure may have lost the reply of a write that ran */
	char err[480];     /* the last failure */
	int err_code;      /* its JO_E* code: ECONNECT (I/O, EOF), EIO, ENOMEM */
};

static struct rd *RD(struct jo_meta *m)
{
	return m->be;
}

/* The command word of a format ("HGET %Kd%llu %b" -> HGET). */
static bool cmd_is(const char *fmt, const char *w)
{
	size_t n = strlen(w);

	return !strncmp(fmt, w, n) && (fmt[n] == ' ' || fmt[n] == '\0');
}

/* Commands that are safe to send again after a lost reply: reads, and
 * writes whose repetition changes nothing (the task scripts are written so:
 * a repeated add adds nothing, a repeated claim claims another task while the
 * first lease just expires, release/complete answer "not ours"). */
static bool repeatable(const char *fmt)
{
	static const char *const ok[] = { "GET", "HGET", "HMGET", "MGET", "EXISTS", "HEXISTS",
					  "HLEN", "LLEN", "LRANGE", "ZSCORE", "ZCARD", "SCAN",
					  "HSCAN", "ZSCAN", "SSCAN", "INFO", "PING", "ROLE", "TIME",
					  "HDEL", "ZREM", "DEL", "EVAL", "UNWATCH", "CLUSTER" };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (cmd_is(fmt, ok[i]))
			return true;
	return false;
}

static void set_err(struct rd *d, bool io, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_err(struct rd *d, bool io, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d->err, sizeof(d->err), fmt, ap);
	va_end(ap);
	d->err_code = io ? JO_ECONNECT : JO_EIO;
	d->moved = false;
}

/* ---------------------------------------------------------------- connecting */

/* AUTH (when a password is set), then SELECT db (not on a cluster). */
static int rc_login(struct rconn *c, const char *user, const char *pw, int db, bool select,
		    struct jo_err *err, const char *redacted)
{
	redisReply *r;
	char dbs[16];

	if (pw) {
		const char *a3[] = { "AUTH", user ? user : "", pw };
		const char *a2[] = { "AUTH", pw };

		r = user ? rc_cmd(c, 3, a3) : rc_cmd(c, 2, a2);
		if (!r)
			return jo_err_set(err, JO_ECONNECT, "redis %s: AUTH: %s", redacted, c->errstr);
		if (r->type == REDIS_REPLY_ERROR) {
			int rc = jo_err_set(err, JO_EAUTH, "redis %s: authentication failed at %s: %.200s",
					    redacted, c->addr, r->str);
			freeReplyObject(r);
			rc_close(c);
			return rc;
		}
		freeReplyObject(r);
	}
	if (!select)
		return 0;
	snprintf(dbs, sizeof(dbs), "%d", db);
	{
		const char *a[] = { "SELECT", dbs };

		r = rc_cmd(c, 2, a);
	}
	if (!r)
		return jo_err_set(err, JO_ECONNECT, "redis %s: SELECT: %s", redacted, c->errstr);
	if (r->type == REDIS_REPLY_ERROR) {
		int rc = jo_err_set(err, strncmp(r->str, "NOAUTH", 6) ? JO_EIO : JO_EAUTH,
				    "redis %s: SELECT %d: %.200s", redacted, db, r->str);
		freeReplyObject(r);
		rc_close(c);
		return rc;
	}
	freeReplyObject(r);
	return 0;
}

/* "INFO replication": the role and the number of connected replicas. */
static int rc_role(struct rconn *c, bool *master, int *replicas)
{
	const char *a[] = { "INFO", "replication" };
	redisReply *r = rc_cmd(c, 2, a);
	const char *p;

	*master = true;
	*replicas = 0;
	if (!r)
		return -1;
	if (r->type == REDIS_REPLY_STRING) {
		*master = strstr(r->str, "role:master") != NULL;
		if ((p = strstr(r->str, "connected_slaves:")))
			*replicas = atoi(p + 17);
	}
	/* an ACL may deny INFO: then nothing is known and nothing waited for */
	freeReplyObject(r);
	return 0;
}

/* CRC16 (XMODEM), the hash of Redis Cluster key slots. */
static unsigned crc16(const char *s, size_t n)
{
	unsigned crc = 0;

	for (size_t i = 0; i < n; i++) {
		crc ^= (unsigned)(unsigned char)s[i] << 8;
		for (int b = 0; b < 8; b++)
			crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
	}
	return crc;
}

static int connect_plain(struct jo_meta *m, const char *host, int port, struct jo_err *err)
{
	struct rd *d = RD(m);
	int rc;

	if (rc_connect(&d->c, &d->tls, host, port) != 0)
		return jo_err_set(err, JO_ECONNECT, "cannot connect to redis %s: %s", m->url.redacted,
				  d->c.errstr);
	rc = rc_login(&d->c, m->url.user, m->url.password, m->url.db, d->mode != RD_CLUSTER, err,
		      m->url.redacted);
	if (rc == 0)
		snprintf(d->node, sizeof(d->node), "%s", d->c.addr);
	return rc;
}

/* Sentinel i, connected (a short timeout: a sentinel that hangs must not hold
 * up the others) and authenticated in *s. 0, or -1 with why set and *code
 * JO_EAUTH when it refused SENTINEL_PASSWORD. */
static int sentinel_open(struct jo_meta *m, size_t i, struct rconn *s, char *why, size_t wcap,
			 int *code)
{
	struct rd *d = RD(m);
	char host[256];
	int port;

	rc_init(s);
	if (split_addr(d->addrs[i], host, sizeof(host), &port) != 0) {
		snprintf(why, wcap, "sentinel %.80s: not host:port", d->addrs[i]);
		return -1;
	}
	if (rc_connect(s, &d->tls, host, port) != 0) {
		snprintf(why, wcap, "sentinel %.80s: %.300s", d->addrs[i], s->errstr);
		return -1;
	}
	(void)set_timeouts(s->fd, CONNECT_MS);
	if (m->url.sentinel_password) {
		const char *a[] = { "AUTH", m->url.sentinel_password };
		redisReply *r = rc_cmd(s, 2, a);

		if (r && r->type == REDIS_REPLY_ERROR) {
			snprintf(why, wcap, "sentinel %s refused SENTINEL_PASSWORD: %.200s", d->addrs[i],
				 r->str);
			freeReplyObject(r);
			rc_close(s);
			*code = JO_EAUTH;
			return -1;
		}
		freeReplyObject(r);
		if (!r) {
			snprintf(why, wcap, "sentinel %.80s: %.300s", d->addrs[i], s->errstr);
			return -1;
		}
	}
	return 0;
}

/* One sentinel's view of the master. */
struct sview {
	char host[256];
	int port;          /* 0: it names none */
	long long epoch;   /* its configuration epoch of the master */
	bool in_failover;  /* it is failing the master over right now */
	size_t from;       /* which sentinel */
};

/*
 * What sentinel i (open in *s) says of the master: first its configuration
 * epoch and whether it is failing the master over (SENTINEL MASTER), then
 * the address (GET-MASTER-ADDR-BY-NAME: once a failover has promoted a
 * replica, the promoted one), in that order so that an epoch never belongs
 * to an older address. 1: it names a master; 0: it knows no master of that
 * name (*unknown) or answered with an error (why set); -1: no answer.
 */
static int sentinel_view(struct jo_meta *m, size_t i, struct rconn *s, struct sview *v,
			 bool *unknown, char *why, size_t wcap, int *code)
{
	struct rd *d = RD(m);
	const char *am[] = { "SENTINEL", "master", m->url.master_name };
	const char *aa[] = { "SENTINEL", "get-master-addr-by-name", m->url.master_name };
	redisReply *r = rc_cmd(s, 3, am);

	memset(v, 0, sizeof(*v));
	v->from = i;
	*unknown = false;
	for (size_t f = 0; r && r->type == REDIS_REPLY_ARRAY && f + 1 < r->elements; f += 2) {
		const char *key = r->element[f]->str, *val = r->element[f + 1]->str;

		if (r->element[f]->type != REDIS_REPLY_STRING ||
		    r->element[f + 1]->type != REDIS_REPLY_STRING)
			continue;
		if (!strcmp(key, "config-epoch"))
			v->epoch = strtoll(val, NULL, 10);
		else if (!strcmp(key, "flags"))
			v->in_failover = strstr(val, "failover_in_progress") != NULL;
	}
	freeReplyObject(r);
	r = rc_cmd(s, 3, aa);
	if (!r) {
		snprintf(why, wcap, "sentinel %.80s: %.300s", d->addrs[i], s->errstr);
		return -1;
	}
	if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
	    r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
		snprintf(v->host, sizeof(v->host), "%s", r->element[0]->str);
		v->port = atoi(r->element[1]->str);
		freeReplyObject(r);
		return v->port > 0;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		snprintf(why, wcap, "sentinel %s: %.200s", d->addrs[i], r->str);
		if (strstr(r->str, "NOAUTH") || strstr(r->str, "WRONGPASS"))
			*code = JO_EAUTH;
	} else {
		/* the names it does monitor, to say which one was meant */
		const char *a[] = { "SENTINEL", "masters" };
		redisReply *ms = rc_cmd(s, 2, a);
		char known[200] = "";
		size_t o = 0;

		*unknown = true;
		for (size_t k = 0; ms && ms->type == REDIS_REPLY_ARRAY && k < ms->elements; k++) {
			redisReply *e = ms->element[k];

			for (size_t f = 0; e->type == REDIS_REPLY_ARRAY && f + 1 < e->elements; f += 2)
				if (e->element[f]->type == REDIS_REPLY_STRING &&
				    !strcmp(e->element[f]->str, "name") && o + 2 < sizeof(known))
					o += (size_t)snprintf(known + o, sizeof(known) - o, "%s%s",
							      o ? ", " : "", e->element[f + 1]->str);
		}
		freeReplyObject(ms);
		snprintf(why, wcap, "sentinel %s monitors no master named '%s' (it monitors: %s)",
			 d->addrs[i], m->url.master_name, o ? known : "none");
	}
	freeReplyObject(r);
	return 0;
}

/*
 * Ask every sentinel; *best is the view of the one with the newest
 * configuration epoch (the first such on a tie): right after a failover the
 * others may still name the old master, and so does the one failing it over
 * until the promoted replica is a master (best->in_failover then, also when
 * another sentinel of that epoch says so). Returns
 * how many named a master; *answered and *unknown count the sentinels that
 * answered and those that know no master of that name.
 */
static size_t sentinels_ask(struct jo_meta *m, struct sview *best, size_t *answered,
			    size_t *unknown, char *why, size_t wcap, int *code)
{
	struct rd *d = RD(m);
	size_t named = 0;

	*answered = *unknown = 0;
	memset(best, 0, sizeof(*best));
	for (size_t i = 0; i < d->naddrs; i++) {
		struct rconn s;
		struct sview v;
		bool unk = false;
		int r;

		if (sentinel_open(m, i, &s, why, wcap, code) != 0)
			continue;
		r = sentinel_view(m, i, &s, &v, &unk, why, wcap, code);
		rc_close(&s);
		if (r < 0)
			continue;
		(*answered)++;
		*unknown += unk;
		if (r == 1 && (!named || v.epoch > best->epoch))
			*best = v;
		else if (r == 1 && v.epoch == best->epoch && v.in_failover)
			best->in_failover = true; /* it may not have moved the epoch yet */
		named += r == 1;
	}
	return named;
}

/* route-read=replica: a healthy replica of the master, through sentinel
 * `from`; 0 when connected to one. */
static int sentinel_replica(struct jo_meta *m, const struct sview *b)
{
	struct rd *d = RD(m);
	const char *a[] = { "SENTINEL", "replicas", m->url.master_name };
	struct rconn s;
	redisReply *rs;
	char why[400];
	int code = 0, rc = -1;

	if (sentinel_open(m, b->from, &s, why, sizeof(why), &code) != 0)
		return -1;
	rs = rc_cmd(&s, 3, a);
	for (size_t k = 0; rc && rs && rs->type == REDIS_REPLY_ARRAY && k < rs->elements; k++) {
		redisReply *e = rs->element[k];
		const char *ip = NULL, *pt = NULL, *flags = "";
		bool master;
		int nrep;

		for (size_t f = 0; e->type == REDIS_REPLY_ARRAY && f + 1 < e->elements; f += 2) {
			const char *key = e->element[f]->str, *val = e->element[f + 1]->str;

			if (!key || !val)
				continue;
			if (!strcmp(key, "ip"))
				ip = val;
			else if (!strcmp(key, "port"))
				pt = val;
			else if (!strcmp(key, "flags"))
				flags = val;
		}
		if (!ip || !pt || strstr(flags, "down") || strstr(flags, "disconnected"))
			continue;
		if (rc_connect(&d->c, &d->tls, ip, atoi(pt)) == 0 &&
		    rc_login(&d->c, m->url.user, m->url.password, m->url.db, true, NULL,
			     m->url.redacted) == 0 &&
		    rc_role(&d->c, &master, &nrep) == 0 && !master) {
			fmt_addr(d->master, sizeof(d->master), b->host, b->port);
			snprintf(d->node, sizeof(d->node), "%s", d->c.addr);
			d->replica = true;
			rc = 0;
		} else {
			rc_close(&d->c);
		}
	}
	freeReplyObject(rs);
	rc_close(&s);
	return rc;
}

/* The master the sentinels name (the newest configuration epoch wins; not
 * while it is being failed over), which must say it is a master: right
 * after a failover a sentinel may still name the old one. JO_ENOTFOUND
 * when every sentinel that answered knows no master of that name. */
static int find_sentinel_master(struct jo_meta *m, bool want_replica, struct jo_err *err)
{
	struct rd *d = RD(m);
	int64_t deadline = now_ms() + (d->ever ? FAILOVER_MS : CONNECT_MS);
	char why[400] = "";

	for (;;) {
		struct sview b;
		size_t answered, unknown;
		int code = 0, rc;

		if (sentinels_ask(m, &b, &answered, &unknown, why, sizeof(why), &code) == 0) {
			if (answered > 0 && unknown == answered)
				return jo_err_set(err, JO_ENOTFOUND, "redis %s: %s", m->url.redacted, why);
			if (code == JO_EAUTH)
				return jo_err_set(err, JO_EAUTH, "redis %s: %s", m->url.redacted, why);
		} else if (b.in_failover) {
			snprintf(why, sizeof(why), "sentinel %s is failing master '%s' over (from %s:%d)",
				 d->addrs[b.from], m->url.master_name, b.host, b.port);
		} else if (want_replica && sentinel_replica(m, &b) == 0) {
			return 0;
		} else {
			bool master = false;
			int nrep = 0;

			rc = connect_plain(m, b.host, b.port, err);
			if (rc == JO_EAUTH)
				return rc;
			if (rc == 0 && rc_role(&d->c, &master, &nrep) == 0 && master) {
				fmt_addr(d->master, sizeof(d->master), b.host, b.port);
				d->replicas = nrep;
				d->replica = false;
				return 0;
			}
			if (rc == 0)
				snprintf(why, sizeof(why), "sentinel %s names %s:%d as master '%s', but "
					 "it is not a master (yet)", d->addrs[b.from], b.host, b.port,
					 m->url.master_name);
			else
				snprintf(why, sizeof(why), "%.390s", err ? err->msg : "cannot connect");
			rc_close(&d->c);
		}
		if (now_ms() >= deadline)
			return jo_err_set(err, JO_ECONNECT, "redis %s: no master '%s' found through %zu "
					  "sentinel(s): %s", m->url.redacted, m->url.master_name,
					  d->naddrs, why[0] ? why : "no answer");
		sleep_ms(250);
	}
}

/* In a CLUSTER SLOTS reply r (from a node at host), the master (nh:*np)
 * and a replica (rh:*rp) of slot; a port stays 0 when there is none. */
static void slot_nodes(const redisReply *r, int slot, const char *host, char nh[256], int *np,
		       char rh[256], int *rp)
{
	*np = *rp = 0;
	for (size_t k = 0; r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
		redisReply *e = r->element[k];

		if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
		    e->element[0]->integer > slot || e->element[1]->integer < slot)
			continue;
		for (size_t n = 2; n < e->elements; n++) {
			redisReply *nd = e->element[n];
			char *h = n == 2 ? nh : rh;

			if (nd->type != REDIS_REPLY_ARRAY || nd->elements < 2 ||
			    nd->element[0]->type != REDIS_REPLY_STRING)
				continue;
			if (n > 2 && *rp)
				continue;
			/* an empty address is the node we asked */
			snprintf(h, 256, "%s", nd->element[0]->str[0] ? nd->element[0]->str : host);
			if (n == 2)
				*np = (int)nd->element[1]->integer;
			else
				*rp = (int)nd->element[1]->integer;
		}
	}
}

/* The master of the volume's slot as the other nodes see it (the seeds
 * first, then the one we talk to): "host:port" into addr; -1 when none
 * answered with one. */
static int cluster_owner(struct jo_meta *m, char *addr, size_t cap)
{
	struct rd *d = RD(m);

	for (size_t i = 0; i <= d->naddrs; i++) {
		const char *a = i < d->naddrs ? d->addrs[i] : d->node;
		const char *cs[] = { "CLUSTER", "SLOTS" };
		char host[256], nh[256] = "", rh[256] = "";
		int port, np = 0, rp = 0;
		struct rconn t;
		redisReply *r;

		if ((i < d->naddrs && !strcmp(a, d->node)) ||
		    split_addr(a, host, sizeof(host), &port) != 0)
			continue;
		rc_init(&t);
		if (rc_connect(&t, &d->tls, host, port) != 0 ||
		    rc_login(&t, m->url.user, m->url.password, 0, false, NULL, m->url.redacted) != 0) {
			rc_close(&t);
			continue;
		}
		(void)set_timeouts(t.fd, CONNECT_MS);
		r = rc_cmd(&t, 2, cs);
		rc_close(&t);
		if (!r)
			continue;
		slot_nodes(r, d->slot, host, nh, &np, rh, &rp);
		freeReplyObject(r);
		if (np) {
			fmt_addr(addr, cap, nh, np);
			return 0;
		}
	}
	return -1;
}

/* CLUSTER SLOTS from each known node: the master (or, for route-read, a
 * replica) serving the volume's slot. */
static int find_cluster_node(struct jo_meta *m, const char *first, bool want_replica,
			     struct jo_err *err)
{
	struct rd *d = RD(m);
	int64_t deadline = now_ms() + (d->ever ? FAILOVER_MS : CONNECT_MS);
	char why[400] = "";

	for (;;) {
		for (size_t i = first ? 0 : 1; i < d->naddrs + 1; i++) {
			const char *a = i == 0 ? first : d->addrs[i - 1];
			char host[256], nh[256] = "", rh[256] = "";
			int port, np = 0, rp = 0, rc;
			const char *cs[] = { "CLUSTER", "SLOTS" };
			redisReply *r;

			if (split_addr(a, host, sizeof(host), &port) != 0)
				continue;
			if ((rc = connect_plain(m, host, port, err)) != 0) {
				if (rc == JO_EAUTH)
					return rc;
				snprintf(why, sizeof(why), "%.390s", err ? err->msg : "cannot connect");
				continue;
			}
			r = rc_cmd(&d->c, 2, cs);
			if (!r) {
				snprintf(why, sizeof(why), "%.80s: CLUSTER SLOTS: %.290s", a, d->c.errstr);
				continue;
			}
			slot_nodes(r, d->slot, host, nh, &np, rh, &rp);
			if (r->type == REDIS_REPLY_ERROR)
				snprintf(why, sizeof(why), "%s: CLUSTER SLOTS: %.200s", a, r->str);
			else if (!np)
				snprintf(why, sizeof(why), "%s: no node serves slot %d (cluster down?)", a,
					 d->slot);
			freeReplyObject(r);
			if (!np) {
				rc_close(&d->c);
				continue;
			}
			fmt_addr(d->master, sizeof(d->master), nh, np);
			if (want_replica && rp && connect_plain(m, rh, rp, NULL) == 0) {
				const char *ro[] = { "READONLY" };

				r = rc_cmd(&d->c, 1, ro);
				if (r && r->type == REDIS_REPLY_STATUS) {
					freeReplyObject(r);
					d->replica = true;
					return 0;
				}
				freeReplyObject(r);
			}
			d->replica = false;
			if (strcmp(d->c.addr, d->master) != 0 &&
			    (rc = connect_plain(m, nh, np, err)) != 0) {
				if (rc == JO_EAUTH)
					return rc;
				snprintf(why, sizeof(why), "%.390s", err ? err->msg : "cannot connect");
				continue;
			}
			{
				bool master;

				if (rc_role(&d->c, &master, &d->replicas) != 0) {
					snprintf(why, sizeof(why), "%.80s: %.300s", d->c.addr, d->c.errstr);
					continue;
				}
			}
			return 0;
		}
		if (now_ms() >= deadline)
			return jo_err_set(err, JO_ECONNECT, "redis cluster %s: no node for slot %d of "
					  "prefix %s: %s", m->url.redacted, d->slot, d->prefix,
					  why[0] ? why : "no answer");
		first = NULL;
		sleep_ms(250);
	}
}

/* (Re)connect the handle to the server its commands go to. */
static int rd_connect(struct jo_meta *m, struct jo_err *err)
{
	struct rd *d = RD(m);
	bool want_replica = m->url.read_only && m->url.route_read &&
			    (!strcmp(m->url.route_read, "replica") ||
			     (d->mode == RD_CLUSTER && (!strcmp(m->url.route_read, "random") ||
							!strcmp(m->url.route_read, "latency"))));
	int rc;

	/* a failover may have taken back what was done on the old connection */
	if (d->replicas > 0 && !d->replica)
		d->crossed = true;
	d->replicas = 0;
	d->in_tx = false;
	d->pending = 0;
	d->exec_sent = d->unsafe_sent = d->stale = false;
	switch (d->mode) {
	case RD_SENTINEL:
		rc = find_sentinel_master(m, want_replica, err);
		break;
	case RD_CLUSTER:
		rc = find_cluster_node(m, d->master[0] ? d->master : NULL, want_replica, err);
		break;
	default:
		rc = connect_plain(m, m->url.unix_socket ? m->url.path : m->url.host,
				   m->url.unix_socket ? 0 : m->url.port, err);
		if (rc == 0) {
			bool master;

			(void)rc_role(&d->c, &master, &d->replicas);
		}
		if (rc == 0 && d->c.fd < 0)
			rc = jo_err_set(err, JO_ECONNECT, "redis %s: %s", m->url.redacted, d->c.errstr);
		break;
	}
	if (rc == 0) {
		d->epoch++;
		d->ever = true;
		d->role_ms = now_ms(); /* the replicas were just counted */
	}
	return rc;
}

/* Before a command: a lost connection is replaced, unless a transaction was
 * open on it (then the command fails: the keys it watched are not watched on
 * a new connection). */
static int ensure(struct jo_meta *m)
{
	struct rd *d = RD(m);
	struct jo_err e = { 0 };

	if (d->c.fd >= 0)
		return 0;
	if (d->in_tx) {
		d->in_tx = false;
		set_err(d, true, "the connection was lost inside a transaction (%s)",
			d->c.errstr[0] ? d->c.errstr : "connection lost");
		return -1;
	}
	if (rd_connect(m, &e) != 0) {
		set_err(d, true, "reconnecting: %s", e.msg);
		return -1;
	}
	return 0;
}

/* ---------------------------------------------------------------- commands */

/* fmt with every %K replaced by the key prefix (into buf). */
static const char *kfmt(struct rd *d, const char *fmt, char *buf, size_t cap)
{
	size_t o = 0;

	for (const char *p = fmt; *p; p++) {
		if (o + d->plen + 2 >= cap)
			return NULL;
		if (p[0] == '%' && p[1] == 'K') {
			memcpy(buf + o, d->prefix, d->plen);
			o += d->plen;
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			buf[o++] = *p++;
			buf[o++] = *p;
		} else {
			buf[o++] = *p;
		}
	}
	buf[o] = '\0';
	return buf;
}

/* The transaction state a command leaves. */
static void tx_track(struct rd *d, const char *fmt)
{
	if (cmd_is(fmt, "WATCH") || cmd_is(fmt, "MULTI"))
		d->in_tx = true;
	else if (cmd_is(fmt, "EXEC") || cmd_is(fmt, "DISCARD") || cmd_is(fmt, "UNWATCH"))
		d->in_tx = false;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK ...": slot and address. */
static bool redirect(const redisReply *r, bool *ask, int *slot, char *addr, size_t cap)
{
	const char *s;

	if (r->type != REDIS_REPLY_ERROR)
		return false;
	if (!strncmp(r->str, "MOVED ", 6))
		*ask = false, s = r->str + 6;
	else if (!strncmp(r->str, "ASK ", 4))
		*ask = true, s = r->str + 4;
	else
		return false;
	*slot = atoi(s);
	s = strchr(s, ' ');
	if (!s)
		return false;
	snprintf(addr, cap, "%s", s + 1);
	return true;
}

/* A reply that says the command did not run here and the next connection
 * should be elsewhere: a demoted master (READONLY), a loading replica. */
static bool not_here(const redisReply *r)
{
	return r->type == REDIS_REPLY_ERROR &&
	       (!strncmp(r->str, "READONLY", 8) || !strncmp(r->str, "LOADING", 7) ||
		!strncmp(r->str, "MASTERDOWN", 10) || !strncmp(r->str, "CLUSTERDOWN", 11) ||
		!strncmp(r->str, "TRYAGAIN", 8));
}

/* ASK: the one command on the node that imports the slot, after ASKING. */
static redisReply *ask_once(struct jo_meta *m, const char *addr, const char *cmd, size_t len)
{
	struct rd *d = RD(m);
	struct rconn t;
	char host[256];
	int port;
	redisReply *r = NULL, *a;
	const char *asking[] = { "ASKING" };

	rc_init(&t);
	if (split_addr(addr, host, sizeof(host), &port) != 0 ||
	    rc_connect(&t, &d->tls, host, port) != 0 ||
	    rc_login(&t, m->url.user, m->url.password, 0, false, NULL, m->url.redacted) != 0) {
		set_err(d, true, "ASK redirection to %s: %s", addr, t.errstr);
		rc_close(&t);
		return NULL;
	}
	a = rc_cmd(&t, 1, asking);
	freeReplyObject(a);
	if (a && rc_append(&t, cmd, len) == 0 && rc_read(&t, &r) == 0) {
		rc_close(&t);
		return r;
	}
	set_err(d, true, "ASK redirection to %s: %s", addr, t.errstr);
	rc_close(&t);
	return NULL;
}

/* Run one formatted command (cmd, len) whose format was fmt. */
static redisReply *run(struct jo_meta *m, const char *fmt, const char *cmd, size_t len)
{
	struct rd *d = RD(m);
	bool again = repeatable(fmt);
	int64_t deadline = 0;

	d->unknown = d->moved = false;
	if (d->pending) {
		/* a pipeline left unread (an error path): its replies go with the
		 * connection, and so does any transaction it held */
		rc_close(&d->c);
		snprintf(d->c.errstr, sizeof(d->c.errstr), "a pipeline was abandoned");
		d->pending = 0;
		d->in_tx = false;
		d->pipe_broken = false;
	}
	for (int attempt = 0;; attempt++) {
		bool was_tx = d->in_tx, watch_first = cmd_is(fmt, "WATCH") && !d->in_tx;
		redisReply *r = NULL;
		char addr[280];
		int slot;
		bool ask;

		if (ensure(m) != 0)
			return NULL;
		if (rc_append(&d->c, cmd, len) != 0) {
			set_err(d, false, "out of memory");
			return NULL;
		}
		if (rc_read(&d->c, &r) != 0) {
			d->in_tx = false;
			set_err(d, d->c.io, "%s", d->c.errstr);
			if ((again && !was_tx) || watch_first) {
				if (!deadline)
					deadline = now_ms() + FAILOVER_MS;
				if (now_ms() < deadline) {
					if (attempt > 0)
						sleep_ms(attempt < 10 ? 50 * attempt : 500);
					continue; /* ensure() reconnects */
				}
			}
			d->unknown = !again;
			return NULL;
		}
		if (d->mode == RD_CLUSTER && redirect(r, &ask, &slot, addr, sizeof(addr))) {
			if (slot != d->slot) {
				/* a key without the volume's prefix: never follow it elsewhere */
				return r;
			}
			if (was_tx || attempt >= MAX_REDIRECTS) {
				d->in_tx = false;
				rc_close(&d->c); /* find the slot's node again next time */
				return r;
			}
			if (ask && cmd_is(fmt, "WATCH"))
				return r; /* a WATCH on another connection would guard nothing */
			freeReplyObject(r);
			if (ask)
				return ask_once(m, addr, cmd, len);
			snprintf(d->master, sizeof(d->master), "%s", addr);
			rc_close(&d->c);
			continue;
		}
		if (not_here(r) && d->mode != RD_STANDALONE && !d->replica) {
			/* the command did not run: a failover is under way */
			rc_close(&d->c);
			if (!was_tx && attempt < 120) {
				if (!deadline)
					deadline = now_ms() + FAILOVER_MS;
				if (now_ms() < deadline) {
					freeReplyObject(r);
					sleep_ms(250);
					continue;
				}
			}
			d->in_tx = false;
			return r;
		}
		tx_track(d, fmt);
		return r;
	}
}

redisReply *jo_rd_vcommand(struct jo_meta *m, const char *fmt, va_list ap)
{
	struct rd *d = RD(m);
	char kb[640], *cmd = NULL;
	const char *f = kfmt(d, fmt, kb, sizeof(kb));
	redisReply *r;
	int n;

	if (!f) {
		set_err(d, false, "internal: command format too long");
		return NULL;
	}
	n = redisvFormatCommand(&cmd, f, ap);
	if (n < 0) {
		set_err(d, false, "cannot format %s", fmt);
		return NULL;
	}
	r = run(m, fmt, cmd, (size_t)n);
	redisFreeCommand(cmd);
	return r;
}

redisReply *jo_rd_command(struct jo_meta *m, const char *fmt, ...)
{
	va_list ap;
	redisReply *r;

	va_start(ap, fmt);
	r = jo_rd_vcommand(m, fmt, ap);
	va_end(ap);
	return r;
}

redisReply *jo_rd_command_argv(struct jo_meta *m, int argc, const char **argv, const size_t *lens)
{
	char *cmd = NULL;
	redisReply *r;
	int n = redisFormatCommandArgv(&cmd, argc, argv, lens);

	if (n < 0) {
		set_err(RD(m), false, "out of memory");
		return NULL;
	}
	r = run(m, argv[0], cmd, (size_t)n);
	redisFreeCommand(cmd);
	return r;
}

/* A command joins the pipeline: the first of one starts it afresh. */
static void append_start(struct jo_meta *m)
{
	struct rd *d = RD(m);

	if (d->pending == 0) {
		d->exec_sent = d->unsafe_sent = d->stale = d->pipe_broken = false;
		d->unknown = d->moved = false;
		if (ensure(m) != 0)
			d->pipe_broken = true;
	}
	/* Whatever fails here, the command still counts as pending: its reply
	 * then fails to read, and no later command of this pipeline can start on
	 * a new connection (a MULTI block would lose its MULTI). */
	d->pending++;
}

/* A command whose format or verb is fmt was queued (failed: it could not be). */
static int append_done(struct jo_meta *m, const char *fmt, bool failed)
{
	struct rd *d = RD(m);

	if (failed) {
		set_err(d, false, "out of memory");
		d->err_code = JO_ENOMEM;
		d->pipe_broken = true;
	}
	if (d->pipe_broken) {
		rc_close(&d->c);
		return REDIS_ERR;
	}
	if (cmd_is(fmt, "EXEC"))
		d->exec_sent = true;
	else if (!repeatable(fmt) && !cmd_is(fmt, "MULTI"))
		d->unsafe_sent = true;
	tx_track(d, fmt);
	return REDIS_OK;
}

/* Queue the formatted command cmd (n bytes, n < 0: formatting failed; cmd
 * is freed here) whose format or verb is fmt. */
static int append_end(struct jo_meta *m, const char *fmt, char *cmd, int n)
{
	struct rd *d = RD(m);
	bool failed = n < 0 || (!d->pipe_broken && rc_append(&d->c, cmd, (size_t)n) != 0);

	redisFreeCommand(cmd);
	return append_done(m, fmt, failed);
}

int jo_rd_append(struct jo_meta *m, const char *fmt, ...)
{
	struct rd *d = RD(m);
	char kb[640], *cmd = NULL;
	const char *f = kfmt(d, fmt, kb, sizeof(kb));
	va_list ap;
	int n;

	append_start(m);
	if (!f) {
		set_err(d, false, "internal: command format too long");
		d->pipe_broken = true;
		rc_close(&d->c);
		return REDIS_ERR;
	}
	va_start(ap, fmt);
	n = redisvFormatCommand(&cmd, f, ap);
	va_end(ap);
	return append_end(m, fmt, cmd, n);
}

int jo_rd_append_argv(struct jo_meta *m, int argc, const char **argv, const size_t *lens)
{
	struct rd *d = RD(m);

	append_start(m);
	return append_done(m, argv[0],
			   !d->pipe_broken && rc_append_argv(&d->c, argc, argv, lens) != 0);
}

int jo_rd_get_reply(struct jo_meta *m, redisReply **out)
{
	struct rd *d = RD(m);
	redisReply *r = NULL;
	bool ask;
	int slot;
	char addr[280];

	*out = NULL;
	if (d->pending <= 0) {
		set_err(d, false, "internal: no pipelined reply to read");
		return REDIS_ERR;
	}
	if (d->pipe_broken || rc_read(&d->c, &r) != 0) {
		/* every pending reply is lost with the connection */
		if (!d->pipe_broken)
			set_err(d, d->c.io, "%s", d->c.errstr[0] ? d->c.errstr : "connection lost");
		d->pipe_broken = false;
		rc_close(&d->c);
		d->unknown = d->exec_sent || d->unsafe_sent;
		d->pending = 0;
		d->in_tx = false;
		return REDIS_ERR;
	}
	if ((d->mode == RD_CLUSTER && redirect(r, &ask, &slot, addr, sizeof(addr))) ||
	    (not_here(r) && d->mode != RD_STANDALONE && !d->replica)) {
		/* not run here; the rest of the pipeline is answered the same way */
		d->stale = true;
		if (d->mode == RD_CLUSTER && redirect(r, &ask, &slot, addr, sizeof(addr)) && !ask &&
		    slot == d->slot)
			snprintf(d->master, sizeof(d->master), "%s", addr);
	}
	if (--d->pending == 0) {
		if (d->exec_sent)
			d->in_tx = false;
		d->exec_sent = d->unsafe_sent = false;
		if (d->stale) {
			d->stale = false;
			d->in_tx = false;
			rc_close(&d->c);
			snprintf(d->c.errstr, sizeof(d->c.errstr), "redirected");
		}
	}
	*out = r;
	return REDIS_OK;
}

int jo_rd_append_failed(struct jo_meta *m, size_t appended, struct jo_err *err, const char *what)
{
	/* the failed command counts as pending too; the first read after a
	 * failed append fails and ends the pipeline (pending back to 0) */
	for (size_t i = 0; i <= appended; i++) {
		redisReply *r = NULL;

		if (jo_rd_get_reply(m, &r) != REDIS_OK)
			break;
		freeReplyObject(r);
	}
	return jo_rd_conn_error(m, err, what);
}

int jo_rd_conn_error(struct jo_meta *m, struct jo_err *err, const char *what)
{
	struct rd *d = RD(m);
	int code = d->err_code ? d->err_code : JO_EIO;

	return jo_err_set(err, code, "redis %s: %s: %s%s", m->url.redacted, what,
			  d->err[0] ? d->err : "connection lost",
			  d->unknown ? " (the write's outcome is unknown: not acted on)" : "");
}

bool jo_rd_retryable(struct jo_meta *m, int rc)
{
	struct rd *d = RD(m);

	return rc == JO_ECONNECT && !d->unknown && !d->in_tx && d->pending == 0;
}

bool jo_rd_redirected(const redisReply *r)
{
	bool ask;
	int slot;
	char addr[8];

	return r && (redirect(r, &ask, &slot, addr, sizeof(addr)) || not_here(r));
}

const char *jo_rd_prefix(struct jo_meta *m, size_t *len)
{
	struct rd *d = RD(m);

	if (len)
		*len = d->plen;
	return d->prefix;
}

bool jo_rd_unprefix(struct jo_meta *m, redisReply *k)
{
	struct rd *d = RD(m);

	if (k->type != REDIS_REPLY_STRING || k->len < d->plen ||
	    memcmp(k->str, d->prefix, d->plen) != 0)
		return false;
	if (d->plen) {
		memmove(k->str, k->str + d->plen, k->len - d->plen + 1);
		k->len -= d->plen;
	}
	return true;
}

unsigned jo_rd_epoch(struct jo_meta *m)
{
	return RD(m)->epoch;
}

/*
 * Not confirmed (why says what was seen): ask who is the master now. When
 * the sentinels (or the cluster, for the slot) name another server, or are
 * failing this one over, the connection is dropped, so that the next
 * command goes to the master they name, and d->moved says so. Either way
 * the outcome is unknown and nothing may be acted on.
 */
static int unconfirmed(struct jo_meta *m, const char *why, struct jo_err *err)
{
	struct rd *d = RD(m);
	char named[280] = "", now[200] = "";

	d->unknown = true;
	if (d->mode == RD_SENTINEL) {
		struct sview b;
		size_t answered, unknown;
		char w[400];
		int code = 0;

		if (sentinels_ask(m, &b, &answered, &unknown, w, sizeof(w), &code) > 0) {
			fmt_addr(named, sizeof(named), b.host, b.port);
			if (b.in_failover)
				snprintf(now, sizeof(now), "; sentinel %.80s is failing master '%.40s' over",
					 d->addrs[b.from], m->url.master_name);
			else if (strcmp(named, d->master) != 0)
				snprintf(now, sizeof(now), "; the sentinels now name %.80s as master '%.40s'",
					 named, m->url.master_name);
		}
	} else if (d->mode == RD_CLUSTER && cluster_owner(m, named, sizeof(named)) == 0 &&
		   strcmp(named, d->master) != 0) {
		snprintf(now, sizeof(now), "; slot %d is now served by %.80s", d->slot, named);
	}
	if (now[0]) {
		d->moved = true;
		d->replicas = 0; /* this one is known: no need to flag the next connection */
		rc_close(&d->c);
		snprintf(d->c.errstr, sizeof(d->c.errstr), "the master moved");
		if (d->mode == RD_CLUSTER)
			snprintf(d->master, sizeof(d->master), "%s", named);
	}
	return jo_err_set(err, JO_ECONNECT, "redis %s: %s: %s%s: the outcome is unknown: "
			  "not acted on", m->url.redacted, d->node, why, now);
}

/*
 * After a WAIT that no replica acked in time: is it worth waiting again?
 * Only while this server still says it is a master with a replica attached
 * and, behind Sentinel, the sentinels name it and none is failing it over.
 */
static bool still_master_with_replica(struct jo_meta *m)
{
	struct rd *d = RD(m);
	bool master = true;
	int nrep = 0;

	if (rc_role(&d->c, &master, &nrep) != 0 || !master || nrep < 1)
		return false;
	if (d->mode == RD_SENTINEL) {
		struct sview b;
		size_t answered, unknown;
		char w[400], named[280];
		int code = 0;

		if (sentinels_ask(m, &b, &answered, &unknown, w, sizeof(w), &code) == 0 ||
		    b.in_failover)
			return false;
		fmt_addr(named, sizeof(named), b.host, b.port);
		if (strcmp(named, d->master) != 0)
			return false;
	}
	return true;
}

int jo_rd_confirm(struct jo_meta *m, struct jo_err *err)
{
	struct rd *d = RD(m);
	char why[300], ms[16];
	const char *wait[] = { "WAIT", "1", ms };
	redisReply *r;
	int64_t t0;

	d->moved = false;
	if (d->replica)
		return 0; /* a handle reading from a replica writes nothing */
	if (d->crossed) {
		/* the server that had what came before is gone; this is another
		 * connection (after a failover, maybe another server): later work
		 * goes on here */
		d->crossed = false;
		d->unknown = d->moved = true;
		return jo_err_set(err, JO_ECONNECT, "redis %s: the connection to a master with "
				  "replicas was lost since the last confirmed step (now at %s): what "
				  "was done before cannot be confirmed: not acted on", m->url.redacted,
				  d->node);
	}
	if (d->pending || d->c.fd < 0) {
		snprintf(why, sizeof(why), "the connection was lost before the result was confirmed "
			 "(%.200s)", d->pending ? "replies pending" : d->c.errstr);
		return unconfirmed(m, why, err);
	}
	if (d->replicas <= 0) {
		bool master = true;
		int nrep = 0;

		/* has one come since? (asked at most once a second: a standalone
		 * server that never replicates pays one INFO a second, not one a
		 * transaction) */
		if (now_ms() < d->role_ms + 1000)
			return 0;
		d->role_ms = now_ms();
		if (rc_role(&d->c, &master, &nrep) != 0) {
			snprintf(why, sizeof(why), "INFO replication failed (%.200s)", d->c.errstr);
			return unconfirmed(m, why, err);
		}
		if (!master)
			return unconfirmed(m, "the server is not a master any more", err);
		if (nrep == 0)
			return 0; /* no replica on this connection, ever: none to fail over to */
		d->replicas = nrep;
	}
	snprintf(ms, sizeof(ms), "%d", WAIT_MS);
	t0 = now_ms();
	for (;;) {
		r = rc_cmd(&d->c, 3, wait);
		if (r && r->type == REDIS_REPLY_INTEGER && r->integer >= 1) {
			freeReplyObject(r);
			return 0;
		}
		if (!r || r->type != REDIS_REPLY_INTEGER)
			break;
		freeReplyObject(r);
		r = NULL;
		/* none acked the write yet: WAIT again (it waits for the same
		 * offset) while a replica is still attached to a server that is
		 * still the master, up to CONFIRM_MS */
		if (now_ms() - t0 + WAIT_MS > CONFIRM_MS || !still_master_with_replica(m))
			break;
	}
	if (!r && d->c.fd < 0)
		snprintf(why, sizeof(why), "the connection was lost waiting for a replica (%.200s)",
			 d->c.errstr);
	else if (!r)
		snprintf(why, sizeof(why), "no replica confirmed the result within %lld ms (a "
			 "failover would lose it)", (long long)(now_ms() - t0));
	else if (r->type == REDIS_REPLY_ERROR)
		snprintf(why, sizeof(why), "WAIT was refused (%.200s), so no replica can confirm "
			 "the result", r->str);
	else
		snprintf(why, sizeof(why), "unexpected reply to WAIT (type %d)", r->type);
	freeReplyObject(r);
	return unconfirmed(m, why, err);
}

bool jo_rd_moved(struct jo_meta *m)
{
	return RD(m)->moved;
}

/* ---------------------------------------------------------------- open, close, describe */

static void free_addrs(struct rd *d)
{
	for (size_t i = 0; i < d->naddrs; i++)
		free(d->addrs[i]);
	free(d->addrs);
	d->addrs = NULL;
	d->naddrs = 0;
}

static int split_hosts(struct rd *d, const char *hosts, struct jo_err *err)
{
	const char *p = hosts;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		char **v = realloc(d->addrs, (d->naddrs + 1) * sizeof(*v));

		if (!v)
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		d->addrs = v;
		if (!(d->addrs[d->naddrs] = strndup(p, n)))
			return jo_err_set(err, JO_ENOMEM, "out of memory");
		d->naddrs++;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

static int tls_setup(struct jo_meta *m, struct jo_err *err)
{
	struct rd *d = RD(m);
	const struct jo_meta_url *u = &m->url;
	char e[300];

	d->tls.ctx = SSL_CTX_new(TLS_client_method());
	if (!d->tls.ctx)
		return jo_err_set(err, JO_ENOMEM, "TLS: out of memory");
	SSL_CTX_set_min_proto_version(d->tls.ctx, TLS1_2_VERSION);
	d->tls.skip_verify = u->tls_skip_verify;
	d->tls.server_name = u->tls_server_name;
	d->tls.ca = u->tls_ca;
	SSL_CTX_set_verify(d->tls.ctx, u->tls_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
	ERR_clear_error();
	if (u->tls_ca) {
		if (SSL_CTX_load_verify_locations(d->tls.ctx, u->tls_ca, NULL) != 1) {
			ssl_errs(e, sizeof(e));
			return jo_err_set(err, JO_EINVAL, "redis %s: cannot read tls-ca-cert-file %s: %s",
					  u->redacted, u->tls_ca, e);
		}
	} else {
		SSL_CTX_set_default_verify_paths(d->tls.ctx);
	}
	if (u->tls_cert) {
		if (SSL_CTX_use_certificate_chain_file(d->tls.ctx, u->tls_cert) != 1 ||
		    SSL_CTX_use_PrivateKey_file(d->tls.ctx, u->tls_key ? u->tls_key : u->tls_cert,
						SSL_FILETYPE_PEM) != 1 ||
		    SSL_CTX_check_private_key(d->tls.ctx) != 1) {
			ssl_errs(e, sizeof(e));
			return jo_err_set(err, JO_EINVAL, "redis %s: cannot use tls-cert-file %s / "
					  "tls-key-file %s: %s", u->redacted, u->tls_cert,
					  u->tls_key ? u->tls_key : "(none)", e);
		}
	}
	return 0;
}

/* A single address that answers CLUSTER INFO with a cluster_state is a
 * cluster node (juicefs then opens a cluster client with it as the seed). */
static bool is_cluster_node(struct rd *d)
{
	const char *a[] = { "CLUSTER", "INFO" };
	redisReply *r = rc_cmd(&d->c, 2, a);
	bool yes;

	if (!r)
		return false;
	yes = (r->type == REDIS_REPLY_ERROR && strstr(r->str, "cluster mode")) ||
	      (r->type != REDIS_REPLY_ERROR && r->str && strstr(r->str, "cluster_state:"));
	freeReplyObject(r);
	return yes;
}

int jo_rd_open(struct jo_meta *m, struct jo_err *err)
{
	struct rd *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return jo_err_set(err, JO_ENOMEM, "out of memory");
	rc_init(&d->c);
	m->be = d;
	if (m->url.tls && (rc = tls_setup(m, err)) != 0)
		goto fail;
	if (m->url.hosts && (rc = split_hosts(d, m->url.hosts, err)) != 0)
		goto fail;
	d->mode = m->url.master_name ? RD_SENTINEL : m->url.hosts ? RD_CLUSTER : RD_STANDALONE;
	if (d->mode == RD_STANDALONE && !m->url.unix_socket) {
		/* one address: a standalone server or a cluster node */
		if (rc_connect(&d->c, &d->tls, m->url.host, m->url.port) != 0) {
			rc = jo_err_set(err, JO_ECONNECT, "cannot connect to redis %s: %s",
					m->url.redacted, d->c.errstr);
			goto fail;
		}
		if ((rc = rc_login(&d->c, m->url.user, m->url.password, 0, false, err,
				   m->url.redacted)) != 0)
			goto fail;
		if (is_cluster_node(d)) {
			char a[280];

			fmt_addr(a, sizeof(a), m->url.host, m->url.port);
			d->mode = RD_CLUSTER;
			if ((rc = split_hosts(d, a, err)) != 0)
				goto fail;
		}
		rc_close(&d->c);
	}
	if (d->mode == RD_CLUSTER) {
		snprintf(d->prefix, sizeof(d->prefix), "{%d}", m->url.db);
		d->plen = strlen(d->prefix);
		d->slot = (int)(crc16(d->prefix + 1, d->plen - 2) & 16383);
	}
	if ((rc = rd_connect(m, err)) != 0)
		goto fail;
	return 0;
fail:
	jo_rd_close(m);
	return rc;
}

void jo_rd_close(struct jo_meta *m)
{
	struct rd *d = m->be;

	if (!d)
		return;
	rc_close(&d->c);
	if (d->tls.ctx)
		SSL_CTX_free(d->tls.ctx);
	free_addrs(d);
	free(d);
	m->be = NULL;
}

void jo_rd_mode(struct jo_meta *m, char *buf, size_t cap)
{
	struct rd *d = RD(m);
	size_t o = 0;

	switch (d->mode) {
	case RD_SENTINEL:
		o = (size_t)snprintf(buf, cap, "sentinel: master '%s' at %s%s%s", m->url.master_name,
				     d->master, d->replica ? ", reading from replica " : "",
				     d->replica ? d->node : "");
		break;
	case RD_CLUSTER:
		o = (size_t)snprintf(buf, cap, "cluster: slot %d of key prefix %s served by %s%s%s",
				     d->slot, d->prefix, d->master,
				     d->replica ? ", reading from replica " : "",
				     d->replica ? d->node : "");
		break;
	default:
		o = (size_t)snprintf(buf, cap, "standalone at %s", d->node);
		break;
	}
	if (o < cap && d->replicas > 0 && !d->replica)
		o += (size_t)snprintf(buf + o, cap - o, ", %d replica(s)", d->replicas);
	if (o < cap && d->tls.ctx)
		snprintf(buf + o, cap - o, ", TLS: server certificate %s%s", d->tls.subject,
			 d->tls.skip_verify ? " (not verified: insecure-skip-verify)" : "");
}
