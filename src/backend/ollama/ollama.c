/* Ollama adapter: an existing Ollama daemon behind the Runtime. Canonical requests (chat,
 * generate, embed) go through the Ollama codec after the model's /api/show description is known
 * (show.c: think is then always explicit, and a client's num_ctx is an admission limit against
 * the model's context length instead of a knob that reloads the model). Client requests on the
 * allowlisted Ollama API routes the contract does not model are passed through byte for byte; an
 * NDJSON answer streams back chunk by chunk as Ollama produces it, with back-pressure both ways (a
 * slow client pauses the upstream transfer), and a whole answer (up to PROXY_HOLD_MAX) is held
 * until it ended, so an upstream that cuts it yields a 502, never a short 200. The Runtime's
 * credentials, cookies and forwarding headers never reach Ollama, and Ollama's cookies never reach
 * the client. Readiness is GET /api/version, whose answer is kept as the engine version. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "backend/codec.h"
#include "backend/job.h"
#include "backend/ollama/ollama.h"
#include "backend/ollama/show.h"
#include "build_info.h"
#include "core/http_client.h"
#include "core/http_server.h"
#include "core/log.h"

#define MAX_FORWARD_HEADERS 128

struct ollama {
    struct qr_backend base;
    struct qr_ollama_shows *shows; /* per-model /api/show cache */
    char version[64];              /* /api/version "version"; "" until a probe read one */
    struct proxy *live;            /* exchanges being proxied (qr_ollama_end_all) */
};

/* Request headers never forwarded: hop-by-hop (RFC 9110 7.6.1), the Runtime's own credentials
 * and cookies, proxy/forwarding identity, and what libcurl sets itself. */
static const char *const drop_request[] = {
    "Connection",
    "Keep-Alive",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Authorization",
    "Cookie",
    "Forwarded",
    "X-Forwarded-For",
    "X-Forwarded-Host",
    "X-Forwarded-Proto",
    "X-Real-IP",
    "Host",
    "Content-Length",
    "Expect",
    "User-Agent",
    "Proxy-Connection",
};

/* Response headers never passed back: hop-by-hop, cookies, framing (the Runtime frames the body
 * itself) and the Runtime's own identity headers. */
static const char *const drop_response[] = {
    "Connection",
    "Keep-Alive",
    "Proxy-Authenticate",
    "Proxy-Authorization",
    "TE",
    "Trailer",
    "Transfer-Encoding",
    "Upgrade",
    "Set-Cookie",
    "Set-Cookie2",
    "Content-Length",
    "X-Quantum-Request-ID",
    "X-Quantum-Runtime-Version",
    "Proxy-Connection",
};

static bool in_list(struct qr_slice name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (qr_slice_eq_nocase(name, list[i]))
            return true;
    }
    return false;
}

/* Is name one of the comma-separated tokens of a Connection header value? */
static bool named_by_connection(struct qr_slice name, const char *conn)
{
    while (conn && *conn) {
        conn += strspn(conn, " \t,");
        size_t n = strcspn(conn, ",");
        size_t m = n;
        while (m && (conn[m - 1] == ' ' || conn[m - 1] == '\t'))
            m--;
        if (m && m == name.len && strncasecmp(conn, name.ptr, m) == 0)
            return true;
        conn += n;
    }
    return false;
}

/* ---- one proxied exchange ---- */

struct proxy {
    struct ollama *o;
    struct proxy *prev, *next; /* in o->live */
    struct qr_http_req *req;   /* NULL once the client is gone */
    struct qr_http_call *call; /* NULL until started and after done */
    char *url;
    char *hdr_text; /* backing store of forwarded header slices */
    struct qr_http_header hdrs[MAX_FORWARD_HEADERS];
    size_t n_hdrs;
    bool paused;
    bool admitted; /* an inference exchange counted in the backend's admission */
    uint64_t bytes;
    /* A whole (not NDJSON) answer is held until it ended, so a cut one becomes a 502 instead of
     * a short 200; held_hdrs are the forwarded headers as "name\0value\0" pairs. */
    bool hold;
    bool ndjson; /* a stream: a cut gets Ollama's in-band {"error":..} line before the cut */
    bool at_line_start;
    int status;
    int64_t length;
    struct qr_buf held_hdrs;
    struct qr_buf held;
};

