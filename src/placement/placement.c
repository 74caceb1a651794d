/* The placement planner: a pure function from a host, a sized model and a request to a plan -
 * which tier every tensor class, the KV cache and the compute buffers go to, the threads and
 * their NUMA binding, the llama-server arguments that say so - or a refusal with the numbers.
 * CPU/RAM is tried first; accelerator memory only when RAM alone does not fit (or a split is
 * preferred) and acceleration is allowed; the NVMe cold tier only when explicitly allowed. Every
 * sum is overflow-checked; nothing depends on anything but the inputs. docs/PLACEMENT.md. */
#include "placement/placement.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <yyjson.h>

/* ---- names ---- */

static const struct {
    const char *name;
    uint32_t x100; /* bytes per element x 100, rounded up: a block's bytes over its elements */
} KV_TYPES[QR_PLACEMENT_KV_TYPE_COUNT] = {
    [QR_PLACEMENT_KV_F16] = {"f16", 200},      [QR_PLACEMENT_KV_F32] = {"f32", 400},
    [QR_PLACEMENT_KV_BF16] = {"bf16", 200},    [QR_PLACEMENT_KV_Q8_0] = {"q8_0", 107},
    [QR_PLACEMENT_KV_Q4_0] = {"q4_0", 57},     [QR_PLACEMENT_KV_Q4_1] = {"q4_1", 63},
    [QR_PLACEMENT_KV_IQ4_NL] = {"iq4_nl", 57}, [QR_PLACEMENT_KV_Q5_0] = {"q5_0", 69},
    [QR_PLACEMENT_KV_Q5_1] = {"q5_1", 75},
};

const char *qr_placement_kv_type_name(unsigned t)
{
    return t < QR_PLACEMENT_KV_TYPE_COUNT ? KV_TYPES[t].name : NULL;
}

uint32_t qr_placement_kv_type_x100(unsigned t)
{
    return t < QR_PLACEMENT_KV_TYPE_COUNT ? KV_TYPES[t].x100 : 0;
}

uint32_t qr_placement_kv_type_block(unsigned t)
{
    return t >= QR_PLACEMENT_KV_TYPE_COUNT ? 0 : KV_TYPES[t].x100 >= 200 ? 1 : 32;
}

bool qr_placement_kv_type_parse(const char *s, enum qr_placement_kv_type *out)
{
    for (unsigned t = 0; s && t < QR_PLACEMENT_KV_TYPE_COUNT; t++) {
        if (!strcmp(s, KV_TYPES[t].name)) {
            *out = (enum qr_placement_kv_type) t;
            return true;
        }
    }
    return false;
}

static const char *const PREFER[] = {"auto", "cpu", "hybrid", "gpu"};
static const char *const DECISION[] = {"cpu_only", "hybrid", "gpu", "capacity_exceeded", "unsized"};
static const char *const STRATEGY[] = {"none",           "cpu",         "cpu_nvme_cold",
                                       "experts_in_ram", "layer_split", "full_offload"};

const char *qr_placement_prefer_name(unsigned p)
{
    return p < QR_ARRAY_LEN(PREFER) ? PREFER[p] : NULL;
}

bool qr_placement_prefer_parse(const char *s, enum qr_placement_prefer *out)
{
    for (unsigned p = 0; s && p < QR_ARRAY_LEN(PREFER); p++) {
        if (!strcmp(s, PREFER[p])) {
            *out = (enum qr_placement_prefer) p;
            return true;
        }
    }
    return false;
}

const char *qr_placement_decision_name(unsigned d)
{
    return d < QR_ARRAY_LEN(DECISION) ? DECISION[d] : NULL;
}

const char *qr_placement_strategy_name(unsigned s)
{
    return s < QR_ARRAY_LEN(STRATEGY) ? STRATEGY[s] : NULL;
}

/* ---- arithmetic ---- */

/* ceil(a * num / den), den > 0, saturating at UINT64_MAX. */
static uint64_t muldiv_up(uint64_t a, uint64_t num, uint64_t den)
{
    unsigned __int128 x = ((unsigned __int128) a * num + den - 1) / den;
    return x > UINT64_MAX ? UINT64_MAX : (uint64_t) x;
}

/* a + b saturating: inputs were checked to sum without overflow, so saturation never shows. */
static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Bytes for a reason line: "12.50 GiB", "3.2 MiB" or "512 B" (HB(x).s lives until the end of
 * the full expression, long enough for one printf). */
struct hb {
    char s[24];
};

static struct hb HB(uint64_t b) {
    struct hb h;
    if (b >= QR_PLACEMENT_GIB)
        snprintf(h.s, sizeof h.s, "%.2f GiB", (double) b / (double) QR_PLACEMENT_GIB);
    else if (b >= 1024 * 1024)
        snprintf(h.s, sizeof h.s, "%.1f MiB", (double) b / (1024.0 * 1024.0));
    else if (b >= 1024)
        snprintf(h.s, sizeof h.s, "%.1f KiB", (double) b / 1024.0);
    else
        snprintf(h.s, sizeof h.s, "%" PRIu64 " B", b);
    return h;
}

static void __attribute__((format(printf, 3, 4)))
add_line(char (*lines)[QR_PLACEMENT_LINE], size_t *n, const char *fmt, ...)
{
    if (*n >= QR_PLACEMENT_MAX_LINES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lines[*n], QR_PLACEMENT_LINE, fmt, ap);
    va_end(ap);
    (*n)++;
}

