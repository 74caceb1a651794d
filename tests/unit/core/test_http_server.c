/* HTTP server against raw loopback sockets. One thread: the test writes bytes, then pumps the
 * event loop (EVLOOP_NONBLOCK) while polling its own non-blocking socket, with a deadline on
 * every wait, and asserts on the exact bytes that come back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/http_parse.h"
#include "core/http_server.h"

/* --- fixture: server, handler modes, recorded callbacks --- */

#define MAX_ACCESS 32

struct access_rec {
    char id[25], method[16], path[64];
    int status;
    uint64_t bytes_in, bytes_out;
    bool aborted;
    char peer[64];
};

static struct {
    struct event_base *base;
    struct qr_http_server *srv;
    struct qr_http_server_opts opts;
    struct access_rec access[MAX_ACCESS];
    int naccess;
    struct qr_http_req *held; /* request kept by /slow or /stream */
    int closed;               /* close callbacks seen */
    int drains;
    size_t body_max;
    enum qr_err body_err;
    size_t big_total, big_sent;
} g;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void on_access(const struct qr_http_access *rec, void *arg)
{
    assert_true(g.naccess < MAX_ACCESS);
    struct access_rec *a = &g.access[g.naccess++];
    snprintf(a->id, sizeof(a->id), "%s", rec->request_id);
    snprintf(a->method, sizeof(a->method), "%s", rec->method);
    snprintf(a->path, sizeof(a->path), "%s", rec->path);
    snprintf(a->peer, sizeof(a->peer), "%s", rec->peer);
    a->status = rec->status;
    a->bytes_in = rec->bytes_in;
    a->bytes_out = rec->bytes_out;
    a->aborted = rec->aborted;
}

static void on_close(struct qr_http_req *req, void *arg)
{
    g.closed++;
    if (g.held == req)
        g.held = NULL;
}

static void on_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    g.body_err = err;
    if (err == QR_ERR_TOO_LARGE) {
        qr_http_send_error(req, 413, "request_too_large", "body over cap");
        return;
    }
    if (err) {
        qr_http_send_error(req, 400, "bad_request", "bad body");
        return;
    }
    struct qr_slice b = qr_http_req_body(req);
    qr_http_resp_send(req, 200, "application/octet-stream", b.ptr, b.len);
}

static void big_pump(struct qr_http_req *req, void *arg)
{
    static char piece[4096];
    memset(piece, 'b', sizeof(piece));
    while (g.big_sent < g.big_total) {
        size_t n =
            g.big_total - g.big_sent < sizeof(piece) ? g.big_total - g.big_sent : sizeof(piece);
        g.big_sent += n;
        if (!qr_http_resp_write(req, piece, n)) {
            if (g.big_sent < g.big_total)
                return; /* wait for the drain callback */
        }
    }
    qr_http_resp_end(req);
    g.held = NULL;
}

static void on_drain(struct qr_http_req *req, void *arg)
{
    g.drains++;
    big_pump(req, arg);
}

static void handler(struct qr_http_req *req, void *arg)
{
    const char *path = qr_http_req_path(req);
    if (!strcmp(path, "/hello")) {
        qr_http_resp_header(req, "X-Test", "yes");
        qr_http_resp_send(req, 200, "text/plain", "hello", 5);
    } else if (!strcmp(path, "/echo")) {
        qr_http_req_read_body(req, g.body_max, on_body, NULL);
    } else if (!strcmp(path, "/slow") || !strcmp(path, "/stream")) {
        g.held = req;
        qr_http_req_set_close_cb(req, on_close, NULL);
        if (!strcmp(path, "/stream")) {
            qr_http_resp_start(req, 200, -1);
            qr_http_resp_write(req, "part1", 5);
        }
    } else if (!strcmp(path, "/early")) {
        qr_http_send_error(req, 401, "unauthorized", "no key");
    } else if (!strcmp(path, "/big")) {
        g.held = req;
        qr_http_req_set_close_cb(req, on_close, NULL);
        qr_http_resp_set_drain_cb(req, on_drain, NULL);
        qr_http_resp_start(req, 200, (int64_t) g.big_total);
        big_pump(req, NULL);
    } else if (!strcmp(path, "/query")) {
        const char *q = qr_http_req_query(req);
        const char *h = qr_http_req_header(req, "x-in");
        char out[128];
        int n = snprintf(out, sizeof(out), "%s|%s|%s|%d", q ? q : "-", h ? h : "-",
                         qr_http_req_target(req), qr_http_req_minor_version(req));
        qr_http_resp_send(req, 200, "text/plain", out, (size_t) n);
    } else {
        qr_http_send_error(req, 404, "not_found", "no route \"x\"");
    }
}

