/* Router: name resolution, candidate checks and every rejection reason, ledger blocks (refusal
 * and tested alternative), strict mode, fail-closed evaluation, policy application, context
 * decisions, fallback disclosure, JSON field names and determinism. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/request.h"
#include "router_fixture.h"

static const char *const V_LC[] = {"b11669", "0.7.0"};
static const char *const V_OL[] = {"0.12.3"};
static const char *const V_VL[] = {"0.7.2"};

struct fx {
    struct qr_registry *reg;
    struct qr_ledger *ledger;
    struct qr_policy_set *policies;
    struct qr_cap_descriptor d_lc, d_ol, d_vl, d_oa;
    struct qr_route_backend b[4];
    struct qr_router_env env;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    struct qr_diag d = {{0}};
    assert_non_null(f);
    f->reg = qr_registry_new();
    for (size_t i = 0; i < QR_ARRAY_LEN(FIXTURE_MANIFESTS); i++) {
        const char *j = FIXTURE_MANIFESTS[i];
        if (qr_registry_add_json(f->reg, j, strlen(j), "test", QR_REG_FILE, &d, NULL) != QR_OK)
            fail_msg("manifest %zu: %s", i, d.msg);
    }
    if (qr_ledger_parse("l.json", FIXTURE_LEDGER, strlen(FIXTURE_LEDGER), &d, &f->ledger) != QR_OK)
        fail_msg("%s", d.msg);
    assert_int_equal(qr_policy_set_new(&f->policies), QR_OK);
    if (qr_policy_set_add(f->policies, "p.json", FIXTURE_POLICY, strlen(FIXTURE_POLICY), &d) !=
        QR_OK)
        fail_msg("%s", d.msg);
    fixture_desc(&f->d_lc, "lc1", QR_CAP_KIND_LLAMACPP);
    fixture_desc(&f->d_ol, "ol1", QR_CAP_KIND_OLLAMA);
    fixture_desc(&f->d_vl, "vl1", QR_CAP_KIND_VLLM);
    fixture_desc(&f->d_oa, "oa1", QR_CAP_KIND_OPENAI);
    f->b[0] = (struct qr_route_backend){
        .desc = &f->d_lc, .engine_versions = V_LC, .n_engine_versions = 2, .healthy = true};
    f->b[1] = (struct qr_route_backend){
        .desc = &f->d_ol, .engine_versions = V_OL, .n_engine_versions = 1, .healthy = true};
    f->b[2] = (struct qr_route_backend){
        .desc = &f->d_vl, .engine_versions = V_VL, .n_engine_versions = 1, .healthy = true};
    /* an OpenAI-compatible server answering only for the models named openai:oa1/... */
    f->b[3] =
        (struct qr_route_backend){.desc = &f->d_oa, .healthy = true, .serves = QR_ROUTE_ART_OPENAI};
    f->env = (struct qr_router_env){.registry = f->reg,
                                    .backends = f->b,
                                    .n_backends = 4,
                                    .hardware_class = "linux-cpu",
                                    .policies = f->policies,
                                    .ledger = f->ledger};
    f->env.opts.allow_fallback = true;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    qr_registry_free(f->reg);
    qr_ledger_free(f->ledger);
    qr_policy_set_free(f->policies);
    free(f);
    return 0;
}

static struct qr_cap_set caps(const char *a, const char *b)
{
    struct qr_cap_set s = QR_CAP_SET_EMPTY;
    const char *names[] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (names[i])
            qr_cap_set_add(&s, qr_cap_key_parse(qr_slice_str(names[i])));
    }
    return s;
}

static enum qr_err plan(struct fx *f, const char *model, struct qr_cap_set req, uint64_t ctx,
                        struct qr_route_plan *p)
{
    struct qr_route_query q = {.model = model, .required = req, .context = ctx};
    struct qr_diag d;
    return qr_router_plan(&f->env, &q, p, &d);
}

/* The candidate for (backend id, served name). */
static const struct qr_route_candidate *cand(const struct qr_route_plan *p, const char *backend,
                                             const char *served)
{
    for (size_t i = 0; i < p->n_candidates; i++) {
        const struct qr_route_candidate *c = &p->candidates[i];
        if (strcmp(c->backend->desc->id, backend) == 0 && strcmp(c->served_name, served) == 0)
            return c;
    }
    fail_msg("no candidate %s/%s", backend, served);
    return NULL;
}

static char *json(const struct qr_route_plan *p)
{
    size_t len;
    char *s = qr_route_write(p, &len);
    assert_non_null(s);
    assert_int_equal(strlen(s), len);
    return s;
}

static void test_names_resolve_through_registry(void **state)
{
    struct fx *f = *state;
    static const char *const names[] = {"llama3-8b",   "LLAMA3-8B",        "llama3:8b",
                                        "meta/llama3", "llama3-8b:latest", "Llama3:8B"};
    for (size_t i = 0; i < QR_ARRAY_LEN(names); i++) {
        struct qr_route_plan p;
        assert_int_equal(plan(f, names[i], caps("inference.text", NULL), 0, &p), QR_OK);
        assert_string_equal(p.canonical_model_id, "llama3-8b");
        assert_string_equal(p.requested_identifier, names[i]);
        assert_string_equal(p.backend_id, "lc1");
        assert_string_equal(p.artifact_uri, "models:llama3-8b.gguf");
        qr_route_plan_cleanup(&p);
    }
    struct qr_route_plan p;
    struct qr_route_query q = {.model = "llama3:70b", .required = caps("inference.text", NULL)};
    struct qr_diag d;
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_NOT_FOUND);
    assert_int_equal(p.status, QR_ROUTE_MODEL_NOT_FOUND);
    assert_int_equal(qr_route_status_http(p.status), 404);
    assert_string_equal(d.msg, "model 'llama3:70b' not found");
    char *s = json(&p);
    assert_non_null(strstr(s, "\"error\":{\"code\":\"model_not_found\""));
    free(s);
    qr_route_plan_cleanup(&p);

    q.model = "";
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_INVALID_QUERY);
    assert_int_equal(qr_route_status_http(p.status), 400);
    qr_route_plan_cleanup(&p);
}

