/* OpenAI API routes: chat completions, completions, embeddings and rerank through the canonical
 * contract, and the model list -- one document that is both OpenAI's object list (entries with
 * the Runtime's own fields: backend, context length, size, digest, canonical id) and the
 * predecessor's native registry list (api_version, schema_version, count, models, problems). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/codec.h"
#include "api/openai_codec.h"
#include "backend/backend.h"
#include "build_info.h"
#include "core/http_server.h"
#include "registry/registry.h"

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

void qr_api_openai_rerank(struct qr_app *app, struct qr_http_req *req)
{
    qr_api_infer(app, req, QR_PROTO_OPENAI, QR_OP_RERANK, false);
}

/* ---- model list ---- */

struct models_ctx {
    struct qr_app *app;
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
    if (m->parent && m->parent[0])
        yyjson_mut_obj_add_strcpy(doc, e, "parent", m->parent); /* an adapter of that model */
    return e;
}

/* OpenAI's list: what the backend lists (its names, which clients send), then the registry's
 * models for this backend that no listed name resolves to. */
static void add_data(yyjson_mut_doc *doc, yyjson_mut_val *root, const struct qr_registry *reg,
                     const struct qr_backend *b, const struct qr_backend_model *m, size_t n)
{
    yyjson_mut_val *data = yyjson_mut_arr(doc);
    size_t count = qr_registry_count(reg);
    bool *covered = calloc(count ? count : 1, sizeof(*covered));
    if (!covered)
        abort();
    for (size_t i = 0; i < n; i++) {
        yyjson_mut_val *e = model_entry(doc, b, &m[i]);
        const struct qr_reg_model *rm = qr_registry_find(reg, m[i].id);
        if (rm) {
            yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", rm->m->id);
            for (size_t k = 0; k < count; k++)
                covered[k] |= qr_registry_at(reg, k) == rm;
        }
        yyjson_mut_arr_append(data, e);
    }
    for (size_t k = 0; k < count; k++) {
        const struct qr_reg_model *rm = qr_registry_at(reg, k);
        if (covered[k] || !qr_catalog_serves(rm, b))
            continue;
        yyjson_mut_val *e = yyjson_mut_arr_add_obj(doc, data);
        yyjson_mut_obj_add_strcpy(doc, e, "id", rm->m->id);
        yyjson_mut_obj_add_str(doc, e, "object", "model");
        yyjson_mut_obj_add_int(doc, e, "created", 0);
        yyjson_mut_obj_add_str(doc, e, "owned_by", "quantum-runtime");
        yyjson_mut_obj_add_str(doc, e, "backend", b->vt->id);
        yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", rm->m->id);
    }
    free(covered);
    yyjson_mut_obj_insert(root, yyjson_mut_str(doc, "object"), yyjson_mut_str(doc, "list"), 0);
    yyjson_mut_obj_insert(root, yyjson_mut_str(doc, "data"), data, 1);
}

static void add_backend_error(yyjson_mut_doc *doc, yyjson_mut_val *root, const char *msg)
{
    yyjson_mut_val *e = yyjson_mut_obj_add_obj(doc, root, "backend_error");
    yyjson_mut_obj_add_str(doc, e, "code", "upstream_error");
    yyjson_mut_obj_add_strcpy(doc, e, "message", msg);
}

/* GET /v1/models/{id}: the backend's entry for id (exact name) and/or the registry's model. */
static void send_one(struct qr_app *app, struct qr_http_req *req, const struct qr_backend *b,
                     const char *want, const struct qr_backend_model *m, size_t n, const char *berr)
{
    const struct qr_backend_model *row = NULL;
    for (size_t i = 0; i < n && !row; i++) {
        if (!strcmp(m[i].id, want))
            row = &m[i];
    }
    void *vdoc = NULL;
    (void) qr_registry_model_json(app->catalog->registry, want, &vdoc);
    yyjson_mut_doc *doc = vdoc;
    if (!row && !doc) {
        char msg[600];
        if (berr)
            snprintf(msg, sizeof(msg), "%s", berr);
        else
            snprintf(msg, sizeof(msg), "The model '%.400s' does not exist", want);
        qr_api_send_openai_error(req, berr ? 502 : 404, berr ? "upstream_error" : "model_not_found",
                                 msg);
        return;
    }
    if (!doc) {
        doc = yyjson_mut_doc_new(NULL);
        yyjson_mut_doc_set_root(doc, model_entry(doc, b, row));
    } else {
        yyjson_mut_val *root = yyjson_mut_doc_get_root(doc);
        yyjson_mut_val *model = yyjson_mut_obj_get(root, "model");
        const char *cid = yyjson_mut_get_str(yyjson_mut_obj_get(model, "id"));
        yyjson_mut_val *e = row ? model_entry(doc, b, row) : NULL;
        if (!e) {
            e = yyjson_mut_obj(doc);
            yyjson_mut_obj_add_strcpy(doc, e, "id", cid ? cid : want);
            yyjson_mut_obj_add_str(doc, e, "object", "model");
            yyjson_mut_obj_add_int(doc, e, "created", 0);
            yyjson_mut_obj_add_str(doc, e, "owned_by", "quantum-runtime");
        }
        yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", cid ? cid : want);
        /* the OpenAI object's members first, then the native ones */
        size_t idx, max;
        yyjson_mut_val *k, *v;
        size_t at = 0;
        yyjson_mut_obj_foreach(e, idx, max, k, v)
        {
            yyjson_mut_obj_insert(root, yyjson_mut_strcpy(doc, yyjson_mut_get_str(k)),
                                  yyjson_mut_val_mut_copy(doc, v), at++);
        }
        if (berr)
            add_backend_error(doc, root, berr);
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

static void models_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                        size_t n, const struct qr_diag *diag, void *arg)
{
    struct models_ctx *ctx = arg;
    struct qr_http_req *req = ctx->req;
    struct qr_app *app = ctx->app;
    char *want = ctx->want;
    free(ctx);
    if (!req) {
        free(want);
        return;
    }
    qr_http_req_set_close_cb(req, NULL, NULL);
    char berr[700] = "";
    if (err) {
        snprintf(berr, sizeof(berr), "cannot list the models of backend '%s': %s", b->vt->id,
                 diag ? diag->msg : qr_err_str(err));
        m = NULL;
        n = 0;
    } else {
        qr_catalog_join_backend(app->catalog, b->vt->id, b->vt == &qr_backend_ollama, m, n);
    }
    if (want) {
        send_one(app, req, b, want, m, n, err ? berr : NULL);
        free(want);
        return;
    }
    /* one document: OpenAI's list and the predecessor's native registry list */
    yyjson_mut_doc *doc = qr_registry_list_json(app->catalog->registry);
    if (!doc) {
        qr_api_send_openai_error(req, 500, "internal_error", "out of memory");
        return;
    }
    yyjson_mut_val *root = yyjson_mut_doc_get_root(doc);
    add_data(doc, root, app->catalog->registry, b, m, n);
    qr_catalog_add_problems(app->catalog, doc, root);
    if (err)
        add_backend_error(doc, root, berr);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
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
    ctx->app = app;
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
