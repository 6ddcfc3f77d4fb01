#include "common/curlerr.h"

#include "common/err.h"

static int broken_connection(CURLcode cc)
{
	switch (cc) {
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_USE_SSL_FAILED:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE: /* the connection closed inside the reply */
	case CURLE_UNSUPPORTED_PROTOCOL:
		return 1;
	default:
		return 0;
	}
}

int jo_curl_code(CURLcode cc, unsigned flags)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
		return JO_ECONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return JO_ETIMEOUT;
	case CURLE_ABORTED_BY_CALLBACK:
		return JO_ECANCELED;
	case CURLE_OUT_OF_MEMORY:
		return JO_ENOMEM;
	default:
		if ((flags & JO_CURL_BROKEN_IS_CONNECT) && broken_connection(cc))
			return JO_ECONNECT;
		return JO_EIO;
	}
}
