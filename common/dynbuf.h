/*
 * dynbuf.h: the one growable buffer (the spirit of curl's lib/curlx/dynbuf.h).
 *
 * Every buffer has a hard maximum, set at init: growth past it fails with
 * JO_EPROTO ("too big") instead of eating memory, so a buffer fed by an
 * outside party (a server's reply, a listing, a socket) cannot be made to
 * grow without bound. Only trusted, internally bounded uses pass
 * JO_DYNBUF_UNLIMITED.
 *
 * Invariants: p is NULL until the first byte is added, then always
 * NUL-terminated at p[len] (the NUL is not counted in len, nor in max).
 * After a failed add the buffer is marked failed: later adds return
 * JO_ENOMEM at once and change nothing (so a run of adds can be checked
 * once at the end), until jo_dynbuf_reset(). Contents up to the failure
 * stay valid. The struct is not thread-safe; embed it and use
 * jo_dynbuf_init()/jo_dynbuf_release() (release accepts a zeroed struct).
 */
#ifndef JO_DYNBUF_H
#define JO_DYNBUF_H

#include <stdbool.h>
#include <stddef.h>

#define JO_DYNBUF_UNLIMITED 0

struct jo_dynbuf {
	char *p;     /* NUL-terminated when non-NULL */
	size_t len;  /* bytes held */
	size_t cap;  /* bytes allocated (at least len + 1 once p is set) */
	size_t max;  /* most bytes it may hold; JO_DYNBUF_UNLIMITED: no limit */
	bool failed; /* an add failed (out of memory or over max) */
};

#define JO_DYNBUF_INIT(max_) { NULL, 0, 0, (max_), false }

void jo_dynbuf_init(struct jo_dynbuf *b, size_t max);
/* Frees the contents; b can be reused as after init (max kept). */
void jo_dynbuf_release(struct jo_dynbuf *b);
/* Empties b, keeping its memory, and clears failed. */
void jo_dynbuf_reset(struct jo_dynbuf *b);

/*
 * Append n bytes (data may be NULL when n is 0). 0, JO_EPROTO when the
 * result would be longer than max, JO_ENOMEM when out of memory or
 * after an earlier failure.
 */
int jo_dynbuf_add(struct jo_dynbuf *b, const void *data, size_t n);
/* jo_dynbuf_add() of a C string. */
int jo_dynbuf_adds(struct jo_dynbuf *b, const char *s);
/* Append printf output; JO_EIO on a bad format, else as jo_dynbuf_add(). */
int jo_dynbuf_addf(struct jo_dynbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Make room for n more bytes without adding them (for a reader that writes
 * into p + len itself, then calls jo_dynbuf_setlen()). Errors as add.
 */
int jo_dynbuf_reserve(struct jo_dynbuf *b, size_t n);
/* Set len to n (at most cap - 1, as reserve made room) and NUL-terminate. */
void jo_dynbuf_setlen(struct jo_dynbuf *b, size_t n);

/*
 * Hand the contents to the caller (free() them) and leave b empty as after
 * init. Never NULL unless out of memory: an empty buffer gives "". *len_out
 * (when not NULL) gets len.
 */
char *jo_dynbuf_detach(struct jo_dynbuf *b, size_t *len_out);

/*
 * Arrays: make room in *arrp (an array of elsize-byte elements, *cap of them
 * allocated) for at least need elements, doubling from 16 so that n appends
 * cost O(n). 0 (*arrp and *cap unchanged when there is room already), or
 * JO_ENOMEM when out of memory or need * elsize would overflow; *arrp is
 * left as it was then. arrp is a pointer to the array pointer:
 * jo_grow_array(&v->items, &v->cap, v->n + 1, sizeof(*v->items)).
 */
int jo_grow_array(void *arrp, size_t *cap, size_t need, size_t elsize);
/* The same, from first elements (> 0) instead of 16 when *cap is 0: for
 * byte buffers that want a larger first allocation. */
int jo_grow_array_from(void *arrp, size_t *cap, size_t need, size_t elsize, size_t first);

#endif
