/* Placement decisions for a table of synthetic hosts (placement/placement.h): the CPU-only
 * reference host (64 GiB, 8 physical cores) runs a dense 8B-class model on the CPU even with a
 * GPU present; a small-RAM host refuses with the numbers; a GPU with little VRAM is used only
 * when RAM alone does not fit or a split is preferred; an MoE model larger than VRAM keeps its
 * routed experts in RAM with attention and dense tensors on the GPU; two NUMA nodes give
 * --numa distribute; the NVMe cold tier is used only when explicitly allowed and the file is on
 * NVMe; KV offload and KV quantization only where verified. Every plan names only contract
 * capability keys, and the same inputs always give the same JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "host/profile.h"
#include "placement/placement.h"
#include "policy/ledger.h"

#define GiB (1024ull * 1024ull * 1024ull)
#define MiB (1024ull * 1024ull)

/* ---- synthetic hosts ---- */

static struct qr_placement_host host(uint64_t total_gib, uint64_t avail_gib, uint32_t cores,
                                     uint32_t cpus)
{
    struct qr_placement_host h;
    memset(&h, 0, sizeof h);
    h.physical_cores = cores;
    h.logical_cpus = cpus;
    h.ram_total = total_gib * GiB;
    h.ram_available = avail_gib * GiB;
    h.n_numa = 1;
    h.numa[0] = (struct qr_placement_numa){.id = 0, .cpus = cpus, .memory_bytes = h.ram_total};
    return h;
}

static void add_gpu(struct qr_placement_host *h, uint64_t vram_gib)
{
    struct qr_placement_accel *a = &h->accel[h->n_accel++];
    snprintf(a->name, sizeof a->name, "AMD card%zu", h->n_accel - 1);
    a->vram_bytes = vram_gib * GiB;
}

/* ---- synthetic models ---- */

/* A dense 8B-class model at about 4.5 bits: 32 layers. */
static struct qr_placement_model dense(uint64_t scale_pct)
{
    struct qr_placement_model m;
    memset(&m, 0, sizeof m);
    m.cls[QR_SIZING_TOKEN_EMBD] = 500 * MiB * scale_pct / 100;
    m.cls[QR_SIZING_OUTPUT] = 500 * MiB * scale_pct / 100;
    m.cls[QR_SIZING_ATTN] = 1200 * MiB * scale_pct / 100;
    m.cls[QR_SIZING_FFN] = 3300 * MiB * scale_pct / 100;
    m.cls[QR_SIZING_NORM] = 1 * MiB;
    m.n_layers = 32;
    m.kv_known = true;
    m.kv_bytes_f16 = 1 * GiB;
    m.compute_known = true;
    m.compute_bytes = 300 * MiB;
    m.n_ctx = 8192;
    m.n_seq = 1;
    return m;
}

/* A 30B-A3B-class MoE: 48 layers, 128 experts of which 8 are used, 16 GiB of routed experts. */
static struct qr_placement_model moe(void)
{
    struct qr_placement_model m;
    memset(&m, 0, sizeof m);
    m.cls[QR_SIZING_TOKEN_EMBD] = 300 * MiB;
    m.cls[QR_SIZING_OUTPUT] = 300 * MiB;
    m.cls[QR_SIZING_ATTN] = 1024 * MiB;
    m.cls[QR_SIZING_FFN] = 96 * MiB; /* routers */
    m.cls[QR_SIZING_EXPERTS] = 16 * GiB;
    m.cls[QR_SIZING_NORM] = 1 * MiB;
    m.n_layers = 48;
    m.expert_count = 128;
    m.expert_used = 8;
    m.kv_known = true;
    m.kv_bytes_f16 = 3 * GiB;
    m.compute_known = true;
    m.compute_bytes = 500 * MiB;
    m.n_ctx = 32768;
    m.n_seq = 1;
    m.kv_head_dims[0] = m.kv_head_dims[1] = 128;
    return m;
}

static struct qr_placement_request req(enum qr_placement_prefer prefer, bool accel)
{
    struct qr_placement_request r;
    memset(&r, 0, sizeof r);
    r.prefer = prefer;
    r.allow_acceleration = accel;
    r.verified.expert_offload = true; /* as the builtin ledger says for llama.cpp */
    return r;
}

