/* The architecture contract over files built with the writer: a dense llama-like file, a MoE file
 * (total vs active parameters exactly, leading dense blocks from the tensor table), a sliding-
 * window file (bool pattern, per-layer KV heads, SWA head dims, shared KV, per-layer inputs) and
 * a scalar pattern left unknown, an embedding model's pooling, head dims from the tensor table
 * (separate, fused, per sliding/full layer, disagreeing), MLA and routing keys, counts above the
 * caps refused (block_count > 512), unknown and mistyped `<arch>.*` keys listed, missing keys
 * reported unknown (never 0), an unusable architecture name, SHA-256 test vectors and chat
 * template markers. Architecture names are made up on purpose: the rules must
 * not depend on family names. */
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
#include "gguf/sha256.h"

/* A finished file and the reader over it; the buffer outlives the handle. */
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
    if ((err = qr_gguf_open_mem(f->buf, f->len, "arch.gguf", NULL, &d, &f->g)))
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

static const char HERMES_TPL[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if tools %}<tools>{{ tools }}</tools> reply with <tool_call>{...}</tool_call>{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}";

static void test_dense(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("llama"));
    qr_gguf_writer_add_u32(w, "general.file_type", 1);
    qr_gguf_writer_add_u32(w, "llama.block_count", 2);
    qr_gguf_writer_add_u32(w, "llama.embedding_length", 8);
    qr_gguf_writer_add_u32(w, "llama.context_length", 256);
    qr_gguf_writer_add_u32(w, "llama.feed_forward_length", 16);
    qr_gguf_writer_add_u32(w, "llama.attention.head_count", 4);
    qr_gguf_writer_add_u32(w, "llama.attention.head_count_kv", 2);
    qr_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    qr_gguf_writer_add_f32(w, "llama.rope.freq_base", 10000.0f);
    qr_gguf_writer_add_u32(w, "llama.rope.dimension_count", 2);
    qr_gguf_writer_add_str(w, "tokenizer.ggml.model", QR_SLICE_LIT("gpt2"));
    const struct qr_slice toks[] = {QR_SLICE_LIT("a"), QR_SLICE_LIT("b"), QR_SLICE_LIT("<s>"),
                                    QR_SLICE_LIT("</s>"), QR_SLICE_LIT("c")};
    qr_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, 5);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 2);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 3);
    qr_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    qr_gguf_writer_add_str(w, "tokenizer.chat_template", QR_SLICE_LIT(HERMES_TPL));
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 5, 1);
    tensor(w, "output_norm.weight", QR_GGML_F32, 1, 8, 1, 1);
    tensor(w, "blk.0.attn_q.weight", QR_GGML_F16, 2, 8, 8, 1);
    tensor(w, "blk.1.attn_q.weight", QR_GGML_F16, 2, 8, 8, 1);
    tensor(w, "blk.0.ffn_up.weight", QR_GGML_F32, 2, 8, 16, 1);
    tensor(w, "blk.1.ffn_up.weight", QR_GGML_F32, 2, 8, 16, 1);
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_true(a->architecture.known && qr_slice_eq(a->architecture.v, "llama"));
    assert_true(a->block_count.known && a->block_count.v == 2);
    assert_true(a->embedding_length.known && a->embedding_length.v == 8);
    assert_true(a->context_length.known && a->context_length.v == 256);
    assert_true(a->feed_forward_length.known && !a->feed_forward_length.arr);
    assert_int_equal(a->feed_forward_length.min, 16);
    assert_int_equal(a->head_count.min, 4);
    assert_int_equal(a->head_count_kv.max, 2);
    assert_true(a->rope_freq_base.known && a->rope_freq_base.v == 10000.0);
    assert_true(a->rope_dimension_count.known && a->rope_dimension_count.v == 2);
    assert_int_equal(a->ffn, QR_ARCH_FFN_DENSE);
    assert_true(a->params_total.known && a->params_total.v == 40 + 8 + 2 * 64 + 2 * 128);
    assert_true(a->params_active.known && a->params_active.v == a->params_total.v);
    assert_int_equal(a->n_tensors, 6);
    assert_int_equal(a->tensor_type_count[QR_GGML_F32], 4);
    assert_int_equal(a->tensor_type_count[QR_GGML_F16], 2);
    assert_int_equal(a->tensor_type_bytes[QR_GGML_F16], 2 * 64 * 2);
    assert_true(a->file_type.known && a->file_type.v == 1);
    assert_string_equal(qr_arch_file_type_name(a->file_type.v), "mostly_f16");
    assert_true(a->tokenizer_model.known && qr_slice_eq(a->tokenizer_model.v, "gpt2"));
    assert_true(a->vocab_size.known && a->vocab_size.v == 5);
    assert_true(a->bos_token_id.known && a->bos_token_id.v == 2);
    assert_true(a->eos_token_id.known && a->eos_token_id.v == 3);
    assert_false(a->pad_token_id.known);
    assert_true(a->add_bos_token.known && !a->add_bos_token.v);
    assert_false(a->add_space_prefix.known);
    assert_true(a->chat_template_known);
    assert_int_equal(a->chat_template_len, sizeof HERMES_TPL - 1);
    uint8_t want[QR_SHA256_LEN];
    qr_sha256(HERMES_TPL, sizeof HERMES_TPL - 1, want);
    assert_memory_equal(a->chat_template_sha256, want, QR_SHA256_LEN);
    assert_true(a->chat_template_markers & QR_ARCH_TPL_CHATML);
    assert_true(a->chat_template_markers & QR_ARCH_TPL_HERMES_TOOLS);
    assert_true(a->chat_template_markers & QR_ARCH_TPL_THINK);
    /* Not stated by the file: unknown, not a loader default. */
    assert_false(a->key_length.known);
    assert_false(a->sliding_window.known);
    assert_false(a->sliding_window_pattern.known);
    assert_false(a->shared_kv_layers.known);
    assert_false(a->expert_count.known);
    assert_false(a->leading_dense_block_count.known);
    assert_false(a->pooling_type.known);
    assert_false(a->final_logit_softcapping.known);
    /* Derived from the tensor table: no per_layer tensors. */
    assert_true(a->per_layer_embeddings.known && !a->per_layer_embeddings.v);
    assert_int_equal(a->n_unknown_keys, 0); /* the norm epsilon is recognized */
    done(&f);
}

