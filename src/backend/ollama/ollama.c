/* Ollama adapter, adoption stage: an existing Ollama daemon behind the Runtime. Client requests
 * on the allowlisted Ollama API routes are passed through byte for byte; the answer streams back
 * chunk by chunk as Ollama produces it, with back-pressure both ways (a slow client pauses the
 * upstream transfer). The Runtime's credentials, cookies and forwarding headers never reach Ollama,
 * and Ollama's cookies never reach the client. Readiness is GET /api/version. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "backend/codec.h"
#include "backend/job.h"
#include "build_info.h"
#include "core/http_client.h"
#include "core/http_server.h"
#include "core/log.h"

#define MAX_FORWARD_HEADERS 128

struct ollama {
    struct qr_backend base;
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
    struct qr_http_req *req;   /* NULL once the client is gone */
    struct qr_http_call *call; /* NULL until started and after done */
    char *url;
    char *hdr_text; /* backing store of forwarded header slices */
    struct qr_http_header hdrs[MAX_FORWARD_HEADERS];
    size_t n_hdrs;
    bool paused;
    uint64_t bytes;
};

static void proxy_free(struct proxy *p)
{
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

static bool on_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                        size_t n, void *arg)
{
    struct proxy *p = arg;
    int64_t length = -1;
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
        if (in_list(h[i].name, drop_response, QR_ARRAY_LEN(drop_response)))
            continue;
        char name[256];
        if (h[i].name.len >= sizeof(name))
            continue;
        memcpy(name, h[i].name.ptr, h[i].name.len);
        name[h[i].name.len] = '\0';
        char *value = strndup(h[i].value.ptr, h[i].value.len);
        if (!value)
            abort();
        qr_http_resp_header(p->req, name, value);
        free(value);
    }
    qr_http_resp_header(p->req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_start(p->req, status, length);
    return true;
}

static bool on_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct proxy *p = arg;
    p->bytes += len;
    if (!qr_http_resp_write(p->req, data, len) && !p->paused) {
        p->paused = true;
        qr_http_call_pause(call);
    }
    return true;
}

static void on_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                    void *arg)
{
    struct proxy *p = arg;
    struct qr_http_req *req = p->req;
    p->call = NULL;
    qr_http_req_set_close_cb(req, NULL, NULL);
    qr_http_resp_set_drain_cb(req, NULL, NULL);
    if (err == QR_OK) {
        if (!qr_http_resp_started(req))
            qr_http_resp_start(req, 502, 0);
        qr_http_resp_end(req);
    } else if (qr_http_resp_started(req)) {
        /* Mid-stream failure: cut the stream so the client cannot mistake it for a clean end. */
        QR_LOG(QR_LOG_WARN, "upstream failed mid-stream",
               QR_LF_S("request_id", qr_http_req_id(req)), QR_LF_S("error", qr_err_str(err)),
               QR_LF_S("detail", diag ? diag->msg : ""));
        qr_http_resp_abort(req);
    } else if (err == QR_ERR_UPSTREAM_TIMEOUT) {
        send_error(req, 504, "upstream_timeout", "the Ollama backend did not answer in time");
    } else {
        char msg[600];
        snprintf(msg, sizeof(msg), "the Ollama backend failed: %s", diag ? diag->msg : "");
        send_error(req, 502, "upstream_error", msg);
    }
    proxy_free(p);
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
        .connect_timeout_ms = 10000,
        .timeout_ms = cfg->upstream_timeout_ms,
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

static void ollama_proxy(struct qr_backend *b, struct qr_http_req *req, const char *target)
{
    struct proxy *p = calloc(1, sizeof(*p));
    if (!p || build_url(p, b->env.config->ollama_url, target)) {
        free(p);
        send_error(req, 500, "internal_error", "out of memory");
        return;
    }
    p->o = (struct ollama *) b;
    p->req = req;
    qr_http_req_set_close_cb(req, on_client_gone, p);
    qr_http_req_read_body(req, b->env.config->max_request_bytes, on_body, p);
}

/* ---- readiness, models, canonical requests ---- */

static enum qr_err ollama_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                                void *arg)
{
    return qr_fetch_probe(b, b->env.config->ollama_url, "/api/version", NULL, timeout_ms, cb, arg);
}

static enum qr_err ollama_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                                 void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OLLAMA);
    return qr_job_start_http(b, &d, b->env.config->ollama_url, NULL, req, fn, arg, out, err);
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

static enum qr_err ollama_list_models(struct qr_backend *b, uint32_t timeout_ms, qr_models_fn cb,
                                      void *arg)
{
    return qr_fetch_models(b, b->env.config->ollama_url, "/api/tags", NULL, timeout_ms, "models",
                           tags_row, cb, arg);
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
        {"tools.streaming", "unknown"},
        {"structured_output", "conditional"},
        {"streaming.content", "supported"},
        {"streaming.reasoning", "conditional"},
        {"streaming.tool_arguments", "unknown"},
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
    yyjson_mut_obj_add_strcpy(doc, obj, "endpoint", b->env.config->ollama_url);
    yyjson_mut_val *caps = yyjson_mut_obj(doc);
    add_caps(doc, caps);
    yyjson_mut_obj_add_val(doc, obj, "capabilities", caps);
}

const struct qr_backend_vtable qr_backend_ollama = {
    .version = QR_BACKEND_VTABLE_V1,
    .id = "ollama",
    .kind = "ollama-adapter",
    .instance_size = sizeof(struct ollama),
    .open = NULL,
    .close = NULL,
    .describe = ollama_describe,
    .probe = ollama_probe,
    .proxy = ollama_proxy,
    .submit = ollama_submit,
    .list_models = ollama_list_models,
};