/* ---- helpers ---- */

static struct qr_placement_plan *plan_of(const struct qr_placement_host *h,
                                         const struct qr_placement_model *m,
                                         const struct qr_placement_request *r)
{
    struct qr_placement_plan *p = malloc(sizeof *p);
    assert_non_null(p);
    struct qr_diag d = {{0}};
    assert_int_equal(qr_placement_plan(h, m, r, p, &d), QR_OK);
    for (size_t i = 0; i < p->n_caps; i++) /* contract names only (the predecessor's weak spot) */
        assert_true(qr_ledger_capability_known(p->caps[i]));
    assert_true(p->fits == (p->n_args > 0));
    if (p->fits) { /* a plan never assigns more than a tier can take */
        assert_true(p->ram.assigned <= p->ram.usable);
        assert_true(p->vram.assigned <= p->vram.usable);
    } else {
        assert_int_equal(p->n_caps, 0);
    }
    return p;
}

/* The index of arg a in the plan's args, -1 when absent. */
static int arg_at(const struct qr_placement_plan *p, const char *a)
{
    for (size_t i = 0; i < p->n_args; i++)
        if (!strcmp(p->args[i], a))
            return (int) i;
    return -1;
}

static const char *arg_value(const struct qr_placement_plan *p, const char *flag)
{
    int i = arg_at(p, flag);
    return i >= 0 && (size_t) i + 1 < p->n_args ? p->args[i + 1] : NULL;
}

static bool has_cap(const struct qr_placement_plan *p, const char *cap)
{
    for (size_t i = 0; i < p->n_caps; i++)
        if (!strcmp(p->caps[i], cap))
            return true;
    return false;
}

static bool has_line(const char (*lines)[QR_PLACEMENT_LINE], size_t n, const char *needle)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(lines[i], needle))
            return true;
    return false;
}

static uint64_t weights(const struct qr_placement_model *m)
{
    uint64_t w = 0;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        w += m->cls[c];
    return w;
}

/* ---- the table ---- */

/* The reference production profile: CPU-only, 64 GiB, 8 physical cores (16 CPUs). */
static void test_cpu_only_64g_8_cores(void **state)
{
    (void) state;
    struct qr_placement_host h = host(64, 60, 8, 16);
    struct qr_placement_model m = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    assert_int_equal(p->strategy, QR_PLACEMENT_CPU);
    assert_true(p->fits);
    uint64_t need = weights(&m) + m.kv_bytes_f16 + m.compute_bytes + QR_PLACEMENT_ENGINE_OVERHEAD;
    assert_int_equal(p->total, need);
    assert_int_equal(p->ram.assigned, need);
    assert_int_equal(p->ram.reserve, 2 * GiB); /* max(1 GiB, 64 GiB / 32), taken once */
    assert_int_equal(p->ram.usable, 58 * GiB);
    assert_int_equal(p->vram.assigned, 0);
    assert_int_equal(p->threads, 8); /* physical cores, not SMT siblings */
    assert_null(p->numa);
    const char *want[] = {"-t", "8", "-ngl", "0"};
    assert_int_equal(p->n_args, 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(p->args[i], want[i]);
    const char *argv[8];
    assert_int_equal(qr_placement_engine_args(p, 0, argv, 8), 4);
    assert_string_equal(argv[3], "0");
    /* for the llama.cpp backend, which sets -t itself: the rest */
    assert_int_equal(qr_placement_engine_args(p, QR_PLACEMENT_ARGS_NO_THREADS, argv, 8), 2);
    assert_string_equal(argv[0], "-ngl");
    assert_string_equal(argv[1], "0");
    assert_int_equal(qr_placement_engine_args(p, 0, argv, 1), 4); /* the count, max written */
    assert_string_equal(argv[0], "-t");
    assert_int_equal(p->n_caps, 1);
    assert_string_equal(p->caps[0], "placement.cpu");
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        assert_int_equal(p->cls[c].ram, m.cls[c]);
    free(p);
}

/* A GPU on the reference host changes nothing when RAM fits (CPU first), except that the engine is
 * told not to touch it. */
static void test_cpu_first_even_with_gpu(void **state)
{
    (void) state;
    struct qr_placement_host h = host(64, 60, 8, 16);
    add_gpu(&h, 24);
    struct qr_placement_model m = dense(300); /* ~16 GiB */
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    assert_int_equal(p->vram.assigned, 0);
    assert_string_equal(arg_value(p, "--device"), "none");
    assert_string_equal(arg_value(p, "-ngl"), "0");
    free(p);
}

/* Small RAM: refused with the numbers, no arguments, no capabilities, every class unplaced. */
static void test_small_ram_refused_with_numbers(void **state)
{
    (void) state;
    struct qr_placement_host h = host(16, 12, 4, 8);
    struct qr_placement_model m = dense(400); /* ~20 GiB of weights */
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CAPACITY_EXCEEDED);
    assert_false(p->fits);
    assert_int_equal(p->n_args, 0);
    const char *argv[4];
    assert_int_equal(qr_placement_engine_args(p, 0, argv, 4), 0);
    assert_non_null(strstr(p->reason, "does not fit: needs "));
    assert_non_null(strstr(p->reason, "11.00 GiB usable")); /* 12 available - 1 reserve */
    assert_true(p->ram.assigned > p->ram.usable);
    /* the JSON says so too: unplaced classes, no args, the numbers */
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, o);
    assert_int_equal(qr_placement_plan_json(p, &m, doc, o), QR_OK);
    char *s = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(s, "\"decision\":\"capacity_exceeded\""));
    assert_non_null(strstr(s, "\"tier\":\"unplaced\""));
    assert_null(strstr(s, "\"tier\":\"ram\""));
    assert_non_null(strstr(s, "\"args\":[]"));
    assert_non_null(strstr(s, "\"requires_backend_capabilities\":[]"));
    free(s);
    yyjson_mut_doc_free(doc);
    free(p);
}

