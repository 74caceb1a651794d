/* The benchmark plan (plan.h): the predecessor's worker-count ladder, unchanged in algorithm and
 * names, and the model x arm x workers matrix that `quantum-runtime bench` measures cell by cell.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "bench/plan.h"

static const uint32_t LADDER[] = {1, 2, 4, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128, 192};

static const char *const GEMMA4_VARIANTS[] = {"e2b", "e4b", "12b", "26b-a4b", "31b"};

static const char *const FIELDS[] = {"model",           "family",
                                     "variants",        "ctx",
                                     "core_budget",     "reserve_system_cores",
                                     "minimum_workers", "include_full_host_comparison"};

static bool token_ok(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (!isalnum(c) && c != '.' && c != '_' && c != '-' && c != ':' && c != '/')
            return false;
    }
    return true;
}

static enum qr_err get_count(yyjson_val *root, const char *key, int64_t *out, struct qr_diag *diag)
{
    yyjson_val *v = yyjson_obj_get(root, key);
    if (!v)
        return QR_OK;
    if (!yyjson_is_int(v) || (yyjson_is_sint(v) && yyjson_get_sint(v) < 0) ||
        yyjson_get_uint(v) > 100000)
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: a non-negative integer", key);
    *out = (int64_t) yyjson_get_uint(v);
    return QR_OK;
}

static enum qr_err check_keys(yyjson_val *root, struct qr_diag *diag)
{
    bool seen[QR_ARRAY_LEN(FIELDS)] = {false};
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        size_t f = 0;
        while (f < QR_ARRAY_LEN(FIELDS) && strcmp(FIELDS[f], yyjson_get_str(k)))
            f++;
        if (f == QR_ARRAY_LEN(FIELDS))
            return qr_diag_set(diag, QR_ERR_INVALID, "unknown field '%.64s'", yyjson_get_str(k));
        if (seen[f])
            return qr_diag_set(diag, QR_ERR_INVALID, "duplicate field '%s'", FIELDS[f]);
        seen[f] = true;
    }
    return QR_OK;
}

static enum qr_err parse_strings(yyjson_val *root, struct qr_bench_plan_req *out,
                                 struct qr_diag *diag)
{
    yyjson_val *v = yyjson_obj_get(root, "model");
    if (v && (!yyjson_is_str(v) || !token_ok(yyjson_get_str(v), sizeof out->model)))
        return qr_diag_set(diag, QR_ERR_INVALID, "model: a model name");
    if (v)
        snprintf(out->model, sizeof out->model, "%s", yyjson_get_str(v));
    v = yyjson_obj_get(root, "family");
    if (v && (!yyjson_is_str(v) || !token_ok(yyjson_get_str(v), sizeof out->family)))
        return qr_diag_set(diag, QR_ERR_INVALID, "family: 1-63 of [A-Za-z0-9._:/-]");
    if (v)
        snprintf(out->family, sizeof out->family, "%s", yyjson_get_str(v));
    v = yyjson_obj_get(root, "variants");
    if (v && (!yyjson_is_arr(v) || yyjson_arr_size(v) == 0 ||
              yyjson_arr_size(v) > QR_BENCH_PLAN_MAX_VARIANTS))
        return qr_diag_set(diag, QR_ERR_INVALID, "variants: 1 to %u names",
                           QR_BENCH_PLAN_MAX_VARIANTS);
    size_t i, max;
    yyjson_val *e;
    yyjson_arr_foreach(v, i, max, e)
    {
        if (!yyjson_is_str(e) || !token_ok(yyjson_get_str(e), sizeof out->variants[0]))
            return qr_diag_set(diag, QR_ERR_INVALID, "variants[%zu]: 1-31 of [A-Za-z0-9._:/-]", i);
        snprintf(out->variants[i], sizeof out->variants[i], "%s", yyjson_get_str(e));
        out->n_variants = i + 1;
    }
    return QR_OK;
}

enum qr_err qr_bench_plan_req_parse(const struct yyjson_doc *in, struct qr_bench_plan_req *out,
                                    struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    yyjson_val *root = yyjson_doc_get_root((yyjson_doc *) in);
    if (!yyjson_is_obj(root))
        return qr_diag_set(diag, QR_ERR_INVALID, "the body is not a JSON object");
    enum qr_err err = check_keys(root, diag);
    err = err ? err : parse_strings(root, out, diag);
    int64_t ctx = 0;
    err = err ? err : get_count(root, "ctx", &ctx, diag);
    err = err ? err : get_count(root, "core_budget", &out->core_budget, diag);
    err = err ? err : get_count(root, "reserve_system_cores", &out->reserve_system_cores, diag);
    err = err ? err : get_count(root, "minimum_workers", &out->minimum_workers, diag);
    if (err)
        return err;
    out->ctx = (uint32_t) ctx;
    yyjson_val *v = yyjson_obj_get(root, "include_full_host_comparison");
    if (v && !yyjson_is_bool(v))
        return qr_diag_set(diag, QR_ERR_INVALID, "include_full_host_comparison: a boolean");
    out->include_full_host_comparison = yyjson_get_bool(v);
    return QR_OK;
}

static void add_candidate(struct qr_bench_plan *p, uint32_t w, bool full)
{
    for (size_t i = 0; i < p->n_candidates; i++) {
        if (p->candidates[i].workers == w)
            return;
    }
    if (p->n_candidates < QR_BENCH_PLAN_MAX_WORKERS)
        p->candidates[p->n_candidates++] = (struct qr_bench_plan_candidate){w, full};
}

enum qr_err qr_bench_plan_workers(const struct qr_bench_plan_req *req, uint32_t effective,
                                  struct qr_bench_plan *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (req->core_budget < 0 || req->reserve_system_cores < 0 || req->minimum_workers < 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "inputs must be non-negative");
    int64_t max = (int64_t) effective - req->reserve_system_cores;
    if (max < 1)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "reserve_system_cores %lld leaves no worker of %u effective CPUs",
                           (long long) req->reserve_system_cores, effective);
    if (req->core_budget > 0) {
        if (req->core_budget > (int64_t) effective)
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "core_budget %lld exceeds the %u effective host CPUs",
                               (long long) req->core_budget, effective);
        max = req->core_budget < max ? req->core_budget : max;
    }
    int64_t min = req->minimum_workers ? req->minimum_workers : QR_BENCH_PLAN_DEFAULT_MIN;
    min = min > max ? max : min;
    out->effective_host_cpus = effective;
    out->production_max_workers = (uint32_t) max;
    out->reserved_system_cores = (uint32_t) req->reserve_system_cores;
    for (size_t i = 0; i < QR_ARRAY_LEN(LADDER); i++) {
        if (LADDER[i] >= min && LADDER[i] <= max)
            add_candidate(out, LADDER[i], false);
    }
    add_candidate(out, (uint32_t) max, false);
    if (req->include_full_host_comparison && (int64_t) effective > max)
        add_candidate(out, effective, true);
    for (size_t i = 1; i < out->n_candidates; i++) { /* insertion sort, ascending */
        struct qr_bench_plan_candidate c = out->candidates[i];
        size_t j = i;
        for (; j > 0 && out->candidates[j - 1].workers > c.workers; j--)
            out->candidates[j] = out->candidates[j - 1];
        out->candidates[j] = c;
    }
    return QR_OK;
}

