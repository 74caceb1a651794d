/* backend=openai against replayed vLLM and mlx_lm.server upstreams, through the real daemon.
 *
 * qr-replay serves the transcripts in tests/cases/replay-vllm and tests/cases/replay-mlx, written
 * from wire-protocols.md C/D and its quirk table E (each transcript names the quirk it
 * reproduces). For every transcript the real daemon runs with backend=openai and the reasoning
 * field of that era, a client asks through the OpenAI route and the Ollama route, and the test
 * asserts the normalized answer exactly (the daemon's own ids and timestamps masked) and the exact
 * request the upstream received (/__replay/requests). Requests are told apart by the marker
 * `case=NAME;` in the user message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

#define VM "Qwen/Qwen3-8B"
#define MM "mlx-community/Qwen3-4B-4bit"

/* ---- expected client output, OpenAI SSE (id and created masked by norm()) ---- */
#define OA_EV(model, choices, usage)                                                               \
    "data: "                                                                                       \
    "{\"id\":\"chatcmpl-ID\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":"        \
    "\"" model "\",\"choices\":[" choices "]" usage "}\n\n"
#define CH(delta, finish)                                                                          \
    "{\"index\":0,\"delta\":" delta ",\"logprobs\":null,\"finish_reason\":" finish "}"
#define UN ",\"usage\":null" /* on every chunk when the client asked for usage */
#define OA_USAGE(model, u)                                                                         \
    "data: "                                                                                       \
    "{\"id\":\"chatcmpl-ID\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":"        \
    "\"" model "\",\"choices\":[],\"usage\":" u "}\n\n"
#define OA_DONE "data: [DONE]\n\n"
#define OA_ERR(msg)                                                                                \
    "data: {\"error\":{\"message\":\"" msg                                                         \
    "\",\"type\":\"server_error\",\"code\":\"upstream_error\","                                    \
    "\"param\":null}}\n\n"
#define ROLE  "{\"role\":\"assistant\",\"content\":\"\"}"
#define RC(t) "{\"reasoning_content\":\"" t "\"}"
#define CT(t) "{\"content\":\"" t "\"}"
#define TC_START(i, id, name)                                                                      \
    "{\"tool_calls\":[{\"index\":" #i ",\"id\":\"" id                                              \
    "\",\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":\"\"}}]}"
#define TC_ARGS(i, a) "{\"tool_calls\":[{\"index\":" #i ",\"function\":{\"arguments\":\"" a "\"}}]}"

/* ---- expected client output, Ollama NDJSON (created_at masked) ---- */
#define OL(model, msg)                                                                             \
    "{\"model\":\"" model "\",\"created_at\":\"T\",\"message\":{\"role\":\"assistant\"," msg       \
    "},\"done\":false}\n"
#define OL_DONE(model, tail)                                                                       \
    "{\"model\":\"" model "\",\"created_at\":\"T\",\"message\":{\"role\":\"assistant\","           \
    "\"content\":\"\"},\"done\":true" tail "}\n"

/* Tool-call ids and arguments as the transcripts send them (JSON-escaped inside strings). */
#define ID0  "chatcmpl-tool-3f1a9c2e7b5d4e8f9a0b1c2d3e4f5a6b"
#define ID1  "chatcmpl-tool-7c2b8e1f4a6d4c9e8b7a6f5e4d3c2b1a"
#define MU0  "0b7e4d1c-9a2f-4e3b-8c5d-6f1a2b3c4d5e"
#define MU1  "9c8d7e6f-5a4b-4c3d-9e2f-1a0b9c8d7e6f"
#define A0_0 "{\\\"city\\\": \\\"Mü"
#define A0_1 "nchen\\\", \\\"days\\\": 3, "
#define A0_2 "\\\"units\\\": \\\"metric\\\"}"
#define A0   A0_0 A0_1 A0_2
#define A1_0 "{\\\"timezone\\\": "
#define A1_1 "\\\"Europe/Berlin\\\"}"
#define A1   A1_0 A1_1
#define OBJ0 "{\"city\":\"München\",\"days\":3,\"units\":\"metric\"}"
#define OBJ1 "{\"timezone\":\"Europe/Berlin\"}"
#define OL_TC(id, i, name, obj)                                                                    \
    "{\"id\":\"" id "\",\"function\":{\"index\":" #i ",\"name\":\"" name "\",\"arguments\":" obj   \
    "}}"

/* The tools a client offers (OpenAI and Ollama accept the same shape). */
#define TOOLS                                                                                      \
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"     \
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}},{\"type\":\"function\","        \
    "\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":\"object\",\"properties\":"      \
    "{\"timezone\":{\"type\":\"string\"}}}}}]"

#define USAGE_ASK ",\"stream_options\":{\"include_usage\":true}"

static struct qr_child up_vllm, up_mlx;
static struct qr_child d_new;  /* vLLM >= 0.16 and MLX: reasoning_field=reasoning */
static struct qr_child d_old;  /* vLLM <= 0.15: reasoning_field=reasoning_content */
static struct qr_child d_mlx;  /* mlx_lm.server, reasoning_field=reasoning, openai_dialect=mlx-lm */
static struct qr_child d_auto; /* vLLM, nothing configured: the dialect and its era are probed */

