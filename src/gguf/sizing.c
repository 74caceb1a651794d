/* Memory sizing: how many bytes a model's weights take by class and how large its KV cache is
 * for a given context, derived from the tensor table and the architecture contract only. The
 * weight classes come from one marker table over tensor names; the KV cache follows llama.cpp's
 * per-layer layout (grouped-query heads, separate head dims and a window cap on sliding layers,
 * no cache for layers that reuse another layer's KV). Inputs the file does not state leave the KV
 * part unknown with a reason; no loader default is filled in. The engine figures add what
 * llama-server does with the engine parameters (cell padding, the sliding-window allowance for
 * a micro-batch, per-sequence streams) and estimate its compute buffer from the tensor table.
 * Every product and sum is checked for 64-bit overflow because every input is file-controlled.
 * The only allocation is the engine estimate's per-layer scratch. */
#include "gguf/sizing.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
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
    bool has_pattern, mla_absorbed;
};

/* Whether `<arch>.<suffix>` is stated (any type). */
static bool arch_key(const struct qr_gguf *g, const struct qr_arch *a, const char *suffix)
{
    char key[QR_ARCH_MAX_NAME + 48];
    snprintf(key, sizeof key, "%.*s.%s", (int) a->architecture.v.len, a->architecture.v.ptr,
             suffix);
    return qr_gguf_find(g, key) != NULL;
}

static enum qr_sizing_kv kv_plan(const struct qr_gguf *g, const struct qr_arch *a,
                                 struct kv_plan *p)
{
    *p = (struct kv_plan){0};
    if (!a->block_count.known || a->block_count.v == 0 || a->block_count.v > QR_ARCH_MAX_LAYERS)
        return QR_SIZING_KV_NO_LAYERS;
    p->n_layers = a->block_count.v;
    /* MLA: without the _mla keys the cache holds per-head K and V (the usual formula); with
     * both it holds the latent (kv_lora_rank + rope dims, stated as key_length) as K only. */
    if (a->architecture.known && arch_key(g, a, "attention.kv_lora_rank")) {
        bool k = arch_key(g, a, "attention.key_length_mla");
        bool v = arch_key(g, a, "attention.value_length_mla");
        if (k != v)
            return QR_SIZING_KV_MLA;
        p->mla_absorbed = k;
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

/* The contract's head dim when neither a length key nor a separate attn_k/attn_v tensor states
 * it: arch.c derives head_dim_k/v from the tensors that do exist (e.g. a fused attn_qkv) when
 * every layer agrees. */
static bool contract_dim(const struct qr_arch_u64 *d, uint64_t *out, bool *from_tensors)
{
    if (!d->known || d->v == 0)
        return false;
    *out = d->v;
    *from_tensors = true;
    return true;
}

/* Accumulators in hundredths of a byte. */
struct kv_sum {
    uint64_t per_token, per_token_full, total;
    uint64_t v_full, v_swa; /* the V part of per_token_full and of the sliding layers' share */
    uint64_t v_min, v_max;  /* V elements per cell of one layer (head_count_kv * value_len) */
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
    v = 0; /* the absorbed MLA latent is K only */
    if (!head_dim(g, &a->key_length, &a->key_length_swa, swa, "attn_k", il, n_kv, &k,
                  &out->kv_dims_from_tensors) &&
        !contract_dim(swa ? &a->head_dim_k_swa : &a->head_dim_k, &k, &out->kv_dims_from_tensors))
        return QR_SIZING_KV_NO_HEAD_DIM;
    if (!p->mla_absorbed &&
        !head_dim(g, &a->value_length, &a->value_length_swa, swa, "attn_v", il, n_kv, &v,
                  &out->kv_dims_from_tensors) &&
        !contract_dim(swa ? &a->head_dim_v_swa : &a->head_dim_v, &v, &out->kv_dims_from_tensors))
        return QR_SIZING_KV_NO_HEAD_DIM;
    uint64_t dims, elems, row, cells = swa && p->window < n_ctx ? p->window : n_ctx;
    if (__builtin_add_overflow(k, v, &dims) || __builtin_mul_overflow(n_kv, dims, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t) x100, &row) || !add_mul(&s->per_token, row, 1) ||
        (!swa && !add_mul(&s->per_token_full, row, 1)) || !add_mul(&s->total, row, cells))
        return QR_SIZING_KV_OVERFLOW;
    uint64_t v_elems = n_kv * v; /* <= elems: cannot wrap; nor can the sums of <= row below */
    add_mul(swa ? &s->v_swa : &s->v_full, v_elems, x100);
    s->v_min = out->kv_layers == 0 || v_elems < s->v_min ? v_elems : s->v_min;
    s->v_max = v_elems > s->v_max ? v_elems : s->v_max;
    out->kv_layers++;
    out->kv_layers_swa += swa;
    return QR_SIZING_KV_KNOWN;
}

static void kv_clear(struct qr_sizing *out)
{
    out->kv_dims_from_tensors = false;
    out->kv_mla_absorbed = false;
    out->kv_layers = out->kv_layers_swa = out->kv_layers_shared = out->kv_cells_swa = 0;
    out->kv_window = 0;
    out->kv_bytes_per_token = out->kv_bytes_per_token_full = out->kv_bytes = 0;
}

/* qr_gguf_size, also giving the unrounded per-token sums (hundredths) to the engine part. */
static enum qr_err size_window(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_ctx,
                               uint32_t kv_type_bytes_x100, struct qr_sizing *out,
                               struct qr_diag *diag, struct kv_sum *sums)
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
    out->kv_mla_absorbed = p.mla_absorbed;
    out->kv_window = out->kv_layers_swa ? p.window : 0;
    out->kv_cells_swa = out->kv_layers_swa ? (p.window < n_ctx ? p.window : n_ctx) : 0;
    out->kv_bytes_per_token = hundredths_to_bytes(s.per_token);
    out->kv_bytes_per_token_full = hundredths_to_bytes(s.per_token_full);
    out->kv_bytes = hundredths_to_bytes(s.total);
    *sums = s;
    return QR_OK;
}

