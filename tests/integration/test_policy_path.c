/* Model policies in the request path, end to end: the real daemon plans an Ollama /api/chat
 * request for a registry model the Gemma 4 on Ollama policy covers, and the replay server playing
 * Ollama shows exactly which options reached the engine. Covered: unverified knobs stripped on a
 * host declared amd-epyc-turin-cpu, num_predict and stop honoured by the Runtime itself (the
 * engine streams past them; the client gets the limit with done_reason length / stops before the
 * stop text), no policy on an undeclared host, the experimental gate (forwarded and logged),
 * context admission refusal, /v1/route with the quantum-coreos-tci deployment profile, and the
 * /api/tags query string reaching Ollama. */
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

static struct qr_child replay;
static char regdir[64];
static char env_reg[128];

#define POLICY_ID "gemma4-ollama-turin-minimal"
#define TURIN     "QUANTUM_RUNTIME_HARDWARE_CLASS=amd-epyc-turin-cpu"

/* Gemma 4 E4B served by Ollama as gemma4-pp:e4b: the builtin policy's family and variant. */
static const char GEMMA[] =
    "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"gemma4-pp-e4b\","
    "\"display_name\":\"Gemma 4 E4B policy-path test\",\"aliases\":[\"gemma4-pp\"],"
    "\"source\":{\"provider\":\"example\",\"reference\":\"gemma4/"
    "e4b\",\"revision\":\"unresolved\"},"
    "\"backend\":{\"type\":\"external\"},\"artifacts\":["
    "{\"uri\":\"ollama:gemma4-pp:e4b\",\"backend\":\"ollama-adapter\",\"format\":\"gguf\","
    "\"role\":\"inference\"}],"
    "\"model\":{\"architecture\":\"gemma4\",\"parameter_class\":\"e4b\",\"quantization\":\"q4_k_"
    "m\","
    "\"context_window\":8192,\"architecture_class\":\"dense\"},"
    "\"capabilities\":{\"text\":true,\"vision\":false,\"audio\":false,\"embeddings\":false,"
    "\"tools\":false,\"thinking\":false},"
    "\"compatibility\":{\"min_runtime_version\":\"0.4.0-alpha.1\"},"
    "\"state\":{\"install\":\"external\",\"verification\":\"unverified\",\"lifecycle\":\"active\"},"
    "\"provenance\":{\"publisher\":\"Quantum Runtime tests\"}}";

/* Options the Gemma 4 policy classifies (temperature known-good; the rest unverified). */
#define OPTIONS                                                                                    \
    "\"options\":{\"num_ctx\":4096,\"num_predict\":%d,\"seed\":42,\"stop\":[%s],"                  \
    "\"temperature\":0.2,\"num_thread\":8}"

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(regdir, sizeof(regdir), "/tmp/qr-policy-path-XXXXXX");
    assert_non_null(mkdtemp(regdir));
    write_file(regdir, "gemma4-pp-e4b.json", GEMMA);
    snprintf(env_reg, sizeof(env_reg), "QUANTUM_RUNTIME_REGISTRY_DIRS=%s", regdir);
    qr_t_replay_start(&replay);
    return 0;
}

static int teardown(void **state)
{
    qr_t_stop(&replay, SIGTERM, 5000);
    char *argv[] = {"/bin/rm", "-rf", regdir, NULL};
    char *out = NULL;
    qr_t_run(argv, NULL, 10000, &out);
    free(out);
    curl_global_cleanup();
    return 0;
}

/* --- helpers --- */

/* A daemon on the registry dir with extra environment (NULL-terminated, up to 4). */
static void daemon_start(struct qr_child *d, const char *a, const char *b)
{
    const char *env[4] = {env_reg, a, b, NULL};
    qr_t_daemon_start(d, replay.port, env);
}

static void replay_reset(void)
{
    assert_true(qr_t_replay_reset(replay.port));
}

/* The recorded requests the replay server saw for path: the last one's member `key` (malloc'd),
 * and how many there were. */
static char *last_upstream(const char *path, const char *key, size_t *count)
{
    yyjson_doc *doc = qr_t_replay_requests(replay.port);
    assert_non_null(doc);
    char *found = NULL;
    size_t i, n, seen = 0;
    yyjson_val *it;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, n, it)
    {
        const char *p = yyjson_get_str(yyjson_obj_get(it, "path"));
        if (p && !strcmp(p, path)) {
            const char *v = yyjson_get_str(yyjson_obj_get(it, key));
            free(found);
            found = strdup(v ? v : "");
            seen++;
        }
    }
    yyjson_doc_free(doc);
    if (count)
        *count = seen;
    return found;
}

