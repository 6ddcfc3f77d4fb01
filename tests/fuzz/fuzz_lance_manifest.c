/* libFuzzer target: a whole manifest file (tail, Manifest, schema, fragments). */
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lanceparse/lance.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lance_manifest *m = NULL;
	struct jo_err err = { 0 };
	size_t idx;

	if (lance_manifest_decode(data, size, &m, &err) == 0) {
		(void)lance_field_resolve(m, "a.b", &idx, &err); /* may not exist */
		for (size_t i = 0; i < m->nfrags; i++)
			for (size_t j = 0; j < m->frags[i].nfiles; j++)
				(void)m->frags[i].files[j].path[0];
		lance_manifest_free(m);
	}
	return 0;
}
