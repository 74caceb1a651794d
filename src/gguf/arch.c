/* The architecture contract: generic rules that turn a GGUF file's `<arch>.*` keys, tokenizer
 * keys and tensor table into struct qr_arch, the facts the router decides on. Nothing here
 * branches on an architecture name. Key names live in one rule table (a field may have several
 * key-name variants: the first one present and readable wins), tensor classes in one marker table
 * (routed experts "_exps", shared experts "_shexp", per-layer inputs "per_layer"), per-head K/V
 * widths in one tensor table (attn_k, attn_v, fused attn_qkv), template formats in one marker
 * table. Stated counts above a cap (block_count > 512, expert_count > 4096) or inconsistent
 * (expert_used_count > expert_count) are refused: unknown, and listed invalid with the reason. A
 * field is known only when the file states it or a stated rule derives it; loader defaults are
 * never filled in. Nothing is allocated: strings and per-layer arrays stay views into the open
 * file. */
#include "gguf/arch.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

enum kind { K_U64, K_F64, K_BOOL, K_STR, K_LAYERS, K_PATTERN };

/* One key rule: the key (after "<arch>." when arch_scoped), how to read it, where it goes. */
struct rule {
    const char *key;
    enum kind kind;
    size_t off;
    bool arch_scoped;
};

#define A(key, kind, field)                                                                        \
    {                                                                                              \
        key, kind, offsetof(struct qr_arch, field), true                                           \
    }
#define G(key, kind, field)                                                                        \
    {                                                                                              \
        key, kind, offsetof(struct qr_arch, field), false                                          \
    }

static const struct rule RULES[] = {
    A("block_count", K_U64, block_count),
    A("embedding_length", K_U64, embedding_length),
    A("context_length", K_U64, context_length),
    A("feed_forward_length", K_LAYERS, feed_forward_length),
    A("attention.head_count", K_LAYERS, head_count),
    A("attention.head_count_kv", K_LAYERS, head_count_kv),
    A("attention.key_length", K_U64, key_length),
    A("attention.value_length", K_U64, value_length),
    A("attention.key_length_swa", K_U64, key_length_swa),
    A("attention.value_length_swa", K_U64, value_length_swa),
    A("attention.kv_lora_rank", K_U64, kv_lora_rank),
    A("attention.q_lora_rank", K_U64, q_lora_rank),
    A("attention.key_length_mla", K_U64, key_length_mla),
    A("attention.value_length_mla", K_U64, value_length_mla),
    A("attention.layer_norm_epsilon", K_F64, layer_norm_epsilon),
    A("attention.layer_norm_rms_epsilon", K_F64, layer_norm_rms_epsilon),
    A("attention.causal", K_BOOL, causal),
    A("rope.freq_base", K_F64, rope_freq_base),
    A("rope.freq_base_swa", K_F64, rope_freq_base_swa),
    A("rope.dimension_count", K_U64, rope_dimension_count),
    A("rope.dimension_count_swa", K_U64, rope_dimension_count_swa),
    A("rope.scaling.type", K_STR, rope_scaling_type),
    A("rope.scaling.factor", K_F64, rope_scaling_factor),
    A("rope.scale_linear", K_F64, rope_scaling_factor), /* older files: linear factor */
    A("expert_count", K_U64, expert_count),
    A("expert_used_count", K_U64, expert_used_count),
    A("expert_shared_count", K_U64, expert_shared_count),
    A("expert_feed_forward_length", K_U64, expert_feed_forward_length),
    A("leading_dense_block_count", K_U64, leading_dense_block_count),
    A("expert_gating_func", K_U64, expert_gating_func),
    A("expert_weights_scale", K_F64, expert_weights_scale),
    A("expert_weights_norm", K_BOOL, expert_weights_norm),
    A("nextn_predict_layers", K_U64, nextn_predict_layers),
    A("attention.sliding_window", K_U64, sliding_window),
    A("attention.sliding_window_pattern", K_PATTERN, sliding_window_pattern),
    A("attention.shared_kv_layers", K_U64, shared_kv_layers),
    A("embedding_length_per_layer_input", K_U64, embedding_length_per_layer_input),
    A("final_logit_softcapping", K_F64, final_logit_softcapping),
    A("attn_logit_softcapping", K_F64, attn_logit_softcapping),
    A("pooling_type", K_U64, pooling_type),
    A("vocab_size", K_U64, vocab_size), /* after the tokens array, which wins */
    G("general.file_type", K_U64, file_type),
    G("tokenizer.ggml.model", K_STR, tokenizer_model),
    G("tokenizer.ggml.pre", K_STR, tokenizer_pre),
    G("tokenizer.ggml.bos_token_id", K_U64, bos_token_id),
    G("tokenizer.ggml.eos_token_id", K_U64, eos_token_id),
    G("tokenizer.ggml.padding_token_id", K_U64, pad_token_id),
    G("tokenizer.ggml.token_type_count", K_U64, token_type_count),
    G("tokenizer.ggml.add_bos_token", K_BOOL, add_bos_token),
    G("tokenizer.ggml.add_space_prefix", K_BOOL, add_space_prefix),
};

