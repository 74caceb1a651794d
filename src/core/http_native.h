/* Internal to core/http_client.c: the native HTTP/1.1 upstream client for plain http:// URLs.
 *
 * Same contract as qr_http_client (see http_client.h: callback order, cancel rules, on_done only
 * from the event loop); http_client.c validates the arguments and dispatches each call by URL
 * here or to libcurl. A struct qr_http_call of either implementation starts with an
 * enum qr_http_impl tag, which is how the pause/resume/cancel entry points tell them apart. */
#ifndef QR_CORE_HTTP_NATIVE_H
#define QR_CORE_HTTP_NATIVE_H

#include <stdbool.h>

#include "core/http_client.h"

/* First member of every struct qr_http_call (values chosen so a stray pointer is unlikely to
 * carry one). */
enum qr_http_impl {
    QR_HTTP_IMPL_CURL = 0x6375726c,  /* "curl" */
    QR_HTTP_IMPL_NATIVE = 0x6e617476 /* "natv" */
};

struct qr_http_native;

static inline enum qr_http_impl qr_http_call_impl(const struct qr_http_call *call)
{
    return *(const enum qr_http_impl *) (const void *) call;
}

/* True when url is a plain http:// URL the native client handles: no userinfo, a host name or
 * IP literal, an optional numeric port, a path without dot segments or bytes curl would
 * re-encode. Anything else stays with libcurl, which keeps its exact behaviour. */
bool qr_http_native_url_supported(const char *url);

/* One per qr_http_client (same event loop). *out owned by the caller. */
enum qr_err qr_http_native_new(struct event_base *base, struct qr_diag *diag,
                               struct qr_http_native **out);
/* Cancels every live call (no callbacks), closes pooled connections, frees. */
void qr_http_native_free(struct qr_http_native *n);
unsigned qr_http_native_in_flight(const struct qr_http_native *n);

/* opts already validated by http_client.c (method token, header bytes, body pointer, no HEAD
 * body) and the URL accepted by qr_http_native_url_supported. */
enum qr_err qr_http_native_call_start(struct qr_http_native *n,
                                      const struct qr_http_call_opts *opts, struct qr_diag *diag,
                                      struct qr_http_call **out);
void qr_http_native_call_pause(struct qr_http_call *call);
void qr_http_native_call_resume(struct qr_http_call *call);
void qr_http_native_call_cancel(struct qr_http_call *call);

#endif
