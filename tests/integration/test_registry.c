/* The registry, router and policy endpoints of the real daemon over loopback, against the replay
 * server playing Ollama (and, in one test, an OpenAI-compatible engine): /v1/models in both
 * shapes, /v1/models/{id}, /v1/backends, /v1/route, /v1/model-policies, /v1/upstreams,
 * /v1/deployment-profiles, /v1/admission, Ollama's /api/tags and /api/show answered from the
 * registry, the router in the inference path (capability refusal in the client's error shape,
 * X-Quantum-Backend, the served name reaching the engine) and SIGHUP rebuilding the catalog. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "gguf/gguf.h"
#include "harness.h"

#define TOKEN "t0ken-for-registry"
static const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};

static struct qr_child replay, daemon_;
static char regdir[64];
static char env_reg[128];

/* A manifest served by Ollama (tag acme-text:1b) and by the OpenAI backend (npm-model). Text
 * only: tools, vision and thinking are declared unsupported. */
static const char ACME[] =
    "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"acme-text\","
    "\"display_name\":\"Acme Text Test Model\",\"aliases\":[\"acme/text:1b\"],"
    "\"source\":{\"provider\":\"example\",\"reference\":\"acme/text\",\"revision\":\"unresolved\"},"
    "\"backend\":{\"type\":\"external\"},\"artifacts\":["
    "{\"uri\":\"openai:openai/npm-model\",\"role\":\"inference\"},"
    "{\"uri\":\"ollama:acme-text:1b\",\"backend\":\"ollama-adapter\",\"format\":\"gguf\","
    "\"role\":\"inference\"}],"
    "\"model\":{\"architecture\":\"acme\",\"parameter_class\":\"1b\",\"quantization\":\"q8_0\","
    "\"context_window\":4096,\"architecture_class\":\"dense\",\"total_parameters_b\":1.2,"
    "\"architecture_contract\":{\"architecture\":\"acme\",\"ffn\":\"dense\","
    "\"embedding_length\":2048,\"context_length\":4096}},"
    "\"capabilities\":{\"text\":true,\"vision\":false,\"audio\":false,\"embeddings\":false,"
    "\"tools\":false,\"thinking\":false},"
    "\"compatibility\":{\"min_runtime_version\":\"0.4.0-alpha.1\"},"
    "\"state\":{\"install\":\"external\",\"verification\":\"unverified\",\"lifecycle\":\"active\"},"
    "\"provenance\":{\"publisher\":\"Quantum Runtime tests\","
    "\"retrieved_at\":\"2026-01-02T03:04:05Z\"}}";

/* A deployment profile small enough for any test host: only missing evidence can stop it. */
static const char TINY_PROFILE[] =
    "{\"schema_version\":\"quantum.runtime/deployment-profile/v1alpha1\",\"id\":\"tiny-moe\","
    "\"display_name\":\"Tiny MoE\",\"tier\":\"experimental\",\"description\":\"tests\","
    "\"hardware\":{\"memory\":{\"minimum_bytes\":1048576,\"ecc_required\":true},"
    "\"cpu\":{\"minimum_physical_cores\":1},\"accelerator\":{\"required\":false}},"
    "\"model\":{\"architecture_class\":\"moe\"}}";

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_registry_dir(void)
{
    snprintf(regdir, sizeof(regdir), "/tmp/qr-registry-XXXXXX");
    assert_non_null(mkdtemp(regdir));
    write_file(regdir, "acme-text.json", ACME);
    write_file(regdir, "broken.json",
               "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\"}");
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/deployment-profiles", regdir);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file(sub, "tiny-moe.json", TINY_PROFILE);
    snprintf(sub, sizeof(sub), "%s/policies", regdir);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file(sub, "bad-policy.json", "{\"id\":\"x\"}");
    snprintf(env_reg, sizeof(env_reg), "QUANTUM_RUNTIME_REGISTRY_DIRS=/nonexistent-qr:%s", regdir);
}

static void rm_rf_regdir(void)
{
    char *argv[] = {"/bin/rm", "-rf", regdir, NULL};
    char *out = NULL;
    qr_t_run(argv, NULL, 10000, &out);
    free(out);
}

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    make_registry_dir();
    qr_t_replay_start(&replay);
    const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=" TOKEN, env_reg, NULL};
    qr_t_daemon_start(&daemon_, replay.port, env);
    return 0;
}

static int teardown(void **state)
{
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 10000), 0);
    qr_t_stop(&replay, SIGTERM, 5000);
    rm_rf_regdir();
    curl_global_cleanup();
    return 0;
}

/* --- helpers --- */

