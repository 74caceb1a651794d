/* Auth on every route, walked from the route tables themselves (qr_api_route_at,
 * qr_api_ollama_route_at), so a route added later without auth fails here without anyone editing
 * this file; and SSRF: no request body, header or request target makes the daemon connect to a
 * URL the client chose. A listener owned by this test is the trap: every request names it, and it
 * must never see a connection -- until a daemon is configured with it as its upstream (the
 * positive control: upstream URLs come from configuration only). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "api/api.h"
#include "harness.h"

#define TOKEN "auth-walk-t0ken-7f3a9c"

static struct qr_child replay, daemon_;
static int trap_fd = -1;
static uint16_t trap_port;

/* ---- the trap listener ---- */

static void trap_open(void)
{
    trap_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(trap_fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(trap_fd, (struct sockaddr *) &sa, sizeof sa), 0);
    assert_int_equal(listen(trap_fd, 64), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(trap_fd, (struct sockaddr *) &sa, &len), 0);
    trap_port = ntohs(sa.sin_port);
}

/* Connections the trap accepted within wait_ms (each closed at once). */
static unsigned trap_hits(int wait_ms)
{
    unsigned hits = 0;
    struct pollfd p = {.fd = trap_fd, .events = POLLIN};
    while (poll(&p, 1, wait_ms) > 0) {
        int fd = accept4(trap_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            break;
        close(fd);
        hits++;
        wait_ms = 50; /* drain what else is queued */
    }
    return hits;
}

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    trap_open();
    qr_t_replay_start(&replay);
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN,
                                      "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=1500ms", NULL};
    qr_t_daemon_start(&daemon_, replay.port, env);
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 10000), 0);
    qr_t_stop(&replay, SIGTERM, 5000);
    if (trap_fd >= 0)
        close(trap_fd);
    curl_global_cleanup();
    return 0;
}

/* ---- helpers ---- */

static const char *const auth_ok[] = {"Authorization: Bearer " TOKEN,
                                      "Content-Type: application/json", NULL};

/* Authorization values that must all be refused. */
static const char *const wrong_auth[] = {
    "Authorization: Bearer wrong",
    "Authorization: Bearer " TOKEN "x",             /* longer */
    "Authorization: Bearer auth-walk-t0ken-7f3a9",  /* a prefix of the token */
    "Authorization: Bearer AUTH-WALK-T0KEN-7F3A9C", /* case matters in the token */
    "Authorization: Basic YXV0aC13YWxrOnQwa2Vu",    /* another scheme */
    "Authorization: " TOKEN,                        /* no scheme */
    "Authorization: Bearer",                        /* empty */
    "X-Api-Key: " TOKEN,                            /* not where the token goes */
};

static yyjson_val *err_obj(yyjson_doc *doc)
{
    return yyjson_obj_get(yyjson_doc_get_root(doc), "error");
}

/* r is the daemon's 401 in the route's error shape, with the bearer challenge. */
static void assert_401(const struct qr_t_resp *r, bool openai, bool head, const char *what)
{
    if (r->status != 401)
        fail_msg("%s: status %ld, want 401: %s", what, r->status, r->body);
    char *www = qr_t_header(r, "WWW-Authenticate");
    assert_non_null(www);
    assert_string_equal(www, "Bearer realm=\"Quantum Runtime\"");
    free(www);
    char *ct = qr_t_header(r, "Content-Type");
    assert_non_null(ct);
    assert_string_equal(ct, "application/json; charset=utf-8");
    free(ct);
    if (head) {
        assert_int_equal(r->body_len, 0);
        return;
    }
    yyjson_doc *doc = yyjson_read(r->body, r->body_len, 0);
    if (!doc)
        fail_msg("%s: 401 body is not JSON: %s", what, r->body);
    yyjson_val *e = err_obj(doc);
    assert_true(yyjson_is_obj(e));
    assert_true(yyjson_get_len(yyjson_obj_get(e, "message")) > 0);
    if (openai) {
        /* OpenAI's shape: {"error":{"message","type","param","code"}} */
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "type")), "authentication_error");
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "invalid_api_key");
        assert_non_null(yyjson_obj_get(e, "param"));
    } else {
        /* the Runtime's shape: {"error":{"code","message","request_id"}} */
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "unauthorized");
        char *rid = qr_t_header(r, "X-Quantum-Request-ID");
        assert_non_null(rid);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "request_id")), rid);
        free(rid);
    }
    /* nothing about the route leaks: the same text whatever the path */
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "message")),
                        "a valid bearer token is required");
    yyjson_doc_free(doc);
}

