/* One project-wide error enum and the caller-supplied diagnostic that carries detail text.
 *
 * The enum is append-only: values are never renumbered or reused, because they appear in logs,
 * tests and the evidence store. qr_err_str() names a value; qr_err_http() maps it to the HTTP
 * status and the default error code string of the Runtime's error shape. */
#ifndef QR_CORE_ERR_H
#define QR_CORE_ERR_H

#include <stdarg.h>
#include <stddef.h>

enum qr_err {
    QR_OK = 0,
    QR_ERR_NOMEM = 1,                        /* allocation failed */
    QR_ERR_INVALID = 2,                      /* bad input: request, argument, file contents */
    QR_ERR_CONFIG = 3,                       /* bad configuration value */
    QR_ERR_IO = 4,                           /* OS-level read/write/bind failure */
    QR_ERR_NOT_FOUND = 5,                    /* no such route, model or file */
    QR_ERR_TOO_LARGE = 6,                    /* a size cap was exceeded */
    QR_ERR_UNAUTHORIZED = 7,                 /* missing or wrong credentials */
    QR_ERR_FORBIDDEN = 8,                    /* authenticated but not allowed */
    QR_ERR_METHOD = 9,                       /* method not allowed on this route */
    QR_ERR_UPSTREAM = 10,                    /* backend unreachable or answered garbage */
    QR_ERR_UPSTREAM_TIMEOUT = 11,            /* backend did not answer in time */
    QR_ERR_UNAVAILABLE = 12,                 /* no backend ready, shutting down */
    QR_ERR_BUSY = 13,                        /* connection or admission limit reached */
    QR_ERR_CANCELLED = 14,                   /* the client or the Runtime cancelled the work */
    QR_ERR_TIMEOUT = 15,                     /* a client-side timeout (header/read) */
    QR_ERR_INTERNAL = 16,                    /* a bug: an invariant did not hold */
    QR_ERR_PARSE = 17,                       /* malformed wire data */
    QR_ERR_UPSTREAM_CONNECT_TIMEOUT = 18,    /* no connection to the backend in time */
    QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT = 19, /* request sent, no answer body byte in time */
    QR_ERR_UPSTREAM_IDLE_TIMEOUT = 20,       /* a streamed answer stalled between two chunks */
    QR_ERR__COUNT
};

/* Detail text for an error: lowercase, no trailing period, subject quoted. */
struct qr_diag {
    char msg[512];
};

/* Static name of an error value, e.g. "upstream_timeout". Never NULL. */
const char *qr_err_str(enum qr_err err);

/* HTTP status and default error code string (static) for an error value. */
int qr_err_http_status(enum qr_err err);

/* True for the four upstream timeouts (connect, first byte, idle, total). Each has its own name
 * (qr_err_str): "upstream_connect_timeout", "upstream_first_token_timeout",
 * "upstream_idle_timeout", "upstream_timeout"; all map to HTTP 504. */
static inline int qr_err_is_upstream_timeout(enum qr_err err)
{
    return err == QR_ERR_UPSTREAM_TIMEOUT || err == QR_ERR_UPSTREAM_CONNECT_TIMEOUT ||
           err == QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT || err == QR_ERR_UPSTREAM_IDLE_TIMEOUT;
}

/* Write formatted detail into diag (which may be NULL) and return err, so that a failing path can
 * `return qr_diag_set(d, QR_ERR_INVALID, "bad '%s'", k);`. */
enum qr_err qr_diag_set(struct qr_diag *diag, enum qr_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Defensive branches in the sqlite style: the condition is expected to be true (ALWAYS) or false
 * (NEVER); debug builds abort when it is not, release builds take the safe branch. */
#ifdef NDEBUG
#define ALWAYS(x) (x)
#define NEVER(x)  (x)
#else
void qr_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define ALWAYS(x) ((x) ? 1 : (qr_assert_fail(#x, __FILE__, __LINE__), 0))
#define NEVER(x)  ((x) ? (qr_assert_fail(#x, __FILE__, __LINE__), 1) : 0)
#endif

#define QR_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
