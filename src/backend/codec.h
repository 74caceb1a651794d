/* Backend codecs: encode the canonical request as an upstream protocol's request, and decode
 * the upstream's answer (streamed or whole, success or error) into canonical events.
 *
 * Two upstream protocols, each with dialect switches instead of per-engine special cases:
 *   QR_UP_OPENAI  OpenAI-compatible servers (llama-server, vLLM, MLX-LM, ...): SSE or JSON.
 *   QR_UP_OLLAMA  Ollama's native API: NDJSON or JSON.
 * The decoder guarantees the event order of contract/event.h whatever the upstream does: indices
 * by first appearance, ids kept or synthesized once, DONE only after a real finish, ERROR (never a
 * clean DONE) when the upstream fails, stalls out or ends early. */
#ifndef QR_BACKEND_CODEC_H
#define QR_BACKEND_CODEC_H

#include <stdbool.h>
#include <stddef.h>

#include "api/codec.h"
#include "contract/event.h"
#include "contract/request.h"
#include "core/buf.h"

enum qr_upstream_proto {
    QR_UP_OPENAI = 0,
    QR_UP_OLLAMA = 1,
};

struct qr_dialect {
    enum qr_upstream_proto proto;
    /* OpenAI: field used for assistant reasoning in history sent upstream: "reasoning_content"
     * (llama-server, vLLM <= 0.15) or "reasoning" (vLLM >= 0.16, MLX). Both are read on output. */
    const char *reasoning_field;
    /* OpenAI: ask for usage in streams (stream_options.include_usage = true). */
    bool stream_usage;
    /* Inline reasoning tags to split out of content (NULL: the upstream separates reasoning). */
    const char *think_open;
    const char *think_close;
    bool think_start_inside;
    /* Model name to send upstream; NULL = the client's name unchanged. */
    const char *upstream_model;
    /* OpenAI: the dialect profile (backend/openai/profile.h) these switches came from, for
     * messages; NULL = none. */
    const char *dialect_name;
    /* OpenAI: sent when the client gave none (mlx_lm.server decodes greedily and stops at 512
     * tokens otherwise, quirk 36); false / 0 = nothing added. */
    bool default_temperature_set;
    double default_temperature;
    int64_t default_max_tokens;
    /* OpenAI: operations the server does not offer, bits (1u << enum qr_op): refused with 422
     * capability_unsupported before anything is sent. */
    unsigned ops_unsupported;
    /* Caps: one SSE event / NDJSON line, and a whole non-streamed body. */
    size_t max_event_bytes; /* default 16 MiB */
    size_t max_body_bytes;  /* default 64 MiB */
    /* Ollama: what the model's /api/show said about thinking, filled by the adapter (the codec
     * does no I/O). think_known false: nothing known, the client's think goes as sent (Ollama
     * validates it) and an unset one stays unset. Known: think is always sent -- unset means true
     * on a thinking model and false otherwise, thinking asked of a model without the capability is
     * refused (422), a level goes only when think_levels lists it (else true). */
    bool think_known;
    bool think_capable;    /* capabilities[] lists "thinking" */
    unsigned think_levels; /* QR_THINK_LEVEL_* bits: thinking.values of /api/show */
    /* Ollama: capabilities[] lists "tools" / "vision" (meaningful when think_known: the model's
     * capabilities are known). Known and missing: tools offered, or an image sent, are refused
     * (422) before anything reaches Ollama, which would answer "does not support tools". */
    bool tools_capable;
    bool vision_capable;
    /* Ollama: send the request's context_len as options.num_ctx (a model policy forwards it);
     * otherwise it is an admission limit only and never reaches the engine (quirk 13). */
    bool send_num_ctx;
};

#define QR_THINK_LEVEL_LOW    1u
#define QR_THINK_LEVEL_MEDIUM 2u
#define QR_THINK_LEVEL_HIGH   4u

void qr_dialect_default(struct qr_dialect *d, enum qr_upstream_proto proto);

/* Encode req for the upstream: method POST, *out_path e.g. "/v1/chat/completions" or
 * "/api/chat" (static string), body JSON into out. A request the upstream protocol cannot express
 * gets a 400/422 qr_api_error with code "capability_unsupported" naming the field -- never
 * silently dropped. */
enum qr_err qr_upstream_encode(const struct qr_dialect *d, const struct qr_request *req,
                               struct qr_buf *out, const char **out_path, struct qr_api_error *err);

struct qr_upstream_dec;

/* Start decoding an upstream answer with this HTTP status and Content-Type (decides SSE/NDJSON
 * vs whole JSON vs error body). req and d are borrowed for the decoder's life. */
enum qr_err qr_upstream_dec_new(const struct qr_dialect *d, const struct qr_request *req,
                                int status, struct qr_slice content_type,
                                struct qr_upstream_dec **out);
/* Feed body bytes as they arrive; events go to fn. */
enum qr_err qr_upstream_dec_feed(struct qr_upstream_dec *dec, const char *p, size_t n,
                                 qr_event_fn fn, void *arg);
/* End of body. transport: QR_OK for a clean end, else the transfer's error (cut, timeout):
 * emits the final events (DONE after a real finish, otherwise exactly one ERROR). */
enum qr_err qr_upstream_dec_finish(struct qr_upstream_dec *dec, enum qr_err transport,
                                   qr_event_fn fn, void *arg);
void qr_upstream_dec_free(struct qr_upstream_dec *dec);

#endif
