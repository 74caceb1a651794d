/* The router: for one request, pick the artifact x backend that serves a canonical model with
 * every required capability, deterministically, and explain the choice and every rejection.
 * Pipeline stage between capability/ (what is needed, what each candidate can do) and policy/
 * (what reaches the engine). Rules and field meanings: docs/ROUTER.md.
 *
 * Algorithm (qr_router_plan), in stages:
 *   1. Resolve the name through the registry (canonical id, alias, name:tag; never a literal
 *      compare). Not found -> QR_ROUTE_MODEL_NOT_FOUND.
 *   2. Required set = query.required, plus architecture.moe/.dense when the deployment profile
 *      demands an architecture class.
 *   3. Candidates = every artifact view of the model x every backend. An artifact's views are
 *      the artifact itself, its Ollama tag (artifacts[].ollama.tag) and its Hugging Face repo
 *      (artifacts[].huggingface.repo); roles "draft" and "projector" are not candidates. Each
 *      candidate passes the checks in this order; the first that fails is its reason: artifact
 *      kind (QR_ROUTE_REJ_KIND), URI served (QR_ROUTE_REJ_URI), backend state
 *      (QR_ROUTE_REJ_BACKEND_STATE), health (QR_ROUTE_REJ_UNHEALTHY), capabilities evaluated with
 *      qr_cap_evaluate_key over model/file/backend/conformance/ledger/policy evidence
 *      (QR_ROUTE_REJ_LEDGER, QR_ROUTE_REJ_POLICY, QR_ROUTE_REJ_CAPABILITY), strict verification
 *      (QR_ROUTE_REJ_UNVERIFIED), context (QR_ROUTE_REJ_CONTEXT).
 *   4. Order (documented, total): candidates in play (kind and URI match, state routable,
 *      healthy) first; backend state ready before unknown; verified (a conformance record
 *      verifies every required key on this candidate, whatever blocks it) before not; backend id;
 *      artifact URI; served name; artifact kind (byte order). The first candidate in play is the
 *      "first preference".
 *   5. The first candidate in order that passes every check wins. When it is not the first
 *      preference the plan discloses a fallback (the preference and why it lost); a fallback is
 *      taken only when opts.allow_fallback and not opts.strict, otherwise the plan is refused
 *      (QR_ROUTE_FALLBACK_REFUSED). A fallback is only ever another artifact/backend of the SAME
 *      canonical model: the canonical identity never changes.
 *   6. For the winner: matched policy ids, effective parameters (qr_policy_apply, when the query
 *      carries the request) and the context decision.
 *
 * Determinism: the plan depends only on the inputs' values, never on the order of the backends
 * array or of the conformance records; equal inputs render byte-identical JSON.
 *
 * Thread safety: qr_router_plan is pure over its inputs (reads only); any number of threads may
 * plan at once over shared, unchanging inputs. */
#ifndef QR_ROUTER_ROUTER_H
#define QR_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "capability/capability.h"
#include "capability/descriptor.h"
#include "core/err.h"
#include "policy/apply.h"
#include "policy/ledger.h"
#include "policy/policy.h"
#include "policy/profile.h"
#include "router/facts.h"

/* registry/registry.h is not included: its manifest bit names (QR_CAP_AUDIO, ...) clash with
 * capability.h's key names. A file that needs both includes router/with_registry.h. */
struct qr_registry;
struct qr_reg_model;
struct qr_request;

#define QR_ROUTE_API_VERSION  "v1alpha1"
#define QR_ROUTE_MAX_BACKENDS 256u  /* backends one plan considers (more: QR_ERR_TOO_LARGE) */
#define QR_ROUTE_MAX_VERIFIED 4096u /* conformance records */
#define QR_ROUTE_MAX_REFUTED  4096u /* engine evidence records */
#define QR_ROUTE_MAX_CONDS    16u   /* ledger conditions from the request + one backend's launch */

/* ---- inputs ---- */

