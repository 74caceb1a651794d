/* The capability contract v1alpha1: the key table, states, key sets and the pure evaluation of a
 * candidate's evidence into an effective state per key with its reasons. The router asks it
 * "can this (model, artifact, backend, engine version, host) serve what the request needs, and
 * why (not)"; it never guesses, and anything it cannot prove reads as unknown, which fails
 * closed. The rules are stated in capability.h and docs/CAPABILITIES.md. */
#include "capability/capability.h"

#include <string.h>

/* The one table: canonical name, descriptor field, where the field lives, predecessor's name?,
 * model side bears on it?, summary. Order = enum order (checked by the unit tests). */
#define ROW(k, n, f, fk, leg, ms, sum) [k] = {k, n, f, fk, leg, ms, sum}
static const struct qr_cap_info table[QR_CAP__COUNT] = {
    ROW(QR_CAP_INFERENCE_TEXT, "inference.text", "text", QR_CAP_FIELD_STATE, true, true,
        "text generation (chat or completion)"),
    ROW(QR_CAP_ARCH_DENSE, "architecture.dense", "architecture.dense", QR_CAP_FIELD_STATE, true,
        true, "dense transformer architecture"),
    ROW(QR_CAP_ARCH_MOE, "architecture.moe", "architecture.moe", QR_CAP_FIELD_STATE, true, true,
        "mixture-of-experts architecture"),
    ROW(QR_CAP_MOE_TOTAL_EXPERTS, "moe.total_experts", "moe.total_experts", QR_CAP_FIELD_STATE,
        false, true, "total expert count known and honoured"),
    ROW(QR_CAP_MOE_ACTIVE_EXPERTS, "moe.active_experts", "moe.active_experts", QR_CAP_FIELD_STATE,
        false, true, "active experts per token known and honoured"),
    ROW(QR_CAP_MOE_SHARED_EXPERTS, "moe.shared_experts", "moe.shared_experts", QR_CAP_FIELD_STATE,
        false, true, "shared (always-on) experts"),
    ROW(QR_CAP_MOE_EXPERT_OFFLOAD, "moe.expert_offload", "moe.expert_offload", QR_CAP_FIELD_STATE,
        true, true, "expert tensors placed off the accelerator"),
    ROW(QR_CAP_MOE_EXPERT_PARALLEL, "moe.expert_parallel", "moe.expert_parallel",
        QR_CAP_FIELD_STATE, true, true, "experts spread over devices or nodes"),
    ROW(QR_CAP_QUANT_FORMATS, "quantization.formats", "quantization_formats", QR_CAP_FIELD_LIST,
        false, true, "the artifact's weight format is one the engine loads"),
    ROW(QR_CAP_SPEC_MTP, "speculative.mtp", "speculative.mtp", QR_CAP_FIELD_STATE, true, true,
        "multi-token-prediction heads used for speculation"),
    ROW(QR_CAP_SPEC_DRAFT_MODEL, "speculative.draft_model", "speculative.draft_model",
        QR_CAP_FIELD_STATE, true, true, "speculative decoding with a draft model"),
    ROW(QR_CAP_CACHE_KV_OFFLOAD, "cache.kv_offload", "cache.kv_offload", QR_CAP_FIELD_STATE, true,
        false, "KV cache placed off the accelerator"),
    ROW(QR_CAP_CACHE_PROMPT_CACHE, "cache.prompt_cache", "cache.prompt_cache", QR_CAP_FIELD_STATE,
        true, false, "prompt prefix reuse across requests"),
    ROW(QR_CAP_VISION, "multimodal.vision", "multimodal.vision", QR_CAP_FIELD_STATE, true, true,
        "image input"),
    ROW(QR_CAP_AUDIO, "multimodal.audio", "multimodal.audio", QR_CAP_FIELD_STATE, true, true,
        "audio input"),
    ROW(QR_CAP_EMBEDDINGS, "embeddings", "embeddings", QR_CAP_FIELD_STATE, true, true,
        "embedding vectors"),
    ROW(QR_CAP_RERANKING, "reranking", "reranking", QR_CAP_FIELD_STATE, true, true,
        "document reranking"),
    ROW(QR_CAP_REASONING_CONTROL, "reasoning.control", "reasoning_control", QR_CAP_FIELD_STATE,
        true, true, "thinking switched on/off or set to a level"),
    ROW(QR_CAP_TOOLS_CALLING, "tools.calling", "tools.calling", QR_CAP_FIELD_STATE, true, true,
        "tool definitions in, tool calls out"),
    ROW(QR_CAP_TOOLS_STREAMING, "tools.streaming", "tools.streaming", QR_CAP_FIELD_STATE, true,
        true, "tool calls in a streamed answer"),
    ROW(QR_CAP_STRUCTURED_OUTPUT, "structured_output", "structured_output", QR_CAP_FIELD_STATE,
        true, true, "output constrained to JSON or a JSON schema"),
    ROW(QR_CAP_STREAM_CONTENT, "streaming.content", "streaming.content", QR_CAP_FIELD_STATE, true,
        false, "content streamed as it is generated"),
    ROW(QR_CAP_STREAM_REASONING, "streaming.reasoning", "streaming.reasoning", QR_CAP_FIELD_STATE,
        true, true, "reasoning streamed apart from content"),
    ROW(QR_CAP_STREAM_TOOL_ARGS, "streaming.tool_arguments", "streaming.tool_arguments",
        QR_CAP_FIELD_STATE, true, true, "tool-call arguments streamed incrementally, ids kept"),
    ROW(QR_CAP_PLACE_CPU, "placement.cpu", "placement.cpu", QR_CAP_FIELD_STATE, true, false,
        "runs on the CPU"),
    ROW(QR_CAP_PLACE_GPU, "placement.gpu", "placement.gpu", QR_CAP_FIELD_STATE, true, false,
        "runs on a GPU"),
    ROW(QR_CAP_PLACE_HYBRID, "placement.hybrid", "placement.hybrid", QR_CAP_FIELD_STATE, true,
        false, "layers split between CPU and GPU"),
    ROW(QR_CAP_CONTEXT_OVERRIDE, "context.override", "context.override_supported",
        QR_CAP_FIELD_CONTEXT, true, false, "a client context size forwarded to the engine"),
};
#undef ROW

