/* End to end over loopback: the real daemon in front of the replay server playing Ollama
 * transcripts. Streaming arrives incrementally, every refusal path answers in the error shape,
 * the upstream never sees the Runtime's credentials, and shutdown lets a stream in flight end. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

#define TOKEN "t0ken-for-tests"
static const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};

static struct qr_child replay, daemon_;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&replay);
    /* adoption byte for byte (ollama_passthrough); the canonical default: test_canonical_* */
    static const char *const env[] = {
        "QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN, "QUANTUM_RUNTIME_MAX_REQUEST_BYTES=1MiB",
        "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=1500ms", "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true", NULL};
    qr_t_daemon_start(&daemon_, replay.port, env);
    return 0;
}

static int teardown(void **state)
{
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 10000), 0);
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

/* --- helpers --- */

static yyjson_doc *replay_requests(void)
{
    struct qr_t_resp r;
    qr_t_request("GET", replay.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    qr_t_resp_free(&r);
    return doc;
}

static void replay_reset(void)
{
    assert_true(qr_t_replay_reset(replay.port));
}

/* The last request the replay server saw for path, or NULL. */
static yyjson_val *last_request(yyjson_doc *doc, const char *path)
{
    yyjson_val *arr = yyjson_doc_get_root(doc), *it, *found = NULL;
    size_t i, n;
    yyjson_arr_foreach(arr, i, n, it)
    {
        const char *p = yyjson_get_str(yyjson_obj_get(it, "path"));
        if (p && !strcmp(p, path))
            found = it;
    }
    return found;
}

static bool saw_header(yyjson_val *request, const char *name)
{
    yyjson_val *hs = yyjson_obj_get(request, "headers"), *h;
    size_t i, n;
    yyjson_arr_foreach(hs, i, n, h)
    {
        if (!strcasecmp(yyjson_get_str(yyjson_arr_get(h, 0)), name))
            return true;
    }
    return false;
}

static void assert_error_shape(const struct qr_t_resp *r, long status, const char *code)
{
    assert_int_equal(r->status, status);
    char *ct = qr_t_header(r, "Content-Type");
    assert_non_null(ct);
    assert_string_equal(ct, "application/json; charset=utf-8");
    free(ct);
    char *rid = qr_t_header(r, "X-Quantum-Request-ID");
    assert_non_null(rid);
    assert_int_equal(strlen(rid), 24);
    yyjson_doc *doc = yyjson_read(r->body, r->body_len, 0);
    assert_non_null(doc);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "code")), code);
    assert_true(yyjson_get_len(yyjson_obj_get(err, "message")) > 0);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "request_id")), rid);
    yyjson_doc_free(doc);
    free(rid);
}

/* --- tests --- */

static void test_healthz_needs_no_token(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"status\":\"alive\""));
    assert_non_null(strstr(r.body, "\"service\":\"quantum-runtime\""));
    char *rid = qr_t_header(&r, "X-Quantum-Request-ID");
    assert_non_null(rid);
    assert_int_equal(strspn(rid, "0123456789abcdef"), 24);
    free(rid);
    qr_t_resp_free(&r);

    qr_t_request("GET", daemon_.port, "/readyz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"status\":\"ready\",\"backend\":\"ollama-adapter\"}\n");
    qr_t_resp_free(&r);
}

static void test_auth_required(void **state)
{
    struct qr_t_resp r;
    const char *const wrong[] = {"Authorization: Bearer nope", NULL};
    const char *paths[] = {"/v1/runtime", "/api/tags", "/api/no-such-route", "/nope"};
    for (size_t i = 0; i < 4; i++) {
        qr_t_request("GET", daemon_.port, paths[i], NULL, NULL, 0, &r);
        assert_error_shape(&r, 401, "unauthorized");
        char *www = qr_t_header(&r, "WWW-Authenticate");
        assert_non_null(www);
        assert_string_equal(www, "Bearer realm=\"Quantum Runtime\"");
        free(www);
        qr_t_resp_free(&r);
        qr_t_request("GET", daemon_.port, paths[i], wrong, NULL, 0, &r);
        assert_error_shape(&r, 401, "unauthorized");
        qr_t_resp_free(&r);
    }
}

