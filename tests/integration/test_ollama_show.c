/* The Ollama adapter's model descriptions end to end: the real daemon in front of qr-replay
 * playing Ollama (tests/cases/replay/ollama-show-*.json, ollama-think-chat.json). OpenAI clients
 * reach the Ollama backend through the canonical codec; the replay's request log shows exactly
 * what reached the engine. Covered: think always explicit (true on a thinking model, false
 * otherwise, quirk 7), a level only where thinking.values lists it (quirk 8), thinking asked of a
 * model without it refused with 422 before anything is sent, /api/show asked once per model
 * (POST {"model":...}), and a failed /api/show (500, garbage) not blocking inference: think then
 * goes as the client sent it and an unset one stays Ollama's default), Ollama refusing a request
 * dropping the description (asked again next time), requests arriving while the description is on
 * the way waiting for that one description, and a client leaving while its request waits. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

static void replay_reset(void)
{
    assert_true(qr_t_replay_reset(replay.port));
}

/* The recorded requests to path whose body contains needle: how many, and the last body
 * (malloc'd, NULL when none). */
static char *upstream(const char *path, const char *needle, size_t *count)
{
    yyjson_doc *doc = qr_t_replay_requests(replay.port);
    assert_non_null(doc);
    char *found = NULL;
    size_t i, n, seen = 0;
    yyjson_val *it;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, n, it)
    {
        const char *p = yyjson_get_str(yyjson_obj_get(it, "path"));
        const char *b = yyjson_get_str(yyjson_obj_get(it, "body"));
        if (p && b && !strcmp(p, path) && strstr(b, needle)) {
            const char *m = yyjson_get_str(yyjson_obj_get(it, "method"));
            assert_string_equal(m, "POST");
            free(found);
            found = strdup(b);
            seen++;
        }
    }
    yyjson_doc_free(doc);
    if (count)
        *count = seen;
    return found;
}

static size_t count_of(const char *path, const char *needle)
{
    size_t n = 0;
    free(upstream(path, needle, &n));
    return n;
}

/* An OpenAI chat request for model (effort NULL: no reasoning_effort); the status must be want. */
static void chat(uint16_t port, const char *model, const char *effort, long want,
                 struct qr_t_resp *r)
{
    char body[512], eff[64] = "";
    if (effort)
        snprintf(eff, sizeof(eff), ",\"reasoning_effort\":\"%s\"", effort);
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}", model,
             eff);
    qr_t_request("POST", port, "/v1/chat/completions", NULL, body, strlen(body), r);
    if (r->status != want)
        fail_msg("%s effort %s: status %ld, want %ld; body: %s", model, effort ? effort : "-",
                 r->status, want, r->body);
}

/* The think member of the last /api/chat for model, as JSON text ("" when absent); also checks
 * that no num_ctx reached the engine. */
