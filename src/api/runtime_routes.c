/* Runtime-native registry, router and policy endpoints (v1alpha1, the predecessor's shapes and
 * error codes): the configured backend as a validated descriptor (/v1/backends), a routing plan
 * with reasons and no execution (/v1/route), the model policies, the upstream ledger, the
 * deployment profiles, and an admission decision over the host facts this process can read
 * cheaply (/v1/admission). Bodies are decoded strictly: unknown members are 400. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "api/verified.h"
#include "backend/ollama/ollama.h"
#include "backend/ollama/show.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "backend/openai/openai.h"
#include "capability/descriptor.h"
#include "core/http_server.h"
#include "core/json_strict.h"
#include "core/log.h"
#include "policy/admission.h"
#include "router/router.h"

#define NATIVE_BODY_MAX (64u * 1024u) /* /v1/route and /v1/admission bodies */
#define ROUTE_MAX_CAPS  64u           /* capability names in one /v1/route body */

/* ---- the backend descriptor ---- */

/* b's descriptor as its adapter describes it, validated; NULL when invalid (logged). */
static struct qr_cap_descriptor *describe(struct qr_backend *b)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *obj = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, obj);
    qr_backend_describe(b, doc, obj);
    size_t len = 0;
    char *json = yyjson_mut_write(doc, 0, &len);
    yyjson_mut_doc_free(doc);
    struct qr_cap_descriptor *d = malloc(sizeof(*d));
    struct qr_diag diag = {{0}};
    if (!json || !d || qr_cap_descriptor_parse(json, len, &diag, d)) {
        QR_LOG(QR_LOG_ERROR, "the backend's descriptor is invalid; routing does not consider it",
               QR_LF_S("backend", qr_backend_id(b)), QR_LF_S("error", diag.msg));
        free(d);
        d = NULL;
    }
    free(json);
    return d;
}

void qr_api_descriptor_init(struct qr_app *app)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        free(app->backends[i].desc);
        app->backends[i].desc = describe(app->backends[i].b);
    }
}

/* An openai backend's descriptor follows its dialect (e.g. mlx-lm's structured_output
 * unsupported): once `auto` detection replaced the profile, it is described again, in place so
 * the pointers handed out stay valid; kept as it was when the new one does not validate. */
static void follow_dialect(struct qr_app_backend *ab, size_t i)
{
    static unsigned seen[QR_BACKENDS_MAX];
    if (ab->b->vt != &qr_backend_openai || i >= QR_BACKENDS_MAX)
        return;
    unsigned serial = qr_openai_dialect_serial(ab->b);
    if (serial == seen[i])
        return;
    seen[i] = serial;
    struct qr_cap_descriptor *fresh = describe(ab->b);
    if (fresh && ab->desc) {
        *ab->desc = *fresh;
    } else if (fresh) {
        ab->desc = fresh;
        fresh = NULL;
    }
    free(fresh);
}

static const struct qr_cap_descriptor *descriptor_at(struct qr_app *app, size_t i)
{
    struct qr_app_backend *ab = &app->backends[i];
    follow_dialect(ab, i);
    if (!ab->desc)
        return NULL;
    static const enum qr_cap_backend_state map[] = {
        [QR_BACKEND_UNKNOWN] = QR_CAP_BACKEND_UNKNOWN,
        [QR_BACKEND_READY] = QR_CAP_BACKEND_READY,
        [QR_BACKEND_UNAVAILABLE] = QR_CAP_BACKEND_UNAVAILABLE,
        [QR_BACKEND_DISABLED] = QR_CAP_BACKEND_DISABLED,
    };
    if ((unsigned) ab->b->state < QR_ARRAY_LEN(map))
        ab->desc->state = map[ab->b->state];
    return ab->desc;
}

const struct qr_cap_descriptor *qr_api_descriptor_for(struct qr_app *app,
                                                      const struct qr_backend *b)
{
    for (size_t i = 0; b && i < app->n_backends; i++) {
        if (app->backends[i].b == b)
            return descriptor_at(app, i);
    }
    return NULL;
}

const struct qr_cap_descriptor *qr_api_descriptor(struct qr_app *app)
{
    return app->n_backends ? descriptor_at(app, 0) : NULL;
}

struct qr_backend *qr_api_backend_find(struct qr_app *app, const char *id)
{
    for (size_t i = 0; id && i < app->n_backends; i++) {
        if (!strcmp(qr_backend_id(app->backends[i].b), id))
            return app->backends[i].b;
    }
    return NULL;
}

