/* Conformance evidence for the router and the API (verified.h). `quantum-runtime conformance`
 * stores each run in the evidence store with its JSON report; here the newest run per backend,
 * canonical model, engine version and hardware class is read back and turned into what the router
 * weighs -- keys verified (a passing case verified them and no failing case refuted them) and keys
 * refuted (a failing case) -- and into the per-key capability states the model and backend
 * listings show next to what manifests and descriptors merely declare, and what the ledger
 * blocks. The store is local SQLite read on the event loop: reads are bounded (the newest
 * QR_VERIFIED_MAX_RECORDS rows) and happen only when the file changed, at most once a second. */
#include "api/verified.h"

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
#include "backend/backend.h"
#include "core/arena.h"
#include "core/log.h"
#include "registry/registry.h"
#include "router/router.h"
#include "store/store.h"

/* ---- one report ---- */

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

enum qr_err qr_verified_report_parse(const char *json, size_t len, struct qr_verified_report *out,
                                     struct qr_diag *diag)
{
    memset(out, 0, sizeof(*out));
    yyjson_doc *doc = json ? yyjson_read(json, len, 0) : NULL;
    yyjson_val *cases = yyjson_obj_get(yyjson_doc_get_root(doc), "cases");
    enum qr_err err = QR_OK;
    struct qr_cap_set pass = QR_CAP_SET_EMPTY;
    if (!doc) {
        err = qr_diag_set(diag, QR_ERR_INVALID, "the report is not JSON");
        goto done;
    }
    if (!yyjson_is_arr(cases)) {
        err = qr_diag_set(diag, QR_ERR_INVALID, "the report has no 'cases' array");
        goto done;
    }
    if (yyjson_arr_size(cases) > QR_VERIFIED_MAX_CASES) {
        err = qr_diag_set(diag, QR_ERR_INVALID, "the report has %zu cases, more than %u",
                          yyjson_arr_size(cases), QR_VERIFIED_MAX_CASES);
        goto done;
    }
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(cases, i, max, c)
    {
        const char *id = yyjson_get_str(yyjson_obj_get(c, "id"));
        const char *status = yyjson_get_str(yyjson_obj_get(c, "status"));
        if (!id || !status) {
            err =
                qr_diag_set(diag, QR_ERR_INVALID, "cases[%zu]: 'id' and 'status' are required", i);
            goto done;
        }
        bool passed = !strcmp(status, "pass"), failed = !strcmp(status, "fail");
        if (!passed && !failed)
            continue; /* skipped: evidence of nothing */
        size_t j, jmax;
        yyjson_val *k;
        yyjson_arr_foreach(yyjson_obj_get(c, "verifies"), j, jmax, k)
        {
            enum qr_cap_key key =
                qr_cap_key_parse((struct qr_slice){yyjson_get_str(k), yyjson_get_len(k)});
            if (!yyjson_is_str(k) || key == QR_CAP_NOT_A_KEY)
                continue;
            if (passed) {
                qr_cap_set_add(&pass, key);
            } else if (!qr_cap_set_has(out->refuted, key)) {
                qr_cap_set_add(&out->refuted, key);
                copy_str(out->failed[key].id, sizeof out->failed[key].id, id);
                copy_str(out->failed[key].reason, sizeof out->failed[key].reason,
                         yyjson_get_str(yyjson_obj_get(c, "reason")));
            }
        }
    }
    for (int k = 0; k < QR_CAP__COUNT; k++)
        if (qr_cap_set_has(pass, (enum qr_cap_key) k) &&
            !qr_cap_set_has(out->refuted, (enum qr_cap_key) k))
            qr_cap_set_add(&out->verified, (enum qr_cap_key) k);
done:
    if (err) /* a report that does not read says nothing, not the cases before the bad one */
        memset(out, 0, sizeof(*out));
    yyjson_doc_free(doc);
    return err;
}

/* ---- the records of the last refresh ---- */