static void test_moe_params(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("toymoe"));
    qr_gguf_writer_add_u32(w, "toymoe.block_count", 2);
    qr_gguf_writer_add_u32(w, "toymoe.expert_count", 8);
    qr_gguf_writer_add_u32(w, "toymoe.expert_used_count", 2);
    qr_gguf_writer_add_u32(w, "toymoe.expert_shared_count", 1);
    qr_gguf_writer_add_u32(w, "toymoe.expert_feed_forward_length", 4);
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 10, 1);         /* 80 */
    tensor(w, "blk.0.ffn_up.weight", QR_GGML_F32, 2, 8, 16, 1);       /* 128, dense block */
    tensor(w, "blk.1.ffn_gate_inp.weight", QR_GGML_F32, 2, 8, 8, 1);  /* 64, router */
    tensor(w, "blk.1.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 4, 8);   /* 256 routed */
    tensor(w, "blk.1.ffn_down_exps.weight", QR_GGML_F16, 3, 4, 8, 8); /* 256 routed */
    tensor(w, "blk.1.ffn_up_shexp.weight", QR_GGML_F32, 2, 8, 4, 1);  /* 32 shared */
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_int_equal(a->ffn, QR_ARCH_FFN_MOE);
    assert_true(a->expert_count.known && a->expert_count.v == 8);
    assert_true(a->expert_used_count.known && a->expert_used_count.v == 2);
    assert_true(a->expert_shared_count.known && a->expert_shared_count.v == 1);
    assert_true(a->expert_feed_forward_length.known && a->expert_feed_forward_length.v == 4);
    assert_int_equal(a->n_expert_tensors, 2);
    assert_int_equal(a->n_shared_expert_tensors, 1);
    assert_true(a->params_total.known);
    assert_int_equal(a->params_total.v, 80 + 128 + 64 + 256 + 256 + 32);
    assert_true(a->params_active.known);
    assert_int_equal(a->params_active.v, 80 + 128 + 64 + 32 + (256 + 256) * 2 / 8);
    assert_true(a->leading_dense_block_count.known && a->leading_dense_block_count.v == 1);
    assert_true(a->leading_dense_from_tensors);
    assert_int_equal(a->n_unknown_keys, 0);
    done(&f);
}

