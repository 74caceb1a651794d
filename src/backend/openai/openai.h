/* The OpenAI-compatible adapter's extras beyond the backend vtable. */
#ifndef QR_BACKEND_OPENAI_OPENAI_H
#define QR_BACKEND_OPENAI_OPENAI_H

#include <yyjson.h>

#include "backend/backend.h"

/* Add the live "dialect" object (setting, what was probed, what was chosen and why, the knobs in
 * use; docs/DIALECTS.md) to obj. b (borrowed) must be a qr_backend_openai instance; doc owns
 * what is added. */
void qr_openai_describe_dialect(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj);

/* The engine version the dialect probe read (vLLM's GET /version: "0.16.0"); "" while unknown
 * (not probed yet, a server without a version path, an answer without one). Borrowed from b,
 * valid until its next probe. b must be a qr_backend_openai instance. */
const char *qr_openai_engine_version(const struct qr_backend *b);

/* Bumped each time detection (openai_dialect auto) replaces the profile in use: what the
 * backend's descriptor says (describe) may have changed with it. 0 until then. */
unsigned qr_openai_dialect_serial(const struct qr_backend *b);

/* The engine project of the dialect in use as the upstream ledger spells it (the profile's
 * ledger_project: "vLLM", "MLX-LM"); NULL while the dialect is undecided or names none. Borrowed
 * from b. b must be a qr_backend_openai instance. */
const char *qr_openai_ledger_project(const struct qr_backend *b);

#endif
