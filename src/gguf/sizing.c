/* Memory sizing: how many bytes a model's weights take by class and how large its KV cache is
 * for a given context, derived from the tensor table and the architecture contract only. The
 * weight classes come from one marker table over tensor names; the KV cache follows llama.cpp's
 * per-layer layout (grouped-query heads, separate head dims and a window cap on sliding layers,
 * no cache for layers that reuse another layer's KV). Inputs the file does not state leave the KV
 * part unknown with a reason; no loader default is filled in. Every product and sum is checked
 * for 64-bit overflow because every input is file-controlled. Nothing is allocated. */
#include "gguf/sizing.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* The weight class rules, first match wins; "output" is matched exactly, the others anywhere. */
static const struct {
    const char *marker;
    enum qr_sizing_class cls;
} CLASS_RULES[] = {
    {"per_layer", QR_SIZING_PER_LAYER},
    {"norm", QR_SIZING_NORM},
    {"_exps", QR_SIZING_EXPERTS},
    {"_shexp", QR_SIZING_SHARED_EXPERTS},
    {"token_embd", QR_SIZING_TOKEN_EMBD},
    {"attn_", QR_SIZING_ATTN},
    {"ffn_", QR_SIZING_FFN},
};

static const char *const CLASS_NAMES[QR_SIZING_CLASS_COUNT] = {
    "token_embd",     "output", "attn",      "ffn",   "experts",
    "shared_experts", "norm",   "per_layer", "other",
};

static const char *const KV_NAMES[] = {
    "known",     "no_layers",  "no_heads", "no_head_dim", "no_pattern",
    "no_window", "bad_shared", "mla",      "overflow",
};

const char *qr_sizing_class_name(unsigned cls)
{
    return cls < QR_SIZING_CLASS_COUNT ? CLASS_NAMES[cls] : NULL;
}

const char *qr_sizing_kv_name(unsigned kv)
{
    return kv < sizeof KV_NAMES / sizeof KV_NAMES[0] ? KV_NAMES[kv] : NULL;
}

static bool slice_has(struct qr_slice s, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; n <= s.len && i <= s.len - n; i++) {
        if (memcmp(s.ptr + i, needle, n) == 0)
            return true;
    }
    return false;
}

enum qr_sizing_class qr_sizing_classify(struct qr_slice name)
{
    for (size_t i = 0; i < sizeof CLASS_RULES / sizeof CLASS_RULES[0]; i++) {
        if (slice_has(name, CLASS_RULES[i].marker))
            return CLASS_RULES[i].cls;
    }
    if (qr_slice_eq(name, "output.weight") || qr_slice_eq(name, "output.bias"))
        return QR_SIZING_OUTPUT;
    return QR_SIZING_OTHER;
}

static void size_weights(const struct qr_gguf *g, struct qr_sizing *out)
{
    size_t n = qr_gguf_tensor_count(g);
    for (size_t i = 0; i < n; i++) {
        const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, i);
        struct qr_sizing_weights *w = &out->cls[qr_sizing_classify(t->name)];
        /* The reader bounds every tensor by the file size, so these sums cannot wrap. */
        w->bytes += t->bytes;
        w->n_tensors++;
        out->weight_bytes += t->bytes;
        out->n_tensors++;
    }
}

/* KV facts that do not depend on the layer, checked once. */
struct kv_plan {
    uint64_t n_layers, n_own, window;
    bool has_pattern;
};

static enum qr_sizing_kv kv_plan(const struct qr_gguf *g, const struct qr_arch *a,
                                 struct kv_plan *p)
{
    *p = (struct kv_plan){0};
    if (!a->block_count.known || a->block_count.v == 0 || a->block_count.v > QR_ARCH_MAX_LAYERS)
        return QR_SIZING_KV_NO_LAYERS;
    p->n_layers = a->block_count.v;
    if (a->architecture.known) {
        char key[QR_ARCH_MAX_NAME + 32];
        snprintf(key, sizeof key, "%.*s.attention.kv_lora_rank", (int) a->architecture.v.len,
                 a->architecture.v.ptr);
        if (qr_gguf_find(g, key))
            return QR_SIZING_KV_MLA;
    }
    uint64_t shared = a->shared_kv_layers.known ? a->shared_kv_layers.v : 0;
    if (shared >= p->n_layers)
        return QR_SIZING_KV_BAD_SHARED;
    p->n_own = p->n_layers - shared;
    const struct qr_arch_pattern *pat = &a->sliding_window_pattern;
    if (pat->known) {
        if (pat->n_layers != p->n_layers)
            return QR_SIZING_KV_NO_PATTERN;
        p->has_pattern = true;
        if (pat->n_swa > 0) {
            if (!a->sliding_window.known || a->sliding_window.v == 0)
                return QR_SIZING_KV_NO_WINDOW;
            p->window = a->sliding_window.v;
        }
    } else if (a->sliding_window.known && a->sliding_window.v > 0) {
        return QR_SIZING_KV_NO_PATTERN; /* which layers slide is not stated */
    }
    return QR_SIZING_KV_KNOWN;
}

/* Head dim of layer il: the stated key (the _swa variant first on sliding layers), else the width
 * of blk.<il>.<tensor>.weight [n_embd, n_kv * dim] divided by n_kv; false when neither. */
