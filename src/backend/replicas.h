/* The replica set of one backend: several endpoints that serve the same canonical models (vLLM
 * nodes behind one configured backend, or the instances of a multi-node deployment registered as
 * one backend). Balancing and health, as pure state: the caller owns the clock, the transfers and
 * the probes, and reports what happened.
 *
 *   - pick: the admitted replica with the fewest outstanding requests; ties go round-robin from
 *     the one after the last pick, so equal replicas share the load; replicas a request already
 *     tried are skipped (a retry never goes back to the one that failed it);
 *   - ejection: `fail_threshold` consecutive failures (transport errors, 5xx, failed probes)
 *     eject a replica; while ejected it takes no requests and is probed when its backoff expires
 *     (doubling from backoff_initial_ms to backoff_max_ms per ejection in a row);
 *   - re-admission: one successful probe (or request) re-admits it and resets the backoff;
 *   - retry: only before the first byte reached the client, only for a retryable error, only on
 *     another replica of the SAME backend (so the canonical model never changes), at most once per
 *     replica of the set.
 *
 * Not thread-safe: one event loop owns a set. */
#ifndef QR_BACKEND_REPLICAS_H
#define QR_BACKEND_REPLICAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define QR_REPLICA_MAX       64u  /* replicas in one set */
#define QR_REPLICA_URL_MAX   512u /* bytes of a base URL, NUL included */
#define QR_REPLICA_ERROR_MAX 256u

enum qr_replica_state {
    QR_REPLICA_ADMITTED = 0, /* takes requests */
    QR_REPLICA_EJECTED = 1,  /* takes none; probed when next_probe_ms is reached */
};

const char *qr_replica_state_str(enum qr_replica_state s); /* "admitted", "ejected" */

struct qr_replica {
    char url[QR_REPLICA_URL_MAX];
    enum qr_replica_state state;
    unsigned outstanding;          /* requests begun and not ended */
    unsigned consecutive_failures; /* reset by a success */
    unsigned ejections_in_row;     /* ejections without a re-admission in between */
    int64_t next_probe_ms;         /* EJECTED: when to probe it next */
    uint64_t requests, failures, ejections, readmissions; /* counters */
    char last_error[QR_REPLICA_ERROR_MAX];
};

struct qr_replica_opts {
    unsigned fail_threshold;     /* consecutive failures that eject (default 3) */
    uint32_t backoff_initial_ms; /* first probe after an ejection (default 1000) */
    uint32_t backoff_max_ms;     /* cap of the doubling (default 30000) */
};

struct qr_replica_set {
    struct qr_replica r[QR_REPLICA_MAX];
    size_t n;
    size_t next; /* round-robin start of the next pick */
    struct qr_replica_opts o;
};

/* urls: n base URLs (1..QR_REPLICA_MAX), each non-empty, shorter than QR_REPLICA_URL_MAX and
 * distinct; opts may be NULL (defaults). QR_ERR_INVALID with a message naming the bad one. */
enum qr_err qr_replica_set_init(struct qr_replica_set *s, const char *const *urls, size_t n,
                                const struct qr_replica_opts *opts, struct qr_diag *diag);

/* The replica for the next request, or -1 when none is admitted (or every admitted one is in
 * tried). tried: n flags, may be NULL. */
int qr_replica_pick(struct qr_replica_set *s, const bool *tried);

/* A request starts on replica i (after a pick). */
void qr_replica_begin(struct qr_replica_set *s, int i);

/* The request on replica i ended: ok, or failed with error (a transport error or 5xx of the
 * replica; a client's cancel or a 4xx is ok: the replica did its job). now_ms: the caller's
 * clock. Returns true when this failure ejected it. */
bool qr_replica_end(struct qr_replica_set *s, int i, bool ok, const char *error, int64_t now_ms);

/* Ejected replicas whose probe is due at now_ms: their indices into out (cap), the count. */
size_t qr_replica_probes_due(const struct qr_replica_set *s, int64_t now_ms, int *out, size_t cap);

/* The probe of replica i answered (healthy or not). A healthy probe re-admits it; a failed one
 * schedules the next probe with the doubled backoff. */
void qr_replica_probe_result(struct qr_replica_set *s, int i, bool healthy, const char *error,
                             int64_t now_ms);

/* May a failed attempt be retried on another replica? Only before the first byte reached the
 * client, for a retryable error, and while an untried admitted replica exists. */
bool qr_replica_may_retry(const struct qr_replica_set *s, bool output_started, bool retryable,
                          const bool *tried);

#endif
