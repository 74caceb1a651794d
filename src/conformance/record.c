/* Conformance evidence (record.h): reports into the evidence store as conformance records, one
 * bench record per model of a ledger evaluation tying the pinned and candidate records and their
 * decode samples to the candidate entry, and the promotion decision made from those records
 * alone: case-by-case (what passed on the pinned build must pass on the candidate) and decode
 * throughput through the regression guard (bench/guard.h), failing closed on missing evidence. */
#include "conformance/record.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yyjson.h>

#include "core/arena.h"
#include "core/fsutil.h"
#include "store/store.h"

enum qr_err qr_conf_store_open(const char *state_dir, struct qr_store **out, struct qr_diag *diag)
{
    char path[PATH_MAX];
    *out = NULL;
    if (!state_dir || !state_dir[0])
        return qr_diag_set(diag, QR_ERR_CONFIG, "no state_dir to store the evidence in");
    if (snprintf(path, sizeof path, "%s/%s", state_dir, QR_STORE_FILE) >= (int) sizeof path)
        return qr_diag_set(diag, QR_ERR_INVALID, "state_dir '%.100s...' is too long", state_dir);
    qr_mkdir_p(state_dir, false);
    return qr_store_open(path, NULL, out, NULL, diag);
}

static const char *str_or_empty(yyjson_val *v)
{
    const char *s = yyjson_get_str(v);
    return s ? s : "";
}

enum qr_err qr_conf_record_add(struct qr_store *s, const char *kind, const char *report_json,
                               int64_t *out_id, struct qr_diag *diag)
{
    yyjson_doc *d = report_json ? yyjson_read(report_json, strlen(report_json), 0) : NULL;
    yyjson_val *root = yyjson_doc_get_root(d);
    yyjson_val *sum = yyjson_obj_get(root, "summary");
    const char *model = yyjson_get_str(yyjson_obj_get(root, "model"));
    if (!yyjson_equals_str(yyjson_obj_get(root, "schema_version"),
                           "quantum.runtime/conformance-report/v1alpha1") ||
        !model || !yyjson_is_uint(yyjson_obj_get(sum, "passed")) ||
        !yyjson_is_uint(yyjson_obj_get(sum, "failed")) ||
        !yyjson_is_uint(yyjson_obj_get(sum, "skipped"))) {
        yyjson_doc_free(d);
        return qr_diag_set(diag, QR_ERR_INVALID, "not a conformance report: nothing stored");
    }
    struct qr_store_conformance rec = {
        .backend_id = str_or_empty(yyjson_obj_get(root, "backend")),
        .kind = kind,
        .engine_version = str_or_empty(yyjson_obj_get(root, "engine_version")),
        .model = model,
        .hardware_class = str_or_empty(yyjson_obj_get(root, "host_class")),
        .n_pass = (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "passed")),
        .n_fail = (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "failed")),
        .n_skip = (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "skipped")),
        .report_json = report_json,
    };
    enum qr_err err = qr_store_conformance_add(s, &rec, out_id, diag);
    yyjson_doc_free(d);
    return err;
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

double qr_conf_median(const double *v, size_t n)
{
    if (n == 0 || n > QR_CONF_MAX_SAMPLES)
        return NAN;
    double s[QR_CONF_MAX_SAMPLES];
    memcpy(s, v, n * sizeof *v);
    qsort(s, n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
}

double qr_conf_stddev(const double *v, size_t n)
{
    if (n < 2)
        return NAN;
    double m = 0, q = 0;
    for (size_t i = 0; i < n; i++)
        m += v[i];
    m /= (double) n;
    for (size_t i = 0; i < n; i++)
        q += (v[i] - m) * (v[i] - m);
    return sqrt(q / (double) (n - 1));
}

/* ---- evaluation records ---- */

static void add_arm(yyjson_mut_doc *d, yyjson_mut_val *root, const char *key,
                    const struct qr_conf_eval_arm *a)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(d, root, key);
    yyjson_mut_obj_add_strcpy(d, o, "engine", a->engine_path ? a->engine_path : "");
    yyjson_mut_val *names = yyjson_mut_obj_add_arr(d, o, "engine_versions");
    for (size_t i = 0; i < a->n_names; i++)
        yyjson_mut_arr_add_strcpy(d, names, a->names[i]);
    yyjson_mut_obj_add_int(d, o, "conformance_id", a->conformance_id);
    yyjson_mut_val *tps = yyjson_mut_obj_add_arr(d, o, "decode_tps");
    size_t n = a->n_tps < QR_CONF_MAX_SAMPLES ? a->n_tps : QR_CONF_MAX_SAMPLES;
    for (size_t i = 0; i < n; i++)
        yyjson_mut_arr_add_real(d, tps, round(a->tps[i] * 1000.0) / 1000.0);
    double med = qr_conf_median(a->tps, n), sd = qr_conf_stddev(a->tps, n);
    if (isfinite(med))
        yyjson_mut_obj_add_real(d, o, "median", round(med * 1000.0) / 1000.0);
    else
        yyjson_mut_obj_add_null(d, o, "median");
    if (isfinite(sd))
        yyjson_mut_obj_add_real(d, o, "stddev", round(sd * 1000.0) / 1000.0);
    else
        yyjson_mut_obj_add_null(d, o, "stddev");
}

