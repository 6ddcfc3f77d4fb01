/* jfsops cat: a file's bytes, read from the metadata and the objects, no mount. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/volume.h"
#include "common/err.h"
#include "common/jfs/jfs.h"

static const char cat_usage[] =
	"usage: jfsops cat META-URL PATH [--offset N] [--length N]\n"
	"\n"
	"Print the bytes of a regular file in a JuiceFS volume on stdout, reading\n"
	"the chunk and slice records from the metadata engine and the blocks from\n"
	"the object store directly: no mount, no session, nothing written.\n"
	"Overlapping slices resolve as JuiceFS resolves them (the later write wins)\n"
	"and holes read as zeros.\n"
	"\n"
	"";

static const char cat_tail[] =
	CMD_VOL_NOTE
	"\n"
	"Examples:\n"
	"  jfsops cat sqlite3:///var/jfs/meta.db /logs/app.log | tail\n"
	"  jfsops cat redis://127.0.0.1:6379/1 /data/part-0 --offset 64M --length 4M | sha256sum\n";

/* payload: an int that takes the errno of a failed write */
static int write_stdout(const void *data, size_t len, void *payload)
{
	if (fwrite(data, 1, len, stdout) != len) {
		*(int *)payload = errno;
		return JO_EIO;
	}
	return 0;
}

int cmd_cat(int argc, char **argv, struct jo_ctx *ctx)
{
	struct cmd_vol_args va = { 0 };
	struct jo_vol *vol = NULL;
	struct jo_err err = { 0 };
	uint64_t off = 0, len = UINT64_MAX, ino;
	int rc, werr = 0;
	struct jo_option opts[] = {
		OPT_SIZE(0, "offset", &off, "N", "first byte to print (default 0; a size: 64M, "
			 "1.5G)", 0, 0),
		OPT_SIZE(0, "length", &len, "N", "bytes to print (default: to the end of the file)",
			 0, 0),
		OPT_HELP(),
		CMD_VOL_OPTIONS(&va),
		OPT_END(),
	};
	struct jo_opt_cmd cmd = { ctx->prefix, cat_usage, cat_tail, opts };

	if (!cmd_parse_operands(ctx, &cmd, argc, argv, 2, "expected META-URL and PATH", &rc))
		return rc;
	va.read_only = true;
	rc = cmd_open_volume(ctx, &va, argv[1], &vol);
	if (rc)
		goto out;
	rc = jo_meta_resolve(vol->meta, argv[2], &ino, &err);
	if (!rc)
		rc = jo_vol_read(vol, ino, off, len, write_stdout, &werr, &err);
	if (rc == JO_EIO && werr == EPIPE)
		rc = JO_EXIT_FAIL;  /* the reader went away: main makes it a quiet 141 */
	else if (rc == JO_EIO && werr)
		rc = cmd_fail(ctx, (jo_err_set(&err, JO_EIO, "cannot write to stdout: %s",
					       strerror(werr)), &err));
	else if (rc)
		rc = cmd_fail(ctx, &err);
out:
	jo_vol_close(vol);
	cmd_vol_args_release(&va);
	return rc;
}
