/* What an Ollama daemon says about one model (POST /api/show): capabilities, thinking levels,
 * architecture, context length and expert counts -- parsed from an untrusted body -- and the
 * adapter's per-model cache of it. A model is described on its first request, again once the
 * entry is older than QR_OLLAMA_SHOW_TTL_MS, and again after the adapter forgets it (the upstream
 * refused a request for it: the model may have changed). Requests for a model whose description
 * is on the way wait for it; a failed description is remembered for QR_OLLAMA_SHOW_RETRY_MS so a
 * down daemon is not asked once per request. Behaviour: docs/API.md "Ollama routes (adoption)". */
#ifndef QR_BACKEND_OLLAMA_SHOW_H
#define QR_BACKEND_OLLAMA_SHOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/codec.h"
#include "contract/request.h"
#include "core/buf.h"
#include "core/err.h"

struct qr_backend;

/* capabilities[] values kept (others, e.g. "image", "audio", are ignored) */
#define QR_OLLAMA_CAP_COMPLETION 0x01u
#define QR_OLLAMA_CAP_TOOLS      0x02u
#define QR_OLLAMA_CAP_INSERT     0x04u
#define QR_OLLAMA_CAP_VISION     0x08u
#define QR_OLLAMA_CAP_EMBEDDING  0x10u
#define QR_OLLAMA_CAP_THINKING   0x20u

#define QR_OLLAMA_SHOW_MAX_BODY   (8u << 20) /* a non-verbose answer is a few hundred KiB at most */
#define QR_OLLAMA_SHOW_TIMEOUT_MS 10000u
#define QR_OLLAMA_SHOW_TTL_MS     300000 /* 5 min: a re-pulled model is seen within this */
#define QR_OLLAMA_SHOW_RETRY_MS   5000   /* a failed /api/show is retried after this */
#define QR_OLLAMA_SHOW_MAX_MODELS 256u   /* cache entries; the oldest idle one is evicted */
#define QR_OLLAMA_SHOW_MAX_NAME   512u   /* longer model names are never described */

struct qr_ollama_show {
    bool has_caps;              /* capabilities[] was present (older daemons have none) */
    uint32_t caps;              /* QR_OLLAMA_CAP_* */
    unsigned think_levels;      /* QR_THINK_LEVEL_* (backend/codec.h) listed in thinking.values */
    char arch[64];              /* model_info general.architecture; "" when absent or unusable */
    uint64_t context_length;    /* <arch>.context_length; 0 when unknown */
    uint64_t expert_count;      /* <arch>.expert_count; 0 when unknown (dense) */
    uint64_t expert_used_count; /* <arch>.expert_used_count; 0 when unknown */
};

/* Parse a /api/show answer (len bytes; anything: caps on every count and size, unknown values
 * ignored). QR_ERR_PARSE when it is not a JSON object, QR_ERR_TOO_LARGE above
 * QR_OLLAMA_SHOW_MAX_BODY; out is always fully written. */
enum qr_err qr_ollama_show_parse(const char *body, size_t len, struct qr_ollama_show *out,
                                 struct qr_diag *diag);

struct qr_ollama_shows;
struct qr_ollama_show_wait;

/* A waited-for description: err QR_OK with show (borrowed for the call), or why it failed
 * (QR_ERR_CANCELLED when the backend shuts down; show NULL). */
typedef void (*qr_ollama_show_fn)(void *arg, enum qr_err err, const struct qr_ollama_show *show,
                                  const struct qr_diag *why);

/* b borrowed for the cache's life (its fetches are cancelled before the cache is freed). */
struct qr_ollama_shows *qr_ollama_shows_new(struct qr_backend *b);
void qr_ollama_shows_free(struct qr_ollama_shows *c);

enum qr_ollama_show_state {
    QR_OLLAMA_SHOW_HIT = 0,     /* *out filled from a fresh entry */
    QR_OLLAMA_SHOW_FAILED = 1,  /* no description now; diag says why (a recent failure, or none
                                   could be asked for) */
    QR_OLLAMA_SHOW_PENDING = 2, /* asked (or already asking): cb runs once, later, from the event
                                   loop, unless qr_ollama_show_unwait(*out_wait) first */
};

/* Describe model (POST base_url/api/show). */
enum qr_ollama_show_state qr_ollama_show_get(struct qr_ollama_shows *c, struct qr_slice model,
                                             const char *base_url, qr_ollama_show_fn cb, void *arg,
                                             struct qr_ollama_show *out, struct qr_diag *diag,
                                             struct qr_ollama_show_wait **out_wait);
/* Call fn for every model described now (fresh, with its capabilities listed), newest first; the
 * show is borrowed for the call. Returns how many. */
size_t qr_ollama_shows_each(const struct qr_ollama_shows *c,
                            void (*fn)(void *arg, const char *model,
                                       const struct qr_ollama_show *show),
                            void *arg);

/* Stop waiting (frees w; cb is not called). */
void qr_ollama_show_unwait(struct qr_ollama_show_wait *w);
/* Drop model's entry (not one being fetched): its next request asks again. */
void qr_ollama_show_forget(struct qr_ollama_shows *c, struct qr_slice model);
/* The digest a model listing (/api/tags) gives for model: a described model whose digest changed
 * since the last listing (re-pulled, re-created) is dropped, so its next request asks again. */
void qr_ollama_show_note_digest(struct qr_ollama_shows *c, struct qr_slice model,
                                const char *digest);

/* The request's context_len (a client's num_ctx) as an admission limit against the model's
 * context length: 422 context_exceeded above it. With no length known (show NULL or without one;
 * why: the reason, may be NULL) a context that no policy forwards cannot be checked: 503 with the
 * reason -- it is never silently admitted, and never sent to Ollama (it would reload the model). */
enum qr_err qr_ollama_show_admit_context(const struct qr_request *req,
                                         const struct qr_ollama_show *show, const char *why,
                                         struct qr_api_error *err);

#endif
