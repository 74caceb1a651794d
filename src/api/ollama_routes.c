/* Ollama compatibility surface: an allowlist of /api routes. Inference routes pass through to
 * the configured Ollama daemon unchanged (or are translated for other backends); the model-read
 * routes /api/tags and /api/show are answered by the Runtime from the registry, merged with what
 * the backend reports. Anything not on the list is 404 and never forwarded; model-mutating routes
 * are refused unless the operator allowed them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "api/verified.h"
#include "backend/backend.h"
#include "backend/job.h"
#include "build_info.h"
#include "core/http_server.h"
#include "core/json_strict.h"
#include "registry/registry.h"

#define TAGS_TIMEOUT_MS 5000
#define TAGS_MAX_BODY   (16u * 1024u * 1024u)
#define TAGS_PATH_MAX   8192u /* "/api/tags?" + the client's query string */

/* How a route is served by a backend that cannot pass Ollama requests through. */
enum translated {
    T_NONE,
    T_CHAT,
    T_GENERATE,
    T_EMBED,
    T_EMBEDDINGS,
    T_TAGS,
    T_SHOW,
    T_VERSION,
    T_PS
};

struct ollama_route {
    const char *path;
    const char *method;
    bool mutation;
    enum translated how;
};

static const struct ollama_route allow[] = {
    {"/api/chat", "POST", false, T_CHAT},   {"/api/generate", "POST", false, T_GENERATE},
    {"/api/embed", "POST", false, T_EMBED}, {"/api/embeddings", "POST", false, T_EMBEDDINGS},
    {"/api/tags", "GET", false, T_TAGS},    {"/api/show", "POST", false, T_SHOW},
    {"/api/ps", "GET", false, T_PS},        {"/api/version", "GET", false, T_VERSION},
    {"/api/pull", "POST", true, T_NONE},    {"/api/create", "POST", true, T_NONE},
    {"/api/copy", "POST", true, T_NONE},    {"/api/delete", "DELETE", true, T_NONE},
};

size_t qr_api_ollama_route_count(void)
{
    return QR_ARRAY_LEN(allow);
}

bool qr_api_ollama_route_at(size_t i, struct qr_api_route_info *out)
{
    if (i >= QR_ARRAY_LEN(allow))
        return false;
    *out = (struct qr_api_route_info){.path = allow[i].path, .method = allow[i].method};
    return true;
}

/* ---- Ollama model-read routes answered from a non-Ollama backend ---- */

static void send_small_json(struct qr_http_req *req, const char *body)
{
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_send(req, 200, "application/json; charset=utf-8", body, strlen(body));
}

/* ---- the registry in Ollama's shapes ---- */

static yyjson_val *jget(yyjson_val *o, const char *path)
{
    /* dotted path of object members */
    char key[64];
    while (o && *path) {
        size_t n = strcspn(path, ".");
        if (n >= sizeof(key))
            return NULL;
        memcpy(key, path, n);
        key[n] = '\0';
        o = yyjson_obj_get(o, key);
        path += n + (path[n] == '.');
    }
    return o;
}

static const char *jstr(yyjson_val *root, const char *path, const char *def)
{
    const char *s = yyjson_get_str(jget(root, path));
    return s ? s : def;
}

/* The first inference artifact (what a tag's size/digest/format describe). */
static yyjson_val *main_artifact(yyjson_val *root)
{
    yyjson_val *arts = yyjson_obj_get(root, "artifacts"), *a, *first = NULL;
    size_t i, n;
    yyjson_arr_foreach(arts, i, n, a)
    {
        const char *role = jstr(a, "role", NULL);
        if (!first && (!role || !strcmp(role, "inference")))
            first = a;
    }
    return first ? first : yyjson_arr_get_first(arts);
}

static void add_details(yyjson_mut_doc *doc, yyjson_mut_val *obj, yyjson_val *root)
{
    yyjson_mut_val *d = yyjson_mut_obj_add_obj(doc, obj, "details");
    const char *family = jstr(root, "model.architecture", "");
    yyjson_mut_obj_add_str(doc, d, "parent_model", "");
    yyjson_mut_obj_add_strcpy(doc, d, "format", jstr(main_artifact(root), "format", "gguf"));
    yyjson_mut_obj_add_strcpy(doc, d, "family", family);
    yyjson_mut_val *fams = yyjson_mut_obj_add_arr(doc, d, "families");
    yyjson_mut_arr_add_strcpy(doc, fams, family);
    char size[48];
    double total = yyjson_get_num(jget(root, "model.total_parameters_b"));
    if (total > 0)
        snprintf(size, sizeof(size), "%.*fB", total < 10 ? 1 : 0, total);
    else
        snprintf(size, sizeof(size), "%s", jstr(root, "model.parameter_class", ""));
    yyjson_mut_obj_add_strcpy(doc, d, "parameter_size", size);
    yyjson_mut_obj_add_strcpy(doc, d, "quantization_level", jstr(root, "model.quantization", ""));
}

