/* Ollama compatibility surface, adoption stage: an allowlist of /api routes passed through to
 * the configured Ollama daemon unchanged. Anything not on the list is 404 and never forwarded;
 * model-mutating routes are refused unless the operator allowed them. */
#include <string.h>

#include "api/api.h"
#include "backend/backend.h"
#include "core/http_server.h"

struct ollama_route {
    const char *path;
    const char *method;
    bool mutation;
};

static const struct ollama_route allow[] = {
    {"/api/chat", "POST", false},  {"/api/generate", "POST", false},
    {"/api/embed", "POST", false}, {"/api/embeddings", "POST", false},
    {"/api/tags", "GET", false},   {"/api/show", "POST", false},
    {"/api/ps", "GET", false},     {"/api/version", "GET", false},
    {"/api/pull", "POST", true},   {"/api/create", "POST", true},
    {"/api/copy", "POST", true},   {"/api/delete", "DELETE", true},
};

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
    if (!app->backend || !qr_backend_can_proxy(app->backend)) {
        qr_api_send_err(req, QR_ERR_UNAVAILABLE, "no backend serves the Ollama API");
        return;
    }
    qr_backend_proxy(app->backend, req, qr_http_req_target(req));
}
