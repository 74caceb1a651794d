/* Replicas of one OpenAI-compatible backend (a `backends` entry with several `urls`): requests
 * balanced over them by backend/replicas.h (least outstanding, health-based ejection and
 * re-admission), a failed attempt retried on another replica only while nothing but the
 * stream's head (START/META) reached the consumer, never on another backend, so the canonical
 * model never changes. Ejected replicas are probed on the adapter's health path when their
 * backoff expires. One event loop owns it. */
#ifndef QR_BACKEND_OPENAI_REPLICATED_H
#define QR_BACKEND_OPENAI_REPLICATED_H

#include <stdbool.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "backend/codec.h"

struct qr_oa_replicas;

/* A set over urls (n >= 2), probing ejected ones at health_path (borrowed; it must live as long
 * as the set). NULL with diag on a bad list. */
struct qr_oa_replicas *qr_oa_replicas_new(struct qr_backend *b, const char *const *urls, size_t n,
                                          const char *health_path, struct qr_diag *diag);
void qr_oa_replicas_free(struct qr_oa_replicas *rs);

/* The health path may change when the dialect is decided (borrowed). */
void qr_oa_replicas_set_health_path(struct qr_oa_replicas *rs, const char *health_path);

/* The URL a readiness probe should ask: an admitted replica's, or NULL when every one is
 * ejected. */
const char *qr_oa_replicas_probe_url(struct qr_oa_replicas *rs);

/* Run req on a replica (the backend vtable's submit contract). api_key: the backend's key. */
enum qr_err qr_oa_replicas_submit(struct qr_oa_replicas *rs, const struct qr_dialect *d,
                                  const char *api_key, const struct qr_request *req, qr_event_fn fn,
                                  void *arg, struct qr_job **out, struct qr_api_error *err);

/* "replicas": one object per replica (url, state, outstanding, counters, last_error). */
void qr_oa_replicas_describe(const struct qr_oa_replicas *rs, yyjson_mut_doc *doc,
                             yyjson_mut_val *obj);

#endif
