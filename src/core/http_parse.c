/* HTTP/1.x request-head parsing, body-framing rules and chunked decoding, all without allocating.
 * The parsers restart from the beginning of the caller's buffer (the head parser) or keep a few
 * words of state (the chunked decoder), so a request split at any byte boundary gives the same
 * answer as the whole request; see http_parse.h for the strictness rules and why. */
#include "core/http_parse.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>

static const struct {
    const char *msg;
    int status;
} perr_table[] = {
    [QR_HTTP_PERR_NONE] = {"no error", 200},
    [QR_HTTP_PERR_LINE_END] = {"line not terminated by CRLF", 400},
    [QR_HTTP_PERR_METHOD] = {"invalid method token", 400},
    [QR_HTTP_PERR_TARGET] = {"request-target must start with '/'", 400},
    [QR_HTTP_PERR_VERSION] = {"unsupported HTTP version", 400},
    [QR_HTTP_PERR_REQUEST_LINE] = {"malformed request line", 400},
    [QR_HTTP_PERR_HEADER_NAME] = {"invalid header field name", 400},
    [QR_HTTP_PERR_HEADER_VALUE] = {"invalid byte in header field value", 400},
    [QR_HTTP_PERR_OBS_FOLD] = {"obsolete header line folding", 400},
    [QR_HTTP_PERR_TOO_MANY_HEADERS] = {"too many header fields", 431},
    [QR_HTTP_PERR_CONTENT_LENGTH] = {"invalid 'content-length'", 400},
    [QR_HTTP_PERR_CL_AND_TE] = {"both 'content-length' and 'transfer-encoding'", 400},
    [QR_HTTP_PERR_TE_UNSUPPORTED] = {"unsupported 'transfer-encoding'", 501},
    [QR_HTTP_PERR_TE_HTTP10] = {"'transfer-encoding' in an HTTP/1.0 request", 400},
    [QR_HTTP_PERR_STATUS_LINE] = {"unsupported or malformed response status line", 502},
    [QR_HTTP_PERR_HEAD_TOO_LARGE] = {"response header section too large", 502},
};

_Static_assert(QR_ARRAY_LEN(perr_table) == QR_HTTP_PERR__COUNT, "every perr needs a row");

const char *qr_http_perr_str(enum qr_http_perr e)
{
    if ((unsigned) e >= QR_HTTP_PERR__COUNT)
        return "malformed request";
    return perr_table[e].msg;
}

int qr_http_perr_status(enum qr_http_perr e)
{
    if ((unsigned) e >= QR_HTTP_PERR__COUNT || e == QR_HTTP_PERR_NONE)
        return 400;
    return perr_table[e].status;
}

/* RFC 9110 tchar: "!#$%&'*+-.^_`|~" / DIGIT / ALPHA. */
static bool is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar / SP / HTAB / obs-text: everything but CTLs (HTAB allowed) and DEL. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Result of looking for the end of a line at p[0..n). */
enum line_rc { LINE_OK, LINE_MORE, LINE_BAD };

/* The line starting at p ends at the first CR, which must be followed by LF. A bare LF is an
 * error. On LINE_OK *out_len excludes the CRLF; on LINE_BAD it is the offset of the bad byte. */
static enum line_rc find_line(const char *p, size_t n, size_t *out_len)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            *out_len = i;
            return LINE_BAD;
        }
        if (p[i] != '\r')
            continue;
        if (i + 1 == n)
            return LINE_MORE;
        *out_len = i;
        return p[i + 1] == '\n' ? LINE_OK : LINE_BAD;
    }
    return LINE_MORE;
}