/* The right token got past auth to the route itself: not 401, no challenge, no 5xx on a bad
 * body, and the route exists (not the dispatcher's or the Ollama allowlist's 404). */
static void assert_served(const struct qr_t_resp *r, const char *what)
{
    assert_int_equal(r->curl_rc, 0);
    if (r->status == 401 || r->status >= 500 || r->status < 200)
        fail_msg("%s: status %ld with the right token: %s", what, r->status, r->body);
    char *www = qr_t_header(r, "WWW-Authenticate");
    assert_null(www);
    if (strstr(r->body, "no such route") || strstr(r->body, "unsupported_compatibility_route"))
        fail_msg("%s: the table names a route the daemon does not serve: %s", what, r->body);
}

/* A target for a table entry: a prefix route gets an id after its prefix. */
static void target_for(const struct qr_api_route_info *ri, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", ri->path, ri->prefix ? "walk-model" : "");
}

static void one(const char *method, const char *target, const char *const *hdrs,
                struct qr_t_resp *r)
{
    bool body = !strcmp(method, "POST") || !strcmp(method, "PUT");
    /* a body that is not JSON: every route must refuse it with a 4xx, none may act on it */
    qr_t_request(method, daemon_.port, target, hdrs, body ? "{" : NULL, body ? 1 : 0, r);
    assert_int_equal(r->curl_rc, 0);
}

/* Walk one route with one method it serves: no token, every wrong token, the right one. */
static void walk_method(const struct qr_api_route_info *ri, const char *method)
{
    char target[256], what[320];
    target_for(ri, target, sizeof target);
    snprintf(what, sizeof what, "%s %s", method, target);
    bool head = !strcmp(method, "HEAD");
    struct qr_t_resp r;

    const char *const none[] = {"Content-Type: application/json", NULL};
    one(method, target, none, &r);
    if (ri->open) {
        if (r.status == 401)
            fail_msg("%s: an open route asked for a token", what);
        char *www = qr_t_header(&r, "WWW-Authenticate");
        assert_null(www);
    } else {
        assert_401(&r, ri->openai, head, what);
    }
    qr_t_resp_free(&r);
    if (ri->open)
        return;

    for (size_t k = 0; k < QR_ARRAY_LEN(wrong_auth); k++) {
        const char *const hdrs[] = {wrong_auth[k], "Content-Type: application/json", NULL};
        one(method, target, hdrs, &r);
        char w2[480];
        snprintf(w2, sizeof w2, "%s with '%s'", what, wrong_auth[k]);
        assert_401(&r, ri->openai, head, w2);
        qr_t_resp_free(&r);
    }

    one(method, target, auth_ok, &r);
    assert_served(&r, what);
    qr_t_resp_free(&r);
    /* the scheme is case-insensitive (RFC 9110 11.1), the token is not */
    const char *const lower[] = {"Authorization: bearer " TOKEN, "Content-Type: application/json",
                                 NULL};
    one(method, target, lower, &r);
    assert_served(&r, what);
    qr_t_resp_free(&r);
}

/* A method the route does not serve: 401 without a token (auth comes before method lookup, so
 * the table cannot be probed), 405 with one. */
static void walk_unserved(const struct qr_api_route_info *ri)
{
    char target[256];
    target_for(ri, target, sizeof target);
    const char *method = !strcmp(ri->method, "PUT") ? "PATCH" : "PUT";
    struct qr_t_resp r;
    const char *const none[] = {"Content-Type: application/json", NULL};
    one(method, target, none, &r);
    if (ri->open)
        assert_int_equal(r.status, 405);
    else
        assert_401(&r, ri->openai, false, target);
    qr_t_resp_free(&r);
    one(method, target, auth_ok, &r);
    assert_int_equal(r.status, 405);
    char *allow = qr_t_header(&r, "Allow");
    assert_non_null(allow);
    assert_non_null(strstr(allow, ri->method));
    free(allow);
    qr_t_resp_free(&r);
}

/* ---- tests ---- */