struct vrec {
    int64_t report;  /* store id */
    int64_t time_ms; /* when it was stored */
    char at[24];     /* time_ms as RFC 3339, seconds */
    char backend[QR_BACKEND_ID_MAX + 1];
    char model[QR_MANIFEST_MAX_ID + 1]; /* canonical id when the registry resolves it */
    char version[64];
    char hw[129]; /* "" = unknown */
    struct qr_verified_report r;
    char detail[128]; /* "conformance report N (T)" */
};

struct file_sig {
    long long db_mtime_s, db_mtime_ns, db_size;
    long long wal_mtime_s, wal_mtime_ns, wal_size;
};

static struct vrec g_recs[QR_VERIFIED_MAX_RECORDS];
static size_t g_n;
static struct qr_route_verified g_ok[QR_VERIFIED_MAX_RECORDS];
static size_t g_n_ok;
static struct qr_route_refuted g_bad[QR_VERIFIED_MAX_REFUTED];
static char g_bad_detail[QR_VERIFIED_MAX_REFUTED][512];
static char g_bad_case[QR_VERIFIED_MAX_REFUTED][64]; /* the failing case of g_bad[i] */
static size_t g_n_bad;
static bool g_loaded;
static unsigned long g_generation; /* the catalog's generation last read with */
static uint64_t g_checked_ms;      /* monotonic: the last look at the file */
static struct file_sig g_sig;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

static void rfc3339_s(int64_t ms, char *out, size_t cap)
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *cfg_hw(const struct qr_app *app)
{
    return app->cfg->hardware_class ? app->cfg->hardware_class : "";
}

static void file_sig(const struct qr_app *app, struct file_sig *s)
{
    memset(s, 0, sizeof(*s));
    char path[PATH_MAX];
    struct stat st;
    if (!app->cfg->state_dir || snprintf(path, sizeof path, "%s/%s-wal", app->cfg->state_dir,
                                         QR_STORE_FILE) >= (int) sizeof path)
        return;
    if (stat(path, &st) == 0)
        *s = (struct file_sig){.wal_mtime_s = (long long) st.st_mtim.tv_sec,
                               .wal_mtime_ns = (long long) st.st_mtim.tv_nsec,
                               .wal_size = (long long) st.st_size};
    path[strlen(path) - 4] = '\0'; /* drop "-wal" */
    if (stat(path, &st) == 0) {
        s->db_mtime_s = (long long) st.st_mtim.tv_sec;
        s->db_mtime_ns = (long long) st.st_mtim.tv_nsec;
        s->db_size = (long long) st.st_size;
    }
}

/* The router records of g_recs[i]: one verified record, one refuted record per failing case. */
static void add_router_records(size_t i)
{
    struct vrec *v = &g_recs[i];
    if (!qr_cap_set_empty(v->r.verified))
        g_ok[g_n_ok++] = (struct qr_route_verified){.backend_id = v->backend,
                                                    .model_id = v->model,
                                                    .engine_version = v->version,
                                                    .hardware_class = v->hw,
                                                    .keys = v->r.verified,
                                                    .detail = v->detail};
    size_t first = g_n_bad;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (!qr_cap_set_has(v->r.refuted, (enum qr_cap_key) k))
            continue;
        const struct qr_verified_case *fc = &v->r.failed[k];
        size_t j = first;
        while (j < g_n_bad && strcmp(g_bad_case[j], fc->id) != 0)
            j++;
        if (j < g_n_bad) { /* the same failing case refuted another key */
            qr_cap_set_add(&g_bad[j].keys, (enum qr_cap_key) k);
            continue;
        }
        if (g_n_bad >= QR_VERIFIED_MAX_REFUTED)
            break;
        copy_str(g_bad_case[g_n_bad], sizeof g_bad_case[0], fc->id);
        snprintf(g_bad_detail[g_n_bad], sizeof g_bad_detail[0], "%s: %s failed: %s", v->detail,
                 fc->id, fc->reason);
        struct qr_cap_set keys = QR_CAP_SET_EMPTY;
        qr_cap_set_add(&keys, (enum qr_cap_key) k);
        g_bad[g_n_bad] = (struct qr_route_refuted){.backend_id = v->backend,
                                                   .model_id = v->model,
                                                   .engine_version = v->version,
                                                   .keys = keys,
                                                   .detail = g_bad_detail[g_n_bad]};
        g_n_bad++;
    }
}