/* field / dialect NULL: not configured (the profile's field; openai_dialect=auto). */
static void start_daemon(struct qr_child *d, uint16_t up_port, const char *field,
                         const char *dialect)
{
    char url[96], rf[96], dl[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", up_port);
    snprintf(rf, sizeof(rf), "QUANTUM_RUNTIME_OPENAI_REASONING_FIELD=%s", field ? field : "");
    snprintf(dl, sizeof(dl), "QUANTUM_RUNTIME_OPENAI_DIALECT=%s", dialect ? dialect : "");
    const char *env[5] = {"QUANTUM_RUNTIME_BACKEND=openai", url, NULL, NULL, NULL};
    size_t n = 2;
    if (field)
        env[n++] = rf;
    if (dialect)
        env[n++] = dl;
    qr_t_daemon_start(d, 0, env);
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start_dir(&up_vllm, QR_TEST_CASES "/replay-vllm");
    qr_t_replay_start_dir(&up_mlx, QR_TEST_CASES "/replay-mlx");
    start_daemon(&d_new, up_vllm.port, "reasoning", NULL);
    start_daemon(&d_old, up_vllm.port, "reasoning_content", NULL);
    start_daemon(&d_mlx, up_mlx.port, "reasoning", "mlx-lm");
    start_daemon(&d_auto, up_vllm.port, NULL, NULL);
    return 0;
}

static int teardown(void **state)
{
    assert_int_equal(qr_t_stop(&d_new, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&d_old, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&d_mlx, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&d_auto, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&up_vllm, SIGTERM, 5000), 0);
    assert_int_equal(qr_t_stop(&up_mlx, SIGTERM, 5000), 0);
    curl_global_cleanup();
    return 0;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The client answer with what varies per run masked: the daemon's completion ids
 * ("chatcmpl-" + hex; tool-call ids such as chatcmpl-tool-... are kept), "created" seconds and
 * Ollama's "created_at". */
static char *norm(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    assert_non_null(out);
    size_t o = 0;
    static const char id[] = "\"id\":\"chatcmpl-",
                      cr[] = "\"created\":", ca[] = "\"created_at\":\"";
    for (size_t i = 0; i < n;) {
        if (strncmp(s + i, id, sizeof(id) - 1) == 0) {
            size_t k = i + sizeof(id) - 1;
            while (is_hex(s[k]))
                k++;
            if (k - (i + sizeof(id) - 1) >= 8 && s[k] == '"') {
                memcpy(out + o, "\"id\":\"chatcmpl-ID\"", 18);
                o += 18;
                i = k + 1;
                continue;
            }
        }
        if (strncmp(s + i, cr, sizeof(cr) - 1) == 0 && s[i + sizeof(cr) - 1] >= '0' &&
            s[i + sizeof(cr) - 1] <= '9') {
            size_t k = i + sizeof(cr) - 1;
            while (s[k] >= '0' && s[k] <= '9')
                k++;
            memcpy(out + o, "\"created\":0", 11);
            o += 11;
            i = k;
            continue;
        }
        if (strncmp(s + i, ca, sizeof(ca) - 1) == 0) {
            const char *q = strchr(s + i + sizeof(ca) - 1, '"');
            if (q) {
                memcpy(out + o, "\"created_at\":\"T\"", 16);
                o += 16;
                i = (size_t) (q - s) + 1;
                continue;
            }
        }
        out[o++] = s[i++];
    }
    out[o] = '\0';
    return out;
}

static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    assert_true(n >= 0);
    char *s = malloc((size_t) n + 1);
    assert_non_null(s);
    va_start(ap, f);
    vsnprintf(s, (size_t) n + 1, f, ap);
    va_end(ap);
    return s;
}

/* A client chat body: one user message carrying the case marker, extra members appended. */
static char *client_body(const char *model, const char *marker, bool stream, const char *extra)
{
    return fmt("{\"model\":\"%s\",\"stream\":%s,\"messages\":[{\"role\":\"user\",\"content\":"
               "\"case=%s; hi\"}]%s}",
               model, stream ? "true" : "false", marker, extra ? extra : "");
}

/* The mlx-lm profile's explicit defaults for what a client leaves unset (quirk 36). */
#define MLX_DEFAULTS ",\"temperature\":0.8,\"max_tokens\":8192"

/* What the daemon must send upstream for client_body(): the model name, the message, mid
 * (tools...), MLX's explicit temperature and max_tokens, stream explicit, and stream_options only
 * when streaming (quirks 26 and 39: always exactly {"include_usage":true}). */
static char *upstream_body(const char *model, const char *marker, bool stream, const char *mid)
{
    return fmt("{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"case=%s; hi\"}]"
               "%s%s,\"stream\":%s%s}",
               model, marker, mid ? mid : "", strcmp(model, MM) == 0 ? MLX_DEFAULTS : "",
               stream ? "true" : "false", stream ? USAGE_ASK : "");
}

static void replay_reset(const struct qr_child *up)
{
    assert_true(qr_t_replay_reset(up->port));
}

static bool has_header(yyjson_val *req, const char *name)
{
    size_t i, max;
    yyjson_val *h;
    yyjson_arr_foreach(yyjson_obj_get(req, "headers"), i, max, h)
    {
        const char *k = yyjson_get_str(yyjson_arr_get(h, 0));
        if (k && strcasecmp(k, name) == 0)
            return true;
    }
    return false;
}

/* The one chat request the upstream received since the last reset: matched by the expected
 * exchange, its exact body, and (HTTP/1.0-only MLX, quirk 31) a Content-Length, never chunked. */
static void expect_upstream(const struct qr_child *up, const char *exchange, const char *want_body)
{
    struct qr_t_resp r;
    qr_t_request("GET", up->port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    size_t i, max, n = 0;
    yyjson_val *q, *chat = NULL;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, max, q)
    {
        if (strcmp(yyjson_get_str(yyjson_obj_get(q, "path")), "/v1/chat/completions") == 0) {
            chat = q;
            n++;
        }
    }
    assert_int_equal(n, 1);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(chat, "method")), "POST");
    const char *matched = yyjson_get_str(yyjson_obj_get(chat, "matched"));
    assert_non_null(matched);
    assert_string_equal(matched, exchange);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(chat, "body")), want_body);
    assert_true(has_header(chat, "Content-Length"));
    assert_false(has_header(chat, "Transfer-Encoding"));
    assert_false(has_header(chat, "Authorization")); /* no key configured: none sent */
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
}

/* One client request through the daemon d: status, Content-Type prefix and the exact (masked)
 * answer; then the exact upstream request. want_up NULL: not checked (the caller does). */
static void exchange(const struct qr_child *d, const struct qr_child *up, const char *path,
                     const char *body, long want_status, const char *want_ctype,
                     const char *want_out, const char *up_exchange, const char *want_up)
{
    replay_reset(up);
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", d->port, path, hdrs, body, strlen(body), &r);
    assert_int_equal(r.curl_rc, 0);
    char *ct = qr_t_header(&r, "Content-Type");
    assert_non_null(ct);
    if (strncmp(ct, want_ctype, strlen(want_ctype)) != 0)
        fail_msg("%s %s: Content-Type '%s', want '%s'", path, body, ct, want_ctype);
    free(ct);
    char *got = norm(r.body);
    if (r.status != want_status || strcmp(got, want_out) != 0) {
        fprintf(stderr, "%s %s\n-- status %ld (want %ld), got:\n%s\n-- want:\n%s\n", path, body,
                r.status, want_status, got, want_out);
        fail_msg("%s: unexpected answer (printed above)", path);
    }
    free(got);
    qr_t_resp_free(&r);
    if (up_exchange)
        expect_upstream(up, up_exchange, want_up);
}

#define SSE    "text/event-stream"
#define NDJSON "application/x-ndjson"
#define JSON   "application/json"

/* Shorthands: marker = exchange name; body and upstream body built from it. */
static void oa_stream(const struct qr_child *d, const struct qr_child *up, const char *model,
                      const char *marker, const char *extra, const char *up_mid, const char *want)
{
    char *b = client_body(model, marker, true, extra);
    char *u = upstream_body(model, marker, true, up_mid);
    exchange(d, up, "/v1/chat/completions", b, 200, SSE, want, marker, u);
    free(b);
    free(u);
}

