/*
 * compare.c: the copy-or-skip decision, from the two listings and the state
 * file only (never a HEAD).
 *
 * The state row records, for the last copy we made of a key: the source's
 * size/mtime/ETag at that time, the size and expected ETag of what we wrote,
 * the content MD5 and when we wrote it. A row "vouches" for the destination
 * object when the destination still has the size we wrote and either the ETag
 * we expected (or the content MD5) or no comparable ETag at all.
 */
#include "sync/sync.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

bool jo_sync_etag_is_md5(const char *etag)
{
	if (!etag || strlen(etag) != 32)
		return false;
	for (int i = 0; i < 32; i++)
		if (!isxdigit((unsigned char)etag[i]))
			return false;
	return true;
}

static bool etag_eq(const char *a, const char *b)
{
	return a[0] && b[0] && strcasecmp(a, b) == 0;
}

/* The state row describes the destination object as we left it. */
static bool row_vouches_dst(const struct jo_sync_row *row, const struct jo_sync_ent *dst)
{
	if (!row || !row->found || row->dst_size != dst->size)
		return false;
	if (!dst->etag[0] || !row->dst_etag[0])
		return true;
	return etag_eq(row->dst_etag, dst->etag) || etag_eq(row->md5, dst->etag);
}

/* The source is unchanged since the copy the row records. */
static bool row_matches_src(const struct jo_sync_row *row, const struct jo_sync_ent *src)
{
	if (row->src_size != src->size || row->src_mtime != src->mtime)
		return false;
	if (src->etag[0] && row->src_etag[0] && strcasecmp(src->etag, row->src_etag) != 0)
		return false;
	return true;
}

/* Content MD5 of a side when known: plain ETag, or the state's record. */
static const char *src_md5(const struct jo_sync_ent *src, const struct jo_sync_row *row)
{
	if (jo_sync_etag_is_md5(src->etag))
		return src->etag;
	if (row && row->found && row->md5[0] && row_matches_src(row, src))
		return row->md5;
	return NULL;
}

static const char *dst_md5(const struct jo_sync_ent *dst, const struct jo_sync_row *row)
{
	if (jo_sync_etag_is_md5(dst->etag))
		return dst->etag;
	if (row && row->found && row->md5[0] && row_vouches_dst(row, dst) && dst->etag[0])
		return row->md5;
	return NULL;
}

enum jo_sync_decision jo_sync_decide(const struct jo_sync_cmp_opts *o,
				     const struct jo_sync_ent *src,
				     const struct jo_sync_ent *dst,
				     const struct jo_sync_row *row, const char **why)
{
	const char *dummy;

	if (!why)
		why = &dummy;
	if (!dst) {
		if (o->existing) {
			*why = "not-existing";
			return JO_SYNC_SKIP;
		}
		*why = "missing";
		return JO_SYNC_COPY;
	}
	if (o->ignore_existing) {
		*why = "exists";
		return JO_SYNC_SKIP;
	}
	if (o->update) {
		/* The destination's effective time: the source mtime we copied from
		 * when the state vouches for the object, else its own mtime. */
		int64_t dt = row_vouches_dst(row, dst) ? row->src_mtime : dst->mtime;
		if (src->mtime > dt) {
			*why = "newer";
			return JO_SYNC_COPY;
		}
		*why = "not-newer";
		return JO_SYNC_SKIP;
	}
	if (src->size != dst->size) {
		*why = "size";
		return JO_SYNC_COPY;
	}
	if (o->mode == JO_SYNC_CMP_SIZE) {
		*why = "same-size";
		return JO_SYNC_SKIP;
	}
	if (o->mode == JO_SYNC_CMP_CHECKSUM) {
		const char *a = src_md5(src, row), *b = dst_md5(dst, row);
		if (a && b) {
			if (strcasecmp(a, b) == 0) {
				*why = "same-md5";
				return JO_SYNC_SKIP;
			}
			*why = "md5";
			return JO_SYNC_COPY;
		}
		/* No comparable hash on one side: fall through to size + mtime. */
	}
	if (row_vouches_dst(row, dst)) {
		if (row_matches_src(row, src)) {
			*why = "unchanged";
			return JO_SYNC_SKIP;
		}
		*why = "changed";
		return JO_SYNC_COPY;
	}
	/* No usable record: the destination was written after the source's last
	 * change (object stores set LastModified at upload time). */
	if (dst->mtime >= src->mtime) {
		*why = "dst-not-older";
		return JO_SYNC_SKIP;
	}
	*why = "older";
	return JO_SYNC_COPY;
}
