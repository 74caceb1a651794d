/* The daemon side of backend=llama.cpp: configures the adapter (backend/llamacpp/llamacpp.h) from
 * the configuration table, gives it a model resolver over the catalog's registry (a manifest's
 * llama.cpp GGUF artifact, its draft, its mode from the capabilities), records every engine crash
 * and every valid GET /props evidence in the evidence store (<state_dir>/evidence.db), and answers
 * the Ollama routes that need the adapter's loaded models: GET /api/ps, and the unload form of
 * /api/chat and /api/generate (keep_alive 0 with no messages or an empty prompt).
 * docs/LLAMACPP.md "Daemon mode". */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "api/metrics.h"
#include "api/ollama_codec.h"
#include "backend/llamacpp/llamacpp.h"
#include "build_info.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "host/calibrate.h"
#include "host/cpu.h"
#include "router/router.h"
#include "registry/registry.h"
#include "store/store.h"

#define RESOLVE_SLOTS 4u /* resolved paths stay valid for this many later resolutions */
#define PS_MAX_MODELS 256u

struct resolved {
    char path[PATH_MAX];
    char draft[PATH_MAX];
};

/* models with engine evidence against a capability, kept for the router */
#define MAX_REFUTED 64u

/* The newest /props evidence of one model on one engine version that refutes keys. */
struct refuted_rec {
    char model[256];
    char artifact[PATH_MAX]; /* the artifact key it was observed on */
    char engine[64];
    struct qr_cap_set keys;
    char detail[256];
};

struct qr_llamacpp_glue {
    struct qr_app *app;     /* borrowed */
    struct qr_store *store; /* owned; NULL when the evidence store could not be opened */
    struct resolved slots[RESOLVE_SLOTS];
    unsigned next_slot;
    struct refuted_rec refuted[MAX_REFUTED];
    size_t n_refuted;
    struct qr_route_refuted route[MAX_REFUTED]; /* what the last qr_api_llamacpp_refuted gave */
};

/* ---- the resolver over the registry ---- */

static bool is_llama_gguf(const struct qr_manifest_artifact *a)
{
    if (a->backend)
        return !strcmp(a->backend, "llama.cpp");
    return a->format && !strcmp(a->format, "gguf");
}

static bool is_main_role(const char *role)
{
    return !role || !strcmp(role, "inference") || !strcmp(role, "embedding") ||
           !strcmp(role, "reranking");
}

/* The file an artifact names, into out (PATH_MAX): its URI under models_dir, else the file
 * discovery joined under that URI. False when no readable file exists. */
static bool artifact_file(const struct qr_app *app, const struct qr_reg_model *m,
                          const struct qr_manifest_artifact *a, char *out)
{
    char *path = NULL;
    struct qr_diag d = {{0}};
    if (qr_registry_resolve_uri(app->cfg->models_dir, a->uri, &path, &d) == QR_OK &&
        access(path, R_OK) == 0) {
        snprintf(out, PATH_MAX, "%s", path);
        free(path);
        return true;
    }
    free(path);
    for (size_t i = 0; i < m->n_files; i++) {
        if (m->files[i].uri && !strcmp(m->files[i].uri, a->uri) &&
            access(m->files[i].path, R_OK) == 0) {
            snprintf(out, PATH_MAX, "%s", m->files[i].path);
            return true;
        }
    }
    return false;
}

static uint32_t native_ctx(const struct qr_reg_model *m)
{
    yyjson_val *root = (yyjson_val *) qr_manifest_root(m->m);
    yyjson_val *model = yyjson_obj_get(root, "model");
    yyjson_val *v =
        yyjson_obj_get(yyjson_obj_get(model, "architecture_contract"), "context_length");
    if (!yyjson_is_uint(v))
        v = yyjson_obj_get(model, "context_window");
    uint64_t n = yyjson_is_uint(v) ? yyjson_get_uint(v) : 0;
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t) n;
}

