/* Tests for the native HTTP/1.1 upstream client (core/http_native.c) behind the qr_http_client
 * interface: every case of test_http_client.c, run with plain http:// URLs that the client sends
 * through the native path (each start asserts it), plus what only the native client does:
 * close-delimited HTTP/1.0 bodies, Connection: close, malformed chunks, byte-at-a-time responses,
 * the retry on a pooled connection the server closed, and the curl-only
 * switch.
 *
 * Copied from test_http_client.c: a scripted HTTP/1.1 server in the same event loop.
 * The server is raw evconnlistener + bufferevent so a test can send exactly the bytes it wants:
 * interim responses, chunks spaced out by timers, a body cut off mid-chunk, or no answer at all.
 * Callbacks only record what happened (cmocka must not longjmp through libcurl); the assertions
 * run once the loop has settled. Every case is bounded by a deadline well under two seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/http_client.h"
#include "core/http_native.h"

#include "scripted_server.h"

struct rec {
    struct fx *f;
    struct qr_http_call *call;
    int n_response;
    int status;
    struct qr_buf heads; /* "Name: Value\n" per header, as delivered */
    size_t n_headers;
    int n_data;
    struct qr_buf body;
    int n_done;
    enum qr_err err;
    char diag[512];
    bool done_inside_start; /* on_done ran while qr_http_call_start was on the stack */
    bool in_start;
    int64_t t_first_data_ms, t_done_ms;
    /* behaviours */
    bool pause_in_first_data; /* pause from inside on_data, resume 100 ms later from the loop */
    bool refuse_after_resume; /* with pause_in_first_data: on_data returns false once resumed */
    bool refuse_data;         /* on_data returns false */
    bool cancel_in_data;      /* on_data cancels its own call and returns false */
    bool refuse_response;
    struct rec *cancel_other;  /* first on_data cancels that rec's call */
    struct rec *start_other;   /* first on_data starts a call for that rec */
    struct rec *start_in_done; /* on_done starts a GET /again for that rec */
    bool paused;
    bool resumed;
    int n_data_while_paused;
    struct event *ev; /* per-test timer driven from the loop */
};

struct fx {
    struct event_base *base;
    struct tsrv srv;
    struct qr_http_client *client;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void rec_init(struct rec *r, struct fx *f)
{
    memset(r, 0, sizeof(*r));
    r->f = f;
    r->err = QR_ERR__COUNT;
    qr_buf_init(&r->heads, 0);
    qr_buf_init(&r->body, 0);
}

static void rec_cleanup(struct rec *r)
{
    if (r->ev)
        event_free(r->ev);
    qr_buf_cleanup(&r->heads);
    qr_buf_cleanup(&r->body);
}

static bool rec_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                         size_t n, void *arg)
{
    struct rec *r = arg;
    r->n_response++;
    r->status = status;
    r->n_headers = n;
    for (size_t i = 0; i < n; i++)
        qr_buf_appendf(&r->heads, "%.*s: %.*s\n", (int) h[i].name.len, h[i].name.ptr,
                       (int) h[i].value.len, h[i].value.ptr);
    return !r->refuse_response;
}

static enum qr_err start_call(struct fx *f, struct rec *r, const char *method, const char *url,
                              const struct qr_http_header *headers, size_t n_headers,
                              struct qr_slice body, uint64_t timeout_ms);
static char *url_for(struct fx *f, const char *path);

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    r->paused = false;
    r->resumed = true;
    qr_http_call_resume(r->call);
}

static bool rec_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct rec *r = arg;
    if (r->n_data++ == 0)
        r->t_first_data_ms = now_ms();
    if (r->paused)
        r->n_data_while_paused++;
    qr_buf_append(&r->body, data, len);
    if (r->cancel_other && r->n_data == 1 && r->cancel_other->call) {
        qr_http_call_cancel(r->cancel_other->call);
        r->cancel_other->call = NULL;
    }
    if (r->start_other && r->n_data == 1)
        start_call(r->f, r->start_other, "GET", url_for(r->f, "/second"), NULL, 0,
                   (struct qr_slice){NULL, 0}, 2000);
    if (r->cancel_in_data) {
        qr_http_call_cancel(call);
        return false;
    }
    if (r->refuse_data || (r->refuse_after_resume && r->resumed))
        return false;
    if (r->pause_in_first_data && r->n_data == 1) {
        struct timeval tv = {0, 100 * 1000};
        qr_http_call_pause(call);
        r->paused = true;
        r->ev = evtimer_new(r->f->base, resume_cb, r);
        evtimer_add(r->ev, &tv);
    }
    return true;
}

static void rec_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                     void *arg)
{
    struct rec *r = arg;
    r->n_done++;
    r->err = err;
    r->t_done_ms = now_ms();
    r->done_inside_start = r->done_inside_start || r->in_start;
    snprintf(r->diag, sizeof(r->diag), "%s", diag ? diag->msg : "");
    r->call = NULL;
    if (r->start_in_done)
        start_call(r->f, r->start_in_done, "GET", url_for(r->f, "/again"), NULL, 0,
                   (struct qr_slice){NULL, 0}, 2000);
}