/* Validate the request line p[0..n) (complete when `complete`, else a prefix). */
static enum qr_http_perr parse_request_line(const char *p, size_t n, bool complete,
                                            struct qr_http_head *out)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char) p[i]))
        i++;
    if (i == n)
        return complete ? QR_HTTP_PERR_REQUEST_LINE : QR_HTTP_PERR_NONE;
    if (i == 0 || p[i] != ' ')
        return QR_HTTP_PERR_METHOD;
    out->method = (struct qr_slice){p, i};
    size_t t = ++i;
    if (i == n)
        return complete ? QR_HTTP_PERR_REQUEST_LINE : QR_HTTP_PERR_NONE;
    if (p[t] != '/' && p[t] != '*')
        return p[t] == ' ' ? QR_HTTP_PERR_REQUEST_LINE : QR_HTTP_PERR_TARGET;
    while (i < n && (unsigned char) p[i] > 0x20 && (unsigned char) p[i] < 0x7f)
        i++;
    if (i == n)
        return complete ? QR_HTTP_PERR_REQUEST_LINE : QR_HTTP_PERR_NONE;
    if (p[i] != ' ')
        return QR_HTTP_PERR_TARGET;
    out->target = (struct qr_slice){p + t, i - t};
    if (p[t] == '*' && (out->target.len != 1 || !qr_slice_eq(out->method, "OPTIONS")))
        return QR_HTTP_PERR_TARGET;
    i++;
    static const char ver[] = "HTTP/1.";
    size_t rest = n - i;
    size_t cmp = rest < 7 ? rest : 7;
    if (memcmp(p + i, ver, cmp) != 0)
        return p[i] == ' ' ? QR_HTTP_PERR_REQUEST_LINE : QR_HTTP_PERR_VERSION;
    if (rest < 8)
        return complete ? QR_HTTP_PERR_VERSION : QR_HTTP_PERR_NONE;
    if (p[i + 7] != '0' && p[i + 7] != '1')
        return QR_HTTP_PERR_VERSION;
    if (rest > 8)
        return (p[i + 8] >= '0' && p[i + 8] <= '9') ? QR_HTTP_PERR_VERSION
                                                    : QR_HTTP_PERR_REQUEST_LINE;
    out->minor_version = p[i + 7] - '0';
    return QR_HTTP_PERR_NONE;
}

/* Validate one header line p[0..n) (complete or a prefix) and fill *h when complete. */
static enum qr_http_perr parse_header_line(const char *p, size_t n, bool complete,
                                           struct qr_http_header *h)
{
    if (n > 0 && (p[0] == ' ' || p[0] == '\t'))
        return QR_HTTP_PERR_OBS_FOLD;
    size_t i = 0;
    while (i < n && is_tchar((unsigned char) p[i]))
        i++;
    if (i == n)
        return complete ? QR_HTTP_PERR_HEADER_NAME : QR_HTTP_PERR_NONE;
    if (p[i] != ':' || i == 0)
        return QR_HTTP_PERR_HEADER_NAME;
    size_t name_len = i++;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    size_t v = i;
    for (; i < n; i++) {
        if (!is_value_char((unsigned char) p[i]))
            return QR_HTTP_PERR_HEADER_VALUE;
    }
    if (!complete)
        return QR_HTTP_PERR_NONE;
    size_t end = n;
    while (end > v && (p[end - 1] == ' ' || p[end - 1] == '\t'))
        end--;
    h->name = (struct qr_slice){p, name_len};
    h->value = (struct qr_slice){p + v, end - v};
    return QR_HTTP_PERR_NONE;
}

/* Length of an unterminated line without a CR that may be the first half of its CRLF. */
static size_t partial_len(const char *p, size_t n)
{
    return n > 0 && p[n - 1] == '\r' ? n - 1 : n;
}

