/* The OpenAI client protocol (/v1/chat/completions, /v1/completions, /v1/embeddings) as
 * openai-node 7.59 sends and reads it (wire-protocols.md B): request bodies decode into the
 * canonical struct qr_request; the canonical event stream encodes into SSE chunks, and its
 * aggregate (struct qr_answer) into the non-streamed body. Both encodings come from the same
 * events, so the non-streamed message is what a client accumulating the streamed deltas gets.
 *
 * Decisions a caller can see (details in openai_codec.c):
 * - JSON null for an optional field means "not sent".
 * - Every top-level key without a canonical slot (user, metadata, store, service_tier, logit_bias,
 *   unknown vendor keys, ...) becomes a qr_extra with its JSON text, in body order. Numbers are
 *   kept as the client wrote them; other values are re-serialized minified by yyjson.
 * - reasoning_effort "none" is QR_THINK_OFF; every other accepted value (minimal, low, medium,
 *   high, xhigh, max) is QR_THINK_LEVEL with the string as sent.
 * - finish reasons: stop, length, tool_calls, content_filter as OpenAI; a cancelled generation
 *   says "cancelled" (not an OpenAI value, but clients accept any string and "stop" would hide
 *   the truncation); "stop" after tool calls is reported as "tool_calls".
 * - Reasoning is streamed as delta.reasoning_content and answered as message.reasoning_content
 *   (openai-node's stream helper keeps only the last fragment of unknown delta keys; raw
 *   iteration and the non-streamed body carry all of it).
 * - Tool events on a completions request are not encoded (that request cannot carry tools). */
#ifndef QR_API_OPENAI_CODEC_H
#define QR_API_OPENAI_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/codec.h"
#include "contract/event.h"
#include "contract/request.h"
#include "core/arena.h"
#include "core/buf.h"

/* Decode an OpenAI request body for op into out. Everything out points to lives in a (arena
 * strings are NUL-terminated copies; body is borrowed only during the call). lim may be NULL
 * (defaults). On failure returns non-QR_OK with err filled:
 *   400 "invalid_json"           body is not JSON (message has yyjson's text and byte offset)
 *   400 "invalid_request"        missing/ill-typed field, bad value, cap passed; param = JSON path
 *                                such as "messages[2].content"
 *   422 "capability_unsupported" valid OpenAI the Runtime does not serve (n > 1, custom tools,
 *                                allowed_tools, token-array prompts, ...)
 *   413 "request_too_large"      the arena cap was reached */
enum qr_err qr_openai_decode(enum qr_op op, struct qr_slice body,
                             const struct qr_decode_limits *lim, struct qr_arena *a,
                             struct qr_request *out, struct qr_api_error *err);

/* Bitmap size for the tool-call indices the stream encoder tracks (openai-node allows < 128). */
#define QR_OPENAI_MAX_TRACKED_CALLS 128

/* Per-request encoder state, caller storage, no cleanup needed. */
struct qr_openai_enc {
    enum qr_op op;
    bool include_usage;
    bool embed_base64;     /* embeddings as base64 little-endian float32 */
    struct qr_slice model; /* borrowed from the request: it must outlive the encoder */
    char id[72];           /* "chatcmpl-..." / "cmpl-..." */
    int64_t created;       /* Unix seconds */
    bool started;          /* the role chunk was sent */
    bool finished;         /* DONE or ERROR was encoded; later events produce nothing */
    bool saw_tool_call;
    struct qr_usage usage;
    bool has_usage;
    uint64_t begun[QR_OPENAI_MAX_TRACKED_CALLS / 64];    /* TOOL_BEGIN seen, by index */
    uint64_t has_args[QR_OPENAI_MAX_TRACKED_CALLS / 64]; /* non-empty TOOL_ARGS seen */
    /* RERANK: the request (documents, top_n, return_documents), borrowed like model: it must
     * outlive the encoder; NULL for other ops */
    const struct qr_request *rerank;
};

/* req and env are borrowed for the call; req->model (and for a rerank request req itself) must
 * stay valid while e is used.
 * id: env->resp_id when set, else "chatcmpl-"/"cmpl-" + 24 random hex; created: env->now_ns
 * in seconds (the wall clock when env is NULL). */
void qr_openai_enc_init(struct qr_openai_enc *e, const struct qr_request *req,
                        const struct qr_enc_env *env);

/* Append the SSE bytes for ev to out (possibly none). Every event is "data: <json>\n\n"; DONE and
 * ERROR end with "data: [DONE]\n\n". On failure out has been cleaned up (qr_buf contract). */
enum qr_err qr_openai_enc_event(struct qr_openai_enc *e, const struct qr_event *ev,
                                struct qr_buf *out);

/* Append the non-streamed JSON body + "\n" for a finished, non-failed answer (chat.completion,
 * text_completion, the embeddings list or the rerank list, by the request's op; embeddings as
 * float arrays printed "%.9g", or as base64 of little-endian float32 when the request asked for
 * base64; rerank as qr_rerank_enc_answer in rerank_codec.h). Usage is always present; counts not
 * reported are 0. a is borrowed. */
enum qr_err qr_openai_enc_answer(struct qr_openai_enc *e, const struct qr_answer *a,
                                 struct qr_buf *out);

/* Append {"error":{"message","type","param","code"}} + "\n". type: "authentication_error" (401),
 * "permission_error" (403), "invalid_request_error" (other 4xx, 404 included as OpenAI does),
 * "server_error" (5xx and anything else). Empty param/code are null. */
void qr_openai_error_body(const struct qr_api_error *err, struct qr_buf *out);

/* "text/event-stream" for streamed answers, "application/json" for everything else. */
const char *qr_openai_stream_content_type(void);
const char *qr_openai_json_content_type(void);

#endif
