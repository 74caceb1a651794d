/* The scripted upstream itself: qr-replay plays the transcripts of tests/cases/replay exactly
 * (bodies, headers, chunk timing, every fault), keeps serving while some exchanges stall,
 * records what it received, answers garbage with 4xx instead of dying, and exits 0 on SIGTERM.
 * The proxy tests trust it, so it gets tests of its own. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

static struct qr_child replay;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&replay);
    return 0;
}

static int teardown(void **state)
{
    assert_int_equal(qr_t_stop(&replay, SIGTERM, 5000), 0);
    curl_global_cleanup();
    return 0;
}

static void reset(void)
{
    struct qr_t_resp r;
    qr_t_request("POST", replay.port, "/__replay/reset", NULL, "", 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

static char *raw(const char *text, int timeout_ms)
{
    return qr_t_raw(replay.port, text, strlen(text), timeout_ms);
}

/* A raw POST /api/chat request whose body contains tag. */
static char *chat_raw(const char *tag, int timeout_ms)
{
    char req[512];
    char body[128];
    snprintf(body, sizeof(body), "{\"model\":\"llama3.2:1b\",\"prompt\":\"%s\"}", tag);
    snprintf(req, sizeof(req),
             "POST /api/chat HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n%s", strlen(body),
             body);
    return raw(req, timeout_ms);
}

static void version_is_exact(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/api/version", NULL, NULL, 0, &r);
    assert_int_equal(r.curl_rc, 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"version\":\"0.12.6\"}");
    char *cl = qr_t_header(&r, "Content-Length");
    assert_non_null(cl);
    assert_string_equal(cl, "20");
    free(cl);
    qr_t_resp_free(&r);
}

static void tags_headers_sent_as_given(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/api/tags", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    char *cookie = qr_t_header(&r, "Set-Cookie"), *conn = qr_t_header(&r, "Connection");
    assert_non_null(cookie);
    assert_non_null(conn);
    assert_string_equal(conn, "keep-alive");
    assert_non_null(strstr(r.body, "\"name\":\"llama3.2:1b\""));
    free(cookie);
    free(conn);
    qr_t_resp_free(&r);
}

static void chat_stream_is_chunked_and_delayed(void **state)
{
    struct qr_t_resp r;
    const char *body = "{\"model\":\"llama3.2:1b\",\"messages\":[]}";
    qr_t_request("POST", replay.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.curl_rc, 0);
    assert_int_equal(r.status, 200);
    assert_true(r.total_ms >= 390);
    assert_true(r.chunks >= 2);
    /* four NDJSON lines, the last one done */
    unsigned lines = 0;
    for (const char *p = r.body; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 4);
    assert_non_null(strstr(r.body, "\"done\":true,\"done_reason\":\"stop\""));
    char *ct = qr_t_header(&r, "Content-Type");
    assert_string_equal(ct, "application/x-ndjson");
    free(ct);
    qr_t_resp_free(&r);

    char *w = chat_raw("plain", 3000);
    assert_non_null(strstr(w, "Transfer-Encoding: chunked\r\n"));
    assert_non_null(strstr(w, "\n\r\n0\r\n\r\n")); /* last data chunk, then the terminator */
    free(w);
}

static void close_mid_body_has_no_terminator(void **state)
{
    char *w = chat_raw("close-me", 3000);
    assert_non_null(strstr(w, "\"content\":\"Once upon\""));
    assert_null(strstr(w, "0\r\n\r\n"));
    size_t n = strlen(w);
    assert_true(n > 4 && strcmp(w + n - 3, "\n\r\n") == 0); /* ends right after the chunk */
    free(w);

    struct qr_t_resp r;
    const char *body = "{\"prompt\":\"close-me\"}";
    qr_t_request("POST", replay.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.curl_rc, CURLE_PARTIAL_FILE);
    qr_t_resp_free(&r);
}

static void malformed_chunk_ends_with_zz(void **state)
{
    char *w = chat_raw("malformed-me", 3000);
    size_t n = strlen(w);
    assert_true(n > 8);
    assert_string_equal(w + n - 7, "\n\r\nzz\r\n");
    free(w);
}