/* Stable: the manifest's retrieval time, else the epoch (never the time of the request). */
static const char *modified_at(yyjson_val *root)
{
    return jstr(root, "provenance.retrieved_at", "1970-01-01T00:00:00Z");
}

static void add_tag_entry(yyjson_mut_doc *doc, yyjson_mut_val *arr, const struct qr_reg_model *m,
                          const struct qr_backend *b)
{
    yyjson_val *root = (yyjson_val *) qr_manifest_root(m->m);
    yyjson_val *art = main_artifact(root);
    yyjson_mut_val *e = yyjson_mut_arr_add_obj(doc, arr);
    const char *name = qr_catalog_served_name(m, b);
    yyjson_mut_obj_add_strcpy(doc, e, "name", name);
    yyjson_mut_obj_add_strcpy(doc, e, "model", name);
    yyjson_mut_obj_add_strcpy(doc, e, "modified_at", modified_at(root));
    uint64_t size = yyjson_get_uint(yyjson_obj_get(art, "size_bytes"));
    if (!size && m->n_files)
        size = m->files[0].size;
    yyjson_mut_obj_add_uint(doc, e, "size", size);
    const char *digest = jstr(art, "sha256", m->n_files ? m->files[0].sha256 : "");
    yyjson_mut_obj_add_strcpy(doc, e, "digest",
                              !strncmp(digest, "sha256:", 7) ? digest + 7 : digest);
    add_details(doc, e, root);
    yyjson_mut_obj_add_strcpy(doc, e, "canonical_id", m->m->id);
}

/* Ollama's capability names for the manifest's booleans. */
static void add_capabilities(yyjson_mut_doc *doc, yyjson_mut_val *obj, yyjson_val *root)
{
    yyjson_val *c = yyjson_obj_get(root, "capabilities");
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, obj, "capabilities");
    if (yyjson_get_bool(yyjson_obj_get(c, "text")))
        yyjson_mut_arr_add_str(doc, arr, "completion");
    if (yyjson_get_bool(yyjson_obj_get(c, "tools")))
        yyjson_mut_arr_add_str(doc, arr, "tools");
    if (yyjson_get_bool(yyjson_obj_get(c, "thinking")) ||
        yyjson_get_bool(yyjson_obj_get(c, "reasoning_control")))
        yyjson_mut_arr_add_str(doc, arr, "thinking");
    if (yyjson_get_bool(yyjson_obj_get(c, "vision")))
        yyjson_mut_arr_add_str(doc, arr, "vision");
    if (yyjson_get_bool(yyjson_obj_get(c, "embeddings")))
        yyjson_mut_arr_add_str(doc, arr, "embedding");
}

static void add_info_uint(yyjson_mut_doc *doc, yyjson_mut_val *info, const char *arch,
                          const char *suffix, yyjson_val *v)
{
    if (!yyjson_is_uint(v) && !yyjson_is_sint(v))
        return;
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    yyjson_mut_obj_add(info, yyjson_mut_strcpy(doc, key), yyjson_mut_sint(doc, yyjson_get_sint(v)));
}