/* Artifacts map to backend kinds: GGUF -> llama.cpp, the Ollama tag -> ollama, the HF repo ->
 * vllm, openai:<backend>/<id> -> that backend only; draft artifacts are not candidates. */
static void test_artifact_kinds(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("inference.text", NULL), 0, &p), QR_OK);
    /* views: gguf, ollama:, hf: (the draft is not one) x 4 backends */
    assert_int_equal(p.n_candidates, 12);
    assert_string_equal(p.backend_id, "lc1");
    assert_int_equal(cand(&p, "ol1", "qwen3:30b-a3b")->reason, QR_ROUTE_REJ_OUTRANKED);
    assert_int_equal(cand(&p, "vl1", "Qwen/Qwen3-30B-A3B")->reason, QR_ROUTE_REJ_OUTRANKED);
    assert_int_equal(cand(&p, "ol1", "models:qwen3-30b-a3b.gguf")->reason, QR_ROUTE_REJ_KIND);
    assert_int_equal(cand(&p, "lc1", "qwen3:30b-a3b")->reason, QR_ROUTE_REJ_KIND);
    assert_int_equal(cand(&p, "oa1", "Qwen/Qwen3-30B-A3B")->reason, QR_ROUTE_REJ_KIND);
    for (size_t i = 0; i < p.n_candidates; i++)
        assert_string_not_equal(p.candidates[i].artifact_uri, "models:qwen3-draft.gguf");
    qr_route_plan_cleanup(&p);
    /* the draft artifact is a model-side claim of speculative.draft_model; without one, none */
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("speculative.draft_model", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);
    assert_int_equal(plan(f, "llama3:8b", caps("speculative.draft_model", NULL), 0, &p),
                     QR_ERR_INVALID);
    qr_route_plan_cleanup(&p);
    /* by default an openai-compatible backend takes HF repos, also one pinned to vllm */
    f->b[3].serves = 0;
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_int_equal(cand(&p, "oa1", "Qwen/Qwen3-30B-A3B")->reason, QR_ROUTE_REJ_OUTRANKED);
    qr_route_plan_cleanup(&p);
    f->b[3].serves = QR_ROUTE_ART_OPENAI;

    /* the llama Ollama tag (an artifact member) is a view for the Ollama backend */
    f->d_lc.state = QR_CAP_BACKEND_DISABLED;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "ol1");
    assert_string_equal(p.served_name, "llama3:8b");
    assert_string_equal(p.artifact_uri, "models:llama3-8b.gguf");
    assert_true(p.fallback.used == false); /* the disabled backend was never in play */
    qr_route_plan_cleanup(&p);
    f->d_lc.state = QR_CAP_BACKEND_READY;

    assert_int_equal(plan(f, "granite3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "oa1");
    assert_string_equal(p.served_name, "granite-3.0-8b-instruct");
    assert_int_equal(cand(&p, "vl1", "granite-3.0-8b-instruct")->reason, QR_ROUTE_REJ_KIND);
    qr_route_plan_cleanup(&p);
}

static void test_dense_and_moe(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    assert_int_equal(plan(f, "qwen3-30b-a3b", caps("architecture.moe", "moe.total_experts"), 0, &p),
                     QR_OK);
    assert_int_equal(p.n_evals, 2);
    assert_int_equal(p.evals[0].key, QR_CAP_ARCH_MOE);
    assert_int_equal(p.evals[0].state, QR_CAP_SUPPORTED);
    qr_route_plan_cleanup(&p);

    /* MoE proven by the file alone */
    assert_int_equal(
        plan(f, "deepseek-v2:16b", caps("architecture.moe", "moe.shared_experts"), 0, &p), QR_OK);
    qr_route_plan_cleanup(&p);
    assert_int_equal(plan(f, "deepseek-v2:16b", caps("architecture.dense", NULL), 0, &p),
                     QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_NO_COMPATIBLE);
    qr_route_plan_cleanup(&p);

    /* a dense model never routes for a MoE requirement, and says why */
    struct qr_diag d;
    struct qr_route_query q = {.model = "llama3:8b", .required = caps("architecture.moe", NULL)};
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_NO_COMPATIBLE);
    assert_int_equal(qr_route_status_http(p.status), 422);
    assert_string_equal(d.msg, "no compatible backend for model 'llama3-8b': missing "
                               "'architecture.moe'");
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:llama3-8b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_CAPABILITY);
    assert_int_equal(c->n_failures, 1);
    assert_int_equal(c->failures[0].eval.state, QR_CAP_UNSUPPORTED);
    char *s = json(&p);
    assert_non_null(strstr(s, "\"missing_capabilities\":[\"architecture.moe\"]"));
    assert_non_null(strstr(s, "\"reason\":\"capability\""));
    free(s);
    qr_route_plan_cleanup(&p);

    /* a deployment profile requiring MoE adds the requirement */
    struct qr_profile prof = {.id = "moe-only", .architecture_class = QR_ARCH_MOE};
    f->env.opts.profile = &prof;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    assert_true(qr_cap_set_has(p.required, QR_CAP_ARCH_MOE));
    qr_route_plan_cleanup(&p);
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("inference.text", NULL), 0, &p), QR_OK);
    qr_route_plan_cleanup(&p);
    f->env.opts.profile = NULL;
}

