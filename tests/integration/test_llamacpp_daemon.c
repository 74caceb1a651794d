/* backend=llama.cpp end to end: the real daemon runs the real llama-server on generated GGUF
 * models (the scripted chat model and its draft from qr-gen-scripted, bert-embed-tiny from
 * qr-gen-fixtures) found in a temporary models_dir through their builtin manifests. OpenAI and
 * Ollama chat (streamed and not) give the script's exact greeting, tools give the script's call,
 * embeddings a 64-dimensional vector, /api/ps lists what is loaded and keep_alive 0 unloads it,
 * an unknown model is 404 in each client's shape, and a kill -9 of the engine mid-stream ends the
 * client's stream with an error within a second, the next request is answered after the restart
 * and the crash is in the evidence store. /v1/loaded shows the first load (starting/loading, then
 * ready with pid, port, context and memory estimate, never the engine's API key); /v1/backends the
 * probed engine and its ledger entry; a client that closes mid-decode frees the engine's slot
 * (its /slots) within a second, one that closes mid-prefill has the upstream transfer aborted at
 * once and the slot freed when the engine's prefill ends, with nothing decoded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/arena.h"
#include "harness.h"
#include "store/store.h"

static struct qr_child daemon_;
static char models[64];

static const char GREETING[] =
    "Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß.";
static const char WEATHER[] =
    "{\"city\": \"München\", \"street\": \"Königstraße 1\", \"days\": 3, \"temperature\": -4.5, "
    "\"detailed\": true, \"metric\": false, \"tags\": [\"Größe\", \"Übermaß\", \"ß\"], "
    "\"location\": {\"lat\": 48.137, \"lon\": 11.575, \"country\": \"DE\"}, \"note\": null}";

static const char NOTOOLS_MANIFEST[] =
    "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"notools-chat\","
    "\"display_name\":\"Tiny llama without a tool template\","
    "\"source\":{\"provider\":\"quantum-runtime\",\"reference\":\"tests/fixtures/gen_fixtures.c\","
    "\"revision\":\"generated\"},\"backend\":{\"type\":\"llama.cpp\"},"
    "\"artifacts\":[{\"uri\":\"models:llama-tiny.gguf\",\"backend\":\"llama.cpp\","
    "\"format\":\"gguf\",\"role\":\"inference\"}],"
    "\"model\":{\"architecture\":\"llama\",\"parameter_class\":\"tiny\",\"quantization\":"
    "\"unspecified\",\"context_window\":2048,\"architecture_class\":\"dense\"},"
    "\"capabilities\":{\"text\":true,\"vision\":false,\"audio\":false,\"embeddings\":false,"
    "\"tools\":true,\"thinking\":false},"
    "\"compatibility\":{\"min_runtime_version\":\"0.4.0-alpha.1\"},"
    "\"state\":{\"install\":\"available\",\"verification\":\"unverified\",\"lifecycle\":"
    "\"active\"},\"provenance\":{\"publisher\":\"Quantum Runtime test fixtures\","
    "\"license_ref\":\"generated test data\"}}\n";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static void post(const char *target, const char *body, struct qr_t_resp *r)
{
    qr_t_request("POST", daemon_.port, target, NULL, body, strlen(body), r);
}

static void get(const char *target, struct qr_t_resp *r)
{
    qr_t_request("GET", daemon_.port, target, NULL, NULL, 0, r);
}

static int setup(void **state)
{
    snprintf(models, sizeof models, "/tmp/qr-test-llmodels-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(models))
        return -1;
    char *out = NULL;
    char *gen_s[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    if (qr_t_run(gen_s, NULL, 60000, &out) != 0) {
        fprintf(stderr, "qr-gen-scripted failed: %s\n", out ? out : "");
        free(out);
        return -1;
    }
    free(out);
    char *gen_f[] = {QR_TEST_GEN_FIXTURES, models, "bert-embed-tiny.gguf", "bert-rerank-tiny.gguf",
                     NULL};
    if (qr_t_run(gen_f, NULL, 60000, &out) != 0) {
        fprintf(stderr, "qr-gen-fixtures failed: %s\n", out ? out : "");
        free(out);
        return -1;
    }
    free(out);
    /* notools-chat: llama-tiny.gguf (no chat template: the engine's default has no tool syntax)
     * under a manifest in a registry dir that claims tools */
    char *gen_t[] = {QR_TEST_GEN_FIXTURES, models, "llama-tiny.gguf", NULL};
    if (qr_t_run(gen_t, NULL, 60000, &out) != 0) {
        fprintf(stderr, "qr-gen-fixtures failed: %s\n", out ? out : "");
        free(out);
        return -1;
    }
    free(out);
    char registry[96], manifest[160], env_reg[160];
    snprintf(registry, sizeof registry, "%s/registry", models);
    snprintf(manifest, sizeof manifest, "%s/notools-chat.json", registry);
    snprintf(env_reg, sizeof env_reg, "QUANTUM_RUNTIME_REGISTRY_DIRS=%s", registry);
    FILE *mf = mkdir(registry, 0755) == 0 ? fopen(manifest, "w") : NULL;
    if (!mf || fputs(NOTOOLS_MANIFEST, mf) < 0 || fclose(mf) != 0)
        return -1;
    const char *const env[] = {env_reg, NULL};
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    qr_t_daemon_start_args(&daemon_, 0, env, args);
    return 0;
}

static int teardown(void **state)
{
    if (daemon_.pid > 0)
        qr_t_stop(&daemon_, SIGTERM, 10000);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", models);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", models);
    return 0;
}

static yyjson_val *jpath(yyjson_val *v, const char *path)
{
    return yyjson_ptr_get(v, path);
}

/* ---- ready, backends ---- */