/* A GPU with little VRAM: unused when RAM fits; a layer split when preferred; and when RAM alone
 * does not fit, used only if acceleration is allowed. */
static void test_gpu_little_vram(void **state)
{
    (void) state;
    struct qr_placement_host h = host(32, 28, 8, 16);
    add_gpu(&h, 8);
    struct qr_placement_model small = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    struct qr_placement_plan *p = plan_of(&h, &small, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    free(p);

    r.prefer = QR_PLACEMENT_PREFER_HYBRID;
    p = plan_of(&h, &small, &r);
    assert_true(p->decision == QR_PLACEMENT_HYBRID || p->decision == QR_PLACEMENT_GPU);
    assert_true(p->vram.assigned > 0);
    assert_true(has_cap(p, "placement.hybrid") || has_cap(p, "placement.gpu"));
    assert_non_null(arg_value(p, "-ngl"));
    assert_true(arg_at(p, "--no-kv-offload") >= 0); /* cache.kv_offload not verified */
    assert_int_equal(p->kv_part.vram, 0);
    assert_true(has_line(p->warnings, p->n_warnings, "not verified by the ledger"));
    free(p);

    r.prefer = QR_PLACEMENT_PREFER_GPU; /* all of it fits 8 GiB: every layer and the output */
    p = plan_of(&h, &small, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_GPU);
    assert_int_equal(p->strategy, QR_PLACEMENT_FULL_OFFLOAD);
    assert_string_equal(arg_value(p, "-ngl"), "33");
    assert_true(has_cap(p, "placement.gpu"));
    assert_int_equal(p->cls[QR_SIZING_TOKEN_EMBD].vram, 0); /* the engine keeps it on the CPU */
    assert_int_equal(p->cls[QR_SIZING_FFN].vram, small.cls[QR_SIZING_FFN]);
    free(p);

    struct qr_placement_model big = dense(560); /* ~28 GiB: RAM alone does not fit */
    r.prefer = QR_PLACEMENT_PREFER_AUTO;
    r.allow_acceleration = false;
    p = plan_of(&h, &big, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CAPACITY_EXCEEDED);
    assert_true(has_line(p->reasons, p->n_reasons, "acceleration not allowed"));
    free(p);

    r.allow_acceleration = true;
    p = plan_of(&h, &big, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_HYBRID);
    assert_int_equal(p->strategy, QR_PLACEMENT_LAYER_SPLIT);
    assert_true(p->gpu_layers > 0 && p->gpu_layers < big.n_layers);
    assert_true(p->vram.assigned > 0 && p->ram.assigned > 0);
    char ngl[24];
    snprintf(ngl, sizeof ngl, "%" PRIu64, p->gpu_layers);
    assert_string_equal(arg_value(p, "-ngl"), ngl);
    assert_non_null(strstr(p->reason, "RAM alone does not fit"));
    free(p);

    r.prefer = QR_PLACEMENT_PREFER_CPU; /* a CPU preference is kept: refused, not split */
    p = plan_of(&h, &big, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CAPACITY_EXCEEDED);
    free(p);
}

/* An MoE model larger than VRAM on a host whose RAM alone is too small: every layer goes to the
 * GPU with the routed experts of the first layers kept in RAM (the fewest that fit), attention
 * entirely in VRAM. Preferring hybrid keeps every layer's experts in RAM. */
static void test_moe_larger_than_vram(void **state)
{
    (void) state;
    struct qr_placement_host h = host(24, 20, 8, 16);
    add_gpu(&h, 8);
    struct qr_placement_model m = moe();
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_HYBRID);
    assert_int_equal(p->strategy, QR_PLACEMENT_EXPERTS_IN_RAM);
    assert_int_equal(p->gpu_layers, m.n_layers + 1);
    assert_true(p->n_cpu_moe > 0 && p->n_cpu_moe < m.n_layers);
    assert_int_equal(p->cls[QR_SIZING_ATTN].vram, m.cls[QR_SIZING_ATTN]);
    assert_int_equal(p->cls[QR_SIZING_OUTPUT].vram, m.cls[QR_SIZING_OUTPUT]);
    assert_int_equal(p->cls[QR_SIZING_TOKEN_EMBD].ram, m.cls[QR_SIZING_TOKEN_EMBD]);
    assert_true(p->cls[QR_SIZING_EXPERTS].ram > 0);
    char n[24];
    snprintf(n, sizeof n, "%" PRIu64, p->n_cpu_moe);
    assert_string_equal(arg_value(p, "--n-cpu-moe"), n);
    assert_string_equal(arg_value(p, "-ngl"), "49");
    assert_true(has_cap(p, "placement.hybrid"));
    assert_true(has_cap(p, "moe.expert_offload"));
    assert_false(has_cap(p, "cache.kv_offload"));
    uint64_t ncmoe = p->n_cpu_moe;
    free(p);

    /* the fewest: one layer less in RAM does not fit VRAM (checked through the hybrid search
     * with less VRAM: the count only grows) */
    struct qr_placement_host h2 = h;
    h2.accel[0].vram_bytes -= 1 * GiB;
    p = plan_of(&h2, &m, &r);
    assert_true(p->n_cpu_moe > ncmoe);
    free(p);

    /* hybrid preferred: as many layers' experts in RAM as it holds (more than auto keeps) */
    r.prefer = QR_PLACEMENT_PREFER_HYBRID;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->strategy, QR_PLACEMENT_EXPERTS_IN_RAM);
    assert_true(p->n_cpu_moe > ncmoe && p->n_cpu_moe < m.n_layers);
    free(p);

    /* with RAM for everything, auto stays on the CPU and hybrid keeps every expert in RAM */
    struct qr_placement_host roomy = host(32, 28, 8, 16);
    add_gpu(&roomy, 8);
    r.prefer = QR_PLACEMENT_PREFER_AUTO;
    p = plan_of(&roomy, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    free(p);
    r.prefer = QR_PLACEMENT_PREFER_HYBRID;
    p = plan_of(&roomy, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_HYBRID);
    assert_int_equal(p->n_cpu_moe, m.n_layers);
    assert_int_equal(p->cls[QR_SIZING_EXPERTS].vram, 0);
    assert_int_equal(p->cls[QR_SIZING_ATTN].vram, m.cls[QR_SIZING_ATTN]);
    assert_non_null(strstr(p->reason, "split preferred"));
    free(p);

    /* without moe.expert_offload verified, experts move with their layers */
    r = req(QR_PLACEMENT_PREFER_AUTO, true);
    r.verified.expert_offload = false;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->strategy, QR_PLACEMENT_LAYER_SPLIT);
    assert_int_equal(arg_at(p, "--n-cpu-moe"), -1);
    assert_true(has_line(p->reasons, p->n_reasons, "moe.expert_offload not verified"));
    free(p);
}