static void start_server(void)
{
    struct qr_diag d = {{0}};
    g.base = event_base_new();
    assert_non_null(g.base);
    g.opts.host = "127.0.0.1";
    g.opts.port = 0;
    g.opts.handler = handler;
    g.opts.access_fn = on_access;
    assert_int_equal(qr_http_server_new(g.base, &g.opts, &d, &g.srv), QR_OK);
    assert_true(qr_http_server_port(g.srv) > 0);
}

static int setup(void **state)
{
    memset(&g, 0, sizeof(g));
    g.opts.max_header_bytes = 1024;
    g.opts.max_headers = 8;
    g.opts.max_connections = 4;
    g.opts.header_timeout_ms = 300;
    g.opts.read_timeout_ms = 300;
    g.opts.idle_timeout_ms = 400;
    g.opts.write_timeout_ms = 300;
    g.opts.out_high_water = 16 * 1024;
    g.body_max = 64;
    return 0;
}

static int teardown(void **state)
{
    if (g.srv)
        qr_http_server_free(g.srv);
    if (g.base)
        event_base_free(g.base);
    g.srv = NULL;
    g.base = NULL;
    return 0;
}

/* --- client side --- */

struct cli {
    int fd;
    char *buf;
    size_t len, cap;
    bool eof;
};

static void pump(int wait_fd, int ms)
{
    event_base_loop(g.base, EVLOOP_NONBLOCK);
    struct pollfd p = {.fd = wait_fd, .events = POLLIN};
    poll(&p, wait_fd >= 0 ? 1 : 0, ms);
    event_base_loop(g.base, EVLOOP_NONBLOCK);
}

/* Run the loop for about ms milliseconds. */
static void pump_for(int ms)
{
    uint64_t end = mono_ms() + (uint64_t) ms;
    while (mono_ms() < end)
        pump(-1, 2);
}