/* One request with the token; the body parsed (NULL when not JSON). */
static yyjson_doc *call(uint16_t port, const char *method, const char *target, const char *body,
                        long want_status, struct qr_t_resp *keep)
{
    struct qr_t_resp r;
    qr_t_request(method, port, target, auth, body, body ? strlen(body) : 0, &r);
    if (r.status != want_status)
        fail_msg("%s %s: status %ld, want %ld; body: %s", method, target, r.status, want_status,
                 r.body);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    if (keep)
        *keep = r;
    else
        qr_t_resp_free(&r);
    return doc;
}

static const char *sget(yyjson_val *o, const char *key)
{
    return yyjson_get_str(yyjson_obj_get(o, key));
}

/* The Runtime error shape with this code and the request id of the header. */
static void assert_runtime_error(uint16_t port, const char *method, const char *target,
                                 const char *body, long status, const char *code)
{
    struct qr_t_resp r;
    yyjson_doc *doc = call(port, method, target, body, status, &r);
    assert_non_null(doc);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_string_equal(sget(err, "code"), code);
    assert_true(yyjson_get_len(yyjson_obj_get(err, "message")) > 0);
    char *rid = qr_t_header(&r, "X-Quantum-Request-ID");
    assert_non_null(rid);
    assert_string_equal(sget(err, "request_id"), rid);
    free(rid);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
}

/* The entry of arr whose member key equals value, or NULL. */
static yyjson_val *find_by(yyjson_val *arr, const char *key, const char *value)
{
    size_t i, n;
    yyjson_val *it;
    yyjson_arr_foreach(arr, i, n, it)
    {
        const char *v = sget(it, key);
        if (v && !strcmp(v, value))
            return it;
    }
    return NULL;
}

static bool arr_has_str(yyjson_val *arr, const char *s)
{
    size_t i, n;
    yyjson_val *it;
    yyjson_arr_foreach(arr, i, n, it)
    {
        if (yyjson_is_str(it) && !strcmp(yyjson_get_str(it), s))
            return true;
    }
    return false;
}

static void replay_reset(struct qr_child *r)
{
    assert_true(qr_t_replay_reset(r->port));
}

/* The body of the last request the replay server saw for path (malloc'd), or NULL. */
static char *last_upstream_body(struct qr_child *r, const char *path)
{
    struct qr_t_resp x;
    qr_t_request("GET", r->port, "/__replay/requests", NULL, NULL, 0, &x);
    yyjson_doc *doc = yyjson_read(x.body, x.body_len, 0);
    qr_t_resp_free(&x);
    assert_non_null(doc);
    char *found = NULL;
    size_t i, n;
    yyjson_val *it;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, n, it)
    {
        const char *p = sget(it, "path");
        if (p && !strcmp(p, path)) {
            free(found);
            found = strdup(sget(it, "body") ? sget(it, "body") : "");
        }
    }
    yyjson_doc_free(doc);
    return found;
}

/* --- /v1/models --- */

static void test_models_list_both_shapes(void **state)
{
    yyjson_doc *doc = call(daemon_.port, "GET", "/v1/models", NULL, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    /* OpenAI's list */
    assert_string_equal(sget(root, "object"), "list");
    yyjson_val *data = yyjson_obj_get(root, "data");
    yyjson_val *llama = find_by(data, "id", "llama3.2:1b"); /* what the backend lists */
    assert_non_null(llama);
    assert_string_equal(sget(llama, "object"), "model");
    assert_true(yyjson_is_int(yyjson_obj_get(llama, "created")));
    assert_string_equal(sget(llama, "owned_by"), "ollama");
    assert_string_equal(sget(llama, "canonical_id"), "ollama.llama3.2-1b");
    yyjson_val *acme = find_by(data, "id", "acme-text"); /* the registry's, for this backend */
    assert_non_null(acme);
    assert_string_equal(sget(acme, "owned_by"), "quantum-runtime");
    assert_null(find_by(data, "id", "generic-text-model")); /* no artifact Ollama serves */
    /* the native registry list */
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    assert_string_equal(sget(root, "schema_version"), "quantum.runtime/model-manifest/v1alpha1");
    yyjson_val *models = yyjson_obj_get(root, "models");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), yyjson_arr_size(models));
    assert_non_null(find_by(models, "id", "generic-text-model"));
    yyjson_val *m = find_by(models, "id", "acme-text");
    assert_non_null(m);
    assert_true(arr_has_str(yyjson_obj_get(m, "capabilities"), "text"));
    assert_string_equal(sget(yyjson_obj_get(m, "state"), "verification"), "unverified");
    /* problems: the broken manifest, the bad policy, the missing directory; never fatal */
    yyjson_val *problems = yyjson_obj_get(root, "problems");
    assert_true(yyjson_get_uint(yyjson_obj_get(root, "problems_total")) >= 3);
    size_t i, n;
    yyjson_val *p;
    bool broken = false, policy = false, missing = false;
    yyjson_arr_foreach(problems, i, n, p)
    {
        const char *origin = sget(p, "origin");
        assert_non_null(sget(p, "kind"));
        assert_non_null(sget(p, "message"));
        broken |= strstr(origin, "broken.json") != NULL;
        policy |= strstr(origin, "bad-policy.json") != NULL;
        missing |= strstr(origin, "/nonexistent-qr") != NULL;
    }
    assert_true(broken && policy && missing);
    yyjson_doc_free(doc);
}

