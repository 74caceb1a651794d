/* Hugging Face `config.json` (the Transformers reference, shipped in vLLM and MLX model
 * directories) read into the same architecture contract as a GGUF file (gguf/arch.h).
 *
 * The config is translated into an in-memory GGUF that holds keys only (no tensors):
 * general.architecture from a table mapping the HF `model_type` to the llama.cpp architecture
 * name, and `<arch>.*` / `tokenizer.ggml.*` keys from a table mapping HF field names (docs/GGUF.md
 * has both tables). That file is opened with the hardened reader and qr_gguf_arch_derive() runs on
 * it, so the contract rules are the GGUF rules, not a second copy. Nothing is guessed: a field
 * the config does not state stays unknown, and whatever needs tensors (parameters, dense vs MoE
 * from expert tensors, tensor types) is unknown for a config. A nested `text_config` (multimodal
 * configs) is read as the text model, falling back to the top level field by field; a
 * `vision_config` / `audio_config` is reported as a modality that needs a projector. Config
 * fields that no rule maps are listed, like the GGUF reader's unknown `<arch>.*` keys.
 *
 * Hostile input: the file size, nesting depth, mapped string lengths and array lengths are capped
 * before use; a mapped field of the wrong type or out of range (negative, above 2^32 where a u32
 * is expected, a duplicate) fails with a message naming the field: "cannot read 'config.json':
 * 'text_config.num_hidden_layers' must be an integer, got string". null means "not stated". */
#ifndef QR_GGUF_HFCONFIG_H
#define QR_GGUF_HFCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"

#define QR_HF_MAX_CONFIG_BYTES (4u << 20)  /* config.json above this is refused */
#define QR_HF_MAX_INDEX_BYTES  (16u << 20) /* model.safetensors.index.json above this is skipped */
#define QR_HF_MAX_DEPTH        32u         /* nesting of objects and arrays */
#define QR_HF_MAX_STR          256u        /* bytes of a mapped string value */
#define QR_HF_MAX_MODEL_TYPE   QR_ARCH_MAX_NAME
#define QR_HF_MAX_UNKNOWN      64u /* unknown field names kept (n_unknown counts all) */
#define QR_HF_MAX_FIELD        96u /* bytes of an unknown field path kept (longer ones are cut) */
#define QR_HF_MAX_NOTES        8u
#define QR_HF_NOTE_LEN         160u

#define QR_HF_CONFIG_FILE "config.json"
#define QR_HF_INDEX_FILE  "model.safetensors.index.json"

enum qr_hf_modality {
    QR_HF_VISION = 1u << 0, /* vision_config present: an image projector is needed */
    QR_HF_AUDIO = 1u << 1,  /* audio_config present: an audio projector is needed */
};

/* A config field path no rule maps ("text_config.query_pre_attn_scalar"); raw bytes from the
 * file, cut to QR_HF_MAX_FIELD bytes. */
struct qr_hf_field {
    size_t len;
    bool cut;
    char name[QR_HF_MAX_FIELD];
};

/* What a config states. arch is derived from the translated GGUF (gguf, owned by this struct);
 * strings in arch and the slices below are views into memory this struct owns: everything is
 * valid until qr_hfconfig_free(). */
struct qr_hfconfig {
    struct qr_arch arch;
    const struct qr_gguf *gguf; /* borrowed view of the translated keys-only file (for sizing) */

    struct qr_slice model_type; /* the top-level model_type, else text_config's */
    bool arch_mapped;           /* model_type found in the table; else arch = model_type */
    bool text_config;           /* a text_config object was read */
    unsigned modalities;        /* enum qr_hf_modality bits */

    /* HF-only facts (no GGUF key carries them) */
    struct qr_arch_str dtype; /* torch_dtype / dtype */
    struct qr_arch_bool tie_word_embeddings;
    struct qr_arch_str quant_method;                 /* quantization_config.quant_method */
    struct qr_arch_u64 quant_bits, quant_group_size; /* quantization_config / quantization (MLX) */
    struct qr_arch_u64 weight_bytes; /* from the safetensors index or file next to config.json */
    const char *weight_bytes_from;   /* static file name it came from, or NULL */

    size_t n_unknown;
    struct qr_hf_field unknown[QR_HF_MAX_UNKNOWN]; /* the first ones, in file order */
    size_t n_notes;
    char notes[QR_HF_MAX_NOTES][QR_HF_NOTE_LEN]; /* why a stated field was not applied */

    /* private */
    void *doc_;
    uint8_t *buf_;
    struct qr_gguf *g_;
};

/* Parse a config.json held in memory (borrowed; not needed after return). name is used in
 * messages only (NULL: "<memory>"). On QR_OK *out is owned by the caller (qr_hfconfig_free).
 * Errors: QR_ERR_PARSE (not JSON, not an object), QR_ERR_TOO_LARGE (a cap), QR_ERR_INVALID (a
 * mapped field of the wrong type or range, no model_type), QR_ERR_NOMEM; diag reads
 * "cannot read 'NAME': what". */
enum qr_err qr_hfconfig_parse(const void *json, size_t len, const char *name, struct qr_diag *diag,
                              struct qr_hfconfig **out);

/* Read path: a config.json file, or a directory holding one. Also reads the weight bytes from a
 * model.safetensors.index.json (metadata.total_size) or a single model.safetensors (its data
 * section) next to it when present; a broken one leaves weight_bytes unknown with a note. Adds
 * QR_ERR_IO / QR_ERR_NOT_FOUND to the errors of qr_hfconfig_parse. */
enum qr_err qr_hfconfig_open(const char *path, struct qr_diag *diag, struct qr_hfconfig **out);

void qr_hfconfig_free(struct qr_hfconfig *hf);

/* Whether path looks like a config rather than a GGUF file: a directory, or a file whose first
 * byte after whitespace (and a UTF-8 BOM) is '{'. Reads at most a few bytes; false on any error. */
bool qr_hfconfig_probe(const char *path);

#endif
