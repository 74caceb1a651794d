/* Prometheus metrics of the daemon (GET /metrics, text exposition format 0.0.4): counters and
 * histograms kept in plain structs keyed by small label tuples, one process-wide registry (the
 * daemon is single-threaded), written out on each scrape together with the gauges read at that
 * moment. Label cardinality is bounded by the callers (model names only when they resolved to a
 * known model, else "_unknown") and by a cap on series per family: observations past the cap are
 * counted in quantum_runtime_metrics_series_dropped_total instead. See docs/API.md "GET /metrics".
 */
#ifndef QR_API_METRICS_H
#define QR_API_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"

struct qr_app;
struct qr_http_req;

#define QR_METRICS_LABEL_MAX  128u /* bytes of one label value kept (longer ones are cut) */
#define QR_METRICS_SERIES_MAX 512u /* label tuples per family */
#define QR_METRICS_QUEUE_MAX  16u  /* backends in queue_depth */

/* The families updated by the request path and the engine supervisor. */
enum qr_metric {
    QR_M_REQUESTS = 0,      /* counter {route,model,backend,status} */
    QR_M_TTFT = 1,          /* histogram seconds {model,backend} */
    QR_M_DECODE_TPS = 2,    /* histogram tokens/s {model,backend} */
    QR_M_TOKENS = 3,        /* counter {direction,model,backend} */
    QR_M_RESTARTS = 4,      /* counter {backend} */
    QR_M_CRASHES = 5,       /* counter {backend} */
    QR_M_LEDGER_BLOCKS = 6, /* counter {backend,reason} */
    QR_M__COUNT
};

/* Add v (>= 0) to the counter with these label values (as many as the family has; borrowed for
 * the call; NULL is written as ""). */
void qr_metrics_add(enum qr_metric m, const char *const *labels, double v);
/* Observe v in the histogram with these label values. NaN is ignored. */
void qr_metrics_observe(enum qr_metric m, const char *const *labels, double v);

/* Streams whose response head was sent and that have not ended (active_streams). */
void qr_metrics_stream_begin(void);
void qr_metrics_stream_end(void);

/* One finished inference request, as the request path knows it at its end. */
struct qr_metrics_request {
    const char *route;   /* the route path ("/v1/chat/completions", "/api/chat") */
    const char *model;   /* a resolved model's canonical id, or "_unknown" */
    const char *backend; /* the backend id, or "_none" before routing */
    int status;          /* the HTTP status sent; 499 when the client went away first */
    double ttft_s;       /* request start -> first generated output; < 0 none */
    int64_t tokens_in;   /* usage prompt tokens; < 0 not reported */
    int64_t tokens_out;  /* usage completion tokens; < 0 not reported */
    double decode_s;     /* decode time (engine's eval duration, else first -> last token); <= 0
                            none */
};
void qr_metrics_request(const struct qr_metrics_request *r);

/* One engine crash; restarting says a restart was scheduled (false: the supervisor gave up). */
void qr_metrics_engine_crash(const char *backend, bool restarting);

/* Gauges read at scrape time. Strings borrowed. */
struct qr_metrics_gauges {
    const char *version;
    uint64_t loaded_models;
    uint64_t loaded_model_bytes;
    struct {
        const char *backend;
        uint64_t depth;
    } queue[QR_METRICS_QUEUE_MAX];
    size_t n_queue;
};

/* The whole exposition (every family, HELP and TYPE lines, histograms with cumulative buckets,
 * _sum and _count) appended to out. QR_ERR_NOMEM when out cannot grow. */
enum qr_err qr_metrics_format(const struct qr_metrics_gauges *g, struct qr_buf *out);

/* s as a label value per the exposition format (\\, \", \n escaped), appended to out. */
enum qr_err qr_metrics_escape_label(const char *s, struct qr_buf *out);

/* Forget every series and the stream gauge (tests; also frees the registry's memory). */
void qr_metrics_reset(void);

/* GET /metrics. */
void qr_api_metrics(struct qr_app *app, struct qr_http_req *req);

#endif