#undef A
#undef G

enum tclass { T_EXPERT = 1, T_SHARED_EXPERT = 2, T_PER_LAYER = 4 };

/* Tensor-name markers (substrings) and the class they put a tensor in. */
static const struct {
    const char *needle;
    enum tclass cls;
} TENSOR_MARKERS[] = {
    {"_exps", T_EXPERT},
    {"_shexp", T_SHARED_EXPERT},
    {"per_layer", T_PER_LAYER},
};

/* Chat template markers: substring -> bit and name. */
static const struct {
    const char *needle;
    unsigned bit;
    const char *name;
} TPL_MARKERS[] = {
    {"<|im_start|>", QR_ARCH_TPL_CHATML, "chatml"},
    {"<tool_call>", QR_ARCH_TPL_HERMES_TOOLS, "hermes-tools"},
    {"<think>", QR_ARCH_TPL_THINK, "think-tags"},
    {"<tool_response>", QR_ARCH_TPL_TOOL_RESPONSE, "tool-response-tags"},
    {"[INST]", QR_ARCH_TPL_INST, "inst-tags"},
    {"<start_of_turn>", QR_ARCH_TPL_TURNS, "start-of-turn"},
    {"<|start_header_id|>", QR_ARCH_TPL_HEADERS, "header-ids"},
    {"<|channel|>", QR_ARCH_TPL_CHANNELS, "channels"},
    {"add_generation_prompt", QR_ARCH_TPL_GENERATION_PROMPT, "generation-prompt"},
    {"tools", QR_ARCH_TPL_TOOLS_VAR, "mentions-tools"},
};

static const char *const POOLING[] = {"none", "mean", "cls", "last", "rank"};

/* expert_gating_func values (llama.cpp's enum llama_expert_gating_func_type) */
static const char *const GATING[] = {"none", "softmax", "sigmoid", "softmax_weight",
                                     "sqrt_softplus"};

/* Per-head widths from the tensor table: blk.N.<stem>.weight [n_embd, heads * dim], where heads
 * is head_count_kv, or head_count + 2 * head_count_kv for a fused q|k|v of one head width. */
enum { HD_K = 1, HD_V = 2 };
static const struct {
    const char *stem;
    unsigned dims; /* HD_K | HD_V */
    bool fused_qkv;
} HEAD_DIM_TENSORS[] = {
    {"attn_k", HD_K, false},
    {"attn_v", HD_V, false},
    {"attn_qkv", HD_K | HD_V, true},
};