static int cli_connect_rc(struct cli *c)
{
    memset(c, 0, sizeof(*c));
    c->cap = 4 << 20;
    c->buf = malloc(c->cap);
    assert_non_null(c->buf);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(c->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(qr_http_server_port(g.srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(c->fd, (struct sockaddr *) &a, sizeof(a));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    pump(-1, 0);
    return rc == 0 ? 0 : errno;
}

static void cli_connect(struct cli *c)
{
    assert_int_equal(cli_connect_rc(c), 0);
}

static void cli_close(struct cli *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
}

static void cli_sendn(struct cli *c, const char *s, size_t n)
{
    uint64_t end = mono_ms() + 1000;
    while (n > 0) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
        if (w > 0) {
            s += w;
            n -= (size_t) w;
            continue;
        }
        assert_true(w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        assert_true(mono_ms() < end);
        pump(-1, 1);
    }
    pump(-1, 0);
}

static void cli_send(struct cli *c, const char *s)
{
    cli_sendn(c, s, strlen(s));
}

/* Read what is available; false when nothing came within ms. */
static bool cli_fill(struct cli *c, int ms)
{
    uint64_t end = mono_ms() + (uint64_t) ms;
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
        if (r > 0) {
            c->len += (size_t) r;
            c->buf[c->len] = '\0';
            return true;
        }
        if (r == 0) {
            c->eof = true;
            return true;
        }
        assert_true(errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNRESET);
        if (errno == ECONNRESET) {
            c->eof = true;
            return true;
        }
        if (mono_ms() >= end)
            return false;
        pump(c->fd, 2);
    }
}

/* Wait until the peer closed (true) or ms passed (false); bytes read meanwhile are kept. */
static bool cli_wait_eof(struct cli *c, int ms)
{
    uint64_t end = mono_ms() + (uint64_t) ms;
    while (!c->eof && mono_ms() < end)
        cli_fill(c, (int) (end - mono_ms()) + 1);
    return c->eof;
}

struct resp {
    int status;
    char head[2048];
    char body[1 << 20];
    size_t body_len;
};

static const char *resp_header(const struct resp *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    for (const char *p = strstr(r->head, "\r\n"); p && p[2] != '\r'; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (!strncasecmp(line, name, nl) && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            snprintf(out, n, "%.*s", (int) (e - v), v);
            return out;
        }
    }
    return NULL;
}

/* Read one complete response (Content-Length, chunked, or close-delimited). head_req: no body. */
static bool cli_response_ex(struct cli *c, struct resp *r, int ms, bool head_req)
{
    uint64_t end = mono_ms() + (uint64_t) ms;
    memset(r, 0, sizeof(*r));
    for (;;) {
        char *eoh = c->len ? strstr(c->buf, "\r\n\r\n") : NULL;
        if (eoh) {
            size_t hlen = (size_t) (eoh - c->buf) + 4;
            assert_true(hlen < sizeof(r->head));
            memcpy(r->head, c->buf, hlen);
            r->head[hlen] = '\0';
            r->status = atoi(c->buf + 9);
            char v[64];
            size_t have = c->len - hlen, used = 0;
            bool done = false;
            if (head_req || r->status == 204 || r->status == 304 || r->status < 200) {
                done = true;
            } else if (resp_header(r, "content-length", v, sizeof(v))) {
                size_t cl = (size_t) atol(v);
                if (have >= cl) {
                    memcpy(r->body, c->buf + hlen, cl);
                    r->body_len = cl;
                    used = cl;
                    done = true;
                }
            } else if (resp_header(r, "transfer-encoding", v, sizeof(v))) {
                struct qr_http_chunked ch;
                qr_http_chunked_init(&ch);
                size_t off = 0, u;
                struct qr_slice d;
                enum qr_http_chunked_rc rc = QR_HTTP_CHUNKED_MORE;
                r->body_len = 0;
                while (off < have && rc == QR_HTTP_CHUNKED_MORE) {
                    rc = qr_http_chunked_step(&ch, c->buf + hlen + off, have - off, &u, &d);
                    memcpy(r->body + r->body_len, d.ptr, d.len);
                    r->body_len += d.len;
                    off += u;
                }
                assert_int_not_equal(rc, QR_HTTP_CHUNKED_ERROR);
                if (rc == QR_HTTP_CHUNKED_DONE) {
                    used = off;
                    done = true;
                }
            } else if (c->eof) {
                memcpy(r->body, c->buf + hlen, have);
                r->body_len = have;
                used = have;
                done = true;
            }
            if (done) {
                memmove(c->buf, c->buf + hlen + used, c->len - hlen - used);
                c->len -= hlen + used;
                c->buf[c->len] = '\0';
                return true;
            }
        }
        if (c->eof || mono_ms() >= end)
            return false;
        cli_fill(c, (int) (end - mono_ms()) + 1);
    }
}

static bool cli_response(struct cli *c, struct resp *r, int ms)
{
    return cli_response_ex(c, r, ms, false);
}

static struct resp R; /* big: keep off the stack */

static void assert_request_id(const struct resp *r, char id[25])
{
    char v[64];
    assert_non_null(resp_header(r, "x-quantum-request-id", v, sizeof(v)));
    assert_int_equal(strlen(v), 24);
    for (int i = 0; i < 24; i++)
        assert_true((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f'));
    if (id)
        memcpy(id, v, 25);
}

static void assert_header(const struct resp *r, const char *name, const char *want)
{
    char v[256];
    const char *got = resp_header(r, name, v, sizeof(v));
    if (!want) {
        if (got)
            fail_msg("unexpected header %s: %s", name, got);
        return;
    }
    if (!got || strcmp(got, want))
        fail_msg("header %s: got '%s' want '%s'", name, got ? got : "(none)", want);
}

/* The exact error shape, headers included. */
static void assert_error(const struct resp *r, int status, const char *code, const char *msg)
{
    char id[25], want[512];
    assert_int_equal(r->status, status);
    assert_request_id(r, id);
    assert_header(r, "content-type", "application/json; charset=utf-8");
    assert_header(r, "cache-control", "no-store");
    assert_header(r, "x-content-type-options", "nosniff");
    int n = snprintf(want, sizeof(want),
                     "{\"error\":{\"code\":\"%s\",\"message\":\"%s\",\"request_id\":\"%s\"}}\n",
                     code, msg, id);
    assert_int_equal(r->body_len, (size_t) n);
    assert_memory_equal(r->body, want, (size_t) n);
}

/* --- tests --- */

static void test_simple_200(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_true(!strncmp(R.head, "HTTP/1.1 200 OK\r\n", 17));
    char id[25];
    assert_request_id(&R, id);
    assert_header(&R, "content-length", "5");
    assert_header(&R, "content-type", "text/plain");
    assert_header(&R, "x-test", "yes");
    assert_header(&R, "connection", NULL);
    assert_int_equal(R.body_len, 5);
    assert_memory_equal(R.body, "hello", 5);
    pump_for(20);
    assert_int_equal(g.naccess, 1);
    assert_string_equal(g.access[0].id, id);
    assert_string_equal(g.access[0].method, "GET");
    assert_string_equal(g.access[0].path, "/hello");
    assert_int_equal(g.access[0].status, 200);
    assert_int_equal(g.access[0].bytes_out, 5);
    assert_false(g.access[0].aborted);
    assert_true(!strncmp(g.access[0].peer, "127.0.0.1:", 10));
    assert_int_equal(qr_http_server_in_flight(g.srv), 0);
    assert_int_equal(qr_http_server_connections(g.srv), 1);
    cli_close(&c);
}

static void test_request_accessors(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /query?a=1&b HTTP/1.0\r\nX-In:  v1 \r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.body_len, strlen("a=1&b|v1|/query?a=1&b|0"));
    assert_memory_equal(R.body, "a=1&b|v1|/query?a=1&b|0", R.body_len);
    assert_header(&R, "connection", "close"); /* HTTP/1.0 without keep-alive */
    assert_true(cli_wait_eof(&c, 1000));
    cli_close(&c);
}

static void test_keepalive_two_requests(void **state)
{
    start_server();
    struct cli c;
    char id1[25], id2[25];
    cli_connect(&c);
    cli_send(&c, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_request_id(&R, id1);
    cli_send(&c, "GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_header(&R, "connection", "keep-alive");
    assert_request_id(&R, id2);
    assert_string_not_equal(id1, id2);
    cli_send(&c, "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&c, 1000));
    assert_int_equal(g.naccess, 3);
    cli_close(&c);
}

static void test_pipelining_in_order(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /slow HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n"
                 "POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
    /* Nothing may come before /slow is answered, even though /hello is ready to go. */
    assert_false(cli_fill(&c, 100));
    assert_non_null(g.held);
    assert_int_equal(qr_http_server_in_flight(g.srv), 1);
    qr_http_resp_send(g.held, 202, "text/plain", "slow", 4);
    g.held = NULL;
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 202);
    assert_memory_equal(R.body, "slow", 4);
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_memory_equal(R.body, "hello", 5);
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_int_equal(R.body_len, 3);
    assert_memory_equal(R.body, "abc", 3);
    assert_int_equal(g.naccess, 3);
    assert_string_equal(g.access[0].path, "/slow");
    assert_string_equal(g.access[2].path, "/echo");
    assert_int_equal(g.access[2].bytes_in, 3);
    cli_close(&c);
}

static void test_chunked_stream_incremental(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /stream HTTP/1.1\r\n\r\n");
    /* The head and the first chunk arrive while the response is still open. */
    uint64_t end = mono_ms() + 1000;
    while (!strstr(c.buf ? c.buf : "", "5\r\npart1\r\n") && mono_ms() < end)
        cli_fill(&c, 50);
    assert_non_null(strstr(c.buf, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(c.buf, "\r\n\r\n5\r\npart1\r\n"));
    assert_null(strstr(c.buf, "0\r\n\r\n"));
    assert_non_null(g.held);
    assert_true(qr_http_resp_started(g.held));
    assert_true(qr_http_resp_write(g.held, "part22", 6));
    while (!strstr(c.buf, "6\r\npart22\r\n") && mono_ms() < end)
        cli_fill(&c, 50);
    assert_non_null(strstr(c.buf, "6\r\npart22\r\n"));
    qr_http_resp_end(g.held);
    g.held = NULL;
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.body_len, 11);
    assert_memory_equal(R.body, "part1part22", 11);
    assert_int_equal(g.closed, 0);
    pump_for(10);
    assert_int_equal(g.naccess, 1);
    assert_int_equal(g.access[0].bytes_out, 11);
    assert_false(g.access[0].aborted);
    cli_close(&c);
}

/* The chunk-size line is lowercase hex without leading zeros, as "%zx" writes it (now formatted
 * by hand per chunk): 0x1a2b bytes, then 0xf0 and 0x10 bytes. */
static void test_chunk_size_line_hex(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /stream HTTP/1.1\r\n\r\n");
    uint64_t end = mono_ms() + 1000;
    while (!strstr(c.buf ? c.buf : "", "5\r\npart1\r\n") && mono_ms() < end)
        cli_fill(&c, 50);
    assert_non_null(g.held);
    static char big[0x1a2b];
    memset(big, 'x', sizeof(big));
    assert_true(qr_http_resp_write(g.held, big, sizeof(big)));
    assert_true(qr_http_resp_write(g.held, big, 0xf0));
    assert_true(qr_http_resp_write(g.held, big, 0x10));
    qr_http_resp_end(g.held);
    g.held = NULL;
    while (!strstr(c.buf, "\r\n0\r\n\r\n") && mono_ms() < end)
        cli_fill(&c, 50);
    assert_non_null(strstr(c.buf, "part1\r\n1a2b\r\nxxx"));
    assert_non_null(strstr(c.buf, "xx\r\nf0\r\nxxx"));
    assert_non_null(strstr(c.buf, "xx\r\n10\r\nxxxxxxxxxxxxxxxx\r\n0\r\n\r\n"));
    cli_close(&c);
}

static void test_http10_close_delimited_stream(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /stream HTTP/1.0\r\n\r\n");
    pump_for(30);
    assert_non_null(g.held);
    qr_http_resp_write(g.held, "-more", 5);
    qr_http_resp_end(g.held);
    g.held = NULL;
    assert_true(cli_wait_eof(&c, 1000));
    assert_true(cli_response(&c, &R, 10));
    assert_header(&R, "transfer-encoding", NULL);
    assert_header(&R, "content-length", NULL);
    assert_header(&R, "connection", "close");
    assert_int_equal(R.body_len, 10);
    assert_memory_equal(R.body, "part1-more", 10);
    cli_close(&c);
}

static void test_400_shape(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET http://evil/ HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 400, "bad_request", "request-target must start with '/'");
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&c, 1000));
    assert_int_equal(g.naccess, 1);
    assert_int_equal(g.access[0].status, 400);
    assert_string_equal(g.access[0].method, "");
    cli_close(&c);

    /* A bare LF, an obs-fold and a space before the colon are refused the same way. */
    static const char *bad[] = {"GET / HTTP/1.1\nHost: x\n\n",
                                "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
                                "GET / HTTP/1.1\r\nHost : x\r\n\r\n"};
    for (size_t i = 0; i < 3; i++) {
        cli_connect(&c);
        cli_send(&c, bad[i]);
        assert_true(cli_response(&c, &R, 1000));
        assert_int_equal(R.status, 400);
        assert_true(cli_wait_eof(&c, 1000));
        cli_close(&c);
    }
}

static void test_framing_errors(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 501, "not_implemented", "unsupported 'transfer-encoding'");
    assert_true(cli_wait_eof(&c, 1000));
    cli_close(&c);
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 400, "bad_request", "both 'content-length' and 'transfer-encoding'");
    cli_close(&c);
    pump_for(10);
    assert_int_equal(g.naccess, 2);
    assert_string_equal(g.access[1].method, "POST");
    assert_string_equal(g.access[1].path, "/echo");
    assert_int_equal(g.access[1].status, 400);
}

static void test_431(void **state)
{
    start_server();
    struct cli c;
    char big[1200];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    cli_connect(&c);
    cli_send(&c, "GET / HTTP/1.1\r\nX-Big: ");
    cli_send(&c, big); /* no end of head: the byte count alone decides */
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 431, "request_header_fields_too_large",
                 "request header section exceeds 1024 bytes");
    assert_true(cli_wait_eof(&c, 1000));
    cli_close(&c);

    cli_connect(&c);
    cli_send(&c,
             "GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\nG: 1\r\nH: 1\r\n"
             "I: 1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 431, "request_header_fields_too_large", "too many header fields");
    cli_close(&c);
    pump_for(10);
    assert_int_equal(g.naccess, 2);
    assert_int_equal(g.access[0].status, 431);
}

static void test_408_header_timeout(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    uint64_t t0 = mono_ms();
    cli_send(&c, "GET /hello HTT");
    assert_true(cli_response(&c, &R, 1500));
    uint64_t dt = mono_ms() - t0;
    assert_true(dt >= 250 && dt < 1200);
    assert_error(&R, 408, "request_timeout", "request header not received in time");
    assert_true(cli_wait_eof(&c, 1000));
    assert_int_equal(g.naccess, 1);
    assert_int_equal(g.access[0].status, 408);
    cli_close(&c);
}

static void test_idle_keepalive_silent_close(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    uint64_t t0 = mono_ms();
    assert_true(cli_wait_eof(&c, 1500));
    assert_true(mono_ms() - t0 >= 300);
    assert_int_equal(c.len, 0); /* silent: no 408 on an idle keep-alive connection */
    pump_for(10);
    assert_int_equal(qr_http_server_connections(g.srv), 0);
    cli_close(&c);
}

static void test_503_over_max_connections(void **state)
{
    g.opts.max_connections = 1;
    start_server();
    struct cli a, b;
    cli_connect(&a);
    cli_connect(&b);
    pump_for(10);
    assert_int_equal(qr_http_server_connections(g.srv), 2);
    cli_send(&b, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&b, &R, 1000));
    assert_error(&R, 503, "server_busy", "too many open connections");
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&b, 1000));
    cli_close(&b);
    cli_send(&a, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&a, &R, 1000));
    assert_int_equal(R.status, 200);
    pump_for(10);
    assert_int_equal(g.naccess, 2);
    assert_int_equal(g.access[0].status, 503);
    assert_string_equal(g.access[0].path, "/hello");
    assert_int_equal(qr_http_server_connections(g.srv), 1);
    cli_close(&a);
}