#define PROXY_HOLD_MAX (8u << 20) /* a longer whole answer streams through as before */

static void proxy_free(struct proxy *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else if (p->o && p->o->live == p)
        p->o->live = p->next;
    if (p->next)
        p->next->prev = p->prev;
    if (p->admitted)
        qr_backend_release(&p->o->base);
    qr_buf_cleanup(&p->held_hdrs);
    qr_buf_cleanup(&p->held);
    free(p->url);
    free(p->hdr_text);
    free(p);
}

static void send_error(struct qr_http_req *req, int status, const char *code, const char *msg)
{
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_send_error(req, status, code, msg);
}

static void on_client_gone(struct qr_http_req *req, void *arg)
{
    struct proxy *p = arg;
    QR_LOG(QR_LOG_INFO, "client went away, upstream exchange cancelled",
           QR_LF_S("request_id", qr_http_req_id(req)), QR_LF_N("bytes_forwarded", p->bytes));
    p->req = NULL;
    if (p->call)
        qr_http_call_cancel(p->call);
    proxy_free(p);
}

static void on_drain(struct qr_http_req *req, void *arg)
{
    struct proxy *p = arg;
    if (p->paused && p->call) {
        p->paused = false;
        qr_http_call_resume(p->call);
    }
}

/* Status line and the forwarded headers to the client, then whatever was held. */
static void send_head(struct proxy *p)
{
    for (size_t at = 0; at < p->held_hdrs.len;) {
        const char *name = p->held_hdrs.ptr + at;
        const char *value = name + strlen(name) + 1;
        qr_http_resp_header(p->req, name, value);
        at = (size_t) (value + strlen(value) + 1 - p->held_hdrs.ptr);
    }
    qr_http_resp_header(p->req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_start(p->req, p->status, p->length);
    if (p->held.len)
        qr_http_resp_write(p->req, p->held.ptr, p->held.len);
    p->hold = false;
    qr_buf_cleanup(&p->held);
}

static bool on_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                        size_t n, void *arg)
{
    struct proxy *p = arg;
    int64_t length = -1;
    qr_buf_init(&p->held_hdrs, 0);
    qr_buf_init(&p->held, 0);
    for (size_t i = 0; i < n; i++) {
        if (qr_slice_eq_nocase(h[i].name, "Content-Length")) {
            char num[24];
            if (h[i].value.len < sizeof(num)) {
                memcpy(num, h[i].value.ptr, h[i].value.len);
                num[h[i].value.len] = '\0';
                char *end;
                long long v = strtoll(num, &end, 10);
                if (!*end && v >= 0)
                    length = v;
            }
            continue;
        }
        if (in_list(h[i].name, drop_response, QR_ARRAY_LEN(drop_response)) || h[i].name.len > 255 ||
            (h[i].value.len && memchr(h[i].value.ptr, 0, h[i].value.len)))
            continue; /* (a NUL would break the held pairs) */
        if (qr_slice_eq_nocase(h[i].name, "Content-Type"))
            p->ndjson =
                h[i].value.len >= 20 && !strncasecmp(h[i].value.ptr, "application/x-ndjson", 20);
        if (qr_buf_append(&p->held_hdrs, h[i].name.ptr, h[i].name.len) ||
            qr_buf_append(&p->held_hdrs, "", 1) ||
            qr_buf_append(&p->held_hdrs, h[i].value.ptr, h[i].value.len) ||
            qr_buf_append(&p->held_hdrs, "", 1))
            abort(); /* headers are capped by the HTTP client */
    }
    p->status = status;
    p->length = length;
    p->at_line_start = true;
    p->hold = !p->ndjson && length <= (int64_t) PROXY_HOLD_MAX;
    if (!p->hold)
        send_head(p);
    return true;
}

