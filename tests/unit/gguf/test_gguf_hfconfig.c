/* Hugging Face config.json into the architecture contract: real-shaped configs (a Llama 3 style
 * dense model, a Qwen3 MoE, a Gemma 3 multimodal config with text_config and layer_types, a
 * Gemma 4 style config with per-layer inputs, KV sharing and per-type head dims and RoPE, a
 * DeepSeek V3 config with MLA, shared experts and leading dense blocks, a BERT encoder) checked
 * field by field, including what must stay unknown; then hostile ones, each failing with a
 * message that names the field: not JSON, not an object, wrong types, negative and huge numbers,
 * a million-entry layer_types, deep nesting, the size cap, duplicates; an unknown model_type
 * kept as the architecture with a note; and the directory reader (config.json with a safetensors
 * index next to it) and the probe used by `inspect`. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/hfconfig.h"
#include "gguf/sizing.h"

static struct qr_hfconfig *parse_ok(const char *json)
{
    struct qr_diag d = {{0}};
    struct qr_hfconfig *hf = NULL;
    enum qr_err err = qr_hfconfig_parse(json, strlen(json), "t.json", &d, &hf);
    if (err)
        fail_msg("parse: %s: %s", qr_err_str(err), d.msg);
    assert_non_null(hf);
    return hf;
}

/* Parsing fails with err and a message that contains needle. */
static void parse_fails(const char *json, size_t len, enum qr_err want, const char *needle)
{
    struct qr_diag d = {{0}};
    struct qr_hfconfig *hf = (struct qr_hfconfig *) 1;
    enum qr_err err = qr_hfconfig_parse(json, len, "t.json", &d, &hf);
    if (err != want || !strstr(d.msg, needle) || strncmp(d.msg, "cannot read 't.json': ", 22))
        fail_msg("want %s with '%s', got %s: '%s'", qr_err_str(want), needle, qr_err_str(err),
                 d.msg);
    assert_null(hf);
}

static void fails(const char *json, enum qr_err want, const char *needle)
{
    parse_fails(json, strlen(json), want, needle);
}

static bool has_unknown(const struct qr_hfconfig *hf, const char *name)
{
    for (size_t i = 0; i < hf->n_unknown && i < QR_HF_MAX_UNKNOWN; i++) {
        if (hf->unknown[i].len == strlen(name) && !memcmp(hf->unknown[i].name, name, strlen(name)))
            return true;
    }
    return false;
}

static bool has_note(const struct qr_hfconfig *hf, const char *needle)
{
    for (size_t i = 0; i < hf->n_notes; i++) {
        if (strstr(hf->notes[i], needle))
            return true;
    }
    return false;
}

static bool arch_unknown_key(const struct qr_arch *a, const char *key)
{
    for (size_t i = 0; i < a->n_unknown_keys && i < QR_ARCH_MAX_UNKNOWN; i++) {
        if (qr_slice_eq(a->unknown_keys[i], key))
            return true;
    }
    return false;
}

#define U64(f, want) assert_true((f).known && (f).v == (want))

/* JSON array of n layer types: layer il is full attention when (il + 1) % period == 0. */
static char *layer_types(unsigned n, unsigned period)
{
    char *s = malloc((size_t) n * 24 + 3);
    size_t len = 0;
    s[len++] = '[';
    for (unsigned il = 0; il < n; il++)
        len += (size_t) sprintf(s + len, "%s\"%s\"", il ? "," : "",
                                (il + 1) % period ? "sliding_attention" : "full_attention");
    s[len++] = ']';
    s[len] = 0;
    return s;
}

static void check_pattern(const struct qr_arch_pattern *p, unsigned n, unsigned period)
{
    assert_true(p->known);
    assert_int_equal(p->n_layers, n);
    for (unsigned il = 0; il < n; il++) {
        bool swa = false;
        assert_true(qr_arch_pattern_swa(p, il, &swa));
        assert_int_equal(swa, (il + 1) % period != 0);
    }
}

static const char LLAMA3[] = "{\n"
                             "  \"architectures\": [\"LlamaForCausalLM\"],\n"
                             "  \"attention_bias\": false,\n"
                             "  \"attention_dropout\": 0.0,\n"
                             "  \"bos_token_id\": 128000,\n"
                             "  \"eos_token_id\": [128001, 128008, 128009],\n"
                             "  \"hidden_act\": \"silu\",\n"
                             "  \"hidden_size\": 4096,\n"
                             "  \"initializer_range\": 0.02,\n"
                             "  \"intermediate_size\": 14336,\n"
                             "  \"max_position_embeddings\": 131072,\n"
                             "  \"mlp_bias\": false,\n"
                             "  \"model_type\": \"llama\",\n"
                             "  \"num_attention_heads\": 32,\n"
                             "  \"num_hidden_layers\": 32,\n"
                             "  \"num_key_value_heads\": 8,\n"
                             "  \"pretraining_tp\": 1,\n"
                             "  \"rms_norm_eps\": 1e-05,\n"
                             "  \"rope_scaling\": {\n"
                             "    \"factor\": 8.0,\n"
                             "    \"low_freq_factor\": 1.0,\n"
                             "    \"high_freq_factor\": 4.0,\n"
                             "    \"original_max_position_embeddings\": 8192,\n"
                             "    \"rope_type\": \"llama3\"\n"
                             "  },\n"
                             "  \"rope_theta\": 500000.0,\n"
                             "  \"tie_word_embeddings\": false,\n"
                             "  \"torch_dtype\": \"bfloat16\",\n"
                             "  \"transformers_version\": \"4.43.0.dev0\",\n"
                             "  \"use_cache\": true,\n"
                             "  \"vocab_size\": 128256\n"
                             "}\n";

