/* Calibration, schema quantum.runtime/host-calibration/v1alpha1 (`quantum-runtime calibrate`,
 * POST /v1/host/calibrate): what this host really achieves, measured, and remembered.
 *
 * Two measurements, both bounded in time:
 *   - memory bandwidth: stream read and triad over a working set far larger than the last-level
 *     cache (at least 4x the total LLC of all cache instances and at least 256 MiB, unless memory
 *     is small), on the usable physical cores, best of N passes, in GB/s (1e9 bytes/s). The
 *     predecessor used ~8 MiB in total and so measured cache, not memory.
 *   - engine throughput: per thread count of a plan (1, the usable physical cores, the usable
 *     logical CPUs when SMT adds any, the deployment profiles' core budgets below that), the
 *     managed llama-server is started on a model, one fixed prompt goes through /completion
 *     (small n_predict, cache_prompt false, ignore_eos) and prefill/decode tokens/s come from the
 *     answer's `timings`; the process is stopped.
 * The result carries a host fingerprint (CPU model, usable cores, memory, engine version), the
 * engine version, one row per thread count, the best thread count (highest decode tokens/s, ties
 * within QR_CALIB_TIE_PCT go to fewer threads) and a bandwidth class. It is stored in the evidence
 * store (store/store.h, table calibration_run, one row per run) and the llama.cpp backend's
 * default thread count comes from the newest stored run for this fingerprint and engine version.
 * docs/CALIBRATION.md. Everything here is plain blocking code (fork/exec, poll on loopback
 * sockets): the daemon runs it in a child process, never on its event loop. */
#ifndef QR_HOST_CALIBRATE_H
#define QR_HOST_CALIBRATE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/err.h"
#include "host/profile.h"

struct qr_store;
struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_CALIB_MAX_PLAN          8u
#define QR_CALIB_DEFAULT_BUDGET_MS 120000u /* the whole run */
#define QR_CALIB_MIN_BUDGET_MS     2000u
#define QR_CALIB_MAX_BUDGET_MS     900000u
#define QR_CALIB_DEFAULT_N_PREDICT 32u
#define QR_CALIB_TIE_PCT           2.0 /* decode rates this close (percent) are a tie */
#define QR_CALIB_MIN_WORKING_SET   (256ull << 20)
#define QR_CALIB_MAX_WORKING_SET   (4ull << 30)
#define QR_CALIB_FINGERPRINT_LEN   16u /* hex characters */

/* Bandwidth class thresholds on the stream read rate, GB/s (docs/CALIBRATION.md). */
#define QR_CALIB_CLASS_MEDIUM_GBS 25.0
#define QR_CALIB_CLASS_HIGH_GBS   100.0

/* What identifies "this host with this engine" for stored results. */
struct qr_calib_identity {
    char fingerprint[QR_CALIB_FINGERPRINT_LEN + 1];
    char engine_path[4096];  /* "" when no engine was found */
    char engine_version[64]; /* "0.7.0"; "unknown" when it could not be probed */
    char cpu_model[128];
    uint32_t physical_cores; /* usable: physical cores behind the allowed CPUs (else host's) */
    uint32_t logical_cpus;   /* usable: effective logical CPUs (affinity, cpuset, quota) */
    uint64_t memory_total;   /* bytes */
    uint64_t memory_available;
};

struct qr_calib_bandwidth {
    uint64_t working_set_bytes; /* the three arrays together */
    uint64_t llc_bytes;         /* total last-level cache, all instances; 0 = unknown */
    uint32_t threads;
    uint32_t passes; /* passes of each kernel actually run */
    double read_gbs; /* best pass, 1e9 bytes/s; 0 = not measured */
    double triad_gbs;
    uint64_t checksum; /* of the read kernel, so that it cannot be optimized away */
    int64_t duration_ms;
};

struct qr_calib_row {
    uint32_t threads;
    bool ok;
    double prefill_tps; /* tokens/s, from timings.prompt_per_second */
    double decode_tps;  /* tokens/s, from timings.predicted_per_second */
    uint32_t prompt_tokens, predicted_tokens;
    uint32_t repetitions; /* prompts run; the best of each rate is kept */
    int64_t load_ms;      /* spawn -> healthy */
    int64_t duration_ms;  /* the whole row, start to stop */
    char error[256];      /* why the row failed; "" when ok */
};

struct qr_calib_result {
    int64_t started_ms, finished_ms; /* wall clock, epoch ms */
    struct qr_calib_identity id;
    char model[4096]; /* the GGUF run; "" for a host-only run */
    struct qr_calib_bandwidth bw;
    uint32_t plan[QR_CALIB_MAX_PLAN];
    size_t n_plan;
    struct qr_calib_row rows[QR_CALIB_MAX_PLAN];
    size_t n_rows;
    uint32_t best_threads; /* 0 when no row succeeded */
    uint32_t n_predict;
    uint32_t budget_ms;
    bool budget_exhausted; /* rows of the plan were skipped for time */
    char warnings[4][200];
    size_t n_warnings;
};