struct qr_backend *qr_api_backend_for_name(struct qr_app *app, const char *name)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        const char *id = qr_backend_id(app->backends[i].b);
        const char *r;
        for (size_t j = 0; (r = qr_catalog_reporter(app->catalog, name, j)); j++) {
            if (!strcmp(r, id))
                return app->backends[i].b;
        }
    }
    return app->backend;
}

/* ---- backend-reported models join the registry ---- */

static void refresh_done(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                         size_t n, const struct qr_diag *diag, void *arg)
{
    struct qr_app *app = arg;
    if (err) {
        if (err != QR_ERR_CANCELLED)
            QR_LOG(QR_LOG_INFO, "backend models not listed yet",
                   QR_LF_S("backend", qr_backend_id(b)),
                   QR_LF_S("detail", diag ? diag->msg : qr_err_str(err)));
        return;
    }
    if (app->catalog)
        qr_catalog_join_backend(app->catalog, qr_backend_id(b), b->vt == &qr_backend_ollama, m, n);
}

void qr_api_refresh_backend_models(struct qr_app *app)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        struct qr_backend *b = app->backends[i].b;
        if (b->vt->list_models)
            (void) b->vt->list_models(b, 5000, refresh_done, app);
    }
}

/* ---- helpers ---- */

static yyjson_mut_doc *new_doc(yyjson_mut_val **root)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, *root);
    return doc;
}

static void send_doc(struct qr_http_req *req, yyjson_mut_doc *doc)
{
    if (!doc) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* Read a native JSON body (at most NATIVE_BODY_MAX) and call next, or answer the read error. */
bool qr_api_body_ok(struct qr_http_req *req, enum qr_err err)
{
    if (err == QR_ERR_TOO_LARGE) {
        qr_api_send_error(req, 413, "request_too_large", "the request body is larger than 64 KiB");
        return false;
    }
    if (err) {
        qr_api_send_error(req, 400, "bad_request", "the request body could not be read");
        return false;
    }
    return true;
}

static size_t body_cap(const struct qr_app *app)
{
    return app->cfg->max_request_bytes < NATIVE_BODY_MAX ? (size_t) app->cfg->max_request_bytes
                                                         : NATIVE_BODY_MAX;
}

/* ---- GET /v1/backends ---- */

/* "parallelism": a multi-node deployment's declared layout (configuration metadata). */
static void add_parallelism(yyjson_mut_doc *doc, yyjson_mut_val *bo,
                            const struct qr_backend_spec *s)
{
    const struct qr_backend_parallelism *p = s ? &s->parallelism : NULL;
    if (!p || !(p->tensor_parallel_size || p->pipeline_parallel_size || p->data_parallel_size ||
                p->nodes || p->expert_parallel))
        return;
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, bo, "parallelism");
    if (p->tensor_parallel_size)
        yyjson_mut_obj_add_uint(doc, o, "tensor_parallel_size", p->tensor_parallel_size);
    if (p->pipeline_parallel_size)
        yyjson_mut_obj_add_uint(doc, o, "pipeline_parallel_size", p->pipeline_parallel_size);
    if (p->data_parallel_size)
        yyjson_mut_obj_add_uint(doc, o, "data_parallel_size", p->data_parallel_size);
    yyjson_mut_obj_add_bool(doc, o, "expert_parallel", p->expert_parallel);
    if (p->nodes)
        yyjson_mut_obj_add_uint(doc, o, "nodes", p->nodes);
}

static void route_backend(struct qr_app *app, size_t i, struct qr_route_backend *rb);

/* An external engine as the router knows it (route_backend: the version its readiness probe
 * read, the ledger project), "engine": {"version","names","project"}, so a conformance report
 * names the version its evidence was taken on; nothing while the version is unknown. */
static void add_external_engine(struct qr_app *app, size_t i, yyjson_mut_doc *doc,
                                yyjson_mut_val *bo)
{
    struct qr_route_backend rb;
    route_backend(app, i, &rb);
    if (!rb.n_engine_versions)
        return;
    yyjson_mut_val *e = yyjson_mut_obj_add_obj(doc, bo, "engine");
    yyjson_mut_obj_add_strcpy(doc, e, "version", rb.engine_versions[0]);
    yyjson_mut_val *names = yyjson_mut_obj_add_arr(doc, e, "names");
    for (size_t k = 0; k < rb.n_engine_versions; k++)
        yyjson_mut_arr_add_strcpy(doc, names, rb.engine_versions[k]);
    if (rb.project)
        yyjson_mut_obj_add_strcpy(doc, e, "project", rb.project);
    else
        yyjson_mut_obj_add_null(doc, e, "project");
}