#define REASON(p, ...) add_line((p)->reasons, &(p)->n_reasons, __VA_ARGS__)
#define WARN(p, ...)   add_line((p)->warnings, &(p)->n_warnings, __VA_ARGS__)

static void add_arg(struct qr_placement_plan *p, const char *a)
{
    if (p->n_args < QR_PLACEMENT_MAX_ARGS)
        snprintf(p->args[p->n_args++], QR_PLACEMENT_ARG, "%s", a);
}

static void add_arg_u64(struct qr_placement_plan *p, const char *flag, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    add_arg(p, flag);
    add_arg(p, s);
}

static void add_cap(struct qr_placement_plan *p, const char *cap)
{
    if (p->n_caps < QR_PLACEMENT_MAX_CAPS)
        p->caps[p->n_caps++] = cap;
}

/* ---- one way of placing the model, and what it needs ---- */

struct env {
    const struct qr_placement_host *h;
    const struct qr_placement_model *m;
    const struct qr_placement_request *r;
    uint64_t weights, kv, compute, overhead;
    uint64_t ram_usable, vram_usable;
    size_t n_dev;         /* accelerators with known VRAM */
    uint64_t layer_bytes; /* one repeating layer's weights, the average, for device rounding */
};

struct attempt {
    enum qr_placement_strategy s;
    uint64_t ngl, ncmoe;
    bool kv_offload;
    struct qr_placement_part cls[QR_SIZING_CLASS_COUNT], kv, compute, overhead;
    uint64_t ram, vram, nvme, ws;
    bool fits;
};

static void attempt_total(const struct env *e, struct attempt *a)
{
    a->ram = a->vram = a->nvme = 0;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++) {
        a->ram = sat_add(a->ram, a->cls[c].ram);
        a->vram = sat_add(a->vram, a->cls[c].vram);
        a->nvme = sat_add(a->nvme, a->cls[c].nvme);
    }
    a->ram = sat_add(sat_add(a->ram, a->kv.ram), sat_add(a->compute.ram, a->overhead.ram));
    a->ram = sat_add(a->ram, a->ws);
    a->vram = sat_add(a->vram, sat_add(a->kv.vram, a->compute.vram));
    /* the engine splits layers over several devices by free memory: each extra device can
     * round away up to one layer */
    if (a->vram && e->n_dev > 1)
        a->vram = sat_add(a->vram, (uint64_t) (e->n_dev - 1) * e->layer_bytes);
    a->fits = a->ram <= e->ram_usable && a->vram <= e->vram_usable;
}

/* Everything in RAM. */
static void eval_cpu(const struct env *e, struct attempt *a)
{
    memset(a, 0, sizeof *a);
    a->s = QR_PLACEMENT_CPU;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        a->cls[c].ram = e->m->cls[c];
    a->kv.ram = e->kv;
    a->compute.ram = e->compute;
    a->overhead.ram = e->overhead;
    attempt_total(e, a);
}

/* RAM, with the routed experts (paged from the mmap'd file) and per-layer embeddings (read
 * lazily) left on NVMe; RAM keeps the active experts of one token as working set. */
static void eval_cold(const struct env *e, struct attempt *a)
{
    eval_cpu(e, a);
    a->s = QR_PLACEMENT_CPU_NVME_COLD;
    static const unsigned COLD[] = {QR_SIZING_EXPERTS, QR_SIZING_PER_LAYER};
    for (size_t i = 0; i < QR_ARRAY_LEN(COLD); i++) {
        a->cls[COLD[i]].nvme = a->cls[COLD[i]].ram;
        a->cls[COLD[i]].ram = 0;
    }
    const struct qr_placement_model *m = e->m;
    if (m->cls[QR_SIZING_EXPERTS] && m->expert_count)
        a->ws = muldiv_up(m->cls[QR_SIZING_EXPERTS], m->expert_used ? m->expert_used : 1,
                          m->expert_count);
    attempt_total(e, a);
}

/* The last ngl layers offloaded (ngl > n_layers: the output too), the routed experts of the first
 * ncmoe layers kept in RAM; the KV of offloaded layers in VRAM only when verified. */
static void eval_offload(const struct env *e, uint64_t ngl, uint64_t ncmoe, struct attempt *a)
{
    const struct qr_placement_model *m = e->m;
    uint64_t L = m->n_layers, off = ngl < L ? ngl : L, first = L - off;
    eval_cpu(e, a);
    a->ngl = ngl;
    a->ncmoe = ncmoe;
    static const unsigned LAYER[] = {QR_SIZING_ATTN, QR_SIZING_FFN, QR_SIZING_SHARED_EXPERTS,
                                     QR_SIZING_NORM};
    for (size_t i = 0; i < QR_ARRAY_LEN(LAYER); i++) {
        struct qr_placement_part *p = &a->cls[LAYER[i]];
        p->vram = muldiv_up(m->cls[LAYER[i]], off, L);
        p->ram = m->cls[LAYER[i]] - p->vram;
    }
    uint64_t moe_layers = L > m->leading_dense ? L - m->leading_dense : 0;
    uint64_t lo = first;
    if (lo < m->leading_dense)
        lo = m->leading_dense;
    if (lo < ncmoe)
        lo = ncmoe;
    uint64_t moe_off = L > lo ? L - lo : 0;
    struct qr_placement_part *x = &a->cls[QR_SIZING_EXPERTS];
    if (moe_layers && m->cls[QR_SIZING_EXPERTS]) {
        x->vram = muldiv_up(m->cls[QR_SIZING_EXPERTS], moe_off, moe_layers);
        if (x->vram > m->cls[QR_SIZING_EXPERTS])
            x->vram = m->cls[QR_SIZING_EXPERTS];
        x->ram = m->cls[QR_SIZING_EXPERTS] - x->vram;
    }
    if (ngl > L) {
        a->cls[QR_SIZING_OUTPUT].vram = m->cls[QR_SIZING_OUTPUT];
        a->cls[QR_SIZING_OUTPUT].ram = 0;
    }
    a->kv_offload = e->r->verified.kv_offload && off > 0;
    if (a->kv_offload) {
        a->kv.vram = muldiv_up(e->kv, off, L);
        a->kv.ram = e->kv - a->kv.vram;
    }
    a->compute.vram = e->compute * e->n_dev; /* a compute buffer on each device, and the host's */
    a->s = ngl <= L ? QR_PLACEMENT_LAYER_SPLIT
           : ncmoe  ? QR_PLACEMENT_EXPERTS_IN_RAM
                    : QR_PLACEMENT_FULL_OFFLOAD;
    attempt_total(e, a);
}