static enum qr_err start_call(struct fx *f, struct rec *r, const char *method, const char *url,
                              const struct qr_http_header *headers, size_t n_headers,
                              struct qr_slice body, uint64_t timeout_ms)
{
    struct qr_http_call_opts o = {
        .method = method,
        .url = url,
        .headers = headers,
        .n_headers = n_headers,
        .body = body,
        .connect_timeout_ms = 1000,
        .timeout_ms = timeout_ms,
        .on_response = rec_response,
        .on_data = rec_data,
        .on_done = rec_done,
        .arg = r,
    };
    struct qr_diag diag = {{0}};
    r->in_start = true;
    enum qr_err err = qr_http_call_start(f->client, &o, &diag, &r->call);
    r->in_start = false;
    if (err == QR_OK) /* every case here must take the native path */
        assert_int_equal(qr_http_call_impl(r->call), QR_HTTP_IMPL_NATIVE);
    return err;
}

static char *url_for(struct fx *f, const char *path)
{
    static char url[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", f->srv.port, path);
    return url;
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    *(bool *) arg = true;
}

/* Run the loop until *counter reaches target or ms pass. */
static bool run_until(struct fx *f, const int *counter, int target, int ms)
{
    bool expired = false;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct event *deadline = evtimer_new(f->base, deadline_cb, &expired);
    evtimer_add(deadline, &tv);
    while ((!counter || *counter < target) && !expired)
        event_base_loop(f->base, EVLOOP_ONCE);
    event_free(deadline);
    return !counter || *counter >= target;
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct qr_diag diag = {{0}};
    f->base = event_base_new();
    tsrv_start(&f->srv, f->base);
    assert_int_equal(qr_http_client_new(f->base, &diag, &f->client), QR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    qr_http_client_free(f->client);
    tsrv_stop(&f->srv);
    event_base_free(f->base);
    free(f);
    return 0;
}

static bool has_line(const struct qr_buf *b, const char *line)
{
    return b->ptr && strstr(b->ptr, line) != NULL;
}

/* --- cases ------------------------------------------------------------------------------------ */

static void test_get_200_body_and_headers(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_hello;
    const struct qr_http_header hdrs[] = {
        {QR_SLICE_LIT("Accept"), QR_SLICE_LIT("application/json")},
        {QR_SLICE_LIT("X-Request-ID"), QR_SLICE_LIT("abc123")},
    };
    assert_int_equal(start_call(f, &r, "GET", url_for(f, "/api/tags"), hdrs, 2,
                                (struct qr_slice){NULL, 0}, 2000),
                     QR_OK);
    assert_int_equal(r.n_done, 0); /* never from inside start */
    assert_int_equal(qr_http_client_in_flight(f->client), 1);
    assert_true(run_until(f, &r.n_done, 1, 1500));

    assert_int_equal(r.err, QR_OK);
    assert_string_equal(r.diag, "");
    assert_false(r.done_inside_start);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.n_headers, 4);
    assert_string_equal(r.heads.ptr, "Content-Type: text/plain\n"
                                     "X-Mixed-Case: Some Value\n"
                                     "X-Empty: \n"
                                     "Content-Length: 11\n");
    assert_int_equal(r.body.len, 11);
    assert_memory_equal(r.body.ptr, "hello world", 11);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);

    /* what the server saw */
    assert_string_equal(f->srv.last_method, "GET");
    assert_string_equal(f->srv.last_target, "/api/tags");
    assert_true(has_line(&f->srv.last_head, "\r\nAccept: application/json\r\n"));
    assert_true(has_line(&f->srv.last_head, "\r\nX-Request-ID: abc123\r\n"));
    assert_false(has_line(&f->srv.last_head, "Expect"));
    assert_false(has_line(&f->srv.last_head, "Accept-Encoding"));
    assert_true(has_line(&f->srv.last_head, "GET /api/tags HTTP/1.1\r\n"));
    rec_cleanup(&r);
}

static void test_post_body_byte_exact(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_echo;
    enum { N = 70000 }; /* over curl's 64 KiB Expect threshold; binary, NULs and CRLFs included */
    char *body = malloc(N);
    for (size_t i = 0; i < N; i++)
        body[i] = (char) ((i * 31 + 7) % 256);
    const struct qr_http_header hdrs[] = {
        {QR_SLICE_LIT("Content-Type"), QR_SLICE_LIT("application/octet-stream")},
        {QR_SLICE_LIT("X-Empty"), QR_SLICE_LIT("")},
    };
    assert_int_equal(start_call(f, &r, "POST", url_for(f, "/api/chat"), hdrs, 2,
                                (struct qr_slice){body, N}, 2000),
                     QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.status, 201);
    assert_string_equal(f->srv.last_method, "POST");
    assert_int_equal(f->srv.last_body.len, N);
    assert_memory_equal(f->srv.last_body.ptr, body, N);
    assert_int_equal(r.body.len, N);
    assert_memory_equal(r.body.ptr, body, N);
    assert_true(has_line(&f->srv.last_head, "\r\nContent-Type: application/octet-stream\r\n"));
    assert_true(has_line(&f->srv.last_head, "\r\nX-Empty:"));
    assert_true(has_line(&f->srv.last_head, "\r\nContent-Length: 70000\r\n"));
    assert_false(has_line(&f->srv.last_head, "Expect"));
    assert_false(has_line(&f->srv.last_head, "x-www-form-urlencoded"));
    free(body);
    rec_cleanup(&r);
}