/* Keep row when it is about this host class and a configured backend, and is the newest for its
 * (backend, model, engine version). */
static void add_row(struct qr_app *app, const struct qr_store_conformance *row)
{
    if (g_n >= QR_VERIFIED_MAX_RECORDS ||
        strcmp(row->hardware_class ? row->hardware_class : "", cfg_hw(app)) != 0)
        return;
    if (!row->backend_id || !qr_api_backend_find(app, row->backend_id) || !row->engine_version ||
        !row->engine_version[0] || !row->model)
        return; /* evidence that cannot be tied to a running engine */
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, row->model, &cm);
    const char *model = cm.canonical_id ? cm.canonical_id : row->model;
    for (size_t i = 0; i < g_n; i++) {
        if (!strcmp(g_recs[i].backend, row->backend_id) && !strcmp(g_recs[i].model, model) &&
            !strcmp(g_recs[i].version, row->engine_version))
            return; /* a newer record decided (rows come newest first) */
    }
    struct vrec *v = &g_recs[g_n];
    memset(v, 0, sizeof(*v));
    struct qr_diag d = {{0}};
    if (qr_verified_report_parse(row->report_json, row->report_json ? strlen(row->report_json) : 0,
                                 &v->r, &d) != QR_OK) {
        QR_LOG(QR_LOG_WARN, "conformance record skipped: its report does not read",
               QR_LF_N("report", row->id), QR_LF_S("error", d.msg));
        return;
    }
    v->report = row->id;
    v->time_ms = row->time_ms;
    rfc3339_s(row->time_ms, v->at, sizeof v->at);
    copy_str(v->backend, sizeof v->backend, row->backend_id);
    copy_str(v->model, sizeof v->model, model);
    copy_str(v->version, sizeof v->version, row->engine_version);
    copy_str(v->hw, sizeof v->hw, row->hardware_class);
    char at[sizeof v->at];
    memcpy(at, v->at, sizeof at);
    snprintf(v->detail, sizeof v->detail, "conformance report %lld (%s)", (long long) v->report,
             at);
    add_router_records(g_n++);
}

/* The evidence store opened for this read (a missing file is not created); NULL when absent or
 * when it does not open (logged: the previous records stay). */
static struct qr_store *open_store(const struct qr_app *app, bool *failed)
{
    char path[PATH_MAX];
    *failed = false;
    if (!app->cfg->state_dir ||
        snprintf(path, sizeof path, "%s/%s", app->cfg->state_dir, QR_STORE_FILE) >=
            (int) sizeof path ||
        access(path, R_OK) != 0)
        return NULL;
    struct qr_store *s = NULL;
    struct qr_store_opts so = {.busy_timeout_ms = 500};
    struct qr_diag d = {{0}};
    if (qr_store_open(path, &so, &s, NULL, &d) != QR_OK) {
        const char *shown = path; /* QR_LF_S tests its value for NULL */
        QR_LOG(QR_LOG_WARN, "conformance records not read: the evidence store does not open",
               QR_LF_S("path", shown), QR_LF_S("error", d.msg));
        *failed = true;
        return NULL;
    }
    return s;
}