const struct qr_cap_info *qr_cap_info(enum qr_cap_key key)
{
    return qr_cap_valid(key) ? &table[key] : NULL;
}

const char *qr_cap_key_name(enum qr_cap_key key)
{
    return qr_cap_valid(key) ? table[key].name : "not-a-key";
}

/* Linear scans: 28 short names, and only at the edges (route bodies, descriptors). */
static enum qr_cap_key lookup(struct qr_slice name, bool canonical, bool field)
{
    if (!name.ptr || name.len == 0)
        return QR_CAP_NOT_A_KEY;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if ((canonical && qr_slice_eq(name, table[k].name)) ||
            (field && qr_slice_eq(name, table[k].field)))
            return (enum qr_cap_key) k;
    }
    return QR_CAP_NOT_A_KEY;
}

enum qr_cap_key qr_cap_key_parse(struct qr_slice name)
{
    return lookup(name, true, false);
}

enum qr_cap_key qr_cap_key_parse_field(struct qr_slice name)
{
    return lookup(name, false, true);
}

enum qr_cap_key qr_cap_key_parse_any(struct qr_slice name)
{
    return lookup(name, true, true);
}

/* ---- sets ---- */

size_t qr_cap_set_count(struct qr_cap_set s)
{
    return (size_t) __builtin_popcountll(s.bits & ((UINT64_C(1) << QR_CAP__COUNT) - 1));
}