static void test_post_without_content_type_gets_none(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_echo;
    assert_int_equal(start_call(f, &r, "POST", url_for(f, "/x"), NULL, 0, QR_SLICE_LIT("{}"), 2000),
                     QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_false(has_line(&f->srv.last_head, "Content-Type"));
    assert_int_equal(f->srv.last_body.len, 2);
    rec_cleanup(&r);
}

static void test_delete_with_body(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_echo;
    const struct qr_http_header hdrs[] = {
        {QR_SLICE_LIT("Content-Type"), QR_SLICE_LIT("application/json")},
    };
    assert_int_equal(start_call(f, &r, "DELETE", url_for(f, "/api/delete"), hdrs, 1,
                                QR_SLICE_LIT("{\"model\":\"tiny\"}"), 2000),
                     QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_string_equal(f->srv.last_method, "DELETE");
    assert_int_equal(f->srv.last_body.len, 16);
    assert_memory_equal(f->srv.last_body.ptr, "{\"model\":\"tiny\"}", 16);
    assert_int_equal(r.status, 201);
    rec_cleanup(&r);
}

static void test_delete_without_body(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_echo;
    assert_int_equal(start_call(f, &r, "DELETE", url_for(f, "/api/x"), NULL, 0,
                                (struct qr_slice){NULL, 0}, 2000),
                     QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_string_equal(f->srv.last_method, "DELETE");
    assert_int_equal(f->srv.last_body.len, 0);
    rec_cleanup(&r);
}

static void test_streamed_chunks_arrive_before_end(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_stream;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/stream"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_data, 1, 1500));
    /* first chunk is here while the server is still waiting on its 200 ms timer */
    assert_int_equal(r.n_done, 0);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.body.len, 5);
    assert_memory_equal(r.body.ptr, "first", 5);
    assert_int_equal(f->srv.n_late_chunks, 0);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_true(r.n_data >= 2);
    assert_int_equal(r.body.len, 11);
    assert_memory_equal(r.body.ptr, "firstsecond", 11);
    assert_true(r.t_done_ms - r.t_first_data_ms >= 150);
    assert_true(has_line(&r.heads, "Transfer-Encoding: chunked\n"));
    rec_cleanup(&r);
}

static void check_big_body(const struct rec *r)
{
    assert_int_equal(r->body.len, BIG_LEN);
    for (size_t i = 0; i < BIG_LEN; i++)
        if (r->body.ptr[i] != big_byte(i))
            fail_msg("body differs at byte %zu", i);
}

static void test_pause_in_callback_then_resume(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    r.pause_in_first_data = true;
    f->srv.on_request = h_big;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/big"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_true(r.resumed);
    assert_int_equal(r.n_data_while_paused, 0);
    assert_true(r.n_data > 1);
    assert_true(r.t_done_ms - r.t_first_data_ms >= 90);
    check_big_body(&r);
    rec_cleanup(&r);
}

static void pause_from_loop_cb(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    struct timeval tv = {0, 300 * 1000};
    qr_http_call_pause(r->call);
    r->paused = true;
    evtimer_assign(r->ev, r->f->base, resume_cb, r);
    evtimer_add(r->ev, &tv);
}

static void test_pause_from_loop_holds_data_until_resume(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_stream; /* "first" now, "second" after 200 ms */
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/stream"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_data, 1, 1500));
    struct timeval tv = {0, 10 * 1000};
    r.ev = evtimer_new(f->base, pause_from_loop_cb, &r);
    evtimer_add(r.ev, &tv);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_true(r.resumed);
    assert_int_equal(r.n_data_while_paused, 0);
    assert_true(r.t_done_ms - r.t_first_data_ms >= 290); /* held back until the resume */
    assert_int_equal(r.body.len, 11);
    assert_memory_equal(r.body.ptr, "firstsecond", 11);
    rec_cleanup(&r);
}

static void test_refusing_data_after_resume_cancels(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    r.pause_in_first_data = true;
    r.refuse_after_resume = true;
    f->srv.on_request = h_big;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/big"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_CANCELLED);
    assert_int_equal(r.n_done, 1);
    assert_int_equal(r.n_data, 2); /* the first chunk, then the refused one */
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    rec_cleanup(&r);
}

static void test_404_passed_through(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_404;
    assert_int_equal(
        start_call(f, &r, "POST", url_for(f, "/api/show"), NULL, 0, QR_SLICE_LIT("{}"), 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.status, 404);
    assert_true(has_line(&r.heads, "Content-Type: application/json\n"));
    assert_int_equal(r.body.len, 24);
    assert_memory_equal(r.body.ptr, "{\"error\":\"no such model\"}", 24);
    rec_cleanup(&r);
}

static void test_connection_refused(void **state)
{
    struct fx *f = *state;
    struct rec r;
    char url[256], want[256];
    rec_init(&r, f);

    /* a port nobody listens on: bind, read the port, close */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    assert_int_equal(bind(fd, (struct sockaddr *) &sin, sizeof(sin)), 0);
    getsockname(fd, (struct sockaddr *) &sin, &len);
    close(fd);
    unsigned port = ntohs(sin.sin_port);

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/api/chat?key=t0ken#frag", port);
    assert_int_equal(start_call(f, &r, "POST", url, NULL, 0, QR_SLICE_LIT("{}"), 2000), QR_OK);
    assert_int_equal(r.n_done, 0);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_false(r.done_inside_start);
    assert_int_equal(r.err, QR_ERR_UPSTREAM);
    assert_int_equal(r.n_response, 0);
    snprintf(want, sizeof(want),
             "upstream 'http://127.0.0.1:%u/api/chat': couldn't connect to server", port);
    assert_true(strncmp(r.diag, want, strlen(want)) == 0);
    assert_null(strstr(r.diag, "t0ken"));
    assert_null(strstr(r.diag, "frag"));
    rec_cleanup(&r);
}

static void test_timeout(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_silent;
    int64_t t0 = now_ms();
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/slow"), NULL, 0, (struct qr_slice){NULL, 0}, 200),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    int64_t took = r.t_done_ms - t0;
    assert_int_equal(r.err, QR_ERR_UPSTREAM_TIMEOUT);
    assert_true(took >= 180 && took < 1000);
    assert_int_equal(r.n_response, 0);
    assert_non_null(strstr(r.diag, "upstream 'http://127.0.0.1:"));
    assert_non_null(strstr(r.diag, "timeout was reached"));
    rec_cleanup(&r);
}

static void test_early_close_mid_chunked_body(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_cut;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/cut"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_UPSTREAM);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.status, 200);
    assert_true(r.body.len >= 7);
    assert_memory_equal(r.body.ptr, "partial", 7);
    assert_true(strncmp(r.diag, "upstream 'http://127.0.0.1:", 27) == 0);
    rec_cleanup(&r);
}

static void test_on_data_false_cancels(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    r.refuse_data = true;
    f->srv.on_request = h_endless;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/endless"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_CANCELLED);
    assert_int_equal(r.n_data, 1);
    assert_int_equal(r.n_done, 1);
    run_until(f, NULL, 0, 100);
    assert_int_equal(r.n_data, 1);
    assert_int_equal(f->srv.n_conns, 0); /* the upstream connection was closed, not pooled */
    rec_cleanup(&r);
}

static void test_on_response_false_cancels(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    r.refuse_response = true;
    f->srv.on_request = h_hello;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_CANCELLED);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.n_data, 0);
    rec_cleanup(&r);
}

static void cancel_cb(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    qr_http_call_cancel(r->call);
    r->call = NULL;
}

static void test_cancel_mid_stream(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_endless;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/endless"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_data, 3, 1500));
    r.ev = evtimer_new(f->base, cancel_cb, &r);
    struct timeval tv = {0, 5 * 1000};
    evtimer_add(r.ev, &tv);
    run_until(f, NULL, 0, 30);
    assert_null(r.call);
    int n_data = r.n_data;
    run_until(f, NULL, 0, 200); /* the server keeps ticking: nothing may reach us */
    assert_int_equal(r.n_data, n_data);
    assert_int_equal(r.n_done, 0);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    assert_int_equal(f->srv.n_conns, 0);
    rec_cleanup(&r);
}

static void test_cancel_inside_on_data(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    r.cancel_in_data = true;
    f->srv.on_request = h_endless;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/endless"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_data, 1, 1500));
    run_until(f, NULL, 0, 150);
    assert_int_equal(r.n_data, 1);
    assert_int_equal(r.n_done, 0);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    assert_int_equal(f->srv.n_conns, 0);
    rec_cleanup(&r);
}

static void test_cancel_before_loop_runs(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_hello;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    qr_http_call_cancel(r.call);
    run_until(f, NULL, 0, 100);
    assert_int_equal(r.n_response + r.n_data + r.n_done, 0);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    assert_int_equal(f->srv.n_requests, 0);
    rec_cleanup(&r);
}

static void test_cancel_other_call_from_callback(void **state)
{
    struct fx *f = *state;
    struct rec a, b;
    rec_init(&a, f);
    rec_init(&b, f);
    f->srv.on_request = h_endless;
    assert_int_equal(
        start_call(f, &b, "GET", url_for(f, "/b"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &b.n_data, 1, 1500));
    a.cancel_other = &b;
    a.refuse_data = true;
    assert_int_equal(
        start_call(f, &a, "GET", url_for(f, "/a"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &a.n_done, 1, 1500));
    int b_data = b.n_data;
    run_until(f, NULL, 0, 100);
    assert_int_equal(a.err, QR_ERR_CANCELLED);
    assert_null(b.call);
    assert_int_equal(b.n_data, b_data);
    assert_int_equal(b.n_done, 0);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    assert_int_equal(f->srv.n_conns, 0);
    rec_cleanup(&a);
    rec_cleanup(&b);
}

static void test_start_call_from_callback(void **state)
{
    struct fx *f = *state;
    struct rec a, b;
    rec_init(&a, f);
    rec_init(&b, f);
    a.start_other = &b;
    f->srv.on_request = h_stream;
    assert_int_equal(
        start_call(f, &a, "GET", url_for(f, "/a"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &b.n_done, 1, 1500));
    assert_true(run_until(f, &a.n_done, 1, 1500));
    assert_int_equal(a.err, QR_OK);
    assert_int_equal(b.err, QR_OK);
    assert_false(b.done_inside_start);
    assert_memory_equal(a.body.ptr, "firstsecond", 11);
    assert_memory_equal(b.body.ptr, "firstsecond", 11);
    assert_string_equal(f->srv.last_target, "/second");
    rec_cleanup(&a);
    rec_cleanup(&b);
}

static void h_head(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nETag: \"v1\"\r\n\r\n");
}

static void test_head_request(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_head;
    assert_int_equal(
        start_call(f, &r, "HEAD", url_for(f, "/blob"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_string_equal(f->srv.last_method, "HEAD");
    assert_int_equal(r.status, 200);
    assert_string_equal(r.heads.ptr, "Content-Length: 1234\nETag: \"v1\"\n");
    assert_int_equal(r.n_data, 0);
    rec_cleanup(&r);
}

static void test_twenty_concurrent_calls(void **state)
{
    enum { N = 20 };
    struct fx *f = *state;
    struct rec r[N];
    char path[N][32];
    int n_done = 0;
    f->srv.on_request = h_path;
    for (int i = 0; i < N; i++) {
        rec_init(&r[i], f);
        snprintf(path[i], sizeof(path[i]), "/call/%d", i);
        assert_int_equal(start_call(f, &r[i], "GET", url_for(f, path[i]), NULL, 0,
                                    (struct qr_slice){NULL, 0}, 2000),
                         QR_OK);
    }
    assert_int_equal(qr_http_client_in_flight(f->client), N);
    int64_t deadline = now_ms() + 1800;
    while (n_done < N && now_ms() < deadline) {
        run_until(f, NULL, 0, 20);
        n_done = 0;
        for (int i = 0; i < N; i++)
            n_done += r[i].n_done;
    }
    assert_int_equal(n_done, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].err, QR_OK);
        assert_int_equal(r[i].status, 200);
        assert_int_equal(r[i].body.len, strlen(path[i]));
        assert_memory_equal(r[i].body.ptr, path[i], strlen(path[i]));
        rec_cleanup(&r[i]);
    }
    assert_int_equal(f->srv.n_requests, N);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
}

static void test_connection_reused(void **state)
{
    struct fx *f = *state;
    f->srv.on_request = h_hello;
    for (int i = 0; i < 3; i++) {
        struct rec r;
        rec_init(&r, f);
        assert_int_equal(start_call(f, &r, "GET", url_for(f, "/again"), NULL, 0,
                                    (struct qr_slice){NULL, 0}, 2000),
                         QR_OK);
        assert_true(run_until(f, &r.n_done, 1, 1500));
        assert_int_equal(r.err, QR_OK);
        rec_cleanup(&r);
    }
    assert_int_equal(f->srv.n_requests, 3);
    assert_int_equal(f->srv.n_accepted, 1);
}

static void test_interim_response_skipped(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_interim;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.heads.ptr, "X-Final: yes\nX-Folded: first second\nContent-Length: 2\n");
    assert_memory_equal(r.body.ptr, "ok", 2);
    rec_cleanup(&r);
}

static void test_no_body_response_at_completion(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_204;
    assert_int_equal(
        start_call(f, &r, "DELETE", url_for(f, "/x"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.status, 204);
    assert_string_equal(r.heads.ptr, "X-Trace: abc\n");
    assert_int_equal(r.n_data, 0);
    rec_cleanup(&r);
}

static void test_huge_response_head_is_an_error(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_huge_head;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_UPSTREAM);
    assert_int_equal(r.n_response, 0);
    rec_cleanup(&r);
}

static void test_bad_arguments_refused_at_start(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    const struct qr_http_header crlf[] = {
        {QR_SLICE_LIT("X-Evil"), QR_SLICE_LIT("a\r\nInjected: yes")},
    };
    const struct qr_http_header colon[] = {
        {QR_SLICE_LIT("X:Evil"), QR_SLICE_LIT("a")},
    };
    struct qr_slice none = {NULL, 0};
    r.call = NULL;
    assert_int_equal(start_call(f, &r, "GET", "ftp://127.0.0.1/x", NULL, 0, none, 0),
                     QR_ERR_INVALID);
    assert_int_equal(start_call(f, &r, "GE T", url_for(f, "/"), NULL, 0, none, 0), QR_ERR_INVALID);
    assert_int_equal(start_call(f, &r, "", url_for(f, "/"), NULL, 0, none, 0), QR_ERR_INVALID);
    assert_int_equal(start_call(f, &r, "GET", url_for(f, "/"), crlf, 1, none, 0), QR_ERR_INVALID);
    assert_int_equal(start_call(f, &r, "GET", url_for(f, "/"), colon, 1, none, 0), QR_ERR_INVALID);
    assert_int_equal(start_call(f, &r, "HEAD", url_for(f, "/"), NULL, 0, QR_SLICE_LIT("x"), 0),
                     QR_ERR_INVALID);
    assert_int_equal(
        start_call(f, &r, "POST", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 3}, 0),
        QR_ERR_INVALID);
    assert_null(r.call);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
    run_until(f, NULL, 0, 20);
    assert_int_equal(r.n_done, 0);
    rec_cleanup(&r);
}

static void test_free_client_with_calls_in_flight(void **state)
{
    struct fx *f = *state;
    struct rec r[3];
    f->srv.on_request = h_endless;
    for (int i = 0; i < 3; i++) {
        rec_init(&r[i], f);
        assert_int_equal(start_call(f, &r[i], "GET", url_for(f, "/endless"), NULL, 0,
                                    (struct qr_slice){NULL, 0}, 2000),
                         QR_OK);
    }
    assert_true(run_until(f, &r[2].n_data, 1, 1500));
    qr_http_client_free(f->client); /* no callbacks, no leaks (ASan) */
    f->client = NULL;
    run_until(f, NULL, 0, 50);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].n_done, 0);
        rec_cleanup(&r[i]);
    }
    assert_int_equal(f->srv.n_conns, 0);
}

