/* Applying matched model policies to a request: the enforcement the 0.3 line never did. A pure
 * function of (request knobs, matched policies, experimental gate) that says, per knob, whether it
 * reaches the engine, which value, and - for what is kept off the fast path - why and what the
 * Runtime honours itself instead (counting tokens for num_predict, an admission limit for
 * num_ctx, scanning the output for stop). Nothing is mutated; the caller's backend encoder reads
 * the effective values. Rules: docs/POLICY.md "Application". */
#ifndef QR_POLICY_APPLY_H
#define QR_POLICY_APPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "contract/request.h"
#include "core/err.h"
#include "policy/policy.h"

/* The request knobs with a slot in struct qr_request, named as Ollama options name them. */
enum qr_knob {
    QR_KNOB_TEMPERATURE = 0,
    QR_KNOB_TOP_K,
    QR_KNOB_TOP_P,
    QR_KNOB_MIN_P,
    QR_KNOB_TYPICAL_P,
    QR_KNOB_REPEAT_PENALTY,
    QR_KNOB_REPEAT_LAST_N,
    QR_KNOB_PRESENCE_PENALTY,
    QR_KNOB_FREQUENCY_PENALTY,
    QR_KNOB_SEED,
    QR_KNOB_NUM_KEEP,
    QR_KNOB_STOP,
    QR_KNOB_NUM_PREDICT, /* max_tokens / max_completion_tokens too */
    QR_KNOB_NUM_CTX,     /* the requested context */
    QR_KNOB__COUNT
};

enum qr_knob_type { QR_KNOB_TYPE_F64, QR_KNOB_TYPE_I64, QR_KNOB_TYPE_STRS };

/* Static name ("temperature", "num_predict", ...). */
const char *qr_knob_name(enum qr_knob k);
enum qr_knob_type qr_knob_type(enum qr_knob k);

/* The knob a policy parameter name means (also "max_tokens" -> num_predict), or -1 for names
 * without a slot (Ollama options such as num_thread, num_gpu, num_batch: extra options). */
int qr_knob_find(const char *name);

enum qr_knob_action {
    QR_KNOB_FORWARD = 0,  /* the client's value reaches the engine */
    QR_KNOB_FILL = 1,     /* the client sent none; the policy's value reaches the engine */
    QR_KNOB_OVERRIDE = 2, /* the client's value was replaced by the policy's required value */
    QR_KNOB_STRIP = 3,    /* kept off the fast path: nothing reaches the engine */
};

/* What the Runtime does itself for a stripped knob. */
enum qr_honour {
    QR_HONOUR_NONE = 0,            /* dropped; nothing replaces it (seed, penalties, threads) */
    QR_HONOUR_COUNT_TOKENS = 1,    /* num_predict: the Runtime counts completion tokens and ends
                                      the answer with finish reason length */
    QR_HONOUR_ADMISSION_LIMIT = 2, /* num_ctx: an admission/scheduling limit; the backend keeps its
                                      native context */
    QR_HONOUR_STOP_SCAN = 3,       /* stop: the Runtime scans the output and ends at a match */
};

const char *qr_knob_action_str(enum qr_knob_action a); /* "forward","fill","override","strip" */
const char *qr_honour_str(enum qr_honour h); /* "none","count_tokens","admission_limit",... */

#define QR_POLICY_MAX_EXTRAS    64u /* extra options one request may carry through policy */
#define QR_POLICY_MAX_DECISIONS (QR_KNOB__COUNT + 2 * QR_POLICY_MAX_EXTRAS)

struct qr_knob_decision {
    const char *name;        /* borrowed: static, the request's option key, or the policy's */
    int knob;                /* enum qr_knob, or -1 for an extra option */
    enum qr_param_class cls; /* the deciding class (NONE when no policy matched) */
    enum qr_knob_action action;
    enum qr_honour honour;    /* for STRIP */
    bool client_set;          /* the client sent the knob */
    bool experimental;        /* forwarded only because the experimental gate is set */
    const char *policy_id;    /* borrowed from the policy set; NULL when no policy decided */
    yyjson_val *policy_value; /* FILL/OVERRIDE: the value that reaches the engine (borrowed) */
    const char *reason;       /* static text */
};

struct qr_policy_effective {
    /* what reaches the engine (FORWARD: the client's value; FILL/OVERRIDE: the policy's) */
    struct qr_sampling sampling;
    struct qr_opt_i64 max_tokens;  /* num_predict */
    struct qr_opt_i64 context_len; /* num_ctx */
    bool forward_stop;             /* the request's stop list reaches the engine */
    yyjson_val *stop_value;        /* a policy's stop value reaches the engine instead (borrowed) */
    bool extra_forward[QR_POLICY_MAX_EXTRAS]; /* per request extra option: reaches the engine */
    const char *renderer;                     /* from the first matched policy naming one */
    const char *parser;

    /* what the Runtime honours itself */
    struct qr_opt_i64 runtime_max_tokens; /* stop after this many completion tokens */
    struct qr_opt_i64 admission_context;  /* the requested context, as an admission limit */
    bool runtime_stop;                    /* apply the request's stop list to the output */
    bool context_over_limit;              /* the requested context exceeds context_limit */
    uint64_t context_limit;               /* requested_limit or native_max; 0 = none known */

    /* the policy's context decision, merged over the matched policies */
    struct qr_policy_context context;
    bool experimental_gate;

    const char *policy_ids[QR_POLICY_MAX_MATCH]; /* borrowed */
    size_t n_policies;
    struct qr_knob_decision decisions[QR_POLICY_MAX_DECISIONS]; /* knobs sent or filled */
    size_t n_decisions;
};

/* Apply the n matched policies (from qr_policy_match, at most QR_POLICY_MAX_MATCH; n == 0 means
 * no policy governs the request and everything is forwarded as sent) to req. out is caller
 * storage, fully overwritten; it borrows from req and from the policies. Fails only on a request
 * with more than QR_POLICY_MAX_EXTRAS extra options or too many policies. */
enum qr_err qr_policy_apply(const struct qr_request *req, const struct qr_policy *const *policies,
                            size_t n, bool experimental_gate, struct qr_policy_effective *out,
                            struct qr_diag *diag);

/* The decision for a knob name, or NULL when the request neither sent it nor got it filled. */
const struct qr_knob_decision *qr_policy_effective_find(const struct qr_policy_effective *e,
                                                        const char *name);

/* The application as JSON for a route plan: {"policies","experimental_gate","knobs":[{name,
 * class,action,reason,policy,honour,...}],"runtime":{...},"context":{...}}. Built in doc. */
yyjson_mut_val *qr_policy_effective_render(yyjson_mut_doc *doc,
                                           const struct qr_policy_effective *e);

#endif
