/* Several backends behind one daemon, from the config file's `backends` list
 * (docs/CONFIGURATION.md "Backends"): the default Ollama (its URL from QUANTUM_RUNTIME_OLLAMA_URL),
 * a vLLM with an upstream key from the environment and a declared multi-node layout, and an
 * mlx_lm.server, each a replay server speaking its documented protocol, and one nobody answers.
 * A request runs on the
 * backend that serves its model, whichever client API asked; the list routes merge every backend;
 * the upstream key reaches only its own backend; bad entries are refused with the entry named. */
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

#define VM  "Qwen/Qwen3-8B"
#define MM  "mlx-community/Qwen3-4B-4bit"
#define KEY "vllm-secret-7f3a"

static struct qr_child up_ollama, up_vllm, up_mlx, d;
static char cfg_path[300];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&up_ollama);
    qr_t_replay_start_dir(&up_vllm, QR_TEST_CASES "/replay-vllm");
    qr_t_replay_start_dir(&up_mlx, QR_TEST_CASES "/replay-mlx");
    snprintf(cfg_path, sizeof(cfg_path), "/tmp/qr-backends-%ld.json", (long) getpid());
    char text[1600];
    snprintf(text, sizeof(text),
             "{\"backends\":[{\"id\":\"ollama\",\"kind\":\"ollama\"},"
             "{\"id\":\"vllm-a\",\"kind\":\"openai\",\"url\":\"http://127.0.0.1:%u\","
             "\"dialect\":\"vllm\",\"api_key_env\":\"QR_TEST_VLLM_KEY\",\"parallelism\":"
             "{\"tensor_parallel_size\":4,\"pipeline_parallel_size\":2,\"nodes\":2},"
             "\"parsers\":{\"tool_call\":\"hermes\",\"auto_tool_choice\":true,"
             "\"reasoning\":\"qwen3\"}},"
             "{\"id\":\"mlx-b\",\"kind\":\"openai\",\"urls\":[\"http://127.0.0.1:%u\"],"
             "\"dialect\":\"mlx-lm\",\"parsers\":{\"reasoning\":\"qwen3\"}},{\"id\":\"down-c\","
             "\"kind\":\"openai\","
             "\"url\":\"http://127.0.0.1:1\",\"dialect\":\"generic\"}]}",
             up_vllm.port, up_mlx.port);
    write_file(cfg_path, text);
    const char *env[] = {"QR_TEST_VLLM_KEY=" KEY, NULL};
    const char *args[] = {"--config", cfg_path, NULL};
    qr_t_daemon_start_args(&d, up_ollama.port, env, args);
    /* the start-up probes settle: vllm-a ready, down-c unavailable (bounded) */
    for (int i = 0; i < 100; i++) {
        struct qr_t_resp r;
        qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
        bool settled =
            r.body && strstr(r.body, "\"unavailable\"") && !strstr(r.body, "\"state\":\"unknown\"");
        qr_t_resp_free(&r);
        if (settled)
            break;
        usleep(50 * 1000);
    }
    /* the backends' model lists join the registry at start; wait until both are in (bounded) */
    for (int i = 0; i < 100; i++) {
        struct qr_t_resp r;
        qr_t_request("GET", d.port, "/v1/models", NULL, NULL, 0, &r);
        bool both =
            r.body && strstr(r.body, "\"id\":\"" VM "\"") && strstr(r.body, "\"id\":\"" MM "\"");
        qr_t_resp_free(&r);
        if (both)
            break;
        usleep(50 * 1000);
    }
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&up_ollama, SIGTERM, 5000), 0);
    assert_int_equal(qr_t_stop(&up_vllm, SIGTERM, 5000), 0);
    assert_int_equal(qr_t_stop(&up_mlx, SIGTERM, 5000), 0);
    unlink(cfg_path);
    curl_global_cleanup();
    return 0;
}

/* The value of header name in recorded request req ([["Name","value"],...]), or NULL. */
static const char *req_header(yyjson_val *req, const char *name)
{
    yyjson_val *h = yyjson_obj_get(req, "headers"), *pair;
    size_t i, max;
    yyjson_arr_foreach(h, i, max, pair)
    {
        const char *k = yyjson_get_str(yyjson_arr_get(pair, 0));
        if (k && !strcasecmp(k, name))
            return yyjson_get_str(yyjson_arr_get(pair, 1));
    }
    return NULL;
}