/* Artifact classes (enum qr_route_art_class, router/facts.h): what kind of thing an artifact
 * is, derived from its backend, format, URI scheme and members (docs/ROUTER.md "Artifact kinds").
 */

/* "gguf" | "ollama" | "hf" | "openai" | "external" for one class bit; "unknown" otherwise. */
const char *qr_route_art_class_str(unsigned cls);

/* The classes a backend kind serves when qr_route_backend.serves is 0:
 *   llama.cpp -> GGUF; ollama-adapter -> OLLAMA; vllm, mlx -> HF;
 *   openai-compatible -> HF | OPENAI; external -> EXTERNAL. */
unsigned qr_route_kind_default_serves(enum qr_cap_backend_kind kind);

/* One backend the router may choose. Every pointer is borrowed and must outlive the plan. */
struct qr_route_backend {
    const struct qr_cap_descriptor *desc; /* id, kind, state, capabilities, context */
    const char *const *engine_versions;   /* every name of the running build ("b6123", "0.7.0");
                                             [0] is the one reported; none = unknown */
    size_t n_engine_versions;
    const char *project;     /* ledger project when the kind fronts several engines; NULL unknown */
    bool healthy;            /* the last health/readiness probe succeeded */
    unsigned serves;         /* enum qr_route_art_class bits; 0 = qr_route_kind_default_serves */
    const char *const *uris; /* exact artifact URIs it can serve (a managed llama-server's loaded
                                file, an Ollama daemon's tags); none = any of its classes */
    size_t n_uris;
    const char *const *conditions; /* launch conditions for the ledger ("reasoning_format=none",
                                      "mmproj=absent"); at most QR_ROUTE_MAX_CONDS / 2 */
    size_t n_conditions;
};

/* A conformance record: these keys were verified on exactly this backend id, canonical model,
 * engine version and hardware class (and artifact, when uri is set). Every string but
 * hardware_class must be set (NULL never matches), compared exactly; hardware classes match when
 * equal or both unknown (NULL or ""). Borrowed. */
struct qr_route_verified {
    const char *backend_id;
    const char *model_id;       /* canonical id */
    const char *artifact_uri;   /* NULL = every artifact of the model */
    const char *engine_version; /* one of the backend's engine_versions */
    const char *hardware_class;
    struct qr_cap_set keys; /* context.override here verifies forwarding a context size */
    const char *detail;     /* e.g. a conformance run id; NULL -> "conformance run" */
};

/* Engine evidence that refutes keys: the engine itself reported, for exactly this backend id,
 * canonical model and engine version (and the artifact now registered: the caller filters), that
 * it cannot serve them (llama.cpp /props: a chat template without tool syntax, no vision
 * modality). Evaluated as a failed conformance claim (rule 4: unsupported, whatever the manifest
 * or descriptor say), so a request needing the key is planned elsewhere or refused before any
 * engine is asked. Borrowed. */
struct qr_route_refuted {
    const char *backend_id;
    const char *model_id; /* canonical id */
    const char *engine_version;
    struct qr_cap_set keys;
    const char *detail; /* e.g. "engine /props (0.7.0): chat_template_caps.supports_tools false" */
};

struct qr_router_opts {
    bool strict;            /* verified-only (every required key verified) and no fallback */
    bool allow_fallback;    /* policy/profile permits another backend of the same model */
    bool experimental_gate; /* passed to qr_policy_apply */
    const struct qr_profile *profile; /* deployment profile or NULL; borrowed */
};

/* What a plan is computed over. Everything borrowed; NULL sets mean "none". */
struct qr_router_env {
    const struct qr_registry *registry; /* required */
    const struct qr_route_backend *backends;
    size_t n_backends;
    const char *hardware_class; /* the host's class; NULL unknown (ledger fails closed on it) */
    const struct qr_policy_set *policies;
    const struct qr_ledger *ledger;
    const struct qr_route_verified *verified;
    size_t n_verified;
    const struct qr_route_refuted *refuted;
    size_t n_refuted;
    struct qr_router_opts opts;
};