/* general.file_type values (llama.cpp's enum llama_ftype); NULL entries are unassigned. */
static const char *const FILE_TYPES[] = {
    "all_f32",
    "mostly_f16",
    "mostly_q4_0",
    "mostly_q4_1",
    NULL,
    NULL,
    NULL,
    "mostly_q8_0",
    "mostly_q5_0",
    "mostly_q5_1",
    "mostly_q2_k",
    "mostly_q3_k_s",
    "mostly_q3_k_m",
    "mostly_q3_k_l",
    "mostly_q4_k_s",
    "mostly_q4_k_m",
    "mostly_q5_k_s",
    "mostly_q5_k_m",
    "mostly_q6_k",
    "mostly_iq2_xxs",
    "mostly_iq2_xs",
    "mostly_q2_k_s",
    "mostly_iq3_xs",
    "mostly_iq3_xxs",
    "mostly_iq1_s",
    "mostly_iq4_nl",
    "mostly_iq3_s",
    "mostly_iq3_m",
    "mostly_iq2_s",
    "mostly_iq2_m",
    "mostly_iq4_xs",
    "mostly_iq1_m",
    "mostly_bf16",
    NULL,
    NULL,
    NULL,
    "mostly_tq1_0",
    "mostly_tq2_0",
    "mostly_mxfp4_moe",
    "mostly_nvfp4",
    "mostly_q1_0",
};

const char *qr_arch_marker_name(unsigned bit)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(TPL_MARKERS); i++) {
        if (TPL_MARKERS[i].bit == bit)
            return TPL_MARKERS[i].name;
    }
    return NULL;
}

const char *qr_arch_pooling_name(uint64_t v)
{
    return v < QR_ARRAY_LEN(POOLING) ? POOLING[v] : NULL;
}

const char *qr_arch_file_type_name(uint64_t v)
{
    return v < QR_ARRAY_LEN(FILE_TYPES) ? FILE_TYPES[v] : NULL;
}

const char *qr_arch_gating_name(uint64_t v)
{
    return v < QR_ARRAY_LEN(GATING) ? GATING[v] : NULL;
}

static bool slice_has(struct qr_slice s, const char *needle)
{
    return memmem(s.ptr, s.len, needle, strlen(needle)) != NULL;
}

unsigned qr_arch_template_markers(struct qr_slice tpl)
{
    unsigned bits = 0;
    for (size_t i = 0; i < QR_ARRAY_LEN(TPL_MARKERS); i++) {
        if (slice_has(tpl, TPL_MARKERS[i].needle))
            bits |= TPL_MARKERS[i].bit;
    }
    return bits;
}

bool qr_arch_layers_at(const struct qr_arch_layers *l, uint64_t il, uint64_t *out)
{
    if (!l->known)
        return false;
    if (!l->arr) {
        *out = l->min;
        return true;
    }
    return qr_gguf_arr_u64_at(l->arr, il, out) == QR_OK;
}

bool qr_arch_pattern_swa(const struct qr_arch_pattern *p, uint64_t il, bool *out)
{
    if (!p->known)
        return false;
    if (il >= p->arr->arr_len)
        return false;
    if (p->arr->arr_type == QR_GGUF_BOOL) {
        *out = p->arr->val[il] != 0;
        return true;
    }
    uint64_t v;
    if (qr_gguf_arr_u64_at(p->arr, il, &v))
        return false;
    *out = v != 0;
    return true;
}

static bool is_int_type(enum qr_gguf_type t)
{
    return t <= QR_GGUF_I32 || t == QR_GGUF_U64 || t == QR_GGUF_I64;
}

/* A scalar integer, or an integer array of 1..QR_ARCH_MAX_LAYERS elements that all read as u64. */
static bool read_layers(const struct qr_gguf_kv *kv, struct qr_arch_layers *out)
{
    uint64_t v;
    if (kv->type != QR_GGUF_ARR) {
        if (qr_gguf_kv_u64(kv, &v))
            return false;
        *out = (struct qr_arch_layers){.known = true, .min = v, .max = v};
        return true;
    }
    if (!is_int_type(kv->arr_type) || kv->arr_len == 0 || kv->arr_len > QR_ARCH_MAX_LAYERS)
        return false;
    struct qr_arch_layers l = {.known = true, .arr = kv, .min = UINT64_MAX, .max = 0};
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        if (qr_gguf_arr_u64_at(kv, i, &v))
            return false;
        l.min = v < l.min ? v : l.min;
        l.max = v > l.max ? v : l.max;
    }
    *out = l;
    return true;
}

