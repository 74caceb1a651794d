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
#include "api/verified.h"
#include "backend/backend.h"
#include "build_info.h"
#include "core/http_server.h"
#include "registry/registry.h"
#include "router/router.h"

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

/* One backend's answer, copied (the lists arrive one by one; the answer is built once all are
 * in). */
struct models_set {
    struct qr_backend *b;
    struct qr_backend_model *rows; /* strings owned */
    size_t n;
    char err[700]; /* "" = listed */
};

struct models_ctx {
    struct qr_app *app;
    struct qr_http_req *req; /* NULL once the client is gone */
    char *want;              /* /v1/models/{id}: the id, else NULL */
    size_t pending;          /* lists not answered yet */
    size_t n_sets;
    struct models_set sets[QR_BACKENDS_MAX];
};

static char *dup_or_empty(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

static void models_ctx_free(struct models_ctx *ctx)
{
    for (size_t i = 0; i < ctx->n_sets; i++) {
        struct models_set *set = &ctx->sets[i];
        for (size_t j = 0; j < set->n; j++) {
            struct qr_backend_model *r = &set->rows[j];
            free((char *) r->id);
            free((char *) r->owned_by);
            free((char *) r->digest);
            free((char *) r->family);
            free((char *) r->parent);
        }
        free(set->rows);
    }
    free(ctx->want);
    free(ctx);
}

static void models_client_gone(struct qr_http_req *req, void *arg)
{
    (void) req;
    ((struct models_ctx *) arg)->req = NULL;
}

static yyjson_mut_val *model_entry(yyjson_mut_doc *doc, const struct qr_backend *b,
                                   const struct qr_backend_model *m)
{
    yyjson_mut_val *e = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_strcpy(doc, e, "id", m->id);
    yyjson_mut_obj_add_str(doc, e, "object", "model");
    yyjson_mut_obj_add_int(doc, e, "created", m->created);
    yyjson_mut_obj_add_strcpy(doc, e, "owned_by", m->owned_by[0] ? m->owned_by : qr_backend_id(b));
    /* Runtime fields: ignored by OpenAI clients, read by Runtime-aware ones. */
    yyjson_mut_obj_add_strcpy(doc, e, "backend", qr_backend_id(b));
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

/* The first backend (configuration order) with an artifact of its kind for rm, or NULL. */
static const struct qr_backend *serving_backend(const struct qr_app *app,
                                                const struct qr_reg_model *rm)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        if (qr_catalog_serves(rm, app->backends[i].b))
            return app->backends[i].b;
    }
    return NULL;
}

/* OpenAI's list: what each backend lists (its names, which clients send), in configuration
 * order, then the registry's models some backend serves that no listed name resolves to. */
