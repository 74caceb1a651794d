/* The OpenAI-compatible adapter's extras beyond the backend vtable. */
#ifndef QR_BACKEND_OPENAI_OPENAI_H
#define QR_BACKEND_OPENAI_OPENAI_H

#include <yyjson.h>

#include "backend/backend.h"

/* Add the live "dialect" object (setting, what was probed, what was chosen and why, the knobs in
 * use; docs/DIALECTS.md) to obj. b (borrowed) must be a qr_backend_openai instance; doc owns
 * what is added. */
void qr_openai_describe_dialect(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj);

#endif
