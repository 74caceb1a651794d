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
#include "api/metrics.h"
#include "api/ollama_codec.h"
#include "api/openai_codec.h"
#include "api/rerank_codec.h"
#include "api/status.h"
#include "backend/backend.h"
#include "build_info.h"
#include "capability/capability.h"
#include "capability/descriptor.h"
#include "core/arena.h"
#include "core/http_server.h"
#include "core/log.h"
#include "router/router.h"

/* Knobs a model policy keeps off the engine that the Runtime honours itself, applied to the
 * engine's events before the client encoder sees them (docs/POLICY.md "In the request path"). */
struct guard {
    bool active;
    int64_t max_tokens;           /* > 0: end with finish length after this many generated tokens */
    int64_t produced;             /* tokens generated so far (one per content/reasoning delta) */
    const struct qr_slice *stops; /* borrowed from creq: end with finish stop at the first match */
    size_t n_stops;
    struct qr_buf held; /* content held back: a suffix that may begin a stop sequence */
};

struct infer {
    struct infer *prev, *next; /* app->infers */
    struct qr_app *app;
    struct qr_http_req *req; /* NULL once the client is gone */
    enum qr_protocol proto;
    enum qr_op op;
    bool legacy_embeddings;
    struct qr_arena arena;
    struct qr_request creq; /* as the client sent it (decoded) */
    struct qr_request ereq; /* what the engine gets: creq after the plan's effective parameters */
    struct guard guard;     /* what the Runtime honours itself on the engine's output */
    struct qr_job *job;     /* NULL once finished */
    struct qr_backend *backend; /* the one the request runs on (route) */
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
    /* metrics (api/metrics.h), recorded when the request is freed */
    int status;                           /* HTTP status sent, 0 none yet */
    bool stream_counted;                  /* counted in active_streams */
    int64_t t0_ns, t_first_ns, t_last_ns; /* monotonic: start, first and last output */
    struct qr_usage usage;                /* the engine's last USAGE event */
    char m_route[64];                     /* route path */
    char m_model[QR_METRICS_LABEL_MAX];   /* resolved canonical id, or "_unknown" */
    bool admitted;         /* counted in backend's admission (qr_backend_admit), released on free */
    int64_t tokens_noted;  /* completion tokens already counted in the status page's throughput */
    char why[320];         /* the routing decision's reason (api/status.h) */
    struct qr_slice asked; /* the model name the client sent (creq.model may become the served
                              name); borrowed from the arena */
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The request's metrics: its status (499 when the client went away first), time to first
 * output, tokens and decode rate (the engine's eval time, else first -> last output). */
static void record_metrics(struct infer *in)
{
    if (in->stream_counted)
        qr_metrics_stream_end();
    struct qr_metrics_request r = {
        .route = in->m_route,
        .model = in->m_model[0] ? in->m_model : "_unknown",
        .backend = in->backend ? qr_backend_id(in->backend) : "_none",
        .status = in->req ? in->status : 499,
        .ttft_s = in->t_first_ns ? (double) (in->t_first_ns - in->t0_ns) / 1e9 : -1,
        .tokens_in = in->usage.prompt_tokens,
        .tokens_out = in->usage.completion_tokens,
        .decode_s = in->usage.eval_ns > 0 ? (double) in->usage.eval_ns / 1e9
                                          : (double) (in->t_last_ns - in->t_first_ns) / 1e9,
    };
    qr_metrics_request(&r);
}

static void infer_free(struct infer *in)
{
    record_metrics(in);
    if (in->admitted)
        qr_backend_release(in->backend);
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
    qr_buf_cleanup(&in->guard.held);
    qr_arena_cleanup(&in->arena);
    free(in);
}

/* Ops that generate tokens; embeddings and rerank answers are never streamed or guarded. */
static bool generating(enum qr_op op)
{
    return op == QR_OP_CHAT || op == QR_OP_COMPLETION;
}

static bool streaming(const struct infer *in)
{
    return in->creq.stream && generating(in->op);
}

static void send_api_error(struct infer *in, const struct qr_api_error *e)
{
    struct qr_http_req *req = in->req;
    enum qr_protocol proto = in->proto;
    in->status = e->status;
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
    in->status = 200;
    in->stream_counted = true;
    qr_metrics_stream_begin();
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
        send_api_error(in, &e);
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
        send_api_error(in, &e);
        finish(in);
        return err;
    }
    if (ev->type == QR_EV_ERROR) {
        struct qr_api_error e;
        error_from_event(ev, &e);
        send_api_error(in, &e);
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
        send_api_error(in, &e);
        finish(in);
        return QR_OK;
    }
    qr_http_resp_header(in->req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(in->req, "Cache-Control", "no-store");
    meta_headers(in);
    in->status = 200;
    qr_http_resp_send(in->req, 200, "application/json; charset=utf-8", in->out.ptr, in->out.len);
    finish(in);
    return QR_OK;
}

/* One event to the client side. `in` is freed after DONE or ERROR and after a non-QR_OK return. */
static enum qr_err deliver(struct infer *in, const struct qr_event *ev)
{
    note_meta(in, ev);
    if (ev->type == QR_EV_USAGE && ev->usage.completion_tokens > in->tokens_noted) {
        qr_status_note_tokens(ev->usage.completion_tokens - in->tokens_noted);
        in->tokens_noted = ev->usage.completion_tokens;
    }
    return streaming(in) ? on_stream_event(in, ev) : on_whole_event(in, ev);
}

/* ---- what the Runtime honours itself (the plan's stripped num_predict and stop) ---- */

/* Content the guard held back goes out (nothing of it matched a stop sequence). */
static enum qr_err guard_release(struct infer *in, size_t n)
{
    struct guard *g = &in->guard;
    if (!n)
        return QR_OK;
    struct qr_event ev = {.type = QR_EV_CONTENT};
    ev.text = (struct qr_slice){g->held.ptr, n};
    enum qr_err err = deliver(in, &ev);
    if (err)
        return err; /* in is freed */
    memmove(g->held.ptr, g->held.ptr + n, g->held.len - n);
    g->held.len -= n;
    return QR_OK;
}

/* End the answer here as the engine would have: the generated-token count as usage, then DONE
 * with finish (length or stop). The engine's job is stopped by the QR_ERR_CANCELLED return (the
 * job stops reading and frees itself; no further event arrives). */
static enum qr_err guard_end(struct infer *in, enum qr_finish finish)
{
    struct qr_event ev = {.type = QR_EV_USAGE};
    qr_usage_init(&ev.usage);
    ev.usage.completion_tokens = in->guard.produced;
    QR_LOG(QR_LOG_DEBUG, "runtime ended the answer", QR_LF_S("finish", qr_finish_str(finish)),
           QR_LF_N("tokens", (uint64_t) in->guard.produced));
    if (deliver(in, &ev))
        return QR_ERR_CANCELLED; /* in is freed */
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_DONE;
    ev.finish = finish;
    ev.raw_finish = qr_slice_str(qr_finish_str(finish));
    (void) deliver(in, &ev); /* frees in */
    return QR_ERR_CANCELLED;
}

/* Length of the longest suffix of text that is a proper prefix of some stop sequence. */
static size_t stop_prefix_tail(const struct guard *g, const char *text, size_t len)
{
    size_t best = 0;
    for (size_t s = 0; s < g->n_stops; s++) {
        size_t sl = g->stops[s].len;
        if (!sl)
            continue;
        for (size_t k = sl > len + 1 ? len : sl - 1; k > best; k--) {
            if (!memcmp(text + len - k, g->stops[s].ptr, k)) {
                best = k;
                break;
            }
        }
    }
    return best;
}

/* The earliest match of any stop sequence in text, or SIZE_MAX. */
static size_t stop_find(const struct guard *g, const char *text, size_t len)
{
    size_t at = SIZE_MAX;
    for (size_t s = 0; s < g->n_stops; s++) {
        size_t sl = g->stops[s].len;
        for (size_t i = 0; sl && i + sl <= len && i < at; i++) {
            if (!memcmp(text + i, g->stops[s].ptr, sl)) {
                at = i;
                break;
            }
        }
    }
    return at;
}

/* A content delta under stop scanning: what cannot begin a stop sequence goes out; a match ends
 * the answer before the stop text (the stop text itself is never sent). */
static enum qr_err guard_content(struct infer *in, const struct qr_event *ev, bool *ended)
{
    struct guard *g = &in->guard;
    *ended = false;
    if (qr_buf_append(&g->held, ev->text.ptr ? ev->text.ptr : "", ev->text.len)) {
        struct qr_event fail = {.type = QR_EV_ERROR, .status = 500};
        fail.code = QR_SLICE_LIT("internal_error");
        fail.message = QR_SLICE_LIT("out of memory while scanning for stop sequences");
        *ended = true;
        (void) deliver(in, &fail); /* frees in */
        return QR_ERR_CANCELLED;
    }
    size_t at = stop_find(g, g->held.ptr, g->held.len);
    if (at != SIZE_MAX) {
        *ended = true;
        g->held.len = at;
        if (guard_release(in, at))
            return QR_ERR_CANCELLED;
        return guard_end(in, QR_FINISH_STOP);
    }
    return guard_release(in, g->held.len - stop_prefix_tail(g, g->held.ptr, g->held.len));
}

static enum qr_err guard_event(struct infer *in, const struct qr_event *ev)
{
    struct guard *g = &in->guard;
    enum qr_err err;
    bool generated = ev->type == QR_EV_CONTENT || ev->type == QR_EV_REASONING;
    if (generated && ev->text.len)
        g->produced++;
    if (ev->type == QR_EV_CONTENT && g->n_stops) {
        bool ended;
        if ((err = guard_content(in, ev, &ended)) != QR_OK || ended)
            return err ? err : QR_ERR_CANCELLED;
    } else {
        /* anything else first releases held content, so the order of the answer is kept */
        if (ev->type != QR_EV_START && ev->type != QR_EV_META && g->held.len &&
            (err = guard_release(in, g->held.len)) != QR_OK)
            return err;
        if ((err = deliver(in, ev)) != QR_OK || ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR)
            return err;
    }
    if (generated && g->max_tokens > 0 && g->produced >= g->max_tokens) {
        if (g->held.len && guard_release(in, g->held.len))
            return QR_ERR_CANCELLED;
        return guard_end(in, QR_FINISH_LENGTH);
    }
    return QR_OK;
}

/* Timing and usage for the metrics, before the event is delivered (which may free in). */
static void note_metrics(struct infer *in, const struct qr_event *ev)
{
    if (ev->type == QR_EV_USAGE) {
        in->usage = ev->usage;
        return;
    }
    if (ev->type != QR_EV_CONTENT && ev->type != QR_EV_REASONING && ev->type != QR_EV_TOOL_BEGIN &&
        ev->type != QR_EV_TOOL_ARGS)
        return;
    in->t_last_ns = mono_ns();
    if (!in->t_first_ns)
        in->t_first_ns = in->t_last_ns;
}

static enum qr_err on_event(void *arg, const struct qr_event *ev)
{
    struct infer *in = arg;
    note_metrics(in, ev);
    return in->guard.active ? guard_event(in, ev) : deliver(in, ev);
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
    in->backend = qr_api_backend_for_name(in->app, model);
    const struct qr_cap_descriptor *d = qr_api_descriptor_for(in->app, in->backend);
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
                 qr_backend_id(in->backend), detail);
        return refuse_capability(e, msg);
    }
    qr_http_resp_header(in->req, "X-Quantum-Backend", qr_backend_id(in->backend));
    snprintf(in->why, sizeof(in->why), "not planned: the name goes to backend '%s' as sent",
             qr_backend_id(in->backend));
    in->ereq = in->creq; /* no plan: the request reaches the engine as the client sent it */
    return QR_OK;
}

