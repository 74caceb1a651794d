/* Upstream HTTP client: libcurl's multi-socket interface driven by the same libevent loop as the
 * server, so an upstream exchange costs memory, not a thread.
 *
 * One qr_http_client per event loop owns the CURLM handle and its connection pool. Each exchange
 * is a qr_http_call with callbacks for the response head, each body chunk as it arrives, and the
 * end. Body chunks are delivered as curl hands them over (never buffered whole); a consumer that
 * cannot keep up pauses the call and resumes it later (back-pressure).
 *
 * Callback order per call: on_response at most once (final, non-1xx status and its headers),
 * on_data zero or more times, then on_done exactly once -- unless the call is cancelled with
 * qr_http_call_cancel, after which no callback runs. After on_done returns the call is freed. */
#ifndef QR_CORE_HTTP_CLIENT_H
#define QR_CORE_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/http_server.h" /* struct qr_http_header */

struct event_base;
struct qr_http_client;
struct qr_http_call;

/* Return false from on_response/on_data to abort the call: on_done then gets QR_ERR_CANCELLED. */
typedef bool (*qr_http_call_response_fn)(struct qr_http_call *call, int status,
                                         const struct qr_http_header *headers, size_t n_headers,
                                         void *arg);
typedef bool (*qr_http_call_data_fn)(struct qr_http_call *call, const char *data, size_t len,
                                     void *arg);
/* err: QR_OK (complete), QR_ERR_UPSTREAM (connect/protocol/read error, detail in diag),
 * QR_ERR_UPSTREAM_CONNECT_TIMEOUT (connect_timeout_ms passed while connecting),
 * QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT (first_byte_timeout_ms passed between the request being sent
 * and the first response body byte), QR_ERR_UPSTREAM_IDLE_TIMEOUT (idle_timeout_ms passed between
 * two body chunks), QR_ERR_UPSTREAM_TIMEOUT (timeout_ms passed), QR_ERR_CANCELLED (a callback
 * returned false). */
typedef void (*qr_http_call_done_fn)(struct qr_http_call *call, enum qr_err err,
                                     const struct qr_diag *diag, void *arg);

struct qr_http_call_opts {
    const char *method;                   /* "GET", "POST", "DELETE", ... */
    const char *url;                      /* absolute http(s) URL */
    const struct qr_http_header *headers; /* sent exactly as given; copied at start */
    size_t n_headers;
    struct qr_slice body;        /* borrowed until on_done/cancel; may be empty */
    uint32_t connect_timeout_ms; /* 0 = libcurl default */
    uint64_t timeout_ms;         /* whole exchange incl. streamed body; 0 = none */
    /* From the request being sent to the first response body byte (the response head does not
     * count: engines send it before prompt processing); 0 = none. */
    uint64_t first_byte_timeout_ms;
    /* Longest gap between two response body chunks once the body has started; time the caller
     * keeps the call paused does not count; 0 = none. */
    uint64_t idle_timeout_ms;
    qr_http_call_response_fn on_response;
    qr_http_call_data_fn on_data;
    qr_http_call_done_fn on_done;
    void *arg;
};

/* One client per event loop. *out owned by the caller. */
enum qr_err qr_http_client_new(struct event_base *base, struct qr_diag *diag,
                               struct qr_http_client **out);
/* Cancels every live call (no callbacks) and frees. */
void qr_http_client_free(struct qr_http_client *c);

/* Start an exchange. *out is borrowed by the caller until on_done returns or cancel is called. */
enum qr_err qr_http_call_start(struct qr_http_client *c, const struct qr_http_call_opts *opts,
                               struct qr_diag *diag, struct qr_http_call **out);
/* Stop receiving body data until resumed (the upstream sees TCP back-pressure). */
void qr_http_call_pause(struct qr_http_call *call);
void qr_http_call_resume(struct qr_http_call *call);
/* Abort and free now. No callback runs afterwards. Safe to call from inside a callback of the same
 * call only if that callback then returns false. */
void qr_http_call_cancel(struct qr_http_call *call);

/* Send every later call through libcurl instead of the native HTTP/1.1 client (which serves
 * plain http:// by default). */
void qr_http_client_set_curl_only(struct qr_http_client *c, bool on);

/* Number of calls in flight (for shutdown and tests). */
unsigned qr_http_client_in_flight(const struct qr_http_client *c);

#endif
