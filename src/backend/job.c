/* Canonical requests over HTTP: one job = encode (backend/codec.h) -> one upstream call
 * (core/http_client.h) -> decode chunk by chunk into canonical events. Also qr_fetch, the small
 * bounded GET (or POST) used for readiness probes, model lists and model descriptions. */
#include "backend/job.h"

#include <stdlib.h>
#include <string.h>

#include "build_info.h"
#include "core/http_client.h"

struct qr_job {
    struct qr_backend *b;
    struct qr_dialect dialect;
    const struct qr_request *req;
    qr_event_fn fn;
    void *arg;
    struct qr_http_call *call;
    struct qr_upstream_dec *dec;
    struct qr_buf body;
    char *url;
    char auth[4200];
    struct qr_http_header hdrs[4];
    size_t n_hdrs;
    bool final_sent; /* DONE or ERROR went to fn */
    bool consumer_failed;
    const struct qr_job_ops *ops; /* an adapter-run job (qr_job_new_custom); NULL for HTTP */
    void *impl;
    struct qr_job *prev, *next; /* b->jobs, while the HTTP call is live */
    bool linked;
};

static char *join_url(const char *base, const char *path)
{
    size_t blen = strlen(base);
    while (blen && base[blen - 1] == '/')
        blen--;
    struct qr_buf b;
    qr_buf_init(&b, 64 * 1024);
    if (qr_buf_append(&b, base, blen) || qr_buf_puts(&b, path))
        return NULL;
    return qr_buf_take(&b, NULL);
}

static void job_free(struct qr_job *j)
{
    if (j->linked) {
        if (j->prev)
            j->prev->next = j->next;
        else
            j->b->jobs = j->next;
        if (j->next)
            j->next->prev = j->prev;
    }
    if (j->dec)
        qr_upstream_dec_free(j->dec);
    qr_buf_cleanup(&j->body);
    free(j->url);
    free(j);
}

/* Between the decoder and the consumer: note the final event, stop after a consumer failure. */
static enum qr_err relay(void *arg, const struct qr_event *ev)
{
    struct qr_job *j = arg;
    if (j->final_sent || j->consumer_failed)
        return QR_ERR_CANCELLED;
    if (ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR)
        j->final_sent = true;
    struct qr_event named;
    if (ev->type == QR_EV_START && !ev->name.len) {
        named = *ev; /* the decoder does not know which backend it decodes for */
        named.name = qr_slice_str(qr_backend_id(j->b));
        ev = &named;
    }
    enum qr_err err = j->fn(j->arg, ev);
    if (err)
        j->consumer_failed = true;
    return err;
}

static bool on_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                        size_t n, void *arg)
{
    struct qr_job *j = arg;
    struct qr_slice ctype = {"", 0};
    for (size_t i = 0; i < n; i++) {
        if (qr_slice_eq_nocase(h[i].name, "Content-Type"))
            ctype = h[i].value;
    }
    if (qr_upstream_dec_new(&j->dialect, j->req, status, ctype, &j->dec) != QR_OK)
        return false;
    return true;
}

static bool on_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct qr_job *j = arg;
    qr_upstream_dec_feed(j->dec, data, len, relay, j);
    return !j->consumer_failed;
}

/* An error before any answer (connect failure, timeout before headers): START + ERROR. */
static void fail_early(struct qr_job *j, enum qr_err err, const struct qr_diag *diag)
{
    struct qr_event ev = {.type = QR_EV_START};
    ev.name = qr_slice_str(qr_backend_id(j->b));
    if (relay(j, &ev))
        return;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_ERROR;
    bool timeout = qr_err_is_upstream_timeout(err);
    ev.status = timeout ? 504 : 502;
    /* each timeout phase has its own code: upstream_connect_timeout, upstream_first_token_timeout,
     * upstream_idle_timeout, upstream_timeout (qr_err_str) */
    ev.code = qr_slice_str(timeout ? qr_err_str(err) : "upstream_error");
    char msg[700];
    if (timeout) /* the code in the text too: Ollama's error shape has no code field */
        snprintf(msg, sizeof(msg), "backend '%s' failed (%s): %s", qr_backend_id(j->b),
                 qr_err_str(err), diag && diag->msg[0] ? diag->msg : qr_err_str(err));
    else
        snprintf(msg, sizeof(msg), "backend '%s' failed: %s", qr_backend_id(j->b),
                 diag && diag->msg[0] ? diag->msg : qr_err_str(err));
    ev.message = qr_slice_str(msg);
    ev.retryable = true;
    relay(j, &ev);
}

