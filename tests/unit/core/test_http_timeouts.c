/* Per-phase upstream timeouts of qr_http_client (core/http_client.h), for both implementations:
 * the native client (plain http:// URLs) and libcurl (the same URLs with the curl-only switch).
 * Each phase has its own error: connect (a listener whose accept queue is full, so the SYN is
 * dropped and the connect hangs), first body byte (no answer at all, or a response head without
 * body), idle (one chunk, then a stall) and total (a body that never ends). Each must fire within
 * [-20 ms, +150 ms] of its setting, measured from the moment its phase began; time a consumer
 * keeps the call paused does not count against the idle bound.
 *
 * The scripted server (scripted_server.h) runs in the test's own event loop; callbacks only
 * record, assertions run after the loop settles. Every case is bounded by a 3 s safety timer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
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

/* the shared scripts (h_silent, h_endless, ...) not used here are fine */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "scripted_server.h"
#pragma GCC diagnostic pop

#define SETTING_MS 250 /* every bound under test */
#define EARLY_MS   20  /* allowed before the setting */
#define LATE_MS    150 /* allowed after the setting */

struct rec {
    struct fx *f;
    struct qr_http_call *call;
    int n_response;
    int n_data;
    struct qr_buf body;
    int n_done;
    enum qr_err err;
    char diag[512];
    int64_t t_start_ms, t_first_data_ms, t_last_data_ms, t_done_ms;
    int pause_ms; /* > 0: pause in the first on_data, resume this much later */
    bool paused;
    struct event *ev;
};

struct fx {
    struct event_base *base;
    struct tsrv srv;
    struct qr_http_client *client;
    struct event *guard; /* safety stop */
    bool curl;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct rec *r = arg;
    r->paused = false;
    if (r->call)
        qr_http_call_resume(r->call);
}

static bool rec_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                         size_t n, void *arg)
{
    struct rec *r = arg;
    r->n_response++;
    return true;
}

static bool rec_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct rec *r = arg;
    if (r->n_data++ == 0)
        r->t_first_data_ms = now_ms();
    r->t_last_data_ms = now_ms();
    qr_buf_append(&r->body, data, len);
    if (r->pause_ms > 0 && r->n_data == 1) {
        struct timeval tv = {r->pause_ms / 1000, (r->pause_ms % 1000) * 1000};
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
    snprintf(r->diag, sizeof(r->diag), "%s", diag ? diag->msg : "");
    r->call = NULL;
    event_base_loopbreak(r->f->base);
}

static void guard_cb(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(arg);
}

static void fx_init(struct fx *f, bool curl, treq_fn script)
{
    memset(f, 0, sizeof(*f));
    f->curl = curl;
    f->base = event_base_new();
    assert_non_null(f->base);
    tsrv_start(&f->srv, f->base);
    f->srv.on_request = script;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_http_client_new(f->base, &d, &f->client), QR_OK);
    qr_http_client_set_curl_only(f->client, curl);
    f->guard = evtimer_new(f->base, guard_cb, f->base);
    struct timeval tv = {3, 0};
    evtimer_add(f->guard, &tv);
}

static void fx_cleanup(struct fx *f)
{
    qr_http_client_free(f->client);
    tsrv_stop(&f->srv);
    event_free(f->guard);
    event_base_free(f->base);
}

static void rec_init(struct rec *r, struct fx *f)
{
    memset(r, 0, sizeof(*r));
    r->f = f;
    r->err = QR_ERR__COUNT;
    qr_buf_init(&r->body, 0);
}

static void rec_cleanup(struct rec *r)
{
    if (r->call)
        qr_http_call_cancel(r->call);
    if (r->ev)
        event_free(r->ev);
    qr_buf_cleanup(&r->body);
}

/* Start GET url with the given bounds (0 = none) and run the loop until on_done (or 3 s). */
static void run_call(struct fx *f, struct rec *r, uint16_t port, uint32_t connect_ms,
                     uint64_t first_ms, uint64_t idle_ms, uint64_t total_ms)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/x", port);
    struct qr_http_call_opts o = {
        .method = "GET",
        .url = url,
        .connect_timeout_ms = connect_ms,
        .timeout_ms = total_ms,
        .first_byte_timeout_ms = first_ms,
        .idle_timeout_ms = idle_ms,
        .on_response = rec_response,
        .on_data = rec_data,
        .on_done = rec_done,
        .arg = r,
    };
    struct qr_diag d = {{0}};
    r->t_start_ms = now_ms();
    assert_int_equal(qr_http_call_start(f->client, &o, &d, &r->call), QR_OK);
    assert_int_equal(qr_http_call_impl(r->call), f->curl ? QR_HTTP_IMPL_CURL : QR_HTTP_IMPL_NATIVE);
    event_base_dispatch(f->base);
}