static void test_read_body_content_length(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello");
    assert_false(cli_fill(&c, 50));
    cli_send(&c, " world");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_int_equal(R.body_len, 11);
    assert_memory_equal(R.body, "hello world", 11);
    assert_int_equal(g.body_err, QR_OK);
    pump_for(10);
    assert_int_equal(g.access[0].bytes_in, 11);
    cli_close(&c);
}

static void test_read_body_chunked(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n");
    assert_false(cli_fill(&c, 50));
    cli_send(&c, "5;x=y\r\npedia\r\n0\r\nX-Trailer: t\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_int_equal(R.body_len, 9);
    assert_memory_equal(R.body, "wikipedia", 9);
    /* The connection stays usable after a chunked body. */
    cli_send(&c, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    cli_close(&c);
}

static void test_read_body_over_cap(void **state)
{
    g.body_max = 8;
    start_server();
    struct cli c;
    cli_connect(&c);
    /* Declared over the cap: the handler hears at once; the small unread rest is skipped. */
    cli_send(&c, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(g.body_err, QR_ERR_TOO_LARGE);
    assert_error(&R, 413, "request_too_large", "body over cap");
    assert_header(&R, "connection", NULL);
    cli_send(&c, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    cli_close(&c);

    /* Chunked past the cap: 413, and the connection closes (the rest cannot be framed). */
    g.body_err = QR_OK;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n"
                 "6\r\nghijkl\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(g.body_err, QR_ERR_TOO_LARGE);
    assert_int_equal(R.status, 413);
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&c, 1000));
    cli_close(&c);

    /* A malformed chunked body reaches the handler as QR_ERR_PARSE. */
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(g.body_err, QR_ERR_PARSE);
    assert_int_equal(R.status, 400);
    assert_header(&R, "connection", "close");
    cli_close(&c);
}

static void test_expect_continue(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    assert_true(cli_fill(&c, 1000));
    assert_string_equal(c.buf, "HTTP/1.1 100 Continue\r\n\r\n");
    c.len = 0;
    c.buf[0] = '\0';
    cli_send(&c, "ok");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_memory_equal(R.body, "ok", 2);
    cli_close(&c);

    /* Refused without reading: no 100, and the connection closes. */
    cli_connect(&c);
    cli_send(&c, "POST /early HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_true(!strncmp(R.head, "HTTP/1.1 401 ", 13));
    assert_error(&R, 401, "unauthorized", "no key");
    assert_header(&R, "connection", "close");
    cli_close(&c);
}

static void test_unread_body_discard_or_close(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /early HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789"
                 "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 401);
    assert_header(&R, "connection", NULL);
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 200);
    cli_close(&c);

    cli_connect(&c);
    cli_send(&c, "POST /early HTTP/1.1\r\nContent-Length: 100000\r\n\r\n0123");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 401);
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&c, 1500));
    cli_close(&c);
}