/* Progress: stage "memory" or "threads N", done of total steps. */
typedef void (*qr_calib_progress_fn)(void *arg, const char *stage, unsigned done, unsigned total);

struct qr_calib_opts {
    const char *engine_path; /* configured llama-server; NULL/"" = discover (backend engine.h) */
    const char *prefix;      /* directory holding .deps/ (NULL = qr_calib_find_prefix) */
    const char *model;       /* GGUF to run; NULL/"" = bandwidth only (a host-only run) */
    uint32_t budget_ms;      /* whole run; 0 = default, clamped to [MIN, MAX] */
    uint32_t n_predict;      /* 0 = default */
    uint64_t working_set;    /* bandwidth working set; 0 = from the caches (qr_calib_working_set) */
    const uint32_t *budgets; /* extra thread counts (deployment profiles' core budgets) */
    size_t n_budgets;
    const struct qr_host_roots *roots; /* NULL = the real ones */
    volatile sig_atomic_t *cancel;     /* may be NULL; when it turns non-zero the run stops */
    qr_calib_progress_fn progress;     /* may be NULL */
    void *progress_arg;
};

/* ---- pure parts ---- */

/* The thread counts to try, ascending and unique: 1, physical, logical when > physical (SMT), and
 * every budget in [1, logical]. physical/logical 0 count as 1. Returns how many (<= cap). */
size_t qr_calib_plan(uint32_t physical, uint32_t logical, const uint32_t *budgets, size_t n_budgets,
                     uint32_t *out, size_t cap);

/* The best thread count among the rows that are ok: the highest decode rate; a row within
 * QR_CALIB_TIE_PCT percent of the best with fewer threads wins. 0 when none is ok. */
uint32_t qr_calib_best(const struct qr_calib_row *rows, size_t n);

/* Stable hex fingerprint (first 16 hex of a SHA-256) of the CPU model, the usable physical cores
 * and logical CPUs, the memory total rounded down to GiB and the engine version. out: 17 bytes. */
void qr_calib_fingerprint(const char *cpu_model, uint32_t physical, uint32_t logical,
                          uint64_t memory_total, const char *engine_version, char *out);

/* "low" / "medium" / "high" from a read rate in GB/s; "unknown" for <= 0. Static string. */
const char *qr_calib_class(double read_gbs);

/* The bandwidth working set: max(4 x llc, 256 MiB), at most 4 GiB and at most a quarter of the
 * available memory (at least 16 MiB), so that a small machine is not pushed into swap. */
uint64_t qr_calib_working_set(uint64_t llc_bytes, uint64_t memory_available);

/* Total last-level cache bytes of the online CPUs: the highest cache level's size times its
 * distinct instances (shared_cpu_list), from <sys>/devices/system/cpu. 0 when unknown. */
uint64_t qr_calib_llc_bytes(const struct qr_host_roots *roots);

/* ---- measurements (blocking) ---- */

/* Host facts and the engine version into out. engine_version: the version when the caller knows
 * it (engine_path is then not searched), NULL to find the engine and probe `llama-server
 * --version` (bounded). An engine that cannot be found or probed leaves engine_path "" /
 * engine_version "unknown". */
void qr_calib_identity(const struct qr_host_roots *roots, const char *engine_path,
                       const char *prefix, const char *engine_version,
                       struct qr_calib_identity *out);

/* Set "calibrated" and "last_calibration" of a GET /v1/host document (doc's root object) from the
 * newest run stored in <state_dir>/evidence.db for id's fingerprint and engine version; left
 * false/null when there is none or the store cannot be read. */
void qr_calib_document_last(struct yyjson_mut_doc *doc, const char *state_dir,
                            const struct qr_calib_identity *id);

/* The directory above this executable that holds .deps/llama/bin/llama-server, into out (cap
 * bytes); "" when none. */
void qr_calib_find_prefix(char *out, size_t cap);

/* Stream read and triad over working_set bytes with threads threads, within budget_ms. */
enum qr_err qr_calib_bandwidth(uint64_t working_set, uint32_t threads, uint32_t budget_ms,
                               volatile sig_atomic_t *cancel, struct qr_calib_bandwidth *out,
                               struct qr_diag *diag);

/* One thread count: start the engine at engine_path on model with threads for -t/-tb, wait until
 * healthy, run the fixed prompt (twice when time allows; the best of each rate is kept), stop it.
 * deadline_ms is on the monotonic clock (qr_calib_now_ms). Always fills out (ok false and error
 * on failure); QR_ERR_CANCELLED when cancel turned non-zero, else QR_OK. */