static bool on_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct proxy *p = arg;
    p->bytes += len;
    if (p->hold && p->held.len + len <= PROXY_HOLD_MAX) {
        if (qr_buf_append(&p->held, data, len))
            abort(); /* at most PROXY_HOLD_MAX */
        return true;
    }
    if (p->hold)
        send_head(p); /* too long to hold: what was held goes out first, then the rest streams */
    if (len)
        p->at_line_start = data[len - 1] == '\n';
    if (!qr_http_resp_write(p->req, data, len) && !p->paused) {
        p->paused = true;
        qr_http_call_pause(call);
    }
    return true;
}

/* Append Ollama's error shape, {"error":"msg"} and a newline, to line. */
static void error_line(struct qr_buf *line, const char *msg)
{
    if (qr_buf_puts(line, "{\"error\":\"") || qr_buf_append_json_str(line, msg, strlen(msg)) ||
        qr_buf_puts(line, "\"}\n"))
        abort(); /* a few hundred bytes */
}

/* A stream Ollama cut: its own in-band error line ({"error":"..."}, what ollama-js throws on),
 * on a line of its own, before the cut. Only on a chunked stream (no length to overrun). */
static void send_error_line(struct proxy *p, const char *msg)
{
    if (!p->ndjson || p->length >= 0)
        return;
    struct qr_buf line;
    qr_buf_init(&line, 0);
    if (!p->at_line_start && qr_buf_puts(&line, "\n"))
        abort();
    error_line(&line, msg);
    qr_http_resp_write(p->req, line.ptr, line.len);
    qr_buf_cleanup(&line);
}

static void on_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                    void *arg)
{
    struct proxy *p = arg;
    struct qr_http_req *req = p->req;
    p->call = NULL;
    qr_http_req_set_close_cb(req, NULL, NULL);
    qr_http_resp_set_drain_cb(req, NULL, NULL);
    if (err == QR_OK && p->hold)
        send_head(p); /* the held answer ended whole */
    if (err == QR_OK) {
        if (!qr_http_resp_started(req))
            qr_http_resp_start(req, 502, 0);
        qr_http_resp_end(req);
    } else if (qr_http_resp_started(req)) {
        /* Mid-stream failure: an in-band error line (NDJSON streams), then cut the stream so the
         * client cannot mistake it for a clean end. */
        QR_LOG(QR_LOG_WARN, "upstream failed mid-stream",
               QR_LF_S("request_id", qr_http_req_id(req)), QR_LF_S("error", qr_err_str(err)),
               QR_LF_S("detail", diag ? diag->msg : ""));
        char msg[600];
        snprintf(msg, sizeof(msg), "the Ollama backend failed mid-stream: %s",
                 diag && diag->msg[0] ? diag->msg : qr_err_str(err));
        send_error_line(p, msg);
        qr_http_resp_abort(req);
    } else if (qr_err_is_upstream_timeout(err)) {
        char msg[200];
        snprintf(msg, sizeof(msg), "the Ollama backend did not answer in time (%s)",
                 qr_err_str(err));
        send_error(req, 504, qr_err_str(err), msg);
    } else {
        char msg[600];
        snprintf(msg, sizeof(msg), "the Ollama backend failed: %s", diag ? diag->msg : "");
        send_error(req, 502, "upstream_error", msg);
    }
    proxy_free(p);
}

unsigned qr_ollama_end_all(struct qr_backend *b, const char *why)
{
    if (!b || b->vt != &qr_backend_ollama)
        return 0;
    struct ollama *o = (struct ollama *) b;
    unsigned n = 0;
    while (o->live) {
        struct proxy *p = o->live;
        if (p->call)
            qr_http_call_cancel(p->call); /* no callback runs afterwards */
        p->call = NULL;
        struct qr_http_req *req = p->req;
        if (req) {
            qr_http_req_set_close_cb(req, NULL, NULL);
            qr_http_resp_set_drain_cb(req, NULL, NULL);
            if (qr_http_resp_started(req)) {
                send_error_line(p, why); /* in band, as a mid-stream failure */
                qr_http_resp_abort(req);
            } else {
                send_error(req, 503, "shutting_down", why);
            }
            n++;
        }
        proxy_free(p);
    }
    return n;
}