static void test_llama3_dense(void **state)
{
    struct qr_hfconfig *hf = parse_ok(LLAMA3);
    const struct qr_arch *a = &hf->arch;
    assert_true(a->architecture.known && qr_slice_eq(a->architecture.v, "llama"));
    assert_true(hf->arch_mapped && qr_slice_eq(hf->model_type, "llama"));
    assert_false(hf->text_config);
    assert_int_equal(hf->modalities, 0);
    U64(a->block_count, 32);
    U64(a->embedding_length, 4096);
    U64(a->context_length, 131072);
    assert_true(a->feed_forward_length.known && a->feed_forward_length.min == 14336);
    assert_true(a->head_count.known && a->head_count.min == 32);
    assert_true(a->head_count_kv.known && a->head_count_kv.min == 8);
    U64(a->vocab_size, 128256);
    U64(a->bos_token_id, 128000);
    U64(a->eos_token_id, 128001); /* a list: the first */
    assert_false(a->pad_token_id.known);
    assert_true(a->rope_freq_base.known && a->rope_freq_base.v == 500000.0);
    assert_true(a->rope_scaling_type.known && qr_slice_eq(a->rope_scaling_type.v, "llama3"));
    assert_true(a->rope_scaling_factor.known && a->rope_scaling_factor.v == 8.0);
    /* Not stated by the config: unknown, never hidden / heads. */
    assert_false(a->key_length.known);
    assert_false(a->value_length.known);
    assert_false(a->sliding_window.known);
    assert_false(a->sliding_window_pattern.known);
    assert_false(a->expert_count.known);
    /* What needs tensors is unknown for a config. */
    assert_int_equal(a->ffn, QR_ARCH_FFN_UNKNOWN);
    assert_false(a->params_total.known);
    assert_false(a->params_active.known);
    assert_false(a->file_type.known);
    assert_int_equal(a->n_tensors, 0);
    /* HF-only facts. */
    assert_true(hf->dtype.known && qr_slice_eq(hf->dtype.v, "bfloat16"));
    assert_true(hf->tie_word_embeddings.known && !hf->tie_word_embeddings.v);
    assert_false(hf->quant_method.known);
    assert_false(hf->weight_bytes.known);
    /* Unmapped fields listed; bookkeeping and mapped ones not. */
    assert_true(has_unknown(hf, "hidden_act"));
    assert_true(has_unknown(hf, "attention_bias"));
    assert_true(has_unknown(hf, "mlp_bias"));
    assert_true(has_unknown(hf, "pretraining_tp"));
    assert_true(has_unknown(hf, "rope_scaling.low_freq_factor"));
    assert_true(has_unknown(hf, "rope_scaling.high_freq_factor"));
    assert_int_equal(hf->n_unknown, 6);
    assert_false(has_unknown(hf, "architectures"));
    assert_false(has_unknown(hf, "rope_scaling.factor"));
    assert_int_equal(hf->n_notes, 0);
    /* Translated keys the contract reads are not listed among its unknown keys. */
    assert_false(arch_unknown_key(a, "llama.block_count"));
    assert_false(arch_unknown_key(a, "llama.attention.layer_norm_rms_epsilon"));
    qr_hfconfig_free(hf);
}

static const char QWEN3_MOE[] = "{\n"
                                "  \"architectures\": [\"Qwen3MoeForCausalLM\"],\n"
                                "  \"attention_bias\": false,\n"
                                "  \"attention_dropout\": 0.0,\n"
                                "  \"bos_token_id\": 151643,\n"
                                "  \"decoder_sparse_step\": 1,\n"
                                "  \"eos_token_id\": 151645,\n"
                                "  \"head_dim\": 128,\n"
                                "  \"hidden_act\": \"silu\",\n"
                                "  \"hidden_size\": 2048,\n"
                                "  \"initializer_range\": 0.02,\n"
                                "  \"intermediate_size\": 6144,\n"
                                "  \"max_position_embeddings\": 40960,\n"
                                "  \"max_window_layers\": 48,\n"
                                "  \"mlp_only_layers\": [],\n"
                                "  \"model_type\": \"qwen3_moe\",\n"
                                "  \"moe_intermediate_size\": 768,\n"
                                "  \"norm_topk_prob\": true,\n"
                                "  \"num_attention_heads\": 32,\n"
                                "  \"num_experts\": 128,\n"
                                "  \"num_experts_per_tok\": 8,\n"
                                "  \"num_hidden_layers\": 48,\n"
                                "  \"num_key_value_heads\": 4,\n"
                                "  \"output_router_logits\": false,\n"
                                "  \"rms_norm_eps\": 1e-06,\n"
                                "  \"rope_scaling\": null,\n"
                                "  \"rope_theta\": 1000000.0,\n"
                                "  \"router_aux_loss_coef\": 0.001,\n"
                                "  \"sliding_window\": null,\n"
                                "  \"tie_word_embeddings\": false,\n"
                                "  \"torch_dtype\": \"bfloat16\",\n"
                                "  \"transformers_version\": \"4.51.0\",\n"
                                "  \"use_cache\": true,\n"
                                "  \"use_sliding_window\": false,\n"
                                "  \"vocab_size\": 151936\n"
                                "}\n";

static void test_qwen3_moe(void **state)
{
    struct qr_hfconfig *hf = parse_ok(QWEN3_MOE);
    const struct qr_arch *a = &hf->arch;
    assert_true(qr_slice_eq(a->architecture.v, "qwen3moe"));
    U64(a->block_count, 48);
    U64(a->expert_count, 128);
    U64(a->expert_used_count, 8);
    U64(a->expert_feed_forward_length, 768);
    U64(a->key_length, 128);
    U64(a->value_length, 128);
    assert_false(a->key_length_swa.known);
    assert_true(a->head_count_kv.known && a->head_count_kv.min == 4);
    /* Experts stated, but dense vs MoE comes from tensors: unknown for a config. */
    assert_int_equal(a->ffn, QR_ARCH_FFN_UNKNOWN);
    assert_false(a->params_active.known);
    assert_false(a->leading_dense_block_count.known);
    assert_false(a->expert_shared_count.known);
    /* null: not stated. */
    assert_false(a->sliding_window.known);
    assert_false(a->rope_scaling_type.known);
    assert_true(has_unknown(hf, "decoder_sparse_step"));
    assert_true(has_unknown(hf, "mlp_only_layers"));
    assert_true(has_unknown(hf, "router_aux_loss_coef"));
    assert_false(has_unknown(hf, "use_sliding_window"));
    assert_false(has_unknown(hf, "norm_topk_prob"));
    qr_hfconfig_free(hf);

    /* Qwen2 states a window it does not use: use_sliding_window false gates it off. */
    hf = parse_ok("{\"model_type\": \"qwen2\", \"num_hidden_layers\": 28, \"sliding_window\": "
                  "131072, \"use_sliding_window\": false, \"max_window_layers\": 28}");
    assert_true(qr_slice_eq(hf->arch.architecture.v, "qwen2"));
    assert_false(hf->arch.sliding_window.known);
    assert_true(has_note(hf, "sliding_window not applied: use_sliding_window is false"));
    qr_hfconfig_free(hf);
    hf = parse_ok("{\"model_type\": \"mistral\", \"sliding_window\": 4096, \"num_local_experts\": "
                  "8, \"num_experts_per_tok\": 2}");
    assert_true(qr_slice_eq(hf->arch.architecture.v, "llama"));
    U64(hf->arch.sliding_window, 4096);
    assert_false(hf->arch.sliding_window_pattern.known); /* all layers? not stated: unknown */
    U64(hf->arch.expert_count, 8);
    U64(hf->arch.expert_used_count, 2);
    qr_hfconfig_free(hf);
}