static void test_model_by_id(void **state)
{
    /* listed by the backend and joined to the registry: both shapes in one object */
    yyjson_doc *doc = call(daemon_.port, "GET", "/v1/models/llama3.2:1b", NULL, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "id"), "llama3.2:1b");
    assert_string_equal(sget(root, "object"), "model");
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    assert_string_equal(sget(root, "requested_identifier"), "llama3.2:1b");
    assert_string_equal(sget(yyjson_obj_get(root, "model"), "id"), "ollama.llama3.2-1b");
    yyjson_doc_free(doc);

    /* only in the registry, by alias (percent-encoded ':' too) */
    doc = call(daemon_.port, "GET", "/v1/models/ember-coreui%3Alatest", NULL, 200, NULL);
    root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "id"), "ember-coreui");
    assert_string_equal(sget(root, "object"), "model");
    assert_string_equal(sget(root, "requested_identifier"), "ember-coreui:latest");
    yyjson_val *model = yyjson_obj_get(root, "model");
    assert_string_equal(sget(model, "schema_version"), "quantum.runtime/model-manifest/v1alpha1");
    assert_string_equal(sget(model, "display_name"), "Ember CoreUI Model Profile");
    yyjson_doc_free(doc);

    /* unknown: OpenAI's 404 shape (openai-node's NotFoundError) */
    struct qr_t_resp r;
    doc = call(daemon_.port, "GET", "/v1/models/no-such-model", NULL, 404, &r);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_string_equal(sget(err, "code"), "model_not_found");
    assert_string_equal(sget(err, "type"), "invalid_request_error");
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
}

/* --- native endpoints --- */

static void test_backends(void **state)
{
    yyjson_doc *doc = call(daemon_.port, "GET", "/v1/backends", NULL, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    assert_string_equal(sget(root, "contract_version"), "quantum.runtime/backend/v1alpha1");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), 1);
    yyjson_val *b = yyjson_arr_get(yyjson_obj_get(root, "backends"), 0);
    assert_string_equal(sget(b, "contract_version"), "quantum.runtime/backend/v1alpha1");
    assert_string_equal(sget(b, "id"), "ollama");
    assert_string_equal(sget(b, "kind"), "ollama-adapter");
    assert_string_equal(sget(b, "execution_mode"), "external");
    yyjson_val *caps = yyjson_obj_get(b, "capabilities");
    assert_string_equal(sget(caps, "text"), "conditional");
    assert_string_equal(sget(caps, "streaming.content"), "supported");
    yyjson_doc_free(doc);
    assert_runtime_error(daemon_.port, "POST", "/v1/backends", "{}", 405, "method_not_allowed");
}