static void test_ready_and_backends(void **state)
{
    struct qr_t_resp r;
    get("/readyz", &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    get("/v1/backends", &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(jpath(root, "/backends/0/kind")), "llama.cpp");
    assert_string_equal(yyjson_get_str(jpath(root, "/backends/0/state")), "ready");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
    /* /api/tags: a model the registry knows carries its manifest's details (as /api/show) */
    get("/api/tags", &r);
    assert_int_equal(r.status, 200);
    d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *list = yyjson_obj_get(yyjson_doc_get_root(d), "models"), *m, *found = NULL;
    size_t i, n;
    yyjson_arr_foreach(list, i, n, m)
    {
        if (!found && !strcmp(yyjson_get_str(yyjson_obj_get(m, "name")), "scripted-chat"))
            found = m;
    }
    assert_non_null(found);
    assert_string_equal(yyjson_get_str(jpath(found, "/details/format")), "gguf");
    assert_string_equal(yyjson_get_str(jpath(found, "/details/family")), "llama");
    assert_string_equal(yyjson_get_str(jpath(found, "/details/families/0")), "llama");
    assert_string_equal(yyjson_get_str(jpath(found, "/details/quantization_level")), "mostly_f16");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

/* ---- chat ---- */

static const char CHAT_OFF[] = "{\"model\":\"scripted-chat\",%s\"messages\":[{\"role\":\"user\","
                               "\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":"
                               "false}}";

static void test_openai_chat(void **state)
{
    char body[512];
    struct qr_t_resp r;
    snprintf(body, sizeof body, CHAT_OFF, "");
    post("/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(jpath(root, "/choices/0/message/content")), GREETING);
    assert_string_equal(yyjson_get_str(jpath(root, "/choices/0/finish_reason")), "stop");
    assert_string_equal(yyjson_get_str(jpath(root, "/model")), "scripted-chat");
    yyjson_doc_free(d);
    char *backend = qr_t_header(&r, "X-Quantum-Backend");
    assert_non_null(backend);
    assert_string_equal(backend, "llama.cpp");
    free(backend);
    qr_t_resp_free(&r);

    /* streamed: the content deltas joined are the greeting; the stream finishes with stop */
    snprintf(body, sizeof body, CHAT_OFF, "\"stream\":true,");
    post("/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 200);
    char text[1024] = "";
    bool stop = false;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "data: {", 7))
            continue;
        yyjson_doc *c = yyjson_read(line + 6, strlen(line + 6), 0);
        assert_non_null(c);
        yyjson_val *cr = yyjson_doc_get_root(c);
        const char *piece = yyjson_get_str(jpath(cr, "/choices/0/delta/content"));
        if (piece)
            strncat(text, piece, sizeof text - strlen(text) - 1);
        const char *fin = yyjson_get_str(jpath(cr, "/choices/0/finish_reason"));
        stop |= fin && !strcmp(fin, "stop");
        yyjson_doc_free(c);
    }
    assert_string_equal(text, GREETING);
    assert_true(stop);
    qr_t_resp_free(&r);
}

static void test_ollama_chat_stream(void **state)
{
    struct qr_t_resp r;
    post("/api/chat",
         "{\"model\":\"scripted-chat\",\"think\":false,\"messages\":[{\"role\":"
         "\"user\",\"content\":\"hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    char *ct = qr_t_header(&r, "Content-Type");
    assert_non_null(ct);
    assert_non_null(strstr(ct, "application/x-ndjson"));
    free(ct);
    char text[1024] = "";
    bool done = false;
    for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
        yyjson_doc *c = yyjson_read(line, strlen(line), 0);
        assert_non_null(c);
        yyjson_val *cr = yyjson_doc_get_root(c);
        assert_string_equal(yyjson_get_str(jpath(cr, "/model")), "scripted-chat");
        const char *piece = yyjson_get_str(jpath(cr, "/message/content"));
        if (piece)
            strncat(text, piece, sizeof text - strlen(text) - 1);
        if (yyjson_get_bool(jpath(cr, "/done"))) {
            done = true;
            assert_string_equal(yyjson_get_str(jpath(cr, "/done_reason")), "stop");
        }
        yyjson_doc_free(c);
    }
    assert_true(done);
    assert_string_equal(text, GREETING);
    qr_t_resp_free(&r);
}

static void test_tools(void **state)
{
    struct qr_t_resp r;
    post("/v1/chat/completions",
         "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"Wetter?\"}],"
         "\"chat_template_kwargs\":{\"enable_thinking\":false},\"tools\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}}]}",
         &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(jpath(root, "/choices/0/finish_reason")), "tool_calls");
    yyjson_val *call = jpath(root, "/choices/0/message/tool_calls/0");
    assert_non_null(call);
    const char *id = yyjson_get_str(yyjson_obj_get(call, "id"));
    assert_non_null(id);
    assert_true(strlen(id) > 0);
    assert_string_equal(yyjson_get_str(jpath(call, "/function/name")), "get_weather");
    assert_string_equal(yyjson_get_str(jpath(call, "/function/arguments")), WEATHER);
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

/* ---- embeddings, /api/ps, unload ---- */

static void test_embeddings_ps_unload(void **state)
{
    struct qr_t_resp r;
    post("/v1/embeddings", "{\"model\":\"bert-embed-tiny\",\"input\":\"Hallo Welt\"}", &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *vec = jpath(yyjson_doc_get_root(d), "/data/0/embedding");
    assert_true(yyjson_is_arr(vec));
    assert_int_equal(yyjson_arr_size(vec), 64);
    assert_true(yyjson_is_num(yyjson_arr_get_first(vec)));
    yyjson_doc_free(d);
    qr_t_resp_free(&r);

    get("/api/ps", &r);
    assert_int_equal(r.status, 200);
    d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *list = jpath(yyjson_doc_get_root(d), "/models");
    bool chat = false, embed = false;
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(list, i, max, m)
    {
        const char *name = yyjson_get_str(yyjson_obj_get(m, "name"));
        assert_non_null(name);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "model")), name);
        assert_true(yyjson_get_uint(yyjson_obj_get(m, "size")) > 0);
        assert_non_null(yyjson_get_str(yyjson_obj_get(m, "digest")));
        assert_non_null(yyjson_get_str(yyjson_obj_get(m, "expires_at")));
        assert_true(yyjson_is_obj(yyjson_obj_get(m, "details")));
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(m, "size_vram")), 0);
        chat |= !strcmp(name, "scripted-chat");
        embed |= !strcmp(name, "bert-embed-tiny");
    }
    assert_true(chat);
    assert_true(embed);
    yyjson_doc_free(d);
    qr_t_resp_free(&r);

    /* Ollama's unload: an empty generate with keep_alive 0 */
    post("/api/generate", "{\"model\":\"bert-embed-tiny\",\"keep_alive\":0}", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"done_reason\":\"unload\""));
    qr_t_resp_free(&r);
    bool gone = false;
    for (int tries = 0; tries < 100 && !gone; tries++) {
        get("/api/ps", &r);
        gone = r.status == 200 && !strstr(r.body, "bert-embed-tiny");
        qr_t_resp_free(&r);
        if (!gone)
            usleep(50000);
    }
    assert_true(gone);
}