/* The recorded requests of a replay server with this path (count), and the last one's doc. */
static size_t count_path(uint16_t port, const char *path, yyjson_doc **out_doc, yyjson_val **last)
{
    yyjson_doc *doc = qr_t_replay_requests(port);
    assert_non_null(doc);
    size_t n = 0, i, max;
    yyjson_val *r;
    *last = NULL;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, max, r)
    {
        const char *p = yyjson_get_str(yyjson_obj_get(r, "path"));
        if (p && !strcmp(p, path)) {
            n++;
            *last = r;
        }
    }
    *out_doc = doc;
    return n;
}

static void post(const char *path, const char *body, struct qr_t_resp *r)
{
    const char *h[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", d.port, path, h, body, strlen(body), r);
}

static void assert_backend(const struct qr_t_resp *r, const char *id)
{
    char *b = qr_t_header(r, "X-Quantum-Backend");
    assert_non_null(b);
    assert_string_equal(b, id);
    free(b);
}

/* /v1/backends: every entry in configuration order, the first one the default, the vLLM one's
 * declared layout, the Ollama one at QUANTUM_RUNTIME_OLLAMA_URL. */
static void test_backends_listed(void **state)
{
    (void) state;
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), 4);
    yyjson_val *arr = yyjson_obj_get(root, "backends");
    static const char *const ids[] = {"ollama", "vllm-a", "mlx-b", "down-c"};
    for (size_t i = 0; i < 4; i++) {
        yyjson_val *b = yyjson_arr_get(arr, i);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "id")), ids[i]);
        assert_true(yyjson_get_bool(yyjson_obj_get(b, "default")) == (i == 0));
    }
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", up_ollama.port);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_arr_get(arr, 0), "endpoint")), url);
    yyjson_val *par = yyjson_obj_get(yyjson_arr_get(arr, 1), "parallelism");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(par, "tensor_parallel_size")), 4);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(par, "pipeline_parallel_size")), 2);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(par, "nodes")), 2);
    assert_false(yyjson_get_bool(yyjson_obj_get(par, "expert_parallel")));
    assert_null(strstr(r.body, KEY)); /* the upstream key is never shown */
    /* probed at start: the one nobody answers is unavailable, the others ready */
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_arr_get(arr, 3), "state")),
                        "unavailable");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_arr_get(arr, 1), "state")), "ready");
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
}

/* An OpenAI client asking for the vLLM model: vllm-a answers, with its key; nothing reaches the
 * others. */