static enum qr_err build_url(struct proxy *p, const char *base_url, const char *target)
{
    size_t blen = strlen(base_url);
    while (blen && base_url[blen - 1] == '/')
        blen--;
    struct qr_buf b;
    qr_buf_init(&b, 64 * 1024);
    enum qr_err err = qr_buf_append(&b, base_url, blen);
    if (!err)
        err = qr_buf_puts(&b, target);
    if (err)
        return err;
    p->url = qr_buf_take(&b, NULL);
    return QR_OK;
}

/* Copy the forwardable request headers into one allocation and slice it. */
static enum qr_err build_headers(struct proxy *p)
{
    struct qr_http_req *req = p->req;
    const char *conn = qr_http_req_header(req, "Connection");
    size_t n = qr_http_req_header_count(req), total = 0;
    static const char ua[] = "Quantum-Runtime/" QR_VERSION " (Ollama compatibility)";
    for (size_t i = 0; i < n; i++) {
        const struct qr_http_header *h = qr_http_req_header_at(req, i);
        total += h->name.len + h->value.len;
    }
    p->hdr_text = malloc(total + sizeof(ua) + 16);
    if (!p->hdr_text)
        return QR_ERR_NOMEM;
    char *w = p->hdr_text;
    for (size_t i = 0; i < n; i++) {
        const struct qr_http_header *h = qr_http_req_header_at(req, i);
        if (in_list(h->name, drop_request, QR_ARRAY_LEN(drop_request)) ||
            named_by_connection(h->name, conn))
            continue;
        if (p->n_hdrs + 1 >= MAX_FORWARD_HEADERS)
            return QR_ERR_TOO_LARGE;
        memcpy(w, h->name.ptr, h->name.len);
        p->hdrs[p->n_hdrs].name = (struct qr_slice){w, h->name.len};
        w += h->name.len;
        memcpy(w, h->value.ptr, h->value.len);
        p->hdrs[p->n_hdrs].value = (struct qr_slice){w, h->value.len};
        w += h->value.len;
        p->n_hdrs++;
    }
    memcpy(w, "User-Agent", 10);
    p->hdrs[p->n_hdrs].name = (struct qr_slice){w, 10};
    w += 10;
    memcpy(w, ua, sizeof(ua) - 1);
    p->hdrs[p->n_hdrs].value = (struct qr_slice){w, sizeof(ua) - 1};
    p->n_hdrs++;
    return QR_OK;
}

static void on_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct proxy *p = arg;
    struct qr_diag diag = {{0}};
    if (err == QR_ERR_TOO_LARGE) {
        send_error(req, 413, "request_too_large", "the request body is larger than allowed");
        goto fail;
    }
    if (err) {
        send_error(req, 400, "bad_request", "the request body could not be read");
        goto fail;
    }
    if (build_headers(p)) {
        send_error(req, 431, "request_header_fields_too_large", "too many headers to forward");
        goto fail;
    }
    const struct qr_config *cfg = p->o->base.env.config;
    struct qr_http_call_opts opts = {
        .method = qr_http_req_method(req),
        .url = p->url,
        .headers = p->hdrs,
        .n_headers = p->n_hdrs,
        .body = qr_http_req_body(req),
        .connect_timeout_ms = qr_backend_connect_timeout_ms(&p->o->base),
        .timeout_ms = cfg->upstream_timeout_ms,
        /* forwarded byte for byte (pulls and creates too, whose progress may pause for long):
         * no first byte or idle bound, only connect and total */
        .on_response = on_response,
        .on_data = on_data,
        .on_done = on_done,
        .arg = p,
    };
    if (qr_http_call_start(p->o->base.env.http, &opts, &diag, &p->call)) {
        char msg[600];
        snprintf(msg, sizeof(msg), "cannot reach the Ollama backend: %s", diag.msg);
        send_error(req, 502, "upstream_error", msg);
        goto fail;
    }
    qr_http_resp_set_drain_cb(req, on_drain, p);
    return;