static void test_route(void **state)
{
    const char *ok = "{\"model\":\"ember-coreui:latest\",\"capabilities\":[\"inference.text\","
                     "\"multimodal.vision\"]}";
    yyjson_doc *doc = call(daemon_.port, "POST", "/v1/route", ok, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    yyjson_val *plan = yyjson_obj_get(root, "plan");
    assert_string_equal(sget(plan, "requested_identifier"), "ember-coreui:latest");
    assert_string_equal(sget(plan, "canonical_model_id"), "ember-coreui");
    assert_string_equal(sget(plan, "backend_id"), "ollama");
    assert_string_equal(sget(plan, "backend_kind"), "ollama-adapter");
    assert_string_equal(sget(plan, "artifact_uri"), "ollama:ember-coreui:latest");
    yyjson_val *req = yyjson_obj_get(plan, "required_capabilities");
    assert_true(arr_has_str(req, "inference.text") && arr_has_str(req, "multimodal.vision"));
    yyjson_doc_free(doc);

    /* 422: a capability the model lacks; the error body carries the missing keys and every
     * rejected candidate with its reason */
    struct qr_t_resp r;
    doc = call(daemon_.port, "POST", "/v1/route",
               "{\"model\":\"ember-coreui\",\"capabilities\":[\"multimodal.audio\"]}", 422, &r);
    root = yyjson_doc_get_root(doc);
    yyjson_val *err = yyjson_obj_get(root, "error");
    assert_string_equal(sget(err, "code"), "no_compatible_backend");
    assert_non_null(strstr(sget(err, "message"), "multimodal.audio"));
    char *rid = qr_t_header(&r, "X-Quantum-Request-ID");
    assert_string_equal(sget(err, "request_id"), rid);
    free(rid);
    plan = yyjson_obj_get(root, "plan");
    assert_true(arr_has_str(yyjson_obj_get(plan, "missing_capabilities"), "multimodal.audio"));
    yyjson_val *rej = yyjson_arr_get(yyjson_obj_get(plan, "rejected"), 0);
    assert_string_equal(sget(rej, "reason"), "capability");
    assert_string_equal(sget(rej, "backend_id"), "ollama");
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    /* the identifier is trimmed; no capabilities is a plan too */
    doc = call(daemon_.port, "POST", "/v1/route", "{\"model\":\"  ember-coreui \"}", 200, NULL);
    plan = yyjson_obj_get(yyjson_doc_get_root(doc), "plan");
    assert_string_equal(sget(plan, "canonical_model_id"), "ember-coreui");
    yyjson_doc_free(doc);

    /* a name that is no capability key can never be satisfied */
    assert_runtime_error(daemon_.port, "POST", "/v1/route",
                         "{\"model\":\"ember-coreui\",\"capabilities\":[\"future.magic\"]}", 422,
                         "no_compatible_backend");
    assert_runtime_error(daemon_.port, "POST", "/v1/route", "{\"model\":\"no-such-model\"}", 404,
                         "model_not_found");
    assert_runtime_error(daemon_.port, "POST", "/v1/route", "{\"model\":\"\"}", 400,
                         "invalid_route_request");
    assert_runtime_error(daemon_.port, "POST", "/v1/route",
                         "{\"model\":\"ember-coreui\",\"extra\":true}", 400,
                         "invalid_route_request");
    assert_runtime_error(daemon_.port, "POST", "/v1/route", "{not json", 400,
                         "invalid_route_request");
    assert_runtime_error(daemon_.port, "GET", "/v1/route", NULL, 405, "method_not_allowed");
}

static void test_policies_upstreams_profiles(void **state)
{
    yyjson_doc *doc = call(daemon_.port, "GET", "/v1/model-policies", NULL, 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    assert_string_equal(sget(root, "schema_version"), "quantum.runtime/model-policy/v1alpha1");
    yyjson_val *pol = yyjson_obj_get(root, "policies");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), yyjson_arr_size(pol));
    assert_non_null(find_by(pol, "id", "gemma4-ollama-turin-minimal"));
    yyjson_doc_free(doc);

    doc = call(daemon_.port, "GET", "/v1/upstreams", NULL, 200, NULL);
    root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "schema_version"), "quantum.runtime/upstream-ledger/v1alpha1");
    assert_true(yyjson_arr_size(yyjson_obj_get(root, "entries")) >= 1);
    assert_true(yyjson_is_arr(yyjson_obj_get(root, "latest_known_good")));
    yyjson_doc_free(doc);

    doc = call(daemon_.port, "GET", "/v1/deployment-profiles", NULL, 200, NULL);
    root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "schema_version"),
                        "quantum.runtime/deployment-profile/v1alpha1");
    yyjson_val *profiles = yyjson_obj_get(root, "profiles");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), 3);
    assert_non_null(find_by(profiles, "id", "ember-production"));
    assert_non_null(find_by(profiles, "id", "quantum-coreos-tci"));
    assert_non_null(find_by(profiles, "id", "tiny-moe")); /* from the registry directory */
    yyjson_doc_free(doc);

    /* auth like every route */
    struct qr_t_resp r;
    const char *paths[] = {"/v1/backends", "/v1/model-policies", "/v1/upstreams",
                           "/v1/deployment-profiles"};
    for (size_t i = 0; i < 4; i++) {
        qr_t_request("GET", daemon_.port, paths[i], NULL, NULL, 0, &r);
        assert_int_equal(r.status, 401);
        qr_t_resp_free(&r);
    }
}

static const char *decision(yyjson_doc *doc)
{
    return sget(yyjson_obj_get(yyjson_doc_get_root(doc), "result"), "decision");
}

static yyjson_val *check(yyjson_doc *doc, const char *id)
{
    return find_by(yyjson_obj_get(yyjson_obj_get(yyjson_doc_get_root(doc), "result"), "checks"),
                   "id", id);
}