/* --- native-only cases ------------------------------------------------------------------------ */

static void h_http10_rest(struct tconn *tc)
{
    tsend(tc, "line2\n");
    tclose_after_flush(tc);
}

static void h_http10(struct tconn *tc)
{
    tsend(tc, "HTTP/1.0 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\nline1\n");
    tlater(tc, 50, h_http10_rest);
}

static void test_close_delimited_http10_body(void **state)
{
    struct fx *f = *state;
    struct rec r, r2;
    rec_init(&r, f);
    rec_init(&r2, f);
    f->srv.on_request = h_http10;
    assert_int_equal(start_call(f, &r, "POST", url_for(f, "/v1/chat/completions"), NULL, 0,
                                QR_SLICE_LIT("{}"), 2000),
                     QR_OK);
    assert_true(run_until(f, &r.n_data, 1, 1500));
    assert_int_equal(r.n_done, 0); /* first line before the server closed */
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.status, 200);
    assert_true(r.n_data >= 2);
    assert_int_equal(r.body.len, 12);
    assert_memory_equal(r.body.ptr, "line1\nline2\n", 12);
    /* a close-delimited connection is never pooled */
    assert_int_equal(start_call(f, &r2, "POST", url_for(f, "/v1/chat/completions"), NULL, 0,
                                QR_SLICE_LIT("{}"), 2000),
                     QR_OK);
    assert_true(run_until(f, &r2.n_done, 1, 1500));
    assert_int_equal(r2.err, QR_OK);
    assert_int_equal(f->srv.n_accepted, 2);
    rec_cleanup(&r);
    rec_cleanup(&r2);
}

