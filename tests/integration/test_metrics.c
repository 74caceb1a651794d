/* GET /metrics end to end (docs/API.md "GET /metrics"): the real daemon (backend=ollama) in front
 * of the replay server. The scrape needs the bearer token like every other route; its text is
 * read by a small strict parser here (every line a HELP/TYPE comment or a well-formed sample of a
 * declared family, no duplicate series, histogram buckets cumulative with +Inf == _count), and
 * the numbers move by exactly what the requests did: requests by route/model/backend/status,
 * tokens in/out from the engine's usage, time-to-first-token and decode-rate observations, no
 * stream left active and an empty queue afterwards; a stream in progress shows as an active
 * stream holding a queue slot, and a client that goes away is counted with status 499; a tool
 * request the upstream ledger blocks is counted in ledger_blocks_total. QR_T_DUMP=1 prints the
 * scraped samples. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define TOKEN       "metrics-test-token"
#define MAX_SAMPLES 2048u
#define KEY_MAX     600u

static const char *const auth_hdrs[] = {"Authorization: Bearer " TOKEN, NULL};
static const char *const json_hdrs[] = {"Authorization: Bearer " TOKEN,
                                        "Content-Type: application/json", NULL};

/* One parsed sample: key is `name{labels as written}` (or just the name). */
struct sample {
    char key[KEY_MAX];
    double v;
};

struct scrape {
    struct sample s[MAX_SAMPLES];
    size_t n;
    char types[64][96]; /* "name type" */
    size_t n_types;
};

static bool name_char(char c, bool first)
{
    return isalpha((unsigned char) c) || c == '_' || c == ':' ||
           (!first && isdigit((unsigned char) c));
}

/* A metric or label name at *p; advances past it. */
static size_t parse_name(const char **p)
{
    const char *s = *p;
    if (!name_char(*s, true))
        return 0;
    while (name_char(*s, false))
        s++;
    size_t n = (size_t) (s - *p);
    *p = s;
    return n;
}

static const char *family_type(const struct scrape *sc, const char *name, size_t n)
{
    for (size_t i = 0; i < sc->n_types; i++) {
        const char *t = sc->types[i];
        if (!strncmp(t, name, n) && t[n] == ' ')
            return t + n + 1;
    }
    return NULL;
}

/* The declared family a sample name belongs to (histograms: _bucket/_sum/_count suffixes). */
static bool declared(const struct scrape *sc, const char *name, size_t n)
{
    const char *t = family_type(sc, name, n);
    if (t)
        return strcmp(t, "histogram") != 0;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t sl = strlen(suffixes[i]);
        if (n > sl && !strncmp(name + n - sl, suffixes[i], sl)) {
            t = family_type(sc, name, n - sl);
            if (t && !strcmp(t, "histogram"))
                return true;
        }
    }
    return false;
}

static void parse_comment(struct scrape *sc, const char *line)
{
    bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
    assert_true(help || type);
    const char *p = line + 7;
    const char *name = p;
    size_t n = parse_name(&p);
    assert_true(n > 0);
    assert_true(*p == ' ');
    if (help)
        return;
    p++;
    assert_true(!strcmp(p, "counter") || !strcmp(p, "gauge") || !strcmp(p, "histogram"));
    assert_null(family_type(sc, name, n)); /* declared once */
    assert_true(sc->n_types < 64);
    snprintf(sc->types[sc->n_types++], sizeof sc->types[0], "%.*s %s", (int) n, name, p);
}

static void parse_sample(struct scrape *sc, const char *line)
{
    const char *p = line;
    size_t n = parse_name(&p);
    assert_true(n > 0);
    assert_true(declared(sc, line, n));
    if (*p == '{') {
        p++;
        while (*p != '}') {
            assert_true(parse_name(&p) > 0);
            assert_true(*p++ == '=');
            assert_true(*p++ == '"');
            while (*p != '"') {
                assert_true(*p != '\0' && *p != '\n');
                if (*p == '\\') {
                    p++;
                    assert_true(*p == '\\' || *p == '"' || *p == 'n');
                }
                p++;
            }
            p++;
            if (*p == ',')
                p++;
            else
                assert_true(*p == '}');
        }
        p++;
    }
    size_t klen = (size_t) (p - line);
    assert_true(*p++ == ' ');
    assert_true(klen < KEY_MAX);
    assert_true(sc->n < MAX_SAMPLES);
    struct sample *s = &sc->s[sc->n];
    memcpy(s->key, line, klen);
    s->key[klen] = '\0';
    char *end = NULL;
    s->v = strtod(p, &end);
    assert_true(end != p && *end == '\0');
    for (size_t i = 0; i < sc->n; i++)
        assert_string_not_equal(sc->s[i].key, s->key); /* no duplicate series */
    sc->n++;
}

