/* Request-head parser, framing rules and chunked decoder: valid inputs, every rejection class,
 * and every input re-fed split at each byte boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/http_parse.h"

#define MAXH 16

struct parsed {
    long rc;
    enum qr_http_perr err;
    struct qr_http_head head;
    struct qr_http_header hdrs[MAXH];
};

static void parse_n(const char *s, size_t n, size_t maxh, struct parsed *p)
{
    memset(p, 0, sizeof(*p));
    p->rc = qr_http_parse_request(s, n, p->hdrs, maxh, &p->head, &p->err);
}

/* Parse every prefix of s: each must be NEED_MORE, or the error the whole input gives. */
static long parse_all_prefixes(const char *s, size_t maxh, struct parsed *whole)
{
    size_t n = strlen(s);
    parse_n(s, n, maxh, whole);
    for (size_t i = 0; i < n; i++) {
        struct parsed p;
        parse_n(s, i, maxh, &p);
        if (p.rc == QR_HTTP_PARSE_ERROR) {
            assert_int_equal(whole->rc, QR_HTTP_PARSE_ERROR);
            assert_int_equal(p.err, whole->err);
        } else {
            assert_int_equal(p.rc, QR_HTTP_PARSE_NEED_MORE);
        }
    }
    return whole->rc;
}

static void assert_slice(struct qr_slice s, const char *want)
{
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len);
}

static void test_valid_get(void **state)
{
    const char *req = "GET /v1/models?x=1 HTTP/1.1\r\nHost: localhost:11450\r\n"
                      "Accept:  */*  \r\nX-Empty:\r\nX-Obs: caf\xc3\xa9\r\n\r\n";
    struct parsed p;
    assert_int_equal(parse_all_prefixes(req, MAXH, &p), (long) strlen(req));
    assert_slice(p.head.method, "GET");
    assert_slice(p.head.target, "/v1/models?x=1");
    assert_int_equal(p.head.minor_version, 1);
    assert_int_equal(p.head.num_headers, 4);
    assert_slice(p.hdrs[0].name, "Host");
    assert_slice(p.hdrs[0].value, "localhost:11450");
    assert_slice(p.hdrs[1].value, "*/*");
    assert_slice(p.hdrs[2].name, "X-Empty");
    assert_slice(p.hdrs[2].value, "");
    assert_slice(p.hdrs[3].value, "caf\xc3\xa9");
}

static void test_valid_post_with_body_after(void **state)
{
    const char *head = "POST /api/chat HTTP/1.0\r\nContent-Length: 2\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof(buf), "%s{}GET / HTTP/1.1\r\n", head);
    struct parsed p;
    parse_n(buf, strlen(buf), MAXH, &p);
    assert_int_equal(p.rc, (long) strlen(head));
    assert_slice(p.head.method, "POST");
    assert_int_equal(p.head.minor_version, 0);
    assert_int_equal(p.head.num_headers, 1);
}

static void test_leading_crlf_and_options_star(void **state)
{
    const char *req = "\r\n\r\nOPTIONS * HTTP/1.1\r\n\r\n";
    struct parsed p;
    assert_int_equal(parse_all_prefixes(req, MAXH, &p), (long) strlen(req));
    assert_slice(p.head.target, "*");
    assert_int_equal(p.head.num_headers, 0);
}