static void oa_whole(const struct qr_child *d, const struct qr_child *up, const char *model,
                     const char *marker, const char *extra, const char *up_mid, long status,
                     const char *want)
{
    char *b = client_body(model, marker, false, extra);
    char *u = upstream_body(model, marker, false, up_mid);
    exchange(d, up, "/v1/chat/completions", b, status, JSON, want, marker, u);
    free(b);
    free(u);
}

static void ol_chat(const struct qr_child *d, const struct qr_child *up, const char *model,
                    const char *marker, bool stream, const char *extra, const char *up_mid,
                    long status, const char *want)
{
    char *b = client_body(model, marker, stream, extra);
    char *u = upstream_body(model, marker, stream, up_mid);
    exchange(d, up, "/api/chat", b, status, stream && status == 200 ? NDJSON : JSON, want, marker,
             u);
    free(b);
    free(u);
}

/* ======================================================================================== */
/* vLLM                                                                                     */
/* ======================================================================================== */

/* Quirk 24 + 21: all three reasoning eras give one normalized stream: reasoning_content deltas
 * (never doubled when vLLM 0.11.1-0.15 sends both names), content deltas, stop, usage:null on
 * every chunk and the usage chunk (cached tokens kept) before [DONE]. */
/* clang-format off */
#define REASONING_STREAM_OA(model, usage_json)                                                     \
    OA_EV(model, CH(ROLE, "null"), UN)                                                             \
    OA_EV(model, CH(RC("The user"), "null"), UN)                                                   \
    OA_EV(model, CH(RC(" greets me."), "null"), UN)                                                \
    OA_EV(model, CH(RC(" Answer briefly."), "null"), UN)                                           \
    OA_EV(model, CH(CT("Grüße"), "null"), UN)                                                      \
    OA_EV(model, CH(CT(" aus"), "null"), UN)                                                       \
    OA_EV(model, CH(CT(" Köln ✓"), "null"), UN)                                                    \
    OA_EV(model, CH("{}", "\"stop\""), UN)                                                         \
    OA_USAGE(model, usage_json)                                                                    \
    OA_DONE

#define REASONING_STREAM_OL(model, tail)                                                           \
    OL(model, "\"content\":\"\",\"thinking\":\"The user\"")                                        \
    OL(model, "\"content\":\"\",\"thinking\":\" greets me.\"")                                     \
    OL(model, "\"content\":\"\",\"thinking\":\" Answer briefly.\"")                                \
    OL(model, "\"content\":\"Grüße\"")                                                             \
    OL(model, "\"content\":\" aus\"")                                                              \
    OL(model, "\"content\":\" Köln ✓\"")                                                           \
    OL_DONE(model, tail)
/* clang-format on */

static const char *const eras[] = {"vllm-q24-reasoning", "vllm-q24-both",
                                   "vllm-q24-reasoning-content"};

static void test_vllm_q24_reasoning_stream(void **state)
{
    for (size_t i = 0; i < 3; i++) {
        char *m = fmt("%s-stream", eras[i]);
        oa_stream(&d_new, &up_vllm, VM, m, USAGE_ASK, NULL,
                  REASONING_STREAM_OA(VM, "{\"prompt_tokens\":31,\"completion_tokens\":14,"
                                          "\"total_tokens\":45,\"prompt_tokens_details\":"
                                          "{\"cached_tokens\":16}}"));
        ol_chat(&d_new, &up_vllm, VM, m, true, NULL, NULL, 200,
                REASONING_STREAM_OL(VM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":31,"
                                        "\"eval_count\":14"));
        /* the old-era daemon reads both names too */
        ol_chat(&d_old, &up_vllm, VM, m, true, NULL, NULL, 200,
                REASONING_STREAM_OL(VM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":31,"
                                        "\"eval_count\":14"));
        free(m);
    }
}

static void test_vllm_q24_reasoning_whole(void **state)
{
    for (size_t i = 0; i < 3; i++) {
        char *m = fmt("%s-whole", eras[i]);
        oa_whole(
            &d_new, &up_vllm, VM, m, NULL, NULL, 200,
            "{\"id\":\"chatcmpl-ID\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"" VM
            "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
            "\"Grüße aus Köln ✓\",\"reasoning_content\":\"The user greets me. Answer "
            "briefly.\"},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":{"
            "\"prompt_tokens\":31,\"completion_tokens\":14,\"total_tokens\":45}}\n");
        ol_chat(&d_old, &up_vllm, VM, m, false, NULL, NULL, 200,
                "{\"model\":\"" VM "\",\"created_at\":\"T\",\"message\":{\"role\":\"assistant\","
                "\"content\":\"Grüße aus Köln ✓\",\"thinking\":\"The user greets me. Answer "
                "briefly.\"},\"done\":true,\"done_reason\":\"stop\",\"prompt_eval_count\":31,"
                "\"eval_count\":14}\n");
        free(m);
    }
}

/* Quirk 24, input side: assistant reasoning of an earlier turn goes upstream under the field of
 * the configured era, from an OpenAI client (reasoning_content) and an Ollama client (thinking). */
static void test_vllm_q24_history_field(void **state)
{
    static const char *const in[] = {"\"reasoning_content\"", "\"thinking\""};
    static const char *const path[] = {"/v1/chat/completions", "/api/chat"};
    const struct qr_child *d[] = {&d_new, &d_old};
    static const char *const field[] = {"reasoning", "reasoning_content"};
    for (size_t c = 0; c < 2; c++) {
        for (size_t e = 0; e < 2; e++) {
            char *body = fmt("{\"model\":\"" VM "\",\"stream\":false,\"messages\":[{\"role\":"
                             "\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
                             "\"Hallo\",%s:\"Greet back.\"},{\"role\":\"user\",\"content\":"
                             "\"case=vllm-q24-reasoning-whole; hi\"}]}",
                             in[c]);
            char *want_up = fmt("{\"model\":\"" VM "\",\"messages\":[{\"role\":\"user\","
                                "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
                                "\"Hallo\",\"%s\":\"Greet back.\"},{\"role\":\"user\","
                                "\"content\":\"case=vllm-q24-reasoning-whole; hi\"}],"
                                "\"stream\":false}",
                                field[e]);
            replay_reset(&up_vllm);
            struct qr_t_resp r;
            qr_t_request("POST", d[e]->port, path[c], NULL, body, strlen(body), &r);
            assert_int_equal(r.status, 200);
            assert_non_null(strstr(r.body, "Grüße aus Köln ✓"));
            qr_t_resp_free(&r);
            expect_upstream(&up_vllm, "vllm-q24-reasoning-whole", want_up);
            free(body);
            free(want_up);
        }
    }
}

/* C.4 / quirk 27: id+name first (no arguments key upstream), then fragments; the client gets
 * type "function" and arguments "" on the first delta, the fragments as sent, finish tool_calls. */
/* clang-format off */
static void test_vllm_tools_stream(void **state)
{
#define OA_TOOLS ",\"tools\":" TOOLS ",\"tool_choice\":\"auto\""
#define OL_TOOLS ",\"tools\":" TOOLS
    oa_stream(&d_new, &up_vllm, VM, "vllm-tools-stream", OA_TOOLS USAGE_ASK, OA_TOOLS,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(TC_START(0, ID0, "get_weather"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_1), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_2), "null"), UN)
              OA_EV(VM, CH("{}", "\"tool_calls\""), UN)
              OA_USAGE(VM, "{\"prompt_tokens\":88,\"completion_tokens\":27,\"total_tokens\":115}")
              OA_DONE);
    ol_chat(&d_new, &up_vllm, VM, "vllm-tools-stream", true, OL_TOOLS, OL_TOOLS, 200,
            OL(VM, "\"content\":\"\",\"tool_calls\":[" OL_TC(ID0, 0, "get_weather", OBJ0) "]")
            OL_DONE(VM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":88,\"eval_count\":27"));
