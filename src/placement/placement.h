/* Placement plan, schema quantum.runtime/placement-plan/v1alpha1: where a model's tensor classes,
 * KV cache and compute buffers go (RAM, accelerator memory, an explicit NVMe cold tier), how many
 * threads run it and how they bind to NUMA nodes, and the llama-server arguments that say so - or
 * a refusal with the numbers when it does not fit. docs/PLACEMENT.md states the rules.
 *
 * qr_placement_plan is a pure, deterministic function of three plain structs (a host, a sized
 * model, a request) so tests can build tables of synthetic hosts; the helpers below it fill those
 * structs from the discovered host (host/profile.h), a GGUF file (gguf/sizing.h) and the ledger.
 *
 * Rules in one breath: CPU/RAM first; hybrid RAM/VRAM only when CPU-only does not fit or hybrid
 * (or gpu) is preferred, and acceleration is allowed; MoE routed experts stay in RAM while dense
 * and attention tensors go to the accelerator (--n-cpu-moe) when moe.expert_offload is verified;
 * the KV cache goes to VRAM and is quantized only where the ledger verified that
 * (cache.kv_offload; a KV type other than f16); NVMe only as an explicit cold tier (routed experts
 * paged from the mmap'd file, per-layer embeddings read lazily), never for hot state and never as
 * a silent spill; --numa distribute where the host has more than one NUMA node. */
#ifndef QR_PLACEMENT_PLACEMENT_H
#define QR_PLACEMENT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gguf/sizing.h"

#define QR_PLACEMENT_SCHEMA "quantum.runtime/placement-plan/v1alpha1"

#define QR_PLACEMENT_MAX_NUMA  64u
#define QR_PLACEMENT_MAX_ACCEL 16u
#define QR_PLACEMENT_MAX_LINES 16u  /* reasons, warnings */
#define QR_PLACEMENT_LINE      200u /* one reason or warning, NUL included */
#define QR_PLACEMENT_MAX_ARGS  24u
#define QR_PLACEMENT_ARG       32u /* one engine argument, NUL included */
#define QR_PLACEMENT_MAX_CAPS  6u

/* Allowances, not measurements (docs/PLACEMENT.md "Numbers"). */
#define QR_PLACEMENT_GIB             (1024ull * 1024ull * 1024ull)
#define QR_PLACEMENT_ENGINE_OVERHEAD (256ull * 1024ull * 1024ull) /* llama-server itself, RAM */
#define QR_PLACEMENT_COMPUTE_UNKNOWN QR_PLACEMENT_GIB             /* compute buffer when unsized */
#define QR_PLACEMENT_VRAM_MARGIN     QR_PLACEMENT_GIB /* per device: llama.cpp's --fit-target */
#define QR_PLACEMENT_RAM_RESERVE_MIN QR_PLACEMENT_GIB /* default reserve: max(1 GiB, total/32) */

/* ---- inputs ---- */

struct qr_placement_numa {
    int id;
    uint32_t cpus;         /* logical CPUs of the node */
    uint64_t memory_bytes; /* 0 unknown */
};

struct qr_placement_accel {
    char name[48];       /* "AMD card0" */
    uint64_t vram_bytes; /* 0: unknown, never planned on */
};

/* What the process may use of the machine. */
struct qr_placement_host {
    uint32_t physical_cores; /* physical cores behind the allowed CPUs, >= 1 */
    uint32_t logical_cpus;   /* effective logical CPUs (affinity, cpuset, quota), >= 1 */
    uint64_t ram_total;      /* MemTotal */
    uint64_t ram_available;  /* MemAvailable (already excludes what is in use); 0 unknown */
    uint64_t ram_limit;      /* cgroup memory.max; 0 none */
    struct qr_placement_numa numa[QR_PLACEMENT_MAX_NUMA];
    size_t n_numa;
    struct qr_placement_accel accel[QR_PLACEMENT_MAX_ACCEL];
    size_t n_accel;
    bool model_on_nvme;    /* the model file lies on an NVMe device */
    char model_device[64]; /* its block device ("nvme0n1"), "" unknown */
};

