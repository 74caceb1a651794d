/* Replica set of one backend: least-outstanding picks, ejection and re-admission (replicas.h). */
#include "backend/replicas.h"

#include <stdio.h>
#include <string.h>

#define DEF_FAIL_THRESHOLD 3u
#define DEF_BACKOFF_MS     1000u
#define DEF_BACKOFF_MAX_MS 30000u

const char *qr_replica_state_str(enum qr_replica_state s)
{
    return s == QR_REPLICA_EJECTED ? "ejected" : "admitted";
}

enum qr_err qr_replica_set_init(struct qr_replica_set *s, const char *const *urls, size_t n,
                                const struct qr_replica_opts *opts, struct qr_diag *diag)
{
    memset(s, 0, sizeof *s);
    if (n == 0 || n > QR_REPLICA_MAX)
        return qr_diag_set(diag, QR_ERR_INVALID, "a replica set has 1 to %u urls, not %zu",
                           QR_REPLICA_MAX, n);
    for (size_t i = 0; i < n; i++) {
        size_t len = urls[i] ? strlen(urls[i]) : 0;
        if (len == 0 || len >= QR_REPLICA_URL_MAX)
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "replica %zu: the url is empty or longer "
                               "than %u bytes",
                               i, QR_REPLICA_URL_MAX - 1);
        for (size_t k = 0; k < i; k++) {
            if (!strcmp(urls[k], urls[i]))
                return qr_diag_set(diag, QR_ERR_INVALID, "replica %zu: '%s' is listed twice", i,
                                   urls[i]);
        }
        memcpy(s->r[i].url, urls[i], len + 1);
    }
    s->n = n;
    s->o.fail_threshold = opts && opts->fail_threshold ? opts->fail_threshold : DEF_FAIL_THRESHOLD;
    s->o.backoff_initial_ms =
        opts && opts->backoff_initial_ms ? opts->backoff_initial_ms : DEF_BACKOFF_MS;
    s->o.backoff_max_ms = opts && opts->backoff_max_ms ? opts->backoff_max_ms : DEF_BACKOFF_MAX_MS;
    if (s->o.backoff_max_ms < s->o.backoff_initial_ms)
        s->o.backoff_max_ms = s->o.backoff_initial_ms;
    return QR_OK;
}

int qr_replica_pick(struct qr_replica_set *s, const bool *tried)
{
    int best = -1;
    for (size_t k = 0; k < s->n; k++) {
        size_t i = (s->next + k) % s->n; /* ties: the first from the rotation point wins */
        const struct qr_replica *r = &s->r[i];
        if (r->state != QR_REPLICA_ADMITTED || (tried && tried[i]))
            continue;
        if (best < 0 || r->outstanding < s->r[best].outstanding)
            best = (int) i;
    }
    if (best >= 0)
        s->next = ((size_t) best + 1) % s->n;
    return best;
}

void qr_replica_begin(struct qr_replica_set *s, int i)
{
    if (NEVER(i < 0 || (size_t) i >= s->n))
        return;
    s->r[i].outstanding++;
    s->r[i].requests++;
}

static void eject(struct qr_replica_set *s, struct qr_replica *r, int64_t now_ms)
{
    uint64_t delay = s->o.backoff_initial_ms;
    for (unsigned k = 0; k < r->ejections_in_row && delay < s->o.backoff_max_ms; k++)
        delay *= 2;
    if (delay > s->o.backoff_max_ms)
        delay = s->o.backoff_max_ms;
    if (r->state != QR_REPLICA_EJECTED)
        r->ejections++;
    r->state = QR_REPLICA_EJECTED;
    r->ejections_in_row++;
    r->next_probe_ms = now_ms + (int64_t) delay;
}

static void note_error(struct qr_replica *r, const char *error)
{
    snprintf(r->last_error, sizeof r->last_error, "%s", error && *error ? error : "failed");
}

bool qr_replica_end(struct qr_replica_set *s, int i, bool ok, const char *error, int64_t now_ms)
{
    if (NEVER(i < 0 || (size_t) i >= s->n))
        return false;
    struct qr_replica *r = &s->r[i];
    if (ALWAYS(r->outstanding > 0))
        r->outstanding--;
    if (ok) {
        r->consecutive_failures = 0;
        return false;
    }
    r->failures++;
    r->consecutive_failures++;
    note_error(r, error);
    if (r->state == QR_REPLICA_ADMITTED && r->consecutive_failures >= s->o.fail_threshold) {
        eject(s, r, now_ms);
        return true;
    }
    return false;
}

size_t qr_replica_probes_due(const struct qr_replica_set *s, int64_t now_ms, int *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n && n < cap; i++) {
        if (s->r[i].state == QR_REPLICA_EJECTED && s->r[i].next_probe_ms <= now_ms)
            out[n++] = (int) i;
    }
    return n;
}

void qr_replica_probe_result(struct qr_replica_set *s, int i, bool healthy, const char *error,
                             int64_t now_ms)
{
    if (NEVER(i < 0 || (size_t) i >= s->n))
        return;
    struct qr_replica *r = &s->r[i];
    if (healthy) {
        if (r->state == QR_REPLICA_EJECTED)
            r->readmissions++;
        r->state = QR_REPLICA_ADMITTED;
        r->consecutive_failures = 0;
        r->ejections_in_row = 0;
        return;
    }
    note_error(r, error);
    r->consecutive_failures++;
    if (r->state == QR_REPLICA_EJECTED)
        eject(s, r, now_ms); /* the next probe, later */
    else if (r->consecutive_failures >= s->o.fail_threshold)
        eject(s, r, now_ms);
}

bool qr_replica_may_retry(const struct qr_replica_set *s, bool output_started, bool retryable,
                          const bool *tried)
{
    if (output_started || !retryable)
        return false;
    for (size_t i = 0; i < s->n; i++) {
        if (s->r[i].state == QR_REPLICA_ADMITTED && !(tried && tried[i]))
            return true;
    }
    return false;
}