/* ---- rerank ---- */

static const char *const RERANK_DOCS[] = {
    "Berlin ist die Hauptstadt von Deutschland.", "Der Eiffelturm steht in Paris.",
    "Katzen schlafen gern in der Sonne.", "München liegt an der Isar."};

/* POST body, expect status and error code (NULL: no error body); returns the parsed body. */
static yyjson_doc *rerank_call(const char *target, const char *body, int status, const char *code)
{
    struct qr_t_resp r;
    post(target, body, &r);
    if (r.status != status)
        fprintf(stderr, "%s %s -> %ld %.*s\n", target, body, r.status, (int) r.body_len, r.body);
    assert_int_equal(r.status, status);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    if (code)
        assert_string_equal(yyjson_get_str(jpath(yyjson_doc_get_root(d), "/error/code")), code);
    qr_t_resp_free(&r);
    return d;
}

/* results[] sorted by relevance_score descending, distinct in-range indices; returns its size. */
static size_t check_ranking(yyjson_val *root, bool with_docs)
{
    yyjson_val *res = jpath(root, "/results");
    assert_true(yyjson_is_arr(res));
    bool seen[QR_ARRAY_LEN(RERANK_DOCS)] = {false};
    double prev = 1e300;
    size_t i, max;
    yyjson_val *it;
    yyjson_arr_foreach(res, i, max, it)
    {
        yyjson_val *ix = yyjson_obj_get(it, "index");
        yyjson_val *sc = yyjson_obj_get(it, "relevance_score");
        assert_true(yyjson_is_uint(ix) && yyjson_is_num(sc));
        uint64_t k = yyjson_get_uint(ix);
        assert_true(k < QR_ARRAY_LEN(RERANK_DOCS));
        assert_false(seen[k]);
        seen[k] = true;
        assert_true(yyjson_get_num(sc) <= prev);
        prev = yyjson_get_num(sc);
        yyjson_val *text = jpath(it, "/document/text");
        if (with_docs)
            assert_string_equal(yyjson_get_str(text), RERANK_DOCS[k]);
        else
            assert_null(yyjson_obj_get(it, "document"));
    }
    return max;
}

static void test_rerank(void **state)
{
    char docs[512] = "[";
    for (size_t i = 0; i < QR_ARRAY_LEN(RERANK_DOCS); i++)
        snprintf(docs + strlen(docs), sizeof docs - strlen(docs), "%s\"%s\"", i ? "," : "",
                 RERANK_DOCS[i]);
    strcat(docs, "]");
    char body[1024];
    snprintf(body, sizeof body,
             "{\"model\":\"bert-rerank-tiny\",\"query\":\"Hauptstadt Deutschland\","
             "\"documents\":%s}",
             docs);
    yyjson_doc *d = rerank_call("/v1/rerank", body, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(jpath(root, "/object")), "list");
    assert_string_equal(yyjson_get_str(jpath(root, "/model")), "bert-rerank-tiny");
    assert_int_equal(check_ranking(root, false), QR_ARRAY_LEN(RERANK_DOCS)); /* a permutation */
    assert_true(yyjson_get_sint(jpath(root, "/usage/prompt_tokens")) > 0);
    assert_int_equal(yyjson_get_sint(jpath(root, "/usage/total_tokens")),
                     yyjson_get_sint(jpath(root, "/usage/prompt_tokens")));
    double best = yyjson_get_num(jpath(root, "/results/0/relevance_score"));
    yyjson_doc_free(d);

    /* llama-server's own path, cut to top_n, with the documents echoed; the alias resolves */
    snprintf(body, sizeof body,
             "{\"model\":\"quantum-runtime/bert-rerank-tiny\",\"query\":\"Hauptstadt "
             "Deutschland\",\"documents\":%s,\"top_n\":2,\"return_documents\":true}",
             docs);
    d = rerank_call("/rerank", body, 200, NULL);
    root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(jpath(root, "/model")), "quantum-runtime/bert-rerank-tiny");
    assert_int_equal(check_ranking(root, true), 2);
    assert_true(yyjson_get_num(jpath(root, "/results/0/relevance_score")) == best);
    yyjson_doc_free(d);

    /* the wrong kind of model, both ways: 422 capability_unsupported naming model and reranking */
    snprintf(body, sizeof body,
             "{\"model\":\"scripted-chat\",\"query\":\"q\",\"documents\":[\"a\"]}");
    d = rerank_call("/v1/rerank", body, 422, "capability_unsupported");
    const char *msg = yyjson_get_str(jpath(yyjson_doc_get_root(d), "/error/message"));
    assert_non_null(strstr(msg, "scripted-chat"));
    assert_non_null(strstr(msg, "reranking"));
    yyjson_doc_free(d);
    d = rerank_call("/v1/chat/completions",
                    "{\"model\":\"bert-rerank-tiny\",\"messages\":[{\"role\":\"user\","
                    "\"content\":\"x\"}]}",
                    422, "capability_unsupported");
    msg = yyjson_get_str(jpath(yyjson_doc_get_root(d), "/error/message"));
    assert_non_null(strstr(msg, "bert-rerank-tiny"));
    yyjson_doc_free(d);
    d = rerank_call("/v1/embeddings", "{\"model\":\"bert-rerank-tiny\",\"input\":\"x\"}", 422,
                    "capability_unsupported");
    yyjson_doc_free(d);

    /* bad bodies: 400 in the OpenAI shape, param naming the field */
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"model\":\"bert-rerank-tiny\",\"documents\":[\"a\"]}", "query"},
        {"{\"model\":\"bert-rerank-tiny\",\"query\":\"\",\"documents\":[\"a\"]}", "query"},
        {"{\"model\":\"bert-rerank-tiny\",\"query\":\"q\",\"documents\":[]}", "documents"},
        {"{\"model\":\"bert-rerank-tiny\",\"query\":\"q\",\"documents\":[\"a\",1]}",
         "documents[1]"},
        {"{\"model\":\"bert-rerank-tiny\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}",
         "top_n"},
        {"{\"query\":\"q\",\"documents\":[\"a\"]}", "model"},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(bad); i++) {
        d = rerank_call("/v1/rerank", bad[i].body, 400, "invalid_request");
        assert_string_equal(yyjson_get_str(jpath(yyjson_doc_get_root(d), "/error/param")),
                            bad[i].param);
        yyjson_doc_free(d);
    }
}

