/* The context-override regression guard (bench/guard.h) as router input: for every registry model
 * the managed llama.cpp backend serves, the newest stored A/B run for this host and engine decides
 * whether forwarding a client's context is verified (a conformance record for context.override)
 * or refused (engine evidence against it, which also overrules a policy's override_verified).
 * Read from the evidence store at start and on SIGHUP, never per request: a new `quantum-runtime
 * bench` run counts after a reload (docs/BENCHMARK-AB.md "Regression guard"). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/api.h"
#include "api/catalog.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "bench/ab.h"
#include "bench/guard.h"
#include "core/log.h"
#include "host/calibrate.h"
#include "registry/manifest.h"
#include "registry/registry.h"
#include "router/router.h"
#include "store/store.h"

#define GUARD_MAX 256u /* models with a decision kept */

struct guard_rec {
    char model[QR_MANIFEST_MAX_ID + 1];
    char version[64];
    char detail[200];
};

static struct guard_rec g_ok_rec[GUARD_MAX], g_bad_rec[GUARD_MAX];
static struct qr_route_verified g_ok[GUARD_MAX];
static struct qr_route_refuted g_bad[GUARD_MAX];
static size_t g_n_ok, g_n_bad;
static char g_backend[QR_BACKEND_ID_MAX + 1], g_hw[129];

void qr_api_guard_refresh(struct qr_app *app)
{
    g_n_ok = g_n_bad = 0;
    struct qr_backend *b = app->managed;
    const struct qr_llama_engine *eng = b ? qr_llamacpp_engine(b) : NULL;
    if (!eng || !eng->version[0] || !app->catalog)
        return;
    struct qr_store *s = qr_api_store_open_existing(app);
    struct qr_calib_identity *id = s ? malloc(sizeof *id) : NULL;
    if (!id) {
        qr_store_close(s);
        return;
    }
    qr_calib_identity(NULL, NULL, NULL, eng->version, id);
    snprintf(g_backend, sizeof g_backend, "%s", qr_backend_id(b));
    snprintf(g_hw, sizeof g_hw, "%s", app->cfg->hardware_class ? app->cfg->hardware_class : "");
    const struct qr_registry *reg = app->catalog->registry;
    for (size_t i = 0; i < qr_registry_count(reg); i++) {
        const struct qr_reg_model *m = qr_registry_at(reg, i);
        if (m->source == QR_REG_BACKEND || !qr_catalog_serves(m, b))
            continue;
        struct qr_guard_evidence ev = {0};
        if (qr_guard_evidence_find(s, m->m->id, QR_BENCH_BACKEND, eng->version, id->fingerprint,
                                   &ev, NULL) != QR_OK ||
            !ev.found)
            continue;
        struct qr_guard_decision d;
        qr_guard_decide(&ev, -1, &d);
        struct guard_rec *r = NULL;
        struct qr_route_verified ok;
        struct qr_route_refuted bad;
        if (d.verdict == QR_GUARD_VERIFIED && g_n_ok < GUARD_MAX && g_hw[0])
            r = &g_ok_rec[g_n_ok];
        else if (d.verdict == QR_GUARD_REFUSED && g_n_bad < GUARD_MAX)
            r = &g_bad_rec[g_n_bad];
        QR_LOG(QR_LOG_INFO, "context-override guard", QR_LF_S("model", m->m->id),
               QR_LF_S("verdict", qr_guard_verdict_str(d.verdict)), QR_LF_S("reason", d.reason));
        if (!r)
            continue;
        snprintf(r->model, sizeof r->model, "%s", m->m->id);
        snprintf(r->version, sizeof r->version, "%s", eng->version);
        snprintf(r->detail, sizeof r->detail, "bench A/B run %lld: %+.1f%% decode (%s)",
                 (long long) ev.row_id, d.delta_pct, ev.override_label);
        int k = qr_guard_route_record(&d, g_backend, r->model, r->version, g_hw[0] ? g_hw : NULL,
                                      r->detail, &ok, &bad);
        if (k > 0)
            g_ok[g_n_ok++] = ok;
        else if (k < 0)
            g_bad[g_n_bad++] = bad;
    }
    qr_store_close(s);
    free(id);
}

const struct qr_route_verified *qr_api_guard_verified(size_t *n)
{
    *n = g_n_ok;
    return g_ok;
}

const struct qr_route_refuted *qr_api_guard_refuted(size_t *n)
{
    *n = g_n_bad;
    return g_bad;
}

struct qr_store *qr_api_store_open_existing(const struct qr_app *app)
{
    char path[PATH_MAX];
    const char *dir = app->cfg->state_dir;
    if (!dir || snprintf(path, sizeof path, "%s/%s", dir, QR_STORE_FILE) >= (int) sizeof path ||
        access(path, R_OK) != 0)
        return NULL;
    struct qr_store *s = NULL;
    struct qr_store_opts so = {.busy_timeout_ms = 500};
    return qr_store_open(path, &so, &s, NULL, NULL) == QR_OK ? s : NULL;
}
