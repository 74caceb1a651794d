/* Hostile requests against the real daemon (issue 10, "Hostile input"). Two daemons: one with
 * backend=llama.cpp on the scripted model (qr-gen-scripted) and one with backend=openai in front
 * of qr-replay. Every POST route (OpenAI chat/completions/embeddings/rerank, Ollama chat/generate/
 * embed/embeddings/show, native route/placement/admission/tokenize/detokenize/benchmark-plan) gets
 * a table of hostile bodies: empty, not an object, 10 MB, nesting depth 10000, a 1e6-element
 * array, "\u0000" and raw NUL bytes, invalid UTF-8, 1e400 / -1 / 2^64 for integers, wrong types,
 * duplicate "model" keys, an unknown tool in tool_choice, a tool result for an id no assistant
 * call has. Each answer must be a 4xx (413 for the 10 MB body) in the route's error shape with a
 * non-empty message, and the daemon must answer /healthz after each. Oversized heads (a 1 MB
 * header, 10000 headers) get 431. Model names with "..", "/" and "%2e%2e", GGUF paths outside
 * models_dir and a symlink inside models_dir that points outside are refused with a 4xx and never
 * reach the engine. All failures of a table are collected and reported together. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <yyjson.h>

#include "harness.h"

static char dir[128], models[200], outside[200];
static struct qr_child llama_d, openai_d, up;

/* ---- the openai upstream -----------------------------------------------------------------------
 */

static const char UPSTREAM[] =
    "[{\"name\":\"models\",\"match\":{\"method\":\"GET\",\"path\":\"/v1/models\"},\"response\":{"
    "\"headers\":{\"Content-Type\":\"application/json\"},\"body\":{\"object\":\"list\",\"data\":"
    "[{\"id\":\"up-chat\",\"object\":\"model\",\"created\":1767225600,\"owned_by\":\"test\"}]}}},\n"
    "{\"name\":\"chat\",\"match\":{\"method\":\"POST\",\"path\":\"/v1/chat/completions\"},"
    "\"response\":{\"headers\":{\"Content-Type\":\"application/json\"},\"body\":{\"id\":\"c2\","
    "\"object\":\"chat.completion\",\"created\":1767225600,\"model\":\"up-chat\",\"choices\":"
    "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hallo!\"},\"finish_reason\":"
    "\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}}}]\n";

static int write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* 8 MiB: the 10 MB body is above it, the 1e6-element array (2 MB) below */
static const char *const LIMIT[] = {"QUANTUM_RUNTIME_MAX_REQUEST_BYTES=8MiB", NULL};

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-hostile-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    if (mkdir(models, 0700) != 0 || mkdir(outside, 0700) != 0)
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_SCRIPTED, outside, NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "qr-gen-scripted failed: %s\n", out ? out : "");
    free(out);
    out = NULL;
    char *gen2[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    if (rc == 0)
        rc = qr_t_run(gen2, NULL, 60000, &out);
    free(out);
    if (rc != 0)
        return -1;
    /* A symlink inside models_dir to a GGUF outside it: an escape, never served. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && f=$(ls *.gguf | grep -v draft | head -n1) && mv \"$f\" escape.gguf && "
             "ln -s '%s/escape.gguf' '%s/escape.gguf'",
             outside, outside, models);
    if (system(cmd) != 0)
        return -1;
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    qr_t_daemon_start_args(&llama_d, 0, LIMIT, args);

    char tdir[200], tfile[260];
    snprintf(tdir, sizeof tdir, "%s/upstream", dir);
    snprintf(tfile, sizeof tfile, "%s/up.json", tdir);
    if (mkdir(tdir, 0700) != 0 || write_file(tfile, UPSTREAM) != 0)
        return -1;
    qr_t_replay_start_dir(&up, tdir);
    char url[96];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", (unsigned) up.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url, LIMIT[0], NULL};
    qr_t_daemon_start(&openai_d, 0, env);
    return 0;
}

static int teardown(void **st)
{
    (void) st;
    int rc = 0;
    if (llama_d.pid > 0 && qr_t_stop(&llama_d, SIGTERM, 10000) != 0)
        rc = -1;
    if (openai_d.pid > 0 && qr_t_stop(&openai_d, SIGTERM, 10000) != 0)
        rc = -1;
    if (up.pid > 0)
        qr_t_stop(&up, SIGTERM, 10000);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? rc : -1;
}

/* ---- failures, collected -----------------------------------------------------------------------
 */

static char failures[32768];
static size_t n_failures;

__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    size_t used = strlen(failures);
    if (used + 2 >= sizeof failures)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failures + used, sizeof failures - used - 1, fmt, ap);
    va_end(ap);
    used = strlen(failures);
    if (used + 1 < sizeof failures) {
        failures[used] = '\n';
        failures[used + 1] = '\0';
    }
    n_failures++;
}