static void test_native_endpoints(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/v1/runtime", auth, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "name")), "Quantum Runtime");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "api_version")), "v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "backend_contract")),
                        "quantum.runtime/backend/v1alpha1");
    yyjson_val *be = yyjson_obj_get(root, "backend");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(be, "kind")), "ollama-adapter");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(be, "state")), "ready");
    yyjson_val *caps = yyjson_obj_get(be, "capabilities");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(caps, "streaming.content")), "supported");
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    qr_t_request("GET", daemon_.port, "/v1/capabilities", auth, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    doc = yyjson_read(r.body, r.body_len, 0);
    root = yyjson_doc_get_root(doc);
    assert_false(yyjson_get_bool(yyjson_obj_get(root, "model_mutation")));
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "streaming")));
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(root, "compatibility")), 4);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    qr_t_request("POST", daemon_.port, "/v1/runtime", auth, "{}", 2, &r);
    assert_error_shape(&r, 405, "method_not_allowed");
    qr_t_resp_free(&r);
    qr_t_request("GET", daemon_.port, "/v1/nope", auth, NULL, 0, &r);
    assert_error_shape(&r, 404, "not_found");
    qr_t_resp_free(&r);
}

/* Forwarded routes strip credentials and hop-by-hop headers both ways (/api/ps passes through;
 * /api/tags is answered by the Runtime since the registry joined it: test_registry.c). */
static void test_forwarded_headers_stripped(void **state)
{
    replay_reset();
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN,
                                "Cookie: session=abc",
                                "X-Forwarded-For: 10.9.8.7",
                                "X-Real-IP: 10.9.8.7",
                                "Forwarded: for=10.9.8.7",
                                "Connection: X-Secret-Hop",
                                "X-Secret-Hop: 1",
                                "X-Client-Trace: keep-me",
                                NULL};
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/api/ps?verbose=1", hdrs, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "llama3.2:1b"));
    char *cookie = qr_t_header(&r, "Set-Cookie");
    assert_null(cookie);
    char *ver = qr_t_header(&r, "X-Quantum-Runtime-Version");
    assert_non_null(ver);
    free(ver);
    qr_t_resp_free(&r);

    yyjson_doc *doc = replay_requests();
    yyjson_val *req = last_request(doc, "/api/ps");
    assert_non_null(req);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(req, "query")), "verbose=1");
    const char *never[] = {"Authorization", "Cookie",       "X-Forwarded-For", "X-Real-IP",
                           "Forwarded",     "X-Secret-Hop", "Connection"};
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        if (saw_header(req, never[i]))
            fail_msg("upstream saw header '%s'", never[i]);
    }
    assert_true(saw_header(req, "X-Client-Trace"));
    yyjson_doc_free(doc);
}

static void test_chat_streams_incrementally(void **state)
{
    replay_reset();
    const char *body = "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\","
                       "\"content\":\"Hallo \xc3\x9f\"}],\"stream\":true}";
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN, "Content-Type: application/json",
                                NULL};
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/api/chat", hdrs, body, strlen(body), &r);
    assert_int_equal(r.curl_rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    char *ct = qr_t_header(&r, "Content-Type");
    assert_string_equal(ct, "application/x-ndjson");
    free(ct);
    /* the transcript holds its third chunk back 400 ms: the first must arrive well before */
    assert_true(r.first_byte_ms >= 0);
    assert_true(r.total_ms - r.first_byte_ms > 250);
    assert_true(r.chunks >= 2);
    assert_non_null(strstr(r.body, "\"done\":true"));
    qr_t_resp_free(&r);

    yyjson_doc *doc = replay_requests();
    yyjson_val *req = last_request(doc, "/api/chat");
    assert_non_null(req);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(req, "body")), body); /* byte for byte */
    yyjson_doc_free(doc);
}

static void test_coreui_fixture_byte_for_byte(void **state)
{
    replay_reset();
    size_t len;
    char *body = qr_t_read_file(QR_TEST_CASES "/ollama/coreui-chat-request.json", &len);
    assert_non_null(body);
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN, "Content-Type: application/json",
                                NULL};
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/api/chat", hdrs, body, len, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    yyjson_doc *doc = replay_requests();
    yyjson_val *req = last_request(doc, "/api/chat");
    assert_int_equal(yyjson_get_len(yyjson_obj_get(req, "body")), len);
    assert_memory_equal(yyjson_get_str(yyjson_obj_get(req, "body")), body, len);
    yyjson_doc_free(doc);
    free(body);
}

