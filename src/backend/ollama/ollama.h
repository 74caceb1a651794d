/* The Ollama adapter's accessors beyond the backend vtable (backend/backend.h). */
#ifndef QR_BACKEND_OLLAMA_OLLAMA_H
#define QR_BACKEND_OLLAMA_OLLAMA_H

struct qr_backend;

/* The Ollama daemon's version as its last readiness probe (GET /api/version) reported it, e.g.
 * "0.12.3"; "" when none was read yet or b is not the Ollama adapter. Borrowed from b: valid
 * until the next probe or until b is freed (copy it to keep it). */
const char *qr_ollama_engine_version(const struct qr_backend *b);

struct qr_ollama_show;

/* Every model the adapter has a fresh /api/show description of (backend/ollama/show.h), for the
 * router: what Ollama itself says a model cannot do. Returns how many; 0 when b is not the Ollama
 * adapter. */
size_t qr_ollama_described_each(struct qr_backend *b,
                                void (*fn)(void *arg, const char *model,
                                           const struct qr_ollama_show *show),
                                void *arg);

#endif
