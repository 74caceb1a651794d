/* Prometheus metrics: a process-wide registry of counter and histogram families, each a small
 * array of series keyed by their label values, updated by the request path (infer.c), the engine
 * supervisor's crash report (llamacpp_glue.c) and the router's ledger refusals, and written as
 * text exposition format 0.0.4 by GET /metrics together with the gauges read at scrape time
 * (loaded models and their bytes, queue depth per backend, active streams, build info). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/metrics.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "build_info.h"
#include "core/http_server.h"

#define PREFIX     "quantum_runtime_"
#define LABELS_MAX 4u

struct family {
    const char *name; /* without PREFIX */
    const char *help;
    bool histogram;
    size_t n_labels;
    const char *labels[LABELS_MAX];
    const double *bounds; /* histogram upper bounds, ascending (+Inf implied) */
    const char *const *le;
    size_t n_bounds;
};

static const double ttft_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                     1,     2.5,  5,     10,   30,  60};
static const char *const ttft_le[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
                                      "1",     "2.5",  "5",     "10",   "30",  "60"};
static const double tps_bounds[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000};
static const char *const tps_le[] = {"1",   "2",   "5",   "10",   "20",   "50",
                                     "100", "200", "500", "1000", "2000", "5000"};

static const struct family families[QR_M__COUNT] = {
    [QR_M_REQUESTS] = {"requests_total",
                       "Inference requests by route, model, backend and HTTP status.",
                       false,
                       4,
                       {"route", "model", "backend", "status"},
                       NULL,
                       NULL,
                       0},
    [QR_M_TTFT] = {"time_to_first_token_seconds",
                   "Seconds from the request to the first generated output.",
                   true,
                   2,
                   {"model", "backend"},
                   ttft_bounds,
                   ttft_le,
                   QR_ARRAY_LEN(ttft_bounds)},
    [QR_M_DECODE_TPS] = {"decode_tokens_per_second",
                         "Generated tokens per second of decode time, per request.",
                         true,
                         2,
                         {"model", "backend"},
                         tps_bounds,
                         tps_le,
                         QR_ARRAY_LEN(tps_bounds)},
    [QR_M_TOKENS] = {"tokens_total",
                     "Tokens read (in: prompt) and generated (out) as the engine reported them.",
                     false,
                     3,
                     {"direction", "model", "backend"},
                     NULL,
                     NULL,
                     0},
    [QR_M_RESTARTS] = {"engine_restarts_total",
                       "Engine restarts scheduled after a crash.",
                       false,
                       1,
                       {"backend"},
                       NULL,
                       NULL,
                       0},
    [QR_M_CRASHES] = {"engine_crashes_total",
                      "Engine processes that died unasked or missed their load timeout.",
                      false,
                      1,
                      {"backend"},
                      NULL,
                      NULL,
                      0},
    [QR_M_LEDGER_BLOCKS] = {"ledger_blocks_total",
                            "Backends refused for a request because the upstream ledger blocks "
                            "a required capability (reason: the capability).",
                            false,
                            2,
                            {"backend", "reason"},
                            NULL,
                            NULL,
                            0},
};

struct series {
    char *labels[LABELS_MAX]; /* owned */
    double value;             /* counter */
    uint64_t *counts;         /* histogram: per bucket (not cumulative), n_bounds + 1 (+Inf) */
    double sum;
    uint64_t count;
};

static struct {
    struct series *s;
    size_t n, cap;
} reg[QR_M__COUNT];
static uint64_t dropped;
static uint64_t streams;

/* The length of v kept as a label value: at most QR_METRICS_LABEL_MAX - 1 bytes, never cut
 * inside a UTF-8 sequence. */
static size_t cut_len(const char *v)
{
    size_t n = strlen(v);
    if (n >= QR_METRICS_LABEL_MAX) {
        n = QR_METRICS_LABEL_MAX - 1;
        while (n && ((unsigned char) v[n] & 0xC0) == 0x80)
            n--;
    }
    return n;
}