/* How far an attempt misses, over both tiers (0 when it fits). */
static uint64_t shortfall(const struct env *e, const struct attempt *a)
{
    uint64_t s = a->ram > e->ram_usable ? a->ram - e->ram_usable : 0;
    return sat_add(s, a->vram > e->vram_usable ? a->vram - e->vram_usable : 0);
}

/* The accelerator search, best first: for an MoE model with expert offload verified, every layer
 * offloaded with the fewest layers' experts kept in RAM (hybrid preferred: the most RAM holds),
 * then fewer layers; for a dense model, the most layers. *best: the first fit, else the closest
 * miss. */
static bool search_offload(const struct env *e, struct attempt *best)
{
    const struct qr_placement_model *m = e->m;
    uint64_t L = m->n_layers;
    bool moe = m->cls[QR_SIZING_EXPERTS] && e->r->verified.expert_offload;
    bool first = true;
    struct attempt a;
#define TRY(ngl, n)                                                                                \
    do {                                                                                           \
        eval_offload(e, (ngl), (n), &a);                                                           \
        if (a.fits || first || shortfall(e, &a) < shortfall(e, best))                              \
            *best = a;                                                                             \
        first = false;                                                                             \
        if (a.fits)                                                                                \
            return true;                                                                           \
    } while (0)
    if (moe && e->r->prefer == QR_PLACEMENT_PREFER_HYBRID) {
        for (uint64_t n = L + 1; n-- > 0;) /* the most layers' experts that RAM can hold */
            TRY(L + 1, n);
    } else if (moe) {
        for (uint64_t n = 0; n <= L; n++) /* the fewest that VRAM needs kept out */
            TRY(L + 1, n);
    }
    for (uint64_t k = L + 1; k >= 1; k--)
        TRY(k, moe ? L : 0);
#undef TRY
    return false;
}

/* ---- inputs checked, figures derived ---- */

/* The KV type: the one asked for only when verified, and, for a block type, when every head
 * width is known and a multiple of the block (llama.cpp refuses to create the context else). */
static void kv_type(const struct qr_placement_model *m, const struct qr_placement_request *r,
                    struct qr_placement_plan *p)
{
    const char *name = qr_placement_kv_type_name(r->kv_type);
    uint32_t block = qr_placement_kv_type_block(r->kv_type);
    p->kv_type_requested = r->kv_type;
    p->kv_type = QR_PLACEMENT_KV_F16;
    if (r->kv_type == QR_PLACEMENT_KV_F16 || m->no_cache)
        return;
    if (!r->verified.kv_quant) {
        WARN(p, "kv type %s asked for but KV quantization is not verified for this engine: f16",
             name);
        return;
    }
    for (size_t i = 0; block > 1 && i < QR_ARRAY_LEN(m->kv_head_dims); i++) {
        uint64_t d = m->kv_head_dims[i];
        if (!d && i < 2) {
            WARN(p,
                 "kv type %s needs head widths that are multiples of %" PRIu32
                 "; they are unknown: f16",
                 name, block);
            return;
        }
        if (d % block) {
            WARN(p,
                 "kv type %s: head width %" PRIu64 " is not a multiple of its block %" PRIu32
                 ": f16",
                 name, d, block);
            return;
        }
    }
    p->kv_type = r->kv_type;
}