static void test_head_has_no_body(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "HEAD /hello HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response_ex(&c, &R, 1000, true));
    assert_int_equal(R.status, 200);
    assert_header(&R, "content-length", "5");
    /* The very next bytes are the second response, not a body. */
    assert_true(cli_response(&c, &R, 1000));
    assert_true(!strncmp(R.head, "HTTP/1.1 200", 12));
    assert_memory_equal(R.body, "hello", 5);
    cli_close(&c);
}

static void test_client_close_mid_stream(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /stream HTTP/1.1\r\n\r\n");
    assert_true(cli_fill(&c, 1000));
    assert_non_null(g.held);
    assert_int_equal(qr_http_server_in_flight(g.srv), 1);
    close(c.fd);
    c.fd = -1;
    uint64_t end = mono_ms() + 1000;
    while (g.closed == 0 && mono_ms() < end)
        pump(-1, 5);
    assert_int_equal(g.closed, 1);
    assert_null(g.held);
    assert_int_equal(qr_http_server_in_flight(g.srv), 0);
    assert_int_equal(qr_http_server_connections(g.srv), 0);
    assert_int_equal(g.naccess, 1);
    assert_true(g.access[0].aborted);
    assert_int_equal(g.access[0].status, 200);
    cli_close(&c);
}

static void test_body_read_timeout(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\n012");
    assert_true(cli_response(&c, &R, 1500));
    assert_error(&R, 408, "request_timeout", "request body not received in time");
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&c, 1000));
    assert_int_equal(qr_http_server_in_flight(g.srv), 0);
    assert_int_equal(g.naccess, 1);
    assert_int_equal(g.access[0].status, 408);
    assert_int_equal(g.access[0].bytes_in, 3);
    cli_close(&c);
}

