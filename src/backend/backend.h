/* Backend adapter vtable, contract quantum.runtime/backend/v1alpha1.
 *
 * An adapter is a table of function pointers grouped by lifecycle (open/close, describe, probe,
 * serve), with its version first and its instance size declared, in the sqlite/redis manner.
 * Callers never use the table directly: the static inline wrappers below state each contract.
 *
 * This revision carries what the Ollama adoption path needs: a descriptor, an asynchronous
 * readiness probe and an opaque HTTP pass-through (`proxy`) for adapters that speak a client
 * protocol natively. The canonical request/event submit path joins the table in a later
 * revision (the version field tells them apart). */
#ifndef QR_BACKEND_BACKEND_H
#define QR_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/err.h"

struct event_base;
struct qr_http_client;
struct qr_http_req;
struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_BACKEND_CONTRACT  "quantum.runtime/backend/v1alpha1"
#define QR_BACKEND_VTABLE_V1 1

enum qr_backend_state {
    QR_BACKEND_UNKNOWN = 0,
    QR_BACKEND_READY = 1,
    QR_BACKEND_UNAVAILABLE = 2,
    QR_BACKEND_DISABLED = 3,
};

const char *qr_backend_state_str(enum qr_backend_state s);

/* Shared services an adapter instance may use; all borrowed for the instance's lifetime. */
struct qr_backend_env {
    struct event_base *base;
    struct qr_http_client *http;
    const struct qr_config *config; /* live config: reloadable values may change between calls */
};

struct qr_backend {
    const struct qr_backend_vtable *vt;
    struct qr_backend_env env;
    enum qr_backend_state state; /* last probe outcome */
    int64_t state_since_ms;      /* wall clock of the last state change */
};

/* Probe result: err QR_OK when ready; diag says why not. */
typedef void (*qr_backend_probe_fn)(struct qr_backend *b, enum qr_err err,
                                    const struct qr_diag *diag, void *arg);

struct qr_backend_vtable {
    int version;          /* QR_BACKEND_VTABLE_V1 */
    const char *id;       /* "ollama" */
    const char *kind;     /* descriptor kind: "ollama-adapter", "llama.cpp", ... */
    size_t instance_size; /* >= sizeof(struct qr_backend); the adapter's struct embeds it first */

    /* --- lifecycle --- */
    enum qr_err (*open)(struct qr_backend *b, struct qr_diag *diag);
    void (*close)(struct qr_backend *b);

    /* --- description --- */
    /* Add the v1alpha1 descriptor object's fields to obj. */
    void (*describe)(struct qr_backend *b, struct yyjson_mut_doc *doc, struct yyjson_mut_val *obj);

    /* --- health --- */
    /* Start a readiness probe bounded by timeout_ms; cb runs once, later, on the event loop. */
    enum qr_err (*probe)(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                         void *arg);

    /* --- serving --- */
    /* Forward a client HTTP request as-is to the engine and stream the answer back (adapters whose
     * engine speaks the client's protocol). The adapter takes over the response of req. NULL when
     * the adapter cannot. */
    void (*proxy)(struct qr_backend *b, struct qr_http_req *req, const char *upstream_path);
};

/* Create an instance of vt (zeroed, instance_size bytes) and open it. */
enum qr_err qr_backend_new(const struct qr_backend_vtable *vt, const struct qr_backend_env *env,
                           struct qr_diag *diag, struct qr_backend **out);
void qr_backend_free(struct qr_backend *b);

/* Fill the full descriptor object (contract_version, id, kind, adapter_version, execution mode,
 * state, capabilities...) for b into obj. */
void qr_backend_describe(struct qr_backend *b, struct yyjson_mut_doc *doc,
                         struct yyjson_mut_val *obj);

/* Readiness probe; updates b->state before calling cb. */
enum qr_err qr_backend_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                             void *arg);

/* True when the adapter can pass client requests through unchanged. */
static inline bool qr_backend_can_proxy(const struct qr_backend *b)
{
    return b->vt->proxy != NULL;
}

/* Pass req through to the engine; the adapter answers req (success or error shape). */
static inline void qr_backend_proxy(struct qr_backend *b, struct qr_http_req *req,
                                    const char *upstream_path)
{
    b->vt->proxy(b, req, upstream_path);
}

extern const struct qr_backend_vtable qr_backend_ollama;

#endif
