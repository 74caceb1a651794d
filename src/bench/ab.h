/* Controlled A/B benchmark of an engine knob, schema quantum.runtime/context-ab/v1alpha1
 * (`quantum-runtime bench --model X --ab native,override`): the backend-native context policy
 * (the managed llama-server started with its own default context) against an explicit override
 * (-c N, and optionally other engine knobs), on the same prompt, repetitions interleaved A, B, A,
 * B. Each run starts a fresh engine (the calibration's way, host/calibrate.h), sends one warm-up
 * and one measured chat completion, reads TTFT, prefill and decode tokens/s from the answer's
 * `timings`, the process's VmRSS/VmHWM from /proc and sizes the KV cache from the GGUF file at the
 * context the engine reports in /props. Results carry the host fingerprint and engine version and
 * are stored in the evidence store's bench table (one row per metric). docs/BENCHMARK-AB.md.
 *
 * Plain blocking code (fork/exec, poll on loopback); never run on the daemon's event loop. */
#ifndef QR_BENCH_AB_H
#define QR_BENCH_AB_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/workload.h"
#include "core/err.h"
#include "host/calibrate.h"

struct qr_store;
struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_BENCH_AB_SCHEMA         "quantum.runtime/context-ab/v1alpha1"
#define QR_BENCH_AB_NAME           "context-ab" /* the bench table's name column */
#define QR_BENCH_BACKEND           "llamacpp"   /* the backend kind the runs measure */
#define QR_BENCH_MAX_REPS          50u
#define QR_BENCH_MAX_KNOBS         4u
#define QR_BENCH_DEFAULT_REPS      3u
#define QR_BENCH_DEFAULT_CTX       4096u
#define QR_BENCH_DEFAULT_PROMPT    128u
#define QR_BENCH_DEFAULT_GEN       64u
#define QR_BENCH_DEFAULT_BUDGET_MS 3600000u /* the whole run: room for Game Ember x 10 */
#define QR_BENCH_MAX_TOKENS        65536u   /* cap on prompt and answer token counts */

/* Spread of one metric over the ok samples (NAN samples ignored). All NAN when n is 0. */
struct qr_bench_stats {
    size_t n;
    double median, min, max, mean, stddev; /* stddev: sample (n - 1); 0 for n = 1 */
};

/* v[0..n) (borrowed, not modified) into out. */
void qr_bench_stats_compute(const double *v, size_t n, struct qr_bench_stats *out);

/* One engine knob of an arm: KEY=VALUE, KEY one of qr_bench_knob_flag's table. */
struct qr_bench_knob {
    char key[16];
    char value[48];
};

/* One arm. native: the engine's own context (no -c). override: -c ctx plus knobs. */
struct qr_bench_arm {
    char label[128]; /* "native" or "override:ctx=4096,ubatch=256" */
    bool override;
    struct qr_bench_knob knobs[QR_BENCH_MAX_KNOBS];
    size_t n_knobs;
};

/* The llama-server flag of a knob key ("ctx" -> "-c"), NULL for an unknown key. Keys: ctx,
 * batch, ubatch, threads, flash-attn, cache-type-k, cache-type-v. */
const char *qr_bench_knob_flag(const char *key);

/* Parse `native,override[:KEY=VALUE[,KEY=VALUE...]]` into out[0] (native) and out[1]
 * (override): the first comma separates the arms, later ones the knobs. ctx (> 0) is the override's
 * context unless a ctx knob is given. Values are [A-Za-z0-9._-]{1,47}; a numeric key (ctx, batch,
 * ubatch, threads) needs a positive integer. */
enum qr_err qr_bench_arms_parse(const char *spec, uint32_t ctx, struct qr_bench_arm out[2],
                                struct qr_diag *diag);

/* The arm's engine arguments after -m (borrowed from a, NULL-terminated, into out of cap). Both
 * arms get -np 1 so that the knob is the only difference. Returns the count. */
size_t qr_bench_arm_args(const struct qr_bench_arm *a, const char **out, size_t cap);

/* One run of one arm. */
struct qr_bench_sample {
    bool ok;
    double ttft_ms;     /* timings.prompt_ms + predicted_per_token_ms (engine-side) */
    double prefill_tps; /* timings.prompt_per_second */
    double decode_tps;  /* timings.predicted_per_second */
    double wall_ms;     /* the measured request, client-side */
    uint32_t prompt_tokens, gen_tokens;
    uint64_t rss_bytes, hwm_bytes; /* /proc/PID/status VmRSS, VmHWM after the request */
    uint64_t n_ctx;                /* the engine's context (/props n_ctx) */
    uint64_t kv_bytes;             /* GGUF sizing at n_ctx; 0 when unknown */
    int64_t load_ms;
    char error[200];
};

