/* Inference through the canonical contract: decode the client's request (Ollama or OpenAI
 * codec), submit it to the backend, and write the backend's canonical events back in the
 * client's protocol -- streamed event by event with back-pressure, or aggregated into one body
 * from the very same events. An error before the first answer byte becomes a proper HTTP error in
 * the client's shape; after it, an in-band error event (never a clean finish). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/codec.h"
#include "api/ollama_codec.h"
#include "api/openai_codec.h"
#include "backend/backend.h"
#include "build_info.h"
#include "capability/capability.h"
#include "capability/descriptor.h"
#include "core/arena.h"
#include "core/http_server.h"
#include "core/log.h"
#include "router/router.h"

struct infer {
    struct infer *prev, *next; /* app->infers */
    struct qr_app *app;
    struct qr_http_req *req; /* NULL once the client is gone */
    enum qr_protocol proto;
    enum qr_op op;
    bool legacy_embeddings;
    struct qr_arena arena;
    struct qr_request creq;
    struct qr_job *job; /* NULL once finished */
    union {
        struct qr_openai_enc oa;
        struct qr_ollama_enc ol;
    } enc;
    struct qr_answer answer; /* non-streamed answers */
    struct qr_buf out;       /* encoder output not yet written */
    bool enc_ready;          /* the encoder was initialised */
    char upstream_id[128];   /* META: the engine's id for this request */
    int64_t slot_id;         /* META: the engine's slot/task, -1 unknown */
    bool started;            /* HTTP response head sent */
    bool paused;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void infer_free(struct infer *in)
{
    if (in->prev)
        in->prev->next = in->next;
    else
        in->app->infers = in->next;
    if (in->next)
        in->next->prev = in->prev;
    if (in->proto == QR_PROTO_OLLAMA && in->enc_ready)
        qr_ollama_enc_cleanup(&in->enc.ol);
    qr_answer_cleanup(&in->answer);
    qr_buf_cleanup(&in->out);
    qr_arena_cleanup(&in->arena);
    free(in);
}

static bool streaming(const struct infer *in)
{
    return in->creq.stream && in->op != QR_OP_EMBED;
}

static void send_api_error(struct qr_http_req *req, enum qr_protocol proto,
                           const struct qr_api_error *e)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    /* Errors of the inference path look like what the engine's own API would say: OpenAI's
     * object, or Ollama's {"error":"..."} string that ollama-js turns into its message (the
     * request id travels in X-Quantum-Request-ID). */
    if (proto == QR_PROTO_OPENAI)
        qr_openai_error_body(e, &b);
    else
        qr_ollama_error_line(e->message, &b);
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Cache-Control", "no-store");
    if (proto == QR_PROTO_OPENAI && e->status >= 400 && e->status < 500 && e->status != 408 &&
        e->status != 409 && e->status != 429)
        qr_http_resp_header(req, "x-should-retry", "false");
    qr_http_resp_send(req, e->status, "application/json; charset=utf-8", b.ptr ? b.ptr : "", b.len);
    qr_buf_cleanup(&b);
}

static void error_from_event(const struct qr_event *ev, struct qr_api_error *e)
{
    qr_api_error_set(e, QR_ERR_UPSTREAM, ev->status ? ev->status : 502,
                     ev->code.len ? ev->code.ptr : "upstream_error", "", "%.*s",
                     (int) ev->message.len, ev->message.ptr ? ev->message.ptr : "");
}

static enum qr_err encode_event(struct infer *in, const struct qr_event *ev)
{
    if (in->proto == QR_PROTO_OPENAI)
        return qr_openai_enc_event(&in->enc.oa, ev, &in->out);
    return qr_ollama_enc_event(&in->enc.ol, ev, &in->out);
}

/* Resumability metadata from META events travels as response headers. */
static void meta_headers(struct infer *in)
{
    if (in->upstream_id[0])
        qr_http_resp_header(in->req, "X-Quantum-Upstream-Request-ID", in->upstream_id);
    if (in->slot_id >= 0) {
        char n[24];
        snprintf(n, sizeof(n), "%lld", (long long) in->slot_id);
        qr_http_resp_header(in->req, "X-Quantum-Engine-Slot", n);
    }
}

static void note_meta(struct infer *in, const struct qr_event *ev)
{
    if (ev->type != QR_EV_META)
        return;
    if (ev->id.len && ev->id.len < sizeof(in->upstream_id)) {
        memcpy(in->upstream_id, ev->id.ptr, ev->id.len);
        in->upstream_id[ev->id.len] = '\0';
    }
    if (ev->slot_id >= 0)
        in->slot_id = ev->slot_id;
}

