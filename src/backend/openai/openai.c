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

struct probe {
    struct qr_backend *b;
    qr_backend_probe_fn cb;
    void *arg;
};

static void probe_done(enum qr_err err, int status, struct qr_slice body,
                       const struct qr_diag *diag, void *arg)
{
    struct probe pr = *(struct probe *) arg;
    free(arg);
    struct qr_diag d = {{0}};
    if (err == QR_OK && (status < 200 || status > 299))
        err = qr_diag_set(&d, QR_ERR_UPSTREAM, "GET /v1/models answered %d", status);
    else if (err)
        qr_diag_set(&d, err, "%s", diag->msg);
    pr.cb(pr.b, err, &d, pr.arg);
}

static enum qr_err openai_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                                void *arg)
{
    struct probe *pr = malloc(sizeof(*pr));
    if (!pr)
        return QR_ERR_NOMEM;
    *pr = (struct probe){b, cb, arg};
    enum qr_err err = qr_fetch(b, b->env.config->openai_url, "/v1/models", key(b), timeout_ms,
                               1u << 20, probe_done, pr);
    if (err)
        free(pr);
    return err;
}

static enum qr_err openai_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                                 void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    d.reasoning_field = b->env.config->openai_reasoning_field;
    return qr_job_start_http(b, &d, b->env.config->openai_url, key(b), req, fn, arg, out, err);
}

struct list_ctx {
    struct qr_backend *b;
    void (*cb)(struct qr_backend *, enum qr_err, const struct qr_backend_model *, size_t,
               const struct qr_diag *, void *);
    void *arg;
};

/* /v1/models -> rows; vLLM's max_model_len becomes the context length. */
static void list_done(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                      void *arg)
{
    struct list_ctx ctx = *(struct list_ctx *) arg;
    free(arg);
    struct qr_diag d = {{0}};
    if (err) {
        ctx.cb(ctx.b, err, NULL, 0, diag, ctx.arg);
        return;
    }
    yyjson_doc *doc = status == 200 ? yyjson_read(body.ptr, body.len, 0) : NULL;
    yyjson_val *data = yyjson_obj_get(yyjson_doc_get_root(doc), "data");
    if (!yyjson_is_arr(data)) {
        qr_diag_set(&d, QR_ERR_UPSTREAM, "GET /v1/models answered %d without a data list", status);
        ctx.cb(ctx.b, QR_ERR_UPSTREAM, NULL, 0, &d, ctx.arg);
        yyjson_doc_free(doc);
        return;
    }
    size_t n = yyjson_arr_size(data), i = 0, idx, max;
    struct qr_backend_model *rows = calloc(n ? n : 1, sizeof(*rows));
    yyjson_val *m;
    yyjson_arr_foreach(data, idx, max, m)
    {
        const char *id = yyjson_get_str(yyjson_obj_get(m, "id"));
        if (!id || !rows)
            continue;
        yyjson_val *created = yyjson_obj_get(m, "created");
        yyjson_val *ctxlen = yyjson_obj_get(m, "max_model_len");
        const char *owner = yyjson_get_str(yyjson_obj_get(m, "owned_by"));
        rows[i++] = (struct qr_backend_model){
            .id = id,
            .created = yyjson_is_int(created) ? yyjson_get_sint(created) : 0,
            .owned_by = owner ? owner : "",
            .size_bytes = -1,
            .digest = "",
            .family = "",
            .context_length = yyjson_is_int(ctxlen) ? yyjson_get_sint(ctxlen) : -1,
        };
    }
    ctx.cb(ctx.b, QR_OK, rows, i, &d, ctx.arg);
    free(rows);
    yyjson_doc_free(doc);
}

static enum qr_err openai_list_models(struct qr_backend *b, uint32_t timeout_ms,
                                      void (*cb)(struct qr_backend *, enum qr_err,
                                                 const struct qr_backend_model *, size_t,
                                                 const struct qr_diag *, void *),
                                      void *arg)
{
    struct list_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        return QR_ERR_NOMEM;
    *ctx = (struct list_ctx){b, cb, arg};
    enum qr_err err = qr_fetch(b, b->env.config->openai_url, "/v1/models", key(b), timeout_ms,
                               16u << 20, list_done, ctx);
    if (err)
        free(ctx);
    return err;
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
        {"reranking", "unknown"},
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