static void test_every_route_requires_the_token(void **state)
{
    (void) state;
    size_t n = qr_api_route_count(), no = qr_api_ollama_route_count();
    assert_true(n > 0 && no > 0);
    bool seen_healthz = false, seen_readyz = false;
    size_t walked = 0, pairs = 0, n_shell = 0;
    struct qr_api_route_info ri;
    for (size_t i = 0; qr_api_route_at(i, &ri); i++) {
        if (ri.open) {
            /* only the health probes and the status page shell (GET /: Ollama's probe text or
               the page, GET /status: the page; both carry no data, api/status.c) are open;
               marking another route open fails here */
            if (!strcmp(ri.path, "/healthz"))
                seen_healthz = true;
            else if (!strcmp(ri.path, "/readyz"))
                seen_readyz = true;
            else if (!strcmp(ri.path, "/") || !strcmp(ri.path, "/status"))
                n_shell++;
            else
                fail_msg("route %s is served without auth", ri.path);
        }
        walk_method(&ri, ri.method);
        pairs++;
        if (!strcmp(ri.method, "GET")) {
            walk_method(&ri, "HEAD");
            pairs++;
        }
        walk_unserved(&ri);
        walked++;
    }
    assert_int_equal(walked, n);
    assert_false(qr_api_route_at(n, &ri));
    assert_true(seen_healthz && seen_readyz);
    assert_int_equal(n_shell, 2);

    size_t walked_ollama = 0;
    for (size_t i = 0; qr_api_ollama_route_at(i, &ri); i++) {
        assert_false(ri.open);
        assert_int_equal(strncmp(ri.path, "/api/", 5), 0);
        walk_method(&ri, ri.method);
        pairs++;
        walk_unserved(&ri);
        walked_ollama++;
    }
    assert_int_equal(walked_ollama, no);
    assert_false(qr_api_ollama_route_at(no, &ri));
    print_message("walked %zu routes, %zu Ollama routes, %zu route/method pairs\n", walked,
                  walked_ollama, pairs);
}

/* Paths in no table: 401 without a token, in the native shape (nothing tells an unauthenticated
 * caller whether a route exists), 404 with one. Near-misses of the open routes are not open. */