long qr_http_parse_request(const char *buf, size_t len, struct qr_http_header *headers,
                           size_t max_headers, struct qr_http_head *out, enum qr_http_perr *out_err)
{
    enum qr_http_perr err = QR_HTTP_PERR_NONE;
    size_t pos = 0, n;
    memset(out, 0, sizeof(*out));
    out->headers = headers;
    out->minor_version = -1;

    /* Stage 1: skip empty lines before the request line (RFC 9112 section 2.2). */
    while (pos < len && (buf[pos] == '\r' || buf[pos] == '\n')) {
        if (buf[pos] == '\n')
            goto bad_line;
        if (pos + 1 == len)
            return QR_HTTP_PARSE_NEED_MORE;
        if (buf[pos + 1] != '\n')
            goto bad_line;
        pos += 2;
    }
    if (pos == len)
        return QR_HTTP_PARSE_NEED_MORE;

    /* Stage 2: the request line. */
    /* A bad line end is reported only if the bytes before it were valid, so that the answer
     * names the first offending byte whatever the split of the input. */
    enum line_rc lrc = find_line(buf + pos, len - pos, &n);
    if (lrc == LINE_BAD) {
        if ((err = parse_request_line(buf + pos, n, false, out)))
            goto fail;
        goto bad_line;
    }
    if (lrc == LINE_MORE) {
        err = parse_request_line(buf + pos, partial_len(buf + pos, len - pos), false, out);
        if (err)
            goto fail;
        return QR_HTTP_PARSE_NEED_MORE;
    }
    if ((err = parse_request_line(buf + pos, n, true, out)))
        goto fail;
    pos += n + 2;

    /* Stage 3: header lines up to the empty line. */
    for (;;) {
        lrc = find_line(buf + pos, len - pos, &n);
        if (lrc == LINE_BAD) {
            struct qr_http_header scratch;
            if (n > 0 && out->num_headers == max_headers)
                err = QR_HTTP_PERR_TOO_MANY_HEADERS;
            else if (n > 0)
                err = parse_header_line(buf + pos, n, false, &scratch);
            if (err)
                goto fail;
            goto bad_line;
        }
        if (lrc == LINE_MORE) {
            size_t rest = partial_len(buf + pos, len - pos);
            if (rest > 0) {
                if (out->num_headers == max_headers) {
                    err = QR_HTTP_PERR_TOO_MANY_HEADERS;
                    goto fail;
                }
                struct qr_http_header scratch;
                if ((err = parse_header_line(buf + pos, rest, false, &scratch)))
                    goto fail;
            }
            return QR_HTTP_PARSE_NEED_MORE;
        }
        if (n == 0)
            break;
        if (out->num_headers == max_headers) {
            err = QR_HTTP_PERR_TOO_MANY_HEADERS;
            goto fail;
        }
        if ((err = parse_header_line(buf + pos, n, true, &headers[out->num_headers])))
            goto fail;
        out->num_headers++;
        pos += n + 2;
    }
    pos += 2;
    *out_err = QR_HTTP_PERR_NONE;
    return (long) pos;

bad_line:
    err = QR_HTTP_PERR_LINE_END;
fail:
    *out_err = err;
    return QR_HTTP_PARSE_ERROR;
}

bool qr_http_parse_content_length(struct qr_slice v, uint64_t *out)
{
    if (v.len == 0)
        return false;
    uint64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        unsigned char c = (unsigned char) v.ptr[i];
        if (c < '0' || c > '9')
            return false;
        if (n > ((uint64_t) INT64_MAX - (c - '0')) / 10)
            return false;
        n = n * 10 + (c - '0');
    }
    *out = n;
    return true;
}

/* True when the comma-separated list v holds the token tok (case-insensitive). */
static bool list_has(struct qr_slice v, const char *tok)
{
    size_t i = 0;
    while (i < v.len) {
        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t' || v.ptr[i] == ','))
            i++;
        size_t s = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t'))
            e--;
        if (e > s && qr_slice_eq_nocase((struct qr_slice){v.ptr + s, e - s}, tok))
            return true;
    }
    return false;
}

enum qr_http_perr qr_http_head_framing(const struct qr_http_head *head, struct qr_http_framing *out)
{
    bool have_cl = false, have_te = false, conn_close = false, conn_keep = false;
    uint64_t cl = 0;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < head->num_headers; i++) {
        const struct qr_http_header *h = &head->headers[i];
        if (qr_slice_eq_nocase(h->name, "content-length")) {
            uint64_t v;
            if (!qr_http_parse_content_length(h->value, &v) || (have_cl && v != cl))
                return QR_HTTP_PERR_CONTENT_LENGTH;
            have_cl = true;
            cl = v;
        } else if (qr_slice_eq_nocase(h->name, "transfer-encoding")) {
            /* Two fields make "chunked, chunked", which is not exactly "chunked". */
            if (have_te || !qr_slice_eq_nocase(h->value, "chunked"))
                return QR_HTTP_PERR_TE_UNSUPPORTED;
            have_te = true;
        } else if (qr_slice_eq_nocase(h->name, "connection")) {
            conn_close |= list_has(h->value, "close");
            conn_keep |= list_has(h->value, "keep-alive");
        } else if (qr_slice_eq_nocase(h->name, "expect")) {
            out->expect_continue |= qr_slice_eq_nocase(h->value, "100-continue");
        }
    }
    if (have_cl && have_te)
        return QR_HTTP_PERR_CL_AND_TE;
    if (have_te && head->minor_version == 0)
        return QR_HTTP_PERR_TE_HTTP10;
    out->chunked = have_te;
    out->content_length = cl;
    out->keep_alive = !conn_close && (head->minor_version >= 1 || conn_keep);
    if (head->minor_version == 0)
        out->expect_continue = false;
    return QR_HTTP_PERR_NONE;
}

