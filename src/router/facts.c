/* Model-side facts for the router: what a validated manifest declares (its capability booleans
 * and architecture class) and what its architecture contract proves (the GGUF-derived
 * model.architecture_contract: ffn, expert counts, pooling, modalities, speculative, cache,
 * offload), plus the artifact views a backend could serve and the model's native context. This is
 * the only router file that reads manifests; it speaks in router-local fact ids (facts.h) so
 * that the manifest's capability bit names never meet the capability contract's key names. */
#include "router/facts.h"

#include <string.h>

#include <yyjson.h>

#include "registry/registry.h"

const struct qr_reg_model *qr_rf_find(const struct qr_registry *r, const char *name)
{
    return qr_registry_find(r, name);
}

static void put(struct qr_rf_claim *c, enum qr_rf_key k, bool yes, const char *detail)
{
    c[k].v = yes ? QR_RF_YES : QR_RF_NO;
    c[k].detail = detail;
}

/* A boolean member: claims only when stated. */
static void put_bool(struct qr_rf_claim *c, enum qr_rf_key k, yyjson_val *obj, const char *name,
                     const char *detail)
{
    yyjson_val *v = yyjson_obj_get(obj, name);
    if (yyjson_is_bool(v))
        put(c, k, yyjson_get_bool(v), detail);
}

static bool str_in_arr(yyjson_val *arr, const char *s)
{
    size_t i, n;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, n, v)
    {
        if (yyjson_equals_str(v, s))
            return true;
    }
    return false;
}

/* The manifest's capability booleans (the /v1/models vocabulary) onto fact ids. */
static void declared(struct qr_rf_model *out, const struct qr_manifest *mf, yyjson_val *caps)
{
    struct qr_rf_claim *c = out->model;
    unsigned b = mf->caps;
    put(c, QR_RF_TEXT, b & QR_MANIFEST_CAP_TEXT, "manifest capabilities.text");
    put(c, QR_RF_VISION, b & QR_MANIFEST_CAP_VISION, "manifest capabilities.vision");
    put(c, QR_RF_AUDIO, b & QR_MANIFEST_CAP_AUDIO, "manifest capabilities.audio");
    put(c, QR_RF_EMBEDDINGS, b & QR_MANIFEST_CAP_EMBEDDINGS, "manifest capabilities.embeddings");
    put(c, QR_RF_TOOLS, b & QR_MANIFEST_CAP_TOOLS, "manifest capabilities.tools");
    put_bool(c, QR_RF_RERANKING, caps, "reranking", "manifest capabilities.reranking");
    put_bool(c, QR_RF_STRUCTURED, caps, "structured_output",
             "manifest capabilities.structured_output");
    /* tool streaming needs tools; absent tool_streaming says nothing unless tools is false */
    if (!(b & QR_MANIFEST_CAP_TOOLS)) {
        put(c, QR_RF_TOOL_STREAMING, false, "manifest capabilities.tools is false");
        put(c, QR_RF_STREAM_TOOL_ARGS, false, "manifest capabilities.tools is false");
    } else if (yyjson_is_bool(yyjson_obj_get(caps, "tool_streaming"))) {
        bool ts = b & QR_MANIFEST_CAP_TOOL_STREAMING;
        put(c, QR_RF_TOOL_STREAMING, ts, "manifest capabilities.tool_streaming");
        put(c, QR_RF_STREAM_TOOL_ARGS, ts, "manifest capabilities.tool_streaming");
    }
    /* thinking (required) or reasoning_control (optional) */
    bool think = (b & QR_MANIFEST_CAP_THINKING) || (b & QR_MANIFEST_CAP_REASONING_CONTROL);
    const char *d = (b & QR_MANIFEST_CAP_REASONING_CONTROL)
                        ? "manifest capabilities.reasoning_control"
                        : "manifest capabilities.thinking";
    put(c, QR_RF_REASONING, think, d);
    put(c, QR_RF_STREAM_REASONING, think, d);
}

