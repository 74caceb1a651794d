/* Hugging Face config.json -> the architecture contract. The config is parsed with yyjson after
 * a size cap and a nesting-depth scan, then translated by two tables into a keys-only GGUF built
 * with the writer: MODEL_TYPES maps the HF model_type to the llama.cpp architecture name, RULES
 * maps HF field paths ("rope_scaling.factor") to `<arch>.*` key suffixes or `tokenizer.ggml.*`
 * keys, to HF-only facts in struct qr_hfconfig, or marks them recognized (bookkeeping that states
 * nothing about the model). A field may have several rows (name variants, or one HF field feeding
 * two keys): the first row that applies to a key wins, and every present variant is type-checked.
 * A gate makes a row depend on another field (sliding_window only when use_sliding_window is not
 * false; head_dim is the sliding layers' head dim when global_head_dim is stated). The GGUF is
 * then read back with the hardened reader and qr_gguf_arch_derive() fills the contract: one set
 * of contract rules for both sources. Nothing branches on a family name. */
#include "gguf/hfconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

/* HF model_type -> llama.cpp architecture name (general.architecture). */
static const struct {
    const char *hf, *arch;
} MODEL_TYPES[] = {
    {"llama", "llama"},
    {"mistral", "llama"},
    {"mixtral", "llama"},
    {"llama4", "llama4"},
    {"llama4_text", "llama4"},
    {"qwen2", "qwen2"},
    {"qwen2_moe", "qwen2moe"},
    {"qwen2_vl", "qwen2vl"},
    {"qwen2_5_vl", "qwen2vl"},
    {"qwen3", "qwen3"},
    {"qwen3_moe", "qwen3moe"},
    {"gemma", "gemma"},
    {"gemma2", "gemma2"},
    {"gemma3", "gemma3"},
    {"gemma3_text", "gemma3"},
    {"gemma3n", "gemma3n"},
    {"gemma3n_text", "gemma3n"},
    {"gemma4", "gemma4"},
    {"gemma4_text", "gemma4"},
    {"phi3", "phi3"},
    {"phimoe", "phimoe"},
    {"deepseek_v2", "deepseek2"},
    {"deepseek_v3", "deepseek2"},
    {"glm4", "glm4"},
    {"glm4_moe", "glm4moe"},
    {"gpt_oss", "gpt-oss"},
    {"gpt2", "gpt2"},
    {"starcoder2", "starcoder2"},
    {"olmo2", "olmo2"},
    {"cohere", "command-r"},
    {"cohere2", "cohere2"},
    {"granite", "granite"},
    {"granitemoe", "granitemoe"},
    {"bert", "bert"},
    {"nomic_bert", "nomic-bert"},
};

enum vkind {
    V_ANY,         /* recognized only: not read */
    V_U32,         /* non-negative integer below 2^32 */
    V_F32,         /* finite number within float range */
    V_BOOL,        /* true / false */
    V_STR,         /* string of at most QR_HF_MAX_STR bytes */
    V_TOKEN,       /* token id: integer or list (the first); negative means none */
    V_LAYER_TYPES, /* ["sliding_attention", "full_attention", ...] -> per-layer bool array */
    V_PERIOD,      /* sliding_window_pattern N: layer il slides unless (il + 1) % N == 0 */
    V_FULL_LAYERS, /* a value for the full-attention layers: with the sliding layers' value (the
                      next row for the same key) and the pattern, one value per layer */
};

enum gate {
    GATE_NONE,
    GATE_NOT_FALSE, /* applies unless the gate field is false */
    GATE_PRESENT,   /* applies only when the gate field is stated */
    GATE_ABSENT,    /* applies only when the gate field is not stated */
};

#define NO_FIELD SIZE_MAX

/* One mapping row. key: a `<arch>.` suffix, or a whole key when it starts with "tokenizer.";
 * NULL with hf_off: an HF-only fact stored in struct qr_hfconfig; NULL without: recognized. */
struct rule {
    const char *path;
    enum vkind kind;
    const char *key;
    size_t hf_off;
    const char *gate;
    enum gate gate_kind;
};

#define K(path, kind, key)                                                                         \
    {                                                                                              \
        path, kind, key, NO_FIELD, NULL, GATE_NONE                                                 \
    }
#define KG(path, kind, key, gate, gk)                                                              \
    {                                                                                              \
        path, kind, key, NO_FIELD, gate, gk                                                        \
    }
#define H(path, kind, field)                                                                       \
    {                                                                                              \
        path, kind, NULL, offsetof(struct qr_hfconfig, field), NULL, GATE_NONE                     \
    }
#define R(path)                                                                                    \
    {                                                                                              \
        path, V_ANY, NULL, NO_FIELD, NULL, GATE_NONE                                               \
    }