/* The matrix: variants x arms x worker candidates, with the command for each (variant, arm). */
static void add_matrix(const struct qr_bench_plan_req *req, const struct qr_bench_plan *p,
                       const char *family, const char *const *variants, size_t n_variants,
                       yyjson_mut_doc *d, yyjson_mut_val *obj)
{
    uint32_t ctx = req->ctx ? req->ctx : QR_BENCH_DEFAULT_CTX;
    char override[48];
    snprintf(override, sizeof override, "override:ctx=%u", ctx);
    yyjson_mut_val *m = yyjson_mut_obj_add_obj(d, obj, "matrix");
    yyjson_mut_obj_add_strcpy(d, m, "family", family);
    yyjson_mut_obj_add_str(d, m, "ab_schema", QR_BENCH_AB_SCHEMA);
    yyjson_mut_val *va = yyjson_mut_obj_add_arr(d, m, "variants");
    for (size_t i = 0; i < n_variants; i++)
        yyjson_mut_arr_add_strcpy(d, va, variants[i]);
    yyjson_mut_val *arms = yyjson_mut_obj_add_arr(d, m, "arms");
    yyjson_mut_arr_add_str(d, arms, "native");
    yyjson_mut_arr_add_strcpy(d, arms, override);
    static const char *const metrics[] = {"ttft_ms",   "prefill_tps", "decode_tps",
                                          "rss_bytes", "hwm_bytes",   "kv_bytes"};
    yyjson_mut_val *ma = yyjson_mut_obj_add_arr(d, m, "metrics");
    for (size_t i = 0; i < QR_ARRAY_LEN(metrics); i++)
        yyjson_mut_arr_add_str(d, ma, metrics[i]);
    yyjson_mut_obj_add_uint(d, m, "cells", n_variants * 2u * p->n_candidates);
    yyjson_mut_val *rows = yyjson_mut_obj_add_arr(d, m, "runs");
    for (size_t i = 0; i < n_variants; i++) {
        yyjson_mut_val *r = yyjson_mut_arr_add_obj(d, rows);
        char model[128], cmd[400];
        snprintf(model, sizeof model, "%s-%s", family, variants[i]);
        yyjson_mut_obj_add_strcpy(d, r, "variant", variants[i]);
        yyjson_mut_obj_add_strcpy(d, r, "model", model);
        yyjson_mut_val *w = yyjson_mut_obj_add_arr(d, r, "workers");
        for (size_t k = 0; k < p->n_candidates; k++)
            yyjson_mut_arr_add_uint(d, w, p->candidates[k].workers);
        snprintf(cmd, sizeof cmd,
                 "quantum-runtime bench --model %s --ab native,override:ctx=%u --threads W "
                 "--reps 5",
                 model, ctx);
        yyjson_mut_obj_add_strcpy(d, r, "command", cmd);
    }
}

