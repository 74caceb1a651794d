/* Ollama native API codec: /api/chat, /api/generate, /api/embed and /api/embeddings request
 * bodies into the canonical request, and the canonical event stream (or its aggregate) into
 * Ollama's NDJSON lines / whole JSON bodies. Follows docs/reference wire-protocols.md section A.
 *
 * Decisions that are not plain Ollama (rationale in the .c file's comments):
 *  - errors before any byte was sent use the Runtime's shape {"error":{"code","message",
 *    "request_id"}} (qr_ollama_error_body); mid-stream failures use Ollama's {"error":"..."} line;
 *  - a DONE with finish CANCELLED or ERROR is written as an {"error":...} line (no done:true),
 *    because ollama-js treats any done:true line as success;
 *  - finish TOOL_CALLS is reported as done_reason "stop" (Ollama has no "tool_calls" reason). */
#ifndef QR_API_OLLAMA_CODEC_H
#define QR_API_OLLAMA_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/codec.h"
#include "contract/event.h"
#include "contract/request.h"
#include "core/arena.h"
#include "core/buf.h"

#define QR_OLLAMA_CT_STREAM "application/x-ndjson"
#define QR_OLLAMA_CT_JSON   "application/json; charset=utf-8"

/* Cap on the tool-call argument bytes the encoder holds until each call is complete. */
#define QR_OLLAMA_MAX_TOOL_BYTES ((size_t) 16 << 20)
/* Highest tool-call index the encoder accepts (indices are dense from 0 by contract). */
#define QR_OLLAMA_MAX_TOOL_CALLS 4096

/* Decode an Ollama request body for op (CHAT = /api/chat, COMPLETION = /api/generate,
 * EMBED = /api/embed, or /api/embeddings when legacy_embeddings). Everything out points to is
 * allocated in a (owned by the caller); body is only borrowed during the call. lim may be NULL
 * (defaults). Returns QR_OK, QR_ERR_INVALID (err: 400 "invalid_request", param = the field) or
 * QR_ERR_TOO_LARGE (err: 413 "request_too_large": more messages/tools/tool calls/inputs than lim
 * allows, or the arena cap reached); more stop sequences than lim->max_stop is a 400. On failure
 * out is partially filled and must not be used.
 * Null counts as not sent, as in Ollama's Go types: absent "stream" gives stream = true with
 * stream_set = false; absent/null "think" stays QR_THINK_UNSET; message content may be absent.
 * Top-level fields without a canonical slot (truncate, shift, logprobs, top_logprobs,
 * _debug_render_only, unknown keys; on embeddings also stream) go to out->extras and unslotted
 * options to out->extra_options, as exact JSON, in the client's order. */
enum qr_err qr_ollama_decode(enum qr_op op, bool legacy_embeddings, struct qr_slice body,
                             const struct qr_decode_limits *lim, struct qr_arena *a,
                             struct qr_request *out, struct qr_api_error *err);

/* One tool call held by the streaming encoder until its TOOL_END. */
struct qr_ollama_call {
    struct qr_buf id;
    struct qr_buf name;
    struct qr_buf args;
    bool begun;
    bool emitted;
};

/* Encoder state for one answer. Caller storage; init, then events or one answer, then cleanup.
 * req is borrowed for the encoder's life; env is copied at init (its resp_id is not used). Every
 * line is stamped with e->env.now_ns; a caller may advance it between events. The held tool calls
 * are released when the done/error line is written and by cleanup (always safe to call). */
struct qr_ollama_enc {
    const struct qr_request *req;
    struct qr_enc_env env;
    bool legacy_embeddings; /* set after init for /api/embeddings answers */
    struct qr_usage usage;  /* from USAGE, for the done line */
    bool has_usage;
    struct qr_ollama_call *calls; /* owned, by runtime index */
    size_t n_calls;
    size_t held;      /* tool argument bytes held, all calls */
    bool finished;    /* a done or error line was written: nothing follows */
    char carry[2][4]; /* content / reasoning: incomplete UTF-8 tail held to the next event */
    unsigned char n_carry[2];
};

void qr_ollama_enc_init(struct qr_ollama_enc *e, const struct qr_request *req,
                        const struct qr_enc_env *env);
void qr_ollama_enc_cleanup(struct qr_ollama_enc *e);

/* Append the NDJSON lines (each "{...}\n") for one event of a streamed chat/generate answer to
 * out (Content-Type QR_OLLAMA_CT_STREAM). START, META, USAGE and EMBEDDING write nothing; tool
 * calls are written whole at TOOL_END. Errors: QR_ERR_PARSE when a tool call's assembled
 * arguments are not a JSON object, QR_ERR_TOO_LARGE past QR_OLLAMA_MAX_TOOL_BYTES,
 * QR_ERR_INTERNAL on an event-order violation, or out's own append failure (out is then freed).
 * After an error the caller ends the stream with an {"error"} line of its own. */
enum qr_err qr_ollama_enc_event(struct qr_ollama_enc *e, const struct qr_event *ev,
                                struct qr_buf *out);

/* Append the whole (non-streamed) body for the aggregate a, with a trailing "\n" (Content-Type
 * QR_OLLAMA_CT_JSON). Chat, generate, /api/embed or /api/embeddings by the request. When a failed
 * (ERROR) or finished CANCELLED/ERROR, nothing is written and QR_ERR_UPSTREAM / QR_ERR_CANCELLED
 * is returned: the caller answers with qr_ollama_error_body. QR_ERR_PARSE as for events;
 * QR_ERR_UPSTREAM for a non-finite embedding value. */
enum qr_err qr_ollama_enc_answer(struct qr_ollama_enc *e, const struct qr_answer *a,
                                 struct qr_buf *out);

/* The immediate reply to a load request (chat with no messages, generate with an empty prompt)
 * or, with unload, to one with keep_alive 0: done_reason "load" / "unload". Always whole JSON. */
enum qr_err qr_ollama_enc_load(struct qr_ollama_enc *e, bool unload, struct qr_buf *out);

/* The Runtime's error body for an error before any byte was sent:
 * {"error":{"code":"..","message":"..","request_id":".."}}\n (request_id omitted when NULL or
 * empty). Append failures leave out freed (nothing else to do for the caller). */
void qr_ollama_error_body(const struct qr_api_error *err, const char *request_id,
                          struct qr_buf *out);

/* The mid-stream error line {"error":"<message>"}\n, for callers ending a stream themselves. */
enum qr_err qr_ollama_error_line(const char *message, struct qr_buf *out);

#endif