static const struct rule RULES[] = {
    /* Shape */
    K("num_hidden_layers", V_U32, "block_count"),
    K("n_layer", V_U32, "block_count"),
    K("hidden_size", V_U32, "embedding_length"),
    K("n_embd", V_U32, "embedding_length"),
    K("max_position_embeddings", V_U32, "context_length"),
    K("n_positions", V_U32, "context_length"),
    K("intermediate_size", V_U32, "feed_forward_length"),
    K("n_inner", V_U32, "feed_forward_length"),
    K("num_attention_heads", V_U32, "attention.head_count"),
    K("n_head", V_U32, "attention.head_count"),
    K("num_global_key_value_heads", V_FULL_LAYERS, "attention.head_count_kv"),
    K("num_key_value_heads", V_U32, "attention.head_count_kv"),
    K("global_head_dim", V_U32, "attention.key_length"),
    K("global_head_dim", V_U32, "attention.value_length"),
    KG("head_dim", V_U32, "attention.key_length", "global_head_dim", GATE_ABSENT),
    KG("head_dim", V_U32, "attention.value_length", "global_head_dim", GATE_ABSENT),
    KG("head_dim", V_U32, "attention.key_length_swa", "global_head_dim", GATE_PRESENT),
    KG("head_dim", V_U32, "attention.value_length_swa", "global_head_dim", GATE_PRESENT),
    K("vocab_size", V_U32, "vocab_size"),
    /* Attention layout */
    KG("sliding_window", V_U32, "attention.sliding_window", "use_sliding_window", GATE_NOT_FALSE),
    K("layer_types", V_LAYER_TYPES, "attention.sliding_window_pattern"),
    K("sliding_window_pattern", V_PERIOD, "attention.sliding_window_pattern"),
    K("num_kv_shared_layers", V_U32, "attention.shared_kv_layers"),
    K("hidden_size_per_layer_input", V_U32, "embedding_length_per_layer_input"),
    K("final_logit_softcapping", V_F32, "final_logit_softcapping"),
    K("attn_logit_softcapping", V_F32, "attn_logit_softcapping"),
    K("rms_norm_eps", V_F32, "attention.layer_norm_rms_epsilon"),
    K("layer_norm_eps", V_F32, "attention.layer_norm_epsilon"),
    K("layer_norm_epsilon", V_F32, "attention.layer_norm_epsilon"),
    K("kv_lora_rank", V_U32, "attention.kv_lora_rank"),
    K("q_lora_rank", V_U32, "attention.q_lora_rank"),
    K("v_head_dim", V_U32, "attention.value_length_mla"),
    K("qk_rope_head_dim", V_U32, "rope.dimension_count"),
    /* RoPE */
    K("rope_theta", V_F32, "rope.freq_base"),
    K("rope_parameters.rope_theta", V_F32, "rope.freq_base"),
    K("rope_parameters.full_attention.rope_theta", V_F32, "rope.freq_base"),
    K("rope_local_base_freq", V_F32, "rope.freq_base_swa"),
    K("rope_parameters.sliding_attention.rope_theta", V_F32, "rope.freq_base_swa"),
    K("rope_scaling.rope_type", V_STR, "rope.scaling.type"),
    K("rope_scaling.type", V_STR, "rope.scaling.type"),
    K("rope_parameters.rope_type", V_STR, "rope.scaling.type"),
    K("rope_scaling.factor", V_F32, "rope.scaling.factor"),
    K("rope_parameters.factor", V_F32, "rope.scaling.factor"),
    K("rope_scaling.original_max_position_embeddings", V_U32,
      "rope.scaling.original_context_length"),
    K("rope_parameters.original_max_position_embeddings", V_U32,
      "rope.scaling.original_context_length"),
    /* Experts */
    K("num_experts", V_U32, "expert_count"),
    K("num_local_experts", V_U32, "expert_count"),
    K("n_routed_experts", V_U32, "expert_count"),
    K("num_experts_per_tok", V_U32, "expert_used_count"),
    K("experts_per_token", V_U32, "expert_used_count"),
    K("top_k_experts", V_U32, "expert_used_count"),
    K("moe_intermediate_size", V_U32, "expert_feed_forward_length"),
    K("expert_intermediate_size", V_U32, "expert_feed_forward_length"),
    K("n_shared_experts", V_U32, "expert_shared_count"),
    K("shared_expert_intermediate_size", V_U32, "expert_shared_feed_forward_length"),
    K("first_k_dense_replace", V_U32, "leading_dense_block_count"),
    K("routed_scaling_factor", V_F32, "expert_weights_scale"),
    K("norm_topk_prob", V_BOOL, "expert_weights_norm"),
    K("n_group", V_U32, "expert_group_count"),
    K("topk_group", V_U32, "expert_group_used_count"),
    K("num_nextn_predict_layers", V_U32, "nextn_predict_layers"),
    /* Tokens */
    K("bos_token_id", V_TOKEN, "tokenizer.ggml.bos_token_id"),
    K("eos_token_id", V_TOKEN, "tokenizer.ggml.eos_token_id"),
    K("pad_token_id", V_TOKEN, "tokenizer.ggml.padding_token_id"),
    /* HF-only facts */
    H("torch_dtype", V_STR, dtype),
    H("dtype", V_STR, dtype),
    H("tie_word_embeddings", V_BOOL, tie_word_embeddings),
    H("quantization_config.quant_method", V_STR, quant_method),
    H("quantization_config.bits", V_U32, quant_bits),
    H("quantization.bits", V_U32, quant_bits),
    H("quantization_config.group_size", V_U32, quant_group_size),
    H("quantization.group_size", V_U32, quant_group_size),
    /* Recognized: read elsewhere, or bookkeeping that states nothing about the model */
    R("model_type"),
    R("text_config"),
    R("vision_config"),
    R("audio_config"),
    R("use_sliding_window"),
    R("architectures"),
    R("transformers_version"),
    R("_name_or_path"),
    R("initializer_range"),
    R("use_cache"),
    R("attention_dropout"),
    R("hidden_dropout_prob"),
    R("attention_probs_dropout_prob"),
};

#undef K
#undef KG
#undef H
#undef R

/* layer_types values -> sliding (true) or full (false) attention. */
static const struct {
    const char *name;
    bool sliding;
} LAYER_TYPES[] = {
    {"sliding_attention", true},
    {"full_attention", false},
};

struct ctx {
    struct qr_hfconfig *hf;
    struct qr_diag *diag;
    const char *name;
    yyjson_val *root, *text; /* the top-level object; text_config or NULL */
    struct qr_gguf_writer *w;
    const char *arch;
};

