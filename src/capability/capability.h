/* Capability contract quantum.runtime/backend/v1alpha1: the generic keys, their four states, the
 * evidence about one routing candidate and the pure evaluation of every key's effective state
 * with its reasons, the capabilities a canonical request requires, and the JSON that explains an
 * evaluation. The backend descriptor codec lives in capability/descriptor.h.
 *
 * Area prefix: qr_cap_. Everything here is pure (no I/O, no globals written), deterministic and
 * allocation-free, except the *_to_json functions, which allocate inside the caller's yyjson
 * document. docs/CAPABILITIES.md explains the design.
 *
 * ## Keys
 *
 * The 28 keys of DESIGN.md, one enum value each, described by one table (qr_cap_info). 24 of
 * them are the Go predecessor's declared names; the predecessor's descriptor JSON spells four of
 * them differently, and those field names are accepted as aliases:
 *   text -> inference.text, reasoning_control -> reasoning.control,
 *   context.override_supported -> context.override, quantization_formats -> quantization.formats.
 * Any other name is "not a key" (QR_CAP_NOT_A_KEY); callers fail closed on it. Hyphenated list
 * spellings ("reasoning-control") and manifest booleans ("thinking") are deliberately NOT keys.
 *
 * ## States
 *
 * "supported", "unsupported", "conditional", "unknown" (exact strings). Only an effective
 * "supported" satisfies a requirement; "unknown" and "conditional" never do. QR_CAP_UNKNOWN is 0,
 * so zeroed memory means "unknown", never "supported".
 *
 * ## Evaluation rules (qr_cap_evaluate), per key, first match wins
 *
 * The evidence has six sources, each with at most one claim per key: model (the manifest
 * declares), file (the GGUF architecture contract proves), backend (the descriptor of this
 * engine version declares), conformance (a conformance run on this exact candidate), ledger
 * (a known-bad block) and policy (a model/deployment policy block). The "model side" is model and
 * file merged: unsupported if either says unsupported (a contradiction fails closed), else
 * supported if either says supported, else conditional if either says so, else unknown.
 *
 *   1. A ledger block            -> unsupported (fail closed, whatever else says).
 *   2. A policy block            -> unsupported.
 *   3. Backend unsupported       -> unsupported.
 *   4. Conformance unsupported   -> unsupported (the run failed on this exact candidate).
 *   5. Keys the model bears on (qr_cap_info.model_side), model side unsupported -> unsupported.
 *   6. Backend supported         -> supported (a descriptor says "supported" only for what the
 *      engine does for any model; model-dependent features must be declared "conditional").
 *      Model-bearing keys with a model side of "conditional" -> conditional.
 *   7. Backend conditional on a model-bearing key is resolved by the model side: supported ->
 *      supported, conditional -> conditional, unknown -> unknown. Conditional is never treated
 *      like supported (weak spot §6.2.3 of the predecessor).
 *   8. Backend conditional on a key the model side does not bear on (streaming.content,
 *      placement.*, cache.*, ...) stays conditional: its condition lies outside this evidence,
 *      and it does not satisfy a requirement. Model-side claims on such keys are not consulted.
 *   9. Backend unknown or silent -> unknown (model-bearing keys: also when the model supports).
 *  10. Conformance supported ("verified") turns a conditional or unknown result of rules 6-9
 *      into supported (it was observed working on this exact candidate) and sets the verified
 *      flag of a supported result; it never overrides rules 1-5. Strict callers require
 *      verified (qr_cap_eval_satisfies(e, true)).
 *
 * Every claim that was made is recorded as a reason (source, the state it gives, detail) in
 * source order, and the rule that decided is named, so an explanation is always complete. The
 * ledger's "enabled capabilities" lists are not evidence of support (weak spot §6.2.10): only
 * conformance is.
 *
 * ## Request -> required capabilities (qr_cap_required)
 *
 *   op chat or completion                      -> inference.text
 *   op embed                                   -> embeddings (and not inference.text)
 *   op rerank                                  -> reranking (and not inference.text)
 *   tools present and tool_choice not "none",
 *   or tool_choice required/function           -> tools.calling
 *   history with assistant tool_calls or tool
 *   results (the template must render them)    -> tools.calling
 *   stream + tools that may be called          -> tools.streaming, streaming.tool_arguments
 *   think sent (on, off or a level)            -> reasoning.control
 *   stream + think on or a level               -> streaming.reasoning
 *   format json or JSON schema                 -> structured_output
 *   an image part (messages or generate
 *   "images")                                  -> multimodal.vision
 *   an audio part                              -> multimodal.audio
 *   stream on a generating op                  -> streaming.content
 * Not mapped, on purpose: context_len (an admission limit the policy decides, never a hard
 * requirement), sampling, stop, max_tokens, keep_alive, logprobs, suffix, raw, n_choices,
 * parallel_tool_calls, earlier-turn reasoning text, dimensions/encoding (no key says anything
 * about them; the backend codecs refuse what they cannot carry), top_n and return_documents
 * (the client encoder applies them). */
