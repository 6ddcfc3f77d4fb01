/*
 * la.h: libarchive, opened on first use.
 *
 * Only a quarantine (written by --delete-from --quarantine, read by
 * --restore) needs libarchive, and Debian's pulls libxml2, ICU and libstdc++
 * in with it: about 2 MiB resident in every jfsops process if it were
 * linked. So it is loaded with dlopen() by the two code paths that use it,
 * and every other command (gc, a leakcheck dry run, sync, ...) never maps it.
 *
 * The pointers have the types of the prototypes in <archive.h>, so a call
 * through them is checked by the compiler exactly as a direct call would be.
 */
#ifndef JO_LEAK_LA_H
#define JO_LEAK_LA_H

#include <archive.h>
#include <archive_entry.h>

#include "common/err.h"

#define JO_LA_FUNCS(X)                                                        \
	X(archive_write_new) X(archive_write_add_filter_zstd)                 \
	X(archive_write_set_format_pax_restricted) X(archive_write_open_filename) \
	X(archive_write_open_fd)                                              \
	X(archive_write_header) X(archive_write_data) X(archive_write_close)  \
	X(archive_write_free) X(archive_read_new)                             \
	X(archive_read_support_filter_all) X(archive_read_support_format_tar) \
	X(archive_read_support_filter_zstd) X(archive_read_open_fd)           \
	X(archive_read_open_filename) X(archive_read_next_header)             \
	X(archive_read_data) X(archive_read_free) X(archive_error_string)     \
	X(archive_entry_filetype) X(archive_entry_hardlink)                   \
	X(archive_entry_new) X(archive_entry_free) X(archive_entry_pathname)  \
	X(archive_entry_size) X(archive_entry_set_pathname)                   \
	X(archive_entry_set_filetype) X(archive_entry_set_perm)               \
	X(archive_entry_set_size) X(archive_entry_set_mtime)

struct jo_la {
#define JO_LA_MEMBER(f) __typeof__(f) *f;
	JO_LA_FUNCS(JO_LA_MEMBER)
#undef JO_LA_MEMBER
};

/*
 * Open libarchive (once per process; thread-safe) and return its functions.
 * JO_EUNSUPPORTED with the loader's reason when it is not installed or lacks
 * a function this build needs (zstd support in particular).
 */
int jo_la_load(const struct jo_la **out, struct jo_err *err);

#endif
