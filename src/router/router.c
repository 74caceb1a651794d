/* The router: resolves the client's model name to one canonical model, pairs each of its artifact
 * views with each backend, explains for every pair why it can or cannot serve the request
 * (artifact kind, URI, backend state and health, the capability contract's evaluation over
 * model/file/backend/conformance/ledger/policy evidence, strict verification, context), orders
 * the pairs by a documented total order and picks the first that passes, disclosing a fallback
 * when it is not the first preference. Pure over its inputs; the rules are in router.h and
 * docs/ROUTER.md. */
#include "router/router.h"

#include <stdlib.h>
#include <string.h>

#include "contract/request.h"

/* Router-local fact ids onto contract keys (facts.h explains why they are separate). */
static const enum qr_cap_key RF_KEY[QR_RF__COUNT] = {
    [QR_RF_TEXT] = QR_CAP_INFERENCE_TEXT,
    [QR_RF_DENSE] = QR_CAP_ARCH_DENSE,
    [QR_RF_MOE] = QR_CAP_ARCH_MOE,
    [QR_RF_TOTAL_EXPERTS] = QR_CAP_MOE_TOTAL_EXPERTS,
    [QR_RF_ACTIVE_EXPERTS] = QR_CAP_MOE_ACTIVE_EXPERTS,
    [QR_RF_SHARED_EXPERTS] = QR_CAP_MOE_SHARED_EXPERTS,
    [QR_RF_EXPERT_OFFLOAD] = QR_CAP_MOE_EXPERT_OFFLOAD,
    [QR_RF_EXPERT_PARALLEL] = QR_CAP_MOE_EXPERT_PARALLEL,
    [QR_RF_MTP] = QR_CAP_SPEC_MTP,
    [QR_RF_DRAFT_MODEL] = QR_CAP_SPEC_DRAFT_MODEL,
    [QR_RF_KV_OFFLOAD] = QR_CAP_CACHE_KV_OFFLOAD,
    [QR_RF_PROMPT_CACHE] = QR_CAP_CACHE_PROMPT_CACHE,
    [QR_RF_VISION] = QR_CAP_VISION,
    [QR_RF_AUDIO] = QR_CAP_AUDIO,
    [QR_RF_EMBEDDINGS] = QR_CAP_EMBEDDINGS,
    [QR_RF_RERANKING] = QR_CAP_RERANKING,
    [QR_RF_REASONING] = QR_CAP_REASONING_CONTROL,
    [QR_RF_TOOLS] = QR_CAP_TOOLS_CALLING,
    [QR_RF_TOOL_STREAMING] = QR_CAP_TOOLS_STREAMING,
    [QR_RF_STRUCTURED] = QR_CAP_STRUCTURED_OUTPUT,
    [QR_RF_STREAM_REASONING] = QR_CAP_STREAM_REASONING,
    [QR_RF_STREAM_TOOL_ARGS] = QR_CAP_STREAM_TOOL_ARGS,
};

/* ---- names ---- */

const char *qr_route_art_class_str(unsigned cls)
{
    switch (cls) {
    case QR_ROUTE_ART_GGUF:
        return "gguf";
    case QR_ROUTE_ART_OLLAMA:
        return "ollama";
    case QR_ROUTE_ART_HF:
        return "hf";
    case QR_ROUTE_ART_OPENAI:
        return "openai";
    case QR_ROUTE_ART_EXTERNAL:
        return "external";
    default:
        return "unknown";
    }
}

unsigned qr_route_kind_default_serves(enum qr_cap_backend_kind kind)
{
    switch (kind) {
    case QR_CAP_KIND_LLAMACPP:
        return QR_ROUTE_ART_GGUF;
    case QR_CAP_KIND_OLLAMA:
        return QR_ROUTE_ART_OLLAMA;
    case QR_CAP_KIND_VLLM:
    case QR_CAP_KIND_MLX:
        return QR_ROUTE_ART_HF;
    case QR_CAP_KIND_OPENAI:
        return QR_ROUTE_ART_HF | QR_ROUTE_ART_OPENAI;
    case QR_CAP_KIND_EXTERNAL:
        return QR_ROUTE_ART_EXTERNAL;
    default:
        return 0;
    }
}

static const struct {
    const char *code;
    int http;
} STATUS[] = {
    [QR_ROUTE_OK] = {"ok", 200},
    [QR_ROUTE_MODEL_NOT_FOUND] = {"model_not_found", 404},
    [QR_ROUTE_NO_COMPATIBLE] = {"no_compatible_backend", 422},
    [QR_ROUTE_CONTEXT_EXCEEDED] = {"context_exceeded", 422},
    [QR_ROUTE_FALLBACK_REFUSED] = {"fallback_refused", 422},
    [QR_ROUTE_INVALID_QUERY] = {"invalid_route_request", 400},
};

const char *qr_route_status_code(enum qr_route_status s)
{
    return (unsigned) s < QR_ARRAY_LEN(STATUS) ? STATUS[s].code : "route_failed";
}

int qr_route_status_http(enum qr_route_status s)
{
    return (unsigned) s < QR_ARRAY_LEN(STATUS) ? STATUS[s].http : 500;
}