static yyjson_mut_doc *show_doc(const struct qr_reg_model *m)
{
    yyjson_val *root = (yyjson_val *) qr_manifest_root(m->m);
    yyjson_val *ac = jget(root, "model.architecture_contract");
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, o);
    yyjson_mut_obj_add_str(doc, o, "modelfile", "");
    yyjson_mut_obj_add_str(doc, o, "parameters", "");
    yyjson_mut_obj_add_str(doc, o, "template", "");
    add_details(doc, o, root);
    /* an adapter a backend reported (vLLM LoRA): its base model */
    for (size_t i = 0; i < m->n_remotes; i++) {
        if (m->remotes[i].parent) {
            yyjson_mut_val *d = yyjson_mut_obj_get(o, "details"); /* in Ollama's key order */
            yyjson_mut_obj_replace(d, yyjson_mut_str(doc, "parent_model"),
                                   yyjson_mut_strcpy(doc, m->remotes[i].parent));
            break;
        }
    }
    const char *arch = jstr(ac, "architecture", jstr(root, "model.architecture", "unknown"));
    yyjson_mut_val *info = yyjson_mut_obj_add_obj(doc, o, "model_info");
    yyjson_mut_obj_add_strcpy(doc, info, "general.architecture", arch);
    double total = yyjson_get_num(jget(root, "model.total_parameters_b"));
    if (total > 0)
        yyjson_mut_obj_add_uint(doc, info, "general.parameter_count", (uint64_t) (total * 1e9));
    yyjson_val *ctx = jget(ac, "context_length");
    /* a backend model's context_window is a placeholder unless its backend stated a length */
    if (!ctx && m->source != QR_REG_BACKEND)
        ctx = jget(root, "model.context_window");
    add_info_uint(doc, info, arch, "context_length", ctx);
    add_info_uint(doc, info, arch, "embedding_length", jget(ac, "embedding_length"));
    yyjson_val *ex = jget(ac, "expert_count");
    add_info_uint(doc, info, arch, "expert_count", ex ? ex : jget(root, "model.experts.total"));
    ex = jget(ac, "expert_used_count");
    add_info_uint(doc, info, arch, "expert_used_count",
                  ex ? ex : jget(root, "model.experts.active"));
    ex = jget(ac, "expert_shared_count");
    add_info_uint(doc, info, arch, "expert_shared_count",
                  ex ? ex : jget(root, "model.experts.shared"));
    add_capabilities(doc, o, root);
    yyjson_mut_obj_add_strcpy(doc, o, "modified_at", modified_at(root));
    yyjson_mut_obj_add_strcpy(doc, o, "canonical_id", m->m->id);
    return doc;
}

/* The backend that lists rm besides the default one's own list: a backend with an artifact of
 * its kind, else another backend that reported the model (backends = ... configuration); NULL. */
static struct qr_backend *tag_backend(struct qr_app *app, const struct qr_reg_model *rm)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        if (qr_catalog_serves(rm, app->backends[i].b))
            return app->backends[i].b;
    }
    for (size_t r = 0; r < rm->n_remotes; r++) {
        struct qr_backend *b = qr_api_backend_find(app, rm->remotes[r].backend);
        if (b && b != app->backend)
            return b;
    }
    return NULL;
}

/* Registry models the backend's list does not name (by name key or digest) join the list. */
static void add_registry_tags(struct qr_app *app, yyjson_mut_doc *doc, yyjson_mut_val *models,
                              const struct qr_backend_model *rows, size_t n)
{
    const struct qr_registry *reg = app->catalog->registry;
    for (size_t k = 0; k < qr_registry_count(reg); k++) {
        const struct qr_reg_model *rm = qr_registry_at(reg, k);
        struct qr_backend *b = tag_backend(app, rm);
        if (!b)
            continue;
        bool covered = false;
        for (size_t i = 0; i < n && !covered; i++)
            covered = qr_registry_find(reg, rows[i].id) == rm;
        if (!covered)
            add_tag_entry(doc, models, rm, b);
    }
}

/* ---- GET /api/tags ---- */

struct tags_ctx {
    struct qr_app *app;
    struct qr_http_req *req; /* NULL once the client is gone */
};

static void tags_client_gone(struct qr_http_req *req, void *arg)
{
    ((struct tags_ctx *) arg)->req = NULL;
}

static void tags_failed(struct qr_http_req *req, const char *backend, const char *why)
{
    char msg[700];
    snprintf(msg, sizeof(msg), "cannot list the models of backend '%s': %s", backend, why);
    qr_api_send_error(req, 502, "upstream_error", msg);
}