/* --- response heads (lenient: see http_parse.h) --- */

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* p[0..n) without leading SP/HTAB and without trailing SP/HTAB/CR. */
static struct qr_slice trim_ows(const char *p, size_t n)
{
    while (n && is_ows(*p)) {
        p++;
        n--;
    }
    while (n && (is_ows(p[n - 1]) || p[n - 1] == '\r'))
        n--;
    return (struct qr_slice){p, n};
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

size_t qr_http_response_head_end(const char *buf, size_t len, size_t *scan)
{
    for (size_t i = *scan; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        if (!nl) {
            *scan = len;
            return 0;
        }
        size_t at = (size_t) (nl - buf);
        if (at + 1 < len && buf[at + 1] == '\n') {
            *scan = 0;
            return at + 2;
        }
        if (at + 2 < len && buf[at + 1] == '\r' && buf[at + 2] == '\n') {
            *scan = 0;
            return at + 3;
        }
        if (at + 1 == len || (at + 2 == len && buf[at + 1] == '\r')) {
            *scan = at; /* cannot tell yet: rescan from this newline */
            return 0;
        }
        i = at + 1;
    }
    return 0;
}

/* Status line p[0..n) (its LF and one CR before it removed): "HTTP/1.x DDD" then the end or a
 * space and the reason. */
static bool parse_status_line(const char *p, size_t n, struct qr_http_response_head *out)
{
    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return false;
    if (!is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) || (n > 12 && p[12] != ' '))
        return false;
    out->minor_version = p[7] - '0';
    out->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
    out->reason = n > 12 ? (struct qr_slice){p + 13, n - 13} : (struct qr_slice){p + 12, 0};
    return out->status >= 100;
}

/* Length of the line at p[0..n) without its LF and one CR before it; p[n] ends it ('\n'). */
static size_t line_len(const char *p, size_t n)
{
    return n && p[n - 1] == '\r' ? n - 1 : n;
}

int qr_http_parse_response_head(const char *buf, size_t len, struct qr_http_response_head *out,
                                size_t max_headers, enum qr_http_perr *err)
{
    struct qr_http_header *hdrs = out->headers;
    size_t scan = 0, end = qr_http_response_head_end(buf, len, &scan);
    memset(out, 0, sizeof(*out));
    out->headers = hdrs;
    out->minor_version = -1;
    *err = QR_HTTP_PERR_NONE;

    /* Stage 1: the status line, judged as soon as it is complete. */
    const char *nl = memchr(buf, '\n', end ? end : len);
    if (!nl)
        goto need_more;
    if (!parse_status_line(buf, line_len(buf, (size_t) (nl - buf)), out)) {
        *err = QR_HTTP_PERR_STATUS_LINE;
        return -1;
    }
    if (end == 0)
        goto need_more;
    if (end > INT_MAX) {
        *err = QR_HTTP_PERR_HEAD_TOO_LARGE;
        return -1;
    }

    /* Stage 2: fields up to the empty line; continuations stretch the last named value. */
    const char *p = nl + 1, *stop = buf + end;
    while (p < stop) {
        nl = memchr(p, '\n', (size_t) (stop - p));
        size_t ll = line_len(p, (size_t) (nl - p));
        if (ll == 0)
            break; /* the empty line */
        if (is_ows(*p)) {
            struct qr_slice more = trim_ows(p, ll);
            if (out->num_headers && more.len) {
                struct qr_slice *v = &hdrs[out->num_headers - 1].value;
                v->len = (size_t) (more.ptr + more.len - v->ptr);
                out->folded = true;
            }
        } else {
            const char *colon = memchr(p, ':', ll);
            struct qr_slice name = colon ? trim_ows(p, (size_t) (colon - p)) : (struct qr_slice){0};
            if (name.len) {
                if (out->num_headers == max_headers) {
                    *err = QR_HTTP_PERR_TOO_MANY_HEADERS;
                    return -1;
                }
                hdrs[out->num_headers].name = name;
                hdrs[out->num_headers].value = trim_ows(colon + 1, ll - (size_t) (colon + 1 - p));
                out->num_headers++;
            }
        }
        p = nl + 1;
    }
    return (int) end;

need_more:
    if (len > INT_MAX) {
        *err = QR_HTTP_PERR_HEAD_TOO_LARGE;
        return -1;
    }
    return 0;
}

