/* Backend descriptor codec, contract quantum.runtime/backend/v1alpha1: parse and validate a
 * descriptor (JSON from a file, a remote Runtime's /v1/backends, the ledger) into a plain struct,
 * and format a struct back into the same JSON. Every input is hostile: sizes are capped, unknown
 * and duplicate members are rejected, every rule below is enforced, and nothing is defaulted that
 * the contract requires.
 *
 * JSON shape (the Go predecessor's field names, reference §3.1):
 *   {"contract_version": "quantum.runtime/backend/v1alpha1",
 *    "id": "[a-z0-9][a-z0-9._-]*" (<= 128 bytes),
 *    "kind": "ollama-adapter" | "llama.cpp" | "mlx" | "vllm" | "external" | "openai-compatible",
 *    "adapter_version": non-empty (<= 128 printable ASCII bytes),
 *    "execution_mode": "external" | "process" | "library",
 *    "state": "ready" | "unknown" | "unavailable" | "disabled",
 *    "endpoint": optional URL string (<= 512 printable ASCII bytes),
 *    "capabilities": {
 *      "<field>": "<state>"      for each of the 23 flat legacy fields, all required
 *                                ("text", "architecture.dense", ..., "reasoning_control", ...),
 *      "moe.total_experts" | "moe.active_experts" | "moe.shared_experts": "<state>", optional
 *                                (keys of DESIGN.md the predecessor lacked; absent = unknown),
 *      "quantization_formats": ["gguf", ...] optional, non-empty, no duplicates,
 *                                <= 16 names of 1..32 bytes [A-Za-z0-9._-],
 *      "context": {"backend_managed": bool, "override_supported": "<state>",
 *                  "override_verified": bool, "native_max": integer >= 0 (optional)}}}
 *
 * Extensions over the predecessor, each because this Runtime's own adapters emit it: kind
 * "openai-compatible" and the optional "endpoint" member. The three moe.* expert-count keys are
 * accepted by their canonical names.
 *
 * Rules beyond the shape: override_verified=true requires override_supported="supported";
 * quantization.formats carries no state member of its own: it is "conditional" when the list is
 * non-empty (the artifact's format must be one of them: the router states that on the model
 * side, see qr_cap_descriptor_has_format) and "unknown" otherwise.
 *
 * Formatting writes every legacy field, the moe.* extension keys only when not unknown,
 * quantization_formats only when non-empty and native_max only when > 0 (the predecessor's
 * omitempty), in a fixed order, so parse(format(d)) == d and format(parse(format(d))) is
 * byte-identical. */
#ifndef QR_CAPABILITY_DESCRIPTOR_H
#define QR_CAPABILITY_DESCRIPTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capability/capability.h"
#include "core/err.h"

struct yyjson_mut_doc;
struct yyjson_mut_val;

#define QR_CAP_CONTRACT          "quantum.runtime/backend/v1alpha1"
#define QR_CAP_DESC_MAX_BYTES    (64 * 1024) /* a descriptor document */
#define QR_CAP_DESC_ID_MAX       128
#define QR_CAP_DESC_VERSION_MAX  128
#define QR_CAP_DESC_ENDPOINT_MAX 512
#define QR_CAP_DESC_FORMATS_MAX  16
#define QR_CAP_DESC_FORMAT_MAX   32

enum qr_cap_backend_kind {
    QR_CAP_KIND_OLLAMA = 0, /* "ollama-adapter" */
    QR_CAP_KIND_LLAMACPP,   /* "llama.cpp" */
    QR_CAP_KIND_MLX,        /* "mlx" */
    QR_CAP_KIND_VLLM,       /* "vllm" */
    QR_CAP_KIND_EXTERNAL,   /* "external" */
    QR_CAP_KIND_OPENAI,     /* "openai-compatible" (extension) */
    QR_CAP_KIND__COUNT
};

