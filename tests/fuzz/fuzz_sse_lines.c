/* libFuzzer target for the line framer and the SSE field classifier. The input is delivered in
 * chunks whose sizes come from its first bytes, through a pending buffer of exactly max_line + 2
 * bytes (all the framer may ever need: a full buffer is never "need more"). The lines found must
 * be the ones a plain whole-input reference finds, in the same places, with the same terminators,
 * and must stop at the same too-long line; lines plus terminators must rebuild the consumed input
 * byte for byte. Every line is also classified as an SSE field, and the pieces must rebuild it.
 *
 * Layout: [flags][max_line][seed][limit] body. flags bit 0: allow_cr; bit 1: max_line = 4096. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stream/lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct found {
    size_t off, len, used;
};

/* The obvious whole-input framer. Returns the number of lines; *too_long when it stopped at one. */
static size_t reference(const char *in, size_t len, size_t max_line, bool allow_cr,
                        struct found *out, bool *too_long)
{
    size_t n = 0, pos = 0;
    *too_long = false;
    while (pos < len) {
        size_t k = pos, term = 0;
        for (; k < len; k++) {
            if (in[k] == '\n') {
                term = 1;
                break;
            }
            if (in[k] == '\r') {
                if (k + 1 < len && in[k + 1] == '\n') {
                    term = 2;
                    break;
                }
                if (allow_cr) {
                    term = 1;
                    break;
                }
            }
        }
        if (k - pos > max_line) {
            *too_long = true;
            return n;
        }
        out[n++] = (struct found){pos, k - pos, k - pos + term};
        pos = k + term;
    }
    return n;
}

static void check_field(struct qr_slice line)
{
    struct qr_sse_field f;
    qr_sse_field_parse(line, &f);
    const char *end = line.ptr + line.len;
    if (f.name.ptr < line.ptr || f.name.ptr + f.name.len > end)
        abort();
    if (f.value.ptr < line.ptr || f.value.ptr + f.value.len > end)
        abort();
    switch (f.kind) {
    case QR_SSE_BLANK:
        if (line.len != 0)
            abort();
        break;
    case QR_SSE_COMMENT:
        if (line.len == 0 || line.ptr[0] != ':' || f.value.len != line.len - 1)
            abort();
        break;
    case QR_SSE_FIELD:
        if (line.len == 0 || line.ptr[0] == ':' || f.name.ptr != line.ptr)
            abort();
        if (memchr(f.name.ptr, ':', f.name.len))
            abort();
        if (f.name.len == line.len) {
            if (f.value.len != 0)
                abort();
            break;
        }
        /* name ":" [" "] value == line, and a dropped space is exactly one */
        if (line.ptr[f.name.len] != ':' || f.value.ptr + f.value.len != end)
            abort();
        size_t gap = (size_t) (f.value.ptr - (line.ptr + f.name.len + 1));
        if (gap > 1 || (gap == 1 && line.ptr[f.name.len + 1] != ' '))
            abort();
        if (gap == 0 && f.value.len && f.value.ptr[0] == ' ')
            abort();
        break;
    default:
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    bool allow_cr = data[0] & 1;
    size_t max_line = (data[0] & 2) ? 4096 : data[1] % 64;
    uint32_t rng = data[2] * 2654435761u + 1;
    size_t limit = (size_t) data[3] + 1;
    const char *in = (const char *) data + 4;
    size_t len = size - 4;

    struct found *want = malloc((len + 1) * sizeof(*want));
    struct found *got = malloc((len + 1) * sizeof(*got));
    char *pend = malloc(max_line + 2);
    char *rebuilt = malloc(len + 1);
    if (!want || !got || !pend || !rebuilt)
        abort();
    bool want_long, got_long = false;
    size_t n_want = reference(in, len, max_line, allow_cr, want, &want_long);

    size_t n_got = 0, plen = 0, base = 0, fed = 0, n_rebuilt = 0;
    for (int final = 0; final < 2 && !got_long; final++) {
        for (;;) {
            /* Give the framer what it has; take lines until it wants more. */
            struct qr_slice line;
            size_t used;
            enum qr_line_status st =
                qr_line_next(pend, plen, max_line, allow_cr, final, &line, &used);
            if (st == QR_LINE_TOO_LONG) {
                got_long = true;
                break;
            }
            if (st == QR_LINE_OK) {
                if (line.ptr != pend || used < line.len || used > plen || used - line.len > 2)
                    abort();
                const char *t = pend + line.len;
                size_t tl = used - line.len;
                bool ok = (tl == 1 && t[0] == '\n') || (tl == 2 && t[0] == '\r' && t[1] == '\n') ||
                          (tl == 1 && t[0] == '\r' && allow_cr) ||
                          (tl == 0 && final && used == plen && used > 0);
                if (!ok)
                    abort();
                check_field(line);
                got[n_got++] = (struct found){base, line.len, used};
                memcpy(rebuilt + n_rebuilt, pend, used);
                n_rebuilt += used;
                memmove(pend, pend + used, plen - used);
                plen -= used;
                base += used;
                continue;
            }
            if (st != QR_LINE_NEED_MORE || used != 0)
                abort();
            if (plen == max_line + 2)
                abort(); /* a full buffer must always be decidable */
            if (final || fed == len)
                break;
            rng = rng * 1103515245u + 12345u;
            size_t chunk = 1 + (rng >> 16) % limit;
            size_t room = max_line + 2 - plen;
            if (chunk > room)
                chunk = room;
            if (chunk > len - fed)
                chunk = len - fed;
            memcpy(pend + plen, in + fed, chunk);
            plen += chunk;
            fed += chunk;
        }
    }
    if (got_long != want_long || n_got != n_want)
        abort();
    for (size_t i = 0; i < n_got; i++) {
        if (got[i].off != want[i].off || got[i].len != want[i].len || got[i].used != want[i].used)
            abort();
    }
    if (memcmp(rebuilt, in, n_rebuilt) != 0 || (!got_long && n_rebuilt != len))
        abort();
    free(rebuilt);
    free(pend);
    free(got);
    free(want);
    return 0;
}