static int connect_loopback(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(replay.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    return fd;
}

static void stalls_do_not_block_others(void **state)
{
    static const char stall[] = "POST /api/chat HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n"
                                "{stall-me}";
    int a = connect_loopback(), b = connect_loopback();
    assert_int_equal(write(a, stall, sizeof(stall) - 1), (ssize_t) sizeof(stall) - 1);
    assert_int_equal(write(b, stall, sizeof(stall) - 1), (ssize_t) sizeof(stall) - 1);

    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/api/version", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_true(r.total_ms < 1000);
    qr_t_resp_free(&r);
    close(a);
    close(b);

    /* a stalled exchange sends its head and chunk, then nothing */
    char *w = raw(stall, 600);
    assert_non_null(strstr(w, "HTTP/1.1 200 OK\r\n"));
    assert_non_null(strstr(w, "Let me think"));
    assert_null(strstr(w, "0\r\n\r\n"));
    free(w);
}

static void slow_headers_wait_before_status_line(void **state)
{
    struct qr_t_resp r;
    const char *body = "{\"prompt\":\"slow-headers\"}";
    qr_t_request("POST", replay.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_true(r.first_byte_ms >= 2900);
    assert_non_null(strstr(r.body, "Sorry for the wait."));
    qr_t_resp_free(&r);
}

static void unmatched_is_404_and_logged(void **state)
{
    reset();
    static const char *const hdrs[] = {"X-Probe: one", "x-probe: two", NULL};
    struct qr_t_resp r;
    qr_t_request("PUT", replay.port, "/api/nowhere?a=1", hdrs, "payload", 7, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"replay_error\":\"no exchange matches PUT /api/nowhere\"}");
    qr_t_resp_free(&r);

    qr_t_request("GET", replay.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *arr = yyjson_doc_get_root(doc);
    assert_int_equal(yyjson_arr_size(arr), 1); /* control requests are not recorded */
    yyjson_val *e = yyjson_arr_get(arr, 0);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "method")), "PUT");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "path")), "/api/nowhere");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "query")), "a=1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "body")), "payload");
    assert_true(yyjson_is_null(yyjson_obj_get(e, "matched")));
    /* headers in received order, duplicates kept */
    yyjson_val *hs = yyjson_obj_get(e, "headers"), *h;
    size_t i, n;
    int seen = 0;
    yyjson_arr_foreach(hs, i, n, h)
    {
        const char *name = yyjson_get_str(yyjson_arr_get(h, 0));
        const char *value = yyjson_get_str(yyjson_arr_get(h, 1));
        if (!strcmp(name, "X-Probe")) {
            assert_int_equal(seen++, 0);
            assert_string_equal(value, "one");
        } else if (!strcmp(name, "x-probe")) {
            assert_int_equal(seen++, 1);
            assert_string_equal(value, "two");
        }
    }
    assert_int_equal(seen, 2);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    reset();
    qr_t_request("GET", replay.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_string_equal(r.body, "[]");
    qr_t_resp_free(&r);
}

static void chunked_request_body_is_decoded(void **state)
{
    reset();
    /* "close-me" split across two chunks still matches body_contains */
    char *w = raw("POST /api/chat HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "5\r\n{clos\r\n4;x=y\r\ne-me\r\n0\r\nTrailer: t\r\n\r\n",
                  3000);
    assert_non_null(strstr(w, "Once upon"));
    free(w);
    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_non_null(strstr(r.body, "\"body\":\"{close-me\""));
    assert_non_null(strstr(r.body, "\"matched\":\"ollama-chat-close\""));
    qr_t_resp_free(&r);
}

static void keep_alive_and_pipelining(void **state)
{
    char *w = raw("GET /api/version HTTP/1.1\r\nHost: t\r\n\r\n"
                  "GET /api/ps HTTP/1.1\r\nHost: t\r\n\r\n"
                  "GET /api/version HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                  3000);
    unsigned n = 0;
    for (const char *p = w; (p = strstr(p, "HTTP/1.1 200 OK\r\n")); p++)
        n++;
    assert_int_equal(n, 3);
    assert_non_null(strstr(w, "\"context_length\":4096"));
    free(w);
}

static void garbage_gets_4xx_and_server_survives(void **state)
{
    static const char *const bad[] = {
        "garbage\r\n\r\n",
        "GET /x HTTP/9.9\r\n\r\n",
        "GET /x HTTP/1.1\r\nno colon here\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST /x HTTP/1.1\r\nContent-Length: 999999999999\r\n\r\n",
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *w = raw(bad[i], 2000);
        assert_true(strncmp(w, "HTTP/1.1 4", 10) == 0);
        assert_non_null(strstr(w, "replay_error"));
        free(w);
    }
    char big[70 * 1024];
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memcpy(big + sizeof(big) - 5, "\r\n\r\n", 5);
    char *w = qr_t_raw(replay.port, big, sizeof(big) - 1, 2000);
    assert_true(strncmp(w, "HTTP/1.1 431", 12) == 0);
    free(w);

    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/api/version", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_is_exact),
        cmocka_unit_test(tags_headers_sent_as_given),
        cmocka_unit_test(chat_stream_is_chunked_and_delayed),
        cmocka_unit_test(close_mid_body_has_no_terminator),
        cmocka_unit_test(malformed_chunk_ends_with_zz),
        cmocka_unit_test(stalls_do_not_block_others),
        cmocka_unit_test(slow_headers_wait_before_status_line),
        cmocka_unit_test(unmatched_is_404_and_logged),
        cmocka_unit_test(chunked_request_body_is_decoded),
        cmocka_unit_test(keep_alive_and_pipelining),
        cmocka_unit_test(garbage_gets_4xx_and_server_survives),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