/* m as a llama.cpp model: its main GGUF artifact must be on disk. */
static enum qr_err model_of(struct qr_llamacpp_glue *g, const struct qr_reg_model *m,
                            struct qr_llamacpp_model *out, struct qr_diag *diag)
{
    if (m->source == QR_REG_BACKEND)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no llama.cpp artifact");
    struct resolved *r = &g->slots[g->next_slot++ % RESOLVE_SLOTS];
    const struct qr_manifest_artifact *main_art = NULL;
    bool have_draft = false, missing = false;
    for (size_t i = 0; i < m->m->n_artifacts; i++) {
        const struct qr_manifest_artifact *a = &m->m->artifacts[i];
        if (!is_llama_gguf(a))
            continue;
        if (!main_art && is_main_role(a->role)) {
            main_art = a;
            missing = !artifact_file(g->app, m, a, r->path);
        } else if (!have_draft && a->role && !strcmp(a->role, "draft")) {
            have_draft = artifact_file(g->app, m, a, r->draft);
        }
    }
    if (!main_art)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' has no llama.cpp GGUF artifact",
                           m->m->id);
    if (missing)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND,
                           "the GGUF artifact '%s' of model '%s' is not in models_dir '%s'",
                           main_art->uri, m->m->id, g->app->cfg->models_dir);
    *out = (struct qr_llamacpp_model){
        .id = m->m->id,
        .gguf_path = r->path,
        .draft_path = have_draft ? r->draft : NULL,
        .mode = (m->m->caps & QR_MANIFEST_CAP_EMBEDDINGS)  ? QR_LLAMACPP_EMBED
                : (m->m->caps & QR_MANIFEST_CAP_RERANKING) ? QR_LLAMACPP_RERANK
                                                           : QR_LLAMACPP_CHAT,
        .native_ctx = native_ctx(m),
    };
    return QR_OK;
}

/* The manifest model (not a backend-reported one) with a llama.cpp artifact at uri. */
static const struct qr_reg_model *find_by_uri(const struct qr_registry *reg, const char *uri)
{
    for (size_t i = 0; i < qr_registry_count(reg); i++) {
        const struct qr_reg_model *m = qr_registry_at(reg, i);
        for (size_t k = 0; m->source != QR_REG_BACKEND && k < m->m->n_artifacts; k++) {
            const struct qr_manifest_artifact *a = &m->m->artifacts[k];
            if (is_llama_gguf(a) && is_main_role(a->role) && !strcmp(a->uri, uri))
                return m;
        }
    }
    return NULL;
}

static enum qr_err resolve(void *arg, struct qr_slice name, struct qr_llamacpp_model *out,
                           struct qr_diag *diag)
{
    struct qr_llamacpp_glue *g = arg;
    char key[QR_MANIFEST_MAX_URI + 1];
    if (!name.len || name.len >= sizeof key)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no such model");
    memcpy(key, name.ptr, name.len);
    key[name.len] = '\0';
    const struct qr_registry *reg = g->app->catalog ? g->app->catalog->registry : NULL;
    const struct qr_reg_model *m = reg ? qr_registry_find(reg, key) : NULL;
    /* the router asks a GGUF backend for the artifact by its URI (its served name) */
    if (!m && reg && (!strncmp(key, "models:", 7) || !strncmp(key, "file:", 5)))
        m = find_by_uri(reg, key);
    if (!m)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "the registry has no such model");
    return model_of(g, m, out, diag);
}

static void list(void *arg, void (*emit)(void *ctx, const struct qr_llamacpp_model *m), void *ctx)
{
    struct qr_llamacpp_glue *g = arg;
    const struct qr_registry *reg = g->app->catalog ? g->app->catalog->registry : NULL;
    for (size_t i = 0; reg && i < qr_registry_count(reg); i++) {
        struct qr_llamacpp_model m;
        struct qr_diag d = {{0}};
        if (model_of(g, qr_registry_at(reg, i), &m, &d) == QR_OK)
            emit(ctx, &m);
    }
}

/* ---- crashes into the evidence store ---- */