/* The options object the engine received for the last /api/chat (a parsed document). */
static yyjson_doc *upstream_chat(void)
{
    char *body = last_upstream("/api/chat", "body", NULL);
    assert_non_null(body);
    yyjson_doc *doc = yyjson_read(body, strlen(body), 0);
    free(body);
    assert_non_null(doc);
    return doc;
}

static yyjson_val *opt(yyjson_doc *up, const char *name)
{
    return yyjson_obj_get(yyjson_obj_get(yyjson_doc_get_root(up), "options"), name);
}

static size_t n_opts(yyjson_doc *up)
{
    return yyjson_obj_size(yyjson_obj_get(yyjson_doc_get_root(up), "options"));
}

static void chat(uint16_t port, const char *marker, bool stream, int num_predict, const char *stops,
                 long want, struct qr_t_resp *r)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"model\":\"gemma4-pp\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}],"
             "\"stream\":%s," OPTIONS "}",
             marker, stream ? "true" : "false", num_predict, stops);
    qr_t_request("POST", port, "/api/chat", NULL, body, strlen(body), r);
    if (r->status != want)
        fail_msg("/api/chat: status %ld, want %ld; body: %s", r->status, want, r->body);
}

/* Streamed Ollama lines: the concatenated content, the number of lines with content, and the
 * final line's done_reason. */
static void read_stream(const struct qr_t_resp *r, char *content, size_t cap, int *n_content,
                        char *reason, size_t rcap)
{
    content[0] = reason[0] = '\0';
    *n_content = 0;
    int done = 0;
    for (const char *p = r->body; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t) (nl - p) : strlen(p);
        yyjson_doc *d = yyjson_read(p, len, 0);
        assert_non_null(d);
        yyjson_val *root = yyjson_doc_get_root(d);
        const char *c = yyjson_get_str(yyjson_obj_get(yyjson_obj_get(root, "message"), "content"));
        if (c && c[0]) {
            (*n_content)++;
            strncat(content, c, cap - strlen(content) - 1);
        }
        if (yyjson_get_bool(yyjson_obj_get(root, "done"))) {
            done++;
            const char *dr = yyjson_get_str(yyjson_obj_get(root, "done_reason"));
            snprintf(reason, rcap, "%s", dr ? dr : "");
        }
        yyjson_doc_free(d);
        p += len + (nl ? 1 : 0);
    }
    assert_int_equal(done, 1);
}

static void read_whole(const struct qr_t_resp *r, const char **content, const char **reason,
                       yyjson_doc **doc)
{
    *doc = yyjson_read(r->body, r->body_len, 0);
    assert_non_null(*doc);
    yyjson_val *root = yyjson_doc_get_root(*doc);
    *content = yyjson_get_str(yyjson_obj_get(yyjson_obj_get(root, "message"), "content"));
    *reason = yyjson_get_str(yyjson_obj_get(root, "done_reason"));
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "done")));
}

/* --- tests --- */

/* Host declared Turin: only what the policy verified reaches the engine. */
static void test_unverified_knobs_stripped(void **state)
{
    struct qr_child d;
    daemon_start(&d, TURIN, NULL);
    replay_reset();
    struct qr_t_resp r;
    chat(d.port, "qr-policy-plain", false, 50, "\"ZZZ\"", 200, &r);
    char *pol = qr_t_header(&r, "X-Quantum-Policy");
    assert_non_null(pol);
    assert_string_equal(pol, POLICY_ID);
    free(pol);
    char *model = qr_t_header(&r, "X-Quantum-Model");
    assert_string_equal(model, "gemma4-pp-e4b");
    free(model);
    const char *content, *reason;
    yyjson_doc *ans;
    read_whole(&r, &content, &reason, &ans);
    assert_string_equal(content, "Hello! How can I help?"); /* under the limit, no stop text */
    assert_string_equal(reason, "stop");
    yyjson_doc_free(ans);
    qr_t_resp_free(&r);

    yyjson_doc *up = upstream_chat();
    yyjson_val *root = yyjson_doc_get_root(up);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), "gemma4-pp:e4b");
    /* temperature is known-good on this match: the client's value goes through, nothing is
     * filled in (fill_known_good false); num_ctx, num_predict, seed, stop, num_thread do not */
    assert_int_equal(n_opts(up), 1);
    assert_true(yyjson_get_num(opt(up, "temperature")) == 0.2);
    assert_null(opt(up, "num_ctx"));
    assert_null(opt(up, "num_predict"));
    assert_null(opt(up, "seed"));
    assert_null(opt(up, "stop"));
    assert_null(opt(up, "num_thread"));
    /* counted and scanned per delta: the engine is asked to stream */
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "stream")));
    yyjson_doc_free(up);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(qr_t_log_contains(&d, "model policy applied"));
    assert_true(qr_t_log_contains(&d, "num_predict=strip"));
    assert_false(qr_t_log_contains(&d, "experimental gate"));
}