static void on_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                    void *arg)
{
    struct qr_job *j = arg;
    j->call = NULL;
    if (!j->consumer_failed) {
        if (j->dec)
            qr_upstream_dec_finish(j->dec, err, relay, j);
        else
            fail_early(j, err, diag);
    }
    job_free(j);
}

enum qr_err qr_job_start_http(struct qr_backend *b, const struct qr_dialect *d,
                              const char *base_url, const char *api_key,
                              const struct qr_request *req, qr_event_fn fn, void *arg,
                              struct qr_job **out, struct qr_api_error *err)
{
    struct qr_job *j = calloc(1, sizeof(*j));
    if (!j)
        return qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
    j->b = b;
    j->dialect = *d;
    j->req = req;
    j->fn = fn;
    j->arg = arg;
    qr_buf_init(&j->body, d->max_body_bytes ? d->max_body_bytes : (size_t) 256 << 20);
    const char *path = NULL;
    enum qr_err e = qr_upstream_encode(&j->dialect, req, &j->body, &path, err);
    if (e)
        goto fail;
    j->url = join_url(base_url, path);
    if (!j->url) {
        e = qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
        goto fail;
    }
    static const char ua[] = "Quantum-Runtime/" QR_VERSION;
    j->hdrs[j->n_hdrs++] =
        (struct qr_http_header){QR_SLICE_LIT("Content-Type"), QR_SLICE_LIT("application/json")};
    j->hdrs[j->n_hdrs++] =
        (struct qr_http_header){QR_SLICE_LIT("User-Agent"), {ua, sizeof(ua) - 1}};
    if (api_key && api_key[0]) {
        int n = snprintf(j->auth, sizeof(j->auth), "Bearer %s", api_key);
        j->hdrs[j->n_hdrs++] =
            (struct qr_http_header){QR_SLICE_LIT("Authorization"), {j->auth, (size_t) n}};
    }
    struct qr_http_call_opts opts = {
        .method = "POST",
        .url = j->url,
        .headers = j->hdrs,
        .n_headers = j->n_hdrs,
        .body = {j->body.ptr ? j->body.ptr : "", j->body.len},
        .connect_timeout_ms = qr_backend_connect_timeout_ms(b),
        .timeout_ms = b->env.config->upstream_timeout_ms,
        /* a non-streamed answer's first byte comes when it is complete: only the total bounds it */
        .first_byte_timeout_ms = req->stream ? b->env.config->upstream_first_token_timeout_ms : 0,
        .idle_timeout_ms = req->stream ? b->env.config->upstream_idle_timeout_ms : 0,
        .on_response = on_response,
        .on_data = on_data,
        .on_done = on_done,
        .arg = j,
    };
    struct qr_diag diag = {{0}};
    if (qr_http_call_start(b->env.http, &opts, &diag, &j->call)) {
        e = qr_api_error_set(err, QR_ERR_UPSTREAM, 502, "upstream_error", "",
                             "cannot reach backend '%s': %s", qr_backend_id(b), diag.msg);
        goto fail;
    }
    j->next = b->jobs;
    if (b->jobs)
        b->jobs->prev = j;
    b->jobs = j;
    j->linked = true;
    *out = j;
    return QR_OK;
fail:
    job_free(j);
    return e;
}

void qr_job_free_orphans(struct qr_backend *b)
{
    struct qr_job *j = b->jobs;
    while (j) {
        struct qr_job *next = j->next;
        if (j->final_sent || j->consumer_failed) {
            if (j->call)
                qr_http_call_cancel(j->call);
            job_free(j);
        } else { /* its consumer frees it later: it must not touch b then */
            j->linked = false;
            j->prev = j->next = NULL;
        }
        j = next;
    }
    b->jobs = NULL;
}

struct qr_job *qr_job_new_custom(const struct qr_job_ops *ops, void *impl)
{
    struct qr_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->ops = ops;
    j->impl = impl;
    return j;
}

void qr_job_free_custom(struct qr_job *j)
{
    free(j);
}

void qr_job_cancel(struct qr_job *j)
{
    if (!j)
        return;
    if (j->ops) {
        j->ops->cancel(j->impl); /* the adapter frees j (qr_job_free_custom) */
        return;
    }
    if (j->call)
        qr_http_call_cancel(j->call);
    job_free(j);
}

void qr_job_pause(struct qr_job *j)
{
    if (j->ops) {
        j->ops->pause(j->impl, true);
        return;
    }
    if (j->call)
        qr_http_call_pause(j->call);
}

void qr_job_resume(struct qr_job *j)
{
    if (j->ops) {
        j->ops->pause(j->impl, false);
        return;
    }
    if (j->call)
        qr_http_call_resume(j->call);
}

