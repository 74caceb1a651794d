/* What belongs to a model besides its main chat template: named chat templates stored in the
 * same file (`tokenizer.chat_template.<name>`, e.g. "tool_use", "rag", as llama.cpp's
 * llama_model_chat_template(model, name) looks them up) and multimodal projector files lying
 * next to it (GGUF files whose general.architecture is "clip": the engine's --mmproj input).
 *
 * A projector does not name the model it belongs to. The generic rule used here: a projector
 * whose stated projection width (clip.vision.projection_dim / clip.audio.projection_dim) equals
 * the model's embedding_length can feed it ("match"); a different width cannot ("mismatch");
 * when either side is not stated, "unknown". Nothing is decided from file names. */
#ifndef QR_GGUF_COMPANION_H
#define QR_GGUF_COMPANION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gguf/gguf.h"
#include "gguf/sha256.h"

#define QR_COMPANION_MAX_TEMPLATES  32u   /* named templates kept (the count covers all) */
#define QR_COMPANION_MAX_PROJECTORS 16u   /* projector files kept (the count covers all) */
#define QR_COMPANION_MAX_SCAN       4096u /* directory entries looked at, at most */
#define QR_COMPANION_NAME_MAX       256u  /* bytes of a file name or template name kept */

struct qr_gguf_template {
    char name[QR_COMPANION_NAME_MAX]; /* after "tokenizer.chat_template.", printable ASCII */
    uint64_t bytes;
    uint8_t sha256[QR_SHA256_LEN];
    unsigned markers; /* enum qr_arch_marker bits (gguf/arch.h) */
};

/* Named templates of g into out[0..cap), in file order; returns how many the file has (may
 * exceed cap). Keys whose value is not a string are skipped. */
size_t qr_gguf_named_templates(const struct qr_gguf *g, struct qr_gguf_template *out, size_t cap);

enum qr_projector_match {
    QR_PROJECTOR_UNKNOWN = 0,
    QR_PROJECTOR_MATCH = 1,
    QR_PROJECTOR_MISMATCH = 2,
};

struct qr_gguf_projector {
    char file[QR_COMPANION_NAME_MAX]; /* the file name in the model's directory */
    char projector_type[64];          /* clip.projector_type (or the vision/audio one); "" */
    bool vision_known, vision;        /* clip.has_vision_encoder */
    bool audio_known, audio;          /* clip.has_audio_encoder */
    uint64_t vision_projection_dim;   /* 0 when not stated */
    uint64_t audio_projection_dim;    /* 0 when not stated */
    enum qr_projector_match match;    /* against the model's embedding width */
};

/* Static name of a match value ("unknown", "match", "mismatch"). */
const char *qr_projector_match_name(unsigned m);

/* Look at the GGUF files (names ending ".gguf") in model_path's directory, other than the model
 * itself, and keep those whose general.architecture is "clip". Each is opened with the hardened
 * reader; a file that does not open is skipped (one bad neighbour never fails the model).
 * n_embd is the model's embedding width, 0 when unknown. *n_found counts every projector seen
 * (out keeps the first cap, in name order). QR_ERR_IO with diag when the directory cannot be
 * read; nothing found is QR_OK with *n_found 0. */
enum qr_err qr_gguf_find_projectors(const char *model_path, uint64_t n_embd,
                                    struct qr_gguf_projector *out, size_t cap, size_t *n_found,
                                    struct qr_diag *diag);

#endif
