/* The benchmark plan, schema quantum.runtime/model-benchmark-plan/v1alpha1 (POST
 * /v1/benchmark-plan): the predecessor's worker-count ladder (docs/BENCHMARK-AB.md "Plan"; its
 * algorithm and field names kept) and, added here, the model matrix: the variants of a family
 * (Gemma 4: E2B, E4B, 12B, 26B-A4B, 31B by default; any family with its variants from the body)
 * times the A/B arms (native, override) times the worker candidates, each cell with the
 * `quantum-runtime bench` command that measures it. Pure: the caller supplies the host's
 * effective logical CPUs. */
#ifndef QR_BENCH_PLAN_H
#define QR_BENCH_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct yyjson_doc;
struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_BENCH_PLAN_SCHEMA       "quantum.runtime/model-benchmark-plan/v1alpha1"
#define QR_BENCH_PLAN_MAX_VARIANTS 16u
#define QR_BENCH_PLAN_MAX_WORKERS  16u
#define QR_BENCH_PLAN_DEFAULT_MIN  4u

struct qr_bench_plan_req {
    char model[256]; /* "" = none */
    char family[64]; /* "" = gemma4 */
    char variants[QR_BENCH_PLAN_MAX_VARIANTS][32];
    size_t n_variants; /* 0 = the family's default (gemma4 only) */
    uint32_t ctx;      /* the override arm's context; 0 = QR_BENCH_DEFAULT_CTX */
    int64_t core_budget, reserve_system_cores, minimum_workers;
    bool include_full_host_comparison;
};

struct qr_bench_plan_candidate {
    uint32_t workers;
    bool full_host; /* mode full_host_comparison, else production */
};

struct qr_bench_plan {
    uint32_t effective_host_cpus, production_max_workers, reserved_system_cores;
    struct qr_bench_plan_candidate candidates[QR_BENCH_PLAN_MAX_WORKERS];
    size_t n_candidates;
};

/* Decode a request body (unknown and duplicate fields, wrong types, negative numbers are errors;
 * every field optional). */
enum qr_err qr_bench_plan_req_parse(const struct yyjson_doc *in, struct qr_bench_plan_req *out,
                                    struct qr_diag *diag);

/* The worker ladder (upstream 3.12): max = effective - reserve (error below 1), bounded by
 * core_budget (error above effective), min = minimum_workers or 4, clamped to max; the ladder
 * values in [min, max] plus max as production, effective as full_host_comparison when asked and
 * above max; ascending. */
enum qr_err qr_bench_plan_workers(const struct qr_bench_plan_req *req, uint32_t effective,
                                  struct qr_bench_plan *out, struct qr_diag *diag);

/* The "plan" object into obj: the predecessor's members plus "matrix". canonical_model_id: the
 * resolved model or NULL. QR_ERR_INVALID for a family without variants. */
enum qr_err qr_bench_plan_json(const struct qr_bench_plan_req *req, const struct qr_bench_plan *p,
                               struct yyjson_mut_doc *doc, struct yyjson_mut_val *obj,
                               struct qr_diag *diag);

#endif