static void test_moe_key_wins_and_disagreement(void **state)
{
    /* The key states the leading dense blocks; the tensor rule does not override it. */
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("m2"));
    qr_gguf_writer_add_u32(w, "m2.expert_count", 4);
    qr_gguf_writer_add_u32(w, "m2.leading_dense_block_count", 3);
    tensor(w, "blk.5.ffn_gate_exps.weight", QR_GGML_F32, 3, 8, 4, 4);
    struct file f;
    derive(w, &f);
    assert_int_equal(f.a.ffn, QR_ARCH_FFN_MOE);
    assert_int_equal(f.a.leading_dense_block_count.v, 3);
    assert_false(f.a.leading_dense_from_tensors);
    assert_false(f.a.params_active.known); /* expert_used_count absent: never guessed */
    assert_true(f.a.params_total.known && f.a.params_total.v == 128);
    done(&f);

    /* expert_count > 0 but no expert tensors: the file contradicts itself -> unknown. */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("m3"));
    qr_gguf_writer_add_u32(w, "m3.expert_count", 4);
    qr_gguf_writer_add_u32(w, "m3.expert_used_count", 2);
    tensor(w, "blk.0.ffn_up.weight", QR_GGML_F32, 2, 8, 4, 1);
    derive(w, &f);
    assert_int_equal(f.a.ffn, QR_ARCH_FFN_UNKNOWN);
    assert_false(f.a.params_active.known);
    assert_false(f.a.leading_dense_block_count.known);
    done(&f);
}

static void test_sliding_window(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("toyswa"));
    qr_gguf_writer_add_u32(w, "toyswa.block_count", 6);
    qr_gguf_writer_add_u32(w, "toyswa.attention.sliding_window", 32);
    const uint8_t pat[6] = {1, 1, 1, 0, 1, 0};
    qr_gguf_writer_add_arr(w, "toyswa.attention.sliding_window_pattern", QR_GGUF_BOOL, pat, 6);
    const uint32_t kvh[6] = {2, 2, 2, 1, 2, 1};
    qr_gguf_writer_add_arr(w, "toyswa.attention.head_count_kv", QR_GGUF_U32, kvh, 6);
    qr_gguf_writer_add_u32(w, "toyswa.attention.key_length", 32);
    qr_gguf_writer_add_u32(w, "toyswa.attention.value_length", 32);
    qr_gguf_writer_add_u32(w, "toyswa.attention.key_length_swa", 16);
    qr_gguf_writer_add_u32(w, "toyswa.attention.value_length_swa", 16);
    qr_gguf_writer_add_u32(w, "toyswa.attention.shared_kv_layers", 2);
    qr_gguf_writer_add_u32(w, "toyswa.embedding_length_per_layer_input", 8);
    qr_gguf_writer_add_f32(w, "toyswa.final_logit_softcapping", 30.0f);
    qr_gguf_writer_add_f32(w, "toyswa.rope.freq_base_swa", 10000.0f);
    qr_gguf_writer_add_u32(w, "toyswa.rope.dimension_count_swa", 16);
    tensor(w, "per_layer_token_embd.weight", QR_GGML_F32, 2, 48, 4, 1);
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_true(a->sliding_window.known && a->sliding_window.v == 32);
    const struct qr_arch_pattern *p = &a->sliding_window_pattern;
    assert_true(p->known && p->arr);
    assert_int_equal(p->n_layers, 6);
    assert_int_equal(p->n_swa, 4);
    assert_int_equal(p->n_global, 2);
    for (uint64_t il = 0; il < 6; il++) {
        bool swa;
        assert_true(qr_arch_pattern_swa(p, il, &swa));
        assert_int_equal(swa, pat[il]);
    }
    bool swa;
    assert_false(qr_arch_pattern_swa(p, 6, &swa));
    assert_true(a->head_count_kv.known && a->head_count_kv.arr);
    assert_int_equal(a->head_count_kv.min, 1);
    assert_int_equal(a->head_count_kv.max, 2);
    uint64_t v;
    assert_true(qr_arch_layers_at(&a->head_count_kv, 3, &v));
    assert_int_equal(v, 1);
    assert_false(qr_arch_layers_at(&a->head_count_kv, 6, &v));
    assert_int_equal(a->key_length.v, 32);
    assert_true(a->key_length_swa.known && a->key_length_swa.v == 16);
    assert_true(a->value_length_swa.known && a->value_length_swa.v == 16);
    assert_true(a->shared_kv_layers.known && a->shared_kv_layers.v == 2);
    assert_true(a->embedding_length_per_layer_input.known);
    assert_true(a->per_layer_embeddings.known && a->per_layer_embeddings.v);
    assert_true(a->final_logit_softcapping.known && a->final_logit_softcapping.v == 30.0);
    assert_true(a->rope_freq_base_swa.known && a->rope_dimension_count_swa.v == 16);
    assert_false(a->rope_freq_base.known);
    assert_int_equal(a->n_unknown_keys, 0);
    done(&f);
}