/* The model, sized for the request's context and slots (qr_placement_model_from_file). */
struct qr_placement_model {
    uint64_t cls[QR_SIZING_CLASS_COUNT]; /* weight bytes by tensor class */
    uint64_t n_layers;                   /* block_count; 0 unknown (then no layer split) */
    uint64_t leading_dense;              /* leading blocks without routed experts */
    uint64_t expert_count, expert_used;  /* 0 for a dense model */
    bool no_cache;                       /* non-causal: no KV cache */
    bool kv_known;                       /* KV bytes sized (or no_cache) */
    const char *kv_unknown;              /* static reason when !kv_known */
    uint64_t kv_bytes_f16;               /* llama-server's KV caches at f16 for n_ctx, n_seq */
    bool compute_known;
    uint64_t compute_bytes;   /* llama-server's compute buffer estimate */
    uint64_t n_ctx, n_seq;    /* what it was sized for */
    uint64_t kv_head_dims[4]; /* per-head K and V widths (full and sliding layers), 0 unknown:
                                 a quantized KV type needs each to be a multiple of its block */
};

/* KV cache element types llama-server accepts for -ctk/-ctv (its --help). */
enum qr_placement_kv_type {
    QR_PLACEMENT_KV_F16 = 0,
    QR_PLACEMENT_KV_F32,
    QR_PLACEMENT_KV_BF16,
    QR_PLACEMENT_KV_Q8_0,
    QR_PLACEMENT_KV_Q4_0,
    QR_PLACEMENT_KV_Q4_1,
    QR_PLACEMENT_KV_IQ4_NL,
    QR_PLACEMENT_KV_Q5_0,
    QR_PLACEMENT_KV_Q5_1,
    QR_PLACEMENT_KV_TYPE_COUNT
};

/* Static name ("q8_0"); NULL for other values. */
const char *qr_placement_kv_type_name(unsigned t);
/* Bytes per element x 100, rounded up (f16 200, q8_0 107); 0 for other values. */
uint32_t qr_placement_kv_type_x100(unsigned t);
/* Elements per block (1 for f32/f16/bf16, 32 for the quantized types); 0 for other values. */
uint32_t qr_placement_kv_type_block(unsigned t);
/* Parse a name; false when unknown. */
bool qr_placement_kv_type_parse(const char *s, enum qr_placement_kv_type *out);

enum qr_placement_prefer {
    QR_PLACEMENT_PREFER_AUTO = 0,
    QR_PLACEMENT_PREFER_CPU,
    QR_PLACEMENT_PREFER_HYBRID,
    QR_PLACEMENT_PREFER_GPU,
};

const char *qr_placement_prefer_name(unsigned p);
bool qr_placement_prefer_parse(const char *s, enum qr_placement_prefer *out);

/* What the ledger verified for the engine (plain flags; qr_placement_verified_from_ledger). */
struct qr_placement_verified {
    bool hybrid;         /* placement.hybrid / placement.gpu */
    bool expert_offload; /* moe.expert_offload: --n-cpu-moe */
    bool kv_offload;     /* cache.kv_offload: KV of offloaded layers in VRAM */
    bool kv_quant;       /* a KV type other than f16 (no contract key yet: never from the ledger) */
};

struct qr_placement_request {
    enum qr_placement_prefer prefer;
    bool allow_acceleration;
    bool allow_nvme_cold_tier;
    enum qr_placement_kv_type kv_type; /* wanted; applied only when verified.kv_quant */
    uint64_t reserve_ram_bytes;        /* 0: max(1 GiB, total / 32) */
    uint32_t threads;                  /* 0: from the host (a calibrated count goes here) */
    struct qr_placement_verified verified;
};

/* ---- the plan ---- */

enum qr_placement_decision {
    QR_PLACEMENT_CPU_ONLY = 0,
    QR_PLACEMENT_HYBRID = 1,            /* some weights in VRAM, the rest in RAM */
    QR_PLACEMENT_GPU = 2,               /* every layer and the output in VRAM */
    QR_PLACEMENT_CAPACITY_EXCEEDED = 3, /* refused: does not fit with what is allowed */
    QR_PLACEMENT_UNSIZED = 4,           /* refused: the KV cache could not be sized */
};

