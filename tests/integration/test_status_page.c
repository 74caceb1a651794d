/* The status page (docs/API.md "GET /", "GET /status", "GET /v1/status") against the real daemon
 * with an auth token and the replay server as its Ollama backend: GET / answers Ollama's probe
 * text unless the request prefers HTML, the page shell is public but its data is not, and a
 * routed inference request shows up in /v1/status with its reason and its tokens. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

#define TOKEN "status-token"

static struct qr_child replay, daemon_;
static const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&replay);
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN, NULL};
    qr_t_daemon_start(&daemon_, replay.port, env);
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    qr_t_stop(&daemon_, SIGTERM, 10000);
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

static void assert_header(const struct qr_t_resp *r, const char *name, const char *prefix)
{
    char *v = qr_t_header(r, name);
    if (!v || strncmp(v, prefix, strlen(prefix)))
        fail_msg("%s: '%s', want it to start with '%s'", name, v ? v : "(none)", prefix);
    free(v);
}

static void get(const char *target, const char *accept, bool with_token, struct qr_t_resp *r)
{
    char a[200];
    snprintf(a, sizeof(a), "Accept: %s", accept ? accept : "");
    const char *h[3] = {NULL, NULL, NULL};
    size_t n = 0;
    if (accept)
        h[n++] = a;
    if (with_token)
        h[n++] = auth[0];
    qr_t_request("GET", daemon_.port, target, h, NULL, 0, r);
}

static void assert_ollama_text(const struct qr_t_resp *r, const char *what)
{
    if (r->status != 200 || strcmp(r->body, "Ollama is running"))
        fail_msg("%s: %ld '%s', want 200 'Ollama is running'", what, r->status, r->body);
    assert_header(r, "Content-Type", "text/plain");
}

static void assert_page(const struct qr_t_resp *r, const char *what)
{
    if (r->status != 200 || !strstr(r->body, "<!doctype html>") ||
        !strstr(r->body, "id=\"decisions\"") || !strstr(r->body, "/v1/status"))
        fail_msg("%s: %ld, not the status page", what, r->status);
    assert_header(r, "Content-Type", "text/html");
    assert_header(r, "Content-Security-Policy", "default-src 'none'");
    /* no external asset: nothing is loaded from another origin */
    assert_null(strstr(r->body, "http://"));
    assert_null(strstr(r->body, "https://"));
}

/* Ollama clients probe GET / (no Accept, any type, application/json): they get Ollama's answer,
with
 * or without a token;
a browser's Accept gets the page, and /status always does. */
static void test_root_negotiates(void **state)
{
    (void) state;
    static const char *const probes[] = {NULL, "*/*", "application/json", "text/plain",
                                         "text/plain, text/html;q=0.5"};
    struct qr_t_resp r;
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        get("/", probes[i], false, &r);
        assert_ollama_text(&r, probes[i] ? probes[i] : "no Accept");
        qr_t_resp_free(&r);
    }
    get("/", NULL, true, &r);
    assert_ollama_text(&r, "no Accept, token");
    qr_t_resp_free(&r);
    qr_t_request("HEAD", daemon_.port, "/", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    qr_t_resp_free(&r);

    static const char *const browsers[] = {
        "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8",
        "text/html", "text/html;q=0.9, */*;q=0.1"};
    for (size_t i = 0; i < sizeof(browsers) / sizeof(browsers[0]); i++) {
        get("/", browsers[i], false, &r);
        assert_page(&r, browsers[i]);
        qr_t_resp_free(&r);
    }
    get("/status", NULL, false, &r);
    assert_page(&r, "/status without Accept");
    qr_t_resp_free(&r);
    get("/status", "application/json", true, &r);
    assert_page(&r, "/status with a token");
    qr_t_resp_free(&r);
    /* the alias is exact */
    get("/status/", "text/html", false, &r);
    assert_int_equal(r.status, 401);
    qr_t_resp_free(&r);
}

/* The shell is public, its data is not: /v1/status needs the token like every route. */
static void test_status_data_needs_the_token(void **state)
{
    (void) state;
    struct qr_t_resp r;
    get("/v1/status", NULL, false, &r);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "\"error\""));
    qr_t_resp_free(&r);
    get("/v1/status", NULL, true, &r);
    assert_int_equal(r.status, 200);
    assert_header(&r, "Content-Type", "application/json");
    qr_t_resp_free(&r);
}

static yyjson_val *status_doc(yyjson_doc **doc)
{
    struct qr_t_resp r;
    get("/v1/status", NULL, true, &r);
    assert_int_equal(r.status, 200);
    *doc = yyjson_read(r.body, r.body_len, 0);
    qr_t_resp_free(&r);
    assert_non_null(*doc);
    return yyjson_doc_get_root(*doc);
}

static const char *str_at(yyjson_val *o, const char *key)
{
    yyjson_val *v = yyjson_obj_get(o, key);
    if (!yyjson_is_str(v))
        fail_msg("'%s' is not a string", key);
    return yyjson_get_str(v);
}

/* A routed request appears as the newest decision with its route, model, backend and reason,
 * and its request and generated tokens in the throughput samples. */