static void test_sliding_window_scalar_not_read(void **state)
{
    /* A scalar pattern has no single meaning across readers: unknown, and the key is listed. */
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("per"));
    qr_gguf_writer_add_u32(w, "per.block_count", 6);
    qr_gguf_writer_add_u32(w, "per.attention.sliding_window_pattern", 3);
    struct file f;
    derive(w, &f);
    const struct qr_arch_pattern *p = &f.a.sliding_window_pattern;
    assert_false(p->known);
    bool swa;
    assert_false(qr_arch_pattern_swa(p, 0, &swa));
    assert_int_equal(f.a.n_unknown_keys, 1);
    assert_true(qr_slice_eq(f.a.unknown_keys[0], "per.attention.sliding_window_pattern"));
    done(&f);
}

static void test_embedding_pooling(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("toyembed"));
    qr_gguf_writer_add_u32(w, "toyembed.pooling_type", 1);
    qr_gguf_writer_add_bool(w, "toyembed.attention.causal", false);
    qr_gguf_writer_add_bool(w, "tokenizer.ggml.add_space_prefix", false);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.padding_token_id", 0);
    struct file f;
    derive(w, &f);
    assert_true(f.a.pooling_type.known && f.a.pooling_type.v == 1);
    assert_string_equal(qr_arch_pooling_name(f.a.pooling_type.v), "mean");
    assert_string_equal(qr_arch_pooling_name(4), "rank");
    assert_null(qr_arch_pooling_name(5));
    assert_true(f.a.add_space_prefix.known && !f.a.add_space_prefix.v);
    assert_true(f.a.pad_token_id.known && f.a.pad_token_id.v == 0);
    /* attention.causal is part of the contract: an encoder says false. */
    assert_true(f.a.causal.known && !f.a.causal.v);
    assert_int_equal(f.a.n_unknown_keys, 0);
    done(&f);
}

/* Head dims the file states only through its tensors: separate attn_k/attn_v, a fused attn_qkv
 * (q, k and v heads of one width), sliding layers kept apart, layers without K skipped. */