static void test_unknown_model(void **state)
{
    struct qr_t_resp r;
    post("/v1/chat/completions",
         "{\"model\":\"no-such-model\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", &r);
    assert_int_equal(r.status, 404);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    assert_string_equal(yyjson_get_str(jpath(yyjson_doc_get_root(d), "/error/code")),
                        "model_not_found");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);

    post("/api/chat",
         "{\"model\":\"no-such-model\",\"messages\":[{\"role\":\"user\",\"content\":"
         "\"x\"}]}",
         &r);
    assert_int_equal(r.status, 404);
    d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    assert_true(yyjson_is_str(jpath(yyjson_doc_get_root(d), "/error"))); /* Ollama's shape */
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

/* An engine that cannot be found: the daemon serves, says why, and refuses inference with 503. */
static void test_engine_missing(void **state)
{
    struct qr_child other;
    const char *const args[] = {"--backend", "llama.cpp",      "--models-dir",
                                models,      "--llama-server", "/nonexistent/llama-server",
                                NULL};
    qr_t_daemon_start_args(&other, 0, NULL, args);
    struct qr_t_resp r;
    qr_t_request("GET", other.port, "/readyz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "/nonexistent/llama-server"));
    qr_t_resp_free(&r);
    qr_t_request("GET", other.port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"state\":\"unavailable\""));
    qr_t_resp_free(&r);
    static const char body[] =
        "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    qr_t_request("POST", other.port, "/v1/chat/completions", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 503);
    assert_non_null(strstr(r.body, "/nonexistent/llama-server"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&other, SIGTERM, 10000), 0);
}

/* ---- engine evidence in /api/show and /v1/backends ---- */

/* POST /api/show for model; the parsed answer (200 asserted). */
static yyjson_doc *show(const char *model)
{
    char body[128];
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", model);
    struct qr_t_resp r;
    post("/api/show", body, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    qr_t_resp_free(&r);
    return d;
}

static bool lists(yyjson_val *arr, const char *s)
{
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        if (yyjson_equals_str(v, s))
            return true;
    }
    return false;
}

/* The /v1/backends "models" entry of model on the current engine; NULL when none. */
static yyjson_val *observed_entry(yyjson_val *root, const char *model)
{
    size_t i, max;
    yyjson_val *e;
    yyjson_arr_foreach(jpath(root, "/backends/0/models"), i, max, e)
    {
        if (yyjson_equals_str(yyjson_obj_get(e, "model"), model) &&
            yyjson_get_bool(yyjson_obj_get(e, "current_engine")))
            return e;
    }
    return NULL;
}

