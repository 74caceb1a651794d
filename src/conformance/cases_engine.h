/* The conformance cases that reach past chat completions (cases_engine.c): the model's tokenizer
 * through the daemon's POST /v1/tokenize and /v1/detokenize (round trip, BOS and system role),
 * cancellation during prefill and decode (the slot freed, seen in GET /v1/loaded and by the next
 * request) and, only when the suite may be destructive, an engine crash and its restart. Rows in
 * the case table (cases.c); every case function follows qr_conf_case_fn. Also the request helpers
 * the case files share (defined in cases.c and cases_engine.c). */
#ifndef QR_CONFORMANCE_CASES_ENGINE_H
#define QR_CONFORMANCE_CASES_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include <yyjson.h>

#include "conformance/suite.h"

enum qr_conf_status qr_conf_case_tok_roundtrip(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_tok_bos(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_context_at_limit(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_cancel_decode(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_cancel_prefill(struct qr_conf_ctx *c, char *reason, size_t cap);
enum qr_conf_status qr_conf_case_crash_restart(struct qr_conf_ctx *c, char *reason, size_t cap);

/* ---- shared helpers (cases.c) ---- */

/* The model name as a JSON string literal (malloc'd, owned by the caller). */
char *qr_conf_model_json(const struct qr_conf_ctx *c);
/* n copies of "word " (malloc'd, owned by the caller): a prompt of about n tokens. */
char *qr_conf_words(size_t n);
/* The reasoning switch members ("reasoning_effort":"none"|"medium",) or "" when the model does
 * not claim reasoning.control. Static. */
const char *qr_conf_think(const struct qr_conf_ctx *c, bool on);
/* POST path with {"model":M, <rest>}: fmt makes the members after model. */
void qr_conf_post(const struct qr_conf_ctx *c, struct qr_conf_resp *r, const char *path,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* POST /v1/chat/completions with {"model":M, <rest>}: fmt makes the members after model. */
void qr_conf_chat(const struct qr_conf_ctx *c, struct qr_conf_resp *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error body in OpenAI's (or the native) shape with a non-empty error.message: true, the
 * message copied into msg. */
bool qr_conf_openai_error(const struct qr_conf_resp *r, char *msg, size_t cap);

/* ---- shared helpers (cases_engine.c) ---- */

/* The model's row of GET /v1/loaded, or NULL: matched by the name asked for, the X-Quantum-Model
 * seen, or the only row. *out is the parsed answer (owned by the caller; free it, also when NULL
 * is returned); the row points into it. */
yyjson_val *qr_conf_loaded_row(const struct qr_conf_ctx *c, yyjson_doc **out);
/* A chat_template_caps flag of the engine evidence in that row: 1 true, 0 false, -1 not
 * reported. */
int qr_conf_engine_cap(const struct qr_conf_ctx *c, const char *flag);

#endif
