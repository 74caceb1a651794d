/* Conformance evidence as daemon state (verified.c): the conformance runs stored in the evidence
 * store (<state_dir>/evidence.db, written by `quantum-runtime conformance`) become the router's
 * verified and refuted records, and the per-key capability states that /api/show, /v1/models and
 * /v1/backends report ("declared", "verified", "refuted", "blocked"). Rules: docs/ROUTER.md
 * "Conformance evidence"; shapes: docs/API.md "Capability states".
 *
 * Ownership and threading: the state is process-wide static storage (one daemon per process,
 * like the context-override guard's, guard_glue.c), used from the event loop only. Records handed
 * out are borrowed until the next refresh; refreshing never frees, it overwrites. */
#ifndef QR_API_VERIFIED_H
#define QR_API_VERIFIED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capability/capability.h"
#include "core/err.h"

struct qr_router_env;

struct qr_app;
struct qr_route_verified;
struct qr_route_refuted;
struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_VERIFIED_MAX_RECORDS 64u         /* newest conformance records read per refresh */
#define QR_VERIFIED_MAX_CASES   256u        /* cases read from one report */
#define QR_VERIFIED_MAX_REFUTED 512u        /* refuted router records (one per failing case) */
#define QR_VERIFIED_RECHECK_MS  1000u       /* the store file is looked at no more often */
#define QR_VERIFIED_ARENA       (64u << 20) /* bytes one refresh may read (report texts) */

/* The first failing case that refuted one key. */
struct qr_verified_case {
    char id[64];      /* case id ("reasoning.on"); "" when the key is not refuted */
    char reason[240]; /* the case's reason, truncated */
};

/* What one conformance report says, per capability key. */
struct qr_verified_report {
    struct qr_cap_set verified; /* union of the passing cases' verifies, minus refuted */
    struct qr_cap_set refuted;  /* union of the failing cases' verifies */
    struct qr_verified_case failed[QR_CAP__COUNT]; /* per refuted key: the first failing case */
};

/* Read a quantum.runtime/conformance-report/v1alpha1 document's cases[] {id, verifies[], status,
 * reason}. A name in verifies that is no capability key is skipped (a newer suite); a skipped case
 * counts for nothing. QR_ERR_INVALID with diag when json is not such a report (no cases array, a
 * case without id or status, more than QR_VERIFIED_MAX_CASES cases), out then all empty. out is
 * caller storage. */
enum qr_err qr_verified_report_parse(const char *json, size_t len, struct qr_verified_report *out,
                                     struct qr_diag *diag);

/* Read the conformance records again when due: on the first call, after the catalog was rebuilt
 * (start, SIGHUP), and when evidence.db or its -wal changed (size or mtime, looked at no more than
 * once per QR_VERIFIED_RECHECK_MS). The newest QR_VERIFIED_MAX_RECORDS records are read; per
 * (backend id, canonical model, engine version) the newest record of this host's hardware class
 * ("" = unknown equals unknown) decides. Called by qr_api_route_env. */
void qr_api_verified_refresh(struct qr_app *app);

/* The router's records from the last refresh (borrowed until the next one): one verified record
 * per decided (backend, model, engine version, hardware class) with keys verified; one refuted
 * record per failing case, with detail "conformance report N (T): CASE failed: REASON". */
const struct qr_route_verified *qr_api_verified_records(size_t *n);
const struct qr_route_refuted *qr_api_verified_refuted(size_t *n);

/* Add "capability_states" to obj for the registry model name resolves to, as served by the
 * backend that serves it (the first with an artifact of its kind, else the one the name goes
 * to): {"<key>": {"state": "declared"|"verified"|"refuted"|"blocked", ...}} for every key the
 * manifest or the backend's descriptor claims supported, a report decided or a ledger block hits
 * (docs/API.md "Capability states"). Nothing is added when name resolves to no model.
 * QR_ERR_NOMEM only. */
/* env: a route environment the caller built with qr_api_route_env (one for a whole listing),
 * or NULL to build one here. */
enum qr_err qr_api_capability_states_model(struct qr_app *app, const struct qr_router_env *env,
                                           const char *name, struct yyjson_mut_doc *doc,
                                           struct yyjson_mut_val *obj);

/* The same for configured backend i over all its models: "declared" for what its descriptor
 * claims (supported or conditional), "verified"/"refuted" with the model a report was about,
 * "blocked" for a ledger block certain for every model of the backend. QR_ERR_NOMEM only. */
enum qr_err qr_api_capability_states_backend(struct qr_app *app, size_t i,
                                             struct yyjson_mut_doc *doc,
                                             struct yyjson_mut_val *obj);

#endif