void qr_http_response_head_unfold(char *buf, struct qr_http_response_head *h)
{
    if (!h->folded)
        return;
    for (size_t i = 0; i < h->num_headers; i++) {
        struct qr_slice *v = &h->headers[i].value;
        char *p = buf + (v->ptr - buf), *stop = p + v->len;
        char *nl = memchr(p, '\n', v->len);
        if (!nl)
            continue;
        /* the first line's part, then each SP/HTAB-led line's trimmed text after one space; the
         * colon-less or nameless lines in between were ignored by the parser and are here too */
        char *w = p + trim_ows(p, (size_t) (nl - p)).len; /* p holds no leading SP/HTAB */
        for (char *q = nl + 1; q < stop; q = nl + 1) {
            nl = memchr(q, '\n', (size_t) (stop - q));
            char *le = nl ? nl : stop;
            if (is_ows(*q)) {
                struct qr_slice more = trim_ows(q, (size_t) (le - q));
                if (more.len) {
                    *w = ' ';
                    memmove(w + 1, more.ptr, more.len);
                    w += 1 + more.len;
                }
            }
            if (!nl)
                break;
        }
        v->len = (size_t) (w - p);
    }
    h->folded = false;
}

/* Does the comma-separated list v contain token tok (case-insensitive)? Elements are trimmed of
 * SP/HTAB and trailing CRs. */
static bool has_token(struct qr_slice v, const char *tok)
{
    size_t i = 0;
    while (i < v.len) {
        size_t j = i;
        while (j < v.len && v.ptr[j] != ',')
            j++;
        if (qr_slice_eq_nocase(trim_ows(v.ptr + i, j - i), tok))
            return true;
        i = j + 1;
    }
    return false;
}

/* Is "chunked" the last coding of a Transfer-Encoding value? */
static bool last_token_chunked(struct qr_slice v)
{
    size_t i = v.len;
    while (i > 0 && v.ptr[i - 1] != ',')
        i--;
    return qr_slice_eq_nocase(trim_ows(v.ptr + i, v.len - i), "chunked");
}

enum qr_http_body_framing qr_http_response_framing(int status, bool head_request, int minor,
                                                   const struct qr_http_response_head *h,
                                                   uint64_t *content_length, enum qr_http_perr *err)
{
    bool te = false, chunked = false, has_cl = false;
    uint64_t cl = 0;
    (void) minor; /* HTTP/1.0 responses may be chunked too: curl and the native client read them */
    *content_length = 0;
    *err = QR_HTTP_PERR_NONE;
    for (size_t i = 0; i < h->num_headers; i++) {
        const struct qr_http_header *f = &h->headers[i];
        if (qr_slice_eq_nocase(f->name, "content-length")) {
            uint64_t v;
            if (!qr_http_parse_content_length(f->value, &v) || (has_cl && v != cl)) {
                *err = QR_HTTP_PERR_CONTENT_LENGTH;
                return QR_HTTP_FRAMING_ERROR;
            }
            has_cl = true;
            cl = v;
        } else if (qr_slice_eq_nocase(f->name, "transfer-encoding")) {
            te = true;
            chunked = last_token_chunked(f->value);
        }
    }
    if (head_request || status < 200 || status == 204 || status == 304)
        return QR_HTTP_FRAMING_NONE;
    if (te)
        return chunked ? QR_HTTP_FRAMING_CHUNKED : QR_HTTP_FRAMING_CLOSE;
    if (!has_cl)
        return QR_HTTP_FRAMING_CLOSE;
    *content_length = cl;
    return QR_HTTP_FRAMING_LENGTH;
}

bool qr_http_response_keep_alive(int minor, const struct qr_http_response_head *h,
                                 enum qr_http_body_framing framing)
{
    bool conn_close = false, conn_ka = false;
    for (size_t i = 0; i < h->num_headers; i++) {
        if (qr_slice_eq_nocase(h->headers[i].name, "connection")) {
            conn_close = conn_close || has_token(h->headers[i].value, "close");
            conn_ka = conn_ka || has_token(h->headers[i].value, "keep-alive");
        }
    }
    return framing != QR_HTTP_FRAMING_CLOSE && !conn_close && (minor == 1 || conn_ka);
}