static char *label_dup(const char *v)
{
    if (!v)
        v = "";
    size_t n = cut_len(v);
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    memcpy(out, v, n);
    out[n] = '\0';
    return out;
}

static bool labels_equal(const struct series *s, size_t n, const char *const *labels)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = labels[i] ? labels[i] : "";
        size_t len = cut_len(v); /* compared as stored */
        if (strncmp(s->labels[i], v, len) || s->labels[i][len])
            return false;
    }
    return true;
}

static void series_free(struct series *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++)
        free(s->labels[i]);
    free(s->counts);
}

/* The series of family m with these labels, created when new; NULL past the cap or on OOM. */
static struct series *series_get(enum qr_metric m, const char *const *labels)
{
    const struct family *f = &families[m];
    for (size_t i = 0; i < reg[m].n; i++)
        if (labels_equal(&reg[m].s[i], f->n_labels, labels))
            return &reg[m].s[i];
    if (reg[m].n >= QR_METRICS_SERIES_MAX)
        goto drop;
    if (reg[m].n == reg[m].cap) {
        size_t cap = reg[m].cap ? reg[m].cap * 2 : 8;
        struct series *s = realloc(reg[m].s, cap * sizeof(*s));
        if (!s)
            goto drop;
        reg[m].s = s;
        reg[m].cap = cap;
    }
    struct series *s = &reg[m].s[reg[m].n];
    *s = (struct series){0};
    for (size_t i = 0; i < f->n_labels; i++)
        if (!(s->labels[i] = label_dup(labels[i])))
            goto fail;
    if (f->histogram && !(s->counts = calloc(f->n_bounds + 1, sizeof(*s->counts))))
        goto fail;
    reg[m].n++;
    return s;
fail:
    series_free(s, f->n_labels);
drop:
    dropped++;
    return NULL;
}

void qr_metrics_add(enum qr_metric m, const char *const *labels, double v)
{
    if ((unsigned) m >= QR_M__COUNT || families[m].histogram || !(v >= 0))
        return;
    struct series *s = series_get(m, labels);
    if (s)
        s->value += v;
}

void qr_metrics_observe(enum qr_metric m, const char *const *labels, double v)
{
    if ((unsigned) m >= QR_M__COUNT || !families[m].histogram || isnan(v))
        return;
    const struct family *f = &families[m];
    struct series *s = series_get(m, labels);
    if (!s)
        return;
    size_t b = 0;
    while (b < f->n_bounds && v > f->bounds[b])
        b++;
    s->counts[b]++;
    s->sum += v;
    s->count++;
}

void qr_metrics_stream_begin(void)
{
    streams++;
}

void qr_metrics_stream_end(void)
{
    if (streams)
        streams--;
}

void qr_metrics_request(const struct qr_metrics_request *r)
{
    char status[16];
    snprintf(status, sizeof(status), "%d", r->status);
    const char *req[] = {r->route, r->model, r->backend, status};
    qr_metrics_add(QR_M_REQUESTS, req, 1);
    const char *mb[] = {r->model, r->backend};
    if (r->ttft_s >= 0)
        qr_metrics_observe(QR_M_TTFT, mb, r->ttft_s);
    if (r->tokens_out > 0 && r->decode_s > 0)
        qr_metrics_observe(QR_M_DECODE_TPS, mb, (double) r->tokens_out / r->decode_s);
    const char *in[] = {"in", r->model, r->backend};
    const char *out[] = {"out", r->model, r->backend};
    if (r->tokens_in >= 0)
        qr_metrics_add(QR_M_TOKENS, in, (double) r->tokens_in);
    if (r->tokens_out >= 0)
        qr_metrics_add(QR_M_TOKENS, out, (double) r->tokens_out);
}

void qr_metrics_engine_crash(const char *backend, bool restarting)
{
    const char *l[] = {backend};
    qr_metrics_add(QR_M_CRASHES, l, 1);
    if (restarting)
        qr_metrics_add(QR_M_RESTARTS, l, 1);
}

