/*
 * fake_obj.h: an in-memory object store plugged in through the object
 * client's backend vtable, for the unit tests of sync (engine, cluster).
 *
 * Keys are kept sorted in byte order. A listing comes in byte order, or
 * directory by directory (dir_first: '/' below every other byte, as
 * SeaweedFS lists) with start-after taken in that order, or with
 * start-after ignored (as rclone serve s3 does for keys that do not exist).
 * Requests are counted; multipart uploads work; copy is unsupported.
 * Every request takes the store's mutex, so workers may share it.
 */
#ifndef JO_TEST_FAKE_OBJ_H
#define JO_TEST_FAKE_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

struct jo_obj;
struct jo_err;

struct fake_obj {
	char *key;
	unsigned char *data;
	size_t len;
	char etag[40];           /* MD5 of data, hex */
	int64_t mtime;
	char **meta;             /* name, value, ..., NULL (keep_meta only) */
};

struct fake_part {
	char upload[32];
	char key[1100];
	int number;
	unsigned char *data;
	size_t len;
};

struct fake_store {
	pthread_mutex_t mu;
	struct fake_obj *o;      /* sorted by key (byte order) */
	size_t n, cap;
	struct fake_part *parts;
	size_t nparts;
	int uploads;
	/* behaviour, set by the test before use */
	bool ignore_start_after;
	bool dir_first;
	bool keep_meta;          /* PUT keeps user metadata, HEAD and GET give it back */
	bool fail_keys;          /* GETs of keys containing "FAIL" fail (JO_EIO) */
	int put_delay_us;        /* slow PUTs (kill tests) */
	/* counters */
	int lists, gets, puts, heads, deletes;
};

/* A new client on an empty store (close it with jo_obj_close). */
struct jo_obj *fake_obj_new(void);
struct fake_store *fake_store(struct jo_obj *o);
/* The index of key in s, or -1. */
ssize_t fake_find(struct fake_store *s, const char *key);
/* Store a copy of data under key (no request counted); the record, valid until the next change. */
struct fake_obj *fake_set(struct fake_store *s, const char *key, const void *data, size_t len,
			  int64_t mtime);
/* A DELETE as the client sends it (counted). */
int fake_del(struct jo_obj *o, const char *key, struct jo_err *err);

struct jo_objurl;
/* A sync side on endpoint ep, bucket "b", under prefix; its desc is
 * "<scheme>ep/b/prefix" (scheme: "" or "s3:"). Strings strdup'd. */
void fake_side(struct jo_objurl *s, const char *scheme, const char *ep, const char *prefix);

#endif
