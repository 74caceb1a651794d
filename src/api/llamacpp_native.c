/* Native views of backend=llama.cpp: GET /v1/loaded (the adapter's processes: state, pid, port,
 * context, memory estimate, placement, load/expiry times, crashes and the engine's /props
 * evidence; never the per-process API key) and the `engine` / `ledger` members /v1/backends adds
 * to the llama.cpp descriptor (the probed build matched against the upstream ledger's entries;
 * capabilities the descriptor claims that the matched entry has not verified are listed as
 * `unverified`, the descriptor itself is left as it is), with the crash history, the failed
 * models and the engine evidence recorded in the evidence store; and the capabilities of
 * POST /api/show, judged by the manifest, the descriptor, the ledger and the newest engine
 * evidence. docs/API.md "GET /v1/loaded", "GET /v1/backends", "POST /api/show". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "capability/descriptor.h"
#include "core/arena.h"
#include "core/http_server.h"
#include "core/timefmt.h"
#include "policy/ledger.h"
#include "registry/registry.h"
#include "router/router.h"
#include "store/store.h"

/* key: an RFC 3339 time for a positive wall-clock ms, else null. */
static bool add_time(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *key, int64_t ms)
{
    if (ms <= 0)
        return yyjson_mut_obj_add_null(doc, o, key);
    char when[64];
    qr_rfc3339_ms(ms, when, sizeof when);
    return yyjson_mut_obj_add_strcpy(doc, o, key, when);
}

static int64_t sint_of(yyjson_mut_val *o, const char *key)
{
    return yyjson_mut_get_sint(yyjson_mut_obj_get(o, key));
}

/* The members the adapter's loaded JSON lacks: placement, per-slot context, loading, times. */
/* "placement": where the plan applied at start put the model (cpu without a plan). */
static const char *placement_of(yyjson_mut_val *o)
{
    const char *d =
        yyjson_mut_get_str(yyjson_mut_obj_get(yyjson_mut_obj_get(o, "placement_plan"), "decision"));
    return d && !strcmp(d, "hybrid") ? "hybrid" : d && !strcmp(d, "gpu") ? "gpu" : "cpu";
}

static bool decorate(yyjson_mut_doc *doc, yyjson_mut_val *o)
{
    uint64_t ctx = yyjson_mut_get_uint(yyjson_mut_obj_get(o, "ctx"));
    uint64_t parallel = yyjson_mut_get_uint(yyjson_mut_obj_get(o, "parallel"));
    const char *state = yyjson_mut_get_str(yyjson_mut_obj_get(o, "state"));
    bool loading = state && (!strcmp(state, "starting") || !strcmp(state, "loading"));
    int64_t expires = sint_of(o, "expires_at_ms");
    /* llama-server reports no load fraction: /health is 503 until the model is in memory */
    return yyjson_mut_obj_add_uint(doc, o, "ctx_per_slot", parallel ? ctx / parallel : ctx) &&
           yyjson_mut_obj_add_str(doc, o, "placement", placement_of(o)) &&
           yyjson_mut_obj_add_bool(doc, o, "loading", loading) &&
           add_time(doc, o, "loaded_at", sint_of(o, "loaded_at_ms")) &&
           add_time(doc, o, "last_used_at", sint_of(o, "last_used_ms")) &&
           add_time(doc, o, "expires_at", expires) &&
           yyjson_mut_obj_add_str(doc, o, "expiry",
                                  expires < 0    ? "never"
                                  : expires == 0 ? "busy"
                                                 : "idle_ttl");
}