static void test_head_dims_from_tensors(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new(); /* separate K and V, GQA 4/2 */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("hd1"));
    qr_gguf_writer_add_u32(w, "hd1.block_count", 2);
    qr_gguf_writer_add_u32(w, "hd1.attention.head_count", 4);
    qr_gguf_writer_add_u32(w, "hd1.attention.head_count_kv", 2);
    for (int il = 0; il < 2; il++) {
        char n[64];
        snprintf(n, sizeof n, "blk.%d.attn_k.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 64, 2 * 16, 1);
        snprintf(n, sizeof n, "blk.%d.attn_v.weight", il);
        tensor(w, n, QR_GGML_F16, 2, 64, 2 * 8, 1);
    }
    struct file f;
    derive(w, &f);
    assert_true(f.a.head_dim_k.known && f.a.head_dim_k.v == 16);
    assert_true(f.a.head_dim_v.known && f.a.head_dim_v.v == 8);
    assert_false(f.a.head_dim_k_swa.known); /* no sliding layers */
    assert_true(f.a.head_dims_from_tensors);
    assert_false(f.a.key_length.known); /* the key itself stays what the file says */
    done(&f);

    w = qr_gguf_writer_new(); /* fused q|k|v [64, (4 + 2*2) * 16] */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("hd2"));
    qr_gguf_writer_add_u32(w, "hd2.block_count", 1);
    qr_gguf_writer_add_u32(w, "hd2.attention.head_count", 4);
    qr_gguf_writer_add_u32(w, "hd2.attention.head_count_kv", 2);
    tensor(w, "blk.0.attn_qkv.weight", QR_GGML_F16, 2, 64, 128, 1);
    derive(w, &f);
    assert_true(f.a.head_dim_k.known && f.a.head_dim_k.v == 16);
    assert_true(f.a.head_dim_v.known && f.a.head_dim_v.v == 16);
    done(&f);

    /* sliding layers 16 wide, full ones 32; the last layer has no K (shared KV): skipped; the
     * stated value_length wins over the tensors */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("hd3"));
    qr_gguf_writer_add_u32(w, "hd3.block_count", 3);
    qr_gguf_writer_add_u32(w, "hd3.attention.head_count_kv", 1);
    qr_gguf_writer_add_u32(w, "hd3.attention.value_length", 40);
    const uint8_t pat[3] = {1, 0, 1};
    qr_gguf_writer_add_arr(w, "hd3.attention.sliding_window_pattern", QR_GGUF_BOOL, pat, 3);
    tensor(w, "blk.0.attn_k.weight", QR_GGML_F16, 2, 64, 16, 1);
    tensor(w, "blk.1.attn_k.weight", QR_GGML_F16, 2, 64, 32, 1);
    derive(w, &f);
    assert_true(f.a.head_dim_k.known && f.a.head_dim_k.v == 32);
    assert_true(f.a.head_dim_k_swa.known && f.a.head_dim_k_swa.v == 16);
    assert_true(f.a.head_dim_v.known && f.a.head_dim_v.v == 40);
    assert_false(f.a.head_dim_v_swa.known); /* no attn_v, no value_length_swa: V = K is a
                                               loader rule, not something the file says */
    done(&f);

    /* layers that disagree, or a width that is not a multiple of the heads: unknown */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("hd4"));
    qr_gguf_writer_add_u32(w, "hd4.block_count", 2);
    qr_gguf_writer_add_u32(w, "hd4.attention.head_count_kv", 3);
    tensor(w, "blk.0.attn_k.weight", QR_GGML_F16, 2, 64, 48, 1);
    tensor(w, "blk.1.attn_k.weight", QR_GGML_F16, 2, 64, 96, 1);
    tensor(w, "blk.0.attn_v.weight", QR_GGML_F16, 2, 64, 50, 1);
    derive(w, &f);
    assert_false(f.a.head_dim_k.known);
    assert_false(f.a.head_dim_v.known);
    assert_false(f.a.head_dims_from_tensors);
    done(&f);

    /* head counts whose fused total overflows 64 bits: not read, no wrap-around */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("hd5"));
    qr_gguf_writer_add_u32(w, "hd5.block_count", 1);
    qr_gguf_writer_add_u64(w, "hd5.attention.head_count", 3);
    qr_gguf_writer_add_u64(w, "hd5.attention.head_count_kv", UINT64_MAX / 2);
    tensor(w, "blk.0.attn_qkv.weight", QR_GGML_F16, 2, 64, 1, 1); /* 3 + 2 * kv wraps to 1 */
    derive(w, &f);
    assert_false(f.a.head_dim_k.known);
    done(&f);
}

