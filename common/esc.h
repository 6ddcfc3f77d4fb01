/*
 * esc.h: text from outside (object keys, file names, range lines, server
 * messages) made safe for a terminal.
 *
 * A key or a file name may hold any byte: an ESC sequence in it printed raw
 * recolours, moves or retitles the operator's terminal, a newline forges a
 * report line. Every human output (tables on stdout, log and error lines
 * on stderr) passes such text through jo_esc_term(); JSON output needs
 * nothing (jansson escapes control characters).
 */
#ifndef JO_ESC_H
#define JO_ESC_H

#include <stddef.h>

/* The cap that holds the escaped form of any string of n bytes whole. */
#define JO_ESC_TERM_MAX(n) (4 * (size_t)(n) + 1)

/*
 * s as `ls -b` shows a file name: \a \b \t \n \v \f \r for those, \\ for a
 * backslash, \ooo (octal) for every other control character (C0, DEL as
 * \177, and C1 written as UTF-8, e.g. \302\233) and for each byte that is
 * not valid UTF-8 (overlong, surrogate, beyond U+10FFFF, cut short). Valid
 * UTF-8 and spaces are kept as they are.
 *
 * Returns s itself (borrowed) when nothing in it needs escaping, else out:
 * at most cap bytes, NUL-terminated; an escape is never cut, and a result
 * that does not fit ends with "..." (JO_ESC_TERM_MAX says what always fits).
 * s must not be NULL; cap must be at least 4 when s needs escaping.
 * Thread-safe (no state).
 */
const char *jo_esc_term(char *out, size_t cap, const char *s);

/*
 * jo_esc_term() for one printf argument, into a buffer of its own that lives
 * until the end of the enclosing block: printf("%s\n", JO_ESC_TERM(key)).
 * Room for 1,024 bytes of the worst kind (an S3 key at most), more of
 * ordinary text; longer results end in "...". s must not be NULL.
 */
#define JO_ESC_TERM_CAP JO_ESC_TERM_MAX(1024)
#define JO_ESC_TERM(s) jo_esc_term((char[JO_ESC_TERM_CAP]){ '\0' }, JO_ESC_TERM_CAP, (s))

#endif
