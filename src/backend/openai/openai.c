/* OpenAI-compatible adapter: any engine that serves /v1/chat/completions (llama-server, vLLM,
 * MLX-LM, SGLang, ...), local or remote. Requests go through the canonical contract and the
 * OpenAI upstream codec; dialect differences (reasoning field, usage, tool-call deltas) are data
 * in struct qr_dialect, not per-engine branches. Readiness is GET /v1/models. */
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "backend/codec.h"
#include "backend/job.h"

static const char *key(const struct qr_backend *b)
{
    return b->env.config->openai_api_key;
}

static enum qr_err openai_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                                void *arg)
{
    return qr_fetch_probe(b, b->env.config->openai_url, "/v1/models", key(b), timeout_ms, cb, arg);
}

static enum qr_err openai_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                                 void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    d.reasoning_field = b->env.config->openai_reasoning_field;
    return qr_job_start_http(b, &d, b->env.config->openai_url, key(b), req, fn, arg, out, err);
}

/* One /v1/models entry; vLLM's max_model_len becomes the context length. */
static bool models_row(yyjson_val *m, struct qr_backend_model *r)
{
    const char *id = yyjson_get_str(yyjson_obj_get(m, "id"));
    if (!id)
        return false;
    yyjson_val *created = yyjson_obj_get(m, "created");
    yyjson_val *ctxlen = yyjson_obj_get(m, "max_model_len");
    const char *owner = yyjson_get_str(yyjson_obj_get(m, "owned_by"));
    r->id = id;
    r->created = yyjson_is_int(created) ? yyjson_get_sint(created) : 0;
    r->owned_by = owner ? owner : "";
    r->context_length = yyjson_is_int(ctxlen) ? yyjson_get_sint(ctxlen) : -1;
    return true;
}

static enum qr_err openai_list_models(struct qr_backend *b, uint32_t timeout_ms, qr_models_fn cb,
                                      void *arg)
{
    return qr_fetch_models(b, b->env.config->openai_url, "/v1/models", key(b), timeout_ms, "data",
                           models_row, cb, arg);
}

static void openai_describe(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    /* What an arbitrary OpenAI-compatible engine can do depends on the engine, its flags and
     * the model: conditional until conformance verifies it; unknown where nothing is known. */
    static const struct {
        const char *key, *state;
    } rows[] = {
        {"text", "conditional"},
        {"architecture.dense", "conditional"},
        {"architecture.moe", "conditional"},
        {"moe.expert_offload", "unknown"},
        {"moe.expert_parallel", "unknown"},
        {"speculative.mtp", "unknown"},
        {"speculative.draft_model", "unknown"},
        {"cache.kv_offload", "unknown"},
        {"cache.prompt_cache", "conditional"},
        {"multimodal.vision", "conditional"},
        {"multimodal.audio", "conditional"},
        {"embeddings", "conditional"},
        {"reranking", "conditional"}, /* forwarded to /v1/rerank (llama-server, vLLM) */
        {"reasoning_control", "conditional"},
        {"tools.calling", "conditional"},
        {"tools.streaming", "conditional"},
        {"structured_output", "conditional"},
        {"streaming.content", "supported"},
        {"streaming.reasoning", "conditional"},
        {"streaming.tool_arguments", "conditional"},
        {"placement.cpu", "unknown"},
        {"placement.gpu", "unknown"},
        {"placement.hybrid", "unknown"},
    };
    yyjson_mut_obj_add_str(doc, obj, "execution_mode", "external");
    yyjson_mut_obj_add_strcpy(doc, obj, "endpoint", b->env.config->openai_url);
    yyjson_mut_val *caps = yyjson_mut_obj(doc);
    for (size_t i = 0; i < QR_ARRAY_LEN(rows); i++)
        yyjson_mut_obj_add_str(doc, caps, rows[i].key, rows[i].state);
    yyjson_mut_val *ctx = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_bool(doc, ctx, "backend_managed", true);
    yyjson_mut_obj_add_str(doc, ctx, "override_supported", "unknown");
    yyjson_mut_obj_add_bool(doc, ctx, "override_verified", false);
    yyjson_mut_obj_add_val(doc, caps, "context", ctx);
    yyjson_mut_obj_add_val(doc, obj, "capabilities", caps);
}

const struct qr_backend_vtable qr_backend_openai = {
    .version = QR_BACKEND_VTABLE_V1,
    .id = "openai",
    .kind = "openai-compatible",
    .instance_size = sizeof(struct qr_backend),
    .describe = openai_describe,
    .probe = openai_probe,
    .proxy = NULL,
    .submit = openai_submit,
    .list_models = openai_list_models,
};
