/* qr-replay: a scripted upstream HTTP/1.1 server that stands in for Ollama, vLLM, MLX or OpenAI
 * in the integration tests and benchmarks.
 *
 * Three parts share this header: transcript.c loads the JSON transcripts into exchanges,
 * reqlog.c records every request the server received, server.c accepts connections, parses
 * requests and plays the matching exchange back on libevent timers. The transcript format is
 * documented in tests/replay/README.md. */
#ifndef QR_REPLAY_H
#define QR_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/err.h"

#define QR_REPLAY_HEAD_MAX    (64u * 1024u)          /* request line + headers */
#define QR_REPLAY_BODY_MAX    (256u * 1024u * 1024u) /* request body */
#define QR_REPLAY_HEADERS_MAX 256u                   /* header lines per request */

/* ---- transcripts ------------------------------------------------------------------------- */

enum qr_replay_framing {
    QR_REPLAY_CHUNKED = 0, /* Transfer-Encoding: chunked, one HTTP chunk per transcript chunk */
    QR_REPLAY_LENGTH = 1,  /* Content-Length: sum of the chunks */
    QR_REPLAY_CLOSE = 2,   /* no length, the body ends when the connection closes */
};

enum qr_replay_fault {
    QR_REPLAY_FAULT_NONE = 0,
    QR_REPLAY_FAULT_CLOSE_BEFORE_HEADERS, /* read the request, close without answering */
    QR_REPLAY_FAULT_CLOSE_MID_BODY,       /* after the chunks, close without ending the body */
    QR_REPLAY_FAULT_MALFORMED_CHUNK,      /* after the chunks, send "zz\r\n" and close */
    QR_REPLAY_FAULT_STALL_FOREVER,        /* read the request, never answer */
    QR_REPLAY_FAULT_STALL_AFTER_CHUNKS,   /* after the chunks, send nothing more */
};

struct qr_replay_header {
    char *name;  /* owned */
    char *value; /* owned */
};

struct qr_replay_chunk {
    char *data; /* owned, len bytes (NUL-terminated for convenience) */
    size_t len;
    unsigned delay_ms; /* wait before writing, measured from the previous write */
};

/* One scripted request/response pair. All strings are owned by the exchange. */
struct qr_replay_exchange {
    char *name;   /* "name" from the transcript, or "<file>#<index>" */
    char *source; /* file the exchange was loaded from */

    /* match: NULL fields match anything */
    char *method;
    char *path; /* compared with the request path without its query string */
    char *body_contains;
    size_t body_contains_len;
    long times;  /* requests this exchange may serve; -1 = unlimited */
    long served; /* requests it has served since start or the last reset */

    /* response */
    int status;
    char *reason; /* NULL: the standard phrase for status */
    struct qr_replay_header *headers;
    size_t n_headers;
    struct qr_replay_chunk *chunks;
    size_t n_chunks;
    enum qr_replay_framing framing;
    enum qr_replay_fault fault;
    unsigned stall_ms; /* before the status line */
    bool http10;       /* status line says HTTP/1.0 (framing is still as configured) */
};

/* The loaded exchanges, in load order. */
struct qr_replay_set {
    struct qr_replay_exchange *v; /* owned array */
    size_t n;
    size_t cap;
};

void qr_replay_set_init(struct qr_replay_set *set);
void qr_replay_set_cleanup(struct qr_replay_set *set);

/* Load a transcript file (one exchange object or an array of them) or every "*.json" file of a
 * directory in name order, appending to set. On error the set keeps what loaded before. */
enum qr_err qr_replay_set_load(struct qr_replay_set *set, const char *path, struct qr_diag *diag);

/* The exchange that answers a request, or NULL. Exchanges with body_contains are tried before
 * those without; within each group load order decides; exhausted exchanges are skipped.
 * Borrowed; the caller counts the use with ->served++. */
struct qr_replay_exchange *qr_replay_set_find(struct qr_replay_set *set, struct qr_slice method,
                                              struct qr_slice path, struct qr_slice body);

/* Forget every exchange's use count. */
void qr_replay_set_reset(struct qr_replay_set *set);

/* Standard reason phrase for an HTTP status ("Unknown" when none). Static. */
const char *qr_replay_reason(int status);

/* ---- request log ------------------------------------------------------------------------- */

/* A parsed request as the server received it. All slices borrow the connection's memory. */
struct qr_replay_request {
    struct qr_slice method;
    struct qr_slice path;  /* target up to '?' */
    struct qr_slice query; /* after '?', empty when none */
    struct qr_slice version;
    struct qr_slice (*headers)[2]; /* name, value; n_headers entries in received order */
    size_t n_headers;
    struct qr_slice body;
};

struct qr_replay_log {
    char **lines; /* owned; one JSON object per request, without newline */
    size_t n;
    size_t cap;
    uint64_t seq;  /* requests seen since start (not cleared by reset) */
    FILE *file;    /* owned; --log target or NULL */
    int64_t t0_ms; /* monotonic start */
};

/* Open the log; file_path may be NULL. */
enum qr_err qr_replay_log_open(struct qr_replay_log *log, const char *file_path,
                               struct qr_diag *diag);
void qr_replay_log_close(struct qr_replay_log *log);

/* Record one request and the name of the exchange that answers it (NULL: none). */
enum qr_err qr_replay_log_add(struct qr_replay_log *log, const struct qr_replay_request *req,
                              const char *matched);

/* Forget every recorded request (the --log file is not touched). */
void qr_replay_log_clear(struct qr_replay_log *log);

/* Render the log as one JSON array into out (appended). */
enum qr_err qr_replay_log_format(const struct qr_replay_log *log, struct qr_buf *out);

int64_t qr_replay_now_ms(void);

/* ---- server ------------------------------------------------------------------------------ */

struct qr_replay_server;

/* Bind listen_addr ("host:port"), ready to serve set and log (both borrowed, must outlive the
 * server). *out_port receives the bound port. */
enum qr_err qr_replay_server_new(struct qr_replay_set *set, struct qr_replay_log *log,
                                 const char *listen_addr, struct qr_replay_server **out,
                                 int *out_port, struct qr_diag *diag);

/* Serve until SIGTERM or SIGINT. */
enum qr_err qr_replay_server_run(struct qr_replay_server *srv);

/* Close every connection and free the server. NULL is a no-op. */
void qr_replay_server_free(struct qr_replay_server *srv);

#endif