void qr_metrics_reset(void)
{
    for (size_t m = 0; m < QR_M__COUNT; m++) {
        for (size_t i = 0; i < reg[m].n; i++)
            series_free(&reg[m].s[i], families[m].n_labels);
        free(reg[m].s);
        reg[m].s = NULL;
        reg[m].n = reg[m].cap = 0;
    }
    dropped = 0;
    streams = 0;
}

/* ---- the exposition writer ---- */

enum qr_err qr_metrics_escape_label(const char *s, struct qr_buf *out)
{
    enum qr_err err = QR_OK;
    for (const char *p = s ? s : ""; *p && !err; p++) {
        if (*p == '\\')
            err = qr_buf_append(out, "\\\\", 2);
        else if (*p == '"')
            err = qr_buf_append(out, "\\\"", 2);
        else if (*p == '\n')
            err = qr_buf_append(out, "\\n", 2);
        else
            err = qr_buf_append(out, p, 1);
    }
    return err;
}

/* Integral values without a fraction, others with enough digits to read back the same double. */
static enum qr_err put_value(struct qr_buf *out, double v)
{
    if (isinf(v))
        return qr_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
    if (isnan(v))
        return qr_buf_puts(out, "NaN");
    if (v == floor(v) && fabs(v) < 1e15)
        return qr_buf_appendf(out, "%.0f", v);
    return qr_buf_appendf(out, "%.17g", v);
}

static enum qr_err put_header(struct qr_buf *out, const char *name, const char *help,
                              const char *type)
{
    return qr_buf_appendf(out, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name,
                          type);
}

/* name{l1="v1",...[,le="x"]} value */
static enum qr_err put_sample(struct qr_buf *out, const char *name, const char *suffix,
                              const struct family *f, const struct series *s, const char *le,
                              double v)
{
    enum qr_err err = qr_buf_appendf(out, PREFIX "%s%s", name, suffix);
    size_t n = f ? f->n_labels : 0;
    if (!err && (n || le))
        err = qr_buf_puts(out, "{");
    for (size_t i = 0; i < n && !err; i++) {
        err = qr_buf_appendf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
        if (!err)
            err = qr_metrics_escape_label(s->labels[i], out);
        if (!err)
            err = qr_buf_puts(out, "\"");
    }
    if (!err && le)
        err = qr_buf_appendf(out, "%sle=\"%s\"", n ? "," : "", le);
    if (!err && (n || le))
        err = qr_buf_puts(out, "}");
    if (!err)
        err = qr_buf_puts(out, " ");
    if (!err)
        err = put_value(out, v);
    return err ? err : qr_buf_puts(out, "\n");
}

static enum qr_err put_family(struct qr_buf *out, enum qr_metric m)
{
    const struct family *f = &families[m];
    enum qr_err err = put_header(out, f->name, f->help, f->histogram ? "histogram" : "counter");
    for (size_t i = 0; i < reg[m].n && !err; i++) {
        const struct series *s = &reg[m].s[i];
        if (!f->histogram) {
            err = put_sample(out, f->name, "", f, s, NULL, s->value);
            continue;
        }
        uint64_t cum = 0;
        for (size_t b = 0; b <= f->n_bounds && !err; b++) {
            cum += s->counts[b];
            err = put_sample(out, f->name, "_bucket", f, s, b < f->n_bounds ? f->le[b] : "+Inf",
                             (double) cum);
        }
        if (!err)
            err = put_sample(out, f->name, "_sum", f, s, NULL, s->sum);
        if (!err)
            err = put_sample(out, f->name, "_count", f, s, NULL, (double) s->count);
    }
    return err;
}

static enum qr_err put_gauge(struct qr_buf *out, const char *name, const char *help,
                             const char *label, const char *value, double v)
{
    enum qr_err err = put_header(out, name, help, "gauge");
    if (!err && label) {
        err = qr_buf_appendf(out, PREFIX "%s{%s=\"", name, label);
        if (!err)
            err = qr_metrics_escape_label(value, out);
        if (!err)
            err = qr_buf_puts(out, "\"} ");
        if (!err)
            err = put_value(out, v);
        return err ? err : qr_buf_puts(out, "\n");
    }
    return err ? err : put_sample(out, name, "", NULL, NULL, NULL, v);
}

