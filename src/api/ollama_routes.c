/* Ollama compatibility surface, adoption stage: an allowlist of /api routes passed through to
 * the configured Ollama daemon unchanged. Anything not on the list is 404 and never forwarded;
 * model-mutating routes are refused unless the operator allowed them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "backend/backend.h"
#include "build_info.h"
#include "core/http_server.h"

/* How a route is served by a backend that cannot pass Ollama requests through. */
enum translated { T_NONE, T_CHAT, T_GENERATE, T_EMBED, T_EMBEDDINGS, T_TAGS, T_VERSION, T_PS };

struct ollama_route {
    const char *path;
    const char *method;
    bool mutation;
    enum translated how;
};

static const struct ollama_route allow[] = {
    {"/api/chat", "POST", false, T_CHAT},   {"/api/generate", "POST", false, T_GENERATE},
    {"/api/embed", "POST", false, T_EMBED}, {"/api/embeddings", "POST", false, T_EMBEDDINGS},
    {"/api/tags", "GET", false, T_TAGS},    {"/api/show", "POST", false, T_NONE},
    {"/api/ps", "GET", false, T_PS},        {"/api/version", "GET", false, T_VERSION},
    {"/api/pull", "POST", true, T_NONE},    {"/api/create", "POST", true, T_NONE},
    {"/api/copy", "POST", true, T_NONE},    {"/api/delete", "DELETE", true, T_NONE},
};

/* ---- Ollama model-read routes answered from a non-Ollama backend ---- */

static void send_small_json(struct qr_http_req *req, const char *body)
{
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_send(req, 200, "application/json; charset=utf-8", body, strlen(body));
}

static void tags_client_gone(struct qr_http_req *req, void *arg)
{
    *(struct qr_http_req **) arg = NULL;
}

static void tags_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                      size_t n, const struct qr_diag *diag, void *arg)
{
    struct qr_http_req *req = *(struct qr_http_req **) arg;
    free(arg);
    if (!req)
        return;
    qr_http_req_set_close_cb(req, NULL, NULL);
    if (err) {
        char msg[700];
        snprintf(msg, sizeof(msg), "cannot list the models of backend '%s': %s", b->vt->id,
                 diag ? diag->msg : qr_err_str(err));
        qr_api_send_error(req, 502, "upstream_error", msg);
        return;
    }
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc), *models = yyjson_mut_arr(doc);
    yyjson_mut_doc_set_root(doc, root);
    for (size_t i = 0; i < n; i++) {
        yyjson_mut_val *e = yyjson_mut_obj(doc), *details = yyjson_mut_obj(doc);
        yyjson_mut_obj_add_strcpy(doc, e, "name", m[i].id);
        yyjson_mut_obj_add_strcpy(doc, e, "model", m[i].id);
        yyjson_mut_obj_add_int(doc, e, "size", m[i].size_bytes > 0 ? m[i].size_bytes : 0);
        yyjson_mut_obj_add_strcpy(doc, e, "digest", m[i].digest);
        yyjson_mut_obj_add_strcpy(doc, details, "family", m[i].family);
        yyjson_mut_obj_add_val(doc, e, "details", details);
        yyjson_mut_arr_append(models, e);
    }
    yyjson_mut_obj_add_val(doc, root, "models", models);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

static void serve_tags(struct qr_backend *b, struct qr_http_req *req)
{
    struct qr_http_req **slot = malloc(sizeof(*slot));
    if (!slot || !b->vt->list_models) {
        free(slot);
        qr_api_send_error(req, 503, "upstream_unavailable", "no backend lists models");
        return;
    }
    *slot = req;
    qr_http_req_set_close_cb(req, tags_client_gone, slot);
    if (b->vt->list_models(b, 5000, tags_done, slot)) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        free(slot);
        qr_api_send_error(req, 502, "upstream_error", "cannot ask the backend for models");
    }
}

static void serve_translated(struct qr_app *app, struct qr_http_req *req,
                             const struct ollama_route *r)
{
    switch (r->how) {
    case T_CHAT:
        qr_api_infer(app, req, QR_PROTO_OLLAMA, QR_OP_CHAT, false);
        return;
    case T_GENERATE:
        qr_api_infer(app, req, QR_PROTO_OLLAMA, QR_OP_COMPLETION, false);
        return;
    case T_EMBED:
        qr_api_infer(app, req, QR_PROTO_OLLAMA, QR_OP_EMBED, false);
        return;
    case T_EMBEDDINGS:
        qr_api_infer(app, req, QR_PROTO_OLLAMA, QR_OP_EMBED, true);
        return;
    case T_VERSION:
        send_small_json(req, "{\"version\":\"" QR_VERSION "\"}\n");
        return;
    case T_PS:
        send_small_json(req, "{\"models\":[]}\n");
        return;
    case T_TAGS:
        serve_tags(app->backend, req);
        return;
    case T_NONE:
        break;
    }
    qr_api_send_error(req, 501, "not_supported_by_backend",
                      "this Ollama route needs an Ollama backend");
}

void qr_api_ollama(struct qr_app *app, struct qr_http_req *req)
{
    const char *path = qr_http_req_path(req);
    const struct ollama_route *r = NULL;
    for (size_t i = 0; i < QR_ARRAY_LEN(allow) && !r; i++) {
        if (!strcmp(path, allow[i].path))
            r = &allow[i];
    }
    if (!r) {
        qr_api_send_error(req, 404, "unsupported_compatibility_route",
                          "this /api route is not supported by the runtime");
        return;
    }
    if (strcmp(qr_http_req_method(req), r->method) != 0) {
        qr_http_resp_header(req, "Allow", r->method);
        qr_api_send_err(req, QR_ERR_METHOD, "method not allowed on this route");
        return;
    }
    if (r->mutation && !app->cfg->allow_model_mutation) {
        qr_api_send_error(req, 403, "model_mutation_disabled",
                          "model mutation is disabled (set QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION)");
        return;
    }
    if (!app->backend) {
        qr_api_send_err(req, QR_ERR_UNAVAILABLE, "no backend serves the Ollama API");
        return;
    }
    if (qr_backend_can_proxy(app->backend)) {
        /* Adoption: an Ollama behind the Runtime gets Ollama requests byte for byte. */
        qr_backend_proxy(app->backend, req, qr_http_req_target(req));
        return;
    }
    serve_translated(app, req, r);
}