/* ---- the plan's effective parameters reach the engine (docs/POLICY.md "In the request path") ----
 */

#define POLICY_LOG_MAX 600 /* bytes of the decisions summary in the log line */

/* The policy's own stop value (a string or an array of strings) as the engine's stop list. */
static enum qr_err policy_stops(struct infer *in, yyjson_val *v)
{
    size_t n = yyjson_is_arr(v) ? yyjson_arr_size(v) : yyjson_is_str(v) ? 1 : 0;
    struct qr_slice *out = n ? qr_arena_array(&in->arena, n, sizeof(*out)) : NULL;
    if (n && !out)
        return QR_ERR_NOMEM;
    size_t k = 0;
    if (yyjson_is_str(v)) {
        out[k++] = qr_arena_dup(&in->arena, yyjson_get_str(v), yyjson_get_len(v));
    } else {
        size_t i, max;
        yyjson_val *it;
        yyjson_arr_foreach(v, i, max, it)
        {
            if (yyjson_is_str(it))
                out[k++] = qr_arena_dup(&in->arena, yyjson_get_str(it), yyjson_get_len(it));
        }
    }
    for (size_t i = 0; i < k; i++)
        if (!out[i].ptr)
            return QR_ERR_NOMEM;
    in->ereq.stop = out;
    in->ereq.n_stop = k;
    return QR_OK;
}