static void test_openai_client_reaches_vllm(void **state)
{
    (void) state;
    assert_true(qr_t_replay_reset(up_vllm.port) && qr_t_replay_reset(up_mlx.port) &&
                qr_t_replay_reset(up_ollama.port));
    struct qr_t_resp r;
    post("/v1/chat/completions",
         "{\"model\":\"" VM "\",\"messages\":[{\"role\":\"user\",\"content\":"
         "\"case=vllm-q24-reasoning-whole; hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_backend(&r, "vllm-a");
    assert_non_null(strstr(r.body, "Grüße aus Köln"));
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *last;
    assert_int_equal(count_path(up_vllm.port, "/v1/chat/completions", &doc, &last), 1);
    assert_string_equal(req_header(last, "Authorization"), "Bearer " KEY);
    yyjson_doc_free(doc);
    assert_int_equal(count_path(up_mlx.port, "/v1/chat/completions", &doc, &last), 0);
    yyjson_doc_free(doc);
    assert_int_equal(count_path(up_ollama.port, "/api/chat", &doc, &last), 0);
    yyjson_doc_free(doc);
}

/* An Ollama client asking for the vLLM model: not forwarded to the default Ollama, planned onto
 * vllm-a and answered in Ollama's shape. */
static void test_ollama_client_reaches_vllm(void **state)
{
    (void) state;
    assert_true(qr_t_replay_reset(up_vllm.port) && qr_t_replay_reset(up_ollama.port));
    struct qr_t_resp r;
    post("/api/chat",
         "{\"model\":\"" VM "\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"case=vllm-q24-reasoning-whole; hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_backend(&r, "vllm-a");
    assert_non_null(strstr(r.body, "\"content\":\"Grüße aus Köln ✓\""));
    assert_non_null(strstr(r.body, "\"done\":true"));
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *last;
    assert_int_equal(count_path(up_vllm.port, "/v1/chat/completions", &doc, &last), 1);
    yyjson_doc_free(doc);
    assert_int_equal(count_path(up_ollama.port, "/api/chat", &doc, &last), 0);
    yyjson_doc_free(doc);
}

/* The MLX model goes to mlx-b, which has no key: no Authorization header reaches it. */
static void test_mlx_model_reaches_mlx_without_key(void **state)
{
    (void) state;
    assert_true(qr_t_replay_reset(up_mlx.port) && qr_t_replay_reset(up_vllm.port));
    struct qr_t_resp r;
    post("/v1/chat/completions",
         "{\"model\":\"" MM "\",\"messages\":[{\"role\":\"user\",\"content\":"
         "\"case=mlx-reasoning-whole; hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_backend(&r, "mlx-b");
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *last;
    assert_int_equal(count_path(up_mlx.port, "/v1/chat/completions", &doc, &last), 1);
    assert_null(req_header(last, "Authorization"));
    yyjson_doc_free(doc);
    assert_int_equal(count_path(up_vllm.port, "/v1/chat/completions", &doc, &last), 0);
    yyjson_doc_free(doc);
}

/* A name no backend reported goes to the default backend as before: Ollama, byte for byte. */
static void test_other_names_adopted_by_default_ollama(void **state)
{
    (void) state;
    assert_true(qr_t_replay_reset(up_ollama.port));
    struct qr_t_resp r;
    post("/api/chat",
         "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_backend(&r, "ollama");
    qr_t_resp_free(&r);
    yyjson_doc *doc;
    yyjson_val *last;
    assert_int_equal(count_path(up_ollama.port, "/api/chat", &doc, &last), 1);
    yyjson_doc_free(doc);
}

/* The list routes merge every backend: each model once, with the backend that lists it. */
static void test_lists_merge_backends(void **state)
{
    (void) state;
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"id\":\"" VM "\",\"object\":\"model\",\"created\":1767225600,"
                                   "\"owned_by\":\"vllm\",\"backend\":\"vllm-a\""));
    assert_non_null(strstr(r.body, "{\"id\":\"" MM "\",\"object\":\"model\",\"created\":1767225600,"
                                   "\"owned_by\":\"mlx-b\",\"backend\":\"mlx-b\""));
    /* the backend that cannot be reached is named; the others are listed all the same */
    assert_non_null(strstr(r.body, "\"backend_error\":{\"code\":\"upstream_error\","
                                   "\"message\":\"cannot list the models of backend 'down-c'"));
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/v1/models/sql-lora", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"backend\":\"vllm-a\""));
    assert_non_null(strstr(r.body, "\"parent\":\"" VM "\""));
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/api/tags", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"name\":\"llama3.2:1b\""));
    assert_non_null(strstr(r.body, "\"name\":\"" VM "\""));
    assert_non_null(strstr(r.body, "\"name\":\"" MM "\""));
    qr_t_resp_free(&r);
}

/* The servers' parsers as configured are the backends' declared tool and reasoning abilities:
 * vllm-a (hermes, auto tool choice, qwen3) supports tools; mlx-b was stated to have no tool
 * parser, so a tools request for its model is refused before it is asked. vLLM's /metrics
 * (fetched after each successful probe) shows the engine's load, summed over its engines. */
static void test_parsers_and_metrics(void **state)
{
    (void) state;
    struct qr_t_resp r;
    /* the metrics are read after the probe succeeded: wait for them (bounded) */
    for (int i = 0; i < 100; i++) {
        qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
        bool have = r.body && strstr(r.body, "\"requests_running\"");
        if (have || i == 99)
            break;
        qr_t_resp_free(&r);
        usleep(50 * 1000);
    }
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(doc), "backends");
    yyjson_val *va = yyjson_arr_get(arr, 1), *mb = yyjson_arr_get(arr, 2);
    yyjson_val *caps = yyjson_obj_get(va, "capabilities");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(caps, "tools.calling")), "supported");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(caps, "reasoning_control")), "supported");
    caps = yyjson_obj_get(mb, "capabilities");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(caps, "tools.calling")), "unsupported");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(caps, "streaming.reasoning")), "supported");
    yyjson_val *ps = yyjson_obj_get(va, "parsers");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(ps, "tool_call")), "hermes");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(ps, "source")), "configuration");
    yyjson_val *m = yyjson_obj_get(va, "metrics");
    assert_non_null(m);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "path")), "/metrics");
    assert_true(yyjson_get_real(yyjson_obj_get(m, "requests_running")) == 4.0);
    assert_true(yyjson_get_real(yyjson_obj_get(m, "requests_waiting")) == 2.0);
    assert_true(yyjson_get_real(yyjson_obj_get(m, "kv_cache_usage")) == 0.4375);
    assert_true(yyjson_get_real(yyjson_obj_get(m, "generation_tokens_total")) == 6789.0);
    assert_null(yyjson_obj_get(mb, "metrics")); /* mlx_lm.server has no /metrics */
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    assert_true(qr_t_replay_reset(up_mlx.port));
    post("/v1/chat/completions",
         "{\"model\":\"" MM "\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
         "\"f\",\"parameters\":{\"type\":\"object\"}}}],\"messages\":[{\"role\":\"user\","
         "\"content\":\"case=mlx-tools-whole; hi\"}]}",
         &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "capability_unsupported"));
    assert_non_null(strstr(r.body, "mlx-b"));
    qr_t_resp_free(&r);
    yyjson_val *last;
    assert_int_equal(count_path(up_mlx.port, "/v1/chat/completions", &doc, &last), 0);
    yyjson_doc_free(doc);
}

