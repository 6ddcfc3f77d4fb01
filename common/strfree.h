#ifndef JO_STRFREE_H
#define JO_STRFREE_H

/*
 * Release functions of structs that own many strings: each field named is
 * freed and set to NULL, in the order named.
 *
 *   jo_free_strs(&u->engine, &u->user, &u->host);
 *
 * jo_free_secret() first overwrites the string with zeros (passwords, keys,
 * documents that hold them), so that the freed memory no longer holds it.
 */

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static inline void jo_free_strv(char **const fields[], size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(*fields[i]);
		*fields[i] = NULL;
	}
}

#define jo_free_strs(...)                                                                  \
	jo_free_strv((char **const[]){__VA_ARGS__},                                        \
		     sizeof((char **const[]){__VA_ARGS__}) / sizeof(char **))

static inline void jo_free_secret(char **s)
{
	if (*s) {
		memset(*s, 0, strlen(*s));
		free(*s);
		*s = NULL;
	}
}

#endif