static const char GEMMA3_FMT[] =
    "{\n"
    "  \"architectures\": [\"Gemma3ForConditionalGeneration\"],\n"
    "  \"boi_token_index\": 255999,\n"
    "  \"eoi_token_index\": 256000,\n"
    "  \"eos_token_id\": [1, 106],\n"
    "  \"image_token_index\": 262144,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"mm_tokens_per_image\": 256,\n"
    "  \"model_type\": \"gemma3\",\n"
    "  \"text_config\": {\n"
    "    \"attention_bias\": false,\n"
    "    \"attn_logit_softcapping\": null,\n"
    "    \"cache_implementation\": \"hybrid\",\n"
    "    \"final_logit_softcapping\": null,\n"
    "    \"head_dim\": 256,\n"
    "    \"hidden_activation\": \"gelu_pytorch_tanh\",\n"
    "    \"hidden_size\": 2560,\n"
    "    \"intermediate_size\": 10240,\n"
    "    \"layer_types\": %s,\n"
    "    \"max_position_embeddings\": 131072,\n"
    "    \"model_type\": \"gemma3_text\",\n"
    "    \"num_attention_heads\": 8,\n"
    "    \"num_hidden_layers\": 34,\n"
    "    \"num_key_value_heads\": 4,\n"
    "    \"query_pre_attn_scalar\": 256,\n"
    "    \"rms_norm_eps\": 1e-06,\n"
    "    \"rope_local_base_freq\": 10000.0,\n"
    "    \"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"},\n"
    "    \"rope_theta\": 1000000.0,\n"
    "    \"sliding_window\": 1024,\n"
    "    \"sliding_window_pattern\": 6,\n"
    "    \"torch_dtype\": \"bfloat16\",\n"
    "    \"vocab_size\": 262208\n"
    "  },\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.50.0.dev0\",\n"
    "  \"vision_config\": {\n"
    "    \"hidden_size\": 1152, \"image_size\": 896, \"intermediate_size\": 4304,\n"
    "    \"model_type\": \"siglip_vision_model\", \"num_attention_heads\": 16,\n"
    "    \"num_hidden_layers\": 27, \"patch_size\": 14, \"vision_use_head\": false\n"
    "  }\n"
    "}\n";

static void test_gemma3_multimodal(void **state)
{
    char *lt = layer_types(34, 6);
    char *json = malloc(sizeof GEMMA3_FMT + strlen(lt));
    sprintf(json, GEMMA3_FMT, lt);
    struct qr_hfconfig *hf = parse_ok(json);
    const struct qr_arch *a = &hf->arch;
    assert_true(qr_slice_eq(a->architecture.v, "gemma3"));
    assert_true(qr_slice_eq(hf->model_type, "gemma3"));
    assert_true(hf->text_config);
    assert_int_equal(hf->modalities, QR_HF_VISION);
    /* The text model's fields, not the vision tower's. */
    U64(a->block_count, 34);
    U64(a->embedding_length, 2560);
    U64(a->key_length, 256);
    U64(a->sliding_window, 1024);
    check_pattern(&a->sliding_window_pattern, 34, 6);
    assert_int_equal(a->sliding_window_pattern.n_global, 5);
    assert_true(a->rope_freq_base.known && a->rope_freq_base.v == 1000000.0);
    assert_true(a->rope_freq_base_swa.known && a->rope_freq_base_swa.v == 10000.0);
    assert_true(qr_slice_eq(a->rope_scaling_type.v, "linear"));
    assert_false(a->final_logit_softcapping.known); /* null */
    U64(a->eos_token_id, 1);                        /* top level, a list */
    U64(a->vocab_size, 262208);
    assert_true(has_unknown(hf, "text_config.query_pre_attn_scalar"));
    assert_true(has_unknown(hf, "text_config.cache_implementation"));
    assert_true(has_unknown(hf, "mm_tokens_per_image"));
    assert_true(has_unknown(hf, "boi_token_index"));
    assert_false(has_unknown(hf, "vision_config"));
    assert_false(has_unknown(hf, "text_config.sliding_window_pattern"));
    qr_hfconfig_free(hf);

    /* Without layer_types, the period gives the same pattern (the reference's rule). */
    char *nolt = strstr(json, "\"layer_types\"");
    char *eol = strchr(nolt, '\n');
    memmove(nolt, eol + 1, strlen(eol + 1) + 1);
    hf = parse_ok(json);
    check_pattern(&hf->arch.sliding_window_pattern, 34, 6);
    qr_hfconfig_free(hf);
    free(json);
    free(lt);
}

