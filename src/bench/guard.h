/* The context-override regression guard: may an override path be marked verified for (model,
 * backend, engine version, host)? Only from stored A/B evidence (bench/ab.h), and never when the
 * override's median decode tokens/s is lower than the native path's by more than a threshold
 * (default QR_GUARD_DEFAULT_THRESHOLD_PCT). Fails closed: no evidence, too few samples or a
 * native median that is not a positive number all answer "not verified".
 *
 * qr_guard_decide is a pure function; qr_guard_evidence_find reads the newest matching A/B run
 * from the evidence store. docs/BENCHMARK-AB.md "Regression guard". */
#ifndef QR_BENCH_GUARD_H
#define QR_BENCH_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct qr_store;
struct qr_route_verified;
struct qr_route_refuted;

#define QR_GUARD_DEFAULT_THRESHOLD_PCT 5.0
#define QR_GUARD_MIN_SAMPLES           2u   /* ok samples each arm needs */
#define QR_GUARD_MAX_CV_PCT            15.0 /* stddev / median above this: too noisy to verify */

/* The A/B evidence for one (model, backend, engine version, host). */
struct qr_guard_evidence {
    bool found;                            /* a matching A/B run exists */
    int64_t row_id, time_ms;               /* its decode_tps row */
    double native_median;                  /* tokens/s */
    double override_median;                /* tokens/s */
    size_t native_n, override_n;           /* ok samples */
    double native_stddev, override_stddev; /* tokens/s; NAN or 0 when unknown */
    char override_label[128];              /* "override:ctx=4096" */
};

enum qr_guard_verdict {
    QR_GUARD_NO_EVIDENCE = 0,  /* nothing stored for this key: not verified */
    QR_GUARD_INSUFFICIENT = 1, /* too few samples, no usable native median, or a faster override
                                  measured too noisily to trust: not verified */
    QR_GUARD_REFUSED = 2,      /* the override loses more decode throughput than allowed */
    QR_GUARD_VERIFIED = 3,     /* the override keeps decode within the threshold */
};

struct qr_guard_decision {
    enum qr_guard_verdict verdict;
    bool override_verified; /* verdict == QR_GUARD_VERIFIED */
    double delta_pct;       /* (override - native) / native * 100; NAN when not computed */
    double threshold_pct;   /* the threshold applied */
    char reason[256];
};

/* Static name: "no_evidence", "insufficient", "refused", "verified". */
const char *qr_guard_verdict_str(enum qr_guard_verdict v);

/* Decide from ev (borrowed; NULL = no evidence). threshold_pct < 0 or not finite = the default.
 * The override is allowed when override_median * 100 >= native_median * (100 - threshold) (within
 * a relative 1e-9 for decimal rounding): a loss of exactly the threshold passes, more is refused.
 */
void qr_guard_decide(const struct qr_guard_evidence *ev, double threshold_pct,
                     struct qr_guard_decision *out);

/* The newest stored A/B run (name QR_BENCH_AB_NAME, metric decode_tps) for model whose
 * values_json names this backend, engine version and host fingerprint (every one must be set).
 * out->found false when there is none; a row whose JSON is unreadable is skipped. */
enum qr_err qr_guard_evidence_find(struct qr_store *s, const char *model, const char *backend,
                                   const char *engine_version, const char *host_fingerprint,
                                   struct qr_guard_evidence *out, struct qr_diag *diag);

/* The router's conformance input for context.override from a decision (router/router.h), so
 * that the guard is where override verification is decided: VERIFIED fills *ok (returns 1),
 * REFUSED fills *bad (returns -1), NO_EVIDENCE / INSUFFICIENT fill neither (returns 0: the router
 * has no measured claim and must not forward). Every string is borrowed from the arguments (all
 * must be set; a NULL one returns 0); detail is e.g. "bench A/B run 41: -6.2% decode". */
int qr_guard_route_record(const struct qr_guard_decision *d, const char *backend_id,
                          const char *model_id, const char *engine_version,
                          const char *hardware_class, const char *detail,
                          struct qr_route_verified *ok, struct qr_route_refuted *bad);

#endif