static const char *const REJECT[] = {
    [QR_ROUTE_REJ_NONE] = "chosen",
    [QR_ROUTE_REJ_KIND] = "kind_mismatch",
    [QR_ROUTE_REJ_URI] = "uri_not_served",
    [QR_ROUTE_REJ_BACKEND_STATE] = "backend_unavailable",
    [QR_ROUTE_REJ_UNHEALTHY] = "backend_unhealthy",
    [QR_ROUTE_REJ_LEDGER] = "ledger_block",
    [QR_ROUTE_REJ_POLICY] = "policy_block",
    [QR_ROUTE_REJ_CAPABILITY] = "capability",
    [QR_ROUTE_REJ_UNVERIFIED] = "unverified",
    [QR_ROUTE_REJ_CONTEXT] = "context",
    [QR_ROUTE_REJ_OUTRANKED] = "outranked",
    [QR_ROUTE_REJ_NO_FALLBACK] = "fallback_not_allowed",
};

const char *qr_route_reject_str(enum qr_route_reject r)
{
    return (unsigned) r < QR_ARRAY_LEN(REJECT) ? REJECT[r] : "unknown";
}

const char *qr_route_ctx_action_str(enum qr_route_ctx_action a)
{
    static const char *const s[] = {"none", "forward", "admission_limit", "refuse"};
    return (unsigned) a < QR_ARRAY_LEN(s) ? s[a] : "none";
}

/* ---- query helpers ---- */

size_t qr_route_request_conditions(const struct qr_request *req,
                                   const char *out[QR_ROUTE_MAX_CONDS / 2])
{
    size_t n = 0;
    if (!req)
        return 0;
    if (req->think.kind == QR_THINK_OFF)
        out[n++] = "think=off";
    else if (req->think.kind == QR_THINK_ON || req->think.kind == QR_THINK_LEVEL)
        out[n++] = "think=on";
    if (req->n_tools > 0 && req->tool_choice.kind != QR_TOOL_CHOICE_NONE)
        out[n++] = "tools";
    if (req->stream)
        out[n++] = "stream";
    if (req->parallel_tool_calls == QR_FALSE)
        out[n++] = "parallel_tool_calls=false";
    if (req->tool_choice.kind == QR_TOOL_CHOICE_FUNCTION)
        out[n++] = "tool_choice=function";
    /* not "openai-endpoint": that names the upstream endpoint an adapter speaks (Ollama's
     * /v1/chat/completions), never the client's protocol - every client protocol is translated
     * onto the adapter's own wire (the Ollama adapter speaks /api/chat), so it is a backend's
     * launch condition (qr_route_backend.conditions) where one holds */
    return n;
}

void qr_route_query_from_request(const struct qr_request *req, struct qr_route_query *q)
{
    memset(q, 0, sizeof *q);
    q->model = req->model.ptr;
    q->required = qr_cap_required(req);
    q->context = req->context_len.set && req->context_len.v > 0 ? (uint64_t) req->context_len.v : 0;
    q->request = req;
}

/* ---- one plan's working state ---- */

struct ctx {
    const struct qr_router_env *env;
    const struct qr_route_query *q;
    const struct qr_rf_model *facts;
    struct qr_cap_set required;
    enum qr_cap_key keys[QR_CAP__COUNT]; /* required, in canonical-name order */
    size_t n_keys;
    uint64_t requested_ctx;
    const char *conds[QR_ROUTE_MAX_CONDS];
    size_t n_base_conds;
    /* failures collected while evaluating (candidates point into it after sorting) */
    struct qr_route_key_failure *fail;
    size_t n_fail, cap_fail;
};

static bool streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static const char *engine_version(const struct qr_route_backend *b)
{
    return b->n_engine_versions > 0 ? b->engine_versions[0] : NULL;
}

static bool has_version(const struct qr_route_backend *b, const char *v)
{
    for (size_t i = 0; v && i < b->n_engine_versions; i++) {
        if (streq(b->engine_versions[i], v))
            return true;
    }
    return false;
}

/* Does backend b's kind (and its serves/uri lists) take artifact view v? */
static enum qr_route_reject kind_check(const struct qr_route_backend *b, const struct qr_rf_view *v)
{
    enum qr_cap_backend_kind k = b->desc->kind;
    unsigned serves = b->serves ? b->serves : qr_route_kind_default_serves(k);
    if (!(serves & v->cls))
        return QR_ROUTE_REJ_KIND;
    if (v->pin) {
        bool ok = streq(v->pin, qr_cap_backend_kind_str(k));
        /* vLLM and MLX-LM servers speak the OpenAI protocol: the openai adapter fronts them */
        if (!ok && k == QR_CAP_KIND_OPENAI && (streq(v->pin, "vllm") || streq(v->pin, "mlx")))
            ok = true;
        if (!ok)
            return QR_ROUTE_REJ_KIND;
    }
    if (v->cls == QR_ROUTE_ART_OPENAI) {
        size_t n = v->openai_backend_len;
        if (strlen(b->desc->id) != n || memcmp(b->desc->id, v->openai_backend, n) != 0)
            return QR_ROUTE_REJ_KIND;
    }
    if (b->n_uris > 0) {
        for (size_t i = 0; i < b->n_uris; i++) {
            if (streq(b->uris[i], v->uri) || streq(b->uris[i], v->served_name))
                return QR_ROUTE_REJ_NONE;
        }
        return QR_ROUTE_REJ_URI;
    }
    return QR_ROUTE_REJ_NONE;
}

/* Hardware classes are equal when both name the same class, or both are unknown (NULL or ""): a
 * run recorded on a host with no declared class verifies for a host with none. */