static const char GEMMA4_FMT[] =
    "{\n"
    "  \"architectures\": [\"Gemma4ForConditionalGeneration\"],\n"
    "  \"audio_config\": {\"model_type\": \"gemma4_audio\", \"hidden_size\": 1536},\n"
    "  \"boi_token_id\": 255999,\n"
    "  \"eos_token_id\": [1, 106],\n"
    "  \"image_token_id\": 258880,\n"
    "  \"model_type\": \"gemma4\",\n"
    "  \"text_config\": {\n"
    "    \"attention_bias\": false,\n"
    "    \"attention_k_eq_v\": false,\n"
    "    \"bos_token_id\": 2,\n"
    "    \"dtype\": \"bfloat16\",\n"
    "    \"enable_moe_block\": false,\n"
    "    \"eos_token_id\": 1,\n"
    "    \"final_logit_softcapping\": 30.0,\n"
    "    \"global_head_dim\": 512,\n"
    "    \"head_dim\": 256,\n"
    "    \"hidden_activation\": \"gelu_pytorch_tanh\",\n"
    "    \"hidden_size\": 1536,\n"
    "    \"hidden_size_per_layer_input\": 256,\n"
    "    \"intermediate_size\": 6144,\n"
    "    \"layer_types\": %s,\n"
    "    \"max_position_embeddings\": 131072,\n"
    "    \"model_type\": \"gemma4_text\",\n"
    "    \"num_attention_heads\": 8,\n"
    "    \"num_experts\": null,\n"
    "    \"num_hidden_layers\": 35,\n"
    "    \"num_key_value_heads\": 1,\n"
    "    \"num_kv_shared_layers\": 20,\n"
    "    \"pad_token_id\": 0,\n"
    "    \"rms_norm_eps\": 1e-06,\n"
    "    \"rope_parameters\": {\n"
    "      \"full_attention\": {\"partial_rotary_factor\": 0.25, \"rope_theta\": 1000000.0,\n"
    "                         \"rope_type\": \"proportional\"},\n"
    "      \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}\n"
    "    },\n"
    "    \"sliding_window\": 512,\n"
    "    \"tie_word_embeddings\": true,\n"
    "    \"top_k_experts\": null,\n"
    "    \"vocab_size\": 262144,\n"
    "    \"vocab_size_per_layer_input\": 262144\n"
    "  },\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"transformers_version\": \"5.5.0\",\n"
    "  \"vision_config\": {\"model_type\": \"gemma4_vision\", \"hidden_size\": 768}\n"
    "}\n";

static void test_gemma4_per_layer(void **state)
{
    char *lt = layer_types(35, 5);
    char *json = malloc(sizeof GEMMA4_FMT + strlen(lt));
    sprintf(json, GEMMA4_FMT, lt);
    struct qr_hfconfig *hf = parse_ok(json);
    const struct qr_arch *a = &hf->arch;
    assert_true(qr_slice_eq(a->architecture.v, "gemma4"));
    assert_int_equal(hf->modalities, QR_HF_VISION | QR_HF_AUDIO);
    U64(a->block_count, 35);
    /* global_head_dim is the full layers' head dim; head_dim then the sliding layers'. */
    U64(a->key_length, 512);
    U64(a->value_length, 512);
    U64(a->key_length_swa, 256);
    U64(a->value_length_swa, 256);
    U64(a->sliding_window, 512);
    check_pattern(&a->sliding_window_pattern, 35, 5);
    U64(a->shared_kv_layers, 20);
    U64(a->embedding_length_per_layer_input, 256);
    assert_true(a->per_layer_embeddings.known && a->per_layer_embeddings.v);
    assert_true(a->final_logit_softcapping.known && a->final_logit_softcapping.v == 30.0);
    /* Per-type RoPE parameters. */
    assert_true(a->rope_freq_base.known && a->rope_freq_base.v == 1000000.0);
    assert_true(a->rope_freq_base_swa.known && a->rope_freq_base_swa.v == 10000.0);
    assert_false(a->expert_count.known); /* null */
    U64(a->bos_token_id, 2);
    U64(a->eos_token_id, 1); /* text_config's, before the top level's list */
    U64(a->pad_token_id, 0);
    assert_true(hf->dtype.known && qr_slice_eq(hf->dtype.v, "bfloat16"));
    assert_true(hf->tie_word_embeddings.known && hf->tie_word_embeddings.v);
    assert_true(
        has_unknown(hf, "text_config.rope_parameters.full_attention.partial_rotary_factor"));
    assert_true(has_unknown(hf, "text_config.rope_parameters.full_attention.rope_type"));
    assert_true(has_unknown(hf, "text_config.vocab_size_per_layer_input"));
    assert_true(has_unknown(hf, "text_config.attention_k_eq_v"));
    assert_true(has_unknown(hf, "image_token_id"));

    /* The same contract as a GGUF file: the sizing rules run on it unchanged. 15 layers own a
     * cache (20 share), 3 of them full attention. */
    struct qr_sizing sz;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_size(hf->gguf, a, 4096, 200, &sz, &d), QR_OK);
    assert_int_equal(sz.kv, QR_SIZING_KV_KNOWN);
    assert_int_equal(sz.kv_layers, 15);
    assert_int_equal(sz.kv_layers_swa, 12);
    assert_int_equal(sz.weight_bytes, 0);
    qr_hfconfig_free(hf);

    /* The large model shape: fewer KV heads on the full layers (num_global_key_value_heads):
     * one value per layer, from the pattern. */
    free(json);
    json = malloc(sizeof GEMMA4_FMT + strlen(lt) + 64);
    sprintf(json, GEMMA4_FMT, lt);
    char *at = strstr(json, "\"num_key_value_heads\": 1,");
    char *rest = strdup(at + strlen("\"num_key_value_heads\": 1,"));
    sprintf(at, "\"num_global_key_value_heads\": 4, \"num_key_value_heads\": 16,%s", rest);
    free(rest);
    hf = parse_ok(json);
    a = &hf->arch;
    assert_true(a->head_count_kv.known && a->head_count_kv.arr);
    assert_int_equal(a->head_count_kv.min, 4);
    assert_int_equal(a->head_count_kv.max, 16);
    uint64_t h = 0;
    assert_true(qr_arch_layers_at(&a->head_count_kv, 0, &h) && h == 16);
    assert_true(qr_arch_layers_at(&a->head_count_kv, 4, &h) && h == 4);
    assert_false(has_unknown(hf, "text_config.num_global_key_value_heads"));
    qr_hfconfig_free(hf);
    free(json);
    free(lt);

    /* Without a pattern the per-layer split cannot be made: unknown, not the sliding value. */
    hf = parse_ok("{\"model_type\": \"gemma4_text\", \"num_global_key_value_heads\": 4, "
                  "\"num_key_value_heads\": 16}");
    assert_false(hf->arch.head_count_kv.known);
    assert_true(has_note(hf, "num_global_key_value_heads: no num_key_value_heads or no layer"));
    qr_hfconfig_free(hf);
}

