/* The architecture contract: what a GGUF model file IS, derived by generic rules over the
 * `<arch>.*` keys, the tokenizer keys and the tensor table (arch.c). No rule branches on a family
 * name; per-architecture differences are data (key-name variants, tensor-name markers).
 *
 * Every field carries a known flag. A field is known only when the file states it (a key of the
 * expected type) or when a stated rule derives it from what the file states (the tensor table);
 * nothing is defaulted the way a loader would default it, so "unknown" means the file does not
 * say. Strings and per-layer arrays are views into the open file: a struct qr_arch is valid only
 * while the struct qr_gguf it was derived from is open. It owns no memory (no cleanup). */
#ifndef QR_GGUF_ARCH_H
#define QR_GGUF_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"
#include "gguf/gguf.h"
#include "gguf/sha256.h"

#define QR_ARCH_MAX_NAME    64u    /* bytes of general.architecture used to build key names */
#define QR_ARCH_MAX_UNKNOWN 64u    /* unknown key names kept (n_unknown_keys counts all) */
#define QR_ARCH_MAX_LAYERS  65536u /* per-layer arrays longer than this are not read */
#define QR_ARCH_MAX_BLOCKS                                                                         \
    512u                          /* block_count above this is invalid (llama.cpp's                \
                                     LLAMA_MAX_LAYERS; a larger count once wrote out of bounds) */
#define QR_ARCH_MAX_EXPERTS 4096u /* expert_count above this is invalid (upstream caps at 512) */
#define QR_ARCH_MAX_INVALID 8u    /* invalid values kept (n_invalid counts all) */

struct qr_arch_u64 {
    bool known;
    uint64_t v;
};

struct qr_arch_f64 {
    bool known;
    double v;
};

struct qr_arch_bool {
    bool known;
    bool v;
};

struct qr_arch_str {
    bool known;
    struct qr_slice v; /* borrowed from the file */
};

/* A hyperparameter that is one number or one number per layer (e.g. head_count_kv). For a
 * per-layer array every element converted to u64 at derive time; min and max summarize it. */
struct qr_arch_layers {
    bool known;
    const struct qr_gguf_kv *arr; /* borrowed; NULL when the key is a scalar */
    uint64_t min, max;            /* the scalar, or the array's extremes */
};

/* The value for layer il: the scalar, the array element, or false when unknown/out of range. */
bool qr_arch_layers_at(const struct qr_arch_layers *l, uint64_t il, uint64_t *out);

/* Which layers use the sliding window: a bool (or integer, non-zero = sliding) array with one
 * entry per layer. A scalar is not read (llama.cpp's reader would apply one value to every layer,
 * older converters wrote a period: the meaning is ambiguous, so the key is listed unknown). */
struct qr_arch_pattern {
    bool known;
    const struct qr_gguf_kv *arr; /* borrowed */
    uint64_t n_layers, n_swa, n_global;
};

/* Whether layer il slides; false when the pattern is unknown or il is out of range. */
bool qr_arch_pattern_swa(const struct qr_arch_pattern *p, uint64_t il, bool *out);

enum qr_arch_ffn {
    QR_ARCH_FFN_UNKNOWN = 0, /* no tensors, or expert_count and the expert tensors disagree */
    QR_ARCH_FFN_DENSE = 1,   /* no expert tensors and expert_count absent or 0 */
    QR_ARCH_FFN_MOE = 2,     /* expert_count > 0 and expert tensors present */
};

/* Chat template markers (bit flags), detected by substring; qr_arch_marker_name names a bit. */
enum qr_arch_marker {
    QR_ARCH_TPL_CHATML = 1u << 0,            /* <|im_start|> */
    QR_ARCH_TPL_HERMES_TOOLS = 1u << 1,      /* <tool_call> */
    QR_ARCH_TPL_THINK = 1u << 2,             /* <think> */
    QR_ARCH_TPL_TOOL_RESPONSE = 1u << 3,     /* <tool_response> */
    QR_ARCH_TPL_INST = 1u << 4,              /* [INST] */
    QR_ARCH_TPL_TURNS = 1u << 5,             /* <start_of_turn> */
    QR_ARCH_TPL_HEADERS = 1u << 6,           /* <|start_header_id|> */
    QR_ARCH_TPL_CHANNELS = 1u << 7,          /* <|channel|> */
    QR_ARCH_TPL_GENERATION_PROMPT = 1u << 8, /* add_generation_prompt */
    QR_ARCH_TPL_TOOLS_VAR = 1u << 9,         /* the template reads a `tools` variable */
};
#define QR_ARCH_TPL_MARKER_COUNT 10u

/* Static short name of one marker bit ("chatml", "hermes-tools", ...); NULL for other values. */
const char *qr_arch_marker_name(unsigned bit);
/* The marker bits found in a template text (exposed for tests). */
unsigned qr_arch_template_markers(struct qr_slice tpl);

/* Static lowercase name of a pooling_type value ("none", "mean", "cls", "last", "rank") or NULL,
 * and of a general.file_type value ("mostly_q4_k_m", ...) or NULL. */
const char *qr_arch_pooling_name(uint64_t v);
const char *qr_arch_file_type_name(uint64_t v);
/* Static lowercase name of an expert_gating_func value ("none", "softmax", "sigmoid",
 * "softmax_weight", "sqrt_softplus") or NULL. */
