/*
 * la.c: dlopen() of libarchive for the quarantine (see la.h).
 */
#include "leakcheck/la.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifndef JO_LIBARCHIVE_SONAME
#define JO_LIBARCHIVE_SONAME "libarchive.so.13"
#endif

static pthread_once_t la_once = PTHREAD_ONCE_INIT;
static struct jo_la la_funcs;
static int la_failed;
static char la_why[300];

static void la_open(void)
{
	void *h = dlopen(JO_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (!h) {
		e = dlerror();
		snprintf(la_why, sizeof(la_why), "%s", e ? e : JO_LIBARCHIVE_SONAME ": cannot open");
		la_failed = 1;
		return;
	}
	/*
	 * A function pointer is read through memcpy from dlsym's void *, the
	 * form POSIX guarantees and -Wpedantic accepts.
	 */
#define JO_LA_SYM(f)                                                          \
	{                                                                     \
		void *p = dlsym(h, #f);                                       \
		if (!p) {                                                     \
			snprintf(la_why, sizeof(la_why), "%s: no symbol %s",  \
				 JO_LIBARCHIVE_SONAME, #f);                   \
			la_failed = 1;                                        \
			return;                                               \
		}                                                             \
		memcpy(&la_funcs.f, &p, sizeof(p));                           \
	}
	JO_LA_FUNCS(JO_LA_SYM)
#undef JO_LA_SYM
	/* h stays open: the functions are used until the process exits */
}

int jo_la_load(const struct jo_la **out, struct jo_err *err)
{
	*out = NULL;
	pthread_once(&la_once, la_open);
	if (la_failed)
		return jo_err_set(err, JO_EUNSUPPORTED,
				  "a quarantine needs libarchive (Debian package libarchive13): %s",
				  la_why);
	*out = &la_funcs;
	return 0;
}