static void on_crash(void *arg, const struct qr_llamacpp_crash *c)
{
    struct qr_llamacpp_glue *g = arg;
    qr_metrics_engine_crash(g->app->managed ? qr_backend_id(g->app->managed) : "llama.cpp",
                            !c->failed);
    if (!g->store)
        return;
    struct qr_store_crash rec = {
        .backend_id = "llama.cpp",
        .model = c->model,
        .engine_version = c->engine_version,
        .pid = c->pid,
        .exit_code = c->code,
        .signal = c->signaled ? c->sig : 0,
        .reason = c->reason,
        .log_tail = c->log_tail,
    };
    struct qr_diag d = {{0}};
    int64_t id = 0;
    const char *why = d.msg; /* QR_LF_S tests its value for NULL */
    if (qr_store_crash_add(g->store, &rec, &id, &d))
        QR_LOG(QR_LOG_ERROR, "cannot record the engine crash in the evidence store",
               QR_LF_S("model", c->model), QR_LF_S("error", why));
    else
        QR_LOG(QR_LOG_INFO, "engine crash recorded", QR_LF_S("model", c->model),
               QR_LF_N("crash_id", id));
}

/* ---- the engine's /props evidence into the evidence store ---- */

/* The first llama.cpp GGUF artifact of m with a main role; NULL for none. */
static const struct qr_manifest_artifact *main_artifact(const struct qr_reg_model *m)
{
    for (size_t i = 0; m->source != QR_REG_BACKEND && i < m->m->n_artifacts; i++) {
        const struct qr_manifest_artifact *a = &m->m->artifacts[i];
        if (is_llama_gguf(a) && is_main_role(a->role))
            return a;
    }
    return NULL;
}

/* What the evidence is keyed by: the main artifact's discovered digest, else the file's path. */
static void artifact_key(const struct qr_reg_model *m, const char *path, char *out, size_t cap)
{
    const struct qr_manifest_artifact *a = m ? main_artifact(m) : NULL;
    for (size_t i = 0; a && i < m->n_files; i++) {
        if (m->files[i].uri && !strcmp(m->files[i].uri, a->uri) && m->files[i].sha256[0]) {
            snprintf(out, cap, "%s", m->files[i].sha256);
            return;
        }
    }
    snprintf(out, cap, "%s", path ? path : "");
}

bool qr_api_llamacpp_artifact_key(struct qr_app *app, const char *model, char *out, size_t cap)
{
    struct qr_llamacpp_glue *g = app->llama;
    const struct qr_registry *reg = app->catalog ? app->catalog->registry : NULL;
    const struct qr_reg_model *m = reg && model ? qr_registry_find(reg, model) : NULL;
    struct qr_llamacpp_model lm;
    struct qr_diag d = {{0}};
    out[0] = '\0';
    if (!g || !m || model_of(g, m, &lm, &d) != QR_OK)
        return false;
    artifact_key(m, lm.gguf_path, out, cap);
    return true;
}

/* ---- engine evidence for the router ---- */

/* Record (or clear) what one observation refutes: no tool syntax -> tools.calling and
 * tools.streaming; no vision / audio modality -> multimodal.vision / .audio. The newest
 * observation of a model on an engine version replaces the older one (also for another file). */
static void note_refuted(struct qr_llamacpp_glue *g, const char *model, const char *artifact,
                         const char *engine, bool tools, bool vision, bool audio)
{
    struct qr_cap_set keys = QR_CAP_SET_EMPTY;
    char what[160] = "";
    if (!tools) {
        qr_cap_set_add(&keys, QR_CAP_TOOLS_CALLING);
        qr_cap_set_add(&keys, QR_CAP_TOOLS_STREAMING);
        strcat(what, "chat_template_caps.supports_tools false");
    }
    if (!vision) {
        qr_cap_set_add(&keys, QR_CAP_VISION);
        strcat(what, what[0] ? ", modalities.vision false" : "modalities.vision false");
    }
    if (!audio) {
        qr_cap_set_add(&keys, QR_CAP_AUDIO);
        strcat(what, what[0] ? ", modalities.audio false" : "modalities.audio false");
    }
    size_t i = 0;
    while (i < g->n_refuted &&
           (strcmp(g->refuted[i].model, model) || strcmp(g->refuted[i].engine, engine)))
        i++;
    if (qr_cap_set_empty(keys)) {
        if (i < g->n_refuted)
            g->refuted[i] = g->refuted[--g->n_refuted];
        return;
    }
    if (i == g->n_refuted) {
        if (g->n_refuted == MAX_REFUTED)
            return; /* the adapter's own admission still refuses what /props refutes */
        g->n_refuted++;
    }
    struct refuted_rec *r = &g->refuted[i];
    snprintf(r->model, sizeof r->model, "%s", model);
    snprintf(r->artifact, sizeof r->artifact, "%s", artifact);
    snprintf(r->engine, sizeof r->engine, "%s", engine);
    r->keys = keys;
    snprintf(r->detail, sizeof r->detail, "engine /props (%s): %s", engine, what);
}

