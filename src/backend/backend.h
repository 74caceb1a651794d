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

#include "contract/event.h"
#include "core/config.h"
#include "core/err.h"

struct event_base;
struct qr_http_client;
struct qr_http_req;
struct yyjson_mut_doc;
struct yyjson_mut_val;
struct qr_request;
struct qr_api_error;
struct qr_job;
struct qr_fetch;

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
    const struct qr_backend_spec *spec; /* this instance's entry of config->backends; NULL: the
                                           one entry of the adapter's kind (qr_backend_new) */
};

struct qr_backend {
    const struct qr_backend_vtable *vt;
    struct qr_backend_env env;
    enum qr_backend_state state; /* last probe outcome */
    int64_t state_since_ms;      /* wall clock of the last state change */
    struct qr_fetch *fetches;    /* live qr_fetch calls (backend/job.h), cancelled on free */
    struct qr_job *jobs;         /* live HTTP jobs (backend/job.h); orphans freed on free */
    uint32_t admitted;           /* inference requests admitted and not yet ended (admission) */
};

/* One model as an engine lists it. */
struct qr_backend_model {
    const char *id;         /* the name clients use (Ollama "name", OpenAI "id") */
    int64_t created;        /* Unix seconds, 0 when unknown */
    const char *owned_by;   /* "" when unknown */
    int64_t size_bytes;     /* -1 when unknown */
    const char *digest;     /* "" when unknown */
    const char *family;     /* "" when unknown */
    int64_t context_length; /* -1 when unknown */
    const char *parent;     /* an adapter's base model (vLLM LoRA "parent"); NULL or "" if none */
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

    /* Run a canonical request on the engine. Events (contract/event.h order) go to fn, from the
     * event loop, never from inside submit. *out is borrowed by the caller until the DONE/ERROR
     * event has been delivered or qr_job_cancel was called. A request the engine cannot take is
     * refused at once with err filled (no events). req must outlive the job. */
    enum qr_err (*submit)(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                          void *arg, struct qr_job **out, struct qr_api_error *err);

    /* List the engine's models as qr_backend_model rows (asynchronous, like probe). */
    enum qr_err (*list_models)(struct qr_backend *b, uint32_t timeout_ms,
                               void (*cb)(struct qr_backend *b, enum qr_err err,
                                          const struct qr_backend_model *models, size_t n,
                                          const struct qr_diag *diag, void *arg),
                               void *arg);
};

/* The instance's id: its configured id ("vllm-a"), else the adapter's ("ollama"). */
const char *qr_backend_id(const struct qr_backend *b);
/* The instance's first (or only) base URL; "" when it has none (llama.cpp). */
const char *qr_backend_url(const struct qr_backend *b);

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

/* True when the adapter runs canonical requests. */
static inline bool qr_backend_can_submit(const struct qr_backend *b)
{
    return b->vt->submit != NULL;
}

/* Run req on the engine; see the vtable. */
static inline enum qr_err qr_backend_submit(struct qr_backend *b, const struct qr_request *req,
                                            qr_event_fn fn, void *arg, struct qr_job **out,
                                            struct qr_api_error *err)
{
    return b->vt->submit(b, req, fn, arg, out, err);
}

/* ---- admission (docs/RELIABILITY.md "Back-pressure and the request queue") ----
 * Every inference request is admitted to the backend it runs on before the engine is contacted,
 * and released exactly once when it ends for any reason (done, error, client gone, cancelled,
 * shutdown). Single-threaded: called from the event loop only. */

/* The most inference requests b admits at once: its entry's max_queue, else the live global
 * max_queue (reloadable). */
uint32_t qr_backend_max_queue(const struct qr_backend *b);
/* upstream_connect_timeout for the backend's model calls (a configuration built without
 * defaults, 0, gets the documented 10 s; the key's maximum, 24 h, fits 32 bits). */
uint32_t qr_backend_connect_timeout_ms(const struct qr_backend *b);

enum qr_admit {
    QR_ADMIT_OK = 0,       /* counted: pair with one qr_backend_release */
    QR_ADMIT_BACKEND_FULL, /* b has max_queue requests admitted */
    QR_ADMIT_RUNTIME_FULL, /* all backends together have max_requests admitted */
};

/* Admit one inference request to b, or say which bound is reached (nothing counted then). */
enum qr_admit qr_backend_admit(struct qr_backend *b);
/* The request admitted by qr_backend_admit ended. */
void qr_backend_release(struct qr_backend *b);
/* Inference requests admitted across all backends of this process. */
uint32_t qr_backend_admitted_total(void);
/* The refusal's text for a client: "server busy, please try again: ..." naming the bound. */
void qr_backend_admit_message(const struct qr_backend *b, enum qr_admit a, char *out, size_t cap);

/* Stop a job: no event is delivered afterwards; the job is freed. */
void qr_job_cancel(struct qr_job *job);
/* Back-pressure: stop/restart reading the engine's answer. */
void qr_job_pause(struct qr_job *job);
void qr_job_resume(struct qr_job *job);

extern const struct qr_backend_vtable qr_backend_ollama;
extern const struct qr_backend_vtable qr_backend_openai;

#endif