const char *qr_arch_gating_name(uint64_t v);

/* A value the file states but the contract refuses to use (above a cap, or inconsistent): the
 * field is left unknown and the value is kept here with the reason. Strings are static. */
struct qr_arch_invalid {
    const char *field; /* the contract field name, e.g. "block_count" */
    uint64_t value;
    const char *reason; /* e.g. "above the cap 512" */
};

struct qr_arch {
    struct qr_arch_str architecture; /* general.architecture */

    /* Shape */
    struct qr_arch_u64 block_count, embedding_length, context_length, vocab_size;
    struct qr_arch_layers feed_forward_length, head_count, head_count_kv;
    struct qr_arch_u64 key_length, value_length, key_length_swa, value_length_swa;
    /* Per-head K and V widths of full-attention and of sliding layers: the length keys above,
     * else read from the tensor table (attn_k / attn_v width over head_count_kv, a fused attn_qkv
     * over head_count + 2 * head_count_kv), known only when every layer with such a tensor
     * agrees. The _swa pair is known only for files with sliding layers. */
    struct qr_arch_u64 head_dim_k, head_dim_v, head_dim_k_swa, head_dim_v_swa;
    bool head_dims_from_tensors; /* some head_dim_* came from the tensor table */

    /* Multi-head latent attention (compressed KV) and normalization */
    struct qr_arch_u64 kv_lora_rank, q_lora_rank, key_length_mla, value_length_mla;
    struct qr_arch_f64 layer_norm_epsilon, layer_norm_rms_epsilon;
    struct qr_arch_bool causal;              /* attention.causal: false for encoders */
    struct qr_arch_u64 nextn_predict_layers; /* extra multi-token-prediction layers */

    /* RoPE */
    struct qr_arch_f64 rope_freq_base, rope_freq_base_swa, rope_scaling_factor;
    struct qr_arch_u64 rope_dimension_count, rope_dimension_count_swa;
    struct qr_arch_str rope_scaling_type;

    /* Experts */
    enum qr_arch_ffn ffn;
    struct qr_arch_u64 expert_count, expert_used_count, expert_shared_count;
    struct qr_arch_u64 expert_feed_forward_length;
    struct qr_arch_u64 expert_gating_func; /* qr_arch_gating_name */
    struct qr_arch_f64 expert_weights_scale;
    struct qr_arch_bool expert_weights_norm;
    struct qr_arch_u64 leading_dense_block_count; /* the key, else counted from the tensors */
    bool leading_dense_from_tensors;              /* how leading_dense_block_count was found */
    uint64_t n_expert_tensors, n_shared_expert_tensors;

    /* Attention layout */
    struct qr_arch_u64 sliding_window;
    struct qr_arch_pattern sliding_window_pattern;
    struct qr_arch_u64 shared_kv_layers;
    struct qr_arch_u64 embedding_length_per_layer_input;
    struct qr_arch_bool per_layer_embeddings; /* per_layer tensors, else the key > 0 */
    struct qr_arch_f64 final_logit_softcapping, attn_logit_softcapping;
    struct qr_arch_u64 pooling_type;

    /* Tokenizer */
    struct qr_arch_str tokenizer_model, tokenizer_pre;
    struct qr_arch_u64 bos_token_id, eos_token_id, pad_token_id;
    struct qr_arch_u64 token_type_count; /* tokenizer.ggml.token_type_count (encoders) */
    struct qr_arch_bool add_bos_token, add_space_prefix;
    bool chat_template_known;
    uint64_t chat_template_len;
    uint8_t chat_template_sha256[QR_SHA256_LEN];
    unsigned chat_template_markers; /* enum qr_arch_marker bits */

    /* Quantization and parameters */
    struct qr_arch_u64 file_type; /* general.file_type */
    uint64_t tensor_type_count[QR_GGML_TYPE_COUNT];
    uint64_t tensor_type_bytes[QR_GGML_TYPE_COUNT];
    uint64_t n_tensors;
    struct qr_arch_u64 params_total;  /* sum of tensor elements; known when there are tensors */
    struct qr_arch_u64 params_active; /* experts counted as used/count of their elements */

    /* Stated values refused by a cap or a consistency rule (the field stays unknown): block_count
     * above QR_ARCH_MAX_BLOCKS, expert_count above QR_ARCH_MAX_EXPERTS, expert_used_count above
     * expert_count, leading_dense_block_count above block_count. */
    size_t n_invalid;
    struct qr_arch_invalid invalid[QR_ARCH_MAX_INVALID]; /* the first ones */

    /* `<arch>.*` keys no rule read (unrecognized name or unexpected type), in file order. */
    size_t n_unknown_keys;
    struct qr_slice unknown_keys[QR_ARCH_MAX_UNKNOWN]; /* borrowed; the first ones */
};

/* Derive the contract of an open file into *out (caller storage, fully overwritten). Fails only
 * when general.architecture is present but unusable as a key prefix (QR_ERR_INVALID: longer than
 * QR_ARCH_MAX_NAME or not printable ASCII), with diag naming it; a missing architecture leaves
 * every `<arch>.*` field unknown. g is borrowed and must outlive *out. */
enum qr_err qr_gguf_arch_derive(const struct qr_gguf *g, struct qr_arch *out, struct qr_diag *diag);

#endif
