/* HTTP/1.1 server on libevent bufferevents: one event loop, no thread per connection.
 *
 * Why not evhttp: libevent 2.1's evhttp answers its own limits (body too large, header too large,
 * malformed requests) with HTML pages outside our error shape, has no connection limit, and gives
 * the handler no chance to refuse a request (auth, 405, 413) before the body is read. This server
 * owns the parse (core/http_parse.h), the limits and the timeouts, and hands each request to one
 * handler as soon as its header section is complete.
 *
 * Lifecycle of a request:
 *   1. headers parsed -> handler(req) is called; the body has NOT been read yet.
 *   2. the handler may answer at once (errors), or call qr_http_req_read_body() and answer in the
 *      body callback, or answer later (e.g. after an upstream exchange).
 *   3. the response is either one qr_http_resp_send(), or qr_http_resp_start() + any number of
 *      qr_http_resp_write() + qr_http_resp_end() (chunked when no length was given).
 *   4. after the response ends (or the client goes away, see the close callback) the request is
 *      freed by the server; the handler must not touch it afterwards.
 * If the handler answers before reading a body, the server discards up to 64 KiB of unread
 * Content-Length body to keep the connection, or closes it after the response (larger or chunked
 * bodies, or an unanswered `Expect: 100-continue`).
 *
 * Every response automatically carries `X-Quantum-Request-ID: <id>`; ids are 12 random bytes as
 * 24 lowercase hex characters. The server writes one access-log record per request through
 * opts.access_fn (never bodies, never header values). */
#ifndef QR_CORE_HTTP_SERVER_H
#define QR_CORE_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"

struct event_base;
struct qr_http_server;
struct qr_http_req;

struct qr_http_header {
    struct qr_slice name;
    struct qr_slice value;
};

/* What the access log receives for one finished request (all pointers borrowed for the call). */
struct qr_http_access {
    const char *request_id;
    const char *method; /* "" when the request line never parsed */
    const char *path;   /* path without query; "" when unknown */
    const char *peer;   /* "ip:port" */
    int status;         /* status sent, 0 when no response was sent */
    uint64_t bytes_in;  /* body bytes read */
    uint64_t bytes_out; /* body bytes written */
    uint64_t duration_us;
    bool aborted; /* the client went away or the response was cut */
};

typedef void (*qr_http_handler_fn)(struct qr_http_req *req, void *arg);
typedef void (*qr_http_access_fn)(const struct qr_http_access *rec, void *arg);
/* Called when the whole body was read (err == QR_OK) or it could not be (QR_ERR_TOO_LARGE when
 * it passes the cap given to read_body; QR_ERR_PARSE for a malformed chunked body). After an error
 * the handler still owns the duty to answer (e.g. 413). May run inside qr_http_req_read_body when
 * the answer is known at once. A body that stalls past read_timeout_ms is not reported here: the
 * server answers 408 itself and the handler hears through the close callback. */
typedef void (*qr_http_body_fn)(struct qr_http_req *req, enum qr_err err, void *arg);
/* Output drained below half of out_high_water after a qr_http_resp_write returned false
 * (back-pressure relief); called once per such "full" report. See qr_http_resp_set_drain_cb. */
typedef void (*qr_http_drain_fn)(struct qr_http_req *req, void *arg);
/* The client connection closed (or errored/timed out; an EOF from the client counts, even a
 * half-close) before the response ended. The request is
 * freed right after this returns: the handler must drop every reference to it (cancel upstream). */
typedef void (*qr_http_close_fn)(struct qr_http_req *req, void *arg);

/* Numeric options left at 0 take defaults: 16 KiB of header, 100 headers, 1024 connections,
 * timeouts header 10 s / read 30 s / idle 60 s / write 30 s, 256 KiB out_high_water. The header
 * timer starts at accept for a new connection and at the first byte of the next head on a
 * keep-alive connection (before that byte the idle timer runs). */
struct qr_http_server_opts {
    const char *host;           /* bind address: IPv4/IPv6 literal or "localhost" (NULL: 127.0.0.1);
                                   borrowed for the call only */
    uint16_t port;              /* 0 = ephemeral; see qr_http_server_port() */
    size_t max_header_bytes;    /* request line + header section; over it -> 431 */
    unsigned max_headers;       /* header count cap; over it -> 431 */
    unsigned max_connections;   /* open connections; over it -> 503 server_busy, then close */
    uint32_t header_timeout_ms; /* from connection accept / end of previous response to end of
                                  header section -> 408 then close */
    uint32_t read_timeout_ms;   /* idle gap allowed while reading a body -> 408 then close */
    uint32_t idle_timeout_ms;   /* keep-alive idle connection closed after this */
    uint32_t write_timeout_ms;  /* client not reading the response for this long -> close */
    size_t out_high_water;      /* qr_http_resp_write reports "full" above this many bytes */
    qr_http_handler_fn handler;
    void *handler_arg;
    qr_http_access_fn access_fn; /* may be NULL */
    void *access_arg;
};

/* Create the server and bind+listen. diag gets e.g. "cannot bind '127.0.0.1:11450': address in
 * use". *out is owned by the caller (qr_http_server_free). */