size_t qr_cap_set_sorted(struct qr_cap_set s, enum qr_cap_key out[QR_CAP__COUNT])
{
    size_t n = 0;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (!qr_cap_set_has(s, (enum qr_cap_key) k))
            continue;
        /* insertion sort by name: at most 28 entries */
        size_t i = n++;
        while (i > 0 && strcmp(table[out[i - 1]].name, table[k].name) > 0) {
            out[i] = out[i - 1];
            i--;
        }
        out[i] = (enum qr_cap_key) k;
    }
    return n;
}

#define SET_PARSE_MAX 256

enum qr_err qr_cap_set_parse(const struct qr_slice *names, size_t n, struct qr_diag *diag,
                             struct qr_cap_set *out)
{
    struct qr_cap_set s = QR_CAP_SET_EMPTY;
    if (n > SET_PARSE_MAX)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "too many capabilities: %zu (limit %d)", n,
                           SET_PARSE_MAX);
    for (size_t i = 0; i < n; i++) {
        enum qr_cap_key k = qr_cap_key_parse_any(names[i]);
        if (k == QR_CAP_NOT_A_KEY) {
            /* quote at most 64 bytes of a hostile name */
            int shown = names[i].len > 64 ? 64 : (int) names[i].len;
            return qr_diag_set(diag, QR_ERR_INVALID, "unknown capability '%.*s'", shown,
                               names[i].ptr ? names[i].ptr : "");
        }
        qr_cap_set_add(&s, k);
    }
    *out = s;
    return QR_OK;
}

/* ---- states and sources ---- */

static const char *const state_names[] = {
    [QR_CAP_UNKNOWN] = "unknown",
    [QR_CAP_SUPPORTED] = "supported",
    [QR_CAP_UNSUPPORTED] = "unsupported",
    [QR_CAP_CONDITIONAL] = "conditional",
};

static bool state_valid(enum qr_cap_state s)
{
    return (unsigned) s < QR_ARRAY_LEN(state_names);
}

const char *qr_cap_state_str(enum qr_cap_state s)
{
    return state_valid(s) ? state_names[s] : "unknown";
}

enum qr_err qr_cap_state_parse(struct qr_slice s, enum qr_cap_state *out)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(state_names); i++) {
        if (s.ptr && qr_slice_eq(s, state_names[i])) {
            *out = (enum qr_cap_state) i;
            return QR_OK;
        }
    }
    return QR_ERR_INVALID;
}

static const char *const source_names[QR_CAP_SRC__COUNT] = {
    [QR_CAP_SRC_MODEL] = "model",     [QR_CAP_SRC_FILE] = "file",
    [QR_CAP_SRC_BACKEND] = "backend", [QR_CAP_SRC_CONFORMANCE] = "conformance",
    [QR_CAP_SRC_LEDGER] = "ledger",   [QR_CAP_SRC_POLICY] = "policy",
};

const char *qr_cap_source_str(enum qr_cap_source s)
{
    return (unsigned) s < QR_CAP_SRC__COUNT ? source_names[s] : "unknown";
}

/* ---- evidence ---- */

void qr_cap_evidence_init(struct qr_cap_evidence *ev)
{
    memset(ev, 0, sizeof(*ev));
}

void qr_cap_evidence_set(struct qr_cap_evidence *ev, enum qr_cap_source src, enum qr_cap_key key,
                         enum qr_cap_state state, const char *detail)
{
    if ((unsigned) src >= QR_CAP_SRC__COUNT || !qr_cap_valid(key) || !state_valid(state))
        return;
    ev->claims[src][key] = (struct qr_cap_claim){true, state, detail};
}

void qr_cap_evidence_verify(struct qr_cap_evidence *ev, enum qr_cap_key key, const char *detail)
{
    qr_cap_evidence_set(ev, QR_CAP_SRC_CONFORMANCE, key, QR_CAP_SUPPORTED, detail);
}