/* Progress: arm label, run done of total. */
typedef void (*qr_bench_progress_fn)(void *arg, const char *arm, unsigned done, unsigned total);

struct qr_bench_opts {
    const char *engine_path; /* NULL/"" = discover */
    const char *model_path;  /* GGUF file; borrowed */
    const char *model_key;   /* what the evidence is keyed by: canonical id or the file path */
    const char *arms_spec;   /* "native,override[:...]" */
    uint32_t ctx;            /* 0 = QR_BENCH_DEFAULT_CTX */
    uint32_t reps;           /* per arm; 0 = default */
    uint32_t prompt_tokens;  /* 0 = default; ignored when the workload gives the text */
    uint32_t gen_tokens;     /* 0 = default (or the workload's answer_tokens) */
    uint32_t threads;        /* -t/-tb for both arms (an arm's threads knob wins); 0 = engine's */
    const struct qr_bench_workload *workload; /* NULL = the default shape; borrowed */
    uint32_t budget_ms;                       /* whole run; 0 = default */
    const char *ollama_url;        /* non-NULL: measure this Ollama daemon instead of a managed
                                      llama-server; model_path is then the Ollama model name */
    volatile sig_atomic_t *cancel; /* may be NULL */
    qr_bench_progress_fn progress; /* may be NULL */
    void *progress_arg;
};

struct qr_bench_result {
    int64_t started_ms, finished_ms; /* epoch ms */
    char backend[16];                /* QR_BENCH_BACKEND or "ollama" */
    struct qr_calib_identity id;     /* host fingerprint and engine version */
    char model_key[4096];
    char model_path[4096];
    char workload[64]; /* the workload's name, "default" without one */
    bool think;        /* chat_template_kwargs.enable_thinking, sent only with a workload */
    bool think_set;    /* a workload said it (without one the template's default applies) */
    uint32_t prompt_tokens_target, gen_tokens;
    uint32_t threads; /* both arms' -t/-tb; 0 = the engine's default */
    struct qr_bench_arm arms[2];
    uint32_t reps;
    struct qr_bench_sample samples[2][QR_BENCH_MAX_REPS];
    const char *kv_source; /* static: how kv_bytes was obtained */
};

/* The whole A/B into out (caller storage; large, heap it). Fails for bad options, a model that
 * cannot be read, an engine that cannot be found, or cancellation; a run that fails is a sample
 * with ok false and its error. */
enum qr_err qr_bench_ab_run(const struct qr_bench_opts *o, struct qr_bench_result *out,
                            struct qr_diag *diag);

/* Metric names in a stable order and a sample's value of metric i (NAN when not measured). */
#define QR_BENCH_N_METRICS 6u
const char *qr_bench_metric_name(size_t i);
double qr_bench_metric_value(const struct qr_bench_sample *s, size_t i);

/* Stats of metric i over arm a's ok samples. */
void qr_bench_arm_stats(const struct qr_bench_result *r, size_t arm, size_t metric,
                        struct qr_bench_stats *out);

/* The result's members into obj (schema_version, identity, arms with samples and spread, the
 * decode delta). QR_ERR_NOMEM only. */
enum qr_err qr_bench_ab_json(const struct qr_bench_result *r, struct yyjson_mut_doc *doc,
                             struct yyjson_mut_val *obj);

/* Store the result: one bench row per metric (name QR_BENCH_AB_NAME, model = model_key,
 * variant_a/b = the arm labels, values_json = identity + both arms' samples and spread). *out_id
 * (may be NULL): the decode_tps row's id. */
enum qr_err qr_bench_ab_save(struct qr_store *s, const struct qr_bench_result *r, int64_t *out_id,
                             struct qr_diag *diag);

/* Against Ollama (ab_ollama.c): its /api/version into out, and one measured /api/generate of
 * arm (num_ctx for the override's ctx knob; batch and threads as num_batch and num_thread) into
 * s. think: 1 on, 0 off, -1 not sent. */
enum qr_err qr_bench_ollama_version(const char *url, char *out, size_t cap, struct qr_diag *diag);
enum qr_err qr_bench_ollama_measure(const char *url, const char *model,
                                    const struct qr_bench_arm *arm, const char *system,
                                    const char *prompt, uint32_t gen_tokens, int think,
                                    struct qr_bench_sample *s, struct qr_diag *diag);

#endif