/* KV in VRAM and quantized KV only where verified. */
static void test_kv_only_where_verified(void **state)
{
    (void) state;
    struct qr_placement_host h = host(24, 20, 8, 16);
    add_gpu(&h, 8);
    struct qr_placement_model m = moe();
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    r.kv_type = QR_PLACEMENT_KV_Q8_0;
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->kv_type, QR_PLACEMENT_KV_F16);
    assert_int_equal(p->kv, m.kv_bytes_f16);
    assert_int_equal(arg_at(p, "--cache-type-k"), -1);
    assert_true(has_line(p->warnings, p->n_warnings, "q8_0 asked for"));
    free(p);

    r.verified.kv_quant = true;
    r.verified.kv_offload = true;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->kv_type, QR_PLACEMENT_KV_Q8_0);
    assert_int_equal(p->kv, (m.kv_bytes_f16 * 107 + 199) / 200);
    assert_string_equal(arg_value(p, "--cache-type-k"), "q8_0");
    assert_string_equal(arg_value(p, "--cache-type-v"), "q8_0");
    assert_string_equal(arg_value(p, "--flash-attn"), "on");
    assert_true(p->kv_offload);
    assert_true(p->kv_part.vram > 0);
    assert_int_equal(arg_at(p, "--no-kv-offload"), -1);
    assert_true(has_cap(p, "cache.kv_offload"));
    free(p);

    /* llama.cpp refuses a block type whose block does not divide the head width: f16 instead */
    m.kv_head_dims[0] = 16;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->kv_type, QR_PLACEMENT_KV_F16);
    assert_int_equal(arg_at(p, "--cache-type-k"), -1);
    assert_true(has_line(p->warnings, p->n_warnings, "head width 16 is not a multiple"));
    free(p);
    m.kv_head_dims[0] = 0; /* unknown: not risked */
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->kv_type, QR_PLACEMENT_KV_F16);
    free(p);
    r.kv_type = QR_PLACEMENT_KV_BF16; /* no blocks: fine whatever the widths */
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->kv_type, QR_PLACEMENT_KV_BF16);
    assert_int_equal(arg_at(p, "--flash-attn"), -1);
    free(p);
}

