/* The request log of qr-replay: every request the fake upstream received, kept as one rendered
 * JSON object per request so that tests can ask GET /__replay/requests what the Runtime really
 * forwarded (headers in received order, body verbatim), and optionally appended to a file as
 * JSON lines. Bodies that are not valid UTF-8 are recorded as base64 instead of a string. */
#include "replay.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#define LOG_MAX_REQUESTS 1000000u

int64_t qr_replay_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum qr_err qr_replay_log_open(struct qr_replay_log *log, const char *file_path,
                               struct qr_diag *diag)
{
    memset(log, 0, sizeof(*log));
    log->t0_ms = qr_replay_now_ms();
    if (file_path && !(log->file = fopen(file_path, "a")))
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': %s", file_path, strerror(errno));
    return QR_OK;
}

void qr_replay_log_clear(struct qr_replay_log *log)
{
    for (size_t i = 0; i < log->n; i++)
        free(log->lines[i]);
    log->n = 0;
}

void qr_replay_log_close(struct qr_replay_log *log)
{
    qr_replay_log_clear(log);
    free(log->lines);
    if (log->file)
        fclose(log->file);
    memset(log, 0, sizeof(*log));
}

/* Length of the valid UTF-8 prefix of s (RFC 3629: no overlongs, surrogates, > U+10FFFF). */
static size_t utf8_valid_len(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        size_t k;
        unsigned lo = 0x80, hi = 0xBF;
        if (b < 0x80) {
            i++;
            continue;
        } else if (b >= 0xC2 && b <= 0xDF) {
            k = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            k = 2;
            lo = b == 0xE0 ? 0xA0 : 0x80;
            hi = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            k = 3;
            lo = b == 0xF0 ? 0x90 : 0x80;
            hi = b == 0xF4 ? 0x8F : 0xBF;
        } else {
            return i;
        }
        if (n - i <= k)
            return i;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return i;
        i += k + 1;
    }
    return i;
}

static bool utf8_valid(struct qr_slice s)
{
    return utf8_valid_len((const unsigned char *) s.ptr, s.len) == s.len;
}

/* A string value for s; invalid UTF-8 bytes (possible in paths and header values) become '?'. */
static yyjson_mut_val *text(yyjson_mut_doc *doc, struct qr_slice s)
{
    if (utf8_valid(s))
        return yyjson_mut_strncpy(doc, s.ptr ? s.ptr : "", s.len);
    char *tmp = malloc(s.len + 1);
    if (!tmp)
        abort();
    size_t o = 0, i = 0;
    const unsigned char *p = (const unsigned char *) s.ptr;
    while (i < s.len) {
        size_t ok = utf8_valid_len(p + i, s.len - i);
        memcpy(tmp + o, p + i, ok);
        o += ok;
        i += ok;
        if (i < s.len) {
            tmp[o++] = '?';
            i++;
        }
    }
    yyjson_mut_val *v = yyjson_mut_strncpy(doc, tmp, o);
    free(tmp);
    return v;
}

static char *base64(struct qr_slice s)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((s.len + 2) / 3 * 4 + 1);
    if (!out)
        abort();
    const unsigned char *p = (const unsigned char *) s.ptr;
    size_t o = 0;
    for (size_t i = 0; i < s.len; i += 3) {
        unsigned v = (unsigned) p[i] << 16;
        if (i + 1 < s.len)
            v |= (unsigned) p[i + 1] << 8;
        if (i + 2 < s.len)
            v |= p[i + 2];
        out[o++] = tab[(v >> 18) & 63];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < s.len ? tab[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < s.len ? tab[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* Render one request as a JSON object (malloc'd, caller frees) or NULL on failure. */
static char *render(const struct qr_replay_log *log, const struct qr_replay_request *req,
                    const char *matched, size_t *out_len)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    if (!doc)
        return NULL;
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, o);
    yyjson_mut_obj_add_uint(doc, o, "seq", log->seq);
    yyjson_mut_obj_add_int(doc, o, "time_ms", qr_replay_now_ms() - log->t0_ms);
    yyjson_mut_obj_add_val(doc, o, "method", text(doc, req->method));
    yyjson_mut_obj_add_val(doc, o, "path", text(doc, req->path));
    yyjson_mut_obj_add_val(doc, o, "query", text(doc, req->query));
    yyjson_mut_obj_add_val(doc, o, "version", text(doc, req->version));
    yyjson_mut_val *hs = yyjson_mut_obj_add_arr(doc, o, "headers");
    for (size_t i = 0; i < req->n_headers; i++) {
        yyjson_mut_val *pair = yyjson_mut_arr_add_arr(doc, hs);
        yyjson_mut_arr_append(pair, text(doc, req->headers[i][0]));
        yyjson_mut_arr_append(pair, text(doc, req->headers[i][1]));
    }
    char *b64 = NULL;
    if (utf8_valid(req->body)) {
        yyjson_mut_obj_add_val(doc, o, "body", text(doc, req->body));
    } else {
        b64 = base64(req->body);
        yyjson_mut_obj_add_null(doc, o, "body");
        yyjson_mut_obj_add_str(doc, o, "body_base64", b64);
    }
    if (matched)
        yyjson_mut_obj_add_str(doc, o, "matched", matched);
    else
        yyjson_mut_obj_add_null(doc, o, "matched");
    char *s = yyjson_mut_write(doc, 0, out_len);
    free(b64);
    yyjson_mut_doc_free(doc);
    return s;
}

enum qr_err qr_replay_log_add(struct qr_replay_log *log, const struct qr_replay_request *req,
                              const char *matched)
{
    log->seq++;
    size_t len = 0;
    char *line = render(log, req, matched, &len);
    if (!line)
        return QR_ERR_NOMEM;
    if (log->file) {
        fwrite(line, 1, len, log->file);
        fputc('\n', log->file);
        fflush(log->file);
    }
    if (log->n >= LOG_MAX_REQUESTS) {
        free(line);
        return QR_ERR_TOO_LARGE;
    }
    if (log->n == log->cap) {
        log->cap = log->cap ? log->cap * 2 : 64;
        log->lines = realloc(log->lines, log->cap * sizeof(*log->lines));
        if (!log->lines)
            abort();
    }
    log->lines[log->n++] = line;
    return QR_OK;
}

enum qr_err qr_replay_log_format(const struct qr_replay_log *log, struct qr_buf *out)
{
    enum qr_err err = qr_buf_puts(out, "[");
    for (size_t i = 0; !err && i < log->n; i++) {
        if (i)
            err = qr_buf_puts(out, ",\n");
        if (!err)
            err = qr_buf_puts(out, log->lines[i]);
    }
    if (!err)
        err = qr_buf_puts(out, "]");
    return err;
}