#undef OA_TOOLS
#undef OL_TOOLS
}
/* clang-format on */

/* C.4: two parallel calls, index 0 then 1, each with its own fragments, after reasoning. */
/* clang-format off */
static void test_vllm_parallel_stream(void **state)
{
    oa_stream(&d_new, &up_vllm, VM, "vllm-parallel-stream", USAGE_ASK, NULL,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(RC("Two tools needed."), "null"), UN)
              OA_EV(VM, CH(TC_START(0, ID0, "get_weather"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_1), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_2), "null"), UN)
              OA_EV(VM, CH(TC_START(1, ID1, "get_time"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(1, A1_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(1, A1_1), "null"), UN)
              OA_EV(VM, CH("{}", "\"tool_calls\""), UN)
              OA_USAGE(VM, "{\"prompt_tokens\":120,\"completion_tokens\":41,\"total_tokens\":161,"
                           "\"prompt_tokens_details\":{\"cached_tokens\":64}}")
              OA_DONE);
    ol_chat(&d_old, &up_vllm, VM, "vllm-parallel-stream", true, NULL, NULL, 200,
            OL(VM, "\"content\":\"\",\"thinking\":\"Two tools needed.\"")
            OL(VM, "\"content\":\"\",\"tool_calls\":[" OL_TC(ID0, 0, "get_weather", OBJ0) "]")
            OL(VM, "\"content\":\"\",\"tool_calls\":[" OL_TC(ID1, 1, "get_time", OBJ1) "]")
            OL_DONE(VM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":120,\"eval_count\":41"));
}
/* clang-format on */

/* clang-format off */
#define TOOLS_WHOLE_OA(model, id0, id1, usage)                                                     \
    "{\"id\":\"chatcmpl-ID\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"" model      \
    "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null,"           \
    "\"reasoning_content\":\"Two tools needed.\",\"tool_calls\":["                                 \
    "{\"id\":\"" id0 "\",\"type\":\"function\","                                                   \
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"" A0 "\"}},"                           \
    "{\"id\":\"" id1 "\",\"type\":\"function\","                                                   \
    "\"function\":{\"name\":\"get_time\",\"arguments\":\"" A1 "\"}}]},"                            \
    "\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],\"usage\":" usage "}\n"
#define TOOLS_WHOLE_OL(model, id0, id1, tail)                                                      \
    "{\"model\":\"" model "\",\"created_at\":\"T\",\"message\":{\"role\":\"assistant\","           \
    "\"content\":\"\",\"thinking\":\"Two tools needed.\",\"tool_calls\":["                         \
    OL_TC(id0, 0, "get_weather", OBJ0) "," OL_TC(id1, 1, "get_time", OBJ1) "]},"                   \
    "\"done\":true,\"done_reason\":\"stop\"" tail "}\n"
/* clang-format on */

/* Non-streamed tool calls; and quirk 26: a client's stream_options on a non-streamed request is
 * not forwarded (the transcript's guard answers 400 if it were). */
static void test_vllm_tools_whole(void **state)
{
    oa_whole(&d_new, &up_vllm, VM, "vllm-tools-whole", USAGE_ASK, NULL, 200,
             TOOLS_WHOLE_OA(VM, ID0, ID1,
                            "{\"prompt_tokens\":120,\"completion_tokens\":41,"
                            "\"total_tokens\":161}"));
    ol_chat(&d_old, &up_vllm, VM, "vllm-tools-whole", false, NULL, NULL, 200,
            TOOLS_WHOLE_OL(VM, ID0, ID1, ",\"prompt_eval_count\":120,\"eval_count\":41"));
}

/* Quirk 27: the last fragment and finish_reason in one chunk: nothing lost. */
/* clang-format off */
static void test_vllm_q27_args_with_finish(void **state)
{
    oa_stream(&d_new, &up_vllm, VM, "vllm-q27-args-with-finish", USAGE_ASK, NULL,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(TC_START(0, ID0, "get_weather"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_1), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_2), "null"), UN)
              OA_EV(VM, CH("{}", "\"tool_calls\""), UN)
              OA_USAGE(VM, "{\"prompt_tokens\":88,\"completion_tokens\":27,\"total_tokens\":115}")
              OA_DONE);
    ol_chat(&d_new, &up_vllm, VM, "vllm-q27-args-with-finish", true, NULL, NULL, 200,
            OL(VM, "\"content\":\"\",\"tool_calls\":[" OL_TC(ID0, 0, "get_weather", OBJ0) "]")
            OL_DONE(VM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":88,\"eval_count\":27"));
}
/* clang-format on */

/* Quirk 27 (vLLM #53269): "tool_calls" over arguments cut mid-JSON is reported as length. An
 * Ollama client cannot receive unparsable arguments as an object: it gets an error, never a
 * successful done line. */
/* clang-format off */
static void test_vllm_q27_truncated_args(void **state)
{
    oa_stream(&d_new, &up_vllm, VM, "vllm-q27-truncated-args", USAGE_ASK, NULL,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(TC_START(0, ID0, "get_weather"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_1), "null"), UN)
              OA_EV(VM, CH("{}", "\"length\""), UN)
              OA_USAGE(VM, "{\"prompt_tokens\":88,\"completion_tokens\":16,\"total_tokens\":104}")
              OA_DONE);
    ol_chat(&d_new, &up_vllm, VM, "vllm-q27-truncated-args", true, NULL, NULL, 200,
            "{\"error\":\"the backend produced output that cannot be translated\"}\n");
    ol_chat(&d_new, &up_vllm, VM, "vllm-q27-truncated-args", false, NULL, NULL, 502,
            "{\"error\":\"the backend produced output that cannot be translated\"}\n");
}
/* clang-format on */