static void test_admission(void **state)
{
    /* no operator evidence: physical cores and ECC are unknown, never guessed */
    yyjson_doc *doc =
        call(daemon_.port, "POST", "/v1/admission",
             "{\"profile\":\"tiny-moe\",\"model\":\"gemma4:26b-a4b-reference\"}", 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(root, "api_version"), "v1alpha1");
    assert_string_equal(sget(root, "admission_schema"),
                        "quantum.runtime/admission-result/v1alpha1");
    assert_string_equal(decision(doc), "needs_operator_evidence");
    assert_string_equal(sget(check(doc, "hardware.memory.ecc"), "state"), "unknown");
    assert_string_equal(sget(check(doc, "hardware.memory.minimum_bytes"), "state"), "pass");
    assert_string_equal(sget(yyjson_obj_get(root, "host"), "physical_cores"), "unknown");
    assert_string_equal(sget(yyjson_obj_get(root, "result"), "canonical_model_id"),
                        "gemma4-26b-a4b-reference");
    yyjson_doc_free(doc);

    /* the operator states what the host cannot show; a core claim stays unknown while the host
     * reports no physical core count to bound it (host discovery comes later) */
    doc = call(daemon_.port, "POST", "/v1/admission",
               "{\"profile\":\"tiny-moe\",\"model\":\"gemma4-26b-a4b-reference\","
               "\"operator_evidence\":{\"ecc_verified\":true,\"dedicated_physical_cores\":1,"
               "\"core_budget\":1}}",
               200, NULL);
    assert_string_equal(decision(doc), "needs_operator_evidence");
    assert_string_equal(sget(check(doc, "hardware.memory.ecc"), "state"), "pass");
    assert_string_equal(sget(check(doc, "hardware.cpu.minimum_physical_cores"), "state"),
                        "unknown");
    yyjson_doc_free(doc);

    /* a dense model under a MoE profile */
    doc = call(daemon_.port, "POST", "/v1/admission",
               "{\"profile\":\"tiny-moe\",\"model\":\"acme-text\"}", 200, NULL);
    assert_string_equal(decision(doc), "rejected");
    assert_string_equal(sget(check(doc, "model.architecture_class"), "state"), "fail");
    yyjson_doc_free(doc);

    assert_runtime_error(daemon_.port, "POST", "/v1/admission",
                         "{\"profile\":\"no-such\",\"model\":\"acme-text\"}", 404,
                         "deployment_profile_not_found");
    assert_runtime_error(daemon_.port, "POST", "/v1/admission",
                         "{\"profile\":\"tiny-moe\",\"model\":\"no-such-model\"}", 404,
                         "model_not_found");
    assert_runtime_error(daemon_.port, "POST", "/v1/admission",
                         "{\"profile\":\"tiny-moe\",\"model\":\"acme-text\",\"extra\":1}", 400,
                         "invalid_admission_request");
    assert_runtime_error(daemon_.port, "POST", "/v1/admission",
                         "{\"profile\":\"tiny-moe\",\"model\":\"acme-text\","
                         "\"operator_evidence\":{\"core_budget\":-2}}",
                         400, "invalid_admission_request");
    assert_runtime_error(daemon_.port, "POST", "/v1/admission", "[1,2", 400,
                         "invalid_admission_request");
}

/* --- Ollama model-read routes --- */

static void test_tags_merged(void **state)
{
    struct qr_t_resp r;
    yyjson_doc *doc = call(daemon_.port, "GET", "/api/tags", NULL, 200, &r);
    char *cookie = qr_t_header(&r, "Set-Cookie");
    assert_null(cookie); /* the upstream's cookie never reaches the client */
    qr_t_resp_free(&r);
    yyjson_val *models = yyjson_obj_get(yyjson_doc_get_root(doc), "models");
    /* Ollama's own entry, every member as Ollama sent it */
    yyjson_val *llama = find_by(models, "name", "llama3.2:1b");
    assert_non_null(llama);
    assert_string_equal(sget(llama, "modified_at"), "2025-10-14T09:12:44.918273645-07:00");
    assert_string_equal(sget(yyjson_obj_get(llama, "details"), "quantization_level"), "Q8_0");
    /* the registry's entry, in Ollama's shape under the tag Ollama knows it by */
    yyjson_val *acme = find_by(models, "name", "acme-text:1b");
    assert_non_null(acme);
    assert_string_equal(sget(acme, "model"), "acme-text:1b");
    assert_string_equal(sget(acme, "modified_at"), "2026-01-02T03:04:05Z"); /* stable */
    assert_true(yyjson_is_int(yyjson_obj_get(acme, "size")));
    assert_true(yyjson_is_str(yyjson_obj_get(acme, "digest")));
    yyjson_val *d = yyjson_obj_get(acme, "details");
    assert_string_equal(sget(d, "format"), "gguf");
    assert_string_equal(sget(d, "family"), "acme");
    assert_true(arr_has_str(yyjson_obj_get(d, "families"), "acme"));
    assert_string_equal(sget(d, "parameter_size"), "1.2B");
    assert_string_equal(sget(d, "quantization_level"), "q8_0");
    assert_non_null(find_by(models, "name", "ember-coreui:latest"));
    assert_null(find_by(models, "name", "generic-text-model"));
    yyjson_doc_free(doc);
}

