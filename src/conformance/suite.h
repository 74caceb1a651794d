/* The conformance suite: backend-independent checks run through a running daemon's own OpenAI API
 * (docs/CONFORMANCE.md). The suite reads what the daemon claims about one model (GET
 * /v1/models/{M}, else POST /api/show, plus the serving backend's "supported" keys from GET
 * /v1/backends), runs every case whose capability keys are claimed and skips the others with the
 * reason, and writes the report (JSON schema quantum.runtime/conformance-report/v1alpha1, and a
 * Markdown table).
 *
 * Area prefix: qr_conf_. Blocking libcurl easy calls: this is CLI code, never run on the daemon's
 * event loop. */
#ifndef QR_CONFORMANCE_SUITE_H
#define QR_CONFORMANCE_SUITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"

#define QR_CONF_REPORT_SCHEMA "quantum.runtime/conformance-report/v1alpha1"
#define QR_CONF_MAX_BODY      (32u << 20) /* cap on any answer the suite reads */
#define QR_CONF_REASON_MAX    256

enum qr_conf_status {
    QR_CONF_PASS = 0,
    QR_CONF_FAIL = 1,
    QR_CONF_SKIP = 2,
};

/* One HTTP exchange. body and model_header are malloc'd, owned by the struct
 * (qr_conf_resp_cleanup). status 0: the transfer failed (error holds why). */
struct qr_conf_resp {
    long status;
    char *body; /* NUL-terminated, never NULL after qr_conf_http */
    size_t len;
    char *model_header; /* X-Quantum-Model, or NULL when absent */
    char error[128];
};

/* What the daemon says about the model under test. Strings owned by the context. */
struct qr_conf_ctx {
    const char *url;        /* borrowed: base URL, no trailing slash needed */
    const char *model;      /* borrowed */
    uint64_t claimed;       /* bit k: capability key k (capability.h) is claimed */
    int64_t context_length; /* -1: not reported */
    char backend[64];       /* the backend /v1/models names, "" when none */
    char *engine_version;   /* NULL: unknown */
    char *host_class;       /* NULL: unknown */
    char *model_header;     /* the first X-Quantum-Model seen; identity checks the rest */
    long timeout_ms;        /* per request */
    /* Cases that break the daemon's engine on purpose (crash.restart kills the model's engine
     * process) run only when set: the runner started the daemon itself, or the user passed
     * --allow-destructive. Otherwise they are skipped with that reason. */
    bool destructive;
    /* Comma-separated case ids not to run (--skip), or NULL: each is reported as skipped with
     * "not selected (--skip)". */
    const char *skip;
};

/* One case's outcome. needs points into the static case table. */
struct qr_conf_result {
    const char *id;
    const char *const *needs;    /* NULL-terminated capability key names */
    const char *const *verifies; /* NULL-terminated, or NULL: the case's verifies list */
    enum qr_conf_status status;
    char reason[QR_CONF_REASON_MAX];
    double ms;
};

/* method "GET"/"POST"; body may be NULL. Always fills out (cleanup it). */
void qr_conf_http(const struct qr_conf_ctx *c, const char *method, const char *path,
                  const char *body, struct qr_conf_resp *out);
void qr_conf_resp_cleanup(struct qr_conf_resp *r);

/* Is the capability key named name ("tools.calling") claimed? Unknown names: false. */
bool qr_conf_claims(const struct qr_conf_ctx *c, const char *name);

/* Is [s, s+len) valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF)? */
bool qr_conf_utf8_valid(const char *s, size_t len);

/* Fill c from the daemon (claims, context length, backend, engine version, host class).
 * QR_ERR_NOT_FOUND: the daemon answered but describes no such model; QR_ERR_UPSTREAM: it did not
 * answer. Either way err (caller storage of err_cap bytes) says why. */
enum qr_err qr_conf_probe(struct qr_conf_ctx *c, char *err, size_t err_cap);
void qr_conf_ctx_cleanup(struct qr_conf_ctx *c);

/* The serving backend's object in GET /v1/backends (by the id or kind /v1/models named; without
 * one, the only backend), or NULL. *doc holds the answer (NULL unless 200; free it). */
yyjson_val *qr_conf_backend_of(const struct qr_conf_ctx *c, yyjson_doc **doc);

/* Is id one of the comma-separated ids in list (NULL: none)? */
bool qr_conf_id_listed(const char *list, const char *id);

/* Run every case of the table (cases.h) in order; results is caller storage of
 * qr_conf_n_cases() entries. progress: print one line per case on stderr. */
void qr_conf_run(struct qr_conf_ctx *c, struct qr_conf_result *results, bool progress);

/* The report as JSON text (malloc'd, NULL on OOM) and as Markdown (malloc'd). */
char *qr_conf_report_json(const struct qr_conf_ctx *c, const struct qr_conf_result *results,
                          size_t n, const char *started_at, double duration_ms);
char *qr_conf_report_markdown(const struct qr_conf_ctx *c, const struct qr_conf_result *results,
                              size_t n, const char *started_at, double duration_ms);

#endif