static void report_failures(void)
{
    if (n_failures)
        fputs(failures, stderr);
    if (n_failures)
        fail_msg("%zu hostile requests were not refused properly:\n%s", n_failures, failures);
}

/* A printf into a malloc'd string. */
__attribute__((format(printf, 1, 2))) static char *mk(const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = malloc((size_t) n + 1);
    assert_non_null(s);
    vsnprintf(s, (size_t) n + 1, fmt, ap2);
    va_end(ap2);
    return s;
}

/* ---- the routes --------------------------------------------------------------------------------
 */

enum shape { S_OPENAI, S_OLLAMA, S_NATIVE };

struct route {
    const char *path;
    enum shape shape;
    /* the rest of a valid body after "{\"model\":M" (starts with ',' or is empty) */
    const char *rest;
    /* a member whose value must be an array, and one that must be a non-negative integer:
     * ",\"NAME\":" prefixes the value; NULL when the route has none */
    const char *arr;
    const char *num;
    const char *num_close; /* what closes the number's enclosing value ("" or "}" or "]") */
    bool chat;             /* OpenAI chat: tool checks */
};

static const struct route ROUTES[] = {
    {"/v1/chat/completions", S_OPENAI, ",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]",
     ",\"messages\":", ",\"max_tokens\":", "", true},
    {"/v1/completions", S_OPENAI, ",\"prompt\":\"hi\"", ",\"stop\":", ",\"max_tokens\":", "",
     false},
    {"/v1/embeddings", S_OPENAI, ",\"input\":\"hi\"", ",\"input\":", ",\"dimensions\":", "", false},
    {"/v1/rerank", S_OPENAI, ",\"query\":\"q\",\"documents\":[\"a\"]",
     ",\"documents\":", ",\"top_n\":", "", false},
    {"/api/chat", S_OLLAMA,
     ",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]",
     ",\"messages\":", ",\"options\":{\"num_ctx\":", "}", false},
    {"/api/generate", S_OLLAMA, ",\"stream\":false,\"prompt\":\"hi\"",
     ",\"images\":", ",\"options\":{\"num_ctx\":", "}", false},
    {"/api/embed", S_OLLAMA, ",\"input\":\"hi\"", ",\"input\":", ",\"options\":{\"num_ctx\":", "}",
     false},
    {"/api/embeddings", S_OLLAMA, ",\"prompt\":\"hi\"", ",\"prompt\":", NULL, NULL, false},
    {"/api/show", S_OLLAMA, "", NULL, NULL, NULL, false},
    {"/v1/route", S_NATIVE, "", ",\"capabilities\":", NULL, NULL, false},
    {"/v1/placement", S_NATIVE, "", NULL, ",\"context\":", "", false},
    {"/v1/admission", S_NATIVE, ",\"profile\":\"quantum-coreos-tci\"", NULL,
     ",\"operator_evidence\":{\"core_budget\":", "}", false},
    {"/v1/tokenize", S_NATIVE, ",\"content\":\"hi\"", NULL, NULL, NULL, false},
    {"/v1/detokenize", S_NATIVE, ",\"tokens\":[1]", ",\"tokens\":", ",\"tokens\":[", "]", false},
    {"/v1/benchmark-plan", S_NATIVE, "", ",\"variants\":", ",\"ctx\":", "", false},
};