void qr_api_backends(struct qr_app *app, struct qr_http_req *req)
{
    for (size_t i = 0; i < app->n_backends; i++) {
        if (!descriptor_at(app, i)) {
            char msg[200];
            snprintf(msg, sizeof(msg), "the descriptor of backend '%s' does not validate",
                     qr_backend_id(app->backends[i].b));
            qr_api_send_error(req, 500, "invalid_backend_descriptor", msg);
            return;
        }
    }
    yyjson_mut_val *root;
    yyjson_mut_doc *doc = new_doc(&root);
    yyjson_mut_obj_add_str(doc, root, "api_version", QR_ROUTE_API_VERSION);
    yyjson_mut_obj_add_str(doc, root, "contract_version", QR_CAP_CONTRACT);
    yyjson_mut_obj_add_uint(doc, root, "count", app->n_backends);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, root, "backends");
    for (size_t i = 0; i < app->n_backends; i++) {
        struct qr_backend *b = app->backends[i].b;
        yyjson_mut_val *bo = yyjson_mut_arr_add_obj(doc, arr);
        if (!bo || qr_cap_descriptor_add(descriptor_at(app, i), doc, bo) ||
            (b == app->managed && qr_api_llamacpp_backend_extra(app, doc, bo))) {
            yyjson_mut_doc_free(doc);
            qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
            return;
        }
        yyjson_mut_obj_add_bool(doc, bo, "default", i == 0);
        /* per key: declared, verified or refuted by a stored conformance run, blocked (verified.h)
         */
        if (qr_api_capability_states_backend(app, i, doc, bo)) {
            yyjson_mut_doc_free(doc);
            qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
            return;
        }
        if (b->vt == &qr_backend_openai) /* live: what was probed and chosen, replicas */
            qr_openai_describe_dialect(b, doc, bo);
        if (b->vt == &qr_backend_openai || b->vt == &qr_backend_ollama)
            add_external_engine(app, i, doc, bo);
        add_parallelism(doc, bo, b->env.spec);
        /* admission (backend.h): requests running or waiting at the engine, and the bound */
        yyjson_mut_val *q = yyjson_mut_obj_add_obj(doc, bo, "queue");
        yyjson_mut_obj_add_uint(doc, q, "depth", b->admitted);
        yyjson_mut_obj_add_uint(doc, q, "max", qr_backend_max_queue(b));
    }
    yyjson_mut_val *all = yyjson_mut_obj_add_obj(doc, root, "requests");
    yyjson_mut_obj_add_uint(doc, all, "admitted", qr_backend_admitted_total());
    yyjson_mut_obj_add_uint(doc, all, "max", app->cfg->max_requests);
    send_doc(req, doc);
}

/* ---- POST /v1/route ---- */

/* {"model": "<name>", "capabilities": ["<key>", ...], "profile": "<id>"}: nothing else. "model"
 * may be omitted when a profile is named (its model.target is then the model). */
