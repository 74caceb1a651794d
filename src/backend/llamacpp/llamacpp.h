/* The native llama.cpp backend adapter (vtable qr_backend_llamacpp, id "llama.cpp"): the Runtime
 * runs llama-server itself, one supervised process (proc.h) per loaded model artifact and engine
 * configuration, loaded on the first request for it and unloaded when idle, when a keep_alive of
 * 0 asks for it, or when a memory budget needs room (least recently used idle process first).
 *
 * Requests go to the process as OpenAI-compatible requests through backend/job.h with the
 * llama.cpp dialect, always streamed (the engine cancels a streamed request when the connection
 * closes; a non-streamed one keeps decoding) and always with a token limit. docs/LLAMACPP.md
 * describes the rules.
 *
 * The adapter is configured after qr_backend_new through qr_llamacpp_configure (the daemon's
 * config and model registry provide the values and the resolver). Everything runs on the event
 * loop of the backend's env. */
#ifndef QR_BACKEND_LLAMACPP_LLAMACPP_H
#define QR_BACKEND_LLAMACPP_LLAMACPP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend/backend.h"
#include "backend/llamacpp/engine.h"
#include "backend/llamacpp/evidence.h"
#include "backend/llamacpp/proc.h"
#include "core/buf.h"
#include "core/err.h"
#include "placement/placement.h"

struct qr_cap_descriptor;

extern const struct qr_backend_vtable qr_backend_llamacpp;

enum qr_llamacpp_mode {
    QR_LLAMACPP_CHAT = 0,   /* chat and completions */
    QR_LLAMACPP_EMBED = 1,  /* --embeddings: embeddings requests only */
    QR_LLAMACPP_RERANK = 2, /* --rerank: serves QR_OP_RERANK only */
};

const char *qr_llamacpp_mode_str(enum qr_llamacpp_mode m);

/* One model the resolver knows. Strings are borrowed for the callback that hands it over; the
 * adapter copies what it keeps. */
struct qr_llamacpp_model {
    const char *id;         /* canonical id: the process alias and the name in every answer */
    const char *gguf_path;  /* the artifact */
    const char *draft_path; /* a draft model for speculative decoding, NULL for none */
    const char *spec_type;  /* --spec-type; NULL = draft-simple with a draft */
    const char *mmproj;     /* a multimodal projector, NULL for none */
    enum qr_llamacpp_mode mode;
    uint32_t native_ctx; /* the model's training context, 0 when unknown */
};

/* Resolve a client's model name. QR_OK with *out filled; QR_ERR_NOT_FOUND (or another error, with
 * diag) when there is no such model. */
typedef enum qr_err (*qr_llamacpp_resolve_fn)(void *arg, struct qr_slice name,
                                              struct qr_llamacpp_model *out, struct qr_diag *diag);
/* Enumerate every model: call emit once per model (synchronously). */
typedef void (*qr_llamacpp_list_fn)(void *arg,
                                    void (*emit)(void *ctx, const struct qr_llamacpp_model *m),
                                    void *ctx);

/* One engine crash (a process that died unasked, or missed its load timeout), for the daemon's
 * evidence store. Strings borrowed for the call. */
struct qr_llamacpp_crash {
    const char *model;          /* canonical id */
    const char *engine_version; /* the probed engine version, "" unknown */
    pid_t pid;                  /* the child that died, -1 when unknown */
    bool signaled;              /* killed by sig; else exited with code */
    int code, sig;
    bool failed;          /* the restarts gave up (FAILED) */
    const char *reason;   /* the process layer's one-line reason */
    const char *log_tail; /* the engine's last output lines (raw) */
};
typedef void (*qr_llamacpp_crash_fn)(void *arg, const struct qr_llamacpp_crash *c);

/* The engine's evidence about one process (GET /props answered with a usable body, after every
 * load and restart), for the daemon's evidence store. Borrowed for the call. */
struct qr_llamacpp_observed {
    const char *model;                     /* canonical id */
    const char *gguf_path;                 /* the artifact */
    const char *engine_version;            /* the probed engine version, "" unknown */
    const struct qr_llamacpp_props *props; /* valid */
};
typedef void (*qr_llamacpp_observed_fn)(void *arg, const struct qr_llamacpp_observed *o);

struct qr_llamacpp_options {
    const char *engine_path; /* configured engine; NULL/"" = discover (engine.h) */
    const char *prefix;      /* directory holding .deps/ for the private build; NULL = skip */
    int64_t idle_ttl_ms; /* default keep-alive after the last request; 0 = 5 min; < 0 = forever */
    uint64_t memory_budget;          /* bytes all resident processes may take; 0 = no limit */
    uint32_t ctx;                    /* total context per process (-c); 0 = 4096 */
    uint32_t parallel;               /* slots per process (-np); 0 = 1 */
    uint32_t threads;                /* -t and -tb; 0 = the engine's default */
    uint32_t load_timeout_ms;        /* spawn -> ready; 0 = 120000 */
    struct qr_llama_restart restart; /* crash restart policy (proc.h defaults for 0) */
    int64_t max_tokens;              /* token limit when the request has none; 0 = the slot's
                                        context (ctx / parallel) */
    uint32_t max_queue;              /* requests waiting for one process to load; 0 = 64 */
    uint32_t crash_grace_ms;         /* how long a broken upstream transfer waits for the crash
                                        report of its process, to name it; 0 = 300 */
    qr_llamacpp_resolve_fn resolve;  /* required */
    qr_llamacpp_list_fn list;        /* NULL: list_models reports the loaded models only */
    void *resolver_arg;
    qr_llamacpp_crash_fn on_crash; /* NULL: crashes are logged only */
    void *crash_arg;
    qr_llamacpp_observed_fn on_evidence; /* NULL: the /props evidence is kept per process only */
    void *evidence_arg;
    /* Placement (docs/PLACEMENT.md): every load is planned on the host discovered by configure
     * (its free memory read again per load) and refused with the plan's numbers when it does not
     * fit; a plan that fits gives the process its engine arguments (-ngl, --device, --numa, ...;
     * -t/-tb stay `threads`). host: a given host instead of the discovered one (tests; copied),
     * NULL = discover. verified: what the ledger verified for llama.cpp. */
    const struct qr_placement_host *host;
    struct qr_placement_verified verified;
    enum qr_placement_prefer prefer; /* placement_prefer */
    bool allow_acceleration;         /* placement_acceleration */
    bool allow_nvme_cold_tier;       /* placement_nvme_cold_tier */
};