void qr_api_loaded(struct qr_app *app, struct qr_http_req *req)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    bool ok = root != NULL;
    if (ok) {
        yyjson_mut_doc_set_root(doc, root);
        ok = yyjson_mut_obj_add_str(doc, root, "api_version", QR_ROUTE_API_VERSION);
    }
    if (ok && app->backend) /* the default backend's kind, as before several backends */
        ok = yyjson_mut_obj_add_str(doc, root, "backend",
                                    (app->managed ? app->managed : app->backend)->vt->kind);
    else if (ok)
        ok = yyjson_mut_obj_add_null(doc, root, "backend");
    yyjson_mut_val *arr = ok ? yyjson_mut_arr(doc) : NULL;
    ok = arr != NULL;
    if (ok && app->managed && app->llama)
        ok = qr_llamacpp_loaded_json(app->managed, doc, arr) == QR_OK;
    size_t i, max;
    yyjson_mut_val *o;
    if (ok) {
        yyjson_mut_arr_foreach(arr, i, max, o)
        {
            if (!decorate(doc, o)) {
                ok = false;
                break;
            }
        }
    }
    ok = ok && yyjson_mut_obj_add_uint(doc, root, "count", yyjson_mut_arr_size(arr)) &&
         yyjson_mut_obj_add_val(doc, root, "models", arr);
    if (!ok) {
        yyjson_mut_doc_free(doc);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* ---- /v1/backends: engine and ledger ---- */

static enum qr_err backend_history(struct qr_app *app, yyjson_mut_doc *doc, yyjson_mut_val *obj);

static bool entry_lists(const char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i] && !strcmp(list[i], s))
            return true;
    }
    return false;
}

/* The first ledger entry (id order) of kind whose engine versions name the build. */
static const struct qr_ledger_entry *match_entry(const struct qr_ledger *l, const char *kind,
                                                 const char *const *names, size_t n_names)
{
    for (size_t i = 0; l && i < qr_ledger_entry_count(l); i++) {
        const struct qr_ledger_entry *e = qr_ledger_entry_at(l, i);
        if (!e->backend_kind || strcmp(e->backend_kind, kind))
            continue;
        for (size_t k = 0; k < n_names; k++) {
            if (entry_lists(e->engine_versions, e->n_engine_versions, names[k]))
                return e;
        }
    }
    return NULL;
}

enum qr_err qr_api_llamacpp_backend_extra(struct qr_app *app, yyjson_mut_doc *doc,
                                          yyjson_mut_val *obj)
{
    const struct qr_cap_descriptor *d = qr_api_descriptor_for(app, app->managed);
    const struct qr_llama_engine *eng = app->managed ? qr_llamacpp_engine(app->managed) : NULL;
    char build[24] = "";
    const char *names[2];
    size_t n_names = 0;
    if (eng && eng->version[0])
        names[n_names++] = eng->version;
    if (eng && eng->build) {
        snprintf(build, sizeof build, "b%u", (unsigned) eng->build);
        names[n_names++] = build;
    }
    bool ok = true;
    if (eng) {
        yyjson_mut_val *e = yyjson_mut_obj_add_obj(doc, obj, "engine");
        ok = e && yyjson_mut_obj_add_strcpy(doc, e, "path", eng->path) &&
             yyjson_mut_obj_add_str(doc, e, "source", qr_llama_engine_source_str(eng->source)) &&
             yyjson_mut_obj_add_strcpy(doc, e, "version", eng->version) &&
             yyjson_mut_obj_add_uint(doc, e, "build", eng->build) &&
             yyjson_mut_obj_add_strcpy(doc, e, "commit", eng->commit);
        yyjson_mut_val *nv = ok ? yyjson_mut_obj_add_arr(doc, e, "names") : NULL;
        ok = nv != NULL;
        for (size_t i = 0; ok && i < n_names; i++)
            ok = yyjson_mut_arr_add_strcpy(doc, nv, names[i]);
    } else {
        ok = yyjson_mut_obj_add_null(doc, obj, "engine");
    }
    const char *kind = d ? qr_cap_backend_kind_str(d->kind) : "llama.cpp";
    const struct qr_ledger_entry *m =
        match_entry(app->catalog ? app->catalog->ledger : NULL, kind, names, n_names);
    yyjson_mut_val *lg = ok ? yyjson_mut_obj_add_obj(doc, obj, "ledger") : NULL;
    ok = lg != NULL;
    if (ok && m)
        ok = yyjson_mut_obj_add_str(doc, lg, "entry_id", m->id) &&
             yyjson_mut_obj_add_str(doc, lg, "status", qr_ledger_status_str(m->status));
    else if (ok)
        ok = yyjson_mut_obj_add_null(doc, lg, "entry_id") &&
             yyjson_mut_obj_add_str(doc, lg, "status",
                                    qr_ledger_status_str(QR_LEDGER_OBSERVED_UNPINNED)) &&
             yyjson_mut_obj_add_str(doc, lg, "reason",
                                    n_names ? "no ledger entry names this engine build"
                                            : "the engine version is unknown");
    /* claimed (supported/conditional) but not enabled by the matched entry; listed, not changed */
    yyjson_mut_val *unv = ok ? yyjson_mut_obj_add_arr(doc, lg, "unverified") : NULL;
    yyjson_mut_val *broken = unv ? yyjson_mut_obj_add_arr(doc, lg, "broken") : NULL;
    ok = broken != NULL;
    for (int k = 0; ok && d && k < QR_CAP__COUNT; k++) {
        enum qr_cap_state s = d->caps[k];
        if (s != QR_CAP_SUPPORTED && s != QR_CAP_CONDITIONAL)
            continue;
        const char *name = qr_cap_key_name((enum qr_cap_key) k);
        if (m && entry_lists(m->broken_capabilities, m->n_broken, name))
            ok = yyjson_mut_arr_add_str(doc, broken, name);
        else if (!m || !entry_lists(m->enabled_capabilities, m->n_enabled, name))
            ok = yyjson_mut_arr_add_str(doc, unv, name);
    }
    return ok ? backend_history(app, doc, obj) : QR_ERR_NOMEM;
}