static const char DEEPSEEK_V3[] =
    "{\n"
    "  \"architectures\": [\"DeepseekV3ForCausalLM\"],\n"
    "  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n"
    "  \"auto_map\": {\"AutoConfig\": \"configuration_deepseek.DeepseekV3Config\"},\n"
    "  \"aux_loss_alpha\": 0.001,\n"
    "  \"bos_token_id\": 0,\n"
    "  \"eos_token_id\": 1,\n"
    "  \"ep_size\": 1,\n"
    "  \"first_k_dense_replace\": 3,\n"
    "  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 7168,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 18432,\n"
    "  \"kv_lora_rank\": 512,\n"
    "  \"max_position_embeddings\": 163840,\n"
    "  \"model_type\": \"deepseek_v3\",\n"
    "  \"moe_intermediate_size\": 2048,\n"
    "  \"moe_layer_freq\": 1,\n"
    "  \"n_group\": 8,\n"
    "  \"n_routed_experts\": 256,\n"
    "  \"n_shared_experts\": 1,\n"
    "  \"norm_topk_prob\": true,\n"
    "  \"num_attention_heads\": 128,\n"
    "  \"num_experts_per_tok\": 8,\n"
    "  \"num_hidden_layers\": 61,\n"
    "  \"num_key_value_heads\": 128,\n"
    "  \"num_nextn_predict_layers\": 1,\n"
    "  \"q_lora_rank\": 1536,\n"
    "  \"qk_nope_head_dim\": 128,\n"
    "  \"qk_rope_head_dim\": 64,\n"
    "  \"quantization_config\": {\n"
    "    \"activation_scheme\": \"dynamic\",\n"
    "    \"fmt\": \"e4m3\",\n"
    "    \"quant_method\": \"fp8\",\n"
    "    \"weight_block_size\": [128, 128]\n"
    "  },\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_scaling\": {\n"
    "    \"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0,\n"
    "    \"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"\n"
    "  },\n"
    "  \"rope_theta\": 10000,\n"
    "  \"routed_scaling_factor\": 2.5,\n"
    "  \"scoring_func\": \"sigmoid\",\n"
    "  \"tie_word_embeddings\": false,\n"
    "  \"topk_group\": 4,\n"
    "  \"topk_method\": \"noaux_tc\",\n"
    "  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.33.1\",\n"
    "  \"use_cache\": true,\n"
    "  \"v_head_dim\": 128,\n"
    "  \"vocab_size\": 129280\n"
    "}\n";

static void test_deepseek_v3_mla(void **state)
{
    struct qr_hfconfig *hf = parse_ok(DEEPSEEK_V3);
    const struct qr_arch *a = &hf->arch;
    assert_true(qr_slice_eq(a->architecture.v, "deepseek2"));
    U64(a->block_count, 61);
    U64(a->expert_count, 256);
    U64(a->expert_used_count, 8);
    U64(a->expert_shared_count, 1);
    U64(a->expert_feed_forward_length, 2048);
    U64(a->leading_dense_block_count, 3);
    assert_false(a->leading_dense_from_tensors);
    U64(a->rope_dimension_count, 64);
    assert_true(qr_slice_eq(a->rope_scaling_type.v, "yarn"));
    assert_true(a->rope_scaling_factor.known && a->rope_scaling_factor.v == 40.0);
    assert_true(a->rope_freq_base.known && a->rope_freq_base.v == 10000.0); /* an integer */
    /* MLA: no plain head dims are stated; the latent ranks are translated to their GGUF keys. */
    assert_false(a->key_length.known);
    assert_false(a->value_length.known);
    const struct qr_gguf_kv *kv = qr_gguf_find(hf->gguf, "deepseek2.attention.kv_lora_rank");
    uint64_t v = 0;
    assert_non_null(kv);
    assert_int_equal(qr_gguf_kv_u64(kv, &v), QR_OK);
    assert_int_equal(v, 512);
    assert_int_equal(qr_gguf_get_u64(hf->gguf, "deepseek2.attention.q_lora_rank", &v), QR_OK);
    assert_int_equal(v, 1536);
    assert_int_equal(qr_gguf_get_u64(hf->gguf, "deepseek2.expert_group_count", &v), QR_OK);
    assert_int_equal(v, 8);
    float f = 0;
    assert_int_equal(qr_gguf_get_f32(hf->gguf, "deepseek2.expert_weights_scale", &f), QR_OK);
    assert_true(f == 2.5f);
    /* The sizing rules see the MLA layout and leave the KV unknown. */
    struct qr_sizing sz;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_size(hf->gguf, a, 4096, 200, &sz, &d), QR_OK);
    assert_int_equal(sz.kv, QR_SIZING_KV_MLA);
    assert_true(hf->quant_method.known && qr_slice_eq(hf->quant_method.v, "fp8"));
    assert_true(has_unknown(hf, "qk_nope_head_dim"));
    assert_true(has_unknown(hf, "topk_method"));
    assert_true(has_unknown(hf, "scoring_func"));
    assert_true(has_unknown(hf, "auto_map"));
    assert_true(has_unknown(hf, "rope_scaling.beta_fast"));
    assert_true(has_unknown(hf, "quantization_config.fmt"));
    assert_true(has_unknown(hf, "quantization_config.weight_block_size"));
    assert_false(has_unknown(hf, "quantization_config.quant_method"));
    qr_hfconfig_free(hf);
}

static const char BERT[] = "{\n"
                           "  \"architectures\": [\"BertForMaskedLM\"],\n"
                           "  \"attention_probs_dropout_prob\": 0.1,\n"
                           "  \"gradient_checkpointing\": false,\n"
                           "  \"hidden_act\": \"gelu\",\n"
                           "  \"hidden_dropout_prob\": 0.1,\n"
                           "  \"hidden_size\": 768,\n"
                           "  \"initializer_range\": 0.02,\n"
                           "  \"intermediate_size\": 3072,\n"
                           "  \"layer_norm_eps\": 1e-12,\n"
                           "  \"max_position_embeddings\": 512,\n"
                           "  \"model_type\": \"bert\",\n"
                           "  \"num_attention_heads\": 12,\n"
                           "  \"num_hidden_layers\": 12,\n"
                           "  \"pad_token_id\": 0,\n"
                           "  \"position_embedding_type\": \"absolute\",\n"
                           "  \"transformers_version\": \"4.6.0.dev0\",\n"
                           "  \"type_vocab_size\": 2,\n"
                           "  \"use_cache\": true,\n"
                           "  \"vocab_size\": 30522\n"
                           "}\n";