/* model.architecture_class and model.experts (declared). */
static void declared_arch(struct qr_rf_model *out, const struct qr_manifest *mf, yyjson_val *model)
{
    struct qr_rf_claim *c = out->model;
    const char *ac = mf->architecture_class ? mf->architecture_class : "";
    bool moe = strcmp(ac, "moe") == 0, dense = strcmp(ac, "dense") == 0;
    if (moe || dense) {
        const char *d = "manifest model.architecture_class";
        put(c, QR_RF_MOE, moe, d);
        put(c, QR_RF_DENSE, dense, d);
        put(c, QR_RF_EXPERT_OFFLOAD, moe, d);
        put(c, QR_RF_EXPERT_PARALLEL, moe, d);
        if (dense) {
            put(c, QR_RF_TOTAL_EXPERTS, false, d);
            put(c, QR_RF_ACTIVE_EXPERTS, false, d);
            put(c, QR_RF_SHARED_EXPERTS, false, d);
        }
    }
    yyjson_val *ex = yyjson_obj_get(model, "experts");
    if (yyjson_is_obj(ex)) {
        put(c, QR_RF_TOTAL_EXPERTS, true, "manifest model.experts.total");
        put(c, QR_RF_ACTIVE_EXPERTS, true, "manifest model.experts.active");
        yyjson_val *sh = yyjson_obj_get(ex, "shared");
        if (yyjson_is_uint(sh))
            put(c, QR_RF_SHARED_EXPERTS, yyjson_get_uint(sh) > 0, "manifest model.experts.shared");
    }
}

/* model.architecture_contract: what the file proves. */
static void proved(struct qr_rf_model *out, yyjson_val *ac)
{
    struct qr_rf_claim *c = out->file;
    if (!yyjson_is_obj(ac))
        return;
    const char *ffn = yyjson_get_str(yyjson_obj_get(ac, "ffn"));
    if (ffn && (strcmp(ffn, "moe") == 0 || strcmp(ffn, "dense") == 0)) {
        bool moe = ffn[0] == 'm';
        const char *d = "architecture contract ffn";
        put(c, QR_RF_MOE, moe, d);
        put(c, QR_RF_DENSE, !moe, d);
        put(c, QR_RF_EXPERT_PARALLEL, moe, d);
        if (!moe) {
            put(c, QR_RF_TOTAL_EXPERTS, false, d);
            put(c, QR_RF_ACTIVE_EXPERTS, false, d);
            put(c, QR_RF_SHARED_EXPERTS, false, d);
            put(c, QR_RF_EXPERT_OFFLOAD, false, d);
        }
    }
    if (yyjson_is_uint(yyjson_obj_get(ac, "expert_count")))
        put(c, QR_RF_TOTAL_EXPERTS, true, "architecture contract expert_count");
    if (yyjson_is_uint(yyjson_obj_get(ac, "expert_used_count")))
        put(c, QR_RF_ACTIVE_EXPERTS, true, "architecture contract expert_used_count");
    yyjson_val *sh = yyjson_obj_get(ac, "expert_shared_count");
    if (yyjson_is_uint(sh))
        put(c, QR_RF_SHARED_EXPERTS, yyjson_get_uint(sh) > 0,
            "architecture contract expert_shared_count");

    yyjson_val *causal = yyjson_obj_get(yyjson_obj_get(ac, "attention"), "causal");
    if (yyjson_is_bool(causal) && !yyjson_get_bool(causal))
        put(c, QR_RF_TEXT, false, "architecture contract attention.causal is false (encoder)");

    const char *pool = yyjson_get_str(yyjson_obj_get(ac, "pooling"));
    if (pool && strcmp(pool, "rank") == 0)
        put(c, QR_RF_RERANKING, true, "architecture contract pooling rank");
    else if (pool && strcmp(pool, "none") != 0)
        put(c, QR_RF_EMBEDDINGS, true, "architecture contract pooling");

    yyjson_val *mod = yyjson_obj_get(ac, "modalities");
    yyjson_val *in = yyjson_obj_get(mod, "input"), *outp = yyjson_obj_get(mod, "output");
    if (yyjson_is_arr(in)) {
        const char *d = "architecture contract modalities.input";
        put(c, QR_RF_VISION, str_in_arr(in, "image"), d);
        put(c, QR_RF_AUDIO, str_in_arr(in, "audio"), d);
    }
    if (yyjson_is_arr(outp)) {
        const char *d = "architecture contract modalities.output";
        if (str_in_arr(outp, "embedding"))
            put(c, QR_RF_EMBEDDINGS, true, d);
        if (str_in_arr(outp, "score"))
            put(c, QR_RF_RERANKING, true, d);
        if (!str_in_arr(outp, "text"))
            put(c, QR_RF_TEXT, false, d);
    }

    yyjson_val *spec = yyjson_obj_get(ac, "speculative");
    put_bool(c, QR_RF_MTP, spec, "mtp", "architecture contract speculative.mtp");
    yyjson_val *drafts = yyjson_obj_get(spec, "draft_models");
    if (yyjson_is_arr(drafts) && yyjson_arr_size(drafts) > 0)
        put(c, QR_RF_DRAFT_MODEL, true, "architecture contract speculative.draft_models");
    yyjson_val *cache = yyjson_obj_get(ac, "cache");
    put_bool(c, QR_RF_KV_OFFLOAD, cache, "kv_offload", "architecture contract cache.kv_offload");
    put_bool(c, QR_RF_PROMPT_CACHE, cache, "prompt_cache",
             "architecture contract cache.prompt_cache");
    put_bool(c, QR_RF_EXPERT_OFFLOAD, yyjson_obj_get(ac, "offload"), "expert_offload",
             "architecture contract offload.expert_offload");
}