/* ---- /v1/backends: crash history, failed models, observed evidence ---- */

#define CRASHES_SHOWN  10u  /* newest crash records listed; "total" counts them all */
#define REASON_SHOWN   512u /* bytes of a crash reason or log line listed */
#define MODELS_SHOWN   64u  /* evidence keys listed */
#define FAILED_ROWS    256u /* loaded processes looked at for FAILED ones */
#define STORE_ARENA    (1u << 20)
#define EVIDENCE_FIRST 16u /* evidence rows of one model looked at for its artifact */

/* At most cap bytes of s (cut on a UTF-8 character boundary) into out (cap + 1 bytes). */
static void cut_utf8(const char *s, char *out, size_t cap)
{
    size_t n = s ? strlen(s) : 0;
    if (n > cap) {
        n = cap;
        while (n && ((unsigned char) s[n] & 0xc0) == 0x80)
            n--;
    }
    if (n)
        memcpy(out, s, n);
    out[n] = '\0';
}

/* The last non-empty line of a log tail, cut like a reason, into out (REASON_SHOWN + 1). */
static void last_line(const char *log, char *out)
{
    out[0] = '\0';
    if (!log)
        return;
    const char *end = log + strlen(log);
    while (end > log && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    const char *start = end;
    while (start > log && start[-1] != '\n')
        start--;
    size_t n = (size_t) (end - start);
    if (n > REASON_SHOWN) {
        n = REASON_SHOWN;
        while (n && ((unsigned char) start[n] & 0xc0) == 0x80)
            n--;
    }
    memcpy(out, start, n);
    out[n] = '\0';
}

static bool add_crash(yyjson_mut_doc *doc, yyjson_mut_val *arr, const struct qr_store_crash *c)
{
    char reason[REASON_SHOWN + 1], line[REASON_SHOWN + 1];
    cut_utf8(c->reason, reason, REASON_SHOWN);
    last_line(c->log_tail, line);
    yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
    return o && add_time(doc, o, "time", c->time_ms) &&
           yyjson_mut_obj_add_strcpy(doc, o, "model", c->model) &&
           yyjson_mut_obj_add_sint(doc, o, "pid", c->pid) &&
           (c->signal ? yyjson_mut_obj_add_null(doc, o, "exit_code")
                      : yyjson_mut_obj_add_int(doc, o, "exit_code", c->exit_code)) &&
           (c->signal ? yyjson_mut_obj_add_int(doc, o, "signal", c->signal)
                      : yyjson_mut_obj_add_null(doc, o, "signal")) &&
           yyjson_mut_obj_add_strcpy(doc, o, "reason", reason) &&
           yyjson_mut_obj_add_strcpy(doc, o, "engine_version", c->engine_version) &&
           yyjson_mut_obj_add_strcpy(doc, o, "log_last_line", line);
}

/* "crashes": {total, recent[]} from the evidence store; total null and "error" without one. */
static bool add_crashes(struct qr_store *st, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *c = yyjson_mut_obj_add_obj(doc, obj, "crashes");
    if (!c)
        return false;
    struct qr_diag d = {{0}};
    struct qr_store_filter f = {.backend_id = "llama.cpp", .limit = CRASHES_SHOWN};
    int64_t total = 0;
    struct qr_arena a;
    qr_arena_init(&a, STORE_ARENA);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    enum qr_err err = st ? qr_store_crash_count(st, &f, &total, &d) : QR_ERR_UNAVAILABLE;
    if (!err)
        err = qr_store_crash_list(st, &f, &a, &rows, &n, &d);
    bool ok;
    if (err) {
        ok = yyjson_mut_obj_add_null(doc, c, "total") && yyjson_mut_obj_add_arr(doc, c, "recent") &&
             yyjson_mut_obj_add_strcpy(doc, c, "error",
                                       st ? d.msg : "the evidence store is unavailable");
    } else {
        yyjson_mut_val *arr = NULL;
        ok = yyjson_mut_obj_add_sint(doc, c, "total", total) &&
             (arr = yyjson_mut_obj_add_arr(doc, c, "recent")) != NULL;
        for (size_t i = 0; ok && i < n; i++)
            ok = add_crash(doc, arr, &rows[i]);
    }
    qr_arena_cleanup(&a);
    return ok;
}

/* "failed_models": the processes whose restarts gave up (refused with model_failed until
 * unloaded), with the reason. */
static bool add_failed(struct qr_app *app, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, obj, "failed_models");
    if (!arr)
        return false;
    if (!app->managed || !app->llama)
        return true;
    struct qr_llamacpp_loaded *rows = calloc(FAILED_ROWS, sizeof *rows);
    if (!rows)
        return false;
    size_t n = qr_llamacpp_loaded_list(app->managed, rows, FAILED_ROWS);
    bool ok = true;
    for (size_t i = 0; ok && i < n && i < FAILED_ROWS; i++) {
        if (rows[i].state != QR_LLAMA_PROC_FAILED)
            continue;
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        ok = o && yyjson_mut_obj_add_strcpy(doc, o, "model", rows[i].model) &&
             yyjson_mut_obj_add_strcpy(doc, o, "reason", rows[i].reason) &&
             yyjson_mut_obj_add_uint(doc, o, "crashes", rows[i].crashes);
    }
    free(rows);
    return ok;
}