/* User pain 3.1 #9 (vLLM #14951): finish_reason "stop" after a tool call becomes tool_calls. */
/* clang-format off */
static void test_vllm_p9_stop_after_tools(void **state)
{
    oa_stream(&d_new, &up_vllm, VM, "vllm-p9-stop-after-tools", USAGE_ASK, NULL,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(TC_START(0, ID0, "get_weather"), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_0), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_1), "null"), UN)
              OA_EV(VM, CH(TC_ARGS(0, A0_2), "null"), UN)
              OA_EV(VM, CH("{}", "\"tool_calls\""), UN)
              OA_USAGE(VM, "{\"prompt_tokens\":88,\"completion_tokens\":27,\"total_tokens\":115}")
              OA_DONE);
}
/* clang-format on */

/* Quirk 20 (C.5): error event then [DONE] upstream: one OpenAI error event and [DONE], never a
 * finish; an Ollama client gets an error line and no done line (quirk 10). */
/* clang-format off */
static void test_vllm_q20_error_mid_stream(void **state)
{
#define CUDA "CUDA error: an illegal memory access was encountered"
    oa_stream(&d_new, &up_vllm, VM, "vllm-q20-error-mid-stream", USAGE_ASK, NULL,
              OA_EV(VM, CH(ROLE, "null"), UN)
              OA_EV(VM, CH(CT("Partial"), "null"), UN)
              OA_EV(VM, CH(CT(" answer"), "null"), UN)
              OA_ERR(CUDA)
              OA_DONE);
    ol_chat(&d_new, &up_vllm, VM, "vllm-q20-error-mid-stream", true, NULL, NULL, 200,
            OL(VM, "\"content\":\"Partial\"")
            OL(VM, "\"content\":\" answer\"")
            "{\"error\":\"" CUDA "\"}\n");
#undef CUDA
}
/* clang-format on */

/* Quirk 25 (C.9): nested (int code 404) and flat (< 0.10.1) envelopes become the client's shape
 * with a string code; an unknown model stays 404, a rejected request 400. */
static void test_vllm_q25_error_envelopes(void **state)
{
#define OVERFLOW                                                                                   \
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens "      \
    "(4000 in the messages, 1000 in the completion). Please reduce the length of the messages "    \
    "or completion."
    oa_whole(&d_new, &up_vllm, VM, "vllm-q25-nested-404", NULL, NULL, 404,
             "{\"error\":{\"message\":\"The model `no-such-model` does not exist.\",\"type\":"
             "\"invalid_request_error\",\"param\":null,\"code\":\"model_not_found\"}}\n");
    oa_whole(&d_old, &up_vllm, VM, "vllm-q25-flat-400", NULL, NULL, 400,
             "{\"error\":{\"message\":\"" OVERFLOW "\",\"type\":\"invalid_request_error\","
             "\"param\":null,\"code\":\"upstream_rejected\"}}\n");
    ol_chat(&d_new, &up_vllm, VM, "vllm-q25-nested-404", false, NULL, NULL, 404,
            "{\"error\":\"The model `no-such-model` does not exist.\"}\n");
    ol_chat(&d_old, &up_vllm, VM, "vllm-q25-flat-400", true, NULL, NULL, 400,
            "{\"error\":\"" OVERFLOW "\"}\n");
#undef OVERFLOW
}

/* Quirk 30 (C.7): max_model_len is the context length; the LoRA entry has none. */
static void test_vllm_q30_models(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", d_new.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"id\":\"" VM "\",\"object\":\"model\",\"created\":"
                                   "1767225600,\"owned_by\":\"vllm\",\"backend\":\"openai\","
                                   "\"context_length\":32768,"));
    assert_non_null(strstr(r.body, "{\"id\":\"sql-lora\",\"object\":\"model\",\"created\":"
                                   "1767225600,\"owned_by\":\"vllm\",\"backend\":\"openai\","
                                   "\"parent\":\"" VM "\",\"canonical_id\":"));
    qr_t_resp_free(&r);
}

/* Quirk 30, Ollama side: /api/show of a vLLM model reports max_model_len as its context length,
 * as /v1/models does; the LoRA entry (max_model_len null) states none rather than a placeholder. */
#define SHOW_BACKEND_MODEL(parent, info, id)                                                       \
    "{\"modelfile\":\"\",\"parameters\":\"\",\"template\":\"\",\"details\":{\"parent_model\":"     \
    "\"" parent "\",\"format\":\"gguf\",\"family\":\"unknown\",\"families\":[\"unknown\"],"        \
    "\"parameter_size\":\"unspecified\",\"quantization_level\":\"unspecified\"},\"model_info\":"   \
    "{\"general.architecture\":\"unknown\"" info "},\"capabilities\":[\"completion\"],"            \
    "\"modified_at\":\"1970-01-01T00:00:00Z\",\"canonical_id\":\"" id "\"}\n"
static void test_vllm_q30_show_context_length(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", d_new.port, "/v1/models", NULL, NULL, 0, &r); /* joins the models */
    qr_t_resp_free(&r);
    const char *body = "{\"model\":\"" VM "\"}";
    qr_t_request("POST", d_new.port, "/api/show", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, SHOW_BACKEND_MODEL("", ",\"unknown.context_length\":32768",
                                                   "openai.qwen-qwen3-8b"));
    qr_t_resp_free(&r);
    body = "{\"model\":\"sql-lora\"}";
    qr_t_request("POST", d_new.port, "/api/show", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, SHOW_BACKEND_MODEL(VM, "", "openai.sql-lora"));
    qr_t_resp_free(&r);
}

/* Quirk 30, second half: a /v1/models entry with a parent is a LoRA adapter of that base model;
 * the Runtime says so (/v1/models names the parent, /api/show details.parent_model). */
static void test_vllm_q30_lora_adapter(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", d_new.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    if (!strstr(r.body, "\"parent\":\"" VM "\""))
        fail_msg("quirk 30: /v1/models does not name the adapter's base model: %s", r.body);
    qr_t_resp_free(&r);
    const char *body = "{\"model\":\"sql-lora\"}";
    qr_t_request("POST", d_new.port, "/api/show", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    if (!strstr(r.body, "\"parent_model\":\"" VM "\""))
        fail_msg("quirk 30: /api/show does not name the adapter's base model: %s", r.body);
    qr_t_resp_free(&r);
}