/* Log what the policies decided ("name=action" for every knob not simply forwarded) and, loudly,
 * every knob that reached the engine only because the experimental gate is set. */
static void log_policy(struct infer *in, const struct qr_policy_effective *eff, const char *ids)
{
    char decided[POLICY_LOG_MAX] = "", gated[POLICY_LOG_MAX] = "";
    size_t nd = 0, ng = 0;
    for (size_t i = 0; i < eff->n_decisions; i++) {
        const struct qr_knob_decision *d = &eff->decisions[i];
        if (d->experimental && d->action == QR_KNOB_FORWARD && ng < sizeof(gated))
            ng += (size_t) snprintf(gated + ng, sizeof(gated) - ng, "%s%s", ng ? "," : "", d->name);
        if (d->action != QR_KNOB_FORWARD && nd < sizeof(decided))
            nd += (size_t) snprintf(decided + nd, sizeof(decided) - nd, "%s%s=%s", nd ? "," : "",
                                    d->name, qr_knob_action_str(d->action));
    }
    const char *rid = in->req ? qr_http_req_id(in->req) : "";
    const char *ds = decided, *gs = gated; /* QR_LF_S tests its value for NULL */
    QR_LOG(QR_LOG_INFO, "model policy applied", QR_LF_S("request_id", rid),
           QR_LF_S("policies", ids), QR_LF_S("decisions", ds),
           QR_LF_B("experimental_gate", eff->experimental_gate));
    if (ng)
        QR_LOG(QR_LOG_WARN, "experimental gate: unverified knobs forwarded to the engine",
               QR_LF_S("request_id", rid), QR_LF_S("policies", ids), QR_LF_S("knobs", gs));
}