/* ---- bounded GET ---- */

struct qr_fetch {
    struct qr_backend *b;
    struct qr_fetch *next;
    struct qr_http_call *call;
    qr_fetch_fn cb;
    void *arg;
    int status;
    struct qr_buf body;
    char *url;
    char *req_body; /* POST: the request body (owned), NULL for GET */
    char auth[4200];
    struct qr_http_header hdrs[4];
    bool too_large;
};

static void fetch_unlink(struct qr_fetch *f)
{
    struct qr_fetch **pp = &f->b->fetches;
    while (*pp && *pp != f)
        pp = &(*pp)->next;
    if (*pp)
        *pp = f->next;
}

static void fetch_free(struct qr_fetch *f)
{
    qr_buf_cleanup(&f->body);
    free(f->url);
    free(f->req_body);
    free(f);
}

static bool fetch_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                           size_t n, void *arg)
{
    ((struct qr_fetch *) arg)->status = status;
    return true;
}

static bool fetch_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct qr_fetch *f = arg;
    if (qr_buf_append(&f->body, data, len)) {
        f->too_large = true;
        return false;
    }
    return true;
}

static void fetch_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                       void *arg)
{
    struct qr_fetch *f = arg;
    struct qr_diag d = {{0}};
    fetch_unlink(f);
    if (f->too_large)
        err = qr_diag_set(&d, QR_ERR_UPSTREAM, "answer larger than allowed");
    else if (err)
        qr_diag_set(&d, err, "%s", diag && diag->msg[0] ? diag->msg : qr_err_str(err));
    struct qr_slice body = {f->body.ptr ? f->body.ptr : "", f->body.len};
    f->cb(err, f->status, body, &d, f->arg);
    fetch_free(f);
}

/* One bounded exchange: GET when body is NULL, else POST with a JSON body (copied). */
static enum qr_err fetch_start(struct qr_backend *b, const char *base_url, const char *path,
                               const char *api_key, const struct qr_slice *body,
                               uint32_t timeout_ms, size_t max_body, qr_fetch_fn cb, void *arg)
{
    struct qr_fetch *f = calloc(1, sizeof(*f));
    if (!f)
        return QR_ERR_NOMEM;
    f->b = b;
    f->cb = cb;
    f->arg = arg;
    qr_buf_init(&f->body, max_body);
    f->url = join_url(base_url, path);
    if (body && (f->req_body = malloc(body->len ? body->len : 1)) != NULL && body->len)
        memcpy(f->req_body, body->ptr, body->len);
    if (!f->url || (body && !f->req_body)) {
        fetch_free(f);
        return QR_ERR_NOMEM;
    }
    static const char ua[] = "Quantum-Runtime/" QR_VERSION " readiness";
    size_t n = 0;
    f->hdrs[n++] =
        (struct qr_http_header){QR_SLICE_LIT("Accept"), QR_SLICE_LIT("application/json")};
    f->hdrs[n++] = (struct qr_http_header){QR_SLICE_LIT("User-Agent"), {ua, sizeof(ua) - 1}};
    if (body)
        f->hdrs[n++] =
            (struct qr_http_header){QR_SLICE_LIT("Content-Type"), QR_SLICE_LIT("application/json")};
    if (api_key && api_key[0]) {
        int len = snprintf(f->auth, sizeof(f->auth), "Bearer %s", api_key);
        f->hdrs[n++] =
            (struct qr_http_header){QR_SLICE_LIT("Authorization"), {f->auth, (size_t) len}};
    }
    struct qr_http_call_opts opts = {
        .method = body ? "POST" : "GET",
        .url = f->url,
        .headers = f->hdrs,
        .n_headers = n,
        .body = {body ? f->req_body : "", body ? body->len : 0},
        .connect_timeout_ms = timeout_ms,
        .timeout_ms = timeout_ms,
        .on_response = fetch_response,
        .on_data = fetch_data,
        .on_done = fetch_done,
        .arg = f,
    };
    enum qr_err err = qr_http_call_start(b->env.http, &opts, NULL, &f->call);
    if (err) {
        fetch_free(f);
        return err;
    }
    f->next = b->fetches;
    b->fetches = f;
    return QR_OK;
}

enum qr_err qr_fetch(struct qr_backend *b, const char *base_url, const char *path,
                     const char *api_key, uint32_t timeout_ms, size_t max_body, qr_fetch_fn cb,
                     void *arg)
{
    return fetch_start(b, base_url, path, api_key, NULL, timeout_ms, max_body, cb, arg);
}