static bool same_class(const char *a, const char *b)
{
    return (!a || !a[0]) ? (!b || !b[0]) : streq(a, b);
}

static const struct qr_route_verified *conformance_match(const struct qr_router_env *env,
                                                         const struct qr_route_backend *b,
                                                         const char *model_id, const char *uri,
                                                         size_t *iter)
{
    for (size_t i = *iter; i < env->n_verified; i++) {
        const struct qr_route_verified *r = &env->verified[i];
        if (streq(r->backend_id, b->desc->id) && streq(r->model_id, model_id) &&
            (!r->artifact_uri || streq(r->artifact_uri, uri)) &&
            has_version(b, r->engine_version) &&
            same_class(r->hardware_class, env->hardware_class)) {
            *iter = i + 1;
            return r;
        }
    }
    *iter = env->n_verified;
    return NULL;
}

static size_t match_policies(const struct ctx *c, const struct qr_route_backend *b,
                             const struct qr_policy **out)
{
    if (!c->env->policies)
        return 0;
    struct qr_policy_target t = {
        .model_family = c->facts->family,
        .variant = c->facts->variant,
        .backend_kind = qr_cap_backend_kind_str(b->desc->kind),
        .engine_versions = b->engine_versions,
        .n_engine_versions = b->n_engine_versions,
        .hardware_class = c->env->hardware_class,
    };
    size_t n = qr_policy_match(c->env->policies, &t, out, QR_POLICY_MAX_MATCH);
    return n < QR_POLICY_MAX_MATCH ? n : QR_POLICY_MAX_MATCH;
}

/* Every claim about one candidate: model, file, backend, conformance. */
static void gather(const struct ctx *c, const struct qr_route_backend *b,
                   const struct qr_rf_view *v, struct qr_cap_evidence *ev)
{
    /* only the keys the plan evaluates: the required ones and context.override */
    qr_cap_evidence_init(ev);
    for (size_t i = 0; i < c->n_keys; i++)
        qr_cap_evidence_set(ev, QR_CAP_SRC_BACKEND, c->keys[i], b->desc->caps[c->keys[i]],
                            "declared by the backend descriptor");
    qr_cap_evidence_set(ev, QR_CAP_SRC_BACKEND, QR_CAP_CONTEXT_OVERRIDE,
                        b->desc->caps[QR_CAP_CONTEXT_OVERRIDE],
                        "declared by the backend descriptor");
    for (int i = 0; i < QR_RF__COUNT; i++) {
        const struct qr_rf_claim *m = &c->facts->model[i], *f = &c->facts->file[i];
        if (!qr_cap_set_has(c->required, RF_KEY[i]))
            continue;
        if (m->v)
            qr_cap_evidence_set(ev, QR_CAP_SRC_MODEL, RF_KEY[i],
                                m->v == QR_RF_YES ? QR_CAP_SUPPORTED : QR_CAP_UNSUPPORTED,
                                m->detail);
        if (f->v)
            qr_cap_evidence_set(ev, QR_CAP_SRC_FILE, RF_KEY[i],
                                f->v == QR_RF_YES ? QR_CAP_SUPPORTED : QR_CAP_UNSUPPORTED,
                                f->detail);
    }
    if (b->desc->n_formats > 0 && v->format) {
        bool ok = qr_cap_descriptor_has_format(b->desc, v->format);
        qr_cap_evidence_set(ev, QR_CAP_SRC_MODEL, QR_CAP_QUANT_FORMATS,
                            ok ? QR_CAP_SUPPORTED : QR_CAP_UNSUPPORTED,
                            ok ? "artifact format is one the backend loads"
                               : "artifact format is not one the backend loads");
    }
    size_t it = 0;
    const struct qr_route_verified *r;
    while ((r = conformance_match(c->env, b, c->facts->id, v->uri, &it)) != NULL) {
        const char *detail = r->detail ? r->detail : "conformance run";
        for (int k = 0; k < QR_CAP__COUNT; k++) {
            const struct qr_cap_claim *had = &ev->claims[QR_CAP_SRC_CONFORMANCE][k];
            /* several records: the smallest detail, so the input order never shows */
            if (qr_cap_set_has(r->keys, (enum qr_cap_key) k) &&
                (!had->set || strcmp(detail, had->detail ? had->detail : "") < 0))
                qr_cap_evidence_verify(ev, (enum qr_cap_key) k, detail);
        }
    }
    /* the engine's own word against a key wins over a verification (fail closed); among several,
     * the smallest detail, for the same reason as above */
    bool refuted[QR_CAP__COUNT] = {false};
    for (size_t i = 0; i < c->env->n_refuted; i++) {
        const struct qr_route_refuted *x = &c->env->refuted[i];
        if (!streq(x->backend_id, b->desc->id) || !streq(x->model_id, c->facts->id) ||
            !has_version(b, x->engine_version))
            continue;
        const char *detail = x->detail ? x->detail : "engine evidence";
        for (int k = 0; k < QR_CAP__COUNT; k++) {
            const struct qr_cap_claim *had = &ev->claims[QR_CAP_SRC_CONFORMANCE][k];
            if (!qr_cap_set_has(x->keys, (enum qr_cap_key) k) ||
                (refuted[k] && strcmp(detail, had->detail ? had->detail : "") >= 0))
                continue;
            qr_cap_evidence_set(ev, QR_CAP_SRC_CONFORMANCE, (enum qr_cap_key) k, QR_CAP_UNSUPPORTED,
                                detail);
            refuted[k] = true;
        }
    }
}

