/* The daemon's HTTP surface: the application object that ties the event loop, the HTTP server,
 * the upstream client and the backend together, the request dispatcher (host check, auth, route
 * table) and the helpers every route uses to answer in the Runtime's shapes. */
#ifndef QR_API_API_H
#define QR_API_API_H

#include <stdbool.h>
#include <stdint.h>

#include "contract/request.h"
#include "core/config.h"
#include "core/err.h"

struct event;
struct event_base;
struct qr_backend;
struct qr_catalog;
struct qr_cap_descriptor;
struct qr_http_client;
struct qr_http_req;
struct qr_http_server;
struct qr_llamacpp_glue;
struct qr_route_backend;
struct qr_route_refuted;
struct qr_route_verified;
struct qr_router_env;
struct yyjson_mut_doc;

/* One configured backend (core/config.h struct qr_backend_spec) as the daemon runs it. */
struct qr_app_backend {
    struct qr_backend *b;           /* owned */
    struct qr_cap_descriptor *desc; /* owned: its validated v1alpha1 descriptor (state refreshed
                                       from b->state on use); NULL when the adapter's is invalid */
    bool probing;                   /* a background health probe is running */
};

struct qr_app {
    struct event_base *base; /* borrowed */
    struct qr_config *cfg;   /* borrowed; reload mutates reloadable fields in place */
    int argc;                /* serve's argv, kept for SIGHUP reload (borrowed) */
    char **argv;
    char **envp;
    struct qr_http_server *http;                     /* owned */
    struct qr_http_client *client;                   /* owned */
    struct qr_app_backend backends[QR_BACKENDS_MAX]; /* cfg->backends, in order */
    size_t n_backends;
    struct qr_backend *backend; /* backends[0].b: the default backend (passthrough routes, names
                                   no backend reported); NULL when none is configured */
    struct qr_backend *managed; /* the llamacpp entry's instance, or NULL */
    struct qr_catalog *catalog; /* owned; rebuilt on SIGHUP (api/catalog.h) */
    struct event *sig_term, *sig_int, *sig_hup, *shutdown_tick; /* owned */
    struct event *health_tick; /* owned: several backends: their health, probed in the background */
    unsigned health_ticks;
    void *infers;                   /* live canonical-contract requests (infer.c), for shutdown */
    struct qr_llamacpp_glue *llama; /* owned: backend=llama.cpp state (llamacpp_glue.h) */
    bool shutting_down;
    uint64_t shutdown_deadline_us;
    int exit_code;
};

/* Bind, create the client and backend, install signal handlers. Nothing is served until the loop
 * runs. On failure everything created is released. */
enum qr_err qr_app_init(struct qr_app *app, struct event_base *base, struct qr_config *cfg,
                        struct qr_diag *diag);
/* Start graceful shutdown: stop accepting; the loop exits when in-flight requests have ended or
 * the shutdown timeout passed. */
void qr_app_shutdown(struct qr_app *app);
/* Re-read the configuration sources and apply what is reloadable. */
void qr_app_reload(struct qr_app *app);
void qr_app_cleanup(struct qr_app *app);

/* The one request handler given to the HTTP server. */
void qr_api_dispatch(struct qr_http_req *req, void *arg);

/* Send doc as the whole JSON response (one value + "\n") with the Runtime's JSON headers. */
void qr_api_send_json(struct qr_http_req *req, int status, struct yyjson_mut_doc *doc);

/* Send an error in the Runtime's shape with an explicit status and code. */
void qr_api_send_error(struct qr_http_req *req, int status, const char *code, const char *message);

/* Send an error in the Runtime's shape, code and status from err, message from diag text. */
void qr_api_send_err(struct qr_http_req *req, enum qr_err err, const char *message);

/* Route handlers (native.c, ollama_routes.c). */
void qr_api_healthz(struct qr_app *app, struct qr_http_req *req);
void qr_api_readyz(struct qr_app *app, struct qr_http_req *req);
void qr_api_runtime(struct qr_app *app, struct qr_http_req *req);
void qr_api_capabilities(struct qr_app *app, struct qr_http_req *req);
/* Handles every /api/... path: allowlist, method, mutation policy, then the backend. */
void qr_api_ollama(struct qr_app *app, struct qr_http_req *req);

/* Canonical-contract inference (infer.c): decode with the proto codec, run on the backend,
 * answer in the same protocol. legacy_embeddings selects Ollama's /api/embeddings form. */
void qr_api_infer(struct qr_app *app, struct qr_http_req *req, enum qr_protocol proto,
                  enum qr_op op, bool legacy_embeddings);

/* Must this model name take the planned canonical path: a registry manifest whose plan matches
 * at least one model policy for this host, or whose plan (or, without a manifest, whose
 * reporting backend) is not the default backend? Such Ollama requests are planned even where
 * the default backend could pass them through byte for byte. */
bool qr_api_infer_planned(struct qr_app *app, const char *model);

/* Shutdown bound reached: end every canonical-contract request still running -- streams with
 * finish reason "cancelled" (an in-band end, never a silent close), others with 503. Returns how
 * many were ended. */
unsigned qr_api_infer_cancel_all(struct qr_app *app);