static void context(struct qr_rf_model *out, yyjson_val *model)
{
    yyjson_val *cp = yyjson_obj_get(model, "context_policy");
    yyjson_val *nm = yyjson_obj_get(cp, "native_max");
    yyjson_val *cl =
        yyjson_obj_get(yyjson_obj_get(model, "architecture_contract"), "context_length");
    yyjson_val *cw = yyjson_obj_get(model, "context_window");
    if (yyjson_is_uint(nm) && yyjson_get_uint(nm) > 0) {
        out->native_max = yyjson_get_uint(nm);
        out->native_max_source = "model.context_policy.native_max";
    } else if (yyjson_is_uint(cl)) {
        out->native_max = yyjson_get_uint(cl);
        out->native_max_source = "model.architecture_contract.context_length";
    } else if (yyjson_is_uint(cw)) {
        out->native_max = yyjson_get_uint(cw);
        out->native_max_source = "model.context_window";
    }
    out->ctx_backend_managed = yyjson_get_bool(yyjson_obj_get(cp, "backend_managed"));
    out->ctx_override_supported = yyjson_get_bool(yyjson_obj_get(cp, "override_supported"));
    out->ctx_override_verified = yyjson_get_bool(yyjson_obj_get(cp, "override_verified"));
}

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool streq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

/* The class of a backend enum value (artifact backend or manifest backend.type); 0 if none. */
static unsigned class_of_backend(const char *b)
{
    if (!b)
        return 0;
    if (streq(b, "llama.cpp") || streq(b, "gguf"))
        return QR_ROUTE_ART_GGUF;
    if (streq(b, "ollama-adapter"))
        return QR_ROUTE_ART_OLLAMA;
    if (streq(b, "vllm") || streq(b, "mlx") || streq(b, "safetensors"))
        return QR_ROUTE_ART_HF;
    if (streq(b, "external"))
        return QR_ROUTE_ART_EXTERNAL;
    return 0;
}

