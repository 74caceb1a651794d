/* backend=llama.cpp in the daemon (llamacpp_glue.c): the adapter configured from the
 * configuration table with a resolver over the catalog's registry, engine crashes recorded in the
 * evidence store, and the Ollama routes that answer from the adapter's loaded models. */
#ifndef QR_API_LLAMACPP_GLUE_H
#define QR_API_LLAMACPP_GLUE_H

#include <stdbool.h>

#include "contract/request.h"
#include "core/config.h"
#include "core/err.h"

struct qr_app;
struct qr_http_req;

/* Is backend=llama.cpp configured? */
bool qr_api_llamacpp_selected(const struct qr_config *cfg);

/* After qr_backend_new(&qr_backend_llamacpp): open <state_dir>/evidence.db (created with
 * state_dir when missing; without it crashes are logged only), find and probe the engine
 * (llama_server, else PATH, else .deps/llama/bin of the repository above the running binary) and
 * configure the adapter. An engine that cannot be found or probed is not fatal: the backend stays
 * unavailable with the reason (/readyz, /v1/backends). app->llama is owned by app afterwards.
 * QR_ERR_NOMEM only. */
enum qr_err qr_api_llamacpp_init(struct qr_app *app, struct qr_diag *diag);

/* Close the evidence store and free app->llama (after the backend was freed). NULL-safe. */
void qr_api_llamacpp_cleanup(struct qr_app *app);

/* GET /api/ps from the adapter's loaded models, in Ollama's shape. */
void qr_api_llamacpp_ps(struct qr_app *app, struct qr_http_req *req);

/* /api/chat (op CHAT) and /api/generate (op COMPLETION): keep_alive 0 with no messages (chat) or
 * an empty prompt (generate) unloads the model now (or once idle) and answers Ollama's
 * done_reason "unload" line (404 for a model the registry cannot serve); everything else goes to
 * qr_api_infer. */
void qr_api_llamacpp_ollama_infer(struct qr_app *app, struct qr_http_req *req, enum qr_op op);

struct yyjson_mut_doc;
struct yyjson_mut_val;
struct qr_store;
struct qr_reg_model;
struct qr_route_refuted;

/* The evidence store backend=llama.cpp records crashes and /props evidence in (borrowed); NULL
 * when it could not be opened or llama.cpp is not the backend. */
struct qr_store *qr_api_llamacpp_store(struct qr_app *app);

/* What the engine evidence of the registry model named model is keyed by (the main GGUF
 * artifact's discovered "sha256:<hex>", else its resolved path) into out (cap bytes). false when
 * the model does not resolve to a file on disk. */
bool qr_api_llamacpp_artifact_key(struct qr_app *app, const char *model, char *out, size_t cap);

/* The engine evidence against capabilities the router weighs (struct qr_route_refuted): the
 * newest /props observation per model and engine version that refutes keys (no tool syntax, no
 * vision or audio modality), only where it was observed on the artifact registered now. Kept in
 * memory, updated on every observation, loaded from the store at start. Valid until the next
 * call; NULL with *n 0 when none. */
const struct qr_route_refuted *qr_api_llamacpp_refuted(struct qr_app *app, size_t *n);

/* /v1/backends for backend=llama.cpp (llamacpp_native.c): add "engine" {path, source, version,
 * build, commit, names} (null when none was found) and "ledger" {entry_id, status, [reason],
 * unverified, broken} to the backend object obj: the probed build's names matched against the
 * ledger's entries of the descriptor's kind; no match is observed-unpinned with every claimed
 * (supported/conditional) capability unverified. Also "crashes" {total, recent[<= 10, newest
 * first]} from the evidence store, "failed_models" (processes whose restarts gave up, with the
 * reason) and "models" (the newest /props evidence per model, artifact and engine version).
 * QR_ERR_NOMEM only. */
enum qr_err qr_api_llamacpp_backend_extra(struct qr_app *app, struct yyjson_mut_doc *doc,
                                          struct yyjson_mut_val *obj);

/* POST /api/show for backend=llama.cpp (llamacpp_native.c): replace the "capabilities" array of
 * the answer root obj (built from m's manifest) by the manifest's capabilities minus those the
 * adapter's descriptor marks unsupported, the matched ledger entry lists as broken, or the newest
 * engine evidence for this model, artifact and engine version refutes (supports_tools false drops
 * "tools", no vision modality drops "vision"), and add "quantum_runtime" {backend,
 * engine_version, observed, evidence{<capability>: {listed, source[, reason]}}, note} saying
 * why. QR_ERR_NOMEM only. */
enum qr_err qr_api_llamacpp_show(struct qr_app *app, const struct qr_reg_model *m,
                                 struct yyjson_mut_doc *doc, struct yyjson_mut_val *obj);

#endif