/* backend=openai: the engine's rows in Ollama's shape, then the registry's. */
static void tags_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                      size_t n, const struct qr_diag *diag, void *arg)
{
    struct tags_ctx *ctx = arg;
    struct qr_http_req *req = ctx->req;
    struct qr_app *app = ctx->app;
    free(ctx);
    if (!req)
        return;
    qr_http_req_set_close_cb(req, NULL, NULL);
    if (err) {
        tags_failed(req, qr_backend_id(b), diag ? diag->msg : qr_err_str(err));
        return;
    }
    qr_catalog_join_backend(app->catalog, qr_backend_id(b), false, m, n);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc), *models = yyjson_mut_arr(doc);
    yyjson_mut_doc_set_root(doc, root);
    const struct qr_registry *reg = app->catalog->registry;
    for (size_t i = 0; i < n; i++) {
        yyjson_mut_val *e = yyjson_mut_obj(doc);
        yyjson_mut_obj_add_strcpy(doc, e, "name", m[i].id);
        yyjson_mut_obj_add_strcpy(doc, e, "model", m[i].id);
        yyjson_mut_obj_add_str(doc, e, "modified_at", "1970-01-01T00:00:00Z");
        yyjson_mut_obj_add_int(doc, e, "size", m[i].size_bytes > 0 ? m[i].size_bytes : 0);
        yyjson_mut_obj_add_strcpy(doc, e, "digest", m[i].digest);
        /* a model the registry knows: its manifest's details, as /api/show gives them */
        const struct qr_reg_model *rm = qr_registry_find(reg, m[i].id);
        if (rm) {
            add_details(doc, e, (yyjson_val *) qr_manifest_root(rm->m));
        } else {
            yyjson_mut_val *details = yyjson_mut_obj(doc);
            yyjson_mut_obj_add_str(doc, details, "format", "");
            yyjson_mut_obj_add_strcpy(doc, details, "family", m[i].family);
            yyjson_mut_obj_add_val(doc, e, "details", details);
        }
        yyjson_mut_arr_append(models, e);
    }
    add_registry_tags(app, doc, models, m, n);
    yyjson_mut_obj_add_val(doc, root, "models", models);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* backend=ollama: Ollama's own entries verbatim (every member it sends), then the registry's. */
static void ollama_tags_done(enum qr_err err, int status, struct qr_slice body,
                             const struct qr_diag *diag, void *arg)
{
    struct tags_ctx *ctx = arg;
    struct qr_http_req *req = ctx->req;
    struct qr_app *app = ctx->app;
    free(ctx);
    if (!req)
        return;
    qr_http_req_set_close_cb(req, NULL, NULL);
    const char *id = qr_backend_id(app->backend);
    if (err) {
        tags_failed(req, id, diag ? diag->msg : qr_err_str(err));
        return;
    }
    yyjson_doc *in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    yyjson_val *list = yyjson_obj_get(yyjson_doc_get_root(in), "models");
    if (status < 200 || status > 299 || !yyjson_is_arr(list)) {
        char why[64];
        snprintf(why, sizeof(why), "status %d without a model list", status);
        tags_failed(req, id, why);
        yyjson_doc_free(in);
        return;
    }
    size_t n = yyjson_arr_size(list), i, max;
    struct qr_backend_model *rows = calloc(n ? n : 1, sizeof(*rows));
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc), *models = yyjson_mut_arr(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_val *it;
    size_t k = 0;
    yyjson_arr_foreach(list, i, max, it)
    {
        yyjson_mut_arr_append(models, yyjson_val_mut_copy(doc, it));
        const char *name = jstr(it, "name", jstr(it, "model", NULL));
        if (rows && name)
            rows[k++] = (struct qr_backend_model){.id = name, .digest = jstr(it, "digest", "")};
    }
    if (rows) {
        qr_catalog_join_backend(app->catalog, id, true, rows, k);
        add_registry_tags(app, doc, models, rows, k);
    }
    free(rows);
    yyjson_mut_obj_add_val(doc, root, "models", models);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
    yyjson_doc_free(in);
}

static void serve_tags(struct qr_app *app, struct qr_http_req *req)
{
    struct qr_backend *b = app->backend;
    struct tags_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx || (!b->vt->list_models && !qr_backend_can_proxy(b))) {
        free(ctx);
        qr_api_send_error(req, 503, "upstream_unavailable", "no backend lists models");
        return;
    }
    ctx->app = app;
    ctx->req = req;
    qr_http_req_set_close_cb(req, tags_client_gone, ctx);
    /* the client's query string reaches Ollama unchanged, as a proxied request's would */
    const char *query = qr_http_req_query(req);
    char path[TAGS_PATH_MAX];
    int plen = snprintf(path, sizeof(path), "/api/tags%s%s", query && query[0] ? "?" : "",
                        query && query[0] ? query : "");
    if (plen < 0 || (size_t) plen >= sizeof(path)) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        free(ctx);
        qr_api_send_error(req, 414, "uri_too_long", "the /api/tags query string is too long");
        return;
    }
    enum qr_err err = qr_backend_can_proxy(b)
                          ? qr_fetch(b, qr_backend_url(b), path, NULL, TAGS_TIMEOUT_MS,
                                     TAGS_MAX_BODY, ollama_tags_done, ctx)
                          : b->vt->list_models(b, TAGS_TIMEOUT_MS, tags_done, ctx);
    if (err) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        free(ctx);
        qr_api_send_error(req, 502, "upstream_error", "cannot ask the backend for models");
    }
}