static enum qr_err env_init(struct env *e, const struct qr_placement_host *h,
                            const struct qr_placement_model *m,
                            const struct qr_placement_request *r, struct qr_placement_plan *p,
                            struct qr_diag *diag)
{
    *e = (struct env){.h = h, .m = m, .r = r};
    if ((unsigned) r->prefer >= QR_ARRAY_LEN(PREFER) ||
        (unsigned) r->kv_type >= QR_PLACEMENT_KV_TYPE_COUNT)
        return qr_diag_set(diag, QR_ERR_INVALID, "placement request out of range");
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++) {
        if (e->weights > UINT64_MAX - m->cls[c])
            return qr_diag_set(diag, QR_ERR_INVALID, "weight bytes overflow");
        e->weights += m->cls[c];
    }
    kv_type(m, r, p);
    /* the engine figure is at f16 (2 bytes an element): scale to the chosen type */
    e->kv =
        m->no_cache ? 0 : muldiv_up(m->kv_bytes_f16, qr_placement_kv_type_x100(p->kv_type), 200);
    e->compute = m->compute_known ? m->compute_bytes : QR_PLACEMENT_COMPUTE_UNKNOWN;
    if (!m->compute_known)
        WARN(p, "compute buffer not sized (no vocabulary or embedding size): %s allowed",
             HB(e->compute).s);
    e->overhead = QR_PLACEMENT_ENGINE_OVERHEAD;
    if (e->weights > UINT64_MAX / 4 || e->kv > UINT64_MAX / 4 || e->compute > UINT64_MAX / 64)
        return qr_diag_set(diag, QR_ERR_INVALID, "model bytes out of range");
    uint64_t repeating = m->cls[QR_SIZING_ATTN] + m->cls[QR_SIZING_FFN] +
                         m->cls[QR_SIZING_EXPERTS] + m->cls[QR_SIZING_SHARED_EXPERTS] +
                         m->cls[QR_SIZING_NORM];
    e->layer_bytes = m->n_layers ? muldiv_up(repeating, 1, m->n_layers) : 0;
    return QR_OK;
}

/* RAM: MemAvailable (MemTotal when unknown), capped by the cgroup limit, less the reserve. The
 * reserve is taken once (MemAvailable already excludes memory in use). */
static void ram_tier(struct env *e, struct qr_placement_plan *p)
{
    const struct qr_placement_host *h = e->h;
    struct qr_placement_tier *t = &p->ram;
    t->total = h->ram_total;
    t->available = h->ram_available ? h->ram_available : h->ram_total;
    if (!h->ram_available)
        WARN(p, "MemAvailable unknown: planned on MemTotal");
    if (h->ram_limit && h->ram_limit < t->available) {
        t->available = h->ram_limit;
        REASON(p, "cgroup memory.max %s caps RAM below MemAvailable", HB(h->ram_limit).s);
    }
    t->reserve = e->r->reserve_ram_bytes;
    if (!t->reserve) {
        t->reserve = h->ram_total / 32;
        if (t->reserve < QR_PLACEMENT_RAM_RESERVE_MIN)
            t->reserve = QR_PLACEMENT_RAM_RESERVE_MIN;
    }
    t->usable = t->available > t->reserve ? t->available - t->reserve : 0;
    e->ram_usable = t->usable;
}

/* VRAM: the accelerators with known memory, each less its margin and its compute buffer. */
static void vram_tier(struct env *e, struct qr_placement_plan *p)
{
    const struct qr_placement_host *h = e->h;
    struct qr_placement_tier *t = &p->vram;
    for (size_t i = 0; i < h->n_accel && i < QR_PLACEMENT_MAX_ACCEL; i++) {
        if (!h->accel[i].vram_bytes) {
            WARN(p, "accelerator '%s' has no known memory: not planned on", h->accel[i].name);
            continue;
        }
        e->n_dev++;
        t->total = sat_add(t->total, h->accel[i].vram_bytes);
        t->reserve = sat_add(t->reserve, QR_PLACEMENT_VRAM_MARGIN);
    }
    t->available = t->total;
    t->usable = t->total > t->reserve ? t->total - t->reserve : 0;
    e->vram_usable = t->usable;
    p->vram_devices = e->n_dev;
    if (e->n_dev > 1)
        REASON(p,
               "%zu accelerators: the engine splits offloaded layers by free memory (one "
               "layer per extra device kept in reserve)",
               e->n_dev);
}

/* ---- the decision ---- */

static void take(struct qr_placement_plan *p, const struct attempt *a)
{
    memcpy(p->cls, a->cls, sizeof p->cls);
    p->kv_part = a->kv;
    p->compute_part = a->compute;
    p->overhead_part = a->overhead;
    p->ram.assigned = a->ram;
    p->vram.assigned = a->vram;
    p->nvme_cold = a->nvme;
    p->nvme_ram_ws = a->ws;
    p->gpu_layers = a->ngl;
    p->n_cpu_moe = a->ncmoe;
    p->kv_offload = a->kv_offload;
    p->strategy = a->s;
}

