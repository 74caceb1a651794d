/* The rerank client protocol (POST /v1/rerank and /rerank), in the shape llama-server, Jina and
 * Cohere share: a request {"model","query","documents":[strings],"top_n"?,"return_documents"?}
 * decodes into the canonical request (op QR_OP_RERANK, the documents in inputs/n_inputs), and the
 * aggregate of the RERANK events encodes into {"object":"list","model","results","usage"}.
 * Rerank answers are never streamed.
 *
 * Decisions a caller can see (details in rerank_codec.c):
 * - model, query and documents are required; query must be a non-empty string, documents a
 *   non-empty array of strings (an empty string is a document too), at most
 *   QR_RERANK_MAX_DOCUMENTS of them (and at most the decode limit's max_inputs).
 * - top_n: an integer >= 1 (100.0 counts as an integer); larger than the number of documents
 *   means all of them. return_documents: a boolean. JSON null for either means "not sent".
 * - stream: false or null is accepted, true is refused (400: rerank answers are not streamed).
 * - Every other top-level key becomes a qr_extra (JSON text, body order), as the OpenAI codec
 *   does, for the backend encoder to pass on or refuse.
 * - The answer's results are sorted by relevance_score descending (ties: lower index first),
 *   cut to top_n; "document":{"text"} is added when return_documents is true. model is the name
 *   the client sent. usage carries prompt_tokens = total_tokens (0 when not reported). */
#ifndef QR_API_RERANK_CODEC_H
#define QR_API_RERANK_CODEC_H

#include <stddef.h>

#include "api/codec.h"
#include "contract/event.h"
#include "contract/request.h"
#include "core/arena.h"
#include "core/buf.h"

/* The most documents one rerank request may carry. */
#define QR_RERANK_MAX_DOCUMENTS 1024

/* Decode a rerank request body into out (op QR_OP_RERANK, protocol QR_PROTO_OPENAI). Everything
 * out points to lives in a (NUL-terminated copies; body is borrowed only during the call). lim
 * may be NULL (defaults). On failure returns non-QR_OK with err filled in the OpenAI error shape:
 *   400 "invalid_json"      body is not JSON
 *   400 "invalid_request"   missing/ill-typed field or bad value; param names the field, e.g.
 *                           "documents[3]"
 *   413 "request_too_large" the arena cap was reached */
enum qr_err qr_rerank_decode(struct qr_slice body, const struct qr_decode_limits *lim,
                             struct qr_arena *a, struct qr_request *out, struct qr_api_error *err);

/* Append the answer body + "\n" for a finished, non-failed answer. model is the client's name
 * for the model; req (borrowed) gives the documents, top_n and return_documents; a (borrowed)
 * holds the scores. A score for an index outside req's documents is QR_ERR_INVALID (nothing
 * useful can be said about it). On failure out has been cleaned up (qr_buf contract). */
enum qr_err qr_rerank_enc_answer(struct qr_slice model, const struct qr_request *req,
                                 const struct qr_answer *a, struct qr_buf *out);

#endif