static enum qr_err __attribute__((format(printf, 3, 4)))
fail(struct ctx *c, enum qr_err err, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return qr_diag_set(c->diag, err, "cannot read '%s': %s", c->name, msg);
}

static void __attribute__((format(printf, 2, 3))) note(struct qr_hfconfig *hf, const char *fmt, ...)
{
    char msg[QR_HF_NOTE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (size_t i = 0; i < hf->n_notes; i++) {
        if (!strcmp(hf->notes[i], msg)) /* a row read twice (as a pattern and for a split) */
            return;
    }
    if (hf->n_notes < QR_HF_MAX_NOTES)
        memcpy(hf->notes[hf->n_notes++], msg, sizeof msg);
}

static const char *type_name(yyjson_val *v)
{
    switch (yyjson_get_type(v)) {
    case YYJSON_TYPE_NULL:
        return "null";
    case YYJSON_TYPE_BOOL:
        return "boolean";
    case YYJSON_TYPE_NUM:
        return yyjson_is_real(v) ? "real number" : "integer";
    case YYJSON_TYPE_STR:
        return "string";
    case YYJSON_TYPE_ARR:
        return "array";
    case YYJSON_TYPE_OBJ:
        return "object";
    default:
        return "unknown value";
    }
}

/* Objects and arrays nested deeper than QR_HF_MAX_DEPTH are refused before parsing. */
static enum qr_err check_depth(struct ctx *c, const char *p, size_t n)
{
    unsigned depth = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (ch == '\\')
                esc = true;
            else if (ch == '"')
                in_str = false;
        } else if (ch == '"') {
            in_str = true;
        } else if (ch == '{' || ch == '[') {
            if (++depth > QR_HF_MAX_DEPTH)
                return fail(c, QR_ERR_TOO_LARGE, "nested deeper than %u levels at byte %zu",
                            QR_HF_MAX_DEPTH, i);
        } else if ((ch == '}' || ch == ']') && depth) {
            depth--;
        }
    }
    return QR_OK;
}

/* The member named (name, n) of obj and how many members have that name. */
static yyjson_val *obj_find(yyjson_val *obj, const char *name, size_t n, size_t *count)
{
    yyjson_obj_iter it;
    yyjson_val *k, *found = NULL;
    *count = 0;
    yyjson_obj_iter_init(obj, &it);
    while ((k = yyjson_obj_iter_next(&it))) {
        if (yyjson_get_len(k) == n && !memcmp(yyjson_get_str(k), name, n)) {
            if (!found)
                found = yyjson_obj_iter_get_val(k);
            ++*count;
        }
    }
    return found;
}

/* The value at a dotted path below obj; *out NULL when a component is absent or null. Fails
 * when an intermediate is not an object or a component is duplicated. */
static enum qr_err walk(struct ctx *c, yyjson_val *obj, const char *pfx, const char *path,
                        yyjson_val **out)
{
    *out = NULL;
    for (const char *p = path;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t) (dot - p) : strlen(p), count;
        int shown = (int) (p + n - path);
        yyjson_val *v = obj_find(obj, p, n, &count);
        if (count > 1)
            return fail(c, QR_ERR_INVALID, "duplicate field '%s%.*s'", pfx, shown, path);
        if (!v || yyjson_is_null(v))
            return QR_OK;
        if (!dot) {
            *out = v;
            return QR_OK;
        }
        if (!yyjson_is_obj(v))
            return fail(c, QR_ERR_INVALID, "'%s%.*s' must be an object, got %s", pfx, shown, path,
                        type_name(v));
        obj = v;
        p = dot + 1;
    }
}

/* A field of the text model: text_config first, then the top level. *pfx names where. */
static enum qr_err find(struct ctx *c, const char *path, yyjson_val **out, const char **pfx)
{
    enum qr_err err;
    *pfx = "";
    if (c->text) {
        if ((err = walk(c, c->text, "text_config.", path, out)))
            return err;
        if (*out) {
            *pfx = "text_config.";
            return QR_OK;
        }
    }
    return walk(c, c->root, "", path, out);
}

static enum qr_err read_u32(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                            uint32_t *out)
{
    uint64_t x;
    if (yyjson_is_sint(v) && yyjson_get_sint(v) < 0)
        return fail(c, QR_ERR_INVALID, "'%s%s' must not be negative, got %lld", pfx, path,
                    (long long) yyjson_get_sint(v));
    if (yyjson_is_sint(v))
        x = (uint64_t) yyjson_get_sint(v);
    else if (yyjson_is_uint(v))
        x = yyjson_get_uint(v);
    else
        return fail(c, QR_ERR_INVALID, "'%s%s' must be an integer, got %s", pfx, path,
                    type_name(v));
    if (x > UINT32_MAX)
        return fail(c, QR_ERR_INVALID, "'%s%s' is %llu, above the u32 range", pfx, path,
                    (unsigned long long) x);
    *out = (uint32_t) x;
    return QR_OK;
}

/* A token id or a list of them (the first one counts). *stated false for a negative id (HF's
 * "none") or an empty list. */
static enum qr_err read_token(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                              bool *stated, uint32_t *out)
{
    *stated = false;
    if (yyjson_is_arr(v)) {
        if (yyjson_arr_size(v) == 0)
            return QR_OK;
        v = yyjson_arr_get_first(v);
    }
    if (yyjson_is_sint(v) && yyjson_get_sint(v) < 0)
        return QR_OK;
    enum qr_err err = read_u32(c, pfx, path, v, out);
    *stated = err == QR_OK;
    return err;
}