/* Two NUMA nodes: threads and memory spread over both. */
static void test_two_numa_nodes(void **state)
{
    (void) state;
    struct qr_placement_host h = host(128, 120, 32, 64);
    h.n_numa = 2;
    h.numa[0] = (struct qr_placement_numa){.id = 0, .cpus = 32, .memory_bytes = 64 * GiB};
    h.numa[1] = (struct qr_placement_numa){.id = 1, .cpus = 32, .memory_bytes = 64 * GiB};
    struct qr_placement_model m = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_string_equal(p->numa, "distribute");
    assert_string_equal(arg_value(p, "--numa"), "distribute");
    assert_int_equal(p->threads, 32);
    assert_int_equal(p->numa_nodes, 2);
    assert_true(has_line(p->reasons, p->n_reasons, "2 NUMA nodes"));
    free(p);
}

/* NVMe only as an explicit cold tier: not without permission, not off NVMe, not when RAM fits;
 * hot state (KV, attention, dense) never goes there. */
static void test_nvme_cold_tier_only_when_allowed(void **state)
{
    (void) state;
    struct qr_placement_host h = host(16, 14, 8, 16);
    struct qr_placement_model m = moe(); /* ~22 GiB in RAM: does not fit 13 GiB */
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CAPACITY_EXCEEDED);
    assert_int_equal(p->nvme_cold, 0);
    free(p);

    r.allow_nvme_cold_tier = true; /* allowed, but the file is not on NVMe */
    snprintf(h.model_device, sizeof h.model_device, "sda1");
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CAPACITY_EXCEEDED);
    assert_true(has_line(p->warnings, p->n_warnings, "not on an NVMe device: sda1"));
    free(p);

    h.model_on_nvme = true;
    snprintf(h.model_device, sizeof h.model_device, "nvme0n1p2");
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    assert_int_equal(p->strategy, QR_PLACEMENT_CPU_NVME_COLD);
    assert_int_equal(p->cls[QR_SIZING_EXPERTS].nvme, m.cls[QR_SIZING_EXPERTS]);
    assert_int_equal(p->nvme_ram_ws, m.cls[QR_SIZING_EXPERTS] / 16); /* 8 of 128 experts */
    assert_int_equal(p->kv_part.nvme, 0);
    assert_int_equal(p->cls[QR_SIZING_ATTN].nvme, 0);
    assert_int_equal(p->cls[QR_SIZING_ATTN].ram, m.cls[QR_SIZING_ATTN]);
    assert_string_equal(arg_value(p, "--load-mode"), "mmap");
    assert_true(arg_at(p, "--no-repack") >= 0);
    assert_int_equal(arg_at(p, "--lazy-mode"), -1); /* no per-layer embeddings */
    free(p);

    /* RAM fits: the cold tier stays unused even though allowed */
    struct qr_placement_host big = host(64, 60, 8, 16);
    big.model_on_nvme = true;
    p = plan_of(&big, &m, &r);
    assert_int_equal(p->strategy, QR_PLACEMENT_CPU);
    assert_int_equal(p->nvme_cold, 0);
    free(p);
}