static void assert_fired_at(const struct rec *r, int64_t from_ms, int64_t setting_ms)
{
    int64_t took = r->t_done_ms - from_ms;
    print_message("fired after %lld ms (setting %lld ms)\n", (long long) took,
                  (long long) setting_ms);
    if (took < setting_ms - EARLY_MS || took > setting_ms + LATE_MS)
        fail_msg("fired after %lld ms, setting %lld ms (%s)", (long long) took,
                 (long long) setting_ms, r->diag);
}

/* --- server scripts (with h_silent: never answers; h_endless: a chunk every 20 ms) ------------ */

static void h_head_only(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
}

static void h_one_chunk(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
}

static void h_late_second(struct tconn *tc)
{
    tsend(tc, "6\r\nsecond\r\n0\r\n\r\n");
}

/* first chunk, the second 400 ms later, then the end */
static void h_gap(struct tconn *tc)
{
    h_one_chunk(tc);
    tlater(tc, 400, h_late_second);
}

/* --- connect: a listener with a full accept queue --------------------------------------------- */

struct full_listener {
    int lfd;
    int fillers[8];
    uint16_t port;
};

/* listen(fd, 0) holds one connection in its accept queue; with that taken, the kernel drops
 * further SYNs, so a connect hangs until the client gives up. */
static void full_listener_open(struct full_listener *fl)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    fl->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fl->lfd >= 0);
    assert_int_equal(bind(fl->lfd, (struct sockaddr *) &sin, sizeof(sin)), 0);
    assert_int_equal(listen(fl->lfd, 0), 0);
    getsockname(fl->lfd, (struct sockaddr *) &sin, &len);
    fl->port = ntohs(sin.sin_port);
    for (size_t i = 0; i < QR_ARRAY_LEN(fl->fillers); i++) {
        fl->fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(fl->fillers[i] >= 0);
        (void) connect(fl->fillers[i], (struct sockaddr *) &sin, sizeof(sin));
    }
    usleep(50 * 1000); /* the handshakes that fit complete */
}

static void full_listener_close(struct full_listener *fl)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(fl->fillers); i++)
        close(fl->fillers[i]);
    close(fl->lfd);
}

static void connect_timeout(bool curl)
{
    struct fx f;
    struct rec r;
    struct full_listener fl;
    fx_init(&f, curl, h_silent);
    rec_init(&r, &f);
    full_listener_open(&fl);
    run_call(&f, &r, fl.port, SETTING_MS, 5000, 5000, 5000);
    assert_int_equal(r.n_done, 1);
    if (r.err != QR_ERR_UPSTREAM_CONNECT_TIMEOUT)
        fail_msg("err %s (%s)", qr_err_str(r.err), r.diag);
    assert_int_equal(r.n_response, 0);
    assert_fired_at(&r, r.t_start_ms, SETTING_MS);
    assert_string_equal(qr_err_str(r.err), "upstream_connect_timeout");
    assert_int_equal(qr_err_http_status(r.err), 504);
    rec_cleanup(&r);
    full_listener_close(&fl);
    fx_cleanup(&f);
}

static void test_connect_timeout_native(void **state)
{
    connect_timeout(false);
}

static void test_connect_timeout_curl(void **state)
{
    connect_timeout(true);
}

/* --- first byte ------------------------------------------------------------------------------- */

static void first_byte_timeout(bool curl, treq_fn script, int want_responses)
{
    struct fx f;
    struct rec r;
    fx_init(&f, curl, script);
    rec_init(&r, &f);
    run_call(&f, &r, f.srv.port, 1000, SETTING_MS, 5000, 5000);
    assert_int_equal(r.n_done, 1);
    if (r.err != QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT)
        fail_msg("err %s (%s)", qr_err_str(r.err), r.diag);
    assert_int_equal(f.srv.n_requests, 1); /* the request was sent */
    if (want_responses >= 0)
        assert_int_equal(r.n_response, want_responses);
    assert_int_equal(r.n_data, 0);
    assert_fired_at(&r, r.t_start_ms, SETTING_MS); /* loopback: sent at start */
    assert_string_equal(qr_err_str(r.err), "upstream_first_token_timeout");
    rec_cleanup(&r);
    fx_cleanup(&f);
}

static void test_first_byte_timeout_native(void **state)
{
    first_byte_timeout(false, h_silent, 0);
}

static void test_first_byte_timeout_curl(void **state)
{
    first_byte_timeout(true, h_silent, 0);
}

/* A response head is not an answer: engines send it before processing the prompt. (The curl path
 * hands the head over with the first body byte, so on_response does not run there.) */
static void test_first_byte_timeout_after_head_native(void **state)
{
    first_byte_timeout(false, h_head_only, 1);
}