/* One routing question. Borrowed; strings NUL-terminated. */
struct qr_route_query {
    const char *model;                /* as the client named it: id, alias or name:tag */
    struct qr_cap_set required;       /* qr_cap_required(request) or a /v1/route body's list */
    uint64_t context;                 /* requested context in tokens; 0 = none */
    const struct qr_request *request; /* optional: policy application and ledger conditions */
    const char *const *conditions;    /* extra ledger conditions; the request's are derived */
    size_t n_conditions;
};

/* The required keys the model's own side rules out (its manifest or its file's architecture
 * contract says no), whatever backend would serve it: into out (at most QR_CAP__COUNT), each
 * with the manifest field that said it in why[i] (static); returns the count. 0 when the name
 * resolves to no model. */
size_t qr_route_model_rules_out(const struct qr_registry *reg, const char *model,
                                struct qr_cap_set required, enum qr_cap_key *out, const char **why);

/* Fill q from a decoded request: model, qr_cap_required(req), context_len, request. */
void qr_route_query_from_request(const struct qr_request *req, struct qr_route_query *q);

/* The ledger conditions a request implies (think=on|off, tools, stream,
 * parallel_tool_calls=false, tool_choice=function; never openai-endpoint, which is the
 * upstream's, not the client's protocol), static strings, at most
 * QR_ROUTE_MAX_CONDS / 2 written; returns the count. */
size_t qr_route_request_conditions(const struct qr_request *req,
                                   const char *out[QR_ROUTE_MAX_CONDS / 2]);

/* ---- output ---- */

enum qr_route_status {
    QR_ROUTE_OK = 0,
    QR_ROUTE_MODEL_NOT_FOUND = 1,  /* 404 model_not_found */
    QR_ROUTE_NO_COMPATIBLE = 2,    /* 422 no_compatible_backend */
    QR_ROUTE_CONTEXT_EXCEEDED = 3, /* 422 context_exceeded: a candidate failed only on it */
    QR_ROUTE_FALLBACK_REFUSED = 4, /* 422 fallback_refused: strict or fallback not allowed */
    QR_ROUTE_INVALID_QUERY = 5,    /* 400 invalid_route_request: empty model name */
};

const char *qr_route_status_code(enum qr_route_status s); /* "ok", "model_not_found", ... */
int qr_route_status_http(enum qr_route_status s);         /* 200, 404, 422, 400 */

/* Why a candidate was not chosen (QR_ROUTE_REJ_NONE: it is the winner). */
enum qr_route_reject {
    QR_ROUTE_REJ_NONE = 0,
    QR_ROUTE_REJ_KIND = 1,          /* the backend kind does not serve this artifact's class */
    QR_ROUTE_REJ_URI = 2,           /* the backend lists the URIs it serves; not this one */
    QR_ROUTE_REJ_BACKEND_STATE = 3, /* descriptor state disabled or unavailable */
    QR_ROUTE_REJ_UNHEALTHY = 4,     /* health/readiness probe failed */
    QR_ROUTE_REJ_LEDGER = 5,        /* a required key is blocked by the ledger (known bad) */
    QR_ROUTE_REJ_POLICY = 6,        /* a required key is blocked by a model/deployment policy */
    QR_ROUTE_REJ_CAPABILITY = 7,    /* a required key is not supported (unsupported/conditional/
                                       unknown, with the deciding rule) */
    QR_ROUTE_REJ_UNVERIFIED = 8,    /* strict mode: supported but not verified by conformance */
    QR_ROUTE_REJ_CONTEXT = 9,       /* the requested context cannot be served (refuse) */
    QR_ROUTE_REJ_OUTRANKED = 10,    /* compatible, but a candidate earlier in order won */
    QR_ROUTE_REJ_NO_FALLBACK = 11,  /* compatible, but not the first preference and fallback is
                                       not allowed (strict or policy) */
};