/* A bool or integer array, one entry per layer; counts the sliding and global layers. */
static bool read_pattern(const struct qr_gguf_kv *kv, struct qr_arch_pattern *out)
{
    uint64_t v;
    if (kv->type != QR_GGUF_ARR || kv->arr_len == 0 || kv->arr_len > QR_ARCH_MAX_LAYERS)
        return false;
    if (kv->arr_type != QR_GGUF_BOOL) {
        if (!is_int_type(kv->arr_type))
            return false;
        for (uint64_t i = 0; i < kv->arr_len; i++) {
            if (qr_gguf_arr_u64_at(kv, i, &v))
                return false;
        }
    }
    *out = (struct qr_arch_pattern){.known = true, .arr = kv, .n_layers = kv->arr_len};
    for (uint64_t il = 0; il < out->n_layers; il++) {
        bool swa = false;
        qr_arch_pattern_swa(out, il, &swa);
        out->n_swa += swa;
    }
    out->n_global = out->n_layers - out->n_swa;
    return true;
}

/* Apply one rule to the entry it names; false when the value has the wrong type. A field that
 * an earlier variant already filled keeps its value. */
static bool apply_rule(const struct rule *r, const struct qr_gguf_kv *kv, struct qr_arch *a)
{
    char *field = (char *) a + r->off;
    if (*(bool *) field) /* every field struct starts with its known flag */
        return true;
    switch (r->kind) {
    case K_U64: {
        struct qr_arch_u64 *f = (struct qr_arch_u64 *) field;
        f->known = qr_gguf_kv_u64(kv, &f->v) == QR_OK;
        return f->known;
    }
    case K_F64: {
        struct qr_arch_f64 *f = (struct qr_arch_f64 *) field;
        f->known = qr_gguf_kv_f64(kv, &f->v) == QR_OK;
        return f->known;
    }
    case K_BOOL: {
        struct qr_arch_bool *f = (struct qr_arch_bool *) field;
        f->known = kv->type == QR_GGUF_BOOL;
        f->v = f->known && kv->val[0] != 0;
        return f->known;
    }
    case K_STR: {
        struct qr_arch_str *f = (struct qr_arch_str *) field;
        f->known = kv->type == QR_GGUF_STR;
        if (f->known)
            f->v = (struct qr_slice){(const char *) kv->val, (size_t) kv->val_len};
        return f->known;
    }
    case K_LAYERS:
        return read_layers(kv, (struct qr_arch_layers *) field);
    case K_PATTERN:
        return read_pattern(kv, (struct qr_arch_pattern *) field);
    }
    return false;
}

/* Stage 1: every rule whose key is present. consumed[i] records rules that read their key. */
static void apply_rules(const struct qr_gguf *g, struct qr_arch *a, bool consumed[])
{
    char key[QR_ARCH_MAX_NAME + 64];
    for (size_t i = 0; i < QR_ARRAY_LEN(RULES); i++) {
        const struct rule *r = &RULES[i];
        if (r->arch_scoped) {
            if (!a->architecture.known)
                continue;
            snprintf(key, sizeof key, "%.*s.%s", (int) a->architecture.v.len, a->architecture.v.ptr,
                     r->key);
        } else {
            snprintf(key, sizeof key, "%s", r->key);
        }
        const struct qr_gguf_kv *kv = qr_gguf_find(g, key);
        consumed[i] = kv && apply_rule(r, kv, a);
    }
}