static enum qr_err parse_route(yyjson_val *root, const char **model, const char **profile,
                               struct qr_slice *names, size_t *n, struct qr_diag *diag)
{
    *model = NULL;
    *profile = NULL;
    *n = 0;
    if (!yyjson_is_obj(root))
        return qr_diag_set(diag, QR_ERR_INVALID, "the body must be a JSON object");
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (!strcmp(key, "model")) {
            if (!yyjson_is_str(v))
                return qr_diag_set(diag, QR_ERR_INVALID, "'model' must be a string");
            *model = yyjson_get_str(v);
        } else if (!strcmp(key, "profile")) {
            if (!yyjson_is_str(v))
                return qr_diag_set(diag, QR_ERR_INVALID, "'profile' must be a string");
            *profile = yyjson_get_str(v);
        } else if (!strcmp(key, "capabilities")) {
            if (!yyjson_is_arr(v) && !yyjson_is_null(v))
                return qr_diag_set(diag, QR_ERR_INVALID, "'capabilities' must be an array");
            if (yyjson_arr_size(v) > ROUTE_MAX_CAPS)
                return qr_diag_set(diag, QR_ERR_INVALID, "'capabilities' has more than %u names",
                                   ROUTE_MAX_CAPS);
            size_t j, jmax;
            yyjson_val *it;
            yyjson_arr_foreach(v, j, jmax, it)
            {
                if (!yyjson_is_str(it))
                    return qr_diag_set(diag, QR_ERR_INVALID, "'capabilities[%zu]' must be a string",
                                       j);
                names[(*n)++] = (struct qr_slice){yyjson_get_str(it), yyjson_get_len(it)};
            }
        } else {
            return qr_diag_set(diag, QR_ERR_INVALID, "unknown field '%s'", key);
        }
    }
    if (*profile && !(*profile)[strspn(*profile, " \t")])
        return qr_diag_set(diag, QR_ERR_INVALID, "'profile' must not be empty");
    if ((!*model || !(*model)[strspn(*model, " \t")]) && !*profile)
        return qr_diag_set(diag, QR_ERR_INVALID, "'model' is required");
    return QR_OK;
}

/* Backend i as the router sees it, with its current state. One event loop, and a plan is
 * rendered before the next one is made, so static storage is enough for what the plan borrows. */
static void route_backend(struct qr_app *app, size_t i, struct qr_route_backend *rb)
{
    static char builds[QR_BACKENDS_MAX][24], versions[QR_BACKENDS_MAX][64];
    static const char *names[QR_BACKENDS_MAX][2];
    struct qr_backend *b = app->backends[i].b;
    memset(rb, 0, sizeof(*rb));
    rb->desc = descriptor_at(app, i);
    rb->healthy = b->state != QR_BACKEND_UNAVAILABLE;
    /* a managed engine's build, by every name the ledger may use ("0.7.0", "b11669"), so the
     * ledger's version-specific blocks apply to it */
    if (b->vt == &qr_backend_llamacpp) {
        const struct qr_llama_engine *eng = qr_llamacpp_engine(b);
        size_t n = 0;
        if (eng && eng->version[0])
            names[i][n++] = eng->version;
        if (eng && eng->build) {
            snprintf(builds[i], sizeof builds[i], "b%u", (unsigned) eng->build);
            names[i][n++] = builds[i];
        }
        rb->engine_versions = names[i];
        rb->n_engine_versions = n;
        rb->project = "llama.cpp / ggml"; /* the one engine this kind runs, as the ledger spells */
    } else if (b->vt == &qr_backend_ollama) {
        /* the daemon's /api/version from the last readiness probe ("0.12.6"): the ledger's
         * Ollama blocks are version ranges */
        snprintf(versions[i], sizeof versions[i], "%s", qr_ollama_engine_version(b));
        names[i][0] = versions[i];
        rb->engine_versions = names[i];
        rb->n_engine_versions = versions[i][0] ? 1 : 0;
        rb->project = "Ollama";
    } else if (b->vt == &qr_backend_openai) {
        /* the kind fronts several engines: the project is the dialect's (its data file's
         * ledger_project), the version what the dialect probe read (vLLM's GET /version), so
         * a block for one engine or version does not hit another (NULL/none: unknown) */
        snprintf(versions[i], sizeof versions[i], "%s", qr_openai_engine_version(b));
        names[i][0] = versions[i];
        rb->engine_versions = names[i];
        rb->n_engine_versions = versions[i][0] ? 1 : 0;
        rb->project = qr_openai_ledger_project(b);
    }
}

/* What Ollama's own /api/show says a described model cannot do, as engine evidence the router
 * weighs like llama.cpp's /props (a failed conformance claim): a request needing it is planned
 * on another backend or refused before Ollama is asked. Static storage, as route_backend's. */
#define SHOW_REFUTED_MAX 1024u

struct show_refuted {
    struct qr_app *app;
    const char *backend_id;
    const char *version;
    struct qr_route_refuted *out;
    size_t n, cap;
};