/* Try what the preference and the permissions allow, in order. */
static void decide(struct env *e, struct qr_placement_plan *p, struct attempt *cpu,
                   struct attempt *acc, bool *tried_acc, struct attempt *cold, bool *tried_cold)
{
    const struct qr_placement_request *r = e->r;
    const struct qr_placement_model *m = e->m;
    bool accel = r->allow_acceleration && e->vram_usable > 0 && m->n_layers > 0;
    bool want_split =
        r->prefer == QR_PLACEMENT_PREFER_HYBRID || r->prefer == QR_PLACEMENT_PREFER_GPU;
    eval_cpu(e, cpu);
    if (want_split && !accel)
        WARN(p, "prefer %s: %s; planned CPU first", qr_placement_prefer_name(r->prefer),
             !r->allow_acceleration ? "acceleration not allowed"
             : !e->vram_usable      ? "no accelerator with known usable memory"
                                    : "the model's layer count is unknown");
    if (accel && r->prefer != QR_PLACEMENT_PREFER_CPU && (want_split || !cpu->fits)) {
        *tried_acc = true;
        if (search_offload(e, acc)) {
            take(p, acc);
            p->decision =
                acc->s == QR_PLACEMENT_FULL_OFFLOAD ? QR_PLACEMENT_GPU : QR_PLACEMENT_HYBRID;
            if (r->prefer == QR_PLACEMENT_PREFER_GPU && p->decision != QR_PLACEMENT_GPU)
                WARN(p, "prefer gpu: not every layer fits the accelerator; split with RAM");
            return;
        }
    }
    if (cpu->fits) {
        if (*tried_acc)
            WARN(p, "prefer %s: no accelerator split fits; planned CPU only",
                 qr_placement_prefer_name(r->prefer));
        take(p, cpu);
        p->decision = QR_PLACEMENT_CPU_ONLY;
        return;
    }
    bool cold_classes = m->cls[QR_SIZING_EXPERTS] || m->cls[QR_SIZING_PER_LAYER];
    if (r->allow_nvme_cold_tier && !e->h->model_on_nvme)
        WARN(p, "nvme cold tier allowed but the model file is not on an NVMe device%s%s",
             e->h->model_device[0] ? ": " : "", e->h->model_device);
    else if (r->allow_nvme_cold_tier && !cold_classes)
        WARN(p, "nvme cold tier allowed but the model has no cold class (routed experts, "
                "per-layer embeddings)");
    if (r->allow_nvme_cold_tier && e->h->model_on_nvme && cold_classes) {
        *tried_cold = true;
        eval_cold(e, cold);
        if (cold->fits) {
            take(p, cold);
            p->decision = QR_PLACEMENT_CPU_ONLY;
            return;
        }
    }
    take(p, cpu); /* the bytes, for the refusal's numbers */
    p->decision = QR_PLACEMENT_CAPACITY_EXCEEDED;
    p->strategy = QR_PLACEMENT_NONE;
}

/* The lines that say how a split was made. */
static void explain_split(const struct env *e, struct qr_placement_plan *p)
{
    const struct qr_placement_model *m = e->m;
    if (p->n_cpu_moe)
        REASON(p,
               "MoE: routed experts of the first %" PRIu64 " of %" PRIu64 " layers stay in "
               "RAM (sparse per token), attention and dense tensors on the accelerator",
               p->n_cpu_moe, m->n_layers);
    if (p->strategy == QR_PLACEMENT_LAYER_SPLIT)
        REASON(p, "the last %" PRIu64 " of %" PRIu64 " layers on the accelerator, the rest in RAM",
               p->gpu_layers < m->n_layers ? p->gpu_layers : m->n_layers, m->n_layers);
    if (p->strategy == QR_PLACEMENT_LAYER_SPLIT && m->cls[QR_SIZING_EXPERTS] &&
        !e->r->verified.expert_offload)
        REASON(p, "moe.expert_offload not verified: experts move with their layers");
    if (p->gpu_layers && !p->kv_offload && e->kv)
        REASON(p, "KV cache in RAM (--no-kv-offload): cache.kv_offload is not verified");
    if (p->kv_offload)
        REASON(p, "KV cache of the offloaded layers in VRAM (cache.kv_offload verified)");
}

/* The decision's one-line reason and its supporting lines. */
static void explain(const struct env *e, struct qr_placement_plan *p, const struct attempt *cpu,
                    const struct attempt *acc, bool tried_acc, const struct attempt *cold,
                    bool tried_cold)
{
    uint64_t headroom = e->ram_usable > p->ram.assigned ? e->ram_usable - p->ram.assigned : 0;
    switch (p->strategy) {
    case QR_PLACEMENT_CPU:
        snprintf(p->reason, sizeof p->reason,
                 "fits in RAM: needs %s of %s usable (headroom %s); CPU first",
                 HB(p->ram.assigned).s, HB(e->ram_usable).s, HB(headroom).s);
        break;
    case QR_PLACEMENT_CPU_NVME_COLD:
        snprintf(p->reason, sizeof p->reason,
                 "fits in RAM only with the explicit NVMe cold tier: %s RAM of %s "
                 "usable, %s paged from NVMe",
                 HB(p->ram.assigned).s, HB(e->ram_usable).s, HB(p->nvme_cold).s);
        break;
    case QR_PLACEMENT_EXPERTS_IN_RAM:
    case QR_PLACEMENT_LAYER_SPLIT:
    case QR_PLACEMENT_FULL_OFFLOAD: {
        char head[64] = "split preferred";
        if (!cpu->fits)
            snprintf(head, sizeof head, "RAM alone does not fit (needs %s)", HB(cpu->ram).s);
        snprintf(p->reason, sizeof p->reason, "%s: %s RAM of %s usable, %s VRAM of %s usable", head,
                 HB(p->ram.assigned).s, HB(e->ram_usable).s, HB(p->vram.assigned).s,
                 HB(e->vram_usable).s);
        break;
    }
    case QR_PLACEMENT_NONE:
        snprintf(p->reason, sizeof p->reason,
                 "does not fit: needs %s RAM, %s usable (available %s, "
                 "reserve %s)",
                 HB(cpu->ram).s, HB(e->ram_usable).s, HB(p->ram.available).s, HB(p->ram.reserve).s);
        if (tried_acc)
            REASON(p,
                   "best accelerator split (-ngl %" PRIu64 ", --n-cpu-moe %" PRIu64
                   ") needs %s RAM and %s VRAM of %s usable",
                   acc->ngl, acc->ncmoe, HB(acc->ram).s, HB(acc->vram).s, HB(e->vram_usable).s);
        else if (e->vram_usable && !e->r->allow_acceleration)
            REASON(p, "acceleration not allowed: %s VRAM usable was not considered",
                   HB(e->vram_usable).s);
        if (tried_cold)
            REASON(p, "with the NVMe cold tier it still needs %s RAM", HB(cold->ram).s);
        break;
    }
    explain_split(e, p);
}