static void test_show_engine_evidence(void **state)
{
    /* scripted-chat was loaded by the earlier tests: its template has tool syntax */
    yyjson_doc *d = show("scripted-chat");
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_true(lists(jpath(root, "/capabilities"), "tools"));
    assert_true(lists(jpath(root, "/capabilities"), "completion"));
    assert_string_equal(yyjson_get_str(jpath(root, "/quantum_runtime/backend")), "llama.cpp");
    assert_true(yyjson_get_bool(jpath(root, "/quantum_runtime/evidence/tools/listed")));
    const char *src = yyjson_get_str(jpath(root, "/quantum_runtime/evidence/tools/source"));
    assert_non_null(src);
    assert_true(!strncmp(src, "engine /props (", 15));
    assert_string_equal(yyjson_get_str(jpath(root, "/quantum_runtime/evidence/completion/source")),
                        "manifest");
    assert_true(yyjson_get_bool(jpath(root, "/quantum_runtime/observed/supports_tools")));
    assert_true(yyjson_get_sint(jpath(root, "/quantum_runtime/observed/observations")) >= 1);
    assert_null(jpath(root, "/quantum_runtime/note"));
    yyjson_doc_free(d);

    /* notools-chat: the manifest claims tools; nothing observed yet, so it is listed */
    d = show("notools-chat");
    root = yyjson_doc_get_root(d);
    assert_true(lists(jpath(root, "/capabilities"), "tools"));
    assert_string_equal(yyjson_get_str(jpath(root, "/quantum_runtime/evidence/tools/source")),
                        "manifest");
    assert_true(yyjson_is_null(jpath(root, "/quantum_runtime/observed")));
    assert_non_null(yyjson_get_str(jpath(root, "/quantum_runtime/note")));
    yyjson_doc_free(d);

    /* load it: the engine reports supports_tools false for its default template */
    struct qr_t_resp r;
    post("/v1/chat/completions",
         "{\"model\":\"notools-chat\",\"max_tokens\":2,\"messages\":[{\"role\":\"user\","
         "\"content\":\"hi\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    d = show("notools-chat");
    root = yyjson_doc_get_root(d);
    assert_false(lists(jpath(root, "/capabilities"), "tools"));
    assert_true(lists(jpath(root, "/capabilities"), "completion"));
    assert_false(yyjson_get_bool(jpath(root, "/quantum_runtime/evidence/tools/listed")));
    src = yyjson_get_str(jpath(root, "/quantum_runtime/evidence/tools/source"));
    assert_non_null(src);
    assert_true(!strncmp(src, "engine /props (", 15));
    assert_non_null(strstr(yyjson_get_str(jpath(root, "/quantum_runtime/evidence/tools/reason")),
                           "supports_tools false"));
    assert_false(yyjson_get_bool(jpath(root, "/quantum_runtime/observed/supports_tools")));
    yyjson_doc_free(d);

    /* /v1/backends lists both models' evidence; the existing members are still there */
    get("/v1/backends", &r);
    assert_int_equal(r.status, 200);
    d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    root = yyjson_doc_get_root(d);
    assert_non_null(jpath(root, "/backends/0/engine/version"));
    assert_non_null(jpath(root, "/backends/0/ledger/status"));
    assert_true(yyjson_is_arr(jpath(root, "/backends/0/failed_models")));
    assert_true(yyjson_get_sint(jpath(root, "/backends/0/crashes/total")) >= 0);
    yyjson_val *e = observed_entry(root, "scripted-chat");
    assert_non_null(e);
    assert_true(yyjson_get_bool(jpath(e, "/observed/supports_tools")));
    assert_int_equal(yyjson_get_sint(jpath(e, "/observed/n_ctx_slot")), 1024);
    e = observed_entry(root, "notools-chat");
    assert_non_null(e);
    assert_false(yyjson_get_bool(jpath(e, "/observed/supports_tools")));
    assert_false(yyjson_get_bool(jpath(e, "/observed/vision")));
    yyjson_doc_free(d);
    qr_t_resp_free(&r);

    /* the router weighs the engine's word: tools are refused before any engine is asked, also
     * after the model is unloaded (the evidence outlives the process) */
    post("/api/generate", "{\"model\":\"notools-chat\",\"keep_alive\":0}", &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    bool gone = false;
    for (double t0 = now_ms(); !gone && now_ms() - t0 < 5000;) {
        get("/v1/loaded", &r);
        gone = !strstr(r.body, "notools-chat");
        qr_t_resp_free(&r);
        if (!gone)
            usleep(20000);
    }
    assert_true(gone);
    post("/v1/route", "{\"model\":\"notools-chat\",\"capabilities\":[\"tools.calling\"]}", &r);
    assert_int_equal(r.status, 422);
    assert_non_null(
        strstr(r.body, "engine /props (0.7.0): chat_template_caps.supports_tools false"));
    qr_t_resp_free(&r);
    post("/v1/chat/completions",
         "{\"model\":\"notools-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
         "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{"
         "\"type\":\"object\"}}}]}",
         &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "capability_unsupported"));
    assert_non_null(strstr(r.body, "tools.calling"));
    qr_t_resp_free(&r);
    get("/v1/loaded", &r);
    assert_null(strstr(r.body, "notools-chat")); /* refused by the plan: nothing was loaded */
    qr_t_resp_free(&r);
    /* a plain chat is still planned and served */
    post("/v1/route", "{\"model\":\"notools-chat\",\"capabilities\":[\"inference.text\"]}", &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
}

/* ---- kill -9 of the engine mid-stream ---- */

/* The daemon's child running the scripted model (its command line names scripted.gguf). */
static pid_t engine_pid(void)
{
    DIR *dir = opendir("/proc");
    struct dirent *e;
    pid_t found = -1;
    while (dir && (e = readdir(dir)) && found < 0) {
        pid_t pid = (pid_t) atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1 || ppid != daemon_.pid)
            continue;
        snprintf(path, sizeof path, "/proc/%d/cmdline", (int) pid);
        f = fopen(path, "r");
        if (!f)
            continue;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[n] = '\0';
        if (strstr(buf, "/scripted.gguf"))
            found = pid;
    }
    if (dir)
        closedir(dir);
    return found;
}

struct stream_run {
    struct qr_t_resp r;
    double started_ms;
};

static void *long_stream(void *arg)
{
    struct stream_run *s = arg;
    s->started_ms = now_ms();
    post("/v1/chat/completions",
         "{\"model\":\"scripted-chat\",\"stream\":true,\"max_tokens\":200000,\"messages\":[{"
         "\"role\":\"user\",\"content\":\"[[long]]\"}],\"chat_template_kwargs\":{"
         "\"enable_thinking\":false}}",
         &s->r);
    return NULL;
}

static void test_kill_mid_stream(void **state)
{
    pid_t pid = engine_pid();
    assert_true(pid > 0); /* loaded by the chat tests */
    struct stream_run s = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, long_stream, &s), 0);
    /* well into the endless answer, and well before it ends: the 1024-token slot is full after
     * ~1000 tokens, which a quiet machine decodes in ~0.65 s (finish "length", nothing to kill) */
    usleep(300 * 1000);
    double killed_ms = now_ms();
    assert_int_equal(kill(pid, SIGKILL), 0);
    pthread_join(t, NULL);
    double ended_ms = s.started_ms + s.r.total_ms;
    assert_int_equal(s.r.status, 200);
    assert_true(s.r.body_len > 0);
    /* it was streaming when the engine died: many content chunks came before the error */
    unsigned chunks = 0;
    for (const char *p = s.r.body; (p = strstr(p, "\"content\":\"")) != NULL; p++)
        chunks++;
    assert_true(chunks >= 10);
    assert_non_null(strstr(s.r.body, "engine_crashed"));
    assert_null(strstr(s.r.body, "\"finish_reason\":\"stop\""));
    assert_null(strstr(s.r.body, "\"finish_reason\":\"length\""));
    fprintf(stderr, "stream ended %.0f ms after the kill\n", ended_ms - killed_ms);
    assert_true(ended_ms - killed_ms < 1000.0);
    qr_t_resp_free(&s.r);

    /* the next request is served by the restarted engine */
    char body[512];
    struct qr_t_resp r;
    snprintf(body, sizeof body, CHAT_OFF, "");
    post("/v1/chat/completions", body, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "Hallo! Ich bin das Skript-Modell."));
    qr_t_resp_free(&r);
    pid_t again = engine_pid();
    assert_true(again > 0 && again != pid);

    /* /v1/backends shows the crash: the newest record, signal 9, the killed pid */
    get("/v1/backends", &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *bd = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(bd);
    yyjson_val *cr = jpath(yyjson_doc_get_root(bd), "/backends/0/crashes");
    assert_true(yyjson_get_sint(yyjson_obj_get(cr, "total")) >= 1);
    assert_true(yyjson_arr_size(yyjson_obj_get(cr, "recent")) >= 1);
    assert_true(yyjson_arr_size(yyjson_obj_get(cr, "recent")) <= 10);
    yyjson_val *c0 = jpath(cr, "/recent/0");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(c0, "model")), "scripted-chat");
    assert_int_equal(yyjson_get_sint(yyjson_obj_get(c0, "signal")), SIGKILL);
    assert_true(yyjson_is_null(yyjson_obj_get(c0, "exit_code")));
    assert_int_equal(yyjson_get_sint(yyjson_obj_get(c0, "pid")), pid);
    assert_non_null(strstr(yyjson_get_str(yyjson_obj_get(c0, "reason")), "signal 9"));
    assert_non_null(yyjson_get_str(yyjson_obj_get(c0, "time")));
    assert_non_null(yyjson_get_str(yyjson_obj_get(c0, "engine_version")));
    assert_null(yyjson_obj_get(c0, "log_tail")); /* only the last line */
    assert_non_null(yyjson_get_str(yyjson_obj_get(c0, "log_last_line")));
    yyjson_doc_free(bd);
    qr_t_resp_free(&r);

    /* and in the Prometheus counters: one crash, followed by a scheduled restart */
    get("/metrics", &r);
    assert_int_equal(r.status, 200);
    assert_non_null(r.body);
    assert_non_null(
        strstr(r.body, "\nquantum_runtime_engine_crashes_total{backend=\"llama.cpp\"} 1\n"));
    assert_non_null(
        strstr(r.body, "\nquantum_runtime_engine_restarts_total{backend=\"llama.cpp\"} 1\n"));
    qr_t_resp_free(&r);

    /* the crash is in the evidence store (read once the daemon has stopped) */
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 15000), 0);
    daemon_.pid = 0;
    char path[400];
    snprintf(path, sizeof path, "%s/state/%s", daemon_.dir, QR_STORE_FILE);
    struct qr_store *st = NULL;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_store_open(path, NULL, &st, NULL, &diag), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    struct qr_store_filter f = {.model = "scripted-chat"};
    assert_int_equal(qr_store_crash_list(st, &f, &a, &rows, &n, &diag), QR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].backend_id, "llama.cpp");
    assert_int_equal(rows[0].signal, SIGKILL);
    assert_int_equal(rows[0].pid, pid);
    assert_non_null(strstr(rows[0].reason, "signal 9"));
    qr_arena_cleanup(&a);
    qr_store_close(st);
}