/* --- chunked transfer coding (RFC 9112 section 7.1) --- */

enum {
    CH_SIZE,    /* hex digits of chunk-size */
    CH_EXT,     /* after ';': chunk extensions, ignored */
    CH_SIZE_LF, /* CR seen after size line */
    CH_DATA,    /* remaining data bytes */
    CH_DATA_CR, /* CRLF after data */
    CH_DATA_LF,
    CH_TRAILER, /* start of a trailer line or the final empty line */
    CH_TRAILER_LINE,
    CH_TRAILER_LF,
    CH_END_LF, /* CR of the final empty line seen */
    CH_DONE,
    CH_ERROR
};

#define CH_MAX_LINE    4096  /* a size line with extensions, or one trailer line */
#define CH_MAX_TRAILER 16384 /* all trailer lines together */

void qr_http_chunked_init(struct qr_http_chunked *c)
{
    memset(c, 0, sizeof(*c));
    c->state = CH_SIZE;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Advance the framing state machine by one byte; false on a framing error. */
static bool chunk_byte(struct qr_http_chunked *c, unsigned char b)
{
    switch (c->state) {
    case CH_SIZE: {
        int h = hexval(b);
        if (h >= 0) {
            if (c->remaining > (UINT64_MAX >> 4) || ++c->line_bytes > CH_MAX_LINE)
                return false;
            c->remaining = (c->remaining << 4) | (uint64_t) h;
            c->digits = true;
            return true;
        }
        if (!c->digits)
            return false;
        if (b == ';') {
            c->state = CH_EXT;
            return true;
        }
        if (b == '\r') {
            c->state = CH_SIZE_LF;
            return true;
        }
        return false;
    }
    case CH_EXT:
        if (++c->line_bytes > CH_MAX_LINE)
            return false;
        if (b == '\r') {
            c->state = CH_SIZE_LF;
            return true;
        }
        return is_value_char(b);
    case CH_SIZE_LF:
        if (b != '\n')
            return false;
        c->line_bytes = 0;
        c->digits = false;
        c->state = c->remaining ? CH_DATA : CH_TRAILER;
        return true;
    case CH_DATA_CR:
        c->state = CH_DATA_LF;
        return b == '\r';
    case CH_DATA_LF:
        c->state = CH_SIZE;
        return b == '\n';
    case CH_TRAILER:
        if (b == '\r') {
            c->state = CH_END_LF;
            return true;
        }
        c->state = CH_TRAILER_LINE;
        /* fall through */
    case CH_TRAILER_LINE:
        if (++c->trailer_bytes > CH_MAX_TRAILER)
            return false;
        if (b == '\r') {
            c->state = CH_TRAILER_LF;
            return true;
        }
        return is_value_char(b);
    case CH_TRAILER_LF:
        c->state = CH_TRAILER;
        return b == '\n';
    case CH_END_LF:
        c->state = CH_DONE;
        return b == '\n';
    default:
        return false;
    }
}

enum qr_http_chunked_rc qr_http_chunked_step(struct qr_http_chunked *c, const char *buf, size_t len,
                                             size_t *out_consumed, struct qr_slice *out_data)
{
    size_t i = 0;
    *out_data = (struct qr_slice){buf, 0};
    if (c->state == CH_ERROR)
        goto fail;
    while (i < len && c->state != CH_DONE) {
        if (c->state == CH_DATA) {
            size_t take = len - i;
            if ((uint64_t) take > c->remaining)
                take = (size_t) c->remaining;
            *out_data = (struct qr_slice){buf + i, take};
            c->remaining -= take;
            i += take;
            if (c->remaining == 0)
                c->state = CH_DATA_CR;
            *out_consumed = i;
            return QR_HTTP_CHUNKED_MORE;
        }
        if (!chunk_byte(c, (unsigned char) buf[i]))
            goto fail;
        i++;
    }
    *out_consumed = i;
    return c->state == CH_DONE ? QR_HTTP_CHUNKED_DONE : QR_HTTP_CHUNKED_MORE;

fail:
    c->state = CH_ERROR;
    *out_consumed = i;
    return QR_HTTP_CHUNKED_ERROR;
}