static const struct {
    const char *name, *input;
    enum qr_http_perr err;
} bad_heads[] = {
    {"bare lf in request line", "GET / HTTP/1.1\nHost: x\r\n\r\n", QR_HTTP_PERR_LINE_END},
    {"bare lf in header", "GET / HTTP/1.1\r\nHost: x\n\r\n", QR_HTTP_PERR_LINE_END},
    {"cr without lf", "GET / HTTP/1.1\rHost: x\r\n\r\n", QR_HTTP_PERR_LINE_END},
    {"leading bare lf", "\nGET / HTTP/1.1\r\n\r\n", QR_HTTP_PERR_LINE_END},
    {"method bad byte", "G@T / HTTP/1.1\r\n\r\n", QR_HTTP_PERR_METHOD},
    {"method empty", " / HTTP/1.1\r\n\r\n", QR_HTTP_PERR_METHOD},
    {"method control", "GE\x01T / HTTP/1.1\r\n\r\n", QR_HTTP_PERR_METHOD},
    {"binary garbage", "\x16\x03\x01\x02\x00\x01\x00", QR_HTTP_PERR_METHOD},
    {"absolute form", "GET http://x/ HTTP/1.1\r\n\r\n", QR_HTTP_PERR_TARGET},
    {"star without options", "GET * HTTP/1.1\r\n\r\n", QR_HTTP_PERR_TARGET},
    {"star with suffix", "OPTIONS *x HTTP/1.1\r\n\r\n", QR_HTTP_PERR_TARGET},
    {"target control", "GET /a\x01 HTTP/1.1\r\n\r\n", QR_HTTP_PERR_TARGET},
    {"target high byte", "GET /\xc3\xa9 HTTP/1.1\r\n\r\n", QR_HTTP_PERR_TARGET},
    {"double space", "GET  / HTTP/1.1\r\n\r\n", QR_HTTP_PERR_REQUEST_LINE},
    {"no version", "GET /\r\n\r\n", QR_HTTP_PERR_REQUEST_LINE},
    {"trailing space", "GET / HTTP/1.1 \r\n\r\n", QR_HTTP_PERR_REQUEST_LINE},
    {"http 2", "GET / HTTP/2.0\r\n\r\n", QR_HTTP_PERR_VERSION},
    {"http 1.2", "GET / HTTP/1.2\r\n\r\n", QR_HTTP_PERR_VERSION},
    {"http 1.10", "GET / HTTP/1.10\r\n\r\n", QR_HTTP_PERR_VERSION},
    {"lowercase http", "GET / http/1.1\r\n\r\n", QR_HTTP_PERR_VERSION},
    {"short version", "GET / HTTP/1\r\n\r\n", QR_HTTP_PERR_VERSION},
    {"space in name", "GET / HTTP/1.1\r\nHo st: x\r\n\r\n", QR_HTTP_PERR_HEADER_NAME},
    {"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", QR_HTTP_PERR_HEADER_NAME},
    {"empty name", "GET / HTTP/1.1\r\n: x\r\n\r\n", QR_HTTP_PERR_HEADER_NAME},
    {"control in name", "GET / HTTP/1.1\r\nHo\x01st: x\r\n\r\n", QR_HTTP_PERR_HEADER_NAME},
    {"no colon", "GET / HTTP/1.1\r\nHost\r\n\r\n", QR_HTTP_PERR_HEADER_NAME},
    {"control in value",
     "GET / HTTP/1.1\r\nX: a\x01"
     "b\r\n\r\n",
     QR_HTTP_PERR_HEADER_VALUE},
    {"del in value", "GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", QR_HTTP_PERR_HEADER_VALUE},
    {"obs fold space", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", QR_HTTP_PERR_OBS_FOLD},
    {"obs fold tab", "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", QR_HTTP_PERR_OBS_FOLD},
    {"fold first line", "GET / HTTP/1.1\r\n X: a\r\n\r\n", QR_HTTP_PERR_OBS_FOLD},
};

static void test_rejections(void **state)
{
    for (size_t i = 0; i < sizeof(bad_heads) / sizeof(bad_heads[0]); i++) {
        struct parsed p;
        long rc = parse_all_prefixes(bad_heads[i].input, MAXH, &p);
        if (rc != QR_HTTP_PARSE_ERROR || p.err != bad_heads[i].err)
            fail_msg("case '%s': rc %ld err %d, want err %d", bad_heads[i].name, rc, (int) p.err,
                     (int) bad_heads[i].err);
        assert_int_equal(qr_http_perr_status(p.err), 400);
        assert_true(strlen(qr_http_perr_str(p.err)) > 0);
    }
}

static void test_nul_in_value_full_length(void **state)
{
    static const char req[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
    struct parsed p;
    parse_n(req, sizeof(req) - 1, MAXH, &p);
    assert_int_equal(p.rc, QR_HTTP_PARSE_ERROR);
    assert_int_equal(p.err, QR_HTTP_PERR_HEADER_VALUE);
}

static void test_garbage_detected_before_line_end(void **state)
{
    struct parsed p;
    parse_n("G@", 2, MAXH, &p);
    assert_int_equal(p.rc, QR_HTTP_PARSE_ERROR);
    assert_int_equal(p.err, QR_HTTP_PERR_METHOD);
    parse_n("GET / HTTP/1.1\r\nX", 17, MAXH, &p);
    assert_int_equal(p.rc, QR_HTTP_PARSE_NEED_MORE);
    parse_n("GET / HTTP/1.1\r\nX y", 19, MAXH, &p);
    assert_int_equal(p.rc, QR_HTTP_PARSE_ERROR);
    assert_int_equal(p.err, QR_HTTP_PERR_HEADER_NAME);
}

static void test_too_many_headers(void **state)
{
    const char *two = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n";
    const char *three = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    struct parsed p;
    assert_int_equal(parse_all_prefixes(two, 2, &p), (long) strlen(two));
    assert_int_equal(p.head.num_headers, 2);
    assert_int_equal(parse_all_prefixes(three, 2, &p), QR_HTTP_PARSE_ERROR);
    assert_int_equal(p.err, QR_HTTP_PERR_TOO_MANY_HEADERS);
    assert_int_equal(qr_http_perr_status(p.err), 431);
}

/* --- Content-Length and framing --- */

static void test_content_length_values(void **state)
{
    uint64_t v = 7;
    assert_true(qr_http_parse_content_length(QR_SLICE_LIT("0"), &v));
    assert_int_equal(v, 0);
    assert_true(qr_http_parse_content_length(QR_SLICE_LIT("00123"), &v));
    assert_int_equal(v, 123);
    assert_true(qr_http_parse_content_length(QR_SLICE_LIT("9223372036854775807"), &v));
    assert_true(v == (uint64_t) INT64_MAX);
    static const char *bad[] = {"",
                                "9223372036854775808",
                                "99999999999999999999",
                                "+1",
                                "-1",
                                " 1",
                                "1 ",
                                "1,1",
                                "0x10",
                                "1.0",
                                "١"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 42;
        if (qr_http_parse_content_length(qr_slice_str(bad[i]), &v))
            fail_msg("accepted content-length '%s'", bad[i]);
        assert_int_equal(v, 42);
    }
}

static enum qr_http_perr framing_of(const char *req, struct qr_http_framing *fr)
{
    struct parsed p;
    parse_n(req, strlen(req), MAXH, &p);
    assert_true(p.rc > 0);
    return qr_http_head_framing(&p.head, fr);
}

static void test_framing_rules(void **state)
{
    struct qr_http_framing fr;
    assert_int_equal(
        framing_of("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", &fr),
        QR_HTTP_PERR_NONE);
    assert_int_equal(fr.content_length, 5);
    assert_false(fr.chunked);
    assert_true(fr.keep_alive);
    assert_int_equal(
        framing_of("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &fr),
        QR_HTTP_PERR_CONTENT_LENGTH);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", &fr),
                     QR_HTTP_PERR_CONTENT_LENGTH);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &fr),
                     QR_HTTP_PERR_CONTENT_LENGTH);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nContent-Length: 5\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n",
                                &fr),
                     QR_HTTP_PERR_CL_AND_TE);
    assert_int_equal(qr_http_perr_status(QR_HTTP_PERR_CL_AND_TE), 400);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &fr),
                     QR_HTTP_PERR_NONE);
    assert_true(fr.chunked);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &fr),
                     QR_HTTP_PERR_TE_UNSUPPORTED);
    assert_int_equal(framing_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n",
                                &fr),
                     QR_HTTP_PERR_TE_UNSUPPORTED);
    assert_int_equal(qr_http_perr_status(QR_HTTP_PERR_TE_UNSUPPORTED), 501);
    assert_int_equal(framing_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", &fr),
                     QR_HTTP_PERR_TE_HTTP10);
}