#ifndef QR_CAPABILITY_CAPABILITY_H
#define QR_CAPABILITY_CAPABILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"

struct qr_request;
struct yyjson_mut_doc;
struct yyjson_mut_val;

/* ---- keys ---- */

enum qr_cap_key {
    QR_CAP_NOT_A_KEY = -1, /* a name that is not a key: callers fail closed */
    QR_CAP_INFERENCE_TEXT = 0,
    QR_CAP_ARCH_DENSE,
    QR_CAP_ARCH_MOE,
    QR_CAP_MOE_TOTAL_EXPERTS,
    QR_CAP_MOE_ACTIVE_EXPERTS,
    QR_CAP_MOE_SHARED_EXPERTS,
    QR_CAP_MOE_EXPERT_OFFLOAD,
    QR_CAP_MOE_EXPERT_PARALLEL,
    QR_CAP_QUANT_FORMATS,
    QR_CAP_SPEC_MTP,
    QR_CAP_SPEC_DRAFT_MODEL,
    QR_CAP_CACHE_KV_OFFLOAD,
    QR_CAP_CACHE_PROMPT_CACHE,
    QR_CAP_VISION,
    QR_CAP_AUDIO,
    QR_CAP_EMBEDDINGS,
    QR_CAP_RERANKING,
    QR_CAP_REASONING_CONTROL,
    QR_CAP_TOOLS_CALLING,
    QR_CAP_TOOLS_STREAMING,
    QR_CAP_STRUCTURED_OUTPUT,
    QR_CAP_STREAM_CONTENT,
    QR_CAP_STREAM_REASONING,
    QR_CAP_STREAM_TOOL_ARGS,
    QR_CAP_PLACE_CPU,
    QR_CAP_PLACE_GPU,
    QR_CAP_PLACE_HYBRID,
    QR_CAP_CONTEXT_OVERRIDE,
    QR_CAP__COUNT /* 28 */
};

/* Where a key lives in a v1alpha1 descriptor's "capabilities" object. */
enum qr_cap_field_kind {
    QR_CAP_FIELD_STATE = 0,   /* a flat member "<field>": "<state>" (required for legacy keys) */
    QR_CAP_FIELD_LIST = 1,    /* quantization_formats: a string list, omitted when empty */
    QR_CAP_FIELD_CONTEXT = 2, /* context.override_supported: capabilities.context member */
};

/* One row of the key table. All strings static. */
struct qr_cap_info {
    enum qr_cap_key key;
    const char *name;  /* canonical (route) name, e.g. "reasoning.control" */
    const char *field; /* descriptor JSON field name, e.g. "reasoning_control"; often == name */
    enum qr_cap_field_kind field_kind;
    bool legacy;     /* one of the predecessor's 24 declared names (required in a descriptor) */
    bool model_side; /* the model/artifact bears on it (rules 5-9) */
    const char *summary;
};

/* The table row of key; NULL for QR_CAP_NOT_A_KEY or out of range. */
const struct qr_cap_info *qr_cap_info(enum qr_cap_key key);

/* Canonical name of key ("inference.text"); "not-a-key" when out of range. Static. */
const char *qr_cap_key_name(enum qr_cap_key key);

/* Canonical names only. Exact, case-sensitive; anything else -> QR_CAP_NOT_A_KEY. */
enum qr_cap_key qr_cap_key_parse(struct qr_slice name);

/* Descriptor JSON field names only ("text", "reasoning_control", "context.override_supported",
 * "quantization_formats", and the names that equal the canonical ones). */
enum qr_cap_key qr_cap_key_parse_field(struct qr_slice name);

/* Canonical names and descriptor field names (the aliases). */
enum qr_cap_key qr_cap_key_parse_any(struct qr_slice name);

/* ---- key sets ("required capabilities") ---- */