/* Embeddings on an encoder; text generation on it is refused by the model and its file. */
static void test_embeddings_family(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    assert_int_equal(plan(f, "bert:embed", caps("embeddings", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);
    assert_int_equal(plan(f, "bert:embed", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:bert.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_CAPABILITY);
    assert_int_equal(c->failures[0].eval.n_reasons, 3); /* model, file, backend */
    qr_route_plan_cleanup(&p);
}

/* Conditional backend + unknown model side -> unknown -> refused (fail closed). */
static void test_conditional_unknown_fails_closed(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    assert_int_equal(plan(f, "phi3:mini", caps("architecture.dense", NULL), 0, &p), QR_ERR_INVALID);
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:phi3-mini.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_CAPABILITY);
    assert_int_equal(c->failures[0].eval.state, QR_CAP_UNKNOWN);
    qr_route_plan_cleanup(&p);
    /* an unknown backend claim never satisfies either, whatever the model says */
    f->d_lc.caps[QR_CAP_TOOLS_CALLING] = QR_CAP_UNKNOWN;
    assert_int_equal(plan(f, "llama3-8b", caps("tools.calling", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "ol1"); /* fallback to the tag, disclosed */
    assert_true(p.fallback.used);
    assert_int_equal(p.fallback.preferred_reason, QR_ROUTE_REJ_CAPABILITY);
    qr_route_plan_cleanup(&p);
    f->d_lc.caps[QR_CAP_TOOLS_CALLING] = QR_CAP_CONDITIONAL;
}

static void test_backend_state_health_uri(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    f->d_lc.state = QR_CAP_BACKEND_UNAVAILABLE;
    f->b[1].healthy = false;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_NO_COMPATIBLE);
    assert_int_equal(cand(&p, "lc1", "models:llama3-8b.gguf")->reason, QR_ROUTE_REJ_BACKEND_STATE);
    assert_int_equal(cand(&p, "ol1", "llama3:8b")->reason, QR_ROUTE_REJ_UNHEALTHY);
    struct qr_diag d;
    qr_route_plan_message(&p, &d);
    assert_string_equal(d.msg, "no available backend serves model 'llama3-8b'");
    char *s = json(&p);
    assert_non_null(strstr(s, "\"reason\":\"backend_unavailable\""));
    assert_non_null(strstr(s, "\"reason\":\"backend_unhealthy\""));
    assert_non_null(strstr(s, "\"reason\":\"kind_mismatch\""));
    free(s);
    qr_route_plan_cleanup(&p);
    f->d_lc.state = QR_CAP_BACKEND_READY;
    f->b[1].healthy = true;

    /* a managed llama-server serving one file only */
    static const char *const loaded[] = {"models:mistral3.gguf"};
    f->b[0].uris = loaded;
    f->b[0].n_uris = 1;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_int_equal(cand(&p, "lc1", "models:llama3-8b.gguf")->reason, QR_ROUTE_REJ_URI);
    assert_string_equal(p.backend_id, "ol1");
    assert_false(p.fallback.used); /* the first in play was ol1 */
    qr_route_plan_cleanup(&p);
    assert_int_equal(plan(f, "mistral3:24b", caps("multimodal.vision", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);
    f->b[0].uris = NULL;
    f->b[0].n_uris = 0;

    /* ready before unknown */
    f->d_lc.state = QR_CAP_BACKEND_UNKNOWN;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "ol1");
    qr_route_plan_cleanup(&p);
    f->d_lc.state = QR_CAP_BACKEND_READY;
}

/* A ledger block with only the blocked backend in play: refusal naming the block. */
static void test_ledger_block_refuses(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_diag d;
    f->env.n_backends = 1; /* lc1 only */
    struct qr_route_query q = {.model = "qwen3:30b-a3b",
                               .required = caps("inference.text", "tools.calling")};
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_NO_COMPATIBLE);
    assert_string_equal(d.msg,
                        "no compatible backend for model 'qwen3-30b-a3b': missing 'tools.calling'");
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:qwen3-30b-a3b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_LEDGER);
    assert_int_equal(c->n_failures, 1);
    assert_string_equal(c->failures[0].block->id, "lc-qwen3-tools-broken");
    assert_true(c->failures[0].certain);
    assert_string_equal(c->failures[0].alternative->id, "ollama-0.12.3");
    char *s = json(&p);
    assert_non_null(strstr(s, "\"reason\":\"ledger_block\""));
    assert_non_null(strstr(s, "\"block\":\"lc-qwen3-tools-broken\""));
    assert_non_null(strstr(s, "\"reason\":\"tool call ids are lost\""));
    free(s);
    qr_route_plan_cleanup(&p);

    /* an unknown hardware class or engine version does not clear a block: still refused */
    f->b[0].n_engine_versions = 0;
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    c = cand(&p, "lc1", "models:qwen3-30b-a3b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_LEDGER);
    assert_false(c->failures[0].certain);
    qr_route_plan_cleanup(&p);
    f->b[0].n_engine_versions = 2;
    f->env.n_backends = 4;

    /* another family on the same backend is not blocked */
    assert_int_equal(plan(f, "llama3:8b", caps("tools.calling", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);
}

/* The same block with the tested alternative in play: fallback to it, disclosed; strict mode and
 * a policy without fallback refuse instead. The canonical identity never changes. */
static void test_ledger_block_tested_alternative(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_cap_set req = caps("inference.text", "tools.calling");
    assert_int_equal(plan(f, "qwen3:30b-a3b", req, 0, &p), QR_OK);
    assert_string_equal(p.canonical_model_id, "qwen3-30b-a3b");
    assert_string_equal(p.backend_id, "ol1");
    assert_int_equal(p.backend_kind, QR_CAP_KIND_OLLAMA);
    assert_string_equal(p.engine_version, "0.12.3");
    assert_string_equal(p.artifact_uri, "ollama:qwen3:30b-a3b");
    assert_true(p.fallback.used);
    assert_true(p.fallback.allowed);
    assert_int_equal(p.fallback.preferred_reason, QR_ROUTE_REJ_LEDGER);
    assert_string_equal(p.candidates[p.fallback.preferred].backend->desc->id, "lc1");
    assert_string_equal(p.fallback.ledger_alternative_kind, "ollama-adapter");
    char *s = json(&p);
    assert_non_null(strstr(s,
                           "\"fallback\":{\"used\":true,\"allowed\":true,\"preferred\":{"
                           "\"backend_id\":\"lc1\",\"artifact_uri\":\"models:qwen3-30b-a3b.gguf\","
                           "\"reason\":\"ledger_block\""));
    assert_non_null(strstr(s, "\"ledger_alternative_kind\":\"ollama-adapter\""));
    free(s);
    qr_route_plan_cleanup(&p);

    /* fallback not allowed by policy: refused, the would-be winner says why */
    f->env.opts.allow_fallback = false;
    assert_int_equal(plan(f, "qwen3:30b-a3b", req, 0, &p), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_FALLBACK_REFUSED);
    assert_int_equal(cand(&p, "ol1", "qwen3:30b-a3b")->reason, QR_ROUTE_REJ_NO_FALLBACK);
    assert_int_equal(p.fallback.preferred_reason, QR_ROUTE_REJ_LEDGER);
    qr_route_plan_cleanup(&p);
    f->env.opts.allow_fallback = true;

    /* strict mode: even with every key verified on both backends, no fallback */
    struct qr_route_verified ver[] = {
        {"lc1", "qwen3-30b-a3b", NULL, "b11669", "linux-cpu", req, "conf-1"},
        {"ol1", "qwen3-30b-a3b", NULL, "0.12.3", "linux-cpu", req, "conf-2"},
    };
    f->env.verified = ver;
    f->env.n_verified = 2;
    f->env.opts.strict = true;
    struct qr_diag d;
    struct qr_route_query q = {.model = "qwen3:30b-a3b", .required = req};
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_FALLBACK_REFUSED);
    assert_false(p.fallback.allowed);
    assert_string_equal(d.msg, "the first preference for model 'qwen3-30b-a3b' cannot serve the "
                               "request and strict mode refuses a fallback");
    qr_route_plan_cleanup(&p);

    /* strict mode: unverified candidates are refused with the keys that lack verification */
    f->env.n_verified = 0;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:llama3-8b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_UNVERIFIED);
    assert_true(qr_cap_set_has(c->missing, QR_CAP_INFERENCE_TEXT));
    qr_route_plan_cleanup(&p);

    /* strict mode with a verified first preference: chosen, verified in the plan */
    struct qr_route_verified v1 = {"lc1",   "llama3-8b", "models:llama3-8b.gguf",
                                   "0.7.0", "linux-cpu", caps("inference.text", NULL),
                                   NULL};
    f->env.verified = &v1;
    f->env.n_verified = 1;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_true(p.evals[0].verified);
    assert_true(p.candidates[p.chosen].verified);
    qr_route_plan_cleanup(&p);
    /* the record is for another hardware class: not this candidate */
    v1.hardware_class = "nvidia-cuda-gpu";
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    qr_route_plan_cleanup(&p);
    /* both classes unknown (a record stored as "" on a host that declares none): it matches;
     * a record with a class does not match an unknown host, nor an unknown record a known one */
    const char *hw = f->env.hardware_class;
    f->env.hardware_class = NULL;
    v1.hardware_class = "";
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_true(p.candidates[p.chosen].verified);
    qr_route_plan_cleanup(&p);
    v1.hardware_class = "linux-cpu";
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    qr_route_plan_cleanup(&p);
    f->env.hardware_class = hw;
    v1.hardware_class = "";
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_ERR_INVALID);
    qr_route_plan_cleanup(&p);
    f->env.opts.strict = false;
    f->env.verified = NULL;
    f->env.n_verified = 0;

    /* verified before not: a verified later backend id wins without being a fallback */
    struct qr_route_verified v2 = {
        "ol1", "llama3-8b", NULL, "0.12.3", "linux-cpu", caps("inference.text", NULL), NULL};
    f->env.verified = &v2;
    f->env.n_verified = 1;
    assert_int_equal(plan(f, "llama3:8b", caps("inference.text", NULL), 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "ol1");
    assert_false(p.fallback.used);
    qr_route_plan_cleanup(&p);
    f->env.verified = NULL;
    f->env.n_verified = 0;
}

/* Engine evidence refuting a key on one candidate: it is rejected as by a failed conformance run
 * (whatever the descriptor or a verification says) and another backend of the same model serves;
 * a record for another engine version or model does nothing. */
static void test_engine_evidence_refutes(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_cap_set req = caps("inference.text", NULL);
    assert_int_equal(plan(f, "llama3:8b", req, 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);

    struct qr_route_refuted x[] = {
        {"lc1", "llama3-8b", "0.6.0", req, "engine /props (0.6.0): old"},     /* other version */
        {"lc1", "other-model", "0.7.0", req, "engine /props (0.7.0): other"}, /* other model */
    };
    f->env.refuted = x;
    f->env.n_refuted = 2;
    assert_int_equal(plan(f, "llama3:8b", req, 0, &p), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    qr_route_plan_cleanup(&p);

    x[1].model_id = "llama3-8b";
    x[1].detail = "engine /props (0.7.0): chat_template_caps says no";
    struct qr_route_verified v = {"lc1", "llama3-8b", NULL, "0.7.0", "linux-cpu", req, "conf-9"};
    f->env.verified = &v;
    f->env.n_verified = 1;
    assert_int_equal(plan(f, "llama3:8b", req, 0, &p), QR_OK);
    assert_string_not_equal(p.backend_id, "lc1"); /* another backend of the same model */
    assert_string_equal(p.canonical_model_id, "llama3-8b");
    assert_true(p.fallback.used);
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:llama3-8b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_CAPABILITY);
    assert_true(qr_cap_set_has(c->missing, QR_CAP_INFERENCE_TEXT));
    char *js = json(&p);
    assert_non_null(strstr(js, "engine /props (0.7.0): chat_template_caps says no"));
    free(js);
    qr_route_plan_cleanup(&p);
    f->env.verified = NULL;
    f->env.n_verified = 0;
    f->env.refuted = NULL;
    f->env.n_refuted = 0;
}

/* A policy block: context.override required where the matched policy does not support it. */
static void test_policy_block(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    static const char pol[] =
        "{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"id\":\"no-override\","
        "\"model_family\":\"llama\",\"variants\":[\"*\"],\"backend_kind\":\"llama.cpp\","
        "\"hardware_class\":\"*\",\"context\":{\"backend_managed\":true,"
        "\"override_supported\":false,\"override_verified\":false},\"parameters\":[],"
        "\"validation\":{\"observed_date\":\"2026-11-30\",\"sources\":[\"test\"]}}";
    struct qr_diag d;
    if (qr_policy_set_add(f->policies, "p2.json", pol, strlen(pol), &d) != QR_OK)
        fail_msg("%s", d.msg);
    f->d_lc.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_SUPPORTED;
    f->env.n_backends = 1;
    assert_int_equal(plan(f, "llama3:8b", caps("context.override", NULL), 0, &p), QR_ERR_INVALID);
    const struct qr_route_candidate *c = cand(&p, "lc1", "models:llama3-8b.gguf");
    assert_int_equal(c->reason, QR_ROUTE_REJ_POLICY);
    char *s = json(&p);
    assert_non_null(strstr(s, "\"reason\":\"policy_block\""));
    free(s);
    qr_route_plan_cleanup(&p);
    f->env.n_backends = 4;
    f->d_lc.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_UNSUPPORTED;
}

static void sample_request(struct qr_request *r, const char *model)
{
    memset(r, 0, sizeof *r);
    r->protocol = QR_PROTO_OLLAMA;
    r->op = QR_OP_CHAT;
    r->model = qr_slice_str(model);
    r->sampling.temperature = (struct qr_opt_f64){true, 0.7};
    r->sampling.seed = (struct qr_opt_i64){true, 42};
    r->max_tokens = (struct qr_opt_i64){true, 100};
    r->context_len = (struct qr_opt_i64){true, 4096};
}

/* Policy application: what the plan says reaches the engine. */
static void test_policy_strips_unverified_knobs(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_request r;
    struct qr_route_query q;
    struct qr_diag d;
    sample_request(&r, "qwen3:30b-a3b");
    qr_route_query_from_request(&r, &q);
    assert_true(qr_cap_set_has(q.required, QR_CAP_INFERENCE_TEXT));
    assert_int_equal(q.context, 4096);
    f->d_lc.state = QR_CAP_BACKEND_DISABLED; /* route to Ollama, where the policy matches */
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    assert_string_equal(p.backend_id, "ol1");
    assert_int_equal(p.n_policies, 1);
    assert_string_equal(p.policies[0]->id, "qwen3-ollama-min");
    const struct qr_policy_effective *e = p.effective;
    assert_non_null(e);
    assert_true(e->sampling.temperature.set); /* known-good: forwarded as sent */
    assert_true(e->sampling.temperature.v == 0.7);
    assert_false(e->sampling.seed.set); /* unverified: stripped */
    assert_false(e->max_tokens.set);    /* unverified: the Runtime counts tokens */
    assert_int_equal(e->runtime_max_tokens.v, 100);
    assert_false(e->context_len.set); /* never forwarded: an admission limit */
    assert_int_equal(e->admission_context.v, 4096);
    assert_int_equal(p.context.action, QR_ROUTE_CTX_ADMISSION);
    assert_int_equal(p.context.limit, 4096);
    char *s = json(&p);
    assert_non_null(strstr(s, "\"model_policy_ids\":[\"qwen3-ollama-min\"]"));
    assert_non_null(strstr(s, "\"effective_parameters\":{"));
    free(s);
    qr_route_plan_cleanup(&p);

    /* no policy matches llama.cpp: the router still keeps num_ctx off the engine unless an
     * override is verified for the candidate */
    f->d_lc.state = QR_CAP_BACKEND_READY;
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    assert_string_equal(p.backend_id, "lc1");
    assert_int_equal(p.n_policies, 0);
    assert_true(p.effective->sampling.seed.set);
    assert_false(p.effective->context_len.set);
    assert_int_equal(qr_policy_effective_find(p.effective, "num_ctx")->action, QR_KNOB_STRIP);
    qr_route_plan_cleanup(&p);

    /* ... and forwards it when conformance verified the override on this exact candidate */
    f->d_lc.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_SUPPORTED;
    struct qr_route_verified v = {"lc1",    "qwen3-30b-a3b", NULL,
                                  "b11669", "linux-cpu",     caps("context.override", NULL),
                                  "ctx-run"};
    f->env.verified = &v;
    f->env.n_verified = 1;
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    assert_int_equal(p.context.action, QR_ROUTE_CTX_FORWARD);
    assert_true(p.effective->context_len.set);
    assert_int_equal(p.effective->context_len.v, 4096);
    qr_route_plan_cleanup(&p);

    /* the regression guard refused the override on this candidate (an A/B run lost decode):
     * measured evidence against it wins over the verification, so it is an admission limit */
    struct qr_route_refuted guard = {"lc1", "qwen3-30b-a3b", "b11669",
                                     caps("context.override", NULL), "bench A/B run 7: -20.9%"};
    f->env.refuted = &guard;
    f->env.n_refuted = 1;
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    assert_false(p.context.override_verified);
    assert_int_equal(p.context.action, QR_ROUTE_CTX_ADMISSION);
    assert_false(p.effective->context_len.set);
    qr_route_plan_cleanup(&p);
    f->env.refuted = NULL;
    f->env.n_refuted = 0;

    /* verified on Ollama too, but the matched policy keeps num_ctx unverified: not forwarded */
    f->d_ol.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_SUPPORTED;
    f->d_lc.state = QR_CAP_BACKEND_DISABLED;
    v.backend_id = "ol1";
    v.engine_version = "0.12.3";
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    assert_string_equal(p.backend_id, "ol1");
    assert_true(p.context.override_verified);
    assert_int_equal(p.context.action, QR_ROUTE_CTX_ADMISSION);
    assert_false(p.effective->context_len.set);
    qr_route_plan_cleanup(&p);
    f->d_lc.state = QR_CAP_BACKEND_READY;
    f->d_ol.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_UNSUPPORTED;
    f->env.verified = NULL;
    f->env.n_verified = 0;
    f->d_lc.caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_UNSUPPORTED;
}

static void test_context_admission(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_diag d;
    /* within the native maximum (context_policy.native_max 32768): an admission limit */
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("inference.text", NULL), 16384, &p), QR_OK);
    assert_int_equal(p.context.action, QR_ROUTE_CTX_ADMISSION);
    assert_int_equal(p.context.native_max, 32768);
    assert_string_equal(p.context.native_max_source, "model.context_policy.native_max");
    qr_route_plan_cleanup(&p);
    /* above it: refused on every candidate */
    struct qr_route_query q = {
        .model = "qwen3:30b-a3b", .required = caps("inference.text", NULL), .context = 65536};
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_CONTEXT_EXCEEDED);
    assert_string_equal(d.msg,
                        "no backend for model 'qwen3-30b-a3b' can serve a context of 65536 tokens");
    assert_int_equal(cand(&p, "lc1", "models:qwen3-30b-a3b.gguf")->reason, QR_ROUTE_REJ_CONTEXT);
    char *s = json(&p);
    assert_non_null(strstr(s, "\"code\":\"context_exceeded\""));
    assert_non_null(strstr(s, "\"action\":\"refuse\""));
    free(s);
    qr_route_plan_cleanup(&p);
    /* the backend's loaded context is smaller and no override is verified: the next candidate */
    f->d_lc.native_max = 8192;
    assert_int_equal(plan(f, "qwen3:30b-a3b", caps("inference.text", NULL), 16384, &p), QR_OK);
    assert_int_equal(cand(&p, "lc1", "models:qwen3-30b-a3b.gguf")->reason, QR_ROUTE_REJ_CONTEXT);
    assert_string_equal(p.backend_id, "ol1");
    assert_true(p.fallback.used);
    assert_int_equal(p.fallback.preferred_reason, QR_ROUTE_REJ_CONTEXT);
    qr_route_plan_cleanup(&p);
    f->d_lc.native_max = 0;
    /* model.context_window as the last source (mistral3 states nothing else) */
    assert_int_equal(plan(f, "mistral3:24b", caps("inference.text", NULL), 20000, &p),
                     QR_ERR_INVALID);
    assert_int_equal(p.status, QR_ROUTE_CONTEXT_EXCEEDED);
    qr_route_plan_cleanup(&p);
}

static void test_json_fields(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    assert_int_equal(plan(f, "llama3:8b", caps("tools.calling", "inference.text"), 0, &p), QR_OK);
    char *s = json(&p);
    static const char *const want[] = {
        "{\"api_version\":\"v1alpha1\",\"plan\":{\"status\":\"ok\","
        "\"requested_identifier\":\"llama3:8b\",\"canonical_model_id\":\"llama3-8b\","
        "\"backend_id\":\"lc1\",\"backend_kind\":\"llama.cpp\","
        "\"artifact_uri\":\"models:llama3-8b.gguf\",\"served_name\":\"models:llama3-8b.gguf\","
        "\"engine_version\":\"b11669\",\"context\":{\"backend_managed\":true,"
        "\"override_supported\":\"unsupported\",\"override_verified\":false},"
        "\"capabilities\":[{\"key\":\"inference.text\",\"state\":\"supported\"",
        "\"required_capabilities\":[\"inference.text\",\"tools.calling\"]",
        "\"context_decision\":{\"action\":\"none\"",
        "\"model_family\":\"llama\",\"model_variant\":\"8b\",\"hardware_class\":\"linux-cpu\","
        "\"strict\":false,\"fallback\":{\"used\":false,\"allowed\":true},\"rejected\":[",
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(want); i++) {
        if (!strstr(s, want[i]))
            fail_msg("missing %s in %s", want[i], s);
    }
    free(s);
    qr_route_plan_cleanup(&p);
}

/* Same inputs, same bytes; the order of the backends array does not matter. */
static void test_deterministic(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_request r;
    struct qr_route_query q;
    struct qr_diag d;
    sample_request(&r, "qwen3:30b-a3b");
    r.n_tools = 0;
    qr_route_query_from_request(&r, &q);
    qr_cap_set_add(&q.required, QR_CAP_TOOLS_CALLING);
    assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
    char *first = json(&p);
    qr_route_plan_cleanup(&p);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(qr_router_plan(&f->env, &q, &p, &d), QR_OK);
        char *again = json(&p);
        assert_string_equal(first, again);
        free(again);
        qr_route_plan_cleanup(&p);
    }
    static const int orders[][4] = {{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}};
    for (size_t o = 0; o < QR_ARRAY_LEN(orders); o++) {
        struct qr_route_backend shuffled[4];
        for (int i = 0; i < 4; i++)
            shuffled[i] = f->b[orders[o][i]];
        struct qr_router_env env = f->env;
        env.backends = shuffled;
        assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_OK);
        char *s = json(&p);
        assert_string_equal(first, s);
        free(s);
        qr_route_plan_cleanup(&p);
    }
    free(first);

    /* conformance records in either order */
    struct qr_route_verified v[2] = {
        {"lc1", "qwen3-30b-a3b", NULL, "b11669", "linux-cpu", caps("inference.text", NULL), "b"},
        {"lc1", "qwen3-30b-a3b", NULL, "0.7.0", "linux-cpu", caps("inference.text", NULL), "a"},
    };
    struct qr_route_verified w[2] = {v[1], v[0]};
    struct qr_route_query q2 = {.model = "qwen3:30b-a3b", .required = caps("inference.text", NULL)};
    f->env.verified = v;
    f->env.n_verified = 2;
    assert_int_equal(qr_router_plan(&f->env, &q2, &p, &d), QR_OK);
    first = json(&p);
    assert_non_null(
        strstr(first, "\"source\":\"conformance\",\"state\":\"supported\",\"detail\":\"a\""));
    qr_route_plan_cleanup(&p);
    f->env.verified = w;
    assert_int_equal(qr_router_plan(&f->env, &q2, &p, &d), QR_OK);
    char *s = json(&p);
    assert_string_equal(first, s);
    free(s);
    free(first);
    qr_route_plan_cleanup(&p);
    f->env.verified = NULL;
    f->env.n_verified = 0;
}