static enum qr_err read_f32(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                            float *out)
{
    if (!yyjson_is_num(v))
        return fail(c, QR_ERR_INVALID, "'%s%s' must be a number, got %s", pfx, path, type_name(v));
    double d = yyjson_get_num(v);
    if (!isfinite(d) || fabs(d) > FLT_MAX)
        return fail(c, QR_ERR_INVALID, "'%s%s' is %g, outside the f32 range", pfx, path, d);
    *out = (float) d;
    return QR_OK;
}

static enum qr_err read_str(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                            struct qr_slice *out)
{
    if (!yyjson_is_str(v))
        return fail(c, QR_ERR_INVALID, "'%s%s' must be a string, got %s", pfx, path, type_name(v));
    if (yyjson_get_len(v) > QR_HF_MAX_STR)
        return fail(c, QR_ERR_TOO_LARGE, "'%s%s' is longer than %u bytes", pfx, path,
                    QR_HF_MAX_STR);
    *out = (struct qr_slice){yyjson_get_str(v), yyjson_get_len(v)};
    return QR_OK;
}

/* The layer count when stated (0 when not): the first block_count row present. Needed to expand
 * or check a layer pattern. */
static enum qr_err n_layers(struct ctx *c, uint32_t *out)
{
    *out = 0;
    for (size_t i = 0; i < QR_ARRAY_LEN(RULES); i++) {
        yyjson_val *v;
        const char *pfx;
        if (!RULES[i].key || strcmp(RULES[i].key, "block_count"))
            continue;
        enum qr_err err = find(c, RULES[i].path, &v, &pfx);
        if (err || v)
            return err ? err : read_u32(c, pfx, RULES[i].path, v, out);
    }
    return QR_OK;
}

/* layer_types -> one bool per layer into *out (malloc'ed, caller frees); *out NULL when a value
 * has no rule (noted). */
static enum qr_err read_layer_types(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                                    uint8_t **out, size_t *n_out)
{
    *out = NULL;
    if (!yyjson_is_arr(v))
        return fail(c, QR_ERR_INVALID, "'%s%s' must be an array, got %s", pfx, path, type_name(v));
    size_t n = yyjson_arr_size(v);
    if (n == 0 || n > QR_ARCH_MAX_LAYERS)
        return fail(c, n ? QR_ERR_TOO_LARGE : QR_ERR_INVALID, "'%s%s' has %zu entries, not 1..%u",
                    pfx, path, n, QR_ARCH_MAX_LAYERS);
    uint32_t layers;
    enum qr_err err = n_layers(c, &layers);
    if (err)
        return err;
    if (layers && layers != n)
        return fail(c, QR_ERR_INVALID, "'%s%s' has %zu entries but the model has %u layers", pfx,
                    path, n, layers);
    uint8_t *pat = malloc(n);
    if (!pat)
        return fail(c, QR_ERR_NOMEM, "out of memory");
    yyjson_arr_iter it;
    yyjson_arr_iter_init(v, &it);
    bool mapped = true;
    for (size_t il = 0; il < n; il++) {
        yyjson_val *e = yyjson_arr_iter_next(&it);
        if (!yyjson_is_str(e)) {
            free(pat);
            return fail(c, QR_ERR_INVALID, "'%s%s[%zu]' must be a string, got %s", pfx, path, il,
                        type_name(e));
        }
        size_t k = 0;
        while (k < QR_ARRAY_LEN(LAYER_TYPES) && !yyjson_equals_str(e, LAYER_TYPES[k].name))
            k++;
        if (k == QR_ARRAY_LEN(LAYER_TYPES)) {
            if (mapped)
                note(c->hf, "%s%s: layer %zu has a type no rule maps; pattern left unknown", pfx,
                     path, il);
            mapped = false;
        } else {
            pat[il] = LAYER_TYPES[k].sliding;
        }
    }
    if (!mapped) {
        free(pat);
        return QR_OK;
    }
    *out = pat;
    *n_out = n;
    return QR_OK;
}

/* sliding_window_pattern N (the Transformers reference: layer il slides unless (il + 1) % N is
 * 0) expanded over num_hidden_layers; *out NULL when the layer count is not stated (noted). */
static enum qr_err read_period(struct ctx *c, const char *pfx, const char *path, yyjson_val *v,
                               uint8_t **out, size_t *n_out)
{
    uint32_t period = 0, layers = 0;
    enum qr_err err;
    *out = NULL;
    if ((err = read_u32(c, pfx, path, v, &period)) || (err = n_layers(c, &layers)))
        return err;
    if (period == 0)
        return fail(c, QR_ERR_INVALID, "'%s%s' must be at least 1", pfx, path);
    if (layers == 0 || layers > QR_ARCH_MAX_LAYERS) {
        note(c->hf, "%s%s: no usable layer count to expand it over; pattern left unknown", pfx,
             path);
        return QR_OK;
    }
    uint8_t *pat = malloc(layers);
    if (!pat)
        return fail(c, QR_ERR_NOMEM, "out of memory");
    for (uint32_t il = 0; il < layers; il++)
        pat[il] = (il + 1) % period != 0;
    *out = pat;
    *n_out = layers;
    return QR_OK;
}

/* The layer pattern (1 = sliding) from the first pattern row present; *out NULL when none. */
static enum qr_err read_pattern(struct ctx *c, uint8_t **out, size_t *n)
{
    *out = NULL;
    for (size_t i = 0; i < QR_ARRAY_LEN(RULES) && !*out; i++) {
        const struct rule *r = &RULES[i];
        yyjson_val *v;
        const char *pfx;
        enum qr_err err;
        if (r->kind != V_LAYER_TYPES && r->kind != V_PERIOD)
            continue;
        if ((err = find(c, r->path, &v, &pfx)))
            return err;
        if (v && (err = r->kind == V_PERIOD ? read_period(c, pfx, r->path, v, out, n)
                                            : read_layer_types(c, pfx, r->path, v, out, n)))
            return err;
    }
    return QR_OK;
}