/* Stage 2: `<arch>.*` keys that no rule consumed. */
static void list_unknown(const struct qr_gguf *g, struct qr_arch *a, const bool consumed[])
{
    struct qr_slice arch = a->architecture.v;
    for (size_t i = 0; i < qr_gguf_kv_count(g); i++) {
        struct qr_slice k = qr_gguf_kv_at(g, i)->key;
        if (k.len <= arch.len + 1 || memcmp(k.ptr, arch.ptr, arch.len) || k.ptr[arch.len] != '.')
            continue;
        struct qr_slice sfx = {k.ptr + arch.len + 1, k.len - arch.len - 1};
        bool known = false;
        for (size_t r = 0; r < QR_ARRAY_LEN(RULES) && !known; r++)
            known = consumed[r] && RULES[r].arch_scoped && qr_slice_eq(sfx, RULES[r].key);
        if (known)
            continue;
        if (a->n_unknown_keys < QR_ARCH_MAX_UNKNOWN)
            a->unknown_keys[a->n_unknown_keys] = k;
        a->n_unknown_keys++;
    }
}

/* Block index of a "blk.N." tensor name; false for other names. */
static bool block_index(struct qr_slice name, uint64_t *out)
{
    if (name.len < 6 || memcmp(name.ptr, "blk.", 4))
        return false;
    uint64_t v = 0;
    size_t i = 4;
    for (; i < name.len && name.ptr[i] >= '0' && name.ptr[i] <= '9' && i < 14; i++)
        v = v * 10 + (uint64_t) (name.ptr[i] - '0');
    if (i == 4 || i >= name.len || name.ptr[i] != '.')
        return false;
    *out = v;
    return true;
}

static unsigned tensor_class(struct qr_slice name)
{
    unsigned cls = 0;
    for (size_t i = 0; i < QR_ARRAY_LEN(TENSOR_MARKERS); i++) {
        if (slice_has(name, TENSOR_MARKERS[i].needle))
            cls |= TENSOR_MARKERS[i].cls;
    }
    return cls;
}

static void refuse(struct qr_arch *a, struct qr_arch_u64 *f, const char *field, const char *reason)
{
    if (a->n_invalid < QR_ARCH_MAX_INVALID)
        a->invalid[a->n_invalid] = (struct qr_arch_invalid){field, f->v, reason};
    a->n_invalid++;
    f->known = false;
}

/* Whether check_caps refused a field: a stated but refused value is not re-derived. */
static bool was_refused(const struct qr_arch *a, const char *field)
{
    for (size_t i = 0; i < a->n_invalid && i < QR_ARCH_MAX_INVALID; i++) {
        if (!strcmp(a->invalid[i].field, field))
            return true;
    }
    return false;
}

/* Stage 3: the tensor table: type histogram, parameter counts, expert and per-layer tensors,
 * dense vs MoE, leading dense blocks, active parameters. */
static void scan_tensors(const struct qr_gguf *g, struct qr_arch *a)
{
    uint64_t total = 0, expert_elems = 0, first_expert_blk = UINT64_MAX;
    bool overflow = false, expert_blk_known = true, per_layer = false;
    a->n_tensors = qr_gguf_tensor_count(g);
    for (size_t i = 0; i < a->n_tensors; i++) {
        const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, i);
        if (ALWAYS(t->type < QR_GGML_TYPE_COUNT)) {
            a->tensor_type_count[t->type]++;
            a->tensor_type_bytes[t->type] += t->bytes;
        }
        overflow |= __builtin_add_overflow(total, t->n_elements, &total);
        unsigned cls = tensor_class(t->name);
        per_layer |= (cls & T_PER_LAYER) != 0;
        if (cls & T_SHARED_EXPERT)
            a->n_shared_expert_tensors++;
        if (!(cls & T_EXPERT))
            continue;
        a->n_expert_tensors++;
        overflow |= __builtin_add_overflow(expert_elems, t->n_elements, &expert_elems);
        uint64_t blk;
        if (!block_index(t->name, &blk))
            expert_blk_known = false;
        else if (blk < first_expert_blk)
            first_expert_blk = blk;
    }
    if (a->n_tensors == 0)
        return; /* nothing below is derivable without the tensor table */
    a->params_total = (struct qr_arch_u64){!overflow, total};

    bool has_experts = a->n_expert_tensors > 0;
    bool count_pos = a->expert_count.known && a->expert_count.v > 0;
    bool count_zero = !a->expert_count.known || a->expert_count.v == 0;
    if (has_experts && count_pos)
        a->ffn = QR_ARCH_FFN_MOE;
    else if (!has_experts && count_zero)
        a->ffn = QR_ARCH_FFN_DENSE;

    if (a->ffn == QR_ARCH_FFN_DENSE) {
        a->params_active = a->params_total;
    } else if (a->ffn == QR_ARCH_FFN_MOE && !overflow && a->expert_used_count.known &&
               a->expert_used_count.v <= a->expert_count.v) {
        /* Each expert tensor holds expert_count experts; a token uses expert_used_count. */
        unsigned __int128 act = (unsigned __int128) expert_elems * a->expert_used_count.v;
        act /= a->expert_count.v;
        a->params_active = (struct qr_arch_u64){true, total - expert_elems + (uint64_t) act};
    }
    if (a->ffn == QR_ARCH_FFN_MOE && !a->leading_dense_block_count.known && expert_blk_known &&
        !was_refused(a, "leading_dense_block_count")) {
        a->leading_dense_block_count = (struct qr_arch_u64){true, first_expert_blk};
        a->leading_dense_from_tensors = true;
    }
    if (per_layer)
        a->per_layer_embeddings = (struct qr_arch_bool){true, true};
}