static void test_bert_encoder(void **state)
{
    struct qr_hfconfig *hf = parse_ok(BERT);
    const struct qr_arch *a = &hf->arch;
    assert_true(qr_slice_eq(a->architecture.v, "bert"));
    U64(a->block_count, 12);
    U64(a->embedding_length, 768);
    U64(a->context_length, 512);
    assert_true(a->head_count.known && a->head_count.min == 12);
    assert_false(a->head_count_kv.known); /* not stated; not copied from head_count */
    assert_false(a->pooling_type.known);  /* lives in sentence-transformers files, not here */
    U64(a->pad_token_id, 0);
    U64(a->vocab_size, 30522);
    assert_true(has_unknown(hf, "type_vocab_size"));
    assert_true(has_unknown(hf, "position_embedding_type"));
    assert_true(has_unknown(hf, "gradient_checkpointing"));
    assert_int_equal(hf->n_unknown, 4);     /* and hidden_act */
    assert_int_equal(a->n_unknown_keys, 0); /* layer_norm_epsilon is recognized by the contract */
    qr_hfconfig_free(hf);
}

static void test_not_json(void **state)
{
    fails("model_type: llama", QR_ERR_PARSE, "not JSON");
    fails("", QR_ERR_PARSE, "not JSON");
    fails("{\"model_type\": \"llama\",}", QR_ERR_PARSE, "not JSON");
    fails("{\"model_type\": \"llama\"} trailing", QR_ERR_PARSE, "not JSON");
    fails("[{\"model_type\": \"llama\"}]", QR_ERR_PARSE, "not a JSON object (array)");
    fails("\"llama\"", QR_ERR_PARSE, "not a JSON object (string)");
    fails("null", QR_ERR_PARSE, "not a JSON object (null)");
    fails("{\"model_type\": \"llama\", \"rope_theta\": NaN}", QR_ERR_PARSE, "not JSON");
}

static void test_wrong_types(void **state)
{
    fails("{\"model_type\": \"llama\", \"num_hidden_layers\": \"32\"}", QR_ERR_INVALID,
          "'num_hidden_layers' must be an integer, got string");
    fails("{\"model_type\": \"llama\", \"num_hidden_layers\": -1}", QR_ERR_INVALID,
          "'num_hidden_layers' must not be negative, got -1");
    fails("{\"model_type\": \"llama\", \"num_hidden_layers\": 4294967296}", QR_ERR_INVALID,
          "'num_hidden_layers' is 4294967296, above the u32 range");
    fails("{\"model_type\": \"llama\", \"hidden_size\": 18446744073709551615}", QR_ERR_INVALID,
          "'hidden_size' is 18446744073709551615, above the u32 range");
    fails("{\"model_type\": \"llama\", \"hidden_size\": 1e30}", QR_ERR_INVALID,
          "'hidden_size' must be an integer, got real number");
    fails("{\"model_type\": \"llama\", \"head_dim\": 128.5}", QR_ERR_INVALID,
          "'head_dim' must be an integer, got real number");
    fails("{\"model_type\": \"llama\", \"rope_theta\": \"1e6\"}", QR_ERR_INVALID,
          "'rope_theta' must be a number, got string");
    fails("{\"model_type\": \"llama\", \"rope_theta\": 1e300}", QR_ERR_INVALID,
          "'rope_theta' is 1e+300, outside the f32 range");
    fails("{\"model_type\": \"llama\", \"rope_scaling\": \"yarn\"}", QR_ERR_INVALID,
          "'rope_scaling' must be an object, got string");
    fails("{\"model_type\": \"llama\", \"rope_scaling\": {\"factor\": true}}", QR_ERR_INVALID,
          "'rope_scaling.factor' must be a number, got boolean");
    fails("{\"model_type\": \"llama\", \"tie_word_embeddings\": 1}", QR_ERR_INVALID,
          "'tie_word_embeddings' must be a boolean, got integer");
    fails("{\"model_type\": \"qwen2\", \"sliding_window\": 4, \"use_sliding_window\": \"no\"}",
          QR_ERR_INVALID, "'use_sliding_window' must be a boolean, got string");
    fails("{\"model_type\": \"llama\", \"eos_token_id\": [\"</s>\"]}", QR_ERR_INVALID,
          "'eos_token_id' must be an integer, got string");
    fails("{\"model_type\": \"gemma3\", \"text_config\": {\"hidden_size\": [2560]}}",
          QR_ERR_INVALID, "'text_config.hidden_size' must be an integer, got array");
    fails("{\"model_type\": \"gemma3\", \"text_config\": \"gemma3_text\"}", QR_ERR_INVALID,
          "'text_config' must be an object, got string");
    fails("{\"model_type\": \"gemma3\", \"vision_config\": []}", QR_ERR_INVALID,
          "'vision_config' must be an object, got array");
    fails("{\"model_type\": 7}", QR_ERR_INVALID, "'model_type' must be a string, got integer");
    fails("{\"model_type\": \"lla.ma\"}", QR_ERR_INVALID, "'model_type' must be 1..64 characters");
    fails("{\"model_type\": \"\"}", QR_ERR_INVALID, "'model_type' must be 1..64 characters");
    fails("{\"num_hidden_layers\": 2}", QR_ERR_INVALID, "'model_type' is missing");
    fails("{\"model_type\": \"llama\", \"num_hidden_layers\": 1, \"num_hidden_layers\": 2}",
          QR_ERR_INVALID, "duplicate field 'num_hidden_layers'");
    fails("{\"model_type\": \"gemma3\", \"sliding_window_pattern\": 0, \"num_hidden_layers\": 4}",
          QR_ERR_INVALID, "'sliding_window_pattern' must be at least 1");
}

