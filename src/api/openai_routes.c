/* OpenAI API routes: chat completions, completions and embeddings through the canonical
 * contract, and the model list -- an OpenAI object list whose entries also carry the Runtime's
 * own fields (backend, context length, size, digest) for Runtime-aware clients. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/codec.h"
#include "api/openai_codec.h"
#include "backend/backend.h"
#include "build_info.h"
#include "core/http_server.h"

#define MODELS_TIMEOUT_MS 5000

void qr_api_send_openai_error(struct qr_http_req *req, int status, const char *code,
                              const char *message)
{
    struct qr_api_error e;
    qr_api_error_set(&e, QR_ERR_INVALID, status, code, "", "%s", message);
    struct qr_buf b;
    qr_buf_init(&b, 0);
    qr_openai_error_body(&e, &b);
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Cache-Control", "no-store");
    qr_http_resp_send(req, status, "application/json; charset=utf-8", b.ptr ? b.ptr : "", b.len);
    qr_buf_cleanup(&b);
}

void qr_api_openai_chat(struct qr_app *app, struct qr_http_req *req)
{
    qr_api_infer(app, req, QR_PROTO_OPENAI, QR_OP_CHAT, false);
}

void qr_api_openai_completions(struct qr_app *app, struct qr_http_req *req)
{
    qr_api_infer(app, req, QR_PROTO_OPENAI, QR_OP_COMPLETION, false);
}

void qr_api_openai_embeddings(struct qr_app *app, struct qr_http_req *req)
{
    qr_api_infer(app, req, QR_PROTO_OPENAI, QR_OP_EMBED, false);
}

/* ---- model list ---- */

struct models_ctx {
    struct qr_http_req *req; /* NULL once the client is gone */
    char *want;              /* /v1/models/{id}: the id, else NULL */
};

static void models_client_gone(struct qr_http_req *req, void *arg)
{
    ((struct models_ctx *) arg)->req = NULL;
}

static yyjson_mut_val *model_entry(yyjson_mut_doc *doc, const struct qr_backend *b,
                                   const struct qr_backend_model *m)
{
    yyjson_mut_val *e = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_strcpy(doc, e, "id", m->id);
    yyjson_mut_obj_add_str(doc, e, "object", "model");
    yyjson_mut_obj_add_int(doc, e, "created", m->created);
    yyjson_mut_obj_add_strcpy(doc, e, "owned_by", m->owned_by[0] ? m->owned_by : b->vt->id);
    /* Runtime fields: ignored by OpenAI clients, read by Runtime-aware ones. */
    yyjson_mut_obj_add_str(doc, e, "backend", b->vt->id);
    if (m->context_length >= 0)
        yyjson_mut_obj_add_int(doc, e, "context_length", m->context_length);
    if (m->size_bytes >= 0)
        yyjson_mut_obj_add_int(doc, e, "size_bytes", m->size_bytes);
    if (m->digest[0])
        yyjson_mut_obj_add_strcpy(doc, e, "digest", m->digest);
    if (m->family[0])
        yyjson_mut_obj_add_strcpy(doc, e, "family", m->family);
    return e;
}

static void models_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                        size_t n, const struct qr_diag *diag, void *arg)
{
    struct models_ctx *ctx = arg;
    struct qr_http_req *req = ctx->req;
    char *want = ctx->want;
    free(ctx);
    if (!req) {
        free(want);
        return;
    }
    qr_http_req_set_close_cb(req, NULL, NULL);
    if (err) {
        char msg[700];
        snprintf(msg, sizeof(msg), "cannot list the models of backend '%s': %s", b->vt->id,
                 diag ? diag->msg : qr_err_str(err));
        qr_api_send_openai_error(req, 502, "upstream_error", msg);
        free(want);
        return;
    }
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = NULL;
    if (want) {
        for (size_t i = 0; i < n && !root; i++) {
            if (!strcmp(m[i].id, want))
                root = model_entry(doc, b, &m[i]);
        }
        if (!root) {
            char msg[600];
            snprintf(msg, sizeof(msg), "The model '%s' does not exist", want);
            qr_api_send_openai_error(req, 404, "model_not_found", msg);
            yyjson_mut_doc_free(doc);
            free(want);
            return;
        }
    } else {
        root = yyjson_mut_obj(doc);
        yyjson_mut_obj_add_str(doc, root, "object", "list");
        yyjson_mut_val *data = yyjson_mut_arr(doc);
        for (size_t i = 0; i < n; i++)
            yyjson_mut_arr_append(data, model_entry(doc, b, &m[i]));
        yyjson_mut_obj_add_val(doc, root, "data", data);
    }
    yyjson_mut_doc_set_root(doc, root);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
    free(want);
}

/* Percent-decoding of a path segment (model ids may contain ':' or '/' encoded). */
static char *decode_segment(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *w = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            char *end;
            long v = strtol(hex, &end, 16);
            if (!*end && v > 0) {
                *w++ = (char) v;
                i += 2;
                continue;
            }
        }
        *w++ = s[i];
    }
    *w = '\0';
    return out;
}

void qr_api_openai_models(struct qr_app *app, struct qr_http_req *req)
{
    const char *path = qr_http_req_path(req);
    struct qr_backend *b = app->backend;
    if (!b || !b->vt->list_models) {
        qr_api_send_openai_error(req, 503, "upstream_unavailable", "no backend lists models");
        return;
    }
    struct models_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        qr_api_send_openai_error(req, 500, "internal_error", "out of memory");
        return;
    }
    ctx->req = req;
    if (strncmp(path, "/v1/models/", 11) == 0) {
        ctx->want = decode_segment(path + 11);
        if (!ctx->want || !ctx->want[0]) {
            free(ctx->want);
            free(ctx);
            qr_api_send_openai_error(req, 404, "model_not_found", "a model id is required");
            return;
        }
    }
    qr_http_req_set_close_cb(req, models_client_gone, ctx);
    enum qr_err err = b->vt->list_models(b, MODELS_TIMEOUT_MS, models_done, ctx);
    if (err) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        free(ctx->want);
        free(ctx);
        qr_api_send_openai_error(req, 502, "upstream_error", "cannot ask the backend for models");
    }
}