/* The facts of one evidence row as an object (the "observed" member). */
static bool add_observed(yyjson_mut_doc *doc, yyjson_mut_val *obj,
                         const struct qr_store_evidence *e)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, obj, "observed");
    return o && yyjson_mut_obj_add_str(doc, o, "source", "engine /props") &&
           add_time(doc, o, "time", e->time_ms) &&
           yyjson_mut_obj_add_sint(doc, o, "observations", e->observations) &&
           yyjson_mut_obj_add_bool(doc, o, "supports_tools", e->supports_tools) &&
           yyjson_mut_obj_add_bool(doc, o, "supports_parallel_tool_calls",
                                   e->supports_parallel_tool_calls) &&
           yyjson_mut_obj_add_bool(doc, o, "supports_system_role", e->supports_system_role) &&
           yyjson_mut_obj_add_bool(doc, o, "vision", e->vision) &&
           yyjson_mut_obj_add_bool(doc, o, "audio", e->audio) &&
           yyjson_mut_obj_add_sint(doc, o, "n_ctx_slot", e->n_ctx_slot) &&
           yyjson_mut_obj_add_strcpy(doc, o, "build_info", e->build_info);
}

/* "models": the newest /props evidence per model, artifact and engine version, newest first. */
static bool add_models(struct qr_store *st, const char *version, yyjson_mut_doc *doc,
                       yyjson_mut_val *obj)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, obj, "models");
    if (!arr)
        return false;
    if (!st)
        return true;
    struct qr_arena a;
    qr_arena_init(&a, STORE_ARENA);
    struct qr_store_evidence *rows = NULL;
    size_t n = 0;
    struct qr_diag d = {{0}};
    struct qr_store_filter f = {.backend_id = "llama.cpp", .limit = MODELS_SHOWN};
    bool ok = true;
    if (qr_store_evidence_latest(st, &f, &a, &rows, &n, &d) == QR_OK) {
        for (size_t i = 0; ok && i < n; i++) {
            yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
            ok = o && yyjson_mut_obj_add_strcpy(doc, o, "model", rows[i].model) &&
                 yyjson_mut_obj_add_strcpy(doc, o, "artifact", rows[i].artifact) &&
                 yyjson_mut_obj_add_strcpy(doc, o, "engine_version", rows[i].engine_version) &&
                 yyjson_mut_obj_add_bool(doc, o, "current_engine",
                                         version && !strcmp(version, rows[i].engine_version)) &&
                 add_observed(doc, o, &rows[i]);
        }
    }
    qr_arena_cleanup(&a);
    return ok;
}