enum qr_err qr_gguf_size(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_ctx,
                         uint32_t kv_type_bytes_x100, struct qr_sizing *out, struct qr_diag *diag)
{
    struct kv_sum s;
    return size_window(g, a, n_ctx, kv_type_bytes_x100, out, diag, &s);
}

void qr_sizing_params_init(struct qr_sizing_params *p, uint64_t n_ctx)
{
    *p = (struct qr_sizing_params){
        .n_ctx = n_ctx,
        .n_seq = 4,
        .kv_unified = true,
        .n_batch = 2048,
        .n_ubatch = 512,
        .kv_type_bytes_x100 = 200,
        .flash_attn = true,
    };
}

static uint64_t min_u64(uint64_t x, uint64_t y)
{
    return x < y ? x : y;
}

/* x rounded up to a multiple of QR_SIZING_CELL_PAD; false on overflow. */
static bool pad_cells(uint64_t x, uint64_t *out)
{
    uint64_t r = x % QR_SIZING_CELL_PAD;
    *out = x;
    return !r || !__builtin_add_overflow(x, QR_SIZING_CELL_PAD - r, out);
}

/* out->eng's streams, cells and KV bytes from the window model's per-token sums; false on
 * overflow. */
static bool engine_kv(const struct qr_sizing_params *p, const struct kv_sum *s,
                      struct qr_sizing *out)
{
    struct qr_sizing_engine *e = &out->eng;
    e->n_ubatch = min_u64(min_u64(p->n_ubatch, p->n_batch), p->n_ctx);
    if (e->no_cache)
        return true;
    e->streams = p->kv_unified ? 1 : p->n_seq;
    uint64_t per_stream = p->n_ctx / e->streams + (p->n_ctx % e->streams != 0);
    if (!pad_cells(per_stream, &e->cells))
        return false;
    uint64_t allow, cells, full = 0, swa = 0, full_x100 = s->per_token_full;
    uint64_t swa_x100 = s->per_token - s->per_token_full;
    if (!p->flash_attn && s->v_min != s->v_max) {
        /* Without flash attention, V rows of differing widths are all padded to the widest. */
        uint64_t n_full = out->kv_layers - out->kv_layers_swa, pad_full = 0, pad_swa = 0;
        if (__builtin_mul_overflow(s->v_max, (uint64_t) p->kv_type_bytes_x100, &allow) ||
            !add_mul(&pad_full, allow, n_full) || !add_mul(&pad_swa, allow, out->kv_layers_swa) ||
            __builtin_add_overflow(full_x100 - s->v_full, pad_full, &full_x100) ||
            __builtin_add_overflow(swa_x100 - s->v_swa, pad_swa, &swa_x100))
            return false;
    }
    if (out->kv_layers_swa) {
        /* The window of every sequence sharing the stream plus one micro-batch. */
        if (__builtin_mul_overflow(out->kv_window, p->kv_unified ? p->n_seq : 1, &allow) ||
            __builtin_add_overflow(allow, e->n_ubatch, &allow) || !pad_cells(allow, &allow))
            return false;
        e->cells_swa = min_u64(e->cells, allow);
    }
    if (__builtin_mul_overflow(e->cells, e->streams, &cells) || !add_mul(&full, full_x100, cells) ||
        __builtin_mul_overflow(e->cells_swa, e->streams, &cells) || !add_mul(&swa, swa_x100, cells))
        return false;
    e->kv_bytes_full = hundredths_to_bytes(full);
    e->kv_bytes_swa = hundredths_to_bytes(swa);
    return !__builtin_add_overflow(e->kv_bytes_full, e->kv_bytes_swa, &e->kv_bytes);
}

