/* Capped growable buffers: the one place that grows memory for outside-controlled sizes. */
#include "core/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

bool qr_slice_eq_nocase(struct qr_slice a, const char *s)
{
    size_t n = strlen(s);
    if (a.len != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char) a.ptr[i], y = (unsigned char) s[i];
        if (x >= 'A' && x <= 'Z')
            x = (unsigned char) (x + 32);
        if (y >= 'A' && y <= 'Z')
            y = (unsigned char) (y + 32);
        if (x != y)
            return false;
    }
    return true;
}

void qr_buf_init(struct qr_buf *b, size_t max)
{
    b->ptr = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : SIZE_MAX / 2;
}

void qr_buf_cleanup(struct qr_buf *b)
{
    free(b->ptr);
    b->ptr = NULL;
    b->len = 0;
    b->cap = 0;
}

static enum qr_err reserve(struct qr_buf *b, size_t extra)
{
    if (extra > b->max - b->len) {
        qr_buf_cleanup(b);
        return QR_ERR_TOO_LARGE;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return QR_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > SIZE_MAX / 4 ? need : cap * 2;
    char *p = realloc(b->ptr, cap);
    if (!p) {
        qr_buf_cleanup(b);
        return QR_ERR_NOMEM;
    }
    b->ptr = p;
    b->cap = cap;
    return QR_OK;
}

enum qr_err qr_buf_append(struct qr_buf *b, const void *p, size_t n)
{
    enum qr_err err = reserve(b, n);
    if (err)
        return err;
    if (n)
        memcpy(b->ptr + b->len, p, n);
    b->len += n;
    b->ptr[b->len] = '\0';
    return QR_OK;
}

enum qr_err qr_buf_appendf(struct qr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        qr_buf_cleanup(b);
        return QR_ERR_INVALID;
    }
    enum qr_err err = reserve(b, (size_t) n);
    if (err)
        return err;
    va_start(ap, fmt);
    vsnprintf(b->ptr + b->len, (size_t) n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t) n;
    return QR_OK;
}

enum qr_err qr_buf_append_json_str(struct qr_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        enum qr_err err = qr_buf_append(b, s + run, i - run);
        if (err)
            return err;
        char esc[7] = {'\\', 0};
        size_t elen = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        if ((err = qr_buf_append(b, esc, elen)))
            return err;
        run = i + 1;
    }
    return qr_buf_append(b, s + run, n - run);
}

char *qr_buf_take(struct qr_buf *b, size_t *out_len)
{
    char *p = b->ptr;
    if (out_len)
        *out_len = b->len;
    b->ptr = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

/* Reads back as v? */
static bool f32_exact(const char *s, float v)
{
    return strtof(s, NULL) == v;
}

/* The fewest digits that read back as v. */
static size_t f32_fewest_digits(char buf[32], float v)
{
    /* most embedding values need 7-9 digits, short decimals fewer: start at 6 and walk */
    int p = 6, n = snprintf(buf, 32, "%.6g", (double) v);
    if (f32_exact(buf, v)) {
        char tmp[32];
        while (p > 1) {
            int m = snprintf(tmp, sizeof tmp, "%.*g", p - 1, (double) v);
            if (!f32_exact(tmp, v))
                break;
            memcpy(buf, tmp, (size_t) m + 1);
            n = m;
            p--;
        }
        return (size_t) n;
    }
    while (p < 9) {
        n = snprintf(buf, 32, "%.*g", ++p, (double) v);
        if (f32_exact(buf, v))
            break;
    }
    return (size_t) n;
}

size_t qr_fmt_float32(char buf[32], float v)
{
    size_t n = f32_fewest_digits(buf, v);
    if (!memchr(buf, 'e', n))
        return n;
    /* an exponent form can be longer than all nine digits written out (4.309963e+08 vs
     * 430996288): the shorter text wins (both read back exactly) */
    char nine[32];
    int m = snprintf(nine, sizeof nine, "%.9g", (double) v);
    if ((size_t) m < n) {
        memcpy(buf, nine, (size_t) m + 1);
        n = (size_t) m;
    }
    return n;
}