/* At start: the newest evidence per model, artifact and engine version from the store. */
static void load_refuted(struct qr_llamacpp_glue *g)
{
    if (!g->store)
        return;
    struct qr_arena a;
    qr_arena_init(&a, 4u << 20);
    struct qr_store_evidence *rows = NULL;
    size_t n = 0;
    struct qr_store_filter f = {.backend_id = "llama.cpp"};
    struct qr_diag d = {{0}};
    if (qr_store_evidence_latest(g->store, &f, &a, &rows, &n, &d) == QR_OK) {
        /* newest first: note oldest first so that the newest per (model, engine) stays */
        for (size_t i = n; i-- > 0;)
            note_refuted(g, rows[i].model, rows[i].artifact, rows[i].engine_version,
                         rows[i].supports_tools, rows[i].vision, rows[i].audio);
    }
    qr_arena_cleanup(&a);
}

const struct qr_route_refuted *qr_api_llamacpp_refuted(struct qr_app *app, size_t *n)
{
    struct qr_llamacpp_glue *g = app->llama;
    *n = 0;
    if (!g)
        return NULL;
    const struct qr_registry *reg = app->catalog ? app->catalog->registry : NULL;
    for (size_t i = 0; i < g->n_refuted; i++) {
        const struct refuted_rec *r = &g->refuted[i];
        const struct qr_reg_model *m = reg ? qr_registry_find(reg, r->model) : NULL;
        const struct qr_manifest_artifact *a = m ? main_artifact(m) : NULL;
        char path[PATH_MAX], key[PATH_MAX];
        if (!a || !artifact_file(app, m, a, path))
            continue;
        artifact_key(m, path, key, sizeof key);
        if (strcmp(key, r->artifact))
            continue; /* observed on another file than the one registered now */
        g->route[(*n)++] = (struct qr_route_refuted){
            .backend_id = qr_backend_llamacpp.id,
            .model_id = m->m->id,
            .engine_version = r->engine,
            .keys = r->keys,
            .detail = r->detail,
        };
    }
    return g->route;
}

struct qr_store *qr_api_llamacpp_store(struct qr_app *app)
{
    return app->llama ? app->llama->store : NULL;
}

static void on_evidence(void *arg, const struct qr_llamacpp_observed *o)
{
    struct qr_llamacpp_glue *g = arg;
    const struct qr_registry *reg = g->app->catalog ? g->app->catalog->registry : NULL;
    char key[PATH_MAX];
    artifact_key(reg ? qr_registry_find(reg, o->model) : NULL, o->gguf_path, key, sizeof key);
    const struct qr_llamacpp_props *p = o->props;
    note_refuted(g, o->model, key, o->engine_version ? o->engine_version : "",
                 p->caps[QR_LLAMACPP_TCAP_TOOLS], p->vision, p->audio);
    if (!g->store)
        return;
    /* every observed fact, in the shape /v1/loaded shows it */
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    char *facts = NULL;
    if (root && qr_llamacpp_props_json(doc, root, o->props))
        facts = yyjson_mut_val_write(yyjson_mut_obj_get(root, "engine"), 0, NULL);
    yyjson_mut_doc_free(doc);
    struct qr_store_evidence rec = {
        .backend_id = "llama.cpp",
        .model = o->model,
        .artifact = key,
        .engine_version = o->engine_version ? o->engine_version : "",
        .supports_tools = p->caps[QR_LLAMACPP_TCAP_TOOLS],
        .supports_parallel_tool_calls = p->caps[QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS],
        .supports_system_role = p->caps[QR_LLAMACPP_TCAP_SYSTEM_ROLE],
        .vision = p->vision,
        .audio = p->audio,
        .n_ctx_slot = p->n_ctx_slot,
        .build_info = p->build_info,
        .facts_json = facts ? facts : "{}",
    };
    struct qr_diag d = {{0}};
    const char *why = d.msg; /* QR_LF_S tests its value for NULL */
    if (qr_store_evidence_add(g->store, &rec, NULL, &d))
        QR_LOG(QR_LOG_ERROR, "cannot record the engine evidence in the evidence store",
               QR_LF_S("model", o->model), QR_LF_S("error", why));
    free(facts);
}