enum qr_err qr_calib_engine_row(const char *engine_path, const char *model, uint32_t threads,
                                uint32_t n_predict, int64_t deadline_ms,
                                volatile sig_atomic_t *cancel, struct qr_calib_row *out);

/* Monotonic milliseconds. */
int64_t qr_calib_now_ms(void);

/* The whole calibration into out (caller storage; large, heap it). Fails only for bad options,
 * cancellation (QR_ERR_CANCELLED) or a bandwidth run that could not allocate; a thread count that
 * fails is a row with ok false and its error. */
enum qr_err qr_calib_run(const struct qr_calib_opts *o, struct qr_calib_result *out,
                         struct qr_diag *diag);

/* ---- the default model (calib_model.c) ---- */

/* Write the default calibration model to path (via a temporary file and rename): llama
 * architecture, F16 zero weights of about weight_bytes (1..64 layers of ~32 MiB), byte-level
 * vocabulary. Deterministic: the same weight_bytes always gives the same file. */
enum qr_err qr_calib_model_write(const char *path, uint64_t weight_bytes, struct qr_diag *diag);

/* The layer count qr_calib_model_write uses for weight_bytes. */
uint32_t qr_calib_model_layers(uint64_t weight_bytes);

/* ---- rendering and the evidence store ---- */

/* The Result object's members into obj. QR_ERR_NOMEM only. */
enum qr_err qr_calib_result_json(const struct qr_calib_result *r, struct yyjson_mut_doc *doc,
                                 struct yyjson_mut_val *obj);

/* The Result as one compact JSON text, owned by the caller (free). NULL when out of memory. */
char *qr_calib_result_write(const struct qr_calib_result *r);

/* Store one run as one calibration_run row: threads = the best thread count (the bandwidth
 * threads for a run without a successful row), prefill/decode of the best row (NAN without), the
 * bandwidth's read rate, the Result JSON. */
enum qr_err qr_calib_save(struct qr_store *s, const struct qr_calib_result *r, int64_t *out_id,
                          struct qr_diag *diag);

/* The newest stored run for this fingerprint and engine version. need_engine: only a run with a
 * measured decode rate. *out_json (may be NULL) receives its Result JSON (malloc'd, caller frees),
 * *out_threads its best thread count, *out_time_ms when it was measured. QR_ERR_NOT_FOUND when
 * there is none. */
enum qr_err qr_calib_latest(struct qr_store *s, const char *fingerprint, const char *engine_version,
                            bool need_engine, char **out_json, uint32_t *out_threads,
                            int64_t *out_time_ms, struct qr_diag *diag);

/* For the llama.cpp backend's default threads: the best thread count of the newest stored run
 * with a decode rate for this host and engine (identity probed here), with a one-line reason in
 * why (why_len bytes). 0 when store is NULL or nothing is stored (why untouched). */
uint32_t qr_calib_stored_threads(struct qr_store *s, const char *engine_path, const char *prefix,
                                 char *why, size_t why_len);

/* ---- an engine session for other measurements (bench/ab.c) ---- */

#define QR_CALIB_ENGINE_MAX_ARGS 24u

/* A running engine started the calibration's way on a free loopback port. */
struct qr_calib_engine {
    pid_t pid; /* -1 when not running */
    uint16_t port;
    char key[40];    /* its API key */
    int64_t load_ms; /* spawn -> healthy */
};

/* Start engine on model with `-m model EXTRA... --no-webui --host 127.0.0.1 --port P`
 * (extra_args NULL-terminated, at most QR_CALIB_ENGINE_MAX_ARGS, borrowed) and wait until
 * healthy. The child's output goes to log_fd. On failure out->pid may still be set: the caller
 * always calls qr_calib_engine_stop. */
enum qr_err qr_calib_engine_start(const char *engine, const char *model,
                                  const char *const *extra_args, int log_fd, int64_t deadline,
                                  volatile sig_atomic_t *cancel, struct qr_calib_engine *out,
                                  struct qr_diag *diag);

/* One request to the engine; *out_body (malloc'd, NUL-terminated, caller frees) and its status. */
enum qr_err qr_calib_engine_call(const struct qr_calib_engine *e, const char *method,
                                 const char *path, const char *body, int64_t deadline,
                                 volatile sig_atomic_t *cancel, int *out_status, char **out_body,
                                 size_t *out_len, struct qr_diag *diag);

/* Stop (SIGTERM, SIGKILL after 3 s) and reap; pid becomes -1. */
void qr_calib_engine_stop(struct qr_calib_engine *e);

#endif