/* num_predict stripped: the engine streams six tokens, the client gets exactly three. */
static void test_num_predict_honoured_by_runtime(void **state)
{
    struct qr_child d;
    daemon_start(&d, TURIN, NULL);
    struct qr_t_resp r;
    char content[256], reason[32];
    int n;
    replay_reset();
    chat(d.port, "qr-policy-count", true, 3, "", 200, &r);
    read_stream(&r, content, sizeof(content), &n, reason, sizeof(reason));
    assert_int_equal(n, 3);
    assert_string_equal(content, "one two three");
    assert_string_equal(reason, "length");
    assert_non_null(strstr(r.body, "\"eval_count\":3"));
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_null(opt(up, "num_predict"));
    yyjson_doc_free(up);

    /* the same, not streamed to the client */
    replay_reset();
    chat(d.port, "qr-policy-count", false, 3, "", 200, &r);
    const char *c, *dr;
    yyjson_doc *ans;
    read_whole(&r, &c, &dr, &ans);
    assert_string_equal(c, "one two three");
    assert_string_equal(dr, "length");
    yyjson_doc_free(ans);
    qr_t_resp_free(&r);

    /* an OpenAI client of the same model: the same plan, the same limit, OpenAI's spelling */
    replay_reset();
    const char oa[] = "{\"model\":\"gemma4-pp\",\"messages\":[{\"role\":\"user\",\"content\":"
                      "\"qr-policy-count\"}],\"max_tokens\":3,\"seed\":7}";
    qr_t_request("POST", d.port, "/v1/chat/completions", NULL, oa, strlen(oa), &r);
    assert_int_equal(r.status, 200);
    ans = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *choice = yyjson_arr_get(yyjson_obj_get(yyjson_doc_get_root(ans), "choices"), 0);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(choice, "finish_reason")), "length");
    assert_string_equal(
        yyjson_get_str(yyjson_obj_get(yyjson_obj_get(choice, "message"), "content")),
        "one two three");
    yyjson_val *usage = yyjson_obj_get(yyjson_doc_get_root(ans), "usage");
    assert_int_equal(yyjson_get_sint(yyjson_obj_get(usage, "completion_tokens")), 3);
    yyjson_doc_free(ans);
    qr_t_resp_free(&r);
    up = upstream_chat();
    assert_null(opt(up, "num_predict"));
    assert_null(opt(up, "seed"));
    yyjson_doc_free(up);

    /* the daemon is still healthy after cutting engine streams short */
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* stop stripped: the Runtime scans the content across chunk boundaries and ends before it. */
static void test_stop_honoured_by_runtime(void **state)
{
    struct qr_child d;
    daemon_start(&d, TURIN, NULL);
    struct qr_t_resp r;
    char content[256], reason[32];
    int n;
    replay_reset();
    chat(d.port, "qr-policy-stop", true, 100, "\"STOP\",\"never\"", 200, &r);
    read_stream(&r, content, sizeof(content), &n, reason, sizeof(reason));
    assert_string_equal(content, "alpha STx beta ");
    assert_string_equal(reason, "stop");
    assert_null(strstr(r.body, "STOP"));
    assert_null(strstr(r.body, "gamma"));
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_null(opt(up, "stop"));
    yyjson_doc_free(up);

    replay_reset();
    chat(d.port, "qr-policy-stop", false, 100, "\"STOP\"", 200, &r);
    const char *c, *dr;
    yyjson_doc *ans;
    read_whole(&r, &c, &dr, &ans);
    assert_string_equal(c, "alpha STx beta ");
    assert_string_equal(dr, "stop");
    yyjson_doc_free(ans);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* hardware_class unset: the Turin policy does not match (an unknown host matches only "*"
 * policies). By default the request is still planned: every option reaches the engine except
 * num_ctx, which becomes an admission limit (no policy verified forwarding it); the model is
 * asked by its Ollama tag and thinking is stated. */
static void test_unknown_host_canonical(void **state)
{
    struct qr_child d;
    daemon_start(&d, NULL, NULL);
    replay_reset();
    struct qr_t_resp r;
    chat(d.port, "qr-policy-plain", false, 50, "\"ZZZ\"", 200, &r);
    assert_null(qr_t_header(&r, "X-Quantum-Policy"));
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_true(yyjson_get_num(opt(up, "temperature")) == 0.2);
    assert_int_equal(yyjson_get_sint(opt(up, "num_predict")), 50);
    assert_int_equal(yyjson_get_sint(opt(up, "seed")), 42);
    assert_int_equal(yyjson_get_sint(opt(up, "num_thread")), 8);
    assert_string_equal(yyjson_get_str(yyjson_arr_get(opt(up, "stop"), 0)), "ZZZ");
    assert_null(opt(up, "num_ctx"));
    assert_int_equal(n_opts(up), 5);
    yyjson_val *root = yyjson_doc_get_root(up);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), "gemma4-pp:e4b");
    assert_true(yyjson_is_false(yyjson_obj_get(root, "think")));
    yyjson_doc_free(up);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_false(qr_t_log_contains(&d, "model policy applied"));
}

