/*
 * libFuzzer target: the data-file footer/metadata parsers (v1 and v2) and the
 * range computation, over an in-memory reader. Byte 0 picks the file version
 * and the column types; the rest is the data file.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "lanceparse/lance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mem_io {
	struct lance_io io;
	const uint8_t *d;
	size_t n;
};

static int mem_size(struct lance_io *io, const char *rel, uint64_t *out, struct jo_err *err)
{
	struct mem_io *m = (struct mem_io *)io;
	if (strcmp(rel, "data/f.lance") != 0)
		return jo_err_set(err, JO_ENOTFOUND, "no %s", rel);
	*out = m->n;
	return 0;
}

static int mem_pread(struct lance_io *io, const char *rel, void *buf, size_t len, uint64_t off,
		     struct jo_err *err)
{
	struct mem_io *m = (struct mem_io *)io;
	if (strcmp(rel, "data/f.lance") != 0)
		return jo_err_set(err, JO_ENOTFOUND, "no %s", rel);
	if (off > m->n || len > m->n - off)
		return jo_err_set(err, JO_EPROTO, "short");
	memcpy(buf, m->d + off, len);
	return 0;
}

static int mem_list(struct lance_io *io, const char *rel, lance_io_list_cb cb, void *payload,
		    struct jo_err *err)
{
	(void)io;
	(void)cb;
	(void)payload;
	return jo_err_set(err, JO_ENOTFOUND, "no %s", rel);
}

static void mem_close(struct lance_io *io)
{
	(void)io;
}

static const struct lance_io_ops mem_ops = { mem_size, mem_pread, mem_list, mem_close };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *types[] = { "int64", "string", "struct", "list", "fixed_size_list:float:16",
				       "bool", "large_binary", "dict:string:int32:false" };
	struct lance_field fields[4];
	int32_t ids[4] = { 0, 1, 2, 3 }, cols[4] = { 0, 1, 2, 3 };
	struct lance_datafile df = { 0 };
	struct lance_fragment fr = { 0 };
	struct lance_manifest m = { 0 };
	struct mem_io io = { .io = { .ops = &mem_ops } };
	struct lance_scan_opts so = { .tail_block = 4096 };
	struct lance_rangeset s;
	struct jo_err err = { 0 };
	size_t sel[2] = { 0, 1 };

	if (size < 1)
		return 0;
	uint8_t sel_byte = data[0];
	io.d = data + 1;
	io.n = size - 1;
	memset(fields, 0, sizeof(fields));
	for (int i = 0; i < 4; i++) {
		fields[i].id = i;
		fields[i].parent_id = i == 3 ? 2 : -1;
		fields[i].name = (char *)"c";
		fields[i].logical_type = (char *)types[(sel_byte >> (i % 3)) & 7];
		fields[i].blob_v1 = (sel_byte & 0x40) != 0;
	}
	df.path = (char *)"f.lance";
	df.fields = ids;
	df.nfields = 4;
	if (sel_byte & 0x80) {
		df.major = 2;
		df.minor = sel_byte & 3;
		df.column_indices = cols;
		df.ncolumn_indices = 4;
	} else {
		df.major = 0;
		df.minor = 2;
	}
	fr.files = &df;
	fr.nfiles = 1;
	m.fields = fields;
	m.nfields = 4;
	m.frags = &fr;
	m.nfrags = 1;
	m.manifest_path = (char *)"data/f.lance";
	m.manifest_size = io.n;
	so.blob_payloads = (sel_byte & 0x20) != 0;
	lance_rangeset_init(&s);
	if (lance_scan_ranges(&io.io, &m, sel, 2, &so, &s, &err) == 0)
		lance_rangeset_finish(&s, sel_byte & 0x10 ? 4096 : 0, 64);
	lance_rangeset_release(&s);
	return 0;
}