/* The layer index of a "blk.<il>." tensor name; false for other names. */
static bool layer_of(struct qr_slice name, uint64_t *il)
{
    size_t i = 4;
    if (name.len < 6 || memcmp(name.ptr, "blk.", 4) != 0)
        return false;
    *il = 0;
    for (; i < name.len && name.ptr[i] >= '0' && name.ptr[i] <= '9' && i < 14; i++)
        *il = *il * 10 + (uint64_t) (name.ptr[i] - '0');
    return i > 4 && i < name.len && name.ptr[i] == '.';
}

/* The largest sum, over the layers, of the output widths of the layer's matrices (routed
 * experts: expert_used_count of them, all when unknown). Widths are bounded by the tensors'
 * element counts, which the reader bounds; the sums are still checked. */
static enum qr_err widest_layer(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_layers,
                                uint64_t *out)
{
    uint64_t *sum = calloc(n_layers, sizeof *sum);
    if (!sum)
        return QR_ERR_NOMEM;
    uint64_t used = a->expert_used_count.known ? a->expert_used_count.v : UINT64_MAX;
    enum qr_err err = QR_OK;
    *out = 0;
    for (size_t i = 0, n = qr_gguf_tensor_count(g); i < n && !err; i++) {
        const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, i);
        uint64_t il, w;
        if (t->n_dims < 2 || !layer_of(t->name, &il) || il >= n_layers)
            continue;
        w = t->n_elements / t->dims[0]; /* dims[1] * the matrices stacked above it */
        if (t->n_dims >= 3 && qr_sizing_classify(t->name) == QR_SIZING_EXPERTS)
            w = t->dims[1] * min_u64(used, w / t->dims[1]);
        if (__builtin_add_overflow(sum[il], w, &sum[il]))
            err = QR_ERR_TOO_LARGE;
        else if (sum[il] > *out)
            *out = sum[il];
    }
    free(sum);
    return err;
}

/* The compute-buffer estimate (sizing.h); false on overflow. Leaves compute_known false when an
 * input is unknown. */