/* Threads and NUMA binding. */
static void threads(const struct env *e, struct qr_placement_plan *p)
{
    const struct qr_placement_host *h = e->h;
    uint32_t cores = h->physical_cores ? h->physical_cores : 1;
    uint32_t cpus = h->logical_cpus ? h->logical_cpus : cores;
    if (e->r->threads) {
        p->threads = e->r->threads;
        REASON(p, "threads %" PRIu32 ": given (calibration or request)", p->threads);
        if (p->threads > cpus) {
            WARN(p, "threads %" PRIu32 " above the %" PRIu32 " CPUs this process may use: %" PRIu32,
                 p->threads, cpus, cpus);
            p->threads = cpus;
        }
    } else {
        p->threads = cores < cpus ? cores : cpus;
        REASON(p,
               "threads %" PRIu32 ": the physical cores this process may use (%" PRIu32
               " physical, %" PRIu32 " effective CPUs); SMT siblings add little to "
               "memory-bound decode",
               p->threads, cores, cpus);
    }
    p->numa_nodes = h->n_numa;
    if (h->n_numa > 1) {
        p->numa = "distribute";
        uint64_t smallest = UINT64_MAX;
        for (size_t i = 0; i < h->n_numa && i < QR_PLACEMENT_MAX_NUMA; i++)
            if (h->numa[i].memory_bytes && h->numa[i].memory_bytes < smallest)
                smallest = h->numa[i].memory_bytes;
        REASON(p,
               "%zu NUMA nodes: --numa distribute spreads threads and their memory over all "
               "nodes (every memory channel serves decode)",
               h->n_numa);
        if (smallest != UINT64_MAX && p->ram.assigned > smallest)
            REASON(p,
                   "the RAM part (%s) exceeds one node (%s): one node cannot hold "
                   "it",
                   HB(p->ram.assigned).s, HB(smallest).s);
        WARN(p, "NUMA: pages of an earlier run may sit on one node; drop the page cache before "
                "the first distributed run");
    }
}

static void engine_args(const struct env *e, struct qr_placement_plan *p)
{
    add_arg_u64(p, "-t", p->threads);
    add_arg_u64(p, "-ngl", p->gpu_layers);
    if (!p->gpu_layers && e->h->n_accel) {
        add_arg(p, "--device"); /* no op offload to an accelerator either */
        add_arg(p, "none");
    }
    if (p->n_cpu_moe)
        add_arg_u64(p, "--n-cpu-moe", p->n_cpu_moe);
    if (p->gpu_layers && !p->kv_offload)
        add_arg(p, "--no-kv-offload");
    if (p->numa) {
        add_arg(p, "--numa");
        add_arg(p, p->numa);
    }
    if (qr_placement_kv_type_block(p->kv_type) > 1) {
        add_arg(p, "--flash-attn"); /* a quantized V cache needs flash attention */
        add_arg(p, "on");
    }
    if (p->kv_type != QR_PLACEMENT_KV_F16) {
        add_arg(p, "--cache-type-k");
        add_arg(p, qr_placement_kv_type_name(p->kv_type));
        add_arg(p, "--cache-type-v");
        add_arg(p, qr_placement_kv_type_name(p->kv_type));
    }
    if (p->strategy == QR_PLACEMENT_CPU_NVME_COLD) {
        add_arg(p, "--load-mode"); /* file-backed pages the kernel can drop and read again */
        add_arg(p, "mmap");
        add_arg(p, "--no-repack"); /* repacked weights would be anonymous copies */
        if (e->m->cls[QR_SIZING_PER_LAYER]) {
            add_arg(p, "--lazy-mode");
            add_arg(p, "on");
        }
    }
}

static void capabilities(const struct env *e, struct qr_placement_plan *p)
{
    add_cap(p, p->decision == QR_PLACEMENT_CPU_ONLY ? "placement.cpu"
               : p->decision == QR_PLACEMENT_GPU    ? "placement.gpu"
                                                    : "placement.hybrid");
    if (p->n_cpu_moe)
        add_cap(p, "moe.expert_offload");
    if (p->kv_offload)
        add_cap(p, "cache.kv_offload");
    if (p->decision != QR_PLACEMENT_CPU_ONLY && !e->r->verified.hybrid)
        WARN(p,
             "%s is not verified by the ledger for this engine: the backend must prove it "
             "before the plan is applied",
             p->caps[0]);
    if (p->strategy == QR_PLACEMENT_CPU_NVME_COLD)
        WARN(p, "NVMe cold tier: tokens whose experts are not in the page cache wait on NVMe "
                "reads; decode speed depends on the device");
}

