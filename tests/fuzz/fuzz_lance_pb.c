/* libFuzzer target: the protobuf wire decoder, walked recursively. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/err.h"
#include "lanceparse/lance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const uint8_t *d, size_t n, int depth)
{
	struct lance_pb r;
	struct lance_pb_field f;
	struct jo_err err = { 0 };

	lance_pb_init(&r, d, n);
	while (lance_pb_next(&r, &f, &err) > 0) {
		if (f.wt != LANCE_PB_LEN)
			continue;
		int32_t *v = NULL;
		uint64_t *u = NULL;
		size_t nv = 0, nu = 0;
		(void)lance_pb_repeated_i32(&f, &v, &nv, &err); /* errors are expected */
		(void)lance_pb_repeated_u64(&f, &u, &nu, &err);
		free(v);
		free(u);
		if (depth < 16)
			walk(f.data, f.len, depth + 1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	walk(data, size, 0);
	return 0;
}
