/* libFuzzer target for the Hugging Face config.json reader (gguf/hfconfig.h). Any input must
 * either translate into a contract or fail with a parse, size or field error whose message starts
 * "cannot read 'fuzz.json': ", never crash, leak or read outside the input. When it translates:
 * the architecture is known and is a short name, every unknown field name fits its buffer, the
 * translated keys-only file has no tensors and the contract nothing that needs them, a stated
 * pattern has one entry per layer and agrees with its counts, and parsing the same bytes again
 * gives the same contract (no hidden state).
 *
 * Seeds in corpus/fuzz_hfconfig: real-shaped configs (llama 3, qwen3 moe, gemma 3 multimodal,
 * gemma 4, deepseek v3, bert, an MLX quantized one) and hostile ones (wrong types, duplicates,
 * deep nesting, huge numbers). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/hfconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct qr_hfconfig *hf)
{
    const struct qr_arch *a = &hf->arch;
    if (!a->architecture.known || a->architecture.v.len == 0 ||
        a->architecture.v.len > QR_ARCH_MAX_NAME || hf->model_type.len == 0)
        abort();
    if (qr_gguf_tensor_count(hf->gguf) != 0 || a->n_tensors != 0 || a->params_total.known ||
        a->ffn != QR_ARCH_FFN_UNKNOWN)
        abort();
    size_t kept = hf->n_unknown < QR_HF_MAX_UNKNOWN ? hf->n_unknown : QR_HF_MAX_UNKNOWN;
    for (size_t i = 0; i < kept; i++) {
        if (hf->unknown[i].len > QR_HF_MAX_FIELD ||
            (hf->unknown[i].cut && hf->unknown[i].len != QR_HF_MAX_FIELD))
            abort();
    }
    if (hf->n_notes > QR_HF_MAX_NOTES)
        abort();
    const struct qr_arch_pattern *p = &a->sliding_window_pattern;
    if (p->known) {
        if (p->n_layers == 0 || p->n_layers > QR_ARCH_MAX_LAYERS ||
            p->n_swa + p->n_global != p->n_layers)
            abort();
        if (a->block_count.known && a->block_count.v != p->n_layers)
            abort();
    }
    if (hf->modalities & ~(unsigned) (QR_HF_VISION | QR_HF_AUDIO))
        abort();
}

static bool same(const struct qr_hfconfig *x, const struct qr_hfconfig *y)
{
    const struct qr_arch *a = &x->arch, *b = &y->arch;
    return a->architecture.v.len == b->architecture.v.len &&
           !memcmp(a->architecture.v.ptr, b->architecture.v.ptr, a->architecture.v.len) &&
           a->block_count.known == b->block_count.known && a->block_count.v == b->block_count.v &&
           a->key_length.v == b->key_length.v && a->expert_count.v == b->expert_count.v &&
           a->sliding_window_pattern.n_swa == b->sliding_window_pattern.n_swa &&
           x->n_unknown == y->n_unknown && x->n_notes == y->n_notes &&
           x->modalities == y->modalities && a->n_unknown_keys == b->n_unknown_keys;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_diag d = {{0}};
    struct qr_hfconfig *hf = NULL, *again = NULL;
    enum qr_err err = qr_hfconfig_parse(data, size, "fuzz.json", &d, &hf);
    if (err != QR_OK) {
        if (hf || (err != QR_ERR_PARSE && err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "cannot read 'fuzz.json': ", 25) != 0)
            abort();
        return 0;
    }
    check(hf);
    if (qr_hfconfig_parse(data, size, "fuzz.json", &d, &again) != QR_OK || !same(hf, again))
        abort();
    qr_hfconfig_free(again);
    qr_hfconfig_free(hf);
    return 0;
}