static void upstream_think(const char *model, char *out, size_t cap)
{
    char needle[128];
    snprintf(needle, sizeof(needle), "\"model\":\"%s\"", model);
    char *body = upstream("/api/chat", needle, NULL);
    assert_non_null(body);
    yyjson_doc *doc = yyjson_read(body, strlen(body), 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_null(yyjson_obj_get(yyjson_obj_get(root, "options"), "num_ctx"));
    yyjson_val *t = yyjson_obj_get(root, "think");
    out[0] = '\0';
    if (t) {
        char *s = yyjson_val_write(t, 0, NULL);
        snprintf(out, cap, "%s", s);
        free(s);
    }
    yyjson_doc_free(doc);
    free(body);
}

static void expect_think(uint16_t port, const char *model, const char *effort, const char *want)
{
    struct qr_t_resp r;
    chat(port, model, effort, 200, &r);
    assert_non_null(strstr(r.body, "\"content\":\"ok\""));
    qr_t_resp_free(&r);
    char got[64];
    upstream_think(model, got, sizeof(got));
    if (strcmp(got, want))
        fail_msg("%s effort %s: think %s reached the engine, want %s", model, effort ? effort : "-",
                 got[0] ? got : "(absent)", want[0] ? want : "(absent)");
}

/* Quirks 7 and 8: think always explicit, levels only where the model lists them. */
static void test_think_explicit(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    expect_think(d.port, "qr-oshow-qwen3", NULL, "true");   /* Ollama's default, now stated */
    expect_think(d.port, "qr-oshow-qwen3", "high", "true"); /* no levels listed */
    expect_think(d.port, "qr-oshow-qwen3", "none", "false");
    expect_think(d.port, "qr-oshow-gptoss", NULL, "true");
    expect_think(d.port, "qr-oshow-gptoss", "low", "\"low\"");
    expect_think(d.port, "qr-oshow-gptoss", "xhigh", "\"high\"");
    expect_think(d.port, "qr-oshow-plain", NULL, "false");
    expect_think(d.port, "qr-oshow-plain", "none", "false");
    /* one description per model, asked with POST {"model":...} */
    size_t n = 0;
    char *show = upstream("/api/show", "qr-oshow-qwen3", &n);
    assert_int_equal(n, 1);
    assert_string_equal(show, "{\"model\":\"qr-oshow-qwen3\"}");
    free(show);
    assert_int_equal(count_of("/api/show", "qr-oshow-gptoss"), 1);
    assert_int_equal(count_of("/api/show", "qr-oshow-plain"), 1);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    /* the readiness probe's /api/version answer is kept as the engine version */
    assert_true(qr_t_log_contains(&d, "ollama engine version"));
    assert_true(qr_t_log_contains(&d, "0.12.6"));
}

/* Thinking asked of a model whose capabilities lack it: 422 before anything is sent. */
static void test_think_refused(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    static const char *const efforts[] = {"high", "low", "minimal"};
    for (size_t i = 0; i < 3; i++) {
        struct qr_t_resp r;
        chat(d.port, "qr-oshow-plain", efforts[i], 422, &r);
        yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
        assert_non_null(doc);
        yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "capability_unsupported");
        assert_non_null(strstr(yyjson_get_str(yyjson_obj_get(e, "message")),
                               "'qr-oshow-plain' does not support thinking"));
        yyjson_doc_free(doc);
        qr_t_resp_free(&r);
    }
    assert_int_equal(count_of("/api/chat", "qr-oshow-plain"), 0);
    assert_int_equal(count_of("/api/show", "qr-oshow-plain"), 1);
    /* a streamed request is refused the same way, with a real status */
    const char body[] = "{\"model\":\"qr-oshow-plain\",\"stream\":true,\"reasoning_effort\":"
                        "\"high\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    qr_t_resp_free(&r);
    assert_int_equal(count_of("/api/chat", "qr-oshow-plain"), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* A failed /api/show (500, or a body that is not JSON) does not block inference: think goes as
 * the client sent it, unset stays unset (Ollama's own default); the failure is logged and not
 * asked again for every request. */
static void test_show_failure_proceeds(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    static const char *const models[] = {"qr-oshow-broken", "qr-oshow-garbage"};
    for (size_t i = 0; i < 2; i++) {
        expect_think(d.port, models[i], NULL, "");
        expect_think(d.port, models[i], "high", "\"high\"");
        expect_think(d.port, models[i], "none", "false");
        assert_int_equal(count_of("/api/show", models[i]), 1); /* remembered for a while */
    }
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(qr_t_log_contains(&d, "ollama model description failed"));
    assert_true(qr_t_log_contains(&d, "answered 500: llama runner process has terminated"));
}

/* Ollama refusing a request (400: the model may have changed) drops the description: the next
 * request asks /api/show again. */
static void test_refusal_drops_description(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    struct qr_t_resp r;
    chat(d.port, "qr-oshow-changed", NULL, 400, &r);
    assert_non_null(strstr(r.body, "does not support thinking"));
    qr_t_resp_free(&r);
    char got[64];
    upstream_think("qr-oshow-changed", got, sizeof(got));
    assert_string_equal(got, "true"); /* what the description said */
    assert_int_equal(count_of("/api/show", "qr-oshow-changed"), 1);
    chat(d.port, "qr-oshow-changed", NULL, 400, &r);
    qr_t_resp_free(&r);
    assert_int_equal(count_of("/api/show", "qr-oshow-changed"), 2);
    /* a described model Ollama answers is not asked again */
    expect_think(d.port, "qr-oshow-qwen3", NULL, "true");
    expect_think(d.port, "qr-oshow-qwen3", NULL, "true");
    assert_int_equal(count_of("/api/show", "qr-oshow-qwen3"), 1);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

struct bg {
    uint16_t port;
    const char *model;
    struct qr_t_resp r;
};

static void *bg_chat(void *arg)
{
    struct bg *b = arg;
    char body[256];
    snprintf(body, sizeof(body),
             "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", b->model);
    qr_t_request("POST", b->port, "/v1/chat/completions", NULL, body, strlen(body), &b->r);
    return NULL;
}

/* Four requests while the description takes 500 ms: one /api/show, all four answered with the
 * described think. */
static void test_waiters_share_one_description(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    struct bg b[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        b[i] = (struct bg){.port = d.port, .model = "qr-oshow-slow"};
        pthread_create(&t[i], NULL, bg_chat, &b[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(b[i].r.status, 200);
        qr_t_resp_free(&b[i].r);
    }
    assert_int_equal(count_of("/api/show", "qr-oshow-slow"), 1);
    assert_int_equal(count_of("/api/chat", "qr-oshow-slow"), 4);
    char got[64];
    upstream_think("qr-oshow-slow", got, sizeof(got));
    assert_string_equal(got, "true");
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* A client that leaves while its request waits for the description: nothing reaches /api/chat
 * for it, the daemon stays healthy, and the description still lands in the cache. */
static void test_client_gone_while_waiting(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    const char req[] = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       "Content-Type: application/json\r\nContent-Length: 68\r\n\r\n"
                       "{\"model\":\"qr-oshow-slow\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"a\"}]}";
    free(qr_t_raw(d.port, req, strlen(req), 150)); /* gives up after 150 ms, before the answer */
    usleep(700000);
    assert_int_equal(count_of("/api/chat", "qr-oshow-slow"), 0);
    assert_int_equal(count_of("/api/show", "qr-oshow-slow"), 1);
    expect_think(d.port, "qr-oshow-slow", NULL, "true"); /* cached: asked once */
    assert_int_equal(count_of("/api/show", "qr-oshow-slow"), 1);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(qr_t_log_contains(&d, "client went away, inference cancelled"));
}

/* The probed /api/version reaches the router: a plan names the engine version, so the ledger's
 * version-ranged Ollama blocks apply. */
static void test_engine_version_in_plan(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    struct qr_t_resp r;
    for (int i = 0; i < 100; i++) { /* the readiness probe reads the version */
        qr_t_request("GET", d.port, "/readyz", NULL, NULL, 0, &r);
        long status = r.status;
        qr_t_resp_free(&r);
        if (status == 200)
            break;
        usleep(20000);
    }
    const char body[] = "{\"model\":\"ember-coreui\",\"capabilities\":[\"inference.text\"]}";
    qr_t_request("POST", d.port, "/v1/route", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    if (!strstr(r.body, "\"engine_version\":\"0.12.6\""))
        fail_msg("the plan does not name the probed Ollama version: %s", r.body);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* What the model's capabilities do not list is refused before Ollama is asked: tools to a model
 * without "tools", an image to one without "vision" (Ollama would answer "does not support
 * tools"); a model that lists tools gets them. */
static void test_tools_vision_refused(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, NULL);
    replay_reset();
    static const char tools[] = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
                                "\"f\",\"parameters\":{\"type\":\"object\"}}}]";
    char body[512];
    struct qr_t_resp r;
    snprintf(body, sizeof body,
             "{\"model\":\"qr-oshow-plain\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"a\"}]%s}",
             tools);
    qr_t_request("POST", d.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "capability_unsupported"));
    assert_non_null(strstr(r.body, "tools.calling"));
    qr_t_resp_free(&r);
    snprintf(body, sizeof body,
             "{\"model\":\"qr-oshow-plain\",\"messages\":[{\"role\":\"user\",\"content\":"
             "[{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,"
             "iVBORw0KGgo=\"}}]}]}");
    qr_t_request("POST", d.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "multimodal.vision"));
    qr_t_resp_free(&r);
    assert_int_equal(count_of("/api/chat", "qr-oshow-plain"), 0);
    snprintf(body, sizeof body,
             "{\"model\":\"qr-oshow-qwen3\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"a\"}]%s}",
             tools);
    qr_t_request("POST", d.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    char *up = upstream("/api/chat", "\"model\":\"qr-oshow-qwen3\"", NULL);
    assert_non_null(up);
    assert_non_null(strstr(up, "\"tools\":["));
    free(up);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_think_explicit),
        cmocka_unit_test(test_think_refused),
        cmocka_unit_test(test_show_failure_proceeds),
        cmocka_unit_test(test_refusal_drops_description),
        cmocka_unit_test(test_waiters_share_one_description),
        cmocka_unit_test(test_client_gone_while_waiting),
        cmocka_unit_test(test_engine_version_in_plan),
        cmocka_unit_test(test_tools_vision_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