enum qr_err qr_http_server_new(struct event_base *base, const struct qr_http_server_opts *opts,
                               struct qr_diag *diag, struct qr_http_server **out);

/* Port actually bound (useful with port 0). */
uint16_t qr_http_server_port(const struct qr_http_server *s);

/* Stop accepting (the listening socket is closed, so new connections are refused), close idle
 * keep-alive connections and those still sending a head; requests in flight continue, and their
 * connections close after the response ends. */
void qr_http_server_stop_accepting(struct qr_http_server *s);

/* Number of requests in flight (handler called, response not yet ended). */
unsigned qr_http_server_in_flight(const struct qr_http_server *s);

/* Number of open connections. */
unsigned qr_http_server_connections(const struct qr_http_server *s);

/* Close every connection now (in-flight requests get their close callback), and free. Not from
 * inside one of this server's callbacks. */
void qr_http_server_free(struct qr_http_server *s);

/* --- request accessors (all borrowed, valid until the request is freed) --- */
const char *qr_http_req_id(const struct qr_http_req *req);     /* 24 hex chars */
const char *qr_http_req_method(const struct qr_http_req *req); /* "GET", "POST", ... */
const char *qr_http_req_path(const struct qr_http_req *req);   /* decoded? no: raw path */
const char *qr_http_req_query(const struct qr_http_req *req);  /* after '?', or NULL */
const char *qr_http_req_target(const struct qr_http_req *req); /* raw request-target */
const char *qr_http_req_peer(const struct qr_http_req *req);   /* "ip:port" */
int qr_http_req_minor_version(const struct qr_http_req *req);  /* 0 or 1 */
/* First header with this name (case-insensitive), or NULL. Value is borrowed, NUL-terminated. */
const char *qr_http_req_header(const struct qr_http_req *req, const char *name);
size_t qr_http_req_header_count(const struct qr_http_req *req);
const struct qr_http_header *qr_http_req_header_at(const struct qr_http_req *req, size_t i);
/* Declared body length: -1 when chunked, 0 when none. */
int64_t qr_http_req_content_length(const struct qr_http_req *req);
/* Monotonic start time of the request (µs), for durations. */
uint64_t qr_http_req_start_us(const struct qr_http_req *req);

/* Read the whole body (up to max bytes) into memory, then call cb. Calls cb at once, with
 * QR_ERR_TOO_LARGE, when Content-Length is already above max. A body read already (and no
 * response started) is delivered again at once, so a route may look at it and pass the request
 * on to a handler that reads it itself. */
void qr_http_req_read_body(struct qr_http_req *req, size_t max, qr_http_body_fn cb, void *arg);
/* The body read by qr_http_req_read_body (borrowed). Empty before the body callback. */
struct qr_slice qr_http_req_body(const struct qr_http_req *req);

/* Callback when the client goes away before the response ends; see qr_http_close_fn. */
void qr_http_req_set_close_cb(struct qr_http_req *req, qr_http_close_fn cb, void *arg);

/* --- response --- */
/* Add a response header (copied). Only before the response starts. Ignored: names that are not
 * tokens, values with control bytes (no header injection), and the headers the server owns
 * (Content-Length, Transfer-Encoding, Connection, X-Quantum-Request-ID). */
void qr_http_resp_header(struct qr_http_req *req, const char *name, const char *value);
/* Send status line + headers. content_length < 0 means chunked transfer encoding (HTTP/1.1) or
 * close-delimited (HTTP/1.0). */
void qr_http_resp_start(struct qr_http_req *req, int status, int64_t content_length);
/* Queue body bytes. Returns false when the output buffer is above out_high_water: the producer
 * should pause and wait for the drain callback. Bytes are always queued either way (bytes past a
 * declared Content-Length are dropped; ending short of it closes the connection). HEAD and
 * 204/304 responses queue nothing. */
bool qr_http_resp_write(struct qr_http_req *req, const void *data, size_t len);
void qr_http_resp_set_drain_cb(struct qr_http_req *req, qr_http_drain_fn cb, void *arg);
/* End the response (writes the last chunk when chunked). The request is freed once written. */
void qr_http_resp_end(struct qr_http_req *req);
/* End abnormally after the response started: bytes already queued are still written, then the
 * connection is closed without a terminating chunk (or short of Content-Length), so the client
 * sees a truncated stream, never a clean end. */
void qr_http_resp_abort(struct qr_http_req *req);
/* Whole response in one call: start with Content-Length = len, write, end. */
void qr_http_resp_send(struct qr_http_req *req, int status, const char *content_type,
                       const void *body, size_t len);
/* True once qr_http_resp_start has been called. */
bool qr_http_resp_started(const struct qr_http_req *req);

/* The Runtime's error shape, sent as a whole JSON response:
 *   {"error":{"code":"<code>","message":"<message>","request_id":"<id>"}}\n
 * with Content-Type application/json; charset=utf-8, Cache-Control no-store and
 * X-Content-Type-Options nosniff. Headers added with qr_http_resp_header before are kept. Once
 * the response has started this can only cut it: it acts as qr_http_resp_abort. */
void qr_http_send_error(struct qr_http_req *req, int status, const char *code, const char *message);

/* Fill a 24-char lowercase hex id (+NUL) from the process's random pool. */
void qr_http_make_request_id(char out[25]);

#endif