static void test_refusals(void **state)
{
    replay_reset();
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/api/pull", auth, "{\"model\":\"x\"}", 13, &r);
    assert_error_shape(&r, 403, "model_mutation_disabled");
    qr_t_resp_free(&r);
    qr_t_request("DELETE", daemon_.port, "/api/delete", auth, "{\"model\":\"x\"}", 13, &r);
    assert_error_shape(&r, 403, "model_mutation_disabled");
    qr_t_resp_free(&r);
    qr_t_request("POST", daemon_.port, "/api/blobs/sha256:abc", auth, "x", 1, &r);
    assert_error_shape(&r, 404, "unsupported_compatibility_route");
    qr_t_resp_free(&r);
    qr_t_request("GET", daemon_.port, "/api/chat", auth, NULL, 0, &r);
    assert_error_shape(&r, 405, "method_not_allowed");
    char *allow = qr_t_header(&r, "Allow");
    assert_string_equal(allow, "POST");
    free(allow);
    qr_t_resp_free(&r);

    /* 1.5 MiB against a 1 MiB cap */
    size_t big = 3u << 19;
    char *body = malloc(big);
    memset(body, 'a', big);
    qr_t_request("POST", daemon_.port, "/api/chat", auth, body, big, &r);
    assert_error_shape(&r, 413, "request_too_large");
    qr_t_resp_free(&r);
    free(body);

    /* none of these reached the upstream */
    yyjson_doc *doc = replay_requests();
    assert_int_equal(yyjson_arr_size(yyjson_doc_get_root(doc)), 0);
    yyjson_doc_free(doc);
}

