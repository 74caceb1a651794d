/* Memory sizing over files built with the writer and derived with the architecture contract:
 * exact KV bytes for a dense GQA file (f16, f32, the q8_0 approximation), a sliding-window
 * pattern with the window below and above n_ctx, shared-KV layers, weight classes of a MoE file,
 * head dims read from attn_k/attn_v widths, every reason for an unknown KV part (weights still
 * given), and the overflow guards. Architecture names are made up: no rule may depend on them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/sizing.h"

struct file {
    uint8_t *buf;
    size_t len;
    struct qr_gguf *g;
    struct qr_arch a;
};

static void derive(struct qr_gguf_writer *w, struct file *f)
{
    struct qr_diag d = {{0}};
    enum qr_err err = qr_gguf_writer_finish(w, &d, &f->buf, &f->len);
    if (err)
        fail_msg("finish: %s %s", qr_err_str(err), d.msg);
    qr_gguf_writer_free(w);
    if ((err = qr_gguf_open_mem(f->buf, f->len, "sizing.gguf", NULL, &d, &f->g)))
        fail_msg("open: %s %s", qr_err_str(err), d.msg);
    if ((err = qr_gguf_arch_derive(f->g, &f->a, &d)))
        fail_msg("derive: %s %s", qr_err_str(err), d.msg);
}

static void done(struct file *f)
{
    qr_gguf_close(f->g);
    free(f->buf);
}

static void tensor(struct qr_gguf_writer *w, const char *name, uint32_t type, uint32_t n,
                   uint64_t d0, uint64_t d1, uint64_t d2)
{
    uint64_t dims[3] = {d0, d1, d2};
    assert_int_equal(qr_gguf_writer_add_tensor(w, name, type, n, dims, NULL, 0), QR_OK);
}

/* Size f, expecting QR_OK. */
static struct qr_sizing size(struct file *f, uint64_t n_ctx, uint32_t x100)
{
    struct qr_sizing s;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_gguf_size(f->g, &f->a, n_ctx, x100, &s, &d);
    if (err)
        fail_msg("size: %s %s", qr_err_str(err), d.msg);
    return s;
}

/* A file of arch "zeta" with n layers, 2 KV heads and head dims 4/4 unless told otherwise. */
static struct qr_gguf_writer *zeta(uint32_t n_layers, bool head_dims)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", n_layers);
    qr_gguf_writer_add_u32(w, "zeta.embedding_length", 8);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count", 4);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count_kv", 2);
    if (head_dims) {
        qr_gguf_writer_add_u32(w, "zeta.attention.key_length", 4);
        qr_gguf_writer_add_u32(w, "zeta.attention.value_length", 4);
    }
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 5, 1);
    return w;
}

static void test_dense_gqa(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = zeta(2, true);
    tensor(w, "output_norm.weight", QR_GGML_F32, 1, 8, 1, 1);
    tensor(w, "output.weight", QR_GGML_F16, 2, 8, 5, 1);
    for (int il = 0; il < 2; il++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_q.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 16, 1);
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 8, 1);
        snprintf(n, sizeof n, "blk.%d.ffn_up.weight", il);
        tensor(w, n, QR_GGML_F32, 2, 8, 16, 1);
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", il);
        tensor(w, n, QR_GGML_F32, 1, 8, 1, 1);
    }
    struct file f;
    derive(w, &f);

    /* Per layer 2 heads * (4 + 4) = 16 elements per token: 32 bytes in f16. */
    struct qr_sizing s = size(&f, 100, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_false(s.kv_dims_from_tensors);
    assert_int_equal(s.kv_layers, 2);
    assert_int_equal(s.kv_layers_swa, 0);
    assert_int_equal(s.kv_layers_shared, 0);
    assert_int_equal(s.kv_cells_swa, 0);
    assert_int_equal(s.kv_bytes_per_token, 64);
    assert_int_equal(s.kv_bytes_per_token_full, 64);
    assert_int_equal(s.kv_bytes, 6400);
    s = size(&f, 100, 400); /* f32 */
    assert_int_equal(s.kv_bytes_per_token, 128);
    assert_int_equal(s.kv_bytes, 12800);
    s = size(&f, 100, 106); /* 32 elements * 1.06 = 33.92 bytes per token, rounded up */
    assert_int_equal(s.kv_bytes_per_token, 34);
    assert_int_equal(s.kv_bytes, 3392);

    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].bytes, 160);
    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].n_tensors, 1);
    assert_int_equal(s.cls[QR_SIZING_OUTPUT].bytes, 80);
    assert_int_equal(s.cls[QR_SIZING_ATTN].bytes, 2 * (256 + 128));
    assert_int_equal(s.cls[QR_SIZING_ATTN].n_tensors, 4);
    assert_int_equal(s.cls[QR_SIZING_FFN].bytes, 2 * 512);
    assert_int_equal(s.cls[QR_SIZING_NORM].bytes, 3 * 32);
    assert_int_equal(s.cls[QR_SIZING_NORM].n_tensors, 3);
    assert_int_equal(s.cls[QR_SIZING_EXPERTS].n_tensors, 0);
    assert_int_equal(s.n_tensors, 11);
    assert_int_equal(s.weight_bytes, qr_gguf_data_bytes(f.g));
    done(&f);
}