/* Stage 1b: caps and consistency of stated counts, before anything uses them. A refused value
 * becomes unknown and is listed in a->invalid. */
static void check_caps(struct qr_arch *a)
{
    if (a->block_count.known && a->block_count.v > QR_ARCH_MAX_BLOCKS)
        refuse(a, &a->block_count, "block_count", "above the cap 512");
    if (a->expert_count.known && a->expert_count.v > QR_ARCH_MAX_EXPERTS)
        refuse(a, &a->expert_count, "expert_count", "above the cap 4096");
    if (a->expert_used_count.known && a->expert_count.known &&
        a->expert_used_count.v > a->expert_count.v)
        refuse(a, &a->expert_used_count, "expert_used_count", "above expert_count");
    if (a->leading_dense_block_count.known && a->block_count.known &&
        a->leading_dense_block_count.v > a->block_count.v)
        refuse(a, &a->leading_dense_block_count, "leading_dense_block_count", "above block_count");
}

/* One head width seen in the tensor table: the first value, and whether another disagreed. */
struct seen {
    bool any, conflict;
    uint64_t v;
};

static void see(struct seen *s, uint64_t v)
{
    if (s->any && s->v != v)
        s->conflict = true;
    s->any = true;
    s->v = v;
}

/* The head widths layer il's K/V tensors state, into seen[K or V][sliding]. */
static void scan_head_dims(const struct qr_gguf *g, const struct qr_arch *a, uint64_t il,
                           struct seen seen[2][2])
{
    uint64_t n_kv, n_q = 0;
    bool swa = false;
    if (!qr_arch_layers_at(&a->head_count_kv, il, &n_kv) || n_kv == 0)
        return;
    qr_arch_pattern_swa(&a->sliding_window_pattern, il, &swa);
    for (size_t i = 0; i < QR_ARRAY_LEN(HEAD_DIM_TENSORS); i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%" PRIu64 ".%s.weight", il, HEAD_DIM_TENSORS[i].stem);
        const struct qr_gguf_tensor *t = qr_gguf_find_tensor(g, name);
        if (!t || t->n_dims != 2)
            continue;
        uint64_t heads = n_kv;
        bool fused = HEAD_DIM_TENSORS[i].fused_qkv; /* heads = n_q + 2 * n_kv, checked */
        if (fused &&
            (!qr_arch_layers_at(&a->head_count, il, &n_q) ||
             __builtin_mul_overflow(n_kv, 2, &heads) || __builtin_add_overflow(heads, n_q, &heads)))
            continue;
        if (heads == 0 || t->dims[1] % heads != 0)
            continue;
        if (HEAD_DIM_TENSORS[i].dims & HD_K)
            see(&seen[0][swa], t->dims[1] / heads);
        if (HEAD_DIM_TENSORS[i].dims & HD_V)
            see(&seen[1][swa], t->dims[1] / heads);
    }
}