static void test_request_conditions_hit_ledger(void **state)
{
    struct fx *f = *state;
    struct qr_request r;
    const char *conds[QR_ROUTE_MAX_CONDS / 2];
    sample_request(&r, "x");
    r.think.kind = QR_THINK_OFF;
    r.stream = true;
    r.parallel_tool_calls = QR_FALSE;
    r.protocol = QR_PROTO_OPENAI;
    size_t n = qr_route_request_conditions(&r, conds);
    /* the client's protocol is no condition: "openai-endpoint" is the upstream's (the Ollama
     * adapter speaks /api/chat whatever the client spoke), so Ollama's OpenAI-stream block
     * ollama-openai-stream-tool-index-zero must not refuse an OpenAI client's streamed tools */
    assert_int_equal(n, 3);
    assert_string_equal(conds[0], "think=off");
    assert_string_equal(conds[1], "stream");
    assert_string_equal(conds[2], "parallel_tool_calls=false");

    /* a block with a `when` only hits when the request states it */
    static const char ledger[] =
        "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\",\"entries\":["
        "{\"id\":\"e\",\"project\":\"p\",\"backend_kind\":\"llama.cpp\","
        "\"source_url\":\"https://example.org/p\",\"status\":\"candidate\"}],"
        "\"blocks\":[{\"id\":\"think-off-leak\",\"backend_kind\":\"llama.cpp\","
        "\"model_family\":\"*\",\"hardware_class\":\"*\",\"capability\":\"reasoning.control\","
        "\"when\":[\"think=off\"],\"reason\":\"leaks\",\"sources\":[\"t\"]}]}";
    struct qr_ledger *l = NULL;
    struct qr_diag d;
    if (qr_ledger_parse("l2.json", ledger, strlen(ledger), &d, &l) != QR_OK)
        fail_msg("%s", d.msg);
    struct qr_router_env env = f->env;
    env.ledger = l;
    env.n_backends = 1;
    struct qr_route_plan p;
    struct qr_route_query q = {.model = "qwen3:30b-a3b",
                               .required = caps("reasoning.control", NULL)};
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_OK);
    qr_route_plan_cleanup(&p);
    r.model = qr_slice_str("qwen3:30b-a3b");
    q.request = &r;
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.candidates[0].reason, QR_ROUTE_REJ_LEDGER);
    qr_route_plan_cleanup(&p);
    qr_ledger_free(l);
}