/* A sample's value, 0 when the series is absent (not yet observed). */
static double value(const struct scrape *sc, const char *key)
{
    for (size_t i = 0; i < sc->n; i++)
        if (!strcmp(sc->s[i].key, key))
            return sc->s[i].v;
    return 0;
}

static bool has(const struct scrape *sc, const char *key)
{
    for (size_t i = 0; i < sc->n; i++)
        if (!strcmp(sc->s[i].key, key))
            return true;
    return false;
}

/* Buckets of each histogram series non-decreasing in le order, the +Inf one equal to _count. */
static void check_histograms(const struct scrape *sc)
{
    for (size_t i = 0; i < sc->n; i++) {
        const char *b = strstr(sc->s[i].key, "_bucket{");
        if (!b)
            continue;
        const char *le = strstr(b, ",le=\"");
        assert_non_null(le);
        if (strcmp(le, ",le=\"+Inf\"}") != 0) {
            assert_true(i + 1 < sc->n); /* the next bucket of the series follows */
            assert_true(sc->s[i + 1].v >= sc->s[i].v);
            assert_int_equal(strncmp(sc->s[i + 1].key, sc->s[i].key, (size_t) (le - sc->s[i].key)),
                             0);
            continue;
        }
        char count[KEY_MAX];
        snprintf(count, sizeof count, "%.*s_count{%.*s}", (int) (b - sc->s[i].key), sc->s[i].key,
                 (int) (le - b - 8), b + 8);
        assert_true(has(sc, count));
        assert_true(value(sc, count) == sc->s[i].v);
    }
}