/* The stated key, else an agreeing tensor width; sets *from_tensors when the tensors gave it. */
static struct qr_arch_u64 pick_dim(struct qr_arch_u64 key, const struct seen *s, bool *from_tensors)
{
    if (key.known)
        return key;
    if (!s->any || s->conflict)
        return (struct qr_arch_u64){0};
    *from_tensors = true;
    return (struct qr_arch_u64){true, s->v};
}

/* Stage 3b: per-head K/V widths of full and sliding layers (keys first, then tensors). */
static void derive_head_dims(const struct qr_gguf *g, struct qr_arch *a)
{
    struct seen seen[2][2] = {{{0}}};
    if (a->block_count.known && a->head_count_kv.known) {
        for (uint64_t il = 0; il < a->block_count.v; il++)
            scan_head_dims(g, a, il, seen);
    }
    bool *ft = &a->head_dims_from_tensors;
    a->head_dim_k = pick_dim(a->key_length, &seen[0][0], ft);
    a->head_dim_v = pick_dim(a->value_length, &seen[1][0], ft);
    if (a->sliding_window_pattern.known && a->sliding_window_pattern.n_swa > 0) {
        a->head_dim_k_swa = pick_dim(a->key_length_swa, &seen[0][1], ft);
        a->head_dim_v_swa = pick_dim(a->value_length_swa, &seen[1][1], ft);
    }
}

/* Stage 4: tokenizer arrays and the chat template. */
static void scan_tokenizer(const struct qr_gguf *g, struct qr_arch *a)
{
    const struct qr_gguf_kv *kv = qr_gguf_find(g, "tokenizer.ggml.tokens");
    if (kv && kv->type == QR_GGUF_ARR && kv->arr_type == QR_GGUF_STR)
        a->vocab_size = (struct qr_arch_u64){true, kv->arr_len};
    struct qr_slice tpl;
    if (qr_gguf_get_str(g, "tokenizer.chat_template", &tpl) == QR_OK) {
        a->chat_template_known = true;
        a->chat_template_len = tpl.len;
        qr_sha256(tpl.ptr, tpl.len, a->chat_template_sha256);
        a->chat_template_markers = qr_arch_template_markers(tpl);
    }
}

static bool printable(struct qr_slice s)
{
    for (size_t i = 0; i < s.len; i++) {
        if (s.ptr[i] < 0x20 || s.ptr[i] > 0x7e)
            return false;
    }
    return s.len > 0;
}

enum qr_err qr_gguf_arch_derive(const struct qr_gguf *g, struct qr_arch *out, struct qr_diag *diag)
{
    struct qr_arch *a = out;
    memset(a, 0, sizeof *a);
    struct qr_slice arch;
    if (qr_gguf_get_str(g, "general.architecture", &arch) == QR_OK) {
        if (arch.len > QR_ARCH_MAX_NAME || !printable(arch))
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "general.architecture is not a short printable name (%zu bytes)",
                               arch.len);
        a->architecture = (struct qr_arch_str){true, arch};
    }
    scan_tokenizer(g, a); /* first: the tokens array wins over <arch>.vocab_size */
    bool consumed[QR_ARRAY_LEN(RULES)];
    apply_rules(g, a, consumed);
    check_caps(a);
    if (a->architecture.known)
        list_unknown(g, a, consumed);
    scan_tensors(g, a);
    derive_head_dims(g, a);

    /* Derived after both the keys and the tensors. */
    if (!a->per_layer_embeddings.known && a->embedding_length_per_layer_input.known)
        a->per_layer_embeddings =
            (struct qr_arch_bool){true, a->embedding_length_per_layer_input.v > 0};
    else if (!a->per_layer_embeddings.known && a->n_tensors > 0)
        a->per_layer_embeddings = (struct qr_arch_bool){true, false};
    return QR_OK;
}