/* "kind_mismatch", "uri_not_served", "backend_unavailable", "backend_unhealthy",
 * "ledger_block", "policy_block", "capability", "unverified", "context", "outranked",
 * "fallback_not_allowed"; "chosen" for NONE. Static. */
const char *qr_route_reject_str(enum qr_route_reject r);

/* One required key a candidate does not satisfy. */
struct qr_route_key_failure {
    struct qr_cap_eval eval;             /* state, rule and every reason (details borrowed from
                                            the inputs or static) */
    const struct qr_ledger_block *block; /* the first ledger block hit, or NULL */
    const struct qr_ledger_entry *entry; /* a `blocked` ledger entry hit, or NULL */
    bool certain;                        /* false: hit only because a fact is unknown */
    const struct qr_ledger_entry *alternative; /* the ledger's tested alternative, or NULL */
};

enum qr_route_ctx_action {
    QR_ROUTE_CTX_NONE = 0,      /* no context requested: the backend's own policy */
    QR_ROUTE_CTX_FORWARD = 1,   /* the size reaches the engine (override verified for this exact
                                   backend/model/version/hardware) */
    QR_ROUTE_CTX_ADMISSION = 2, /* an admission/scheduling limit; the backend keeps its context */
    QR_ROUTE_CTX_REFUSE = 3,    /* requested above what this candidate can serve */
};

const char *qr_route_ctx_action_str(enum qr_route_ctx_action a); /* "none","forward",... */

struct qr_route_context {
    uint64_t requested;            /* 0 = none */
    uint64_t native_max;           /* model's native maximum, 0 = unknown */
    const char *native_max_source; /* static: "model.context_policy.native_max",
                                      "model.architecture_contract.context_length",
                                      "model.context_window", or NULL */
    uint64_t backend_max;          /* descriptor native_max (the backend's loaded context), 0 */
    bool backend_managed;          /* descriptor context.backend_managed */
    bool override_supported;       /* descriptor context.override_supported == supported */
    bool override_verified;        /* verified for this exact candidate (conformance record or a
                                      matched policy saying override_verified) */
    enum qr_route_ctx_action action;
    uint64_t limit;     /* FORWARD: the size sent; ADMISSION: the admission limit */
    const char *reason; /* static one line */
};

/* One artifact x backend pair, with its verdict. */
struct qr_route_candidate {
    const struct qr_route_backend *backend; /* borrowed from env.backends */
    size_t backend_index;                   /* index into env.backends */
    const char *artifact_uri;               /* borrowed from the registry */
    const char *served_name;   /* what the backend is asked for: the Ollama tag, the HF repo, the
                                  openai: model id, else the URI; borrowed */
    const char *artifact_role; /* borrowed; NULL when the manifest states none */
    unsigned art_class;        /* one enum qr_route_art_class bit */
    bool in_play;              /* kind, URI, state and health checks passed */
    bool verified; /* every required key has a conformance verification on this candidate (the
                      sort key; a ledger/policy block still rejects it) */
    enum qr_route_reject reason;
    const char *detail;                    /* static one line for the reason */
    struct qr_cap_set missing;             /* LEDGER/POLICY/CAPABILITY/UNVERIFIED: the keys */
    struct qr_route_key_failure *failures; /* one per missing key, canonical-name order; owned
                                              by the plan */
    size_t n_failures;
    struct qr_route_context context; /* evaluated for candidates in play */
};

struct qr_route_fallback {
    bool used;        /* the chosen candidate is not the first preference */
    bool allowed;     /* opts.allow_fallback && !opts.strict */
    size_t preferred; /* index in candidates of the first preference; SIZE_MAX when none */
    enum qr_route_reject preferred_reason; /* why the first preference lost */
    const char *ledger_alternative_kind;   /* a ledger block's tested alternative kind, or NULL */
};