enum qr_err qr_placement_plan(const struct qr_placement_host *h, const struct qr_placement_model *m,
                              const struct qr_placement_request *r, struct qr_placement_plan *out,
                              struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct env e;
    enum qr_err err = env_init(&e, h, m, r, out, diag);
    if (err)
        return err;
    out->weights = e.weights;
    out->kv = e.kv;
    out->compute = e.compute;
    out->overhead = e.overhead;
    out->total = e.weights + e.kv + e.compute + e.overhead;
    ram_tier(&e, out);
    vram_tier(&e, out);
    out->nvme_allowed = r->allow_nvme_cold_tier;
    out->model_on_nvme = h->model_on_nvme;
    memcpy(out->model_device, h->model_device, sizeof out->model_device);
    out->model_device[sizeof out->model_device - 1] = '\0';
    REASON(out,
           "weights %s + KV %s (ctx %" PRIu64 ", %" PRIu64 " slots, %s) + "
           "compute %s + engine %s = %s",
           HB(e.weights).s, HB(e.kv).s, m->n_ctx, m->n_seq, qr_placement_kv_type_name(out->kv_type),
           HB(e.compute).s, HB(e.overhead).s, HB(out->total).s);
    REASON(out, "RAM usable %s = available %s - reserve %s", HB(out->ram.usable).s,
           HB(out->ram.available).s, HB(out->ram.reserve).s);
    if (!m->kv_known && !m->no_cache) {
        out->decision = QR_PLACEMENT_UNSIZED;
        snprintf(out->reason, sizeof out->reason,
                 "the KV cache cannot be sized (%s): refused rather than started blind",
                 m->kv_unknown ? m->kv_unknown : "unknown");
        return QR_OK;
    }
    struct attempt cpu, acc, cold;
    bool tried_acc = false, tried_cold = false;
    memset(&acc, 0, sizeof acc);
    memset(&cold, 0, sizeof cold);
    decide(&e, out, &cpu, &acc, &tried_acc, &cold, &tried_cold);
    out->fits = out->decision <= QR_PLACEMENT_GPU;
    explain(&e, out, &cpu, &acc, tried_acc, &cold, tried_cold);
    if (!out->fits)
        return QR_OK;
    threads(&e, out);
    engine_args(&e, out);
    capabilities(&e, out);
    return QR_OK;
}

size_t qr_placement_engine_args(const struct qr_placement_plan *plan, unsigned flags,
                                const char **argv, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; plan->fits && i < plan->n_args; i++) {
        if ((flags & QR_PLACEMENT_ARGS_NO_THREADS) && !strcmp(plan->args[i], "-t") &&
            i + 1 < plan->n_args) {
            i++; /* and its value */
            continue;
        }
        if (n < max)
            argv[n] = plan->args[i];
        n++;
    }
    return n;
}

/* ---- JSON ---- */

static const char *part_tier(const struct qr_placement_part *p, bool fits)
{
    if (!fits)
        return "unplaced";
    int n = (p->ram > 0) + (p->vram > 0) + (p->nvme > 0);
    return n > 1 ? "mixed" : p->vram ? "vram" : p->nvme ? "nvme" : "ram";
}

static bool add_class(yyjson_mut_doc *doc, yyjson_mut_val *arr, const char *name,
                      const struct qr_placement_part *p, bool fits)
{
    uint64_t bytes = sat_add(sat_add(p->ram, p->vram), p->nvme);
    if (!bytes)
        return true;
    yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
    return o && yyjson_mut_obj_add_str(doc, o, "class", name) &&
           yyjson_mut_obj_add_str(doc, o, "tier", part_tier(p, fits)) &&
           yyjson_mut_obj_add_uint(doc, o, "bytes", bytes) &&
           yyjson_mut_obj_add_uint(doc, o, "ram_bytes", fits ? p->ram : 0) &&
           yyjson_mut_obj_add_uint(doc, o, "vram_bytes", fits ? p->vram : 0) &&
           yyjson_mut_obj_add_uint(doc, o, "nvme_bytes", fits ? p->nvme : 0);
}

static bool add_tier(yyjson_mut_doc *doc, yyjson_mut_val *obj, const char *key,
                     const struct qr_placement_tier *t)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, obj, key);
    return o && yyjson_mut_obj_add_uint(doc, o, "total_bytes", t->total) &&
           yyjson_mut_obj_add_uint(doc, o, "available_bytes", t->available) &&
           yyjson_mut_obj_add_uint(doc, o, "reserve_bytes", t->reserve) &&
           yyjson_mut_obj_add_uint(doc, o, "usable_bytes", t->usable) &&
           yyjson_mut_obj_add_uint(doc, o, "assigned_bytes", t->assigned) &&
           yyjson_mut_obj_add_sint(doc, o, "headroom_bytes",
                                   (int64_t) t->usable - (int64_t) t->assigned);
}

static bool add_lines(yyjson_mut_doc *doc, yyjson_mut_val *obj, const char *key,
                      const char (*lines)[QR_PLACEMENT_LINE], size_t n)
{
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(doc, obj, key);
    for (size_t i = 0; a && i < n; i++)
        if (!yyjson_mut_arr_add_strcpy(doc, a, lines[i]))
            return false;
    return a != NULL;
}