static void show_refuted_one(void *arg, const char *model, const struct qr_ollama_show *show)
{
    static char details[SHOW_REFUTED_MAX][160];
    struct show_refuted *s = arg;
    if (s->n >= s->cap)
        return;
    struct qr_catalog_model cm;
    qr_catalog_model_find(s->app->catalog, model, &cm);
    if (cm.known == QR_KNOWN_NONE)
        return;
    static const struct {
        uint32_t cap;
        const char *name;
        enum qr_cap_key keys[3];
        size_t n;
    } rules[] = {
        {QR_OLLAMA_CAP_COMPLETION, "completion", {QR_CAP_INFERENCE_TEXT}, 1},
        {QR_OLLAMA_CAP_TOOLS,
         "tools",
         {QR_CAP_TOOLS_CALLING, QR_CAP_TOOLS_STREAMING, QR_CAP_STREAM_TOOL_ARGS},
         3},
        {QR_OLLAMA_CAP_VISION, "vision", {QR_CAP_VISION}, 1},
        {QR_OLLAMA_CAP_THINKING,
         "thinking",
         {QR_CAP_REASONING_CONTROL, QR_CAP_STREAM_REASONING},
         2},
    };
    struct qr_cap_set keys = QR_CAP_SET_EMPTY;
    char lacks[80] = "";
    size_t used = 0;
    for (size_t i = 0; i < QR_ARRAY_LEN(rules); i++) {
        if (show->caps & rules[i].cap)
            continue;
        for (size_t k = 0; k < rules[i].n; k++)
            qr_cap_set_add(&keys, rules[i].keys[k]);
        used += (size_t) snprintf(lacks + used, used < sizeof lacks ? sizeof lacks - used : 0,
                                  "%s'%s'", used ? ", " : "", rules[i].name);
    }
    if (qr_cap_set_empty(keys))
        return;
    char *detail = details[s->n];
    snprintf(detail, sizeof details[0], "ollama /api/show (%.20s): capabilities lack %.100s",
             s->version, lacks);
    s->out[s->n++] = (struct qr_route_refuted){.backend_id = s->backend_id,
                                               .model_id = cm.canonical_id,
                                               .engine_version = s->version,
                                               .keys = keys,
                                               .detail = detail};
}

void qr_api_route_env(struct qr_app *app, struct qr_route_backend *rb, struct qr_router_env *env)
{
    memset(env, 0, sizeof(*env));
    size_t n = 0;
    for (size_t i = 0; i < app->n_backends; i++) {
        route_backend(app, i, &rb[n]);
        n += rb[n].desc != NULL; /* an invalid descriptor is never routed to */
    }
    env->registry = app->catalog->registry;
    env->backends = rb;
    env->n_backends = n;
    env->policies = app->catalog->policies;
    env->ledger = app->catalog->ledger;
    /* operator-declared until host discovery derives it; "" = unknown (only "*" policies match) */
    const char *hw = app->cfg->hardware_class;
    env->hardware_class = hw && hw[0] ? hw : NULL;
    env->opts.experimental_gate = app->cfg->policy_experimental;
    /* what the engines themselves reported they cannot do: llama.cpp /props, Ollama /api/show */
    /* the context-override guard: what stored A/B runs verified or refused (guard_glue.c) */
    env->verified = qr_api_guard_verified(&env->n_verified);
    size_t n_guard = 0;
    const struct qr_route_refuted *guard = qr_api_guard_refuted(&n_guard);
    /* stored conformance runs: keys verified and refuted (verified.c), re-read when changed */
    qr_api_verified_refresh(app);
    size_t n_conf_ok = 0, n_conf_bad = 0;
    const struct qr_route_verified *conf_ok = qr_api_verified_records(&n_conf_ok);
    const struct qr_route_refuted *conf_bad = qr_api_verified_refuted(&n_conf_bad);
    if (n_conf_ok) {
        static struct qr_route_verified all_ok[QR_ROUTE_MAX_VERIFIED];
        size_t k = 0;
        for (size_t i = 0; i < env->n_verified && k < QR_ROUTE_MAX_VERIFIED; i++)
            all_ok[k++] = env->verified[i];
        for (size_t i = 0; i < n_conf_ok && k < QR_ROUTE_MAX_VERIFIED; i++)
            all_ok[k++] = conf_ok[i];
        env->verified = all_ok;
        env->n_verified = k;
    }
    static struct qr_route_refuted all[QR_ROUTE_MAX_REFUTED];
    size_t n_llama = 0;
    const struct qr_route_refuted *llama =
        app->llama ? qr_api_llamacpp_refuted(app, &n_llama) : NULL;
    struct show_refuted s = {.app = app, .out = all, .cap = SHOW_REFUTED_MAX};
    for (size_t i = 0; i < app->n_backends; i++) {
        struct qr_backend *b = app->backends[i].b;
        if (b->vt != &qr_backend_ollama || !qr_ollama_engine_version(b)[0])
            continue; /* without its version the evidence cannot be tied to an engine */
        s.backend_id = qr_backend_id(b);
        s.version = qr_ollama_engine_version(b);
        qr_ollama_described_each(b, show_refuted_one, &s);
    }
    if (!s.n && !n_guard && !n_conf_bad) {
        env->refuted = llama;
        env->n_refuted = n_llama;
        return;
    }
    for (size_t i = 0; i < n_llama && s.n < QR_ROUTE_MAX_REFUTED; i++)
        all[s.n++] = llama[i];
    for (size_t i = 0; i < n_guard && s.n < QR_ROUTE_MAX_REFUTED; i++)
        all[s.n++] = guard[i];
    for (size_t i = 0; i < n_conf_bad && s.n < QR_ROUTE_MAX_REFUTED; i++)
        all[s.n++] = conf_bad[i];
    env->refuted = all;
    env->n_refuted = s.n;
}