/* The artifact's own view: class from the URI scheme, else its backend, else backend.type. */
static void own_view(const struct qr_manifest *mf, const struct qr_manifest_artifact *a,
                     struct qr_rf_view *v)
{
    const char *b = a->backend ? a->backend : mf->backend;
    unsigned by_backend = class_of_backend(b);
    memset(v, 0, sizeof *v);
    v->uri = a->uri;
    v->served_name = a->uri;
    v->role = a->role;
    v->format = a->format;
    if (a->backend && !streq(a->backend, "gguf") && !streq(a->backend, "safetensors"))
        v->pin = a->backend;
    if (has_prefix(a->uri, "ollama:")) {
        v->cls = QR_ROUTE_ART_OLLAMA;
        v->served_name = a->uri + 7;
    } else if (has_prefix(a->uri, "hf:")) {
        v->cls = QR_ROUTE_ART_HF;
        v->served_name = a->uri + 3;
    } else if (has_prefix(a->uri, "openai:")) {
        const char *rest = a->uri + 7, *slash = strchr(rest, '/');
        v->cls = QR_ROUTE_ART_OPENAI;
        v->openai_backend = rest;
        v->openai_backend_len = slash ? (size_t) (slash - rest) : strlen(rest);
        v->served_name = slash ? slash + 1 : rest;
    } else if (has_prefix(a->uri, "profile:")) {
        v->cls = QR_ROUTE_ART_EXTERNAL;
    } else if (has_prefix(a->uri, "models:") || has_prefix(a->uri, "file:")) {
        v->cls = by_backend == QR_ROUTE_ART_HF ? QR_ROUTE_ART_HF : QR_ROUTE_ART_GGUF;
    } else {
        v->cls = by_backend ? by_backend : QR_ROUTE_ART_EXTERNAL;
    }
}

static void views(struct qr_rf_model *out, const struct qr_manifest *mf, yyjson_val *arts)
{
    for (size_t i = 0; i < mf->n_artifacts && out->n_views + 3 <= QR_RF_MAX_VIEWS; i++) {
        const struct qr_manifest_artifact *a = &mf->artifacts[i];
        if (streq(a->role, "draft") || streq(a->role, "projector"))
            continue;
        struct qr_rf_view *v = &out->views[out->n_views++];
        own_view(mf, a, v);
        if (a->ollama_tag && v->cls != QR_ROUTE_ART_OLLAMA) {
            struct qr_rf_view *o = &out->views[out->n_views++];
            *o = *v;
            o->cls = QR_ROUTE_ART_OLLAMA;
            o->served_name = a->ollama_tag;
            o->pin = "ollama-adapter";
            o->openai_backend = NULL;
            o->openai_backend_len = 0;
        }
        yyjson_val *hf = yyjson_obj_get(yyjson_arr_get(arts, i), "huggingface");
        const char *repo = yyjson_get_str(yyjson_obj_get(hf, "repo"));
        if (repo && v->cls != QR_ROUTE_ART_HF) {
            struct qr_rf_view *h = &out->views[out->n_views++];
            *h = *v;
            h->cls = QR_ROUTE_ART_HF;
            h->served_name = repo;
            h->pin = class_of_backend(v->pin) == QR_ROUTE_ART_HF ? v->pin : NULL;
            h->openai_backend = NULL;
            h->openai_backend_len = 0;
        }
    }
}

void qr_rf_extract(const struct qr_reg_model *m, struct qr_rf_model *out)
{
    const struct qr_manifest *mf = m->m;
    yyjson_val *root = (yyjson_val *) qr_manifest_root(mf);
    yyjson_val *model = yyjson_obj_get(root, "model");
    memset(out->model, 0, sizeof out->model);
    memset(out->file, 0, sizeof out->file);
    out->id = mf->id;
    out->family = mf->architecture;
    out->variant = yyjson_get_str(yyjson_obj_get(model, "parameter_class"));
    out->native_max = 0;
    out->native_max_source = NULL;
    out->n_views = 0;
    declared(out, mf, yyjson_obj_get(root, "capabilities"));
    declared_arch(out, mf, model);
    proved(out, yyjson_obj_get(model, "architecture_contract"));
    context(out, model);
    views(out, mf, yyjson_obj_get(root, "artifacts"));
    /* a draft artifact the backend is started with (llama.cpp --spec-draft-model) makes
     * speculative decoding with a draft model part of what the manifest declares */
    for (size_t i = 0; i < mf->n_artifacts; i++) {
        if (streq(mf->artifacts[i].role, "draft") && !out->model[QR_RF_DRAFT_MODEL].v)
            put(out->model, QR_RF_DRAFT_MODEL, true, "manifest artifact with role draft");
    }
}
