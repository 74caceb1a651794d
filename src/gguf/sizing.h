/* Memory sizing of a GGUF model: weight bytes by tensor class (from the tensor table, by generic
 * name rules) and KV cache bytes per token and for a context length (from the architecture
 * contract, struct qr_arch). Nothing is guessed: when an input the KV formula needs is not stated
 * by the file, the KV part is marked unknown with the reason, and the weights are still given.
 *
 * KV formula (sizing.c has the details): for every layer il that owns its cache (not one of the
 * last shared_kv_layers layers, which reuse another layer's KV),
 *     elems(il) = head_count_kv(il) * (key_len(il) + value_len(il))
 *     cells(il) = sliding(il) ? min(n_ctx, sliding_window) : n_ctx
 *     kv_bytes  = ceil(sum(elems(il) * cells(il)) * kv_type_bytes_x100 / 100)
 * key_len/value_len are attention.key_length/value_length (key_length_swa/value_length_swa on
 * sliding layers when stated); when a length key is absent, the layer's attn_k/attn_v tensor
 * width divided by head_count_kv(il) (flagged kv_dims_from_tensors). Every product and sum is
 * overflow-checked. */
#ifndef QR_GGUF_SIZING_H
#define QR_GGUF_SIZING_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"

/* Weight classes, first matching rule wins (substring of the tensor name):
 * per_layer "per_layer" | norm "norm" | experts "_exps" | shared_experts "_shexp" |
 * token_embd "token_embd" | output "output.weight" / "output.bias" (the exact name) |
 * attn "attn_" | ffn "ffn_" (dense FFN, router ffn_gate_inp included) | other. */
enum qr_sizing_class {
    QR_SIZING_TOKEN_EMBD = 0,
    QR_SIZING_OUTPUT = 1,
    QR_SIZING_ATTN = 2,
    QR_SIZING_FFN = 3,
    QR_SIZING_EXPERTS = 4,
    QR_SIZING_SHARED_EXPERTS = 5,
    QR_SIZING_NORM = 6,
    QR_SIZING_PER_LAYER = 7,
    QR_SIZING_OTHER = 8,
    QR_SIZING_CLASS_COUNT = 9
};

/* Static short name of a class ("token_embd", "shared_experts", ...); NULL for other values. */
const char *qr_sizing_class_name(unsigned cls);
/* The class of one tensor name (exposed for tests). */
enum qr_sizing_class qr_sizing_classify(struct qr_slice name);

/* Whether the KV part is known, or why not. */
enum qr_sizing_kv {
    QR_SIZING_KV_KNOWN = 0,
    QR_SIZING_KV_NO_LAYERS = 1,   /* block_count unknown, 0 or above QR_ARCH_MAX_LAYERS */
    QR_SIZING_KV_NO_HEADS = 2,    /* head_count_kv unknown for some layer */
    QR_SIZING_KV_NO_HEAD_DIM = 3, /* key/value length neither stated nor readable from tensors */
    QR_SIZING_KV_NO_PATTERN = 4,  /* sliding_window > 0 without a per-layer pattern, or a
                                     pattern whose length is not block_count */
    QR_SIZING_KV_NO_WINDOW = 5,   /* sliding layers but sliding_window unknown or 0 */
    QR_SIZING_KV_BAD_SHARED = 6,  /* shared_kv_layers >= block_count */
    QR_SIZING_KV_MLA = 7,         /* attention.kv_lora_rank present: MLA cache not modeled */
    QR_SIZING_KV_OVERFLOW = 8,    /* a product or sum does not fit 64 bits */
};

/* Static short name ("known", "no_head_dim", ...); NULL for other values. */
const char *qr_sizing_kv_name(unsigned kv);

struct qr_sizing_weights {
    uint64_t bytes, n_tensors;
};

struct qr_sizing {
    struct qr_sizing_weights cls[QR_SIZING_CLASS_COUNT];
    uint64_t weight_bytes, n_tensors; /* all classes */

    enum qr_sizing_kv kv;             /* QR_SIZING_KV_KNOWN, else every kv_* below is 0 */
    bool kv_dims_from_tensors;        /* some head dim came from an attn_k/attn_v width */
    uint64_t kv_layers;               /* layers that own a cache */
    uint64_t kv_layers_swa;           /* of them, sliding */
    uint64_t kv_layers_shared;        /* layers reusing another layer's cache */
    uint64_t kv_cells_swa;            /* min(n_ctx, sliding_window); 0 without sliding layers */
    uint64_t kv_bytes_per_token;      /* all owning layers, while n_ctx <= the window */
    uint64_t kv_bytes_per_token_full; /* full-attention layers only: the cost past the window */
    uint64_t kv_bytes;                /* the whole cache for n_ctx */
};

/* Size the model behind g (a, derived from g by qr_gguf_arch_derive; both borrowed) for a cache
 * of n_ctx cells whose K and V elements take kv_type_bytes_x100 / 100 bytes each (200 for f16,
 * 400 for f32; 106 approximates q8_0's 34/32). *out (caller storage) is fully overwritten.
 * Returns QR_OK also when the KV part is unknown (out->kv says why); QR_ERR_INVALID for n_ctx or
 * kv_type_bytes_x100 of 0; QR_ERR_TOO_LARGE when a KV product overflows, with out->kv
 * QR_SIZING_KV_OVERFLOW, the weights filled in and diag naming the layer. */
enum qr_err qr_gguf_size(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_ctx,
                         uint32_t kv_type_bytes_x100, struct qr_sizing *out, struct qr_diag *diag);

#endif