/* Runtime-native registry/router/policy routes (runtime_routes.c). */
void qr_api_backends(struct qr_app *app, struct qr_http_req *req);
void qr_api_route(struct qr_app *app, struct qr_http_req *req);
void qr_api_model_policies(struct qr_app *app, struct qr_http_req *req);
void qr_api_upstreams(struct qr_app *app, struct qr_http_req *req);
void qr_api_deployment_profiles(struct qr_app *app, struct qr_http_req *req);
void qr_api_admission(struct qr_app *app, struct qr_http_req *req);
/* GET /v1/loaded: the loaded llama.cpp processes, else an empty list (llamacpp_native.c). */
void qr_api_loaded(struct qr_app *app, struct qr_http_req *req);
/* GET /v1/host: the host profile and limits, discovered fresh (host/profile.h). */
void qr_api_host(struct qr_app *app, struct qr_http_req *req);
/* POST /v1/host/calibrate: one calibration in a child process; 409 while one runs. */
void qr_api_host_calibrate(struct qr_app *app, struct qr_http_req *req);
/* POST /v1/placement: the placement plan for a model on this host (placement_routes.c). */
void qr_api_placement(struct qr_app *app, struct qr_http_req *req);
/* POST /v1/benchmark-plan: the benchmark matrix (bench_routes.c). */
void qr_api_benchmark_plan(struct qr_app *app, struct qr_http_req *req);
/* POST /v1/tokenize and /v1/detokenize: the model's tokenizer through its llama.cpp engine;
 * 501 tokenizer_unavailable on every other backend (tokenize_routes.c). */
void qr_api_tokenize(struct qr_app *app, struct qr_http_req *req);
void qr_api_detokenize(struct qr_app *app, struct qr_http_req *req);

/* Build every backend's descriptor from its adapter's describe() (logged when invalid; that
 * backend's desc stays NULL and routing does not consider it). */
void qr_api_descriptor_init(struct qr_app *app);
/* The default backend's descriptor with its current state, or NULL (runtime_routes.c). */
const struct qr_cap_descriptor *qr_api_descriptor(struct qr_app *app);
/* b's descriptor with its current state, or NULL (b NULL, not one of app's, or invalid). */
const struct qr_cap_descriptor *qr_api_descriptor_for(struct qr_app *app,
                                                      const struct qr_backend *b);
/* The backend with this id, or NULL. */
struct qr_backend *qr_api_backend_find(struct qr_app *app, const char *id);
/* The backend a name without a plan goes to: the first backend (in configuration order) that
 * reported the name, else the default backend (the engine decides). */
struct qr_backend *qr_api_backend_for_name(struct qr_app *app, const char *name);

/* The router's inputs over every configured backend (rb: caller storage, QR_BACKENDS_MAX
 * entries, that env points into). */
void qr_api_route_env(struct qr_app *app, struct qr_route_backend *rb, struct qr_router_env *env);

/* The evidence store of state_dir opened for reading (a missing file is not created), or NULL.
 * Close with qr_store_close. */
struct qr_store;
struct qr_store *qr_api_store_open_existing(const struct qr_app *app);

/* A native route's body read: true when it was read; otherwise the error (413 above the 64 KiB a
 * native body may take, 400 when it could not be read) was sent. */
bool qr_api_body_ok(struct qr_http_req *req, enum qr_err err);

/* The context-override guard's decisions for the managed backend's models, from the A/B evidence
 * in the store (guard_glue.c): read again by qr_api_guard_refresh (start, SIGHUP), handed to the
 * router by qr_api_route_env. */
void qr_api_guard_refresh(struct qr_app *app);
const struct qr_route_verified *qr_api_guard_verified(size_t *n);
const struct qr_route_refuted *qr_api_guard_refuted(size_t *n);

/* Ask every backend for its models and join them to the registry (start-up, reload). */
void qr_api_refresh_backend_models(struct qr_app *app);

/* OpenAI routes (openai_routes.c). */
void qr_api_openai_chat(struct qr_app *app, struct qr_http_req *req);
void qr_api_openai_completions(struct qr_app *app, struct qr_http_req *req);
void qr_api_openai_embeddings(struct qr_app *app, struct qr_http_req *req);
/* POST /v1/rerank and /rerank (llama-server's, Jina's and Cohere's shape; rerank_codec.h). */
void qr_api_openai_rerank(struct qr_app *app, struct qr_http_req *req);
/* GET /v1/models and /v1/models/{id}. */
void qr_api_openai_models(struct qr_app *app, struct qr_http_req *req);

/* An error in the OpenAI shape {"error":{"message","type","param","code"}}. */
void qr_api_send_openai_error(struct qr_http_req *req, int status, const char *code,
                              const char *message);

/* The route tables as data, so a test can walk every route the daemon serves
 * (tests/integration/test_auth_routes.c): a route added later is walked without editing the
 * test. Strings are borrowed from static tables. */
struct qr_api_route_info {
    const char *path;   /* the exact path, or its prefix when prefix is set */
    const char *method; /* the one method served; a GET route of the dispatch table also answers
                           HEAD (Ollama routes do not) */
    bool open;          /* served without the bearer token (health probes) */
    bool openai;        /* errors, 401 included, in the OpenAI shape; else the native shape */
    bool prefix;        /* path is a prefix ("/v1/models/" + id) */
};
/* The dispatch table (dispatch.c): entry i into out; false past the end. */
size_t qr_api_route_count(void);
bool qr_api_route_at(size_t i, struct qr_api_route_info *out);
/* The Ollama /api allowlist (ollama_routes.c), native error shape, never open. */
size_t qr_api_ollama_route_count(void);
bool qr_api_ollama_route_at(size_t i, struct qr_api_route_info *out);

/* Pure checks, exposed for unit tests. */
/* Constant-time bearer check of an Authorization header value against token. */
bool qr_api_auth_ok(const char *authorization, const char *token);
/* Is this Host header acceptable for a loopback bind? (NULL host is judged by the caller.) */
bool qr_api_host_is_loopback_name(const char *host);

#endif