static void test_routed_request_is_recorded(void **state)
{
    (void) state;
    yyjson_doc *doc;
    yyjson_val *root = status_doc(&doc);
    assert_string_equal(str_at(root, "api_version"), "v1alpha1");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(root, "decisions_max")), 64);
    yyjson_val *t = yyjson_obj_get(root, "throughput");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(t, "interval_s")), 1);
    assert_int_equal(yyjson_get_int(yyjson_obj_get(t, "window_s")), 300);
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(t, "requests")), 300);
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(t, "tokens_out")), 300);
    size_t before = yyjson_arr_size(yyjson_obj_get(root, "decisions"));
    uint64_t req0 = yyjson_get_uint(yyjson_obj_get(t, "total_requests"));
    uint64_t tok0 = yyjson_get_uint(yyjson_obj_get(t, "total_tokens_out"));
    yyjson_doc_free(doc);

    const char *body = "{\"model\":\"llama3.2:1b\",\"stream\":true,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"hi\"}]}";
    const char *const h[] = {auth[0], "Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/v1/chat/completions", h, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "data: [DONE]"));
    qr_t_resp_free(&r);

    root = status_doc(&doc);
    yyjson_val *ds = yyjson_obj_get(root, "decisions");
    assert_int_equal(yyjson_arr_size(ds), before + 1);
    yyjson_val *d = yyjson_arr_get_first(ds);
    assert_string_equal(str_at(d, "route"), "/v1/chat/completions");
    assert_string_equal(str_at(d, "model"), "llama3.2:1b");
    assert_string_equal(str_at(d, "backend"), "ollama");
    assert_string_equal(str_at(d, "outcome"), "routed");
    assert_true(yyjson_is_null(yyjson_obj_get(d, "status")));
    assert_non_null(strstr(str_at(d, "reason"), "backend 'ollama'"));
    assert_true(strlen(str_at(d, "time")) == 24 && str_at(d, "time")[23] == 'Z');
    t = yyjson_obj_get(root, "throughput");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(t, "total_requests")), req0 + 1);
    /* the transcript's final line reports eval_count 6 */
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(t, "total_tokens_out")), tok0 + 6);
    yyjson_doc_free(doc);
}

/* A request refused before any engine answers shows as refused with the client's status and the
 * message it got: the Ollama backend has no rerank API (422 capability_unsupported). */
static void test_refusal_is_recorded(void **state)
{
    (void) state;
    const char *body = "{\"model\":\"llama3.2:1b\",\"query\":\"q\",\"documents\":[\"a\",\"b\"]}";
    const char *const h[] = {auth[0], "Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/v1/rerank", h, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "capability_unsupported"));
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *root = status_doc(&doc);
    yyjson_val *d = yyjson_arr_get_first(yyjson_obj_get(root, "decisions"));
    assert_non_null(d);
    assert_string_equal(str_at(d, "route"), "/v1/rerank");
    assert_string_equal(str_at(d, "model"), "llama3.2:1b");
    assert_string_equal(str_at(d, "outcome"), "refused");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(d, "status")), 422);
    assert_non_null(strstr(str_at(d, "reason"), "rerank"));
    yyjson_doc_free(doc);
}

/* A model with a manifest goes through the router: the decision keeps the name the client asked
 * for and says which backend the plan chose and what it asked it for; a router refusal (a tool
 * request for a model whose manifest rules tools out) names no backend. */
static void test_planned_request_is_recorded(void **state)
{
    (void) state;
    const char *const h[] = {auth[0], "Content-Type: application/json", NULL};
    const char *body = "{\"model\":\"ember-coreui\",\"messages\":[{\"role\":\"user\",\"content\":"
                       "\"hi\"}]}";
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/v1/chat/completions", h, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *root = status_doc(&doc);
    yyjson_val *d = yyjson_arr_get_first(yyjson_obj_get(root, "decisions"));
    assert_string_equal(str_at(d, "model"), "ember-coreui");
    assert_string_equal(str_at(d, "outcome"), "routed");
    assert_string_equal(str_at(d, "backend"), "ollama");
    assert_string_equal(str_at(d, "reason"),
                        "planned: 'ember-coreui' on backend 'ollama' as 'ember-coreui:latest' "
                        "(first preference, 0 policies)");
    yyjson_doc_free(doc);

    body = "{\"model\":\"ember-coreui\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
           "{\"type\":\"object\"}}}]}";
    qr_t_request("POST", daemon_.port, "/v1/chat/completions", h, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    qr_t_resp_free(&r);
    root = status_doc(&doc);
    d = yyjson_arr_get_first(yyjson_obj_get(root, "decisions"));
    assert_string_equal(str_at(d, "model"), "ember-coreui");
    assert_string_equal(str_at(d, "outcome"), "refused");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(d, "status")), 422);
    assert_true(yyjson_is_null(yyjson_obj_get(d, "backend")));
    assert_non_null(strstr(str_at(d, "reason"), "missing 'tools.calling'"));
    yyjson_doc_free(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_negotiates),
        cmocka_unit_test(test_status_data_needs_the_token),
        cmocka_unit_test(test_routed_request_is_recorded),
        cmocka_unit_test(test_refusal_is_recorded),
        cmocka_unit_test(test_planned_request_is_recorded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
