/* One supervised llama-server child process on the caller's event loop.
 *
 * A qr_llama_sup is the per-loop supervisor: it owns the one SIGCHLD handler (libevent evsignal)
 * and the list of processes, reaps each exited child with waitpid(pid, WNOHANG) and hands the
 * status to its qr_llama_proc. A qr_llama_proc runs one engine configuration (a plan): spawned on
 * a free 127.0.0.1 port with a fresh random API key, its stdout/stderr read on the loop into a
 * bounded ring, ready once GET /health answers 200, restarted with exponential backoff after a
 * crash, and marked failed after too many crashes within a window.
 *
 * States (every transition is reported through on_state, with a reason):
 *
 *   IDLE --start--> STARTING --/health 503--> LOADING --/health 200, key ok--> READY
 *                   STARTING --/health 200, key ok-----------------------> READY
 *   STARTING|LOADING|READY --stop--> STOPPING --reaped--> EXITED
 *   STARTING|LOADING|READY --child died / load timeout--> CRASHED --backoff--> STARTING
 *   STARTING|LOADING|READY --child died, too many crashes in the window--> FAILED
 *   CRASHED|FAILED --stop--> EXITED;  EXITED|FAILED|CRASHED --start--> STARTING
 *
 * "key ok": after /health answers 200, GET /v1/models with the API key must answer 200 too, which
 * proves the key works and that the answer came from this child, not from another process that
 * took the port first. A child that exits before it is ready because its port was taken meanwhile
 * ("couldn't bind") is respawned at once on a new port (bounded), without counting as a crash.
 *
 * Everything runs on the loop's thread. Callbacks run from the loop, except that
 * qr_llama_proc_start and qr_llama_proc_stop report their own transition (STARTING; STOPPING or
 * EXITED) before they return. A callback may call any function here on any proc, including
 * qr_llama_proc_free on its own proc (but not qr_llama_sup_free). */
#ifndef QR_BACKEND_LLAMACPP_PROC_H
#define QR_BACKEND_LLAMACPP_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"

struct event_base;
struct qr_http_client;
struct qr_llama_sup;
struct qr_llama_proc;

enum qr_llama_proc_state {
    QR_LLAMA_PROC_IDLE = 0,     /* never started */
    QR_LLAMA_PROC_STARTING = 1, /* spawned; /health does not answer yet */
    QR_LLAMA_PROC_LOADING = 2,  /* /health answers 503 (model loading) */
    QR_LLAMA_PROC_READY = 3,    /* /health answered 200 and the API key was accepted */
    QR_LLAMA_PROC_STOPPING = 4, /* SIGTERM sent to the process group */
    QR_LLAMA_PROC_EXITED = 5,   /* stopped on request (and reaped) */
    QR_LLAMA_PROC_CRASHED = 6,  /* died unasked or missed the load timeout; restart scheduled */
    QR_LLAMA_PROC_FAILED = 7,   /* gave up: too many crashes in the window (or restart off) */
};

const char *qr_llama_proc_state_str(enum qr_llama_proc_state s);

/* What the engine is started with. Every value comes from the Runtime's plan (policy, placement,
 * calibration), never from a client string. All pointers borrowed; copied by qr_llama_proc_new. */
struct qr_llama_plan {
    const char *model_path;   /* -m, required */
    const char *alias;        /* -a (the canonical id), NULL for none */
    uint32_t ctx;             /* -c total context shared by the slots; 0 = engine default */
    uint32_t parallel;        /* -np slots; 0 = engine default */
    uint32_t threads;         /* -t; 0 = engine default */
    uint32_t threads_batch;   /* -tb; 0 = engine default */
    bool embeddings;          /* --embeddings */
    bool rerank;              /* --rerank */
    const char *draft_model;  /* --spec-draft-model, NULL for none */
    const char *spec_type;    /* --spec-type; NULL = draft-simple with a draft model, else none */
    const char *mmproj;       /* --mmproj, only when the artifact declares a projector */
    const char *const *extra; /* further verified flags, argv words as-is (no shell) */
    size_t n_extra;           /* <= QR_LLAMA_PLAN_MAX_EXTRA */
};

#define QR_LLAMA_PLAN_MAX_EXTRA 64
#define QR_LLAMA_PLAN_MAX_ARG   4096 /* bytes per argument */

/* Restart policy; 0 in a field means its default. */
struct qr_llama_restart {
    uint32_t backoff_initial_ms; /* first restart delay (default 500) */
    uint32_t backoff_max_ms;     /* cap of the doubling delay (default 30000) */
    uint32_t max_crashes;        /* this many crashes within window_ms -> FAILED (default 5) */
    uint32_t window_ms;          /* default 60000 */
    bool disabled;               /* the first crash is final: FAILED at once */
};

/* on_state: state is the new state; reason is a one-line text (borrowed for the call): the exit
 * code or signal and the last log lines on CRASHED/FAILED. */
typedef void (*qr_llama_proc_state_fn)(struct qr_llama_proc *p, enum qr_llama_proc_state state,
                                       const char *reason, void *arg);