fail:
    qr_http_req_set_close_cb(req, NULL, NULL);
    proxy_free(p);
}

/* Is target (path and query) one of the inference routes admission counts? */
static bool is_inference(const char *target)
{
    static const char *const paths[] = {"/api/chat", "/api/generate", "/api/embed",
                                        "/api/embeddings"};
    size_t len = strcspn(target, "?");
    for (size_t i = 0; i < QR_ARRAY_LEN(paths); i++) {
        if (strlen(paths[i]) == len && !strncmp(target, paths[i], len))
            return true;
    }
    return false;
}

/* 503 in Ollama's own shape ({"error":"server busy, ..."}) with Retry-After; nothing forwarded. */
static void refuse_busy(struct qr_backend *b, struct qr_http_req *req, enum qr_admit a)
{
    char msg[300];
    qr_backend_admit_message(b, a, msg, sizeof(msg));
    struct qr_buf line;
    qr_buf_init(&line, 0);
    error_line(&line, msg);
    QR_LOG(QR_LOG_INFO, "inference refused: queue full", QR_LF_S("request_id", qr_http_req_id(req)),
           QR_LF_S("backend", qr_backend_id(b)), QR_LF_N("depth", b->admitted));
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Cache-Control", "no-store");
    qr_http_resp_header(req, "Retry-After", "1");
    qr_http_resp_send(req, 503, "application/json; charset=utf-8", line.ptr, line.len);
    qr_buf_cleanup(&line);
}

static void ollama_proxy(struct qr_backend *b, struct qr_http_req *req, const char *target)
{
    bool inference = is_inference(target);
    enum qr_admit adm = inference ? qr_backend_admit(b) : QR_ADMIT_OK;
    if (adm != QR_ADMIT_OK) {
        refuse_busy(b, req, adm);
        return;
    }
    struct proxy *p = calloc(1, sizeof(*p));
    if (!p || build_url(p, qr_backend_url(b), target)) {
        free(p);
        if (inference)
            qr_backend_release(b);
        send_error(req, 500, "internal_error", "out of memory");
        return;
    }
    p->o = (struct ollama *) b;
    p->next = p->o->live;
    if (p->next)
        p->next->prev = p;
    p->o->live = p;
    p->admitted = inference;
    p->req = req;
    qr_http_req_set_close_cb(req, on_client_gone, p);
    qr_http_req_read_body(req, b->env.config->max_request_bytes, on_body, p);
}

/* ---- readiness, models, canonical requests ---- */

struct vprobe {
    struct ollama *o;
    qr_backend_probe_fn cb;
    void *arg;
};

/* Keep a version string that is short printable ASCII; anything else is not believed. */
static void keep_version(struct ollama *o, struct qr_slice body)
{
    yyjson_doc *doc = yyjson_read(body.ptr, body.len, 0);
    yyjson_val *v = yyjson_obj_get(yyjson_doc_get_root(doc), "version");
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    bool ok = s && n > 0 && n < sizeof(o->version);
    for (size_t i = 0; ok && i < n; i++)
        ok = s[i] > 0x20 && s[i] < 0x7f;
    if (ok && (strlen(o->version) != n || memcmp(o->version, s, n))) {
        memcpy(o->version, s, n);
        o->version[n] = '\0';
        QR_LOG(QR_LOG_INFO, "ollama engine version", QR_LF_S("version", o->version));
    }
    yyjson_doc_free(doc);
}

static void version_done(enum qr_err err, int status, struct qr_slice body,
                         const struct qr_diag *diag, void *arg)
{
    struct vprobe pr = *(struct vprobe *) arg;
    free(arg);
    struct qr_diag d = {{0}};
    if (err == QR_OK && (status < 200 || status > 299))
        err = qr_diag_set(&d, QR_ERR_UPSTREAM, "GET /api/version answered %d", status);
    else if (err)
        qr_diag_set(&d, err, "%s", diag->msg);
    else
        keep_version(pr.o, body);
    pr.cb(&pr.o->base, err, &d, pr.arg);
}