/* Ledger blocks on every required key; the first hit per key is kept in hits[key]. */
static void ledger_blocks(const struct ctx *c, const struct qr_route_backend *b,
                          struct qr_cap_evidence *ev, struct qr_ledger_hit hits[QR_CAP__COUNT])
{
    const char *conds[QR_ROUTE_MAX_CONDS];
    size_t n = c->n_base_conds;
    memcpy(conds, c->conds, n * sizeof conds[0]);
    for (size_t i = 0; i < b->n_conditions && n < QR_ROUTE_MAX_CONDS; i++)
        conds[n++] = b->conditions[i];
    struct qr_ledger_query lq = {
        .backend_kind = qr_cap_backend_kind_str(b->desc->kind),
        .project = b->project,
        .engine_versions = b->engine_versions,
        .n_engine_versions = b->n_engine_versions,
        .model_family = c->facts->family,
        .model = c->facts->id,
        .hardware_class = c->env->hardware_class,
        .conditions = conds,
        .n_conditions = n,
    };
    const enum qr_cap_key *keys = c->keys;
    for (size_t i = 0; i < c->n_keys; i++) {
        lq.capability = qr_cap_key_name(keys[i]);
        struct qr_ledger_hit h;
        memset(&h, 0, sizeof h);
        if (qr_ledger_blocked(c->env->ledger, &lq, &h, 1) == 0)
            continue;
        hits[keys[i]] = h;
        const char *why = h.block ? h.block->reason : "the ledger marks this engine build blocked";
        qr_cap_evidence_block(ev, QR_CAP_SRC_LEDGER, keys[i], why);
    }
}

static enum qr_err add_failure(struct ctx *c, const struct qr_cap_eval *e,
                               const struct qr_ledger_hit *h)
{
    if (c->n_fail == c->cap_fail) {
        size_t cap = c->cap_fail ? 2 * c->cap_fail : 16;
        struct qr_route_key_failure *p = realloc(c->fail, cap * sizeof *p);
        if (!p)
            return QR_ERR_NOMEM;
        c->fail = p;
        c->cap_fail = cap;
    }
    struct qr_route_key_failure *f = &c->fail[c->n_fail++];
    memset(f, 0, sizeof *f);
    f->eval = *e;
    if (h && (h->block || h->entry)) {
        f->block = h->block;
        f->entry = h->entry;
        f->certain = h->certain;
        f->alternative = h->alternative;
    }
    return QR_OK;
}

/* The context decision for one candidate (docs/ROUTER.md "Context"). */
static void decide_context(const struct ctx *c, const struct qr_route_backend *b,
                           const struct qr_cap_evidence *ev, const struct qr_policy *const *pol,
                           size_t n_pol, struct qr_route_context *out)
{
    const struct qr_cap_descriptor *d = b->desc;
    memset(out, 0, sizeof *out);
    out->requested = c->requested_ctx;
    out->native_max = c->facts->native_max;
    out->native_max_source = c->facts->native_max_source;
    out->backend_max = d->native_max > 0 ? (uint64_t) d->native_max : 0;
    out->backend_managed = d->backend_managed;
    out->override_supported = d->caps[QR_CAP_CONTEXT_OVERRIDE] == QR_CAP_SUPPORTED;
    bool conf =
        ev->claims[QR_CAP_SRC_CONFORMANCE][QR_CAP_CONTEXT_OVERRIDE].set &&
        ev->claims[QR_CAP_SRC_CONFORMANCE][QR_CAP_CONTEXT_OVERRIDE].state == QR_CAP_SUPPORTED;
    /* measured evidence against forwarding (the regression guard refused the override, or a
     * conformance run failed it) overrules a policy's override_verified */
    bool conf_failed =
        ev->claims[QR_CAP_SRC_CONFORMANCE][QR_CAP_CONTEXT_OVERRIDE].set &&
        ev->claims[QR_CAP_SRC_CONFORMANCE][QR_CAP_CONTEXT_OVERRIDE].state != QR_CAP_SUPPORTED;
    bool by_policy = n_pol > 0 && !conf_failed;
    for (size_t i = 0; i < n_pol; i++)
        by_policy = by_policy && pol[i]->context.override_verified;
    out->override_verified = out->override_supported && (conf || by_policy);
    if (out->requested == 0) {
        out->action = QR_ROUTE_CTX_NONE;
        out->reason = "no context requested: the backend keeps its own context policy";
    } else if (out->native_max && out->requested > out->native_max) {
        out->action = QR_ROUTE_CTX_REFUSE;
        out->reason = "the requested context exceeds the model's native maximum";
    } else if (out->override_verified) {
        out->action = QR_ROUTE_CTX_FORWARD;
        out->limit = out->requested;
        out->reason = "context override verified for this backend, model, engine version and "
                      "hardware class: forwarded";
    } else if (out->backend_max && out->requested > out->backend_max) {
        out->action = QR_ROUTE_CTX_REFUSE;
        out->reason = "the requested context exceeds the backend's loaded context and an "
                      "override is not verified for this candidate";
    } else {
        out->action = QR_ROUTE_CTX_ADMISSION;
        out->limit = out->requested;
        out->reason = "context override not verified for this candidate: the request is an "
                      "admission limit and the backend keeps its native context";
    }
}