static void test_layer_types_hostile(void **state)
{
    fails("{\"model_type\": \"gemma3\", \"layer_types\": \"sliding_attention\"}", QR_ERR_INVALID,
          "'layer_types' must be an array, got string");
    fails("{\"model_type\": \"gemma3\", \"layer_types\": []}", QR_ERR_INVALID,
          "'layer_types' has 0 entries");
    fails("{\"model_type\": \"gemma3\", \"layer_types\": [\"full_attention\", 1]}", QR_ERR_INVALID,
          "'layer_types[1]' must be a string, got integer");
    fails("{\"model_type\": \"gemma3\", \"num_hidden_layers\": 3, \"layer_types\": "
          "[\"full_attention\", \"sliding_attention\"]}",
          QR_ERR_INVALID, "'layer_types' has 2 entries but the model has 3 layers");
    /* A million entries: refused by count before any element is read. */
    size_t n = 1000000;
    char *big = malloc(n * 3 + 64);
    size_t len = (size_t) sprintf(big, "{\"model_type\": \"gemma3\", \"layer_types\": [");
    for (size_t i = 0; i < n; i++)
        len += (size_t) sprintf(big + len, "%s\"\"", i ? "," : "");
    len += (size_t) sprintf(big + len, "]}");
    parse_fails(big, len, QR_ERR_TOO_LARGE, "'layer_types' has 1000000 entries, not 1..65536");
    free(big);
    /* A layer type no rule maps: the pattern stays unknown, with a note; not an error. */
    struct qr_hfconfig *hf =
        parse_ok("{\"model_type\": \"qwen3_next\", \"num_hidden_layers\": 2, \"layer_types\": "
                 "[\"linear_attention\", \"full_attention\"]}");
    assert_false(hf->arch.sliding_window_pattern.known);
    assert_true(has_note(hf, "layer_types: layer 0 has a type no rule maps"));
    qr_hfconfig_free(hf);
}

static void test_unknown_model_type(void **state)
{
    struct qr_hfconfig *hf = parse_ok("{\"model_type\": \"frobnicator\", \"num_hidden_layers\": 6, "
                                      "\"hidden_size\": 512, \"frob_factor\": 3}");
    const struct qr_arch *a = &hf->arch;
    assert_false(hf->arch_mapped);
    assert_true(a->architecture.known && qr_slice_eq(a->architecture.v, "frobnicator"));
    assert_true(has_note(hf, "model_type 'frobnicator' has no architecture mapping"));
    U64(a->block_count, 6); /* the field names are the reference's, whatever the family */
    U64(a->embedding_length, 512);
    assert_true(has_unknown(hf, "frob_factor"));
    assert_int_equal(a->ffn, QR_ARCH_FFN_UNKNOWN);
    qr_hfconfig_free(hf);

    /* An unmapped top level with a mapped text model (llava style): the text model's name. */
    hf = parse_ok("{\"model_type\": \"llava\", \"text_config\": {\"model_type\": \"llama\", "
                  "\"num_hidden_layers\": 32}, \"vision_config\": {\"model_type\": \"clip\"}}");
    assert_true(hf->arch_mapped);
    assert_true(qr_slice_eq(hf->arch.architecture.v, "llama"));
    assert_true(qr_slice_eq(hf->model_type, "llava"));
    assert_int_equal(hf->modalities, QR_HF_VISION);
    qr_hfconfig_free(hf);
}

static void test_caps(void **state)
{
    /* Deep nesting, in an unmapped field: refused before parsing. */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 64);
    size_t len = (size_t) sprintf(deep, "{\"model_type\": \"llama\", \"x\": ");
    memset(deep + len, '[', depth);
    memset(deep + len + depth, ']', depth);
    len += 2 * depth;
    len += (size_t) sprintf(deep + len, "}");
    parse_fails(deep, len, QR_ERR_TOO_LARGE, "nested deeper than 32 levels");
    free(deep);
    /* 32 levels are fine; brackets inside strings do not count. */
    struct qr_hfconfig *hf =
        parse_ok("{\"model_type\": \"llama\", \"s\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\", "
                 "\"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}");
    assert_true(has_unknown(hf, "x") && has_unknown(hf, "s"));
    qr_hfconfig_free(hf);
    /* The size cap. */
    size_t n = QR_HF_MAX_CONFIG_BYTES + 1;
    char *huge = malloc(n);
    memset(huge, ' ', n);
    memcpy(huge, "{\"model_type\": \"llama\"}", 23);
    parse_fails(huge, n, QR_ERR_TOO_LARGE, "more than the 4194304-byte cap");
    free(huge);
    /* A mapped string past its cap. */
    char s[600];
    sprintf(s, "{\"model_type\": \"llama\", \"torch_dtype\": \"%0400d\"}", 0);
    fails(s, QR_ERR_TOO_LARGE, "'torch_dtype' is longer than 256 bytes");
}

