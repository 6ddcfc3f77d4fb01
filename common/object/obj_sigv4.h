/*
 * obj_sigv4.h: AWS Signature Version 4 (header form), by OpenSSL.
 * Pure functions of their inputs so the AWS test vectors can check them.
 */
#ifndef JO_OBJ_SIGV4_H
#define JO_OBJ_SIGV4_H

#include <stddef.h>

struct jo_sigv4_header {
	const char *name;   /* any case; lower-cased for signing */
	const char *value;  /* trimmed, inner runs of spaces collapsed */
};

struct jo_sigv4_req {
	const char *method;
	const char *path;         /* canonical URI: already URI-encoded ("/a%20b") */
	const char *query;        /* "k=v&k2=v2" already encoded; NULL or "": none */
	const struct jo_sigv4_header *headers;  /* must include host and x-amz-date */
	size_t nheaders;
	const char *payload_hash; /* lower-case hex SHA-256, or "UNSIGNED-PAYLOAD" */
	const char *access_key;
	const char *secret_key;
	const char *region;
	const char *service;      /* "s3" */
	const char *amz_date;     /* "20150830T123600Z" */
};

/*
 * The canonical request, the string to sign and the Authorization header
 * value. Each returns a malloc'd string (caller frees) or NULL on OOM.
 */
char *jo_sigv4_canonical_request(const struct jo_sigv4_req *r);
char *jo_sigv4_string_to_sign(const struct jo_sigv4_req *r);
char *jo_sigv4_authorization(const struct jo_sigv4_req *r);

/* Lower-case hex SHA-256 / base64 MD5 of a buffer into out (65 / 25 bytes). */
void jo_sigv4_sha256_hex(const void *data, size_t len, char out[65]);
void jo_obj_md5_base64(const void *data, size_t len, char out[25]);
void jo_obj_md5_hex(const void *data, size_t len, char out[33]);

#endif
