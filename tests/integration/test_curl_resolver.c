/* The daemon's only threads: backend=openai with http_client=curl and an upstream URL that names
 * a host (not an address, not "localhost", which libcurl answers itself) makes libcurl's threaded
 * resolver start a thread per lookup inside the daemon. This test drives that path (the machine's
 * own host name when it resolves to loopback; skipped otherwise) against qr-replay's vLLM
 * transcripts: the model list, a whole and a streamed chat give the transcript's exact answer, and
 * the daemon stops cleanly. Under ThreadSanitizer (make test-tsan) any race between the resolver
 * thread and the event loop fails it. docs/RELIABILITY.md "Sanitizers, TSan and valgrind". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct qr_child replay, daemon_;
static char host[256];

/* The host name when it resolves to IPv4 loopback only (a name that stays on this machine). */
static bool loopback_name(char *out, size_t cap)
{
    if (gethostname(out, cap) != 0 || !out[0] || strcmp(out, "localhost") == 0)
        return false;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(out, NULL, &hints, &res) != 0)
        return false;
    bool ok = res != NULL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *) ai->ai_addr;
        if (ai->ai_family != AF_INET || (ntohl(sin->sin_addr.s_addr) >> 24) != 127)
            ok = false;
    }
    freeaddrinfo(res);
    return ok;
}

static int setup(void **state)
{
    if (!loopback_name(host, sizeof host))
        return 0; /* every test skips */
    qr_t_replay_start_dir(&replay, QR_TEST_CASES "/replay-vllm");
    char url[320];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OPENAI_URL=http://%s:%u", host, replay.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", "QUANTUM_RUNTIME_HTTP_CLIENT=curl",
                               url, NULL};
    qr_t_daemon_start(&daemon_, 0, env);
    return 0;
}

static int teardown(void **state)
{
    if (daemon_.pid > 0)
        qr_t_stop(&daemon_, SIGTERM, 10000);
    if (replay.pid > 0)
        qr_t_stop(&replay, SIGTERM, 5000);
    return 0;
}

static void need_host(void)
{
    if (!daemon_.pid)
        skip(); /* no host name that resolves to loopback on this machine */
}

static void test_models_through_resolved_name(void **state)
{
    need_host();
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"id\":\"Qwen/Qwen3-8B\""));
    qr_t_resp_free(&r);
}

static void chat(bool stream, const char *expect)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"model\":\"Qwen/Qwen3-8B\",\"stream\":%s,\"messages\":[{\"role\":\"user\","
             "\"content\":\"case=vllm-q24-reasoning-%s;\"}]}",
             stream ? "true" : "false", stream ? "stream" : "whole");
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/v1/chat/completions", hdrs, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, expect));
    qr_t_resp_free(&r);
}

static void test_chat_through_resolved_name(void **state)
{
    need_host();
    chat(false, "\"content\":\"Grüße aus Köln ✓\"");
    chat(true, "\"content\":\" Köln ✓\"");
    chat(true, "data: [DONE]");
}

static void test_stops_cleanly(void **state)
{
    need_host();
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_through_resolved_name),
        cmocka_unit_test(test_chat_through_resolved_name),
        cmocka_unit_test(test_stops_cleanly),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