static void test_null_tokens_and_mlx(void **state)
{
    /* null: not stated; a negative token id is HF's "none"; an MLX quantization block. */
    struct qr_hfconfig *hf = parse_ok(
        "\xef\xbb\xbf{\"model_type\": \"llama\", \"head_dim\": null, \"sliding_window\": null, "
        "\"pad_token_id\": -1, \"bos_token_id\": [], \"eos_token_id\": [2, 3], "
        "\"quantization\": {\"group_size\": 64, \"bits\": 4}, "
        "\"quantization_config\": {\"group_size\": 64, \"bits\": 4}, "
        "\"weird\\u0001name\": 1, \""
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": "
        "2}");
    const struct qr_arch *a = &hf->arch;
    assert_false(a->key_length.known);
    assert_false(a->sliding_window.known);
    assert_false(a->pad_token_id.known);
    assert_false(a->bos_token_id.known);
    U64(a->eos_token_id, 2);
    U64(hf->quant_bits, 4);
    U64(hf->quant_group_size, 64);
    assert_false(hf->quant_method.known);
    assert_int_equal(hf->n_unknown, 2);
    assert_int_equal(hf->unknown[0].len, 10);
    assert_memory_equal(hf->unknown[0].name, "weird\x01name", 10);
    assert_true(hf->unknown[1].cut);
    assert_int_equal(hf->unknown[1].len, QR_HF_MAX_FIELD);
    qr_hfconfig_free(hf);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_directory_and_probe(void **state)
{
    char dir[] = "/tmp/qr-hfconfig-XXXXXX";
    char cfg[128], idx[128], gguf[128], other[128];
    assert_non_null(mkdtemp(dir));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    snprintf(gguf, sizeof gguf, "%s/m.gguf", dir);
    snprintf(other, sizeof other, "%s/sub", dir);

    struct qr_diag d = {{0}};
    struct qr_hfconfig *hf = NULL;
    assert_int_equal(qr_hfconfig_open(dir, &d, &hf), QR_ERR_NOT_FOUND); /* no config.json */
    assert_non_null(strstr(d.msg, "config.json"));
    assert_null(hf);

    write_file(cfg, QWEN3_MOE);
    write_file(idx, "{\"metadata\": {\"total_size\": 61064245248}, \"weight_map\": "
                    "{\"lm_head.weight\": \"model-00016-of-00016.safetensors\"}}");
    write_file(gguf, "GGUF\x03");
    assert_true(qr_hfconfig_probe(dir));
    assert_true(qr_hfconfig_probe(cfg));
    assert_false(qr_hfconfig_probe(gguf));
    assert_false(qr_hfconfig_probe(other)); /* does not exist */

    assert_int_equal(qr_hfconfig_open(dir, &d, &hf), QR_OK);
    assert_true(qr_slice_eq(hf->arch.architecture.v, "qwen3moe"));
    U64(hf->weight_bytes, 61064245248ull);
    assert_string_equal(hf->weight_bytes_from, QR_HF_INDEX_FILE);
    qr_hfconfig_free(hf);
    assert_int_equal(qr_hfconfig_open(cfg, &d, &hf), QR_OK); /* the file itself: same */
    U64(hf->weight_bytes, 61064245248ull);
    qr_hfconfig_free(hf);

    /* A broken index: weight bytes unknown, with a note; the config still reads. */
    write_file(idx, "{\"metadata\": {\"total_size\": \"lots\"}}");
    assert_int_equal(qr_hfconfig_open(dir, &d, &hf), QR_OK);
    assert_false(hf->weight_bytes.known);
    assert_true(has_note(hf, "no integer metadata.total_size"));
    qr_hfconfig_free(hf);

    /* A single model.safetensors: its data section. */
    unlink(idx);
    char st[128];
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    FILE *f = fopen(st, "wb");
    static const uint8_t hdr[8] = {4, 0, 0, 0, 0, 0, 0, 0};
    fwrite(hdr, 1, 8, f);
    fwrite("{}  0123456789", 1, 14, f);
    fclose(f);
    assert_int_equal(qr_hfconfig_open(dir, &d, &hf), QR_OK);
    U64(hf->weight_bytes, 10);
    qr_hfconfig_free(hf);

    write_file(cfg, "{\"model_type\": \"llama\", \"num_hidden_layers\": \"x\"}");
    assert_int_equal(qr_hfconfig_open(dir, &d, &hf), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "config.json': 'num_hidden_layers' must be an integer"));
    unlink(st);
    unlink(cfg);
    unlink(gguf);
    rmdir(dir);
}

int qr_cli_inspect(int argc, char **argv); /* src/cli/inspect.c */

/* Run `inspect ARGS` with stdout captured into a malloc'ed string; the exit code in *rc. */
static char *run_inspect(char **argv, int argc, int *rc)
{
    char tmpl[] = "/tmp/qr-hfconfig-out-XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    *rc = qr_cli_inspect(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *out = calloc(1, (size_t) n + 1);
    assert_int_equal(pread(fd, out, (size_t) n, 0), n);
    close(fd);
    unlink(tmpl);
    return out;
}

static void test_inspect_dispatch(void **state)
{
    char dir[] = "/tmp/qr-hfconfig-XXXXXX", cfg[128], gguf[128];
    assert_non_null(mkdtemp(dir));
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(gguf, sizeof gguf, "%s/m.gguf", dir);
    write_file(cfg, QWEN3_MOE);
    int rc;
    char *out = run_inspect((char *[]){dir}, 1, &rc);
    assert_int_equal(rc, 0);
    assert_true(!strncmp(out, "source: hf-config\narchitecture: qwen3moe\n", 40));
    assert_non_null(strstr(out, "\nexpert_count: 128\n"));
    assert_non_null(strstr(out, "\nffn: unknown\n"));
    assert_non_null(strstr(out, "\nhf.model_type: qwen3_moe\n"));
    assert_non_null(strstr(out, "\nhf.unknown_fields: [attention_bias,decoder_sparse_step,"));
    free(out);
    out = run_inspect((char *[]){cfg, "--json"}, 2, &rc);
    assert_int_equal(rc, 0);
    assert_true(!strncmp(out, "{\"source\":\"hf-config\",\"architecture\":\"qwen3moe\",", 47));
    assert_non_null(
        strstr(out, ",\"hf\":{\"model_type\":\"qwen3_moe\",\"architecture_mapped\":true,"));
    free(out);

    /* A GGUF file keeps its output: no source line. */
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("llama"));
    qr_gguf_writer_add_u32(w, "llama.block_count", 2);
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_writer_write_file(w, gguf, &d), QR_OK);
    qr_gguf_writer_free(w);
    out = run_inspect((char *[]){gguf}, 1, &rc);
    assert_int_equal(rc, 0);
    assert_true(!strncmp(out, "architecture: llama\nblock_count: 2\n", 35));
    assert_null(strstr(out, "source"));
    assert_null(strstr(out, "hf."));
    free(out);
    unlink(gguf);
    unlink(cfg);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_dense),
        cmocka_unit_test(test_qwen3_moe),
        cmocka_unit_test(test_gemma3_multimodal),
        cmocka_unit_test(test_gemma4_per_layer),
        cmocka_unit_test(test_deepseek_v3_mla),
        cmocka_unit_test(test_bert_encoder),
        cmocka_unit_test(test_not_json),
        cmocka_unit_test(test_wrong_types),
        cmocka_unit_test(test_layer_types_hostile),
        cmocka_unit_test(test_unknown_model_type),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_null_tokens_and_mlx),
        cmocka_unit_test(test_directory_and_probe),
        cmocka_unit_test(test_inspect_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