/* Caller storage: qr_router_plan fills it (always, also on refusal: the candidates explain it);
 * release with qr_route_plan_cleanup. Strings are borrowed from the query, env and registry. */
struct qr_route_plan {
    enum qr_route_status status;
    const char *requested_identifier;
    const struct qr_reg_model *model; /* NULL when not found */
    const char *canonical_model_id;   /* NULL when not found */
    const char *model_family;         /* manifest model.architecture */
    const char *model_variant;        /* manifest model.parameter_class */
    const char *hardware_class;
    bool strict;
    struct qr_cap_set required;
    struct qr_cap_set missing; /* refusal: the keys that made some in-play candidate fail */

    /* the winner (status OK); chosen indexes candidates, SIZE_MAX when none */
    size_t chosen;
    const char *backend_id;
    enum qr_cap_backend_kind backend_kind;
    const char *engine_version; /* NULL when unknown */
    const char *artifact_uri;
    const char *served_name;                 /* see qr_route_candidate.served_name */
    struct qr_cap_eval evals[QR_CAP__COUNT]; /* the winner's evaluation of each required key, in
                                                canonical-name order */
    size_t n_evals;
    const struct qr_policy *policies[QR_POLICY_MAX_MATCH]; /* matched for the winner, id order */
    size_t n_policies;
    struct qr_policy_effective *effective; /* owned; NULL unless the query carried a request */
    struct qr_route_context context;
    struct qr_route_fallback fallback;

    struct qr_route_candidate *candidates; /* owned; every pair, in the documented order */
    size_t n_candidates;
    struct qr_route_key_failure *failure_pool; /* owned storage behind candidates[].failures */
};

/* Compute a plan. Returns QR_OK when a candidate was chosen; QR_ERR_NOT_FOUND (model not found),
 * QR_ERR_INVALID (empty name, or refused: no compatible backend, context, fallback not allowed)
 * with diag naming the model and the missing capabilities; QR_ERR_TOO_LARGE beyond the caps;
 * QR_ERR_NOMEM. On every return but NOMEM/TOO_LARGE out->status says what happened and
 * out->candidates explains it. out is caller storage, fully overwritten; call
 * qr_route_plan_cleanup after any return. */
enum qr_err qr_router_plan(const struct qr_router_env *env, const struct qr_route_query *q,
                           struct qr_route_plan *out, struct qr_diag *diag);

void qr_route_plan_cleanup(struct qr_route_plan *p);

/* ---- JSON (router_json.c) ---- */

/* The plan object: the predecessor's fields (requested_identifier, canonical_model_id,
 * backend_id, backend_kind, artifact_uri, required_capabilities, context, model_policy_ids) plus
 * status, engine_version, hardware_class, strict, capabilities (explain per required key),
 * effective_parameters, context_decision, fallback, rejected[] (every other candidate with
 * reason, detail and failures). For a refusal the winner's fields are absent and
 * missing_capabilities is present. Built in doc; NULL on NOMEM. */
yyjson_mut_val *qr_route_plan_render(yyjson_mut_doc *doc, const struct qr_route_plan *p);

/* The /v1/route 200 body {"api_version":"v1alpha1","plan":{...}}; for a refusal
 * {"api_version","error":{"code","message"},"plan":{...}} (message as qr_router_plan's diag).
 * Owned by the caller (yyjson_mut_doc_free); NULL on NOMEM. */
yyjson_mut_doc *qr_route_render(const struct qr_route_plan *p);

/* qr_route_render written as compact JSON (malloc'ed, NUL-terminated; caller frees); NULL on
 * NOMEM. Equal plans give equal bytes. */
char *qr_route_write(const struct qr_route_plan *p, size_t *len);

/* The one-line refusal message ("no compatible backend for model 'x': missing 'tools.calling'")
 * into diag; empty for QR_ROUTE_OK. */
void qr_route_plan_message(const struct qr_route_plan *p, struct qr_diag *diag);

#endif
