/* Conformance evidence in the evidence store (store/store.h): a finished report becomes one
 * conformance record whose fields are read from the report itself (backend, engine_version,
 * model, host_class, summary counts); a `ledger evaluate` run of one model adds one bench record
 * (name QR_CONF_EVAL_BENCH) linking the pinned and the candidate conformance records and their
 * decode throughput samples to the candidate ledger entry. `ledger promote` decides from these
 * records only (qr_conf_promote_check). docs/CONFORMANCE.md "Evidence" and "Ledger promotion".
 *
 * Ownership: strings passed in are borrowed for the call. */
#ifndef QR_CONFORMANCE_RECORD_H
#define QR_CONFORMANCE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "bench/guard.h"
#include "core/err.h"

struct qr_store;

#define QR_CONF_KIND_MANUAL    "manual"          /* a plain `conformance` run */
#define QR_CONF_KIND_PINNED    "pinned"          /* ledger evaluate: the configured engine */
#define QR_CONF_KIND_CANDIDATE "candidate"       /* ledger evaluate: the engine under test */
#define QR_CONF_EVAL_BENCH     "ledger.evaluate" /* bench record name of one evaluated model */
#define QR_CONF_EVAL_METRIC    "decode_tps"
#define QR_CONF_MAX_SAMPLES    32u
#define QR_CONF_PROMOTE_MAX    32u /* models one promotion decides on */

/* Open (creating the directory and the file when missing) <state_dir>/evidence.db. *out is owned
 * by the caller (qr_store_close). */
enum qr_err qr_conf_store_open(const char *state_dir, struct qr_store **out, struct qr_diag *diag);

/* Add report_json (a conformance report) as a conformance record of this kind: backend_id = the
 * report's backend ("" when null), engine_version = its engine_version ("" when null), model,
 * hardware_class = host_class ("" when null), n_pass/n_fail/n_skip = its summary, report_json =
 * the text as given. QR_ERR_INVALID when the text is not such a report. */
enum qr_err qr_conf_record_add(struct qr_store *s, const char *kind, const char *report_json,
                               int64_t *out_id, struct qr_diag *diag);

/* One engine's side of an evaluation. */
struct qr_conf_eval_arm {
    const char *engine_path;
    const char *const *names; /* the engine's build names (GET /v1/backends engine.names) */
    size_t n_names;
    int64_t conformance_id; /* its conformance record */
    const double *tps;      /* decode tokens/s samples that succeeded */
    size_t n_tps;
};

struct qr_conf_eval {
    const char *candidate_entry; /* the ledger entry id the evaluation wrote */
    const char *run;             /* RFC 3339 start of the evaluate command: groups its models */
    const char *model;
    const char *backend;        /* the backend id */
    const char *hardware_class; /* "" when unknown */
    unsigned gen_tokens;
    struct qr_conf_eval_arm pinned, candidate;
};

/* Add one evaluated model as a bench record: name QR_CONF_EVAL_BENCH, model, variant_a = the
 * pinned build's last name, variant_b = the candidate's, metric QR_CONF_EVAL_METRIC,
 * values_json {"candidate_entry","run","backend","hardware_class","gen_tokens","pinned":{...},
 * "candidate":{"engine","engine_versions","conformance_id","decode_tps":[..],"median","stddev"}}.
 */
enum qr_err qr_conf_eval_add(struct qr_store *s, const struct qr_conf_eval *e, int64_t *out_id,
                             struct qr_diag *diag);

/* Case by case: does every case that passed in pinned_json pass in candidate_json? false with the
 * first regressions named in why (caller storage of cap bytes; "" when true). Unreadable reports
 * answer false. */
bool qr_conf_compare_reports(const char *pinned_json, const char *candidate_json, char *why,
                             size_t cap);

/* median and sample standard deviation (NAN when n < 2) of v[0..n). */
/* The case object with this id in a parsed report's "cases" (root: the report object), or NULL. */
yyjson_val *qr_conf_report_case(yyjson_val *root, const char *id);

double qr_conf_median(const double *v, size_t n);
double qr_conf_stddev(const double *v, size_t n);

struct qr_conf_promote_model {
    char model[128];
    int64_t eval_id, pinned_id, candidate_id; /* the records decided on */
    bool cases_ok;                            /* every case the pinned passed, passed */
    struct qr_guard_decision guard;           /* candidate decode vs pinned (bench/guard.h) */
    char why[512];                            /* the case regressions, or "" */
};

struct qr_conf_promote {
    bool ok;      /* every model: cases_ok and the guard verified */
    char run[40]; /* the evaluation decided on; "" when none was found */
    size_t n_models;
    struct qr_conf_promote_model models[QR_CONF_PROMOTE_MAX];
    char reason[512]; /* why not, when no model could be decided on; else "" */
};

/* Decide a promotion of candidate_entry from the store: its newest evaluation run (all models of
 * that run), each model's stored pinned and candidate reports compared case by case, and the
 * candidate's decode median against the pinned one through the regression guard (threshold_pct,
 * < 0 = QR_GUARD_DEFAULT_THRESHOLD_PCT; the pinned arm is the guard's native side). Fails closed:
 * no evaluation, a missing record or too few samples is not ok. QR_OK whenever the store could be
 * read (the verdict is in out); an error only when it could not. */
enum qr_err qr_conf_promote_check(struct qr_store *s, const char *candidate_entry,
                                  double threshold_pct, struct qr_conf_promote *out,
                                  struct qr_diag *diag);

#endif