enum qr_err qr_metrics_format(const struct qr_metrics_gauges *g, struct qr_buf *out)
{
    enum qr_err err = put_gauge(out, "build_info", "The running build (always 1).", "version",
                                g->version ? g->version : "", 1);
    for (size_t m = 0; m < QR_M__COUNT && !err; m++)
        err = put_family(out, (enum qr_metric) m);
    if (!err)
        err = put_gauge(out, "loaded_models", "Models loaded in managed engines.", NULL, NULL,
                        (double) g->loaded_models);
    if (!err)
        err = put_gauge(out, "loaded_model_bytes",
                        "Estimated memory of the loaded models (weights + KV + compute).", NULL,
                        NULL, (double) g->loaded_model_bytes);
    if (!err)
        err = put_header(out, "queue_depth", "Inference requests admitted and not yet ended.",
                         "gauge");
    for (size_t i = 0; i < g->n_queue && i < QR_METRICS_QUEUE_MAX && !err; i++) {
        err = qr_buf_puts(out, PREFIX "queue_depth{backend=\"");
        if (!err)
            err = qr_metrics_escape_label(g->queue[i].backend, out);
        if (!err)
            err = qr_buf_appendf(out, "\"} %llu\n", (unsigned long long) g->queue[i].depth);
    }
    if (!err)
        err = put_gauge(out, "active_streams", "Streamed responses in progress.", NULL, NULL,
                        (double) streams);
    if (!err)
        err = put_header(out, "metrics_series_dropped_total",
                         "Observations not recorded: their family has too many label sets.",
                         "counter");
    if (!err)
        err =
            put_sample(out, "metrics_series_dropped_total", "", NULL, NULL, NULL, (double) dropped);
    return err;
}

/* ---- GET /metrics ---- */

static void read_gauges(struct qr_app *app, struct qr_metrics_gauges *g)
{
    *g = (struct qr_metrics_gauges){.version = QR_VERSION};
    for (size_t i = 0; i < app->n_backends && g->n_queue < QR_METRICS_QUEUE_MAX; i++) {
        const struct qr_backend *b = app->backends[i].b;
        if (!b)
            continue;
        g->queue[g->n_queue].backend = qr_backend_id(b);
        g->queue[g->n_queue++].depth = b->admitted;
    }
    if (!app->managed || !app->llama)
        return;
    const char *l[] = {qr_backend_id(app->managed)}; /* the series exist from the start */
    qr_metrics_add(QR_M_CRASHES, l, 0);
    qr_metrics_add(QR_M_RESTARTS, l, 0);
    size_t n = qr_llamacpp_loaded_list(app->managed, NULL, 0);
    struct qr_llamacpp_loaded *rows = n ? calloc(n, sizeof(*rows)) : NULL;
    if (!rows) {
        g->loaded_models = n;
        return;
    }
    n = qr_llamacpp_loaded_list(app->managed, rows, n);
    g->loaded_models = n;
    for (size_t i = 0; i < n; i++)
        g->loaded_model_bytes += rows[i].bytes;
    free(rows);
}

void qr_api_metrics(struct qr_app *app, struct qr_http_req *req)
{
    struct qr_metrics_gauges g;
    read_gauges(app, &g);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    if (qr_metrics_format(&g, &out)) {
        qr_buf_cleanup(&out);
        qr_api_send_err(req, QR_ERR_NOMEM, "cannot write the metrics");
        return;
    }
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Cache-Control", "no-store");
    qr_http_resp_header(req, "X-Content-Type-Options", "nosniff");
    qr_http_resp_send(req, 200, "text/plain; version=0.0.4; charset=utf-8", out.ptr ? out.ptr : "",
                      out.len);
    qr_buf_cleanup(&out);
}
