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

/* End every exchange the passthrough is still proxying (the shutdown bound passed): the
 * upstream call is cancelled; a client whose answer started gets Ollama's in-band
 * {"error":why} line on a line of its own before the cut, one whose answer has not started a
 * 503 `shutting_down`. Returns how many clients were answered; 0 when b is not the Ollama
 * adapter. */
unsigned qr_ollama_end_all(struct qr_backend *b, const char *why);

#endif