/* Find and probe the engine and take the options (strings copied). Safe to call again: later
 * loads use the new values; running processes keep theirs. On error the adapter stays
 * unavailable with the reason (probe and describe say it) and submit refuses. */
enum qr_err qr_llamacpp_configure(struct qr_backend *b, const struct qr_llamacpp_options *o,
                                  struct qr_diag *diag);

/* The engine found by configure (NULL before, or when none was found). Borrowed. */
const struct qr_llama_engine *qr_llamacpp_engine(const struct qr_backend *b);

/* The adapter's descriptor as a struct (state from the engine probe). */
void qr_llamacpp_descriptor(const struct qr_backend *b, struct qr_cap_descriptor *out);

/* One loaded (or loading) model process. */
struct qr_llamacpp_loaded {
    char model[256];            /* canonical id */
    char gguf_path[1024];       /* artifact */
    enum qr_llamacpp_mode mode; /* chat / embed / rerank */
    enum qr_llama_proc_state state;
    pid_t pid;              /* -1 when no child runs */
    int port;               /* 0 when none */
    uint32_t ctx, parallel; /* total context and slots */
    uint32_t threads;       /* -t/-tb; 0 = the engine's default */
    uint64_t bytes;         /* memory estimate: weights + KV + compute (+ draft, mmproj) */
    uint64_t weight_bytes, kv_bytes, compute_bytes;
    unsigned in_flight;             /* requests running on the engine */
    unsigned queued;                /* requests waiting for it to be ready */
    int64_t loaded_at_ms;           /* wall clock ms of the load start */
    int64_t load_ms;                /* spawn -> ready of the last load, -1 while loading */
    int64_t loading_ms;             /* while starting/loading: ms since the load began; else -1 */
    int64_t last_used_ms;           /* wall clock ms of the last request's end (or start) */
    int64_t expires_at_ms;          /* wall clock ms of the idle unload; -1 never; 0 busy */
    unsigned crashes;               /* crashes of this process */
    char reason[512];               /* the last state change's reason */
    uint64_t requests;              /* requests forwarded to the engine */
    uint64_t refused;               /* queued requests refused once the evidence was known */
    uint64_t tool_calls_dropped;    /* extra calls withheld under parallel_tool_calls:false */
    struct qr_llamacpp_props props; /* the engine's evidence (GET /props) */
    /* the placement applied at start: the plan's decision ("cpu_only", ... or "unsized"), strategy,
     * reason, total bytes and RAM usable then, its threads and the flags the engine got from it;
     * planned false (note says why) when the file could not be sized */
    bool planned;
    char plan_decision[24], plan_strategy[24];
    char plan_reason[QR_PLACEMENT_LINE];
    char plan_note[256];
    uint64_t plan_total_bytes, plan_ram_usable_bytes;
    uint32_t plan_threads;
    char plan_args[QR_PLACEMENT_MAX_ARGS][QR_PLACEMENT_ARG];
    size_t plan_n_args;
};

/* Fill up to cap rows (out may be NULL with cap 0); returns the number of processes. */
size_t qr_llamacpp_loaded_list(struct qr_backend *b, struct qr_llamacpp_loaded *out, size_t cap);

/* The same as a JSON array appended to arr (strings copied into doc). */
enum qr_err qr_llamacpp_loaded_json(struct qr_backend *b, struct yyjson_mut_doc *doc,
                                    struct yyjson_mut_val *arr);

/* Unload the model named id (canonical id or a name the resolver maps to it) now. A process with
 * requests in flight or queued is unloaded as soon as it is idle: *out_deferred true.
 * QR_ERR_NOT_FOUND when it is not loaded. */
enum qr_err qr_llamacpp_unload(struct qr_backend *b, const char *id, bool *out_deferred,
                               struct qr_diag *diag);

/* Load the model req->model names without generating anything (Ollama's /api/generate with an
 * empty prompt, /api/chat with no messages): the same resolution, mode check, memory budget and
 * queue as a request, and req->keep_alive applies. fn gets START, then DONE (raw_finish "load")
 * once the process is ready and its evidence known (at once, from the loop, when it already is),
 * or START + ERROR as a queued request would (model_load_failed, ...). The handle cancels. */
enum qr_err qr_llamacpp_load(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                             void *arg, struct qr_job **out, struct qr_api_error *err);

/* The supervised process of a loaded model (tests, diagnostics); NULL when not loaded. */
struct qr_llama_proc *qr_llamacpp_find_proc(struct qr_backend *b, const char *id);

#endif