static enum qr_err ollama_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                                void *arg)
{
    struct vprobe *pr = malloc(sizeof(*pr));
    if (!pr)
        return QR_ERR_NOMEM;
    *pr = (struct vprobe){(struct ollama *) b, cb, arg};
    enum qr_err err = qr_fetch(b, qr_backend_url(b), "/api/version", NULL, timeout_ms, 64 * 1024,
                               version_done, pr);
    if (err)
        free(pr);
    return err;
}

const char *qr_ollama_engine_version(const struct qr_backend *b)
{
    if (!b || b->vt != &qr_backend_ollama)
        return "";
    return ((const struct ollama *) b)->version;
}

/* ---- canonical requests: described first, then encoded and sent ---- */

struct ojob {
    struct ollama *o;
    struct qr_job *handle;            /* what submit handed out */
    struct qr_job *inner;             /* the HTTP job once started */
    struct qr_ollama_show_wait *wait; /* while the description is on the way */
    struct qr_request req;            /* the caller's request (its arena outlives the job) */
    qr_event_fn fn;
    void *arg;
    bool paused;
};

static void ojob_free(struct ojob *j)
{
    qr_job_free_custom(j->handle);
    free(j);
}

/* The dialect for j's request from the model's description (NULL: none known, why says why),
 * or the context admission's refusal (show.c). */
static enum qr_err plan(const struct qr_request *req, const struct qr_ollama_show *show,
                        const char *why, struct qr_dialect *d, struct qr_api_error *err)
{
    qr_dialect_default(d, QR_UP_OLLAMA);
    d->send_num_ctx = req->context_len_forward;
    if (show && show->has_caps) {
        d->think_known = true;
        d->think_capable = (show->caps & QR_OLLAMA_CAP_THINKING) != 0;
        d->think_levels = show->think_levels;
        d->tools_capable = (show->caps & QR_OLLAMA_CAP_TOOLS) != 0;
        d->vision_capable = (show->caps & QR_OLLAMA_CAP_VISION) != 0;
    }
    return qr_ollama_show_admit_context(req, show, why, err);
}

/* Between the HTTP job and the caller: a refusal from Ollama (the model may have changed, or
 * be gone) drops the model's description; the job ends after its final event. */
static enum qr_err ojob_relay(void *arg, const struct qr_event *ev)
{
    struct ojob *j = arg;
    if (ev->type == QR_EV_ERROR &&
        (qr_slice_eq(ev->code, "upstream_rejected") || qr_slice_eq(ev->code, "model_not_found")))
        qr_ollama_show_forget(j->o->shows, j->req.model);
    enum qr_err e = j->fn(j->arg, ev);
    if (ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR || e) {
        j->inner = NULL; /* after a final event or a consumer failure it frees itself */
        ojob_free(j);
    }
    return e;
}

/* START + ERROR to the caller (a refusal decided after submit returned); the job ends. */
static void ojob_fail(struct ojob *j, const struct qr_api_error *err)
{
    struct qr_event ev = {.type = QR_EV_START};
    ev.name = qr_slice_str(qr_backend_ollama.id);
    ev.model = j->req.model;
    if (j->fn(j->arg, &ev) == QR_OK) {
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_ERROR;
        ev.status = err->status;
        ev.code = qr_slice_str(err->code);
        ev.message = qr_slice_str(err->message);
        ev.retryable = err->status == 503;
        j->fn(j->arg, &ev);
    }
    ojob_free(j);
}

static enum qr_err ojob_start(struct ojob *j, const struct qr_ollama_show *show, const char *why,
                              struct qr_api_error *err)
{
    struct qr_dialect d;
    enum qr_err e = plan(&j->req, show, why, &d, err);
    if (!e)
        e = qr_job_start_http(&j->o->base, &d, qr_backend_url(&j->o->base), NULL, &j->req,
                              ojob_relay, j, &j->inner, err);
    if (!e && j->paused)
        qr_job_pause(j->inner);
    return e;
}