enum qr_err qr_conf_eval_add(struct qr_store *s, const struct qr_conf_eval *e, int64_t *out_id,
                             struct qr_diag *diag)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = d ? yyjson_mut_obj(d) : NULL;
    if (!root)
        abort();
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_strcpy(d, root, "candidate_entry", e->candidate_entry);
    yyjson_mut_obj_add_strcpy(d, root, "run", e->run);
    yyjson_mut_obj_add_strcpy(d, root, "backend", e->backend ? e->backend : "");
    yyjson_mut_obj_add_strcpy(d, root, "hardware_class",
                              e->hardware_class ? e->hardware_class : "");
    yyjson_mut_obj_add_uint(d, root, "gen_tokens", e->gen_tokens);
    add_arm(d, root, "pinned", &e->pinned);
    add_arm(d, root, "candidate", &e->candidate);
    char *values = yyjson_mut_write(d, 0, NULL);
    yyjson_mut_doc_free(d);
    if (!values)
        abort();
    const char *va = e->pinned.n_names ? e->pinned.names[e->pinned.n_names - 1] : "unknown";
    const char *vb =
        e->candidate.n_names ? e->candidate.names[e->candidate.n_names - 1] : "unknown";
    struct qr_store_bench rec = {
        .name = QR_CONF_EVAL_BENCH,
        .model = e->model,
        .variant_a = va,
        .variant_b = vb,
        .metric = QR_CONF_EVAL_METRIC,
        .values_json = values,
    };
    enum qr_err err = qr_store_bench_add(s, &rec, out_id, diag);
    free(values);
    return err;
}

/* ---- the promotion decision ---- */

yyjson_val *qr_conf_report_case(yyjson_val *root, const char *id)
{
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(yyjson_obj_get(root, "cases"), i, max, c)
    {
        if (yyjson_equals_str(yyjson_obj_get(c, "id"), id))
            return c;
    }
    return NULL;
}

bool qr_conf_compare_reports(const char *pinned_json, const char *candidate_json, char *why,
                             size_t cap)
{
    why[0] = '\0';
    yyjson_doc *p = pinned_json ? yyjson_read(pinned_json, strlen(pinned_json), 0) : NULL;
    yyjson_doc *c = candidate_json ? yyjson_read(candidate_json, strlen(candidate_json), 0) : NULL;
    yyjson_val *pr = yyjson_doc_get_root(p), *cr = yyjson_doc_get_root(c);
    bool ok =
        yyjson_is_arr(yyjson_obj_get(pr, "cases")) && yyjson_is_arr(yyjson_obj_get(cr, "cases"));
    if (!ok)
        snprintf(why, cap, "a stored report is unreadable");
    size_t used = 0, i, max;
    yyjson_val *pc;
    yyjson_arr_foreach(ok ? yyjson_obj_get(pr, "cases") : NULL, i, max, pc)
    {
        if (!yyjson_equals_str(yyjson_obj_get(pc, "status"), "pass"))
            continue;
        const char *id = yyjson_get_str(yyjson_obj_get(pc, "id"));
        yyjson_val *cc = id ? qr_conf_report_case(cr, id) : NULL;
        if (cc && yyjson_equals_str(yyjson_obj_get(cc, "status"), "pass"))
            continue;
        const char *st = cc ? yyjson_get_str(yyjson_obj_get(cc, "status")) : NULL;
        const char *reason = cc ? yyjson_get_str(yyjson_obj_get(cc, "reason")) : NULL;
        int w = snprintf(used < cap ? why + used : NULL, used < cap ? cap - used : 0,
                         "%scase '%s' passed on the pinned build but is %s on the "
                         "candidate%s%s",
                         used ? "; " : "", id ? id : "?", st ? st : "missing",
                         reason && reason[0] ? ": " : "", reason ? reason : "");
        used += w > 0 ? (size_t) w : 0;
        ok = false;
    }
    if (used >= cap && cap > 4)
        memcpy(why + cap - 4, "...", 4);
    for (char *q = why; *q; q++) /* one line: reasons may quote multi-line content */
        if ((unsigned char) *q < 0x20)
            *q = ' ';
    yyjson_doc_free(p);
    yyjson_doc_free(c);
    return ok;
}

/* Samples of one arm of an evaluation's values into guard evidence (native or override side). */
static size_t arm_samples(yyjson_val *arm, double *out)
{
    size_t n = 0, i, max;
    yyjson_val *v;
    yyjson_arr_foreach(yyjson_obj_get(arm, "decode_tps"), i, max, v)
    {
        if (yyjson_is_num(v) && n < QR_CONF_MAX_SAMPLES && yyjson_get_num(v) > 0)
            out[n++] = yyjson_get_num(v);
    }
    return n;
}