struct qr_cap_set {
    uint64_t bits; /* bit k = key k; bits >= QR_CAP__COUNT are never set */
};

#define QR_CAP_SET_EMPTY ((struct qr_cap_set){0})

static inline bool qr_cap_valid(enum qr_cap_key k)
{
    return (int) k >= 0 && (int) k < QR_CAP__COUNT;
}

/* Add k (ignored when not a key). */
static inline void qr_cap_set_add(struct qr_cap_set *s, enum qr_cap_key k)
{
    if (qr_cap_valid(k))
        s->bits |= UINT64_C(1) << (unsigned) k;
}

static inline void qr_cap_set_remove(struct qr_cap_set *s, enum qr_cap_key k)
{
    if (qr_cap_valid(k))
        s->bits &= ~(UINT64_C(1) << (unsigned) k);
}

static inline bool qr_cap_set_has(struct qr_cap_set s, enum qr_cap_key k)
{
    return qr_cap_valid(k) && (s.bits >> (unsigned) k) & 1u;
}

static inline bool qr_cap_set_empty(struct qr_cap_set s)
{
    return s.bits == 0;
}

static inline struct qr_cap_set qr_cap_set_union(struct qr_cap_set a, struct qr_cap_set b)
{
    return (struct qr_cap_set){a.bits | b.bits};
}

/* Keys in a and not in b. */
static inline struct qr_cap_set qr_cap_set_minus(struct qr_cap_set a, struct qr_cap_set b)
{
    return (struct qr_cap_set){a.bits & ~b.bits};
}

size_t qr_cap_set_count(struct qr_cap_set s);

/* The keys of s in canonical-name (byte) order, the order every listing uses; returns the count
 * (<= QR_CAP__COUNT). out must hold QR_CAP__COUNT entries. */
size_t qr_cap_set_sorted(struct qr_cap_set s, enum qr_cap_key out[QR_CAP__COUNT]);

/* Parse a list of capability names (a /v1/route body, a profile's requirements) into *out.
 * Canonical names and aliases; duplicates fold; an empty name or a name that is not a key fails
 * with QR_ERR_INVALID and "unknown capability 'x'" (fail closed). n is capped at 256. */
enum qr_err qr_cap_set_parse(const struct qr_slice *names, size_t n, struct qr_diag *diag,
                             struct qr_cap_set *out);

/* ---- states ---- */

enum qr_cap_state {
    QR_CAP_UNKNOWN = 0, /* zero: nothing known never reads as supported */
    QR_CAP_SUPPORTED = 1,
    QR_CAP_UNSUPPORTED = 2,
    QR_CAP_CONDITIONAL = 3,
};

/* "supported" | "unsupported" | "conditional" | "unknown"; "unknown" when out of range. */
const char *qr_cap_state_str(enum qr_cap_state s);

/* Exact strings only. QR_ERR_INVALID for anything else (out untouched). */
enum qr_err qr_cap_state_parse(struct qr_slice s, enum qr_cap_state *out);

/* ---- evidence about one candidate (model, artifact, backend, engine version, host) ---- */

enum qr_cap_source {
    QR_CAP_SRC_MODEL = 0,       /* the model manifest declares */
    QR_CAP_SRC_FILE = 1,        /* the artifact file proves (GGUF architecture contract) */
    QR_CAP_SRC_BACKEND = 2,     /* the backend declares, for this engine version */
    QR_CAP_SRC_CONFORMANCE = 3, /* a conformance run on this candidate verified (or failed) */
    QR_CAP_SRC_LEDGER = 4,      /* the upstream ledger blocks (known bad) */
    QR_CAP_SRC_POLICY = 5,      /* a model/deployment policy blocks */
    QR_CAP_SRC__COUNT
};

/* "model" | "file" | "backend" | "conformance" | "ledger" | "policy". Static. */
const char *qr_cap_source_str(enum qr_cap_source s);

/* What one source says about one key. */
struct qr_cap_claim {
    bool set;                /* false: this source says nothing about the key */
    enum qr_cap_state state; /* ledger/policy claims are blocks: always read as unsupported */
    const char *detail;      /* borrowed, NUL-terminated, may be NULL; must outlive the results */
};

/* Caller storage; zero it with qr_cap_evidence_init. About 4 KiB. */
struct qr_cap_evidence {
    struct qr_cap_claim claims[QR_CAP_SRC__COUNT][QR_CAP__COUNT];
};