enum qr_err qr_fetch_post(struct qr_backend *b, const char *base_url, const char *path,
                          const char *api_key, struct qr_slice body, uint32_t timeout_ms,
                          size_t max_body, qr_fetch_fn cb, void *arg)
{
    return fetch_start(b, base_url, path, api_key, &body, timeout_ms, max_body, cb, arg);
}

void qr_fetch_cancel_all(struct qr_backend *b)
{
    struct qr_diag d;
    qr_diag_set(&d, QR_ERR_CANCELLED, "the runtime is shutting down");
    while (b->fetches) {
        struct qr_fetch *f = b->fetches;
        b->fetches = f->next;
        qr_http_call_cancel(f->call);
        f->cb(QR_ERR_CANCELLED, 0, (struct qr_slice){"", 0}, &d, f->arg);
        fetch_free(f);
    }
}

/* ---- probes and model lists on top of qr_fetch ---- */

struct probe_ctx {
    struct qr_backend *b;
    const char *path;
    qr_backend_probe_fn cb;
    void *arg;
};

static void probe_done(enum qr_err err, int status, struct qr_slice body,
                       const struct qr_diag *diag, void *arg)
{
    struct probe_ctx pr = *(struct probe_ctx *) arg;
    free(arg);
    struct qr_diag d = {{0}};
    if (err == QR_OK && (status < 200 || status > 299))
        err = qr_diag_set(&d, QR_ERR_UPSTREAM, "GET %s answered %d", pr.path, status);
    else if (err)
        qr_diag_set(&d, err, "%s", diag->msg);
    pr.cb(pr.b, err, &d, pr.arg);
}

enum qr_err qr_fetch_probe(struct qr_backend *b, const char *base_url, const char *path,
                           const char *api_key, uint32_t timeout_ms, qr_backend_probe_fn cb,
                           void *arg)
{
    struct probe_ctx *pr = malloc(sizeof(*pr));
    if (!pr)
        return QR_ERR_NOMEM;
    *pr = (struct probe_ctx){b, path, cb, arg};
    enum qr_err err = qr_fetch(b, base_url, path, api_key, timeout_ms, 64 * 1024, probe_done, pr);
    if (err)
        free(pr);
    return err;
}

struct models_ctx {
    struct qr_backend *b;
    const char *path;
    const char *list_key;
    qr_model_row_fn row;
    qr_models_fn cb;
    void *arg;
};

static void models_done(enum qr_err err, int status, struct qr_slice body,
                        const struct qr_diag *diag, void *arg)
{
    struct models_ctx ctx = *(struct models_ctx *) arg;
    free(arg);
    struct qr_diag d = {{0}};
    if (err) {
        ctx.cb(ctx.b, err, NULL, 0, diag, ctx.arg);
        return;
    }
    yyjson_doc *doc = status == 200 ? yyjson_read(body.ptr, body.len, 0) : NULL;
    yyjson_val *list = yyjson_obj_get(yyjson_doc_get_root(doc), ctx.list_key);
    size_t n = yyjson_arr_size(list), i = 0, idx, max;
    struct qr_backend_model *rows = yyjson_is_arr(list) ? calloc(n ? n : 1, sizeof(*rows)) : NULL;
    if (!rows) {
        qr_diag_set(&d, QR_ERR_UPSTREAM, "GET %s answered %d without a '%s' list", ctx.path, status,
                    ctx.list_key ? ctx.list_key : "");
        ctx.cb(ctx.b, QR_ERR_UPSTREAM, NULL, 0, &d, ctx.arg);
        yyjson_doc_free(doc);
        return;
    }
    yyjson_val *item;
    yyjson_arr_foreach(list, idx, max, item)
    {
        struct qr_backend_model r = {
            .owned_by = "", .size_bytes = -1, .digest = "", .family = "", .context_length = -1};
        if (ctx.row(item, &r))
            rows[i++] = r;
    }
    ctx.cb(ctx.b, QR_OK, rows, i, &d, ctx.arg);
    free(rows);
    yyjson_doc_free(doc);
}

enum qr_err qr_fetch_models(struct qr_backend *b, const char *base_url, const char *path,
                            const char *api_key, uint32_t timeout_ms, const char *list_key,
                            qr_model_row_fn row, qr_models_fn cb, void *arg)
{
    struct models_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        return QR_ERR_NOMEM;
    *ctx = (struct models_ctx){b, path, list_key, row, cb, arg};
    enum qr_err err = qr_fetch(b, base_url, path, api_key, timeout_ms, 16u << 20, models_done, ctx);
    if (err)
        free(ctx);
    return err;
}
