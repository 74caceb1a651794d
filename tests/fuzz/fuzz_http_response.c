/* libFuzzer target for the upstream response side of http_parse: head-end search, response-head
 * parser, obs-fold joining, body-framing decision and, for chunked bodies, the chunked decoder.
 * Input: byte 0 picks the split point, byte 1 is flags (bit 0: the request was HEAD), the rest
 * is what the upstream sent. Interim (1xx) heads are skipped the way the native client skips
 * them. Every answer for the split input (a prefix, or pieces) must equal the whole input's. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXH      64
#define MAX_HEADS 8

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        if (!(x))                                                                                  \
            abort();                                                                               \
    } while (0)

static void check_slice(struct qr_slice s, const char *buf, size_t len)
{
    CHECK(s.len == 0 || (s.ptr >= buf && s.ptr + s.len <= buf + len));
}

struct parsed {
    int rc;
    enum qr_http_perr err;
    struct qr_http_response_head h;
    struct qr_http_header hdrs[MAXH];
};

static void parse(const char *buf, size_t len, size_t maxh, struct parsed *p)
{
    memset(p, 0, sizeof(*p));
    p->h.headers = p->hdrs;
    p->rc = qr_http_parse_response_head(buf, len, &p->h, maxh, &p->err);
}

static bool slice_same(struct qr_slice a, struct qr_slice b)
{
    return a.len == b.len && (a.len == 0 || a.ptr == b.ptr);
}

static void check_same(const struct parsed *a, const struct parsed *b)
{
    CHECK(a->rc == b->rc && a->err == b->err);
    if (a->rc <= 0)
        return;
    CHECK(a->h.status == b->h.status && a->h.minor_version == b->h.minor_version);
    CHECK(slice_same(a->h.reason, b->h.reason) && a->h.num_headers == b->h.num_headers);
    CHECK(a->h.folded == b->h.folded);
    for (size_t i = 0; i < a->h.num_headers; i++) {
        CHECK(slice_same(a->hdrs[i].name, b->hdrs[i].name));
        CHECK(slice_same(a->hdrs[i].value, b->hdrs[i].value));
    }
}

/* The whole parse must be self-consistent; a prefix parse must agree with it. */
static void check_head(const char *buf, size_t len, size_t split, const struct parsed *w)
{
    size_t scan = 0, end = qr_http_response_head_end(buf, len, &scan);
    CHECK(w->rc >= -1);
    if (w->rc == -1) {
        CHECK(w->err == QR_HTTP_PERR_STATUS_LINE || w->err == QR_HTTP_PERR_TOO_MANY_HEADERS ||
              w->err == QR_HTTP_PERR_HEAD_TOO_LARGE);
        CHECK(qr_http_perr_str(w->err) != NULL);
    } else {
        CHECK(w->err == QR_HTTP_PERR_NONE && (size_t) w->rc == end);
    }
    if (w->rc > 0) {
        CHECK(w->h.status >= 100 && w->h.status <= 999);
        CHECK(w->h.minor_version == 0 || w->h.minor_version == 1);
        check_slice(w->h.reason, buf, end);
        CHECK(w->h.num_headers <= MAXH);
        for (size_t i = 0; i < w->h.num_headers; i++) {
            CHECK(w->hdrs[i].name.len > 0);
            check_slice(w->hdrs[i].name, buf, end);
            check_slice(w->hdrs[i].value, buf, end);
            CHECK(memchr(w->hdrs[i].name.ptr, '\n', w->hdrs[i].name.len) == NULL);
            if (!w->h.folded)
                CHECK(memchr(w->hdrs[i].value.ptr, '\n', w->hdrs[i].value.len) == NULL);
        }
        /* one field fewer of room must be refused, or the same head when none is needed */
        if (w->h.num_headers > 0) {
            struct parsed *t = malloc(sizeof(*t));
            CHECK(t);
            parse(buf, len, w->h.num_headers - 1, t);
            CHECK(t->rc == -1 && t->err == QR_HTTP_PERR_TOO_MANY_HEADERS);
            free(t);
        }
    }

    /* a prefix: need more, or the whole's answer */
    struct parsed *p = malloc(sizeof(*p));
    CHECK(p);
    parse(buf, split, MAXH, p);
    if (p->rc == 0)
        CHECK(p->err == QR_HTTP_PERR_NONE);
    else
        check_same(p, w);
    free(p);

    /* the head-end search fed in two pieces, resuming from its scan hint */
    scan = 0;
    size_t e1 = qr_http_response_head_end(buf, split, &scan);
    CHECK(scan <= split);
    if (e1 == 0)
        e1 = qr_http_response_head_end(buf, len, &scan);
    CHECK(e1 == end);
}