/* MLA, MoE routing, normalization and multi-token-prediction keys are read, not listed. */
static void test_mla_and_routing_keys(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("latent"));
    qr_gguf_writer_add_u32(w, "latent.attention.key_length", 24);
    qr_gguf_writer_add_u32(w, "latent.attention.value_length", 16);
    qr_gguf_writer_add_u32(w, "latent.attention.kv_lora_rank", 32);
    qr_gguf_writer_add_u32(w, "latent.attention.q_lora_rank", 48);
    qr_gguf_writer_add_u32(w, "latent.attention.key_length_mla", 40);
    qr_gguf_writer_add_u32(w, "latent.attention.value_length_mla", 32);
    qr_gguf_writer_add_f32(w, "latent.attention.layer_norm_rms_epsilon", 1e-6f);
    qr_gguf_writer_add_f32(w, "latent.attention.layer_norm_epsilon", 0.5f);
    qr_gguf_writer_add_u32(w, "latent.expert_gating_func", 2);
    qr_gguf_writer_add_f32(w, "latent.expert_weights_scale", 2.5f);
    qr_gguf_writer_add_bool(w, "latent.expert_weights_norm", true);
    qr_gguf_writer_add_u32(w, "latent.nextn_predict_layers", 1);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.token_type_count", 2);
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_true(a->kv_lora_rank.known && a->kv_lora_rank.v == 32);
    assert_true(a->q_lora_rank.known && a->q_lora_rank.v == 48);
    assert_true(a->key_length_mla.known && a->key_length_mla.v == 40);
    assert_true(a->value_length_mla.known && a->value_length_mla.v == 32);
    assert_true(a->head_dim_k.known && a->head_dim_k.v == 24);
    assert_true(a->head_dim_v.known && a->head_dim_v.v == 16);
    assert_false(a->head_dims_from_tensors);
    assert_true(a->layer_norm_rms_epsilon.known);
    assert_true(a->layer_norm_epsilon.known && a->layer_norm_epsilon.v == 0.5);
    assert_true(a->expert_gating_func.known && a->expert_gating_func.v == 2);
    assert_string_equal(qr_arch_gating_name(a->expert_gating_func.v), "sigmoid");
    assert_string_equal(qr_arch_gating_name(0), "none");
    assert_null(qr_arch_gating_name(5));
    assert_true(a->expert_weights_scale.known && a->expert_weights_scale.v == 2.5);
    assert_true(a->expert_weights_norm.known && a->expert_weights_norm.v);
    assert_true(a->nextn_predict_layers.known && a->nextn_predict_layers.v == 1);
    assert_true(a->token_type_count.known && a->token_type_count.v == 2);
    assert_false(a->causal.known);
    assert_int_equal(a->n_unknown_keys, 0);
    done(&f);
}

/* llama.cpp wrote out of bounds for block_count > LLAMA_MAX_LAYERS (512): the contract refuses
 * such counts (unknown, listed invalid with the reason) instead of passing them on. */
static void test_block_count_above_max_layers_refused(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("huge"));
    qr_gguf_writer_add_u32(w, "huge.block_count", QR_ARCH_MAX_BLOCKS + 1);
    qr_gguf_writer_add_u32(w, "huge.expert_count", QR_ARCH_MAX_EXPERTS + 1);
    qr_gguf_writer_add_u32(w, "huge.expert_used_count", 2);
    qr_gguf_writer_add_u32(w, "huge.leading_dense_block_count", 600);
    tensor(w, "blk.0.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 4, 4);
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_false(a->block_count.known);
    assert_false(a->expert_count.known);
    assert_true(a->expert_used_count.known);         /* nothing to compare it with */
    assert_true(a->leading_dense_block_count.known); /* block_count unknown: not comparable */
    assert_int_equal(a->ffn, QR_ARCH_FFN_UNKNOWN);   /* expert tensors, no usable expert_count */
    assert_false(a->params_active.known);
    assert_int_equal(a->n_invalid, 2);
    assert_string_equal(a->invalid[0].field, "block_count");
    assert_int_equal(a->invalid[0].value, QR_ARCH_MAX_BLOCKS + 1);
    assert_non_null(strstr(a->invalid[0].reason, "512"));
    assert_string_equal(a->invalid[1].field, "expert_count");
    assert_int_equal(a->invalid[1].value, QR_ARCH_MAX_EXPERTS + 1);
    assert_int_equal(a->n_unknown_keys, 0); /* read, then refused: not "unknown keys" */
    done(&f);

    /* at the caps: used; used > count and lead > blocks: refused */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("edge"));
    qr_gguf_writer_add_u32(w, "edge.block_count", QR_ARCH_MAX_BLOCKS);
    qr_gguf_writer_add_u32(w, "edge.expert_count", 4);
    qr_gguf_writer_add_u32(w, "edge.expert_used_count", 5);
    qr_gguf_writer_add_u32(w, "edge.leading_dense_block_count", QR_ARCH_MAX_BLOCKS + 1);
    tensor(w, "blk.3.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 4, 4);
    derive(w, &f);
    a = &f.a;
    assert_true(a->block_count.known && a->block_count.v == QR_ARCH_MAX_BLOCKS);
    assert_true(a->expert_count.known && a->expert_count.v == 4);
    assert_false(a->expert_used_count.known);
    assert_false(a->leading_dense_block_count.known);
    assert_int_equal(a->ffn, QR_ARCH_FFN_MOE);
    assert_false(a->params_active.known); /* used count refused: never guessed */
    assert_int_equal(a->n_invalid, 2);
    assert_string_equal(a->invalid[0].field, "expert_used_count");
    assert_int_equal(a->invalid[0].value, 5);
    assert_string_equal(a->invalid[1].field, "leading_dense_block_count");
    /* the refused key does not come back from the tensor rule */
    assert_false(a->leading_dense_from_tensors);
    done(&f);
}