/* ---- POST /api/show ---- */

/* A registry model the Runtime answers for itself: a manifest model the Ollama backend does not
 * report (what Ollama reports, Ollama describes best: template, modelfile, license), or any model
 * the registry knows when the backend is not Ollama. */
static const struct qr_reg_model *show_from_registry(struct qr_app *app, const char *name)
{
    const struct qr_reg_model *m = qr_registry_find(app->catalog->registry, name);
    if (!m || !qr_backend_can_proxy(app->backend))
        return m;
    for (size_t i = 0; i < m->n_remotes; i++) {
        if (!strcmp(m->remotes[i].backend, qr_backend_id(app->backend)))
            return NULL;
    }
    return m; /* a manifest model, or one another configured backend reported */
}

/* The Runtime's extension member "quantum_runtime" (added when absent, for a manifest model) gets
 * "capability_states": per key declared, verified, refuted or blocked (api/verified.h); Ollama
 * clients ignore it. */
static enum qr_err show_states(struct qr_app *app, const struct qr_reg_model *m,
                               yyjson_mut_doc *doc, yyjson_mut_val *root)
{
    yyjson_mut_val *q = yyjson_mut_obj_get(root, "quantum_runtime");
    if (!q && m->source == QR_REG_BACKEND)
        return QR_OK; /* only a backend reported it: its answer stays Ollama's shape exactly */
    if (!q && !(q = yyjson_mut_obj_add_obj(doc, root, "quantum_runtime")))
        return QR_ERR_NOMEM;
    return qr_api_capability_states_model(app, NULL, m->m->id, doc, q);
}

static void show_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (err) {
        if (err == QR_ERR_TOO_LARGE)
            qr_api_send_error(req, 413, "request_too_large", "the request body is too large");
        else
            qr_api_send_error(req, 400, "bad_request", "the request body could not be read");
        return;
    }
    struct qr_slice body = qr_http_req_body(req);
    yyjson_doc *in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    yyjson_val *root = yyjson_doc_get_root(in);
    char why[160] = "the request body must be a JSON object";
    if (!yyjson_is_obj(root) || !qr_json_strict_ok(root, why, sizeof why)) {
        qr_api_send_error(req, 400, "bad_request", why);
        yyjson_doc_free(in);
        return;
    }
    const char *name = jstr(root, "model", jstr(root, "name", NULL));
    const struct qr_reg_model *m = name ? show_from_registry(app, name) : NULL;
    if (m) {
        yyjson_mut_doc *doc = show_doc(m);
        yyjson_mut_val *o = yyjson_mut_doc_get_root(doc);
        /* backend=llama.cpp: capabilities judged with the engine's evidence (llamacpp_glue.h) */
        if ((app->llama && qr_api_llamacpp_show(app, m, doc, o)) || show_states(app, m, doc, o))
            qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        else
            qr_api_send_json(req, 200, doc);
        yyjson_mut_doc_free(doc);
    } else if (qr_backend_can_proxy(app->backend)) {
        qr_backend_proxy(app->backend, req, qr_http_req_target(req)); /* re-reads the body */
    } else {
        /* Ollama's own answer for a model it does not have */
        char line[600];
        snprintf(line, sizeof(line), "{\"error\":\"model '%.200s' not found\"}\n",
                 name && !strpbrk(name, "\"\\") ? name : "");
        qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
        qr_http_resp_send(req, in ? 404 : 400, "application/json; charset=utf-8", line,
                          strlen(line));
    }
    yyjson_doc_free(in);
}

static void serve_show(struct qr_app *app, struct qr_http_req *req)
{
    qr_http_req_read_body(req, app->cfg->max_request_bytes, show_body, app);
}

static void serve_translated(struct qr_app *app, struct qr_http_req *req,
                             const struct ollama_route *r)
{
    switch (r->how) {
    case T_CHAT:
    case T_GENERATE:
        if (app->llama) /* keep_alive 0 without input unloads (llamacpp_glue.h) */
            qr_api_llamacpp_ollama_infer(app, req,
                                         r->how == T_CHAT ? QR_OP_CHAT : QR_OP_COMPLETION);
        else
            qr_api_infer(app, req, QR_PROTO_OLLAMA,
                         r->how == T_CHAT ? QR_OP_CHAT : QR_OP_COMPLETION, false);
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
        if (app->llama)
            qr_api_llamacpp_ps(app, req);
        else
            send_small_json(req, "{\"models\":[]}\n");
        return;
    case T_TAGS:
        serve_tags(app, req);
        return;
    case T_SHOW:
        serve_show(app, req);
        return;
    case T_NONE:
        break;
    }
    qr_api_send_error(req, 501, "not_supported_by_backend",
                      "this Ollama route needs an Ollama backend");
}