/* The answer is a 4xx (want: that exact status when non-zero) in the route's error shape with a
 * non-empty message; the daemon still answers /healthz. */
static void check(uint16_t port, const struct route *r, const char *what, const char *body,
                  size_t len, long want)
{
    struct qr_t_resp resp;
    const char *const hdr[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", port, r->path, hdr, body, len, &resp);
    /* The daemon answers 413 from Content-Length and closes while the client is still sending;
     * the reset can reach the client before the answer does (no lingering close yet): an empty
     * exchange is retried, a wrong answer is not. */
    for (int tries = 1; want == 413 && resp.status == 0 && tries < 5; tries++) {
        qr_t_resp_free(&resp);
        qr_t_request("POST", port, r->path, hdr, body, len, &resp);
    }
    if (resp.status < 400 || resp.status > 499 || (want && resp.status != want)) {
        note("%s %s: status %ld (curl %d), wanted %s%ld: %.200s", r->path, what, resp.status,
             resp.curl_rc, want ? "" : "a 4xx like ", want ? want : 400L,
             resp.body ? resp.body : "");
    } else {
        yyjson_doc *d = yyjson_read(resp.body, resp.body_len, 0);
        yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(d), "error");
        const char *msg = yyjson_get_str(yyjson_obj_get(e, "message"));
        bool ok;
        if (r->shape == S_OPENAI)
            ok = msg && *msg &&
                 yyjson_equals_str(yyjson_obj_get(e, "type"), "invalid_request_error");
        else if (r->shape == S_NATIVE)
            ok = msg && *msg && yyjson_is_str(yyjson_obj_get(e, "code"));
        else /* Ollama: its own {"error":"..."} or the Runtime's shape */
            ok = (yyjson_is_str(e) && *yyjson_get_str(e)) ||
                 (msg && *msg && yyjson_is_str(yyjson_obj_get(e, "code")));
        if (!ok)
            note("%s %s: %ld not in the route's error shape: %.200s", r->path, what, resp.status,
                 resp.body ? resp.body : "");
        yyjson_doc_free(d);
    }
    qr_t_resp_free(&resp);
    qr_t_request("GET", port, "/healthz", NULL, NULL, 0, &resp);
    if (resp.status != 200) {
        note("%s %s: /healthz answered %ld afterwards", r->path, what, resp.status);
        report_failures(); /* the daemon is gone: nothing after this can pass */
    }
    qr_t_resp_free(&resp);
}

static void check_str(uint16_t port, const struct route *r, const char *what, char *body, long want)
{
    check(port, r, what, body, strlen(body), want);
    free(body);
}

/* A body of roughly `size` bytes: the model, then one long string member. */
static char *big_body(const char *model, size_t size, size_t *len)
{
    char *s = malloc(size + 64);
    assert_non_null(s);
    int n = snprintf(s, 64, "{\"model\":\"%s\",\"pad\":\"", model);
    memset(s + n, 'A', size);
    memcpy(s + n + size, "\"}", 3);
    *len = (size_t) n + size + 2;
    return s;
}

static char *deep_body(const char *model, unsigned depth)
{
    size_t cap = 64 + strlen(model) + 2u * depth;
    char *s = malloc(cap);
    assert_non_null(s);
    int n = snprintf(s, cap, "{\"model\":\"%s\",\"x\":", model);
    memset(s + n, '[', depth);
    memset(s + n + depth, ']', depth);
    memcpy(s + n + 2u * depth, "}", 2);
    return s;
}

/* {"model":M<arr>[0,0,...]} with count elements */
static char *huge_array(const char *model, const char *arr, size_t count)
{
    size_t cap = 64 + strlen(model) + strlen(arr) + 2 * count;
    char *s = malloc(cap);
    assert_non_null(s);
    int n = snprintf(s, cap, "{\"model\":\"%s\"%s[", model, arr);
    char *p = s + n;
    for (size_t i = 0; i < count; i++) {
        *p++ = '0';
        *p++ = ',';
    }
    p[-1] = ']';
    memcpy(p, "}", 2);
    return s;
}

