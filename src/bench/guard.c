/* The context-override regression guard (guard.h): a pure decision over stored A/B evidence, and
 * the lookup of that evidence in the evidence store's bench table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "bench/guard.h"
#include "capability/capability.h"
#include "core/arena.h"
#include "router/router.h"
#include "store/store.h"

const char *qr_guard_verdict_str(enum qr_guard_verdict v)
{
    switch (v) {
    case QR_GUARD_NO_EVIDENCE:
        return "no_evidence";
    case QR_GUARD_INSUFFICIENT:
        return "insufficient";
    case QR_GUARD_REFUSED:
        return "refused";
    case QR_GUARD_VERIFIED:
        return "verified";
    }
    return "no_evidence";
}

void qr_guard_decide(const struct qr_guard_evidence *ev, double threshold_pct,
                     struct qr_guard_decision *out)
{
    memset(out, 0, sizeof *out);
    out->delta_pct = NAN;
    out->threshold_pct = isfinite(threshold_pct) && threshold_pct >= 0
                             ? threshold_pct
                             : QR_GUARD_DEFAULT_THRESHOLD_PCT;
    if (!ev || !ev->found) {
        out->verdict = QR_GUARD_NO_EVIDENCE;
        snprintf(out->reason, sizeof out->reason,
                 "no stored A/B evidence for this model, backend, engine version and host: the "
                 "override is not verified");
        return;
    }
    if (ev->native_n < QR_GUARD_MIN_SAMPLES || ev->override_n < QR_GUARD_MIN_SAMPLES ||
        !isfinite(ev->native_median) || !(ev->native_median > 0) ||
        !isfinite(ev->override_median) || ev->override_median < 0) {
        out->verdict = QR_GUARD_INSUFFICIENT;
        snprintf(out->reason, sizeof out->reason,
                 "A/B evidence too thin (native %zu, override %zu ok samples; %u each needed, "
                 "positive medians): the override is not verified",
                 ev->native_n, ev->override_n, QR_GUARD_MIN_SAMPLES);
        return;
    }
    double a = ev->native_median, b = ev->override_median;
    out->delta_pct = (b - a) / a * 100.0;
    /* a relative 1e-9 absorbs the decimal rounding of stored medians at the exact edge */
    double cv_a = isfinite(ev->native_stddev) ? ev->native_stddev / a * 100.0 : 0.0;
    double cv_b = isfinite(ev->override_stddev) && b > 0 ? ev->override_stddev / b * 100.0 : 0.0;
    bool passes = b * 100.0 >= a * (100.0 - out->threshold_pct) * (1.0 - 1e-9);
    if (passes && (cv_a > QR_GUARD_MAX_CV_PCT || cv_b > QR_GUARD_MAX_CV_PCT)) {
        out->verdict = QR_GUARD_INSUFFICIENT;
        snprintf(out->reason, sizeof out->reason,
                 "A/B evidence too noisy to verify (decode spread native %.1f%%, override %.1f%% "
                 "of the median; at most %.0f%%): rerun on a quiet host; not verified",
                 cv_a, cv_b, QR_GUARD_MAX_CV_PCT);
    } else if (passes) {
        out->verdict = QR_GUARD_VERIFIED;
        out->override_verified = true;
        snprintf(out->reason, sizeof out->reason,
                 "override median decode %.2f tok/s vs native %.2f tok/s (%+.2f%%) is within the "
                 "%.2f%% threshold: verified",
                 b, a, out->delta_pct, out->threshold_pct);
    } else {
        out->verdict = QR_GUARD_REFUSED;
        snprintf(out->reason, sizeof out->reason,
                 "override median decode %.2f tok/s vs native %.2f tok/s (%+.2f%%) loses more than "
                 "the %.2f%% threshold: the native path is kept",
                 b, a, out->delta_pct, out->threshold_pct);
    }
}

static bool str_is(yyjson_val *o, const char *key, const char *want)
{
    return yyjson_equals_str(yyjson_obj_get(o, key), want);
}

/* The median and n of decode_tps of one arm ("a" or "b") of a stored row. */
static void arm_decode(yyjson_val *root, const char *arm, double *median, double *stddev, size_t *n)
{
    yyjson_val *st =
        yyjson_obj_get(yyjson_obj_get(yyjson_obj_get(root, arm), "stats"), "decode_tps");
    yyjson_val *m = yyjson_obj_get(st, "median");
    yyjson_val *sd = yyjson_obj_get(st, "stddev");
    *median = yyjson_is_num(m) ? yyjson_get_num(m) : NAN;
    *stddev = yyjson_is_num(sd) ? yyjson_get_num(sd) : NAN;
    *n = (size_t) yyjson_get_uint(yyjson_obj_get(st, "n"));
}

enum qr_err qr_guard_evidence_find(struct qr_store *s, const char *model, const char *backend,
                                   const char *engine_version, const char *host_fingerprint,
                                   struct qr_guard_evidence *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (!model || !backend || !engine_version || !host_fingerprint)
        return QR_OK; /* an unknown fact never matches: fail closed */
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.model = model, .name = QR_BENCH_AB_NAME};
    struct qr_store_bench *rows = NULL;
    size_t n = 0;
    enum qr_err err = qr_store_bench_list(s, &f, &a, &rows, &n, diag);
    for (size_t i = 0; !err && i < n && !out->found; i++) {
        if (!rows[i].metric || strcmp(rows[i].metric, "decode_tps") || !rows[i].values_json)
            continue;
        yyjson_doc *doc = yyjson_read(rows[i].values_json, strlen(rows[i].values_json), 0);
        yyjson_val *root = yyjson_doc_get_root(doc);
        if (str_is(root, "schema_version", QR_BENCH_AB_SCHEMA) &&
            str_is(root, "backend", backend) && str_is(root, "engine_version", engine_version) &&
            str_is(root, "host_fingerprint", host_fingerprint) && str_is(root, "model", model)) {
            out->found = true;
            out->row_id = rows[i].id;
            out->time_ms = rows[i].time_ms;
            arm_decode(root, "a", &out->native_median, &out->native_stddev, &out->native_n);
            arm_decode(root, "b", &out->override_median, &out->override_stddev, &out->override_n);
            snprintf(out->override_label, sizeof out->override_label, "%s",
                     rows[i].variant_b ? rows[i].variant_b : "");
        }
        yyjson_doc_free(doc);
    }
    qr_arena_cleanup(&a);
    return err;
}

int qr_guard_route_record(const struct qr_guard_decision *d, const char *backend_id,
                          const char *model_id, const char *engine_version,
                          const char *hardware_class, const char *detail,
                          struct qr_route_verified *ok, struct qr_route_refuted *bad)
{
    if (!d || !backend_id || !model_id || !engine_version || !hardware_class)
        return 0;
    struct qr_cap_set keys = {0};
    qr_cap_set_add(&keys, QR_CAP_CONTEXT_OVERRIDE);
    if (d->verdict == QR_GUARD_VERIFIED && ok) {
        *ok = (struct qr_route_verified){.backend_id = backend_id,
                                         .model_id = model_id,
                                         .engine_version = engine_version,
                                         .hardware_class = hardware_class,
                                         .keys = keys,
                                         .detail = detail};
        return 1;
    }
    if (d->verdict == QR_GUARD_REFUSED && bad) {
        *bad = (struct qr_route_refuted){.backend_id = backend_id,
                                         .model_id = model_id,
                                         .engine_version = engine_version,
                                         .keys = keys,
                                         .detail = detail};
        return -1;
    }
    return 0;
}