static void test_stop_accepting(void **state)
{
    start_server();
    struct cli idle, busy, late;
    cli_connect(&idle);
    cli_send(&idle, "GET /hello HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&idle, &R, 1000));
    cli_connect(&busy);
    cli_send(&busy, "GET /slow HTTP/1.1\r\n\r\n");
    pump_for(20);
    assert_non_null(g.held);

    qr_http_server_stop_accepting(g.srv);
    assert_true(cli_wait_eof(&idle, 1000));
    assert_int_equal(idle.len, 0);
    assert_int_equal(qr_http_server_in_flight(g.srv), 1);
    assert_int_equal(qr_http_server_connections(g.srv), 1);
    assert_int_equal(cli_connect_rc(&late), ECONNREFUSED);
    cli_close(&late);

    qr_http_resp_send(g.held, 200, "text/plain", "done", 4);
    g.held = NULL;
    assert_true(cli_response(&busy, &R, 1000));
    assert_int_equal(R.status, 200);
    assert_memory_equal(R.body, "done", 4);
    assert_header(&R, "connection", "close");
    assert_true(cli_wait_eof(&busy, 1000));
    assert_int_equal(g.closed, 0);
    cli_close(&idle);
    cli_close(&busy); /* the server lingers until the client's FIN */
    pump_for(20);
    assert_int_equal(qr_http_server_connections(g.srv), 0);
    assert_int_equal(qr_http_server_in_flight(g.srv), 0);
}

static void test_access_once_per_request(void **state)
{
    start_server();
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /hello HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\nGET / HTTP/9.9\r\n\r\n");
    assert_true(cli_response(&c, &R, 1000));
    assert_true(cli_response(&c, &R, 1000));
    assert_error(&R, 404, "not_found", "no route \\\"x\\\"");
    assert_true(cli_response(&c, &R, 1000));
    assert_int_equal(R.status, 400);
    assert_true(cli_wait_eof(&c, 1000));
    pump_for(20);
    assert_int_equal(g.naccess, 3);
    assert_int_equal(g.access[0].status, 200);
    assert_int_equal(g.access[1].status, 404);
    assert_string_equal(g.access[1].path, "/nope");
    assert_int_equal(g.access[2].status, 400);
    assert_string_not_equal(g.access[0].id, g.access[1].id);
    cli_close(&c);
}

static void test_back_pressure_drain(void **state)
{
    start_server();
    g.big_total = 1 << 20;
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /big HTTP/1.1\r\n\r\n");
    assert_true(cli_response(&c, &R, 1500));
    assert_int_equal(R.status, 200);
    assert_int_equal(R.body_len, g.big_total);
    assert_true(g.drains > 0);
    assert_int_equal(g.big_sent, g.big_total);
    pump_for(10);
    assert_int_equal(g.naccess, 1);
    assert_int_equal(g.access[0].bytes_out, g.big_total);
    cli_close(&c);
}

static void test_write_timeout_closes(void **state)
{
    start_server();
    g.big_total = (size_t) 256 << 20; /* far more than the socket buffers hold */
    struct cli c;
    cli_connect(&c);
    cli_send(&c, "GET /big HTTP/1.1\r\n\r\n");
    /* Never read: the server must give up after write_timeout and tell the handler. */
    uint64_t end = mono_ms() + 1800;
    while (g.closed == 0 && mono_ms() < end)
        pump(-1, 5);
    assert_int_equal(g.closed, 1);
    assert_true(g.big_sent < g.big_total);
    assert_int_equal(qr_http_server_connections(g.srv), 0);
    assert_true(g.access[0].aborted);
    cli_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_simple_200, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_accessors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keepalive_two_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipelining_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunked_stream_incremental, setup, teardown),
        cmocka_unit_test_setup_teardown(test_chunk_size_line_hex, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http10_close_delimited_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_400_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_framing_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_431, setup, teardown),
        cmocka_unit_test_setup_teardown(test_408_header_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_keepalive_silent_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_503_over_max_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_body_content_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_body_chunked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_body_over_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expect_continue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unread_body_discard_or_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_head_has_no_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_close_mid_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_read_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_accepting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_access_once_per_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_back_pressure_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_timeout_closes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