static void hostile_bodies(uint16_t port, const char *model)
{
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        const struct route *r = &ROUTES[i];
        const char *M = model;
        /* not JSON objects */
        if (strcmp(r->path, "/v1/benchmark-plan")) /* there an empty body is {} (API.md) */
            check(port, r, "empty body", "", 0, 400);
        static const char *const NOT_OBJ[] = {"[]", "42", "null", "\"x\"", "true", "{", "{}x"};
        for (size_t k = 0; k < sizeof NOT_OBJ / sizeof NOT_OBJ[0]; k++)
            check(port, r, NOT_OBJ[k], NOT_OBJ[k], strlen(NOT_OBJ[k]), 400);
        /* sizes */
        size_t len = 0;
        char *b = big_body(M, 10u << 20, &len);
        check(port, r, "10 MB body", b, len, 413);
        free(b);
        check_str(port, r, "nesting depth 10000", deep_body(M, 10000), 0);
        if (r->arr)
            check_str(port, r, "1e6-element array", huge_array(M, r->arr, 1000000), 0);
        /* strings */
        check_str(port, r, "\\u0000 in model", mk("{\"model\":\"a\\u0000%s\"%s}", M, r->rest), 0);
        static const char RAW_NUL[] = "{\"model\":\"a\0b\"}";
        check(port, r, "raw NUL byte", RAW_NUL, sizeof RAW_NUL - 1, 400);
        check_str(port, r, "invalid UTF-8 in model", mk("{\"model\":\"\xff\xfe%s\"%s}", M, r->rest),
                  400);
        check_str(port, r, "invalid UTF-8 in a string",
                  mk("{\"model\":\"%s\",\"x\":\"\xc3\x28\xed\xa0\x80\"%s}", M, r->rest), 400);
        check_str(port, r, "lone surrogate escape", mk("{\"model\":\"%s\\ud800\"%s}", M, r->rest),
                  0);
        /* numbers and types */
        static const char *const BAD_NUM[] = {
            "1e400", "-1", "18446744073709551616", "1.5", "\"8\"", "[]", "true", "{}"};
        for (size_t k = 0; r->num && k < sizeof BAD_NUM / sizeof BAD_NUM[0]; k++) {
            /* Ollama truncates a fractional integer option as Go's Options.FromMap does; rerank
             * clamps a huge top_n to "every document" (API.md): both by design */
            if ((r->shape == S_OLLAMA && !strcmp(BAD_NUM[k], "1.5")) ||
                (!strcmp(r->path, "/v1/rerank") && BAD_NUM[k][0] == '1' && BAD_NUM[k][1] == '8'))
                continue;
            char *what = mk("integer %s", BAD_NUM[k]);
            check_str(
                port, r, what,
                mk("{\"model\":\"%s\"%s%s%s%s}", M, r->rest, r->num, BAD_NUM[k], r->num_close), 0);
            free(what);
        }
        static const char *const BAD_STR[] = {"1", "[\"x\"]", "{}", "true", "1e400"};
        for (size_t k = 0; k < sizeof BAD_STR / sizeof BAD_STR[0]; k++) {
            char *what = mk("model %s", BAD_STR[k]);
            check_str(port, r, what, mk("{\"model\":%s%s}", BAD_STR[k], r->rest), 0);
            free(what);
        }
        if (r->arr && strcmp(r->arr, ",\"input\":") && strcmp(r->arr, ",\"prompt\":"))
            check_str(port, r, "number for an array",
                      mk("{\"model\":\"%s\"%s%s7}", M, r->rest, r->arr), 0);
        /* duplicate keys: a later "model" must not override or hide the first */
        check_str(port, r, "duplicate model keys",
                  mk("{\"model\":\"%s\",\"model\":\"%s\"%s}", M, M, r->rest), 400);
        check_str(port, r, "duplicate model keys, different",
                  mk("{\"model\":\"no-such-model\",\"model\":\"%s\"%s}", M, r->rest), 0);
        if (!r->chat)
            continue;
        check_str(port, r, "tool_choice naming an unknown tool",
                  mk("{\"model\":\"%s\"%s,\"tools\":[{\"type\":\"function\",\"function\":{"
                     "\"name\":\"get_time\",\"parameters\":{\"type\":\"object\"}}}],"
                     "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
                     M, r->rest),
                  400);
        check_str(port, r, "tool result for an unknown id",
                  mk("{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                     "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\","
                     "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":"
                     "\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"x\"},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_404\",\"content\":\"x\"}]}",
                     M),
                  400);
        check_str(port, r, "tool result with no assistant call",
                  mk("{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                     "{\"role\":\"tool\",\"tool_call_id\":\"call_9\",\"content\":\"x\"}]}",
                     M),
                  400);
    }
}