static void open_store(struct qr_llamacpp_glue *g, const char *state_dir)
{
    char path[PATH_MAX];
    /* mkdir -p: the catalog creates it too, but only when it is first needed */
    snprintf(path, sizeof path, "%s", state_dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    }
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/%s", state_dir, QR_STORE_FILE);
    struct qr_diag d = {{0}};
    if (qr_store_open(path, NULL, &g->store, NULL, &d)) {
        const char *shown = path, *why = d.msg; /* QR_LF_S tests its value for NULL */
        g->store = NULL;
        QR_LOG(QR_LOG_WARN, "evidence store unavailable: engine crashes are logged only",
               QR_LF_S("path", shown), QR_LF_S("error", why));
    }
}

/* ---- engine discovery: the repository the binary was built in ---- */

static uint64_t default_budget(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    unsigned long long kb = 0;
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
            break;
    }
    if (f)
        fclose(f);
    return (uint64_t) kb * 1024u / 10u * 8u;
}

/* ---- lifecycle ---- */

bool qr_api_llamacpp_selected(const struct qr_config *cfg)
{
    for (size_t i = 0; i < cfg->n_backends; i++) {
        if (!strcmp(cfg->backends[i].kind, "llamacpp"))
            return true;
    }
    return false;
}

enum qr_err qr_api_llamacpp_init(struct qr_app *app, struct qr_diag *diag)
{
    struct qr_llamacpp_glue *g = calloc(1, sizeof *g);
    if (!g)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    g->app = app;
    app->llama = g;
    const struct qr_config *cfg = app->cfg;
    open_store(g, cfg->state_dir);
    load_refuted(g);
    char prefix[PATH_MAX];
    qr_calib_find_prefix(prefix, sizeof prefix);
    /* Threads: the configured count, else the physical cores this process may use (affinity and
     * cgroup quota), never the engine's own guess, which ignores both. Calibration will refine
     * it (docs/LLAMACPP.md "Arguments from the plan"). */
    uint32_t threads = (uint32_t) cfg->llama_threads;
    char threads_why[192] = "configured (llama_threads)";
    if (!threads) {
        struct qr_host_cpu cpu;
        if (qr_host_cpu_discover(NULL, NULL, 0, &cpu, NULL) == QR_OK)
            threads = qr_host_default_threads(&cpu, threads_why, sizeof threads_why);
        /* the newest stored calibration for this host and engine measured better (calibrate.h) */
        uint32_t measured =
            qr_calib_stored_threads(g->store, cfg->llama_server, prefix[0] ? prefix : NULL,
                                    threads_why, sizeof threads_why);
        if (measured)
            threads = measured;
    }
    const char *threads_src = threads_why; /* QR_LF_S tests its value for NULL */
    QR_LOG(QR_LOG_INFO, "llama.cpp engine threads", QR_LF_N("threads", threads),
           QR_LF_S("source", threads_src));
    struct qr_llamacpp_options o = {
        .engine_path = cfg->llama_server[0] ? cfg->llama_server : NULL,
        .prefix = prefix[0] ? prefix : NULL,
        /* the adapter reads 0 as its default: "0 = unload when idle" is the shortest TTL */
        .idle_ttl_ms = cfg->keep_alive_ms ? (int64_t) cfg->keep_alive_ms : 1,
        .memory_budget = cfg->memory_budget ? cfg->memory_budget : default_budget(),
        .ctx = (uint32_t) cfg->llama_ctx,
        .parallel = (uint32_t) cfg->llama_parallel,
        .threads = threads,
        .resolve = resolve,
        .list = list,
        .resolver_arg = g,
        .on_crash = on_crash,
        .crash_arg = g,
        .on_evidence = on_evidence,
        .evidence_arg = g,
    };
    qr_placement_verified_from_ledger(app->catalog->ledger, &o.verified);
    (void) qr_placement_prefer_parse(cfg->placement_prefer, &o.prefer); /* validated by config */
    o.allow_acceleration = cfg->placement_acceleration;
    o.allow_nvme_cold_tier = cfg->placement_nvme_cold_tier;
    struct qr_diag d = {{0}};
    const char *why = d.msg; /* QR_LF_S tests its value for NULL */
    if (qr_llamacpp_configure(app->managed, &o, &d))
        /* not fatal: the daemon serves, /readyz and /v1/backends say why the engine is missing */
        QR_LOG(QR_LOG_ERROR, "llama.cpp backend unavailable", QR_LF_S("error", why));
    return QR_OK;
}