static const char *report_by_id(const struct qr_store_conformance *rows, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].id == id)
            return rows[i].report_json;
    return NULL;
}

/* Decide one model of the run from its evaluation values. */
static enum qr_err decide_model(struct qr_store *s, yyjson_val *v, double threshold,
                                struct qr_conf_promote_model *m, struct qr_diag *diag)
{
    yyjson_val *pa = yyjson_obj_get(v, "pinned"), *ca = yyjson_obj_get(v, "candidate");
    m->pinned_id = yyjson_get_sint(yyjson_obj_get(pa, "conformance_id"));
    m->candidate_id = yyjson_get_sint(yyjson_obj_get(ca, "conformance_id"));
    struct qr_arena a;
    qr_arena_init(&a, 0);
    const char *reports[2] = {NULL, NULL};
    const char *kinds[2] = {QR_CONF_KIND_PINNED, QR_CONF_KIND_CANDIDATE};
    int64_t ids[2] = {m->pinned_id, m->candidate_id};
    enum qr_err err = QR_OK;
    for (int k = 0; k < 2 && err == QR_OK; k++) {
        struct qr_store_filter f = {.model = m->model, .kind = kinds[k]};
        struct qr_store_conformance *rows = NULL;
        size_t n = 0;
        err = qr_store_conformance_list(s, &f, &a, &rows, &n, diag);
        if (err == QR_OK)
            reports[k] = report_by_id(rows, n, ids[k]);
    }
    if (err == QR_OK) {
        if (!reports[0] || !reports[1]) {
            snprintf(m->why, sizeof m->why, "the %s conformance record %lld is not in the store",
                     !reports[0] ? "pinned" : "candidate",
                     (long long) (!reports[0] ? ids[0] : ids[1]));
            m->cases_ok = false;
        } else {
            m->cases_ok = qr_conf_compare_reports(reports[0], reports[1], m->why, sizeof m->why);
        }
    }
    qr_arena_cleanup(&a);
    double ps[QR_CONF_MAX_SAMPLES], cs[QR_CONF_MAX_SAMPLES];
    size_t np = arm_samples(pa, ps), nc = arm_samples(ca, cs);
    struct qr_guard_evidence ev = {
        .found = np > 0 || nc > 0,
        .native_median = qr_conf_median(ps, np),
        .override_median = qr_conf_median(cs, nc),
        .native_n = np,
        .override_n = nc,
        .native_stddev = qr_conf_stddev(ps, np),
        .override_stddev = qr_conf_stddev(cs, nc),
    };
    snprintf(ev.override_label, sizeof ev.override_label, "candidate");
    qr_guard_decide(&ev, threshold, &m->guard);
    return err;
}

enum qr_err qr_conf_promote_check(struct qr_store *s, const char *candidate_entry,
                                  double threshold_pct, struct qr_conf_promote *out,
                                  struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.name = QR_CONF_EVAL_BENCH};
    struct qr_store_bench *rows = NULL;
    size_t n = 0;
    enum qr_err err = qr_store_bench_list(s, &f, &a, &rows, &n, diag);
    for (size_t i = 0; err == QR_OK && i < n; i++) { /* newest first */
        yyjson_doc *d = yyjson_read(rows[i].values_json, strlen(rows[i].values_json), 0);
        yyjson_val *v = yyjson_doc_get_root(d);
        const char *run = yyjson_get_str(yyjson_obj_get(v, "run"));
        bool mine = yyjson_equals_str(yyjson_obj_get(v, "candidate_entry"), candidate_entry) &&
                    run && rows[i].model;
        if (mine && !out->run[0])
            snprintf(out->run, sizeof out->run, "%s", run);
        bool seen = false;
        for (size_t j = 0; mine && j < out->n_models && !seen; j++)
            seen = strcmp(out->models[j].model, rows[i].model) == 0;
        if (mine && !seen && strcmp(run, out->run) == 0 && out->n_models < QR_CONF_PROMOTE_MAX &&
            strlen(rows[i].model) < sizeof out->models[0].model) {
            struct qr_conf_promote_model *m = &out->models[out->n_models++];
            snprintf(m->model, sizeof m->model, "%s", rows[i].model);
            m->eval_id = rows[i].id;
            err = decide_model(s, v, threshold_pct, m, diag);
        }
        yyjson_doc_free(d);
    }
    qr_arena_cleanup(&a);
    if (err != QR_OK)
        return err;
    if (out->n_models == 0) {
        snprintf(out->reason, sizeof out->reason,
                 "no stored evaluation of candidate '%s' (run `quantum-runtime ledger evaluate` "
                 "first)",
                 candidate_entry);
        return QR_OK;
    }
    out->ok = true;
    for (size_t i = 0; i < out->n_models; i++)
        out->ok = out->ok && out->models[i].cases_ok && out->models[i].guard.override_verified;
    return QR_OK;
}