static void scrape(uint16_t port, struct scrape *sc, char **version)
{
    struct qr_t_resp r;
    qr_t_request("GET", port, "/metrics", auth_hdrs, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    char *ct = qr_t_header(&r, "Content-Type");
    assert_non_null(ct);
    assert_string_equal(ct, "text/plain; version=0.0.4; charset=utf-8");
    free(ct);
    if (version)
        *version = qr_t_header(&r, "X-Quantum-Runtime-Version");
    memset(sc, 0, sizeof(*sc));
    assert_true(r.body_len > 0 && r.body[r.body_len - 1] == '\n');
    char *save = NULL;
    for (char *line = strtok_r(r.body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            parse_comment(sc, line);
        else
            parse_sample(sc, line);
    }
    check_histograms(sc);
    qr_t_resp_free(&r);
}

static long post(uint16_t port, const char *path, const char *body)
{
    struct qr_t_resp r;
    qr_t_request("POST", port, path, json_hdrs, body, strlen(body), &r);
    long status = r.status;
    qr_t_resp_free(&r);
    return status;
}

#define M     "model=\"ollama.llama3.2-1b\",backend=\"ollama\""
#define ROUTE "route=\"/v1/chat/completions\""
#define CHAT                                                                                       \
    "{\"model\":\"llama3.2:1b\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"     \
    "\"hi\"}]}"
#define NOSUCH                                                                                     \
    "{\"model\":\"no-such-model\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"   \
    "\"hi\"}]}"

#define TOOLS                                                                                      \
    "{\"model\":\"Qwen/Qwen2.5-7B-Instruct\",\"messages\":[{\"role\":\"user\",\"content\":"        \
    "\"weather?\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","     \
    "\"parameters\":{\"type\":\"object\"}}}]}"

#define NOTOOLS                                                                                    \
    "{\"model\":\"Qwen/"                                                                           \
    "Qwen2.5-7B-Instruct\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"

static void test_metrics_move(void **state)
{
    struct qr_child replay, d;
    qr_t_replay_start(&replay);
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN, NULL};
    qr_t_daemon_start(&d, replay.port, env);

    /* auth like every route: no token, a wrong token -> 401 in the native shape */
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/metrics", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 401);
    assert_non_null(strstr(r.body, "\"error\""));
    assert_null(strstr(r.body, "quantum_runtime_"));
    qr_t_resp_free(&r);
    static const char *const wrong[] = {"Authorization: Bearer nope", NULL};
    qr_t_request("GET", d.port, "/metrics", wrong, NULL, 0, &r);
    assert_int_equal(r.status, 401);
    qr_t_resp_free(&r);

    /* the backend's model list joined the registry (asynchronously, at start) */
    bool joined = false;
    for (int t = 0; t < 100 && !joined; t++) {
        qr_t_request("GET", d.port, "/v1/models/llama3.2%3A1b", auth_hdrs, NULL, 0, &r);
        joined = r.status == 200 && strstr(r.body, "\"canonical_id\":\"ollama.llama3.2-1b\"");
        qr_t_resp_free(&r);
        if (!joined)
            usleep(50 * 1000);
    }
    assert_true(joined);

    static struct scrape before, after;
    char *version = NULL;
    scrape(d.port, &before, &version);
    assert_non_null(version);
    char build[200];
    snprintf(build, sizeof build, "quantum_runtime_build_info{version=\"%s\"}", version);
    assert_true(value(&before, build) == 1);
    free(version);

    assert_int_equal(post(d.port, "/v1/chat/completions", CHAT), 200);
    assert_int_equal(post(d.port, "/v1/chat/completions", CHAT), 200);
    assert_int_equal(post(d.port, "/v1/chat/completions", NOSUCH), 200); /* the engine decides */
    assert_int_equal(post(d.port, "/v1/chat/completions", "{not json"), 400);
    assert_int_equal(post(d.port, "/api/chat", CHAT), 200); /* Ollama's route, same pipeline */
    scrape(d.port, &after, NULL);

    for (size_t i = 0; getenv("QR_T_DUMP") && i < after.n; i++)
        fprintf(stderr, "%s %g\n", after.s[i].key, after.s[i].v);
    const char *req_ok = "quantum_runtime_requests_total{" ROUTE "," M ",status=\"200\"}";
    assert_true(value(&after, req_ok) - value(&before, req_ok) == 2);
    const char *req_ollama =
        "quantum_runtime_requests_total{route=\"/api/chat\"," M ",status=\"200\"}";
    assert_true(value(&after, req_ollama) - value(&before, req_ollama) == 1);
    const char *req_unknown = "quantum_runtime_requests_total{" ROUTE ",model=\"_unknown\","
                              "backend=\"ollama\",status=\"200\"}";
    assert_true(value(&after, req_unknown) - value(&before, req_unknown) == 1);
    const char *req_bad = "quantum_runtime_requests_total{" ROUTE ",model=\"_unknown\","
                          "backend=\"_none\",status=\"400\"}";
    assert_true(value(&after, req_bad) - value(&before, req_bad) == 1);
    /* the replayed answer: prompt_eval_count 26, eval_count 6, eval_duration 436512005 ns */
    const char *tin = "quantum_runtime_tokens_total{direction=\"in\"," M "}";
    const char *tout = "quantum_runtime_tokens_total{direction=\"out\"," M "}";
    assert_true(value(&after, tin) - value(&before, tin) == 78);
    assert_true(value(&after, tout) - value(&before, tout) == 18);
    const char *ttft = "quantum_runtime_time_to_first_token_seconds_count{" M "}";
    assert_true(value(&after, ttft) - value(&before, ttft) == 3);
    const char *ttft_sum = "quantum_runtime_time_to_first_token_seconds_sum{" M "}";
    double ttft_d = value(&after, ttft_sum) - value(&before, ttft_sum);
    assert_true(ttft_d > 0 && ttft_d < 20);
    const char *tps = "quantum_runtime_decode_tokens_per_second_count{" M "}";
    assert_true(value(&after, tps) - value(&before, tps) == 3);
    const char *tps_sum = "quantum_runtime_decode_tokens_per_second_sum{" M "}";
    double want = 3 * (6 / 0.436512005);
    assert_true(fabs(value(&after, tps_sum) - value(&before, tps_sum) - want) < 1e-6);
    const char *tps_le = "quantum_runtime_decode_tokens_per_second_bucket{" M ",le=\"20\"}";
    const char *tps_le_lo = "quantum_runtime_decode_tokens_per_second_bucket{" M ",le=\"10\"}";
    assert_true(value(&after, tps_le) - value(&before, tps_le) == 3); /* 13.7 tokens/s */
    assert_true(value(&after, tps_le_lo) - value(&before, tps_le_lo) == 0);
    assert_true(has(&after, "quantum_runtime_active_streams"));
    assert_true(value(&after, "quantum_runtime_active_streams") == 0);
    assert_true(has(&after, "quantum_runtime_queue_depth{backend=\"ollama\"}"));
    assert_true(value(&after, "quantum_runtime_queue_depth{backend=\"ollama\"}") == 0);
    assert_true(has(&after, "quantum_runtime_loaded_models"));

    assert_int_equal(qr_t_stop(&d, 15, 10000), 0);
    qr_t_stop(&replay, 15, 5000);
}

static int connect_loopback(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &sa, sizeof sa), 0);
    return fd;
}

/* Poll the scrape until key has value want (5 s at most); the last scrape stays in sc. */
static bool wait_value(uint16_t port, struct scrape *sc, const char *key, double want)
{
    for (int t = 0; t < 100; t++) {
        scrape(port, sc, NULL);
        if (value(sc, key) == want)
            return true;
        usleep(50 * 1000);
    }
    return false;
}

