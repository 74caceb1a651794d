/* Line framing for upstream streams (NDJSON and SSE) and SSE field classification. Both are pure
 * functions over the caller's bytes: they never allocate, never copy, and look at no more than
 * max_line + 2 bytes, so a hostile upstream that never sends a terminator costs one bounded scan
 * per call. Terminators follow the WHATWG EventSource rules: "\r\n", "\n", and, when the caller
 * allows it, a lone "\r"; a "\r" that ends the buffer is undecided until the next byte (or the end
 * of the stream) shows whether a "\n" follows. A line of exactly max_line bytes is accepted; one
 * byte more without a terminator is QR_LINE_TOO_LONG. With final set and nothing left, the answer
 * is NEED_MORE (there is no line to give). */
#include "stream/lines.h"

#include <string.h>

static enum qr_line_status line_at(const char *buf, size_t line_len, size_t used,
                                   struct qr_slice *out, size_t *consumed)
{
    out->ptr = buf;
    out->len = line_len;
    *consumed = used;
    return QR_LINE_OK;
}

enum qr_line_status qr_line_next(const char *buf, size_t len, size_t max_line, bool allow_cr,
                                 bool final, struct qr_slice *out, size_t *consumed)
{
    out->ptr = buf;
    out->len = 0;
    *consumed = 0;
    /* A terminator must start at an index <= max_line; "\r" there may need one more byte. */
    size_t lim = max_line < len ? max_line + 1 : len;
    for (size_t j = 0; j < lim; j++) {
        char c = buf[j];
        if (c == '\n')
            return line_at(buf, j, j + 1, out, consumed);
        if (c != '\r')
            continue;
        if (j + 1 == len) {
            if (!final)
                return QR_LINE_NEED_MORE; /* may be the first half of "\r\n" */
            if (allow_cr)
                return line_at(buf, j, j + 1, out, consumed);
            continue; /* a lone "\r" is data when it does not terminate lines */
        }
        if (buf[j + 1] == '\n')
            return line_at(buf, j, j + 2, out, consumed);
        if (allow_cr)
            return line_at(buf, j, j + 1, out, consumed);
    }
    if (len > max_line)
        return QR_LINE_TOO_LONG;
    if (final && len > 0)
        return line_at(buf, len, len, out, consumed);
    return QR_LINE_NEED_MORE;
}

void qr_sse_field_parse(struct qr_slice line, struct qr_sse_field *out)
{
    out->name = (struct qr_slice){line.ptr, 0};
    out->value = (struct qr_slice){line.ptr, 0};
    if (line.len == 0) { /* before any arithmetic: ptr may be NULL */
        out->kind = QR_SSE_BLANK;
        return;
    }
    const char *end = line.ptr + line.len;
    out->value.ptr = end;
    const char *colon = memchr(line.ptr, ':', line.len);
    if (colon == line.ptr) {
        out->kind = QR_SSE_COMMENT;
        out->value = (struct qr_slice){line.ptr + 1, line.len - 1};
        return;
    }
    out->kind = QR_SSE_FIELD;
    if (!colon) {
        out->name.len = line.len;
        return;
    }
    out->name.len = (size_t) (colon - line.ptr);
    const char *v = colon + 1;
    if (v < end && *v == ' ')
        v++;
    out->value = (struct qr_slice){v, (size_t) (end - v)};
}