/* ---- /v1/loaded, engine and ledger in /v1/backends ---- */

/* The API key of an engine process (LLAMA_API_KEY in its environment) into key (cap bytes). */
static bool engine_key(pid_t pid, char *key, size_t cap)
{
    char path[64], buf[65536];
    snprintf(path, sizeof path, "/proc/%d/environ", (int) pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t off = 0; off < n; off += strlen(buf + off) + 1) {
        if (!strncmp(buf + off, "LLAMA_API_KEY=", 14)) {
            snprintf(key, cap, "%s", buf + off + 14);
            return key[0] != '\0';
        }
    }
    return false;
}

struct loaded_row {
    char state[32];
    pid_t pid;
    int port;
    uint64_t ctx, ctx_per_slot, bytes;
    bool loading;
};

/* The row of model in GET /v1/loaded on daemon port dport; false when it is not listed. */
static bool loaded_row(uint16_t dport, const char *model, struct loaded_row *out, char **body)
{
    struct qr_t_resp r;
    qr_t_request("GET", dport, "/v1/loaded", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "backend")), "llama.cpp");
    bool found = false;
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(yyjson_obj_get(root, "models"), i, max, m)
    {
        if (strcmp(yyjson_get_str(yyjson_obj_get(m, "model")), model))
            continue;
        found = true;
        memset(out, 0, sizeof *out);
        const char *st = yyjson_get_str(yyjson_obj_get(m, "state"));
        snprintf(out->state, sizeof out->state, "%s", st ? st : "");
        out->pid = (pid_t) yyjson_get_sint(yyjson_obj_get(m, "pid"));
        out->port = (int) yyjson_get_sint(yyjson_obj_get(m, "port"));
        out->ctx = yyjson_get_uint(yyjson_obj_get(m, "ctx"));
        out->ctx_per_slot = yyjson_get_uint(yyjson_obj_get(m, "ctx_per_slot"));
        out->bytes = yyjson_get_uint(yyjson_obj_get(m, "bytes"));
        out->loading = yyjson_get_bool(yyjson_obj_get(m, "loading"));
        assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "placement")), "cpu");
    }
    yyjson_doc_free(d);
    if (body)
        *body = strdup(r.body);
    qr_t_resp_free(&r);
    return found;
}

struct chat_run {
    struct qr_t_resp r;
};

static void *short_chat(void *arg)
{
    struct chat_run *c = arg;
    char body[512];
    snprintf(body, sizeof body, CHAT_OFF, "");
    post("/v1/chat/completions", body, &c->r);
    return NULL;
}

/* While the first request loads the model, /v1/loaded lists it as starting/loading (then ready);
 * afterwards ready with pid, port, context and a memory estimate, and never the API key. */