/* Read the records again; false when the store could not be read (the previous ones stay). */
static bool load(struct qr_app *app)
{
    /* The daemon's own connection when it has one (backend=llama.cpp): a second connection in
     * the same process would be opened with a plain open()/close() of the file (the store's
     * header check), and a close() drops every POSIX lock the process holds on it -- the other
     * connection's included (SQLite's "corrupt by close" hazard; seen here as a corrupt page). */
    bool failed = false;
    struct qr_store *shared = app->llama ? qr_api_llamacpp_store(app) : NULL;
    struct qr_store *own = shared ? NULL : open_store(app, &failed);
    struct qr_store *st = shared ? shared : own;
    if (failed)
        return false;
    struct qr_arena a;
    qr_arena_init(&a, QR_VERIFIED_ARENA);
    struct qr_store_filter f = {.limit = QR_VERIFIED_MAX_RECORDS};
    struct qr_store_conformance *rows = NULL;
    size_t n = 0;
    struct qr_diag d = {{0}};
    if (st && qr_store_conformance_list(st, &f, &a, &rows, &n, &d) != QR_OK) {
        QR_LOG(QR_LOG_WARN, "conformance records not read", QR_LF_S("error", d.msg));
        qr_arena_cleanup(&a);
        qr_store_close(own);
        return false;
    }
    g_n = g_n_ok = g_n_bad = 0;
    for (size_t i = 0; i < n; i++)
        add_row(app, &rows[i]);
    qr_arena_cleanup(&a);
    qr_store_close(own);
    QR_LOG(QR_LOG_INFO, "conformance evidence read", QR_LF_N("rows", n), QR_LF_N("decided", g_n),
           QR_LF_N("verified_records", g_n_ok), QR_LF_N("refuted_records", g_n_bad),
           QR_LF_S("hardware_class", cfg_hw(app)));
    return true;
}

void qr_api_verified_refresh(struct qr_app *app)
{
    if (!app->catalog)
        return;
    uint64_t now = mono_ms();
    bool due = !g_loaded || app->catalog->generation != g_generation;
    if (!due && now - g_checked_ms < QR_VERIFIED_RECHECK_MS)
        return;
    g_checked_ms = now;
    struct file_sig s;
    file_sig(app, &s);
    if (!due && !memcmp(&s, &g_sig, sizeof s))
        return;
    bool ok = load(app);
    g_generation = app->catalog->generation;
    g_loaded = true;
    /* a failed read is tried again at the next look (a second later), not at every request */
    if (ok)
        g_sig = s;
    else
        memset(&g_sig, 0xff, sizeof g_sig); /* no file has this signature */
}

const struct qr_route_verified *qr_api_verified_records(size_t *n)
{
    *n = g_n_ok;
    return g_ok;
}

const struct qr_route_refuted *qr_api_verified_refuted(size_t *n)
{
    *n = g_n_bad;
    return g_bad;
}

/* ---- capability states ---- */

/* Manifest capability bits and the key each claims. */
static const struct {
    unsigned bit;
    enum qr_cap_key key;
} MANIFEST_KEYS[] = {
    {QR_MANIFEST_CAP_AUDIO, QR_CAP_AUDIO},
    {QR_MANIFEST_CAP_EMBEDDINGS, QR_CAP_EMBEDDINGS},
    {QR_MANIFEST_CAP_REASONING_CONTROL, QR_CAP_REASONING_CONTROL},
    {QR_MANIFEST_CAP_RERANKING, QR_CAP_RERANKING},
    {QR_MANIFEST_CAP_STRUCTURED_OUTPUT, QR_CAP_STRUCTURED_OUTPUT},
    {QR_MANIFEST_CAP_TEXT, QR_CAP_INFERENCE_TEXT},
    {QR_MANIFEST_CAP_THINKING, QR_CAP_REASONING_CONTROL},
    {QR_MANIFEST_CAP_TOOL_STREAMING, QR_CAP_TOOLS_STREAMING},
    {QR_MANIFEST_CAP_TOOLS, QR_CAP_TOOLS_CALLING},
    {QR_MANIFEST_CAP_VISION, QR_CAP_VISION},
};

/* The router's view of backend b (engine versions, project, descriptor) in rb, or NULL. */
static const struct qr_route_backend *route_view(const struct qr_router_env *env,
                                                 const struct qr_backend *b)
{
    for (size_t i = 0; b && i < env->n_backends; i++)
        if (!strcmp(env->backends[i].desc->id, qr_backend_id(b)))
            return &env->backends[i];
    return NULL;
}

static bool runs_version(const struct qr_route_backend *rb, const char *v)
{
    for (size_t i = 0; rb && i < rb->n_engine_versions; i++)
        if (rb->engine_versions[i] && !strcmp(rb->engine_versions[i], v))
            return true;
    return false;
}

/* The decided record about (backend, model) on a version rb runs, newest first; model NULL = the
 * i-th such record of any model. */
