/* Model policies, schema quantum.runtime/model-policy/v1alpha1: for one model family on one
 * backend kind (optionally only some engine versions) on one hardware class, which request knobs
 * are required / known-good / optional / known-bad / unverified, and how the context size is
 * governed. Policies are data (the JSON files under data/policies/, compiled in; more from registry
 * directories). This header covers loading, validation, matching and rendering; applying the
 * matched policies to a request is policy/apply.h. Rules: docs/POLICY.md.
 *
 * Ownership: a qr_policy_set owns its policies and the parsed documents their strings point into;
 * every pointer handed out by the functions below is borrowed from the set and lives until
 * qr_policy_set_free. */
#ifndef QR_POLICY_POLICY_H
#define QR_POLICY_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"

#define QR_POLICY_SCHEMA     "quantum.runtime/model-policy/v1alpha1"
#define QR_POLICY_MAX        256u /* policies in one set */
#define QR_POLICY_MAX_PARAMS 64u  /* parameters of one policy */
#define QR_POLICY_MAX_MATCH  8u   /* policies one request may match */

/* Parameter classes, ordered from the least to the most restrictive (the order decides when
 * several matched policies classify one knob differently: the most restrictive wins). */
enum qr_param_class {
    QR_PARAM_NONE = 0,       /* no matched policy: nothing classifies the knob */
    QR_PARAM_OPTIONAL = 1,   /* allowed, forwarded as sent; not part of any verified profile */
    QR_PARAM_KNOWN_GOOD = 2, /* verified; forwarded; the policy value may fill in */
    QR_PARAM_REQUIRED = 3,   /* the policy's value always reaches the engine */
    QR_PARAM_UNVERIFIED = 4, /* kept off the fast path unless the experimental gate is set */
    QR_PARAM_KNOWN_BAD = 5,  /* never forwarded, not even with the experimental gate */
};

/* "required", "known-good", "optional", "known-bad", "unverified" ("none" for NONE). */
const char *qr_param_class_str(enum qr_param_class c);

struct qr_policy_param {
    const char *name;        /* knob name, Ollama option spelling ("num_ctx", "top_k") */
    enum qr_param_class cls; /* "blocked-unverified" (the 0.3 spelling) loads as UNVERIFIED */
    bool legacy_blocked;     /* the file said "blocked-unverified" */
    yyjson_val *value;       /* the policy's value (any JSON); NULL when absent */
    const char *note;        /* NULL when absent */
};

struct qr_policy_context {
    bool backend_managed;    /* the backend picks the context size itself */
    bool override_supported; /* the backend accepts a per-request context size */
    bool override_verified;  /* ... and it was verified for this exact match (needs supported) */
    bool has_native_max;
    uint64_t native_max; /* the model's native maximum context, tokens */
    bool has_requested_limit;
    uint64_t requested_limit; /* the largest context a request may ask for, tokens */
};

struct qr_policy {
    const char *id;
    const char *model_family;
    const char **variants; /* non-empty; "*" matches any variant */
    size_t n_variants;
    const char **unclassified_variants; /* variants the policy explicitly does NOT cover */
    size_t n_unclassified;
    const char *backend_kind;
    const char **engine_versions; /* version constraints (policy/version.h); none = any */
    size_t n_engine_versions;
    const char *hardware_class; /* "*" or "any" = every host; otherwise exactly this class */
    const char *renderer;       /* NULL when absent */
    const char *parser;         /* NULL when absent */
    struct qr_policy_context context;
    struct qr_policy_param *params;
    size_t n_params;
    enum qr_param_class unlisted; /* class of knobs the policy does not name (UNVERIFIED default) */
    bool fill_known_good;         /* fill known-good values into requests that did not set them */
    const char *observed_date;    /* YYYY-MM-DD */
    const char **sources;         /* >= 1 */
    size_t n_sources;
    const char *notes; /* NULL when absent */
    const char *file;  /* where it was loaded from */
};

struct qr_policy_set;

/* An empty set (owned by the caller). */
enum qr_err qr_policy_set_new(struct qr_policy_set **out);
void qr_policy_set_free(struct qr_policy_set *s);

/* Parse, validate and add one policy file. name is borrowed, used in messages and kept as
 * `file`, so it must outlive the set (builtin paths do); json is copied. Unknown fields, trailing
 * JSON, bad classes and duplicate ids are rejected with the JSON path in diag; on error the set is
 * unchanged. */
enum qr_err qr_policy_set_add(struct qr_policy_set *s, const char *name, const char *json,
                              size_t len, struct qr_diag *diag);

/* A set with every builtin policy (data/policies/). */
enum qr_err qr_policy_set_load_builtin(struct qr_policy_set **out, struct qr_diag *diag);

/* Policies in id order. */
size_t qr_policy_set_count(const struct qr_policy_set *s);
const struct qr_policy *qr_policy_set_at(const struct qr_policy_set *s, size_t i);
const struct qr_policy *qr_policy_set_find(const struct qr_policy_set *s, const char *id);

/* Where a request would run: all strings borrowed. An unknown variant or hardware class (NULL)
 * matches only policies that say "*"; unknown engine versions match only policies without an
 * engine_versions constraint. */
struct qr_policy_target {
    const char *model_family;
    const char *variant;
    const char *backend_kind;
    const char *const *engine_versions; /* every name of the running build, e.g. "0.7.0","b11669" */
    size_t n_engine_versions;
    const char *hardware_class; /* the host's class, from the caller */
};

bool qr_policy_matches(const struct qr_policy *p, const struct qr_policy_target *t);

/* The matching policies in id order, at most max of them written to out; returns how many match
 * in all (which may exceed max). */
size_t qr_policy_match(const struct qr_policy_set *s, const struct qr_policy_target *t,
                       const struct qr_policy **out, size_t max);

/* One policy as JSON (the file's shape, classes in canonical spelling), built in doc. */
yyjson_mut_val *qr_policy_render(yyjson_mut_doc *doc, const struct qr_policy *p);

/* The /v1/model-policies body: {"api_version","schema_version","count","policies":[...]}.
 * Owned by the caller (yyjson_mut_doc_free); NULL when out of memory. */
yyjson_mut_doc *qr_policy_set_render(const struct qr_policy_set *s);

#endif
