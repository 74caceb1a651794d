/* The Ollama adapter's accessors beyond the backend vtable (backend/backend.h). */
#ifndef QR_BACKEND_OLLAMA_OLLAMA_H
#define QR_BACKEND_OLLAMA_OLLAMA_H

struct qr_backend;

/* The Ollama daemon's version as its last readiness probe (GET /api/version) reported it, e.g.
 * "0.12.3"; "" when none was read yet or b is not the Ollama adapter. Borrowed from b: valid
 * until the next probe or until b is freed (copy it to keep it). */
const char *qr_ollama_engine_version(const struct qr_backend *b);

#endif