/* All the evidence about one candidate: model, file, backend, conformance, ledger blocks on the
 * required keys (first hit per key into hits) and policy blocks; the matched policies into pol
 * when the context or a policy block needs them. */
static size_t candidate_evidence(const struct ctx *c, const struct qr_route_backend *b,
                                 const struct qr_rf_view *v, struct qr_cap_evidence *ev,
                                 struct qr_ledger_hit hits[QR_CAP__COUNT],
                                 const struct qr_policy *pol[QR_POLICY_MAX_MATCH])
{
    memset(hits, 0, QR_CAP__COUNT * sizeof hits[0]);
    gather(c, b, v, ev);
    if (c->env->ledger)
        ledger_blocks(c, b, ev, hits);
    size_t n_pol = 0;
    bool need_ctx = qr_cap_set_has(c->required, QR_CAP_CONTEXT_OVERRIDE);
    if (c->requested_ctx > 0 || need_ctx)
        n_pol = match_policies(c, b, pol);
    for (size_t i = 0; i < n_pol && need_ctx; i++) {
        if (!pol[i]->context.override_supported)
            qr_cap_evidence_block(ev, QR_CAP_SRC_POLICY, QR_CAP_CONTEXT_OVERRIDE,
                                  "a matched model policy does not support a context override");
    }
    return n_pol;
}

/* Evaluate one in-play candidate: capabilities, strict verification, context. */
static enum qr_err evaluate(struct ctx *c, const struct qr_rf_view *v,
                            struct qr_route_candidate *cand, size_t *fail_off)
{
    const struct qr_route_backend *b = cand->backend;
    struct qr_cap_evidence ev;
    struct qr_ledger_hit hits[QR_CAP__COUNT];
    const struct qr_policy *pol[QR_POLICY_MAX_MATCH];
    size_t n_pol = candidate_evidence(c, b, v, &ev, hits, pol);

    const enum qr_cap_key *keys = c->keys;
    size_t nk = c->n_keys;
    struct qr_cap_eval evals[QR_CAP__COUNT];
    bool any_ledger = false, any_policy = false, all_verified = true;
    *fail_off = c->n_fail;
    for (size_t i = 0; i < nk; i++) {
        qr_cap_evaluate_key(&ev, keys[i], &evals[i]);
        if (!qr_cap_eval_satisfies(&evals[i], false)) {
            qr_cap_set_add(&cand->missing, keys[i]);
            any_ledger = any_ledger || ev.claims[QR_CAP_SRC_LEDGER][keys[i]].set;
            any_policy = any_policy || ev.claims[QR_CAP_SRC_POLICY][keys[i]].set;
            if (add_failure(c, &evals[i], &hits[keys[i]]) != QR_OK)
                return QR_ERR_NOMEM;
        }
        all_verified = all_verified && evals[i].verified;
        /* the sort key: conformance evidence exists, whatever blocks it */
        const struct qr_cap_claim *cl = &ev.claims[QR_CAP_SRC_CONFORMANCE][keys[i]];
        cand->verified = (i == 0 || cand->verified) && cl->set && cl->state == QR_CAP_SUPPORTED;
    }
    decide_context(c, b, &ev, pol, n_pol, &cand->context);
    if (!qr_cap_set_empty(cand->missing)) {
        cand->reason = any_ledger   ? QR_ROUTE_REJ_LEDGER
                       : any_policy ? QR_ROUTE_REJ_POLICY
                                    : QR_ROUTE_REJ_CAPABILITY;
        cand->detail = c->fail[*fail_off].eval.rule;
    } else if (c->env->opts.strict && !all_verified) {
        for (size_t i = 0; i < nk; i++) {
            if (evals[i].verified)
                continue;
            qr_cap_set_add(&cand->missing, keys[i]);
            if (add_failure(c, &evals[i], NULL) != QR_OK)
                return QR_ERR_NOMEM;
        }
        cand->reason = QR_ROUTE_REJ_UNVERIFIED;
        cand->detail = "strict mode: a required capability is not verified by conformance on "
                       "this candidate";
    } else if (cand->context.action == QR_ROUTE_CTX_REFUSE) {
        cand->reason = QR_ROUTE_REJ_CONTEXT;
        cand->detail = cand->context.reason;
    }
    cand->n_failures = c->n_fail - *fail_off;
    return QR_OK;
}

/* The checks before evaluation; sets in_play. */
static void precheck(const struct qr_rf_view *v, struct qr_route_candidate *cand)
{
    const struct qr_route_backend *b = cand->backend;
    enum qr_route_reject r = kind_check(b, v);
    if (r == QR_ROUTE_REJ_KIND) {
        cand->reason = r;
        cand->detail = "the backend kind does not serve this artifact kind";
    } else if (r == QR_ROUTE_REJ_URI) {
        cand->reason = r;
        cand->detail = "the backend does not list this artifact among those it serves";
    } else if (!qr_cap_descriptor_routable(b->desc)) {
        cand->reason = QR_ROUTE_REJ_BACKEND_STATE;
        cand->detail = b->desc->state == QR_CAP_BACKEND_DISABLED ? "the backend is disabled"
                                                                 : "the backend is unavailable";
    } else if (!b->healthy) {
        cand->reason = QR_ROUTE_REJ_UNHEALTHY;
        cand->detail = "the backend's health/readiness probe failed";
    } else {
        cand->in_play = true;
    }
}