static void h_conn_close(struct tconn *tc)
{
    /* the server keeps the socket open: the client must not reuse it anyway */
    tsend(tc, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
}

static void test_connection_close_not_reused(void **state)
{
    struct fx *f = *state;
    f->srv.on_request = h_conn_close;
    for (int i = 0; i < 2; i++) {
        struct rec r;
        rec_init(&r, f);
        assert_int_equal(
            start_call(f, &r, "GET", url_for(f, "/x"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
            QR_OK);
        assert_true(run_until(f, &r.n_done, 1, 1500));
        assert_int_equal(r.err, QR_OK);
        assert_memory_equal(r.body.ptr, "ok", 2);
        rec_cleanup(&r);
    }
    run_until(f, NULL, 0, 20);
    assert_int_equal(f->srv.n_accepted, 2);
    assert_int_equal(f->srv.n_conns, 0); /* the client closed both */
}

static void h_bad_chunk(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\nzz\r\nxx\r\n");
}

static void test_malformed_chunk_is_an_error(void **state)
{
    struct fx *f = *state;
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_bad_chunk;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/bad"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_ERR_UPSTREAM);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.body.len, 5);
    assert_memory_equal(r.body.ptr, "first", 5);
    assert_non_null(strstr(r.diag, "upstream 'http://127.0.0.1:"));
    assert_non_null(strstr(r.diag, "malformed chunked"));
    run_until(f, NULL, 0, 20);
    assert_int_equal(f->srv.n_conns, 0);
    rec_cleanup(&r);
}

static const char drip_text[] = "HTTP/1.1 100 Continue\r\n\r\n"
                                "HTTP/1.1 200 OK\r\nX-A: b\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "5\r\nhello\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n";

static void h_drip_tick(struct tconn *tc)
{
    bufferevent_write(tc->bev, drip_text + tc->step, 1);
    if (drip_text[++tc->step])
        tlater(tc, 1, h_drip_tick);
}

static void h_drip(struct tconn *tc)
{
    if (tc->srv->n_requests > 1) { /* the second request on the same connection */
        h_hello(tc);
        return;
    }
    h_drip_tick(tc);
}

static void test_response_one_byte_at_a_time(void **state)
{
    struct fx *f = *state;
    struct rec r, r2;
    rec_init(&r, f);
    rec_init(&r2, f);
    f->srv.on_request = h_drip;
    assert_int_equal(
        start_call(f, &r, "GET", url_for(f, "/drip"), NULL, 0, (struct qr_slice){NULL, 0}, 3000),
        QR_OK);
    assert_true(run_until(f, &r.n_done, 1, 2500));
    assert_int_equal(r.err, QR_OK);
    assert_int_equal(r.n_response, 1);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.heads.ptr, "X-A: b\nTransfer-Encoding: chunked\n");
    assert_int_equal(r.body.len, 6);
    assert_memory_equal(r.body.ptr, "hello!", 6);
    /* trailers consumed: the connection is reused cleanly */
    assert_int_equal(
        start_call(f, &r2, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &r2.n_done, 1, 1500));
    assert_int_equal(r2.err, QR_OK);
    assert_memory_equal(r2.body.ptr, "hello world", 11);
    assert_int_equal(f->srv.n_accepted, 1);
    rec_cleanup(&r);
    rec_cleanup(&r2);
}

static void h_head_or_hello(struct tconn *tc)
{
    if (strcmp(tc->srv->last_method, "HEAD") == 0)
        h_head(tc);
    else if (strcmp(tc->srv->last_method, "DELETE") == 0)
        h_204(tc);
    else
        h_hello(tc);
}

static void test_head_and_204_keep_the_connection(void **state)
{
    struct fx *f = *state;
    const char *methods[] = {"HEAD", "DELETE", "GET"};
    f->srv.on_request = h_head_or_hello;
    for (int i = 0; i < 3; i++) {
        struct rec r;
        rec_init(&r, f);
        assert_int_equal(start_call(f, &r, methods[i], url_for(f, "/x"), NULL, 0,
                                    (struct qr_slice){NULL, 0}, 2000),
                         QR_OK);
        assert_true(run_until(f, &r.n_done, 1, 1500));
        assert_int_equal(r.err, QR_OK);
        assert_int_equal(r.n_data, i == 2 ? 1 : 0);
        rec_cleanup(&r);
    }
    assert_int_equal(f->srv.n_requests, 3);
    assert_int_equal(f->srv.n_accepted, 1);
}

static void h_hello_then_close(struct tconn *tc)
{
    h_hello(tc); /* framed and keep-alive as far as the client can tell */
    tclose_after_flush(tc);
}

static void test_retry_on_stale_pooled_connection(void **state)
{
    struct fx *f = *state;
    struct rec a, b;
    rec_init(&a, f);
    rec_init(&b, f);
    a.start_in_done = &b; /* b takes the pooled connection before its close is noticed */
    f->srv.on_request = h_hello_then_close;
    assert_int_equal(
        start_call(f, &a, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &a.n_done, 1, 1500));
    assert_true(run_until(f, &b.n_done, 1, 1500));
    assert_int_equal(a.err, QR_OK);
    assert_int_equal(b.err, QR_OK);
    assert_string_equal(b.diag, "");
    assert_memory_equal(b.body.ptr, "hello world", 11);
    assert_int_equal(f->srv.n_accepted, 2);
    assert_int_equal(f->srv.n_requests, 2);
    rec_cleanup(&a);
    rec_cleanup(&b);
}

/* An engine that closes the connection right after each response (llama-server after a stream):
 * a standby connection is opened at once, and the next request goes out on it instead of waiting
 * for a connect. */
static void test_standby_after_close_following_response(void **state)
{
    struct fx *f = *state;
    f->srv.on_request = h_hello_then_close;
    for (int i = 1; i <= 2; i++) {
        struct rec r;
        rec_init(&r, f);
        assert_int_equal(
            start_call(f, &r, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
            QR_OK);
        assert_true(run_until(f, &r.n_done, 1, 1500));
        assert_int_equal(r.err, QR_OK);
        assert_memory_equal(r.body.ptr, "hello world", 11);
        assert_int_equal(f->srv.n_accepted, i); /* request i went out on connection i */
        rec_cleanup(&r);
        /* the close is noticed and the standby connected before any new request */
        assert_true(run_until(f, &f->srv.n_accepted, i + 1, 1500));
    }
    assert_int_equal(f->srv.n_requests, 2);
    assert_int_equal(qr_http_client_in_flight(f->client), 0);
}

static void h_hello_then_cut_head(struct tconn *tc)
{
    if (tc->srv->n_requests == 1) {
        h_hello(tc);
        return;
    }
    tsend(tc, "HTTP/1.1 200 OK\r\nContent-Le");
    tclose_after_flush(tc);
}

static void test_no_retry_after_a_response_byte(void **state)
{
    struct fx *f = *state;
    struct rec a, b;
    rec_init(&a, f);
    rec_init(&b, f);
    f->srv.on_request = h_hello_then_cut_head;
    assert_int_equal(
        start_call(f, &a, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &a.n_done, 1, 1500));
    assert_int_equal(
        start_call(f, &b, "GET", url_for(f, "/"), NULL, 0, (struct qr_slice){NULL, 0}, 2000),
        QR_OK);
    assert_true(run_until(f, &b.n_done, 1, 1500));
    assert_int_equal(a.err, QR_OK);
    assert_int_equal(b.err, QR_ERR_UPSTREAM);
    assert_int_equal(b.n_response, 0);
    assert_non_null(strstr(b.diag, "connection closed before the end of the response head"));
    assert_int_equal(f->srv.n_accepted, 1); /* no second connection: not retried */
    assert_int_equal(f->srv.n_requests, 2);
    rec_cleanup(&a);
    rec_cleanup(&b);
}

static void test_curl_only_switch(void **state)
{
    struct fx *f = *state;
    struct qr_http_client *curl_client = NULL;
    struct qr_diag diag = {{0}};
    struct rec r;
    rec_init(&r, f);
    f->srv.on_request = h_hello;
    enum qr_err err = qr_http_client_new(f->base, &diag, &curl_client);
    assert_int_equal(err, QR_OK);
    qr_http_client_set_curl_only(curl_client, true);
    struct qr_http_call_opts o = {
        .method = "GET",
        .url = url_for(f, "/"),
        .timeout_ms = 2000,
        .on_response = rec_response,
        .on_data = rec_data,
        .on_done = rec_done,
        .arg = &r,
    };
    assert_int_equal(qr_http_call_start(curl_client, &o, &diag, &r.call), QR_OK);
    assert_int_equal(qr_http_call_impl(r.call), QR_HTTP_IMPL_CURL);
    assert_true(run_until(f, &r.n_done, 1, 1500));
    assert_int_equal(r.err, QR_OK);
    assert_memory_equal(r.body.ptr, "hello world", 11);
    qr_http_client_free(curl_client);
    /* and the default client sends https:// and userinfo URLs to curl too */
    assert_false(qr_http_native_url_supported("https://127.0.0.1/x"));
    assert_false(qr_http_native_url_supported("http://u:p@127.0.0.1/x"));
    assert_false(qr_http_native_url_supported("http://127.0.0.1/a/../b"));
    assert_false(qr_http_native_url_supported("http://127.0.0.1/a b"));
    assert_true(qr_http_native_url_supported("http://localhost:11434/api/chat?x=1#f"));
    assert_true(qr_http_native_url_supported("http://[::1]:8080"));
    assert_true(qr_http_native_url_supported("http://LocalHost:8080"));
    /* a host name would be resolved on the event loop (getaddrinfo blocks): curl's resolver */
    assert_false(qr_http_native_url_supported("http://gpu-box:8000/v1"));
    assert_false(qr_http_native_url_supported("http://localhost.example:8000/v1"));
    assert_false(qr_http_native_url_supported("http://127.0.0.1.nip.io/v1"));
    rec_cleanup(&r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_get_200_body_and_headers),
        T(test_post_body_byte_exact),
        T(test_post_without_content_type_gets_none),
        T(test_delete_with_body),
        T(test_delete_without_body),
        T(test_streamed_chunks_arrive_before_end),
        T(test_pause_in_callback_then_resume),
        T(test_pause_from_loop_holds_data_until_resume),
        T(test_refusing_data_after_resume_cancels),
        T(test_404_passed_through),
        T(test_connection_refused),
        T(test_timeout),
        T(test_early_close_mid_chunked_body),
        T(test_on_data_false_cancels),
        T(test_on_response_false_cancels),
        T(test_cancel_mid_stream),
        T(test_cancel_inside_on_data),
        T(test_cancel_before_loop_runs),
        T(test_cancel_other_call_from_callback),
        T(test_start_call_from_callback),
        T(test_head_request),
        T(test_twenty_concurrent_calls),
        T(test_connection_reused),
        T(test_interim_response_skipped),
        T(test_no_body_response_at_completion),
        T(test_huge_response_head_is_an_error),
        T(test_bad_arguments_refused_at_start),
        T(test_free_client_with_calls_in_flight),
        T(test_close_delimited_http10_body),
        T(test_connection_close_not_reused),
        T(test_malformed_chunk_is_an_error),
        T(test_response_one_byte_at_a_time),
        T(test_head_and_204_keep_the_connection),
        T(test_retry_on_stale_pooled_connection),
        T(test_standby_after_close_following_response),
        T(test_no_retry_after_a_response_byte),
        T(test_curl_only_switch),
    };
    return cmocka_run_group_tests_name("core/http_native", tests, NULL, NULL);
}
