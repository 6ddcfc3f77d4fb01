/*
 * curlerr.h: libcurl's failures translated to JO_E* at the boundary, once,
 * for every client that speaks HTTP (the S3 object client, the etcd
 * gateway client). Only those two include it: nothing above common/ sees
 * a CURLcode.
 */
#ifndef JO_CURLERR_H
#define JO_CURLERR_H

#include <curl/curl.h>

enum jo_curl_flags {
	/*
	 * A connection that broke mid-request (send/recv error, nothing or part
	 * of a reply) or whose TLS or protocol could not be set up at all is
	 * JO_ECONNECT rather than JO_EIO: etcd then moves to its next endpoint.
	 * Without the flag (S3) those are JO_EIO, and the client's own retry
	 * policy decides.
	 */
	JO_CURL_BROKEN_IS_CONNECT = 1 << 0,
};

/*
 * The JO_E* for cc: JO_ECONNECT (no connection: resolve, connect, TLS
 * handshake or certificate), JO_ETIMEOUT, JO_ECANCELED (a progress callback
 * stopped it), JO_ENOMEM, else JO_EIO. Thread-safe (no state).
 */
int jo_curl_code(CURLcode cc, unsigned flags);

#endif
