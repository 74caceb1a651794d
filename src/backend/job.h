/* A canonical request run over HTTP against an engine that speaks one of the upstream protocols
 * of backend/codec.h: encode, call, decode the answer chunk by chunk into canonical events. The
 * Ollama and OpenAI-compatible adapters both submit through this. */
#ifndef QR_BACKEND_JOB_H
#define QR_BACKEND_JOB_H

#include "backend/backend.h"
#include "backend/codec.h"

#include <yyjson.h>

/* Start req against base_url (no trailing slash needed) with dialect d (copied). api_key, when
 * non-empty, is sent as "Authorization: Bearer <key>" to the engine only. Events go to fn from
 * the event loop; the job frees itself after delivering DONE or ERROR. */
enum qr_err qr_job_start_http(struct qr_backend *b, const struct qr_dialect *d,
                              const char *base_url, const char *api_key,
                              const struct qr_request *req, qr_event_fn fn, void *arg,
                              struct qr_job **out, struct qr_api_error *err);

/* A job an adapter runs itself (e.g. queued until an engine process is ready, then one or more
 * HTTP jobs underneath). The handle is what submit hands out; qr_job_cancel/pause/resume on it
 * call ops with impl. cancel must free the handle with qr_job_free_custom (and deliver nothing
 * more); the adapter also frees it after delivering DONE or ERROR. */
struct qr_job_ops {
    void (*cancel)(void *impl);
    void (*pause)(void *impl, bool paused);
};
/* NULL on allocation failure. ops and impl borrowed for the handle's life. */
struct qr_job *qr_job_new_custom(const struct qr_job_ops *ops, void *impl);
void qr_job_free_custom(struct qr_job *j);

/* GET base_url + path with a bounded time; cb gets the status and the whole body (capped at
 * max_body), or an error. Used for probes and model lists. */
typedef void (*qr_fetch_fn)(enum qr_err err, int status, struct qr_slice body,
                            const struct qr_diag *diag, void *arg);
enum qr_err qr_fetch(struct qr_backend *b, const char *base_url, const char *path,
                     const char *api_key, uint32_t timeout_ms, size_t max_body, qr_fetch_fn cb,
                     void *arg);

/* The same as a POST with a JSON body (copied), e.g. Ollama's POST /api/show. */
enum qr_err qr_fetch_post(struct qr_backend *b, const char *base_url, const char *path,
                          const char *api_key, struct qr_slice body, uint32_t timeout_ms,
                          size_t max_body, qr_fetch_fn cb, void *arg);

/* Readiness probe: GET base_url + path; any 2xx within timeout_ms is ready. */
enum qr_err qr_fetch_probe(struct qr_backend *b, const char *base_url, const char *path,
                           const char *api_key, uint32_t timeout_ms, qr_backend_probe_fn cb,
                           void *arg);

/* One model row from one element of the engine's list; false skips the element. Strings may
 * point into the element (valid for the callback). */
typedef bool (*qr_model_row_fn)(yyjson_val *item, struct qr_backend_model *row);
typedef void (*qr_models_fn)(struct qr_backend *b, enum qr_err err,
                             const struct qr_backend_model *models, size_t n,
                             const struct qr_diag *diag, void *arg);

/* Model list: GET base_url + path, take the array under list_key and map each element. */
enum qr_err qr_fetch_models(struct qr_backend *b, const char *base_url, const char *path,
                            const char *api_key, uint32_t timeout_ms, const char *list_key,
                            qr_model_row_fn row, qr_models_fn cb, void *arg);

/* Cancel every live fetch of b, calling each callback with QR_ERR_CANCELLED (backend free). */
void qr_fetch_cancel_all(struct qr_backend *b);

/* Free b's HTTP jobs that no consumer holds any more: a job whose final event (or a consumer
 * failure) was delivered frees itself when its upstream transfer ends, and at shutdown that end
 * may not come. Called by qr_backend_free after the adapter closed; jobs still owned by a
 * consumer are left to it. */
void qr_job_free_orphans(struct qr_backend *b);

#endif