void qr_api_llamacpp_cleanup(struct qr_app *app)
{
    struct qr_llamacpp_glue *g = app->llama;
    if (!g)
        return;
    qr_store_close(g->store);
    free(g);
    app->llama = NULL;
}

/* ---- Ollama routes ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *jstr(yyjson_val *o, const char *k1, const char *k2, const char *def)
{
    yyjson_val *v = yyjson_obj_get(o, k1);
    if (k2)
        v = yyjson_obj_get(v, k2);
    const char *s = yyjson_get_str(v);
    return s ? s : def;
}

static void ps_entry(struct qr_app *app, yyjson_mut_doc *doc, yyjson_mut_val *arr,
                     const struct qr_llamacpp_loaded *r)
{
    const struct qr_reg_model *m = qr_registry_find(app->catalog->registry, r->model);
    yyjson_val *root = m ? (yyjson_val *) qr_manifest_root(m->m) : NULL;
    yyjson_mut_val *e = yyjson_mut_arr_add_obj(doc, arr);
    yyjson_mut_obj_add_strcpy(doc, e, "name", r->model);
    yyjson_mut_obj_add_strcpy(doc, e, "model", r->model);
    yyjson_mut_obj_add_uint(doc, e, "size", r->bytes);
    const char *digest = m && m->n_files ? m->files[0].sha256 : "";
    yyjson_mut_obj_add_strcpy(doc, e, "digest",
                              !strncmp(digest, "sha256:", 7) ? digest + 7 : digest);
    yyjson_mut_val *d = yyjson_mut_obj_add_obj(doc, e, "details");
    const char *family = jstr(root, "model", "architecture", "");
    yyjson_mut_obj_add_str(doc, d, "parent_model", "");
    yyjson_mut_obj_add_str(doc, d, "format", "gguf");
    yyjson_mut_obj_add_strcpy(doc, d, "family", family);
    yyjson_mut_arr_add_strcpy(doc, yyjson_mut_obj_add_arr(doc, d, "families"), family);
    yyjson_mut_obj_add_strcpy(doc, d, "parameter_size", jstr(root, "model", "parameter_class", ""));
    yyjson_mut_obj_add_strcpy(doc, d, "quantization_level",
                              jstr(root, "model", "quantization", ""));
    char when[64];
    /* never (-1): Ollama shows a far future; busy (0): now */
    int64_t at = r->expires_at_ms < 0    ? INT64_C(253402300799000)
                 : r->expires_at_ms == 0 ? now_ms()
                                         : r->expires_at_ms;
    qr_rfc3339_ms(at, when, sizeof when);
    yyjson_mut_obj_add_strcpy(doc, e, "expires_at", when);
    yyjson_mut_obj_add_uint(doc, e, "size_vram", 0);
    yyjson_mut_obj_add_uint(doc, e, "context_length", r->parallel ? r->ctx / r->parallel : r->ctx);
    yyjson_mut_obj_add_str(doc, e, "state", qr_llama_proc_state_str(r->state));
}