/* ---- ordering ---- */

struct sort_item {
    const struct qr_route_candidate *c;
    size_t fail_off;
};

static int state_rank(enum qr_cap_backend_state s)
{
    return s == QR_CAP_BACKEND_READY ? 0 : s == QR_CAP_BACKEND_UNKNOWN ? 1 : 2;
}

static int cmp_items(const void *pa, const void *pb)
{
    const struct qr_route_candidate *a = ((const struct sort_item *) pa)->c;
    const struct qr_route_candidate *b = ((const struct sort_item *) pb)->c;
    int d;
    if (a->in_play != b->in_play)
        return a->in_play ? -1 : 1;
    if ((d = state_rank(a->backend->desc->state) - state_rank(b->backend->desc->state)) != 0)
        return d;
    if (a->verified != b->verified)
        return a->verified ? -1 : 1;
    if ((d = strcmp(a->backend->desc->id, b->backend->desc->id)) != 0)
        return d;
    if ((d = strcmp(a->artifact_uri, b->artifact_uri)) != 0)
        return d;
    if ((d = strcmp(a->served_name, b->served_name)) != 0)
        return d;
    return (int) a->art_class - (int) b->art_class;
}

/* ---- the plan ---- */

static enum qr_err setup(struct ctx *c, const struct qr_router_env *env,
                         const struct qr_route_query *q, struct qr_route_plan *out,
                         struct qr_diag *diag)
{
    if (env->n_backends > QR_ROUTE_MAX_BACKENDS || env->n_verified > QR_ROUTE_MAX_VERIFIED ||
        env->n_refuted > QR_ROUTE_MAX_REFUTED)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "router input above its caps");
    for (size_t i = 0; i < env->n_backends; i++) {
        if (!env->backends[i].desc)
            return qr_diag_set(diag, QR_ERR_INVALID, "backend %zu has no descriptor", i);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(env->backends[i].desc->id, env->backends[j].desc->id) == 0)
                return qr_diag_set(diag, QR_ERR_INVALID, "duplicate backend id '%s'",
                                   env->backends[i].desc->id);
        }
    }
    c->env = env;
    c->q = q;
    c->required = q->required;
    const struct qr_profile *pr = env->opts.profile;
    if (pr && pr->architecture_class == QR_ARCH_MOE)
        qr_cap_set_add(&c->required, QR_CAP_ARCH_MOE);
    else if (pr && pr->architecture_class == QR_ARCH_DENSE)
        qr_cap_set_add(&c->required, QR_CAP_ARCH_DENSE);
    out->required = c->required;
    c->n_keys = qr_cap_set_sorted(c->required, c->keys);
    c->requested_ctx = q->context;
    out->context.requested = q->context;
    const char *rc[QR_ROUTE_MAX_CONDS / 2];
    size_t n = qr_route_request_conditions(q->request, rc);
    memcpy(c->conds, rc, n * sizeof rc[0]);
    for (size_t i = 0; i < q->n_conditions && n < QR_ROUTE_MAX_CONDS / 2; i++)
        c->conds[n++] = q->conditions[i];
    c->n_base_conds = n;
    return QR_OK;
}

static enum qr_err build(struct ctx *c, struct qr_route_plan *out)
{
    const struct qr_router_env *env = c->env;
    const struct qr_rf_model *f = c->facts;
    size_t n = f->n_views * env->n_backends;
    struct qr_route_candidate *tmp = calloc(n ? n : 1, sizeof *tmp);
    struct sort_item *items = calloc(n ? n : 1, sizeof *items);
    out->candidates = calloc(n ? n : 1, sizeof *out->candidates);
    enum qr_err err = QR_ERR_NOMEM;
    if (!tmp || !items || !out->candidates)
        goto fail;
    for (size_t vi = 0, k = 0; vi < f->n_views; vi++) {
        const struct qr_rf_view *v = &f->views[vi];
        for (size_t bi = 0; bi < env->n_backends; bi++, k++) {
            struct qr_route_candidate *cand = &tmp[k];
            cand->backend = &env->backends[bi];
            cand->backend_index = bi;
            cand->artifact_uri = v->uri;
            cand->served_name = v->served_name;
            cand->artifact_role = v->role;
            cand->art_class = v->cls;
            precheck(v, cand);
            items[k].c = cand;
            items[k].fail_off = c->n_fail;
            if (cand->in_play && (err = evaluate(c, v, cand, &items[k].fail_off)) != QR_OK)
                goto fail;
        }
    }
    qsort(items, n, sizeof *items, cmp_items);
    for (size_t i = 0; i < n; i++) {
        out->candidates[i] = *items[i].c;
        out->candidates[i].failures =
            out->candidates[i].n_failures ? c->fail + items[i].fail_off : NULL;
    }
    out->n_candidates = n;
    out->failure_pool = c->fail;
    c->fail = NULL;
    err = QR_OK;
fail:
    free(items);
    free(tmp);
    return err;
}