static void test_loaded(void **state)
{
    struct loaded_row row;
    assert_false(loaded_row(daemon_.port, "scripted-chat", &row, NULL)); /* nothing loaded yet */
    struct chat_run c = {0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, short_chat, &c), 0);
    char first[32] = "";
    bool saw_loading = false;
    double deadline = now_ms() + 20000;
    while (now_ms() < deadline) {
        if (loaded_row(daemon_.port, "scripted-chat", &row, NULL)) {
            if (!first[0])
                snprintf(first, sizeof first, "%s", row.state);
            assert_true(!strcmp(row.state, "starting") || !strcmp(row.state, "loading") ||
                        !strcmp(row.state, "ready"));
            assert_true(row.loading == (strcmp(row.state, "ready") != 0));
            saw_loading |= row.loading;
            if (!strcmp(row.state, "ready"))
                break;
        }
        usleep(2000);
    }
    pthread_join(t, NULL);
    fprintf(stderr, "/v1/loaded: first state '%s', loading seen: %s\n", first,
            saw_loading ? "yes" : "no");
    assert_int_equal(c.r.status, 200);
    qr_t_resp_free(&c.r);
    char *body = NULL;
    assert_true(loaded_row(daemon_.port, "scripted-chat", &row, &body));
    assert_string_equal(row.state, "ready");
    assert_false(row.loading);
    assert_true(row.pid > 0);
    assert_true(row.port > 0);
    assert_int_equal(row.ctx, 1024);
    assert_int_equal(row.ctx_per_slot, 1024);
    assert_true(row.bytes > 0);
    char key[256];
    assert_true(engine_key(row.pid, key, sizeof key));
    assert_null(strstr(body, key));
    assert_non_null(strstr(body, "\"chat_template_caps\""));
    assert_non_null(strstr(body, "\"expires_at\""));
    free(body);
}

static void test_backends_engine_ledger(void **state)
{
    struct qr_t_resp r;
    get("/v1/backends", &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *b = jpath(yyjson_doc_get_root(d), "/backends/0");
    assert_string_equal(yyjson_get_str(jpath(b, "/engine/version")), "0.7.0");
    assert_int_equal(yyjson_get_uint(jpath(b, "/engine/build")), 11669);
    assert_string_equal(yyjson_get_str(jpath(b, "/engine/names/1")), "b11669");
    assert_non_null(yyjson_get_str(jpath(b, "/engine/path")));
    assert_string_equal(yyjson_get_str(jpath(b, "/ledger/entry_id")),
                        "llama-cpp-debian-0.7.0-b11669");
    assert_string_equal(yyjson_get_str(jpath(b, "/ledger/status")), "observed-unpinned");
    /* claimed by the descriptor, not enabled by the entry: listed, the descriptor unchanged */
    yyjson_val *unv = jpath(b, "/ledger/unverified");
    assert_true(yyjson_is_arr(unv));
    bool vision = false, text = false;
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(unv, i, max, v)
    {
        vision |= !strcmp(yyjson_get_str(v), "multimodal.vision");
        text |= !strcmp(yyjson_get_str(v), "inference.text");
    }
    assert_true(vision);
    assert_false(text);
    assert_string_equal(yyjson_get_str(jpath(b, "/capabilities/multimodal.vision")), "conditional");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);

    /* the router plans with the engine's build, so version-specific ledger blocks apply */
    post("/v1/route", "{\"model\":\"scripted-chat\",\"capabilities\":[\"tools.calling\"]}", &r);
    assert_int_equal(r.status, 200);
    d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    assert_string_equal(yyjson_get_str(jpath(yyjson_doc_get_root(d), "/plan/engine_version")),
                        "0.7.0");
    assert_string_equal(yyjson_get_str(jpath(yyjson_doc_get_root(d), "/plan/backend_kind")),
                        "llama.cpp");
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

/* ---- client abort: the engine's slot is free again ---- */

/* 1: a slot of the engine on port is processing, 0: all idle, -1: /slots failed. */
static int slots_busy(int port, const char *key)
{
    char auth[300];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    const char *const hdrs[] = {auth, NULL};
    struct qr_t_resp r;
    qr_t_request("GET", (uint16_t) port, "/slots", hdrs, NULL, 0, &r);
    int busy = r.status != 200 ? -1 : strstr(r.body, "\"is_processing\":true") ? 1 : 0;
    qr_t_resp_free(&r);
    return busy;
}

/* ms until the engine's slots are idle (polled every 5 ms), -1 after timeout_ms. */
static double wait_idle(int port, const char *key, double from_ms, int timeout_ms)
{
    while (now_ms() - from_ms < timeout_ms) {
        if (slots_busy(port, key) == 0)
            return now_ms() - from_ms;
        usleep(5000);
    }
    return -1;
}

/* A raw connection to dport with the whole request sent. */
static int raw_post(uint16_t dport, const char *target, const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(dport)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof a), 0);
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      target, strlen(body));
    assert_int_equal(write(fd, head, (size_t) hn), hn);
    size_t off = 0, len = strlen(body);
    while (off < len) {
        ssize_t w = write(fd, body + off, len - off);
        assert_true(w > 0);
        off += (size_t) w;
    }
    return fd;
}

static void test_abort_mid_decode(void **state)
{
    struct loaded_row row;
    assert_true(loaded_row(daemon_.port, "scripted-chat", &row, NULL));
    char key[256];
    assert_true(engine_key(row.pid, key, sizeof key));
    assert_int_equal(slots_busy(row.port, key), 0);
    int fd = raw_post(daemon_.port, "/v1/chat/completions",
                      "{\"model\":\"scripted-chat\",\"stream\":true,\"max_tokens\":200000,"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"[[long]]\"}],"
                      "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    /* read until a few SSE events arrived */
    char buf[65536];
    size_t got = 0;
    unsigned events = 0;
    double deadline = now_ms() + 10000;
    while (events < 5 && now_ms() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
        assert_true(n > 0);
        got += (size_t) n;
        buf[got] = '\0';
        events = 0;
        for (const char *p = buf; (p = strstr(p, "data: {")) != NULL; p++)
            events++;
    }
    assert_true(events >= 5);
    assert_non_null(strstr(buf, "200 OK"));
    assert_int_equal(slots_busy(row.port, key), 1); /* decoding the endless answer */
    double closed = now_ms();
    close(fd);
    double idle = wait_idle(row.port, key, closed, 5000);
    fprintf(stderr, "mid-decode abort: slot idle %.1f ms after the client closed\n", idle);
    assert_true(idle >= 0 && idle < 1000.0);
}

/* Connections to the engine's port that are established (the engine's side, /proc/net/tcp).
 * Besides the request's transfer the daemon may hold idle ones (a kept-alive /health probe, the
 * standby it opens after the engine closes a stream), so tests compare counts. */
static int engine_conns(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lport = 0, st = 0;
        if (sscanf(line, " %*u: %*8x:%4x %*8x:%*4x %2x", &lport, &st) == 2 && (int) lport == port &&
            st == 0x01) /* TCP_ESTABLISHED */
            n++;
    }
    fclose(f);
    return n;
}