static bool add_memory(const struct qr_placement_plan *p, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(doc, obj, "memory");
    if (!o || !yyjson_mut_obj_add_uint(doc, o, "weights_bytes", p->weights) ||
        !yyjson_mut_obj_add_uint(doc, o, "kv_bytes", p->kv) ||
        !yyjson_mut_obj_add_uint(doc, o, "compute_bytes", p->compute) ||
        !yyjson_mut_obj_add_uint(doc, o, "engine_overhead_bytes", p->overhead) ||
        !yyjson_mut_obj_add_uint(doc, o, "total_bytes", p->total) ||
        !yyjson_mut_obj_add_str(doc, o, "kv_type", qr_placement_kv_type_name(p->kv_type)) ||
        !yyjson_mut_obj_add_str(doc, o, "kv_type_requested",
                                qr_placement_kv_type_name(p->kv_type_requested)))
        return false;
    if (!add_tier(doc, obj, "ram", &p->ram) || !add_tier(doc, obj, "vram", &p->vram))
        return false;
    yyjson_mut_val *v = yyjson_mut_obj_get(obj, "vram");
    yyjson_mut_val *n = yyjson_mut_obj_add_obj(doc, obj, "nvme");
    return yyjson_mut_obj_add_uint(doc, v, "devices", p->vram_devices) && n &&
           yyjson_mut_obj_add_bool(doc, n, "allowed", p->nvme_allowed) &&
           yyjson_mut_obj_add_bool(doc, n, "model_on_nvme", p->model_on_nvme) &&
           yyjson_mut_obj_add_strcpy(doc, n, "model_device", p->model_device) &&
           yyjson_mut_obj_add_uint(doc, n, "assigned_bytes", p->nvme_cold) &&
           yyjson_mut_obj_add_uint(doc, n, "ram_working_set_bytes", p->nvme_ram_ws);
}

static bool add_classes(const struct qr_placement_plan *p, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(doc, obj, "classes");
    if (!a)
        return false;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++) {
        struct qr_placement_part part = p->cls[c];
        if (!p->fits) /* refused: the bytes with no tier */
            part = (struct qr_placement_part){.ram = p->cls[c].ram};
        if (!add_class(doc, a, qr_sizing_class_name(c), &part, p->fits))
            return false;
    }
    return add_class(doc, a, "kv_cache", &p->kv_part, p->fits) &&
           add_class(doc, a, "compute", &p->compute_part, p->fits) &&
           add_class(doc, a, "engine_overhead", &p->overhead_part, p->fits);
}

static bool add_engine(const struct qr_placement_plan *p, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_val *t = yyjson_mut_obj_add_obj(doc, obj, "threads");
    if (!t || !yyjson_mut_obj_add_uint(doc, t, "count", p->threads) ||
        !yyjson_mut_obj_add_uint(doc, t, "numa_nodes", p->numa_nodes) ||
        !(p->numa ? yyjson_mut_obj_add_str(doc, t, "numa", p->numa)
                  : yyjson_mut_obj_add_null(doc, t, "numa")))
        return false;
    yyjson_mut_val *e = yyjson_mut_obj_add_obj(doc, obj, "engine");
    if (!e || !yyjson_mut_obj_add_str(doc, e, "engine", "llama.cpp") ||
        !yyjson_mut_obj_add_uint(doc, e, "gpu_layers", p->gpu_layers) ||
        !yyjson_mut_obj_add_uint(doc, e, "n_cpu_moe", p->n_cpu_moe) ||
        !yyjson_mut_obj_add_bool(doc, e, "kv_offload", p->kv_offload))
        return false;
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(doc, e, "args");
    for (size_t i = 0; a && p->fits && i < p->n_args; i++)
        if (!yyjson_mut_arr_add_strcpy(doc, a, p->args[i]))
            return false;
    return a != NULL;
}

enum qr_err qr_placement_plan_json(const struct qr_placement_plan *p,
                                   const struct qr_placement_model *m, yyjson_mut_doc *doc,
                                   yyjson_mut_val *obj)
{
    bool ok =
        yyjson_mut_obj_add_str(doc, obj, "schema_version", QR_PLACEMENT_SCHEMA) &&
        yyjson_mut_obj_add_str(doc, obj, "decision", qr_placement_decision_name(p->decision)) &&
        yyjson_mut_obj_add_str(doc, obj, "strategy", qr_placement_strategy_name(p->strategy)) &&
        yyjson_mut_obj_add_bool(doc, obj, "fits", p->fits) &&
        yyjson_mut_obj_add_strcpy(doc, obj, "reason", p->reason) &&
        yyjson_mut_obj_add_bool(doc, obj, "cpu_first", true);
    yyjson_mut_val *mo = ok ? yyjson_mut_obj_add_obj(doc, obj, "sizing") : NULL;
    ok = mo && yyjson_mut_obj_add_uint(doc, mo, "context", m->n_ctx) &&
         yyjson_mut_obj_add_uint(doc, mo, "parallel", m->n_seq) &&
         yyjson_mut_obj_add_uint(doc, mo, "layers", m->n_layers) &&
         yyjson_mut_obj_add_uint(doc, mo, "experts", m->expert_count) &&
         yyjson_mut_obj_add_uint(doc, mo, "experts_used", m->expert_used) &&
         yyjson_mut_obj_add_bool(doc, mo, "kv_known", m->kv_known || m->no_cache) &&
         yyjson_mut_obj_add_bool(doc, mo, "compute_known", m->compute_known);
    ok = ok && add_memory(p, doc, obj) && add_classes(p, doc, obj) && add_engine(p, doc, obj) &&
         add_lines(doc, obj, "reasons", (const char(*)[QR_PLACEMENT_LINE]) p->reasons,
                   p->n_reasons) &&
         add_lines(doc, obj, "warnings", (const char(*)[QR_PLACEMENT_LINE]) p->warnings,
                   p->n_warnings);
    yyjson_mut_val *caps =
        ok ? yyjson_mut_obj_add_arr(doc, obj, "requires_backend_capabilities") : NULL;
    for (size_t i = 0; caps && i < p->n_caps; i++)
        ok = ok && yyjson_mut_arr_add_str(doc, caps, p->caps[i]);
    return ok && caps ? QR_OK : QR_ERR_NOMEM;
}
