/* Size-capped growable byte buffers and borrowed byte slices.
 *
 * A qr_buf owns its memory. Every append checks the cap first; an append that would pass the cap
 * or fails to allocate frees the buffer and reports, so a half-built buffer never escapes. */
#ifndef QR_CORE_BUF_H
#define QR_CORE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/err.h"

/* A borrowed run of bytes; not NUL-terminated unless said so. */
struct qr_slice {
    const char *ptr;
    size_t len;
};

#define QR_SLICE_LIT(s) ((struct qr_slice){(s), sizeof(s) - 1})

static inline struct qr_slice qr_slice_str(const char *s)
{
    return (struct qr_slice){s, s ? strlen(s) : 0};
}

static inline bool qr_slice_eq(struct qr_slice a, const char *s)
{
    size_t n = strlen(s);
    return a.len == n && memcmp(a.ptr, s, n) == 0;
}

/* ASCII case-insensitive compare of a slice with a C string. */
bool qr_slice_eq_nocase(struct qr_slice a, const char *s);

struct qr_buf {
    char *ptr;  /* owned; NUL-terminated after every successful append */
    size_t len; /* bytes in use, excluding the terminator */
    size_t cap; /* bytes allocated */
    size_t max; /* cap on len; 0 means SIZE_MAX/2 */
};

/* Initialise an empty buffer in caller storage. Allocates nothing. */
void qr_buf_init(struct qr_buf *b, size_t max);

/* Free the memory and reset to empty (keeps max). */
void qr_buf_cleanup(struct qr_buf *b);

/* Append n bytes. On QR_ERR_TOO_LARGE or QR_ERR_NOMEM the buffer has been cleaned up. */
enum qr_err qr_buf_append(struct qr_buf *b, const void *p, size_t n);

static inline enum qr_err qr_buf_puts(struct qr_buf *b, const char *s)
{
    return qr_buf_append(b, s, strlen(s));
}

/* Append printf-formatted text; same failure contract as qr_buf_append. */
enum qr_err qr_buf_appendf(struct qr_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Append s as the body of a JSON string (no quotes), escaping what JSON requires. */
enum qr_err qr_buf_append_json_str(struct qr_buf *b, const char *s, size_t n);

/* The shortest decimal text ("%.<p>g", p <= 9) that reads back as exactly v (a finite float32),
 * as an engine printing float32 values writes them (0.1, not 0.100000001); NUL-terminated in buf.
 * Returns its length. */
size_t qr_fmt_float32(char buf[32], float v);

/* Hand the memory to the caller (who frees it) and reset the buffer to empty. */
char *qr_buf_take(struct qr_buf *b, size_t *out_len);

#endif