static void test_unknown_keys_listed(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("toyx"));
    qr_gguf_writer_add_u32(w, "toyx.some_new_thing", 7);
    qr_gguf_writer_add_f32(w, "toyx.attention.layer_norm_rms_epsilon", 1e-6f);
    qr_gguf_writer_add_str(w, "toyx.block_count", QR_SLICE_LIT("twelve")); /* wrong type */
    qr_gguf_writer_add_u32(w, "toyxy.block_count", 3);                     /* another prefix */
    qr_gguf_writer_add_u32(w, "other.key", 1);
    qr_gguf_writer_add_u32(w, "toyx.embedding_length", 16);
    const float bad[2] = {1, 2};
    qr_gguf_writer_add_arr(w, "toyx.attention.head_count", QR_GGUF_F32, bad, 2); /* wrong type */
    struct file f;
    derive(w, &f);
    assert_false(f.a.block_count.known);
    assert_false(f.a.head_count.known);
    assert_true(f.a.embedding_length.known);
    assert_int_equal(f.a.n_unknown_keys, 3);
    assert_true(qr_slice_eq(f.a.unknown_keys[0], "toyx.some_new_thing"));
    assert_true(qr_slice_eq(f.a.unknown_keys[1], "toyx.block_count"));
    assert_true(qr_slice_eq(f.a.unknown_keys[2], "toyx.attention.head_count"));
    done(&f);
}

static void test_missing_keys_unknown(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("bare"));
    struct file f;
    derive(w, &f);
    const struct qr_arch *a = &f.a;
    assert_true(a->architecture.known);
    const struct qr_arch_u64 *u[] = {
        &a->block_count,         &a->embedding_length,    &a->context_length,
        &a->vocab_size,          &a->key_length,          &a->value_length,
        &a->key_length_swa,      &a->value_length_swa,    &a->expert_count,
        &a->expert_used_count,   &a->expert_shared_count, &a->leading_dense_block_count,
        &a->sliding_window,      &a->shared_kv_layers,    &a->pooling_type,
        &a->bos_token_id,        &a->eos_token_id,        &a->pad_token_id,
        &a->file_type,           &a->params_total,        &a->params_active,
        &a->rope_dimension_count};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
        assert_false(u[i]->known);
        assert_int_equal(u[i]->v, 0);
    }
    assert_false(a->head_count.known);
    assert_false(a->head_count_kv.known);
    assert_false(a->feed_forward_length.known);
    assert_false(a->rope_freq_base.known);
    assert_false(a->final_logit_softcapping.known);
    assert_false(a->per_layer_embeddings.known); /* no tensor table to judge by */
    assert_false(a->tokenizer_model.known);
    assert_false(a->add_bos_token.known);
    assert_false(a->chat_template_known);
    assert_int_equal(a->ffn, QR_ARCH_FFN_UNKNOWN);
    uint64_t v;
    assert_false(qr_arch_layers_at(&a->head_count, 0, &v));
    done(&f);

    /* No architecture at all: still derivable, every <arch>.* field unknown. */
    w = qr_gguf_writer_new();
    qr_gguf_writer_add_u32(w, "bare.block_count", 3);
    derive(w, &f);
    assert_false(f.a.architecture.known);
    assert_false(f.a.block_count.known);
    assert_int_equal(f.a.n_unknown_keys, 0);
    done(&f);
}