struct qr_llama_proc_opts {
    const char *name;        /* for logs and reasons, e.g. the canonical model id (copied) */
    const char *engine_path; /* the binary (qr_llama_engine.path; copied) */
    struct qr_llama_plan plan;
    struct qr_llama_restart restart;
    uint32_t load_timeout_ms;    /* spawn -> READY bound (default 120000) */
    uint32_t health_interval_ms; /* /health poll period while starting (default: 10 for the first
                                    second, then 50; min 10) */
    uint32_t stop_grace_ms;      /* SIGTERM -> SIGKILL (default 5000) */
    /* Liveness while READY: GET /health every liveness_interval_ms (default 5000, min 10), each
     * bounded by liveness_timeout_ms (default 5000); liveness_failures (default 3) failed probes
     * in a row (no answer, or not 200) SIGKILL the group: a crash "hung", restarted as usual. */
    uint32_t liveness_interval_ms;
    uint32_t liveness_timeout_ms;
    uint32_t liveness_failures;
    size_t log_ring_bytes; /* captured output kept (default 64 KiB, max 16 MiB) */
    qr_llama_proc_state_fn on_state;
    void *arg;
};

/* How the last child ended. */
struct qr_llama_proc_exit {
    bool valid;    /* a child has ended */
    bool signaled; /* killed by sig; else exited with code */
    int code;
    int sig;
};

struct qr_llama_proc_stats {
    unsigned spawns;        /* children started (including bind retries) */
    unsigned crashes;       /* crashes ever */
    unsigned restarts;      /* restarts after a crash */
    unsigned hangs;         /* children killed for failing liveness probes (counted in crashes) */
    int64_t ready_after_ms; /* last spawn -> READY, -1 when not reached */
    uint64_t log_bytes;     /* output bytes ever captured */
};

/* ---- supervisor (one per event loop) ---- */

/* base and http are borrowed and must outlive the supervisor. Installs the SIGCHLD handler (the
 * loop must be the one that handles signals in this process). *out owned by the caller. */
enum qr_err qr_llama_sup_new(struct event_base *base, struct qr_http_client *http,
                             struct qr_diag *diag, struct qr_llama_sup **out);
/* Frees every proc still on it (their children are killed and reaped; no callbacks), then the
 * handler. */
void qr_llama_sup_free(struct qr_llama_sup *s);

/* ---- one process ---- */

/* Validate and copy opts; nothing is spawned yet (state IDLE). *out owned by the caller, freed
 * with qr_llama_proc_free (or by qr_llama_sup_free). */
enum qr_err qr_llama_proc_new(struct qr_llama_sup *s, const struct qr_llama_proc_opts *opts,
                              struct qr_diag *diag, struct qr_llama_proc **out);

/* Spawn now (from IDLE, EXITED, CRASHED or FAILED; crash history is cleared). On error the state
 * is unchanged and diag names the engine and the cause. QR_ERR_BUSY when a child is running. */
enum qr_err qr_llama_proc_start(struct qr_llama_proc *p, struct qr_diag *diag);

/* Graceful stop: SIGTERM to the process group, SIGKILL after stop_grace_ms; EXITED once reaped.
 * From CRASHED or FAILED: cancels the pending restart, EXITED at once. */
void qr_llama_proc_stop(struct qr_llama_proc *p);

/* Kill (SIGKILL to the group) and reap any child synchronously, then free. No callback runs.
 * Safe inside this proc's own callback (the free then happens when the callback returns). */
void qr_llama_proc_free(struct qr_llama_proc *p);

/* ---- accessors (all borrowed, valid until the next state change) ---- */
enum qr_llama_proc_state qr_llama_proc_state(const struct qr_llama_proc *p);
const char *qr_llama_proc_name(const struct qr_llama_proc *p);
/* "http://127.0.0.1:PORT" of the current child; "" when none. */
const char *qr_llama_proc_base_url(const struct qr_llama_proc *p);
/* The current child's API key (hex); "" when none. A secret: never log it. */
const char *qr_llama_proc_api_key(const struct qr_llama_proc *p);
/* The current child's pid (also its process group id), -1 when none. */
pid_t qr_llama_proc_pid(const struct qr_llama_proc *p);
/* The plan's argv words (after the engine path, before --host/--port; *n set), as spawned. */
const char *const *qr_llama_proc_args(const struct qr_llama_proc *p, size_t *n);
/* The reason given with the last state change. */
const char *qr_llama_proc_reason(const struct qr_llama_proc *p);
void qr_llama_proc_last_exit(const struct qr_llama_proc *p, struct qr_llama_proc_exit *out);
void qr_llama_proc_stats(const struct qr_llama_proc *p, struct qr_llama_proc_stats *out);
/* The last max_lines lines (0: as many as fit) of captured output, at most cap-1 bytes with the
 * newest kept, NUL terminated, into out. Raw bytes as the engine wrote them (not sanitized: the
 * reasons given to on_state are). Returns the length written. */
size_t qr_llama_proc_tail(const struct qr_llama_proc *p, unsigned max_lines, char *out, size_t cap);

#endif
