/* POST /v1/benchmark-plan: the benchmark plan, schema quantum.runtime/model-benchmark-plan/v1alpha1
 * (bench/plan.h). Body {"model", "family", "variants", "ctx", "core_budget",
 * "reserve_system_cores", "minimum_workers", "include_full_host_comparison"}, every field
 * optional, at most 64 KiB; unknown fields, bad values and plan errors are 400
 * invalid_benchmark_plan_request; a model the registry does not know is 404 model_not_found.
 * 200 {"api_version", "benchmark_schema", "canonical_model_id", "limits", "plan"} (the
 * predecessor's shape). The host's limits are discovered fresh on every call. */
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "bench/plan.h"
#include "core/http_server.h"
#include "core/json_strict.h"
#include "host/profile.h"
#include "registry/manifest.h"
#include "registry/registry.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

#define BENCH_PLAN_BODY_MAX (64u * 1024u) /* as every native POST body */

static void bad(struct qr_http_req *req, const char *msg)
{
    qr_api_send_error(req, 400, "invalid_benchmark_plan_request", msg);
}

/* The document for a valid request; NULL with *status and diag on failure. */
static yyjson_mut_doc *plan_document(struct qr_app *app, const struct qr_bench_plan_req *q,
                                     int *status, struct qr_diag *diag)
{
    const char *canonical = NULL;
    if (q->model[0]) {
        const struct qr_reg_model *m = qr_registry_find(app->catalog->registry, q->model);
        if (!m || !m->m) {
            *status = 404;
            qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' not found", q->model);
            return NULL;
        }
        canonical = m->m->id;
    }
    struct qr_host_profile *hp = malloc(sizeof *hp);
    struct qr_host_limits *hl = malloc(sizeof *hl);
    if (!hp || !hl)
        abort(); /* small internal allocation (STYLE.md) */
    qr_host_discover(NULL, hp, hl);
    struct qr_bench_plan p;
    yyjson_mut_doc *d = NULL;
    *status = 400;
    if (qr_bench_plan_workers(q, hl->effective_logical_cpus, &p, diag) == QR_OK) {
        d = yyjson_mut_doc_new(NULL);
        yyjson_mut_val *root = yyjson_mut_obj(d);
        yyjson_mut_doc_set_root(d, root);
        yyjson_mut_obj_add_str(d, root, "api_version", QR_ROUTE_API_VERSION);
        yyjson_mut_obj_add_str(d, root, "benchmark_schema", QR_BENCH_PLAN_SCHEMA);
        if (canonical)
            yyjson_mut_obj_add_strcpy(d, root, "canonical_model_id", canonical);
        else
            yyjson_mut_obj_add_null(d, root, "canonical_model_id");
        qr_host_limits_json(hl, d, yyjson_mut_obj_add_obj(d, root, "limits"));
        if (qr_bench_plan_json(q, &p, d, yyjson_mut_obj_add_obj(d, root, "plan"), diag)) {
            yyjson_mut_doc_free(d);
            d = NULL;
        }
    }
    free(hp);
    free(hl);
    return d;
}

static void bench_plan_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (!qr_api_body_ok(req, err))
        return;
    struct qr_slice body = qr_http_req_body(req);
    yyjson_doc *in = body.len ? yyjson_read(body.ptr, body.len, 0) : NULL;
    char why[128];
    if (body.len && !in) {
        bad(req, "the body is not valid JSON");
        return;
    }
    if (in && !qr_json_strict_ok(yyjson_doc_get_root(in), why, sizeof why)) {
        bad(req, why);
        yyjson_doc_free(in);
        return;
    }
    struct qr_bench_plan_req q;
    struct qr_diag diag = {{0}};
    int status = 400;
    yyjson_mut_doc *doc = NULL;
    if (in && qr_bench_plan_req_parse(in, &q, &diag)) {
        bad(req, diag.msg);
    } else {
        if (!in)
            memset(&q, 0, sizeof q); /* no body: every default */
        doc = plan_document(app, &q, &status, &diag);
        if (doc)
            qr_api_send_json(req, 200, doc);
        else if (status == 404)
            qr_api_send_error(req, 404, "model_not_found", diag.msg);
        else
            bad(req, diag.msg);
    }
    yyjson_mut_doc_free(doc);
    yyjson_doc_free(in);
}

void qr_api_benchmark_plan(struct qr_app *app, struct qr_http_req *req)
{
    size_t cap = app->cfg->max_request_bytes < BENCH_PLAN_BODY_MAX
                     ? (size_t) app->cfg->max_request_bytes
                     : BENCH_PLAN_BODY_MAX;
    qr_http_req_read_body(req, cap, bench_plan_body, app);
}