/* Threads: a cgroup quota below the physical cores wins; a given (calibrated) count is used,
 * capped at the CPUs allowed. */
static void test_threads(void **state)
{
    (void) state;
    struct qr_placement_host h = host(64, 60, 8, 4); /* quota: 4 effective CPUs */
    struct qr_placement_model m = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->threads, 4);
    assert_string_equal(arg_value(p, "-t"), "4");
    free(p);
    h.logical_cpus = 16;
    r.threads = 6;
    p = plan_of(&h, &m, &r);
    assert_string_equal(arg_value(p, "-t"), "6");
    free(p);
    r.threads = 64;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->threads, 16);
    assert_true(has_line(p->warnings, p->n_warnings, "above the 16 CPUs"));
    free(p);
}

/* A KV cache that cannot be sized is refused, never guessed; a non-causal model has none. */
static void test_unsized_kv_refused(void **state)
{
    (void) state;
    struct qr_placement_host h = host(64, 60, 8, 16);
    struct qr_placement_model m = dense(100);
    m.kv_known = false;
    m.kv_unknown = "no_head_dim";
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_UNSIZED);
    assert_false(p->fits);
    assert_non_null(strstr(p->reason, "no_head_dim"));
    free(p);
    m.no_cache = true;
    p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    assert_int_equal(p->kv, 0);
    free(p);
}

/* Cgroup memory.max below MemAvailable caps RAM; a given reserve replaces the default. */
static void test_ram_limits(void **state)
{
    (void) state;
    struct qr_placement_host h = host(64, 60, 8, 16);
    h.ram_limit = 8 * GiB;
    struct qr_placement_model m = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, false);
    r.reserve_ram_bytes = 512 * MiB;
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->ram.available, 8 * GiB);
    assert_int_equal(p->ram.usable, 8 * GiB - 512 * MiB);
    assert_true(has_line(p->reasons, p->n_reasons, "cgroup memory.max"));
    free(p);
}