static void test_show(void **state)
{
    /* a registry model Ollama does not report: answered by the Runtime */
    replay_reset(&replay);
    yyjson_doc *doc =
        call(daemon_.port, "POST", "/api/show", "{\"model\":\"ember-coreui\"}", 200, NULL);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *caps = yyjson_obj_get(root, "capabilities");
    assert_true(arr_has_str(caps, "completion") && arr_has_str(caps, "vision") &&
                arr_has_str(caps, "thinking"));
    assert_false(arr_has_str(caps, "tools") || arr_has_str(caps, "embedding"));
    yyjson_val *info = yyjson_obj_get(root, "model_info");
    assert_string_equal(sget(info, "general.architecture"), "gemma4");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "gemma4.context_length")), 8192);
    assert_string_equal(sget(yyjson_obj_get(root, "details"), "family"), "gemma4");
    yyjson_doc_free(doc);
    char *up = last_upstream_body(&replay, "/api/show");
    assert_null(up); /* nothing was forwarded */

    doc = call(daemon_.port, "POST", "/api/show", "{\"model\":\"acme/text:1b\"}", 200, NULL);
    info = yyjson_obj_get(yyjson_doc_get_root(doc), "model_info");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "acme.embedding_length")), 2048);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "acme.context_length")), 4096);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "general.parameter_count")), 1200000000);
    yyjson_doc_free(doc);

    /* a model Ollama reports (or one nobody knows): Ollama answers, byte for byte */
    doc = call(daemon_.port, "POST", "/api/show", "{\"model\":\"llama3.2:1b\"}", 200, NULL);
    assert_non_null(sget(yyjson_doc_get_root(doc), "license"));
    yyjson_doc_free(doc);
    up = last_upstream_body(&replay, "/api/show");
    assert_non_null(up);
    assert_string_equal(up, "{\"model\":\"llama3.2:1b\"}");
    free(up);
}

/* --- the router in the inference path --- */

static const char TOOLS[] = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
                            "\"parameters\":{\"type\":\"object\"}}}]";