static void test_caps_and_errors(void **state)
{
    struct fx *f = *state;
    struct qr_route_plan p;
    struct qr_diag d;
    struct qr_route_backend dup[2] = {f->b[0], f->b[0]};
    struct qr_router_env env = f->env;
    env.backends = dup;
    env.n_backends = 2;
    struct qr_route_query q = {.model = "llama3:8b"};
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_ERR_INVALID);
    assert_string_equal(d.msg, "duplicate backend id 'lc1'");
    qr_route_plan_cleanup(&p);
    env.n_backends = QR_ROUTE_MAX_BACKENDS + 1;
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_ERR_TOO_LARGE);
    qr_route_plan_cleanup(&p);
    /* strings of the enums */
    assert_string_equal(qr_route_reject_str(QR_ROUTE_REJ_NO_FALLBACK), "fallback_not_allowed");
    assert_string_equal(qr_route_status_code(QR_ROUTE_FALLBACK_REFUSED), "fallback_refused");
    assert_string_equal(qr_route_ctx_action_str(QR_ROUTE_CTX_ADMISSION), "admission_limit");
    assert_string_equal(qr_route_art_class_str(QR_ROUTE_ART_HF), "hf");
    /* no backends at all: a refusal, not a crash */
    env.n_backends = 0;
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(p.n_candidates, 0);
    qr_route_plan_cleanup(&p);
}