/* ======================================================================================== */
/* mlx_lm.server                                                                            */
/* ======================================================================================== */

/* Quirks 31, 33, 38, 21: close-delimited HTTP/1.0 stream, keepalive comments skipped, empty
 * reasoning/tool_calls never forwarded, usage from the `chat.completion` event. A client that
 * sends stream_options without include_usage (what breaks MLX, quirk 39) gets no usage, and MLX
 * still gets {"include_usage":true}. */
/* clang-format off */
static void test_mlx_reasoning_stream(void **state)
{
    oa_stream(&d_mlx, &up_mlx, MM, "mlx-reasoning-stream", USAGE_ASK, NULL,
              REASONING_STREAM_OA(MM, "{\"prompt_tokens\":1536,\"completion_tokens\":14,"
                                      "\"total_tokens\":1550,"
                                      "\"prompt_tokens_details\":{\"cached_tokens\":1024}}"));
    oa_stream(&d_mlx, &up_mlx, MM, "mlx-reasoning-stream", ",\"stream_options\":{}", NULL,
              OA_EV(MM, CH(ROLE, "null"), "")
              OA_EV(MM, CH(RC("The user"), "null"), "")
              OA_EV(MM, CH(RC(" greets me."), "null"), "")
              OA_EV(MM, CH(RC(" Answer briefly."), "null"), "")
              OA_EV(MM, CH(CT("Grüße"), "null"), "")
              OA_EV(MM, CH(CT(" aus"), "null"), "")
              OA_EV(MM, CH(CT(" Köln ✓"), "null"), "")
              OA_EV(MM, CH("{}", "\"stop\""), "")
              OA_DONE);
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-reasoning-stream", true, NULL, NULL, 200,
            REASONING_STREAM_OL(MM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":1536,"
                                    "\"eval_count\":14"));
}
/* clang-format on */

/* Quirk 34: whole calls per chunk, bare uuid ids kept, split into the OpenAI first delta
 * (id, type, name, arguments "") and one arguments delta; indices 0 and 1. */
/* clang-format off */
static void test_mlx_tools_stream(void **state)
{
    oa_stream(&d_mlx, &up_mlx, MM, "mlx-tools-stream", ",\"tools\":" TOOLS USAGE_ASK,
              ",\"tools\":" TOOLS,
              OA_EV(MM, CH(ROLE, "null"), UN)
              OA_EV(MM, CH(RC("Two tools needed."), "null"), UN)
              OA_EV(MM, CH(TC_START(0, MU0, "get_weather"), "null"), UN)
              OA_EV(MM, CH(TC_ARGS(0, A0), "null"), UN)
              OA_EV(MM, CH(TC_START(1, MU1, "get_time"), "null"), UN)
              OA_EV(MM, CH(TC_ARGS(1, A1), "null"), UN)
              OA_EV(MM, CH("{}", "\"tool_calls\""), UN)
              OA_USAGE(MM, "{\"prompt_tokens\":96,\"completion_tokens\":58,\"total_tokens\":154,"
                           "\"prompt_tokens_details\":{\"cached_tokens\":0}}")
              OA_DONE);
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-tools-stream", true, NULL, NULL, 200,
            OL(MM, "\"content\":\"\",\"thinking\":\"Two tools needed.\"")
            OL(MM, "\"content\":\"\",\"tool_calls\":[" OL_TC(MU0, 0, "get_weather", OBJ0) "]")
            OL(MM, "\"content\":\"\",\"tool_calls\":[" OL_TC(MU1, 1, "get_time", OBJ1) "]")
            OL_DONE(MM, ",\"done_reason\":\"stop\",\"prompt_eval_count\":96,\"eval_count\":58"));
}
/* clang-format on */

/* Quirks 31 + 34: close-delimited JSON without Content-Length; calls without index get 0, 1. */
static void test_mlx_tools_whole(void **state)
{
    oa_whole(&d_mlx, &up_mlx, MM, "mlx-tools-whole", NULL, NULL, 200,
             TOOLS_WHOLE_OA(MM, MU0, MU1,
                            "{\"prompt_tokens\":96,\"completion_tokens\":58,"
                            "\"total_tokens\":154,\"prompt_tokens_details\":"
                            "{\"cached_tokens\":0}}"));
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-tools-whole", false, NULL, NULL, 200,
            TOOLS_WHOLE_OL(MM, MU0, MU1, ",\"prompt_eval_count\":96,\"eval_count\":58"));
}

/* D.3: `reasoning` on a whole answer, finish length kept. */
static void test_mlx_reasoning_whole(void **state)
{
    oa_whole(&d_mlx, &up_mlx, MM, "mlx-reasoning-whole", NULL, NULL, 200,
             "{\"id\":\"chatcmpl-ID\",\"object\":\"chat.completion\",\"created\":0,\"model\":\"" MM
             "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
             "\"Grüße aus Köln ✓\",\"reasoning_content\":\"The user greets me. Answer "
             "briefly.\"},\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":{"
             "\"prompt_tokens\":31,\"completion_tokens\":14,\"total_tokens\":45,"
             "\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n");
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-reasoning-whole", false, NULL, NULL, 200,
            "{\"model\":\"" MM "\",\"created_at\":\"T\",\"message\":{\"role\":\"assistant\","
            "\"content\":\"Grüße aus Köln ✓\",\"thinking\":\"The user greets me. Answer "
            "briefly.\"},\"done\":true,\"done_reason\":\"length\",\"prompt_eval_count\":31,"
            "\"eval_count\":14}\n");
}

/* Quirk 39: finish seen, then close without usage and [DONE]: complete, no error. The client
 * that asked for usage still gets the final usage chunk; the upstream gave no counts, so they are
 * 0 (quirk 9's "missing counts are unknown/0"). */
/* clang-format off */
static void test_mlx_q39_no_done(void **state)
{
    oa_stream(&d_mlx, &up_mlx, MM, "mlx-q39-no-done", USAGE_ASK, NULL,
              OA_EV(MM, CH(ROLE, "null"), UN)
              OA_EV(MM, CH(CT("Kurz"), "null"), UN)
              OA_EV(MM, CH(CT(" und gut."), "null"), UN)
              OA_EV(MM, CH("{}", "\"stop\""), UN)
              OA_USAGE(MM, "{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}")
              OA_DONE);
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-q39-no-done", true, NULL, NULL, 200,
            OL(MM, "\"content\":\"Kurz\"")
            OL(MM, "\"content\":\" und gut.\"")
            OL_DONE(MM, ",\"done_reason\":\"stop\""));
}
/* clang-format on */