/* The same with ollama_passthrough: adopted byte for byte, every option reaches the engine
 * unchanged. */
static void test_unknown_host_forwards_options(void **state)
{
    struct qr_child d;
    daemon_start(&d, "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true", NULL);
    replay_reset();
    struct qr_t_resp r;
    chat(d.port, "qr-policy-plain", false, 50, "\"ZZZ\"", 200, &r);
    assert_null(qr_t_header(&r, "X-Quantum-Policy"));
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_true(yyjson_get_num(opt(up, "temperature")) == 0.2);
    assert_int_equal(yyjson_get_sint(opt(up, "num_predict")), 50);
    assert_int_equal(yyjson_get_sint(opt(up, "seed")), 42);
    assert_int_equal(yyjson_get_sint(opt(up, "num_thread")), 8);
    assert_string_equal(yyjson_get_str(yyjson_arr_get(opt(up, "stop"), 0)), "ZZZ");
    assert_int_equal(yyjson_get_sint(opt(up, "num_ctx")), 4096);
    assert_int_equal(n_opts(up), 6);
    /* not the planned path: the model name and the streaming choice are the client's */
    yyjson_val *root = yyjson_doc_get_root(up);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), "gemma4-pp");
    assert_false(yyjson_get_bool(yyjson_obj_get(root, "stream")));
    yyjson_doc_free(up);

    /* nothing for the Runtime to honour: the engine's own streaming choice is kept */
    replay_reset();
    chat(d.port, "qr-policy-count", true, 3, "", 200, &r);
    char content[256], reason[32];
    int n;
    read_stream(&r, content, sizeof(content), &n, reason, sizeof(reason));
    assert_string_equal(content, "one two three four five six"); /* the replay ignores limits */
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_false(qr_t_log_contains(&d, "model policy applied"));
}

/* The experimental gate lets the unverified knobs through, and says so in the log. */
static void test_experimental_gate(void **state)
{
    struct qr_child d;
    daemon_start(&d, TURIN, "QUANTUM_RUNTIME_POLICY_EXPERIMENTAL=true");
    replay_reset();
    struct qr_t_resp r;
    chat(d.port, "qr-policy-plain", false, 50, "\"ZZZ\"", 200, &r);
    char *pol = qr_t_header(&r, "X-Quantum-Policy");
    assert_string_equal(pol, POLICY_ID);
    free(pol);
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_true(yyjson_get_num(opt(up, "temperature")) == 0.2);
    assert_int_equal(yyjson_get_sint(opt(up, "num_predict")), 50);
    assert_int_equal(yyjson_get_sint(opt(up, "seed")), 42);
    assert_int_equal(yyjson_get_sint(opt(up, "num_thread")), 8);
    assert_string_equal(yyjson_get_str(yyjson_arr_get(opt(up, "stop"), 0)), "ZZZ");
    /* the override is supported but not verified for this backend: still an admission limit */
    assert_null(opt(up, "num_ctx"));
    yyjson_doc_free(up);

    /* the plan shows the gate too */
    const char *route = "{\"model\":\"gemma4-pp\"}";
    qr_t_request("POST", d.port, "/v1/route", NULL, route, strlen(route), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"hardware_class\":\"amd-epyc-turin-cpu\""));
    assert_non_null(strstr(r.body, POLICY_ID));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(qr_t_log_contains(&d, "experimental gate: unverified knobs forwarded"));
    /* the knobs that reached the engine, not num_ctx (the router kept it an admission limit) */
    assert_true(qr_t_log_contains(&d, "\"knobs\":\"seed,stop,num_predict,num_thread\""));
}