/* Pick the winner, mark the others, disclose a fallback, set the status. */
static void choose(const struct ctx *c, struct qr_route_plan *out)
{
    struct qr_route_fallback *fb = &out->fallback;
    fb->allowed = c->env->opts.allow_fallback && !c->env->opts.strict;
    fb->preferred = SIZE_MAX;
    size_t win = SIZE_MAX;
    bool ctx_fail = false;
    for (size_t i = 0; i < out->n_candidates; i++) {
        struct qr_route_candidate *cand = &out->candidates[i];
        if (!cand->in_play)
            continue;
        if (fb->preferred == SIZE_MAX)
            fb->preferred = i;
        out->missing = qr_cap_set_union(out->missing, cand->missing);
        ctx_fail = ctx_fail || cand->reason == QR_ROUTE_REJ_CONTEXT;
        if (cand->reason != QR_ROUTE_REJ_NONE)
            continue;
        if (win != SIZE_MAX) {
            cand->reason = QR_ROUTE_REJ_OUTRANKED;
            cand->detail = "compatible, but a candidate earlier in the order was chosen";
        } else if (i != fb->preferred && !fb->allowed) {
            cand->reason = QR_ROUTE_REJ_NO_FALLBACK;
            cand->detail = c->env->opts.strict
                               ? "strict mode: no fallback from the first preference"
                               : "fallback to another backend is not allowed by policy";
            out->status = QR_ROUTE_FALLBACK_REFUSED;
        } else {
            win = i;
        }
    }
    if (win == SIZE_MAX) {
        if (out->status != QR_ROUTE_FALLBACK_REFUSED)
            out->status = ctx_fail ? QR_ROUTE_CONTEXT_EXCEEDED : QR_ROUTE_NO_COMPATIBLE;
        if (out->status == QR_ROUTE_FALLBACK_REFUSED && fb->preferred != SIZE_MAX)
            fb->preferred_reason = out->candidates[fb->preferred].reason;
        return;
    }
    out->status = QR_ROUTE_OK;
    out->missing = QR_CAP_SET_EMPTY;
    out->chosen = win;
    if (win != fb->preferred) {
        const struct qr_route_candidate *p = &out->candidates[fb->preferred];
        fb->used = true;
        fb->preferred_reason = p->reason;
        for (size_t i = 0; i < p->n_failures; i++) {
            const struct qr_route_key_failure *kf = &p->failures[i];
            if (kf->alternative)
                fb->ledger_alternative_kind = kf->alternative->backend_kind;
            else if (kf->block && kf->block->alt_backend_kind)
                fb->ledger_alternative_kind = kf->block->alt_backend_kind;
            if (fb->ledger_alternative_kind)
                break;
        }
    }
}

/* Align the policy application with the context decision: num_ctx reaches the engine only when
 * the router forwards it. */
static void align_context(struct qr_route_plan *out)
{
    struct qr_policy_effective *e = out->effective;
    if (!e)
        return;
    if (out->context.action == QR_ROUTE_CTX_FORWARD) {
        if (!e->context_len.set) { /* the policy keeps num_ctx off the engine */
            out->context.action = QR_ROUTE_CTX_ADMISSION;
            out->context.reason = "the matched model policy keeps the context size off the "
                                  "engine: the request is an admission limit";
        }
        return;
    }
    if (e->context_len.set) {
        e->admission_context = e->context_len;
        e->context_len.set = false;
    }
    for (size_t i = 0; i < e->n_decisions; i++) {
        struct qr_knob_decision *d = &e->decisions[i];
        if (d->knob == QR_KNOB_NUM_CTX && d->action != QR_KNOB_STRIP) {
            d->action = QR_KNOB_STRIP;
            d->honour = QR_HONOUR_ADMISSION_LIMIT;
            d->policy_value = NULL;
            d->reason = "the router did not verify a context override for this candidate: an "
                        "admission limit";
        }
    }
}

static enum qr_err finish(const struct ctx *c, struct qr_route_plan *out, struct qr_diag *diag)
{
    const struct qr_route_candidate *w = &out->candidates[out->chosen];
    const struct qr_route_backend *b = w->backend;
    out->backend_id = b->desc->id;
    out->backend_kind = b->desc->kind;
    out->engine_version = engine_version(b);
    out->artifact_uri = w->artifact_uri;
    out->served_name = w->served_name;
    out->context = w->context;
    out->n_policies = match_policies(c, b, out->policies);

    /* the winner's explanation of every required key (a second, cheap evaluation) */
    struct qr_cap_evidence ev;
    struct qr_ledger_hit hits[QR_CAP__COUNT];
    const struct qr_rf_view *v = NULL;
    for (size_t i = 0; i < c->facts->n_views && !v; i++) {
        const struct qr_rf_view *x = &c->facts->views[i];
        if (x->uri == w->artifact_uri && x->served_name == w->served_name && x->cls == w->art_class)
            v = x;
    }
    if (ALWAYS(v != NULL)) {
        const struct qr_policy *pol[QR_POLICY_MAX_MATCH];
        candidate_evidence(c, b, v, &ev, hits, pol);
        enum qr_cap_key keys[QR_CAP__COUNT];
        out->n_evals = qr_cap_set_sorted(c->required, keys);
        for (size_t i = 0; i < out->n_evals; i++)
            qr_cap_evaluate_key(&ev, keys[i], &out->evals[i]);
    }

    if (c->q->request) {
        out->effective = malloc(sizeof *out->effective);
        if (!out->effective)
            return QR_ERR_NOMEM;
        enum qr_err err = qr_policy_apply(c->q->request, out->policies, out->n_policies,
                                          c->env->opts.experimental_gate, out->effective, diag);
        if (err != QR_OK)
            return err;
        align_context(out);
    }
    return QR_OK;
}