enum qr_placement_strategy {
    QR_PLACEMENT_NONE = 0,           /* refused */
    QR_PLACEMENT_CPU = 1,            /* everything in RAM */
    QR_PLACEMENT_CPU_NVME_COLD = 2,  /* RAM, cold classes paged from NVMe */
    QR_PLACEMENT_EXPERTS_IN_RAM = 3, /* every layer offloaded, routed experts of the first
                                        n_cpu_moe layers kept in RAM */
    QR_PLACEMENT_LAYER_SPLIT = 4,    /* the last gpu_layers layers offloaded */
    QR_PLACEMENT_FULL_OFFLOAD = 5,   /* every layer and the output offloaded */
};

const char *qr_placement_decision_name(unsigned d);
const char *qr_placement_strategy_name(unsigned s);

/* Where one class's bytes went. */
struct qr_placement_part {
    uint64_t ram, vram, nvme;
};

struct qr_placement_tier {
    uint64_t total;     /* RAM: MemTotal; VRAM: sum over the planned devices */
    uint64_t available; /* RAM: MemAvailable (or the cgroup limit when lower) */
    uint64_t reserve;   /* kept free: RAM reserve, VRAM margin per device */
    uint64_t usable;    /* available - reserve, floored at 0 */
    uint64_t assigned;  /* what the plan puts there (the best attempt when refused) */
};

struct qr_placement_plan {
    enum qr_placement_decision decision;
    enum qr_placement_strategy strategy;
    bool fits;
    char reason[QR_PLACEMENT_LINE]; /* one line: the decision, with numbers */

    enum qr_placement_kv_type kv_type, kv_type_requested;
    uint64_t weights, kv, compute, overhead, total; /* bytes, all tiers */

    struct qr_placement_part cls[QR_SIZING_CLASS_COUNT];
    struct qr_placement_part kv_part, compute_part, overhead_part;
    struct qr_placement_tier ram, vram;
    size_t vram_devices;  /* accelerators planned on (known VRAM) */
    uint64_t nvme_cold;   /* bytes left on the NVMe cold tier */
    uint64_t nvme_ram_ws; /* RAM kept for the cold tier's working set */
    bool nvme_allowed, model_on_nvme;
    char model_device[64];

    uint64_t gpu_layers; /* -ngl (0 for CPU); n_layers + 1 puts the output there too */
    uint64_t n_cpu_moe;  /* --n-cpu-moe; 0 none */
    bool kv_offload;     /* KV of offloaded layers in VRAM */
    uint32_t threads;
    const char *numa; /* "distribute" or NULL */
    size_t numa_nodes;

    char reasons[QR_PLACEMENT_MAX_LINES][QR_PLACEMENT_LINE];
    size_t n_reasons;
    char warnings[QR_PLACEMENT_MAX_LINES][QR_PLACEMENT_LINE];
    size_t n_warnings;
    const char *caps[QR_PLACEMENT_MAX_CAPS]; /* static contract keys ("moe.expert_offload") */
    size_t n_caps;
    char args[QR_PLACEMENT_MAX_ARGS][QR_PLACEMENT_ARG]; /* llama-server arguments; none refused */
    size_t n_args;
};

/* Plan model m on host h for request r (all borrowed). *out (caller storage) is fully
 * overwritten. Deterministic. QR_OK also for a refusal (out->fits false, out->decision says
 * why, out->reason has the numbers); QR_ERR_INVALID only for a malformed input (a byte sum that
 * overflows, an out-of-range enum), with diag. */
enum qr_err qr_placement_plan(const struct qr_placement_host *h, const struct qr_placement_model *m,
                              const struct qr_placement_request *r, struct qr_placement_plan *out,
                              struct qr_diag *diag);

/* Leave "-t N" out: the llama.cpp backend sets -t/-tb itself (struct qr_llama_plan.threads,
 * from plan->threads) and refuses them as extra flags. */
#define QR_PLACEMENT_ARGS_NO_THREADS 1u

/* The engine arguments of a plan, as borrowed pointers into plan->args (valid while plan is): at
 * most max written to argv; returns how many there are (0 for a refusal). flags: 0 or
 * QR_PLACEMENT_ARGS_NO_THREADS. */
size_t qr_placement_engine_args(const struct qr_placement_plan *plan, unsigned flags,
                                const char **argv, size_t max);

struct yyjson_mut_doc;
struct yyjson_mut_val;

/* The plan object (schema_version, decision, strategy, fits, reason, memory, ram, vram, nvme,
 * classes, threads, engine, reasons, warnings, requires_backend_capabilities) added as members
 * into obj. QR_ERR_NOMEM only. */