/* Send a rendered route document; refusals get the Runtime error shape's request_id. */
static void send_route_doc(struct qr_http_req *req, const struct qr_route_plan *p)
{
    yyjson_mut_doc *doc = qr_route_render(p);
    if (!doc) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    yyjson_mut_val *err = yyjson_mut_obj_get(yyjson_mut_doc_get_root(doc), "error");
    if (err)
        yyjson_mut_obj_add_strcpy(doc, err, "request_id", qr_http_req_id(req));
    qr_api_send_json(req, p->status == QR_ROUTE_OK ? 200 : qr_route_status_http(p->status), doc);
    yyjson_mut_doc_free(doc);
}

static void route_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (!qr_api_body_ok(req, err))
        return;
    struct qr_slice body = qr_http_req_body(req);
    yyjson_doc *in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    struct qr_diag diag = {{0}};
    const char *model = NULL, *pname = NULL;
    struct qr_slice names[ROUTE_MAX_CAPS];
    size_t n = 0;
    char why[128] = "the body is not valid JSON";
    if (!in || !qr_json_strict_ok(yyjson_doc_get_root(in), why, sizeof why) ||
        parse_route(yyjson_doc_get_root(in), &model, &pname, names, &n, &diag)) {
        char msg[sizeof(diag.msg) + 40];
        snprintf(msg, sizeof(msg), "invalid route request: %s", why[0] ? why : diag.msg);
        qr_api_send_error(req, 400, "invalid_route_request", msg);
        yyjson_doc_free(in);
        return;
    }
    /* a deployment profile: its architecture class is required and its target is the model when
     * the body names none */
    const struct qr_profile *profile = NULL;
    if (pname) {
        profile = qr_profile_set_find(app->catalog->profiles, pname);
        if (!profile) {
            char msg[400];
            snprintf(msg, sizeof(msg), "deployment profile '%.300s' does not exist", pname);
            qr_api_send_error(req, 404, "deployment_profile_not_found", msg);
            yyjson_doc_free(in);
            return;
        }
        if (!model || !model[strspn(model, " \t")]) {
            if (!profile->target) {
                char msg[400];
                snprintf(msg, sizeof(msg),
                         "invalid route request: 'model' is required: deployment profile "
                         "'%.300s' has no model.target",
                         profile->id);
                qr_api_send_error(req, 400, "invalid_route_request", msg);
                yyjson_doc_free(in);
                return;
            }
            model = profile->target;
        }
    }
    /* the identifier is trimmed, as the predecessor did */
    char name[512];
    model += strspn(model, " \t");
    size_t mlen = strlen(model);
    while (mlen && (model[mlen - 1] == ' ' || model[mlen - 1] == '\t'))
        mlen--;
    snprintf(name, sizeof(name), "%.*s", (int) mlen, model);
    model = name;
    struct qr_route_query q = {.model = model};
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, model, &cm);
    if (cm.known == QR_KNOWN_NONE) {
        char msg[400];
        snprintf(msg, sizeof(msg), "model '%.300s' is not in the registry", model);
        qr_api_send_error(req, 404, "model_not_found", msg);
        yyjson_doc_free(in);
        return;
    }
    if (qr_cap_set_parse(names, n, &diag, &q.required)) {
        /* a name that is no capability key can never be satisfied (fail closed) */
        char msg[sizeof(diag.msg) + 300];
        snprintf(msg, sizeof(msg), "no compatible backend for model '%.200s': %s", model, diag.msg);
        qr_api_send_error(req, 422, "no_compatible_backend", msg);
        yyjson_doc_free(in);
        return;
    }
    struct qr_route_backend rb[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rb, &env);
    env.opts.profile = profile;
    struct qr_route_plan plan;
    err = qr_router_plan(&env, &q, &plan, &diag);
    if (err == QR_ERR_NOMEM || err == QR_ERR_TOO_LARGE)
        qr_api_send_error(req, 500, "route_failed", diag.msg[0] ? diag.msg : qr_err_str(err));
    else
        send_route_doc(req, &plan);
    qr_route_plan_cleanup(&plan);
    yyjson_doc_free(in);
}