/* 6 layers [T,T,T,F,T,F], window 64; full layers head dim 8, sliding layers 4 (both K and V). */
static struct qr_gguf_writer *swa_file(uint32_t shared)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("eta"));
    qr_gguf_writer_add_u32(w, "eta.block_count", 6);
    qr_gguf_writer_add_u32(w, "eta.attention.head_count", 4);
    qr_gguf_writer_add_u32(w, "eta.attention.head_count_kv", 2);
    qr_gguf_writer_add_u32(w, "eta.attention.key_length", 8);
    qr_gguf_writer_add_u32(w, "eta.attention.value_length", 8);
    qr_gguf_writer_add_u32(w, "eta.attention.key_length_swa", 4);
    qr_gguf_writer_add_u32(w, "eta.attention.value_length_swa", 4);
    qr_gguf_writer_add_u32(w, "eta.attention.sliding_window", 64);
    const uint8_t pat[6] = {1, 1, 1, 0, 1, 0};
    qr_gguf_writer_add_arr(w, "eta.attention.sliding_window_pattern", QR_GGUF_BOOL, pat, 6);
    if (shared)
        qr_gguf_writer_add_u32(w, "eta.attention.shared_kv_layers", shared);
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 5, 1);
    return w;
}

static void test_swa_window(void **state)
{
    (void) state;
    struct file f;
    derive(swa_file(0), &f);
    /* Sliding layer: 2 * (4 + 4) = 16 elements, 32 bytes f16; full layer: 32 elements, 64. */
    struct qr_sizing s = size(&f, 32, 200); /* window above n_ctx: no cap */
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(s.kv_layers, 6);
    assert_int_equal(s.kv_layers_swa, 4);
    assert_int_equal(s.kv_cells_swa, 32);
    assert_int_equal(s.kv_bytes_per_token, 4 * 32 + 2 * 64);
    assert_int_equal(s.kv_bytes_per_token_full, 2 * 64);
    assert_int_equal(s.kv_bytes, 256 * 32);
    s = size(&f, 64, 200); /* exactly the window */
    assert_int_equal(s.kv_bytes, 256 * 64);
    s = size(&f, 1000, 200); /* window below n_ctx: sliding layers hold 64 cells */
    assert_int_equal(s.kv_cells_swa, 64);
    assert_int_equal(s.kv_bytes, 4 * 32 * 64 + 2 * 64 * 1000);
    done(&f);
}

static void test_shared_kv(void **state)
{
    (void) state;
    struct file f;
    derive(swa_file(2), &f);
    /* The last 2 layers reuse earlier caches: layers 0..3 [T,T,T,F] own one. */
    struct qr_sizing s = size(&f, 1000, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(s.kv_layers, 4);
    assert_int_equal(s.kv_layers_swa, 3);
    assert_int_equal(s.kv_layers_shared, 2);
    assert_int_equal(s.kv_bytes_per_token, 3 * 32 + 64);
    assert_int_equal(s.kv_bytes_per_token_full, 64);
    assert_int_equal(s.kv_bytes, 3 * 32 * 64 + 64 * 1000);
    done(&f);

    derive(swa_file(6), &f); /* every layer shared: nothing owns a cache */
    s = size(&f, 1000, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_BAD_SHARED);
    assert_int_equal(s.kv_bytes, 0);
    assert_int_equal(s.kv_layers_shared, 0);
    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].bytes, 160); /* weights still given */
    done(&f);
}