static void test_connection_and_expect(void **state)
{
    struct qr_http_framing fr;
    framing_of("GET / HTTP/1.0\r\n\r\n", &fr);
    assert_false(fr.keep_alive);
    framing_of("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &fr);
    assert_true(fr.keep_alive);
    framing_of("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", &fr);
    assert_false(fr.keep_alive);
    framing_of("GET / HTTP/1.1\r\nConnection: closed\r\n\r\n", &fr);
    assert_true(fr.keep_alive);
    framing_of("POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n", &fr);
    assert_true(fr.expect_continue);
    framing_of("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", &fr);
    assert_false(fr.expect_continue);
}

/* --- chunked --- */

struct dechunk {
    enum qr_http_chunked_rc rc;
    char data[256];
    size_t data_len;
    size_t consumed;
};

/* Feed s in pieces of `piece` bytes (0 = all at once), the way a socket would. */
static void dechunk(const char *s, size_t n, size_t piece, struct dechunk *out)
{
    struct qr_http_chunked c;
    qr_http_chunked_init(&c);
    memset(out, 0, sizeof(*out));
    out->rc = QR_HTTP_CHUNKED_MORE;
    size_t pos = 0;
    while (pos < n && out->rc == QR_HTTP_CHUNKED_MORE) {
        size_t avail = piece && n - pos > piece ? piece : n - pos;
        size_t off = 0;
        while (off < avail) {
            size_t used;
            struct qr_slice d;
            out->rc = qr_http_chunked_step(&c, s + pos + off, avail - off, &used, &d);
            assert_true(used <= avail - off);
            assert_true(out->data_len + d.len <= sizeof(out->data));
            memcpy(out->data + out->data_len, d.ptr, d.len);
            out->data_len += d.len;
            off += used;
            if (out->rc != QR_HTTP_CHUNKED_MORE || used == 0)
                break;
        }
        pos += off;
        if (out->rc == QR_HTTP_CHUNKED_MORE)
            assert_int_equal(off, avail); /* MORE consumes all it is given */
    }
    out->consumed = pos;
}

static void assert_dechunk_every_split(const char *s, enum qr_http_chunked_rc want_rc,
                                       const char *want_data, size_t want_consumed)
{
    size_t n = strlen(s);
    for (size_t piece = 0; piece <= n; piece++) {
        struct dechunk d;
        dechunk(s, n, piece, &d);
        if (d.rc != want_rc)
            fail_msg("piece %zu: rc %d want %d", piece, d.rc, want_rc);
        if (want_data) {
            assert_int_equal(d.data_len, strlen(want_data));
            assert_memory_equal(d.data, want_data, d.data_len);
        }
        if (want_rc == QR_HTTP_CHUNKED_DONE)
            assert_int_equal(d.consumed, want_consumed);
    }
}

static void test_chunked_valid(void **state)
{
    const char *body = "5\r\nhello\r\n6;name=\"v\"\r\n world\r\nA\r\n0123456789\r\n0\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof(buf), "%sGET / HTTP/1.1\r\n", body);
    assert_dechunk_every_split(buf, QR_HTTP_CHUNKED_DONE, "hello world0123456789", strlen(body));
}

static void test_chunked_trailers(void **state)
{
    const char *body = "3\r\nabc\r\n0\r\nX-Trailer: 1\r\nY: two\r\n\r\n";
    char buf[256];
    snprintf(buf, sizeof(buf), "%sNEXT", body);
    assert_dechunk_every_split(buf, QR_HTTP_CHUNKED_DONE, "abc", strlen(body));
}

static void test_chunked_errors(void **state)
{
    static const char *bad[] = {
        "x\r\n",                       /* not hex */
        "\r\n",                        /* no digits */
        "5 \r\nhello\r\n0\r\n\r\n",    /* space after size */
        "-5\r\n",                      /* sign */
        "10000000000000000\r\n",       /* 2^64: overflow */
        "5\nhello\r\n0\r\n\r\n",       /* bare LF after size */
        "5\rhello",                    /* CR without LF */
        "5\r\nhelloX\r\n0\r\n\r\n",    /* data longer than size: missing CRLF */
        "5\r\nhello\n0\r\n\r\n",       /* bare LF after data */
        "0\r\nX: 1\n\r\n",             /* bare LF in trailer */
        "0\r\n\rX",                    /* final CR without LF */
        "3;a\x01\r\nabc\r\n0\r\n\r\n", /* control byte in extension */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = strlen(bad[i]);
        for (size_t piece = 0; piece <= n; piece++) {
            struct dechunk d;
            dechunk(bad[i], n, piece, &d);
            if (d.rc != QR_HTTP_CHUNKED_ERROR)
                fail_msg("accepted chunked input %zu at piece %zu", i, piece);
        }
    }
}

static void test_chunked_caps(void **state)
{
    /* A huge but valid size is the caller's cap to enforce; leading zeros are bounded. */
    struct dechunk d;
    dechunk("ffffffffffffffff\r\nab", 20, 0, &d);
    assert_int_equal(d.rc, QR_HTTP_CHUNKED_MORE);
    assert_int_equal(d.data_len, 2);
    static char zeros[5000];
    memset(zeros, '0', sizeof(zeros) - 1);
    dechunk(zeros, sizeof(zeros) - 1, 0, &d);
    assert_int_equal(d.rc, QR_HTTP_CHUNKED_ERROR);
    /* Endless trailers are cut. */
    static char trailers[20000];
    strcpy(trailers, "0\r\n");
    size_t n = 3;
    while (n + 12 < sizeof(trailers)) {
        memcpy(trailers + n, "X-A: 123\r\n", 10);
        n += 10;
    }
    dechunk(trailers, n, 0, &d);
    assert_int_equal(d.rc, QR_HTTP_CHUNKED_ERROR);
    /* Once failed, it stays failed. */
    struct qr_http_chunked c;
    size_t used;
    struct qr_slice s;
    qr_http_chunked_init(&c);
    assert_int_equal(qr_http_chunked_step(&c, "z", 1, &used, &s), QR_HTTP_CHUNKED_ERROR);
    assert_int_equal(qr_http_chunked_step(&c, "0\r\n\r\n", 5, &used, &s), QR_HTTP_CHUNKED_ERROR);
}

/* --- upstream response heads --- */

struct rparsed {
    int rc;
    enum qr_http_perr err;
    struct qr_http_response_head head;
    struct qr_http_header hdrs[MAXH];
    char buf[1024]; /* a writable copy, for unfolding */
};

static void rparse_n(const char *s, size_t n, size_t maxh, struct rparsed *p)
{
    memset(p, 0, sizeof(*p));
    assert_true(n <= sizeof(p->buf));
    memcpy(p->buf, s, n);
    p->head.headers = p->hdrs;
    p->rc = qr_http_parse_response_head(p->buf, n, &p->head, maxh, &p->err);
}

/* Parse s whole, then every prefix (each must be 0 or the whole's error) and the head-end search
 * split at every byte boundary (resuming from its scan hint): all must agree with the whole. */
static int rparse_all_splits(const char *s, size_t n, size_t maxh, struct rparsed *whole)
{
    rparse_n(s, n, maxh, whole);
    size_t scan = 0, end = qr_http_response_head_end(s, n, &scan);
    if (whole->rc >= 0)
        assert_int_equal(whole->rc, (int) end);
    for (size_t i = 0; i < n; i++) {
        struct rparsed p;
        rparse_n(s, i, maxh, &p);
        if (p.rc == -1) {
            assert_int_equal(whole->rc, -1);
            assert_int_equal(p.err, whole->err);
        } else if (p.rc > 0) {
            assert_int_equal(p.rc, whole->rc);
            assert_int_equal(p.head.num_headers, whole->head.num_headers);
        } else {
            assert_int_equal(p.err, QR_HTTP_PERR_NONE);
        }
        scan = 0;
        size_t e = qr_http_response_head_end(s, i, &scan);
        if (e == 0)
            e = qr_http_response_head_end(s, n, &scan);
        assert_int_equal(e, end);
    }
    return whole->rc;
}

static int rparse_str(const char *s, struct rparsed *whole)
{
    return rparse_all_splits(s, strlen(s), MAXH, whole);
}

static void test_response_valid(void **state)
{
    const char *r = "HTTP/1.1 200 OK then some\r\nContent-Type: application/json\r\n"
                    "X-Empty:\r\nX-Spaces: \t a b \t\r\n\r\n{\"a\":1}";
    struct rparsed p;
    assert_int_equal(rparse_str(r, &p), (int) (strstr(r, "{") - r));
    assert_int_equal(p.head.status, 200);
    assert_int_equal(p.head.minor_version, 1);
    assert_slice(p.head.reason, "OK then some");
    assert_int_equal(p.head.num_headers, 3);
    assert_false(p.head.folded);
    assert_slice(p.hdrs[0].name, "Content-Type");
    assert_slice(p.hdrs[0].value, "application/json");
    assert_slice(p.hdrs[1].name, "X-Empty");
    assert_slice(p.hdrs[1].value, "");
    assert_slice(p.hdrs[2].value, "a b");

    assert_int_equal(rparse_str("HTTP/1.0 404\r\n\r\n", &p), 16);
    assert_int_equal(p.head.status, 404);
    assert_int_equal(p.head.minor_version, 0);
    assert_slice(p.head.reason, "");
    assert_int_equal(p.head.num_headers, 0);
    assert_int_equal(rparse_str("HTTP/1.1 999 \r\n\r\n", &p), 17);
    assert_int_equal(p.head.status, 999);
    assert_int_equal(rparse_str("HTTP/1.1 100\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", &p), 16);
    assert_int_equal(p.head.status, 100);
}

/* The tolerance the native client has always had: bare LF, CRs trimmed, odd lines ignored. */
static void test_response_lenient(void **state)
{
    struct rparsed p;
    const char *r = "HTTP/1.1 200 OK\nA : 1\r\nno colon here\r\n: empty name\r\n"
                    "B:\x01 x\x7f \r\r\n\tC\r\nD:2\n\n";
    assert_int_equal(rparse_str(r, &p), (int) strlen(r));
    assert_int_equal(p.head.num_headers, 3);
    assert_slice(p.hdrs[0].name, "A");
    assert_slice(p.hdrs[0].value, "1");
    assert_slice(p.hdrs[1].name, "B");
    assert_slice(p.hdrs[1].value, "\x01 x\x7f \r\r\n\tC"); /* raw span of a folded value */
    assert_true(p.head.folded);
    assert_slice(p.hdrs[2].name, "D");
    assert_slice(p.hdrs[2].value, "2");
    /* the head ends at LF LF or LF CR LF, whichever comes first */
    assert_int_equal(rparse_str("HTTP/1.1 200 OK\n\r\nrest", &p), 18);
    assert_int_equal(rparse_str("HTTP/1.1 200 OK\r\n\nrest", &p), 18);
    /* a NUL is just a byte */
    static const char nul[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
    assert_int_equal(rparse_all_splits(nul, sizeof(nul) - 1, MAXH, &p), (int) sizeof(nul) - 1);
    assert_int_equal(p.hdrs[0].value.len, 3);
}

static void test_response_bad_status_line(void **state)
{
    static const char *bad[] = {
        "HTTP/1.2 200 OK\r\n\r\n",     "HTTP/2 200 OK\r\n\r\n",   "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 2000\r\n\r\n",       "HTTP/1.1  200\r\n\r\n",   "http/1.1 200 OK\r\n\r\n",
        "HTTP/1.1 099 Low\r\n\r\n",    "HTTP/1.1 200\r\r\n\r\n",  "HTTP/1.1\t200 OK\r\n\r\n",
        "\r\nHTTP/1.1 200 OK\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "ICY 200 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct rparsed p;
        if (rparse_str(bad[i], &p) != -1)
            fail_msg("accepted status line of '%s'", bad[i]);
        assert_int_equal(p.err, QR_HTTP_PERR_STATUS_LINE);
    }
    /* judged as soon as the line is complete, before the head is */
    struct rparsed p;
    rparse_n("HTTP/1.1 2OO OK\r\nX: 1\r\n", 23, MAXH, &p);
    assert_int_equal(p.rc, -1);
    assert_int_equal(p.err, QR_HTTP_PERR_STATUS_LINE);
    assert_int_equal(qr_http_perr_status(p.err), 502);
    rparse_n("HTTP/1.1 200 OK\r\nX: 1\r\n", 23, MAXH, &p);
    assert_int_equal(p.rc, 0);
}

static void test_response_obs_fold_unfold(void **state)
{
    const char *r = "HTTP/1.1 200 OK\r\n  before any field\r\nX-Folded: first \r\n  second\r\n"
                    "\t \r\nnot a field\r\n third  \r\nX-Next: n\r\n  \r\nX-Last: l\r\n"
                    " tail\r\n\r\n";
    struct rparsed p;
    assert_int_equal(rparse_str(r, &p), (int) strlen(r));
    assert_int_equal(p.head.num_headers, 3);
    assert_true(p.head.folded);
    qr_http_response_head_unfold(p.buf, &p.head);
    assert_false(p.head.folded);
    assert_slice(p.hdrs[0].name, "X-Folded");
    assert_slice(p.hdrs[0].value, "first second third");
    assert_slice(p.hdrs[1].name, "X-Next");
    assert_slice(p.hdrs[1].value, "n");
    assert_slice(p.hdrs[2].name, "X-Last");
    assert_slice(p.hdrs[2].value, "l tail");
    /* an empty first line still joins with one space */
    assert_int_equal(rparse_str("HTTP/1.1 200 OK\r\nA:  \r\n x\r\n\r\n", &p), 29);
    qr_http_response_head_unfold(p.buf, &p.head);
    assert_slice(p.hdrs[0].value, " x");
    /* nothing folded: unfold changes nothing */
    assert_int_equal(rparse_str("HTTP/1.1 200 OK\r\nA: 1\r\n\r\n", &p), 25);
    assert_false(p.head.folded);
    qr_http_response_head_unfold(p.buf, &p.head);
    assert_slice(p.hdrs[0].value, "1");
}

static void test_response_too_many_headers(void **state)
{
    /* only named fields count: ignored and continuation lines take no room */
    const char *r = "HTTP/1.1 200 OK\r\nA: 1\r\n more\r\nnocolon\r\nB: 2\r\n\r\n";
    struct rparsed p;
    assert_int_equal(rparse_all_splits(r, strlen(r), 2, &p), (int) strlen(r));
    assert_int_equal(p.head.num_headers, 2);
    assert_int_equal(rparse_all_splits(r, strlen(r), 1, &p), -1);
    assert_int_equal(p.err, QR_HTTP_PERR_TOO_MANY_HEADERS);
    /* no array at all is fine for a head without fields */
    struct qr_http_response_head h = {.headers = NULL};
    enum qr_http_perr err;
    assert_int_equal(qr_http_parse_response_head("HTTP/1.1 204 No\r\n\r\n", 19, &h, 0, &err), 19);
    assert_int_equal(qr_http_parse_response_head(r, strlen(r), &h, 0, &err), -1);
    assert_int_equal(err, QR_HTTP_PERR_TOO_MANY_HEADERS);
}

static void test_response_head_end_resumes(void **state)
{
    const char *r = "HTTP/1.1 200 OK\r\nA: 1\r\n\r\nbody\n\n";
    size_t scan = 0;
    /* byte by byte, the way a slow peer sends it: the hint never passes a newline that might
     * start the empty line */
    for (size_t i = 0; i <= 25; i++) {
        size_t before = scan;
        size_t e = qr_http_response_head_end(r, i, &scan);
        assert_int_equal(e, i == 25 ? 25 : 0);
        if (e == 0)
            assert_true(scan >= before && scan <= i);
    }
    assert_int_equal(scan, 0);
    scan = 0;
    assert_int_equal(qr_http_response_head_end("\n\n", 2, &scan), 2);
    assert_int_equal(qr_http_response_head_end("x\r\n\r", 4, &scan), 0);
    assert_int_equal(qr_http_response_head_end("x\r\n\rX", 5, &scan), 0);
}

/* Framing of the response head r (parsed, then unfolded) to a GET or a HEAD. */
static enum qr_http_body_framing rframing(const char *r, bool head_req, uint64_t *cl,
                                          enum qr_http_perr *err, bool *keep_alive)
{
    struct rparsed p;
    assert_true(rparse_str(r, &p) > 0);
    qr_http_response_head_unfold(p.buf, &p.head);
    enum qr_http_body_framing f =
        qr_http_response_framing(p.head.status, head_req, p.head.minor_version, &p.head, cl, err);
    if (keep_alive)
        *keep_alive = f != QR_HTTP_FRAMING_ERROR &&
                      qr_http_response_keep_alive(p.head.minor_version, &p.head, f);
    return f;
}

static void test_response_framing(void **state)
{
    static const struct {
        const char *head;
        bool head_req;
        enum qr_http_body_framing want;
        uint64_t cl;
        enum qr_http_perr err;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false, QR_HTTP_FRAMING_LENGTH, 12,
         QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, QR_HTTP_FRAMING_LENGTH, 0,
         QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", false,
         QR_HTTP_FRAMING_LENGTH, 5, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", false,
         QR_HTTP_FRAMING_ERROR, 0, QR_HTTP_PERR_CONTENT_LENGTH},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", false, QR_HTTP_FRAMING_ERROR, 0,
         QR_HTTP_PERR_CONTENT_LENGTH},
        /* Content-Length is checked even where no body can follow */
        {"HTTP/1.1 204 No\r\nContent-Length: x\r\n\r\n", false, QR_HTTP_FRAMING_ERROR, 0,
         QR_HTTP_PERR_CONTENT_LENGTH},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 2\r\n\r\n", false, QR_HTTP_FRAMING_ERROR, 0,
         QR_HTTP_PERR_CONTENT_LENGTH},
        {"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n  \r\n\r\n", false, QR_HTTP_FRAMING_LENGTH, 12,
         QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", true, QR_HTTP_FRAMING_NONE, 0,
         QR_HTTP_PERR_NONE},
        {"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", false,
         QR_HTTP_FRAMING_NONE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 304 Not Modified\r\nContent-Length: 42\r\n\r\n", false, QR_HTTP_FRAMING_NONE, 0,
         QR_HTTP_PERR_NONE},
        {"HTTP/1.1 100 Continue\r\n\r\n", false, QR_HTTP_FRAMING_NONE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\n\r\n", false, QR_HTTP_FRAMING_CLOSE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n", false, QR_HTTP_FRAMING_CHUNKED, 0,
         QR_HTTP_PERR_NONE},
        /* Transfer-Encoding wins over Content-Length; its last coding decides */
        {"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", false,
         QR_HTTP_FRAMING_CHUNKED, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip , chunked \r\n\r\n", false,
         QR_HTTP_FRAMING_CHUNKED, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false,
         QR_HTTP_FRAMING_CLOSE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n", false,
         QR_HTTP_FRAMING_CLOSE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", false,
         QR_HTTP_FRAMING_CHUNKED, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", false,
         QR_HTTP_FRAMING_CLOSE, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip,\r\n chunked\r\n\r\n", false,
         QR_HTTP_FRAMING_CHUNKED, 0, QR_HTTP_PERR_NONE},
        {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false, QR_HTTP_FRAMING_CHUNKED, 0,
         QR_HTTP_PERR_NONE},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t cl = 99;
        enum qr_http_perr err = QR_HTTP_PERR__COUNT;
        enum qr_http_body_framing f = rframing(cases[i].head, cases[i].head_req, &cl, &err, NULL);
        if (f != cases[i].want || cl != cases[i].cl || err != cases[i].err)
            fail_msg("case %zu: framing %d cl %llu err %d", i, (int) f, (unsigned long long) cl,
                     (int) err);
    }
}