/* Row i states the value of the full-attention layers (num_global_key_value_heads); the next
 * row for the same key states the sliding layers' (num_key_value_heads). Both and a pattern give
 * one u32 per layer into *out (malloc'ed); anything missing leaves *out NULL with a note, and
 * the key unknown: the sliding layers' value alone would be wrong for the full layers. */
static enum qr_err read_full_layers(struct ctx *c, size_t i, const char *pfx, yyjson_val *v,
                                    uint32_t **out, size_t *n_out)
{
    const struct rule *r = &RULES[i];
    uint32_t full, swa;
    yyjson_val *sv = NULL;
    const char *spfx = "", *spath = NULL;
    enum qr_err err;
    *out = NULL;
    if ((err = read_u32(c, pfx, r->path, v, &full)))
        return err;
    for (size_t j = i + 1; j < QR_ARRAY_LEN(RULES) && !spath; j++)
        spath = RULES[j].key && !strcmp(RULES[j].key, r->key) ? RULES[j].path : NULL;
    if (ALWAYS(spath) && (err = find(c, spath, &sv, &spfx)))
        return err;
    if (sv && (err = read_u32(c, spfx, spath, sv, &swa)))
        return err;
    uint8_t *pat;
    size_t n = 0;
    if ((err = read_pattern(c, &pat, &n)))
        return err;
    if (!sv || !pat) {
        free(pat);
        note(c->hf, "%s%s: no %s or no layer pattern; %s left unknown", pfx, r->path,
             spath ? spath : "value for the sliding layers", r->key);
        return QR_OK;
    }
    uint32_t *vals = malloc(n * sizeof *vals);
    if (!vals) {
        free(pat);
        return fail(c, QR_ERR_NOMEM, "out of memory");
    }
    for (size_t il = 0; il < n; il++)
        vals[il] = pat[il] ? swa : full;
    free(pat);
    *out = vals;
    *n_out = n;
    return QR_OK;
}

/* Whether the rule's gate lets it apply. */
static enum qr_err gate_open(struct ctx *c, const struct rule *r, bool *open)
{
    yyjson_val *g;
    const char *pfx;
    *open = true;
    if (r->gate_kind == GATE_NONE)
        return QR_OK;
    enum qr_err err = find(c, r->gate, &g, &pfx);
    if (err)
        return err;
    if (r->gate_kind == GATE_PRESENT)
        *open = g != NULL;
    else if (r->gate_kind == GATE_ABSENT)
        *open = g == NULL;
    else if (g && !yyjson_is_bool(g))
        return fail(c, QR_ERR_INVALID, "'%s%s' must be a boolean, got %s", pfx, r->gate,
                    type_name(g));
    else if (g && !yyjson_get_bool(g)) {
        *open = false;
        note(c->hf, "%s not applied: %s%s is false", r->path, pfx, r->gate);
    }
    return QR_OK;
}

/* Another row for the same target already applied. */
static bool target_done(size_t i, const bool done[])
{
    for (size_t j = 0; j < i; j++) {
        if (!done[j])
            continue;
        if (RULES[i].key && RULES[j].key && !strcmp(RULES[i].key, RULES[j].key))
            return true;
        if (!RULES[i].key && RULES[i].hf_off == RULES[j].hf_off && !RULES[j].key)
            return true;
    }
    return false;
}

static void full_key(struct ctx *c, const char *suffix, char *key, size_t cap)
{
    if (!strncmp(suffix, "tokenizer.", 10))
        snprintf(key, cap, "%s", suffix);
    else
        snprintf(key, cap, "%s.%s", c->arch, suffix);
}

/* Read (and type-check) the value of row r; when write, add it to the GGUF or the HF struct.
 * *applied: something was written. */
