#include "common/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void jo_err_clear(struct jo_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

int jo_err_set(struct jo_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	err->code = code;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	return code;
}

int jo_err_wrap(struct jo_err *err, const char *fmt, ...)
{
	char ctx[256], old[sizeof(err->msg)];
	va_list ap;

	if (!err)
		return JO_EIO;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	/* context first, then as much of the old message as fits */
	{
		size_t cl = strlen(ctx), ol = strnlen(old, sizeof(old) - 1);
		size_t cap = sizeof(err->msg) - 1;

		if (cl > cap)
			cl = cap;
		memcpy(err->msg, ctx, cl);
		if (cl + 2 < cap) {
			memcpy(err->msg + cl, ": ", 2);
			cl += 2;
			if (ol > cap - cl)
				ol = cap - cl;
			memcpy(err->msg + cl, old, ol);
			cl += ol;
		}
		err->msg[cl] = '\0';
	}
	if (err->code == 0)
		err->code = JO_EIO;
	return err->code;
}

const char *jo_err_name(int code)
{
	switch (code) {
	case JO_OK: return "OK";
	case JO_ENOMEM: return "ENOMEM";
	case JO_EIO: return "EIO";
	case JO_ENOTFOUND: return "ENOTFOUND";
	case JO_ECONFLICT: return "ECONFLICT";
	case JO_ETIMEOUT: return "ETIMEOUT";
	case JO_ECANCELED: return "ECANCELED";
	case JO_EPROTO: return "EPROTO";
	case JO_EINVAL: return "EINVAL";
	case JO_EAUTH: return "EAUTH";
	case JO_ECONNECT: return "ECONNECT";
	case JO_EUNSUPPORTED: return "EUNSUPPORTED";
	case JO_ENOTJFS: return "ENOTJFS";
	case JO_ESTATE: return "ESTATE";
	case JO_EEXIST: return "EEXIST";
	}
	return "EUNKNOWN";
}