static void test_inference_routed(void **state)
{
    char body[512];
    struct qr_t_resp r;
    /* a manifest model: planned, disclosed, and the engine is asked for the tag it knows */
    replay_reset(&replay);
    snprintf(body, sizeof(body),
             "{\"model\":\"ember-coreui\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    yyjson_doc *doc = call(daemon_.port, "POST", "/v1/chat/completions", body, 200, &r);
    char *hb = qr_t_header(&r, "X-Quantum-Backend");
    assert_non_null(hb);
    assert_string_equal(hb, "ollama");
    free(hb);
    char *hm = qr_t_header(&r, "X-Quantum-Model");
    assert_string_equal(hm, "ember-coreui");
    free(hm);
    qr_t_resp_free(&r);
    yyjson_doc_free(doc);
    char *up = last_upstream_body(&replay, "/api/chat");
    assert_non_null(up);
    assert_non_null(strstr(up, "\"model\":\"ember-coreui:latest\""));
    free(up);

    /* a capability the model declares unsupported: 422 naming it, nothing reaches the engine */
    replay_reset(&replay);
    snprintf(body, sizeof(body),
             "{\"model\":\"ember-coreui\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}",
             TOOLS);
    doc = call(daemon_.port, "POST", "/v1/chat/completions", body, 422, &r);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_string_equal(sget(err, "code"), "capability_unsupported");
    assert_string_equal(sget(err, "type"), "invalid_request_error");
    assert_non_null(strstr(sget(err, "message"), "tools.calling"));
    char *retry = qr_t_header(&r, "x-should-retry");
    assert_string_equal(retry, "false");
    free(retry);
    assert_null(qr_t_header(&r, "X-Quantum-Backend"));
    qr_t_resp_free(&r);
    yyjson_doc_free(doc);
    up = last_upstream_body(&replay, "/api/chat");
    assert_null(up);

    /* names without a manifest (backend-reported, unknown) pass through as before */
    const char *names[] = {"llama3.2:1b", "not-in-any-registry"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(body, sizeof(body),
                 "{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}",
                 names[i], TOOLS);
        doc = call(daemon_.port, "POST", "/v1/chat/completions", body, 200, &r);
        hb = qr_t_header(&r, "X-Quantum-Backend");
        assert_string_equal(hb, "ollama");
        free(hb);
        assert_null(qr_t_header(&r, "X-Quantum-Model"));
        qr_t_resp_free(&r);
        yyjson_doc_free(doc);
        up = last_upstream_body(&replay, "/api/chat");
        char want[96];
        snprintf(want, sizeof(want), "\"model\":\"%s\"", names[i]);
        assert_non_null(strstr(up, want));
        free(up);
    }
}

/* backend=ollama: Ollama's inference routes pass through byte for byte, backend disclosed. */
static void test_ollama_canonical_discloses_backend(void **state)
{
    struct qr_t_resp r;
    const char *body = "{\"model\":\"ember-coreui\",\"messages\":[{\"role\":\"user\","
                       "\"content\":\"hi\"}]}";
    yyjson_doc *doc = call(daemon_.port, "POST", "/api/chat", body, 200, &r);
    yyjson_doc_free(doc);
    char *hb = qr_t_header(&r, "X-Quantum-Backend");
    assert_non_null(hb);
    assert_string_equal(hb, "ollama");
    free(hb);
    hb = qr_t_header(&r, "X-Quantum-Model"); /* planned: the canonical model is disclosed */
    assert_non_null(hb);
    free(hb);
    qr_t_resp_free(&r);
    /* Ollama is asked for the artifact's tag, with thinking stated explicitly */
    char *up = last_upstream_body(&replay, "/api/chat");
    assert_non_null(strstr(up, "\"model\":\"ember-coreui:latest\""));
    assert_non_null(strstr(up, "\"think\":false"));
    free(up);
    /* Ollama described the model on the way (capabilities completion and tools): what it lacks
     * is engine evidence the router weighs, whatever the manifest claims */
    doc = call(daemon_.port, "POST", "/v1/route",
               "{\"model\":\"ember-coreui\",\"capabilities\":[\"reasoning_control\"]}", 422, &r);
    assert_non_null(
        strstr(r.body, "ollama /api/show (0.12.6): capabilities lack 'vision', 'thinking'"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    doc = call(daemon_.port, "POST", "/v1/route",
               "{\"model\":\"ember-coreui\",\"capabilities\":[\"inference.text\"]}", 200, NULL);
    yyjson_doc_free(doc);
}

/* backend=openai: Ollama clients are translated, so refusals come in Ollama's error shape. */
static void test_openai_backend(void **state)
{
    struct qr_child rp, d;
    qr_t_replay_start_dir(&rp, QR_TEST_CASES "/npm-replay");
    char url[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", rp.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url, env_reg, NULL};
    qr_t_daemon_start(&d, 0, env);
    struct qr_t_resp r;

    char body[512];
    snprintf(body, sizeof(body),
             "{\"model\":\"acme-text\",\"stream\":false,\"messages\":[{\"role\":\"user\","
             "\"content\":\"plain-whole-please\"}]%s}",
             TOOLS);
    qr_t_request("POST", d.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_true(yyjson_is_str(e)); /* {"error":"<text>"} */
    assert_non_null(strstr(yyjson_get_str(e), "tools.calling"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    /* a manifest model no configured backend serves (scripted-chat: a GGUF for llama.cpp) goes
     * through unplanned, but never with what the model itself rules out: an image to a model
     * whose manifest says vision false is refused before the engine is asked */
    replay_reset(&rp);
    snprintf(body, sizeof(body),
             "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\",\"content\":["
             "{\"type\":\"text\",\"text\":\"what is this?\"},{\"type\":\"image_url\","
             "\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgo=\"}}]}]}");
    const char *const ct[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", d.port, "/v1/chat/completions", ct, body, strlen(body), &r);
    assert_int_equal(r.status, 422);
    assert_non_null(strstr(r.body, "does not support 'multimodal.vision'"));
    qr_t_resp_free(&r);
    assert_null(last_upstream_body(&rp, "/v1/chat/completions"));

    /* without tools: planned onto the OpenAI backend under the id the engine serves */
    replay_reset(&rp);
    snprintf(body, sizeof(body),
             "{\"model\":\"acme-text\",\"stream\":false,\"messages\":[{\"role\":\"user\","
             "\"content\":\"plain-whole-please\"}]}");
    qr_t_request("POST", d.port, "/api/chat", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    char *hb = qr_t_header(&r, "X-Quantum-Backend");
    assert_string_equal(hb, "openai");
    free(hb);
    qr_t_resp_free(&r);
    char *up = last_upstream_body(&rp, "/v1/chat/completions");
    assert_non_null(up);
    assert_non_null(strstr(up, "\"model\":\"npm-model\""));
    free(up);

    /* /api/tags lists the engine's models; /api/show answers from the registry or 404s */
    qr_t_request("GET", d.port, "/api/tags", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"name\":\"npm-model\""));
    qr_t_resp_free(&r);
    qr_t_request("POST", d.port, "/api/show", NULL, "{\"model\":\"acme-text\"}", 21, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"capabilities\":[\"completion\"]"));
    qr_t_resp_free(&r);
    qr_t_request("POST", d.port, "/api/show", NULL, "{\"model\":\"nope\"}", 16, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"error\":\"model 'nope' not found\"}\n");
    qr_t_resp_free(&r);

    /* /v1/backends names the OpenAI-compatible adapter */
    qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"kind\":\"openai-compatible\""));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    qr_t_stop(&rp, SIGTERM, 5000);
}

/* s with every from replaced by to (malloc'd). */
static char *replace_all(const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    for (const char *p = s; (p = strstr(p, from)); p += fl)
        n++;
    char *out = malloc(strlen(s) + n * tl + 1), *w = out;
    assert_non_null(out);
    for (const char *p = s, *q; *p; p = q + fl) {
        q = strstr(p, from);
        if (!q) {
            strcpy(w, p);
            return out;
        }
        memcpy(w, p, (size_t) (q - p));
        w += q - p;
        memcpy(w, to, tl);
        w += tl;
    }
    *w = '\0';
    return out;
}

static void test_sighup_rebuilds_catalog(void **state)
{
    struct qr_child d;
    const char *const env[] = {env_reg, NULL};
    qr_t_daemon_start(&d, replay.port, env);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/models/late-model", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 404);
    qr_t_resp_free(&r);

    char *late = replace_all(ACME, "acme-text", "late-model");
    char *late2 = replace_all(late, "acme/text", "late/text");
    write_file(regdir, "late-model.json", late2);
    free(late);
    free(late2);
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !qr_t_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    qr_t_request("GET", d.port, "/v1/models/late-model", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"requested_identifier\":\"late-model\""));
    qr_t_resp_free(&r);
    char path[128];
    snprintf(path, sizeof(path), "%s/late-model.json", regdir);
    unlink(path);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* GGUF discovery in models_dir: a file becomes a model whose manifest is derived from it, hashed
 * (the digest cached under state_dir), described by /api/show from what the file states. */
static void test_gguf_discovery(void **state)
{
    char dir[] = "/tmp/qr-models-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/Toy MoE.gguf", dir);
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", qr_slice_str("toyarch"));
    qr_gguf_writer_add_u32(w, "toyarch.block_count", 2);
    qr_gguf_writer_add_u32(w, "toyarch.context_length", 2048);
    qr_gguf_writer_add_u32(w, "toyarch.embedding_length", 8);
    qr_gguf_writer_add_u32(w, "toyarch.expert_count", 4);
    qr_gguf_writer_add_u32(w, "toyarch.expert_used_count", 1);
    uint64_t emb[2] = {8, 16}, exps[3] = {8, 4, 4};
    qr_gguf_writer_add_tensor(w, "token_embd.weight", 0, 2, emb, NULL, 0);
    qr_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight", 0, 3, exps, NULL, 0);
    struct qr_diag diag;
    assert_int_equal(qr_gguf_writer_write_file(w, path, &diag), QR_OK);
    qr_gguf_writer_free(w);

    char env_models[160];
    snprintf(env_models, sizeof(env_models), "QUANTUM_RUNTIME_MODELS_DIR=%s", dir);
    const char *const env[] = {env_models, NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/models/toy-moe", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    qr_t_resp_free(&r);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *model = yyjson_obj_get(root, "model");
    assert_string_equal(sget(yyjson_obj_get(model, "model"), "architecture"), "toyarch");
    assert_string_equal(sget(yyjson_obj_get(model, "model"), "architecture_class"), "moe");
    yyjson_val *file =
        yyjson_arr_get(yyjson_obj_get(yyjson_obj_get(root, "discovered"), "files"), 0);
    assert_string_equal(sget(file, "uri"), "models:Toy%20MoE.gguf");
    assert_memory_equal(sget(file, "sha256"), "sha256:", 7);
    yyjson_doc_free(doc);
    char cache[400];
    snprintf(cache, sizeof(cache), "%s/state/sha256-cache", d.dir);
    char *text = qr_t_read_file(cache, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "Toy MoE.gguf"));
    free(text);

    qr_t_request("POST", d.port, "/api/show", NULL, "{\"model\":\"toy-moe\"}", 19, &r);
    assert_int_equal(r.status, 200);
    doc = yyjson_read(r.body, r.body_len, 0);
    qr_t_resp_free(&r);
    yyjson_val *info = yyjson_obj_get(yyjson_doc_get_root(doc), "model_info");
    assert_string_equal(sget(info, "general.architecture"), "toyarch");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "toyarch.context_length")), 2048);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "toyarch.embedding_length")), 8);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "toyarch.expert_count")), 4);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(info, "toyarch.expert_used_count")), 1);
    yyjson_doc_free(doc);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    unlink(path);
    rmdir(dir);
}

/* The backend cannot be asked: OpenAI's list is empty, the registry is still listed. */
static void test_models_backend_down(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, 0, NULL);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/models", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    qr_t_resp_free(&r);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(sget(yyjson_obj_get(root, "backend_error"), "code"), "upstream_error");
    assert_null(find_by(yyjson_obj_get(root, "data"), "id", "llama3.2:1b"));
    assert_non_null(find_by(yyjson_obj_get(root, "data"), "id", "ember-coreui"));
    assert_non_null(find_by(yyjson_obj_get(root, "models"), "id", "generic-text-model"));
    yyjson_doc_free(doc);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models_list_both_shapes),
        cmocka_unit_test(test_model_by_id),
        cmocka_unit_test(test_backends),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_policies_upstreams_profiles),
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_tags_merged),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_inference_routed),
        cmocka_unit_test(test_ollama_canonical_discloses_backend),
        cmocka_unit_test(test_openai_backend),
        cmocka_unit_test(test_sighup_rebuilds_catalog),
        cmocka_unit_test(test_gguf_discovery),
        cmocka_unit_test(test_models_backend_down),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