static void on_show(void *arg, enum qr_err err, const struct qr_ollama_show *show,
                    const struct qr_diag *why)
{
    struct ojob *j = arg;
    j->wait = NULL;
    struct qr_api_error e = {0};
    if (err == QR_ERR_CANCELLED) {
        qr_api_error_set(&e, err, 503, "shutting_down", "", "%s", why->msg);
        ojob_fail(j, &e);
        return;
    }
    if (ojob_start(j, show, why->msg, &e))
        ojob_fail(j, &e);
}

static void ojob_cancel(void *impl)
{
    struct ojob *j = impl;
    qr_ollama_show_unwait(j->wait);
    if (j->inner)
        qr_job_cancel(j->inner);
    ojob_free(j);
}

static void ojob_pause(void *impl, bool paused)
{
    struct ojob *j = impl;
    j->paused = paused;
    if (j->inner) {
        if (paused)
            qr_job_pause(j->inner);
        else
            qr_job_resume(j->inner);
    }
}

static const struct qr_job_ops ojob_ops = {.cancel = ojob_cancel, .pause = ojob_pause};

static enum qr_err ollama_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                                 void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct ollama *o = (struct ollama *) b;
    if (req->op == QR_OP_RERANK) { /* refused by the codec at once: nothing to describe */
        struct qr_dialect d;
        qr_dialect_default(&d, QR_UP_OLLAMA);
        return qr_job_start_http(b, &d, qr_backend_url(b), NULL, req, fn, arg, out, err);
    }
    struct ojob *j = calloc(1, sizeof(*j));
    if (!j || !(j->handle = qr_job_new_custom(&ojob_ops, j))) {
        free(j);
        return qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    }
    j->o = o;
    j->req = *req;
    j->fn = fn;
    j->arg = arg;
    struct qr_ollama_show show;
    struct qr_diag why = {{0}};
    enum qr_err e = QR_OK;
    switch (qr_ollama_show_get(o->shows, req->model, qr_backend_url(b), on_show, j, &show, &why,
                               &j->wait)) {
    case QR_OLLAMA_SHOW_HIT:
        e = ojob_start(j, &show, NULL, err);
        break;
    case QR_OLLAMA_SHOW_FAILED:
        /* proceed without the description where that is safe (plan() refuses the rest) */
        e = ojob_start(j, NULL, why.msg, err);
        break;
    case QR_OLLAMA_SHOW_PENDING:
        break;
    }
    if (e) {
        ojob_free(j);
        return e;
    }
    *out = j->handle;
    return QR_OK;
}

static enum qr_err ollama_open(struct qr_backend *b, struct qr_diag *diag)
{
    struct ollama *o = (struct ollama *) b;
    if (!(o->shows = qr_ollama_shows_new(b)))
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    return QR_OK;
}

static void ollama_close(struct qr_backend *b)
{
    qr_ollama_shows_free(((struct ollama *) b)->shows);
}

static const char *str_or(yyjson_val *v, const char *dflt)
{
    const char *s = yyjson_get_str(v);
    return s ? s : dflt;
}

/* One /api/tags entry. */
static bool tags_row(yyjson_val *m, struct qr_backend_model *r)
{
    const char *name = str_or(yyjson_obj_get(m, "name"), NULL);
    if (!name)
        name = str_or(yyjson_obj_get(m, "model"), NULL);
    if (!name)
        return false;
    yyjson_val *size = yyjson_obj_get(m, "size");
    r->id = name;
    r->owned_by = "ollama";
    r->size_bytes = yyjson_is_int(size) ? yyjson_get_sint(size) : -1;
    r->digest = str_or(yyjson_obj_get(m, "digest"), "");
    r->family = str_or(yyjson_obj_get(yyjson_obj_get(m, "details"), "family"), "");
    return true;
}

struct models_ctx {
    struct ollama *o;
    qr_models_fn cb;
    void *arg;
};

/* A listing also tells the description cache which models changed (their digest). */
static void models_seen(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                        size_t n, const struct qr_diag *diag, void *arg)
{
    struct models_ctx ctx = *(struct models_ctx *) arg;
    free(arg);
    for (size_t i = 0; err == QR_OK && i < n; i++)
        qr_ollama_show_note_digest(ctx.o->shows, qr_slice_str(m[i].id), m[i].digest);
    ctx.cb(b, err, m, n, diag, ctx.arg);
}