/* After unfolding: no line breaks left, every value inside its old span, no longer than it. */
static void check_unfold(char *buf, struct parsed *w)
{
    struct qr_slice before[MAXH];
    for (size_t i = 0; i < w->h.num_headers; i++)
        before[i] = w->hdrs[i].value;
    bool folded = w->h.folded;
    qr_http_response_head_unfold(buf, &w->h);
    CHECK(!w->h.folded);
    for (size_t i = 0; i < w->h.num_headers; i++) {
        struct qr_slice v = w->hdrs[i].value;
        CHECK(v.ptr == before[i].ptr && v.len <= before[i].len);
        CHECK(memchr(v.ptr, '\n', v.len) == NULL);
        if (!folded)
            CHECK(v.len == before[i].len);
    }
}

/* Decode body[0..len) in pieces of `piece` bytes; returns the rc, the bytes used and the data. */
static enum qr_http_chunked_rc dechunk(const char *body, size_t len, size_t piece, char *out,
                                       size_t *out_len, size_t *used_total)
{
    struct qr_http_chunked c;
    qr_http_chunked_init(&c);
    enum qr_http_chunked_rc rc = QR_HTTP_CHUNKED_MORE;
    size_t pos = 0, fed = 0;
    *out_len = 0;
    while (rc == QR_HTTP_CHUNKED_MORE && pos < len) {
        if (fed == pos)
            fed = len - pos < piece ? len : pos + piece;
        size_t used = 0;
        struct qr_slice d;
        rc = qr_http_chunked_step(&c, body + pos, fed - pos, &used, &d);
        CHECK(used <= fed - pos);
        check_slice(d, body + pos, used);
        memcpy(out + *out_len, d.ptr, d.len);
        *out_len += d.len;
        pos += used;
        if (rc == QR_HTTP_CHUNKED_MORE && used == 0)
            break;
    }
    CHECK(*out_len <= len);
    *used_total = pos;
    return rc;
}

static void check_chunked(const char *body, size_t len, size_t split)
{
    char *a = malloc(len + 1), *b = malloc(len + 1);
    CHECK(a && b);
    size_t na, nb, ua, ub;
    enum qr_http_chunked_rc ra = dechunk(body, len, len ? len : 1, a, &na, &ua);
    enum qr_http_chunked_rc rb = dechunk(body, len, split ? split : 1, b, &nb, &ub);
    CHECK(ra == rb && na == nb && memcmp(a, b, na) == 0);
    if (ra != QR_HTTP_CHUNKED_ERROR)
        CHECK(ua == ub);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    bool head_request = data[1] & 1;
    size_t len = size - 2;
    char *buf = malloc(len + 1);
    CHECK(buf);
    memcpy(buf, data + 2, len);
    size_t off = 0;
    struct parsed *w = malloc(sizeof(*w));
    CHECK(w);

    for (int heads = 0; heads < MAX_HEADS; heads++) {
        const char *p = buf + off;
        size_t n = len - off;
        size_t split = n ? data[0] % (n + 1) : 0;
        parse(p, n, MAXH, w);
        check_head(p, n, split, w);
        if (w->rc <= 0)
            break;
        check_unfold(buf + off, w);
        off += (size_t) w->rc;
        if (w->h.status < 200 && w->h.status != 101)
            continue; /* interim response: the native client reads the next head */

        uint64_t cl = 1;
        enum qr_http_perr err = QR_HTTP_PERR__COUNT;
        enum qr_http_body_framing f = qr_http_response_framing(
            w->h.status, head_request, w->h.minor_version, &w->h, &cl, &err);
        if (f == QR_HTTP_FRAMING_ERROR) {
            CHECK(err == QR_HTTP_PERR_CONTENT_LENGTH && cl == 0);
            break;
        }
        CHECK(err == QR_HTTP_PERR_NONE);
        CHECK(f == QR_HTTP_FRAMING_LENGTH ? cl <= (uint64_t) INT64_MAX : cl == 0);
        if (head_request || w->h.status < 200 || w->h.status == 204 || w->h.status == 304)
            CHECK(f == QR_HTTP_FRAMING_NONE);
        bool ka = qr_http_response_keep_alive(w->h.minor_version, &w->h, f);
        CHECK(!(ka && f == QR_HTTP_FRAMING_CLOSE));
        if (f == QR_HTTP_FRAMING_CHUNKED)
            check_chunked(buf + off, len - off, data[0] % (len - off + 1));
        break;
    }
    free(w);
    free(buf);
    return 0;
}