static void start_stream(struct infer *in)
{
    struct qr_http_req *req = in->req;
    meta_headers(in);
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Cache-Control", "no-cache");
    qr_http_resp_header(req, "Content-Type",
                        in->proto == QR_PROTO_OPENAI ? "text/event-stream"
                                                     : "application/x-ndjson");
    if (in->proto == QR_PROTO_OPENAI)
        qr_http_resp_header(req, "X-Accel-Buffering", "no");
    qr_http_resp_start(req, 200, -1);
    in->started = true;
}

static void flush(struct infer *in)
{
    if (!in->out.len)
        return;
    if (!qr_http_resp_write(in->req, in->out.ptr, in->out.len) && !in->paused && in->job) {
        in->paused = true;
        qr_job_pause(in->job);
    }
    in->out.len = 0;
}

/* The request is answered: detach from the HTTP request and free. */
static void finish(struct infer *in)
{
    qr_http_req_set_close_cb(in->req, NULL, NULL);
    qr_http_resp_set_drain_cb(in->req, NULL, NULL);
    infer_free(in);
}

static enum qr_err on_stream_event(struct infer *in, const struct qr_event *ev)
{
    if (ev->type == QR_EV_ERROR && !in->started) {
        struct qr_api_error e;
        error_from_event(ev, &e);
        send_api_error(in->req, in->proto, &e);
        finish(in);
        return QR_OK;
    }
    enum qr_err err = encode_event(in, ev);
    if (err) {
        /* The encoder refused (e.g. unparsable tool arguments): tell the client in-band. */
        struct qr_event fail = {.type = QR_EV_ERROR, .status = 502};
        fail.code = QR_SLICE_LIT("upstream_error");
        fail.message = QR_SLICE_LIT("the backend produced output that cannot be translated");
        in->out.len = 0;
        if (!in->started) {
            on_stream_event(in, &fail);
            return err;
        }
        encode_event(in, &fail);
        flush(in);
        qr_http_resp_end(in->req);
        finish(in);
        return err;
    }
    bool final = ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR;
    if (!in->started && (ev->type == QR_EV_START || ev->type == QR_EV_META))
        return QR_OK; /* hold the head until we know this is not an early error */
    if (!in->started)
        start_stream(in);
    flush(in);
    if (final) {
        in->job = NULL;
        qr_http_resp_end(in->req);
        finish(in);
    }
    return QR_OK;
}

