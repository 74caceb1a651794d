/* Native views of backend=llama.cpp: GET /v1/loaded (the adapter's processes: state, pid, port,
 * context, memory estimate, placement, load/expiry times, crashes and the engine's /props
 * evidence; never the per-process API key) and the `engine` / `ledger` members /v1/backends adds
 * to the llama.cpp descriptor (the probed build matched against the upstream ledger's entries;
 * capabilities the descriptor claims that the matched entry has not verified are listed as
 * `unverified`, the descriptor itself is left as it is). docs/API.md "GET /v1/loaded". */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "capability/descriptor.h"
#include "core/http_server.h"
#include "policy/ledger.h"
#include "router/router.h"

static void rfc3339(int64_t ms, char *out, size_t cap)
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03dZ", base, (int) (ms % 1000));
}

/* key: an RFC 3339 time for a positive wall-clock ms, else null. */
static bool add_time(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *key, int64_t ms)
{
    if (ms <= 0)
        return yyjson_mut_obj_add_null(doc, o, key);
    char when[64];
    rfc3339(ms, when, sizeof when);
    return yyjson_mut_obj_add_strcpy(doc, o, key, when);
}

static int64_t sint_of(yyjson_mut_val *o, const char *key)
{
    return yyjson_mut_get_sint(yyjson_mut_obj_get(o, key));
}

/* The members the adapter's loaded JSON lacks: placement, per-slot context, loading, times. */
static bool decorate(yyjson_mut_doc *doc, yyjson_mut_val *o)
{
    uint64_t ctx = yyjson_mut_get_uint(yyjson_mut_obj_get(o, "ctx"));
    uint64_t parallel = yyjson_mut_get_uint(yyjson_mut_obj_get(o, "parallel"));
    const char *state = yyjson_mut_get_str(yyjson_mut_obj_get(o, "state"));
    bool loading = state && (!strcmp(state, "starting") || !strcmp(state, "loading"));
    int64_t expires = sint_of(o, "expires_at_ms");
    /* llama-server reports no load fraction: /health is 503 until the model is in memory */
    return yyjson_mut_obj_add_uint(doc, o, "ctx_per_slot", parallel ? ctx / parallel : ctx) &&
           yyjson_mut_obj_add_str(doc, o, "placement", "cpu") &&
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
    if (ok && app->backend)
        ok = yyjson_mut_obj_add_str(doc, root, "backend", app->backend->vt->kind);
    else if (ok)
        ok = yyjson_mut_obj_add_null(doc, root, "backend");
    yyjson_mut_val *arr = ok ? yyjson_mut_arr(doc) : NULL;
    ok = arr != NULL;
    if (ok && app->backend && qr_api_llamacpp_selected(app->cfg) && app->llama)
        ok = qr_llamacpp_loaded_json(app->backend, doc, arr) == QR_OK;
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
    const struct qr_cap_descriptor *d = qr_api_descriptor(app);
    const struct qr_llama_engine *eng = app->backend ? qr_llamacpp_engine(app->backend) : NULL;
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
    return ok ? QR_OK : QR_ERR_NOMEM;
}