static void test_response_keep_alive(void **state)
{
    uint64_t cl;
    enum qr_http_perr err;
    bool ka;
    rframing("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n", false, &cl, &err, &ka);
    assert_true(ka);
    rframing("HTTP/1.1 200 OK\r\n\r\n", false, &cl, &err, &ka);
    assert_false(ka); /* read until close */
    rframing("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: x, Close\r\n\r\n", false, &cl,
             &err, &ka);
    assert_false(ka);
    rframing("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: closed\r\n\r\n", false, &cl, &err,
             &ka);
    assert_true(ka);
    rframing("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false, &cl, &err, &ka);
    assert_false(ka);
    rframing("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: Keep-Alive\r\n\r\n", false, &cl,
             &err, &ka);
    assert_true(ka);
    rframing("HTTP/1.0 204 No\r\nConnection: keep-alive, close\r\n\r\n", false, &cl, &err, &ka);
    assert_false(ka);
    /* a folded Connection value is judged after joining */
    rframing("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: x,\r\n close\r\n\r\n", false, &cl,
             &err, &ka);
    assert_false(ka);
}

/* A chunked response: the body after the head decodes the same fed whole or byte by byte. */
static void test_response_then_chunked_body(void **state)
{
    const char *r = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\nT: 1\r\n\r\n";
    struct rparsed p;
    int n1 = rparse_str(r, &p);
    assert_int_equal(p.head.status, 100);
    int n2 = rparse_str(r + n1, &p);
    assert_int_equal(p.head.status, 200);
    uint64_t cl;
    enum qr_http_perr err;
    assert_int_equal(qr_http_response_framing(200, false, 1, &p.head, &cl, &err),
                     QR_HTTP_FRAMING_CHUNKED);
    const char *body = r + n1 + n2;
    assert_dechunk_every_split(body, QR_HTTP_CHUNKED_DONE, "abcd", strlen(body));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_get),
        cmocka_unit_test(test_valid_post_with_body_after),
        cmocka_unit_test(test_leading_crlf_and_options_star),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_nul_in_value_full_length),
        cmocka_unit_test(test_garbage_detected_before_line_end),
        cmocka_unit_test(test_too_many_headers),
        cmocka_unit_test(test_content_length_values),
        cmocka_unit_test(test_framing_rules),
        cmocka_unit_test(test_connection_and_expect),
        cmocka_unit_test(test_chunked_valid),
        cmocka_unit_test(test_chunked_trailers),
        cmocka_unit_test(test_chunked_errors),
        cmocka_unit_test(test_chunked_caps),
        cmocka_unit_test(test_response_valid),
        cmocka_unit_test(test_response_lenient),
        cmocka_unit_test(test_response_bad_status_line),
        cmocka_unit_test(test_response_obs_fold_unfold),
        cmocka_unit_test(test_response_too_many_headers),
        cmocka_unit_test(test_response_head_end_resumes),
        cmocka_unit_test(test_response_framing),
        cmocka_unit_test(test_response_keep_alive),
        cmocka_unit_test(test_response_then_chunked_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