static bool engine_compute(const struct qr_gguf *g, const struct qr_arch *a,
                           const struct qr_sizing_params *p, struct qr_sizing *out)
{
    struct qr_sizing_engine *e = &out->eng;
    uint64_t vocab = a->vocab_size.known ? a->vocab_size.v : 0;
    const struct qr_gguf_tensor *te = qr_gguf_find_tensor(g, "token_embd.weight");
    if (!vocab && te && te->n_dims == 2)
        vocab = te->dims[1];
    if (!vocab || !a->embedding_length.known || (!p->flash_attn && !a->head_count.known))
        return true;
    uint64_t widest = e->widest_layer, u = e->n_ubatch, x;
    uint64_t full = out->kv_layers > out->kv_layers_swa ? (e->no_cache ? u : e->cells) : 0;
    uint64_t swa = out->kv_layers_swa ? (e->no_cache ? u : e->cells_swa) : 0;
    uint64_t kv_max = full > swa ? full : swa;
    if (__builtin_add_overflow(full, swa, &x) || __builtin_mul_overflow(x, u, &x) ||
        __builtin_mul_overflow(x, (uint64_t) (p->flash_attn ? 2 : 4), &e->compute_mask))
        return false;
    if (!p->flash_attn && (__builtin_mul_overflow(kv_max, u, &x) ||
                           __builtin_mul_overflow(x, a->head_count.max, &x) ||
                           __builtin_mul_overflow(x, (uint64_t) 4, &e->compute_kq)))
        return false;
    if (__builtin_mul_overflow(a->embedding_length.v, (uint64_t) 4, &x) ||
        __builtin_add_overflow(x, vocab, &x) || __builtin_add_overflow(x, widest, &x) ||
        __builtin_mul_overflow(x, u, &x) ||
        __builtin_mul_overflow(x, (uint64_t) 4, &e->compute_act))
        return false;
    e->compute_known = true;
    return !__builtin_add_overflow(e->compute_mask, e->compute_kq, &x) &&
           !__builtin_add_overflow(x, e->compute_act, &e->compute_bytes);
}

enum qr_err qr_gguf_size_engine(const struct qr_gguf *g, const struct qr_arch *a,
                                const struct qr_sizing_params *p, struct qr_sizing *out,
                                struct qr_diag *diag)
{
    struct kv_sum s;
    if (!p->n_seq || !p->n_batch || !p->n_ubatch) {
        *out = (struct qr_sizing){.kv = QR_SIZING_KV_NO_LAYERS};
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "cannot size: n_seq %" PRIu64 ", n_batch %" PRIu64
                           " and n_ubatch %" PRIu64 " must be > 0",
                           p->n_seq, p->n_batch, p->n_ubatch);
    }
    enum qr_err err = size_window(g, a, p->n_ctx, p->kv_type_bytes_x100, out, diag, &s);
    if (err || out->kv != QR_SIZING_KV_KNOWN)
        return err;
    bool causal = true;
    char key[QR_ARCH_MAX_NAME + 32];
    snprintf(key, sizeof key, "%.*s.attention.causal", (int) a->architecture.v.len,
             a->architecture.v.ptr);
    out->eng.no_cache =
        p->non_causal || (a->architecture.known && !qr_gguf_get_bool(g, key, &causal) && !causal);
    err = widest_layer(g, a, a->block_count.v, &out->eng.widest_layer);
    if (err == QR_ERR_NOMEM)
        return qr_diag_set(diag, err, "cannot size: no memory for %" PRIu64 " layers",
                           a->block_count.v);
    if (err || !engine_kv(p, &s, out) || !engine_compute(g, a, p, out)) {
        kv_clear(out);
        out->eng = (struct qr_sizing_engine){0};
        out->kv = QR_SIZING_KV_OVERFLOW;
        return qr_diag_set(diag, QR_ERR_TOO_LARGE,
                           "cannot size: llama-server's caches or compute buffer for n_ctx %" PRIu64
                           " overflow 64 bits",
                           p->n_ctx);
    }
    return QR_OK;
}
