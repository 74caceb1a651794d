/* The status page's memory: the last routing decisions of canonical-contract inference requests
 * and per-second throughput samples, kept in fixed ring buffers (no allocation, single-threaded
 * like the daemon), answered as GET /v1/status; and the page itself (GET / for browsers, GET
 * /status), compiled into the binary from data/status/index.html (cmake/embed_status.cmake). */
#ifndef QR_API_STATUS_H
#define QR_API_STATUS_H

#include <stdbool.h>
#include <stdint.h>

struct qr_app;
struct qr_http_req;

#define QR_STATUS_DECISIONS 64  /* routing decisions kept */
#define QR_STATUS_SECONDS   300 /* throughput window: one sample per second */

/* One routing decision. refused: the request was answered with an error before reaching an
 * engine (status is that HTTP status), else status is 0 and backend names the chosen one. */
struct qr_status_decision {
    int64_t time_ms; /* wall clock, ms since the epoch */
    char route[64];
    char model[128];
    char backend[64]; /* "" when none was chosen */
    bool refused;
    int status;
    char reason[320];
};

/* Record a decision; strings are borrowed and copied (cut to the field sizes); NULL is "". Also
 * counts one request in the current second's throughput sample. */
void qr_status_note_decision(const char *route, const char *model, const char *backend,
                             bool refused, int status, const char *reason);
/* Count n generated tokens in the current second's sample. */
void qr_status_note_tokens(int64_t n);
/* Forget everything (tests). */
void qr_status_reset(void);

/* The i-th newest decision (0 = newest); false past the last. */
bool qr_status_decision_at(size_t i, struct qr_status_decision *out);

/* GET /v1/status (route table, auth like every route). */
void qr_api_status(struct qr_app *app, struct qr_http_req *req);
/* GET / and GET /status: the page when the request prefers text/html (always for /status), else
 * Ollama's probe answer "Ollama is running" (text/plain). */
void qr_api_status_page(struct qr_app *app, struct qr_http_req *req);
/* Does this Accept header value prefer text/html over text/plain and * / *? */
bool qr_status_accept_prefers_html(const char *accept);

#endif
