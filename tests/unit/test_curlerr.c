/* jo_curl_code: libcurl's failures as JO_E*, shared by the S3 and etcd clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/curlerr.h"
#include "common/err.h"

static void curl_code_classes_what_both_clients_agree_on(void **state)
{
	(void)state;
	for (unsigned f = 0; f <= JO_CURL_BROKEN_IS_CONNECT; f += JO_CURL_BROKEN_IS_CONNECT) {
		assert_int_equal(jo_curl_code(CURLE_COULDNT_CONNECT, f), JO_ECONNECT);
		assert_int_equal(jo_curl_code(CURLE_COULDNT_RESOLVE_HOST, f), JO_ECONNECT);
		assert_int_equal(jo_curl_code(CURLE_PEER_FAILED_VERIFICATION, f), JO_ECONNECT);
		assert_int_equal(jo_curl_code(CURLE_OPERATION_TIMEDOUT, f), JO_ETIMEOUT);
		assert_int_equal(jo_curl_code(CURLE_ABORTED_BY_CALLBACK, f), JO_ECANCELED);
		assert_int_equal(jo_curl_code(CURLE_OUT_OF_MEMORY, f), JO_ENOMEM);
		assert_int_equal(jo_curl_code(CURLE_WRITE_ERROR, f), JO_EIO);
	}
}

static void curl_code_broken_connection_is_connect_only_when_asked(void **state)
{
	(void)state;
	assert_int_equal(jo_curl_code(CURLE_RECV_ERROR, 0), JO_EIO);
	assert_int_equal(jo_curl_code(CURLE_RECV_ERROR, JO_CURL_BROKEN_IS_CONNECT), JO_ECONNECT);
	assert_int_equal(jo_curl_code(CURLE_PARTIAL_FILE, 0), JO_EIO);
	assert_int_equal(jo_curl_code(CURLE_PARTIAL_FILE, JO_CURL_BROKEN_IS_CONNECT), JO_ECONNECT);
	assert_int_equal(jo_curl_code(CURLE_UNSUPPORTED_PROTOCOL, JO_CURL_BROKEN_IS_CONNECT),
			 JO_ECONNECT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(curl_code_classes_what_both_clients_agree_on),
		cmocka_unit_test(curl_code_broken_connection_is_connect_only_when_asked),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