static void test_moe_classes(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = zeta(1, true);
    qr_gguf_writer_add_u32(w, "zeta.expert_count", 4);
    qr_gguf_writer_add_u32(w, "zeta.expert_used_count", 2);
    tensor(w, "output.weight", QR_GGML_F32, 2, 8, 5, 1);
    tensor(w, "rope_freqs.weight", QR_GGML_F32, 1, 2, 1, 1);
    tensor(w, "per_layer_token_embd.weight", QR_GGML_F16, 2, 8, 5, 1);
    tensor(w, "per_layer_proj_norm.weight", QR_GGML_F32, 1, 8, 1, 1);
    tensor(w, "blk.0.attn_q.weight", QR_GGML_F16, 2, 8, 16, 1);
    tensor(w, "blk.0.attn_k_norm.weight", QR_GGML_F32, 1, 4, 1, 1);
    tensor(w, "blk.0.ffn_gate_inp.weight", QR_GGML_F32, 2, 8, 4, 1);
    tensor(w, "blk.0.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 16, 4);
    tensor(w, "blk.0.ffn_down_exps.weight", QR_GGML_F16, 3, 16, 8, 4);
    tensor(w, "blk.0.ffn_up_shexp.weight", QR_GGML_F16, 2, 8, 16, 1);
    tensor(w, "blk.0.ffn_down_shexp.weight", QR_GGML_F16, 2, 16, 8, 1);
    struct file f;
    derive(w, &f);
    assert_int_equal(f.a.ffn, QR_ARCH_FFN_MOE);
    struct qr_sizing s = size(&f, 16, 200);
    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].bytes, 160);
    assert_int_equal(s.cls[QR_SIZING_OUTPUT].bytes, 160);
    assert_int_equal(s.cls[QR_SIZING_OTHER].bytes, 8);
    assert_int_equal(s.cls[QR_SIZING_PER_LAYER].bytes, 80 + 32);
    assert_int_equal(s.cls[QR_SIZING_PER_LAYER].n_tensors, 2);
    assert_int_equal(s.cls[QR_SIZING_ATTN].bytes, 256);
    assert_int_equal(s.cls[QR_SIZING_NORM].bytes, 16);
    assert_int_equal(s.cls[QR_SIZING_FFN].bytes, 128); /* the router */
    assert_int_equal(s.cls[QR_SIZING_EXPERTS].bytes, 2 * 8 * 16 * 4 * 2);
    assert_int_equal(s.cls[QR_SIZING_EXPERTS].n_tensors, 2);
    assert_int_equal(s.cls[QR_SIZING_SHARED_EXPERTS].bytes, 2 * 8 * 16 * 2);
    assert_int_equal(s.cls[QR_SIZING_SHARED_EXPERTS].n_tensors, 2);
    uint64_t sum = 0;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        sum += s.cls[c].bytes;
    assert_int_equal(sum, s.weight_bytes);
    assert_int_equal(s.weight_bytes, qr_gguf_data_bytes(f.g));
    assert_int_equal(s.n_tensors, 12);
    done(&f);

    assert_int_equal(qr_sizing_classify(QR_SLICE_LIT("blk.1.ffn_gate_up_exps.weight")),
                     QR_SIZING_EXPERTS);
    assert_int_equal(qr_sizing_classify(QR_SLICE_LIT("token_embd_norm.weight")), QR_SIZING_NORM);
    assert_int_equal(qr_sizing_classify(QR_SLICE_LIT("output.bias")), QR_SIZING_OUTPUT);
    assert_int_equal(qr_sizing_classify(QR_SLICE_LIT("cls.output.weight")), QR_SIZING_OTHER);
    assert_string_equal(qr_sizing_class_name(QR_SIZING_SHARED_EXPERTS), "shared_experts");
    assert_null(qr_sizing_class_name(QR_SIZING_CLASS_COUNT));
    assert_string_equal(qr_sizing_kv_name(QR_SIZING_KV_OVERFLOW), "overflow");
    assert_null(qr_sizing_kv_name(99));
}