static enum qr_err on_whole_event(struct infer *in, const struct qr_event *ev)
{
    enum qr_err err = qr_answer_add(&in->answer, ev);
    if (err && ev->type != QR_EV_ERROR) {
        struct qr_api_error e;
        qr_api_error_set(&e, err, err == QR_ERR_TOO_LARGE ? 502 : 500, "upstream_error", "", "%s",
                         err == QR_ERR_TOO_LARGE ? "the answer is larger than allowed"
                                                 : "the backend broke the event order");
        send_api_error(in->req, in->proto, &e);
        finish(in);
        return err;
    }
    if (ev->type == QR_EV_ERROR) {
        struct qr_api_error e;
        error_from_event(ev, &e);
        send_api_error(in->req, in->proto, &e);
        finish(in);
        return QR_OK;
    }
    if (ev->type != QR_EV_DONE)
        return QR_OK;
    in->job = NULL;
    err = in->proto == QR_PROTO_OPENAI ? qr_openai_enc_answer(&in->enc.oa, &in->answer, &in->out)
                                       : qr_ollama_enc_answer(&in->enc.ol, &in->answer, &in->out);
    if (err) {
        struct qr_api_error e;
        if (err == QR_ERR_CANCELLED)
            qr_api_error_set(&e, err, 499, "cancelled", "", "%s", "the request was cancelled");
        else
            qr_api_error_set(&e, err, 502, "upstream_error", "", "%s",
                             "the backend produced output that cannot be translated");
        send_api_error(in->req, in->proto, &e);
        finish(in);
        return QR_OK;
    }
    qr_http_resp_header(in->req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(in->req, "Cache-Control", "no-store");
    meta_headers(in);
    qr_http_resp_send(in->req, 200, "application/json; charset=utf-8", in->out.ptr, in->out.len);
    finish(in);
    return QR_OK;
}

static enum qr_err on_event(void *arg, const struct qr_event *ev)
{
    struct infer *in = arg;
    note_meta(in, ev);
    return streaming(in) ? on_stream_event(in, ev) : on_whole_event(in, ev);
}

static void on_client_gone(struct qr_http_req *req, void *arg)
{
    struct infer *in = arg;
    QR_LOG(QR_LOG_INFO, "client went away, inference cancelled",
           QR_LF_S("request_id", qr_http_req_id(req)));
    in->req = NULL;
    if (in->job)
        qr_job_cancel(in->job);
    infer_free(in);
}

static void on_drain(struct qr_http_req *req, void *arg)
{
    struct infer *in = arg;
    if (in->paused && in->job) {
        in->paused = false;
        qr_job_resume(in->job);
    }
}

/* ---- routing (docs/API.md "Routing of inference requests") ---- */

#define QR_ROUTE_MODEL_MAX 512

/* 422 capability_unsupported in the client API's error shape; message names the capabilities. */
static enum qr_err refuse_capability(struct qr_api_error *e, const char *message)
{
    qr_api_error_set(e, QR_ERR_INVALID, 422, "capability_unsupported", "", "%s", message);
    return QR_ERR_INVALID;
}

/* A name the registry has no manifest for: the engine decides, as before routing existed; only a
 * capability the backend itself declares unsupported is refused here. */
static enum qr_err route_passthrough(struct infer *in, const char *model,
                                     struct qr_cap_set required, struct qr_api_error *e)
{
    const struct qr_cap_descriptor *d = qr_api_descriptor(in->app);
    struct qr_cap_set missing = QR_CAP_SET_EMPTY;
    for (int k = 0; d && k < QR_CAP__COUNT; k++) {
        if (qr_cap_set_has(required, (enum qr_cap_key) k) && d->caps[k] == QR_CAP_UNSUPPORTED)
            qr_cap_set_add(&missing, (enum qr_cap_key) k);
    }
    if (!qr_cap_set_empty(missing)) {
        enum qr_cap_key keys[QR_CAP__COUNT];
        size_t n = qr_cap_set_sorted(missing, keys);
        char detail[600] = "";
        size_t used = 0;
        for (size_t i = 0; i < n && used < sizeof(detail); i++)
            used += (size_t) snprintf(detail + used, sizeof(detail) - used, "%s'%s'", i ? ", " : "",
                                      qr_cap_key_name(keys[i]));
        char msg[1000];
        snprintf(msg, sizeof(msg),
                 "model '%.200s' cannot be served: backend '%s' does not support %s", model,
                 in->app->backend->vt->id, detail);
        return refuse_capability(e, msg);
    }
    qr_http_resp_header(in->req, "X-Quantum-Backend", in->app->backend->vt->id);
    return QR_OK;
}

/* Plan the request: a model with a manifest goes through the router (capabilities, ledger,
 * policies, context) among the configured backend(s); the chosen backend is disclosed in
 * X-Quantum-Backend and the name the backend knows the artifact by is what it is asked for. */
static enum qr_err route(struct infer *in, struct qr_api_error *e)
{
    struct qr_app *app = in->app;
    char model[QR_ROUTE_MODEL_MAX];
    snprintf(model, sizeof(model), "%.*s", (int) in->creq.model.len,
             in->creq.model.ptr ? in->creq.model.ptr : "");
    struct qr_route_query q;
    qr_route_query_from_request(&in->creq, &q);
    q.model = model;
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, model, &cm);
    if (cm.known != QR_KNOWN_MANIFEST)
        return route_passthrough(in, model, q.required, e);
    struct qr_route_backend rb;
    struct qr_router_env env;
    qr_api_route_env(app, &rb, &env);
    struct qr_route_plan plan;
    struct qr_diag diag = {{0}};
    enum qr_err err = qr_router_plan(&env, &q, &plan, &diag);
    if (err == QR_ERR_NOMEM || err == QR_ERR_TOO_LARGE) {
        qr_route_plan_cleanup(&plan);
        return qr_api_error_set(e, err, 500, "route_failed", "", "%s", diag.msg);
    }
    bool in_play = false;
    for (size_t i = 0; i < plan.n_candidates; i++)
        in_play |= plan.candidates[i].in_play;
    if (plan.status == QR_ROUTE_OK) {
        qr_http_resp_header(in->req, "X-Quantum-Backend", plan.backend_id);
        qr_http_resp_header(in->req, "X-Quantum-Model", plan.canonical_model_id);
        if (plan.served_name && strcmp(plan.served_name, model)) {
            struct qr_slice served =
                qr_arena_dup(&in->arena, plan.served_name, strlen(plan.served_name));
            if (served.ptr)
                in->creq.model = served;
        }
        err = QR_OK;
    } else if (!in_play) {
        /* the configured backend serves none of the model's artifacts (or is down): the name
         * goes through as the client wrote it and the engine decides */
        qr_route_plan_cleanup(&plan);
        return route_passthrough(in, model, q.required, e);
    } else {
        qr_route_plan_message(&plan, &diag);
        if (plan.status == QR_ROUTE_NO_COMPATIBLE)
            err = refuse_capability(e, diag.msg);
        else
            err = qr_api_error_set(e, QR_ERR_INVALID, qr_route_status_http(plan.status),
                                   qr_route_status_code(plan.status), "", "%s", diag.msg);
    }
    qr_route_plan_cleanup(&plan);
    return err ? err : QR_OK;
}