static enum qr_err apply(struct ctx *c, size_t i, yyjson_val *v, const char *pfx, bool write,
                         bool *applied)
{
    const struct rule *r = &RULES[i];
    char key[QR_ARCH_MAX_NAME + 96];
    char *field = r->hf_off != NO_FIELD ? (char *) c->hf + r->hf_off : NULL;
    enum qr_err err = QR_OK;
    *applied = false;
    if (r->key)
        full_key(c, r->key, key, sizeof key);
    switch (r->kind) {
    case V_U32: {
        uint32_t x = 0;
        if ((err = read_u32(c, pfx, r->path, v, &x)) || !write)
            return err;
        if (field)
            *(struct qr_arch_u64 *) field = (struct qr_arch_u64){true, x};
        else
            qr_gguf_writer_add_u32(c->w, key, x);
        break;
    }
    case V_TOKEN: {
        uint32_t x = 0;
        bool stated;
        if ((err = read_token(c, pfx, r->path, v, &stated, &x)) || !write || !stated)
            return err;
        qr_gguf_writer_add_u32(c->w, key, x);
        break;
    }
    case V_F32: {
        float x = 0;
        if ((err = read_f32(c, pfx, r->path, v, &x)) || !write)
            return err;
        qr_gguf_writer_add_f32(c->w, key, x);
        break;
    }
    case V_BOOL:
        if (!yyjson_is_bool(v))
            return fail(c, QR_ERR_INVALID, "'%s%s' must be a boolean, got %s", pfx, r->path,
                        type_name(v));
        if (!write)
            return QR_OK;
        if (field)
            *(struct qr_arch_bool *) field = (struct qr_arch_bool){true, yyjson_get_bool(v)};
        else
            qr_gguf_writer_add_bool(c->w, key, yyjson_get_bool(v));
        break;
    case V_STR: {
        struct qr_slice s;
        if ((err = read_str(c, pfx, r->path, v, &s)) || !write)
            return err;
        if (field)
            *(struct qr_arch_str *) field = (struct qr_arch_str){true, s};
        else
            qr_gguf_writer_add_str(c->w, key, s);
        break;
    }
    case V_LAYER_TYPES:
    case V_PERIOD: {
        uint8_t *pat;
        size_t n = 0;
        err = r->kind == V_PERIOD ? read_period(c, pfx, r->path, v, &pat, &n)
                                  : read_layer_types(c, pfx, r->path, v, &pat, &n);
        if (err || !pat)
            return err;
        if (write)
            qr_gguf_writer_add_arr(c->w, key, QR_GGUF_BOOL, pat, n);
        free(pat);
        if (!write)
            return QR_OK;
        break;
    }
    case V_FULL_LAYERS: {
        uint32_t *vals;
        size_t n = 0;
        if ((err = read_full_layers(c, i, pfx, v, &vals, &n)))
            return err;
        if (write && vals)
            qr_gguf_writer_add_arr(c->w, key, QR_GGUF_U32, vals, n);
        free(vals);
        break; /* applied even when unknown: the sliding layers' value must not stand alone */
    }
    case V_ANY:
        return QR_OK;
    }
    *applied = true;
    return QR_OK;
}

static enum qr_err apply_rules(struct ctx *c)
{
    bool done[QR_ARRAY_LEN(RULES)] = {0};
    for (size_t i = 0; i < QR_ARRAY_LEN(RULES); i++) {
        const struct rule *r = &RULES[i];
        yyjson_val *v;
        const char *pfx;
        bool open;
        enum qr_err err;
        if (r->kind == V_ANY)
            continue;
        if ((err = find(c, r->path, &v, &pfx)))
            return err;
        if (!v)
            continue;
        if ((err = gate_open(c, r, &open)))
            return err;
        if ((err = apply(c, i, v, pfx, open && !target_done(i, done), &done[i])))
            return err;
    }
    return QR_OK;
}

/* Whether a rule's path is rel exactly (exact) or continues below it (rel + "."). */
static bool rule_has(const char *rel, size_t n, bool exact)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(RULES); i++) {
        const char *p = RULES[i].path;
        size_t pn = strlen(p);
        if (exact ? pn == n && !memcmp(p, rel, n) : pn > n && !memcmp(p, rel, n) && p[n] == '.')
            return true;
    }
    return false;
}

static void add_unknown(struct qr_hfconfig *hf, const char *pfx, const char *rel, size_t n)
{
    if (hf->n_unknown++ >= QR_HF_MAX_UNKNOWN)
        return;
    struct qr_hf_field *f = &hf->unknown[hf->n_unknown - 1];
    size_t pn = strlen(pfx);
    size_t total = pn + n;
    f->cut = total > sizeof f->name;
    f->len = f->cut ? sizeof f->name : total;
    memcpy(f->name, pfx, pn < f->len ? pn : f->len);
    if (f->len > pn)
        memcpy(f->name + pn, rel, f->len - pn);
}

/* Members of obj (at rel below the root named pfx) that no rule names; objects that rules
 * reach into are walked. rel holds rel_n bytes and has room for QR_HF_MAX_FIELD. */
static void list_unknown(struct qr_hfconfig *hf, yyjson_val *obj, const char *pfx, char *rel,
                         size_t rel_n)
{
    yyjson_obj_iter it;
    yyjson_val *k;
    yyjson_obj_iter_init(obj, &it);
    while ((k = yyjson_obj_iter_next(&it))) {
        size_t kn = yyjson_get_len(k);
        yyjson_val *v = yyjson_obj_iter_get_val(k);
        if (rel_n + kn + 1 >= QR_HF_MAX_FIELD) { /* longer than any rule path: unknown */
            char tmp[QR_HF_MAX_FIELD];
            size_t room = QR_HF_MAX_FIELD - rel_n;
            memcpy(tmp, rel, rel_n);
            memcpy(tmp + rel_n, yyjson_get_str(k), kn < room ? kn : room);
            add_unknown(hf, pfx, tmp, rel_n + kn); /* copies at most QR_HF_MAX_FIELD bytes */
            continue;
        }
        memcpy(rel + rel_n, yyjson_get_str(k), kn);
        size_t n = rel_n + kn;
        if (rule_has(rel, n, true))
            continue;
        if (yyjson_is_obj(v) && rule_has(rel, n, false)) {
            rel[n] = '.';
            list_unknown(hf, v, pfx, rel, n + 1);
            continue;
        }
        add_unknown(hf, pfx, rel, n);
    }
}