/* check-config prints every backend, its source and the key's variable, never the key. */
static void test_check_config_shows_backends(void **state)
{
    (void) state;
    char *out = NULL;
    char *argv[] = {QR_TEST_DAEMON, "check-config", "--json", "--config", cfg_path, NULL};
    const char *env[] = {"QR_TEST_VLLM_KEY=" KEY, NULL};
    assert_int_equal(qr_t_run(argv, env, 10000, &out), 0);
    assert_non_null(strstr(out, "\"id\": \"vllm-a\""));
    assert_non_null(strstr(out, "\"api_key_env\": \"QR_TEST_VLLM_KEY\""));
    assert_non_null(strstr(out, "\"api_key\": \"<redacted>\""));
    assert_null(strstr(out, KEY));
    free(out);
}

/* Bad entries: refused at start with the entry and the reason named. */
static void test_bad_entries_refused(void **state)
{
    (void) state;
    static const struct {
        const char *json;
        const char *needle;
    } cases[] = {
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"ollama\"},{\"id\":\"a\",\"kind\":\"openai\","
         "\"url\":\"http://127.0.0.1:1\"}]}",
         "backends'[1].id: 'a' is used by entry 0 too"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"openai\",\"url\":\"http://127.0.0.1:1\","
         "\"dialcet\":\"vllm\"}]}",
         "unknown member 'dialcet'"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"vllm\",\"url\":\"http://127.0.0.1:1\"}]}",
         "backends'[0].kind: 'vllm' is not one of llamacpp, ollama, openai"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"openai\"}]}",
         "an openai backend needs 'url' or 'urls'"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"openai\",\"url\":\"http://127.0.0.1:1\","
         "\"api_key_env\":\"QR_TEST_UNSET_KEY\"}]}",
         "api_key_env names QR_TEST_UNSET_KEY, which is not set"},
        {"{\"backend\":\"openai\",\"backends\":[{\"id\":\"a\",\"kind\":\"ollama\"}]}",
         "'backend' and the config file's 'backends' list cannot both be set"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"openai\",\"urls\":[\"http://127.0.0.1:1\","
         "\"http://127.0.0.1:1\"]}]}",
         "is listed twice"},
        {"{\"backends\":[{\"id\":\"a\",\"kind\":\"llamacpp\",\"url\":\"http://127.0.0.1:1\"}]}",
         "a llamacpp backend is run by the Runtime and has no url"},
        {"{\"backends\":[{\"id\":\"A b\",\"kind\":\"ollama\"}]}", "must be 1-32 of a-z"},
    };
    char path[320];
    snprintf(path, sizeof(path), "%s.bad", cfg_path);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(path, cases[i].json);
        char *out = NULL;
        char *argv[] = {QR_TEST_DAEMON, "check-config", "--config", path, NULL};
        int rc = qr_t_run(argv, NULL, 10000, &out);
        if (rc == 0 || !strstr(out, cases[i].needle))
            fail_msg("case %zu: rc %d, output: %s", i, rc, out);
        free(out);
    }
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backends_listed),
        cmocka_unit_test(test_openai_client_reaches_vllm),
        cmocka_unit_test(test_ollama_client_reaches_vllm),
        cmocka_unit_test(test_mlx_model_reaches_mlx_without_key),
        cmocka_unit_test(test_other_names_adopted_by_default_ollama),
        cmocka_unit_test(test_lists_merge_backends),
        cmocka_unit_test(test_parsers_and_metrics),
        cmocka_unit_test(test_check_config_shows_backends),
        cmocka_unit_test(test_bad_entries_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