static enum qr_err backend_history(struct qr_app *app, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    struct qr_store *st = qr_api_llamacpp_store(app);
    const struct qr_llama_engine *eng = app->managed ? qr_llamacpp_engine(app->managed) : NULL;
    bool ok = add_crashes(st, doc, obj) && add_failed(app, doc, obj) &&
              add_models(st, eng ? eng->version : NULL, doc, obj);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

/* ---- POST /api/show: capabilities from the manifest, descriptor, ledger and engine ---- */

/* Ollama's capability names and the contract key each stands for. */
static const struct {
    const char *name;
    enum qr_cap_key key;
} SHOW_CAPS[] = {
    {"completion", QR_CAP_INFERENCE_TEXT},  {"tools", QR_CAP_TOOLS_CALLING},
    {"thinking", QR_CAP_REASONING_CONTROL}, {"vision", QR_CAP_VISION},
    {"embedding", QR_CAP_EMBEDDINGS},
};

/* The newest evidence for model on this engine version about the artifact it resolves to now
 * (its key into key, "" when the model has no file); false when there is none. */
static bool find_observed(struct qr_app *app, const char *model, const char *version,
                          struct qr_arena *a, struct qr_store_evidence *out, char *key,
                          size_t key_cap)
{
    struct qr_store *st = qr_api_llamacpp_store(app);
    if (!qr_api_llamacpp_artifact_key(app, model, key, key_cap) || !st || !version)
        return false;
    struct qr_store_filter f = {.backend_id = "llama.cpp",
                                .model = model,
                                .engine_version = version,
                                .limit = EVIDENCE_FIRST};
    struct qr_store_evidence *rows = NULL;
    size_t n = 0;
    struct qr_diag d = {{0}};
    if (qr_store_evidence_latest(st, &f, a, &rows, &n, &d) != QR_OK)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(rows[i].artifact, key)) {
            *out = rows[i];
            return true;
        }
    }
    return false;
}

/* Why one capability is listed or not: {listed, source[, reason]}. */
static bool add_why(yyjson_mut_doc *doc, yyjson_mut_val *ev, const char *name, bool listed,
                    const char *source, const char *reason)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, ev, name);
    return o && yyjson_mut_obj_add_bool(doc, o, "listed", listed) &&
           yyjson_mut_obj_add_strcpy(doc, o, "source", source) &&
           (!reason || yyjson_mut_obj_add_strcpy(doc, o, "reason", reason));
}

/* Decide one manifest capability; *listed says whether it stays. */
static bool judge(yyjson_mut_doc *doc, yyjson_mut_val *ev, size_t k,
                  const struct qr_cap_descriptor *d, const struct qr_ledger_entry *entry,
                  const struct qr_store_evidence *seen, const char *engine_src, bool *listed)
{
    const char *name = SHOW_CAPS[k].name, *key = qr_cap_key_name(SHOW_CAPS[k].key);
    char why[320];
    *listed = false;
    if (d && d->caps[SHOW_CAPS[k].key] == QR_CAP_UNSUPPORTED) {
        snprintf(why, sizeof why, "the llama.cpp adapter's descriptor marks '%s' unsupported", key);
        return add_why(doc, ev, name, false, "descriptor", why);
    }
    if (entry && entry_lists(entry->broken_capabilities, entry->n_broken, key)) {
        snprintf(why, sizeof why, "ledger entry '%s' lists '%s' as broken on this engine build",
                 entry->id, key);
        return add_why(doc, ev, name, false, "ledger", why);
    }
    bool tools = SHOW_CAPS[k].key == QR_CAP_TOOLS_CALLING;
    bool vision = SHOW_CAPS[k].key == QR_CAP_VISION;
    if (seen && tools && !seen->supports_tools)
        return add_why(doc, ev, name, false, engine_src,
                       "the engine reported chat_template_caps.supports_tools false: the model's "
                       "chat template has no tool syntax");
    if (seen && vision && !seen->vision)
        return add_why(doc, ev, name, false, engine_src,
                       "the engine reported no vision input (modalities.vision false)");
    *listed = true;
    return add_why(doc, ev, name, true, seen && (tools || vision) ? engine_src : "manifest", NULL);
}

