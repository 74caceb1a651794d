/* Client codecs: decode a client protocol's request body into the canonical request, and encode
 * the canonical event stream (or its aggregate) in that protocol's shapes. One pair of files per
 * protocol (ollama_codec.c, openai_codec.c); this header holds what they share.
 *
 * Determinism: everything time- or randomness-dependent in an answer (created timestamps, response
 * ids) comes from struct qr_enc_env, so the data-driven tests can fix them. */
#ifndef QR_API_CODEC_H
#define QR_API_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/event.h"
#include "contract/request.h"
#include "core/arena.h"
#include "core/buf.h"

/* An error to answer in the client protocol's own shape. */
struct qr_api_error {
    int status;     /* HTTP status: 400, 404, 422, 502, 504, ... */
    char code[64];  /* machine-readable: "invalid_request", "capability_unsupported", ... */
    char param[64]; /* OpenAI "param": the offending field, "" for null */
    char message[512];
};

/* Fill e and return QR_ERR_INVALID (or the given err), for decoders' early returns. */
enum qr_err qr_api_error_set(struct qr_api_error *e, enum qr_err err, int status, const char *code,
                             const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

struct qr_enc_env {
    int64_t now_ns;      /* wall clock for created / created_at, Unix epoch ns */
    const char *resp_id; /* response id (OpenAI "chatcmpl-..."), borrowed; NULL = generate */
};

/* Decoding limits (from the configuration). */
struct qr_decode_limits {
    size_t max_messages; /* default 100000 */
    size_t max_tools;    /* default 1024 */
    size_t max_stop;     /* default 16 */
    size_t max_inputs;   /* embeddings, default 100000 */
};

void qr_decode_limits_default(struct qr_decode_limits *l);

/* RFC 3339 UTC with nanoseconds, as Ollama writes created_at: "2026-12-02T09:51:05.123456789Z".
 * out >= 40 bytes. */
void qr_format_rfc3339_ns(int64_t unix_ns, char *out, size_t cap);

#endif
