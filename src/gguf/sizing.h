/* Memory sizing of a GGUF model: weight bytes by tensor class (from the tensor table, by generic
 * name rules), KV cache bytes per token and for a context length (from the architecture
 * contract, struct qr_arch), and what llama-server allocates for given engine parameters (its
 * padded KV caches and an estimate of its compute buffer). Nothing is guessed: when an input the
 * KV formula needs is not stated by the file, the KV part is marked unknown with the reason, and
 * the weights are still given.
 *
 * KV formula (sizing.c has the details): for every layer il that owns its cache (not one of the
 * last shared_kv_layers layers, which reuse another layer's KV),
 *     elems(il) = head_count_kv(il) * (key_len(il) + value_len(il))
 *     cells(il) = sliding(il) ? min(n_ctx, sliding_window) : n_ctx
 *     kv_bytes  = ceil(sum(elems(il) * cells(il)) * kv_type_bytes_x100 / 100)
 * key_len/value_len are attention.key_length/value_length (key_length_swa/value_length_swa on
 * sliding layers when stated); when a length key is absent, the layer's attn_k/attn_v tensor
 * width divided by head_count_kv(il) (flagged kv_dims_from_tensors). MLA files
 * (attention.kv_lora_rank stated) use the same formula in their non-absorbed layout (no
 * key_length_mla/value_length_mla: per-head K and V of key_length/value_length); in the absorbed
 * layout (both _mla keys stated) the cache holds the compressed latent as K only (value_len 0).
 * Every product and sum is overflow-checked.
 *
 * The engine figures (qr_gguf_size_engine, struct qr_sizing_engine) follow what llama-server
 * (0.7.0, build 11669) was observed to allocate; docs/GGUF.md lists the experiments:
 *     streams   = kv_unified ? 1 : n_seq
 *     n_ubatch' = min(n_ubatch, n_batch, n_ctx)
 *     cells     = pad256(kv_unified ? n_ctx : ceil(n_ctx / n_seq))          per stream
 *     cells_swa = min(cells, pad256(window * (kv_unified ? n_seq : 1) + n_ubatch'))  per stream
 *     kv_bytes  = full layers * cells * streams + sliding layers * cells_swa * streams
 * where, without flash attention, every layer's V row (head_count_kv * value_len) is padded to
 * the widest one when they differ.
 * A non-causal model (attention.causal = false, or told so) has no KV cache at all.
 * The compute-buffer estimate (an upper bound on every fixture, within a factor 2) has one mask
 * per kind of layer present (full, sliding), each over m cells: cells or cells_swa, or n_ubatch'
 * for a non-causal model:
 *     mask      = n_ubatch' * sum(m) * (flash_attn ? 2 : 4)
 *     kq        = flash_attn ? 0 : n_ubatch' * max(m) * max head_count * 4
 *     act       = n_ubatch' * 4 * (n_vocab + 4 * n_embd + widest layer)
 * where the widest layer is the largest sum over one layer's weight matrices of their output
 * width (dims[1]; routed-expert tensors count expert_used_count experts, other 3-d tensors
 * dims[1] * dims[2]). */
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
    QR_SIZING_KV_MLA = 7,         /* attention.kv_lora_rank with only one of key_length_mla /
                                     value_length_mla: the cache layout is ambiguous */
    QR_SIZING_KV_OVERFLOW = 8,    /* a product or sum does not fit 64 bits */
};

/* Static short name ("known", "no_head_dim", ...); NULL for other values. */
const char *qr_sizing_kv_name(unsigned kv);

struct qr_sizing_weights {
    uint64_t bytes, n_tensors;
};

/* The engine parameters the llama-server figures depend on (its flag in brackets).
 * qr_sizing_params_init sets llama-server's defaults. */
struct qr_sizing_params {
    uint64_t n_ctx;              /* [-c] total cells asked for, > 0 */
    uint64_t n_seq;              /* [-np] parallel sequences (slots), > 0; default 4 (-np auto) */
    bool kv_unified;             /* [-kvu] one cache stream for all sequences; default true (the
                                    server's -np auto sets it; an explicit -np N clears it) */
    uint64_t n_batch;            /* [-b] logical batch, > 0; default 2048 */
    uint64_t n_ubatch;           /* [-ub] physical batch, > 0; default 512 */
    uint32_t kv_type_bytes_x100; /* [-ctk/-ctv] bytes per K/V element x 100; default 200 (f16) */
    bool flash_attn;             /* [-fa] default true (auto: on for the CPU backend) */
    bool non_causal;             /* attention over the whole micro-batch and no KV cache (an
                                    encoder); also implied when the file states
                                    attention.causal = false. Default false */
};