static void add_data(yyjson_mut_doc *doc, yyjson_mut_val *root, struct qr_app *app,
                     const struct models_ctx *ctx)
{
    const struct qr_registry *reg = app->catalog->registry;
    yyjson_mut_val *data = yyjson_mut_arr(doc);
    size_t count = qr_registry_count(reg);
    bool *covered = calloc(count ? count : 1, sizeof(*covered));
    if (!covered)
        abort();
    /* one route environment for every entry's capability states */
    struct qr_route_backend rbs[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rbs, &env);
    for (size_t s = 0; s < ctx->n_sets; s++) {
        const struct models_set *set = &ctx->sets[s];
        for (size_t i = 0; i < set->n; i++) {
            yyjson_mut_val *e = model_entry(doc, set->b, &set->rows[i]);
            const struct qr_reg_model *rm = qr_registry_find(reg, set->rows[i].id);
            if (rm) {
                yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", rm->m->id);
                (void) qr_api_capability_states_model(app, &env, rm->m->id, doc, e);
                for (size_t k = 0; k < count; k++)
                    covered[k] |= qr_registry_at(reg, k) == rm;
            }
            yyjson_mut_arr_append(data, e);
        }
    }
    for (size_t k = 0; k < count; k++) {
        const struct qr_reg_model *rm = qr_registry_at(reg, k);
        const struct qr_backend *b = covered[k] ? NULL : serving_backend(app, rm);
        if (!b)
            continue;
        yyjson_mut_val *e = yyjson_mut_arr_add_obj(doc, data);
        yyjson_mut_obj_add_strcpy(doc, e, "id", rm->m->id);
        yyjson_mut_obj_add_str(doc, e, "object", "model");
        yyjson_mut_obj_add_int(doc, e, "created", 0);
        yyjson_mut_obj_add_str(doc, e, "owned_by", "quantum-runtime");
        yyjson_mut_obj_add_strcpy(doc, e, "backend", qr_backend_id(b));
        yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", rm->m->id);
        (void) qr_api_capability_states_model(app, &env, rm->m->id, doc, e);
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

/* GET /v1/models/{id}: the first backend entry for id (exact name) and/or the registry's model.
 */
static void send_one(struct qr_app *app, struct qr_http_req *req, const struct models_ctx *ctx,
                     const char *want, const char *berr)
{
    const struct qr_backend_model *row = NULL;
    const struct qr_backend *b = app->backend;
    for (size_t s = 0; s < ctx->n_sets && !row; s++) {
        for (size_t i = 0; i < ctx->sets[s].n && !row; i++) {
            if (!strcmp(ctx->sets[s].rows[i].id, want)) {
                row = &ctx->sets[s].rows[i];
                b = ctx->sets[s].b;
            }
        }
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
        /* per key: declared, verified or refuted by a stored conformance run, blocked */
        if (qr_api_capability_states_model(app, NULL, cid ? cid : want, doc, root)) {
            yyjson_mut_doc_free(doc);
            qr_api_send_openai_error(req, 500, "internal_error", "out of memory");
            return;
        }
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* Every list is in: one answer. */
static void models_answer(struct models_ctx *ctx)
{
    struct qr_http_req *req = ctx->req;
    struct qr_app *app = ctx->app;
    if (!req)
        return;
    qr_http_req_set_close_cb(req, NULL, NULL);
    const char *berr = NULL;
    bool listed = false;
    for (size_t s = 0; s < ctx->n_sets; s++) {
        if (ctx->sets[s].err[0] && !berr)
            berr = ctx->sets[s].err;
        listed |= !ctx->sets[s].err[0];
    }
    if (ctx->want) {
        send_one(app, req, ctx, ctx->want, listed ? NULL : berr);
        return;
    }
    /* one document: OpenAI's list and the predecessor's native registry list */
    yyjson_mut_doc *doc = qr_registry_list_json(app->catalog->registry);
    if (!doc) {
        qr_api_send_openai_error(req, 500, "internal_error", "out of memory");
        return;
    }
    yyjson_mut_val *root = yyjson_mut_doc_get_root(doc);
    add_data(doc, root, app, ctx);
    qr_catalog_add_problems(app->catalog, doc, root);
    if (berr)
        add_backend_error(doc, root, berr);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

static void models_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                        size_t n, const struct qr_diag *diag, void *arg)
{
    struct models_ctx *ctx = arg;
    struct models_set *set = NULL;
    for (size_t s = 0; s < ctx->n_sets && !set; s++)
        set = ctx->sets[s].b == b ? &ctx->sets[s] : NULL;
    if (set && err) {
        snprintf(set->err, sizeof(set->err), "cannot list the models of backend '%s': %s",
                 qr_backend_id(b), diag ? diag->msg : qr_err_str(err));
    } else if (set) {
        qr_catalog_join_backend(ctx->app->catalog, qr_backend_id(b), b->vt == &qr_backend_ollama, m,
                                n);
        set->rows = calloc(n ? n : 1, sizeof(*set->rows));
        if (!set->rows)
            abort();
        for (size_t i = 0; i < n; i++) {
            set->rows[i] = m[i];
            set->rows[i].id = dup_or_empty(m[i].id);
            set->rows[i].owned_by = dup_or_empty(m[i].owned_by);
            set->rows[i].digest = dup_or_empty(m[i].digest);
            set->rows[i].family = dup_or_empty(m[i].family);
            set->rows[i].parent = m[i].parent ? dup_or_empty(m[i].parent) : NULL;
        }
        set->n = n;
    }
    if (--ctx->pending)
        return;
    models_answer(ctx);
    models_ctx_free(ctx);
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
    struct models_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        qr_api_send_openai_error(req, 500, "internal_error", "out of memory");
        return;
    }
    ctx->req = req;
    ctx->app = app;
    for (size_t i = 0; i < app->n_backends; i++) {
        if (app->backends[i].b->vt->list_models)
            ctx->sets[ctx->n_sets++].b = app->backends[i].b;
    }
    if (!ctx->n_sets) {
        free(ctx);
        qr_api_send_openai_error(req, 503, "upstream_unavailable", "no backend lists models");
        return;
    }
    if (strncmp(path, "/v1/models/", 11) == 0) {
        ctx->want = decode_segment(path + 11);
        if (!ctx->want || !ctx->want[0]) {
            models_ctx_free(ctx);
            qr_api_send_openai_error(req, 404, "model_not_found", "a model id is required");
            return;
        }
    }
    qr_http_req_set_close_cb(req, models_client_gone, ctx);
    /* every list is asked for before any answer is handled; one that cannot even be asked counts
     * as answered with its error */
    ctx->pending = ctx->n_sets + 1;
    for (size_t s = 0; s < ctx->n_sets; s++) {
        struct qr_backend *b = ctx->sets[s].b;
        if (b->vt->list_models(b, MODELS_TIMEOUT_MS, models_done, ctx)) {
            snprintf(ctx->sets[s].err, sizeof(ctx->sets[s].err),
                     "cannot ask backend '%s' for its models", qr_backend_id(b));
            ctx->pending--;
        }
    }
    if (--ctx->pending == 0) {
        models_answer(ctx);
        models_ctx_free(ctx);
    }
}