/* Same inputs, same JSON; malformed inputs are errors, not plans. */
static void test_deterministic_and_checked(void **state)
{
    (void) state;
    struct qr_placement_host h = host(24, 20, 8, 16);
    add_gpu(&h, 8);
    add_gpu(&h, 8);
    struct qr_placement_model m = moe();
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_AUTO, true);
    char *text[2];
    for (int i = 0; i < 2; i++) {
        struct qr_placement_plan *p = plan_of(&h, &m, &r);
        assert_int_equal(p->vram_devices, 2);
        yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
        yyjson_mut_val *o = yyjson_mut_obj(doc);
        yyjson_mut_doc_set_root(doc, o);
        assert_int_equal(qr_placement_plan_json(p, &m, doc, o), QR_OK);
        text[i] = yyjson_mut_write(doc, 0, NULL);
        yyjson_mut_doc_free(doc);
        free(p);
    }
    assert_string_equal(text[0], text[1]);
    assert_non_null(strstr(text[0], "\"schema_version\":\"" QR_PLACEMENT_SCHEMA "\""));
    free(text[0]);
    free(text[1]);

    struct qr_placement_plan *p = malloc(sizeof *p);
    struct qr_diag d = {{0}};
    m.cls[QR_SIZING_FFN] = UINT64_MAX;
    assert_int_equal(qr_placement_plan(&h, &m, &r, p, &d), QR_ERR_INVALID);
    m = moe();
    r.kv_type = (enum qr_placement_kv_type) 99;
    assert_int_equal(qr_placement_plan(&h, &m, &r, p, &d), QR_ERR_INVALID);
    free(p);
}

/* Names round-trip. */
static void test_names(void **state)
{
    (void) state;
    for (unsigned t = 0; t < QR_PLACEMENT_KV_TYPE_COUNT; t++) {
        enum qr_placement_kv_type x;
        assert_true(qr_placement_kv_type_parse(qr_placement_kv_type_name(t), &x));
        assert_int_equal(x, t);
        assert_true(qr_placement_kv_type_x100(t) > 0);
    }
    enum qr_placement_prefer pr;
    assert_true(qr_placement_prefer_parse("hybrid", &pr));
    assert_int_equal(pr, QR_PLACEMENT_PREFER_HYBRID);
    assert_false(qr_placement_prefer_parse("tpu", &pr));
    assert_string_equal(qr_placement_decision_name(QR_PLACEMENT_CAPACITY_EXCEEDED),
                        "capacity_exceeded");
    assert_string_equal(qr_placement_strategy_name(QR_PLACEMENT_EXPERTS_IN_RAM), "experts_in_ram");
}

/* The discovered host as planner input: allowed physical cores and effective CPUs win over the
 * host's own counts, NUMA CPU lists are counted, accelerators keep their (maybe unknown) VRAM. */
static void test_host_from_profile(void **state)
{
    (void) state;
    struct qr_host_profile *hp = calloc(1, sizeof *hp);
    struct qr_host_limits *hl = calloc(1, sizeof *hl);
    assert_true(hp && hl);
    hp->physical_cores = 16;
    hp->logical_cores = 32;
    hp->memory_total = 64 * GiB;
    hp->memory_available = 50 * GiB;
    hp->n_numa = 2;
    hp->numa[0] =
        (struct qr_host_numa_node){.id = 0, .cpu_list = "0-7,16-23", .memory_bytes = 32 * GiB};
    hp->numa[1] =
        (struct qr_host_numa_node){.id = 1, .cpu_list = "8-15,24-31", .memory_bytes = 32 * GiB};
    hp->n_accel = 1;
    snprintf(hp->accel[0].vendor, sizeof hp->accel[0].vendor, "NVIDIA");
    snprintf(hp->accel[0].device, sizeof hp->accel[0].device, "card1");
    hl->physical_cores_allowed = 4;
    hl->effective_logical_cpus = 8;
    hl->memory_max_bytes = 16 * GiB;
    struct qr_placement_host h;
    qr_placement_host_from_profile(hp, hl, &h);
    assert_int_equal(h.physical_cores, 4);
    assert_int_equal(h.logical_cpus, 8);
    assert_int_equal(h.ram_available, 50 * GiB);
    assert_int_equal(h.ram_limit, 16 * GiB);
    assert_int_equal(h.n_numa, 2);
    assert_int_equal(h.numa[1].cpus, 16);
    assert_int_equal(h.n_accel, 1);
    assert_string_equal(h.accel[0].name, "NVIDIA card1");
    assert_int_equal(h.accel[0].vram_bytes, 0);
    /* planned: the unknown-VRAM GPU is not used, the cgroup limit caps RAM, threads 4 */
    struct qr_placement_model m = dense(100);
    struct qr_placement_request r = req(QR_PLACEMENT_PREFER_HYBRID, true);
    struct qr_placement_plan *p = plan_of(&h, &m, &r);
    assert_int_equal(p->decision, QR_PLACEMENT_CPU_ONLY);
    assert_true(has_line(p->warnings, p->n_warnings, "'NVIDIA card1' has no known memory"));
    assert_int_equal(p->ram.available, 16 * GiB);
    assert_int_equal(p->threads, 4);
    assert_string_equal(arg_value(p, "--numa"), "distribute");
    free(p);
    free(hp);
    free(hl);
}