#define QR_SIZING_CELL_PAD 256u /* llama-server pads every cache's cell count to this */

/* *p = llama-server's defaults for a total context of n_ctx cells. */
void qr_sizing_params_init(struct qr_sizing_params *p, uint64_t n_ctx);

/* What llama-server allocates for struct qr_sizing_params (qr_gguf_size_engine only). Per-stream
 * cell counts; bytes cover all streams. */
struct qr_sizing_engine {
    uint64_t n_ubatch;      /* effective: min(n_ubatch, n_batch, n_ctx) */
    bool no_cache;          /* non-causal: no KV cache (every count and KV byte below is 0) */
    uint64_t streams;       /* KV streams: 1 when unified, else n_seq */
    uint64_t cells;         /* non-SWA cache cells per stream */
    uint64_t cells_swa;     /* SWA cache cells per stream; 0 without sliding layers */
    uint64_t kv_bytes_full; /* the non-SWA cache, rounded up once */
    uint64_t kv_bytes_swa;  /* the SWA cache, rounded up once */
    uint64_t kv_bytes;      /* their sum */
    bool compute_known;     /* false when the vocabulary or embedding size is unknown */
    uint64_t compute_mask, compute_kq, compute_act; /* the estimate's terms (header comment) */
    uint64_t compute_bytes;                         /* their sum */
    uint64_t widest_layer; /* sum of one layer's matrix output widths, the largest */
};

struct qr_sizing {
    struct qr_sizing_weights cls[QR_SIZING_CLASS_COUNT];
    uint64_t weight_bytes, n_tensors; /* all classes */

    enum qr_sizing_kv kv;             /* QR_SIZING_KV_KNOWN, else every kv_* below is 0 */
    bool kv_dims_from_tensors;        /* some head dim came from an attn_k/attn_v width */
    bool kv_mla_absorbed;             /* MLA latent cache: K only */
    uint64_t kv_layers;               /* layers that own a cache */
    uint64_t kv_layers_swa;           /* of them, sliding */
    uint64_t kv_layers_shared;        /* layers reusing another layer's cache */
    uint64_t kv_window;               /* sliding_window; 0 without sliding layers */
    uint64_t kv_cells_swa;            /* min(n_ctx, sliding_window); 0 without sliding layers */
    uint64_t kv_bytes_per_token;      /* all owning layers, while n_ctx <= the window */
    uint64_t kv_bytes_per_token_full; /* full-attention layers only: the cost past the window */
    uint64_t kv_bytes;                /* the whole cache for n_ctx cells, the window model */

    struct qr_sizing_engine eng; /* qr_gguf_size_engine only; all 0 from qr_gguf_size and when
                                    the KV part is unknown */
};

/* Size the model behind g (a, derived from g by qr_gguf_arch_derive; both borrowed) for a cache
 * of n_ctx cells whose K and V elements take kv_type_bytes_x100 / 100 bytes each (200 for f16,
 * 400 for f32; 106 approximates q8_0's 34/32). This is the engine-independent window model:
 * sliding layers hold min(n_ctx, window) cells, nothing is padded. *out (caller storage) is fully
 * overwritten. Returns QR_OK also when the KV part is unknown (out->kv says why); QR_ERR_INVALID
 * for n_ctx or kv_type_bytes_x100 of 0; QR_ERR_TOO_LARGE when a KV product overflows, with
 * out->kv QR_SIZING_KV_OVERFLOW, the weights filled in and diag naming the layer. */
enum qr_err qr_gguf_size(const struct qr_gguf *g, const struct qr_arch *a, uint64_t n_ctx,
                         uint32_t kv_type_bytes_x100, struct qr_sizing *out, struct qr_diag *diag);

/* qr_gguf_size for p->n_ctx and p->kv_type_bytes_x100, then out->eng: what llama-server
 * allocates with the parameters *p (borrowed). QR_ERR_INVALID for a 0 parameter; QR_ERR_NOMEM
 * when the per-layer scratch (8 bytes per layer) cannot be allocated; QR_ERR_TOO_LARGE as
 * qr_gguf_size, also for an engine product that overflows (out->kv OVERFLOW, out->eng 0).
 * out->eng stays 0 when the KV part is unknown; its compute terms stay 0 (compute_known false)
 * when the vocabulary size (vocab_size, else token_embd's dims[1]) or embedding_length is. */
enum qr_err qr_gguf_size_engine(const struct qr_gguf *g, const struct qr_arch *a,
                                const struct qr_sizing_params *p, struct qr_sizing *out,
                                struct qr_diag *diag);

#endif