static enum qr_err ollama_list_models(struct qr_backend *b, uint32_t timeout_ms, qr_models_fn cb,
                                      void *arg)
{
    struct models_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        return QR_ERR_NOMEM;
    *ctx = (struct models_ctx){(struct ollama *) b, cb, arg};
    enum qr_err err = qr_fetch_models(b, qr_backend_url(b), "/api/tags", NULL, timeout_ms, "models",
                                      tags_row, models_seen, ctx);
    if (err)
        free(ctx);
    return err;
}

/* ---- description ---- */

static void add_caps(yyjson_mut_doc *doc, yyjson_mut_val *caps)
{
    /* What an arbitrary Ollama daemon can do depends on the model it serves: conditional until a
     * later stage verifies it per model; unknown where nothing is known. */
    static const struct {
        const char *key, *state;
    } rows[] = {
        {"text", "conditional"},
        {"architecture.dense", "conditional"},
        {"architecture.moe", "conditional"},
        {"moe.expert_offload", "conditional"},
        {"moe.expert_parallel", "unknown"},
        {"speculative.mtp", "conditional"},
        {"speculative.draft_model", "conditional"},
        {"cache.kv_offload", "conditional"},
        {"cache.prompt_cache", "conditional"},
        {"multimodal.vision", "conditional"},
        {"multimodal.audio", "conditional"},
        {"embeddings", "conditional"},
        {"reranking", "unsupported"}, /* Ollama has no rerank API (codec_ollama.c refuses) */
        {"reasoning_control", "conditional"},
        {"tools.calling", "conditional"},
        /* Ollama streams each tool call whole (wire-protocols.md A.3/A.4, quirks 3-6); the
         * codec turns it into OpenAI deltas (id, type, name, then the whole arguments as one
         * fragment), ids kept: model-dependent like tools.calling */
        {"tools.streaming", "conditional"},
        {"structured_output", "conditional"},
        {"streaming.content", "supported"},
        {"streaming.reasoning", "conditional"},
        {"streaming.tool_arguments", "conditional"},
        {"placement.cpu", "supported"},
        {"placement.gpu", "conditional"},
        {"placement.hybrid", "conditional"},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(rows); i++)
        yyjson_mut_obj_add_str(doc, caps, rows[i].key, rows[i].state);
    yyjson_mut_val *ctx = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_bool(doc, ctx, "backend_managed", true);
    yyjson_mut_obj_add_str(doc, ctx, "override_supported", "conditional");
    yyjson_mut_obj_add_bool(doc, ctx, "override_verified", false);
    yyjson_mut_obj_add_val(doc, caps, "context", ctx);
}

static void ollama_describe(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_obj_add_str(doc, obj, "execution_mode", "external");
    yyjson_mut_obj_add_strcpy(doc, obj, "endpoint", qr_backend_url(b));
    yyjson_mut_val *caps = yyjson_mut_obj(doc);
    add_caps(doc, caps);
    yyjson_mut_obj_add_val(doc, obj, "capabilities", caps);
}

const struct qr_backend_vtable qr_backend_ollama = {
    .version = QR_BACKEND_VTABLE_V1,
    .id = "ollama",
    .kind = "ollama-adapter",
    .instance_size = sizeof(struct ollama),
    .open = ollama_open,
    .close = ollama_close,
    .describe = ollama_describe,
    .probe = ollama_probe,
    .proxy = ollama_proxy,
    .submit = ollama_submit,
    .list_models = ollama_list_models,
};

size_t qr_ollama_described_each(struct qr_backend *b,
                                void (*fn)(void *arg, const char *model,
                                           const struct qr_ollama_show *show),
                                void *arg)
{
    if (!b || b->vt != &qr_backend_ollama)
        return 0;
    return qr_ollama_shows_each(((struct ollama *) b)->shows, fn, arg);
}
