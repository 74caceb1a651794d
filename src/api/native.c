/* The Runtime's own operational endpoints: liveness (never touches a backend), readiness (a real,
 * bounded backend probe), build identity and the capability summary. Field names and values keep
 * the Go predecessor's (v1alpha1) so existing probes and dashboards keep working. */
#include <stdlib.h>

#include <yyjson.h>

#include "api/api.h"
#include "backend/backend.h"
#include "build_info.h"
#include "core/http_server.h"

#define READY_PROBE_TIMEOUT_MS 3000

void qr_api_healthz(struct qr_app *app, struct qr_http_req *req)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "status", "alive");
    yyjson_mut_obj_add_str(doc, root, "service", "quantum-runtime");
    yyjson_mut_obj_add_str(doc, root, "version", QR_VERSION);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* A readiness probe outlives its request when the client goes away: the close callback only
 * forgets the request, the probe's completion frees the context. */
struct ready_ctx {
    struct qr_http_req *req;
};

static void ready_client_gone(struct qr_http_req *req, void *arg)
{
    struct ready_ctx *ctx = arg;
    ctx->req = NULL;
}

static void ready_done(struct qr_backend *b, enum qr_err err, const struct qr_diag *diag, void *arg)
{
    struct ready_ctx *ctx = arg;
    struct qr_http_req *req = ctx->req;
    free(ctx);
    if (!req)
        return;
    qr_http_req_set_close_cb(req, NULL, NULL);
    if (err) {
        char msg[600];
        snprintf(msg, sizeof(msg), "backend '%s' is not ready: %s", qr_backend_id(b), diag->msg);
        qr_api_send_err(req, QR_ERR_UNAVAILABLE, msg);
        return;
    }
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "status", "ready");
    yyjson_mut_obj_add_str(doc, root, "backend", b->vt->kind);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

void qr_api_readyz(struct qr_app *app, struct qr_http_req *req)
{
    if (!app->backend) {
        qr_api_send_err(req, QR_ERR_UNAVAILABLE, "no backend is configured");
        return;
    }
    struct ready_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    ctx->req = req;
    qr_http_req_set_close_cb(req, ready_client_gone, ctx);
    enum qr_err err = qr_backend_probe(app->backend, READY_PROBE_TIMEOUT_MS, ready_done, ctx);
    if (err) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        free(ctx);
        qr_api_send_err(req, QR_ERR_UNAVAILABLE, "cannot start the readiness probe");
    }
}

static yyjson_mut_val *backend_descriptor(struct qr_app *app, yyjson_mut_doc *doc)
{
    if (!app->backend)
        return yyjson_mut_null(doc);
    yyjson_mut_val *obj = yyjson_mut_obj(doc);
    qr_backend_describe(app->backend, doc, obj);
    return obj;
}

void qr_api_runtime(struct qr_app *app, struct qr_http_req *req)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "name", "Quantum Runtime");
    yyjson_mut_obj_add_str(doc, root, "service", "quantum-runtime");
    yyjson_mut_obj_add_str(doc, root, "version", QR_VERSION);
    yyjson_mut_obj_add_str(doc, root, "commit", QR_COMMIT);
    yyjson_mut_obj_add_str(doc, root, "build_date", QR_BUILD_DATE);
    yyjson_mut_obj_add_str(doc, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(doc, root, "backend_contract", QR_BACKEND_CONTRACT);
    yyjson_mut_obj_add_val(doc, root, "backend", backend_descriptor(app, doc));
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

void qr_api_capabilities(struct qr_app *app, struct qr_http_req *req)
{
    static const char *const compat[] = {"ollama-api-chat", "ollama-api-generate",
                                         "ollama-api-embeddings", "ollama-api-model-read"};
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "native_api", "v1alpha1");
    yyjson_mut_obj_add_str(doc, root, "backend_contract", QR_BACKEND_CONTRACT);
    yyjson_mut_val *arr = yyjson_mut_arr(doc);
    for (size_t i = 0; i < QR_ARRAY_LEN(compat); i++)
        yyjson_mut_arr_add_str(doc, arr, compat[i]);
    if (app->cfg->allow_model_mutation)
        yyjson_mut_arr_add_str(doc, arr, "ollama-api-model-mutation");
    yyjson_mut_obj_add_val(doc, root, "compatibility", arr);
    yyjson_mut_obj_add_val(doc, root, "backend", backend_descriptor(app, doc));
    yyjson_mut_obj_add_bool(doc, root, "model_mutation", app->cfg->allow_model_mutation);
    yyjson_mut_obj_add_bool(doc, root, "streaming", true);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}