/* Adoption: an Ollama behind the Runtime gets Ollama requests byte for byte; inference is not
 * planned on this path, but which backend answered is disclosed all the same. */
static void adopt(struct qr_app *app, struct qr_http_req *req)
{
    const char *path = qr_http_req_path(req);
    if (!strcmp(path, "/api/chat") || !strcmp(path, "/api/generate") ||
        !strcmp(path, "/api/embed") || !strcmp(path, "/api/embeddings"))
        qr_http_resp_header(req, "X-Quantum-Backend", qr_backend_id(app->backend));
    qr_backend_proxy(app->backend, req, qr_http_req_target(req)); /* re-reads the body */
}

/* Does the request ask for what the canonical contract does not carry back (token logprobs)?
 * Such a request keeps Ollama's own answer: it is passed through. */
static bool wants_unmodeled(yyjson_val *root)
{
    yyjson_val *lp = yyjson_obj_get(root, "logprobs"), *top = yyjson_obj_get(root, "top_logprobs");
    return (lp && !yyjson_is_null(lp) && !(yyjson_is_bool(lp) && !yyjson_get_bool(lp))) ||
           (top && !yyjson_is_null(top) && !(yyjson_is_int(top) && yyjson_get_sint(top) == 0));
}

/* /api/chat, /api/generate, /api/embed(dings) on a backend that could pass them through run
 * through the canonical pipeline (think sent explicitly, tool calls normalized, the policy's
 * knobs only: docs/POLICY.md "In the request path"). Passed through byte for byte instead: a
 * body without a model name or that cannot be parsed (Ollama answers it), a request for what the
 * contract does not carry back (logprobs), and, with ollama_passthrough, every model that no
 * model policy governs and no other configured backend serves. */
static void adopt_body(struct qr_app *app, struct qr_http_req *req, enum qr_err err, enum qr_op op,
                       bool legacy)
{
    if (err) {
        if (err == QR_ERR_TOO_LARGE)
            qr_api_send_error(req, 413, "request_too_large", "the request body is too large");
        else
            qr_api_send_error(req, 400, "bad_request", "the request body could not be read");
        return;
    }
    struct qr_slice body = qr_http_req_body(req);
    yyjson_doc *in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    yyjson_val *root = yyjson_doc_get_root(in);
    const char *name = jstr(root, "model", NULL);
    bool planned = name && name[0] && !wants_unmodeled(root) &&
                   (!app->cfg->ollama_passthrough || qr_api_infer_planned(app, name));
    yyjson_doc_free(in);
    if (planned)
        qr_api_infer(app, req, QR_PROTO_OLLAMA, op, legacy); /* re-reads the body */
    else
        adopt(app, req);
}

static void adopt_chat_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    adopt_body(arg, req, err, QR_OP_CHAT, false);
}

static void adopt_generate_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    adopt_body(arg, req, err, QR_OP_COMPLETION, false);
}

static void adopt_embed_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    adopt_body(arg, req, err, QR_OP_EMBED, false);
}

static void adopt_embeddings_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    adopt_body(arg, req, err, QR_OP_EMBED, true);
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
    if (r->how == T_TAGS || r->how == T_SHOW) {
        /* model-read routes: answered by the Runtime from the registry, merged with the backend */
        serve_translated(app, req, r);
        return;
    }
    if (qr_backend_can_proxy(app->backend)) {
        if (r->how == T_CHAT || r->how == T_GENERATE || r->how == T_EMBED ||
            r->how == T_EMBEDDINGS) {
            /* a model policy may govern the model, or another backend serve it: decided on the
             * body's model name */
            qr_http_req_read_body(req, app->cfg->max_request_bytes,
                                  r->how == T_CHAT       ? adopt_chat_body
                                  : r->how == T_GENERATE ? adopt_generate_body
                                  : r->how == T_EMBED    ? adopt_embed_body
                                                         : adopt_embeddings_body,
                                  app);
            return;
        }
        adopt(app, req);
        return;
    }
    serve_translated(app, req, r);
}