/* Head dims absent from the keys are read from attn_k/attn_v widths, else KV is unknown. */
static void test_head_dims(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = zeta(2, false);
    for (int il = 0; il < 2; il++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 2 * 4, 1);
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 2 * 6, 1);
    }
    struct file f;
    derive(w, &f);
    struct qr_sizing s = size(&f, 10, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_true(s.kv_dims_from_tensors);
    assert_int_equal(s.kv_bytes_per_token, 2 * 2 * (4 + 6) * 2);
    assert_int_equal(s.kv_bytes, 80 * 10);
    done(&f);

    w = zeta(2, false); /* no key_length, no attn_k: unknown, never n_embd / n_head */
    derive(w, &f);
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_size(f.g, &f.a, 10, 200, &s, &d), QR_OK);
    assert_int_equal(s.kv, QR_SIZING_KV_NO_HEAD_DIM);
    assert_int_equal(s.kv_bytes, 0);
    assert_int_equal(s.kv_bytes_per_token, 0);
    assert_int_equal(s.kv_layers, 0);
    assert_string_equal(d.msg, "kv cache unknown: layer 0: no_head_dim");
    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].bytes, 160);
    done(&f);
}

/* Each other reason for an unknown KV part. */
static void test_unknown(void **state)
{
    (void) state;
    struct file f;
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 5, 1);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_NO_LAYERS);
    done(&f);

    w = qr_gguf_writer_new(); /* layers but no head_count_kv */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", 2);
    qr_gguf_writer_add_u32(w, "zeta.attention.key_length", 4);
    qr_gguf_writer_add_u32(w, "zeta.attention.value_length", 4);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_NO_HEADS);
    done(&f);

    w = zeta(2, true); /* a window without a per-layer pattern */
    qr_gguf_writer_add_u32(w, "zeta.attention.sliding_window", 64);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_NO_PATTERN);
    done(&f);

    w = zeta(2, true); /* a pattern of the wrong length */
    const uint8_t pat3[3] = {1, 0, 1};
    qr_gguf_writer_add_arr(w, "zeta.attention.sliding_window_pattern", QR_GGUF_BOOL, pat3, 3);
    qr_gguf_writer_add_u32(w, "zeta.attention.sliding_window", 64);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_NO_PATTERN);
    done(&f);

    w = zeta(2, true); /* sliding layers without a window */
    const uint8_t pat2[2] = {1, 0};
    qr_gguf_writer_add_arr(w, "zeta.attention.sliding_window_pattern", QR_GGUF_BOOL, pat2, 2);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_NO_WINDOW);
    done(&f);

    w = zeta(2, true); /* a pattern with no sliding layer needs no window */
    const uint8_t none[2] = {0, 0};
    qr_gguf_writer_add_arr(w, "zeta.attention.sliding_window_pattern", QR_GGUF_BOOL, none, 2);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv_bytes, 64 * 10);
    done(&f);

    w = zeta(2, true); /* MLA with one of the two _mla keys: which layout is ambiguous */
    qr_gguf_writer_add_u32(w, "zeta.attention.kv_lora_rank", 32);
    qr_gguf_writer_add_u32(w, "zeta.attention.key_length_mla", 4);
    derive(w, &f);
    assert_int_equal(size(&f, 10, 200).kv, QR_SIZING_KV_MLA);
    done(&f);
}

static void test_per_layer_heads(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("theta"));
    qr_gguf_writer_add_u32(w, "theta.block_count", 4);
    qr_gguf_writer_add_u32(w, "theta.attention.key_length", 4);
    qr_gguf_writer_add_u32(w, "theta.attention.value_length", 4);
    const uint32_t kvh[4] = {2, 0, 4, 2}; /* 0: a layer without attention cache */
    qr_gguf_writer_add_arr(w, "theta.attention.head_count_kv", QR_GGUF_U32, kvh, 4);
    struct file f;
    derive(w, &f);
    struct qr_sizing s = size(&f, 10, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(s.kv_layers, 3);
    assert_int_equal(s.kv_bytes_per_token, (2 + 4 + 2) * 8 * 2);
    assert_int_equal(s.kv_bytes, 128 * 10);
    done(&f);
}