/* A stream in progress is an active stream and holds its backend's queue slot; the client going
 * away ends both and the request is counted with status 499. */
static void test_active_stream(void **state)
{
    struct qr_child replay, d;
    qr_t_replay_start(&replay);
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN, NULL};
    qr_t_daemon_start(&d, replay.port, env);
    static struct scrape sc;
    const char *gone = "quantum_runtime_requests_total{route=\"/api/chat\",model=\"_unknown\","
                       "backend=\"ollama\",status=\"499\"}";
    const char *queue = "quantum_runtime_queue_depth{backend=\"ollama\"}";
    scrape(d.port, &sc, NULL);
    assert_true(value(&sc, "quantum_runtime_active_streams") == 0);
    assert_false(has(&sc, gone));

    const char *body = "{\"model\":\"stall-model\",\"stream\":true,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"stall-me\"}]}";
    char raw[600];
    int n = snprintf(raw, sizeof raw,
                     "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " TOKEN
                     "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    int fd = connect_loopback(d.port);
    assert_int_equal(write(fd, raw, (size_t) n), n);
    char head[64] = "";
    assert_true(read(fd, head, sizeof head - 1) > 0); /* the head went out: the stream started */
    assert_non_null(strstr(head, " 200 "));
    assert_true(wait_value(d.port, &sc, "quantum_runtime_active_streams", 1));
    assert_true(value(&sc, queue) == 1);
    close(fd);
    assert_true(wait_value(d.port, &sc, gone, 1));
    assert_true(value(&sc, "quantum_runtime_active_streams") == 0);
    assert_true(value(&sc, queue) == 0);

    assert_int_equal(qr_t_stop(&d, 15, 10000), 0);
    qr_t_stop(&replay, 15, 5000);
}

/* The router refuses the only backend for a tool request because the upstream ledger blocks
 * tools on its engine build (vLLM 0.7.3, tests/cases/conformance-vllm/v0.7.3): the refusal is
 * counted once per blocked capability, and a request without tools is not. */
static void test_ledger_blocks(void **state)
{
    struct qr_child up, d;
    qr_t_replay_start_dir(&up, QR_TEST_CASES "/conformance-vllm/v0.7.3");
    char dir[] = "/tmp/qr-metrics-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cfg[300], text[600];
    snprintf(cfg, sizeof cfg, "%s/backends.json", dir);
    snprintf(text, sizeof text,
             "{\"backends\":[{\"id\":\"vllm-073\",\"kind\":\"openai\",\"url\":"
             "\"http://127.0.0.1:%u\",\"dialect\":\"vllm\",\"parsers\":{\"tool_call\":"
             "\"hermes\",\"auto_tool_choice\":true}}]}",
             (unsigned) up.port);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
    static const char *const env[] = {
        "QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN,
        "QUANTUM_RUNTIME_REGISTRY_DIRS=" QR_TEST_CASES "/conformance-vllm/v0.7.3/registry", NULL};
    const char *const args[] = {"--config", cfg, NULL};
    qr_t_daemon_start_args(&d, 0, env, args);

    const char *key = "quantum_runtime_ledger_blocks_total{backend=\"vllm-073\","
                      "reason=\"tools.calling\"}";
    static struct scrape before, after;
    long status = 0;
    for (int t = 0; t < 100 && status != 422; t++) { /* until the probe read the version */
        scrape(d.port, &before, NULL);
        status = post(d.port, "/v1/chat/completions", TOOLS);
        if (status != 422)
            usleep(50 * 1000);
    }
    assert_int_equal(status, 422);
    scrape(d.port, &after, NULL);
    assert_true(value(&after, key) - value(&before, key) == 1);
    for (size_t i = 0; getenv("QR_T_DUMP") && i < after.n; i++)
        fprintf(stderr, "%s %g\n", after.s[i].key, after.s[i].v);
    const char *refused = "quantum_runtime_requests_total{" ROUTE
                          ",model=\"conf-vllm073-qwen2.5-7b\",backend=\"_none\",status=\"422\"}";
    assert_true(value(&after, refused) - value(&before, refused) == 1);
    (void) post(d.port, "/v1/chat/completions", NOTOOLS); /* no tools: no ledger block hit */
    scrape(d.port, &before, NULL);
    assert_true(value(&before, key) == value(&after, key));

    assert_int_equal(qr_t_stop(&d, 15, 10000), 0);
    qr_t_stop(&up, 15, 5000);
    unlink(cfg);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_move),
        cmocka_unit_test(test_active_stream),
        cmocka_unit_test(test_ledger_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