static void on_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct infer *in = arg;
    struct qr_api_error e = {0};
    if (err) {
        qr_api_error_set(&e, err, err == QR_ERR_TOO_LARGE ? 413 : 400,
                         err == QR_ERR_TOO_LARGE ? "request_too_large" : "bad_request", "", "%s",
                         err == QR_ERR_TOO_LARGE ? "the request body is larger than allowed"
                                                 : "the request body could not be read");
        goto fail;
    }
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    struct qr_slice body = qr_http_req_body(req);
    err = in->proto == QR_PROTO_OPENAI
              ? qr_openai_decode(in->op, body, &lim, &in->arena, &in->creq, &e)
              : qr_ollama_decode(in->op, in->legacy_embeddings, body, &lim, &in->arena, &in->creq,
                                 &e);
    if (err)
        goto fail;
    struct qr_enc_env env = {.now_ns = now_ns(), .resp_id = NULL};
    if (in->proto == QR_PROTO_OPENAI)
        qr_openai_enc_init(&in->enc.oa, &in->creq, &env);
    else {
        qr_ollama_enc_init(&in->enc.ol, &in->creq, &env);
        in->enc.ol.legacy_embeddings = in->legacy_embeddings;
    }
    in->enc_ready = true;
    struct qr_backend *b = in->app->backend;
    if (!b || !qr_backend_can_submit(b)) {
        qr_api_error_set(&e, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "",
                         "no backend can run this request");
        goto fail;
    }
    if (route(in, &e))
        goto fail;
    qr_http_resp_set_drain_cb(req, on_drain, in);
    if (qr_backend_submit(b, &in->creq, on_event, in, &in->job, &e))
        goto fail;
    return;
fail:
    send_api_error(req, in->proto, &e);
    finish(in);
}

void qr_api_infer(struct qr_app *app, struct qr_http_req *req, enum qr_protocol proto,
                  enum qr_op op, bool legacy_embeddings)
{
    struct infer *in = calloc(1, sizeof(*in));
    if (!in) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    in->app = app;
    in->slot_id = -1;
    in->next = app->infers;
    if (in->next)
        in->next->prev = in;
    app->infers = in;
    in->req = req;
    in->proto = proto;
    in->op = op;
    in->legacy_embeddings = legacy_embeddings;
    size_t cap = app->cfg->max_request_bytes;
    qr_arena_init(&in->arena, cap > (SIZE_MAX / 4) ? SIZE_MAX : cap * 4);
    qr_answer_init(&in->answer, (size_t) 256 << 20);
    qr_buf_init(&in->out, 0);
    qr_http_req_set_close_cb(req, on_client_gone, in);
    qr_http_req_read_body(req, app->cfg->max_request_bytes, on_body, in);
}

unsigned qr_api_infer_cancel_all(struct qr_app *app)
{
    unsigned n = 0;
    while (app->infers) {
        struct infer *in = app->infers;
        n++;
        if (in->job) {
            qr_job_cancel(in->job);
            in->job = NULL;
        }
        if (!in->req || !in->enc_ready) {
            struct qr_api_error e;
            qr_api_error_set(&e, QR_ERR_UNAVAILABLE, 503, "shutting_down", "", "%s",
                             "the runtime is shutting down");
            if (in->req) {
                send_api_error(in->req, in->proto, &e);
                finish(in);
            } else {
                infer_free(in);
            }
            continue;
        }
        if (streaming(in) && in->started) {
            struct qr_event ev = {.type = QR_EV_DONE, .finish = QR_FINISH_CANCELLED};
            ev.raw_finish = QR_SLICE_LIT("shutdown");
            on_stream_event(in, &ev); /* writes the cancelled end and finishes */
        } else {
            struct qr_api_error e;
            qr_api_error_set(&e, QR_ERR_UNAVAILABLE, 503, "shutting_down", "", "%s",
                             "the runtime is shutting down");
            send_api_error(in->req, in->proto, &e);
            finish(in);
        }
    }
    return n;
}