static void test_overflow(void **state)
{
    (void) state;
    struct file f;
    struct qr_sizing s;
    struct qr_diag d = {{0}};
    derive(zeta(2, true), &f);
    assert_int_equal(qr_gguf_size(f.g, &f.a, 0, 200, &s, &d), QR_ERR_INVALID);
    assert_int_equal(qr_gguf_size(f.g, &f.a, 10, 0, &s, &d), QR_ERR_INVALID);
    /* 64 bytes per token of cache times 2^60 cells does not fit 64 bits. */
    assert_int_equal(qr_gguf_size(f.g, &f.a, UINT64_C(1) << 60, 200, &s, &d), QR_ERR_TOO_LARGE);
    assert_int_equal(s.kv, QR_SIZING_KV_OVERFLOW);
    assert_int_equal(s.kv_bytes, 0);
    assert_int_equal(s.kv_layers, 0);
    assert_int_equal(s.cls[QR_SIZING_TOKEN_EMBD].bytes, 160);
    assert_non_null(strstr(d.msg, "overflows 64 bits"));
    /* The largest n_ctx that fits: 6400 hundredths per token. */
    uint64_t max = UINT64_MAX / 6400;
    assert_int_equal(qr_gguf_size(f.g, &f.a, max, 200, &s, &d), QR_OK);
    assert_true(s.kv_bytes == max * 64);
    done(&f);

    struct qr_gguf_writer *w = qr_gguf_writer_new(); /* head dims that overflow on their own */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", 1);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count_kv", 2);
    qr_gguf_writer_add_u64(w, "zeta.attention.key_length", UINT64_MAX);
    qr_gguf_writer_add_u64(w, "zeta.attention.value_length", 1);
    derive(w, &f);
    assert_int_equal(qr_gguf_size(f.g, &f.a, 1, 200, &s, &d), QR_ERR_TOO_LARGE);
    assert_int_equal(s.kv, QR_SIZING_KV_OVERFLOW);
    done(&f);

    w = qr_gguf_writer_new(); /* per-token bytes that overflow only with the type factor */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", 1);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count_kv", 1);
    qr_gguf_writer_add_u64(w, "zeta.attention.key_length", UINT64_C(1) << 62);
    qr_gguf_writer_add_u64(w, "zeta.attention.value_length", 0);
    derive(w, &f);
    assert_int_equal(qr_gguf_size(f.g, &f.a, 1, 200, &s, &d), QR_ERR_TOO_LARGE);
    done(&f);
}

/* MLA (kv_lora_rank stated). Non-absorbed layout (no _mla keys): per-head K and V like any file,
 * 2 layers * 2 heads * (4 + 4) * 2 bytes = 64 per token (llama-server: deepseek2 fixture, K 3.00
 * + V 2.00 MiB = 4 heads * (24 + 16) * 2 B * 2 layers * 8192 cells). Absorbed layout (both _mla
 * keys): the latent is K only, 2 layers * 2 heads * 4 * 2 bytes = 32 per token (llama-server:
 * key_length 40, head_count_kv 1, K 1.25 MiB and V 0.00 MiB at 8192 cells). */