/* D.7: a stream cut without finish and [DONE] is an error, never a clean finish. */
/* clang-format off */
static void test_mlx_d7_stream_cut(void **state)
{
    oa_stream(&d_mlx, &up_mlx, MM, "mlx-d7-stream-cut", USAGE_ASK, NULL,
              OA_EV(MM, CH(ROLE, "null"), UN)
              OA_EV(MM, CH(CT("Ein"), "null"), UN)
              OA_EV(MM, CH(CT(" halber"), "null"), UN)
              OA_ERR("upstream ended the stream without finishing")
              OA_DONE);
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-d7-stream-cut", true, NULL, NULL, 200,
            OL(MM, "\"content\":\"Ein\"")
            OL(MM, "\"content\":\" halber\"")
            "{\"error\":\"upstream ended the stream without finishing\"}\n");
}
/* clang-format on */

/* Quirk 35: a 404 that is not about a missing model is an upstream failure (502), and a
 * connection dropped before any response byte is a 502 too. */
static void test_mlx_q35_errors(void **state)
{
    oa_whole(
        &d_mlx, &up_mlx, MM, "mlx-q35-404", NULL, NULL, 502,
        "{\"error\":{\"message\":\"upstream answered HTTP 404: Only 'text' content type is "
        "supported.\",\"type\":\"server_error\",\"param\":null,\"code\":\"upstream_error\"}}\n");
    ol_chat(&d_mlx, &up_mlx, MM, "mlx-q35-404", true, NULL, NULL, 502,
            "{\"error\":\"upstream answered HTTP 404: Only 'text' content type is supported.\"}\n");
    /* the dropped connection: the message names the transport failure */
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    char *b = client_body(MM, "mlx-q35-dropped", false, NULL);
    replay_reset(&up_mlx);
    struct qr_t_resp r;
    qr_t_request("POST", d_mlx.port, "/v1/chat/completions", hdrs, b, strlen(b), &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "empty reply from server"));
    assert_non_null(strstr(r.body, "\"type\":\"server_error\",\"param\":null,\"code\":"
                                   "\"upstream_error\"}}"));
    qr_t_resp_free(&r);
    char *u = upstream_body(MM, "mlx-q35-dropped", false, NULL);
    expect_upstream(&up_mlx, "mlx-q35-dropped", u);
    free(u);
    free(b);
}

/* Quirk 37 (D.6): MLX lists models without owned_by: the Runtime fills it. */
static void test_mlx_q37_models(void **state)
{
    struct qr_t_resp r;
    qr_t_request("GET", d_mlx.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"id\":\"" MM "\",\"object\":\"model\",\"created\":"
                                   "1767225600,\"owned_by\":\"openai\",\"backend\":\"openai\","
                                   "\"canonical_id\":"));
    assert_non_null(strstr(r.body, "{\"id\":\"mlx-community/Llama-3.2-1B-Instruct-4bit\","
                                   "\"object\":\"model\",\"created\":1767225600,\"owned_by\":"));
    qr_t_resp_free(&r);
}

/* Quirk 32 (D.2/D.3): mlx_lm.server loads whatever repository "model" names, so the Runtime
 * sends it only names its /v1/models lists: another name is 404 model_not_found before MLX is
 * asked (no download on the server), from an OpenAI and an Ollama client. */