enum qr_cap_exec_mode {
    QR_CAP_EXEC_EXTERNAL = 0, /* "external" */
    QR_CAP_EXEC_PROCESS,      /* "process" */
    QR_CAP_EXEC_LIBRARY,      /* "library" */
    QR_CAP_EXEC__COUNT
};

enum qr_cap_backend_state {
    QR_CAP_BACKEND_UNKNOWN = 0, /* "unknown" */
    QR_CAP_BACKEND_READY,       /* "ready" */
    QR_CAP_BACKEND_UNAVAILABLE, /* "unavailable" */
    QR_CAP_BACKEND_DISABLED,    /* "disabled" */
    QR_CAP_BACKEND__COUNT
};

/* A descriptor, self-contained (no pointers): copy it freely. */
struct qr_cap_descriptor {
    char id[QR_CAP_DESC_ID_MAX + 1];
    enum qr_cap_backend_kind kind;
    char adapter_version[QR_CAP_DESC_VERSION_MAX + 1];
    enum qr_cap_exec_mode execution_mode;
    enum qr_cap_backend_state state;
    char endpoint[QR_CAP_DESC_ENDPOINT_MAX + 1]; /* "" when absent */
    /* per key; context.override = context.override_supported; quantization.formats derived */
    enum qr_cap_state caps[QR_CAP__COUNT];
    char formats[QR_CAP_DESC_FORMATS_MAX][QR_CAP_DESC_FORMAT_MAX + 1];
    size_t n_formats;
    bool backend_managed;
    bool override_verified;
    int64_t native_max; /* 0 = not stated */
};

/* Static strings of the enums; "unknown"/"" style fallbacks never needed by valid values. */
const char *qr_cap_backend_kind_str(enum qr_cap_backend_kind k);
const char *qr_cap_exec_mode_str(enum qr_cap_exec_mode m);
const char *qr_cap_backend_state_str(enum qr_cap_backend_state s);

/* Parse and validate len bytes of JSON (not necessarily NUL-terminated; borrowed) into *out.
 * QR_ERR_TOO_LARGE past QR_CAP_DESC_MAX_BYTES, QR_ERR_PARSE for malformed JSON, QR_ERR_INVALID
 * for a rule; diag says which member, e.g. "invalid backend descriptor: 'kind': unknown value
 * 'foo'". *out is fully written on success and unspecified on failure. */
enum qr_err qr_cap_descriptor_parse(const char *json, size_t len, struct qr_diag *diag,
                                    struct qr_cap_descriptor *out);

/* Check a struct against the same rules (ids, enums, strings, formats, the context rule), e.g.
 * one an adapter filled in code. */
enum qr_err qr_cap_descriptor_validate(const struct qr_cap_descriptor *d, struct qr_diag *diag);

/* Add the descriptor's members to obj (a yyjson object in doc), in the fixed order. d must be
 * valid. Strings are copied. QR_ERR_NOMEM when doc runs out of memory. */
enum qr_err qr_cap_descriptor_add(const struct qr_cap_descriptor *d, struct yyjson_mut_doc *doc,
                                  struct yyjson_mut_val *obj);

/* Validate and format d as compact JSON text; *out (NUL-terminated, owned by the caller: free())
 * and *out_len on success. */
enum qr_err qr_cap_descriptor_format(const struct qr_cap_descriptor *d, struct qr_diag *diag,
                                     char **out, size_t *out_len);

/* Fill ev's backend claims from d (every key; detail borrowed from the static "declared by the
 * backend descriptor"). */
void qr_cap_evidence_from_descriptor(struct qr_cap_evidence *ev, const struct qr_cap_descriptor *d);

/* The router may consider the backend: state ready or unknown (never disabled/unavailable). */
static inline bool qr_cap_descriptor_routable(const struct qr_cap_descriptor *d)
{
    return d->state == QR_CAP_BACKEND_READY || d->state == QR_CAP_BACKEND_UNKNOWN;
}

/* True when d lists format name (exact compare, e.g. "gguf"). */
bool qr_cap_descriptor_has_format(const struct qr_cap_descriptor *d, const char *name);

#endif