static void test_mla(void **state)
{
    (void) state;
    struct file f;
    struct qr_gguf_writer *w = zeta(2, true);
    qr_gguf_writer_add_u32(w, "zeta.attention.kv_lora_rank", 32);
    derive(w, &f);
    struct qr_sizing s = size(&f, 10, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_false(s.kv_mla_absorbed);
    assert_int_equal(s.kv_bytes_per_token, 64);
    assert_int_equal(s.kv_bytes, 640);
    done(&f);

    w = zeta(2, true);
    qr_gguf_writer_add_u32(w, "zeta.attention.kv_lora_rank", 32);
    qr_gguf_writer_add_u32(w, "zeta.attention.key_length_mla", 24);
    qr_gguf_writer_add_u32(w, "zeta.attention.value_length_mla", 16);
    derive(w, &f);
    s = size(&f, 10, 200);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_true(s.kv_mla_absorbed);
    assert_int_equal(s.kv_bytes_per_token, 32);
    assert_int_equal(s.kv_bytes, 320);
    done(&f);
}

/* Engine parameters: n_seq 1, not unified, llama-server's batch sizes, f16, flash attention. */
static struct qr_sizing_params one_seq(uint64_t n_ctx)
{
    struct qr_sizing_params p;
    qr_sizing_params_init(&p, n_ctx);
    p.n_seq = 1;
    p.kv_unified = false;
    return p;
}

static struct qr_sizing engine(struct file *f, const struct qr_sizing_params *p)
{
    struct qr_sizing s;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_gguf_size_engine(f->g, &f->a, p, &s, &d);
    if (err)
        fail_msg("size_engine: %s %s", qr_err_str(err), d.msg);
    return s;
}

static void test_engine_defaults(void **state)
{
    (void) state;
    struct qr_sizing_params p;
    qr_sizing_params_init(&p, 8192); /* llama-server with -c 8192 and nothing else */
    assert_int_equal(p.n_ctx, 8192);
    assert_int_equal(p.n_seq, 4); /* -np auto: 4 slots, unified KV */
    assert_true(p.kv_unified);
    assert_int_equal(p.n_batch, 2048);
    assert_int_equal(p.n_ubatch, 512);
    assert_int_equal(p.kv_type_bytes_x100, 200);
    assert_true(p.flash_attn);
    assert_false(p.non_causal);
}

/* The llama-server cells of swa_file: full layers (2) 64 bytes per cell, sliding (4) 32 bytes
 * (4 * 32 = 128 per cell over the SWA cache, 2 * 64 = 128 over the full one), window 64. */
static void test_engine_swa(void **state)
{
    (void) state;
    struct file f;
    derive(swa_file(0), &f);
    struct qr_sizing_params p = one_seq(1000);
    /* cells pad256(1000) = 1024; SWA min(1024, pad256(64 + 512) = 768) = 768 */
    struct qr_sizing s = engine(&f, &p);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(s.kv_bytes, 4 * 32 * 64 + 2 * 64 * 1000); /* the window model */
    assert_int_equal(s.eng.n_ubatch, 512);
    assert_int_equal(s.eng.streams, 1);
    assert_int_equal(s.eng.cells, 1024);
    assert_int_equal(s.eng.cells_swa, 768);
    assert_int_equal(s.eng.kv_bytes_full, 128 * 1024);
    assert_int_equal(s.eng.kv_bytes_swa, 128 * 768);
    assert_int_equal(s.eng.kv_bytes, 128 * 1024 + 128 * 768);

    /* Unified, 8 sequences at 8192: SWA pad256(64 * 8 + 512) = 1024 (one stream). */
    p = one_seq(8192);
    p.n_seq = 8;
    p.kv_unified = true;
    s = engine(&f, &p);
    assert_int_equal(s.eng.streams, 1);
    assert_int_equal(s.eng.cells, 8192);
    assert_int_equal(s.eng.cells_swa, 1024);
    assert_int_equal(s.eng.kv_bytes, 128 * 8192 + 128 * 1024);

    /* 3 streams (not unified) at 1000: ceil(1000 / 3) = 334 -> 512 cells each; SWA min(512,
     * pad256(64 + 512)) = 512; every stream counted: 3 * 128 * 512 per cache. */
    p = one_seq(1000);
    p.n_seq = 3;
    s = engine(&f, &p);
    assert_int_equal(s.eng.streams, 3);
    assert_int_equal(s.eng.cells, 512);
    assert_int_equal(s.eng.cells_swa, 512);
    assert_int_equal(s.eng.kv_bytes_full, 3 * 128 * 512);
    assert_int_equal(s.eng.kv_bytes_swa, 3 * 128 * 512);

    /* n_batch 64 caps the micro-batch: SWA pad256(64 + 64) = 256; cells pad256(300) = 512. */
    p = one_seq(300);
    p.n_batch = 64;
    s = engine(&f, &p);
    assert_int_equal(s.eng.n_ubatch, 64);
    assert_int_equal(s.eng.cells, 512);
    assert_int_equal(s.eng.cells_swa, 256);

    /* n_ctx 100 caps it too: u = 100, cells 256, SWA min(256, pad256(164)) = 256. */
    p = one_seq(100);
    s = engine(&f, &p);
    assert_int_equal(s.eng.n_ubatch, 100);
    assert_int_equal(s.eng.cells, 256);
    assert_int_equal(s.eng.cells_swa, 256);

    /* Without flash attention V rows of differing widths (full 2 * 8, sliding 2 * 4) are padded
     * to the widest, 16: a sliding layer holds 2 * 4 K + 16 V = 24 elements, 48 bytes, per cell
     * (4 * 48 = 192 per cell of the SWA cache); full layers are unchanged (llama-server:
     * "padding V cache to 96" for a gemma4 file with V widths 96 and 32). */
    p = one_seq(1000);
    p.flash_attn = false;
    s = engine(&f, &p);
    assert_int_equal(s.eng.kv_bytes_full, 128 * 1024);
    assert_int_equal(s.eng.kv_bytes_swa, 192 * 768);
    assert_int_equal(s.kv_bytes, 4 * 32 * 64 + 2 * 64 * 1000); /* the window model: no padding */
    done(&f);
}

/* A dense file without sliding layers: only the padding; the compute estimate's terms. */
static void test_engine_compute(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = zeta(2, true);
    for (int il = 0; il < 2; il++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_q.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 16, 1);
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 8, 8, 1);
        snprintf(n, sizeof n, "blk.%d.ffn_up.weight", il);
        tensor(w, n, QR_GGML_F32, 2, 8, il ? 24 : 16, 1);
        snprintf(n, sizeof n, "blk.%d.attn_norm.weight", il);
        tensor(w, n, QR_GGML_F32, 1, 8, 1, 1);
    }
    tensor(w, "blk.x.ffn_down.weight", QR_GGML_F32, 2, 8, 1000, 1); /* not a layer: ignored */
    struct file f;
    derive(w, &f);
    struct qr_sizing_params p = one_seq(1000);
    struct qr_sizing s = engine(&f, &p);
    /* 64 bytes per cell, pad256(1000) = 1024 cells. */
    assert_int_equal(s.eng.cells, 1024);
    assert_int_equal(s.eng.cells_swa, 0);
    assert_int_equal(s.eng.kv_bytes, 64 * 1024);
    assert_int_equal(s.eng.kv_bytes_swa, 0);
    /* Widest layer: layer 1, 16 + 8 + 24 = 48 (layer 0: 40). vocab = token_embd dims[1] = 5
     * (no tokenizer), n_embd 8. mask 512 * 1024 * 2; act 512 * 4 * (5 + 4 * 8 + 48). */
    assert_true(s.eng.compute_known);
    assert_int_equal(s.eng.widest_layer, 48);
    assert_int_equal(s.eng.compute_mask, 512 * 1024 * 2);
    assert_int_equal(s.eng.compute_kq, 0);
    assert_int_equal(s.eng.compute_act, 512 * 4 * 85);
    assert_int_equal(s.eng.compute_bytes, 1048576 + 174080);
    /* Without flash attention: an f32 mask and KQ over 4 heads, 512 * 1024 * 4 * 4. */
    p.flash_attn = false;
    s = engine(&f, &p);
    assert_int_equal(s.eng.compute_mask, 512 * 1024 * 4);
    assert_int_equal(s.eng.compute_kq, 512 * 1024 * 4 * 4);
    assert_int_equal(s.eng.compute_bytes, 2097152 + 8388608 + 174080);
    /* Told non-causal: no cache, one mask over the micro-batch, 512 * 512 * 2. */
    p = one_seq(1000);
    p.non_causal = true;
    s = engine(&f, &p);
    assert_true(s.eng.no_cache);
    assert_int_equal(s.eng.kv_bytes, 0);
    assert_int_equal(s.eng.cells, 0);
    assert_int_equal(s.eng.streams, 0);
    assert_int_equal(s.kv_bytes, 64 * 1000); /* the window model is still given */
    assert_int_equal(s.eng.compute_mask, 512 * 512 * 2);
    assert_int_equal(s.eng.compute_bytes, 524288 + 174080);
    done(&f);

    w = zeta(1, true); /* the file says non-causal; head dims from keys, no tensors at all */
    qr_gguf_writer_add_bool(w, "zeta.attention.causal", false);
    derive(w, &f);
    p = one_seq(64);
    s = engine(&f, &p);
    assert_true(s.eng.no_cache);
    assert_int_equal(s.eng.kv_bytes, 0);
    /* u = min(512, 64) = 64; mask 64 * 64 * 2; act 64 * 4 * (5 + 32 + 0). */
    assert_int_equal(s.eng.compute_bytes, 8192 + 9472);
    done(&f);
}