static void test_bad_architecture_name(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    char longname[QR_ARCH_MAX_NAME + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    qr_gguf_writer_add_str(w, "general.architecture", qr_slice_str(longname));
    uint8_t *buf;
    size_t len;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_writer_finish(w, &d, &buf, &len), QR_OK);
    qr_gguf_writer_free(w);
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(buf, len, "x", NULL, &d, &g), QR_OK);
    struct qr_arch a;
    assert_int_equal(qr_gguf_arch_derive(g, &a, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "general.architecture"));
    qr_gguf_close(g);
    free(buf);
}

static void hex_of(const void *p, size_t n, char out[QR_SHA256_HEX])
{
    uint8_t dg[QR_SHA256_LEN];
    qr_sha256(p, n, dg);
    qr_sha256_hex(dg, out);
}

static void test_sha256_vectors(void **state)
{
    char hex[QR_SHA256_HEX];
    hex_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
    hex_of(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* One million 'a', streamed in uneven pieces across block boundaries. */
    static char chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    struct qr_sha256 s;
    qr_sha256_init(&s);
    size_t left = 1000000, step = 1;
    while (left > 0) {
        size_t n = step < left ? step : left;
        qr_sha256_update(&s, chunk, n);
        left -= n;
        step = step % 900 + 63; /* stays below sizeof chunk */
    }
    uint8_t dg[QR_SHA256_LEN];
    qr_sha256_final(&s, dg);
    qr_sha256_hex(dg, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void test_template_markers(void **state)
{
    unsigned m = qr_arch_template_markers(QR_SLICE_LIT(HERMES_TPL));
    assert_int_equal(m, QR_ARCH_TPL_CHATML | QR_ARCH_TPL_HERMES_TOOLS | QR_ARCH_TPL_THINK |
                            QR_ARCH_TPL_GENERATION_PROMPT | QR_ARCH_TPL_TOOLS_VAR);
    m = qr_arch_template_markers(
        QR_SLICE_LIT("<|start_header_id|>{{ role }}<|end_header_id|>\n\n{{ content }}"));
    assert_int_equal(m, QR_ARCH_TPL_HEADERS);
    m = qr_arch_template_markers(QR_SLICE_LIT("<start_of_turn>user\n[INST]"));
    assert_int_equal(m, QR_ARCH_TPL_TURNS | QR_ARCH_TPL_INST);
    assert_int_equal(qr_arch_template_markers(QR_SLICE_LIT("{{ messages }}")), 0);
    assert_int_equal(qr_arch_template_markers(QR_SLICE_LIT("<think")), 0); /* incomplete tag */
    assert_string_equal(qr_arch_marker_name(QR_ARCH_TPL_HERMES_TOOLS), "hermes-tools");
    assert_string_equal(qr_arch_marker_name(QR_ARCH_TPL_THINK), "think-tags");
    assert_string_equal(qr_arch_marker_name(QR_ARCH_TPL_CHATML), "chatml");
    for (unsigned i = 0; i < QR_ARCH_TPL_MARKER_COUNT; i++)
        assert_non_null(qr_arch_marker_name(1u << i));
    assert_null(qr_arch_marker_name(1u << QR_ARCH_TPL_MARKER_COUNT));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_moe_params),
        cmocka_unit_test(test_moe_key_wins_and_disagreement),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_sliding_window_scalar_not_read),
        cmocka_unit_test(test_embedding_pooling),
        cmocka_unit_test(test_head_dims_from_tensors),
        cmocka_unit_test(test_mla_and_routing_keys),
        cmocka_unit_test(test_block_count_above_max_layers_refused),
        cmocka_unit_test(test_unknown_keys_listed),
        cmocka_unit_test(test_missing_keys_unknown),
        cmocka_unit_test(test_bad_architecture_name),
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_template_markers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