static const struct vrec *find_rec(const struct qr_route_backend *rb, const char *model,
                                   size_t *iter)
{
    for (size_t i = *iter; rb && i < g_n; i++) {
        const struct vrec *v = &g_recs[i];
        if (!strcmp(v->backend, rb->desc->id) && (!model || !strcmp(v->model, model)) &&
            runs_version(rb, v->version)) {
            *iter = i + 1;
            return v;
        }
    }
    *iter = g_n;
    return NULL;
}

/* The first ledger hit on key for rb (model facts may be NULL); only certain hits when
 * certain_only. */
static bool ledger_hit(const struct qr_router_env *env, const struct qr_route_backend *rb,
                       enum qr_cap_key key, const char *family, const char *model,
                       bool certain_only, struct qr_ledger_hit *out)
{
    if (!env->ledger || !rb)
        return false;
    struct qr_ledger_query q = {
        .capability = qr_cap_key_name(key),
        .backend_kind = qr_cap_backend_kind_str(rb->desc->kind),
        .project = rb->project,
        .engine_versions = rb->engine_versions,
        .n_engine_versions = rb->n_engine_versions,
        .model_family = family,
        .model = model,
        .hardware_class = env->hardware_class,
    };
    struct qr_ledger_hit hits[8];
    size_t n = qr_ledger_blocked(env->ledger, &q, hits, QR_ARRAY_LEN(hits));
    for (size_t i = 0; i < n && i < QR_ARRAY_LEN(hits); i++) {
        if (certain_only && !hits[i].certain)
            continue;
        *out = hits[i];
        return true;
    }
    return false;
}

static bool add_blocked(yyjson_mut_doc *doc, yyjson_mut_val *o, const struct qr_ledger_hit *h)
{
    bool ok = yyjson_mut_obj_add_str(doc, o, "state", "blocked");
    if (h->block)
        ok = ok && yyjson_mut_obj_add_strcpy(doc, o, "block", h->block->id) &&
             yyjson_mut_obj_add_str(doc, o, "origin", h->block->local ? "local" : "builtin") &&
             yyjson_mut_obj_add_strcpy(doc, o, "reason", h->block->reason);
    else
        ok = ok && yyjson_mut_obj_add_strcpy(doc, o, "entry", h->entry->id) &&
             yyjson_mut_obj_add_str(doc, o, "origin", h->entry->local ? "local" : "builtin") &&
             yyjson_mut_obj_add_str(doc, o, "reason", "the ledger marks this engine build blocked");
    return ok && yyjson_mut_obj_add_bool(doc, o, "certain", h->certain);
}

/* "verified"/"refuted" with the report's id, time and engine version (and the model when
 * with_model); refuted adds the failing case and its reason. */
static bool add_report(yyjson_mut_doc *doc, yyjson_mut_val *o, const struct vrec *v,
                       enum qr_cap_key key, bool refuted, bool with_model)
{
    bool ok = yyjson_mut_obj_add_str(doc, o, "state", refuted ? "refuted" : "verified") &&
              yyjson_mut_obj_add_int(doc, o, "report", v->report) &&
              yyjson_mut_obj_add_strcpy(doc, o, "at", v->at) &&
              yyjson_mut_obj_add_strcpy(doc, o, "engine_version", v->version) &&
              (!with_model || yyjson_mut_obj_add_strcpy(doc, o, "model", v->model));
    if (ok && refuted)
        ok = yyjson_mut_obj_add_strcpy(doc, o, "case", v->r.failed[key].id) &&
             yyjson_mut_obj_add_strcpy(doc, o, "reason", v->r.failed[key].reason);
    return ok;
}