void qr_cap_evidence_block(struct qr_cap_evidence *ev, enum qr_cap_source src, enum qr_cap_key key,
                           const char *reason)
{
    if (src != QR_CAP_SRC_LEDGER && src != QR_CAP_SRC_POLICY)
        return;
    qr_cap_evidence_set(ev, src, key, QR_CAP_UNSUPPORTED, reason);
}

/* ---- evaluation ---- */

/* The rule texts (static; they appear in plan explanations). */
#define R_LEDGER       "blocked by the ledger"
#define R_POLICY       "blocked by policy"
#define R_BACKEND_NO   "the backend does not support it"
#define R_CONF_FAILED  "conformance failed on this candidate"
#define R_MODEL_NO     "the model side does not support it"
#define R_BACKEND_ANY  "the backend supports it for any model"
#define R_MODEL_COND   "the model side states a condition this evidence does not resolve"
#define R_COND_MET     "the backend's condition is met by the model side"
#define R_COND_UNKNOWN "the backend's condition is not settled by the model side"
#define R_COND_OUTSIDE "the backend's condition lies outside the model evidence"
#define R_BACKEND_UNK  "the backend does not declare it"
#define R_VERIFIED     "verified by conformance on this candidate"

/* A claim's state; blocks read as unsupported whatever state they were recorded with. */
static enum qr_cap_state claim_state(enum qr_cap_source src, const struct qr_cap_claim *c)
{
    if (src == QR_CAP_SRC_LEDGER || src == QR_CAP_SRC_POLICY)
        return QR_CAP_UNSUPPORTED;
    return state_valid(c->state) ? c->state : QR_CAP_UNKNOWN;
}

/* The model side: model (manifest) and file (GGUF) merged; a contradiction fails closed. */
static enum qr_cap_state model_side(const struct qr_cap_evidence *ev, enum qr_cap_key key)
{
    bool sup = false, cond = false;
    for (int src = QR_CAP_SRC_MODEL; src <= QR_CAP_SRC_FILE; src++) {
        const struct qr_cap_claim *c = &ev->claims[src][key];
        if (!c->set)
            continue;
        enum qr_cap_state s = claim_state((enum qr_cap_source) src, c);
        if (s == QR_CAP_UNSUPPORTED)
            return QR_CAP_UNSUPPORTED;
        sup |= s == QR_CAP_SUPPORTED;
        cond |= s == QR_CAP_CONDITIONAL;
    }
    return sup ? QR_CAP_SUPPORTED : cond ? QR_CAP_CONDITIONAL : QR_CAP_UNKNOWN;
}

static enum qr_cap_state claimed(const struct qr_cap_evidence *ev, enum qr_cap_source src,
                                 enum qr_cap_key key)
{
    const struct qr_cap_claim *c = &ev->claims[src][key];
    return c->set ? claim_state(src, c) : QR_CAP_UNKNOWN;
}

/* Rules 6-9 of capability.h: the state before conformance can settle it. */
static enum qr_cap_state declared_state(enum qr_cap_state backend, enum qr_cap_state model,
                                        bool model_bears, const char **rule)
{
    switch (backend) {
    case QR_CAP_SUPPORTED:
        if (model_bears && model == QR_CAP_CONDITIONAL) {
            *rule = R_MODEL_COND;
            return QR_CAP_CONDITIONAL;
        }
        *rule = R_BACKEND_ANY;
        return QR_CAP_SUPPORTED;
    case QR_CAP_CONDITIONAL:
        if (!model_bears) {
            *rule = R_COND_OUTSIDE;
            return QR_CAP_CONDITIONAL;
        }
        if (model == QR_CAP_SUPPORTED) {
            *rule = R_COND_MET;
            return QR_CAP_SUPPORTED;
        }
        if (model == QR_CAP_CONDITIONAL) {
            *rule = R_MODEL_COND;
            return QR_CAP_CONDITIONAL;
        }
        *rule = R_COND_UNKNOWN;
        return QR_CAP_UNKNOWN;
    default: /* unknown or silent (unsupported was decided earlier) */
        *rule = R_BACKEND_UNK;
        return QR_CAP_UNKNOWN;
    }
}