enum qr_err qr_bench_plan_json(const struct qr_bench_plan_req *req, const struct qr_bench_plan *p,
                               struct yyjson_mut_doc *d, struct yyjson_mut_val *obj,
                               struct qr_diag *diag)
{
    const char *family = req->family[0] ? req->family : "gemma4";
    const char *vars[QR_BENCH_PLAN_MAX_VARIANTS];
    size_t nv = req->n_variants;
    for (size_t i = 0; i < nv; i++)
        vars[i] = req->variants[i];
    if (nv == 0 && !strcasecmp(family, "gemma4")) {
        nv = QR_ARRAY_LEN(GEMMA4_VARIANTS);
        memcpy(vars, GEMMA4_VARIANTS, sizeof GEMMA4_VARIANTS);
    }
    if (nv == 0)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "family '%s' has no default variants: give 'variants'", family);
    yyjson_mut_obj_add_str(d, obj, "schema_version", QR_BENCH_PLAN_SCHEMA);
    yyjson_mut_obj_add_uint(d, obj, "effective_host_cpus", p->effective_host_cpus);
    yyjson_mut_obj_add_uint(d, obj, "production_max_workers", p->production_max_workers);
    yyjson_mut_obj_add_uint(d, obj, "reserved_system_cores", p->reserved_system_cores);
    yyjson_mut_val *c = yyjson_mut_obj_add_arr(d, obj, "candidates");
    for (size_t i = 0; i < p->n_candidates; i++) {
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(d, c);
        yyjson_mut_obj_add_uint(d, o, "workers", p->candidates[i].workers);
        yyjson_mut_obj_add_str(d, o, "mode",
                               p->candidates[i].full_host ? "full_host_comparison" : "production");
    }
    yyjson_mut_val *notes = yyjson_mut_obj_add_arr(d, obj, "notes");
    yyjson_mut_arr_add_str(d, notes, "candidates are thread-count candidates only");
    yyjson_mut_arr_add_str(d, notes,
                           "prefill and decode are recorded separately per backend, model, "
                           "quantization and context tuple");
    yyjson_mut_arr_add_str(d, notes,
                           "each matrix cell is one controlled A/B run (native vs override, "
                           "interleaved, a fresh engine per run); the regression guard reads "
                           "the stored decode medians");
    add_matrix(req, p, family, vars, nv, d, obj);
    return QR_OK;
}