/* A model_type value: 1..QR_HF_MAX_MODEL_TYPE bytes of [A-Za-z0-9_-] (it becomes a key prefix). */
static enum qr_err read_model_type(struct ctx *c, yyjson_val *obj, const char *pfx,
                                   struct qr_slice *out)
{
    yyjson_val *v;
    enum qr_err err = walk(c, obj, pfx, "model_type", &v);
    *out = (struct qr_slice){0};
    if (err || !v)
        return err;
    if (!yyjson_is_str(v))
        return fail(c, QR_ERR_INVALID, "'%smodel_type' must be a string, got %s", pfx,
                    type_name(v));
    struct qr_slice s = {yyjson_get_str(v), yyjson_get_len(v)};
    bool ok = s.len > 0 && s.len <= QR_HF_MAX_MODEL_TYPE;
    for (size_t i = 0; ok && i < s.len; i++) {
        char ch = s.ptr[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || ch == '-';
    }
    if (!ok)
        return fail(c, QR_ERR_INVALID, "'%smodel_type' must be 1..%u characters of [A-Za-z0-9_-]",
                    pfx, QR_HF_MAX_MODEL_TYPE);
    *out = s;
    return QR_OK;
}

static const char *map_model_type(struct qr_slice s)
{
    for (size_t i = 0; s.len && i < QR_ARRAY_LEN(MODEL_TYPES); i++) {
        if (qr_slice_eq(s, MODEL_TYPES[i].hf))
            return MODEL_TYPES[i].arch;
    }
    return NULL;
}

/* text_config / vision_config / audio_config, then the architecture name into arch (cap
 * QR_ARCH_MAX_NAME + 1). */
static enum qr_err read_layout(struct ctx *c, char *arch)
{
    static const struct {
        const char *name;
        unsigned bit;
    } SUB[] = {{"text_config", 0}, {"vision_config", QR_HF_VISION}, {"audio_config", QR_HF_AUDIO}};
    struct qr_hfconfig *hf = c->hf;
    enum qr_err err;
    for (size_t i = 0; i < QR_ARRAY_LEN(SUB); i++) {
        yyjson_val *v;
        if ((err = walk(c, c->root, "", SUB[i].name, &v)))
            return err;
        if (v && !yyjson_is_obj(v))
            return fail(c, QR_ERR_INVALID, "'%s' must be an object, got %s", SUB[i].name,
                        type_name(v));
        if (v && !SUB[i].bit)
            c->text = v;
        else if (v)
            hf->modalities |= SUB[i].bit;
    }
    hf->text_config = c->text != NULL;
    struct qr_slice top, text = {0};
    if ((err = read_model_type(c, c->root, "", &top)))
        return err;
    if (c->text && (err = read_model_type(c, c->text, "text_config.", &text)))
        return err;
    if (!top.len && !text.len)
        return fail(c, QR_ERR_INVALID, "'model_type' is missing");
    hf->model_type = top.len ? top : text;
    const char *mapped = map_model_type(top);
    mapped = mapped ? mapped : map_model_type(text);
    hf->arch_mapped = mapped != NULL;
    if (mapped) {
        snprintf(arch, QR_ARCH_MAX_NAME + 1, "%s", mapped);
    } else {
        snprintf(arch, QR_ARCH_MAX_NAME + 1, "%.*s", (int) hf->model_type.len, hf->model_type.ptr);
        note(hf, "model_type '%s' has no architecture mapping: fields read under '%s.*'", arch,
             arch);
    }
    return QR_OK;
}

/* The keys-only GGUF: finish the writer, open it with the reader, derive the contract. */
static enum qr_err derive(struct ctx *c)
{
    struct qr_hfconfig *hf = c->hf;
    struct qr_diag d = {{0}};
    size_t len;
    enum qr_err err = qr_gguf_writer_finish(c->w, &d, &hf->buf_, &len);
    if (!err)
        err = qr_gguf_open_mem(hf->buf_, len, c->name, NULL, &d, &hf->g_);
    if (!err)
        err = qr_gguf_arch_derive(hf->g_, &hf->arch, &d);
    if (err) /* only a bug or OOM: every value was checked above */
        return fail(c, err == QR_ERR_NOMEM ? err : QR_ERR_INTERNAL, "translation: %s", d.msg);
    hf->gguf = hf->g_;
    return QR_OK;
}

enum qr_err qr_hfconfig_parse(const void *json, size_t len, const char *name, struct qr_diag *diag,
                              struct qr_hfconfig **out)
{
    struct ctx c = {.diag = diag, .name = name ? name : "<memory>"};
    char arch[QR_ARCH_MAX_NAME + 1];
    enum qr_err err;
    *out = NULL;
    if (len > QR_HF_MAX_CONFIG_BYTES)
        return fail(&c, QR_ERR_TOO_LARGE, "%zu bytes, more than the %u-byte cap", len,
                    QR_HF_MAX_CONFIG_BYTES);
    const unsigned char *p = json;
    if (len >= 3 && p[0] == 0xef && p[1] == 0xbb && p[2] == 0xbf) { /* a UTF-8 BOM */
        json = p + 3;
        len -= 3;
    }
    if ((err = check_depth(&c, json, len)))
        return err;
    struct qr_hfconfig *hf = calloc(1, sizeof *hf);
    if (!hf)
        return fail(&c, QR_ERR_NOMEM, "out of memory");
    c.hf = hf;
    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) json, len, 0, NULL, &rerr);
    if (!doc) {
        err =
            fail(&c, rerr.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION ? QR_ERR_NOMEM : QR_ERR_PARSE,
                 "not JSON: %s at byte %zu", rerr.msg, rerr.pos);
        goto fail;
    }
    hf->doc_ = doc;
    c.root = yyjson_doc_get_root(doc);
    if (!yyjson_is_obj(c.root)) {
        err = fail(&c, QR_ERR_PARSE, "not a JSON object (%s)", type_name(c.root));
        goto fail;
    }
    if ((err = read_layout(&c, arch)))
        goto fail;
    c.arch = arch;
    c.w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(c.w, "general.architecture", qr_slice_str(arch));
    if ((err = apply_rules(&c)) || (err = derive(&c)))
        goto fail;
    char rel[QR_HF_MAX_FIELD];
    list_unknown(hf, c.root, "", rel, 0);
    if (c.text)
        list_unknown(hf, c.text, "text_config.", rel, 0);
    qr_gguf_writer_free(c.w);
    *out = hf;
    return QR_OK;