void qr_api_route(struct qr_app *app, struct qr_http_req *req)
{
    qr_http_req_read_body(req, body_cap(app), route_body, app);
}

/* ---- GET /v1/model-policies, /v1/upstreams, /v1/deployment-profiles ---- */

void qr_api_model_policies(struct qr_app *app, struct qr_http_req *req)
{
    send_doc(req, qr_policy_set_render(app->catalog->policies));
}

void qr_api_upstreams(struct qr_app *app, struct qr_http_req *req)
{
    if (!app->catalog->ledger) {
        qr_api_send_error(req, 500, "ledger_unavailable",
                          "the upstream ledger could not be loaded");
        return;
    }
    send_doc(req, qr_ledger_render(app->catalog->ledger));
}

void qr_api_deployment_profiles(struct qr_app *app, struct qr_http_req *req)
{
    send_doc(req, qr_profile_set_render(app->catalog->profiles));
}

/* ---- POST /v1/admission ---- */

/* What this process can read cheaply now: CPUs it may run on, MemTotal. Physical cores, ECC and
 * accelerators need host discovery (a later stage) and stay unknown: never guessed. */
static void host_facts(struct qr_host_facts *h)
{
    memset(h, 0, sizeof(*h));
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        h->logical_allowed_known = true;
        h->logical_cpus_allowed = (uint32_t) CPU_COUNT(&set);
    } else {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        h->logical_allowed_known = n > 0;
        h->logical_cpus_allowed = n > 0 ? (uint32_t) n : 0;
    }
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long kib;
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
            h->memory_known = true;
            h->memory_total_bytes = (uint64_t) kib * 1024u;
            break;
        }
    }
    if (f)
        fclose(f);
    h->ecc = QR_ECC_UNKNOWN;
}

static void admission_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (!qr_api_body_ok(req, err))
        return;
    struct qr_slice body = qr_http_req_body(req);
    struct qr_admission_request ar;
    struct qr_diag diag = {{0}};
    if (qr_admission_request_parse(body.ptr ? body.ptr : "", body.len, &ar, &diag)) {
        qr_api_send_error(req, 400, "invalid_admission_request", diag.msg);
        return;
    }
    char msg[400];
    const struct qr_profile *profile = qr_profile_set_find(app->catalog->profiles, ar.profile);
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, ar.model, &cm);
    if (!profile) {
        snprintf(msg, sizeof(msg), "deployment profile '%.300s' does not exist",
                 ar.profile ? ar.profile : "");
        qr_api_send_error(req, 404, "deployment_profile_not_found", msg);
    } else if (cm.known == QR_KNOWN_NONE) {
        snprintf(msg, sizeof(msg), "model '%.300s' is not in the registry",
                 ar.model ? ar.model : "");
        qr_api_send_error(req, 404, "model_not_found", msg);
    } else {
        struct qr_host_facts host;
        host_facts(&host);
        struct qr_admission_model model = {.canonical_id = cm.canonical_id,
                                           .architecture_class = cm.architecture_class};
        struct qr_admission_result res;
        if (qr_admission_evaluate(profile, &model, &host, &ar.evidence, &res, &diag))
            qr_api_send_error(req, 400, "admission_failed", diag.msg);
        else
            send_doc(req, qr_admission_render(&res, &host));
    }
    qr_admission_request_cleanup(&ar);
}

void qr_api_admission(struct qr_app *app, struct qr_http_req *req)
{
    qr_http_req_read_body(req, body_cap(app), admission_body, app);
}