void qr_cap_evaluate_key(const struct qr_cap_evidence *ev, enum qr_cap_key key,
                         struct qr_cap_eval *out)
{
    memset(out, 0, sizeof(*out));
    out->key = key;
    out->state = QR_CAP_UNKNOWN;
    out->rule = R_BACKEND_UNK;
    if (NEVER(!qr_cap_valid(key)))
        return;

    bool bears = table[key].model_side;
    /* reasons: every claim made, in source order (model-side claims only where they count) */
    for (int src = 0; src < QR_CAP_SRC__COUNT; src++) {
        const struct qr_cap_claim *c = &ev->claims[src][key];
        if (!c->set || (!bears && (src == QR_CAP_SRC_MODEL || src == QR_CAP_SRC_FILE)))
            continue;
        out->reasons[out->n_reasons++] = (struct qr_cap_reason){
            (enum qr_cap_source) src, claim_state((enum qr_cap_source) src, c),
            c->detail ? c->detail : ""};
    }

    enum qr_cap_state backend = claimed(ev, QR_CAP_SRC_BACKEND, key);
    enum qr_cap_state conf = claimed(ev, QR_CAP_SRC_CONFORMANCE, key);
    enum qr_cap_state model = bears ? model_side(ev, key) : QR_CAP_UNKNOWN;

    /* rules 1-5: fail closed */
    const char *no = ev->claims[QR_CAP_SRC_LEDGER][key].set   ? R_LEDGER
                     : ev->claims[QR_CAP_SRC_POLICY][key].set ? R_POLICY
                     : backend == QR_CAP_UNSUPPORTED          ? R_BACKEND_NO
                     : conf == QR_CAP_UNSUPPORTED             ? R_CONF_FAILED
                     : model == QR_CAP_UNSUPPORTED            ? R_MODEL_NO
                                                              : NULL;
    if (no) {
        out->state = QR_CAP_UNSUPPORTED;
        out->rule = no;
        return;
    }

    /* rules 6-9, then 10: conformance settles an undecided state and marks a supported one */
    out->state = declared_state(backend, model, bears, &out->rule);
    if (conf == QR_CAP_SUPPORTED) {
        if (out->state != QR_CAP_SUPPORTED)
            out->rule = R_VERIFIED;
        out->state = QR_CAP_SUPPORTED;
        out->verified = true;
    }
}

void qr_cap_evaluate(const struct qr_cap_evidence *ev, struct qr_cap_result *out)
{
    for (int k = 0; k < QR_CAP__COUNT; k++)
        qr_cap_evaluate_key(ev, (enum qr_cap_key) k, &out->keys[k]);
}

bool qr_cap_result_satisfies(const struct qr_cap_result *res, struct qr_cap_set required,
                             bool strict, struct qr_cap_set *out_missing)
{
    struct qr_cap_set missing = QR_CAP_SET_EMPTY;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (qr_cap_set_has(required, (enum qr_cap_key) k) &&
            !qr_cap_eval_satisfies(&res->keys[k], strict))
            qr_cap_set_add(&missing, (enum qr_cap_key) k);
    }
    if (out_missing)
        *out_missing = missing;
    return qr_cap_set_empty(missing);
}

bool qr_cap_evidence_satisfies(const struct qr_cap_evidence *ev, struct qr_cap_set required,
                               bool strict, struct qr_cap_set *out_missing)
{
    struct qr_cap_set missing = QR_CAP_SET_EMPTY;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (!qr_cap_set_has(required, (enum qr_cap_key) k))
            continue;
        struct qr_cap_eval e;
        qr_cap_evaluate_key(ev, (enum qr_cap_key) k, &e);
        if (!qr_cap_eval_satisfies(&e, strict))
            qr_cap_set_add(&missing, (enum qr_cap_key) k);
    }
    if (out_missing)
        *out_missing = missing;
    return qr_cap_set_empty(missing);
}