fail:
    qr_gguf_writer_free(c.w);
    qr_hfconfig_free(hf);
    return err;
}

void qr_hfconfig_free(struct qr_hfconfig *hf)
{
    if (!hf)
        return;
    qr_gguf_close(hf->g_);
    free(hf->buf_);
    yyjson_doc_free(hf->doc_);
    free(hf);
}

/* ---------------------------------------------------------------------------------------------
 * Files */

/* The whole regular file at path into *out (malloc'ed, NUL-terminated) when at most cap bytes. */
static enum qr_err read_file(const char *path, size_t cap, struct qr_diag *diag, char **out,
                             size_t *out_len)
{
    enum qr_err err;
    char *buf = NULL;
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return qr_diag_set(diag, errno == ENOENT ? QR_ERR_NOT_FOUND : QR_ERR_IO,
                           "cannot read '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': not a regular file", path);
        goto fail;
    }
    if ((uint64_t) st.st_size > cap) {
        err = qr_diag_set(diag, QR_ERR_TOO_LARGE,
                          "cannot read '%s': %lld bytes, more than the %zu-byte cap", path,
                          (long long) st.st_size, cap);
        goto fail;
    }
    size_t n = (size_t) st.st_size, got = 0;
    if (!(buf = malloc(n + 1))) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot read '%s': out of memory", path);
        goto fail;
    }
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            err = qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        got += (size_t) r;
    }
    buf[got] = 0;
    close(fd);
    *out = buf;
    *out_len = got;
    return QR_OK;
fail:
    free(buf);
    close(fd);
    return err;
}

/* metadata.total_size of a safetensors index: the weight bytes of all shards. */
static void read_index(struct qr_hfconfig *hf, const char *path)
{
    struct qr_diag d = {{0}};
    char *buf;
    size_t len;
    if (read_file(path, QR_HF_MAX_INDEX_BYTES, &d, &buf, &len)) {
        note(hf, "%s", d.msg);
        return;
    }
    yyjson_doc *doc = yyjson_read(buf, len, 0);
    yyjson_val *total = yyjson_ptr_get(yyjson_doc_get_root(doc), "/metadata/total_size");
    if (total && yyjson_is_uint(total))
        hf->weight_bytes = (struct qr_arch_u64){true, yyjson_get_uint(total)};
    else
        note(hf, "%s: no integer metadata.total_size", QR_HF_INDEX_FILE);
    hf->weight_bytes_from = hf->weight_bytes.known ? QR_HF_INDEX_FILE : NULL;
    yyjson_doc_free(doc);
    free(buf);
}

/* A single model.safetensors: u64 header length, the header, then the tensor data. */
static void read_safetensors(struct qr_hfconfig *hf, const char *path)
{
    uint8_t hdr[8];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (!fstat(fd, &st) && S_ISREG(st.st_mode) && pread(fd, hdr, 8, 0) == 8) {
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--)
            hl = hl << 8 | hdr[i];
        uint64_t size = (uint64_t) st.st_size;
        if (size >= 8 && hl <= size - 8) {
            hf->weight_bytes = (struct qr_arch_u64){true, size - 8 - hl};
            hf->weight_bytes_from = "model.safetensors";
        } else {
            note(hf, "model.safetensors: header length past the end of the file");
        }
    }
    close(fd);
}

static void read_weights(struct qr_hfconfig *hf, const char *dir)
{
    char path[PATH_MAX];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, QR_HF_INDEX_FILE) >= (int) sizeof path)
        return;
    if (!stat(path, &st)) {
        read_index(hf, path);
        return;
    }
    if (snprintf(path, sizeof path, "%s/model.safetensors", dir) < (int) sizeof path)
        read_safetensors(hf, path);
}

enum qr_err qr_hfconfig_open(const char *path, struct qr_diag *diag, struct qr_hfconfig **out)
{
    char cfg[PATH_MAX], dir[PATH_MAX];
    struct stat st;
    *out = NULL;
    if (stat(path, &st))
        return qr_diag_set(diag, errno == ENOENT ? QR_ERR_NOT_FOUND : QR_ERR_IO,
                           "cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        if (snprintf(cfg, sizeof cfg, "%s/%s", path, QR_HF_CONFIG_FILE) >= (int) sizeof cfg)
            return qr_diag_set(diag, QR_ERR_INVALID, "cannot read '%s': path too long", path);
        snprintf(dir, sizeof dir, "%s", path);
    } else {
        if (snprintf(cfg, sizeof cfg, "%s", path) >= (int) sizeof cfg)
            return qr_diag_set(diag, QR_ERR_INVALID, "cannot read '%s': path too long", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int) (slash - path) : 1, slash ? path : ".");
        if (slash == path)
            snprintf(dir, sizeof dir, "/");
    }
    char *buf;
    size_t len;
    enum qr_err err = read_file(cfg, QR_HF_MAX_CONFIG_BYTES, diag, &buf, &len);
    if (err)
        return err;
    err = qr_hfconfig_parse(buf, len, cfg, diag, out);
    free(buf);
    if (!err)
        read_weights(*out, dir);
    return err;
}

bool qr_hfconfig_probe(const char *path)
{
    struct stat st;
    unsigned char b[64];
    if (stat(path, &st))
        return false;
    if (S_ISDIR(st.st_mode))
        return true;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    ssize_t i = n >= 3 && b[0] == 0xef && b[1] == 0xbb && b[2] == 0xbf ? 3 : 0;
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
        i++;
    return i < n && b[i] == '{';
}
