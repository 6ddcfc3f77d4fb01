/* jfsops cat: a file's bytes, read from the metadata and the objects, no mount. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "common/exit.h"
#include "common/numparse.h"
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
	"Options:\n"
	"      --offset N   first byte to print (default 0; K/M/G suffixes)\n"
	"      --length N   bytes to print (default: to the end of the file)\n"
	"  -h, --help       show this help\n"
	CMD_VOL_HELP
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
	static const struct option opts[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		CMD_VOL_LONGOPTS,
		{ 0 }
	};
	struct cmd_vol_args va = { 0 };
	struct jo_vol *vol = NULL;
	struct jo_err err = { 0 };
	uint64_t off = 0, len = UINT64_MAX, ino;
	int c, rc, werr = 0;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (cmd_vol_opt(&va, c, optarg))
			continue;
		switch (c) {
		case 'o':
			if (cmd_parse_size(optarg, &off))
				return cmd_usage_error(ctx, "bad --offset '%s'", optarg);
			break;
		case 'l':
			if (cmd_parse_size(optarg, &len))
				return cmd_usage_error(ctx, "bad --length '%s'", optarg);
			break;
		case 'h':
			fputs(cat_usage, stdout);
			return 0;
		default:
			return cmd_usage_error(ctx, "unknown option");
		}
	}
	if (argc - optind != 2)
		return cmd_usage_error(ctx, "expected META-URL and PATH");
	va.read_only = true;
	rc = cmd_open_volume(ctx, &va, argv[optind], &vol);
	if (rc)
		goto out;
	rc = jo_meta_resolve(vol->meta, argv[optind + 1], &ino, &err);
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