void qr_api_llamacpp_ps(struct qr_app *app, struct qr_http_req *req)
{
    struct qr_llamacpp_loaded *rows = calloc(PS_MAX_MODELS, sizeof *rows);
    if (!rows) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    size_t n = qr_llamacpp_loaded_list(app->managed, rows, PS_MAX_MODELS);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, root, "models");
    for (size_t i = 0; i < n && i < PS_MAX_MODELS; i++)
        ps_entry(app, doc, arr, &rows[i]);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
    free(rows);
}

/* Nothing to generate from: no (or empty) messages, no (or empty) prompt. For generate, a
 * non-string prompt is the decoder's to refuse, not a load. */
static bool is_empty(yyjson_val *root, enum qr_op op)
{
    if (op == QR_OP_CHAT) {
        yyjson_val *msgs = yyjson_obj_get(root, "messages");
        return !msgs || yyjson_is_null(msgs) || (yyjson_is_arr(msgs) && !yyjson_arr_size(msgs));
    }
    yyjson_val *pv = yyjson_obj_get(root, "prompt");
    if (pv && !yyjson_is_null(pv) && !yyjson_is_str(pv))
        return false;
    const char *p = yyjson_get_str(pv);
    return (!p || !p[0]) && !yyjson_obj_get(root, "images") && !yyjson_obj_get(root, "suffix");
}

/* keep_alive 0 (number or duration string) and nothing to generate from. */
static bool is_unload(yyjson_val *root, enum qr_op op)
{
    yyjson_val *ka = yyjson_obj_get(root, "keep_alive");
    bool zero = (yyjson_is_num(ka) && yyjson_get_num(ka) == 0) ||
                (yyjson_is_str(ka) &&
                 (!strcmp(yyjson_get_str(ka), "0") || !strcmp(yyjson_get_str(ka), "0s")));
    return zero && is_empty(root, op);
}