enum qr_err qr_api_llamacpp_show(struct qr_app *app, const struct qr_reg_model *m,
                                 yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *caps = yyjson_mut_obj_get(obj, "capabilities");
    bool claimed[QR_ARRAY_LEN(SHOW_CAPS)] = {false};
    size_t i, max;
    yyjson_mut_val *v;
    yyjson_mut_arr_foreach(caps, i, max, v)
    {
        for (size_t k = 0; k < QR_ARRAY_LEN(SHOW_CAPS); k++)
            claimed[k] |= yyjson_mut_equals_str(v, SHOW_CAPS[k].name);
    }
    const struct qr_cap_descriptor *d = qr_api_descriptor_for(app, app->managed);
    const struct qr_llama_engine *eng = app->managed ? qr_llamacpp_engine(app->managed) : NULL;
    const char *version = eng && eng->version[0] ? eng->version : NULL;
    char build[24] = "";
    const char *names[2];
    size_t n_names = 0;
    if (version)
        names[n_names++] = version;
    if (eng && eng->build) {
        snprintf(build, sizeof build, "b%u", (unsigned) eng->build);
        names[n_names++] = build;
    }
    const struct qr_ledger_entry *entry =
        match_entry(app->catalog ? app->catalog->ledger : NULL,
                    d ? qr_cap_backend_kind_str(d->kind) : "llama.cpp", names, n_names);
    struct qr_arena a;
    qr_arena_init(&a, STORE_ARENA);
    struct qr_store_evidence seen;
    char key[4096] = "";
    bool have = find_observed(app, m->m->id, version, &a, &seen, key, sizeof key);
    char engine_src[160] = "", when[64] = "";
    if (have) {
        qr_rfc3339_ms(seen.time_ms, when, sizeof when);
        snprintf(engine_src, sizeof engine_src, "engine /props (%s, observed %s)", version, when);
    }

    yyjson_mut_val *q = yyjson_mut_obj_add_obj(doc, obj, "quantum_runtime");
    yyjson_mut_val *ev = NULL;
    bool ok = caps && q && yyjson_mut_obj_add_str(doc, q, "backend", "llama.cpp") &&
              (version ? yyjson_mut_obj_add_strcpy(doc, q, "engine_version", version)
                       : yyjson_mut_obj_add_null(doc, q, "engine_version")) &&
              (key[0] ? yyjson_mut_obj_add_strcpy(doc, q, "artifact", key)
                      : yyjson_mut_obj_add_null(doc, q, "artifact")) &&
              (have ? add_observed(doc, q, &seen) : yyjson_mut_obj_add_null(doc, q, "observed")) &&
              (ev = yyjson_mut_obj_add_obj(doc, q, "evidence")) != NULL;
    if (ok && !have)
        ok = yyjson_mut_obj_add_str(doc, q, "note",
                                    "nothing observed yet for this model on this engine version: "
                                    "the manifest, the adapter's descriptor and the ledger decide");
    if (ok)
        yyjson_mut_arr_clear(caps);
    for (size_t k = 0; ok && k < QR_ARRAY_LEN(SHOW_CAPS); k++) {
        bool listed = false;
        if (!claimed[k])
            continue;
        ok = judge(doc, ev, k, d, entry, have ? &seen : NULL, engine_src, &listed) &&
             (!listed || yyjson_mut_arr_add_str(doc, caps, SHOW_CAPS[k].name));
    }
    qr_arena_cleanup(&a);
    return ok ? QR_OK : QR_ERR_NOMEM;
}