void qr_route_plan_message(const struct qr_route_plan *p, struct qr_diag *diag)
{
    if (!diag)
        return;
    diag->msg[0] = '\0';
    const char *id = p->canonical_model_id ? p->canonical_model_id : "";
    switch (p->status) {
    case QR_ROUTE_OK:
        return;
    case QR_ROUTE_INVALID_QUERY:
        qr_diag_set(diag, QR_ERR_INVALID, "route request names no model");
        return;
    case QR_ROUTE_MODEL_NOT_FOUND:
        qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' not found",
                    p->requested_identifier ? p->requested_identifier : "");
        return;
    case QR_ROUTE_CONTEXT_EXCEEDED:
        qr_diag_set(diag, QR_ERR_INVALID,
                    "no backend for model '%s' can serve a context of %llu tokens", id,
                    (unsigned long long) p->context.requested);
        return;
    case QR_ROUTE_FALLBACK_REFUSED:
        qr_diag_set(diag, QR_ERR_INVALID,
                    "the first preference for model '%s' cannot serve the request and %s", id,
                    p->strict ? "strict mode refuses a fallback"
                              : "fallback to another backend is not allowed");
        return;
    case QR_ROUTE_NO_COMPATIBLE:
    default:
        break;
    }
    if (qr_cap_set_empty(p->missing)) {
        qr_diag_set(diag, QR_ERR_INVALID, "no available backend serves model '%s'", id);
        return;
    }
    char list[400];
    size_t len = 0;
    enum qr_cap_key keys[QR_CAP__COUNT];
    size_t nk = qr_cap_set_sorted(p->missing, keys);
    list[0] = '\0';
    for (size_t i = 0; i < nk && len < sizeof list; i++) {
        int w = snprintf(list + len, sizeof list - len, "%s'%s'", i ? ", " : "",
                         qr_cap_key_name(keys[i]));
        if (w < 0)
            break;
        len += (size_t) w;
    }
    qr_diag_set(diag, QR_ERR_INVALID, "no compatible backend for model '%s': missing %s", id, list);
}

enum qr_err qr_router_plan(const struct qr_router_env *env, const struct qr_route_query *q,
                           struct qr_route_plan *out, struct qr_diag *diag)
{
    struct ctx c;
    memset(&c, 0, sizeof c);
    memset(out, 0, sizeof *out);
    out->chosen = SIZE_MAX;
    out->fallback.preferred = SIZE_MAX;
    out->requested_identifier = q ? q->model : NULL;
    out->hardware_class = env ? env->hardware_class : NULL;
    out->strict = env && env->opts.strict;
    if (!env || !env->registry || !q)
        return qr_diag_set(diag, QR_ERR_INVALID, "router called without registry or query");
    enum qr_err err = setup(&c, env, q, out, diag);
    if (err != QR_OK)
        return err;
    if (!q->model || !q->model[0]) {
        out->status = QR_ROUTE_INVALID_QUERY;
        qr_route_plan_message(out, diag);
        return QR_ERR_INVALID;
    }
    const struct qr_reg_model *m = qr_rf_find(env->registry, q->model);
    if (!m) {
        out->status = QR_ROUTE_MODEL_NOT_FOUND;
        qr_route_plan_message(out, diag);
        return QR_ERR_NOT_FOUND;
    }
    struct qr_rf_model *facts = malloc(sizeof *facts);
    if (!facts)
        return QR_ERR_NOMEM;
    qr_rf_extract(m, facts);
    c.facts = facts;
    out->model = m;
    out->canonical_model_id = facts->id;
    out->model_family = facts->family;
    out->model_variant = facts->variant;
    if ((err = build(&c, out)) != QR_OK)
        goto done;
    choose(&c, out);
    if (out->status == QR_ROUTE_OK)
        err = finish(&c, out, diag);
    else {
        qr_route_plan_message(out, diag);
        err = QR_ERR_INVALID;
    }
done:
    free(c.fail);
    free(facts);
    return err;
}

void qr_route_plan_cleanup(struct qr_route_plan *p)
{
    if (!p)
        return;
    free(p->candidates);
    free(p->failure_pool);
    free(p->effective);
    p->candidates = NULL;
    p->failure_pool = NULL;
    p->effective = NULL;
    p->n_candidates = 0;
}

size_t qr_route_model_rules_out(const struct qr_registry *reg, const char *model,
                                struct qr_cap_set required, enum qr_cap_key *out, const char **why)
{
    const struct qr_reg_model *m = reg && model ? qr_rf_find(reg, model) : NULL;
    if (!m)
        return 0;
    struct qr_rf_model *f = malloc(sizeof *f);
    if (!f)
        return 0;
    qr_rf_extract(m, f);
    size_t n = 0;
    for (size_t i = 0; i < QR_RF__COUNT; i++) {
        if (!qr_cap_set_has(required, RF_KEY[i]))
            continue;
        const struct qr_rf_claim *c = f->file[i].v == QR_RF_NO    ? &f->file[i]
                                      : f->model[i].v == QR_RF_NO ? &f->model[i]
                                                                  : NULL;
        if (!c)
            continue;
        out[n] = RF_KEY[i];
        why[n++] = c->detail ? c->detail : "the model's manifest";
    }
    free(f);
    return n;
}