static void test_host_header_checked(void **state)
{
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN, "Host: evil.example:11450", NULL};
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/v1/runtime", hdrs, NULL, 0, &r);
    assert_error_shape(&r, 403, "forbidden_host");
    qr_t_resp_free(&r);
    const char *const ok[] = {"Authorization: Bearer " TOKEN, "Host: localhost:11450", NULL};
    qr_t_request("GET", daemon_.port, "/v1/runtime", ok, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

static void test_upstream_failures(void **state)
{
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN, "Content-Type: application/json",
                                NULL};
    struct qr_t_resp r;
    /* no answer within the 1.5 s upstream timeout */
    const char *slow =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"slow-headers\"}]}";
    qr_t_request("POST", daemon_.port, "/api/chat", hdrs, slow, strlen(slow), &r);
    assert_error_shape(&r, 504, "upstream_timeout");
    qr_t_resp_free(&r);

    /* upstream closes mid-stream: the client must see a cut stream, not a clean end */
    const char *close_me =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"close-me\"}]}";
    qr_t_request("POST", daemon_.port, "/api/chat", hdrs, close_me, strlen(close_me), &r);
    assert_int_equal(r.status, 200);
    assert_int_not_equal(r.curl_rc, CURLE_OK);
    assert_null(strstr(r.body, "\"done\":true"));
    qr_t_resp_free(&r);

    const char *bad =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"malformed-me\"}]}";
    qr_t_request("POST", daemon_.port, "/api/chat", hdrs, bad, strlen(bad), &r);
    assert_int_not_equal(r.curl_rc, CURLE_OK);
    qr_t_resp_free(&r);

    /* the daemon is still healthy afterwards */
    qr_t_request("GET", daemon_.port, "/api/version", auth, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

static void test_upstream_down_is_502(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, 0, NULL);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/api/tags", NULL, NULL, 0, &r);
    assert_error_shape(&r, 502, "upstream_error");
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/readyz", NULL, NULL, 0, &r);
    assert_error_shape(&r, 503, "upstream_unavailable");
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

static void test_mutation_allowed(void **state)
{
    static const char *const env[] = {"QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION=true", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    struct qr_t_resp r;
    qr_t_request("DELETE", d.port, "/api/delete", NULL, "{\"model\":\"x\"}", 13, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    qr_t_request("POST", d.port, "/api/pull", NULL, "{\"model\":\"x\"}", 13, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "success"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* SIGTERM while a stream is in flight: the stream still ends cleanly, the daemon exits 0. */
struct bg {
    uint16_t port;
    struct qr_t_resp r;
};

static void *stream_thread(void *arg)
{
    struct bg *b = arg;
    const char *body = "{\"model\":\"llama3.2:1b\",\"messages\":[],\"stream\":true}";
    qr_t_request("POST", b->port, "/api/chat", NULL, body, strlen(body), &b->r);
    return NULL;
}

#include <pthread.h>

static void test_graceful_shutdown_with_stream(void **state)
{
    struct qr_child d;
    static const char *const env[] = {"QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true", NULL};
    qr_t_daemon_start(&d, replay.port, env);
    struct bg b = {.port = d.port};
    pthread_t t;
    pthread_create(&t, NULL, stream_thread, &b);
    usleep(150000); /* the stream is now waiting for its delayed chunk */
    int rc = qr_t_stop(&d, SIGTERM, 10000);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(b.r.curl_rc, CURLE_OK);
    assert_int_equal(b.r.status, 200);
    assert_non_null(strstr(b.r.body, "\"done\":true"));
    assert_true(qr_t_log_contains(&d, "shutdown complete"));
    qr_t_resp_free(&b.r);
}

/* A stream that never ends: after shutdown_timeout the daemon cuts it and still exits 0. */
struct bg_stall {
    uint16_t port;
    struct qr_t_resp r;
};

static void *stall_thread(void *arg)
{
    struct bg_stall *b = arg;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"stall-me\"}]}";
    qr_t_request("POST", b->port, "/api/chat", NULL, body, strlen(body), &b->r);
    return NULL;
}

static void test_shutdown_bound_cuts_stuck_stream(void **state)
{
    static const char *const env[] = {"QUANTUM_RUNTIME_SHUTDOWN_TIMEOUT=600ms",
                                      "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    struct bg_stall b = {.port = d.port};
    pthread_t t;
    pthread_create(&t, NULL, stall_thread, &b);
    usleep(300000); /* the stream has its first line and now stalls */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = qr_t_stop(&d, SIGTERM, 10000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    pthread_join(t, NULL);
    double waited_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    assert_int_equal(rc, 0);
    assert_true(waited_ms >= 500 && waited_ms < 5000);
    assert_int_equal(b.r.status, 200);
    assert_int_not_equal(b.r.curl_rc, CURLE_OK); /* cut, not ended cleanly */
    assert_non_null(strstr(b.r.body, "\"done\":false"));
    /* ... after Ollama's in-band error line, on a line of its own, so the client can tell */
    assert_non_null(strstr(b.r.body, "\n{\"error\":\"the server is shutting down (shutdown_timeout "
                                     "passed)\"}\n"));
    assert_true(qr_t_log_contains(&d, "shutdown timeout"));
    qr_t_resp_free(&b.r);
}

/* The same bound on a translated stream: it ends in-band with finish_reason "cancelled". */
static void *stall_openai_thread(void *arg)
{
    struct bg_stall *b = arg;
    const char *body = "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                       "\"content\":\"stall-me\"}]}";
    qr_t_request("POST", b->port, "/v1/chat/completions", NULL, body, strlen(body), &b->r);
    return NULL;
}

static void test_shutdown_bound_cancels_translated_stream(void **state)
{
    static const char *const env[] = {"QUANTUM_RUNTIME_SHUTDOWN_TIMEOUT=600ms", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    struct bg_stall b = {.port = d.port};
    pthread_t t;
    pthread_create(&t, NULL, stall_openai_thread, &b);
    usleep(300000);
    int rc = qr_t_stop(&d, SIGTERM, 10000);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(b.r.status, 200);
    assert_int_equal(b.r.curl_rc, CURLE_OK); /* a clean, explicit end */
    assert_non_null(strstr(b.r.body, "Let me think"));
    assert_non_null(strstr(b.r.body, "\"finish_reason\":\"cancelled\""));
    assert_non_null(strstr(b.r.body, "data: [DONE]"));
    qr_t_resp_free(&b.r);
}

/* The default: Ollama chat/generate/embed run through the canonical contract even though the
 * backend could pass them through. What reaches Ollama: the client's fields plus an explicit
 * think (Ollama thinks when it is omitted); what the client gets: Ollama's answer, re-encoded,
 * generate's context tokens included; failures in Ollama's shapes; logprobs (not carried by the
 * contract) passed through byte for byte. */
static void test_canonical_default(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=1500ms", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;

    replay_reset();
    const char *chat = "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\","
                       "\"content\":\"Hallo ß\"}],\"options\":{\"seed\":7}}";
    qr_t_request("POST", d.port, "/api/chat", hdrs, chat, strlen(chat), &r);
    assert_int_equal(r.status, 200);
    char *ct = qr_t_header(&r, "Content-Type");
    assert_string_equal(ct, "application/x-ndjson");
    free(ct);
    assert_non_null(strstr(r.body, "\"done\":true"));
    char *hb = qr_t_header(&r, "X-Quantum-Backend");
    assert_string_equal(hb, "ollama");
    free(hb);
    qr_t_resp_free(&r);
    yyjson_doc *doc = replay_requests();
    yyjson_val *req = last_request(doc, "/api/chat");
    yyjson_doc *sent = yyjson_read(yyjson_get_str(yyjson_obj_get(req, "body")),
                                   yyjson_get_len(yyjson_obj_get(req, "body")), 0);
    yyjson_val *root = yyjson_doc_get_root(sent);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), "llama3.2:1b");
    assert_true(yyjson_is_false(yyjson_obj_get(root, "think"))); /* explicit, never omitted */
    assert_int_equal(yyjson_get_sint(yyjson_obj_get(yyjson_obj_get(root, "options"), "seed")), 7);
    yyjson_doc_free(sent);
    yyjson_doc_free(doc);

    /* generate: the final line hands back the engine's context tokens */
    const char *gen = "{\"model\":\"llama3.2:1b\",\"prompt\":\"Why is the sky blue?\"}";
    qr_t_request("POST", d.port, "/api/generate", hdrs, gen, strlen(gen), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(
        strstr(r.body, "\"done\":true,\"done_reason\":\"stop\",\"context\":[128006,882,"));
    qr_t_resp_free(&r);

    /* embed: the engine's float32 values as it wrote them */
    const char *emb = "{\"model\":\"all-minilm\",\"input\":\"hi\"}";
    qr_t_request("POST", d.port, "/api/embed", hdrs, emb, strlen(emb), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"embeddings\":[["));
    qr_t_resp_free(&r);

    /* failures: no answer in time is 504 in the Runtime's shape; a stream the engine cuts ends
     * with Ollama's in-band error line, never a clean done */
    const char *slow =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"slow-headers\"}]}";
    qr_t_request("POST", d.port, "/api/chat", hdrs, slow, strlen(slow), &r);
    assert_int_equal(r.status, 504);
    qr_t_resp_free(&r);
    const char *close_me =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"close-me\"}]}";
    qr_t_request("POST", d.port, "/api/chat", hdrs, close_me, strlen(close_me), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(r.body);
    assert_null(strstr(r.body, "\"done\":true"));
    assert_non_null(strstr(r.body, "{\"error\":"));
    qr_t_resp_free(&r);

    /* logprobs: not modelled by the contract, so Ollama answers it itself, byte for byte */
    replay_reset();
    const char *lp = "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\",\"content\":"
                     "\"hi\"}],\"logprobs\":true}";
    qr_t_request("POST", d.port, "/api/chat", hdrs, lp, strlen(lp), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    doc = replay_requests();
    req = last_request(doc, "/api/chat");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(req, "body")), lp);
    yyjson_doc_free(doc);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canonical_default),
        cmocka_unit_test(test_healthz_needs_no_token),
        cmocka_unit_test(test_auth_required),
        cmocka_unit_test(test_native_endpoints),
        cmocka_unit_test(test_forwarded_headers_stripped),
        cmocka_unit_test(test_chat_streams_incrementally),
        cmocka_unit_test(test_coreui_fixture_byte_for_byte),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_host_header_checked),
        cmocka_unit_test(test_upstream_failures),
        cmocka_unit_test(test_upstream_down_is_502),
        cmocka_unit_test(test_mutation_allowed),
        cmocka_unit_test(test_graceful_shutdown_with_stream),
        cmocka_unit_test(test_shutdown_bound_cuts_stuck_stream),
        cmocka_unit_test(test_shutdown_bound_cancels_translated_stream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