static void test_hostile_bodies_llamacpp(void **st)
{
    (void) st;
    n_failures = 0;
    failures[0] = '\0';
    hostile_bodies(llama_d.port, "scripted-chat");
    report_failures();
}

static void test_hostile_bodies_openai(void **st)
{
    (void) st;
    n_failures = 0;
    failures[0] = '\0';
    hostile_bodies(openai_d.port, "up-chat");
    report_failures();
}

/* ---- oversized heads ---------------------------------------------------------------------------
 */

static void check_head(uint16_t port, const char *what, const char *const *hdr)
{
    struct qr_t_resp r;
    const char *body = "{\"model\":\"scripted-chat\",\"content\":\"hi\"}";
    qr_t_request("POST", port, "/v1/tokenize", hdr, body, strlen(body), &r);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(d), "error");
    if (r.status != 431 ||
        !yyjson_equals_str(yyjson_obj_get(e, "code"), "request_header_fields_too_large") ||
        !yyjson_get_str(yyjson_obj_get(e, "message")))
        fail_msg("%s: %ld (curl %d) %s", what, r.status, r.curl_rc, r.body ? r.body : "");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
    qr_t_request("GET", port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

/* libcurl will not send a 1 MB header line: a raw exchange, writing with MSG_NOSIGNAL and reading
 * whatever the daemon answered before it closed. */
static char *raw_big_header(uint16_t port);

static void check_raw_big_header(uint16_t port)
{
    char *resp = raw_big_header(port);
    for (int tries = 1; !resp[0] && tries < 5; tries++) { /* reset before the answer: as above */
        free(resp);
        resp = raw_big_header(port);
    }
    if (strncmp(resp, "HTTP/1.1 431 ", 13) || !strstr(resp, "request_header_fields_too_large"))
        fail_msg("1 MB header: %.300s", resp);
    free(resp);
    struct qr_t_resp h;
    qr_t_request("GET", port, "/healthz", NULL, NULL, 0, &h);
    assert_int_equal(h.status, 200);
    qr_t_resp_free(&h);
}

/* One exchange; the answer (malloc'd, "" when none came). */
static char *raw_big_header(uint16_t port)
{
    const size_t big = 1u << 20;
    char *raw = malloc(big + 256);
    assert_non_null(raw);
    int n = snprintf(raw, 256,
                     "POST /v1/tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n"
                     "X-Big: ");
    memset(raw + n, 'a', big);
    memcpy(raw + n + big, "\r\n\r\n{}", 7);
    size_t len = (size_t) n + big + 6;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    for (size_t off = 0; off < len;) {
        ssize_t w = send(fd, raw + off, len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t) w;
    }
    const size_t cap = 4096;
    char *resp = malloc(cap);
    assert_non_null(resp);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < cap && (r = recv(fd, resp + got, cap - 1 - got, 0)) > 0)
        got += (size_t) r;
    resp[got] = '\0';
    close(fd);
    free(raw);
    return resp;
}

static void test_oversized_heads(void **st)
{
    (void) st;
    check_raw_big_header(llama_d.port);
    check_raw_big_header(openai_d.port);
    enum { N = 10000 };
    const char **many = calloc(N + 1, sizeof(*many));
    char(*names)[24] = calloc(N, sizeof(*names));
    assert_non_null(many);
    assert_non_null(names);
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "X-H%d: v", i);
        many[i] = names[i];
    }
    check_head(llama_d.port, "10000 headers", many);
    check_head(openai_d.port, "10000 headers", many);
    free(many);
    free(names);
}

/* ---- model names and paths ---------------------------------------------------------------------
 */