/* n_decoded of the engine's first slot (GET /slots), -1 when unreadable. */
static int64_t slot_decoded(int port, const char *key)
{
    char auth[300];
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
    const char *const hdrs[] = {auth, NULL};
    struct qr_t_resp r;
    qr_t_request("GET", (uint16_t) port, "/slots", hdrs, NULL, 0, &r);
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.body_len, 0) : NULL;
    yyjson_val *v = jpath(yyjson_doc_get_root(d), "/0/next_token/0/n_decoded");
    int64_t n = yyjson_is_int(v) ? yyjson_get_sint(v) : -1;
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
    return n;
}

/* A long prompt (~2000 tokens, a prefill of 1-3 s on one thread) on a daemon with a larger
 * context; the client closes while the engine is still processing the prompt (slot busy, nothing
 * streamed yet). What is observable: the daemon aborts its upstream transfer at once (no connection
 * to the engine is left established within 1 s of the client's close), but this engine build
 * (0.7.0/b11669) acts on the cancellation only once the prompt is processed -- measured directly
 * against llama-server as well, also with -b/-ub 256. So the slot is idle right
 * after the prefill, and the endless [[long]] answer is never decoded. */
static void test_abort_mid_prefill(void **state)
{
    struct qr_child big;
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "4096",         NULL};
    qr_t_daemon_start_args(&big, 0, NULL, args);
    /* load it first, so the measured request starts its prefill at once */
    char small[512];
    snprintf(small, sizeof small, CHAT_OFF, "");
    struct qr_t_resp r;
    qr_t_request("POST", big.port, "/v1/chat/completions", NULL, small, strlen(small), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    struct loaded_row row;
    assert_true(loaded_row(big.port, "scripted-chat", &row, NULL));
    assert_int_equal(row.ctx, 4096);
    char key[256];
    assert_true(engine_key(row.pid, key, sizeof key));

    /* [[long]] makes the answer endless should the engine ever decode it */
    size_t cap = 32 * 1024;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t n = (size_t) snprintf(body, cap,
                                 "{\"model\":\"scripted-chat\",\"stream\":true,\"max_tokens\":"
                                 "200000,\"chat_template_kwargs\":{\"enable_thinking\":false},"
                                 "\"messages\":[{\"role\":\"user\",\"content\":\"[[long]]");
    for (int i = 0; i < 500; i++)
        n += (size_t) snprintf(body + n, cap - n, " w%d", i);
    snprintf(body + n, cap - n, "\"}]}");
    double sent = now_ms();
    int fd = raw_post(big.port, "/v1/chat/completions", body);
    free(body);
    /* wait until the engine works on it (prefill: busy, nothing streamed yet) */
    bool busy = false;
    while (!busy && now_ms() - sent < 3000) {
        busy = slots_busy(row.port, key) == 1;
        if (!busy)
            usleep(2000);
    }
    assert_true(busy);
    struct pollfd pfd = {fd, POLLIN, 0};
    bool streamed = poll(&pfd, 1, 0) > 0;
    int conns = engine_conns(row.port);
    assert_true(conns >= 1); /* the daemon's upstream transfer (and maybe idle ones) */
    double closed = now_ms();
    close(fd);
    /* the daemon closes its upstream connection at once: one fewer is established */
    double upstream = -1;
    while (upstream < 0 && now_ms() - closed < 2000) {
        if (engine_conns(row.port) < conns)
            upstream = now_ms() - closed;
        else
            usleep(1000);
    }
    bool still_prefill = slots_busy(row.port, key) == 1;
    double idle = wait_idle(row.port, key, closed, 30000);
    int64_t decoded = slot_decoded(row.port, key);
    fprintf(stderr,
            "mid-prefill abort: closed %.0f ms after sending (streamed before: %s); upstream "
            "closed %.1f ms after the client; engine still in prefill then: %s; slot idle %.1f "
            "ms after the close, %lld tokens decoded\n",
            closed - sent, streamed ? "yes" : "no", upstream, still_prefill ? "yes" : "no", idle,
            (long long) decoded);
    /* stopped before the checks: a failed one must not leave the daemon (and its engine) */
    int stopped = qr_t_stop(&big, SIGTERM, 15000);
    assert_false(streamed);
    assert_true(upstream >= 0 && upstream < 1000.0);
    assert_true(still_prefill); /* the close did land in the prefill */
    assert_true(idle >= 0);
    assert_true(decoded >= 0 && decoded < 16); /* the endless answer was never decoded */
    assert_int_equal(stopped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_and_backends),
        cmocka_unit_test(test_loaded), /* first load of scripted-chat */
        cmocka_unit_test(test_backends_engine_ledger),
        cmocka_unit_test(test_openai_chat),
        cmocka_unit_test(test_ollama_chat_stream),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_embeddings_ps_unload),
        cmocka_unit_test(test_rerank),
        cmocka_unit_test(test_unknown_model),
        cmocka_unit_test(test_engine_missing),
        cmocka_unit_test(test_abort_mid_decode),
        cmocka_unit_test(test_abort_mid_prefill),
        cmocka_unit_test(test_show_engine_evidence),
        cmocka_unit_test(test_kill_mid_stream), /* last: it stops the daemon */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
