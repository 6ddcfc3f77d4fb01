/* meta_open.c: see meta_open.h. */
#include "support/meta_open.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/err.h"
#include "common/meta/meta.h"

struct jo_meta *meta_open_ok(const char *url)
{
	struct jo_meta *m = NULL;
	struct jo_err err = { 0 };

	if (jo_meta_open(&m, url, &err) != 0)
		fail_msg("open %s: %s", url, err.msg);
	return m;
}
