/* POST /v1/placement: the placement plan (placement/placement.h) for a model on this host,
 * without running it. Body {"model": registry name | "path": GGUF file, "context", "parallel",
 * "prefer", "allow_acceleration", "allow_nvme_cold_tier", "kv_type", "reserve_ram_bytes",
 * "threads"}; unknown fields and bad values are 400 invalid_placement_request; a model that does
 * not resolve to a readable GGUF file is 404 model_not_found, a path outside models_dir 400; a plan
 * that does not fit is 422 with the whole document (the numbers); a plan that fits is 200.
 * "calibration" is the newest stored calibration for this host and engine (host/calibrate.h), and
 * the best thread count of the newest one with engine rows is the plan's thread count unless the
 * body gives "threads" or llama_threads is configured (docs/PLACEMENT.md). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "backend/llamacpp/llamacpp.h"
#include "core/http_server.h"
#include "core/json_strict.h"
#include "host/calibrate.h"
#include "placement/placement.h"
#include "store/store.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

#define PLACEMENT_BODY_MAX (64u * 1024u) /* as every native POST body */

/* q->path: the registry model's GGUF artifact, or the given path, which must lie under
 * models_dir (the route does not probe arbitrary files). QR_ERR_NOT_FOUND / QR_ERR_FORBIDDEN. */
static enum qr_err model_file(struct qr_app *app, struct qr_placement_query *q, char *path,
                              struct qr_diag *diag)
{
    const char *dir = app->cfg->models_dir ? app->cfg->models_dir : "";
    if (q->model) {
        enum qr_err err =
            qr_placement_resolve_model(app->catalog->registry, dir, q->model, path, PATH_MAX, diag);
        q->path = err ? NULL : path;
        return err;
    }
    char root[PATH_MAX];
    if (!realpath(q->path, path))
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no such file '%s'", q->path);
    size_t n = realpath(dir, root) ? strlen(root) : 0;
    if (!n || strncmp(path, root, n) || (path[n] != '/' && root[n - 1] != '/'))
        return qr_diag_set(diag, QR_ERR_FORBIDDEN, "'path' must name a file under models_dir");
    q->path = path;
    return QR_OK;
}

/* The engine version, probed once per daemon when no llama.cpp backend probed it already. */
static char g_engine_version[64];

static void identity(const struct qr_app *app, struct qr_calib_identity *id)
{
    const struct qr_llama_engine *e = app->managed ? qr_llamacpp_engine(app->managed) : NULL;
    if (e && e->version[0]) {
        qr_calib_identity(NULL, NULL, NULL, e->version, id);
    } else if (!g_engine_version[0]) {
        qr_calib_identity(NULL, app->cfg->llama_server, NULL, NULL, id);
        snprintf(g_engine_version, sizeof g_engine_version, "%s", id->engine_version);
    } else {
        qr_calib_identity(NULL, NULL, NULL, g_engine_version, id);
    }
}

/* The newest stored calibration for this host and engine into *json (owned, NULL when none), and
 * the best thread count of the newest run with engine rows into *threads (0 when none). The store
 * is only read: a missing file is not created. */
static void stored_calibration(const struct qr_app *app, char **json, uint32_t *threads)
{
    *json = NULL;
    *threads = 0;
    struct qr_store *s = qr_api_store_open_existing(app);
    struct qr_calib_identity *id = s ? malloc(sizeof *id) : NULL;
    if (id) {
        identity(app, id);
        if (qr_calib_latest(s, id->fingerprint, id->engine_version, false, json, NULL, NULL,
                            NULL) != QR_OK)
            *json = NULL;
        if (qr_calib_latest(s, id->fingerprint, id->engine_version, true, NULL, threads, NULL,
                            NULL) != QR_OK)
            *threads = 0;
    }
    qr_store_close(s);
    free(id);
}

static void placement_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (!qr_api_body_ok(req, err))
        return;
    struct qr_slice body = qr_http_req_body(req);
    struct qr_diag diag = {{0}};
    yyjson_doc *in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    char why[128];
    if (!in) {
        qr_api_send_error(req, 400, "invalid_placement_request", "the body is not valid JSON");
        return;
    }
    if (!qr_json_strict_ok(yyjson_doc_get_root(in), why, sizeof why)) {
        qr_api_send_error(req, 400, "invalid_placement_request", why);
        yyjson_doc_free(in);
        return;
    }
    struct qr_placement_query q = {0};
    qr_placement_verified_from_ledger(app->catalog->ledger, &q.req.verified);
    /* what the body does not say is what the engine start would use (placement_* settings) */
    (void) qr_placement_prefer_parse(app->cfg->placement_prefer, &q.req.prefer);
    q.req.allow_acceleration = app->cfg->placement_acceleration;
    q.req.allow_nvme_cold_tier = app->cfg->placement_nvme_cold_tier;
    yyjson_mut_doc *doc = NULL;
    char path[PATH_MAX];
    bool fits = false;
    char *calibration = NULL;
    uint32_t calibrated_threads = 0;
    if ((err = qr_placement_query_parse(in, &q, &diag))) {
        qr_api_send_error(req, 400, "invalid_placement_request", diag.msg);
        goto done;
    }
    if ((err = model_file(app, &q, path, &diag))) {
        qr_api_send_error(req, err == QR_ERR_NOT_FOUND ? 404 : 400,
                          err == QR_ERR_NOT_FOUND ? "model_not_found" : "invalid_placement_request",
                          diag.msg);
        goto done;
    }
    stored_calibration(app, &calibration, &calibrated_threads);
    q.calibration_json = calibration;
    /* as the llama.cpp backend starts it: a given count, else llama_threads, else calibrated */
    if (!q.req.threads)
        q.req.threads =
            app->cfg->llama_threads ? (uint32_t) app->cfg->llama_threads : calibrated_threads;
    if ((err = qr_placement_document(&q, QR_ROUTE_API_VERSION, &doc, &fits, &diag))) {
        if (err == QR_ERR_NOMEM)
            qr_api_send_err(req, err, diag.msg);
        else /* the file could not be read as a GGUF model */
            qr_api_send_error(req, 422, "invalid_model_file", diag.msg);
    } else {
        qr_api_send_json(req, fits ? 200 : 422, doc);
    }
done:
    free(calibration);
    yyjson_mut_doc_free(doc);
    yyjson_doc_free(in);
}

void qr_api_placement(struct qr_app *app, struct qr_http_req *req)
{
    size_t cap = app->cfg->max_request_bytes < PLACEMENT_BODY_MAX
                     ? (size_t) app->cfg->max_request_bytes
                     : PLACEMENT_BODY_MAX;
    qr_http_req_read_body(req, cap, placement_body, app);
}