enum qr_err qr_api_capability_states_model(struct qr_app *app, const struct qr_router_env *given,
                                           const char *name, yyjson_mut_doc *doc,
                                           yyjson_mut_val *obj)
{
    const struct qr_reg_model *m =
        name && app->catalog ? qr_registry_find(app->catalog->registry, name) : NULL;
    if (!m)
        return QR_OK;
    struct qr_route_backend rbs[QR_BACKENDS_MAX];
    struct qr_router_env env;
    if (given)
        env = *given;
    else
        qr_api_route_env(app, rbs, &env); /* refreshes the conformance records */
    const struct qr_backend *b = NULL;
    for (size_t i = 0; i < app->n_backends && !b; i++)
        if (qr_catalog_serves(m, app->backends[i].b))
            b = app->backends[i].b;
    if (!b)
        b = qr_api_backend_for_name(app, name);
    const struct qr_route_backend *rb = route_view(&env, b);
    struct qr_cap_set declared = QR_CAP_SET_EMPTY;
    for (size_t i = 0; i < QR_ARRAY_LEN(MANIFEST_KEYS); i++)
        if (m->m->caps & MANIFEST_KEYS[i].bit)
            qr_cap_set_add(&declared, MANIFEST_KEYS[i].key);
    size_t it = 0;
    const struct vrec *v = find_rec(rb, m->m->id, &it);
    yyjson_mut_val *states = yyjson_mut_obj_add_obj(doc, obj, "capability_states");
    if (!states)
        return QR_ERR_NOMEM;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        enum qr_cap_key key = (enum qr_cap_key) k;
        struct qr_ledger_hit hit;
        bool blocked = ledger_hit(&env, rb, key, m->m->architecture, m->m->id, false, &hit);
        bool refuted = v && qr_cap_set_has(v->r.refuted, key);
        bool verified = v && qr_cap_set_has(v->r.verified, key);
        /* the descriptor speaks for keys the model does not bear on; the manifest for the rest */
        const struct qr_cap_info *info = qr_cap_info(key);
        bool claimed = qr_cap_set_has(declared, key) ||
                       (rb && rb->desc->caps[key] == QR_CAP_SUPPORTED && info && !info->model_side);
        if (!blocked && !refuted && !verified && !claimed)
            continue;
        yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, states, qr_cap_key_name(key));
        bool ok = o && (blocked    ? add_blocked(doc, o, &hit)
                        : refuted  ? add_report(doc, o, v, key, true, false)
                        : verified ? add_report(doc, o, v, key, false, false)
                                   : yyjson_mut_obj_add_str(doc, o, "state", "declared"));
        if (!ok)
            return QR_ERR_NOMEM;
    }
    return QR_OK;
}

enum qr_err qr_api_capability_states_backend(struct qr_app *app, size_t i, yyjson_mut_doc *doc,
                                             yyjson_mut_val *obj)
{
    if (i >= app->n_backends)
        return QR_OK;
    struct qr_route_backend rbs[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rbs, &env);
    const struct qr_route_backend *rb = route_view(&env, app->backends[i].b);
    if (!rb)
        return QR_OK;
    yyjson_mut_val *states = yyjson_mut_obj_add_obj(doc, obj, "capability_states");
    if (!states)
        return QR_ERR_NOMEM;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        enum qr_cap_key key = (enum qr_cap_key) k;
        struct qr_ledger_hit hit;
        bool blocked = ledger_hit(&env, rb, key, NULL, NULL, true, &hit);
        const struct vrec *bad = NULL, *good = NULL, *v;
        size_t it = 0;
        while ((v = find_rec(rb, NULL, &it)) != NULL) {
            if (!bad && qr_cap_set_has(v->r.refuted, key))
                bad = v;
            if (!good && qr_cap_set_has(v->r.verified, key))
                good = v;
        }
        bool claimed =
            rb->desc->caps[key] == QR_CAP_SUPPORTED || rb->desc->caps[key] == QR_CAP_CONDITIONAL;
        if (!blocked && !bad && !good && !claimed)
            continue;
        yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, states, qr_cap_key_name(key));
        bool ok = o && (blocked ? add_blocked(doc, o, &hit)
                        : bad   ? add_report(doc, o, bad, key, true, true)
                        : good  ? add_report(doc, o, good, key, false, true)
                                : yyjson_mut_obj_add_str(doc, o, "state", "declared"));
        if (!ok)
            return QR_ERR_NOMEM;
    }
    return QR_OK;
}
