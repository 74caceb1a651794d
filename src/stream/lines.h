/* Incremental line and SSE framing for upstream streams. These parsers own no memory: given the
 * bytes at hand they answer "a line/field of N bytes, consumed M", "need more", or "error", and the
 * caller keeps the unconsumed tail (capped) until more bytes arrive. */
#ifndef QR_STREAM_LINES_H
#define QR_STREAM_LINES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

enum qr_line_status {
    QR_LINE_OK = 0,        /* *out is one line (terminator stripped), *consumed bytes used */
    QR_LINE_NEED_MORE = 1, /* no complete line yet; *consumed = 0 */
    QR_LINE_TOO_LONG = 2,  /* more than max_line bytes without a terminator */
};

/* One line from the start of buf. Terminators: "\n", "\r\n", and (allow_cr) a lone "\r" as SSE
 * allows; a "\r" at the very end of buf is NEED_MORE unless final (it may be half of "\r\n").
 * final: no more bytes will come, so a trailing unterminated line is returned as a line. */
enum qr_line_status qr_line_next(const char *buf, size_t len, size_t max_line, bool allow_cr,
                                 bool final, struct qr_slice *out, size_t *consumed);

/* SSE (WHATWG EventSource) line classification. */
enum qr_sse_kind {
    QR_SSE_BLANK = 0,   /* empty line: dispatch the event gathered so far */
    QR_SSE_COMMENT = 1, /* ":..." keep-alive or comment; value = text after ':' */
    QR_SSE_FIELD = 2,   /* "field: value" / "field:value" / "field" (empty value) */
};

struct qr_sse_field {
    enum qr_sse_kind kind;
    struct qr_slice name;  /* "data", "event", "id", "retry", or anything else (ignored) */
    struct qr_slice value; /* one leading space after the colon removed */
};

/* Classify one line (as returned by qr_line_next with allow_cr). Never fails. */
void qr_sse_field_parse(struct qr_slice line, struct qr_sse_field *out);

#endif