/* A requested context above what the policy or the model allows: 422 context_exceeded naming
 * both numbers. */
static enum qr_err refuse_context(struct qr_api_error *e, const char *model, uint64_t requested,
                                  uint64_t limit, const char *whose)
{
    return qr_api_error_set(e, QR_ERR_INVALID, 422, "context_exceeded", "",
                            "model '%.200s': the requested context of %llu tokens exceeds the "
                            "limit of %llu tokens (%s)",
                            model, (unsigned long long) requested, (unsigned long long) limit,
                            whose);
}

/* Build the engine's request from the client's and the plan: only the plan's decisions reach the
 * backend codec (stripped knobs removed, filled/overridden values set), and what the Runtime
 * honours itself is armed in the guard. The client's request (creq) stays as decoded. */
static enum qr_err apply_plan(struct infer *in, const struct qr_route_plan *plan,
                              struct qr_api_error *e)
{
    const struct qr_policy_effective *eff = plan->effective;
    in->ereq = in->creq;
    if (!eff)
        return QR_OK;
    const char *id = plan->canonical_model_id;
    if (eff->context_over_limit)
        return refuse_context(e, id, (uint64_t) in->creq.context_len.v, eff->context_limit,
                              "model policy");
    struct qr_request *r = &in->ereq;
    r->sampling = eff->sampling;
    r->max_tokens = eff->max_tokens;
    r->context_len = eff->context_len;
    r->context_len_forward = eff->context_len.set; /* the policy forwards num_ctx */
    if (!eff->forward_stop) {
        r->stop = NULL;
        r->n_stop = 0;
        if (eff->stop_value && policy_stops(in, eff->stop_value))
            return qr_api_error_set(e, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    }
    size_t kept = 0;
    for (size_t i = 0; i < in->creq.n_extra_options && i < QR_POLICY_MAX_EXTRAS; i++)
        kept += eff->extra_forward[i];
    r->extra_options = kept ? qr_arena_array(&in->arena, kept, sizeof(*r->extra_options)) : NULL;
    if (kept && !r->extra_options)
        return qr_api_error_set(e, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    r->n_extra_options = 0;
    for (size_t i = 0; i < in->creq.n_extra_options && i < QR_POLICY_MAX_EXTRAS; i++)
        if (eff->extra_forward[i])
            r->extra_options[r->n_extra_options++] = in->creq.extra_options[i];

    /* what the Runtime does itself */
    struct guard *g = &in->guard;
    if (eff->runtime_max_tokens.set && eff->runtime_max_tokens.v > 0)
        g->max_tokens = eff->runtime_max_tokens.v;
    if (eff->runtime_stop && in->creq.n_stop) {
        g->stops = in->creq.stop;
        g->n_stops = in->creq.n_stop;
    }
    g->active = generating(in->op) && (g->max_tokens > 0 || g->n_stops > 0);
    if (g->active)
        r->stream = true; /* counted and scanned per delta; a whole answer is aggregated here */

    if (eff->n_policies) {
        char ids[1024] = "";
        size_t used = 0;
        for (size_t i = 0; i < eff->n_policies && used < sizeof(ids); i++)
            used += (size_t) snprintf(ids + used, sizeof(ids) - used, "%s%s", i ? "," : "",
                                      eff->policy_ids[i]);
        qr_http_resp_header(in->req, "X-Quantum-Policy", ids);
        log_policy(in, eff, ids);
    } else if (eff->experimental_gate) {
        log_policy(in, eff, "");
    }
    return QR_OK;
}

/* Every candidate the ledger refused, once per blocked capability (ledger_blocks_total). */
static void count_ledger_blocks(const struct qr_route_plan *plan)
{
    for (size_t i = 0; i < plan->n_candidates; i++) {
        const struct qr_route_candidate *c = &plan->candidates[i];
        if (c->reason != QR_ROUTE_REJ_LEDGER || !c->backend || !c->backend->desc)
            continue;
        for (size_t k = 0; k < c->n_failures; k++) {
            if (!c->failures[k].block && !c->failures[k].entry)
                continue;
            const char *l[] = {c->backend->desc->id, qr_cap_key_name(c->failures[k].eval.key)};
            qr_metrics_add(QR_M_LEDGER_BLOCKS, l, 1);
        }
    }
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
    if (cm.known != QR_KNOWN_NONE && cm.canonical_id) /* bounded: only names the registry knows */
        snprintf(in->m_model, sizeof(in->m_model), "%s", cm.canonical_id);
    if (cm.known != QR_KNOWN_MANIFEST)
        return route_passthrough(in, model, q.required, e);
    struct qr_route_backend rb[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rb, &env);
    struct qr_route_plan plan;
    struct qr_diag diag = {{0}};
    enum qr_err err = qr_router_plan(&env, &q, &plan, &diag);
    if (err == QR_ERR_NOMEM || err == QR_ERR_TOO_LARGE) {
        qr_route_plan_cleanup(&plan);
        return qr_api_error_set(e, err, 500, "route_failed", "", "%s", diag.msg);
    }
    count_ledger_blocks(&plan);
    bool in_play = false;
    for (size_t i = 0; i < plan.n_candidates; i++)
        in_play |= plan.candidates[i].in_play;
    if (plan.status == QR_ROUTE_OK) {
        in->backend = qr_api_backend_find(app, plan.backend_id);
        qr_http_resp_header(in->req, "X-Quantum-Backend", plan.backend_id);
        qr_http_resp_header(in->req, "X-Quantum-Model", plan.canonical_model_id);
        struct qr_slice asked = in->creq.model;
        if (plan.served_name && strcmp(plan.served_name, model)) {
            struct qr_slice served =
                qr_arena_dup(&in->arena, plan.served_name, strlen(plan.served_name));
            if (served.ptr)
                in->creq.model = served;
        }
        snprintf(in->why, sizeof(in->why),
                 "planned: '%s' on backend '%s' as '%.100s' (%s%s, %zu policies)",
                 plan.canonical_model_id, plan.backend_id,
                 plan.served_name ? plan.served_name : model,
                 plan.fallback.used ? "fallback" : "first preference",
                 plan.candidates && plan.chosen < plan.n_candidates &&
                         plan.candidates[plan.chosen].verified
                     ? ", verified"
                     : "",
                 plan.n_policies);
        err = apply_plan(in, &plan, e);
        /* a managed engine (llama.cpp) is asked for the artifact by its URI; the client's
         * answers keep the name it asked for */
        if (plan.served_name &&
            (!strncmp(plan.served_name, "models:", 7) || !strncmp(plan.served_name, "file:", 5)))
            in->creq.model = asked;
    } else if (!in_play) {
        /* no configured backend serves the model's artifacts (or is down): the name goes
         * through as the client wrote it and the engine decides -- except what the model itself
         * rules out, which no engine is asked for */
        qr_route_plan_cleanup(&plan);
        enum qr_cap_key keys[QR_CAP__COUNT];
        const char *why[QR_CAP__COUNT];
        size_t n = qr_route_model_rules_out(app->catalog->registry, model, q.required, keys, why);
        if (n) {
            char msg[600];
            snprintf(msg, sizeof(msg), "model '%.200s' does not support '%s' (%s)", model,
                     qr_cap_key_name(keys[0]), why[0]);
            return refuse_capability(e, msg);
        }
        return route_passthrough(in, model, q.required, e);
    } else if (plan.status == QR_ROUTE_CONTEXT_EXCEEDED) {
        /* the numbers: the requested size and the largest any in-play candidate could serve */
        uint64_t limit = 0;
        const char *whose = "model native maximum";
        for (size_t i = 0; i < plan.n_candidates; i++) {
            const struct qr_route_context *c = &plan.candidates[i].context;
            if (!plan.candidates[i].in_play)
                continue;
            uint64_t l = c->native_max;
            if (c->backend_max && (!l || c->backend_max < l)) {
                l = c->backend_max;
                whose = "backend context";
            }
            limit = l > limit ? l : limit;
        }
        err = refuse_context(e, plan.canonical_model_id, q.context, limit, whose);
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

bool qr_api_infer_planned(struct qr_app *app, const char *model)
{
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, model, &cm);
    if (cm.known != QR_KNOWN_MANIFEST)
        return qr_api_backend_for_name(app, model) != app->backend;
    struct qr_route_backend rb[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rb, &env);
    struct qr_route_query q = {.model = model};
    struct qr_route_plan plan;
    struct qr_diag diag = {{0}};
    (void) qr_router_plan(&env, &q, &plan, &diag);
    bool planned =
        plan.status == QR_ROUTE_OK &&
        (plan.n_policies > 0 || qr_api_backend_find(app, plan.backend_id) != app->backend);
    qr_route_plan_cleanup(&plan);
    return planned;
}

/* The routing decision for the status page (api/status.h): routed with in->why, or refused with
 * the error the client gets. */
static void note_decision(struct infer *in, const struct qr_api_error *refusal)
{
    char model[128];
    snprintf(model, sizeof(model), "%.*s", (int) in->asked.len, in->asked.ptr ? in->asked.ptr : "");
    const char *backend = in->backend ? qr_backend_id(in->backend) : NULL;
    if (refusal)
        qr_status_note_decision(qr_http_req_path(in->req), model, backend, true, refusal->status,
                                refusal->message);
    else
        qr_status_note_decision(qr_http_req_path(in->req), model, backend, false, 0, in->why);
}

static void on_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct infer *in = arg;
    struct qr_api_error e = {0};
    bool deciding = false; /* decoded: a failure now is a refusal on the status page */
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
    if (in->op == QR_OP_RERANK)
        err = qr_rerank_decode(body, &lim, &in->arena, &in->creq, &e);
    else
        err = in->proto == QR_PROTO_OPENAI
                  ? qr_openai_decode(in->op, body, &lim, &in->arena, &in->creq, &e)
                  : qr_ollama_decode(in->op, in->legacy_embeddings, body, &lim, &in->arena,
                                     &in->creq, &e);
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
    in->asked = in->creq.model;
    deciding = true;
    if (!in->app->backend) {
        qr_api_error_set(&e, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "",
                         "no backend can run this request");
        goto fail;
    }
    if (route(in, &e))
        goto fail;
    struct qr_backend *b = in->backend;
    if (!b || !qr_backend_can_submit(b)) {
        qr_api_error_set(&e, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "",
                         "no backend can run this request");
        goto fail;
    }
    enum qr_admit adm = qr_backend_admit(b);
    if (adm != QR_ADMIT_OK) {
        /* full: answered at once, the engine is not contacted */
        char msg[300];
        qr_backend_admit_message(b, adm, msg, sizeof(msg));
        qr_api_error_set(&e, QR_ERR_BUSY, 503, "queue_full", "", "%s", msg);
        qr_http_resp_header(req, "Retry-After", "1");
        QR_LOG(QR_LOG_INFO, "inference refused: queue full",
               QR_LF_S("request_id", qr_http_req_id(req)), QR_LF_S("backend", qr_backend_id(b)),
               QR_LF_N("depth", b->admitted));
        goto fail;
    }
    in->admitted = true;
    qr_http_resp_set_drain_cb(req, on_drain, in);
    if (qr_backend_submit(b, &in->ereq, on_event, in, &in->job, &e))
        goto fail;
    note_decision(in, NULL); /* no event is delivered from inside submit: in is alive */
    return;
fail:
    if (deciding)
        note_decision(in, &e);
    send_api_error(in, &e);
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
    in->t0_ns = mono_ns();
    qr_usage_init(&in->usage);
    const char *path = qr_http_req_path(req);
    snprintf(in->m_route, sizeof(in->m_route), "%.*s", (int) strcspn(path, "?"), path);
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
    qr_buf_init(&in->guard.held, 0);
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
                send_api_error(in, &e);
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
            send_api_error(in, &e);
            finish(in);
        }
    }
    return n;
}