/* The builtin ledger verifies moe.expert_offload for llama.cpp and nothing else the planner asks
 * about (placement.hybrid, cache.kv_offload are not tested there). */
static void test_verified_from_builtin_ledger(void **state)
{
    (void) state;
    struct qr_ledger *l = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_ledger_load_builtin(&d, &l), QR_OK);
    struct qr_placement_verified v;
    qr_placement_verified_from_ledger(l, &v);
    assert_true(v.expert_offload);
    assert_false(v.hybrid);
    assert_false(v.kv_offload);
    assert_false(v.kv_quant);
    qr_ledger_free(l);
    qr_placement_verified_from_ledger(NULL, &v);
    assert_false(v.expert_offload);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(text, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* The llama.cpp backend discovers the host once and reads the free memory again per load. */
static void test_host_refresh_memory(void **state)
{
    (void) state;
    char path[] = "/tmp/qr-meminfo-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct qr_placement_host h = {.physical_cores = 8, .logical_cpus = 16, .n_numa = 1};
    h.ram_total = 64 * QR_PLACEMENT_GIB;
    h.ram_available = 60 * QR_PLACEMENT_GIB;
    h.ram_limit = 32 * QR_PLACEMENT_GIB;
    write_text(path, "MemTotal:       65536000 kB\nMemFree:         1000 kB\n"
                     "MemAvailable:    2097152 kB\nBuffers:  12 kB\n");
    assert_true(qr_placement_host_refresh_memory(&h, path));
    assert_int_equal(h.ram_total, 65536000ull * 1024u);
    assert_int_equal(h.ram_available, 2 * QR_PLACEMENT_GIB);
    /* the rest of the host is kept */
    assert_int_equal(h.ram_limit, 32 * QR_PLACEMENT_GIB);
    assert_int_equal(h.physical_cores, 8);
    assert_int_equal(h.logical_cpus, 16);
    assert_int_equal(h.n_numa, 1);
    /* no MemAvailable line (old kernels): false, the old value stays */
    write_text(path, "MemTotal:       1024 kB\n");
    assert_false(qr_placement_host_refresh_memory(&h, path));
    assert_int_equal(h.ram_available, 2 * QR_PLACEMENT_GIB);
    assert_int_equal(h.ram_total, 1024u * 1024u);
    /* junk and a missing file change nothing */
    write_text(path, "MemAvailable: lots\n");
    assert_false(qr_placement_host_refresh_memory(&h, path));
    assert_int_equal(h.ram_available, 2 * QR_PLACEMENT_GIB);
    unlink(path);
    assert_false(qr_placement_host_refresh_memory(&h, path));
    assert_int_equal(h.ram_available, 2 * QR_PLACEMENT_GIB);
    /* the real one has it on Linux */
    struct qr_placement_host real = {0};
    assert_true(qr_placement_host_refresh_memory(&real, NULL));
    assert_true(real.ram_total > 0 && real.ram_available > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_only_64g_8_cores),
        cmocka_unit_test(test_cpu_first_even_with_gpu),
        cmocka_unit_test(test_small_ram_refused_with_numbers),
        cmocka_unit_test(test_gpu_little_vram),
        cmocka_unit_test(test_moe_larger_than_vram),
        cmocka_unit_test(test_kv_only_where_verified),
        cmocka_unit_test(test_two_numa_nodes),
        cmocka_unit_test(test_nvme_cold_tier_only_when_allowed),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_unsized_kv_refused),
        cmocka_unit_test(test_ram_limits),
        cmocka_unit_test(test_deterministic_and_checked),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_host_from_profile),
        cmocka_unit_test(test_verified_from_builtin_ledger),
        cmocka_unit_test(test_host_refresh_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