static void test_unknown_paths_are_not_open(void **state)
{
    (void) state;
    static const char *const paths[] = {
        "/nope",
        "/api/nope",
        "/api",
        "/healthz/",
        "/healthzx",
        "/HEALTHZ",
        "/readyz/x",
        "/v1",
        "/v1/chat/completion",
        "/v1/runtime/",
        "/v1/models/../v1/runtime",
        "/%2e%2e/v1/runtime",
    };
    const char *const none[] = {NULL};
    for (size_t i = 0; i < QR_ARRAY_LEN(paths); i++) {
        struct qr_t_resp r;
        qr_t_request("GET", daemon_.port, paths[i], none, NULL, 0, &r);
        assert_401(&r, false, false, paths[i]);
        qr_t_resp_free(&r);
        qr_t_request("GET", daemon_.port, paths[i], auth_ok, NULL, 0, &r);
        if (r.status != 404)
            fail_msg("GET %s with the token: %ld, want 404: %s", paths[i], r.status, r.body);
        qr_t_resp_free(&r);
    }
    /* the open routes stay open with a query string or a wrong token */
    struct qr_t_resp r;
    const char *const wrong[] = {"Authorization: Bearer wrong", NULL};
    qr_t_request("GET", daemon_.port, "/healthz?x=1", wrong, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    qr_t_request("GET", daemon_.port, "/readyz", wrong, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

/* ---- SSRF ---- */

struct probe {
    const char *method, *path, *body; /* body: every "%s" in it becomes the trap URL */
    long lo, hi;                      /* accepted status range */
};

static void ssrf_request(const struct probe *p, const char *trap, const char *const *hdrs)
{
    char body[4096];
    if (p->body) {
        /* the body names the trap wherever "%s" appears */
        size_t n = 0, tl = strlen(trap);
        for (const char *c = p->body; *c; c++) {
            assert_true(n + tl + 1 < sizeof body);
            if (c[0] == '%' && c[1] == 's') {
                memcpy(body + n, trap, tl);
                n += tl;
                c++;
            } else {
                body[n++] = *c;
            }
        }
        body[n] = '\0';
    }
    struct qr_t_resp r;
    qr_t_request(p->method, daemon_.port, p->path, hdrs, p->body ? body : NULL,
                 p->body ? strlen(body) : 0, &r);
    assert_int_equal(r.curl_rc, 0);
    if (r.status < p->lo || r.status > p->hi)
        fail_msg("%s %s: status %ld, want %ld..%ld: %s", p->method, p->path, r.status, p->lo, p->hi,
                 r.body);
    print_message("  %s %s -> %ld\n", p->method, p->path, r.status);
    qr_t_resp_free(&r);
}

static void test_no_client_controlled_upstream(void **state)
{
    (void) state;
    char trap[64];
    snprintf(trap, sizeof trap, "http://127.0.0.1:%u/x", trap_port);
    assert_int_equal(trap_hits(0), 0);

    /* URL-bearing fields the OpenAI, Ollama and proxy ecosystems use, on every route that reaches
     * a backend or names a model. The Runtime refuses them (4xx), or passes an unknown field on
     * to the configured upstream as a harmless part of the body (Ollama's /api/embed answers
     * normally); it never connects anywhere a request names. 501 on the tokenizer routes is the
     * Ollama backend having no tokenizer, not a fault. */
    static const struct probe probes[] = {
        {"POST", "/v1/chat/completions",
         "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
         "\"base_url\":\"%s\",\"api_base\":\"%s\",\"url\":\"%s\",\"endpoint\":\"%s\"}",
         400, 499},
        {"POST", "/v1/chat/completions",
         "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\",\"content\":["
         "{\"type\":\"text\",\"text\":\"what is this\"},"
         "{\"type\":\"image_url\",\"image_url\":{\"url\":\"%s\"}}]}]}",
         400, 499},
        {"POST", "/v1/completions", "{\"model\":\"%s\",\"prompt\":\"hi\",\"api_base\":\"%s\"}", 400,
         499},
        {"POST", "/v1/embeddings", "{\"model\":\"%s\",\"input\":\"hi\",\"base_url\":\"%s\"}", 400,
         499},
        {"POST", "/v1/rerank",
         "{\"model\":\"%s\",\"query\":\"q\",\"documents\":[\"a\"],\"url\":\"%s\"}", 400, 499},
        {"POST", "/api/chat",
         "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\","
         "\"images\":[\"%s\"]}],\"stream\":false}",
         400, 499},
        {"POST", "/api/generate",
         "{\"model\":\"%s\",\"prompt\":\"hi\",\"images\":[\"%s\"],\"stream\":false}", 400, 499},
        {"POST", "/api/embed", "{\"model\":\"%s\",\"input\":\"hi\",\"endpoint\":\"%s\"}", 200, 499},
        {"POST", "/api/embeddings", "{\"model\":\"%s\",\"prompt\":\"hi\"}", 200, 499},
        {"POST", "/api/show", "{\"model\":\"%s\",\"name\":\"%s\",\"from\":\"%s\"}", 200, 499},
        {"POST", "/api/pull", "{\"model\":\"%s\",\"name\":\"%s\",\"insecure\":true}", 403, 403},
        {"POST", "/api/create", "{\"model\":\"m\",\"from\":\"%s\",\"files\":{\"a\":\"%s\"}}", 403,
         403},
        {"POST", "/api/copy", "{\"source\":\"%s\",\"destination\":\"%s\"}", 403, 403},
        {"POST", "/v1/route", "{\"model\":\"%s\",\"base_url\":\"%s\"}", 400, 499},
        {"POST", "/v1/admission", "{\"model\":\"%s\",\"endpoint\":\"%s\"}", 400, 499},
        {"POST", "/v1/placement", "{\"model\":\"%s\"}", 400, 499},
        {"POST", "/v1/benchmark-plan", "{\"model\":\"%s\",\"url\":\"%s\"}", 400, 499},
        {"POST", "/v1/host/calibrate", "{\"model\":\"%s\"}", 400, 499},
        {"POST", "/v1/tokenize", "{\"model\":\"%s\",\"content\":\"hi\"}", 400, 501},
        {"POST", "/v1/detokenize", "{\"model\":\"%s\",\"tokens\":[1]}", 400, 501},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(probes); i++) {
        ssrf_request(&probes[i], trap, auth_ok);
        if (trap_hits(0))
            fail_msg("%s %s made the daemon connect to the client's URL", probes[i].method,
                     probes[i].path);
    }

    /* Headers a proxy-aware server might build an upstream URL from: the upstream is still the
     * configured one (the request reaches the replay server's /api/tags), never the trap. */
    char host[64], xfh[96], fwd[128], xou[128];
    snprintf(host, sizeof host, "Host: 127.0.0.1:%u", trap_port);
    snprintf(xfh, sizeof xfh, "X-Forwarded-Host: 127.0.0.1:%u", trap_port);
    snprintf(fwd, sizeof fwd, "Forwarded: host=127.0.0.1:%u;proto=http", trap_port);
    snprintf(xou, sizeof xou, "X-Original-URL: %s", trap);
    const char *const hdrs[] = {"Authorization: Bearer " TOKEN, host, xfh, fwd, xou,
                                "X-Forwarded-Proto: http",      NULL};
    assert_true(qr_t_replay_reset(replay.port));
    static const struct probe tags = {"GET", "/api/tags", NULL, 200, 200};
    ssrf_request(&tags, trap, hdrs);
    static const struct probe ps = {"GET", "/api/ps", NULL, 200, 200};
    ssrf_request(&ps, trap, hdrs);
    static const struct probe models = {"GET", "/v1/models", NULL, 200, 200};
    ssrf_request(&models, trap, hdrs);

    /* what reached the upstream was addressed to the configured upstream, not to the Host or
     * forwarding headers the client sent */
    char want_host[32];
    snprintf(want_host, sizeof want_host, "127.0.0.1:%u", replay.port);
    yyjson_doc *seen = qr_t_replay_requests(replay.port);
    assert_non_null(seen);
    yyjson_val *req_v, *h;
    size_t ri, rn, hi, hn, n_seen = 0;
    yyjson_arr_foreach(yyjson_doc_get_root(seen), ri, rn, req_v)
    {
        const char *host_seen = NULL;
        yyjson_arr_foreach(yyjson_obj_get(req_v, "headers"), hi, hn, h)
        {
            const char *name = yyjson_get_str(yyjson_arr_get(h, 0));
            if (name && !strcasecmp(name, "Host"))
                host_seen = yyjson_get_str(yyjson_arr_get(h, 1));
            assert_false(name &&
                         (!strcasecmp(name, "X-Forwarded-Host") || !strcasecmp(name, "Forwarded")));
        }
        assert_non_null(host_seen);
        assert_string_equal(host_seen, want_host);
        n_seen++;
    }
    assert_true(n_seen > 0); /* /api/tags and /api/ps did reach the configured upstream */
    yyjson_doc_free(seen);

    /* A model id that is a URL, in the path and in the query string. */
    char target[256];
    snprintf(target, sizeof target, "/v1/models/%s", trap);
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, target, auth_ok, NULL, 0, &r);
    if (r.status < 400 || r.status > 499)
        fail_msg("GET %s: %ld: %s", target, r.status, r.body);
    qr_t_resp_free(&r);
    /* ... and in query strings, on the registry route (its own upstream fetch) and on a route
     * proxied to the backend with the client's request target */
    static const char *const with_query[] = {"/api/tags", "/api/ps", "/api/version"};
    for (size_t i = 0; i < QR_ARRAY_LEN(with_query); i++) {
        snprintf(target, sizeof target, "%s?url=%s&base_url=%s&@127.0.0.1:%u", with_query[i], trap,
                 trap, trap_port);
        qr_t_request("GET", daemon_.port, target, hdrs, NULL, 0, &r);
        if (r.status != 200)
            fail_msg("GET %s: %ld: %s", target, r.status, r.body);
        qr_t_resp_free(&r);
    }

    /* An absolute-form request target (a proxy request) names the trap as its authority: it is
     * no route of the daemon's, never forwarded. */
    char raw[512];
    int len = snprintf(raw, sizeof raw,
                       "GET http://127.0.0.1:%u/api/tags HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                       "Authorization: Bearer " TOKEN "\r\nConnection: close\r\n\r\n",
                       trap_port, trap_port);
    char *out = qr_t_raw(daemon_.port, raw, (size_t) len, 5000);
    assert_non_null(out);
    if (strncmp(out, "HTTP/1.1 4", 10) != 0)
        fail_msg("absolute-form target: %.200s", out);
    free(out);

    /* Background work (health probes, model refresh) has time to misbehave too. */
    assert_int_equal(trap_hits(700), 0);

    /* Positive control: the same trap IS reached when configuration names it as the upstream,
     * so the assertions above can fail. */
    struct qr_child d2;
    static const char *const env2[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN,
                                       "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=500ms", NULL};
    qr_t_daemon_start(&d2, trap_port, env2);
    unsigned hits = trap_hits(3000);
    if (!hits) {
        /* no probe at start: a request that must reach the upstream */
        qr_t_request("GET", d2.port, "/api/ps", auth_ok, NULL, 0, &r);
        qr_t_resp_free(&r);
        hits = trap_hits(1000);
    }
    assert_int_equal(qr_t_stop(&d2, SIGTERM, 10000), 0);
    assert_true(hits > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_route_requires_the_token),
        cmocka_unit_test(test_unknown_paths_are_not_open),
        cmocka_unit_test(test_no_client_controlled_upstream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