static void send_ollama_line(struct qr_http_req *req, int status, yyjson_mut_doc *doc)
{
    size_t len = 0;
    char *json = yyjson_mut_write(doc, 0, &len);
    if (!json) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    char *line = realloc(json, len + 2);
    if (!line) {
        free(json);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    line[len++] = '\n';
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_send(req, status, "application/json; charset=utf-8", line, len);
    free(line);
}

/* Ollama's lifecycle line: {"model","created_at","message"|"response","done":true,
 * "done_reason"}, plain JSON even when streaming was asked for (as Ollama answers it). */
static void send_lifecycle(struct qr_http_req *req, const char *model, enum qr_op op,
                           const char *reason)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = doc ? yyjson_mut_obj(doc) : NULL;
    if (!o) {
        yyjson_mut_doc_free(doc);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    yyjson_mut_doc_set_root(doc, o);
    char when[64];
    qr_rfc3339_ms(now_ms(), when, sizeof when);
    yyjson_mut_obj_add_strcpy(doc, o, "model", model);
    yyjson_mut_obj_add_strcpy(doc, o, "created_at", when);
    if (op == QR_OP_CHAT) {
        yyjson_mut_val *msg = yyjson_mut_obj_add_obj(doc, o, "message");
        yyjson_mut_obj_add_str(doc, msg, "role", "assistant");
        yyjson_mut_obj_add_str(doc, msg, "content", "");
    } else {
        yyjson_mut_obj_add_str(doc, o, "response", "");
    }
    yyjson_mut_obj_add_bool(doc, o, "done", true);
    yyjson_mut_obj_add_str(doc, o, "done_reason", reason);
    send_ollama_line(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

static void send_error_line(struct qr_http_req *req, int status, const char *message)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = doc ? yyjson_mut_obj(doc) : NULL;
    if (o) {
        yyjson_mut_doc_set_root(doc, o);
        yyjson_mut_obj_add_strcpy(doc, o, "error", message);
        send_ollama_line(req, status, doc);
    } else {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
    }
    yyjson_mut_doc_free(doc);
}

/* ---- load: an empty /api/generate or /api/chat loads the model and answers "load" ---- */

struct load_wait {
    struct qr_http_req *req;
    struct qr_job *job;
    enum qr_op op;
    struct qr_arena arena; /* the decoded request the job borrows */
    struct qr_request r;
    char model[512]; /* as the client named it */
};

static void load_wait_free(struct load_wait *w)
{
    qr_arena_cleanup(&w->arena);
    free(w);
}

static void load_client_gone(struct qr_http_req *req, void *arg)
{
    struct load_wait *w = arg;
    QR_LOG(QR_LOG_INFO, "client went away while its model loaded", QR_LF_S("model", w->model));
    qr_job_cancel(w->job); /* the process goes on loading; only this waiter is forgotten */
    load_wait_free(w);
}

static enum qr_err on_load_event(void *arg, const struct qr_event *ev)
{
    struct load_wait *w = arg;
    if (ev->type != QR_EV_DONE && ev->type != QR_EV_ERROR)
        return QR_OK;
    qr_http_req_set_close_cb(w->req, NULL, NULL);
    if (ev->type == QR_EV_DONE) {
        send_lifecycle(w->req, w->model, w->op, "load");
    } else {
        char msg[1024];
        snprintf(msg, sizeof msg, "%.*s", (int) ev->message.len, ev->message.ptr);
        send_error_line(w->req, ev->status ? ev->status : 502, msg);
    }
    load_wait_free(w); /* the job frees itself after its final event */
    return QR_OK;
}

/* The body is decoded as any chat/generate request (so keep_alive and every other field are
 * checked the same way), then only loaded. */
static void load_model(struct qr_app *app, struct qr_http_req *req, const char *model,
                       enum qr_op op)
{
    struct load_wait *w = calloc(1, sizeof *w);
    if (!w) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    w->req = req;
    w->op = op;
    snprintf(w->model, sizeof w->model, "%s", model);
    qr_arena_init(&w->arena, app->cfg->max_request_bytes * 4 + 65536);
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    struct qr_api_error err = {0};
    if (qr_ollama_decode(op, false, qr_http_req_body(req), &lim, &w->arena, &w->r, &err) ||
        qr_llamacpp_load(app->managed, &w->r, on_load_event, w, &w->job, &err)) {
        send_error_line(req, err.status ? err.status : 500, err.message);
        load_wait_free(w);
        return;
    }
    qr_http_req_set_close_cb(req, load_client_gone, w);
}

static void unload_body(struct qr_app *app, struct qr_http_req *req, enum qr_err err, enum qr_op op)
{
    struct qr_slice body = err ? (struct qr_slice){0} : qr_http_req_body(req);
    yyjson_doc *in = body.len ? yyjson_read(body.ptr, body.len, 0) : NULL;
    yyjson_val *root = yyjson_doc_get_root(in);
    const char *model = yyjson_get_str(yyjson_obj_get(root, "model"));
    if (err || !yyjson_is_obj(root) || !model || !model[0] || !is_empty(root, op)) {
        yyjson_doc_free(in);
        qr_api_infer(app, req, QR_PROTO_OLLAMA, op, false); /* re-reads the body */
        return;
    }
    if (!is_unload(root, op)) {
        load_model(app, req, model, op); /* model points into in */
        yyjson_doc_free(in);
        return;
    }
    struct qr_llamacpp_model m;
    struct qr_diag d = {{0}};
    if (resolve(app->llama, (struct qr_slice){model, strlen(model)}, &m, &d)) {
        char msg[600];
        snprintf(msg, sizeof msg, "model '%.400s' not found", model);
        send_error_line(req, 404, msg);
    } else {
        bool deferred = false;
        (void) qr_llamacpp_unload(app->managed, model, &deferred, &d); /* not loaded: fine */
        QR_LOG(QR_LOG_INFO, "model unloaded on request (keep_alive 0)", QR_LF_S("model", m.id),
               QR_LF_B("deferred", deferred));
        send_lifecycle(req, model, op, "unload");
    }
    yyjson_doc_free(in);
}

/* one callback per op: nothing is allocated for a client that may leave before its body is read */
static void chat_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    unload_body(arg, req, err, QR_OP_CHAT);
}

static void generate_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    unload_body(arg, req, err, QR_OP_COMPLETION);
}

void qr_api_llamacpp_ollama_infer(struct qr_app *app, struct qr_http_req *req, enum qr_op op)
{
    qr_http_req_read_body(req, app->cfg->max_request_bytes,
                          op == QR_OP_CHAT ? chat_body : generate_body, app);
}