enum qr_err qr_placement_plan_json(const struct qr_placement_plan *plan,
                                   const struct qr_placement_model *m, struct yyjson_mut_doc *doc,
                                   struct yyjson_mut_val *obj);

/* ---- inputs from the real world (source.c) ---- */

struct qr_host_profile;
struct qr_host_limits;
struct qr_ledger;

/* h from a discovered host (both borrowed): allowed physical cores, effective CPUs, memory, NUMA
 * nodes, accelerators. model_on_nvme/model_device stay unset (qr_placement_host_locate_file). */
void qr_placement_host_from_profile(const struct qr_host_profile *p, const struct qr_host_limits *l,
                                    struct qr_placement_host *h);

/* Set h->model_on_nvme and h->model_device from the block device holding path (sysfs). */
void qr_placement_host_locate_file(struct qr_placement_host *h, const char *path);

/* Refresh h->ram_available (and h->ram_total) from a meminfo file (path NULL: /proc/meminfo),
 * for a host discovered once and planned on later: what is free changes, the topology does not.
 * A file that cannot be read or lacks the lines leaves the old values. Returns true when
 * MemAvailable was read. */
bool qr_placement_host_refresh_memory(struct qr_placement_host *h, const char *path);

/* Size the GGUF file at path for n_ctx cells (0: the model's context_length, else 4096) and
 * n_seq slots (0: llama-server's default -np auto, 4 unified; N: -np N, one stream each).
 * QR_ERR_NOT_FOUND/QR_ERR_INVALID/QR_ERR_IO with diag when the file cannot be read. */
enum qr_err qr_placement_model_from_file(const char *path, uint64_t n_ctx, uint64_t n_seq,
                                         struct qr_placement_model *out, struct qr_diag *diag);

struct qr_registry;

/* The GGUF file of the registry model named name (id, alias, name:tag): its first llama.cpp GGUF
 * artifact with a main role (inference, embedding, reranking), resolved under models_dir or
 * joined by discovery, that is readable, into out (cap bytes). QR_ERR_NOT_FOUND with diag when
 * the name does not resolve or has no such file. */
enum qr_err qr_placement_resolve_model(const struct qr_registry *reg, const char *models_dir,
                                       const char *name, char *out, size_t cap,
                                       struct qr_diag *diag);

/* What the ledger's llama.cpp entries (not blocked) enable and do not list as broken. l may be
 * NULL (nothing verified). */
void qr_placement_verified_from_ledger(const struct qr_ledger *l, struct qr_placement_verified *v);

/* The body of POST /v1/placement and of `quantum-runtime plan --json`. */
struct qr_placement_query {
    const char *path;  /* the GGUF file (borrowed), required */
    const char *model; /* the name it was resolved from, or NULL */
    uint64_t n_ctx, n_seq;
    struct qr_placement_request req; /* verified flags already filled */
    const char *calibration_json;    /* the stored calibration (borrowed), NULL: null */
};

/* Parse a POST /v1/placement body into q (strings borrowed from doc; exactly one of q->model and
 * q->path set; q->req.verified, filled by the caller, is kept; q->req.prefer,
 * allow_acceleration and allow_nvme_cold_tier, filled by the caller, are the defaults of what the
 * body does not say). Unknown fields, wrong types, values out of range and contradictions (prefer
 * gpu with allow_acceleration false) are QR_ERR_INVALID with diag. A body asking for prefer
 * hybrid/gpu without allow_acceleration allows it. */
struct yyjson_doc;
enum qr_err qr_placement_query_parse(struct yyjson_doc *doc, struct qr_placement_query *q,
                                     struct qr_diag *diag);

/* Discover the host (roots NULL: the real ones), size q->path and plan: the whole answer
 * {"api_version","placement_schema","model","host","limits","calibration","plan"} into
 * *out (owned by the caller), and *fits; "calibration" is q->calibration_json parsed (null when
 * NULL or not JSON). QR_ERR_NOMEM, or the file's error with diag. */
enum qr_err qr_placement_document(const struct qr_placement_query *q, const char *api_version,
                                  struct yyjson_mut_doc **out, bool *fits, struct qr_diag *diag);

#endif