/* Nothing claimed: every key evaluates to unknown. */
void qr_cap_evidence_init(struct qr_cap_evidence *ev);

/* Record src's claim on key (replaces an earlier one). detail is borrowed. Ignored when key or
 * src is out of range or state is not one of the four. */
void qr_cap_evidence_set(struct qr_cap_evidence *ev, enum qr_cap_source src, enum qr_cap_key key,
                         enum qr_cap_state state, const char *detail);

/* Shorthands: conformance verified key (supported), and a ledger/policy block with its reason. */
void qr_cap_evidence_verify(struct qr_cap_evidence *ev, enum qr_cap_key key, const char *detail);
void qr_cap_evidence_block(struct qr_cap_evidence *ev, enum qr_cap_source src, enum qr_cap_key key,
                           const char *reason);

/* ---- evaluation ---- */

struct qr_cap_reason {
    enum qr_cap_source source;
    enum qr_cap_state state; /* what this source gives (blocks: unsupported) */
    const char *detail;      /* borrowed from the evidence or static; never NULL ("" if none) */
};

struct qr_cap_eval {
    enum qr_cap_key key;
    enum qr_cap_state state; /* effective state */
    bool verified;           /* supported and verified by conformance on this candidate */
    const char *rule;        /* static: the rule that decided, e.g. "blocked by the ledger" */
    struct qr_cap_reason reasons[QR_CAP_SRC__COUNT]; /* every claim made, in source order */
    size_t n_reasons;
};

struct qr_cap_result {
    struct qr_cap_eval keys[QR_CAP__COUNT]; /* indexed by key */
};

/* Effective state of one key under the rules above. Pure and deterministic. key must be a key
 * (anything else is a caller bug: debug builds abort, release builds give unknown). */
void qr_cap_evaluate_key(const struct qr_cap_evidence *ev, enum qr_cap_key key,
                         struct qr_cap_eval *out);

/* Every key. out's reasons borrow ev's details: keep ev (and its strings) alive while out is
 * used. */
void qr_cap_evaluate(const struct qr_cap_evidence *ev, struct qr_cap_result *out);

/* True when e satisfies a requirement: supported, and verified too when strict. */
static inline bool qr_cap_eval_satisfies(const struct qr_cap_eval *e, bool strict)
{
    return e->state == QR_CAP_SUPPORTED && (!strict || e->verified);
}

/* Keys of required that res does not satisfy go into *out_missing (may be NULL); true when none.
 */
bool qr_cap_result_satisfies(const struct qr_cap_result *res, struct qr_cap_set required,
                             bool strict, struct qr_cap_set *out_missing);

/* The same check evaluating only the required keys (the router's hot path). */
bool qr_cap_evidence_satisfies(const struct qr_cap_evidence *ev, struct qr_cap_set required,
                               bool strict, struct qr_cap_set *out_missing);

/* ---- request -> required capabilities ---- */

/* The capabilities req requires (the mapping table above). req is borrowed. */
struct qr_cap_set qr_cap_required(const struct qr_request *req);

/* Endpoint families, for what a route alone requires. */
enum qr_cap_endpoint {
    QR_CAP_EP_CHAT = 0,
    QR_CAP_EP_COMPLETION = 1,
    QR_CAP_EP_EMBED = 2,
    QR_CAP_EP_RERANK = 3,
};

/* chat/completion -> inference.text, embed -> embeddings, rerank -> reranking; else empty. */
struct qr_cap_set qr_cap_required_for_endpoint(enum qr_cap_endpoint ep);

/* ---- explain (JSON for the router/plan endpoints) ---- */

/* {"key","state","verified","rule","reasons":[{"source","state","detail"}]}; strings copied into
 * doc. NULL only when doc is out of memory. */
struct yyjson_mut_val *qr_cap_eval_to_json(const struct qr_cap_eval *e, struct yyjson_mut_doc *doc);

/* Array of evaluations for the keys of only (every key when only is NULL), in canonical-name
 * order. NULL when doc is out of memory. */
struct yyjson_mut_val *qr_cap_result_to_json(const struct qr_cap_result *res,
                                             const struct qr_cap_set *only,
                                             struct yyjson_mut_doc *doc);

/* Array of the canonical names of s, sorted (the predecessor's required_capabilities shape). */
struct yyjson_mut_val *qr_cap_set_to_json(struct qr_cap_set s, struct yyjson_mut_doc *doc);

#endif