static bool head_dim(const struct qr_gguf *g, const struct qr_arch_u64 *key,
                     const struct qr_arch_u64 *key_swa, bool swa, const char *tensor, uint64_t il,
                     uint64_t n_kv, uint64_t *out, bool *from_tensors)
{
    if (swa && key_swa->known) {
        *out = key_swa->v;
        return true;
    }
    if (key->known) {
        *out = key->v;
        return true;
    }
    char name[64];
    snprintf(name, sizeof name, "blk.%" PRIu64 ".%s.weight", il, tensor);
    const struct qr_gguf_tensor *t = qr_gguf_find_tensor(g, name);
    if (!t || t->n_dims != 2 || t->dims[1] % n_kv != 0)
        return false;
    *out = t->dims[1] / n_kv;
    *from_tensors = true;
    return true;
}

/* Accumulators in hundredths of a byte. */
struct kv_sum {
    uint64_t per_token, per_token_full, total;
};

static bool add_mul(uint64_t *acc, uint64_t a, uint64_t b)
{
    uint64_t p;
    return !__builtin_mul_overflow(a, b, &p) && !__builtin_add_overflow(*acc, p, acc);
}

static uint64_t hundredths_to_bytes(uint64_t x)
{
    return x / 100 + (x % 100 != 0);
}

/* One owning layer into the sums; returns the reason it cannot be sized, or KNOWN. */
static enum qr_sizing_kv kv_layer(const struct qr_gguf *g, const struct qr_arch *a,
                                  const struct kv_plan *p, uint64_t il, uint64_t n_ctx,
                                  uint32_t x100, struct qr_sizing *out, struct kv_sum *s)
{
    uint64_t n_kv, k, v;
    bool swa = false;
    if (!qr_arch_layers_at(&a->head_count_kv, il, &n_kv))
        return QR_SIZING_KV_NO_HEADS;
    if (n_kv == 0)
        return QR_SIZING_KV_KNOWN; /* no attention cache on this layer (recurrent, say) */
    if (p->has_pattern)
        qr_arch_pattern_swa(&a->sliding_window_pattern, il, &swa);
    if (!head_dim(g, &a->key_length, &a->key_length_swa, swa, "attn_k", il, n_kv, &k,
                  &out->kv_dims_from_tensors) ||
        !head_dim(g, &a->value_length, &a->value_length_swa, swa, "attn_v", il, n_kv, &v,
                  &out->kv_dims_from_tensors))
        return QR_SIZING_KV_NO_HEAD_DIM;
    uint64_t dims, elems, row, cells = swa && p->window < n_ctx ? p->window : n_ctx;
    if (__builtin_add_overflow(k, v, &dims) || __builtin_mul_overflow(n_kv, dims, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t) x100, &row) || !add_mul(&s->per_token, row, 1) ||
        (!swa && !add_mul(&s->per_token_full, row, 1)) || !add_mul(&s->total, row, cells))
        return QR_SIZING_KV_OVERFLOW;
    out->kv_layers++;
    out->kv_layers_swa += swa;
    return QR_SIZING_KV_KNOWN;
}

static void kv_clear(struct qr_sizing *out)
{
    out->kv_dims_from_tensors = false;
    out->kv_layers = out->kv_layers_swa = out->kv_layers_shared = out->kv_cells_swa = 0;
    out->kv_bytes_per_token = out->kv_bytes_per_token_full = out->kv_bytes = 0;
}

enum qr_err qr_gguf_size(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_ctx,
                         uint32_t kv_type_bytes_x100, struct qr_sizing *out, struct qr_diag *diag)
{
    *out = (struct qr_sizing){.kv = QR_SIZING_KV_NO_LAYERS};
    if (n_ctx == 0 || kv_type_bytes_x100 == 0)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "cannot size: n_ctx %" PRIu64 " and kv type bytes x100 %" PRIu32
                           " must be > 0",
                           n_ctx, kv_type_bytes_x100);
    size_weights(g, out);

    struct kv_plan p;
    enum qr_sizing_kv why = kv_plan(g, a, &p);
    struct kv_sum s = {0};
    uint64_t il = 0;
    for (; why == QR_SIZING_KV_KNOWN && il < p.n_own; il++)
        why = kv_layer(g, a, &p, il, n_ctx, kv_type_bytes_x100, out, &s);
    out->kv = why;
    if (why == QR_SIZING_KV_OVERFLOW) {
        kv_clear(out);
        return qr_diag_set(diag, QR_ERR_TOO_LARGE,
                           "cannot size: kv cache of layer %" PRIu64 " for n_ctx %" PRIu64
                           " overflows 64 bits",
                           il - 1, n_ctx);
    }
    if (why != QR_SIZING_KV_KNOWN) {
        kv_clear(out);
        if (why == QR_SIZING_KV_NO_HEADS || why == QR_SIZING_KV_NO_HEAD_DIM)
            qr_diag_set(diag, QR_OK, "kv cache unknown: layer %" PRIu64 ": %s", il - 1,
                        qr_sizing_kv_name(why));
        else
            qr_diag_set(diag, QR_OK, "kv cache unknown: %s", qr_sizing_kv_name(why));
        return QR_OK;
    }
    out->kv_layers_shared = p.n_layers - p.n_own;
    out->kv_cells_swa = out->kv_layers_swa ? (p.window < n_ctx ? p.window : n_ctx) : 0;
    out->kv_bytes_per_token = hundredths_to_bytes(s.per_token);
    out->kv_bytes_per_token_full = hundredths_to_bytes(s.per_token_full);
    out->kv_bytes = hundredths_to_bytes(s.total);
    return QR_OK;
}
