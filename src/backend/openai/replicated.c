/* Requests over the replicas of one OpenAI-compatible backend; see replicated.h. The balancing
 * and health rules are backend/replicas.c's (pure state); this file runs the transfers, the
 * retries and the probes on the event loop. */
#include "backend/openai/replicated.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "api/codec.h"
#include "backend/job.h"
#include "backend/replicas.h"
#include "core/log.h"

#define PROBE_TICK_MS    250  /* how often due probes of ejected replicas are looked for */
#define PROBE_TIMEOUT_MS 2000 /* one probe of an ejected replica */

struct qr_oa_replicas {
    struct qr_backend *b;
    struct qr_replica_set set;
    const char *health_path;
    struct event *tick; /* while a replica is ejected */
    bool probing[QR_REPLICA_MAX];
    struct probe *probes; /* live probes, cancelled on free */
};

struct probe {
    struct qr_oa_replicas *rs;
    struct probe *next;
    int i;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- probes of ejected replicas ---- */

static void arm(struct qr_oa_replicas *rs)
{
    struct timeval tv = {0, PROBE_TICK_MS * 1000};
    if (rs->tick && !evtimer_pending(rs->tick, NULL))
        evtimer_add(rs->tick, &tv);
}

static bool any_ejected(const struct qr_oa_replicas *rs)
{
    for (size_t i = 0; i < rs->set.n; i++) {
        if (rs->set.r[i].state == QR_REPLICA_EJECTED)
            return true;
    }
    return false;
}

static void probe_done(enum qr_err err, int status, struct qr_slice body,
                       const struct qr_diag *diag, void *arg)
{
    (void) body;
    struct probe *p = arg;
    struct qr_oa_replicas *rs = p->rs;
    for (struct probe **pp = &rs->probes; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    int i = p->i;
    free(p);
    rs->probing[i] = false;
    if (err == QR_ERR_CANCELLED)
        return;
    bool healthy = !err && status >= 200 && status <= 299;
    char why[QR_REPLICA_ERROR_MAX];
    if (err)
        snprintf(why, sizeof why, "probe: %.200s", diag ? diag->msg : qr_err_str(err));
    else
        snprintf(why, sizeof why, "probe: status %d", status);
    qr_replica_probe_result(&rs->set, i, healthy, healthy ? NULL : why, now_ms());
    const char *detail = healthy ? "" : why;
    QR_LOG(healthy ? QR_LOG_INFO : QR_LOG_DEBUG,
           healthy ? "replica re-admitted" : "replica still failing",
           QR_LF_S("backend", qr_backend_id(rs->b)), QR_LF_S("replica", rs->set.r[i].url),
           QR_LF_S("detail", detail));
    if (any_ejected(rs))
        arm(rs);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    struct qr_oa_replicas *rs = arg;
    int due[QR_REPLICA_MAX];
    size_t n = qr_replica_probes_due(&rs->set, now_ms(), due, QR_REPLICA_MAX);
    for (size_t k = 0; k < n; k++) {
        int i = due[k];
        if (rs->probing[i])
            continue;
        struct probe *p = calloc(1, sizeof(*p));
        if (!p)
            break;
        p->rs = rs;
        p->i = i;
        p->next = rs->probes;
        rs->probes = p;
        rs->probing[i] = true;
        const char *key = rs->b->env.spec ? rs->b->env.spec->api_key : NULL;
        if (qr_fetch(rs->b, rs->set.r[i].url, rs->health_path, key, PROBE_TIMEOUT_MS, 4096,
                     probe_done, p)) {
            rs->probes = p->next;
            rs->probing[i] = false;
            free(p);
        }
    }
    if (any_ejected(rs))
        arm(rs);
}

struct qr_oa_replicas *qr_oa_replicas_new(struct qr_backend *b, const char *const *urls, size_t n,
                                          const char *health_path, struct qr_diag *diag)
{
    struct qr_oa_replicas *rs = calloc(1, sizeof(*rs));
    if (!rs) {
        qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
        return NULL;
    }
    rs->b = b;
    rs->health_path = health_path;
    if (qr_replica_set_init(&rs->set, urls, n, NULL, diag)) {
        free(rs);
        return NULL;
    }
    if (b->env.base && !(rs->tick = evtimer_new(b->env.base, on_tick, rs))) {
        qr_diag_set(diag, QR_ERR_NOMEM, "cannot create the replica probe timer");
        free(rs);
        return NULL;
    }
    return rs;
}

void qr_oa_replicas_free(struct qr_oa_replicas *rs)
{
    if (!rs)
        return;
    if (rs->tick)
        event_free(rs->tick);
    /* live probes are qr_fetch calls of the backend: qr_backend_free cancels them (each callback
     * frees its probe) before the adapter's close frees the set */
    free(rs);
}

void qr_oa_replicas_set_health_path(struct qr_oa_replicas *rs, const char *health_path)
{
    rs->health_path = health_path;
}

const char *qr_oa_replicas_probe_url(struct qr_oa_replicas *rs)
{
    for (size_t i = 0; i < rs->set.n; i++) {
        if (rs->set.r[i].state == QR_REPLICA_ADMITTED)
            return rs->set.r[i].url;
    }
    return NULL;
}

/* ---- a request over the replicas ---- */

struct rjob {
    struct qr_oa_replicas *rs;
    struct qr_dialect d;
    const char *api_key;
    const struct qr_request *req;
    qr_event_fn fn;
    void *arg;
    struct qr_job *handle; /* what the caller holds */
    struct qr_job *inner;  /* the attempt running, NULL between attempts */
    struct event *retry;   /* the next attempt, started from the loop */
    int replica;           /* of the attempt running, -1 none */
    bool tried[QR_REPLICA_MAX];
    bool start_sent; /* START reached the consumer (once, whatever the attempts) */
    bool payload;    /* something beyond START/META reached it: no more retries */
    bool paused;
    char last_error[QR_REPLICA_ERROR_MAX];
};

static void rjob_free(struct rjob *rj)
{
    if (rj->retry)
        event_free(rj->retry);
    qr_job_free_custom(rj->handle);
    free(rj);
}

static enum qr_err attempt(struct rjob *rj, struct qr_api_error *err);

/* The request ends without another attempt: an ERROR of our own (nothing reached the client). */
static void give_up(struct rjob *rj)
{
    struct qr_event ev = {.type = QR_EV_START};
    ev.name = qr_slice_str(qr_backend_id(rj->rs->b));
    if (!rj->start_sent && rj->fn(rj->arg, &ev)) {
        rjob_free(rj);
        return;
    }
    memset(&ev, 0, sizeof(ev));
    char msg[QR_REPLICA_ERROR_MAX + 200];
    snprintf(msg, sizeof msg, "backend '%s': no replica could serve the request (last: %s)",
             qr_backend_id(rj->rs->b), rj->last_error);
    ev.type = QR_EV_ERROR;
    ev.status = 502;
    ev.code = qr_slice_str("upstream_error");
    ev.message = qr_slice_str(msg);
    ev.retryable = true;
    (void) rj->fn(rj->arg, &ev);
    rjob_free(rj);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    struct rjob *rj = arg;
    struct qr_api_error e = {0};
    if (attempt(rj, &e))
        give_up(rj);
}

static enum qr_err relay(void *arg, const struct qr_event *ev)
{
    struct rjob *rj = arg;
    struct qr_oa_replicas *rs = rj->rs;
    int i = rj->replica;
    if (ev->type == QR_EV_START) {
        if (rj->start_sent)
            return QR_OK; /* a retry's head: the consumer has one already */
        rj->start_sent = true;
        return rj->fn(rj->arg, ev);
    }
    if (ev->type == QR_EV_ERROR) {
        bool replica_failed = ev->retryable || ev->status >= 500;
        int mlen = ev->message.len > 140 ? 140 : (int) ev->message.len;
        snprintf(rj->last_error, sizeof rj->last_error, "%.100s: %.*s", rs->set.r[i].url, mlen,
                 ev->message.ptr ? ev->message.ptr : "");
        bool ejected = qr_replica_end(&rs->set, i, !replica_failed, rj->last_error, now_ms());
        if (ejected) {
            QR_LOG(QR_LOG_WARN, "replica ejected", QR_LF_S("backend", qr_backend_id(rs->b)),
                   QR_LF_S("replica", rs->set.r[i].url), QR_LF_S("error", rj->last_error));
            arm(rs);
        }
        rj->inner = NULL; /* the attempt frees itself after this event */
        rj->replica = -1;
        if (replica_failed && qr_replica_may_retry(&rs->set, rj->payload, true, rj->tried)) {
            QR_LOG(QR_LOG_INFO, "retrying on another replica",
                   QR_LF_S("backend", qr_backend_id(rs->b)), QR_LF_S("failed", rs->set.r[i].url));
            struct timeval now = {0, 0};
            if (!rj->retry)
                rj->retry = evtimer_new(rs->b->env.base, on_retry, rj);
            if (rj->retry && evtimer_add(rj->retry, &now) == 0)
                return QR_OK;
        }
        enum qr_err e = rj->fn(rj->arg, ev);
        rjob_free(rj);
        return e ? e : QR_ERR_CANCELLED;
    }
    if (ev->type != QR_EV_META)
        rj->payload = true;
    if (ev->type == QR_EV_DONE) {
        qr_replica_end(&rs->set, i, true, NULL, now_ms());
        rj->inner = NULL;
        enum qr_err e = rj->fn(rj->arg, ev);
        rjob_free(rj);
        return e ? e : QR_ERR_CANCELLED;
    }
    return rj->fn(rj->arg, ev);
}

static enum qr_err attempt(struct rjob *rj, struct qr_api_error *err)
{
    struct qr_oa_replicas *rs = rj->rs;
    for (;;) {
        int i = qr_replica_pick(&rs->set, rj->tried);
        if (i < 0)
            return qr_api_error_set(err, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "",
                                    "backend '%s': no replica is admitted%s%s",
                                    qr_backend_id(rs->b), rj->last_error[0] ? "; last error: " : "",
                                    rj->last_error);
        rj->tried[i] = true;
        rj->replica = i;
        qr_replica_begin(&rs->set, i);
        struct qr_api_error e = {0};
        if (qr_job_start_http(rs->b, &rj->d, rs->set.r[i].url, rj->api_key, rj->req, relay, rj,
                              &rj->inner, &e) == QR_OK) {
            if (rj->paused)
                qr_job_pause(rj->inner);
            return QR_OK;
        }
        if (e.status < 500) { /* the request itself cannot be encoded: no replica can take it */
            qr_replica_end(&rs->set, i, true, NULL, now_ms());
            *err = e;
            return QR_ERR_INVALID;
        }
        snprintf(rj->last_error, sizeof rj->last_error, "%.200s: cannot start the request",
                 rs->set.r[i].url);
        qr_replica_end(&rs->set, i, false, rj->last_error, now_ms());
        rj->replica = -1;
    }
}

static void rjob_cancel(void *impl)
{
    struct rjob *rj = impl;
    if (rj->inner) {
        qr_job_cancel(rj->inner);
        qr_replica_end(&rj->rs->set, rj->replica, true, NULL, now_ms()); /* the client's cancel */
    }
    rjob_free(rj);
}

static void rjob_pause(void *impl, bool paused)
{
    struct rjob *rj = impl;
    rj->paused = paused;
    if (rj->inner) {
        if (paused)
            qr_job_pause(rj->inner);
        else
            qr_job_resume(rj->inner);
    }
}

static const struct qr_job_ops rjob_ops = {.cancel = rjob_cancel, .pause = rjob_pause};

enum qr_err qr_oa_replicas_submit(struct qr_oa_replicas *rs, const struct qr_dialect *d,
                                  const char *api_key, const struct qr_request *req, qr_event_fn fn,
                                  void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct rjob *rj = calloc(1, sizeof(*rj));
    if (!rj)
        return qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    rj->rs = rs;
    rj->d = *d;
    rj->api_key = api_key;
    rj->req = req;
    rj->fn = fn;
    rj->arg = arg;
    rj->replica = -1;
    rj->handle = qr_job_new_custom(&rjob_ops, rj);
    if (!rj->handle) {
        free(rj);
        return qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    }
    enum qr_err e = attempt(rj, err);
    if (e) {
        rjob_free(rj);
        return e;
    }
    *out = rj->handle;
    return QR_OK;
}

void qr_oa_replicas_describe(const struct qr_oa_replicas *rs, yyjson_mut_doc *doc,
                             yyjson_mut_val *obj)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, obj, "replicas");
    for (size_t i = 0; i < rs->set.n; i++) {
        const struct qr_replica *r = &rs->set.r[i];
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        yyjson_mut_obj_add_strcpy(doc, o, "url", r->url);
        yyjson_mut_obj_add_str(doc, o, "state", qr_replica_state_str(r->state));
        yyjson_mut_obj_add_uint(doc, o, "outstanding", r->outstanding);
        yyjson_mut_obj_add_uint(doc, o, "requests", r->requests);
        yyjson_mut_obj_add_uint(doc, o, "failures", r->failures);
        yyjson_mut_obj_add_uint(doc, o, "ejections", r->ejections);
        yyjson_mut_obj_add_uint(doc, o, "readmissions", r->readmissions);
        if (r->last_error[0])
            yyjson_mut_obj_add_strcpy(doc, o, "last_error", r->last_error);
    }
}