static void test_first_byte_timeout_after_head_curl(void **state)
{
    first_byte_timeout(true, h_head_only, -1);
}

/* --- idle ------------------------------------------------------------------------------------- */

static void idle_timeout(bool curl)
{
    struct fx f;
    struct rec r;
    fx_init(&f, curl, h_one_chunk);
    rec_init(&r, &f);
    run_call(&f, &r, f.srv.port, 1000, 5000, SETTING_MS, 5000);
    assert_int_equal(r.n_done, 1);
    if (r.err != QR_ERR_UPSTREAM_IDLE_TIMEOUT)
        fail_msg("err %s (%s)", qr_err_str(r.err), r.diag);
    assert_int_equal(r.body.len, 5);
    assert_memory_equal(r.body.ptr, "first", 5);
    assert_fired_at(&r, r.t_last_data_ms, SETTING_MS);
    assert_string_equal(qr_err_str(r.err), "upstream_idle_timeout");
    rec_cleanup(&r);
    fx_cleanup(&f);
}

static void test_idle_timeout_native(void **state)
{
    idle_timeout(false);
}

static void test_idle_timeout_curl(void **state)
{
    idle_timeout(true);
}

/* A consumer's pause is not the upstream's stall: paused 600 ms across a 400 ms gap, with a
 * 250 ms idle bound, the answer completes; the same gap unpaused is an idle timeout. */
static void idle_pause(bool curl, int pause_ms, enum qr_err want)
{
    struct fx f;
    struct rec r;
    fx_init(&f, curl, h_gap);
    rec_init(&r, &f);
    r.pause_ms = pause_ms;
    run_call(&f, &r, f.srv.port, 1000, 5000, SETTING_MS, 5000);
    assert_int_equal(r.n_done, 1);
    if (r.err != want)
        fail_msg("err %s, want %s (%s)", qr_err_str(r.err), qr_err_str(want), r.diag);
    if (want == QR_OK) {
        assert_int_equal(r.body.len, 11);
        assert_memory_equal(r.body.ptr, "firstsecond", 11);
    } else {
        assert_fired_at(&r, r.t_first_data_ms, SETTING_MS);
    }
    rec_cleanup(&r);
    fx_cleanup(&f);
}

static void test_idle_gap_fails_native(void **state)
{
    idle_pause(false, 0, QR_ERR_UPSTREAM_IDLE_TIMEOUT);
}

static void test_idle_gap_fails_curl(void **state)
{
    idle_pause(true, 0, QR_ERR_UPSTREAM_IDLE_TIMEOUT);
}

static void test_idle_pause_not_counted_native(void **state)
{
    idle_pause(false, 600, QR_OK);
}

static void test_idle_pause_not_counted_curl(void **state)
{
    idle_pause(true, 600, QR_OK);
}

/* --- total ------------------------------------------------------------------------------------ */

/* Chunks every 20 ms: neither the first byte nor the idle bound fires, the total one does. */
static void total_timeout(bool curl)
{
    struct fx f;
    struct rec r;
    fx_init(&f, curl, h_endless);
    rec_init(&r, &f);
    run_call(&f, &r, f.srv.port, 1000, SETTING_MS, SETTING_MS, 2 * SETTING_MS);
    assert_int_equal(r.n_done, 1);
    if (r.err != QR_ERR_UPSTREAM_TIMEOUT)
        fail_msg("err %s (%s)", qr_err_str(r.err), r.diag);
    assert_true(r.n_data > 5);
    assert_fired_at(&r, r.t_start_ms, 2 * SETTING_MS);
    assert_string_equal(qr_err_str(r.err), "upstream_timeout");
    rec_cleanup(&r);
    fx_cleanup(&f);
}

static void test_total_timeout_native(void **state)
{
    total_timeout(false);
}

static void test_total_timeout_curl(void **state)
{
    total_timeout(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connect_timeout_native),
        cmocka_unit_test(test_connect_timeout_curl),
        cmocka_unit_test(test_first_byte_timeout_native),
        cmocka_unit_test(test_first_byte_timeout_curl),
        cmocka_unit_test(test_first_byte_timeout_after_head_native),
        cmocka_unit_test(test_first_byte_timeout_after_head_curl),
        cmocka_unit_test(test_idle_timeout_native),
        cmocka_unit_test(test_idle_timeout_curl),
        cmocka_unit_test(test_idle_gap_fails_native),
        cmocka_unit_test(test_idle_gap_fails_curl),
        cmocka_unit_test(test_idle_pause_not_counted_native),
        cmocka_unit_test(test_idle_pause_not_counted_curl),
        cmocka_unit_test(test_total_timeout_native),
        cmocka_unit_test(test_total_timeout_curl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