/* The predecessor's expectations on the builtin data (fact sheet §3.4), and its weak spot that no
 * builtin model could route to llama.cpp (§6.2.3). */
static void test_builtin_data(void **state)
{
    (void) state;
    struct qr_registry *reg = qr_registry_new();
    struct qr_diag d;
    struct qr_ledger *l = NULL;
    struct qr_policy_set *pol = NULL;
    assert_int_equal(qr_registry_load_builtin(reg), QR_OK);
    assert_int_equal(qr_ledger_load_builtin(&d, &l), QR_OK);
    assert_int_equal(qr_policy_set_load_builtin(&pol, &d), QR_OK);
    struct qr_cap_descriptor ol, lc;
    fixture_desc(&ol, "ollama", QR_CAP_KIND_OLLAMA);
    fixture_desc(&lc, "llamacpp", QR_CAP_KIND_LLAMACPP);
    static const char *const v_lc[] = {"0.7.0", "b11669"};
    struct qr_route_backend b[2] = {
        {.desc = &ol, .healthy = true},
        {.desc = &lc, .engine_versions = v_lc, .n_engine_versions = 2, .healthy = true},
    };
    struct qr_router_env env = {.registry = reg,
                                .backends = b,
                                .n_backends = 2,
                                .hardware_class = "amd-epyc-turin-cpu",
                                .policies = pol,
                                .ledger = l};
    struct qr_route_plan p;
    struct qr_route_query q = {.model = "ember-coreui:latest",
                               .required = caps("inference.text", "multimodal.vision")};
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_OK);
    assert_string_equal(p.canonical_model_id, "ember-coreui");
    assert_int_equal(p.backend_kind, QR_CAP_KIND_OLLAMA);
    assert_true(p.n_policies >= 1);
    assert_string_equal(p.policies[0]->id, "gemma4-ollama-turin-minimal");
    qr_route_plan_cleanup(&p);
    /* on another hardware class the Turin policy does not attach (weak spot 6.2.8) */
    env.hardware_class = "linux-cpu";
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_OK);
    assert_int_equal(p.n_policies, 0);
    qr_route_plan_cleanup(&p);
    q.required = caps("multimodal.audio", NULL);
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_ERR_INVALID);
    assert_int_equal(qr_route_status_http(p.status), 422);
    qr_route_plan_cleanup(&p);
    /* a builtin GGUF model routes to llama.cpp */
    q.model = "quantum-runtime/scripted-chat";
    q.required = caps("inference.text", "tools.calling");
    assert_int_equal(qr_router_plan(&env, &q, &p, &d), QR_OK);
    assert_string_equal(p.backend_id, "llamacpp");
    assert_string_equal(p.artifact_uri, "models:scripted.gguf");
    qr_route_plan_cleanup(&p);
    qr_policy_set_free(pol);
    qr_ledger_free(l);
    qr_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_names_resolve_through_registry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_artifact_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dense_and_moe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_embeddings_family, setup, teardown),
        cmocka_unit_test_setup_teardown(test_conditional_unknown_fails_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_backend_state_health_uri, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_block_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_block_tested_alternative, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_evidence_refutes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_policy_strips_unverified_knobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_context_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deterministic, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_conditions_hit_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_caps_and_errors, setup, teardown),
        cmocka_unit_test(test_builtin_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