static void test_mlx_q32_listed_models_only(void **state)
{
    (void) state;
    struct qr_t_resp r;
    qr_t_request("GET", d_mlx.port, "/v1/models", NULL, NULL, 0, &r); /* listed by now */
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_true(qr_t_replay_reset(up_mlx.port));
    const char *const h[] = {"Content-Type: application/json", NULL};
    const char *oa = "{\"model\":\"someone/unlisted-7B\",\"messages\":[{\"role\":\"user\","
                     "\"content\":\"case=mlx-reasoning-whole; hi\"}]}";
    qr_t_request("POST", d_mlx.port, "/v1/chat/completions", h, oa, strlen(oa), &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "\"code\":\"model_not_found\""));
    assert_non_null(strstr(r.body, "only the models it lists"));
    qr_t_resp_free(&r);
    const char *ol = "{\"model\":\"someone/unlisted-7B\",\"stream\":false,\"messages\":[{\"role\":"
                     "\"user\",\"content\":\"case=mlx-reasoning-whole; hi\"}]}";
    qr_t_request("POST", d_mlx.port, "/api/chat", h, ol, strlen(ol), &r);
    assert_int_equal(r.status, 404);
    qr_t_resp_free(&r);
    yyjson_doc *doc = qr_t_replay_requests(up_mlx.port);
    yyjson_val *it;
    size_t i, max, chats = 0;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, max, it)
    {
        chats += strcmp(yyjson_get_str(yyjson_obj_get(it, "path")), "/v1/chat/completions") == 0;
    }
    assert_int_equal(chats, 0);
    yyjson_doc_free(doc);
    /* a listed name still goes through */
    qr_t_request("POST", d_mlx.port, "/v1/chat/completions", h,
                 "{\"model\":\"" MM "\",\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"case=mlx-reasoning-whole; hi\"}]}",
                 strlen("{\"model\":\"" MM "\",\"messages\":[{\"role\":\"user\",\"content\":"
                        "\"case=mlx-reasoning-whole; hi\"}]}"),
                 &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

/* Quirk 36 (D.2): MLX defaults to greedy decoding and 512 tokens, so the Runtime always sends
 * explicit temperature and max_tokens to it (openai_dialect=mlx-lm: 0.8 and 8192 when the client
 * gives none; the client's own values otherwise), from an OpenAI and an Ollama client. */
static void test_mlx_q36_explicit_sampling(void **state)
{
    char *b = client_body(MM, "mlx-reasoning-whole", false, NULL);
    char *u = upstream_body(MM, "mlx-reasoning-whole", false, NULL);
    assert_non_null(strstr(u, MLX_DEFAULTS ",\"stream\":false}"));
    static const char *const paths[] = {"/v1/chat/completions", "/api/chat"};
    for (size_t i = 0; i < 2; i++) {
        replay_reset(&up_mlx);
        struct qr_t_resp r;
        qr_t_request("POST", d_mlx.port, paths[i], NULL, b, strlen(b), &r);
        assert_int_equal(r.status, 200);
        qr_t_resp_free(&r);
        expect_upstream(&up_mlx, "mlx-reasoning-whole", u);
    }
    free(b);
    free(u);
    /* the client's values reach MLX unchanged */
    b = client_body(MM, "mlx-reasoning-whole", false, ",\"temperature\":0.2,\"max_tokens\":100");
    replay_reset(&up_mlx);
    struct qr_t_resp r;
    qr_t_request("POST", d_mlx.port, "/v1/chat/completions", NULL, b, strlen(b), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    expect_upstream(&up_mlx, "mlx-reasoning-whole",
                    "{\"model\":\"" MM "\",\"messages\":[{\"role\":\"user\",\"content\":"
                    "\"case=mlx-reasoning-whole; hi\"}],\"temperature\":0.2,\"max_tokens\":100,"
                    "\"stream\":false}");
    free(b);
}

/* D.8: mlx_lm.server has no embeddings: 422 capability_unsupported, nothing sent upstream (the
 * descriptor says unsupported, so the router refuses; the codec would refuse too). */
static void test_mlx_embeddings_refused(void **state)
{
    replay_reset(&up_mlx);
    const char *body = "{\"model\":\"" MM "\",\"input\":[\"x\"]}";
    struct qr_t_resp r;
    qr_t_request("POST", d_mlx.port, "/v1/embeddings", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "\"code\":\"capability_unsupported\""));
    assert_non_null(strstr(r.body, "embeddings")); /* the router refuses from the descriptor */
    qr_t_resp_free(&r);
    qr_t_request("GET", up_mlx.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_null(strstr(r.body, "/v1/embeddings"));
    qr_t_resp_free(&r);
}

/* The live "dialect" object of d's /v1/backends entry, once the probe decided (polled up to 5 s:
 * the probe runs after startup). Caller frees the doc. */
static yyjson_val *probed_dialect(const struct qr_child *d, yyjson_doc **doc)
{
    for (int i = 0; i < 500; i++) {
        struct qr_t_resp r;
        qr_t_request("GET", d->port, "/v1/backends", NULL, NULL, 0, &r);
        assert_int_equal(r.status, 200);
        *doc = yyjson_read(r.body, r.body_len, 0);
        qr_t_resp_free(&r);
        assert_non_null(*doc);
        yyjson_val *b0 = yyjson_arr_get(yyjson_obj_get(yyjson_doc_get_root(*doc), "backends"), 0);
        yyjson_val *dl = yyjson_obj_get(b0, "dialect");
        assert_non_null(dl);
        const char *st = yyjson_get_str(yyjson_obj_get(dl, "state"));
        if (st && strcmp(st, "pending") != 0)
            return dl;
        yyjson_doc_free(*doc);
        usleep(10000);
    }
    fail_msg("the dialect probe did not decide within 5 s");
    return NULL;
}

static const char *dstr(yyjson_val *o, const char *k)
{
    const char *s = yyjson_get_str(yyjson_obj_get(o, k));
    return s ? s : "(none)";
}

/* openai_dialect=auto against vLLM: GET /version answers 0.16.0, so the vllm profile is chosen
 * and its era's reasoning field "reasoning" goes upstream in history, with nothing configured;
 * /v1/backends says what was probed, chosen and why. Configured dialects show "configured". */
static void test_vllm_auto_probe_era(void **state)
{
    yyjson_doc *doc;
    yyjson_val *dl = probed_dialect(&d_auto, &doc);
    assert_string_equal(dstr(dl, "setting"), "auto");
    assert_string_equal(dstr(dl, "state"), "probed");
    assert_string_equal(dstr(dl, "chosen"), "vllm");
    assert_string_equal(dstr(dl, "version"), "0.16.0");
    assert_string_equal(dstr(dl, "why"), "openai_dialect=auto: GET /version answered version "
                                         "'0.16.0'");
    assert_string_equal(dstr(dl, "reasoning_field"), "reasoning");
    assert_string_equal(dstr(dl, "reasoning_field_source"), "profile era of the version");
    assert_string_equal(dstr(dl, "health_path"), "/health");
    yyjson_doc_free(doc);
    dl = probed_dialect(&d_old, &doc); /* the configured field keeps overriding the era */
    assert_string_equal(dstr(dl, "chosen"), "vllm");
    assert_string_equal(dstr(dl, "reasoning_field"), "reasoning_content");
    assert_string_equal(dstr(dl, "reasoning_field_source"),
                        "configuration (openai_reasoning_field)");
    yyjson_doc_free(doc);
    dl = probed_dialect(&d_mlx, &doc);
    assert_string_equal(dstr(dl, "setting"), "mlx-lm");
    assert_string_equal(dstr(dl, "state"), "configured");
    assert_string_equal(dstr(dl, "chosen"), "mlx-lm");
    yyjson_doc_free(doc);

    const char *body = "{\"model\":\"" VM "\",\"stream\":false,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":"
                       "\"Hallo\",\"reasoning_content\":\"Greet back.\"},{\"role\":\"user\","
                       "\"content\":\"case=vllm-q24-reasoning-whole; hi\"}]}";
    replay_reset(&up_vllm);
    struct qr_t_resp r;
    qr_t_request("POST", d_auto.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    expect_upstream(&up_vllm, "vllm-q24-reasoning-whole",
                    "{\"model\":\"" VM "\",\"messages\":[{\"role\":\"user\",\"content\":"
                    "\"hi\"},{\"role\":\"assistant\",\"content\":\"Hallo\",\"reasoning\":"
                    "\"Greet back.\"},{\"role\":\"user\",\"content\":\"case=vllm-q24-"
                    "reasoning-whole; hi\"}],\"stream\":false}");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_q24_reasoning_stream),
        cmocka_unit_test(test_vllm_q24_reasoning_whole),
        cmocka_unit_test(test_vllm_q24_history_field),
        cmocka_unit_test(test_vllm_tools_stream),
        cmocka_unit_test(test_vllm_parallel_stream),
        cmocka_unit_test(test_vllm_tools_whole),
        cmocka_unit_test(test_vllm_q27_args_with_finish),
        cmocka_unit_test(test_vllm_q27_truncated_args),
        cmocka_unit_test(test_vllm_p9_stop_after_tools),
        cmocka_unit_test(test_vllm_q20_error_mid_stream),
        cmocka_unit_test(test_vllm_q25_error_envelopes),
        cmocka_unit_test(test_vllm_q30_models),
        cmocka_unit_test(test_vllm_q30_show_context_length),
        cmocka_unit_test(test_vllm_q30_lora_adapter),
        cmocka_unit_test(test_mlx_reasoning_stream),
        cmocka_unit_test(test_mlx_tools_stream),
        cmocka_unit_test(test_mlx_tools_whole),
        cmocka_unit_test(test_mlx_reasoning_whole),
        cmocka_unit_test(test_mlx_q39_no_done),
        cmocka_unit_test(test_mlx_d7_stream_cut),
        cmocka_unit_test(test_mlx_q35_errors),
        cmocka_unit_test(test_mlx_q37_models),
        cmocka_unit_test(test_mlx_q32_listed_models_only),
        cmocka_unit_test(test_mlx_q36_explicit_sampling),
        cmocka_unit_test(test_mlx_embeddings_refused),
        cmocka_unit_test(test_vllm_auto_probe_era),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