/* Routed experts count expert_used_count of their stacked matrices; 3-d non-expert tensors all;
 * no vocabulary: no compute estimate. */
static void test_engine_widest(void **state)
{
    (void) state;
    struct qr_gguf_writer *w = zeta(1, true);
    qr_gguf_writer_add_u32(w, "zeta.expert_count", 4);
    qr_gguf_writer_add_u32(w, "zeta.expert_used_count", 2);
    tensor(w, "blk.0.attn_q.weight", QR_GGML_F16, 2, 8, 16, 1);        /* 16 */
    tensor(w, "blk.0.ffn_gate_inp.weight", QR_GGML_F32, 2, 8, 4, 1);   /* 4 */
    tensor(w, "blk.0.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 16, 4);   /* 16 * 2 used */
    tensor(w, "blk.0.ffn_down_exps.weight", QR_GGML_F16, 3, 16, 8, 4); /* 8 * 2 used */
    tensor(w, "blk.0.attn_k_b.weight", QR_GGML_F16, 3, 4, 8, 2);       /* 8 * 2 */
    tensor(w, "blk.0.attn_k_norm.weight", QR_GGML_F32, 1, 4, 1, 1);    /* not a matrix */
    struct file f;
    derive(w, &f);
    struct qr_sizing_params p = one_seq(16);
    struct qr_sizing s = engine(&f, &p);
    assert_int_equal(s.eng.widest_layer, 16 + 4 + 32 + 16 + 16);
    done(&f);

    w = qr_gguf_writer_new(); /* no token_embd, no tokenizer: the vocabulary is unknown */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", 1);
    qr_gguf_writer_add_u32(w, "zeta.embedding_length", 8);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count_kv", 1);
    qr_gguf_writer_add_u32(w, "zeta.attention.key_length", 4);
    qr_gguf_writer_add_u32(w, "zeta.attention.value_length", 4);
    derive(w, &f);
    s = engine(&f, &p);
    assert_int_equal(s.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(s.eng.kv_bytes, 16 * 256); /* 1 layer * 8 elements * 2 B, 256 cells */
    assert_false(s.eng.compute_known);
    assert_int_equal(s.eng.compute_bytes, 0);
    done(&f);
}

static void test_engine_invalid(void **state)
{
    (void) state;
    struct file f;
    struct qr_sizing s;
    struct qr_diag d = {{0}};
    derive(swa_file(0), &f);
    struct qr_sizing_params p = one_seq(1000);
    p.n_seq = 0;
    assert_int_equal(qr_gguf_size_engine(f.g, &f.a, &p, &s, &d), QR_ERR_INVALID);
    p = one_seq(1000);
    p.n_ubatch = 0;
    assert_int_equal(qr_gguf_size_engine(f.g, &f.a, &p, &s, &d), QR_ERR_INVALID);
    p = one_seq(0);
    assert_int_equal(qr_gguf_size_engine(f.g, &f.a, &p, &s, &d), QR_ERR_INVALID);
    /* window * n_seq on a unified cache overflows */
    p = one_seq(1000);
    p.kv_unified = true;
    p.n_seq = UINT64_MAX / 2;
    assert_int_equal(qr_gguf_size_engine(f.g, &f.a, &p, &s, &d), QR_ERR_TOO_LARGE);
    assert_int_equal(s.kv, QR_SIZING_KV_OVERFLOW);
    assert_int_equal(s.eng.kv_bytes, 0);
    assert_int_equal(s.kv_bytes, 0);
    assert_non_null(strstr(d.msg, "overflow 64 bits"));
    done(&f);

    /* No layer holds a cache (head_count_kv 0): the window model fits any n_ctx, but padding
     * UINT64_MAX cells to 256 does not. */
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("zeta"));
    qr_gguf_writer_add_u32(w, "zeta.block_count", 1);
    qr_gguf_writer_add_u32(w, "zeta.attention.head_count_kv", 0);
    derive(w, &f);
    p = one_seq(UINT64_MAX);
    assert_int_equal(qr_gguf_size(f.g, &f.a, UINT64_MAX, 200, &s, &d), QR_OK);
    assert_int_equal(qr_gguf_size_engine(f.g, &f.a, &p, &s, &d), QR_ERR_TOO_LARGE);
    done(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_gqa),
        cmocka_unit_test(test_swa_window),
        cmocka_unit_test(test_shared_kv),
        cmocka_unit_test(test_moe_classes),
        cmocka_unit_test(test_head_dims),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_per_layer_heads),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_mla),
        cmocka_unit_test(test_engine_defaults),
        cmocka_unit_test(test_engine_swa),
        cmocka_unit_test(test_engine_compute),
        cmocka_unit_test(test_engine_widest),
        cmocka_unit_test(test_engine_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
