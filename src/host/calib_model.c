/* The default calibration model (calibrate.h, qr_calib_model_write): a llama-architecture GGUF
 * whose F16 weights are large enough that decoding one token streams them from memory, not from
 * cache, so the engine rows of a calibration without an operator's model still measure this
 * host. The weights are zeros (the engine reads and multiplies them like any others; the logits
 * are flat, which does not matter with ignore_eos) and the norms ones, so the file is the same on
 * every run and nothing random or trained is shipped. The vocabulary is GPT-2's 256 byte tokens
 * and two control tokens, with no merges: every prompt byte is one token. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "host/calibrate.h"

#define ARCH       "llama"
#define N_EMBD     1024u
#define N_HEAD     8u
#define N_FF       4096u
#define N_CTX      2048u
#define N_VOCAB    258u /* 256 bytes, <|bos|>, <|eos|> */
#define MAX_LAYERS 64u

/* GPT-2's byte -> unicode table: printable Latin-1 bytes stand for themselves, the others map to
 * 256 and up in byte order. The token text is that code point in UTF-8. */
static void byte_token(unsigned b, char out[4])
{
#define PRINTABLE(c) (((c) >= 33 && (c) <= 126) || ((c) >= 161 && (c) <= 172) || (c) >= 174)
    uint32_t cp = b;
    if (!PRINTABLE(b)) {
        cp = 256;
        for (unsigned c = 0; c < b; c++)
            cp += PRINTABLE(c) ? 0u : 1u;
    }
#undef PRINTABLE
    if (cp < 0x80) {
        out[0] = (char) cp;
        out[1] = '\0';
    } else {
        out[0] = (char) (0xc0 | (cp >> 6));
        out[1] = (char) (0x80 | (cp & 0x3f));
        out[2] = '\0';
    }
}

static void tensor(struct qr_gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1)
{
    uint64_t dims[2] = {ne0, ne1};
    qr_gguf_writer_add_tensor(w, name, QR_GGML_F16, 2, dims, NULL, (size_t) (ne0 * ne1 * 2u));
}

static void norm(struct qr_gguf_writer *w, const char *name, const float *ones)
{
    uint64_t dims[1] = {N_EMBD};
    qr_gguf_writer_add_tensor(w, name, QR_GGML_F32, 1, dims, ones, N_EMBD * sizeof(float));
}

static void keys(struct qr_gguf_writer *w, uint32_t layers)
{
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT(ARCH));
    qr_gguf_writer_add_str(w, "general.name", QR_SLICE_LIT("quantum-runtime calibration"));
    qr_gguf_writer_add_u32(w, "general.file_type", 1u); /* mostly F16 */
    qr_gguf_writer_add_u32(w, ARCH ".context_length", N_CTX);
    qr_gguf_writer_add_u32(w, ARCH ".embedding_length", N_EMBD);
    qr_gguf_writer_add_u32(w, ARCH ".block_count", layers);
    qr_gguf_writer_add_u32(w, ARCH ".feed_forward_length", N_FF);
    qr_gguf_writer_add_u32(w, ARCH ".attention.head_count", N_HEAD);
    qr_gguf_writer_add_u32(w, ARCH ".attention.head_count_kv", N_HEAD);
    qr_gguf_writer_add_f32(w, ARCH ".attention.layer_norm_rms_epsilon", 1e-5f);
    qr_gguf_writer_add_u32(w, ARCH ".rope.dimension_count", N_EMBD / N_HEAD);
    char text[N_VOCAB][8];
    struct qr_slice toks[N_VOCAB];
    int32_t types[N_VOCAB];
    for (unsigned b = 0; b < 256; b++) {
        byte_token(b, text[b]);
        types[b] = 1; /* normal */
    }
    snprintf(text[256], sizeof text[256], "<|bos|>");
    snprintf(text[257], sizeof text[257], "<|eos|>");
    types[256] = types[257] = 3; /* control */
    for (unsigned i = 0; i < N_VOCAB; i++)
        toks[i] = qr_slice_str(text[i]);
    qr_gguf_writer_add_str(w, "tokenizer.ggml.model", QR_SLICE_LIT("gpt2"));
    qr_gguf_writer_add_str(w, "tokenizer.ggml.pre", QR_SLICE_LIT("default"));
    qr_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, N_VOCAB);
    qr_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", QR_GGUF_I32, types, N_VOCAB);
    qr_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 256u);
    qr_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 257u);
    qr_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
}

uint32_t qr_calib_model_layers(uint64_t weight_bytes)
{
    const uint64_t per_layer = (4u * N_EMBD * N_EMBD + 3u * N_EMBD * N_FF) * 2u;
    uint64_t n = (weight_bytes + per_layer - 1) / per_layer;
    return n < 1 ? 1u : n > MAX_LAYERS ? MAX_LAYERS : (uint32_t) n;
}

enum qr_err qr_calib_model_write(const char *path, uint64_t weight_bytes, struct qr_diag *diag)
{
    uint32_t layers = qr_calib_model_layers(weight_bytes);
    float ones[N_EMBD];
    for (unsigned i = 0; i < N_EMBD; i++)
        ones[i] = 1.0f;
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    keys(w, layers);
    tensor(w, "token_embd.weight", N_EMBD, N_VOCAB);
    norm(w, "output_norm.weight", ones);
    tensor(w, "output.weight", N_EMBD, N_VOCAB);
    static const char *const attn[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    for (uint32_t l = 0; l < layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%u.attn_norm.weight", l);
        norm(w, name, ones);
        for (size_t k = 0; k < QR_ARRAY_LEN(attn); k++) {
            snprintf(name, sizeof name, "blk.%u.%s.weight", l, attn[k]);
            tensor(w, name, N_EMBD, N_EMBD);
        }
        snprintf(name, sizeof name, "blk.%u.ffn_norm.weight", l);
        norm(w, name, ones);
        snprintf(name, sizeof name, "blk.%u.ffn_gate.weight", l);
        tensor(w, name, N_EMBD, N_FF);
        snprintf(name, sizeof name, "blk.%u.ffn_up.weight", l);
        tensor(w, name, N_EMBD, N_FF);
        snprintf(name, sizeof name, "blk.%u.ffn_down.weight", l);
        tensor(w, name, N_FF, N_EMBD);
    }
    /* written beside the target and renamed: a reader never sees half a file */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int) getpid());
    enum qr_err err = qr_gguf_writer_write_file(w, tmp, diag);
    qr_gguf_writer_free(w);
    if (!err && rename(tmp, path) != 0)
        err = qr_diag_set(diag, QR_ERR_IO, "cannot write '%s'", path);
    if (err)
        unlink(tmp);
    return err;
}