static const char *const BAD_NAMES[] = {"..",
                                        "../scripted-chat",
                                        "a/../../etc/passwd",
                                        "%2e%2e",
                                        "%2e%2e%2fetc%2fpasswd",
                                        "/etc/passwd",
                                        "scripted-chat/..",
                                        "..\\..\\x",
                                        "escape",
                                        "escape.gguf",
                                        "models/escape.gguf",
                                        "file:///etc/passwd",
                                        "models:../outside/escape.gguf",
                                        "models:escape.gguf"};

static void test_model_paths(void **st)
{
    (void) st;
    n_failures = 0;
    failures[0] = '\0';
    uint16_t port = llama_d.port;
    /* the escaping symlink is not a model */
    struct qr_t_resp r;
    qr_t_request("GET", port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *md = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *data = yyjson_obj_get(yyjson_doc_get_root(md), "data"), *e;
    size_t di, dmax;
    yyjson_arr_foreach(data, di, dmax, e)
    {
        const char *id = yyjson_get_str(yyjson_obj_get(e, "id"));
        if (id && strstr(id, "escape"))
            note("/v1/models lists '%s', the symlink that escapes models_dir", id);
    }
    /* ... and says why it was skipped */
    const char *esc = strstr(r.body, "a symlink that resolves outside models_dir");
    if (!esc)
        note("/v1/models does not name the escaping symlink as a problem");
    yyjson_doc_free(md);
    qr_t_resp_free(&r);
    qr_t_request("GET", port, "/api/tags", NULL, NULL, 0, &r);
    if (r.status != 200 || strstr(r.body, "escape"))
        note("/api/tags: %ld %.400s", r.status, r.body ? r.body : "");
    qr_t_resp_free(&r);
    static const struct route NAMED[] = {
        {"/v1/chat/completions", S_OPENAI, ",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]",
         NULL, NULL, NULL, false},
        {"/v1/completions", S_OPENAI, ",\"prompt\":\"hi\"", NULL, NULL, NULL, false},
        {"/api/chat", S_OLLAMA,
         ",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"hi\"}]",
         NULL, NULL, NULL, false},
        {"/api/generate", S_OLLAMA, ",\"stream\":false,\"prompt\":\"hi\"", NULL, NULL, NULL, false},
        {"/api/show", S_OLLAMA, "", NULL, NULL, NULL, false},
        {"/v1/route", S_NATIVE, "", NULL, NULL, NULL, false},
        {"/v1/placement", S_NATIVE, "", NULL, NULL, NULL, false},
        {"/v1/tokenize", S_NATIVE, ",\"content\":\"hi\"", NULL, NULL, NULL, false},
    };
    for (size_t i = 0; i < sizeof NAMED / sizeof NAMED[0]; i++) {
        for (size_t k = 0; k < sizeof BAD_NAMES / sizeof BAD_NAMES[0]; k++) {
            char *what = mk("model '%s'", BAD_NAMES[k]);
            check_str(port, &NAMED[i], what,
                      mk("{\"model\":\"%s\"%s}", BAD_NAMES[k], NAMED[i].rest), 0);
            free(what);
        }
    }
    /* /v1/placement by path: outside models_dir, through "..", through the symlink */
    const struct route *pl = &NAMED[6];
    char *paths[] = {mk("%s/escape.gguf", outside),
                     mk("%s/../outside/escape.gguf", models),
                     mk("%s/escape.gguf", models),
                     mk("/etc/passwd"),
                     mk("escape.gguf"),
                     mk("../outside/escape.gguf")};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        char *what = mk("path '%s'", paths[k]);
        check_str(port, pl, what, mk("{\"path\":\"%s\"}", paths[k]), 0);
        free(what);
        free(paths[k]);
    }
    /* the engine never opened the escaping file */
    assert_false(qr_t_log_contains(&llama_d, "outside/escape.gguf"));
    report_failures();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_bodies_llamacpp),
        cmocka_unit_test(test_hostile_bodies_openai),
        cmocka_unit_test(test_oversized_heads),
        cmocka_unit_test(test_model_paths),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