/* A context above the model's native maximum is refused before anything reaches the engine. */
static void test_context_admission_refusal(void **state)
{
    struct qr_child d;
    daemon_start(&d, TURIN, NULL);
    replay_reset();
    const char body[] = "{\"model\":\"gemma4-pp\",\"messages\":[{\"role\":\"user\",\"content\":"
                        "\"hi\"}],\"stream\":false,\"options\":{\"num_ctx\":100000}}";
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    const char *msg = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "error"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "100000"));
    assert_non_null(strstr(msg, "8192"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    size_t n = 0;
    free(last_upstream("/api/chat", "body", &n));
    assert_int_equal(n, 0);

    /* within the limit: admitted, and num_ctx still does not reach the engine */
    const char ok[] = "{\"model\":\"gemma4-pp\",\"messages\":[{\"role\":\"user\",\"content\":"
                      "\"hi\"}],\"stream\":false,\"options\":{\"num_ctx\":8192}}";
    qr_t_request("POST", d.port, "/api/chat", NULL, ok, strlen(ok), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    yyjson_doc *up = upstream_chat();
    assert_null(opt(up, "num_ctx"));
    yyjson_doc_free(up);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* /v1/route with the TCI deployment profile and no model plans its target. */
static void test_route_profile(void **state)
{
    struct qr_child d;
    daemon_start(&d, NULL, NULL);
    struct qr_t_resp r;
    const char body[] = "{\"profile\":\"quantum-coreos-tci\"}";
    qr_t_request("POST", d.port, "/v1/route", NULL, body, strlen(body), &r);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *plan = yyjson_obj_get(yyjson_doc_get_root(doc), "plan");
    assert_non_null(plan);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(plan, "canonical_model_id")),
                        "quantum-tci-gemma4-e4b");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(plan, "requested_identifier")),
                        "quantum-tci-gemma4-e4b");
    /* the builtin manifest's only artifact is a profile:// reference: Ollama serves none of it,
     * so the plan explains the refusal (never another model) */
    assert_true(r.status == 200 || r.status == 422);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    /* the profile's architecture class applies to an explicit model too */
    const char moe[] = "{\"profile\":\"ember-production\",\"model\":\"gemma4-pp\"}";
    qr_t_request("POST", d.port, "/v1/route", NULL, moe, strlen(moe), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "architecture.moe"));
    qr_t_resp_free(&r);

    const char unknown[] = "{\"profile\":\"no-such-profile\"}";
    qr_t_request("POST", d.port, "/v1/route", NULL, unknown, strlen(unknown), &r);
    assert_int_equal(r.status, 404);
    assert_non_null(strstr(r.body, "deployment_profile_not_found"));
    qr_t_resp_free(&r);

    /* a profile without a target still needs a model */
    const char nomodel[] = "{\"profile\":\"ember-production\"}";
    qr_t_request("POST", d.port, "/v1/route", NULL, nomodel, strlen(nomodel), &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "invalid_route_request"));
    qr_t_resp_free(&r);

    /* the profile is listed with its target */
    qr_t_request("GET", d.port, "/v1/deployment-profiles", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"target\":\"quantum-tci-gemma4-e4b\""));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* Regression: /api/tags answered from the registry dropped the client's query string. */
static void test_tags_forwards_query_string(void **state)
{
    struct qr_child d;
    daemon_start(&d, NULL, NULL);
    replay_reset();
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/api/tags?verbose=true&x=a%20b", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "gemma4-pp"));
    qr_t_resp_free(&r);
    char *q = last_upstream("/api/tags", "query", NULL);
    assert_non_null(q);
    assert_string_equal(q, "verbose=true&x=a%20b");
    free(q);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unverified_knobs_stripped),
        cmocka_unit_test(test_num_predict_honoured_by_runtime),
        cmocka_unit_test(test_stop_honoured_by_runtime),
        cmocka_unit_test(test_unknown_host_canonical),
        cmocka_unit_test(test_unknown_host_forwards_options),
        cmocka_unit_test(test_experimental_gate),
        cmocka_unit_test(test_context_admission_refusal),
        cmocka_unit_test(test_route_profile),
        cmocka_unit_test(test_tags_forwards_query_string),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
